//! MittCFQ's successor: a per-I/O wait predictor that keeps its own books of a multi-tenant
//! I/O scheduler (`shared/spec/tail-latency.md` section 2; CFQ is gone, so bfq-like fair
//! queueing and mq-deadline). The books see what a block layer's hooks see (an I/O entering
//! the scheduler with its process and priority, its dispatch to the drive, its completion,
//! the block layer's `block_rq_insert` / `block_rq_issue` / `block_rq_complete` tracepoints)
//! and know the scheduler's policy; service times come from a [`SeekProfile`] measured by
//! probing the drive. Nothing reads the simulator's state: its accuracy is a measurement.
//!
//! - Wait in O(P): per-process predicted totals, as MittCFQ kept per CFQ node; an I/O waits
//!   for the one on the drive, every queue of a higher class, its own queue, and one turn of
//!   each other busy queue of its class (fair), or the sweep of its class up to its sector
//!   (mq-deadline), or everything (none).
//! - Late cancellation: an admitted I/O with a deadline has a tolerable time (deadline minus
//!   predicted completion). Later arrivals served ahead of it, and a drive slower than
//!   predicted, push every waiting I/O of a class back by the same amount, so the books add
//!   that to a per-class debt instead of rewriting each I/O's key; the I/Os sit in a map
//!   ordered by tolerable time plus the debt at admission, and those whose key falls below
//!   the current debt are cancelled (EBUSY) at the front of the map, in O(log N) each
//!   (MittCFQ used a hash of 1 ms buckets for the same end).

use iolearn_ml::Rng;
use std::collections::{BTreeMap, HashMap};

/// What a predictor learns about a disk by timing reads on it (MittNOOP's profile): the mean
/// cost of a 4 KiB read at each of a ladder of seek distances (a seek curve), and the cost per
/// extra KiB. (MittOS profiled a zone-to-zone matrix of 1 GB zones; a disk's seek depends on
/// the distance far more than on where, and a curve over distances resolves short seeks that a
/// matrix of coarse zones averages away: a trace confined to a few GiB of a 1 TiB disk.)
#[derive(Debug, Clone, PartialEq)]
pub struct SeekProfile {
    /// (distance, mean 4 KiB read cost at that distance), bytes and ns, distances ascending.
    pub curve: Vec<(u64, u64)>,
    /// A read within 1 MiB of the head (sequential), 4 KiB, ns.
    pub near_ns: u64,
    /// Transfer cost per KiB past the first 4, ns (linear regression over sizes).
    pub per_kib_ns: f64,
}

impl SeekProfile {
    /// A profile that costs `ns` for a 4 KiB read at any distance and `per_kib_ns` more per
    /// further KiB (worked examples and tests).
    pub fn flat(ns: u64, per_kib_ns: f64) -> SeekProfile {
        SeekProfile {
            curve: Vec::new(),
            near_ns: ns,
            per_kib_ns,
        }
    }

    /// Predicted service of `len` bytes at `offset` with the head at `head`, ns: the curve
    /// interpolated linearly in the logarithm of the distance (flat past its ends).
    pub fn predict(&self, head: u64, offset: u64, len: u64) -> u64 {
        let extra_kib = (len.saturating_sub(4096)) as f64 / 1024.0;
        let extra = (extra_kib * self.per_kib_ns).max(0.0) as u64;
        let d = offset.abs_diff(head);
        if d <= 1 << 20 || self.curve.is_empty() {
            return self.near_ns + extra;
        }
        let i = self.curve.partition_point(|&(at, _)| at < d);
        let seek = if i == 0 {
            self.curve[0].1
        } else if i == self.curve.len() {
            self.curve[i - 1].1
        } else {
            let ((d0, c0), (d1, c1)) = (self.curve[i - 1], self.curve[i]);
            let f = ((d as f64).ln() - (d0 as f64).ln()) / ((d1 as f64).ln() - (d0 as f64).ln()).max(1e-12);
            (c0 as f64 + f * (c1 as f64 - c0 as f64)) as u64
        };
        seek + extra
    }
}

