//! LEAP as a prefetcher (as released, and unmarked: at its best on a page cache) against
//! vanilla, LEAP-style sizing and KML's 16 KiB for random reads, per workload, in the
//! simulator: medians over seeds with the spread, as a Markdown table.
//!
//! `cargo run --release -p iolearn-readahead --example leap_vs -- [SECONDS] [SEEDS] [nvme|sata]`
use iolearn_readahead::{run, ControllerSpec, LoopConfig};
use iolearn_sim::device::DevicePreset;
use iolearn_sim::workload::WorkloadKind;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let seconds: f64 = a.first().and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let seeds: u64 = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let device = a.get(2).map_or("nvme", String::as_str);
    let preset = DevicePreset::by_name(device).expect("nvme, sata, hdd or loop");
    let specs = ["leap", "leap-prefetch", "leap-prefetch-unmarked", "static:16"];
    println!("| workload ({device}) | vanilla ops/s | leap (sizing) | LEAP prefetch | LEAP prefetch, unmarked | static 16 KiB |");
    println!("|---|---:|---:|---:|---:|---:|");
    for w in WorkloadKind::dbbench() {
        let ops = |spec: &str, seed: u64| {
            let cfg = LoopConfig {
                seconds,
                seed,
                device: preset.clone(),
                ..LoopConfig::new(vec![w], ControllerSpec::parse(spec).expect("a spec"))
            };
            run(&cfg).expect("a valid run").ops_per_s[0]
        };
        // Interleaved: each seed runs vanilla and every controller before the next seed.
        let mut vanilla = Vec::new();
        let mut ratios = vec![Vec::new(); specs.len()];
        for seed in 1..=seeds {
            let v = ops("vanilla", seed);
            vanilla.push(v);
            for (r, spec) in ratios.iter_mut().zip(specs) {
                r.push(ops(spec, seed) / v);
            }
        }
        let med = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            let (lo, m, hi) = (v[0], v[v.len() / 2], v[v.len() - 1]);
            if hi - lo < 0.005 {
                format!("{m:.2}")
            } else {
                format!("{m:.2} ({lo:.2}-{hi:.2})")
            }
        };
        vanilla.sort_by(f64::total_cmp);
        let cols: Vec<String> = ratios.iter_mut().map(med).collect();
        println!(
            "| {} | {:.0} | {} |",
            w.name(),
            vanilla[vanilla.len() / 2],
            cols.join(" | ")
        );
    }
}
