//! The flash SSD's speed: simulated I/Os per second of wall time on one core, per GC design.
//! `make bench` runs it; results go to docs/benchmarks.md.
//!
//! Method: criterion, with `Throughput::Elements`, so the `thrpt:` line is the speed (I/Os per
//! second; the middle figure is the estimate). Each iteration is one whole run, so samples are
//! few (10, flat sampling) and cloning the preconditioned drive is not timed (`iter_custom`).
//!
//! Run: `cargo bench -p iolearn-flash --bench speed` (criterion's options after `--`).
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use iolearn_flash::ssd::{GcMode, Ssd, SsdConfig};
use iolearn_ml::Rng;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .without_plots()
        .configure_from_args();
    ssd_speed(&mut c);
    c.final_summary();
}

/// The flash SSD (issue 5): simulated I/Os per second of wall time, each GC design, a
/// write-heavy random workload (70% writes, 4 KiB, 4,000 IOPS) on a preconditioned drive
/// (preconditioning, done once, and the per-run copy of the drive are not timed).
fn ssd_speed(c: &mut Criterion) {
    // I/Os per run: 250,000, down from 1,000,000 before criterion, so that 10 runs fit in the
    // measurement time (one run takes 0.06-0.13 s on the reference machine). The drive is in
    // steady state from the first I/O (preconditioned), so the rate does not depend on it.
    let n = 250_000u64;
    let mut g = c.benchmark_group("sim_ssd_ios");
    g.sampling_mode(SamplingMode::Flat);
    g.throughput(Throughput::Elements(n));
    for cfg in [SsdConfig::consumer(), SsdConfig::enterprise()] {
        for mode in [GcMode::Base, GcMode::Tolerant] {
            let mut drive = Ssd::new(cfg.clone(), mode);
            drive.precondition(1.0, 7);
            let pages = drive.logical_pages();
            g.bench_function(BenchmarkId::new(cfg.name.clone(), format!("{mode:?}")), |b| {
                b.iter_custom(|iters| {
                    let mut wall = Duration::ZERO;
                    for _ in 0..iters {
                        let mut ssd = drive.clone();
                        let mut rng = Rng::new(1);
                        let mut now = 0;
                        let t = Instant::now();
                        for _ in 0..n {
                            now += 1_000_000_000 / 4000;
                            let off = (rng.next_u64() % pages) * cfg.page_bytes;
                            black_box(ssd.submit(now, off, 4096, rng.next_f64() < 0.7));
                        }
                        wall += t.elapsed();
                    }
                    wall
                })
            });
        }
    }
    g.finish();
}
