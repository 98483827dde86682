//! The discrete-event engine: workload threads play their page accesses against the page cache,
//! readahead and the device, on a virtual clock in nanoseconds.
//!
//! The engine is a pure state machine (style: raft-rs): [`Sim::run_until`] advances the clock;
//! between calls a controller may read [`Sim::drain_events`] and act through
//! [`Sim::set_device_read_ahead_kb`], [`Sim::set_file_ra_pages`] and [`Sim::fadvise`], the same
//! knobs the real tuner turns. All randomness comes from the seed in [`SimConfig`].

use crate::cache::{Evicted, PageCache, PageKey};
use crate::device::{Device, DevicePreset};
use crate::leap::LeapState;
use crate::readahead::{Advice, RaState, RaWindow};
use crate::workload::{AccessMode, DbShape, Generator, Op, WorkloadKind, PAGE_BYTES};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One workload thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSpec {
    /// What it runs.
    pub kind: WorkloadKind,
    /// How it reads (RocksDB `mmap_read` or `read()`).
    pub mode: AccessMode,
    /// Which database instance (threads of one instance share its files).
    pub db_instance: u32,
    /// The process it belongs to. Threads of one process share its open file descriptions
    /// (Linux keeps readahead state per description); each process opens the files itself, so
    /// a scanner and a random reader in two processes on one database each have their own
    /// readahead state, mappings and tuning. One process per database instance is the usual
    /// setup (`db_instance`).
    pub process: u32,
    /// Stop after this many operations (`None`: run until the end of the simulation).
    pub max_ops: Option<u64>,
}

/// A simulation's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// The device.
    pub device: DevicePreset,
    /// The device's `read_ahead_kb` at the start (files opened later copy it).
    pub read_ahead_kb: u64,
    /// Page cache capacity (memory left to the page cache under the cgroup limit).
    pub cache_bytes: u64,
    /// Database shape (each instance has its own files of this shape).
    pub db: DbShape,
    /// Workload threads.
    pub threads: Vec<ThreadSpec>,
    /// Seed of every random choice.
    pub seed: u64,
    /// CPU time of a page access that the kernel handles from the cache (read copy or
    /// minor fault).
    pub hit_ns: u64,
    /// Extra CPU time of a major fault or a read miss (the kernel's I/O path).
    pub miss_ns: u64,
    /// Record page events for feature extraction.
    pub record_events: bool,
}

impl SimConfig {
    /// The calibration setup of `shared/reference/calibration`: one db_bench thread over a
    /// 2.3 GiB database with mmap reads, about 850 MiB of page cache under the 1 GiB cgroup.
    pub fn calibration(kind: WorkloadKind, device: DevicePreset, read_ahead_kb: u64) -> Self {
        SimConfig {
            device,
            read_ahead_kb,
            cache_bytes: 850 << 20,
            db: DbShape::calibration(),
            threads: vec![ThreadSpec {
                kind,
                mode: AccessMode::Mmap,
                db_instance: 0,
                process: 0,
                max_ops: None,
            }],
            seed: 1,
            hit_ns: 150,
            miss_ns: 2_000,
            record_events: false,
        }
    }
}

/// What the kernel saw (the events KML's probes and our eBPF programs record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageEventKind {
    /// A page was added to the page cache (`filemap:mm_filemap_add_to_page_cache`).
    Added,
    /// A cached page was accessed through the kernel (a read or a minor fault).
    Accessed,
}

/// A page event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageEvent {
    /// Simulated time.
    pub time_ns: u64,
    /// File (the inode, for the real probes).
    pub file: u32,
    /// The process whose access caused it (the task the real probes see).
    pub process: u32,
    /// Page index in the file.
    pub index: u64,
    /// What happened.
    pub kind: PageEventKind,
}

