"""The scale-free readahead model (schema iolearn-readahead-v3): labels, training, the
held-out estimate, and the model driving the controller (issue 12)."""

import json

import numpy as np
import pytest

from iolearn import _native, bench_trainset
from iolearn import readahead as ra
from iolearn.models import load_model


def _windows(rng, workload, kb, sequential, n=12):
    """Windows a sequential or random reader would show (the inputs' shapes, not their values,
    are what matters here)."""
    rows = []
    for _ in range(n):
        rows.append({
            "workload": workload, "ra_kb": kb,
            "direction": rng.uniform(0.8, 1.0) if sequential else rng.uniform(-1, 1),
            "regularity": rng.uniform(0, 0.1),
            "randomness": rng.uniform(0.0, 0.1) if sequential else rng.uniform(0.8, 1.0),
            "density": rng.uniform(0.5, 0.7) if sequential else rng.uniform(0.0, 0.05),
            "ra_log2_kb_over_13": np.log2(kb) / 13,
            "read_in_per_access": rng.uniform(0.1, 0.2) if sequential else np.log2(1 + kb / 8) / 6,
            "misses_per_access": rng.uniform(0.0, 0.05) if sequential else rng.uniform(0.5, 1.0),
        })  # fmt: skip
    return rows


def _family(rng):
    """Four scans that want 1 MiB and four random readers that want 16 KiB, at three values."""
    rows, feats = [], []
    for i in range(8):
        sequential = i % 2 == 0
        best = 1024 if sequential else 16
        for kb in (16, 128, 1024):
            rows.append({"workload": f"w{i}", "ra_kb": kb, "ops_s": 200.0 if kb == best else 100.0 + i})
            feats += _windows(rng, f"w{i}", kb, sequential)
    return rows, feats


def test_labels_prefer_vanilla_then_the_smallest_value_within_the_tie():
    rows = [
        {"workload": "a", "ra_kb": 16, "ops_s": 100.0},
        {"workload": "a", "ra_kb": 128, "ops_s": 98.0},
        {"workload": "a", "ra_kb": 512, "ops_s": 50.0},
        {"workload": "b", "ra_kb": 16, "ops_s": 50.0},
        {"workload": "b", "ra_kb": 128, "ops_s": 80.0},
        {"workload": "b", "ra_kb": 512, "ops_s": 99.0},
        {"workload": "b", "ra_kb": 1024, "ops_s": 100.0},
    ]
    assert ra.label_values(rows) == {"a": 128, "b": 512}
    assert ra.label_values(rows, tie=0.0) == {"a": 16, "b": 1024}


def test_a_label_moves_from_vanilla_only_when_most_runs_agree():
    def sweep(seed, gain):
        return [{"workload": "w", "ra_kb": kb, "ops_s": v, "seed": seed} for kb, v in ((128, 100.0), (512, gain))]

    # One run of two says +20%, the other -1%: noise, vanilla stays.
    assert ra.label_values(sweep(1, 120.0) + sweep(2, 99.0)) == {"w": 128}
    # Both say more than 3%: the value, judged run by run against that run's vanilla.
    assert ra.label_values(sweep(1, 120.0) + sweep(2, 105.0)) == {"w": 512}
    # Of three runs, one disturbed (-40%) neither vetoes the label nor, the other way, makes one.
    assert ra.label_values(sweep(1, 120.0) + sweep(2, 60.0) + sweep(3, 125.0)) == {"w": 512}
    assert ra.label_values(sweep(1, 99.0) + sweep(2, 160.0) + sweep(3, 101.0)) == {"w": 128}
    with pytest.raises(ValueError, match="no run of w at 128 KiB"):
        ra.label_values([{"workload": "w", "ra_kb": 512, "ops_s": 1.0, "seed": 1}])


def test_a_value_model_is_trained_scored_on_held_out_workloads_and_saved(tmp_path):
    rows, feats = _family(np.random.default_rng(0))
    rep = ra.train_values(rows, feats, tmp_path, epochs=40)
    assert rep["classes_kb"] == [16, 1024]
    # Each workload left out in turn is decided by a model that never saw it.
    for k in ("nn", "dt"):
        chosen = {h["workload"]: h["chosen_kb"] for h in rep["held_out"][k]}
        assert chosen == {f"w{i}": 1024 if i % 2 == 0 else 16 for i in range(8)}, (k, chosen)
        assert rep[f"{k}_held_out_worst"] > 1.8
    m = load_model(tmp_path / "readahead_v3.iolm")
    assert m.schema == _native.READAHEAD_SCHEMA_V3
    saved = json.loads((tmp_path / "train_v3.json").read_text())
    assert saved["labels_kb"]["w0"] == 1024
    # The simulator drives the network through the same controller as the tuner.
    ops, trace, _ = _native.sim_closed_loop(["readrandom"], str(tmp_path / "readahead_v3.iolm"), seconds=3.0)
    assert ops[0] > 0 and trace


