//! `iolearn._native`: the Python package's native core. Thin bindings over `iolearn-ml`; the
//! scikit-learn-style classes live in `python/iolearn/`.

use iolearn_ml::eval::kfold as ml_kfold;
use iolearn_ml::{
    kml, Activation, ClassAction, Criterion, DecisionTree, Loss, MlpBuilder, ModelFile, ModelKind, TrainConfig,
    TreeConfig, ZScore,
};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use std::path::PathBuf;

mod flash;
mod tail;
mod trace;

fn err(e: iolearn_ml::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A model file's error: OSError when it could not be read or written, else ValueError.
/// Either way the message names the file.
fn file_err(e: iolearn_ml::Error) -> PyErr {
    match e {
        iolearn_ml::Error::Io { .. } => PyOSError::new_err(e.to_string()),
        e => PyValueError::new_err(e.to_string()),
    }
}

fn rows(x: &PyReadonlyArray2<f32>) -> PyResult<(Vec<f32>, usize)> {
    let a = x.as_array();
    let d = a.ncols();
    Ok((a.iter().copied().collect(), d))
}

/// A model file in memory: model, schema, normaliser, class map.
#[pyclass(module = "iolearn._native")]
struct Model {
    file: ModelFile,
}

#[pymethods]
impl Model {
    /// "mlp" or "tree".
    #[getter]
    fn kind(&self) -> &'static str {
        self.file.kind.name()
    }

    #[getter]
    fn schema(&self) -> String {
        self.file.schema.clone()
    }

    #[setter]
    fn set_schema(&mut self, s: String) {
        self.file.schema = s;
    }

    #[getter]
    fn features(&self) -> Vec<String> {
        self.file.features.clone()
    }

    #[setter]
    fn set_features(&mut self, f: Vec<String>) -> PyResult<()> {
        if !f.is_empty() && f.len() != self.file.kind.in_dim() {
            return Err(PyValueError::new_err(format!(
                "{} feature names for {} inputs",
                f.len(),
                self.file.kind.in_dim()
            )));
        }
        self.file.features = f;
        Ok(())
    }

    /// Class map as a list of (label, action).
    #[getter]
    fn classes(&self) -> Vec<(String, i64)> {
        self.file.classes.iter().map(|c| (c.label.clone(), c.action)).collect()
    }

    #[setter]
    fn set_classes(&mut self, c: Vec<(String, i64)>) -> PyResult<()> {
        let n = self.file.kind.n_outputs().max(2);
        if !c.is_empty() && c.len() != n {
            return Err(PyValueError::new_err(format!(
                "{} classes given, the model has {n}",
                c.len()
            )));
        }
        self.file.classes = c
            .into_iter()
            .map(|(label, action)| ClassAction { label, action })
            .collect();
        Ok(())
    }

    #[getter]
    fn action_unit(&self) -> String {
        self.file.action_unit.clone()
    }

    #[setter]
    fn set_action_unit(&mut self, u: String) {
        self.file.action_unit = u;
    }

    #[getter]
    fn meta(&self) -> Vec<(String, String)> {
        self.file.meta.clone()
    }

    #[setter]
    fn set_meta(&mut self, m: Vec<(String, String)>) {
        self.file.meta = m;
    }

    #[getter]
    fn n_features(&self) -> usize {
        self.file.kind.in_dim()
    }

    #[getter]
    fn n_outputs(&self) -> usize {
        self.file.kind.n_outputs()
    }

    /// Bytes the model occupies in memory.
    #[getter]
    fn nbytes(&self) -> usize {
        self.file.kind.bytes()
    }

    #[getter]
    fn has_normaliser(&self) -> bool {
        self.file.normaliser.is_some()
    }

    /// Z-score statistics applied to raw input, as (mean, std), or None.
    #[getter]
    fn normaliser(&self) -> Option<(Vec<f64>, Vec<f64>)> {
        self.file.normaliser.as_ref().map(|z| (z.mean.clone(), z.std.clone()))
    }

    /// Which features the normaliser takes through `sign(x) ln(1 + |x|)` first (empty: none).
    #[getter]
    fn normaliser_log1p(&self) -> Vec<bool> {
        self.file
            .normaliser
            .as_ref()
            .map(|z| z.log1p.clone())
            .unwrap_or_default()
    }

    /// Set the log1p mask of the normaliser (which must exist; empty or all false: none).
    #[setter]
    fn set_normaliser_log1p(&mut self, mask: Vec<bool>) -> PyResult<()> {
        let z = self
            .file
            .normaliser
            .take()
            .ok_or_else(|| PyValueError::new_err("normaliser_log1p: the model has no normaliser"))?;
        let back = z.clone();
        match z.with_log1p(mask) {
            Ok(z) => {
                self.file.normaliser = Some(z);
                Ok(())
            }
            Err(e) => {
                self.file.normaliser = Some(back);
                Err(err(e))
            }
        }
    }

    #[setter]
    fn set_normaliser(&mut self, stats: Option<(Vec<f64>, Vec<f64>)>) -> PyResult<()> {
        self.file.normaliser = match stats {
            None => None,
            Some((mean, std)) => {
                if mean.len() != self.file.kind.in_dim() {
                    return Err(PyValueError::new_err(format!(
                        "normaliser has {} features, the model {}",
                        mean.len(),
                        self.file.kind.in_dim()
                    )));
                }
                Some(ZScore::new(mean, std).map_err(err)?)
            }
        };
        Ok(())
    }

    /// Raw model outputs (logits, probabilities or regression values), one row per input row.
    #[pyo3(signature = (x, prenormalized=false))]
    fn forward<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<f32>,
        prenormalized: bool,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let (x, n, d) = self.prepare(&x, prenormalized)?;
        let out_dim = self.file.kind.n_outputs();
        let out = py.detach(|| {
            let mut out = Vec::with_capacity(n * out_dim);
            match &self.file.kind {
                ModelKind::Mlp(net) => {
                    let mut ws = net.workspace();
                    for r in x.chunks_exact(d) {
                        out.extend_from_slice(net.forward(r, &mut ws));
                    }
                }
                ModelKind::Tree(t) => {
                    let mut p = vec![0.0; out_dim];
                    for r in x.chunks_exact(d) {
                        t.predict_proba(r, &mut p);
                        out.extend_from_slice(&p);
                    }
                }
            }
            out
        });
        Ok(Array2::from_shape_vec((n, out_dim), out)
            .expect("shape")
            .into_pyarray(py))
    }

    /// Predicted class per row.
    #[pyo3(signature = (x, prenormalized=false))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<f32>,
        prenormalized: bool,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let (x, n, d) = self.prepare(&x, prenormalized)?;
        let out: Vec<i64> = py
            .detach(|| match &self.file.kind {
                ModelKind::Mlp(net) => {
                    let mut ws = net.workspace();
                    Ok(x.chunks_exact(d)
                        .map(|r| net.predict_class(r, &mut ws) as i64)
                        .collect())
                }
                // All rows in one call: the tree's kernel loops over them itself.
                ModelKind::Tree(t) => {
                    let mut c = vec![0u32; n];
                    t.predict_classes(&x, &mut c)
                        .map(|()| c.into_iter().map(i64::from).collect())
                }
            })
            .map_err(err)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// Class probabilities per row.
    #[pyo3(signature = (x, prenormalized=false))]
    fn predict_proba<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<f32>,
        prenormalized: bool,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let (x, n, d) = self.prepare(&x, prenormalized)?;
        let k = self.file.kind.n_outputs().max(2);
        let out = py.detach(|| {
            let mut out = vec![0.0f32; n * k];
            match &self.file.kind {
                ModelKind::Mlp(net) => {
                    let mut ws = net.workspace();
                    for (r, p) in x.chunks_exact(d).zip(out.chunks_exact_mut(k)) {
                        net.predict_proba(r, &mut ws, p);
                    }
                }
                ModelKind::Tree(t) => {
                    // A tree of one class has one probability; the columns are at least two.
                    let c = t.n_classes();
                    for (r, p) in x.chunks_exact(d).zip(out.chunks_exact_mut(k)) {
                        t.predict_proba(r, &mut p[..c]);
                    }
                }
            }
            out
        });
        Ok(Array2::from_shape_vec((n, k), out).expect("shape").into_pyarray(py))
    }

    /// Write the model file atomically (temporary file, fsync, rename).
    fn save(&self, path: PathBuf) -> PyResult<()> {
        self.file.validate().map_err(err)?;
        self.file.save(&path).map(drop).map_err(file_err)
    }

    /// The whole model as JSON text.
    fn to_json(&self) -> String {
        self.file.to_json()
    }

    /// Error unless the model was trained for `schema`.
    fn expect_schema(&self, schema: &str) -> PyResult<()> {
        self.file.expect_schema(schema).map_err(err)
    }

    /// Permutation importance (KML section 4.1): (baseline accuracy, accuracy with each
    /// feature's column shuffled), computed by the Rust core.
    #[pyo3(signature = (x, y, repeats=5, seed=0, prenormalized=false))]
    fn permutation_importance(
        &self,
        py: Python<'_>,
        x: PyReadonlyArray2<f32>,
        y: PyReadonlyArray1<f32>,
        repeats: usize,
        seed: u64,
        prenormalized: bool,
    ) -> PyResult<(f64, Vec<f64>)> {
        let (xv, _, d) = self.prepare(&x, prenormalized)?;
        let yv: Vec<f32> = y.as_array().iter().copied().collect();
        let imp = py
            .detach(|| {
                iolearn_ml::eval::permutation_importance(&xv, &yv, d, repeats, seed, |rows| match &self.file.kind {
                    ModelKind::Mlp(net) => {
                        let mut ws = net.workspace();
                        rows.chunks_exact(d).map(|r| net.predict_class(r, &mut ws)).collect()
                    }
                    ModelKind::Tree(t) => rows.chunks_exact(d).map(|r| t.predict_class(r)).collect(),
                })
            })
            .map_err(err)?;
        Ok((imp.baseline, imp.shuffled_accuracy))
    }

    /// The tree in scikit-learn export_text style (trees only).
    #[pyo3(signature = (decimals=6))]
    fn export_text(&self, decimals: usize) -> PyResult<String> {
        if decimals > 17 {
            return Err(PyValueError::new_err(format!(
                "decimals must be 0 to 17, got {decimals}"
            )));
        }
        match &self.file.kind {
            ModelKind::Tree(t) => Ok(t.export_text(decimals)),
            _ => Err(PyValueError::new_err("export_text: not a decision tree")),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "<iolearn Model kind={} schema={:?} inputs={} outputs={}>",
            self.kind(),
            self.file.schema,
            self.n_features(),
            self.n_outputs()
        )
    }
}

