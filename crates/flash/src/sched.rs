//! A disk behind a multi-tenant Linux I/O scheduler: MittCFQ's world, with CFQ's successors
//! (the kernel dropped CFQ in 5.0). Processes submit I/Os with an `ionice` priority; the
//! scheduler orders them; the disk serves one at a time (queue depth 1: the scheduler, not the
//! drive, decides the order, as under CFQ on a disk).
//!
//! - [`SchedKind::Fair`]: bfq-like fair queueing. One queue per process, its requests served in
//!   elevator order (C-LOOK from the head); classes strictly ordered (real time, best effort,
//!   idle, a real-time arrival ending a lower class's turn); within a class, start-time fair
//!   queueing on the disk time each queue used, weights from the level as bfq's
//!   `IOPRIO_TO_WEIGHT` ((8 - level) x 10); a queue keeps the disk until it empties or its time
//!   slice ends. (bfq charges seeky queues by time, as here, and budgets in sectors otherwise.
//!   A queue that empties keeps its turn for up to `slice_idle` (8 ms) waiting for its next
//!   request when its think time is shorter than that, as bfq idles to hold the weights of
//!   threads that each have one read in flight; one that thinks longer loses the turn at once.
//!   Left out: budget autotuning and queue merging.)
//! - [`SchedKind::Deadline`]: mq-deadline. Per class (ordered, as since Linux 5.14, with a
//!   lower class's request served first once it has waited `prio_aging_expire`, 10 s), reads
//!   and writes each in a sector-sorted list and a FIFO with an expiry; batches of
//!   `fifo_batch` in ascending sector order; reads preferred unless writes were passed over
//!   `writes_starved` times; a batch starts at the FIFO head when it has expired or the sweep
//!   has reached the end. (One sweep position for all classes and directions; the kernel
//!   keeps one per class and direction.)
//! - [`SchedKind::Noop`]: first come, first served (the `none` scheduler).
//!
//! The disk: seek growing with the square root of the distance (`iolearn-sim`'s disk preset),
//! a rotational delay drawn uniformly from one revolution, transfer at the media rate. The
//! random rotation is what a predictor cannot know; everything else it can learn by probing
//! (`iolearn_policy::mittsched::probe_seek_profile`).

use iolearn_ml::Rng;
use iolearn_sim::device::DevicePreset;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// An `ionice` scheduling class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Real time: always served first.
    RealTime = 0,
    /// Best effort: the default.
    BestEffort = 1,
    /// Idle: only when nothing else waits.
    Idle = 2,
}

/// An I/O's priority: class and level (0 highest to 7 lowest; `ionice -c2 -n4` is the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prio {
    /// The class.
    pub class: Class,
    /// The level within the class, 0 to 7.
    pub level: u8,
}

impl Prio {
    /// Best effort at `level`.
    pub const fn best_effort(level: u8) -> Prio {
        Prio {
            class: Class::BestEffort,
            level,
        }
    }

    /// bfq's weight for this level: `(8 - level) * 10` (`IOPRIO_TO_WEIGHT`).
    pub fn weight(&self) -> u64 {
        (8 - self.level.min(7) as u64) * 10
    }

    /// The kernel's encoding (`ioprio_set`, `IOPRIO_PRIO_VALUE`): the class in bits 13-15 (1
    /// real time, 2 best effort, 3 idle), the level below.
    pub fn ioprio(&self) -> u16 {
        ((self.class as u16 + 1) << 13) | self.level.min(7) as u16
    }

    /// From the kernel's class and level (`IOPRIO_PRIO_CLASS` / `_DATA`). Class 0 (none) is
    /// best effort at 4, the level the kernel derives for nice 0; idle is taken at level 7
    /// (the kernel ignores an idle request's level; the lowest weight is the honest one).
    pub fn from_kernel(class: u8, level: u8) -> Prio {
        match class {
            1 => Prio {
                class: Class::RealTime,
                level: level.min(7),
            },
            2 => Prio::best_effort(level.min(7)),
            3 => Prio {
                class: Class::Idle,
                level: 7,
            },
            _ => Prio::best_effort(4),
        }
    }

