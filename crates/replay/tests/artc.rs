//! ARTC's model and rules, checked against the examples of the source (Weiss, ch. 2).

use iolearn_replay::artc::{action_series, compile, Mode, Rules};
use iolearn_trace::sys::{Call, SysRecord, SysTrace};

/// A record: thread `tid` of process 1 calls `call` at `t` (returning 1 later).
fn rec(tid: u32, t: u64, call: Call, ret: i64) -> SysRecord {
    SysRecord {
        pid: 1,
        tid,
        enter_ns: t,
        exit_ns: Some(t + 1),
        call: Some(call),
        ret,
        ..Default::default()
    }
}

fn with_path(mut r: SysRecord, p: &str) -> SysRecord {
    r.path = Some(p.as_bytes().to_vec());
    r
}

fn trace(mut records: Vec<SysRecord>) -> SysTrace {
    for (i, r) in records.iter_mut().enumerate() {
        r.id = i as u64;
    }
    SysTrace {
        records,
        ..Default::default()
    }
}

/// Figure 2.2's trace: two threads, a directory created, a file written in it, the directory
/// renamed, and its old name opened again.
fn figure_2_2() -> SysTrace {
    let mut open_c = with_path(rec(1, 20, Call::Open, 3), "/a/b/c");
    open_c.flags = Some(libc::O_CREAT as u64 | libc::O_WRONLY as u64);
    let mut write = rec(1, 30, Call::Write, 8);
    write.fd = Some(3);
    let mut close = rec(1, 40, Call::Close, 0);
    close.fd = Some(3);
    let mut rename = with_path(rec(1, 50, Call::Rename, 0), "/a/b");
    rename.path2 = Some(b"/a/old".to_vec());
    trace(vec![
        with_path(rec(1, 10, Call::Mkdir, 0), "/a/b"),
        open_c,
        write,
        close,
        rename,
        with_path(rec(2, 60, Call::Open, 3), "/x/y/z"),
        with_path(rec(2, 70, Call::Open, 4), "/a/b"),
    ])
}

#[test]
fn figure_2_2_action_series() {
    let got = action_series(&figure_2_2());
    // Inodes in the order the model meets them: /, /a, /a/b, /a/b/c, /x, /x/y, /x/y/z, and
    // the file the last open finds at /a/b.
    let (dir_a, dir_b, file1, dir_y, file2, file3) = ("file#1", "file#2", "file#3", "file#5", "file#6", "file#7");
    let want: Vec<(&str, Vec<u32>)> = vec![
        (dir_a, vec![0, 4, 6]),
        (dir_b, vec![0, 1, 4]),
        (dir_y, vec![5]),
        // The figure's table gives file1 actions 2-4 (1-based), while its resource list for the
        // rename names file1 too ("touches all it transitively points to"): the rename is kept.
        (file1, vec![1, 2, 3, 4]),
        (file2, vec![5]),
        (file3, vec![6]),
        ("path(/a/b)@1", vec![0, 4]),
        ("path(/a/b)@2", vec![6]),
        ("path(/a/b/c)@1", vec![1, 4]),
        ("path(/a/old)@1", vec![4]),
        ("path(/a/old/c)@1", vec![4]),
        ("path(/x/y/z)@1", vec![5]),
        ("fd3@1 of 1", vec![1, 2, 3]),
        ("fd3@2 of 1", vec![5]),
        ("fd4@1 of 1", vec![6]),
    ];
    let mut got_sorted: Vec<(String, Vec<u32>)> = got.into_iter().filter(|(l, _)| l != "file#0").collect();
    got_sorted.sort();
    let mut want_sorted: Vec<(String, Vec<u32>)> = want.into_iter().map(|(l, a)| (l.to_string(), a)).collect();
    want_sorted.sort();
    assert_eq!(got_sorted, want_sorted);
}