impl Model {
    fn prepare(&self, x: &PyReadonlyArray2<f32>, prenormalized: bool) -> PyResult<(Vec<f32>, usize, usize)> {
        let (mut v, d) = rows(x)?;
        if d != self.file.kind.in_dim() {
            return Err(PyValueError::new_err(format!(
                "X has {d} features, the model expects {}",
                self.file.kind.in_dim()
            )));
        }
        if v.iter().any(|f| !f.is_finite()) {
            return Err(PyValueError::new_err("X contains NaN or infinity"));
        }
        if !prenormalized {
            if let Some(z) = &self.file.normaliser {
                z.transform_rows(&mut v);
            }
        }
        let n = v.len() / d.max(1);
        Ok((v, n, d))
    }
}

fn parse_loss(
    name: &str,
    class_weights: Option<Vec<f32>>,
    pos_weight: f32,
    b: f32,
    penalty: f32,
    penalized_class: usize,
) -> PyResult<Loss> {
    Ok(match name {
        "cross_entropy" | "softmax_cross_entropy" => Loss::SoftmaxCrossEntropy { class_weights },
        "binary_cross_entropy" | "bce" => Loss::BinaryCrossEntropy { pos_weight },
        "mse" => Loss::Mse,
        "asymmetric_mse" | "amse" => Loss::AsymmetricMse { b },
        "hinge" | "categorical_hinge" => Loss::CategoricalHinge {
            penalty,
            penalized_class,
        },
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown loss {other:?} (cross_entropy, binary_cross_entropy, mse, asymmetric_mse, categorical_hinge)"
            )))
        }
    })
}

