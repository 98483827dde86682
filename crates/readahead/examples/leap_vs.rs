//! LEAP as a prefetcher against vanilla and LEAP-style sizing, per workload, in the simulator.
//! `cargo run --release -p iolearn-readahead --example leap_vs -- [SECONDS]`
use iolearn_readahead::{run, ControllerSpec, LoopConfig};
use iolearn_sim::workload::WorkloadKind;

fn main() {
    let seconds: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(5.0);
    println!(
        "{:<24}{:>12}{:>10}{:>10}{:>10}",
        "workload", "vanilla", "leap", "prefetch", "static16"
    );
    for w in [
        "readrandom",
        "readseq",
        "readreverse",
        "readrandomwriterandom",
        "updaterandom",
        "mixgraph",
    ] {
        let kind = WorkloadKind::parse(w).unwrap();
        let ops = |spec: &str| {
            let cfg = LoopConfig {
                seconds,
                ..LoopConfig::new(vec![kind], ControllerSpec::parse(spec).unwrap())
            };
            run(&cfg).unwrap().ops_per_s[0]
        };
        let v = ops("vanilla");
        println!(
            "{w:<24}{v:>12.0}{:>10.2}{:>10.2}{:>10.2}",
            ops("leap") / v,
            ops("leap-prefetch") / v,
            ops("static:16") / v
        );
    }
}
