//! System-call traces: what a program asked of the file system, call by call, with enough
//! to replay it (Re-Animator's capture, ARTC's replay: `iolearn-replay::artc`).
//!
//! One record, [`SysRecord`]: who called (pid, tid), when (entry and exit, ns), the call, its
//! return value, and its arguments decoded by role ([`calls::Role`]) into named fields, so a
//! query reads `path`, `fd` or `offset` whatever the call. Sources: `strace -f -ttt -T -y`
//! text ([`strace`]) and the eBPF capture of `iolearn trace record`. On disk: Parquet
//! ([`parquet`], schema in `docs/formats.md`), data buffers in a side file.
#![allow(clippy::len_without_is_empty)]

pub mod calls;
pub mod flags;
pub mod parquet;
pub mod strace;

pub use calls::{Call, Role};

/// `AT_FDCWD`: a `dirfd` meaning "the current directory".
pub const AT_FDCWD: i32 = -100;

/// The hash a trace keeps of a data buffer (`--buffers hash`): xxh3, 64 bits.
pub fn hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// The `result` of a stat-family call: `mode=0o100644 size=123` (type and permission bits
/// in octal, as `st_mode`; the size when the source showed it).
pub fn stat_result(mode: u32, size: Option<u64>) -> Vec<u8> {
    match size {
        Some(s) => format!("mode={mode:#o} size={s}").into_bytes(),
        None => format!("mode={mode:#o}").into_bytes(),
    }
}

/// A stat-family `result` read back: (mode, size).
pub fn parse_stat_result(b: &[u8]) -> Option<(u32, Option<u64>)> {
    let s = std::str::from_utf8(b).ok()?;
    let mut mode = None;
    let mut size = None;
    for part in s.split_whitespace() {
        if let Some(m) = part.strip_prefix("mode=0o") {
            mode = u32::from_str_radix(m, 8).ok();
        } else if let Some(z) = part.strip_prefix("size=") {
            size = z.parse().ok();
        }
    }
    Some((mode?, size))
}

/// A call's data buffer, as captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Data {
    /// Not captured (`--buffers none`, or a source that does not show it).
    #[default]
    None,
    /// A 64-bit hash (xxh3) of the bytes moved (`--buffers hash`).
    Hash(u64),
    /// The bytes, at `offset` in the trace's data side file, `len` long (`--buffers full`).
    Bytes {
        /// Offset in the side file.
        offset: u64,
        /// Length.
        len: u64,
    },
    /// The capture could not read the buffer (a page not in memory): verification skips it.
    Unreadable,
}

/// One system call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SysRecord {
    /// Record id: unique in its trace, increasing with `enter_ns`.
    pub id: u64,
    /// Process (thread-group) id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Entry, ns from the trace's epoch.
    pub enter_ns: u64,
    /// Exit, ns; `None` for a call that never returned (exit_group, a killed thread).
    pub exit_ns: Option<u64>,
    /// The call.
    pub call: Option<Call>,
    /// Return value: >= 0, or -errno.
    pub ret: i64,
    /// The descriptor acted on.
    pub fd: Option<i32>,
    /// Where a relative `path` starts ([`AT_FDCWD`]: the working directory).
    pub dirfd: Option<i32>,
    /// The name acted on or created (raw bytes: Linux names are not always UTF-8).
    pub path: Option<Vec<u8>>,
    /// A second descriptor: dup2's new fd, sendfile's destination, pipe's write end.
    pub fd2: Option<i32>,
    /// Where a relative `path2` starts.
    pub dirfd2: Option<i32>,
    /// The second name: a rename's or link's new name, a symlink's target text.
    pub path2: Option<Vec<u8>>,
    /// Bytes asked for (read, write, the iovec's total) or a length.
    pub count: Option<u64>,
    /// File offset (pread, lseek, fallocate...) or a length (truncate).
    pub offset: Option<i64>,
    /// Flags (open's, the `*at` calls', rename's, mmap's...), as the kernel takes them.
    pub flags: Option<u64>,
    /// Permission bits, access mode, or mmap's protection.
    pub mode: Option<u32>,
    /// A command or advice: fcntl/ioctl request, lseek whence, fadvise advice, exit status.
    pub cmd: Option<u64>,
    /// An address (the mmap family; io_setup's context).
    pub addr: Option<u64>,
    /// An owner.
    pub uid: Option<u32>,
    /// A group.
    pub gid: Option<u32>,
    /// An extended attribute's name.
    pub name: Option<Vec<u8>>,
    /// What the kernel returned in a buffer, where the source shows it: readlink's target.
    pub result: Option<Vec<u8>>,
    /// The data moved, as captured.
    pub data: Data,
    /// The name the call is known by when the table does not have it (`call` is `None`).
    pub other: Option<String>,
}

impl SysRecord {
    /// The call's name (an unknown call's own).
    pub fn call_name(&self) -> &str {
        match self.call {
            Some(c) => c.name(),
            None => self.other.as_deref().unwrap_or("?"),
        }
    }

    /// The errno of a failed call.
    pub fn errno(&self) -> Option<i32> {
        (self.ret < 0 && self.ret >= -4095).then(|| (-self.ret) as i32)
    }

    /// Succeeded (returned >= 0, or never returned).
    pub fn ok(&self) -> bool {
        self.errno().is_none()
    }

    /// The new descriptor this call created, if it did (open, dup, fcntl's F_DUPFD...).
    pub fn new_fd(&self) -> Option<i32> {
        let call = self.call?;
        let dupfd = call == Call::Fcntl
            && matches!(self.cmd, Some(c) if c == libc::F_DUPFD as u64 || c == libc::F_DUPFD_CLOEXEC as u64);
        ((call.returns_fd() || dupfd) && self.ret >= 0 && self.exit_ns.is_some()).then_some(self.ret as i32)
    }

    /// Latency, ns (entry to exit).
    pub fn latency_ns(&self) -> Option<u64> {
        self.exit_ns.map(|x| x.saturating_sub(self.enter_ns))
    }
}

/// Where a trace came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Meta {
    /// `ebpf` or `strace`.
    pub source: String,
    /// What was captured of data buffers: `none`, `hash`, `full`.
    pub buffers: String,
    /// Records the capture lost (ring full without backpressure); 0 for a complete trace.
    pub lost: u64,
    /// Of those, how many of each call (`read`, `openat`...; nonzero ones).
    pub lost_by_call: Vec<(String, u64)>,
    /// The command traced, when known.
    pub command: String,
    /// The directory the traced processes started in (absolute; empty: unknown, taken as `/`).
    pub cwd: String,
    /// The data side file's length and xxh3-64 (`--buffers full`): a replay checks that the
    /// side file beside the trace is this trace's.
    pub data_file: Option<(u64, u64)>,
}

/// A system-call trace: its records in entry order, and where it came from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SysTrace {
    /// The calls, by `enter_ns` (ties by `id`).
    pub records: Vec<SysRecord>,
    /// Source and capture settings.
    pub meta: Meta,
}

impl SysTrace {
    /// Put records in entry order and number them 0, 1, 2... in that order.
    pub fn renumber(&mut self) {
        self.records.sort_by_key(|r| (r.enter_ns, r.id));
        for (i, r) in self.records.iter_mut().enumerate() {
            r.id = i as u64;
        }
    }

    /// Threads in order of their first call: (pid, tid).
    pub fn threads(&self) -> Vec<(u32, u32)> {
        let mut seen = std::collections::HashSet::new();
        self.records
            .iter()
            .filter(|r| seen.insert(r.tid))
            .map(|r| (r.pid, r.tid))
            .collect()
    }
}
