//! The summary Heimdall's trace tools print (`shared/reference/traces/*.stats`), computed the
//! same way so the two can be compared line by line:
//! - sizes in KiB by integer division (`size // 1024`), totals in MiB likewise;
//! - duration in whole seconds (truncated), minutes rounded up, rates truncated;
//! - "binned per 100": consecutive chunks of 100 I/Os; a chunk's IOPS is its I/Os over its first
//!   to last arrival plus 1 ms, its throughput its KiB / 1024 over first to last arrival (chunks
//!   spanning no time are left out); averaged or taken at a percentile (linear interpolation),
//!   truncated. (Reverse-engineered from the reference `.stats` files: these are the
//!   definitions that reproduce every line of both.)

use crate::BlockIo;
use std::fmt::Write;

/// Size statistics of one class of I/O (KiB).
#[derive(Debug, Clone, PartialEq)]
pub struct SizeStats {
    /// Mean of `size // 1024`.
    pub mean_kb: f64,
    /// p50, p70, p90, p95, p100 of the sizes, KiB.
    pub percentiles_kb: [f64; 5],
}

/// A trace's summary.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceStats {
    /// I/Os.
    pub total: usize,
    /// Reads.
    pub reads: usize,
    /// Writes.
    pub writes: usize,
    /// Whole seconds from the first to the last arrival.
    pub duration_s: u64,
    /// Sum of `size // 1024` over all, read and write I/Os.
    pub kb: [u64; 3],
    /// Mean IOPS over chunks of 100 I/Os.
    pub binned_iops: f64,
    /// Mean, p75, p80, p90 throughput over chunks of 100 I/Os, MiB/s.
    pub binned_throughput: [f64; 4],
    /// All, read and write sizes.
    pub sizes: [SizeStats; 3],
}

/// Linear interpolation between ranks (numpy's default), as Heimdall's stats script computes
/// it: the `.stats` files only match with this rule, so it is not the nearest-rank
/// `iolearn_tail::metrics::percentile` the latency reports use.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

fn size_stats(sizes: impl Iterator<Item = u32>) -> SizeStats {
    let mut v: Vec<f64> = sizes.map(|s| s as f64).collect();
    v.sort_by(f64::total_cmp);
    let kb_int: u64 = v.iter().map(|&s| s as u64 / 1024).sum();
    let mean_kb = if v.is_empty() {
        0.0
    } else {
        kb_int as f64 / v.len() as f64
    };
    let p = [50.0, 70.0, 90.0, 95.0, 100.0].map(|q| (percentile(&v, q) / 1024.0).floor());
    SizeStats {
        mean_kb,
        percentiles_kb: p,
    }
}

impl TraceStats {
    /// Summarise `ios` (in arrival order).
    pub fn of(ios: &[BlockIo]) -> TraceStats {
        let reads = ios.iter().filter(|i| !i.write).count();
        let duration_ns = match (ios.first(), ios.last()) {
            (Some(a), Some(b)) => b.arrival_ns.saturating_sub(a.arrival_ns),
            _ => 0,
        };
        let kb = |f: &dyn Fn(&BlockIo) -> bool| ios.iter().filter(|i| f(i)).map(|i| i.size as u64 / 1024).sum();
        let (mut iops, mut thr) = (Vec::new(), Vec::new());
        for chunk in ios.chunks(100) {
            let span = (chunk[chunk.len() - 1].arrival_ns - chunk[0].arrival_ns) as f64 / 1e9;
            iops.push(chunk.len() as f64 / (span + 0.001));
            if span > 0.0 {
                let kib: u64 = chunk.iter().map(|i| i.size as u64 / 1024).sum();
                thr.push(kib as f64 / 1024.0 / span);
            }
        }
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let mean_thr = mean(&thr);
        thr.sort_by(f64::total_cmp);
        TraceStats {
            total: ios.len(),
            reads,
            writes: ios.len() - reads,
            duration_s: duration_ns / 1_000_000_000,
            kb: [kb(&|_| true), kb(&|i| !i.write), kb(&|i| i.write)],
            binned_iops: mean(&iops),
            binned_throughput: [
                mean_thr,
                percentile(&thr, 75.0),
                percentile(&thr, 80.0),
                percentile(&thr, 90.0),
            ],
            sizes: [
                size_stats(ios.iter().map(|i| i.size)),
                size_stats(ios.iter().filter(|i| !i.write).map(|i| i.size)),
                size_stats(ios.iter().filter(|i| i.write).map(|i| i.size)),
            ],
        }
    }

    /// Heimdall's text, line for line (`source` goes on the first line).
    pub fn render(&self, source: &str) -> String {
        let sep = "=================================================\n";
        let d = self.duration_s.max(1);
        let rate = |n: usize| (n as u64 / d) as f64;
        let read_pct = (100 * self.reads).checked_div(self.total).unwrap_or(0);
        let mut s = format!("Raw trace path  = {source}\n{sep}");
        let _ = writeln!(
            s,
            "Total IO    = {}  =  {:.1} k",
            self.total,
            self.total as f64 / 1000.0
        );
        let _ = writeln!(
            s,
            "Duration    = {:.1} s = {} mins",
            self.duration_s as f64,
            self.duration_s.div_ceil(60)
        );
        let _ = writeln!(s, "R:W ratio   = {read_pct}/{}", 100 - read_pct);
        let _ = writeln!(
            s,
            "#read io    = {}  =  {:.1} k",
            self.reads,
            self.reads as f64 / 1000.0
        );
        let _ = writeln!(
            s,
            "#write io   = {}  =  {:.1} k",
            self.writes,
            self.writes as f64 / 1000.0
        );
        let _ = writeln!(s, "IOPS (ALL IO)      = {:.1} IO/s", rate(self.total));
        let _ = writeln!(s, "IOPS (read IO)     = {:.1} IO/s", rate(self.reads));
        let _ = writeln!(s, "IOPS (write IO)    = {:.1} IO/s", rate(self.writes));
        let _ = writeln!(s, "Size (ALL IO)      = {} MB", self.kb[0] / 1024);
        let _ = writeln!(s, "Size (read IO)     = {} MB", self.kb[1] / 1024);
        let _ = writeln!(s, "Size (write IO)    = {} MB", self.kb[2] / 1024);
        s += sep;
        let _ = writeln!(
            s,
            "Average IOPS (binned per 100) = {:.1} IO/s",
            self.binned_iops.floor()
        );
        let [avg, p75, p80, p90] = self.binned_throughput.map(f64::floor);
        let _ = writeln!(s, "Average throughput (binned per 100) = {avg:.1} MB/s");
        let _ = writeln!(s, "Throughput P75 (binned per 100) = {p75:.1} MB/s");
        let _ = writeln!(s, "Throughput P80 (binned per 100) = {p80:.1} MB/s");
        let _ = writeln!(s, "Throughput P90 (binned per 100) = {p90:.1} MB/s");
        s += sep;
        for (label, st) in ["Raw", "Read", "Write"].iter().zip(&self.sizes) {
            let _ = writeln!(s, "{label} IO size AVERAGE = {:.2} KB", st.mean_kb);
            for (p, v) in [50, 70, 90, 95].iter().zip(st.percentiles_kb) {
                let _ = writeln!(s, "{label} IO size p{p} = {v:.1} KB");
            }
            let _ = writeln!(s, "{label} IO size p100 = {} KB", st.percentiles_kb[4] as u64);
            s += sep;
        }
        s
    }
}