/// Per-thread results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadStats {
    /// Operations completed.
    pub ops: u64,
    /// Time the thread finished its last operation.
    pub last_op_ns: u64,
    /// Page-cache misses (reads and faults that found no page).
    pub misses: u64,
    /// Accesses the kernel saw reach a readahead marker (Linux's asynchronous readahead; not
    /// under LEAP, which keeps Linux's readahead off).
    pub marker_hits: u64,
    /// Mapped accesses the kernel saw (to pages not yet mapped: faults), misses among them.
    pub faults: u64,
    /// Time spent waiting for the device: on misses, and on cached pages still being read.
    pub io_wait_ns: u64,
    /// Time spent in the application's own code (user mode): its operations' CPU time and
    /// loads from mapped pages, not the kernel's page-cache work on its behalf.
    pub user_ns: u64,
    /// The process the thread belongs to ([`ThreadSpec::process`]).
    pub process: u32,
}

#[derive(Debug, Clone)]
struct FileState {
    /// LEAP prefetches this file instead of Linux's readahead ([`Sim::set_leap`]).
    leap: Option<LeapState>,
}

/// One process's open file description of a file: its readahead state.
#[derive(Debug, Clone)]
struct Description {
    ra: RaState,
    /// A readahead set by a controller (per file or per description) overrides the device's.
    pinned: bool,
    /// Pinned by its process's value for files opened next ([`Sim::set_new_file_ra_pages`]),
    /// not by a decision of its own: the next such value replaces it (as the kernel tuner's
    /// `default_descs`).
    preset: bool,
    /// Accessed at least once (a process opens a file at its first access).
    opened: bool,
}

#[derive(Debug, Clone)]
struct Thread {
    spec: ThreadSpec,
    gen: Generator,
    op: Op,
    access: usize,
    page: u32,
    in_op: bool,
    clock_ns: u64,
    stats: ThreadStats,
    done: bool,
}

/// Spacing of files on the device (so disk seeks see distances).
const FILE_SPAN_BYTES: u64 = 256 << 20;
/// Pages mapped by one fault-around (`fault_around_bytes` = 64 KiB).
const FAULT_AROUND_PAGES: u64 = 16;

/// The simulation.
pub struct Sim {
    cfg: SimConfig,
    cache: PageCache,
    device: Device,
    files: Vec<FileState>,
    /// Per process, per file: `process * files.len() + file`.
    descriptions: Vec<Description>,
    files_per_instance: u32,
    threads: Vec<Thread>,
    queue: BinaryHeap<Reverse<(u64, u32)>>,
    now_ns: u64,
    device_ra_pages: u64,
    events: Vec<PageEvent>,
    evicted: Vec<Evicted>,
    page_accesses: u64,
    /// Per process: the readahead its newly opened files start with (`None`: the device's).
    new_file_ra: Vec<Option<u64>>,
    /// The process whose access is being played: the page events it causes are its own.
    acting: u32,
}

impl Sim {
    /// A simulation at time 0 with a cold cache.
    pub fn new(cfg: SimConfig) -> Self {
        let files_per_instance = cfg.db.files() + 1; // SSTs + the WAL
        let instances = cfg.threads.iter().map(|t| t.db_instance + 1).max().unwrap_or(1);
        let processes = cfg.threads.iter().map(|t| t.process + 1).max().unwrap_or(1);
        let device_ra_pages = cfg.read_ahead_kb / 4;
        let n_files = instances * files_per_instance;
        let files = (0..n_files).map(|_| FileState { leap: None }).collect();
        let descriptions = (0..processes * n_files)
            .map(|_| Description {
                ra: RaState::new(device_ra_pages),
                pinned: false,
                preset: false,
                opened: false,
            })
            .collect();
        let threads = cfg
            .threads
            .iter()
            .enumerate()
            .map(|(i, spec)| Thread {
                gen: Generator::new(
                    spec.kind,
                    cfg.db.clone(),
                    spec.mode,
                    cfg.seed.wrapping_add(i as u64 * 0x9E37),
                ),
                spec: spec.clone(),
                op: Op::default(),
                access: 0,
                page: 0,
                in_op: false,
                clock_ns: 0,
                stats: ThreadStats {
                    process: spec.process,
                    ..ThreadStats::default()
                },
                done: false,
            })
            .collect::<Vec<_>>();
        let mut queue = BinaryHeap::new();
        for i in 0..threads.len() {
            queue.push(Reverse((0, i as u32)));
        }
        Sim {
            cache: PageCache::new(cfg.cache_bytes / PAGE_BYTES),
            device: Device::new(cfg.device.clone()),
            files,
            descriptions,
            files_per_instance,
            threads,
            queue,
            now_ns: 0,
            device_ra_pages,
            events: Vec::new(),
            evicted: Vec::new(),
            page_accesses: 0,
            new_file_ra: vec![None; processes as usize],
            acting: 0,
            cfg,
        }
    }

