//! The loaded probe (built only when the eBPF programs were compiled).

use crate::sys::{check_root_and_btf, kernel_dev};
use crate::{
    Counters, FileSums, OpenFileMode, PageSums, ProbeConfig, ProbeError, ProgramStats, RawEvent, TaskTimes, Window,
    LATENCY_BUCKETS, N_COUNTERS,
};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle, OpenObject, RingBuffer, RingBufferBuilder};
use std::collections::BTreeMap;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

#[allow(clippy::all, missing_docs, dead_code, non_camel_case_types)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/readahead.skel.rs"));
}
use skel::{ReadaheadSkel, ReadaheadSkelBuilder};

/// Attached eBPF programs; detached when dropped.
pub struct Probe {
    /// Borrows `*storage`: declared first, dropped first.
    skel: ManuallyDrop<ReadaheadSkel<'static>>,
    storage: *mut MaybeUninit<OpenObject>,
    slot: u32,
    file_key_size: usize,
    /// Keeps the kernel's per-program run-time accounting on while open.
    stats_fd: Option<OwnedFd>,
    /// Words of the process bitmap (`tgid_bits`): pids below 64 times this can be watched.
    pid_words: u32,
    /// Whether the page-cache programs are attached.
    observing: bool,
    /// The ring buffer's reader, set up at the first drain and kept: building one maps the
    /// ring and makes an epoll set, too slow to do per drain for a prefetcher that drains
    /// every few hundred microseconds.
    ring: Option<EventRing>,
}

/// A reader of the `events` ring buffer and what its callback collected.
struct EventRing {
    /// Declared first, dropped first: it polls `_map`'s descriptor.
    ring: RingBuffer<'static>,
    _map: MapHandle,
    got: std::sync::Arc<std::sync::Mutex<Vec<RawEvent>>>,
}

// The skeleton's raw pointers are only used through `&mut self`.
unsafe impl Send for Probe {}

fn denied(what: &str) -> impl Fn(libbpf_rs::Error) -> ProbeError + '_ {
    move |e| ProbeError::Denied(format!("{what}: {e}"))
}

