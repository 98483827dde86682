//! The system around the probes: devices, tracefs, privileges.

use crate::ProbeError;
use iolearn_safeio::lock::Lock;
use std::path::{Path, PathBuf};

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
        let name = name.strip_prefix("/dev/").unwrap_or(name);
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

/// The system-wide lock every iolearn process holds while it mounts tracefs, attaches through
/// it and unmounts it; and the marker (beside the lock) saying that iolearn mounted it.
pub const TRACEFS_LOCK: &str = "tracefs.lock";
const TRACEFS_MARKER: &str = "tracefs.mounted-by-iolearn";

/// tracefs mounted for as long as this lives (libbpf finds tracepoint ids there while it
/// attaches). Attaches are serialised system-wide by a lock in `/run/iolearn`, so no iolearn
/// process can unmount tracefs while another attaches. It is mounted at `/sys/kernel/tracing`
/// when it is not mounted, with a marker beside the lock, and unmounted on drop when the marker
/// says iolearn mounted it: a tuner killed mid-attach leaves the marker, and the next attach
/// unmounts what it left. A tracefs mounted by anyone else is left alone.
#[derive(Debug)]
pub struct TracefsMount {
    _lock: Lock,
    marker: PathBuf,
}

impl TracefsMount {
    /// Make sure tracefs is mounted, holding the system-wide attach lock.
    pub fn acquire() -> Result<TracefsMount, ProbeError> {
        let lock = Lock::acquire(TRACEFS_LOCK, true)
            .map_err(|e| ProbeError::Tracefs(e.to_string()))?
            .expect("a waiting lock is always taken");
        let marker = lock.path().with_file_name(TRACEFS_MARKER);
        if !tracefs_mounted() {
            // Create the marker first: a crash between the two leaves a marker and no mount,
            // which the next holder cleans up; the reverse would leave a mount nobody owns.
            std::fs::write(&marker, b"").map_err(|e| ProbeError::Tracefs(format!("{}: {e}", marker.display())))?;
            let c = |s: &str| std::ffi::CString::new(s).unwrap();
            let (src, target, fs) = (c("tracefs"), c(TRACEFS), c("tracefs"));
            // SAFETY: valid NUL-terminated strings; no data argument.
            let rc = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                let _ = std::fs::remove_file(&marker);
                return Err(ProbeError::Tracefs(format!("mounting tracefs at {TRACEFS}: {e}")));
            }
        }
        Ok(TracefsMount { _lock: lock, marker })
    }
}

/// Whether tracefs is mounted where libbpf looks.
pub fn tracefs_mounted() -> bool {
    Path::new(TRACEFS).join("events").exists()
}

impl Drop for TracefsMount {
    fn drop(&mut self) {
        if self.marker.exists() {
            if tracefs_mounted() {
                let target = std::ffi::CString::new(TRACEFS).unwrap();
                // SAFETY: valid path; a failure (busy) leaves it mounted, which is harmless.
                unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
            }
            let _ = std::fs::remove_file(&self.marker);
        }
    }
}
