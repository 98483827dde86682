//! Every Rust subcommand with bad values of its options and malformed files of every format
//! (issue 11, must-show 1). Each case asserts: a non-zero exit that is not a panic, exactly one
//! line on stderr naming the culprit, no panic or backtrace, and nothing left at the output
//! path or beside it. Runs unprivileged: the cases fail before touching the machine.

use iolearn_ml::kml::READAHEAD_SCHEMA;
use iolearn_ml::{ClassAction, DecisionTree, ModelFile, ModelKind, TreeConfig};
use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_iolearn"))
}

/// A scratch directory with valid and malformed inputs.
fn inputs(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("hostile-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let w = |f: &str, b: &[u8]| std::fs::write(dir.join(f), b).unwrap();
    // Valid inputs.
    w(
        "ok.trace",
        b"0.0 0 4096 4096 1\n0.5 0 8192 4096 0\n1.0 0 12288 4096 1\n",
    );
    let mut x = Vec::new();
    let mut y = Vec::new();
    for (d, c) in [(1.0, 1.0), (3.0, 1.0), (200.0, 0.0), (900.0, 0.0)] {
        x.extend([100.0, 10.0, 10.0, d, 0.25]);
        y.push(c);
    }
    let mut m = ModelFile::new(
        ModelKind::Tree(DecisionTree::fit(&x, &y, 5, &TreeConfig::default()).unwrap()),
        READAHEAD_SCHEMA,
    );
    m.classes = vec![
        ClassAction {
            label: "random".into(),
            action: 16,
        },
        ClassAction {
            label: "seq".into(),
            action: 512,
        },
    ];
    m.action_unit = "read_ahead_kb".into();
    m.save(dir.join("ok.iolm")).unwrap();
    w("rows.csv", b"1,2,3,4,5\n");
    w("semicolons.csv", b"1;2;3;4;5\n");
    w("unsorted.trace", b"2.0 0 4096 4096 1\n1.0 0 8192 4096 1\n");
    w("empty.trace", b"");
    w("long.trace", b"0.0 0 4096 4096 1\n100000.0 0 8192 4096 1\n");
    // Malformed inputs, one per format and defect class.
    w("garbage.iolm", b"IOLM\x01\x00\x02\x00not a model at all");
    w("empty.iolm", b"");
    w("typo.csv", b"1,2,3,4,5O\n1,2,3,4,5\n");
    w("short.csv", b"1,2,3\n");
    w("hole.csv", b"1,,2,3,4,5\n");
    w("nan.csv", b"1,2,nan,4,5\n");
    w("huge-time.trace", b"0 0 0 4096 1\n1e300 0 0 4096 1\n");
    w("huge.csv", b"1,2,3,1e300,5\n");
    w("many-fields.csv", &b"1,".repeat(1 << 20));
    w("blank.csv", b"\n  \n# a comment\n");
    w("long-line.csv", &[b'7'; 3 << 20]);
    w("bad.trace", b"0.0 0 4096 4096 1\n0.5 0 zz 4096 1\n");
    w("zero.trace", b"0.0 0 4096 0 1\n");
    w("neg.trace", b"-1.0 0 4096 4096 1\n");
    w("msr.csv", b"128166372003061629,hm,1,Read,7014609920,24576,41286\n");
    w(
        "msr-extra.csv",
        b"128166372003061629,hm,1,Read,7014609920,24576,41286,9\n",
    );
    w("msr-type.csv", b"128166372003061629,hm,1,Erase,0,512,1\n");
    w(
        "blk-unsorted.txt",
        b"8,0 1 1 0.5 1 D R 10 + 8 [x]\n8,0 1 2 0.1 1 D R 20 + 8 [x]\n",
    );
    w("blk-zero.txt", b"8,0 1 1 0.5 1 D R 10 + 0 [x]\n");
    w("bin.iolt", b"IOLT\x01\x00\x00\x00garbage");
    w("nul.trace", &vec![0u8; 1 << 20]);
    std::os::unix::fs::symlink("/etc/hostname", dir.join("out/link")).unwrap();
    dir
}

/// Names in `dir/out` (the only place outputs may go).
fn outputs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Run one hostile case and check every promise.
fn refuse(dir: &Path, args: &[&str], culprit: &str) {
    let before = outputs(dir);
    let o = Command::new(bin()).current_dir(dir).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    let case = format!("iolearn {}", args.join(" "));
    assert!(!o.status.success(), "{case}: exit 0\n{err}");
    assert_ne!(o.status.code(), Some(101), "{case}: panicked\n{err}");
    assert!(o.status.code().is_some(), "{case}: killed by a signal\n{err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{case}: {err}");
    assert_eq!(
        lines.len(),
        1,
        "{case}: expected one line of error, got {}:\n{err}",
        lines.len()
    );
    assert!(lines[0].len() < 600, "{case}: a {}-byte error line", lines[0].len());
    assert!(
        lines[0].contains(culprit),
        "{case}: the error does not name {culprit:?}:\n{err}"
    );
    assert_eq!(outputs(dir), before, "{case}: left files at or beside the output path");
    assert!(
        std::fs::symlink_metadata(dir.join("out/link"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "{case}: replaced the planted link"
    );
}

#[test]
fn options_out_of_range_are_refused_by_name() {
    let d = inputs("options");
    let cases: &[(&[&str], &str)] = &[
        // trace
        (&["trace", "cut", "ok.trace", "--from", "1e11", "-o", "out/x"], "--from"),
        (&["trace", "cut", "ok.trace", "--from", "-1", "-o", "out/x"], "--from"),
        (&["trace", "cut", "ok.trace", "--from", "nan", "-o", "out/x"], "--from"),
        (
            &[
                "trace",
                "cut",
                "ok.trace",
                "--from",
                "0",
                "--seconds",
                "0",
                "-o",
                "out/x",
            ],
            "--seconds",
        ),
        (&["trace", "cut", "ok.trace", "-o", "out/x"], "--from"),
        (
            &["trace", "busiest", "ok.trace", "--seconds", "inf", "-o", "out/x"],
            "--seconds",
        ),
        (
            &["trace", "rerate", "ok.trace", "--factor", "1e-300", "-o", "out/x"],
            "--factor",
        ),
        (
            &["trace", "rerate", "ok.trace", "--factor", "0", "-o", "out/x"],
            "--factor",
        ),
        (
            &["trace", "rerate", "ok.trace", "--factor", "-2", "-o", "out/x"],
            "--factor",
        ),
        (&["trace", "convert", "ok.trace", "--to", "msr", "-o", "out/x"], "msr"),
        (
            &["trace", "convert", "ok.trace", "--format", "nope", "-o", "out/x"],
            "--format",
        ),
        // replay (all fail before any device is opened)
        (
            &[
                "replay",
                "block",
                "--replicas",
                "ok.trace",
                "--rate",
                "1e-300",
                "ok.trace",
            ],
            "--rate",
        ),
        (
            &["replay", "block", "--replicas", "ok.trace", "--rate", "nan", "ok.trace"],
            "--rate",
        ),
        (
            &[
                "replay",
                "block",
                "--replicas",
                "ok.trace",
                "--noise-threads",
                "100000",
                "ok.trace",
            ],
            "--noise-threads",
        ),
        (
            &["replay", "block", "--replicas", "ok.trace", "--depth", "0", "ok.trace"],
            "--depth",
        ),
        (
            &[
                "replay",
                "block",
                "--replicas",
                "ok.trace",
                "--failover-us",
                "-1",
                "ok.trace",
            ],
            "--failover-us",
        ),
        (
            &[
                "replay",
                "block",
                "--replicas",
                "ok.trace",
                "--noise-busy",
                "1",
                "ok.trace",
            ],
            "--noise-busy",
        ),
        (
            &["replay", "block", "--replicas", "ok.trace", "--seed", "-1", "ok.trace"],
            "--seed",
        ),
        (
            &[
                "replay",
                "block",
                "--replicas",
                "ok.trace",
                "--policy",
                "base+hedge=1e300",
                "ok.trace",
            ],
            "hedge",
        ),
        (
            &[
                "replay",
                "block",
                "--replicas",
                "ok.trace",
                "--policy",
                "base+timeout=-5",
                "ok.trace",
            ],
            "timeout",
        ),
        (
            &[
                "replay",
                "block",
                "--replicas",
                "ok.trace",
                "--policy",
                "teleport",
                "ok.trace",
            ],
            "teleport",
        ),
        (
            &["replay", "block", "--replicas", "ok.trace", "-o", "out/", "ok.trace"],
            "out/",
        ),
        (
            &[
                "replay",
                "block",
                "--replicas",
                "ok.trace",
                "-o",
                "ok.trace",
                "ok.trace",
            ],
            "replicas",
        ),
        // tune and probe (fail before anything on the machine is touched)
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--sample",
                "0",
            ],
            "--sample",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--sample",
                "1.5",
            ],
            "--sample",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--rest-every",
                "0",
            ],
            "--rest-every",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--duration",
                "-1",
            ],
            "--duration",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--duration",
                "nan",
            ],
            "--duration",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--interval",
                "1e300",
            ],
            "--interval",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--interval",
                "1e-300",
            ],
            "--interval",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--fallback-kb",
                "1e12",
            ],
            "--fallback-kb",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--fallback-kb",
                "-1",
            ],
            "--fallback-kb",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--hold",
                "0",
            ],
            "--hold",
        ),
        (
            &["tune", "readahead", "--device", "../../etc", "--model", "ok.iolm"],
            "--device",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--pid",
                "4194305",
            ],
            "--pid",
        ),
        (
            &["tune", "readahead", "--device", "loop0", "--model", "garbage.iolm"],
            "garbage.iolm",
        ),
        (
            &["probe", "readahead", "--device", "loop0", "--interval", "0"],
            "--interval",
        ),
        (
            &["probe", "readahead", "--device", "loop0", "--duration", "inf"],
            "--duration",
        ),
        (
            &["probe", "readahead", "--device", "../sda", "--duration", "1"],
            "--device",
        ),
        (
            &["probe", "readahead", "--device", "loop0", "-o", "out/link"],
            "symbolic link",
        ),
        (
            &["probe", "readahead", "--device", "loop0", "-o", "missing/x.csv"],
            "does not exist",
        ),
        // dispatch
        (&["trace", "nope"], "nope"),
        (&["sim", "nope"], "nope"),
        (&["eval", "nope"], "nope"),
        (&["bench", "nope"], "nope"),
        (&["bench", "readahead"], "--real"),
    ];
    for (args, culprit) in cases {
        refuse(&d, args, culprit);
    }
}

