//! Readahead knobs of a stock Linux kernel.
//!
//! What each mechanism can express (Linux 6.x, `mm/fadvise.c`, `mm/readahead.c`):
//! - `/sys/block/<dev>/queue/read_ahead_kb`: any size in KiB (the device's `bdi->ra_pages`).
//!   Linux copies it into a `struct file` only at `open()`; files already open keep theirs.
//! - `posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL)`: the file's `f_ra.ra_pages = bdi->ra_pages`,
//!   i.e. *the device's current value*, and clears `FMODE_RANDOM`.
//! - `POSIX_FADV_SEQUENTIAL`: twice the device's value. `POSIX_FADV_RANDOM`: `read()` reads
//!   only what was asked (no readahead); page faults on mappings follow `madvise`, not this.
//! - `POSIX_FADV_WILLNEED` on a range: reads that range now (the only way to prefetch
//!   backwards; not needed for window sizes, see below).
//!
//! So fadvise alone gives a file one of {device value, 2 x device value, none}. Any size is
//! expressible by borrowing the device setting: write the wanted value to `read_ahead_kb`,
//! `POSIX_FADV_NORMAL` the file descriptions, write the device value back. Files opened on the
//! device during those microseconds also start with the borrowed value; the tuner is the only
//! writer and does it once per window per value. The tuner reaches another process's file
//! descriptions with `pidfd_getfd` (Linux 5.6+, needs ptrace rights over it: root), which
//! duplicates the descriptor: same `struct file`, same `f_ra`, so mmap faults are tuned too.

use iolearn_policy::controller::ReadaheadKnobs;
use iolearn_probe::DeviceId;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One open file description of a watched process on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFile {
    /// Process.
    pub pid: u32,
    /// Its descriptor.
    pub fd: i32,
    /// Inode.
    pub ino: u64,
    /// What the application advised for it, kept through every change the tuner makes.
    pub advice: Advice,
}

/// An application's `posix_fadvise` on a description, as far as the kernel remembers it:
/// `FMODE_RANDOM` in `f_mode`, or a readahead of twice the device's at first sight.
///
/// Setting a description's readahead needs `POSIX_FADV_NORMAL`, which also clears
/// `FMODE_RANDOM`: pushed that way, a value would turn the kernel's readahead back on for files
/// the application (RocksDB's `advise_random_on_open`, the default) declared random, and the
/// pushed value would not behave as the same static setting does. So each push and restore
/// repeats the application's advice after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Advice {
    /// None, or `POSIX_FADV_NORMAL`.
    #[default]
    Normal,
    /// `POSIX_FADV_RANDOM`: `read()` gets no readahead.
    Random,
    /// `POSIX_FADV_SEQUENTIAL`: twice the device's readahead.
    Sequential,
}

impl Advice {
    /// The `posix_fadvise` calls that give a description the device's current value and keep
    /// this advice.
    pub fn calls(&self) -> &'static [i32] {
        match self {
            Advice::Normal => &[libc::POSIX_FADV_NORMAL],
            Advice::Random => &[libc::POSIX_FADV_NORMAL, libc::POSIX_FADV_RANDOM],
            Advice::Sequential => &[libc::POSIX_FADV_SEQUENTIAL],
        }
    }

    /// The journal's name for it.
    pub fn name(&self) -> &'static str {
        match self {
            Advice::Normal => "normal",
            Advice::Random => "random",
            Advice::Sequential => "sequential",
        }
    }

    /// From the journal's name.
    pub fn from_name(s: &str) -> Option<Advice> {
        [Advice::Normal, Advice::Random, Advice::Sequential]
            .into_iter()
            .find(|a| a.name() == s)
    }
}

/// Something the knobs did (or, dry, would have done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The device's value changed.
    Device {
        /// From.
        from_kb: u64,
        /// To.
        to_kb: u64,
        /// Open files given the new value.
        pushed: usize,
    },
    /// Files of one inode got a value: every watched process's descriptions of it (`pid`
    /// `None`), or one process's (a decision per description, or the value the process's
    /// next files get).
    File {
        /// Inode.
        ino: u64,
        /// The process, for one process's descriptions.
        pid: Option<u32>,
        /// KiB.
        kb: u64,
        /// Descriptions changed.
        descriptions: usize,
    },
}

