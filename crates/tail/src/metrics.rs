//! Latency summaries: the percentiles the papers report.

/// The `p`-th percentile (0..=100) of sorted values, nearest rank on `(n - 1) p / 100`; NaN
/// when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p.clamp(0.0, 100.0) / 100.0).round() as usize;
    sorted[i]
}

/// Mean and tail of a latency sample (same unit as the input).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Values.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th.
    pub p95: f64,
    /// 99th.
    pub p99: f64,
    /// 99.9th.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl Summary {
    /// Summarise `values` (any order).
    pub fn of(values: &[f64]) -> Summary {
        let mut s: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        Summary {
            n,
            mean: if n == 0 {
                f64::NAN
            } else {
                s.iter().sum::<f64>() / n as f64
            },
            p50: percentile(&s, 50.0),
            p90: percentile(&s, 90.0),
            p95: percentile(&s, 95.0),
            p99: percentile(&s, 99.0),
            p999: percentile(&s, 99.9),
            max: s.last().copied().unwrap_or(f64::NAN),
        }
    }
}
