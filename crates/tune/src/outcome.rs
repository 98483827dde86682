//! What the watched workload got in a window, on the kernel: the guardrail's and the online
//! learner's signal ([`iolearn_policy::readahead::Outcome`]).
//!
//! Progress is the user-mode CPU time of the watched processes' threads: a closed-loop
//! application that waits less for the device runs more of its own code. User time only: the
//! kernel's time on the application's behalf (faults, readahead, page allocation and, under a
//! memory limit, reclaim) grows with the very waste a bad setting causes. Counting it, the
//! guardrail saw two db_bench processes on one database as 0.23-0.8x "busier" under vanilla's
//! 21 pages read per page used than under the tuned 3-4, and reverted settings that had raised
//! both processes' ops/s (docs/benchmarks.md).
//!
//! Each window's user time is the threads' exact run time in the window (the scheduler's
//! `sum_exec_runtime`) times the share of the window's scheduler ticks that found them in user
//! mode, read by the probe's task iterator ([`TaskTimes`]). `/proc/PID/task/TID/stat` gives
//! user time in clock ticks of 10 ms, made from the run time split by the thread's user share
//! since it started: a database's range scans, I/O-bound at a tenth of a CPU, read ten to
//! fifteen of those a window, the share lags a change of setting, and the guardrail's chance
//! bar (three times a count's square root) was 47% for a block of three windows, so it could
//! not see KML's per-file model lose 31% there. Split by each window's own ticks, the error
//! is the split's sampling error alone, which [`CpuWindow::resolution`] carries to the
//! guardrail.

use iolearn_policy::readahead::{Outcome, MIN_SHARE};
use iolearn_probe::{Counters, TaskTimes};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// User-mode CPU time of a set of processes, by thread, across windows.
#[derive(Debug, Default)]
pub struct CpuMeter {
    /// Each thread's times at the last reading, by (pid, tid): threads that come and go count
    /// from their first reading.
    last: BTreeMap<(u32, u32), TaskTimes>,
    /// A reading that timed the kernel's ticks (jiffies and clock), and the tick rate the
    /// readings since gave ([`iolearn_probe::tick_rate`]).
    clock: Option<TaskTimes>,
    hz: Option<f64>,
    /// A reading failed since the last one ([`CpuMeter::lost`]).
    gap: bool,
}

/// What [`CpuMeter::take`] measured over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuWindow {
    /// User-mode CPU seconds by process (0 for one seen for the first time).
    pub by_process: BTreeMap<u32, f64>,
    /// User seconds per effective tick sample ([`Outcome::resolution`]), the coarsest of the
    /// processes that count (1% of the user time or more): a process's estimate has the
    /// sampling error of a count of `user / resolution` samples or less, and so has their sum.
    pub resolution: f64,
    /// A fingerprint of the processes measured ([`Outcome::population`]): it changes when
    /// one exits or starts.
    pub population: u64,
}

/// One process's user seconds in a window and the effective number of tick samples behind
/// them, from its exact run time `ran_s`, the ticks that found it in user mode (`user`) and in
/// the kernel (`system`), and its user share before (`prior`, one sample's weight, so a window
/// with no tick is split as the process's past was). The share's sampling error is binomial:
/// its relative variance is (1 - f) / (f n) for n ticks, that of a count of f n / (1 - f)
/// samples; a thread in user mode at every tick is measured to its run time's precision.
fn split(ran_s: f64, user: f64, system: f64, prior: f64) -> (f64, f64) {
    let n = user + system + 1.0;
    let f = ((user + prior) / n).clamp(0.0, 1.0);
    (ran_s * f, n * f / (1.0 - f).max(0.5 / n))
}

impl CpuMeter {
    /// A window's reading failed: the meter keeps its last reading, so the next one spans the
    /// gap, and [`CpuMeter::measured`] takes it as a new start, not as one window's time.
    pub fn lost(&mut self) {
        self.gap = true;
    }

    /// [`CpuMeter::take`] for one window: `None` for the first reading after [`CpuMeter::lost`]
    /// (it re-bases the meter; counted as one window, the gap's user time would read as a
    /// burst of progress for whatever value was in force).
    pub fn measured(&mut self, pids: &[u32], now: &[TaskTimes]) -> Option<CpuWindow> {
        let w = self.take(pids, now);
        (!std::mem::take(&mut self.gap)).then_some(w)
    }