/// Probe a disk as MittNOOP's profiler did, with nothing but timed reads: at each distance of a
/// ladder (2 MiB, doubling up to the capacity, `steps` per doubling), the mean of `tries` 4 KiB
/// reads that far from one at a random place (up or down, as the disk allows); and reads of 4
/// KiB to 1 MiB in place for the cost per KiB (least squares). `serve` times one read
/// `(offset, len) -> ns`, moving the head.
pub fn probe_seek_profile(
    capacity: u64,
    steps: usize,
    tries: usize,
    seed: u64,
    mut serve: impl FnMut(u64, u64) -> u64,
) -> SeekProfile {
    let steps = steps.clamp(1, 64);
    let tries = tries.max(1);
    let capacity = capacity.max(4 << 20);
    let mut rng = Rng::new(seed);
    let mut curve = Vec::new();
    let mut k = 0;
    loop {
        let d = ((2u64 << 20) as f64 * 2f64.powf(k as f64 / steps as f64)) as u64;
        if d >= capacity {
            break;
        }
        let mut sum = 0u64;
        for _ in 0..tries {
            let from = (rng.next_u64() % (capacity - 4096)) & !4095;
            let to = if from + d + 4096 <= capacity {
                from + d
            } else {
                from - d.min(from)
            };
            serve(from, 4096);
            sum += serve(to & !4095, 4096);
        }
        curve.push((d, sum / tries as u64));
        k += 1;
    }
    // In place: a 4 KiB read right where the head is, then growing sizes.
    let base = (rng.next_u64() % (capacity / 2)) & !4095;
    let (mut sx, mut sy, mut sxx, mut sxy, mut n) = (0f64, 0f64, 0f64, 0f64, 0f64);
    let mut near = 0u64;
    for t in 0..tries {
        serve(base, 4096);
        near += serve(base + 4096, 4096);
        for kib in [4u64, 16, 64, 256, 1024] {
            serve(base, 4096);
            let ns = serve(base + 4096 * (t as u64 + 1), kib * 1024) as f64;
            let x = (kib - 4) as f64;
            sx += x;
            sy += ns;
            sxx += x * x;
            sxy += x * ns;
            n += 1.0;
        }
    }
    let per_kib = ((n * sxy - sx * sy) / (n * sxx - sx * sx).max(1e-9)).max(0.0);
    SeekProfile {
        curve,
        near_ns: near / tries as u64,
        per_kib_ns: per_kib,
    }
}

/// Bfq: a request that went to the drive within this of its arrival was served at once.
const PROMPT_NS: u64 = 1_000_000;
/// Bfq: how long the treatment of the last request served says something about the next.
const RECENT_NS: u64 = 100_000_000;

/// The weight of a new think-time sample (the scheduler's own estimate is what matters; this
/// is the simulated bfq's).
const THINK_WEIGHT: f64 = 0.25;

/// The scheduler whose books are kept, as far as the predictor needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discipline {
    /// bfq-like fair queueing: per-process queues, strict classes, turns of
    /// `slice_ns * weight / 40` of drive time.
    Fair {
        /// A level-4 queue's turn, ns.
        slice_ns: u64,
        /// How long the drive waits for the next request of a queue that emptied during its
        /// turn, if the queue thinks less than that (`slice_idle`), ns.
        slice_idle_ns: u64,
    },
    /// The kernel's bfq as it behaves on a fast device (measured on loop devices: a queue's
    /// turn lasts its budget timeout, `timeout_sync`, whatever its weight, and while it
    /// holds the drive bfq injects other queues' requests; when the turn ends the queue with
    /// the smallest virtual finish goes next, so a queue that was injected has paid for it and
    /// a sparse one is served first). Classes are strict.
    Bfq {
        /// A queue's turn (`timeout_sync`), ns.
        timeout_ns: u64,
        /// Idling for the next request of a queue that thinks less than this (`slice_idle`), ns.
        slice_idle_ns: u64,
    },
    /// mq-deadline: strict classes; in each, reads and writes swept apart in ascending
    /// sector order in batches, a batch restarting at the oldest request when the sweep runs
    /// out, a write batch after `writes_starved` read batches when writes wait.
    Deadline {
        /// Requests per batch (`fifo_batch`).
        fifo_batch: u32,
        /// Read batches that may pass waiting writes (`writes_starved`).
        writes_starved: u32,
    },
    /// First come, first served.
    Fifo,
}

/// An I/O as the block layer's hooks see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Its identity.
    pub id: u64,
    /// The submitting process.
    pub pid: u32,
    /// Its class: 0 real time, 1 best effort, 2 idle.
    pub class: u8,
    /// Its fair-queueing weight (bfq: (8 - level) x 10).
    pub weight: u64,
    /// Offset, bytes.
    pub offset: u64,
    /// Length, bytes.
    pub len: u64,
    /// A write (mq-deadline sweeps reads and writes apart).
    pub write: bool,
}

/// A prediction: how long the I/O would wait before the drive starts on it, and its service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prediction {
    /// Wait in the scheduler and behind the drive's current request, ns.
    pub wait_ns: u64,
    /// Its own service time, ns.
    pub service_ns: u64,
}

