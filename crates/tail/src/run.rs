//! The replay itself: a small discrete-event loop over arrivals, failovers, hedges and
//! timeouts, in time order (each drive is always driven forward in time).

use crate::spec::{Client, DeviceTiming, HedgeDelay};
use crate::Request;
use iolearn_flash::replicas::Storage;
use iolearn_flash::replicas::{Noise, Replica};
use iolearn_flash::ssd::Op;
use iolearn_flash::ssd::{GcMode, Ssd, SsdConfig};
use iolearn_ml::Rng;
use iolearn_policy::admission::{Admission, DeviceQueue, FeatureSet, IoView, Started, WhiteBox};
use iolearn_policy::latency::LatencyHistory;
use iolearn_policy::mittsched::{probe_seek_profile, SeekProfile};
use iolearn_policy::ssdbooks::{MittSsdBooks, NandCommand, NandOp, SsdProfile};
use iolearn_sim::device::{Device, DevicePreset};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::time::Instant;

/// The kind of drive behind every replica.
#[derive(Debug, Clone, PartialEq)]
pub enum DriveConfig {
    /// A flash SSD (FTL, GC, write buffer; `mode` is its GC design).
    Ssd(SsdConfig),
    /// A device of the page-cache simulator, e.g. a disk behind a FIFO queue (MittNOOP's world).
    Disk(DevicePreset),
}

impl DriveConfig {
    /// By name: `consumer` and `enterprise` SSDs, `hdd`.
    pub fn by_name(name: &str) -> Option<DriveConfig> {
        match name {
            "hdd" | "disk" => Some(DriveConfig::Disk(DevicePreset::hdd())),
            other => SsdConfig::by_name(other).map(DriveConfig::Ssd),
        }
    }
}

/// The simulated replicas.
#[derive(Debug, Clone)]
pub struct WorldConfig {
    /// The drive of every replica.
    pub drive: DriveConfig,
    /// Its GC design (SSDs).
    pub mode: GcMode,
    /// Replicas (2 or 3 in the papers).
    pub replicas: usize,
    /// Cost of one failover (EBUSY back to the client and the read sent elsewhere), ns.
    pub failover_ns: u64,
    /// Noise per replica (missing: quiet).
    pub noise: Vec<Noise>,
    /// Random overwrites before the replay, share of capacity (1.0: GC busy from the start).
    pub precondition: f64,
    /// Seed of everything random.
    pub seed: u64,
    /// Each replica's page cache, 4 KiB pages (0: none). A read whose pages are all cached is
    /// served from memory in [`CACHE_HIT_NS`] without touching the drive (MittCache's world).
    pub cache_pages: usize,
}

/// A page-cache hit, ns.
pub const CACHE_HIT_NS: u64 = 2_000;

/// A replica's page cache: least recently used 4 KiB pages.
struct PageCache {
    cap: usize,
    last_use: HashMap<u64, u64>,
    by_use: BTreeMap<u64, u64>,
    tick: u64,
}

impl PageCache {
    fn new(cap: usize) -> Self {
        PageCache {
            cap,
            last_use: HashMap::new(),
            by_use: BTreeMap::new(),
            tick: 0,
        }
    }

    fn pages(offset: u64, size: u32) -> std::ops::RangeInclusive<u64> {
        offset / 4096..=(offset + size.max(1) as u64 - 1) / 4096
    }

    /// Every page of the range is resident.
    fn holds(&self, offset: u64, size: u32) -> bool {
        self.cap > 0 && Self::pages(offset, size).all(|p| self.last_use.contains_key(&p))
    }

    /// The range was read or written: its pages become the most recently used.
    fn touch(&mut self, offset: u64, size: u32) {
        if self.cap == 0 {
            return;
        }
        for p in Self::pages(offset, size) {
            self.tick += 1;
            if let Some(old) = self.last_use.insert(p, self.tick) {
                self.by_use.remove(&old);
            }
            self.by_use.insert(self.tick, p);
            if self.last_use.len() > self.cap {
                if let Some((_, victim)) = self.by_use.pop_first() {
                    self.last_use.remove(&victim);
                }
            }
        }
    }
}

