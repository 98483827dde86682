//! Does the signal the kernel tuner can see (the threads' user-mode time) rank readahead values
//! as the application's ops/s do? Prints, per workload and static
//! value, ops/s / busy share / page-cache accesses per second over 10 simulated seconds.
//!
//! `cargo run --release -p iolearn-readahead --example outcome_proxy`
use iolearn_readahead::{run, ControllerSpec, LoopConfig};
use iolearn_sim::workload::WorkloadKind;

fn main() {
    let workloads = ["readrandom", "readseq", "readreverse", "mixgraph", "updaterandom"];
    for w in workloads {
        let kind = WorkloadKind::parse(w).expect("a workload name");
        print!("{w:14}");
        for kb in [8u64, 32, 128, 512, 2048] {
            let mut c = LoopConfig::new(vec![kind], ControllerSpec::Static(kb));
            c.seconds = 10.0;
            let r = run(&c).expect("a valid run");
            let late = &r.outcomes[1..];
            let n = late.len() as f64;
            let busy = late.iter().map(|o| o.busy_s.unwrap_or(0.0) / o.seconds).sum::<f64>() / n;
            let acc = late.iter().map(|o| o.pages_accessed as f64 / o.seconds).sum::<f64>() / n;
            print!(" {kb}:{:.0}/{busy:.3}/{acc:.0}", r.ops_per_s[0]);
        }
        println!();
    }
}
