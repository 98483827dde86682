//! What the tuner changed, on disk before it changes it, so that the original settings come
//! back on exit, on SIGINT/SIGTERM, and on the next start after a crash.
//!
//! The journal is a small text file (`key value` lines, one `file PID FD INO` line per file
//! description touched), written atomically ([`iolearn_safeio::write`]) before the first
//! change and whenever the set of touched descriptions grows; removed after a restore.
//!
//! A journal is input like any other: loading checks every field, and the sysfs file it names
//! must be the one the tuner itself would write for its device ([`read_ahead_path`]), so a
//! forged journal cannot make `--restore` write a value anywhere else.

use crate::linux::{fadvise_remote, read_ahead_path, read_device_kb, write_device_kb, OpenFile};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The largest journal read (a line per file description touched).
const MAX_JOURNAL_BYTES: u64 = 16 << 20;
/// The largest `original_read_ahead_kb` believed.
const MAX_READ_AHEAD_KB: u64 = iolearn_ml::format::MAX_READ_AHEAD_KB as u64;

/// The journal of one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Journal {
    /// Where it lives.
    pub path: PathBuf,
    /// The device's name (`loop0`).
    pub device: String,
    /// Its sysfs readahead file.
    pub sysfs: PathBuf,
    /// The value before the tuner's first change.
    pub original_kb: u64,
    /// The tuner's process.
    pub tuner_pid: u32,
    /// File descriptions given a value.
    pub files: Vec<OpenFile>,
}

