//! What the watched workload got in a window, on the kernel: the guardrail's and the online
//! learner's signal ([`iolearn_policy::readahead::Outcome`]).
//!
//! Progress is the user-mode CPU time of the watched processes' threads: a closed-loop
//! application that waits less for the device runs more of its own code. User time only: the
//! kernel's time on the application's behalf (faults, readahead, page allocation and, under a
//! memory limit, reclaim) grows with the very waste a bad setting causes. Counting it, the
//! guardrail saw two db_bench processes on one database as 0.23-0.8x "busier" under vanilla's
//! 21 pages read per page used than under the tuned 3-4, and reverted settings that had raised
//! both processes' ops/s (docs/benchmarks.md). It comes from `/proc/PID/task/TID/stat` (utime,
//! clock ticks), summed over threads; read by hand because it is one field per file and the
//! tuner already holds the pids (the `procfs` crate would parse every field to get the same).

use iolearn_policy::readahead::Outcome;
use iolearn_probe::Counters;
use std::collections::BTreeMap;
use std::path::Path;

/// User-mode CPU time of a set of processes, by thread, across windows.
#[derive(Debug, Default)]
pub struct CpuMeter {
    /// Clock ticks in user mode at the last reading, by (pid, tid): threads that come and go
    /// count from their first reading.
    last: BTreeMap<(u32, u32), u64>,
}

/// `utime` of a task's `stat` file: clock ticks in user mode. The fields are counted after the
/// last `)`, since the command name before it may hold spaces and parentheses.
fn stat_utime(path: &Path) -> Option<u64> {
    let text = iolearn_safeio::read_to_string(path, 4096).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    // Fields 3 (state) onwards; utime is field 14.
    rest.split_whitespace().nth(11)?.parse().ok()
}

/// Clock ticks per second (`USER_HZ`).
fn ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

impl CpuMeter {
    /// User-mode CPU seconds the threads of `pids` ran since the last call (0 on the first).
    pub fn take(&mut self, pids: &[u32]) -> f64 {
        self.take_by_process(pids).values().sum()
    }

    /// [`CpuMeter::take`] by process: every pid with a thread to read, threads summed (0 for
    /// a process seen for the first time).
    pub fn take_by_process(&mut self, pids: &[u32]) -> BTreeMap<u32, f64> {
        let mut now = BTreeMap::new();
        for &pid in pids {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                if let Some(ticks) = stat_utime(&t.path().join("stat")) {
                    now.insert((pid, tid), ticks);
                }
            }
        }
        let mut ran: BTreeMap<u32, u64> = BTreeMap::new();
        for (&(pid, tid), &ticks) in &now {
            let was = self.last.get(&(pid, tid)).copied().unwrap_or(ticks);
            *ran.entry(pid).or_default() += ticks.saturating_sub(was);
        }
        self.last = now;
        let hz = ticks_per_s();
        ran.into_iter().map(|(pid, t)| (pid, t as f64 / hz)).collect()
    }

    /// A fingerprint of the processes seen at the last [`CpuMeter::take`] (the guardrail's
    /// [`Outcome::population`]): it changes when one exits or starts.
    pub fn population(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut pids: Vec<u32> = self.last.keys().map(|&(pid, _)| pid).collect();
        pids.dedup(); // sorted by the map's order
                      // SipHash with fixed keys: the same set gives the same fingerprint.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        pids.hash(&mut h);
        h.finish()
    }
}

/// What the guardrail and the online learner count as the watched workload's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The watched threads' user-mode CPU time ([`CpuMeter`]), split by process.
    Cpu,
    /// The pages the watched processes' reads returned ([`Counters::pages_read`]) in windows
    /// where they read more than they fault through mappings ([`by_reads`]), else
    /// [`Progress::Cpu`]. Counted, where user time is a few clock ticks a window (an I/O-bound
    /// reader), and blind to how long processes live (a grep that starts fifteen a second
    /// changes the CPU meter's population every window, and the guardrail holds vanilla through
    /// every change). Split by process as well ([`outcome`]), so that processes sharing a
    /// device are judged each against its own vanilla. Mapped reads have no such count (loads from mapped pages never reach the
    /// kernel, and the pages mapped around a fault are not traced one by one), hence user time
    /// for them.
    Auto,
}

impl Progress {
    /// The name `--progress` takes.
    pub fn name(self) -> &'static str {
        match self {
            Progress::Cpu => "cpu",
            Progress::Auto => "auto",
        }
    }

    /// `cpu` or `auto`.
    pub fn parse(s: &str) -> Result<Progress, String> {
        match s {
            "cpu" => Ok(Progress::Cpu),
            "auto" => Ok(Progress::Auto),
            _ => Err(format!("{} is not cpu or auto", iolearn_safeio::excerpt(s, 32))),
        }
    }
}

