//! The atomic-write promises, tried the way an attacker or a crash would (issue 11, must-show 2).
//! Tests that create device nodes need root; elsewhere they print why they skip.

use iolearn_safeio::{check_target, read, read_to_string, write, write_with, ErrorKind, Target};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn skip(test: &str, why: &str) {
    eprintln!("SKIP {test}: {why}");
    if let Some(log) = std::env::var_os("IOLEARN_SKIP_LOG") {
        if let Ok(mut f) = fs::OpenOptions::new().append(true).open(log) {
            let _ = writeln!(f, "{test}: {why}");
        }
    }
}

/// Every name in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn mknod(path: &Path, kind: libc::mode_t, major: u32, minor: u32) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mknod has no other preconditions.
    let rc = unsafe { libc::mknod(c.as_ptr(), kind | 0o600, libc::makedev(major, minor)) };
    assert_eq!(rc, 0, "mknod {}: {}", path.display(), io::Error::last_os_error());
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o600) },
        0,
        "mkfifo {}",
        path.display()
    );
}

#[test]
fn creates_and_replaces_keeping_the_mode() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    assert_eq!(check_target(&out).unwrap(), Target::Create);
    write(&out, b"one\n").unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(check_target(&out).unwrap(), Target::Replace);
    write(&out, b"two\n").unwrap();
    assert_eq!(fs::read(&out).unwrap(), b"two\n");
    assert_eq!(fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o640);
    assert_eq!(names(dir.path()), ["out.csv"], "nothing beside the target");
}

#[test]
fn a_symlink_at_the_target_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    fs::write(&victim, "precious").unwrap();
    let out = dir.path().join("out");
    std::os::unix::fs::symlink(&victim, &out).unwrap();
    let err = write(&out, b"evil").unwrap_err();
    assert_eq!(err.kind, ErrorKind::Refused);
    assert!(
        err.to_string().starts_with(&out.display().to_string()),
        "names the target: {err}"
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
    assert!(
        fs::symlink_metadata(&out).unwrap().file_type().is_symlink(),
        "the link is left as it was"
    );
    // A dangling link too: following it would create a file wherever it points.
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("created-through-link"), &dangling).unwrap();
    assert!(write(&dangling, b"x").is_err());
    assert!(!dir.path().join("created-through-link").exists());
}

#[test]
fn symlinks_planted_at_temporary_names_are_never_followed() {
    // The old writers used `.NAME.tmp.PID`, `NAME.journal.tmp` and `.NAME.tmp`: plant links at
    // every name an attacker could predict and at many random-looking ones.
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    fs::write(&victim, "precious").unwrap();
    let pid = std::process::id();
    let mut planted = vec![
        format!(".out.tmp.{pid}"),
        ".out.tmp".to_string(),
        "out.journal.tmp".to_string(),
        "out.tmp".to_string(),
    ];
    for i in 0..200 {
        planted.push(format!(".out.{i:06}"));
    }
    for name in &planted {
        std::os::unix::fs::symlink(&victim, dir.path().join(name)).unwrap();
    }
    for round in 0..50 {
        write(&dir.path().join("out"), format!("round {round}").as_bytes()).unwrap();
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(fs::read_to_string(dir.path().join("out")).unwrap(), "round 49");
    for name in &planted {
        assert!(fs::symlink_metadata(dir.path().join(name))
            .unwrap()
            .file_type()
            .is_symlink());
    }
    assert_eq!(
        names(dir.path()).len(),
        planted.len() + 2,
        "no temporary left: {:?}",
        names(dir.path())
    );
}

#[test]
fn dev_null_stays_a_device() {
    let null = Path::new("/dev/null");
    assert_eq!(check_target(null).unwrap(), Target::InPlace);
    write(null, b"discarded").unwrap();
    assert!(fs::symlink_metadata(null).unwrap().file_type().is_char_device());
}

#[test]
fn a_device_node_at_the_target_is_written_in_place_not_replaced() {
    if !is_root() {
        return skip(
            "safeio::a_device_node_at_the_target_is_written_in_place_not_replaced",
            "needs root for mknod",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("null");
    mknod(&node, libc::S_IFCHR, 1, 3); // the null device
    write(&node, b"into the void").unwrap();
    let t = fs::symlink_metadata(&node).unwrap().file_type();
    assert!(t.is_char_device(), "still a character device");
    assert_eq!(names(dir.path()), ["null"]);
    // A block device node is refused before it is opened.
    let block = dir.path().join("blk");
    mknod(&block, libc::S_IFBLK, 7, 250);
    let err = write(&block, b"x").unwrap_err();
    assert!(err.to_string().contains("block device"), "{err}");
    assert!(fs::symlink_metadata(&block).unwrap().file_type().is_block_device());
}

#[test]
fn a_fifo_is_written_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
    };
    // The reader thread may not have opened its end yet: a FIFO nobody reads is refused.
    let t = Instant::now();
    while let Err(e) = write(&fifo, b"through the pipe") {
        assert!(
            e.to_string().contains("nobody reads") && t.elapsed() < Duration::from_secs(10),
            "{e}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(reader.join().unwrap(), "through the pipe");
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn bad_output_paths_fail_clearly_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (dir.path().join("missing/out.csv"), "does not exist"),
        (dir.path().to_path_buf(), "is a directory"),
        (dir.path().join("sub/"), "not a file name"),
    ];
    fs::write(dir.path().join("file"), "x").unwrap();
    for (path, want) in cases
        .iter()
        .chain([(dir.path().join("file/out.csv"), "not a directory")].iter())
    {
        let err = write(path, b"data").unwrap_err();
        assert!(err.to_string().contains(want), "{}: {err}", path.display());
    }
    assert_eq!(names(dir.path()), ["file"]);
    if !is_root() {
        let ro = dir.path().join("ro");
        fs::create_dir(&ro).unwrap();
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o500)).unwrap();
        let err = write(&ro.join("out"), b"x").unwrap_err();
        assert!(err.to_string().contains("ermission denied"), "{err}");
    }
}

