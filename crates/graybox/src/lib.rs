//! `iolearn-graybox`: infer an SSD's internals from the latencies of crafted I/O patterns
//! alone, as the LinnOS thesis's graybox prober does (section 7.2: nine properties of 21
//! drives, the write buffer found by Jenks natural breaks), with no access to the firmware.
//!
//! - **Write buffer**: written at full speed, a drive acknowledges writes from its DRAM until
//!   the buffer is full, then stalls for a flush. The stalls are the upper class of the write
//!   latencies split by natural breaks; the writes between two stalls fill the buffer.
//! - **Its unit** (the flash page, or the mapping unit): small writes at a stride take one
//!   buffer slot each once the stride reaches the unit, and share a slot below it, so the
//!   writes between stalls double when the stride halves under the unit.
//! - **Timed flush**: a unit written and read back after a wait comes from DRAM, far faster
//!   than a lone read, until the drive's timer flushes it to flash: the wait where that
//!   changes.
//! - **Parallel units and channels**: pages written in one sequential run are striped over the
//!   drive's parallel units (planes) and channels. Two of them read together collide when they
//!   share a unit (one waits a page read) and collide less when they share only a channel (one
//!   waits a transfer): the distances at which reads collide are multiples of the counts.
//! - **GC onset**: written (at random) past its spare capacity the drive's sustained write rate falls (the
//!   write cliff); the bytes written before it.
//!
//! The device is a [`Target`]: the simulated SSD ([`SimTarget`]; its true geometry checks the
//! answers in the tests) or a real block device or file ([`DeviceTarget`], io_uring with
//! `O_DIRECT`).

mod breaks;
mod device;
mod target;

pub use device::DeviceTarget;
pub use target::{Error, Io, SimTarget, Target};

use breaks::{median, thresholds};
use iolearn_flash::ssd::{GcMode, SsdConfig};
use iolearn_ml::Rng;

/// A drive of random geometry and timing from `seed`, for checking the prober on drives it was
/// not developed on: 2 to 16 channels, 1 to 4 chips, 1 or 2 dies and planes, pages of 4 to 32
/// KiB, reads of 25 to 90 us, programs of 0.2 to 2.25 ms, channels of 200 MB/s to 1.2 GB/s,
/// buffers of 64 to 4,096 pages (at most a 64th of the drive), flushes every 10 ms to 1 s.
pub fn random_drive(seed: u64) -> SsdConfig {
    let mut r = Rng::new(seed);
    let mut pick = |v: &[u64]| v[r.below(v.len())];
    let channels = pick(&[2, 3, 4, 6, 8, 12, 16]) as usize;
    let program_lower_ns = pick(&[200_000, 400_000, 600_000, 900_000]);
    let cfg = SsdConfig {
        name: format!("random-{seed}"),
        channels,
        chips_per_channel: pick(&[1, 2, 4]) as usize,
        dies_per_chip: pick(&[1, 2]) as usize,
        planes_per_die: pick(&[1, 2]) as usize,
        blocks_per_plane: pick(&[48, 64, 96]) as usize,
        pages_per_block: pick(&[64, 128, 256]) as usize,
        page_bytes: pick(&[4096, 8192, 16384, 32768]),
        over_provisioning: pick(&[7, 12, 20, 28]) as f64 / 100.0,
        gc_threshold_blocks: pick(&[2, 3, 5]) as usize,
        read_ns: pick(&[25_000, 45_000, 60_000, 90_000]),
        program_lower_ns,
        program_upper_ns: program_lower_ns * pick(&[10, 15, 25]) / 10,
        erase_ns: pick(&[1_500_000, 3_000_000, 5_000_000]),
        channel_bytes_per_s: pick(&[200, 400, 800, 1_200]) * 1_000_000,
        controller_ns: pick(&[1_000, 3_000, 8_000]),
        buffer_pages: pick(&[64, 256, 1024, 4096]) as usize,
        flush_interval_ns: pick(&[10, 50, 200, 1_000]) * 1_000_000,
        parity_group: 2,
        read_retry_share: 0.0,
        read_retry_ns: 0,
        program_spread: 0.0,
    };
    // RAIN's group (unused here) must divide the planes; the buffer is at most a 64th of the
    // drive (drives hold megabytes in DRAM, not a quarter of their flash).
    let mut cfg = SsdConfig {
        parity_group: (2..=cfg.planes())
            .find(|g| cfg.planes().is_multiple_of(*g))
            .unwrap_or(2),
        ..cfg
    };
    while cfg.buffer_pages as u64 * 64 > cfg.logical_pages() {
        cfg.buffer_pages /= 4;
    }
    debug_assert!(cfg.check_ranges().is_ok(), "{cfg:?}");
    cfg
}

