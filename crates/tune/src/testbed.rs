//! Scratch block devices for experiments and tests: a file-backed loop device with direct I/O
//! and an ext4 file system on it, removed again when dropped. Never touches an existing disk.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted ext4 file system on a fresh loop device.
#[derive(Debug)]
pub struct LoopFs {
    /// Backing image file.
    pub image: PathBuf,
    /// Loop device name (`loop3`).
    pub device: String,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
}

fn sh(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Why a test bed cannot be made here (`None`: it can): root, `losetup`, `mkfs.ext4`.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("loop devices need root".into());
    }
    for tool in ["losetup", "mkfs.ext4", "mount", "umount"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map_or(true, |o| !o.status.success())
        {
            return Some(format!("{tool} not found"));
        }
    }
    None
}

impl LoopFs {
    /// A `size_mb` MiB image under `dir`, attached with `--direct-io=on` (so the loop device
    /// behaves like a disk, not like the page cache of the file below), formatted ext4 and
    /// mounted at `dir/mnt-<name>`.
    pub fn create(dir: &Path, name: &str, size_mb: u64) -> Result<LoopFs, String> {
        let mountpoint = dir.join(format!("mnt-{name}"));
        let (image, dev) = attach_image(dir, name, size_mb)?;
        let mut fs = LoopFs {
            image,
            device: dev.strip_prefix("/dev/").unwrap_or(&dev).to_string(),
            mountpoint,
        };
        let setup = || -> Result<(), String> {
            sh(Command::new("mkfs.ext4")
                .args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"])
                .arg(&dev))?;
            std::fs::create_dir_all(&fs.mountpoint).map_err(|e| format!("{}: {e}", fs.mountpoint.display()))?;
            sh(Command::new("mount").arg(&dev).arg(&fs.mountpoint))?;
            Ok(())
        };
        if let Err(e) = setup() {
            fs.mountpoint = PathBuf::new(); // not mounted: Drop only detaches
            return Err(e);
        }
        Ok(fs)
    }
}

/// A bare loop device (no file system) on a sparse image, for raw block I/O; detached and
/// removed when dropped.
#[derive(Debug)]
pub struct LoopDev {
    /// Backing image file.
    pub image: PathBuf,
    /// The device (`/dev/loop3`).
    pub device: PathBuf,
}

impl LoopDev {
    /// A `size_mb` MiB image under `dir` attached with `--direct-io=on`.
    pub fn create(dir: &Path, name: &str, size_mb: u64) -> Result<LoopDev, String> {
        let (image, dev) = attach_image(dir, name, size_mb)?;
        Ok(LoopDev {
            image,
            device: PathBuf::from(dev),
        })
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.device).output();
        let _ = std::fs::remove_file(&self.image);
    }
}

/// A sparse `size_mb` MiB image `dir/name.img` attached to a free loop device with direct I/O
/// (stale attachments of the same image detached first): (image, device path).
fn attach_image(dir: &Path, name: &str, size_mb: u64) -> Result<(PathBuf, String), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let image = dir.join(format!("{name}.img"));
    detach_stale(&image);
    let f = std::fs::File::create(&image).map_err(|e| format!("{}: {e}", image.display()))?;
    f.set_len(size_mb << 20)
        .map_err(|e| format!("{}: {e}", image.display()))?;
    drop(f);
    let dev = sh(Command::new("losetup")
        .args(["--direct-io=on", "--find", "--show"])
        .arg(&image))?;
    Ok((image, dev))
}

/// Detach loop devices still backed by `image` (left by a crashed run).
pub fn detach_stale(image: &Path) {
    if let Ok(out) = sh(Command::new("losetup").args(["-j"]).arg(image)) {
        for line in out.lines() {
            if let Some(dev) = line.split(':').next() {
                let _ = Command::new("umount").arg(dev).output();
                let _ = Command::new("losetup").args(["-d", dev]).output();
            }
        }
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if !self.mountpoint.as_os_str().is_empty() {
            let ok = Command::new("umount")
                .arg(&self.mountpoint)
                .output()
                .is_ok_and(|o| o.status.success());
            if !ok {
                // Still in use (a process left behind): detach now, free when unused.
                let _ = Command::new("umount").arg("-l").arg(&self.mountpoint).output();
            }
            let _ = std::fs::remove_dir(&self.mountpoint);
        }
        let _ = Command::new("losetup")
            .args(["-d", &format!("/dev/{}", self.device)])
            .output();
        let _ = std::fs::remove_file(&self.image);
    }
}

/// For tests that need root, loop devices and eBPF: whether to skip here. Prints why, and
/// records it for the test runner's closing line (`IOLEARN_SKIP_LOG`, see `scripts/test.sh`).
pub fn skip_test(suite: &str, test: &str) -> bool {
    let why = unavailable().or_else(|| iolearn_probe::availability().err().map(|e| e.to_string()));
    skip_because(suite, test, why)
}

/// For tests that need root and loop devices only (no eBPF): whether to skip here.
pub fn skip_without_loop(suite: &str, test: &str) -> bool {
    skip_because(suite, test, unavailable())
}

fn skip_because(suite: &str, test: &str, why: Option<String>) -> bool {
    let Some(why) = why else { return false };
    eprintln!("SKIP {test}: {why}");
    if let Some(log) = std::env::var_os("IOLEARN_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(log) {
            let _ = writeln!(f, "{suite} {test}: {why}");
        }
    }
    true
}

/// A fresh loop device over a written image (direct I/O, no file system) under a chosen I/O
/// scheduler; the scheduler it had is restored (loop devices keep theirs across attachments)
/// and the device detached when dropped.
#[derive(Debug)]
pub struct RawLoop {
    /// Backing image file.
    pub image: PathBuf,
    /// Device path (`/dev/loop3`).
    pub dev: String,
    saved: String,
}

impl RawLoop {
    /// `mib` MiB of written data at `image` (a hole would be answered without a request),
    /// attached with direct I/O, under `scheduler`.
    pub fn new(image: &Path, mib: usize, scheduler: &str) -> Result<RawLoop, String> {
        std::fs::write(image, vec![0x5au8; mib << 20]).map_err(|e| format!("{}: {e}", image.display()))?;
        let dev = match sh(Command::new("losetup")
            .args(["--direct-io=on", "--find", "--show"])
            .arg(image))
        {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_file(image);
                return Err(e);
            }
        };
        let name = dev.trim_start_matches("/dev/");
        let saved = iolearn_probe::active_scheduler(name).unwrap_or_else(|_| "none".into());
        let lo = RawLoop {
            image: image.to_path_buf(),
            dev,
            saved,
        };
        let dio = format!("/sys/block/{}/loop/dio", lo.name());
        if !std::fs::read_to_string(&dio).is_ok_and(|v| v.trim() == "1") {
            return Err(format!("{}: direct I/O not on ({dio})", lo.dev));
        }
        std::fs::write(RawLoop::sched_path(&lo.dev), scheduler)
            .map_err(|e| format!("{scheduler} on {}: {e}", lo.dev))?;
        Ok(lo)
    }

    /// Its name (`loop3`).
    pub fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }

    fn sched_path(dev: &str) -> String {
        format!("/sys/block/{}/queue/scheduler", dev.trim_start_matches("/dev/"))
    }
}

impl Drop for RawLoop {
    fn drop(&mut self) {
        let _ = std::fs::write(RawLoop::sched_path(&self.dev), &self.saved);
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.image);
    }
}
