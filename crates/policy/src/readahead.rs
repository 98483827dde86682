//! KML's readahead features, exactly as its code release computes them (`shared/spec/kml.md`
//! section 3, [R]): per window of page-cache events (1 s in KML), per device and per file,
//!
//! `[n_transactions, M2/n / range, M2/(n-1) / range, mean |delta page index|, ra / 1024]`
//!
//! where `M2` is Welford's running sum of squared deviations of the page indices, `range` the
//! largest minus the smallest page index of the window, the deltas are between successive
//! events (of the device, or of the file), and `ra` the current readahead in 512-byte sectors.
//! Events with a page index above 1,000,000 are dropped, as KML drops them. Degenerate windows
//! follow the obvious reading of the formulas: a zero range divides by 1, `n - 1 = 0` gives
//! 0, a window with one event has mean delta 0.

use crate::PageObservation;
use std::collections::BTreeMap;

/// Page indices above this are ignored (KML's filter).
pub const MAX_PAGE_INDEX: u64 = 1_000_000;

/// Accumulates one window of one stream (a device, or a file).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowStats {
    n: u64,
    mean: f64,
    m2: f64,
    min: u64,
    max: u64,
    last: Option<u64>,
    sum_abs_delta: f64,
    /// Beyond KML ([`WindowStats::shape`]): the first index, the last jump (a delta other
    /// than 0 and +1), and of the jumps after the first, how many there were and how many
    /// equalled the one before.
    first: u64,
    prev_jump: Option<i64>,
    jump_pairs: u64,
    jump_same: u64,
    /// The last `HISTORY` page-index deltas, for LEAP's trend detection.
    recent: [i64; HISTORY],
    recent_len: usize,
}

/// Deltas LEAP looks at (its access history buffer).
pub const HISTORY: usize = 32;

impl WindowStats {
    /// Add one page index.
    pub fn push(&mut self, index: u64) {
        self.n += 1;
        let x = index as f64;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
        if self.n == 1 {
            self.min = index;
            self.max = index;
            self.first = index;
        } else {
            self.min = self.min.min(index);
            self.max = self.max.max(index);
        }
        if let Some(prev) = self.last {
            self.sum_abs_delta += index.abs_diff(prev) as f64;
            self.step(index as i64 - prev as i64);
            self.recent[self.recent_len % HISTORY] = index as i64 - prev as i64;
            self.recent_len += 1;
        }
        self.last = Some(index);
    }

    /// The regularity statistics of one delta (what the probes' `add_run` does in the kernel).
    fn step(&mut self, d: i64) {
        // 0 (a page added, then accessed) and +1 (inside a run) are not jumps: a readahead
        // run's +1 steps would make any stream look regular.
        if d != 0 && d != 1 {
            if let Some(prev) = self.prev_jump {
                self.jump_pairs += 1;
                self.jump_same += u64::from(prev == d);
            }
            self.prev_jump = Some(d);
        }
    }

    /// [`WindowStats::from_sums`] with what [`WindowStats::shape`] needs (the probes keep it
    /// too): the window's first and last index, the jumps after the first and how many of them
    /// equalled the one before.
    pub fn with_shape(mut self, first: u64, last: u64, jump_pairs: u64, jump_same: u64) -> WindowStats {
        if self.n > 0 {
            self.first = first.clamp(self.min, self.max);
            self.last = Some(last.clamp(self.min, self.max));
        }
        self.jump_pairs = jump_pairs;
        self.jump_same = jump_same.min(jump_pairs);
        self
    }

    /// The same statistics from sums kept elsewhere (the in-kernel aggregation of
    /// `iolearn-probe`): `n` indices with sum `sum`, sum of squares `sum_sq`, range
    /// `min..=max`, and `sum_abs_delta` the sum of |successive differences|. Exact: the
    /// squared deviations come from integer arithmetic, not from cancelling floats. No access
    /// history, so no LEAP trend.
    pub fn from_sums(n: u64, sum: u64, sum_sq: u64, min: u64, max: u64, sum_abs_delta: u64) -> WindowStats {
        if n == 0 {
            return WindowStats::default();
        }
        // M2 = sum_sq - sum^2 / n = (n sum_sq - sum^2) / n
        let m2_times_n = (n as u128 * sum_sq as u128).saturating_sub(sum as u128 * sum as u128);
        WindowStats {
            n,
            mean: sum as f64 / n as f64,
            m2: m2_times_n as f64 / n as f64,
            min,
            max,
            // Without `with_shape`, no direction: first = last.
            first: max,
            last: Some(max),
            sum_abs_delta: sum_abs_delta as f64,
            recent: [0; HISTORY],
            recent_len: 0,
            ..WindowStats::default()
        }
    }