/// Replicas ready to replay: the drives are aged once and copied for every run, so runs with
/// different policies start from the same state.
pub struct World {
    cfg: WorldConfig,
    drives: Vec<Drive>,
    /// A disk's seek profile, probed once (MittNOOP's).
    profile: Option<SeekProfile>,
}

/// One replica's drive, aged.
#[derive(Clone)]
enum Drive {
    Ssd(Box<Ssd>),
    Disk(Device),
}

impl Drive {
    fn boxed(&self) -> Box<dyn Storage> {
        match self {
            Drive::Ssd(s) => Box::new((**s).clone()),
            Drive::Disk(d) => Box::new(d.clone()),
        }
    }
}

/// One read's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadResult {
    /// Arrival, ns.
    pub arrival_ns: u64,
    /// Its replica.
    pub primary: u32,
    /// The replica whose answer the client took.
    pub served_by: u32,
    /// Latency seen by the client (failovers included), ns.
    pub latency_ns: u64,
    /// EBUSY answers before it was served.
    pub revoked: u32,
    /// Extra copies sent (hedges, clones, timeout retries).
    pub duplicates: u32,
}

/// One admission decision, with what the read took (admitted) or would have taken (refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Arrival of the read at the deciding replica, ns.
    pub at_ns: u64,
    /// The replica.
    pub replica: u32,
    /// Served (else EBUSY).
    pub admitted: bool,
    /// The read's latency at this replica, actual or counterfactual, ns.
    pub latency_ns: u64,
    /// Time the policy took, ns (wall clock).
    pub infer_ns: u32,
}

/// What a block layer knew when a read arrived at its first replica, and what it then took:
/// one training row for the learned policies.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Arrival, ns.
    pub arrival_ns: u64,
    /// The replica.
    pub replica: u32,
    /// Size, bytes.
    pub size: u32,
    /// Offset, bytes.
    pub offset: u64,
    /// I/Os in flight.
    pub pending: u32,
    /// Pages in flight, this read's included.
    pub pending_pages: u32,
    /// Age of the oldest I/O in flight, ns.
    pub oldest_inflight_ns: u64,
    /// Since the last completion, ns.
    pub since_completion_ns: u64,
    /// Recent completions.
    pub history: LatencyHistory,
    /// The read's latency as MittSSD's books predicted it (SSDs), ns.
    pub books_ns: Option<u64>,
    /// The white-box state.
    pub white_box: WhiteBox,
    /// Latency at this replica, ns.
    pub latency_ns: u64,
}

impl Sample {
    /// The view a policy had.
    pub fn view(&self) -> IoView<'_> {
        IoView {
            now_ns: self.arrival_ns,
            size: self.size,
            offset: self.offset,
            pending: self.pending,
            pending_pages: self.pending_pages,
            history: &self.history,
            oldest_inflight_ns: self.oldest_inflight_ns,
            since_completion_ns: self.since_completion_ns,
            white_box: Some(self.white_box),
            true_latency_ns: Some(self.latency_ns),
            cached: false,
            replica: self.replica,
            planes: None,
            books_ns: self.books_ns,
            deadline_ns: None,
        }
    }

    /// Its inputs in feature set `set`.
    pub fn features(&self, set: FeatureSet) -> Vec<f32> {
        let mut x = vec![0f32; set.dim()];
        set.extract(&self.view(), &mut x);
        x
    }
}

/// Everything a run produced.
#[derive(Debug, Clone, Default)]
pub struct RunResult {
    /// Every read, in arrival order.
    pub reads: Vec<ReadResult>,
    /// Every admission decision, in time order.
    pub decisions: Vec<Decision>,
    /// Training rows (when asked for).
    pub samples: Vec<Sample>,
}

/// A pending event: (time, sequence, kind, request, argument).
type Event = (u64, u64, u8, u32, u8);

/// A replica's block layer: the policies' view, and the completion times the simulator
/// already knows (the queue learns of a completion only once time reaches it).
struct Queue {
    view: DeviceQueue,
    /// (completion, id).
    done: BinaryHeap<Reverse<(u64, u64)>>,
    /// MittSSD's books of this drive, kept while training rows are recorded (their prediction
    /// is one of `iolearn-tail-books-v1`'s inputs).
    books: Option<MittSsdBooks>,
    /// Books are kept of this drive (by the policy, `Needs::layout`, or for training rows): its
    /// page map and NAND commands are followed. Decided once per run.
    layout: bool,
}

