//! Two db_bench instances on one device, each with its own readahead per file:
//! `cargo run --release -p iolearn-sim --example mixed [A] [B] [seconds] [device]`.
//! Prints each instance's throughput, misses and I/O wait for a grid of per-file values.
use iolearn_sim::device::DevicePreset;
use iolearn_sim::engine::{Sim, SimConfig, ThreadSpec};
use iolearn_sim::workload::{AccessMode, WorkloadKind};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kind = |i: usize, d: WorkloadKind| args.get(i).and_then(|s| WorkloadKind::parse(s)).unwrap_or(d);
    let (a, b) = (kind(1, WorkloadKind::ReadRandom), kind(2, WorkloadKind::ReadSeq));
    let secs: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(8.0);
    let device = args
        .get(4)
        .and_then(|s| DevicePreset::by_name(s))
        .unwrap_or_else(DevicePreset::nvme);
    println!("{} + {} on {}, {secs} simulated s", a.name(), b.name(), device.name);
    for ra_a in [16u64, 128] {
        for ra_b in [16u64, 128, 256, 512] {
            let mut cfg = SimConfig::calibration(a, device.clone(), 128);
            cfg.threads = [a, b]
                .iter()
                .enumerate()
                .map(|(i, &kind)| ThreadSpec {
                    kind,
                    mode: AccessMode::Mmap,
                    db_instance: i as u32,
                    process: i as u32,
                    max_ops: None,
                })
                .collect();
            let mut sim = Sim::new(cfg);
            for f in 0..sim.n_files() {
                let kb = if sim.instance_of(f) == 0 { ra_a } else { ra_b };
                sim.set_file_ra_pages(f, Some(kb / 4));
            }
            for k in 1..=4 {
                sim.run_until((secs * 1e9) as u64 * k / 4);
                let (n, ahead) = sim.device().backlog(sim.now_ns());
                eprint!(" [{n} in flight, booked {:.2} ms ahead]", ahead as f64 / 1e6);
            }
            eprintln!();
            let st = sim.thread_stats();
            print!("{ra_a:>5} {ra_b:>5} KiB:");
            for s in &st {
                print!(
                    "  {:>10.0} ops/s {:>8} misses {:>5.1}% waiting",
                    s.ops as f64 / secs,
                    s.misses,
                    s.io_wait_ns as f64 / secs / 1e7
                );
            }
            println!();
        }
    }
}
