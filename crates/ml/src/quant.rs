//! Quantised inference: integer weights scaled by 1000 (LinnOS) and int8 with a per-layer
//! scale. Built from a trained f32 [`Sequential`]; compare accuracy with [`crate::eval`].

use crate::layer::Layer;
use crate::net::Sequential;
use crate::{kernels, math};
use alloc::vec::Vec;

/// How weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// LinnOS: weights, biases and activations as integers scaled by 1000; products are
    /// accumulated in i64 and rescaled after each layer. Exact for integer inputs such as
    /// LinnOS's decimal digits.
    Fixed1000,
    /// int8 weights with one scale per layer (`max|w| / 127`); each layer's input is quantised
    /// to int8 on the fly with its own scale, products accumulated in i32.
    Int8,
}

#[derive(Debug, Clone)]
enum QLayer {
    // Weights input-major like `Linear`, so the inner loop runs over outputs (SIMD-friendly).
    // `l1` = the largest sum of |weights| into one output: with inputs bounded by `m`, no sum
    // exceeds `m * l1`, which decides whether i32 sums are exact.
    Fixed {
        in_dim: usize,
        out_dim: usize,
        w: Vec<i32>,
        b: Vec<i64>,
        b32: Option<Vec<i32>>,
        /// Output-major copy of `w` for narrow layers (fewer outputs than a SIMD block): one
        /// contiguous dot product per output instead of a strided scalar loop.
        wt: Option<Vec<i32>>,
        l1: i64,
        // The same weights pair-packed as i16 for `vpmaddwd` (LinnOS's fast path), when every
        // weight fits in +-32767: half the bytes of i32 and 16 multiplies per instruction.
        packed: Option<Vec<i16>>,
    },
    Int8 {
        in_dim: usize,
        out_dim: usize,
        w: Vec<i8>,
        scale: f32,
        b: Vec<f32>,
    },
    Act(Layer),
}

/// A quantised copy of a network. Inference allocates nothing once a [`QWorkspace`] exists.
#[derive(Debug, Clone)]
pub struct QuantizedMlp {
    scheme: Scheme,
    layers: Vec<QLayer>,
    dims: Vec<usize>,
}

/// Buffers for [`QuantizedMlp::forward`].
#[derive(Debug, Clone)]
pub struct QWorkspace {
    a: Vec<f32>,
    b: Vec<f32>,
    ia: Vec<i64>,
    ib: Vec<i64>,
    xi: Vec<i32>,
    si: Vec<i32>,
    hi: Vec<i32>,
    q: Vec<i8>,
}

const SCALE: f32 = 1000.0;

/// The i16 pair-packed integer layer as a SIMD task, with its rescale (/1000), bias and an
/// optional ReLU fused in (all in i32 until the bias: one vectorised pass instead of four
/// scalar ones over i64).
struct PairLayer<'a> {
    packed: &'a [i16],
    xp: &'a [i32],
    sums: &'a mut [i32],
    bias: &'a [i64],
    /// The bias as i32 when every value is within +-2^30: then the outputs are computed in
    /// i32 (they cannot overflow: |sum / 1000| < 2^22) and also left in `out32` for the next
    /// layer, with their largest magnitude returned.
    bias32: Option<&'a [i32]>,
    relu: bool,
    out: &'a mut [i64],
    out32: &'a mut [i32],
}

impl kernels::SimdTask for PairLayer<'_> {
    type Out = Option<i64>;
    #[inline(always)]
    fn run<const FMA: bool>(self) -> Option<i64> {
        kernels::linear_i16_pairs::<FMA>(self.packed, self.xp, self.sums);
        let lo = if self.relu { 0 } else { i32::MIN };
        if let Some(b32) = self.bias32 {
            let mut m = 0i32;
            for (((o, o32), &s), &b) in self
                .out
                .iter_mut()
                .zip(self.out32.iter_mut())
                .zip(self.sums.iter())
                .zip(b32)
            {
                let v = (s / SCALE_I32 + b).max(lo);
                *o32 = v;
                *o = v as i64;
                m = m.max(v.wrapping_abs());
            }
            return Some(m as i64);
        }
        let lo = lo as i64;
        for ((o, &s), &b) in self.out.iter_mut().zip(self.sums.iter()).zip(self.bias) {
            *o = ((s / SCALE_I32) as i64 + b).max(lo);
        }
        None
    }
}

