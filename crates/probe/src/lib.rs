//! `iolearn-probe`: eBPF probes of the page cache, readahead and the block layer on a stock
//! kernel (CO-RE: compiled once, relocated against `/sys/kernel/btf/vmlinux` at load time).
//!
//! What is observed, from tracepoints (stable names, no kernel patch, no module), each program
//! attached to the raw tracepoint (`tp_btf`: it reads the objects the tracepoint is called
//! with, without the classic perf record's copy, and needs no tracefs):
//! - page-cache insertions, `filemap:mm_filemap_add_to_page_cache` (one folio, `1 << order`
//!   pages);
//! - page accesses that reach the kernel: `filemap:mm_filemap_get_pages` for `read()` (the
//!   range looked up) and `filemap:mm_filemap_fault` for faults on file mappings. These are
//!   KML's "read of a cached page" hook without a kernel patch: loads from pages already mapped
//!   never reach the kernel (as in KML); a lookup that misses is counted here and then shows
//!   up as insertions. Tracepoints rather than fentry: a tracepoint's arguments change far less
//!   often than one function's signature, and CO-RE follows the fields they point to;
//! - readahead decisions, `readahead:page_cache_{sync,async}_ra` (counts and pages);
//! - block requests, `block:block_rq_{issue,complete}` (only with
//!   [`ProbeConfig::block_requests`]: the tuner does not need them): latency histogram and
//!   queue depth.
//!
//! Filtering happens in the kernel (device, and optionally a set of processes). KML's
//! per-window sums (count, sum and sum of squares of page indices, range, sum of absolute
//! successive differences) are kept per file and per device in per-CPU BPF maps, double
//! buffered so a window is read without losing events; every event can also be streamed
//! through a ring buffer. Every event that cannot be recorded is counted ([`Counters`]).
#![deny(missing_docs)]

pub mod freezer;
pub mod sched;
mod sys;
pub mod syscalls;

pub use sys::{active_scheduler, kernel_dev, DeviceId};

use std::fmt;
use std::path::PathBuf;
#[cfg(not(iolearn_bpf))]
use std::time::Duration;

/// Buckets of the block latency histogram: bucket `b` holds latencies in
/// `[2^(b-1), 2^b)` microseconds (bucket 0: under 1 us).
pub const LATENCY_BUCKETS: usize = 24;
/// Files tracked per window (more are counted as lost).
pub const MAX_FILES: usize = 16384;

/// Why a probe could not start (each says what to do about it).
#[derive(Debug)]
pub enum ProbeError {
    /// eBPF needs root (or CAP_BPF + CAP_PERFMON).
    NotRoot,
    /// The kernel exposes no BTF, which CO-RE programs need.
    NoBtf(PathBuf),
    /// This build has no eBPF programs (clang was missing when it was compiled).
    NotBuilt,
    /// The kernel refused to load or attach a program.
    Denied(String),
    /// The device to filter on was not found.
    Device(String),
    /// Reading the maps failed.
    Map(String),
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::NotRoot => write!(f, "eBPF probes need root (or CAP_BPF and CAP_PERFMON): run as root"),
            ProbeError::NoBtf(p) => write!(
                f,
                "{} not found: the kernel has no BTF type information (CONFIG_DEBUG_INFO_BTF=y is needed)",
                p.display()
            ),
            ProbeError::NotBuilt => write!(
                f,
                "this iolearn was built without its eBPF programs (clang was not found at build time): \
                 install clang and rebuild"
            ),
            ProbeError::Denied(e) => write!(f, "the kernel refused the eBPF programs: {e}"),
            ProbeError::Device(e) => write!(f, "device: {e}"),
            ProbeError::Map(e) => write!(f, "reading the probe's maps: {e}"),
        }
    }
}

impl std::error::Error for ProbeError {}

/// What to observe.
#[derive(Debug, Clone, Default)]
pub struct ProbeConfig {
    /// Only this device (a file system's device); `None`: every device.
    pub device: Option<DeviceId>,
    /// Only these processes (thread group ids); empty: every process. More can be added while
    /// running ([`Probe::watch_pid`]).
    pub pids: Vec<u32>,
    /// Only watch the processes given (even if `pids` is empty at start).
    pub filter_pids: bool,
    /// Also stream every page event through the ring buffer ([`Probe::drain_events`]).
    pub raw_events: bool,
    /// Also time block requests ([`Window::latency_histogram`], the `rq_*` counters), at a
    /// cost on every request; off, those stay zero.
    pub block_requests: bool,
    /// Also count the pages reads returned ([`Counters::pages_read`]), at a cost on every
    /// system call while the page-cache programs are attached (a program at each call's
    /// return); off, that stays zero.
    pub count_reads: bool,
}

