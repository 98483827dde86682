//! `iolearn-tune`: KML's readahead tuner on a stock kernel.
//!
//! Once per window: the eBPF probes' sums ([`iolearn_probe`]) become KML's features
//! ([`iolearn_policy::readahead`], the extractor the simulator uses), the same
//! controller as in the simulator (a KML model, LEAP or a static value, named by
//! [`ControllerSpec`]) decides, through [`Steady`] (hysteresis and a rate
//! limit), and [`linux::LinuxKnobs`] acts through sysfs and `fadvise`. The original settings
//! are journalled before the first change and restored on exit, on SIGINT/SIGTERM/SIGHUP, on a
//! panic, and on the next start after a crash ([`journal`]).
#![deny(missing_docs)]

pub mod journal;
pub mod linux;
pub mod outcome;
pub mod prefetch;
pub mod report;
pub mod sampling;
pub mod testbed;

use iolearn_policy::controller::{Companions, Fallback, Misfit, ReadaheadController, ReadaheadKnobs};
pub use iolearn_policy::controller::{ControllerSpec, Scope};
pub use iolearn_policy::guard::GuardConfig;
use iolearn_policy::guard::{Arm, GuardEventKind, Guarded};
use iolearn_policy::readahead::{scale_free, Outcome, WindowFeatures, WindowStats, MIN_RESOLUTION_UNITS};
use iolearn_policy::steady::Steady;
use iolearn_probe::{Probe, ProbeConfig, Window};
use iolearn_safeio::lock::Lock;
use journal::Journal;
use linux::{Action, LinuxKnobs};
use report::{serve_metrics, Logger, Metrics};
pub use sampling::SamplingConfig;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{debug, error, info, warn};

/// How to tune.
#[derive(Debug, Clone)]
pub struct TuneConfig {
    /// Block device name (`loop0`).
    pub device: String,
    /// The controller: a model file (schema `kml-readahead-v1`, `iolearn-readahead-v2` or
    /// `iolearn-readahead-v3`),
    /// `online`, `static:KB`,
    /// `pids:PID=KB,...` or `vanilla` (parsed by [`ControllerSpec::parse`], as in the
    /// simulator).
    pub controller: ControllerSpec,
    /// What a model decides for: the device, each file, or each watched process's
    /// descriptions of each file.
    pub scope: Scope,
    /// Processes to watch.
    pub pids: Vec<u32>,
    /// Also watch every process of this cgroup (its `cgroup.procs`, re-read every tick).
    pub cgroup: Option<PathBuf>,
    /// Decision window (KML: 1 s).
    pub interval: Duration,
    /// Windows a new value must be asked for in a row before it is applied.
    pub hold: u32,
    /// Windows between two changes of one target.
    pub min_gap: u64,
    /// Readahead when the model's input is outside its training range.
    pub fallback_kb: u64,
    /// Out of the model's training range, let the online learner decide instead of setting
    /// `fallback_kb` (per device, with processes to watch).
    pub fallback_online: bool,
    /// Let the online learner refine a value of the model's that the guardrail kept with a
    /// gain ([`iolearn_policy::controller::KmlController::refine`]); the learner then also
    /// decides out of the training range, as with `fallback_online`. Per device, with the
    /// guardrail and processes to watch; per file, asked for, the learner decides the
    /// device's value beside the model ([`iolearn_policy::per_file_learner`]). `None` (the
    /// default): per device, wherever that holds and the
    /// run changes settings (a model per device, the guardrail on, progress measured, not a
    /// dry run; [`refines`]); `Some(true)` asks for it and is refused where it cannot apply.
    pub refine_online: Option<bool>,
    /// Per file: a model per device that decides the device's value beside the per-file model
    /// (its values refined as per device unless `refine_online` is `Some(false)`), whose values
    /// are in force while the device is at vanilla ([`iolearn_policy::per_file_learner`]).
    pub device_model: Option<PathBuf>,
    /// The guardrail ([`iolearn_policy::guard`]): the controller's decisions are kept only
    /// while the watched processes progress at least as well as on vanilla. `None`: off. It
    /// needs processes to watch (`pids` or `cgroup`); without them it is off, and says so.
    pub guard: Option<GuardConfig>,
    /// What the guardrail and the online learner count as the watched processes' progress.
    pub progress: outcome::Progress,
    /// Decide and log, change nothing.
    pub dry_run: bool,
    /// Tune the disk that holds `/` too (refused otherwise: a mistake there slows everything).
    pub allow_system_disk: bool,
    /// Where the journal lives.
    pub state_dir: PathBuf,
    /// Stop after this long (`None`: until signalled).
    pub duration: Option<Duration>,
    /// Serve Prometheus metrics here (`127.0.0.1:9633`).
    pub metrics: Option<String>,
    /// Observing only part of a window after one of nothing but cache hits
    /// ([`sampling`]).
    pub sampling: SamplingConfig,
    /// Logging.
    pub log: Logger,
}

impl TuneConfig {
    /// Defaults for `device` and `controller`.
    pub fn new(device: &str, controller: ControllerSpec) -> TuneConfig {
        TuneConfig {
            device: device.strip_prefix("/dev/").unwrap_or(device).to_string(),
            controller,
            scope: Scope::Device,
            pids: Vec::new(),
            cgroup: None,
            interval: Duration::from_secs(1),
            hold: 2,
            min_gap: 3,
            fallback_kb: 128,
            fallback_online: false,
            refine_online: None,
            device_model: None,
            guard: Some(GuardConfig::default()),
            progress: outcome::Progress::Cpu,
            dry_run: false,
            allow_system_disk: false,
            state_dir: PathBuf::from("/run/iolearn"),
            duration: None,
            metrics: None,
            sampling: SamplingConfig::default(),
            log: Logger {
                json: false,
                verbose: false,
            },
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The counters at the end.
    pub metrics: Metrics,
    /// The device's value before and after (restored) the run.
    pub original_kb: u64,
    /// The value found after restoring.
    pub restored_kb: u64,
    /// Decision log: (window, target, KiB) of every applied change.
    pub changes: Vec<(u64, String, u64)>,
    /// The guardrail's verdicts, one line each.
    pub guard: Vec<String>,
    /// What LEAP did (controller `leap-prefetch-unmarked`).
    pub prefetch: Option<prefetch::PrefetchStats>,
}

static STOP: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

/// Route SIGINT, SIGTERM and SIGHUP to a flag the loop checks (`signal-hook`); returns the
/// flag. Registering twice returns the same flag.
pub fn install_signal_handlers() -> &'static AtomicBool {
    STOP.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ] {
            // Registration fails only for signals that cannot be caught (SIGKILL, SIGSTOP).
            signal_hook::flag::register(sig, flag.clone()).expect("a catchable signal");
        }
        flag
    })
    .as_ref()
}

