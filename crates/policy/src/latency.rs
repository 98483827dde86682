//! Per-I/O latency prediction inputs and decisions (issue 6): MittOS/ML-MittOS's 9 features,
//! LinnOS's 31 digits, LinnOS's inflection-point labelling, and ML-MittOS's threshold choice
//! (`shared/spec/tail-latency.md` section 3, `shared/spec/ml-mittos.md` sections 2-3).

use iolearn_ml::Rng;
use std::collections::VecDeque;

/// Completed I/Os a device remembers for the features (LinnOS and ML-MittOS use 4).
pub const HISTORY: usize = 4;

/// A device's recent past, as the predictors see it when an I/O arrives.
#[derive(Debug, Clone, Default)]
pub struct LatencyHistory {
    /// (latency us, I/Os pending when it arrived) of the most recent completions, newest first.
    recent: VecDeque<(u32, u32)>,
}

impl LatencyHistory {
    /// Record a completion.
    pub fn complete(&mut self, latency_us: u32, pending_at_arrival: u32) {
        self.recent.push_front((latency_us, pending_at_arrival));
        self.recent.truncate(HISTORY);
    }

    /// The remembered completions, newest first: (latency us, pending at arrival).
    pub fn recent(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.recent.iter().copied()
    }

    /// ML-MittOS's 9 inputs for an I/O arriving with `pending` I/Os (its own pages included):
    /// `[pending, lat_1, pending_1, ..., lat_4, pending_4]`, newest first, zeros where the past
    /// is shorter.
    pub fn mittos_features(&self, pending: u32) -> [f32; 9] {
        let mut f = [0f32; 9];
        f[0] = pending as f32;
        for (i, &(lat, pend)) in self.recent.iter().enumerate() {
            f[1 + 2 * i] = lat as f32;
            f[2 + 2 * i] = pend as f32;
        }
        f
    }

    /// LinnOS's 31 decimal digits: pending 4 KiB pages at arrival, new I/O included (3
    /// digits); the latencies in us of the 4 most recent completions (4 digits each, capped at
    /// 9999); the pending count when each of those arrived (3 digits each). Each digit is one
    /// input, most significant first.
    pub fn linnos_features(&self, pending_pages: u32) -> [f32; 31] {
        let mut f = [0f32; 31];
        let mut put = |at: usize, value: u32, digits: usize| {
            let cap = [0, 9, 99, 999, 9999][digits];
            let mut v = value.min(cap);
            // Least significant digit last.
            for d in (0..digits).rev() {
                f[at + d] = (v % 10) as f32;
                v /= 10;
            }
        };
        put(0, pending_pages, 3);
        for (i, &(lat, _)) in self.recent.iter().enumerate() {
            put(3 + 4 * i, lat, 4);
        }
        for (i, &(_, pend)) in self.recent.iter().enumerate() {
            put(19 + 3 * i, pend, 3);
        }
        f
    }
}

/// ML-MittOS's expected latency `mu(T)` of a threshold on a regressor's predictions, from
/// training pairs `(predicted, actual)`: `p` = share predicted above `T` (EBUSY), `tn` = mean
/// actual latency of the rest, `t` = mean actual latency; closed form of
/// `iolearn_flash::replicas::expected_latency` (`ml-mittos.md` section 3).
pub fn expected_latency_at(pairs: &[(f64, f64)], threshold: f64, replicas: u32, failover: f64) -> f64 {
    let n = pairs.len().max(1) as f64;
    let t = pairs.iter().map(|p| p.1).sum::<f64>() / n;
    let admitted: Vec<f64> = pairs.iter().filter(|p| p.0 <= threshold).map(|p| p.1).collect();
    let p = 1.0 - admitted.len() as f64 / n;
    let tn = if admitted.is_empty() {
        t
    } else {
        admitted.iter().sum::<f64>() / admitted.len() as f64
    };
    mu(replicas, failover, p, tn, t)
}

fn mu(r: u32, f: f64, p: f64, tn: f64, t: f64) -> f64 {
    // mu(1) = t; mu(r) = (1 - p) tn + p (mu(r - 1) + f)
    (1..r).fold(t, |m, _| (1.0 - p) * tn + p * (m + f))
}

/// The threshold minimising [`expected_latency_at`]: exact, by scanning every predicted value
/// (mu(T) is a step function that changes only there). Returns (threshold, mu).
pub fn best_threshold(pairs: &[(f64, f64)], replicas: u32, failover: f64) -> (f64, f64) {
    let mut sorted: Vec<(f64, f64)> = pairs.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = sorted.len();
    let total: f64 = sorted.iter().map(|p| p.1).sum();
    let t = total / n.max(1) as f64;
    // Prefix sums: admitting the k smallest predictions.
    let (mut best, mut sum) = ((f64::INFINITY, f64::INFINITY), 0.0);
    for k in 0..=n {
        if k > 0 {
            sum += sorted[k - 1].1;
            if k < n && sorted[k].0 == sorted[k - 1].0 {
                continue; // a threshold admits all equal predictions or none
            }
        }
        let p = 1.0 - k as f64 / n.max(1) as f64;
        let tn = if k == 0 { t } else { sum / k as f64 };
        let m = mu(replicas, failover, p, tn, t);
        let thr = if k == 0 {
            sorted.first().map_or(0.0, |p| p.0) - 1.0
        } else {
            sorted[k - 1].0
        };
        if m < best.1 {
            best = (thr, m);
        }
    }
    best
}

