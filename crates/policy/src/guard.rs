//! The guardrail: a controller may change readahead only while it measurably does no worse
//! than vanilla.
//!
//! [`Guarded`] wraps any controller with the hysteresis of [`Steady`] and an A/B check on the
//! workload's [`Outcome::progress`]. It starts on vanilla and measures a block of `block`
//! windows; then the controller acts. Each new decision of the controller, once it has settled
//! (`settle` windows: the cache still holds what the other setting read; a change that only
//! lowers readahead is judged in its first window by the rules for a clear loss and a
//! collapse below, having no start-up cost) and been measured for
//! `block` windows, is judged against the latest vanilla block: kept when its median progress
//! is within `tolerance` of vanilla's, reverted otherwise (several watched processes: each
//! against its own vanilla, with equal weights, [`Outcome::relative_progress`]). A vanilla block older than the
//! current interval is measured again before judging (the interval doubles after every passed
//! check, and grows four times after a check, or a first verdict against vanilla measured just
//! before, that vanilla fell clearly below, up to `max_interval`). A decision that passes against
//! the run's first vanilla block, not measured just before it, by less than a clear margin, is
//! checked against vanilla measured again (that block may be from the workload's warm-up). A single
//! settled window below `abort` times vanilla reverts at once,
//! where it can be told from noise (progress counted in clock ticks: a shortfall of more than
//! three times the square root of vanilla's ticks in a window); else two in a row do. A
//! settled window clearly below every window of vanilla's block (by more than the tolerance
//! and twice the block's spread about its line) sends the guardrail to measure vanilla again
//! at once, without waiting for a whole block, and is reverted if it is as clearly below
//! that block too (`clearly_below`): on a workload that warms the cache as it runs, each
//! window at a worse value is lost for good.
//! A revert holds vanilla for a backoff of that value that doubles on each failure (four times
//! after a collapse; a different decision is tried sooner: the controller may have seen the
//! workload change), and logs the reason ([`GuardEvent`]) with the outcome behind it (pages
//! read per page used, demand misses per page used). A whole block that passes on progress
//! but read more than twice the pages per page used that vanilla's did (and at least one page
//! more) is reverted too, unless its progress gained beyond the tolerance and beyond chance
//! ("waste", [`Guarded::wasteful`]): a workload that runs a tick of its own code a window
//! shows no progress either way, and unused readahead costs the device and the cache. Pages
//! are counted for the device, not by process: a waste failure takes the whole decision back.
//!
//! Several watched processes are judged each against its own vanilla (the mean of their
//! ratios). Where the decision is per process (open file descriptions), a process that loses
//! more than `harm` while the mean passes, or collapses in one window while another does not,
//! is put back to vanilla alone for a backoff ([`GuardEventKind::ProcessReverted`]); the
//! others keep their values. Where the decision is per device, a process that loses more than
//! the tolerance (or its count's noise) while the mean passes is put back alone the same way,
//! its files given vanilla's value of their own (`Guarded::harm_bar`).
//!
//! A kept decision whose last block falls clearly below the vanilla block it was judged
//! against is checked against vanilla at once, not at the next periodic check.
//!
//! A controller that changes its mind faster than a block is judged as a whole on its last
//! `4 x block` windows, and a loss there backs the controller off as a whole (not one value), so
//! flipping between two bad values gains nothing. A check of vanilla judges the windows it was
//! started for, and only if the controller still wants what they measured.
//!
//! Windows the workload ran in without a measure of its progress (a failed reading) join no
//! block; `settle + block` of them in a row put vanilla back until progress is measured again
//! ([`GuardEventKind::Unmeasured`]): a decision is never left in force unjudged for long.
//!
//! Exploration is bounded: the controller's requests below `min_kb` are raised to it (see
//! [`GuardConfig::min_kb`]), a setting that collapses lasts at most `settle + 1` windows after
//! a fresh vanilla block (`settle + 2` on a light workload whose window is noise; a loss above
//! the collapse bar, `settle + block`), and vanilla costs
//! `settle + block` windows per interval.

use crate::controller::{ReadaheadController, ReadaheadKnobs};
use crate::readahead::{Outcome, RelativeProgress, WindowFeatures};
use crate::steady::Steady;
use std::collections::{BTreeMap, BTreeSet};

/// How the guardrail measures and backs off. Windows are the controller's decision windows.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardConfig {
    /// Windows after a switch or a new decision that are not measured.
    pub settle: u32,
    /// Windows measured per side of a comparison (their median progress is compared, or
    /// each process's progress summed over them, [`Outcome::relative_progress`]). With 1,
    /// every settled window is a whole block: held to the tolerance and judged for waste.
    pub block: u32,
    /// The controller is reverted when its progress is below vanilla's by more than this share.
    pub tolerance: f64,
    /// Any settled window of the controller's below this share of vanilla's progress reverts
    /// at once, without waiting for a whole block (where the window's shortfall is more than
    /// clock-tick noise; else two such windows in a row). Settling windows are not judged on
    /// their own (only `settle` of them in a row): raising readahead under a running reader
    /// costs the kernel about a second first.
    pub abort: f64,
    /// How old (windows) a vanilla block may be to judge a decision by, at first; doubles after
    /// each passed check, so vanilla is measured less often while the controller keeps winning
    /// (four times after a check, or a first verdict against vanilla measured just before, that
    /// vanilla fell clearly below: `Guarded::clearly_above`).
    pub first_interval: u64,
    /// The most windows between two vanilla blocks.
    pub max_interval: u64,
    /// Windows on vanilla after the first revert; doubles after each further one.
    pub first_backoff: u64,
    /// The longest backoff.
    pub max_backoff: u64,
    /// The least readahead the guardrail lets through, KiB: smaller requests get this. One
    /// window of 8 KiB is enough for a random or scanning mmap reader to count misses past
    /// `MMAP_LOTSAMISS`, after which the kernel leaves read-around off for that open file for
    /// dozens of windows, whatever the value goes back to: a revert could not undo it.
    pub min_kb: u64,
    /// A process that loses more than this share of its own vanilla progress while the mean
    /// over processes passes has its own values (its open file descriptions and next files)
    /// put back to vanilla for a backoff, the others keeping theirs: the mean alone let a
    /// range scan lose 30% for a random reader's doubling. Decisions per device are held to
    /// the tolerance instead (`Guarded::harm_bar`); decisions per file cannot be taken back
    /// one process at a time.
    pub harm: f64,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            settle: 1,
            block: 3,
            tolerance: 0.02,
            abort: 0.7,
            first_interval: 16,
            max_interval: 128,
            first_backoff: 16,
            max_backoff: 256,
            min_kb: 16,
            harm: 0.15,
        }
    }
}

impl GuardConfig {
    /// Every field in range; the error names the field.
    pub fn check(&self) -> Result<(), String> {
        if self.settle > 100 {
            return Err(format!("guard settle must be 0 to 100 windows, got {}", self.settle));
        }
        if !(1..=100).contains(&self.block) {
            return Err(format!("guard block must be 1 to 100 windows, got {}", self.block));
        }
        if !(0.0..=0.5).contains(&self.tolerance) {
            return Err(format!("guard tolerance must be 0 to 0.5, got {}", self.tolerance));
        }
        if self.min_kb > iolearn_ml::format::MAX_READ_AHEAD_KB as u64 {
            return Err(format!(
                "guard min_kb must be at most {}, got {}",
                iolearn_ml::format::MAX_READ_AHEAD_KB,
                self.min_kb
            ));
        }
        if !(0.0..=1.0).contains(&self.harm) {
            return Err(format!("guard harm must be 0 to 1, got {}", self.harm));
        }
        if !(0.0..=1.0).contains(&self.abort) {
            return Err(format!("guard abort must be 0 to 1, got {}", self.abort));
        }
        for (name, lo, hi) in [
            ("interval", self.first_interval, self.max_interval),
            ("backoff", self.first_backoff, self.max_backoff),
        ] {
            if lo == 0 || lo > hi || hi > 1_000_000 {
                return Err(format!(
                    "guard {name}: want 1 <= first <= max <= 1000000 windows, got {lo} and {hi}"
                ));
            }
        }
        Ok(())
    }
}

/// Which setting is in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    /// The kernel's own readahead (the value before the tuner started).
    Vanilla,
    /// What the controller asked for.
    Tuned,
}

/// What the guardrail did and why.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardEvent {
    /// The decision window.
    pub window: u64,
    /// The verdict.
    pub kind: GuardEventKind,
    /// Median progress of the controller's windows and of vanilla's.
    pub tuned: f64,
    /// See `tuned`.
    pub vanilla: f64,
    /// The controller's progress relative to vanilla's, as judged: the ratio of the two
    /// medians, or with several processes the mean of each one's ratio (which `tuned` and
    /// `vanilla`, sums over processes, may contradict).
    pub relative: f64,
    /// The process a [`GuardEventKind::ProcessReverted`] is about.
    pub pid: Option<u32>,
    /// The outcome behind the verdict, for the log.
    pub reason: String,
}

/// A guardrail verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardEventKind {
    /// The controller did at least as well as vanilla (within the tolerance): it stays.
    Kept,
    /// The controller did worse: vanilla is back for a backoff.
    Reverted,
    /// The controller passed, but one process lost more than [`GuardConfig::harm`]: that
    /// process's values are back to vanilla for a backoff.
    ProcessReverted,
    /// The workload ran for `settle + block` windows in a row without a measure of its
    /// progress (the application's count or the CPU meter failed): vanilla until progress is
    /// measured again.
    Unmeasured,
}

impl GuardEventKind {
    /// `kept`, `reverted`, `reverted_process` or `unmeasured`.
    pub fn as_str(&self) -> &'static str {
        match self {
            GuardEventKind::Kept => "kept",
            GuardEventKind::Reverted => "reverted",
            GuardEventKind::ProcessReverted => "reverted_process",
            GuardEventKind::Unmeasured => "unmeasured",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Vanilla, measuring before the controller's first trial (or after a backoff).
    Baseline,
    /// The controller in force; each new decision is judged after `settle + block` windows.
    Tuned,
    /// Vanilla, measuring because the last vanilla block is too old to judge by.
    Check,
    /// Vanilla after a revert, while the decision asked for is one being backed off.
    Backoff,
}

/// What the controller asked for, applied or not.
#[derive(Debug, Clone, Default, PartialEq)]
struct Wants {
    device: Option<u64>,
    files: BTreeMap<u64, u64>,
    descriptions: BTreeMap<(u32, u64), u64>,
    new_files: BTreeMap<u32, u64>,
}

impl Wants {
    /// The same targets, every one at `kb` (the device included).
    fn all_at(&self, kb: u64) -> Wants {
        Wants {
            device: Some(kb),
            files: self.files.keys().map(|&ino| (ino, kb)).collect(),
            descriptions: self.descriptions.keys().map(|&d| (d, kb)).collect(),
            new_files: self.new_files.keys().map(|&pid| (pid, kb)).collect(),
        }
    }