/// A device name as `/sys/class/block` lists it (`loop0`, `nvme0n1p2`): one path component,
/// so that no name reaches outside that directory.
pub fn check_device_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.!:".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--device: {} is not a block device name (like loop0 or /dev/nvme0n1)",
            iolearn_safeio::excerpt(name, 64)
        ))
    }
}

/// Every `--pid` must name a live process: a typo would otherwise watch nothing, silently.
pub fn check_pids(pids: &[u32]) -> Result<(), String> {
    match pids
        .iter()
        .find(|&&p| p == 0 || !Path::new(&format!("/proc/{p}")).exists())
    {
        Some(p) => Err(format!("--pid {p}: no such process")),
        None => Ok(()),
    }
}

/// The block devices that hold `/`: the one mounted there and, when it is a partition, its
/// disk (`vda1`, `vda`). The tuner leaves them alone unless told otherwise.
pub fn system_disks() -> Vec<String> {
    let Ok(dev) = iolearn_probe::DeviceId::of_path(Path::new("/")) else {
        return Vec::new();
    };
    let sys = PathBuf::from(format!("/sys/dev/block/{}:{}", dev.major, dev.minor));
    let Ok(link) = std::fs::read_link(&sys) else {
        return Vec::new();
    };
    let mut names: Vec<String> = link
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .into_iter()
        .collect();
    if sys.join("partition").exists() {
        if let Some(disk) = link.parent().and_then(Path::file_name) {
            names.push(disk.to_string_lossy().into_owned());
        }
    }
    names
}

/// The system-wide lock on `device`'s readahead: one tuner per device, whatever its
/// `--state-dir`. The lock's note names the holder's journal, so that a tuner that died is
/// undone by the next one even if that one keeps its journal elsewhere.
pub fn lock_device(device: &str) -> Result<Lock, String> {
    check_device_name(device)?;
    let dev = iolearn_probe::DeviceId::from_name(device).map_err(|e| e.to_string())?;
    let name = format!("readahead-{}:{}.lock", dev.major, dev.minor);
    Lock::acquire(&name, false).map_err(|e| e.to_string())?.ok_or_else(|| {
        format!(
            "another iolearn tuner is tuning {device} (it holds {})",
            iolearn_safeio::lock::run_dir().join(&name).display()
        )
    })
}

/// Holding `lock` (so no live tuner owns the device), restore from any journal a dead tuner
/// left for `device`: the one the lock names and the one in `state_dir`. Returns what was
/// restored (`None`: nothing to do).
pub fn restore_left_over(state_dir: &Path, device: &str, lock: &mut Lock) -> Result<Option<Journal>, String> {
    let mut paths = vec![Journal::path_for(state_dir, device)];
    let noted = lock.note().map_err(|e| e.to_string())?;
    let noted = noted.trim();
    if !noted.is_empty() && !paths.iter().any(|p| p.as_os_str() == noted) {
        paths.insert(0, PathBuf::from(noted));
    }
    let mut restored = None;
    for path in paths {
        if !path.exists() {
            continue;
        }
        let j = Journal::load(&path).map_err(|e| e.to_string())?;
        if j.device != device {
            return Err(format!(
                "{}: a journal of {}, not of {device}",
                path.display(),
                j.device
            ));
        }
        let problems = j.restore();
        if !problems.is_empty() {
            return Err(format!("restoring from {}: {}", path.display(), problems.join("; ")));
        }
        restored = Some(j);
    }
    lock.set_note("").map_err(|e| e.to_string())?;
    Ok(restored)
}

/// Puts the original settings back when dropped (normal end, error, or panic).
struct Restorer {
    journal: Option<Journal>,
    /// Released after the restore (fields drop after `Drop::drop`).
    _lock: Option<Lock>,
}

impl Drop for Restorer {
    fn drop(&mut self) {
        if let Some(j) = self.journal.take() {
            // Before the restore, which removes the journal: what it will not reach.
            let stranded = j.stranded();
            let problems = j.restore();
            let (device, kb, files) = (&j.device, j.original_kb, j.files.len());
            if !stranded.is_empty() {
                let list: Vec<String> = stranded.iter().map(|(pid, ino)| format!("{pid}:{ino}")).collect();
                warn!(
                    event = %"stranded",
                    descriptions = stranded.len(),
                    pid_inode = %list.join(","),
                    effect = %"mapped by a process that closed the descriptor: they keep the tuned readahead until the process unmaps the file; nothing in user space can reach them"
                );
            }
            if problems.is_empty() {
                info!(event = %"restored", device = %device, read_ahead_kb = kb, files);
            } else {
                error!(event = %"restored", device = %device, read_ahead_kb = kb, files, problems = %problems.join("; "));
            }
        }
    }
}

/// Whether the online learner refines the model's values in this run: as asked, or by default
/// wherever it applies (a model deciding per device, the guardrail on, progress `measured`,
/// settings changed). On the kernel's test family the refined tuner made 94-105% of the static
/// oracle's gain on all eight workloads where that gain passes 10% and held vanilla's floor on
/// the rest (docs/benchmarks.md, "Refined on the workload: minute-long runs"); the model alone
/// left up to a fifth of the gain where it scored two values alike.
pub fn refines(cfg: &TuneConfig, measured: bool) -> bool {
    cfg.refine_online.unwrap_or_else(|| {
        matches!(cfg.controller, ControllerSpec::Model(_))
            && cfg.scope == Scope::Device
            && cfg.guard.is_some()
            && measured
            && !cfg.dry_run
    })
}

