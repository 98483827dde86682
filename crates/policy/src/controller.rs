//! Readahead controllers: once per window they read features and decide `read_ahead_kb`, for
//! the device or per file. The same controllers drive the simulator and (issue 4) the real
//! kernel through [`ReadaheadKnobs`].

use crate::readahead::{scale_free, Outcome, RaFeatures, WindowFeatures, SCALE_FREE_WIDTH};
use iolearn_ml::kml::{
    READAHEAD_FEATURES_V3, READAHEAD_FEATURES_V3_UNNAMED, READAHEAD_SCHEMA, READAHEAD_SCHEMA_V2, READAHEAD_SCHEMA_V3,
};
use iolearn_ml::{ModelFile, ModelKind, Workspace};
use std::collections::BTreeMap;

/// Where a controller acts: the device's readahead, or one file's.
pub trait ReadaheadKnobs {
    /// The device's `read_ahead_kb`.
    fn device_read_ahead_kb(&self) -> u64;
    /// Set the device's `read_ahead_kb` (and push it to open files).
    fn set_device_read_ahead_kb(&mut self, kb: u64);
    /// A file's readahead in KiB.
    fn file_read_ahead_kb(&self, inode: u64) -> u64;
    /// Set one file's readahead.
    fn set_file_read_ahead_kb(&mut self, inode: u64, kb: u64);
    /// Process `pid`'s readahead for a file (its open file descriptions). Default: the file's.
    fn description_read_ahead_kb(&self, pid: u32, inode: u64) -> u64 {
        let _ = pid;
        self.file_read_ahead_kb(inode)
    }
    /// Set process `pid`'s readahead for a file, leaving other processes' descriptions of it
    /// as they are (a file shared by a scanner and a random reader serves both). Default:
    /// knobs that cannot tell processes apart set the file's.
    fn set_description_read_ahead_kb(&mut self, pid: u32, inode: u64, kb: u64) {
        let _ = pid;
        self.set_file_read_ahead_kb(inode, kb)
    }
    /// Files that process `pid` opens from now on start with `kb` (per-file mode: a scan
    /// opens its next file sooner than the next decision). Default: not supported, new files
    /// get the device's value.
    fn set_new_file_read_ahead_kb(&mut self, pid: u32, kb: u64) {
        let _ = (pid, kb);
    }
}

/// What a controller's decisions are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// The device's `read_ahead_kb` (and every open file without a value of its own).
    #[default]
    Device,
    /// Each file (inode): every process's descriptions of it get one value.
    File,
    /// Each open file description, as (process, file): Linux keeps readahead state per
    /// description, so a process scanning a file and another reading it at random each get
    /// their own value.
    Description,
}

impl Scope {
    /// `per-device`, `per-file` or `per-description` (logs and names).
    pub fn name(&self) -> &'static str {
        match self {
            Scope::Device => "per-device",
            Scope::File => "per-file",
            Scope::Description => "per-description",
        }
    }

    /// From `device`, `file` or `description` (the `per-` prefix allowed).
    pub fn parse(text: &str) -> Result<Scope, String> {
        match text.trim().trim_start_matches("per-") {
            "device" => Ok(Scope::Device),
            "file" => Ok(Scope::File),
            "description" => Ok(Scope::Description),
            _ => Err(format!(
                "scope: {} is not one of device, file, description",
                iolearn_safeio::excerpt(text, 40)
            )),
        }
    }
}

/// The model's answers a controller overruled on its own, counted once per run of one answer
/// (tries, once per try applied).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overruled {
    /// Answers of the value a decision the guardrail measured better came from.
    pub held: u64,
    /// See-saws settled (a model that reads the value in force answered each of two values
    /// with the other; [`KmlController`]).
    pub settled: u64,
    /// Lowerings not made while sequential streams carried the device's pages
    /// ([`KmlController::spare_scans`]).
    pub spared_lowerings: u64,
    /// Raises not made while processes that do not scan shared the device with one that does
    /// ([`KmlController::spare_raise_beside_scans`]).
    pub spared_raises: u64,
    /// Moves not made to a value the model scored alike with the one in force, or to a value
    /// so tried from vanilla that did not pay, during its hold ([`KmlController::weigh_alike`]).
    pub stayed_alike: u64,
    /// Values tried from vanilla that the model scored alike with it
    /// ([`KmlController::weigh_alike`]).
    pub tried_alike: u64,
    /// Values of the model's handed to the online learner to refine
    /// ([`KmlController::refine`]).
    pub refined: u64,
    /// Per-file answers lowered on a window that saw the file in fewer than
    /// [`MIN_STREAM_EVENTS`] events, none of its process's files vouching, and processes' next
    /// files lowered on a window that saw none of theirs in as many: not taken (once per file
    /// or process and window; [`crate::per_file_learner::PerFileLearner`]).
    pub few_event_lowerings: u64,
}

/// A decision maker called once per window.
pub trait ReadaheadController {
    /// Name for reports.
    fn name(&self) -> String;
    /// Look at a closed window and act on `knobs`.
    fn decide(&mut self, window: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs);
    /// The classes decided so far, `(window start or inode, class)`; controllers without
    /// classes keep none.
    fn decisions(&self) -> &[(u64, usize)] {
        &[]
    }
    /// Decisions that fell back to the default (input outside the model's training range).
    fn fallbacks(&self) -> u64 {
        0
    }
    /// The name of each class, for logs and metrics.
    fn labels(&self) -> Vec<String> {
        Vec::new()
    }
    /// The model's answers the controller overruled on its own ([`Overruled`]).
    fn overruled(&self) -> Overruled {
        Overruled::default()
    }
    /// The guardrail ([`crate::guard`]) took back the device value `kb` this controller asked
    /// for (vanilla's, where it set none: its values for files or descriptions as a whole):
    /// measured worse than vanilla, and `now_kb` (vanilla) is in force again; `sure`:
    /// by more than the counts it was measured with could by chance. A controller that learns
    /// from its values' outcomes should not climb on from `kb`, nor, if `sure`, ask for it
    /// again soon.
    fn taken_back(&mut self, _kb: u64, _now_kb: u64, _sure: bool) {}
    /// The guardrail kept the device value `kb` this controller asked for (vanilla's, where it
    /// set none), measured against vanilla; `gain`: better than vanilla beyond the tolerance and by more than chance. A
    /// controller whose inputs move with the value in force may hold such a value rather than
    /// answer it with the value it came from.
    fn kept(&mut self, _kb: u64, _gain: bool) {}
    /// The controller runs behind a guardrail that judges each new decision other than
    /// `vanilla_kb` after `windows` windows at it ([`Self::kept`], [`Self::taken_back`]).
    fn judged(&mut self, _windows: u32, _vanilla_kb: u64) {}
    /// The windows measured since the controller's last change ran beside another
    /// controller's change (the per-file model's values beside the device's,
    /// [`crate::per_file_learner::PerFileLearner`]): a controller that learns from them
    /// measures them again.
    fn disturbed(&mut self) {}
    /// Whether the controller is measuring the outcome of a value it is judging and needs
    /// every window shown to it: the tuner then does not rest (`iolearn_tune::sampling`),
    /// where it would show it one window in eight.
    fn measuring(&self) -> bool {
        false
    }
}

/// The vanilla kernel: never changes anything.
#[derive(Debug, Clone, Default)]
pub struct Vanilla;

impl ReadaheadController for Vanilla {
    fn name(&self) -> String {
        "vanilla".into()
    }
    fn decide(&mut self, _: &WindowFeatures, _: &mut dyn ReadaheadKnobs) {}
}

/// A fixed readahead (the oracle is the best of these per workload, found by sweeping). It
/// asks for its value every window the device is elsewhere, so hysteresis (which wants the
/// same request in consecutive windows) lets it through, and asks nothing once it is there.
#[derive(Debug, Clone)]
pub struct Static {
    /// The value.
    pub kb: u64,
}

impl Static {
    /// Hold the device at `kb`.
    pub fn new(kb: u64) -> Self {
        Static { kb }
    }
}

impl ReadaheadController for Static {
    fn name(&self) -> String {
        format!("static-{}", self.kb)
    }
    fn decide(&mut self, _: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        if knobs.device_read_ahead_kb() != self.kb {
            knobs.set_device_read_ahead_kb(self.kb);
        }
    }
}