    /// Whether `pid` has values of its own: open file descriptions (a per-file decision
    /// holds the whole file, other processes' reads included, so it cannot be taken back for
    /// one process).
    fn has_process(&self, pid: u32) -> bool {
        self.descriptions.keys().any(|&(p, _)| p == pid)
    }

    /// These wants with `pids`' own targets at `kb` (processes reverted alone).
    fn with_processes_at(&self, pids: &BTreeSet<u32>, kb: u64) -> Wants {
        let mut w = self.clone();
        for (&(pid, _), v) in w.descriptions.iter_mut() {
            if pids.contains(&pid) {
                *v = kb;
            }
        }
        for (pid, v) in w.new_files.iter_mut() {
            if pids.contains(pid) {
                *v = kb;
            }
        }
        w
    }

    /// Drop the targets `keep` refuses: files by inode, descriptions by process and inode,
    /// processes' next files by process.
    fn retain(&mut self, keep: &Keep) {
        self.files.retain(|&ino, _| (keep.file)(ino));
        self.descriptions.retain(|&(pid, ino), _| (keep.description)(pid, ino));
        self.new_files.retain(|&pid, _| (keep.process)(pid));
    }

    /// How many targets.
    fn len(&self) -> usize {
        usize::from(self.device.is_some()) + self.files.len() + self.descriptions.len() + self.new_files.len()
    }

    /// Whether every target's value satisfies `ok`.
    fn all(&self, ok: impl Fn(u64) -> bool) -> bool {
        self.device.is_none_or(&ok)
            && self.files.values().all(|&kb| ok(kb))
            && self.descriptions.values().all(|&kb| ok(kb))
            && self.new_files.values().all(|&kb| ok(kb))
    }

    /// Whether no target is above `kb`.
    fn at_most(&self, kb: u64) -> bool {
        self.all(|v| v <= kb)
    }

    /// Whether no target is above its value in `before` (for a target new to it, the
    /// device's value there, else `vanilla_kb`): a change that only lowers.
    fn no_higher_than(&self, before: &Wants, vanilla_kb: u64) -> bool {
        let base = before.device.unwrap_or(vanilla_kb);
        let was = |v: Option<&u64>| v.copied().unwrap_or(base);
        self.device.is_none_or(|kb| kb <= base)
            && self.files.iter().all(|(ino, &kb)| kb <= was(before.files.get(ino)))
            && self
                .descriptions
                .iter()
                .all(|(d, &kb)| kb <= was(before.descriptions.get(d)))
            && self
                .new_files
                .iter()
                .all(|(pid, &kb)| kb <= was(before.new_files.get(pid)))
    }

    fn is_vanilla(&self, vanilla_kb: u64) -> bool {
        self.all(|kb| kb == vanilla_kb)
    }
}

/// Inodes open, and (process, inode) descriptions open.
pub type OpenTargets = (BTreeSet<u64>, BTreeSet<(u32, u64)>);

/// Which targets of a decision still exist (see [`Guarded::forget_process`],
/// [`Guarded::forget_closed`]).
struct Keep<'a> {
    file: &'a dyn Fn(u64) -> bool,
    description: &'a dyn Fn(u32, u64) -> bool,
    process: &'a dyn Fn(u32) -> bool,
}

/// The knobs the wrapped controller sees (behind [`FloorKnobs`] and the hysteresis): its
/// changes are recorded, and reach the real knobs only while the controller's arm is in force.
/// It reads back what it asked for.
struct GuardKnobs<'a> {
    inner: &'a mut dyn ReadaheadKnobs,
    wants: &'a mut Wants,
    apply: bool,
    /// Processes reverted alone: their requests are recorded, not applied.
    held: &'a BTreeSet<u32>,
}

impl ReadaheadKnobs for GuardKnobs<'_> {
    fn device_read_ahead_kb(&self) -> u64 {
        match self.wants.device {
            Some(kb) if !self.apply => kb,
            _ => self.inner.device_read_ahead_kb(),
        }
    }
    fn set_device_read_ahead_kb(&mut self, kb: u64) {
        self.wants.device = Some(kb);
        if self.apply {
            self.inner.set_device_read_ahead_kb(kb);
        }
    }
    fn file_read_ahead_kb(&self, inode: u64) -> u64 {
        match self.wants.files.get(&inode) {
            Some(&kb) if !self.apply => kb,
            _ => self.inner.file_read_ahead_kb(inode),
        }
    }
    fn set_file_read_ahead_kb(&mut self, inode: u64, kb: u64) {
        self.wants.files.insert(inode, kb);
        if self.apply {
            self.inner.set_file_read_ahead_kb(inode, kb);
        }
    }
    fn description_read_ahead_kb(&self, pid: u32, inode: u64) -> u64 {
        match self.wants.descriptions.get(&(pid, inode)) {
            Some(&kb) if !self.apply || self.held.contains(&pid) => kb,
            _ => self.inner.description_read_ahead_kb(pid, inode),
        }
    }
    fn set_description_read_ahead_kb(&mut self, pid: u32, inode: u64, kb: u64) {
        self.wants.descriptions.insert((pid, inode), kb);
        if self.apply && !self.held.contains(&pid) {
            self.inner.set_description_read_ahead_kb(pid, inode, kb);
        }
    }
    fn set_new_file_read_ahead_kb(&mut self, pid: u32, kb: u64) {
        self.wants.new_files.insert(pid, kb);
        if self.apply && !self.held.contains(&pid) {
            self.inner.set_new_file_read_ahead_kb(pid, kb);
        }
    }
}

/// The guardrail's floor ([`GuardConfig::min_kb`]), in front of the hysteresis: a request
/// below it is raised to it, and one the floor raised to the value already in force is no
/// request at all. The controller, reading back the floor rather than its own value, asks
/// again every window: let through, each ask would count as a change the hysteresis held back
/// (so the tuner would never rest) or rewrite the same value (on the kernel, into every open
/// file).
struct FloorKnobs<'a> {
    inner: &'a mut dyn ReadaheadKnobs,
    min_kb: u64,
}

impl ReadaheadKnobs for FloorKnobs<'_> {
    fn device_read_ahead_kb(&self) -> u64 {
        self.inner.device_read_ahead_kb()
    }
    fn set_device_read_ahead_kb(&mut self, kb: u64) {
        if kb >= self.min_kb || self.inner.device_read_ahead_kb() != self.min_kb {
            self.inner.set_device_read_ahead_kb(kb.max(self.min_kb));
        }
    }
    fn file_read_ahead_kb(&self, inode: u64) -> u64 {
        self.inner.file_read_ahead_kb(inode)
    }
    fn set_file_read_ahead_kb(&mut self, inode: u64, kb: u64) {
        if kb >= self.min_kb || self.inner.file_read_ahead_kb(inode) != self.min_kb {
            self.inner.set_file_read_ahead_kb(inode, kb.max(self.min_kb));
        }
    }
    fn description_read_ahead_kb(&self, pid: u32, inode: u64) -> u64 {
        self.inner.description_read_ahead_kb(pid, inode)
    }
    fn set_description_read_ahead_kb(&mut self, pid: u32, inode: u64, kb: u64) {
        if kb >= self.min_kb || self.inner.description_read_ahead_kb(pid, inode) != self.min_kb {
            self.inner
                .set_description_read_ahead_kb(pid, inode, kb.max(self.min_kb));
        }
    }
    fn set_new_file_read_ahead_kb(&mut self, pid: u32, kb: u64) {
        self.inner.set_new_file_read_ahead_kb(pid, kb.max(self.min_kb));
    }
}

/// A controller behind hysteresis ([`Steady`]) and, optionally, the guardrail (see the module
/// documentation). Both worlds run their controllers through it.
pub struct Guarded {
    inner: Box<dyn ReadaheadController + Send>,
    /// Hysteresis and rate limit between the controller and the knobs.
    pub steady: Steady,
    cfg: Option<GuardConfig>,
    vanilla_kb: u64,
    wants: Wants,
    arm: Arm,
    phase: Phase,
    /// Windows decided so far.
    window: u64,
    /// The arm in force during the window that just ended, and for how many windows it had been.
    age: u64,
    /// Settling windows in a row: only the first `settle` of them are spared the collapse rule,
    /// so a controller that changes its mind every window is still held to it.
    settling_run: u64,
    /// Measured outcomes of the latest block of each arm (the controller's: of its current
    /// decision only, cleared when it changes).
    tuned: Vec<Outcome>,
    vanilla: Vec<Outcome>,
    /// Every window of the controller's since its current decision was last judged, settling
    /// ones and earlier decisions included: a controller that changes its mind faster than a
    /// block is judged on these, as a whole.
    unjudged: Vec<Outcome>,
    /// What a vanilla check is for.
    pending: Option<Pending>,
    /// The controller as a whole is held on vanilla until this window (a churning
    /// controller's loss is not one value's).
    all_until: u64,
    all_backoff: u64,
    /// Whether that was for values of files or descriptions at the device's vanilla.
    all_files: bool,
    /// When the vanilla block was completed.
    vanilla_at: u64,
    /// Vanilla blocks completed since the start, or since the watched processes changed: the
    /// first may fall in the workload's warm-up.
    vanilla_blocks: u64,
    /// The decision last judged (and kept), so that it is not judged again every block.
    judged: Option<Wants>,
    interval: u64,
    /// Backoffs by the device value reverted (`None`: per-file decisions): until which window,
    /// and the length of the next one. Per value, so that a controller that moves on (the
    /// workload changed) is tried again without waiting out the old value's backoff.
    backoffs: BTreeMap<Option<u64>, (u64, u64)>,
    /// The watched processes' fingerprint ([`Outcome::population`]) of the last window.
    population: Option<u64>,
    /// Processes reverted alone ([`GuardConfig::harm`]): until which window, and the length of
    /// the next backoff; `held` lists those still on vanilla, `harmed` those the last verdict
    /// named (applied in `step`).
    process_backoffs: BTreeMap<u32, (u64, u64)>,
    held: BTreeSet<u32>,
    harmed: Vec<u32>,
    /// Processes taken back alone from a decision per device: from then on their files have
    /// values of their own (vanilla while held, else the device's value), which the device's
    /// changes no longer reach ([`Guarded::in_force`]).
    apart: BTreeSet<u32>,
    /// The last window of the controller's, if it fell below the collapse bar without being
    /// told from noise: a second one in a row is a collapse.
    short: Option<Outcome>,
    /// The files and descriptions open at the tuner's last scan ([`Guarded::forget_closed`]):
    /// what the controller asks for others is no decision.
    open: Option<OpenTargets>,
    events: Vec<GuardEvent>,
    /// A check found the value it was for worse while the controller had moved on: the
    /// controller, told, decides before its decision is resumed.
    resume_after_decide: bool,
    /// Whether the last verdict's loss was beyond chance ([`Guarded::counts`]), told to the
    /// controller with a revert.
    sure: bool,
    /// Windows spent on vanilla by the guardrail (checks and backoffs).
    pub vanilla_windows: u64,
    /// The last revert was of a clear loss in a new decision's first windows, right after or
    /// before vanilla's block: the controller's next decision need not wait for another.
    quick: bool,
    /// The window the controller's windows being judged end at (the one judged now, or a
    /// check's pending windows'): where vanilla's line is carried to (`clearly_below`), and
    /// the controller's line carried from (`clearly_above`).
    tuned_at: u64,
    /// A decision whose first windows fell below vanilla and that vanilla measured again did
    /// not confirm: judged on a block of its own, not looked at again window by window (on a
    /// workload that slows, the same windows would send it back to vanilla for ever).
    unconfirmed: Option<Wants>,
    /// The settings put in force at the last change (the window `age` counts from) lowered
    /// readahead wherever they changed it. Their first window still settles for the verdict
    /// of a block (the cache holds what the higher value read, which flatters the lower one),
    /// but is judged by the rules for a clear loss and a collapse: a lower value has no
    /// start-up cost, which is what settling spares a raise. Counted as settling, KML's
    /// per-file 16 KiB, a third of a range scan's operations lost from its first window,
    /// stayed in force a second window before the loss was seen.
    lowered: bool,
    /// Windows in a row the workload ran in (it touched pages) without a measure of its
    /// progress ([`Guarded::unmeasured`]).
    blind: u64,
}

