//! Read latency tails of a write-heavy workload under each GC design:
//! `cargo run --release -p iolearn-flash --example ssd_tails [preset] [iops] [ios]`.
use iolearn_flash::ssd::{GcMode, Ssd, SsdConfig};
use iolearn_ml::Rng;
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let cfg = a
        .get(1)
        .and_then(|s| SsdConfig::by_name(s))
        .unwrap_or_else(SsdConfig::consumer);
    let iops: f64 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(4000.0);
    let n: usize = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    println!("{} preset, {iops} IOPS, 70% writes, 16 KiB random, {n} I/Os", cfg.name);
    for mode in [
        GcMode::NoGc,
        GcMode::Base,
        GcMode::PlaneBlocking,
        GcMode::Preemptive,
        GcMode::Tolerant,
    ] {
        let mut ssd = Ssd::new(cfg.clone(), mode);
        ssd.precondition(1.0, 7);
        let mut rng = Rng::new(42);
        let pages = cfg.logical_pages();
        let mut t = 0u64;
        let mut lat = Vec::new();
        let t0 = Instant::now();
        for _ in 0..n {
            t += (-(1.0 - rng.next_f64()).ln() / iops * 1e9) as u64;
            let off = (rng.next_u64() % pages) * cfg.page_bytes;
            let write = rng.next_f64() < 0.7;
            let done = ssd.submit(t, off, cfg.page_bytes, write);
            if !write {
                lat.push(done - t);
            }
        }
        let wall = t0.elapsed().as_secs_f64();
        eprintln!(
            "  simulated {:.1} s, max plane backlog {:.2} s, channel backlog {:.2} s, moved/gc {:.1}",
            t as f64 / 1e9,
            backlog(&ssd, t),
            ssd.white_box(t)
                .channel_next_free_ns
                .iter()
                .map(|&f| f.saturating_sub(t))
                .max()
                .unwrap() as f64
                / 1e9,
            ssd.stats().gc_pages_moved as f64 / ssd.stats().gcs.max(1) as f64
        );
        lat.sort_unstable();
        let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize] as f64 / 1e3;
        let s = ssd.stats();
        println!(
            "{:<14} p50 {:>8.0} us  p99 {:>8.0}  p99.9 {:>8.0}  p99.99 {:>8.0}  GC-blocked reads {:.2}%  gcs {} (forced {})  WA {:.2}  {:.2} M I/O/s",
            format!("{mode:?}"),
            q(0.5),
            q(0.99),
            q(0.999),
            q(0.9999),
            100.0 * s.gc_blocked_reads as f64 / s.reads.max(1) as f64,
            s.gcs,
            s.gc_forced,
            s.pages_programmed as f64 / (s.writes.max(1)) as f64,
            n as f64 / wall / 1e6
        );
    }
}
// debug helper
#[allow(dead_code)]
fn backlog(ssd: &Ssd, t: u64) -> f64 {
    let w = ssd.white_box(t);
    w.plane_next_free_ns
        .iter()
        .map(|&f| f.saturating_sub(t))
        .max()
        .unwrap_or(0) as f64
        / 1e9
}
