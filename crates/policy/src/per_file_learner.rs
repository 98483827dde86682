//! A per-file model with a controller of the device's value beside it: the online learner,
//! or a model per device whose values the learner refines.
//!
//! A per-file model decides each file's readahead from that file's features, naming one of the
//! few values its training sweeps measured. On the kernel KML's per-file model held vanilla's
//! floor on the whole test family, but where its answer was wrong for every file alike it left
//! the static oracle's gain untouched: on a range scan it answered 16 KiB for the database's
//! files and the guardrail took that back (the static 64 KiB gains a third); on a random
//! reader of a large mapped file it answered vanilla (64 KiB gains 1.95x). Neither is a matter
//! of one file against another, which is what the model is for; both are the device's value.
//!
//! So another controller decides the device's value: the online learner
//! ([`crate::online::Online`]), or a model per device ([`crate::controller::KmlController`],
//! its values refined by the learner), and the per-file model's values are in force while
//! that value is vanilla's: every file the model answered gets its answer, the others follow
//! the device. Where the device's controller holds another value every file follows the
//! device (the model's values are rewritten to it). The learner's home at vanilla is thus
//! measured with the model's values in force, and each of its neighbours with one value on
//! every file: where telling files apart pays (a scanner's files and a random reader's), home
//! stays; where one value serves all, the learner finds it.
//!
//! A verdict of the guardrail's on the device at vanilla is on the model's values; on any
//! other value, on the device's controller's. The model's values taken back are out of force
//! for a backoff that doubles each time (every file at the device's value). The device's
//! controller measures no window in which the model's values changed
//! ([`ReadaheadController::disturbed`]).

use crate::controller::{Overruled, ReadaheadController, ReadaheadKnobs, MIN_STREAM_EVENTS};
use crate::readahead::{RaFeatures, WindowFeatures};
use std::collections::{BTreeMap, BTreeSet};

/// Windows the model's values are first out of force after the guardrail took them back;
/// doubles each time, up to [`MODEL_MAX_BACKOFF`].
pub const MODEL_FIRST_BACKOFF: u64 = 16;

/// The longest time the model's values are out of force.
pub const MODEL_MAX_BACKOFF: u64 = 256;

/// A per-file model and the controller of the device's value beside it (see the module
/// documentation).
pub struct PerFileLearner {
    model: Box<dyn ReadaheadController + Send>,
    device: Box<dyn ReadaheadController + Send>,
    vanilla_kb: u64,
    /// The model's own answer per file and per process's next files: what it reads back (its
    /// inputs include the file's readahead).
    answers: BTreeMap<u64, u64>,
    next: BTreeMap<u32, u64>,
    /// Files given a value of their own, rewritten whenever what they should hold changes
    /// (one set keeps its value while the device's changes; on the kernel as in the
    /// simulator, a file that closes and opens again keeps it too).
    set: BTreeSet<u64>,
    /// The model's values are out of force until this window; the next backoff.
    off_until: u64,
    backoff: u64,
    /// Whether the model's values were due after the last decision, by the device's value in
    /// force then (not one asked for and held back).
    was_on: bool,
    /// Whether the last decision changed the files' values (the model's, or their coming into
    /// or going out of force).
    moved: bool,
    window: u64,
    /// Times the guardrail took the model's values back.
    pub model_taken_back: u64,
    /// Lowerings of a file's value not taken: the window saw it in too few events.
    few_event_lowerings: u64,
}

impl PerFileLearner {
    /// The model (deciding per file: a [`crate::controller::KmlController`] with
    /// [`crate::controller::Scope::File`]) and the controller of the device's value (the
    /// online learner, or a model per device).
    pub fn new(
        model: Box<dyn ReadaheadController + Send>,
        device: Box<dyn ReadaheadController + Send>,
    ) -> PerFileLearner {
        PerFileLearner {
            model,
            device,
            vanilla_kb: 128,
            answers: BTreeMap::new(),
            next: BTreeMap::new(),
            set: BTreeSet::new(),
            off_until: 0,
            backoff: MODEL_FIRST_BACKOFF,
            was_on: false,
            moved: false,
            window: 0,
            model_taken_back: 0,
            few_event_lowerings: 0,
        }
    }
}