#[test]
fn artc_orders_what_shares_a_resource_and_nothing_else() {
    let t = figure_2_2();
    let p = compile(&t, Mode::Artc, Rules::default(), &[]);
    assert_eq!(p.threads, vec![vec![0, 1, 2, 3, 4], vec![5, 6]]);
    // Thread 2's open of /x/y/z shares nothing with thread 1 but fd 3's name, and a
    // descriptor's generations are separate resources: it waits for nothing.
    assert!(p.deps[5].is_empty(), "{:?}", p.deps);
    // Its open of /a/b (the name's second generation) waits for the rename that ended the
    // first, and for dirA's last action (the same rename).
    assert_eq!(p.deps[6], vec![4]);
    // Unconstrained: no edges; temporally ordered and single-threaded: none needed here.
    for mode in [Mode::Unconstrained, Mode::TemporallyOrdered, Mode::SingleThreaded] {
        assert_eq!(compile(&t, mode, Rules::default(), &[]).edges(), 0);
    }
    assert_eq!(
        compile(&t, Mode::SingleThreaded, Rules::default(), &[]).threads,
        vec![vec![0, 1, 2, 3, 4, 5, 6]]
    );
    // program_seq: every action after the one before it (cross-thread ones only are edges).
    let all = Rules {
        program_seq: true,
        ..Rules::default()
    };
    assert_eq!(compile(&t, Mode::Artc, all, &[]).deps[5], vec![4]);
}

#[test]
fn calls_that_overlapped_are_not_ordered() {
    // Two threads read one file at once, then one truncates it after both returned.
    let mut open = with_path(rec(1, 0, Call::Open, 3), "/f");
    open.exit_ns = Some(5);
    let mut r1 = rec(1, 10, Call::Pread64, 4096);
    r1.fd = Some(3);
    r1.exit_ns = Some(100);
    let mut r2 = rec(2, 20, Call::Pread64, 4096);
    r2.fd = Some(3);
    r2.exit_ns = Some(90);
    let mut tr = with_path(rec(2, 200, Call::Truncate, 0), "/f");
    tr.offset = Some(0);
    let p = compile(&trace(vec![open, r1, r2, tr]), Mode::Artc, Rules::default(), &[]);
    // r2 waits for the open (file and descriptor), not for r1, which it overlapped.
    assert_eq!(p.deps[2], vec![0]);
    // The truncate (same file) waits for r1, the other thread's last read of it, and for the
    // open, the last other action on `/`, which holds the name (file order covers directories).
    assert_eq!(p.deps[3], vec![0, 1]);
}

#[test]
fn symlinks_and_hard_links_lead_to_one_file() {
    let mut link = with_path(rec(1, 10, Call::Link, 0), "/d/f");
    link.path2 = Some(b"/d/hard".to_vec());
    let mut sym = with_path(rec(1, 20, Call::Symlink, 0), "/d/soft");
    sym.path2 = Some(b"hard".to_vec());
    let t = trace(vec![
        with_path(rec(1, 0, Call::Stat, 0), "/d/f"),
        link,
        sym,
        with_path(rec(2, 30, Call::Stat, 0), "/d/soft"),
        with_path(rec(2, 40, Call::Lstat, 0), "/d/soft"),
    ]);
    let series = action_series(&t);
    let get = |l: &str| series.iter().find(|(x, _)| x == l).map(|(_, a)| a.clone());
    // file#1 is /d (every call touches the directory holding its name), file#2 the file, file#3
    // the symlink: stat through the symlink (3) reaches the file, lstat (4) stops at the link.
    assert_eq!(get("file#1"), Some(vec![0, 1, 2, 3, 4]));
    assert_eq!(get("file#2"), Some(vec![0, 1, 3]), "{series:?}");
    assert_eq!(get("file#3"), Some(vec![2, 4]), "{series:?}");
}