    /// Parse `rt:N`, `be:N` or `idle` (ionice's classes and levels).
    pub fn parse(s: &str) -> Result<Prio, String> {
        let (class, level) = match s.split_once(':') {
            Some((c, l)) => (c, Some(l)),
            None => (s, None),
        };
        let class = match class {
            "rt" => Class::RealTime,
            "be" => Class::BestEffort,
            "idle" => Class::Idle,
            other => return Err(format!("priority class {other:?} (rt, be or idle)")),
        };
        let level = match level {
            None => 4,
            Some(l) => match l.parse::<u8>() {
                Ok(v) if v <= 7 => v,
                _ => return Err(format!("priority level {l:?} (0 to 7)")),
            },
        };
        Ok(Prio { class, level })
    }
}

/// One I/O as the scheduler holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Io {
    /// Unique per node.
    pub id: u64,
    /// The submitting process.
    pub pid: u32,
    /// Its priority.
    pub prio: Prio,
    /// Offset, bytes.
    pub offset: u64,
    /// Length, bytes.
    pub len: u64,
    /// A write.
    pub write: bool,
    /// When it entered the scheduler, ns.
    pub arrival_ns: u64,
}

/// Which scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedKind {
    /// bfq-like fair queueing (per-process queues, weights, slices).
    Fair,
    /// mq-deadline.
    Deadline,
    /// First come, first served.
    Noop,
}

impl SchedKind {
    /// By the kernel's name: `bfq`, `mq-deadline`, `none`.
    pub fn by_name(name: &str) -> Option<SchedKind> {
        match name {
            "bfq" | "fair" => Some(SchedKind::Fair),
            "mq-deadline" | "deadline" => Some(SchedKind::Deadline),
            "none" | "noop" => Some(SchedKind::Noop),
            _ => None,
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        match self {
            SchedKind::Fair => "bfq",
            SchedKind::Deadline => "mq-deadline",
            SchedKind::Noop => "none",
        }
    }
}

/// The scheduler's tunables (the kernel's defaults where it has them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SchedConfig {
    /// Which scheduler.
    pub kind: SchedKind,
    /// Fair: disk time one turn of a level-4 queue may use, ns (scaled by weight / 40).
    /// bfq's `timeout_sync` is 125 ms; CFQ's sync slice was 100 ms.
    pub slice_ns: u64,
    /// Fair: how long the disk waits for the next request of a queue that emptied during its
    /// turn (`slice_idle`, 8 ms), ns.
    pub slice_idle_ns: u64,
    /// Deadline: requests per batch (`fifo_batch`, 16).
    pub fifo_batch: u32,
    /// Deadline: read expiry (`read_expire`, 500 ms).
    pub read_expire_ns: u64,
    /// Deadline: write expiry (`write_expire`, 5 s).
    pub write_expire_ns: u64,
    /// Deadline: read batches that may pass waiting writes (`writes_starved`, 2).
    pub writes_starved: u32,
    /// Deadline: a lower class's request waiting this long is served first
    /// (`prio_aging_expire`, 10 s).
    pub prio_aging_ns: u64,
}

impl SchedConfig {
    /// `kind` with the kernel's defaults.
    pub fn new(kind: SchedKind) -> SchedConfig {
        SchedConfig {
            kind,
            slice_ns: 100_000_000,
            slice_idle_ns: 8_000_000,
            fifo_batch: 16,
            read_expire_ns: 500_000_000,
            write_expire_ns: 5_000_000_000,
            writes_starved: 2,
            prio_aging_ns: 10_000_000_000,
        }
    }

    /// Fair: the slice of a queue with `weight`.
    pub fn slice_for(&self, weight: u64) -> u64 {
        self.slice_ns * weight / 40
    }
}

