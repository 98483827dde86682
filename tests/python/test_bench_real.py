"""`iolearn bench readahead --real --quick` on this machine (issue 4): the whole harness on a
tiny database, and its clean-up on success, on SIGTERM, and after a crash. Needs root, eBPF
and db_bench (installed by `make setup` as root); skips with the reason elsewhere."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolearn import bench_real

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
    found += [str(p) for p in Path("/sys/fs/cgroup/memory").glob("iolearn-bench-*")]
    return found


@needs_real
def test_quick_real_benchmark_runs_and_cleans_up(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    assert bench_real.main(["--quick", "--out", str(out), "--workdir", str(work)]) == 0
    rep = json.loads((out / "report.json").read_text())
    assert set(rep["oracle_kb"]) == {"readrandom", "readseq"}
    # Readahead matters on the real device too: small readahead wins for random reads.
    assert rep["oracle_kb"]["readrandom"] <= 128
    table = {r["workload"]: r for r in rep["table"]}
    for w in ("readrandom", "readseq"):
        for c in ("vanilla", "device_default", "nn", "nn_file", "oracle"):
            assert table[w][c] > 0, (w, c)
    assert rep["overheads"]["lost_events"] == 0
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
    for name in ("sweep.csv", "features.csv", "features-per-file.csv", "evaluate-runs.csv", "readahead_nn.iolm"):
        assert (out / name).exists(), name
    # The tuner acted during the evaluation (per device), and restored the device after.
    logs = list((out / "raw").glob("tuner-readrandom-nn-*.log"))
    assert logs and any('"event":"restored"' in p.read_text() for p in logs)
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
        ("device", "/dev/vda"),
    ]:
        state = {"image": str(work / "bench.img"), "mnt": str(work / "mnt"), "device": "", "cgroup": ""}
        state[field] = value
        (work / "testbed.json").write_text(json.dumps(state))
        with pytest.raises(SystemExit, match="outside this test bed"):
            bench_real.Testbed.clean_leftovers(work)
    assert victim.read_text() == "precious"


def test_db_bench_output_parsing():
    out = "readrandom   :      89.875 micros/op 11126 ops/sec 30.000 seconds 333781 operations;"
    assert bench_real.parse_ops(out, "readrandom") == 11126
    with pytest.raises(RuntimeError, match="no throughput"):
        bench_real.parse_ops("nothing here", "readseq")
