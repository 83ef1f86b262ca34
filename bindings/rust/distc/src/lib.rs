//! distc from Rust: stores, process groups and the DDP reducer of libdistc,
//! with owned handles (`Drop` frees them), `Result<T, Error>` carrying the
//! library's messages, and collectives over slices of [`Element`] types.
//!
//! ```no_run
//! let pg = distc::ProcessGroup::from_url("env://", &Default::default())?;
//! let mut grad = vec![pg.rank() as f32; 4];
//! pg.all_reduce(&mut grad, distc::ReduceOp::Sum)?;
//! // asynchronous work borrows its buffers until the scope has waited for it
//! let mut a = vec![1.0f64; 1024];
//! pg.scope(|s| -> distc::Result<()> {
//!     let w = s.all_reduce(&mut a, distc::ReduceOp::Avg)?;
//!     w.wait(None)
//! })?;
//! # Ok::<(), distc::Error>(())
//! ```
//!
//! A buffer in use by an asynchronous operation cannot be touched before the
//! scope has waited for it: this does not compile.
//!
//! ```compile_fail
//! # let pg = distc::ProcessGroup::from_url("env://", &Default::default()).unwrap();
//! let mut a = vec![1.0f32; 4];
//! pg.scope(|s| {
//!     let _w = s.all_reduce(&mut a, distc::ReduceOp::Sum).unwrap();
//!     a[0] = 2.0; // error: `a` is borrowed by the operation until the scope ends
//! });
//! ```
mod element;
mod error;
mod future;
mod group;
mod memory;
mod reducer;
mod store;

pub use distc_sys as sys;
pub use element::{Complex32, Complex64, Element, BF16, F16};
pub use error::{Error, ErrorKind, Result};
pub use future::{Bucket, BucketBuffer, Future};
pub use group::{dump_trace_all, GroupOptions, ProcessGroup, ReduceOp, Scope, Work};
pub use memory::SharedBuffer;
pub use reducer::{PowerSgdOptions, Reducer, ReducerOptions};
pub use store::{rendezvous, version, Store, TcpStoreOptions};
