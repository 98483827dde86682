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
//!   joins the watched processes' group while it prefetches ([`Charged`]).
//! - a file the process maps after closing its descriptor cannot be reached (no descriptor to
//!   duplicate): its misses are counted as unreachable and read one page at a time.

use crate::linux::{fadvise_remote, Advice, OpenFile};
use crate::{cgroup_pids, check_device_name, check_pids, follow_cgroup, system_disks, take_device};
use crate::{Summary, TuneConfig};
use iolearn_leap::LeapState;
use iolearn_policy::controller::ReadaheadKnobs;
use iolearn_probe::{EventKind, OpenFileMode, Probe, ProbeConfig, RawEvent};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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

/// One process's stream over one file.
struct Stream {
    leap: LeapState,
    /// The last access's first and last page, to tell a read going on (the kernel reports
    /// each batch of a read with the range left) from a new one.
    last_access: Option<(u64, u64)>,
    /// A page the process inserted that no access has claimed yet. A read's miss is reported
    /// before the read (`filemap_get_pages` reads the page, then fires), a fault's after it;
    /// a write's insertion is claimed by no access.
    inserted: Option<u64>,
}

impl Stream {
    fn new() -> Stream {
        Stream {
            leap: LeapState::unmarked(MAX_PAGES),
            last_access: None,
            inserted: None,
        }
    }

    /// An access to `first..=last` (clipped to `file_pages` when known); returns the hits.
    ///
    /// A new read's pages go into LEAP's history when it begins. Its hits are counted as it
    /// goes: the kernel reports each batch of a read with the range left (the same last page,
    /// the first moved on), so a batch's pages are known to be read when the next batch or
    /// the next read is reported; then each one LEAP prefetched is a hit. (Counted when the
    /// read began, the pages it reaches later would not have been fetched yet: LEAP's window
    /// would never grow on a long read.)
    fn access(&mut self, first: u64, last: u64, file_pages: Option<u64>) -> u64 {
        let clip = |l: u64| file_pages.map_or(l, |n| l.min(n.saturating_sub(1)));
        let going_on = self.last_access.is_some_and(|(f, l)| l == last && first > f);
        let mut hits = 0;
        if let Some((f, l)) = self.last_access {
            let read = if going_on { first - 1 } else { clip(l) };
            for p in f..=read.min(f.saturating_add(MAX_LOGGED - 1)) {
                if self.leap.take(p) {
                    self.leap.hit();
                    hits += 1;
                }
            }
        }
        self.last_access = Some((first, last));
        if !going_on {
            for p in first..=clip(last).min(first.saturating_add(MAX_LOGGED - 1)) {
                self.leap.log(p);
            }
        }
        hits
    }

    /// A miss at `index`: a page LEAP prefetched too late is no hit.
    fn missed(&mut self, index: u64) -> u64 {
        self.leap.take(index);
        index
    }

    /// An insertion of `index`: a miss now if the last access asked for it (a fault reports
    /// its access first, and a read reports each batch), else left for the next access to
    /// claim. Counts in `unclaimed` an earlier insertion no access claimed.
    fn inserted(&mut self, index: u64, unclaimed: &mut u64) -> Option<u64> {
        *unclaimed += u64::from(self.inserted.replace(index).is_some());
        let (f, l) = self.last_access?;
        if f <= index && index <= l {
            self.inserted = None;
            Some(self.missed(index))
        } else {
            None
        }
    }

    /// An access to `first..=last`, and the miss it claims: the insertion reported before it
    /// inside its range (a read). One outside it (a write) is counted in `unclaimed`.
    fn accessed(
        &mut self,
        first: u64,
        last: u64,
        file_pages: Option<u64>,
        hits: &mut u64,
        unclaimed: &mut u64,
    ) -> Option<u64> {
        let waiting = self.inserted.take();
        let missed = waiting.filter(|&i| first <= i && i <= last);
        *unclaimed += u64::from(waiting.is_some() && missed.is_none());
        *hits += self.access(first, last, file_pages);
        missed.map(|i| self.missed(i))
    }