/// Take `cfg.device` for tuning, once the device and the processes are checked: its lock held
/// (a dry run changes nothing, so it neither takes the device nor undoes a crashed tuner),
/// whatever a dead tuner left restored, its knobs (given the processes to watch: the named
/// ones and the cgroup's), and the journal that puts the original settings back when the
/// [`Restorer`] drops.
fn take_device(cfg: &TuneConfig) -> Result<(LinuxKnobs, Restorer), String> {
    check_pids(&cfg.pids)?;
    check_device_name(&cfg.device)?;
    if !cfg.dry_run && !cfg.allow_system_disk && system_disks().contains(&cfg.device) {
        return Err(format!(
            "--device {}: holds / (the system disk); pass --allow-system-disk to tune it anyway",
            cfg.device
        ));
    }
    let mut lock = if cfg.dry_run {
        None
    } else {
        Some(lock_device(&cfg.device)?)
    };
    if let Some(lock) = &mut lock {
        if let Some(j) = restore_left_over(&cfg.state_dir, &cfg.device, lock)? {
            warn!(
                event = %"restored_after_crash",
                device = %j.device,
                read_ahead_kb = j.original_kb,
                tuner_pid = j.tuner_pid
            );
        }
    }
    let mut knobs = LinuxKnobs::new(&cfg.device, cfg.dry_run)?;
    knobs.pids = cfg.pids.clone();
    if let Some(cg) = &cfg.cgroup {
        knobs.pids.extend(cgroup_pids(cg)?);
    }
    let journal = match &mut lock {
        None => None,
        Some(lock) => {
            // The lock names the journal before the journal exists: a crash in between leaves
            // a note naming nothing, never a journal nobody finds.
            let path = Journal::path_for(&cfg.state_dir, &cfg.device);
            let at = std::path::absolute(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            lock.set_note(&format!("{}\n", at.display()))
                .map_err(|e| e.to_string())?;
            Some(Journal::begin(&cfg.state_dir, &cfg.device)?)
        }
    };
    Ok((knobs, Restorer { journal, _lock: lock }))
}

/// Tune until `stop` is set or the duration passes.
pub fn run(cfg: &TuneConfig, stop: &AtomicBool) -> Result<Summary, String> {
    cfg.log.install();
    // The processes a `pids:` controller names are watched: their files are what it sets.
    if let ControllerSpec::Processes(kb) = &cfg.controller {
        if let Err(e) = check_pids(&kb.keys().copied().collect::<Vec<_>>()) {
            return Err(format!(
                "controller {}: {}",
                cfg.controller,
                e.replace("--pid ", "process ")
            ));
        }
        if cfg.scope != Scope::Device {
            return Err(format!(
                "controller {}: sets each process's own value; drop --{}",
                cfg.controller,
                cfg.scope.name()
            ));
        }
    }
    let named;
    let cfg = match &cfg.controller {
        ControllerSpec::Processes(kb) if kb.keys().any(|p| !cfg.pids.contains(p)) => {
            let mut c = cfg.clone();
            c.pids.extend(kb.keys().filter(|p| !cfg.pids.contains(p)));
            named = c;
            &named
        }
        _ => cfg,
    };
    // Inputs first: a bad model or option fails before anything on the machine is touched.
    // The guardrail and the learner judge by the watched processes' progress, or by the
    // application's own count of operations.
    let watched = !cfg.pids.is_empty() || cfg.cgroup.is_some();
    let mut ops_counter = match &cfg.progress {
        outcome::Progress::Ops(path) => Some(outcome::OpsCounter::new(path)),
        _ => None,
    };
    // Read once now: a count that cannot be read fails the start, before anything is touched
    // (a misspelt path would otherwise leave every window unmeasured and every decision
    // unjudged).
    if let Some(c) = ops_counter.as_mut() {
        if let outcome::Reading::Failed { error, .. } = c.take(OPS_START_WAIT) {
            return Err(format!("--progress {}: {error}", cfg.progress.name()));
        }
    }
    let measured = watched || ops_counter.is_some();
    match cfg.controller {
        ControllerSpec::Files(_) => {
            return Err(format!(
                "controller {}: per-workload values exist only in the simulator; use static:KB",
                cfg.controller
            ))
        }
        ControllerSpec::LeapPrefetch => {
            return Err(
                "controller leap-prefetch: LEAP as released marks the pages it prefetches to count its hits, \
                 which nothing in user space can do; use leap-prefetch-unmarked (LEAP keeps its pages itself)"
                    .into(),
            )
        }
        ControllerSpec::LeapPrefetchUnmarked => return prefetch::run_leap(cfg, stop),
        ControllerSpec::Leap => {
            return Err(
                "controller leap: needs the access history, which the kernel probes do not keep yet; \
                 it runs in the simulator (iolearn readahead)"
                    .into(),
            )
        }
        ControllerSpec::Online if cfg.scope != Scope::Device => {
            return Err(format!(
                "controller online: learns the device's value; drop --{}",
                cfg.scope.name()
            ))
        }
        ControllerSpec::Online if !measured => {
            return Err(
                "controller online: learns from the watched processes' progress; name them with --pid or --cgroup, \
                 or give the application's count with --progress ops:PATH"
                    .into(),
            )
        }
        _ => {}
    }
    if let Some(g) = &cfg.guard {
        g.check()?;
    }
    cfg.sampling.check()?;
    let with = Companions {
        fallback_online: cfg.fallback_online,
        refine_online: cfg.refine_online == Some(true),
        device_model: cfg.device_model.is_some(),
        guarded: cfg.guard.is_some(),
    };
    let flag = |refine: bool| if refine { "--refine-online" } else { "--fallback-online" };
    let progress_needed = "the processes' progress: --pid or --cgroup, or --progress ops:PATH";
    let device_model_needs = "--device-model: the guardrail tells the two models' values apart; it needs the \
        processes' progress (--pid or --cgroup, or --progress ops:PATH) and no --no-guard";
    // The rules the simulator shares (`ControllerSpec::check_companions`), then this run's own:
    // the learner and a second model are judged by measured progress, and a dry run applies
    // no value for the learner to measure.
    cfg.controller.check_companions(cfg.scope, with).map_err(|misfit| match misfit {
        Misfit::LearnerWithoutModel { refine } => {
            format!("{}: applies to a model, not to {}", flag(refine), cfg.controller)
        }
        Misfit::LearnerAtScope { refine } => {
            let hint = if cfg.scope == Scope::File {
                " (with --per-file, --refine-online runs the learner beside the model)"
            } else {
                ""
            };
            format!(
                "{}: the learner sets the device's value; drop --{}{hint}",
                flag(refine),
                cfg.scope.name()
            )
        }
        Misfit::RefineUnguarded => {
            "--refine-online: the learner refines what the guardrail kept; drop --no-guard".to_string()
        }
        Misfit::DeviceModelAlone => format!(
            "--device-model: decides the device's value beside a model per file; add --per-file and --model ({} is not)",
            cfg.device_model.as_deref().unwrap_or(Path::new("")).display()
        ),
        Misfit::DeviceModelUnguarded => device_model_needs.to_string(),
    })?;
    for (on, refine) in [(with.fallback_online, false), (with.refine_online, true)] {
        if on && !measured {
            return Err(format!("{}: the learner needs {progress_needed}", flag(refine)));
        }
    }
    if with.refine_online && cfg.dry_run {
        return Err("--refine-online: a dry run applies no value, so the learner measures none; drop --dry-run".into());
    }
    if with.device_model && !measured {
        return Err(device_model_needs.into());
    }
    // Beside a model per file, the device model's values are refined as they would be per
    // device (checked above: the guardrail on, progress measured).
    let (refine, inner) = match &cfg.device_model {
        Some(dm) => {
            let refine = cfg.refine_online.unwrap_or(!cfg.dry_run);
            let fallback = Fallback::learner(refine, cfg.fallback_online);
            (refine, cfg.controller.build_beside(dm, cfg.fallback_kb, fallback))
        }
        None => {
            let refine = refines(cfg, measured);
            let fallback = Fallback::learner(refine, cfg.fallback_online).unwrap_or(Fallback::Kb(cfg.fallback_kb));
            (refine, cfg.controller.build(cfg.scope, Some(fallback)))
        }
    };
    let inner = inner.map_err(|e| e.to_string())?;
    let labels = inner.labels();
    if cfg.scope != Scope::Device && !watched {
        return Err(format!(
            "{} tuning needs the processes to tune: --pid or --cgroup",
            cfg.scope.name()
        ));
    }
    let (mut knobs, mut restorer) = take_device(cfg)?;
    let pids = knobs.pids.clone();
    knobs.every_process = cfg.pids.is_empty() && cfg.cgroup.is_none();
    let mut probe = Probe::start(&ProbeConfig {
        device: Some(knobs.device()),
        pids: pids.clone(),
        filter_pids: !cfg.pids.is_empty() || cfg.cgroup.is_some(),
        count_reads: cfg.progress == outcome::Progress::Auto,
        ..Default::default()
    })
    .map_err(|e| e.to_string())?;
    // Kernel CPU of the probes, for the overhead report (best effort).
    let _ = probe.enable_stats();
    let original_kb = knobs.device_read_ahead_kb();
    let page = Arc::new(Mutex::new(String::new()));
    if let Some(addr) = &cfg.metrics {
        let bound = serve_metrics(addr, page.clone()).map_err(|e| format!("metrics on {addr}: {e}"))?;
        info!(event = %"metrics", url = %format!("http://{bound}/metrics"));
    }
    info!(
        event = %"start",
        device = %cfg.device,
        controller = %cfg.controller,
        mode = %cfg.scope.name(),
        read_ahead_kb = original_kb,
        pids = ?pids,
        progress = %cfg.progress.name(),
        fallback_online = cfg.fallback_online,
        refine_online = refine,
        device_model = %cfg.device_model.as_deref().map_or(String::new(), |p| p.display().to_string()),
        dry_run = cfg.dry_run
    );
    // With no process watched and no count of the application's the guardrail has nothing to
    // measure.
    let guard = cfg.guard.clone().filter(|_| measured);
    let guarded = guard.is_some();
    if cfg.guard.is_some() && !measured && cfg.controller != ControllerSpec::Vanilla {
        warn!(
            event = %"guard_off",
            reason = %"no processes to measure: name them with --pid or --cgroup (or give --progress ops:PATH) to keep the guardrail"
        );
    }
    let mut controller = Guarded::new(inner, Steady::new(cfg.hold, cfg.min_gap), guard, original_kb);
    let mut cpu = outcome::CpuMeter::default();
    let mut m = Metrics {
        device_read_ahead_kb: original_kb,
        ..Default::default()
    };
    let mut summary = Summary {
        original_kb,
        ..Default::default()
    };
    // The endpoint serves the (zero) metrics from the start, never an empty page.
    if let Ok(mut p) = page.lock() {
        *p = m.render(&cfg.device);
    }
    let start = Instant::now();
    let mut next_window = start + cfg.interval;
    let tick = Duration::from_millis(100).min(cfg.interval);
    let mut window_ix = 0u64;
    let mut modes_failed = false;
    knobs.refresh();
    note_modes(&mut probe, &mut knobs, &mut modes_failed);
    let first = probe.window().map_err(|e| e.to_string())?; // start clean
    let (mut counters_before, mut reads_before) = (first.counters, first.pages_read_by_process);
    if watched {
        cpu.take(&knobs.pids, &probe.task_times().unwrap_or_default());
    }
    // The count at the start; then a window waits for it a quarter of its length at most.
    let ops_wait = (cfg.interval / 4).clamp(Duration::from_millis(20), Duration::from_millis(250));
    if let Some(c) = ops_counter.as_mut() {
        read_ops(c, 0, ops_wait);
    }
    let mut window_start = Instant::now();
    // A sampled window: the programs observe until `slice.1` (from `slice.0`), then detach;
    // `observed` is how long they watched. `sampling` goes off for good if the programs once
    // failed to attach again.
    let mut slice: Option<(Instant, Instant)> = None;
    let mut observed: Option<Duration> = None;
    let mut sampling = cfg.sampling;
    let mut watch = sampling::Watch::default();
    let mut kind = sampling::Next::Whole;
    let mut last_whole = None;
    let mut rested_vanilla = 0u64;
    let abort = cfg.guard.as_ref().map_or(GuardConfig::default().abort, |g| g.abort);
    let mut events_seen = 0u64;
    // `--progress auto`: whether the last window was judged by the pages read.
    let mut by_reads = false;
    while !stop.load(Ordering::SeqCst) && cfg.duration.is_none_or(|d| start.elapsed() < d) {
        let nap = slice.map_or(tick, |(_, end)| end.saturating_duration_since(Instant::now()).min(tick));
        std::thread::sleep(nap);
        if let Some((from, end)) = slice {
            if Instant::now() >= end {
                match midway(|| probe.observe_page_cache(false)) {
                    Ok(t) => observed = Some(t.saturating_duration_since(from)),
                    Err(e) => {
                        // Watched whole from now on (the programs attached again, all of them:
                        // a tuner that cannot watch must stop).
                        warn!(event = %"sampling_off", error = %e, effect = %"every window is watched whole from now on");
                        sampling.share = 1.0;
                        midway(|| probe.observe_page_cache(true))?;
                    }
                }
                slice = None;
            }
        }
        // New processes of the cgroup, and files opened since the last tick.
        if let Some(cg) = &cfg.cgroup {
            for pid in follow_cgroup(cg, &cfg.pids, &mut knobs.pids, &mut probe) {
                knobs.forget_process(pid);
                controller.steady.forget_process(pid);
                controller.forget_process(pid);
            }
        }
        // Files opened since the last tick may get their process's value at the flush, and a
        // window's decision may push into every open file: the applications' advice is read
        // first (once a tick at most), so that the push keeps it.
        let window_due = Instant::now() >= next_window;
        if knobs.refresh() > 0 || window_due {
            note_modes(&mut probe, &mut knobs, &mut modes_failed);
        }
        knobs.flush();
        // Journalled at once: a crash before the window's end must not lose what this tick's
        // pushes (files opened since the last scan) changed.
        if let Some(j) = restorer.journal.as_mut() {
            j.note_files(&std::mem::take(&mut knobs.touched))?;
        }
        if !window_due {
            continue;
        }
        next_window += cfg.interval;
        window_ix += 1;
        // The guardrail forgets what closed, as the knobs did at the scan.
        if let Some(open) = knobs.open_targets() {
            controller.forget_closed(open);
        }
        let w = probe.window().map_err(|e| e.to_string())?;
        knobs.note_positions(
            w.descriptions
                .iter()
                .map(|d| (d.sums.tgid, d.ino, d.sums.first, d.sums.last)),
        );
        let window_s = window_start.elapsed().as_secs_f64();
        // The application's count over the window, read first: it runs on while the probe's
        // task times are read.
        let ops = ops_counter.as_mut().map(|c| read_ops(c, window_ix, ops_wait));
        // The processes' progress over the same window (read before the re-attach and the
        // decision, which take milliseconds at short intervals).
        // A failed reading leaves the window unmeasured (and the meter as it was), rather
        // than stopping a tuner that can still restore what it set.
        let busy = match watched.then(|| probe.task_times()) {
            Some(Ok(times)) => cpu.measured(&knobs.pids, &times),
            Some(Err(e)) => {
                cpu.lost();
                warn!(event = %"cpu_unmeasured", error = %e, effect = %"this window's progress and the next are not measured");
                None
            }
            None => None,
        };
        // The window was sampled if its slice closed (one still open watched all of it).
        slice = None;
        let k = observed.take().map_or(1.0, |d| window_s / d.as_secs_f64().max(1e-9));
        let whole = k <= 1.0;
        let resting = std::mem::replace(&mut kind, sampling::Next::Whole) == sampling::Next::Rest;
        let seen = w.counters.since(&counters_before);
        events_seen += seen.pages_added + seen.pages_accessed;
        let counted = seen.scaled(k);
        counters_before = w.counters;
        let reads_by_process = pages_since(&w.pages_read_by_process, &reads_before, k);
        reads_before = w.pages_read_by_process.clone();
        window_start = Instant::now();
        // The next window: sampled after one of nothing but hits, else watched whole.
        let attached = match midway(|| probe.observe_page_cache(true)) {
            Ok(t) => t,
            Err(e) if sampling.share < 1.0 => {
                // Once more, then without sampling: a tuner that cannot watch must stop.
                warn!(event = %"sampling_off", error = %e, effect = %"every window is watched whole from now on");
                sampling.share = 1.0;
                midway(|| probe.observe_page_cache(true))?
            }
            Err(e) => return Err(e),
        };
        let mut features = window_features(&w, &knobs, whole);
        by_reads = cfg.progress == outcome::Progress::Auto && outcome::by_reads(&counted, by_reads);
        features.outcome = outcome::outcome(
            &counted,
            window_s,
            busy,
            knobs.device_read_ahead_kb(),
            by_reads,
            &reads_by_process,
        );
        if let (Some(c), Some(ops)) = (&ops_counter, ops) {
            c.judge(&mut features.outcome, ops);
        }
        let (decisions_before, fallbacks_before, act_before, held_before, actions_before) = (
            controller.decisions().len(),
            controller.fallbacks(),
            knobs.act_ns,
            controller.steady.held_back,
            knobs.actions_pending(),
        );
        let t0 = Instant::now();
        // A sampled window is not shown to the controllers at all: there is nothing for
        // readahead to act on, its streams are not the window's, and its progress is not
        // comparable with a whole window's (unwatched, a cached reader runs a quarter faster):
        // the value in force stays, the guardrail and the learner pause, and the hysteresis
        // keeps what it was holding.
        if whole {
            controller.decide(&features, &mut knobs);
        }
        let decide_ns = (t0.elapsed().as_nanos() as u64).saturating_sub(knobs.act_ns - act_before);
        knobs.flush();
        // The next window: a slice after one of nothing but hits, or while the tuner rests
        // (nothing changed, held back or measured for a while); else watched whole.
        let quiet = whole
            && controller.idle()
            && controller.steady.held_back == held_before
            && knobs.actions_pending() == actions_before;
        // A slice whose processes changed, or whose progress fell below the guardrail's
        // abort bar (unwatched, a workload runs faster, never slower), wakes a resting tuner:
        // the guardrail's own checks run on whole windows only. Progress is compared only
        // where the whole window measured thirty units of either window's resolution (an
        // I/O-bound reader's few tick samples of user time a window would wake it on noise).
        let moved = !whole
            && last_whole.as_ref().is_some_and(|o: &Outcome| {
                let unit = o.resolution.max(features.outcome.resolution);
                let measurable = |p: f64| p * o.seconds >= 3.0 * MIN_RESOLUTION_UNITS * unit;
                o.population != features.outcome.population
                    || matches!((o.progress(), features.outcome.progress()), (Some(was), Some(now)) if measurable(was) && now < abort * was)
            });
        if whole {
            last_whole = Some(features.outcome.clone());
        }
        let next = watch.sample_next(
            &sampling,
            counted.pages_added,
            counted.pages_accessed,
            window_s,
            1.0 / k,
            quiet,
            moved,
        );
        kind = next;
        if next != sampling::Next::Whole {
            slice = Some((attached, attached + cfg.interval.mul_f64(sampling.share)));
        }
        if let Some(j) = restorer.journal.as_mut() {
            // Drained: the journal keeps each description once, with its latest advice.
            j.note_files(&std::mem::take(&mut knobs.touched))?;
        }
        // Metrics and logs.
        m.windows += 1;
        m.decide_ns_total += decide_ns;
        m.decide_ns_max = m.decide_ns_max.max(decide_ns);
        m.act_ns_total = knobs.act_ns;
        m.fallbacks = controller.fallbacks();
        m.overruled = controller.overruled();
        m.held_back = controller.steady.held_back;
        // Windows on vanilla, shown to the guardrail or rested through (a backoff).
        rested_vanilla += u64::from(!whole && guarded && controller.arm() == Arm::Vanilla);
        m.guard_vanilla_windows = controller.vanilla_windows + rested_vanilla;
        for e in controller.take_events() {
            match e.kind {
                GuardEventKind::Kept => {
                    m.guard_kept += 1;
                    info!(event = %"guard", verdict = %"kept", window = window_ix, progress = e.tuned, vanilla = e.vanilla, relative = e.relative, reason = %e.reason)
                }
                GuardEventKind::Reverted => {
                    m.guard_reverted += 1;
                    warn!(event = %"guard", verdict = %"reverted", window = window_ix, progress = e.tuned, vanilla = e.vanilla, relative = e.relative, reason = %e.reason)
                }
                GuardEventKind::ProcessReverted => {
                    m.guard_reverted += 1;
                    warn!(event = %"guard", verdict = %"reverted_process", window = window_ix, pid = e.pid.unwrap_or(0), progress = e.tuned, vanilla = e.vanilla, relative = e.relative, reason = %e.reason)
                }
                GuardEventKind::Unmeasured => {
                    m.guard_unmeasured += 1;
                    warn!(event = %"guard", verdict = %"unmeasured", window = window_ix, reason = %e.reason)
                }
            }
            summary
                .guard
                .push(format!("{} at window {window_ix}: {}", e.kind.as_str(), e.reason));
        }
        m.lost_events = w.counters.lost();
        m.pages_added += counted.pages_added;
        m.pages_accessed += counted.pages_accessed;
        m.pages_read += counted.pages_read;
        m.read_progress_windows += u64::from(by_reads);
        m.ops_progress_windows += u64::from(whole && ops_counter.is_some() && features.outcome.ops.is_some());
        m.sampled_windows += u64::from(!whole);
        m.rested_windows += u64::from(!whole && resting);
        m.wakes = watch.wakes;
        m.device_read_ahead_kb = knobs.device_read_ahead_kb();
        // The gauges keep the last whole window's streams.
        if whole {
            m.files = features.files.len() as u64;
            if let Some(f) = features.device {
                m.features.copy_from_slice(&f[..5]);
            } else {
                m.features = [0.0; 5];
            }
        }
        for &(_, class) in &controller.decisions()[decisions_before..] {
            let label = labels.get(class).cloned().unwrap_or_else(|| "fallback".into());
            *m.decisions.entry(label).or_default() += 1;
        }
        let class_now = controller.decisions()[decisions_before..]
            .last()
            .map(|&(_, c)| labels.get(c).cloned().unwrap_or_else(|| "fallback".into()));
        // The value in force and the progress the guardrail and the learner judge by, so a
        // run's log shows the spread their verdicts were made on (formatted only when the
        // debug line is on: tracing evaluates a field when its event is enabled).
        debug!(
            event = %"window",
            window = window_ix,
            read_ahead_kb = knobs.device_read_ahead_kb(),
            progress = %features.outcome.progress().map_or("-".to_string(), |p| format!("{p:.3}")),
            pages = w.device.n,
            files = features.files.len(),
            class = %class_now.as_deref().unwrap_or("-"),
            fallbacks = controller.fallbacks() - fallbacks_before,
            decide_ns,
            observed_share = 1.0 / k,
            lost = w.counters.lost(),
            // What a scale-free model read of the device's stream this window, in the order
            // of `scale_free` (so a log shows why a v3 model answered what it did).
            scale_free = %features.device.map_or("-".to_string(), |f| {
                let x = scale_free(&f, &features.outcome).map(|v| format!("{v:.4}"));
                format!("[{}]", x.join(","))
            })
        );
        for a in knobs.take_actions() {
            m.changes += 1;
            let (target, kb) = match a {
                Action::Device { from_kb, to_kb, pushed } => {
                    info!(
                        event = %"change",
                        window = window_ix,
                        target = %"device",
                        read_ahead_kb = to_kb,
                        dry_run = cfg.dry_run,
                        from_kb,
                        pushed_files = pushed
                    );
                    ("device".to_string(), to_kb)
                }
                Action::File {
                    ino,
                    pid,
                    kb,
                    descriptions,
                } => {
                    let target = match pid {
                        Some(pid) => format!("pid:{pid}:inode:{ino}"),
                        None => format!("inode:{ino}"),
                    };
                    info!(
                        event = %"change",
                        window = window_ix,
                        target = %target,
                        read_ahead_kb = kb,
                        dry_run = cfg.dry_run,
                        descriptions
                    );
                    (target, kb)
                }
            };
            summary.changes.push((window_ix, target, kb));
        }
        for e in knobs.take_errors() {
            m.errors += 1;
            warn!(event = %"action_failed", error = %e);
        }
        for (pid, ino, kb) in knobs.take_stranded() {
            warn!(
                event = %"stranded",
                pid,
                inode = ino,
                read_ahead_kb = kb,
                effect = %"the process closed its descriptor and maps the file: the description keeps this value until unmapped, out of reach of reverts and of the restore"
            );
        }
        if let Ok(mut p) = page.lock() {
            *p = m.render(&cfg.device);
        }
    }
    let programs = probe.program_stats();
    let bpf_ns: u64 = programs.iter().map(|p| p.run_time_ns).sum();
    let bpf_runs: u64 = programs.iter().map(|p| p.runs).sum();
    // Each program's share: which hook a workload's cost comes from.
    let per_program = programs
        .iter()
        .map(|p| format!("{}:{}/{:.1}ms", p.name, p.runs, p.run_time_ns as f64 / 1e6))
        .collect::<Vec<_>>()
        .join(" ");
    drop(probe);
    drop(restorer); // restores and logs
    let wall = start.elapsed().as_secs_f64();
    summary.restored_kb = linux::read_device_kb(knobs.sysfs()).unwrap_or(0);
    info!(
        event = %"stop",
        windows = m.windows,
        changes = m.changes,
        fallbacks = m.fallbacks,
        held_answers = m.overruled.held,
        settled_seesaws = m.overruled.settled,
        spared_lowerings = m.overruled.spared_lowerings,
        spared_raises = m.overruled.spared_raises,
        stayed_alike = m.overruled.stayed_alike,
        tried_alike = m.overruled.tried_alike,
        refined = m.overruled.refined,
        few_event_lowerings = m.overruled.few_event_lowerings,
        lost_events = m.lost_events,
        read_ahead_kb = summary.restored_kb,
        wall_s = wall,
        decide_us_mean = m.decide_ns_total as f64 / m.windows.max(1) as f64 / 1e3,
        decide_us_max = m.decide_ns_max as f64 / 1e3,
        act_us_total = m.act_ns_total as f64 / 1e3,
        events_per_s = events_seen as f64 / wall.max(1e-9),
        sampled_windows = m.sampled_windows,
        rested_windows = m.rested_windows,
        wakes = m.wakes,
        bpf_runs,
        bpf_cpu_ms = bpf_ns as f64 / 1e6,
        bpf_programs = %per_program
    );
    summary.metrics = m;
    Ok(summary)
}

/// Each process's pages read in a window: its count `now` less `before` (a process the
/// probe's table dropped and saw again starts from zero: what it counted since), scaled by `k`
/// as the window's other counts are ([`iolearn_probe::Counters::scaled`]).
fn pages_since(now: &BTreeMap<u32, u64>, before: &BTreeMap<u32, u64>, k: f64) -> BTreeMap<u32, u64> {
    now.iter()
        .map(|(&pid, &n)| {
            let was = before.get(&pid).copied().filter(|&b| b <= n).unwrap_or(0);
            (pid, iolearn_probe::scale_count(n - was, k))
        })
        .collect()
}

/// Run `f` (attaching or detaching the probes, milliseconds of system calls during which the
/// programs come and go one by one) and return the instant halfway through it: the slice of a
/// sampled window is timed between two such instants.
fn midway(f: impl FnOnce() -> Result<(), iolearn_probe::ProbeError>) -> Result<Instant, String> {
    let t0 = Instant::now();
    f().map_err(|e| e.to_string())?;
    Ok(t0 + t0.elapsed() / 2)
}

/// Give the knobs what the kernel holds for each open description (the applications' advice);
/// a failure is logged once and the tuner goes on without it.
fn note_modes(probe: &mut Probe, knobs: &mut LinuxKnobs, failed: &mut bool) {
    match probe.open_files() {
        Ok(modes) => knobs.note_modes(&modes),
        Err(e) if !*failed => {
            *failed = true;
            warn!(event = %"open_files_unreadable", error = %e, effect = %"an application's POSIX_FADV_RANDOM may be lost when a value is pushed");
        }
        Err(_) => {}
    }
}

/// A stream's statistics from the probes' in-kernel sums (KML's and the shape sums).
pub fn sums_stats(s: &iolearn_probe::PageSums) -> WindowStats {
    WindowStats::from_sums(s.n, s.sum, s.sum_sq, s.min, s.max, s.sum_abs_delta).with_shape(
        s.first,
        s.last,
        s.jump_pairs,
        s.jump_same,
    )
}

/// KML's features of one probe window: the device's stream and each file's, with the
/// readahead currently in force for each. A window not watched `whole` (a slice of a window of
/// cache hits, [`sampling`]) has none: there is nothing for readahead to act on, and a slice's
/// streams are not the window's (a cached scan covers a twentieth of its range), so no decision
/// is taken on it and the value in force stays.
pub fn window_features(w: &Window, knobs: &dyn ReadaheadKnobs, whole: bool) -> WindowFeatures {
    if !whole {
        return WindowFeatures::default();
    }
    let stats = |s: &iolearn_probe::PageSums| crate::sums_stats(s);
    let dev_sectors = knobs.device_read_ahead_kb() * 2;
    let mut files = BTreeMap::new();
    let mut owners = BTreeMap::new();
    let mut trends = BTreeMap::new();
    for f in &w.files {
        files.insert(f.ino, stats(&f.sums).features_v2(knobs.file_read_ahead_kb(f.ino) * 2));
        owners.insert(f.ino, f.sums.tgid);
        trends.insert(f.ino, None);
    }
    let descriptions = w
        .descriptions
        .iter()
        .map(|d| {
            let ra = knobs.file_read_ahead_kb(d.ino) * 2;
            ((d.sums.tgid, d.ino), stats(&d.sums).features_v2(ra))
        })
        .collect();
    WindowFeatures {
        start_ns: 0,
        descriptions,
        device: (w.device.n > 0).then(|| stats(&w.device).features_v2(dev_sectors)),
        files,
        device_trend: None,
        file_trends: trends,
        file_owners: owners,
        outcome: Default::default(),
    }
}

/// Bring `pids` and the probe's filter in line with the cgroup `dir`: its new processes are
/// watched, and those that left it (exited or moved out) are not any more, unless they were
/// named (`named`): a number the kernel hands to a process that is none of ours must not count
/// as ours, and a cgroup that starts a process per file would otherwise grow the list without
/// end. Returns the pids that left. Nothing changes when the cgroup cannot be read.
pub fn follow_cgroup(dir: &Path, named: &[u32], pids: &mut Vec<u32>, probe: &mut Probe) -> Vec<u32> {
    use std::collections::HashSet;
    let Ok(now) = cgroup_pids(dir) else {
        return Vec::new();
    };
    let now: HashSet<u32> = now.into_iter().collect();
    let named: HashSet<u32> = named.iter().copied().collect();
    let left: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|p| !now.contains(p) && !named.contains(p))
        .collect();
    for &pid in &left {
        if let Err(e) = probe.unwatch_pid(pid) {
            warn!(event = "error", pid, error = %e, "could not stop watching a process");
        }
    }
    let gone: HashSet<u32> = left.iter().copied().collect();
    pids.retain(|p| !gone.contains(p));
    let known: HashSet<u32> = pids.iter().copied().collect();
    let mut joined: Vec<u32> = now.difference(&known).copied().collect();
    joined.sort_unstable();
    for pid in joined {
        pids.push(pid);
        if let Err(e) = probe.watch_pid(pid) {
            warn!(event = "error", pid, error = %e, "could not watch a process of the cgroup");
        }
    }
    left
}

