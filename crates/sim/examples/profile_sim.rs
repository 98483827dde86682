//! One simulation run for profiling: `profile_sim WORKLOAD SECONDS [ra_kb]`.
use iolearn_sim::device::DevicePreset;
use iolearn_sim::engine::{Sim, SimConfig};
use iolearn_sim::workload::WorkloadKind;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let kind = a
        .get(1)
        .and_then(|s| WorkloadKind::parse(s))
        .unwrap_or(WorkloadKind::ReadRandom);
    let secs: f64 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let ra: u64 = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(128);
    let mut sim = Sim::new(SimConfig::calibration(kind, DevicePreset::nvme(), ra));
    sim.run_until((secs * 1e9) as u64);
    println!("{} page accesses, {:?}", sim.page_accesses(), sim.cache().stats());
}
