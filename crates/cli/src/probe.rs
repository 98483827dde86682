//! `iolearn probe readahead`: record KML's features on this machine, one row per window for
//! the device and (with `--per-file`) one per file, as CSV (training data for real models).

use crate::args;
use anyhow::Result;
use clap::{Args, Subcommand};
use iolearn_policy::readahead::{scale_free, Outcome, RaFeatures};
use iolearn_probe::{DeviceId, Probe, ProbeConfig};
use iolearn_tune::linux::{read_ahead_path, read_device_kb};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What to record.
#[derive(Subcommand)]
pub enum ProbeCommand {
    /// KML's readahead features per window (and lost-event counts) as CSV.
    Readahead(RecordArgs),
    /// Every request of a few devices entering the I/O scheduler, going to the driver,
    /// completing or merged, with its thread and I/O priority (CSV with --out), and per
    /// device and priority the waits in the scheduler and on the driver.
    Sched(crate::sched::SchedArgs),
    /// A drive's internals from latencies alone: page, write buffer, parallel units,
    /// channels, GC onset (`--sim consumer` shows the true values beside; `--device` probes
    /// a real one and overwrites its data).
    Ssd(crate::probe_ssd::SsdArgs),
}

/// Options of `iolearn probe readahead`.
#[derive(Args)]
pub struct RecordArgs {
    /// Block device (`loop0`).
    #[arg(long)]
    device: String,
    /// Process to watch (repeatable); default: every process.
    #[arg(long = "pid", allow_negative_numbers = true)]
    pids: Vec<u32>,
    /// Watch every process of this cgroup directory.
    #[arg(long)]
    cgroup: Option<PathBuf>,
    /// Window in seconds.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1.0, value_parser = args::window)]
    interval: f64,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long, allow_negative_numbers = true, value_parser = args::seconds)]
    duration: Option<f64>,
    /// Also one row per file and window.
    #[arg(long)]
    per_file: bool,
    /// Output CSV (default: standard output).
    #[arg(long, short)]
    out: Option<PathBuf>,
}

pub fn run(cmd: ProbeCommand) -> Result<()> {
    let a = match cmd {
        ProbeCommand::Readahead(a) => a,
        ProbeCommand::Sched(s) => return crate::sched::run(s),
        ProbeCommand::Ssd(s) => return crate::probe_ssd::run(s),
    };
    let name = a.device.strip_prefix("/dev/").unwrap_or(&a.device).to_string();
    iolearn_tune::check_device_name(&name).map_err(anyhow::Error::msg)?;
    iolearn_tune::check_pids(&a.pids).map_err(anyhow::Error::msg)?;
    // The output path is checked before the probes start.
    if let Some(p) = &a.out {
        iolearn_safeio::check_target(p)?;
    }
    let dev = DeviceId::from_name(&name)?;
    let mut pids = a.pids.clone();
    if let Some(cg) = &a.cgroup {
        pids.extend(iolearn_tune::cgroup_pids(cg).map_err(anyhow::Error::msg)?);
    }
    let mut probe = Probe::start(&ProbeConfig {
        device: Some(dev),
        pids: pids.clone(),
        filter_pids: !a.pids.is_empty() || a.cgroup.is_some(),
        ..Default::default()
    })?;
    match &a.out {
        // Rows stream to standard output as windows close.
        None => record(&a, &name, &mut probe, pids, &mut std::io::stdout().lock()),
        // A file gets them through one atomic write: streamed into the unnamed temporary file,
        // named only when the run ends well (no half-written output, no memory growth).
        Some(p) => {
            let mut failure = None;
            let written = iolearn_safeio::write_with(p, |w| {
                record(&a, &name, &mut probe, pids, w).map_err(|e| {
                    let io = std::io::Error::other(format!("{e:#}"));
                    failure = Some(e);
                    io
                })
            });
            match failure {
                Some(e) => Err(e),
                None => Ok(written?),
            }
        }
    }
}

/// Record windows into `out` until stopped.
fn record(a: &RecordArgs, name: &str, probe: &mut Probe, mut pids: Vec<u32>, out: &mut dyn Write) -> Result<()> {
    let sysfs = read_ahead_path(name);
    let mut csv = csv::Writer::from_writer(out);
    let head = ["window", "time_s", "scope", "inode", "pid", "read_ahead_kb"];
    // A stream's features (KML's five, direction, regularity, randomness, density), then the
    // scale-free inputs' three that are not among them: one row holds every schema's inputs.
    let features = iolearn_ml::kml::READAHEAD_FEATURES_V2;
    let more = &iolearn_ml::kml::READAHEAD_FEATURES_V3[2..];
    let (own, counted) = (&more[..2], &more[2..]);
    debug_assert_eq!(own, ["randomness", "density"]);
    csv.write_record(
        head.iter()
            .chain(&features)
            .chain(own)
            .chain(counted)
            .chain(&["lost_events"]),
    )?;
    let stop = iolearn_tune::install_signal_handlers();
    let interval = Duration::from_secs_f64(a.interval);
    let start = Instant::now();
    let mut next = start + interval;
    // The probe's counters run from its start; a window's are the difference.
    let mut counted = probe.window()?.counters;
    let mut w_ix = 0u64;
    while !stop.load(Ordering::SeqCst) && a.duration.is_none_or(|d| start.elapsed().as_secs_f64() < d) {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(cg) = &a.cgroup {
            iolearn_tune::follow_cgroup(cg, &a.pids, &mut pids, probe);
        }
        if Instant::now() < next {
            continue;
        }
        next += interval;
        w_ix += 1;
        let w = probe.window()?;
        let kb = read_device_kb(&sysfs).map_err(anyhow::Error::msg)?;
        let t = start.elapsed().as_secs_f64();
        let lost = w.counters.lost();
        let stats = iolearn_tune::sums_stats;
        // What the tuner's controllers see of the device's counts in the window (demand
        // misses are the kernel's synchronous readahead calls, as in `iolearn_tune::outcome`).
        let window = w.counters.since(&counted);
        counted = w.counters;
        let device = Outcome {
            pages_added: window.pages_added,
            pages_accessed: window.pages_accessed,
            misses: window.ra_sync,
            marker_hits: window.ra_async,
            faults: window.faults,
            ..Outcome::default()
        };
        let mut row = |scope: &str, ino: String, pid: String, f: RaFeatures| {
            let mut r = vec![
                w_ix.to_string(),
                format!("{t:.3}"),
                scope.to_string(),
                ino,
                pid,
                kb.to_string(),
            ];
            r.extend(f.iter().map(|v| v.to_string()));
            let inputs = scale_free(&f, &device);
            r.extend(inputs[4..].iter().map(|v| v.to_string()));
            r.push(lost.to_string());
            csv.write_record(&r)
        };
        if w.device.n > 0 {
            row(
                "device",
                String::new(),
                String::new(),
                stats(&w.device).features_v2(kb * 2),
            )?;
        }
        if a.per_file {
            for f in &w.files {
                row(
                    "file",
                    f.ino.to_string(),
                    f.sums.tgid.to_string(),
                    stats(&f.sums).features_v2(kb * 2),
                )?;
            }
        }
        csv.flush()?;
    }
    Ok(())
}
