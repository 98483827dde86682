//! Layers with forward and backward passes over plain `f32` slices.

use crate::math;
use alloc::vec::Vec;

/// A fully connected layer `y = W x + b`, `W` stored row-major as `out_dim` rows of `in_dim`
/// (the layout of KML's `linearN_w.csv`), so a forward pass walks memory in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Linear {
    /// Number of inputs.
    pub in_dim: usize,
    /// Number of outputs.
    pub out_dim: usize,
    /// `out_dim * in_dim` weights, row `o` holds the weights of output `o`.
    pub weight: Vec<f32>,
    /// `out_dim` biases.
    pub bias: Vec<f32>,
}

impl Linear {
    /// A zero-initialised layer.
    pub fn zeros(in_dim: usize, out_dim: usize) -> Self {
        Linear { in_dim, out_dim, weight: alloc::vec![0.0; in_dim * out_dim], bias: alloc::vec![0.0; out_dim] }
    }

    /// Number of trainable parameters (weights, then biases, in gradient buffers).
    pub fn n_params(&self) -> usize {
        self.weight.len() + self.bias.len()
    }

    #[inline]
    fn forward(&self, x: &[f32], y: &mut [f32]) {
        for (o, (row, b)) in self.weight.chunks_exact(self.in_dim).zip(&self.bias).enumerate() {
            let mut acc = *b;
            for (w, xi) in row.iter().zip(x) {
                acc += w * xi;
            }
            y[o] = acc;
        }
    }

    fn backward(&self, x: &[f32], dy: &[f32], dx: &mut [f32], grad: &mut [f32]) {
        let (gw, gb) = grad.split_at_mut(self.weight.len());
        dx.iter_mut().for_each(|v| *v = 0.0);
        for (o, &g) in dy.iter().enumerate() {
            gb[o] += g;
            let row = &self.weight[o * self.in_dim..(o + 1) * self.in_dim];
            let grow = &mut gw[o * self.in_dim..(o + 1) * self.in_dim];
            for i in 0..self.in_dim {
                grow[i] += g * x[i];
                dx[i] += g * row[i];
            }
        }
    }
}

/// One layer of a [`crate::Sequential`] model. An enum rather than trait objects: dispatch is a
/// jump, models serialise without a registry, and inference stays allocation-free.
#[derive(Debug, Clone, PartialEq)]
pub enum Layer {
    /// Fully connected layer.
    Linear(Linear),
    /// Logistic activation.
    Sigmoid,
    /// Rectified linear activation.
    ReLU,
    /// Hyperbolic tangent activation (KML's BBR model).
    Tanh,
    /// Softmax over the whole vector.
    Softmax,
}

impl Layer {
    /// Output width for a given input width.
    pub fn out_dim(&self, in_dim: usize) -> usize {
        match self {
            Layer::Linear(l) => l.out_dim,
            _ => in_dim,
        }
    }

    /// Number of trainable parameters.
    pub fn n_params(&self) -> usize {
        match self {
            Layer::Linear(l) => l.n_params(),
            _ => 0,
        }
    }

    /// Short name, as in model dumps.
    pub fn name(&self) -> &'static str {
        match self {
            Layer::Linear(_) => "linear",
            Layer::Sigmoid => "sigmoid",
            Layer::ReLU => "relu",
            Layer::Tanh => "tanh",
            Layer::Softmax => "softmax",
        }
    }

    /// `y = layer(x)`. `y` has length [`Layer::out_dim`].
    #[inline]
    pub fn forward(&self, x: &[f32], y: &mut [f32]) {
        match self {
            Layer::Linear(l) => l.forward(x, y),
            Layer::Sigmoid => y.iter_mut().zip(x).for_each(|(o, &i)| *o = math::sigmoid(i)),
            Layer::ReLU => y.iter_mut().zip(x).for_each(|(o, &i)| *o = if i > 0.0 { i } else { 0.0 }),
            Layer::Tanh => y.iter_mut().zip(x).for_each(|(o, &i)| *o = math::tanh(i)),
            Layer::Softmax => math::softmax(x, y),
        }
    }

    /// Back-propagate: given input `x`, output `y` and `dy = dL/dy`, write `dx = dL/dx` and add
    /// this layer's parameter gradients to `grad` (weights then biases; empty for activations).
    pub fn backward(&self, x: &[f32], y: &[f32], dy: &[f32], dx: &mut [f32], grad: &mut [f32]) {
        match self {
            Layer::Linear(l) => l.backward(x, dy, dx, grad),
            Layer::Sigmoid => {
                for i in 0..dx.len() {
                    dx[i] = dy[i] * y[i] * (1.0 - y[i]);
                }
            }
            Layer::ReLU => {
                for i in 0..dx.len() {
                    dx[i] = if x[i] > 0.0 { dy[i] } else { 0.0 };
                }
            }
            Layer::Tanh => {
                for i in 0..dx.len() {
                    dx[i] = dy[i] * (1.0 - y[i] * y[i]);
                }
            }
            Layer::Softmax => {
                let dot: f32 = dy.iter().zip(y).map(|(a, b)| a * b).sum();
                for i in 0..dx.len() {
                    dx[i] = y[i] * (dy[i] - dot);
                }
            }
        }
    }

    /// Mutable view of the parameters in gradient order (weights then biases).
    pub(crate) fn params_mut(&mut self) -> Option<(&mut [f32], &mut [f32])> {
        match self {
            Layer::Linear(l) => Some((&mut l.weight, &mut l.bias)),
            _ => None,
        }
    }
}