impl Guarded {
    /// `inner` behind `steady`; with `guard`, also behind the guardrail, where vanilla is
    /// `vanilla_kb` on the device (the value before any change).
    pub fn new(
        mut inner: Box<dyn ReadaheadController + Send>,
        steady: Steady,
        guard: Option<GuardConfig>,
        vanilla_kb: u64,
    ) -> Guarded {
        if let Some(g) = &guard {
            inner.judged(g.settle + g.block, vanilla_kb);
        }
        let interval = guard.as_ref().map_or(1, |g| g.first_interval);
        let first_backoff = guard.as_ref().map_or(1, |g| g.first_backoff);
        Guarded {
            inner,
            steady,
            arm: if guard.is_some() { Arm::Vanilla } else { Arm::Tuned },
            phase: if guard.is_some() { Phase::Baseline } else { Phase::Tuned },
            cfg: guard,
            vanilla_kb,
            wants: Wants::default(),
            window: 0,
            age: 0,
            settling_run: 0,
            tuned: Vec::new(),
            vanilla: Vec::new(),
            unjudged: Vec::new(),
            pending: None,
            all_until: 0,
            all_files: false,
            all_backoff: first_backoff,
            vanilla_at: 0,
            vanilla_blocks: 0,
            judged: None,
            interval,
            backoffs: BTreeMap::new(),
            population: None,
            process_backoffs: BTreeMap::new(),
            held: BTreeSet::new(),
            harmed: Vec::new(),
            apart: BTreeSet::new(),
            short: None,
            open: None,
            events: Vec::new(),
            resume_after_decide: false,
            sure: true,
            vanilla_windows: 0,
            quick: false,
            tuned_at: 0,
            unconfirmed: None,
            lowered: false,
            blind: 0,
        }
    }

    /// Whether nothing is measured: the controller measures nothing
    /// ([`ReadaheadController::measuring`]) and the guardrail nothing either (off, the
    /// controller's decision in force and already judged (or vanilla itself), or vanilla in
    /// force for a backoff of the device's value; and no process held on vanilla alone). A
    /// caller may then show it fewer windows (the tuner rests, `iolearn_tune::sampling`): its
    /// phases that measure (vanilla blocks, a new decision's block, a process's backoff,
    /// judged when it ends) need every window.
    pub fn idle(&self) -> bool {
        // A decision in force whose progress went unmeasured needs every window: it goes back
        // to vanilla after `settle + block` of them, not eight times as many.
        let judged = self.phase == Phase::Tuned
            && self.arm == Arm::Tuned
            && self.blind == 0
            && (self.wants.is_vanilla(self.vanilla_kb) || self.judged.as_ref() == Some(&self.wants));
        // A backoff of the device's value waits on vanilla, measuring nothing: resting through
        // it makes it longer (counted in windows shown), which errs towards vanilla.
        let waiting = self.phase == Phase::Backoff;
        // A learner measuring a block needs every window, whatever the guardrail does.
        !self.inner.measuring() && (self.cfg.is_none() || ((judged || waiting) && self.held.is_empty()))
    }

    /// Forget process `pid` (it exited or left the watched cgroup): its descriptions, its next
    /// files' value, its backoff. A process that gets its number later starts afresh.
    pub fn forget_process(&mut self, pid: u32) {
        self.forget(&Keep {
            file: &|_| true,
            description: &|p, _| p != pid,
            process: &|p| p != pid,
        });
        self.process_backoffs.remove(&pid);
        self.held.remove(&pid);
        self.harmed.retain(|&p| p != pid);
        self.apart.remove(&pid);
    }

    /// Forget the files and descriptions not open at the tuner's last scan (`open`: inodes,
    /// and (process, inode) descriptions): their values are gone from the kernel too (a file
    /// opened again copies the device's), and a tuner left running over a database that
    /// writes new files all day would otherwise keep one entry per file it ever decided on.
    /// Until the next call, what the controller asks for files not open is no decision either
    /// (it decides on the files its window saw, some closed since): counted as one, a stream
    /// of short-lived files would restart the judging of a kept decision every few windows,
    /// and its periodic check of vanilla would never come.
    pub fn forget_closed(&mut self, open: OpenTargets) {
        self.open = Some(open);
        self.forget_not_open();
    }

    fn forget_not_open(&mut self) {
        if let Some((files, descriptions)) = self.open.take() {
            self.forget(&Keep {
                file: &|ino| files.contains(&ino),
                description: &|pid, ino| descriptions.contains(&(pid, ino)),
                process: &|_| true,
            });
            self.open = Some((files, descriptions));
        }
    }

    /// Drop targets from the decision asked for and, alike, from the decision last judged
    /// and the one a vanilla check is for: what remains of a judged decision is still judged
    /// (a decision is the same decision without the files that closed).
    fn forget(&mut self, keep: &Keep) {
        self.wants.retain(keep);
        if let Some(j) = self.judged.as_mut() {
            j.retain(keep);
        }
        if let Some(p) = self.pending.as_mut() {
            p.wanted.retain(keep);
        }
        if let Some(u) = self.unconfirmed.as_mut() {
            u.retain(keep);
        }
    }

    /// How many targets the guardrail remembers (the decision asked for, the one judged, the
    /// one a check is for, the one a check did not confirm, processes' backoffs).
    pub fn remembered(&self) -> usize {
        self.wants.len()
            + self.judged.as_ref().map_or(0, Wants::len)
            + self.pending.as_ref().map_or(0, |p| p.wanted.len())
            + self.unconfirmed.as_ref().map_or(0, Wants::len)
            + self.process_backoffs.len()
            + self.apart.len()
    }

    /// The arm in force now.
    pub fn arm(&self) -> Arm {
        self.arm
    }

    /// The guardrail's verdicts since the last call.
    pub fn take_events(&mut self) -> Vec<GuardEvent> {
        std::mem::take(&mut self.events)
    }

    /// Put `arm` in force on the real knobs: vanilla is every target the controller touched
    /// at the vanilla value, the controller's arm its own requests.
    fn switch(&mut self, arm: Arm, knobs: &mut dyn ReadaheadKnobs) {
        if arm == self.arm {
            return;
        }
        self.arm = arm;
        self.age = 0;
        self.short = None;
        self.put(&self.in_force(arm), knobs);
    }

    /// What `arm` puts on the knobs: vanilla is every target the controller touched at the
    /// vanilla value, the controller's arm its own requests with the processes held back at
    /// vanilla. A process taken back from a decision per device is one more target, its next
    /// files (those already open included) at the device's value while not held.
    fn in_force(&self, arm: Arm) -> Wants {
        let mut w = self.wants.clone();
        if let Some(kb) = w.device {
            for &pid in &self.apart {
                w.new_files.entry(pid).or_insert(kb);
            }
        }
        match arm {
            Arm::Vanilla => w.all_at(self.vanilla_kb),
            Arm::Tuned => w.with_processes_at(&self.held, self.vanilla_kb),
        }
    }

    /// Set every target of `target` that differs on the knobs.
    fn put(&self, target: &Wants, knobs: &mut dyn ReadaheadKnobs) {
        if let Some(kb) = target.device {
            if knobs.device_read_ahead_kb() != kb {
                knobs.set_device_read_ahead_kb(kb);
            }
        }
        for (&ino, &kb) in &target.files {
            if knobs.file_read_ahead_kb(ino) != kb {
                knobs.set_file_read_ahead_kb(ino, kb);
            }
        }
        for (&(pid, ino), &kb) in &target.descriptions {
            if knobs.description_read_ahead_kb(pid, ino) != kb {
                knobs.set_description_read_ahead_kb(pid, ino, kb);
            }
        }
        for (&pid, &kb) in &target.new_files {
            knobs.set_new_file_read_ahead_kb(pid, kb);
        }
    }

