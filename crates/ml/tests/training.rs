//! Training works and is reproducible (issue 2, must-show 3).

use iolearn_ml::eval::{cross_validate, permutation_importance};
use iolearn_ml::{datasets, Activation, DecisionTree, Loss, MlpBuilder, Sequential, TrainConfig, TreeConfig, ZScore};

fn kml_net(seed: u64) -> Sequential {
    MlpBuilder::new(5)
        .hidden(15, Activation::Sigmoid)
        .hidden(5, Activation::Sigmoid)
        .output(4)
        .seed(seed)
        .build()
}

/// KML's optimiser settings (lr 0.01, momentum 0.99); mini-batches of 8 keep the test quick.
fn kml_cfg(seed: u64) -> TrainConfig {
    TrainConfig {
        epochs: 40,
        lr: 0.01,
        momentum: 0.99,
        batch_size: 8,
        seed,
    }
}

fn fit_predict_net(seed: u64) -> impl FnMut(&[f32], &[f32], &[f32]) -> iolearn_ml::Result<Vec<usize>> {
    move |tx, ty, test| {
        let norm = ZScore::fit(tx, 5)?;
        let mut tx = tx.to_vec();
        norm.transform_rows(&mut tx);
        let mut net = kml_net(seed);
        net.fit(&tx, ty, &Loss::softmax_cross_entropy(), &kml_cfg(seed))?;
        let mut ws = net.workspace();
        Ok(test
            .chunks_exact(5)
            .map(|r| {
                let mut r = r.to_vec();
                norm.transform(&mut r);
                net.predict_class(&r, &mut ws)
            })
            .collect())
    }
}

#[test]
fn xor_is_learnt() {
    let x = [0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0];
    let y = [0.0, 1.0, 1.0, 0.0];
    for (act, seed) in [(Activation::Sigmoid, 1), (Activation::Tanh, 2), (Activation::ReLU, 3)] {
        let mut net = MlpBuilder::new(2).hidden(8, act).output(2).seed(seed).build();
        let cfg = TrainConfig {
            epochs: 2000,
            lr: 0.05,
            momentum: 0.9,
            batch_size: 4,
            seed,
        };
        let hist = net.fit(&x, &y, &Loss::softmax_cross_entropy(), &cfg).unwrap();
        assert!(
            hist.last().unwrap() < &0.05,
            "{act:?}: final loss {}",
            hist.last().unwrap()
        );
        let mut ws = net.workspace();
        for (row, &t) in x.chunks(2).zip(&y) {
            assert_eq!(net.predict_class(row, &mut ws), t as usize, "{act:?} on {row:?}");
        }
    }
}

#[test]
fn xor_with_binary_cross_entropy_and_log_odds_bias() {
    let x = [0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0];
    let y = [0.0, 1.0, 1.0, 0.0];
    let mut net = MlpBuilder::new(2)
        .hidden(8, Activation::Tanh)
        .output(1)
        .output_activation(Some(Activation::Sigmoid))
        .seed(5)
        .build();
    net.init_output_bias_log_odds(2, 2).unwrap();
    let cfg = TrainConfig {
        epochs: 2000,
        lr: 0.05,
        momentum: 0.9,
        batch_size: 4,
        seed: 5,
    };
    net.fit(&x, &y, &Loss::BinaryCrossEntropy { pos_weight: 1.0 }, &cfg)
        .unwrap();
    let mut ws = net.workspace();
    for (row, &t) in x.chunks(2).zip(&y) {
        assert_eq!(net.predict_class(row, &mut ws), t as usize);
    }
}

#[test]
fn log_odds_bias_is_ln_pos_over_neg() {
    let mut net = MlpBuilder::new(3)
        .hidden(4, Activation::ReLU)
        .output(1)
        .output_activation(Some(Activation::Sigmoid))
        .build();
    net.init_output_bias_log_odds(1, 9).unwrap();
    let mut ws = net.workspace();
    // With zero input, hidden ReLUs are 0 (zero bias), so the output is sigmoid(bias) = base rate.
    let p = net.forward(&[0.0, 0.0, 0.0], &mut ws)[0];
    assert!((p - 0.1).abs() < 1e-5, "{p}");
    assert!(net.init_output_bias_log_odds(0, 9).is_err());
}

#[test]
fn kml_network_learns_kml_like_data_to_95_percent_10_fold() {
    let (x, y) = datasets::kml_like(150, 42);
    let report = cross_validate(&x, &y, 5, 10, 7, fit_predict_net(3)).unwrap();
    let acc = report.mean_accuracy();
    eprintln!("5-15-5-4 10-fold accuracy {acc:.4}");
    assert!(acc >= 0.95, "10-fold CV accuracy {acc}");
}