def test_a_model_on_some_of_the_inputs_names_them_and_the_tuner_reads_those(tmp_path):
    rows, feats = _family(np.random.default_rng(4))
    # Without density (it grows with the size of the file read), in an order of our own.
    some = ("read_in_per_access", "randomness", "direction")
    rep = ra.train_values(rows, feats, tmp_path, epochs=40, features=some)
    assert rep["features"] == list(some)
    assert {h["chosen_kb"] for h in rep["held_out"]["nn"]} == {16, 1024}
    m = load_model(tmp_path / "readahead_v3.iolm")
    assert m.features == list(some) and m.n_features == 3
    # The controller reads the three it names: the simulator runs it.
    ops, trace, _ = _native.sim_closed_loop(["readrandom"], str(tmp_path / "readahead_v3.iolm"), seconds=3.0)
    assert ops[0] > 0 and trace
    for bad in (("density", "density"), ("n_transactions",), ()):
        with pytest.raises(ValueError, match="features: want some of"):
            ra.train_values(rows, feats, None, features=bad)


def test_a_workload_that_ties_teaches_every_value_it_ties_when_asked(tmp_path):
    # Four random readers whose sweeps tie 16 KiB and vanilla (labelled vanilla) beside one
    # that gains at 16, their windows alike: labelled one value each, the region is vanilla's
    # (four workloads to one); taught every tied value, it is 16's (five to four), which no
    # reader there loses by. Two scans want 1 MiB.
    rng = np.random.default_rng(5)
    rows, feats = [], []
    for name, ops in [("sure", (200.0, 100.0, 40.0))] + [(f"tie{k}", (101.0, 100.0, 40.0)) for k in range(4)]:
        rows += [{"workload": name, "ra_kb": kb, "ops_s": v} for kb, v in zip((16, 128, 1024), ops)]
        feats += _windows(rng, name, 128, sequential=False, n=20)
    for name in ("scan0", "scan1"):
        rows += [{"workload": name, "ra_kb": kb, "ops_s": v} for kb, v in ((16, 50.0), (128, 100.0), (1024, 200.0))]
        feats += _windows(rng, name, 128, sequential=True, n=20)
    assert ra.tied_values(rows, (16, 128, 1024)) == {"sure": [16], **{f"tie{k}": [16, 128] for k in range(4)},
                                                    "scan0": [1024], "scan1": [1024]}  # fmt: skip
    probe = np.array([[w[n] for n in ra.FEATURES_V3_FIRST] for w in _windows(rng, "new", 128, sequential=False)])
    answers = {}
    for tied in ("vanilla", "every"):
        rep = ra.train_values(rows, feats, tmp_path / tied, epochs=60, tied=tied, features=ra.FEATURES_V3_FIRST)
        assert rep["tied"] == tied and rep["rows"] == len(feats) + (4 * 20 if tied == "every" else 0)
        for model in ("readahead_v3.iolm", "readahead_v3_dt.iolm"):
            m = load_model(tmp_path / tied / model)
            # The answer to most new windows of the region (a tree splits noise too).
            answers[tied, model] = rep["classes_kb"][int(np.bincount(m.predict(probe)).argmax())]
    # The network votes as the windows do; the tree (a leaf of eight windows can hold the one
    # reader that gains) is only asked to follow them once every tied value is taught.
    assert answers["vanilla", "readahead_v3.iolm"] == 128 and answers["every", "readahead_v3.iolm"] == 16
    assert answers["every", "readahead_v3_dt.iolm"] == 16
    assert rep["tied_kb"]["tie0"] == [16, 128]
    with pytest.raises(ValueError, match="tied: want vanilla or every"):
        ra.train_values(rows, feats, None, tied="all")


