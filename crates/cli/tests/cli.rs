//! The `iolearn model` commands, run as a user would (issue 2).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kml() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference/kml/readahead")
}

fn iolearn(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_iolearn"));
    for a in args {
        c.arg(a);
    }
    c.output().unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("iolearn-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn import(dir: &Path, tree: bool) -> PathBuf {
    let out = dir.join(if tree { "dt.iolm" } else { "nn.iolm" });
    let nn = kml().join("nn_arch_data");
    let dt = kml().join("decision_tree_model/readahead_model.dt");
    let o = if tree {
        iolearn(&[&"model", &"import-kml", &nn, &"--tree", &dt, &"-o", &out])
    } else {
        iolearn(&[&"model", &"import-kml", &nn, &"-o", &out])
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn kml_column(col: usize) -> Vec<String> {
    std::fs::read_to_string(kml().join("nn_arch_data/kml_inference.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(col).unwrap().to_string())
        .collect()
}

#[test]
fn predict_reproduces_kml_network_and_tree() {
    let d = tmp("predict");
    for (tree, col) in [(false, 2), (true, 3)] {
        let model = import(&d, tree);
        let o = iolearn(&[
            &"model",
            &"predict",
            &model,
            &kml().join("nn_arch_data/input.csv"),
            &"--prenormalized",
        ]);
        assert!(o.status.success());
        let got: Vec<String> = String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(got, kml_column(col), "tree={tree}");
    }
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn predict_normalises_raw_rows() {
    // Raw rows = normalised rows * std + mean; the model's own normaliser must undo that.
    let d = tmp("raw");
    let model = import(&d, false);
    let mean: Vec<f64> = std::fs::read_to_string(kml().join("nn_arch_data/mean.csv"))
        .unwrap()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let std: Vec<f64> = std::fs::read_to_string(kml().join("nn_arch_data/stddev.csv"))
        .unwrap()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let raw: String = std::fs::read_to_string(kml().join("nn_arch_data/input.csv"))
        .unwrap()
        .lines()
        .map(|l| {
            l.split_whitespace()
                .enumerate()
                .map(|(i, v)| format!("{}", v.parse::<f64>().unwrap() * std[i] + mean[i]))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let csv = d.join("raw.csv");
    std::fs::write(&csv, format!("n,var_pop,var_sample,delta,ra\n{raw}\n")).unwrap();
    let o = iolearn(&[&"model", &"predict", &model, &csv, &"--labels"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: Vec<String> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let names = ["readrandom", "readrandomwriterandom", "readseq", "readreverse"];
    let want: Vec<String> = kml_column(2)
        .iter()
        .map(|c| names[c.parse::<usize>().unwrap()].to_string())
        .collect();
    let same = got.iter().zip(&want).filter(|(a, b)| a == b).count();
    assert!(
        same >= 420,
        "{same}/422 (float rounding of the round trip may flip a rare borderline row)"
    );
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn inspect_shows_architecture_schema_and_checksum() {
    let d = tmp("inspect");
    let model = import(&d, false);
    let o = iolearn(&[&"model", &"inspect", &model]);
    let s = String::from_utf8(o.stdout).unwrap();
    for want in [
        "mlp linear 5->15, sigmoid, linear 15->5, sigmoid, linear 5->4",
        "kml-readahead-v1",
        "crc32 0x",
        "parameters:    194",
        "readseq -> 320",
    ] {
        assert!(s.contains(want), "missing {want:?} in\n{s}");
    }
    let o = iolearn(&[&"model", &"inspect", &model, &"--json"]);
    assert!(String::from_utf8(o.stdout).unwrap().starts_with('{'));
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn bad_model_files_give_clear_errors_and_exit_1() {
    let d = tmp("bad");
    let model = import(&d, false);
    let bytes = std::fs::read(&model).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated.iolm", bytes[..bytes.len() / 2].to_vec(), "truncated"),
        (
            "corrupt.iolm",
            {
                let mut b = bytes.clone();
                b[100] ^= 0xff;
                b
            },
            "corrupted",
        ),
        (
            "notmodel.iolm",
            b"hello world, not a model".to_vec(),
            "not an iolearn model",
        ),
        ("empty.iolm", vec![], "truncated"),
    ];
    for (name, content, want) in cases {
        let p = d.join(name);
        std::fs::write(&p, content).unwrap();
        let o = iolearn(&[&"model", &"inspect", &p]);
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(err.contains(name) && err.contains(want), "{name}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let o = iolearn(&[&"model", &"inspect", &d.join("missing.iolm")]);
    assert!(String::from_utf8(o.stderr).unwrap().contains("missing.iolm"));
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn bad_csv_names_file_and_line() {
    let d = tmp("csv");
    let model = import(&d, false);
    let csv = d.join("rows.csv");
    std::fs::write(&csv, "1 2 3 4 5\n1 2 x 4 5\n").unwrap();
    let e = String::from_utf8(iolearn(&[&"model", &"predict", &model, &csv]).stderr).unwrap();
    assert!(e.contains("rows.csv: line 2") && e.contains("\"x\""), "{e}");
    std::fs::write(&csv, "1 2 3 4 5\n1 2 3\n").unwrap();
    let e = String::from_utf8(iolearn(&[&"model", &"predict", &model, &csv]).stderr).unwrap();
    assert!(e.contains("line 2: expected 5 values"), "{e}");
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn failed_import_leaves_no_output_file() {
    let d = tmp("atomic");
    let src = d.join("nn");
    std::fs::create_dir_all(&src).unwrap();
    for f in std::fs::read_dir(kml().join("nn_arch_data")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, src.join(f.file_name().unwrap())).unwrap();
    }
    std::fs::write(src.join("linear2_bias.csv"), "1 2 3\n").unwrap(); // 3 of 4 biases
    let out = d.join("out.iolm");
    let o = iolearn(&[&"model", &"import-kml", &src, &"-o", &out]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8(o.stderr).unwrap();
    assert!(
        e.contains("linear2_bias.csv") && e.contains("expected 4, found 3"),
        "{e}"
    );
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(&d).unwrap().count(),
        1,
        "no temporary files left behind"
    );
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn readahead_needs_the_python_package_and_says_so() {
    let o = Command::new(env!("CARGO_BIN_EXE_iolearn"))
        .args(["readahead", "all"])
        .env("IOLEARN_PYTHON", "/bin/false")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("make setup"));
}

#[test]
fn the_python_commands_become_the_interpreter_so_signals_reach_it() {
    // A stand-in interpreter that records its pid and waits. `iolearn` must exec it: a child
    // would leave SIGTERM (systemd's stop, a user's kill) at a parent that dies of it, and the
    // benchmark behind it running with its loop device and db_bench processes.
    let d = std::env::temp_dir().join(format!("iolearn-exec-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let (py, pidfile) = (d.join("python"), d.join("pid"));
    std::fs::write(
        &py,
        format!(
            "#!/bin/sh\n[ \"$1\" = -c ] && exit 0\necho $$ > {}\nexec sleep 60\n",
            pidfile.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_iolearn"))
        .args(["readahead", "all"])
        .env("IOLEARN_PYTHON", &py)
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while !pidfile.exists() && t.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(100)); // the pid written out
    let pid: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    assert_eq!(pid, child.id(), "the interpreter runs as iolearn's own process");
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    std::fs::remove_dir_all(d).unwrap();
}
