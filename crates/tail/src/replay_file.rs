//! A trace file replayed on replicated simulated SSDs, streamed: `iolearn sim ssd` and the
//! Python `iolearn.sim_ssd.stream` both drive this, so the options are checked, and the trace
//! played, in one place. The trace is read as it is replayed (any length in constant memory),
//! and may be played several times back to back.

use crate::run::DriveConfig;
use iolearn_flash::replay::{IoRecord, ReadSummary, ReplayConfig, Replayer};
use iolearn_flash::replicas::Noise;
use iolearn_flash::ssd::{GcMode, SsdConfig};
use iolearn_trace::stream::Stream;
use iolearn_trace::{Format, ReadOptions};
use std::path::{Path, PathBuf};

/// The largest `--repeat`.
pub const MAX_REPEAT: u64 = 1_000_000;

/// A drive by preset name (consumer, enterprise, hdd) or from an SSD configuration file
/// (`*.toml`, [`SsdConfig::from_toml`]).
pub fn drive(preset: &str) -> Result<DriveConfig, String> {
    if preset.ends_with(".toml") {
        let text = iolearn_safeio::read_to_string(Path::new(preset), 1 << 16).map_err(|e| e.to_string())?;
        let cfg = SsdConfig::from_toml(&text).map_err(|e| format!("{preset}: {e}"))?;
        return Ok(DriveConfig::Ssd(cfg));
    }
    DriveConfig::by_name(preset).ok_or_else(|| {
        format!("preset: unknown drive {preset:?} (consumer, enterprise, hdd, or an SSD configuration *.toml)")
    })
}

/// Named noise for `replicas` replicas ([`Noise::preset`]), or an error listing what there is.
pub fn noise(name: &str, replicas: usize) -> Result<Vec<Noise>, String> {
    Noise::preset(name, replicas).ok_or_else(|| {
        format!(
            "noise: unknown {name:?} ({}, or io:IOPS,KIB,READ_SHARE with IOPS 0.001 to 1e7, KIB 0.5 to 65536, \
             READ_SHARE 0 to 1)",
            Noise::NAMES.join(", ")
        )
    })
}

/// The replica count and failover (or hop) delay every replicated world shares: 1 to 8
/// replicas, a delay from 0 to an hour (its nanoseconds fit any sum).
pub fn check_replicas(replicas: usize, delay_name: &str, delay_us: f64) -> Result<(), String> {
    if !(1..=8).contains(&replicas) {
        return Err(format!("replicas must be 1 to 8, got {replicas}"));
    }
    if !(delay_us.is_finite() && (0.0..=3.6e9).contains(&delay_us)) {
        return Err(format!("{delay_name} must be 0 to 3.6e9, got {delay_us:?}"));
    }
    Ok(())
}

/// Preconditioning overwrites the drive this many times over: 0 to 10 (10 is far past steady
/// state; more would only run for minutes).
pub fn check_precondition(precondition: f64) -> Result<(), String> {
    if !(precondition.is_finite() && (0.0..=10.0).contains(&precondition)) {
        return Err(format!("precondition must be 0 to 10, got {precondition:?}"));
    }
    Ok(())
}

/// How to replay a trace file (`iolearn sim ssd`'s options).
#[derive(Debug, Clone)]
pub struct Options {
    /// The trace (`-`: standard input).
    pub trace: PathBuf,
    /// Its format (None: guessed).
    pub format: Option<Format>,
    /// Skip unreadable lines instead of stopping at the first.
    pub skip_bad: bool,
    /// consumer, enterprise, or an SSD configuration `*.toml`.
    pub preset: String,
    /// The GC design ([`GcMode::by_name`]).
    pub mode: String,
    /// Replicas, 1 to 8.
    pub replicas: usize,
    /// Network hop / failover cost, us.
    pub hop_us: f64,
    /// Noise preset (quiet, ec2, tailatstore, failslow).
    pub noise: String,
    /// Random overwrites before the replay, x capacity (0 to 10).
    pub precondition: f64,
    /// Seed.
    pub seed: u64,
    /// Plays of the trace, back to back (1 to [`MAX_REPEAT`]).
    pub repeat: u64,
}

/// The replay of a trace file, I/O by I/O, with a summary of its reads.
pub struct FileReplay {
    passes: Passes,
    replayer: Replayer,
    summary: ReadSummary,
    done: bool,
}

