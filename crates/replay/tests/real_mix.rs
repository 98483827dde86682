//! The real path of MittCFQ's successor on this machine's kernel (root, eBPF and loop devices
//! needed; otherwise each test prints why it skips): the scheduler watch sees every request
//! with its thread and priority, and on loop devices under bfq with a heavier tenant on the
//! replica every get tries first, MittOS's books turn the slow tries away.

use iolearn_probe::sched::{SchedKind, SchedWatch};
use iolearn_probe::{availability, DeviceId};
use iolearn_replay::mix::{self, MixOptions, Prio, Strategy, Tenant};
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

fn skip(test: &str, why: &str) {
    eprintln!("SKIP {test}: {why}");
    if let Some(log) = std::env::var_os("IOLEARN_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = OpenOptions::new().append(true).open(log) {
            let _ = writeln!(f, "iolearn-replay {test}: {why}");
        }
    }
}

/// A loop device over a file of written data (direct I/O); detached when dropped.
struct Loop {
    dev: String,
    image: PathBuf,
    /// The scheduler it had (loop devices keep theirs across attachments): restored on drop.
    saved: String,
}

impl Loop {
    /// Over a fresh image `name` of `mib` MiB, under `scheduler`.
    fn new(name: &str, mib: usize, scheduler: &str) -> Result<Loop, String> {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let image = dir.join(name);
        // Written, not sparse: a hole is read without any request reaching the device.
        std::fs::write(&image, vec![0x5au8; mib << 20]).map_err(|e| format!("{}: {e}", image.display()))?;
        let out = Command::new("losetup")
            .args(["--direct-io=on", "--find", "--show"])
            .arg(&image)
            .output()
            .map_err(|e| format!("losetup: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_file(&image);
            return Err(format!("losetup: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let saved = std::fs::read_to_string(Loop::sched_path(&dev))
            .ok()
            .and_then(|s| {
                s.split_whitespace()
                    .find(|w| w.starts_with('['))
                    .map(|w| w.trim_matches(['[', ']']).to_string())
            })
            .unwrap_or_else(|| "none".into());
        let lo = Loop { dev, image, saved };
        let dio = format!("/sys/block/{}/loop/dio", lo.dev.trim_start_matches("/dev/"));
        if !std::fs::read_to_string(&dio).is_ok_and(|v| v.trim() == "1") {
            return Err(format!("{}: direct I/O not on ({dio})", lo.dev));
        }
        std::fs::write(Loop::sched_path(&lo.dev), scheduler).map_err(|e| format!("{scheduler} on {}: {e}", lo.dev))?;
        Ok(lo)
    }

    fn sched_path(dev: &str) -> String {
        format!("/sys/block/{}/queue/scheduler", dev.trim_start_matches("/dev/"))
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::fs::write(Loop::sched_path(&self.dev), &self.saved);
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

fn set_ioprio(class: u32, level: u32) {
    iolearn_replay::set_ioprio(((class << 13) | level) as u16).expect("ioprio_set");
}

fn tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

/// The root tests share the machine's two cores and its loop devices: one at a time, so
/// that one's timing is not the other's load.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn every_read_is_seen_entering_the_scheduler_issued_and_completed_with_its_thread_and_priority() {
    let name = "every_read_is_seen_entering_the_scheduler_issued_and_completed_with_its_thread_and_priority";
    if let Err(e) = availability() {
        return skip(name, &e.to_string());
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Two watched devices and a third that is not.
    let mut loops = Vec::new();
    for i in 0..3 {
        match Loop::new(&format!("sched-watch-{i}.img"), 16, "bfq") {
            Ok(l) => loops.push(l),
            Err(e) => return skip(name, &format!("no loop device: {e}")),
        }
    }
    let devs: Vec<DeviceId> = loops[..2]
        .iter()
        .map(|l| DeviceId::from_name(&l.dev).expect("the loop device's number"))
        .collect();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let watch = SchedWatch::start(&devs, move |e| sink.lock().unwrap().push(*e)).expect("the watch starts");
    // Three threads at their own priorities, each reading its own offsets of its own device:
    // best effort 1 on the first, idle on the second, real time 3 on the unwatched third.
    let mut readers = Vec::new();
    for (k, (class, level)) in [(2u32, 1u32), (3, 0), (1, 3)].into_iter().enumerate() {
        let path = loops[k].dev.clone();
        readers.push(std::thread::spawn(move || {
            set_ioprio(class, level);
            let f = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
                .expect("open the loop device");
            let layout = std::alloc::Layout::from_size_align(4096, 4096).unwrap();
            // SAFETY: non-zero size; freed below.
            let ptr = unsafe { std::alloc::alloc(layout) };
            // SAFETY: 4096 bytes owned by this thread.
            let buf = unsafe { std::slice::from_raw_parts_mut(ptr, 4096) };
            let offsets: Vec<u64> = (0..100u64)
                .map(|i| ((i * 37 + k as u64 * 1000) % 4000) * 4096)
                .collect();
            for &o in &offsets {
                assert_eq!(f.read_at(buf, o).expect("a read"), 4096);
            }
            // SAFETY: allocated above with this layout.
            unsafe { std::alloc::dealloc(ptr, layout) };
            (tid(), class, level, offsets, k)
        }));
    }
    let done: Vec<_> = readers.into_iter().map(|t| t.join().unwrap()).collect();
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(watch.stop().expect("the watch ran to the end"), 0, "no event lost");
    let events = events.lock().unwrap();
    // Follow each request: insert, issue, complete in that order, on its own device.
    let mut open: HashMap<u64, (u32, u8, u8, u64, SchedKind, usize)> = HashMap::new();
    let mut seen: HashMap<u32, Vec<u64>> = HashMap::new();
    for e in events.iter() {
        match e.kind {
            SchedKind::Insert => {
                assert!(!e.write && e.len == 4096, "a 4 KiB read: {e:?}");
                open.insert(e.id(), (e.tid, e.class, e.level, e.offset, SchedKind::Insert, e.device));
            }
            SchedKind::Issue => {
                let r = open.get_mut(&e.id()).expect("issued after its insert");
                assert_eq!(r.4, SchedKind::Insert, "issued once");
                r.4 = SchedKind::Issue;
            }
            SchedKind::Complete => {
                let (tid, class, level, offset, state, device) =
                    open.remove(&e.id()).expect("completed after its insert");
                assert_eq!(state, SchedKind::Issue, "completed after its issue");
                seen.entry(tid).or_default().push(offset);
                let d = done.iter().find(|d| d.0 == tid).expect("a reader's thread");
                assert_eq!((class as u32, level as u32), (d.1, d.2), "its thread's priority");
                assert_eq!((device, e.device), (d.4, d.4), "its own device");
            }
            SchedKind::Merged => panic!("4 KiB reads one at a time do not merge: {e:?}"),
        }
    }
    assert!(open.is_empty(), "every request completed: {open:?}");
    for (tid, _, _, offsets, k) in &done {
        let expected = (*k < 2).then_some(offsets);
        assert_eq!(
            seen.get(tid),
            expected,
            "each read of thread {tid} (device {k}), at its offset, in order"
        );
    }
}

/// The p95 of the gets' latencies, ns.
fn p95(records: &[mix::GetRecord]) -> u64 {
    let mut v: Vec<u64> = records.iter().map(|r| r.latency_ns).collect();
    v.sort_unstable();
    v[v.len() * 95 / 100]
}

#[test]
fn on_loop_devices_under_bfq_mittos_turns_away_the_tries_a_heavier_tenant_would_delay() {
    let name = "on_loop_devices_under_bfq_mittos_turns_away_the_tries_a_heavier_tenant_would_delay";
    if let Err(e) = availability() {
        return skip(name, &e.to_string());
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut loops = Vec::new();
    for i in 0..3 {
        match Loop::new(&format!("mix-{i}.img"), 64, "bfq") {
            Ok(l) => loops.push(l),
            Err(e) => return skip(name, &format!("no loop device: {e}")),
        }
    }
    let opts = |strategy| MixOptions {
        replicas: loops.iter().map(|l| PathBuf::from(&l.dev)).collect(),
        strategy,
        gets_per_s: 100.0,
        get_bytes: 4096,
        store_threads: 8,
        store_prio: Prio::parse("be4").unwrap(),
        data_bytes: 0,
        first: Some(0),
        tenant: Some((
            Tenant {
                threads: 4,
                kib: 4,
                prio: Prio::parse("be0").unwrap(),
                fraction: 1.0,
                period_ms: 100.0,
            },
            vec![0],
        )),
        failover_us: 300.0,
        duration_s: 5.0,
        warmup_s: 1.0,
        seed: 3,
    };
    let (base, report) = mix::run(&opts(Strategy::Base)).expect("a base run");
    let (mitt, _) = mix::run(&opts(Strategy::Mitt { deadline_ns: 2_000_000 })).expect("a MittOS run");
    // The books followed the devices: every insert issued, nothing lost.
    assert_eq!(
        (report.lost, report.stale),
        (0, 0),
        "nothing lost, nothing left waiting"
    );
    assert!(
        report.events[0] > 1000 && report.events[1] >= report.events[0] * 99 / 100,
        "{:?}",
        report.events
    );
    assert!(
        report.schedulers.iter().all(|s| s.ends_with(": bfq")),
        "{:?}",
        report.schedulers
    );
    // Every get after the warm-up was answered (about 400 arrive in 4 s).
    for r in [&base, &mitt] {
        assert!((300..=500).contains(&r.len()), "{} gets", r.len());
    }
    // bfq serves the heavier tenant first: Base's tail waits for its turns; MittOS's first tries
    // on that replica are turned away and the gets are served elsewhere.
    let ebusy: u32 = mitt.iter().map(|r| r.ebusy).sum();
    assert!(ebusy as usize > mitt.len() / 2, "{ebusy} EBUSY for {} gets", mitt.len());
    assert!(mitt.iter().filter(|r| r.served_by != 0).count() > mitt.len() / 2);
    let (b, m) = (p95(&base), p95(&mitt));
    assert!(m * 3 < b, "MittOS p95 {m} ns vs Base {b} ns");
}

#[test]
fn a_replica_that_is_not_a_block_device_is_refused_by_name() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("not-a-device.img");
    std::fs::write(&file, vec![0u8; 1 << 20]).unwrap();
    let opts = MixOptions {
        replicas: vec![file.clone(), file.clone()],
        strategy: Strategy::Base,
        gets_per_s: 10.0,
        get_bytes: 4096,
        store_threads: 1,
        store_prio: Prio::parse("be4").unwrap(),
        data_bytes: 0,
        first: None,
        tenant: None,
        failover_us: 0.0,
        duration_s: 1.0,
        warmup_s: 0.0,
        seed: 1,
    };
    let e = mix::run(&opts).unwrap_err().0;
    assert!(
        e.contains("not-a-device.img") && e.contains("not a block device"),
        "{e}"
    );
    let _ = std::fs::remove_file(file);
}
