//! A freezer cgroup that holds a traced program while its capture catches up
//! (`iolearn trace record --backpressure`): Re-Animator's "nothing is lost" without a kernel
//! patch. The capture freezes the group when its ring is fuller than a high-water mark and
//! thaws it once drained; the program sees only time pass.
//!
//! The group is `<freezer mount>/iolearn-trace-<pid>-<start time>` of the iolearn process that
//! made it. Dropping a [`Freezer`] thaws the group, moves its processes back to the group they
//! came from and removes it. If iolearn dies instead (SIGKILL, the OOM killer, a crash), a
//! watchdog does the same: a process of its own session (no terminal signal reaches it)
//! waiting for the end of a pipe only iolearn holds, which the kernel closes however iolearn
//! ends. A frozen v1 task ignores even SIGKILL, so this matters. Groups a watchdog could not
//! release (it was killed too) are released by the next [`recover`] (every `trace record`).
//! cgroup v1's freezer (this machine's); the v2 `cgroup.freeze` file would serve as well where
//! only v2 is mounted.

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// A freezer group of this process's making.
#[derive(Debug)]
pub struct Freezer {
    dir: PathBuf,
    /// Where its processes go back to.
    home: PathBuf,
    /// `cgroup.procs`, for [`Freezer::join_self`] in a child before exec.
    procs: CString,
    /// Releases the group if this process dies holding it.
    watchdog: Option<(std::process::Child, std::process::ChildStdin)>,
}

/// The hidden subcommand a watchdog runs as: `iolearn __release-freezer DIR HOME`.
pub const WATCHDOG_COMMAND: &str = "__release-freezer";

const PREFIX: &str = "iolearn-trace-";

/// Where the v1 freezer hierarchy is mounted (from `/proc/self/mountinfo`).
fn mount_point() -> Result<PathBuf, String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    for line in text.lines() {
        // id parent maj:min root mount-point options... - fstype source super-options
        let Some((head, tail)) = line.split_once(" - ") else {
            continue;
        };
        let mut tail = tail.split(' ');
        let (fstype, super_opts) = (tail.next(), tail.nth(1));
        if fstype == Some("cgroup") && super_opts.is_some_and(|o| o.split(',').any(|x| x == "freezer")) {
            if let Some(mp) = head.split(' ').nth(4) {
                return Ok(PathBuf::from(mp));
            }
        }
    }
    Err("no cgroup v1 freezer is mounted (mount -t cgroup -o freezer freezer /sys/fs/cgroup/freezer)".into())
}

/// The freezer group `pid` is in, as a directory under `mount`.
fn group_of(mount: &Path, pid: &str) -> Result<PathBuf, String> {
    let path = format!("/proc/{pid}/cgroup");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, group) = (f.next(), f.next(), f.next());
        if controllers.is_some_and(|c| c.split(',').any(|x| x == "freezer")) {
            let group = group.unwrap_or("/").trim_start_matches('/');
            return Ok(mount.join(group));
        }
    }
    Err(format!("{path}: no freezer group"))
}

/// Field `n` of `/proc/PID/stat` after the command name (0: state, 1: parent pid, 19: start
/// time), as a number.
pub fn stat_field(pid: &str, n: usize) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields count from the last ')'.
    stat.rsplit_once(')')?.1.split_whitespace().nth(n)?.parse().ok()
}

/// A process's start time (clock ticks since boot): with its pid, a name no later process has.
fn start_time(pid: &str) -> Option<u64> {
    stat_field(pid, 19)
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Thaw `dir`, move its processes to `home` and remove it.
fn dissolve(dir: &Path, home: &Path) -> Result<(), String> {
    write(&dir.join("freezer.state"), "THAWED")?;
    // A process forking meanwhile adds one: go round until the group is empty.
    for _ in 0..100 {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).map_err(|e| format!("{}: {e}", dir.display()))?;
        if procs.trim().is_empty() {
            break;
        }
        for pid in procs.lines() {
            // A process that exited meanwhile is gone already (ESRCH).
            match std::fs::write(home.join("cgroup.procs"), pid) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => return Err(format!("moving process {pid} to {}: {e}", home.display())),
            }
        }
    }
    std::fs::remove_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

