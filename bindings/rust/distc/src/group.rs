//! Process groups and their collectives, on slices of [`Element`]s.
use std::cell::RefCell;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::time::Duration;

use distc_sys as sys;

use crate::element::{settle_bools, Desc, DescList, Element};
use crate::error::{check, Error, Result};
use crate::store::{cstr, millis, take, Store};

/// Reduction operators (torch.distributed's). PremulSum multiplies every input by its factor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReduceOp {
    Sum,
    Avg,
    Product,
    Min,
    Max,
    Band,
    Bor,
    Bxor,
    PremulSum(f64),
}

impl ReduceOp {
    pub(crate) fn raw(self) -> (sys::distc_reduce_op, Option<f64>) {
        match self {
            ReduceOp::Sum => (sys::DISTC_SUM, None),
            ReduceOp::Avg => (sys::DISTC_AVG, None),
            ReduceOp::Product => (sys::DISTC_PRODUCT, None),
            ReduceOp::Min => (sys::DISTC_MIN, None),
            ReduceOp::Max => (sys::DISTC_MAX, None),
            ReduceOp::Band => (sys::DISTC_BAND, None),
            ReduceOp::Bor => (sys::DISTC_BOR, None),
            ReduceOp::Bxor => (sys::DISTC_BXOR, None),
            ReduceOp::PremulSum(f) => (sys::DISTC_PREMUL_SUM, Some(f)),
        }
    }
}

/// Per-operation options: only PREMUL_SUM's factor needs them.
pub(crate) struct OpOpts(Option<sys::distc_op_options>);

impl OpOpts {
    pub(crate) fn new(premul: Option<f64>) -> OpOpts {
        OpOpts(premul.map(|f| {
            let mut o: sys::distc_op_options = unsafe { std::mem::zeroed() };
            unsafe { sys::distc_op_options_init(&mut o, sys::DISTC_OP_OPTIONS_VERSION) };
            o.premul_factor = f;
            o
        }))
    }

    pub(crate) fn ptr(&self) -> *const sys::distc_op_options {
        self.0.as_ref().map_or(ptr::null(), |o| o as *const _)
    }
}

/// Options of a new group; `Default`: gloo, c10d's 30 min timeout, "default_pg".
#[derive(Debug, Clone, Default)]
pub struct GroupOptions {
    /// "gloo" (None), or a plugin: "mpi", "nccl".
    pub backend: Option<String>,
    pub timeout: Option<Duration>,
    pub group_name: Option<String>,
}

/// Writes every live group's flight recorder into the directory `dir`, one
/// file per process (`distc_trace_dump_all(3)`).
pub fn dump_trace_all(dir: &str) -> Result<()> {
    let d = cstr(dir, "dir")?;
    check(unsafe { sys::distc_trace_dump_all(d.as_ptr()) })?;
    Ok(())
}

/// A group of ranks over a backend. Collectives on one group must be issued
/// in the same order on every rank; queries and `abort` are safe from any
/// thread (so the group is `Send` and `Sync`).
#[derive(Debug)]
pub struct ProcessGroup {
    raw: NonNull<sys::distc_pg>,
}

unsafe impl Send for ProcessGroup {}
unsafe impl Sync for ProcessGroup {}

fn pg_options(o: &GroupOptions) -> Result<(sys::distc_pg_options, Vec<std::ffi::CString>)> {
    let mut raw: sys::distc_pg_options = unsafe { std::mem::zeroed() };
    check(unsafe { sys::distc_pg_options_init(&mut raw, sys::DISTC_PG_OPTIONS_VERSION) })?;
    let mut keep = Vec::new();
    if let Some(b) = &o.backend {
        keep.push(cstr(b, "backend")?);
        raw.backend = keep.last().unwrap().as_ptr();
    }
    if let Some(n) = &o.group_name {
        keep.push(cstr(n, "group_name")?);
        raw.group_name = keep.last().unwrap().as_ptr();
    }
    if let Some(t) = o.timeout {
        raw.timeout_ms = millis(t);
    }
    Ok((raw, keep))
}

fn len_check(what: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(Error::invalid(format!("{what} has {got} elements; {want} expected")));
    }
    Ok(())
}

