"""`iolearn sim ssd`: a reference trace replayed on replicated simulated SSDs (issue 5)."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from iolearn import sim_ssd

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT.parent / "shared/reference/traces/msr.cut.per_10k.rw_40_60.1370.trace"


def test_replay_records_every_io_with_device_state(tmp_path):
    cols = sim_ssd.replay(TRACE, preset="consumer", mode="base", replicas=3, hop_us=15)
    n = 10_000
    assert all(len(cols[c]) == n for c in sim_ssd.COLUMNS)
    assert cols["write"].sum() == 5946 and (cols["latency_ns"] > 0).all()
    reads = ~cols["write"]
    assert set(np.unique(cols["replica"][reads])) == {0, 1, 2}
    # The same seed gives the same replay; the no-GC drive is never slower at the tail.
    again = sim_ssd.replay(TRACE, preset="consumer", mode="base", replicas=3, hop_us=15)
    assert (again["latency_ns"] == cols["latency_ns"]).all()
    nogc = sim_ssd.replay(TRACE, preset="consumer", mode="no-gc", replicas=3, hop_us=15)
    assert np.percentile(nogc["latency_ns"][reads], 99.9) <= np.percentile(cols["latency_ns"][reads], 99.9)
    out = tmp_path / "lat.parquet"
    sim_ssd.write_table(cols, out)
    import pyarrow.parquet as pq

    t = pq.read_table(out)
    assert t.num_rows == n and t.column_names == list(sim_ssd.COLUMNS)


def test_cli_and_bad_input(tmp_path):
    binary = ROOT / "target/release/iolearn"
    if not binary.exists():
        binary = ROOT / "target/debug/iolearn"
    if not binary.exists():
        pytest.skip("iolearn binary not built")
    out = tmp_path / "lat.csv"
    r = subprocess.run(
        [binary, "sim", "ssd", "--trace", TRACE, "--preset", "consumer", "--replicas", "2", "--out", out],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "4054 reads" in r.stdout and out.read_text().count("\n") == 10_001
    with pytest.raises(ValueError, match="preset"):
        sim_ssd.replay(TRACE, preset="huge")
    with pytest.raises(ValueError, match="mode"):
        sim_ssd.replay(TRACE, mode="fast")
    bad = tmp_path / "bad.trace"
    bad.write_text("0.0 0 0 4096 1\nx\n")
    with pytest.raises(ValueError, match="bad.trace: line 2"):
        sim_ssd.replay(bad, preset="consumer")
    assert sim_ssd.replay(bad, preset="consumer", skip_bad=True)["skipped"] == 1


def test_traces_round_trip_through_parquet(tmp_path):
    from iolearn import traces

    cols = traces.read(TRACE)
    assert len(cols["offset"]) == 10_000 and (cols["latency_ns"] == -1).all()
    out = tmp_path / "t.parquet"
    traces.write_parquet(cols, out)
    back = traces.read(out)
    for c in traces.COLUMNS:
        assert (back[c] == cols[c]).all(), c
    (tmp_path / "x.parquet").write_bytes(b"nope")
    with pytest.raises(ValueError, match="x.parquet"):
        traces.read(tmp_path / "x.parquet")


def test_streamed_chunks_are_the_whole_replay_and_the_summary_its_numbers():
    whole = sim_ssd.replay(TRACE, preset="consumer", replicas=2)
    r = sim_ssd.stream(TRACE, preset="consumer", replicas=2)
    chunks = []
    while (c := r.next_chunk(777)) is not None:
        assert len(c["latency_ns"]) <= 777
        chunks.append(c)
    assert r.next_chunk(777) is None
    for col in sim_ssd.COLUMNS:
        assert (np.concatenate([c[col] for c in chunks]) == whole[col]).all(), col
    reads = whole["latency_ns"][~whole["write"]] / 1e3
    s = r.summary()
    assert s["ios"] == 10_000 and s["reads"] == reads.size
    assert abs(s["mean_us"] - reads.mean()) < 1e-6 * reads.mean()
    for name, q in [("p50_us", 50), ("p99_us", 99), ("p999_us", 99.9)]:
        exact = np.percentile(reads, q, method="inverted_cdf")
        assert abs(s[name] - exact) <= 0.001 * exact + 0.001, (name, s[name], exact)
    assert s["gc_share"] == whole["gc_active"][~whole["write"]].mean()
    # The summary without records (no device state at arrival) has the same latencies.
    quick = sim_ssd.stream(TRACE, preset="consumer", replicas=2)
    quick.run()
    q = quick.summary()
    assert q["gc_share"] is None
    assert {k: q[k] for k in ("ios", "reads", "mean_us", "p99_us")} == {
        k: s[k] for k in ("ios", "reads", "mean_us", "p99_us")
    }


def test_repeat_plays_the_trace_back_to_back_on_the_same_drives():
    once = sim_ssd.replay(TRACE, preset="consumer", replicas=1)
    three = sim_ssd.replay(TRACE, preset="consumer", replicas=1, repeat=3)
    n = len(once["arrival_ns"])
    assert len(three["arrival_ns"]) == 3 * n
    arr = once["arrival_ns"] - once["arrival_ns"][0]
    span = int(arr[-1])
    shift = span + span // (n - 1)
    for k in range(3):
        assert (three["arrival_ns"][k * n : (k + 1) * n] == arr + k * shift).all()
        assert (three["offset"][k * n : (k + 1) * n] == once["offset"]).all()
    assert (np.diff(three["arrival_ns"].astype(np.int64)) >= 0).all()
    # The first pass is the trace alone; later passes meet a drive the first one aged.
    assert (three["latency_ns"][:n] == once["latency_ns"]).all()
    with pytest.raises(ValueError, match="repeat"):
        sim_ssd.stream(TRACE, repeat=0)


def test_memory_stays_flat_as_the_trace_grows(tmp_path):
    binary = ROOT / "target/release/iolearn"
    if not binary.exists():
        pytest.skip("iolearn binary not built")

    def peak_kib(repeat, out):
        cmd = [binary, "sim", "ssd", "--trace", TRACE, "--preset", "consumer", "--replicas", "1"]
        cmd += ["--repeat", str(repeat), "--out", out]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr = p.stdout.read(), p.stderr.read()
        _, status, usage = os.wait4(p.pid, 0)  # this child's own peak (iolearn execs python)
        p.returncode = os.waitstatus_to_exitcode(status)
        assert p.returncode == 0, stderr
        assert f"replayed {repeat * 10_000} I/Os" in stdout
        return usage.ru_maxrss

    small = peak_kib(30, tmp_path / "a.parquet")
    large = peak_kib(300, tmp_path / "b.parquet")
    # 2.7 million more records held would be over 150 MB more.
    assert large < small + 40_000, (small, large)
    import pyarrow.parquet as pq

    f = pq.ParquetFile(tmp_path / "b.parquet")
    assert f.metadata.num_rows == 3_000_000 and f.metadata.num_row_groups >= 10
