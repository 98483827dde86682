//! The probes on this machine's kernel (root and eBPF needed; otherwise each test prints why
//! it skips). Issue 4: page-cache insertions and accesses, readahead, block requests, lost
//! events, features equal to KML's formulas on the raw event stream.

use iolearn_policy::readahead::WindowStats;
use iolearn_probe::{availability, DeviceId, EventKind, Probe, ProbeConfig};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Duration;

/// Whether to skip (eBPF unavailable here): prints why, and records it for the test
/// runner's closing line (`scripts/test.sh`).
fn skip(test: &str) -> bool {
    match availability() {
        Ok(()) => false,
        Err(e) => {
            eprintln!("SKIP {test}: {e}");
            if let Some(log) = std::env::var_os("IOLEARN_SKIP_LOG") {
                use std::io::Write;
                if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(log) {
                    let _ = writeln!(f, "iolearn-probe {test}: {e}");
                }
            }
            true
        }
    }
}

/// A file of `pages` pages, written and then dropped from the page cache.
fn cold_file(name: &str, pages: usize) -> (PathBuf, u64, DeviceId) {
    let dir = std::env::var_os("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or(std::env::temp_dir());
    let path = dir.join(name);
    let mut f = File::create(&path).unwrap();
    f.write_all(&vec![0x5a; pages * 4096]).unwrap();
    f.sync_all().unwrap();
    // SAFETY: valid fd; POSIX_FADV_DONTNEED drops this file's clean pages.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let ino = f.metadata().unwrap().ino();
    let dev = DeviceId::of_path(&path).unwrap();
    (path, ino, dev)
}

fn me() -> u32 {
    std::process::id()
}

/// Which of the first `pages` pages of `f` are in the page cache (`mincore` on a mapping).
fn resident(f: &File, pages: usize) -> Vec<bool> {
    let len = pages * 4096;
    // SAFETY: a read-only shared mapping of an open file, unmapped before returning; `v` has a
    // byte per page.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(addr, libc::MAP_FAILED);
        let mut v = vec![0u8; pages];
        assert_eq!(libc::mincore(addr, len, v.as_mut_ptr()), 0);
        libc::munmap(addr, len);
        v.iter().map(|&b| b & 1 == 1).collect()
    }
}