/// KML's sums over one stream of page indices in one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageSums {
    /// Pages.
    pub n: u64,
    /// Sum of page indices.
    pub sum: u64,
    /// Sum of squared page indices.
    pub sum_sq: u64,
    /// Smallest index.
    pub min: u64,
    /// Largest index.
    pub max: u64,
    /// Sum of |index - previous index| over successive pages (per CPU: a stream's events on
    /// different CPUs are two sequences, joined here).
    pub sum_abs_delta: u64,
    /// Last index seen.
    pub last: u64,
    /// Last process seen.
    pub tgid: u32,
    /// First index seen, and when (ns, monotonic): per-CPU copies are joined by time.
    pub first: u64,
    /// See `first`.
    pub first_ns: u64,
    /// When the last index was seen.
    pub last_ns: u64,
    /// The last jump (a delta other than 0 and +1).
    pub prev_jump: i64,
    /// Jumps seen.
    pub jumps: u64,
    /// Jumps after the first, and how many of them equalled the jump before.
    pub jump_pairs: u64,
    /// See `jump_pairs`.
    pub jump_same: u64,
}

impl PageSums {
    /// Fold another CPU's sums into these.
    pub fn merge(&mut self, o: &PageSums) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *o;
            return;
        }
        self.n += o.n;
        self.sum += o.sum;
        self.sum_sq += o.sum_sq;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.sum_abs_delta += o.sum_abs_delta;
        // The stream's first and last pages are the earliest and latest of any CPU's.
        if o.first_ns < self.first_ns {
            (self.first, self.first_ns) = (o.first, o.first_ns);
        }
        if o.last_ns >= self.last_ns {
            (self.last, self.last_ns, self.tgid, self.prev_jump) = (o.last, o.last_ns, o.tgid, o.prev_jump);
        }
        self.jumps += o.jumps;
        self.jump_pairs += o.jump_pairs;
        self.jump_same += o.jump_same;
    }
}

/// One file's sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSums {
    /// Kernel device number of its file system.
    pub dev: u32,
    /// Inode.
    pub ino: u64,
    /// The sums.
    pub sums: PageSums,
}

/// Counters since the probe started (every event that could not be recorded included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Pages inserted into the page cache (watched device and processes).
    pub pages_added: u64,
    /// Page accesses that reached the kernel.
    pub pages_accessed: u64,
    /// Events of other devices (filtered out).
    pub other_device: u64,
    /// Events of other processes (filtered out).
    pub other_process: u64,
    /// Pages beyond KML's index limit (dropped, as KML drops them).
    pub beyond_max_index: u64,
    /// Raw events lost because the ring buffer was full.
    pub lost_ring_full: u64,
    /// Pages lost because the per-window file table was full.
    pub lost_file_table_full: u64,
    /// Block requests not timed because the in-flight table was full.
    pub lost_rq_table_full: u64,
    /// Synchronous readahead decisions.
    pub ra_sync: u64,
    /// Asynchronous readahead decisions.
    pub ra_async: u64,
    /// Pages those decisions asked for.
    pub ra_pages: u64,
    /// Block requests issued.
    pub rq_issued: u64,
    /// Block requests completed (and timed).
    pub rq_completed: u64,
    /// Bytes of the requests issued.
    pub rq_bytes: u64,
    /// Sum of the completed requests' latencies.
    pub rq_latency_ns: u64,
    /// Sum over issued requests of the queue depth they found (mean depth = this / issued).
    pub rq_depth_sum: u64,
    /// Pages the watched processes' reads of the device's regular files returned, from the
    /// bytes each call returned (a partial page as one): `read`, `pread64`, `readv`,
    /// `preadv(2)`, and `sendfile`, `splice` and `copy_file_range` from such a file; not mapped
    /// pages. What a read-based application consumed (`pages_accessed` counts a large read's
    /// pages more than once). Only with [`ProbeConfig::count_reads`] (the probe's
    /// `on_sys_exit`).
    pub pages_read: u64,
    /// Page faults on the watched files (mapped reads; pages mapped around a fault are not
    /// seen).
    pub faults: u64,
}

impl Counters {
    fn from_array(v: &[u64; N_COUNTERS]) -> Self {
        Counters {
            pages_added: v[0],
            pages_accessed: v[1],
            other_device: v[2],
            other_process: v[3],
            beyond_max_index: v[4],
            lost_ring_full: v[5],
            lost_file_table_full: v[6],
            lost_rq_table_full: v[7],
            ra_sync: v[8],
            ra_async: v[9],
            ra_pages: v[10],
            rq_issued: v[11],
            rq_completed: v[12],
            rq_bytes: v[13],
            rq_latency_ns: v[14],
            rq_depth_sum: v[15],
            pages_read: v[16],
            faults: v[17],
        }
    }