    /// LEAP's trend (Maruf and Chowdhury, ATC 2020): the majority delta of the recent history
    /// found by Boyer-Moore voting, checked to be a real majority; tried on the whole history,
    /// then on its most recent half, quarter, down to 4 deltas. `None`: no trend.
    pub fn trend(&self) -> Option<i64> {
        let n = self.recent_len.min(HISTORY);
        // Most recent first.
        let hist: Vec<i64> = (0..n)
            .map(|k| self.recent[(self.recent_len - 1 - k) % HISTORY])
            .collect();
        let mut w = n;
        while w >= 4 {
            let part = &hist[..w];
            let (mut cand, mut count) = (0i64, 0usize);
            for &d in part {
                if count == 0 {
                    cand = d;
                    count = 1;
                } else if d == cand {
                    count += 1;
                } else {
                    count -= 1;
                }
            }
            if part.iter().filter(|&&d| d == cand).count() * 2 > w {
                return Some(cand);
            }
            w /= 2;
        }
        None
    }

    /// Events in the window.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether the window saw nothing.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Two features beyond KML's, for what its five cannot separate:
    ///
    /// - direction: where the window ended relative to where it began, over its range,
    ///   `(last - first) / (max - min)`, in -1..=1: a forward scan near 1, a reverse scan near
    ///   -1, random reads anywhere (KML's features see readseq and readreverse alike: the same
    ///   spread, the same mean |delta|). Not the mean delta: readahead's batches ahead of a
    ///   scan and the jumps back to it cancel, and both scans showed a net movement near 0;
    /// - regularity: the share of jumps (deltas other than 0 and +1) equal to the jump before,
    ///   in 0..=1: a strided read near 1 (every jump the same), a random one near 0 (KML's see
    ///   both as a wide spread with large deltas).
    ///
    /// Regularity counts over successive pairs, so the kernel's per-CPU counts add up to it, and
    /// a run of pages added at once counts as the same pages added one by one; the kernel keeps
    /// each CPU's first and last index with their times and takes the earliest and latest.
    pub fn shape(&self) -> [f64; 2] {
        let direction = match self.last {
            Some(last) if self.max > self.min => (last as f64 - self.first as f64) / (self.max - self.min) as f64,
            _ => 0.0,
        };
        let regularity = if self.jump_pairs > 0 {
            self.jump_same as f64 / self.jump_pairs as f64
        } else {
            0.0
        };
        [direction.clamp(-1.0, 1.0), regularity]
    }

    /// KML's five features ([`WindowStats::features`]) followed by the two of
    /// [`WindowStats::shape`] and the two of [`WindowStats::scale`]: what a window gives a
    /// controller, each model taking the first five (schema `kml-readahead-v1`), the first
    /// seven (`iolearn-readahead-v2`) or the scale-free ones ([`scale_free`],
    /// `iolearn-readahead-v3`).
    pub fn features_v2(&self, ra_sectors: u64) -> RaFeatures {
        let [a, b, c, d, e] = self.features(ra_sectors);
        let [dir, reg] = self.shape();
        let [rnd, den] = self.scale();
        [a, b, c, d, e, dir, reg, rnd, den]
    }

    /// Two features that do not grow with the file or the load, for models that must hold on
    /// files and rates they never saw (KML's count events and measure distances in pages: a
    /// 2 GiB file or 400K events a second lies outside anything four db_bench workloads span):
    ///
    /// - randomness: `ln(1 + mean |delta|) / ln(2 + range)`, in 0..1: steps of a page or two
    ///   near 0 whatever the file's size, jumps across the whole range near 1;
    /// - density: `n / (n + range + 1)`, in 0..1: how many events per page of the range the
    ///   window touched (a scan adds and reads each page: near 2/3; random reads of a file far
    ///   larger than a window's reads near 0, of a small busy one high: it is a ratio of load
    ///   to size, not free of both).
    pub fn scale(&self) -> [f64; 2] {
        if self.n == 0 {
            return [0.0, 0.0];
        }
        let range = (self.max - self.min) as f64;
        let n = self.n as f64;
        [
            (1.0 + self.mean_abs_delta()).ln() / (2.0 + range).ln(),
            n / (n + range + 1.0),
        ]
    }

