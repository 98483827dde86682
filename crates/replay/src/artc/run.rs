//! Run a plan: a thread per replay thread, each action once what it waits for has completed,
//! the calls made for real under a target directory, and every return value compared with
//! the trace's (verification level 1).
//!
//! Containment: every path is resolved with `openat2(RESOLVE_IN_ROOT)` under the target, so
//! an absolute name, a `..` or a symlink in the tree (planted or replayed) never leads out of
//! it; calls on a name act through the directory descriptor that lookup gave (`mkdirat`,
//! `unlinkat`, `renameat2`...), or on the file it opened. Descriptors are remapped per traced
//! process (a number may be reused while its old holder is still open in the replay).
//! Descriptors the trace did not open (stdin, sockets, pipes to other programs) are not
//! touched: their calls are counted as not replayed.

use super::plan::{Mode, Plan};
use iolearn_trace::sys::{Call, Data, SysRecord, SysTrace};
use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How fast to replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Timing {
    /// As fast as possible: no idle time between calls.
    Afap,
    /// The original's idle time before each call (its predelay), times a factor (1: natural).
    Scaled(f64),
}

/// What happened to one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    /// Replay's return value (>= 0, or -errno); the trace's own when not replayed.
    pub ret: i64,
    /// Whether the call was made (false: a descriptor the trace did not open, an mmap...).
    pub replayed: bool,
    /// Verification level 1: the return value agrees with the trace's (see [`agrees`]).
    pub ok: bool,
    /// Verification level 2, for a read whose data the trace kept (bytes or hash) and that
    /// returned as many bytes: the same bytes. `None`: not checked.
    pub data_ok: Option<bool>,
    /// Issue and completion, ns from the replay's start.
    pub start_ns: u64,
    /// Completion.
    pub end_ns: u64,
}

/// A replay's result.
#[derive(Debug, Clone)]
pub struct Report {
    /// Per action (trace order).
    pub outcomes: Vec<Outcome>,
    /// Wall time, ns.
    pub wall_ns: u64,
    /// Per replay thread: time from the start to its last call's end, ns.
    pub thread_ns: Vec<u64>,
}

impl Report {
    /// Calls whose result disagreed with the trace's.
    pub fn failed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.replayed && !o.ok).count()
    }

    /// Calls not made.
    pub fn skipped(&self) -> usize {
        self.outcomes.iter().filter(|o| !o.replayed).count()
    }

    /// Reads whose data was checked, and of those, how many returned other bytes.
    pub fn data_checked(&self) -> (usize, usize) {
        let checked = self.outcomes.iter().filter_map(|o| o.data_ok);
        checked.fold((0, 0), |(n, bad), ok| (n + 1, bad + usize::from(!ok)))
    }
}

/// The data a replay writes and checks reads against: the trace's data side file (`--buffers
/// full`), or none (`None`: a pattern is written, reads are checked against hashes only).
#[derive(Debug, Clone, Copy, Default)]
pub struct Side<'a>(pub Option<&'a [u8]>);

