//! Quick look at a reference trace on replicas: base latency percentiles at several rates.
//! `cargo run --release -p iolearn-tail --example explore -- TRACE PRESET RATE...`
use iolearn_flash::ssd::{GcMode, SsdConfig};
use iolearn_policy::admission::AdmitAll;
use iolearn_tail::*;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let trace = iolearn_trace::read_file(args[1].as_ref(), None, Default::default()).unwrap();
    let ios: Vec<_> = trace
        .ios
        .iter()
        .map(|i| (i.arrival_ns, i.offset, i.size, i.write))
        .collect();
    let ssd = SsdConfig::by_name(&args[2]).unwrap();
    let world = World::new(WorldConfig {
        drive: iolearn_tail::DriveConfig::Ssd(ssd),
        mode: GcMode::Base,
        replicas: 3,
        failover_ns: 15_000,
        noise: vec![],
        precondition: 1.0,
        seed: 1,
        cache_pages: 0,
    });
    for rate in &args[3..] {
        let rate: f64 = rate.parse().unwrap();
        let reqs = replicate(&ios, 3, rate).unwrap();
        for spec in ["base", "base+hedge=500", "oracle=300", "mittssd=300"] {
            let p = PolicySpec::parse(spec).unwrap();
            let mut adm = p
                .build(1, world.timing(), world.config().replicas)
                .unwrap_or_else(|_| Box::new(AdmitAll));
            let t = std::time::Instant::now();
            let r = world.run(&reqs, adm.as_mut(), p.client, false);
            let lat: Vec<f64> = r.reads.iter().map(|x| x.latency_ns as f64 / 1e3).collect();
            let s = Summary::of(&lat);
            println!(
                "rate {rate:6} {spec:16} n {:6} mean {:8.1} p50 {:7.1} p90 {:7.1} p95 {:7.1} p99 {:8.1} p99.9 {:8.1} ({:.2}s)",
                s.n, s.mean, s.p50, s.p90, s.p95, s.p99, s.p999, t.elapsed().as_secs_f64()
            );
        }
    }
}
