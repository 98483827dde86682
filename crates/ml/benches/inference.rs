//! Micro benchmarks of the ML runtime: ns per inference, allocations per inference, model bytes,
//! one training step. `make bench` runs this; results go to docs/benchmarks.md.
//!
//! Method: criterion times each case (ns per call: the middle of `time: [low mid high]` is the
//! estimate, the outer two its 95% confidence interval), every call cycling through 64 input
//! rows so a tree's branches are not trivially predicted. Before a case is timed, a global
//! allocator wrapper counts its allocations over 10,000 warm calls: inference and training
//! must not allocate, so the benchmark stops with an error if one does. The allocation and
//! model-size table is printed after criterion's output.
//!
//! Run: `cargo bench -p iolearn-ml --bench inference` (criterion's options after `--`, e.g.
//! `-- --quick`, or a name filter such as `-- LinnOS`).

use criterion::Criterion;
use iolearn_ml::quant::{QuantizedMlp, Scheme};
use iolearn_ml::{datasets, kml, Activation, DecisionTree, Loss, MlpBuilder, ModelKind, Rng, Sequential, Sgd};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}
#[global_allocator]
static A: Counting = Counting;

/// One line of the allocation / model size table.
struct Row {
    name: String,
    allocs: f64,
    bytes: usize,
}

/// Counts the allocations of `f` (panics if it allocates), then times it with criterion.
/// `f(i)` runs the case on input row `i & 63`.
fn case(c: &mut Criterion, rows: &mut Vec<Row>, name: &str, bytes: usize, mut f: impl FnMut(usize)) {
    // One warm call first: anything sized on first use is not counted.
    f(0);
    let k = 10_000;
    let before = ALLOCS.load(Ordering::Relaxed);
    for i in 0..k {
        f(i);
    }
    let allocs = (ALLOCS.load(Ordering::Relaxed) - before) as f64 / k as f64;
    assert!(allocs == 0.0, "{name}: {allocs} allocations per call, expected none");
    rows.push(Row {
        name: name.to_string(),
        allocs,
        bytes,
    });
    let mut i = 0usize;
    c.bench_function(name, |b| {
        b.iter(|| {
            f(i);
            i = i.wrapping_add(1);
        })
    });
}

fn kml_models() -> (Sequential, DecisionTree, iolearn_ml::ZScore, &'static str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference/kml/readahead");
    let net = kml::import_network(&dir.join("nn_arch_data"));
    let tree = kml::import_tree(
        &dir.join("decision_tree_model/readahead_model.dt"),
        &dir.join("nn_arch_data"),
    );
    match (net, tree) {
        (Ok(n), Ok(t)) => match (n.kind, t.kind, n.normaliser) {
            (ModelKind::Mlp(net), ModelKind::Tree(tree), Some(z)) => (net, tree, z, "KML's released weights"),
            _ => unreachable!("KML's importer returns a network with a normaliser and a tree"),
        },
        _ => {
            // No reference data: same shapes, synthetic weights.
            let (x, y) = datasets::kml_like(200, 0);
            let z = iolearn_ml::ZScore::fit(&x, 5).unwrap();
            let net = MlpBuilder::new(5)
                .hidden(15, Activation::Sigmoid)
                .hidden(5, Activation::Sigmoid)
                .output(4)
                .build();
            let t = DecisionTree::fit(&x, &y, 5, &Default::default()).unwrap();
            (net, t, z, "synthetic weights (reference data not found)")
        }
    }
}