    /// Mean |successive difference| of the window's page indices (0 with under two).
    fn mean_abs_delta(&self) -> f64 {
        if self.n > 1 {
            self.sum_abs_delta / (self.n - 1) as f64
        } else {
            0.0
        }
    }

    /// KML's feature vector for this window with the current readahead `ra_sectors`.
    pub fn features(&self, ra_sectors: u64) -> [f64; 5] {
        let n = self.n as f64;
        let range = (self.max - self.min).max(1) as f64;
        let var_pop = if self.n > 0 { self.m2 / n } else { 0.0 };
        let var_sample = if self.n > 1 { self.m2 / (n - 1.0) } else { 0.0 };
        [
            n,
            var_pop / range,
            var_sample / range,
            self.mean_abs_delta(),
            ra_sectors as f64 / 1024.0,
        ]
    }
}

/// What the workload got in one window: the signal the guardrail ([`crate::guard`]) and the
/// online learner ([`crate::online`]) judge a readahead value by. Every field has a source on
/// both worlds; see each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Length of the window, seconds (0: no outcome measured).
    pub seconds: f64,
    /// Operations the application completed, where it reports them (the simulator's threads;
    /// on the kernel only when a signal is wired in).
    pub ops: Option<f64>,
    /// Seconds the workload's threads spent running their own code (user mode), summed over
    /// threads (simulator: the operations' CPU time and loads from mapped pages; kernel: the
    /// watched threads' `utime`). A closed-loop application progresses in proportion to it; the
    /// kernel's time on its behalf (faults, readahead, reclaim) grows with waste, so it is left
    /// out.
    pub busy_s: Option<f64>,
    /// Pages the workload asked the page cache for (reads and faults).
    pub pages_accessed: u64,
    /// Pages read into the cache (demand misses and readahead).
    pub pages_added: u64,
    /// Demand misses: accesses that had to wait for a synchronous read.
    pub misses: u64,
    /// Readahead marker hits: accesses that reached a page marked to start the next window
    /// ahead (the kernel's asynchronous readahead, `page_cache_async_ra`): a stream that ran
    /// on past what was read ahead for it. Random reads reach none, whatever the file's size.
    pub marker_hits: u64,
    /// Faults on mapped pages that reached the kernel (kernel: the probe's fault count, whose
    /// misses do not show in `misses`, no synchronous readahead call being made for them;
    /// simulator: mapped accesses to pages not yet mapped, misses among them).
    pub faults: u64,
    /// Pages the workload consumed, each counted once, where such a count exists (simulator:
    /// its accesses; kernel: the pages its reads returned, in a window `--progress auto` judges
    /// by them). `None` for mapped reads: fault-around maps pages without an event, so faults
    /// fall far short of the pages used. Against [`Outcome::pages_added`] it says whether the
    /// pages read ahead were used ([`crate::online`]).
    pub pages_used: Option<u64>,
    /// The device's readahead during the window, KiB (what the outcome is credited to).
    pub read_ahead_kb: Option<u64>,
    /// Which processes were watched, as a fingerprint of the set (`None`: a fixed set). When it
    /// changes (a process exited or started), progress before and after does not compare: the
    /// exit of a busy process is not a collapse of the value in force.
    pub population: Option<u64>,
    /// The same progress (`ops` where the application reports them, else `busy_s`) split by
    /// watched process (empty: not split). Processes sharing a device are compared each
    /// against its own vanilla: summed, a CPU-heavy scanner's time drowns a random reader's
    /// doubling ([`Outcome::relative_progress`]).
    pub by_process: BTreeMap<u32, f64>,
    /// Whether each process's progress in `by_process` is in a unit of its own (operations
    /// the application counts: the simulator's with the application's signal), where a share
    /// of the total means nothing; else all in one (pages read, CPU time; the kernel's).
    pub own_units: bool,
    /// The amount of progress one sample stands for: a progress of `p` has the sampling
    /// error of a count of `p / resolution` samples (kernel, user time: seconds per effective
    /// tick sample of the window's split, `iolearn_tune::outcome::CpuMeter`; pages read: one
    /// page; simulator: 0, exact). A process counts in [`Outcome::relative_progress`] only
    /// with [`MIN_RESOLUTION_UNITS`] of these under vanilla: its ratio would be noise.
    pub resolution: f64,
}