/// Probes on `dev` watching the processes `pids` (in the kernel), every page event also in the
/// ring buffer with `raw_events`.
fn probe(dev: DeviceId, pids: &[u32], raw_events: bool) -> Probe {
    Probe::start(&ProbeConfig {
        device: Some(dev),
        pids: pids.to_vec(),
        raw_events,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn reads_are_seen_per_file_with_kml_sums() {
    if skip("reads_are_seen_per_file_with_kml_sums") {
        return;
    }
    let (path, ino, dev) = cold_file("probe-read.bin", 2048);
    let mut p = probe(dev, &[me()], false);
    p.enable_stats().unwrap();
    p.window().unwrap(); // start clean
    let mut buf = vec![0u8; 64 << 10];
    let mut f = File::open(&path).unwrap();
    while f.read(&mut buf).unwrap() > 0 {}
    let w = p.window().unwrap();
    let mine = w.files.iter().find(|f| f.ino == ino).expect("our file in the window");
    // Every page was inserted (readahead) and looked up once: at least 2 x 2048 events.
    assert!(mine.sums.n >= 4096, "{mine:?}");
    assert_eq!((mine.sums.min, mine.sums.max), (0, 2047), "{mine:?}");
    assert_eq!(mine.sums.tgid, me());
    assert!(w.counters.pages_added >= 2048, "{:?}", w.counters);
    assert!(w.counters.pages_accessed >= 2048, "{:?}", w.counters);
    assert_eq!(w.counters.pages_read, 0, "reads are counted only when asked");
    assert!(
        w.counters.ra_sync + w.counters.ra_async > 0,
        "readahead decisions: {:?}",
        w.counters
    );
    assert!(w.device.n >= mine.sums.n);
    // The kernel accounts the programs' CPU time while stats are enabled.
    let stats = p.program_stats();
    let add = stats.iter().find(|s| s.name == "on_add").unwrap();
    assert!(add.runs > 0 && add.run_time_ns > 0, "{stats:?}");
    // The next window starts empty.
    let w2 = p.window().unwrap();
    assert!(w2.files.iter().all(|f| f.ino != ino), "{:?}", w2.files);
    assert_eq!(w2.counters.lost(), 0);
}

#[test]
fn other_processes_are_filtered_out_in_the_kernel() {
    if skip("other_processes_are_filtered_out_in_the_kernel") {
        return;
    }
    let (path, ino, dev) = cold_file("probe-filter.bin", 256);
    // Watch a pid that is not us: our reads must not be recorded.
    let mut p = probe(dev, &[1], false);
    p.window().unwrap();
    let mut v = Vec::new();
    File::open(&path).unwrap().read_to_end(&mut v).unwrap();
    let w = p.window().unwrap();
    assert!(w.files.iter().all(|f| f.ino != ino));
    assert!(w.counters.other_process > 0, "{:?}", w.counters);
}

#[test]
fn thousands_of_processes_are_watched_and_one_that_left_is_not() {
    if skip("thousands_of_processes_are_watched_and_one_that_left_is_not") {
        return;
    }
    let (path, ino, dev) = cold_file("probe-many.bin", 64);
    let mut p = probe(dev, &[1], false);
    // Far more processes than the old hash of 1,024 held, our neighbours in the bitmap's
    // words among them; not us yet.
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let others: Vec<u32> = (1..pid_max.min(5000))
        .chain([me() - 1, me() + 1])
        .filter(|&q| q != me())
        .collect();
    for &q in &others {
        p.watch_pid(q).unwrap();
    }
    let read_all = |p: &mut Probe| {
        p.window().unwrap();
        // SAFETY: valid fd; drops the file's clean pages so every read is seen again.
        let f = File::open(&path).unwrap();
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let mut v = Vec::new();
        (&f).read_to_end(&mut v).unwrap();
        p.window().unwrap().files.iter().any(|f| f.ino == ino)
    };
    assert!(!read_all(&mut p), "our reads seen before we were watched");
    p.watch_pid(me()).unwrap();
    assert!(p.watches(me()).unwrap());
    assert!(
        read_all(&mut p),
        "our reads not seen once watched (pid {} of {} watched)",
        me(),
        others.len()
    );
    p.unwatch_pid(me()).unwrap();
    assert!(!read_all(&mut p), "our reads seen after we left");
    // Taking one bit out leaves the rest of its word.
    assert!(others.iter().all(|&q| p.watches(q).unwrap()));
    // The kernel's own limit (4,194,304) is the bitmap's: whatever pid_max becomes, every
    // process fits, and nothing above the limit does.
    p.watch_pid((4 << 20) - 1).unwrap();
    let e = p.watch_pid(4 << 20).unwrap_err().to_string();
    assert!(e.contains("pid limit"), "{e}");
}

#[test]
fn mmap_faults_are_accesses_and_raw_events_give_the_same_features() {
    if skip("mmap_faults_are_accesses_and_raw_events_give_the_same_features") {
        return;
    }
    // One CPU, so "successive" events are one sequence in the kernel's per-CPU sums too.
    // SAFETY: plain libc calls on our own thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    let (path, ino, dev) = cold_file("probe-mmap.bin", 1024);
    let mut p = probe(dev, &[me()], true);
    p.window().unwrap();
    p.drain_events(Duration::ZERO).unwrap();
    let f = File::open(&path).unwrap();
    let len = 1024 * 4096;
    // SAFETY: read-only private mapping of a file we own, unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(addr, libc::MAP_FAILED);
    let mut sum = 0u64;
    // Backwards, every 7th page: faults, read-around, no fault-around luck.
    for page in (0..1024).rev().step_by(7) {
        // SAFETY: inside the mapping.
        sum += unsafe { *(addr as *const u8).add(page * 4096) } as u64;
    }
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(addr, len) };
    assert_eq!(sum, 0x5a * (0..1024).rev().step_by(7).count() as u64);
    let w = p.window().unwrap();
    let mut raw = p.drain_events(Duration::from_millis(100)).unwrap();
    raw.retain(|e| e.ino == ino);
    assert!(raw.iter().all(|e| e.tid != 0), "each event names its thread");
    assert!(raw.iter().any(|e| e.kind == EventKind::Accessed), "faults are accesses");
    assert!(raw.iter().any(|e| e.kind == EventKind::Added));
    // Each fault counted once (fault-around maps pages without one), and no page read.
    let faults = raw.iter().filter(|e| e.kind == EventKind::Accessed).count() as u64;
    assert_eq!(
        (w.counters.faults, w.counters.pages_read),
        (faults, 0),
        "{:?}",
        w.counters
    );
    let mine = w.files.iter().find(|f| f.ino == ino).expect("our file");
    // KML's features from the raw stream (page by page) equal those from the kernel's sums.
    let mut from_events = WindowStats::default();
    for e in &raw {
        for i in 0..e.pages {
            from_events.push(e.index + i);
        }
    }
    let s = mine.sums;
    let from_sums = WindowStats::from_sums(s.n, s.sum, s.sum_sq, s.min, s.max, s.sum_abs_delta).with_shape(
        s.first,
        s.last,
        s.jump_pairs,
        s.jump_same,
    );
    assert_eq!(from_events.len(), s.n, "{s:?}");
    let (a, b) = (from_events.features(256), from_sums.features(256));
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-9 * x.abs().max(1.0), "events {a:?} vs sums {b:?}");
    }
    // And the features beyond KML's: the kernel's closed form for a run of pages is the same
    // as the pages one by one.
    assert_eq!(from_events.shape(), from_sums.shape(), "{s:?}");
    assert_eq!(w.counters.lost(), 0);
}