#[test]
fn a_directory_rename_starts_new_generations_below_it() {
    let mut mv = with_path(rec(1, 10, Call::Rename, 0), "/d");
    mv.path2 = Some(b"/e".to_vec());
    let t = trace(vec![
        with_path(rec(1, 0, Call::Stat, 0), "/d/x/y"),
        mv,
        with_path(rec(1, 20, Call::Stat, 0), "/e/x/y"),
        with_path(rec(1, 30, Call::Stat, -2), "/d/x/y"),
    ]);
    let series = action_series(&t);
    let get = |l: &str| series.iter().find(|(x, _)| x == l).map(|(_, a)| a.clone());
    assert_eq!(get("path(/d/x/y)@1"), Some(vec![0, 1]));
    assert_eq!(get("path(/e/x/y)@1"), Some(vec![1, 2]));
    assert_eq!(get("path(/d/x/y)@2"), Some(vec![3]), "{series:?}");
}

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("iolearn-artc-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A real job traced by strace (processes working at once on one tree: files made, copied,
/// renamed, listed and removed), replayed in every mode on a fresh target: ARTC, temporally
/// ordered and single-threaded replay make every call return what it did; unconstrained
/// replay does not. Skips (saying why) without strace.
#[test]
fn a_traced_job_replays_without_failures_in_order_and_with_them_unordered() {
    if std::process::Command::new("strace").arg("-V").output().is_err() {
        println!(
            "SKIP a_traced_job_replays_without_failures_in_order_and_with_them_unordered: strace is not installed"
        );
        return;
    }
    let d = tmpdir("job");
    let job = "mkdir -p src/a src/b; for i in 1 2 3 4 5 6; do echo data$i > src/a/f$i; done; \
               (cp -r src/a src/c; mv src/c/f1 src/c/g1; ls src/c > /dev/null) & \
               (cat src/a/f2 > src/b/copy; ln -s ../a/f3 src/b/link; cat src/b/link > /dev/null) & wait; \
               rm -r src/c; rm src/b/link; mv src/b src/d";
    let out = d.join("job.strace");
    let st = std::process::Command::new("strace")
        .args(["-f", "-ttt", "-T", "-y", "-s", "256", "-o"])
        .arg(&out)
        .args(["sh", "-c", job])
        .current_dir(&d)
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    let text = std::fs::read_to_string(&out).unwrap();
    let trace = iolearn_trace::sys::strace::parse(&text, &out, Default::default())
        .unwrap()
        .trace;
    assert!(trace.threads().len() >= 8, "sh, its subshells, cp, mv, ls, cat, ln, rm");
    let mut failed = Vec::new();
    for mode in [
        Mode::Artc,
        Mode::TemporallyOrdered,
        Mode::SingleThreaded,
        Mode::Unconstrained,
    ] {
        let target = d.join(format!("target-{mode:?}"));
        std::fs::create_dir(&target).unwrap();
        let plan = compile(&trace, mode, Rules::default(), &[]);
        iolearn_replay::artc::init(&target, &plan).unwrap();
        let report = iolearn_replay::artc::run(
            &trace,
            &plan,
            &target,
            iolearn_replay::artc::Timing::Afap,
            Default::default(),
        )
        .unwrap();
        assert!(report.outcomes.iter().filter(|o| o.replayed).count() > 200, "{mode:?}");
        failed.push(report.failed());
        if mode != Mode::Unconstrained {
            let bad: Vec<_> = trace
                .records
                .iter()
                .zip(&report.outcomes)
                .filter(|(_, o)| o.replayed && !o.ok)
                .map(|(r, o)| {
                    format!(
                        "{} {:?} -> {} (traced {})",
                        r.call_name(),
                        r.path.as_deref().map(String::from_utf8_lossy),
                        o.ret,
                        r.ret
                    )
                })
                .collect();
            assert!(bad.is_empty(), "{mode:?}: {bad:?}");
            // The job's end state: src/d holds the copy and nothing of src/c is left.
            let root = target.join(d.strip_prefix("/").unwrap_or(&d));
            let root = if root.exists() { root } else { target.clone() };
            let _ = root;
        }
    }
    assert!(
        failed[3] > 0,
        "unconstrained replay reorders creations and uses: {failed:?}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// Names in the trace never lead outside the target: an absolute symlink, `..` above `/`
/// and an absolute path all stay under it.
#[test]
fn replay_never_touches_anything_outside_the_target() {
    let d = tmpdir("contain");
    let outside = d.join("outside");
    std::fs::create_dir(&outside).unwrap();
    let target = d.join("target");
    std::fs::create_dir(&target).unwrap();
    // The target already holds a planted symlink to the outside directory.
    std::os::unix::fs::symlink(&outside, target.join("planted")).unwrap();
    let out = outside.to_str().unwrap().to_string();
    let mut sym = with_path(rec(1, 0, Call::Symlink, 0), "/link");
    sym.path2 = Some(out.as_bytes().to_vec());
    let create = |t: u64, p: &str| {
        let mut r = with_path(rec(1, t, Call::Openat, 3), p);
        r.flags = Some((libc::O_CREAT | libc::O_WRONLY) as u64);
        r.mode = Some(0o644);
        r
    };
    let close = |t: u64| {
        let mut r = rec(1, t, Call::Close, 0);
        r.fd = Some(3);
        r
    };
    let records = vec![
        sym,
        create(10, "/link/a"),
        close(20),
        create(30, "/../../../b"),
        close(40),
        create(50, &format!("{out}/c")),
        close(60),
        create(70, "/planted/d"),
        close(80),
        with_path(rec(1, 90, Call::Mkdir, 0), "/planted/e"),
    ];
    let t = trace(records);
    let plan = compile(&t, Mode::Artc, Rules::default(), &[]);
    iolearn_replay::artc::init(&target, &plan).unwrap();
    let report = iolearn_replay::artc::run(
        &t,
        &plan,
        &target,
        iolearn_replay::artc::Timing::Afap,
        Default::default(),
    )
    .unwrap();
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing written outside the target"
    );
    assert!(
        target.join(out.trim_start_matches('/')).join("a").exists(),
        "the symlink resolved inside"
    );
    assert!(target.join("b").exists(), "`..` stops at the target");
    assert!(target.join(out.trim_start_matches('/')).join("c").exists());
    // Through the planted link: resolved in the root, its absolute target is the target's own
    // copy of that path, not the real one.
    assert!(target.join(out.trim_start_matches('/')).join("d").exists());
    assert!(report.outcomes.iter().all(|o| o.replayed), "{report:?}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Two threads each open, write and close a file, the second reusing the first's descriptor
/// number after the first closed it. ARTC lets the second run before the first's close (they
/// share no file), so the replay keeps the two generations of "fd 3" apart.
#[test]
fn a_descriptor_number_reused_across_threads_names_each_file_in_replay() {
    let mut records = Vec::new();
    for (k, tid) in [(0u64, 1u32), (1, 2), (2, 3), (3, 4)] {
        let t0 = 100 * k;
        let mut open = with_path(rec(tid, t0, Call::Openat, 3), &format!("/f{k}"));
        open.flags = Some((libc::O_CREAT | libc::O_WRONLY) as u64);
        open.mode = Some(0o644);
        let mut write = rec(tid, t0 + 10, Call::Write, 10 * (k as i64 + 1));
        write.fd = Some(3);
        write.count = Some(10 * (k + 1));
        let mut close = rec(tid, t0 + 20, Call::Close, 0);
        close.fd = Some(3);
        records.extend([open, write, close]);
    }
    let t = trace(records);
    let plan = compile(&t, Mode::Artc, Rules::default(), &[]);
    let writes: Vec<_> = (0..4).map(|k| plan.fd_use[3 * k + 1][0]).collect();
    assert!(writes.iter().all(Option::is_some));
    let distinct: std::collections::HashSet<_> = writes.iter().collect();
    assert_eq!(
        distinct.len(),
        4,
        "each generation of fd 3 is its own resource: {writes:?}"
    );
    for round in 0..20 {
        let d = tmpdir(&format!("reuse{round}"));
        let plan = compile(&t, Mode::Unconstrained, Rules::default(), &[]);
        iolearn_replay::artc::init(&d, &plan).unwrap();
        let report =
            iolearn_replay::artc::run(&t, &plan, &d, iolearn_replay::artc::Timing::Afap, Default::default()).unwrap();
        // Unordered, a write may come before its open (EBADF), but never lands in another file.
        for k in 0..4u64 {
            let len = std::fs::metadata(d.join(format!("f{k}"))).map(|m| m.len()).unwrap_or(0);
            let wrote = report.outcomes[3 * k as usize + 1].ret;
            assert!(
                len == 0 || len == 10 * (k + 1),
                "f{k}: {len} bytes (its write returned {wrote})"
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}

/// Sequential order holds through calls that overlapped: a write that returned before both a
/// stat and a read began is waited for by the read too, though the stat (which waits for it)
/// was still running when the read began (a review found the read unordered).
#[test]
fn an_order_is_not_lost_through_an_overlapping_call() {
    let mut open = with_path(rec(1, 0, Call::Open, 3), "/f");
    open.exit_ns = Some(1);
    let mut w = rec(1, 2, Call::Pwrite64, 4096);
    (w.fd, w.exit_ns) = (Some(3), Some(10));
    let mut st = rec(2, 20, Call::Fstat, 0);
    (st.fd, st.exit_ns) = (Some(3), Some(40));
    let mut r = rec(3, 30, Call::Pread64, 4096);
    (r.fd, r.exit_ns) = (Some(3), Some(50));
    let p = compile(&trace(vec![open, w, st, r]), Mode::Artc, Rules::default(), &[]);
    assert!(p.deps[2].contains(&1), "{:?}", p.deps);
    assert!(p.deps[3].contains(&1), "the read waits for the write: {:?}", p.deps);
    assert!(!p.deps[3].contains(&2), "not for the stat it overlapped: {:?}", p.deps);
}

/// A bad trace cannot make the compiler loop or allocate without bound: a hard link to a
/// directory (impossible, so a forged trace) renamed, and a readlink claiming a huge length.
#[test]
fn forged_traces_compile_quickly() {
    let mut link = with_path(rec(1, 10, Call::Link, 0), "/d");
    link.path2 = Some(b"/d/s".to_vec());
    let mut mv = with_path(rec(1, 20, Call::Rename, 0), "/d");
    mv.path2 = Some(b"/e".to_vec());
    let rl = with_path(rec(1, 30, Call::Readlink, i64::MAX), "/x");
    let t = trace(vec![with_path(rec(1, 0, Call::Mkdir, 0), "/d"), link, mv, rl]);
    let start = std::time::Instant::now();
    let p = compile(&t, Mode::Artc, Rules::default(), &[]);
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(p.threads.len(), 1);
}

/// The root directory is never a target, and a name with a NUL in it is refused (EINVAL),
/// not shortened into another name.
#[test]
fn the_root_is_no_target_and_a_nul_is_no_name() {
    assert!(iolearn_replay::artc::run::check_target(std::path::Path::new("/")).is_err());
    assert!(iolearn_replay::artc::run::check_target(std::path::Path::new("/tmp/../")).is_err());
    let d = tmpdir("nul");
    let mut open = with_path(rec(1, 0, Call::Openat, 3), "/a\0b");
    open.flags = Some((libc::O_CREAT | libc::O_WRONLY) as u64);
    let t = trace(vec![open, with_path(rec(1, 10, Call::Mkdir, 0), "/x\0/y")]);
    let plan = compile(&t, Mode::Artc, Rules::default(), &[]);
    let report =
        iolearn_replay::artc::run(&t, &plan, &d, iolearn_replay::artc::Timing::Afap, Default::default()).unwrap();
    for o in &report.outcomes {
        assert_eq!((o.replayed, o.ret), (true, -(libc::EINVAL as i64)), "{report:?}");
    }
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A trace of: `/d` made, `/d/f` created and written "hello" (its bytes kept in the side file),
/// linked as `/d/l`, chmod'ed 0600, read back, and `/d/x` made and removed; and a read of a
/// file from before the trace, `/old`, whose bytes the trace kept too.
fn job_with_data() -> (SysTrace, Vec<u8>) {
    use iolearn_trace::sys::Data;
    let mut side = b"hello".to_vec();
    let mut open = with_path(rec(1, 10, Call::Openat, 3), "/d/f");
    open.flags = Some((libc::O_CREAT | libc::O_RDWR) as u64);
    open.mode = Some(0o644);
    let mut write = rec(1, 20, Call::Pwrite64, 5);
    (write.fd, write.count, write.offset) = (Some(3), Some(5), Some(0));
    write.data = Data::Bytes { offset: 0, len: 5 };
    let mut read = rec(1, 30, Call::Pread64, 5);
    (read.fd, read.count, read.offset) = (Some(3), Some(5), Some(0));
    read.data = Data::Bytes { offset: 0, len: 5 };
    let mut close = rec(1, 40, Call::Close, 0);
    close.fd = Some(3);
    let mut link = with_path(rec(1, 50, Call::Symlink, 0), "/d/l");
    link.path2 = Some(b"f".to_vec());
    let mut chmod = with_path(rec(1, 60, Call::Chmod, 0), "/d/f");
    chmod.mode = Some(0o600);
    let mut mkx = with_path(rec(1, 70, Call::Openat, 4), "/d/x");
    mkx.flags = Some((libc::O_CREAT | libc::O_WRONLY) as u64);
    let mut closex = rec(1, 80, Call::Close, 0);
    closex.fd = Some(4);
    let rmx = with_path(rec(1, 90, Call::Unlink, 0), "/d/x");
    let old = with_path(rec(1, 100, Call::Openat, 5), "/old");
    let mut rold = rec(1, 110, Call::Read, 3);
    (rold.fd, rold.count) = (Some(5), Some(3));
    rold.data = Data::Bytes { offset: 5, len: 3 };
    side.extend_from_slice(b"abc");
    let records = vec![
        with_path(rec(1, 0, Call::Mkdir, 0), "/d"),
        open,
        write,
        read,
        close,
        link,
        chmod,
        mkx,
        closex,
        rmx,
        old,
        rold,
    ];
    (trace(records), side)
}

/// Level 2: a write writes the bytes the trace kept; a read returning them agrees, one of a
/// file init made (other bytes) does not. A side file too short for a record is an error
/// naming it.
#[test]
fn kept_data_is_written_and_reads_are_checked_against_it() {
    use iolearn_replay::artc::{init, run, Side, Timing};
    let (t, side) = job_with_data();
    let d = tmpdir("data");
    let plan = compile(&t, Mode::Artc, Rules::default(), &[]);
    init(&d, &plan).unwrap();
    let report = run(&t, &plan, &d, Timing::Afap, Side(Some(&side))).unwrap();
    assert_eq!(report.failed(), 0, "{report:?}");
    assert_eq!(std::fs::read(d.join("d/f")).unwrap(), b"hello");
    assert_eq!(report.outcomes[3].data_ok, Some(true), "the read of /d/f");
    assert_eq!(
        report.outcomes[11].data_ok,
        Some(false),
        "init made /old of other bytes"
    );
    assert_eq!(report.data_checked(), (2, 1));
    // Without the side file: the pattern is written, and nothing is checked.
    let d2 = tmpdir("data-none");
    init(&d2, &plan).unwrap();
    let report = run(&t, &plan, &d2, Timing::Afap, Side::default()).unwrap();
    assert_ne!(std::fs::read(d2.join("d/f")).unwrap(), b"hello");
    assert_eq!(report.data_checked(), (0, 0));
    // Init writing back what the reads of /old returned: now they agree too.
    let d3 = tmpdir("data-back");
    init(&d3, &plan).unwrap();
    assert_eq!(
        iolearn_replay::artc::init_data(&d3, &plan, Side(Some(&side))).unwrap(),
        3
    );
    assert_eq!(std::fs::read(d3.join("old")).unwrap(), b"abc");
    let report = run(&t, &plan, &d3, Timing::Afap, Side(Some(&side))).unwrap();
    assert_eq!(report.data_checked(), (2, 0), "{report:?}");
    std::fs::remove_dir_all(&d3).unwrap();
    let err = run(&t, &plan, &d2, Timing::Afap, Side(Some(&side[..6]))).unwrap_err();
    assert!(err.contains("record 11") && err.contains("data_offset 5"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
    std::fs::remove_dir_all(&d2).unwrap();
}

/// Level 3: the replayed tree against where the program ran. The same tree agrees; a file
/// with other bytes, other permission bits, a name removed there but not here, or a link to
/// elsewhere, each differ.
#[test]
fn the_final_state_is_compared_name_by_name() {
    use iolearn_replay::artc::{compare, init, run, Side, State, Timing};
    use std::os::unix::fs::PermissionsExt;
    let (t, side) = job_with_data();
    let plan = compile(&t, Mode::Artc, Rules::default(), &[]);
    let replayed = tmpdir("final-replayed");
    init(&replayed, &plan).unwrap();
    run(&t, &plan, &replayed, Timing::Afap, Side(Some(&side))).unwrap();
    // Where the program ran, as it left it.
    let original = tmpdir("final-original");
    std::fs::create_dir(original.join("d")).unwrap();
    std::fs::write(original.join("d/f"), "hello").unwrap();
    std::fs::set_permissions(original.join("d/f"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(original.join("d"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("f", original.join("d/l")).unwrap();
    let v = compare(&t, &plan, &original, &replayed, true).unwrap();
    assert_eq!(v.compared, 4, "/d, /d/f, /d/l, /d/x: {v:?}");
    assert!(v.differ.is_empty(), "{v:?}");
    std::fs::write(original.join("d/f"), "hellp").unwrap();
    std::fs::set_permissions(original.join("d/f"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(original.join("d/x"), "").unwrap();
    std::fs::remove_file(original.join("d/l")).unwrap();
    std::os::unix::fs::symlink("g", original.join("d/l")).unwrap();
    let v = compare(&t, &plan, &original, &replayed, true).unwrap();
    let names: Vec<&[u8]> = v.differ.iter().map(|x| &x.0[..]).collect();
    assert_eq!(names, [&b"/d/f"[..], b"/d/l", b"/d/x"], "{v:?}");
    assert!(matches!(v.differ[2], (_, State::File(..), State::Missing)));
    // Contents not compared: only the size of /d/f is.
    let v = compare(&t, &plan, &original, &replayed, false).unwrap();
    assert_eq!(v.differ.len(), 2, "{v:?}");
    std::fs::set_permissions(original.join("d/f"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let v = compare(&t, &plan, &original, &replayed, false).unwrap();
    assert_eq!(v.differ.len(), 3, "{v:?}");
    std::fs::remove_dir_all(&original).unwrap();
    std::fs::remove_dir_all(&replayed).unwrap();
}

/// Two things real jobs do that a model can get wrong: `fstatat(fd, "", AT_EMPTY_PATH)` on an
/// `O_PATH|O_NOFOLLOW` descriptor of a dangling symlink (tar does) stats the link, not its
/// target, which is not made up as a file from before the trace; and a /sys file stats as 4096
/// bytes but reads as 4, so init makes it as large as its reads, not its stat.
#[test]
fn empty_path_calls_act_on_their_descriptor_and_kernel_files_are_as_large_as_read() {
    use iolearn_replay::artc::{init, model::Initial, run, Side, Timing};
    let mut link = with_path(rec(1, 10, Call::Symlinkat, 0), "/d/l");
    link.dirfd = Some(-100);
    link.path2 = Some(b"missing".to_vec());
    let mut open = with_path(rec(1, 20, Call::Openat, 5), "/d/l");
    open.flags = Some((libc::O_PATH | libc::O_NOFOLLOW) as u64);
    let mut st = with_path(rec(1, 30, Call::Newfstatat, 0), "");
    st.dirfd = Some(5);
    st.flags = Some(libc::AT_EMPTY_PATH as u64);
    st.result = Some(b"mode=0o120777 size=7".to_vec());
    let sys = with_path(rec(1, 40, Call::Openat, 6), "/sys/block/x/dev");
    let mut fst = rec(1, 50, Call::Fstat, 0);
    fst.fd = Some(6);
    fst.result = Some(b"mode=0o100444 size=4096".to_vec());
    let mut rd = rec(1, 60, Call::Read, 4);
    (rd.fd, rd.count) = (Some(6), Some(4096));
    let mut eof = rec(1, 70, Call::Read, 0);
    (eof.fd, eof.count) = (Some(6), Some(4096));
    let t = trace(vec![
        with_path(rec(1, 0, Call::Mkdir, 0), "/d"),
        link,
        open,
        st,
        sys,
        fst,
        rd,
        eof,
    ]);
    let plan = compile(&t, Mode::Artc, Rules::default(), &[]);
    let names: Vec<String> = plan
        .initial
        .iter()
        .map(|e| match e {
            Initial::Dir(p) => format!("dir {}", String::from_utf8_lossy(p)),
            Initial::File(p, n) => format!("file {} {n}", String::from_utf8_lossy(p)),
            Initial::Symlink(p, _) => format!("link {}", String::from_utf8_lossy(p)),
        })
        .collect();
    assert!(!names.iter().any(|n| n.contains("missing")), "{names:?}");
    assert!(names.contains(&"file /sys/block/x/dev 4".to_string()), "{names:?}");
    let d = tmpdir("empty-path");
    init(&d, &plan).unwrap();
    let report = run(&t, &plan, &d, Timing::Afap, Side::default()).unwrap();
    assert_eq!(report.failed(), 0, "{report:?}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Paced replay spends the original's time: its idle gaps between calls (not up to a sleep's
/// slack more each), and the time of calls it cannot make (an exec); as fast as possible, it
/// spends neither. Two threads, each with 100 calls 1 ms apart, and a 30 ms exec.
#[test]
fn paced_replay_takes_the_original_time() {
    use iolearn_replay::artc::{init, run, Side, Timing};
    let mut records = Vec::new();
    let mut exec = with_path(rec(1, 0, Call::Execve, 0), "/bin/x");
    exec.exit_ns = Some(30_000_000);
    records.push(exec);
    for tid in [1, 2] {
        for k in 0..100u64 {
            let t = 30_000_000 + k * 1_000_000 + u64::from(tid) * 1_000;
            let mut r = with_path(rec(tid, t, Call::Access, 0), "/");
            r.exit_ns = Some(t + 1_000);
            records.push(r);
        }
    }
    records.sort_by_key(|r| r.enter_ns);
    let t = trace(records);
    let traced_ms = 30.0 + 100.0;
    let d = tmpdir("paced");
    let plan = compile(&t, Mode::Artc, Rules::default(), &[]);
    init(&d, &plan).unwrap();
    let wall_ms = |timing| run(&t, &plan, &d, timing, Side::default()).unwrap().wall_ns as f64 / 1e6;
    let natural = wall_ms(Timing::Scaled(1.0));
    assert!(
        // At least the traced time; the upper bound is loose (a loaded CI machine wakes late).
        (traced_ms * 0.95..traced_ms * 1.8).contains(&natural),
        "natural {natural:.1} ms for {traced_ms} ms traced"
    );
    let half = wall_ms(Timing::Scaled(0.5));
    assert!(
        (traced_ms * 0.45..traced_ms * 0.9).contains(&half),
        "scale=0.5: {half:.1} ms"
    );
    assert!(wall_ms(Timing::Afap) < 20.0);
    std::fs::remove_dir_all(&d).unwrap();
}