impl Queue {
    /// Retire what completed by `now`, in completion order, telling the policy.
    fn retire(&mut self, now: u64, replica: usize, policy: &mut dyn Admission) {
        while let Some(&Reverse((done, id))) = self.done.peek() {
            if done > now {
                break;
            }
            self.done.pop();
            self.view.finish(id, done);
            policy.finished(replica, id, done);
            if let Some(b) = &mut self.books {
                b.finished(replica, id, done);
            }
        }
    }

    fn push(&mut self, id: u64, arrival: u64, done: u64, size: u32) {
        self.view.start(id, arrival, size);
        self.done.push(Reverse((done, id)));
    }
}

/// Per-request state.
#[derive(Clone, Copy)]
struct State {
    order: [u8; 8],
    done: u64,
    served_by: u32,
    revoked: u32,
    duplicates: u32,
    /// The attempt that was served.
    served_attempt: u8,
}

/// The planes of a read's pages on flash, when books are kept from the drive's page map (by
/// the policy or for training rows); empty otherwise, or when the drive does not share it.
fn planes_of(replica: &Replica, queue: &Queue, offset: u64, len: u64) -> Vec<u32> {
    let mut planes = Vec::new();
    if queue.layout {
        replica.storage.planes_of(offset, len, &mut planes);
    }
    planes
}

/// Give the policy, and the books kept for training rows, the NAND commands replica `r`'s drive
/// issued up to `now` (only recorded when either keeps books; work due by `now`, such as a
/// flush on the drive's timer, is issued first).
fn deliver(replica: &mut Replica, queue: &mut Queue, admission: &mut dyn Admission, r: usize, now: u64) {
    if !queue.layout {
        return;
    }
    replica.storage.tick(now);
    let mut log = Vec::new();
    replica.storage.take_commands(&mut log);
    if log.is_empty() {
        return;
    }
    let commands: Vec<NandCommand> = log
        .iter()
        .map(|c| NandCommand {
            issued_ns: c.issued_ns,
            plane: c.plane,
            op: match c.op {
                Op::Read => NandOp::Read,
                Op::Program { upper } => NandOp::Program { upper },
                Op::Collect { moves, via_channel } => NandOp::Collect { moves, via_channel },
            },
        })
        .collect();
    admission.issued(r, &commands);
    if let Some(b) = &mut queue.books {
        b.book(r, &commands);
    }
}

/// An I/O entered replica `r`'s device queue at `t` and completes at `done`: the block layer's
/// view and the policy hear of it (after the commands its drive issued for it and before).
fn enter(
    (replica, queue): (&mut Replica, &mut Queue),
    admission: &mut dyn Admission,
    (r, id, t): (usize, u64, u64),
    (offset, len, write): (u64, u64, bool),
    done: u64,
) {
    let planes = if write {
        Vec::new()
    } else {
        planes_of(replica, queue, offset, len)
    };
    deliver(replica, queue, admission, r, t);
    queue.push(id, t, done, len as u32);
    let io = Started {
        replica: r,
        id,
        now_ns: t,
        offset,
        len,
        write,
        planes: &planes,
    };
    admission.started(&io);
    if let Some(b) = &mut queue.books {
        b.started(&io);
    }
}

/// The policy's slowness score for a read of `size` at replica `r` at `now` (what it would see
/// arriving there).
fn slowness(
    admission: &mut dyn Admission,
    queues: &mut [Queue],
    replicas: &mut [Replica],
    r: usize,
    now: u64,
    q: &Request,
) -> f32 {
    queues[r].retire(now, r, admission);
    deliver(&mut replicas[r], &mut queues[r], admission, r, now);
    let planes = planes_of(&replicas[r], &queues[r], q.offset, q.size as u64);
    let view = IoView {
        planes: queues[r].layout.then_some(&planes[..]),
        ..queues[r].view.view(r as u32, now, q.offset, q.size)
    };
    admission.slowness(&view)
}