#[test]
fn malformed_files_of_every_format_are_refused_by_name() {
    let d = inputs("files");
    let cases: &[(&[&str], &str)] = &[
        // models
        (&["model", "inspect", "garbage.iolm"], "garbage.iolm"),
        (&["model", "inspect", "empty.iolm"], "empty.iolm"),
        (&["model", "inspect", "/dev/zero"], "limit"),
        (&["model", "inspect", "out"], "directory"),
        (&["model", "inspect", "missing.iolm"], "missing.iolm"),
        (&["model", "predict", "ok.iolm", "typo.csv"], "line 1"),
        (&["model", "predict", "ok.iolm", "short.csv"], "expected 5 values"),
        (&["model", "predict", "ok.iolm", "hole.csv"], "empty"),
        (
            &["model", "predict", "ok.iolm", "nan.csv"],
            "field 3: \"nan\" is not a finite",
        ),
        (&["model", "predict", "ok.iolm", "huge.csv"], "field 4: \"1e300\""),
        (&["trace", "stats", "huge-time.trace"], "line 2: arrival_ms"),
        (&["model", "predict", "ok.iolm", "semicolons.csv"], "no rows"),
        (&["model", "predict", "ok.iolm", "many-fields.csv"], "found more than 5"),
        (&["model", "predict", "ok.iolm", "blank.csv"], "no rows to predict"),
        (&["trace", "stats", "unsorted.trace"], "time order"),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--metrics",
                "nowhere",
            ],
            "--metrics",
        ),
        (
            &["trace", "convert", "bad.trace", "--to", "msr", "-o", "out/x"],
            "'msr' for '--to",
        ),
        (&["trace", "stats", "empty.trace"], "no I/Os"),
        (
            &["trace", "cut", "unsorted.trace", "--skip", "0", "-o", "out/x"],
            "time order",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--restore",
                "--state-dir",
                "ok.trace",
            ],
            "not a directory",
        ),
        (
            &["replay", "block", "--replicas", "ok.iolm", "-o", "ok.trace", "ok.trace"],
            "input trace",
        ),
        (
            &["replay", "block", "--replicas", "ok.iolm,ok.iolm", "ok.trace"],
            "twice",
        ),
        (
            &[
                "replay",
                "block",
                "--replicas",
                "ok.iolm",
                "-o",
                "out/a",
                "--samples",
                "out/a",
                "ok.trace",
            ],
            "same file",
        ),
        (
            &[
                "replay",
                "block",
                "--replicas",
                "ok.iolm",
                "--rate",
                "1e-6",
                "long.trace",
            ],
            "real time",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--interval",
                "0.001",
            ],
            "--interval",
        ),
        (&["model", "predict", "ok.iolm", "long-line.csv"], "long-line.csv"),
        (&["model", "predict", "garbage.iolm", "rows.csv"], "garbage.iolm"),
        (
            &["model", "import-kml", "missing-dir", "-o", "out/m.iolm"],
            "missing-dir",
        ),
        (&["model", "import-kml", "out", "-o", "out/link"], "symbolic link"),
        // traces, every reader
        (&["trace", "stats", "bad.trace"], "line 2"),
        (&["trace", "stats", "zero.trace"], "zero.trace"),
        (&["trace", "stats", "neg.trace"], "neg.trace"),
        (&["trace", "stats", "nul.trace"], "nul.trace"),
        (
            &["trace", "stats", "--format", "blkparse", "msr.csv"],
            "not a blkparse event",
        ),
        (&["trace", "stats", "msr-extra.csv"], "8th column"),
        (&["trace", "stats", "msr-type.csv"], "Type"),
        (
            &["trace", "stats", "--format", "blkparse", "blk-unsorted.txt"],
            "line 2",
        ),
        (&["trace", "stats", "--format", "blkparse", "blk-zero.txt"], "blocks"),
        (&["trace", "stats", "--format", "binary", "bin.iolt"], "bin.iolt"),
        (&["trace", "stats", "missing.trace"], "missing.trace"),
        // outputs
        (&["trace", "convert", "ok.trace", "-o", "out/link"], "symbolic link"),
        (&["trace", "convert", "ok.trace", "-o", "out"], "directory"),
        (
            &["trace", "convert", "ok.trace", "-o", "out/missing/x"],
            "does not exist",
        ),
        (&["trace", "convert", "ok.trace", "-o", "ok.trace"], "input trace"),
        (&["trace", "convert", "bad.trace", "-o", "out/x"], "line 2"),
    ];
    for (args, culprit) in cases {
        refuse(&d, args, culprit);
    }
}