    /// Every event lost so far (ring buffer, file table, request table).
    pub fn lost(&self) -> u64 {
        self.lost_ring_full + self.lost_file_table_full + self.lost_rq_table_full
    }

    fn to_array(self) -> [u64; N_COUNTERS] {
        [
            self.pages_added,
            self.pages_accessed,
            self.other_device,
            self.other_process,
            self.beyond_max_index,
            self.lost_ring_full,
            self.lost_file_table_full,
            self.lost_rq_table_full,
            self.ra_sync,
            self.ra_async,
            self.ra_pages,
            self.rq_issued,
            self.rq_completed,
            self.rq_bytes,
            self.rq_latency_ns,
            self.rq_depth_sum,
            self.pages_read,
            self.faults,
        ]
    }

    /// What was counted between `before` and these (a counter that went back counts 0).
    pub fn since(&self, before: &Counters) -> Counters {
        let (a, b) = (self.to_array(), before.to_array());
        Counters::from_array(&std::array::from_fn(|i| a[i].saturating_sub(b[i])))
    }

    /// Counts of part of a window scaled to the whole window by `k` (the window's length over
    /// the time watched); `k` at or below 1 changes nothing.
    pub fn scaled(&self, k: f64) -> Counters {
        let a = self.to_array();
        Counters::from_array(&std::array::from_fn(|i| scale_count(a[i], k)))
    }
}

/// A count of part of a window scaled to the whole window by `k` ([`Counters::scaled`]): `k`
/// at or below 1, or NaN, changes nothing.
pub fn scale_count(n: u64, k: f64) -> u64 {
    if k.is_nan() || k <= 1.0 {
        n
    } else {
        (n as f64 * k).round() as u64
    }
}

const N_COUNTERS: usize = 18;

/// One window's observations.
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// The device's stream.
    pub device: PageSums,
    /// Each file's stream: its processes' streams merged, the process that read it most as
    /// `sums.tgid`.
    pub files: Vec<FileSums>,
    /// Each (file, process) stream, the process in `sums.tgid`: what one process's open file
    /// descriptions of the file did (Linux keeps readahead state per description).
    pub descriptions: Vec<FileSums>,
    /// Counters since the start.
    pub counters: Counters,
    /// [`Counters::pages_read`] by process (tgid), since the start; only with
    /// [`ProbeConfig::count_reads`].
    pub pages_read_by_process: std::collections::BTreeMap<u32, u64>,
    /// Block latency histogram since the start ([`LATENCY_BUCKETS`] log2 buckets of us).
    pub latency_histogram: [u64; LATENCY_BUCKETS],
}

/// Kernel CPU time of one eBPF program (with [`Probe::enable_stats`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramStats {
    /// Program name (`on_add`, ...).
    pub name: String,
    /// Times it ran.
    pub runs: u64,
    /// Total run time, ns.
    pub run_time_ns: u64,
}

/// What a page event was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Pages inserted into the page cache.
    Added,
    /// Pages looked up or faulted.
    Accessed,
}

/// One event from the ring buffer: `pages` pages from `index` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEvent {
    /// `CLOCK_MONOTONIC` (`bpf_ktime_get_ns`).
    pub time_ns: u64,
    /// Inode.
    pub ino: u64,
    /// First page index.
    pub index: u64,
    /// Pages.
    pub pages: u64,
    /// Kernel device number.
    pub dev: u32,
    /// Process.
    pub tgid: u32,
    /// What happened.
    pub kind: EventKind,
    /// The thread.
    pub tid: u32,
}

impl RawEvent {
    /// Decode the BPF program's `struct page_event` (48 bytes, native byte order).
    pub fn decode(b: &[u8]) -> Option<RawEvent> {
        if b.len() < 48 {
            return None;
        }
        let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap());
        let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap());
        let kind = match b[40] {
            1 => EventKind::Added,
            2 => EventKind::Accessed,
            _ => return None,
        };
        Some(RawEvent {
            time_ns: u64_at(0),
            ino: u64_at(8),
            index: u64_at(16),
            pages: u64_at(24),
            dev: u32_at(32),
            tgid: u32_at(36),
            kind,
            tid: u32_at(44),
        })
    }
}

/// `FMODE_RANDOM` in `include/linux/fs.h` (bit 12 since Linux 2.6): set by
/// `POSIX_FADV_RANDOM`, cleared by `POSIX_FADV_NORMAL` and `POSIX_FADV_SEQUENTIAL`.
pub const FMODE_RANDOM: u32 = 1 << 12;

