//! Key-value stores (torch.distributed's semantics) and rendezvous by URL.
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::ptr::{self, NonNull};
use std::time::Duration;

use distc_sys as sys;

use crate::error::{check, Error, Result};

/// A store handle. Every store may be used from several threads at once
/// (the header documents it), so it is `Send` and `Sync`.
#[derive(Debug)]
pub struct Store {
    raw: NonNull<sys::distc_store>,
}

unsafe impl Send for Store {}
unsafe impl Sync for Store {}

pub(crate) fn cstr(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid(format!("{what} contains a NUL byte")))
}

pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// Takes ownership of a distc_buf's bytes.
pub(crate) fn take(buf: &mut sys::distc_buf) -> Vec<u8> {
    let v = if buf.data.is_null() {
        Vec::new()
    } else {
        // SAFETY: the library handed us `size` bytes at `data`.
        unsafe { std::slice::from_raw_parts(buf.data, buf.size) }.to_vec()
    };
    // SAFETY: the buffer came from the library; dispose is the matching release.
    unsafe { sys::distc_buf_dispose(buf) };
    v
}

fn empty_buf() -> sys::distc_buf {
    sys::distc_buf { data: ptr::null_mut(), size: 0 }
}

/// Options of [`Store::tcp`]; `Default` gives a client of 127.0.0.1 with c10d's 300 s timeout.
#[derive(Debug, Clone)]
pub struct TcpStoreOptions {
    pub host: String,
    /// 0 with `is_server`: pick a free port (read it with [`Store::port`]).
    pub port: u16,
    pub is_server: bool,
    /// Participants including the server's process; None: unknown.
    pub world_size: Option<i32>,
    pub wait_for_workers: bool,
    pub timeout: Duration,
}

impl Default for TcpStoreOptions {
    fn default() -> Self {
        TcpStoreOptions {
            host: "127.0.0.1".into(),
            port: 0,
            is_server: false,
            world_size: None,
            wait_for_workers: true,
            timeout: Duration::from_secs(300),
        }
    }
}

