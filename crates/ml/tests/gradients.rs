//! Finite-difference gradient checks for every layer and every loss (issue 2, must-show 1).
//! Central differences in f32 with eps = 1e-2 on smooth points; tolerance relative 2e-2.

use iolearn_ml::{Layer, Linear, Loss, Rng, Sequential, Sgd};

fn check_model(net: &Sequential, x: &[f32], target: &[f32], loss: &Loss) {
    let mut ws = net.workspace();
    let mut sgd = Sgd::new(net, 0.1, 0.0);
    sgd.accumulate(net, &mut ws, x, target, loss);
    let analytic = sgd.gradient().to_vec();
    let eps = 1e-2f32;
    let mut k = 0;
    let loss_of = |n: &Sequential| {
        let mut ws = n.workspace();
        let out = n.forward(x, &mut ws).to_vec();
        let mut g = vec![0.0; out.len()];
        loss.forward_backward(&out, target, &mut g)
    };
    for li in 0..net.layers().len() {
        let np = net.layers()[li].n_params();
        for p in 0..np {
            let mut plus = net.clone();
            let mut minus = net.clone();
            bump(&mut plus, li, p, eps);
            bump(&mut minus, li, p, -eps);
            let numeric = (loss_of(&plus) - loss_of(&minus)) / (2.0 * eps);
            let a = analytic[k];
            let tol = 2e-2 * numeric.abs().max(a.abs()).max(1e-1);
            assert!(
                (numeric - a).abs() <= tol,
                "{}: layer {li} param {p}: analytic {a} numeric {numeric}",
                loss.name()
            );
            k += 1;
        }
    }
    assert_eq!(k, analytic.len());
}

fn bump(net: &mut Sequential, li: usize, p: usize, by: f32) {
    if let Layer::Linear(l) = &mut net.layers_mut()[li] {
        if p < l.weight.len() {
            l.weight[p] += by;
        } else {
            l.bias[p - l.weight.len()] += by;
        }
    }
}

fn random_linear(rng: &mut Rng, i: usize, o: usize) -> Layer {
    let mut l = Linear::zeros(i, o);
    l.weight.iter_mut().for_each(|w| *w = rng.uniform(-0.8, 0.8));
    l.bias.iter_mut().for_each(|b| *b = rng.uniform(-0.3, 0.3));
    Layer::Linear(l)
}

/// A net that puts `act` between two linear layers, so the first layer's gradient flows
/// through the activation's backward pass.
fn sandwich(act: Layer, out: usize, seed: u64) -> Sequential {
    let mut rng = Rng::new(seed);
    Sequential::new(
        4,
        vec![random_linear(&mut rng, 4, 5), act, random_linear(&mut rng, 5, out)],
    )
    .unwrap()
}

const X: [f32; 4] = [0.5, -1.2, 0.9, 0.3];

#[test]
fn every_activation_layer_backward_matches_finite_differences() {
    for act in [Layer::Sigmoid, Layer::ReLU, Layer::Tanh, Layer::Softmax] {
        for seed in 0..3 {
            let net = sandwich(act.clone(), 3, seed);
            check_model(&net, &X, &[1.0, -0.5, 0.25], &Loss::Mse);
        }
    }
}

#[test]
fn linear_layer_backward_matches_finite_differences() {
    let mut rng = Rng::new(9);
    let net = Sequential::new(4, vec![random_linear(&mut rng, 4, 3)]).unwrap();
    check_model(&net, &X, &[0.3, 0.1, -0.7], &Loss::Mse);
}

#[test]
fn softmax_cross_entropy_gradient() {
    let net = sandwich(Layer::Tanh, 4, 1);
    check_model(&net, &X, &[2.0], &Loss::softmax_cross_entropy());
    let weighted = Loss::SoftmaxCrossEntropy {
        class_weights: Some(vec![1.0, 0.5, 3.0, 2.0]),
    };
    check_model(&net, &X, &[2.0], &weighted);
}

#[test]
fn binary_cross_entropy_gradient() {
    let mut rng = Rng::new(4);
    let net = Sequential::new(
        4,
        vec![
            random_linear(&mut rng, 4, 5),
            Layer::ReLU,
            random_linear(&mut rng, 5, 1),
            Layer::Sigmoid,
        ],
    )
    .unwrap();
    for y in [0.0, 1.0] {
        check_model(&net, &X, &[y], &Loss::BinaryCrossEntropy { pos_weight: 1.0 });
        check_model(&net, &X, &[y], &Loss::BinaryCrossEntropy { pos_weight: 4.0 });
    }
}

#[test]
fn mse_and_asymmetric_mse_gradients() {
    let net = sandwich(Layer::Sigmoid, 2, 2);
    for t in [[5.0, -5.0], [-5.0, 5.0]] {
        check_model(&net, &X, &t, &Loss::Mse);
        for b in [0.0, 0.3, 0.9] {
            check_model(&net, &X, &t, &Loss::AsymmetricMse { b });
        }
    }
}

#[test]
fn categorical_hinge_gradient() {
    let net = sandwich(Layer::Tanh, 2, 3);
    let mut ws = net.workspace();
    let out = net.forward(&X, &mut ws).to_vec();
    // Pick the class that makes the margin positive and away from the kink.
    let y = if out[0] < out[1] { 0.0 } else { 1.0 };
    check_model(
        &net,
        &X,
        &[y],
        &Loss::CategoricalHinge {
            penalty: 1.0,
            penalized_class: 1,
        },
    );
    check_model(
        &net,
        &X,
        &[y],
        &Loss::CategoricalHinge {
            penalty: 5.0,
            penalized_class: y as usize,
        },
    );
}

#[test]
fn asymmetric_mse_with_zero_bias_equals_mse() {
    // ml-mittos.md section 6: AMSE b=0 equals MSE.
    let out = [1.5, -2.0, 0.25];
    let t = [1.0, 1.0, 1.0];
    let (mut g1, mut g2) = ([0.0; 3], [0.0; 3]);
    let a = Loss::AsymmetricMse { b: 0.0 }.forward_backward(&out, &t, &mut g1);
    let m = Loss::Mse.forward_backward(&out, &t, &mut g2);
    assert!((a - m).abs() < 1e-6);
    assert_eq!(g1, g2);
}

#[test]
fn asymmetric_mse_weights_underestimates_more() {
    let l = Loss::AsymmetricMse { b: 0.5 };
    let mut g = [0.0];
    let under = l.forward_backward(&[1.0], &[2.0], &mut g); // yhat < y
    let over = l.forward_backward(&[3.0], &[2.0], &mut g);
    assert!(
        (under - 2.25).abs() < 1e-6 && (over - 0.25).abs() < 1e-6,
        "{under} {over}"
    );
}

#[test]
fn hinge_penalty_multiplies_only_the_penalized_class() {
    let l = Loss::CategoricalHinge {
        penalty: 3.0,
        penalized_class: 1,
    };
    let mut g = [0.0; 2];
    assert!((l.forward_backward(&[0.5, 0.0], &[1.0], &mut g) - 4.5).abs() < 1e-6);
    assert!((l.forward_backward(&[0.0, 0.5], &[0.0], &mut g) - 1.5).abs() < 1e-6);
    assert_eq!(l.forward_backward(&[3.0, 0.0], &[0.0], &mut g), 0.0);
}
