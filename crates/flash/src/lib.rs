//! `iolearn-flash`: the flash world of the tail-latency work (MittOS, LinnOS, ML-MittOS,
//! TinyTailFlash), apart from the page-cache world of `iolearn-sim`.
//!
//! - [`storage`]: what a replica's device is to the rest ([`storage::Storage`]: submit,
//!   peek, the white-box [`storage::DeviceState`]), so the drives and the replicas do not
//!   import each other.
//! - [`ssd`]: a flash SSD (geometry, page-mapped FTL, greedy GC and its tolerant designs,
//!   write buffer, NAND timing, per-channel booking calendars).
//! - [`disk`]: a rotating disk behind a FIFO or SSTF host queue (MittNOOP's world).
//! - [`sched`]: a disk behind a multi-tenant I/O scheduler (bfq-like fair queueing,
//!   mq-deadline, none) with `ionice` priorities: MittCFQ's world.
//! - [`replicas`]: replicas with noise (added latency, or other tenants' I/O), the client's
//!   failover, hedge and clone, ML-MittOS's closed form.
//! - [`replay`]: a block trace replayed on replicated SSDs with per-I/O device state.
//!
//! A disk replica reuses `iolearn-sim`'s device model; nothing here does I/O.
#![deny(missing_docs)]

pub mod disk;
pub mod replay;
pub mod replicas;
pub mod sched;
pub mod ssd;
pub mod storage;
