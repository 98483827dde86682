"""`iolearn bench mittcfq --real`: MittCFQ's successor on loop devices under the kernel's own
schedulers, its tables, and its clean-up (loop devices detached, schedulers restored, also those
a crashed run left). Needs root and eBPF; skips with the reason elsewhere."""

import json
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from iolearn import bench_mittcfq

ROOT = Path(__file__).resolve().parents[2]


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root (loop devices, schedulers, eBPF)"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "no kernel BTF (eBPF CO-RE)"
    if not (ROOT / "target/release/iolearn").exists() and not (ROOT / "target/debug/iolearn").exists():
        return "iolearn binary not built"
    return None


needs_real = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


def _attached(image: Path) -> list[str]:
    out = subprocess.run(["losetup", "-j", str(image)], capture_output=True, text=True).stdout
    return [line.split(":")[0] for line in out.splitlines() if line.strip()]


@needs_real
def test_a_quick_run_compares_the_strategies_and_restores_what_a_crashed_run_left(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir(mode=0o700)
    # A crashed run's leftover: its image on a loop device, the scheduler changed, the journal
    # of what it was before.
    image = work / "replica0.img"
    with open(image, "wb") as f:
        f.write(b"\0" * (8 << 20))
    dev = subprocess.run(
        ["losetup", "--direct-io=on", "--find", "--show", str(image)], capture_output=True, text=True, check=True
    ).stdout.strip()
    before = bench_mittcfq.Replicas.current(dev)
    bench_mittcfq.write_text_sysfs(bench_mittcfq.Replicas._sched_path(dev), "kyber")
    (work / "schedulers.json").write_text(json.dumps({dev: before}))
    try:
        rc = bench_mittcfq.main(
            ["--quick", "--sched", "bfq", "--scenario", "high", "--workdir", str(work), "--out", str(out)]
        )
    finally:
        for d in _attached(image):
            subprocess.run(["losetup", "-d", d])
    assert rc == 0
    # Everything restored: the leftover's scheduler, no device on our images, no journal.
    assert bench_mittcfq.Replicas.current(dev) == before
    for i in range(3):
        assert _attached(work / f"replica{i}.img") == []
        assert not (work / f"replica{i}.img").exists()
    assert not (work / "schedulers.json").exists()
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert {r["strategy"] for r in rows} == {"NoNoise", "Base", "Hedged", "MittOS", "MittOS-wait"}
    by = {r["strategy"]: r for r in rows}
    # The tenant ran as asked: bfq makes the store wait for its turns (less so while it
    # raises the store's queues, and a busy host slows the quiet run too: the benchmark's
    # repeats, not this quick run, say how much).
    assert by["Base"]["p95_ms"] > by["NoNoise"]["p95_ms"], (by["Base"]["p95_ms"], by["NoNoise"]["p95_ms"])
    # bfq serves the heavier tenant first: MittOS turns tries on its replica away (how many
    # depends on bfq raising the store's queues or not, which swings from run to run).
    assert by["MittOS"]["ebusy"] > 0 and by["Base"]["ebusy"] == 0
    gets = pq.read_table(out / "gets.parquet").to_pylist()
    assert {g["run"] for g in gets} >= {"high-bfq-Base-0", "high-bfq-MittOS-0"} and not (out / "runs").exists()
    assert sum(g["run"] == "high-bfq-Base-0" for g in gets) == by["Base"]["gets"]
    table = (out / "table.md").read_text()
    assert "### high, bfq" in table and "| MittOS |" in table


def test_options_out_of_range_are_refused_before_anything_is_built(tmp_path, capsys):
    for argv, what in (
        (["--repeats", "0"], "--repeats"),
        (["--duration", "1"], "--duration"),
        (["--sched", "cfq"], "--sched"),
    ):
        with pytest.raises(SystemExit) as e:
            bench_mittcfq.main([*argv, "--workdir", str(tmp_path / "w"), "--out", str(tmp_path / "o")])
        assert e.value.code == 2
        assert what in capsys.readouterr().err
    assert not (tmp_path / "w").exists() and not (tmp_path / "o").exists()
