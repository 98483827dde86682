//! `iolearn-replay`: the real I/O path of the tail-latency work. A block trace is replayed on
//! replica files or block devices (loop devices here, a user's SSDs elsewhere) with `O_DIRECT`
//! I/O through io_uring. Before each read enters a replica, the admission policy of
//! `iolearn-policy` decides from the same [`DeviceQueue`] view the simulator gives it; a
//! refused read fails over to another replica at once, and the client may hedge, clone or
//! time out, as in the simulator (`iolearn-tail`). Every I/O's latency is recorded.
//!
//! Like the simulated replicas, each replica replays its own copy of the trace shifted in time
//! ([`iolearn_tail::replicate`]). Writes are only replayed when allowed: on a real disk they
//! overwrite data.
#![deny(missing_docs)]

pub mod artc;
mod buf;
pub mod mix;
mod noise;
mod ring;

pub use buf::AlignedBuf;
pub use noise::{set_ioprio, Noise, NoiseConfig};

use iolearn_policy::admission::{Admission, DeviceQueue, FeatureSet, IoView};
use iolearn_tail::{replicate, Client, PolicySpec};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Alignment of `O_DIRECT` offsets, sizes and buffers.
pub const ALIGN: u64 = 4096;
/// Largest I/O replayed (larger ones are cut to this).
pub const MAX_IO: u64 = 256 << 10;

/// How to replay.
#[derive(Debug, Clone)]
pub struct Options {
    /// Replica files or block devices (2 or more for failover to mean anything).
    pub replicas: Vec<PathBuf>,
    /// The policy, `ADMISSION[+CLIENT][+rank]` (see `iolearn_tail::spec`).
    pub policy: String,
    /// Arrival times are divided by this (2.0: twice as fast).
    pub rate: f64,
    /// Replay writes (else they are skipped: they would overwrite a real disk's data).
    pub allow_writes: bool,
    /// Extra delay before a refused read is sent to the next replica (a network hop), us.
    pub failover_us: f64,
    /// I/Os in flight at most (io_uring entries and aligned buffers).
    pub depth: usize,
    /// Background contention on replica 0, if any.
    pub noise: Option<NoiseConfig>,
    /// Seed of the policy's and the client's randomness.
    pub seed: u64,
    /// Also return a training row per read (its features at its first replica).
    pub samples: bool,
    /// Buffered I/O through the page cache instead of `O_DIRECT`; policies then see whether
    /// a read's pages are resident (`mincore`), which MittCache (`+cache`) uses.
    pub buffered: bool,
}

/// Inputs in a training row: LinnOS's 31, ML-MittOS's 9, `iolearn-tail-v1`'s 13, in that order.
pub const SAMPLE_WIDTH: usize = 31 + 9 + 13;

/// A read's features at its first replica and the record it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Index into the records.
    pub record: usize,
    /// [`SAMPLE_WIDTH`] inputs.
    pub features: Vec<f32>,
}

/// One replayed I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// When it was due (since the start), ns.
    pub arrival_ns: u64,
    /// When it was submitted to its first replica (later than due when the ring was full), ns.
    pub issued_ns: u64,
    /// Its replica.
    pub primary: u32,
    /// The replica whose answer counted.
    pub served_by: u32,
    /// A write.
    pub write: bool,
    /// Offset on the replica, bytes.
    pub offset: u64,
    /// Size, bytes.
    pub size: u32,
    /// From due to answer, ns (0 if it failed).
    pub latency_ns: u64,
    /// EBUSY answers before it was served.
    pub revoked: u32,
    /// Extra copies sent.
    pub duplicates: u32,
    /// The kernel's error for a failed I/O (0: none).
    pub errno: i32,
}

/// What a replay did besides the records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Reads and writes replayed.
    pub ios: usize,
    /// Writes skipped (not allowed).
    pub writes_skipped: usize,
    /// I/Os that failed.
    pub errors: usize,
    /// Wall time, s.
    pub wall_s: f64,
    /// Median time the policy took per decision, ns.
    pub decision_ns_p50: f64,
    /// Decisions made.
    pub decisions: usize,
}

/// An error with the file or setting it concerns.
#[derive(Debug)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

