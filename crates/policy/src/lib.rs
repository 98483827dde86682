//! `iolearn-policy`: the decision path shared by both worlds — feature extractors that turn a
//! stream of observations into per-window features, and (in later issues) the controllers
//! that turn model outputs into actions. A policy never knows whether its events come from
//! the simulator (`iolearn-sim`) or from eBPF probes (`iolearn-probe`).
//!
//! Main types: [`readahead::KmlFeatures`] (KML's readahead features, per device and per file)
//! fed with [`PageObservation`]s.
#![deny(missing_docs)]

pub mod admission;
pub mod controller;
pub mod guard;
pub mod latency;
pub mod mittsched;
pub mod online;
pub mod per_file_learner;
pub mod readahead;
pub mod ssdbooks;
pub mod steady;

/// One page-cache observation: what KML's hooks (and our eBPF probes) record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageObservation {
    /// Time in nanoseconds (any epoch; only differences and window boundaries matter).
    pub time_ns: u64,
    /// Inode (file) the page belongs to.
    pub inode: u64,
    /// Page index in the file.
    pub index: u64,
    /// Process (thread group) whose access caused the event; 0 when unknown.
    pub pid: u32,
}
