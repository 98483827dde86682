//! System-call traces: strace's real output imports, and Parquet keeps every field.

use iolearn_trace::sys::{parquet, strace, Call, Data, Meta, SysRecord, SysTrace, AT_FDCWD};
use iolearn_trace::ReadOptions;
use std::path::Path;
use std::process::Command;

fn sample() -> SysTrace {
    let mut a = SysRecord {
        id: 0,
        pid: 10,
        tid: 11,
        enter_ns: 5,
        exit_ns: Some(9),
        call: Some(Call::Openat),
        ret: 3,
        dirfd: Some(AT_FDCWD),
        path: Some(vec![b'a', 0xff, b'/']),
        flags: Some(libc::O_CREAT as u64 | (1 << 63)),
        mode: Some(0o640),
        ..Default::default()
    };
    let b = SysRecord {
        id: 1,
        enter_ns: 7,
        exit_ns: None,
        call: None,
        other: Some("getrandom".into()),
        ret: -2,
        data: Data::Hash(u64::MAX),
        ..a.clone()
    };
    let c = SysRecord {
        id: 2,
        enter_ns: 8,
        call: Some(Call::Pwrite64),
        fd: Some(3),
        count: Some(u64::MAX),
        offset: Some(-1),
        data: Data::Bytes { offset: 7, len: 9 },
        uid: Some(u32::MAX),
        name: Some(b"user.x".to_vec()),
        result: Some(vec![]),
        cmd: Some(1),
        addr: Some(u64::MAX - 1),
        fd2: Some(-1),
        dirfd2: Some(4),
        path2: Some(b"b".to_vec()),
        gid: Some(0),
        ..Default::default()
    };
    a.data = Data::Unreadable;
    SysTrace {
        records: vec![a, b, c],
        meta: Meta {
            source: "strace".into(),
            buffers: "hash".into(),
            lost: 3,
            lost_by_call: vec![("read".into(), 2), ("openat".into(), 1)],
            command: "sh -c 'x'".into(),
            cwd: "/home/u".into(),
            data_file: Some((12, 0xfeed)),
        },
    }
}

#[test]
fn parquet_keeps_every_field_and_the_capture_settings() {
    let dir = std::env::temp_dir().join(format!("iolearn-sys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.parquet");
    let t = sample();
    iolearn_safeio::write_with(&path, |w| {
        parquet::write(&t, w).map(|_| ()).map_err(std::io::Error::other)
    })
    .unwrap();
    let back = parquet::read(&path).unwrap();
    assert_eq!(back, t);

    // A Parquet file that is not a system-call trace, and a file that is not Parquet.
    let other = dir.join("not.parquet");
    std::fs::write(&other, b"PAR1 but not really").unwrap();
    let e = parquet::read(&other).unwrap_err();
    assert!(
        e.to_string().contains("not.parquet") && e.to_string().contains("not Parquet"),
        "{e}"
    );
    let e = parquet::read(&dir.join("missing.parquet")).unwrap_err();
    assert!(e.to_string().contains("missing.parquet"), "{e}");
    let e = parquet::read(&dir).unwrap_err();
    assert!(e.to_string().contains("is a directory"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// strace's real output for a small shell job: every line decodes, and the calls that matter
/// to a replay carry their paths, descriptors and results. Skips (saying why) without strace.
#[test]
fn real_strace_output_imports() {
    if Command::new("strace").arg("-V").output().is_err() {
        println!("SKIP real_strace_output_imports: strace is not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("iolearn-strace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("t.strace");
    let job = "echo hello > x; cat x > /dev/null; mkdir d; mv x d/y; ln -s d/y l; readlink l; rm -r d l";
    let st = Command::new("strace")
        .args(["-f", "-ttt", "-T", "-y", "-s", "4096", "-o"])
        .arg(&out)
        .args(["sh", "-c", job])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    let text = std::fs::read_to_string(&out).unwrap();
    let imp = strace::parse(&text, &out, ReadOptions::default()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let t = imp.trace;
    let has = |call: Call, path: &[u8]| {
        t.records
            .iter()
            .any(|r| r.call == Some(call) && r.ok() && r.path.as_deref().is_some_and(|p| p.ends_with(path)))
    };
    assert!(has(Call::Openat, b"x"), "the redirect opens x");
    assert!(has(Call::Mkdir, b"d") || has(Call::Mkdirat, b"d"));
    assert!(
        t.records.iter().any(
            |r| matches!(r.call, Some(Call::Rename | Call::Renameat | Call::Renameat2))
                && r.path2.as_deref() == Some(b"d/y")
        ),
        "mv renames x to d/y"
    );
    assert!(has(Call::Symlink, b"l") || has(Call::Symlinkat, b"l"));
    let write = t
        .records
        .iter()
        .find(|r| r.call == Some(Call::Write) && r.count == Some(6) && r.data != Data::None)
        .expect("echo's write");
    assert_eq!(write.data, Data::Hash(xxhash_rust_hash(b"hello\n")));
    // Several processes (sh forks cat, mkdir, mv...), each its own pid; every call returned
    // but the exits.
    let pids: std::collections::HashSet<_> = t.records.iter().map(|r| r.pid).collect();
    assert!(pids.len() >= 5, "{pids:?}");
    assert!(t
        .records
        .iter()
        .all(|r| r.exit_ns.is_some() || matches!(r.call, Some(Call::ExitGroup | Call::Exit | Call::Execve))));
    assert!(t.records.windows(2).all(|w| w[0].enter_ns <= w[1].enter_ns));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn xxhash_rust_hash(b: &[u8]) -> u64 {
    // The hash the capture uses (xxh3, 64 bits), computed the same way here.
    iolearn_trace::sys::hash(b)
}

#[test]
fn an_empty_or_bad_file_is_an_error_naming_it() {
    let e = strace::parse("garbage\n", Path::new("g.txt"), ReadOptions::default()).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (1, "time"), "{e}");
    let t = strace::parse("", Path::new("e.txt"), ReadOptions::default()).unwrap();
    assert!(t.trace.records.is_empty());
}