impl Probe {
    /// Check privileges and BTF, load and attach the programs. Every program attaches to a
    /// raw tracepoint by its BTF id (or is an iterator): nothing is mounted, no tracefs needed.
    pub fn start(cfg: &ProbeConfig) -> Result<Probe, ProbeError> {
        check_root_and_btf()?;
        // Sized for the kernel's limit, not today's pid_max: it can be raised while we run,
        // and a pid namespace may have its own.
        let pid_words = PID_MAX_LIMIT / 64;
        // The skeleton borrows its object storage for its whole life: keep the storage on
        // the heap at a fixed address and free it after the skeleton (see Drop).
        let storage: *mut MaybeUninit<OpenObject> = Box::into_raw(Box::new(MaybeUninit::uninit()));
        // SAFETY: `storage` is a valid, exclusively owned allocation that outlives the
        // skeleton (freed in Drop after it, or below on error).
        let open = ReadaheadSkelBuilder::default().open(unsafe { &mut *storage });
        let result = (|| {
            let mut open = open.map_err(denied("opening the eBPF object"))?;
            let ro = &mut open.maps.rodata_data;
            ro.target_dev = cfg.device.map_or(0, kernel_dev);
            ro.filter_tgid = u8::from(cfg.filter_pids || !cfg.pids.is_empty());
            ro.raw_events = u8::from(cfg.raw_events);
            ro.count_reads = u8::from(cfg.count_reads);
            open.maps
                .tgid_bits
                .set_max_entries(pid_words)
                .map_err(denied("sizing the process bitmap"))?;
            // The block-request programs run twice per request (a hash update and delete, a
            // shared counter): loaded only when asked for.
            open.progs.on_rq_issue.set_autoload(cfg.block_requests);
            open.progs.on_rq_complete.set_autoload(cfg.block_requests);
            // It runs at the return of every system call of every task: only when asked for.
            open.progs.on_sys_exit.set_autoload(cfg.count_reads);
            let mut skel = open.load().map_err(denied("loading the eBPF programs"))?;
            skel.attach().map_err(denied("attaching to the tracepoints"))?;
            Ok(skel)
        })();
        let skel = match result {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: the skeleton (if any) is gone; nothing borrows the storage.
                unsafe { free_storage(storage) };
                return Err(e);
            }
        };
        let file_key_size = skel.maps.file_sums0.key_size() as usize;
        let mut p = Probe {
            skel: ManuallyDrop::new(skel),
            storage,
            slot: 0,
            file_key_size,
            stats_fd: None,
            pid_words,
            observing: true,
            ring: None,
        };
        for &pid in &cfg.pids {
            p.watch_pid(pid)?;
        }
        Ok(p)
    }

    /// Also watch process `pid` (when filtering by process).
    pub fn watch_pid(&mut self, pid: u32) -> Result<(), ProbeError> {
        self.set_watched(pid, true)
    }

    /// Stop watching process `pid` (it has exited or left the cgroup: its number may be
    /// reused by a process that is none of ours).
    pub fn unwatch_pid(&mut self, pid: u32) -> Result<(), ProbeError> {
        // Its count goes too: a reused pid starts from nothing (gone already is fine).
        let _ = self.skel.maps.reads_by_tgid.delete(&pid.to_ne_bytes());
        self.set_watched(pid, false)
    }

    /// Whether process `pid` is watched.
    pub fn watches(&self, pid: u32) -> Result<bool, ProbeError> {
        if pid / 64 >= self.pid_words {
            return Ok(false);
        }
        let word = self
            .pid_word(pid / 64)
            .map_err(|e| ProbeError::Map(format!("reading pid {pid}: {e}")))?;
        Ok(word >> (pid % 64) & 1 == 1)
    }

    /// Word `word` of the process bitmap (a word never written reads as zero).
    fn pid_word(&self, word: u32) -> Result<u64, libbpf_rs::Error> {
        let b = self.skel.maps.tgid_bits.lookup(&word.to_ne_bytes(), MapFlags::ANY)?;
        Ok(b.and_then(|b| b.try_into().ok()).map_or(0, u64::from_ne_bytes))
    }

    fn set_watched(&mut self, pid: u32, on: bool) -> Result<(), ProbeError> {
        let err = |e: String| ProbeError::Map(format!("{} pid {pid}: {e}", if on { "adding" } else { "removing" }));
        let word = pid / 64;
        if word >= self.pid_words {
            return Err(err(format!("above the kernel's pid limit ({})", self.pid_words * 64)));
        }
        // Only this process writes the bitmap (the programs read it): read, change, write back.
        let mut v = self.pid_word(word).map_err(|e| err(e.to_string()))?;
        if on {
            v |= 1 << (pid % 64);
        } else {
            v &= !(1 << (pid % 64));
        }
        self.skel
            .maps
            .tgid_bits
            .update(&word.to_ne_bytes(), &v.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| err(e.to_string()))
    }

    /// Observe the page cache (insertions, accesses, readahead decisions, and the reads'
    /// returns where counted) or stop: the programs are attached or detached, so while off
    /// they cost nothing at all, not even the call into an empty program. A tuner that has seen a window of nothing but cache hits
    /// can observe a slice of the next and scale what it saw. Block requests and the
    /// open-file iterator are not affected.
    pub fn observe_page_cache(&mut self, on: bool) -> Result<(), ProbeError> {
        if on == self.observing {
            return Ok(());
        }
        let skel = &mut *self.skel;
        let (p, l) = (&skel.progs, &mut skel.links);
        if on {
            // All or none: a failure part-way drops the links made so far.
            let attach = |prog: &libbpf_rs::ProgramMut<'_>| {
                prog.attach()
                    .map_err(|e| ProbeError::Denied(format!("attaching {}: {e}", prog.name().to_string_lossy())))
            };
            let links = (
                attach(&p.on_add)?,
                attach(&p.on_get_pages)?,
                attach(&p.on_fault)?,
                attach(&p.on_sync_ra)?,
                attach(&p.on_async_ra)?,
                if p.on_sys_exit.autoload() {
                    Some(attach(&p.on_sys_exit)?)
                } else {
                    None
                },
            );
            l.on_add = Some(links.0);
            l.on_get_pages = Some(links.1);
            l.on_fault = Some(links.2);
            l.on_sync_ra = Some(links.3);
            l.on_async_ra = Some(links.4);
            l.on_sys_exit = links.5;
        } else {
            // Dropping a link detaches its program.
            l.on_add = None;
            l.on_get_pages = None;
            l.on_fault = None;
            l.on_sync_ra = None;
            l.on_async_ra = None;
            l.on_sys_exit = None;
        }
        self.observing = on;
        Ok(())
    }

    /// Whether the page-cache programs are attached ([`Probe::observe_page_cache`]).
    pub fn observing_page_cache(&self) -> bool {
        self.observing
    }

    /// Close the current window: switch the programs to the other buffer, then read and clear
    /// the one they were filling.
    pub fn window(&mut self) -> Result<Window, ProbeError> {
        let done = self.slot;
        self.slot ^= 1;
        self.skel.maps.bss_data.window_slot = self.slot;
        let map_err = |e: libbpf_rs::Error| ProbeError::Map(e.to_string());
        let mut w = Window::default();
        // The device's sums, per CPU.
        let key = done.to_ne_bytes();
        let dev = &self.skel.maps.device_sums;
        if let Some(cpus) = dev.lookup_percpu(&key, MapFlags::ANY).map_err(map_err)? {
            for c in &cpus {
                w.device.merge(&decode_sums(c));
            }
            let zeros: Vec<Vec<u8>> = cpus.iter().map(|c| vec![0u8; c.len()]).collect();
            dev.update_percpu(&key, &zeros, MapFlags::ANY).map_err(map_err)?;
        }
        // Each file's.
        let files = if done == 0 {
            &self.skel.maps.file_sums0
        } else {
            &self.skel.maps.file_sums1
        };
        let keys: Vec<Vec<u8>> = files.keys().collect();
        for k in &keys {
            if k.len() != self.file_key_size {
                continue;
            }
            if let Some(cpus) = files.lookup_percpu(k, MapFlags::ANY).map_err(map_err)? {
                let mut s = PageSums::default();
                for c in &cpus {
                    s.merge(&decode_sums(c));
                }
                if s.n > 0 {
                    s.tgid = u32::from_ne_bytes(k[12..16].try_into().unwrap());
                    w.descriptions.push(FileSums {
                        ino: u64::from_ne_bytes(k[0..8].try_into().unwrap()),
                        dev: u32::from_ne_bytes(k[8..12].try_into().unwrap()),
                        sums: s,
                    });
                }
            }
            let _ = files.delete(k); // gone already is fine
        }
        w.descriptions.sort_by_key(|f| (f.dev, f.ino, f.sums.tgid));
        w.files = merge_processes(&w.descriptions);
        w.counters = self.counters()?;
        w.pages_read_by_process = self.pages_read_by_process()?;
        w.latency_histogram = self.latency_histogram()?;
        Ok(w)
    }

    fn counters(&self) -> Result<Counters, ProbeError> {
        let mut v = [0u64; N_COUNTERS];
        for (i, slot) in v.iter_mut().enumerate() {
            *slot = sum_percpu_u64(&self.skel.maps.counters, i as u32)?;
        }
        Ok(Counters::from_array(&v))
    }

    /// Each process's pages read since the start (or since it was first seen again after the
    /// table made room): summed over CPUs.
    fn pages_read_by_process(&self) -> Result<BTreeMap<u32, u64>, ProbeError> {
        let map = &self.skel.maps.reads_by_tgid;
        let mut out = BTreeMap::new();
        for k in map.keys() {
            let Ok(key) = <[u8; 4]>::try_from(k.as_slice()) else {
                continue;
            };
            // Gone between the listing and the lookup (evicted): nothing to count.
            let Some(cpus) = map
                .lookup_percpu(&k, MapFlags::ANY)
                .map_err(|e| ProbeError::Map(e.to_string()))?
            else {
                continue;
            };
            let n = cpus
                .iter()
                .filter_map(|c| c.get(0..8)?.try_into().ok())
                .map(u64::from_ne_bytes)
                .sum();
            out.insert(u32::from_ne_bytes(key), n);
        }
        Ok(out)
    }

    fn latency_histogram(&self) -> Result<[u64; LATENCY_BUCKETS], ProbeError> {
        let mut h = [0u64; LATENCY_BUCKETS];
        for (i, slot) in h.iter_mut().enumerate() {
            *slot = sum_percpu_u64(&self.skel.maps.rq_latency, i as u32)?;
        }
        Ok(h)
    }

    /// Take the raw events waiting in the ring buffer (only with `raw_events`), waiting up to
    /// `timeout` for the first.
    pub fn drain_events(&mut self, timeout: Duration) -> Result<Vec<RawEvent>, ProbeError> {
        if self.ring.is_none() {
            let map = MapHandle::try_from(&self.skel.maps.events).map_err(|e| ProbeError::Map(e.to_string()))?;
            let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink = got.clone();
            let mut b = RingBufferBuilder::new();
            b.add(&map, move |data: &[u8]| {
                if let (Some(e), Ok(mut v)) = (RawEvent::decode(data), sink.lock()) {
                    v.push(e);
                }
                0
            })
            .map_err(|e| ProbeError::Map(e.to_string()))?;
            let ring = b.build().map_err(|e| ProbeError::Map(e.to_string()))?;
            self.ring = Some(EventRing { ring, _map: map, got });
        }
        let r = self.ring.as_ref().expect("set above");
        match r.ring.poll(timeout) {
            // A signal (the one that stops the caller, typically) ended the wait: what has
            // arrived is still taken.
            Err(e) if e.kind() == libbpf_rs::ErrorKind::Interrupted => {}
            r => r.map_err(|e| ProbeError::Map(e.to_string()))?,
        }
        r.ring.consume().map_err(|e| ProbeError::Map(e.to_string()))?;
        let mut got = r
            .got
            .lock()
            .map_err(|_| ProbeError::Map("the event list was poisoned".into()))?;
        Ok(std::mem::take(&mut *got))
    }
}