/// Each named process's open files held at its own value (`pids:PID=KB,...`): the files it
/// has open, reads or opens later, each through its own open file descriptions, so another
/// process reading the same file keeps its own value. With the best static value of each
/// process, this is the oracle of per-description decisions. Processes not named are left
/// alone.
#[derive(Debug, Clone)]
pub struct PerProcess {
    /// The value of each process, KiB, by pid.
    pub kb: BTreeMap<u32, u64>,
}

impl ReadaheadController for PerProcess {
    fn name(&self) -> String {
        let each: Vec<String> = self.kb.iter().map(|(pid, kb)| format!("{pid}={kb}")).collect();
        format!("pids-{}", each.join(","))
    }
    fn decide(&mut self, window: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        // Asked every window, like `Static`: hysteresis lets a repeated request through, and
        // a request for the value in force is no change.
        for (&pid, &kb) in &self.kb {
            knobs.set_new_file_read_ahead_kb(pid, kb);
        }
        for &(pid, ino) in window.descriptions.keys() {
            if let Some(&kb) = self.kb.get(&pid) {
                if knobs.description_read_ahead_kb(pid, ino) != kb {
                    knobs.set_description_read_ahead_kb(pid, ino, kb);
                }
            }
        }
    }
}

/// The inputs a readahead model reads, by its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inputs {
    /// The first `n` of a stream's features: KML's five (`kml-readahead-v1`) or those and
    /// direction and regularity (`iolearn-readahead-v2`).
    Prefix(usize),
    /// Bounded inputs ([`scale_free`], `iolearn-readahead-v3`; per device only): those the
    /// model file names, in its order (`pick[..n]`, indices into [`READAHEAD_FEATURES_V3`]),
    /// so a model trained on some of them (without density, which grows with the size of the
    /// file read) is run on the same ones. A file that names none reads the first seven
    /// ([`READAHEAD_FEATURES_V3_UNNAMED`]: it was written before `marker_share`).
    ScaleFree { pick: [usize; MAX_INPUTS], n: usize },
}

impl Inputs {
    /// Whether these are scale-free inputs.
    fn scale_free(&self) -> bool {
        matches!(self, Inputs::ScaleFree { .. })
    }

    /// The scale-free inputs a model file names (all of them when it names none). Names were
    /// checked on load ([`ModelFile::validate`]: each a scale-free input, once).
    fn named(names: &[String]) -> Inputs {
        let picked: Vec<usize> = if names.is_empty() {
            (0..READAHEAD_FEATURES_V3_UNNAMED).collect()
        } else {
            names
                .iter()
                .filter_map(|name| READAHEAD_FEATURES_V3.iter().position(|f| f == name))
                .collect()
        };
        let n = picked.len().min(MAX_INPUTS);
        let mut pick = [0usize; MAX_INPUTS];
        pick[..n].copy_from_slice(&picked[..n]);
        Inputs::ScaleFree { pick, n }
    }
}

/// The widest input vector a readahead model reads.
const MAX_INPUTS: usize = 8;
const _: () = assert!(SCALE_FREE_WIDTH <= MAX_INPUTS);

/// KML: classify the workload from the window's features with a model file (network or tree,
/// schema `kml-readahead-v1`, or `iolearn-readahead-v2`: those five and direction and
/// regularity, or `iolearn-readahead-v3`: bounded ratios rather than counts and distances,
/// whose classes are readahead values rather than workloads, per device only), and set the
/// class's readahead, for the device, per file or per description.
pub struct KmlController {
    model: ModelFile,
    ws: Option<Workspace>,
    /// What the model reads.
    inputs: Inputs,
    scope: Scope,
    /// The training data's range per feature (model metadata `feature_min`/`feature_max`).
    range: Option<(Vec<f64>, Vec<f64>)>,
    /// Readahead set when a feature vector is out of the training range.
    pub fallback_kb: u64,
    /// Decisions taken: class per window (device mode) or per file or description (by
    /// inode); `usize::MAX` for a fallback.
    pub decisions: Vec<(u64, usize)>,
    /// Decisions that fell back to `fallback_kb`.
    pub fallbacks: u64,
    /// Per device: out of the training range, this learner decides instead of `fallback_kb`
    /// (and it watches the model's windows, to start from what they did).
    pub learner: Option<crate::online::Online>,
    /// Per device, with a learner and a guardrail: a value of the model's that the guardrail
    /// kept with a gain is refined by the learner, which climbs from it until it measures the
    /// workload change (`start_refining`).
    pub refine: bool,
    /// The model's value the learner refines from, while it does, and the learner's climb
    /// that refines it ([`crate::online::Online::climbs`]).
    refining: Option<(u64, u64)>,
    /// Whether the model scored its two best values alike ([`ALIKE`]) in the window its last
    /// change was made: only such a change is refined.
    unsure: bool,
    /// Refinements started.
    pub refinements: u64,
    /// Per device: the see-saws found and settled ([`SeeSaw`]).
    pub settles: u64,
    seesaw: SeeSaw,
    /// Per device: the last change made (from, to), and a value the guardrail kept with a
    /// gain ([`Proven`]).
    last_change: Option<(u64, u64)>,
    proven: Option<Proven>,
    /// Windows the guardrail takes to judge a decision (0: no guardrail), and the value it
    /// does not judge (vanilla).
    judged_in: u64,
    vanilla_kb: u64,
    /// Answers overruled by a proven value.
    pub holds: u64,
    /// Per device, scale-free models: lowerings overruled because sequential streams carried
    /// a share of the device's events ([`KmlController::spare_scans`]).
    spared: Tally<u64>,
    /// Per device, scale-free models: raises overruled because processes that do not scan
    /// shared the device with one that does ([`KmlController::spare_raise_beside_scans`]).
    spared_raises: Tally<u64>,
    /// Per device, scale-free models: moves not made to a value scored alike with the one in
    /// force ([`KmlController::weigh_alike`]), by (value in force, answer).
    stayed_alike: Tally<(u64, u64)>,
    /// Per device, scale-free models: values tried from vanilla that the model scored alike
    /// with it ([`KmlController::weigh_alike`]), counted when applied as asked.
    tried_alike: u64,
    /// The value asked for from vanilla because the model scored it alike with vanilla, once
    /// applied, until the guardrail's verdict on it or another value applied.
    trying: Option<u64>,
    /// This window's such request before the knobs took it: the value, its score and
    /// vanilla's.
    asking: Option<(u64, f32, f32)>,
    /// Values so tried that did not pay (kept without a gain, or taken back), and the window
    /// until which they are not tried again.
    unpaid: BTreeMap<u64, u64>,
}

/// A description's stream reads sequentially below this randomness (input 7 of
/// [`RaFeatures`], `ln(1 + mean |step|) / ln(2 + range)`): a scan's steps of a page or none
/// read under 0.15 on any file of a hundred pages or more (0.06 on 1 GiB), random reads near
/// 0.9; on a 1 GiB file 0.25 is a mean step of about 20 pages.
pub const SEQUENTIAL_RANDOMNESS: f64 = 0.25;

/// The fewest events of a stream whose steps [`KmlController::spare_scans`] judges.
pub const MIN_STREAM_EVENTS: f64 = 16.0;

/// The share of a window's described events in sequential streams from which a per-device
/// lowering is not made ([`KmlController::spare_scans`]): a third.
pub const SEQUENTIAL_SHARE: f64 = 1.0 / 3.0;

/// Two readahead values whose class probabilities differ by less than this are scored alike
/// ([`KmlController::weigh_alike`]). A model taught every value a training workload tied at
/// (`--v3-tied every`) scores two tied values about half and half: on the kernel, db_bench's
/// random readers' windows read 0.51-0.55 for 16 KiB and 0.45-0.49 for 64, in either order.
pub const ALIKE: f32 = 0.15;

/// Windows a value tried from vanilla because the model scored it alike with vanilla is not
/// tried again once the guardrail kept it without a gain or took it back
/// ([`KmlController::weigh_alike`]).
pub const UNPAID_HOLD: u64 = SEESAW_HOLD;

/// The most classes whose probabilities [`KmlController::weigh_alike`] weighs (KML's sweep
/// has 20 values).
const MAX_WEIGHED_CLASSES: usize = 32;

/// The share of the processes whose streams a window judges that do not read sequentially,
/// from which a per-device raise is not made beside a process that scans
/// ([`KmlController::spare_raise_beside_scans`]): a third.
pub const UNSEQUENTIAL_PROCESS_SHARE: f64 = 1.0 / 3.0;

/// A rule's count of the model's answers it overruled, once per run of one answer: the same
/// answer overruled window after window is one event, logged once; a window whose answer the
/// rule leaves alone ends the run.
#[derive(Debug, Clone, Copy)]
struct Tally<K> {
    count: u64,
    run: Option<K>,
}