#[test]
fn a_cold_read_inserts_every_page_of_the_file_once() {
    if skip("a_cold_read_inserts_every_page_of_the_file_once") {
        return;
    }
    // Large folios (ext4 and tmpfs use them) are one insertion of 1 << order pages: the order
    // is read from the folio, so a wrong reading shows as pages missing or counted twice.
    let (path, ino, dev) = cold_file("probe-folios.bin", 4096);
    let mut f = File::open(&path).unwrap();
    // What the drop left in the cache (a page the kernel was still holding) is not inserted.
    let cached = resident(&f, 4096);
    assert!(
        cached.iter().filter(|&&c| c).count() < 4096 / 10,
        "the drop left most of the file"
    );
    let mut p = probe(dev, &[me()], true);
    p.window().unwrap();
    p.drain_events(Duration::ZERO).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf).unwrap() > 0 {}
    let w = p.window().unwrap();
    let mut adds = p.drain_events(Duration::from_millis(100)).unwrap();
    adds.retain(|e| e.ino == ino && e.kind == EventKind::Added);
    let mut seen = vec![0u32; 4096];
    for e in &adds {
        for i in e.index..e.index + e.pages {
            seen[i as usize] += 1;
        }
    }
    let wrong: Vec<(usize, u32, bool)> = (0..4096)
        .filter(|&i| seen[i] != u32::from(!cached[i]))
        .map(|i| (i, seen[i], cached[i]))
        .collect();
    assert!(
        wrong.is_empty(),
        "each page not cached inserted once, (page, insertions, was cached): {:?} of {}",
        &wrong[..wrong.len().min(20)],
        wrong.len()
    );
    let largest = adds.iter().map(|e| e.pages).max().unwrap();
    eprintln!("{} insertions, the largest of {largest} pages", adds.len());
    // The in-kernel sums count the same insertions: each page inserted once and read at least
    // once.
    let mine = w.files.iter().find(|f| f.ino == ino).expect("our file");
    let inserted = seen.iter().map(|&n| n as u64).sum::<u64>();
    assert!(mine.sums.n >= inserted + 4096 && mine.sums.max == 4095, "{mine:?}");
}