/// The device and the watched processes' open files on it.
pub struct LinuxKnobs {
    dev: DeviceId,
    user_dev: u64,
    sysfs: PathBuf,
    dry_run: bool,
    device_kb: u64,
    /// Watched processes ...
    pub pids: Vec<u32>,
    /// ... or every process (none named, no cgroup). An empty `pids` without this is nobody:
    /// a cgroup whose last member left (or that has none yet) must not turn into every
    /// process on the machine.
    pub every_process: bool,
    open: Vec<OpenFile>,
    /// Values per file (every watched process's descriptions of it) ...
    file_kb: BTreeMap<u64, u64>,
    /// ... and per process and file (one process's descriptions); these win over the file's.
    desc_kb: BTreeMap<(u32, u64), u64>,
    /// The (process, file) values that came from the process's default for its next files,
    /// not from a decision of their own.
    default_descs: std::collections::BTreeSet<(u32, u64)>,
    new_file_kb: BTreeMap<u32, u64>,
    pending_files: BTreeMap<u64, u64>,
    pending_descs: BTreeMap<(u32, u64), u64>,
    /// Descriptions changed since the caller last took them (for the journal, which restores
    /// them at exit).
    pub touched: Vec<OpenFile>,
    /// What happened since the last [`LinuxKnobs::take_actions`].
    actions: Vec<Action>,
    /// Errors since the last [`LinuxKnobs::take_errors`] (a process gone between the scan
    /// and the change, say): reported, never fatal.
    errors: Vec<String>,
    /// Time spent acting (sysfs writes, fadvise), ns.
    pub act_ns: u64,
    /// Each description's advice, by (pid, fd, inode) ([`LinuxKnobs::note_modes`]).
    advice: BTreeMap<(u32, i32, u64), Advice>,
    /// Each (pid, inode) stream's last page read in the probe's latest window
    /// ([`LinuxKnobs::note_positions`]).
    positions: BTreeMap<(u32, u64), u64>,
    /// The device values in force since the last [`LinuxKnobs::note_modes`]: a description
    /// first seen then may have copied any of them at open.
    recent_device_kb: Vec<u64>,
    /// Descriptions given a value whose descriptor the process closed while it still maps
    /// the file, as (pid, inode, KiB), since the last [`LinuxKnobs::take_stranded`]
    /// ([`mapped_inodes`]).
    stranded: Vec<(u32, u64, u64)>,
}

/// The sysfs file of a block device's readahead.
pub fn read_ahead_path(name: &str) -> PathBuf {
    Path::new("/sys/class/block").join(name).join("queue/read_ahead_kb")
}

/// Read a device's `read_ahead_kb`.
pub fn read_device_kb(sysfs: &Path) -> Result<u64, String> {
    let t = std::fs::read_to_string(sysfs).map_err(|e| format!("{}: {e}", sysfs.display()))?;
    t.trim()
        .parse()
        .map_err(|_| format!("{}: not a number: {:?}", sysfs.display(), t.trim()))
}

/// Write a device's `read_ahead_kb`.
pub fn write_device_kb(sysfs: &Path, kb: u64) -> Result<(), String> {
    std::fs::write(sysfs, format!("{kb}\n")).map_err(|e| format!("{}: writing {kb}: {e}", sysfs.display()))
}

impl LinuxKnobs {
    /// Knobs of block device `name` (`loop0`); `dry_run` changes nothing.
    pub fn new(name: &str, dry_run: bool) -> Result<LinuxKnobs, String> {
        let dev = DeviceId::from_name(name).map_err(|e| e.to_string())?;
        let sysfs = read_ahead_path(name);
        let device_kb = read_device_kb(&sysfs)?;
        Ok(LinuxKnobs {
            dev,
            user_dev: libc::makedev(dev.major, dev.minor),
            sysfs,
            dry_run,
            device_kb,
            pids: Vec::new(),
            every_process: false,
            open: Vec::new(),
            file_kb: BTreeMap::new(),
            desc_kb: BTreeMap::new(),
            default_descs: Default::default(),
            new_file_kb: BTreeMap::new(),
            pending_descs: BTreeMap::new(),
            recent_device_kb: Vec::new(),
            stranded: Vec::new(),
            pending_files: BTreeMap::new(),
            touched: Vec::new(),
            actions: Vec::new(),
            errors: Vec::new(),
            act_ns: 0,
            advice: BTreeMap::new(),
            positions: BTreeMap::new(),
        })
    }

