//! `Result<T, Error>`: every failure carries the C status code and the
//! library's message (`distc_error_last()`: it names the function, the
//! argument and, where relevant, the peer).
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_int;

use distc_sys as sys;

/// What kind of failure an [`Error`] is (the C status codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    Timeout,
    NotFound,
    NotSupported,
    /// A peer or server failed or closed the connection.
    Remote,
    Aborted,
    /// The object is in the wrong state for this call.
    State,
    NoMemory,
    Backend,
    Internal,
    Io,
    Protocol,
    /// A code this version does not know.
    Other(i32),
}

/// A failed call: its code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: i32,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn new(code: i32, message: impl Into<String>) -> Self {
        Error { code, message: message.into() }
    }

    /// The calling thread's last failure, as the library recorded it.
    pub(crate) fn last(code: c_int) -> Self {
        // SAFETY: distc_error_last never returns NULL and the string is valid until the next call.
        let msg = unsafe { CStr::from_ptr(sys::distc_error_last()) }.to_string_lossy().into_owned();
        Error { code, message: msg }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(sys::DISTC_EINVAL, message)
    }

    pub fn kind(&self) -> ErrorKind {
        match self.code {
            sys::DISTC_EINVAL => ErrorKind::InvalidArgument,
            sys::DISTC_ETIMEOUT => ErrorKind::Timeout,
            sys::DISTC_ENOTFOUND => ErrorKind::NotFound,
            sys::DISTC_ENOTSUP => ErrorKind::NotSupported,
            sys::DISTC_EREMOTE => ErrorKind::Remote,
            sys::DISTC_EABORTED => ErrorKind::Aborted,
            sys::DISTC_ESTATE => ErrorKind::State,
            sys::DISTC_ENOMEM => ErrorKind::NoMemory,
            sys::DISTC_EBACKEND => ErrorKind::Backend,
            sys::DISTC_EINTERNAL => ErrorKind::Internal,
            sys::DISTC_EIO => ErrorKind::Io,
            sys::DISTC_EPROTO => ErrorKind::Protocol,
            c => ErrorKind::Other(c),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: distc_strerror returns a static string for any code.
        let name = unsafe { CStr::from_ptr(sys::distc_strerror(self.code)) }.to_string_lossy();
        write!(f, "{} ({}): {}", name, self.code, self.message)
    }
}

impl std::error::Error for Error {}

/// 0 (or a positive polling status) passes; a negative code becomes an Error.
pub(crate) fn check(rc: c_int) -> Result<c_int> {
    if rc < 0 {
        Err(Error::last(rc))
    } else {
        Ok(rc)
    }
}
