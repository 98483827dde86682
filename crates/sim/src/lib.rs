//! `iolearn-sim`: a discrete-event simulator of the Linux page cache, readahead and storage
//! devices — iolearn's embedded default world, where readahead choices matter as they do on
//! real machines.
//!
//! Main types:
//! - [`readahead::RaState`]: Linux's on-demand readahead state machine (`mm/readahead.c`).
//! - [`leap::LeapState`]: LEAP's prefetcher, the baseline KML compared against.
//! - [`cache::PageCache`]: per-file pages on active/inactive LRU lists, dirty write-back.
//! - [`device::Device`] with [`device::DevicePreset`]s (NVMe, SATA SSD, disk).
//! - [`workload::Generator`]: db_bench-like workloads over an LSM-like file set, fio patterns.
//! - [`engine::Sim`]: the event loop, with the knobs a controller turns between steps.
//!
//! Depends on `iolearn-ml` only for its seeded RNG; does no I/O. The flash world of the
//! tail-latency work (SSD, disk queue, replicas) is `iolearn-flash`.
//!
//! ```
//! use iolearn_sim::engine::{run, SimConfig};
//! use iolearn_sim::device::DevicePreset;
//! use iolearn_sim::workload::{DbShape, WorkloadKind};
//! let mut cfg = SimConfig::calibration(WorkloadKind::ReadRandom, DevicePreset::nvme(), 16);
//! cfg.db = DbShape::of_size(64 << 20);
//! cfg.cache_bytes = 24 << 20;
//! let r = run(cfg, 200_000_000); // 0.2 simulated seconds
//! assert!(r.ops_per_s[0] > 0.0);
//! ```
#![deny(missing_docs)]

pub mod cache;
pub mod calibrate;
pub mod device;
pub mod engine;
/// LEAP's prefetcher, shared with the tuner on the kernel.
pub use iolearn_leap as leap;
pub mod readahead;
pub mod workload;
