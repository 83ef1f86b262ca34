//! Allreduce of a vector, started by a launcher:
//!
//!     cargo build --offline --manifest-path bindings/rust/Cargo.toml --example allreduce
//!     build/distc-run -n 4 bindings/rust/target/debug/examples/allreduce
//!
//! Each rank holds i + rank at index i; after the sum every rank holds
//! size * i + size * (size - 1) / 2.
fn main() -> distc::Result<()> {
    let pg = distc::ProcessGroup::from_url("env://", &Default::default())?;
    let (rank, size) = (pg.rank(), pg.size());
    let n = 1 << 16;
    let mut x: Vec<f64> = (0..n).map(|i| (i + rank) as f64).collect();
    pg.all_reduce(&mut x, distc::ReduceOp::Sum)?;
    let ok = x.iter().enumerate().all(|(i, &v)| v == (size as usize * i) as f64 + (size * (size - 1) / 2) as f64);
    println!("rank {rank} of {size}: allreduce(SUM) of {n} f64 {}: x[..3] = {:?}", if ok { "ok" } else { "WRONG" }, &x[..3]);
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