/// One open file description of a watched process on the device, as the kernel holds it (the
/// open-file iterator): what `posix_fadvise` left in it, which nothing else shows user space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFileMode {
    /// Process.
    pub tgid: u32,
    /// Its descriptor.
    pub fd: u32,
    /// Inode.
    pub ino: u64,
    /// Kernel device number.
    pub dev: u32,
    /// `f_mode`.
    pub f_mode: u32,
    /// `f_ra.ra_pages`: the file's readahead, pages.
    pub ra_pages: u32,
    /// `f_ra.mmap_miss`: net page-cache misses of its mappings (above 100, no read-around).
    pub mmap_miss: u32,
}

impl OpenFileMode {
    /// Decode the iterator's `struct open_file_mode` (32 bytes, native byte order).
    pub fn decode(b: &[u8]) -> Option<OpenFileMode> {
        if b.len() < 32 {
            return None;
        }
        let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap());
        Some(OpenFileMode {
            ino: u64::from_ne_bytes(b[0..8].try_into().unwrap()),
            tgid: u32_at(8),
            fd: u32_at(12),
            dev: u32_at(16),
            f_mode: u32_at(20),
            ra_pages: u32_at(24),
            mmap_miss: u32_at(28),
        })
    }

    /// Whether the application asked for random access (`POSIX_FADV_RANDOM`).
    pub fn random(&self) -> bool {
        self.f_mode & FMODE_RANDOM != 0
    }
}

/// One thread of a watched process as the task iterator reads it ([`Probe::task_times`]):
/// its CPU time as the scheduler keeps it, and the scheduler tick's samples of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskTimes {
    /// Process.
    pub tgid: u32,
    /// Thread.
    pub tid: u32,
    /// Time it ran (`se.sum_exec_runtime`), ns: exact as of its last scheduler update (its
    /// last tick or switch).
    pub runtime_ns: u64,
    /// Ticks it was running at in user mode, as ns (raw `utime`: a tick's length each).
    pub user_tick_ns: u64,
    /// Ticks it was running at in the kernel, as ns (raw `stime`).
    pub system_tick_ns: u64,
    /// The kernel's jiffies when it was read.
    pub jiffies: u64,
    /// The kernel's monotonic clock when it was read, ns.
    pub read_ns: u64,
}

impl TaskTimes {
    /// Decode the iterator's `struct task_times` (48 bytes, native byte order).
    pub fn decode(b: &[u8]) -> Option<TaskTimes> {
        if b.len() < TASK_TIMES_SIZE {
            return None;
        }
        let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap());
        let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap());
        Some(TaskTimes {
            runtime_ns: u64_at(0),
            user_tick_ns: u64_at(8),
            system_tick_ns: u64_at(16),
            jiffies: u64_at(24),
            read_ns: u64_at(32),
            tgid: u32_at(40),
            tid: u32_at(44),
        })
    }
}

/// The size of the iterator's `struct task_times`.
pub const TASK_TIMES_SIZE: usize = 48;

/// The kernel's tick rate (`CONFIG_HZ`) from two readings of the task iterator: jiffies
/// elapsed over the clock's seconds, rounded to the rates Linux is built with (100, 250, 300
/// or 1000). `None` until the readings are a tenth of a second apart.
pub fn tick_rate(before: &TaskTimes, now: &TaskTimes) -> Option<f64> {
    let seconds = now.read_ns.checked_sub(before.read_ns)? as f64 / 1e9;
    let ticks = now.jiffies.checked_sub(before.jiffies)? as f64;
    if seconds < 0.1 {
        return None;
    }
    let hz = ticks / seconds;
    [100.0, 250.0, 300.0, 1000.0]
        .into_iter()
        .min_by(|a: &f64, b: &f64| (a - hz).abs().total_cmp(&(b - hz).abs()))
}

#[cfg(iolearn_bpf)]
mod live;
#[cfg(iolearn_bpf)]
pub use live::Probe;

/// Stand-in when the eBPF programs were not built: starting explains why.
#[cfg(not(iolearn_bpf))]
pub struct Probe(());

