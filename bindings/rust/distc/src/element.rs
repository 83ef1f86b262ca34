//! Element types of buffers, and the DLPack descriptors built over slices.
use std::marker::PhantomData;
use std::os::raw::c_void;

use distc_sys as sys;

// DLPack's type codes (fixed by the spec; kDLBool arrived in DLPack 0.8).
pub(crate) const INT: u8 = 0;
const UINT: u8 = 1;
const FLOAT: u8 = 2;
const BFLOAT: u8 = 4;
const COMPLEX: u8 = 5;
const BOOL: u8 = 6;

/// An IEEE half-precision number, as its bits.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct F16(pub u16);

/// A bfloat16 number, as its bits.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BF16(pub u16);

impl F16 {
    /// Rounds `x` to the nearest half (ties to even); overflow gives infinity.
    pub fn from_f32(x: f32) -> F16 {
        let b = x.to_bits();
        let sign = ((b >> 16) & 0x8000) as u16;
        let exp = ((b >> 23) & 0xff) as i32;
        let man = b & 0x7f_ffff;
        if exp == 0xff {
            return F16(sign | 0x7c00 | if man != 0 { 0x200 } else { 0 });
        }
        let e = exp - 127 + 15;
        if e >= 0x1f {
            return F16(sign | 0x7c00);
        }
        if e <= 0 {
            if e < -10 {
                return F16(sign);
            }
            let m = man | 0x80_0000;
            let shift = (14 - e) as u32;
            let half = 1u32 << (shift - 1);
            let rest = m & ((1 << shift) - 1);
            let mut r = m >> shift;
            if rest > half || (rest == half && r & 1 == 1) {
                r += 1;
            }
            return F16(sign | r as u16);
        }
        let mut r = ((e as u32) << 10) | (man >> 13);
        let rest = man & 0x1fff;
        if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
            r += 1;
        }
        F16(sign | r as u16)
    }

    pub fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x3ff;
        let bits = if exp == 0 {
            if man == 0 {
                sign
            } else {
                // subnormal: normalise
                let mut e = 127 - 15 + 1;
                let mut m = man;
                while m & 0x400 == 0 {
                    m <<= 1;
                    e -= 1;
                }
                sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
            }
        } else if exp == 0x1f {
            sign | 0x7f80_0000 | (man << 13)
        } else {
            sign | ((exp + 127 - 15) << 23) | (man << 13)
        };
        f32::from_bits(bits)
    }
}

impl BF16 {
    /// Rounds `x` to the nearest bfloat16 (ties to even).
    pub fn from_f32(x: f32) -> BF16 {
        let b = x.to_bits();
        if x.is_nan() {
            return BF16(((b >> 16) | 0x40) as u16);
        }
        let round = 0x7fff + ((b >> 16) & 1);
        BF16(((b + round) >> 16) as u16)
    }

    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

/// A complex number of two f32 (DLPack complex64).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Complex32 {
    pub re: f32,
    pub im: f32,
}

/// A complex number of two f64 (DLPack complex128).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Complex64 {
    pub re: f64,
    pub im: f64,
}

/// A type distc can reduce and move: its DLPack dtype.
///
/// # Safety
/// `DTYPE` must describe the type's memory exactly (size and representation).
pub unsafe trait Element: Copy + Send + Sync + 'static {
    const CODE: u8;
    const BITS: u8;
    /// Not every bit pattern is a value (bool): what the library writes is
    /// made valid before Rust reads it ([`settle_bools`]).
    #[doc(hidden)]
    const IS_BOOL: bool = false;
}

unsafe impl Element for bool {
    const CODE: u8 = BOOL;
    const BITS: u8 = 8;
    const IS_BOOL: bool = true;
}

macro_rules! element {
    ($($t:ty => $code:expr, $bits:expr;)*) => {
        $(unsafe impl Element for $t {
            const CODE: u8 = $code;
            const BITS: u8 = $bits;
        })*
    };
}

/// Makes each of the `n` bytes at `p` 0 or 1: a peer may send any byte into a
/// bool buffer (a u8 sender, another language), and Rust may read only those two.
///
/// # Safety
/// `p` is valid for `n` bytes that nothing else reads or writes meanwhile.
pub(crate) unsafe fn settle_bools(p: *mut u8, n: usize) {
    for k in 0..n {
        let b = p.add(k);
        *b = (*b != 0) as u8;
    }
}

