//! A flash SSD: geometry, page-mapped FTL with over-provisioning, greedy garbage collection,
//! a write buffer, NAND timing, per-plane and per-channel queues, and TinyTailFlash's
//! GC-tolerant designs (`shared/spec/tail-latency.md` section 4).
//!
//! Like [`iolearn_sim::device::Device`], the drive computes each request's completion when it is
//! submitted (requests must arrive in time order): every plane and every channel has a
//! next-free time, and an operation starts when its resources are free. Garbage collection
//! runs inside the plane that needs it, when a write finds too few free blocks, and occupies
//! the plane (and, without copyback, the channel) for its duration: that is where the tails
//! come from.
//!
//! Modes ([`GcMode`]):
//! - `Base`: GC moves valid pages through the channel (read, transfer out, transfer in,
//!   program), blocking the plane and the channel;
//! - `PlaneBlocking`: intra-plane copyback, the channel stays free (TinyTailFlash);
//! - `Tolerant`: RAIN parity written (`rain.rs`: stripes across a parity group's planes,
//!   superblock GC), reads that hit a plane under GC rebuilt from the other pages of their
//!   stripe, rotating GC (a group's collection runs one plane at a time), GC-tolerant flush
//!   (buffered writes and parity go to planes not under GC while another has room), copyback.
//! - `Preemptive`: the baseline TinyTailFlash compares with (semi-preemptive GC, Lee et al.):
//!   copyback GC that runs in the plane's idle time one step (a page move, or the erase) at a
//!   time, so a host request waits at most for the step under way; when a plane's blocks still
//!   to be erased leave it no free block, the pending collections run at once, unpreempted
//!   (the spikes under intensive I/O).
//! - `NoGc`: GC costs nothing (the reference for tail ratios).

use iolearn_ml::Rng;
use std::collections::VecDeque;

mod rain;
use rain::{Rain, PARITY};

/// Garbage-collection design.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcMode {
    /// Channel-blocking GC (a conventional controller).
    Base,
    /// GC with intra-plane copyback, blocking only its plane.
    PlaneBlocking,
    /// TinyTailFlash: plane-blocking, GC-tolerant reads (parity rebuild), rotating GC,
    /// GC-tolerant flush.
    Tolerant,
    /// Semi-preemptive copyback GC in idle time, forced when the plane runs short.
    Preemptive,
    /// GC happens but takes no time (the no-GC reference).
    NoGc,
}

impl GcMode {
    /// The names [`GcMode::by_name`] knows (for error messages and option choices).
    pub const NAMES: &'static str = "base, plane-blocking, tolerant, preemptive, no-gc";

    /// By name: `base`, `plane-blocking`, `tolerant` (or `ttflash`), `preemptive`, `no-gc`.
    pub fn by_name(name: &str) -> Option<GcMode> {
        Some(match name {
            "base" => GcMode::Base,
            "plane-blocking" => GcMode::PlaneBlocking,
            "tolerant" | "ttflash" => GcMode::Tolerant,
            "preemptive" => GcMode::Preemptive,
            "no-gc" => GcMode::NoGc,
            _ => return None,
        })
    }
}

/// The GC-related designs a drive uses; [`GcMode`] names the usual combinations, tests switch
/// them one by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Designs {
    /// GC moves pages with intra-plane copyback (the channel stays free).
    pub copyback: bool,
    /// RAIN: parity written per stripe of `parity_group - 1` data pages, at the cost of
    /// capacity and a program per stripe; GC collects whole superblocks (`rain.rs`).
    pub rain: bool,
    /// Reads to a plane under GC are rebuilt from the rest of their stripe (implies `rain`).
    pub parity_reads: bool,
    /// At most one plane of a parity group collects at a time (unless out of space).
    pub rotating_gc: bool,
    /// Flushes program buffered pages into planes not under GC.
    pub tolerant_flush: bool,
    /// GC takes no time (the no-GC reference).
    pub free_gc: bool,
    /// GC runs in idle time, preempted by host requests between steps (`GcMode::Preemptive`).
    pub preemptive: bool,
}

impl GcMode {
    /// The designs of this mode.
    pub fn designs(self) -> Designs {
        match self {
            GcMode::Base => Designs::default(),
            GcMode::PlaneBlocking => Designs {
                copyback: true,
                ..Designs::default()
            },
            GcMode::Tolerant => Designs {
                copyback: true,
                rain: true,
                parity_reads: true,
                rotating_gc: true,
                tolerant_flush: true,
                ..Designs::default()
            },
            GcMode::Preemptive => Designs {
                copyback: true,
                preemptive: true,
                ..Designs::default()
            },
            GcMode::NoGc => Designs {
                copyback: true,
                free_gc: true,
                ..Designs::default()
            },
        }
    }
}

/// An SSD's geometry and timing: from a TOML file (`SsdConfig::from_toml`; the presets are
/// files too, `crates/flash/presets/*.toml`), every field required, each checked into range.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdConfig {
    /// Name.
    pub name: String,
    /// Channels.
    pub channels: usize,
    /// Chips per channel.
    pub chips_per_channel: usize,
    /// Dies per chip.
    pub dies_per_chip: usize,
    /// Planes per die.
    pub planes_per_die: usize,
    /// Blocks per plane.
    pub blocks_per_plane: usize,
    /// Pages per block.
    pub pages_per_block: usize,
    /// Page size, bytes.
    pub page_bytes: u64,
    /// Spare capacity beyond the logical size (0.07: 7%).
    pub over_provisioning: f64,
    /// GC starts in a plane when its free blocks fall below this.
    pub gc_threshold_blocks: usize,
    /// Page read (tR).
    pub read_ns: u64,
    /// Lower-page program.
    pub program_lower_ns: u64,
    /// Upper-page program (MLC: slower; even pages are lower, odd upper).
    pub program_upper_ns: u64,
    /// Block erase.
    pub erase_ns: u64,
    /// Channel transfer rate, bytes per second.
    pub channel_bytes_per_s: u64,
    /// Controller overhead per request.
    pub controller_ns: u64,
    /// Write buffer, pages (a write is acknowledged from DRAM while there is room).
    pub buffer_pages: usize,
    /// The buffer is flushed at least this often (SSDs: every 3 ms to 1 s).
    pub flush_interval_ns: u64,
    /// Planes per RAIN parity group (one of them holds parity; `Tolerant` mode).
    pub parity_group: usize,
    /// Share of page reads that need a retry (read-retry / soft decoding as cells age):
    /// 0 (the default) to 1. NAND's own variability, which a data sheet does not show.
    #[serde(default)]
    pub read_retry_share: f64,
    /// What one retry adds to a page read, ns (default 0).
    #[serde(default)]
    pub read_retry_ns: u64,
    /// Programs take their time times a uniform factor in [1 - spread, 1 + spread]: 0 (the
    /// default) to 0.9.
    #[serde(default)]
    pub program_spread: f64,
}