/// The processes of a cgroup and of the cgroups below it (v1 or v2: `cgroup.procs` lists a
/// group's own members only, and a v2 group with controllers for its children has none), but
/// this process.
pub fn cgroup_pids(dir: &Path) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    add_cgroup_pids(dir, 0, &mut out)?;
    // Never the tuner itself: LEAP's prefetcher joins its processes' memory cgroup, and would
    // otherwise watch its own reads.
    let me = std::process::id();
    out.retain(|&p| p != me);
    Ok(out)
}

fn add_cgroup_pids(dir: &Path, depth: usize, out: &mut Vec<u32>) -> Result<(), String> {
    let path = dir.join("cgroup.procs");
    // A pid per line: 16 MiB is millions of processes, and /dev/zero planted there ends here.
    let text = iolearn_safeio::read_to_string(&path, 16 << 20).map_err(|e| e.to_string())?;
    out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    // Sub-groups are directories (cgroupfs has no links); a group that vanished while being
    // read is skipped, and the depth is bounded (the kernel's own limit is far above use).
    if depth < 32 {
        for e in std::fs::read_dir(dir).map_err(|e| e.to_string())?.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = add_cgroup_pids(&e.path(), depth + 1, out);
            }
        }
    }
    Ok(())
}

/// How long the start waits for the application's count: a first access may mount the
/// filesystem (autofs) or wake a cold NFS client.
const OPS_START_WAIT: Duration = Duration::from_secs(5);