impl ProcessGroup {
    fn wrap(raw: *mut sys::distc_pg) -> Option<ProcessGroup> {
        NonNull::new(raw).map(|raw| ProcessGroup { raw })
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::distc_pg {
        self.raw.as_ptr()
    }

    /// This rank's member of a group of `size` ranks meeting in `store`.
    pub fn new(store: &Store, rank: i32, size: i32, opts: &GroupOptions) -> Result<ProcessGroup> {
        let (o, _keep) = pg_options(opts)?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::distc_pg_new(&mut out, store.as_ptr(), rank, size, &o) })?;
        ProcessGroup::wrap(out).ok_or_else(|| Error::invalid("no group returned"))
    }

    /// Rendezvous through `url` (env://, tcp://, file://) and create the group.
    pub fn from_url(url: &str, opts: &GroupOptions) -> Result<ProcessGroup> {
        let u = cstr(url, "url")?;
        let (o, _keep) = pg_options(opts)?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::distc_pg_new_from_url(&mut out, u.as_ptr(), ptr::null(), &o) })?;
        ProcessGroup::wrap(out).ok_or_else(|| Error::invalid("no group returned"))
    }

    pub fn rank(&self) -> i32 {
        let mut r = -1;
        unsafe { sys::distc_pg_rank(&mut r, self.as_ptr()) };
        r
    }

    pub fn size(&self) -> i32 {
        let mut s = -1;
        unsafe { sys::distc_pg_size(&mut s, self.as_ptr()) };
        s
    }

    pub fn backend(&self) -> String {
        let mut p = ptr::null();
        unsafe { sys::distc_pg_backend(&mut p, self.as_ptr()) };
        if p.is_null() { String::new() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() }
    }

    /// How collectives reach rank `peer`: "shm", "tcp", "gloo", "self", or the backend's name.
    pub fn transport(&self, peer: i32) -> Result<String> {
        let mut p = ptr::null();
        check(unsafe { sys::distc_pg_transport(&mut p, self.as_ptr(), peer) })?;
        Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    pub fn name(&self) -> String {
        let mut p = ptr::null();
        unsafe { sys::distc_pg_name(&mut p, self.as_ptr()) };
        if p.is_null() { String::new() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() }
    }

    /// The root group's rank of this group's `group_rank`.
    pub fn global_rank(&self, group_rank: i32) -> Result<i32> {
        let mut r = -1;
        check(unsafe { sys::distc_pg_global_rank(&mut r, self.as_ptr(), group_rank) })?;
        Ok(r)
    }

    /// c10d's new_group: every rank calls it; ranks not listed get None.
    pub fn new_subgroup(&self, ranks: &[i32]) -> Result<Option<ProcessGroup>> {
        let mut out = ptr::null_mut();
        check(unsafe { sys::distc_pg_new_subgroup(&mut out, self.as_ptr(), ranks.as_ptr(), ranks.len(), ptr::null()) })?;
        Ok(ProcessGroup::wrap(out))
    }

    /// MPI_Comm_split: the same color (>= 0) makes a group ordered by key; a negative color gives None.
    pub fn split(&self, color: i32, key: i32) -> Result<Option<ProcessGroup>> {
        let mut out = ptr::null_mut();
        check(unsafe { sys::distc_pg_split(&mut out, self.as_ptr(), color, key, ptr::null()) })?;
        Ok(ProcessGroup::wrap(out))
    }

    /// Fails everything in flight or queued on this rank with `Aborted`; never hangs.
    pub fn abort(&self) -> Result<()> {
        check(unsafe { sys::distc_pg_abort(self.as_ptr()) })?;
        Ok(())
    }

    /// Writes this group's flight recorder (its recent operations, JSON lines;
    /// `distc_pg_trace_dump(3)`) to the file `path`. `distc-trace DIR` reads such files.
    pub fn dump_trace(&self, path: &str) -> Result<()> {
        let p = cstr(path, "path")?;
        check(unsafe { sys::distc_pg_trace_dump(self.as_ptr(), p.as_ptr()) })?;
        Ok(())
    }

    // ---- collectives (blocking: on the calling thread)

    pub fn all_reduce<T: Element>(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        let (op, f) = op.raw();
        let o = OpOpts::new(f);
        let mut d = Desc::of_mut(buf);
        check(unsafe { sys::distc_allreduce(ptr::null_mut(), self.as_ptr(), d.ptr(), op, o.ptr()) })?;
        Ok(())
    }

    pub fn broadcast<T: Element>(&self, buf: &mut [T], root: i32) -> Result<()> {
        let mut d = Desc::of_mut(buf);
        check(unsafe { sys::distc_broadcast(ptr::null_mut(), self.as_ptr(), d.ptr(), root, ptr::null()) })?;
        Ok(())
    }

    /// The reduction lands in `root`'s `buf`; the others' are left as they were.
    pub fn reduce<T: Element>(&self, buf: &mut [T], root: i32, op: ReduceOp) -> Result<()> {
        let (op, f) = op.raw();
        let o = OpOpts::new(f);
        let mut d = Desc::of_mut(buf);
        check(unsafe { sys::distc_reduce(ptr::null_mut(), self.as_ptr(), d.ptr(), root, op, o.ptr()) })?;
        Ok(())
    }

    /// Every rank's `input`, in rank order, into `out` (size x input.len()).
    pub fn all_gather<T: Element>(&self, out: &mut [T], input: &[T]) -> Result<()> {
        len_check("out", out.len(), input.len() * self.size() as usize)?;
        let mut o = Desc::of_mut(out);
        let mut i = Desc::of(input);
        check(unsafe { sys::distc_allgather_into_tensor(ptr::null_mut(), self.as_ptr(), o.ptr(), i.ptr(), ptr::null()) })?;
        Ok(())
    }

    /// Every rank's `input` into `root`'s `out` (size x input.len()); `out` is None elsewhere.
    pub fn gather<T: Element>(&self, out: Option<&mut [T]>, input: &[T], root: i32) -> Result<()> {
        let mut i = Desc::of(input);
        let outs = match out {
            Some(o) => {
                len_check("out", o.len(), input.len() * self.size() as usize)?;
                Some(DescList::of_mut(o.chunks_mut(input.len().max(1)).take(self.size() as usize)))
            }
            None => None,
        };
        if input.is_empty() {
            return Err(Error::invalid("gather: input is empty"));
        }
        let p = outs.as_ref().map_or(ptr::null(), |l| l.as_ptr());
        check(unsafe { sys::distc_gather(ptr::null_mut(), self.as_ptr(), p, i.ptr(), root, ptr::null()) })?;
        Ok(())
    }

    /// `root`'s `input` (size x out.len(), None elsewhere) split in rank order into each rank's `out`.
    pub fn scatter<T: Element>(&self, out: &mut [T], input: Option<&[T]>, root: i32) -> Result<()> {
        if out.is_empty() {
            return Err(Error::invalid("scatter: out is empty"));
        }
        let n = out.len();
        let ins = match input {
            Some(i) => {
                len_check("input", i.len(), n * self.size() as usize)?;
                Some(DescList::of(i.chunks(n)))
            }
            None => None,
        };
        let mut o = Desc::of_mut(out);
        let p = ins.as_ref().map_or(ptr::null(), |l| l.as_ptr() as *const *const sys::DLTensor);
        check(unsafe { sys::distc_scatter(ptr::null_mut(), self.as_ptr(), o.ptr(), p, root, ptr::null()) })?;
        Ok(())
    }

    /// Rank r's `out` gets the reduction of everyone's r-th piece of `input` (size x out.len()).
    pub fn reduce_scatter<T: Element>(&self, out: &mut [T], input: &[T], op: ReduceOp) -> Result<()> {
        len_check("input", input.len(), out.len() * self.size() as usize)?;
        let (op, f) = op.raw();
        let opts = OpOpts::new(f);
        let mut o = Desc::of_mut(out);
        let mut i = Desc::of(input);
        check(unsafe {
            sys::distc_reduce_scatter_tensor(ptr::null_mut(), self.as_ptr(), o.ptr(), i.ptr(), op, opts.ptr())
        })?;
        Ok(())
    }

    /// All-to-all with even pieces: the j-th piece of `input` goes to rank j.
    pub fn all_to_all<T: Element>(&self, out: &mut [T], input: &[T]) -> Result<()> {
        self.all_to_all_v(out, input, None, None)
    }

    /// All-to-all with per-rank element counts (None: even).
    pub fn all_to_all_v<T: Element>(&self, out: &mut [T], input: &[T], out_splits: Option<&[i64]>,
                                     in_splits: Option<&[i64]>) -> Result<()> {
        let size = self.size() as usize;
        for (what, s) in [("out_splits", out_splits), ("in_splits", in_splits)] {
            if let Some(s) = s {
                len_check(what, s.len(), size)?;
            }
        }
        let mut o = Desc::of_mut(out);
        let mut i = Desc::of(input);
        check(unsafe {
            sys::distc_alltoall_single(ptr::null_mut(), self.as_ptr(), o.ptr(), i.ptr(),
                                       out_splits.map_or(ptr::null(), |s| s.as_ptr()),
                                       in_splits.map_or(ptr::null(), |s| s.as_ptr()), ptr::null())
        })?;
        Ok(())
    }

    pub fn barrier(&self) -> Result<()> {
        check(unsafe { sys::distc_barrier(ptr::null_mut(), self.as_ptr(), ptr::null()) })?;
        Ok(())
    }

    pub fn send<T: Element>(&self, buf: &[T], dst: i32, tag: i32) -> Result<()> {
        let mut d = Desc::of(buf);
        check(unsafe { sys::distc_send(ptr::null_mut(), self.as_ptr(), d.ptr(), dst, tag, ptr::null()) })?;
        Ok(())
    }

    /// Receives into `buf` from `src` (None: any rank); returns the sender.
    pub fn recv<T: Element>(&self, buf: &mut [T], src: Option<i32>, tag: i32) -> Result<i32> {
        self.scope(|s| s.recv(buf, src, tag)?.wait_source())
    }

    /// Every rank's bytes (lengths may differ), in rank order.
    pub fn all_gather_bytes(&self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut bufs: Vec<sys::distc_buf> =
            (0..self.size()).map(|_| sys::distc_buf { data: ptr::null_mut(), size: 0 }).collect();
        check(unsafe {
            sys::distc_all_gather_bytes(bufs.as_mut_ptr(), self.as_ptr(), data.as_ptr().cast(), data.len(), ptr::null())
        })?;
        Ok(bufs.iter_mut().map(take).collect())
    }

    /// `root`'s bytes on every rank (`data` is read on the root only).
    pub fn broadcast_bytes(&self, data: &[u8], root: i32) -> Result<Vec<u8>> {
        let mut b = sys::distc_buf { data: ptr::null_mut(), size: 0 };
        check(unsafe {
            sys::distc_broadcast_bytes(&mut b, self.as_ptr(), data.as_ptr().cast(), data.len(), root, ptr::null())
        })?;
        Ok(take(&mut b))
    }

    /// Asynchronous operations: `f` gets a [`Scope`] whose operations borrow
    /// their buffers until the scope ends; the scope waits for every one of
    /// them before returning (as `std::thread::scope` joins its threads), so
    /// no buffer can be touched or freed while the library uses it.
    pub fn scope<'env, F, R>(&'env self, f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        let scope = Scope {
            pg: self,
            works: RefCell::new(Vec::new()),
            bools: RefCell::new(Vec::new()),
            _scope: PhantomData,
            _env: PhantomData,
        };
        // Waits on the way out, also when `f` panics: buffers are released only after.
        struct Finish<'a>(&'a RefCell<Vec<*mut sys::distc_work>>, &'a RefCell<Vec<(*mut u8, usize)>>);
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                for w in self.0.borrow_mut().drain(..) {
                    unsafe {
                        sys::distc_work_wait(w, sys::DISTC_TIMEOUT_DEFAULT as i64);
                        sys::distc_work_free(w);
                    }
                }
                for (p, n) in self.1.borrow_mut().drain(..) {
                    // SAFETY: borrowed for the scope, and no operation writes it any more.
                    unsafe { settle_bools(p, n) }
                }
            }
        }
        let _finish = Finish(&scope.works, &scope.bools);
        f(&scope)
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // SAFETY: we own the handle; scopes (which borrow the group) have ended.
        unsafe { sys::distc_pg_free(self.raw.as_ptr()) }
    }
}