impl Probe {
    /// Turn on the kernel's run-time accounting of eBPF programs for as long as this probe
    /// lives (`BPF_ENABLE_STATS`: no sysctl is changed, it ends when the descriptor closes).
    pub fn enable_stats(&mut self) -> Result<(), ProbeError> {
        // SAFETY: plain syscall wrapper; the descriptor is owned below.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            return Err(ProbeError::Denied(format!(
                "BPF_ENABLE_STATS: {}",
                std::io::Error::from_raw_os_error(-fd)
            )));
        }
        // SAFETY: a fresh descriptor we own.
        self.stats_fd = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(())
    }

    /// The open files of the watched processes (every process when none is named) on the
    /// device, read now by the `iter/task_file` program.
    pub fn open_files(&mut self) -> Result<Vec<OpenFileMode>, ProbeError> {
        let buf = run_iterator(&self.skel.progs.open_files, "the open-file iterator")?;
        Ok(buf.chunks_exact(32).filter_map(OpenFileMode::decode).collect())
    }

    /// The CPU time of every thread of the watched processes (every process when none is
    /// named), read now by the `iter/task` program.
    pub fn task_times(&mut self) -> Result<Vec<TaskTimes>, ProbeError> {
        let buf = run_iterator(&self.skel.progs.task_times, "the task iterator")?;
        Ok(buf
            .chunks_exact(crate::TASK_TIMES_SIZE)
            .filter_map(TaskTimes::decode)
            .collect())
    }

    /// Run counts and kernel CPU time of each program (zeros unless stats are enabled).
    pub fn program_stats(&self) -> Vec<ProgramStats> {
        let p = &self.skel.progs;
        let progs: [(&str, &libbpf_rs::ProgramMut<'_>); 8] = [
            ("on_add", &p.on_add),
            ("on_get_pages", &p.on_get_pages),
            ("on_fault", &p.on_fault),
            ("on_sync_ra", &p.on_sync_ra),
            ("on_async_ra", &p.on_async_ra),
            ("on_rq_issue", &p.on_rq_issue),
            ("on_rq_complete", &p.on_rq_complete),
            ("on_sys_exit", &p.on_sys_exit),
        ];
        progs
            .iter()
            .filter(|(_, prog)| prog.autoload())
            .map(|(name, prog)| {
                // SAFETY: zeroed bpf_prog_info is a valid input; the kernel fills at most len.
                let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
                let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
                let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog.as_fd().as_raw_fd(), &mut info, &mut len) };
                let (runs, run_time_ns) = if rc == 0 {
                    (info.run_cnt, info.run_time_ns)
                } else {
                    (0, 0)
                };
                ProgramStats {
                    name: name.to_string(),
                    runs,
                    run_time_ns,
                }
            })
            .collect()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.ring = None;
        // SAFETY: the skeleton is dropped exactly once, before the storage it borrows.
        unsafe {
            ManuallyDrop::drop(&mut self.skel);
            free_storage(self.storage);
        }
    }
}

