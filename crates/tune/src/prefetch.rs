//! LEAP's prefetcher on a stock kernel (`--controller leap-prefetch-unmarked`): the baseline
//! KML compared against, run for real rather than only in the simulator.
//!
//! Linux's readahead is off on the device (`read_ahead_kb` 0, pushed into the watched
//! processes' open descriptions, journalled and restored like any change of the tuner), so a
//! page a watched process reads that is not cached is a demand miss, which the probe reports
//! as that process inserting the page. The probe's ring buffer streams every access and every
//! insertion; per process and file a [`LeapState`] (the code the simulator runs) logs the
//! accesses, counts hits on the pages it prefetched, and at a miss chooses the pages to fetch,
//! which `POSIX_FADV_WILLNEED` reads through a duplicate of the process's own descriptor
//! (`pidfd_getfd`).
//!
//! Where the kernel puts it apart from LEAP's release, which ran inside the fault path:
//! - pages read by `WILLNEED` carry no readahead marker (`force_page_cache_ra` sets none), so
//!   only the unmarked variant exists here: LEAP remembers what it prefetched and an access
//!   reaching one of those pages is a hit. Fault-around maps cached pages without a fault,
//!   so a scan through a mapping shows LEAP few of its hits (as in the simulator's unmarked
//!   variant). `leap-prefetch`, the marked form, is refused.
//! - LEAP acts after the miss is reported, not inside it: the process has read the missing
//!   page by then (one page: readahead is off), and the prefetch races its next access.
//! - an insertion counts as a miss only when an access of the process asks for it (a read
//!   reports its access after the miss, a fault before): writes insert pages too.
//! - the pages `WILLNEED` reads are charged to the reading task's memory cgroup: the tuner
//!   joins the watched processes' group for its run (`Charged`).
//! - a page mapped by fault-around is read without any event: LEAP sees no hit for it (a
//!   mapped scan shows LEAP few of its hits, as in the simulator's unmarked variant). Counting
//!   the prefetched pages in fault-around's ranges (`mm_filemap_map_pages`) as hits was tried:
//!   the process may never touch them, and on db_bench's random mmap readers LEAP's window grew
//!   to 1 MiB (0.90x vanilla); LEAP's released form counts a hit only at a fault on the page.
//! - a file the process maps after closing its descriptor cannot be reached (no descriptor to
//!   duplicate): its misses are counted as unreachable and read one page at a time.

use crate::linux::{fadvise_remote, take_descriptor, Advice, OpenFile};
use crate::{follow_cgroup, take_device};
use crate::{Summary, TuneConfig};
use iolearn_leap::LeapState;
use iolearn_policy::controller::ReadaheadKnobs;
use iolearn_probe::{EventKind, OpenFileMode, Probe, ProbeConfig, RawEvent};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// LEAP's largest window, pages: 1 MiB, as in the simulator (`LEAP_MAX_PAGES` of
/// `iolearn-readahead`; LEAP's swap default of 8 pages is for remote memory).
pub const MAX_PAGES: u64 = 256;

/// Pages of one access logged at most: a 1 MiB read is 256 accesses to LEAP's history, which
/// holds 32; more would only cost time.
const MAX_LOGGED: u64 = 256;

/// What the prefetcher did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefetchStats {
    /// Demand misses of the watched processes (pages they inserted inside their own reads).
    pub misses: u64,
    /// Prefetched pages an access reached (LEAP's hits).
    pub hits: u64,
    /// `WILLNEED` calls made, and the pages they asked for (cached ones included).
    pub calls: u64,
    /// See `calls`.
    pub pages: u64,
    /// Misses on files no descriptor reaches (mapped after close, or the process gone).
    pub unreachable: u64,
    /// Insertions no access of the process asked for (writes): not misses.
    pub not_misses: u64,
    /// Descriptions whose readahead was turned off after the start (opened before their
    /// process joined the cgroup).
    pub turned_off: u64,
    /// `WILLNEED` calls that failed.
    pub errors: u64,
    /// Events the probe lost (ring buffer full).
    pub lost_events: u64,
    /// Events taken from the probe.
    pub events: u64,
}