    /// User-mode CPU seconds the threads of `pids` ran since the last call (0 on the first),
    /// from the probe's reading `now` ([`iolearn_probe::Probe::task_times`]).
    pub fn take(&mut self, pids: &[u32], now: &[TaskTimes]) -> CpuWindow {
        if let Some(&read) = now.first() {
            match self.clock.and_then(|c| iolearn_probe::tick_rate(&c, &read)) {
                Some(hz) => (self.hz, self.clock) = (Some(hz), Some(read)),
                None if self.clock.is_none() => self.clock = Some(read),
                None => {} // too close to the last: measured from it next time
            }
        }
        // Until timed, 100 Hz: the longest tick Linux has, so the fewest samples claimed.
        let hz = self.hz.unwrap_or(100.0);
        let tick = 1e9 / hz;
        // (run time, user ticks, kernel ticks) in the window, and the user and kernel tick
        // time since the threads started, by process.
        let mut ran: BTreeMap<u32, [f64; 5]> = BTreeMap::new();
        let mut seen = BTreeMap::new();
        for t in now.iter().filter(|t| pids.contains(&t.tgid)) {
            // A thread id used again (times gone back) is a thread seen for the first time.
            let was = self
                .last
                .get(&(t.tgid, t.tid))
                .filter(|w| {
                    w.runtime_ns <= t.runtime_ns
                        && w.user_tick_ns <= t.user_tick_ns
                        && w.system_tick_ns <= t.system_tick_ns
                })
                .unwrap_or(t);
            let e = ran.entry(t.tgid).or_default();
            e[0] += (t.runtime_ns - was.runtime_ns) as f64 / 1e9;
            e[1] += (t.user_tick_ns - was.user_tick_ns) as f64 / tick;
            e[2] += (t.system_tick_ns - was.system_tick_ns) as f64 / tick;
            e[3] += t.user_tick_ns as f64;
            e[4] += t.system_tick_ns as f64;
            seen.insert((t.tgid, t.tid), *t);
        }
        self.last = seen;
        let mut measured = Vec::new();
        let by_process: BTreeMap<u32, f64> = ran
            .into_iter()
            .map(|(pid, [r, u, s, cu, cs])| {
                if r <= 0.0 && u + s <= 0.0 {
                    return (pid, 0.0); // did not run (or first seen): no sample either
                }
                let prior = if cu + cs > 0.0 { cu / (cu + cs) } else { 0.5 };
                let (user, n) = split(r, u, s, prior);
                measured.push((user, n));
                (pid, user)
            })
            .collect();
        let total: f64 = measured.iter().map(|m| m.0).sum();
        let resolution = measured
            .iter()
            .filter(|&&(user, n)| user > 0.0 && user >= MIN_SHARE * total && n > 0.0)
            .map(|&(user, n)| user / n)
            .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))))
            .unwrap_or(1.0 / hz);
        CpuWindow {
            by_process,
            resolution,
            population: self.population(),
        }
    }

    /// A fingerprint of the processes seen at the last [`CpuMeter::take`] (the guardrail's
    /// [`Outcome::population`]): it changes when one exits or starts.
    fn population(&self) -> u64 {
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// The application's own count of operations, read from a file it writes ([`OpsCounter`]):
    /// what it does, where neither user time nor pages show it (a mapped reader whose user time
    /// per operation rises when its reads shrink). One sum, not split by process.
    Ops(PathBuf),
}

impl Progress {
    /// The name `--progress` takes (`ops:PATH` with its path).
    pub fn name(&self) -> String {
        match self {
            Progress::Cpu => "cpu".into(),
            Progress::Auto => "auto".into(),
            Progress::Ops(p) => format!("ops:{}", p.display()),
        }
    }

    /// `cpu`, `auto` or `ops:PATH`.
    pub fn parse(s: &str) -> Result<Progress, String> {
        match s {
            "cpu" => Ok(Progress::Cpu),
            "auto" => Ok(Progress::Auto),
            _ => match s.strip_prefix("ops:") {
                Some("") => Err("ops:PATH needs the path of the application's count of operations".into()),
                Some(p) => Ok(Progress::Ops(PathBuf::from(p))),
                None => Err(format!(
                    "{} is not cpu, auto or ops:PATH",
                    iolearn_safeio::excerpt(s, 32)
                )),
            },
        }
    }
}