/// How many units of [`Outcome::resolution`] a process must have run under vanilla to be
/// judged on its own: ten samples, so its ratio is not a coin's toss, and a shell or an idle
/// helper in the watched cgroup (a tick now and then) does not outvote a database.
pub const MIN_RESOLUTION_UNITS: f64 = 10.0;

/// The least share of the watched processes' summed vanilla progress a process must have to
/// be judged on its own: counted in pages, ten of them (a helper's 40 KiB read beside a scan's
/// 90,000 pages a block) would otherwise count alone, and its ratio of 0 or 3 outvote the
/// scan's. A light random reader beside a scan (fio's three-process job: 3% each) counts.
pub const MIN_SHARE: f64 = 0.01;

impl Outcome {
    /// How fast the workload went: operations per second where the application says, else
    /// busy seconds per second. `None` when the window measured nothing (no time, or, without
    /// the application's count, no page touched).
    pub fn progress(&self) -> Option<f64> {
        // NaN seconds fail this too.
        if self.seconds.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        // Without the application's count, a window in which the workload touched no page
        // measured nothing (it paused): not a collapse of whatever value was in force.
        if self.ops.is_none() && self.pages_accessed == 0 && self.pages_added == 0 {
            return None;
        }
        let v = self.ops.or(self.busy_s)? / self.seconds;
        v.is_finite().then_some(v)
    }

    /// How the watched processes went in `tuned` relative to `vanilla`, each against its own:
    /// the mean over processes of (its progress per second in `tuned`) / (in `vanilla`),
    /// progress summed over each side's measured windows. Only processes that progressed under
    /// vanilla by [`MIN_RESOLUTION_UNITS`] of the outcomes' resolution and [`MIN_SHARE`] of their
    /// sum count (the others' ratios are noise, and summed they would still weigh). `None` with fewer than two processes
    /// split out (one process is [`Outcome::progress`]'s case) or none that counts. A process
    /// is compared only where it was watched in every measured window of both sides (where the
    /// set of processes is not the population, as for pages read, short-lived ones come and
    /// go). Equal weights, like the weighted speedup the benchmarks report: summed, a
    /// CPU-heavy range scan's user time hid a random reader's doubling, and the guardrail
    /// reverted a decision worth 1.4x. Sums rather than medians: a random reader's user time
    /// is a few clock ticks per window, and a median of three such windows is as coarse as one.
    pub fn relative_progress(tuned: &[Outcome], vanilla: &[Outcome]) -> Option<RelativeProgress> {
        let ((t, ts), (v, vs)) = Self::paired_sums(tuned, vanilla)?;
        if v.len() < 2 {
            return None; // one process: the median of its windows
        }
        let total: f64 = v.values().sum();
        let ratios: Vec<(u32, f64, f64)> = v
            .iter()
            .filter(|(_, &a)| Self::counts_alone(a, total, vanilla))
            .map(|(&pid, &a)| (pid, t[&pid] / ts / (a / vs), a / vs))
            .collect();
        if ratios.is_empty() {
            return None;
        }
        let mean = ratios.iter().map(|r| r.1).sum::<f64>() / ratios.len() as f64;
        mean.is_finite().then_some(RelativeProgress { mean, ratios })
    }

    /// [`Outcome::process_sums`] of both sides, each keeping only the processes the other has
    /// too: where the set of processes is not the population (pages read by process), one
    /// that exited or started between the sides is not compared, rather than read as nothing.
    pub(crate) fn paired_sums(tuned: &[Outcome], vanilla: &[Outcome]) -> Option<(ProcessSums, ProcessSums)> {
        let ((mut t, ts), (mut v, vs)) = (Self::process_sums(tuned)?, Self::process_sums(vanilla)?);
        v.retain(|pid, _| t.contains_key(pid));
        t.retain(|pid, _| v.contains_key(pid));
        Some(((t, ts), (v, vs)))
    }

    /// Each watched process's progress summed over the windows of `side` that measured
    /// something, and their seconds; `None` where none did. Only processes watched in every
    /// one of those windows.
    pub(crate) fn process_sums(side: &[Outcome]) -> Option<ProcessSums> {
        let mut amount: BTreeMap<u32, (f64, usize)> = BTreeMap::new();
        let (mut seconds, mut windows) = (0.0, 0);
        for o in side.iter().filter(|o| o.progress().is_some()) {
            seconds += o.seconds;
            windows += 1;
            for (&pid, &a) in &o.by_process {
                let e = amount.entry(pid).or_default();
                *e = (e.0 + a, e.1 + 1);
            }
        }
        let whole = amount
            .into_iter()
            .filter(|(_, (_, n))| *n == windows)
            .map(|(pid, (a, _))| (pid, a));
        (seconds > 0.0).then(|| (whole.collect(), seconds))
    }

