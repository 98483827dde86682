//! Hysteresis and rate limiting between a controller and the knobs it turns.
//!
//! A model that flips between two classes every other window would rewrite a device's
//! readahead every second. [`SteadyKnobs`] lets a change through only when the controller
//! asked for the same new value in `hold` consecutive windows, and at most once every
//! `min_gap` windows per target. The controller does not know: it sees ordinary knobs.

use crate::controller::ReadaheadKnobs;
use std::collections::{BTreeMap, BTreeSet};

/// The most windows [`Steady::hold`] may ask for (the tuner's `--hold`, the simulator's
/// `hold`): one bound for both.
pub const MAX_HOLD: u32 = 1000;

/// The most windows [`Steady::min_gap`] may ask for (`--min-gap`, the simulator's `min_gap`).
pub const MAX_MIN_GAP: u64 = 100_000;

/// What a change is aimed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// The device's `read_ahead_kb`.
    Device,
    /// One file (inode).
    File(u64),
    /// One process's descriptions of one file: (pid, inode).
    Description(u32, u64),
    /// The files a process opens next.
    NewFiles(u32),
}

/// The memory of [`SteadyKnobs`] across windows.
#[derive(Debug, Clone)]
pub struct Steady {
    /// Consecutive windows a new value must be asked for before it is applied (1: at once).
    pub hold: u32,
    /// Windows between two changes of one target (0: no limit).
    pub min_gap: u64,
    window: u64,
    pending: BTreeMap<Target, (u64, u32)>,
    asked: BTreeSet<Target>,
    last_change: BTreeMap<Target, u64>,
    /// The value each process's next files got last (asking it again is not a change).
    new_files: BTreeMap<u32, u64>,
    /// Changes held back so far (hysteresis or rate limit).
    pub held_back: u64,
}

impl Steady {
    /// `hold` consecutive windows, `min_gap` windows between changes.
    pub fn new(hold: u32, min_gap: u64) -> Steady {
        Steady {
            hold: hold.max(1),
            min_gap,
            window: 0,
            pending: BTreeMap::new(),
            asked: BTreeSet::new(),
            last_change: BTreeMap::new(),
            new_files: BTreeMap::new(),
            held_back: 0,
        }
    }

    /// Call once per window, before the controller decides: requests not repeated in the
    /// window just ended are forgotten (holding means consecutive windows), and so are changes
    /// older than the rate limit (they limit nothing any more): a tuner left running over a
    /// database that writes new files all day keeps a memory the size of its recent changes,
    /// not of every file it ever changed.
    pub fn next_window(&mut self) {
        let asked = std::mem::take(&mut self.asked);
        self.pending.retain(|t, _| asked.contains(t));
        self.window += 1;
        let (now, gap) = (self.window, self.min_gap);
        self.last_change.retain(|_, &mut w| now - w < gap);
    }

    /// Forget process `pid` (it exited or left the watched cgroup): its held requests, its
    /// rate limits and its next files' value.
    pub fn forget_process(&mut self, pid: u32) {
        let its = |t: &Target| matches!(*t, Target::NewFiles(p) | Target::Description(p, _) if p == pid);
        self.pending.retain(|t, _| !its(t));
        self.last_change.retain(|t, _| !its(t));
        self.new_files.remove(&pid);
    }

    /// How many targets it remembers (held requests, rate limits, next files' values).
    pub fn remembered(&self) -> usize {
        self.pending.len() + self.last_change.len() + self.new_files.len()
    }

    /// Whether `kb` for `target` may be applied now.
    fn admit(&mut self, target: Target, kb: u64) -> bool {
        self.asked.insert(target);
        let p = self.pending.entry(target).or_insert((kb, 0));
        if p.0 != kb {
            *p = (kb, 0);
        }
        p.1 += 1;
        let held = p.1 >= self.hold;
        let spaced = self
            .last_change
            .get(&target)
            .is_none_or(|&w| self.window - w >= self.min_gap);
        if held && spaced {
            self.pending.remove(&target);
            self.last_change.insert(target, self.window);
            true
        } else {
            self.held_back += 1;
            false
        }
    }

    /// Knobs that pass changes through this filter.
    pub fn wrap<'a>(&'a mut self, inner: &'a mut dyn ReadaheadKnobs) -> SteadyKnobs<'a> {
        SteadyKnobs { inner, steady: self }
    }
}

