//! `iolearn probe sched`: what the kernel's I/O scheduler does with each request of a few
//! devices (the events MittCFQ's books are fed with), as CSV, and per device and I/O priority
//! how long requests waited in the scheduler and on the driver. (Without a scheduler, `none`,
//! requests go to the driver without an insert: their priority shows as `-`.)

use anyhow::{bail, Result};
use clap::Args;
use iolearn_probe::sched::{SchedEvent, SchedKind, SchedWatch, SCHED_DEVICES};
use iolearn_probe::DeviceId;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Options of `iolearn probe sched`.
#[derive(Args)]
pub struct SchedArgs {
    /// Block device to watch (`loop0`; repeatable, at most 8).
    #[arg(long = "device", required = true)]
    devices: Vec<String>,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long, allow_negative_numbers = true, value_parser = crate::args::seconds)]
    duration: Option<f64>,
    /// Every event as CSV (written atomically at the end); without it, only the summary.
    #[arg(long, short)]
    out: Option<PathBuf>,
}

/// Per device and priority: waits in the scheduler (insert to issue) and on the driver (issue
/// to completion), ns.
#[derive(Default)]
struct Waits {
    queued: Vec<u64>,
    served: Vec<u64>,
}

fn pct(v: &mut [u64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize] as f64 / 1e3
}

fn prio_name(class: u8, level: u8) -> String {
    match class {
        1 => format!("rt{level}"),
        2 => format!("be{level}"),
        3 => "idle".into(),
        u8::MAX => "-".into(),
        _ => "none".into(),
    }
}

/// Follows each request from its insert: per (device, priority), its waits.
#[derive(Default)]
struct Summary {
    open: HashMap<u64, (usize, u8, u8, u64, Option<u64>)>,
    waits: BTreeMap<(usize, String), Waits>,
    events: u64,
}

impl Summary {
    fn add(&mut self, e: &SchedEvent) {
        self.events += 1;
        match e.kind {
            SchedKind::Insert => {
                self.open.insert(e.id(), (e.device, e.class, e.level, e.ts_ns, None));
            }
            SchedKind::Issue => match self.open.get_mut(&e.id()) {
                Some(r) => r.4 = Some(e.ts_ns),
                // Issued without entering a scheduler (`none`, or a request the scheduler
                // let through): no priority known, no queueing.
                None => {
                    self.open.insert(e.id(), (e.device, u8::MAX, 0, e.ts_ns, Some(e.ts_ns)));
                }
            },
            SchedKind::Complete => {
                if let Some((dev, class, level, ins, Some(iss))) = self.open.remove(&e.id()) {
                    let w = self.waits.entry((dev, prio_name(class, level))).or_default();
                    w.queued.push(iss.saturating_sub(ins));
                    w.served.push(e.ts_ns.saturating_sub(iss));
                }
            }
            SchedKind::Merged => {
                self.open.remove(&e.id());
            }
        }
    }
}

/// Take events until stopped (a signal, `duration`, or the watch ending), each into the
/// summary and, when given, a CSV row.
fn collect(
    rx: &std::sync::mpsc::Receiver<SchedEvent>,
    duration: Option<f64>,
    names: &[String],
    mut csv: Option<&mut csv::Writer<&mut dyn Write>>,
    summary: &mut Summary,
) -> std::io::Result<()> {
    let stop = iolearn_tune::install_signal_handlers();
    let start = Instant::now();
    let mut t0 = None;
    let mut take = |e: SchedEvent, summary: &mut Summary| -> std::io::Result<()> {
        summary.add(&e);
        let Some(csv) = csv.as_deref_mut() else {
            return Ok(());
        };
        let t0 = *t0.get_or_insert(e.ts_ns);
        let kind = match e.kind {
            SchedKind::Insert => "insert",
            SchedKind::Issue => "issue",
            SchedKind::Complete => "complete",
            SchedKind::Merged => "merged",
        };
        let prio = if e.kind == SchedKind::Insert {
            prio_name(e.class, e.level)
        } else {
            String::new()
        };
        csv.write_record([
            e.ts_ns.saturating_sub(t0).to_string(),
            names[e.device].clone(),
            kind.into(),
            e.offset.to_string(),
            e.len.to_string(),
            e.tid.to_string(),
            prio,
            u8::from(e.write).to_string(),
            format!("{:x}", e.id()),
        ])?;
        Ok(())
    };
    while !stop.load(Ordering::SeqCst) && duration.is_none_or(|d| start.elapsed().as_secs_f64() < d) {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(e) => take(e, summary)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    for e in rx.try_iter() {
        take(e, summary)?;
    }
    Ok(())
}

pub fn run(a: SchedArgs) -> Result<()> {
    if a.devices.len() > SCHED_DEVICES {
        bail!("--device: {} devices (at most {SCHED_DEVICES})", a.devices.len());
    }
    let mut names = Vec::new();
    let mut ids = Vec::new();
    for d in &a.devices {
        let name = d.strip_prefix("/dev/").unwrap_or(d).to_string();
        iolearn_tune::check_device_name(&name).map_err(anyhow::Error::msg)?;
        if names.contains(&name) {
            bail!("--device: {name} is given twice");
        }
        ids.push(DeviceId::from_name(&name)?);
        names.push(name);
    }
    if let Some(p) = &a.out {
        iolearn_safeio::check_target(p)?;
    }
    let (tx, rx) = channel::<SchedEvent>();
    let watch = SchedWatch::start(&ids, move |e| {
        let _ = tx.send(*e);
    })?;
    let start = Instant::now();
    let mut summary = Summary::default();
    match &a.out {
        None => collect(&rx, a.duration, &names, None, &mut summary)?,
        // Rows stream into the unnamed temporary file, named only when the run ends well.
        Some(p) => iolearn_safeio::write_with(p, |w| {
            let mut csv = csv::Writer::from_writer(w as &mut dyn std::io::Write);
            csv.write_record([
                "time_ns", "device", "event", "offset", "bytes", "tid", "prio", "write", "request",
            ])?;
            collect(&rx, a.duration, &names, Some(&mut csv), &mut summary)?;
            csv.flush()
        })?,
    }
    // The watch's last events (the ring drained at its stop) are not in the summary: at most
    // a millisecond's worth.
    let lost = watch.stop()?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} events in {:.1} s, {lost} lost{}",
        summary.events,
        start.elapsed().as_secs_f64(),
        a.out.as_ref().map_or(String::new(), |p| format!(" ({})", p.display()))
    )?;
    writeln!(out, "device  prio  requests  queued p50 / p99 us  driver p50 / p99 us")?;
    for ((dev, prio), w) in &mut summary.waits {
        writeln!(
            out,
            "{:<7} {:<5} {:>8}  {:>8.0} / {:<8.0}  {:>8.0} / {:<8.0}",
            names[*dev],
            prio,
            w.queued.len(),
            pct(&mut w.queued, 0.5),
            pct(&mut w.queued, 0.99),
            pct(&mut w.served, 0.5),
            pct(&mut w.served, 0.99)
        )?;
    }
    Ok(())
}
