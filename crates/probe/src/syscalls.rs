//! The system calls of a process tree, streamed to a callback (Re-Animator's capture on a
//! stock kernel: `iolearn trace record`). Every call of the table in
//! `iolearn_trace::sys::calls` made by the traced processes, or by any process they start, is
//! seen with its arguments, the paths it names, its entry and return times, its return value
//! and the results the table asks for (a stat's mode and size, a link's target, pipe's
//! descriptors, an iovec's total), and, when asked, the bytes each read and write moved
//! ([`Captured::Data`], sent before its call's record).
//!
//! Nothing is dropped silently: a call the ring had no room for is counted, in total and per
//! call ([`Lost`]). With [`Hold`], the traced program is held (by the caller's means: a
//! freezer cgroup) while the ring is fuller than a high-water mark, so nothing is lost.

use crate::ProbeError;
use iolearn_trace::sys::{stat_result, Call, Role, SysRecord};

/// Call numbers followed (x86-64's are below this).
pub const SYS_NR: usize = 512;
const SYS_PATH: usize = 256;
const SYS_RESULT: usize = 64;
const NO_ARG: u8 = 0xff;
const UNREADABLE: u16 = 0xffff;
/// Bytes of a call record (`struct sys_event` of `bpf/syscalls.h`: a 96-byte head, the two
/// paths, the result).
pub const EVENT_BYTES: usize = HEAD + 2 * SYS_PATH + SYS_RESULT;
/// Bytes of a call record without paths (`struct sys_event_short`: the head, the result).
pub const SHORT_BYTES: usize = HEAD + SYS_RESULT;
const HEAD: usize = 96;
/// The head of a data record (`struct sys_data`).
const DATA_HEAD: usize = 32;
/// A data record's first word.
const DATA_MARK: u64 = u64::MAX;

/// What the capture reads back at a call's return (`bpf/syscalls.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum ResultKind {
    None = 0,
    Stat = 1,
    Statx = 2,
    String = 3,
    Fds = 4,
    Iov = 5,
    How = 6,
    Clone = 7,
}

/// The per-call tables the programs read, from the call table: which calls to follow, which
/// arguments are paths, what result to read and from which argument.
#[derive(Debug, Clone)]
pub struct Tables {
    /// A bit per call number.
    pub wanted: [u64; SYS_NR / 64],
    /// The argument holding `path` and `path2` (0xff: none).
    pub path_arg: [[u8; 2]; SYS_NR],
    /// What to read at return.
    pub result_kind: [u8; SYS_NR],
    /// From which argument.
    pub result_arg: [u8; SYS_NR],
    /// The argument holding the data a read or write moves (0xff: none).
    pub data_arg: [u8; SYS_NR],
    /// That argument is an iovec array (its count in the next).
    pub data_iov: [u8; SYS_NR],
}

impl Tables {
    /// Built from [`Call::ALL`] and each call's roles.
    pub fn from_calls() -> Tables {
        let mut t = Tables {
            wanted: [0; SYS_NR / 64],
            path_arg: [[NO_ARG; 2]; SYS_NR],
            result_kind: [0; SYS_NR],
            result_arg: [NO_ARG; SYS_NR],
            data_arg: [NO_ARG; SYS_NR],
            data_iov: [0; SYS_NR],
        };
        for &call in Call::ALL {
            let Some(nr) = call.x86_64_nr().map(|n| n as usize).filter(|&n| n < SYS_NR) else {
                continue;
            };
            t.wanted[nr / 64] |= 1 << (nr % 64);
            let roles = call.roles();
            let at = |role: Role| roles.iter().position(|&r| r == role).map(|i| i as u8);
            t.path_arg[nr] = [at(Role::Path).unwrap_or(NO_ARG), at(Role::Path2).unwrap_or(NO_ARG)];
            let (kind, arg) = match call {
                Call::Stat | Call::Lstat | Call::Fstat | Call::Newfstatat => (ResultKind::Stat, at(Role::Out)),
                Call::Statx => (ResultKind::Statx, at(Role::Out)),
                Call::Readlink | Call::Readlinkat => (ResultKind::String, at(Role::Out)),
                Call::Pipe | Call::Pipe2 => (ResultKind::Fds, at(Role::OutFds)),
                _ if roles.contains(&Role::Iov) => (ResultKind::Iov, at(Role::Iov)),
                Call::Openat2 => (ResultKind::How, Some(2)),
                Call::Clone3 => (ResultKind::Clone, Some(0)),
                _ => (ResultKind::None, None),
            };
            t.result_kind[nr] = kind as u8;
            t.result_arg[nr] = arg.unwrap_or(NO_ARG);
            // The read and write families: their return value counts the bytes moved (an
            // xattr's value is not file data, and setxattr returns 0).
            if call.moves_data() {
                let iov = at(Role::Iov);
                t.data_arg[nr] = iov.or(at(Role::Buf)).unwrap_or(NO_ARG);
                t.data_iov[nr] = u8::from(iov.is_some());
            }
        }
        t
    }
}

