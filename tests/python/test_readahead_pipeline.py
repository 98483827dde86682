"""The simulated KML readahead pipeline: sweep -> train -> closed-loop evaluation (issue 3)."""

import numpy as np
import pytest

from iolearn import _native
from iolearn import readahead as ra


def test_sweep_train_evaluate_small(tmp_path, monkeypatch):
    rows, feats = ra.sweep(ra.TRAIN_WORKLOADS, (4, 16, 256, 1024), "nvme", seconds=2.0, out=tmp_path)
    assert (tmp_path / "sweep.csv").exists() and (tmp_path / "features.csv").exists()
    best = ra.best_per_workload(rows)
    assert best["readrandom"] in (4, 16) and best["readseq"] >= 256
    rep = ra.train(rows, feats, tmp_path, epochs=30)
    assert (tmp_path / "readahead_nn.iolm").exists() and (tmp_path / "readahead_kml.iolm").exists()
    # KML's recipe maps each class to its workload's best static value.
    assert dict(rep["best_per_class"])["readrandom"] == best["readrandom"]
    # The same windows with direction and regularity (schema iolearn-readahead-v2): the scans'
    # windows differ in direction, and the model drives the simulator like KML's.
    direction = {w: np.median([f["direction"] for f in feats if f["workload"] == w]) for w in ra.SEQUENTIAL}
    assert direction["readseq"] > direction["readreverse"] + 0.2, direction
    rep2 = ra.train(rows, feats, tmp_path, epochs=30, suffix="_v2", features=ra.FEATURES_V2)
    assert rep2["features"] == list(ra.FEATURES_V2) and "kml_recipe_cv" not in rep2
    ops, _, _ = _native.sim_closed_loop(["readseq"], str(tmp_path / "readahead_nn_v2.iolm"), seconds=1.0)
    assert ops[0] > 0
    with pytest.raises(ValueError, match="features"):
        ra.train(rows, feats, tmp_path, features=("n_transactions",))
    table = ra.evaluate(tmp_path, ["readrandom"], "nvme", seconds=2.0, oracle=best)
    r = table[0]
    # The controller acts after the first simulated second; it must then match the oracle's
    # choice for a random workload and so beat vanilla.
    assert r["dt"] > r["vanilla"] and r["oracle"] > r["vanilla"]
    # Two seconds: the guarded learner is still measuring vanilla, and must not lose.
    assert r["kml"] > 0 and r["online"] >= 0.98 * r["vanilla"]
    # Two processes on one database: the per-description oracle is each process's own value.
    (tmp_path / "readahead_nn_file.iolm").write_bytes((tmp_path / "readahead_nn.iolm").read_bytes())
    monkeypatch.setattr(ra, "SHARED_GRID_KB", (16, 512))
    shared = ra.shared(tmp_path, [("readseq", "readrandom")], seconds=2.0, seeds=[1])
    assert shared[0]["oracle_kb"] == "512/16" and shared[0]["oracle"] > 1.0
    assert (tmp_path / "shared.csv").exists()


def test_closed_loop_controls_the_device():
    ops, trace, feats = _native.sim_closed_loop(["readrandom"], "static:16", "nvme", seconds=2.0)
    assert ops[0] > 0 and all(kb == 16 for _, kb in trace)
    # [window, every column of ra.FEATURES_ALL]: the readahead feature is the static value.
    assert feats.shape[1] == 1 + len(ra.FEATURES_ALL) and (feats[:, 5] == 32 / 1024).all()
    assert (np.abs(feats[:, 6]) <= 1).all() and ((feats[:, 7] >= 0) & (feats[:, 7] <= 1)).all()
    # The scale-free inputs: a random reader's randomness well above a scan's (near 0), density
    # in 0..1, the readahead as log2(16) / 13, and demand misses per page accessed above none.
    col = {n: feats[:, 1 + i] for i, n in enumerate(ra.FEATURES_ALL)}
    assert ((col["randomness"] > 0.5) & (col["randomness"] < 1)).all(), col["randomness"]
    assert ((col["density"] > 0) & (col["density"] < 1)).all(), col["density"]
    assert (col["ra_log2_kb_over_13"] == 4 / 13).all() and (col["misses_per_access"] > 0.1).all()


def test_closed_loop_refuses_bad_input(tmp_path):
    with pytest.raises(ValueError, match="unknown workload"):
        _native.sim_closed_loop(["nope"])
    with pytest.raises(ValueError, match="static"):
        _native.sim_closed_loop(["readseq"], "static:lots")
    bad = tmp_path / "m.iolm"
    bad.write_bytes(b"IOLM")
    with pytest.raises(ValueError, match="m.iolm"):
        _native.sim_closed_loop(["readseq"], str(bad))
    with pytest.raises(OSError):
        _native.sim_closed_loop(["readseq"], str(tmp_path / "missing.iolm"))
    with pytest.raises(ValueError, match="scope"):
        _native.sim_closed_loop(["readseq"], "vanilla", scope="per-thread")
    with pytest.raises(ValueError, match="disagree"):
        _native.sim_closed_loop(["readseq"], "vanilla", scope="description", per_file=True)
    with pytest.raises(ValueError, match="shared_db"):
        _native.sim_closed_loop(["readseq", "readrandom"], "vanilla", shared_db=True, back_to_back=True)


