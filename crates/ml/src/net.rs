//! Sequential networks, the MLP builder, and SGD with momentum.

use crate::layer::{Layer, Linear};
use crate::loss::Loss;
use crate::rng::Rng;
use crate::{kernels, math};
use crate::{Error, Result};
use alloc::vec::Vec;

/// A chain of layers. Inference needs a [`Workspace`] (made once by [`Sequential::workspace`])
/// and then allocates nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequential {
    layers: Vec<Layer>,
    /// `dims[0]` is the input width, `dims[i + 1]` the output width of layer `i`.
    dims: Vec<usize>,
}

/// Preallocated activations for one forward (and backward) pass of a given [`Sequential`].
#[derive(Debug, Clone)]
pub struct Workspace {
    acts: Vec<f32>,
    offsets: Vec<usize>,
}

impl Workspace {
    fn slot(&self, i: usize) -> &[f32] {
        &self.acts[self.offsets[i]..self.offsets[i + 1]]
    }

    /// Bytes held by this workspace's buffers.
    pub fn bytes(&self) -> usize {
        self.acts.capacity() * 4 + self.offsets.capacity() * core::mem::size_of::<usize>()
    }
}

impl Sequential {
    /// A model from layers; `in_dim` is the input width. Fails if a Linear layer's input width
    /// does not match the width flowing into it.
    pub fn new(in_dim: usize, layers: Vec<Layer>) -> Result<Self> {
        if in_dim == 0 {
            return Err(Error::invalid("architecture", "input width is 0"));
        }
        let mut dims = alloc::vec![in_dim];
        for layer in &layers {
            let d = *dims.last().unwrap();
            if let Layer::Linear(l) = layer {
                if l.in_dim != d {
                    return Err(Error::Shape {
                        what: "linear layer input width",
                        expected: d,
                        found: l.in_dim,
                    });
                }
                if l.out_dim == 0 || l.weight.len() != l.in_dim * l.out_dim || l.bias.len() != l.out_dim {
                    return Err(Error::invalid(
                        "linear layer",
                        "weight/bias sizes do not match its shape",
                    ));
                }
            }
            dims.push(layer.out_dim(d));
        }
        Ok(Sequential { layers, dims })
    }

    /// The layers, input first.
    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// Mutable access to the layers (shapes must not be changed).
    pub fn layers_mut(&mut self) -> &mut [Layer] {
        &mut self.layers
    }

    /// Input width.
    pub fn in_dim(&self) -> usize {
        self.dims[0]
    }

    /// Output width.
    pub fn out_dim(&self) -> usize {
        *self.dims.last().unwrap()
    }

    /// Widths of every activation, input first.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Number of trainable parameters.
    pub fn n_params(&self) -> usize {
        self.layers.iter().map(Layer::n_params).sum()
    }

    /// Bytes of memory the model occupies (struct, layer table, weights), not counting a
    /// workspace.
    pub fn bytes(&self) -> usize {
        let mut b = core::mem::size_of::<Self>()
            + self.layers.capacity() * core::mem::size_of::<Layer>()
            + self.dims.capacity() * core::mem::size_of::<usize>();
        for l in &self.layers {
            if let Layer::Linear(l) = l {
                b += l.weight.bytes() + l.bias.capacity() * 4;
            }
        }
        b
    }

    /// A workspace sized for this model.
    pub fn workspace(&self) -> Workspace {
        let mut offsets = alloc::vec![0];
        for d in &self.dims {
            offsets.push(offsets.last().unwrap() + d);
        }
        Workspace {
            acts: alloc::vec![0.0; *offsets.last().unwrap()],
            offsets,
        }
    }

