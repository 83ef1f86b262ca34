//! Ranks as real processes: this test binary runs itself under distc-run
//! (torchrun's environment, env:// rendezvous), once for a job and once for
//! a job where a rank dies.
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use distc::{ErrorKind, GroupOptions, ProcessGroup, ReduceOp, SharedBuffer};

const CHILD: &str = "DISTC_RS_CHILD";

fn distc_run() -> PathBuf {
    let build = std::env::var("DISTC_BUILD")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../build"));
    build.join("distc-run")
}

/// Runs the test `name` of this binary as `n` ranks; returns the launcher's output.
fn launch(n: usize, name: &str) -> String {
    let out = Command::new(distc_run())
        .args(["-n", &n.to_string()])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("cannot run distc-run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "distc-run failed ({}):\n{text}", out.status);
    text
}

fn in_child() -> bool {
    std::env::var(CHILD).is_ok()
}

fn group() -> ProcessGroup {
    let opts = GroupOptions { timeout: Some(Duration::from_secs(5)), ..Default::default() };
    ProcessGroup::from_url("env://", &opts).unwrap()
}

#[test]
fn rank_job() {
    if !in_child() {
        return;
    }
    let pg = group();
    let (r, n) = (pg.rank(), pg.size());
    let mut x = vec![r as f32 + 1.0; 1 << 16];
    pg.all_reduce(&mut x, ReduceOp::Sum).unwrap();
    assert!(x.iter().all(|&v| v == (n * (n + 1) / 2) as f32));
    let mut b = [r; 3];
    pg.broadcast(&mut b, n - 1).unwrap();
    assert_eq!(b, [n - 1; 3]);
    let all = pg.all_gather_bytes(format!("rank {r}").as_bytes()).unwrap();
    assert_eq!(all.len(), n as usize);
    // Shared memory (distc_mem_alloc), large enough to go in place on any host.
    let mut s = SharedBuffer::<f32>::zeroed(3 << 20).unwrap();
    assert!(s.iter().all(|&v| v == 0.0));
    s.fill(r as f32 + 1.0);
    pg.all_reduce(&mut s, ReduceOp::Sum).unwrap();
    assert!(s.iter().all(|&v| v == (n * (n + 1) / 2) as f32));
    println!("RANK-OK {r} of {n}");
}

#[test]
fn job_in_processes() {
    if in_child() {
        return;
    }
    let out = launch(3, "rank_job");
    for r in 0..3 {
        assert!(out.contains(&format!("RANK-OK {r} of 3")), "{out}");
    }
}

#[test]
fn dead_rank_job() {
    if !in_child() {
        return;
    }
    let pg = group();
    let mut x = [1f64; 8];
    pg.all_reduce(&mut x, ReduceOp::Sum).unwrap();
    if pg.rank() == 2 {
        std::process::exit(0); // dies without a word
    }
    let t0 = Instant::now();
    let e = pg.all_reduce(&mut x, ReduceOp::Sum).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Remote | ErrorKind::Timeout), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5 + 3), "{:?}", t0.elapsed());
    println!("SURVIVOR {} got: {e}", pg.rank());
}

#[test]
fn a_dead_rank_gives_errors_not_hangs() {
    if in_child() {
        return;
    }
    let out = launch(3, "dead_rank_job");
    for r in 0..2 {
        assert!(out.contains(&format!("SURVIVOR {r} got")), "{out}");
    }
    assert!(out.contains("allreduce #2"), "the error names the operation:\n{out}");
}