/// The model's view of the knobs: its own answers. What it sets is recorded for
/// [`PerFileLearner`] to apply.
///
/// A lowering of the model's answer for a file the window saw in fewer than
/// [`MIN_STREAM_EVENTS`] events (pages added and pages read: a few pages) is taken only where
/// the same process's reads of a file seen in as many were answered as low or lower (its
/// reads, well seen, look random too); a process's next files are lowered only on a window
/// that saw one of its files in as many. A few pages cannot tell a scan from random reads,
/// and the two mistakes do not cost alike (a random reader's file left higher loses a little
/// read-around on its few reads; a file a scan reaches next at 16 KiB is read at a quarter of
/// vanilla's speed). On the kernel KML's per-file model answered 16 KiB for the files a
/// backward scan's database had only opened (one to three events: a footer, an index block),
/// and the scan, reaching them seconds later, ran at 176,000 operations a second where
/// vanilla ran 637,000 until the next window; its well-seen file, the one it scanned, was
/// answered 1 MiB. A random reader of many small files, each a few pages a window, is
/// vouched for by the busiest of them.
struct ModelFrame<'a> {
    answers: &'a mut BTreeMap<u64, u64>,
    next: &'a mut BTreeMap<u32, u64>,
    files: &'a BTreeMap<u64, RaFeatures>,
    owners: &'a BTreeMap<u64, u32>,
    vanilla_kb: u64,
    changed: bool,
    /// The files whose answer changed, with the new answer (logged with their features).
    moved_files: Vec<(u64, u64)>,
    /// Lowerings of files seen in a few events, judged once the model has answered every file.
    light: Vec<(u64, u64)>,
    few_event_lowerings: u64,
}

impl ModelFrame<'_> {
    fn answer(&mut self, inode: u64, kb: u64) {
        let was = self.answers.insert(inode, kb).unwrap_or(self.vanilla_kb);
        if was != kb {
            self.changed = true;
            self.moved_files.push((inode, kb));
        }
    }

    /// The window's files of process `pid` it saw in enough events to judge.
    fn well_seen(&self, pid: u32) -> impl Iterator<Item = &u64> + '_ {
        self.files
            .iter()
            .filter(move |(i, f)| self.owners.get(*i) == Some(&pid) && f[0] >= MIN_STREAM_EVENTS)
            .map(|(i, _)| i)
    }

    /// The lowerings of light files: taken where a file of the same process seen in enough
    /// events was answered as low or lower in this window.
    fn judge_light(&mut self) {
        for (inode, kb) in std::mem::take(&mut self.light) {
            let pid = self.owners.get(&inode).copied().filter(|&p| p != 0);
            let vouched = pid.is_some_and(|pid| {
                self.well_seen(pid)
                    .any(|i| self.answers.get(i).is_some_and(|&a| a <= kb))
            });
            if vouched {
                self.answer(inode, kb);
            } else {
                self.few_event_lowerings += 1;
            }
        }
    }
}

impl ReadaheadKnobs for ModelFrame<'_> {
    fn device_read_ahead_kb(&self) -> u64 {
        self.vanilla_kb
    }
    fn set_device_read_ahead_kb(&mut self, _: u64) {}
    fn file_read_ahead_kb(&self, inode: u64) -> u64 {
        self.answers.get(&inode).copied().unwrap_or(self.vanilla_kb)
    }
    fn set_file_read_ahead_kb(&mut self, inode: u64, kb: u64) {
        let was = self.answers.get(&inode).copied().unwrap_or(self.vanilla_kb);
        if kb < was && self.files.get(&inode).is_none_or(|f| f[0] < MIN_STREAM_EVENTS) {
            self.light.push((inode, kb));
        } else {
            self.answer(inode, kb);
        }
    }
    fn set_new_file_read_ahead_kb(&mut self, pid: u32, kb: u64) {
        // The process's next files, likewise: lowered only on a file of its seen in enough
        // events.
        let was = self.next.get(&pid).copied().unwrap_or(self.vanilla_kb);
        if kb < was && self.well_seen(pid).next().is_none() {
            self.few_event_lowerings += 1;
            return;
        }
        self.next.insert(pid, kb);
        self.changed |= was != kb;
    }
}

