//! A real block device or file as a [`Target`]: io_uring, `O_DIRECT` (no page cache between
//! the probes and the device), one aligned buffer per I/O in flight.

use crate::target::{Error, Io, Target};
use io_uring::{opcode, types, IoUring};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Buffers are aligned to this (any logical block size up to a page).
const ALIGN: usize = 4096;
/// I/Os in flight at most.
const DEPTH: usize = 64;
/// The largest I/O.
const MAX_IO: u64 = 1 << 20;

/// A block device (or a file on a local file system) probed through io_uring with `O_DIRECT`.
/// Probing writes over its data: it is opened only as itself (never through a symbolic link)
/// and, a block device, only when nothing else holds it (`O_EXCL`: not mounted, not part of
/// another device).
pub struct DeviceTarget {
    path: PathBuf,
    file: File,
    ring: IoUring,
    /// DEPTH buffers of MAX_IO bytes, ALIGN-aligned, inside `mem`.
    mem: Vec<u8>,
    base: usize,
    size: u64,
    block: u64,
    epoch: Instant,
    /// The block device's number (None: a regular file).
    rdev: Option<u64>,
    /// Counter written into every sector written.
    stamp: u64,
    /// An io_uring failure left I/Os that may still be in flight.
    poisoned: bool,
}

impl DeviceTarget {
    /// Open `path` for probing (reads and writes).
    pub fn open(path: &Path) -> Result<DeviceTarget, Error> {
        let at = |e: String| Error(format!("{}: {e}", path.display()));
        let meta = std::fs::symlink_metadata(path).map_err(|e| at(e.to_string()))?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            return Err(at("a symbolic link; name the device itself".into()));
        }
        // No link anywhere on the way either (a directory swapped for a link would lead the
        // writes elsewhere): the path must already be the canonical one.
        let absolute = std::path::absolute(path).map_err(|e| at(e.to_string()))?;
        let canonical = std::fs::canonicalize(path).map_err(|e| at(e.to_string()))?;
        let lexical: PathBuf = absolute.components().collect();
        if canonical != lexical {
            return Err(at(format!(
                "reached through a symbolic link; name {} itself",
                canonical.display()
            )));
        }
        if !(kind.is_block_device() || kind.is_file()) {
            return Err(at("not a block device or a regular file".into()));
        }
        let mut flags = libc::O_DIRECT | libc::O_NOFOLLOW;
        if kind.is_block_device() {
            flags |= libc::O_EXCL;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(flags)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EBUSY) => at("in use (mounted, or held by another device or program)".into()),
                Some(libc::EINVAL) => at("O_DIRECT refused (a file system without direct I/O?)".into()),
                _ => at(e.to_string()),
            })?;
        // The same file as looked at (not swapped for a link in between).
        let opened = file.metadata().map_err(|e| at(e.to_string()))?;
        if (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
            return Err(at("changed while being opened".into()));
        }
        let (size, block) = if kind.is_block_device() {
            use std::io::Seek;
            let size = (&file).seek(std::io::SeekFrom::End(0)).map_err(|e| at(e.to_string()))?;
            (size, logical_block(opened.rdev()).map_err(at)?)
        } else {
            (meta.len(), ALIGN as u64)
        };
        let ring = IoUring::new(DEPTH as u32)
            .map_err(|e| at(format!("io_uring: {e} (a kernel without io_uring, or it is disabled)")))?;
        let mut mem = vec![0u8; DEPTH * MAX_IO as usize + ALIGN];
        let base = mem.as_ptr().align_offset(ALIGN);
        // Data that does not compress or deduplicate (some drives do both).
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for b in mem.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        Ok(DeviceTarget {
            path: path.to_path_buf(),
            file,
            ring,
            mem,
            base,
            size: size / block * block,
            block,
            epoch: Instant::now(),
            rdev: kind.is_block_device().then(|| opened.rdev()),
            stamp: 0,
            poisoned: false,
        })
    }
}

impl DeviceTarget {
    /// The opened block device's number (`st_rdev`); None for a regular file.
    pub fn device_number(&self) -> Option<u64> {
        self.rdev
    }
}