/// Train an MLP. `y` holds class indices (classification losses) or targets (regression, one
/// column per output).
#[pyfunction]
#[pyo3(signature = (x, y, hidden, activation, n_outputs, output_activation, loss, lr, momentum, batch_size, epochs, seed, normalize, class_weights=None, pos_weight=1.0, b=0.0, penalty=1.0, penalized_class=1, log_odds_bias=false, log_features=None))]
#[allow(clippy::too_many_arguments)]
fn fit_mlp(
    py: Python<'_>,
    x: PyReadonlyArray2<f32>,
    y: PyReadonlyArray1<f32>,
    hidden: Vec<usize>,
    activation: &str,
    n_outputs: usize,
    output_activation: Option<&str>,
    loss: &str,
    lr: f32,
    momentum: f32,
    batch_size: usize,
    epochs: usize,
    seed: u64,
    normalize: bool,
    class_weights: Option<Vec<f32>>,
    pos_weight: f32,
    b: f32,
    penalty: f32,
    penalized_class: usize,
    log_odds_bias: bool,
    log_features: Option<Vec<usize>>,
) -> PyResult<(Model, Vec<f32>)> {
    let (mut xv, d) = rows(&x)?;
    let mut log1p = vec![false; d];
    for i in log_features.unwrap_or_default() {
        *log1p
            .get_mut(i)
            .ok_or_else(|| PyValueError::new_err(format!("log_features: feature {i} of {d}")))? = true;
    }
    let yv: Vec<f32> = y.as_array().iter().copied().collect();
    let act = Activation::parse(activation).map_err(err)?;
    let out_act = output_activation.map(Activation::parse).transpose().map_err(err)?;
    let loss = parse_loss(loss, class_weights, pos_weight, b, penalty, penalized_class)?;
    let mut builder = MlpBuilder::new(d)
        .output(n_outputs)
        .output_activation(out_act)
        .seed(seed);
    for h in hidden {
        builder = builder.hidden(h, act);
    }
    let mut net = builder.try_build().map_err(err)?;
    let cfg = TrainConfig {
        epochs,
        lr,
        momentum,
        batch_size,
        seed,
    };
    let (net, norm, history) = py
        .detach(move || -> iolearn_ml::Result<_> {
            let norm = if normalize {
                Some(ZScore::fit_log1p(&xv, d, log1p)?)
            } else {
                None
            };
            if let Some(z) = &norm {
                z.transform_rows(&mut xv);
            }
            if log_odds_bias {
                let pos = yv.iter().filter(|&&v| v >= 0.5).count();
                net.init_output_bias_log_odds(pos, yv.len() - pos)?;
            }
            let h = net.fit(&xv, &yv, &loss, &cfg)?;
            Ok((net, norm, h))
        })
        .map_err(err)?;
    let mut file = ModelFile::new(ModelKind::Mlp(net), "custom");
    file.normaliser = norm;
    file.meta = vec![
        ("seed".into(), seed.to_string()),
        ("trainer".into(), "iolearn python fit_mlp".into()),
    ];
    Ok((Model { file }, history))
}