/// How hard to probe. Defaults suit drives with pages up to 128 KiB, buffers up to tens of
/// thousands of pages and up to 1,024 parallel units.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Writes in flight at once while filling the buffer or the drive.
    pub queue_depth: usize,
    /// The first stride of the buffer probe: units up to half of it are found, larger ones
    /// reported as "at least" it.
    pub max_unit_bytes: u64,
    /// Buffer fills measured per stride (the answer is their median).
    pub fills: usize,
    /// Writes per stride before giving up on seeing the buffer stall.
    pub max_writes: u64,
    /// Farthest distance, in units, between two pages read together.
    pub max_distance: usize,
    /// Pairs read per distance (the answer per distance is their median).
    pub pair_repeats: usize,
    /// Probe GC onset (writes the whole device, then more, at random).
    pub gc: bool,
    /// Give up on GC onset after writing this many times the capacity.
    pub gc_budget: f64,
    /// Idle time that lets a buffer flush and the flash finish (drives flush every 3 ms to 1 s).
    pub settle_ns: u64,
    /// Seed of the random writes.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            queue_depth: 32,
            max_unit_bytes: 128 << 10,
            fills: 5,
            max_writes: 1 << 19,
            max_distance: 1024,
            pair_repeats: 16,
            gc: true,
            gc_budget: 3.0,
            settle_ns: 1_000_000_000,
            seed: 1,
        }
    }
}

impl Options {
    /// Every field in range for `t`; the error names the field.
    pub fn check(&self, t: &dyn Target) -> Result<(), Error> {
        let bad = |field: &str, why: String| Err(Error(format!("{field}: {why}")));
        if !(1..=t.depth()).contains(&self.queue_depth) {
            return bad("queue_depth", format!("{} (1 to {})", self.queue_depth, t.depth()));
        }
        let (block, max_io) = (t.block_bytes(), t.max_io_bytes());
        if self.max_unit_bytes < 2 * block || self.max_unit_bytes > max_io || !self.max_unit_bytes.is_power_of_two() {
            return bad(
                "max_unit_bytes",
                format!(
                    "{} (a power of two from {} to {max_io})",
                    self.max_unit_bytes,
                    2 * block
                ),
            );
        }
        if !(2..=100).contains(&self.fills) {
            return bad("fills", format!("{} (2 to 100)", self.fills));
        }
        if !(1_000..=1 << 30).contains(&self.max_writes) {
            return bad("max_writes", format!("{} (1,000 to 2^30)", self.max_writes));
        }
        if !(2..=65_536).contains(&self.max_distance) {
            return bad("max_distance", format!("{} (2 to 65,536)", self.max_distance));
        }
        if !(1..=1_000).contains(&self.pair_repeats) {
            return bad("pair_repeats", format!("{} (1 to 1,000)", self.pair_repeats));
        }
        if !(self.gc_budget.is_finite() && (1.0..=100.0).contains(&self.gc_budget)) {
            return bad("gc_budget", format!("{} (1 to 100 times the capacity)", self.gc_budget));
        }
        if self.settle_ns > 60_000_000_000 {
            return bad("settle_ns", format!("{} (at most 60 s)", self.settle_ns));
        }
        let need = self.max_unit_bytes * (self.max_distance as u64 + 8 * self.pair_repeats as u64 + 1);
        if t.size_bytes() < need.max(16 << 20) {
            return Err(Error(format!(
                "{}: {} bytes; probing needs at least {} (max_distance x max_unit_bytes, and 16 MiB)",
                t.name(),
                t.size_bytes(),
                need.max(16 << 20)
            )));
        }
        Ok(())
    }
}

/// One inferred property: its value if the probe found one, and how (or why not).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Finding {
    /// The value (bytes, a count, or ns, as the field's name says); None if not found.
    pub value: Option<u64>,
    /// The evidence, or why there is no value.
    pub how: String,
}

impl Finding {
    fn found(value: u64, how: String) -> Finding {
        Finding {
            value: Some(value),
            how,
        }
    }

    fn none(how: String) -> Finding {
        Finding { value: None, how }
    }
}

/// What the probes found.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Report {
    /// The target's name.
    pub target: String,
    /// Its size.
    pub capacity_bytes: u64,
    /// The write buffer's unit: the flash page (or the mapping unit).
    pub unit_bytes: Finding,
    /// The write buffer.
    pub buffer_bytes: Finding,
    /// A lone unit-sized read of flushed data (median).
    pub read_ns: Finding,
    /// How long a written unit stays in the buffer, read back from DRAM, before a timed flush
    /// sends it to flash.
    pub flush_interval_ns: Finding,
    /// Independent parallel units (planes) that pages written in sequence are striped over.
    pub parallel_units: Finding,
    /// Channels (units sharing one collide on transfers only).
    pub channels: Finding,
    /// Bytes written (from the start of the GC probe: units at random over the device) before
    /// the sustained write rate falls.
    pub gc_onset_bytes: Finding,
    /// I/Os the probes sent.
    pub ios: u64,
    /// Bytes they wrote.
    pub written_bytes: u64,
}