#[test]
fn each_read_counts_its_pages_once_up_to_the_end_of_the_file() {
    if skip("each_read_counts_its_pages_once_up_to_the_end_of_the_file") {
        return;
    }
    // 1 MiB reads of a cold file of 2049 pages and a half: the kernel reports a large read
    // once per batch of folios, each time with the rest of the request, and the last read's
    // range runs past the end of the file. The count is the file's pages, once.
    let (path, _, dev) = cold_file("probe-reads.bin", 2049);
    {
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[1u8; 2048]).unwrap();
        f.sync_all().unwrap();
        // SAFETY: valid fd; POSIX_FADV_DONTNEED drops this file's clean pages.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    // Read by a process of its own, watched from before it reads: the probes count by
    // process, and this test's threads share one with the other tests'. A forked child, not a
    // new program: loading one reads and faults its libraries (from this device, here). It
    // makes nothing but system calls, into memory allocated before the fork. The whole file
    // in 1 MiB reads, then its first 100 pages (cached now) a page a read, then two reads of
    // its tail.
    let f = File::open(&path).unwrap();
    // A second cold file read in 96 KiB `readv`s (the page-cache tracepoint's count fell
    // short on such reads whose first folios were still being read), and a copy of 100 pages
    // of the first file by `copy_file_range` (cp's way: no read returns to the process).
    let (path2, ..) = cold_file("probe-reads-2.bin", 512);
    let g = File::open(&path2).unwrap();
    let copy = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path.with_extension("copy"))
        .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut go = [0 as libc::c_int; 2];
    // SAFETY: a pipe into a valid array of two descriptors.
    assert_eq!(unsafe { libc::pipe(go.as_mut_ptr()) }, 0);
    // SAFETY: the child only calls read, lseek and _exit (async-signal-safe) on descriptors
    // and memory it inherited, and never returns into the test harness.
    let child = unsafe { libc::fork() };
    assert!(child >= 0);
    if child == 0 {
        // SAFETY: as above; `buf` is 1 MiB and the reads are at most that.
        unsafe {
            let mut byte = 0u8;
            libc::read(go[0], (&mut byte as *mut u8).cast(), 1);
            let (fd, b) = (f.as_raw_fd(), buf.as_mut_ptr().cast());
            let mut bytes = 0isize;
            loop {
                let n = libc::read(fd, b, 1 << 20);
                if n <= 0 {
                    break;
                }
                bytes += n;
            }
            libc::lseek(fd, 0, libc::SEEK_SET);
            let mut small = 0;
            for _ in 0..100 {
                small += libc::read(fd, b, 4096);
            }
            // Two reads past the end of the file, the second inside the first's range: two
            // reads, 50 and 10 pages.
            let tail = libc::pread(fd, b, 1 << 20, 2000 * 4096) + libc::pread(fd, b, 1 << 20, 2040 * 4096);
            let iov = [
                libc::iovec {
                    iov_base: b,
                    iov_len: 64 << 10,
                },
                libc::iovec {
                    iov_base: b.byte_add(64 << 10),
                    iov_len: 32 << 10,
                },
            ];
            let mut vectored = 0isize;
            loop {
                let n = libc::readv(g.as_raw_fd(), iov.as_ptr(), 2);
                if n <= 0 {
                    break;
                }
                vectored += n;
            }
            let (mut from, mut to) = (0i64, 0i64);
            let copied = libc::copy_file_range(fd, &mut from, copy.as_raw_fd(), &mut to, 100 * 4096, 0);
            let ok = bytes == 2049 * 4096 + 2048
                && small == 100 * 4096
                && tail == 58 * 4096 + 2 * 2048
                && vectored == 512 * 4096
                && copied == 100 * 4096;
            libc::_exit(if ok { 0 } else { 1 });
        }
    }
    let started = Probe::start(&ProbeConfig {
        device: Some(dev),
        pids: vec![child as u32],
        count_reads: true,
        ..Default::default()
    });
    if started.is_err() {
        // SAFETY: our child, waiting on the pipe.
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::waitpid(child, std::ptr::null_mut(), 0);
        }
    }
    let mut p = started.unwrap();
    p.window().unwrap();
    let mut status = 0;
    // SAFETY: our pipe's write end and our child.
    unsafe {
        assert_eq!(libc::write(go[1], b"g".as_ptr().cast(), 1), 1);
        assert_eq!(libc::waitpid(child, &mut status, 0), child);
        libc::close(go[0]);
        libc::close(go[1]);
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child read {status:#x}"
    );
    let w = p.window().unwrap();
    // Not the byte read from the pipe: only the device's regular files count.
    assert_eq!(
        w.counters.pages_read,
        2050 + 100 + 50 + 10 + 512 + 100,
        "{:?}",
        w.counters
    );
    // The same pages by process: the watched child's, no one else's.
    assert_eq!(
        w.pages_read_by_process,
        [(child as u32, w.counters.pages_read)].into(),
        "{:?}",
        w.pages_read_by_process
    );
    // A process no longer watched is forgotten (its pid may be reused).
    p.unwatch_pid(child as u32).unwrap();
    assert!(p.window().unwrap().pages_read_by_process.is_empty());
    // What the tracepoint reports counts the large reads' pages more than once.
    assert!(w.counters.pages_accessed > w.counters.pages_read, "{:?}", w.counters);
    assert_eq!(w.counters.faults, 0, "{:?}", w.counters);
}