    /// Where each watched process's stream of each file read last in the probe's latest window
    /// (`(pid, inode, first page, last page)`; only streams that went forward are kept): a
    /// smaller value pushed into a description is made to act on a running sequential stream
    /// by dropping the pages read ahead of it ([`drop_ahead`]).
    pub fn note_positions(&mut self, streams: impl IntoIterator<Item = (u32, u64, u64, u64)>) {
        self.positions = streams
            .into_iter()
            .filter(|&(_, _, first, last)| last >= first)
            .map(|(pid, ino, _, last)| ((pid, ino), last))
            .collect();
    }

    /// After `t` was pushed from `from_kb` down to a smaller value: the pages its stream read
    /// ahead are dropped, so that its next read misses and the kernel builds its window again
    /// from the new limit (it never shrinks an open window: `scripts/ra-push-shrink.sh`).
    /// Four of the old windows past the last page read (twice as large under
    /// `POSIX_FADV_SEQUENTIAL`); nothing where the stream's place is not known.
    fn shrink_stream(&mut self, t: &OpenFile, from_kb: u64) {
        let Some(&last) = self.positions.get(&(t.pid, t.ino)) else {
            return;
        };
        let window_kb = if t.advice == Advice::Sequential {
            2 * from_kb
        } else {
            from_kb
        };
        if let Err(e) = drop_ahead(t.pid, t.fd, last + 1, window_kb) {
            self.errors
                .push(format!("pid {} fd {}: dropping the pages read ahead: {e}", t.pid, t.fd));
        }
    }

    /// The device.
    pub fn device(&self) -> DeviceId {
        self.dev
    }

    /// The sysfs file.
    pub fn sysfs(&self) -> &Path {
        &self.sysfs
    }

    /// Forget what was decided for process `pid` (it left the watched cgroup): a process that
    /// gets its number later must not inherit its values. What was set in the kernel stays
    /// in the journal, restored at exit.
    pub fn forget_process(&mut self, pid: u32) {
        self.new_file_kb.remove(&pid);
        self.desc_kb.retain(|&(p, _), _| p != pid);
        self.default_descs.retain(|&(p, _)| p != pid);
        self.pending_descs.retain(|&(p, _), _| p != pid);
    }

    /// The inodes and the (process, inode) descriptions open at the last scan, where the
    /// knobs forget closed ones (`None` when watching every process: values are not kept per
    /// process then).
    pub fn open_targets(&self) -> Option<iolearn_policy::guard::OpenTargets> {
        (!self.every_process).then(|| {
            (
                self.open.iter().map(|f| f.ino).collect(),
                self.open.iter().map(|f| (f.pid, f.ino)).collect(),
            )
        })
    }