/// Probe `t` for everything, in order: the buffer (and its unit), the parallelism (reading
/// units of the size found), the GC onset (writing them). `progress` hears what each step is
/// doing.
pub fn probe(t: &mut dyn Target, o: &Options, progress: &mut dyn FnMut(&str)) -> Result<Report, Error> {
    let mut p = Prober::new(t, o)?;
    let (unit, buffer) = p.buffer(progress)?;
    let unit_bytes = p.unit_or_default(&unit);
    let (read_ns, units, channels) = p.parallelism(unit_bytes, progress)?;
    let flush_interval_ns = p.flush_interval(unit_bytes, read_ns.value, progress)?;
    let gc_onset_bytes = if o.gc {
        p.gc_onset(unit_bytes, progress)?
    } else {
        Finding::none("not probed".into())
    };
    Ok(Report {
        target: p.t.name(),
        capacity_bytes: p.t.size_bytes(),
        unit_bytes: unit,
        buffer_bytes: buffer,
        read_ns,
        flush_interval_ns,
        parallel_units: units,
        channels,
        gc_onset_bytes,
        ios: p.ios,
        written_bytes: p.written,
    })
}

/// A simulated drive's true values, to hold the report against.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Truth {
    /// The page.
    pub unit_bytes: u64,
    /// The write buffer.
    pub buffer_bytes: u64,
    /// Planes.
    pub parallel_units: u64,
    /// Channels.
    pub channels: u64,
    /// The timed flush.
    pub flush_interval_ns: u64,
    /// Bytes the GC probe wrote before the drive's first collection (None: none, or
    /// collections that take no time, `no-gc`).
    pub gc_onset_bytes: Option<u64>,
}

/// Probe a simulated drive: the buffer and the parallelism on one fresh drive, the GC onset
/// on another (so no garbage of the other probes is collected first); the report and the
/// truth.
pub fn probe_sim(
    cfg: &SsdConfig,
    mode: GcMode,
    o: &Options,
    progress: &mut dyn FnMut(&str),
) -> Result<(Report, Truth), Error> {
    let mut sim = SimTarget::new(cfg.clone(), mode);
    let mut report = probe(&mut sim, &Options { gc: false, ..o.clone() }, progress)?;
    let mut gc_onset_bytes = None;
    if o.gc {
        let mut fresh = SimTarget::new(cfg.clone(), mode);
        let mut p = Prober::new(&mut fresh, o)?;
        let unit = p.unit_or_default(&report.unit_bytes);
        report.gc_onset_bytes = p.gc_onset(unit, progress)?;
        report.ios += p.ios;
        report.written_bytes += p.written;
        gc_onset_bytes = fresh.first_gc_bytes().filter(|_| mode != GcMode::NoGc);
    }
    let truth = Truth {
        unit_bytes: cfg.page_bytes,
        buffer_bytes: cfg.buffer_pages as u64 * cfg.page_bytes,
        parallel_units: cfg.planes() as u64,
        channels: cfg.channels as u64,
        flush_interval_ns: cfg.flush_interval_ns,
        gc_onset_bytes,
    };
    Ok((report, truth))
}

/// The probes, one at a time (a simulated drive can be probed fresh for each).
pub struct Prober<'a> {
    t: &'a mut dyn Target,
    o: Options,
    lat: Vec<u64>,
    /// I/Os sent.
    pub ios: u64,
    /// Bytes written.
    pub written: u64,
}

/// A buffer stall seen online: this many times the median latency of the stride's first
/// writes (the final classification is by natural breaks; this only steers the queue depth).
const STALL_FACTOR: f64 = 10.0;