    /// Run the model on one input row; returns the output (logits for classifiers). No
    /// allocation. `x` must have [`Sequential::in_dim`] values.
    #[inline]
    pub fn forward<'w>(&self, x: &[f32], ws: &'w mut Workspace) -> &'w [f32] {
        assert_eq!(x.len(), self.in_dim(), "input row width");
        kernels::simd(Infer(self, x, &mut *ws));
        ws.slot(self.layers.len())
    }

    /// Like [`Sequential::forward`], but every layer's output is kept in the workspace (the
    /// backward pass needs them); the inference path fuses an activation into the dense layer
    /// before it and skips the intermediate.
    pub fn forward_train<'w>(&self, x: &[f32], ws: &'w mut Workspace) -> &'w [f32] {
        assert_eq!(x.len(), self.in_dim(), "input row width");
        kernels::simd(Train(self, x, &mut *ws));
        ws.slot(self.layers.len())
    }

    /// Predicted class: argmax of the output, or `output >= 0.5` for a single output.
    #[inline]
    pub fn predict_class(&self, x: &[f32], ws: &mut Workspace) -> usize {
        let out = self.forward(x, ws);
        if out.len() == 1 {
            (out[0] >= 0.5) as usize
        } else {
            math::argmax(out)
        }
    }

    /// Class probabilities into `proba`: softmax of the logits, or `[1-p, p]` for one output.
    /// Returns the class, as [`Self::predict_class`] gives it bit for bit (from the same pass).
    pub fn predict_proba(&self, x: &[f32], ws: &mut Workspace, proba: &mut [f32]) -> usize {
        let out = self.forward(x, ws);
        if out.len() == 1 {
            proba[0] = 1.0 - out[0];
            proba[1] = out[0];
            (out[0] >= 0.5) as usize
        } else {
            if matches!(self.layers.last(), Some(Layer::Softmax)) {
                proba.copy_from_slice(out);
            } else {
                math::softmax(out, proba);
            }
            math::argmax(out)
        }
    }

    /// Set the last Linear layer's bias to `ln(pos / neg)`, the class prior of a binary
    /// classifier (ML-MittOS's initialisation: training starts from the base rate).
    pub fn init_output_bias_log_odds(&mut self, pos: usize, neg: usize) -> Result<()> {
        if pos == 0 || neg == 0 {
            return Err(Error::invalid(
                "labels",
                "both classes must be present to set the log-odds bias",
            ));
        }
        let v = math::ln(pos as f32 / neg as f32);
        match self.layers.iter_mut().rev().find_map(|l| match l {
            Layer::Linear(l) => Some(l),
            _ => None,
        }) {
            Some(l) => {
                l.bias.iter_mut().for_each(|b| *b = v);
                Ok(())
            }
            None => Err(Error::invalid("architecture", "model has no linear layer")),
        }
    }

    /// Check that `x`, `y` hold whole rows for this model and loss; returns the row count.
    pub fn check_data(&self, x: &[f32], y: &[f32], loss: &Loss) -> Result<usize> {
        let d = self.in_dim();
        if !x.len().is_multiple_of(d) {
            return Err(Error::Shape {
                what: "input values (not a whole number of rows)",
                expected: d,
                found: x.len() % d,
            });
        }
        let n = x.len() / d;
        let tw = loss.target_width(self.out_dim());
        if y.len() != n * tw {
            return Err(Error::Shape {
                what: "target values",
                expected: n * tw,
                found: y.len(),
            });
        }
        if loss.is_classification() {
            let classes = self.out_dim().max(2);
            for &v in y {
                if !math::is_class_index(v as f64, classes) {
                    return Err(Error::invalid(
                        "labels",
                        alloc::format!("label {v} is not a class index below {classes}"),
                    ));
                }
            }
        }
        if x.iter().chain(y).any(|v| !v.is_finite()) {
            return Err(Error::invalid("data", "contains NaN or infinity"));
        }
        Ok(n)
    }

    /// Train with mini-batch SGD with momentum. `x` holds `n` rows of [`Sequential::in_dim`]
    /// values, `y` the targets ([`Loss::target_width`] per row). Rows are shuffled each epoch
    /// with `cfg.seed`, so the same seed gives the same model. Returns the mean loss per epoch.
    pub fn fit(&mut self, x: &[f32], y: &[f32], loss: &Loss, cfg: &TrainConfig) -> Result<Vec<f32>> {
        cfg.validate()?;
        let n = self.check_data(x, y, loss)?;
        if n == 0 {
            return Err(Error::invalid("data", "no rows"));
        }
        if let Loss::SoftmaxCrossEntropy { class_weights: Some(w) } = loss {
            if w.len() != self.out_dim() {
                return Err(Error::Shape {
                    what: "class weights",
                    expected: self.out_dim(),
                    found: w.len(),
                });
            }
            if w.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(Error::invalid("class weights", "must be finite and non-negative"));
            }
        }
        let (d, tw) = (self.in_dim(), loss.target_width(self.out_dim()));
        // A batch is at most the whole data set: more would only allocate.
        let batch = cfg.batch_size.min(n);
        let mut sgd = Sgd::new(self, cfg.lr, cfg.momentum);
        let mut ws = self.workspace();
        let mut rng = Rng::new(cfg.seed);
        let mut order: Vec<usize> = (0..n).collect();
        let mut xb = alloc::vec![0.0; batch * d];
        let mut yb = alloc::vec![0.0; batch * tw];
        let mut history = Vec::with_capacity(cfg.epochs);
        for _ in 0..cfg.epochs {
            rng.shuffle(&mut order);
            let mut total = 0.0;
            for chunk in order.chunks(batch) {
                for (k, &r) in chunk.iter().enumerate() {
                    xb[k * d..(k + 1) * d].copy_from_slice(&x[r * d..(r + 1) * d]);
                    yb[k * tw..(k + 1) * tw].copy_from_slice(&y[r * tw..(r + 1) * tw]);
                }
                let m = chunk.len();
                total += sgd.step(self, &mut ws, &xb[..m * d], &yb[..m * tw], loss) * m as f32;
            }
            history.push(total / n as f32);
        }
        Ok(history)
    }
}

