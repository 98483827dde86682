//! `iolearn-readahead`: the simulated readahead world.
//!
//! A readahead controller ([`iolearn_policy::controller`]) drives the simulator's page cache
//! ([`iolearn_sim::engine::Sim`]) in a closed loop: every window the simulator runs, its page
//! events become KML's features ([`iolearn_policy::readahead::KmlFeatures`]), and the
//! controller acts through [`SimKnobs`], the simulator seen as the knobs the real tuner turns
//! through sysfs and fadvise. The Python API (`_native.sim_closed_loop`), the CLI's pipeline and
//! the tests all run [`run`]; the controller comes from a spec string parsed by
//! [`ControllerSpec::parse`], the same parser the tuner uses.
//!
//! Depends on `ml`, `sim` and `policy`; nothing of the real machine (that is `tune`).
#![deny(missing_docs)]

use iolearn_policy::controller::{Companions, Misfit, ReadaheadController, ReadaheadKnobs};
pub use iolearn_policy::controller::{ControllerSpec, Scope};
use iolearn_policy::guard::Guarded;
pub use iolearn_policy::guard::{GuardConfig, GuardEvent};
use iolearn_policy::readahead::{scale_free, KmlFeatures, Outcome, RaFeatures, SCALE_FREE_WIDTH};
use iolearn_policy::steady::{Steady, MAX_HOLD, MAX_MIN_GAP};
use iolearn_policy::PageObservation;
use iolearn_sim::device::DevicePreset;
use iolearn_sim::engine::{PageEventKind, Sim, SimConfig, ThreadSpec};
use iolearn_sim::workload::{AccessMode, DbShape, WorkloadKind};

/// The simulator seen through the knobs a readahead controller turns.
pub struct SimKnobs<'a>(pub &'a mut Sim);

impl ReadaheadKnobs for SimKnobs<'_> {
    fn device_read_ahead_kb(&self) -> u64 {
        self.0.device_read_ahead_kb()
    }
    fn set_device_read_ahead_kb(&mut self, kb: u64) {
        self.0.set_device_read_ahead_kb(kb)
    }
    fn file_read_ahead_kb(&self, inode: u64) -> u64 {
        self.0.file_ra_pages(inode as u32) * 4
    }
    fn set_file_read_ahead_kb(&mut self, inode: u64, kb: u64) {
        self.0.set_file_ra_pages(inode as u32, Some(kb / 4))
    }
    fn description_read_ahead_kb(&self, pid: u32, inode: u64) -> u64 {
        match pid.checked_sub(1) {
            Some(process) if process < self.0.n_processes() => self.0.description_ra_pages(process, inode as u32) * 4,
            _ => self.file_read_ahead_kb(inode),
        }
    }
    fn set_description_read_ahead_kb(&mut self, pid: u32, inode: u64, kb: u64) {
        if let Some(process) = pid.checked_sub(1) {
            self.0.set_description_ra_pages(process, inode as u32, Some(kb / 4))
        }
    }
    fn set_new_file_read_ahead_kb(&mut self, pid: u32, kb: u64) {
        // pid = the simulator's process + 1 (0 means unknown).
        if let Some(process) = pid.checked_sub(1) {
            self.0.set_new_file_ra_pages(process, Some(kb / 4))
        }
    }
}

/// LEAP's largest prefetch window in the simulator, pages: 1 MiB, the top of the readahead
/// values the sweeps try (LEAP's swap default, 8 pages, is for remote memory).
pub const LEAP_MAX_PAGES: u64 = 256;

/// The longest simulated run, seconds (a day: times in nanoseconds stay far from overflow).
pub const MAX_SECONDS: f64 = 86_400.0;

/// The largest simulated database or page cache, MiB (1 TiB).
pub const MAX_MB: u64 = 1 << 20;

/// Check the bounds every simulated readahead run shares: `seconds` in (0, a day], database
/// and cache at most a TiB, `read_ahead_kb` at most the model format's bound. The error names
/// the argument.
pub fn check_run(seconds: f64, read_ahead_kb: u64, db_mb: u64, cache_mb: u64) -> Result<(), String> {
    if !(seconds > 0.0 && seconds <= MAX_SECONDS) {
        return Err(format!("seconds must be in (0, {MAX_SECONDS}], got {seconds:?}"));
    }
    for (name, mb) in [("db_mb", db_mb), ("cache_mb", cache_mb)] {
        if mb > MAX_MB {
            return Err(format!("{name} must be at most {MAX_MB} (1 TiB), got {mb}"));
        }
    }
    let max = iolearn_ml::format::MAX_READ_AHEAD_KB as u64;
    if read_ahead_kb > max {
        return Err(format!("read_ahead_kb must be at most {max}, got {read_ahead_kb}"));
    }
    Ok(())
}

