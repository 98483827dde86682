//! `iolearn sim ssd` as a user runs it: the summary, every I/O as CSV and Parquet (the same
//! records either way), and bad input refused in one line that names it, with nothing written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn iolearn_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iolearn"))
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap()
}

/// A directory with a small trace, an output directory holding a planted link, a file, and
/// bad traces.
fn setup(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sim-ssd").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("out")).unwrap();
    let lines: String = (0..200)
        .map(|i| format!("{:.1} 0 {} 4096 1\n", i as f64 * 0.1, 4096 * i))
        .collect();
    std::fs::write(d.join("tiny.trace"), &lines).unwrap();
    std::fs::write(d.join("bad.trace"), "0.0 0 4096 4096 1\n0.5 0 zz 4096 1\n").unwrap();
    // The second I/O is larger than any block layer sends.
    std::fs::write(d.join("huge-io.trace"), "0 0 0 4096 1\n1 0 4096 4294967295 0\n").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", d.join("out/link")).unwrap();
    std::fs::write(d.join("file"), "x").unwrap();
    d
}

fn listing(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn bad_input_is_refused_by_name_and_nothing_is_written() {
    let d = setup("bad");
    let t = ["--trace", "tiny.trace"];
    let cases: &[(&[&str], &str)] = &[
        (&["--out", "out/x.csv", "--replicas", "1000000"], "--replicas"),
        (&["--out", "out/x.csv", "--replicas", "-1"], "--replicas"),
        (&["--out", "out/x.csv", "--replicas", "0"], "--replicas"),
        (&["--out", "out/x.csv", "--precondition", "1e300"], "--precondition"),
        (&["--out", "out/x.csv", "--precondition", "-0.5"], "--precondition"),
        (&["--out", "out/x.csv", "--hop-us", "nan"], "--hop-us"),
        (&["--out", "out/x.csv", "--seed", "18446744073709551616"], "--seed"),
        (&["--out", "out/x.csv", "--repeat", "0"], "--repeat"),
        (&["--out", "out/x.csv", "--repeat", "1000001"], "--repeat"),
        (&["--out", "out/x.csv", "--mode", "fast"], "--mode"),
        (&["--out", "out/x.csv", "--noise", "loud"], "--noise"),
        (&["--out", "out/x.csv", "--format", "xml"], "--format"),
        (&["--out", "out/x.csv", "--preset", "huge"], "huge"),
        (&["--out", "out/x.csv", "--preset", "hdd"], "hdd"),
        (&["--out", "out/x.csv", "--preset", "missing.toml"], "missing.toml"),
        (&["--out", "out/x.csv", "--preset", "file.toml"], "file.toml"),
        (&["--out", "out/link"], "symbolic link"),
        (&["--out", "out/missing/x.csv"], "does not exist"),
        (&["--out", "out"], "directory"),
        (&["--out", "out/x.json"], ".parquet or .csv"),
        (&["--out", "tiny.trace"], "input trace"),
    ];
    std::fs::write(d.join("file.toml"), "channels = \"many\"\n").unwrap();
    let mut all: Vec<(Vec<&str>, &str)> = cases
        .iter()
        .map(|(a, c)| ([&["sim", "ssd"][..], &t[..], a].concat(), *c))
        .collect();
    for (trace, culprit) in [
        ("missing.trace", "missing.trace"),
        ("bad.trace", "bad.trace: line 2"),
        ("huge-io.trace", "size of I/O 1"),
    ] {
        all.push((vec!["sim", "ssd", "--trace", trace, "--out", "out/x.parquet"], culprit));
    }
    for (args, culprit) in all {
        let before = listing(&d.join("out"));
        let o = iolearn_in(&d, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!o.status.success(), "{args:?} passed");
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains(culprit), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(listing(&d.join("out")), before, "{args:?} left a file");
        assert!(d.join("out/link").is_symlink());
    }
    // A bad line after a whole row group was written: the error names it and no file appears.
    let mut long: String = (0..300_000).map(|i| format!("{i} 0 {} 4096 1\n", 4096 * i)).collect();
    long += "300000 0 zz 4096 1\n";
    std::fs::write(d.join("long.trace"), long).unwrap();
    for out in ["out/l.parquet", "out/l.csv"] {
        let o = iolearn_in(
            &d,
            &["sim", "ssd", "--trace", "long.trace", "--replicas", "1", "--out", out],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("long.trace: line 300001"), "{err}");
        assert!(!d.join(out).exists(), "{out} was left");
    }
    assert_eq!(listing(&d.join("out")), ["link"]);
    // Skipping the bad line replays the rest.
    let o = iolearn_in(
        &d,
        &["sim", "ssd", "--trace", "bad.trace", "--skip-bad", "--replicas", "1"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("skipped 1 bad line(s)"));
    assert!(String::from_utf8_lossy(&o.stdout).contains("replayed 1 I/Os"));
}

#[test]
fn csv_and_parquet_hold_the_same_records_and_the_summary_counts_them() {
    let d = setup("out");
    // Three passes of the tiny trace on two consumer drives.
    let args = [
        "sim",
        "ssd",
        "--trace",
        "tiny.trace",
        "--preset",
        "consumer",
        "--replicas",
        "2",
        "--repeat",
        "3",
    ];
    let run = |out: &str| {
        let o = iolearn_in(&d, &[&args[..], &["--out", out]].concat());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };

    let (a, b) = (run("out/r.csv"), run("out/r.parquet"));
    assert_eq!(a.lines().next(), b.lines().next(), "the same summary");
    assert!(a.starts_with("600 reads: mean "), "{a}");
    assert!(a.contains("replayed 600 I/Os, wrote them to out/r.csv"), "{a}");
    let csv = std::fs::read_to_string(d.join("out/r.csv")).unwrap();
    let rows: Vec<Vec<u64>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    assert_eq!(csv.lines().next().unwrap(), "arrival_ns,offset,size,write,replica,latency_ns,pending,plane_wait_ns,channel_wait_ns,gc_active,buffered_pages");
    assert_eq!(rows.len(), 600);
    // Three passes back to back (arrivals in ms): the second starts one mean gap (0.1 ms)
    // after the first ends.
    assert_eq!((rows[0][0], rows[199][0], rows[200][0]), (0, 19_900_000, 20_000_000));
    assert_eq!(rows.iter().map(|r| r[4]).max(), Some(1), "two replicas");
    assert!(rows.iter().all(|r| r[5] > 0 && r[2] == 4096));
    // The Parquet file's columns, read back with the same library: the same records.
    let file = std::fs::File::open(d.join("out/r.parquet")).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader;
    assert_eq!(reader.metadata().file_metadata().num_rows(), 600);
    let back: Vec<Vec<u64>> = reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            let row = row.unwrap();
            row.get_column_iter()
                .map(|(_, f)| match f {
                    parquet::record::Field::ULong(v) => *v,
                    parquet::record::Field::UInt(v) => *v as u64,
                    parquet::record::Field::Bool(v) => *v as u64,
                    other => panic!("unexpected field {other:?}"),
                })
                .collect()
        })
        .collect();
    assert_eq!(back, rows);
    // Without --out, the same summary and nothing written.
    let before = listing(&d.join("out"));
    let o = iolearn_in(&d, &args);
    let text = String::from_utf8_lossy(&o.stdout);
    // No device state without records: the summary has no GC share.
    assert_eq!(
        text.lines().next().unwrap(),
        a.lines().next().unwrap().split("; ").next().unwrap()
    );
    assert_eq!(listing(&d.join("out")), before);
}
