"""`iolearn eval ml-mittos` (issue 13): ML-MittOS's own protocol, every strategy named."""

from pathlib import Path

import numpy as np
import pytest

from iolearn import _native, ml_mittos

ROOT = Path(__file__).resolve().parents[2]
T1370 = ROOT.parent / "shared/reference/traces/msr.cut.per_10k.rw_40_60.1370.trace"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not T1370.is_file():
        pytest.skip(f"reference trace not found at {T1370}")
    out = tmp_path_factory.mktemp("mlm")
    rc = ml_mittos.main(["--trace", str(T1370), "--rate", "10", "--widths", "16", "--quick", "--out", str(out)])
    import pyarrow.parquet as pq

    return rc, out, pq.read_table(out / "results.parquet").to_pylist()


def test_every_strategy_on_every_drive_with_a_speedup_over_the_baseline(run):
    rc, out, rows = run
    assert rc == 0
    assert {r["workload"] for r in rows} == {f"rw_40_60.1370x10-drive{k}" for k in range(3)}
    assert {r["strategy"] for r in rows} == set(ml_mittos.STRATEGIES)
    for w in {r["workload"] for r in rows}:
        by = {r["strategy"]: r for r in rows if r["workload"] == w}
        for r in by.values():
            assert r["speedup"] == pytest.approx(r["baseline_us"] / r["mean_us"])
        # Oracles choose on the test set among the candidates global chooses from on training.
        assert by["threshold oracle"]["mean_us"] <= by["threshold global"]["mean_us"]
        assert by["bias oracle"]["mean_us"] <= by["bias global"]["mean_us"]
    table = (out / "table.md").read_text()
    assert "threshold equation" in table and "1.17x" in table


def test_the_list_simulator_through_python():
    lat = np.array([5000.0] + [200.0] * 999)
    busy = np.array([True] + [False] * 999)
    out = _native.simulate_list(lat, busy, 3, 30.0, seed=1)
    assert out[0] == 230.0 and (out[1:] == 200.0).all()
    with pytest.raises(ValueError, match="one length"):
        _native.simulate_list(lat, busy[:5])


def test_a_missing_trace_is_refused(tmp_path):
    assert ml_mittos.main(["--trace", str(tmp_path / "none.trace"), "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()