/// The inference pass as one SIMD task: a dense layer followed by an element-wise activation
/// is computed as one fused kernel writing straight into the activation's slot, and the first
/// layer reads the caller's row in place.
struct Infer<'a>(&'a Sequential, &'a [f32], &'a mut Workspace);

impl kernels::SimdTask for Infer<'_> {
    type Out = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let Infer(net, x, ws) = self;
        let n = net.layers.len();
        if n == 0 {
            ws.acts[..x.len()].copy_from_slice(x);
            return;
        }
        let mut src: Option<usize> = None; // None: the caller's row
        let mut i = 0;
        while i < n {
            let fused = match (&net.layers[i], net.layers.get(i + 1).and_then(Layer::activation)) {
                (Layer::Linear(_), Some(act)) => Some(act),
                _ => None,
            };
            let dst = i + 1 + fused.is_some() as usize;
            let (before, after) = ws.acts.split_at_mut(ws.offsets[dst]);
            let input = match src {
                None => x,
                Some(s) => &before[ws.offsets[s]..ws.offsets[s + 1]],
            };
            let output = &mut after[..net.dims[dst]];
            match (&net.layers[i], fused) {
                (Layer::Linear(l), Some(act)) => l.forward::<FMA>(input, output, act),
                (layer, _) => layer.forward_in::<FMA>(input, output),
            }
            src = Some(dst);
            i = dst;
        }
    }
}

/// The training forward pass: every layer's output kept.
struct Train<'a>(&'a Sequential, &'a [f32], &'a mut Workspace);

impl kernels::SimdTask for Train<'_> {
    type Out = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let Train(net, x, ws) = self;
        ws.acts[..x.len()].copy_from_slice(x);
        for (i, layer) in net.layers.iter().enumerate() {
            let (before, after) = ws.acts.split_at_mut(ws.offsets[i + 1]);
            layer.forward_in::<FMA>(&before[ws.offsets[i]..], &mut after[..net.dims[i + 1]]);
        }
    }
}

/// Training settings for [`Sequential::fit`]. Defaults are KML's readahead settings.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainConfig {
    /// Passes over the data (default 50).
    pub epochs: usize,
    /// Learning rate (default 0.01, KML).
    pub lr: f32,
    /// Momentum (default 0.99, KML).
    pub momentum: f32,
    /// Rows per gradient step (default 1, KML).
    pub batch_size: usize,
    /// Seed for shuffling (default 0).
    pub seed: u64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            epochs: 50,
            lr: 0.01,
            momentum: 0.99,
            batch_size: 1,
            seed: 0,
        }
    }
}

