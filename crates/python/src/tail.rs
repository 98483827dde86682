//! Bindings of the tail-latency harness (`iolearn-tail`): `TailWorld(...).run(policy, ...)`.

use iolearn_flash::replicas::Noise;
use iolearn_flash::ssd::GcMode;
use iolearn_policy::admission::FeatureSet;
use iolearn_tail::{replicate_with_deadlines, DriveConfig, PolicySpec, World, WorldConfig};
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Simulated SSD replicas, aged once; every `run` starts from the same state.
#[pyclass(module = "iolearn._native")]
pub struct TailWorld {
    world: World,
}

fn matrix<'py>(py: Python<'py>, rows: Vec<Vec<f32>>, dim: usize) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let n = rows.len();
    let flat: Vec<f32> = rows.into_iter().flatten().collect();
    let arr =
        numpy::ndarray::Array2::from_shape_vec((n, dim), flat).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(arr.into_pyarray(py))
}

#[pymethods]
impl TailWorld {
    #[new]
    #[pyo3(signature = (preset="consumer", mode="base", replicas=3, failover_us=15.0, noise="quiet", precondition=1.0, seed=1, cache_mb=0))]
    #[allow(clippy::too_many_arguments)] // mirrors the Python keyword arguments one to one
    fn new(
        py: Python<'_>,
        preset: &str,
        mode: &str,
        replicas: usize,
        failover_us: f64,
        noise: &str,
        precondition: f64,
        seed: u64,
        cache_mb: u64,
    ) -> PyResult<Self> {
        let drive = drive(preset)?;
        let mode = GcMode::by_name(mode)
            .ok_or_else(|| PyValueError::new_err(format!("mode: unknown GC mode {mode:?} ({})", GcMode::NAMES)))?;
        check_replicas(replicas, "failover_us", failover_us)?;
        check_precondition(precondition)?;
        if cache_mb > 1 << 20 {
            return Err(PyValueError::new_err(format!("cache_mb: {cache_mb} (at most 1048576)")));
        }
        let noise = crate::tail::noise_preset(noise, replicas)?;
        let cfg = WorldConfig {
            drive,
            mode,
            replicas,
            failover_ns: (failover_us * 1e3) as u64,
            noise,
            precondition,
            seed,
            cache_pages: (cache_mb << 20 >> 12) as usize,
        };
        let world = py.detach(move || World::new(cfg));
        Ok(TailWorld { world })
    }