/// What the ring delivers: a call, or part of the data a call moved (sent just before the
/// call's own record, from the same thread).
#[derive(Debug, PartialEq, Eq)]
pub enum Captured<'a> {
    /// A call.
    Call(SyscallEvent),
    /// `bytes` of the data of the call `tid` entered at `enter_ns`, from `offset` on.
    Data {
        /// The call's entry time.
        enter_ns: u64,
        /// Its thread.
        tid: u32,
        /// Where these bytes start in the call's data.
        offset: u64,
        /// The bytes.
        bytes: &'a [u8],
    },
}

impl Captured<'_> {
    /// Decode one ring record (`None`: not a record of this capture's layout).
    pub fn decode(b: &[u8]) -> Option<Captured<'_>> {
        let u64_at = |i: usize| {
            b.get(i..i + 8)
                .map(|s| u64::from_ne_bytes(s.try_into().expect("8 bytes")))
        };
        if u64_at(0)? != DATA_MARK {
            return SyscallEvent::decode(b).map(Captured::Call);
        }
        let head = b.get(..DATA_HEAD)?;
        let len = u32::from_ne_bytes(head[20..24].try_into().expect("4 bytes")) as usize;
        Some(Captured::Data {
            enter_ns: u64_at(8)?,
            tid: u32::from_ne_bytes(head[16..20].try_into().expect("4 bytes")),
            offset: u64_at(24)?,
            bytes: b.get(DATA_HEAD..DATA_HEAD + len)?,
        })
    }
}

/// One call as the ring delivers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallEvent {
    /// Entry (`CLOCK_MONOTONIC`), ns.
    pub enter_ns: u64,
    /// Return; `None` for exit and exit_group.
    pub exit_ns: Option<u64>,
    /// The six argument registers.
    pub args: [u64; 6],
    /// Return value (>= 0 or -errno).
    pub ret: i64,
    /// Process (thread group) and thread.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// x86-64 call number.
    pub nr: u32,
    /// The path arguments (empty where the call has none; `None`: unreadable).
    pub paths: [Option<Vec<u8>>; 2],
    /// A path the capture could not read.
    pub unreadable: bool,
    /// A path longer than the capture keeps (the prefix is kept).
    pub cut: bool,
    /// The result bytes read back.
    pub result: Vec<u8>,
}

impl SyscallEvent {
    /// Decode one call record (either size).
    pub fn decode(b: &[u8]) -> Option<SyscallEvent> {
        let with_paths = match b.len() {
            SHORT_BYTES => false,
            n if n >= EVENT_BYTES => true,
            _ => return None,
        };
        let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u16_at = |i: usize| u16::from_ne_bytes(b[i..i + 2].try_into().expect("2 bytes"));
        let mut args = [0u64; 6];
        for (i, a) in args.iter_mut().enumerate() {
            *a = u64_at(16 + 8 * i);
        }
        let mut unreadable = false;
        let mut paths = [None, None];
        for (k, p) in paths.iter_mut().enumerate() {
            let len = u16_at(84 + 2 * k);
            // A call without a path argument reads as an empty one: `to_record` only takes
            // the paths of calls whose roles have them.
            if len == UNREADABLE {
                unreadable = true;
            } else if with_paths {
                let start = HEAD + k * SYS_PATH;
                *p = Some(b[start..start + (len as usize).min(SYS_PATH - 1)].to_vec());
            } else {
                *p = Some(Vec::new());
            }
        }
        let result_len = (u16_at(88) as usize).min(SYS_RESULT);
        let r0 = if with_paths { HEAD + 2 * SYS_PATH } else { HEAD };
        let exit = u64_at(8);
        Some(SyscallEvent {
            enter_ns: u64_at(0),
            exit_ns: (exit != 0).then_some(exit),
            args,
            ret: u64_at(64) as i64,
            pid: u32_at(72),
            tid: u32_at(76),
            nr: u32_at(80),
            paths,
            unreadable,
            cut: u16_at(90) != 0,
            result: b[r0..r0 + result_len].to_vec(),
        })
    }

