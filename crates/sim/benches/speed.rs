//! Simulator speed: page accesses played per second of wall time on one core, per workload,
//! at the vanilla 128 KiB readahead on the calibration setup (2.3 GiB database, 850 MiB
//! cache, NVMe preset). `make bench` runs it; results go to docs/benchmarks.md. (The flash
//! SSD's speed: `cargo bench -p iolearn-flash --bench speed`.)
//!
//! Method: criterion, with `Throughput::Elements`, so the `thrpt:` line is the speed (page
//! accesses or I/Os per second; the middle figure is the estimate). Each iteration is one
//! whole run, so samples are few (10, flat sampling) and building the simulation or cloning
//! the preconditioned drive is not timed (`iter_custom`). The bench takes about a minute.
//!
//! Run: `cargo bench -p iolearn-sim --bench speed` (criterion's options after `--`, e.g.
//! `-- --quick`, or a name filter).
use criterion::{Criterion, SamplingMode, Throughput};
use iolearn_sim::device::DevicePreset;
use iolearn_sim::engine::{Sim, SimConfig};
use iolearn_sim::workload::WorkloadKind;
use std::time::{Duration, Instant};

fn main() {
    // Runs take 0.03-0.5 s each: 10 samples of one or a few runs. Command-line options
    // (`--sample-size`, `--measurement-time`...) still win.
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .without_plots()
        .configure_from_args();
    readahead_speed(&mut c);
    c.final_summary();
}

/// The page cache and readahead: page accesses per second of wall time, per db_bench
/// workload (building the simulation is not timed).
fn readahead_speed(c: &mut Criterion) {
    let mut g = c.benchmark_group("sim_page_accesses");
    g.sampling_mode(SamplingMode::Flat);
    for kind in WorkloadKind::dbbench() {
        // Simulated seconds per run, as before the move to criterion (docs/benchmarks.md).
        let secs = match kind {
            WorkloadKind::ReadSeq | WorkloadKind::ReadReverse => 2.0,
            _ => 20.0,
        };
        let until = (secs * 1e9) as u64;
        let cfg = SimConfig::calibration(kind, DevicePreset::nvme(), 128);
        // The simulation is deterministic: one untimed run gives the accesses per run.
        let mut sim = Sim::new(cfg.clone());
        sim.run_until(until);
        let accesses = sim.page_accesses();
        println!("{}: {secs} simulated s, {accesses} page accesses per run", kind.name());
        g.throughput(Throughput::Elements(accesses));
        g.bench_function(kind.name(), |b| {
            b.iter_custom(|iters| {
                let mut wall = Duration::ZERO;
                for _ in 0..iters {
                    let mut sim = Sim::new(cfg.clone());
                    let t = Instant::now();
                    sim.run_until(until);
                    wall += t.elapsed();
                    assert_eq!(sim.page_accesses(), accesses, "the simulation is not deterministic");
                }
                wall
            })
        });
    }
    g.finish();
}