/// The application's count of operations, read once a window from a file it writes: the last
/// line that ends in a newline and is not blank holds the count so far, a decimal number (a
/// file of one line may leave the newline out). Written whole and renamed into place, or
/// appended a line per report: both read the same. A window's progress is the count's rise
/// since the last window. A window where the file is missing or holds no number is not
/// measured, nor is the next (the rise over two windows is no one window's progress); a
/// window with no operation and no page touched is a pause, not measured either; a count that
/// went back (the application restarted) starts a new population, since counts before and
/// after do not compare. The count must be of a closed-loop workload's operations (each waits
/// for the last): an open-loop server's count is its clients' demand, whatever the device
/// does. Opened without following a link at its last component, read only if a regular file,
/// only its last 4 KiB: the tuner runs as root, and a planted link to a device or a FIFO must
/// neither block it nor be read (name a path whose directories only root can change).
///
/// The file is read by a thread of its own, waited for a bounded time ([`OpsCounter::take`]):
/// a count on a filesystem that stops answering (a hung FUSE daemon, an NFS server gone)
/// would otherwise stop the window loop inside `read`, and with it the guardrail and the
/// restore on a signal. Until the read returns, windows are not measured.
#[derive(Debug)]
pub struct OpsCounter {
    path: PathBuf,
    /// How the file is read ([`read_count`]; another in tests).
    read: fn(&Path) -> Result<f64, String>,
    /// The thread that reads, started at the first reading.
    reader: Option<Reader>,
    /// The count at the last reading that gave one.
    last: Option<f64>,
    /// Times the count went back: part of the population's tag.
    restarts: u64,
    /// The last reading failed (a run of failures is logged once).
    failing: bool,
}

/// The reading thread's two ends: a request per reading, an answer per request.
#[derive(Debug)]
struct Reader {
    ask: std::sync::mpsc::Sender<()>,
    answers: std::sync::mpsc::Receiver<Result<f64, String>>,
    /// A request not answered in time and not answered since.
    waiting: bool,
}

/// One reading of an application's count ([`OpsCounter::take`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// Operations since the last reading.
    Rise(f64),
    /// A count to measure the next window from: the first reading, or the first after a
    /// failed one.
    Start,
    /// The count went back (the application restarted): measured afresh from here, another
    /// population ([`OpsCounter::population`]).
    Restart,
    /// No count.
    Failed {
        /// Why, naming the file.
        error: String,
        /// The reading before gave one (a run of failures is logged once).
        first: bool,
    },
}

impl Reading {
    /// The window's operations, if it was measured.
    pub fn ops(&self) -> Option<f64> {
        match self {
            Reading::Rise(n) => Some(*n),
            _ => None,
        }
    }
}

/// [`Outcome::population`] of windows judged by an application's count, before any restart.
pub const OPS_POPULATION: u64 = 0x6f70_7300_0000_0001;

impl OpsCounter {
    /// A counter read from `path` (nothing is read yet).
    pub fn new(path: &Path) -> OpsCounter {
        OpsCounter::reading_by(path, read_count)
    }

    fn reading_by(path: &Path, read: fn(&Path) -> Result<f64, String>) -> OpsCounter {
        OpsCounter {
            path: path.to_path_buf(),
            read,
            reader: None,
            last: None,
            restarts: 0,
            failing: false,
        }
    }

    /// Read the count, waiting at most `wait` for it: its rise since the last reading, or why
    /// there is none. A failure forgets the last count: the rise over several windows is no
    /// one window's progress (a file rewritten in place reads empty now and then).
    pub fn take(&mut self, wait: Duration) -> Reading {
        let now = match self.read_now(wait) {
            Ok(n) => n,
            Err(error) => {
                self.last = None;
                let first = !self.failing;
                self.failing = true;
                return Reading::Failed { error, first };
            }
        };
        self.failing = false;
        match self.last.replace(now) {
            Some(w) if now >= w => Reading::Rise(now - w),
            Some(_) => {
                self.restarts += 1;
                Reading::Restart
            }
            None => Reading::Start,
        }
    }

    /// The count, from the reading thread within `wait`. An answer that comes later is of an
    /// earlier window and is dropped.
    fn read_now(&mut self, wait: Duration) -> Result<f64, String> {
        use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
        if self.reader.is_none() {
            self.reader = Some(self.start_reader()?);
        }
        let reader = self.reader.as_mut().expect("started above");
        let path = self.path.display();
        if reader.waiting {
            match reader.answers.try_recv() {
                Ok(_) => reader.waiting = false,
                Err(TryRecvError::Empty) => {
                    return Err(format!("{path}: a read begun in an earlier window has not returned"))
                }
                Err(TryRecvError::Disconnected) => {
                    self.reader = None;
                    return Err(format!("{path}: the reading thread ended"));
                }
            }
        }
        if reader.ask.send(()).is_err() {
            self.reader = None;
            return Err(format!("{path}: the reading thread ended"));
        }
        match reader.answers.recv_timeout(wait) {
            Ok(got) => got,
            Err(RecvTimeoutError::Timeout) => {
                reader.waiting = true;
                Err(format!(
                    "{path}: no answer within {} ms (its filesystem may not be answering)",
                    wait.as_millis()
                ))
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.reader = None;
                Err(format!("{path}: the reading thread ended"))
            }
        }
    }

