//! MittCFQ's successor on real devices: a replicated store of block devices (loop devices
//! here) behind the kernel's own bfq or mq-deadline, other tenants' reads on them at their own
//! I/O priorities, and a client whose gets go to a replica and may fail over, as the simulated
//! mix (`iolearn_tail::mix`) does.
//!
//! The predictor is `iolearn_policy::mittsched::SchedBooks`, one per device, fed by the block
//! layer's own events (`iolearn_probe::sched`: every request entering the scheduler with its
//! thread and priority, its issue to the driver, its completion) and a service time probed on
//! the device before the run. A store thread asks its device's books just before it submits a
//! read; with MittOS, a predicted wait past the deadline is answered EBUSY at once and the
//! client fails over. There is no late cancellation here: the kernel cannot take a request back
//! out of bfq.

use crate::noise::{self, set_ioprio, Noise, NoiseConfig};
use crate::{open_replica, AlignedBuf, Error, ALIGN};
use iolearn_ml::Rng;
use iolearn_policy::mittsched::{Discipline, SchedBooks, SeekProfile};
use iolearn_probe::sched::{SchedKind, SchedWatch};
use iolearn_probe::{active_scheduler, DeviceId};
use iolearn_tail::mix::books_entry;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use iolearn_flash::sched::Prio;

/// An I/O priority written `rt0`..`rt7`, `be0`..`be7` or `idle` (ionice's classes and levels;
/// idle is taken at level 7, the lowest weight).
pub fn parse_prio(s: &str) -> Result<Prio, String> {
    let bad = || format!("{s:?}: an I/O priority is rt0 to rt7, be0 to be7, or idle");
    if s == "idle" {
        return Ok(Prio::from_kernel(3, 7));
    }
    let (class, level) = if let Some(l) = s.strip_prefix("rt") {
        (1, l)
    } else if let Some(l) = s.strip_prefix("be") {
        (2, l)
    } else {
        return Err(bad());
    };
    let level: u8 = level.parse().map_err(|_| bad())?;
    if level > 7 {
        return Err(bad());
    }
    Ok(Prio::from_kernel(class, level))
}

/// What the client does with a get.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Strategy {
    /// Served where it goes first.
    Base,
    /// A second copy to the next replica after `after_ns` without an answer; the first
    /// answer counts.
    Hedged {
        /// Delay before the copy, ns.
        after_ns: u64,
    },
    /// MittOS: a replica whose books predict the read would finish past the deadline answers
    /// EBUSY at once and the client tries the next; the last replica takes it regardless.
    Mitt {
        /// Deadline, ns.
        deadline_ns: u64,
    },
    /// MittOS with EBUSY carrying the expected wait: every replica is asked with the
    /// deadline, and when all are busy the read goes to the least busy.
    MittWait {
        /// Deadline, ns.
        deadline_ns: u64,
    },
}

impl Strategy {
    /// `base`, `hedged:MS`, `mitt:MS`, `mitt-wait:MS` (MS in milliseconds, 0.001 to 60000).
    pub fn parse(s: &str) -> Result<Strategy, String> {
        if s == "base" {
            return Ok(Strategy::Base);
        }
        let (name, ms) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: a strategy is base, hedged:MS, mitt:MS or mitt-wait:MS"))?;
        let ms: f64 = ms
            .parse()
            .ok()
            .filter(|v: &f64| (0.001..=60_000.0).contains(v))
            .ok_or_else(|| format!("{s:?}: MS is a number of milliseconds, 0.001 to 60000"))?;
        let ns = (ms * 1e6) as u64;
        match name {
            "hedged" => Ok(Strategy::Hedged { after_ns: ns }),
            "mitt" => Ok(Strategy::Mitt { deadline_ns: ns }),
            "mitt-wait" => Ok(Strategy::MittWait { deadline_ns: ns }),
            _ => Err(format!(
                "{s:?}: unknown strategy {name:?} (base, hedged:MS, mitt:MS, mitt-wait:MS)"
            )),
        }
    }

