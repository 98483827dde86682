//! Inference allocates nothing once its workspace exists (issue 2): a counting global allocator
//! watches every path that runs per I/O or per window.

use iolearn_ml::quant::{QuantizedMlp, Scheme};
use iolearn_ml::{datasets, Activation, DecisionTree, Loss, MlpBuilder, Sgd, TreeConfig, Weighting, Welford, ZScore};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCS.load(Ordering::SeqCst);
    f();
    ALLOCS.load(Ordering::SeqCst) - before
}

#[test]
fn hot_paths_do_not_allocate() {
    // One test function: the counter is global, so parallel tests would disturb each other.
    let net = MlpBuilder::new(5)
        .hidden(15, Activation::Sigmoid)
        .hidden(5, Activation::Sigmoid)
        .output(4)
        .build();
    let mut ws = net.workspace();
    let x = [0.1, -0.2, 0.3, 0.4, -0.5];
    let mut proba = [0.0; 4];
    assert_eq!(
        allocations(|| {
            for _ in 0..100 {
                std::hint::black_box(net.predict_class(std::hint::black_box(&x), &mut ws));
                net.predict_proba(&x, &mut ws, &mut proba);
            }
        }),
        0,
        "mlp inference"
    );

    let linnos = MlpBuilder::new(31).hidden(256, Activation::ReLU).output(2).build();
    for scheme in [Scheme::Fixed1000, Scheme::Int8] {
        let q = QuantizedMlp::new(&linnos, scheme);
        let mut qws = q.workspace();
        let xi = [3.0f32; 31];
        assert_eq!(
            allocations(|| {
                std::hint::black_box(q.predict_class(&xi, &mut qws));
            }),
            0,
            "{scheme:?} inference"
        );
    }

    let (data, labels) = datasets::kml_like(20, 1);
    let tree = DecisionTree::fit(&data, &labels, 5, &TreeConfig::default()).unwrap();
    assert_eq!(
        allocations(|| {
            std::hint::black_box(tree.predict_class(&x));
            tree.predict_proba(&x, &mut proba);
        }),
        0,
        "tree inference"
    );

    let z = ZScore::fit(&data, 5).unwrap();
    let mut w = Welford::new(5, Weighting::Exponential(0.1));
    let mut row = x;
    assert_eq!(
        allocations(|| {
            z.transform(&mut row);
            w.update(&row);
            w.transform(&mut row);
        }),
        0,
        "normalisers"
    );

    let mut trained = net.clone();
    let mut sgd = Sgd::new(&trained, 0.01, 0.99);
    let loss = Loss::softmax_cross_entropy();
    assert_eq!(
        allocations(|| {
            sgd.step(&mut trained, &mut ws, &data[..40], &labels[..8], &loss);
        }),
        0,
        "training step"
    );
}