#[test]
fn tree_learns_kml_like_data() {
    let (x, y) = datasets::kml_like(150, 42);
    let cfg = TreeConfig {
        max_depth: Some(8),
        ..Default::default()
    };
    let report = cross_validate(&x, &y, 5, 10, 7, |tx, ty, test| {
        let t = DecisionTree::fit(tx, ty, 5, &cfg)?;
        Ok(test.chunks_exact(5).map(|r| t.predict_class(r)).collect())
    })
    .unwrap();
    eprintln!("tree 10-fold accuracy {:.4}", report.mean_accuracy());
    assert!(report.mean_accuracy() >= 0.95, "{}", report.mean_accuracy());
    // Entropy criterion too.
    let t = DecisionTree::fit(
        &x,
        &y,
        5,
        &TreeConfig {
            criterion: iolearn_ml::Criterion::Entropy,
            ..cfg.clone()
        },
    )
    .unwrap();
    let train_acc = x
        .chunks_exact(5)
        .zip(&y)
        .filter(|(r, &c)| t.predict_class(r) == c as usize)
        .count() as f64
        / y.len() as f64;
    assert!(train_acc > 0.97, "{train_acc}");
}

#[test]
fn same_seed_same_model_different_seed_different_model() {
    let (x, y) = datasets::kml_like(40, 1);
    let norm = ZScore::fit(&x, 5).unwrap();
    let mut xn = x.clone();
    norm.transform_rows(&mut xn);
    let train = |seed| {
        let mut n = kml_net(seed);
        n.fit(&xn, &y, &Loss::softmax_cross_entropy(), &kml_cfg(seed)).unwrap();
        n
    };
    assert_eq!(train(11), train(11));
    assert_ne!(train(11), train(12));
    let cv = |s| cross_validate(&x, &y, 5, 10, s, fit_predict_net(s)).unwrap();
    assert_eq!(cv(3), cv(3));
    let t1 = DecisionTree::fit(&x, &y, 5, &TreeConfig::default()).unwrap();
    let t2 = DecisionTree::fit(&x, &y, 5, &TreeConfig::default()).unwrap();
    assert_eq!(t1, t2);
}

#[test]
fn permutation_importance_finds_the_informative_feature() {
    // Feature 0 decides the class, feature 1 is noise.
    let mut rng = iolearn_ml::Rng::new(3);
    let mut x = Vec::new();
    let mut y = Vec::new();
    for _ in 0..300 {
        let a = rng.uniform(-1.0, 1.0);
        x.extend([a, rng.uniform(-1.0, 1.0)]);
        y.push((a > 0.0) as u8 as f32);
    }
    let tree = DecisionTree::fit(
        &x,
        &y,
        2,
        &TreeConfig {
            max_depth: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    let imp = permutation_importance(&x, &y, 2, 5, 1, |xs| {
        xs.chunks_exact(2).map(|r| tree.predict_class(r)).collect()
    })
    .unwrap();
    assert!(imp.baseline > 0.98);
    assert!(imp.shuffled_accuracy[0] < 0.65, "{imp:?}");
    assert!(imp.shuffled_accuracy[1] > 0.95, "{imp:?}");
}

#[test]
fn bad_training_input_is_an_error_not_a_panic() {
    let mut net = kml_net(0);
    let loss = Loss::softmax_cross_entropy();
    let cfg = TrainConfig::default();
    assert!(net.fit(&[1.0; 7], &[0.0], &loss, &cfg).is_err()); // not whole rows
    assert!(net.fit(&[1.0; 10], &[0.0], &loss, &cfg).is_err()); // 2 rows, 1 label
    assert!(net.fit(&[1.0; 5], &[4.0], &loss, &cfg).is_err()); // class 4 of 4
    assert!(net.fit(&[1.0; 5], &[0.5], &loss, &cfg).is_err()); // not an index
    assert!(net.fit(&[f32::NAN; 5], &[0.0], &loss, &cfg).is_err());
    assert!(net.fit(&[], &[], &loss, &cfg).is_err());
    assert!(net
        .fit(
            &[1.0; 5],
            &[0.0],
            &loss,
            &TrainConfig {
                batch_size: 0,
                ..cfg.clone()
            }
        )
        .is_err());
    assert!(net
        .fit(&[1.0; 5], &[0.0], &loss, &TrainConfig { momentum: 1.5, ..cfg })
        .is_err());
    assert!(DecisionTree::fit(&[1.0; 5], &[-1.0], 5, &TreeConfig::default()).is_err());
}
