//! `iolearn tune readahead`: the tuner on this machine's kernel.

use crate::args;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use iolearn_ml::format::MAX_READ_AHEAD_KB;
use iolearn_policy::steady::{MAX_HOLD, MAX_MIN_GAP};
use iolearn_tune::journal::Journal;
use iolearn_tune::linux::read_ahead_path;
use iolearn_tune::report::Logger;
use iolearn_tune::{
    check_device_name, install_signal_handlers, lock_device, restore_left_over, run, ControllerSpec, Scope, TuneConfig,
};
use std::path::PathBuf;
use std::time::Duration;

/// What to tune.
#[derive(Subcommand)]
pub enum TuneCommand {
    /// KML readahead tuning: eBPF features once per window, the model decides, sysfs and
    /// fadvise act. Restores the original settings on exit, on SIGINT/SIGTERM/SIGHUP, and on
    /// the next start after a crash.
    Readahead(ReadaheadArgs),
}

/// Options of `iolearn tune readahead`.
#[derive(Args)]
pub struct ReadaheadArgs {
    /// Block device to tune (`loop0`, `/dev/nvme0n1`); never the system disk unless you mean it.
    #[arg(long)]
    device: String,
    /// Model file (schema kml-readahead-v1, iolearn-readahead-v2 with direction and
    /// regularity, e.g. from `iolearn readahead train`, or iolearn-readahead-v3 on scale-free
    /// inputs, from `iolearn bench readahead --real --steps trainset`).
    #[arg(long, required_unless_present_any = ["restore", "controller"], conflicts_with = "controller")]
    model: Option<PathBuf>,
    /// Another controller instead of a model: `online` (learns the device's value from the
    /// watched processes' progress, no model; needs --pid or --cgroup, or --progress ops:PATH),
    /// `static:KB`,
    /// `pids:PID=KB,...` (each process's open files at its own value through its own file
    /// descriptions, other readers of the same files left alone; the processes are watched),
    /// `leap-prefetch-unmarked` (LEAP, KML's baseline: Linux's readahead off and LEAP's
    /// windows read with WILLNEED; needs --pid or --cgroup) or `vanilla` (the names `iolearn readahead` and the Python API use; a model file's path
    /// works too).
    #[arg(long, value_parser = controller_spec)]
    controller: Option<ControllerSpec>,
    /// Decide per file (needs --pid or --cgroup) instead of per device.
    #[arg(long, conflicts_with = "per_description")]
    per_file: bool,
    /// Decide per open file description: each watched process's value for each file, from
    /// its own reads of it (needs --pid or --cgroup). A file shared by a scanner and a random
    /// reader then serves both.
    #[arg(long)]
    per_description: bool,
    /// Process to watch (repeatable); default: every process using the device.
    #[arg(long = "pid", allow_negative_numbers = true)]
    pids: Vec<u32>,
    /// Watch every process of this cgroup directory (its cgroup.procs).
    #[arg(long)]
    cgroup: Option<PathBuf>,
    /// Decision window in seconds (KML: 1).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1.0, value_parser = args::window)]
    interval: f64,
    /// Windows a new value must be predicted in a row before it is applied (1 to 1000).
    #[arg(long, allow_negative_numbers = true, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=MAX_HOLD as i64))]
    hold: u32,
    /// Windows between two changes of one target (0 to 100000).
    #[arg(long, allow_negative_numbers = true, default_value_t = 3, value_parser = clap::value_parser!(u64).range(0..=MAX_MIN_GAP))]
    min_gap: u64,
    /// read_ahead_kb used when the model's input is outside its training range, unless the
    /// online learner decides there (--fallback-online, or refining, the default per device
    /// with the guardrail; --no-refine) (0 to 1048576).
    #[arg(long, allow_negative_numbers = true, default_value_t = 128, value_parser = clap::value_parser!(u64).range(0..=MAX_READ_AHEAD_KB as u64))]
    fallback_kb: u64,
    /// Out of the model's training range, learn the device's value online instead of setting
    /// --fallback-kb (needs --pid or --cgroup, or --progress ops:PATH; per device).
    #[arg(long)]
    fallback_online: bool,
    /// Let the online learner refine a value of the model's that the guardrail kept with a
    /// gain: it measures the neighbouring values on this workload and holds the best, until it
    /// measures the workload change and the model answers again; it also decides out of the
    /// training range, as --fallback-online. The default wherever it applies (a model per
    /// device, the guardrail on, progress measured, not --dry-run); this flag asks for it and
    /// says why where it cannot apply. With --per-file the learner decides the device's value
    /// beside the model, whose values are in force while that is vanilla's.
    #[arg(long, conflicts_with = "no_refine")]
    refine_online: bool,
    /// With --per-file: a model per device (such as the scale-free v3 one) that decides the
    /// device's value beside the per-file model, its values refined by the online learner as
    /// per device (--no-refine turns that off); the per-file model's values are in force
    /// while the device is at vanilla. Needs the guardrail and the processes' progress.
    #[arg(long, value_name = "PATH", requires = "per_file")]
    device_model: Option<PathBuf>,
    /// Leave the model's values as it gives them (out of its training range, --fallback-kb or
    /// --fallback-online decide).
    #[arg(long)]
    no_refine: bool,
    /// What the guardrail and the online learner count as the watched processes' progress:
    /// `cpu`, their threads' user-mode CPU time, process by process; `auto`, the pages their
    /// reads returned, counted in the kernel, in windows where they read at least twice as
    /// many pages as they fault through mappings (else user time): for I/O-bound readers,
    /// whose user time is a few clock ticks a window, and for workloads of short-lived
    /// processes (one sum, not split by process; docs/tuning.md says where the count falls
    /// short); `ops:PATH`, the application's own count of operations, the number on the last
    /// line of PATH (rewritten or appended as the application runs; one sum, and processes
    /// need not be named): what it did, where neither user time nor pages show it.
    #[arg(long, default_value = "cpu", value_parser = iolearn_tune::outcome::Progress::parse)]
    progress: iolearn_tune::outcome::Progress,
    /// Turn the guardrail off. With it (the default, when --pid or --cgroup names processes to
    /// measure, or --progress ops:PATH gives the application's count) a decision stays only
    /// while the processes progress at least as well as on the
    /// kernel's own value, measured side by side; a worse one is reverted and logged.
    #[arg(long)]
    no_guard: bool,
    /// After a window of nothing but page-cache hits (readahead cannot help them), observe
    /// only this share of the next window and scale what was seen: the probes run on every
    /// read, and on a cached workload they cost a quarter of its time. 1 observes every
    /// window whole. (0.001 to 1)
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.05, value_parser = args::observed_share)]
    sample: f64,
    /// Once the tuner has had nothing to do for a while (no change, nothing held back, the
    /// guardrail idle) on a busy workload, only one window in this many is watched whole and
    /// decided on; the others are watched for the --sample share, and one whose rates moved
    /// wakes the tuner. 1 watches every window. (1 to 1000)
    #[arg(long, default_value_t = 8, value_parser = args::count(1..=1000))]
    rest_every: usize,
    /// Decide and log, change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Tune the disk that holds `/` too (refused without this).
    #[arg(long)]
    allow_system_disk: bool,
    /// Where the journal of original settings lives.
    #[arg(long, default_value = "/run/iolearn")]
    state_dir: PathBuf,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long, allow_negative_numbers = true, value_parser = args::seconds)]
    duration: Option<f64>,
    /// Serve Prometheus metrics at this address (e.g. 127.0.0.1:9633).
    #[arg(long, value_parser = socket_addr)]
    metrics: Option<String>,
    /// Log format on stderr.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Also log every window.
    #[arg(long, short)]
    verbose: bool,
    /// Only restore what a crashed tuner left changed, then exit.
    #[arg(long)]
    restore: bool,
}