/// The same minimisation as SciPy's `minimize_scalar(bounded)`: golden-section search over
/// `[lo, hi]` (the training latencies' range). Fast, but mu(T) is a step function, so it can
/// stop on a local step; [`best_threshold`] is the check.
pub fn golden_threshold(pairs: &[(f64, f64)], replicas: u32, failover: f64, lo: f64, hi: f64) -> (f64, f64) {
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let f = |x: f64| expected_latency_at(pairs, x, replicas, failover);
    let (mut a, mut b) = (lo, hi);
    let (mut c, mut d) = (b - g * (b - a), a + g * (b - a));
    let (mut fc, mut fd) = (f(c), f(d));
    for _ in 0..100 {
        if (b - a).abs() <= 1e-6 * (1.0 + a.abs()) {
            break;
        }
        if fc < fd {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = f(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = f(d);
        }
    }
    let x = (a + b) / 2.0;
    (x, f(x))
}

/// LinnOS's inflection-point labelling of one device's latencies.
///
/// Start where the latency CDF bends to 45 degrees (on the CDF drawn on a square: percentile
/// rank against latency scaled to the range, from the median up); then for candidate points within +-10
/// percentiles in 0.1 steps, simulate `trials` I/Os drawing latencies from the sample: an I/O
/// slower than the candidate's latency is revoked and tried again on another device (a fresh
/// draw) after `failover_us`, at most `replicas - 1` times; the score is the area between the
/// original and the simulated latency CDFs (the "boost"). Returns (best percentile, its
/// latency). I/Os above it are labelled slow.
pub fn inflection_point(latencies_us: &[f64], replicas: u32, failover_us: f64, trials: usize, seed: u64) -> (f64, f64) {
    inflection_point_per_device(latencies_us, latencies_us, replicas, failover_us, trials, seed)
}

/// [`inflection_point`] for one device of several, as LinnOS labels each device: the first
/// try draws from the device's own latencies, a failed-over try from `others` (the other
/// devices' latencies), since a revoked I/O goes to another device. `others` empty: the
/// device's own.
pub fn inflection_point_per_device(
    latencies_us: &[f64],
    others_us: &[f64],
    replicas: u32,
    failover_us: f64,
    trials: usize,
    seed: u64,
) -> (f64, f64) {
    let mut s: Vec<f64> = latencies_us.iter().copied().filter(|v| v.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    let o: Vec<f64> = others_us.iter().copied().filter(|v| v.is_finite()).collect();
    let other = if o.is_empty() { &s[..] } else { &o[..] };
    let n = s.len();
    if n < 2 {
        return (100.0, s.first().copied().unwrap_or(0.0));
    }
    let at = |pct: f64| s[(((n - 1) as f64) * pct / 100.0).round() as usize];
    // The knee: from the median up, the first percentile where the CDF (drawn on a unit
    // square, percentiles against latency over its range) flattens to 45 degrees; 1-percentile
    // steps so the lower tail's noise does not count.
    let span = (s[n - 1] - s[0]).max(1e-12);
    let mut start = 99.0;
    for p0 in 50..99 {
        let dx = (at(p0 as f64 + 1.0) - at(p0 as f64)) / span;
        if dx > 0.0 && 0.01 / dx <= 1.0 {
            start = p0 as f64;
            break;
        }
    }
    let mut rng = Rng::new(seed);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let mut best = (start, at(start), f64::NEG_INFINITY);
    let mut cand = (start - 10.0).max(0.1);
    while cand <= (start + 10.0).min(100.0) + 1e-9 {
        let thr = at(cand);
        let mut sim = Vec::with_capacity(trials);
        for _ in 0..trials {
            let mut total = 0.0;
            let mut tries = 1;
            loop {
                let l = if tries == 1 {
                    s[rng.below(n)]
                } else {
                    other[rng.below(other.len())]
                };
                if l <= thr || tries >= replicas {
                    total += l;
                    break;
                }
                total += failover_us;
                tries += 1;
            }
            sim.push(total);
        }
        sim.sort_by(f64::total_cmp);
        // Area between the CDFs = difference of the means (both sampled at the same ranks).
        let orig: Vec<f64> = (0..trials).map(|i| s[i * n / trials]).collect();
        let boost = mean(&orig) - mean(&sim);
        if boost > best.2 {
            best = (cand, thr, boost);
        }
        cand += 0.1;
    }
    (best.0, best.1)
}

/// ML-MittOS's list-based failover simulator (`ml-mittos.md` section 4): the client sends
/// request `i` to a server; if it is predicted EBUSY (`ebusy[i]`) and replicas are left, the
/// client pays `failover` and the request lands on another server, where it behaves like a
/// random request of the list (its latency and prediction drawn together); the last replica
/// always serves. Returns each request's end-to-end latency (the paper's example: EBUSY, 30 us,
/// then a 200 us read elsewhere: 230 us).
pub fn simulate_list(latency: &[f64], ebusy: &[bool], replicas: u32, failover: f64, seed: u64) -> Vec<f64> {
    let n = latency.len().min(ebusy.len());
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| {
            let (mut at, mut total, mut tries) = (i, 0.0, 1);
            while ebusy[at] && tries < replicas {
                total += failover;
                tries += 1;
                at = rng.below(n);
            }
            total + latency[at]
        })
        .collect()
}
