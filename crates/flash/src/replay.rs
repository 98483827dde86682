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
    let replicas: Vec<Replica> = (0..cfg.replicas.max(1))
        .map(|r| {
            let mut ssd = Ssd::new(cfg.ssd.clone(), cfg.mode);
            ssd.precondition(cfg.precondition, cfg.seed ^ r as u64);
            let noise = cfg.noise.get(r).cloned().unwrap_or(Noise::Quiet);
            Replica::new(Box::new(ssd), noise, cfg.seed.wrapping_add(r as u64))
        })
        .collect();
    let mut cluster = Cluster::new(replicas, cfg.hop_ns, cfg.seed);
    let n = cluster.replicas.len();
    let mut inflight: Vec<BinaryHeap<Reverse<u64>>> = vec![BinaryHeap::new(); n];
    let mut out = Vec::new();
    let mut last = 0u64;
    for (i, (arrival, offset, size, write)) in ios.into_iter().enumerate() {
        // Devices take requests in time order; a trace that goes back is clamped.
        let now = arrival.max(last);
        last = now;
        let r = if write { 0 } else { i % n };
        for h in &mut inflight {
            while h.peek().is_some_and(|Reverse(t)| *t <= now) {
                h.pop();
            }
        }
        let pending = inflight[r].len() as u32;
        let st = cluster.replicas[r].storage.state(now, offset, size as u64);
        let done = if write {
            let d = cluster.write(now, offset, size as u64);
            for h in &mut inflight {
                h.push(Reverse(d));
            }
            d
        } else {
            let o = cluster.read(now, r, offset, size as u64);
            inflight[o.served_by].push(Reverse(o.done_ns));
            o.done_ns + cfg.hop_ns
        };
        out.push(IoRecord {
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
        });
    }
    out
}