impl Prediction {
    /// Wait plus service.
    pub fn total_ns(&self) -> u64 {
        self.wait_ns + self.service_ns
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Process {
    class: u8,
    weight: u64,
    /// Predicted service of its waiting I/Os, ns.
    total_ns: u64,
    waiting: u32,
    /// Fair: drive time used / weight (bfq's virtual start, mirrored from the events).
    start_v: f64,
    /// When its last request completed, and its mean think time (completion to its next
    /// request; infinite until seen), as the scheduler keeps them.
    last_done_ns: Option<u64>,
    think_ns: f64,
}

impl Process {
    /// A steady submitter: it sends its next request within the idle window, so it holds
    /// the drive for its whole turn (and, through idling, keeps it while it thinks).
    fn steady(&self, slice_idle_ns: u64) -> bool {
        self.think_ns < slice_idle_ns as f64
    }
}

#[derive(Debug, Clone, Copy)]
struct Waiting {
    entry: Entry,
    service_ns: u64,
    inserted_ns: u64,
    /// Key in the late-cancellation map, when it carries a deadline.
    watch: Option<i64>,
}

/// The books of one drive's scheduler.
#[derive(Debug, Clone)]
pub struct SchedBooks {
    discipline: Discipline,
    profile: SeekProfile,
    /// Where the head will be: the end of the last request dispatched.
    head: u64,
    /// The drive's request: (id, predicted end).
    on_drive: Option<(u64, u64)>,
    /// Fair: the process holding the drive and when its turn ends.
    turn: Option<(u32, u64)>,
    /// The process whose request is on the drive, and when it started.
    on_drive_pid: Option<u32>,
    on_drive_start: u64,
    processes: HashMap<u32, Process>,
    waiting: HashMap<u64, Waiting>,
    /// Deadline: per class and direction (0 read, 1 write), waiting requests by (offset, id)
    /// -> predicted service, and by (arrival, id) -> offset.
    sorted: [[BTreeMap<(u64, u64), u64>; 2]; 3],
    fifo: [[BTreeMap<(u64, u64), u64>; 2]; 3],
    /// Deadline: where the sweep stands.
    position: u64,
    /// Per class, how far waiting I/Os have been pushed back since the books began, ns.
    debt: [i64; 3],
    /// Per class, the I/Os with deadlines by (tolerable time + debt at admission, id).
    watch: [BTreeMap<(i64, u64), ()>; 3],
    /// Fair: per class, the virtual time (the start of the queue whose turn began last).
    clock: [f64; 3],
    /// Bfq: requests on the drive (several at once on a real device): process and start.
    in_flight: HashMap<u64, (u32, u64)>,
    /// Bfq: per (class, weight), when the last request went to the drive and how long it had
    /// waited.
    last_served: HashMap<(u8, u64), (u64, u64)>,
}

impl SchedBooks {
    /// Empty books for a drive profiled as `profile` behind `discipline`.
    pub fn new(discipline: Discipline, profile: SeekProfile) -> SchedBooks {
        SchedBooks {
            discipline,
            profile,
            head: 0,
            on_drive: None,
            turn: None,
            on_drive_pid: None,
            on_drive_start: 0,
            processes: HashMap::new(),
            waiting: HashMap::new(),
            sorted: Default::default(),
            fifo: Default::default(),
            position: 0,
            debt: [0; 3],
            watch: Default::default(),
            clock: [0.0; 3],
            in_flight: HashMap::new(),
            last_served: HashMap::new(),
        }
    }

    /// I/Os waiting in the scheduler, by the books.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    fn turn_ns(&self, weight: u64) -> u64 {
        match self.discipline {
            Discipline::Fair { slice_ns, .. } => slice_ns * weight / 40,
            Discipline::Bfq { timeout_ns, .. } => timeout_ns,
            _ => 0,
        }
    }

    fn slice_idle_ns(&self) -> u64 {
        match self.discipline {
            Discipline::Fair { slice_idle_ns, .. } | Discipline::Bfq { slice_idle_ns, .. } => slice_idle_ns,
            _ => 0,
        }
    }

    /// Bfq: whether requests like `entry` (its class and weight) are being served at once
    /// whatever the turns: the last one went to the drive within [`PROMPT_NS`] of its arrival,
    /// no longer than [`RECENT_NS`] ago, and none waits now. bfq raises the weight of queues
    /// it judges interactive (sparse, new) for a while and lets them cut in; the raising is
    /// not visible in the block layer's events, its effect is (measured on loop devices: a
    /// store thread's reads were served at once for runs of seconds, then waited for turns).
    fn served_promptly(&self, now_ns: u64, entry: &Entry) -> bool {
        let class = entry.class.min(2);
        let Some(&(at, waited)) = self.last_served.get(&(class, entry.weight)) else {
            return false;
        };
        let blocked = self
            .processes
            .iter()
            .any(|(&pid, p)| pid != entry.pid && p.class == class && p.weight == entry.weight && p.waiting > 0);
        waited < PROMPT_NS && now_ns.saturating_sub(at) < RECENT_NS && !blocked
    }

    /// Bfq: whether `entry`'s queue, becoming busy, ends the turn of `holder`'s: a higher class
    /// or a higher weight in the class (bfq_bfqq_higher_class_or_weight; measured on loop
    /// devices: a best-effort-4 reader beside four best-effort-7 ones waited for nothing).
    fn preempts(&self, entry: &Entry, holder: u32) -> bool {
        self.processes.get(&holder).is_some_and(|h| {
            let class = entry.class.min(2);
            h.class > class || (h.class == class && entry.weight > h.weight)
        })
    }

    /// Bfq: the process holding the drive's turn at `now_ns` (its turn unexpired, and it has
    /// work or will send more within the idle window).
    fn holder(&self, now_ns: u64) -> Option<(u32, u64)> {
        let idle = self.slice_idle_ns();
        self.turn.filter(|&(pid, until)| {
            now_ns < until
                && self
                    .processes
                    .get(&pid)
                    .is_some_and(|p| p.waiting > 0 || p.steady(idle))
        })
    }

    /// How long `entry` would wait and take if it entered the scheduler at `now_ns`. O(P) for
    /// fair queueing (P busy processes); for mq-deadline a walk over the waiting requests of
    /// its class and the higher ones.
    pub fn predict(&self, now_ns: u64, entry: &Entry) -> Prediction {
        let service = self.profile.predict(self.head, entry.offset, entry.len);
        let mut wait = self.on_drive.map_or(0, |(_, end)| end.saturating_sub(now_ns));
        let class = entry.class.min(2) as usize;
        match self.discipline {
            Discipline::Fifo => wait += self.processes.values().map(|p| p.total_ns).sum::<u64>(),
            Discipline::Fair { slice_idle_ns, .. } => {
                let own = self.processes.get(&entry.pid).copied().unwrap_or_default();
                let holder = self.turn.filter(|&(pid, until)| {
                    now_ns < until
                        && self
                            .processes
                            .get(&pid)
                            .is_some_and(|p| p.waiting > 0 || p.steady(slice_idle_ns))
                });
                // Its queue's place: a queue busy again starts at the class's clock.
                let start = if own.waiting == 0 && holder.map(|h| h.0) != Some(entry.pid) {
                    own.start_v.max(self.clock[class])
                } else {
                    own.start_v
                };
                let rounds = (own.total_ns + service)
                    .div_ceil(self.turn_ns(entry.weight).max(1))
                    .max(1);
                for (&pid, p) in &self.processes {
                    let holds = holder.is_some_and(|h| h.0 == pid);
                    if (p.waiting == 0 && !holds) || p.class as usize > class {
                        continue;
                    }
                    wait += if (p.class as usize) < class || pid == entry.pid {
                        p.total_ns
                    } else {
                        // Before its first turn: what is left of the holder's turn, or a turn
                        // of each queue ahead of it in virtual time; one turn each per later
                        // round of its own.
                        let first = match holder {
                            Some((h, until)) if h == pid => until - now_ns,
                            _ if (p.start_v, pid) < (start, entry.pid) && holder.map(|h| h.0) != Some(entry.pid) => {
                                self.turn_ns(p.weight)
                            }
                            _ => 0,
                        };
                        let turns = first + (rounds - 1) * self.turn_ns(p.weight);
                        // A steady submitter refills as it is served and uses its whole turn;
                        // another takes the time of what it has waiting.
                        if p.steady(slice_idle_ns) {
                            turns
                        } else {
                            p.total_ns.min(turns)
                        }
                    };
                }
            }
            Discipline::Bfq { .. } => {
                // Requests already on the drive do not delay it: a real device serves many
                // at once (its probed service time is what one costs in their company).
                wait = 0;
                let own = self.processes.get(&entry.pid).copied().unwrap_or_default();
                if self.served_promptly(now_ns, entry) {
                    return Prediction {
                        wait_ns: own.total_ns,
                        service_ns: service,
                    };
                }
                let holder = self.holder(now_ns);
                let start = if own.waiting == 0 && holder.map(|h| h.0) != Some(entry.pid) {
                    own.start_v.max(self.clock[class])
                } else {
                    own.start_v
                };
                let finish = start + (own.total_ns + service) as f64 / entry.weight.max(1) as f64;
                // The holder's turn, if it is of its class or a higher one (a lower class's
                // turn ends when it arrives).
                if let Some((h, until)) = holder {
                    if h != entry.pid && !self.preempts(entry, h) {
                        wait += until - now_ns;
                    }
                }
                for (&pid, p) in &self.processes {
                    if p.waiting == 0 || pid == entry.pid || holder.is_some_and(|h| h.0 == pid) {
                        continue;
                    }
                    let c = p.class as usize;
                    let ahead =
                        c < class || (c == class && p.start_v + (p.total_ns as f64 / p.weight.max(1) as f64) < finish);
                    if ahead {
                        // A steady queue keeps its turn for the whole timeout.
                        wait += if p.steady(self.slice_idle_ns()) {
                            self.turn_ns(p.weight)
                        } else {
                            p.total_ns
                        };
                    }
                }
                wait += own.total_ns;
            }
            Discipline::Deadline {
                fifo_batch,
                writes_starved,
            } => {
                let dir = entry.write as usize;
                for c in 0..class {
                    wait += self.sorted[c].iter().flat_map(|d| d.values()).sum::<u64>();
                }
                let ahead = &self.sorted[class][dir];
                let span = |from: u64, to: u64| -> (u64, u64) {
                    ahead
                        .range((from, 0)..(to, 0))
                        .fold((0, 0), |(n, t), (_, &s)| (n + 1, t + s))
                };
                // The sweep goes up from where it stands; one behind it waits for the rest
                // of the sweep, then the next batch starts at the oldest request and goes up.
                let (n, t) = if entry.offset >= self.position {
                    span(self.position, entry.offset)
                } else {
                    let (n1, t1) = span(self.position, u64::MAX);
                    let restart = self.fifo[class][dir].values().next().copied().unwrap_or(0);
                    let (n2, t2) = if entry.offset >= restart {
                        span(restart, entry.offset)
                    } else {
                        span(0, entry.offset)
                    };
                    (n1 + n2, t1 + t2)
                };
                wait += t;
                // Requests of the other direction get a batch now and then: writes after every
                // `writes_starved` read batches, reads at once after a write batch.
                let other = &self.sorted[class][1 - dir];
                if !other.is_empty() {
                    let batches = if entry.write {
                        1
                    } else {
                        n / (fifo_batch.max(1) as u64 * writes_starved.max(1) as u64)
                    };
                    let count = other.len() as u64;
                    let mean = other.values().sum::<u64>() / count;
                    wait += (batches * fifo_batch as u64).min(count) * mean;
                }
            }
        }
        Prediction {
            wait_ns: wait,
            service_ns: service,
        }
    }

    /// `entry` entered the scheduler at `now_ns`, predicted as `prediction`; with a deadline
    /// (ns from now), it is watched for late cancellation. Pushes back the waiting I/Os it
    /// will be served before.
    pub fn insert(&mut self, now_ns: u64, entry: Entry, prediction: Prediction, deadline_ns: Option<u64>) {
        let class = entry.class.min(2) as usize;
        let service = prediction.service_ns;
        // Lower classes wait for it. (Not its own class: charging each arrival to every
        // waiting I/O of the class cancelled reads a steady neighbour never delayed, and
        // learning the average stretch from completed waits did not change a decision.)
        for c in class + 1..3 {
            self.debt[c] += service as i64;
        }
        // A higher class ends a lower class's turn (bfq expires the in-service queue; the
        // kernel's bfq also for a higher weight in the class).
        if let Some((holder, _)) = self.turn {
            let ends = match self.discipline {
                Discipline::Bfq { .. } => holder != entry.pid && self.preempts(&entry, holder),
                _ => self.processes.get(&holder).is_some_and(|h| (h.class as usize) > class),
            };
            if ends {
                self.turn = None;
            }
        }
        // As the scheduler: a queue that is empty and not holding the drive is busy again.
        let holds = matches!(self.turn, Some((pid, _)) if pid == entry.pid);
        let clock = self.clock[class];
        let p = self.processes.entry(entry.pid).or_insert(Process {
            class: class as u8,
            weight: entry.weight,
            start_v: clock,
            think_ns: f64::INFINITY,
            ..Process::default()
        });
        if p.waiting == 0 {
            if let Some(done) = p.last_done_ns.take() {
                let think = now_ns.saturating_sub(done) as f64;
                p.think_ns = if p.think_ns.is_finite() {
                    p.think_ns + THINK_WEIGHT * (think - p.think_ns)
                } else {
                    think
                };
            }
        }
        if p.waiting == 0 && !holds {
            p.start_v = p.start_v.max(clock);
        }
        p.class = class as u8;
        p.weight = entry.weight;
        p.total_ns += service;
        p.waiting += 1;
        if let Discipline::Deadline { .. } = self.discipline {
            let dir = entry.write as usize;
            if !entry.write {
                self.bump_sweep(class, entry.offset, service);
            }
            self.sorted[class][dir].insert((entry.offset, entry.id), service);
            self.fifo[class][dir].insert((now_ns, entry.id), entry.offset);
        }
        let watch = deadline_ns.map(|d| {
            let tolerable = d as i64 - prediction.total_ns() as i64;
            // The debt already counts this arrival; the key holds the debt after it.
            let key = tolerable + self.debt[class];
            self.watch[class].insert((key, entry.id), ());
            key
        });
        self.waiting.insert(
            entry.id,
            Waiting {
                entry,
                service_ns: service,
                inserted_ns: now_ns,
                watch,
            },
        );
    }

    /// mq-deadline: a read of `class` arriving at `offset` is served before the watched reads
    /// of its class the sweep reaches after it: their tolerable time shrinks by its `service`.
    /// Found by walking the watched reads (only reads with deadlines are watched: few).
    fn bump_sweep(&mut self, class: usize, offset: u64, service: u64) {
        let position = self.position;
        // Distance along the sweep: up from where it stands, then from the bottom.
        let rank = |x: u64| x.wrapping_sub(position);
        let behind: Vec<(i64, u64)> = self.watch[class]
            .keys()
            .filter(|&&(_, id)| {
                self.waiting
                    .get(&id)
                    .is_some_and(|w| rank(w.entry.offset) > rank(offset))
            })
            .copied()
            .collect();
        for (key, id) in behind {
            self.watch[class].remove(&(key, id));
            let key = key - service as i64;
            self.watch[class].insert((key, id), ());
            if let Some(w) = self.waiting.get_mut(&id) {
                w.watch = Some(key);
            }
        }
    }

    fn forget(&mut self, id: u64) -> Option<Waiting> {
        let w = self.waiting.remove(&id)?;
        let class = w.entry.class.min(2) as usize;
        if let Some(p) = self.processes.get_mut(&w.entry.pid) {
            p.total_ns = p.total_ns.saturating_sub(w.service_ns);
            p.waiting = p.waiting.saturating_sub(1);
        }
        let dir = w.entry.write as usize;
        self.sorted[class][dir].remove(&(w.entry.offset, id));
        self.fifo[class][dir].remove(&(w.inserted_ns, id));
        if let Some(key) = w.watch {
            self.watch[class].remove(&(key, id));
        }
        Some(w)
    }

    /// The drive started on `id` at `now_ns`.
    pub fn dispatch(&mut self, now_ns: u64, id: u64) {
        let Some(w) = self.forget(id) else { return };
        let service = self.profile.predict(self.head, w.entry.offset, w.entry.len);
        // From where the head really is the estimate differs from the one made at arrival:
        // everything waiting waits for the difference.
        let change = service as i64 - w.service_ns as i64;
        for d in &mut self.debt {
            *d += change;
        }
        self.on_drive = Some((id, now_ns + service));
        self.on_drive_start = now_ns;
        self.head = w.entry.offset.saturating_add(w.entry.len);
        self.position = self.head;
        let keep = match self.discipline {
            // Another queue's request while the holder's turn runs: injected, the turn stays.
            Discipline::Bfq { .. } => self.holder(now_ns).is_some(),
            _ => matches!(self.turn, Some((pid, until)) if pid == w.entry.pid && now_ns < until),
        };
        if !keep {
            self.turn = Some((w.entry.pid, now_ns + self.turn_ns(w.entry.weight)));
            if let Some(p) = self.processes.get(&w.entry.pid) {
                let class = p.class.min(2) as usize;
                self.clock[class] = self.clock[class].max(p.start_v);
            }
        }
        self.on_drive_pid = Some(w.entry.pid);
        if let Discipline::Bfq { .. } = self.discipline {
            self.in_flight.insert(id, (w.entry.pid, now_ns));
            self.last_served.insert(
                (w.entry.class.min(2), w.entry.weight),
                (now_ns, now_ns.saturating_sub(w.inserted_ns)),
            );
        }
    }

    /// The drive finished `id` at `now_ns`: everything waiting moves by the prediction's error.
    pub fn complete(&mut self, now_ns: u64, id: u64) {
        if let Discipline::Bfq { .. } = self.discipline {
            // Each request's time on the drive is charged to its own process.
            if let Some((pid, started)) = self.in_flight.remove(&id) {
                if let Some(p) = self.processes.get_mut(&pid) {
                    p.start_v += now_ns.saturating_sub(started) as f64 / p.weight.max(1) as f64;
                    p.last_done_ns = Some(now_ns);
                }
            }
            return;
        }
        if let Some((on, predicted_end)) = self.on_drive {
            if on == id {
                let late = now_ns as i64 - predicted_end as i64;
                for d in &mut self.debt {
                    *d += late;
                }
                self.on_drive = None;
                // Fair: charge the drive time it used to its process.
                if let Some(p) = self.on_drive_pid.take().and_then(|pid| self.processes.get_mut(&pid)) {
                    p.start_v += (now_ns - self.on_drive_start) as f64 / p.weight.max(1) as f64;
                    p.last_done_ns = Some(now_ns);
                }
            }
        }
    }

    /// `id` left the scheduler without being served (cancelled).
    pub fn remove(&mut self, id: u64) {
        self.forget(id);
    }

    /// Waiting I/Os whose tolerable time has gone negative: late cancellations (EBUSY). They
    /// leave the books; the caller takes them out of the scheduler.
    pub fn overdue(&mut self) -> Vec<u64> {
        let mut out = Vec::new();
        for class in 0..3 {
            while let Some((&(key, id), _)) = self.watch[class].iter().next() {
                if key >= self.debt[class] {
                    break;
                }
                out.push(id);
                self.forget(id);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iolearn_flash::sched::Disk;
    use iolearn_sim::device::DevicePreset;

    #[test]
    fn the_probed_profile_predicts_service_within_the_rotation_it_cannot_see() {
        let preset = DevicePreset::hdd();
        let mut probe_disk = Disk::new(preset.clone(), 7);
        let profile = probe_seek_profile(preset.capacity_bytes, 4, 10, 8, |o, l| probe_disk.serve(o, l, false));
        // Judged on another disk of the same model, other offsets.
        let mut disk = Disk::new(preset.clone(), 99);
        let mut rng = Rng::new(5);
        let (mut err, mut n) = (0f64, 0f64);
        for _ in 0..5000 {
            let head = disk.head();
            let off = rng.next_u64() % preset.capacity_bytes;
            let len = 4096 << rng.below(6);
            let predicted = profile.predict(head, off, len as u64) as f64;
            let actual = disk.serve(off, len as u64, false) as f64;
            err += (predicted - actual).abs();
            n += 1.0;
        }
        // Random rotation alone is off by a quarter turn on average (2.1 ms).
        let mean_err = err / n;
        assert!(mean_err < 2.6e6, "mean error {mean_err} ns");
        assert!(
            mean_err > 1.0e6,
            "a profile cannot see rotation: {mean_err} ns is too good"
        );
        assert!(
            (profile.per_kib_ns - 1e9 / 150e6 * 1024.0).abs() < 200.0,
            "{}",
            profile.per_kib_ns
        );
        // Short seeks stay short (a trace confined to a few GiB), long ones long.
        let (short, long) = (profile.predict(0, 64 << 20, 4096), profile.predict(0, 600 << 30, 4096));
        assert!(short + 8_000_000 < long, "64 MiB: {short} ns, 600 GiB: {long} ns");
    }

    fn flat_profile(ns: u64) -> SeekProfile {
        SeekProfile::flat(ns, 0.0)
    }

    /// `first` enters and goes straight to the drive at time 0.
    fn one_on_the_drive(books: &mut SchedBooks, first: Entry) {
        let p = books.predict(0, &first);
        books.insert(0, first, p, None);
        books.dispatch(0, first.id);
    }

    fn entry(id: u64, pid: u32, class: u8) -> Entry {
        Entry {
            id,
            pid,
            class,
            weight: 40,
            offset: id << 30,
            len: 4096,
            write: false,
        }
    }

    #[test]
    fn a_higher_class_arrival_cancels_a_waiting_read_late_once_its_tolerable_time_is_gone() {
        let ms = 1_000_000;
        let mut books = SchedBooks::new(
            Discipline::Fair {
                slice_ns: 100 * ms,
                slice_idle_ns: 8 * ms,
            },
            flat_profile(10 * ms),
        );
        // One request on the drive (10 ms), then a best-effort read with a 25 ms deadline:
        // predicted 20 ms, 5 ms to spare.
        let first = entry(1, 7, 1);
        one_on_the_drive(&mut books, first);
        let read = entry(2, 8, 1);
        let p = books.predict(0, &read);
        assert_eq!(p.total_ns(), 20 * ms);
        books.insert(0, read, p, Some(25 * ms));
        // A best-effort neighbour does not push it back; a real-time one (10 ms) does.
        let be = entry(3, 9, 1);
        let p = books.predict(0, &be);
        books.insert(0, be, p, None);
        assert!(books.overdue().is_empty());
        let rt = entry(4, 10, 0);
        let p = books.predict(0, &rt);
        assert_eq!(p.wait_ns, 10 * ms, "real time waits only for the drive");
        books.insert(0, rt, p, None);
        assert_eq!(books.overdue(), vec![2]);
        assert!(books.overdue().is_empty(), "cancelled once");
        assert_eq!(books.waiting(), 2);
    }

    #[test]
    fn a_drive_slower_than_predicted_pushes_waiting_reads_back() {
        let ms = 1_000_000;
        let mut books = SchedBooks::new(Discipline::Fifo, flat_profile(10 * ms));
        let first = entry(1, 7, 1);
        one_on_the_drive(&mut books, first);
        let read = entry(2, 8, 1);
        let p = books.predict(0, &read);
        books.insert(0, read, p, Some(24 * ms));
        books.complete(13 * ms, 1); // 3 ms late: 4 ms to spare become 1
        assert!(books.overdue().is_empty());
        books.dispatch(13 * ms, 2);
        assert!(books.overdue().is_empty(), "on the drive: no longer cancellable");
        // Had the first request run 5 ms late instead, the read would have been cancelled.
        let mut books = SchedBooks::new(Discipline::Fifo, flat_profile(10 * ms));
        one_on_the_drive(&mut books, first);
        let p = books.predict(0, &read);
        books.insert(0, read, p, Some(24 * ms));
        books.complete(15 * ms, 1);
        assert_eq!(books.overdue(), vec![2]);
    }

    #[test]
    fn in_a_sweep_only_arrivals_ahead_of_a_watched_read_push_it_back() {
        let ms = 1_000_000;
        let gib = 1u64 << 30;
        let mut books = SchedBooks::new(
            Discipline::Deadline {
                fifo_batch: 16,
                writes_starved: 2,
            },
            flat_profile(10 * ms),
        );
        let at = |id: u64, offset: u64| Entry {
            offset,
            ..entry(id, 7, 1)
        };
        one_on_the_drive(&mut books, at(1, 0)); // the sweep stands just past 0
        let read = at(2, 10 * gib);
        let p = books.predict(0, &read);
        assert_eq!(p.total_ns(), 20 * ms);
        // 5 ms to spare.
        books.insert(0, read, p, Some(25 * ms));
        // Beyond it in the sweep (and behind the head: the next sweep): no effect.
        for (id, offset) in [(3, 20 * gib), (4, 0)] {
            let e = at(id, offset);
            let p = books.predict(0, &e);
            books.insert(0, e, p, None);
            assert!(books.overdue().is_empty(), "arrival at {offset}");
        }
        // Between the head and it: served first, 10 ms, past its tolerable time.
        let e = at(5, 5 * gib);
        let p = books.predict(0, &e);
        assert_eq!(p.wait_ns, 10 * ms, "waits for the drive only");
        books.insert(0, e, p, None);
        assert_eq!(books.overdue(), vec![2]);
    }

    /// Books of the kernel's bfq: a 100 ms turn, 8 ms idling, 0.1 ms reads.
    fn bfq_books() -> SchedBooks {
        let ms = 1_000_000;
        SchedBooks::new(
            Discipline::Bfq {
                timeout_ns: 100 * ms,
                slice_idle_ns: 8 * ms,
            },
            flat_profile(ms / 10),
        )
    }

    /// A steady tenant thread `pid` of `weight` sending one read after another from `t` for
    /// `n` reads, each served in 0.1 ms; returns when it stopped.
    fn steady_reads(books: &mut SchedBooks, pid: u32, weight: u64, first_id: u64, t: u64, n: u64) -> u64 {
        let mut now = t;
        for k in 0..n {
            let e = Entry {
                weight,
                ..entry(first_id + k, pid, 1)
            };
            let p = books.predict(now, &e);
            books.insert(now, e, p, None);
            books.dispatch(now + 1_000, e.id);
            now += 100_000;
            books.complete(now, e.id);
            now += 10_000;
        }
        now
    }

    /// Four tenant threads (pids 1 to 4) of `weight` taking turns read by read from `t` until
    /// `until` (bfq injects the others while one holds the turn); returns when they stopped.
    fn four_tenants(books: &mut SchedBooks, weight: u64, t: u64, until: u64) -> u64 {
        let mut now = t;
        while now < until {
            for pid in 1..=4u32 {
                now = steady_reads(books, pid, weight, (now << 3) | pid as u64, now, 1);
            }
        }
        now
    }

    #[test]
    fn under_bfq_a_sparse_reader_waits_for_what_is_left_of_the_holders_turn_not_for_every_tenant() {
        let ms = 1_000_000;
        let mut books = bfq_books();
        // Four tenant threads take turns request by request (bfq injects the others while one
        // holds the turn): their dispatches do not start new turns.
        // 50 x 4 reads of 0.11 ms: 22 ms into the first tenant's 100 ms turn.
        let mut now = four_tenants(&mut books, 80, 0, 22 * ms);
        let store = entry(99_999, 77, 1);
        let p = books.predict(now, &store);
        let left = 100 * ms - now;
        assert!(
            p.wait_ns.abs_diff(left) < ms,
            "waits {} ns, the turn has {left} ns left",
            p.wait_ns
        );
        // Not four turns (bfq-like Fair's answer for four steady neighbours).
        assert!(p.wait_ns < 100 * ms);
        // The tenants go on past the end of the turn: the first read after it starts the next.
        now = four_tenants(&mut books, 80, now, 110 * ms);
        let p = books.predict(now, &store);
        assert!(
            p.wait_ns > 85 * ms && p.wait_ns < 95 * ms,
            "about 90 ms left of the new turn: {} ns",
            p.wait_ns
        );
    }

    #[test]
    fn under_bfq_a_higher_class_waits_for_nothing_of_a_lower_one() {
        let mut books = bfq_books();
        let now = steady_reads(&mut books, 1, 80, 1, 0, 20);
        let rt = Entry {
            weight: 80,
            ..entry(5_000, 9, 0)
        };
        assert_eq!(books.predict(now, &rt).wait_ns, 0, "real time goes first");
        let idle = entry(5_001, 10, 2);
        assert!(
            books.predict(now, &idle).wait_ns > 0,
            "idle waits for best effort's turn"
        );
    }

    #[test]
    fn under_bfq_reads_served_at_once_lately_predict_the_next_is_too_until_one_waits() {
        let ms = 1_000_000;
        let mut books = bfq_books();
        let mut now = four_tenants(&mut books, 80, 0, 22 * ms);
        let store = |id, pid| entry(id, pid, 1);
        assert!(books.predict(now, &store(9_000, 70)).wait_ns > 50 * ms, "a turn is on");
        // One of the store's reads cut in (bfq raised its queue): served 0.2 ms after arrival.
        let first = store(9_001, 71);
        let p = books.predict(now, &first);
        books.insert(now, first, p, None);
        books.dispatch(now + ms / 5, first.id);
        books.complete(now + ms / 2, first.id);
        now += ms;
        assert_eq!(
            books.predict(now, &store(9_002, 72)).wait_ns,
            0,
            "served at once lately"
        );
        // ... but not once one of them waits, nor long after.
        let stuck = store(9_003, 73);
        let p = books.predict(now, &stuck);
        books.insert(now, stuck, p, None);
        assert!(
            books.predict(now + ms, &store(9_004, 74)).wait_ns > 50 * ms,
            "one waits"
        );
        books.remove(stuck.id);
        now = four_tenants(&mut books, 80, now, now + 150 * ms);
        assert!(
            books.predict(now, &store(9_005, 75)).wait_ns > 10 * ms,
            "long ago: turns again"
        );
    }

    #[test]
    fn under_bfq_a_heavier_reader_does_not_wait_for_a_lighter_tenants_turn() {
        let ms = 1_000_000;
        let mut books = bfq_books();
        let now = four_tenants(&mut books, 40, 0, 22 * ms);
        let heavier = Entry {
            weight: 80,
            ..entry(99_999, 77, 1)
        };
        assert!(
            books.predict(now, &heavier).wait_ns < ms,
            "weight 80 preempts weight 40"
        );
        let lighter = Entry {
            weight: 20,
            ..entry(99_998, 78, 1)
        };
        assert!(
            books.predict(now, &lighter).wait_ns > 50 * ms,
            "weight 20 waits for the turn"
        );
    }
}
