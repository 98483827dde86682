"""`iolearn bench readahead --real --quick` on this machine (issue 4): the whole harness on a
tiny database, and its clean-up on success, on SIGTERM, and after a crash. Needs root, eBPF
and db_bench (installed by `make setup` as root); skips with the reason elsewhere."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolearn import bench_family, bench_online, bench_real, bench_trainset

ROOT = Path(__file__).resolve().parents[2]


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root (loop devices, cgroups, eBPF)"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "no kernel BTF (eBPF CO-RE)"
    if not Path("/sys/fs/cgroup/memory").is_dir():
        return "no cgroup v1 memory controller"
    if not (ROOT / "target/release/iolearn").exists() and not (ROOT / "target/debug/iolearn").exists():
        return "iolearn binary not built"
    return None


needs_real = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


def _leftovers(workdir: Path) -> list[str]:
    found = []
    if (workdir / "testbed.json").exists():
        found.append("journal")
    out = subprocess.run(["losetup", "-j", str(workdir / "bench.img")], capture_output=True, text=True).stdout
    if out.strip():
        found.append(out.strip())
    for controller in ("memory", "blkio"):
        found += [str(p) for p in Path(f"/sys/fs/cgroup/{controller}").glob("iolearn-bench-*")]
    return found


@needs_real
def test_quick_real_benchmark_runs_and_cleans_up(tmp_path, capfd):
    out, work = tmp_path / "out", tmp_path / "work"
    argv = ["--quick", "--out", str(out), "--workdir", str(work), "--progress", "auto", "--fallback-online"]
    assert bench_real.main(argv) == 0
    rep = json.loads((out / "report.json").read_text())
    assert set(rep["oracle_kb"]) == {"readrandom", "readseq"}
    # Readahead matters on the real device too: small readahead wins for random reads.
    assert rep["oracle_kb"]["readrandom"] <= 128
    table = {r["workload"]: r for r in rep["table"]}
    for w in ("readrandom", "readseq"):
        for c in ("vanilla", "device_default", "nn", "nn_file", "oracle"):
            assert table[w][c] > 0, (w, c)
    o = rep["overheads"]
    assert o["lost_events"] == 0 and o["pairs"] == 1
    # The default tuner and one watching every window, each with its own stop lines: the latter
    # never rests.
    assert o["watching_every_window"]["windows"] > 0 and o["windows"] > 0
    assert o["watching_every_window"]["rested_windows"] == 0
    assert len(o["ratios"]) == 1 and o["ratios"][0] > 0
    # The tuner whose cost is measured runs as users run it, without a log line a window.
    overhead_logs = list((out / "raw").glob("overhead-*.log"))
    assert overhead_logs and not any('"event":"window"' in p.read_text() for p in overhead_logs)
    # Two processes on one database: every configuration ran, and per description the tuner
    # gave a process's descriptions values of their own.
    configs = {r["config"] for r in rep["shared"]}
    assert {"vanilla", "nn", "nn_file", "nn_description"} <= configs, configs
    assert all(r["weighted_speedup"] > 0 for r in rep["shared"])
    desc_logs = list((out / "raw").glob("tuner-shared-*-nn_description-*.log"))
    assert desc_logs and any('"target":"pid:' in p.read_text() for p in desc_logs)
    # The per-description oracle ran, naming the two db_bench processes.
    assert any(c.startswith("pids_") for c in configs), configs
    pid_logs = list((out / "raw").glob("tuner-shared-*-pids_*.log"))
    assert pid_logs
    for log in pid_logs:
        values = log.stem.split("-pids_")[1].rsplit("-", 1)[0].split("_")
        if values != [str(bench_real.VANILLA_KB)] * 2:  # vanilla's own value is no change
            assert '"target":"pid:' in log.read_text(), log
    # The test family: every workload ran in every configuration, from its own sweep, and the
    # tuner ran beside it.
    family = {r["workload"]: r for r in rep["family"]}
    assert set(family) == set(bench_family.QUICK)
    for w, r in family.items():
        assert r["vanilla"] > 0 and r["repeats"] == 1, r
        assert all(r[c] > 0 for c in ("nn", "nn_file", "oracle")), r
        assert r["oracle_kb"] in bench_real.Settings(True).sweep_kb, r
        for c in ("nn", "nn_file"):
            log = (out / "raw" / f"tuner-family-{w}-{c}-0.log").read_text()
            assert '"event":"stop"' in log and '"progress":"auto"' in log, log[:400]
            # Every window's value and progress, for reading the guardrail's verdicts after.
            assert '"event":"window"' in log, log[:400]
            # The fallback to the online learner per device only (the tuner refuses it per file).
            assert f'"fallback_online":{str(c == "nn").lower()}' in log, log[:400]
    # The scale-free model: trained on the training family's sweep (none of the test family),
    # then run per device beside the others in the family step.
    ts = rep["trainset"]
    assert set(ts["labels_kb"]) == {w.name for w in bench_trainset.chosen(bench_real.Settings(True))}
    assert ts["rows"] > 0 and (out / "readahead_v3.iolm").exists() and (out / "trainset-features.csv").exists()
    for w, r in family.items():
        assert r["v3"] > 0, r
        log = (out / "raw" / f"tuner-family-{w}-v3-0.log").read_text()
        assert '"event":"stop"' in log and "readahead_v3.iolm" in log, log[:400]
    assert rep["family_options"] == {
        "machine": bench_real.machine(),
        "device": {"backing": bench_real.fs_type(work), "throttle": None},
        "progress": "auto",
        "fallback_online": True,
        "leap": False,
        "kml": False,
        "configs": None,
        "seconds": bench_real.Settings(True).seconds,
    }
    # The sweep's device, and the device of the runs recorded in --out (family, trainset).
    assert rep["device"] == rep["family_options"]["device"]
    assert json.loads((out / "device.json").read_text()) == rep["device"]
    assert not (out / "raw" / "fio.json").exists()
    # The online learner on the kernel: vanilla, oracle and learner with a series each; the
    # learner's logs show the tuner ran and stopped; the phase run went through every phase.
    online = rep["online"]
    assert [m["workload"] for m in online["members"]] == list(bench_online.QUICK)
    for m in online["members"]:
        assert m["vanilla"] > 0 and m["online"] > 0 and m["oracle"] > 0 and len(m["t90"]) == 1, m
    with open(out / "online-runs.csv") as f:
        rows = list(csv.DictReader(f))
    assert all(json.loads(r["series"]) for r in rows if r["config"] != "sweep"), "a run without a series"
    assert online["progress"] == "auto"
    for w in bench_online.QUICK:
        log = (out / "raw" / f"online-{w}-online-0.log").read_text()
        assert '"event":"stop"' in log and '"progress":"auto"' in log
    (phases,) = online["phases"]
    assert [e["workload"] for e in phases["phases"]] == list(bench_online.PHASES)
    assert phases["decisions"][0] == [0, bench_real.VANILLA_KB]
    assert not list((out / "raw").glob("fio_bw.*.log"))
    for name in ("sweep.csv", "features.csv", "features-per-file.csv", "evaluate-runs.csv", "readahead_nn.iolm"):
        assert (out / name).exists(), name
    # The tuner acted during the evaluation (per device), and restored the device after.
    logs = list((out / "raw").glob("tuner-readrandom-nn-*.log"))
    assert logs and any('"event":"restored"' in p.read_text() for p in logs)
    assert _leftovers(work) == []
    # Reused: the trainset step reads every run it finished (none run again) and trains anew;
    # the probes' cost is measured on a member of the test family with the model its family
    # runs used; the earlier sections stay.
    model = (out / "readahead_v3.iolm").read_bytes()
    (out / "readahead_v3.iolm").unlink()
    argv = ["--quick", "--reuse", "--out", str(out), "--workdir", str(work), "--steps", "trainset,overheads"]
    assert bench_real.main(argv + ["--family", "grep"]) == 0
    err = capfd.readouterr().err
    runs = len(bench_trainset.chosen(bench_real.Settings(True))) * len(bench_real.Settings(True).sweep_kb)
    assert f"trainset: {runs} of {runs} runs read" in err, err[-2000:]
    assert (out / "readahead_v3.iolm").read_bytes() == model  # the same runs, the same seed
    again = json.loads((out / "report.json").read_text())
    assert again["family"] == rep["family"] and again["overheads"] == rep["overheads"]
    (g,) = again["overheads_family"]
    assert g["workload"] == "grep" and g["model"] == "readahead_v3.iolm" and len(g["ratios"]) == 1
    assert g["windows"] > 0 and (out / "raw" / "overhead-grep-dry-0.log").exists()
    assert _leftovers(work) == []


@needs_real
def test_sigterm_removes_the_test_bed(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    p = subprocess.Popen(
        [sys.executable, "-m", "iolearn.bench_real", "--quick", "--out", str(out), "--workdir", str(work)],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    seen = ""
    deadline = time.time() + 120
    while "real sweep" not in seen and time.time() < deadline:
        seen += p.stderr.readline()
    assert "real sweep" in seen, seen
    p.send_signal(signal.SIGTERM)
    rest = p.communicate(timeout=120)[1]
    assert p.returncode == 130, seen + rest
    assert "test bed removed" in rest
    assert _leftovers(work) == []


def test_a_crashed_runs_leftovers_are_removed(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    # What a run killed with SIGKILL leaves: a journal naming its (here long gone) resources.
    (work / "testbed.json").write_text(
        json.dumps(
            {
                "image": str(work / "bench.img"),
                "mnt": str(work / "mnt"),
                "device": "",
                "cgroup": "/sys/fs/cgroup/memory/iolearn-bench-999999999",
                "blkio": "/sys/fs/cgroup/blkio/iolearn-bench-999999999",
            }
        )
    )
    (work / "bench.img").write_bytes(b"x")
    assert bench_real.Testbed.clean_leftovers(work)
    assert not (work / "testbed.json").exists() and not (work / "bench.img").exists()
    assert not bench_real.Testbed.clean_leftovers(work)
    (work / "testbed.json").write_text("garbage")
    with pytest.raises(SystemExit, match="testbed.json"):
        bench_real.Testbed.clean_leftovers(work)
    # A journal planted to make root delete, unmount or kill what is not the test bed's own.
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for field, value in [
        ("image", str(victim)),
        ("mnt", "/"),
        ("cgroup", str(tmp_path)),
        ("blkio", str(tmp_path)),
        ("blkio", "/sys/fs/cgroup/memory/iolearn-bench-1"),
        ("device", "/dev/vda"),
    ]:
        state = {"image": str(work / "bench.img"), "mnt": str(work / "mnt"), "device": "", "cgroup": ""}
        state[field] = value
        (work / "testbed.json").write_text(json.dumps(state))
        with pytest.raises(SystemExit, match="outside this test bed"):
            bench_real.Testbed.clean_leftovers(work)
    assert victim.read_text() == "precious"


@needs_real
def test_a_crashed_run_in_another_work_directory_is_cleaned_at_the_next_start(tmp_path):
    # A run killed outright (no __exit__, no signal handler) in one work directory; the next run
    # uses another, so it never reads that journal: the loop device, its mount and the cgroups
    # would stay and count against every later run (a CI run once failed on exactly that).
    crashed, work = tmp_path / "crashed", tmp_path / "work"
    script = (
        "import os, sys; from pathlib import Path; from iolearn import bench_real; "
        "tb = bench_real.Testbed(Path(sys.argv[1]), 64, 64, (1000, 100)).__enter__(); "
        "print(tb.device, tb.cgroup, tb.blkio, flush=True); os._exit(0)"
    )
    out = subprocess.run([sys.executable, "-c", script, str(crashed)], capture_output=True, text=True, check=True)
    device, cgroup, blkio = out.stdout.split()
    assert os.path.ismount(crashed / "mnt") and Path(cgroup).exists() and Path(blkio).exists()
    # An empty group of a process that is gone, and one of a process still running (its run is
    # live: it stays).
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead_group = Path(f"/sys/fs/cgroup/memory/iolearn-bench-{gone.pid}")
    live = subprocess.Popen(["sleep", "60"])
    live_group = Path(f"/sys/fs/cgroup/memory/iolearn-bench-{live.pid}")
    try:
        dead_group.mkdir()
        live_group.mkdir()
        with bench_real.Testbed(work, 64, 64):
            assert not os.path.ismount(crashed / "mnt")
            assert bench_real._backing_file(device) != str(crashed / "bench.img")
            assert not (crashed / "testbed.json").exists() and not (crashed / "bench.img").exists()
            assert not Path(cgroup).exists() and not Path(blkio).exists() and not dead_group.exists()
            assert live_group.exists()
    finally:
        live.kill()
        live.wait()
        live_group.rmdir()
        if dead_group.exists():
            dead_group.rmdir()
    assert _leftovers(work) == [] and _leftovers(crashed) == []


def test_a_helper_whose_reads_were_charged_to_the_tuner_fails_the_run(tmp_path):
    # No root needed: a stand-in helper logging as the tuner does.
    line = '{"level":"WARN","event":"charged_to_tuner","error":"no memory cgroup"}'
    script = f"echo '{line}' >&2; trap 'exit 0' TERM; while :; do sleep 0.05; done"
    bg = bench_real.Background(["sh", "-c", script], tmp_path / "tuner.log")
    time.sleep(0.3)
    with pytest.raises(RuntimeError, match="charged to the tuner"):
        bg.stop()
    ok = bench_real.Background(
        ["sh", "-c", "echo '{\"event\":\"charged_to\"}' >&2; trap 'exit 0' TERM; while :; do sleep 0.05; done"],
        tmp_path / "ok.log",
    )
    time.sleep(0.3)
    out, _, _ = ok.stop()
    assert out == ""


def test_db_bench_output_parsing():
    out = "readrandom   :      89.875 micros/op 11126 ops/sec 30.000 seconds 333781 operations;"
    assert bench_real.parse_ops(out, "readrandom") == 11126
    with pytest.raises(RuntimeError, match="no throughput"):
        bench_real.parse_ops("nothing here", "readseq")


def test_family_scores_each_member_against_its_own_vanilla_and_checks_the_goals():
    def row(w, config, repeat, ops, kb=128):
        return {"workload": w, "config": config, "repeat": repeat, "ra_kb": kb, "ops": ops, "unit": "MB/s"}

    rows = [
        # Two processes: one doubles, the other loses a quarter: 1.375 in repeat 0.
        row("two", "vanilla", 0, [100.0, 10.0]),
        row("two", "nn", 0, [200.0, 7.5]),
        row("two", "vanilla", 1, [50.0, 20.0]),  # each repeat against its own vanilla
        row("two", "nn", 1, [100.0, 20.0]),  # 1.5
        row("two", "nn", 2, [1.0, 1.0]),  # a repeat without vanilla is not scored
        row("two", "oracle", 0, [300.0, 10.0], kb=16),  # 2.0
        row("two", "oracle", 1, [150.0, 20.0], kb=16),  # 2.0
        # One process: the oracle gains 5%, under the floor; the tuner at 0.97 misses the goal.
        row("one", "vanilla", 0, [100.0]),
        row("one", "nn", 0, [97.0]),
        row("one", "nn_file", 0, [99.0]),
        row("one", "oracle", 0, [105.0], kb=512),
    ]
    t = {r["workload"]: r for r in bench_family.summarize(rows)}
    two, one = t["two"], t["one"]
    assert two["repeats"] == 2 and two["vanilla"] == 90.0  # median of the repeats' totals, 110 and 70
    assert two["nn"] == pytest.approx((1.375 + 1.5) / 2) and two["nn_range"] == [1.375, 1.5]
    assert two["oracle"] == pytest.approx(2.0) and two["oracle_kb"] == 16
    assert two["nn_share"] == pytest.approx(((1.375 + 1.5) / 2 - 1) / 1.0)
    assert two["nn_meets"] is False  # 44% of the oracle's gain
    assert "nn_file" not in two
    # Each process's own median ratio: 2.0 and 0.75 / 1.0 over the two repeats.
    assert two["nn_members"] == [pytest.approx(2.0), pytest.approx((0.75 + 1.0) / 2)]
    assert "nn_members" not in one
    assert one["nn_share"] is None and one["nn_meets"] is False  # below 0.98x vanilla
    assert one["nn_file_meets"] is True  # 0.99x, and the oracle gains under 10%
    # No per-second throughput recorded: no ratios after the start.
    assert "nn_after" not in two
    # With it: the seconds after the start only, the members summed (the tuner's first five
    # seconds at vanilla do not count there, and do in the whole run).
    per_s = lambda first, rest: json.dumps([first] * bench_family.START_S + [rest] * 10)  # noqa: E731
    rows = [
        dict(row("s", "vanilla", 0, [150.0]), series=per_s(10, 10)),
        dict(row("s", "v3", 0, [200.0]), series=per_s(10, 15)),
        dict(row("s", "oracle", 0, [300.0], kb=16), series=per_s(20, 20)),
        dict(row("s", "nn", 0, [150.0]), series="[1, 2]"),  # too short a series: not scored after the start
    ]
    (s,) = bench_family.summarize(rows)
    assert s["v3"] == pytest.approx(200 / 150) and s["v3_share"] == pytest.approx((200 / 150 - 1) / 1.0)
    assert s["v3_after"] == pytest.approx(1.5) and s["oracle_after"] == pytest.approx(2.0)
    assert s["v3_after_share"] == pytest.approx(0.5)
    assert "nn_after" not in s and "nn" in s
    # A vanilla run that did nothing leaves its repeat unscored rather than failing the report.
    t = {r["workload"]: r for r in bench_family.summarize([row("z", "vanilla", 0, [0.0]), row("z", "nn", 0, [5.0])])}
    assert "nn" not in t["z"]


def test_a_writing_workload_runs_on_a_clone_that_leaves_the_database_alone(tmp_path):
    db = tmp_path / "db"
    db.mkdir()
    (db / "000012.sst").write_bytes(b"table")
    (db / "MANIFEST-000005").write_bytes(b"manifest")
    clone = bench_family.clone_db(db)
    assert (clone / "000012.sst").stat().st_ino == (db / "000012.sst").stat().st_ino  # linked
    (clone / "MANIFEST-000005").write_bytes(b"changed by the writer")
    (clone / "000012.sst").unlink()  # a compaction deletes a table
    assert (db / "MANIFEST-000005").read_bytes() == b"manifest" and (db / "000012.sst").exists()
    assert bench_family.clone_db(db) == clone and (clone / "000012.sst").exists()  # fresh each time


def test_family_fio_jobs_are_separate_processes_with_their_own_options(tmp_path):
    class FakeFiles:
        def named(self, spec):
            return {"big": "/b", "small:0-3": "/s0:/s1:/s2:/s3", "small:4-7": "/s4:/s5:/s6:/s7"}[spec]

    three = next(w for w in bench_family.FAMILY if w.name == "fio-3proc")
    args = bench_family.fio_args(three, FakeFiles(), 15, 7, tmp_path / "o.json")
    assert args.count("--time_based") == 3 and args.count("--randseed=7") == 3
    # fio's own fadvise (RANDOM for a random job) would switch readahead off in every
    # configuration alike and hide what the device's value does.
    assert args.count("--fadvise_hint=0") == 3
    assert "--filename=/s4:/s5:/s6:/s7" in args and "--rw=read:60k" in args
    mmap = next(w for w in bench_family.FAMILY if w.name == "fio-mmap-rand")
    args = bench_family.fio_args(mmap, FakeFiles(), 15, 1, tmp_path / "o.json")
    # fio takes a job's last value: mmap must come after the psync default.
    assert args.index("--ioengine=mmap") > args.index("--ioengine=psync")
    (tmp_path / "o.json").write_text(
        'note: before\n{"jobs": [{"read": {"bw_bytes": 5}}, {"read": {"bw_bytes": 7}}]}\nnote: after {}\n'
    )
    assert bench_family.fio_throughput((tmp_path / "o.json").read_text()) == [5.0, 7.0]
    # With status reports (a relayed run), the last report is the run's.
    status = '{"jobs": [{"read": {"bw_bytes": 1, "io_bytes": 4096}}]}\n'
    final = '{"jobs": [{"read": {"bw_bytes": 9, "io_bytes": 8192}}]}\n'
    assert bench_family.fio_throughput(status + "note {\n" + final) == [9.0]
    with pytest.raises(RuntimeError, match="fio printed no JSON report"):
        bench_family.fio_throughput("fio: file not found\n")
    # Without a report file, fio reports its status on stdout for a relay to read.
    args = bench_family.fio_args(mmap, FakeFiles(), 15, 1, None)
    assert f"--status-interval={bench_family.FIO_STATUS}" in args
    assert not any(a.startswith("--output=") for a in args)


def test_the_middle_half_is_the_quartiles_and_one_value_its_own():
    assert bench_real.middle_half([5.0, 1.0, 3.0, 2.0, 4.0]) == [2.0, 4.0]
    assert bench_real.middle_half([0.9]) == [0.9, 0.9]


def test_reuse_refuses_a_report_without_the_oracle_before_building_anything(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    for report in ({"online": {}}, {"oracle_kb": {}}, {"oracle_kb": {"readseq": "lots"}}):
        (out / "report.json").write_text(json.dumps(report))
        with pytest.raises(SystemExit) as e:
            bench_real.main(["--reuse", "--out", str(out), "--steps", "evaluate", "--workdir", str(tmp_path / "w")])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "report.json has no oracle_kb" in err and "evaluate and shared" in err, err
        assert not (tmp_path / "w").exists()
    # Whatever the steps, a report that is no JSON object is refused before anything is built.
    for text, message in (("[1]", "report.json: not a JSON object"), ("{", "report.json: ")):
        (out / "report.json").write_text(text)
        with pytest.raises(SystemExit) as e:
            bench_real.main(["--reuse", "--out", str(out), "--steps", "online", "--workdir", str(tmp_path / "w")])
        assert e.value.code == 2
        assert message in capsys.readouterr().err
        assert not (tmp_path / "w").exists()


def test_family_members_are_chosen_by_name_and_unknown_ones_refused(capsys):
    s = bench_real.Settings(quick=False)
    assert [w.name for w in bench_family.chosen(s)] == [w.name for w in bench_family.FAMILY]
    s.family = ("rangescan", "grep")
    assert [w.name for w in bench_family.chosen(s)] == ["rangescan", "grep"]
    # KML's six run only when named; their writers each on a clone of the database.
    assert not {w.name for w in bench_family.FAMILY} & set(bench_real.WORKLOADS)
    s.family = ("readseq", "updaterandom", "grep")
    picked = {w.name: w for w in bench_family.chosen(s)}
    assert set(picked) == {"readseq", "updaterandom", "grep"}
    assert picked["updaterandom"].writes and not picked["readseq"].writes and picked["readseq"].kind == "db"
    for bad in ("rangescan,nope", ""):
        with pytest.raises(SystemExit) as e:
            bench_real.main(["--family", bad, "--steps", "family"])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "--family" in err and "members: " in err, err


def test_no_phases_is_refused_without_the_online_step(capsys, tmp_path):
    _refused_before_anything_is_built(
        capsys, tmp_path, [(["--no-phases", "--steps", "family"], "--no-phases: applies to the online step")]
    )


def _refused_before_anything_is_built(capsys, tmp_path, cases):
    """Each (argv, said): the harness exits with 2, says ``said`` on stderr, and builds no
    work directory."""
    for argv, said in cases:
        with pytest.raises(SystemExit) as e:
            bench_real.main([*argv, "--workdir", str(tmp_path / "w")])
        assert e.value.code == 2
        assert said in capsys.readouterr().err
        assert not (tmp_path / "w").exists()


def test_online_seconds_are_checked_before_anything_is_built(capsys, tmp_path):
    _refused_before_anything_is_built(
        capsys,
        tmp_path,
        [
            (["--online-seconds", "300", "--steps", "family"], "--online-seconds: applies to the online step"),
            (["--online-seconds", "10", "--steps", "online"], "--online-seconds 10: want 30 to 1800"),
            (["--online-seconds", "x", "--steps", "online"], "invalid int value"),
        ],
    )


def test_family_seconds_are_checked_before_anything_is_built(capsys, tmp_path):
    _refused_before_anything_is_built(
        capsys,
        tmp_path,
        [
            (["--family-seconds", "60", "--steps", "online"], "--family-seconds: applies to the family step"),
            (["--family-seconds", "10", "--steps", "family"], "--family-seconds 10: want 15 to 1800"),
            (["--family-seconds", "60", "--steps", "family", "--quick"], "--family-seconds: not with --quick"),
            (["--family-seconds", "1m", "--steps", "family"], "invalid int value"),
        ],
    )


def test_v3_features_are_checked_before_anything_is_built(capsys, tmp_path):
    _refused_before_anything_is_built(
        capsys,
        tmp_path,
        [
            (["--v3-features", "randomness", "--steps", "family"], "--v3-features: applies to the trainset"),
            (["--v3-tied", "every", "--steps", "family"], "--v3-tied: applies to the trainset and retrain steps"),
            (["--v3-features", "randomness,nope", "--steps", "trainset"], "--v3-features: nope: want some of"),
            (["--v3-features", "density,density", "--steps", "trainset"], "a repeat or an empty list"),
            (["--v3-features", "", "--steps", "trainset"], "a repeat or an empty list"),
        ],
    )


def test_a_reused_report_is_dated_by_the_run_and_keeps_its_sweeps_date(capsys):
    earlier = {"date": "2026-11-22", "machine": "m", "oracle_kb": {"readseq": 1024}}
    once = bench_real.reused(earlier, "2026-11-23")
    twice = bench_real.reused(once, "2026-11-24")
    assert (once["date"], once["sweep_date"]) == ("2026-11-23", "2026-11-22")
    assert (twice["date"], twice["sweep_date"]) == ("2026-11-24", "2026-11-22")
    assert twice["oracle_kb"] == {"readseq": 1024} and earlier["date"] == "2026-11-22"
    bench_real.print_report(twice)
    assert "(2026-11-24; sweep of 2026-11-22, m)" in capsys.readouterr().out


def test_the_familys_tuners_get_the_measure_of_progress_and_the_fallback_per_device_only(tmp_path, capsys):
    s = bench_real.Settings(True)
    assert bench_family.tuner_options(s, per_file=False) == ["--progress", "cpu"]
    s.progress, s.fallback_online = "auto", True
    assert bench_family.tuner_options(s, per_file=False) == ["--progress", "auto", "--fallback-online"]
    assert bench_family.tuner_options(s, per_file=True) == ["--progress", "auto"]
    # db_bench's own count where the family step relays one; auto for the members with none.
    s.progress = "ops"
    count = tmp_path / "ops-count"
    assert bench_family.tuner_options(s, per_file=True, count=count) == ["--progress", f"ops:{count}"]
    assert bench_family.tuner_options(s, per_file=False) == ["--progress", "auto", "--fallback-online"]
    # Without the family step the option would change nothing: refused, not ignored.
    with pytest.raises(SystemExit) as e:
        bench_real.main(["--fallback-online", "--steps", "online", "--workdir", str(tmp_path / "w")])
    assert e.value.code == 2 and not (tmp_path / "w").exists()
    assert "--fallback-online: applies to the family step" in capsys.readouterr().err

    class Bed:
        name, cgroup = "loop9", Path("/sys/fs/cgroup/memory/x")

    argv, _ = bench_real.nn_tuner(Bed(), tmp_path, False, tmp_path / "t.log", ["--fallback-online"])
    assert argv[-1] == "--fallback-online" and str(tmp_path / "readahead_nn.iolm") in argv


def test_the_floors_measurements_run_only_when_named_and_watch_without_acting(tmp_path, capsys):
    s = bench_real.Settings(True)
    (tmp_path / bench_family.V3_MODEL).write_bytes(b"")
    # By default: neither the second vanilla run nor the dry tuner (each costs a run a repeat).
    assert bench_family.configurations(s, tmp_path) == ("vanilla", "nn", "nn_file", "oracle", "v3")
    s.family_configs = ("vanilla", "v3", "vanilla_again", "v3_dry", "v3_refine")
    assert bench_family.configurations(s, tmp_path) == ("vanilla", "v3", "vanilla_again", "v3_dry", "v3_refine")
    # Without the model neither v3 configuration runs (as v3 alone, before).
    assert bench_family.configurations(s, tmp_path / "none") == ("vanilla", "vanilla_again")
    # A name of the command line, refused when unknown, needs the v3 model like v3 does.
    with pytest.raises(SystemExit) as e:
        bench_real.main(["--family-configs", "vanilla,v3_dry", "--reuse", "--steps", "family", "--out",
                         str(tmp_path / "none"), "--workdir", str(tmp_path / "w")])  # fmt: skip
    assert e.value.code == 2 and not (tmp_path / "w").exists()

    class Bed:
        name, cgroup = "loop9", Path("/sys/fs/cgroup/memory/x")

    dry, _ = bench_family.configuration_helper(s, Bed(), tmp_path, "v3_dry", tmp_path / "t.log")
    acting, _ = bench_family.configuration_helper(s, Bed(), tmp_path, "v3", tmp_path / "t.log")
    assert "--dry-run" in dry and "--dry-run" not in acting
    assert [a for a in dry if a != "--dry-run"] == acting
    refined, _ = bench_family.configuration_helper(s, Bed(), tmp_path, "v3_refine", tmp_path / "t.log")
    # The tuner refines by default: v3 keeps the model's values as given, v3_refine asks.
    assert "--no-refine" in acting and "--no-refine" not in refined
    assert refined == [a for a in acting if a != "--no-refine"] + ["--refine-online"]
    assert bench_family.configuration_helper(s, Bed(), tmp_path, "vanilla_again", tmp_path / "t.log") is None
    # KML's per-file network as given, and with the learner beside it (asked for: per file it
    # is not the default), both per file.
    per_file, _ = bench_family.configuration_helper(s, Bed(), tmp_path, "nn_file", tmp_path / "t.log")
    beside, _ = bench_family.configuration_helper(s, Bed(), tmp_path, "nn_file_refine", tmp_path / "t.log")
    assert str(tmp_path / "readahead_nn_file.iolm") in beside and "--per-file" in beside
    assert "--no-refine" in per_file and beside == [a for a in per_file if a != "--no-refine"] + ["--refine-online"]
    v3, _ = bench_family.configuration_helper(s, Bed(), tmp_path, "nn_file_v3", tmp_path / "t.log")
    assert v3 == beside[:-1] + ["--device-model", str(tmp_path / bench_family.V3_MODEL), "--refine-online"]
    s.family_configs = ("vanilla", "nn_file", "nn_file_refine", "nn_file_v3")
    # The v3 model beside the per-file one needs the v3 model, as v3 does.
    assert bench_family.configurations(s, tmp_path / "none") == ("vanilla", "nn_file", "nn_file_refine")
    assert bench_family.configurations(s, tmp_path)[-1] == "nn_file_v3"

    def row(config, repeat, ops):
        return {"workload": "w", "config": config, "repeat": repeat, "seed": repeat + 1, "ra_kb": 128,
                "ops": json.dumps(ops), "unit": "MB/s"}  # fmt: skip

    rows = [row("vanilla", 0, [100.0]), row("vanilla_again", 0, [90.0]), row("v3_dry", 0, [99.0])]
    (t,) = bench_family.summarize(rows)
    assert t["vanilla_again"] == pytest.approx(0.9) and t["v3_dry"] == pytest.approx(0.99)
    bench_family.print_table([t])
    head, line = capsys.readouterr().out.splitlines()[:2]
    assert head.rstrip().endswith("A/A  (x vanilla)") and line.split()[-2:] == ["0.99", "0.90"]


def test_leap_is_scored_beside_the_tuner_and_asked_for_with_the_family_step(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        bench_real.main(["--leap", "--steps", "online", "--workdir", str(tmp_path / "w")])
    assert e.value.code == 2 and not (tmp_path / "w").exists()
    assert "--leap: applies to the family step" in capsys.readouterr().err
    # A subset of the family's configurations names known ones, with their options.
    for argv, why in (
        (["--family-configs", "leap"], "leap needs --leap"),
        (["--family-configs", "vanilla,lepa", "--leap"], "unknown lepa"),
    ):
        with pytest.raises(SystemExit) as e:
            bench_real.main(argv + ["--steps", "family", "--workdir", str(tmp_path / "w")])
        assert e.value.code == 2 and why in capsys.readouterr().err
    # KML's recipe is the train step's model: a reused --out without it is refused up front.
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("{}")
    with pytest.raises(SystemExit) as e:
        bench_real.main(["--kml", "--reuse", "--steps", "family", "--out", str(out), "--workdir", str(tmp_path / "w")])
    assert e.value.code == 2 and not (tmp_path / "w").exists()
    assert "readahead_kml.iolm: missing" in capsys.readouterr().err
    # The scale-free model comes from the trainset step: asked for without it, refused up front.
    with pytest.raises(SystemExit) as e:
        bench_real.main(["--family-configs", "vanilla,v3", "--reuse", "--steps", "family", "--out", str(out),
                         "--workdir", str(tmp_path / "w")])  # fmt: skip
    assert e.value.code == 2 and not (tmp_path / "w").exists()
    assert "v3 needs readahead_v3.iolm in --out" in capsys.readouterr().err

    def row(config, repeat, ops):
        return {"workload": "rev", "config": config, "repeat": repeat, "seed": repeat + 1, "ra_kb": 128,
                "ops": json.dumps(ops), "unit": "MB/s"}  # fmt: skip

    rows = [row("vanilla", 0, [100.0]), row("leap", 0, [300.0]), row("vanilla", 1, [50.0]), row("leap", 1, [100.0])]
    (t,) = bench_family.summarize(rows)
    assert t["leap"] == pytest.approx(2.5) and t["leap_range"] == [2.0, 3.0]
    bench_family.print_table([t])
    out = capsys.readouterr().out
    assert "LEAP" in out.splitlines()[0] and out.splitlines()[1].rstrip().endswith("2.50")
    # Both baselines: a column each, in order.
    bench_family.print_table(bench_family.summarize(rows + [row("kml", 0, [90.0]), row("kml", 1, [45.0])]))
    head, line = capsys.readouterr().out.splitlines()[:2]
    assert head.split()[-4:-2] == ["LEAP", "KML"] and line.split()[-2:] == ["2.50", "0.90"]
    # Without LEAP the table keeps its columns.
    bench_family.print_table(bench_family.summarize(rows[:1] + [row("nn", 0, [110.0])]))
    assert "LEAP" not in capsys.readouterr().out


def test_a_reused_out_of_another_size_or_with_a_corrupt_record_is_refused_before_the_test_bed(tmp_path, capsys):
    out, work = tmp_path / "out", tmp_path / "w"
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"settings": {"quick": True}, "oracle_kb": {"readrandom": 16}}))
    with pytest.raises(SystemExit) as e:
        bench_real.main(["--reuse", "--steps", "family", "--out", str(out), "--workdir", str(work)])
    assert e.value.code == 2 and not work.exists()
    assert "is of a --quick run; this one is full" in capsys.readouterr().err
    # The records the steps would read are read first.
    (out / "report.json").write_text(json.dumps({"settings": {"quick": False}, "oracle_kb": {"readrandom": 16}}))
    (out / "trainset-sweep.csv").write_text("workload,ra_kb,ops_s,seed\nreadrandom,16,inf,2000\n")
    (out / "family-runs.csv").write_text('workload,config,seed,ra_kb,ops\nrangescan,sweep,1000,16,"[nan]"\n')
    for step, why in (
        ("trainset", "trainset-sweep.csv: line 2: ops_s"),
        ("family", "family-runs.csv: line 2: column ops"),
    ):
        with pytest.raises(SystemExit) as e:
            bench_real.main(["--reuse", "--steps", step, "--out", str(out), "--workdir", str(work)])
        assert e.value.code == 2 and not work.exists(), step
        assert why in capsys.readouterr().err, step


def test_a_throttle_is_checked_and_runs_of_another_device_are_not_reused(tmp_path, capsys):
    for bad, said in (("3000", "want IOPS,MIBPS"), ("5,1", "want IOPS 100 to"), ("3000,0", "want IOPS 100 to")):
        with pytest.raises(SystemExit) as e:
            bench_real.main(["--throttle", bad, "--steps", "family", "--workdir", str(tmp_path / "w")])
        assert e.value.code == 2
        assert f"--throttle: '{bad}': {said}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_real.main(["--throttle", "3000,125", "--steps", "family", "--leap", "--workdir", str(tmp_path / "w")])
    assert "--leap: not with --throttle" in capsys.readouterr().err
    # A report of the old default device (no "device" field) with the family's sweeps beside it:
    # a throttled run must sweep again, not pick its oracle from runs on another device.
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"oracle_kb": {"readseq": 1024}}))
    (out / "family-runs.csv").write_text(
        "workload,config,repeat,seed,ra_kb,ops,unit\ngrep,sweep,-1,1000,16,[99.0],MB/s\n"
    )
    shm = Path("/dev/shm/iolearn-test-absent") if bench_real.fs_type(Path("/dev/shm")) == "tmpfs" else tmp_path
    for steps, named in (("family", "family-runs.csv"), ("evaluate", "report.json's oracle_kb")):
        argv = ["--reuse", "--out", str(out), "--steps", steps, "--throttle", "3000,125", "--workdir", str(shm / "w")]
        with pytest.raises(SystemExit) as e:
            bench_real.main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert named in err and "runs on another device" in err and "reads held to 3000 IOPS" in err, err
        assert not (shm / "w").exists()
    # What is checked: the runs' recorded device (device.json, written before a step records
    # its first run, so an interrupted run resumes) and the sweep's (the report's device).
    gp3 = bench_real.device_of(shm, (3000, 125))
    assert gp3["throttle"] == [3000, 125] and gp3["backing"] == bench_real.fs_type(shm)
    old = {"oracle_kb": {"readseq": 1024}}
    bench_real.stale_runs(out, {"family"}, old, bench_real.OLD_DEVICE)
    with pytest.raises(ValueError, match="family-runs.csv: runs on another device"):
        bench_real.stale_runs(out, {"family"}, old, gp3)
    (out / "device.json").write_text(json.dumps(gp3))
    bench_real.stale_runs(out, {"family"}, old, gp3)
    with pytest.raises(ValueError, match="family-runs.csv: runs on another device"):
        bench_real.stale_runs(out, {"family"}, old, bench_real.OLD_DEVICE)
    with pytest.raises(ValueError, match="oracle_kb: runs on another device"):
        bench_real.stale_runs(out, {"evaluate"}, old, gp3)
    bench_real.stale_runs(out, {"evaluate"}, {**old, "device": gp3}, gp3)
    # The same throttle over another file system is another device.
    elsewhere = {**gp3, "backing": "xfs" if gp3["backing"] != "xfs" else "ext2/ext3"}
    with pytest.raises(ValueError, match="runs on another device"):
        bench_real.stale_runs(out, {"family"}, old, elsewhere)
    for bad in ("[1]", "{", json.dumps({"backing": "tmpfs"})):
        (out / "device.json").write_text(bad)
        with pytest.raises(ValueError, match="device.json"):
            bench_real.stale_runs(out, {"family"}, old, gp3)
    assert bench_real.fs_type(tmp_path / "not" / "yet") == bench_real.fs_type(tmp_path)


@needs_real
def test_a_throttled_test_bed_holds_its_reads_and_leaves_nothing(tmp_path):
    if not Path("/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device").exists():
        pytest.skip("no cgroup v1 blkio throttling")
    work = tmp_path / "work"
    seconds = {}
    # 400 direct 4 KiB reads at 200 a second; 20 direct 1 MiB reads at 10 MiB a second: each
    # about 2 s; unthrottled, a small fraction of that.
    for throttle in (None, (200, 1000), (100000, 10)):
        with bench_real.Testbed(work, 64, 256, throttle) as tb:
            if throttle:
                rdev = os.stat(tb.device).st_rdev
                where = f"{os.major(rdev)}:{os.minor(rdev)}"
                assert tb.limits() == {
                    "read_iops_device": f"{where} {throttle[0]}",
                    "read_bps_device": f"{where} {throttle[1] << 20}",
                }
            for size, count in (("4k", 400), ("1M", 20)):
                t0 = time.monotonic()
                read = ["dd", f"if={tb.device}", "of=/dev/null", f"bs={size}", f"count={count}", "iflag=direct"]
                bench_real.sh(*tb.in_cgroup(read))
                seconds[throttle, size] = time.monotonic() - t0
            blkio = tb.blkio
        assert _leftovers(work) == [] and (blkio is None or not blkio.exists())
    assert 1.2 < seconds[(200, 1000), "4k"] < 3.5 and seconds[(200, 1000), "1M"] < 1, seconds
    assert 1.2 < seconds[(100000, 10), "1M"] < 3.5 and seconds[(100000, 10), "4k"] < 1, seconds
    assert seconds[None, "4k"] < 0.5 and seconds[None, "1M"] < 0.5, seconds


def test_a_test_bed_that_fails_half_built_is_taken_down(tmp_path, monkeypatch):
    # No root needed: the build fails at its first command, after the journal was written.
    work = tmp_path / "work"
    tb = bench_real.Testbed(work, 64, 256, (3000, 125))
    calls = []

    def failing(self):
        calls.append("build")
        (work / "bench.img").write_bytes(b"half")
        raise RuntimeError("losetup failed")

    monkeypatch.setattr(bench_real.Testbed, "_build", failing)
    with pytest.raises(RuntimeError, match="losetup failed"):
        with tb:
            pass
    assert calls == ["build"]
    assert not (work / "bench.img").exists() and not (work / "testbed.json").exists()