impl FileReplay {
    /// Check `o` and open its trace; the drives are built (and preconditioned) here. Errors
    /// name the option or the file.
    pub fn open(o: &Options) -> Result<FileReplay, String> {
        let ssd = match drive(&o.preset) {
            Ok(DriveConfig::Ssd(c)) => c,
            Err(e) if o.preset.ends_with(".toml") => return Err(e),
            _ => {
                return Err(format!(
                    "unknown SSD preset {:?} (consumer, enterprise, or an SSD configuration *.toml)",
                    o.preset
                ))
            }
        };
        let mode =
            GcMode::by_name(&o.mode).ok_or_else(|| format!("unknown GC mode {:?} ({})", o.mode, GcMode::NAMES))?;
        check_replicas(o.replicas, "hop_us", o.hop_us)?;
        check_precondition(o.precondition)?;
        if !(1..=MAX_REPEAT).contains(&o.repeat) {
            return Err(format!("repeat: {} (1 to 1,000,000)", o.repeat));
        }
        if o.repeat > 1 && o.trace.as_os_str() == "-" {
            return Err("repeat: standard input can be read only once".into());
        }
        let noise = noise(&o.noise, o.replicas)?;
        if noise.iter().any(|n| matches!(n, Noise::Io(_))) {
            // The per-I/O replay serves the trace only; other tenants' I/O needs the event loop
            // of the admission harness (`TailWorld`, `iolearn eval admission`).
            return Err(
                "noise: other tenants' I/O (ec2-io, tailatstore-io, bursty-io, io:...) is simulated by `iolearn eval \
                 admission` (TailWorld), not by sim ssd; use quiet, ec2, tailatstore or failslow here"
                    .into(),
            );
        }
        let opts = ReadOptions { skip_bad: o.skip_bad };
        let stream = Stream::open(&o.trace, o.format, opts).map_err(|e| e.to_string())?;
        let cfg = ReplayConfig {
            ssd,
            mode,
            replicas: o.replicas,
            hop_ns: (o.hop_us * 1e3) as u64,
            noise,
            precondition: o.precondition,
            seed: o.seed,
        };
        Ok(FileReplay {
            passes: Passes {
                path: o.trace.clone(),
                format: o.format,
                opts,
                stream,
                repeat: o.repeat,
                pass: 0,
                shift_ns: 0,
                first_ns: None,
                last_ns: 0,
                in_pass: 0,
                skipped: 0,
                index: 0,
            },
            replayer: Replayer::new(&cfg),
            summary: ReadSummary::default(),
            done: false,
        })
    }

    /// Replay up to `rows` more I/Os into `out` (cleared first), each with the device state it
    /// met; false once the trace is done (`out` may still hold the last I/Os).
    pub fn next_chunk(&mut self, rows: usize, out: &mut Vec<IoRecord>) -> Result<bool, String> {
        out.clear();
        while out.len() < rows && !self.done {
            match self.passes.next()? {
                Some(io) => {
                    let r = self.replayer.push(io);
                    self.summary.add(&r, true);
                    out.push(r);
                }
                None => self.done = true,
            }
        }
        Ok(!self.done)
    }

    /// Replay the rest with no per-I/O records (and no device state at arrival, which only
    /// the records carry); [`FileReplay::summary`] then has the reads.
    pub fn run(&mut self) -> Result<(), String> {
        while !self.done {
            match self.passes.next()? {
                Some(io) => self.summary.add(&self.replayer.push_with(io, false), false),
                None => self.done = true,
            }
        }
        Ok(())
    }

    /// The reads so far.
    pub fn summary(&self) -> &ReadSummary {
        &self.summary
    }

    /// Bad lines skipped so far (with `skip_bad`).
    pub fn skipped(&self) -> usize {
        self.passes.skipped + self.passes.stream.skipped()
    }
}

/// The trace, played `repeat` times back to back (each pass starts one mean gap after the
/// last one's final arrival).
struct Passes {
    path: PathBuf,
    format: Option<Format>,
    opts: ReadOptions,
    stream: Stream,
    repeat: u64,
    pass: u64,
    /// Added to this pass's arrivals (relative to its first).
    shift_ns: u64,
    first_ns: Option<u64>,
    last_ns: u64,
    in_pass: u64,
    /// Bad lines skipped in the passes before this one.
    skipped: usize,
    /// I/Os handed out so far (over all passes): errors name an I/O by it.
    index: u64,
}

impl Passes {
    /// The next I/O, `Ok(None)` at the end of the last pass.
    fn next(&mut self) -> Result<Option<(u64, u64, u32, bool)>, String> {
        loop {
            match self.stream.next() {
                Some(Ok(io)) => {
                    let first = *self.first_ns.get_or_insert(io.arrival_ns);
                    self.last_ns = self.last_ns.max(io.arrival_ns);
                    self.in_pass += 1;
                    let at = self.shift_ns.saturating_add(io.arrival_ns.saturating_sub(first));
                    let io = (at, io.offset, io.size, io.write);
                    crate::check_requests(&[io]).map_err(|e| {
                        format!(
                            "{}: {}",
                            self.path.display(),
                            e.replace("I/O 0", &format!("I/O {}", self.index))
                        )
                    })?;
                    self.index += 1;
                    return Ok(Some(io));
                }
                Some(Err(e)) => return Err(e.to_string()),
                None => {
                    self.pass += 1;
                    if self.pass >= self.repeat || self.in_pass == 0 {
                        return Ok(None);
                    }
                    self.skipped += self.stream.skipped();
                    let span = self.last_ns - self.first_ns.unwrap_or(0);
                    let gap = if self.in_pass > 1 {
                        span / (self.in_pass - 1)
                    } else {
                        1_000_000
                    };
                    self.shift_ns = self
                        .shift_ns
                        .checked_add(span + gap.max(1))
                        .filter(|&s| s < 1 << 62)
                        .ok_or_else(|| {
                            format!("--repeat {}: the replayed trace would span over 2^62 ns", self.repeat)
                        })?;
                    (self.first_ns, self.last_ns, self.in_pass) = (None, 0, 0);
                    self.stream = Stream::open(&self.path, self.format, self.opts).map_err(|e| e.to_string())?;
                }
            }
        }
    }
}