/// Asynchronous operations of one [`ProcessGroup::scope`]. Their buffers are
/// borrowed for `'scope`; every operation is waited for when the scope ends.
pub struct Scope<'scope, 'env: 'scope> {
    pg: &'env ProcessGroup,
    works: RefCell<Vec<*mut sys::distc_work>>,
    bools: RefCell<Vec<(*mut u8, usize)>>, // bool outputs, settled once every operation is done
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// One operation of a scope: poll it, wait for it, read where its data came from.
pub struct Work<'scope> {
    raw: *mut sys::distc_work,
    _scope: PhantomData<&'scope ()>,
}

impl<'scope, 'env> Scope<'scope, 'env> {
    fn start(&'scope self, f: impl FnOnce(*mut *mut sys::distc_work) -> i32) -> Result<Work<'scope>> {
        self.start_writing(None, f)
    }

    // `bools`: a bool output (Desc::take_bools), settled when the scope ends.
    fn start_writing(&'scope self, bools: Option<(*mut u8, usize)>,
                     f: impl FnOnce(*mut *mut sys::distc_work) -> i32) -> Result<Work<'scope>> {
        self.bools.borrow_mut().extend(bools);
        let mut w = ptr::null_mut();
        check(f(&mut w))?;
        self.works.borrow_mut().push(w);
        Ok(Work { raw: w, _scope: PhantomData })
    }