/// Free the skeleton's object storage. The skeleton (open or loaded) drops the object in
/// place when it goes, so the storage holds nothing to drop by then.
///
/// # Safety
/// `storage` came from `Box::into_raw` and nothing borrows it any more.
unsafe fn free_storage(storage: *mut MaybeUninit<OpenObject>) {
    drop(Box::from_raw(storage));
}

/// Run an iterator program once (`what` names it in errors) and return what it wrote.
fn run_iterator(prog: &libbpf_rs::ProgramMut<'_>, what: &str) -> Result<Vec<u8>, ProbeError> {
    use std::io::Read;
    let link = prog.attach().map_err(|e| ProbeError::Map(format!("{what}: {e}")))?;
    let mut it = libbpf_rs::Iter::new(&link).map_err(|e| ProbeError::Map(format!("{what}: {e}")))?;
    let mut buf = Vec::new();
    it.read_to_end(&mut buf)
        .map_err(|e| ProbeError::Map(format!("reading {what}: {e}")))?;
    Ok(buf)
}

fn sum_percpu_u64(map: &libbpf_rs::MapMut<'_>, key: u32) -> Result<u64, ProbeError> {
    let cpus = map
        .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
        .map_err(|e| ProbeError::Map(e.to_string()))?;
    Ok(cpus
        .unwrap_or_default()
        .iter()
        .map(|c| u64::from_ne_bytes(c[0..8].try_into().unwrap()))
        .sum())
}

