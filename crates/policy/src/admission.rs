//! Admission control for reads (issue 6): before a read enters a replica's device queue, a
//! policy says serve or EBUSY; on EBUSY the client fails over to another replica (MittOS,
//! LinnOS, ML-MittOS; `shared/spec/tail-latency.md` sections 2-3, `ml-mittos.md`).
//!
//! A policy sees an [`IoView`]: what the block layer knows when the read arrives (pending
//! I/Os, recent completions, the age of the oldest I/O in flight), plus, for the policies that
//! need it, a white-box view of the device (MittSSD) or the read's true latency (the perfect
//! predictor). The same policies run in the simulator (`iolearn-tail`) and on real devices.

use crate::latency::LatencyHistory;
use crate::mittsched::SeekProfile;
use crate::ssdbooks::{MittSsdBooks, NandCommand, SsdProfile};
use iolearn_ml::quant::{QWorkspace, QuantizedMlp, Scheme};
use iolearn_ml::{DecisionTree, Error, ModelFile, ModelKind, Result, Rng, Sequential, Workspace, ZScore};

/// Bytes per page in the pending counts (LinnOS counts 4 KiB pages).
pub const PAGE_BYTES: u64 = 4096;

/// A device's inside as a white-box predictor sees it for one read (MittSSD: per-chip next
/// free time and the channel's queue).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WhiteBox {
    /// Until the read's plane (chip) is free.
    pub plane_wait_ns: u64,
    /// Until the read's channel has no more bookings.
    pub channel_wait_ns: u64,
    /// The plane is collecting garbage.
    pub gc_active: bool,
}

/// What a policy knows about one read when it arrives at a replica.
#[derive(Debug, Clone, Copy)]
pub struct IoView<'a> {
    /// Now, ns.
    pub now_ns: u64,
    /// Read size, bytes.
    pub size: u32,
    /// Read offset, bytes (MittNOOP's seek).
    pub offset: u64,
    /// I/Os in flight at the replica (this one not included).
    pub pending: u32,
    /// 4 KiB pages in flight at the replica, this read's included (LinnOS's queue length).
    pub pending_pages: u32,
    /// The replica's recent completions (latency us, pending pages at their arrival).
    pub history: &'a LatencyHistory,
    /// Age of the oldest I/O in flight at the replica, ns (0: none).
    pub oldest_inflight_ns: u64,
    /// Since the replica's last completion, ns.
    pub since_completion_ns: u64,
    /// White-box state, when the policy asked for it and the device shows it.
    pub white_box: Option<WhiteBox>,
    /// The read's latency if admitted, when the policy asked for it (perfect predictor).
    pub true_latency_ns: Option<u64>,
    /// Every page of the read is in the replica's page cache (MittCache); false when unknown.
    pub cached: bool,
    /// The replica asked.
    pub replica: u32,
    /// The planes holding the read's pages on flash, when the policy asked for the drive's
    /// page map ([`Needs::layout`]) and the drive shares it (an open-channel SSD).
    pub planes: Option<&'a [u32]>,
    /// The read's latency as MittSSD's books predict it ([`crate::ssdbooks`]), ns, for the
    /// feature set that uses it (`iolearn-tail-books-v1`); the policy keeping the books fills
    /// it in.
    pub books_ns: Option<u64>,
    /// The read's own deadline (MittOS's SLO passed with the call), ns, when the caller gave
    /// one: policies that predict a latency (MittSSD, MittNOOP, the oracle, a regressor with
    /// an `above_us` rule) refuse above it instead of their own threshold; classifiers, which
    /// predict no latency, ignore it.
    pub deadline_ns: Option<u64>,
}

/// Inputs of the `iolearn-tail-v1` feature set, in order.
pub const TAIL_FEATURES: [&str; 13] = [
    "pending_pages",
    "pending_ios",
    "size_pages",
    "oldest_inflight_us",
    "since_completion_us",
    "lat1_us",
    "pend1_pages",
    "lat2_us",
    "pend2_pages",
    "lat3_us",
    "pend3_pages",
    "lat4_us",
    "pend4_pages",
];