    /// The thread that reads the file on request; it ends when the counter is dropped (or,
    /// stuck in a read that never returns, with the process).
    fn start_reader(&self) -> Result<Reader, String> {
        let (ask, requests) = std::sync::mpsc::channel::<()>();
        let (answer, answers) = std::sync::mpsc::channel();
        let (path, read) = (self.path.clone(), self.read);
        std::thread::Builder::new()
            .name("ops-count".into())
            .spawn(move || {
                while requests.recv().is_ok() {
                    if answer.send(read(&path)).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| format!("{}: cannot start its reading thread: {e}", self.path.display()))?;
        Ok(Reader {
            ask,
            answers,
            waiting: false,
        })
    }

    /// The population tag of the windows measured since the last restart of the count.
    pub fn population(&self) -> u64 {
        OPS_POPULATION ^ self.restarts.rotate_left(32)
    }

    /// `outcome` judged by `ops` operations instead (`None`: not measured), one sum: the
    /// per-process split and the CPU meter's resolution go, a count's resolution is one. A
    /// window with no operation in which the workload touched no page measured nothing (it
    /// paused), as with the other measures: not a collapse of the value in force.
    pub fn judge(&self, outcome: &mut Outcome, ops: Option<f64>) {
        let paused = ops == Some(0.0) && outcome.pages_accessed == 0 && outcome.pages_added == 0;
        outcome.ops = ops.filter(|_| !paused);
        outcome.busy_s = None;
        outcome.by_process.clear();
        outcome.resolution = 1.0;
        outcome.population = Some(self.population());
    }
}

/// The count in `path` ([`OpsCounter`]).
fn read_count(path: &Path) -> Result<f64, String> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    let err = |what: &str, e: std::io::Error| format!("{}: {what}: {e}", path.display());
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| err("cannot open", e))?;
    let meta = f.metadata().map_err(|e| err("cannot read", e))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    const TAIL: u64 = 4096;
    f.seek(SeekFrom::Start(meta.len().saturating_sub(TAIL)))
        .map_err(|e| err("cannot read", e))?;
    let mut buf = Vec::with_capacity(TAIL as usize);
    f.take(TAIL).read_to_end(&mut buf).map_err(|e| err("cannot read", e))?;
    parse_count(&buf).ok_or_else(|| {
        format!(
            "{}: no count (its last line ending in a newline must be one number)",
            path.display()
        )
    })
}