    /// The call as a trace record (times as captured; `id` 0: numbered by the trace).
    pub fn to_record(&self) -> SysRecord {
        let mut r = SysRecord {
            pid: self.pid,
            tid: self.tid,
            enter_ns: self.enter_ns,
            exit_ns: self.exit_ns,
            ret: self.ret,
            ..Default::default()
        };
        let Some(call) = Call::by_x86_64_nr(self.nr) else {
            r.other = Some(format!("syscall_{}", self.nr));
            return r;
        };
        r.call = Some(call);
        let res = &self.result;
        let u64_of = |i: usize| {
            res.get(i..i + 8)
                .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        };
        for (i, role) in call.roles().iter().enumerate() {
            let v = self.args[i];
            match role {
                Role::Fd => r.fd = Some(v as i32),
                Role::Fd2 => r.fd2 = Some(v as i32),
                Role::DirFd => r.dirfd = Some(v as i32),
                Role::DirFd2 => r.dirfd2 = Some(v as i32),
                // A path the capture cut short is not the name the call used: kept unknown
                // (the call is then not replayed), not as a prefix that names another file.
                Role::Path => r.path = self.paths[0].clone().filter(|_| !self.cut),
                Role::Path2 => r.path2 = self.paths[1].clone().filter(|_| !self.cut),
                Role::Count => r.count = Some(v),
                Role::Offset => r.offset = Some(v as i64),
                Role::Flags => r.flags = Some(v),
                Role::Mode => r.mode = Some(v as u32),
                Role::Cmd => r.cmd = Some(v),
                Role::Addr => r.addr = Some(v),
                Role::Uid => r.uid = Some(v as u32),
                Role::Gid => r.gid = Some(v as u32),
                Role::Iov => r.count = u64_of(0),
                Role::OutFds => {
                    if res.len() >= 8 {
                        r.fd = Some(i32::from_ne_bytes(res[0..4].try_into().expect("4 bytes")));
                        r.fd2 = Some(i32::from_ne_bytes(res[4..8].try_into().expect("4 bytes")));
                    }
                }
                Role::Out => match call {
                    Call::Readlink | Call::Readlinkat if self.ret > 0 && self.ret as usize <= res.len() => {
                        r.result = Some(res[..self.ret as usize].to_vec());
                    }
                    Call::Stat | Call::Lstat | Call::Fstat | Call::Newfstatat | Call::Statx if res.len() >= 16 => {
                        let mode = u32::from_ne_bytes(res[0..4].try_into().expect("4 bytes"));
                        r.result = Some(stat_result(mode, u64_of(8)));
                    }
                    _ => {}
                },
                Role::Buf | Role::Name | Role::Skip => {}
            }
        }
        // openat2's flags and mode, clone3's flags: read from their structs (unknown when the
        // capture could not read them: the register holds the struct's address, not flags).
        match call {
            Call::Openat2 => {
                r.flags = u64_of(0).filter(|_| res.len() >= 16);
                r.mode = u64_of(8).map(|m| m as u32);
            }
            Call::Clone3 => r.flags = u64_of(0),
            _ => {}
        }
        if matches!(call, Call::Exit | Call::ExitGroup) {
            r.exit_ns = None;
        }
        r
    }
}

/// What the capture could not keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lost {
    /// Calls the ring had no room for.
    pub records: u64,
    /// Of those, calls the table of calls in flight had no room for.
    pub in_flight: u64,
    /// 32-bit calls (not decoded).
    pub compat: u64,
    /// Lost calls per call number (summed over CPUs), nonzero ones.
    pub by_nr: Vec<(u32, u64)>,
    /// Calls whose data the ring had no room for (their records were kept).
    pub data: u64,
    /// Times the traced program was held ([`Hold`]).
    pub holds: u64,
}