    /// Judge `tuned` against the vanilla block; log and return whether the controller stays.
    /// `full`: `tuned` is a whole block of the decision in force (a gain is then told to the
    /// controller as that value's; windows of several values prove none).
    fn verdict(&mut self, cfg: &GuardConfig, tuned: &[Outcome], full: bool) -> bool {
        let Some(Comparison {
            tuned: t,
            vanilla: v,
            relative,
            keep,
            by_process,
            wasteful,
            clear,
        }) = self.compare(cfg, tuned)
        else {
            // Nothing measured (an idle workload): nothing to hold against the controller.
            return true;
        };
        // A process held back at vanilla that is still below its own vanilla by its bar, a whole
        // block later: the others' values cost it (they share the device), and the decision
        // goes as a whole.
        let still_down = by_process.as_ref().filter(|_| keep && full).and_then(|r| {
            r.ratios
                .iter()
                .find(|&&(pid, ratio, _)| {
                    self.held.contains(&pid) && self.harm_bar(cfg, pid).is_some_and(|bar| ratio < 1.0 - bar)
                })
                .map(|&(pid, ratio, _)| (pid, ratio))
        });
        let keep = keep && still_down.is_none();
        // A loss by more than chance (a waste failure is counted in pages, and is one): beyond
        // the count's square root, and where progress is counted in pages (`Outcome::ops` on
        // the kernel) beyond the spread the two blocks' windows show as well. Clock ticks come
        // one at a time and their square root is their spread; pages come a read at a time
        // and swing with what the cache holds: on the kernel grep's windows at one value
        // spread by 10-30%, and a first block of vanilla above the rest of the run banned
        // 256 KiB, +11% in the sweep, for 128 windows.
        let rates = |side: &[Outcome]| side.iter().filter_map(Outcome::progress).collect::<Vec<_>>();
        let ((mt, vt), (mv, vv)) = (mean_and_spread(&rates(tuned)), mean_and_spread(&rates(&self.vanilla)));
        let by_pages = tuned.iter().chain(&self.vanilla).any(|o| o.ops.is_some());
        let shown = if by_pages { 3.0 * (vt + vv).sqrt() } else { 0.0 };
        let counts = self.counts(tuned);
        self.sure = wasteful || counts.is_none_or(|(tu, vu, _)| beyond_chance(tu, vu) && mv - mt > shown);
        // A gain by as much, told to the controller with the value kept; or progress above
        // vanilla's by the tolerance while reading less than half the pages per page used
        // (counted in pages, by the thousand): a random reader of a mapped file runs a tick
        // or two of its own code a window, so its 3.5 times vanilla's ticks at 16 KiB are no
        // count beyond chance, but its 3 pages read per page used against vanilla's 27 are.
        let above = t > v * (1.0 + cfg.tolerance);
        let gain =
            above && (counts.is_none_or(|(tu, vu, _)| beyond_chance(vu, tu) && mt - mv > shown) || self.thrifty(tuned));
        let (st, sv) = (pages_of(tuned), pages_of(&self.vanilla));
        let per_process = by_process.as_ref().map_or(String::new(), |r| {
            let each: Vec<String> = r
                .ratios
                .iter()
                .map(|(pid, x, v)| format!("pid {pid} {:+.1}% of {v:.3}/s", (x - 1.0) * 100.0))
                .collect();
            format!(
                "progress per process {:+.1}% ({}); summed ",
                (r.mean - 1.0) * 100.0,
                each.join(", ")
            )
        });
        let waste = if wasteful {
            "waste: more than twice the pages read per page used of vanilla's for no gain \
             beyond noise; "
        } else {
            ""
        };
        let clear = if clear && relative >= cfg.abort {
            "below every vanilla window by more than they spread and the tolerance; "
        } else if keep && tuned.len() < cfg.block as usize {
            // A shortfall (a collapse, or windows clearly below the vanilla block before) that
            // vanilla measured again does not confirm: the decision resumes, to be judged on a
            // block of its own.
            "windows below vanilla before, not clearly below it measured again: resumed; "
        } else {
            ""
        };
        let held = still_down.map_or(String::new(), |(pid, ratio)| {
            format!(
                "pid {pid} {:+.1}% of its vanilla progress though held at vanilla: the others' values cost it; ",
                (ratio - 1.0) * 100.0
            )
        });
        let reason = format!(
            "{held}{waste}{clear}{per_process}progress {:.3} vs vanilla {:.3} ({:+.1}%); pages read per page \
             used {:.2} vs {:.2}; demand misses per page used {:.3} vs {:.3}",
            t,
            v,
            (t / v - 1.0) * 100.0,
            st.read_per_used(),
            sv.read_per_used(),
            st.misses_per_used(),
            sv.misses_per_used()
        );
        self.events.push(GuardEvent {
            window: self.window,
            kind: if keep {
                GuardEventKind::Kept
            } else {
                GuardEventKind::Reverted
            },
            tuned: t,
            vanilla: v,
            relative,
            pid: None,
            reason,
        });
        if keep {
            if full {
                // A decision on files or descriptions alone is told as the device's vanilla.
                let kb = self.wants.device.unwrap_or(self.vanilla_kb);
                self.inner.kept(kb, gain && !wasteful);
            }
            // The mean passed: a process that lost on its own is taken back alone (applied by
            // `step`, which holds the knobs).
            if let Some(r) = &by_process {
                for &(pid, ratio, rate) in &r.ratios {
                    if self.held.contains(&pid) {
                        continue;
                    }
                    let Some(bar) = self.harm_bar(cfg, pid) else { continue };
                    if ratio < 1.0 - bar {
                        let why = format!(
                            "pid {pid} {:+.1}% of its vanilla progress while the mean passed",
                            (ratio - 1.0) * 100.0
                        );
                        self.take_back(pid, ratio, rate, why);
                    }
                }
            }
        }
        keep
    }

    /// Record the window that ended and move the guardrail on; may switch arms.
    fn step(&mut self, outcome: &Outcome, knobs: &mut dyn ReadaheadKnobs) {
        let Some(cfg) = self.cfg.clone() else { return };
        self.judge(&cfg, outcome, knobs);
        self.hold_processes(&cfg, knobs);
    }

    /// Processes the last verdict named go back to vanilla alone; those whose backoff ended
    /// get their own values again, and the decision is measured afresh.
    fn hold_processes(&mut self, cfg: &GuardConfig, knobs: &mut dyn ReadaheadKnobs) {
        let w = self.window;
        // A backoff ends only while the controller's decision is in force and being judged:
        // ended during a check of vanilla, the decision would be passed with the process
        // still held, and its own values would then go unjudged until the next check.
        let judging = self.arm == Arm::Tuned && self.phase == Phase::Tuned;
        let ended: Vec<u32> = self
            .held
            .iter()
            .copied()
            .filter(|pid| judging && self.process_backoffs.get(pid).is_none_or(|&(until, _)| until <= w))
            .collect();
        for pid in &ended {
            self.held.remove(pid);
        }
        let mut changed = !ended.is_empty();
        for pid in std::mem::take(&mut self.harmed) {
            let b = self.process_backoffs.entry(pid).or_insert((0, cfg.first_backoff));
            *b = (w + b.1, (b.1 * 2).min(cfg.max_backoff));
            changed |= self.held.insert(pid);
        }
        if changed && self.arm == Arm::Tuned {
            self.put(&self.in_force(Arm::Tuned), knobs);
            // A process's values changed: the next window settles (a held process's raise
            // costs the kernel as any other).
            self.age = 0;
            self.short = None;
            // A process back on its own values, or one held back: the whole decision is judged
            // again (with a process held, whether the others' values still cost it).
            self.judged = None;
            self.tuned.clear();
            self.unjudged.clear();
        }
    }

