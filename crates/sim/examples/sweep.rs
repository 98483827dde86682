//! Readahead sweep of the calibration setup: `cargo run --release -p iolearn-sim --example sweep
//! [seconds] [device]`. Prints ops/s per workload and read_ahead_kb, and the simulator's speed.
use iolearn_sim::device::DevicePreset;
use iolearn_sim::engine::{run, SimConfig};
use iolearn_sim::workload::WorkloadKind;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let device = args
        .get(2)
        .and_then(|s| DevicePreset::by_name(s))
        .unwrap_or_else(DevicePreset::nvme);
    let ras = [4u64, 16, 64, 128, 256, 512, 1024, 2560, 4096];
    println!("device {} , {secs} simulated s per run", device.name);
    print!("{:<24}", "workload \\ ra_kb");
    for r in ras {
        print!("{r:>9}");
    }
    println!();
    let (mut accesses, t0) = (0u64, Instant::now());
    for kind in WorkloadKind::dbbench() {
        print!("{:<24}", kind.name());
        for ra in ras {
            let cfg = SimConfig::calibration(kind, device.clone(), ra);
            let r = run(cfg, (secs * 1e9) as u64);
            accesses += r.page_accesses;
            print!("{:>9.0}", r.ops_per_s[0]);
        }
        println!();
    }
    let wall = t0.elapsed().as_secs_f64();
    println!(
        "{accesses} page accesses in {wall:.2} s wall: {:.2} M/s",
        accesses as f64 / wall / 1e6
    );
}