/// The preset files, built in.
const PRESETS: [(&str, &str); 2] = [
    ("consumer", include_str!("../presets/consumer.toml")),
    ("enterprise", include_str!("../presets/enterprise.toml")),
];

/// The most pages a configured drive may have (the FTL keeps a few bytes per page in memory:
/// 2^28 pages is 4 TiB of 16 KiB pages and a few GiB of tables).
pub const MAX_PAGES: u64 = 1 << 28;

impl SsdConfig {
    /// The consumer preset (`presets/consumer.toml`).
    pub fn consumer() -> Self {
        Self::by_name("consumer").unwrap_or_else(|| unreachable!("a built-in preset parses (tested)"))
    }

    /// The enterprise preset (`presets/enterprise.toml`).
    pub fn enterprise() -> Self {
        Self::by_name("enterprise").unwrap_or_else(|| unreachable!("a built-in preset parses (tested)"))
    }

    /// A built-in preset by name.
    pub fn by_name(name: &str) -> Option<Self> {
        PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, text)| Self::from_toml(text).ok())
    }

    /// The built-in presets' names.
    pub fn preset_names() -> impl Iterator<Item = &'static str> {
        PRESETS.iter().map(|(n, _)| *n)
    }

    /// A configuration from TOML text: every field of [`SsdConfig`], none unknown, each in
    /// range ([`SsdConfig::check_ranges`]); the error names the field.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let cfg: SsdConfig = toml::from_str(text).map_err(|e| e.message().to_string() + &location(text, e.span()))?;
        cfg.check_ranges()?;
        Ok(cfg)
    }

    /// Every field in a range a drive can have, and a drive the FTL can hold; the error names
    /// the field.
    pub fn check_ranges(&self) -> Result<(), String> {
        let counts = [
            ("channels", self.channels, 1, 1024),
            ("chips_per_channel", self.chips_per_channel, 1, 1024),
            ("dies_per_chip", self.dies_per_chip, 1, 64),
            ("planes_per_die", self.planes_per_die, 1, 64),
            ("blocks_per_plane", self.blocks_per_plane, 8, 1 << 20),
            ("pages_per_block", self.pages_per_block, 2, 1 << 16),
            ("gc_threshold_blocks", self.gc_threshold_blocks, 1, 1 << 16),
            ("buffer_pages", self.buffer_pages, 1, 1 << 24),
            ("parity_group", self.parity_group, 2, 64),
        ];
        for (name, v, lo, hi) in counts {
            if !(lo..=hi).contains(&v) {
                return Err(format!("{name}: {v} (must be {lo} to {hi})"));
            }
        }
        let times = [
            ("read_ns", self.read_ns),
            ("program_lower_ns", self.program_lower_ns),
            ("program_upper_ns", self.program_upper_ns),
            ("erase_ns", self.erase_ns),
            ("flush_interval_ns", self.flush_interval_ns),
        ];
        for (name, v) in times {
            if !(1..=10_000_000_000).contains(&v) {
                return Err(format!("{name}: {v} ns (must be 1 ns to 10 s)"));
            }
        }
        if self.controller_ns > 10_000_000_000 {
            return Err(format!("controller_ns: {} ns (at most 10 s)", self.controller_ns));
        }
        if !(512..=(4 << 20)).contains(&self.page_bytes) || !self.page_bytes.is_multiple_of(512) {
            return Err(format!(
                "page_bytes: {} (a multiple of 512 from 512 to 4 MiB)",
                self.page_bytes
            ));
        }
        if !(1_000..=1_000_000_000_000).contains(&self.channel_bytes_per_s) {
            return Err(format!(
                "channel_bytes_per_s: {} (1 kB/s to 1 TB/s)",
                self.channel_bytes_per_s
            ));
        }
        if !(self.read_retry_share.is_finite() && (0.0..=1.0).contains(&self.read_retry_share)) {
            return Err(format!("read_retry_share: {} (0 to 1)", self.read_retry_share));
        }
        if self.read_retry_ns > 10_000_000_000 {
            return Err(format!("read_retry_ns: {} ns (at most 10 s)", self.read_retry_ns));
        }
        if !(self.program_spread.is_finite() && (0.0..=0.9).contains(&self.program_spread)) {
            return Err(format!("program_spread: {} (0 to 0.9)", self.program_spread));
        }
        if !(self.over_provisioning.is_finite() && (0.0..=4.0).contains(&self.over_provisioning)) {
            return Err(format!("over_provisioning: {} (0 to 4)", self.over_provisioning));
        }
        if self.parity_group > self.planes() || !self.planes().is_multiple_of(self.parity_group) {
            return Err(format!(
                "parity_group: {} (must divide the {} planes: a last group with fewer members would rebuild a read \
                 from nothing)",
                self.parity_group,
                self.planes()
            ));
        }
        if self.gc_threshold_blocks + 2 >= self.blocks_per_plane {
            return Err(format!(
                "gc_threshold_blocks: {} (must leave blocks to write: below blocks_per_plane - 2 = {})",
                self.gc_threshold_blocks,
                self.blocks_per_plane - 2
            ));
        }
        let pages = (self.planes() as u64).saturating_mul((self.blocks_per_plane * self.pages_per_block) as u64);
        if pages > MAX_PAGES {
            return Err(format!("the geometry: {pages} pages (at most {MAX_PAGES})"));
        }
        if self.logical_pages() == 0 {
            return Err("over_provisioning: no logical pages left".into());
        }
        Ok(())
    }

    /// Planes in the drive.
    pub fn planes(&self) -> usize {
        self.channels * self.chips_per_channel * self.dies_per_chip * self.planes_per_die
    }

    /// Physical pages.
    pub fn physical_pages(&self) -> u64 {
        (self.planes() * self.blocks_per_plane * self.pages_per_block) as u64
    }

    /// Logical pages exposed to the host: the over-provisioning, but never less spare than
    /// the GC reserve plus two blocks per plane (GC needs room to move pages into).
    pub fn logical_pages(&self) -> u64 {
        self.logical_pages_with(false)
    }

    /// Logical pages with or without RAIN: parity takes 1 of every `parity_group` pages of
    /// both the capacity and the GC reserve.
    pub fn logical_pages_with(&self, rain: bool) -> u64 {
        let by_op = (self.physical_pages() as f64 / (1.0 + self.over_provisioning)) as u64;
        let reserve = ((self.gc_threshold_blocks + 2) * self.pages_per_block * self.planes()) as u64;
        let pages = by_op.min(self.physical_pages().saturating_sub(reserve));
        if rain {
            pages / self.parity_group as u64 * (self.parity_group as u64 - 1)
        } else {
            pages
        }
    }

    fn transfer_ns(&self) -> u64 {
        self.page_bytes * 1_000_000_000 / self.channel_bytes_per_s.max(1)
    }
}