/// Hold the traced program while the ring is fuller than `high` bytes, until it is down to
/// `low`: `set(true)` holds it, `set(false)` lets it go (called on the capture's thread).
pub struct Hold {
    /// Bytes waiting in the ring above which the program is held.
    pub high: u64,
    /// Bytes waiting below which it goes on.
    pub low: u64,
    /// Hold (true) or release (false); an error ends the capture.
    pub set: Box<dyn FnMut(bool) -> Result<(), String> + Send>,
}

/// How to capture.
pub struct Options {
    /// Ring size, bytes: a power of two, at least 1 MiB.
    pub ring_bytes: u32,
    /// A process whose children (not itself) are traced from their creation.
    pub children_of: Option<u32>,
    /// Send the data of the read and write families ([`Captured::Data`]).
    pub data: bool,
    /// Backpressure instead of loss.
    pub hold: Option<Hold>,
}

/// A running capture; stops (and joins its thread) when dropped or [`SyscallWatch::stop`]ped.
pub struct SyscallWatch {
    #[cfg_attr(not(iolearn_bpf), allow(dead_code))]
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    #[cfg_attr(not(iolearn_bpf), allow(dead_code))]
    thread: Option<std::thread::JoinHandle<Result<Lost, ProbeError>>>,
}

impl SyscallWatch {
    /// Trace the processes `pids` (and every process they start from now on) and, with
    /// `children_of`, every process that one starts (not itself) from its creation;
    /// `on_event` gets every record, on a thread of the watch's own, in the order the ring
    /// received them (a call at its return, its data just before it).
    #[cfg(iolearn_bpf)]
    pub fn start(
        pids: &[u32],
        opts: Options,
        on_event: impl FnMut(Captured<'_>) + Send + 'static,
    ) -> Result<SyscallWatch, ProbeError> {
        crate::sys::check_root_and_btf()?;
        let ring_bytes = opts.ring_bytes;
        if !ring_bytes.is_power_of_two() || ring_bytes < 1 << 20 {
            return Err(ProbeError::Map(format!(
                "ring of {ring_bytes} bytes: a power of two, at least 1 MiB"
            )));
        }
        if let Some(h) = &opts.hold {
            if !(h.low < h.high && h.high < u64::from(ring_bytes)) {
                return Err(ProbeError::Map(format!(
                    "hold marks {} and {} bytes: low below high, high below the ring's {ring_bytes}",
                    h.low, h.high
                )));
            }
        }
        let pids = pids.to_vec();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let halt = stop.clone();
        // The skeleton and the ring buffer are not `Send`: they live and die on this thread.
        let thread = std::thread::spawn(move || live::run(&pids, opts, on_event, &halt, ready_tx));
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(SyscallWatch {
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(ProbeError::Denied(
                    "the capture's thread ended before it was ready".into(),
                ))
            }
        }
    }

    /// Always [`ProbeError::NotBuilt`] (this build has no eBPF programs).
    #[cfg(not(iolearn_bpf))]
    pub fn start(
        _: &[u32],
        _: Options,
        _: impl FnMut(Captured<'_>) + Send + 'static,
    ) -> Result<SyscallWatch, ProbeError> {
        Err(ProbeError::NotBuilt)
    }

    /// Still capturing (false: its thread ended early, on an error [`SyscallWatch::stop`]
    /// returns).
    pub fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stop, after delivering what is in the ring; returns what was lost.
    pub fn stop(mut self) -> Result<Lost, ProbeError> {
        self.halt()
    }

    fn halt(&mut self) -> Result<Lost, ProbeError> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            None => Ok(Lost::default()),
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(ProbeError::Map("the capture's thread panicked".into())),
        }
    }
}

impl Drop for SyscallWatch {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

#[cfg(iolearn_bpf)]
mod live {
    use super::{Captured, Lost, Options, Tables, SYS_NR};
    use crate::ProbeError;
    use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
    use libbpf_rs::AsRawLibbpf;
    use libbpf_rs::{MapCore, MapFlags, MapHandle, OpenObject, RingBufferBuilder};
    use std::mem::MaybeUninit;
    use std::os::fd::{AsFd, AsRawFd, FromRawFd};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::Sender;
    use std::time::Duration;

