//! Loss functions: value and gradient with respect to the network output, per sample.

use crate::math;
use alloc::vec::Vec;

/// A loss over one sample. Classification losses take the class index as the single target
/// value; regression losses take one target per output.
#[derive(Debug, Clone, PartialEq)]
pub enum Loss {
    /// Softmax cross-entropy on logits (KML's readahead loss). Optional per-class weights.
    SoftmaxCrossEntropy {
        /// Weight of each class's samples; `None` = all 1.
        class_weights: Option<Vec<f32>>,
    },
    /// Binary cross-entropy on a probability (the network ends in a sigmoid), target 0 or 1.
    /// `pos_weight` multiplies positive samples (ML-MittOS's class weight b on EBUSY).
    BinaryCrossEntropy {
        /// Weight of positive samples.
        pos_weight: f32,
    },
    /// Mean squared error.
    Mse,
    /// ML-MittOS's asymmetric MSE `mean((y - yhat)^2 * (sign(y - yhat) + b)^2)`, `0 <= b <= 1`:
    /// under-estimates cost `(1+b)^2`, over-estimates `(1-b)^2` (`shared/spec/ml-mittos.md` s.2).
    AsymmetricMse {
        /// Bias `b`.
        b: f32,
    },
    /// Keras' categorical hinge on logits, `max(0, 1 + max_{j != y} z_j - z_y)`, with LinnOS's
    /// multiplier on samples of `penalized_class` (the "slow" class: misclassifying one of them
    /// as fast is a false submit; `shared/spec/tail-latency.md` s.3).
    CategoricalHinge {
        /// Multiplier on the loss of `penalized_class` samples (1 = plain hinge).
        penalty: f32,
        /// The class whose errors are penalised.
        penalized_class: usize,
    },
}

impl Loss {
    /// Unweighted softmax cross-entropy.
    pub fn softmax_cross_entropy() -> Self {
        Loss::SoftmaxCrossEntropy { class_weights: None }
    }

    /// Whether the target is a class index (one value per sample).
    pub fn is_classification(&self) -> bool {
        !matches!(self, Loss::Mse | Loss::AsymmetricMse { .. })
    }

    /// Number of target values per sample for a network with `out_dim` outputs.
    pub fn target_width(&self, out_dim: usize) -> usize {
        if self.is_classification() {
            1
        } else {
            out_dim
        }
    }

    /// Loss of one sample; writes `dL/d output` into `grad` (same length as `out`).
    pub fn forward_backward(&self, out: &[f32], target: &[f32], grad: &mut [f32]) -> f32 {
        match self {
            Loss::SoftmaxCrossEntropy { class_weights } => {
                let y = target[0] as usize;
                let w = class_weights.as_ref().map_or(1.0, |cw| cw[y]);
                math::softmax(out, grad);
                let p = grad[y].max(1e-30);
                grad[y] -= 1.0;
                grad.iter_mut().for_each(|g| *g *= w);
                -w * math::ln(p)
            }
            Loss::BinaryCrossEntropy { pos_weight } => {
                let y = target[0];
                let p = out[0].clamp(1e-7, 1.0 - 1e-7);
                let wy = pos_weight * y;
                grad[0] = -wy / p + (1.0 - y) / (1.0 - p);
                -(wy * math::ln(p) + (1.0 - y) * math::ln(1.0 - p))
            }
            Loss::Mse => {
                let n = out.len() as f32;
                let mut l = 0.0;
                for i in 0..out.len() {
                    let d = out[i] - target[i];
                    l += d * d;
                    grad[i] = 2.0 * d / n;
                }
                l / n
            }
            Loss::AsymmetricMse { b } => {
                let n = out.len() as f32;
                let mut l = 0.0;
                for i in 0..out.len() {
                    let d = target[i] - out[i];
                    let s = if d > 0.0 {
                        1.0
                    } else if d < 0.0 {
                        -1.0
                    } else {
                        0.0
                    };
                    let k = (s + b) * (s + b);
                    l += d * d * k;
                    grad[i] = -2.0 * d * k / n;
                }
                l / n
            }
            Loss::CategoricalHinge {
                penalty,
                penalized_class,
            } => {
                let y = target[0] as usize;
                let w = if y == *penalized_class { *penalty } else { 1.0 };
                grad.iter_mut().for_each(|g| *g = 0.0);
                let mut j_neg = usize::MAX;
                for j in 0..out.len() {
                    if j != y && (j_neg == usize::MAX || out[j] > out[j_neg]) {
                        j_neg = j;
                    }
                }
                let margin = 1.0 + out[j_neg] - out[y];
                if margin > 0.0 {
                    grad[y] = -w;
                    grad[j_neg] = w;
                    w * margin
                } else {
                    0.0
                }
            }
        }
    }

    /// Short name, as in model dumps.
    pub fn name(&self) -> &'static str {
        match self {
            Loss::SoftmaxCrossEntropy { .. } => "softmax_cross_entropy",
            Loss::BinaryCrossEntropy { .. } => "binary_cross_entropy",
            Loss::Mse => "mse",
            Loss::AsymmetricMse { .. } => "asymmetric_mse",
            Loss::CategoricalHinge { .. } => "categorical_hinge",
        }
    }
}
