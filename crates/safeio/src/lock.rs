//! System-wide locks for what iolearn changes on the machine: one tuner per block device.
//!
//! A lock is an advisory `flock` on a file in [`run_dir`] (`/run/iolearn`, or
//! `$IOLEARN_RUN_DIR`), so it is shared by every iolearn process whatever its `--state-dir`,
//! and the kernel drops it when its holder dies (`kill -9` included): a lock is never stale.
//! The directory is created `0700` and must be a real directory owned by this user, not a
//! link; lock files are opened without following links.

use crate::{Error, ErrorKind, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where the locks live: `$IOLEARN_RUN_DIR`, else `/run/iolearn`.
pub fn run_dir() -> PathBuf {
    std::env::var_os("IOLEARN_RUN_DIR").map_or_else(|| PathBuf::from("/run/iolearn"), PathBuf::from)
}

/// Create the run directory if needed and check that nobody else could have planted it.
fn checked_run_dir() -> Result<PathBuf> {
    let dir = run_dir();
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io(&dir, "cannot create the lock directory", e)),
    }
    let m = std::fs::symlink_metadata(&dir).map_err(|e| Error::io(&dir, "cannot inspect", e))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !m.file_type().is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
        return Err(Error::refused(
            &dir,
            "is not a directory owned by this user and writable only by it; not trusting its locks",
        ));
    }
    Ok(dir)
}

/// A held lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct Lock {
    file: File,
    path: PathBuf,
}

impl Lock {
    /// Take the lock `name` (a file name in [`run_dir`]), waiting for it when `wait`; `Ok(None)`
    /// when another process holds it and `wait` is false.
    pub fn acquire(name: &str, wait: bool) -> Result<Option<Lock>> {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(Error::refused(Path::new(name), "not a lock name"));
        }
        let path = checked_run_dir()?.join(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| Error::io(&path, "cannot open the lock", e))?;
        if !file
            .metadata()
            .map_err(|e| Error::io(&path, "cannot inspect", e))?
            .is_file()
        {
            return Err(Error::refused(&path, "a lock must be a regular file"));
        }
        if wait {
            file.lock().map_err(|e| Error::io(&path, "cannot lock", e))?;
        } else {
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => return Ok(None),
                Err(TryLockError::Error(e)) => return Err(Error::io(&path, "cannot lock", e)),
            }
        }
        Ok(Some(Lock { file, path }))
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the holder wrote into the lock (at most 4 KiB), e.g. where its journal is.
    pub fn note(&mut self) -> Result<String> {
        let mut s = String::new();
        self.file
            .seek(SeekFrom::Start(0))
            .and_then(|_| (&self.file).take(4096).read_to_string(&mut s))
            .map_err(|e| Error::io(&self.path, "cannot read the lock", e))?;
        Ok(s)
    }

    /// Replace what the lock says (for the next holder, should this one die).
    pub fn set_note(&mut self, text: &str) -> Result<()> {
        if text.len() > 4096 {
            return Err(Error {
                path: self.path.clone(),
                reason: "note longer than 4 KiB".into(),
                kind: ErrorKind::TooLarge,
            });
        }
        self.file
            .set_len(0)
            .and_then(|()| self.file.seek(SeekFrom::Start(0)))
            .and_then(|_| self.file.write_all(text.as_bytes()))
            .and_then(|()| self.file.sync_data())
            .map_err(|e| Error::io(&self.path, "cannot write the lock", e))
    }
}