    fn deadline_ns(self) -> Option<u64> {
        match self {
            Strategy::Mitt { deadline_ns } | Strategy::MittWait { deadline_ns } => Some(deadline_ns),
            _ => None,
        }
    }
}

/// Another tenant on some replicas: `threads` threads of `kib` random reads at `prio`, busy a
/// `fraction` of the time in periods of mean `period_ms` (1.0: always).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tenant {
    /// Reader threads (1 to 64).
    pub threads: usize,
    /// Read size, KiB.
    pub kib: u32,
    /// Their I/O priority.
    pub prio: Prio,
    /// Share of time busy, (0, 1].
    pub fraction: f64,
    /// Mean busy period, ms.
    pub period_ms: f64,
}

/// The store, its load and its neighbours.
#[derive(Debug, Clone)]
pub struct MixOptions {
    /// Block devices, one per replica (2 to 8).
    pub replicas: Vec<PathBuf>,
    /// The client's strategy.
    pub strategy: Strategy,
    /// Gets per second, all replicas together (Poisson arrivals).
    pub gets_per_s: f64,
    /// Bytes one get reads (a multiple of 4 KiB).
    pub get_bytes: u64,
    /// Store threads per replica, each one read at a time.
    pub store_threads: usize,
    /// The store's I/O priority.
    pub store_prio: Prio,
    /// Gets read uniformly from the first `data_bytes` of each replica (0: all of it).
    pub data_bytes: u64,
    /// Every get tries this replica first (MittOS's microbenchmarks); `None`: a random one.
    pub first: Option<usize>,
    /// Other tenants, and the replicas they run on.
    pub tenant: Option<(Tenant, Vec<usize>)>,
    /// An EBUSY's round trip and the retry's trip to the next replica, us.
    pub failover_us: f64,
    /// Gets arrive for this long, s.
    pub duration_s: f64,
    /// Gets arriving in the first `warmup_s` are not recorded.
    pub warmup_s: f64,
    /// Seed of the arrivals, offsets, replica choices and noise phases.
    pub seed: u64,
}

/// One get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetRecord {
    /// When it was due, since the start, ns.
    pub due_ns: u64,
    /// From due to its answer, ns.
    pub latency_ns: u64,
    /// The replica it tried first.
    pub first: u32,
    /// The replica whose answer counted.
    pub served_by: u32,
    /// EBUSY answers.
    pub ebusy: u32,
    /// Extra copies sent (hedging).
    pub duplicates: u32,
    /// At its first try: the books' predicted wait plus service, ns.
    pub predicted_ns: u64,
    /// At its first try, if served there: the read's time in the kernel, ns (0 otherwise).
    pub actual_ns: u64,
    /// How late a client took it up (every client busy), ns: part of its latency.
    pub lag_ns: u64,
}

/// What a run did besides the gets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MixReport {
    /// Each replica's scheduler (as sysfs names it) and the books' discipline.
    pub schedulers: Vec<String>,
    /// Each replica's probed 4 KiB read, ns, and cost per further KiB.
    pub profile: Vec<(u64, f64)>,
    /// Scheduler events seen: inserts, issues, completions, merges.
    pub events: [u64; 4],
    /// Events the ring buffer lost.
    pub lost: u64,
    /// Requests still in the books at the end (inserted, never seen leaving).
    pub stale: usize,
    /// Median time of one prediction (lock and walk), ns.
    pub predict_ns_p50: u64,
    /// Wall time, s.
    pub wall_s: f64,
}

/// `CLOCK_MONOTONIC` in ns: the clock of `bpf_ktime_get_ns`, which the books' events carry.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn gettid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::gettid() as u32 }
}

/// The block device behind `path` (it must be one).
fn device_of(path: &Path) -> Result<DeviceId, Error> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(path).map_err(|e| Error(format!("{}: {e}", path.display())))?;
    if !m.file_type().is_block_device() {
        return Err(Error(format!(
            "{}: not a block device (the books follow a device's scheduler: name a loop device or a disk)",
            path.display()
        )));
    }
    Ok(DeviceId {
        major: libc::major(m.rdev()),
        minor: libc::minor(m.rdev()),
    })
}

