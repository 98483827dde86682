//! Per-I/O cost of every learned admission policy: features + model + decision, as the I/O
//! path pays it (`make bench`; numbers in docs/benchmarks.md). Models are built here with the
//! papers' shapes (weights do not change the work done, except the x1000 kernel choice, which
//! depends on weight magnitudes: trained-size weights are used); `IOLEARN_BENCH_MODELS=DIR`
//! times the `*.iolm` files of an `iolearn eval admission` run instead.
//!
//! Method: criterion times one `admit` call through `&mut dyn Admission` (ns per decision:
//! the middle of `time: [low mid high]` is the estimate, the outer two its 95% confidence
//! interval), the view built for each call cycling through 4,096 latency histories.
//!
//! Run: `cargo bench -p iolearn-tail --bench admission` (criterion's options after `--`, e.g.
//! `-- --quick`, or a name filter such as `-- MittOS`);
//! `IOLEARN_BENCH_MODELS=DIR cargo bench -p iolearn-tail --bench admission` for model files.
use criterion::Criterion;
use iolearn_ml::{Activation, DecisionTree, MlpBuilder, ModelFile, ModelKind, Rng, TreeConfig, ZScore};
use iolearn_policy::admission::{Admission, IoView, Learned};
use iolearn_policy::latency::LatencyHistory;
use std::hint::black_box;
use std::time::Duration;

fn views(n: usize) -> Vec<(LatencyHistory, u32, u64)> {
    let mut rng = Rng::new(7);
    (0..n)
        .map(|_| {
            let mut h = LatencyHistory::default();
            for _ in 0..4 {
                h.complete(50 + rng.below(3000) as u32, 1 + rng.below(40) as u32);
            }
            (h, 1 + rng.below(60) as u32, rng.below(5_000_000) as u64)
        })
        .collect()
}

fn time(c: &mut Criterion, name: &str, policy: &mut dyn Admission, views: &[(LatencyHistory, u32, u64)]) {
    let view = |i: usize| {
        let (h, p, age) = &views[i % views.len()];
        IoView {
            now_ns: i as u64 * 1000,
            size: 4096,
            offset: 0,
            pending: *p / 2,
            pending_pages: *p,
            history: h,
            oldest_inflight_ns: *age,
            since_completion_ns: *age / 3,
            white_box: None,
            true_latency_ns: None,
            cached: false,
            replica: 0,
            planes: None,
            books_ns: None,
            deadline_ns: None,
        }
    };
    let mut i = 0usize;
    c.bench_function(name, |b| {
        b.iter(|| {
            let admitted = policy.admit(black_box(&view(i)));
            i = i.wrapping_add(1);
            admitted
        })
    });
}

fn mlp(in_dim: usize, hidden: &[usize], out: usize, scale: f32) -> iolearn_ml::Sequential {
    let mut b = MlpBuilder::new(in_dim).output(out).seed(3);
    for &h in hidden {
        b = b.hidden(h, Activation::ReLU);
    }
    let mut net = b.build();
    // Trained LinnOS weights are around +-0.1..0.5; scale the initialisation to that.
    for l in net.layers_mut() {
        if let iolearn_ml::Layer::Linear(l) = l {
            l.weight.iter_mut().for_each(|w| *w *= scale);
        }
    }
    net
}

fn file(kind: ModelKind, schema: &str, meta: &[(&str, &str)], norm: Option<ZScore>) -> ModelFile {
    let mut f = ModelFile::new(kind, schema);
    f.meta = meta.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    f.normaliser = norm;
    f
}

fn main() {
    // Shorter than criterion's defaults (3 s warm-up, 5 s measurement): sub-microsecond
    // decisions converge well within this. Command-line options (`--measurement-time`...)
    // still win.
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .without_plots()
        .configure_from_args();
    let vs = views(4096);
    if let Ok(dir) = std::env::var("IOLEARN_BENCH_MODELS") {
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .expect("IOLEARN_BENCH_MODELS: a directory")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "iolm"))
            .collect();
        paths.sort();
        println!("model files of {dir}");
        for p in paths {
            let f = ModelFile::load(&p).expect("a model file");
            let mut l = Learned::from_file(&f, "m").expect("an admission model");
            // The file name (unique in the directory) names the case: criterion cuts long ids.
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            time(&mut c, &name, &mut l, &vs);
        }
        c.final_summary();
        return;
    }
    let z = |d: usize| {
        ZScore::new(vec![10.0; d], vec![5.0; d])
            .unwrap()
            .with_log1p(vec![true; d])
            .unwrap()
    };
    let linnos = mlp(31, &[256], 2, 1.0);
    let mut l = Learned::from_file(
        &file(
            ModelKind::Mlp(linnos.clone()),
            "linnos-31",
            &[("quantize", "x1000")],
            None,
        ),
        "linnos",
    )
    .unwrap();
    time(&mut c, "LinnOS 31-256-2, integer x1000", &mut l, &vs);
    let mut l = Learned::from_file(&file(ModelKind::Mlp(linnos), "linnos-31", &[], None), "linnos").unwrap();
    time(&mut c, "LinnOS 31-256-2, f32", &mut l, &vs);
    for width in [64, 128] {
        let reg = mlp(9, &[width; 3], 1, 1.0);
        let mut l = Learned::from_file(
            &file(ModelKind::Mlp(reg), "mittos-9", &[("rule", "above_us=300")], Some(z(9))),
            "mittos",
        )
        .unwrap();
        time(
            &mut c,
            &format!("ML-MittOS 9-{w}-{w}-{w}-1 regressor, f32", w = width),
            &mut l,
            &vs,
        );
    }
    let mut rng = Rng::new(1);
    let x: Vec<f32> = (0..13 * 4000).map(|_| rng.below(1000) as f32).collect();
    let y: Vec<f32> = x.chunks(13).map(|r| (r[3] + r[5] > 900.0) as u8 as f32).collect();
    let cfg = TreeConfig {
        max_depth: Some(8),
        min_samples_leaf: 20,
        ..Default::default()
    };
    let t = DecisionTree::fit(&x, &y, 13, &cfg).unwrap();
    let mut l = Learned::from_file(
        &file(ModelKind::Tree(t), "iolearn-tail-v1", &[("rule", "proba=0.3")], None),
        "tree",
    )
    .unwrap();
    time(&mut c, "iolearn tree (depth 8) on iolearn-tail-v1", &mut l, &vs);
    c.final_summary();
}
