//! The DDP reducer over gradients the reducer owns (one element type).
use std::ptr::{self, NonNull};

use distc_sys as sys;

use crate::element::{host_tensor, Element, INT};
use crate::error::{check, Error, Result};
use crate::future::{bucket_hook, release_hook, Bucket, Future};
use crate::group::ProcessGroup;

/// Options of a [`Reducer`]; `Default` gives c10d's (1 MiB first bucket, 25 MiB after).
#[derive(Debug, Clone, Default)]
pub struct ReducerOptions {
    pub bucket_cap_bytes: u64,
    pub first_bucket_bytes: u64,
    /// Explicit buckets: the bucket of each gradient.
    pub bucket_of: Option<Vec<i32>>,
    pub find_unused_parameters: bool,
    /// Gradients live in their buckets: nothing is copied in or out.
    pub gradient_as_bucket_view: bool,
    /// Per gradient: its gradients are sparse rows (an embedding's), marked with
    /// [`Reducer::mark_ready_sparse`] and read with [`Reducer::sparse_grad`].
    pub expect_sparse: Option<Vec<bool>>,
    /// Every iteration uses the same gradients (c10d's `static_graph`): the
    /// first one finds the unused ones, later ones mark them at prepare.
    pub static_graph: bool,
}

/// PowerSGD's settings, torch's `PowerSGDState` names; `Default` gives torch's defaults.
#[derive(Debug, Clone)]
pub struct PowerSgdOptions {
    pub matrix_approximation_rank: i32,
    pub start_powersgd_iter: i64,
    pub min_compression_rate: f64,
    pub use_error_feedback: bool,
    pub warm_start: bool,
    pub orthogonalization_epsilon: f64,
    pub random_seed: u64,
}

impl Default for PowerSgdOptions {
    fn default() -> Self {
        PowerSgdOptions {
            matrix_approximation_rank: 1,
            start_powersgd_iter: 1000,
            min_compression_rate: 2.0,
            use_error_feedback: true,
            warm_start: true,
            orthogonalization_epsilon: 0.0,
            random_seed: 0,
        }
    }
}

/// c10d's Reducer. It owns the gradient buffers: write gradient `i` through
/// [`grad_mut`](Reducer::grad_mut), then [`mark_ready`](Reducer::mark_ready);
/// after [`finalize`](Reducer::finalize) [`grad`](Reducer::grad) holds the average over ranks.
pub struct Reducer<T: Element> {
    raw: NonNull<sys::distc_reducer>,
    grads: Vec<Vec<T>>,
    views: Option<Vec<(*mut T, usize)>>,
    rows: Vec<Option<usize>>, // sparse gradients: elements per row
    // With views, a gradient's memory is its bucket's, which the library may be
    // reducing from the moment the gradient is ready until finalize returns:
    // `busy` gradients are not handed out then (grad, grad_mut panic).
    busy: Vec<bool>,
    marked: Vec<bool>, // by mark_ready in this iteration
    // static_graph: what the first iteration did not mark, which the library
    // marks ready itself at every later prepare.
    static_graph: bool,
    static_unused: Option<Vec<usize>>,
}

unsafe impl<T: Element> Send for Reducer<T> {}

impl<T: Element + Default> Reducer<T> {
    /// A reducer over gradients of the given lengths (every rank passes the same).
    /// Sparse gradients (opts.expect_sparse) are one row long unless given with
    /// [`Reducer::new_with_rows`].
    pub fn new(pg: &ProcessGroup, lens: &[usize], opts: &ReducerOptions) -> Result<Reducer<T>> {
        let shapes: Vec<(usize, usize)> = lens.iter().map(|&n| (n, 1)).collect();
        Reducer::new_with_rows(pg, &shapes, opts)
    }