impl<'a> Side<'a> {
    /// A record's kept bytes, if the side file has them.
    fn bytes(&self, d: Data) -> Option<&'a [u8]> {
        match d {
            Data::Bytes { offset, len } => {
                let end = offset.checked_add(len)?;
                self.0?.get(usize::try_from(offset).ok()?..usize::try_from(end).ok()?)
            }
            _ => None,
        }
    }

    /// Every record's bytes are in the side file, if there is one (an error names the first
    /// that is not).
    pub fn check(&self, trace: &SysTrace) -> Result<(), String> {
        let Some(all) = self.0 else { return Ok(()) };
        for r in &trace.records {
            if let Data::Bytes { offset, len } = r.data {
                if self.bytes(r.data).is_none() {
                    return Err(format!(
                        "record {}: data_offset {offset} + data_len {len} is past the data file's {} bytes",
                        r.id,
                        all.len()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Level 2: whether `got` (what a replayed read returned) is the data the trace kept.
    fn agrees(&self, r: &SysRecord, got: &[u8]) -> Option<bool> {
        match r.data {
            Data::Hash(h) => Some(iolearn_trace::sys::hash(got) == h),
            d @ Data::Bytes { .. } => self.bytes(d).map(|b| b == got),
            Data::None | Data::Unreadable => None,
        }
    }
}

/// Whether a replayed result agrees with the traced one: the same errno for a failure; for
/// success, the same byte count where it is the file system's answer to the program (reads,
/// writes, lseek, readlink), and success alone where the number is the kernel's choice
/// (a descriptor, an mmap address) or depends on the file system's layout (getdents).
pub fn agrees(r: &SysRecord, ret: i64) -> bool {
    match (r.errno(), ret < 0) {
        (Some(e), true) => i64::from(e) == -ret,
        (None, false) => match r.call {
            Some(Call::Getdents | Call::Getdents64) => (r.ret == 0) == (ret == 0),
            Some(c) if c.returns_fd() || c == Call::Fcntl => true,
            _ => r.ret == ret,
        },
        _ => false,
    }
}

struct Shared<'a> {
    trace: &'a SysTrace,
    plan: &'a Plan,
    root: Root,
    done: Vec<AtomicBool>,
    /// Each replay thread, to wake it (set as it starts).
    threads: Vec<std::sync::OnceLock<std::thread::Thread>>,
    /// Per action: the replay threads with an action waiting for it (woken when it ends;
    /// waking every thread at every end costs more than the calls once there are dozens).
    wake: Vec<Vec<u32>>,
    issued: AtomicU32,
    /// Set when a replay thread could not start or panicked: the others stop waiting.
    abort: AtomicBool,
    /// The replay's open files, by the plan's descriptor resource (a traced number's
    /// generation): numbers reused in the trace while the old file is still open in the
    /// replay do not collide.
    slots: Mutex<HashMap<u32, Arc<OwnedFd>>>,
    start: Instant,
    timing: Timing,
    /// Written data where the trace kept none: a repeated pattern.
    data: Vec<u8>,
    side: Side<'a>,
}

/// The longest idle time replayed before a call (natural or scaled timing).
const MAX_PREDELAY_NS: u64 = 60_000_000_000;

/// The most file data init writes (the sizes come from the trace: a bound on what a bad or
/// huge one can make it write).
const MAX_INIT_BYTES: u64 = 16 << 30;

/// Stops the replay if its thread unwinds.
struct AbortOnUnwind<'a, 'b>(&'a Shared<'b>);

impl Drop for AbortOnUnwind<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop_all();
        }
    }
}

/// Wait `d`: a sleep for all but the last stretch, which is spun (a sleep wakes tens of
/// microseconds late, and the gaps between a program's calls are often shorter than that:
/// thousands of late wake-ups would add up to seconds of time the original did not take).
fn pause(d: Duration) {
    const SPIN: Duration = Duration::from_micros(60);
    if d.is_zero() {
        return;
    }
    let until = Instant::now() + d;
    if d > SPIN {
        std::thread::sleep(d - SPIN);
    }
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// For each action, the replay threads that have an action waiting for it.
fn waiters(plan: &Plan) -> Vec<Vec<u32>> {
    let mut wake: Vec<Vec<u32>> = vec![Vec::new(); plan.deps.len()];
    for (a, deps) in plan.deps.iter().enumerate() {
        let t = plan.thread_of[a];
        for &d in deps {
            let w = &mut wake[d as usize];
            if !w.contains(&t) {
                w.push(t);
            }
        }
    }
    wake
}

/// A replay holds a descriptor for every file its traced processes hold at once: as many as
/// the hard limit allows (the soft limit is often 1,024).
fn raise_open_file_limit() {
    // SAFETY: getrlimit/setrlimit with a valid struct; failure leaves the limit as it was.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// Replay `trace` by `plan` under `target` (an existing directory), writing the data `side`
/// keeps (a pattern where it keeps none) and checking reads against it.
pub fn run(trace: &SysTrace, plan: &Plan, target: &Path, timing: Timing, side: Side<'_>) -> Result<Report, String> {
    side.check(trace)?;
    let root = Root(open_dir(target)?);
    let n = trace.records.len();
    let max_count = trace
        .records
        .iter()
        .filter(|r| {
            r.call
                .is_some_and(|c| c.carries_data() || c.roles().contains(&iolearn_trace::sys::Role::Out))
        })
        .filter_map(|r| r.count)
        .max()
        .unwrap_or(0)
        .min(64 << 20) as usize;
    let shared = Shared {
        trace,
        plan,
        root,
        done: (0..n).map(|_| AtomicBool::new(false)).collect(),
        threads: (0..plan.threads.len()).map(|_| std::sync::OnceLock::new()).collect(),
        wake: waiters(plan),
        issued: AtomicU32::new(0),
        abort: AtomicBool::new(false),
        slots: Mutex::new(HashMap::new()),
        start: Instant::now(),
        timing,
        data: (0..max_count).map(|i| b"iolearn replay\n"[i % 15]).collect(),
        side,
    };
    let mut outcomes = vec![Outcome::default(); n];
    let mut thread_ns = vec![0u64; plan.threads.len()];
    raise_open_file_limit();
    let mut failed = None;
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (t, acts) in plan.threads.iter().enumerate() {
            let shared = &shared;
            let spawned = std::thread::Builder::new()
                .name(format!("replay-{t}"))
                .spawn_scoped(s, move || {
                    // A panic here must not leave the other threads waiting for its actions.
                    let _guard = AbortOnUnwind(shared);
                    let _ = shared.threads[t].set(std::thread::current());
                    // Sleeps end when asked, not up to 50 us later (the default slack).
                    // SAFETY: prctl on this thread's own timer slack.
                    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
                    let mut buf = vec![0u8; max_count];
                    acts.iter()
                        .map(|&a| (a, shared.step(a as usize, &mut buf)))
                        .collect::<Vec<_>>()
                });
            match spawned {
                Ok(h) => handles.push((t, h)),
                Err(e) => {
                    failed = Some(format!("replay thread {t} of {}: {e}", plan.threads.len()));
                    shared.stop_all();
                    break;
                }
            }
        }
        for (t, h) in handles {
            match h.join() {
                Ok(results) => {
                    thread_ns[t] = results.iter().map(|(_, o)| o.end_ns).max().unwrap_or(0);
                    for (a, o) in results {
                        outcomes[a as usize] = o;
                    }
                }
                Err(_) => {
                    failed.get_or_insert_with(|| format!("replay thread {t} panicked"));
                }
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(Report {
        wall_ns: shared.start.elapsed().as_nanos() as u64,
        outcomes,
        thread_ns,
    })
}

fn open_dir(p: &Path) -> Result<OwnedFd, String> {
    let c =
        CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| format!("{}: a NUL in the name", p.display()))?;
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(format!("{}: {}", p.display(), std::io::Error::last_os_error()));
    }
    // SAFETY: a descriptor we just opened and own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn errno() -> i64 {
    -i64::from(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
}

fn check(ret: i64) -> i64 {
    if ret < 0 {
        errno()
    } else {
        ret
    }
}

/// A name under the root (leading `/` dropped: RESOLVE_IN_ROOT makes it the root's anyway).
fn rel(abs: &[u8]) -> Result<CString, i64> {
    let p = abs.strip_prefix(b"/").unwrap_or(abs);
    let p = if p.is_empty() { &b"."[..] } else { p };
    // A name with a NUL in it is not a name the kernel could have taken.
    CString::new(p).map_err(|_| -i64::from(libc::EINVAL))
}

/// The target directory: every name is resolved in it, as if it were `/`.
struct Root(OwnedFd);

impl Root {
    /// `openat2(root, abs, RESOLVE_IN_ROOT)`.
    fn open_in_root(&self, abs: &[u8], flags: u64, mode: u32) -> Result<OwnedFd, i64> {
        let name = rel(abs)?;
        // SAFETY: open_how is plain data; zeroed is a valid value (libc marks it non-exhaustive).
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = flags | libc::O_CLOEXEC as u64;
        // A mode only with O_CREAT or O_TMPFILE (whose bits include O_DIRECTORY's): openat2 refuses it otherwise.
        let creates = flags & libc::O_CREAT as u64 != 0 || flags & libc::O_TMPFILE as u64 == libc::O_TMPFILE as u64;
        how.mode = if creates { u64::from(mode & 0o7777) } else { 0 };
        how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_XDEV;
        // SAFETY: valid pointers for the duration of the call; the result is checked.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                self.0.as_raw_fd(),
                name.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd < 0 {
            return Err(errno());
        }
        // SAFETY: a descriptor we just opened and own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }

    /// The directory holding `abs`'s last name (resolved in the root), and that name.
    fn parent_of(&self, abs: &[u8]) -> Result<(OwnedFd, CString), i64> {
        let trimmed = abs.strip_suffix(b"/").unwrap_or(abs);
        let cut = trimmed.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        let (dir, name) = trimmed.split_at(cut);
        let name = if name.is_empty() { &b"."[..] } else { name };
        let d = self.open_in_root(dir, (libc::O_PATH | libc::O_DIRECTORY) as u64, 0)?;
        Ok((d, CString::new(name.to_vec()).map_err(|_| -i64::from(libc::EINVAL))?))
    }
}

impl Shared<'_> {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Wait until what `a` waits for has completed; false when the replay was stopped.
    /// Wait until action `a` may start (false: the replay stopped). The thread parks; the
    /// actions it waits for wake it as they end (`wake`), the previous action's issue does
    /// in temporal order; a wake-up that comes before the park makes the park return at once.
    fn wait_for(&self, a: usize) -> bool {
        let deps = &self.plan.deps[a];
        let stopped = || self.abort.load(Ordering::Acquire);
        let ready = || deps.iter().all(|&d| self.done[d as usize].load(Ordering::Acquire));
        let turn = || self.plan.mode != Mode::TemporallyOrdered || self.issued.load(Ordering::Acquire) == a as u32;
        while !(ready() && turn()) {
            if stopped() {
                return false;
            }
            // The timeout only bounds a wake-up lost to a bug; the wake-ups are exact.
            std::thread::park_timeout(Duration::from_millis(50));
        }
        !stopped()
    }

    fn unpark(&self, t: u32) {
        if let Some(h) = self.threads.get(t as usize).and_then(|x| x.get()) {
            h.unpark();
        }
    }

    /// Stop the replay: every waiting thread wakes and gives up.
    fn stop_all(&self) {
        self.abort.store(true, Ordering::Release);
        for t in 0..self.threads.len() {
            self.unpark(t as u32);
        }
    }

    fn step(&self, a: usize, buf: &mut [u8]) -> Outcome {
        let r = &self.trace.records[a];
        if !self.wait_for(a) {
            return Outcome {
                ret: r.ret,
                ..Outcome::default()
            };
        }
        if let Timing::Scaled(f) = self.timing {
            // A gap longer than a minute in a trace is idle time nobody wants replayed.
            let d = ((self.plan.predelay_ns[a] as f64 * f) as u64).min(MAX_PREDELAY_NS);
            pause(Duration::from_nanos(d));
        }
        let start = self.now();
        // A fork copies its process's descriptors before the next call may begin (its child's
        // first call may be that next one).
        let forks = self.plan.fork_copies.contains_key(&(a as u32));
        let issue = || {
            self.issued.store(a as u32 + 1, Ordering::Release);
            if let Some(&next) = self.plan.thread_of.get(a + 1) {
                self.unpark(next);
            }
        };
        let ordered = self.plan.mode == Mode::TemporallyOrdered;
        if ordered && !forks {
            issue();
        }
        let (ret, replayed) = match self.execute(a, r, buf) {
            Some(ret) => (ret, true),
            None => {
                // A call the replay cannot make (an exec, a fork, I/O on a pipe or socket the
                // trace did not open) took time there all the same: paced timing spends it.
                if let (Timing::Scaled(f), Some(l)) = (self.timing, r.latency_ns()) {
                    pause(Duration::from_nanos(((l as f64 * f) as u64).min(MAX_PREDELAY_NS)));
                }
                (r.ret, false)
            }
        };
        let read = r.call.is_some_and(|c| c.moves_data() && !c.writes());
        let data_ok = match usize::try_from(ret) {
            Ok(n) if read && replayed && ret == r.ret && n <= buf.len() => self.side.agrees(r, &buf[..n]),
            _ => None,
        };
        if ordered && forks {
            issue();
        }
        // Descriptors this call ended without a close (exit_group, a number reused): their
        // files close here as they did there.
        if let Some(ids) = self.plan.fd_drop.get(&(a as u32)) {
            for &id in ids {
                self.take(Some(id));
            }
        }
        let end = self.now();
        self.done[a].store(true, Ordering::Release);
        for &t in &self.wake[a] {
            self.unpark(t);
        }
        Outcome {
            ret,
            replayed,
            ok: !replayed || agrees(r, ret),
            data_ok,
            start_ns: start,
            end_ns: end,
        }
    }

    /// The open file of descriptor resource `id`: `Err(None)` when the plan does not follow
    /// the descriptor (not replayed), `Err(Some(-EBADF))` when it does but the replay has no
    /// such file open now (an unconstrained order, or its open failed here).
    fn slot(&self, id: Option<u32>) -> Result<Arc<OwnedFd>, Option<i64>> {
        let id = id.ok_or(None)?;
        let slots = self.slots.lock().expect("descriptor table");
        slots.get(&id).cloned().ok_or(Some(-i64::from(libc::EBADF)))
    }

    fn put(&self, id: Option<u32>, f: Arc<OwnedFd>) {
        if let Some(id) = id {
            self.slots.lock().expect("descriptor table").insert(id, f);
        }
    }

    fn take(&self, id: Option<u32>) -> Option<Arc<OwnedFd>> {
        self.slots.lock().expect("descriptor table").remove(&id?)
    }

    /// The `count` bytes a write writes: the trace's own where it kept them (the pattern after
    /// them when the call asked to write more than it did), else the pattern.
    fn written(&self, r: &SysRecord, count: usize, buf: &mut [u8]) -> *const u8 {
        match self.side.bytes(r.data) {
            Some(b) if b.len() >= count => b.as_ptr(),
            Some(b) => {
                buf[..b.len()].copy_from_slice(b);
                buf[b.len()..count].copy_from_slice(&self.data[b.len()..count]);
                buf.as_ptr()
            }
            None => self.data.as_ptr(),
        }
    }

    /// Run one call for real; `None` when it is not replayed.
    fn execute(&self, a: usize, r: &SysRecord, buf: &mut [u8]) -> Option<i64> {
        let call = r.call?;
        if let Some(pairs) = self.plan.fork_copies.get(&(a as u32)) {
            // The child's descriptors: this process's open files as they are now.
            let mut slots = self.slots.lock().expect("descriptor table");
            for (from, to) in pairs {
                if let Some(f) = slots.get(from).cloned() {
                    slots.insert(*to, f);
                }
            }
            return None;
        }
        let path = self.plan.abs_path[a].as_deref();
        let path2 = self.plan.abs_path2[a].as_deref();
        let count = (r.count.unwrap_or(0) as usize).min(buf.len());
        let [fd_use, fd2_use] = self.plan.fd_use[a];
        let [fd_new, _] = self.plan.fd_new[a];
        macro_rules! fd_or_return {
            ($id:expr) => {
                match self.slot($id) {
                    Ok(x) => x,
                    Err(e) => return e,
                }
            };
        }
        Some(match call {
            Call::Open | Call::Openat | Call::Openat2 | Call::Creat => {
                let flags = if call == Call::Creat {
                    (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64
                } else {
                    r.flags.unwrap_or(0)
                };
                match self.root.open_in_root(path?, flags, r.mode.unwrap_or(0o644)) {
                    Ok(f) => {
                        self.put(fd_new, Arc::new(f));
                        0.max(r.ret)
                    }
                    Err(e) => e,
                }
            }
            Call::Close => {
                fd_or_return!(fd_use);
                self.take(fd_use);
                0
            }
            Call::Fcntl if r.new_fd().is_none() => {
                let cmd = r.cmd? as i32;
                if !matches!(cmd, libc::F_GETFL | libc::F_SETFL | libc::F_GETFD | libc::F_SETFD) {
                    return None; // locks, leases, pipe sizes: not replayed
                }
                let f = fd_or_return!(fd_use);
                // SAFETY: fcntl with an integer argument on a descriptor we hold.
                let got = check(i64::from(unsafe {
                    libc::fcntl(f.as_raw_fd(), cmd, r.flags.unwrap_or(0) as libc::c_int)
                }));
                // F_GETFL's flags carry O_LARGEFILE and the like as the kernel sets them:
                // success is what a program can rely on.
                if cmd == libc::F_GETFL && got >= 0 && r.ret >= 0 {
                    r.ret
                } else {
                    got
                }
            }
            Call::Dup | Call::Dup2 | Call::Dup3 | Call::Fcntl => {
                let f = fd_or_return!(fd_use);
                // SAFETY: dup of a descriptor we hold; the result is checked.
                let new = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
                if new < 0 {
                    return Some(errno());
                }
                // dup2 and dup3 end what the new number named before.
                if matches!(call, Call::Dup2 | Call::Dup3) && r.fd != r.fd2 {
                    self.take(fd2_use);
                }
                // SAFETY: a descriptor we just made and own.
                self.put(fd_new, Arc::new(unsafe { OwnedFd::from_raw_fd(new) }));
                r.ret
            }
            Call::Read | Call::Readv => {
                let f = fd_or_return!(fd_use);
                // SAFETY: buf is valid for count bytes.
                check(unsafe { libc::read(f.as_raw_fd(), buf.as_mut_ptr().cast(), count) } as i64)
            }
            Call::Pread64 | Call::Preadv | Call::Preadv2 => {
                let f = fd_or_return!(fd_use);
                // SAFETY: as above.
                check(
                    unsafe { libc::pread(f.as_raw_fd(), buf.as_mut_ptr().cast(), count, r.offset.unwrap_or(0)) } as i64,
                )
            }
            Call::Write | Call::Writev => {
                let f = fd_or_return!(fd_use);
                let data = self.written(r, count, buf);
                // SAFETY: data is valid for count bytes.
                check(unsafe { libc::write(f.as_raw_fd(), data.cast(), count) } as i64)
            }
            Call::Pwrite64 | Call::Pwritev | Call::Pwritev2 => {
                let f = fd_or_return!(fd_use);
                let data = self.written(r, count, buf);
                // SAFETY: as above.
                check(unsafe { libc::pwrite(f.as_raw_fd(), data.cast(), count, r.offset.unwrap_or(0)) } as i64)
            }
            Call::Lseek => {
                let f = fd_or_return!(fd_use);
                // SAFETY: plain syscall on a descriptor we hold.
                check(unsafe { libc::lseek(f.as_raw_fd(), r.offset.unwrap_or(0), r.cmd.unwrap_or(0) as i32) })
            }
            Call::Fsync => check(i64::from(unsafe { libc::fsync(fd_or_return!(fd_use).as_raw_fd()) })),
            Call::Fdatasync => check(i64::from(unsafe { libc::fdatasync(fd_or_return!(fd_use).as_raw_fd()) })),
            Call::Ftruncate => check(i64::from(unsafe {
                libc::ftruncate(fd_or_return!(fd_use).as_raw_fd(), r.offset.unwrap_or(0))
            })),
            Call::Fallocate => check(i64::from(unsafe {
                libc::fallocate(
                    fd_or_return!(fd_use).as_raw_fd(),
                    r.flags.unwrap_or(0) as i32,
                    r.offset.unwrap_or(0),
                    r.count.unwrap_or(0) as i64,
                )
            })),
            Call::Fadvise64 => {
                let f = fd_or_return!(fd_use);
                // SAFETY: plain syscall. posix_fadvise returns the error number itself.
                let e = unsafe {
                    libc::posix_fadvise(
                        f.as_raw_fd(),
                        r.offset.unwrap_or(0),
                        r.count.unwrap_or(0) as i64,
                        r.cmd.unwrap_or(0) as i32,
                    )
                };
                -i64::from(e)
            }
            Call::SyncFileRange => check(i64::from(unsafe {
                libc::sync_file_range(
                    fd_or_return!(fd_use).as_raw_fd(),
                    r.offset.unwrap_or(0),
                    r.count.unwrap_or(0) as i64,
                    r.flags.unwrap_or(0) as u32,
                )
            })),
            Call::Fstat => {
                let f = fd_or_return!(fd_use);
                // SAFETY: st is a valid out-parameter.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                check(i64::from(unsafe { libc::fstat(f.as_raw_fd(), &mut st) }))
            }
            Call::Getdents64 | Call::Getdents => {
                let f = fd_or_return!(fd_use);
                // SAFETY: buf is valid for count bytes.
                check(unsafe { libc::syscall(libc::SYS_getdents64, f.as_raw_fd(), buf.as_mut_ptr(), count) })
            }
            Call::Stat
            | Call::Lstat
            | Call::Newfstatat
            | Call::Statx
            | Call::Access
            | Call::Faccessat
            | Call::Faccessat2 => {
                if r.path.as_deref() == Some(b"") && r.flags.unwrap_or(0) & libc::AT_EMPTY_PATH as u64 != 0 {
                    // The descriptor's own object (the plan put its resource in `fd_use`).
                    let f = fd_or_return!(fd_use);
                    // SAFETY: st is a valid out-parameter; an empty C string.
                    let mut st: libc::stat = unsafe { std::mem::zeroed() };
                    return Some(check(i64::from(unsafe {
                        libc::fstatat(f.as_raw_fd(), c"".as_ptr(), &mut st, libc::AT_EMPTY_PATH)
                    })));
                }
                let nofollow = call == Call::Lstat || r.flags.unwrap_or(0) & libc::AT_SYMLINK_NOFOLLOW as u64 != 0;
                let mut flags = libc::O_PATH as u64;
                if nofollow {
                    flags |= libc::O_NOFOLLOW as u64;
                }
                match self.root.open_in_root(path?, flags, 0) {
                    Ok(_) => 0,
                    Err(e) => e,
                }
            }
            Call::Mkdir | Call::Mkdirat => match self.root.parent_of(path?) {
                Ok((d, name)) => check(i64::from(unsafe {
                    libc::mkdirat(d.as_raw_fd(), name.as_ptr(), r.mode.unwrap_or(0o755))
                })),
                Err(e) => e,
            },
            Call::Unlink | Call::Unlinkat | Call::Rmdir => match self.root.parent_of(path?) {
                Ok((d, name)) => {
                    let flags = if call == Call::Rmdir {
                        libc::AT_REMOVEDIR
                    } else {
                        r.flags.unwrap_or(0) as i32
                    };
                    check(i64::from(unsafe {
                        libc::unlinkat(d.as_raw_fd(), name.as_ptr(), flags)
                    }))
                }
                Err(e) => e,
            },
            Call::Rename | Call::Renameat | Call::Renameat2 => {
                match (self.root.parent_of(path?), self.root.parent_of(path2?)) {
                    (Ok((d1, n1)), Ok((d2, n2))) => check(unsafe {
                        libc::syscall(
                            libc::SYS_renameat2,
                            d1.as_raw_fd(),
                            n1.as_ptr(),
                            d2.as_raw_fd(),
                            n2.as_ptr(),
                            r.flags.unwrap_or(0) as u32,
                        )
                    }),
                    (Err(e), _) | (_, Err(e)) => e,
                }
            }
            Call::Link | Call::Linkat => match (self.root.parent_of(path?), self.root.parent_of(path2?)) {
                (Ok((d1, n1)), Ok((d2, n2))) => check(i64::from(unsafe {
                    libc::linkat(d1.as_raw_fd(), n1.as_ptr(), d2.as_raw_fd(), n2.as_ptr(), 0)
                })),
                (Err(e), _) | (_, Err(e)) => e,
            },
            Call::Symlink | Call::Symlinkat => match self.root.parent_of(path?) {
                Ok((d, name)) => {
                    let target = CString::new(r.path2.clone()?).ok()?;
                    check(i64::from(unsafe {
                        libc::symlinkat(target.as_ptr(), d.as_raw_fd(), name.as_ptr())
                    }))
                }
                Err(e) => e,
            },
            Call::Readlink | Call::Readlinkat => match self.root.parent_of(path?) {
                Ok((d, name)) => {
                    check(
                        unsafe { libc::readlinkat(d.as_raw_fd(), name.as_ptr(), buf.as_mut_ptr().cast(), count) }
                            as i64,
                    )
                }
                Err(e) => e,
            },
            Call::Truncate => match self.root.open_in_root(path?, libc::O_WRONLY as u64, 0) {
                Ok(f) => check(i64::from(unsafe {
                    libc::ftruncate(f.as_raw_fd(), r.offset.unwrap_or(0))
                })),
                Err(e) => e,
            },
            Call::Chmod | Call::Fchmodat | Call::Fchmod => {
                let f = match call {
                    Call::Fchmod => fd_or_return!(fd_use),
                    _ => match self.root.open_in_root(path?, libc::O_PATH as u64, 0) {
                        Ok(f) => Arc::new(f),
                        Err(e) => return Some(e),
                    },
                };
                let empty = c"";
                // SAFETY: fchmodat2 with AT_EMPTY_PATH acts on the descriptor itself.
                check(unsafe {
                    libc::syscall(
                        libc::SYS_fchmodat2,
                        f.as_raw_fd(),
                        empty.as_ptr(),
                        r.mode.unwrap_or(0) & 0o7777,
                        libc::AT_EMPTY_PATH,
                    )
                })
            }
            Call::Chown | Call::Lchown | Call::Fchownat | Call::Fchown => {
                let f = match call {
                    Call::Fchown => fd_or_return!(fd_use),
                    _ => {
                        let nofollow =
                            call == Call::Lchown || r.flags.unwrap_or(0) & libc::AT_SYMLINK_NOFOLLOW as u64 != 0;
                        let flags = libc::O_PATH as u64 | if nofollow { libc::O_NOFOLLOW as u64 } else { 0 };
                        match self.root.open_in_root(path?, flags, 0) {
                            Ok(f) => Arc::new(f),
                            Err(e) => return Some(e),
                        }
                    }
                };
                let empty = c"";
                check(i64::from(unsafe {
                    libc::fchownat(
                        f.as_raw_fd(),
                        empty.as_ptr(),
                        r.uid.unwrap_or(u32::MAX),
                        r.gid.unwrap_or(u32::MAX),
                        libc::AT_EMPTY_PATH,
                    )
                }))
            }
            _ => return None,
        })
    }
}

/// A target directory's check: it must exist and be a directory (not a symlink to one).
pub fn check_target(p: &Path) -> Result<PathBuf, String> {
    let m = std::fs::symlink_metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
    if !m.is_dir() {
        return Err(format!("{}: not a directory (a symlink is refused)", p.display()));
    }
    // The replay stands the target in for `/`: the real one would be replayed over.
    if std::fs::canonicalize(p).is_ok_and(|c| c == Path::new("/")) {
        return Err(format!(
            "{}: is the root directory; replay into a directory of its own",
            p.display()
        ));
    }
    Ok(p.to_path_buf())
}

/// After [`init`], write back what the trace's reads returned of the files from before it,
/// from its data side file (`--buffers full`), so that the replay's reads return the same
/// bytes (verification level 2). Returns the bytes written.
pub fn init_data(target: &Path, plan: &Plan, side: Side<'_>) -> Result<u64, String> {
    let root = Root(open_dir(target)?);
    let mut written = 0;
    for (path, at, off, len) in &plan.initial_data {
        let Some(bytes) = side.bytes(Data::Bytes {
            offset: *off,
            len: *len,
        }) else {
            continue;
        };
        let shown = || format!("{}: {}", target.display(), String::from_utf8_lossy(path));
        let f = match root.open_in_root(path, (libc::O_WRONLY | libc::O_NOFOLLOW) as u64, 0) {
            Ok(f) => f,
            // A directory or a link by now (the trace did not show which it was): left alone.
            Err(e) if e == -i64::from(libc::EISDIR) || e == -i64::from(libc::ELOOP) => continue,
            Err(e) => return Err(format!("{}: {}", shown(), std::io::Error::from_raw_os_error(-e as i32))),
        };
        use std::os::unix::fs::FileExt;
        std::fs::File::from(f)
            .write_all_at(bytes, *at)
            .map_err(|e| format!("{}: {e}", shown()))?;
        written += bytes.len() as u64;
    }
    Ok(written)
}

/// Prepare `target` for `plan` (delta init, as ARTC's): make the tree the trace started from
/// where it is missing (directories, files at least as large as the trace read them, with
/// data written, not holes; symlinks), and remove the names the trace creates, so that its
/// creations succeed again. Returns (entries made or grown, names removed).
pub fn init(target: &Path, plan: &Plan) -> Result<(usize, usize), String> {
    let root = Root(open_dir(target)?);
    let err = |p: &[u8], e: i64| {
        format!(
            "{}: {}: {}",
            target.display(),
            String::from_utf8_lossy(p),
            std::io::Error::from_raw_os_error(-e as i32)
        )
    };
    let (mut made, mut removed) = (0, 0);
    let mut grown = 0u64;
    for p in &plan.created {
        let Ok((d, name)) = root.parent_of(p) else { continue };
        // SAFETY: plain *at calls on a directory descriptor we hold.
        let gone = unsafe { libc::unlinkat(d.as_raw_fd(), name.as_ptr(), 0) } == 0;
        let gone = gone
            || (std::io::Error::last_os_error().raw_os_error() == Some(libc::EISDIR) && {
                // A directory: removed with what is in it, through /proc's name for the
                // descriptor the root gave (nothing outside the target is reachable).
                let at = PathBuf::from(format!("/proc/self/fd/{}", d.as_raw_fd())).join(
                    <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name.as_bytes()),
                );
                std::fs::remove_dir_all(at).is_ok()
            });
        removed += usize::from(gone);
    }
    for entry in &plan.initial {
        match entry {
            super::model::Initial::Dir(p) => {
                let (d, name) = root.parent_of(p).map_err(|e| err(p, e))?;
                // SAFETY: as above.
                if unsafe { libc::mkdirat(d.as_raw_fd(), name.as_ptr(), 0o755) } == 0 {
                    made += 1;
                } else if std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
                    return Err(err(p, errno()));
                }
            }
            super::model::Initial::Symlink(p, t) => {
                let (d, name) = root.parent_of(p).map_err(|e| err(p, e))?;
                let t = CString::new(t.clone()).map_err(|_| err(p, -i64::from(libc::EINVAL)))?;
                // SAFETY: as above.
                if unsafe { libc::symlinkat(t.as_ptr(), d.as_raw_fd(), name.as_ptr()) } == 0 {
                    made += 1;
                }
            }
            super::model::Initial::File(p, size) => {
                // What the trace read of the kernel's own trees (/dev, /proc, /sys) is made as
                // data up to 1 MiB a file: a long read of /dev/zero is no reason to write
                // gigabytes (beyond that, its reads are short in the replay).
                let system = super::model::kernel_tree(p);
                let size = &if system { (*size).min(1 << 20) } else { *size };
                let f = match root.open_in_root(p, (libc::O_CREAT | libc::O_WRONLY | libc::O_NOFOLLOW) as u64, 0o644) {
                    Ok(f) => f,
                    // Already there as a directory (the trace did not show which it was).
                    Err(e) if e == -i64::from(libc::EISDIR) => continue,
                    Err(e) => return Err(err(p, e)),
                };
                let mut file = std::fs::File::from(f);
                let have = file
                    .metadata()
                    .map_err(|e| format!("{}: {e}", String::from_utf8_lossy(p)))?
                    .len();
                if have < *size {
                    grown += size - have;
                    if grown > MAX_INIT_BYTES {
                        return Err(format!(
                            "{}: {}: the tree the trace read needs more than {} GiB of file data; \
                             make it yourself and replay with --no-init",
                            target.display(),
                            String::from_utf8_lossy(p),
                            MAX_INIT_BYTES >> 30
                        ));
                    }
                    use std::io::{Seek, SeekFrom, Write};
                    file.seek(SeekFrom::Start(have)).map_err(|e| e.to_string())?;
                    let chunk = vec![b'i'; 1 << 20];
                    let mut left = size - have;
                    while left > 0 {
                        let k = left.min(chunk.len() as u64) as usize;
                        file.write_all(&chunk[..k])
                            .map_err(|e| format!("{}: {e}", String::from_utf8_lossy(p)))?;
                        left -= k as u64;
                    }
                    made += 1;
                }
            }
        }
    }
    Ok((made, removed))
}
