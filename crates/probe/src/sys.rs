//! The system around the probes: devices, tracefs, privileges.

use crate::ProbeError;
use std::path::Path;
use std::sync::Mutex;

/// A block device by number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceId {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

/// The kernel's internal `dev_t` (`MKDEV`: 12 bits major, 20 bits minor), as tracepoints
/// report it; user space's `st_dev` encodes the same device differently.
pub fn kernel_dev(d: DeviceId) -> u32 {
    (d.major << 20) | (d.minor & 0xfffff)
}

impl DeviceId {
    /// From a block device's name (`loop0`, `nvme0n1`) via `/sys/class/block/<name>/dev`.
    pub fn from_name(name: &str) -> Result<DeviceId, ProbeError> {
        let name = name.trim_start_matches("/dev/");
        let path = Path::new("/sys/class/block").join(name).join("dev");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ProbeError::Device(format!("{}: {e} (no block device {name:?})", path.display())))?;
        let (ma, mi) = text
            .trim()
            .split_once(':')
            .ok_or_else(|| ProbeError::Device(format!("{}: not MAJOR:MINOR", path.display())))?;
        let parse = |v: &str| {
            v.parse::<u32>()
                .map_err(|_| ProbeError::Device(format!("{}: bad number {v:?}", path.display())))
        };
        Ok(DeviceId {
            major: parse(ma)?,
            minor: parse(mi)?,
        })
    }

    /// The device holding the file system of `path` (its `st_dev`).
    pub fn of_path(path: &Path) -> Result<DeviceId, ProbeError> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).map_err(|e| ProbeError::Device(format!("{}: {e}", path.display())))?;
        let dev = m.dev();
        Ok(DeviceId {
            major: libc::major(dev),
            minor: libc::minor(dev),
        })
    }

    /// The name under `/sys/class/block` (`loop0`), if any.
    pub fn name(&self) -> Option<String> {
        let link = std::fs::read_link(format!("/sys/dev/block/{}:{}", self.major, self.minor)).ok()?;
        Some(link.file_name()?.to_string_lossy().into_owned())
    }
}

pub(crate) fn check_root_and_btf() -> Result<(), ProbeError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(ProbeError::NotRoot);
    }
    let btf = Path::new("/sys/kernel/btf/vmlinux");
    if !btf.exists() {
        return Err(ProbeError::NoBtf(btf.to_path_buf()));
    }
    Ok(())
}

const TRACEFS: &str = "/sys/kernel/tracing";

/// Probes in this process that need tracefs, and whether we mounted it.
static TRACEFS_USERS: Mutex<(usize, bool)> = Mutex::new((0, false));

/// tracefs mounted for as long as this lives (libbpf finds tracepoint ids there while it
/// attaches). Mounts it at `/sys/kernel/tracing` when it is not mounted and unmounts it when the
/// last user in this process goes away, leaving the system as it was.
#[derive(Debug)]
pub struct TracefsMount(());

impl TracefsMount {
    /// Make sure tracefs is mounted.
    pub fn acquire() -> Result<TracefsMount, ProbeError> {
        let mut users = TRACEFS_USERS.lock().unwrap_or_else(|e| e.into_inner());
        if users.0 == 0 && !Path::new(TRACEFS).join("events").exists() {
            let c = |s: &str| std::ffi::CString::new(s).unwrap();
            let (src, target, fs) = (c("tracefs"), c(TRACEFS), c("tracefs"));
            // SAFETY: valid NUL-terminated strings; no data argument.
            let rc = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
            if rc != 0 {
                return Err(ProbeError::Tracefs(format!(
                    "mounting tracefs at {TRACEFS}: {}",
                    std::io::Error::last_os_error()
                )));
            }
            users.1 = true;
        }
        users.0 += 1;
        Ok(TracefsMount(()))
    }
}

impl Drop for TracefsMount {
    fn drop(&mut self) {
        let mut users = TRACEFS_USERS.lock().unwrap_or_else(|e| e.into_inner());
        users.0 -= 1;
        if users.0 == 0 && users.1 {
            let target = std::ffi::CString::new(TRACEFS).unwrap();
            // SAFETY: valid path; a failure (busy) leaves it mounted, which is harmless.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
            users.1 = false;
        }
    }
}