/// Serve a read at replica `r` at `t`: from its page cache when every page is there, else from
/// its drive (the I/O joins the replica's queue and the policy hears of it). Returns the
/// completion time.
fn serve_read(
    (replica, queue, cache): (&mut Replica, &mut Queue, &mut PageCache),
    admission: &mut dyn Admission,
    r: usize,
    id: u64,
    t: u64,
    q: &Request,
) -> u64 {
    let done = if cache.holds(q.offset, q.size) {
        t + CACHE_HIT_NS
    } else {
        let done = replica.serve(t, q.offset, q.size as u64, false);
        enter(
            (replica, queue),
            admission,
            (r, id, t),
            (q.offset, q.size as u64, false),
            done,
        );
        done
    };
    cache.touch(q.offset, q.size);
    done
}

/// Serve the next I/O of replica `r`'s other tenant: it occupies the drive and joins the
/// replica's queue (the policy hears of it as of any I/O).
fn serve_tenant_io((replica, queue): (&mut Replica, &mut Queue), admission: &mut dyn Admission, r: usize, id: u64) {
    let Some((at, offset, len, write)) = replica.next_tenant_io() else {
        return;
    };
    queue.retire(at, r, admission);
    if let Some((_, done)) = replica.serve_tenant_io() {
        enter((replica, queue), admission, (r, id, at), (offset, len, write), done);
    }
}

/// Hedges a budget allows before any read has earned one.
const HEDGE_BURST: f64 = 10.0;

// Event kinds.
const ARRIVE: u8 = 0; // arg = attempt
const HEDGE: u8 = 1;
const TIMEOUT: u8 = 2;
const COPY: u8 = 3; // arg = replica; unasked submit, first answer wins
const RETRY: u8 = 4; // arg = replica; unasked submit that replaces the answer

impl World {
    /// Age the drives.
    pub fn new(cfg: WorldConfig) -> World {
        let n = cfg.replicas.clamp(1, 8);
        let drives = (0..n)
            .map(|r| match &cfg.drive {
                DriveConfig::Ssd(c) => {
                    let mut ssd = Ssd::new(c.clone(), cfg.mode);
                    ssd.precondition(cfg.precondition, cfg.seed ^ (r as u64 + 1));
                    Drive::Ssd(Box::new(ssd))
                }
                DriveConfig::Disk(p) => Drive::Disk(Device::new(p.clone())),
            })
            .collect();
        let profile = match &cfg.drive {
            DriveConfig::Disk(p) => {
                // Each probe on an idle disk: its latency is its service time.
                let mut disk = Device::new(p.clone());
                let mut now = 0u64;
                Some(probe_seek_profile(p.capacity_bytes, 4, 10, cfg.seed, |offset, len| {
                    let done = disk.submit(now, offset, len, false);
                    let took = done - now;
                    now = done;
                    took
                }))
            }
            DriveConfig::Ssd(_) => None,
        };
        World { cfg, drives, profile }
    }

    /// The configuration.
    pub fn config(&self) -> &WorldConfig {
        &self.cfg
    }

    /// What the white-box predictors know of the drive: MittSSD's timing of an SSD (zeros for
    /// a disk), MittNOOP's seek profile of a disk, measured by timing reads on a fresh disk of
    /// the same model (as MittNOOP's profiler did on the real one).
    pub fn timing(&self) -> DeviceTiming {
        match &self.cfg.drive {
            DriveConfig::Ssd(c) => {
                let transfer_ns = c.page_bytes * 1_000_000_000 / c.channel_bytes_per_s.max(1);
                DeviceTiming {
                    read_ns: c.read_ns,
                    transfer_ns,
                    controller_ns: c.controller_ns,
                    profile: None,
                    ssd: Some(SsdProfile {
                        planes: (c.channels * c.chips_per_channel * c.dies_per_chip * c.planes_per_die) as u32,
                        channels: c.channels as u32,
                        read_ns: c.read_ns,
                        program_lower_ns: c.program_lower_ns,
                        program_upper_ns: c.program_upper_ns,
                        erase_ns: c.erase_ns,
                        transfer_ns,
                        controller_ns: c.controller_ns,
                    }),
                }
            }
            DriveConfig::Disk(_) => DeviceTiming {
                profile: self.profile.clone(),
                ..DeviceTiming::default()
            },
        }
    }