/// The number on the last newline-terminated line of `tail` that is not blank (or on its only
/// line). Only that line is decoded: a stray byte elsewhere in the tail does not spoil it.
fn parse_count(tail: &[u8]) -> Option<f64> {
    let complete = match tail.iter().rposition(|&b| b == b'\n') {
        Some(end) => &tail[..end],
        // One line without its newline: the whole file, if nothing was cut before it.
        None if tail.len() < 4096 => tail,
        None => return None,
    };
    let line = complete
        .split(|&b| b == b'\n')
        .rev()
        .find(|l| !l.trim_ascii().is_empty())?;
    let v: f64 = std::str::from_utf8(line.trim_ascii()).ok()?.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v)
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
/// seconds by pid, their fingerprint and its resolution (`None`: none watched) and the device at
/// `read_ahead_kb`; judged by the pages read where `reads` ([`by_reads`]), else by user time.
/// `pages_by_process`: the window's [`Counters::pages_read`] by pid (scaled alike). Demand
/// misses are the kernel's synchronous readahead calls.
pub fn outcome(
    counted: &Counters,
    seconds: f64,
    cpu: Option<CpuWindow>,
    read_ahead_kb: u64,
    reads: bool,
    pages_by_process: &BTreeMap<u32, u64>,
) -> Outcome {
    if let (true, Some(alive)) = (reads, &cpu) {
        // A window with no read returned measured nothing (a pause), unless the device was
        // busy for the workload meanwhile: then it is a stall, progress zero.
        let busy = counted.pages_read > 0 || counted.pages_added > 0 || counted.pages_accessed > 0;
        // Every watched process alive at the window's end, with the pages its reads returned
        // (none: zero, a process that stalled). The population stays the fixed tag: a process
        // that lived for part of the blocks compared is left out of the comparison by
        // process ([`Outcome::relative_progress`]), not made a reason to measure afresh.
        let by_process = alive
            .by_process
            .keys()
            .map(|&pid| (pid, pages_by_process.get(&pid).copied().unwrap_or(0) as f64))
            .collect();
        return Outcome {
            by_process,
            own_units: false,
            resolution: 1.0,
            population: Some(READS_POPULATION),
            seconds,
            ops: busy.then_some(counted.pages_read as f64),
            busy_s: None,
            pages_accessed: counted.pages_accessed,
            pages_added: counted.pages_added,
            misses: counted.ra_sync,
            marker_hits: counted.ra_async,
            faults: counted.faults,
            pages_used: Some(counted.pages_read),
            read_ahead_kb: Some(read_ahead_kb),
        };
    }
    let busy_s = cpu.as_ref().map(|c| c.by_process.values().sum());
    let population = cpu.as_ref().map(|c| c.population);
    let resolution = cpu.as_ref().map_or(0.01, |c| c.resolution);
    Outcome {
        by_process: cpu.map(|c| c.by_process).unwrap_or_default(),
        own_units: false,
        resolution,
        population,
        seconds,
        ops: None,
        busy_s,
        pages_accessed: counted.pages_accessed,
        pages_added: counted.pages_added,
        misses: counted.ra_sync,
        marker_hits: counted.ra_async,
        faults: counted.faults,
        // Faults and `pages_accessed` (a large read's pages more than once) are no count of use.
        pages_used: None,
        read_ahead_kb: Some(read_ahead_kb),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tgid: u32, tid: u32, runtime_s: f64, user_ticks: u64, system_ticks: u64) -> TaskTimes {
        // 250 Hz: a tick is 4 ms.
        TaskTimes {
            tgid,
            tid,
            runtime_ns: (runtime_s * 1e9) as u64,
            user_tick_ns: user_ticks * 4_000_000,
            system_tick_ns: system_ticks * 4_000_000,
            ..TaskTimes::default()
        }
    }

    /// `threads` as read at second `at` of a 250 Hz kernel.
    fn read_at(at: u64, threads: &[TaskTimes]) -> Vec<TaskTimes> {
        let mut v = threads.to_vec();
        for t in &mut v {
            (t.jiffies, t.read_ns) = (4_294_667_296 + 250 * at, at * 1_000_000_000);
        }
        v
    }

    #[test]
    fn the_reading_after_a_failed_one_re_bases_the_meter_and_measures_nothing() {
        let mut m = CpuMeter::default();
        let at = |s: u64| read_at(s, &[thread(7, 7, s as f64 * 0.1, 25 * s, 0)]);
        assert!(m.measured(&[7], &at(0)).is_some());
        assert!(m
            .measured(&[7], &at(1))
            .is_some_and(|w| (w.by_process[&7] - 0.1).abs() < 1e-9));
        // Readings 2 to 10 fail; the 11th spans them, and is not one window's time.
        m.lost();
        assert_eq!(m.measured(&[7], &at(11)), None);
        let w = m.measured(&[7], &at(12)).expect("measured again");
        assert!((w.by_process[&7] - 0.1).abs() < 1e-9, "{:?}", w.by_process);
    }

    #[test]
    fn a_window_is_its_run_time_split_by_its_own_ticks() {
        let mut m = CpuMeter::default();
        // A process of two threads, and one of a single thread; an unwatched one.
        let before = [
            thread(7, 7, 10.0, 2000, 500),
            thread(7, 8, 1.0, 0, 250),
            thread(9, 9, 5.0, 1000, 250),
            thread(3, 3, 1.0, 250, 0),
        ];
        let first = m.take(&[7, 9], &read_at(0, &before));
        assert_eq!(
            first.by_process,
            BTreeMap::from([(7, 0.0), (9, 0.0)]),
            "first seen: from now"
        );
        assert_eq!(first.resolution, 0.01, "nothing measured: a tick of 100 Hz until timed");
        // One second later: thread 7 ran 0.25 s, user at 50 ticks of 60; thread 8, 0.05 s,
        // all in the kernel (it copies); process 9 ran 0.4 s with no tick at all (short
        // bursts between ticks): split as its past was, 80% user. A thread new to process 7
        // counts from now.
        let after = [
            thread(7, 7, 10.25, 2050, 510),
            thread(7, 8, 1.05, 0, 262),
            thread(7, 10, 0.3, 60, 15),
            thread(9, 9, 5.4, 1000, 250),
            thread(3, 3, 2.0, 500, 0),
        ];
        let w = m.take(&[7, 9], &read_at(1, &after));
        assert_eq!(m.hz, Some(250.0), "the tick rate from jiffies over the clock");
        // Process 7: 0.3 s ran, 50 user and 22 kernel ticks; its share before, of ticks in
        // all, (2050 + 60) / (2050 + 60 + 510 + 262 + 15).
        let prior7 = 2110.0 / 2897.0;
        let f7 = (50.0 + prior7) / 73.0;
        assert!((w.by_process[&7] - 0.3 * f7).abs() < 1e-9, "{:?}", w.by_process);
        assert!(
            (w.by_process[&9] - 0.4 * (0.8 / 1.0)).abs() < 1e-9,
            "{:?}",
            w.by_process
        );
        assert!(!w.by_process.contains_key(&3), "not watched");
        // The resolution: the coarsest process's user seconds per effective sample, here
        // process 9's, with no tick (one sample's weight, (1 - f) floored at half a sample).
        let n9 = 0.8 / 0.5;
        assert!((w.resolution - 0.32 / n9).abs() < 1e-12, "{}", w.resolution);
        // The population: the same set, the same fingerprint; one gone, another.
        let again = m.take(&[7, 9], &read_at(2, &after));
        assert_eq!(again.population, w.population);
        assert_eq!(again.by_process, BTreeMap::from([(7, 0.0), (9, 0.0)]));
        let gone = m.take(&[7, 9], &read_at(3, &after[..3]));
        assert_ne!(gone.population, w.population, "process 9 left");
        // A thread id used again by a new thread (its times start over): counted from now,
        // not as a difference gone negative.
        let reused = m.take(&[7], &read_at(4, &[thread(7, 8, 0.01, 0, 1), after[0], after[2]]));
        assert_eq!(reused.by_process, BTreeMap::from([(7, 0.0)]));
        // Without any reading: nothing measured, at the tick's resolution.
        let none = CpuMeter::default().take(&[7], &[]);
        assert!(none.by_process.is_empty());
        assert_eq!(none.resolution, 0.01);
    }

    #[test]
    fn a_light_process_beside_a_busy_one_sets_the_resolution() {
        // A CPU-bound process (one tick in a hundred in the kernel) and a light reader (a
        // third of its 20 ticks in user mode): the light one's estimate is the coarser, and
        // the resolution must be its, not the pooled one the busy process would make.
        let mut m = CpuMeter::default();
        m.take(
            &[1, 2],
            &read_at(0, &[thread(1, 1, 10.0, 990, 10), thread(2, 2, 1.0, 30, 70)]),
        );
        let w = m.take(
            &[1, 2],
            &read_at(1, &[thread(1, 1, 11.0, 1238, 12), thread(2, 2, 1.08, 36, 84)]),
        );
        let f2 = (6.0 + 0.3) / 21.0;
        let light = 0.08 * f2 / (21.0 * f2 / (1.0 - f2));
        assert!((w.resolution - light).abs() < 1e-12, "{} against {light}", w.resolution);
        // Its claimed error: one over the square root of its effective samples (nine), 33%.
        let claimed = 1.0 / (w.by_process[&2] / w.resolution).sqrt();
        assert!((0.3..0.36).contains(&claimed), "{claimed}");
    }

    #[test]
    fn the_resolution_is_the_error_of_the_split() {
        // A thread running 40% of a window in short bursts, 70% of that in user mode, sampled
        // by 250 ticks a second: the window's user time estimated over many windows spreads
        // as a count of user / resolution samples does (the guardrail's chance bars rest on
        // it), where /proc's ticks of user time spread as their own count.
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut uniform = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        let (share, busy, windows) = (0.7, 0.4, 2000);
        let mut m = CpuMeter::default();
        let mut t = thread(5, 5, 100.0, 17_500, 7_500);
        m.take(&[5], &read_at(0, &[t]));
        let (mut est, mut units, mut ticks) = (Vec::new(), Vec::new(), Vec::new());
        for i in 1..=windows {
            let (mut u, mut s) = (0, 0);
            for _ in 0..250 {
                if uniform() < busy {
                    if uniform() < share {
                        u += 1;
                    } else {
                        s += 1;
                    }
                }
            }
            t.runtime_ns += (busy * 1e9) as u64;
            t.user_tick_ns += u * 4_000_000;
            t.system_tick_ns += s * 4_000_000;
            let w = m.take(&[5], &read_at(i, &[t]));
            est.push(w.by_process[&5]);
            units.push(w.by_process[&5] / w.resolution);
            ticks.push(u as f64 * 0.004);
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let sd = |v: &[f64]| {
            let m = mean(v);
            (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
        };
        let truth = busy * share;
        assert!(
            (mean(&est) - truth).abs() < 0.01 * truth,
            "mean {} against {truth}",
            mean(&est)
        );
        // The relative spread the resolution claims, and the one measured.
        let claimed = 1.0 / mean(&units).sqrt();
        let measured = sd(&est) / mean(&est);
        assert!(
            (measured / claimed - 1.0).abs() < 0.2,
            "measured {measured:.4} against claimed {claimed:.4}"
        );
        // Finer than the user ticks alone (the run time is exact; here 0.065 against 0.10),
        // let alone /proc's ticks of 10 ms, which the guardrail took for a count (a spread
        // of one over the square root of 28 a window here: 0.19).
        let by_ticks = sd(&ticks) / mean(&ticks);
        assert!(measured < by_ticks / 1.3, "{measured:.4} against ticks' {by_ticks:.4}");
    }

    #[test]
    fn auto_progress_judges_by_pages_read_where_reads_outweigh_faults() {
        let cpu = |pids: &[u32]| {
            Some(CpuWindow {
                by_process: pids.iter().map(|&p| (p, 0.02)).collect::<BTreeMap<_, _>>(),
                resolution: 0.01,
                population: pids[0] as u64,
            })
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
        for p in [Progress::Cpu, Progress::Auto, Progress::Ops("/run/app/ops".into())] {
            assert_eq!(Progress::parse(&p.name()), Ok(p));
        }
        assert!(Progress::parse("pages")
            .unwrap_err()
            .contains("not cpu, auto or ops:PATH"));
        assert!(Progress::parse("ops:").unwrap_err().contains("needs the path"));
    }

    #[test]
    fn a_count_is_the_number_on_the_last_whole_line() {
        assert_eq!(parse_count(b"12\n"), Some(12.0));
        assert_eq!(parse_count(b"  12.5  \n"), Some(12.5));
        assert_eq!(parse_count(b"7"), Some(7.0), "one line may leave out its newline");
        // Appended reports: the last whole line, not one still being written.
        assert_eq!(parse_count(b"10\n20\n3"), Some(20.0));
        assert_eq!(parse_count(b"10\n20\n"), Some(20.0));
        assert_eq!(parse_count(b"10\n20\n\n  \n"), Some(20.0), "blank lines after it");
        for bad in [&b""[..], b"\n", b"ops 12\n", b"-3\n", b"inf\n", b"NaN\n", b"\xff\n"] {
            assert_eq!(parse_count(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        // Only the last line is decoded: a stray byte before it does not spoil it.
        assert_eq!(parse_count(b"\xff\xfe junk\n12\n"), Some(12.0));
        // A tail of 4 KiB cut mid-line with no newline after: no whole line in it.
        assert_eq!(parse_count(&[b'1'; 4096]), None);
    }

    /// A wait no read of a local file reaches, however loaded the machine.
    const LONG: Duration = Duration::from_secs(10);

    #[test]
    fn an_applications_count_measures_its_rise_and_a_restart_starts_a_new_population() {
        let dir = std::env::temp_dir().join(format!("iolearn-ops-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ops");
        let mut c = OpsCounter::new(&path);
        let failed = |r: Reading| match r {
            Reading::Failed { error, .. } => error,
            other => panic!("a reading that should have failed: {other:?}"),
        };
        let Reading::Failed { error, first: true } = c.take(LONG) else {
            panic!("a missing file is a failure, the first")
        };
        assert!(error.contains("ops: cannot open"), "{error}");
        assert!(
            matches!(c.take(LONG), Reading::Failed { first: false, .. }),
            "a run of failures is logged once"
        );
        let write = |text: &str| {
            let tmp = dir.join("ops.tmp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        };
        write("100\n");
        assert_eq!(
            c.take(LONG),
            Reading::Start,
            "the first count is where measuring starts"
        );
        write("350\n");
        assert_eq!(c.take(LONG), Reading::Rise(250.0));
        assert_eq!(c.take(LONG).ops(), Some(0.0));
        let before = c.population();
        // A count that is not one measures nothing, nor does the next reading: the rise over
        // two windows is no one window's progress.
        write("350 ops\n");
        assert!(failed(c.take(LONG)).contains("no count"));
        write("400\n");
        assert_eq!(c.take(LONG), Reading::Start);
        write("450\n");
        assert_eq!(c.take(LONG), Reading::Rise(50.0));
        assert_eq!(c.population(), before);
        // The application restarted: nothing measured, and what follows is another population.
        write("30\n");
        assert_eq!(c.take(LONG), Reading::Restart);
        assert_ne!(c.population(), before);
        write("90\n");
        assert_eq!(c.take(LONG), Reading::Rise(60.0));
        // Judged by the count: one sum, a count's resolution, the counter's population.
        let mut o = outcome(&Counters::default(), 2.0, None, 128, false, &BTreeMap::new());
        o.by_process.insert(7, 0.5);
        o.busy_s = Some(0.5);
        c.judge(&mut o, Some(60.0));
        assert_eq!(
            o.progress(),
            Some(30.0),
            "a count is progress even in a window of no page"
        );
        assert!(o.by_process.is_empty() && o.busy_s.is_none());
        assert_eq!((o.resolution, o.population), (1.0, Some(c.population())));
        c.judge(&mut o, None);
        assert_eq!(o.progress(), None);
        // No operation and no page touched: a pause, measured as nothing; no operation while
        // the device read for the workload: a stall, progress zero.
        c.judge(&mut o, Some(0.0));
        assert_eq!(o.progress(), None);
        o.pages_added = 64;
        c.judge(&mut o, Some(0.0));
        assert_eq!(o.progress(), Some(0.0));
        // A file appended to a line per report, past the 4 KiB read: its last line.
        let log = dir.join("ops.log");
        let lines: String = (1..=3000).map(|n| format!("{}\n", n * 7)).collect();
        assert!(lines.len() > 8192);
        std::fs::write(&log, &lines).unwrap();
        let mut appended = OpsCounter::new(&log);
        assert_eq!(appended.take(LONG), Reading::Start);
        std::fs::write(&log, format!("{lines}21007\n")).unwrap();
        assert_eq!(appended.take(LONG), Reading::Rise(7.0));
        // Not followed, not read: a link (to a count or to a device), a FIFO, a directory.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), &path).unwrap();
        std::fs::write(dir.join("elsewhere"), "5000\n").unwrap();
        assert!(failed(c.take(LONG)).contains("cannot open"), "a link is not followed");
        std::fs::remove_file(&path).unwrap();
        let fifo = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(
            failed(c.take(LONG)).contains("not a regular file"),
            "a FIFO neither blocks nor is read"
        );
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(failed(c.take(LONG)).contains("not a regular file"));
        // Measuring resumes a reading after the failures.
        std::fs::remove_dir(&path).unwrap();
        write("100\n");
        assert_eq!(c.take(LONG), Reading::Start);
        write("130\n");
        assert_eq!(c.take(LONG), Reading::Rise(30.0));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The reading test below: reads hang while this is set, then give this count.
    static HUNG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    fn hanging_read(_: &Path) -> Result<f64, String> {
        use std::sync::atomic::Ordering;
        while HUNG.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(COUNT.load(Ordering::SeqCst) as f64)
    }

    #[test]
    fn a_read_that_does_not_return_leaves_windows_unmeasured_and_the_loop_running() {
        use std::sync::atomic::Ordering;
        use std::time::Instant;
        let mut c = OpsCounter::reading_by(Path::new("/hung/ops"), hanging_read);
        COUNT.store(100, Ordering::SeqCst);
        assert_eq!(c.take(LONG), Reading::Start);
        COUNT.store(150, Ordering::SeqCst);
        assert_eq!(c.take(LONG), Reading::Rise(50.0));
        // The filesystem stops answering: the window waits as long as it was told, no longer,
        // and says why.
        HUNG.store(true, Ordering::SeqCst);
        let wait = Duration::from_millis(100);
        let t0 = Instant::now();
        let Reading::Failed { error, first: true } = c.take(wait) else {
            panic!("a read that does not return is a failure")
        };
        let waited = t0.elapsed();
        assert!(error.contains("/hung/ops: no answer within 100 ms"), "{error}");
        assert!(waited >= wait && waited < LONG, "{waited:?}");
        // The next windows do not wait at all while that read is out, however long they may.
        let t0 = Instant::now();
        let Reading::Failed { error, first: false } = c.take(LONG) else {
            panic!("still hung")
        };
        assert!(error.contains("has not returned"), "{error}");
        assert!(t0.elapsed() < LONG / 2, "{:?}", t0.elapsed());
        // It answers again: the late answer (an earlier window's) is dropped, and measuring
        // starts afresh from a new reading.
        COUNT.store(400, Ordering::SeqCst);
        HUNG.store(false, Ordering::SeqCst);
        let deadline = Instant::now() + LONG;
        let first = loop {
            match c.take(LONG) {
                Reading::Failed { error, .. } if error.contains("has not returned") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                other => break other,
            }
        };
        assert_eq!(first, Reading::Start);
        COUNT.store(480, Ordering::SeqCst);
        assert_eq!(c.take(LONG), Reading::Rise(80.0));
    }
}
