//! Memory the ranks of a host share (`distc_mem_alloc`, `distc/mem.h`): the
//! shared-memory transport's large collectives copy and reduce between such
//! buffers with loads and stores instead of the kernel's copies between
//! processes. Any slice works with every call; this is an optimisation only.

use std::ffi::c_void;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};
use std::slice;

use crate::element::Element;
use crate::error::{check, Error, Result};
use distc_sys as sys;

/// `len` elements of `T` in shared memory, zeroed; a slice through `Deref`,
/// freed on drop.
///
/// ```no_run
/// let pg = distc::ProcessGroup::from_url("env://", &Default::default())?;
/// let mut grad = distc::SharedBuffer::<f32>::zeroed(1 << 20)?;
/// grad.fill(pg.rank() as f32);
/// pg.all_reduce(&mut grad, distc::ReduceOp::Sum)?;
/// # Ok::<(), distc::Error>(())
/// ```
pub struct SharedBuffer<T: Element> {
    ptr: NonNull<T>,
    len: usize,
}

// The memory is owned, like a Vec's.
unsafe impl<T: Element> Send for SharedBuffer<T> {}
unsafe impl<T: Element> Sync for SharedBuffer<T> {}

impl<T: Element> SharedBuffer<T> {
    /// `len` zeroed elements (a zero byte pattern is a value of every
    /// [`Element`]: 0, 0.0 or false). Fails for a size past 2^44 bytes, or
    /// where the memory or a file descriptor cannot be had.
    pub fn zeroed(len: usize) -> Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::invalid(format!("SharedBuffer::zeroed: {} elements do not fit in memory", len)))?;
        let mut p: *mut c_void = ptr::null_mut();
        check(unsafe { sys::distc_mem_alloc(&mut p, bytes.max(1)) })?;
        // Page-aligned, so aligned for every element type.
        let ptr = NonNull::new(p as *mut T).ok_or_else(|| Error::invalid("distc_mem_alloc returned NULL"))?;
        Ok(SharedBuffer { ptr, len })
    }
}

impl<T: Element> Deref for SharedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        unsafe { slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Element> DerefMut for SharedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        unsafe { slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Element> Drop for SharedBuffer<T> {
    fn drop(&mut self) {
        // Ours, from distc_mem_alloc: freeing it cannot fail.
        unsafe { sys::distc_mem_free(self.ptr.as_ptr() as *mut c_void) };
    }
}
