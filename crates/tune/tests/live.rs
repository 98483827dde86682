//! The knobs and the journal on this machine's kernel, on a scratch loop device (root needed;
//! elsewhere each test prints why it skips).

use iolearn_policy::controller::ReadaheadKnobs;
use iolearn_tune::journal::Journal;
use iolearn_tune::linux::{fadvise_remote, open_files_on, read_device_kb, LinuxKnobs};
use iolearn_tune::testbed::LoopFs;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

fn skip(test: &str) -> bool {
    iolearn_tune::testbed::skip_test("iolearn-tune", test)
}

fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tune-live")
}

/// A file of `mib` MiB written and synced at `path`, opened for reading.
fn synced_file(path: &std::path::Path, mib: usize) -> File {
    let mut w = File::create(path).unwrap();
    w.write_all(&vec![1u8; mib << 20]).unwrap();
    w.sync_all().unwrap();
    File::open(path).unwrap()
}

/// Pages of `f` (mapped) that are resident after one fault at page `at` of a cold file: the
/// fault's read-around, i.e. the file's readahead window.
fn read_around_pages(f: &File, pages: usize, at: usize) -> usize {
    // SAFETY: read-only shared mapping of an open file, unmapped before returning.
    unsafe {
        libc::fsync(f.as_raw_fd()); // dirty pages cannot be dropped
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        let len = pages * 4096;
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(addr, libc::MAP_FAILED);
        std::ptr::read_volatile((addr as *const u8).add(at * 4096));
        libc::munmap(addr, len);
    }
    resident(f, pages, 0, pages)
}

/// The inode of `f`, a descriptor of this process, as `knobs` found it open.
fn our_ino(knobs: &LinuxKnobs, f: &File) -> u64 {
    knobs
        .open_files()
        .iter()
        .find(|o| o.fd == f.as_raw_fd())
        .expect("our descriptor")
        .ino
}

#[test]
fn per_file_values_reach_other_descriptions_through_pidfd_getfd() {
    if skip("per_file_values_reach_other_descriptions_through_pidfd_getfd") {
        return;
    }
    let fs = LoopFs::create(&scratch(), "knobs", 96).unwrap();
    let path = fs.mountpoint.join("data");
    let f = synced_file(&path, 16);
    let sysfs = iolearn_tune::linux::read_ahead_path(&fs.device);
    let original = read_device_kb(&sysfs).unwrap();
    let mut knobs = LinuxKnobs::new(&fs.device, false).unwrap();
    knobs.pids = vec![std::process::id()];
    knobs.refresh();
    let ino = our_ino(&knobs, &f);
    // A per-file value other than the device's: the device setting is borrowed, then put back.
    for kb in [16u64, 512] {
        knobs.set_file_read_ahead_kb(ino, kb);
        knobs.flush();
        assert!(knobs.take_errors().is_empty());
        assert_eq!(read_device_kb(&sysfs).unwrap(), original, "device setting restored");
        let resident = read_around_pages(&f, 4096, 2048);
        let want = (kb / 4) as usize;
        assert!(
            resident >= want && resident <= want + 16,
            "{kb} KiB: {resident} pages read around"
        );
    }
    // A device change is pushed into files without a per-file value (Linux copies the device
    // value only at open).
    let other = fs.mountpoint.join("other");
    std::fs::write(&other, vec![2u8; 16 << 20]).unwrap();
    let g = File::open(&other).unwrap();
    knobs.refresh();
    let before = read_around_pages(&g, 4096, 2048);
    knobs.set_device_read_ahead_kb(64);
    let after = read_around_pages(&g, 4096, 2048);
    assert!(
        (16..=32).contains(&after),
        "pushed 64 KiB: {after} pages (was {before})"
    );
    assert_eq!(read_device_kb(&sysfs).unwrap(), 64);
    // POSIX_FADV_SEQUENTIAL alone gives twice the device value, NORMAL the device value.
    fadvise_remote(std::process::id(), g.as_raw_fd(), &[libc::POSIX_FADV_SEQUENTIAL]).unwrap();
    let seq = read_around_pages(&g, 4096, 2048);
    assert!((32..=48).contains(&seq), "sequential: {seq} pages");
    // A process's default reaches its open files that have no value of their own (databases
    // open their files up front), and follows the process's next default.
    let third = fs.mountpoint.join("third");
    std::fs::write(&third, vec![3u8; 16 << 20]).unwrap();
    let h = File::open(&third).unwrap();
    knobs.refresh();
    for kb in [16u64, 32] {
        knobs.set_new_file_read_ahead_kb(std::process::id(), kb);
        knobs.flush();
        let resident = read_around_pages(&h, 4096, 2048);
        assert!(
            resident >= (kb / 4) as usize && resident <= (kb / 4) as usize + 16,
            "{kb}: {resident}"
        );
    }
    iolearn_tune::linux::write_device_kb(&sysfs, original).unwrap();
}

/// A child process holding `path` open as its standard input, killed when dropped.
struct Holder(std::process::Child);