    /// The A/B bookkeeping of [`Guarded::step`].
    fn judge(&mut self, cfg: &GuardConfig, outcome: &Outcome, knobs: &mut dyn ReadaheadKnobs) {
        let block = cfg.block as usize;
        self.tuned_at = self.window;
        if let Some(p) = outcome.population {
            if self.population.replace(p).is_some_and(|was| was != p) {
                // The watched processes changed: nothing measured before compares with what
                // comes, and this window straddles both. Vanilla is measured afresh, then the
                // controller's decision again; a decision is never left in force unjudged, so
                // processes that keep coming and going keep the device on vanilla. Processes
                // gone are forgotten (a reused pid starts without their backoff).
                if !outcome.by_process.is_empty() {
                    self.held.retain(|pid| outcome.by_process.contains_key(pid));
                    self.apart.retain(|pid| outcome.by_process.contains_key(pid));
                    self.process_backoffs
                        .retain(|pid, _| outcome.by_process.contains_key(pid));
                }
                self.age += 1;
                if self.arm == Arm::Vanilla {
                    self.vanilla_windows += 1;
                }
                self.measure_vanilla_afresh(knobs);
                return;
            }
        }
        if self.unmeasured(cfg, outcome, knobs) {
            return;
        }
        // A window the value settles in is not measured, nor judged on its own by the collapse
        // rule: raising readahead under a running reader costs the kernel about a second (two
        // on a busy machine) before the new value pays, and the cache still holds what the
        // other setting read. Only `settle` such windows in a row are spared.
        let settled = self.age >= cfg.settle as u64;
        // A lowering's first window is not spared the rules for a clear loss and a collapse.
        let lowering = !settled && self.arm == Arm::Tuned && self.lowered && self.age == 0;
        let spared = !settled && !lowering && self.settling_run < cfg.settle as u64;
        self.settling_run = if settled { 0 } else { self.settling_run + 1 };
        // While a quick revert waits for the controller's next decision, vanilla's block stays
        // the one measured just before (a window pushed now would sit after a gap).
        if settled && !(self.phase == Phase::Backoff && self.quick) {
            let side = match self.arm {
                Arm::Vanilla => &mut self.vanilla,
                Arm::Tuned => &mut self.tuned,
            };
            side.push(outcome.clone());
            if side.len() > block {
                side.remove(0);
            }
        }
        if self.arm == Arm::Tuned && self.judged.as_ref() != Some(&self.wants) {
            self.unjudged.push(outcome.clone());
        }
        self.age += 1;
        if self.arm == Arm::Vanilla {
            self.vanilla_windows += 1;
        }
        let w = self.window;
        let measured = self.vanilla.len() >= block;
        let fresh = measured && w.saturating_sub(self.vanilla_at) <= self.interval;
        // Vanilla measured just before: a verdict against it stands. An older one may come
        // from another phase of the workload: a pass by a clear margin against it stands
        // (later checks catch a wrong one); a narrow pass, or a failure, is first checked
        // against vanilla measured now (`decide_on`).
        let adjacent = measured && w.saturating_sub(self.vanilla_at) <= 2 * (cfg.settle as u64 + block as u64) + 1;
        match self.phase {
            Phase::Baseline if measured && self.backed_off(w) => {
                // The controller asks again for a value backed off while vanilla was measured
                // (a controller that flips between two values): vanilla stays until it asks
                // for another, or the backoff ends.
                self.vanilla_measured(w);
                self.phase = Phase::Backoff;
            }
            Phase::Baseline if measured => {
                self.vanilla_measured(w);
                self.start_tuned(knobs);
            }
            Phase::Tuned => {
                if self.wants.is_vanilla(self.vanilla_kb) {
                    self.unjudged.clear();
                    return;
                }
                let judged = self.judged.as_ref() == Some(&self.wants);
                let one = std::slice::from_ref(outcome);
                // A new decision's first settled window clearly below every vanilla window, not
                // below the collapse bar (its first two where it raises readahead anywhere: a
                // raise under a running reader costs the kernel a second or two before it
                // pays): reverted at once where that is beyond noise, else vanilla is measured
                // again and the windows judged against it too (A-B-A; see `clearly_below`).
                let needed = if self.wants.at_most(self.vanilla_kb) { 1 } else { 2 };
                let looked = self.unconfirmed.as_ref() == Some(&self.wants);
                let recent = if settled && fresh && !judged && !looked && (needed..block).contains(&self.tuned.len()) {
                    self.tuned[self.tuned.len() - needed..].to_vec()
                } else if lowering && fresh && !judged && !looked && needed == 1 {
                    vec![outcome.clone()]
                } else {
                    Vec::new()
                };
                let early = if recent.is_empty() {
                    None
                } else {
                    self.compare(cfg, &recent)
                };
                let clear = early.as_ref().is_some_and(|c| c.clear && c.relative >= cfg.abort);
                // Below vanilla's rising line carried forward, though passing: vanilla measured
                // again at once decides (fio's mixed job: 64 KiB 6% below the line, 2% below
                // the block).
                let suspect = !clear
                    && adjacent
                    && !recent.is_empty()
                    && early.is_none_or(|c| c.keep)
                    && self.below_vanilla(cfg, &recent, true);
                // A window below the collapse bar by more than noise, or a second one in a row
                // (one clearly below vanilla but above the bar is the rule above's).
                let below = !clear
                    && !spared
                    && fresh
                    && self
                        .compare(cfg, one)
                        .is_some_and(|c| !(c.keep || (c.clear && c.relative >= Self::bar(cfg, 1))));
                let shortfall: Vec<Outcome> = match self.short.take() {
                    _ if below && self.beyond_noise(outcome) => vec![outcome.clone()],
                    Some(last) if below => vec![last, outcome.clone()],
                    _ => Vec::new(),
                };
                let collapsed = !shortfall.is_empty();
                if below && !collapsed {
                    self.short = Some(outcome.clone());
                }
                let one = if collapsed { &shortfall[..] } else { one };
                if clear && adjacent && recent.iter().all(|o| self.beyond_noise(o)) {
                    // Counted by the application (or in clock ticks beyond their noise), right
                    // after vanilla: told already.
                    self.verdict(cfg, &recent, false);
                    self.revert(cfg, knobs, false);
                    self.quick = true;
                } else if clear || suspect {
                    let why = if clear {
                        "its first windows clearly below vanilla's line"
                    } else {
                        "its first windows below the vanilla block just before"
                    };
                    self.check(recent, false, why, knobs);
                } else if collapsed && self.hold_collapsed(cfg, one) {
                    // One process collapsed, the others did not: it goes back alone, and what
                    // follows is measured once it has settled.
                    self.tuned.clear();
                    self.unjudged.clear();
                    self.age = 0;
                } else if collapsed {
                    // Far below vanilla, whenever it comes: not kept for a block.
                    self.tuned = shortfall.clone();
                    if adjacent {
                        self.verdict(cfg, &shortfall, false);
                        self.revert(cfg, knobs, true);
                    } else {
                        self.check(
                            shortfall,
                            false,
                            "a window far below vanilla, measured long after it",
                            knobs,
                        );
                    }
                } else if self.tuned.len() >= block && !judged {
                    let t = self.tuned.clone();
                    self.decide_on(cfg, t, true, fresh, adjacent, knobs);
                } else if self.unjudged.len() >= 4 * block && !judged {
                    // Changing its mind faster than a block: judge the controller as a whole.
                    let t = std::mem::take(&mut self.unjudged);
                    self.decide_on(cfg, t, false, fresh, adjacent, knobs);
                } else if !judged
                    && fresh
                    && self.tuned.len() < needed
                    && self.unjudged.len() >= block
                    && self.clearly_below(cfg, &self.unjudged[self.unjudged.len() - block..])
                {
                    // Changing its mind so fast that no decision lasts for the rule above (a
                    // per-file model setting one file or another every window), and its last
                    // block of windows, settling ones included, clearly below vanilla: judged
                    // as a whole now, not after four blocks (KML's per-file model held a range
                    // scan at 0.69x vanilla through the 12 windows of a 15-s run).
                    let t = self.unjudged.split_off(self.unjudged.len() - block);
                    self.unjudged.clear();
                    self.decide_on(cfg, t, false, fresh, adjacent, knobs);
                } else if judged && fresh && self.tuned.len() >= block && self.clearly_below(cfg, &self.tuned) {
                    // Kept, and a whole block since clearly below the vanilla block it was
                    // judged against: a value that did well at first and then not (16 KiB for a
                    // sequential reader beside random ones on the kernel: as fast as vanilla
                    // through its first pass over the file, 20% below it on the next). Vanilla
                    // is measured again at once and decides (A-B-A); a workload that slowed
                    // for every value passes, against a vanilla block of its own time.
                    let t = self.tuned.clone();
                    self.check(
                        t,
                        true,
                        "kept, then a block clearly below the vanilla it was judged against",
                        knobs,
                    );
                } else if judged && !fresh && self.tuned.len() >= block {
                    // Kept, but vanilla was measured long ago: measure it again.
                    let t = self.tuned.clone();
                    self.check(t, true, "kept, and vanilla was measured long ago", knobs);
                }
            }
            Phase::Check if measured => {
                self.vanilla_measured(w);
                let Some(Pending {
                    windows: t,
                    full,
                    wanted,
                    at,
                }) = self.pending.take()
                else {
                    self.resume(knobs);
                    return;
                };
                // The pending windows were measured before this block: vanilla's line is
                // carried back to them.
                self.tuned_at = at;
                // One window clearly below vanilla's blocks before and after it is no noise.
                let noise = t.len() == 1 && !full && !self.beyond_noise(&t[0]) && !self.clearly_below(cfg, &t);
                if wanted != self.wants && !noise && !self.passes(cfg, &t) {
                    // The controller moved on during the check, and what it left did worse than
                    // vanilla measured now: that value is backed off and the controller told,
                    // and its next decision (made knowing) is what resumes. Resumed at once, a
                    // learner's step on from a collapsed 1024 KiB put 2048 in force.
                    self.verdict(cfg, &t, false);
                    if let Some(kb) = wanted.device {
                        self.inner.taken_back(kb, self.vanilla_kb, self.sure);
                        let b = self.backoffs.entry(Some(kb)).or_insert((0, cfg.first_backoff));
                        *b = (w + b.1, (b.1 * 2).min(cfg.max_backoff));
                        self.resume_after_decide = true;
                    } else {
                        // Values of files or descriptions: no one value to back off, and the
                        // controller's next decision (a file or two changed) keeps most of what
                        // lost. Resumed, KML's per-file model put its 16 KiB back at once and
                        // lost again (rangescan on the kernel): the controller as a whole is
                        // held back (its values on files: a device value it asks for next is
                        // another decision, `Guarded::backed_off`).
                        self.revert_all(cfg, knobs, wanted.device);
                    }
                } else if wanted != self.wants || noise {
                    // The controller moved on during the check: its new decision is measured
                    // afresh against this vanilla block. Or the collapse that asked for the
                    // check is within noise of vanilla measured now.
                    if noise {
                        self.unconfirmed = Some(self.wants.clone());
                    }
                    self.resume(knobs);
                } else if !self.verdict(cfg, &t, full) {
                    if !full && t.len() >= block {
                        self.revert_all(cfg, knobs, self.wants.device);
                    } else {
                        // Fewer than a block: a collapse, or a clear loss (a plain one).
                        let collapse = self.compare(cfg, &t).is_some_and(|c| c.relative < cfg.abort);
                        self.revert(cfg, knobs, t.len() < block && collapse);
                        // Vanilla was measured just now: the controller's next decision need
                        // not wait for another block of it.
                        self.quick = t.len() < block && !collapse;
                    }
                } else {
                    if full || t.len() >= block {
                        self.judged = Some(self.wants.clone());
                        self.unjudged.clear();
                        if full {
                            self.checked(cfg, &t, true);
                        }
                    } else {
                        self.unconfirmed = Some(self.wants.clone());
                    }
                    self.resume(knobs);
                }
            }
            Phase::Backoff if self.quick && !self.backed_off(w) && adjacent => {
                // After a value reverted for a clear loss in its first windows, the controller
                // asks for another: vanilla's block, measured just before, still stands, and
                // the new decision goes into force without measuring it again (once: a
                // controller that keeps flipping goes through vanilla's block). A learner that
                // stepped to a worse neighbour climbs on at once.
                self.quick = false;
                self.start_tuned(knobs);
            }
            Phase::Backoff if !self.backed_off(w) => {
                self.quick = false;
                self.vanilla.clear();
                self.phase = Phase::Baseline;
            }
            _ => {}
        }
    }

    /// A block of vanilla completed in window `w`: the reference from now on, counted (the
    /// run's first may fall in the warm-up, `decide_on`).
    fn vanilla_measured(&mut self, w: u64) {
        self.vanilla_at = w;
        self.vanilla_blocks += 1;
    }

    /// Drop every measurement and what was judged by them (what comes is not comparable: the
    /// watched processes changed, or progress went unmeasured for a while) and measure vanilla
    /// afresh before the controller acts again. A backoff stands (it is by value, and holds
    /// vanilla already).
    fn measure_vanilla_afresh(&mut self, knobs: &mut dyn ReadaheadKnobs) {
        self.vanilla.clear();
        self.vanilla_blocks = 0;
        self.tuned.clear();
        self.unjudged.clear();
        self.pending = None;
        self.judged = None;
        self.unconfirmed = None;
        if self.phase != Phase::Backoff {
            self.phase = Phase::Baseline;
            self.switch(Arm::Vanilla, knobs);
        }
    }

    /// Whether `outcome` is a window the workload ran in (it touched pages) with no measure
    /// of its progress: a reading of the application's count or of the CPU meter that failed
    /// (a count file gone for good, a meter that cannot read). Such a window measures nothing
    /// and joins no block. A decision is not left in force unmeasured for longer than judging
    /// it takes: at `settle + block` of them in a row, whatever was measured is dropped and
    /// vanilla is put back until progress is read again, then measured afresh before the
    /// controller acts (logged once, [`GuardEventKind::Unmeasured`]). Windows that touched no
    /// page and measured nothing are a paused workload, as before: no harm in either setting.
    fn unmeasured(&mut self, cfg: &GuardConfig, outcome: &Outcome, knobs: &mut dyn ReadaheadKnobs) -> bool {
        let ran = outcome.pages_accessed > 0 || outcome.pages_added > 0;
        if outcome.progress().is_some() || !ran {
            self.blind = 0;
            return false;
        }
        self.blind += 1;
        self.age += 1;
        if self.arm == Arm::Vanilla {
            self.vanilla_windows += 1;
        }
        if self.blind == u64::from(cfg.settle + cfg.block) {
            if self.arm == Arm::Tuned && !self.wants.is_vanilla(self.vanilla_kb) {
                self.events.push(GuardEvent {
                    window: self.window,
                    kind: GuardEventKind::Unmeasured,
                    tuned: f64::NAN,
                    vanilla: f64::NAN,
                    relative: f64::NAN,
                    pid: None,
                    reason: format!(
                        "{} windows in a row without a measure of the workload's progress: \
                         vanilla until it is measured again",
                        self.blind
                    ),
                });
            }
            // What was measured came before the gap.
            self.short = None;
            self.quick = false;
            self.measure_vanilla_afresh(knobs);
        }
        true
    }