fn err<T>(msg: impl Into<String>) -> Result<T, Error> {
    Err(Error(msg.into()))
}

/// An open replica.
struct Replica {
    file: File,
    /// Usable bytes (a multiple of [`ALIGN`]).
    size: u64,
    /// A read-only mapping for `mincore` (buffered mode).
    map: Option<Mapping>,
}

/// A read-only shared mapping of a replica: `mincore` on it says which pages are cached.
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    fn new(file: &File, len: u64, path: &std::path::Path) -> Result<Mapping, Error> {
        use std::os::unix::io::AsRawFd;
        // SAFETY: a fresh read-only shared mapping of an open file; unmapped in Drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return err(format!("{}: mmap: {}", path.display(), std::io::Error::last_os_error()));
        }
        Ok(Mapping { ptr, len: len as usize })
    }

    /// Every page of `offset..offset + len` is in the page cache.
    fn resident(&self, offset: u64, len: u32) -> bool {
        let page = 4096usize;
        let start = offset as usize / page * page;
        let end = ((offset + len as u64) as usize).min(self.len);
        if end <= start {
            return false;
        }
        let mut vec = vec![0u8; (end - start).div_ceil(page)];
        // SAFETY: the range lies inside the mapping; `vec` has one byte per page.
        let rc = unsafe { libc::mincore(self.ptr.cast::<u8>().add(start).cast(), end - start, vec.as_mut_ptr()) };
        rc == 0 && vec.iter().all(|b| b & 1 == 1)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

fn open_replica(path: &PathBuf, write: bool, buffered: bool) -> Result<Replica, Error> {
    use std::os::unix::fs::FileTypeExt;
    let mut flags = if buffered { 0 } else { libc::O_DIRECT };
    if write {
        // Writing replays overwrite data: never through a link, and a block device only when
        // nothing else holds it (O_EXCL on a block device fails with EBUSY while it is
        // mounted, part of a holder such as md or device-mapper, or opened exclusively).
        flags |= libc::O_NOFOLLOW;
        if std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device()) {
            flags |= libc::O_EXCL;
        }
    }
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EBUSY) => Error(format!(
                "{}: in use (mounted or held by another program); --allow-writes would overwrite its data",
                path.display()
            )),
            Some(libc::ELOOP) => Error(format!(
                "{}: a symbolic link; name the replica itself when writing to it",
                path.display()
            )),
            _ => Error(format!(
                "{}: {e} (replicas need O_DIRECT: a file on a local file system or a block device)",
                path.display()
            )),
        })?;
    let meta = file.metadata().map_err(|e| Error(format!("{}: {e}", path.display())))?;
    let size = if meta.file_type().is_file() {
        meta.len()
    } else {
        // A block device: its size from the end.
        use std::io::Seek;
        (&file)
            .seek(std::io::SeekFrom::End(0))
            .map_err(|e| Error(format!("{}: {e}", path.display())))?
    };
    let size = size / ALIGN * ALIGN;
    if size < MAX_IO {
        return err(format!(
            "{}: {size} bytes; a replica needs at least {MAX_IO}",
            path.display()
        ));
    }
    let map = if buffered {
        Some(Mapping::new(&file, size, path)?)
    } else {
        None
    };
    Ok(Replica { file, size, map })
}

/// Where and how much an I/O touches on a replica: aligned, inside it.
fn place(offset: u64, size: u32, replica_size: u64) -> (u64, u32) {
    let len = (size as u64).clamp(1, MAX_IO).div_ceil(ALIGN) * ALIGN;
    let span = replica_size - len;
    let off = (offset % (span + 1)) / ALIGN * ALIGN;
    (off, len as u32)
}

/// Per-request state.
#[derive(Clone, Copy)]
struct State {
    order: [u8; 8],
    attempt: u8,
    done: bool,
    latency_ns: u64,
    served_by: u32,
    revoked: u32,
    duplicates: u32,
    issued_ns: u64,
    errno: i32,
    /// Answers from a timed-out copy no longer count.
    abandoned_copy: Option<u32>,
    /// The replica that admitted the read (its first served attempt), whose completion the
    /// adaptive hedge learns from (a hedge that answers first would cut the latency short),
    /// as in the simulator.
    admitted_at: Option<u32>,
}