def _odd(rng, name):
    """A workload whose windows lie where no other's do (strided, dense) and whose best value
    is vanilla: only its own windows (or a twin's) say 128 KiB."""
    rows = [{"workload": name, "ra_kb": kb, "ops_s": v} for kb, v in ((16, 50.0), (128, 100.0), (1024, 40.0))]
    feats = _windows(rng, name, 128, sequential=False, n=40)
    for f in feats:
        f.update(regularity=rng.uniform(0.9, 1.0), density=rng.uniform(0.9, 1.0), randomness=rng.uniform(0.4, 0.5))
    return rows, feats


def test_the_held_out_estimate_is_not_flattered_by_the_workload_or_its_twin():
    # Trained with its own windows the model would answer vanilla for it; left out, nothing in
    # training says vanilla there, so the estimate must not show vanilla's 1.0.
    rng = np.random.default_rng(1)
    rows, feats = _family(rng)
    for name in ("odd", "twin"):
        more_rows, more_feats = _odd(rng, name)
        rows, feats = rows + more_rows, feats + more_feats
    fitted = ra.train_values(rows, feats, None, epochs=40)
    grouped = ra.train_values(rows, feats, None, epochs=40, groups={"odd": "g", "twin": "g"})
    for k in ("nn", "dt"):
        # The twin answers for it when they are not grouped ...
        odd = next(h for h in fitted["held_out"][k] if h["workload"] == "odd")
        assert odd["chosen_kb"] == 128, (k, odd)
        # ... and not when they are.
        odd = next(h for h in grouped["held_out"][k] if h["workload"] == "odd")
        assert odd["chosen_kb"] != 128 and odd["x_vanilla"] < 0.6, (k, odd)
        assert grouped["groups"]["twin"] == "g"


def test_a_sweep_without_a_run_the_estimate_needs_is_refused():
    rows, feats = _family(np.random.default_rng(3))
    rows = [r for r in rows if not (r["workload"] == "w3" and r["ra_kb"] == 128)]
    with pytest.raises(ValueError, match="w3 at 128 KiB"):
        ra.train_values(rows, feats, None)


def test_training_needs_two_workloads_two_values_and_finite_windows():
    rng = np.random.default_rng(2)
    rows, feats = _family(rng)
    with pytest.raises(ValueError, match="two workloads"):
        ra.train_values([r for r in rows if r["workload"] == "w0"], feats, None)
    scans = [r for r in rows if r["workload"] in ("w0", "w2")]
    with pytest.raises(ValueError, match="best value is 1024 KiB: nothing to learn"):
        ra.train_values(scans, feats, None)
    feats[0]["density"] = float("nan")
    with pytest.raises(ValueError, match="not finite"):
        ra.train_values(rows, feats, None)


def test_a_probe_file_without_the_scale_free_columns_is_refused_by_name_and_line(tmp_path):
    # An older probe's file (KML's five, direction and regularity only).
    path = tmp_path / "old.csv"
    head = ["window", "time_s", "scope", "inode", "pid", "read_ahead_kb", *ra.FEATURES_V2, "lost_events"]
    path.write_text(",".join(head) + "\n" + ",".join(["1", "1.0", "device", "", "", "128"] + ["0"] * 8) + "\n")
    with pytest.raises(RuntimeError, match=r"old.csv:2: not a probe window with the scale-free columns"):
        bench_trainset.windows(path, "w", 128)
    # The probe's own columns: every schema's inputs, the device's rows only.
    head = ["window", "time_s", "scope", "inode", "pid", "read_ahead_kb", *ra.FEATURES_ALL, "lost_events"]
    values = [str(i / 100) for i in range(len(ra.FEATURES_ALL))]
    rows = [["1", "1.0", "device", "", "", "128", *values, "0"], ["1", "1.0", "file", "7", "9", "128", *values, "0"]]
    path.write_text("\n".join(",".join(r) for r in [head, *rows]) + "\n")
    (w,) = bench_trainset.windows(path, "w", 128)
    assert w["workload"] == "w" and w["ra_kb"] == 128
    assert [w[k] for k in ra.FEATURES_V3] == [float(values[ra.FEATURES_ALL.index(k)]) for k in ra.FEATURES_V3]


