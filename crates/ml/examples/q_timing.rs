use iolearn_ml::quant::{QuantizedMlp, Scheme};
use iolearn_ml::{Layer, Linear, Rng, Sequential};
use std::hint::black_box;
use std::time::Instant;
fn main() {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut rng = Rng::new(1);
    for shape in [vec![(31usize, 256usize, true), (256, 2, false)]] {
        let mut v = Vec::new();
        for &(i, o, relu) in &shape {
            let mut l = Linear::zeros(i, o);
            l.weight.iter_mut().for_each(|w| *w = rng.uniform(-0.2, 0.2));
            v.push(Layer::Linear(l));
            if relu {
                v.push(Layer::ReLU);
            }
        }
        let n = Sequential::new(shape[0].0, v).unwrap();
        let q = QuantizedMlp::new(&n, Scheme::Fixed1000);
        let mut ws = q.workspace();
        let rows: Vec<Vec<f32>> = (0..64)
            .map(|_| (0..shape[0].0).map(|_| rng.below(10) as f32).collect())
            .collect();
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for i in 0..iters {
                black_box(q.forward(black_box(&rows[i & 63]), &mut ws));
            }
            best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
        }
        println!("{shape:?}: {best:.1} ns");
    }
}