    /// Rescan the watched processes' open files on the device; files a process opened since
    /// the last scan get the value chosen for its new files. Returns the new files.
    pub fn refresh(&mut self) -> usize {
        let before: std::collections::BTreeSet<(u32, i32, u64)> =
            self.open.iter().map(|f| (f.pid, f.fd, f.ino)).collect();
        self.open = open_files_on(self.user_dev, (!self.every_process).then_some(&self.pids[..]));
        mark_advice(&self.advice, &mut self.open);
        // Values of files and descriptions no longer open are gone from the kernel too (a file
        // opened again copies the device's value): forget them, so the maps stay the size of
        // what is open and a reopened file is not taken for one that has its value.
        if !self.every_process {
            let open_inos: std::collections::BTreeSet<u64> = self.open.iter().map(|f| f.ino).collect();
            let open_descs: std::collections::BTreeSet<(u32, u64)> = self.open.iter().map(|f| (f.pid, f.ino)).collect();
            // Gone from the descriptors but still mapped: the value stays, out of reach.
            let mut maps: BTreeMap<u32, std::collections::BTreeSet<u64>> = BTreeMap::new();
            for (&(pid, ino), &kb) in &self.desc_kb {
                if !open_descs.contains(&(pid, ino))
                    && maps
                        .entry(pid)
                        .or_insert_with(|| mapped_inodes(pid, self.user_dev))
                        .contains(&ino)
                {
                    self.stranded.push((pid, ino, kb));
                }
            }
            self.file_kb.retain(|ino, _| open_inos.contains(ino));
            self.desc_kb.retain(|key, _| open_descs.contains(key));
            self.default_descs.retain(|key| open_descs.contains(key));
        }
        let fresh: Vec<OpenFile> = self
            .open
            .iter()
            .filter(|f| !before.contains(&(f.pid, f.fd, f.ino)))
            .copied()
            .collect();
        for f in &fresh {
            let key = (f.pid, f.ino);
            if let Some(&kb) = self.desc_kb.get(&key).or(self.file_kb.get(&f.ino)) {
                // Opened (or reopened) since: it copied the device's value; give it the value
                // its process or its file has.
                self.pending_descs.entry(key).or_insert(kb);
            } else if let Some(&kb) = self.new_file_kb.get(&f.pid) {
                self.pending_descs.insert(key, kb);
                self.default_descs.insert(key);
            }
        }
        fresh.len()
    }

    /// What the kernel holds for each open description (the probe's open-file iterator): an
    /// application's `POSIX_FADV_RANDOM` is seen whenever it is set; `POSIX_FADV_SEQUENTIAL`
    /// only on a description's first sight (twice the device's readahead), before any push.
    pub fn note_modes(&mut self, modes: &[iolearn_probe::OpenFileMode]) {
        let device_pages = self.device_kb / 4;
        // A description opened while another device value was in force copied that one: twice
        // today's value is only SEQUENTIAL if it was not simply the device's value then (the
        // tuner halved the device after the file was opened).
        let copied = |pages: u64| self.recent_device_kb.iter().any(|&kb| kb / 4 == pages);
        let mut seen = std::collections::BTreeSet::new();
        for m in modes {
            let key = (m.tgid, m.fd as i32, m.ino);
            seen.insert(key);
            let pages = m.ra_pages as u64;
            let advice = match (m.random(), self.advice.get(&key)) {
                (true, _) => Advice::Random,
                // No longer random: the application changed its mind.
                (false, Some(Advice::Random)) => Advice::Normal,
                (false, Some(&a)) => a,
                (false, None) if device_pages > 0 && pages == 2 * device_pages && !copied(pages) => Advice::Sequential,
                (false, None) => Advice::Normal,
            };
            self.advice.insert(key, advice);
        }
        // Descriptions closed since: forget them (the map would grow with every file seen).
        self.advice.retain(|key, _| seen.contains(key));
        self.recent_device_kb = vec![self.device_kb];
        mark_advice(&self.advice, &mut self.open);
    }

    /// Apply the per-file changes asked since the last flush, grouped by value (one borrow
    /// of the device setting per value).
    pub fn flush(&mut self) {
        let t0 = std::time::Instant::now();
        self.flush_now();
        self.act_ns += t0.elapsed().as_nanos() as u64;
    }