/// The disk: seek, random rotation, transfer.
#[derive(Debug, Clone)]
pub struct Disk {
    preset: DevicePreset,
    head: u64,
    rng: Rng,
}

impl Disk {
    /// A disk of `preset` with its head at 0; `seed` draws the rotational delays.
    pub fn new(preset: DevicePreset, seed: u64) -> Disk {
        Disk {
            preset,
            head: 0,
            rng: Rng::new(seed),
        }
    }

    /// Where the head is (the end of the last request served).
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Serve one request: its service time, ns; the head moves to its end. Within 1 MiB of
    /// the head no seek or rotation (the track is under the head); otherwise the seek grows
    /// with the square root of the distance and the rotational delay is uniform over one turn.
    pub fn serve(&mut self, offset: u64, len: u64, write: bool) -> u64 {
        let p = &self.preset;
        let fixed = if write { p.write_latency_ns } else { p.read_latency_ns };
        let dist = offset.abs_diff(self.head);
        let position = if dist <= 1 << 20 {
            0
        } else {
            let frac = (dist as f64 / p.capacity_bytes.max(1) as f64).min(1.0);
            (p.full_seek_ns as f64 * frac.sqrt()) as u64 + (self.rng.next_f64() * p.rotation_ns as f64) as u64
        };
        let transfer = (len.max(1) as u128 * 1_000_000_000 / p.bandwidth_bytes_per_s.max(1) as u128) as u64;
        self.head = offset.saturating_add(len);
        fixed + position + transfer
    }
}

/// One process's queue under [`SchedKind::Fair`].
#[derive(Debug, Clone)]
struct FairQueue {
    prio: Prio,
    /// Pending requests by (offset, id): elevator order.
    reqs: BTreeMap<(u64, u64), Io>,
    /// Virtual start time: disk time used so far / weight, caught up to the class's clock
    /// when the queue becomes busy again.
    start_v: f64,
    /// When its last request completed, and its think time (from a completion to its next
    /// request), an exponentially weighted mean: bfq idles only for queues that think briefly.
    last_done_ns: Option<u64>,
    think_ns: f64,
}

/// The weight of a new think-time sample.
const THINK_WEIGHT: f64 = 0.25;

/// mq-deadline's lists per class and direction (0 read, 1 write), keyed by (offset, id) or
/// (expiry, id).
type PerClass<T> = [[BTreeMap<(u64, u64), T>; 2]; 3];

/// The scheduler's queues.
#[derive(Debug, Clone)]
enum Queues {
    Fair {
        queues: HashMap<u32, FairQueue>,
        /// The queue holding the disk: (pid, when its turn ends).
        active: Option<(u32, u64)>,
        /// Per class, the virtual time (start of the queue last served).
        clock: [f64; 3],
    },
    Deadline {
        /// Per class and direction (0 read, 1 write): by (offset, id), and by (expiry, id)
        /// to the offset. (Boxed: the enum's variants stay of a size.)
        sorted: Box<PerClass<Io>>,
        fifo: Box<PerClass<u64>>,
        /// Where the sweep stands: the next request after `position` in the batch direction.
        position: u64,
        direction: usize,
        batched: u32,
        starved: u32,
        /// Where each pending request sits: id -> (class, direction, offset, expiry).
        index: HashMap<u64, (usize, usize, u64, u64)>,
    },
    Noop(VecDeque<Io>),
}

/// A node's block layer: the scheduler in front of the disk. The caller drives time: insert
/// I/Os as they arrive and collect completions in time order ([`Node::next_completion_ns`],
/// [`Node::complete`]).
#[derive(Debug, Clone)]
pub struct Node {
    cfg: SchedConfig,
    queues: Queues,
    disk: Disk,
    /// The request on the disk: (io, start, end).
    in_service: Option<(Io, u64, u64)>,
    /// Fair: the disk idles for this process's next request until this time.
    idle: Option<(u32, u64)>,
    queued: usize,
}