/// One closed-loop run.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// The workloads: run concurrently (one process and database each; with `shared_db` one
    /// process each on one database), or with `back_to_back` one after the other on one
    /// database, `seconds` each.
    pub workloads: Vec<WorkloadKind>,
    /// The controller.
    pub controller: ControllerSpec,
    /// The device preset.
    pub device: DevicePreset,
    /// The device's readahead before the first decision, KiB.
    pub read_ahead_kb: u64,
    /// Length of the run (of each phase when back to back), seconds.
    pub seconds: f64,
    /// What LEAP and models decide for: the device, each file, or each process's descriptions
    /// of each file.
    pub scope: Scope,
    /// Concurrent workloads share one database (each its own process, with its own open
    /// file descriptions of the same files).
    pub shared_db: bool,
    /// Database size, MiB.
    pub db_mb: u64,
    /// Page cache, MiB.
    pub cache_mb: u64,
    /// Decision window, seconds.
    pub window_s: f64,
    /// The simulator's seed.
    pub seed: u64,
    /// Run the workloads one after the other.
    pub back_to_back: bool,
    /// Return every file's features per window instead of the device's.
    pub file_features: bool,
    /// Run the controller behind the guardrail ([`iolearn_policy::guard`]).
    pub guard: Option<GuardConfig>,
    /// A model out of its training range lets the online learner decide (per device, or for
    /// `device_model` beside a model per file) instead of holding the default.
    pub fallback_online: bool,
    /// The online learner also refines a value of the model's that the guardrail kept with a
    /// gain ([`iolearn_policy::controller::KmlController::refine`]; per device, with `guard`);
    /// per file, it decides the device's value beside the model
    /// ([`iolearn_policy::per_file_learner`]), or refines the values of `device_model`. Off
    /// unless set, where `iolearn tune readahead` refines by default wherever it applies.
    pub refine_online: bool,
    /// Per file: a model per device that decides the device's value beside the per-file model,
    /// its values refined by the learner where `refine_online` ([`ControllerSpec::build_beside`]).
    pub device_model: Option<std::path::PathBuf>,
    /// Let the controller see the application's operations per window. Off by default: the
    /// controller then judges by what the kernel tuner can see too (time not spent waiting for
    /// the device, pages read and used).
    pub app_signal: bool,
    /// Windows a new value must be asked for in a row before it is applied: 1 by default (the
    /// simulator's windows are exact); `iolearn tune readahead` holds 2 (`--hold`), which a
    /// controller's asks must survive.
    pub hold: u32,
    /// Windows between two changes of one target: 0 by default; 3 in `iolearn tune readahead`
    /// (`--min-gap`).
    pub min_gap: u64,
}

impl LoopConfig {
    /// A run of `workloads` under `controller` with the defaults of KML's evaluation (NVMe,
    /// 128 KiB to start, a 2355 MiB database over an 850 MiB cache, 1 s windows, 10 s).
    pub fn new(workloads: Vec<WorkloadKind>, controller: ControllerSpec) -> Self {
        LoopConfig {
            workloads,
            controller,
            device: DevicePreset::nvme(),
            read_ahead_kb: 128,
            seconds: 10.0,
            scope: Scope::Device,
            shared_db: false,
            db_mb: 2355,
            cache_mb: 850,
            window_s: 1.0,
            seed: 1,
            back_to_back: false,
            file_features: false,
            guard: None,
            fallback_online: false,
            refine_online: false,
            device_model: None,
            app_signal: false,
            hold: 1,
            min_gap: 0,
        }
    }

