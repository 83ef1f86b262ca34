//! The DDP reducer over gradients the reducer owns (one element type).
use std::ptr::{self, NonNull};

use distc_sys as sys;

use crate::element::{DescList, Element};
use crate::error::{check, Error, Result};
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
}

/// c10d's Reducer. It owns the gradient buffers: write gradient `i` through
/// [`grad_mut`](Reducer::grad_mut), then [`mark_ready`](Reducer::mark_ready);
/// after [`finalize`](Reducer::finalize) [`grad`](Reducer::grad) holds the average over ranks.
pub struct Reducer<T: Element> {
    raw: NonNull<sys::distc_reducer>,
    grads: Vec<Vec<T>>,
    views: Option<Vec<(*mut T, usize)>>,
}

unsafe impl<T: Element> Send for Reducer<T> {}

impl<T: Element + Default> Reducer<T> {
    /// A reducer over gradients of the given lengths (every rank passes the same).
    pub fn new(pg: &ProcessGroup, lens: &[usize], opts: &ReducerOptions) -> Result<Reducer<T>> {
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
        if let Some(b) = &opts.bucket_of {
            if b.len() != lens.len() {
                return Err(Error::invalid(format!("bucket_of has {} entries for {} gradients", b.len(), lens.len())));
            }
            o.bucket_of = b.as_ptr();
        }
        let list = DescList::of_mut(grads.iter_mut().map(|g| g.as_mut_slice()));
        let mut out = ptr::null_mut();
        // The Vecs' memory never moves: they are never resized.
        check(unsafe { sys::distc_reducer_new(&mut out, pg.as_ptr(), list.as_ptr(), list.len(), &o) })?;
        drop(list);
        let raw = NonNull::new(out).ok_or_else(|| Error::invalid("no reducer returned"))?;
        let mut r = Reducer { raw, grads, views: None };
        if opts.gradient_as_bucket_view {
            let mut views = Vec::new();
            for (i, g) in r.grads.iter().enumerate() {
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

    /// Gradient `i`'s memory, to write before mark_ready (the bucket itself with views).
    pub fn grad_mut(&mut self, i: usize) -> &mut [T] {
        match &self.views {
            // SAFETY: the view is the reducer's bucket memory, alive as long as the reducer, and
            // this &mut self borrow is the only access.
            Some(v) => unsafe { std::slice::from_raw_parts_mut(v[i].0, v[i].1) },
            None => &mut self.grads[i],
        }
    }

    /// Gradient `i` (after finalize: the average over ranks).
    pub fn grad(&self, i: usize) -> &[T] {
        match &self.views {
            Some(v) => unsafe { std::slice::from_raw_parts(v[i].0, v[i].1) },
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
        Ok(())
    }

    /// Gradient `i` holds its value: copied into its bucket; full buckets start reducing.
    pub fn mark_ready(&mut self, i: usize) -> Result<()> {
        let i = self.index(i)?;
        check(unsafe { sys::distc_reducer_mark_ready(self.raw.as_ptr(), i) })?;
        Ok(())
    }

    /// Waits for every bucket and writes the averages back (a failed allreduce's error here).
    pub fn finalize(&mut self) -> Result<()> {
        check(unsafe { sys::distc_reducer_finalize(self.raw.as_ptr()) })?;
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