impl Node {
    /// An idle node.
    pub fn new(cfg: SchedConfig, disk: Disk) -> Node {
        let queues = match cfg.kind {
            SchedKind::Fair => Queues::Fair {
                queues: HashMap::new(),
                active: None,
                clock: [0.0; 3],
            },
            SchedKind::Deadline => Queues::Deadline {
                sorted: Default::default(),
                fifo: Default::default(),
                position: 0,
                direction: 0,
                batched: 0,
                starved: 0,
                index: HashMap::new(),
            },
            SchedKind::Noop => Queues::Noop(VecDeque::new()),
        };
        Node {
            cfg,
            queues,
            disk,
            in_service: None,
            idle: None,
            queued: 0,
        }
    }

    /// I/Os waiting in the scheduler (not the one on the disk).
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// The request on the disk: (io, start ns, end ns).
    pub fn in_service(&self) -> Option<(Io, u64, u64)> {
        self.in_service
    }

    /// An I/O arrives at `now_ns` (`io.arrival_ns`). Returns the request the disk starts on
    /// now, if it was idle.
    pub fn insert(&mut self, now_ns: u64, io: Io) -> Option<Io> {
        self.queued += 1;
        match &mut self.queues {
            Queues::Fair { queues, active, clock } => {
                let class = io.prio.class as usize;
                let q = queues.entry(io.pid).or_insert_with(|| FairQueue {
                    prio: io.prio,
                    reqs: BTreeMap::new(),
                    start_v: clock[class],
                    last_done_ns: None,
                    think_ns: f64::INFINITY,
                });
                if q.reqs.is_empty() {
                    if let Some(done) = q.last_done_ns.take() {
                        let think = now_ns.saturating_sub(done) as f64;
                        q.think_ns = if q.think_ns.is_finite() {
                            q.think_ns + THINK_WEIGHT * (think - q.think_ns)
                        } else {
                            think
                        };
                    }
                }
                if q.reqs.is_empty() && active.map(|a| a.0) != Some(io.pid) {
                    // Busy again: no credit for the time it was idle.
                    q.start_v = q.start_v.max(clock[class]);
                }
                q.prio = io.prio;
                q.reqs.insert((io.offset, io.id), io);
                // A higher class ends a lower class's turn (bfq expires the in-service queue).
                if let Some((pid, _)) = *active {
                    let active_class = queues.get(&pid).map(|q| q.prio.class).unwrap_or(Class::Idle);
                    if io.prio.class < active_class {
                        *active = None;
                        self.idle = None;
                    }
                }
                // The request the disk idled for.
                if self.idle.is_some_and(|(pid, _)| pid == io.pid) {
                    self.idle = None;
                }
            }
            Queues::Deadline {
                sorted, fifo, index, ..
            } => {
                let (c, d) = (io.prio.class as usize, io.write as usize);
                sorted[c][d].insert((io.offset, io.id), io);
                let expire = if io.write {
                    self.cfg.write_expire_ns
                } else {
                    self.cfg.read_expire_ns
                };
                fifo[c][d].insert((io.arrival_ns + expire, io.id), io.offset);
                index.insert(io.id, (c, d, io.offset, io.arrival_ns + expire));
            }
            Queues::Noop(q) => q.push_back(io),
        }
        if self.in_service.is_none() && self.idle.is_none() {
            return self.dispatch(now_ns);
        }
        None
    }

    /// Until when the disk idles waiting for the active queue's next request (fair).
    pub fn idle_until_ns(&self) -> Option<u64> {
        self.idle.map(|(_, until)| until)
    }

    /// The idle wait ran out (at [`Node::idle_until_ns`]): the queue loses its turn and the
    /// disk starts on the next pick, returned.
    pub fn wake(&mut self) -> Option<Io> {
        let (_, until) = self.idle.take()?;
        if let Queues::Fair { active, .. } = &mut self.queues {
            *active = None;
        }
        self.dispatch(until)
    }