def test_a_shared_database_gives_each_process_its_own_descriptions():
    # Each process's own static value on a shared database (the per-description oracle)
    # serves both: the scan gains from 512 KiB, the random reader keeps 16 KiB.
    w = ["readseq", "readrandom"]
    own, _, _ = _native.sim_closed_loop(w, "files:512,16", seconds=3.0, shared_db=True)
    one, _, _ = _native.sim_closed_loop(w, "files:512,512", seconds=3.0, shared_db=True)
    assert own[1] > 1.5 * one[1] and own[0] > 0.9 * one[0]
    _, _, f = _native.sim_closed_loop(w, "vanilla", seconds=1.0, shared_db=True, file_features=True)
    assert set(f[:, 1]) == {0.0, 1.0}


def test_controller_refuses_a_model_of_another_schema(tmp_path):
    import iolearn

    X, y = iolearn.datasets.kml_like(20, seed=0)
    path = tmp_path / "other.iolm"
    iolearn.DecisionTree(max_depth=3).fit(X, y).save(path, schema="something-else")
    with pytest.raises(ValueError, match="kml-readahead-v1"):
        _native.sim_closed_loop(["readseq"], str(path), seconds=1.0)


def test_per_file_features_name_their_workload():
    _, _, f = _native.sim_closed_loop(["readrandom", "readseq"], "static:64", "nvme", seconds=1.0, file_features=True)
    assert f.shape[1] == 2 + len(ra.FEATURES_ALL)
    assert set(np.unique(f[:, 1])) == {0.0, 1.0}
    # Sequential files show a mean |page delta| far below random ones.
    rnd, seq = f[f[:, 1] == 0], f[f[:, 1] == 1]
    assert np.median(rnd[:, 5]) > 10 * np.median(seq[:, 5])


def test_least_regret_actions_follow_the_confusion():
    rows = [
        {"workload": w, "ra_kb": kb, "ops_s": ops}
        for w, curve in {
            "readrandom": {16: 100, 256: 50, 512: 40},
            "readrandomwriterandom": {16: 100, 256: 50, 512: 40},
            "readseq": {16: 10, 256: 100, 512: 99.7},
            "readreverse": {16: 10, 256: 89, 512: 100},
        }.items()
        for kb, ops in curve.items()
    ]
    y = np.array([0, 1, 2, 2, 3, 3])
    # A perfect classifier: each class's best value (KML's map).
    assert ra.least_regret_actions(rows, y, y) == [16, 16, 256, 512]
    # readreverse sometimes predicted as readseq: readseq's flat top makes 512 the safe value.
    assert ra.least_regret_actions(rows, y, np.array([0, 1, 2, 2, 2, 3])) == [16, 16, 512, 512]
    # A class never predicted keeps its own best value.
    assert ra.least_regret_actions(rows, y, np.array([0, 0, 2, 2, 3, 3]))[1] == 16


def test_per_workload_static_files_and_its_errors():
    ops, _, _ = _native.sim_closed_loop(["readrandom", "readseq"], "files:16,256", "nvme", seconds=1.0)
    both16, _, _ = _native.sim_closed_loop(["readrandom", "readseq"], "files:16,16", "nvme", seconds=1.0)
    assert ops[1] > 2 * both16[1], "the scan's own files got 256 KiB"
    for bad, why in [
        ("files:16", "one KiB value per concurrent workload"),
        ("files:16,x", 'files: "x" is not a readahead in KiB'),
        ("files:", 'files: "" is not a readahead'),
        ("files:16,2000000", "0 to 1048576"),
    ]:
        with pytest.raises(ValueError, match=why):
            _native.sim_closed_loop(["readrandom", "readseq"], bad, "nvme", seconds=0.1)
    with pytest.raises(ValueError, match="one KiB value per concurrent workload"):
        _native.sim_closed_loop(["readrandom", "readseq"], "files:16,16", back_to_back=True, seconds=0.1)


def test_issue3_goals_hold_for_the_per_file_network(tmp_path, capsys):
    # Issue 3, must-show 3: the whole pipeline as `iolearn readahead all` runs it (5 s sweeps,
    # 30 s evaluation runs); `main` returns 3 when a goal is missed.
    assert ra.main(["all", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("[met]") == 3 and "MISSED" not in out
    for name in ("evaluate.csv", "evaluate.parquet", "mixed.csv", "back_to_back.csv", "evaluate.png"):
        assert (tmp_path / name).exists(), name
    assert (tmp_path / "oracle" / "mixed-sweep.csv").exists()


def test_guardrail_and_online_learner_from_python():
    def ops(spec, **kw):
        return _native.sim_closed_loop(["readrandom"], spec, seconds=40.0, seed=11, app_signal=True, **kw)

    vanilla = ops("vanilla")[0][0]
    flood = ops("static:4096")[0][0]
    guarded, trace, _ = ops("static:4096", guard=True)
    assert flood < 0.5 * vanilla
    # Each trial of 4 MiB costs the window it settles in (not judged) and one more: about 9%
    # over 40 s, under 2% over five minutes (docs/benchmarks.md).
    assert guarded[0] >= 0.88 * vanilla
    # Vanilla is measured first, 4 MiB is tried, found worse and reverted.
    kbs = [kb for _, kb in trace]
    assert kbs[0] == 128 and 4096 in kbs and kbs[-1] == 128
    online, trace, _ = ops("online", guard=True)
    assert online[0] > 1.1 * vanilla
    assert trace[-1][1] < 128  # a random reader wants less than the kernel's default