    /// Whether the controller is held on vanilla at window `w`: as a whole, or the device
    /// value it asks for.
    fn backed_off(&self, w: u64) -> bool {
        // Values of files taken back as a whole hold those, not a device value asked for next
        // (beside a per-file model the device's controller held back for 16 windows: on the
        // kernel a range scan's 64 KiB came at window 28 instead of 12).
        let files_only = self.all_files && self.wants.device.is_some_and(|kb| kb != self.vanilla_kb);
        (w < self.all_until && !files_only)
            || self
                .backoffs
                .get(&self.wants.device)
                .is_some_and(|&(until, _)| w < until)
    }

    /// A window whose summed progress collapsed, split by process: when the processes below
    /// the collapse bar each have values of their own and another process is not below it,
    /// those processes are named for reverting alone (applied by `step`) and the decision
    /// stays for the others. A busy scan losing a third under a random reader's value drags
    /// the sum below the bar by itself.
    fn hold_collapsed(&mut self, cfg: &GuardConfig, one: &[Outcome]) -> bool {
        let Some(r) = Outcome::relative_progress(one, &self.vanilla) else {
            return false;
        };
        let (down, up): (Vec<&(u32, f64, f64)>, Vec<_>) = r.ratios.iter().partition(|x| x.1 < cfg.abort);
        // Each process named must be one this window can measure on its own (a random reader's
        // few ticks a window can read as 0), have values of its own, and not be held already
        // (then the processes still on theirs are the cause, and the whole decision goes).
        let seconds: f64 = one.iter().map(|o| o.seconds).sum();
        let resolution = one.iter().map(|o| o.resolution).fold(0.0, f64::max);
        let measurable = |rate: f64| rate * seconds >= crate::readahead::MIN_RESOLUTION_UNITS * resolution;
        if down.is_empty()
            || up.is_empty()
            || !down
                .iter()
                .all(|x| measurable(x.2) && self.wants.has_process(x.0) && !self.held.contains(&x.0))
        {
            return false;
        }
        for &(pid, ratio, rate) in down {
            let why = format!("pid {pid} collapsed to {ratio:.2}x its vanilla progress in one window");
            self.take_back(pid, ratio, rate, why);
        }
        true
    }

    /// How far below its own vanilla process `pid` may fall while the mean passes before it is
    /// taken back alone; `None` where it cannot be (a decision per file holds other processes'
    /// reads of the file too). Where it has values of its own, [`GuardConfig::harm`]. Where
    /// the decision is per device, the floor's own tolerance, or the count's noise where that is
    /// larger (three square roots of the units vanilla's block counted for it, and the widest of
    /// its vanilla windows from their mean): one value for
    /// processes of different kinds (a sequential reader beside random ones) can cost one
    /// of them what the others gain, and that process back at vanilla costs the others nothing.
    fn harm_bar(&self, cfg: &GuardConfig, pid: u32) -> Option<f64> {
        if self.wants.has_process(pid) {
            return Some(cfg.harm);
        }
        self.wants.device?;
        let (amount, _) = Outcome::process_sums(&self.vanilla)?;
        let unit = self.vanilla.iter().map(|o| o.resolution).fold(0.0, f64::max);
        let units = amount
            .get(&pid)
            .map(|&a| if unit > 0.0 { a / unit } else { f64::INFINITY })?;
        // Pages come a read at a time and swing with what the cache holds: the process's own
        // vanilla windows say by how much (the widest of them from their mean).
        let rates: Vec<f64> = self
            .vanilla
            .iter()
            .filter(|o| o.progress().is_some() && o.seconds > 0.0)
            .filter_map(|o| Some(o.by_process.get(&pid)? / o.seconds))
            .collect();
        let mean = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
        let swing = rates.iter().map(|r| (r / mean - 1.0).abs()).fold(0.0, f64::max);
        let swing = if swing.is_finite() { swing } else { 0.0 };
        Some(cfg.tolerance.max(3.0 / units.sqrt()).max(swing))
    }

    /// Name `pid` (at `ratio` of its vanilla progress `rate`) to be put back alone, and log why.
    fn take_back(&mut self, pid: u32, ratio: f64, rate: f64, reason: String) {
        self.events.push(GuardEvent {
            window: self.window,
            kind: GuardEventKind::ProcessReverted,
            tuned: ratio * rate,
            vanilla: rate,
            relative: ratio,
            pid: Some(pid),
            reason,
        });
        self.harmed.push(pid);
        if !self.wants.has_process(pid) {
            self.apart.insert(pid);
        }
    }

    /// Judge `t` (a full block of the current decision, or the controller's windows as a
    /// whole) now if vanilla allows, else after measuring vanilla again.
    fn decide_on(
        &mut self,
        cfg: &GuardConfig,
        t: Vec<Outcome>,
        full: bool,
        fresh: bool,
        adjacent: bool,
        knobs: &mut dyn ReadaheadKnobs,
    ) {
        if fresh && self.passes(cfg, &t) {
            if full && !adjacent && self.vanilla_blocks == 1 && !self.clearly_above(cfg, &t) {
                // Passed, but not by far, against the run's first vanilla block, measured long
                // before: it may come from the workload's warm-up, the interval stretched since
                // by an earlier decision's wide margin. On the kernel's range scan vanilla's
                // block in windows 2-4 (336 ops/s) stood for a minute against 519 later, and a
                // per-file model's values at about 340 were kept against it. Vanilla is
                // measured again and decides (A-B-A), once: later blocks are past the warm-up,
                // and a check for every narrow pass cost a learner on a noisy count 6% of its
                // windows at its best value. A decision far above it needs no check. (Not for
                // a controller judged as a whole: its four blocks always end long after
                // vanilla's, and it moves on during a check.)
                self.check(
                    t,
                    full,
                    "passed by little against a vanilla block measured long ago",
                    knobs,
                );
                return;
            }
            if !self.verdict(cfg, &t, full) {
                // Passed, but a process held back at vanilla is still down: the others'
                // values cost it, and the decision goes as a whole.
                if full {
                    self.revert(cfg, knobs, false);
                } else {
                    self.revert_all(cfg, knobs, self.wants.device);
                }
                return;
            }
            self.judged = Some(self.wants.clone());
            self.unjudged.clear();
            if full && adjacent && self.interval == cfg.first_interval {
                self.checked(cfg, &t, false);
            }
        } else if adjacent {
            self.verdict(cfg, &t, full);
            if full {
                self.revert(cfg, knobs, false);
            } else {
                self.revert_all(cfg, knobs, self.wants.device);
            }
        } else {
            self.check(t, full, "judged against a vanilla block measured long ago", knobs);
        }
    }

    /// The controller's decision in force, unjudged, against the vanilla block just measured.
    fn start_tuned(&mut self, knobs: &mut dyn ReadaheadKnobs) {
        self.tuned.clear();
        self.unjudged.clear();
        self.judged = None;
        self.phase = Phase::Tuned;
        self.switch(Arm::Tuned, knobs);
    }

    /// Back to the controller after a check, measuring its decision afresh.
    fn resume(&mut self, knobs: &mut dyn ReadaheadKnobs) {
        self.tuned.clear();
        if self.backed_off(self.window) {
            // The controller moved on during the check to a value backed off.
            self.back_to_vanilla_held(knobs);
            return;
        }
        self.phase = Phase::Tuned;
        self.switch(Arm::Tuned, knobs);
    }

    /// Whether `tuned` passes against the vanilla block (a whole block: within the tolerance;
    /// fewer windows: above the abort bar), without logging. Nothing measured passes.
    fn passes(&self, cfg: &GuardConfig, tuned: &[Outcome]) -> bool {
        self.compare(cfg, tuned).is_none_or(|c| c.keep)
    }

    /// `tuned` against the vanilla block: whether it passes ([`Guarded::bar`]) by its progress
    /// relative to vanilla's, process by process where the outcomes are split by process
    /// ([`Outcome::relative_progress`]) and `tuned` is a whole block, else by the median
    /// progress of each side. `None` when either side measured nothing. A collapse (fewer
    /// windows) is judged on the sum: one window holds a few clock ticks of a random reader's
    /// user time, and a window in which it got none would read as a collapse of its progress.
    fn compare(&self, cfg: &GuardConfig, tuned: &[Outcome]) -> Option<Comparison> {
        let t = median(tuned.iter().filter_map(Outcome::progress))?;
        let v = median(self.vanilla.iter().filter_map(Outcome::progress))?;
        let block = tuned.len() >= cfg.block as usize;
        let clear = !block && self.clearly_below(cfg, tuned);
        // A clear loss is one process by process too (`clearly_below`): shown so.
        let by_process = (block || clear)
            .then(|| Outcome::relative_progress(tuned, &self.vanilla))
            .flatten();
        // Vanilla at no progress: nothing to fall below.
        let summed = if v > 0.0 { t / v } else { f64::INFINITY };
        let relative = by_process.as_ref().map_or(summed, |r| r.mean);
        let progressed = relative >= Self::bar(cfg, tuned.len()) && !clear;
        // Judged for waste only where progress passes: a loss is a loss, whatever it read.
        let wasteful =
            progressed && block && self.wasteful(tuned) && !self.gains(cfg, tuned, relative, by_process.as_ref());
        Some(Comparison {
            tuned: t,
            vanilla: v,
            relative,
            keep: progressed && !wasteful,
            by_process,
            wasteful,
            clear,
        })
    }

    /// Whether `tuned` read more than twice the pages per page used that vanilla's block did
    /// (and at least one more): readahead that is not used costs the device, the cache and the
    /// other processes, whatever the watched ones show. A workload that runs its own code for a
    /// tick or two a window (a random reader of a mapped file) shows no progress either way:
    /// on the kernel it kept 1 MiB for a scan that came before it, reading 176 pages per page
    /// used against vanilla's 25, at 0.63 of vanilla's throughput.
    fn wasteful(&self, tuned: &[Outcome]) -> bool {
        // Vanilla used nothing: no measure to hold the controller to.
        self.read_per_used(tuned, false)
            .is_some_and(|(t, v)| t > 2.0 * v && t > v + 1.0)
    }

    /// Whether `tuned` read less than half the pages per page used that vanilla's block did
    /// (and at least one fewer): [`Guarded::wasteful`] the other way round.
    fn thrifty(&self, tuned: &[Outcome]) -> bool {
        self.read_per_used(tuned, true)
            .is_some_and(|(t, v)| 2.0 * t < v && t + 1.0 < v)
    }