    /// Take a waiting I/O out (late cancellation). False when it is on the disk or unknown.
    pub fn cancel(&mut self, id: u64) -> bool {
        let removed = match &mut self.queues {
            Queues::Fair { queues, .. } => {
                let key = queues
                    .iter()
                    .find_map(|(pid, q)| q.reqs.iter().find(|(_, io)| io.id == id).map(|(k, _)| (*pid, *k)));
                match key {
                    Some((pid, k)) => queues.get_mut(&pid).and_then(|q| q.reqs.remove(&k)).is_some(),
                    None => false,
                }
            }
            Queues::Deadline {
                sorted, fifo, index, ..
            } => match index.remove(&id) {
                Some((c, d, offset, expire)) => {
                    sorted[c][d].remove(&(offset, id));
                    fifo[c][d].remove(&(expire, id));
                    true
                }
                None => false,
            },
            Queues::Noop(q) => match q.iter().position(|io| io.id == id) {
                Some(i) => q.remove(i).is_some(),
                None => false,
            },
        };
        if removed {
            self.queued -= 1;
        }
        removed
    }

    /// When the request on the disk completes.
    pub fn next_completion_ns(&self) -> Option<u64> {
        self.in_service.map(|(_, _, end)| end)
    }

    /// Complete the request on the disk (at [`Node::next_completion_ns`]): returns it with its
    /// start and end, and the request the disk starts on next, if any.
    pub fn complete(&mut self) -> Option<((Io, u64, u64), Option<Io>)> {
        let done = self.in_service.take()?;
        let now = done.2;
        if let Queues::Fair { queues, active, .. } = &mut self.queues {
            if let Some(q) = queues.get_mut(&done.0.pid) {
                q.start_v += (done.2 - done.1) as f64 / q.prio.weight() as f64;
                q.last_done_ns = Some(now);
                // Its turn goes on, it has nothing waiting, and it usually sends the next
                // read soon: wait for it.
                if let Some((pid, until)) = *active {
                    if pid == done.0.pid
                        && q.reqs.is_empty()
                        && now < until
                        && q.think_ns < self.cfg.slice_idle_ns as f64
                    {
                        self.idle = Some((pid, until.min(now + self.cfg.slice_idle_ns)));
                        return Some((done, None));
                    }
                }
            }
        }
        let next = self.dispatch(now);
        Some((done, next))
    }

    /// Start the disk on the next request the scheduler picks.
    fn dispatch(&mut self, now_ns: u64) -> Option<Io> {
        let head = self.disk.head();
        let io = match &mut self.queues {
            Queues::Fair { queues, active, clock } => pick_fair(&self.cfg, queues, active, clock, now_ns, head),
            Queues::Deadline {
                sorted,
                fifo,
                position,
                direction,
                batched,
                starved,
                index,
            } => {
                let io = pick_deadline(&self.cfg, sorted, fifo, position, direction, batched, starved, now_ns);
                if let Some(io) = &io {
                    index.remove(&io.id);
                }
                io
            }
            Queues::Noop(q) => q.pop_front(),
        }?;
        self.queued -= 1;
        let service = self.disk.serve(io.offset, io.len, io.write);
        self.in_service = Some((io, now_ns, now_ns + service));
        Some(io)
    }
}

