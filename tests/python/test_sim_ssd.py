"""`iolearn sim ssd`: a reference trace replayed on replicated simulated SSDs (issue 5)."""

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
