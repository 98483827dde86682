"""LinnApp's recalibration (issue 13): a device's LinnOS model is retrained when its inflection
point drifts by 5 percentiles."""

import numpy as np
import pyarrow.parquet as pq
import pytest

from iolearn import _native, linnapp


@pytest.fixture(scope="module")
def windows():
    """Base replays of two light windows and a heavy one (other seeds than the docs' run)."""
    world = _native.TailWorld(preset="enterprise", replicas=3, noise="ec2", seed=7)
    out = {}
    for name, phase, seed in (("light1", "light", 71), ("light2", "light", 72), ("heavy", "heavy", 73)):
        data = linnapp.window(phase, 30_000, seed)
        out[name] = world.run("base", **data, rate=1.0, samples=True, seed=7)["samples"]
    return out


def test_a_stable_workload_keeps_its_models_and_a_shifted_one_retrains(windows, tmp_path):
    app = linnapp.LinnApp(tmp_path, seed=7, quick=True)
    first = app.inflection_points(windows["light1"])
    assert app.drifted(first) == [0, 1, 2], "no model yet: every device trains"
    app.ip_pct = [pct for pct, _ in first]
    stable = app.drifted(app.inflection_points(windows["light2"]))
    shifted = app.drifted(app.inflection_points(windows["heavy"]))
    assert len(stable) <= 1, f"a second light window moved {stable}"
    assert len(shifted) >= 2, f"the heavy window moved only {shifted}"
    moved = [abs(p - q) for (p, _), q in zip(app.inflection_points(windows["heavy"]), app.ip_pct, strict=True)]
    assert max(moved) >= linnapp.DRIFT_PCT


def test_observe_retrains_and_records_what_it_did(windows, tmp_path):
    app = linnapp.LinnApp(tmp_path, seed=7, quick=True)
    assert app.observe(windows["light1"]) == [0, 1, 2]
    before = [(tmp_path / f"linnos-r{r}.iolm").read_bytes() for r in range(3)]
    again = app.observe(windows["heavy"])
    assert again and app.retrained == [[0, 1, 2], again]
    for r in range(3):
        changed = (tmp_path / f"linnos-r{r}.iolm").read_bytes() != before[r]
        assert changed == (r in again)


def test_the_evaluation_writes_every_window_and_policy(tmp_path):
    rc = linnapp.main(["--phases", "light,heavy,heavy", "--ios", "3000", "--quick", "--out", str(tmp_path)])
    assert rc == 0
    rows = pq.read_table(tmp_path / "results.parquet").to_pylist()
    assert {(r["window"], r["policy"]) for r in rows} == {
        (k, p) for k in (1, 2) for p in ("Base", "LinnOS-static", "LinnApp", "LinnOS-every")
    }
    assert all(np.isfinite(r["p99_us"]) and r["p99_us"] > 0 for r in rows)
    assert "| 2 | heavy |" in (tmp_path / "table.md").read_text()