impl<'a> Prober<'a> {
    /// Probes of `t` with options `o` (checked against it).
    pub fn new(t: &'a mut dyn Target, o: &Options) -> Result<Prober<'a>, Error> {
        o.check(t)?;
        Ok(Prober {
            t,
            o: o.clone(),
            lat: Vec::new(),
            ios: 0,
            written: 0,
        })
    }

    /// The unit found, or (none found) the larger of the block and 4 KiB.
    pub fn unit_or_default(&self, unit: &Finding) -> u64 {
        unit.value
            .unwrap_or(self.t.block_bytes().max(4096).min(self.o.max_unit_bytes))
    }

    fn check_unit(&self, unit: u64) -> Result<(), Error> {
        let (block, max) = (self.t.block_bytes(), self.o.max_unit_bytes);
        if unit == 0 || !unit.is_multiple_of(block) || unit > max {
            return Err(Error(format!("unit: {unit} bytes (a multiple of {block} up to {max})")));
        }
        Ok(())
    }

    fn run(&mut self, ios: &[Io]) -> Result<(), Error> {
        self.t.run(ios, &mut self.lat)?;
        self.ios += ios.len() as u64;
        self.written += ios.iter().filter(|io| io.write).map(|io| io.len).sum::<u64>();
        Ok(())
    }

    /// Let the buffer flush and the flash finish: two settle times (the first starts a
    /// timed flush, the second lets it end).
    fn settle(&mut self) -> Result<(), Error> {
        self.t.idle(self.o.settle_ns)?;
        self.t.idle(self.o.settle_ns)
    }

    /// The buffer's unit and size: writes between stalls at halving strides.
    pub fn buffer(&mut self, progress: &mut dyn FnMut(&str)) -> Result<(Finding, Finding), Error> {
        progress("write buffer: strided writes until the buffer stalls");
        let block = self.t.block_bytes();
        let mut stride = self.o.max_unit_bytes;
        let (top, sent) = self.stalls(stride, None)?;
        let Some(top) = top else {
            let why = format!(
                "no regular write stall in {sent} writes of {block} B at a {} KiB stride ({} distinct offsets: a \
                 buffer of more units is not seen)",
                stride >> 10,
                self.t.size_bytes() / stride
            );
            return Ok((Finding::none(why.clone()), Finding::none(why)));
        };
        progress(&format!("  stride {} KiB: a stall every {top:.0} writes", stride >> 10));
        let mut prev = top;
        while stride / 2 >= block {
            stride /= 2;
            let Some(n) = self.stalls(stride, Some(prev))?.0 else {
                let why = format!("stalls lost at a {stride} B stride");
                return Ok((Finding::none(why.clone()), Finding::none(why)));
            };
            progress(&format!("  stride {stride} B: a stall every {n:.0} writes"));
            let ratio = n / prev;
            if ratio > 1.6 && stride * 2 == self.o.max_unit_bytes {
                // Doubled at the first halving: the unit may be the largest stride or any
                // larger one (a stride under the unit halves the slots alike).
                let why = format!(
                    "at least {} KiB: the writes between stalls doubled from the first halving; a larger --max-page \
                     finds it",
                    self.o.max_unit_bytes >> 10
                );
                return Ok((Finding::none(why.clone()), Finding::none(why)));
            }
            if ratio > 1.6 {
                // Two writes per slot: the unit is the stride before.
                let unit = stride * 2;
                let slots = top.round() as u64;
                let how =
                    format!("writes between stalls: {top:.0} at strides of {unit} B and more, {n:.0} at {stride} B");
                return Ok((
                    Finding::found(unit, how),
                    Finding::found(
                        slots * unit,
                        format!(
                            "{slots} units written between stalls (median of {} fills)",
                            self.o.fills
                        ),
                    ),
                ));
            }
            if ratio < 0.75 {
                let why = format!("writes between stalls fell from {prev:.0} to {n:.0} at a {stride} B stride");
                return Ok((Finding::none(why.clone()), Finding::none(why)));
            }
            prev = n;
        }
        let slots = top.round() as u64;
        Ok((
            Finding::found(
                block,
                format!("at most {block} B: no stride down to it shared a buffer slot"),
            ),
            Finding::found(slots * block, format!("{slots} writes between stalls")),
        ))
    }

    /// The median number of writes between buffer stalls, writing one block at `stride`
    /// apart (None if the stalls are not regular), and the writes sent. `expect` (the count at the stride before)
    /// bounds the writes. Once two stalls have shown the count, the writes near the next stall
    /// go one at a time, so no write of the stalled batch follows the stall into the next
    /// count; only counts that start at such a stall are kept.
    fn stalls(&mut self, stride: u64, expect: Option<f64>) -> Result<(Option<f64>, usize), Error> {
        let block = self.t.block_bytes();
        let span = self.t.size_bytes() / stride * stride;
        let qd = self.o.queue_depth;
        let limit = match expect {
            None => self.o.max_writes,
            Some(e) => ((e * 2.5) as u64 * (self.o.fills as u64 + 2)).min(self.o.max_writes),
        };
        self.settle()?;
        let mut w = Writes::default();
        let (mut floor, mut last_stall, mut gap, mut clean) = (None::<f64>, None::<u64>, None::<f64>, 0usize);
        let mut batch = Vec::with_capacity(qd);
        while (w.lat.len() as u64) < limit && clean <= self.o.fills {
            let next = w.lat.len() as u64;
            let since = last_stall.map_or(next, |s| next - s);
            let depth = match gap {
                Some(g) if since as f64 + (2 * qd) as f64 + g / 32.0 >= g => 1,
                _ => qd,
            };
            batch.clear();
            batch.extend((next..next + depth as u64).map(|i| Io {
                offset: i * stride % span,
                len: block,
                write: true,
            }));
            self.run(&batch)?;
            w.push(&self.lat);
            if floor.is_none() && w.lat.len() >= 256 {
                floor = median(&w.lat);
            }
            let Some(f) = floor else { continue };
            if let Some(k) = self.lat.iter().position(|&l| l as f64 > f * STALL_FACTOR) {
                let at = next + k as u64;
                if let Some(s) = last_stall {
                    gap = Some((at - s) as f64);
                }
                clean += usize::from(depth == 1);
                last_stall = Some(at);
            }
        }
        Ok((w.regular_gaps(), w.lat.len()))
    }

    /// A lone read's latency, and the parallel units and channels from reads in pairs of
    /// `unit` bytes.
    pub fn parallelism(
        &mut self,
        unit: u64,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(Finding, Finding, Finding), Error> {
        self.check_unit(unit)?;
        progress("parallel units and channels: pages written in order, read in pairs");
        let (dmax, reps) = (self.o.max_distance, self.o.pair_repeats);
        let step = 5; // pairs of one distance start 5 units apart: different units and channels
        let pages = (dmax + step * reps + 1) as u64;
        self.settle()?;
        let qd = self.o.queue_depth as u64;
        let mut batch = Vec::new();
        for first in (0..pages).step_by(qd as usize) {
            batch.clear();
            batch.extend((first..(first + qd).min(pages)).map(|i| Io {
                offset: i * unit,
                len: unit,
                write: true,
            }));
            self.run(&batch)?;
        }
        self.settle()?;
        let read = |i: u64| Io {
            offset: i * unit,
            len: unit,
            write: false,
        };
        let mut lone = Vec::new();
        for k in 0..(4 * reps as u64).max(16) {
            self.run(&[read(k * 13 % pages)])?;
            lone.push(self.lat[0] as f64);
        }
        let lone_ns = median(&lone).unwrap_or(0.0);
        let read_ns = Finding::found(lone_ns.round() as u64, format!("median of {} lone reads", lone.len()));
        // Every distance once per round, so a slow spell of the device spreads over the
        // distances instead of raising a run of neighbouring ones.
        let mut pairs = vec![Vec::with_capacity(reps); dmax + 1];
        for r in 0..reps {
            let i = (r * step) as u64;
            for (d, samples) in pairs.iter_mut().enumerate().skip(1) {
                self.run(&[read(i), read(i + d as u64)])?;
                samples.push(self.lat.iter().copied().max().unwrap_or(0) as f64);
            }
        }
        let level: Vec<f64> = pairs.iter().skip(1).map(|p| median(p).unwrap_or(0.0)).collect();
        let (units, channels) = periods(&level, &lone);
        Ok((read_ns, units, channels))
    }

    /// How long a lone written unit is read back from the buffer (far faster than a lone
    /// read of flushed data, `lone_ns`) before a timed flush moves it to flash: doubling waits
    /// from 100 us to 2 s between the write and the read, then halving the step between the
    /// last wait still served from the buffer and the first not (each wait tried on three
    /// fresh units, the majority deciding).
    pub fn flush_interval(
        &mut self,
        unit: u64,
        lone_ns: Option<u64>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Finding, Error> {
        self.check_unit(unit)?;
        let Some(lone) = lone_ns.filter(|&l| l > 0) else {
            return Ok(Finding::none("no lone read to compare with".into()));
        };
        progress("flush interval: a unit written, read back after a wait");
        let units = self.t.size_bytes() / unit;
        let mut next = units / 2; // away from the pages the other probes read in order
        let mut buffered = |p: &mut Self, wait: u64| -> Result<bool, Error> {
            let mut fast = 0;
            for _ in 0..3 {
                p.settle()?;
                let offset = next % units * unit;
                next += 1;
                p.run(&[Io {
                    offset,
                    len: unit,
                    write: true,
                }])?;
                p.t.idle(wait)?;
                p.run(&[Io {
                    offset,
                    len: unit,
                    write: false,
                }])?;
                fast += usize::from(p.lat[0] * 2 < lone);
            }
            Ok(fast >= 2)
        };
        const FIRST: u64 = 100_000;
        const LAST: u64 = 2_000_000_000;
        if !buffered(self, FIRST)? {
            return Ok(Finding::none(format!(
                "a unit read back {} us after it was written is no faster than a lone read: no buffer serves it",
                FIRST / 1_000
            )));
        }
        let (mut lo, mut hi) = (FIRST, FIRST * 2);
        while buffered(self, hi)? {
            if hi >= LAST {
                return Ok(Finding::none(format!(
                    "still read from the buffer {} s after it was written: no timed flush (or a longer one)",
                    LAST / 1_000_000_000
                )));
            }
            (lo, hi) = (hi, (hi * 2).min(LAST));
        }
        while hi - lo > lo / 32 {
            let mid = lo + (hi - lo) / 2;
            if buffered(self, mid)? {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(Finding::found(
            hi,
            format!(
                "read back from the buffer after {:.2} ms, from flash after {:.2} ms",
                lo as f64 / 1e6,
                hi as f64 / 1e6
            ),
        ))
    }

    /// Bytes written before the sustained write rate falls, writing units at random over the
    /// device (from the start: random writes may cost more than sequential ones on their own,
    /// with parity or a coarse mapping, and a change of pattern is no cliff; every write takes
    /// a fresh page until collections begin, in any order). The time to write, against the bytes written, is a straight line
    /// (with a sawtooth of buffer stalls) until collections begin to take flash time; a line
    /// fitted over the first half of the device, the onset is where the curve leaves it for
    /// good.
    pub fn gc_onset(&mut self, unit: u64, progress: &mut dyn FnMut(&str)) -> Result<Finding, Error> {
        self.check_unit(unit)?;
        progress("GC onset: units written at random over the device");
        let size = self.t.size_bytes() / unit * unit;
        let units = size / unit;
        let qd = self.o.queue_depth as u64;
        let budget = (units as f64 * self.o.gc_budget) as u64;
        // At most about a million points of the curve, whatever the device's size.
        let every = ((budget / qd) >> 20).max(1);
        let mut rng = Rng::new(self.o.seed);
        self.settle()?;
        let t0 = self.t.now_ns();
        let mut curve: Vec<(f64, f64)> = Vec::new();
        let mut line: Option<Line> = None;
        let (mut written, mut batches, mut next_report) = (0u64, 0u64, units / 4);
        let mut batch = Vec::with_capacity(qd as usize);
        while written < budget {
            batch.clear();
            for _ in 0..qd {
                let u = rng.below(units as usize) as u64;
                batch.push(Io {
                    offset: u * unit,
                    len: unit,
                    write: true,
                });
            }
            self.run(&batch)?;
            written += qd;
            batches += 1;
            if written >= next_report {
                progress(&format!("  {:.2}x the capacity written", written as f64 / units as f64));
                next_report += units / 4;
            }
            let point = (written as f64, (self.t.now_ns() - t0) as f64);
            if batches.is_multiple_of(every) {
                curve.push(point);
            }
            if line.is_none() && written >= units / 2 {
                // The first sixteenth is left out: into an empty buffer and idle flash.
                let fit: Vec<(f64, f64)> = curve.iter().copied().filter(|p| p.0 >= units as f64 / 16.0).collect();
                line = Line::fit(&fit, qd as f64);
                // A rate that already fell inside the fitted half bends the curve there: the
                // second half of it then climbs faster than the first.
                let mid = units as f64 * 9.0 / 32.0;
                let (a, b): (Vec<_>, Vec<_>) = fit.iter().partition(|p| p.0 < mid);
                if let (Some(a), Some(b)) = (Line::fit(&a, qd as f64), Line::fit(&b, qd as f64)) {
                    if b.slope > 1.5 * a.slope {
                        return Ok(Finding::none(format!(
                            "the write rate fell inside the first half of the device, the stretch a line is fitted \
                             over ({:.1}x slower per byte from 0.28x to 0.5x the capacity than before): it changed \
                             before that (collections started early, or the host slowed)",
                            b.slope / a.slope
                        )));
                    }
                }
            }
            let Some(l) = &line else { continue };
            // Far above the line (twenty sawtooth widths), and rising over each of the last
            // two stretches of a 32nd of the device (a pause of the host is one step, in one
            // stretch; collections slow every stretch): the cliff is behind. It began at the
            // last point still within a width of the line.
            let stretch = units as f64 / 32.0;
            let back = |x: f64| curve[curve.partition_point(|p| p.0 < x).min(curve.len() - 1)];
            let (mid, early) = (back(point.0 - stretch), back(point.0 - 2.0 * stretch));
            let rising = l.excess(point) - l.excess(mid) > 10.0 * l.width
                && l.excess(mid) - l.excess(early) > 10.0 * l.width
                && early.0 < mid.0;
            if l.excess(point) > 20.0 * l.width && rising {
                let onset = curve
                    .iter()
                    .rev()
                    .find(|&&p| l.excess(p) <= l.width)
                    .map_or(0.0, |p| p.0);
                if onset <= units as f64 / 2.0 {
                    return Ok(Finding::none(format!(
                        "the write rate fell at {:.3}x the capacity, inside the first half the line was fitted over: \
                         it changed before that (collections started early, or the host slowed)",
                        point.0 / units as f64
                    )));
                }
                let at = onset as u64 * unit;
                let after = (point.1 - l.at(onset)) / (point.0 - onset).max(1.0);
                return Ok(Finding::found(
                    at,
                    format!(
                        "{:.3}x the capacity: the time to write left its straight line there (fit over the first \
                         half, {:.0} us wide), {:.1}x slower per byte after",
                        at as f64 / size as f64,
                        l.width / 1e3,
                        after / l.slope
                    ),
                ));
            }
        }
        if line.is_none() {
            return Ok(Finding::none(format!(
                "too few batches to fit a line over the first half ({} points; a lower --queue-depth gives more)",
                curve.len()
            )));
        }
        Ok(Finding::none(format!(
            "the time to write stayed on its straight line through {:.1}x the capacity",
            self.o.gc_budget
        )))
    }
}

/// Write latencies in the order sent, with the batch each was sent in.
#[derive(Default)]
struct Writes {
    lat: Vec<f64>,
    batch: Vec<u32>,
    alone: Vec<bool>,
}

impl Writes {
    fn push(&mut self, lat: &[u64]) {
        let b = self.batch.last().map_or(0, |b| b + 1);
        for &l in lat {
            self.lat.push(l as f64);
            self.batch.push(b);
            self.alone.push(lat.len() == 1);
        }
    }

    /// The median count of writes between stalls (the upper class of a two-class natural
    /// breaks split, the first of a batch), over the counts that start at a write sent alone;
    /// None unless there are two such counts and three in four are within 5% of their median.
    fn regular_gaps(&self) -> Option<f64> {
        let lat = &self.lat;
        let t = thresholds(lat, 2)?[0];
        let slow = lat.iter().filter(|&&l| l >= t).count();
        let fast = median(&lat.iter().copied().filter(|&l| l < t).collect::<Vec<_>>())?;
        // Stalls are rare and far above the acknowledgements from DRAM.
        if slow * 10 > lat.len() || t < 3.0 * fast {
            return None;
        }
        let mut stalls: Vec<usize> = Vec::new();
        for (i, &l) in lat.iter().enumerate() {
            let same_batch = stalls.last().is_some_and(|&s| self.batch[s] == self.batch[i]);
            if l >= t && !same_batch {
                stalls.push(i);
            }
        }
        let gaps: Vec<f64> = stalls
            .windows(2)
            .filter(|w| self.alone[w[0]])
            .map(|w| (w[1] - w[0]) as f64)
            .collect();
        let m = median(&gaps)?;
        let close = gaps.iter().filter(|&&g| (g - m).abs() <= 0.05 * m).count();
        (gaps.len() >= 2 && close * 4 >= gaps.len() * 3).then_some(m)
    }
}

/// Time (ns) against units written, fitted by least squares.
struct Line {
    intercept: f64,
    slope: f64,
    /// The largest distance of a fitted point from the line (at least a batch's time).
    width: f64,
}

impl Line {
    fn fit(points: &[(f64, f64)], batch: f64) -> Option<Line> {
        let n = points.len() as f64;
        if n < 8.0 {
            return None;
        }
        let (mx, my) = (
            points.iter().map(|p| p.0).sum::<f64>() / n,
            points.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        if sxx <= 0.0 {
            return None;
        }
        let slope = sxy / sxx;
        let mut l = Line {
            intercept: my - slope * mx,
            slope,
            width: 0.0,
        };
        let spread = points.iter().map(|&p| l.excess(p).abs()).fold(0.0, f64::max);
        l.width = spread.max(slope * batch);
        (slope > 0.0).then_some(l)
    }

    fn at(&self, x: f64) -> f64 {
        self.intercept + self.slope * x
    }

    fn excess(&self, p: (f64, f64)) -> f64 {
        p.1 - self.at(p.0)
    }
}

/// Parallel units and channels from the pair latency at each distance (`level[d - 1]` for
/// distance d) and the lone reads' latencies: the distances where pairs collide are the
/// multiples of a count. Each split of the levels by natural breaks (two and three classes)
/// whose upper part is exactly the multiples of its smallest distance (seen twice at least),
/// and a class apart from the rest, is a period; the largest is the units, the smallest the
/// channels (the units if there is one period; one if pairs at every distance collide).
fn periods(level: &[f64], lone: &[f64]) -> (Finding, Finding) {
    let lone_ns = median(lone).unwrap_or(0.0);
    let dmax = level.len();
    let mut found: Vec<(usize, f64)> = Vec::new();
    // Collisions are a class apart: the gap between the fastest colliding pair and the
    // slowest other one is at least 3% of the latency and three median absolute deviations
    // of the others (about two standard deviations; a split through the middle of mere noise
    // has no gap).
    let apart = |highs: &[f64], lows: &[f64]| {
        let (Some(low), true) = (median(lows), !highs.is_empty()) else {
            return false;
        };
        let mad = median(&lows.iter().map(|l| (l - low).abs()).collect::<Vec<_>>()).unwrap_or(0.0);
        let gap = highs.iter().copied().fold(f64::INFINITY, f64::min) - lows.iter().copied().fold(0.0, f64::max);
        gap >= (0.03 * low).max(3.0 * mad)
    };
    // Distances where reads collided without a period (the first split that had any).
    let mut aperiodic: Option<Vec<usize>> = None;
    for k in [2, 3] {
        for t in thresholds(level, k).unwrap_or_default() {
            let hit: Vec<bool> = level.iter().map(|&l| l >= t).collect();
            let Some(p) = hit.iter().position(|&h| h).map(|i| i + 1) else {
                continue;
            };
            // A period is seen at least twice (one slow distance is no period).
            let periodic = p <= dmax / 2 && (1..=dmax).all(|d| hit[d - 1] == d.is_multiple_of(p));
            let lows: Vec<f64> = level.iter().copied().filter(|&l| l < t).collect();
            let highs: Vec<f64> = level.iter().copied().filter(|&l| l >= t).collect();
            if !apart(&highs, &lows) {
                continue;
            }
            let (Some(high), Some(low)) = (median(&highs), median(&lows)) else {
                continue;
            };
            if !periodic {
                aperiodic.get_or_insert_with(|| (1..=dmax).filter(|&d| hit[d - 1]).collect());
            } else if !found.iter().any(|f| f.0 == p) {
                found.push((p, high - low));
            }
        }
    }
    found.sort_by_key(|f| f.0);
    let Some(&(units, unit_cost)) = found.last() else {
        let why = match aperiodic {
            Some(d) => format!(
                "reads collide at distances that are not the multiples of one count ({}{}): pages are not striped \
                 in turn over the units (parity, or a mapping of the drive's own)",
                d.iter().take(8).map(|d| d.to_string()).collect::<Vec<_>>().join(", "),
                if d.len() > 8 { ", ..." } else { "" }
            ),
            None => format!(
                "no distance from 1 to {dmax} units made two reads collide: more units than that, or none shared"
            ),
        };
        return (Finding::none(why.clone()), Finding::none(why));
    };
    let units_how = format!(
        "reads {units} units apart (and multiples) wait {:.0} us more (a lone read: {:.0} us)",
        unit_cost / 1e3,
        lone_ns / 1e3
    );
    let (channels, cost) = found[0];
    // Pairs at every distance wait (the least of them above a lone read): they all share the
    // one channel.
    let least = level.iter().copied().fold(f64::INFINITY, f64::min);
    if apart(&[least], lone) {
        return (
            Finding::found(units as u64, units_how),
            Finding::found(
                1,
                format!(
                    "pairs at every distance wait {:.0} us more than a lone read: one channel",
                    (least - lone_ns) / 1e3
                ),
            ),
        );
    }
    if channels == units {
        // One period: a unit per channel (a pair waits a page read), or several units behind
        // each channel whose transfer outlasts a page read (a pair waits a transfer, whether
        // or not it shares the unit). The latencies cannot tell these apart.
        return (
            Finding::found(
                units as u64,
                format!(
                    "{units} or more: {units_how}; more units may sit behind each channel if a transfer outlasts a page read"
                ),
            ),
            Finding::found(
                channels as u64,
                "the one collision period: no shorter one for transfers alone".to_string(),
            ),
        );
    }
    let channels_how = if units.is_multiple_of(channels) {
        format!(
            "reads {channels} units apart (and multiples) wait {:.0} us more, a transfer",
            cost / 1e3
        )
    } else {
        let why = format!("collision periods {channels} and {units} do not nest");
        return (Finding::found(units as u64, units_how), Finding::none(why));
    };
    (
        Finding::found(units as u64, units_how),
        Finding::found(channels as u64, channels_how),
    )
}