/// A journal that could not be read: the file and what is wrong with it.
#[derive(Debug)]
pub struct JournalError(pub String);

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Journal {
    /// The journal path for `device` under `state_dir`.
    pub fn path_for(state_dir: &Path, device: &str) -> PathBuf {
        state_dir.join(format!("readahead-{device}.journal"))
    }

    /// Record the current state of `device` before changing it.
    pub fn begin(state_dir: &Path, device: &str) -> Result<Journal, String> {
        crate::check_device_name(device)?;
        let sysfs = read_ahead_path(device);
        let original_kb = read_device_kb(&sysfs)?;
        let j = Journal {
            path: Self::path_for(state_dir, device),
            device: device.to_string(),
            sysfs,
            original_kb,
            tuner_pid: std::process::id(),
            files: Vec::new(),
        };
        j.save()?;
        Ok(j)
    }

    /// Write the journal atomically (the state directory is made, `0700`, if missing).
    pub fn save(&self) -> Result<(), String> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("--state-dir {}: {e}", dir.display()))?;
        // Anyone else able to write here could replace the journal, and --restore trusts it
        // (within the checks of `load`).
        {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::symlink_metadata(dir).map_err(|e| format!("--state-dir {}: {e}", dir.display()))?;
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            if !m.is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
                return Err(format!(
                    "--state-dir {}: must be a directory owned by this user and writable only by it",
                    dir.display()
                ));
            }
        }
        let mut text = format!(
            "iolearn-readahead-journal 1\ndevice {}\nsysfs {}\noriginal_read_ahead_kb {}\ntuner_pid {}\n",
            self.device,
            self.sysfs.display(),
            self.original_kb,
            self.tuner_pid
        );
        for f in &self.files {
            text += &format!("file {} {} {}\n", f.pid, f.fd, f.ino);
        }
        iolearn_safeio::write(&self.path, text.as_bytes()).map_err(|e| e.to_string())
    }

    /// Read a journal; errors name the file and the line.
    pub fn load(path: &Path) -> Result<Journal, JournalError> {
        let err = |line: usize, what: &str| JournalError(format!("{}: line {line}: {what}", path.display()));
        let text = iolearn_safeio::read_to_string(path, MAX_JOURNAL_BYTES).map_err(|e| JournalError(e.to_string()))?;
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, "iolearn-readahead-journal 1")) => {}
            _ => return Err(err(1, "not an iolearn readahead journal (version 1)")),
        }
        let (mut device, mut sysfs, mut original, mut pid) = (None, None, None, None);
        let mut files = Vec::new();
        for (i, line) in lines {
            let n = i + 1;
            let (key, rest) = line.split_once(' ').ok_or_else(|| err(n, "expected `key value`"))?;
            fn num<T: std::str::FromStr>(v: &str) -> Option<T> {
                v.parse::<T>().ok()
            }
            let bad = |what: &str, v: &str| {
                err(
                    n,
                    &format!("{what}: {} is out of range", iolearn_safeio::excerpt(v, 24)),
                )
            };
            match key {
                "device" => {
                    crate::check_device_name(rest).map_err(|e| err(n, &e))?;
                    device = Some(rest.to_string())
                }
                "sysfs" => sysfs = Some(PathBuf::from(rest)),
                "original_read_ahead_kb" => {
                    let kb = num::<u64>(rest).filter(|&kb| kb <= MAX_READ_AHEAD_KB);
                    original = Some(kb.ok_or_else(|| bad("original_read_ahead_kb", rest))?)
                }
                "tuner_pid" => pid = Some(num::<u32>(rest).ok_or_else(|| bad("tuner_pid", rest))?),
                "file" => {
                    let v: Vec<&str> = rest.split(' ').collect();
                    if v.len() != 3 {
                        return Err(err(n, "file: expected PID FD INO"));
                    }
                    files.push(OpenFile {
                        pid: num::<u32>(v[0]).ok_or_else(|| bad("file pid", v[0]))?,
                        fd: num::<i32>(v[1])
                            .filter(|&fd| fd >= 0)
                            .ok_or_else(|| bad("file fd", v[1]))?,
                        ino: num::<u64>(v[2]).ok_or_else(|| bad("file inode", v[2]))?,
                    });
                }
                other => return Err(err(n, &format!("unknown key {}", iolearn_safeio::excerpt(other, 24)))),
            }
        }
        let missing = |k: &str| JournalError(format!("{}: missing {k}", path.display()));
        let device = device.ok_or_else(|| missing("device"))?;
        let sysfs = sysfs.ok_or_else(|| missing("sysfs"))?;
        if sysfs != read_ahead_path(&device) {
            return Err(JournalError(format!(
                "{}: sysfs {} is not {device}'s readahead file ({}); refusing to restore to it",
                path.display(),
                iolearn_safeio::excerpt(&sysfs.to_string_lossy(), 80),
                read_ahead_path(&device).display()
            )));
        }
        Ok(Journal {
            path: path.to_path_buf(),
            device,
            sysfs,
            original_kb: original.ok_or_else(|| missing("original_read_ahead_kb"))?,
            tuner_pid: pid.ok_or_else(|| missing("tuner_pid"))?,
            files,
        })
    }

    /// Record descriptions touched since the last save (saved only when the set grew).
    pub fn note_files(&mut self, touched: &[OpenFile]) -> Result<(), String> {
        let before = self.files.len();
        for t in touched {
            if !self.files.contains(t) {
                self.files.push(*t);
            }
        }
        if self.files.len() > before {
            self.save()?;
        }
        Ok(())
    }

    /// Put everything back: the device's value, then each touched description still open
    /// (same process, same descriptor, same inode) gets it back with `POSIX_FADV_NORMAL`.
    /// Removes the journal when the device is restored. Returns what could not be restored.
    pub fn restore(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Err(e) = write_device_kb(&self.sysfs, self.original_kb) {
            problems.push(e);
            return problems; // keep the journal for the next attempt
        }
        for f in &self.files {
            let still = std::fs::metadata(format!("/proc/{}/fd/{}", f.pid, f.fd)).is_ok_and(|m| m.ino() == f.ino);
            if !still {
                continue; // closed since: its next open gets the device's (restored) value
            }
            if let Err(e) = fadvise_remote(f.pid, f.fd, libc::POSIX_FADV_NORMAL) {
                problems.push(format!("pid {} fd {}: {e}", f.pid, f.fd));
            }
        }
        if let Err(e) = std::fs::remove_file(&self.path) {
            problems.push(format!("{}: {e}", self.path.display()));
        }
        problems
    }
}