/// A timer: (due ns, sequence, kind, request, argument).
type Timer = (u64, u64, u8, u32, u8);

/// Timer kinds.
const T_ARRIVE: u8 = 0; // failover arrival, arg = attempt
const T_HEDGE: u8 = 1;
const T_TIMEOUT: u8 = 2;

/// The most replicas a replay drives (a read's failover order is a few bytes per I/O).
pub const MAX_REPLICAS: usize = 8;

/// Replay `ios` (`(arrival_ns, offset, size, write)`, any order) with `opts`. Returns every
/// I/O's record in due order and a report.
pub fn replay(ios: &[(u64, u64, u32, bool)], opts: &Options) -> Result<(Vec<Record>, Report, Vec<Sample>), Error> {
    if opts.replicas.is_empty() || opts.replicas.len() > MAX_REPLICAS {
        return err(format!(
            "replicas: {} given, 1 to {MAX_REPLICAS} needed",
            opts.replicas.len()
        ));
    }
    if !(opts.rate.is_finite() && opts.rate > 0.0) {
        return err(format!("rate: {} (must be > 0)", opts.rate));
    }
    if !(opts.failover_us.is_finite() && (0.0..=3.6e9).contains(&opts.failover_us)) {
        return err(format!("failover: {:?} us (0 to 3.6e9, an hour)", opts.failover_us));
    }
    let policy = iolearn_safeio::excerpt(&opts.policy, 60);
    let spec = PolicySpec::parse(&opts.policy).map_err(|e| Error(format!("policy {policy}: {e}")))?;
    let mut admission: Box<dyn Admission> = spec
        .build(opts.seed, Default::default(), opts.replicas.len())
        .map_err(|e| Error(format!("policy {policy}: {e}")))?;
    let needs = admission.needs();
    if needs.oracle || needs.white_box {
        return err(format!(
            "policy {policy}: needs the simulator's view of the device (a perfect predictor or a white box); a real device shows neither"
        ));
    }
    let replicas: Vec<Replica> = opts
        .replicas
        .iter()
        .map(|p| open_replica(p, opts.allow_writes, opts.buffered))
        .collect::<Result<_, _>>()?;
    let n = replicas.len();
    let mut requests = replicate(ios, n, opts.rate).map_err(Error)?;
    let writes_skipped = if opts.allow_writes {
        0
    } else {
        let before = requests.len();
        requests.retain(|r| !r.write);
        before - requests.len()
    };
    let depth = opts.depth.clamp(4, 4096);
    let mut ring = ring::Ring::new(depth)?;
    let noise = opts
        .noise
        .as_ref()
        .map(|c| noise::start(c, &opts.replicas[0], replicas[0].size))
        .transpose()?;
    let mut rng = iolearn_ml::Rng::new(opts.seed ^ 0x5eed);
    let mut states: Vec<State> = requests
        .iter()
        .map(|q| {
            let first = q.primary as usize % n;
            let mut rest: Vec<u8> = (0..n as u8).filter(|&r| r as usize != first).collect();
            rng.shuffle(&mut rest);
            let mut order = [0u8; 8];
            order[0] = first as u8;
            order[1..n].copy_from_slice(&rest);
            State {
                order,
                attempt: 0,
                done: false,
                latency_ns: 0,
                served_by: first as u32,
                revoked: 0,
                duplicates: 0,
                issued_ns: 0,
                errno: 0,
                abandoned_copy: None,
                admitted_at: None,
            }
        })
        .collect();
    let mut queues: Vec<DeviceQueue> = (0..n).map(|_| DeviceQueue::default()).collect();
    let mut timers: BinaryHeap<Reverse<Timer>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut decision_ns: Vec<u32> = Vec::with_capacity(requests.len());
    let mut samples: Vec<(usize, Vec<f32>)> = Vec::new();
    let failover_ns = (opts.failover_us * 1e3) as u64;
    let (mut reads_seen, mut hedges_sent) = (0u64, 0u64);
    let mut hedge_delay = iolearn_tail::HedgeDelay::new(spec.client);
    let mut next = 0usize;
    let mut open = requests.len();
    let start = Instant::now();
    let now = || start.elapsed().as_nanos() as u64;

    while open > 0 {
        let t = now();
        // Due arrivals and timers, in time order, while the ring has room.
        loop {
            if !ring.has_room() {
                break;
            }
            let arrival = requests.get(next).map(|q| q.arrival_ns).filter(|&a| a <= t);
            let timer = timers.peek().map(|Reverse(e)| e.0).filter(|&a| a <= t);
            let (qi, kind, arg) = match (arrival, timer) {
                (None, None) => break,
                (Some(a), Some(b)) if b < a => {
                    let Reverse((_, _, k, qi, arg)) = timers.pop().unwrap();
                    (qi as usize, k, arg)
                }
                (Some(_), _) => {
                    next += 1;
                    (next - 1, T_ARRIVE, 0)
                }
                (None, Some(_)) => {
                    let Reverse((_, _, k, qi, arg)) = timers.pop().unwrap();
                    (qi as usize, k, arg)
                }
            };
            let q = requests[qi];
            let st = &mut states[qi];
            if st.done && kind != T_ARRIVE {
                continue;
            }
            match kind {
                T_ARRIVE => {
                    let attempt = arg as usize;
                    let r = st.order[attempt] as usize;
                    if attempt == 0 {
                        st.issued_ns = t;
                    }
                    let (off, len) = place(q.offset, q.size, replicas[r].size);
                    if q.write {
                        ring.submit(&replicas[r].file, qi, r, off, len, true, &mut queues[r], t)?;
                        continue;
                    }
                    if attempt == 0 {
                        reads_seen += 1;
                    }
                    let last = attempt + 1 >= n;
                    if attempt == 0 && opts.samples {
                        // A training row: what the block layer knew at the read's first replica.
                        let view = queues[r].view(r as u32, t, off, len);
                        let mut row = vec![0f32; SAMPLE_WIDTH];
                        let mut at = 0;
                        for set in [FeatureSet::Linnos, FeatureSet::Mittos, FeatureSet::Tail] {
                            set.extract(&view, &mut row[at..at + set.dim()]);
                            at += set.dim();
                        }
                        samples.push((qi, row));
                    }
                    if !last {
                        let cached = replicas[r].map.as_ref().is_some_and(|m| m.resident(off, len));
                        let view = IoView {
                            cached,
                            ..queues[r].view(r as u32, t, off, len)
                        };
                        let clock = Instant::now();
                        let admitted = admission.admit(&view);
                        decision_ns.push(clock.elapsed().as_nanos().min(u32::MAX as u128) as u32);
                        if !admitted {
                            st.revoked += 1;
                            if spec.rank {
                                let best = (attempt + 1..n)
                                    .min_by(|&a, &b| {
                                        let (ra, rb) = (st.order[a], st.order[b]);
                                        let sa = admission.slowness(&queues[ra as usize].view(ra.into(), t, off, len));
                                        let sb = admission.slowness(&queues[rb as usize].view(rb.into(), t, off, len));
                                        sa.total_cmp(&sb)
                                    })
                                    .unwrap_or(attempt + 1);
                                st.order.swap(attempt + 1, best);
                            }
                            seq += 1;
                            timers.push(Reverse((t + failover_ns, seq, T_ARRIVE, qi as u32, arg + 1)));
                            continue;
                        }
                    }
                    st.attempt = attempt as u8;
                    st.served_by = r as u32;
                    st.admitted_at = Some(r as u32);
                    ring.submit(&replicas[r].file, qi, r, off, len, false, &mut queues[r], t)?;
                    let after = |d: u64| (q.arrival_ns + d).max(t);
                    match spec.client {
                        Client::Hedge { .. } if n > 1 => {
                            seq += 1;
                            timers.push(Reverse((after(hedge_delay.delay_ns()), seq, T_HEDGE, qi as u32, 0)));
                        }
                        Client::Timeout { after_ns } if n > 1 => {
                            seq += 1;
                            timers.push(Reverse((after(after_ns), seq, T_TIMEOUT, qi as u32, 0)));
                        }
                        Client::Clone if n > 1 => {
                            let other = st.order[(attempt + 1) % n] as usize;
                            st.duplicates += 1;
                            let (off, len) = place(q.offset, q.size, replicas[other].size);
                            ring.submit(&replicas[other].file, qi, other, off, len, false, &mut queues[other], t)?;
                        }
                        _ => {}
                    }
                }
                _ => {
                    // A hedge or a timeout retry to another replica.
                    if kind == T_HEDGE {
                        if let Client::Hedge { budget, .. } = spec.client {
                            if budget < 1.0 && hedges_sent as f64 + 1.0 > 10.0 + reads_seen as f64 * budget {
                                continue;
                            }
                        }
                        hedges_sent += 1;
                    }
                    let mut other = st.order[(st.attempt as usize + 1) % n] as usize;
                    if spec.rank {
                        other = (0..n)
                            .filter(|&r| r as u32 != st.served_by)
                            .min_by(|&a, &b| {
                                let sa = admission.slowness(&queues[a].view(a as u32, t, q.offset, q.size));
                                let sb = admission.slowness(&queues[b].view(b as u32, t, q.offset, q.size));
                                sa.total_cmp(&sb)
                            })
                            .unwrap_or(other);
                    }
                    st.duplicates += 1;
                    if kind == T_TIMEOUT {
                        st.abandoned_copy = Some(st.served_by);
                        st.served_by = other as u32;
                    }
                    let (off, len) = place(q.offset, q.size, replicas[other].size);
                    ring.submit(&replicas[other].file, qi, other, off, len, false, &mut queues[other], t)?;
                }
            }
        }
        // Completions.
        let next_due = [
            requests.get(next).map(|q| q.arrival_ns),
            timers.peek().map(|Reverse(e)| e.0),
        ]
        .into_iter()
        .flatten()
        .min();
        // A full ring waits for a completion; otherwise until the next I/O is due.
        let wait = if ring.has_room() {
            next_due.map(|d| d.saturating_sub(now()))
        } else {
            None
        };
        for c in ring.complete(wait)? {
            let t = now();
            queues[c.replica].finish(c.io_id, t);
            let q = requests[c.request];
            let st = &mut states[c.request];
            if !q.write && c.result >= 0 && st.admitted_at == Some(c.replica as u32) {
                hedge_delay.observe(t.saturating_sub(q.arrival_ns));
                st.admitted_at = None; // once
            }
            if st.done || st.abandoned_copy == Some(c.replica as u32) && st.served_by != c.replica as u32 {
                continue;
            }
            st.done = true;
            open -= 1;
            st.served_by = c.replica as u32;
            if c.result < 0 {
                st.errno = -c.result;
            } else {
                st.latency_ns = t.saturating_sub(q.arrival_ns);
            }
        }
    }
    let wall_s = start.elapsed().as_secs_f64();
    // Copies still in flight (hedges that lost): wait for them so the buffers are free.
    ring.drain()?;
    drop(noise);
    let records: Vec<Record> = requests
        .iter()
        .zip(&states)
        .map(|(q, s)| {
            let r = s.served_by as usize;
            let (off, len) = place(q.offset, q.size, replicas[r].size);
            Record {
                arrival_ns: q.arrival_ns,
                issued_ns: s.issued_ns,
                primary: q.primary,
                served_by: s.served_by,
                write: q.write,
                offset: off,
                size: len,
                latency_ns: s.latency_ns,
                revoked: s.revoked,
                duplicates: s.duplicates,
                errno: s.errno,
            }
        })
        .collect();
    decision_ns.sort_unstable();
    let report = Report {
        ios: records.len(),
        writes_skipped,
        errors: records.iter().filter(|r| r.errno != 0).count(),
        wall_s,
        decision_ns_p50: decision_ns.get(decision_ns.len() / 2).map_or(f64::NAN, |&v| v as f64),
        decisions: decision_ns.len(),
    };
    let samples = samples
        .into_iter()
        .map(|(record, features)| Sample { record, features })
        .collect();
    Ok((records, report, samples))
}

/// Wait granularity when nothing is in flight.
pub(crate) const IDLE_SPIN: Duration = Duration::from_micros(50);
