//! What the probes cost a random reader: 4 KiB `pread`s at random offsets of a file, timed
//! without the probes and with them attached (filtered to this process and the file's device,
//! as the tuner runs them), in interleaved pairs. Prints each pair's ratio and the median with
//! the spread. Root and eBPF needed.
//!
//! `cargo run --release -p iolearn-probe --example overhead -- FILE [PAIRS] [SECONDS] [cached|cold] [stats]`
//!
//! `cached`: the file stays in the page cache, so every read is a page-cache hit and costs
//! microseconds: the probes' per-event cost is the largest share it can be (the worst case).
//! `cold`: the file is dropped from the cache before each run, and reads wait for the device.
use iolearn_probe::{DeviceId, Probe, ProbeConfig};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Reads per second of random 4 KiB `pread`s over `seconds`.
fn reads_per_s(f: &std::fs::File, pages: u64, seconds: f64, seed: &mut u64) -> f64 {
    let mut buf = vec![0u8; 4096];
    let t = Instant::now();
    let mut n = 0u64;
    let end = Duration::from_secs_f64(seconds);
    while t.elapsed() < end {
        for _ in 0..64 {
            // xorshift64: the offsets need to be spread, not good random numbers.
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            let off = (*seed % pages) * 4096;
            // SAFETY: a valid descriptor and a buffer of 4096 bytes.
            let r = unsafe { libc::pread(f.as_raw_fd(), buf.as_mut_ptr().cast(), 4096, off as i64) };
            assert_eq!(r, 4096, "pread");
        }
        n += 64;
    }
    n as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let path = std::path::PathBuf::from(a.first().expect("FILE"));
    let pairs: usize = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(15);
    let seconds: f64 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let cold = a.get(3).is_some_and(|s| s == "cold");
    // With `stats` as a fifth argument: the kernel's run-time accounting of each program (it
    // costs a little itself, so not for the ratios).
    let stats = a.get(4).is_some_and(|s| s == "stats");
    let f = std::fs::File::open(&path).expect("FILE opens");
    let pages = f.metadata().expect("metadata").len() / 4096;
    assert!(pages > 0, "FILE is empty");
    let dev = DeviceId::of_path(&path).expect("the file's device");
    let cfg = ProbeConfig {
        device: Some(dev),
        pids: vec![std::process::id()],
        filter_pids: true,
        ..Default::default()
    };
    let mut seed = 0x9E3779B97F4A7C15u64;
    let drop = |f: &std::fs::File| {
        if cold {
            // SAFETY: a valid descriptor.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    };
    // Warm up (and, cached, bring the file in).
    reads_per_s(&f, pages, seconds, &mut seed);
    let mut ratios = Vec::new();
    for i in 0..pairs {
        // Alternate which goes first, so a drift favours neither.
        let mut run = |probe: bool| {
            drop(&f);
            let mut p = probe.then(|| Probe::start(&cfg).expect("the probes start"));
            if stats {
                if let Some(p) = p.as_mut() {
                    let _ = p.enable_stats();
                }
            }
            let r = reads_per_s(&f, pages, seconds, &mut seed);
            if let (true, Some(p)) = (stats, p.as_ref()) {
                for s in p.program_stats().iter().filter(|s| s.runs > 0) {
                    println!(
                        "  {}: {:.2} runs per read, {:.0} ns a run",
                        s.name,
                        s.runs as f64 / (r * seconds),
                        s.run_time_ns as f64 / s.runs as f64
                    );
                }
            }
            std::mem::drop(p);
            r
        };
        let (with, without) = if i % 2 == 0 {
            let w = run(true);
            (w, run(false))
        } else {
            let wo = run(false);
            (run(true), wo)
        };
        println!(
            "pair {i}: {with:.0} reads/s with the probes, {without:.0} without: {:.4}",
            with / without
        );
        ratios.push(with / without);
    }
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    println!(
        "with / without ({} reads, {n} pairs of {seconds} s): median {:.4}, spread {:.4}-{:.4}, middle half {:.4}-{:.4}",
        if cold { "cold" } else { "cached" },
        ratios[n / 2],
        ratios[0],
        ratios[n - 1],
        ratios[n / 4],
        ratios[3 * n / 4]
    );
}