    /// Every field in range, and the controller fits the run; the error names the field.
    pub fn check(&self) -> Result<(), String> {
        if self.workloads.is_empty() {
            return Err("workloads: need at least one".into());
        }
        check_run(self.seconds, self.read_ahead_kb, self.db_mb, self.cache_mb)?;
        if let Some(g) = &self.guard {
            g.check()?;
        }
        // The rules `iolearn tune readahead` applies to its flags, named by field.
        let with = Companions {
            fallback_online: self.fallback_online,
            refine_online: self.refine_online,
            device_model: self.device_model.is_some(),
            guarded: self.guard.is_some(),
        };
        self.controller.check_companions(self.scope, with).map_err(|misfit| {
            match misfit {
                Misfit::LearnerWithoutModel { refine: false } | Misfit::LearnerAtScope { refine: false } => {
                    "fallback_online: applies to a model deciding per device, or to the model per device beside one per file (device_model)"
                }
                Misfit::LearnerWithoutModel { refine: true } | Misfit::LearnerAtScope { refine: true } | Misfit::RefineUnguarded => {
                    "refine_online: applies to a model deciding per device or per file behind the guardrail"
                }
                Misfit::DeviceModelAlone | Misfit::DeviceModelUnguarded => {
                    "device_model: decides the device's value beside a model per file behind the guardrail"
                }
            }
            .to_string()
        })?;
        if !(1..=MAX_HOLD).contains(&self.hold) {
            return Err(format!("hold must be 1 to {MAX_HOLD} windows, got {}", self.hold));
        }
        if self.min_gap > MAX_MIN_GAP {
            return Err(format!(
                "min_gap must be 0 to {MAX_MIN_GAP} windows, got {}",
                self.min_gap
            ));
        }
        if self.shared_db && self.back_to_back {
            return Err("shared_db: the workloads run concurrently; drop back_to_back".into());
        }
        if !(1e-3..=3600.0).contains(&self.window_s) {
            return Err(format!("window_s must be 0.001 to 3600, got {:?}", self.window_s));
        }
        if self.seconds < 1e-3 {
            return Err(format!("seconds must be at least 0.001, got {:?}", self.seconds));
        }
        // Back to back, every workload runs `seconds`: the whole run is bounded, not a phase.
        let phases = if self.back_to_back {
            self.workloads.len() as f64
        } else {
            1.0
        };
        if self.seconds * phases > MAX_SECONDS {
            return Err(format!(
                "seconds x workloads back to back is {:.0} s; at most {MAX_SECONDS}",
                self.seconds * phases
            ));
        }
        if self.seconds * phases / self.window_s > 1e7 {
            return Err(format!(
                "the run is {:.0} windows of window_s; at most 1e7",
                self.seconds * phases / self.window_s
            ));
        }
        // Specs made in code skip the parser: the same bounds here.
        let max = iolearn_ml::format::MAX_READ_AHEAD_KB as u64;
        match &self.controller {
            ControllerSpec::Static(kb) if *kb > max => {
                return Err(format!("controller static:{kb}: at most {max} KiB"));
            }
            ControllerSpec::Files(kbs) if kbs.iter().any(|&kb| kb > max) => {
                return Err(format!("controller files: values at most {max} KiB"));
            }
            ControllerSpec::Processes(kbs) if kbs.values().any(|&kb| kb > max) => {
                return Err(format!("controller pids: values at most {max} KiB"));
            }
            ControllerSpec::Processes(kbs) => {
                // One process per concurrent workload, pids 1, 2, ... (process + 1); back to
                // back, one.
                let n = if self.back_to_back {
                    1
                } else {
                    self.workloads.len() as u32
                };
                if let Some(pid) = kbs.keys().find(|&&pid| pid == 0 || pid > n) {
                    return Err(format!(
                        "controller {}: pid {pid}: the simulator's processes are 1 to {n} (one per concurrent workload)",
                        self.controller
                    ));
                }
            }
            _ => {}
        }
        if let ControllerSpec::Files(kbs) = &self.controller {
            if kbs.len() != self.workloads.len() || self.back_to_back {
                return Err(format!(
                    "controller files:{}: want one KiB value per concurrent workload ({})",
                    kbs.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
                    self.workloads.len()
                ));
            }
        }
        Ok(())
    }
}

/// What a closed-loop run gives.
#[derive(Debug, Clone, Default)]
pub struct LoopResult {
    /// Operations per second per workload (per phase when back to back).
    pub ops_per_s: Vec<f64>,
    /// The device's `read_ahead_kb` after each window's decision: (end of window, s; KiB).
    pub device_kb: Vec<(f64, u64)>,
    /// Features per window, row-major: `[window, f0..f8, s4..s7]` for the device (14 wide),
    /// or `[window, workload index, f0..f8, s4..s7]` per file with `file_features` (15 wide;
    /// on a shared database, per process and file). `f0..f4` are KML's, `f5..f8` direction,
    /// regularity, randomness and density ([`iolearn_policy::readahead::RaFeatures`]),
    /// `s4..s7` the scale-free inputs those are not (readahead in force, pages read in and
    /// misses per access, marker share: [`iolearn_policy::readahead::scale_free`]), so a row
    /// holds every schema's inputs.
    pub features: Vec<f64>,
    /// Width of a `features` row.
    pub width: usize,
    /// What the workload got in each window (with the application's operations, whether or
    /// not the controller saw them).
    pub outcomes: Vec<Outcome>,
    /// The guardrail's verdicts.
    pub guard_events: Vec<GuardEvent>,
    /// Windows the guardrail held vanilla (its checks and backoffs).
    pub guard_vanilla_windows: u64,
}