/// The knobs as the device's controller turns them, its ask for the device's value recorded:
/// behind the hysteresis the knobs read back the value in force until the ask has been
/// repeated, and the files must follow the value coming, not the one going.
struct DeviceFrame<'a> {
    knobs: &'a mut dyn ReadaheadKnobs,
    asked: Option<u64>,
}

impl ReadaheadKnobs for DeviceFrame<'_> {
    fn device_read_ahead_kb(&self) -> u64 {
        self.knobs.device_read_ahead_kb()
    }
    fn set_device_read_ahead_kb(&mut self, kb: u64) {
        self.asked = Some(kb);
        self.knobs.set_device_read_ahead_kb(kb);
    }
    fn file_read_ahead_kb(&self, inode: u64) -> u64 {
        self.knobs.file_read_ahead_kb(inode)
    }
    fn set_file_read_ahead_kb(&mut self, inode: u64, kb: u64) {
        self.knobs.set_file_read_ahead_kb(inode, kb);
    }
    fn description_read_ahead_kb(&self, pid: u32, inode: u64) -> u64 {
        self.knobs.description_read_ahead_kb(pid, inode)
    }
    fn set_description_read_ahead_kb(&mut self, pid: u32, inode: u64, kb: u64) {
        self.knobs.set_description_read_ahead_kb(pid, inode, kb);
    }
    fn set_new_file_read_ahead_kb(&mut self, pid: u32, kb: u64) {
        self.knobs.set_new_file_read_ahead_kb(pid, kb);
    }
}

impl ReadaheadController for PerFileLearner {
    fn name(&self) -> String {
        format!("{}+{}", self.model.name(), self.device.name())
    }

    fn decide(&mut self, window: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        // The window that ended followed a change of the files' values: the device's value is
        // not what moved its outcome.
        let settling = std::mem::take(&mut self.moved);
        let mut frame = ModelFrame {
            answers: &mut self.answers,
            next: &mut self.next,
            files: &window.files,
            owners: &window.file_owners,
            vanilla_kb: self.vanilla_kb,
            changed: false,
            moved_files: Vec::new(),
            light: Vec::new(),
            few_event_lowerings: 0,
        };
        self.model.decide(window, &mut frame);
        frame.judge_light();
        let changed = frame.changed;
        if frame.few_event_lowerings > 0 {
            tracing::debug!(
                event = %"few_event_lowerings",
                files = frame.few_event_lowerings,
                why = %"the per-file model lowered files the window saw in too few events to judge: not taken"
            );
            self.few_event_lowerings += frame.few_event_lowerings;
        }
        // What each answer was given on, for reading a misjudged file after the run.
        for (inode, kb) in std::mem::take(&mut frame.moved_files) {
            if let Some(f) = window.files.get(&inode) {
                tracing::debug!(
                    event = %"file_answer",
                    inode,
                    read_ahead_kb = kb,
                    events = f[0],
                    direction = %format!("{:.3}", f[5]),
                    randomness = %format!("{:.3}", f[7]),
                    density = %format!("{:.3}", f[8]),
                );
            }
        }
        let before = knobs.device_read_ahead_kb();
        let mut frame = DeviceFrame { knobs, asked: None };
        if settling {
            self.device.disturbed();
        } else {
            self.device.decide(window, &mut frame);
        }
        let (knobs, asked) = (frame.knobs, frame.asked);
        // The value coming, asked for and held back by the hysteresis (`iolearn tune`'s
        // `--hold 2`), not the one going: the files are set for it now. Set for the value in
        // force, the model's values came in for the window between, and the device's
        // controller, shown no window after their change, asked nothing then, so the
        // hysteresis forgot its ask: on the kernel a range scan's 64 KiB from the device's
        // model came at the sixteenth window, not the fourth.
        let device_kb = asked.unwrap_or_else(|| knobs.device_read_ahead_kb());
        let off = self.window < self.off_until;
        let on = !off && device_kb == self.vanilla_kb;
        let in_force_on = !off && knobs.device_read_ahead_kb() == self.vanilla_kb;
        // The device's own move, asked for or in force, needs no such care: its controller
        // lets a new value settle. A window that follows one in which the device was asked to
        // move is not withheld from it, or its ask, not repeated, is forgotten (a return to
        // vanilla beside a model whose answers change every window would never come); nor is
        // an ask made once and dropped a change of the files' values.
        self.moved = device_kb == before && (in_force_on != self.was_on || (on && changed));
        self.was_on = in_force_on;
        // Every file the window saw, and every file set before, at what it should hold now,
        // asked for every window until in force (the hysteresis lets a change through only
        // when asked again). Only the window's files would leave the ones a scan reaches next
        // at a value gone by: in the simulator a backward scan met files left at 64 KiB with
        // the device at 256 and lost a fifth.
        let files: BTreeSet<u64> = window.files.keys().chain(self.set.iter()).copied().collect();
        for inode in files {
            let kb = match self.answers.get(&inode) {
                Some(&answer) if on => answer,
                _ => device_kb,
            };
            if knobs.file_read_ahead_kb(inode) != kb {
                knobs.set_file_read_ahead_kb(inode, kb);
                self.set.insert(inode);
            }
        }
        for (&pid, &answer) in &self.next {
            knobs.set_new_file_read_ahead_kb(pid, if on { answer } else { device_kb });
        }
        self.window += 1;
    }