/// One thread's last read of a file: the batch reported last (the kernel reports each batch
/// of a read with the range left: the same last page, the first moved on) and the first page
/// whose use is not yet counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Read {
    first: u64,
    last: u64,
    settled: u64,
}

/// What one thread of the process has going on in the file.
#[derive(Debug, Clone, Copy, Default)]
struct Thread {
    read: Option<Read>,
    /// A page the thread inserted that no access of it has claimed yet. A read reports its
    /// miss before the access (`filemap_get_pages` reads the page, then fires), a fault after
    /// it; a write's insertion is claimed by no access.
    inserted: Option<u64>,
}

/// What an event meant to LEAP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Seen {
    /// Prefetched pages used.
    hits: u64,
    /// A miss at this page.
    miss: Option<u64>,
    /// An insertion no access claimed (a write): not a miss.
    unclaimed: u64,
}

/// Threads of one process followed at most (a process that starts a thread per request
/// forgets the old ones).
const MAX_THREADS: usize = 256;

/// One process's stream over one file: LEAP's history and window, as LEAP keeps them per
/// process, and each thread's reads (threads read concurrently; their batches interleave).
struct Stream {
    leap: LeapState,
    threads: HashMap<u32, Thread>,
}

impl Stream {
    fn new() -> Stream {
        Stream {
            leap: LeapState::unmarked(MAX_PAGES),
            threads: HashMap::new(),
        }
    }

    fn thread(&mut self, tid: u32) -> Thread {
        if self.threads.len() >= MAX_THREADS && !self.threads.contains_key(&tid) {
            self.threads.clear();
        }
        self.threads.get(&tid).copied().unwrap_or_default()
    }

    /// Pages `from..=to` were read: each one LEAP prefetched is a hit.
    fn settle(&mut self, from: u64, to: u64) -> u64 {
        let mut hits = 0;
        if to >= from {
            for p in from..=to.min(from.saturating_add(MAX_LOGGED - 1)) {
                if self.leap.take(p) {
                    self.leap.hit();
                    hits += 1;
                }
            }
        }
        hits
    }

    /// A miss at `index`: a page LEAP prefetched too late is no hit.
    fn missed(&mut self, index: u64) -> Option<u64> {
        self.leap.take(index);
        Some(index)
    }

    /// Thread `tid` accessed `first..=last` (clipped to `file_pages` when known).
    ///
    /// A new read's pages go into LEAP's history when it begins; the report of the same range
    /// again (a fault retried after the page was read) is not a new access. A read's hits are
    /// counted as it goes: a batch's pages are known to be read when the thread's next batch,
    /// next miss or next read is reported. (Counted when the read began, the pages it reaches
    /// later would not have been fetched yet, and LEAP's window would never grow on a long
    /// read.) The insertion reported before the access, inside it, is its miss.
    fn access(&mut self, tid: u32, first: u64, last: u64, file_pages: Option<u64>) -> Seen {
        let clip = |l: u64| file_pages.map_or(l, |n| l.min(n.saturating_sub(1)));
        let mut t = self.thread(tid);
        let mut seen = Seen::default();
        let waiting = t.inserted.take();
        let read = match t.read {
            Some(r) if r.first == first && r.last == last => r,
            Some(r) if r.last == last && first > r.first => {
                seen.hits += self.settle(r.settled, first - 1);
                Read {
                    first,
                    last,
                    settled: r.settled.max(first),
                }
            }
            prev => {
                if let Some(r) = prev {
                    seen.hits += self.settle(r.settled, clip(r.last));
                }
                for p in first..=clip(last).min(first.saturating_add(MAX_LOGGED - 1)) {
                    self.leap.log(p);
                }
                Read {
                    first,
                    last,
                    settled: first,
                }
            }
        };
        t.read = Some(read);
        self.threads.insert(tid, t);
        match waiting {
            Some(i) if first <= i && i <= last => seen.miss = self.missed(i),
            Some(_) => seen.unclaimed = 1,
            None => {}
        }
        seen
    }