impl Store {
    fn wrap(raw: *mut sys::distc_store) -> Result<Store> {
        NonNull::new(raw).map(|raw| Store { raw }).ok_or_else(|| Error::invalid("the library returned no store"))
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::distc_store {
        self.raw.as_ptr()
    }

    /// An in-process store shared by every thread that holds it.
    pub fn hash() -> Result<Store> {
        let mut out = ptr::null_mut();
        check(unsafe { sys::distc_store_new_hash(&mut out) })?;
        Store::wrap(out)
    }

    /// A store in a file shared by processes; the last of `num_workers` users removes it.
    pub fn file(path: &str, num_workers: i32) -> Result<Store> {
        let p = cstr(path, "path")?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::distc_store_new_file(&mut out, p.as_ptr(), num_workers) })?;
        Store::wrap(out)
    }

    /// A TCP store (wire-compatible with PyTorch's TCPStore): a client, and with
    /// `is_server` the server too.
    pub fn tcp(opts: &TcpStoreOptions) -> Result<Store> {
        let host = cstr(&opts.host, "host")?;
        let mut o: sys::distc_tcp_store_options = unsafe { std::mem::zeroed() };
        check(unsafe { sys::distc_tcp_store_options_init(&mut o, sys::DISTC_TCP_STORE_OPTIONS_VERSION) })?;
        o.host = host.as_ptr();
        o.port = opts.port as i32;
        o.is_server = opts.is_server as i32;
        o.world_size = opts.world_size.unwrap_or(-1);
        o.wait_for_workers = opts.wait_for_workers as i32;
        o.timeout_ms = millis(opts.timeout);
        let mut out = ptr::null_mut();
        check(unsafe { sys::distc_store_new_tcp(&mut out, &o) })?;
        Store::wrap(out)
    }

    /// Every key of `inner` under `prefix` + "/" (c10d's PrefixStore); holds its own reference.
    pub fn prefix(prefix: &str, inner: &Store) -> Result<Store> {
        let p = cstr(prefix, "prefix")?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::distc_store_new_prefix(&mut out, p.as_ptr(), inner.as_ptr()) })?;
        Store::wrap(out)
    }

    /// The port of a TCP store.
    pub fn port(&self) -> Result<u16> {
        let mut p = 0;
        check(unsafe { sys::distc_store_tcp_port(&mut p, self.as_ptr()) })?;
        Ok(p as u16)
    }

    pub fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let k = cstr(key, "key")?;
        check(unsafe { sys::distc_store_set(self.as_ptr(), k.as_ptr(), value.as_ptr().cast(), value.len()) })?;
        Ok(())
    }

    /// The value of `key`, waiting up to the store's timeout for it.
    pub fn get(&self, key: &str) -> Result<Vec<u8>> {
        let k = cstr(key, "key")?;
        let mut b = empty_buf();
        check(unsafe { sys::distc_store_get(&mut b, self.as_ptr(), k.as_ptr()) })?;
        Ok(take(&mut b))
    }

    /// Adds `delta` to the counter `key` and returns the new value.
    pub fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let k = cstr(key, "key")?;
        let mut v = 0;
        check(unsafe { sys::distc_store_add(&mut v, self.as_ptr(), k.as_ptr(), delta) })?;
        Ok(v)
    }

    /// Sets `key` to `desired` if it holds `expected` (or is missing and `expected` is empty).
    pub fn compare_set(&self, key: &str, expected: &[u8], desired: &[u8]) -> Result<Vec<u8>> {
        let k = cstr(key, "key")?;
        let mut b = empty_buf();
        check(unsafe {
            sys::distc_store_compare_set(&mut b, self.as_ptr(), k.as_ptr(), expected.as_ptr().cast(), expected.len(),
                                         desired.as_ptr().cast(), desired.len())
        })?;
        Ok(take(&mut b))
    }

    fn with_keys<R>(keys: &[&str], f: impl FnOnce(&[*const c_char]) -> Result<R>) -> Result<R> {
        let owned = keys.iter().map(|k| cstr(k, "key")).collect::<Result<Vec<_>>>()?;
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        f(&ptrs)
    }

    /// True when every key exists (never waits).
    pub fn check(&self, keys: &[&str]) -> Result<bool> {
        Store::with_keys(keys, |p| {
            let mut ok = 0;
            check(unsafe { sys::distc_store_check(&mut ok, self.as_ptr(), p.as_ptr(), p.len()) })?;
            Ok(ok != 0)
        })
    }

    /// Waits until every key exists, up to `timeout` (None: the store's).
    pub fn wait(&self, keys: &[&str], timeout: Option<Duration>) -> Result<()> {
        let ms = timeout.map_or(sys::DISTC_TIMEOUT_DEFAULT as i64, millis);
        Store::with_keys(keys, |p| {
            check(unsafe { sys::distc_store_wait(self.as_ptr(), p.as_ptr(), p.len(), ms) })?;
            Ok(())
        })
    }

    /// Deletes `key`; true if it existed.
    pub fn delete_key(&self, key: &str) -> Result<bool> {
        let k = cstr(key, "key")?;
        let mut d = 0;
        check(unsafe { sys::distc_store_delete_key(&mut d, self.as_ptr(), k.as_ptr()) })?;
        Ok(d != 0)
    }

    pub fn num_keys(&self) -> Result<i64> {
        let mut n = 0;
        check(unsafe { sys::distc_store_num_keys(&mut n, self.as_ptr()) })?;
        Ok(n)
    }

    pub fn append(&self, key: &str, value: &[u8]) -> Result<()> {
        let k = cstr(key, "key")?;
        check(unsafe { sys::distc_store_append(self.as_ptr(), k.as_ptr(), value.as_ptr().cast(), value.len()) })?;
        Ok(())
    }

    pub fn multi_get(&self, keys: &[&str]) -> Result<Vec<Vec<u8>>> {
        Store::with_keys(keys, |p| {
            let mut bufs: Vec<sys::distc_buf> = (0..p.len()).map(|_| empty_buf()).collect();
            check(unsafe { sys::distc_store_multi_get(bufs.as_mut_ptr(), self.as_ptr(), p.as_ptr(), p.len()) })?;
            Ok(bufs.iter_mut().map(take).collect())
        })
    }

    pub fn multi_set(&self, keys: &[&str], values: &[&[u8]]) -> Result<()> {
        if keys.len() != values.len() {
            return Err(Error::invalid(format!("multi_set: {} keys and {} values", keys.len(), values.len())));
        }
        Store::with_keys(keys, |p| {
            let vals: Vec<*const std::os::raw::c_void> = values.iter().map(|v| v.as_ptr().cast()).collect();
            let lens: Vec<usize> = values.iter().map(|v| v.len()).collect();
            check(unsafe { sys::distc_store_multi_set(self.as_ptr(), p.as_ptr(), vals.as_ptr(), lens.as_ptr(), p.len()) })?;
            Ok(())
        })
    }

    /// The default timeout of get, wait and multi_get.
    pub fn set_timeout(&self, timeout: Duration) -> Result<()> {
        check(unsafe { sys::distc_store_set_timeout(self.as_ptr(), millis(timeout)) })?;
        Ok(())
    }

    pub fn timeout(&self) -> Result<Duration> {
        let mut ms = 0;
        check(unsafe { sys::distc_store_get_timeout(&mut ms, self.as_ptr()) })?;
        Ok(Duration::from_millis(ms as u64))
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: we own the handle; groups and prefix stores hold their own references.
        unsafe { sys::distc_store_free(self.raw.as_ptr()) }
    }
}

/// The store `url` names (env://, tcp://, file://), this process's rank and the world size.
pub fn rendezvous(url: &str) -> Result<(Store, i32, i32)> {
    let u = cstr(url, "url")?;
    let (mut out, mut rank, mut size) = (ptr::null_mut(), -1, -1);
    check(unsafe { sys::distc_rendezvous(&mut out, &mut rank, &mut size, u.as_ptr(), ptr::null()) })?;
    Ok((Store::wrap(out)?, rank, size))
}

/// The library's version, "MAJOR.MINOR.PATCH".
pub fn version() -> String {
    unsafe { CStr::from_ptr(sys::distc_version()) }.to_string_lossy().into_owned()
}