/// Train a CART decision tree on class labels.
#[pyfunction]
#[pyo3(signature = (x, y, max_depth=None, min_samples_split=2, min_samples_leaf=1, criterion="gini", normalize=false))]
#[allow(clippy::too_many_arguments)] // mirrors the Python keyword arguments one to one
fn fit_tree(
    py: Python<'_>,
    x: PyReadonlyArray2<f32>,
    y: PyReadonlyArray1<f32>,
    max_depth: Option<usize>,
    min_samples_split: usize,
    min_samples_leaf: usize,
    criterion: &str,
    normalize: bool,
) -> PyResult<Model> {
    let (mut xv, d) = rows(&x)?;
    let yv: Vec<f32> = y.as_array().iter().copied().collect();
    let criterion = match criterion {
        "gini" => Criterion::Gini,
        "entropy" => Criterion::Entropy,
        c => {
            return Err(PyValueError::new_err(format!(
                "unknown criterion {c:?} (gini, entropy)"
            )))
        }
    };
    if max_depth.is_some_and(|d| !(1..=64).contains(&d)) {
        return Err(PyValueError::new_err(format!(
            "max_depth must be 1 to 64, got {max_depth:?}"
        )));
    }
    let cfg = TreeConfig {
        criterion,
        max_depth,
        min_samples_split,
        min_samples_leaf,
    };
    let (tree, norm) = py
        .detach(move || -> iolearn_ml::Result<_> {
            let norm = if normalize { Some(ZScore::fit(&xv, d)?) } else { None };
            if let Some(z) = &norm {
                z.transform_rows(&mut xv);
            }
            Ok((DecisionTree::fit(&xv, &yv, d, &cfg)?, norm))
        })
        .map_err(err)?;
    let mut file = ModelFile::new(ModelKind::Tree(tree), "custom");
    file.normaliser = norm;
    Ok(Model { file })
}