    fn taken_back(&mut self, kb: u64, now_kb: u64, sure: bool) {
        if kb == self.vanilla_kb {
            // The model's values are in force only at vanilla.
            self.model_taken_back += 1;
            self.off_until = self.window + self.backoff;
            tracing::info!(
                event = %"model_off",
                windows = self.backoff,
                why = %"the guardrail took back the model's per-file values: every file at the device's value"
            );
            self.backoff = (self.backoff * 2).min(MODEL_MAX_BACKOFF);
            self.device.disturbed();
        } else {
            self.device.taken_back(kb, now_kb, sure);
        }
    }

    fn kept(&mut self, kb: u64, gain: bool) {
        if kb != self.vanilla_kb {
            self.device.kept(kb, gain);
        }
    }

    fn judged(&mut self, windows: u32, vanilla_kb: u64) {
        self.vanilla_kb = vanilla_kb;
        self.model.judged(windows, vanilla_kb);
        // The device's model waits for verdicts and refines what was kept only when told
        // (on the kernel, untold, v3 never tried the value it scored alike with vanilla).
        self.device.judged(windows, vanilla_kb);
    }

    fn measuring(&self) -> bool {
        self.device.measuring()
    }

    fn decisions(&self) -> &[(u64, usize)] {
        self.model.decisions()
    }

    fn fallbacks(&self) -> u64 {
        self.model.fallbacks() + self.device.fallbacks()
    }

    fn labels(&self) -> Vec<String> {
        self.model.labels()
    }

    fn overruled(&self) -> Overruled {
        let (a, b) = (self.model.overruled(), self.device.overruled());
        Overruled {
            held: a.held + b.held,
            settled: a.settled + b.settled,
            spared_lowerings: a.spared_lowerings + b.spared_lowerings,
            spared_raises: a.spared_raises + b.spared_raises,
            stayed_alike: a.stayed_alike + b.stayed_alike,
            tried_alike: a.tried_alike + b.tried_alike,
            refined: a.refined + b.refined,
            few_event_lowerings: self.few_event_lowerings + a.few_event_lowerings + b.few_event_lowerings,
        }
    }
}