impl Freezer {
    /// Make this process's group, for process `pid` (`None`: the children this process will
    /// start, which [`Freezer::join_self`]); its processes go back to `pid`'s group (or this
    /// process's) at the end. Starts the group's watchdog as `watchdog_exe
    /// __release-freezer DIR HOME` (this program, which must dispatch that command to
    /// [`watchdog`]).
    pub fn create(pid: Option<u32>, watchdog_exe: &Path) -> Result<Freezer, String> {
        let mount = mount_point()?;
        let me = std::process::id().to_string();
        let home = group_of(&mount, &pid.map_or_else(|| "self".to_string(), |p| p.to_string()))?;
        let start = start_time("self").ok_or("/proc/self/stat: no start time")?;
        let dir = mount.join(format!("{PREFIX}{me}-{start}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        }
        let procs = CString::new(dir.join("cgroup.procs").into_os_string().into_encoded_bytes())
            .map_err(|_| format!("{}: a NUL in the path", dir.display()))?;
        let mut f = Freezer {
            dir,
            home,
            procs,
            watchdog: None,
        };
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(watchdog_exe);
        cmd.arg(WATCHDOG_COMMAND)
            .arg(&f.dir)
            .arg(&f.home)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null());
        // SAFETY: setsid is async-signal safe: a session of its own, so that the terminal's
        // SIGINT, which ends this capture, does not end its watchdog too.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            })
        };
        let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", watchdog_exe.display()))?;
        let stdin = child.stdin.take().expect("piped");
        f.watchdog = Some((child, stdin));
        if let Some(p) = pid {
            write(&f.dir.join("cgroup.procs"), &p.to_string())?;
        }
        Ok(f)
    }

    /// In a child between fork and exec: put the calling process in the group (async-signal
    /// safe: open, write, close).
    pub fn join_self(&self) -> std::io::Result<()> {
        // SAFETY: a NUL-terminated path; the buffer is valid for its length.
        unsafe {
            let fd = libc::open(self.procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // "0": the writer itself.
            let n = libc::write(fd, b"0".as_ptr().cast(), 1);
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if n == 1 {
                Ok(())
            } else {
                Err(err)
            }
        }
    }

    /// Freeze (true) or thaw (false) the group. Freezing returns at once; the processes stop
    /// at their next return to user space (a call in flight still completes).
    pub fn set(&self, frozen: bool) -> Result<(), String> {
        write(
            &self.dir.join("freezer.state"),
            if frozen { "FROZEN" } else { "THAWED" },
        )
    }

    /// The group's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Freezer {
    fn drop(&mut self) {
        if let Err(e) = dissolve(&self.dir, &self.home) {
            eprintln!("iolearn: releasing the traced program: {e}");
        }
        // The watchdog sees its pipe end, finds the group gone, and exits.
        if let Some((mut child, stdin)) = self.watchdog.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// A watchdog's life: wait for the end of standard input (its iolearn ended, one way or
/// another), then release `dir` (if still there) to `home`. Both must be under the freezer's
/// mount and `dir` one of iolearn's groups: the command is hidden, not a way to move processes.
pub fn watchdog(dir: &Path, home: &Path) -> Result<(), String> {
    let mount = mount_point()?;
    let ours = dir.parent() == Some(&mount)
        && dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(PREFIX));
    let components_ok = |p: &Path| {
        p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::RootDir))
    };
    if !ours || !home.starts_with(&mount) || !components_ok(dir) || !components_ok(home) {
        return Err(format!(
            "{}, {}: not a capture's freezer group and a group under {}",
            dir.display(),
            home.display(),
            mount.display()
        ));
    }
    let mut sink = [0u8; 64];
    use std::io::Read;
    let mut stdin = std::io::stdin();
    while !matches!(stdin.read(&mut sink), Ok(0) | Err(_)) {}
    if dir.exists() {
        dissolve(dir, home)?;
        eprintln!("iolearn: the capture ended without releasing its program; released it");
    }
    Ok(())
}

/// Release the groups of iolearn processes that are gone (their watchdog killed too); how
/// many. Nothing to do (0) where no v1 freezer is mounted.
pub fn recover() -> usize {
    let Ok(mount) = mount_point() else { return 0 };
    let Ok(entries) = std::fs::read_dir(&mount) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|s| s.strip_prefix(PREFIX)) else {
            continue;
        };
        let Some((pid, start)) = rest.split_once('-') else {
            continue;
        };
        let alive = start_time(pid).is_some_and(|s| start.parse() == Ok(s));
        if !alive && e.file_type().is_ok_and(|t| t.is_dir()) && dissolve(&e.path(), &mount).is_ok() {
            n += 1;
        }
    }
    n
}