/// Run `cfg`: the controller decides once per window. Errors for a bad configuration or a
/// controller that cannot be built (a model file that cannot be read names the file).
pub fn run(cfg: &LoopConfig) -> Result<LoopResult, RunError> {
    cfg.check().map_err(RunError::Config)?;
    use iolearn_policy::controller::Fallback;
    let fallback = Fallback::learner(cfg.refine_online, cfg.fallback_online);
    let ctl = match &cfg.device_model {
        Some(dm) => cfg.controller.build_beside(dm, cfg.read_ahead_kb, fallback),
        None => cfg.controller.build(cfg.scope, fallback),
    }
    .map_err(RunError::Controller)?;
    Ok(run_checked(cfg, ctl))
}

/// Why a run could not start.
#[derive(Debug)]
pub enum RunError {
    /// A field out of range (the message names it).
    Config(String),
    /// The controller could not be built (a model file that cannot be read or used).
    Controller(iolearn_ml::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Config(m) => f.write_str(m),
            RunError::Controller(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RunError {}

/// [`run`] with a controller built by the caller (for controllers no spec names). Errors when
/// `cfg` does not pass [`LoopConfig::check`].
pub fn run_with(cfg: &LoopConfig, ctl: Box<dyn ReadaheadController + Send>) -> Result<LoopResult, String> {
    cfg.check()?;
    Ok(run_checked(cfg, ctl))
}

fn run_checked(cfg: &LoopConfig, ctl: Box<dyn ReadaheadController + Send>) -> LoopResult {
    let mut ctl = Guarded::new(
        ctl,
        Steady::new(cfg.hold, cfg.min_gap),
        cfg.guard.clone(),
        cfg.read_ahead_kb,
    );
    let kinds = &cfg.workloads;
    // Concurrent: one thread and database per workload. Back to back: one thread, one
    // database, each workload for `seconds`, in order.
    let mode = AccessMode::Mmap;
    let threads: Vec<ThreadSpec> = if cfg.back_to_back {
        vec![ThreadSpec {
            kind: kinds[0],
            mode,
            db_instance: 0,
            process: 0,
            max_ops: None,
        }]
    } else {
        kinds
            .iter()
            .enumerate()
            .map(|(i, &kind)| ThreadSpec {
                kind,
                mode,
                db_instance: if cfg.shared_db { 0 } else { i as u32 },
                process: i as u32,
                max_ops: None,
            })
            .collect()
    };
    let phases = if cfg.back_to_back {
        kinds.clone()
    } else {
        vec![kinds[0]]
    };
    let mut sc = SimConfig::calibration(
        threads[0].kind,
        cfg.device.clone(),
        // Behind the guardrail everything starts on vanilla, which it measures first.
        if cfg.guard.is_some() {
            cfg.read_ahead_kb
        } else {
            cfg.controller.start_kb(cfg.read_ahead_kb)
        },
    );
    sc.threads = threads;
    sc.db = DbShape::of_size(cfg.db_mb << 20);
    sc.cache_bytes = cfg.cache_mb << 20;
    sc.seed = cfg.seed;
    sc.record_events = true;
    // In range by `check`: the casts cannot saturate.
    let window_ns = ((cfg.window_s * 1e9) as u64).max(1);
    let phase_ns = (cfg.seconds * 1e9) as u64;
    let end_ns = phase_ns * phases.len() as u64;

    let mut sim = Sim::new(sc);
    match cfg.controller {
        ControllerSpec::LeapPrefetch => sim.set_leap(Some(LEAP_MAX_PAGES), true),
        ControllerSpec::LeapPrefetchUnmarked => sim.set_leap(Some(LEAP_MAX_PAGES), false),
        _ => {}
    }
    if let ControllerSpec::Files(kbs) = &cfg.controller {
        // Each workload's own value: on its files, or on a shared database its process's
        // descriptions of every file (the per-description oracle).
        for f in 0..sim.n_files() {
            if cfg.shared_db {
                for (p, &kb) in kbs.iter().enumerate() {
                    sim.set_description_ra_pages(p as u32, f, Some(kb / 4));
                }
            } else {
                let kb = kbs[sim.instance_of(f) as usize];
                sim.set_file_ra_pages(f, Some(kb / 4));
            }
        }
    }
    let mut k = KmlFeatures::new(window_ns, 0);
    let mut out = LoopResult {
        width: 1 + usize::from(cfg.file_features) + 9 + SCALE_FREE_WIDTH - 4,
        ..LoopResult::default()
    };
    let mut t = 0;
    let mut w = 0usize;
    let mut phase = 0usize;
    let mut ops_at_phase_start = 0u64;
    let mut before = sim.thread_stats();
    while t < end_ns {
        let phase_end = (phase as u64 + 1) * phase_ns;
        let t0 = t;
        t = (t + window_ns).min(phase_end);
        sim.run_until(t);
        let secs = (t - t0) as f64 / 1e9;
        let now = sim.thread_stats();
        let mut outcome = Outcome {
            seconds: secs,
            read_ahead_kb: Some(sim.device_read_ahead_kb()),
            ..Outcome::default()
        };
        let (mut ops, mut busy) = (0u64, 0.0);
        // Each process's progress, in the unit the guardrail judges by (pids as the probes
        // see them: process + 1).
        let mut by_process = std::collections::BTreeMap::new();
        for (a, b) in before.iter().zip(&now) {
            ops += b.ops - a.ops;
            outcome.misses += b.misses - a.misses;
            outcome.marker_hits += b.marker_hits - a.marker_hits;
            outcome.faults += b.faults - a.faults;
            // User-mode time, as the tuner measures it on the kernel.
            let user_s = (b.user_ns - a.user_ns) as f64 / 1e9;
            busy += user_s;
            let amount = if cfg.app_signal { (b.ops - a.ops) as f64 } else { user_s };
            *by_process.entry(b.process + 1).or_insert(0.0) += amount;
        }
        before = now;
        outcome.busy_s = Some(busy);
        let events = sim.drain_events();
        for e in &events {
            match e.kind {
                PageEventKind::Added => outcome.pages_added += 1,
                PageEventKind::Accessed => outcome.pages_accessed += 1,
            }
        }
        // The simulator sees every page its threads touch, mapped or read: each access is a use.
        outcome.pages_used = Some(outcome.pages_accessed);
        for e in events {
            k.observe(PageObservation {
                time_ns: e.time_ns,
                inode: e.file as u64,
                index: e.index,
                pid: e.process + 1,
            });
        }
        let dev_ra = sim.device_read_ahead_kb() * 2; // sectors
        let files: Vec<u64> = (0..sim.n_files()).map(|f| sim.file_ra_pages(f) * 8).collect();
        let mut win = k.close(dev_ra, |ino| files.get(ino as usize).copied().unwrap_or(dev_ra));
        out.outcomes.push(Outcome {
            ops: Some(ops as f64),
            ..outcome.clone()
        });
        win.outcome = Outcome {
            ops: cfg.app_signal.then_some(ops as f64),
            by_process,
            own_units: cfg.app_signal,
            ..outcome
        };
        // A stream's features, then the scale-free inputs that are not among them.
        let row = |out: &mut Vec<f64>, f: &RaFeatures| {
            out.extend(f);
            out.extend(&scale_free(f, &win.outcome)[4..]);
        };
        if cfg.file_features && cfg.shared_db {
            // Both workloads read every file: a row per process's stream of each file.
            for (&(pid, _), f) in &win.descriptions {
                out.features.push(w as f64);
                out.features.push(pid.saturating_sub(1) as f64);
                row(&mut out.features, f);
            }
        } else if cfg.file_features {
            for (&ino, f) in &win.files {
                out.features.push(w as f64);
                out.features.push(sim.instance_of(ino as u32) as f64);
                row(&mut out.features, f);
            }
        } else if let Some(f) = &win.device {
            out.features.push(w as f64);
            row(&mut out.features, f);
        }
        ctl.decide(&win, &mut SimKnobs(&mut sim));
        out.device_kb.push((t as f64 / 1e9, sim.device_read_ahead_kb()));
        w += 1;
        if cfg.back_to_back && t == phase_end {
            let done = sim.thread_stats()[0].ops;
            out.ops_per_s
                .push((done - ops_at_phase_start) as f64 / (phase_ns as f64 / 1e9));
            ops_at_phase_start = done;
            phase += 1;
            if let Some(&next) = phases.get(phase) {
                sim.switch_workload(0, next);
            }
        }
    }
    out.guard_events = ctl.take_events();
    out.guard_vanilla_windows = ctl.vanilla_windows;
    if !cfg.back_to_back {
        let secs = end_ns as f64 / 1e9;
        out.ops_per_s = sim.thread_stats().iter().map(|s| s.ops as f64 / secs).collect();
    }
    out
}
