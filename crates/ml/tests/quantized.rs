//! Quantised inference against f32: the accuracy change is small and measured (issue 2).

mod common;
use iolearn_ml::quant::{QuantizedMlp, Scheme};
use iolearn_ml::{datasets, kml, Activation, Loss, MlpBuilder, ModelKind, TrainConfig};

fn agreement(net: &iolearn_ml::Sequential, q: &QuantizedMlp, rows: &[Vec<f32>]) -> f64 {
    let mut ws = net.workspace();
    let mut qws = q.workspace();
    rows.iter()
        .filter(|r| net.predict_class(r, &mut ws) == q.predict_class(r, &mut qws))
        .count() as f64
        / rows.len() as f64
}

#[test]
fn kml_network_quantised_keeps_its_answers() {
    let file = kml::import_network(&common::kml_dir().join("nn_arch_data")).unwrap();
    let ModelKind::Mlp(net) = file.kind else { panic!() };
    let rows = common::rows(&common::kml_dir().join("nn_arch_data/input.csv"));
    let fixed = agreement(&net, &QuantizedMlp::new(&net, Scheme::Fixed1000), &rows);
    let int8 = agreement(&net, &QuantizedMlp::new(&net, Scheme::Int8), &rows);
    eprintln!(
        "KML readahead network: x1000 agrees with f32 on {:.2}%, int8 on {:.2}%",
        fixed * 100.0,
        int8 * 100.0
    );
    assert_eq!(fixed, 1.0, "x1000 must keep every answer of KML's network");
    // int8 with one scale per layer is too coarse for KML's weights (|w| up to 57, logit margins
    // down to 0.14): it keeps only about three answers in four. Recorded in docs/benchmarks.md;
    // the assertion pins the measured value so a regression (or an improvement) is noticed.
    assert!((0.70..0.80).contains(&int8), "int8: {int8}");
}

#[test]
fn linnos_shaped_network_quantised_x1000_loses_at_most_a_tenth_of_a_percent() {
    // LinnOS reports <= 0.1% accuracy loss from x1000 integer weights; integer digit inputs.
    let mut rng = iolearn_ml::Rng::new(5);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for _ in 0..2000 {
        let digits: Vec<f32> = (0..31).map(|_| rng.below(10) as f32).collect();
        let slow = digits[0] * 10.0 + digits[1] + digits[3] > 60.0;
        x.extend(digits);
        y.push(slow as u8 as f32);
    }
    let mut net = MlpBuilder::new(31)
        .hidden(256, Activation::ReLU)
        .output(2)
        .seed(2)
        .build();
    let cfg = TrainConfig {
        epochs: 15,
        lr: 0.001,
        momentum: 0.9,
        batch_size: 16,
        seed: 2,
    };
    net.fit(
        &x,
        &y,
        &Loss::CategoricalHinge {
            penalty: 2.0,
            penalized_class: 1,
        },
        &cfg,
    )
    .unwrap();
    let rows: Vec<Vec<f32>> = x.chunks(31).map(|r| r.to_vec()).collect();
    let acc = |pred: &dyn Fn(&[f32]) -> usize| {
        rows.iter().zip(&y).filter(|(r, &t)| pred(r) == t as usize).count() as f64 / rows.len() as f64
    };
    let mut ws = net.workspace();
    let q = QuantizedMlp::new(&net, Scheme::Fixed1000);
    let mut qws = q.workspace();
    let a32 = acc(&|r| net.clone().predict_class(r, &mut ws.clone()));
    let aq = acc(&|r| q.predict_class(r, &mut qws.clone()));
    let q8 = QuantizedMlp::new(&net, Scheme::Int8);
    let a8 = acc(&|r| q8.predict_class(r, &mut q8.workspace()));
    eprintln!("LinnOS-size: f32 accuracy {a32:.4}, x1000 {aq:.4}, int8 {a8:.4}");
    assert!((a32 - a8).abs() <= 0.01, "f32 {a32} vs int8 {a8}");
    assert!(a32 > 0.9, "{a32}");
    assert!((a32 - aq).abs() <= 0.001 + 1e-12, "f32 {a32} vs x1000 {aq}");
    let _ = &mut ws;
    let _ = &mut qws;
}

#[test]
fn quantised_outputs_track_f32_outputs() {
    let (x, _) = datasets::kml_like(10, 3);
    let net = MlpBuilder::new(5)
        .hidden(15, Activation::Tanh)
        .output(3)
        .seed(1)
        .build();
    let q = QuantizedMlp::new(&net, Scheme::Fixed1000);
    let (mut ws, mut qws) = (net.workspace(), q.workspace());
    for r in x.chunks(5) {
        let r: Vec<f32> = r.iter().map(|v| v / 1e5).collect();
        let a = net.forward(&r, &mut ws).to_vec();
        let b = q.forward(&r, &mut qws);
        for (u, v) in a.iter().zip(b) {
            assert!((u - v).abs() < 0.02, "{a:?} vs {b:?}");
        }
    }
}

/// Integer reference for one x1000 Linear+ReLU+Linear network, in plain i128 arithmetic.
fn fixed_reference(net: &iolearn_ml::Sequential, x: &[f32]) -> Vec<f32> {
    let mut a: Vec<i128> = x.iter().map(|v| (v * 1000.0).round() as i128).collect();
    for layer in net.layers() {
        match layer {
            iolearn_ml::Layer::Linear(l) => {
                a = (0..l.out_dim)
                    .map(|o| {
                        let s: i128 = (0..l.in_dim).map(|i| (l.w(o, i) * 1000.0).round() as i128 * a[i]).sum();
                        s / 1000 + (l.bias[o] * 1000.0).round() as i128
                    })
                    .collect();
            }
            iolearn_ml::Layer::ReLU => a.iter_mut().for_each(|v| *v = (*v).max(0)),
            _ => unreachable!(),
        }
    }
    a.iter().map(|&v| v as f32 / 1000.0).collect()
}

#[test]
fn fixed_point_is_exact_on_both_the_i32_and_the_i64_path() {
    let net = MlpBuilder::new(31)
        .hidden(256, Activation::ReLU)
        .output(2)
        .seed(9)
        .build();
    let q = QuantizedMlp::new(&net, Scheme::Fixed1000);
    let mut ws = q.workspace();
    let mut rng = iolearn_ml::Rng::new(4);
    // Digits keep i32 sums safe; values in the millions force the i64 path; beyond i32 the
    // scalar saturating path.
    for scale in [9.0f32, 3.0e4, 5.0e6] {
        for _ in 0..20 {
            let x: Vec<f32> = (0..31).map(|_| (rng.uniform(0.0, scale)).round()).collect();
            assert_eq!(
                q.forward(&x, &mut ws).to_vec(),
                fixed_reference(&net, &x),
                "scale {scale}"
            );
        }
    }
}
