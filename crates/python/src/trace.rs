//! Bindings of block traces (`iolearn-trace`): read any format, generate synthetic ones.

use numpy::IntoPyArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;

/// A trace format by name (`None`: guessed from the file), or an error naming it.
pub(crate) fn format(name: Option<&str>) -> PyResult<Option<iolearn_trace::Format>> {
    name.map(|f| {
        iolearn_trace::Format::parse(f).ok_or_else(|| PyValueError::new_err(format!("unknown trace format {f:?}")))
    })
    .transpose()
}

/// Read a block trace (linnos, msr, blkparse, binary; guessed when `format` is None). Returns
/// a dict of numpy arrays: arrival_ns, device, offset, size, write, latency_ns (-1: none),
/// queue_depth (-1: none); plus "skipped".
#[pyfunction]
#[pyo3(signature = (path, format=None, skip_bad=false))]
pub fn read_trace<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: Option<&str>,
    skip_bad: bool,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let format = self::format(format)?;
    let t = iolearn_trace::read_file(&path, format, iolearn_trace::ReadOptions { skip_bad })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let d = trace_columns(py, &t.ios)?;
    d.set_item("skipped", t.skipped)?;
    Ok(d)
}

/// A trace's I/Os as a dict of numpy columns (`read_trace`'s, without "skipped").
fn trace_columns<'py>(py: Python<'py>, ios: &[iolearn_trace::BlockIo]) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let d = pyo3::types::PyDict::new(py);
    d.set_item(
        "arrival_ns",
        ios.iter().map(|i| i.arrival_ns).collect::<Vec<_>>().into_pyarray(py),
    )?;
    d.set_item(
        "device",
        ios.iter().map(|i| i.device).collect::<Vec<_>>().into_pyarray(py),
    )?;
    d.set_item(
        "offset",
        ios.iter().map(|i| i.offset).collect::<Vec<_>>().into_pyarray(py),
    )?;
    d.set_item("size", ios.iter().map(|i| i.size).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item(
        "write",
        ios.iter().map(|i| i.write).collect::<Vec<_>>().into_pyarray(py),
    )?;
    let opt =
        |f: &dyn Fn(&iolearn_trace::BlockIo) -> Option<i64>| ios.iter().map(|i| f(i).unwrap_or(-1)).collect::<Vec<_>>();
    d.set_item("latency_ns", opt(&|i| i.latency_ns.map(|v| v as i64)).into_pyarray(py))?;
    d.set_item("queue_depth", opt(&|i| i.queue_depth.map(i64::from)).into_pyarray(py))?;
    Ok(d)
}

/// A synthetic block trace (`iolearn_trace::generate::Spec`; `iolearn trace generate` has the
/// same settings). Returns `read_trace`'s columns; a field out of range is a ValueError naming it.
#[pyfunction]
#[pyo3(signature = (ios=20_000, iops=1000.0, read_share=0.4, burst=4.0, on_ms=20.0, read_kib=4.0, write_kib=4.0, size_sigma=0.7, seq_share=0.2, zipf=0.8, span_gib=16.0, seed=1))]
#[allow(clippy::too_many_arguments)]
pub fn generate_trace<'py>(
    py: Python<'py>,
    ios: usize,
    iops: f64,
    read_share: f64,
    burst: f64,
    on_ms: f64,
    read_kib: f64,
    write_kib: f64,
    size_sigma: f64,
    seq_share: f64,
    zipf: f64,
    span_gib: f64,
    seed: u64,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let spec = iolearn_trace::generate::Spec {
        ios,
        iops,
        read_share,
        burst,
        on_ms,
        read_kib,
        write_kib,
        size_sigma,
        seq_share,
        zipf,
        span_gib,
        seed,
    };
    let trace = py.detach(|| iolearn_trace::generate::generate(&spec)).map_err(|e| {
        // Name the field as this function's keyword (read_share, not read-share).
        let (field, rest) = e.split_once(' ').unwrap_or((&e, ""));
        PyValueError::new_err(format!("{} {rest}", field.replace('-', "_")))
    })?;
    trace_columns(py, &trace)
}