    /// Replay a trace slice (arrays) with `policy` (`ADMISSION[+CLIENT]`, see
    /// `iolearn_tail::spec`); arrivals are scaled by `rate` and every replica replays its own
    /// shifted copy. Returns a dict of arrays: `reads` (arrival_ns, primary, served_by,
    /// latency_ns, revoked, duplicates), `decisions` (at_ns, replica, admitted, latency_ns,
    /// infer_ns), and with `samples=True` the training rows (`linnos`, `mittos`, `tail`
    /// feature matrices, latency_ns, replica, arrival_ns, white-box columns). `deadline_us`:
    /// each I/O's own deadline (MittOS's SLO; NaN: none), which policies that predict a
    /// latency use instead of their threshold.
    #[pyo3(signature = (policy, arrival_ns, offset, size, write, rate=1.0, samples=false, seed=0, deadline_us=None))]
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        policy: &str,
        arrival_ns: PyReadonlyArray1<u64>,
        offset: PyReadonlyArray1<u64>,
        size: PyReadonlyArray1<u32>,
        write: PyReadonlyArray1<bool>,
        rate: f64,
        samples: bool,
        seed: u64,
        deadline_us: Option<PyReadonlyArray1<f64>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let quoted = iolearn_safeio::excerpt(policy, 60);
        let spec = PolicySpec::parse(policy).map_err(|e| PyValueError::new_err(format!("policy {quoted}: {e}")))?;
        let mut admission = spec
            .build(seed, self.world.timing(), self.world.config().replicas)
            .map_err(|e| PyValueError::new_err(format!("policy {quoted}: {e}")))?;
        let (a, o, s, w) = (
            arrival_ns.as_array(),
            offset.as_array(),
            size.as_array(),
            write.as_array(),
        );
        let n = a.len();
        if o.len() != n || s.len() != n || w.len() != n {
            return Err(PyValueError::new_err(
                "arrival_ns, offset, size and write differ in length",
            ));
        }
        let ios: Vec<(u64, u64, u32, bool)> = (0..n).map(|i| (a[i], o[i], s[i], w[i])).collect();
        let deadlines: Vec<Option<u64>> = match &deadline_us {
            None => Vec::new(),
            Some(d) => {
                let d = d.as_array();
                if d.len() != n {
                    return Err(PyValueError::new_err("deadline_us and arrival_ns differ in length"));
                }
                d.iter()
                    .enumerate()
                    .map(|(i, &v)| match v {
                        v if v.is_nan() => Ok(None),
                        v if (0.0..=3.6e9).contains(&v) => Ok(Some((v * 1e3) as u64)),
                        v => Err(PyValueError::new_err(format!(
                            "deadline_us of I/O {i}: {v} (0 to 3.6e9 us, or NaN for none)"
                        ))),
                    })
                    .collect::<PyResult<_>>()?
            }
        };
        let reqs = replicate_with_deadlines(&ios, &deadlines, self.world.config().replicas, rate)
            .map_err(PyValueError::new_err)?;
        let client = spec.client;
        let world = &self.world;
        // The policy is not Send (a model's workspace): run on this thread.
        let r = world.run_ranked(&reqs, admission.as_mut(), client, spec.rank, samples);
        let d = PyDict::new(py);
        let reads = PyDict::new(py);
        macro_rules! col {
            ($dict:expr, $rows:expr, $name:literal, $f:expr) => {
                $dict.set_item($name, $rows.iter().map($f).collect::<Vec<_>>().into_pyarray(py))?;
            };
        }
        col!(reads, r.reads, "arrival_ns", |x| x.arrival_ns);
        col!(reads, r.reads, "primary", |x| x.primary);
        col!(reads, r.reads, "served_by", |x| x.served_by);
        col!(reads, r.reads, "latency_ns", |x| x.latency_ns);
        col!(reads, r.reads, "revoked", |x| x.revoked);
        col!(reads, r.reads, "duplicates", |x| x.duplicates);
        d.set_item("reads", reads)?;
        let dec = PyDict::new(py);
        col!(dec, r.decisions, "at_ns", |x| x.at_ns);
        col!(dec, r.decisions, "replica", |x| x.replica);
        col!(dec, r.decisions, "admitted", |x| x.admitted);
        col!(dec, r.decisions, "latency_ns", |x| x.latency_ns);
        col!(dec, r.decisions, "infer_ns", |x| x.infer_ns);
        d.set_item("decisions", dec)?;
        if samples {
            let sm = PyDict::new(py);
            for set in [
                FeatureSet::Linnos,
                FeatureSet::Mittos,
                FeatureSet::Tail,
                FeatureSet::TailBooks,
            ] {
                let rows: Vec<Vec<f32>> = r.samples.iter().map(|s| s.features(set)).collect();
                let key = match set {
                    FeatureSet::Linnos => "linnos",
                    FeatureSet::Mittos => "mittos",
                    FeatureSet::Tail => "tail",
                    FeatureSet::TailBooks => "tail_books",
                };
                sm.set_item(key, matrix(py, rows, set.dim())?)?;
            }
            col!(sm, r.samples, "latency_ns", |x| x.latency_ns);
            col!(sm, r.samples, "replica", |x| x.replica);
            col!(sm, r.samples, "arrival_ns", |x| x.arrival_ns);
            col!(sm, r.samples, "pending_pages", |x| x.pending_pages);
            col!(sm, r.samples, "plane_wait_ns", |x| x.white_box.plane_wait_ns);
            col!(sm, r.samples, "channel_wait_ns", |x| x.white_box.channel_wait_ns);
            col!(sm, r.samples, "gc_active", |x| x.white_box.gc_active);
            d.set_item("samples", sm)?;
        }
        Ok(d)
    }

    /// The drive's page read, transfer and controller times (ns), MittSSD's model.
    fn timing(&self) -> (u64, u64, u64) {
        let t = self.world.timing();
        (t.read_ns, t.transfer_ns, t.controller_ns)
    }
}