/// The application's count over the window that ended (`window`: 0 at the start), read
/// within `wait`; the first of a run of failures and a restart of the count logged.
fn read_ops(counter: &mut outcome::OpsCounter, window: u64, wait: Duration) -> Option<f64> {
    let got = counter.take(wait);
    match &got {
        outcome::Reading::Failed { error, first: true } => {
            warn!(event = %"ops_unmeasured", window, error = %error, effect = %"windows are not measured until the count is read again");
        }
        outcome::Reading::Restart => {
            info!(event = %"ops_restart", window, effect = %"the count went back (the application restarted): vanilla is measured afresh");
        }
        _ => {}
    }
    got.ops()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_read_by_process_are_the_window_s_scaled_as_its_counts() {
        let before = BTreeMap::from([(7, 100), (8, 5000)]);
        // 8's count went back (the probe's table dropped it and saw it again): since then.
        let now = BTreeMap::from([(7, 400), (8, 30), (9, 10)]);
        assert_eq!(
            pages_since(&now, &before, 1.0),
            BTreeMap::from([(7, 300), (8, 30), (9, 10)])
        );
        // A window watched for a fifth: five times what was seen, as the counters.
        assert_eq!(pages_since(&now, &before, 5.0)[&7], 1500);
        assert_eq!(pages_since(&now, &before, f64::NAN)[&7], 300);
    }

    #[test]
    fn the_learner_refines_a_models_values_by_default_only_where_it_can_and_as_asked() {
        let model = TuneConfig::new("loop0", ControllerSpec::Model("m.iolm".into()));
        assert!(refines(&model, true), "a model per device, guarded and measured");
        assert!(!refines(&model, false), "nothing measured: nothing to refine by");
        let unguarded = TuneConfig {
            guard: None,
            ..model.clone()
        };
        assert!(!refines(&unguarded, true));
        let per_file = TuneConfig {
            scope: Scope::File,
            ..model.clone()
        };
        assert!(!refines(&per_file, true));
        let dry = TuneConfig {
            dry_run: true,
            ..model.clone()
        };
        assert!(!refines(&dry, true), "a dry run changes nothing, so measures no value");
        let online = TuneConfig::new("loop0", ControllerSpec::Online);
        assert!(!refines(&online, true), "the learner alone has no model to refine");
        let off = TuneConfig {
            refine_online: Some(false),
            ..model.clone()
        };
        assert!(!refines(&off, true), "--no-refine");
        let asked = TuneConfig {
            refine_online: Some(true),
            ..unguarded
        };
        assert!(
            refines(&asked, true),
            "--refine-online (refused without the guardrail before this)"
        );
    }
}