/// The logical block size of the block device `rdev`, from sysfs.
fn logical_block(rdev: u64) -> Result<u64, String> {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let p = format!("/sys/dev/block/{major}:{minor}/queue/logical_block_size");
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{p}: {e}"))?;
    match text.trim().parse::<u64>() {
        Ok(b) if b.is_power_of_two() && (512..=ALIGN as u64).contains(&b) => Ok(b),
        _ => Err(format!(
            "{p}: {:?} is not a block size from 512 to {ALIGN}",
            text.trim()
        )),
    }
}

impl Target for DeviceTarget {
    fn name(&self) -> String {
        self.path.display().to_string()
    }

    fn size_bytes(&self) -> u64 {
        self.size
    }

    fn block_bytes(&self) -> u64 {
        self.block
    }

    fn max_io_bytes(&self) -> u64 {
        MAX_IO
    }

    fn depth(&self) -> usize {
        DEPTH
    }

    fn run(&mut self, ios: &[Io], lat: &mut Vec<u64>) -> Result<(), Error> {
        lat.clear();
        if ios.len() > DEPTH {
            return Err(Error(format!("{} I/Os at once (at most {DEPTH})", ios.len())));
        }
        if self.poisoned {
            return Err(Error(format!(
                "{}: an earlier io_uring failure left I/Os behind",
                self.path.display()
            )));
        }
        let fd = types::Fd(self.file.as_raw_fd());
        // Every I/O checked before any is queued: a refused batch leaves nothing behind.
        for io in ios {
            let aligned = io.offset.is_multiple_of(self.block) && io.len.is_multiple_of(self.block);
            if !aligned || io.len == 0 || io.len > MAX_IO || io.offset.saturating_add(io.len) > self.size {
                return Err(Error(format!(
                    "{}: I/O of {} bytes at {} (multiples of {} within {} bytes)",
                    self.path.display(),
                    io.len,
                    io.offset,
                    self.block,
                    self.size
                )));
            }
        }
        for (k, io) in ios.iter().enumerate() {
            let start = self.base + k * MAX_IO as usize;
            if io.write {
                // No two blocks written alike (a drive that deduplicates would otherwise never
                // fill its buffer or its flash): a counter at the head of every 512 bytes.
                for sector in self.mem[start..start + io.len as usize].chunks_exact_mut(512) {
                    self.stamp = self.stamp.wrapping_add(1);
                    sector[..8].copy_from_slice(&self.stamp.to_le_bytes());
                }
            }
            let buf = self.mem[start..].as_mut_ptr();
            let entry = if io.write {
                opcode::Write::new(fd, buf, io.len as u32).offset(io.offset).build()
            } else {
                opcode::Read::new(fd, buf, io.len as u32).offset(io.offset).build()
            }
            .user_data(k as u64);
            // SAFETY: buffer k (MAX_IO bytes inside `mem`) and the file outlive the I/O: this
            // call waits for every completion before it returns.
            unsafe { self.ring.submission().push(&entry) }
                .map_err(|_| Error("io_uring submission queue full".into()))?;
        }
        let start = Instant::now();
        lat.resize(ios.len(), 0);
        let mut left = ios.len();
        let mut failure = None;
        while left > 0 {
            // Keep waiting after an error: the buffers stay in use until every I/O is back.
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) => continue,
                Err(e) => {
                    // I/Os may still be in flight into the buffers: they are never freed or
                    // reused (leaked, not dropped), and the target refuses further work.
                    std::mem::forget(std::mem::take(&mut self.mem));
                    self.poisoned = true;
                    return Err(Error(format!("{}: io_uring: {e}", self.path.display())));
                }
            }
            let now = Instant::now();
            for cqe in self.ring.completion() {
                let k = cqe.user_data() as usize;
                lat[k] = now.duration_since(start).as_nanos() as u64;
                left -= 1;
                let io = ios[k];
                if cqe.result() != io.len as i32 && failure.is_none() {
                    let what = if cqe.result() < 0 {
                        std::io::Error::from_raw_os_error(-cqe.result()).to_string()
                    } else {
                        format!("{} of {} bytes", cqe.result(), io.len)
                    };
                    let op = if io.write { "write" } else { "read" };
                    failure = Some(Error(format!("{}: {op} at {}: {what}", self.path.display(), io.offset)));
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }

    fn idle(&mut self, ns: u64) -> Result<(), Error> {
        std::thread::sleep(std::time::Duration::from_nanos(ns));
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}