/// Inputs of the `iolearn-tail-books-v1` feature set: [`TAIL_FEATURES`], then the read's
/// latency as MittSSD's books predict it.
pub const TAIL_BOOKS_FEATURES: [&str; 14] = {
    let mut out = [""; 14];
    let mut i = 0;
    while i < TAIL_FEATURES.len() {
        out[i] = TAIL_FEATURES[i];
        i += 1;
    }
    out[13] = "books_us";
    out
};

impl IoView<'_> {
    /// `iolearn-tail-v1`: LinnOS's and ML-MittOS's inputs plus two things the block layer
    /// also knows and they did not use: how long the oldest in-flight I/O has waited (a stuck
    /// device shows there before any slow completion does) and the time since the last
    /// completion; and the read's size.
    pub fn tail_features(&self, out: &mut [f32; 13]) {
        out[0] = self.pending_pages as f32;
        out[1] = self.pending as f32;
        out[2] = self.size.div_ceil(PAGE_BYTES as u32).max(1) as f32;
        out[3] = (self.oldest_inflight_ns / 1000) as f32;
        out[4] = (self.since_completion_ns / 1000).min(1_000_000) as f32;
        let m = self.history.mittos_features(0);
        out[5..13].copy_from_slice(&m[1..9]);
    }
}

/// What a policy needs the caller to compute (both cost time, so they are asked for).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// [`IoView::white_box`].
    pub white_box: bool,
    /// [`IoView::true_latency_ns`].
    pub oracle: bool,
    /// [`IoView::planes`], [`Started::planes`] and [`Admission::issued`].
    pub layout: bool,
}

impl Needs {
    /// What either needs.
    pub fn or(self, other: Needs) -> Needs {
        Needs {
            white_box: self.white_box || other.white_box,
            oracle: self.oracle || other.oracle,
            layout: self.layout || other.layout,
        }
    }
}

/// An I/O entering a replica's device queue, as a block layer sees it: reads admitted
/// anywhere, writes, hedged copies, other tenants' I/O.
#[derive(Debug, Clone, Copy)]
pub struct Started<'a> {
    /// The replica.
    pub replica: usize,
    /// Unique while in flight; [`Admission::finished`] names it again.
    pub id: u64,
    /// When it entered the queue, ns.
    pub now_ns: u64,
    /// Offset, bytes.
    pub offset: u64,
    /// Length, bytes.
    pub len: u64,
    /// A write.
    pub write: bool,
    /// A read's pages' planes on flash, for policies that asked for [`Needs::layout`]; empty
    /// otherwise.
    pub planes: &'a [u32],
}

/// Serve (true) or EBUSY (false) a read at a replica.
pub trait Admission {
    /// A short name for tables.
    fn name(&self) -> String;
    /// What [`IoView`] must carry.
    fn needs(&self) -> Needs {
        Needs::default()
    }
    /// Serve the read?
    fn admit(&mut self, io: &IoView) -> bool;
    /// How slow the read would be here, on the policy's own scale (higher: slower): lets a
    /// client send a failed-over or hedged read to the least busy replica (MittOS suggests
    /// EBUSY carry the expected wait for this). Policies without a score say 0: no preference.
    fn slowness(&mut self, _io: &IoView) -> f32 {
        0.0
    }
    /// An I/O entered a replica's device queue: what a block layer sees. For policies that
    /// keep their own view of the queues (MittNOOP, MittSSD's books).
    fn started(&mut self, _io: &Started) {}
    /// NAND commands `replica`'s flash translation layer issued, in order, for policies that
    /// asked for [`Needs::layout`] (an open-channel SSD's host issues them; MittSSD's books).
    fn issued(&mut self, _replica: usize, _commands: &[NandCommand]) {}
    /// I/O `id` completed at `done_ns` at `replica`.
    fn finished(&mut self, _replica: usize, _id: u64, _done_ns: u64) {}
}

/// Serve everything (Base, and the hedging/cloning baselines' admission).
#[derive(Debug, Clone, Default)]
pub struct AdmitAll;

impl Admission for AdmitAll {
    fn name(&self) -> String {
        "admit-all".into()
    }
    fn admit(&mut self, _: &IoView) -> bool {
        true
    }
}

/// Refuse a random share of reads (the "Random" baseline: as many revocations as a predictor
/// would make, none of them informed).
#[derive(Debug, Clone)]
pub struct RandomRevoke {
    share: f64,
    rng: Rng,
}