def test_the_training_family_shares_no_workload_with_the_test_family_and_groups_name_members():
    """The scale-free model is scored on the test family (``bench_family.FAMILY``): a training
    member running the same jobs as a test member would make that score a training score."""
    from iolearn import bench_family as bf

    training = {w.name: w for w in bf.TRAINING}
    assert len(training) == len(bf.TRAINING)
    test_jobs = {tuple(sorted(map(tuple, w.jobs))) for w in bf.FAMILY if w.jobs}
    for w in bf.TRAINING:
        assert w.name not in {t.name for t in bf.FAMILY}, w.name
        if w.jobs:
            assert tuple(sorted(map(tuple, w.jobs))) not in test_jobs, w.name
    assert set(bench_trainset.GROUPS) <= set(training)


def _probe_file(path, n=2):
    head = ["window", "time_s", "scope", "inode", "pid", "read_ahead_kb", *ra.FEATURES_ALL, "lost_events"]
    row = ["1", "1.0", "device", "", "", "128", *["0.5"] * len(ra.FEATURES_ALL), "0"]
    path.write_text("\n".join(",".join(r) for r in [head] + [row] * n) + "\n")


def test_a_resumed_trainset_reads_only_the_runs_an_earlier_step_finished(tmp_path):
    """``--reuse`` with the trainset step: a run counts as done when its sweep row (by seed) and
    its probe's windows are both there; a member added since, a repeat beyond the earlier
    ones, or a run whose windows are missing is run again."""
    from iolearn import bench_family as bf

    (tmp_path / "raw").mkdir()
    a, b = bf.TRAINING[0], bf.TRAINING[1]
    seed = bench_trainset.SEED
    ra._write(tmp_path / "trainset-sweep", [
        {"workload": a.name, "device": "loop0", "ra_kb": 16, "ops_s": 10.0, "seed": seed},
        {"workload": a.name, "device": "loop0", "ra_kb": 128, "ops_s": 5.0, "seed": seed},
        {"workload": a.name, "device": "loop0", "ra_kb": 16, "ops_s": 9.0, "seed": seed + 1},
        {"workload": "gone", "device": "loop0", "ra_kb": 16, "ops_s": 9.0, "seed": seed},
    ])  # fmt: skip
    _probe_file(tmp_path / "raw" / f"trainset-{a.name}-16-0.csv")
    _probe_file(tmp_path / "raw" / f"trainset-{a.name}-16-1.csv")
    _probe_file(tmp_path / "raw" / "trainset-gone-16-0.csv")
    # a at 128 in repeat 0 has a row but no windows; repeat 1 is not asked for; b never ran.
    runs = [(0, w, kb) for w in (a, b) for kb in (16, 128)]
    done = bench_trainset.recorded(tmp_path, runs)
    assert set(done) == {(a.name, 16, 0)}
    assert done[(a.name, 16, 0)]["ops_s"] == 10.0
    assert bench_trainset.recorded(tmp_path / "raw", runs) == {}  # no earlier sweep at all


def test_the_retrain_step_trains_from_the_recorded_runs_without_a_test_bed(tmp_path, capsys):
    from iolearn import bench_real

    rng = np.random.default_rng(5)
    rows, feats = _family(rng)
    for r in rows:
        r["seed"] = bench_trainset.SEED
    out = tmp_path / "out"
    out.mkdir()
    # Refused up front: nothing recorded yet, without --reuse, or beside the trainset step.
    (out / "report.json").write_text(json.dumps({"date": "2026-01-01", "oracle_kb": {"w": 16}}))
    for argv, why in (
        (["--reuse", "--steps", "retrain", "--out", str(out)], "trainset-sweep.csv, "),
        (["--steps", "retrain", "--out", str(out)], "needs --reuse and --out"),
        (["--reuse", "--steps", "trainset,retrain", "--out", str(out)], "the trainset step trains already"),
    ):
        with pytest.raises(SystemExit) as e:
            bench_real.main(argv + ["--workdir", str(tmp_path / "w")])
        assert e.value.code == 2 and why in capsys.readouterr().err, argv
    ra._write(out / "trainset-sweep", rows)
    ra._write(out / "trainset-features", feats)
    assert bench_real.main(["--reuse", "--steps", "retrain", "--out", str(out), "--workdir", str(tmp_path / "w")]) == 0
    assert not (tmp_path / "w").exists()  # no test bed
    rep = json.loads((out / "report.json").read_text())
    assert rep["trainset"]["labels_kb"] == {f"w{i}": 1024 if i % 2 == 0 else 16 for i in range(8)}
    assert rep["oracle_kb"] == {"w": 16} and rep["sweep_date"] == "2026-01-01"  # the rest kept
    model = load_model(out / "readahead_v3.iolm")
    assert model is not None
    # A corrupt recorded window names its file and line, and leaves the models as they were.
    before = (out / "readahead_v3.iolm").read_bytes()
    text = (out / "trainset-features.csv").read_text().splitlines()
    text[3] = text[3].replace(text[3].split(",")[2], "inf", 1)
    (out / "trainset-features.csv").write_text("\n".join(text) + "\n")
    assert bench_real.main(["--reuse", "--steps", "retrain", "--out", str(out), "--workdir", str(tmp_path / "w")]) == 2
    assert "trainset-features.csv: line 4" in capsys.readouterr().err
    assert (out / "readahead_v3.iolm").read_bytes() == before