impl<K> Default for Tally<K> {
    fn default() -> Self {
        Tally { count: 0, run: None }
    }
}

impl<K: PartialEq + Copy> Tally<K> {
    /// The rule overrules the answer `key` this window: true, and counted, where that starts
    /// a run (the caller logs it).
    fn overrules(&mut self, key: K) -> bool {
        let starts = self.run != Some(key);
        if starts {
            self.run = Some(key);
            self.count += 1;
        }
        starts
    }

    /// The rule left this window's answer alone.
    fn passes(&mut self) {
        self.run = None;
    }
}

/// A value the guardrail measured better than vanilla beyond chance. The model's inputs move
/// with the value in force, so at the value it chose it may answer the value it came from:
/// on the kernel the scale-free model took a random mapped reader from 128 to 16 KiB, the
/// guardrail kept 16 at +250%, and at 16 the model answered 128 the next window and the
/// reader ran at vanilla's pace for the rest of the run. Such an answer (the value it came
/// from, and only that) does not leave a proven value for [`SEESAW_HOLD`] windows; the
/// guardrail's checks of vanilla and its collapse test still take it back if the workload
/// changes, and any other answer is followed. Before the guardrail's verdict, such an answer
/// waits for it (up to twice the windows the guardrail takes), so each decision is judged:
/// answered back within the guardrail's block, no value is ever proven.
#[derive(Debug, Clone, Copy)]
struct Proven {
    kb: u64,
    from: u64,
    until: u64,
    /// Whether the guardrail has found the gain yet (else the decision awaits its verdict).
    gain: bool,
    /// Whether the hold was logged.
    told: bool,
}

/// A model that reads the value in force (KML's readahead input; the scale-free model's
/// readahead and pages read in per page accessed) can answer each value with the other on an
/// unchanged workload: on the kernel the scale-free model swung a range scan between 16 and
/// 128 KiB every two or three windows, each move passing the hysteresis. The workload's other
/// inputs cannot tell such a see-saw from a workload that changes: they move with readahead
/// too (the page events include its insertions) and window to window (a random reader's
/// direction). What tells them apart is the model's own answers: after a workload changes,
/// the model answers the value it moved to at least once; in a see-saw it never does. Two
/// stints in a row, at B then at A, in which every answer was the other value, are a see-saw,
/// and the pair settles on its end nearer the fallback value (vanilla's 128 KiB unless told
/// otherwise: the guardrail's side, where a wrong guess costs least) for [`SEESAW_HOLD`]
/// windows, or until the model answers a third value.
#[derive(Debug, Clone, Default)]
struct SeeSaw {
    /// Windows seen per device.
    window: u64,
    /// The value in force and the model's answers since it came into force, and the same for
    /// the value before it.
    stint: Option<Stint>,
    prev: Option<Stint>,
    /// The see-saw in force: either of `ends` is answered with `keep` until window `until`.
    settled: Option<Settle>,
}

#[derive(Debug, Clone, Copy)]
struct Stint {
    kb: u64,
    /// The one answer the model gave throughout (`None`: none yet).
    answer: Option<u64>,
    /// Whether it gave more than one.
    mixed: bool,
}

#[derive(Debug, Clone, Copy)]
struct Settle {
    ends: (u64, u64),
    keep: u64,
    until: u64,
}

/// How many windows a settled see-saw holds before the model is followed again.
pub const SEESAW_HOLD: u64 = 64;

/// Of two readahead values, the one fewer doublings from `vanilla_kb`; of two as far, the
/// smaller (too little readahead costs a scan a share of its throughput, too much can cost a
/// random reader most of its own).
fn nearer(vanilla_kb: u64, a: u64, b: u64) -> u64 {
    let steps = |kb: u64| ((kb.max(1) as f64) / (vanilla_kb.max(1) as f64)).log2().abs();
    match steps(a).total_cmp(&steps(b)) {
        std::cmp::Ordering::Less => a,
        std::cmp::Ordering::Greater => b,
        std::cmp::Ordering::Equal => a.min(b),
    }
}

impl SeeSaw {
    /// A window begins with `now_kb` in force.
    fn observe(&mut self, now_kb: u64) {
        self.window += 1;
        if self.stint.is_none_or(|s| s.kb != now_kb) {
            self.prev = self.stint.take();
            self.stint = Some(Stint {
                kb: now_kb,
                answer: None,
                mixed: false,
            });
        }
    }

    /// What to set for the model's answer `kb` this window, settling a see-saw when this
    /// answer completes one (then `Some(ends)`).
    fn answer(&mut self, kb: u64, vanilla_kb: u64) -> (u64, Option<(u64, u64)>) {
        let Some(stint) = self.stint.as_mut() else {
            return (kb, None);
        };
        match stint.answer {
            None => stint.answer = Some(kb),
            Some(a) if a != kb => stint.mixed = true,
            _ => {}
        }
        if let Some(s) = self.settled {
            if self.window > s.until || (kb != s.ends.0 && kb != s.ends.1) {
                // Judged afresh: the stints that settled it are old news.
                self.settled = None;
                self.prev = None;
                *stint = Stint {
                    kb: stint.kb,
                    answer: Some(kb),
                    mixed: false,
                };
            }
        }
        let now = *stint;
        let mut found = None;
        if let (None, Some(prev)) = (self.settled, self.prev) {
            let seesaw = !prev.mixed
                && !now.mixed
                && prev.kb != now.kb
                && prev.answer == Some(now.kb)
                && now.answer == Some(prev.kb);
            if seesaw {
                self.settled = Some(Settle {
                    ends: (now.kb, prev.kb),
                    keep: nearer(vanilla_kb, now.kb, prev.kb),
                    until: self.window + SEESAW_HOLD,
                });
                found = Some((now.kb, prev.kb));
            }
        }
        match self.settled {
            Some(s) if kb == s.ends.0 || kb == s.ends.1 => (s.keep, found),
            _ => (kb, found),
        }
    }
}

/// What a model does with a window outside its training range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// Set this readahead, KiB.
    Kb(u64),
    /// Let the online learner decide ([`crate::online`]); per device only.
    Online,
    /// As `Online`, and the learner also refines a value of the model's that the guardrail
    /// kept with a gain ([`KmlController::refine`]); for a model deciding per file, the
    /// learner sets the device's value beside it, the model's values in force while that is
    /// vanilla's ([`crate::per_file_learner::PerFileLearner`]).
    OnlineRefining,
}

impl Fallback {
    /// The learner a tuner's or a simulated loop's two flags ask for (refining implies it),
    /// or `None` for neither.
    pub fn learner(refine: bool, online: bool) -> Option<Fallback> {
        match (refine, online) {
            (true, _) => Some(Fallback::OnlineRefining),
            (false, true) => Some(Fallback::Online),
            (false, false) => None,
        }
    }
}

/// Share of a feature's training span tolerated beyond either end before falling back.
pub const RANGE_MARGIN: f64 = 0.25;

/// Parse `a,b,c` metadata into numbers.
fn meta_numbers(model: &ModelFile, key: &str) -> Option<Vec<f64>> {
    let v = &model.meta.iter().find(|(k, _)| k == key)?.1;
    v.split(',').map(|x| x.trim().parse::<f64>().ok()).collect()
}