/// " (line L)" for an error at byte `span` of `text`.
fn location(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    span.map_or(String::new(), |r| {
        format!(" (line {})", text[..r.start.min(text.len())].matches('\n').count() + 1)
    })
}

const UNMAPPED: u32 = u32::MAX;

/// Where each page is before the host writes it, computed rather than stored. The page map and
/// the blocks' owners hold each entry XOR its home value here, so an entry is zero wherever a
/// page is still where it started: nowhere on a fresh drive, or, once the drive was filled in
/// order (`Ssd::precondition`'s first pass), page `lpn` on plane `lpn % planes` at that plane's
/// page `lpn / planes`. Zeroed memory costs nothing until it is written (the allocator maps
/// zero pages), so a drive is built, and filled, in time and memory that do not grow with its
/// size: a 512 GiB drive's 64 M pages took 0.7 s and 788 MB to write out before its first I/O
/// (docs/benchmarks.md), and now a trace touches only the entries it moves.
#[derive(Debug, Clone, PartialEq)]
struct Home {
    /// Filled in order (else every page starts unmapped).
    filled: bool,
    planes: u32,
    pages_per_block: u32,
    /// Logical pages.
    pages: u32,
}

impl Home {
    /// Where logical page `lpn` starts (`u64::MAX`: unmapped).
    #[inline]
    fn map(&self, lpn: u32) -> u64 {
        if !self.filled {
            return u64::MAX;
        }
        let i = lpn / self.planes;
        pack(
            (lpn % self.planes) as usize,
            i / self.pages_per_block,
            i % self.pages_per_block,
        )
    }

    /// The logical page `plane`'s physical page `i` (block-major) starts with.
    #[inline]
    fn owner(&self, plane: usize, i: usize) -> u32 {
        let lpn = i as u64 * self.planes as u64 + plane as u64;
        if self.filled && lpn < self.pages as u64 {
            lpn as u32
        } else {
            UNMAPPED
        }
    }
}

/// A channel's bookings. Transfers are short and are booked at the time their page is ready,
/// which may be far ahead (a read waiting for a plane under GC): a single "next free" time
/// would make every later transfer on the channel queue behind it. The calendar finds the
/// earliest gap instead.
#[derive(Debug, Clone, Default)]
struct Calendar {
    /// Busy intervals, sorted by start, not overlapping. A deque: most bookings land near the
    /// front (now) while GC books transfers far ahead (a B-tree measured slower).
    busy: VecDeque<(u64, u64)>,
}

impl Calendar {
    /// Book `dur` at or after `earliest`; returns the start.
    fn reserve(&mut self, earliest: u64, dur: u64) -> u64 {
        if self.last_end() <= earliest {
            // Nothing booked from `earliest` on (the usual case without GC transfers ahead).
            self.busy.push_back((earliest, earliest + dur));
            return earliest;
        }
        let at = self.probe(earliest, dur);
        // No booking overlaps [at, at + dur): those starting before `at` also end by it.
        let pos = self.busy.partition_point(|&(s, _)| s < at);
        self.busy.insert(pos, (at, at + dur));
        at
    }

    /// Where [`Calendar::reserve`] would book `dur` at `earliest`: the earliest gap that fits.
    fn probe(&self, earliest: u64, dur: u64) -> u64 {
        let mut at = earliest;
        // Bookings do not overlap, so their ends are sorted too: skip those over by `earliest`.
        let first = self.busy.partition_point(|&(_, e)| e <= at);
        for &(s, e) in self.busy.range(first..) {
            if at + dur <= s {
                break;
            }
            at = at.max(e);
        }
        at
    }

    /// Forget bookings that ended by `now`.
    fn prune(&mut self, now: u64) {
        if self.busy.front().is_none_or(|&(_, e)| e > now) {
            return; // called for every channel on every request: most have nothing to drop
        }
        let done = self.busy.partition_point(|&(_, e)| e <= now);
        if done > 0 {
            self.busy.drain(..done);
        }
    }

    /// The end of the last booking (the channel may be free before, between bookings).
    fn last_end(&self) -> u64 {
        self.busy.back().map_or(0, |b| b.1)
    }
}

/// One plane's blocks.
#[derive(Debug, Clone, PartialEq)]
struct Plane {
    /// Valid pages per block.
    valid: Vec<u32>,
    /// Next page to program per block (`pages_per_block`: full).
    written: Vec<u32>,
    /// Free (erased) blocks.
    free: Vec<u32>,
    /// The block being written.
    active: u32,
    /// Logical page stored in each physical page (`UNMAPPED` if invalid), XOR its [`Home`]
    /// value (read and written through `Ssd::owner` and `Ssd::set_owner`).
    owner: Vec<u32>,
    /// When the plane is free, and the GC it runs or has ahead.
    clock: Clock,
}

/// When a plane is free and what garbage collection it is doing or has ahead.
#[derive(Debug, Clone, Default, PartialEq)]
struct Clock {
    next_free_ns: u64,
    /// GC in progress until this time.
    gc_until_ns: u64,
    /// RAIN's superblock GC: this plane's shares of it, (not before, duration), in order.
    scheduled: VecDeque<(u64, u64)>,
    /// Preemptive GC: collections decided but not yet done in time.
    deferred: Deferred,
}

impl Clock {
    /// Schedule a GC share of `dur` not before `start_ns`, in start order (an urgent share
    /// must not wait behind one planned for later).
    fn schedule(&mut self, start_ns: u64, dur: u64) {
        let at = self.scheduled.partition_point(|&(s, _)| s <= start_ns);
        self.scheduled.insert(at, (start_ns, dur));
    }

    /// Bring the plane to `now_ns`: a scheduled GC share whose time has come starts once the
    /// plane is free; pending preemptive GC steps run in the idle time.
    fn settle(&mut self, now_ns: u64, move_ns: u64, erase_ns: u64) {
        while let Some(&(start, dur)) = self.scheduled.front() {
            if start > now_ns {
                break;
            }
            let end = start.max(self.next_free_ns) + dur;
            (self.next_free_ns, self.gc_until_ns) = (end, end);
            self.scheduled.pop_front();
        }
        if !self.deferred.moves.is_empty() {
            let t = self.deferred.run(self.next_free_ns, now_ns, move_ns, erase_ns);
            if t > self.next_free_ns {
                (self.next_free_ns, self.gc_until_ns) = (t, t);
            }
        }
    }
}