impl Holder {
    fn spawn(path: &std::path::Path) -> Holder {
        let child = std::process::Command::new("sleep")
            .arg("120")
            .stdin(File::open(path).unwrap())
            .spawn()
            .unwrap();
        Holder(child)
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    /// Its description of the file (fd 0), duplicated into this process.
    fn description(&self) -> File {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscalls; the returned descriptor is owned by the File.
        unsafe {
            let pidfd = libc::syscall(libc::SYS_pidfd_open, self.pid() as libc::pid_t, 0);
            assert!(pidfd >= 0, "pidfd_open");
            let fd = libc::syscall(libc::SYS_pidfd_getfd, pidfd as i32, 0, 0);
            libc::close(pidfd as i32);
            assert!(fd >= 0, "pidfd_getfd");
            File::from_raw_fd(fd as i32)
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_per_description_value_reaches_only_that_processs_descriptions() {
    if skip("a_per_description_value_reaches_only_that_processs_descriptions") {
        return;
    }
    let fs = LoopFs::create(&scratch(), "descriptions", 96).unwrap();
    let path = fs.mountpoint.join("shared");
    let ours = synced_file(&path, 16);
    let holder = Holder::spawn(&path);
    let theirs = holder.description();
    let sysfs = iolearn_tune::linux::read_ahead_path(&fs.device);
    let original = read_device_kb(&sysfs).unwrap();
    let me = std::process::id();
    let mut knobs = LinuxKnobs::new(&fs.device, false).unwrap();
    knobs.pids = vec![me, holder.pid()];
    // The child has just been spawned: wait until its descriptor shows.
    let mut ino = None;
    for _ in 0..100 {
        knobs.refresh();
        let of = |pid| {
            knobs
                .open_files()
                .iter()
                .find(|o| o.pid == pid && o.ino == ours_ino(&ours))
                .map(|o| o.ino)
        };
        if let (Some(a), Some(_)) = (of(me), of(holder.pid())) {
            ino = Some(a);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let ino = ino.expect("both processes' descriptions of the file");
    let window = |f: &File| read_around_pages(f, 4096, 2048);
    let near = |pages: usize, kb: u64| pages >= (kb / 4) as usize && pages <= (kb / 4) as usize + 16;
    // A scanner's value and a random reader's value on one file.
    knobs.set_description_read_ahead_kb(holder.pid(), ino, 512);
    knobs.set_description_read_ahead_kb(me, ino, 16);
    assert_eq!(knobs.description_read_ahead_kb(me, ino), 16);
    knobs.flush();
    assert!(knobs.take_errors().is_empty());
    assert_eq!(read_device_kb(&sysfs).unwrap(), original, "device setting restored");
    let (a, b) = (window(&ours), window(&theirs));
    assert!(near(a, 16) && near(b, 512), "ours {a} pages, theirs {b}");
    // A device change leaves descriptions with values of their own alone.
    knobs.set_device_read_ahead_kb(64);
    let (a, b) = (window(&ours), window(&theirs));
    assert!(
        near(a, 16) && near(b, 512),
        "after a device change: ours {a}, theirs {b}"
    );
    // A description opened since by the same process copies the device's value; the next scan
    // gives it the process's value for the file.
    let again = File::open(&path).unwrap();
    knobs.refresh();
    knobs.flush();
    let c = window(&again);
    assert!(near(c, 16), "a second descriptor of ours: {c} pages");
    // The two processes disagree: the file as a whole has no value but the device's.
    assert_eq!(knobs.file_read_ahead_kb(ino), 64);
    // A file's value replaces both descriptions' own.
    knobs.set_file_read_ahead_kb(ino, 32);
    knobs.flush();
    let (a, b) = (window(&ours), window(&theirs));
    assert!(near(a, 32) && near(b, 32), "per file: ours {a}, theirs {b}");
    assert_eq!(knobs.description_read_ahead_kb(holder.pid(), ino), 32);
    iolearn_tune::linux::write_device_kb(&sysfs, original).unwrap();
}

fn ours_ino(f: &File) -> u64 {
    use std::os::unix::fs::MetadataExt;
    f.metadata().unwrap().ino()
}

#[test]
fn the_journal_restores_the_device_and_files() {
    if skip("the_journal_restores_the_device_and_files") {
        return;
    }
    let fs = LoopFs::create(&scratch(), "journal", 64).unwrap();
    let sysfs = iolearn_tune::linux::read_ahead_path(&fs.device);
    let state = scratch().join("state-journal");
    let original = read_device_kb(&sysfs).unwrap();
    let mut j = Journal::begin(&state, &fs.device).unwrap();
    iolearn_tune::linux::write_device_kb(&sysfs, 16).unwrap();
    let path = fs.mountpoint.join("f");
    std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
    let f = File::open(&path).unwrap();
    // The application asked for random access; the tuner's pushes and restores keep that.
    // SAFETY: a valid descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    use std::os::unix::fs::MetadataExt;
    let seen = |advice| iolearn_tune::linux::OpenFile {
        pid: std::process::id(),
        fd: f.as_raw_fd(),
        ino: f.metadata().unwrap().ino(),
        advice,
    };
    // First seen as normal, then the application advised random: the latest is restored.
    j.note_files(&[seen(iolearn_tune::linux::Advice::Normal)]).unwrap();
    j.note_files(&[seen(iolearn_tune::linux::Advice::Random)]).unwrap();
    assert_eq!(
        Journal::load(&j.path).unwrap().files,
        vec![seen(iolearn_tune::linux::Advice::Random)]
    );
    // A crash here: the next start finds the journal.
    let loaded = Journal::load(&j.path).unwrap();
    assert_eq!(loaded, j);
    let mut lock = iolearn_tune::lock_device(&fs.device).unwrap();
    assert!(iolearn_tune::lock_device(&fs.device).is_err(), "one holder per device");
    let restored = iolearn_tune::restore_left_over(&state, &fs.device, &mut lock);
    assert!(restored.unwrap().is_some());
    assert_eq!(read_device_kb(&sysfs).unwrap(), original);
    assert!(!j.path.exists(), "journal removed after restoring");
    let mut probe = iolearn_probe::Probe::start(&iolearn_probe::ProbeConfig {
        device: Some(iolearn_probe::DeviceId::from_name(&fs.device).unwrap()),
        pids: vec![std::process::id()],
        filter_pids: true,
        ..Default::default()
    })
    .unwrap();
    let m = probe
        .open_files()
        .unwrap()
        .into_iter()
        .find(|m| m.fd == f.as_raw_fd() as u32)
        .unwrap();
    assert!(m.random(), "POSIX_FADV_RANDOM kept through the restore: {m:?}");
    assert_eq!(m.ra_pages as u64, original / 4, "and the original readahead: {m:?}");
    assert!(iolearn_tune::restore_left_over(&state, &fs.device, &mut lock)
        .unwrap()
        .is_none());
}

#[test]
fn bad_journals_name_the_file_and_line() {
    let dir = scratch().join("bad-journal");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("readahead-loop9.journal");
    let doc = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = serde_json::json!({
            "format": "iolearn-readahead-journal",
            "version": 1,
            "device": "loop9",
            "sysfs": "/sys/class/block/loop9/queue/read_ahead_kb",
            "original_read_ahead_kb": 128,
            "tuner_pid": 1,
            "files": [{"pid": 1, "fd": 3, "ino": 7}],
        });
        edit(&mut v);
        v.to_string()
    };
    for (text, want) in [
        ("nope\n".to_string(), "not an iolearn readahead journal"),
        (doc(&|v| v["format"] = "other".into()), "format"),
        (
            doc(&|v| v["original_read_ahead_kb"] = "lots".into()),
            "original_read_ahead_kb",
        ),
        (doc(&|v| v["files"] = serde_json::json!([{"pid": 1, "fd": 2}])), "ino"),
        (doc(&|v| drop(v.as_object_mut().unwrap().remove("sysfs"))), "sysfs"),
        (doc(&|v| v["surprise"] = 1.into()), "surprise"),
        // Numbers that an `as` cast would wrap.
        (doc(&|v| v["tuner_pid"] = 4294967297u64.into()), "tuner_pid"),
        (doc(&|v| v["files"][0]["fd"] = (-3).into()), "fd"),
        (doc(&|v| v["files"][0]["advice"] = "willneed".into()), "advice"),
        (doc(&|v| v["files"][0]["fd"] = 4294967296u64.into()), "fd"),
        (
            doc(&|v| v["original_read_ahead_kb"] = 99999999999u64.into()),
            "original_read_ahead_kb",
        ),
        (doc(&|v| v["device"] = "../../../etc".into()), "not a block device name"),
        // A forged sysfs path: --restore must never write anywhere but the device's own file.
        (doc(&|v| v["sysfs"] = "/etc/motd".into()), "refusing to restore"),
        (
            doc(&|v| v["sysfs"] = "/sys/class/block/vda/queue/read_ahead_kb".into()),
            "refusing to restore",
        ),
    ] {
        std::fs::write(&p, text).unwrap();
        let e = Journal::load(&p).unwrap_err().to_string();
        assert!(e.contains("readahead-loop9.journal") && e.contains(want), "{e}");
    }
}

#[test]
fn a_description_opened_before_the_device_was_halved_is_not_taken_for_sequential() {
    if skip("a_description_opened_before_the_device_was_halved_is_not_taken_for_sequential") {
        return;
    }
    use iolearn_tune::linux::Advice;
    let fs = LoopFs::create(&scratch(), "advice", 64).unwrap();
    let path = fs.mountpoint.join("f");
    std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
    let f = File::open(&path).unwrap();
    let me = std::process::id();
    let mode = |ra_pages: u32| iolearn_probe::OpenFileMode {
        tgid: me,
        fd: f.as_raw_fd() as u32,
        ino: ours_ino(&f),
        dev: 0,
        f_mode: 0,
        ra_pages,
        mmap_miss: 0,
    };
    let advice = |k: &LinuxKnobs| k.open_files().iter().find(|o| o.fd == f.as_raw_fd()).map(|o| o.advice);
    // Dry: the device value is only noted, nothing is written.
    let mut knobs = LinuxKnobs::new(&fs.device, true).unwrap();
    knobs.pids = vec![me];
    knobs.refresh();
    knobs.set_device_read_ahead_kb(128);
    knobs.note_modes(&[]);
    // Opened at 128 KiB (32 pages), seen after the device went to 64 KiB: its own value then,
    // not POSIX_FADV_SEQUENTIAL.
    knobs.set_device_read_ahead_kb(64);
    knobs.note_modes(&[mode(32)]);
    assert_eq!(advice(&knobs), Some(Advice::Normal));
    // Closed (gone from the iterator's list): forgotten; seen again at twice a value that was
    // the device's all along: SEQUENTIAL.
    knobs.note_modes(&[]);
    knobs.note_modes(&[mode(32)]);
    assert_eq!(advice(&knobs), Some(Advice::Sequential));
}

#[test]
fn a_description_left_only_in_a_mapping_is_reported_as_stranded() {
    if skip("a_description_left_only_in_a_mapping_is_reported_as_stranded") {
        return;
    }
    use std::io::BufRead;
    let fs = LoopFs::create(&scratch(), "stranded", 64).unwrap();
    let path = fs.mountpoint.join("mapped");
    std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
    let kept = fs.mountpoint.join("kept");
    std::fs::write(&kept, vec![2u8; 1 << 20]).unwrap();
    // A process that maps the file, closes its descriptor (as RocksDB's mmap reads do) and
    // keeps the mapping.
    let script = "import mmap, os, sys\n\
                  fd = os.open(sys.argv[1], os.O_RDONLY)\n\
                  m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)\n\
                  print(fd, flush=True)\n\
                  os.close(fd)\n\
                  sys.stdin.readline()\n";
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let fd: i32 = line.trim().parse().unwrap();
    let pid = child.id();
    let f = File::open(&kept).unwrap();
    let dev = iolearn_probe::DeviceId::from_name(&fs.device).unwrap();
    let user_dev = libc::makedev(dev.major, dev.minor);
    let ino = std::fs::metadata(&path)
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap();
    assert!(iolearn_tune::linux::mapped_inodes(pid, user_dev).contains(&ino));
    assert!(
        iolearn_tune::linux::mapped_inodes(pid, user_dev + 1).is_empty(),
        "another device"
    );
    let state = scratch().join("state-stranded");
    let mut j = Journal::begin(&state, &fs.device).unwrap();
    let advice = iolearn_tune::linux::Advice::Normal;
    j.note_files(&[
        iolearn_tune::linux::OpenFile { pid, fd, ino, advice },
        iolearn_tune::linux::OpenFile {
            pid: std::process::id(),
            fd: f.as_raw_fd(),
            ino: ours_ino(&f),
            advice,
        },
    ])
    .unwrap();
    assert_eq!(
        j.stranded(),
        vec![(pid, ino)],
        "only the mapped one without a descriptor"
    );
    assert!(j.restore().is_empty());
    let _ = child.kill();
    let _ = child.wait();
}

/// A cgroup v1 memory group of its own, removed when dropped.
struct Cgroup(PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn the_tuner_follows_a_cgroups_processes_in_and_out() {
    if skip("the_tuner_follows_a_cgroups_processes_in_and_out") {
        return;
    }
    let root = PathBuf::from("/sys/fs/cgroup/memory");
    if !root.is_dir() {
        eprintln!("SKIP the_tuner_follows_a_cgroups_processes_in_and_out: no cgroup v1 memory controller");
        return;
    }
    let cg = Cgroup(root.join(format!("iolearn-follow-test-{}", std::process::id())));
    std::fs::create_dir(&cg.0).unwrap();
    let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    std::fs::write(cg.0.join("cgroup.procs"), child.id().to_string()).unwrap();
    let mut probe = iolearn_probe::Probe::start(&iolearn_probe::ProbeConfig {
        filter_pids: true,
        ..Default::default()
    })
    .unwrap();
    // pid 1 is named on the command line: it stays, in the cgroup or not.
    let named = [1];
    let mut pids = vec![1];
    assert!(iolearn_tune::follow_cgroup(&cg.0, &named, &mut pids, &mut probe).is_empty());
    assert_eq!(pids, [1, child.id()]);
    assert!(probe.watches(child.id()).unwrap());
    child.kill().unwrap();
    child.wait().unwrap();
    // Gone from the cgroup: no longer watched (its number may go to a process that is none of ours).
    assert_eq!(
        iolearn_tune::follow_cgroup(&cg.0, &named, &mut pids, &mut probe),
        [child.id()]
    );
    assert_eq!(pids, [1]);
    assert!(!probe.watches(child.id()).unwrap());
    // A member of a group below it is still the cgroup's (cgroup.procs lists direct members
    // only).
    let sub = Cgroup(cg.0.join("sub"));
    std::fs::create_dir(&sub.0).unwrap();
    let mut grandchild = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    std::fs::write(sub.0.join("cgroup.procs"), grandchild.id().to_string()).unwrap();
    assert!(iolearn_tune::follow_cgroup(&cg.0, &named, &mut pids, &mut probe).is_empty());
    assert_eq!(pids, [1, grandchild.id()]);
    grandchild.kill().unwrap();
    grandchild.wait().unwrap();
    drop(sub);
    // A cgroup that cannot be read changes nothing.
    let mut before = vec![1, 2, 3];
    assert!(iolearn_tune::follow_cgroup(&cg.0.join("gone"), &named, &mut before, &mut probe).is_empty());
    assert_eq!(before, [1, 2, 3]);
    // No process left to watch is nobody's files, not everybody's.
    let f = File::open(std::env::current_exe().unwrap()).unwrap();
    let dev = std::os::unix::fs::MetadataExt::dev(&f.metadata().unwrap());
    let fd = f.as_raw_fd();
    let mine = |o: &[iolearn_tune::linux::OpenFile]| o.iter().any(|o| o.pid == std::process::id() && o.fd == fd);
    assert!(mine(&open_files_on(dev, None)));
    assert!(open_files_on(dev, Some(&[])).is_empty());
}

#[test]
fn a_process_that_left_takes_its_values_with_it() {
    if skip("a_process_that_left_takes_its_values_with_it") {
        return;
    }
    let fs = LoopFs::create(&scratch(), "forget", 64).unwrap();
    let mut knobs = LinuxKnobs::new(&fs.device, true).unwrap();
    knobs.pids = vec![1, 2];
    knobs.set_device_read_ahead_kb(128);
    knobs.set_description_read_ahead_kb(1, 77, 16);
    knobs.set_description_read_ahead_kb(2, 77, 512);
    knobs.flush();
    assert_eq!(knobs.description_read_ahead_kb(1, 77), 16);
    knobs.forget_process(1);
    // Its number, given to another process, starts from the device's value; the other keeps its own.
    assert_eq!(knobs.description_read_ahead_kb(1, 77), 128);
    assert_eq!(knobs.description_read_ahead_kb(2, 77), 512);
    // A cgroup with no process left: nobody's files are the tuner's to touch, where a tuner
    // with neither --pid nor --cgroup sees everybody's.
    let path = fs.mountpoint.join("f");
    std::fs::write(&path, vec![0u8; 4096]).unwrap();
    let f = File::open(&path).unwrap();
    let mine = |k: &LinuxKnobs| {
        k.open_files()
            .iter()
            .any(|o| o.fd == f.as_raw_fd() && o.pid == std::process::id())
    };
    knobs.pids.clear();
    knobs.refresh();
    assert!(knobs.open_files().is_empty());
    knobs.every_process = true;
    knobs.refresh();
    assert!(mine(&knobs));
}

#[test]
fn a_cached_reader_is_watched_in_slices_and_its_reads_are_still_counted() {
    if skip("a_cached_reader_is_watched_in_slices_and_its_reads_are_still_counted") {
        return;
    }
    let fs = LoopFs::create(&scratch(), "sampling", 64).unwrap();
    let path = fs.mountpoint.join("data");
    std::fs::write(&path, vec![7u8; 16 << 20]).unwrap();
    let f = File::open(&path).unwrap();
    let pages = 4096u64;
    // Cached: every page read once before.
    std::io::copy(&mut File::open(&path).unwrap(), &mut std::io::sink()).unwrap();
    let reader = RandomReader::start(f, pages, false);
    let reads = reader.reads.clone();
    let model = always_16_kib("sampling-16k.iolm");
    let run = |share: f64| {
        let spec = iolearn_policy::controller::ControllerSpec::Model(model.clone());
        let mut cfg = iolearn_tune::TuneConfig::new(&fs.device, spec);
        cfg.pids = vec![std::process::id()];
        cfg.interval = std::time::Duration::from_millis(500);
        cfg.duration = Some(std::time::Duration::from_secs(4));
        cfg.dry_run = true;
        cfg.guard = None;
        cfg.sampling.share = share;
        cfg.state_dir = scratch().join("state");
        let before = reads.load(std::sync::atomic::Ordering::Relaxed);
        let s = iolearn_tune::run(&cfg, &std::sync::atomic::AtomicBool::new(false)).unwrap();
        let truth = reads.load(std::sync::atomic::Ordering::Relaxed) - before;
        (s.metrics, truth)
    };
    let (sampled, truth) = run(0.05);
    let (whole, truth_whole) = run(1.0);
    reader.stop();
    // Windows after the first are all hits, busy: sampled. Watching every window samples none.
    assert!(sampled.sampled_windows >= 5, "{sampled:?}");
    assert_eq!(whole.sampled_windows, 0);
    // No decision is taken on a slice: the model decides on the whole windows only.
    let decided = |m: &iolearn_tune::report::Metrics| m.decisions.values().sum::<u64>();
    assert_eq!(
        decided(&sampled),
        sampled.windows - sampled.sampled_windows,
        "{sampled:?}"
    );
    assert_eq!(decided(&whole), whole.windows, "{whole:?}");
    // The reads a sampled run counts (a twentieth of each window, scaled) are the reads done,
    // as a run that watched everything counts them (the windows cover the run but its start),
    // less the probes' own cost: watched, the reader reads a fifth to a quarter slower, and
    // the slice sees that rate (measured: 0.70 of the reads, the whole run 0.98). Unscaled it
    // would be a twentieth.
    let share = |m: &iolearn_tune::report::Metrics, t: u64| m.pages_accessed as f64 / t as f64;
    let (s, w) = (share(&sampled, truth), share(&whole, truth_whole));
    eprintln!("reads counted / done: sampled {s:.3}, whole {w:.3}");
    assert!(
        (0.5..=1.2).contains(&s),
        "sampled: {} of {truth} reads",
        sampled.pages_accessed
    );
    assert!(
        (0.8..=1.1).contains(&w),
        "whole: {} of {truth_whole} reads",
        whole.pages_accessed
    );
}

#[test]
fn a_busy_reader_the_tuner_has_nothing_more_to_do_for_is_watched_one_window_in_n() {
    if skip("a_busy_reader_the_tuner_has_nothing_more_to_do_for_is_watched_one_window_in_n") {
        return;
    }
    let fs = LoopFs::create(&scratch(), "resting", 64).unwrap();
    let path = fs.mountpoint.join("data");
    std::fs::write(&path, vec![7u8; 16 << 20]).unwrap();
    // Written back and dropped, so that dropping a page drops it: a dirty page stays, and so
    // does a large folio the write made when only part of it is dropped (the reads below
    // bring pages back one by one).
    let f = File::open(&path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: advice on a valid descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let pages = 4096u64;
    // Random reads that all miss: each page is dropped from the cache once read.
    let reader = RandomReader::start(f, pages, true);
    let reads = reader.reads.clone();
    let spec = iolearn_policy::controller::ControllerSpec::Model(always_16_kib("resting-16k.iolm"));
    let run = |rest_every: u32| {
        let mut cfg = iolearn_tune::TuneConfig::new(&fs.device, spec.clone());
        cfg.pids = vec![std::process::id()];
        cfg.interval = std::time::Duration::from_millis(250);
        cfg.duration = Some(std::time::Duration::from_secs(6));
        cfg.dry_run = true;
        cfg.guard = None;
        cfg.sampling.rest_every = rest_every;
        // Busy enough to rest on however slow the reader is beside the other tests.
        cfg.sampling.min_access_rate = 1_000.0;
        cfg.state_dir = scratch().join("state");
        let before = reads.load(std::sync::atomic::Ordering::Relaxed);
        let s = iolearn_tune::run(&cfg, &std::sync::atomic::AtomicBool::new(false)).unwrap();
        (s.metrics, reads.load(std::sync::atomic::Ordering::Relaxed) - before)
    };
    let (rested, truth) = run(8);
    let (awake, truth_awake) = run(1);
    reader.stop();
    eprintln!("resting: {rested:?}\nawake: {awake:?}");
    // Reads that miss (not all are dropped in time: a tenth to a third miss), so windows that
    // are not all hits: a run that never rests watches every window.
    assert!(
        awake.pages_added as f64 > 0.05 * awake.pages_accessed as f64,
        "{awake:?}"
    );
    assert_eq!(awake.sampled_windows, 0, "{awake:?}");
    // The change at the first window, three quiet ones, then seven slices in eight: of 24
    // windows, at least twelve rested. A slice of 12 ms in which the reader was held up (by a
    // busy machine) wakes the tuner, which rests again after three quiet windows.
    assert_eq!(rested.sampled_windows, rested.rested_windows, "{rested:?}");
    assert!(rested.wakes <= 3, "{rested:?}");
    assert!(rested.rested_windows + 4 * rested.wakes >= 12, "{rested:?}");
    // Decisions on whole windows only.
    let decided = rested.decisions.values().sum::<u64>();
    assert_eq!(decided, rested.windows - rested.rested_windows, "{rested:?}");
    assert_eq!(awake.decisions.values().sum::<u64>(), awake.windows);
    // What the slices count, scaled, is still the reads done (one access each), as watching
    // every window counts them.
    let per_read = |m: &iolearn_tune::report::Metrics, t: u64| m.pages_accessed as f64 / t as f64;
    let (r, a) = (per_read(&rested, truth), per_read(&awake, truth_awake));
    eprintln!("accesses counted per read: resting {r:.3}, awake {a:.3}");
    assert!((0.6..=1.3).contains(&r), "resting {r}");
    assert!((0.8..=1.1).contains(&a), "awake {a}");
}

#[test]
fn with_auto_progress_a_readers_windows_are_judged_by_the_pages_it_read() {
    if skip("with_auto_progress_a_readers_windows_are_judged_by_the_pages_it_read") {
        return;
    }
    let fs = LoopFs::create(&scratch(), "progress", 64).unwrap();
    let path = fs.mountpoint.join("data");
    std::fs::write(&path, vec![7u8; 16 << 20]).unwrap();
    let reader = RandomReader::start(File::open(&path).unwrap(), 4096, false);
    let reads = reader.reads.clone();
    let run = |progress| {
        let mut cfg = iolearn_tune::TuneConfig::new(&fs.device, iolearn_policy::controller::ControllerSpec::Vanilla);
        cfg.pids = vec![std::process::id()];
        cfg.interval = std::time::Duration::from_millis(500);
        cfg.duration = Some(std::time::Duration::from_secs(3));
        // Changes nothing and takes no lock: the other tests run tuners beside it.
        cfg.dry_run = true;
        cfg.sampling.share = 1.0;
        cfg.progress = progress;
        cfg.state_dir = scratch().join("state");
        let before = reads.load(std::sync::atomic::Ordering::Relaxed);
        let s = iolearn_tune::run(&cfg, &std::sync::atomic::AtomicBool::new(false)).unwrap();
        (s.metrics, reads.load(std::sync::atomic::Ordering::Relaxed) - before)
    };
    let (auto, truth) = run(iolearn_tune::outcome::Progress::Auto);
    let (cpu, _) = run(iolearn_tune::outcome::Progress::Cpu);
    reader.stop();
    // Every window a reader's (one page a read, counted once): judged by the pages read, which
    // are the reads done (the windows cover the run but its start). Other tests' reads of
    // this process on other devices are not the device's.
    assert_eq!(auto.read_progress_windows, auto.windows, "{auto:?}");
    let share = auto.pages_read as f64 / truth as f64;
    assert!(
        (0.8..=1.05).contains(&share),
        "{} pages read of {truth} reads",
        auto.pages_read
    );
    // By user time, reads are not counted at all.
    assert_eq!((cpu.read_progress_windows, cpu.pages_read), (0, 0), "{cpu:?}");
}

#[test]
fn an_applications_own_count_judges_the_decisions_with_no_process_named() {
    if skip("an_applications_own_count_judges_the_decisions_with_no_process_named") {
        return;
    }
    let fs = LoopFs::create(&scratch(), "opscount", 64).unwrap();
    let path = fs.mountpoint.join("data");
    std::fs::write(&path, vec![7u8; 16 << 20]).unwrap();
    // Random reads that miss, so the model has windows to decide on (16 KiB, always).
    let reader = RandomReader::start(File::open(&path).unwrap(), 4096, true);
    let sysfs = format!("/sys/block/{}/queue/read_ahead_kb", fs.device);
    let kb = || std::fs::read_to_string(&sysfs).unwrap().trim().parse::<u64>().unwrap();
    let vanilla = kb();
    let model = always_16_kib("opscount-16k.iolm");
    // An application that reports its operations in a file: 5,000 a second while the device
    // is at the kernel's value, `slowed` a second while it is not, counted by the time passed
    // (smooth, whatever the ticks), written whole and renamed into place (its real work is the
    // reader's; the count is what it says it did).
    let run = |slowed: f64, name: &str| {
        let count = scratch().join(name);
        std::fs::write(&count, "0\n").unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let app = {
            let (done, count, sysfs) = (done.clone(), count.clone(), sysfs.clone());
            std::thread::spawn(move || {
                let (mut n, mut last) = (0.0f64, std::time::Instant::now());
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let now: u64 = std::fs::read_to_string(&sysfs).unwrap().trim().parse().unwrap();
                    let rate = if now == vanilla { 5000.0 } else { slowed };
                    n += rate * last.elapsed().as_secs_f64();
                    last = std::time::Instant::now();
                    let tmp = count.with_extension("tmp");
                    std::fs::write(&tmp, format!("{n:.3}\n")).unwrap();
                    std::fs::rename(&tmp, &count).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            })
        };
        let spec = iolearn_policy::controller::ControllerSpec::Model(model.clone());
        let mut cfg = iolearn_tune::TuneConfig::new(&fs.device, spec);
        // No process named: the count alone is the measure, and the guardrail stays on.
        cfg.progress = iolearn_tune::outcome::Progress::Ops(count.clone());
        cfg.interval = std::time::Duration::from_millis(500);
        cfg.duration = Some(std::time::Duration::from_secs(9));
        cfg.sampling.share = 1.0;
        cfg.state_dir = scratch().join("state");
        let s = iolearn_tune::run(&cfg, &std::sync::atomic::AtomicBool::new(false)).unwrap();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        app.join().unwrap();
        assert_eq!(kb(), vanilla, "the device is restored");
        s.metrics
    };
    let hurt = run(1500.0, "opscount-hurt");
    let even = run(5000.0, "opscount-even");
    reader.stop();
    eprintln!("hurt: {hurt:?}\neven: {even:?}");
    // Every window is measured by the count (the first from the count read at the start).
    for m in [&hurt, &even] {
        assert!(m.ops_progress_windows + 1 >= m.windows && m.windows >= 10, "{m:?}");
    }
    // A count that cannot be read fails the start, naming the file, before anything changes.
    let mut cfg = iolearn_tune::TuneConfig::new(
        &fs.device,
        iolearn_policy::controller::ControllerSpec::Model(model.clone()),
    );
    let missing = scratch().join("opscount-missing");
    cfg.progress = iolearn_tune::outcome::Progress::Ops(missing.clone());
    cfg.state_dir = scratch().join("state");
    let err = iolearn_tune::run(&cfg, &std::sync::atomic::AtomicBool::new(false)).unwrap_err();
    assert!(
        err.contains(&format!("--progress ops:{}", missing.display())) && err.contains("cannot open"),
        "{err}"
    );
    // 16 KiB cut the application's count to 30%: reverted, by the count; where it made no
    // difference to it, kept.
    assert!(hurt.guard_reverted >= 1, "{hurt:?}");
    assert_eq!(hurt.guard_kept, 0, "{hurt:?}");
    assert!(even.guard_kept >= 1, "{even:?}");
    assert_eq!(even.guard_reverted, 0, "{even:?}");
}

/// A model that always asks for 16 KiB (both of its classes do): it decides on every window it
/// is given features for.
fn always_16_kib(name: &str) -> std::path::PathBuf {
    let model = scratch().join(name);
    let mut m = iolearn_ml::ModelFile::new(
        iolearn_ml::ModelKind::Tree(
            iolearn_ml::DecisionTree::fit(
                &[1.0f32, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0],
                &[0.0f32, 1.0],
                5,
                &iolearn_ml::TreeConfig::default(),
            )
            .unwrap(),
        ),
        iolearn_ml::kml::READAHEAD_SCHEMA,
    );
    m.classes = ["random", "random too"]
        .map(|label| iolearn_ml::ClassAction {
            label: label.into(),
            action: 16,
        })
        .to_vec();
    m.action_unit = "read_ahead_kb".into();
    m.save(&model).unwrap();
    model
}

/// A thread reading one page at a time at random offsets of a file's first `pages` pages,
/// counting its reads, each page dropped from the cache once read if `drop`.
struct RandomReader {
    reads: std::sync::Arc<std::sync::atomic::AtomicU64>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl RandomReader {
    fn start(f: File, pages: u64, drop: bool) -> RandomReader {
        let reads = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (r, d) = (reads.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut x = 0x9E3779B97F4A7C15u64;
            while !d.load(std::sync::atomic::Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let off = ((x % pages) * 4096) as i64;
                // SAFETY: a valid descriptor and a buffer of one page.
                let n = unsafe { libc::pread(f.as_raw_fd(), buf.as_mut_ptr().cast(), 4096, off) };
                assert_eq!(n, 4096);
                if drop {
                    // SAFETY: advice on a valid descriptor.
                    unsafe { libc::posix_fadvise(f.as_raw_fd(), off, 4096, libc::POSIX_FADV_DONTNEED) };
                }
                r.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        RandomReader { reads, done, thread }
    }

    fn stop(self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap();
    }
}

/// How many of pages `from..from + n` of `f` (`file_pages` long) are in the page cache.
fn resident(f: &File, file_pages: usize, from: usize, n: usize) -> usize {
    // SAFETY: read-only shared mapping of an open file, unmapped before returning; mincore
    // writes one byte per page into a vector of that many.
    unsafe {
        let len = file_pages * 4096;
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(addr, libc::MAP_FAILED);
        let mut vec = vec![0u8; file_pages];
        libc::mincore(addr, len, vec.as_mut_ptr());
        libc::munmap(addr, len);
        vec[from..from + n].iter().filter(|&&b| b & 1 == 1).count()
    }
}

#[test]
fn a_smaller_value_pushed_drops_what_a_running_stream_read_ahead() {
    // The kernel never shrinks a sequential stream's open window (scripts/ra-push-shrink.sh):
    // with the push of a smaller value, the pages read ahead of where the stream last read
    // are dropped, so that its next read misses and the window is built from the new limit.
    // Not where the stream's place is unknown, and not for a raise.
    if skip("a_smaller_value_pushed_drops_what_a_running_stream_read_ahead") {
        return;
    }
    let fs = LoopFs::create(&scratch(), "shrink", 96).unwrap();
    let path = fs.mountpoint.join("data");
    let f = synced_file(&path, 32);
    let pages = (32 << 20) / 4096;
    let sysfs = iolearn_tune::linux::read_ahead_path(&fs.device);
    let original = read_device_kb(&sysfs).unwrap();
    let mut knobs = LinuxKnobs::new(&fs.device, false).unwrap();
    knobs.pids = vec![std::process::id()];
    knobs.set_device_read_ahead_kb(128);
    // SAFETY: a valid descriptor; the cache of the file emptied, then 8 MiB read in order.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    knobs.refresh();
    let ino = our_ino(&knobs, &f);
    let mut buf = vec![0u8; 16 << 10];
    for off in (0..8 << 20).step_by(16 << 10) {
        // SAFETY: a valid descriptor and a buffer of the length read.
        assert_eq!(
            unsafe { libc::pread(f.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), off as i64) },
            16 << 10
        );
    }
    let last = (8 << 20) / 4096 - 1;
    let ahead = || resident(&f, pages, last + 1, 128);
    assert!(ahead() > 0, "the stream read ahead of its last page");
    knobs.set_device_read_ahead_kb(64);
    assert!(ahead() > 0, "the stream's place unknown: nothing dropped");
    knobs.note_positions([(std::process::id(), ino, 0, last as u64)]);
    knobs.set_device_read_ahead_kb(256);
    assert!(ahead() > 0, "a raise drops nothing");
    knobs.set_device_read_ahead_kb(16);
    assert_eq!(ahead(), 0, "the pages read ahead of the stream dropped");
    assert!(resident(&f, pages, 0, 64) > 0, "the pages before it stay");
    assert!(knobs.take_errors().is_empty());
    knobs.set_device_read_ahead_kb(original);
}