    /// As `new`, each gradient given as (rows, elements per row): the shape sparse gradients need.
    pub fn new_with_rows(pg: &ProcessGroup, shapes: &[(usize, usize)], opts: &ReducerOptions) -> Result<Reducer<T>> {
        let lens: Vec<usize> = shapes.iter().map(|&(r, c)| r * c).collect();
        let lens = &lens[..];
        if lens.is_empty() {
            return Err(Error::invalid("Reducer::new: no gradients"));
        }
        let mut grads: Vec<Vec<T>> = lens.iter().map(|&n| vec![T::default(); n]).collect();
        let mut o: sys::distc_reducer_options = unsafe { std::mem::zeroed() };
        check(unsafe { sys::distc_reducer_options_init(&mut o, sys::DISTC_REDUCER_OPTIONS_VERSION) })?;
        o.bucket_cap_bytes = opts.bucket_cap_bytes;
        o.first_bucket_bytes = opts.first_bucket_bytes;
        o.find_unused_parameters = opts.find_unused_parameters as i32;
        o.gradient_as_bucket_view = opts.gradient_as_bucket_view as i32;
        o.static_graph = opts.static_graph as i32;
        let sparse: Option<Vec<i32>> = opts.expect_sparse.as_ref().map(|v| v.iter().map(|&x| x as i32).collect());
        if let Some(s) = &sparse {
            if s.len() != lens.len() {
                return Err(Error::invalid(format!("expect_sparse has {} entries for {} gradients", s.len(), lens.len())));
            }
            o.expect_sparse = s.as_ptr();
        }
        if let Some(b) = &opts.bucket_of {
            if b.len() != lens.len() {
                return Err(Error::invalid(format!("bucket_of has {} entries for {} gradients", b.len(), lens.len())));
            }
            o.bucket_of = b.as_ptr();
        }
        // Two-dimensional descriptors: a sparse gradient's rows are its first dimension.
        let mut dims: Vec<[i64; 2]> = shapes.iter().map(|&(r, c)| [r as i64, c as i64]).collect();
        let mut dls: Vec<sys::DLTensor> = grads
            .iter_mut()
            .zip(dims.iter_mut())
            .map(|(g, d)| host_tensor(g.as_mut_ptr().cast(), d, T::CODE, T::BITS))
            .collect();
        let ptrs: Vec<*mut sys::DLTensor> = dls.iter_mut().map(|d| d as *mut _).collect();
        let mut out = ptr::null_mut();
        // The Vecs' memory never moves: they are never resized.
        check(unsafe { sys::distc_reducer_new(&mut out, pg.as_ptr(), ptrs.as_ptr(), ptrs.len(), &o) })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::invalid("no reducer returned"))?;
        let rows = shapes
            .iter()
            .enumerate()
            .map(|(i, &(_, c))| sparse.as_ref().is_some_and(|s| s[i] != 0).then_some(c))
            .collect();
        let n = lens.len();
        let mut r = Reducer {
            raw,
            grads,
            views: None,
            rows,
            busy: vec![false; n],
            marked: vec![false; n],
            static_graph: opts.static_graph,
            static_unused: None,
        };
        if opts.gradient_as_bucket_view {
            let mut views = Vec::new();
            for (i, g) in r.grads.iter().enumerate() {
                if sparse.as_ref().is_some_and(|s| s[i] != 0) {
                    views.push((NonNull::<T>::dangling().as_ptr(), 0)); // a sparse gradient has no view
                    continue;
                }
                let mut p = ptr::null_mut();
                check(unsafe { sys::distc_reducer_grad_view(&mut p, r.raw.as_ptr(), i as i32) })?;
                views.push((p as *mut T, g.len()));
            }
            r.views = Some(views);
        }
        Ok(r)
    }
}

impl<T: Element> Reducer<T> {
    fn index(&self, i: usize) -> Result<i32> {
        if i >= self.grads.len() {
            return Err(Error::invalid(format!("gradient {i} is out of range (0..{})", self.grads.len())));
        }
        Ok(i as i32)
    }

    fn rows_of(&self, i: usize) -> Option<usize> {
        self.rows[i]
    }

    fn not_busy(&self, i: usize) {
        assert!(
            !self.busy[i],
            "gradient {i} is in a bucket being reduced (it was marked ready, or is unused, in this iteration): \
             with gradient_as_bucket_view it can be read or written again once finalize returns"
        );
    }

    /// Gradient `i`'s memory, to write before mark_ready (the bucket itself with
    /// views, where it panics from mark_ready until finalize: the library may be
    /// reducing the bucket then).
    pub fn grad_mut(&mut self, i: usize) -> &mut [T] {
        match &self.views {
            Some(v) => {
                self.not_busy(i);
                // SAFETY: the view is the reducer's bucket memory, alive as long as the reducer;
                // nothing reduces it until mark_ready, and this &mut self borrow is the only access.
                unsafe { std::slice::from_raw_parts_mut(v[i].0, v[i].1) }
            }
            None => &mut self.grads[i],
        }
    }

    /// Gradient `i` (after finalize: the average over ranks). With views it
    /// panics from mark_ready until finalize, as grad_mut does.
    pub fn grad(&self, i: usize) -> &[T] {
        match &self.views {
            Some(v) => {
                self.not_busy(i);
                // SAFETY: as grad_mut; &self excludes the writers mark_ready and finalize need.
                unsafe { std::slice::from_raw_parts(v[i].0, v[i].1) }
            }
            None => &self.grads[i],
        }
    }

