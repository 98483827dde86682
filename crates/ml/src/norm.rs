//! Feature normalisation: fixed Z-score and online (Welford) statistics.
//!
//! Statistics are kept in `f64`: KML found single precision insufficient for running means and
//! variances of page offsets in its large-memory runs (`shared/spec/kml.md` section 3).

use crate::{math, Error, Result};
use alloc::vec::Vec;

/// Fixed Z-score normaliser: `(x - mean) / std` per feature, optionally after
/// `sign(x) ln(1 + |x|)` on chosen features.
///
/// Why the logarithm: counts and distances in the I/O path span orders of magnitude. KML's
/// mean page distance is 2.7 for a backward scan, 4.2 for a forward one and 60-3,000 for
/// random reads; Z-scored as is, the two scans sit 0.002 standard deviations apart and a
/// network cannot tell them apart, while after the logarithm they are 0.2 apart.
#[derive(Debug, Clone, PartialEq)]
pub struct ZScore {
    /// Per-feature mean (of the log-transformed value where `log1p` says so).
    pub mean: Vec<f64>,
    /// Per-feature standard deviation (a zero is treated as 1, so constant features map to 0).
    pub std: Vec<f64>,
    /// Features taken through `sign(x) ln(1 + |x|)` first; empty means none.
    pub log1p: Vec<bool>,
}

/// `sign(x) ln(1 + |x|)`: monotone, defined everywhere, 0 at 0.
#[inline]
pub fn signed_log1p(x: f64) -> f64 {
    let l = math::ln64(1.0 + x.abs());
    if x < 0.0 {
        -l
    } else {
        l
    }
}

/// The one rule for a normaliser's statistics, at construction and when a model file is read
/// (a model built past it would not load again): means within 1e30, standard deviations 0 (a
/// constant feature) or from 1e-30 to 1e30, so that `(x - mean) / std` stays finite in f32.
pub(crate) fn check_statistics(mean: &[f64], std: &[f64]) -> Result<()> {
    if mean.iter().any(|m| !(m.is_finite() && m.abs() <= 1e30))
        || std.iter().any(|&s| !(s == 0.0 || (1e-30..=1e30).contains(&s)))
    {
        return Err(Error::invalid(
            "normaliser",
            "means must be within 1e30, standard deviations 0 (a constant feature) or from 1e-30 to 1e30",
        ));
    }
    Ok(())
}

impl ZScore {
    /// From explicit statistics; lengths must match and values be in range
    /// ([`check_statistics`]).
    pub fn new(mean: Vec<f64>, std: Vec<f64>) -> Result<Self> {
        if mean.len() != std.len() {
            return Err(Error::Shape {
                what: "normaliser std length",
                expected: mean.len(),
                found: std.len(),
            });
        }
        check_statistics(&mean, &std)?;
        Ok(ZScore {
            mean,
            std,
            log1p: Vec::new(),
        })
    }

    /// The same with `log1p` marking log-transformed features (length must match).
    pub fn with_log1p(mut self, log1p: Vec<bool>) -> Result<Self> {
        if !log1p.is_empty() && log1p.len() != self.mean.len() {
            return Err(Error::Shape {
                what: "normaliser log mask length",
                expected: self.mean.len(),
                found: log1p.len(),
            });
        }
        self.log1p = if log1p.iter().any(|&b| b) { log1p } else { Vec::new() };
        Ok(self)
    }

    /// Fit to `n` rows of `dim` features, taking the features marked in `log1p` through
    /// [`signed_log1p`] first.
    pub fn fit_log1p(x: &[f32], dim: usize, log1p: Vec<bool>) -> Result<Self> {
        let mut t = x.to_vec();
        let probe = ZScore {
            mean: alloc::vec![0.0; dim],
            std: alloc::vec![1.0; dim],
            log1p: log1p.clone(),
        };
        if !log1p.is_empty() && log1p.len() != dim {
            return Err(Error::Shape {
                what: "normaliser log mask length",
                expected: dim,
                found: log1p.len(),
            });
        }
        probe.transform_rows(&mut t);
        Self::fit(&t, dim)?.with_log1p(log1p)
    }

    /// Fit to `n` rows of `dim` features (population standard deviation).
    pub fn fit(x: &[f32], dim: usize) -> Result<Self> {
        let mut w = Welford::new(dim, Weighting::Cumulative);
        for row in x.chunks_exact(dim) {
            w.update(row);
        }
        if w.count() == 0 {
            return Err(Error::invalid("data", "no rows to fit a normaliser"));
        }
        let z = w.to_zscore();
        // A spread below 1e-30 is a constant feature (0), as `transform` treats it.
        let std = z.std.iter().map(|&s| if s < 1e-30 { 0.0 } else { s }).collect();
        ZScore::new(z.mean, std)
    }

