//! `iolearn probe sched` on this machine's kernel (root, eBPF and a loop device needed;
//! otherwise it prints why it skips): two readers at their own I/O priorities on a loop device
//! under bfq, every request of theirs in the CSV, and the summary per priority.

use iolearn_tune::testbed::RawLoop;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// `n` O_DIRECT 4 KiB reads of `dev` at I/O priority `ioprio` from a thread of its own.
fn reader(dev: String, ioprio: u16, first: u64, n: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        iolearn_replay::set_ioprio(ioprio).expect("ioprio_set");
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&dev)
            .expect("open the loop device");
        let mut owned = iolearn_replay::AlignedBuf::new(4096);
        let buf = owned.slice(4096);
        for k in first..first + n {
            assert_eq!(f.read_at(buf, (k % 4000) * 4096).expect("a read"), 4096);
        }
    })
}

#[test]
fn every_request_of_two_priorities_is_recorded_and_summarised_per_priority() {
    let test = "every_request_of_two_priorities_is_recorded_and_summarised_per_priority";
    if iolearn_tune::testbed::skip_test("iolearn (cli)", test) {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let lo = RawLoop::new(&dir.join("probe-sched.img"), 16, "bfq").expect("a loop device");
    let out = dir.join("probe-sched.csv");
    let _ = std::fs::remove_file(&out);
    let readers = std::thread::spawn({
        let dev = lo.dev.clone();
        move || {
            std::thread::sleep(Duration::from_millis(800));
            let a = reader(dev.clone(), (2 << 13) | 1, 0, 300);
            let b = reader(dev, 3 << 13, 2000, 100);
            a.join().unwrap();
            b.join().unwrap();
        }
    });
    // The readers start once the probe has had time to load and attach.
    let probe = Command::new(env!("CARGO_BIN_EXE_iolearn"))
        .args(["probe", "sched", "--device", lo.name(), "--duration", "3", "--out"])
        .arg(&out)
        .output()
        .expect("iolearn probe sched runs");
    readers.join().unwrap();
    let text = String::from_utf8_lossy(&probe.stdout);
    assert!(
        probe.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&probe.stderr)
    );
    // The summary: a row per priority with its requests.
    let row = |prio: &str| {
        text.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(prio))
            .and_then(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
    };
    assert_eq!((row("be1"), row("idle")), (Some(300), Some(100)), "{text}");
    // The CSV: every read inserted at its priority, issued and completed.
    let csv = std::fs::read_to_string(&out).expect("the events");
    let count = |event: &str, prio: &str| {
        csv.lines()
            .filter(|l| {
                let f: Vec<&str> = l.split(',').collect();
                f[2] == event && (prio.is_empty() || f[6] == prio)
            })
            .count()
    };
    assert_eq!((count("insert", "be1"), count("insert", "idle")), (300, 100));
    assert_eq!((count("issue", ""), count("complete", "")), (400, 400));
    let _ = std::fs::remove_file(&out);
}