#[cfg(not(iolearn_bpf))]
impl Probe {
    /// Always [`ProbeError::NotBuilt`].
    pub fn start(_: &ProbeConfig) -> Result<Probe, ProbeError> {
        Err(ProbeError::NotBuilt)
    }
    /// Unreachable without a probe.
    pub fn watch_pid(&mut self, _: u32) -> Result<(), ProbeError> {
        Err(ProbeError::NotBuilt)
    }
    /// Unreachable without a probe.
    pub fn unwatch_pid(&mut self, _: u32) -> Result<(), ProbeError> {
        Err(ProbeError::NotBuilt)
    }
    /// Unreachable without a probe.
    pub fn watches(&self, _: u32) -> Result<bool, ProbeError> {
        Err(ProbeError::NotBuilt)
    }
    /// Unreachable without a probe.
    pub fn window(&mut self) -> Result<Window, ProbeError> {
        Err(ProbeError::NotBuilt)
    }
    /// Unreachable without a probe.
    pub fn drain_events(&mut self, _: Duration) -> Result<Vec<RawEvent>, ProbeError> {
        Err(ProbeError::NotBuilt)
    }
    /// Unreachable without a probe.
    pub fn observe_page_cache(&mut self, _: bool) -> Result<(), ProbeError> {
        Err(ProbeError::NotBuilt)
    }
    /// Unreachable without a probe.
    pub fn observing_page_cache(&self) -> bool {
        false
    }
    /// Unreachable without a probe.
    pub fn enable_stats(&mut self) -> Result<(), ProbeError> {
        Err(ProbeError::NotBuilt)
    }
    /// Unreachable without a probe.
    pub fn program_stats(&self) -> Vec<ProgramStats> {
        Vec::new()
    }
    /// Unreachable without a probe.
    pub fn open_files(&mut self) -> Result<Vec<OpenFileMode>, ProbeError> {
        Err(ProbeError::NotBuilt)
    }
    /// Unreachable without a probe.
    pub fn task_times(&mut self) -> Result<Vec<TaskTimes>, ProbeError> {
        Err(ProbeError::NotBuilt)
    }
}

/// Whether this process can load eBPF programs here, and if not, why (for tests that skip
/// with a reason).
pub fn availability() -> Result<(), ProbeError> {
    if !cfg!(iolearn_bpf) {
        return Err(ProbeError::NotBuilt);
    }
    sys::check_root_and_btf()
}

/// Latency percentile (0..1) from a histogram: the upper bound of the bucket, in us.
pub fn histogram_percentile_us(h: &[u64; LATENCY_BUCKETS], q: f64) -> Option<u64> {
    let total: u64 = h.iter().sum();
    if total == 0 {
        return None;
    }
    let target = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (b, &c) in h.iter().enumerate() {
        seen += c;
        if seen >= target {
            return Some(1u64 << b);
        }
    }
    Some(1 << (LATENCY_BUCKETS - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tick_rate_is_jiffies_over_the_clock() {
        let at = |jiffies, read_ns| TaskTimes {
            jiffies,
            read_ns,
            ..Default::default()
        };
        let t0 = at(1_000, 5_000_000_000);
        // 251 jiffies in 1.003 s: 250 Hz; 30 in 0.1 s: 300; 1,001 in a second: 1000.
        assert_eq!(tick_rate(&t0, &at(1_251, 6_003_000_000)), Some(250.0));
        assert_eq!(tick_rate(&t0, &at(1_030, 5_100_000_000)), Some(300.0));
        assert_eq!(tick_rate(&t0, &at(2_001, 6_000_000_000)), Some(1000.0));
        // Too close, or gone back: no rate.
        assert_eq!(tick_rate(&t0, &at(1_010, 5_050_000_000)), None);
        assert_eq!(tick_rate(&t0, &at(900, 6_000_000_000)), None);
        assert_eq!(tick_rate(&t0, &at(1_250, 4_000_000_000)), None);
    }

    #[test]
    fn a_windows_counts_are_the_difference_and_scale_to_the_whole_window() {
        let before = Counters {
            pages_accessed: 1_000,
            pages_added: 10,
            ra_sync: 3,
            ..Default::default()
        };
        let after = Counters {
            pages_accessed: 1_500,
            pages_added: 12,
            ra_sync: 3,
            rq_issued: 7,
            ..Default::default()
        };
        let d = after.since(&before);
        assert_eq!(
            (d.pages_accessed, d.pages_added, d.ra_sync, d.rq_issued),
            (500, 2, 0, 7)
        );
        // A counter that went back (a probe restarted) counts nothing, not 2^64.
        assert_eq!(before.since(&after).pages_accessed, 0);
        // A twentieth of a window watched: twenty times the counts.
        let s = d.scaled(20.0);
        assert_eq!((s.pages_accessed, s.pages_added, s.rq_issued), (10_000, 40, 140));
        for k in [1.0, 0.5, f64::NAN] {
            assert_eq!(d.scaled(k), d, "{k}");
        }
    }
}
