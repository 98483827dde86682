//! A freezer cgroup that holds a traced program while its capture catches up
//! (`iolearn trace record --backpressure`): Re-Animator's "nothing is lost" without a kernel
//! patch. The capture freezes the group when its ring is fuller than a high-water mark and
//! thaws it once drained; the program sees only time pass.
//!
//! The group is `<freezer mount>/iolearn-trace-<pid>-<start time>` of the iolearn process that
//! made it. Dropping a [`Freezer`] thaws the group, moves its processes back to the group they
//! came from and removes it; a group left by an iolearn that died (SIGKILL, a crash) is
//! recovered the same way by the next [`Freezer::create`], so a program is never left frozen
//! for longer than until the next capture starts. cgroup v1's freezer (this machine's); the
//! v2 `cgroup.freeze` file would serve as well where only v2 is mounted.

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
}

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

/// A process's start time (clock ticks since boot): with its pid, a name no later process has.
fn start_time(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields count from the last ')'.
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
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
    /// Make this process's group (recovering any left by an iolearn that died first).
    pub fn create() -> Result<Freezer, String> {
        let mount = mount_point()?;
        let recovered = recover(&mount);
        if recovered > 0 {
            eprintln!("iolearn: thawed and removed {recovered} freezer groups left by an earlier capture");
        }
        let me = std::process::id().to_string();
        let home = group_of(&mount, "self")?;
        let start = start_time("self").ok_or("/proc/self/stat: no start time")?;
        let dir = mount.join(format!("{PREFIX}{me}-{start}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        }
        let procs = CString::new(dir.join("cgroup.procs").into_os_string().into_encoded_bytes())
            .map_err(|_| format!("{}: a NUL in the path", dir.display()))?;
        Ok(Freezer { dir, home, procs })
    }

    /// Put process `pid` (all its threads) in the group; it goes back to `home` at the end.
    pub fn add(&mut self, pid: u32) -> Result<(), String> {
        let mount = mount_point()?;
        self.home = group_of(&mount, &pid.to_string())?;
        write(&self.dir.join("cgroup.procs"), &pid.to_string())
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
    }
}

/// Dissolve the groups of iolearn processes that are gone; how many.
fn recover(mount: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(mount) else {
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
        if !alive && e.file_type().is_ok_and(|t| t.is_dir()) && dissolve(&e.path(), mount).is_ok() {
            n += 1;
        }
    }
    n
}
