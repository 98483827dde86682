//! `iolearn trace` run as a user would (issue 5).

use std::path::PathBuf;
use std::process::{Command, Output};

fn iolearn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iolearn")).args(args).output().unwrap()
}

fn reference(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/traces")
        .join(name)
        .display()
        .to_string()
}

fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-cli");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn stats_match_the_reference_stats_files() {
    for name in ["msr.cut.per_10k.rw_20_80.105", "msr.cut.per_10k.rw_40_60.1370"] {
        let o = iolearn(&["trace", "stats", &reference(&format!("{name}.trace"))]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let got = String::from_utf8(o.stdout).unwrap();
        let want = std::fs::read_to_string(reference(&format!("{name}.stats"))).unwrap();
        assert_eq!(
            got.lines().skip(1).collect::<Vec<_>>(),
            want.lines().skip(1).collect::<Vec<_>>()
        );
    }
}

#[test]
fn cut_busiest_rerate_and_convert_write_traces() {
    let src = reference("msr.cut.per_10k.rw_40_60.1370.trace");
    let bin = tmp("t.iolt");
    let o = iolearn(&["trace", "convert", &src, "-o", bin.to_str().unwrap(), "--to", "binary"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Binary back to text gives the same stats.
    let back = tmp("back.trace");
    assert!(
        iolearn(&["trace", "convert", bin.to_str().unwrap(), "-o", back.to_str().unwrap()])
            .status
            .success()
    );
    let s1 = iolearn(&["trace", "stats", &src]).stdout;
    let s2 = iolearn(&["trace", "stats", back.to_str().unwrap()]).stdout;
    assert_eq!(
        String::from_utf8_lossy(&s1).lines().skip(1).collect::<Vec<_>>(),
        String::from_utf8_lossy(&s2).lines().skip(1).collect::<Vec<_>>()
    );
    let cut = tmp("cut.trace");
    let o = iolearn(&[
        "trace",
        "cut",
        &src,
        "--skip",
        "100",
        "--count",
        "500",
        "-o",
        cut.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(std::fs::read_to_string(&cut).unwrap().lines().count(), 500);
    let busy = tmp("busy.trace");
    let o = iolearn(&[
        "trace",
        "busiest",
        &src,
        "--seconds",
        "10",
        "-o",
        busy.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("busiest 10 s starts at"));
    let fast = tmp("fast.trace");
    assert!(
        iolearn(&["trace", "rerate", &src, "--factor", "2", "-o", fast.to_str().unwrap()])
            .status
            .success()
    );
    let s = String::from_utf8(iolearn(&["trace", "stats", fast.to_str().unwrap()]).stdout).unwrap();
    assert!(s.contains("Duration    = 42.0 s"), "{s}");
}

#[test]
fn bad_traces_are_clear_errors_or_skipped_with_a_count() {
    let bad = tmp("bad.trace");
    std::fs::write(&bad, "0.0 0 0 4096 1\n1.0 0 0 4096 9\n2.0 0 0 4096 0\n").unwrap();
    let o = iolearn(&["trace", "stats", bad.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("bad.trace: line 2: op"), "{e}");
    let o = iolearn(&["trace", "stats", bad.to_str().unwrap(), "--skip-bad"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("skipped 1 bad line"));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Total IO    = 2"));
    // A failed write leaves nothing behind.
    let o = iolearn(&[
        "trace",
        "convert",
        bad.to_str().unwrap(),
        "-o",
        "/nonexistent/dir/x.trace",
        "--skip-bad",
    ]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("/nonexistent/dir/x.trace"));
    let o = iolearn(&["trace", "rerate", bad.to_str().unwrap(), "--factor", "0", "-o", "x"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--factor"));
}

/// `iolearn` with `stdin` piped in.
fn iolearn_with_input(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_iolearn"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

#[test]
fn dash_reads_standard_input_and_writes_standard_output() {
    let src = reference("msr.cut.per_10k.rw_20_80.105.trace");
    let text = std::fs::read(&src).unwrap();
    let piped = iolearn_with_input(&["trace", "stats", "-"], &text);
    let named = iolearn(&["trace", "stats", &src]);
    assert!(piped.status.success(), "{}", String::from_utf8_lossy(&piped.stderr));
    let lines = |o: &Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .skip(1)
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&piped), lines(&named));
    assert!(String::from_utf8_lossy(&piped.stdout).contains("<stdin>"));

    // A binary trace through a pipe reads back as the same trace (its format found by magic).
    let bin = iolearn_with_input(&["trace", "convert", "--to", "binary", "-", "-o", "-"], &text);
    assert!(bin.status.success() && bin.stdout.starts_with(b"IOLT"));
    let again = iolearn_with_input(&["trace", "stats", "-"], &bin.stdout);
    assert_eq!(lines(&again), lines(&named));

    // Three I/Os cut to standard output; the note about what was kept goes to stderr only.
    let cut = iolearn_with_input(&["trace", "cut", "--count", "3", "-", "-o", "-"], &text);
    assert!(cut.status.success());
    assert_eq!(String::from_utf8_lossy(&cut.stdout).lines().count(), 3);

    // Bad standard input: one line naming <stdin> and the line and field.
    let bad = iolearn_with_input(&["trace", "stats", "-"], b"0 0 0 4096 1\nx y\n");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && bad.stdout.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("<stdin>: line 2: arrival_ms"), "{err}");
}

#[test]
fn generate_writes_the_trace_asked_for_and_refuses_fields_out_of_range() {
    let out = tmp("gen.trace");
    let o = iolearn(&[
        "trace",
        "generate",
        "--ios",
        "5000",
        "--iops",
        "2000",
        "--read-share",
        "0.75",
        "--burst",
        "1",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stats = String::from_utf8(iolearn(&["trace", "stats", out.to_str().unwrap()]).stdout).unwrap();
    assert!(stats.contains("Total IO    = 5000"), "{stats}");
    let reads: f64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("#read io    = "))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert!((reads / 5000.0 - 0.75).abs() < 0.03, "{stats}");
    for (flag, value) in [
        ("--read-share", "1.5"),
        ("--iops", "0"),
        ("--iops", "1e300"),
        ("--burst", "nan"),
        ("--zipf", "-1"),
    ] {
        let bad = tmp("bad-gen.trace");
        let o = iolearn(&["trace", "generate", flag, value, "-o", bad.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(flag), "{flag} {value}: {err}");
        assert!(err.len() < 200, "one short line: {err}");
        assert!(!bad.exists(), "{flag}: an output written after an error");
    }
}

#[test]
fn a_family_is_one_trace_per_member_and_a_manifest_and_its_seed_fixes_it() {
    let dir = tmp("family-a");
    let run = |d: &std::path::Path, seed: &str| {
        let o = iolearn(&[
            "trace",
            "family",
            "--seed",
            seed,
            "--count",
            "3",
            "--ios",
            "500",
            "-o",
            d.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run(&dir, "5");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("family.json")).unwrap()).unwrap();
    let members = manifest["members"].as_array().unwrap();
    assert_eq!(members.len(), 3);
    for m in members {
        let file = dir.join(m["file"].as_str().unwrap());
        let stats = String::from_utf8(iolearn(&["trace", "stats", file.to_str().unwrap()]).stdout).unwrap();
        assert!(stats.contains("Total IO    = 500 "), "{stats}");
    }
    // The same seed gives the same files; another seed other traces.
    let again = tmp("family-b");
    run(&again, "5");
    let other = tmp("family-c");
    run(&other, "6");
    let read = |d: &std::path::Path, n: &str| std::fs::read(d.join(format!("gen{n}.trace"))).unwrap();
    assert_eq!(read(&dir, "5-0"), read(&again, "5-0"));
    assert_ne!(read(&dir, "5-0"), read(&other, "6-0"));
    // A missing parent is an error, not a tree of new directories.
    let orphan = tmp("no-such-parent").join("family");
    let o = iolearn(&["trace", "family", "--count", "1", "-o", orphan.to_str().unwrap()]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no-such-parent"));
    assert!(!orphan.parent().unwrap().exists());
    // A file where the directory should be is refused, not replaced.
    let file = tmp("family-file");
    std::fs::write(&file, "x").unwrap();
    let o = iolearn(&["trace", "family", "--count", "1", "-o", file.to_str().unwrap()]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("not a directory"));
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}
