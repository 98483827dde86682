//! What the tuner changed, on disk before it changes it, so that the original settings come
//! back on exit, on SIGINT/SIGTERM, and on the next start after a crash.
//!
//! The journal is a small JSON document (`serde_json`; the format is in `docs/formats.md`),
//! written atomically ([`iolearn_safeio::write`]) before the first change and whenever the set
//! of touched descriptions grows; removed after a restore.
//!
//! A journal is input like any other: loading checks every field, and the sysfs file it names
//! must be the one the tuner itself would write for its device ([`read_ahead_path`]), so a
//! forged journal cannot make `--restore` write a value anywhere else.

use crate::linux::{fadvise_remote, read_ahead_path, read_device_kb, write_device_kb, Advice, OpenFile};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The largest journal read (a line per file description touched).
const MAX_JOURNAL_BYTES: u64 = 16 << 20;
/// The largest `original_read_ahead_kb` believed.
const MAX_READ_AHEAD_KB: u64 = iolearn_ml::format::MAX_READ_AHEAD_KB as u64;

/// The `format` field of every journal.
const FORMAT: &str = "iolearn-readahead-journal";

/// A journal as stored (`serde`): unknown fields and wrong types are errors.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    format: String,
    version: u32,
    device: String,
    sysfs: PathBuf,
    original_read_ahead_kb: u64,
    tuner_pid: u32,
    files: Vec<DocFile>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DocFile {
    pid: u32,
    fd: i32,
    ino: u64,
    /// The application's advice, repeated on restore (journals before it: "normal").
    #[serde(default = "normal")]
    advice: String,
}

fn normal() -> String {
    Advice::Normal.name().into()
}

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
        let doc = Doc {
            format: FORMAT.into(),
            version: 1,
            device: self.device.clone(),
            sysfs: self.sysfs.clone(),
            original_read_ahead_kb: self.original_kb,
            tuner_pid: self.tuner_pid,
            files: self
                .files
                .iter()
                .map(|f| DocFile {
                    pid: f.pid,
                    fd: f.fd,
                    ino: f.ino,
                    advice: f.advice.name().into(),
                })
                .collect(),
        };
        let mut text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        text.push('\n');
        iolearn_safeio::write(&self.path, text.as_bytes()).map_err(|e| e.to_string())
    }

    /// Read a journal; errors name the file and the field (and where the JSON is broken, the
    /// line and column).
    pub fn load(path: &Path) -> Result<Journal, JournalError> {
        let bad = |what: String| JournalError(format!("{}: {what}", path.display()));
        let text = iolearn_safeio::read_to_string(path, MAX_JOURNAL_BYTES).map_err(|e| JournalError(e.to_string()))?;
        // serde_path_to_error names the field at fault ("files[0].fd"), not just a column.
        let doc: Doc =
            serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(&text)).map_err(|e| {
                let at = e.path().to_string();
                let field = if at == "." { String::new() } else { format!("{at}: ") };
                bad(format!("{field}{} (not an iolearn readahead journal?)", e.inner()))
            })?;
        if doc.format != FORMAT || doc.version != 1 {
            return Err(bad(format!(
                "format {} version {}: not an iolearn readahead journal version 1",
                iolearn_safeio::excerpt(&doc.format, 40),
                doc.version
            )));
        }
        crate::check_device_name(&doc.device).map_err(|e| bad(format!("device: {e}")))?;
        if doc.original_read_ahead_kb > MAX_READ_AHEAD_KB {
            return Err(bad(format!(
                "original_read_ahead_kb: {} is out of range",
                doc.original_read_ahead_kb
            )));
        }
        if let Some(f) = doc.files.iter().find(|f| f.fd < 0) {
            return Err(bad(format!("files: fd {} is out of range", f.fd)));
        }
        if let Some(f) = doc.files.iter().find(|f| Advice::from_name(&f.advice).is_none()) {
            return Err(bad(format!(
                "files: advice {} is not normal, random or sequential",
                iolearn_safeio::excerpt(&f.advice, 40)
            )));
        }
        if doc.sysfs != read_ahead_path(&doc.device) {
            return Err(bad(format!(
                "sysfs {} is not {}'s readahead file ({}); refusing to restore to it",
                iolearn_safeio::excerpt(&doc.sysfs.to_string_lossy(), 80),
                doc.device,
                read_ahead_path(&doc.device).display()
            )));
        }
        Ok(Journal {
            path: path.to_path_buf(),
            files: doc
                .files
                .iter()
                .map(|f| OpenFile {
                    pid: f.pid,
                    fd: f.fd,
                    ino: f.ino,
                    advice: Advice::from_name(&f.advice).unwrap_or_default(),
                })
                .collect(),
            device: doc.device,
            sysfs: doc.sysfs,
            original_kb: doc.original_read_ahead_kb,
            tuner_pid: doc.tuner_pid,
        })
    }

    /// Record descriptions touched since the last save, each with the application's advice
    /// as last seen (an application may change its advice while tuned; its latest is the one
    /// to give back). Saved only when something changed.
    pub fn note_files(&mut self, touched: &[OpenFile]) -> Result<(), String> {
        let mut changed = false;
        for t in touched {
            match self
                .files
                .iter_mut()
                .find(|f| (f.pid, f.fd, f.ino) == (t.pid, t.fd, t.ino))
            {
                Some(f) if f.advice != t.advice => {
                    f.advice = t.advice;
                    changed = true;
                }
                Some(_) => {}
                None => {
                    self.files.push(*t);
                    changed = true;
                }
            }
        }
        if changed {
            self.save()?;
        }
        Ok(())
    }

    /// Touched descriptions that no descriptor reaches any more but that live on in a mapping
    /// of their process, as `(pid, inode)` ([`crate::linux::mapped_inodes`]): they keep the
    /// tuner's value until the process unmaps the file, and nothing can restore them.
    pub fn stranded(&self) -> Vec<(u32, u64)> {
        let Ok(dev) = iolearn_probe::DeviceId::from_name(&self.device) else {
            return Vec::new();
        };
        let user_dev = libc::makedev(dev.major, dev.minor);
        let mut mapped: std::collections::BTreeMap<u32, std::collections::BTreeSet<u64>> = Default::default();
        let mut out: Vec<(u32, u64)> = Vec::new();
        for f in &self.files {
            let open = std::fs::metadata(format!("/proc/{}/fd/{}", f.pid, f.fd)).is_ok_and(|m| m.ino() == f.ino);
            let maps = mapped
                .entry(f.pid)
                .or_insert_with(|| crate::linux::mapped_inodes(f.pid, user_dev));
            if !open && maps.contains(&f.ino) && !out.contains(&(f.pid, f.ino)) {
                out.push((f.pid, f.ino));
            }
        }
        out
    }

    /// Put everything back: the device's value, then each touched description still open
    /// (same process, same descriptor, same inode) gets it back with `POSIX_FADV_NORMAL`, then
    /// the application's own advice again.
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
            if let Err(e) = fadvise_remote(f.pid, f.fd, f.advice.calls()) {
                problems.push(format!("pid {} fd {}: {e}", f.pid, f.fd));
            }
        }
        if let Err(e) = std::fs::remove_file(&self.path) {
            problems.push(format!("{}: {e}", self.path.display()));
        }
        problems
    }
}