impl KmlController {
    /// A controller for `model`; error unless the model speaks KML's readahead schema (or
    /// iolearn's, KML's five features and two more) and maps classes to read_ahead_kb.
    pub fn new(model: ModelFile, scope: Scope) -> iolearn_ml::Result<Self> {
        // A model file is validated on load; one built in memory may not have been, and a
        // wrong width would panic at the first decision (after the tuner changed the device).
        model.validate()?;
        let inputs = match model.schema.as_str() {
            READAHEAD_SCHEMA_V2 => Inputs::Prefix(7),
            READAHEAD_SCHEMA_V3 => Inputs::named(&model.features),
            _ => {
                model.expect_schema(READAHEAD_SCHEMA)?;
                Inputs::Prefix(5)
            }
        };
        let width = match inputs {
            Inputs::Prefix(n) => n,
            Inputs::ScaleFree { n, .. } => n,
        };
        // Its page-cache inputs are the device's (the kernel counts per device), and it was
        // trained on the device's windows: a file's stream beside the device's counts is
        // nothing it saw.
        if inputs.scale_free() && scope != Scope::Device {
            return Err(iolearn_ml::Error::SchemaMismatch {
                expected: "a model of iolearn-readahead-v2 or kml-readahead-v1 (per file or description)".into(),
                found: "iolearn-readahead-v3, which decides per device only".into(),
            });
        }
        if model.classes.is_empty() || model.action_unit != "read_ahead_kb" {
            return Err(iolearn_ml::Error::SchemaMismatch {
                expected: "a class -> read_ahead_kb map".into(),
                found: format!("{} classes, unit {:?}", model.classes.len(), model.action_unit),
            });
        }
        let ws = match &model.kind {
            ModelKind::Mlp(n) => Some(n.workspace()),
            ModelKind::Tree(_) => None,
        };
        // A training range that does not fit the inputs would turn the out-of-range fallback
        // off without a word: refused, naming the metadata.
        let has = |key: &str| model.meta.iter().any(|(k, _)| k == key);
        let range = match (meta_numbers(&model, "feature_min"), meta_numbers(&model, "feature_max")) {
            (Some(lo), Some(hi)) if lo.len() == width && hi.len() == width => Some((lo, hi)),
            _ if !has("feature_min") && !has("feature_max") => None,
            _ => {
                return Err(iolearn_ml::Error::SchemaMismatch {
                    expected: format!("metadata feature_min and feature_max of {width} numbers each (the inputs read)"),
                    found: "a training range of another width, or not numbers".into(),
                })
            }
        };
        Ok(KmlController {
            model,
            ws,
            inputs,
            scope,
            range,
            fallback_kb: 128,
            decisions: Vec::new(),
            fallbacks: 0,
            learner: None,
            refine: false,
            refining: None,
            unsure: false,
            refinements: 0,
            settles: 0,
            seesaw: SeeSaw::default(),
            last_change: None,
            proven: None,
            judged_in: 0,
            vanilla_kb: 128,
            holds: 0,
            spared: Tally::default(),
            spared_raises: Tally::default(),
            stayed_alike: Tally::default(),
            tried_alike: 0,
            trying: None,
            asking: None,
            unpaid: BTreeMap::new(),
        })
    }

    /// What the model reads of a stream's features `raw` in a window whose device did
    /// `outcome` (only the scale-free inputs read it), and how many of the buffer's values.
    fn inputs(&self, raw: &RaFeatures, outcome: &Outcome) -> ([f64; MAX_INPUTS], usize) {
        let mut buf = [0f64; MAX_INPUTS];
        match self.inputs {
            Inputs::Prefix(n) => {
                buf[..n].copy_from_slice(&raw[..n]);
                (buf, n)
            }
            Inputs::ScaleFree { pick, n } => {
                let all = scale_free(raw, outcome);
                for (b, &i) in buf.iter_mut().zip(&pick[..n]) {
                    *b = all[i];
                }
                (buf, n)
            }
        }
    }

    /// Whether the model's inputs for `raw` (in a window whose device did `outcome`) lie
    /// within the training range (with [`RANGE_MARGIN`]); true when the model does not record
    /// its range.
    pub fn in_training_range(&self, raw: &RaFeatures, outcome: &Outcome) -> bool {
        let Some((lo, hi)) = &self.range else { return true };
        let (x, n) = self.inputs(raw, outcome);
        x[..n].iter().zip(lo.iter().zip(hi)).all(|(&v, (&l, &h))| {
            // As the model reads it: training ranges are taken over f32 inputs, and a feature
            // that never varied in training (a span of 0) must match after that rounding.
            let v = v as f32 as f64;
            let m = RANGE_MARGIN * (h - l).abs();
            v >= l - m && v <= h + m
        })
    }

    /// The readahead for one stream: the class's action, or the fallback when the input is
    /// out of the training range. Returns (class or `usize::MAX`, KiB).
    fn decide_one(&mut self, raw: &RaFeatures, outcome: &Outcome) -> (usize, u64) {
        self.decide_scored(raw, outcome, None)
    }

    /// As [`Self::decide_one`], and each class's probability into `proba` where given and
    /// the input is in range.
    fn decide_scored(&mut self, raw: &RaFeatures, outcome: &Outcome, proba: Option<&mut [f32]>) -> (usize, u64) {
        if !self.in_training_range(raw, outcome) {
            self.fallbacks += 1;
            return (usize::MAX, self.fallback_kb);
        }
        let class = self.score(raw, outcome, proba);
        (class, self.action_kb(class))
    }

    /// Whether [`Self::weigh_alike`] weighs this model's scores: scale-free inputs, at most
    /// [`MAX_WEIGHED_CLASSES`] classes, and a tree that scores every class of the map (a
    /// tree scores as many classes as its labels named).
    fn weighs(&self) -> bool {
        let n = self.model.classes.len();
        let scored = match &self.model.kind {
            ModelKind::Tree(t) => t.n_classes() == n,
            _ => true,
        };
        self.inputs.scale_free() && n <= MAX_WEIGHED_CLASSES && scored
    }

    /// Class of one stream's features `raw` in a window whose device did `outcome` (the
    /// model reads what its schema says).
    pub fn classify(&mut self, raw: &RaFeatures, outcome: &Outcome) -> usize {
        self.score(raw, outcome, None)
    }

    /// The class of `raw` (as [`Self::classify`]), and each class's probability into `proba`
    /// where given (as long as the model's classes).
    fn score(&mut self, raw: &RaFeatures, outcome: &Outcome, proba: Option<&mut [f32]>) -> usize {
        let (inputs, n) = self.inputs(raw, outcome);
        let mut buf = [0f32; MAX_INPUTS];
        let x = &mut buf[..n];
        for (d, &v) in x.iter_mut().zip(&inputs) {
            *d = v as f32;
        }
        if let Some(z) = &self.model.normaliser {
            z.transform(x);
        }
        match (&self.model.kind, self.ws.as_mut(), proba) {
            (ModelKind::Mlp(n), Some(ws), None) => n.predict_class(x, ws),
            (ModelKind::Tree(t), _, None) => t.predict_class(x),
            // The class as `classify` gives it, bit for bit, from the same pass.
            (ModelKind::Mlp(n), Some(ws), Some(p)) => n.predict_proba(x, ws, p),
            (ModelKind::Tree(t), _, Some(p)) => t.predict_proba(x, p),
            _ => 0,
        }
    }

    /// The model's answer `(class, kb)` for the device, weighed against the value in force
    /// where the model scores the two alike (their probabilities within [`ALIKE`]; scale-free
    /// models only). A move from the value in force to one scored alike is not made: it buys
    /// nothing the model knows of and costs the kernel a settling second, and a decision the
    /// guardrail kept would be left for one it never measured (on the kernel, the model taught
    /// every tied value took db_bench's random readers from 16 KiB, kept at 3.4x vanilla, to 64
    /// at window 12, 20% slower, on a coin's toss of 0.55 against 0.45). And at vanilla, under
    /// a guardrail, the best other value scored alike with vanilla is tried, for the guardrail
    /// to judge: which of two tied values the argmax names is noise (fio's random mapped
    /// reader read 0.50 for 64 KiB against 0.49 for 128, and 64 gains 1.95x). A try must
    /// pay: kept by the guardrail without a gain (within its tolerance) or taken back, the
    /// value goes back to vanilla and is not tried again for [`UNPAID_HOLD`] windows, since
    /// the model gave no reason to prefer it (`unpaid_try`). `p` holds the model's score of
    /// each class for this window. Returns `(class, kb)` unchanged for a fallback, a value in
    /// force that is no class's, or scores not weighed (`p` empty, [`Self::weighs`]).
    fn weigh_alike(&mut self, (class, kb): (usize, u64), (in_force, now): (u64, u64), p: &[f32]) -> (usize, u64) {
        let n = self.model.classes.len();
        // Weighed against the controller's own value (`now`): while the guardrail measures
        // vanilla again the model reads vanilla in force (`in_force`) but the value it judges
        // is the one asked for.
        let here = (0..n).find(|&c| self.action_kb(c) == now);
        let (Some(here), false) = (here, class == usize::MAX || p.len() != n) else {
            self.stayed_alike.passes();
            return (class, kb);
        };
        let window = self.seesaw.window;
        self.unpaid.retain(|_, until| *until >= window);
        let vanilla = (0..n).find(|&c| self.action_kb(c) == self.vanilla_kb);
        if let (Some(v), true) = (vanilla, self.unpaid.contains_key(&now)) {
            // A value tried for being scored alike with vanilla that did not pay, still in
            // force (kept within the tolerance): back to vanilla, however the model scores
            // it now (at the value it tried, its inputs read that value).
            self.stayed_alike.passes();
            return (v, self.vanilla_kb);
        }
        let to = if now == self.vanilla_kb && in_force == now && self.judged_in > 0 {
            // At vanilla under a guardrail: the best other value wherever it is scored alike
            // with vanilla, whichever the argmax names (following the argmax between two
            // values scored alike, one window's request and the next's differ, and no change
            // passes the hysteresis).
            let unpaid = |c: usize| self.unpaid.contains_key(&self.action_kb(c));
            let other = (0..n)
                .filter(|&c| c != here && self.action_kb(c) != now && !unpaid(c))
                .max_by(|&a, &b| p[a].total_cmp(&p[b]));
            match other {
                Some(o) if p[here] - p[o] < ALIKE => {
                    // Scored alike both ways: a try, kept only if it pays (`decide` counts
                    // and marks it once it is applied as asked).
                    if p[o] - p[here] < ALIKE {
                        self.asking = Some((self.action_kb(o), p[o], p[here]));
                    }
                    o
                }
                // A try that did not pay is not asked for again during its hold.
                _ if class != here && unpaid(class) => {
                    let why = "tried before for being scored alike with vanilla, it did not pay: not asked for again during its hold";
                    return self.stay((here, now), (class, kb), p, why);
                }
                _ => class,
            }
        } else if kb != now && p[class] - p[here] < ALIKE {
            // Moving: not to a value scored alike with the one in force.
            let why = "the model scores its answer alike with the value in force: not moved";
            return self.stay((here, now), (class, kb), p, why);
        } else {
            class
        };
        self.stayed_alike.passes();
        (to, self.action_kb(to))
    }