    /// Current simulated time.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// The page cache.
    pub fn cache(&self) -> &PageCache {
        &self.cache
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Page accesses played so far (the simulator's speed unit).
    pub fn page_accesses(&self) -> u64 {
        self.page_accesses
    }

    /// Per-thread results.
    pub fn thread_stats(&self) -> Vec<ThreadStats> {
        self.threads.iter().map(|t| t.stats).collect()
    }

    /// Global file id of file `file` of database instance `instance`.
    pub fn file_id(&self, instance: u32, file: u32) -> u32 {
        instance * self.files_per_instance + file
    }

    /// Which database instance a global file id belongs to.
    pub fn instance_of(&self, file: u32) -> u32 {
        file / self.files_per_instance
    }

    /// Number of files (all instances).
    pub fn n_files(&self) -> u32 {
        self.files.len() as u32
    }

    /// The device's readahead in KiB.
    pub fn device_read_ahead_kb(&self) -> u64 {
        self.device_ra_pages * 4
    }

    /// Number of processes.
    pub fn n_processes(&self) -> u32 {
        self.new_file_ra.len() as u32
    }

    fn description(&self, process: u32, file: u32) -> &Description {
        &self.descriptions[process as usize * self.files.len() + file as usize]
    }

    fn description_mut(&mut self, process: u32, file: u32) -> &mut Description {
        let n = self.files.len();
        &mut self.descriptions[process as usize * n + file as usize]
    }

    /// A file's current readahead in pages: that of the first process that opened it (of
    /// process 0 before anyone did).
    pub fn file_ra_pages(&self, file: u32) -> u64 {
        let p = (0..self.n_processes())
            .find(|&p| self.description(p, file).opened)
            .unwrap_or(0);
        self.description(p, file).ra.ra_pages
    }

    /// Whether process `process` has opened `file` (it opens a file at its first access).
    pub fn description_opened(&self, process: u32, file: u32) -> bool {
        self.description(process, file).opened
    }

    /// Process `process`'s readahead for `file`, pages.
    pub fn description_ra_pages(&self, process: u32, file: u32) -> u64 {
        self.description(process, file).ra.ra_pages
    }

    /// Set the device's `read_ahead_kb` and push it to every open file that has no per-file
    /// setting (Linux copies the device value only at open; KML patched the kernel to push
    /// it, the real tuner uses fadvise on the open descriptions).
    pub fn set_device_read_ahead_kb(&mut self, kb: u64) {
        self.device_ra_pages = kb / 4;
        for f in &mut self.descriptions {
            if !f.pinned {
                f.ra.ra_pages = match f.ra.advice {
                    Advice::Sequential => 2 * self.device_ra_pages,
                    _ => self.device_ra_pages,
                };
            }
        }
    }

    /// Set one file's readahead in every process (KML's per-file mode); `None` returns it to
    /// the device value.
    pub fn set_file_ra_pages(&mut self, file: u32, pages: Option<u64>) {
        for p in 0..self.n_processes() {
            self.set_description_ra_pages(p, file, pages);
        }
    }

    /// Set one process's readahead for one file (its open description); `None` returns it
    /// to the device value. Out-of-range processes are ignored.
    pub fn set_description_ra_pages(&mut self, process: u32, file: u32, pages: Option<u64>) {
        if process >= self.n_processes() {
            return;
        }
        let dev = self.device_ra_pages;
        let d = self.description_mut(process, file);
        d.pinned = pages.is_some();
        d.preset = false;
        d.ra.ra_pages = pages.unwrap_or(dev);
    }

    /// Files that `process` opens from now on start with `pages` of readahead instead of the
    /// device's (`None`: the device's again). Per-file tuning needs it: a scan moves from one
    /// SST file to the next faster than one decision window, so a decision taken on the files
    /// a process has read must also cover the ones it opens next.
    ///
    /// It also reaches the files the process has open with no value of their own (on the
    /// device's, or on an earlier value of this kind), as the kernel tuner's push into open
    /// descriptions does: a process taken back alone from a device's value (the guardrail's
    /// `apart`) gets vanilla on the files it is reading, not only on its next ones.
    pub fn set_new_file_ra_pages(&mut self, process: u32, pages: Option<u64>) {
        let Some(slot) = self.new_file_ra.get_mut(process as usize) else {
            return;
        };
        *slot = pages;
        let dev = self.device_ra_pages;
        let n = self.files.len();
        for d in &mut self.descriptions[process as usize * n..(process as usize + 1) * n] {
            if !d.opened || (d.pinned && !d.preset) {
                continue;
            }
            (d.ra.ra_pages, d.pinned, d.preset) = match pages {
                Some(p) => (p, true, true),
                None => (
                    match d.ra.advice {
                        Advice::Sequential => 2 * dev,
                        _ => dev,
                    },
                    false,
                    false,
                ),
            };
        }
    }

    /// Every file is prefetched by LEAP (windows of at most `max_pages`) instead of Linux's
    /// readahead, as KML's LEAP baseline ran; `None` returns them all to Linux's readahead.
    /// `marked`: prefetched pages carry the readahead marker (LEAP's hit count as released),
    /// else LEAP tracks them itself ([`LeapState::unmarked`]).
    pub fn set_leap(&mut self, max_pages: Option<u64>, marked: bool) {
        for f in &mut self.files {
            f.leap = max_pages.map(|m| {
                if marked {
                    LeapState::new(m)
                } else {
                    LeapState::unmarked(m)
                }
            });
        }
    }

    /// `posix_fadvise` on a file, by every process.
    pub fn fadvise(&mut self, file: u32, advice: Advice) {
        let dev = self.device_ra_pages;
        for p in 0..self.n_processes() {
            self.description_mut(p, file).ra.fadvise(advice, dev);
        }
    }

    /// Take the page events recorded since the last call.
    pub fn drain_events(&mut self) -> Vec<PageEvent> {
        std::mem::take(&mut self.events)
    }

    /// Switch thread `id` to another workload on the same database (KML's back-to-back runs):
    /// its current operation is abandoned and the next one comes from the new generator.
    pub fn switch_workload(&mut self, id: usize, kind: WorkloadKind) {
        let t = &mut self.threads[id];
        t.spec.kind = kind;
        t.gen = Generator::new(
            kind,
            self.cfg.db.clone(),
            t.spec.mode,
            self.cfg.seed.wrapping_add(t.stats.ops),
        );
        t.in_op = false;
    }

    /// Whether every thread has finished.
    pub fn finished(&self) -> bool {
        self.threads.iter().all(|t| t.done)
    }

    /// Run until simulated time `until_ns` (or until every thread is done).
    pub fn run_until(&mut self, until_ns: u64) {
        while let Some(&Reverse((t, id))) = self.queue.peek() {
            if t >= until_ns {
                break;
            }
            self.queue.pop();
            self.now_ns = t;
            // A thread that never blocks must not run ahead of the others: the device and the
            // cache it changes are shared, and a thread behind it would see the future (a
            // random reader next to a scan found its channels booked milliseconds ahead).
            let next = self.queue.peek().map_or(u64::MAX, |r| r.0 .0);
            if let Some(wake) = self.step(id as usize, until_ns, next) {
                self.queue.push(Reverse((wake, id)));
            }
        }
        self.now_ns = self
            .now_ns
            .max(until_ns.min(self.queue.peek().map_or(until_ns, |r| r.0 .0)));
    }

    fn open_file(&mut self, process: u32, file: u32) {
        let preset = self.new_file_ra.get(process as usize).copied().flatten();
        let d = self.description_mut(process, file);
        d.opened = true;
        if let (Some(pages), false) = (preset, d.pinned) {
            d.ra.ra_pages = pages;
            d.pinned = true;
            d.preset = true;
        }
    }

    fn device_offset(&self, key: PageKey) -> u64 {
        key.file as u64 * FILE_SPAN_BYTES + key.index * PAGE_BYTES
    }

    /// Read window `w` of `file`: every page of it that is not cached, in contiguous runs,
    /// inserted with their completion time; the marker goes on `w.marker()`.
    fn read_window(&mut self, file: u32, w: RaWindow, clock: u64) {
        let limit = self.file_pages(file);
        let end = (w.start + w.size).min(limit.max(w.start + 1));
        let marker = w.marker();
        let mut i = w.start;
        while i < end {
            if self.cache.contains(PageKey { file, index: i }) {
                i += 1;
                continue;
            }
            let run_start = i;
            while i < end && !self.cache.contains(PageKey { file, index: i }) {
                i += 1;
            }
            self.read_run(file, run_start..i, clock, |index| marker == Some(index));
        }
        self.write_back(clock);
    }

    /// One device read of the uncached pages `run` of `file`, inserted with its completion time,
    /// `marked(index)` saying which carry the readahead marker.
    fn read_run(&mut self, file: u32, run: std::ops::Range<u64>, clock: u64, marked: impl Fn(u64) -> bool) {
        let off = self.device_offset(PageKey { file, index: run.start });
        let done = self
            .device
            .submit(clock, off, (run.end - run.start) * PAGE_BYTES, false);
        for index in run {
            let key = PageKey { file, index };
            self.cache
                .insert_absent(key, done, marked(index), false, &mut self.evicted);
            self.record(clock, file, index, PageEventKind::Added);
        }
    }

    /// Read `pages` of `file` that are not cached, in contiguous runs (ascending), each marked
    /// as prefetched except the `demand` page (LEAP's `SetPageReadahead`) when `mark`.
    fn read_pages(&mut self, file: u32, pages: &[u64], demand: u64, mark: bool, clock: u64) {
        let mut want: Vec<u64> = pages
            .iter()
            .copied()
            .filter(|&index| !self.cache.contains(PageKey { file, index }))
            .collect();
        want.sort_unstable();
        want.dedup();
        let mut k = 0;
        while k < want.len() {
            let start = want[k];
            let mut end = start + 1;
            k += 1;
            while k < want.len() && want[k] == end {
                end += 1;
                k += 1;
            }
            self.read_run(file, start..end, clock, |index| mark && index != demand);
        }
        self.write_back(clock);
    }

    /// Ask the acting process's readahead state of `file` for a decision, giving it the page
    /// cache's view of the file.
    fn readahead(
        &mut self,
        file: u32,
        decide: impl FnOnce(&mut RaState, &dyn Fn(u64) -> bool) -> Option<RaWindow>,
    ) -> Option<RaWindow> {
        let cache = &self.cache;
        let cached = |i: u64| cache.contains(PageKey { file, index: i });
        let at = self.acting as usize * self.files.len() + file as usize;
        decide(&mut self.descriptions[at].ra, &cached)
    }

    fn record(&mut self, time_ns: u64, file: u32, index: u64, kind: PageEventKind) {
        if self.cfg.record_events {
            self.events.push(PageEvent {
                time_ns,
                file,
                process: self.acting,
                index,
                kind,
            });
        }
    }

    fn write_back(&mut self, clock: u64) {
        // Index loop, then clear: the buffer keeps its capacity (no allocation per read).
        for i in 0..self.evicted.len() {
            let e = self.evicted[i];
            if e.dirty {
                let off = self.device_offset(e.key);
                self.device.submit(clock, off, PAGE_BYTES, true);
            }
        }
        self.evicted.clear();
    }

    fn file_pages(&self, file: u32) -> u64 {
        let local = file % self.files_per_instance;
        if local + 1 == self.files_per_instance {
            u64::MAX / 2 // the WAL grows without bound
        } else {
            self.cfg.db.file_pages(local)
        }
    }

    /// Run thread `id` from `self.now_ns` until it blocks on I/O (returns the wake time) or
    /// passes `until_ns` or, between operations, `yield_after_ns` (returns its clock), or
    /// finishes (`None`).
    fn step(&mut self, id: usize, until_ns: u64, yield_after_ns: u64) -> Option<u64> {
        let mut clock = self.now_ns.max(self.threads[id].clock_ns);
        let process = self.threads[id].spec.process;
        self.acting = process;
        loop {
            if !self.threads[id].in_op {
                let t = &mut self.threads[id];
                if t.spec.max_ops.is_some_and(|m| t.stats.ops >= m) {
                    t.done = true;
                    t.clock_ns = clock;
                    return None;
                }
                if clock >= until_ns || clock > yield_after_ns {
                    t.clock_ns = clock;
                    return Some(clock);
                }
                let mut op = std::mem::take(&mut t.op);
                t.gen.next_op(&mut op);
                t.op = op;
                t.access = 0;
                t.page = 0;
                t.in_op = true;
            }
            // Play the op's page accesses.
            while self.threads[id].access < self.threads[id].op.accesses.len() {
                let t = &self.threads[id];
                let a = t.op.accesses[t.access];
                let instance = t.spec.db_instance;
                if t.page >= a.pages {
                    let t = &mut self.threads[id];
                    t.access += 1;
                    t.page = 0;
                    continue;
                }
                let index = a.index + t.page as u64;
                let file = self.file_id(instance, a.file);
                if !self.description(process, file).opened {
                    self.open_file(process, file);
                }
                self.threads[id].page += 1;
                self.page_accesses += 1;
                let key = PageKey { file, index };
                if a.write {
                    if self.cache.access(key, false, process).is_some() {
                        self.cache.mark_dirty(key);
                    } else {
                        self.cache.insert(key, clock, false, true, &mut self.evicted);
                        self.write_back(clock);
                    }
                    clock += self.cfg.hit_ns;
                    continue;
                }
                let mmap = a.mode == AccessMode::Mmap;
                match self.cache.access(key, mmap, process) {
                    Some(c) => {
                        if mmap && c.mapped {
                            // A plain load from a mapped page: the kernel sees nothing.
                            clock += 5;
                            self.threads[id].stats.user_ns += 5;
                        } else {
                            clock += self.cfg.hit_ns;
                            self.record(clock, file, index, PageEventKind::Accessed);
                            let stats = &mut self.threads[id].stats;
                            stats.faults += u64::from(mmap);
                            let leap_file = self.files[file as usize].leap.is_some();
                            stats.marker_hits += u64::from(c.marker && !leap_file);
                            let remaining = (a.pages - self.threads[id].page + 1) as u64;
                            let leap = self.files[file as usize].leap.as_mut();
                            let w = if let Some(l) = leap {
                                // LEAP sees the access; a prefetched page is a hit. Linux's
                                // readahead is off for the file.
                                l.log(index);
                                if c.marker || l.take(index) {
                                    l.hit();
                                }
                                None
                            } else {
                                self.readahead(file, |ra, cached| {
                                    if mmap {
                                        ra.mmap_async(index, c.marker, cached)
                                    } else if c.marker {
                                        ra.async_ra(index, remaining, cached)
                                    } else {
                                        ra.prev_index = Some(index);
                                        None
                                    }
                                })
                            };
                            if let Some(w) = w {
                                self.read_window(file, w, clock);
                            }
                            if mmap {
                                self.fault_around(file, index, clock);
                            }
                        }
                        if c.ready_at_ns > clock {
                            // The page is still being read (a readahead in flight): wait.
                            self.threads[id].stats.io_wait_ns += c.ready_at_ns - clock;
                            self.threads[id].clock_ns = c.ready_at_ns;
                            return Some(c.ready_at_ns);
                        }
                    }
                    None => {
                        clock += self.cfg.miss_ns;
                        let remaining = (a.pages - self.threads[id].page + 1) as u64;
                        let file_pages = self.file_pages(file);
                        if let Some(l) = self.files[file as usize].leap.as_mut() {
                            // LEAP chooses the pages (the missing one first).
                            l.log(index);
                            let pages = l.prefetch(index, file_pages);
                            let mark = l.marks_pages();
                            if !mark {
                                for &p in pages.iter().filter(|&&p| p != index) {
                                    let _ = l.prefetched(p);
                                }
                            }
                            self.read_pages(file, &pages, index, mark, clock);
                        } else {
                            let w = self.readahead(file, |ra, cached| {
                                if mmap {
                                    ra.mmap_sync(index, cached)
                                } else {
                                    Some(ra.sync_ra(index, remaining, cached))
                                }
                            });
                            // The faulting page is read whatever readahead decided.
                            let w = w.filter(|w| w.start <= index && index < w.start + w.size);
                            self.read_window(
                                file,
                                w.unwrap_or(RaWindow {
                                    start: index,
                                    size: 1,
                                    async_size: 0,
                                }),
                                clock,
                            );
                        }
                        let ready = self.cache.settle(key, mmap, process).unwrap_or(clock).max(clock);
                        if mmap {
                            self.fault_around(file, index, clock);
                        }
                        let t = &mut self.threads[id];
                        t.stats.misses += 1;
                        t.stats.faults += u64::from(mmap);
                        t.stats.io_wait_ns += ready - clock;
                        t.clock_ns = ready;
                        return Some(ready);
                    }
                }
            }
            // Operation complete.
            let t = &mut self.threads[id];
            clock += t.op.cpu_ns;
            t.stats.user_ns += t.op.cpu_ns;
            t.stats.ops += 1;
            t.stats.last_op_ns = clock;
            t.in_op = false;
        }
    }

    /// `filemap_map_pages`: map the cached neighbours of a fault (16 pages, aligned), which
    /// also counts as mmap hits for the miss counter.
    fn fault_around(&mut self, file: u32, index: u64, clock: u64) {
        let start = index & !(FAULT_AROUND_PAGES - 1);
        let mut mapped = 0u32;
        for i in start..start + FAULT_AROUND_PAGES {
            if i != index && self.cache.map_around(PageKey { file, index: i }, clock, self.acting) {
                mapped += 1;
            }
        }
        let ra = &mut self.description_mut(self.acting, file).ra;
        ra.mmap_miss = ra.mmap_miss.saturating_sub(mapped);
    }
}

/// Result of a whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// Operations per simulated second, per thread.
    pub ops_per_s: Vec<f64>,
    /// Simulated seconds.
    pub seconds: f64,
    /// Page accesses played.
    pub page_accesses: u64,
    /// Bytes read from the device.
    pub read_bytes: u64,
    /// Cache hit ratio of kernel-visible lookups.
    pub hit_ratio: f64,
}

/// Run a configuration for `duration_ns` of simulated time with a fixed readahead.
pub fn run(cfg: SimConfig, duration_ns: u64) -> RunResult {
    let mut sim = Sim::new(cfg);
    sim.run_until(duration_ns);
    let secs = duration_ns as f64 / 1e9;
    let stats = sim.thread_stats();
    let c = sim.cache().stats();
    RunResult {
        ops_per_s: stats
            .iter()
            .map(|s| s.ops as f64 / (s.last_op_ns.max(1) as f64 / 1e9).min(secs))
            .collect(),
        seconds: secs,
        page_accesses: sim.page_accesses(),
        read_bytes: sim.device().stats().read_bytes,
        hit_ratio: c.hits as f64 / (c.hits + c.misses).max(1) as f64,
    }
}