/// A plane's garbage collections waiting for idle time (`Designs::preemptive`). The FTL moves
/// the pages and frees the victim when the collection is decided; the time it takes is spent
/// later, one step (a page move, or the erase) at a time, whenever the plane has nothing else
/// to do. A step once started runs to its end.
#[derive(Debug, Clone, Default, PartialEq)]
struct Deferred {
    /// Page moves left per pending collection, oldest first (each ends with an erase).
    moves: VecDeque<u64>,
}

impl Deferred {
    /// Run pending steps in the idle time from `free_ns` (the plane's next-free time) to
    /// `now_ns`, finishing the step under way at `now_ns`. Returns when the plane is free
    /// again (`free_ns` if no step ran).
    fn run(&mut self, free_ns: u64, now_ns: u64, move_ns: u64, erase_ns: u64) -> u64 {
        let mut t = free_ns;
        while t < now_ns {
            let Some(front) = self.moves.front_mut() else { break };
            if *front > 0 {
                *front -= 1;
                t += move_ns;
            } else {
                self.moves.pop_front();
                t += erase_ns;
            }
        }
        t
    }

    /// Everything still pending, in ns.
    fn total_ns(&self, move_ns: u64, erase_ns: u64) -> u64 {
        self.moves.iter().map(|m| m * move_ns + erase_ns).sum()
    }
}

/// What the drive shows of its inside (for MittSSD-style predictors).
#[derive(Debug, Clone, PartialEq)]
pub struct WhiteBox {
    /// Per plane: when it is next free.
    pub plane_next_free_ns: Vec<u64>,
    /// Per plane: GC in progress at the query time.
    pub gc_active: Vec<bool>,
    /// Per channel: when it is next free.
    pub channel_next_free_ns: Vec<u64>,
    /// Pages in the write buffer.
    pub buffered_pages: usize,
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SsdStats {
    /// Host reads (requests).
    pub reads: u64,
    /// Host writes (requests).
    pub writes: u64,
    /// Page reads that found their plane under GC.
    pub gc_hits: u64,
    /// Of those, rebuilt from parity instead of waiting.
    pub parity_rebuilds: u64,
    /// Page reads that waited for a GC (hits not rebuilt): TinyTailFlash's "GC-blocked".
    pub gc_blocked_reads: u64,
    /// GC runs.
    pub gcs: u64,
    /// Valid pages GC moved.
    pub gc_pages_moved: u64,
    /// Pages programmed (host and GC).
    pub pages_programmed: u64,
    /// Flushed pages programmed into a plane that was collecting garbage.
    pub flush_into_gc: u64,
    /// Preemptive GC: times a plane ran short and its pending collections ran at once.
    pub gc_forced: u64,
    /// RAIN: parity pages programmed (one per stripe; included in `pages_programmed`).
    pub parity_pages: u64,
    /// RAIN: pages left unwritten when a superblock closed with planes unevenly filled.
    pub padded_pages: u64,
}

/// The drive.
#[derive(Debug, Clone)]
pub struct Ssd {
    cfg: SsdConfig,
    designs: Designs,
    planes: Vec<Plane>,
    channels: Vec<Calendar>,
    /// Logical page -> physical (plane, block, page) packed, `u64::MAX` unmapped; XOR its
    /// [`Home`] value (read and written through `Ssd::mapped` and `Ssd::set_map`).
    map: Vec<u64>,
    /// Where pages start.
    home: Home,
    /// Buffered logical pages waiting for a flush.
    buffer: Vec<u32>,
    in_buffer: Vec<bool>,
    /// When the oldest buffered page arrived.
    buffered_since_ns: u64,
    next_plane: usize,
    stats: SsdStats,
    /// RAIN's stripes and superblocks (`Designs::rain`).
    rain: Option<Box<Rain>>,
    /// The NAND commands the FTL issued, when asked to keep them ([`Ssd::record_commands`]).
    log: Option<Vec<Command>>,
    /// Draws NAND's variability (read retries, program times) when the configuration asks
    /// for it; untouched otherwise.
    rng: Rng,
}

/// A NAND command the FTL issued to a plane: what an open-channel SSD's host-side FTL issues,
/// and MittOS's MittSSD keeps its books from (when it was issued, not when it ran).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    /// When it was issued, ns.
    pub issued_ns: u64,
    /// The plane.
    pub plane: u32,
    /// What.
    pub op: Op,
}

/// A NAND operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Sense a page and send it over the channel.
    Read,
    /// Receive a page over the channel and program it (an upper page takes longer).
    Program {
        /// An upper page.
        upper: bool,
    },
    /// Collect a block: move its valid pages within the plane, then erase it.
    Collect {
        /// Pages moved.
        moves: u32,
        /// The pages cross the channel twice each (no copyback), from the collection's start.
        via_channel: bool,
    },
}

fn pack(plane: usize, block: u32, page: u32) -> u64 {
    ((plane as u64) << 40) | ((block as u64) << 20) | page as u64
}

fn unpack(p: u64) -> (usize, u32, u32) {
    ((p >> 40) as usize, ((p >> 20) & 0xfffff) as u32, (p & 0xfffff) as u32)
}

impl Ssd {
    /// An empty (fresh) drive.
    pub fn new(cfg: SsdConfig, mode: GcMode) -> Ssd {
        Self::with_designs(cfg, mode.designs())
    }