    /// The value in force `(here, now)` kept against the model's answer `(class, kb)`,
    /// counted and logged once per run of that answer ([`Overruled::stayed_alike`]).
    fn stay(&mut self, (here, now): (usize, u64), (class, kb): (usize, u64), p: &[f32], why: &str) -> (usize, u64) {
        if self.stayed_alike.overrules((now, kb)) {
            tracing::info!(
                event = %"stayed_alike",
                answer_kb = kb,
                read_ahead_kb = now,
                scores = %format!("{:.2} against {:.2}", p[class], p[here]),
                why = %why
            );
        }
        (here, now)
    }

    /// The device's value `kb`, or vanilla where `kb` lowers readahead below vanilla while
    /// sequential streams carry a share of the window's events (scale-free models only). A
    /// device value serves every process's stream of every file on the device (each
    /// process's open file descriptions of a file), and the model answers
    /// it from the device's merged stream, in which a scan beside random readers looks
    /// random: on the kernel, fio's three processes (a scan with 94% of the pages, two random
    /// readers) got 16 KiB from the merged stream, and the scan lost 8% even when the
    /// guardrail held it at vanilla alone (the random readers' smaller reads took the
    /// device's I/O budget, and the scan's loss came on its second pass over the file, after
    /// the guardrail's first verdict). A lower value never helps a sequential stream. So a
    /// lowering stands only while streams that read sequentially (their randomness, input 7,
    /// under [`SEQUENTIAL_RANDOMNESS`], forwards or backwards: a reverse scan too loses at a
    /// lower value) carry less than [`SEQUENTIAL_SHARE`] of the streams' events (page-cache
    /// insertions and accesses, as every stream feature counts them: a writer's appends
    /// count as a sequential stream too, which can keep vanilla for a random reader beside a
    /// busy writer). The streams are judged by their own
    /// steps, not by the model: asked about one file's stream, a model trained on devices'
    /// streams answered vanilla for db_bench's random readers, whose device stream it reads
    /// right. A raise is left to the guardrail: its cost to a random reader is that reader's
    /// own readahead, which the guardrail's hold of one process at vanilla removes; but beside
    /// a scan, see [`Self::spare_raise_beside_scans`].
    fn spare_scans(&mut self, kb: u64, window: &WindowFeatures) -> u64 {
        let vanilla = self.vanilla_kb;
        if !self.inputs.scale_free() || kb >= vanilla {
            self.spared.passes();
            return kb;
        }
        let (mut sequential, mut all) = (0.0, 0.0);
        // A stream of a few events has too few steps to judge (a missed read is two: the
        // page added, then read).
        for raw in window.descriptions.values().filter(|raw| raw[0] >= MIN_STREAM_EVENTS) {
            all += raw[0];
            if raw[7] < SEQUENTIAL_RANDOMNESS {
                sequential += raw[0];
            }
        }
        if all <= 0.0 || sequential < SEQUENTIAL_SHARE * all {
            self.spared.passes();
            return kb;
        }
        if self.spared.overrules(kb) {
            tracing::info!(
                event = %"sequential_streams",
                answer_kb = kb,
                read_ahead_kb = vanilla,
                sequential_share = %format!("{:.2}", sequential / all),
                why = %"the device's merged stream answered a lower value, and sequential streams, which a lower value only costs, carry a share of its pages"
            );
        }
        vanilla
    }

    /// The device's value `kb`, or vanilla where `kb` raises readahead above vanilla while a
    /// process scans (its streams' randomness, input 7 weighted by their events, under
    /// [`SEQUENTIAL_RANDOMNESS`]) and processes that do not make [`UNSEQUENTIAL_PROCESS_SHARE`]
    /// or more of the processes the window's streams judge (scale-free models only). The
    /// mirror of [`Self::spare_scans`], counted by process rather than by event: a higher
    /// value only helps a stream that reads sequentially, and costs each process that does
    /// not the device's time (the scan's larger requests queue before its reads) and its own
    /// read-around, while the guardrail, as the floor, weighs every process alike against its
    /// own vanilla. By events such a mix is the scan's: on the kernel fio's three processes (a
    /// scan, a random reader, a strided one) were answered 256 KiB from the merged stream, in
    /// which the other two made about 5% of the events; they ran at 0.62-0.66 of vanilla for
    /// the four windows the guardrail takes to judge a raise (a settling window, then two),
    /// 0.79-0.81 over a 15-s run, for the scan's 2%. One process is no mix (db_bench's
    /// threads are one process); beside no scan the answer stands for the guardrail to judge.
    fn spare_raise_beside_scans(&mut self, kb: u64, window: &WindowFeatures) -> u64 {
        let vanilla = self.vanilla_kb;
        if !self.inputs.scale_free() || kb <= vanilla {
            self.spared_raises.passes();
            return kb;
        }
        // Each process's events, and their randomness summed by event.
        let mut processes: BTreeMap<u32, (f64, f64)> = BTreeMap::new();
        for (&(pid, _), raw) in window
            .descriptions
            .iter()
            .filter(|(_, raw)| raw[0] >= MIN_STREAM_EVENTS)
        {
            let p = processes.entry(pid).or_default();
            p.0 += raw[0];
            p.1 += raw[0] * raw[7];
        }
        let scans = processes
            .values()
            .filter(|(n, r)| r / n < SEQUENTIAL_RANDOMNESS)
            .count();
        let others = processes.len() - scans;
        if scans == 0 || (others as f64) < UNSEQUENTIAL_PROCESS_SHARE * processes.len() as f64 {
            self.spared_raises.passes();
            return kb;
        }
        if self.spared_raises.overrules(kb) {
            tracing::info!(
                event = %"scan_beside_others",
                answer_kb = kb,
                read_ahead_kb = vanilla,
                processes_scanning = scans,
                processes_not = others,
                why = %"the device's merged stream, a scan's, answered a higher value, and processes that do not scan, which a higher value only costs, share the device with it"
            );
        }
        vanilla
    }

    /// The guardrail's verdict on `kb` found no gain: if it was tried for being scored alike
    /// with vanilla, it is not tried again for [`UNPAID_HOLD`] windows (and, still in force,
    /// goes back to vanilla).
    fn unpaid_try(&mut self, kb: u64) {
        if self.trying == Some(kb) {
            self.trying = None;
            self.unpaid.insert(kb, self.seesaw.window + UNPAID_HOLD);
            tracing::info!(
                event = %"unpaid_try",
                read_ahead_kb = kb,
                windows = UNPAID_HOLD,
                why = %"tried for being scored alike with vanilla, and the guardrail found no gain: not tried again for a while"
            );
        }
    }