    /// Thread `tid` inserted `index`: a miss now if its read in progress asked for it (a fault
    /// reports its access first, and a read its batches: the pages before the missing one were
    /// read), else left for its next access to claim.
    fn inserted(&mut self, tid: u32, index: u64) -> Seen {
        let mut t = self.thread(tid);
        let mut seen = Seen {
            unclaimed: u64::from(t.inserted.replace(index).is_some()),
            ..Seen::default()
        };
        if let Some(r) = t.read.as_mut().filter(|r| r.first <= index && index <= r.last) {
            let from = r.settled;
            r.settled = r.settled.max(index + 1);
            t.inserted = None;
            self.threads.insert(tid, t);
            seen.hits += self.settle(from, index.saturating_sub(1));
            seen.miss = self.missed(index);
        } else {
            self.threads.insert(tid, t);
        }
        seen
    }

    /// LEAP's window for a miss at `index` (the page itself excluded: the process reads it),
    /// as runs `(first, pages)` in ascending order. Pages already asked for are asked again:
    /// a cached page costs `WILLNEED` a lookup, and one evicted since is read again, as LEAP
    /// reads every window page missing from the cache.
    fn pages_to_fetch(&mut self, index: u64, file_pages: u64) -> Vec<(u64, u64)> {
        let mut pages: Vec<u64> = self.leap.prefetch(index, file_pages);
        pages.retain(|&p| p != index);
        for &p in &pages {
            self.leap.prefetched(p);
        }
        pages.sort_unstable();
        runs(&pages)
    }
}

/// Sorted pages as runs of consecutive ones, `(first, count)`.
fn runs(pages: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &p in pages {
        match out.last_mut() {
            Some((f, n)) if *f + *n == p => *n += 1,
            _ => out.push((p, 1)),
        }
    }
    out
}

/// The watched processes' descriptors, duplicated into this process on first need.
#[derive(Default)]
struct Descriptors {
    /// Process and inode to a descriptor of it there, from the last scan.
    theirs: HashMap<(u32, u64), i32>,
    /// Duplicates made, by process and inode, with the file's size in pages (read again at
    /// each scan: a file that grows gets longer prefetches).
    ours: HashMap<(u32, u64), (OwnedFd, u64)>,
    /// Duplicates that failed: not tried again until the next scan.
    failed: std::collections::HashSet<(u32, u64)>,
    /// Files asked for that the last scan did not show (opened since, or mapped after their
    /// descriptor was closed): each one asks for one scan soon, not one per miss.
    absent: std::collections::HashSet<(u32, u64)>,
    /// A scan is wanted soon.
    stale: bool,
}

impl Descriptors {
    /// Take a scan of the open files: new descriptors become reachable, closed ones are
    /// dropped (a duplicate would keep a deleted file's blocks allocated). `periodic`: the
    /// once-a-second scan, after which absent files may ask again.
    fn rescan(&mut self, modes: &[OpenFileMode], periodic: bool) {
        self.theirs.clear();
        for m in modes {
            self.theirs.entry((m.tgid, m.ino)).or_insert(m.fd as i32);
        }
        self.ours.retain(|k, _| self.theirs.contains_key(k));
        self.stale = false;
        if periodic || self.absent.len() > 4096 {
            self.absent.clear();
        }
        for (fd, pages) in self.ours.values_mut() {
            if let Ok((_, _, size)) = fstat(fd) {
                *pages = size.div_ceil(4096);
            }
        }
        self.failed.clear();
    }

    /// The file's size in pages, when a descriptor of it was duplicated already.
    fn pages(&self, pid: u32, ino: u64) -> Option<u64> {
        self.ours.get(&(pid, ino)).map(|&(_, n)| n)
    }

    /// A descriptor of `ino` as process `pid` has it open, and the file's size in pages.
    fn get(&mut self, pid: u32, ino: u64, dev: u64) -> Option<(i32, u64)> {
        let key = (pid, ino);
        if !self.ours.contains_key(&key) {
            let Some(&fd) = self.theirs.get(&key) else {
                self.stale |= self.absent.insert(key);
                return None;
            };
            if self.failed.contains(&key) {
                return None;
            }
            match duplicate(pid, fd, ino, dev) {
                Ok(d) => {
                    self.ours.insert(key, d);
                }
                Err(e) => {
                    warn!(event = %"prefetch_unreachable", pid, fd, inode = ino, error = %e);
                    self.failed.insert(key);
                    return None;
                }
            }
        }
        self.ours.get(&key).map(|(fd, pages)| (fd.as_raw_fd(), *pages))
    }
}