    pub fn num_buckets(&self) -> usize {
        let mut n = 0;
        unsafe { sys::distc_reducer_num_buckets(&mut n, self.raw.as_ptr()) };
        n
    }

    /// Starts an iteration; `unused` gradients will not be computed (they reduce as zeros).
    pub fn prepare_for_backward(&mut self, unused: &[i32]) -> Result<()> {
        check(unsafe { sys::distc_reducer_prepare_for_backward(self.raw.as_ptr(), unused.as_ptr(), unused.len()) })?;
        self.marked.iter_mut().for_each(|m| *m = false);
        // Ready now: their buckets may start reducing.
        for &u in unused {
            self.busy[u as usize] = true; // checked in range by the library
        }
        for &u in self.static_unused.iter().flatten() {
            self.busy[u] = true;
        }
        Ok(())
    }

    /// Gradient `i` holds its value: copied into its bucket; full buckets start reducing.
    pub fn mark_ready(&mut self, i: usize) -> Result<()> {
        let i = self.index(i)?;
        let rc = unsafe { sys::distc_reducer_mark_ready(self.raw.as_ptr(), i) };
        // Even when it failed (a hook's error): the library may hold it ready.
        self.busy[i as usize] = true;
        self.marked[i as usize] = true;
        check(rc)?;
        Ok(())
    }

    /// Sparse gradient `i`: `values` rows (each as long as a row of the gradient, whose
    /// first dimension is its length / row) at row numbers `indices`; both are copied.
    pub fn mark_ready_sparse(&mut self, i: usize, indices: &[i64], values: &[T], row: usize) -> Result<()> {
        let idx = self.index(i)?;
        if row == 0 || values.len() != indices.len() * row {
            return Err(Error::invalid(format!("{} values are not {} rows of {row}", values.len(), indices.len())));
        }
        let mut ishape = [indices.len() as i64];
        let mut vshape = [indices.len() as i64, row as i64];
        // Read-only for the library: the pointers come from shared borrows and are only read.
        let it = host_tensor(indices.as_ptr() as *mut _, &mut ishape, INT, 64);
        let vt = host_tensor(values.as_ptr() as *mut _, &mut vshape, T::CODE, T::BITS);
        let rc = unsafe { sys::distc_reducer_mark_ready_sparse(self.raw.as_ptr(), idx, &it, &vt) };
        self.marked[i] = true;
        check(rc)?;
        Ok(())
    }

    /// After finalize: sparse gradient `i` averaged over ranks, as distinct increasing row
    /// numbers and their rows, back to back (copied).
    pub fn sparse_grad(&self, i: usize) -> Result<(Vec<i64>, Vec<T>)> {
        let idx = self.index(i)?;
        let (mut ip, mut vp, mut nnz) = (ptr::null(), ptr::null(), 0usize);
        check(unsafe { sys::distc_reducer_sparse_grad(&mut ip, &mut vp, &mut nnz, self.raw.as_ptr(), idx) })?;
        if nnz == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        // Rows are as long as the gradient's rows: its length over the rows it was given.
        let indices = unsafe { std::slice::from_raw_parts(ip, nnz) }.to_vec();
        let n_values = self.rows_of(i).map(|row| nnz * row).unwrap_or(0);
        let values = unsafe { std::slice::from_raw_parts(vp as *const T, n_values) }.to_vec();
        Ok((indices, values))
    }

    /// Waits for every bucket and writes the averages back (a failed allreduce's error here).
    pub fn finalize(&mut self) -> Result<()> {
        let rc = unsafe { sys::distc_reducer_finalize(self.raw.as_ptr()) };
        self.iteration_ended(rc);
        check(rc)?;
        Ok(())
    }

    // After finalize or join, also a failed one: every bucket that started has finished.
    fn iteration_ended(&mut self, rc: i32) {
        // The library learns what the first iteration left unmarked unless that
        // iteration failed for gradients not marked (DISTC_ESTATE); after other
        // failures, learning here too at worst keeps gradients from being handed out.
        if self.static_graph && self.static_unused.is_none() && rc != sys::DISTC_ESTATE {
            self.static_unused = Some((0..self.marked.len()).filter(|&i| !self.marked[i]).collect());
        }
        self.busy.iter_mut().for_each(|b| *b = false);
    }