    /// The guardrail kept the device value `kb`: where it is the model's last change, kept
    /// with a gain, the learner (with `refine` on, behind a guardrail) climbs from it,
    /// looking first the way the model moved. The model names a value among a few its
    /// training sweeps measured, on other devices and over runs of another length: on the
    /// kernel, a random mapped reader's best was 64 KiB over 15-s runs and 16 over 60-s ones,
    /// and a model scores two such values about alike. The learner measures the neighbours
    /// of the model's value on this workload, inside the guardrail, and holds the best; when
    /// it measures the workload change (a phase change) or the guardrail takes its value
    /// back, the model answers again.
    ///
    /// Only a change the model made while it scored its two best values alike is refined:
    /// where it is sure, its value is taken as it is (a learner looking around a range scan's
    /// 64 KiB would spend windows at 32 and 128, each a quarter slower, for nothing).
    fn start_refining(&mut self, kb: u64, gain: bool) {
        let Some(learner) = self.learner.as_mut() else { return };
        let ours = matches!(self.last_change, Some((_, to)) if to == kb) && self.unsure;
        if !self.refine || !gain || !ours || self.refining.is_some() || self.judged_in == 0 {
            return;
        }
        if !learner.start_from(kb, self.vanilla_kb) {
            return;
        }
        self.refining = Some((kb, learner.climbs));
        self.refinements += 1;
        tracing::info!(
            event = %"refining",
            read_ahead_kb = kb,
            vanilla_kb = self.vanilla_kb,
            why = %"the guardrail kept the model's value, scored alike with another, with a gain: the learner measures its neighbours on this workload"
        );
    }

    /// The device goes back to the model: nothing the learner did proves anything for the
    /// model's answers, and a verdict on the learner's value is no verdict on the model's.
    fn end_refining(&mut self, why: &str) {
        if let Some((from, _)) = self.refining.take() {
            self.last_change = None;
            self.proven = None;
            tracing::info!(event = %"refined", from_kb = from, why = %why);
        }
    }

    fn action_kb(&self, class: usize) -> u64 {
        self.model.classes.get(class).map_or(128, |c| c.action.max(0) as u64)
    }
}

impl ReadaheadController for KmlController {
    fn taken_back(&mut self, kb: u64, now_kb: u64, sure: bool) {
        if self.proven.is_some_and(|p| p.kb == kb) {
            self.proven = None;
        }
        // Worse than vanilla where the learner stood: the model answers again (the learner
        // keeps the value taken back marked worse).
        self.end_refining("the guardrail took back the learner's value: the model answers again");
        self.unpaid_try(kb);
        if let Some(l) = self.learner.as_mut() {
            l.taken_back(kb, now_kb, sure);
        }
    }
    fn kept(&mut self, kb: u64, gain: bool) {
        if gain && self.trying == Some(kb) {
            self.trying = None;
        } else if !gain {
            self.unpaid_try(kb);
        }
        match self.last_change {
            Some((from, to))
                if to == kb
                    && gain
                    && self.scope == Scope::Device
                    && self.proven.is_none_or(|p| p.kb != kb || !p.gain) =>
            {
                self.proven = Some(Proven {
                    kb,
                    from,
                    until: self.seesaw.window + SEESAW_HOLD,
                    gain: true,
                    told: false,
                });
            }
            // Kept within the noise: nothing proven.
            _ if !gain => self.proven = self.proven.filter(|p| p.kb != kb),
            _ => {}
        }
        self.start_refining(kb, gain);
    }
    fn judged(&mut self, windows: u32, vanilla_kb: u64) {
        self.judged_in = windows as u64;
        self.vanilla_kb = vanilla_kb;
    }
    fn measuring(&self) -> bool {
        self.learner.as_ref().is_some_and(|l| l.measuring())
    }
    fn disturbed(&mut self) {
        if let Some(l) = self.learner.as_mut() {
            ReadaheadController::disturbed(l);
        }
    }
    fn decisions(&self) -> &[(u64, usize)] {
        &self.decisions
    }
    fn fallbacks(&self) -> u64 {
        self.fallbacks
    }
    fn labels(&self) -> Vec<String> {
        self.model.classes.iter().map(|c| c.label.clone()).collect()
    }
    fn overruled(&self) -> Overruled {
        Overruled {
            held: self.holds,
            settled: self.settles,
            spared_lowerings: self.spared.count,
            spared_raises: self.spared_raises.count,
            stayed_alike: self.stayed_alike.count,
            tried_alike: self.tried_alike,
            refined: self.refinements,
            few_event_lowerings: 0,
        }
    }
    fn name(&self) -> String {
        format!("kml-{}-{}", self.model.kind.name(), self.scope.name())
    }

    fn decide(&mut self, window: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        if self.scope == Scope::Description {
            // Each process's stream of each file decides that process's value for the file;
            // its busiest stream also goes to the files it opens next.
            let mut busiest: BTreeMap<u32, (f64, u64)> = BTreeMap::new();
            for (&(pid, inode), f) in &window.descriptions {
                let mut f = *f;
                let now = knobs.description_read_ahead_kb(pid, inode);
                f[4] = now as f64 * 2.0 / 1024.0;
                let (class, kb) = self.decide_one(&f, &window.outcome);
                self.decisions.push((inode, class));
                if kb != now {
                    knobs.set_description_read_ahead_kb(pid, inode, kb);
                }
                let b = busiest.entry(pid).or_insert((f64::MIN, kb));
                if f[0] > b.0 {
                    *b = (f[0], kb);
                }
            }
            for (pid, (_, kb)) in busiest {
                knobs.set_new_file_read_ahead_kb(pid, kb);
            }
        } else if self.scope == Scope::File {
            // Per process: the decision on its busiest file (the most events, the surest
            // reading) also goes to the files it opens next.
            let mut busiest: BTreeMap<u32, (f64, u64)> = BTreeMap::new();
            for (&inode, f) in &window.files {
                // The readahead feature is the file's own current setting, in sectors.
                let mut f = *f;
                f[4] = knobs.file_read_ahead_kb(inode) as f64 * 2.0 / 1024.0;
                let (class, kb) = self.decide_one(&f, &window.outcome);
                self.decisions.push((inode, class));
                if kb != knobs.file_read_ahead_kb(inode) {
                    knobs.set_file_read_ahead_kb(inode, kb);
                }
                if let Some(&pid) = window.file_owners.get(&inode) {
                    let b = busiest.entry(pid).or_insert((f64::MIN, kb));
                    if f[0] > b.0 {
                        *b = (f[0], kb);
                    }
                }
            }
            for (pid, (_, kb)) in busiest {
                knobs.set_new_file_read_ahead_kb(pid, kb);
            }
        } else if let Some(f) = window.device {
            // The value the model read (KML's input 4, sectors / 1024), not the knobs': the
            // guardrail's knobs answer with the controller's wish while it measures vanilla.
            let in_force = (f[4] * 512.0).round().max(0.0) as u64;
            self.seesaw.observe(in_force);
            if let (Some((_, climb)), Some(learner)) = (self.refining, self.learner.as_mut()) {
                // Refining the model's value: the learner decides, in range or not, until its
                // climb ends (it measured the workload change, could judge nothing, or its
                // measure changed).
                learner.decide(window, knobs);
                if learner.climbs != climb {
                    self.end_refining("the learner's climb ended (the workload changed): the model answers again");
                }
                return;
            }
            let in_range = self.in_training_range(&f, &window.outcome);
            if self.proven.is_some_and(|p| self.seesaw.window > p.until) {
                self.proven = None;
            }
            if let (Some(learner), false) = (self.learner.as_mut(), in_range) {
                // A workload the model never saw: learn its value rather than do nothing.
                self.fallbacks += 1;
                self.decisions.push((window.start_ns, usize::MAX));
                let now = knobs.device_read_ahead_kb();
                match self.proven {
                    // Out of range at the value chosen is the model's knob-dependence again
                    // (below): the learner watches, and the hold stands; also while the
                    // guardrail measures vanilla (the knobs answer with the value asked for).
                    Some(p) if in_force == p.kb || now == p.kb => learner.watch(window, knobs),
                    _ => {
                        learner.decide(window, knobs);
                        if knobs.device_read_ahead_kb() != now {
                            // Not the model's change: the guardrail's verdict on it proves
                            // nothing for the model's answers (the learner keeps its own
                            // record of what it measured).
                            self.last_change = None;
                            self.proven = None;
                        }
                    }
                }
                return;
            }
            if let Some(learner) = self.learner.as_mut() {
                learner.watch(window, knobs);
            }
            // One scoring of the window gives the answer and the scores it is weighed by.
            let mut scores = [0f32; MAX_WEIGHED_CLASSES];
            let n = if self.weighs() { self.model.classes.len() } else { 0 };
            let answer = self.decide_scored(&f, &window.outcome, (n > 0).then_some(&mut scores[..n]));
            let now = knobs.device_read_ahead_kb();
            self.asking = None;
            let (class, kb) = self.weigh_alike(answer, (in_force, now), &scores[..n]);
            self.decisions.push((window.start_ns, class));
            // A fallback is no answer of the model's: it neither starts nor ends a see-saw.
            let (kb, found) = match class {
                usize::MAX => (kb, None),
                _ => self.seesaw.answer(kb, self.fallback_kb),
            };
            if let Some((a, b)) = found {
                self.settles += 1;
                tracing::info!(
                    event = %"settled",
                    ends_kb = %format!("{a},{b}"),
                    read_ahead_kb = kb,
                    why = %"the model answered each value with the other throughout two stints; the end nearer the fallback holds"
                );
            }
            let kb = match self.proven.as_mut() {
                // A fallback to the value it came from too: out of range at the value chosen
                // is the same knob-dependence (on the kernel fio's three processes left the
                // range at 16 KiB and fell back to 128 before the guardrail's verdict).
                Some(p) if in_force == p.kb && kb == p.from => {
                    self.holds += p.gain as u64;
                    if !p.told {
                        p.told = true;
                        tracing::info!(
                            event = %"held",
                            read_ahead_kb = p.kb,
                            answer_kb = kb,
                            why = %"the guardrail measured this value better than vanilla beyond chance; the model's answer is the value it came from"
                        );
                    }
                    p.kb
                }
                _ => kb,
            };
            // Last, over whatever led here (an answer, a settled see-saw, a hold, a fallback):
            // the see-saw and the hold are fed the model's answers, not this rule's value.
            let kb = self.spare_scans(kb, window);
            let kb = self.spare_raise_beside_scans(kb, window);
            if kb != now {
                knobs.set_device_read_ahead_kb(kb);
                // Only a change the hysteresis let through (and the floor left as asked) is
                // one: a request dropped must not end a hold or stand for the value in force.
                let applied = knobs.device_read_ahead_kb();
                if applied != now {
                    self.last_change = Some((now, applied));
                    // The two best scores (none where the model's are not weighed).
                    let (mut first, mut second) = (f32::MIN, f32::MIN);
                    for &x in &scores[..n] {
                        if x > first {
                            (first, second) = (x, first);
                        } else if x > second {
                            second = x;
                        }
                    }
                    self.unsure = class != usize::MAX && n >= 2 && first - second < ALIKE;
                    // A try is one once applied as asked (not spared, floored or held back).
                    self.trying = match self.asking {
                        Some((t, score, vanilla)) if t == applied => {
                            self.tried_alike += 1;
                            tracing::info!(
                                event = %"tried_alike",
                                read_ahead_kb = t,
                                scores = %format!("{score:.2} against vanilla's {vanilla:.2}"),
                                why = %"the model scores this value alike with vanilla: tried, for the guardrail to judge"
                            );
                            Some(t)
                        }
                        _ => None,
                    };
                    if self.judged_in > 0 && class != usize::MAX && applied != self.vanilla_kb {
                        // Awaiting the guardrail's verdict (it judges no change to vanilla).
                        self.proven = Some(Proven {
                            kb: applied,
                            from: now,
                            until: self.seesaw.window + 2 * self.judged_in,
                            gain: false,
                            told: true,
                        });
                    }
                }
            }
        }
    }
}

