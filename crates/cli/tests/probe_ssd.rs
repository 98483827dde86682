//! `iolearn probe ssd` as a user runs it: a simulated drive's internals found from latencies
//! and shown beside the truth, the report as JSON, and every bad input refused by name with
//! nothing written.

use std::path::PathBuf;
use std::process::{Command, Output};

fn iolearn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iolearn")).args(args).output().unwrap()
}

fn dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("probe-ssd");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_simulated_drive_is_read_right_and_reported_as_json() {
    let json = dir().join("report.json");
    let _ = std::fs::remove_file(&json);
    let o = iolearn(&["probe", "ssd", "--sim", "consumer", "--json", json.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    // Found and true side by side.
    for row in [
        "page (buffer unit)         16 KiB       16 KiB",
        "write buffer               16 MiB       16 MiB",
        "parallel units                 64           64",
        "channels                        8            8",
    ] {
        assert!(text.contains(row), "{row:?} in\n{text}");
    }
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let (found, truth) = (&v["report"]["gc_onset_bytes"]["value"], &v["truth"]["gc_onset_bytes"]);
    let (found, truth) = (found.as_f64().unwrap(), truth.as_f64().unwrap());
    let capacity = v["report"]["capacity_bytes"].as_f64().unwrap();
    assert!(
        (found - truth).abs() < 0.01 * capacity,
        "GC onset {found} against {truth}"
    );
    assert_eq!(v["report"]["unit_bytes"]["value"], 16384);
    assert_eq!(v["truth"]["parallel_units"], 64);
}

#[test]
fn bad_input_is_refused_by_name_and_writes_nothing() {
    let d = dir();
    let toml = d.join("bad.toml");
    let preset =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../flash/presets/consumer.toml"))
            .unwrap();
    std::fs::write(&toml, preset.replace("channels = 8", "channels = 0")).unwrap();
    let json = d.join("never.json");
    let _ = std::fs::remove_file(&json);
    let img = d.join("victim.img");
    std::fs::File::create(&img).unwrap().set_len(64 << 20).unwrap();
    let j = json.to_str().unwrap();
    let fifo = d.join("fifo.toml");
    let _ = std::fs::remove_file(&fifo);
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--sim", fifo.to_str().unwrap()], "not a regular file"),
        (vec!["--sim", "consumer", "--allow-writes"], "--allow-writes"),
        (vec!["--sim", "random:x"], "random:SEED"),
        (vec!["--sim", "nosuch"], "nosuch"),
        (vec!["--sim", toml.to_str().unwrap()], "bad.toml: channels: 0"),
        (vec!["--sim", "consumer", "--gc-mode", "bogus"], "--gc-mode"),
        (vec!["--sim", "consumer", "--queue-depth", "0"], "--queue-depth"),
        (vec!["--sim", "consumer", "--max-page", "3000"], "--max-page"),
        (vec!["--sim", "consumer", "--max-distance", "1"], "--max-distance"),
        (vec!["--sim", "consumer", "--gc-budget", "nan"], "--gc-budget"),
        (
            vec![
                "--device",
                img.to_str().unwrap(),
                "--allow-writes",
                "--gc-mode",
                "tolerant",
            ],
            "--gc-mode",
        ),
        (vec!["--device", img.to_str().unwrap()], "--allow-writes"),
        (vec![], "--sim"),
    ];
    for (args, needle) in cases {
        let mut all = vec!["probe", "ssd", "--json", j];
        all.extend(&args);
        let o = iolearn(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} accepted");
        assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!json.exists(), "{args:?} wrote its output");
    }
    // The report never replaces its input.
    let o = iolearn(&[
        "probe",
        "ssd",
        "--sim",
        toml.to_str().unwrap(),
        "--json",
        toml.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("configuration file"));
    assert!(
        std::fs::read_to_string(&toml).unwrap().contains("channels = 0"),
        "the TOML is intact"
    );
    // Refused without --allow-writes: the image is untouched (still a hole of zeros).
    assert_eq!(std::fs::read(&img).unwrap().iter().filter(|&&b| b != 0).count(), 0);
}

#[test]
fn the_system_disk_is_never_probed() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIP the_system_disk_is_never_probed: needs root (to see the device)");
        return;
    }
    for disk in iolearn_tune::system_disks() {
        let dev = format!("/dev/{disk}");
        if !std::path::Path::new(&dev).exists() {
            continue;
        }
        let o = iolearn(&["probe", "ssd", "--device", &dev, "--allow-writes", "--no-gc"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("system disk"), "{dev}: {err}");
    }
}