impl RandomRevoke {
    /// Refuse `share` of reads.
    pub fn new(share: f64, seed: u64) -> Self {
        RandomRevoke {
            share: share.clamp(0.0, 1.0),
            rng: Rng::new(seed),
        }
    }
}

impl Admission for RandomRevoke {
    fn name(&self) -> String {
        format!("random({:.3})", self.share)
    }
    fn admit(&mut self, _: &IoView) -> bool {
        self.rng.next_f64() >= self.share
    }
}

/// HeurSim: refuse when the queue is longer than the queue at the inflection point.
#[derive(Debug, Clone)]
pub struct QueueLimit {
    /// Most pending pages (this read included) still served.
    pub max_pages: u32,
}

impl Admission for QueueLimit {
    fn name(&self) -> String {
        format!("queue<={}", self.max_pages)
    }
    fn admit(&mut self, io: &IoView) -> bool {
        io.pending_pages <= self.max_pages
    }
}

/// HeurAdv: a device is "internally busy" when a recent completion was slow although its
/// queue was short (GC, a flush: nothing the queue explains); while it is, only reads arriving
/// to a short queue are served, until the recent completions are fast again. Otherwise
/// HeurSim's queue limit.
#[derive(Debug, Clone)]
pub struct HeurAdv {
    /// HeurSim's limit.
    pub max_pages: u32,
    /// A "short" queue (LinnOS: the lower quartile).
    pub short_pages: u32,
    /// A "slow" completion, us (the inflection point).
    pub slow_us: u32,
}

impl Admission for HeurAdv {
    fn name(&self) -> String {
        "heur-adv".into()
    }
    fn admit(&mut self, io: &IoView) -> bool {
        let busy = io
            .history
            .recent()
            .any(|(lat, pend)| lat > self.slow_us && pend <= self.short_pages);
        if busy {
            io.pending_pages <= self.short_pages
        } else {
            io.pending_pages <= self.max_pages
        }
    }
}

/// The perfect predictor: refuses exactly the reads that would be slower than `slow_ns`.
#[derive(Debug, Clone)]
pub struct Oracle {
    /// Slow above this, ns.
    pub slow_ns: u64,
}

impl Admission for Oracle {
    fn name(&self) -> String {
        "oracle".into()
    }
    fn needs(&self) -> Needs {
        Needs {
            oracle: true,
            ..Needs::default()
        }
    }
    fn admit(&mut self, io: &IoView) -> bool {
        io.true_latency_ns
            .is_none_or(|l| l <= io.deadline_ns.unwrap_or(self.slow_ns))
    }
}

/// MittSSD: predict the read's latency from the white-box state — wait for the chip, then the
/// page read, then the channel transfer (behind the channel's bookings) — and refuse it when
/// that misses the deadline.
#[derive(Debug, Clone)]
pub struct MittSsd {
    /// Refuse above this predicted latency, ns.
    pub deadline_ns: u64,
    /// Page read time of the device, ns.
    pub read_ns: u64,
    /// Page transfer over the channel, ns.
    pub transfer_ns: u64,
    /// Controller overhead, ns.
    pub controller_ns: u64,
}

impl MittSsd {
    /// The predicted latency of a read, ns.
    pub fn predict_ns(&self, w: &WhiteBox) -> u64 {
        let sensed = w.plane_wait_ns.max(self.controller_ns) + self.read_ns;
        sensed.max(w.channel_wait_ns) + self.transfer_ns
    }
}

impl Admission for MittSsd {
    fn name(&self) -> String {
        "mittssd".into()
    }
    fn needs(&self) -> Needs {
        Needs {
            white_box: true,
            ..Needs::default()
        }
    }
    fn admit(&mut self, io: &IoView) -> bool {
        io.white_box
            .is_none_or(|w| self.predict_ns(&w) <= io.deadline_ns.unwrap_or(self.deadline_ns))
    }
}

/// MittCache around another policy: a read whose pages are all in the replica's page cache is
/// served (it costs no device I/O, whatever the device's state); the others are the inner
/// policy's to decide. MittOS's MittCache also refuses cached reads under memory contention,
/// which neither world here models.
pub struct MittCache(pub Box<dyn Admission>);