/// `fstat`: (inode, device, size). Not `File::metadata`, which needs a `File` that owns the
/// descriptor: a duplicate per call, on every access event.
fn fstat(fd: &OwnedFd) -> std::io::Result<(u64, u64, u64)> {
    // SAFETY: fstat fills the zeroed struct; the descriptor is open (owned).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((st.st_ino, st.st_dev, st.st_size.max(0) as u64))
}

/// Descriptor `fd` of process `pid`, duplicated here, checked to be inode `ino` of device
/// `dev` (the number may have been closed and reused since the scan), with the file's size in
/// pages.
fn duplicate(pid: u32, fd: i32, ino: u64, dev: u64) -> std::io::Result<(OwnedFd, u64)> {
    let local = take_descriptor(pid, fd)?;
    let (i, d, size) = fstat(&local)?;
    if i != ino || d != dev {
        return Err(std::io::Error::other("the descriptor now holds another file"));
    }
    Ok((local, size.div_ceil(4096)))
}

/// `POSIX_FADV_WILLNEED` on pages `first..first+n` of `fd`.
fn willneed(fd: i32, first: u64, n: u64) -> std::io::Result<()> {
    crate::linux::fadvise(fd, (first * 4096) as i64, (n * 4096) as i64, libc::POSIX_FADV_WILLNEED)
}

/// The prefetcher's state over its events.
struct Leap {
    streams: HashMap<(u32, u64), Stream>,
    fds: Descriptors,
    /// The device, as `stat` gives it (user space's `st_dev`).
    user_dev: u64,
    /// Pages one `WILLNEED` reads at most (`force_page_cache_ra` caps a call at the device's
    /// largest request when the description's own readahead is 0): longer runs are split.
    io_pages: u64,
    dry_run: bool,
    stats: PrefetchStats,
}

impl Leap {
    /// One event of a watched process.
    fn event(&mut self, e: &RawEvent) {
        let key = (e.tgid, e.ino);
        let file_pages = self.fds.pages(e.tgid, e.ino);
        let s = self.streams.entry(key).or_insert_with(Stream::new);
        let last = e.index + e.pages.max(1) - 1;
        let seen = match e.kind {
            EventKind::Accessed => s.access(e.tid, e.index, last, file_pages),
            EventKind::Added => s.inserted(e.tid, e.index),
        };
        self.stats.hits += seen.hits;
        self.stats.not_misses += seen.unclaimed;
        let Some(index) = seen.miss else { return };
        self.stats.misses += 1;
        let Some((fd, file_pages)) = self.fds.get(e.tgid, e.ino, self.user_dev) else {
            self.stats.unreachable += 1;
            return;
        };
        let s = self.streams.get_mut(&key).expect("inserted above");
        for (first, n) in s.pages_to_fetch(index, file_pages) {
            let mut at = first;
            while at < first + n {
                let chunk = (first + n - at).min(self.io_pages.max(1));
                self.stats.calls += 1;
                self.stats.pages += chunk;
                if !self.dry_run {
                    if let Err(err) = willneed(fd, at, chunk) {
                        self.stats.errors += 1;
                        warn!(event = %"prefetch_failed", pid = e.tgid, inode = e.ino, first = at, pages = chunk, error = %err);
                    }
                }
                at += chunk;
            }
        }
    }

    /// Forget the processes that left.
    fn forget(&mut self, gone: &[u32]) {
        self.streams.retain(|(pid, _), _| !gone.contains(pid));
    }

    /// Forget the files no watched process has open any more (the last scan's; a file
    /// mapped after close cannot be prefetched anyway).
    fn forget_closed(&mut self) {
        let theirs = &self.fds.theirs;
        self.streams.retain(|k, _| theirs.contains_key(k));
    }
}