/// A LEAP-like prefetcher as a readahead controller (KML's baseline, after Maruf and
/// Chowdhury's LEAP): when the window's accesses show a trend (a majority delta), readahead
/// doubles, up to `max_kb`; when they show none, it halves, down to `min_kb`. Linux cannot
/// prefetch backwards, so a reverse trend also only grows the window.
#[derive(Debug, Clone)]
pub struct Leap {
    /// Smallest readahead.
    pub min_kb: u64,
    /// Largest readahead.
    pub max_kb: u64,
    /// Decide per file instead of per device.
    pub per_file: bool,
}

impl Default for Leap {
    fn default() -> Self {
        Leap {
            min_kb: 4,
            max_kb: 1024,
            per_file: false,
        }
    }
}

impl Leap {
    fn next(&self, cur: u64, trend: Option<i64>) -> u64 {
        match trend {
            Some(_) => (cur * 2).clamp(self.min_kb, self.max_kb),
            None => (cur / 2).clamp(self.min_kb, self.max_kb),
        }
    }
}

impl ReadaheadController for Leap {
    fn name(&self) -> String {
        format!("leap-{}", if self.per_file { "per-file" } else { "per-device" })
    }

    fn decide(&mut self, window: &WindowFeatures, knobs: &mut dyn ReadaheadKnobs) {
        if self.per_file {
            let mut busiest: BTreeMap<u32, (f64, u64)> = BTreeMap::new();
            for (&inode, &trend) in &window.file_trends {
                let kb = self.next(knobs.file_read_ahead_kb(inode), trend);
                if kb != knobs.file_read_ahead_kb(inode) {
                    knobs.set_file_read_ahead_kb(inode, kb);
                }
                let events = window.files.get(&inode).map_or(0.0, |f| f[0]);
                if let Some(&pid) = window.file_owners.get(&inode) {
                    let b = busiest.entry(pid).or_insert((f64::MIN, kb));
                    if events > b.0 {
                        *b = (events, kb);
                    }
                }
            }
            for (pid, (_, kb)) in busiest {
                knobs.set_new_file_read_ahead_kb(pid, kb);
            }
        } else if window.device.is_some() {
            let kb = self.next(knobs.device_read_ahead_kb(), window.device_trend);
            if kb != knobs.device_read_ahead_kb() {
                knobs.set_device_read_ahead_kb(kb);
            }
        }
    }
}

/// A readahead controller named by a string, parsed in one place for the simulator, the
/// Python API and the tuner: `vanilla`, `online` (learns the device's value from the outcome,
/// [`crate::online`]), `leap` (LEAP-style window sizing of the readahead
/// value), `leap-prefetch` (LEAP itself as a page-cache prefetcher, KML's baseline; the
/// simulator's `iolearn_sim::leap`), `static:KB`, `files:KB0,KB1,...` (each workload's files
/// held at its own value: the per-file oracle of a mixed run; only the simulator can tell
/// workloads apart this way), `pids:PID=KB,...` (each process's open files at its own value,
/// through its own descriptions: the per-description oracle; in the simulator a process is
/// pid `process + 1`), or a model file's path.
#[derive(Debug, Clone, PartialEq)]
pub enum ControllerSpec {
    /// The kernel's own readahead, untouched.
    Vanilla,
    /// [`Leap`].
    Leap,
    /// LEAP as a page-cache prefetcher (Linux's readahead off); the controller does nothing,
    /// the prefetcher works on every access.
    LeapPrefetch,
    /// LEAP as a prefetcher whose pages carry no readahead marker, so fault-around maps them;
    /// it tracks its prefetched pages itself (the baseline at its best on a page cache).
    LeapPrefetchUnmarked,
    /// [`Static`] at this many KiB.
    Static(u64),
    /// One static value per concurrent workload, KiB.
    Files(Vec<u64>),
    /// [`PerProcess`]: a static value per process, KiB by pid (`pids:PID=KB,...`).
    Processes(BTreeMap<u32, u64>),
    /// A [`KmlController`] with this model file.
    Model(std::path::PathBuf),
    /// The online learner ([`crate::online::Online`]): no model, no sweep; the device's value.
    Online,
}

/// The learner and a second model joined to a controller, and whether the guardrail is on:
/// what the tuner's flags (`--fallback-online`, `--refine-online`, `--device-model`,
/// `--no-guard`) and the simulator's fields ask for, checked in one place
/// ([`ControllerSpec::check_companions`]) so the two apply the same rules (the tuner adds its
/// own: progress measured, no dry run). Kept apart, the two had drifted: until 2026-11-29 the
/// simulator refused the learner as the fallback of a model per device beside a per-file model,
/// which the tuner ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Companions {
    /// The learner takes over where the model is out of its range.
    pub fallback_online: bool,
    /// The learner refines the model's values.
    pub refine_online: bool,
    /// A model per device decides the device's value beside a model per file.
    pub device_model: bool,
    /// The guardrail is on.
    pub guarded: bool,
}