impl TrainConfig {
    /// Reject settings that cannot train.
    pub fn validate(&self) -> Result<()> {
        if self.batch_size == 0 {
            return Err(Error::invalid("batch_size", "must be at least 1"));
        }
        if self.epochs == 0 || self.epochs > MAX_EPOCHS {
            return Err(Error::invalid("epochs", alloc::format!("must be 1 to {MAX_EPOCHS}")));
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return Err(Error::invalid("lr", "must be a positive number"));
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return Err(Error::invalid("momentum", "must be in [0, 1)"));
        }
        Ok(())
    }
}

/// The most epochs [`Sequential::fit`] runs (the loss history is allocated up front).
pub const MAX_EPOCHS: usize = 1_000_000;

/// SGD with classical momentum: `v = momentum * v - lr * g; w += v`. Holds every buffer a step
/// needs, so [`Sgd::step`] does not allocate.
#[derive(Debug, Clone)]
pub struct Sgd {
    /// Learning rate.
    pub lr: f32,
    /// Momentum.
    pub momentum: f32,
    grad: Vec<f32>,
    velocity: Vec<f32>,
    /// Start of each layer's parameters in `grad` / `velocity`.
    param_offsets: Vec<usize>,
    dy: Vec<f32>,
    dx: Vec<f32>,
}

impl Sgd {
    /// An optimiser for `net`.
    pub fn new(net: &Sequential, lr: f32, momentum: f32) -> Self {
        let mut param_offsets = alloc::vec![0];
        for l in net.layers() {
            param_offsets.push(param_offsets.last().unwrap() + l.n_params());
        }
        let n = *param_offsets.last().unwrap();
        let wmax = *net.dims().iter().max().unwrap();
        Sgd {
            lr,
            momentum,
            grad: alloc::vec![0.0; n],
            velocity: alloc::vec![0.0; n],
            param_offsets,
            dy: alloc::vec![0.0; wmax],
            dx: alloc::vec![0.0; wmax],
        }
    }

    /// Accumulate the gradient of one sample into the internal buffer; returns its loss.
    pub fn accumulate(&mut self, net: &Sequential, ws: &mut Workspace, x: &[f32], target: &[f32], loss: &Loss) -> f32 {
        let nl = net.layers.len();
        let out_dim = net.out_dim();
        net.forward_train(x, ws);
        let l = loss.forward_backward(ws.slot(nl), target, &mut self.dy[..out_dim]);
        for i in (0..nl).rev() {
            let (din, dout) = (net.dims[i], net.dims[i + 1]);
            let grad = &mut self.grad[self.param_offsets[i]..self.param_offsets[i + 1]];
            net.layers[i].backward(ws.slot(i), ws.slot(i + 1), &self.dy[..dout], &mut self.dx[..din], grad);
            core::mem::swap(&mut self.dy, &mut self.dx);
        }
        l
    }

    /// Parameter gradient accumulated so far (for gradient checks).
    pub fn gradient(&self) -> &[f32] {
        &self.grad
    }

    /// Clear the accumulated gradient.
    pub fn zero_grad(&mut self) {
        self.grad.iter_mut().for_each(|g| *g = 0.0);
    }

    /// One mini-batch step: mean gradient over the rows of `x` / `target`, then the update.
    /// Returns the mean loss of the batch (before the update).
    pub fn step(&mut self, net: &mut Sequential, ws: &mut Workspace, x: &[f32], target: &[f32], loss: &Loss) -> f32 {
        let d = net.in_dim();
        let tw = loss.target_width(net.out_dim());
        let m = x.len() / d;
        self.zero_grad();
        let mut total = 0.0;
        for k in 0..m {
            total += self.accumulate(net, ws, &x[k * d..(k + 1) * d], &target[k * tw..(k + 1) * tw], loss);
        }
        let scale = self.lr / m as f32;
        for (i, layer) in net.layers.iter_mut().enumerate() {
            if let Some((w, b)) = layer.params_mut() {
                let off = self.param_offsets[i];
                let params = w.iter_mut().chain(b.iter_mut());
                for (k, p) in params.enumerate() {
                    let v = &mut self.velocity[off + k];
                    *v = self.momentum * *v - scale * self.grad[off + k];
                    *p += *v;
                }
            }
        }
        total / m as f32
    }
}