    pub fn all_reduce<T: Element>(&'scope self, buf: &'scope mut [T], op: ReduceOp) -> Result<Work<'scope>> {
        let (op, f) = op.raw();
        let o = OpOpts::new(f);
        let mut d = Desc::of_mut(buf);
        let bools = d.take_bools();
        self.start_writing(bools, |w| unsafe { sys::distc_allreduce(w, self.pg.as_ptr(), d.ptr(), op, o.ptr()) })
    }

    pub fn broadcast<T: Element>(&'scope self, buf: &'scope mut [T], root: i32) -> Result<Work<'scope>> {
        let mut d = Desc::of_mut(buf);
        let bools = d.take_bools();
        self.start_writing(bools, |w| unsafe { sys::distc_broadcast(w, self.pg.as_ptr(), d.ptr(), root, ptr::null()) })
    }

    pub fn all_gather<T: Element>(&'scope self, out: &'scope mut [T], input: &'scope [T]) -> Result<Work<'scope>> {
        len_check("out", out.len(), input.len() * self.pg.size() as usize)?;
        let mut o = Desc::of_mut(out);
        let mut i = Desc::of(input);
        self.start_writing(o.take_bools(), |w| unsafe {
            sys::distc_allgather_into_tensor(w, self.pg.as_ptr(), o.ptr(), i.ptr(), ptr::null())
        })
    }

    pub fn barrier(&'scope self) -> Result<Work<'scope>> {
        self.start(|w| unsafe { sys::distc_barrier(w, self.pg.as_ptr(), ptr::null()) })
    }

    pub fn send<T: Element>(&'scope self, buf: &'scope [T], dst: i32, tag: i32) -> Result<Work<'scope>> {
        let mut d = Desc::of(buf);
        self.start(|w| unsafe { sys::distc_send(w, self.pg.as_ptr(), d.ptr(), dst, tag, ptr::null()) })
    }

    /// From `src`, or any rank with None ([`Work::wait_source`] tells which).
    pub fn recv<T: Element>(&'scope self, buf: &'scope mut [T], src: Option<i32>, tag: i32) -> Result<Work<'scope>> {
        let mut d = Desc::of_mut(buf);
        let src = src.unwrap_or(sys::DISTC_ANY_SOURCE);
        let bools = d.take_bools();
        self.start_writing(bools, |w| unsafe { sys::distc_recv(w, self.pg.as_ptr(), d.ptr(), src, tag, ptr::null()) })
    }
}

impl<'scope> Work<'scope> {
    /// Waits for the operation (up to `timeout` if given: then `Timeout` and it goes on).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        let ms = timeout.map_or(sys::DISTC_TIMEOUT_DEFAULT as i64, millis);
        check(unsafe { sys::distc_work_wait(self.raw, ms) })?;
        Ok(())
    }

    /// Waits, then gives the rank the data came from.
    pub fn wait_source(&self) -> Result<i32> {
        self.wait(None)?;
        let mut r = -1;
        check(unsafe { sys::distc_work_source_rank(&mut r, self.raw) })?;
        Ok(r)
    }

    /// Ok(true) once done, Ok(false) while running, the error if it failed.
    pub fn test(&self) -> Result<bool> {
        Ok(check(unsafe { sys::distc_work_test(self.raw) })? == 0)
    }

    /// The group's sequence number of this collective (0 for point-to-point).
    pub fn seq(&self) -> u64 {
        let mut s = 0;
        unsafe { sys::distc_work_seq(&mut s, self.raw) };
        s
    }
}