/// `--controller`: the shared controller names (`ControllerSpec::parse`).
fn controller_spec(s: &str) -> Result<ControllerSpec, String> {
    ControllerSpec::parse(s)
}

pub fn run_command(cmd: TuneCommand) -> Result<()> {
    let TuneCommand::Readahead(a) = cmd;
    let device = a.device.strip_prefix("/dev/").unwrap_or(&a.device).to_string();
    if a.restore {
        check_device_name(&device).map_err(anyhow::Error::msg)?;
        if a.state_dir.exists() && !a.state_dir.is_dir() {
            bail!("--state-dir {}: not a directory", a.state_dir.display());
        }
        let journal = Journal::path_for(&a.state_dir, &device);
        if !read_ahead_path(&device).exists() {
            if journal.exists() {
                bail!(
                    "no block device {device:?}: cannot restore it (its journal {} is kept)",
                    journal.display()
                );
            }
            eprintln!("iolearn: nothing to restore for {device} (no such block device)");
            return Ok(());
        }
        let mut lock = lock_device(&device).map_err(anyhow::Error::msg)?;
        match restore_left_over(&a.state_dir, &device, &mut lock).map_err(anyhow::Error::msg)? {
            Some(j) => eprintln!(
                "iolearn: restored {device}: read_ahead_kb {}, {} file(s)",
                j.original_kb,
                j.files.len()
            ),
            None => eprintln!("iolearn: nothing to restore for {device}"),
        }
        return Ok(());
    }
    let controller = match (a.model, a.controller) {
        (Some(model), None) => ControllerSpec::Model(model),
        (None, Some(spec)) => spec,
        _ => unreachable!("clap requires exactly one of --model and --controller"),
    };
    let mut cfg = TuneConfig::new(&device, controller);
    cfg.scope = if a.per_description {
        Scope::Description
    } else if a.per_file {
        Scope::File
    } else {
        Scope::Device
    };
    cfg.pids = a.pids;
    cfg.cgroup = a.cgroup;
    cfg.interval = Duration::from_secs_f64(a.interval);
    cfg.hold = a.hold;
    cfg.min_gap = a.min_gap;
    cfg.fallback_kb = a.fallback_kb;
    cfg.fallback_online = a.fallback_online;
    cfg.refine_online = if a.no_refine {
        Some(false)
    } else {
        a.refine_online.then_some(true)
    };
    cfg.device_model = a.device_model;
    cfg.progress = a.progress;
    if a.no_guard {
        cfg.guard = None;
    }
    cfg.sampling.share = a.sample;
    cfg.sampling.rest_every = a.rest_every as u32;
    cfg.dry_run = a.dry_run;
    cfg.allow_system_disk = a.allow_system_disk;
    cfg.state_dir = a.state_dir;
    cfg.duration = a.duration.map(Duration::from_secs_f64);
    cfg.metrics = a.metrics;
    cfg.log = Logger {
        json: a.log_format == "json",
        verbose: a.verbose,
    };
    let stop = install_signal_handlers();
    let s = run(&cfg, stop).map_err(anyhow::Error::msg).context("tune readahead")?;
    let m = &s.metrics;
    if let Some(p) = &s.prefetch {
        println!(
            "LEAP: {} misses, {} hits, {} WILLNEED calls for {} pages, {} misses unreachable, {} lost events; read_ahead_kb back to {}",
            p.misses, p.hits, p.calls, p.pages, p.unreachable, p.lost_events, s.restored_kb
        );
        return Ok(());
    }
    println!(
        "{} windows, {} changes ({} held back), {} fallbacks, {} lost events; decisions {:.1} us mean, {:.1} us max; read_ahead_kb back to {}",
        m.windows,
        m.changes,
        m.held_back,
        m.fallbacks,
        m.lost_events,
        m.decide_ns_total as f64 / m.windows.max(1) as f64 / 1e3,
        m.decide_ns_max as f64 / 1e3,
        s.restored_kb
    );
    let o = &m.overruled;
    if *o != Default::default() {
        println!(
            "model answers overruled: {} of the value a decision the guardrail measured better came from, {} see-saws settled, {} lowerings not made beside sequential streams, {} raises not made beside processes that do not scan, {} moves not made to a value scored alike, {} values scored alike with vanilla tried, {} values refined by the learner, {} per-file lowerings not made on too few events",
            o.held,
            o.settled,
            o.spared_lowerings,
            o.spared_raises,
            o.stayed_alike,
            o.tried_alike,
            o.refined,
            o.few_event_lowerings
        );
    }
    if m.guard_kept + m.guard_reverted > 0 {
        println!(
            "guardrail: {} decisions kept, {} reverted, {} windows on vanilla",
            m.guard_kept, m.guard_reverted, m.guard_vanilla_windows
        );
    }
    if m.guard_unmeasured > 0 {
        println!(
            "guardrail: vanilla put back {} times because the workload's progress went unmeasured",
            m.guard_unmeasured
        );
    }
    Ok(())
}

/// `--metrics`: an IP address and port, checked when the command line is read (not after the
/// probes attach).
fn socket_addr(s: &str) -> Result<String, String> {
    s.parse::<std::net::SocketAddr>().map(|_| s.to_string()).map_err(|_| {
        format!(
            "{} is not an IP address and port (127.0.0.1:9633)",
            iolearn_safeio::excerpt(s, 40)
        )
    })
}