/// The scheduler sysfs shows for `name` (the bracketed one) and its settings as the books
/// need them.
fn discipline_of(name: &str) -> Result<(String, Discipline), Error> {
    let q = PathBuf::from("/sys/block").join(name).join("queue");
    let sched = active_scheduler(name).map_err(|e| Error(format!("{}/scheduler: {e}", q.display())))?;
    let read = |f: &str| std::fs::read_to_string(q.join(f)).map(|s| s.trim().to_string());
    let num = |f: &str, default: u64| {
        read(&format!("iosched/{f}"))
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let d = match sched.as_str() {
        // bfq's turn of a sync queue (`timeout_sync`, ms) and its idling (`slice_idle`, ms).
        "bfq" => Discipline::Bfq {
            timeout_ns: num("timeout_sync", 125) * 1_000_000,
            slice_idle_ns: num("slice_idle", 8) * 1_000_000,
        },
        "mq-deadline" => Discipline::Deadline {
            fifo_batch: num("fifo_batch", 16) as u32,
            writes_starved: num("writes_starved", 2) as u32,
        },
        _ => Discipline::Fifo,
    };
    Ok((sched, d))
}

/// The device's cost of a 4 KiB read and per further KiB, probed alone before the run (reads
/// one at a time at random places): MittNOOP's profile, flat in distance (a loop device's
/// backing store does not seek).
fn probe_profile(file: &std::fs::File, path: &Path, size: u64, seed: u64) -> Result<(u64, f64), Error> {
    let mut rng = Rng::new(seed);
    let mut buf = AlignedBuf::new(64 << 10);
    let mut mean = |len: usize, n: usize| -> Result<u64, Error> {
        let mut t = Vec::with_capacity(n);
        for _ in 0..n {
            let off = rng.below(((size - len as u64) / ALIGN) as usize) as u64 * ALIGN;
            let s = monotonic_ns();
            match file.read_at(buf.slice(len), off) {
                Ok(got) if got == len => {}
                Ok(got) => {
                    return Err(Error(format!(
                        "{}: a {len}-byte read at {off} got {got}",
                        path.display()
                    )))
                }
                Err(e) => return Err(Error(format!("{}: reading at {off}: {e}", path.display()))),
            }
            t.push(monotonic_ns() - s);
        }
        t.sort_unstable();
        // The middle half: a probe read that met the host's own hiccup is not the device.
        let mid = &t[n / 4..n - n / 4];
        Ok(mid.iter().sum::<u64>() / mid.len() as u64)
    };
    let small = mean(4096, 200)?;
    let large = mean(64 << 10, 100)?;
    Ok((small, (large.saturating_sub(small)) as f64 / 60.0))
}

enum Answer {
    /// Served: the read's time in the kernel, ns.
    Done {
        replica: usize,
        actual_ns: u64,
        predicted_ns: u64,
    },
    /// EBUSY with the predicted wait, ns.
    Busy {
        replica: usize,
        wait_ns: u64,
        predicted_ns: u64,
    },
}

struct Job {
    offset: u64,
    /// With a deadline: EBUSY when the books predict it would be missed.
    deadline_ns: Option<u64>,
    reply: Sender<Answer>,
}

/// One replica's store: threads taking jobs from a shared queue.
struct Store {
    queue: Sender<Job>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// What went wrong in the store's threads (the run fails with it).
#[derive(Default)]
struct Faults {
    /// Threads that could not take the store's I/O priority.
    wrong_prio: AtomicUsize,
    /// Reads that failed or came back short, and the first one's error.
    failed_reads: AtomicUsize,
    first_error: Mutex<Option<String>>,
    /// The books were lost (their lock poisoned).
    books_lost: std::sync::atomic::AtomicBool,
}

fn start_store(
    replica: usize,
    file: Arc<std::fs::File>,
    books: Arc<Vec<Mutex<SchedBooks>>>,
    opts: &MixOptions,
    predict_times: Arc<Mutex<Vec<u64>>>,
    faults: Arc<Faults>,
) -> Store {
    let (tx, rx) = channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    let len = opts.get_bytes;
    let prio = opts.store_prio;
    let mut threads = Vec::new();
    for _ in 0..opts.store_threads {
        let (rx, file, books, times) = (rx.clone(), file.clone(), books.clone(), predict_times.clone());
        let (faults, path) = (faults.clone(), opts.replicas[replica].clone());
        threads.push(std::thread::spawn(move || {
            // A store thread without its priority would not be the store asked for: it still
            // serves (the gets must be answered), and the run fails at the end.
            if set_ioprio(prio.ioprio()).is_err() {
                faults.wrong_prio.fetch_add(1, Ordering::Relaxed);
            }
            let tid = gettid();
            let mut buf = AlignedBuf::new(len as usize);
            let mut mine = Vec::new();
            loop {
                let job = match rx.lock().map(|r| r.recv()) {
                    Ok(Ok(j)) => j,
                    _ => break,
                };
                let entry = books_entry(u64::MAX, tid, prio, job.offset, len, false);
                let t0 = monotonic_ns();
                let Ok(p) = books[replica].lock().map(|b| b.predict(t0, &entry)) else {
                    // The watch's thread panicked holding the books: no prediction is left
                    // to trust. Stop serving; the run fails.
                    faults.books_lost.store(true, Ordering::Relaxed);
                    break;
                };
                let t1 = monotonic_ns();
                mine.push(t1 - t0);
                if let Some(d) = job.deadline_ns {
                    if p.total_ns() > d {
                        let _ = job.reply.send(Answer::Busy {
                            replica,
                            wait_ns: p.wait_ns,
                            predicted_ns: p.total_ns(),
                        });
                        continue;
                    }
                }
                let got = file.read_at(buf.slice(len as usize), job.offset);
                let actual = monotonic_ns() - t1;
                if !matches!(got, Ok(n) if n as u64 == len) {
                    faults.failed_reads.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut first) = faults.first_error.lock() {
                        first.get_or_insert_with(|| format!("{}: a read at {}: {got:?}", path.display(), job.offset));
                    }
                }
                // A copy nobody waits for any more (hedging) is dropped here.
                let _ = job.reply.send(Answer::Done {
                    replica,
                    actual_ns: actual,
                    predicted_ns: p.total_ns(),
                });
            }
            if let Ok(mut t) = times.lock() {
                t.extend(mine);
            }
        }));
    }
    Store { queue: tx, threads }
}

/// The noise threads of `t` with `seed`.
fn tenant_noise(t: &Tenant, seed: u64) -> NoiseConfig {
    NoiseConfig {
        threads: t.threads,
        busy_fraction: t.fraction,
        busy_ms: t.period_ms,
        io_kib: t.kib,
        seed,
        ioprio: Some(t.prio.ioprio()),
    }
}

/// Check every option; the error names it.
pub fn check(opts: &MixOptions) -> Result<(), Error> {
    let bad = |m: String| Err(Error(m));
    if !(2..=crate::MAX_REPLICAS).contains(&opts.replicas.len()) {
        return bad(format!(
            "replicas: {} (2 to {})",
            opts.replicas.len(),
            crate::MAX_REPLICAS
        ));
    }
    if !(opts.gets_per_s > 0.0 && opts.gets_per_s <= 1e6) {
        return bad(format!(
            "gets per second: {} (above 0, at most 1000000)",
            opts.gets_per_s
        ));
    }
    if opts.get_bytes == 0 || !opts.get_bytes.is_multiple_of(ALIGN) || opts.get_bytes > crate::MAX_IO {
        return bad(format!(
            "get size: {} bytes (a multiple of 4096, at most {})",
            opts.get_bytes,
            crate::MAX_IO
        ));
    }
    if !(1..=64).contains(&opts.store_threads) {
        return bad(format!("store threads: {} (1 to 64)", opts.store_threads));
    }
    if let Some(f) = opts.first {
        if f >= opts.replicas.len() {
            return bad(format!("first replica: {f} (0 to {})", opts.replicas.len() - 1));
        }
    }
    if let Some((t, on)) = &opts.tenant {
        if !(1..=64).contains(&t.threads) {
            return bad(format!("tenant threads: {} (1 to 64)", t.threads));
        }
        if !(1..=256).contains(&t.kib) {
            return bad(format!("tenant read size: {} KiB (1 to 256)", t.kib));
        }
        if on.is_empty() || on.iter().any(|&r| r >= opts.replicas.len()) {
            return bad(format!("tenant replicas: {on:?} (0 to {})", opts.replicas.len() - 1));
        }
        if on.iter().enumerate().any(|(i, r)| on[..i].contains(r)) {
            return bad(format!("tenant replicas: {on:?} (each at most once)"));
        }
        noise::check(&tenant_noise(t, 0))?;
    }
    if !(0.0..=1e6).contains(&opts.failover_us) {
        return bad(format!("failover: {} us (0 to 1000000)", opts.failover_us));
    }
    if !(opts.duration_s > 0.0 && opts.duration_s <= 86_400.0) {
        return bad(format!("duration: {} s (above 0, at most 86400)", opts.duration_s));
    }
    if !(0.0..opts.duration_s).contains(&opts.warmup_s) {
        return bad(format!("warm-up: {} s (0 to below the duration)", opts.warmup_s));
    }
    let gets = opts.gets_per_s * opts.duration_s;
    if gets > 50e6 {
        return bad(format!(
            "{gets:.0} gets (gets per second x duration): at most 50 million"
        ));
    }
    Ok(())
}

/// Run the store for `duration_s` and return every get after the warm-up.
pub fn run(opts: &MixOptions) -> Result<(Vec<GetRecord>, MixReport), Error> {
    check(opts)?;
    let n = opts.replicas.len();
    let mut files = Vec::new();
    let mut devs = Vec::new();
    let mut report = MixReport::default();
    let mut books = Vec::new();
    let mut size = u64::MAX;
    for (i, path) in opts.replicas.iter().enumerate() {
        let dev = device_of(path)?;
        let name = dev
            .name()
            .ok_or_else(|| Error(format!("{}: not under /sys/dev/block", path.display())))?;
        let (sched, discipline) = discipline_of(&name)?;
        let r = open_replica(path, false, false)?;
        size = size.min(r.size);
        let prof = probe_profile(&r.file, path, r.size, opts.seed.wrapping_add(i as u64))?;
        report.profile.push(prof);
        report.schedulers.push(format!("{name}: {sched}"));
        books.push(Mutex::new(SchedBooks::new(
            discipline,
            SeekProfile::flat(prof.0, prof.1),
        )));
        devs.push(dev);
        files.push(Arc::new(r.file));
    }
    let data = if opts.data_bytes == 0 {
        size
    } else {
        opts.data_bytes.min(size)
    };
    if data < opts.get_bytes + ALIGN {
        return Err(Error(format!(
            "data: {data} bytes, too small for {}-byte gets",
            opts.get_bytes
        )));
    }
    let books = Arc::new(books);
    let events = Arc::new(Mutex::new([0u64; 4]));
    let watch = {
        let (books, events) = (books.clone(), events.clone());
        SchedWatch::start(&devs, move |e| {
            if let Ok(mut c) = events.lock() {
                c[e.kind as usize] += 1;
            }
            let Some(Ok(mut b)) = books.get(e.device).map(|b| b.lock()) else {
                return;
            };
            match e.kind {
                SchedKind::Insert => {
                    let prio = Prio::from_kernel(e.class, e.level);
                    let entry = books_entry(e.id(), e.tid, prio, e.offset, e.len, e.write);
                    // An identity seen again (a request that left unseen): never counted twice.
                    b.remove(e.id());
                    let p = b.predict(e.ts_ns, &entry);
                    b.insert(e.ts_ns, entry, p, None);
                }
                SchedKind::Issue => b.dispatch(e.ts_ns, e.id()),
                SchedKind::Complete => b.complete(e.ts_ns, e.id()),
                SchedKind::Merged => b.remove(e.id()),
            }
        })
        .map_err(|e| Error(format!("the scheduler watch: {e}")))?
    };
    // Tenants start before the gets: the warm-up lets their queues settle.
    let mut tenants: Vec<Noise> = Vec::new();
    if let Some((t, on)) = &opts.tenant {
        for &r in on {
            let cfg = tenant_noise(t, opts.seed.wrapping_mul(31).wrapping_add(r as u64 * 1000 + 7));
            tenants.push(noise::start(&cfg, &opts.replicas[r], data)?);
        }
    }
    let predict_times = Arc::new(Mutex::new(Vec::new()));
    let faults = Arc::new(Faults::default());
    let stores: Vec<Store> = (0..n)
        .map(|r| {
            start_store(
                r,
                files[r].clone(),
                books.clone(),
                opts,
                predict_times.clone(),
                faults.clone(),
            )
        })
        .collect();
    let queues: Arc<Vec<Sender<Job>>> = Arc::new(stores.iter().map(|s| s.queue.clone()).collect());
    // The gets: Poisson arrivals, a random offset and an order of replicas each.
    let mut rng = Rng::new(opts.seed);
    let mut gets = Vec::new();
    let mut t = 0.0f64;
    let blocks = ((data - opts.get_bytes) / ALIGN) as usize;
    loop {
        t += -(1.0 - rng.next_f64()).ln() / opts.gets_per_s;
        if t >= opts.duration_s {
            break;
        }
        let first = opts.first.unwrap_or_else(|| rng.below(n));
        let mut order: Vec<usize> = (0..n).filter(|&r| r != first).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        order.insert(0, first);
        gets.push(((t * 1e9) as u64, rng.below(blocks + 1) as u64 * ALIGN, order));
    }
    let gets = Arc::new(gets);
    let next = Arc::new(AtomicUsize::new(0));
    let records = Arc::new(Mutex::new(Vec::with_capacity(gets.len())));
    let start = monotonic_ns();
    // Enough clients that a get rarely waits for one (each holds one get at a time): two
    // seconds of arrivals. A get taken up late says so (`lag_ns`).
    let clients = (opts.gets_per_s * 2.0).clamp(16.0, 2048.0) as usize;
    let mut handles = Vec::new();
    for _ in 0..clients {
        let (gets, next, queues, records) = (gets.clone(), next.clone(), queues.clone(), records.clone());
        let (strategy, failover) = (opts.strategy, Duration::from_nanos((opts.failover_us * 1e3) as u64));
        let warmup_ns = (opts.warmup_s * 1e9) as u64;
        handles.push(std::thread::spawn(move || loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some((due, offset, order)) = gets.get(k) else { break };
            let now = monotonic_ns() - start;
            if *due > now {
                std::thread::sleep(Duration::from_nanos(due - now));
            }
            let lag = now.saturating_sub(*due);
            let rec = serve(*due + start, *offset, order, strategy, failover, &queues);
            if *due >= warmup_ns {
                if let (Some(mut r), Ok(mut all)) = (rec, records.lock()) {
                    r.due_ns = *due;
                    r.lag_ns = lag;
                    all.push(r);
                }
            }
        }));
    }
    for h in handles {
        let _ = h.join();
    }
    report.wall_s = (monotonic_ns() - start) as f64 / 1e9;
    drop(queues);
    for s in stores {
        drop(s.queue);
        for t in s.threads {
            let _ = t.join();
        }
    }
    let wrong_tenants: usize = tenants.iter().map(Noise::wrong_priority).sum();
    drop(tenants);
    report.lost = watch.stop().map_err(|e| Error(format!("the scheduler watch: {e}")))?;
    report.events = *events.lock().map_err(|_| Error("event counts poisoned".into()))?;
    report.stale = books.iter().map(|b| b.lock().map_or(0, |b| b.waiting())).sum();
    if faults.books_lost.load(Ordering::Relaxed) {
        return Err(Error(
            "the scheduler's books were lost (the event thread failed)".into(),
        ));
    }
    let wrong = faults.wrong_prio.load(Ordering::Relaxed) + wrong_tenants;
    if wrong > 0 {
        return Err(Error(format!(
            "{wrong} threads could not take their I/O priority (ioprio_set): the run is not the one asked for"
        )));
    }
    let failed = faults.failed_reads.load(Ordering::Relaxed);
    if failed > 0 {
        let first = faults
            .first_error
            .lock()
            .ok()
            .and_then(|f| f.clone())
            .unwrap_or_default();
        return Err(Error(format!(
            "{failed} reads failed or came back short; the first: {first}"
        )));
    }
    let mut times = std::mem::take(&mut *predict_times.lock().map_err(|_| Error("timings poisoned".into()))?);
    times.sort_unstable();
    report.predict_ns_p50 = times.get(times.len() / 2).copied().unwrap_or(0);
    let mut records = std::mem::take(&mut *records.lock().map_err(|_| Error("records poisoned".into()))?);
    records.sort_by_key(|r| r.due_ns);
    Ok((records, report))
}