/// Load a model file.
#[pyfunction]
fn load(path: PathBuf) -> PyResult<Model> {
    Ok(Model {
        file: ModelFile::load(&path).map_err(file_err)?,
    })
}

/// Import KML's readahead network (an nn_arch_data directory), or its tree with `tree=`.
#[pyfunction]
#[pyo3(signature = (nn_arch_data, tree=None))]
fn import_kml(nn_arch_data: PathBuf, tree: Option<PathBuf>) -> PyResult<Model> {
    let file = match tree {
        Some(t) => kml::import_tree(&t, &nn_arch_data),
        None => kml::import_network(&nn_arch_data),
    }
    .map_err(err)?;
    Ok(Model { file })
}

/// Test-index folds of shuffled k-fold cross-validation (the same folds as the Rust core).
#[pyfunction]
fn kfold(n: usize, k: usize, seed: u64) -> PyResult<Vec<Vec<usize>>> {
    if n > 100_000_000 {
        return Err(PyValueError::new_err(format!("n must be at most 1e8 rows, got {n}")));
    }
    ml_kfold(n, k, seed).map_err(err)
}

/// Rows and labels.
type Dataset<'py> = (Bound<'py, PyArray2<f32>>, Bound<'py, PyArray1<f32>>);

/// A synthetic 4-class data set shaped like KML's readahead features (raw).
#[pyfunction]
fn kml_like<'py>(py: Python<'py>, n_per_class: usize, seed: u64) -> PyResult<Dataset<'py>> {
    if n_per_class > 1_000_000 {
        return Err(PyValueError::new_err(format!(
            "n_per_class must be at most 1e6, got {n_per_class}"
        )));
    }
    let (x, y) = iolearn_ml::datasets::kml_like(n_per_class, seed);
    let n = y.len();
    Ok((
        Array2::from_shape_vec((n, 5), x).expect("shape").into_pyarray(py),
        PyArray1::from_vec(py, y),
    ))
}

/// The bounds every simulated readahead run shares (`iolearn_readahead::check_run`).
fn check_sim_run(seconds: f64, read_ahead_kb: u64, db_mb: u64, cache_mb: u64) -> PyResult<()> {
    iolearn_readahead::check_run(seconds, read_ahead_kb, db_mb, cache_mb).map_err(PyValueError::new_err)
}

