//! Evaluation helpers: k-fold cross-validation, confusion matrices and permutation feature
//! importance (the methods of KML section 4.1, `shared/spec/kml.md` section 3).

use crate::rng::Rng;
use crate::{Error, Result};
use alloc::vec::Vec;

/// Counts of (true class, predicted class).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfusionMatrix {
    k: usize,
    counts: Vec<u64>,
}

impl ConfusionMatrix {
    /// An empty `k x k` matrix.
    pub fn new(k: usize) -> Self {
        ConfusionMatrix {
            k,
            counts: alloc::vec![0; k * k],
        }
    }

    /// From label and prediction lists; classes beyond the matrix grow it.
    pub fn from_labels(truth: &[usize], pred: &[usize]) -> Self {
        let k = truth.iter().chain(pred).max().map_or(0, |m| m + 1);
        let mut m = ConfusionMatrix::new(k);
        for (&t, &p) in truth.iter().zip(pred) {
            m.add(t, p);
        }
        m
    }

    /// Count one prediction.
    pub fn add(&mut self, truth: usize, pred: usize) {
        self.counts[truth * self.k + pred] += 1;
    }

    /// Number of classes.
    pub fn n_classes(&self) -> usize {
        self.k
    }

    /// Count of rows of class `truth` predicted as `pred`.
    pub fn get(&self, truth: usize, pred: usize) -> u64 {
        self.counts[truth * self.k + pred]
    }

    /// Total rows.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Fraction on the diagonal.
    pub fn accuracy(&self) -> f64 {
        let diag: u64 = (0..self.k).map(|i| self.get(i, i)).sum();
        if self.total() == 0 {
            0.0
        } else {
            diag as f64 / self.total() as f64
        }
    }

    /// Recall of class `c` (fraction of its rows predicted as `c`).
    pub fn recall(&self, c: usize) -> f64 {
        let row: u64 = (0..self.k).map(|p| self.get(c, p)).sum();
        if row == 0 {
            0.0
        } else {
            self.get(c, c) as f64 / row as f64
        }
    }
}

/// Split `0..n` into `k` shuffled folds of near-equal size (the test indices of each fold).
pub fn kfold(n: usize, k: usize, seed: u64) -> Result<Vec<Vec<usize>>> {
    if k < 2 || k > n {
        return Err(Error::invalid(
            "folds",
            alloc::format!("need 2 <= k <= rows, got k={k}, rows={n}"),
        ));
    }
    let mut idx: Vec<usize> = (0..n).collect();
    Rng::new(seed).shuffle(&mut idx);
    let mut folds = Vec::with_capacity(k);
    let mut start = 0;
    for f in 0..k {
        let size = n / k + usize::from(f < n % k);
        folds.push(idx[start..start + size].to_vec());
        start += size;
    }
    Ok(folds)
}

/// Result of [`cross_validate`].
#[derive(Debug, Clone, PartialEq)]
pub struct CvReport {
    /// Accuracy of each fold.
    pub fold_accuracy: Vec<f64>,
    /// Confusion matrix over all folds' test rows.
    pub confusion: ConfusionMatrix,
}

impl CvReport {
    /// Mean of the fold accuracies.
    pub fn mean_accuracy(&self) -> f64 {
        self.fold_accuracy.iter().sum::<f64>() / self.fold_accuracy.len() as f64
    }
}

fn gather(x: &[f32], d: usize, rows: &[usize]) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows.len() * d);
    for &r in rows {
        out.extend_from_slice(&x[r * d..(r + 1) * d]);
    }
    out
}

/// k-fold cross-validation of a classifier. `fit_predict(train_x, train_y, test_x)` trains a
/// fresh model on the training rows and returns one class per test row.
pub fn cross_validate<F>(x: &[f32], y: &[f32], d: usize, k: usize, seed: u64, mut fit_predict: F) -> Result<CvReport>
where
    F: FnMut(&[f32], &[f32], &[f32]) -> Result<Vec<usize>>,
{
    if d == 0 || x.len() != y.len() * d {
        return Err(Error::Shape {
            what: "cross-validation input values",
            expected: y.len() * d,
            found: x.len(),
        });
    }
    let folds = kfold(y.len(), k, seed)?;
    let classes = y.iter().fold(0usize, |m, &v| m.max(v as usize + 1));
    let mut confusion = ConfusionMatrix::new(classes);
    let mut fold_accuracy = Vec::with_capacity(k);
    for (f, test) in folds.iter().enumerate() {
        let train: Vec<usize> = folds
            .iter()
            .enumerate()
            .filter(|(g, _)| *g != f)
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        let (tx, ty) = (gather(x, d, &train), train.iter().map(|&r| y[r]).collect::<Vec<_>>());
        let pred = fit_predict(&tx, &ty, &gather(x, d, test))?;
        if pred.len() != test.len() {
            return Err(Error::Shape {
                what: "predictions",
                expected: test.len(),
                found: pred.len(),
            });
        }
        let mut m = ConfusionMatrix::new(classes.max(pred.iter().max().map_or(0, |p| p + 1)));
        for (&r, &p) in test.iter().zip(&pred) {
            m.add(y[r] as usize, p);
            if p < classes {
                confusion.add(y[r] as usize, p);
            }
        }
        fold_accuracy.push(m.accuracy());
    }
    Ok(CvReport {
        fold_accuracy,
        confusion,
    })
}

/// Permutation importance: the accuracy of a fitted model when one feature's column is
/// shuffled (mean over `repeats` shuffles), per feature. The larger the drop from
/// `baseline`, the more the model relies on the feature.
#[derive(Debug, Clone, PartialEq)]
pub struct Importance {
    /// Accuracy with no column shuffled.
    pub baseline: f64,
    /// Accuracy with feature `i` shuffled.
    pub shuffled_accuracy: Vec<f64>,
}

/// Compute [`Importance`]; `predict(x)` returns one class per row of `x`.
pub fn permutation_importance<P>(
    x: &[f32],
    y: &[f32],
    d: usize,
    repeats: usize,
    seed: u64,
    mut predict: P,
) -> Result<Importance>
where
    P: FnMut(&[f32]) -> Vec<usize>,
{
    if d == 0 || x.len() != y.len() * d {
        return Err(Error::Shape {
            what: "importance input values",
            expected: y.len() * d,
            found: x.len(),
        });
    }
    let acc =
        |pred: &[usize]| pred.iter().zip(y).filter(|(p, t)| **p == **t as usize).count() as f64 / y.len().max(1) as f64;
    let baseline = acc(&predict(x));
    let mut rng = Rng::new(seed);
    let mut work = x.to_vec();
    let mut col: Vec<f32> = Vec::with_capacity(y.len());
    let mut shuffled_accuracy = Vec::with_capacity(d);
    for f in 0..d {
        let mut total = 0.0;
        for _ in 0..repeats.max(1) {
            col.clear();
            col.extend(x.chunks_exact(d).map(|r| r[f]));
            rng.shuffle(&mut col);
            for (row, &v) in work.chunks_exact_mut(d).zip(&col) {
                row[f] = v;
            }
            total += acc(&predict(&work));
        }
        for (row, orig) in work.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
            row[f] = orig[f];
        }
        shuffled_accuracy.push(total / repeats.max(1) as f64);
    }
    Ok(Importance {
        baseline,
        shuffled_accuracy,
    })
}