/// LinnOS's inflection point of a latency sample (us): (percentile, latency us). With
/// `others_us` (the other devices' latencies), failed-over tries draw from them, as LinnOS
/// labels one device of several. See `iolearn_policy::latency::inflection_point_per_device`.
#[pyfunction]
#[pyo3(signature = (latencies_us, replicas=3, failover_us=15.0, trials=1_000_000, seed=0, others_us=None))]
pub fn inflection_point(
    py: Python<'_>,
    latencies_us: PyReadonlyArray1<f64>,
    replicas: u32,
    failover_us: f64,
    trials: usize,
    seed: u64,
    others_us: Option<PyReadonlyArray1<f64>>,
) -> PyResult<(f64, f64)> {
    let finite = |name: &str, v: &[f64], empty_ok: bool| {
        if (v.is_empty() && !empty_ok) || v.iter().any(|x| !(x.is_finite() && *x >= 0.0)) {
            Err(PyValueError::new_err(format!(
                "{name} must be non-empty, finite and non-negative"
            )))
        } else {
            Ok(())
        }
    };
    let v: Vec<f64> = latencies_us.as_array().iter().copied().collect();
    let others: Vec<f64> = others_us.map_or_else(Vec::new, |o| o.as_array().iter().copied().collect());
    check_replicas(replicas as usize, "failover_us", failover_us)?;
    finite("latencies_us", &v, false)?;
    finite("others_us", &others, true)?;
    if !(1..=10_000_000).contains(&trials) {
        return Err(PyValueError::new_err(format!("trials must be 1 to 1e7, got {trials}")));
    }
    Ok(py.detach(move || {
        iolearn_policy::latency::inflection_point_per_device(&v, &others, replicas, failover_us, trials, seed)
    }))
}

/// A drive by preset name (`consumer`, `enterprise`, `hdd`) or an SSD configuration file
/// (`*.toml`, the presets' format: `crates/flash/presets/`); errors name the file and field.
pub(crate) fn drive(preset: &str) -> PyResult<DriveConfig> {
    iolearn_tail::replay_file::drive(preset).map_err(PyValueError::new_err)
}

/// Named noise for `replicas` replicas (`Noise::preset`), or an error listing what there is.
pub(crate) fn noise_preset(name: &str, replicas: usize) -> PyResult<Vec<Noise>> {
    iolearn_tail::replay_file::noise(name, replicas).map_err(PyValueError::new_err)
}

/// The replica count and failover (or hop) delay every replicated world shares.
pub(crate) fn check_replicas(replicas: usize, delay_name: &str, delay_us: f64) -> PyResult<()> {
    iolearn_tail::replay_file::check_replicas(replicas, delay_name, delay_us).map_err(PyValueError::new_err)
}

/// Preconditioning overwrites the drive this many times over: 0 to 10.
pub(crate) fn check_precondition(precondition: f64) -> PyResult<()> {
    iolearn_tail::replay_file::check_precondition(precondition).map_err(PyValueError::new_err)
}

/// (predicted, actual) pairs from two equally long arrays.
fn pairs(predicted: &PyReadonlyArray1<f64>, actual: &PyReadonlyArray1<f64>) -> PyResult<Vec<(f64, f64)>> {
    let (p, a) = (predicted.as_array(), actual.as_array());
    if p.len() != a.len() {
        return Err(PyValueError::new_err("predicted and actual differ in length"));
    }
    if p.is_empty() || p.iter().chain(a.iter()).any(|v| !v.is_finite()) {
        return Err(PyValueError::new_err(
            "predicted and actual must be non-empty and finite",
        ));
    }
    Ok(p.iter().copied().zip(a.iter().copied()).collect())
}

/// ML-MittOS's list-based failover simulator: each request's end-to-end latency (us) when the
/// requests predicted EBUSY fail over (`failover_us` each) to random requests of the list, at
/// most `replicas - 1` times. See `iolearn_policy::latency::simulate_list`.
#[pyfunction]
#[pyo3(signature = (latency_us, ebusy, replicas=3, failover_us=30.0, seed=0))]
pub fn simulate_list<'py>(
    py: Python<'py>,
    latency_us: PyReadonlyArray1<f64>,
    ebusy: PyReadonlyArray1<bool>,
    replicas: u32,
    failover_us: f64,
    seed: u64,
) -> PyResult<Bound<'py, numpy::PyArray1<f64>>> {
    check_replicas(replicas as usize, "failover_us", failover_us)?;
    let lat: Vec<f64> = latency_us.as_array().iter().copied().collect();
    let busy: Vec<bool> = ebusy.as_array().iter().copied().collect();
    if lat.len() != busy.len() || lat.is_empty() {
        return Err(PyValueError::new_err(
            "latency_us and ebusy must be non-empty and of one length",
        ));
    }
    if lat.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err(PyValueError::new_err("latency_us must be finite and non-negative"));
    }
    let out = py.detach(move || iolearn_policy::latency::simulate_list(&lat, &busy, replicas, failover_us, seed));
    Ok(numpy::IntoPyArray::into_pyarray(out, py))
}

