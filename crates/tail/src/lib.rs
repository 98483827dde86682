//! `iolearn-tail`: the tail-latency harness of issue 6. A block trace is replayed on N
//! simulated SSD replicas; every read asks an admission policy (`iolearn-policy`) at each
//! replica it tries, fails over on EBUSY at a cost, and the client may hedge, clone or time
//! out. The result is every read's latency, every decision with its counterfactual (what the
//! refused read would have taken), and the training samples the learned policies need.
//!
//! The replicas are LinnOS's setup: each replays its own copy of the trace (the same load,
//! shifted in time so their busy periods differ), and a read refused by its replica moves to
//! the others. Writes stay on their replica (they are not latency critical and not predicted).
//!
//! Policy and simulator stay apart: the policy sees an [`iolearn_policy::admission::IoView`],
//! built here from what a block layer would know.
//!
//! [`mix`] is MittCFQ's own evaluation: disks behind a multi-tenant I/O scheduler with other
//! tenants' I/O, and a client choosing among Base, Hedged, Clone, timeouts and MittOS.
#![deny(missing_docs)]

pub mod metrics;
pub mod mix;
pub mod replay_file;
pub mod run;
pub mod spec;

pub use metrics::{percentile, Summary};
pub use run::{Decision, DriveConfig, ReadResult, RunResult, Sample, World, WorldConfig};
pub use spec::{AdmissionSpec, Client, DeviceTiming, HedgeDelay, PolicySpec};

/// One request of a replicated replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Arrival at its replica, ns.
    pub arrival_ns: u64,
    /// The replica whose stream it belongs to (a read tries it first).
    pub primary: u32,
    /// Offset, bytes.
    pub offset: u64,
    /// Size, bytes.
    pub size: u32,
    /// A write.
    pub write: bool,
    /// The read's own deadline (SLO) at each replica it tries, ns; `None`: the policy's own
    /// threshold (MittOS's default, the workload's p95).
    pub deadline_ns: Option<u64>,
}

/// The rate factors [`replicate`] accepts: beyond them every I/O lands in one nanosecond, or
/// the trace stretches past what nanoseconds hold.
pub const RATE_RANGE: std::ops::RangeInclusive<f64> = 1e-6..=1e6;

/// The largest I/O [`replicate`] accepts, bytes (Linux splits requests far below this; a
/// larger one would take the simulated drive page by page for seconds of real time).
pub const MAX_REQUEST_BYTES: u32 = 64 << 20;

/// The largest offset [`replicate`] accepts: offsets fold onto each drive's capacity, and an
/// end offset must still fit a `u64`.
pub const MAX_OFFSET: u64 = 1 << 63;

/// Check every I/O of a trace a simulated drive will serve: 1 to [`MAX_REQUEST_BYTES`] bytes
/// (a drive model serves an I/O page by page: a 4 GiB one would take seconds of real time),
/// offsets at most [`MAX_OFFSET`]. The error names the I/O (0-based) and the field.
pub fn check_requests(ios: &[(u64, u64, u32, bool)]) -> Result<(), String> {
    for (i, &(_, offset, size, _)) in ios.iter().enumerate() {
        if size == 0 || size > MAX_REQUEST_BYTES {
            return Err(format!(
                "size of I/O {i}: {size} bytes (1 to {MAX_REQUEST_BYTES}: no block layer sends larger requests)"
            ));
        }
        if offset > MAX_OFFSET {
            return Err(format!("offset of I/O {i}: {offset} (at most 2^63 bytes)"));
        }
    }
    Ok(())
}

/// Build the replicated replay of one trace: replica `k` of `replicas` replays the trace with
/// its arrivals (times `rate`: 2.0 is twice as fast) shifted by `k / replicas` of the trace's
/// span, wrapping around, so the replicas carry the same load at different moments. `ios` are
/// `(arrival_ns, offset, size, write)` in any order. Returned in arrival order.
///
/// Errors when `rate` is outside [`RATE_RANGE`], an I/O is empty or larger than
/// [`MAX_REQUEST_BYTES`], an offset is past [`MAX_OFFSET`], or the rerated trace would span more than
/// 2^62 ns (146 years), where the shifted times could overflow.
pub fn replicate(ios: &[(u64, u64, u32, bool)], replicas: usize, rate: f64) -> Result<Vec<Request>, String> {
    replicate_with_deadlines(ios, &[], replicas, rate)
}

/// [`replicate`], each I/O `i` carrying `deadlines_ns[i]` (its SLO, MittOS's `read(..., slo)`;
/// `None` or a missing entry: no deadline of its own) to every copy.
pub fn replicate_with_deadlines(
    ios: &[(u64, u64, u32, bool)],
    deadlines_ns: &[Option<u64>],
    replicas: usize,
    rate: f64,
) -> Result<Vec<Request>, String> {
    let replicas = replicas.max(1);
    if !RATE_RANGE.contains(&rate) {
        return Err(format!(
            "rate must be from {:e} to {:e}, got {rate:?}",
            RATE_RANGE.start(),
            RATE_RANGE.end()
        ));
    }
    check_requests(ios)?;
    if ios.is_empty() {
        return Ok(Vec::new());
    }
    let t0 = ios.iter().map(|i| i.0).min().unwrap_or(0);
    let t1 = ios.iter().map(|i| i.0).max().unwrap_or(0);
    let span_f = (t1 - t0) as f64 / rate;
    if span_f >= (1u64 << 62) as f64 {
        return Err(format!(
            "the trace spans {:.3e} s at rate {rate}: too long to replay",
            span_f / 1e9
        ));
    }
    // In range now: the casts below cannot saturate, and shifts stay below 2^63.
    let span = (span_f as u64).max(1) + 1;
    let mut out = Vec::with_capacity(ios.len() * replicas);
    for k in 0..replicas {
        let shift = (span as u128 * k as u128 / replicas as u128) as u64;
        for (i, &(t, offset, size, write)) in ios.iter().enumerate() {
            let at = ((t - t0) as f64 / rate) as u64;
            out.push(Request {
                arrival_ns: (at + shift) % span,
                primary: k as u32,
                offset,
                size,
                write,
                deadline_ns: deadlines_ns.get(i).copied().flatten(),
            });
        }
    }
    out.sort_by_key(|r| (r.arrival_ns, r.primary));
    Ok(out)
}