def test_a_family_step_reused_takes_only_complete_sweeps(tmp_path):
    from iolearn import bench_family as bf

    path = tmp_path / "family-runs.csv"
    assert bf.earlier_sweeps(path, (16, 128)) == {}

    def row(w, kb, config="sweep", seed=bf.SWEEP_SEED, ops="[1.5, 2.0]"):
        return {"workload": w, "config": config, "repeat": -1, "seed": seed, "ra_kb": kb, "ops": ops,
                "unit": "MB/s", "series": "[]"}  # fmt: skip

    rows = [row("a", 16), row("a", 128), row("b", 16), row("a", 16, "vanilla", 1, "[9.0]"), row("c", 16, seed=7)]
    ra._write(tmp_path / "family-runs", rows + [row("c", 128, seed=7)])
    assert bf.earlier_sweeps(path, (16, 128)) == {"a": {16: [1.5, 2.0], 128: [1.5, 2.0]}}
    ra._write(tmp_path / "family-runs", rows + [row("b", 128, ops="[-1]")])
    with pytest.raises(ValueError, match=r"family-runs.csv: line 7: column ops"):
        bf.earlier_sweeps(path, (16, 128))
    # A sweep of runs of another length chooses another oracle: not taken. Rows without the
    # column are of the default length.
    timed = [dict(r, seconds=60) for r in rows[:2]] + [dict(r, seconds=bf.SECONDS) for r in rows[2:]]
    ra._write(tmp_path / "family-runs", timed + [dict(row("b", 128), seconds=bf.SECONDS)])
    assert bf.earlier_sweeps(path, (16, 128)) == {"b": {16: [1.5, 2.0], 128: [1.5, 2.0]}}
    assert bf.earlier_sweeps(path, (16, 128), 60) == {"a": {16: [1.5, 2.0], 128: [1.5, 2.0]}}
    ra._write(tmp_path / "family-runs", timed[:1] + [dict(row("a", 128), seconds=-15)])
    with pytest.raises(ValueError, match=r"family-runs.csv: line 3: column seconds"):
        bf.earlier_sweeps(path, (16, 128), 60)


def test_a_family_step_keeps_the_runs_it_will_not_write_again_aside(tmp_path, monkeypatch):
    # The step rewrites family-runs.csv with its own members' runs: the earlier file (other
    # members, sweeps of other lengths) is renamed first, its Parquet twin with it, never
    # onto a name already taken (the clock held still: every call in the same second).
    from iolearn import bench_family as bf

    epoch = bf.time.gmtime(0.0)
    monkeypatch.setattr(bf.time, "gmtime", lambda *_: epoch)
    stem = tmp_path / "family-runs"
    assert bf.keep_aside(stem) is None
    rows = [{"workload": "a", "config": "sweep", "ops": "[1.0]"}]
    kept = []
    for ops in ("[1.0]", "[2.0]"):
        ra._write(stem, [dict(rows[0], ops=ops)])
        kept.append(bf.keep_aside(stem))
        assert not stem.with_suffix(".csv").exists() and not stem.with_suffix(".parquet").exists()
    assert [k.name for k in kept] == ["family-runs.before-19700101T000000Z.csv",
                                      "family-runs.before-19700101T000000Z-1.csv"]  # fmt: skip
    assert [k.read_text().splitlines()[1] for k in kept] == ["a,sweep,[1.0]", "a,sweep,[2.0]"]
    assert all(k.with_suffix(".parquet").exists() for k in kept)
    # A Parquet file alone is kept too, and a name taken by anything is not reused.
    stem.with_suffix(".parquet").write_bytes(b"alone")
    tmp_path.joinpath("family-runs.before-19700101T000000Z-2.parquet").symlink_to(tmp_path / "nowhere")
    alone = bf.keep_aside(stem)
    assert alone.name == "family-runs.before-19700101T000000Z-3.parquet" and alone.read_bytes() == b"alone"
    assert not stem.with_suffix(".parquet").exists()