    fn flush_now(&mut self) {
        let files = std::mem::take(&mut self.pending_files);
        let descs = std::mem::take(&mut self.pending_descs);
        let mut by_kb: BTreeMap<u64, Vec<OpenFile>> = BTreeMap::new();
        for f in &self.open {
            if let Some(&kb) = descs.get(&(f.pid, f.ino)).or(files.get(&f.ino)) {
                by_kb.entry(kb).or_default().push(*f);
            }
        }
        // Values whose device borrow failed reached nobody: not recorded, so the controller
        // sees the old value and asks again.
        let mut failed = std::collections::BTreeSet::new();
        for (kb, targets) in &by_kb {
            if self.dry_run {
                break;
            }
            let borrowed = *kb != self.device_kb;
            if borrowed {
                if let Err(e) = write_device_kb(&self.sysfs, *kb) {
                    self.errors.push(e);
                    failed.insert(*kb);
                    continue;
                }
                // Files opened during the borrow copy it: not an application's SEQUENTIAL.
                self.recent_device_kb.push(*kb);
            }
            for t in targets {
                // Noted for the journal (which the tuner saves right after the flush) whatever
                // the calls do: one may succeed and the next fail, and restoring a description
                // left as it was is harmless.
                self.touched.push(*t);
                if let Err(e) = fadvise_remote(t.pid, t.fd, t.advice.calls()) {
                    self.errors.push(format!("pid {} fd {}: {e}", t.pid, t.fd));
                } else {
                    // What it had before (the pending values are taken: the values in force),
                    // for a smaller value to drop its stream's read-ahead pages.
                    let before = self.description_read_ahead_kb(t.pid, t.ino);
                    if *kb < before {
                        self.shrink_stream(t, before);
                    }
                }
            }
            if borrowed {
                if let Err(e) = write_device_kb(&self.sysfs, self.device_kb) {
                    self.errors.push(e);
                }
            }
        }
        let reached = |pid: Option<u32>, ino: u64, kb: u64| {
            by_kb.get(&kb).map_or(0, |t| {
                t.iter()
                    .filter(|t| t.ino == ino && pid.is_none_or(|p| p == t.pid))
                    .count()
            })
        };
        // A file's new value replaces its descriptions' own (as in the simulator); a
        // description's new value wins over its file's.
        let applied = |kb: &u64| !failed.contains(kb);
        self.desc_kb
            .retain(|(_, ino), _| files.get(ino).is_none_or(|kb| !applied(kb)));
        self.default_descs
            .retain(|(_, ino)| files.get(ino).is_none_or(|kb| !applied(kb)));
        for (&ino, &kb) in files.iter().filter(|(_, kb)| applied(kb)) {
            self.file_kb.insert(ino, kb);
            let descriptions = reached(None, ino, kb);
            self.actions.push(Action::File {
                ino,
                pid: None,
                kb,
                descriptions,
            });
        }
        for (&(pid, ino), &kb) in descs.iter().filter(|(_, kb)| applied(kb)) {
            self.desc_kb.insert((pid, ino), kb);
            let descriptions = reached(Some(pid), ino, kb);
            self.actions.push(Action::File {
                ino,
                pid: Some(pid),
                kb,
                descriptions,
            });
        }
    }

    /// Actions since the last [`LinuxKnobs::take_actions`], not taken yet.
    pub fn actions_pending(&self) -> usize {
        self.actions.len()
    }

    /// Actions since the last call.
    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    /// Descriptions stranded since the last call (see the field).
    pub fn take_stranded(&mut self) -> Vec<(u32, u64, u64)> {
        std::mem::take(&mut self.stranded)
    }

    /// Errors since the last call.
    pub fn take_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
    }

    /// Open files seen by the last scan.
    pub fn open_files(&self) -> &[OpenFile] {
        &self.open
    }
}

impl ReadaheadKnobs for LinuxKnobs {
    fn device_read_ahead_kb(&self) -> u64 {
        self.device_kb
    }

    fn set_device_read_ahead_kb(&mut self, kb: u64) {
        let t0 = std::time::Instant::now();
        self.set_device_now(kb);
        self.act_ns += t0.elapsed().as_nanos() as u64;
    }

    /// The file's own value; without one, the value its open descriptions have when they all
    /// agree (a file one process opened, with that process's default); else the device's (so a
    /// per-file decision is pushed when the descriptions disagree).
    fn file_read_ahead_kb(&self, inode: u64) -> u64 {
        if let Some(&kb) = self.pending_files.get(&inode).or(self.file_kb.get(&inode)) {
            return kb;
        }
        let mut common = None;
        for f in self.open.iter().filter(|f| f.ino == inode) {
            let kb = self.description_read_ahead_kb(f.pid, inode);
            match common {
                Some(c) if c != kb => return self.device_kb,
                _ => common = Some(kb),
            }
        }
        common.unwrap_or(self.device_kb)
    }