#[test]
fn dev_null_as_output_stays_a_device() {
    let d = inputs("devnull");
    let o = Command::new(bin())
        .current_dir(&d)
        .args(["trace", "convert", "ok.trace", "-o", "/dev/null"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn negative_counts_name_their_option() {
    let d = inputs("negative");
    let cases: &[(&[&str], &str)] = &[
        (&["trace", "cut", "ok.trace", "--skip", "-1", "-o", "out/x"], "--skip"),
        (&["trace", "cut", "ok.trace", "--count", "-3", "-o", "out/x"], "--count"),
        (
            &["replay", "block", "--replicas", "ok.trace", "--limit", "-1", "ok.trace"],
            "--limit",
        ),
        (
            &[
                "tune",
                "readahead",
                "--device",
                "loop0",
                "--model",
                "ok.iolm",
                "--pid",
                "-1",
            ],
            "--pid",
        ),
        (&["probe", "readahead", "--device", "loop0", "--pid", "-5"], "--pid"),
    ];
    for (args, culprit) in cases {
        refuse(&d, args, culprit);
    }
}

/// The Python commands run the repository's `.venv` interpreter only when nobody else could
/// have planted or swapped it (iolearn runs as root): a world-writable directory above it makes
/// it untrusted, and `python3` on the PATH runs instead.
#[test]
fn a_planted_interpreter_is_not_run() {
    use std::os::unix::fs::PermissionsExt;
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("planted");
    let _ = std::fs::remove_dir_all(&root);
    let repo = root.join("repo");
    std::fs::create_dir_all(repo.join("target/release")).unwrap();
    std::fs::create_dir_all(repo.join(".venv/bin")).unwrap();
    let exe = repo.join("target/release/iolearn");
    std::fs::copy(bin(), &exe).unwrap();
    let marker = root.join("ran");
    let python = repo.join(".venv/bin/python");
    std::fs::write(
        &python,
        format!("#!/bin/sh\necho \"$@\" >> {}\nexit 1\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = || {
        let _ = std::fs::remove_file(&marker);
        // The binary was copied just now: a child another test thread forked meanwhile holds
        // the copy's write descriptor until it execs, and exec then fails with ETXTBSY (the
        // tests run in parallel threads of one process). That passes; try again.
        for attempt in 0.. {
            let out = Command::new(&exe)
                .args(["eval", "admission", "--help"])
                .env_remove("IOLEARN_PYTHON")
                .env("PATH", "/nonexistent")
                .output();
            match out {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && attempt < 50 => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => {
                    other.unwrap();
                    break;
                }
            }
        }
        marker.exists()
    };
    for (dir, mode) in [(&repo, 0o777), (&repo, 0o775), (&repo.join(".venv/bin"), 0o757)] {
        std::fs::set_permissions(&repo, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(repo.join(".venv/bin"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
        assert!(!run(), "{} at {mode:o}: the interpreter below it ran", dir.display());
    }
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&repo, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(repo.join(".venv/bin"), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(!run(), "a world-writable interpreter ran");
    // Owned by us, writable only by us: the repository's interpreter is the one that runs.
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(run(), "the trusted interpreter did not run");
    // The code it would load counts too: a `.pth` file in site-packages runs at start-up, and
    // the package is the repository's python/iolearn.
    let site = repo.join(".venv/lib/python3.11/site-packages");
    let package = repo.join("python/iolearn");
    for dir in [&site, &package] {
        std::fs::create_dir_all(dir).unwrap();
        let f = dir.join("x.pth");
        std::fs::write(&f, "").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(
            !run(),
            "{}: a world-writable file, and the interpreter ran",
            f.display()
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o775)).unwrap();
        assert!(!run(), "{}: group-writable, and the interpreter ran", dir.display());
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(run(), "{}: safe again, and the interpreter did not run", dir.display());
    }
    std::fs::remove_dir_all(&root).unwrap();
}

/// Inputs and outputs of one command never meet, and what an error quotes stays short.
#[test]
fn outputs_over_inputs_and_long_quotes() {
    let d = inputs("over");
    // `model import-kml` refuses to write over one of KML's files it reads.
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference/kml/readahead/nn_arch_data");
    let kml = d.join("kml");
    std::fs::create_dir_all(&kml).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), kml.join(e.file_name())).unwrap();
    }
    let before = std::fs::read(kml.join("linear0_w.csv")).unwrap();
    refuse(
        &d,
        &["model", "import-kml", "kml", "-o", "kml/linear0_w.csv"],
        "is an input of the import",
    );
    assert_eq!(std::fs::read(kml.join("linear0_w.csv")).unwrap(), before);
    // A policy of 20,000 characters is quoted by an excerpt.
    let long = format!("base+{}", "x".repeat(20_000));
    let o = Command::new(bin())
        .current_dir(&d)
        .args([
            "replay",
            "block",
            "--replicas",
            "ok.trace",
            "--policy",
            &long,
            "ok.trace",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.len() < 400, "{} bytes: {err}", err.len());
}

/// The Python commands do not import modules from the working directory (iolearn runs as root,
/// perhaps from /tmp): a planted `iolearn.py` there is never run.
#[test]
fn modules_planted_in_the_working_directory_are_not_imported() {
    let d = inputs("planted-module");
    let marker = d.join("imported");
    let _ = std::fs::remove_file(&marker);
    std::fs::write(
        d.join("iolearn.py"),
        format!("open({:?}, 'w').write('x')\n", marker.display().to_string()),
    )
    .unwrap();
    let o = Command::new(bin())
        .current_dir(&d)
        .args(["eval", "admission", "--help"])
        .output()
        .unwrap();
    assert!(!marker.exists(), "the planted iolearn.py ran");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_file(d.join("iolearn.py")).unwrap();
}