/// Why [`Companions`] do not fit a controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misfit {
    /// The learner (refining, or as the fallback) joins a model, not another controller.
    LearnerWithoutModel {
        /// Refining (else the fallback).
        refine: bool,
    },
    /// The learner sets the device's value, which this scope does not decide: it runs per
    /// device, or per file beside the model (refining, or beside a model per device; as a
    /// fallback only for a model per device), never per description.
    LearnerAtScope {
        /// Refining (else the fallback).
        refine: bool,
    },
    /// Refining measures values the guardrail kept: not without it.
    RefineUnguarded,
    /// A model per device needs a model deciding per file to sit beside (another controller,
    /// or a model per device or per description, has none).
    DeviceModelAlone,
    /// The two models' values are told apart by the guardrail: not without it.
    DeviceModelUnguarded,
}

impl ControllerSpec {
    /// Whether `with` fits this controller deciding at `scope`, by the rules the tuner and the
    /// simulator share; the first misfit found (the fallback's, the refining learner's, then a
    /// model per device's).
    pub fn check_companions(&self, scope: Scope, with: Companions) -> Result<(), Misfit> {
        let model = matches!(self, ControllerSpec::Model(_));
        for (on, refine) in [(with.fallback_online, false), (with.refine_online, true)] {
            if !on {
                continue;
            }
            if !model {
                return Err(Misfit::LearnerWithoutModel { refine });
            }
            // Per file the learner sets the device's value beside the model: refining it, or
            // refining a model per device's, or as that model's fallback.
            let beside = scope == Scope::File && (refine || with.device_model);
            if scope != Scope::Device && !beside {
                return Err(Misfit::LearnerAtScope { refine });
            }
        }
        if with.refine_online && !with.guarded {
            return Err(Misfit::RefineUnguarded);
        }
        if with.device_model {
            if scope != Scope::File || !model {
                return Err(Misfit::DeviceModelAlone);
            }
            if !with.guarded {
                return Err(Misfit::DeviceModelUnguarded);
            }
        }
        Ok(())
    }
}

impl ControllerSpec {
    /// Parse a spec; values are KiB from 0 to [`iolearn_ml::format::MAX_READ_AHEAD_KB`]. Any
    /// text that is not one of the keywords names a model file.
    ///
    /// `Display` shows it back in this form (`static:128`, the model's path).
    pub fn parse(text: &str) -> Result<ControllerSpec, String> {
        let kb = |what: &str, v: &str| -> Result<u64, String> {
            let max = iolearn_ml::format::MAX_READ_AHEAD_KB as u64;
            match v.trim().parse::<u64>() {
                Ok(kb) if kb <= max => Ok(kb),
                _ => Err(format!(
                    "{what}: {} is not a readahead in KiB (0 to {max})",
                    iolearn_safeio::excerpt(v, 40)
                )),
            }
        };
        let text = text.trim();
        Ok(match text {
            "vanilla" => ControllerSpec::Vanilla,
            "leap" => ControllerSpec::Leap,
            "leap-prefetch" => ControllerSpec::LeapPrefetch,
            "leap-prefetch-unmarked" => ControllerSpec::LeapPrefetchUnmarked,
            "online" => ControllerSpec::Online,
            _ => {
                if let Some(v) = text.strip_prefix("static:") {
                    ControllerSpec::Static(kb("static", v)?)
                } else if let Some(list) = text.strip_prefix("files:") {
                    ControllerSpec::Files(list.split(',').map(|v| kb("files", v)).collect::<Result<Vec<_>, _>>()?)
                } else if let Some(list) = text.strip_prefix("pids:") {
                    let mut each = BTreeMap::new();
                    for item in list.split(',') {
                        let (pid, v) = item
                            .split_once('=')
                            .ok_or_else(|| format!("pids: {} is not PID=KB", iolearn_safeio::excerpt(item, 40)))?;
                        let pid = match pid.trim().parse::<u32>() {
                            Ok(p) if p > 0 => p,
                            _ => {
                                return Err(format!(
                                    "pids: {} is not a process id",
                                    iolearn_safeio::excerpt(pid, 40)
                                ))
                            }
                        };
                        if each.insert(pid, kb("pids", v)?).is_some() {
                            return Err(format!("pids: process {pid} is named twice"));
                        }
                    }
                    ControllerSpec::Processes(each)
                } else if text.is_empty() {
                    return Err("controller: empty (vanilla, leap, leap-prefetch, online, static:KB, files:KB,..., pids:PID=KB,..., or a model file)".into());
                } else {
                    ControllerSpec::Model(text.into())
                }
            }
        })
    }

    /// The value the device starts at: a static controller's own from the first page on (the
    /// oracle holds it from the start, not from the first decision), else `default_kb`.
    pub fn start_kb(&self, default_kb: u64) -> u64 {
        match self {
            ControllerSpec::Static(kb) => *kb,
            _ => default_kb,
        }
    }

    /// Build the controller (`scope` applies to LEAP and models; LEAP has no per-description
    /// trends and decides per file for [`Scope::Description`]; `fallback`, when given, is
    /// what a model does with inputs outside its training range; `Fallback::Online` is per
    /// device only, and `Fallback::OnlineRefining` per file builds [`crate::per_file_learner::PerFileLearner`]).
    /// `Files` builds [`Vanilla`]:
    /// its values are set on the files before the run, not decided. A model that cannot be
    /// read or used is an error naming its file.
    pub fn build(
        &self,
        scope: Scope,
        fallback: Option<Fallback>,
    ) -> iolearn_ml::Result<Box<dyn ReadaheadController + Send>> {
        Ok(match self {
            ControllerSpec::Vanilla
            | ControllerSpec::Files(_)
            | ControllerSpec::LeapPrefetch
            | ControllerSpec::LeapPrefetchUnmarked => Box::new(Vanilla),
            ControllerSpec::Leap => Box::new(Leap {
                per_file: scope != Scope::Device,
                ..Leap::default()
            }),
            ControllerSpec::Static(kb) => Box::new(Static::new(*kb)),
            ControllerSpec::Processes(kb) => Box::new(PerProcess { kb: kb.clone() }),
            ControllerSpec::Online => Box::new(crate::online::Online::default()),
            ControllerSpec::Model(path) => {
                let file = ModelFile::load(path)?;
                let mut c = KmlController::new(file, scope).map_err(|e| e.in_file(path))?;
                match fallback {
                    Some(Fallback::Kb(kb)) => c.fallback_kb = kb,
                    Some(f @ (Fallback::Online | Fallback::OnlineRefining)) if scope == Scope::Device => {
                        c.learner = Some(crate::online::Online::default());
                        c.refine = f == Fallback::OnlineRefining;
                    }
                    // Per file, the learner decides the device's value beside the model.
                    Some(Fallback::OnlineRefining) if scope == Scope::File => {
                        return Ok(Box::new(crate::per_file_learner::PerFileLearner::new(
                            Box::new(c),
                            Box::new(crate::online::Online::default()),
                        )));
                    }
                    _ => {}
                }
                Box::new(c)
            }
        })
    }

    /// Per file, with the model per device `device_model` deciding the device's value beside
    /// this one (`device_fallback`: its learner, as [`ControllerSpec::build`] per device), whose
    /// values are in force while the device is at vanilla
    /// ([`crate::per_file_learner::PerFileLearner`]). A model that cannot be read or used is an
    /// error naming its file.
    pub fn build_beside(
        &self,
        device_model: &std::path::Path,
        fallback_kb: u64,
        device_fallback: Option<Fallback>,
    ) -> iolearn_ml::Result<Box<dyn ReadaheadController + Send>> {
        let files = self.build(Scope::File, Some(Fallback::Kb(fallback_kb)))?;
        let device = ControllerSpec::Model(device_model.into()).build(Scope::Device, device_fallback)?;
        Ok(Box::new(crate::per_file_learner::PerFileLearner::new(files, device)))
    }
}

impl std::fmt::Display for ControllerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControllerSpec::Vanilla => f.write_str("vanilla"),
            ControllerSpec::Leap => f.write_str("leap"),
            ControllerSpec::LeapPrefetch => f.write_str("leap-prefetch"),
            ControllerSpec::LeapPrefetchUnmarked => f.write_str("leap-prefetch-unmarked"),
            ControllerSpec::Online => f.write_str("online"),
            ControllerSpec::Static(kb) => write!(f, "static:{kb}"),
            ControllerSpec::Files(kbs) => {
                let kbs: Vec<String> = kbs.iter().map(u64::to_string).collect();
                write!(f, "files:{}", kbs.join(","))
            }
            ControllerSpec::Processes(kb) => {
                let each: Vec<String> = kb.iter().map(|(pid, kb)| format!("{pid}={kb}")).collect();
                write!(f, "pids:{}", each.join(","))
            }
            ControllerSpec::Model(p) => write!(f, "{}", p.display()),
        }
    }
}
