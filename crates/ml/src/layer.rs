//! Layers with forward and backward passes over plain `f32` slices.

use crate::kernels::{self, Act};
use crate::math;
use crate::AlignedVec;
use alloc::vec::Vec;

/// A fully connected layer `y = W x + b`.
///
/// `weight` is stored in the order the fast kernel for the layer's shape reads it:
/// - input-major, `weight[i * out_dim + o] = W[o][i]` (the transpose of PyTorch's and KML's
///   layout), for most layers: the forward pass adds `x[i] * W[:, i]` to a block of outputs
///   held in registers, which vectorises across outputs;
/// - output-major, `weight[o * in_dim + i]`, for narrow layers over long inputs
///   ([`Linear::is_out_major`]: fewer than 8 outputs, 16 or more inputs, like LinnOS's
///   256 -> 2): each output is then a dot product that vectorises across inputs.
///
/// Use [`Linear::from_out_in`], [`Linear::weight_out_in`] and [`Linear::w`] to stay
/// independent of the layout. Parameter gradients use the same order as `weight`.
#[derive(Debug, Clone, PartialEq)]
pub struct Linear {
    /// Number of inputs.
    pub in_dim: usize,
    /// Number of outputs.
    pub out_dim: usize,
    /// `in_dim * out_dim` weights, in the layout described on the type.
    pub weight: AlignedVec,
    /// `out_dim` biases.
    pub bias: Vec<f32>,
}

impl Linear {
    /// A zero-initialised layer.
    pub fn zeros(in_dim: usize, out_dim: usize) -> Self {
        Linear {
            in_dim,
            out_dim,
            weight: AlignedVec::zeros(in_dim * out_dim),
            bias: alloc::vec![0.0; out_dim],
        }
    }

    /// Whether a layer of this shape stores its weights output-major.
    pub fn is_out_major(in_dim: usize, out_dim: usize) -> bool {
        out_dim < 8 && in_dim >= 16
    }

    #[inline]
    fn idx(&self, o: usize, i: usize) -> usize {
        if Self::is_out_major(self.in_dim, self.out_dim) {
            o * self.in_dim + i
        } else {
            i * self.out_dim + o
        }
    }

    /// From weights in out x in (row per output) order, as PyTorch and KML store them.
    pub fn from_out_in(in_dim: usize, out_dim: usize, w_out_in: &[f32], bias: Vec<f32>) -> Self {
        let mut l = Linear {
            in_dim,
            out_dim,
            weight: AlignedVec::zeros(in_dim * out_dim),
            bias,
        };
        for o in 0..out_dim {
            for i in 0..in_dim {
                let k = l.idx(o, i);
                l.weight[k] = w_out_in[o * in_dim + i];
            }
        }
        l
    }

    /// The weights in out x in (row per output) order.
    pub fn weight_out_in(&self) -> Vec<f32> {
        let mut w = alloc::vec![0.0; self.in_dim * self.out_dim];
        for o in 0..self.out_dim {
            for i in 0..self.in_dim {
                w[o * self.in_dim + i] = self.weight[self.idx(o, i)];
            }
        }
        w
    }

    /// `W[o][i]`.
    #[inline]
    pub fn w(&self, o: usize, i: usize) -> f32 {
        self.weight[self.idx(o, i)]
    }

    /// Number of trainable parameters (weights, then biases, in gradient buffers).
    pub fn n_params(&self) -> usize {
        self.weight.len() + self.bias.len()
    }

    /// `y = act(W x + b)`.
    #[inline(always)]
    pub(crate) fn forward<const FMA: bool>(&self, x: &[f32], y: &mut [f32], act: Act) {
        let (x, y) = (&x[..self.in_dim], &mut y[..self.out_dim]);
        if Self::is_out_major(self.in_dim, self.out_dim) {
            kernels::linear_out_major::<FMA>(&self.weight, &self.bias, x, y, act);
        } else {
            kernels::linear_in_major::<FMA>(&self.weight, &self.bias, x, y, act);
        }
    }

    fn backward(&self, x: &[f32], dy: &[f32], dx: &mut [f32], grad: &mut [f32]) {
        let (gw, gb) = grad.split_at_mut(self.weight.len());
        let (n_in, n_out) = (self.in_dim, self.out_dim);
        let dy = &dy[..n_out];
        for (g, &d) in gb.iter_mut().zip(dy) {
            *g += d;
        }
        if Self::is_out_major(n_in, n_out) {
            dx[..n_in].iter_mut().for_each(|v| *v = 0.0);
            for (o, (row, grow)) in self
                .weight
                .chunks_exact(n_in)
                .zip(gw.chunks_exact_mut(n_in))
                .enumerate()
            {
                let d = dy[o];
                for i in 0..n_in {
                    grow[i] += d * x[i];
                    dx[i] += row[i] * d;
                }
            }
        } else {
            for (i, (col, gcol)) in self
                .weight
                .chunks_exact(n_out)
                .zip(gw.chunks_exact_mut(n_out))
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
            Layer::Linear(l) => l.forward::<FMA>(x, y, Act::Identity),
            Layer::Softmax => math::softmax(x, y),
            act => kernels::activate_slice::<FMA>(act.activation().unwrap(), x, y),
        }
    }

    /// The element-wise activation this layer applies, if it is one (softmax is not).
    pub(crate) fn activation(&self) -> Option<Act> {
        match self {
            Layer::Sigmoid => Some(Act::Sigmoid),
            Layer::ReLU => Some(Act::ReLU),
            Layer::Tanh => Some(Act::Tanh),
            Layer::Linear(_) | Layer::Softmax => None,
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
            Layer::Linear(l) => Some((&mut *l.weight, &mut l.bias)),
            _ => None,
        }
    }
}
