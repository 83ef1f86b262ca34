//! Futures over work handles that borrow nothing: made by the program
//! ([`Future::new`], completed with [`Future::complete`]), continued with
//! [`Future::then`], or started by a bucket hook on its bucket
//! ([`Bucket::all_reduce`]); and the bucket hooks of the reducer
//! ([`crate::Reducer::register_bucket_hook`]).
use std::ffi::CString;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::time::Duration;

use distc_sys as sys;

use crate::element::{host_tensor, Element};
use crate::error::{check, Error, Result};
use crate::group::{OpOpts, ReduceOp};

/// A work handle (distc/work.h) of an operation that borrows no Rust buffer.
pub struct Future {
    raw: *mut sys::distc_work,
}

// SAFETY: work handles may be used from several threads at once (distc/work.h).
unsafe impl Send for Future {}
unsafe impl Sync for Future {}

fn millis(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// The outcome of a completed work: Ok, or its code and message.
fn outcome(w: *mut sys::distc_work) -> Result<()> {
    check(unsafe { sys::distc_work_test(w) }).map(|_| ())
}

/// Records `e` as the thread's last error and returns its code (for a C callback's return).
fn report(e: &Error) -> c_int {
    let msg = CString::new(e.message.replace('\0', " ")).unwrap_or_default();
    let code = if e.code < 0 { e.code } else { sys::DISTC_EINTERNAL };
    unsafe { sys::distc_error_set(code, msg.as_ptr()) }
}

impl Future {
    /// A future the program completes ([`Future::complete`]).
    pub fn new() -> Result<Future> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::distc_work_new(&mut raw) })?;
        Ok(Future { raw })
    }

    pub(crate) fn from_raw(raw: *mut sys::distc_work) -> Future {
        Future { raw }
    }

    fn into_raw(self) -> *mut sys::distc_work {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// Completes a future made by [`Future::new`]: successfully, or failed with the error's code and message.
    pub fn complete(&self, result: Result<()>) -> Result<()> {
        let (code, msg) = match result {
            Ok(()) => (0, CString::default()),
            Err(e) => (
                if e.code < 0 { e.code } else { sys::DISTC_EINTERNAL },
                CString::new(e.message.replace('\0', " ")).unwrap_or_default(),
            ),
        };
        check(unsafe { sys::distc_work_complete(self.raw, code, msg.as_ptr()) })?;
        Ok(())
    }

    /// Waits for it (up to `timeout` if given: then `Timeout`, and it goes on).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        let ms = timeout.map_or(sys::DISTC_TIMEOUT_DEFAULT as i64, millis);
        check(unsafe { sys::distc_work_wait(self.raw, ms) })?;
        Ok(())
    }

    /// Ok(true) once done, Ok(false) while running, the error if it failed.
    pub fn test(&self) -> Result<bool> {
        Ok(check(unsafe { sys::distc_work_test(self.raw) })? == 0)
    }

    /// A future of `f(outcome of this one)`, run on one of distc's continuation
    /// threads once this one completes (also when it failed): `f` may block, wait
    /// and start collectives. `Ok(Some(g))` chains `g` (the new future completes
    /// with g's outcome), `Ok(None)` completes it now, `Err` fails it. A panic in
    /// `f` fails it too (it does not unwind into the library).
    pub fn then<F>(&self, f: F) -> Result<Future>
    where
        F: FnOnce(Result<()>) -> Result<Option<Future>> + Send + 'static,
    {
        extern "C" fn run<F>(next: *mut *mut sys::distc_work, done: *mut sys::distc_work, payload: *mut c_void) -> c_int
        where
            F: FnOnce(Result<()>) -> Result<Option<Future>> + Send + 'static,
        {
            // SAFETY: the payload is the Box given below, and distc runs the continuation exactly once.
            let f = unsafe { Box::from_raw(payload as *mut F) };
            let result = outcome(done);
            match catch_unwind(AssertUnwindSafe(move || f(result))) {
                Ok(Ok(None)) => 0,
                Ok(Ok(Some(g))) => {
                    unsafe { *next = g.into_raw() };
                    0
                }
                Ok(Err(e)) => report(&e),
                Err(_) => report(&Error::new(sys::DISTC_EINTERNAL, "a Rust continuation panicked")),
            }
        }
        let payload = Box::into_raw(Box::new(f)) as *mut c_void;
        let mut out = ptr::null_mut();
        let rc = unsafe { sys::distc_work_then(&mut out, self.raw, Some(run::<F>), payload) };
        if rc < 0 {
            drop(unsafe { Box::from_raw(payload as *mut F) });
            return Err(Error::last(rc));
        }
        Ok(Future { raw: out })
    }
}

impl Clone for Future {
    /// Another handle of the same operation.
    fn clone(&self) -> Future {
        let mut raw = ptr::null_mut();
        // A valid handle gives a valid reference; only allocation could fail.
        check(unsafe { sys::distc_work_ref(&mut raw, self.raw) }).expect("distc_work_ref");
        Future { raw }
    }
}