const SCALE_I32: i32 = 1000;

/// An integer dense layer as a SIMD task; `NARROW` selects i32 sums.
struct IntLayer<'a, const NARROW: bool>(&'a [i32], &'a [i32], &'a mut [i64]);

impl<const NARROW: bool> kernels::SimdTask for IntLayer<'_, NARROW> {
    type Out = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        if NARROW {
            kernels::linear_i32_body(self.0, self.1, self.2)
        } else {
            kernels::linear_i64_body(self.0, self.1, self.2)
        }
    }
}

/// A narrow integer layer as dot products over an output-major copy (i32 sums).
struct DotLayer<'a>(&'a [i32], &'a [i32], &'a mut [i64]);

impl kernels::SimdTask for DotLayer<'_> {
    type Out = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let n = self.1.len();
        for (o, a) in self.2.iter_mut().enumerate() {
            let row = &self.0[o * n..(o + 1) * n];
            *a = row
                .iter()
                .zip(self.1)
                .fold(0i32, |s, (&w, &x)| s.wrapping_add(w.wrapping_mul(x))) as i64;
        }
    }
}

impl QuantizedMlp {
    /// Quantise `net` with `scheme`.
    pub fn new(net: &Sequential, scheme: Scheme) -> Self {
        let layers = net
            .layers()
            .iter()
            .map(|l| match (l, scheme) {
                (Layer::Linear(l), Scheme::Fixed1000) => {
                    // Input-major whatever the f32 layer's layout, as the integer kernel reads it.
                    let mut w = alloc::vec![0i32; l.in_dim * l.out_dim];
                    for o in 0..l.out_dim {
                        for i in 0..l.in_dim {
                            w[i * l.out_dim + o] = libm::roundf(l.w(o, i) * SCALE) as i32;
                        }
                    }
                    let l1 = (0..l.out_dim)
                        .map(|o| (0..l.in_dim).map(|i| (w[i * l.out_dim + o] as i64).abs()).sum::<i64>())
                        .max()
                        .unwrap_or(0);
                    let b: Vec<i64> = l.bias.iter().map(|&v| libm::roundf(v * SCALE) as i64).collect();
                    let packed = w
                        .iter()
                        .all(|v| v.abs() <= i16::MAX as i32)
                        .then(|| kernels::pack_i16_pairs(&w, l.in_dim, l.out_dim));
                    let b32 = b
                        .iter()
                        .all(|v: &i64| v.abs() <= 1 << 30)
                        .then(|| b.iter().map(|&v| v as i32).collect());
                    let wt = (l.out_dim < 8).then(|| {
                        (0..l.out_dim)
                            .flat_map(|o| (0..l.in_dim).map(move |i| (i, o)))
                            .map(|(i, o)| w[i * l.out_dim + o])
                            .collect()
                    });
                    QLayer::Fixed {
                        in_dim: l.in_dim,
                        out_dim: l.out_dim,
                        w,
                        b,
                        b32,
                        wt,
                        l1,
                        packed,
                    }
                }
                (Layer::Linear(l), Scheme::Int8) => {
                    let m = l.weight.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
                    let scale = if m > 0.0 { m / 127.0 } else { 1.0 };
                    QLayer::Int8 {
                        in_dim: l.in_dim,
                        out_dim: l.out_dim,
                        w: l.weight_out_in()
                            .iter()
                            .map(|&v| libm::roundf(v / scale) as i8)
                            .collect(),
                        scale,
                        b: l.bias.clone(),
                    }
                }
                (other, _) => QLayer::Act(other.clone()),
            })
            .collect();
        QuantizedMlp {
            scheme,
            layers,
            dims: net.dims().to_vec(),
        }
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// Output width.
    pub fn out_dim(&self) -> usize {
        *self.dims.last().unwrap()
    }

    /// Bytes of memory the quantised weights occupy (with the struct and tables).
    pub fn bytes(&self) -> usize {
        let mut b = core::mem::size_of::<Self>()
            + self.layers.capacity() * core::mem::size_of::<QLayer>()
            + self.dims.capacity() * 8;
        for l in &self.layers {
            b += match l {
                QLayer::Fixed {
                    w, b, packed, wt, b32, ..
                } => {
                    w.capacity() * 4
                        + b.capacity() * 8
                        + packed.as_ref().map_or(0, |p| p.capacity() * 2)
                        + wt.as_ref().map_or(0, |t| t.capacity() * 4)
                        + b32.as_ref().map_or(0, |t| t.capacity() * 4)
                }
                QLayer::Int8 { w, b, .. } => w.capacity() + b.capacity() * 4,
                QLayer::Act(_) => 0,
            };
        }
        b
    }

    /// Buffers sized for this model.
    pub fn workspace(&self) -> QWorkspace {
        let w = *self.dims.iter().max().unwrap();
        QWorkspace {
            a: alloc::vec![0.0; w],
            b: alloc::vec![0.0; w],
            ia: alloc::vec![0; w],
            xi: alloc::vec![0; w],
            si: alloc::vec![0; w],
            hi: alloc::vec![0; w],
            ib: alloc::vec![0; w],
            q: alloc::vec![0; w],
        }
    }

    /// Run on one row; returns the outputs as f32 (logits for classifiers).
    ///
    /// # Panics
    /// When `x` does not have the model's input width (as [`crate::Sequential::forward`]): a
    /// short row would silently reuse the previous call's values.
    pub fn forward<'w>(&self, x: &[f32], ws: &'w mut QWorkspace) -> &'w [f32] {
        assert_eq!(x.len(), self.dims[0], "input width");
        match self.scheme {
            Scheme::Fixed1000 => self.forward_fixed(x, ws),
            Scheme::Int8 => self.forward_int8(x, ws),
        }
        &ws.a[..self.out_dim()]
    }

    /// Predicted class (argmax, or `>= 0.5` for one output).
    pub fn predict_class(&self, x: &[f32], ws: &mut QWorkspace) -> usize {
        let out = self.forward(x, ws);
        if out.len() == 1 {
            (out[0] >= 0.5) as usize
        } else {
            math::argmax(out)
        }
    }

    fn forward_fixed(&self, x: &[f32], ws: &mut QWorkspace) {
        for (d, &v) in ws.ia.iter_mut().zip(x) {
            *d = math::round_i64(v * SCALE);
        }
        let mut width = x.len();
        // Set when a layer applied the ReLU that follows it.
        let mut relu_done = false;
        // Set (to the largest magnitude) when `ws.hi` holds the current activations as i32.
        let mut hidden32: Option<i64> = None;
        for (li, layer) in self.layers.iter().enumerate() {
            match layer {
                QLayer::Fixed {
                    in_dim,
                    out_dim,
                    w,
                    b,
                    b32,
                    wt,
                    l1,
                    packed,
                } => {
                    // Sums at scale 1e6, rescaled to 1e3 once per output: i32 sums (twice the
                    // SIMD lanes) when they provably cannot overflow, else i64.
                    let x = &ws.ia[..*in_dim];
                    let ready = hidden32.take();
                    let m = ready.unwrap_or_else(|| x.iter().fold(0i64, |a, v| a.max(v.abs())));
                    let acc = &mut ws.ib[..*out_dim];
                    let sums_fit_i32 = m.saturating_mul(*l1) <= i32::MAX as i64;
                    if let (Some(pk), true, true) = (packed, m <= i16::MAX as i64, sums_fit_i32) {
                        let np = in_dim.div_ceil(2);
                        for (p, d) in ws.xi[..np].iter_mut().enumerate() {
                            let lo = x[2 * p] as i16 as u16 as u32;
                            let hi = x.get(2 * p + 1).map_or(0, |&v| v as i16 as u16 as u32);
                            *d = (lo | (hi << 16)) as i32;
                        }
                        let relu = matches!(self.layers.get(li + 1), Some(QLayer::Act(Layer::ReLU)));
                        hidden32 = kernels::simd(PairLayer {
                            packed: pk,
                            xp: &ws.xi[..np],
                            sums: &mut ws.si[..*out_dim],
                            bias: b,
                            bias32: b32.as_deref(),
                            relu,
                            out: acc,
                            out32: &mut ws.hi[..*out_dim],
                        });
                        relu_done = relu;
                        core::mem::swap(&mut ws.ia, &mut ws.ib);
                        width = *out_dim;
                        continue;
                    } else if m <= i32::MAX as i64 {
                        let xi = if ready.is_some() {
                            &ws.hi[..*in_dim]
                        } else {
                            for (d, &v) in ws.xi.iter_mut().zip(x) {
                                *d = v as i32;
                            }
                            &ws.xi[..*in_dim]
                        };
                        if let (true, Some(wt)) = (sums_fit_i32, wt) {
                            kernels::simd(DotLayer(wt, xi, acc));
                        } else if sums_fit_i32 {
                            kernels::simd(IntLayer::<true>(w, xi, acc));
                        } else {
                            kernels::simd(IntLayer::<false>(w, xi, acc));
                        }
                    } else {
                        for (o, a) in acc.iter_mut().enumerate() {
                            *a = (0..*in_dim).fold(0i64, |s, i| {
                                s.saturating_add((w[i * out_dim + o] as i64).saturating_mul(x[i]))
                            });
                        }
                    }
                    for (a, &bo) in acc.iter_mut().zip(b) {
                        *a = *a / SCALE as i64 + bo;
                    }
                    core::mem::swap(&mut ws.ia, &mut ws.ib);
                    width = *out_dim;
                }
                QLayer::Act(Layer::ReLU) if relu_done => relu_done = false,
                QLayer::Act(Layer::ReLU) => {
                    hidden32 = None;
                    ws.ia[..width].iter_mut().for_each(|v| *v = (*v).max(0))
                }
                QLayer::Act(act) => {
                    hidden32 = None;
                    // Non-linear activations other than ReLU have no exact integer form: go
                    // through f32 and back, as LinnOS would need a lookup table for.
                    for i in 0..width {
                        ws.a[i] = ws.ia[i] as f32 / SCALE;
                    }
                    act.forward(&ws.a[..width], &mut ws.b[..width]);
                    for i in 0..width {
                        ws.ia[i] = math::round_i64(ws.b[i] * SCALE);
                    }
                }
                QLayer::Int8 { .. } => unreachable!("int8 layer in a fixed-point model"),
            }
        }
        for i in 0..width {
            ws.a[i] = ws.ia[i] as f32 / SCALE;
        }
    }

    fn forward_int8(&self, x: &[f32], ws: &mut QWorkspace) {
        ws.a[..x.len()].copy_from_slice(x);
        let mut width = x.len();
        for layer in &self.layers {
            match layer {
                QLayer::Int8 {
                    in_dim,
                    out_dim,
                    w,
                    scale,
                    b,
                } => {
                    let m = ws.a[..*in_dim].iter().fold(0.0f32, |a, &v| a.max(v.abs()));
                    let sx = if m > 0.0 { m / 127.0 } else { 1.0 };
                    for (q, &v) in ws.q.iter_mut().zip(&ws.a[..*in_dim]) {
                        *q = math::round_i64(v / sx) as i8;
                    }
                    let s = scale * sx;
                    for o in 0..*out_dim {
                        let row = &w[o * in_dim..(o + 1) * in_dim];
                        let mut acc: i32 = 0;
                        for (wi, xi) in row.iter().zip(&ws.q[..*in_dim]) {
                            acc += *wi as i32 * *xi as i32;
                        }
                        ws.b[o] = acc as f32 * s + b[o];
                    }
                    core::mem::swap(&mut ws.a, &mut ws.b);
                    width = *out_dim;
                }
                QLayer::Act(act) => {
                    act.forward(&ws.a[..width], &mut ws.b[..width]);
                    core::mem::swap(&mut ws.a, &mut ws.b);
                }
                QLayer::Fixed { .. } => unreachable!("fixed-point layer in an int8 model"),
            }
        }
    }
}