element! {
    i8 => INT, 8;
    u8 => UINT, 8;
    i16 => INT, 16;
    i32 => INT, 32;
    i64 => INT, 64;
    F16 => FLOAT, 16;
    BF16 => BFLOAT, 16;
    f32 => FLOAT, 32;
    f64 => FLOAT, 64;
    Complex32 => COMPLEX, 64;
    Complex64 => COMPLEX, 128;
}

/// A compact host-memory DLTensor of `shape` at `data`; `shape` must outlive its use.
pub(crate) fn host_tensor(data: *mut c_void, shape: &mut [i64], code: u8, bits: u8) -> sys::DLTensor {
    sys::DLTensor {
        data,
        device: sys::DLDevice { device_type: sys::kDLCPU, device_id: 0 },
        ndim: shape.len() as i32,
        dtype: sys::DLDataType { code, bits, lanes: 1 },
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

/// A one-dimensional DLTensor over a slice, valid for the borrow `'a`.
/// Boxed so that `shape` can point into it wherever the value moves.
pub(crate) struct Desc<'a> {
    shape: Box<i64>,
    pub(crate) dl: sys::DLTensor,
    // A bool buffer the library writes: settled when the descriptor goes (after
    // a blocking call), or by the scope once its operation is done (take_bools).
    bools: Option<(*mut u8, usize)>,
    _borrow: PhantomData<&'a [u8]>,
}

impl Drop for Desc<'_> {
    fn drop(&mut self) {
        if let Some((p, n)) = self.bools.take() {
            // SAFETY: the unique borrow this came from lasts as long as `self`, and
            // the call that wrote it has returned.
            unsafe { settle_bools(p, n) }
        }
    }
}

impl<'a> Desc<'a> {
    /// A buffer the library only reads.
    pub(crate) fn of<T: Element>(s: &'a [T]) -> Desc<'a> {
        Desc::raw(s.as_ptr() as *mut c_void, s.len(), T::CODE, T::BITS)
    }

    /// A buffer the library writes (its pointer comes from the unique borrow).
    pub(crate) fn of_mut<T: Element>(s: &'a mut [T]) -> Desc<'a> {
        let p = s.as_mut_ptr(); // one pointer for the library and the settling
        let mut d = Desc::raw(p as *mut c_void, s.len(), T::CODE, T::BITS);
        if T::IS_BOOL {
            d.bools = Some((p as *mut u8, s.len()));
        }
        d
    }

    /// The bool buffer to settle, for an operation that outlives this descriptor.
    pub(crate) fn take_bools(&mut self) -> Option<(*mut u8, usize)> {
        self.bools.take()
    }

    fn raw(data: *mut c_void, len: usize, code: u8, bits: u8) -> Desc<'a> {
        let mut shape = Box::new(len as i64);
        let dl = host_tensor(data, std::slice::from_mut(&mut *shape), code, bits);
        Desc { shape, dl, bools: None, _borrow: PhantomData }
    }

    pub(crate) fn ptr(&mut self) -> *mut sys::DLTensor {
        debug_assert!(std::ptr::eq(self.dl.shape, &*self.shape));
        &mut self.dl
    }
}

/// Descriptors of `parts` (one per rank, say), and the array of pointers the C API takes.
pub(crate) struct DescList<'a> {
    _descs: Vec<Desc<'a>>, // owns what `ptrs` point to
    ptrs: Vec<*mut sys::DLTensor>,
}

impl<'a> DescList<'a> {
    pub(crate) fn of<T: Element>(parts: impl Iterator<Item = &'a [T]>) -> DescList<'a> {
        DescList::from(parts.map(Desc::of).collect())
    }

    pub(crate) fn of_mut<T: Element>(parts: impl Iterator<Item = &'a mut [T]>) -> DescList<'a> {
        DescList::from(parts.map(Desc::of_mut).collect())
    }

    fn from(mut descs: Vec<Desc<'a>>) -> DescList<'a> {
        let ptrs = descs.iter_mut().map(|d| d.ptr()).collect();
        DescList { _descs: descs, ptrs }
    }

    pub(crate) fn as_ptr(&self) -> *const *mut sys::DLTensor {
        self.ptrs.as_ptr()
    }
}