    /// Number of features.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// Normalise one row in place. No allocation.
    #[inline]
    pub fn transform(&self, row: &mut [f32]) {
        for (i, ((v, &m), &s)) in row.iter_mut().zip(&self.mean).zip(&self.std).enumerate() {
            let s = if s > 0.0 { s } else { 1.0 };
            let x = if self.log1p.get(i) == Some(&true) {
                signed_log1p(*v as f64)
            } else {
                *v as f64
            };
            *v = ((x - m) / s) as f32;
        }
    }

    /// Normalise many rows in place.
    pub fn transform_rows(&self, x: &mut [f32]) {
        for row in x.chunks_exact_mut(self.dim()) {
            self.transform(row);
        }
    }
}

/// How [`Welford`] weighs old samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Weighting {
    /// Every sample counts equally (KML's default).
    Cumulative,
    /// Exponentially weighted: each new sample has weight `alpha` (KML used 0.1 in its
    /// large-memory runs), so the statistics follow a drifting workload.
    Exponential(f64),
}

/// Online mean and variance per feature, in `f64`.
#[derive(Debug, Clone, PartialEq)]
pub struct Welford {
    weighting: Weighting,
    n: u64,
    mean: Vec<f64>,
    /// Cumulative: sum of squared deviations (M2). Exponential: the variance itself.
    m2: Vec<f64>,
}

impl Welford {
    /// Empty statistics for `dim` features.
    pub fn new(dim: usize, weighting: Weighting) -> Self {
        Welford {
            weighting,
            n: 0,
            mean: alloc::vec![0.0; dim],
            m2: alloc::vec![0.0; dim],
        }
    }

    /// Start from a fixed normaliser's statistics, counted as `n` samples (KML seeds its online
    /// statistics from the training data).
    pub fn from_zscore(z: &ZScore, n: u64, weighting: Weighting) -> Self {
        let m2 = match weighting {
            Weighting::Cumulative => z.std.iter().map(|s| s * s * n as f64).collect(),
            Weighting::Exponential(_) => z.std.iter().map(|s| s * s).collect(),
        };
        Welford {
            weighting,
            n,
            mean: z.mean.clone(),
            m2,
        }
    }

    /// Samples seen.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Add one row. No allocation.
    pub fn update(&mut self, row: &[f32]) {
        self.n += 1;
        match self.weighting {
            Weighting::Cumulative => {
                let n = self.n as f64;
                for ((m, m2), &x) in self.mean.iter_mut().zip(&mut self.m2).zip(row) {
                    let x = x as f64;
                    let d = x - *m;
                    *m += d / n;
                    *m2 += d * (x - *m);
                }
            }
            Weighting::Exponential(alpha) => {
                for ((m, var), &x) in self.mean.iter_mut().zip(&mut self.m2).zip(row) {
                    let x = x as f64;
                    if self.n == 1 {
                        *m = x;
                        *var = 0.0;
                        continue;
                    }
                    // Finch (2009), incremental exponentially weighted mean and variance.
                    let d = x - *m;
                    let incr = alpha * d;
                    *m += incr;
                    *var = (1.0 - alpha) * (*var + d * incr);
                }
            }
        }
    }

    /// Current means.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// Current (population) variance of feature `i`.
    pub fn variance(&self, i: usize) -> f64 {
        match self.weighting {
            Weighting::Cumulative if self.n > 0 => self.m2[i] / self.n as f64,
            Weighting::Cumulative => 0.0,
            Weighting::Exponential(_) => self.m2[i],
        }
    }

    /// Snapshot as a fixed Z-score normaliser.
    pub fn to_zscore(&self) -> ZScore {
        let std = (0..self.mean.len()).map(|i| math::sqrt64(self.variance(i))).collect();
        ZScore {
            mean: self.mean.clone(),
            std,
            log1p: Vec::new(),
        }
    }

    /// Normalise `row` in place with the current statistics. No allocation.
    pub fn transform(&self, row: &mut [f32]) {
        for (i, v) in row.iter_mut().enumerate() {
            let s = math::sqrt64(self.variance(i));
            let s = if s > 0.0 { s } else { 1.0 };
            *v = ((*v as f64 - self.mean[i]) / s) as f32;
        }
    }
}