impl Drop for Future {
    fn drop(&mut self) {
        unsafe { sys::distc_work_free(self.raw) }
    }
}

/// One bucket as a bucket hook sees it (c10d's GradBucket): launched in
/// `index` order, and the buffer that holds its gradients back to back.
pub struct Bucket<T: Element> {
    pub index: usize,
    pub is_last: bool,
    /// The gradients in it, and where each starts in the buffer (in elements).
    pub grads: Vec<i32>,
    pub offsets: Vec<usize>,
    pub(crate) buf: BucketBuffer<T>,
}

/// The memory of a bucket, for a hook and its continuations: valid until the
/// iteration's finalize returns (which waits for the hook's future), and
/// touched by finalize then; so everything that uses it is `unsafe`, with
/// that contract.
pub struct BucketBuffer<T: Element> {
    data: *mut T,
    len: usize,
    pg: *mut sys::distc_pg,
    _t: PhantomData<T>,
}

impl<T: Element> Clone for BucketBuffer<T> {
    fn clone(&self) -> Self {
        BucketBuffer { data: self.data, len: self.len, pg: self.pg, _t: PhantomData }
    }
}

// SAFETY: sending the handle is harmless; every use of the memory it points to
// is an unsafe method whose caller keeps to the bucket's life (below).
unsafe impl<T: Element> Send for BucketBuffer<T> {}
unsafe impl<T: Element> Sync for BucketBuffer<T> {}

impl<T: Element> BucketBuffer<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Starts an allreduce of the whole buffer over the reducer's group.
    ///
    /// # Safety
    /// Only in the bucket's life: from its hook or a continuation of the future
    /// the hook returned, before that future completes (finalize then reads the
    /// buffer, and the reducer may free it); no collective started on the buffer
    /// may still be running, and no slice of it may be alive.
    pub unsafe fn all_reduce(&self, op: ReduceOp) -> Result<Future> {
        let (op, f) = op.raw();
        let o = OpOpts::new(f);
        let mut shape = [self.len as i64];
        let mut dl = host_tensor(self.data as *mut c_void, &mut shape, T::CODE, T::BITS);
        let mut w = ptr::null_mut();
        check(unsafe { sys::distc_allreduce(&mut w, self.pg, &mut dl, op, o.ptr()) })?;
        Ok(Future::from_raw(w))
    }

    /// The buffer's elements.
    ///
    /// # Safety
    /// No collective started on the buffer may be running (wait for its future, or
    /// be in a continuation of it), and no other slice of it may be alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self) -> &mut [T] {
        std::slice::from_raw_parts_mut(self.data, self.len)
    }
}

impl<T: Element> Bucket<T> {
    /// The bucket's memory (a handle continuations can keep).
    pub fn buffer(&self) -> BucketBuffer<T> {
        self.buf.clone()
    }

    /// Starts an allreduce of the bucket over the reducer's group.
    pub fn all_reduce(&self, op: ReduceOp) -> Result<Future> {
        // SAFETY: a Bucket is lent to its hook only (&Bucket, not Clone): the
        // bucket is alive and nothing else reduces it during the call.
        unsafe { self.buf.all_reduce(op) }
    }
}

/// The C side of a bucket hook: builds the Bucket, calls the closure, hands its future over.
pub(crate) extern "C" fn bucket_hook<T: Element, F>(
    out: *mut *mut sys::distc_work,
    pg: *mut sys::distc_pg,
    b: *const sys::distc_reducer_bucket,
    payload: *mut c_void,
) -> c_int
where
    F: Fn(&Bucket<T>) -> Result<Future> + Send + Sync + 'static,
{
    // SAFETY: the payload is the Box<F> registered with this function, released only with the hook.
    let f = unsafe { &*(payload as *const F) };
    let b = unsafe { &*b };
    let n = b.num_grads;
    let bucket = Bucket {
        index: b.index,
        is_last: b.is_last != 0,
        grads: unsafe { std::slice::from_raw_parts(b.grads, n) }.to_vec(),
        offsets: unsafe { std::slice::from_raw_parts(b.offsets, n) }.to_vec(),
        buf: BucketBuffer {
            data: unsafe { (*b.buffer).data } as *mut T,
            len: unsafe { *(*b.buffer).shape } as usize,
            pg,
            _t: PhantomData,
        },
    };
    match catch_unwind(AssertUnwindSafe(|| f(&bucket))) {
        Ok(Ok(fut)) => {
            unsafe { *out = fut.into_raw() };
            0
        }
        Ok(Err(e)) => report(&e),
        Err(_) => report(&Error::new(sys::DISTC_EINTERNAL, "a Rust bucket hook panicked")),
    }
}

pub(crate) extern "C" fn release_hook<F>(payload: *mut c_void) {
    drop(unsafe { Box::from_raw(payload as *mut F) });
}