/// [`Outcome::population`] of a window judged by the pages read: a fixed tag, so that a
/// window judged by user time (the CPU meter's fingerprint) never compares with one judged by
/// pages (a change of measure is a change of population to the guardrail).
pub const READS_POPULATION: u64 = 0x7265_6164_7300_0001;

/// Whether `--progress auto` judges a window by the pages read: where they outnumber the
/// faults two to one, and once it does, until the faults outnumber them two to one (a
/// workload near one to one does not switch measure every window, and each switch costs the
/// guardrail a fresh look at vanilla). A window with neither keeps the measure in force.
pub fn by_reads(counted: &Counters, before: bool) -> bool {
    let pages = counted.pages_read as f64;
    let faults = counted.faults as f64;
    match (pages > 0.0 || faults > 0.0, before) {
        (false, _) => before,
        (true, true) => faults <= 2.0 * pages,
        (true, false) => pages >= 2.0 * faults,
    }
}

/// The outcome of a probe window of `seconds` (`counted`: the probes' counts in it, scaled to
/// the whole window when only part of it was watched), with `cpu` the watched processes' user
/// seconds by pid and their fingerprint (`None`: none watched) and the device at
/// `read_ahead_kb`; judged by the pages read where `reads` ([`by_reads`]), else by user time.
/// `pages_by_process`: the window's [`Counters::pages_read`] by pid (scaled alike). Demand
/// misses are the kernel's synchronous readahead calls.
pub fn outcome(
    counted: &Counters,
    seconds: f64,
    cpu: Option<(BTreeMap<u32, f64>, u64)>,
    read_ahead_kb: u64,
    reads: bool,
    pages_by_process: &BTreeMap<u32, u64>,
) -> Outcome {
    if let (true, Some((alive, _))) = (reads, &cpu) {
        // A window with no read returned measured nothing (a pause), unless the device was
        // busy for the workload meanwhile: then it is a stall, progress zero.
        let busy = counted.pages_read > 0 || counted.pages_added > 0 || counted.pages_accessed > 0;
        // Every watched process alive at the window's end, with the pages its reads returned
        // (none: zero, a process that stalled). The population stays the fixed tag: a process
        // that lived for part of the blocks compared is left out of the comparison by
        // process ([`Outcome::relative_progress`]), not made a reason to measure afresh.
        let by_process = alive
            .keys()
            .map(|&pid| (pid, pages_by_process.get(&pid).copied().unwrap_or(0) as f64))
            .collect();
        return Outcome {
            by_process,
            resolution: 1.0,
            population: Some(READS_POPULATION),
            seconds,
            ops: busy.then_some(counted.pages_read as f64),
            busy_s: None,
            pages_accessed: counted.pages_accessed,
            pages_added: counted.pages_added,
            misses: counted.ra_sync,
            pages_used: Some(counted.pages_read),
            read_ahead_kb: Some(read_ahead_kb),
        };
    }
    let busy_s = cpu.as_ref().map(|c| c.0.values().sum());
    let population = cpu.as_ref().map(|c| c.1);
    Outcome {
        by_process: cpu.map(|c| c.0).unwrap_or_default(),
        resolution: 1.0 / ticks_per_s(),
        population,
        seconds,
        ops: None,
        busy_s,
        pages_accessed: counted.pages_accessed,
        pages_added: counted.pages_added,
        misses: counted.ra_sync,
        // Faults and `pages_accessed` (a large read's pages more than once) are no count of use.
        pages_used: None,
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
        // 200 ms of this thread's own CPU time (not of wall time: on a loaded machine the
        // thread may run for a fraction of it), read from the clock the kernel keeps per thread.
        let cpu_s = || {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: a valid timespec for the call to fill.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
        };
        let t = cpu_s();
        let mut x = 0u64;
        // The clock is a system call: read it rarely, so the time spent is the loop's own.
        while cpu_s() - t < 0.2 {
            for _ in 0..1_000_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                std::hint::black_box(x);
            }
        }
        std::hint::black_box(x);
        // By process: this one, and the parent (the test runner, waiting on this one), first
        // seen now.
        let parent = std::os::unix::process::parent_id();
        let by = m.take_by_process(&[me, parent]);
        let ran = by[&me];
        assert!((0.1..2.0).contains(&ran), "{ran} s");
        assert_eq!(by.get(&parent), Some(&0.0), "first seen: counts from now");
        assert!(m.take_by_process(&[parent]).get(&parent).is_some_and(|&s| s < 0.1));
        m.take(&[me]);
        let alone = m.population();
        assert_eq!(m.take(&[u32::MAX]), 0.0, "a pid that does not exist counts nothing");
        assert_ne!(m.population(), alone, "the process left the set");
        m.take(&[me, u32::MAX]);
        assert_eq!(m.population(), alone, "the same set, the same fingerprint");
    }

    #[test]
    fn auto_progress_judges_by_pages_read_where_reads_outweigh_faults() {
        let cpu = |pids: &[u32]| {
            Some((
                pids.iter().map(|&p| (p, 0.02)).collect::<BTreeMap<_, _>>(),
                pids[0] as u64,
            ))
        };
        let c = |pages: u64, faults| Counters {
            pages_read: pages,
            faults,
            pages_accessed: pages + faults,
            pages_added: 50,
            ..Default::default()
        };
        // A reader: its pages read per second, whichever processes did the reading, and each
        // watched process's pages: none for one that read nothing (a stall), and nothing for a
        // process not watched any more.
        assert!(by_reads(&c(4000, 10), false));
        let by_pid = BTreeMap::from([(7, 3000), (3, 1000)]);
        let none = BTreeMap::new();
        let a = outcome(&c(4000, 10), 2.0, cpu(&[7, 8]), 256, true, &by_pid);
        let b = outcome(&c(4000, 10), 2.0, cpu(&[9]), 256, true, &none);
        assert_eq!(a.progress(), Some(2000.0));
        assert_eq!(a.by_process, BTreeMap::from([(7, 3000.0), (8, 0.0)]));
        assert!(a.busy_s.is_none());
        assert_eq!(
            a.population, b.population,
            "short-lived processes do not change the population"
        );
        // Mapped reads: user time, by process, another population.
        assert!(!by_reads(&c(10, 4000), true));
        let o = outcome(&c(10, 4000), 2.0, cpu(&[7, 8]), 256, false, &none);
        assert_eq!(o.progress(), Some(0.02));
        assert_eq!((o.by_process.len(), o.population), (2, Some(7)));
        assert_ne!(
            o.population, a.population,
            "a change of measure is a change of population"
        );
        // Near one to one, the measure in force stays; a window of neither keeps it.
        for before in [false, true] {
            assert_eq!(by_reads(&c(100, 70), before), before);
            assert_eq!(by_reads(&Counters::default(), before), before);
        }
        // A pause measures nothing and keeps the population; a stall (the device busy, no
        // read back) is progress zero.
        let pause = outcome(&Counters::default(), 2.0, cpu(&[7]), 256, true, &none);
        assert_eq!((pause.progress(), pause.population), (None, a.population));
        let stall = Counters {
            pages_added: 64,
            ..Default::default()
        };
        assert_eq!(outcome(&stall, 2.0, cpu(&[7]), 256, true, &none).progress(), Some(0.0));
        // No process watched: nothing to judge by.
        assert_eq!(outcome(&c(4000, 0), 2.0, None, 256, true, &none).progress(), None);
        for p in [Progress::Cpu, Progress::Auto] {
            assert_eq!(Progress::parse(p.name()), Ok(p));
        }
        assert!(Progress::parse("pages").unwrap_err().contains("not cpu or auto"));
    }

    #[test]
    fn time_in_the_kernel_is_not_progress() {
        // Copying from /dev/zero is the kernel's work: it must not count as the application's.
        // This thread's own file (other tests run beside it in this process).
        use std::io::Read;
        // SAFETY: gettid has no preconditions.
        let stat = std::path::PathBuf::from(format!("/proc/self/task/{}/stat", unsafe { libc::gettid() }));
        let before = stat_utime(&stat).unwrap();
        let mut zero = std::fs::File::open("/dev/zero").unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(300) {
            zero.read_exact(&mut buf).unwrap();
        }
        let user = (stat_utime(&stat).unwrap() - before) as f64 / ticks_per_s();
        assert!(user < 0.1, "{user} s of user time for 0.3 s of copying in the kernel");
    }

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_skipped() {
        let dir = std::env::temp_dir().join(format!("iolearn-stat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("stat");
        std::fs::write(&p, "42 (a) b (c) R 1 42 42 0 -1 4194304 10 0 0 0 250 7 0 0 20 0 1 0\n").unwrap();
        assert_eq!(stat_utime(&p), Some(250));
        std::fs::write(&p, "42 (truncated").unwrap();
        assert_eq!(stat_utime(&p), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
