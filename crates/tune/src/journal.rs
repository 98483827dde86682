//! What the tuner changed, on disk before it changes it, so that the original settings come
//! back on exit, on SIGINT/SIGTERM, and on the next start after a crash.
//!
//! The journal is a small text file (`key value` lines, one `file PID FD INO` line per file
//! description touched), written atomically (temporary file, fsync, rename) before the first
//! change and whenever the set of touched descriptions grows; removed after a restore.

use crate::linux::{fadvise_remote, read_device_kb, write_device_kb, OpenFile};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

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
    pub fn begin(state_dir: &Path, device: &str, sysfs: &Path) -> Result<Journal, String> {
        let original_kb = read_device_kb(sysfs)?;
        let j = Journal {
            path: Self::path_for(state_dir, device),
            device: device.to_string(),
            sysfs: sysfs.to_path_buf(),
            original_kb,
            tuner_pid: std::process::id(),
            files: Vec::new(),
        };
        j.save()?;
        Ok(j)
    }

    /// Write the journal atomically.
    pub fn save(&self) -> Result<(), String> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
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
        let tmp = self.path.with_extension("journal.tmp");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            std::fs::File::open(dir)?.sync_all()
        };
        write().map_err(|e| format!("{}: {e}", self.path.display()))
    }

    /// Read a journal; errors name the file and the line.
    pub fn load(path: &Path) -> Result<Journal, JournalError> {
        let err = |line: usize, what: &str| JournalError(format!("{}: line {line}: {what}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| JournalError(format!("{}: {e}", path.display())))?;
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
            let num = |v: &str, what: &str| {
                v.parse::<u64>()
                    .map_err(|_| err(n, &format!("{what}: {v:?} is not a number")))
            };
            match key {
                "device" => device = Some(rest.to_string()),
                "sysfs" => sysfs = Some(PathBuf::from(rest)),
                "original_read_ahead_kb" => original = Some(num(rest, "original_read_ahead_kb")?),
                "tuner_pid" => pid = Some(num(rest, "tuner_pid")? as u32),
                "file" => {
                    let v: Vec<&str> = rest.split(' ').collect();
                    if v.len() != 3 {
                        return Err(err(n, "file: expected PID FD INO"));
                    }
                    files.push(OpenFile {
                        pid: num(v[0], "file pid")? as u32,
                        fd: num(v[1], "file fd")? as i32,
                        ino: num(v[2], "file inode")?,
                    });
                }
                other => return Err(err(n, &format!("unknown key {other:?}"))),
            }
        }
        let missing = |k: &str| JournalError(format!("{}: missing {k}", path.display()));
        Ok(Journal {
            path: path.to_path_buf(),
            device: device.ok_or_else(|| missing("device"))?,
            sysfs: sysfs.ok_or_else(|| missing("sysfs"))?,
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

/// Whether process `pid` is alive.
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}