#[test]
fn a_failing_writer_leaves_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model.bin");
    write(&out, b"old").unwrap();
    let err = write_with(&out, |w| {
        w.write_all(b"half of the new")?;
        Err(io::Error::other("the model diverged"))
    })
    .unwrap_err();
    assert!(err.to_string().contains("the model diverged"), "{err}");
    assert!(err.to_string().starts_with(&out.display().to_string()));
    assert_eq!(fs::read(&out).unwrap(), b"old");
    assert_eq!(names(dir.path()), ["model.bin"]);
}

/// Run inside a child process by `a_writer_killed_mid_write_leaves_the_old_file_and_no_temporary`.
#[test]
fn child_slow_writer() {
    let Some(out) = std::env::var_os("IOLEARN_SAFEIO_CHILD_OUT") else {
        return;
    };
    let out = Path::new(&out);
    write_with(out, |w| {
        let chunk = vec![b'n'; 64 * 1024];
        for i in 0.. {
            w.write_all(&chunk)?;
            w.flush()?;
            if i == 4 {
                fs::write(out.with_extension("started"), "")?;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_writer_killed_mid_write_leaves_the_old_file_and_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace.bin");
    for round in 0..3 {
        fs::write(&out, "old contents").unwrap();
        let started = out.with_extension("started");
        let _ = fs::remove_file(&started);
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_slow_writer", "--nocapture", "--test-threads=1"])
            .env("IOLEARN_SAFEIO_CHILD_OUT", &out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while !started.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the child never started writing"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(10 * round));
        child.kill().unwrap(); // SIGKILL: no destructor runs
        child.wait().unwrap();
        fs::remove_file(&started).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "old contents", "round {round}");
        assert_eq!(
            names(dir.path()),
            ["trace.bin"],
            "round {round}: nothing beside the target"
        );
    }
}

#[test]
fn reads_are_bounded() {
    let err = read(Path::new("/dev/zero"), 1 << 20).unwrap_err();
    assert_eq!(err.kind, ErrorKind::TooLarge);
    assert!(err.to_string().contains("1 MiB"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("big");
    fs::write(&f, vec![0u8; 5000]).unwrap();
    assert!(read(&f, 4999).is_err());
    assert_eq!(read(&f, 5000).unwrap().len(), 5000);
    assert!(read(dir.path(), 10).unwrap_err().to_string().contains("directory"));
    fs::write(&f, [0xff, 0xfe]).unwrap();
    assert!(read_to_string(&f, 10).unwrap_err().to_string().contains("not UTF-8"));
}

#[test]
fn excerpts_are_bounded_and_escaped() {
    let long = "x".repeat(1 << 20);
    let e = iolearn_safeio::excerpt(&long, 40);
    assert!(e.len() < 80, "{e}");
    assert!(e.ends_with(&format!("({} more bytes)", (1 << 20) - 40)));
    assert_eq!(iolearn_safeio::excerpt("a\u{1b}[2Jb", 40), "\"a\\u{1b}[2Jb\"");
}

#[test]
fn locks_are_exclusive_across_open_files_and_carry_a_note() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY of the test: the variable is set before any lock is taken in this process's
    // tests that use it, and only this test reads another directory.
    std::env::set_var("IOLEARN_RUN_DIR", dir.path().join("run"));
    let mut a = iolearn_safeio::lock::Lock::acquire("dev-7:0.lock", false)
        .unwrap()
        .expect("free");
    assert!(
        iolearn_safeio::lock::Lock::acquire("dev-7:0.lock", false)
            .unwrap()
            .is_none(),
        "held"
    );
    a.set_note("/var/lib/iolearn/readahead-loop0.journal\n").unwrap();
    drop(a);
    let mut b = iolearn_safeio::lock::Lock::acquire("dev-7:0.lock", false)
        .unwrap()
        .expect("released");
    assert_eq!(b.note().unwrap(), "/var/lib/iolearn/readahead-loop0.journal\n");
    assert!(iolearn_safeio::lock::Lock::acquire("../escape", false).is_err());
    let mode = fs::metadata(dir.path().join("run")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn a_fifo_nobody_reads_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let t = Instant::now();
    let err = write(&fifo, b"nobody listens").unwrap_err();
    assert!(err.to_string().contains("nobody reads"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn printable_text_escapes_only_control_characters() {
    assert_eq!(iolearn_safeio::printable("a \"b\"\n\u{1b}[2J"), "a \"b\"\\n\\u{1b}[2J");
}