impl Admission for MittCache {
    fn name(&self) -> String {
        format!("{}+cache", self.0.name())
    }
    fn needs(&self) -> Needs {
        self.0.needs()
    }
    fn admit(&mut self, io: &IoView) -> bool {
        io.cached || self.0.admit(io)
    }
    fn slowness(&mut self, io: &IoView) -> f32 {
        if io.cached {
            f32::NEG_INFINITY
        } else {
            self.0.slowness(io)
        }
    }
    fn started(&mut self, io: &Started) {
        self.0.started(io)
    }
    fn issued(&mut self, replica: usize, commands: &[NandCommand]) {
        self.0.issued(replica, commands)
    }
    fn finished(&mut self, replica: usize, id: u64, done_ns: u64) {
        self.0.finished(replica, id, done_ns)
    }
}

/// Two policies at once: a read is served only if both would serve it (MittSSD's books beside a
/// learned model: the books catch the collections they can place, the model the slowness no
/// book shows). Both hear of every I/O; the slowness score is the second's.
pub struct EitherRefuses(pub Box<dyn Admission>, pub Box<dyn Admission>);

impl Admission for EitherRefuses {
    fn name(&self) -> String {
        format!("{}|{}", self.0.name(), self.1.name())
    }
    fn needs(&self) -> Needs {
        self.0.needs().or(self.1.needs())
    }
    fn admit(&mut self, io: &IoView) -> bool {
        // Both decide (each may keep state per decision); refuse if either refuses.
        let a = self.0.admit(io);
        self.1.admit(io) && a
    }
    fn slowness(&mut self, io: &IoView) -> f32 {
        self.1.slowness(io)
    }
    fn started(&mut self, io: &Started) {
        self.0.started(io);
        self.1.started(io);
    }
    fn issued(&mut self, replica: usize, commands: &[NandCommand]) {
        self.0.issued(replica, commands);
        self.1.issued(replica, commands);
    }
    fn finished(&mut self, replica: usize, id: u64, done_ns: u64) {
        self.0.finished(replica, id, done_ns);
        self.1.finished(replica, id, done_ns);
    }
}

/// One policy per replica (LinnOS trains a model per device, on that device's own latencies,
/// with its own inflection point): each read is decided by the policy of the replica it
/// arrives at, and each replica's policy hears only of its own I/Os.
pub struct PerReplica(pub Vec<Box<dyn Admission>>);

impl PerReplica {
    fn of(&mut self, replica: usize) -> &mut dyn Admission {
        // The builder makes one per replica; a replica past them (a caller's error) gets the last.
        let last = self.0.len() - 1;
        self.0[replica.min(last)].as_mut()
    }
}

impl Admission for PerReplica {
    fn name(&self) -> String {
        format!("per-replica {}", self.0.first().map_or(String::new(), |a| a.name()))
    }
    fn needs(&self) -> Needs {
        self.0.iter().fold(Needs::default(), |n, a| n.or(a.needs()))
    }
    fn admit(&mut self, io: &IoView) -> bool {
        self.of(io.replica as usize).admit(io)
    }
    fn slowness(&mut self, io: &IoView) -> f32 {
        self.of(io.replica as usize).slowness(io)
    }
    fn started(&mut self, io: &Started) {
        self.of(io.replica).started(io)
    }
    fn issued(&mut self, replica: usize, commands: &[NandCommand]) {
        self.of(replica).issued(replica, commands)
    }
    fn finished(&mut self, replica: usize, id: u64, done_ns: u64) {
        self.of(replica).finished(replica, id, done_ns)
    }
}

/// MittNOOP (a disk behind a FIFO queue): a read waits until the disk is next free, then takes
/// its seek, rotation and transfer as MittNOOP's own profile predicts them (a seek-cost matrix
/// measured by timing reads on the disk: `mittsched::probe_seek_profile`); refuse it when that
/// misses the deadline. The next-free time and the head's position are MittNOOP's own books:
/// each I/O entering the queue pushes the next-free time by its predicted service and moves the
/// head to its end, and each completion corrects the next-free time by how far the prediction
/// was off (drift correction). Nothing is read from the device model.
#[derive(Debug, Clone)]
pub struct MittNoop {
    /// Refuse above this predicted latency, ns.
    pub deadline_ns: u64,
    profile: SeekProfile,
    /// Per replica, where the head will be when the queue drains.
    head: Vec<u64>,
    next_free_ns: Vec<u64>,
    /// Corrections applied so far per replica (a completion's expected time moves with the
    /// corrections made since it was queued).
    drift_ns: Vec<i64>,
    /// Each I/O in flight: id -> (replica, predicted completion, drift when queued).
    predicted: std::collections::HashMap<u64, (usize, u64, i64)>,
}