    /// LEAP's pages for a miss at `index` that are not waiting for their use already, as
    /// runs `(first, pages)` in ascending order.
    fn pages_to_fetch(&mut self, index: u64, file_pages: u64) -> Vec<(u64, u64)> {
        let mut pages: Vec<u64> = self
            .leap
            .prefetch(index, file_pages)
            .into_iter()
            .filter(|&p| p != index)
            .filter(|&p| self.leap.prefetched(p))
            .collect();
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
    /// A file the last scan did not show was asked for (opened since): scan again soon.
    stale: bool,
}

impl Descriptors {
    /// Take a scan of the open files: new descriptors become reachable, closed ones are
    /// dropped (a duplicate would keep a deleted file's blocks allocated).
    fn rescan(&mut self, modes: &[OpenFileMode]) {
        self.theirs.clear();
        for m in modes {
            self.theirs.entry((m.tgid, m.ino)).or_insert(m.fd as i32);
        }
        self.ours.retain(|k, _| self.theirs.contains_key(k));
        self.stale = false;
        for (fd, pages) in self.ours.values_mut() {
            if let Ok((_, _, size)) = fstat(fd) {
                *pages = size.div_ceil(4096);
            }
        }
        self.failed.clear();
    }

    /// A descriptor of `ino` as process `pid` has it open, and the file's size in pages.
    fn get(&mut self, pid: u32, ino: u64, dev: u64) -> Option<(i32, u64)> {
        let key = (pid, ino);
        if !self.ours.contains_key(&key) {
            let Some(&fd) = self.theirs.get(&key) else {
                self.stale = true;
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
    let owned = |rc: libc::c_long| -> std::io::Result<OwnedFd> {
        if rc < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            // SAFETY: a fresh descriptor the kernel just returned, owned by nobody else.
            Ok(unsafe { OwnedFd::from_raw_fd(rc as i32) })
        }
    };
    // SAFETY: plain system calls; their results are checked.
    let pidfd = owned(unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) })?;
    let local = owned(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) })?;
    let (i, d, size) = fstat(&local)?;
    if i != ino || d != dev {
        return Err(std::io::Error::other("the descriptor now holds another file"));
    }
    Ok((local, size.div_ceil(4096)))
}

