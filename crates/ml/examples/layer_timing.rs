//! Time single dense layers of LinnOS-like shapes (exploratory; see docs/benchmarks.md).
use iolearn_ml::{Layer, Linear, Rng, Sequential};
use std::hint::black_box;
use std::time::Instant;

fn net(layers: &[(usize, usize, bool)], rng: &mut Rng) -> Sequential {
    let mut v = Vec::new();
    for &(i, o, relu) in layers {
        let mut l = Linear::zeros(i, o);
        l.weight.iter_mut().for_each(|w| *w = rng.uniform(-0.2, 0.2));
        v.push(Layer::Linear(l));
        if relu {
            v.push(Layer::ReLU);
        }
    }
    Sequential::new(layers[0].0, v).unwrap()
}

fn main() {
    let mut rng = Rng::new(1);
    for shape in [
        vec![(31, 256, true)],
        vec![(256, 2, false)],
        vec![(31, 256, true), (256, 2, false)],
        vec![(31, 128, true)],
        vec![(16, 256, true)],
    ] {
        let n = net(&shape, &mut rng);
        let mut ws = n.workspace();
        let rows: Vec<Vec<f32>> = (0..64)
            .map(|_| (0..shape[0].0).map(|_| rng.below(10) as f32).collect())
            .collect();
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for i in 0..2_000_000 {
                black_box(n.forward(black_box(&rows[i & 63]), &mut ws));
            }
            best = best.min(t.elapsed().as_nanos() as f64 / 2_000_000.0);
        }
        println!("{shape:?}: {best:.1} ns");
    }
    let n = iolearn_ml::MlpBuilder::new(31)
        .hidden(256, iolearn_ml::Activation::ReLU)
        .output(2)
        .seed(3)
        .build();
    let mut ws = n.workspace();
    let rows: Vec<[f32; 31]> = (0..64)
        .map(|_| core::array::from_fn(|_| rng.below(10) as f32))
        .collect();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for i in 0..2_000_000 {
            black_box(n.predict_class(black_box(&rows[i & 63]), &mut ws));
        }
        best = best.min(t.elapsed().as_nanos() as f64 / 2_000_000.0);
    }
    println!("MlpBuilder 31-256-2 predict_class: {best:.1} ns");
}
