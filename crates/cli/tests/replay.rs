//! `iolearn replay block` (issue 6, must-show 4): a reference trace replayed on three loop-device
//! replicas with each kind of policy, latencies written; bad input refused with the culprit named.

use iolearn_ml::{Activation, DecisionTree, MlpBuilder, ModelFile, ModelKind, Rng, TreeConfig};
use iolearn_tune::testbed::{skip_without_loop, LoopDev};
use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_iolearn"))
}

fn trace() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/traces/msr.cut.per_10k.rw_40_60.1370.trace");
    p.is_file().then_some(p)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("iolearn-replay-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Model files of each learned kind, built here (weights do not matter for the plumbing).
fn models(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let linnos = MlpBuilder::new(31)
        .hidden(256, Activation::ReLU)
        .output(2)
        .seed(1)
        .build();
    let mut f = ModelFile::new(ModelKind::Mlp(linnos), "linnos-31");
    f.meta = vec![("rule".into(), "class".into()), ("quantize".into(), "x1000".into())];
    out.push(("linnos".to_string(), f));
    let reg = MlpBuilder::new(9)
        .hidden(16, Activation::ReLU)
        .output(1)
        .seed(2)
        .build();
    let mut f = ModelFile::new(ModelKind::Mlp(reg), "mittos-9");
    f.meta = vec![("rule".into(), "above_us=200".into())];
    out.push(("mittos".to_string(), f));
    // A tree that refuses when the oldest I/O in flight has waited over 500 us.
    let mut rng = Rng::new(3);
    let x: Vec<f32> = (0..13 * 500).map(|_| rng.below(2000) as f32).collect();
    let y: Vec<f32> = x.chunks(13).map(|r| (r[3] > 500.0) as u8 as f32).collect();
    let tree = DecisionTree::fit(&x, &y, 13, &TreeConfig::default()).unwrap();
    let mut f = ModelFile::new(ModelKind::Tree(tree), "iolearn-tail-v1");
    f.meta = vec![("rule".into(), "proba=0.5".into())];
    out.push(("tree".to_string(), f));
    out.into_iter()
        .map(|(name, f)| {
            let p = dir.join(format!("{name}.iolm"));
            f.save(&p).unwrap();
            (name, p)
        })
        .collect()
}

/// Rows of a records CSV: (primary, served_by, write, latency_ns, revoked, duplicates, errno).
fn rows(csv: &Path) -> Vec<[u64; 7]> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "arrival_ns,issued_ns,primary,served_by,write,offset,size,latency_ns,revoked,duplicates,errno"
    );
    lines
        .map(|l| {
            let v: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
            [v[2], v[3], v[4], v[7], v[8], v[9], v[10]]
        })
        .collect()
}

/// What a loop-device test needs, or `None` (with the reason printed) when it must skip: the
/// reference trace, a scratch directory, three 64 MiB loop devices and their `--replicas` list.
fn testbed(test: &str) -> Option<(PathBuf, PathBuf, Vec<LoopDev>, String)> {
    if skip_without_loop("iolearn (cli)", test) {
        return None;
    }
    let Some(trace) = trace() else {
        eprintln!("SKIP {test}: reference traces not found");
        return None;
    };
    let dir = scratch(test);
    let devs: Vec<LoopDev> = (0..3)
        .map(|i| LoopDev::create(&dir, &format!("r{i}"), 64).expect("a loop device"))
        .collect();
    let replicas = devs
        .iter()
        .map(|d| d.device.display().to_string())
        .collect::<Vec<_>>()
        .join(",");
    Some((trace, dir, devs, replicas))
}