/// `POSIX_FADV_WILLNEED` on pages `first..first+n` of `fd`.
fn willneed(fd: i32, first: u64, n: u64) -> std::io::Result<()> {
    // SAFETY: fadvise on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(fd, (first * 4096) as i64, (n * 4096) as i64, libc::POSIX_FADV_WILLNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

/// The prefetcher's state over its events.
struct Leap {
    streams: HashMap<(u32, u64), Stream>,
    fds: Descriptors,
    /// The device, as `stat` gives it (user space's `st_dev`).
    user_dev: u64,
    dry_run: bool,
    stats: PrefetchStats,
}

impl Leap {
    /// One event of a watched process.
    fn event(&mut self, e: &RawEvent) {
        let key = (e.tgid, e.ino);
        let size = self.fds.get(e.tgid, e.ino, self.user_dev);
        let s = self.streams.entry(key).or_insert_with(Stream::new);
        let st = &mut self.stats;
        let miss = match e.kind {
            EventKind::Accessed => {
                let last = e.index + e.pages.max(1) - 1;
                s.accessed(e.index, last, size.map(|(_, n)| n), &mut st.hits, &mut st.not_misses)
            }
            EventKind::Added => s.inserted(e.index, &mut st.not_misses),
        };
        let Some(index) = miss else { return };
        self.stats.misses += 1;
        let Some((fd, file_pages)) = size else {
            self.stats.unreachable += 1;
            return;
        };
        for (first, n) in s.pages_to_fetch(index, file_pages) {
            self.stats.calls += 1;
            self.stats.pages += n;
            if self.dry_run {
                continue;
            }
            if let Err(err) = willneed(fd, first, n) {
                self.stats.errors += 1;
                warn!(event = %"prefetch_failed", pid = e.tgid, inode = e.ino, first, pages = n, error = %err);
            }
        }
    }

    /// Forget the processes that left.
    fn forget(&mut self, gone: &[u32]) {
        self.streams.retain(|(pid, _), _| !gone.contains(pid));
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

/// The file that moves this thread into the memory cgroup holding process `pid` (`self`: this
/// process), from `/proc/PID/cgroup`: the v1 memory hierarchy's `tasks`, else (a unified
/// hierarchy) the v2 group's `cgroup.procs`.
fn memory_cgroup_of(pid: &str) -> Result<PathBuf, String> {
    let path = format!("/proc/{pid}/cgroup");
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
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(file)?;
    // SAFETY: fstatfs fills the zeroed struct from an open descriptor.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut fs) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    const CGROUP_SUPER_MAGIC: i64 = 0x27e0eb;
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    if !matches!(fs.f_type as i64, CGROUP_SUPER_MAGIC | CGROUP2_SUPER_MAGIC) {
        return Err(std::io::Error::other("not a cgroup file"));
    }
    let id = if file.ends_with("tasks") {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    } else {
        std::process::id()
    };
    f.write_all(format!("{id}\n").as_bytes())
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
fn charge_to(target: Result<PathBuf, String>) -> Option<Charged> {
    let result = (|| -> Result<Charged, String> {
        let to = target?;
        let back = memory_cgroup_of("self")?;
        if to != back {
            join(&to).map_err(|e| format!("{}: {e}", to.display()))?;
        }
        info!(event = %"charged_to", cgroup = %to.parent().unwrap_or(&to).display());
        Ok(Charged { back })
    })();
    match result {
        Ok(c) => Some(c),
        Err(e) => {
            warn!(event = %"charged_to_tuner", error = %e, effect = %"the pages LEAP reads are charged to the tuner's memory cgroup, not the processes'");
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
    check_pids(&cfg.pids)?;
    check_device_name(&cfg.device)?;
    if !cfg.dry_run && !cfg.allow_system_disk && system_disks().contains(&cfg.device) {
        return Err(format!(
            "--device {}: holds / (the system disk); pass --allow-system-disk to tune it anyway",
            cfg.device
        ));
    }
    let (mut knobs, mut restorer) = take_device(cfg)?;
    let mut pids = cfg.pids.clone();
    if let Some(cg) = &cfg.cgroup {
        pids.extend(cgroup_pids(cg)?);
    }
    knobs.pids = pids.clone();
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
        dry_run: cfg.dry_run,
        stats: PrefetchStats::default(),
    };
    // Joined before the first prefetch (once a process is watched); left after the loop.
    let mut charged = None;
    let mut charge_due = !cfg.dry_run;
    let start = Instant::now();
    let mut last_scan = Instant::now() - Duration::from_secs(10);
    let mut last_follow = Instant::now();
    let mut lost_at_start = None;
    while !stop.load(Ordering::SeqCst) && cfg.duration.is_none_or(|d| start.elapsed() < d) {
        // Descriptors: a fresh scan every second, or within 50 ms when a file the last scan
        // did not show is read, and the descriptions still reading ahead turned off.
        let since = last_scan.elapsed();
        if since >= Duration::from_secs(1) || (leap.fds.stale && since >= Duration::from_millis(50)) {
            last_scan = Instant::now();
            match probe.open_files() {
                Ok(modes) => {
                    leap.fds.rescan(&modes);
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
                charged = charge_to(target);
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
    drop(restorer); // restores and logs
    let s = leap.stats;
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
        assert_eq!(s.access(8, 13, Some(100)), 0, "nothing read yet");
        assert_eq!(s.access(11, 13, Some(100)), 1, "10");
        assert_eq!(s.access(13, 13, Some(100)), 2, "11, 12");
        assert_eq!(s.access(50, 50, Some(100)), 1, "13, once the next read begins");
        // A read past the end of the file is clipped to it.
        assert!(s.leap.prefetched(99));
        s.access(98, 120, Some(100));
        assert_eq!(s.access(0, 0, Some(100)), 1);
        // A page the read asked for, inserted before the access that claims it, is a miss; a
        // page inserted outside it (a write) is not; a fault's insertion after its access is.
        // A prefetched page the process missed anyway is no hit.
        let (mut hits, mut unclaimed) = (0, 0);
        assert!(s.leap.prefetched(20) && s.leap.prefetched(21));
        assert_eq!(s.inserted(20, &mut unclaimed), None, "not asked for yet");
        assert_eq!(s.accessed(20, 21, None, &mut hits, &mut unclaimed), Some(20));
        assert_eq!(s.inserted(40, &mut unclaimed), None);
        assert_eq!(s.accessed(30, 30, None, &mut hits, &mut unclaimed), None);
        assert_eq!(unclaimed, 1, "the write at 40");
        assert_eq!(hits, 1, "21, not 20");
        assert_eq!(
            s.inserted(30, &mut unclaimed),
            Some(30),
            "a fault's insertion after its access"
        );
    }

    #[test]
    fn a_miss_fetches_along_the_trend_what_is_not_fetched_already() {
        let mut s = Stream::new();
        for p in (0..40u64).rev() {
            s.access(1000 + p, 1000 + p, Some(5000)); // a reverse scan, a page at a time
        }
        let first = s.pages_to_fetch(1000, 5000);
        assert_eq!(
            first,
            vec![(997, 3)],
            "a window of 4 behind the miss, the missing page read already"
        );
        // Hits grow the window; pages already asked for are not asked again.
        for p in (995..1000).rev() {
            s.access(p, p, Some(5000));
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
}