impl MittNoop {
    /// Refuse reads predicted (with `profile`) to take longer than `deadline_ns`.
    pub fn new(deadline_ns: u64, profile: SeekProfile) -> Self {
        MittNoop {
            deadline_ns,
            profile,
            head: Vec::new(),
            next_free_ns: Vec::new(),
            drift_ns: Vec::new(),
            predicted: Default::default(),
        }
    }

    fn grow(&mut self, replica: usize) {
        if self.next_free_ns.len() <= replica {
            self.next_free_ns.resize(replica + 1, 0);
            self.drift_ns.resize(replica + 1, 0);
            self.head.resize(replica + 1, 0);
        }
    }

    /// The predicted service of `len` bytes at `offset` on `replica`, after what is queued.
    pub fn service_ns(&mut self, replica: usize, offset: u64, len: u64) -> u64 {
        self.grow(replica);
        self.profile.predict(self.head[replica], offset, len)
    }

    /// The predicted wait of a request arriving at `replica` at `now_ns`.
    pub fn wait_ns(&mut self, replica: usize, now_ns: u64) -> u64 {
        self.grow(replica);
        self.next_free_ns[replica].saturating_sub(now_ns)
    }
}

impl Admission for MittNoop {
    fn name(&self) -> String {
        "mittnoop".into()
    }
    fn admit(&mut self, io: &IoView) -> bool {
        let r = io.replica as usize;
        let service = self.service_ns(r, io.offset, io.size as u64);
        self.wait_ns(r, io.now_ns) + service <= io.deadline_ns.unwrap_or(self.deadline_ns)
    }
    fn started(&mut self, io: &Started) {
        let Started {
            replica,
            id,
            now_ns,
            offset,
            len,
            ..
        } = *io;
        let service_ns = self.service_ns(replica, offset, len);
        self.head[replica] = offset.saturating_add(len);
        let nf = &mut self.next_free_ns[replica];
        *nf = (*nf).max(now_ns) + service_ns;
        self.predicted.insert(id, (replica, *nf, self.drift_ns[replica]));
    }
    fn finished(&mut self, _replica: usize, id: u64, done_ns: u64) {
        let Some((r, predicted, drift_then)) = self.predicted.remove(&id) else {
            return;
        };
        let expected = predicted as i64 + (self.drift_ns[r] - drift_then);
        let delta = done_ns as i64 - expected;
        self.drift_ns[r] += delta;
        let nf = &mut self.next_free_ns[r];
        *nf = (*nf as i64 + delta).max(0) as u64;
    }
}

/// The inputs a learned policy was trained on (its model file's schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureSet {
    /// LinnOS's 31 decimal digits (`linnos-31`).
    Linnos,
    /// ML-MittOS's 9 values (`mittos-9`).
    Mittos,
    /// [`TAIL_FEATURES`] (`iolearn-tail-v1`).
    Tail,
    /// [`TAIL_BOOKS_FEATURES`] (`iolearn-tail-books-v1`): needs an SSD that shares its page
    /// map, whose books the policy keeps.
    TailBooks,
}

impl FeatureSet {
    /// By schema name.
    pub fn from_schema(schema: &str) -> Option<Self> {
        match schema {
            "linnos-31" => Some(FeatureSet::Linnos),
            "mittos-9" => Some(FeatureSet::Mittos),
            "iolearn-tail-v1" => Some(FeatureSet::Tail),
            "iolearn-tail-books-v1" => Some(FeatureSet::TailBooks),
            _ => None,
        }
    }

