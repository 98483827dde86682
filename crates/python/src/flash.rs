//! Bindings of the flash world (`iolearn-flash`): a trace replayed on replicated simulated
//! SSDs, streamed (any length in constant memory).

use iolearn_flash::replay::{ReadSummary, ReplayConfig, Replayer};
use iolearn_flash::ssd::GcMode;
use iolearn_trace::stream::Stream;
use iolearn_trace::{Format, ReadOptions};
use numpy::IntoPyArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

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
                    iolearn_tail::check_requests(&[io]).map_err(|e| {
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

/// A block trace replayed on replicated simulated SSDs, chunk by chunk: `next_chunk(rows)`
/// returns a dict of equal-length numpy arrays (arrival_ns, offset, size, write, replica,
/// latency_ns, pending, plane_wait_ns, channel_wait_ns, gc_active, buffered_pages), None at
/// the end; `summary()` the reads so far. Memory stays flat at any trace length. (Used from
/// the thread that made it: a file reader and the drives are not shared between threads.)
#[pyclass(module = "iolearn._native", unsendable)]
pub struct SsdReplay {
    passes: Passes,
    replayer: Replayer,
    summary: ReadSummary,
    done: bool,
}

#[pymethods]
impl SsdReplay {
    #[new]
    #[pyo3(signature = (trace, preset="enterprise", mode="base", replicas=3, hop_us=15.0, noise="quiet", precondition=1.0, seed=1, skip_bad=false, trace_format=None, repeat=1))]
    #[allow(clippy::too_many_arguments)] // mirrors the Python keyword arguments one to one
    fn new(
        trace: PathBuf,
        preset: &str,
        mode: &str,
        replicas: usize,
        hop_us: f64,
        noise: &str,
        precondition: f64,
        seed: u64,
        skip_bad: bool,
        trace_format: Option<&str>,
        repeat: u64,
    ) -> PyResult<Self> {
        let ssd = match crate::tail::drive(preset) {
            Ok(iolearn_tail::DriveConfig::Ssd(c)) => c,
            Err(e) if preset.ends_with(".toml") => return Err(e),
            _ => {
                return Err(PyValueError::new_err(format!(
                    "unknown SSD preset {preset:?} (consumer, enterprise, or an SSD configuration *.toml)"
                )))
            }
        };
        let mode = GcMode::by_name(mode)
            .ok_or_else(|| PyValueError::new_err(format!("unknown GC mode {mode:?} ({})", GcMode::NAMES)))?;
        crate::tail::check_replicas(replicas, "hop_us", hop_us)?;
        crate::tail::check_precondition(precondition)?;
        if !(1..=1_000_000).contains(&repeat) {
            return Err(PyValueError::new_err(format!("repeat: {repeat} (1 to 1,000,000)")));
        }
        if repeat > 1 && trace.as_os_str() == "-" {
            return Err(PyValueError::new_err("repeat: standard input can be read only once"));
        }
        let noise = crate::tail::noise_preset(noise, replicas)?;
        if noise.iter().any(|n| matches!(n, iolearn_flash::replicas::Noise::Io(_))) {
            // The per-I/O replay serves the trace only; other tenants' I/O needs the event loop
            // of the admission harness (`TailWorld`, `iolearn eval admission`).
            return Err(PyValueError::new_err(
                "noise: other tenants' I/O (ec2-io, tailatstore-io, bursty-io, io:...) is simulated by `iolearn eval \
                 admission` (TailWorld), not by sim ssd; use quiet, ec2, tailatstore or failslow here",
            ));
        }
        let format = crate::trace::format(trace_format)?;
        let opts = ReadOptions { skip_bad };
        let stream = Stream::open(&trace, format, opts).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let cfg = ReplayConfig {
            ssd,
            mode,
            replicas,
            hop_ns: (hop_us * 1e3) as u64,
            noise,
            precondition,
            seed,
        };
        Ok(SsdReplay {
            passes: Passes {
                path: trace,
                format,
                opts,
                stream,
                repeat,
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

    /// The next up to `rows` I/Os replayed (None when the trace is done).
    fn next_chunk<'py>(&mut self, py: Python<'py>, rows: usize) -> PyResult<Option<Bound<'py, PyDict>>> {
        if !(1..=1 << 26).contains(&rows) {
            return Err(PyValueError::new_err(format!("rows: {rows} (1 to 2^26)")));
        }
        if self.done {
            return Ok(None);
        }
        let (passes, replayer, summary) = (&mut self.passes, &mut self.replayer, &mut self.summary);
        let (recs, end) = py
            .detach(|| -> Result<_, String> {
                let mut recs = Vec::with_capacity(rows.min(1 << 20));
                while recs.len() < rows {
                    let Some(io) = passes.next()? else {
                        return Ok((recs, true));
                    };
                    let r = replayer.push(io);
                    summary.add(&r, true);
                    recs.push(r);
                }
                Ok((recs, false))
            })
            .map_err(PyValueError::new_err)?;
        self.done = end;
        if recs.is_empty() {
            return Ok(None);
        }
        let d = PyDict::new(py);
        macro_rules! col {
            ($name:literal, $f:expr) => {
                d.set_item($name, recs.iter().map($f).collect::<Vec<_>>().into_pyarray(py))?;
            };
        }
        col!("arrival_ns", |r| r.arrival_ns);
        col!("offset", |r| r.offset);
        col!("size", |r| r.size);
        col!("write", |r| r.write);
        col!("replica", |r| r.replica);
        col!("latency_ns", |r| r.latency_ns);
        col!("pending", |r| r.pending);
        col!("plane_wait_ns", |r| r.plane_wait_ns);
        col!("channel_wait_ns", |r| r.channel_wait_ns);
        col!("gc_active", |r| r.gc_active);
        col!("buffered_pages", |r| r.buffered_pages);
        Ok(Some(d))
    }

    /// Replay the rest with no per-I/O records (and no device state at arrival, which only
    /// the records carry); `summary()` then has the reads.
    fn run(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.done {
            return Ok(());
        }
        let (passes, replayer, summary) = (&mut self.passes, &mut self.replayer, &mut self.summary);
        py.detach(|| -> Result<(), String> {
            while let Some(io) = passes.next()? {
                summary.add(&replayer.push_with(io, false), false);
            }
            Ok(())
        })
        .map_err(PyValueError::new_err)?;
        self.done = true;
        Ok(())
    }

    /// The reads so far: ios, reads, mean_us, p50_us ... p999_us (percentiles within 0.1%),
    /// gc_share (None after `run`, which records no device state); and skipped (bad lines
    /// skipped).
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.summary;
        let d = PyDict::new(py);
        d.set_item("ios", s.ios())?;
        d.set_item("reads", s.reads())?;
        d.set_item("mean_us", s.mean_ns() / 1e3)?;
        for (name, q) in [
            ("p50_us", 0.5),
            ("p90_us", 0.9),
            ("p95_us", 0.95),
            ("p99_us", 0.99),
            ("p999_us", 0.999),
        ] {
            d.set_item(name, s.quantile_ns(q) as f64 / 1e3)?;
        }
        d.set_item("gc_share", s.gc_share())?;
        d.set_item("skipped", self.passes.skipped + self.passes.stream.skipped())?;
        Ok(d)
    }
}
