//! `iolearn-ml`: a tiny machine-learning runtime small and fast enough to sit on an I/O path.
//!
//! It is iolearn's counterpart of KML's core (see `shared/spec/kml.md` section 2): it trains and
//! runs small neural networks and decision trees in microseconds and a few KiB, with no heap
//! allocation at inference time. The core is `no_std` + `alloc`; the `std` feature (on by
//! default) adds the asynchronous trainer thread and file helpers.
//!
//! Main types:
//! - [`Sequential`] built by [`MlpBuilder`]: layers ([`Layer`]: Linear, Sigmoid, ReLU, Tanh,
//!   Softmax) with forward and backward passes; [`Workspace`] holds the preallocated buffers that
//!   make [`Sequential::forward`] allocation-free.
//! - [`Loss`]: softmax cross-entropy, binary cross-entropy, MSE, asymmetric MSE, categorical hinge.
//! - [`Sgd`]: SGD with momentum, mini-batches, seeded shuffling ([`TrainConfig`], [`Sequential::fit`]).
//! - [`DecisionTree`]: CART induction, inference, scikit-learn `export_text` export and import.
//! - [`ZScore`] (fixed) and [`Welford`] (online, f64, cumulative or exponential) normalisers.
//! - [`quant::QuantizedMlp`]: integer x1000 (LinnOS) and int8 inference.
//! - [`ring::ring`]: a lock-free single-producer single-consumer ring that counts drops.
//! - [`eval`]: k-fold cross-validation, confusion matrix, permutation importance.
//! - [`ModelFile`]: the versioned, checksummed binary model format and its JSON dump.
//! - [`kml`]: importers for KML's released readahead network and decision tree.
//!
//! ```
//! use iolearn_ml::{Activation, Loss, MlpBuilder, TrainConfig};
//! // Learn XOR with a 2-8-2 network.
//! let x = [0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0];
//! let y = [0.0, 1.0, 1.0, 0.0];
//! let mut net = MlpBuilder::new(2).hidden(8, Activation::Tanh).output(2).seed(2).build();
//! let cfg = TrainConfig { epochs: 2000, lr: 0.05, momentum: 0.9, batch_size: 4, seed: 2 };
//! net.fit(&x, &y, &Loss::softmax_cross_entropy(), &cfg).unwrap();
//! let mut ws = net.workspace();
//! assert_eq!(net.predict_class(&[1.0, 0.0], &mut ws), 1);
//! assert_eq!(net.predict_class(&[1.0, 1.0], &mut ws), 0);
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]

extern crate alloc;

mod aligned;
pub mod datasets;
mod error;
pub mod eval;
pub mod format;
mod kernels;
pub mod kml;
mod layer;
mod loss;
mod math;
mod net;
mod norm;
pub mod quant;
pub mod ring;
mod rng;
mod tree;

#[cfg(feature = "std")]
pub mod trainer;

pub use aligned::AlignedVec;
pub use error::{Error, Result};
pub use format::{ClassAction, ModelFile, ModelKind};
pub use layer::{Layer, Linear};
pub use loss::Loss;
pub use net::{Activation, MlpBuilder, Sequential, Sgd, TrainConfig, Workspace};
pub use norm::{Weighting, Welford, ZScore};
pub use rng::Rng;
pub use tree::{Criterion, DecisionTree, Node, TreeConfig};
