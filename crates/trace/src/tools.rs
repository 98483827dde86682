//! Trace tools: cut a time range or a count, find the busiest window, rerate.

use crate::BlockIo;

/// The I/Os arriving in `[from_ns, from_ns + len_ns)`, times made relative to `from_ns`.
pub fn cut_time(ios: &[BlockIo], from_ns: u64, len_ns: u64) -> Vec<BlockIo> {
    ios.iter()
        .filter(|io| io.arrival_ns >= from_ns && io.arrival_ns - from_ns < len_ns)
        .map(|io| BlockIo {
            arrival_ns: io.arrival_ns - from_ns,
            ..*io
        })
        .collect()
}

/// `count` I/Os from index `skip`, times made relative to the first kept.
pub fn cut_count(ios: &[BlockIo], skip: usize, count: usize) -> Vec<BlockIo> {
    let part = &ios[skip.min(ios.len())..(skip.saturating_add(count)).min(ios.len())];
    let t0 = part.first().map_or(0, |io| io.arrival_ns);
    part.iter()
        .map(|io| BlockIo {
            arrival_ns: io.arrival_ns.saturating_sub(t0),
            ..*io
        })
        .collect()
}

/// What "busiest" counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// I/Os.
    Ios,
    /// Bytes.
    Bytes,
}

/// The start of the `window_ns` window (starting at an arrival) with the most I/Os or bytes,
/// and that amount. Two pointers over the arrivals: O(n). Needs arrival order.
pub fn busiest(ios: &[BlockIo], window_ns: u64, by: Busy) -> Option<(u64, u64)> {
    let weight = |io: &BlockIo| match by {
        Busy::Ios => 1,
        Busy::Bytes => io.size as u64,
    };
    let (mut best, mut j, mut sum) = (None::<(u64, u64)>, 0usize, 0u64);
    for i in 0..ios.len() {
        while j < ios.len() && ios[j].arrival_ns - ios[i].arrival_ns < window_ns {
            sum += weight(&ios[j]);
            j += 1;
        }
        if best.is_none_or(|b| sum > b.1) {
            best = Some((ios[i].arrival_ns, sum));
        }
        sum -= weight(&ios[i]);
    }
    best
}

/// Scale the intensity by `factor` (2.0: arrivals twice as dense), keeping the order.
///
/// Errors when `factor` is not a positive finite number or an arrival would not fit in
/// nanoseconds after the change (a float cast would silently saturate).
pub fn rerate(ios: &[BlockIo], factor: f64) -> Result<Vec<BlockIo>, String> {
    if !(factor.is_finite() && factor > 0.0) {
        return Err(format!("rate factor must be a positive number, got {factor}"));
    }
    ios.iter()
        .map(|io| {
            let t = (io.arrival_ns as f64 / factor).round();
            if t >= u64::MAX as f64 {
                return Err(format!(
                    "arrival {} ns divided by {factor} does not fit in 64-bit nanoseconds",
                    io.arrival_ns
                ));
            }
            Ok(BlockIo {
                arrival_ns: t as u64,
                ..*io
            })
        })
        .collect()
}

/// Whether arrivals never go back in time.
pub fn is_ordered(ios: &[BlockIo]) -> bool {
    ios.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns)
}
