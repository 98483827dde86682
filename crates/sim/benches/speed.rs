//! Simulator speed: page accesses played per second of wall time on one core, per workload,
//! at the vanilla 128 KiB readahead on the calibration setup (2.3 GiB database, 850 MiB
//! cache, NVMe preset). `make bench` runs it; results go to docs/benchmarks.md.
use iolearn_sim::device::DevicePreset;
use iolearn_sim::engine::{Sim, SimConfig};
use iolearn_sim::workload::WorkloadKind;
use std::time::Instant;

fn main() {
    readahead_speed();
    ssd_speed();
}

fn readahead_speed() {
    println!("| workload | simulated s | page accesses | wall s | M page accesses / s |");
    println!("|---|---:|---:|---:|---:|");
    let (mut total_acc, mut total_wall) = (0u64, 0.0f64);
    for kind in WorkloadKind::dbbench() {
        let secs = match kind {
            WorkloadKind::ReadSeq | WorkloadKind::ReadReverse => 2.0,
            _ => 20.0,
        };
        let mut sim = Sim::new(SimConfig::calibration(kind, DevicePreset::nvme(), 128));
        let t = Instant::now();
        sim.run_until((secs * 1e9) as u64);
        let wall = t.elapsed().as_secs_f64();
        let acc = sim.page_accesses();
        total_acc += acc;
        total_wall += wall;
        println!(
            "| {} | {secs} | {acc} | {wall:.3} | {:.2} |",
            kind.name(),
            acc as f64 / wall / 1e6
        );
    }
    println!(
        "| all | | {total_acc} | {total_wall:.3} | {:.2} |",
        total_acc as f64 / total_wall / 1e6
    );
}

/// The flash SSD (issue 5): simulated I/Os per second of wall time, each GC design, a
/// write-heavy random workload on a preconditioned drive (preconditioning not timed).
fn ssd_speed() {
    use iolearn_ml::Rng;
    use iolearn_sim::ssd::{GcMode, Ssd, SsdConfig};
    println!("\n| SSD preset | GC mode | I/Os | wall s | M simulated I/Os / s |\n|---|---|---:|---:|---:|");
    for cfg in [SsdConfig::consumer(), SsdConfig::enterprise()] {
        for mode in [GcMode::Base, GcMode::Tolerant] {
            let mut ssd = Ssd::new(cfg.clone(), mode);
            ssd.precondition(1.0, 7);
            let mut rng = Rng::new(1);
            let pages = cfg.logical_pages();
            let n = 1_000_000u64;
            let t = Instant::now();
            let mut now = 0;
            for _ in 0..n {
                now += 1_000_000_000 / 4000;
                let off = (rng.next_u64() % pages) * cfg.page_bytes;
                std::hint::black_box(ssd.submit(now, off, 4096, rng.next_f64() < 0.7));
            }
            let wall = t.elapsed().as_secs_f64();
            println!(
                "| {} | {mode:?} | {n} | {wall:.3} | {:.2} |",
                cfg.name,
                n as f64 / wall / 1e6
            );
        }
    }
}
