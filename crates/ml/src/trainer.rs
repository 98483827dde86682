//! KML's asynchronous trainer: the I/O path pushes samples into a lock-free ring and returns at
//! once; one background thread drains the ring, normalises online, trains and publishes model
//! snapshots for inference (`shared/spec/kml.md` section 2).
//!
//! ```
//! use iolearn_ml::{Activation, Loss, MlpBuilder};
//! use iolearn_ml::trainer::{AsyncTrainer, Sample, TrainerConfig};
//! let net = MlpBuilder::new(2).hidden(4, Activation::Tanh).output(2).build();
//! let (mut tx, handle) = AsyncTrainer::spawn(net, Loss::softmax_cross_entropy(), TrainerConfig::default());
//! for i in 0..100 {
//!     tx.push(Sample { x: [i as f32, 1.0], y: (i % 2) as f32 });
//! }
//! drop(tx); // closing the producer lets the thread finish
//! let (_net, stats) = handle.join();
//! assert_eq!(stats.trained + stats.dropped, 100);
//! ```

use crate::net::{Sequential, Sgd};
use crate::norm::{Weighting, Welford};
use crate::ring::{ring, Consumer, Producer};
use crate::Loss;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One training sample of `D` features; `y` is a class index or a regression target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample<const D: usize> {
    /// Raw (un-normalised) features.
    pub x: [f32; D],
    /// Target.
    pub y: f32,
}

/// Settings of the background trainer.
#[derive(Debug, Clone)]
pub struct TrainerConfig {
    /// Learning rate (default 0.01, KML).
    pub lr: f32,
    /// Momentum (default 0.99, KML).
    pub momentum: f32,
    /// Samples per step (default 1, KML).
    pub batch_size: usize,
    /// Ring capacity in samples (default 4096).
    pub ring_capacity: usize,
    /// Online normalisation of inputs (default cumulative Welford); `None` trains on raw input.
    pub normalise: Option<Weighting>,
    /// Publish a snapshot every this many steps (default 64).
    pub publish_every: u64,
}

impl Default for TrainerConfig {
    fn default() -> Self {
        TrainerConfig {
            lr: 0.01,
            momentum: 0.99,
            batch_size: 1,
            ring_capacity: 4096,
            normalise: Some(Weighting::Cumulative),
            publish_every: 64,
        }
    }
}

/// Counters of a trainer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrainerStats {
    /// Samples consumed and trained on.
    pub trained: u64,
    /// Gradient steps taken.
    pub steps: u64,
    /// Samples the ring dropped because it was full.
    pub dropped: u64,
}

/// Handle to the background thread.
pub struct TrainerHandle {
    snapshot: Arc<Mutex<(Sequential, Option<Welford>)>>,
    stats: Arc<Mutex<TrainerStats>>,
    thread: JoinHandle<(Sequential, TrainerStats)>,
}

/// Namespace for [`AsyncTrainer::spawn`].
pub struct AsyncTrainer;

impl AsyncTrainer {
    /// Start training `net` in a background thread; returns the producer end of its ring.
    pub fn spawn<const D: usize>(
        net: Sequential,
        loss: Loss,
        cfg: TrainerConfig,
    ) -> (Producer<Sample<D>>, TrainerHandle) {
        assert_eq!(net.in_dim(), D, "sample width must equal the network's input width");
        let (tx, rx) = ring::<Sample<D>>(cfg.ring_capacity);
        let norm = cfg.normalise.map(|w| Welford::new(D, w));
        let snapshot = Arc::new(Mutex::new((net.clone(), norm.clone())));
        let stats = Arc::new(Mutex::new(TrainerStats::default()));
        let (snap2, stats2) = (snapshot.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name("iolearn-trainer".into())
            .spawn(move || run(net, norm, loss, cfg, rx, snap2, stats2))
            .expect("spawn trainer thread");
        (
            tx,
            TrainerHandle {
                snapshot,
                stats,
                thread,
            },
        )
    }
}

fn run<const D: usize>(
    mut net: Sequential,
    mut norm: Option<Welford>,
    loss: Loss,
    cfg: TrainerConfig,
    mut rx: Consumer<Sample<D>>,
    snapshot: Arc<Mutex<(Sequential, Option<Welford>)>>,
    stats: Arc<Mutex<TrainerStats>>,
) -> (Sequential, TrainerStats) {
    // All memory is allocated here, before the loop, as KML allocates only in its thread.
    let mut sgd = Sgd::new(&net, cfg.lr, cfg.momentum);
    let mut ws = net.workspace();
    let bs = cfg.batch_size.max(1);
    let mut xb = vec![0.0f32; bs * D];
    let mut yb = vec![0.0f32; bs];
    let (mut fill, mut local) = (0usize, TrainerStats::default());
    loop {
        match rx.pop() {
            Some(s) => {
                let row = &mut xb[fill * D..(fill + 1) * D];
                row.copy_from_slice(&s.x);
                if let Some(w) = norm.as_mut() {
                    w.update(&s.x);
                    w.transform(row);
                }
                yb[fill] = s.y;
                fill += 1;
                local.trained += 1;
                if fill == bs {
                    sgd.step(&mut net, &mut ws, &xb, &yb, &loss);
                    fill = 0;
                    local.steps += 1;
                    if local.steps % cfg.publish_every.max(1) == 0 {
                        publish(&snapshot, &stats, &net, &norm, &rx, local);
                    }
                }
            }
            None if rx.is_closed() && rx.is_empty() => break,
            None => std::thread::park_timeout(Duration::from_micros(500)),
        }
    }
    if fill > 0 {
        sgd.step(&mut net, &mut ws, &xb[..fill * D], &yb[..fill], &loss);
        local.steps += 1;
    }
    publish(&snapshot, &stats, &net, &norm, &rx, local);
    local.dropped = rx.stats().dropped;
    (net, local)
}

fn publish<const D: usize>(
    snapshot: &Mutex<(Sequential, Option<Welford>)>,
    stats: &Mutex<TrainerStats>,
    net: &Sequential,
    norm: &Option<Welford>,
    rx: &Consumer<Sample<D>>,
    mut local: TrainerStats,
) {
    local.dropped = rx.stats().dropped;
    let mut snap = snapshot.lock().unwrap_or_else(|e| e.into_inner());
    snap.0.clone_from(net);
    snap.1.clone_from(norm);
    *stats.lock().unwrap_or_else(|e| e.into_inner()) = local;
}

impl TrainerHandle {
    /// The latest published model and normaliser.
    pub fn snapshot(&self) -> (Sequential, Option<Welford>) {
        self.snapshot.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Counters as of the latest snapshot.
    pub fn stats(&self) -> TrainerStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for the thread (it ends once the producer is dropped and the ring is drained).
    pub fn join(self) -> (Sequential, TrainerStats) {
        self.thread.join().expect("trainer thread panicked")
    }
}
