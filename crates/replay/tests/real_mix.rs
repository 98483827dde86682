//! The real path of MittCFQ's successor on this machine's kernel (root, eBPF and loop devices
//! needed; otherwise each test prints why it skips): the scheduler watch sees every request
//! with its thread and priority, and on loop devices under bfq with a heavier tenant on the
//! replica every get tries first, MittOS's books turn the slow tries away.

use iolearn_probe::sched::{SchedKind, SchedWatch};
use iolearn_probe::{availability, DeviceId};
use iolearn_replay::mix::{self, MixOptions, Prio, Strategy, Tenant};
use iolearn_tune::testbed::RawLoop;
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
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

/// A loop device under `scheduler` over a fresh written image of `mib` MiB.
fn raw_loop(name: &str, mib: usize, scheduler: &str) -> Result<RawLoop, String> {
    RawLoop::new(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name), mib, scheduler)
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
        match raw_loop(&format!("sched-watch-{i}.img"), 16, "bfq") {
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
            let mut owned = iolearn_replay::AlignedBuf::new(4096);
            let buf = owned.slice(4096);
            let offsets: Vec<u64> = (0..100u64)
                .map(|i| ((i * 37 + k as u64 * 1000) % 4000) * 4096)
                .collect();
            for &o in &offsets {
                assert_eq!(f.read_at(buf, o).expect("a read"), 4096);
            }
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

#[test]
fn on_loop_devices_under_bfq_mittos_turns_away_the_tries_a_heavier_tenant_would_delay() {
    let name = "on_loop_devices_under_bfq_mittos_turns_away_the_tries_a_heavier_tenant_would_delay";
    if let Err(e) = availability() {
        return skip(name, &e.to_string());
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut loops = Vec::new();
    for i in 0..3 {
        match raw_loop(&format!("mix-{i}.img"), 64, "bfq") {
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
        store_prio: Prio::best_effort(4),
        data_bytes: 0,
        first: Some(0),
        tenant: Some((
            Tenant {
                threads: 4,
                kib: 4,
                prio: Prio::best_effort(0),
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
    // Base: the books watched every first try without acting; they predicted for each.
    assert!(base.iter().all(|r| r.predicted_ns > 0 && r.ebusy == 0));
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
    // bfq serves the heavier tenant first: MittOS's first tries on its replica are turned away
    // and the gets served by the next, where the books see no tenant and admit them.
    // (How many depends on whether bfq raises the store's queues in the run: at least a tenth.)
    let ebusy: u32 = mitt.iter().map(|r| r.ebusy).sum();
    assert!(
        ebusy as usize * 10 > mitt.len(),
        "{ebusy} EBUSY for {} gets",
        mitt.len()
    );
    let elsewhere = mitt.iter().filter(|r| r.served_by != 0).count();
    assert!(
        elsewhere * 10 > mitt.len(),
        "{elsewhere} of {} gets served elsewhere",
        mitt.len()
    );
    let twice = mitt.iter().filter(|r| r.ebusy >= 2).count();
    assert!(
        twice * 10 < mitt.len(),
        "{twice} gets turned away by a quiet replica too"
    );
    // What that does to the tail is the benchmark's to say (`iolearn bench mittcfq --real`):
    // bfq's weight raising makes Base's own tail swing between runs (`docs/tail.md`), more so
    // on a loaded machine, and 4 s runs do not settle it.
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
        store_prio: Prio::best_effort(4),
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
