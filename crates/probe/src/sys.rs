//! The system around the probes: devices, privileges.

use crate::ProbeError;
use std::path::Path;

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

/// The I/O scheduler block device `name` (`loop0`) runs: the bracketed entry of
/// `/sys/block/<name>/queue/scheduler` (`none` when there is none).
pub fn active_scheduler(name: &str) -> std::io::Result<String> {
    let list = std::fs::read_to_string(Path::new("/sys/block").join(name).join("queue/scheduler"))?;
    Ok(list
        .split_whitespace()
        .find(|w| w.starts_with('['))
        .map_or_else(|| "none".into(), |w| w.trim_matches(['[', ']']).to_string()))
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
