//! `iolearn probe readahead`: record KML's features on this machine, one row per window for
//! the device and (with `--per-file`) one per file, as CSV (training data for real models).

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use iolearn_policy::readahead::WindowStats;
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
}

/// Options of `iolearn probe readahead`.
#[derive(Args)]
pub struct RecordArgs {
    /// Block device (`loop0`).
    #[arg(long)]
    device: String,
    /// Process to watch (repeatable); default: every process.
    #[arg(long = "pid")]
    pids: Vec<u32>,
    /// Watch every process of this cgroup directory.
    #[arg(long)]
    cgroup: Option<PathBuf>,
    /// Window in seconds.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    duration: Option<f64>,
    /// Also one row per file and window.
    #[arg(long)]
    per_file: bool,
    /// Output CSV (default: standard output).
    #[arg(long, short)]
    out: Option<PathBuf>,
}

pub fn run(cmd: ProbeCommand) -> Result<()> {
    let ProbeCommand::Readahead(a) = cmd;
    if !(a.interval > 0.0 && a.interval.is_finite()) {
        bail!("--interval must be a positive number of seconds");
    }
    let name = a.device.trim_start_matches("/dev/").to_string();
    let dev = DeviceId::from_name(&name)?;
    let sysfs = read_ahead_path(&name);
    let mut pids = a.pids.clone();
    if let Some(cg) = &a.cgroup {
        pids.extend(iolearn_tune::cgroup_pids(cg).map_err(anyhow::Error::msg)?);
    }
    let mut probe = Probe::start(&ProbeConfig {
        device: Some(dev),
        pids: pids.clone(),
        filter_pids: !a.pids.is_empty() || a.cgroup.is_some(),
        raw_events: false,
    })?;
    // Write to a temporary file and rename at the end: no half-written output.
    let (mut out, tmp): (Box<dyn Write>, Option<PathBuf>) = match &a.out {
        Some(p) => {
            let tmp = p.with_extension("csv.tmp");
            let f = std::fs::File::create(&tmp).with_context(|| tmp.display().to_string())?;
            (Box::new(std::io::BufWriter::new(f)), Some(tmp))
        }
        None => (Box::new(std::io::stdout().lock()), None),
    };
    writeln!(
        out,
        "window,time_s,scope,inode,pid,read_ahead_kb,n_transactions,page_offset_var_pop_over_range,\
         page_offset_var_sample_over_range,mean_abs_page_delta,ra_sectors_over_1024,lost_events"
    )?;
    let stop = iolearn_tune::install_signal_handlers();
    let interval = Duration::from_secs_f64(a.interval);
    let start = Instant::now();
    let mut next = start + interval;
    probe.window()?;
    let mut w_ix = 0u64;
    while !stop.load(Ordering::SeqCst) && a.duration.is_none_or(|d| start.elapsed().as_secs_f64() < d) {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(cg) = &a.cgroup {
            for pid in iolearn_tune::cgroup_pids(cg).unwrap_or_default() {
                if !pids.contains(&pid) {
                    pids.push(pid);
                    probe.watch_pid(pid)?;
                }
            }
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
        let stats =
            |s: &iolearn_probe::PageSums| WindowStats::from_sums(s.n, s.sum, s.sum_sq, s.min, s.max, s.sum_abs_delta);
        let row = |f: [f64; 5]| f.iter().map(|v| format!("{v}")).collect::<Vec<_>>().join(",");
        if w.device.n > 0 {
            writeln!(
                out,
                "{w_ix},{t:.3},device,,,{kb},{},{lost}",
                row(stats(&w.device).features(kb * 2))
            )?;
        }
        if a.per_file {
            for f in &w.files {
                writeln!(
                    out,
                    "{w_ix},{t:.3},file,{},{},{kb},{},{lost}",
                    f.ino,
                    f.sums.tgid,
                    row(stats(&f.sums).features(kb * 2))
                )?;
            }
        }
        out.flush()?;
    }
    drop(out);
    if let (Some(tmp), Some(p)) = (tmp, &a.out) {
        std::fs::rename(&tmp, p).with_context(|| p.display().to_string())?;
    }
    Ok(())
}