/// One get from `due` (monotonic ns) to its answer; `None` if the store stopped.
fn serve(
    due: u64,
    offset: u64,
    order: &[usize],
    strategy: Strategy,
    failover: Duration,
    queues: &[Sender<Job>],
) -> Option<GetRecord> {
    let (tx, rx): (Sender<Answer>, Receiver<Answer>) = channel();
    let send = |r: usize, deadline_ns: Option<u64>| {
        queues[r]
            .send(Job {
                offset,
                deadline_ns,
                reply: tx.clone(),
            })
            .ok()
    };
    let mut rec = GetRecord {
        due_ns: 0,
        latency_ns: 0,
        first: order[0] as u32,
        served_by: order[0] as u32,
        ebusy: 0,
        duplicates: 0,
        predicted_ns: 0,
        actual_ns: 0,
        lag_ns: 0,
    };
    // The first try's prediction and, if it served the get, its time in the kernel (a hedge's
    // copy elsewhere may answer first, MittOS-wait may come back to the first replica: neither
    // is the first try). A prediction is never 0 (it includes the read's service).
    let note = |a: &Answer, rec: &mut GetRecord| match *a {
        Answer::Done {
            replica,
            actual_ns,
            predicted_ns,
        } if replica == order[0] && rec.predicted_ns == 0 => {
            rec.predicted_ns = predicted_ns;
            rec.actual_ns = actual_ns;
        }
        Answer::Busy {
            replica, predicted_ns, ..
        } if replica == order[0] && rec.predicted_ns == 0 => rec.predicted_ns = predicted_ns,
        _ => {}
    };
    let deadline = strategy.deadline_ns();
    let last = order.len() - 1;
    match strategy {
        Strategy::Base => {
            send(order[0], None)?;
            let a = rx.recv().ok()?;
            note(&a, &mut rec);
        }
        Strategy::Hedged { after_ns } => {
            send(order[0], None)?;
            let a = match rx.recv_timeout(Duration::from_nanos((due + after_ns).saturating_sub(monotonic_ns()))) {
                Ok(a) => a,
                Err(RecvTimeoutError::Timeout) => {
                    send(order[1], None)?;
                    rec.duplicates = 1;
                    rx.recv().ok()?
                }
                Err(RecvTimeoutError::Disconnected) => return None,
            };
            note(&a, &mut rec);
            if let Answer::Done { replica, .. } = a {
                rec.served_by = replica as u32;
            }
        }
        Strategy::Mitt { .. } | Strategy::MittWait { .. } => {
            let wait_all = matches!(strategy, Strategy::MittWait { .. });
            let mut waits = Vec::new();
            let mut served = false;
            for (i, &r) in order.iter().enumerate() {
                // MittOS: the last replica takes it regardless; MittOS-wait asks it too.
                let must = i == last && !wait_all;
                send(r, if must { None } else { deadline })?;
                let a = rx.recv().ok()?;
                note(&a, &mut rec);
                match a {
                    Answer::Done { replica, .. } => {
                        rec.served_by = replica as u32;
                        served = true;
                        break;
                    }
                    Answer::Busy { replica, wait_ns, .. } => {
                        rec.ebusy += 1;
                        waits.push((wait_ns, replica));
                        std::thread::sleep(failover);
                    }
                }
            }
            if !served {
                // Every replica busy: the least busy takes it.
                let (_, r) = waits.into_iter().min()?;
                send(r, None)?;
                let a = rx.recv().ok()?;
                if let Answer::Done { replica, .. } = a {
                    rec.served_by = replica as u32;
                }
            }
        }
    }
    rec.latency_ns = monotonic_ns().saturating_sub(due);
    Some(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_and_strategies_parse_and_bad_ones_are_named() {
        assert_eq!(parse_prio("be4").unwrap().ioprio(), (2 << 13) | 4);
        assert_eq!(parse_prio("rt0").unwrap().ioprio(), 1 << 13);
        assert_eq!(parse_prio("idle").unwrap().ioprio(), (3 << 13) | 7);
        for bad in ["be8", "xx1", "be", "rt-1", ""] {
            assert!(parse_prio(bad).is_err(), "{bad}");
        }
        assert_eq!(Strategy::parse("base").unwrap(), Strategy::Base);
        assert_eq!(
            Strategy::parse("mitt:2.5").unwrap(),
            Strategy::Mitt { deadline_ns: 2_500_000 }
        );
        assert_eq!(
            Strategy::parse("hedged:1").unwrap(),
            Strategy::Hedged { after_ns: 1_000_000 }
        );
        for bad in ["mitt", "mitt:0", "mitt:nan", "hedge:1", "mitt-wait:1e9"] {
            let e = Strategy::parse(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn options_out_of_range_are_refused_by_name() {
        let ok = MixOptions {
            replicas: vec!["/dev/a".into(), "/dev/b".into()],
            strategy: Strategy::Base,
            gets_per_s: 100.0,
            get_bytes: 4096,
            store_threads: 8,
            store_prio: Prio::best_effort(4),
            data_bytes: 0,
            first: None,
            tenant: None,
            failover_us: 300.0,
            duration_s: 10.0,
            warmup_s: 1.0,
            seed: 1,
        };
        assert!(check(&ok).is_ok());
        let cases: Vec<(&str, MixOptions)> = vec![
            (
                "replicas",
                MixOptions {
                    replicas: vec!["/dev/a".into()],
                    ..ok.clone()
                },
            ),
            (
                "gets per second",
                MixOptions {
                    gets_per_s: f64::NAN,
                    ..ok.clone()
                },
            ),
            (
                "get size",
                MixOptions {
                    get_bytes: 1000,
                    ..ok.clone()
                },
            ),
            (
                "store threads",
                MixOptions {
                    store_threads: 0,
                    ..ok.clone()
                },
            ),
            (
                "first replica",
                MixOptions {
                    first: Some(2),
                    ..ok.clone()
                },
            ),
            (
                "warm-up",
                MixOptions {
                    warmup_s: 10.0,
                    ..ok.clone()
                },
            ),
            (
                "duration",
                MixOptions {
                    duration_s: -1.0,
                    ..ok.clone()
                },
            ),
            (
                "tenant replicas",
                MixOptions {
                    tenant: Some((
                        Tenant {
                            threads: 4,
                            kib: 4,
                            prio: Prio::best_effort(0),
                            fraction: 1.0,
                            period_ms: 100.0,
                        },
                        vec![5],
                    )),
                    ..ok.clone()
                },
            ),
        ];
        for (field, o) in cases {
            let e = check(&o).unwrap_err().0;
            assert!(e.starts_with(field), "{field}: {e}");
        }
    }
}
