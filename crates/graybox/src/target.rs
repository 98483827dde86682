//! What the prober talks to: a device it can send I/Os to and time, nothing more.

use iolearn_flash::ssd::{GcMode, Ssd, SsdConfig};

/// An error, with the file or option it is about in its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// One I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Io {
    /// Byte offset (a multiple of [`Target::block_bytes`]).
    pub offset: u64,
    /// Bytes (a multiple of [`Target::block_bytes`]).
    pub len: u64,
    /// A write (else a read).
    pub write: bool,
}

/// A device seen from outside: I/Os in, latencies out.
pub trait Target {
    /// What it is, for reports.
    fn name(&self) -> String;
    /// Bytes addressable.
    fn size_bytes(&self) -> u64;
    /// The smallest I/O (offsets and lengths are multiples of it).
    fn block_bytes(&self) -> u64;
    /// The largest I/O.
    fn max_io_bytes(&self) -> u64;
    /// The most I/Os [`Target::run`] takes at once.
    fn depth(&self) -> usize;
    /// Issue `ios` together, wait for all of them; their latencies (ns) replace `lat`'s
    /// contents, in order.
    fn run(&mut self, ios: &[Io], lat: &mut Vec<u64>) -> Result<(), Error>;
    /// Send nothing for `ns` (a drive flushes its buffer and finishes background work).
    fn idle(&mut self, ns: u64) -> Result<(), Error>;
    /// The target's clock, ns (for rates).
    fn now_ns(&self) -> u64;
}

/// The simulated SSD (`iolearn-flash`) on a virtual clock: I/Os of a batch are submitted at
/// the same instant, the next batch 1 us after the last of them completes (the host's turn).
pub struct SimTarget {
    ssd: Ssd,
    now_ns: u64,
    /// Bytes written so far, and when the drive first collected garbage (ground truth for
    /// checking the GC probe; the prober never reads it).
    written_bytes: u64,
    first_gc_bytes: Option<u64>,
}

/// Host time between a batch's last completion and the next batch.
const TURNAROUND_NS: u64 = 1_000;

impl SimTarget {
    /// A fresh drive of this geometry and GC design.
    pub fn new(cfg: SsdConfig, mode: GcMode) -> SimTarget {
        SimTarget {
            ssd: Ssd::new(cfg, mode),
            now_ns: 0,
            written_bytes: 0,
            first_gc_bytes: None,
        }
    }

    /// Ground truth: the bytes written before the batch in which the drive first collected
    /// garbage (None if it has not).
    pub fn first_gc_bytes(&self) -> Option<u64> {
        self.first_gc_bytes
    }

    /// The drive (its configuration and counters are the ground truth the answers are
    /// checked against; the prober never reads them).
    pub fn ssd(&self) -> &Ssd {
        &self.ssd
    }
}

impl Target for SimTarget {
    fn name(&self) -> String {
        format!("simulated SSD '{}'", self.ssd.config().name)
    }

    fn size_bytes(&self) -> u64 {
        self.ssd.capacity_bytes()
    }

    fn block_bytes(&self) -> u64 {
        512
    }

    fn max_io_bytes(&self) -> u64 {
        4 << 20
    }

    fn depth(&self) -> usize {
        256
    }

    fn run(&mut self, ios: &[Io], lat: &mut Vec<u64>) -> Result<(), Error> {
        lat.clear();
        let mut end = self.now_ns;
        let collected = self.ssd.stats().gcs;
        for io in ios {
            let done = self.ssd.submit(self.now_ns, io.offset, io.len, io.write);
            lat.push(done - self.now_ns);
            end = end.max(done);
        }
        self.now_ns = end + TURNAROUND_NS;
        if self.first_gc_bytes.is_none() && self.ssd.stats().gcs > collected {
            self.first_gc_bytes = Some(self.written_bytes);
        }
        self.written_bytes += ios.iter().filter(|io| io.write).map(|io| io.len).sum::<u64>();
        Ok(())
    }

    fn idle(&mut self, ns: u64) -> Result<(), Error> {
        self.now_ns += ns;
        self.ssd.tick(self.now_ns);
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }
}