    #[allow(clippy::all, missing_docs, dead_code, non_camel_case_types)]
    mod skel {
        include!(concat!(env!("OUT_DIR"), "/syscalls.skel.rs"));
    }

    const DRAIN_EVERY: Duration = Duration::from_millis(1);
    /// The kernel's largest process id plus one (`PID_MAX_LIMIT`): the bitmap is 512 KiB.
    const PID_MAX_LIMIT: u32 = 4 << 20;

    fn denied(what: &str) -> impl Fn(libbpf_rs::Error) -> ProbeError + '_ {
        move |e| ProbeError::Denied(format!("{what}: {e}"))
    }

    fn load<'o>(
        storage: &'o mut MaybeUninit<OpenObject>,
        pids: &[u32],
        opts: &Options,
    ) -> Result<skel::SyscallsSkel<'o>, ProbeError> {
        let mut open = skel::SyscallsSkelBuilder::default()
            .open(storage)
            .map_err(denied("opening the eBPF object"))?;
        let t = Tables::from_calls();
        let ro = &mut open.maps.rodata_data;
        ro.wanted = t.wanted;
        ro.path_arg = t.path_arg;
        ro.result_kind = t.result_kind;
        ro.result_arg = t.result_arg;
        ro.data_arg = t.data_arg;
        ro.data_iov = t.data_iov;
        ro.capture_data = u8::from(opts.data);
        ro.wake_at = (u64::from(opts.ring_bytes) / 8).min(4 << 20);
        ro.data_room = u64::from(opts.ring_bytes) / 2;
        ro.children_of = opts.children_of.unwrap_or(0);
        open.maps
            .tgid_bits
            .set_max_entries(PID_MAX_LIMIT / 64)
            .map_err(denied("sizing the process bitmap"))?;
        open.maps
            .sys_events
            .set_max_entries(opts.ring_bytes)
            .map_err(denied("sizing the ring"))?;
        let mut s = open.load().map_err(denied("loading the eBPF programs"))?;
        for &pid in pids {
            if pid >= PID_MAX_LIMIT {
                return Err(ProbeError::Map(format!("process id {pid} out of range")));
            }
            let word = pid / 64;
            let key = word.to_ne_bytes();
            let old = s
                .maps
                .tgid_bits
                .lookup(&key, MapFlags::ANY)
                .map_err(|e| ProbeError::Map(e.to_string()))?
                .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("8 bytes")))
                .unwrap_or(0);
            let new = old | 1u64 << (pid % 64);
            s.maps
                .tgid_bits
                .update(&key, &new.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| ProbeError::Map(e.to_string()))?;
        }
        s.attach().map_err(denied("attaching to the system-call tracepoints"))?;
        Ok(s)
    }

    /// Bytes waiting in `ring` (a libbpf `struct ring`; libbpf-rs does not expose it).
    fn waiting(ring: usize) -> u64 {
        // SAFETY: a ring of a live ring buffer (the monitor is joined before it is dropped);
        // this only reads its producer and consumer positions, which libbpf updates atomically.
        unsafe { libbpf_sys::ring__avail_data_size(ring as *const libbpf_sys::ring) as u64 }
    }

    /// Run this thread before any normal one: a hold is only as quick as the monitor's
    /// wake-up, and on a machine the traced program keeps busy a normal thread waits
    /// milliseconds for a CPU while the ring fills in microseconds. It sleeps between
    /// wake-ups, and the kernel's RT throttling keeps a runaway from owning a CPU.
    fn realtime() {
        // SAFETY: a valid sched_param for this thread (0: the caller).
        let ok = unsafe {
            let p = libc::sched_param { sched_priority: 1 };
            libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0
        };
        if !ok {
            eprintln!(
                "iolearn: the capture's hold could not run at real-time priority ({}); a busy machine may fill the ring before it holds",
                std::io::Error::last_os_error()
            );
        }
    }

    /// Hold the program while the ring is too full, on a thread of its own: the drain may be
    /// slow (writing data) and must not delay the hold. Woken by the ring's wake-ups (edge
    /// triggered: the capture forces one per record once an eighth of the ring waits) or
    /// every millisecond; returns how many times it held.
    fn monitor(mut hold: super::Hold, ring: usize, map_fd: i32, done: &AtomicBool) -> Result<u64, ProbeError> {
        realtime();
        // SAFETY: epoll on the ring map's descriptor, which outlives this thread; the event
        // buffer is valid.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(ProbeError::Map(format!("epoll: {}", std::io::Error::last_os_error())));
        }
        // SAFETY: `ep` was just made and is closed once, here.
        let ep = unsafe { std::os::fd::OwnedFd::from_raw_fd(ep) };
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: 0,
        };
        // SAFETY: as above.
        if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, map_fd, &mut ev) } != 0 {
            return Err(ProbeError::Map(format!("epoll: {}", std::io::Error::last_os_error())));
        }
        let (mut held, mut holds) = (false, 0);
        let mut result = Ok(());
        while !done.load(Ordering::Relaxed) {
            // SAFETY: as above.
            unsafe { libc::epoll_wait(ep.as_raw_fd(), &mut ev, 1, 1) };
            let w = waiting(ring);
            let want = if held { w > hold.low } else { w > hold.high };
            if want != held {
                if let Err(e) = (hold.set)(want) {
                    result = Err(e);
                    break;
                }
                held = want;
                holds += u64::from(want);
            }
        }
        if held {
            if let Err(e) = (hold.set)(false) {
                result = result.and(Err(e));
            }
        }
        result
            .map(|()| holds)
            .map_err(|e| ProbeError::Denied(format!("holding the traced program: {e}")))
    }

    pub(super) fn run(
        pids: &[u32],
        mut opts: Options,
        mut on_event: impl FnMut(Captured<'_>),
        stop: &AtomicBool,
        ready: Sender<Result<(), ProbeError>>,
    ) -> Result<Lost, ProbeError> {
        let mut storage = MaybeUninit::<OpenObject>::uninit();
        let skel = match load(&mut storage, pids, &opts) {
            Ok(s) => s,
            Err(e) => {
                let _ = ready.send(Err(e));
                return Ok(Lost::default());
            }
        };
        let map = match MapHandle::try_from(&skel.maps.sys_events) {
            Ok(m) => m,
            Err(e) => {
                let _ = ready.send(Err(ProbeError::Map(e.to_string())));
                return Ok(Lost::default());
            }
        };
        let mut builder = RingBufferBuilder::new();
        let added = builder
            .add(&map, move |data: &[u8]| {
                if let Some(e) = Captured::decode(data) {
                    on_event(e);
                }
                0
            })
            .map(|_| ());
        let ring = match added.and_then(|()| builder.build()) {
            Ok(r) => r,
            Err(e) => {
                let _ = ready.send(Err(ProbeError::Map(e.to_string())));
                return Ok(Lost::default());
            }
        };
        // SAFETY: ring 0 of a live ring buffer (null if libbpf has none: then no hold).
        let ring0 = unsafe { libbpf_sys::ring_buffer__ring(ring.as_libbpf_object().as_ptr(), 0) } as usize;
        if opts.hold.is_some() && ring0 == 0 {
            let _ = ready.send(Err(ProbeError::Map("the ring buffer has no ring to watch".into())));
            return Ok(Lost::default());
        }
        let done = AtomicBool::new(false);
        let mut failed = None;
        /// Ends the monitor however the drain ends (an unwinding drain would otherwise wait
        /// forever in the scope for a monitor that may be holding the program).
        struct Done<'a>(&'a AtomicBool);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let holds = std::thread::scope(|s| {
            let done_on_exit = Done(&done);
            let monitor = opts.hold.take().map(|hold| {
                let (done, fd) = (&done, map.as_fd().as_raw_fd());
                s.spawn(move || monitor(hold, ring0, fd, done))
            });
            let _ = ready.send(Ok(()));
            while failed.is_none() && !stop.load(Ordering::Relaxed) {
                match ring.poll(DRAIN_EVERY).and_then(|()| ring.consume()) {
                    Ok(()) => {}
                    Err(e) if e.kind() == libbpf_rs::ErrorKind::Interrupted => {}
                    Err(e) => failed = Some(ProbeError::Map(format!("reading the system calls: {e}"))),
                }
                if monitor.as_ref().is_some_and(|m| m.is_finished()) {
                    break;
                }
            }
            let _ = ring.consume();
            drop(done_on_exit);
            match monitor.map(|m| m.join()) {
                None => 0,
                Some(Ok(Ok(n))) => n,
                Some(Ok(Err(e))) => {
                    failed.get_or_insert(e);
                    0
                }
                Some(Err(_)) => {
                    failed.get_or_insert(ProbeError::Map("the capture's hold panicked".into()));
                    0
                }
            }
        });
        drop(ring);
        if let Some(e) = failed {
            return Err(e);
        }
        let bss = &skel.maps.bss_data;
        let mut by_nr = Vec::new();
        for nr in 0..SYS_NR as u32 {
            let per_cpu = skel
                .maps
                .lost_by_nr
                .lookup_percpu(&nr.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| ProbeError::Map(e.to_string()))?
                .unwrap_or_default();
            let n: u64 = per_cpu
                .iter()
                .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("8 bytes")))
                .sum();
            if n > 0 {
                by_nr.push((nr, n));
            }
        }
        Ok(Lost {
            records: bss.lost,
            in_flight: bss.lost_pending,
            compat: bss.compat_calls,
            by_nr,
            data: bss.lost_data,
            holds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_follow_the_call_table() {
        let t = Tables::from_calls();
        let nr = |c: Call| c.x86_64_nr().unwrap() as usize;
        assert!(t.wanted[nr(Call::Openat) / 64] >> (nr(Call::Openat) % 64) & 1 == 1);
        assert_eq!(t.path_arg[nr(Call::Openat)], [1, NO_ARG]);
        assert_eq!(t.path_arg[nr(Call::Renameat2)], [1, 3]);
        assert_eq!(
            t.path_arg[nr(Call::Symlink)],
            [1, 0],
            "symlink(target, linkpath): the link is `path`"
        );
        assert_eq!(
            (t.result_kind[nr(Call::Newfstatat)], t.result_arg[nr(Call::Newfstatat)]),
            (1, 2)
        );
        assert_eq!(
            (t.result_kind[nr(Call::Readlinkat)], t.result_arg[nr(Call::Readlinkat)]),
            (3, 2)
        );
        assert_eq!(
            (t.result_kind[nr(Call::Writev)], t.result_arg[nr(Call::Writev)]),
            (5, 1)
        );
        assert_eq!(t.wanted[0] >> 7 & 1, 0, "poll is not followed");
    }

    fn raw(nr: u32, args: [u64; 6], ret: i64, paths: [&[u8]; 2], result: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; EVENT_BYTES];
        b[0..8].copy_from_slice(&100u64.to_ne_bytes());
        b[8..16].copy_from_slice(&250u64.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        b[64..72].copy_from_slice(&ret.to_ne_bytes());
        b[72..76].copy_from_slice(&7u32.to_ne_bytes());
        b[76..80].copy_from_slice(&8u32.to_ne_bytes());
        b[80..84].copy_from_slice(&nr.to_ne_bytes());
        for (k, p) in paths.iter().enumerate() {
            b[84 + 2 * k..86 + 2 * k].copy_from_slice(&(p.len() as u16).to_ne_bytes());
            b[96 + k * SYS_PATH..96 + k * SYS_PATH + p.len()].copy_from_slice(p);
        }
        b[88..90].copy_from_slice(&(result.len() as u16).to_ne_bytes());
        let r0 = 96 + 2 * SYS_PATH;
        b[r0..r0 + result.len()].copy_from_slice(result);
        b
    }

    #[test]
    fn records_decode_into_the_fields_of_each_role() {
        let flags = (libc::O_CREAT | libc::O_WRONLY) as u64;
        let b = raw(
            257,
            [(-100i64) as u64, 0x1000, flags, 0o644, 0, 0],
            3,
            [b"/tmp/x", b""],
            &[],
        );
        let r = SyscallEvent::decode(&b).unwrap().to_record();
        assert_eq!(r.call, Some(Call::Openat));
        assert_eq!(
            (r.dirfd, r.flags, r.mode, r.ret),
            (Some(-100), Some(flags), Some(0o644), 3)
        );
        assert_eq!(r.path.as_deref(), Some(&b"/tmp/x"[..]));
        assert_eq!((r.pid, r.tid, r.enter_ns, r.exit_ns), (7, 8, 100, Some(250)));
        // A stat's mode and size, read back from its buffer.
        let mut st = vec![0u8; 16];
        st[0..4].copy_from_slice(&(libc::S_IFDIR | 0o755).to_ne_bytes());
        st[8..16].copy_from_slice(&4096u64.to_ne_bytes());
        let b = raw(262, [(-100i64) as u64, 1, 2, 0, 0, 0], 0, [b"/d", b""], &st);
        let r = SyscallEvent::decode(&b).unwrap().to_record();
        assert_eq!(r.result.as_deref(), Some(&b"mode=0o40755 size=4096"[..]));
        // pipe2's descriptors.
        let b = raw(293, [0x2000, 0, 0, 0, 0, 0], 0, [b"", b""], &[3, 0, 0, 0, 4, 0, 0, 0]);
        let r = SyscallEvent::decode(&b).unwrap().to_record();
        assert_eq!((r.fd, r.fd2), (Some(3), Some(4)));
        // A record of neither size is refused.
        assert!(SyscallEvent::decode(&b[..EVENT_BYTES - 1]).is_none());
        // A call without paths comes as the head and the result (160 bytes).
        let mut short = raw(0, [3, 0x1000, 64, 0, 0, 0], 64, [b"", b""], &[]);
        short.drain(HEAD..HEAD + 2 * SYS_PATH);
        assert_eq!(short.len(), SHORT_BYTES);
        let r = SyscallEvent::decode(&short).unwrap().to_record();
        assert_eq!(
            (r.call, r.fd, r.count, r.ret),
            (Some(Call::Read), Some(3), Some(64), 64)
        );
        let mut st = raw(5, [3, 0x1000, 0, 0, 0, 0], 0, [b"", b""], &[0; 16]);
        st[HEAD + 2 * SYS_PATH..HEAD + 2 * SYS_PATH + 4].copy_from_slice(&(libc::S_IFREG | 0o600).to_ne_bytes());
        st.drain(HEAD..HEAD + 2 * SYS_PATH);
        let r = SyscallEvent::decode(&st).unwrap().to_record();
        assert_eq!(
            r.result.as_deref(),
            Some(&b"mode=0o100600 size=0"[..]),
            "fstat's result in a short record"
        );
    }

    #[test]
    fn data_records_are_told_from_call_records_by_their_mark() {
        let mut b = vec![0u8; DATA_HEAD + 5];
        b[0..8].copy_from_slice(&DATA_MARK.to_ne_bytes());
        b[8..16].copy_from_slice(&100u64.to_ne_bytes());
        b[16..20].copy_from_slice(&8u32.to_ne_bytes());
        b[20..24].copy_from_slice(&5u32.to_ne_bytes());
        b[24..32].copy_from_slice(&16384u64.to_ne_bytes());
        b[DATA_HEAD..].copy_from_slice(b"hello");
        assert_eq!(
            Captured::decode(&b),
            Some(Captured::Data {
                enter_ns: 100,
                tid: 8,
                offset: 16384,
                bytes: b"hello"
            })
        );
        // A length past the record's end is refused, not read beyond it.
        b[20..24].copy_from_slice(&6u32.to_ne_bytes());
        assert_eq!(Captured::decode(&b), None);
        // A call record (its first word is an entry time) is a call.
        let call = raw(0, [3, 0, 5, 0, 0, 0], 5, [b"", b""], &[]);
        assert!(matches!(Captured::decode(&call), Some(Captured::Call(e)) if e.nr == 0 && e.ret == 5));
        let t = Tables::from_calls();
        let nr = |c: Call| c.x86_64_nr().unwrap() as usize;
        assert_eq!((t.data_arg[nr(Call::Pwrite64)], t.data_iov[nr(Call::Pwrite64)]), (1, 0));
        assert_eq!((t.data_arg[nr(Call::Preadv2)], t.data_iov[nr(Call::Preadv2)]), (1, 1));
        assert_eq!(
            t.data_arg[nr(Call::Setxattr)],
            NO_ARG,
            "an xattr's value is not file data"
        );
    }
}