/// Turn off readahead in the descriptions that still have it (opened before their process
/// was watched, or between the scan and the device change), journalled first. Returns how
/// many were changed.
fn turn_off(
    modes: &[OpenFileMode],
    original_pages: u64,
    journal: Option<&mut crate::journal::Journal>,
) -> Result<u64, String> {
    let on: Vec<OpenFile> = modes
        .iter()
        .filter(|m| m.ra_pages != 0)
        .map(|m| OpenFile {
            pid: m.tgid,
            fd: m.fd as i32,
            ino: m.ino,
            advice: if m.random() {
                Advice::Random
            } else if original_pages > 0 && m.ra_pages as u64 == 2 * original_pages {
                Advice::Sequential
            } else {
                Advice::Normal
            },
        })
        .collect();
    if let Some(j) = journal {
        j.note_files(&on)?;
    }
    let mut n = 0;
    for f in &on {
        match fadvise_remote(f.pid, f.fd, f.advice.calls()) {
            Ok(()) => n += 1,
            Err(e) => warn!(event = %"action_failed", pid = f.pid, fd = f.fd, error = %e),
        }
    }
    Ok(n)
}

/// The tuner's thread placed in the memory cgroup of the processes it prefetches for, and put
/// back where it was when dropped.
///
/// Why: the page cache charges a page to the memory cgroup of the task that reads it in. LEAP
/// ran in the faulting process's context; from user space the `WILLNEED` reads are the
/// tuner's, and outside the processes' cgroup they would be charged to the tuner's: a workload
/// held to a memory limit would get the prefetched files cached beyond it (db_bench's random
/// readers in a 48 MiB group ran 66 times faster "with LEAP").
struct Charged {
    /// The `tasks` (v1) or `cgroup.procs` (v2) file of the cgroup to go back to.
    back: PathBuf,
}

impl Drop for Charged {
    fn drop(&mut self) {
        if let Err(e) = join(&self.back) {
            warn!(event = %"cgroup_not_restored", file = %self.back.display(), error = %e);
        }
    }
}

/// The file that moves this thread into the memory cgroup holding process `pid`
/// (`thread-self`: this thread), from `/proc/PID/cgroup`: the v1 memory hierarchy's `tasks`, else (a unified
/// hierarchy) the v2 group's `cgroup.procs`.
fn memory_cgroup_of(pid: &str) -> Result<PathBuf, String> {
    let path = if pid == "thread-self" {
        "/proc/thread-self/cgroup".to_string()
    } else {
        format!("/proc/{pid}/cgroup")
    };
    let text = iolearn_safeio::read_to_string(Path::new(&path), 1 << 16).map_err(|e| e.to_string())?;
    let mut unified = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(rel)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let rel = rel.trim_start_matches('/');
        if rel.split('/').any(|c| c == "..") {
            return Err(format!("{path}: {rel}: not a cgroup path"));
        }
        if controllers.split(',').any(|c| c == "memory") {
            return Ok(Path::new("/sys/fs/cgroup/memory").join(rel).join("tasks"));
        }
        if id == "0" && controllers.is_empty() {
            unified = Some(Path::new("/sys/fs/cgroup").join(rel).join("cgroup.procs"));
        }
    }
    unified.ok_or_else(|| format!("{path}: no memory cgroup"))
}

/// Move this thread (v1 `tasks`) or process (v2 `cgroup.procs`) into the cgroup of `file`,
/// which must be a cgroup file system's file (never a link planted elsewhere).
fn join(file: &Path) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    // Looked at before it is opened for writing: opening a FIFO or a device planted there
    // could block or act.
    let at = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
        .open(file)?;
    // SAFETY: fstatfs fills the zeroed struct from an open descriptor (O_PATH allows it).
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(at.as_raw_fd(), &mut fs) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    const CGROUP_SUPER_MAGIC: i64 = 0x27e0eb;
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    if !matches!(fs.f_type as i64, CGROUP_SUPER_MAGIC | CGROUP2_SUPER_MAGIC) || !at.metadata()?.is_file() {
        return Err(std::io::Error::other("not a cgroup file"));
    }
    // The same file, through the descriptor just checked.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{}", at.as_raw_fd()))?;
    let id = if file.ends_with("tasks") {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    } else {
        std::process::id()
    };
    f.write_all(format!("{id}\n").as_bytes())
}

/// The device's largest request, pages (`max_sectors_kb`; 32 when unreadable, the smallest
/// common value).
fn io_pages(device: &str) -> u64 {
    let path = Path::new("/sys/class/block").join(device).join("queue/max_sectors_kb");
    iolearn_safeio::read_to_string(&path, 64)
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .map_or(32, |kb| (kb / 4).max(1))
}