/// Activation functions for [`MlpBuilder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// Logistic.
    Sigmoid,
    /// Rectified linear.
    ReLU,
    /// Hyperbolic tangent.
    Tanh,
    /// Softmax (output only).
    Softmax,
}

impl Activation {
    fn layer(self) -> Layer {
        match self {
            Activation::Sigmoid => Layer::Sigmoid,
            Activation::ReLU => Layer::ReLU,
            Activation::Tanh => Layer::Tanh,
            Activation::Softmax => Layer::Softmax,
        }
    }

    /// Parse `sigmoid`, `relu`, `tanh`, `softmax`.
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "sigmoid" => Activation::Sigmoid,
            "relu" => Activation::ReLU,
            "tanh" => Activation::Tanh,
            "softmax" => Activation::Softmax,
            _ => {
                return Err(Error::invalid(
                    "activation",
                    alloc::format!("unknown activation {s:?} (sigmoid, relu, tanh, softmax)"),
                ))
            }
        })
    }
}

/// Builds a multi-layer perceptron of any depth and width.
///
/// ```
/// use iolearn_ml::{Activation, MlpBuilder};
/// // KML's readahead network: 5 -> 15 -> sigmoid -> 5 -> sigmoid -> 4.
/// let net = MlpBuilder::new(5).hidden(15, Activation::Sigmoid).hidden(5, Activation::Sigmoid).output(4).build();
/// assert_eq!(net.n_params(), 194);
/// ```
#[derive(Debug, Clone)]
pub struct MlpBuilder {
    in_dim: usize,
    hidden: Vec<(usize, Activation)>,
    out_dim: usize,
    out_act: Option<Activation>,
    seed: u64,
}

impl MlpBuilder {
    /// Start a network with `in_dim` inputs. Defaults: no hidden layer, 1 output, no output
    /// activation, seed 0.
    pub fn new(in_dim: usize) -> Self {
        MlpBuilder {
            in_dim,
            hidden: Vec::new(),
            out_dim: 1,
            out_act: None,
            seed: 0,
        }
    }

    /// Add a hidden layer of `width` units followed by `act`.
    pub fn hidden(mut self, width: usize, act: Activation) -> Self {
        self.hidden.push((width, act));
        self
    }

    /// Number of outputs (default 1).
    pub fn output(mut self, width: usize) -> Self {
        self.out_dim = width;
        self
    }

    /// Activation after the output layer (default none: logits).
    pub fn output_activation(mut self, act: Option<Activation>) -> Self {
        self.out_act = act;
        self
    }

    /// Seed of the weight initialisation (default 0).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Build, initialising weights uniformly (Glorot for sigmoid/tanh, He for ReLU) and biases
    /// to zero.
    pub fn build(self) -> Sequential {
        self.try_build().expect("MlpBuilder: zero-width layer")
    }

    /// Like [`MlpBuilder::build`], but returns an error on a zero-width layer.
    pub fn try_build(self) -> Result<Sequential> {
        let mut rng = Rng::new(self.seed);
        let mut layers = Vec::new();
        let mut d = self.in_dim;
        let widths = self
            .hidden
            .iter()
            .map(|&(w, a)| (w, Some(a)))
            .chain(core::iter::once((self.out_dim, self.out_act)));
        for (w, act) in widths {
            if w == 0 || d == 0 {
                return Err(Error::invalid("architecture", "layer width 0"));
            }
            if w > crate::format::MAX_WIDTH || d > crate::format::MAX_WIDTH {
                return Err(Error::invalid(
                    "architecture",
                    alloc::format!(
                        "layer width over {} (a model file could not hold it)",
                        crate::format::MAX_WIDTH
                    ),
                ));
            }
            let fan = match act {
                Some(Activation::ReLU) => libm::sqrtf(6.0 / d as f32),
                _ => libm::sqrtf(6.0 / (d + w) as f32),
            };
            let mut lin = Linear::zeros(d, w);
            lin.weight.iter_mut().for_each(|v| *v = rng.uniform(-fan, fan));
            layers.push(Layer::Linear(lin));
            if let Some(a) = act {
                layers.push(a.layer());
            }
            d = w;
        }
        Sequential::new(self.in_dim, layers)
    }
}
