//! `iolearn probe ssd`: a drive's internals from latencies alone (the graybox prober of
//! `iolearn-graybox`): write-buffer unit (page) and size, parallel units, channels, GC onset.
//! On a simulated drive the true values are printed beside what was found.

use anyhow::{bail, Context, Result};
use clap::Args;
use iolearn_flash::ssd::{GcMode, SsdConfig};
use iolearn_graybox::{Finding, Options, Report, Truth};
use std::io::IsTerminal;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;

/// Options of `iolearn probe ssd`.
#[derive(Args)]
pub struct SsdArgs {
    /// A simulated drive: a preset (consumer, enterprise), `random:SEED` (a drive of random
    /// geometry and timing) or a TOML file of its geometry and timing. The GC probe runs on a
    /// fresh copy, so its onset is not moved by the other probes' garbage.
    #[arg(long, conflicts_with = "device", required_unless_present = "device")]
    sim: Option<String>,
    /// The simulated drive's GC design (base, plane-blocking, tolerant, preemptive, no-gc).
    #[arg(long, default_value = "base", requires = "sim")]
    gc_mode: String,
    /// A real block device or file, probed through io_uring with O_DIRECT. Its data is
    /// overwritten: needs --allow-writes, and a block device must not be mounted or held.
    #[arg(long)]
    device: Option<PathBuf>,
    /// Allow the probes to overwrite the device's data.
    #[arg(long, requires = "device")]
    allow_writes: bool,
    /// Skip the GC-onset probe (it writes the whole device, then more at random).
    #[arg(long)]
    no_gc: bool,
    /// Writes in flight at once.
    #[arg(long, default_value_t = 32)]
    queue_depth: usize,
    /// The first stride of the page probe, bytes (a power of two): pages up to half of it are
    /// found, larger ones reported as "at least" it.
    #[arg(long, default_value_t = 128 << 10)]
    max_page: u64,
    /// Farthest distance, in pages, between two pages read together (the most parallel
    /// units that can be found).
    #[arg(long, default_value_t = 1024)]
    max_distance: usize,
    /// Stop the GC probe after writing this many times the capacity.
    #[arg(long, default_value_t = 3.0)]
    gc_budget: f64,
    /// Seed of the GC probe's random writes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the report (and, simulated, the true values) as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(serde::Serialize)]
struct Output<'a> {
    report: &'a Report,
    #[serde(skip_serializing_if = "Option::is_none")]
    truth: Option<Truth>,
}

pub fn run(a: SsdArgs) -> Result<()> {
    let o = Options {
        queue_depth: a.queue_depth,
        max_unit_bytes: a.max_page,
        max_distance: a.max_distance,
        gc: !a.no_gc,
        gc_budget: a.gc_budget,
        seed: a.seed,
        ..Options::default()
    };
    if let Some(p) = &a.json {
        iolearn_safeio::check_target(p)?;
    }
    let tty = std::io::stderr().is_terminal();
    let mut progress = |s: &str| {
        if tty {
            eprintln!("{s}");
        }
    };
    let (report, truth) = match (&a.sim, &a.device) {
        (Some(sim), _) => {
            if a.allow_writes {
                bail!("--allow-writes: only for --device (a simulated drive has no data to lose)");
            }
            if let Some(j) = &a.json {
                if iolearn_safeio::same_file(j, std::path::Path::new(sim)) {
                    bail!("--json {}: is the drive's configuration file", j.display());
                }
            }
            let cfg = sim_config(sim)?;
            let mode = GcMode::by_name(&a.gc_mode)
                .with_context(|| format!("--gc-mode: {:?} (one of {})", a.gc_mode, GcMode::NAMES))?;
            let (report, truth) = iolearn_graybox::probe_sim(&cfg, mode, &o, &mut progress).map_err(flag_names)?;
            (report, Some(truth))
        }
        (None, Some(dev)) => {
            if !a.allow_writes {
                bail!(
                    "{}: probing overwrites the device's data; add --allow-writes if that is intended",
                    dev.display()
                );
            }
            if a.gc_mode != "base" {
                bail!("--gc-mode: a simulated drive's design; a real device has its own");
            }
            if let Some(j) = &a.json {
                if iolearn_safeio::same_file(j, dev) {
                    bail!("--json {}: is the device being probed", j.display());
                }
            }
            // Checked by name first (the clearest refusal), then opened (exclusively, no
            // links, nothing written yet) and checked again by the number of what was opened,
            // so nothing can be swapped in between.
            if let Ok(m) = std::fs::metadata(dev) {
                if m.file_type().is_block_device() {
                    refuse_system_disk(dev, m.rdev())?;
                }
            }
            let mut t = iolearn_graybox::DeviceTarget::open(dev)?;
            if let Some(rdev) = t.device_number() {
                refuse_system_disk(dev, rdev)?;
            }
            (
                iolearn_graybox::probe(&mut t, &o, &mut progress).map_err(flag_names)?,
                None,
            )
        }
        (None, None) => bail!("--sim or --device: what to probe"),
    };
    print!("{}", table(&report, truth.as_ref()));
    if let Some(p) = &a.json {
        let out = Output { report: &report, truth };
        let mut text = serde_json::to_string_pretty(&out)?;
        text.push('\n');
        iolearn_safeio::write(p, text.as_bytes())?;
    }
    Ok(())
}

