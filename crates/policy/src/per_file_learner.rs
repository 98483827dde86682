//! A per-file model with the online learner beside it, deciding the device's value.
//!
//! A per-file model decides each file's readahead from that file's features, naming one of the
//! few values its training sweeps measured. On the kernel KML's per-file model held vanilla's
//! floor on the whole test family, but where its answer was wrong for every file alike it left
//! the static oracle's gain untouched: on a range scan it answered 16 KiB for the database's
//! files and the guardrail took that back (the static 64 KiB gains a third); on a random
//! reader of a large mapped file it answered vanilla (64 KiB gains 1.95x). Neither is a matter
//! of one file against another, which is what the model is for; both are the device's value.
//!
//! So the online learner ([`Online`]) decides the device's value, as it does beside a model per
//! device, and the model's values are in force while that value is vanilla's: every file the
//! model answered gets its answer, the others follow the device. Where the learner holds
//! another value every file follows the device (the model's values are rewritten to it). The
//! learner's home at vanilla is thus measured with the model's values in force, and each of
//! its neighbours with one value on every file: where telling files apart pays (a scanner's
//! files and a random reader's), home stays; where one value serves all, the learner finds it.
//!
//! A verdict of the guardrail's on the device at vanilla is on the model's values; on any
//! other value, on the learner's. The model's values taken back are out of force for a backoff
//! that doubles each time (every file at the device's value). A change of the model's values
//! waits for its verdict before the learner moves again, and the learner measures no window
//! in which the model's values changed.

use crate::controller::{KmlController, Overruled, ReadaheadController, ReadaheadKnobs};
use crate::online::Online;
use crate::readahead::WindowFeatures;
use std::collections::{BTreeMap, BTreeSet};

/// Windows the model's values are first out of force after the guardrail took them back;
/// doubles each time, up to [`MODEL_MAX_BACKOFF`].
pub const MODEL_FIRST_BACKOFF: u64 = 16;

/// The longest time the model's values are out of force.
pub const MODEL_MAX_BACKOFF: u64 = 256;

/// A per-file [`KmlController`] and the [`Online`] learner of the device's value beside it
/// (see the module documentation).
pub struct PerFileLearner {
    model: KmlController,
    learner: Online,
    vanilla_kb: u64,
    /// Windows the guardrail takes to judge a change.
    judged_in: u64,
    /// The model's own answer per file and per process's next files: what it reads back (its
    /// inputs include the file's readahead).
    answers: BTreeMap<u64, u64>,
    next: BTreeMap<u32, u64>,
    /// Files given a value of their own, rewritten whenever what they should hold changes
    /// (one set keeps its value while the device's changes; on the kernel as in the
    /// simulator, a file that closes and opens again keeps it too).
    set: BTreeSet<u64>,
    /// A change of the model's values awaiting the guardrail's verdict, until this window (a
    /// change back to vanilla is not judged at all).
    awaiting_until: Option<u64>,
    /// The model's values are out of force until this window; the next backoff.
    off_until: u64,
    backoff: u64,
    /// Whether the model's values were in force after the last decision.
    was_on: bool,
    /// Whether the last decision changed the files' values (the model's, or their coming into
    /// or going out of force).
    moved: bool,
    window: u64,
    /// Times the guardrail took the model's values back.
    pub model_taken_back: u64,
}

impl PerFileLearner {
    /// The model (deciding per file) and the learner of the device's value.
    pub fn new(model: KmlController, learner: Online) -> PerFileLearner {
        PerFileLearner {
            model,
            learner,
            vanilla_kb: 128,
            judged_in: 0,
            answers: BTreeMap::new(),
            next: BTreeMap::new(),
            set: BTreeSet::new(),
            awaiting_until: None,
            off_until: 0,
            backoff: MODEL_FIRST_BACKOFF,
            was_on: false,
            moved: false,
            window: 0,
            model_taken_back: 0,
        }
    }

    /// The learner, for its trace of values.
    pub fn learner(&self) -> &Online {
        &self.learner
    }

    fn awaiting(&self) -> bool {
        self.awaiting_until.is_some_and(|until| self.window <= until)
    }
}

/// The model's view of the knobs: its own answers. What it sets is recorded for
/// [`PerFileLearner`] to apply.
struct ModelFrame<'a> {
    answers: &'a mut BTreeMap<u64, u64>,
    next: &'a mut BTreeMap<u32, u64>,
    vanilla_kb: u64,
    changed: bool,
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
        let was = self.answers.insert(inode, kb).unwrap_or(self.vanilla_kb);
        self.changed |= was != kb;
    }
    fn set_new_file_read_ahead_kb(&mut self, pid: u32, kb: u64) {
        let was = self.next.insert(pid, kb).unwrap_or(self.vanilla_kb);
        self.changed |= was != kb;
    }
}

impl ReadaheadController for PerFileLearner {
    fn name(&self) -> String {
        format!("{}+online", self.model.name())
    }

    fn decide(&mut self, window: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        // The window that ended followed a change of the files' values: the device's value is
        // not what moved its outcome.
        let settling = std::mem::take(&mut self.moved);
        let mut frame = ModelFrame {
            answers: &mut self.answers,
            next: &mut self.next,
            vanilla_kb: self.vanilla_kb,
            changed: false,
        };
        self.model.decide(window, &mut frame);
        let changed = frame.changed;
        let before = knobs.device_read_ahead_kb();
        if self.awaiting() {
            // The learner waits for the verdict on the model's change.
        } else if settling {
            self.learner.forget_block();
        } else {
            if self.awaiting_until.take().is_some() {
                // No verdict came (a change back to vanilla is not judged): the learner's
                // block is measured afresh.
                self.learner.forget_block();
            }
            self.learner.decide(window, knobs);
        }
        let device_kb = knobs.device_read_ahead_kb();
        let on = self.window >= self.off_until && device_kb == self.vanilla_kb;
        let answers_vanilla = self
            .answers
            .values()
            .chain(self.next.values())
            .all(|&kb| kb == self.vanilla_kb);
        if on && (changed || !self.was_on) && !answers_vanilla {
            // Twice the guardrail's settle and block, and a check of vanilla as long before it.
            self.awaiting_until = Some(self.window + 4 * self.judged_in.max(4));
        }
        // The learner's own move needs no such care: it lets its new value settle.
        self.moved = (on != self.was_on && device_kb == before) || (on && changed);
        self.was_on = on;
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
                why = %"the guardrail took back the model's per-file values: every file at the learner's value"
            );
            self.backoff = (self.backoff * 2).min(MODEL_MAX_BACKOFF);
            self.learner.forget_block();
        } else {
            self.learner.taken_back(kb, now_kb, sure);
        }
        self.awaiting_until = None;
    }

    fn kept(&mut self, kb: u64, gain: bool) {
        if kb != self.vanilla_kb {
            self.learner.kept(kb, gain);
        }
        self.awaiting_until = None;
    }

    fn judged(&mut self, windows: u32, vanilla_kb: u64) {
        self.judged_in = windows as u64;
        self.vanilla_kb = vanilla_kb;
        self.model.judged(windows, vanilla_kb);
    }

    fn measuring(&self) -> bool {
        !self.awaiting() && self.learner.measuring()
    }

    fn decisions(&self) -> &[(u64, usize)] {
        self.model.decisions()
    }

    fn fallbacks(&self) -> u64 {
        self.model.fallbacks()
    }

    fn labels(&self) -> Vec<String> {
        self.model.labels()
    }

    fn overruled(&self) -> Overruled {
        self.model.overruled()
    }
}
