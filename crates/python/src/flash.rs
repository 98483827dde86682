//! Bindings of the flash world (`iolearn-flash`): a trace replayed on replicated simulated
//! SSDs, streamed (any length in constant memory).

use iolearn_tail::replay_file::{FileReplay, Options};
use numpy::IntoPyArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// A block trace replayed on replicated simulated SSDs, chunk by chunk: `next_chunk(rows)`
/// returns a dict of equal-length numpy arrays (arrival_ns, offset, size, write, replica,
/// latency_ns, pending, plane_wait_ns, channel_wait_ns, gc_active, buffered_pages), None at
/// the end; `summary()` the reads so far. Memory stays flat at any trace length. (Used from
/// the thread that made it: a file reader and the drives are not shared between threads.)
#[pyclass(module = "iolearn._native", unsendable)]
pub struct SsdReplay(FileReplay);

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
        let o = Options {
            trace,
            format: crate::trace::format(trace_format)?,
            skip_bad,
            preset: preset.into(),
            mode: mode.into(),
            replicas,
            hop_us,
            noise: noise.into(),
            precondition,
            seed,
            repeat,
        };
        FileReplay::open(&o).map(SsdReplay).map_err(PyValueError::new_err)
    }

    /// The next up to `rows` I/Os replayed (None when the trace is done).
    fn next_chunk<'py>(&mut self, py: Python<'py>, rows: usize) -> PyResult<Option<Bound<'py, PyDict>>> {
        if !(1..=1 << 26).contains(&rows) {
            return Err(PyValueError::new_err(format!("rows: {rows} (1 to 2^26)")));
        }
        let replay = &mut self.0;
        let recs = py
            .detach(|| -> Result<_, String> {
                let mut recs = Vec::with_capacity(rows.min(1 << 20));
                replay.next_chunk(rows, &mut recs)?;
                Ok(recs)
            })
            .map_err(PyValueError::new_err)?;
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
        let replay = &mut self.0;
        py.detach(|| replay.run()).map_err(PyValueError::new_err)
    }

    /// The reads so far: ios, reads, mean_us, p50_us ... p999_us (percentiles within 0.1%),
    /// gc_share (None after `run`, which records no device state); and skipped (bad lines
    /// skipped).
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.0.summary();
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
        d.set_item("skipped", self.0.skipped())?;
        Ok(d)
    }
}
