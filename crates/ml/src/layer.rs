//! Layers with forward and backward passes over plain `f32` slices.

use crate::{kernels, math};
use alloc::vec::Vec;

/// A fully connected layer `y = W x + b`.
///
/// `weight` is stored input-major, `weight[i * out_dim + o] = W[o][i]` (the transpose of
/// PyTorch's and KML's out x in layout): the forward pass then adds `x[i] * W[:, i]` to all
/// outputs at once, a contiguous loop the compiler turns into SIMD, where a dot product per
/// output would be a serial chain of dependent additions. Use [`Linear::from_out_in`] and
/// [`Linear::weight_out_in`] to convert.
#[derive(Debug, Clone, PartialEq)]
pub struct Linear {
    /// Number of inputs.
    pub in_dim: usize,
    /// Number of outputs.
    pub out_dim: usize,
    /// `in_dim * out_dim` weights, input-major (see the type's docs).
    pub weight: Vec<f32>,
    /// `out_dim` biases.
    pub bias: Vec<f32>,
}

impl Linear {
    /// A zero-initialised layer.
    pub fn zeros(in_dim: usize, out_dim: usize) -> Self {
        Linear {
            in_dim,
            out_dim,
            weight: alloc::vec![0.0; in_dim * out_dim],
            bias: alloc::vec![0.0; out_dim],
        }
    }

    /// From weights in out x in (row per output) order, as PyTorch and KML store them.
    pub fn from_out_in(in_dim: usize, out_dim: usize, w_out_in: &[f32], bias: Vec<f32>) -> Self {
        let mut weight = alloc::vec![0.0; in_dim * out_dim];
        for o in 0..out_dim {
            for i in 0..in_dim {
                weight[i * out_dim + o] = w_out_in[o * in_dim + i];
            }
        }
        Linear {
            in_dim,
            out_dim,
            weight,
            bias,
        }
    }

    /// The weights in out x in (row per output) order.
    pub fn weight_out_in(&self) -> Vec<f32> {
        let mut w = alloc::vec![0.0; self.in_dim * self.out_dim];
        for o in 0..self.out_dim {
            for i in 0..self.in_dim {
                w[o * self.in_dim + i] = self.weight[i * self.out_dim + o];
            }
        }
        w
    }

    /// `W[o][i]`.
    #[inline]
    pub fn w(&self, o: usize, i: usize) -> f32 {
        self.weight[i * self.out_dim + o]
    }

    /// Number of trainable parameters (weights, then biases, in gradient buffers).
    pub fn n_params(&self) -> usize {
        self.weight.len() + self.bias.len()
    }

    #[inline(always)]
    fn forward<const FMA: bool>(&self, x: &[f32], y: &mut [f32]) {
        kernels::linear_f32_body::<FMA>(
            &self.weight,
            &self.bias,
            &x[..self.in_dim],
            &mut y[..self.out_dim],
        );
    }

    fn backward(&self, x: &[f32], dy: &[f32], dx: &mut [f32], grad: &mut [f32]) {
        let (gw, gb) = grad.split_at_mut(self.weight.len());
        let dy = &dy[..self.out_dim];
        for (g, &d) in gb.iter_mut().zip(dy) {
            *g += d;
        }
        for (i, (col, gcol)) in self
            .weight
            .chunks_exact(self.out_dim)
            .zip(gw.chunks_exact_mut(self.out_dim))
            .enumerate()
        {
            let xi = x[i];
            let mut acc = 0.0;
            for ((g, &w), &d) in gcol.iter_mut().zip(col).zip(dy) {
                *g += d * xi;
                acc += w * d;
            }
            dx[i] = acc;
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
        struct Task<'a>(&'a Layer, &'a [f32], &'a mut [f32]);
        impl kernels::SimdTask for Task<'_> {
            type Out = ();
            #[inline(always)]
            fn run<const FMA: bool>(self) {
                self.0.forward_in::<FMA>(self.1, self.2)
            }
        }
        kernels::simd(Task(self, x, y))
    }

    /// [`Layer::forward`] for callers already inside [`kernels::simd`].
    #[inline(always)]
    pub(crate) fn forward_in<const FMA: bool>(&self, x: &[f32], y: &mut [f32]) {
        match self {
            Layer::Linear(l) => l.forward::<FMA>(x, y),
            Layer::Sigmoid => kernels::sigmoid_body(x, y),
            Layer::ReLU => y
                .iter_mut()
                .zip(x)
                .for_each(|(o, &i)| *o = if i > 0.0 { i } else { 0.0 }),
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