    /// Pages read per page used by `tuned` and by vanilla's block; `None` where vanilla (or,
    /// with `both`, `tuned`) used none.
    fn read_per_used(&self, tuned: &[Outcome], both: bool) -> Option<(f64, f64)> {
        let (t, v) = (pages_of(tuned), pages_of(&self.vanilla));
        if v.pages_accessed == 0 || (both && t.pages_accessed == 0) {
            return None;
        }
        Some((t.read_per_used(), v.read_per_used()))
    }

    /// Whether `tuned`'s progress (at `relative` of vanilla's) is a gain worth paying waste
    /// for: above vanilla's by more than the tolerance and, where progress is counted in units
    /// of [`Outcome::resolution`] (clock ticks, pages), by more than chance: a surplus over
    /// vanilla's count of more than three times the square root of both sides' counts (the
    /// spread of a difference of two sampled counts), so a workload at a tick or two a window
    /// has none. With several processes (`by_process`), at least one must gain so on its own
    /// count: summed, a busy scan's ticks would hide a light reader's doubling. Counted by the
    /// application (resolution 0, the simulator's operations), the tolerance alone decides.
    fn gains(
        &self,
        cfg: &GuardConfig,
        tuned: &[Outcome],
        relative: f64,
        by_process: Option<&RelativeProgress>,
    ) -> bool {
        if relative < 1.0 + cfg.tolerance {
            return false;
        }
        let Some((tu, vu, k)) = self.counts(tuned) else {
            return true;
        };
        match by_process {
            Some(r) => r.ratios.iter().any(|&(_, ratio, rate)| {
                // The process's count under vanilla, and what its ratio makes of it.
                let u = rate * k;
                ratio >= 1.0 + cfg.tolerance && beyond_chance(u, ratio * u)
            }),
            None => beyond_chance(vu, tu),
        }
    }

    /// The progress counts `tuned` and the vanilla block rest on, in units of
    /// [`Outcome::resolution`] over vanilla's seconds (the tuned side scaled to them), and
    /// vanilla's seconds per unit: `(tuned, vanilla, seconds per unit)`. `None` where progress
    /// is not counted in units (resolution 0: the application's operations, exact) or either
    /// side measured nothing.
    fn counts(&self, tuned: &[Outcome]) -> Option<(f64, f64, f64)> {
        let count = |side: &[Outcome]| {
            side.iter()
                .fold((0.0, 0.0, 0.0f64), |(units, secs, res), o| match o.progress() {
                    Some(p) => (units + p * o.seconds, secs + o.seconds, res.max(o.resolution)),
                    None => (units, secs, res),
                })
        };
        let (tu, ts, tr) = count(tuned);
        let (vu, vs, vr) = count(&self.vanilla);
        let resolution = tr.max(vr);
        let finite = |x: f64| x > 0.0 && x.is_finite();
        if !(finite(resolution) && finite(ts) && finite(vs)) {
            return None;
        }
        Some((tu / resolution * vs / ts, vu / resolution, vs / resolution))
    }

    /// Whether one window's progress falls short of vanilla's median by more than a count
    /// of clock ticks can by chance: three times the square root of vanilla's ticks in a window
    /// (a sampled count's spread), a loss of 3/sqrt(n) for n ticks (95% at 10, 42% at 50; the
    /// abort bar alone from 100). A random reader of a database runs its own code for ten
    /// ticks a second: one window of four in a run that changed nothing read as a collapse
    /// and reverted it. A second window below the bar in a row is a collapse whatever the
    /// noise. Operations the application counted (resolution 0: the simulator's) always are;
    /// pages counted by the kernel on its behalf (`--progress auto`, resolution one page) never
    /// are alone: the count is exact, but a real workload's pages swing from one window to the
    /// next more than its operations (a grep read at half the pages in one window at a value
    /// measured at twice vanilla's before and after), so it takes two in a row.
    fn beyond_noise(&self, one: &Outcome) -> bool {
        let (Some(t), Some(v)) = (
            one.progress(),
            median(self.vanilla.iter().filter_map(Outcome::progress)),
        ) else {
            return true;
        };
        if one.resolution <= 0.0 {
            return true;
        }
        if one.ops.is_some() {
            return false;
        }
        let ticks = |rate: f64| rate * one.seconds / one.resolution;
        ticks(v) - ticks(t) > 3.0 * ticks(v).sqrt()
    }

    /// Whether every window of `tuned` (fewer than a block) fell below vanilla's block by
    /// more than chance can explain ([`below_every`]: below its lowest window and its falling
    /// line, by more than the tolerance and twice the block's spread about its line). One
    /// such window of a new decision sends the guardrail to measure vanilla again at once,
    /// and the window is judged against that block as well (A-B-A): a loss of 7% on a
    /// workload whose throughput rises as the cache fills (fio's mixed job on a throttled
    /// device) showed as 3% against the vanilla block before it, and waiting out a whole
    /// block left the cache behind for the rest of the run (0.97x vanilla). With several
    /// processes split out, every one that counts ([`Outcome::relative_progress`]) must be so
    /// below its own vanilla: one process's loss may be another's doubling, which a block weighs.
    fn clearly_below(&self, cfg: &GuardConfig, tuned: &[Outcome]) -> bool {
        self.below_vanilla(cfg, tuned, false)
    }

    /// Whether every window of vanilla's block fell below a whole block of the controller's
    /// (`tuned`) by more than chance can explain: [`Guarded::clearly_below`] the other way
    /// round, the controller's block the reference ([`below_every`]: below its lowest window
    /// and its line carried to vanilla's, by more than the tolerance, twice the block's spread
    /// about its line and its count's noise). A decision kept by such a margin is far from its
    /// verdict's edge, and the next check of vanilla can wait four times as long
    /// ([`Guarded::checked`]). With several processes watched through both sides, each one on
    /// its own (a busy one's gain summed would hide a light one's loss); never while a process
    /// is held back or about to be. Never with a block of one window (no spread to hold it to).
    fn clearly_above(&self, cfg: &GuardConfig, tuned: &[Outcome]) -> bool {
        if !self.held.is_empty() || !self.harmed.is_empty() || tuned.len() < cfg.block.max(2) as usize {
            return false;
        }
        // Vanilla's block ends this many windows after the controller's did (negative: before).
        let since = self.vanilla_at as f64 - self.tuned_at as f64;
        let margin = Margin::of(cfg, tuned);
        let above = |rate: &dyn Fn(&Outcome) -> Option<f64>| {
            let side = |s: &[Outcome]| s.iter().map(rate).collect::<Option<Vec<f64>>>();
            match (side(tuned), side(&self.vanilla)) {
                (Some(t), Some(v)) => v.len() >= 2 && below_every(&t, since, margin, &v, false),
                _ => false,
            }
        };
        if tuned.iter().chain(&self.vanilla).any(|o| o.progress().is_none()) {
            return false;
        }
        self.for_each_process(tuned, false, above)
    }

    /// `test` on the summed progress of `tuned` and vanilla's block, or, with two processes or
    /// more watched through both sides (as [`Outcome::relative_progress`] compares them), on
    /// each one's rate: every process, or with `counted` those that count on their own
    /// ([`Outcome::counts_alone`], at least one). False where the sides pair no process.
    fn for_each_process(
        &self,
        tuned: &[Outcome],
        counted: bool,
        test: impl Fn(&dyn Fn(&Outcome) -> Option<f64>) -> bool,
    ) -> bool {
        let Some((_, (amounts, _))) = Outcome::paired_sums(tuned, &self.vanilla) else {
            return false;
        };
        if amounts.len() < 2 {
            return test(&Outcome::progress);
        }
        let total: f64 = amounts.values().sum();
        let pids: Vec<u32> = amounts
            .into_iter()
            .filter(|&(_, a)| !counted || Outcome::counts_alone(a, total, &self.vanilla))
            .map(|(pid, _)| pid)
            .collect();
        !pids.is_empty()
            && pids
                .iter()
                .all(|pid| test(&|o: &Outcome| Some(o.by_process.get(pid).copied().unwrap_or(0.0) / o.seconds)))
    }

    /// A whole block of the decision in force (`tuned`) passed against vanilla: after a check
    /// of vanilla measured for it (`check`) the next check waits twice as long, four times as
    /// long where vanilla fell clearly below it ([`Guarded::clearly_above`]); after a first
    /// verdict against vanilla's block just before, at the first interval, four times as long
    /// where it was clearly above, else as long. Each check costs `settle + block` windows of
    /// vanilla: at a doubling from 16 windows a range scan kept at 1.3x vanilla spent a fifth
    /// of a minute-long run on them.
    fn checked(&mut self, cfg: &GuardConfig, tuned: &[Outcome], check: bool) {
        let stretch = if self.clearly_above(cfg, tuned) {
            4
        } else if check {
            2
        } else {
            return;
        };
        self.interval = (self.interval * stretch).min(cfg.max_interval);
        tracing::debug!(event = %"guard_interval", windows = self.interval, stretch = stretch);
    }

    /// [`Guarded::clearly_below`], with vanilla's line carried forward where it rises too
    /// (`rising`, [`below_every`]): grounds for measuring vanilla again, not for a verdict.
    fn below_vanilla(&self, cfg: &GuardConfig, tuned: &[Outcome], rising: bool) -> bool {
        if self.vanilla.len() < 2 || self.vanilla.iter().any(|o| o.progress().is_none()) {
            return false;
        }
        // The windows judged end this many windows after vanilla's block did (negative: a
        // check's pending windows, measured before the block).
        let since = self.tuned_at as f64 - self.vanilla_at as f64;
        let margin = Margin::of(cfg, &self.vanilla);
        let below = |rate: &dyn Fn(&Outcome) -> Option<f64>| {
            let vanilla: Option<Vec<f64>> = self.vanilla.iter().map(rate).collect();
            let rates: Vec<f64> = tuned
                .iter()
                .filter(|o| o.progress().is_some())
                .filter_map(rate)
                .collect();
            vanilla.is_some_and(|v| !rates.is_empty() && below_every(&v, since, margin, &rates, rising))
        };
        self.for_each_process(tuned, true, below)
    }

    /// The share of vanilla's progress `n` windows of the controller's must reach.
    fn bar(cfg: &GuardConfig, n: usize) -> f64 {
        if n < cfg.block as usize {
            cfg.abort
        } else {
            1.0 - cfg.tolerance
        }
    }

    /// Measure vanilla again, then judge `t` (`full`: a whole block of the current decision)
    /// against it.
    fn check(&mut self, t: Vec<Outcome>, full: bool, why: &str, knobs: &mut dyn ReadaheadKnobs) {
        // Logged, as verdicts are: the value in force goes back to vanilla for the check's
        // windows, and a log without it shows a change nobody asked for. (Within the
        // tuner's window, whose own line and change follow it.)
        tracing::info!(event = %"guard_check", judged_windows = t.len(), why = %why, effect = %"vanilla is measured again now, and decides");
        self.pending = Some(Pending {
            windows: t,
            full,
            wanted: self.wants.clone(),
            at: self.window,
        });
        self.vanilla.clear();
        self.phase = Phase::Check;
        self.switch(Arm::Vanilla, knobs);
    }