    /// One iteration of a rank that has run out of inputs (uneven inputs): every
    /// gradient reduces as zeros, matching the active ranks' buckets. See
    /// `distc_reducer_join(3)` for the protocol around it.
    pub fn join(&mut self) -> Result<()> {
        let rc = unsafe { sys::distc_reducer_join(self.raw.as_ptr()) };
        self.busy.iter_mut().for_each(|b| *b = false);
        check(rc)?;
        Ok(())
    }

    /// With `find_unused_parameters`: whether any rank used gradient `i` in the last
    /// iteration (false: its buffer holds zeros; torch's DDP leaves such a grad alone).
    pub fn grad_used(&self, i: usize) -> Result<bool> {
        let i = self.index(i)?;
        let mut used = 0;
        check(unsafe { sys::distc_reducer_grad_used(&mut used, self.raw.as_ptr(), i) })?;
        Ok(used != 0)
    }

    /// Replaces how buckets are reduced, before the first iteration (c10d's comm
    /// hook): `hook(bucket)` starts the bucket's reduction and returns a future that
    /// completes once the buffer holds the average (say, [`Bucket::all_reduce`] of a
    /// sum, then a [`Future::then`] that divides; several collectives may be
    /// chained). It runs on the thread whose `mark_ready` completed the bucket, or
    /// on a continuation thread once the bucket before it completed, so what it
    /// chains comes in the same order on every rank. finalize waits for each
    /// future and copies the buffers back into the gradients. An error the hook
    /// returns fails that mark_ready or finalize.
    pub fn register_bucket_hook<F>(&mut self, hook: F) -> Result<()>
    where
        F: Fn(&Bucket<T>) -> Result<Future> + Send + Sync + 'static,
    {
        let payload = Box::into_raw(Box::new(hook)) as *mut std::os::raw::c_void;
        // The library releases the payload with the hook, also when it refuses it.
        check(unsafe {
            sys::distc_reducer_register_bucket_hook(
                self.raw.as_ptr(),
                Some(bucket_hook::<T, F>),
                payload,
                Some(release_hook::<F>),
            )
        })?;
        Ok(())
    }

    /// distc's built-in PowerSGD (c10d's `powerSGD_hook`, in C) as the hook, before the
    /// first iteration; see `distc_reducer_register_powersgd(3)`.
    pub fn register_powersgd(&mut self, opts: &PowerSgdOptions) -> Result<()> {
        let mut o: sys::distc_powersgd_options = unsafe { std::mem::zeroed() };
        check(unsafe { sys::distc_powersgd_options_init(&mut o, sys::DISTC_POWERSGD_OPTIONS_VERSION) })?;
        o.matrix_approximation_rank = opts.matrix_approximation_rank;
        o.use_error_feedback = opts.use_error_feedback as i32;
        o.warm_start = opts.warm_start as i32;
        o.start_powersgd_iter = opts.start_powersgd_iter;
        o.min_compression_rate = opts.min_compression_rate;
        o.orthogonalization_epsilon = opts.orthogonalization_epsilon;
        o.random_seed = opts.random_seed;
        check(unsafe { sys::distc_reducer_register_powersgd(self.raw.as_ptr(), &o) })?;
        Ok(())
    }

    /// The built-in PowerSGD's (iterations, elements before compression, after) so far.
    pub fn powersgd_stats(&self) -> Result<(i64, u64, u64)> {
        let (mut it, mut before, mut after) = (0, 0, 0);
        check(unsafe { sys::distc_reducer_powersgd_stats(&mut it, &mut before, &mut after, self.raw.as_ptr()) })?;
        Ok((it, before, after))
    }

    /// Back to the default allreduce (before the first iteration).
    pub fn clear_bucket_hook(&mut self) -> Result<()> {
        check(unsafe { sys::distc_reducer_register_bucket_hook(self.raw.as_ptr(), None, ptr::null_mut(), None) })?;
        Ok(())
    }

    /// (bytes, launch ns, reduction ns) of bucket `b` in the last iteration.
    pub fn bucket_stats(&self, b: usize) -> Result<(u64, i64, i64)> {
        let (mut bytes, mut launch, mut reduce) = (0, 0, 0);
        check(unsafe { sys::distc_reducer_bucket_stats(&mut bytes, &mut launch, &mut reduce, self.raw.as_ptr(), b) })?;
        Ok((bytes, launch, reduce))
    }
}

impl<T: Element> Drop for Reducer<T> {
    fn drop(&mut self) {
        // SAFETY: we own the handle; it waits for buckets in flight before the Vecs go.
        unsafe { sys::distc_reducer_free(self.raw.as_ptr()) }
    }
}
