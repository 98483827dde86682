//! What the watched workload got in a window, on the kernel: the guardrail's and the online
//! learner's signal ([`iolearn_policy::readahead::Outcome`]).
//!
//! Progress is the CPU time of the watched processes' threads: a closed-loop application that
//! waits less for the device runs more. It comes from `/proc/PID/task/TID/schedstat` (its first
//! field, nanoseconds on the CPU), summed over threads; read by hand because it is one number
//! per file and the tuner already holds the pids (the `procfs` crate would parse every field of
//! `stat` to get the same). Its bias, measured in the simulator: a miss costs the kernel CPU
//! too, so a setting that misses more looks busier than it is (docs/tuning.md).

use iolearn_policy::readahead::Outcome;
use iolearn_probe::Counters;
use std::collections::BTreeMap;
use std::path::Path;

/// CPU time of a set of processes, by thread, across windows.
#[derive(Debug, Default)]
pub struct CpuMeter {
    /// Nanoseconds on the CPU at the last reading, by (pid, tid): threads that come and go
    /// count from their first reading.
    last: BTreeMap<(u32, u32), u64>,
}

/// The first field of a `schedstat` file: nanoseconds on the CPU.
fn schedstat_ns(path: &Path) -> Option<u64> {
    let text = iolearn_safeio::read_to_string(path, 4096).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

impl CpuMeter {
    /// CPU seconds the threads of `pids` ran since the last call (0 on the first).
    pub fn take(&mut self, pids: &[u32]) -> f64 {
        let mut now = BTreeMap::new();
        for &pid in pids {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                if let Some(ns) = schedstat_ns(&t.path().join("schedstat")) {
                    now.insert((pid, tid), ns);
                }
            }
        }
        let ran: u64 = now
            .iter()
            .filter_map(|(k, &ns)| self.last.get(k).map(|&was| ns.saturating_sub(was)))
            .sum();
        self.last = now;
        ran as f64 / 1e9
    }
}

/// The outcome of a probe window of `seconds` (the probes' counters before and after it), with
/// `busy_s` CPU seconds of the watched processes (`None`: none watched) and the device at
/// `read_ahead_kb`. Demand misses are the kernel's synchronous readahead calls.
pub fn outcome(before: &Counters, after: &Counters, seconds: f64, busy_s: Option<f64>, read_ahead_kb: u64) -> Outcome {
    Outcome {
        seconds,
        ops: None,
        busy_s,
        pages_accessed: after.pages_accessed.saturating_sub(before.pages_accessed),
        pages_added: after.pages_added.saturating_sub(before.pages_added),
        misses: after.ra_sync.saturating_sub(before.ra_sync),
        read_ahead_kb: Some(read_ahead_kb),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_of_this_process_is_measured() {
        let mut m = CpuMeter::default();
        let me = std::process::id();
        assert_eq!(m.take(&[me]), 0.0);
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(200) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let ran = m.take(&[me]);
        assert!((0.1..2.0).contains(&ran), "{ran} s");
        assert_eq!(m.take(&[u32::MAX]), 0.0, "a pid that does not exist counts nothing");
    }
}