#[test]
fn every_policy_replays_on_three_loop_devices() {
    let Some((trace, dir, devs, replicas)) = testbed("every_policy_replays_on_three_loop_devices") else {
        return;
    };
    let mut policies: Vec<(String, String)> = [
        "base",
        "random=0.5",
        "heursim=2",
        "heuradv=4,1,300",
        "base+hedge=200",
        "base+hedge=auto:50/0.05",
        "base+clone",
        "base+timeout=300",
    ]
    .iter()
    .map(|p| (p.to_string(), p.to_string()))
    .collect();
    for (name, path) in models(&dir) {
        policies.push((name, format!("model={}+hedge=400/0.05+rank", path.display())));
    }
    // A model per replica: replica 0's refuses every read, the others' none (one-leaf trees).
    for (r, slow) in [(0, 1.0f32), (1, 0.0), (2, 0.0)] {
        let tree = DecisionTree::fit(&vec![1.0f32; 13 * 50], &[slow; 50], 13, &TreeConfig::default()).unwrap();
        let mut f = ModelFile::new(ModelKind::Tree(tree), "iolearn-tail-v1");
        f.meta = vec![("rule".into(), "proba=0.5".into())];
        f.save(dir.join(format!("pr-r{r}.iolm"))).unwrap();
    }
    policies.push(("per-replica".into(), format!("model={}/pr-r{{r}}.iolm", dir.display())));
    for (name, policy) in &policies {
        let out = dir.join(format!("{}.csv", name.replace(['=', ',', '+', '/'], "_")));
        let o = Command::new(bin())
            .args(["replay", "block", "--replicas", &replicas, "--policy", policy])
            .args([
                "--limit",
                "3000",
                "--rate",
                "20",
                "--allow-writes",
                "--noise-threads",
                "2",
            ])
            .arg("--out")
            .arg(&out)
            .arg(&trace)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{policy}: {}\n{stdout}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(stdout.contains("reads:") && stdout.contains("p99"), "{stdout}");
        let r = rows(&out);
        // 3000 I/Os of the trace on each of the three replicas.
        assert_eq!(r.len(), 9000, "{policy}");
        assert!(
            r.iter().all(|x| x[6] == 0 && x[3] > 0),
            "{policy}: failed or zero-latency I/Os"
        );
        let reads: Vec<_> = r.iter().filter(|x| x[2] == 0).collect();
        assert!(reads.len() > 2000, "{} reads", reads.len());
        let revoked: u64 = reads.iter().map(|x| x[4]).sum();
        let dups: u64 = reads.iter().map(|x| x[5]).sum();
        if name == "per-replica" {
            // Refused at replica 0 only, once, then served elsewhere; never refused elsewhere.
            for x in &reads {
                assert_eq!(x[4], u64::from(x[0] == 0), "{x:?}");
            }
        }
        match policy.as_str() {
            "base" => {
                assert_eq!((revoked, dups), (0, 0));
                assert!(reads.iter().all(|x| x[0] == x[1]), "base serves at the primary");
            }
            "random=0.5" => {
                let share = revoked as f64 / reads.len() as f64;
                // Refused with p = 0.5 at each of the first two replicas: 0.5 + 0.25 per read.
                assert!((0.6..0.9).contains(&share), "revoked {share}");
            }
            "base+clone" => assert!(reads.iter().all(|x| x[5] == 1)),
            "base+hedge=200" | "base+timeout=300" => assert_eq!(revoked, 0),
            "base+hedge=auto:50/0.05" => {
                // The delay follows the reads' p95 (never under 50 us): some reads hedged,
                // within the budget and its burst.
                assert_eq!(revoked, 0);
                assert!(
                    dups > 0 && dups as f64 <= 10.0 + 0.05 * reads.len() as f64,
                    "{dups} hedges"
                );
            }
            _ => {}
        }
    }
    drop(devs);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_replicas_policies_and_traces_are_refused_by_name() {
    let Some(trace) = trace() else {
        eprintln!("SKIP bad_replicas_policies_and_traces_are_refused_by_name: reference traces not found");
        return;
    };
    let dir = scratch("bad");
    let small = dir.join("small.img");
    std::fs::write(&small, vec![0u8; 8192]).unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(bin())
            .args(["replay", "block"])
            .args(args)
            .output()
            .unwrap();
        (o.status.success(), String::from_utf8_lossy(&o.stderr).to_string())
    };
    let t = trace.to_str().unwrap();
    let (ok, e) = run(&["--replicas", "/nonexistent/replica", t]);
    assert!(!ok && e.contains("/nonexistent/replica"), "{e}");
    let (ok, e) = run(&["--replicas", small.to_str().unwrap(), t]);
    assert!(!ok && e.contains("small.img"), "{e}");
    for policy in ["oracle=100", "mittssd=100", "base+books=100", "mittssd-wb=100"] {
        let (ok, e) = run(&["--replicas", "/dev/null", "--policy", policy, t]);
        assert!(!ok && e.contains("simulator"), "{policy}: {e}");
    }
    let (ok, e) = run(&["--replicas", "/dev/null", "--policy", "teleport", t]);
    assert!(!ok && e.contains("unknown admission"), "{e}");
    let bad = dir.join("bad.trace");
    std::fs::write(&bad, "0.0 0 4096 4096 1\n1.0 0 zz 4096 1\n").unwrap();
    let (ok, e) = run(&["--replicas", "/dev/null", bad.to_str().unwrap()]);
    assert!(!ok && e.contains("bad.trace") && e.contains("line 2"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mittcache_serves_reads_the_page_cache_holds() {
    let Some((trace, dir, devs, replicas)) = testbed("mittcache_serves_reads_the_page_cache_holds") else {
        return;
    };
    let run = |policy: &str, out: &Path| {
        let o = Command::new(bin())
            .args([
                "replay",
                "block",
                "--buffered",
                "--replicas",
                &replicas,
                "--policy",
                policy,
            ])
            .args(["--limit", "1500", "--rate", "20", "--out"])
            .arg(out)
            .arg(&trace)
            .output()
            .unwrap();
        assert!(o.status.success(), "{policy}: {}", String::from_utf8_lossy(&o.stderr));
        rows(out)
    };
    // A block device's page cache is dropped when its last opener closes it: hold them open
    // across the runs.
    let _holders: Vec<std::fs::File> = devs.iter().map(|d| std::fs::File::open(&d.device).unwrap()).collect();
    // Warm the page caches: every read served where it arrives.
    run("base", &dir.join("warm.csv"));
    // Refusing everything fails every read over to its last replica...
    let refused = run("random=1", &dir.join("refuse.csv"));
    assert!(refused.iter().all(|x| x[4] == 2), "random=1 refuses at two replicas");
    // ...but with MittCache, reads whose pages are cached are served where they arrive.
    let cached = run("random=1+cache", &dir.join("cache.csv"));
    let here = cached.iter().filter(|x| x[4] == 0 && x[0] == x[1]).count();
    assert!(
        here * 10 >= cached.len() * 9,
        "{here} of {} served from the cache",
        cached.len()
    );
    drop(_holders);
    drop(devs);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn writes_are_refused_on_a_mounted_device_and_through_links() {
    // Issue 11: `--allow-writes` wrote into a mounted block device.
    let test = "writes_are_refused_on_a_mounted_device_and_through_links";
    if skip_without_loop("iolearn (cli)", test) {
        return;
    }
    let Some(trace) = trace() else {
        eprintln!("SKIP {test}: reference traces not found");
        return;
    };
    let dir = scratch("mounted");
    let fs = iolearn_tune::testbed::LoopFs::create(&dir, "mounted", 64).expect("a mounted loop device");
    let dev = format!("/dev/{}", fs.device);
    let o = Command::new(bin())
        .args(["replay", "block", "--allow-writes", "--replicas", &dev])
        .arg(&trace)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("in use") && e.contains(&dev), "{e}");
    // Reading a mounted device is harmless and allowed.
    let o = Command::new(bin())
        .args(["replay", "block", "--limit", "50", "--replicas", &dev])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A link as a written replica is refused, its target untouched.
    let img = dir.join("replica.img");
    std::fs::write(&img, vec![7u8; 4 << 20]).unwrap();
    let link = dir.join("link.img");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&img, &link).unwrap();
    let o = Command::new(bin())
        .args(["replay", "block", "--allow-writes", "--replicas"])
        .arg(&link)
        .arg(&trace)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("symbolic link"), "{e}");
    assert!(std::fs::read(&img).unwrap().iter().all(|&b| b == 7));
    drop(fs);
    let _ = std::fs::remove_dir_all(&dir);
}