/// The soft limit on open descriptors raised to the hard one.
fn raise_descriptor_limit() {
    // SAFETY: getrlimit/setrlimit on a zeroed struct of the right type.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 && r.rlim_cur < r.rlim_max {
        r.rlim_cur = r.rlim_max;
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    }
}

/// Where LEAP's reads are charged: the memory cgroup named with `--cgroup` when it is one,
/// else that of the first watched process (`None`: none watched yet).
fn charge_target(cgroup: Option<&Path>, pids: &[u32]) -> Option<Result<PathBuf, String>> {
    if let Some(cg) = cgroup {
        if cg.join("memory.limit_in_bytes").exists() {
            return Some(Ok(cg.join("tasks")));
        }
        if cg.join("memory.max").exists() {
            return Some(Ok(cg.join("cgroup.procs")));
        }
    }
    pids.first().map(|p| memory_cgroup_of(&p.to_string()))
}

/// Charge LEAP's reads to `target`'s cgroup (a warning, and the tuner's own cgroup, when that
/// cannot be done).
fn charge_to(target: Result<PathBuf, String>, warn_on_failure: bool) -> Option<Charged> {
    let result = (|| -> Result<Charged, String> {
        let to = target?;
        // This thread's own group (a v1 hierarchy places threads one by one).
        let back = memory_cgroup_of("thread-self")?;
        if to != back {
            join(&to).map_err(|e| format!("{}: {e}", to.display()))?;
        }
        info!(event = %"charged_to", cgroup = %to.parent().unwrap_or(&to).display());
        Ok(Charged { back })
    })();
    match result {
        Ok(c) => Some(c),
        Err(e) => {
            if warn_on_failure {
                warn!(event = %"charged_to_tuner", error = %e, effect = %"until it can join (tried again every second), the pages LEAP reads are charged to the tuner's memory cgroup, not the processes'");
            }
            None
        }
    }
}