/// Run the simulator and return its page events as an (n, 4) uint64 array
/// `[time_ns, file, page_index, kind]` (kind 0 = added to the page cache, 1 = accessed).
#[pyfunction]
#[pyo3(signature = (workload, device="nvme", read_ahead_kb=128, seconds=1.0, db_mb=256, cache_mb=96, seed=1))]
#[allow(clippy::too_many_arguments)] // mirrors the Python keyword arguments one to one
fn sim_page_events<'py>(
    py: Python<'py>,
    workload: &str,
    device: &str,
    read_ahead_kb: u64,
    seconds: f64,
    db_mb: u64,
    cache_mb: u64,
    seed: u64,
) -> PyResult<Bound<'py, PyArray2<u64>>> {
    use iolearn_sim::engine::{PageEventKind, Sim, SimConfig};
    let kind = iolearn_sim::workload::WorkloadKind::parse(workload)
        .ok_or_else(|| PyValueError::new_err(format!("unknown workload {workload:?}")))?;
    let dev = iolearn_sim::device::DevicePreset::by_name(device)
        .ok_or_else(|| PyValueError::new_err(format!("unknown device preset {device:?} (nvme, sata, hdd, loop)")))?;
    check_sim_run(seconds, read_ahead_kb, db_mb, cache_mb)?;
    let mut cfg = SimConfig::calibration(kind, dev, read_ahead_kb);
    cfg.db = iolearn_sim::workload::DbShape::of_size(db_mb << 20);
    cfg.cache_bytes = cache_mb << 20;
    cfg.seed = seed;
    cfg.record_events = true;
    let events = py.detach(move || {
        let mut sim = Sim::new(cfg);
        sim.run_until((seconds * 1e9) as u64);
        sim.drain_events()
    });
    let mut flat = Vec::with_capacity(events.len() * 4);
    for e in &events {
        flat.extend([
            e.time_ns,
            e.file as u64,
            e.index,
            (e.kind == PageEventKind::Accessed) as u64,
        ]);
    }
    Ok(Array2::from_shape_vec((events.len(), 4), flat)
        .expect("shape")
        .into_pyarray(py))
}

/// KML's readahead features of an event stream: `events` is (n, 3) uint64
/// `[time_ns, inode, page_index]`, time-ordered. Returns (device, files): device is
/// (windows, 5) float64 with NaN rows for empty windows; files is (m, 7)
/// `[window, inode, f0..f4]`.
type FeatureArrays<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>);