    /// An empty drive with a custom combination of designs.
    pub fn with_designs(cfg: SsdConfig, mut designs: Designs) -> Ssd {
        designs.rain |= designs.parity_reads;
        let blocks = cfg.blocks_per_plane;
        let ppb = cfg.pages_per_block;
        let planes = (0..cfg.planes())
            .map(|_| Plane {
                valid: vec![0; blocks],
                written: vec![0; blocks],
                // With RAIN blocks are allocated per superblock (`rain.rs`).
                free: if designs.rain {
                    Vec::new()
                } else {
                    (1..blocks as u32).rev().collect()
                },
                active: 0,
                // Every page at home: unmapped (zeroed, so untouched memory, see `Home`).
                owner: vec![0; blocks * ppb],
                clock: Clock::default(),
            })
            .collect();
        let logical = cfg.logical_pages_with(designs.rain) as usize;
        let rain = designs.rain.then(|| Box::new(Rain::new(&cfg)));
        Ssd {
            rain,
            log: None,
            rng: Rng::new(0x6e61_6e64),
            channels: vec![Calendar::default(); cfg.channels],
            map: vec![0; logical],
            home: Home {
                filled: false,
                planes: cfg.planes() as u32,
                pages_per_block: ppb as u32,
                pages: logical as u32,
            },
            buffer: Vec::with_capacity(cfg.buffer_pages),
            in_buffer: vec![false; logical],
            buffered_since_ns: 0,
            next_plane: 0,
            stats: SsdStats::default(),
            planes,
            designs,
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SsdConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> SsdStats {
        self.stats
    }

    /// Logical capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.logical_pages() * self.cfg.page_bytes
    }

    /// Logical pages exposed to the host (fewer with RAIN: [`SsdConfig::logical_pages_with`]).
    pub fn logical_pages(&self) -> u64 {
        self.map.len() as u64
    }

    /// Where logical page `lpn` is (`u64::MAX`: unmapped).
    #[inline]
    fn mapped(&self, lpn: u32) -> u64 {
        self.map[lpn as usize] ^ self.home.map(lpn)
    }

    #[inline]
    fn set_map(&mut self, lpn: u32, m: u64) {
        self.map[lpn as usize] = m ^ self.home.map(lpn);
    }

    /// The logical page `plane`'s physical page `i` holds (`UNMAPPED`, `PARITY`).
    #[inline]
    fn owner(&self, plane: usize, i: usize) -> u32 {
        self.planes[plane].owner[i] ^ self.home.owner(plane, i)
    }

    #[inline]
    fn set_owner(&mut self, plane: usize, i: usize, lpn: u32) {
        self.planes[plane].owner[i] = lpn ^ self.home.owner(plane, i);
    }

    fn channel_of(&self, plane: usize) -> usize {
        plane % self.cfg.channels
    }

    /// Check the FTL's bookkeeping: every mapped logical page is stored exactly where the map
    /// says, each block's valid count equals its mapped pages, no page is stored twice, free
    /// blocks are empty. Used by the conservation tests.
    pub fn check(&self) -> Result<(), String> {
        let ppb = self.cfg.pages_per_block;
        let mut seen = vec![false; self.map.len()];
        for (pi, p) in self.planes.iter().enumerate() {
            for b in 0..self.cfg.blocks_per_plane {
                let mut valid = 0;
                for pg in 0..ppb {
                    let lpn = self.owner(pi, b * ppb + pg);
                    if lpn == UNMAPPED || lpn == PARITY {
                        continue;
                    }
                    valid += 1;
                    if std::mem::replace(&mut seen[lpn as usize], true) {
                        return Err(format!("logical page {lpn} stored twice"));
                    }
                    if self.mapped(lpn) != pack(pi, b as u32, pg as u32) {
                        return Err(format!("logical page {lpn}: map and block disagree"));
                    }
                }
                if valid != p.valid[b] {
                    return Err(format!(
                        "plane {pi} block {b}: valid count {} but {valid} pages",
                        p.valid[b]
                    ));
                }
                if p.free.contains(&(b as u32)) && (p.written[b] != 0 || valid != 0) {
                    return Err(format!("plane {pi} block {b}: free but written"));
                }
            }
        }
        if self.rain.is_some() {
            self.rain_check()?;
        }
        for (lpn, seen) in seen.into_iter().enumerate() {
            let m = self.mapped(lpn as u32);
            if (m != u64::MAX) != seen {
                return Err(format!(
                    "logical page {lpn}: mapped {} but stored {}",
                    m != u64::MAX,
                    seen
                ));
            }
        }
        Ok(())
    }

    /// What a read of `len` bytes at `offset` would find at `now_ns`: the longest wait for
    /// one of its pages' planes and channels (a read is as late as its slowest page; MittSSD
    /// splits large I/Os per page), whether one of those planes collects garbage, the buffer's
    /// fill. Pages in the write buffer or never written need no flash access. Time passes to
    /// `now_ns` first (a due flush starts: the read would find it running).
    pub fn state(&mut self, now_ns: u64, offset: u64, len: u64) -> crate::storage::DeviceState {
        self.advance(now_ns);
        let ps = self.cfg.page_bytes;
        let n = self.map.len() as u64;
        let mut st = crate::storage::DeviceState {
            buffered_pages: self.buffer.len() as u32,
            ..Default::default()
        };
        for page in offset / ps..=(offset + len.max(1) - 1) / ps {
            let lpn = (page % n) as usize;
            let m = self.mapped(lpn as u32);
            if m == u64::MAX || self.in_buffer[lpn] {
                continue;
            }
            let (plane, _, _) = unpack(m);
            self.settle(plane, now_ns);
            let p = &self.planes[plane];
            let plane_wait = p.clock.next_free_ns.saturating_sub(now_ns);
            st.plane_wait_ns = st.plane_wait_ns.max(plane_wait);
            // When the page, once read, would find the channel free (GC books transfers ahead,
            // with gaps between them).
            let sensed = now_ns + plane_wait.max(self.cfg.controller_ns) + self.cfg.read_ns;
            let ch = self.channels[self.channel_of(plane)].probe(sensed, self.cfg.transfer_ns());
            st.channel_wait_ns = st.channel_wait_ns.max(ch.saturating_sub(now_ns));
            st.gc_active |= p.clock.gc_until_ns > now_ns;
        }
        st
    }

    /// The planes holding the pages of `len` bytes at `offset` that a read would take from
    /// flash (pages in the write buffer or never written need none), appended to `out`: the
    /// page map an open-channel drive shares with its host (MittSSD's books), not its timing.
    pub fn planes_of(&self, offset: u64, len: u64, out: &mut Vec<u32>) {
        let ps = self.cfg.page_bytes;
        let n = self.map.len() as u64;
        for page in offset / ps..=(offset + len.max(1) - 1) / ps {
            let lpn = (page % n) as usize;
            let m = self.mapped(lpn as u32);
            if m != u64::MAX && !self.in_buffer[lpn] {
                out.push(unpack(m).0 as u32);
            }
        }
    }

    /// Let time pass to `now_ns`: a flush that is due starts (it would start with the next
    /// request anyway). An open-channel host's FTL issues it on its own timer; its commands
    /// are then in the log before a read arriving at `now_ns` is decided.
    pub fn tick(&mut self, now_ns: u64) {
        self.advance(now_ns);
    }

    /// Keep the NAND commands the FTL issues from now on, for [`Ssd::take_commands`]. Every
    /// host read, program and greedy collection is logged; RAIN's scheduled collection shares
    /// and preemptive GC's idle-time steps are not (their timing is the drive's own).
    pub fn record_commands(&mut self) {
        self.log.get_or_insert_with(Vec::new);
    }

    /// Move the commands issued since the last call to `out`.
    pub fn take_commands(&mut self, out: &mut Vec<Command>) {
        if let Some(log) = &mut self.log {
            out.append(log);
        }
    }

    fn issued(&mut self, issued_ns: u64, plane: usize, op: Op) {
        if let Some(log) = &mut self.log {
            log.push(Command {
                issued_ns,
                plane: plane as u32,
                op,
            });
        }
    }

    /// The drive's inside at `now_ns`.
    pub fn white_box(&self, now_ns: u64) -> WhiteBox {
        let settled: Vec<(u64, u64)> = (0..self.planes.len()).map(|i| self.settled(i, now_ns)).collect();
        WhiteBox {
            plane_next_free_ns: settled.iter().map(|s| s.0).collect(),
            gc_active: settled.iter().map(|s| s.1 > now_ns).collect(),
            channel_next_free_ns: self.channels.iter().map(|c| c.probe(now_ns, 1)).collect(),
            buffered_pages: self.buffer.len(),
        }
    }

    /// Age the drive so GC is active from the start: write every logical page once in order,
    /// then `overwrite_fraction` x capacity at random pages (time does not advance).
    pub fn precondition(&mut self, overwrite_fraction: f64, seed: u64) {
        // Each drive's NAND varies on its own (replicas are preconditioned with their seeds).
        self.rng = Rng::new(seed ^ 0x6e61_6e64);
        let n = self.map.len() as u32;
        if !self.fill_in_order() {
            for lpn in 0..n {
                self.program_page(lpn, 0, false);
            }
        }
        let mut rng = Rng::new(seed);
        let extra = (n as f64 * overwrite_fraction) as u64;
        for _ in 0..extra {
            self.program_page(rng.below(n as usize) as u32, 0, false);
        }
        for p in &mut self.planes {
            p.clock = Clock::default();
        }
        self.channels.iter_mut().for_each(|c| c.busy.clear());
        self.stats = SsdStats::default();
    }

    /// Write every logical page once, in order, into a fresh drive without RAIN, straight
    /// into the state `program_page` would leave (page `lpn` to plane `lpn % planes` in turn,
    /// each plane's blocks filled from block 0 on, as the free list hands them out): the same
    /// drive for a fraction of the time (a 512 GiB drive's 31 M pages). False, doing nothing,
    /// for any other drive.
    fn fill_in_order(&mut self) -> bool {
        let fresh = self.stats == SsdStats::default()
            && self.rain.is_none()
            && self.buffer.is_empty()
            && self.next_plane == 0
            && self.planes.iter().all(|p| p.active == 0 && p.written[0] == 0);
        let n = self.map.len();
        let planes = self.planes.len();
        let ppb = self.cfg.pages_per_block;
        // Every plane keeps more than one free block (`pick_plane` never passes one over) and
        // stays clear of its GC threshold (no collection runs).
        let per_plane = n.div_ceil(planes);
        let blocks = per_plane.div_ceil(ppb);
        if !fresh || n == 0 || self.cfg.blocks_per_plane < blocks + self.cfg.gc_threshold_blocks + 2 {
            return false;
        }
        // Every entry is zero (nothing was written), so every page is at home: filled in order
        // once home is the in-order place.
        debug_assert!(self.map.iter().all(|&m| m == 0));
        self.home.filled = true;
        for (p, plane) in self.planes.iter_mut().enumerate() {
            let k = if p < n % planes || n.is_multiple_of(planes) {
                per_plane
            } else {
                per_plane - 1
            };
            let used = k.div_ceil(ppb);
            for b in 0..used {
                let w = (k - b * ppb).min(ppb) as u32;
                plane.written[b] = w;
                plane.valid[b] = w;
            }
            // Block 0 is active from the start; the rest were popped from the free list.
            let active = used.max(1) - 1;
            plane.active = active as u32;
            plane.free = ((active + 1) as u32..self.cfg.blocks_per_plane as u32).rev().collect();
        }
        self.next_plane = (n - 1) % planes + 1;
        self.stats.pages_programmed += n as u64;
        true
    }

    /// Let time pass to `now_ns`: forget finished channel bookings and start a flush that
    /// is due (it would start with the next request anyway).
    fn advance(&mut self, now_ns: u64) {
        for c in &mut self.channels {
            c.prune(now_ns);
        }
        if self.rain.is_some() {
            self.rain_advance(now_ns);
        }
        if !self.buffer.is_empty() && now_ns.saturating_sub(self.buffered_since_ns) >= self.cfg.flush_interval_ns {
            self.flush(now_ns);
        }
    }

    /// When a read submitted at `now_ns` would complete, without serving it (the perfect
    /// predictor's view, and the counterfactual behind false submit/revoke rates): the read is
    /// booked, timed and then undone. Time still passes to `now_ns` (a due flush starts).
    pub fn peek_read(&mut self, now_ns: u64, offset: u64, len: u64) -> u64 {
        self.advance(now_ns);
        let clocks: Vec<Clock> = self.planes.iter().map(|p| p.clock.clone()).collect();
        let channels = self.channels.clone();
        let stats = self.stats;
        let logged = self.log.as_ref().map(Vec::len);
        let rng = self.rng.clone();
        let done = self.submit(now_ns, offset, len, false);
        // The same draws for the read when it is served: the peek is exact with variability.
        self.rng = rng;
        for (p, clock) in self.planes.iter_mut().zip(clocks) {
            p.clock = clock;
        }
        self.channels = channels;
        self.stats = stats;
        if let (Some(log), Some(n)) = (&mut self.log, logged) {
            log.truncate(n); // a read that was not issued
        }
        done
    }

    /// Submit a host request at `now_ns` (non-decreasing across calls); returns its completion.
    pub fn submit(&mut self, now_ns: u64, offset: u64, len: u64, write: bool) -> u64 {
        let ps = self.cfg.page_bytes;
        let first = offset / ps;
        let last = (offset + len.max(1) - 1) / ps;
        let n = self.map.len() as u64;
        let start = now_ns + self.cfg.controller_ns;
        let mut done = start;
        self.advance(now_ns);
        if write {
            self.stats.writes += 1;
            for lpn in first..=last {
                let lpn = (lpn % n) as u32;
                if self.buffer.len() >= self.cfg.buffer_pages {
                    // Full: this write waits for a flush of the whole buffer.
                    let t = self.flush(done);
                    done = done.max(t);
                }
                if !self.in_buffer[lpn as usize] {
                    if self.buffer.is_empty() {
                        self.buffered_since_ns = now_ns;
                    }
                    self.in_buffer[lpn as usize] = true;
                    self.buffer.push(lpn);
                }
            }
            // Acknowledged from DRAM once buffered (a DRAM copy per page).
            done += (last - first + 1) * 2_000;
        } else {
            self.stats.reads += 1;
            for lpn in first..=last {
                let t = self.read_page((lpn % n) as u32, start);
                done = done.max(t);
            }
        }
        done
    }

    /// Program everything buffered, starting at `now_ns`; returns when the last program ends.
    pub fn flush(&mut self, now_ns: u64) -> u64 {
        let pages = std::mem::take(&mut self.buffer);
        let mut end = now_ns;
        for lpn in pages {
            self.in_buffer[lpn as usize] = false;
            end = end.max(self.program_page(lpn, now_ns, true));
        }
        end
    }

    fn read_page(&mut self, lpn: u32, now_ns: u64) -> u64 {
        if self.in_buffer[lpn as usize] {
            return now_ns + 2_000; // served from the write buffer
        }
        let Some((plane, block, page)) = Some(self.mapped(lpn)).filter(|&p| p != u64::MAX).map(unpack) else {
            return now_ns + 2_000; // never written: zeros, no flash access
        };
        self.settle(plane, now_ns);
        let under_gc = self.planes[plane].clock.gc_until_ns > now_ns;
        if under_gc {
            self.stats.gc_hits += 1;
            if self.designs.parity_reads {
                if let Some(t) = self.rain_rebuild(plane, block, page, now_ns) {
                    self.stats.parity_rebuilds += 1;
                    return t;
                }
            }
            self.stats.gc_blocked_reads += 1;
        }
        self.nand_read(plane, now_ns)
    }

    fn nand_read(&mut self, plane: usize, now_ns: u64) -> u64 {
        self.issued(now_ns, plane, Op::Read);
        self.settle(plane, now_ns);
        let ch = self.channel_of(plane);
        let p = &mut self.planes[plane];
        let start = p.clock.next_free_ns.max(now_ns);
        let retry = self.cfg.read_retry_share > 0.0 && self.rng.next_f64() < self.cfg.read_retry_share;
        let sensed = start + self.cfg.read_ns + if retry { self.cfg.read_retry_ns } else { 0 };
        p.clock.next_free_ns = sensed;
        let xfer = self.cfg.transfer_ns();
        self.channels[ch].reserve(sensed, xfer) + xfer
    }

    /// The plane the next page goes to: round robin; a tolerant flush skips planes under GC
    /// while another is free.
    fn pick_plane(&mut self, now_ns: u64, flushing: bool) -> usize {
        let n = self.planes.len();
        // Round robin, passing over planes down to their last free block (random overwrites
        // can pile valid pages into one plane; writing elsewhere lets its GC catch up).
        let roomy = |p: &Plane| p.free.len() > 1;
        let mut plane = (0..n)
            .map(|k| (self.next_plane + k) % n)
            .find(|&c| roomy(&self.planes[c]))
            .unwrap_or(self.next_plane % n);
        if flushing && self.designs.tolerant_flush {
            if let Some(c) = (0..n)
                .map(|k| (plane + k) % n)
                .find(|&c| self.planes[c].clock.gc_until_ns <= now_ns && roomy(&self.planes[c]))
            {
                plane = c;
            }
        }
        self.next_plane = plane + 1;
        plane
    }

    /// Write logical page `lpn`; returns when its program ends.
    fn program_page(&mut self, lpn: u32, now_ns: u64, timed: bool) -> u64 {
        if self.rain.is_some() {
            return self.rain_program_page(lpn, now_ns, timed);
        }
        let plane = self.pick_plane(now_ns, timed);
        if timed && self.planes[plane].clock.gc_until_ns > now_ns {
            self.stats.flush_into_gc += 1;
        }
        let end = self.program_into(plane, lpn, now_ns, timed);
        if self.planes[plane].free.len() < self.cfg.gc_threshold_blocks {
            self.collect(plane, end, timed);
        }
        end
    }

    /// Forget `lpn`'s old copy (its page stays written until its block is erased); the
    /// caller maps `lpn` to its new copy.
    #[inline]
    fn invalidate(&mut self, lpn: u32) {
        let old = self.mapped(lpn);
        if old != u64::MAX {
            let (op, ob, opg) = unpack(old);
            let ppb = self.cfg.pages_per_block;
            self.planes[op].valid[ob as usize] -= 1;
            self.set_owner(op, ob as usize * ppb + opg as usize, UNMAPPED);
        }
    }

    fn program_into(&mut self, plane: usize, lpn: u32, now_ns: u64, timed: bool) -> u64 {
        self.invalidate(lpn);
        let ppb = self.cfg.pages_per_block as u32;
        if self.planes[plane].written[self.planes[plane].active as usize] >= ppb {
            self.force_if_short(plane, now_ns, timed);
            let p = &mut self.planes[plane];
            p.active = p.free.pop().expect("a free block (GC keeps a reserve)");
        }
        let p = &mut self.planes[plane];
        let b = p.active;
        let pg = p.written[b as usize];
        p.written[b as usize] += 1;
        p.valid[b as usize] += 1;
        self.set_owner(plane, b as usize * ppb as usize + pg as usize, lpn);
        self.set_map(lpn, pack(plane, b, pg));
        self.stats.pages_programmed += 1;
        if !timed {
            return now_ns;
        }
        self.program_time(plane, pg, now_ns)
    }

    /// Time a program of page `pg` (of its block) into `plane` from `now_ns`: the page crosses
    /// the channel, then the plane programs it (lower and upper pages alternate); returns its end.
    fn program_time(&mut self, plane: usize, pg: u32, now_ns: u64) -> u64 {
        let mut prog = if pg.is_multiple_of(2) {
            self.cfg.program_lower_ns
        } else {
            self.cfg.program_upper_ns
        };
        if self.cfg.program_spread > 0.0 {
            let s = self.cfg.program_spread;
            prog = (prog as f64 * (1.0 - s + 2.0 * s * self.rng.next_f64())).round() as u64;
        }
        self.issued(
            now_ns,
            plane,
            Op::Program {
                upper: !pg.is_multiple_of(2),
            },
        );
        let ch = self.channel_of(plane);
        let xfer = self.cfg.transfer_ns();
        // Settled at `now_ns`, not at `xfer_end`: requests still to come may arrive before it.
        self.settle(plane, now_ns);
        let xfer_end = self.channels[ch].reserve(now_ns, xfer) + xfer;
        let p = &mut self.planes[plane];
        let start = xfer_end.max(p.clock.next_free_ns);
        p.clock.next_free_ns = start + prog;
        p.clock.next_free_ns
    }

    /// Preemptive GC: when the blocks still to erase leave `plane` no free block, run its
    /// pending collections now, unpreempted.
    fn force_if_short(&mut self, plane: usize, now_ns: u64, timed: bool) {
        let (move_ns, erase_ns) = (self.move_ns(), self.cfg.erase_ns);
        let p = &mut self.planes[plane];
        if !timed || p.clock.deferred.moves.is_empty() || p.clock.deferred.moves.len() < p.free.len() {
            return;
        }
        let end = now_ns.max(p.clock.next_free_ns) + p.clock.deferred.total_ns(move_ns, erase_ns);
        p.clock.deferred.moves.clear();
        (p.clock.next_free_ns, p.clock.gc_until_ns) = (end, end);
        self.stats.gc_forced += 1;
    }

    /// One GC page move: read, then a program (lower and upper pages alternate).
    fn move_ns(&self) -> u64 {
        self.cfg.read_ns + (self.cfg.program_lower_ns + self.cfg.program_upper_ns) / 2
    }

    /// Bring `plane` to `now_ns` (its GC shares and idle-time steps, [`Clock::settle`]).
    fn settle(&mut self, plane: usize, now_ns: u64) {
        let c = &self.planes[plane].clock;
        if c.scheduled.is_empty() && c.deferred.moves.is_empty() {
            return; // nothing pending (every design but RAIN's and preemptive GC)
        }
        let (move_ns, erase_ns) = (self.move_ns(), self.cfg.erase_ns);
        self.planes[plane].clock.settle(now_ns, move_ns, erase_ns);
    }

    /// `plane`'s next-free and GC-until times as [`Ssd::settle`] would leave them at `now_ns`.
    fn settled(&self, plane: usize, now_ns: u64) -> (u64, u64) {
        let mut c = self.planes[plane].clock.clone();
        c.settle(now_ns, self.move_ns(), self.cfg.erase_ns);
        (c.next_free_ns, c.gc_until_ns)
    }

    /// Greedy GC in `plane` from `now_ns`: move the valid pages of the block with the fewest,
    /// erase it. Rotating GC (tolerant mode) defers while another plane of the group collects,
    /// unless the plane is down to its last free block.
    fn collect(&mut self, plane: usize, now_ns: u64, timed: bool) {
        if timed && self.designs.rotating_gc && self.planes[plane].free.len() > 1 {
            let g = self.cfg.parity_group.max(2);
            let base = plane / g * g;
            let busy = (base..(base + g).min(self.planes.len()))
                .any(|m| m != plane && self.planes[m].clock.gc_until_ns > now_ns);
            if busy {
                return;
            }
        }
        let ppb = self.cfg.pages_per_block;
        let active = self.planes[plane].active;
        let victim = {
            let p = &self.planes[plane];
            (0..self.cfg.blocks_per_plane as u32)
                .filter(|&b| b != active && p.written[b as usize] as usize == ppb)
                .min_by_key(|&b| p.valid[b as usize])
        };
        let Some(victim) = victim else { return };
        self.stats.gcs += 1;
        let lpns: Vec<u32> = (0..ppb)
            .map(|pg| self.owner(plane, victim as usize * ppb + pg))
            .filter(|&l| l != UNMAPPED)
            .collect();
        let moved = lpns.len() as u64;
        self.stats.gc_pages_moved += moved;
        // Move the valid pages within the plane (time is accounted below, as one GC).
        for lpn in lpns {
            self.program_into(plane, lpn, now_ns, false);
        }
        let p = &mut self.planes[plane];
        p.valid[victim as usize] = 0;
        p.written[victim as usize] = 0;
        p.free.insert(0, victim);
        if !timed || self.designs.free_gc {
            return;
        }
        let (move_ns, erase_ns) = (self.move_ns(), self.cfg.erase_ns);
        if self.designs.preemptive {
            // Done later in idle time, unless the blocks still to erase leave the plane no
            // free block: then everything pending runs now, unpreempted.
            self.planes[plane].clock.deferred.moves.push_back(moved);
            self.force_if_short(plane, now_ns, timed);
            return;
        }
        let via_channel = !self.designs.copyback;
        self.issued(
            now_ns,
            plane,
            Op::Collect {
                moves: moved as u32,
                via_channel,
            },
        );
        let c = &self.cfg;
        let dur = moved * move_ns + erase_ns;
        let start = now_ns.max(self.planes[plane].clock.next_free_ns);
        let end = start + dur;
        self.planes[plane].clock.next_free_ns = end;
        self.planes[plane].clock.gc_until_ns = end;
        if !self.designs.copyback {
            // Pages cross the channel twice: the channel is taken for the moves.
            let ch = self.channel_of(plane);
            let busy = moved * 2 * c.transfer_ns();
            self.channels[ch].reserve(start, busy);
        }
    }
}

#[cfg(test)]
mod fill_tests {
    use super::*;