    /// The schema name.
    pub fn schema(self) -> &'static str {
        match self {
            FeatureSet::Linnos => "linnos-31",
            FeatureSet::Mittos => "mittos-9",
            FeatureSet::Tail => "iolearn-tail-v1",
            FeatureSet::TailBooks => "iolearn-tail-books-v1",
        }
    }

    /// Inputs.
    pub fn dim(self) -> usize {
        match self {
            FeatureSet::Linnos => 31,
            FeatureSet::Mittos => 9,
            FeatureSet::Tail => TAIL_FEATURES.len(),
            FeatureSet::TailBooks => TAIL_BOOKS_FEATURES.len(),
        }
    }

    /// Write the inputs of `io` into `out` (`dim()` long).
    pub fn extract(self, io: &IoView, out: &mut [f32]) {
        match self {
            FeatureSet::Linnos => out.copy_from_slice(&io.history.linnos_features(io.pending_pages)),
            FeatureSet::Mittos => out.copy_from_slice(&io.history.mittos_features(io.pending_pages)),
            FeatureSet::Tail => {
                let mut f = [0f32; 13];
                io.tail_features(&mut f);
                out.copy_from_slice(&f);
            }
            FeatureSet::TailBooks => {
                let (tail, books) = out.split_at_mut(13);
                let mut f = [0f32; 13];
                io.tail_features(&mut f);
                tail.copy_from_slice(&f);
                // Unknown (no books kept): NaN, which a tree sends right like any large value
                // and a caller can see; `Learned` always fills it in.
                books[0] = io.books_ns.map_or(f32::NAN, |ns| ns as f32 / 1e3);
            }
        }
    }
}

/// How a learned model's output becomes a decision (model file meta `rule`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// A classifier: class 1 ("slow") refuses (`class`).
    Class,
    /// A one-output classifier (sigmoid) or a tree: refuse when the probability of "slow" is
    /// above this (`proba=P`).
    Proba(f32),
    /// A regressor of latency in us: refuse above this (`above_us=T`).
    AboveUs(f32),
}

impl Rule {
    /// Parse `class`, `proba=P` or `above_us=T`.
    pub fn parse(s: &str) -> Option<Rule> {
        let num = |v: &str| v.parse::<f32>().ok().filter(|x| x.is_finite());
        match s.split_once('=') {
            None if s == "class" => Some(Rule::Class),
            Some(("proba", v)) => num(v).map(Rule::Proba),
            Some(("above_us", v)) => num(v).map(Rule::AboveUs),
            _ => None,
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::Class => write!(f, "class"),
            Rule::Proba(p) => write!(f, "proba={p}"),
            Rule::AboveUs(t) => write!(f, "above_us={t}"),
        }
    }
}

enum Predictor {
    /// LinnOS's integer network (weights x1000).
    Fixed(QuantizedMlp, QWorkspace),
    Mlp(Sequential, Workspace),
    Tree(DecisionTree, Vec<f32>),
}

/// A policy driven by a trained model file: its schema names the inputs, its meta `rule` the
/// decision, meta `quantize = x1000` selects LinnOS's integer inference.
pub struct Learned {
    name: String,
    features: FeatureSet,
    normaliser: Option<ZScore>,
    predictor: Predictor,
    rule: Rule,
    /// Outputs are multiplied by this (a regressor trained on scaled targets).
    scale: f32,
    outputs: usize,
    x: Vec<f32>,
    /// MittSSD's books, for `iolearn-tail-books-v1` ([`Learned::keep_books`]).
    books: Option<MittSsdBooks>,
}

