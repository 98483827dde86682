//! Runs KML-shaped inference in a loop, for instruction counting under callgrind:
//! `valgrind --tool=callgrind target/release/examples/profile_kml [mlp|tree|linnos|linnos_q] N`.
use iolearn_ml::{Activation, DecisionTree, MlpBuilder};
use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map_or("mlp", |s| s.as_str());
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let mut rng = iolearn_ml::Rng::new(1);
    match what {
        "tree" => {
            // KML's released tree (the peer's own model) when the reference data is beside the
            // repository, else one trained on KML-like data.
            let (x, y) = iolearn_ml::datasets::kml_like(200, 0);
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference/kml/readahead");
            let t = match iolearn_ml::kml::import_tree(
                &dir.join("decision_tree_model/readahead_model.dt"),
                &dir.join("nn_arch_data"),
            ) {
                Ok(iolearn_ml::ModelFile {
                    kind: iolearn_ml::ModelKind::Tree(t),
                    ..
                }) => t,
                _ => DecisionTree::fit(&x, &y, 5, &Default::default()).unwrap(),
            };
            let rows: Vec<[f32; 5]> = x.chunks(5).take(64).map(|r| r.try_into().unwrap()).collect();
            for i in 0..n {
                black_box(t.predict_class(black_box(&rows[i & 63])));
            }
        }
        "linnos_q" => {
            let net = MlpBuilder::new(31)
                .hidden(256, Activation::ReLU)
                .output(2)
                .seed(3)
                .build();
            let q = iolearn_ml::quant::QuantizedMlp::new(&net, iolearn_ml::quant::Scheme::Fixed1000);
            let mut ws = q.workspace();
            let rows: Vec<[f32; 31]> = (0..64)
                .map(|_| core::array::from_fn(|_| rng.below(10) as f32))
                .collect();
            for i in 0..n {
                black_box(q.predict_class(black_box(&rows[i & 63]), &mut ws));
            }
        }
        "linnos" => {
            let net = MlpBuilder::new(31).hidden(256, Activation::ReLU).output(2).build();
            let mut ws = net.workspace();
            let rows: Vec<[f32; 31]> = (0..64)
                .map(|_| core::array::from_fn(|_| rng.below(10) as f32))
                .collect();
            for i in 0..n {
                black_box(net.predict_class(black_box(&rows[i & 63]), &mut ws));
            }
        }
        _ => {
            let net = MlpBuilder::new(5)
                .hidden(15, Activation::Sigmoid)
                .hidden(5, Activation::Sigmoid)
                .output(4)
                .build();
            let mut ws = net.workspace();
            let rows: Vec<[f32; 5]> = (0..64)
                .map(|_| core::array::from_fn(|_| rng.uniform(-1.5, 1.5)))
                .collect();
            for i in 0..n {
                black_box(net.predict_class(black_box(&rows[i & 63]), &mut ws));
            }
        }
    }
}