/// [`ReadaheadKnobs`] with hysteresis and a rate limit (see [`Steady`]).
pub struct SteadyKnobs<'a> {
    inner: &'a mut dyn ReadaheadKnobs,
    steady: &'a mut Steady,
}

impl ReadaheadKnobs for SteadyKnobs<'_> {
    fn device_read_ahead_kb(&self) -> u64 {
        self.inner.device_read_ahead_kb()
    }
    fn set_device_read_ahead_kb(&mut self, kb: u64) {
        if self.steady.admit(Target::Device, kb) {
            self.inner.set_device_read_ahead_kb(kb);
        }
    }
    fn file_read_ahead_kb(&self, inode: u64) -> u64 {
        self.inner.file_read_ahead_kb(inode)
    }
    fn set_file_read_ahead_kb(&mut self, inode: u64, kb: u64) {
        if self.steady.admit(Target::File(inode), kb) {
            self.inner.set_file_read_ahead_kb(inode, kb);
        }
    }
    fn description_read_ahead_kb(&self, pid: u32, inode: u64) -> u64 {
        self.inner.description_read_ahead_kb(pid, inode)
    }
    fn set_description_read_ahead_kb(&mut self, pid: u32, inode: u64, kb: u64) {
        if self.steady.admit(Target::Description(pid, inode), kb) {
            self.inner.set_description_read_ahead_kb(pid, inode, kb);
        }
    }
    fn set_new_file_read_ahead_kb(&mut self, pid: u32, kb: u64) {
        // Held like any other change: on the kernel the process's open files without a value
        // of their own take it too (a database opens its files up front), so an unsteadied
        // value here would flip a file whose own flapping decision is being held back. The
        // cost: a scan's next files get the new value `hold` windows later.
        // A controller restates it every window; only a different value is a change (the
        // knobs give the files a process opens later the value they already have).
        if self.steady.new_files.get(&pid) == Some(&kb) {
            return;
        }
        if self.steady.admit(Target::NewFiles(pid), kb) {
            self.steady.new_files.insert(pid, kb);
            self.inner.set_new_file_read_ahead_kb(pid, kb);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Knobs that take every change.
    #[derive(Default)]
    struct Knobs {
        changes: u64,
    }

    impl ReadaheadKnobs for Knobs {
        fn device_read_ahead_kb(&self) -> u64 {
            128
        }
        fn set_device_read_ahead_kb(&mut self, _: u64) {
            self.changes += 1;
        }
        fn file_read_ahead_kb(&self, _: u64) -> u64 {
            128
        }
        fn set_file_read_ahead_kb(&mut self, _: u64, _: u64) {
            self.changes += 1;
        }
        fn set_new_file_read_ahead_kb(&mut self, _: u32, _: u64) {
            self.changes += 1;
        }
    }

    #[test]
    fn memory_stays_the_size_of_recent_changes_over_a_stream_of_new_files() {
        let mut s = Steady::new(1, 3);
        let mut k = Knobs::default();
        // A new file changed every window for a long time (a database's new tables).
        for ino in 0..10_000u64 {
            s.next_window();
            s.wrap(&mut k).set_file_read_ahead_kb(ino, 16);
        }
        assert_eq!(k.changes, 10_000);
        // Only the changes still inside the rate limit are remembered.
        assert!(s.remembered() <= 3, "{}", s.remembered());
        // And the rate limit still holds for a recent one.
        s.next_window();
        s.wrap(&mut k).set_file_read_ahead_kb(9_999, 512);
        assert_eq!(k.changes, 10_000, "changed 2 windows ago: held back");
        for _ in 0..2 {
            s.next_window();
        }
        s.wrap(&mut k).set_file_read_ahead_kb(9_999, 512);
        assert_eq!(k.changes, 10_001, "3 windows on: through");
    }

    #[test]
    fn a_process_that_left_is_forgotten() {
        let mut s = Steady::new(2, 5);
        let mut k = Knobs::default();
        s.next_window();
        s.wrap(&mut k).set_new_file_read_ahead_kb(42, 16); // held: asked once
        s.wrap(&mut k).set_new_file_read_ahead_kb(7, 16);
        assert_eq!(s.remembered(), 2);
        s.forget_process(42);
        assert_eq!(s.remembered(), 1);
        s.next_window();
        s.wrap(&mut k).set_new_file_read_ahead_kb(7, 16); // second window: through
        assert_eq!(k.changes, 1);
        s.forget_process(7);
        assert_eq!(s.remembered(), 0);
    }
}
