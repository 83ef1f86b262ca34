//! Multi-rank tests with ranks as threads over one hash store (the GIL-free
//! equivalent of processes for everything but crashes: tests/processes.rs).
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use distc::{Complex32, ErrorKind, GroupOptions, ProcessGroup, ReduceOp, Reducer, ReducerOptions, Store, BF16, F16};

fn ranks<R: Send + 'static>(size: i32, f: impl Fn(ProcessGroup) -> R + Send + Sync + 'static) -> Vec<R> {
    let store = Arc::new(Store::hash().unwrap());
    let f = Arc::new(f);
    let hs: Vec<_> = (0..size)
        .map(|r| {
            let (store, f) = (store.clone(), f.clone());
            thread::spawn(move || {
                let opts = GroupOptions { timeout: Some(Duration::from_secs(20)), ..Default::default() };
                f(ProcessGroup::new(&store, r, size, &opts).unwrap())
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
}

#[test]
fn store_operations_and_errors() {
    let s = Store::hash().unwrap();
    s.set("k", b"v\0w").unwrap();
    assert_eq!(s.get("k").unwrap(), b"v\0w");
    assert_eq!(s.add("n", 5).unwrap(), 5);
    assert_eq!(s.add("n", -2).unwrap(), 3);
    assert_eq!(s.compare_set("c", b"", b"x").unwrap(), b"x");
    assert_eq!(s.compare_set("c", b"y", b"z").unwrap(), b"x");
    assert!(s.check(&["k", "n"]).unwrap());
    assert!(!s.check(&["k", "missing"]).unwrap());
    s.append("a", b"12").unwrap();
    s.append("a", b"34").unwrap();
    assert_eq!(s.get("a").unwrap(), b"1234");
    s.multi_set(&["m1", "m2"], &[b"1", b"22"]).unwrap();
    assert_eq!(s.multi_get(&["m1", "m2"]).unwrap(), vec![b"1".to_vec(), b"22".to_vec()]);
    assert!(s.delete_key("k").unwrap());
    assert!(!s.delete_key("k").unwrap());
    assert!(s.num_keys().unwrap() >= 4);
    s.set_timeout(Duration::from_millis(100)).unwrap();
    assert_eq!(s.timeout().unwrap(), Duration::from_millis(100));
    let t0 = Instant::now();
    let e = s.get("never").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert!(e.message.contains("never"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    let e = s.wait(&["nope"], Some(Duration::from_millis(50))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert_eq!(s.set("bad\0key", b"").unwrap_err().kind(), ErrorKind::InvalidArgument);
    s.set("txt", b"abc").unwrap();
    assert_eq!(s.add("txt", 1).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert!(s.multi_set(&["a"], &[]).is_err());
    let p = Store::prefix("pre", &s).unwrap();
    p.set("x", b"1").unwrap();
    drop(s); // the prefix store holds its own reference
    assert_eq!(p.get("x").unwrap(), b"1");
    assert!(Store::file("/nonexistent-dir/x/y", 1).is_err());
}

#[test]
fn tcp_store_server_and_client() {
    let server = Store::tcp(&distc::TcpStoreOptions { is_server: true, wait_for_workers: false, ..Default::default() })
        .unwrap();
    let port = server.port().unwrap();
    let client = Store::tcp(&distc::TcpStoreOptions { port, timeout: Duration::from_secs(10), ..Default::default() })
        .unwrap();
    client.set("from-client", b"hi").unwrap();
    assert_eq!(server.get("from-client").unwrap(), b"hi");
}

#[test]
fn collectives_on_every_element_type() {
    for size in 1..=4 {
        ranks(size, move |pg| {
            let r = pg.rank();
            let n = pg.size();
            assert_eq!(pg.transport(r).unwrap(), "self");
            if n > 1 {
                assert_eq!(pg.transport((r + 1) % n).unwrap(), "shm");
            }
            assert!(pg.transport(n).is_err());
            let tri = n * (n + 1) / 2;
            let mut f = vec![(r + 1) as f32; 5];
            pg.all_reduce(&mut f, ReduceOp::Sum).unwrap();
            assert_eq!(f, vec![tri as f32; 5]);
            let mut d = vec![(r + 1) as f64; 3];
            pg.all_reduce(&mut d, ReduceOp::Avg).unwrap();
            assert_eq!(d, vec![tri as f64 / n as f64; 3]);
            let mut i = vec![r as i64; 2];
            pg.all_reduce(&mut i, ReduceOp::Max).unwrap();
            assert_eq!(i, vec![(n - 1) as i64; 2]);
            let mut u = vec![1u8 << r; 2];
            pg.all_reduce(&mut u, ReduceOp::Bor).unwrap();
            assert_eq!(u, vec![((1u32 << n) - 1) as u8; 2]);
            let mut b = vec![r == 0, true];
            pg.all_reduce(&mut b, ReduceOp::Band).unwrap();
            assert_eq!(b, vec![n == 1, true]);
            let mut h = vec![F16::from_f32(r as f32 + 0.5); 3];
            pg.all_reduce(&mut h, ReduceOp::Sum).unwrap();
            assert_eq!(h[0].to_f32(), (0..n).map(|q| q as f32 + 0.5).sum::<f32>());
            let mut bf = vec![BF16::from_f32(2.0); 3];
            pg.all_reduce(&mut bf, ReduceOp::Product).unwrap();
            assert_eq!(bf[2].to_f32(), 2f32.powi(n));
            let mut c = vec![Complex32 { re: r as f32, im: 1.0 }; 2];
            pg.all_reduce(&mut c, ReduceOp::PremulSum(2.0)).unwrap();
            assert_eq!(c[1], Complex32 { re: 2.0 * (tri - n) as f32, im: 2.0 * n as f32 });
            let mut i8s = vec![-(r as i8); 2];
            pg.all_reduce(&mut i8s, ReduceOp::Min).unwrap();
            assert_eq!(i8s, vec![-(n as i8 - 1); 2]);
            let mut i16s = vec![r as i16 + 1; 2];
            pg.all_reduce(&mut i16s, ReduceOp::Product).unwrap();
            assert_eq!(i16s[0], (1..=n as i16).product::<i16>());
            let mut i32s = vec![1i32 << r; 1];
            pg.all_reduce(&mut i32s, ReduceOp::Bxor).unwrap();
            assert_eq!(i32s[0], (1 << n) - 1);
            // refused combinations say so
            let e = pg.all_reduce(&mut vec![1.0f32], ReduceOp::Band).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.message.contains("BAND"), "{e}");
        });
    }
}

#[test]
fn rooted_gathers_scatters_and_all_to_all() {
    for size in 1..=4 {
        ranks(size, move |pg| {
            let (r, n) = (pg.rank(), pg.size());
            for root in 0..n {
                let mut x = vec![r * 10; 3];
                pg.broadcast(&mut x, root).unwrap();
                assert_eq!(x, vec![root * 10; 3]);
                let mut y = vec![r + 1; 2];
                pg.reduce(&mut y, root, ReduceOp::Sum).unwrap();
                assert_eq!(y, if r == root { vec![n * (n + 1) / 2; 2] } else { vec![r + 1; 2] });
                let mut g = vec![0i32; 2 * n as usize];
                pg.gather(if r == root { Some(&mut g) } else { None }, &[r, -r], root).unwrap();
                if r == root {
                    assert_eq!(g, (0..n).flat_map(|q| [q, -q]).collect::<Vec<_>>());
                }
                let input: Vec<i32> = (0..n).flat_map(|q| [q * 100 + root; 2]).collect();
                let mut out = vec![0i32; 2];
                pg.scatter(&mut out, if r == root { Some(&input) } else { None }, root).unwrap();
                assert_eq!(out, vec![r * 100 + root; 2]);
            }
            let mut all = vec![0f32; 2 * n as usize];
            pg.all_gather(&mut all, &[r as f32, 0.5]).unwrap();
            assert_eq!(all, (0..n).flat_map(|q| [q as f32, 0.5]).collect::<Vec<_>>());
            let input: Vec<i64> = (0..n as i64).map(|j| j + 1).collect();
            let mut rs = vec![0i64; 1];
            pg.reduce_scatter(&mut rs, &input, ReduceOp::Sum).unwrap();
            assert_eq!(rs[0], (r as i64 + 1) * n as i64);
            let input: Vec<i32> = (0..n).map(|j| 10 * r + j).collect();
            let mut out = vec![0i32; n as usize];
            pg.all_to_all(&mut out, &input).unwrap();
            assert_eq!(out, (0..n).map(|j| 10 * j + r).collect::<Vec<_>>());
            // uneven: rank r sends j + 1 elements to rank j
            let in_splits: Vec<i64> = (0..n as i64).map(|j| j + 1).collect();
            let out_splits = vec![r as i64 + 1; n as usize];
            let input: Vec<i32> = (0..n).flat_map(|j| vec![10 * r + j; j as usize + 1]).collect();
            let mut out = vec![0i32; (n * (r + 1)) as usize];
            pg.all_to_all_v(&mut out, &input, Some(&out_splits), Some(&in_splits)).unwrap();
            assert_eq!(out, (0..n).flat_map(|j| vec![10 * j + r; r as usize + 1]).collect::<Vec<_>>());
            assert!(pg.all_gather(&mut [0f32; 1], &[1.0, 2.0]).is_err());
            pg.barrier().unwrap();
        });
    }
}

#[test]
fn point_to_point_bytes_subgroups() {
    ranks(3, |pg| {
        let (r, n) = (pg.rank(), pg.size());
        if r == 0 {
            let mut seen = vec![];
            for _ in 1..n {
                let mut x = [0i32];
                let src = pg.recv(&mut x, None, 7).unwrap();
                assert_eq!(x[0], 100 + src);
                seen.push(src);
            }
            seen.sort();
            assert_eq!(seen, vec![1, 2]);
        } else {
            pg.send(&[100 + r], 0, 7).unwrap();
        }
        let all = pg.all_gather_bytes(&vec![b'x'; r as usize]).unwrap();
        assert_eq!(all, (0..n).map(|q| vec![b'x'; q as usize]).collect::<Vec<_>>());
        assert_eq!(pg.broadcast_bytes(if r == 1 { b"one" } else { b"" }, 1).unwrap(), b"one");
        let sub = pg.new_subgroup(&[0, 2]).unwrap();
        assert_eq!(sub.is_some(), r != 1);
        if let Some(s) = sub {
            let mut x = [r];
            s.all_reduce(&mut x, ReduceOp::Sum).unwrap();
            assert_eq!(x[0], 2);
            assert_eq!(s.global_rank(s.rank()).unwrap(), r);
        }
        let half = pg.split(if r == 0 { -1 } else { 0 }, -r).unwrap();
        assert_eq!(half.is_some(), r != 0);
        if let Some(h) = half {
            assert_eq!(h.rank(), if r == 2 { 0 } else { 1 });
        }
    });
}

#[test]
fn scoped_async_work() {
    ranks(2, |pg| {
        let r = pg.rank();
        let mut a = vec![r as f64; 1000];
        let mut b = vec![0f32; 4];
        let mut ring = [0i64; 2];
        let send = [r as i64; 2];
        let mine = [r as f32 + 1.0, 0.0];
        let (seq_a, seq_b) = pg
            .scope(|s| -> distc::Result<(u64, u64)> {
                let wa = s.all_reduce(&mut a, ReduceOp::Sum)?;
                let wb = s.all_gather(&mut b, &mine)?;
                let _rv = s.recv(&mut ring, Some(1 - r), 3)?;
                let _sd = s.send(&send, 1 - r, 3)?;
                wa.wait(None)?;
                assert!(wa.test()?);
                Ok((wa.seq(), wb.seq()))
            })
            .unwrap();
        // the scope waited for every operation: the buffers are final now
        assert_eq!(a, vec![1.0; 1000]);
        assert_eq!(b, vec![1.0, 0.0, 2.0, 0.0]);
        assert_eq!(ring, [1 - r as i64; 2]);
        assert!(seq_b > seq_a);
    });
}

#[test]
fn timeout_and_abort() {
    ranks(2, |pg| {
        if pg.rank() == 0 {
            let t0 = Instant::now();
            let mut x = [1f32];
            let e = pg.scope(|s| -> distc::Result<()> {
                let w = s.all_reduce(&mut x, ReduceOp::Sum)?;
                assert_eq!(w.wait(Some(Duration::from_millis(50))).unwrap_err().kind(), ErrorKind::Timeout);
                pg.abort()?;
                w.wait(None)
            });
            assert_eq!(e.unwrap_err().kind(), ErrorKind::Aborted);
            assert!(t0.elapsed() < Duration::from_secs(10));
            assert_eq!(pg.barrier().unwrap_err().kind(), ErrorKind::Aborted);
        } else {
            thread::sleep(Duration::from_millis(300));
        }
    });
}

#[test]
fn reducer_averages_with_and_without_views() {
    for views in [false, true] {
        ranks(3, move |pg| {
            let r = pg.rank() as f32;
            let opts = ReducerOptions {
                bucket_cap_bytes: 64,
                first_bucket_bytes: 64,
                gradient_as_bucket_view: views,
                ..Default::default()
            };
            let lens = [20usize, 3, 40];
            let mut red = Reducer::<f32>::new(&pg, &lens, &opts).unwrap();
            assert!(red.num_buckets() >= 2);
            for step in 0..3 {
                red.prepare_for_backward(&[]).unwrap();
                for i in (0..lens.len()).rev() {
                    red.grad_mut(i).fill(r + step as f32 + i as f32);
                    red.mark_ready(i).unwrap();
                }
                red.finalize().unwrap();
                for i in 0..lens.len() {
                    assert!(red.grad(i).iter().all(|&g| g == 1.0 + step as f32 + i as f32), "views {views}");
                }
            }
            let (bytes, _, _) = red.bucket_stats(0).unwrap();
            assert!(bytes > 0);
            red.prepare_for_backward(&[]).unwrap();
            red.mark_ready(0).unwrap();
            assert_eq!(red.mark_ready(0).unwrap_err().kind(), ErrorKind::State);
            assert_eq!(red.mark_ready(9).unwrap_err().kind(), ErrorKind::InvalidArgument);
        });
    }
}

#[test]
fn reducer_knows_unused_gradients() {
    ranks(2, |pg| {
        let opts = ReducerOptions { find_unused_parameters: true, ..Default::default() };
        let mut red = Reducer::<f32>::new(&pg, &[4, 4, 4], &opts).unwrap();
        red.prepare_for_backward(&[]).unwrap();
        red.mark_ready(0).unwrap();
        if pg.rank() == 1 {
            red.mark_ready(2).unwrap();
        }
        red.finalize().unwrap();
        assert_eq!(
            (0..3).map(|i| red.grad_used(i).unwrap()).collect::<Vec<_>>(),
            vec![true, false, true]
        );
        assert_eq!(red.grad_used(3).unwrap_err().kind(), ErrorKind::InvalidArgument);
    });
}

#[test]
fn reducer_join_for_uneven_inputs() {
    ranks(2, |pg| {
        let mut red = Reducer::<f32>::new(&pg, &[4], &ReducerOptions::default()).unwrap();
        let mut step = 0;
        loop {
            let active = step < 1 + pg.rank(); // rank 1 has one more input
            let mut n = [active as i32];
            pg.all_reduce(&mut n, ReduceOp::Sum).unwrap();
            if n[0] == 0 {
                break;
            }
            if active {
                red.prepare_for_backward(&[]).unwrap();
                red.grad_mut(0).fill(2.0);
                red.mark_ready(0).unwrap();
                red.finalize().unwrap();
                // the second step: rank 0 joined, its zeros count in the average
                assert_eq!(red.grad(0)[0], if step == 0 { 2.0 } else { 1.0 });
            } else {
                red.join().unwrap();
            }
            step += 1;
        }
        assert_eq!(step, 2);
    });
}

#[test]
fn reducer_sparse_rows() {
    ranks(2, |pg| {
        let r = pg.rank() as i64;
        let opts = ReducerOptions { expect_sparse: Some(vec![false, true]), ..Default::default() };
        let mut red = Reducer::<f32>::new_with_rows(&pg, &[(3, 1), (8, 2)], &opts).unwrap();
        red.prepare_for_backward(&[]).unwrap();
        red.grad_mut(0).fill(r as f32);
        red.mark_ready(0).unwrap();
        assert_eq!(red.mark_ready(1).unwrap_err().kind(), ErrorKind::InvalidArgument);
        red.mark_ready_sparse(1, &[r, 7], &[1.0, 1.0, 2.0, 2.0], 2).unwrap();
        red.finalize().unwrap();
        let (idx, rows) = red.sparse_grad(1).unwrap();
        assert_eq!(idx, vec![0, 1, 7]);
        assert_eq!(rows, vec![0.5, 0.5, 0.5, 0.5, 2.0, 2.0]);
        assert_eq!(red.grad(0), &[0.5, 0.5, 0.5]);
        assert!(red.mark_ready_sparse(1, &[0], &[1.0], 2).is_err());
    });
}

#[test]
fn flight_recorder_dumps() {
    let dir = std::env::temp_dir().join(format!("distc-rust-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.clone();
    ranks(2, move |pg| {
        let mut x = [1.0f32; 4];
        pg.all_reduce(&mut x, ReduceOp::Sum).unwrap();
        pg.dump_trace(d.join(format!("rank{}.jsonl", pg.rank())).to_str().unwrap()).unwrap();
    });
    let text = std::fs::read_to_string(dir.join("rank0.jsonl")).unwrap();
    assert!(text.starts_with("{\"type\":\"distc-trace\",\"version\":1"), "{text}");
    assert!(text.contains("\"op\":\"allreduce\"") && text.contains("\"state\":\"completed\""), "{text}");
    distc::dump_trace_all(dir.to_str().unwrap()).unwrap();
    let e = distc::dump_trace_all("/nonexistent/dir").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert_eq!(distc::dump_trace_all("").unwrap_err().kind(), ErrorKind::InvalidArgument);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn futures_complete_chain_and_fail() {
    let f = distc::Future::new().unwrap();
    assert!(!f.test().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let g = f
        .then(move |r| {
            tx.send(r.is_ok()).unwrap();
            let later = distc::Future::new()?;
            let c = later.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                c.complete(Ok(())).unwrap();
            });
            Ok(Some(later)) // chained: g completes once `later` does
        })
        .unwrap();
    f.complete(Ok(())).unwrap();
    g.wait(Some(Duration::from_secs(10))).unwrap();
    assert!(rx.recv().unwrap());
    assert_eq!(f.complete(Ok(())).unwrap_err().kind(), ErrorKind::State);
    // A failure is passed on; an error returned or a panic fails the next future.
    let e = distc::Future::new().unwrap();
    let passed = e.then(|r| r.map(|_| None)).unwrap();
    e.complete(Err(distc::Error { code: distc::sys::DISTC_EREMOTE, message: "peer went away (test)".into() })).unwrap();
    let err = passed.wait(None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Remote);
    assert!(err.message.contains("peer went away"), "{err}");
    let failed = f.then(|_| Err(distc::Error { code: distc::sys::DISTC_EBACKEND, message: "codec".into() })).unwrap();
    assert_eq!(failed.wait(None).unwrap_err().kind(), ErrorKind::Backend);
    let panicked = f.then(|_| -> distc::Result<Option<distc::Future>> { panic!("in a continuation") }).unwrap();
    assert!(panicked.wait(None).unwrap_err().message.contains("panicked"));
}

#[test]
fn reducer_bucket_hook_chains_collectives() {
    ranks(3, |pg| {
        let r = pg.rank() as f64;
        let size = pg.size() as f64;
        let opts = ReducerOptions { bucket_cap_bytes: 128, first_bucket_bytes: 128, ..Default::default() };
        let lens = [20usize, 3, 40, 7];
        let mut red = Reducer::<f64>::new(&pg, &lens, &opts).unwrap();
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = calls.clone();
        red.register_bucket_hook(move |b: &distc::Bucket<f64>| {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            assert_eq!(b.grads.len(), b.offsets.len());
            let buf = b.buffer();
            let again = buf.clone();
            // a sum, then a max of the sums (all equal), then the division
            b.all_reduce(ReduceOp::Sum)?.then(move |r| {
                r?;
                // SAFETY: in a continuation of the hook's future, the sum has completed.
                let max = unsafe { again.all_reduce(ReduceOp::Max)? };
                Ok(Some(max.then(move |r| {
                    r?;
                    // SAFETY: both collectives on the buffer have completed.
                    for x in unsafe { again.as_mut_slice() } {
                        *x /= size;
                    }
                    Ok(None)
                })?))
            })
        })
        .unwrap();
        for step in 0..3 {
            red.prepare_for_backward(&[]).unwrap();
            for i in (0..lens.len()).rev() {
                red.grad_mut(i).fill(r + step as f64 + i as f64);
                red.mark_ready(i).unwrap();
            }
            red.finalize().unwrap();
            for i in 0..lens.len() {
                let want = (size - 1.0) / 2.0 + step as f64 + i as f64;
                assert!(red.grad(i).iter().all(|&g| g == want), "step {step} grad {i}: {:?}", red.grad(i));
            }
        }
        assert!(calls.load(std::sync::atomic::Ordering::SeqCst) >= 3 * 2);
        // A hook's error reaches the call that launched the bucket.
        red.register_bucket_hook(|_b: &distc::Bucket<f64>| {
            Err(distc::Error { code: distc::sys::DISTC_EBACKEND, message: "no codec (test)".into() })
        })
        .unwrap();
        red.prepare_for_backward(&[]).unwrap();
        let mut res = Ok(());
        for i in (0..lens.len()).rev() {
            res = res.and_then(|_| red.mark_ready(i));
        }
        let res = res.and_then(|_| red.finalize());
        let e = res.unwrap_err();
        assert!(e.message.contains("no codec"), "{e}");
        let _ = red.finalize();
        red.clear_bucket_hook().unwrap();
    });
}

#[test]
fn reducer_builtin_powersgd() {
    ranks(2, |pg| {
        let r = pg.rank() as f64;
        // a 6 x 8 matrix of rank 1 on every rank (scaled), and a bias: exact at rank 1
        let shapes = [(6usize, 8usize), (6, 1)];
        let mut red = Reducer::<f64>::new_with_rows(&pg, &shapes, &ReducerOptions::default()).unwrap();
        assert_eq!(red.powersgd_stats().unwrap_err().kind(), ErrorKind::State);
        let bad = distc::PowerSgdOptions { matrix_approximation_rank: 0, ..Default::default() };
        assert_eq!(red.register_powersgd(&bad).unwrap_err().kind(), ErrorKind::InvalidArgument);
        let opts = distc::PowerSgdOptions { start_powersgd_iter: 2, ..Default::default() };
        red.register_powersgd(&opts).unwrap();
        for step in 0..5 {
            red.prepare_for_backward(&[]).unwrap();
            let m: Vec<f64> = (0..48).map(|j| (r + 1.0) * (1 + j / 8) as f64 * (1 + j % 8) as f64).collect();
            red.grad_mut(0).copy_from_slice(&m);
            red.mark_ready(0).unwrap();
            red.grad_mut(1).fill(r + step as f64);
            red.mark_ready(1).unwrap();
            red.finalize().unwrap();
            for (j, &g) in red.grad(0).iter().enumerate() {
                let want = 1.5 * (1 + j / 8) as f64 * (1 + j % 8) as f64;
                assert!((g - want).abs() < 1e-9 * want, "step {step} element {j}: {g} != {want}");
            }
            assert!(red.grad(1).iter().all(|&g| g == 0.5 + step as f64));
        }
        let (iterations, before, after) = red.powersgd_stats().unwrap();
        assert_eq!((iterations, before, after), (5, 3 * 54, 3 * (6 + 8 + 6)));
    });
}

#[test]
fn bucket_views_are_not_lent_while_reduced() {
    ranks(2, |pg| {
        let opts = ReducerOptions {
            gradient_as_bucket_view: true,
            bucket_cap_bytes: 16,
            first_bucket_bytes: 16,
            ..Default::default()
        };
        let mut red = Reducer::<f32>::new(&pg, &[4, 4], &opts).unwrap();
        for _ in 0..2 {
            red.prepare_for_backward(&[]).unwrap();
            red.grad_mut(1).fill(1.0);
            red.mark_ready(1).unwrap();
            // Its bucket may be reducing now: once lent anyway, a shared slice changed under it.
            let lent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| red.grad(1).len()));
            assert!(lent.is_err(), "gradient 1 was lent while its bucket may be reduced");
            red.grad_mut(0).fill(3.0); // not marked yet: still the caller's
            red.mark_ready(0).unwrap();
            red.finalize().unwrap();
            assert_eq!(red.grad(0), &[3.0; 4]);
            assert_eq!(red.grad(1), &[1.0; 4]);
        }
    });
}

#[test]
fn bool_buffers_hold_only_bools() {
    ranks(2, |pg| {
        // A peer that sends other bytes (a u8 sender, another language): they arrive as 0 or 1.
        if pg.rank() == 0 {
            pg.send(&[2u8, 255, 0, 1], 1, 7).unwrap();
            pg.send(&[9u8, 0], 1, 8).unwrap();
        } else {
            let mut b = [false; 4];
            pg.recv(&mut b, Some(0), 7).unwrap();
            let mut c = [false; 2];
            pg.scope(|s| s.recv(&mut c, Some(0), 8).map(|_| ())).unwrap();
            // Read as bytes: a bool other than 0 or 1 may not even be read.
            let bytes = |v: &[bool]| unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, v.len()) }.to_vec();
            assert_eq!(bytes(&b), vec![1, 1, 0, 1]);
            assert_eq!(bytes(&c), vec![1, 0]);
        }
    });
}

#[test]
fn a_promise_dropped_uncompleted_fails() {
    let f = distc::Future::new().unwrap();
    let g = f
        .then(|r| {
            assert_eq!(r.unwrap_err().kind(), ErrorKind::Aborted);
            Ok(None)
        })
        .unwrap();
    drop(f); // nothing can complete it any more: once its continuation waited for ever
    g.wait(Some(Duration::from_secs(10))).unwrap();
}