/// Per-file sums from per-(file, process) sums sorted by file: the processes' streams merged
/// (as per-CPU sums are), owned by the process with the most pages.
fn merge_processes(descriptions: &[FileSums]) -> Vec<FileSums> {
    let mut out: Vec<FileSums> = Vec::new();
    let mut busiest = 0u64;
    for d in descriptions {
        match out.last_mut() {
            Some(f) if (f.dev, f.ino) == (d.dev, d.ino) => {
                let owner = if d.sums.n > busiest { d.sums.tgid } else { f.sums.tgid };
                busiest = busiest.max(d.sums.n);
                f.sums.merge(&d.sums);
                f.sums.tgid = owner;
            }
            _ => {
                busiest = d.sums.n;
                out.push(*d);
            }
        }
    }
    out
}

fn decode_sums(b: &[u8]) -> PageSums {
    let u = |i: usize| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    PageSums {
        n: u(0),
        sum: u(1),
        sum_sq: u(2),
        min: u(3),
        max: u(4),
        sum_abs_delta: u(5),
        last: u(6),
        tgid: u32::from_ne_bytes(b[56..60].try_into().unwrap()),
        first: u(8),
        first_ns: u(9),
        last_ns: u(10),
        prev_jump: u(11) as i64,
        jumps: u(12),
        jump_pairs: u(13),
        jump_same: u(14),
    }
}

/// The kernel's largest process id plus one, whatever `/proc/sys/kernel/pid_max` says
/// (`PID_MAX_LIMIT` on 64-bit): the bitmap is 512 KiB.
const PID_MAX_LIMIT: u32 = 4 << 20;
