//! Micro benchmarks of the ML runtime: ns per inference, allocations per inference, model bytes,
//! one training step. `make bench` runs this; results go to docs/benchmarks.md.
//!
//! Method: each case runs 5 rounds of enough calls to take ~0.2 s, cycling through 64 input
//! rows (so a tree's branches are not trivially predicted); the median round is reported with
//! the min-max spread. Allocations are counted by a global allocator wrapper over one extra
//! round.

use iolearn_ml::quant::{QuantizedMlp, Scheme};
use iolearn_ml::{datasets, kml, Activation, DecisionTree, Loss, MlpBuilder, ModelKind, Rng, Sequential, Sgd};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

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

struct Row {
    name: String,
    ns: f64,
    lo: f64,
    hi: f64,
    allocs: f64,
    bytes: usize,
}

fn measure(name: &str, bytes: usize, mut f: impl FnMut(usize)) -> Row {
    // Calibrate the call count to ~0.2 s per round.
    let mut n = 1000usize;
    loop {
        let t = Instant::now();
        for i in 0..n {
            f(i);
        }
        if t.elapsed().as_secs_f64() > 0.05 {
            n = (n as f64 * 0.2 / t.elapsed().as_secs_f64()) as usize;
            break;
        }
        n *= 4;
    }
    let mut rounds: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for i in 0..n {
                f(i);
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    let before = ALLOCS.load(Ordering::Relaxed);
    let k = 10_000;
    for i in 0..k {
        f(i);
    }
    let allocs = (ALLOCS.load(Ordering::Relaxed) - before) as f64 / k as f64;
    Row {
        name: name.to_string(),
        ns: rounds[2],
        lo: rounds[0],
        hi: rounds[4],
        allocs,
        bytes,
    }
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
    let (kml_net, kml_tree, norm, source) = kml_models();
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
    out.push(measure(
        "KML readahead 5-15-5-4 (f32), normalised input",
        kml_net.bytes(),
        |i| {
            black_box(kml_net.predict_class(black_box(&rows5[i & 63]), &mut ws));
        },
    ));
    out.push(measure(
        "KML readahead 5-15-5-4, raw input (normalise + network)",
        kml_net.bytes(),
        |i| {
            let mut r = raw5[i & 63];
            norm.transform(black_box(&mut r));
            black_box(kml_net.predict_class(&r, &mut ws));
        },
    ));
    out.push(measure(
        "KML decision tree (59 nodes), normalised input",
        kml_tree.bytes(),
        |i| {
            black_box(kml_tree.predict_class(black_box(&rows5[i & 63])));
        },
    ));

    let linnos = MlpBuilder::new(31)
        .hidden(256, Activation::ReLU)
        .output(2)
        .seed(3)
        .build();
    let mut lws = linnos.workspace();
    out.push(measure("LinnOS-size 31-256-2 (f32)", linnos.bytes(), |i| {
        black_box(linnos.predict_class(black_box(&rows31[i & 63]), &mut lws));
    }));
    for (scheme, label) in [
        (
            Scheme::Fixed1000,
            "LinnOS-size 31-256-2 (integer x1000, i64 accumulate)",
        ),
        (Scheme::Int8, "LinnOS-size 31-256-2 (int8, per-layer scale)"),
    ] {
        let q = QuantizedMlp::new(&linnos, scheme);
        let mut qws = q.workspace();
        out.push(measure(label, q.bytes(), |i| {
            black_box(q.predict_class(black_box(&rows31[i & 63]), &mut qws));
        }));
    }
    let heimdall = MlpBuilder::new(12)
        .hidden(128, Activation::ReLU)
        .hidden(16, Activation::ReLU)
        .output(1)
        .output_activation(Some(Activation::Sigmoid))
        .seed(4)
        .build();
    let mut hws = heimdall.workspace();
    out.push(measure("Heimdall-size 12-128-16-1 (f32)", heimdall.bytes(), |i| {
        black_box(heimdall.predict_class(black_box(&rows12[i & 63]), &mut hws));
    }));

    // Training: one SGD step on one sample (KML's batch size 1), and on 32.
    let mut train_net = kml_net.clone();
    let mut sgd = Sgd::new(&train_net, 0.01, 0.99);
    let loss = Loss::softmax_cross_entropy();
    let ys = [0.0f32, 1.0, 2.0, 3.0];
    let flat: Vec<f32> = rows5.iter().flatten().copied().collect();
    let ys32: Vec<f32> = (0..32).map(|i| (i % 4) as f32).collect();
    let step1 = measure("training step, 5-15-5-4, batch 1", train_net.bytes(), |i| {
        black_box(sgd.step(&mut train_net, &mut ws, &rows5[i & 63], &ys[i & 3..(i & 3) + 1], &loss));
    });
    let step32 = measure("training step, 5-15-5-4, batch 32", train_net.bytes(), |_| {
        black_box(sgd.step(&mut train_net, &mut ws, &flat[..32 * 5], &ys32, &loss));
    });

    println!("iolearn-ml micro benchmarks ({source}); median of 5 rounds, [min-max]");
    println!();
    println!("| case | ns / call | spread | allocations / call | model bytes |");
    println!("|---|---:|---:|---:|---:|");
    for r in &out {
        println!(
            "| {} | {:.1} | {:.1}-{:.1} | {} | {} |",
            r.name, r.ns, r.lo, r.hi, r.allocs, r.bytes
        );
    }
    for r in [&step1, &step32] {
        println!(
            "| {} | {:.2} us | {:.2}-{:.2} us | {} | {} |",
            r.name,
            r.ns / 1000.0,
            r.lo / 1000.0,
            r.hi / 1000.0,
            r.allocs,
            r.bytes
        );
    }
}
