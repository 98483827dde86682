//! The guardrail and the online learner against vanilla and the static oracle, per workload and
//! seed. The oracle is the best static value of a sweep run with another seed, measured on this
//! one.
//!
//! `cargo run --release -p iolearn-readahead --example guard_online -- SECONDS SEEDS WORKLOAD...`
//!
//! Columns: the oracle's value and its ops/s over vanilla; two wrong static values behind the
//! guardrail (ops/s over vanilla, reverts); the online learner alone and behind the guardrail
//! (ops/s over vanilla), the share of the oracle's gain it kept over the whole run, and the
//! first second from which a 30-window mean reaches 90% of the oracle's gain.
use iolearn_readahead::{run, ControllerSpec, GuardConfig, LoopConfig, LoopResult};
use iolearn_sim::workload::WorkloadKind;

fn go(kind: WorkloadKind, spec: ControllerSpec, guard: bool, seconds: f64, seed: u64) -> LoopResult {
    let mut c = LoopConfig::new(vec![kind], spec);
    c.seconds = seconds;
    c.seed = seed;
    c.guard = guard.then(GuardConfig::default);
    c.app_signal = true;
    run(&c).expect("a valid run")
}

fn reverts(r: &LoopResult) -> usize {
    r.guard_events.iter().filter(|e| e.kind.as_str() == "reverted").count()
}

/// Per-window ops/s.
fn series(r: &LoopResult) -> Vec<f64> {
    r.outcomes.iter().map(|o| o.ops.unwrap_or(0.0) / o.seconds).collect()
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let seconds: f64 = a.first().and_then(|s| s.parse().ok()).unwrap_or(30.0);
    let seeds: u64 = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let workloads: Vec<&str> = if a.len() > 2 {
        a[2..].iter().map(String::as_str).collect()
    } else {
        vec!["readrandom", "readseq", "readreverse", "mixgraph"]
    };
    println!("workload seed | oracle_kb oracle | static16+g (rev) static4096+g (rev) | online online+g | kept% t90_s");
    let mut summary = Vec::new();
    for w in workloads {
        let kind = WorkloadKind::parse(w).expect("a workload name");
        let mut rows: Vec<[f64; 6]> = Vec::new();
        for seed in 1..=seeds {
            let van = go(kind, ControllerSpec::Vanilla, false, seconds, seed);
            let sweep_seed = seed + 1000;
            let best = [8u64, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
                .into_iter()
                .map(|kb| {
                    (
                        kb,
                        go(kind, ControllerSpec::Static(kb), false, seconds.min(30.0), sweep_seed).ops_per_s[0],
                    )
                })
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .expect("values")
                .0;
            let oracle = go(kind, ControllerSpec::Static(best), false, seconds, seed);
            let s16 = go(kind, ControllerSpec::Static(16), true, seconds, seed);
            let s4k = go(kind, ControllerSpec::Static(4096), true, seconds, seed);
            let on = go(kind, ControllerSpec::Online, false, seconds, seed);
            let ong = go(kind, ControllerSpec::Online, true, seconds, seed);
            let v = van.ops_per_s[0];
            let o = oracle.ops_per_s[0];
            // Time to 90%: per window, against the oracle's and vanilla's windows of the same time.
            let (sv, so, sg) = (series(&van), series(&oracle), series(&ong));
            let span = 30usize.min(sg.len());
            let t90 = (0..=sg.len() - span).find(|&t| {
                let m = |s: &[f64]| s[t..t + span].iter().sum::<f64>() / span as f64;
                let (mv, mo, mg) = (m(&sv), m(&so), m(&sg));
                mo <= mv * 1.1 || mg - mv >= 0.9 * (mo - mv)
            });
            let kept = if o > v * 1.1 {
                (ong.ops_per_s[0] - v) / (o - v)
            } else {
                f64::NAN
            };
            println!(
                "{w:14} {seed} | {best:5} {:.3} | {:.3} ({}) {:.3} ({}) | {:.3} {:.3} | {:.0}% {}",
                o / v,
                s16.ops_per_s[0] / v,
                reverts(&s16),
                s4k.ops_per_s[0] / v,
                reverts(&s4k),
                on.ops_per_s[0] / v,
                ong.ops_per_s[0] / v,
                kept * 100.0,
                t90.map_or("never".to_string(), |t| t.to_string())
            );
            rows.push([
                o / v,
                s16.ops_per_s[0] / v,
                s4k.ops_per_s[0] / v,
                ong.ops_per_s[0] / v,
                kept,
                t90.map_or(f64::INFINITY, |t| t as f64),
            ]);
        }
        summary.push((w, rows));
    }
    // Medians over seeds, with the spread (min-max).
    println!("\n| workload | oracle / vanilla | static 16 KiB, guarded | static 4 MiB, guarded | online, guarded | share of the oracle's gain | t90 (s) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (w, rows) in summary {
        let col = |i: usize, pct: bool| {
            let mut v: Vec<f64> = rows.iter().map(|r| r[i]).filter(|x| !x.is_nan()).collect();
            if v.is_empty() {
                return "-".to_string();
            }
            v.sort_by(f64::total_cmp);
            let (lo, med, hi) = (v[0], v[v.len() / 2], v[v.len() - 1]);
            let f = |x: f64| {
                if x.is_infinite() {
                    "never".to_string()
                } else if pct {
                    format!("{:.0}%", x * 100.0)
                } else if i == 5 {
                    format!("{x:.0}")
                } else {
                    format!("{x:.3}")
                }
            };
            if lo == hi {
                f(med)
            } else {
                format!("{} ({}-{})", f(med), f(lo), f(hi))
            }
        };
        println!(
            "| {w} | {} | {} | {} | {} | {} | {} |",
            col(0, false),
            col(1, false),
            col(2, false),
            col(3, false),
            col(4, true),
            col(5, false)
        );
    }
}