/// ML-MittOS's threshold on a regressor's predictions minimising the expected latency with
/// `replicas` and `failover_us`, exact scan: (threshold, expected latency).
#[pyfunction]
#[pyo3(signature = (predicted, actual, replicas=3, failover_us=15.0))]
pub fn best_threshold(
    predicted: PyReadonlyArray1<f64>,
    actual: PyReadonlyArray1<f64>,
    replicas: u32,
    failover_us: f64,
) -> PyResult<(f64, f64)> {
    check_replicas(replicas as usize, "failover_us", failover_us)?;
    let pairs = pairs(&predicted, &actual)?;
    Ok(iolearn_policy::latency::best_threshold(&pairs, replicas, failover_us))
}

/// The same by golden-section search on `[lo, hi]` (SciPy's bounded minimiser).
#[pyfunction]
#[pyo3(signature = (predicted, actual, lo, hi, replicas=3, failover_us=15.0))]
pub fn golden_threshold(
    predicted: PyReadonlyArray1<f64>,
    actual: PyReadonlyArray1<f64>,
    lo: f64,
    hi: f64,
    replicas: u32,
    failover_us: f64,
) -> PyResult<(f64, f64)> {
    check_replicas(replicas as usize, "failover_us", failover_us)?;
    if !(lo.is_finite() && hi.is_finite() && lo < hi) {
        return Err(PyValueError::new_err(format!(
            "need finite lo < hi, got [{lo:?}, {hi:?}]"
        )));
    }
    let pairs = pairs(&predicted, &actual)?;
    Ok(iolearn_policy::latency::golden_threshold(
        &pairs,
        replicas,
        failover_us,
        lo,
        hi,
    ))
}

/// MittCFQ's evaluation on CFQ's successors (`iolearn_tail::mix`): one run of the named
/// `scenario` (`quiet`, `low`, `high`, `ec2`, `mix`) with every node behind `sched` (`bfq`,
/// `mq-deadline`, `none`) and the client reading by `strategy` (`base`, `clone`,
/// `hedged:MS`, `timeout:MS`, `mitt:MS`, `mitt-admit:MS`, `mitt-wait:MS`), gets arriving for
/// `duration_s` (the first 5 s not counted). With `observe` (and `base`), each get's first try
/// is also predicted. Returns the counted gets' latencies (ns), the counters, and the
/// first tries' predicted and actual latencies (ns; actual 2^64-1 when refused or cancelled).
#[pyfunction]
#[pyo3(signature = (scenario, sched="bfq", strategy="base", seed=1, duration_s=125.0, observe=false))]
pub fn mix_run<'py>(
    py: Python<'py>,
    scenario: &str,
    sched: &str,
    strategy: &str,
    seed: u64,
    duration_s: f64,
    observe: bool,
) -> PyResult<Bound<'py, PyDict>> {
    use iolearn_tail::mix;
    let kind = iolearn_flash::sched::SchedKind::by_name(sched)
        .ok_or_else(|| PyValueError::new_err(format!("sched {sched:?} (bfq, mq-deadline, none)")))?;
    let mut cfg = mix::scenario(scenario, kind, seed)
        .ok_or_else(|| PyValueError::new_err(format!("scenario {scenario:?} ({})", mix::SCENARIOS.join(", "))))?;
    if !(duration_s.is_finite() && (6.0..=86_400.0).contains(&duration_s)) {
        return Err(PyValueError::new_err(format!(
            "duration_s: {duration_s} (6 to 86400: the first 5 s are warm-up)"
        )));
    }
    cfg.duration_ns = (duration_s * 1e9) as u64;
    let strategy = mix::Strategy::parse(strategy).map_err(PyValueError::new_err)?;
    let out = py
        .detach(move || mix::run(&cfg, strategy, observe))
        .map_err(PyValueError::new_err)?;
    let d = PyDict::new(py);
    d.set_item("latency_ns", out.latencies_ns.into_pyarray(py))?;
    d.set_item("rejected", out.rejected)?;
    d.set_item("cancelled_late", out.cancelled_late)?;
    d.set_item("extra_copies", out.extra_copies)?;
    d.set_item("last_tries", out.last_tries)?;
    d.set_item("unfinished", out.unfinished)?;
    let (p, a): (Vec<u64>, Vec<u64>) = out.predictions.into_iter().unzip();
    d.set_item("predicted_ns", p.into_pyarray(py))?;
    d.set_item("actual_ns", a.into_pyarray(py))?;
    Ok(d)
}
