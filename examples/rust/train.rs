//! Data-parallel linear regression with the reducer: each rank computes the
//! gradient of its shard, the reducer averages it over ranks while the
//! "backward pass" goes on, and every rank applies the same update.
//!
//!     cargo build --offline --manifest-path bindings/rust/Cargo.toml --example train
//!     build/distc-run -n 4 bindings/rust/target/debug/examples/train
use distc::{ProcessGroup, Reducer, ReducerOptions};

const DIM: usize = 8;
const SAMPLES: usize = 512;

/// A deterministic dataset: y = w_true . x + b_true.
fn sample(i: usize) -> ([f32; DIM], f32) {
    let mut x = [0f32; DIM];
    for (j, v) in x.iter_mut().enumerate() {
        *v = (((i * 31 + j * 17) % 97) as f32 / 97.0) - 0.5;
    }
    let y: f32 = x.iter().enumerate().map(|(j, v)| v * (j as f32 - 3.5)).sum::<f32>() + 0.25;
    (x, y)
}

fn main() -> distc::Result<()> {
    let pg = ProcessGroup::from_url("env://", &Default::default())?;
    let (rank, size) = (pg.rank() as usize, pg.size() as usize);
    // Two gradients: the weights and the bias, in their own buckets.
    let opts = ReducerOptions { bucket_of: Some(vec![1, 0]), ..Default::default() };
    let mut red = Reducer::<f32>::new(&pg, &[DIM, 1], &opts)?;
    let (mut w, mut b) = ([0f32; DIM], 0f32);
    let lr = 0.5;
    for step in 0..200 {
        red.prepare_for_backward(&[])?;
        let (mut gw, mut gb, mut loss) = ([0f32; DIM], 0f32, 0f32);
        let shard: Vec<usize> = (rank..SAMPLES).step_by(size).collect();
        for &i in &shard {
            let (x, y) = sample(i);
            let err = x.iter().zip(&w).map(|(a, b)| a * b).sum::<f32>() + b - y;
            loss += err * err / shard.len() as f32;
            for j in 0..DIM {
                gw[j] += 2.0 * err * x[j] / shard.len() as f32;
            }
            gb += 2.0 * err / shard.len() as f32;
        }
        // backward, last layer first: the bias, then the weights
        red.grad_mut(1)[0] = gb;
        red.mark_ready(1)?;
        red.grad_mut(0).copy_from_slice(&gw);
        red.mark_ready(0)?;
        red.finalize()?;
        for j in 0..DIM {
            w[j] -= lr * red.grad(0)[j];
        }
        b -= lr * red.grad(1)[0];
        let mut l = [loss];
        pg.all_reduce(&mut l, distc::ReduceOp::Avg)?;
        if step % 50 == 0 || step == 199 {
            println!("rank {rank}/{size} step {step:3} loss {:.6e} b {:.6}", l[0], b);
        }
    }
    Ok(())
}