/// No part of the disk that holds `/` is ever probed, whatever the flags: the probes overwrite
/// data. `rdev` is the opened device's number; the disk it is on (itself, or its parent when
/// it is a partition) must not be a system disk.
fn refuse_system_disk(dev: &std::path::Path, rdev: u64) -> Result<()> {
    let sys = PathBuf::from(format!("/sys/dev/block/{}:{}", libc::major(rdev), libc::minor(rdev)));
    let Ok(link) = std::fs::read_link(&sys) else {
        bail!(
            "{}: {} unreadable: cannot tell which disk this is, so not probing it",
            dev.display(),
            sys.display()
        );
    };
    let name = |p: &std::path::Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let mut disks: Vec<String> = name(&link).into_iter().collect();
    if sys.join("partition").exists() {
        disks.extend(link.parent().and_then(name));
    }
    let system = iolearn_tune::system_disks();
    if let Some(d) = disks.iter().find(|d| system.contains(d)) {
        bail!(
            "{}: on {d}, which holds / (the system disk); no part of it is ever probed",
            dev.display()
        );
    }
    Ok(())
}

/// Errors about options name the flags, not the fields behind them.
fn flag_names(e: iolearn_graybox::Error) -> anyhow::Error {
    let mut text = e.0;
    for (field, flag) in [
        ("queue_depth", "--queue-depth"),
        ("max_unit_bytes", "--max-page"),
        ("max_distance", "--max-distance"),
        ("gc_budget", "--gc-budget"),
    ] {
        if let Some(rest) = text.strip_prefix(field) {
            text = format!("{flag}{rest}");
        }
    }
    anyhow::anyhow!(text)
}

/// A preset by name, `random:SEED`, or a TOML file.
fn sim_config(sim: &str) -> Result<SsdConfig> {
    if let Some(cfg) = SsdConfig::by_name(sim) {
        return Ok(cfg);
    }
    if let Some(seed) = sim.strip_prefix("random:") {
        let seed = seed.parse::<u64>().map_err(|_| {
            anyhow::anyhow!(
                "--sim: {} (random:SEED, SEED a whole number)",
                iolearn_safeio::excerpt(sim, 40)
            )
        })?;
        return Ok(iolearn_graybox::random_drive(seed));
    }
    let path = PathBuf::from(sim);
    if !sim.contains('/') && !sim.ends_with(".toml") {
        bail!(
            "--sim: {} is not a preset ({}), random:SEED or a .toml file",
            iolearn_safeio::excerpt(sim, 40),
            SsdConfig::preset_names().collect::<Vec<_>>().join(", ")
        );
    }
    match std::fs::metadata(&path) {
        Ok(m) if !m.is_file() => bail!("--sim {}: not a regular file", path.display()),
        _ => {}
    }
    let text = crate::files::read_text(&path)?;
    SsdConfig::from_toml(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Bytes in whole units when exact (16 KiB), else to two decimals of the largest unit.
fn bytes(v: Option<u64>) -> String {
    v.map_or("-".into(), |b| {
        let exact = iolearn_safeio::human(b);
        match [(30, "GiB"), (20, "MiB"), (10, "KiB")]
            .iter()
            .find(|(shift, _)| b >= 1 << shift)
        {
            Some(&(shift, unit)) if !exact.ends_with(unit) => {
                format!("{:.2} {unit}", b as f64 / (1u64 << shift) as f64)
            }
            _ => exact,
        }
    })
}

fn count(v: Option<u64>) -> String {
    v.map_or("-".into(), |c| c.to_string())
}

/// The report as a table: property, found, (true,) how.
fn table(r: &Report, truth: Option<&Truth>) -> String {
    let rows: [(&str, &Finding, String, Option<String>); 7] = [
        (
            "page (buffer unit)",
            &r.unit_bytes,
            bytes(r.unit_bytes.value),
            truth.map(|t| bytes(Some(t.unit_bytes))),
        ),
        (
            "write buffer",
            &r.buffer_bytes,
            bytes(r.buffer_bytes.value),
            truth.map(|t| bytes(Some(t.buffer_bytes))),
        ),
        (
            "lone page read",
            &r.read_ns,
            r.read_ns
                .value
                .map_or("-".into(), |ns| format!("{:.1} us", ns as f64 / 1e3)),
            truth.map(|_| String::new()),
        ),
        (
            "flush interval",
            &r.flush_interval_ns,
            r.flush_interval_ns
                .value
                .map_or("-".into(), |ns| format!("{:.1} ms", ns as f64 / 1e6)),
            truth.map(|t| format!("{:.1} ms", t.flush_interval_ns as f64 / 1e6)),
        ),
        (
            "parallel units",
            &r.parallel_units,
            count(r.parallel_units.value),
            truth.map(|t| t.parallel_units.to_string()),
        ),
        (
            "channels",
            &r.channels,
            count(r.channels.value),
            truth.map(|t| t.channels.to_string()),
        ),
        (
            "GC onset",
            &r.gc_onset_bytes,
            bytes(r.gc_onset_bytes.value),
            truth.map(|t| bytes(t.gc_onset_bytes)),
        ),
    ];
    let mut out = format!(
        "{} ({:.1} GiB, {} I/Os, {} written)\n",
        iolearn_safeio::printable(&r.target),
        r.capacity_bytes as f64 / (1u64 << 30) as f64,
        r.ios,
        bytes(Some(r.written_bytes))
    );
    let head = if truth.is_some() { "true" } else { "" };
    out += &format!("{:<20} {:>12} {:>12}  how\n", "property", "found", head);
    for (name, f, found, t) in rows {
        out += &format!("{name:<20} {found:>12} {:>12}  {}\n", t.unwrap_or_default(), f.how);
    }
    out
}