#[pyfunction]
#[pyo3(signature = (events, window_ns=1_000_000_000, ra_sectors=256, start_ns=0))]
fn kml_features<'py>(
    py: Python<'py>,
    events: numpy::PyReadonlyArray2<u64>,
    window_ns: u64,
    ra_sectors: u64,
    start_ns: u64,
) -> PyResult<FeatureArrays<'py>> {
    use iolearn_policy::readahead::KmlFeatures;
    use iolearn_policy::PageObservation;
    let a = events.as_array();
    if a.ncols() != 3 {
        return Err(PyValueError::new_err(format!(
            "events must have 3 columns, got {}",
            a.ncols()
        )));
    }
    let obs: Vec<PageObservation> = a
        .rows()
        .into_iter()
        .map(|r| PageObservation {
            time_ns: r[0],
            inode: r[1],
            index: r[2],
            pid: 0,
        })
        .collect();
    if obs.windows(2).any(|w| w[1].time_ns < w[0].time_ns) {
        return Err(PyValueError::new_err("events must be ordered by time"));
    }
    // One window is pushed per `window_ns` between events: bound both the window and the number
    // of windows the events span, or a tiny window over a long span would allocate without end.
    if !(1_000..=86_400_000_000_000).contains(&window_ns) {
        return Err(PyValueError::new_err(format!(
            "window_ns must be 1000 (1 us) to 8.64e13 (a day), got {window_ns}"
        )));
    }
    if let Some(last) = obs.last() {
        let windows = last.time_ns.saturating_sub(start_ns) / window_ns;
        if windows > 10_000_000 {
            return Err(PyValueError::new_err(format!(
                "the events span {windows} windows of {window_ns} ns; at most 1e7"
            )));
        }
    }
    if obs.first().is_some_and(|o| o.time_ns < start_ns) {
        return Err(PyValueError::new_err("an event precedes start_ns"));
    }
    let mut k = KmlFeatures::new(window_ns, start_ns);
    let mut windows = k.run(&obs, ra_sectors);
    if !obs.is_empty() {
        windows.push(k.close(ra_sectors, |_| ra_sectors));
    }
    // KML's five of the features a window has.
    let kml = |f: &iolearn_policy::readahead::RaFeatures| [f[0], f[1], f[2], f[3], f[4]];
    let mut dev = Vec::with_capacity(windows.len() * 5);
    let mut files = Vec::new();
    for (i, w) in windows.iter().enumerate() {
        dev.extend(w.device.as_ref().map_or([f64::NAN; 5], kml));
        for (ino, f) in &w.files {
            files.push(i as f64);
            files.push(*ino as f64);
            files.extend(kml(f));
        }
    }
    let n = windows.len();
    let m = files.len() / 7;
    Ok((
        Array2::from_shape_vec((n, 5), dev).expect("shape").into_pyarray(py),
        Array2::from_shape_vec((m, 7), files).expect("shape").into_pyarray(py),
    ))
}

/// What `sim_closed_loop` returns: ops/s per workload, (time, read_ahead_kb) trace, features.
type ClosedLoop<'py> = (Vec<f64>, Vec<(f64, u64)>, Bound<'py, PyArray2<f64>>);

