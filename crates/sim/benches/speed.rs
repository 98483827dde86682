//! Simulator speed: page accesses played per second of wall time on one core, per workload,
//! at the vanilla 128 KiB readahead on the calibration setup (2.3 GiB database, 850 MiB
//! cache, NVMe preset). `make bench` runs it; results go to docs/benchmarks.md.
use iolearn_sim::device::DevicePreset;
use iolearn_sim::engine::{Sim, SimConfig};
use iolearn_sim::workload::WorkloadKind;
use std::time::Instant;

fn main() {
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