impl Learned {
    /// Build from a model file; `name` labels it in tables.
    pub fn from_file(file: &ModelFile, name: &str) -> Result<Self> {
        let features = FeatureSet::from_schema(&file.schema).ok_or_else(|| Error::Invalid {
            field: "schema",
            reason: format!(
                "{:?} is not an admission feature set (linnos-31, mittos-9, iolearn-tail-v1, iolearn-tail-books-v1)",
                file.schema
            ),
        })?;
        if file.kind.in_dim() != features.dim() {
            return Err(Error::Shape {
                what: "model inputs for its schema",
                expected: features.dim(),
                found: file.kind.in_dim(),
            });
        }
        let rule_text = file.meta("rule").unwrap_or("class");
        let rule = Rule::parse(rule_text).ok_or_else(|| Error::Invalid {
            field: "meta rule",
            reason: format!("{rule_text:?} (class, proba=P, above_us=T)"),
        })?;
        let outputs = file.kind.n_outputs();
        let tree = matches!(file.kind, ModelKind::Tree(_));
        match (rule, outputs) {
            (Rule::Class, n) if n >= 2 => {}
            (Rule::Proba(_), n) if n == 1 || (tree && n == 2) => {}
            (Rule::AboveUs(_), 1) => {}
            _ => {
                return Err(Error::Invalid {
                    field: "meta rule",
                    reason: format!("{rule} does not fit a model with {outputs} outputs"),
                })
            }
        }
        let quantize = file.meta("quantize");
        let predictor = match (&file.kind, quantize) {
            (ModelKind::Mlp(net), Some("x1000")) => {
                let q = QuantizedMlp::new(net, Scheme::Fixed1000);
                let ws = q.workspace();
                Predictor::Fixed(q, ws)
            }
            (ModelKind::Mlp(net), None) => Predictor::Mlp(net.clone(), net.workspace()),
            (ModelKind::Tree(t), None) => Predictor::Tree(t.clone(), vec![0.0; t.n_classes()]),
            (_, Some(q)) => {
                return Err(Error::Invalid {
                    field: "meta quantize",
                    reason: format!("{q:?} (only x1000 on a network)"),
                })
            }
        };
        let scale = match file.meta("output_scale") {
            None => 1.0,
            Some(v) => v
                .parse::<f32>()
                .ok()
                .filter(|x| x.is_finite() && *x > 0.0)
                .ok_or_else(|| Error::Invalid {
                    field: "meta output_scale",
                    reason: format!("{v:?} is not a positive number"),
                })?,
        };
        if matches!(predictor, Predictor::Tree(..)) && matches!(rule, Rule::AboveUs(_)) {
            return Err(Error::Invalid {
                field: "meta rule",
                reason: "a tree classifies: class or proba=P".into(),
            });
        }
        Ok(Learned {
            name: name.to_string(),
            features,
            normaliser: file.normaliser.clone(),
            predictor,
            rule,
            scale,
            outputs,
            x: vec![0.0; features.dim()],
            books: None,
        })
    }

    /// Keep MittSSD's books of the drives (`profile`: their data sheet), for a model whose
    /// inputs include the books' prediction (`iolearn-tail-books-v1`).
    pub fn keep_books(&mut self, profile: SsdProfile) {
        self.books = Some(MittSsdBooks::new(0, profile));
    }

    /// The decision rule.
    pub fn rule(&self) -> Rule {
        self.rule
    }

    /// Replace the decision rule (a threshold tuned after training); it must fit the model's
    /// outputs.
    pub fn set_rule(&mut self, rule: Rule) -> Result<()> {
        let fits = match rule {
            Rule::Class => self.outputs >= 2,
            Rule::Proba(_) => self.outputs == 1 || matches!(self.predictor, Predictor::Tree(..)),
            Rule::AboveUs(_) => self.outputs == 1 && !matches!(self.predictor, Predictor::Tree(..)),
        };
        if !fits {
            return Err(Error::Invalid {
                field: "rule",
                reason: format!("{rule} does not fit a model with {} outputs", self.outputs),
            });
        }
        self.rule = rule;
        Ok(())
    }

    /// The inputs.
    pub fn features(&self) -> FeatureSet {
        self.features
    }

    /// The model's raw output for `io`: the slow class's margin (class rule), a probability or
    /// a latency in us.
    pub fn score(&mut self, io: &IoView) -> f32 {
        match &mut self.books {
            Some(b) => {
                let io = IoView {
                    books_ns: Some(b.predict_ns(io)),
                    ..*io
                };
                self.features.extract(&io, &mut self.x)
            }
            None => self.features.extract(io, &mut self.x),
        }
        if let Some(z) = &self.normaliser {
            z.transform(&mut self.x);
        }
        match &mut self.predictor {
            Predictor::Fixed(q, ws) => {
                let out = q.forward(&self.x, ws);
                if out.len() >= 2 {
                    out[1] - out[0]
                } else {
                    out[0] * self.scale
                }
            }
            Predictor::Mlp(net, ws) => {
                let out = net.forward(&self.x, ws);
                if out.len() >= 2 {
                    out[1] - out[0]
                } else {
                    out[0] * self.scale
                }
            }
            Predictor::Tree(t, proba) => {
                t.predict_proba(&self.x, proba);
                let slow = proba.get(1).copied().unwrap_or(0.0);
                match self.rule {
                    Rule::Proba(_) => slow,
                    _ => slow - proba[0],
                }
            }
        }
    }
}

