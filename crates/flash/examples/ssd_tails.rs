//! Read latency tails of a write-heavy workload under each GC design:
//! `cargo run --release -p iolearn-flash --example ssd_tails [preset] [iops] [ios] [mode|all]
//! [burst-iops]`. Steady: Poisson arrivals at `iops`, 70% writes. With `burst-iops`: write
//! bursts, 1 s at `burst-iops` (90% writes) then 4 s at `iops` (30% writes), repeated.
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
    let only = a
        .get(4)
        .filter(|m| *m != "all")
        .map(|m| GcMode::by_name(m).unwrap_or_else(|| panic!("mode: {m} ({}, all)", GcMode::NAMES)));
    let burst: Option<f64> = a.get(5).map(|s| s.parse().expect("burst-iops: a number"));
    match burst {
        None => println!("{} preset, {iops} IOPS, 70% writes, 16 KiB random, {n} I/Os", cfg.name),
        Some(b) => println!(
            "{} preset, bursts of 1 s at {b} IOPS (90% writes) every 5 s, {iops} IOPS (30% writes) between, 16 KiB \
             random, {n} I/Os",
            cfg.name
        ),
    }
    for mode in [
        GcMode::NoGc,
        GcMode::Base,
        GcMode::PlaneBlocking,
        GcMode::Preemptive,
        GcMode::Tolerant,
    ] {
        if only.is_some_and(|m| m != mode) {
            continue;
        }
        let mut ssd = Ssd::new(cfg.clone(), mode);
        ssd.precondition(1.0, 7);
        let mut rng = Rng::new(42);
        let pages = ssd.logical_pages();
        let mut t = 0u64;
        let mut lat = Vec::new();
        let t0 = Instant::now();
        for _ in 0..n {
            let (rate, writes) = match burst {
                Some(b) if t % 5_000_000_000 < 1_000_000_000 => (b, 0.9),
                Some(_) => (iops, 0.3),
                None => (iops, 0.7),
            };
            t += (-(1.0 - rng.next_f64()).ln() / rate * 1e9) as u64;
            let off = (rng.next_u64() % pages) * cfg.page_bytes;
            let write = rng.next_f64() < writes;
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
        eprintln!(
            "  GC hits {} rebuilt {} parity pages {} padded {} capacity {} pages",
            s.gc_hits,
            s.parity_rebuilds,
            s.parity_pages,
            s.padded_pages,
            ssd.logical_pages()
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