/// Run LEAP until `stop` is set or the duration passes.
pub(crate) fn run_leap(cfg: &TuneConfig, stop: &AtomicBool) -> Result<Summary, String> {
    if cfg.pids.is_empty() && cfg.cgroup.is_none() {
        return Err(
            "controller leap-prefetch-unmarked: prefetches for the processes it watches; name them with --pid or --cgroup"
                .into(),
        );
    }
    if cfg.scope != crate::Scope::Device {
        return Err(format!(
            "controller leap-prefetch-unmarked: LEAP keeps each file's history already; drop --{}",
            cfg.scope.name()
        ));
    }
    let (mut knobs, mut restorer) = take_device(cfg)?;
    let pids = knobs.pids.clone();
    let mut probe = Probe::start(&ProbeConfig {
        device: Some(knobs.device()),
        pids: pids.clone(),
        filter_pids: true,
        raw_events: true,
        ..Default::default()
    })
    .map_err(|e| e.to_string())?;
    let original_kb = knobs.device_read_ahead_kb();
    info!(
        event = %"start",
        device = %cfg.device,
        controller = %cfg.controller,
        read_ahead_kb = original_kb,
        pids = ?pids,
        dry_run = cfg.dry_run
    );
    if cfg.guard.is_some() {
        info!(event = %"guard_off", reason = %"LEAP runs as published, without iolearn's guardrail");
    }
    // Linux's readahead off: the device, and (with their advice kept) the descriptions open.
    knobs.refresh();
    let modes = probe.open_files().map_err(|e| e.to_string())?;
    knobs.note_modes(&modes);
    knobs.set_device_read_ahead_kb(0);
    if let Some(j) = restorer.journal.as_mut() {
        j.note_files(&std::mem::take(&mut knobs.touched))?;
    }
    for e in knobs.take_errors() {
        warn!(event = %"action_failed", error = %e);
    }
    let mut leap = Leap {
        streams: HashMap::new(),
        fds: Descriptors::default(),
        user_dev: {
            let d = knobs.device();
            libc::makedev(d.major, d.minor)
        },
        io_pages: io_pages(&cfg.device),
        dry_run: cfg.dry_run,
        stats: PrefetchStats::default(),
    };
    // A duplicate per open file of the watched processes: room for as many as allowed.
    raise_descriptor_limit();
    // Joined before the first prefetch (once a process is watched), tried again at each
    // scan until it works; left after the loop.
    let mut charged = None;
    let mut charge_due = !cfg.dry_run;
    let mut charge_failed = false;
    let start = Instant::now();
    let mut last_scan = Instant::now() - Duration::from_secs(10);
    let mut last_follow = Instant::now();
    let mut lost_at_start = None;
    while !stop.load(Ordering::SeqCst) && cfg.duration.is_none_or(|d| start.elapsed() < d) {
        // Descriptors: a fresh scan every second, or within 50 ms when a file the last scan
        // did not show is read, and the descriptions still reading ahead turned off.
        let since = last_scan.elapsed();
        let periodic = since >= Duration::from_secs(1);
        if periodic || (leap.fds.stale && since >= Duration::from_millis(50)) {
            last_scan = Instant::now();
            if periodic && charged.is_none() && charge_failed {
                charge_due = true;
            }
            match probe.open_files() {
                Ok(modes) => {
                    leap.fds.rescan(&modes, periodic);
                    if periodic {
                        leap.forget_closed();
                    }
                    if !cfg.dry_run {
                        leap.stats.turned_off += turn_off(&modes, original_kb / 4, restorer.journal.as_mut())?;
                    }
                }
                Err(e) => warn!(event = %"open_files_unreadable", error = %e),
            }
            let w = probe.window().map_err(|e| e.to_string())?;
            let lost = w.counters.lost_ring_full;
            leap.stats.lost_events = lost - *lost_at_start.get_or_insert(lost);
        }
        if let Some(cg) = &cfg.cgroup {
            if last_follow.elapsed() >= Duration::from_millis(100) {
                last_follow = Instant::now();
                let gone = follow_cgroup(cg, &cfg.pids, &mut knobs.pids, &mut probe);
                leap.forget(&gone);
            }
        }
        if charge_due {
            if let Some(target) = charge_target(cfg.cgroup.as_deref(), &knobs.pids) {
                charged = charge_to(target, !charge_failed);
                charge_failed = charged.is_none();
                charge_due = false;
            }
        }
        let events = probe
            .drain_events(Duration::from_millis(20))
            .map_err(|e| e.to_string())?;
        leap.stats.events += events.len() as u64;
        for e in &events {
            leap.event(e);
        }
    }
    drop(charged);
    drop(probe);
    let s = leap.stats;
    drop(leap); // its duplicates closed before the restore reaches the descriptions
    drop(restorer); // restores and logs
    let restored_kb = crate::linux::read_device_kb(knobs.sysfs()).unwrap_or(0);
    info!(
        event = %"stop",
        misses = s.misses,
        hits = s.hits,
        willneed_calls = s.calls,
        willneed_pages = s.pages,
        unreachable = s.unreachable,
        not_misses = s.not_misses,
        turned_off = s.turned_off,
        errors = s.errors,
        lost_events = s.lost_events,
        events = s.events,
        read_ahead_kb = restored_kb,
        wall_s = start.elapsed().as_secs_f64()
    );
    let mut summary = Summary {
        original_kb,
        restored_kb,
        prefetch: Some(s),
        ..Default::default()
    };
    summary.metrics.lost_events = s.lost_events;
    summary.metrics.errors = s.errors;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u32 = 7;

    fn hits(s: Seen) -> u64 {
        assert_eq!(s.miss, None);
        s.hits
    }

    #[test]
    fn a_read_going_on_is_logged_once_and_its_hits_counted_as_it_goes() {
        let mut s = Stream::new();
        // A prefetch of pages 10..=13 after a miss at 9.
        for p in 10..=13 {
            assert!(s.leap.prefetched(p));
        }
        assert!(!s.leap.prefetched(12), "already waiting");
        // A 6-page read from 8, reported again for its batches from 11 and 13: the pages
        // before each batch were read.
        assert_eq!(hits(s.access(T, 8, 13, Some(100))), 0, "nothing read yet");
        assert_eq!(hits(s.access(T, 11, 13, Some(100))), 1, "10");
        assert_eq!(hits(s.access(T, 13, 13, Some(100))), 2, "11, 12");
        assert_eq!(
            hits(s.access(T, 13, 13, Some(100))),
            0,
            "the same batch again: nothing new"
        );
        assert_eq!(hits(s.access(T, 50, 50, Some(100))), 1, "13, once the next read begins");
        // A read past the end of the file is clipped to it.
        assert!(s.leap.prefetched(99));
        s.access(T, 98, 120, Some(100));
        assert_eq!(hits(s.access(T, 0, 0, Some(100))), 1);
    }

    #[test]
    fn misses_are_insertions_an_access_asked_for_and_count_the_pages_read_before_them() {
        let mut s = Stream::new();
        for p in 21..=23 {
            s.leap.prefetched(p);
        }
        // A read of 20..=29 whose first page misses: the insertion comes first.
        assert_eq!(s.inserted(T, 20), Seen::default(), "not asked for yet");
        assert_eq!(s.access(T, 20, 29, None).miss, Some(20));
        // Its batch 20..=23 was read, then 24 missed: the three hits count before the miss
        // sizes LEAP's window.
        let seen = s.inserted(T, 24);
        assert_eq!((seen.hits, seen.miss), (3, Some(24)));
        assert_eq!(hits(s.access(T, 24, 29, None)), 0, "the batch from 24: counted already");
        // A write's insertion is claimed by no access.
        s.inserted(T, 400);
        let seen = s.access(T, 30, 30, None);
        assert_eq!((seen.miss, seen.unclaimed), (None, 1));
        // Faults of a reverse scan: each one's access first, then the insertion, then the
        // same fault again (retried once the page was read): one access each in LEAP's
        // history (with a delta of 0 for every retry, no delta would hold a majority).
        for p in (200..232).rev() {
            s.access(T, p, p, None);
            assert_eq!(s.inserted(T, p).miss, Some(p));
            s.access(T, p, p, None);
        }
        assert_eq!(s.leap.trend(), Some(-1));
        // A prefetched page the process missed anyway is no hit.
        s.leap.prefetched(40);
        s.access(T, 40, 40, None);
        assert_eq!(s.inserted(T, 40).miss, Some(40));
        assert_eq!(hits(s.access(T, 41, 41, None)), 0);
    }

    #[test]
    fn threads_reading_one_file_at_once_keep_their_own_reads() {
        let mut s = Stream::new();
        for p in [101, 102, 501, 502] {
            s.leap.prefetched(p);
        }
        // Two threads' reads, their batches interleaved.
        s.access(1, 100, 103, None);
        s.access(2, 500, 503, None);
        assert_eq!(hits(s.access(1, 103, 103, None)), 2, "thread 1 read 100..=102");
        // Thread 2's insertion is its own read's miss, whatever thread 1 did last.
        let seen = s.inserted(2, 503);
        assert_eq!((seen.hits, seen.miss), (2, Some(503)));
    }

    #[test]
    fn a_miss_fetches_the_window_along_the_trend() {
        let mut s = Stream::new();
        for p in (0..40u64).rev() {
            s.access(T, 1000 + p, 1000 + p, Some(5000)); // a reverse scan, a page at a time
        }
        let first = s.pages_to_fetch(1000, 5000);
        assert_eq!(
            first,
            vec![(997, 3)],
            "a window of 4 behind the miss, the missing page read already"
        );
        // Hits grow the window.
        for p in (995..1000).rev() {
            s.access(T, p, p, Some(5000));
        }
        let next = s.pages_to_fetch(995, 5000);
        assert_eq!(
            next,
            vec![(988, 7)],
            "8 pages from 995 down, 995 itself read by the process"
        );
    }

    #[test]
    fn runs_join_consecutive_pages() {
        assert_eq!(runs(&[1, 2, 3, 7, 9, 10]), vec![(1, 3), (7, 1), (9, 2)]);
        assert_eq!(runs(&[]), vec![]);
    }

    #[test]
    fn the_tuner_never_joins_a_file_that_is_not_a_cgroups() {
        let dir = std::env::temp_dir().join(format!("iolearn-join-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plain = dir.join("tasks");
        std::fs::write(&plain, "").unwrap();
        assert!(join(&plain).is_err());
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "", "nothing written");
        let link = dir.join("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/sys/fs/cgroup/memory/tasks", &link).unwrap();
        assert!(join(&link).is_err(), "a link is not followed");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