    fn set_file_read_ahead_kb(&mut self, inode: u64, kb: u64) {
        self.pending_files.insert(inode, kb);
        // The file's value replaces its descriptions' own at the next flush.
        self.pending_descs.retain(|(_, ino), _| *ino != inode);
    }

    fn description_read_ahead_kb(&self, pid: u32, inode: u64) -> u64 {
        let key = (pid, inode);
        self.pending_descs
            .get(&key)
            .or(self.pending_files.get(&inode))
            .or(self.desc_kb.get(&key))
            .or(self.file_kb.get(&inode))
            .copied()
            .unwrap_or(self.device_kb)
    }

    fn set_description_read_ahead_kb(&mut self, pid: u32, inode: u64, kb: u64) {
        self.pending_descs.insert((pid, inode), kb);
        self.default_descs.remove(&(pid, inode));
    }

    fn set_new_file_read_ahead_kb(&mut self, pid: u32, kb: u64) {
        self.new_file_kb.insert(pid, kb);
        // The files this process has open but has not read yet (no decision of their own):
        // a database opens its files up front, so "next" files are already open here, where
        // the simulator opens them at first access. Only this process's descriptions: another
        // process may read the same file another way.
        let waiting: Vec<u64> = self
            .open
            .iter()
            .filter(|f| f.pid == pid)
            .filter(|f| {
                let key = (pid, f.ino);
                let undecided = !self.file_kb.contains_key(&f.ino)
                    && !self.pending_files.contains_key(&f.ino)
                    && !self.desc_kb.contains_key(&key)
                    && !self.pending_descs.contains_key(&key);
                undecided || self.default_descs.contains(&key)
            })
            .map(|f| f.ino)
            .filter(|&ino| self.description_read_ahead_kb(pid, ino) != kb)
            .collect();
        for ino in waiting {
            self.pending_descs.insert((pid, ino), kb);
            self.default_descs.insert((pid, ino));
        }
    }
}

impl LinuxKnobs {
    fn set_device_now(&mut self, kb: u64) {
        let from = self.device_kb;
        if kb == from {
            return;
        }
        let mut pushed = 0;
        if !self.dry_run {
            if let Err(e) = write_device_kb(&self.sysfs, kb) {
                self.errors.push(e);
                return;
            }
            // Linux copies the device value into a file only at open: push it into the files
            // already open (those without a per-file value of ours).
            let mut targets: Vec<OpenFile> = if self.every_process {
                open_files_on(self.user_dev, None)
            } else {
                self.open.clone()
            };
            // Every process's files, scanned just now: their advice as the probe last read it.
            mark_advice(&self.advice, &mut targets);
            let own = |t: &OpenFile| self.file_kb.contains_key(&t.ino) || self.desc_kb.contains_key(&(t.pid, t.ino));
            let targets: Vec<OpenFile> = targets.into_iter().filter(|t| !own(t)).collect();
            for t in &targets {
                // Noted for the journal whatever the calls do (see `flush_now`).
                self.touched.push(*t);
                match fadvise_remote(t.pid, t.fd, t.advice.calls()) {
                    Ok(()) => {
                        pushed += 1;
                        if kb < from {
                            self.shrink_stream(t, from);
                        }
                    }
                    Err(e) => self.errors.push(format!("pid {} fd {}: {e}", t.pid, t.fd)),
                }
            }
        }
        self.device_kb = kb;
        self.recent_device_kb.push(kb);
        self.actions.push(Action::Device {
            from_kb: from,
            to_kb: kb,
            pushed,
        });
    }
}

/// Give `files` their advice as the probe last read it (normal when never seen).
fn mark_advice(advice: &BTreeMap<(u32, i32, u64), Advice>, files: &mut [OpenFile]) {
    for f in files {
        f.advice = advice.get(&(f.pid, f.fd, f.ino)).copied().unwrap_or_default();
    }
}

