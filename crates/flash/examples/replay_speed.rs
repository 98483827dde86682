//! Time the replay of a LinnOS-format trace (read into memory first) on one simulated drive:
//! `replay_speed TRACE REPEAT [PRESET|FILE.toml]` prints I/Os per second of the replay alone.
use iolearn_flash::replay::{ReplayConfig, Replayer};
use iolearn_flash::ssd::{GcMode, SsdConfig};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(repeat)) = (args.get(1), args.get(2).and_then(|r| r.parse::<u64>().ok())) else {
        eprintln!("usage: replay_speed TRACE REPEAT [PRESET|FILE.toml]");
        std::process::exit(2);
    };
    let ssd = match args.get(3).map(String::as_str).unwrap_or("enterprise") {
        p if p.ends_with(".toml") => SsdConfig::from_toml(&std::fs::read_to_string(p).expect("read")).expect("config"),
        p => SsdConfig::by_name(p).expect("a preset"),
    };
    let text = std::fs::read_to_string(path).expect("read the trace");
    let ios: Vec<(u64, u64, u32, bool)> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 5 {
                return None;
            }
            Some((
                (f[0].parse::<f64>().ok()? * 1e6) as u64,
                f[2].parse().ok()?,
                f[3].parse().ok()?,
                f[4] == "0",
            ))
        })
        .collect();
    let span = ios.last().map_or(0, |io| io.0) + 1_000_000;
    let cfg = ReplayConfig {
        ssd,
        mode: GcMode::Base,
        replicas: 1,
        hop_ns: 0,
        noise: Vec::new(),
        precondition: 0.0,
        seed: 1,
    };
    let mut r = Replayer::new(&cfg);
    let t = Instant::now();
    let mut sum = 0u64;
    for k in 0..repeat {
        for &(a, o, s, w) in &ios {
            sum = sum.wrapping_add(r.push_with((a + k * span, o, s, w), false).latency_ns);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let n = repeat * ios.len() as u64;
    println!(
        "{n} I/Os in {secs:.3} s: {:.2} M/s ({:.0} ns each; latency sum {sum})",
        n as f64 / secs / 1e6,
        secs * 1e9 / n as f64
    );
}
