//! Replay a block trace on replicated SSDs and record every I/O's latency with what the
//! device looked like when it arrived (`iolearn sim ssd`; the training data of the
//! tail-latency predictors).

use crate::replicas::{Cluster, Noise, Replica};
use crate::ssd::{GcMode, Ssd, SsdConfig};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One replayed I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoRecord {
    /// Arrival, ns.
    pub arrival_ns: u64,
    /// Offset, bytes.
    pub offset: u64,
    /// Size, bytes.
    pub size: u32,
    /// A write.
    pub write: bool,
    /// Replica that served it (writes: 0, they go to all).
    pub replica: u32,
    /// Latency, ns.
    pub latency_ns: u64,
    /// I/Os outstanding at that replica when it arrived.
    pub pending: u32,
    /// Until the target plane was free.
    pub plane_wait_ns: u64,
    /// Until the target channel was free.
    pub channel_wait_ns: u64,
    /// The target plane was collecting garbage.
    pub gc_active: bool,
    /// Pages in the write buffer.
    pub buffered_pages: u32,
}

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// The drive.
    pub ssd: SsdConfig,
    /// Its GC design.
    pub mode: GcMode,
    /// Replicas (reads go to replica `i mod replicas`, writes to all).
    pub replicas: usize,
    /// Network hop, ns (added to reads' latency).
    pub hop_ns: u64,
    /// Noise per replica (missing: quiet).
    pub noise: Vec<Noise>,
    /// Random overwrites before the replay, as a share of capacity (1.0: GC active at once).
    pub precondition: f64,
    /// Seed.
    pub seed: u64,
}

/// Replay `(arrival_ns, offset, size, write)` records (in arrival order).
pub fn replay(ios: impl IntoIterator<Item = (u64, u64, u32, bool)>, cfg: &ReplayConfig) -> Vec<IoRecord> {
    let mut r = Replayer::new(cfg);
    ios.into_iter().map(|io| r.push(io)).collect()
}

/// A replay fed one I/O at a time (a trace of any length, streamed): its state is the drives
/// and the I/Os in flight, not the trace.
pub struct Replayer {
    cluster: Cluster,
    hop_ns: u64,
    /// Per replica, completion times of the I/Os in flight.
    inflight: Vec<BinaryHeap<Reverse<u64>>>,
    last: u64,
    count: u64,
}

impl Replayer {
    /// Fresh (preconditioned as configured) drives.
    pub fn new(cfg: &ReplayConfig) -> Replayer {
        let replicas: Vec<Replica> = (0..cfg.replicas.max(1))
            .map(|r| {
                let mut ssd = Ssd::new(cfg.ssd.clone(), cfg.mode);
                ssd.precondition(cfg.precondition, cfg.seed ^ r as u64);
                let noise = cfg.noise.get(r).cloned().unwrap_or(Noise::Quiet);
                Replica::new(Box::new(ssd), noise, cfg.seed.wrapping_add(r as u64))
            })
            .collect();
        let n = replicas.len();
        Replayer {
            cluster: Cluster::new(replicas, cfg.hop_ns, cfg.seed),
            hop_ns: cfg.hop_ns,
            inflight: vec![BinaryHeap::new(); n],
            last: 0,
            count: 0,
        }
    }

    /// The next I/O (arrivals in order; one that goes back is taken at the last arrival).
    pub fn push(&mut self, io: (u64, u64, u32, bool)) -> IoRecord {
        self.push_with(io, true)
    }

    /// [`Replayer::push`], with the device state at arrival (`plane_wait_ns` ...
    /// `buffered_pages`) left at zero unless `state` (a summary of latencies needs none).
    pub fn push_with(&mut self, (arrival, offset, size, write): (u64, u64, u32, bool), state: bool) -> IoRecord {
        let n = self.inflight.len();
        // Devices take requests in time order; a trace that goes back is clamped.
        let now = arrival.max(self.last);
        self.last = now;
        let r = if write { 0 } else { (self.count % n as u64) as usize };
        self.count += 1;
        for h in &mut self.inflight {
            while h.peek().is_some_and(|Reverse(t)| *t <= now) {
                h.pop();
            }
        }
        let pending = self.inflight[r].len() as u32;
        let st = if state {
            self.cluster.replicas[r].storage.state(now, offset, size as u64)
        } else {
            crate::storage::DeviceState::default()
        };
        let done = if write {
            let d = self.cluster.write(now, offset, size as u64);
            for h in &mut self.inflight {
                h.push(Reverse(d));
            }
            d
        } else {
            let o = self.cluster.read(now, r, offset, size as u64);
            self.inflight[o.served_by].push(Reverse(o.done_ns));
            o.done_ns + self.hop_ns
        };
        IoRecord {
            arrival_ns: arrival,
            offset,
            size,
            write,
            replica: r as u32,
            latency_ns: done - now,
            pending,
            plane_wait_ns: st.plane_wait_ns,
            channel_wait_ns: st.channel_wait_ns,
            gc_active: st.gc_active,
            buffered_pages: st.buffered_pages,
        }
    }
}

/// The reads of a replay summarised as they come, in constant memory: count, mean, and
/// percentiles from a histogram of three significant digits (each within 0.1% of the exact
/// order statistic), and the share that arrived at a plane collecting garbage.
#[derive(Debug, Clone)]
pub struct ReadSummary {
    hist: hdrhistogram::Histogram<u64>,
    sum_ns: u128,
    gc: u64,
    /// Reads whose device state at arrival was recorded (the GC share's denominator).
    with_state: u64,
    ios: u64,
}

impl Default for ReadSummary {
    fn default() -> Self {
        ReadSummary {
            // 1 ns to 10^15 ns (11 days; longer latencies count as that), about 1 MB.
            hist: hdrhistogram::Histogram::new_with_bounds(1, 1_000_000_000_000_000, 3)
                .unwrap_or_else(|_| unreachable!("valid bounds and significant digits")),
            sum_ns: 0,
            gc: 0,
            with_state: 0,
            ios: 0,
        }
    }
}

impl ReadSummary {
    /// Count `r` (reads only; every I/O counts in [`ReadSummary::ios`]); `state`: its device
    /// state at arrival was recorded (else it does not count towards the GC share).
    pub fn add(&mut self, r: &IoRecord, state: bool) {
        self.ios += 1;
        if r.write {
            return;
        }
        self.hist.saturating_record(r.latency_ns.max(1));
        self.sum_ns += r.latency_ns as u128;
        if state {
            self.with_state += 1;
            self.gc += u64::from(r.gc_active);
        }
    }

    /// I/Os seen.
    pub fn ios(&self) -> u64 {
        self.ios
    }

    /// Reads seen.
    pub fn reads(&self) -> u64 {
        self.hist.len()
    }

    /// Mean read latency, ns (0 without reads).
    pub fn mean_ns(&self) -> f64 {
        self.sum_ns as f64 / self.reads().max(1) as f64
    }

    /// The read latency at quantile `q` (0 to 1), ns.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        self.hist.value_at_quantile(q)
    }

    /// Share of reads that arrived at a plane collecting garbage, of those whose state was
    /// recorded (None if none was).
    pub fn gc_share(&self) -> Option<f64> {
        (self.with_state > 0).then(|| self.gc as f64 / self.with_state as f64)
    }
}