/// Inodes of files on device `user_dev` that process `pid` maps (`/proc/PID/maps`: the
/// device as `major:minor` in hex, then the inode).
///
/// Why it matters: a process may map a file and close its descriptor (RocksDB's mmap reads
/// do, some time after opening its tables). The open file description lives on in the mapping,
/// with the readahead the tuner gave it, and its faults read ahead by that value; but with no
/// descriptor, `pidfd_getfd` cannot reach it, so neither a revert nor the restore at exit can
/// change it back. It ends when the process unmaps the file. The tuner reports these.
pub fn mapped_inodes(pid: u32, user_dev: u64) -> std::collections::BTreeSet<u64> {
    let Ok(maps) = iolearn_safeio::read_to_string(Path::new(&format!("/proc/{pid}/maps")), 64 << 20) else {
        return Default::default();
    };
    maps.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (dev, ino) = (f.nth(3)?, f.next()?);
            let (major, minor) = dev.split_once(':')?;
            let dev = libc::makedev(
                u32::from_str_radix(major, 16).ok()?,
                u32::from_str_radix(minor, 16).ok()?,
            );
            (dev == user_dev).then(|| ino.parse().ok()).flatten()
        })
        .filter(|&ino| ino != 0)
        .collect()
}

/// Regular files on device `user_dev` open in `pids` (every process: `None`).
pub fn open_files_on(user_dev: u64, pids: Option<&[u32]>) -> Vec<OpenFile> {
    let all: Vec<u32>;
    let pids = match pids {
        Some(p) => p,
        None => {
            all = std::fs::read_dir("/proc")
                .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
                .unwrap_or_default();
            &all
        }
    };
    let mut out = Vec::new();
    for &pid in pids {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue; // gone, or not ours to see
        };
        for e in dir.flatten() {
            let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            // Follows the magic link to the open file itself.
            let Ok(m) = std::fs::metadata(e.path()) else { continue };
            if m.is_file() && m.dev() == user_dev {
                out.push(OpenFile {
                    pid,
                    fd,
                    ino: m.ino(),
                    advice: Advice::Normal,
                });
            }
        }
    }
    out
}

/// Descriptor `fd` of process `pid`, duplicated into this process (`pidfd_getfd`: the same
/// open file description; root, or ptrace rights over the process).
pub fn take_descriptor(pid: u32, fd: i32) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // Each descriptor opened here is owned (closed on every return path).
    let owned = |rc: libc::c_long| {
        if rc < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            // SAFETY: a descriptor the syscall just returned, owned by nobody else.
            Ok(unsafe { OwnedFd::from_raw_fd(rc as i32) })
        }
    };
    // SAFETY: plain syscalls on valid arguments.
    let pidfd = owned(unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) })?;
    owned(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) })
}

/// `POSIX_FADV_DONTNEED` over four windows of `window_kb` from page `from_page` of process
/// `pid`'s descriptor `fd` (clean pages not mapped are dropped; the others stay).
pub fn drop_ahead(pid: u32, fd: i32, from_page: u64, window_kb: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let local = take_descriptor(pid, fd)?;
    let offset = i64::try_from(from_page.saturating_mul(4096)).unwrap_or(i64::MAX);
    let len = i64::try_from(window_kb.saturating_mul(4 << 10)).unwrap_or(i64::MAX);
    fadvise(local.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED)
}

/// `posix_fadvise` with each of `advice` in turn on descriptor `fd` of process `pid`, through
/// one `pidfd_getfd`.
pub fn fadvise_remote(pid: u32, fd: i32, advice: &[i32]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let local = take_descriptor(pid, fd)?;
    advice.iter().try_for_each(|&a| fadvise(local.as_raw_fd(), 0, 0, a))
}

/// `posix_fadvise` on a descriptor of ours, its error number as an error.
pub(crate) fn fadvise(fd: i32, offset: i64, len: i64, advice: i32) -> std::io::Result<()> {
    // SAFETY: fadvise passes no memory; a descriptor that is not open is an error (EBADF).
    match unsafe { libc::posix_fadvise(fd, offset, len, advice) } {
        0 => Ok(()),
        rc => Err(std::io::Error::from_raw_os_error(rc)),
    }
}