/// The fair scheduler's pick: keep the active queue while it has requests and turn time left
/// and no higher class waits; else the busy queue of the highest class with the smallest
/// virtual start. Within the queue, C-LOOK from the head.
fn pick_fair(
    cfg: &SchedConfig,
    queues: &mut HashMap<u32, FairQueue>,
    active: &mut Option<(u32, u64)>,
    clock: &mut [f64; 3],
    now_ns: u64,
    head: u64,
) -> Option<Io> {
    let keep = active.and_then(|(pid, until)| {
        let q = queues.get(&pid)?;
        (!q.reqs.is_empty() && now_ns < until).then_some(pid)
    });
    let pid = match keep {
        Some(pid) => pid,
        None => {
            let (&pid, q) = queues
                .iter()
                .filter(|(_, q)| !q.reqs.is_empty())
                .min_by(|(pa, a), (pb, b)| {
                    (a.prio.class, a.start_v, **pa)
                        .partial_cmp(&(b.prio.class, b.start_v, **pb))
                        .unwrap_or(std::cmp::Ordering::Equal)
                })?;
            let class = q.prio.class as usize;
            clock[class] = clock[class].max(q.start_v);
            *active = Some((pid, now_ns + cfg.slice_for(q.prio.weight())));
            pid
        }
    };
    let q = queues.get_mut(&pid)?;
    let key = q
        .reqs
        .range((head, 0)..)
        .next()
        .or_else(|| q.reqs.iter().next())
        .map(|(k, _)| *k)?;
    q.reqs.remove(&key)
}