def test_a_resumed_trainset_keeps_every_earlier_run_in_its_sweep_even_when_cut_short(tmp_path, monkeypatch):
    """The runs read back are written with each new row, not only the ones before it: a
    member added in the middle of the family, or a step cut short, loses none."""
    from iolearn import bench_family as bf
    from iolearn import bench_real as br

    s = br.Settings(True)
    s.repeats = 2
    (tmp_path / "raw").mkdir()
    a, b = bench_trainset.chosen(s)
    runs = [(i, w, kb) for i in range(2) for w in (a, b) for kb in s.sweep_kb]
    # Everything but repeat 1 of the first member ran before.
    earlier = [(i, w, kb) for i, w, kb in runs if not (i == 1 and w is a)]
    ra._write(tmp_path / "trainset-sweep", [
        {"workload": w.name, "device": "loop0", "ra_kb": kb, "ops_s": 100.0 + kb, "seed": bench_trainset.SEED + i}
        for i, w, kb in earlier
    ])  # fmt: skip
    for i, w, kb in earlier:
        _probe_file(tmp_path / "raw" / f"trainset-{w.name}-{kb}-{i}.csv")

    class Bed:
        name = "loop0"

        def set_readahead(self, kb):
            pass

    ran, trained = [], []

    def run(s, tb, db, files, w, *, kb, seed, seconds, helper, scratch):
        if fail_after is not None and len(ran) >= fail_after:
            raise KeyboardInterrupt
        ran.append((w.name, kb, seed - bench_trainset.SEED))
        _probe_file(helper)
        return [7.0]

    monkeypatch.setattr(bf, "Files", lambda s, tb: None)
    monkeypatch.setattr(bf, "run", run)
    monkeypatch.setattr(br, "probe_helper", lambda tb, path, per_file: path)
    monkeypatch.setattr(
        bench_trainset, "retrain", lambda out, quick, rows, feats, features, tied: trained.append(rows) or {}
    )
    # Cut short after the first new run: every earlier run is still in the sweep.
    fail_after = 1
    with pytest.raises(KeyboardInterrupt):
        bench_trainset.trainset(s, Bed(), tmp_path, tmp_path, resume=True)
    got = {
        (r["workload"], r["ra_kb"], r["seed"] - bench_trainset.SEED) for r in ra._read(tmp_path / "trainset-sweep.csv")
    }
    assert got == {(w.name, kb, i) for i, w, kb in earlier} | set(ran) and len(ran) == 1
    # Resumed to the end: only the missing runs ran, and the sweep holds every run in order.
    fail_after, ran = None, []
    bench_trainset.trainset(s, Bed(), tmp_path, tmp_path, resume=True)
    assert len(ran) == len(s.sweep_kb) - 1
    rows = ra._read(tmp_path / "trainset-sweep.csv")
    assert [(r["workload"], r["ra_kb"], r["seed"] - bench_trainset.SEED) for r in rows] == [
        (w.name, kb, i) for i, w, kb in runs
    ]
    assert [r["workload"] for r in trained[0]] == [r["workload"] for r in rows]
    # A fresh step does not keep an earlier step's sweep.
    fail_after, ran = 0, []
    with pytest.raises(KeyboardInterrupt):
        bench_trainset.trainset(s, Bed(), tmp_path, tmp_path, resume=False)
    assert not (tmp_path / "trainset-sweep.csv").exists()


def test_windows_recorded_before_the_marker_share_train_on_the_others():
    rows, feats = _family(np.random.default_rng(5))
    # Windows without the eighth input (recorded before it existed): trained on the seven.
    assert ra.train_values(rows, feats, None, epochs=5)["features"] == list(ra.FEATURES_V3_FIRST)
    with pytest.raises(ValueError, match="the windows have no marker_share"):
        ra.train_values(rows, feats, None, epochs=5, features=ra.FEATURES_V3)
    # With it, on all eight.
    marked = [dict(f, marker_share=0.5 if f["randomness"] < 0.5 else 0.02) for f in feats]
    assert ra.train_values(rows, marked, None, epochs=5)["features"] == list(ra.FEATURES_V3)