    /// Replay `requests` (arrival order) with `admission` at the replicas and `client` at the
    /// client; `samples`: also record a training row for each read's first replica.
    pub fn run(&self, requests: &[Request], admission: &mut dyn Admission, client: Client, samples: bool) -> RunResult {
        self.run_ranked(requests, admission, client, false, samples)
    }

    /// [`World::run`], and with `rank` failovers and hedges go to the replica the policy
    /// scores least slow ([`Admission::slowness`]) instead of a random one.
    pub fn run_ranked(
        &self,
        requests: &[Request],
        admission: &mut dyn Admission,
        client: Client,
        rank: bool,
        samples: bool,
    ) -> RunResult {
        let n = self.drives.len();
        let cfg = &self.cfg;
        let mut replicas: Vec<Replica> = self
            .drives
            .iter()
            .enumerate()
            .map(|(r, d)| {
                let noise = cfg.noise.get(r).cloned().unwrap_or(Noise::Quiet);
                Replica::new(d.boxed(), noise, cfg.seed.wrapping_add(101 * r as u64 + 7))
            })
            .collect();
        let profile = samples.then(|| self.timing().ssd).flatten();
        let needs = admission.needs();
        let mut queues: Vec<Queue> = (0..n)
            .map(|_| Queue {
                view: DeviceQueue::default(),
                done: BinaryHeap::new(),
                books: profile.map(|p| MittSsdBooks::new(0, p)),
                layout: needs.layout || profile.is_some(),
            })
            .collect();
        let mut caches: Vec<PageCache> = (0..n).map(|_| PageCache::new(cfg.cache_pages)).collect();
        let mut rng = Rng::new(cfg.seed ^ 0x7a11);
        if needs.layout || profile.is_some() {
            for r in &mut replicas {
                r.storage.record_commands();
            }
        }
        let mut states: Vec<State> = requests
            .iter()
            .map(|q| {
                let first = q.primary as usize % n;
                let mut rest: Vec<usize> = (0..n).filter(|&r| r != first).collect();
                rng.shuffle(&mut rest);
                let mut order = [0u8; 8];
                order[0] = first as u8;
                for (i, r) in rest.into_iter().enumerate() {
                    order[i + 1] = r as u8;
                }
                State {
                    order,
                    done: u64::MAX,
                    served_by: first as u32,
                    revoked: 0,
                    duplicates: 0,
                    served_attempt: 0,
                }
            })
            .collect();
        let mut next_id = 0u64;
        let (mut reads_seen, mut hedges_sent) = (0u64, 0u64);
        // The hedge's delay, and the reads served but not yet complete: the client learns a
        // latency only when time reaches its completion.
        let mut hedge_delay = HedgeDelay::new(client);
        let mut completing: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
        let mut out = RunResult::default();
        // (time, seq, kind, request, arg)
        let mut heap: BinaryHeap<Reverse<Event>> = BinaryHeap::new();
        let mut seq = 0u64;
        let mut next = 0usize;
        loop {
            let from_heap = heap.peek().map(|Reverse(e)| e.0);
            if next < requests.len() || from_heap.is_some() {
                // Other tenants' I/Os due before the next event of the replay go first: they
                // occupy the drive and join the replica's queue like any I/O.
                let due = requests
                    .get(next)
                    .map_or(u64::MAX, |q| q.arrival_ns)
                    .min(from_heap.unwrap_or(u64::MAX));
                let tenant = (0..n)
                    .filter_map(|r| replicas[r].next_tenant_io().map(|io| (io.0, r)))
                    .filter(|&(at, _)| at < due)
                    .min();
                if let Some((_, r)) = tenant {
                    serve_tenant_io((&mut replicas[r], &mut queues[r]), admission, r, next_id);
                    next_id += 1;
                    continue;
                }
            }
            let (t, kind, qi, arg) = match (next < requests.len(), from_heap) {
                (false, None) => break,
                (true, h) if h.is_none_or(|h| requests[next].arrival_ns < h) => {
                    next += 1;
                    (requests[next - 1].arrival_ns, ARRIVE, next - 1, 0u8)
                }
                _ => {
                    let Reverse((t, _, kind, qi, arg)) = heap.pop().unwrap();
                    (t, kind, qi as usize, arg)
                }
            };
            let q = requests[qi];
            let mut schedule = |heap: &mut BinaryHeap<_>, at: u64, kind: u8, arg: u8| {
                seq += 1;
                heap.push(Reverse((at, seq, kind, qi as u32, arg)));
            };
            match kind {
                ARRIVE => {
                    let attempt = arg as usize;
                    let r = states[qi].order[attempt] as usize;
                    let id = next_id;
                    next_id += 1;
                    queues[r].retire(t, r, admission);
                    if q.write {
                        let done = replicas[r].serve(t, q.offset, q.size as u64, true);
                        let io = (q.offset, q.size as u64, true);
                        enter((&mut replicas[r], &mut queues[r]), admission, (r, id, t), io, done);
                        caches[r].touch(q.offset, q.size);
                        states[qi].done = done;
                        continue;
                    }
                    let cached = caches[r].holds(q.offset, q.size);
                    if attempt == 0 {
                        reads_seen += 1;
                    }
                    let last = attempt + 1 >= n;
                    let wb = if needs.white_box || samples {
                        let s = replicas[r].storage.state(t, q.offset, q.size as u64);
                        Some(WhiteBox {
                            plane_wait_ns: s.plane_wait_ns,
                            channel_wait_ns: s.channel_wait_ns,
                            gc_active: s.gc_active,
                        })
                    } else {
                        None
                    };
                    let truth = if cached && needs.oracle {
                        Some(CACHE_HIT_NS)
                    } else if needs.oracle {
                        replicas[r].peek(t, q.offset, q.size as u64).map(|d| d - t)
                    } else {
                        None
                    };
                    deliver(&mut replicas[r], &mut queues[r], admission, r, t);
                    let planes = planes_of(&replicas[r], &queues[r], q.offset, q.size as u64);
                    let Queue { view: qu, books, .. } = &mut queues[r];
                    let view = IoView {
                        white_box: wb,
                        planes: needs.layout.then_some(&planes[..]),
                        true_latency_ns: truth,
                        cached,
                        deadline_ns: q.deadline_ns,
                        ..qu.view(r as u32, t, q.offset, q.size)
                    };
                    // The training rows' books, beside the policy's (if any): what they predict
                    // for this read at its first replica.
                    let books_ns = books.as_mut().filter(|_| samples && attempt == 0).map(|b| {
                        b.predict_ns(&IoView {
                            planes: Some(&planes[..]),
                            ..view
                        })
                    });
                    let mut decided = None;
                    if !last {
                        let clock = Instant::now();
                        let admitted = admission.admit(&view);
                        let infer_ns = clock.elapsed().as_nanos().min(u32::MAX as u128) as u32;
                        if !admitted {
                            let would = if cached {
                                CACHE_HIT_NS
                            } else {
                                replicas[r].peek(t, q.offset, q.size as u64).map_or(u64::MAX, |d| d - t)
                            };
                            out.decisions.push(Decision {
                                at_ns: t,
                                replica: r as u32,
                                admitted: false,
                                latency_ns: would,
                                infer_ns,
                            });
                            states[qi].revoked += 1;
                            if rank {
                                // Put the least slow of the untried replicas next.
                                let at = t + cfg.failover_ns;
                                let order = &mut states[qi].order;
                                let best = (attempt + 1..n)
                                    .min_by(|&a, &b| {
                                        let sa =
                                            slowness(admission, &mut queues, &mut replicas, order[a] as usize, at, &q);
                                        let sb =
                                            slowness(admission, &mut queues, &mut replicas, order[b] as usize, at, &q);
                                        sa.total_cmp(&sb)
                                    })
                                    .unwrap_or(attempt + 1);
                                order.swap(attempt + 1, best);
                            }
                            schedule(&mut heap, t + cfg.failover_ns, ARRIVE, arg + 1);
                            continue;
                        }
                        decided = Some(infer_ns);
                    }
                    let sample = (samples && attempt == 0).then(|| Sample {
                        arrival_ns: t,
                        replica: r as u32,
                        size: q.size,
                        offset: q.offset,
                        pending: view.pending,
                        pending_pages: view.pending_pages,
                        oldest_inflight_ns: view.oldest_inflight_ns,
                        since_completion_ns: view.since_completion_ns,
                        history: qu.history().clone(),
                        books_ns,
                        white_box: wb.unwrap_or_default(),
                        latency_ns: 0,
                    });
                    let node = (&mut replicas[r], &mut queues[r], &mut caches[r]);
                    let done = serve_read(node, admission, r, id, t, &q);
                    if let Some(infer_ns) = decided {
                        out.decisions.push(Decision {
                            at_ns: t,
                            replica: r as u32,
                            admitted: true,
                            latency_ns: done - t,
                            infer_ns,
                        });
                    }
                    if let Some(mut s) = sample {
                        s.latency_ns = done - t;
                        out.samples.push(s);
                    }
                    let st = &mut states[qi];
                    st.done = done;
                    st.served_by = r as u32;
                    st.served_attempt = attempt as u8;
                    match client {
                        Client::Direct => {}
                        Client::Hedge { .. } if n > 1 => {
                            while let Some(&Reverse((at, lat))) = completing.peek() {
                                if at > t {
                                    break;
                                }
                                completing.pop();
                                hedge_delay.observe(lat);
                            }
                            completing.push(Reverse((done, done - q.arrival_ns)));
                            let at = (q.arrival_ns + hedge_delay.delay_ns()).max(t);
                            if done > at {
                                schedule(&mut heap, at, HEDGE, 0);
                            }
                        }
                        Client::Timeout { after_ns } if n > 1 => {
                            let at = (q.arrival_ns + after_ns).max(t);
                            if done > at {
                                schedule(&mut heap, at, TIMEOUT, 0);
                            }
                        }
                        Client::Clone if n > 1 => {
                            let other = st.order[(attempt + 1) % n];
                            schedule(&mut heap, t, COPY, other);
                        }
                        _ => {}
                    }
                }
                HEDGE | TIMEOUT => {
                    let st = states[qi];
                    if st.done <= t {
                        continue; // answered in time
                    }
                    if kind == HEDGE {
                        // The budget's tokens accrue with the reads that arrived so far.
                        if let Client::Hedge { budget, .. } = client {
                            if budget < 1.0 {
                                let earned = HEDGE_BURST + reads_seen as f64 * budget;
                                if hedges_sent as f64 + 1.0 > earned {
                                    continue;
                                }
                            }
                        }
                        hedges_sent += 1;
                    }
                    let mut other = st.order[(st.served_attempt as usize + 1) % n];
                    if rank {
                        let at = t + cfg.failover_ns;
                        other = (0..n)
                            .filter(|&r| r as u32 != st.served_by)
                            .min_by(|&a, &b| {
                                let sa = slowness(admission, &mut queues, &mut replicas, a, at, &q);
                                let sb = slowness(admission, &mut queues, &mut replicas, b, at, &q);
                                sa.total_cmp(&sb)
                            })
                            .map_or(other, |r| r as u8);
                    }
                    let k = if kind == HEDGE { COPY } else { RETRY };
                    schedule(&mut heap, t + cfg.failover_ns, k, other);
                }
                _ => {
                    // COPY or RETRY: submitted without asking (the copy is not marked).
                    let r = arg as usize;
                    let id = next_id;
                    next_id += 1;
                    queues[r].retire(t, r, admission);
                    let node = (&mut replicas[r], &mut queues[r], &mut caches[r]);
                    let done = serve_read(node, admission, r, id, t, &q);
                    let st = &mut states[qi];
                    st.duplicates += 1;
                    if kind == RETRY || done < st.done {
                        st.done = done;
                        st.served_by = r as u32;
                    }
                }
            }
        }
        out.reads = requests
            .iter()
            .zip(&states)
            .filter(|(q, _)| !q.write)
            .map(|(q, s)| ReadResult {
                arrival_ns: q.arrival_ns,
                primary: q.primary,
                served_by: s.served_by,
                latency_ns: s.done.saturating_sub(q.arrival_ns),
                revoked: s.revoked,
                duplicates: s.duplicates,
            })
            .collect();
        out
    }
}