    /// Back to vanilla, this decision's value backed off (four times longer each time after
    /// a `collapse`, twice after a plain loss).
    fn revert(&mut self, cfg: &GuardConfig, knobs: &mut dyn ReadaheadKnobs, collapse: bool) {
        self.inner
            .taken_back(self.wants.device.unwrap_or(self.vanilla_kb), self.vanilla_kb, self.sure);
        let growth = if collapse { 4 } else { 2 };
        let b = self.backoffs.entry(self.wants.device).or_insert((0, cfg.first_backoff));
        *b = (self.window + b.1, (b.1 * growth).min(cfg.max_backoff));
        self.back_to_vanilla(cfg, knobs);
    }

    /// Back to vanilla, the controller as a whole backed off: its decisions came and went
    /// too fast for one value to be the culprit.
    /// `device`: the device value of the decision reverted (none: values of files or
    /// descriptions alone).
    fn revert_all(&mut self, cfg: &GuardConfig, knobs: &mut dyn ReadaheadKnobs, device: Option<u64>) {
        self.inner
            .taken_back(device.unwrap_or(self.vanilla_kb), self.vanilla_kb, self.sure);
        self.all_until = self.window + self.all_backoff;
        self.all_files = device.is_none_or(|kb| kb == self.vanilla_kb);
        self.all_backoff = (self.all_backoff * 2).min(cfg.max_backoff);
        self.back_to_vanilla(cfg, knobs);
    }

    /// Back to vanilla for a backoff already running: the decision is unjudged, the check
    /// interval as it was.
    fn back_to_vanilla_held(&mut self, knobs: &mut dyn ReadaheadKnobs) {
        self.phase = Phase::Backoff;
        self.judged = None;
        self.tuned.clear();
        self.unjudged.clear();
        self.pending = None;
        self.switch(Arm::Vanilla, knobs);
    }

    fn back_to_vanilla(&mut self, cfg: &GuardConfig, knobs: &mut dyn ReadaheadKnobs) {
        self.quick = false;
        self.unconfirmed = None;
        self.phase = Phase::Backoff;
        self.judged = None;
        self.tuned.clear();
        self.unjudged.clear();
        self.pending = None;
        self.interval = cfg.first_interval;
        self.switch(Arm::Vanilla, knobs);
    }
}

/// What a vanilla check is for ([`Guarded::check`]).
#[derive(Debug, Clone)]
struct Pending {
    /// The controller's windows to judge against vanilla measured now.
    windows: Vec<Outcome>,
    /// Whether they are a whole block of one decision.
    full: bool,
    /// The decision they measured.
    wanted: Wants,
    /// The window they end at (vanilla's line is carried back to it, `clearly_below`; their
    /// own carried on to vanilla's, `clearly_above`).
    at: u64,
}

/// A judgement of the controller's windows against vanilla's ([`Guarded::compare`]).
struct Comparison {
    /// Median progress of each side.
    tuned: f64,
    vanilla: f64,
    /// What was held to the bar ([`GuardEvent::relative`]).
    relative: f64,
    /// Whether the controller passes.
    keep: bool,
    /// The comparison process by process, where it was made that way.
    by_process: Option<RelativeProgress>,
    /// Whether the controller was failed for waste ([`Guarded::wasteful`]).
    wasteful: bool,
    /// Whether fewer than a block of windows fell clearly below vanilla's (`clearly_below`).
    clear: bool,
}

/// Whether count `b` exceeds count `a` by more than chance: by more than three times the
/// square root of their sum (the spread of a difference of two sampled counts). The learner
/// ([`crate::online`]) compares its estimates by the same rule.
pub(crate) fn beyond_chance(a: f64, b: f64) -> bool {
    b - a > 3.0 * (a + b).sqrt().max(1.0)
}

/// The mean of per-window rates and the variance of that mean as the windows themselves
/// show it (sample variance over their number; 0 with fewer than two). Windows are taken
/// alike: the tuner's are of one length, to within a few milliseconds.
pub(crate) fn mean_and_spread(rates: &[f64]) -> (f64, f64) {
    let n = rates.len() as f64;
    if rates.is_empty() {
        return (0.0, 0.0);
    }
    let mean = rates.iter().sum::<f64>() / n;
    if rates.len() < 2 {
        return (mean, 0.0);
    }
    let ss: f64 = rates.iter().map(|r| (r - mean).powi(2)).sum();
    (mean, ss / (n - 1.0) / n)
}

/// How far below vanilla's windows a rate must fall ([`below_every`]): by `tolerance` of their
/// median, and where progress is a count of clock ticks, by three times the square root of
/// the ticks a window at vanilla's median holds (`units_per_rate`: ticks in a window per unit
/// of rate; 0 where the application counts, or pages are counted). A range scan of a database
/// by mmap runs ten ticks of its own code a second: a window short by three is chance.
#[derive(Debug, Clone, Copy)]
struct Margin {
    tolerance: f64,
    units_per_rate: f64,
}

impl Margin {
    /// The margin of a block of `windows` (each with a measured progress).
    fn of(cfg: &GuardConfig, windows: &[Outcome]) -> Margin {
        // Clock ticks in a window per unit of rate: seconds over resolution. Pages counted for
        // the workload (`ops`) swing for other reasons than chance, which the block's spread
        // about its line measures (`beyond_noise` alike).
        let ticks = windows.iter().all(|o| o.ops.is_none());
        let resolution = windows.iter().map(|o| o.resolution).fold(0.0, f64::max);
        let seconds = windows.iter().map(|o| o.seconds).sum::<f64>() / windows.len().max(1) as f64;
        Margin {
            tolerance: cfg.tolerance,
            units_per_rate: if ticks && resolution > 0.0 {
                seconds / resolution
            } else {
                0.0
            },
        }
    }
}

/// Whether every rate of `tuned` is below the rates of a vanilla block (one window apart;
/// `tuned` ends `since` windows after the block's last, negative: before it) by
/// more than `tolerance` of their median
/// and twice their spread about their least-squares line (and the count's own noise, see
/// [`Margin`]): below the lowest of them, and below
/// the line carried forward where it falls; with `rising`, below the line carried forward
/// whichever way it goes (where the verdict waits for vanilla measured again, which a noisy
/// slope cannot fake). The spread is taken about the line, not as the block's range: a
/// workload that speeds up steadily as the cache fills is no noisier for it.
fn below_every(vanilla: &[f64], since: f64, margin: Margin, tuned: &[f64], rising: bool) -> bool {
    let n = vanilla.len() as f64;
    let centre = (n - 1.0) / 2.0;
    let mean = vanilla.iter().sum::<f64>() / n;
    let (sxy, sxx) = vanilla.iter().enumerate().fold((0.0, 0.0), |(sxy, sxx), (i, &v)| {
        let x = i as f64 - centre;
        (sxy + x * (v - mean), sxx + x * x)
    });
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let residuals = vanilla
        .iter()
        .enumerate()
        .map(|(i, &v)| v - mean - slope * (i as f64 - centre));
    let (rlo, rhi) = residuals.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| (lo.min(r), hi.max(r)));
    let lo = vanilla.iter().copied().fold(f64::INFINITY, f64::min);
    let line = mean + slope * (centre + since);
    let floor = if rising { line } else { lo.min(line) };
    let mid = median(vanilla.iter().copied()).unwrap_or(lo);
    let margin = (margin.tolerance * mid)
        .max(2.0 * (rhi - rlo))
        .max(3.0 * (mid * margin.units_per_rate).sqrt() / margin.units_per_rate.max(f64::MIN_POSITIVE));
    floor.is_finite() && margin.is_finite() && tuned.iter().all(|&t| t < floor - margin)
}

/// The pages of `outcomes` summed (reads, pages read in, demand misses).
fn pages_of(outcomes: &[Outcome]) -> Outcome {
    outcomes.iter().fold(Outcome::default(), |a, b| Outcome {
        pages_accessed: a.pages_accessed + b.pages_accessed,
        pages_added: a.pages_added + b.pages_added,
        misses: a.misses + b.misses,
        ..a
    })
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl ReadaheadController for Guarded {
    fn name(&self) -> String {
        let n = self.inner.name();
        if self.cfg.is_some() {
            format!("{n}+guard")
        } else {
            n
        }
    }

    fn decide(&mut self, window: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        self.steady.next_window();
        // What was in force through the window just measured: a change made now (a switch,
        // a new decision, processes held or let go) lowers or raises against it.
        let was = self.in_force(self.arm);
        self.step(&window.outcome, knobs);
        let before = self.in_force(Arm::Tuned);
        let mut gk = GuardKnobs {
            inner: knobs,
            wants: &mut self.wants,
            apply: self.arm == Arm::Tuned,
            held: &self.held,
        };
        let mut floored = FloorKnobs {
            inner: &mut self.steady.wrap(&mut gk),
            min_kb: self.cfg.as_ref().map_or(0, |c| c.min_kb),
        };
        self.inner.decide(window, &mut floored);
        self.forget_not_open();
        if std::mem::take(&mut self.resume_after_decide) {
            self.resume(knobs);
        }
        // The controller's arm as it stands now (nothing below changes what it puts).
        let now = self.in_force(Arm::Tuned);
        if now != before {
            // A new decision: measured afresh once it has settled (in force or not). A held
            // process's requests change nothing in force. Processes apart follow the device's
            // new value (the controller set the device alone).
            if self.arm == Arm::Tuned && !self.apart.is_empty() {
                self.put(&now, knobs);
            }
            self.tuned.clear();
            self.short = None;
            if self.arm == Arm::Tuned {
                self.age = 0;
            }
            if self.phase == Phase::Tuned && self.backed_off(self.window) {
                // Back to a value backed off (a controller that flips between two): vanilla
                // until the backoff ends or it asks for another.
                self.back_to_vanilla_held(knobs);
            }
        }
        if self.age == 0 {
            self.lowered = self.arm == Arm::Tuned && now.no_higher_than(&was, self.vanilla_kb);
        }
        self.window += 1;
    }

    fn decisions(&self) -> &[(u64, usize)] {
        self.inner.decisions()
    }
    fn fallbacks(&self) -> u64 {
        self.inner.fallbacks()
    }
    fn overruled(&self) -> crate::controller::Overruled {
        self.inner.overruled()
    }
    fn labels(&self) -> Vec<String> {
        self.inner.labels()
    }
    fn taken_back(&mut self, kb: u64, now_kb: u64, sure: bool) {
        self.inner.taken_back(kb, now_kb, sure);
    }
    fn kept(&mut self, kb: u64, gain: bool) {
        self.inner.kept(kb, gain);
    }
}