    /// Whether a process whose progress over `vanilla` summed to `amount`, of `total` for all
    /// the processes compared, is judged on its own: by [`MIN_RESOLUTION_UNITS`] of the
    /// outcomes' resolution and, where every process's progress is in one unit (pages read,
    /// CPU time), [`MIN_SHARE`] of the total at least. In units of their own
    /// ([`Outcome::own_units`]) a share is no measure of weight: in the simulator a scan's 4.8
    /// million operations a second beside a random reader's 9,000 left the reader out, and the
    /// learner's one value for every file beside a per-file model halved it unseen.
    pub(crate) fn counts_alone(amount: f64, total: f64, vanilla: &[Outcome]) -> bool {
        let least = MIN_RESOLUTION_UNITS * vanilla.iter().map(|o| o.resolution).fold(0.0, f64::max);
        let own_units = vanilla.iter().any(|o| o.own_units);
        amount > 0.0 && amount >= least && (own_units || amount >= MIN_SHARE * total) && amount.is_finite()
    }

    /// Pages read per page used (readahead waste when well above 1).
    pub fn read_per_used(&self) -> f64 {
        self.pages_added as f64 / self.pages_accessed.max(1) as f64
    }

    /// Demand misses per page used.
    pub fn misses_per_used(&self) -> f64 {
        self.misses as f64 / self.pages_accessed.max(1) as f64
    }
}

/// Each process's progress summed over a side's measured windows, and their seconds
/// ([`Outcome::process_sums`]).
pub(crate) type ProcessSums = (BTreeMap<u32, f64>, f64);

/// Progress relative to vanilla, process by process ([`Outcome::relative_progress`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RelativeProgress {
    /// The mean of the ratios (1: as fast as vanilla).
    pub mean: f64,
    /// Each process: pid, its progress over its progress under vanilla, and its progress per
    /// second under vanilla.
    pub ratios: Vec<(u32, f64, f64)>,
}

/// A stream's features in a window: KML's five, then direction and regularity, then
/// randomness and density ([`WindowStats::features_v2`]). Index 4 is the readahead in force.
pub type RaFeatures = [f64; 9];

/// How many inputs [`scale_free`] gives (schema `iolearn-readahead-v3`).
pub const SCALE_FREE_WIDTH: usize = 8;

/// The inputs of a model on bounded inputs (schema `iolearn-readahead-v3`) for one stream:
/// ratios and shares rather than KML's counts and page distances, so a model trained on one
/// family of workloads can be asked about files, devices and loads it never saw
/// (`docs/tuning.md`). The stream's direction, regularity, randomness and density
/// ([`WindowStats::scale`]); the readahead in force as `log2(KiB) / 13` (4 KiB to 8 MiB in
/// 0.15..1); and what the device's page cache did in the window, from `outcome`: pages read in
/// per page accessed, as `log2(1 + x) / 6` capped at 1 (63 pages a page), and demand misses per
/// page accessed (0..1). A window that accessed nothing counts one access. On mapped reads
/// fault-around maps pages without an access event, so pages read in per page accessed reads
/// high there. Last, the share of marker hits among the accesses readahead saw (marker hits,
/// demand misses and faults; 0 where there were none, [`marker_share`]). Per device only: the
/// kernel counts the page cache per device.
pub fn scale_free(raw: &RaFeatures, outcome: &Outcome) -> [f64; SCALE_FREE_WIDTH] {
    // Index 4 is KML's sectors / 1024, so KiB = x * 512.
    let kb = (raw[4] * 512.0).max(1.0);
    let accessed = outcome.pages_accessed.max(1) as f64;
    let read_in = outcome.pages_added as f64 / accessed;
    [
        raw[5],
        raw[6],
        raw[7],
        raw[8],
        kb.log2() / 13.0,
        ((1.0 + read_in).log2() / 6.0).min(1.0),
        (outcome.misses as f64 / accessed).min(1.0),
        marker_share(outcome),
    ]
}