/// mq-deadline's pick (`dd_dispatch_request` / `__dd_dispatch_request`).
#[allow(clippy::too_many_arguments)]
fn pick_deadline(
    cfg: &SchedConfig,
    sorted: &mut PerClass<Io>,
    fifo: &mut PerClass<u64>,
    position: &mut u64,
    direction: &mut usize,
    batched: &mut u32,
    starved: &mut u32,
    now_ns: u64,
) -> Option<Io> {
    // A lower class's request that has waited `prio_aging_ns` goes first; else the highest
    // class with requests.
    let expire = [cfg.read_expire_ns, cfg.write_expire_ns];
    let aged = (1..3).find(|&c| {
        (0..2).any(|d| {
            fifo[c][d]
                .keys()
                .next()
                .is_some_and(|&(exp, _)| exp.saturating_sub(expire[d]).saturating_add(cfg.prio_aging_ns) <= now_ns)
        })
    });
    let class = aged.or_else(|| (0..3).find(|&c| !sorted[c][0].is_empty() || !sorted[c][1].is_empty()))?;
    let (s, f) = (&mut sorted[class], &mut fifo[class]);
    // Continue the batch in sector order.
    let mut next = if *batched < cfg.fifo_batch {
        s[*direction].range((*position, 0)..).next().map(|(k, _)| *k)
    } else {
        None
    };
    if next.is_none() {
        // A new batch: reads unless writes starve.
        let reads = !s[0].is_empty();
        let writes = !s[1].is_empty();
        let dir = if reads && (!writes || *starved < cfg.writes_starved) {
            if writes {
                *starved += 1;
            }
            0
        } else {
            *starved = 0;
            1
        };
        let expired = f[dir].iter().next().is_some_and(|(&(exp, _), _)| exp <= now_ns);
        let after = s[dir].range((*position, 0)..).next().map(|(k, _)| *k);
        next = if expired || after.is_none() || dir != *direction {
            f[dir].iter().next().map(|(&(_, id), &offset)| (offset, id))
        } else {
            after
        };
        *direction = dir;
        *batched = 0;
    }
    let key = next?;
    let io = s[*direction].remove(&key)?;
    let expire = io.arrival_ns
        + if io.write {
            cfg.write_expire_ns
        } else {
            cfg.read_expire_ns
        };
    f[*direction].remove(&(expire, io.id));
    *batched += 1;
    *position = io.offset + io.len;
    Some(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(id: u64, pid: u32, prio: Prio, offset: u64, at: u64) -> Io {
        Io {
            id,
            pid,
            prio,
            offset,
            len: 4096,
            write: false,
            arrival_ns: at,
        }
    }

    fn drain(node: &mut Node) -> Vec<u64> {
        let mut order = Vec::new();
        while let Some(((io, _, _), _)) = node.complete() {
            order.push(io.id);
        }
        order
    }

    #[test]
    fn fair_serves_a_real_time_queue_before_best_effort_and_keeps_a_turn_otherwise() {
        let mut node = Node::new(SchedConfig::new(SchedKind::Fair), Disk::new(DevicePreset::hdd(), 1));
        let gib = 1u64 << 30;
        node.insert(0, io(0, 1, Prio::best_effort(4), 0, 0));
        for k in 1..4 {
            node.insert(0, io(k, 1, Prio::best_effort(4), k * gib, 0));
        }
        node.insert(0, io(10, 2, Prio::best_effort(4), 5 * gib, 0));
        node.insert(0, io(20, 3, Prio::parse("rt:4").unwrap(), 9 * gib, 0));
        let order = drain(&mut node);
        // 0 was on the disk; the real-time arrival ended process 1's turn and went next; then
        // process 2, which has used no disk time yet (smaller virtual start); then process 1's
        // requests in elevator order (C-LOOK wraps from 5 GiB to 1 GiB).
        assert_eq!(order[0], 0);
        assert_eq!(order[1], 20);
        assert_eq!(&order[2..], &[10, 1, 2, 3]);
    }

    #[test]
    fn fair_shares_disk_time_by_weight() {
        // Two always-busy processes at levels 0 (weight 80) and 7 (weight 10): disk time
        // splits about 8:1.
        let mut cfg = SchedConfig::new(SchedKind::Fair);
        cfg.slice_ns = 20_000_000;
        let mut node = Node::new(cfg, Disk::new(DevicePreset::hdd(), 2));
        let mut rng = Rng::new(3);
        let mut id = 0;
        let mut used = [0u64; 2];
        for pid in 0..2u32 {
            for _ in 0..4 {
                id += 1;
                let lvl = if pid == 0 { 0 } else { 7 };
                node.insert(0, io(id, pid, Prio::best_effort(lvl), rng.next_u64() % (1 << 40), 0));
            }
        }
        for _ in 0..20_000 {
            let ((done, start, end), _) = node.complete().unwrap();
            used[done.pid as usize] += end - start;
            id += 1;
            let off = rng.next_u64() % (1 << 40);
            node.insert(end, io(id, done.pid, done.prio, off, end));
        }
        let ratio = used[0] as f64 / used[1] as f64;
        assert!((6.5..9.5).contains(&ratio), "disk time ratio {ratio}");
    }

    #[test]
    fn deadline_sweeps_up_in_sector_order_and_restarts_at_the_fifo_head() {
        let mut node = Node::new(SchedConfig::new(SchedKind::Deadline), Disk::new(DevicePreset::hdd(), 1));
        let be = Prio::best_effort(4);
        let mib = 1u64 << 20;
        node.insert(0, io(0, 1, be, 500 * mib, 0)); // on the disk at once
        node.insert(1, io(1, 1, be, 900 * mib, 1));
        node.insert(2, io(2, 2, be, 100 * mib, 2));
        node.insert(3, io(3, 2, be, 700 * mib, 3));
        node.insert(4, io(4, 3, Prio::parse("idle").unwrap(), 600 * mib, 4));
        // After 500: 700, 900 (sweep up), then the FIFO head of what is left (100), then the
        // idle class.
        assert_eq!(drain(&mut node), vec![0, 3, 1, 2, 4]);
    }

    #[test]
    fn deadline_serves_an_expired_read_first_when_a_batch_ends() {
        let mut cfg = SchedConfig::new(SchedKind::Deadline);
        cfg.fifo_batch = 1;
        cfg.read_expire_ns = 10;
        let mut node = Node::new(cfg, Disk::new(DevicePreset::hdd(), 1));
        let be = Prio::best_effort(4);
        node.insert(0, io(0, 1, be, 0, 0));
        node.insert(0, io(1, 1, be, 50 << 30, 0)); // oldest, far
        node.insert(1, io(2, 1, be, 1 << 20, 1)); // near
        assert_eq!(drain(&mut node), vec![0, 1, 2]);
    }

    #[test]
    fn cancel_takes_a_waiting_io_out_but_not_the_one_on_the_disk() {
        for kind in [SchedKind::Fair, SchedKind::Deadline, SchedKind::Noop] {
            let mut node = Node::new(SchedConfig::new(kind), Disk::new(DevicePreset::hdd(), 1));
            let be = Prio::best_effort(4);
            node.insert(0, io(0, 1, be, 0, 0));
            node.insert(0, io(1, 1, be, 1 << 30, 0));
            node.insert(0, io(2, 2, be, 2 << 30, 0));
            assert!(!node.cancel(0), "{kind:?}");
            assert!(node.cancel(1), "{kind:?}");
            assert!(!node.cancel(1), "{kind:?}");
            assert_eq!(node.queued(), 1);
            assert_eq!(drain(&mut node), vec![0, 2], "{kind:?}");
        }
    }

    #[test]
    fn deadline_serves_a_lower_class_read_first_once_it_has_aged() {
        let mut cfg = SchedConfig::new(SchedKind::Deadline);
        cfg.prio_aging_ns = 1_000_000_000;
        let mut node = Node::new(cfg, Disk::new(DevicePreset::hdd(), 1));
        let (rt, idle) = (Prio::parse("rt:0").unwrap(), Prio::parse("idle").unwrap());
        node.insert(0, io(0, 1, rt, 0, 0));
        node.insert(0, io(1, 2, idle, 1 << 30, 0));
        node.insert(0, io(2, 1, rt, 3 << 32, 0));
        // A real-time stream that never lets up (two in flight): the idle read still goes
        // once 1 s old.
        let mut id = 3;
        let mut served_idle_at = None;
        while let Some(((done, _, end), _)) = node.complete() {
            if done.id == 1 || id > 100_000 {
                served_idle_at = Some(end);
                break;
            }
            node.insert(end, io(id, 1, rt, (id % 7) << 32, end));
            id += 1;
        }
        let at = served_idle_at.unwrap_or(u64::MAX);
        assert!((1_000_000_000..1_100_000_000).contains(&at), "served at {at} ns");
    }

    #[test]
    fn fair_idles_for_a_thread_that_thinks_briefly_so_weights_hold_with_one_read_in_flight() {
        // Two threads, each with one read in flight and no think time, at levels 0 and 7:
        // without idling the disk alternates (1:1); waiting for the next read keeps each turn,
        // and turns are weight-long. (Not the full 8:1 of always-busy queues: a queue empty
        // when its turn ends is busy again a moment later at the class's clock, as bfq
        // reactivates an entity no earlier than the virtual time, losing its credit.)
        let run = |slice_idle_ns| {
            let mut cfg = SchedConfig::new(SchedKind::Fair);
            cfg.slice_ns = 20_000_000;
            cfg.slice_idle_ns = slice_idle_ns;
            let mut node = Node::new(cfg, Disk::new(DevicePreset::hdd(), 2));
            let mut rng = Rng::new(3);
            let mut used = [0u64; 2];
            node.insert(0, io(1, 0, Prio::best_effort(0), rng.next_u64() % (1 << 40), 0));
            node.insert(0, io(2, 1, Prio::best_effort(7), rng.next_u64() % (1 << 40), 0));
            let mut id = 3;
            for _ in 0..20_000 {
                if node.in_service().is_none() {
                    node.wake();
                    continue;
                }
                let ((done, start, end), _) = node.complete().unwrap();
                used[done.pid as usize] += end - start;
                node.insert(end, io(id, done.pid, done.prio, rng.next_u64() % (1 << 40), end));
                id += 1;
            }
            used[0] as f64 / used[1] as f64
        };
        let (idling, not) = (run(8_000_000), run(0));
        assert!((3.0..5.0).contains(&idling), "disk time ratio with idling {idling}");
        assert!((0.8..1.25).contains(&not), "without idling {not}");
    }
}