    /// Every logical page's place and every physical page's owner.
    fn pages(d: &Ssd) -> (Vec<u64>, Vec<Vec<u32>>) {
        let map = (0..d.map.len() as u32).map(|l| d.mapped(l)).collect();
        let owners = (0..d.planes.len())
            .map(|p| (0..d.planes[p].owner.len()).map(|i| d.owner(p, i)).collect())
            .collect();
        (map, owners)
    }

    /// The straight fill leaves the drive exactly as writing every page in turn does.
    #[test]
    fn filling_in_order_is_writing_every_page() {
        let mut ragged = false;
        for (name, tweak, op) in [
            ("consumer", 0usize, 0.07),
            ("enterprise", 0, 0.25),
            ("consumer", 3, 0.13),
            ("enterprise", 5, 0.31),
            ("consumer", 1, 0.0917),
        ] {
            let mut cfg = SsdConfig::by_name(name).unwrap();
            cfg.blocks_per_plane = 32 + tweak;
            cfg.pages_per_block = 64 + tweak;
            cfg.over_provisioning = op;
            let mut slow = Ssd::new(cfg.clone(), GcMode::Base);
            for lpn in 0..slow.map.len() as u32 {
                slow.program_page(lpn, 0, false);
            }
            let mut fast = Ssd::new(cfg.clone(), GcMode::Base);
            assert!(fast.fill_in_order(), "{name}");
            ragged |= !fast.map.len().is_multiple_of(fast.planes.len());
            // The same pages where they are (their stored forms differ: the fast fill wrote
            // none), and the same blocks.
            assert_eq!(pages(&fast), pages(&slow), "{name}");
            assert!(fast.map.iter().all(|&m| m == 0), "{name}: the fill wrote a map entry");
            let blocks = |d: &Ssd| {
                let mut planes = d.planes.clone();
                planes.iter_mut().for_each(|p| p.owner.clear());
                planes
            };
            assert_eq!(blocks(&fast), blocks(&slow), "{name}");
            assert_eq!((fast.next_plane, fast.stats), (slow.next_plane, slow.stats), "{name}");
            fast.check().unwrap();
            // Not a fresh drive, or one with RAIN: the fill declines.
            assert!(!fast.fill_in_order());
            assert!(!Ssd::new(cfg, GcMode::Tolerant).fill_in_order());
        }
        assert!(ragged, "one drive's pages do not fill the planes' last round");
    }
}