/// Marker hits over marker hits, demand misses and faults (0..1; 0 where there were none):
/// what tells a stream of runs longer than what is read ahead (a range scan's 200 KB from a
/// random key: the kernel's counts gave 0.44 over a run) from random reads (0.02-0.09 on
/// db_bench's random readers and fio's random mapped reads), without the file's size, which
/// density carries (`docs/benchmarks.md`). Ratios of counts: the same for a file of any size
/// and a device of any speed.
pub fn marker_share(outcome: &Outcome) -> f64 {
    let seen = outcome.marker_hits + outcome.misses + outcome.faults;
    if seen == 0 {
        0.0
    } else {
        outcome.marker_hits as f64 / seen as f64
    }
}

/// Features of one closed window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowFeatures {
    /// Window start (inclusive), ns.
    pub start_ns: u64,
    /// The device's features (`None` when no event arrived).
    pub device: Option<RaFeatures>,
    /// Each file's features, by inode.
    pub files: BTreeMap<u64, RaFeatures>,
    /// The device's access trend (LEAP), if any.
    pub device_trend: Option<i64>,
    /// Each file's access trend (LEAP), if any.
    pub file_trends: BTreeMap<u64, Option<i64>>,
    /// The process that last touched each file in the window (0: unknown).
    pub file_owners: BTreeMap<u64, u32>,
    /// Each (process, file) stream's features: one process's open file descriptions of the
    /// file (Linux keeps readahead state per description), with the file's readahead.
    pub descriptions: BTreeMap<(u32, u64), RaFeatures>,
    /// What the workload got in the window (filled in by the caller, who can see it).
    pub outcome: Outcome,
}

/// KML's feature extractor over fixed windows.
#[derive(Debug, Clone)]
pub struct KmlFeatures {
    window_ns: u64,
    start_ns: u64,
    device: WindowStats,
    files: BTreeMap<u64, WindowStats>,
    owners: BTreeMap<u64, u32>,
    descriptions: BTreeMap<(u32, u64), WindowStats>,
}

impl KmlFeatures {
    /// Windows of `window_ns` starting at `start_ns` (KML: 1 s).
    pub fn new(window_ns: u64, start_ns: u64) -> Self {
        KmlFeatures {
            window_ns: window_ns.max(1),
            start_ns,
            device: WindowStats::default(),
            files: BTreeMap::new(),
            owners: BTreeMap::new(),
            descriptions: BTreeMap::new(),
        }
    }

    /// The current window's end.
    pub fn window_end_ns(&self) -> u64 {
        self.start_ns + self.window_ns
    }

    /// Add an observation of the current window (call [`KmlFeatures::close`] first when it
    /// is past the window's end). Returns false if it was filtered out.
    pub fn observe(&mut self, ev: PageObservation) -> bool {
        if ev.index > MAX_PAGE_INDEX {
            return false;
        }
        self.device.push(ev.index);
        self.files.entry(ev.inode).or_default().push(ev.index);
        if ev.pid != 0 {
            self.owners.insert(ev.inode, ev.pid);
            self.descriptions.entry((ev.pid, ev.inode)).or_default().push(ev.index);
        }
        true
    }

    /// Close the current window: features with readahead `ra_sectors` for the device and
    /// `file_ra_sectors(inode)` for each file; the next window starts.
    pub fn close(&mut self, ra_sectors: u64, file_ra_sectors: impl Fn(u64) -> u64) -> WindowFeatures {
        let out = WindowFeatures {
            start_ns: self.start_ns,
            device: (!self.device.is_empty()).then(|| self.device.features_v2(ra_sectors)),
            files: self
                .files
                .iter()
                .map(|(&ino, w)| (ino, w.features_v2(file_ra_sectors(ino))))
                .collect(),
            device_trend: self.device.trend(),
            file_trends: self.files.iter().map(|(&ino, w)| (ino, w.trend())).collect(),
            file_owners: std::mem::take(&mut self.owners),
            descriptions: self
                .descriptions
                .iter()
                .map(|(&(pid, ino), w)| ((pid, ino), w.features_v2(file_ra_sectors(ino))))
                .collect(),
            outcome: Outcome::default(),
        };
        self.descriptions.clear();
        self.device = WindowStats::default();
        self.files.clear();
        self.start_ns += self.window_ns;
        out
    }

    /// Feed a time-ordered stream, closing windows as time passes; returns every closed
    /// window (empty ones included, so the caller sees time pass).
    pub fn run(&mut self, events: &[PageObservation], ra_sectors: u64) -> Vec<WindowFeatures> {
        let mut out = Vec::new();
        for &ev in events {
            while ev.time_ns >= self.window_end_ns() {
                out.push(self.close(ra_sectors, |_| ra_sectors));
            }
            self.observe(ev);
        }
        out
    }
}
