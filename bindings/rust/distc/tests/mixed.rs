//! Rank 2 of the mixed-language job (tests/mixed/run_mixed.py): Rust. Runs
//! only when the driver sets DISTC_MIXED_RANK; a plain `cargo test` skips it.
use distc::{GroupOptions, ProcessGroup, ReduceOp};
use std::time::Duration;

#[test]
fn mixed_rank() {
    if std::env::var("DISTC_MIXED_RANK").is_err() {
        return;
    }
    let opts = GroupOptions { timeout: Some(Duration::from_secs(60)), ..Default::default() };
    let pg = ProcessGroup::from_url("env://", &opts).unwrap();
    let (r, n) = (pg.rank(), pg.size());
    let mut s = [r as i64 + 1; 4];
    pg.all_reduce(&mut s, ReduceOp::Sum).unwrap();
    let mut b = [0f64; 2];
    pg.broadcast(&mut b, 1).unwrap();
    let mut all = [0i32; 3];
    pg.all_gather(&mut all, &[r * 10]).unwrap();
    let names = pg.all_gather_bytes(b"Rust").unwrap();
    let ok = s == [6; 4] && b == [1.5, 2.5] && all == [0, 10, 20] && names == [b"C".to_vec(), b"Python".to_vec(), b"Rust".to_vec()];
    println!("MIXED {} Rust rank {r} of {n}: sum {}, broadcast {b:?}, allgather {all:?}", if ok { "OK" } else { "WRONG" }, s[0]);
    pg.barrier().unwrap();
    assert!(ok);
}