#[test]
fn block_requests_are_timed() {
    if skip("block_requests_are_timed") {
        return;
    }
    let (path, _, dev) = cold_file("probe-block.bin", 512);
    // Without asking, the block-request programs are not even loaded.
    let mut quiet = Probe::start(&ProbeConfig::default()).unwrap();
    let mut p = Probe::start(&ProbeConfig {
        block_requests: true,
        ..Default::default()
    })
    .unwrap();
    quiet.window().unwrap();
    p.window().unwrap();
    let mut v = Vec::new();
    File::open(&path).unwrap().read_to_end(&mut v).unwrap();
    let w = p.window().unwrap();
    let q = quiet.window().unwrap();
    assert_eq!(
        (q.counters.rq_issued, q.counters.rq_completed),
        (0, 0),
        "{:?}",
        q.counters
    );
    assert_eq!(q.latency_histogram.iter().sum::<u64>(), 0);
    assert!(quiet.program_stats().iter().all(|s| !s.name.starts_with("on_rq")));
    // A file on tmpfs or a virtual file system issues no block requests: only check when
    // the file lives on a block device.
    if dev.name().is_some() {
        assert!(
            w.counters.rq_issued > 0 && w.counters.rq_completed > 0,
            "{:?}",
            w.counters
        );
        assert!(w.latency_histogram.iter().sum::<u64>() > 0);
        assert!(
            w.counters.rq_depth_sum >= w.counters.rq_issued,
            "depth >= 1 per request"
        );
    } else {
        eprintln!(
            "note: {} is not on a block device; block checks skipped",
            path.display()
        );
    }
}

#[test]
fn unknown_device_names_are_clear_errors() {
    let e = DeviceId::from_name("no-such-disk").unwrap_err().to_string();
    assert!(e.contains("no-such-disk"), "{e}");
}