impl Admission for Learned {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn needs(&self) -> Needs {
        Needs {
            layout: self.books.is_some(),
            ..Needs::default()
        }
    }
    fn started(&mut self, io: &Started) {
        if let Some(b) = &mut self.books {
            b.started(io);
        }
    }
    fn issued(&mut self, replica: usize, commands: &[NandCommand]) {
        if let Some(b) = &mut self.books {
            b.book(replica, commands);
        }
    }
    fn finished(&mut self, replica: usize, id: u64, done_ns: u64) {
        if let Some(b) = &mut self.books {
            b.finished(replica, id, done_ns);
        }
    }
    fn slowness(&mut self, io: &IoView) -> f32 {
        self.score(io)
    }
    fn admit(&mut self, io: &IoView) -> bool {
        let s = self.score(io);
        match self.rule {
            Rule::Class => s <= 0.0,
            Rule::Proba(p) => s <= p,
            Rule::AboveUs(t) => s <= io.deadline_ns.map_or(t, |d| d as f32 / 1e3),
        }
    }
}

/// One I/O in flight at a device.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    arrival_ns: u64,
    pages: u32,
    /// Pages in flight when it arrived, itself included (kept for the history).
    pending_at_arrival: u32,
}

/// What a block layer knows about one device, kept up to date as I/Os start and finish, and
/// turned into an [`IoView`] for each arriving read. The simulator and the real I/O path keep
/// one per replica, so policies see the same thing in both worlds.
#[derive(Debug, Clone, Default)]
pub struct DeviceQueue {
    inflight: std::collections::HashMap<u64, InFlight>,
    /// (arrival, id): the oldest in flight first.
    by_age: std::collections::BTreeSet<(u64, u64)>,
    pending_pages: u32,
    history: LatencyHistory,
    last_completion_ns: u64,
}

/// 4 KiB pages of an I/O (at least one).
pub fn pages_of(size: u32) -> u32 {
    (size as u64).div_ceil(PAGE_BYTES).max(1) as u32
}

impl DeviceQueue {
    /// An I/O `id` (unique while in flight) of `size` bytes enters the device at `now_ns`.
    pub fn start(&mut self, id: u64, now_ns: u64, size: u32) {
        let pages = pages_of(size);
        self.pending_pages += pages;
        self.inflight.insert(
            id,
            InFlight {
                arrival_ns: now_ns,
                pages,
                pending_at_arrival: self.pending_pages,
            },
        );
        self.by_age.insert((now_ns, id));
    }

    /// I/O `id` completed at `done_ns`: its latency joins the history (reads and writes, as a
    /// block layer sees them: a write that crawls says as much about the device as a read).
    /// Unknown ids are ignored (a cancelled copy).
    pub fn finish(&mut self, id: u64, done_ns: u64) {
        let Some(io) = self.inflight.remove(&id) else { return };
        self.by_age.remove(&(io.arrival_ns, id));
        self.pending_pages -= io.pages;
        let us = (done_ns.saturating_sub(io.arrival_ns) / 1000).min(u32::MAX as u64) as u32;
        self.history.complete(us, io.pending_at_arrival);
        self.last_completion_ns = self.last_completion_ns.max(done_ns);
    }

    /// I/Os in flight.
    pub fn len(&self) -> usize {
        self.inflight.len()
    }

    /// Nothing in flight.
    pub fn is_empty(&self) -> bool {
        self.inflight.is_empty()
    }

    /// The recent completions.
    pub fn history(&self) -> &LatencyHistory {
        &self.history
    }

    /// What a policy sees for a read of `size` bytes at `offset` arriving at `now_ns` at
    /// `replica` (this queue's; no white box, no oracle: the caller adds them if it has them).
    /// The replica and offset are asked for here, not patched in by callers: a per-replica
    /// policy decides by the one, MittNOOP by the other.
    pub fn view(&self, replica: u32, now_ns: u64, offset: u64, size: u32) -> IoView<'_> {
        IoView {
            now_ns,
            size,
            offset,
            pending: self.inflight.len() as u32,
            pending_pages: self.pending_pages + pages_of(size),
            history: &self.history,
            oldest_inflight_ns: self.by_age.first().map_or(0, |&(a, _)| now_ns.saturating_sub(a)),
            since_completion_ns: now_ns.saturating_sub(self.last_completion_ns),
            white_box: None,
            true_latency_ns: None,
            cached: false,
            replica,
            planes: None,
            books_ns: None,
            deadline_ns: None,
        }
    }
}