/// Run workloads in the simulator under a readahead controller, deciding once per `window_s`
/// (`iolearn_readahead::run`): `controller` is "vanilla", "leap", "static:KB",
/// "files:KB0,KB1,..." (each workload's files held at its own value; on a shared database its
/// process's descriptions), or a model file path. `scope` ("device", "file" or "description")
/// is what leap and models decide for; `per_file=True` is `scope="file"`. Workloads run
/// concurrently (one process and database each; with `shared_db` one process each on one
/// database) for `seconds`, or with `back_to_back` one after the other on one database,
/// `seconds` each.
/// Returns (ops/s per workload, list of (time_s, device read_ahead_kb), windows of device
/// features as an (n, 14) array `[window, f0..f8, s4..s7]`, or with `file_features` every
/// file's, (n, 15) `[window, workload index, f0..f8, s4..s7]`; the columns after the indices
/// are `readahead.FEATURES_ALL`: KML's five, direction, regularity, randomness, density, then
/// the bounded inputs those are not, `iolearn_readahead::LoopResult::features`). With `guard` the controller runs behind the
/// guardrail; with `app_signal` it sees the workloads' ops per window (else only what the
/// kernel tuner sees); with `fallback_online` a model out of its training range lets the
/// online learner decide; with `refine_online` (and `guard`) the learner also refines a value
/// of the model's that the guardrail kept with a gain, or per file decides the device's value
/// beside the model (asked for here, as `guard` is: the kernel's tuner refines by default where
/// it applies).
#[pyfunction]
#[pyo3(signature = (workloads, controller="vanilla", device="nvme", read_ahead_kb=128, seconds=10.0, per_file=false, db_mb=2355, cache_mb=850, window_s=1.0, seed=1, back_to_back=false, file_features=false, guard=false, app_signal=false, fallback_online=false, scope=None, shared_db=false, refine_online=false))]
#[allow(clippy::too_many_arguments)] // mirrors the Python keyword arguments one to one
fn sim_closed_loop<'py>(
    py: Python<'py>,
    workloads: Vec<String>,
    controller: &str,
    device: &str,
    read_ahead_kb: u64,
    seconds: f64,
    per_file: bool,
    db_mb: u64,
    cache_mb: u64,
    window_s: f64,
    seed: u64,
    back_to_back: bool,
    file_features: bool,
    guard: bool,
    app_signal: bool,
    fallback_online: bool,
    scope: Option<&str>,
    shared_db: bool,
    refine_online: bool,
) -> PyResult<ClosedLoop<'py>> {
    use iolearn_readahead::{ControllerSpec, LoopConfig, RunError, Scope};
    let scope = match (scope, per_file) {
        (None, false) => Scope::Device,
        (None, true) => Scope::File,
        (Some(s), _) => {
            let scope = Scope::parse(s).map_err(PyValueError::new_err)?;
            if per_file && scope != Scope::File {
                return Err(PyValueError::new_err(format!(
                    "per_file=True and scope={s:?} disagree; give one"
                )));
            }
            scope
        }
    };
    let device = iolearn_sim::device::DevicePreset::by_name(device)
        .ok_or_else(|| PyValueError::new_err(format!("unknown device preset {device:?} (nvme, sata, hdd, loop)")))?;
    let workloads = workloads
        .iter()
        .map(|w| {
            iolearn_sim::workload::WorkloadKind::parse(w)
                .ok_or_else(|| PyValueError::new_err(format!("unknown workload {w:?}")))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let controller = ControllerSpec::parse(controller).map_err(PyValueError::new_err)?;
    let cfg = LoopConfig {
        device,
        read_ahead_kb,
        seconds,
        scope,
        shared_db,
        db_mb,
        cache_mb,
        window_s,
        seed,
        back_to_back,
        file_features,
        guard: guard.then(iolearn_readahead::GuardConfig::default),
        app_signal,
        fallback_online,
        refine_online,
        ..LoopConfig::new(workloads, controller)
    };
    let r = py.detach(move || iolearn_readahead::run(&cfg)).map_err(|e| match e {
        RunError::Config(m) => PyValueError::new_err(m),
        RunError::Controller(e) => file_err(e),
    })?;
    let n = r.features.len() / r.width;
    Ok((
        r.ops_per_s,
        r.device_kb,
        Array2::from_shape_vec((n, r.width), r.features)
            .expect("shape")
            .into_pyarray(py),
    ))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Model>()?;
    m.add_function(wrap_pyfunction!(fit_mlp, m)?)?;
    m.add_function(wrap_pyfunction!(fit_tree, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(import_kml, m)?)?;
    m.add_function(wrap_pyfunction!(kfold, m)?)?;
    m.add_function(wrap_pyfunction!(kml_like, m)?)?;
    m.add_function(wrap_pyfunction!(sim_page_events, m)?)?;
    m.add_function(wrap_pyfunction!(kml_features, m)?)?;
    m.add_function(wrap_pyfunction!(sim_closed_loop, m)?)?;
    m.add_class::<flash::SsdReplay>()?;
    m.add_function(wrap_pyfunction!(trace::read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(trace::generate_trace, m)?)?;
    m.add_class::<tail::TailWorld>()?;
    m.add_function(wrap_pyfunction!(tail::inflection_point, m)?)?;
    m.add_function(wrap_pyfunction!(tail::simulate_list, m)?)?;
    m.add_function(wrap_pyfunction!(tail::mix_run, m)?)?;
    m.add_function(wrap_pyfunction!(tail::best_threshold, m)?)?;
    m.add_function(wrap_pyfunction!(tail::golden_threshold, m)?)?;
    m.add("READAHEAD_SCHEMA", kml::READAHEAD_SCHEMA)?;
    m.add("READAHEAD_SCHEMA_V2", kml::READAHEAD_SCHEMA_V2)?;
    m.add("READAHEAD_SCHEMA_V3", kml::READAHEAD_SCHEMA_V3)?;
    m.add("READAHEAD_FEATURES_V3", kml::READAHEAD_FEATURES_V3.to_vec())?;
    Ok(())
}