fn main() {
    // Shorter than criterion's defaults (3 s warm-up, 5 s measurement): nanosecond cases
    // converge well within this. Command-line options (`--measurement-time`...) still win.
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .without_plots()
        .configure_from_args();
    // The counter sees allocations (or the zero-allocation checks below would prove nothing).
    let before = ALLOCS.load(Ordering::Relaxed);
    black_box(Vec::<u8>::with_capacity(black_box(16)));
    assert!(
        ALLOCS.load(Ordering::Relaxed) > before,
        "the counting allocator is not in use"
    );
    let (kml_net, kml_tree, norm, source) = kml_models();
    println!("iolearn-ml micro benchmarks ({source})");
    let mut rng = Rng::new(1);
    let rows5: Vec<[f32; 5]> = (0..64)
        .map(|_| core::array::from_fn(|_| rng.uniform(-1.5, 1.5)))
        .collect();
    let raw5: Vec<[f32; 5]> = rows5
        .iter()
        .map(|r| core::array::from_fn(|i| (r[i] as f64 * norm.std[i] + norm.mean[i]) as f32))
        .collect();
    let rows31: Vec<[f32; 31]> = (0..64)
        .map(|_| core::array::from_fn(|_| rng.below(10) as f32))
        .collect();
    let rows12: Vec<[f32; 12]> = (0..64)
        .map(|_| core::array::from_fn(|_| rng.uniform(0.0, 1.0)))
        .collect();
    let mut out = Vec::new();

    let mut ws = kml_net.workspace();
    case(
        &mut c,
        &mut out,
        "KML readahead 5-15-5-4 (f32), normalised input",
        kml_net.bytes(),
        |i| {
            black_box(kml_net.predict_class(black_box(&rows5[i & 63]), &mut ws));
        },
    );
    case(
        &mut c,
        &mut out,
        "KML readahead 5-15-5-4, raw input (normalise + network)",
        kml_net.bytes(),
        |i| {
            let mut r = raw5[i & 63];
            norm.transform(black_box(&mut r));
            black_box(kml_net.predict_class(&r, &mut ws));
        },
    );
    case(
        &mut c,
        &mut out,
        "KML decision tree (59 nodes), normalised input",
        kml_tree.bytes(),
        |i| {
            black_box(kml_tree.predict_class(black_box(&rows5[i & 63])));
        },
    );

    let linnos = MlpBuilder::new(31)
        .hidden(256, Activation::ReLU)
        .output(2)
        .seed(3)
        .build();
    let mut lws = linnos.workspace();
    case(&mut c, &mut out, "LinnOS-size 31-256-2 (f32)", linnos.bytes(), |i| {
        black_box(linnos.predict_class(black_box(&rows31[i & 63]), &mut lws));
    });
    for (scheme, label) in [
        (
            Scheme::Fixed1000,
            "LinnOS-size 31-256-2 (integer x1000, i64 accumulate)",
        ),
        (Scheme::Int8, "LinnOS-size 31-256-2 (int8, per-layer scale)"),
    ] {
        let q = QuantizedMlp::new(&linnos, scheme);
        let mut qws = q.workspace();
        case(&mut c, &mut out, label, q.bytes(), |i| {
            black_box(q.predict_class(black_box(&rows31[i & 63]), &mut qws));
        });
    }
    let heimdall = MlpBuilder::new(12)
        .hidden(128, Activation::ReLU)
        .hidden(16, Activation::ReLU)
        .output(1)
        .output_activation(Some(Activation::Sigmoid))
        .seed(4)
        .build();
    let mut hws = heimdall.workspace();
    case(
        &mut c,
        &mut out,
        "Heimdall-size 12-128-16-1 (f32)",
        heimdall.bytes(),
        |i| {
            black_box(heimdall.predict_class(black_box(&rows12[i & 63]), &mut hws));
        },
    );

    // Training: one SGD step on one sample (KML's batch size 1), and on 32.
    let mut train_net = kml_net.clone();
    let mut sgd = Sgd::new(&train_net, 0.01, 0.99);
    let loss = Loss::softmax_cross_entropy();
    let ys = [0.0f32, 1.0, 2.0, 3.0];
    let flat: Vec<f32> = rows5.iter().flatten().copied().collect();
    let ys32: Vec<f32> = (0..32).map(|i| (i % 4) as f32).collect();
    let bytes = train_net.bytes();
    case(&mut c, &mut out, "training step, 5-15-5-4, batch 1", bytes, |i| {
        black_box(sgd.step(&mut train_net, &mut ws, &rows5[i & 63], &ys[i & 3..(i & 3) + 1], &loss));
    });
    case(&mut c, &mut out, "training step, 5-15-5-4, batch 32", bytes, |_| {
        black_box(sgd.step(&mut train_net, &mut ws, &flat[..32 * 5], &ys32, &loss));
    });

    c.final_summary();
    println!();
    println!("| case | allocations / call | model bytes |");
    println!("|---|---:|---:|");
    for r in &out {
        println!("| {} | {} | {} |", r.name, r.allocs, r.bytes);
    }
}