#[test]
fn the_open_file_iterator_shows_fadvise_random_and_the_readahead_of_each_description() {
    if skip("the_open_file_iterator_shows_fadvise_random_and_the_readahead_of_each_description") {
        return;
    }
    let (path, ino, dev) = cold_file("probe-modes.bin", 16);
    let mut p = probe(dev, &[me()], false);
    let a = File::open(&path).unwrap();
    let b = File::open(&path).unwrap();
    let find = |p: &mut Probe, f: &File| {
        let all = p.open_files().unwrap();
        assert!(all.iter().all(|m| m.tgid == me()), "only the watched process: {all:?}");
        *all.iter()
            .find(|m| m.fd == f.as_raw_fd() as u32)
            .unwrap_or_else(|| panic!("fd {} not in {all:?}", f.as_raw_fd()))
    };
    // SAFETY: valid descriptors.
    unsafe { libc::posix_fadvise(a.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    let (ma, mb) = (find(&mut p, &a), find(&mut p, &b));
    assert_eq!(ma.ino, ino);
    assert!(ma.random() && !mb.random(), "{ma:?} {mb:?}");
    // SEQUENTIAL doubles the description's readahead and clears RANDOM: each description
    // has its own.
    unsafe { libc::posix_fadvise(a.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
    let (ma, mb) = (find(&mut p, &a), find(&mut p, &b));
    assert!(!ma.random());
    assert_eq!(ma.ra_pages, 2 * mb.ra_pages, "{ma:?} {mb:?}");
}

#[test]
fn a_file_read_by_two_processes_is_two_streams_and_one_file() {
    if skip("a_file_read_by_two_processes_is_two_streams_and_one_file") {
        return;
    }
    let (path, ino, dev) = cold_file("probe-shared.bin", 512);
    let mut p = Probe::start(&ProbeConfig {
        device: Some(dev),
        pids: vec![],
        filter_pids: false,
        ..Default::default()
    })
    .unwrap();
    p.window().unwrap();
    // This process reads pages 0..256 in order; a child reads 32 pages from the end, backwards.
    let mut f = File::open(&path).unwrap();
    let mut buf = vec![0u8; 256 * 4096];
    f.read_exact(&mut buf).unwrap();
    let script = "import os, sys\n\
                  fd = os.open(sys.argv[1], os.O_RDONLY)\n\
                  for i in range(511, 479, -1):\n\
                  \x20   os.pread(fd, 4096, i * 4096)\n";
    let child = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .status()
        .unwrap();
    assert!(child.success());
    let w = p.window().unwrap();
    let streams: Vec<_> = w.descriptions.iter().filter(|d| d.ino == ino).collect();
    let mine = streams
        .iter()
        .find(|d| d.sums.tgid == me())
        .expect("this process's stream");
    let other = streams
        .iter()
        .find(|d| d.sums.tgid != me())
        .expect("the child's stream");
    assert!(mine.sums.min == 0 && mine.sums.max >= 255, "{mine:?}");
    assert!(other.sums.min >= 480 && other.sums.max == 511, "{other:?}");
    let file = w.files.iter().find(|f| f.ino == ino).expect("the file");
    assert_eq!(file.sums.n, streams.iter().map(|d| d.sums.n).sum::<u64>());
    assert_eq!(file.sums.tgid, me(), "owned by the process that read the most");
    assert_eq!((file.sums.min, file.sums.max), (0, 511));
}

#[test]
fn the_kernels_sums_tell_a_strided_read_from_a_random_one_and_a_scan_from_a_reverse_one() {
    if skip("the_kernels_sums_tell_a_strided_read_from_a_random_one_and_a_scan_from_a_reverse_one") {
        return;
    }
    // SAFETY: plain libc calls on our own thread (one CPU: one sequence of events).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    // One page per pread of a cold file, in the order given; the file's shape features.
    let shape_of = |name: &str, order: &[u64]| {
        let (path, ino, dev) = cold_file(name, 4096);
        let mut p = probe(dev, &[me()], false);
        p.window().unwrap();
        let f = File::open(&path).unwrap();
        let mut buf = [0u8; 4096];
        for &page in order {
            use std::os::unix::fs::FileExt;
            f.read_exact_at(&mut buf, page * 4096).unwrap();
        }
        let w = p.window().unwrap();
        let s = w.files.iter().find(|f| f.ino == ino).expect("our file").sums;
        WindowStats::from_sums(s.n, s.sum, s.sum_sq, s.min, s.max, s.sum_abs_delta)
            .with_shape(s.first, s.last, s.jump_pairs, s.jump_same)
            .shape()
    };
    let strided: Vec<u64> = (0..256).map(|i| i * 16).collect();
    let mut random = strided.clone();
    let mut rng = iolearn_ml::Rng::new(3);
    for i in (1..random.len()).rev() {
        random.swap(i, rng.below(i + 1));
    }
    let (s, r) = (
        shape_of("probe-strided.bin", &strided),
        shape_of("probe-random.bin", &random),
    );
    assert!(s[1] > 0.5 && r[1] < 0.2, "regularity: strided {s:?}, random {r:?}");
    // A forward scan ends behind the readahead it triggered (the range reaches past the last
    // page read), a reverse one at its lowest page.
    let forward: Vec<u64> = (0..1024).collect();
    let backward: Vec<u64> = (0..1024).rev().collect();
    let (f, b) = (
        shape_of("probe-forward.bin", &forward),
        shape_of("probe-backward.bin", &backward),
    );
    assert!(f[0] > 0.5 && b[0] < -0.5, "direction: forward {f:?}, backward {b:?}");
}

#[test]
fn detached_page_cache_programs_see_nothing_and_attached_again_see_everything() {
    if skip("detached_page_cache_programs_see_nothing_and_attached_again_see_everything") {
        return;
    }
    let (path, ino, dev) = cold_file("probe-detach.bin", 256);
    let mut p = probe(dev, &[me()], false);
    let read_cold = || {
        let f = File::open(&path).unwrap();
        // SAFETY: valid descriptor; drops the file's clean pages.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let mut v = Vec::new();
        (&f).read_to_end(&mut v).unwrap();
    };
    assert!(p.observing_page_cache());
    p.window().unwrap();
    p.observe_page_cache(false).unwrap();
    p.observe_page_cache(false).unwrap(); // twice is once
    assert!(!p.observing_page_cache());
    read_cold();
    let off = p.window().unwrap();
    assert!(off.files.iter().all(|f| f.ino != ino), "{:?}", off.files);
    let (a, b) = (off.counters.pages_added, off.counters.pages_accessed);
    p.observe_page_cache(true).unwrap();
    assert!(p.observing_page_cache());
    read_cold();
    let on = p.window().unwrap();
    let mine = on.files.iter().find(|f| f.ino == ino).expect("seen again");
    assert!(mine.sums.n >= 2 * 256, "{mine:?}");
    assert!(on.counters.pages_added >= a + 256 && on.counters.pages_accessed >= b + 256);
    assert!(on.counters.ra_sync + on.counters.ra_async > off.counters.ra_sync + off.counters.ra_async);
}

/// This thread's CPU time, from the clock the kernel keeps per thread.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

#[test]
fn the_task_iterator_gives_each_threads_run_time_and_its_ticks_in_user_and_kernel_mode() {
    if skip("the_task_iterator_gives_each_threads_run_time_and_its_ticks_in_user_and_kernel_mode") {
        return;
    }
    use std::sync::{mpsc, Arc, Barrier};
    let dev = DeviceId::of_path(&std::env::temp_dir()).unwrap();
    let mut p = probe(dev, &[me()], false);
    // Two threads of this process, 0.4 s of CPU each: one in its own code, one copying from
    // /dev/zero (the kernel's work). Each sends its tid and the CPU time it measured, then
    // waits (an exited thread leaves the task list) until the iterator has been read.
    let done = Arc::new(Barrier::new(3));
    let (tx, rx) = mpsc::channel();
    let spawn = |in_kernel: bool| {
        let (done, tx) = (done.clone(), tx.clone());
        std::thread::spawn(move || {
            let mut zero = File::open("/dev/zero").unwrap();
            let mut buf = vec![0u8; 1 << 20];
            let t = thread_cpu_s();
            let mut x = 1u64;
            while thread_cpu_s() - t < 0.4 {
                if in_kernel {
                    zero.read_exact(&mut buf).unwrap();
                } else {
                    for _ in 0..200_000 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        std::hint::black_box(x);
                    }
                }
            }
            // SAFETY: gettid has no preconditions.
            tx.send((in_kernel, unsafe { libc::gettid() } as u32, thread_cpu_s()))
                .unwrap();
            done.wait();
        })
    };
    let threads = [spawn(false), spawn(true)];
    let sent: Vec<(bool, u32, f64)> = (0..2).map(|_| rx.recv().unwrap()).collect();
    let times = p.task_times().unwrap();
    done.wait();
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        times.iter().all(|t| t.tgid == me()),
        "only the watched process: {times:?}"
    );
    assert!(times.iter().any(|t| t.tid == me()), "the main thread: {times:?}");
    // The tick rate, from two readings a fifth of a second apart.
    std::thread::sleep(Duration::from_millis(200));
    let later = p.task_times().unwrap();
    let hz = iolearn_probe::tick_rate(&times[0], &later[0]);
    assert!(
        matches!(hz, Some(h) if [100.0, 250.0, 300.0, 1000.0].contains(&h)),
        "{hz:?}"
    );
    for (in_kernel, tid, cpu) in sent {
        let t = times
            .iter()
            .find(|t| t.tid == tid)
            .unwrap_or_else(|| panic!("thread {tid}: {times:?}"));
        // The run time is the scheduler's, as exact as the thread's own clock (up to the
        // time since its last update: a tick at most, 10 ms at 100 Hz).
        let ran = t.runtime_ns as f64 / 1e9;
        assert!((ran - cpu).abs() < 0.02, "thread {tid}: ran {ran} s, its clock {cpu} s");
        // The ticks it was running at: nearly all in user mode for the one, in the kernel for
        // the other (one tick either way is 4 ms at 250 Hz; 0.4 s is 100 of them). Ticks are
        // samples of whoever runs when the tick fires: on a loaded 2-core CI machine a thread
        // caught 0.24 s of its 0.4 s, so the bound is on the split, with enough ticks to tell.
        let (u, s) = (t.user_tick_ns as f64 / 1e9, t.system_tick_ns as f64 / 1e9);
        let (mine, other) = if in_kernel { (s, u) } else { (u, s) };
        assert!(
            mine > 0.15 && other < mine / 4.0,
            "thread {tid} (kernel: {in_kernel}): user {u} s, system {s} s"
        );
    }
}
