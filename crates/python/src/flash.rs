//! Bindings of the flash world (`iolearn-flash`): a trace replayed on replicated simulated SSDs.

use numpy::IntoPyArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;

/// Replay a block trace on replicated simulated SSDs. Returns a dict of equal-length numpy
/// arrays: arrival_ns, offset, size, write, replica, latency_ns, pending, plane_wait_ns,
/// channel_wait_ns, gc_active, buffered_pages; plus "skipped" (bad lines skipped).
#[pyfunction]
#[pyo3(signature = (trace, preset="enterprise", mode="base", replicas=3, hop_us=15.0, noise="quiet", precondition=1.0, seed=1, skip_bad=false, trace_format=None))]
#[allow(clippy::too_many_arguments)]
pub fn sim_ssd<'py>(
    py: Python<'py>,
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
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    use iolearn_flash::replay::{replay, ReplayConfig};
    use iolearn_flash::ssd::GcMode;
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
    let t = iolearn_trace::read_file(&trace, format, iolearn_trace::ReadOptions { skip_bad })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let cfg = ReplayConfig {
        ssd,
        mode,
        replicas,
        hop_ns: (hop_us * 1e3) as u64,
        noise,
        precondition,
        seed,
    };
    let ios: Vec<(u64, u64, u32, bool)> = t
        .ios
        .iter()
        .map(|io| (io.arrival_ns, io.offset, io.size, io.write))
        .collect();
    iolearn_tail::check_requests(&ios).map_err(|e| PyValueError::new_err(format!("{}: {e}", trace.display())))?;
    let recs = py.detach(move || replay(ios, &cfg));
    let d = pyo3::types::PyDict::new(py);
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
    d.set_item("skipped", t.skipped)?;
    Ok(d)
}
