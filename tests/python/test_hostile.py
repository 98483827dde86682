"""Every Python entry point with bad values (issue 11, must-show 1): estimators raise a
ValueError naming the parameter (as scikit-learn does), command-line modules end in one line
of error with a non-zero status and no traceback, and nothing is left at the output path."""

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import iolearn
import iolearn.traces
from iolearn import _validate

X, Y = iolearn.datasets.kml_like(20, seed=0)


# Estimators -----------------------------------------------------------------------------

MLP_BAD = [
    (dict(epochs=1.5), "epochs"),
    (dict(epochs=0), "epochs"),
    (dict(epochs=10**12), "epochs"),
    (dict(epochs="3"), "epochs"),
    (dict(batch_size=0), "batch_size"),
    (dict(batch_size=True), "batch_size"),
    (dict(hidden=(10**9,)), "hidden"),
    (dict(hidden=(-1,)), "hidden"),
    (dict(hidden=5), "hidden"),
    (dict(hidden=(8,) * 100), "hidden"),
    (dict(lr=-1.0), "lr"),
    (dict(lr=float("nan")), "lr"),
    (dict(momentum=1.0), "momentum"),
    (dict(seed=-1), "seed"),
    (dict(seed=2**64), "seed"),
    (dict(class_weight=[1.0]), "class_weight"),
    (dict(class_weight=[]), "class_weight"),
    (dict(class_weight=[float("nan"), 1, 1, 1]), "class_weight"),
    (dict(class_weight=[-1, 1, 1, 1]), "class_weight"),
    (dict(class_weight=[0, 0, 0, 0]), "class_weight"),
    (dict(loss="amse", b=float("nan")), "b"),
    (dict(loss="amse", b=5), "b"),
    (dict(loss="bce", pos_weight=-1), "pos_weight"),
    (dict(penalty=-1), "penalty"),
    (dict(penalized_class=99), "penalized_class"),
    (dict(n_outputs=10**9), "n_outputs"),
    (dict(loss="nope"), "loss"),
    (dict(activation="softmax"), "activation"),
    (dict(log_features=[7]), "log_features"),
    (dict(log_features=[0], normalize=False), "log_features"),
    (dict(normalize="no"), "normalize"),
]


@pytest.mark.parametrize("params, name", MLP_BAD)
def test_mlp_parameters_are_validated_by_name(params, name):
    y = Y % 2 if params.get("loss") == "bce" else Y
    with pytest.raises(ValueError, match=name):
        iolearn.MLP(**params).fit(X, y)


TREE_BAD = [
    (dict(max_depth=0), "max_depth"),
    (dict(max_depth=1.5), "max_depth"),
    (dict(min_samples_split=1), "min_samples_split"),
    (dict(min_samples_leaf=0.1), "min_samples_leaf"),
    (dict(criterion="x"), "criterion"),
]


@pytest.mark.parametrize("params, name", TREE_BAD)
def test_tree_parameters_are_validated_by_name(params, name):
    with pytest.raises(ValueError, match=name):
        iolearn.DecisionTree(**params).fit(X, Y)


@pytest.mark.parametrize("est", [iolearn.MLP(epochs=1), iolearn.DecisionTree()])
def test_labels_are_validated(est):
    for y, match in [
        (np.where(np.arange(len(Y)) == 0, 10**9, Y), "label"),
        (np.full(len(Y), np.nan), "NaN"),
        (Y + 0.5, "whole numbers"),
        (Y[:-3], "rows"),
        (np.stack([Y, Y], 1), "1-dimensional"),
    ]:
        with pytest.raises(ValueError, match=match):
            est.fit(X, y)


@pytest.mark.parametrize("est", [iolearn.MLP(epochs=3), iolearn.DecisionTree()])
def test_one_class_fits_predict_that_class(est):
    est.fit(X, np.zeros(len(Y)))
    assert set(est.predict(X).tolist()) == {0}
    assert est.predict_proba(X).shape == (len(Y), 2)


def test_export_text_and_score_validate():
    t = iolearn.DecisionTree(max_depth=2).fit(X, Y)
    with pytest.raises(ValueError, match="decimals"):
        t.export_text(10**6)
    assert t.score(X, Y[:, None]) == t.score(X, Y)
    with pytest.raises(ValueError, match="rows"):
        t.score(X, Y[:5])


def test_a_diverged_fit_is_an_error_and_saves_nothing(tmp_path):
    m = iolearn.MLP(loss="mse", lr=10, momentum=0.9, epochs=20, batch_size=8)
    with pytest.raises(ValueError, match="diverged"):
        m.fit(X, np.full(len(Y), 1e6))
    assert m.model_ is None


def test_a_failed_save_changes_nothing(tmp_path):
    m = iolearn.MLP(epochs=1).fit(X, Y)
    schema = m.model_.schema
    with pytest.raises(OSError):
        m.save(tmp_path / "missing" / "x.iolm", schema="NEW")
    assert m.model_.schema == schema
    with pytest.raises(ValueError):
        m.save(tmp_path / "x.iolm", schema="NEW", features=["a"])
    assert m.model_.schema == schema
    with pytest.raises(ValueError, match="features"):
        m.save(tmp_path / "x.iolm", features="abcde")
    assert os.listdir(tmp_path) == []


def test_a_model_file_is_read_with_a_bound():
    with pytest.raises(OSError, match="limit"):
        iolearn.load_model("/dev/zero")


# Property tests of the numeric checks ----------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_float_checks_return_in_range_or_raise_value_error(v, a, b):
    lo, hi = min(a, b), max(a, b)
    try:
        got = _validate.check_float("x", v, lo, hi)
    except ValueError as e:
        assert "x must be" in str(e)
        assert not (math.isfinite(v) and lo <= v <= hi)
    else:
        assert math.isfinite(got) and lo <= got <= hi


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.integers(), st.floats(), st.booleans(), st.text(max_size=5), st.none()))
def test_int_checks_accept_only_integers_in_range(v):
    try:
        got = _validate.check_int("n", v, 1, 1000)
    except ValueError as e:
        assert "n must be an integer" in str(e)
    else:
        assert type(got) is int and 1 <= got <= 1000 and not isinstance(v, bool)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_float_arg_never_raises_anything_but_argument_errors(text):
    import argparse

    conv = _validate.float_arg(0.0, 10.0, lo_open=True)
    try:
        v = conv(text)
    except argparse.ArgumentTypeError:
        pass
    else:
        assert 0.0 < v <= 10.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="0123456789.- ,eEnaifRW\t", max_size=40), max_size=8))
def test_trace_readers_return_or_raise_value_error(tmp_path_factory, lines):
    d = tmp_path_factory.mktemp("prop")
    p = d / "t.trace"
    p.write_text("\n".join(lines))
    for fmt in ("linnos", "msr", "blkparse"):
        try:
            cols = iolearn.traces.read(p, fmt)
        except ValueError as e:
            assert "t.trace" in str(e)
        else:
            assert len(cols["offset"]) == len(cols["size"])
            assert np.all(cols["size"] > 0)


# Command-line modules ---------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT.parent / "shared" / "reference" / "msr"


def run(module, *args, cwd):
    return subprocess.run(
        [sys.executable, "-m", f"iolearn.{module}", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


CLI_BAD = [
    ("readahead", ["sweep", "--seconds", "inf"], "--seconds"),
    ("readahead", ["sweep", "--seconds", "-1"], "--seconds"),
    ("readahead", ["sweep", "--seconds", "nan"], "--seconds"),
    ("readahead", ["sweep", "--seed", "-1"], "--seed"),
    ("readahead", ["sweep", "--device", "bogus"], "--device"),
    ("readahead", ["sweep", "--out", "out/link"], "symbolic link"),
    ("readahead", ["sweep", "--out", "file"], "not a directory"),
    ("readahead", ["evaluate", "--eval-seconds", "0"], "--eval-seconds"),
    ("readahead", ["online", "--phase-seconds", "0"], "--phase-seconds"),
    ("readahead", ["online", "--phase-seconds", "1e300"], "--phase-seconds"),
    ("readahead", ["online", "--out", "file"], "not a directory"),
    ("admission", ["--rate", "1e-300"], "--rate"),
    ("admission", ["--rate", "1", "0"], "--rate"),
    ("admission", ["--replicas", "-1"], "--replicas"),
    ("admission", ["--replicas", "9"], "--replicas"),
    ("admission", ["--cache-mb", "1152921504606846976"], "--cache-mb"),
    ("admission", ["--seed", "-1"], "--seed"),
    ("admission", ["--failover-us", "nan"], "--failover-us"),
    ("admission", ["--preset", "floppy"], "--preset"),
    ("admission", ["--noise", "loud"], "--noise"),
    ("admission", ["--trace", "out"], "no traces"),
    ("ml_mittos", ["--widths", "0"], "--widths"),
    ("mittcfq", ["--duration", "5"], "--duration"),
    ("mittcfq", ["--duration", "nan"], "--duration"),
    ("mittcfq", ["--sched", "cfq"], "--sched"),
    ("mittcfq", ["--scenario", "loud"], "--scenario"),
    ("mittcfq", ["--seeds", "1000003"], "sets the deadline"),
    ("mittcfq", ["--out", "file"], "not a directory"),
    ("linnapp", ["--phases", "light"], "--phases"),
    ("linnapp", ["--phases", "light,loud"], "--phases"),
    ("linnapp", ["--ios", "10"], "--ios"),
    ("linnapp", ["--out", "file"], "not a directory"),
    ("ml_mittos", ["--replicas", "1"], "--replicas"),
    ("ml_mittos", ["--failover-us", "nan"], "--failover-us"),
    ("ml_mittos", ["--trace", "missing.trace"], "missing.trace"),
    ("ml_mittos", ["--trace", "tiny.trace", "--out", "file"], "not a directory"),
    ("admission", ["--trace", "missing.trace"], "missing.trace"),
    ("admission", ["--trace", "tiny.trace", "sub/tiny.trace"], "share a file name"),
    ("admission", ["--trace", "tiny.trace", "--out", "file"], "not a directory"),
    ("admission", ["--trace", "tiny.trace", "--out", "a+b"], "`+` and `@`"),
    ("admission", ["--trace", "tiny.trace", "--out", "a@b"], "`+` and `@`"),
    ("traces", ["convert", "tiny.trace", "tiny.trace"], "input trace"),
    ("traces", ["convert", "tiny.trace", "out/link"], "symbolic link"),
    ("traces", ["convert", "tiny.trace", "out"], "directory"),
    ("traces", ["convert", "bad.trace", "out/x.parquet"], "line 2"),
    ("traces", ["stats", "missing.trace"], "missing.trace"),
    ("traces", ["convert", "tiny.trace", "out/x.csv"], "Parquet"),
    ("bench_real", ["--repeats", "0"], "--repeats"),
    ("bench_real", ["--steps", "sweep,nope"], "--steps"),
    ("bench_real", ["--reuse", "--out", "out"], "--reuse"),
    ("bench_admission", ["--rate", "0"], "--rate"),
    ("bench_admission", ["--noise-threads", "100000"], "--noise-threads"),
    ("bench_admission", ["--repeats", "-1"], "--repeats"),
    ("demo", ["--epochs", "1000000000000"], "--epochs"),
    ("demo", ["--reference", "zero-ref", "--out", "out/demo"], "limit"),
    ("readahead", ["train", "--out", "zero-sweep"], "limit"),
    ("readahead", ["train", "--out", "bad-features"], "features.csv: line 3: mean_abs_page_delta"),
    ("readahead", ["train", "--out", "short-features"], "features.csv: missing column(s) ra_sectors_over_1024"),
    ("readahead", ["train", "--out", "x\ny"], "not found"),
    ("demo", ["--epochs", "-1"], "--epochs"),
    ("demo", ["--batch-size", "0"], "--batch-size"),
    ("demo", ["--sim-seconds", "nan"], "--sim-seconds"),
    ("demo", ["--eval-seconds", "-1"], "--eval-seconds"),
]


@pytest.fixture(scope="module")
def cli_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "out").mkdir()
    (d / "sub").mkdir()
    (d / "file").write_text("x")
    lines = "".join(f"{i * 0.1:.1f} 0 {4096 * i} 4096 1\n" for i in range(200))
    (d / "tiny.trace").write_text(lines)
    (d / "sub" / "tiny.trace").write_text(lines)
    (d / "bad.trace").write_text("0.0 0 4096 4096 1\n0.5 0 zz 4096 1\n")
    (d / "out" / "link").symlink_to("/etc/hostname")
    (d / "zero-ref" / "nn_arch_data").mkdir(parents=True)
    (d / "zero-ref" / "nn_arch_data" / "input.csv").symlink_to("/dev/zero")
    (d / "zero-sweep").mkdir()
    (d / "zero-sweep" / "sweep.csv").symlink_to("/dev/zero")
    sweep = "workload,ra_kb,ops_s\nreadrandom,16,100\nreadseq,256,90\n"
    header = "workload,n_transactions,page_offset_var_pop_over_range,page_offset_var_sample_over_range,"
    for name, body in [
        ("bad-features", header + "mean_abs_page_delta,ra_sectors_over_1024\nreadseq,1,2,3,4,5\nreadseq,1,2,3,zz,5\n"),
        ("short-features", header + "mean_abs_page_delta\nreadseq,1,2,3,4\n"),
    ]:
        (d / name).mkdir()
        (d / name / "sweep.csv").write_text(sweep)
        (d / name / "features.csv").write_text(body)
    return d


@pytest.mark.parametrize("module, args, culprit", CLI_BAD, ids=[f"{m}:{' '.join(a)}" for m, a, _ in CLI_BAD])
def test_commands_refuse_bad_input_in_one_line(cli_dir, module, args, culprit):
    before = sorted(os.listdir(cli_dir / "out"))
    p = run(module, *args, cwd=cli_dir)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode not in (0, 70), p.stderr
    assert "Traceback" not in p.stderr and "PanicException" not in p.stderr, p.stderr
    assert len(lines) == 1, p.stderr
    assert culprit in lines[0], p.stderr
    assert sorted(os.listdir(cli_dir / "out")) == before
    assert (cli_dir / "out" / "link").is_symlink()


def test_model_selection_checks_shapes_and_ranges():
    from iolearn.model_selection import cross_val_score, kfold, permutation_importance

    with pytest.raises(ValueError, match="rows"):
        cross_val_score(iolearn.DecisionTree(), X, Y[:40], cv=2)
    with pytest.raises(ValueError, match="n must be"):
        kfold(10**12, 2)
    with pytest.raises(ValueError, match="k must be"):
        kfold(10, 2.9)
    t = iolearn.DecisionTree().fit(X, Y)
    with pytest.raises(ValueError, match="class labels"):
        permutation_importance(t, X, np.full(len(Y), np.nan))
    with pytest.raises(ValueError, match="n_repeats"):
        permutation_importance(t, X, Y, n_repeats=0)


def test_saving_a_models_own_normaliser_keeps_its_log_mask(tmp_path):
    m = iolearn.MLP(epochs=2, log_features=[0, 1, 2, 3]).fit(X, Y)
    mask = m.model_.normaliser_log1p
    assert mask == [True, True, True, True, False]
    m.save(tmp_path / "m.iolm", normaliser=m.model_.normaliser)
    back = iolearn.load_model(tmp_path / "m.iolm")
    assert back.normaliser_log1p == mask
    np.testing.assert_allclose(back.forward(X[:5]), m.forward(X[:5]), rtol=1e-6)


def test_corrupt_pipeline_inputs_are_refused(tmp_path):
    from iolearn import readahead

    sweep = tmp_path / "sweep.csv"
    sweep.write_text("workload,device,ra_kb,ops_s,seed\nreadseq,nvme,128,inf,0\n")
    with pytest.raises(ValueError, match="ops_s"):
        readahead._read(sweep)
    ref = tmp_path / "ref" / "nn_arch_data"
    ref.mkdir(parents=True)
    (ref / "input.csv").write_text("1 2 3 4 5\n")
    (ref / "output.csv").write_text("7.5\n")
    with pytest.raises(ValueError, match="labels"):
        iolearn.datasets.load_kml_readahead(tmp_path / "ref")
    (ref / "input.csv").write_text("1 2 nan 4 5\n")
    with pytest.raises(ValueError, match="NaN"):
        iolearn.datasets.load_kml_readahead(tmp_path / "ref")


def test_native_simulators_bound_their_inputs():
    from iolearn import _native

    with pytest.raises(ValueError, match="seconds"):
        _native.sim_page_events("readrandom", "nvme", 128, 1e300, 2355, 850, 1)
    with pytest.raises(ValueError, match="read_ahead_kb"):
        _native.sim_page_events("readrandom", "nvme", 2**62, 1.0, 2355, 850, 1)
    with pytest.raises(ValueError, match="max_depth"):
        _native.fit_tree(X, Y.astype(np.float32), 10**9)
    world = _native.TailWorld(replicas=2)
    arrival = np.array([0, 1000], dtype=np.uint64)
    offset = np.array([0, 4096], dtype=np.uint64)
    write = np.array([False, True])
    for size, culprit in [([4096, 0], "size of I/O 1: 0 bytes"), ([2**32 - 1, 4096], "size of I/O 0")]:
        with pytest.raises(ValueError, match=culprit):
            world.run("base", arrival, offset, np.array(size, dtype=np.uint32), write)
    with pytest.raises(ValueError, match="offset of I/O 1"):
        world.run(
            "base", arrival, np.array([0, 2**64 - 1], dtype=np.uint64), np.array([4096, 4096], dtype=np.uint32), write
        )


def test_a_failed_command_leaves_no_directory_behind(cli_dir):
    before = sorted(os.listdir(cli_dir))
    p = run("readahead", "train", "--out", "missing/deeper", cwd=cli_dir)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert sorted(os.listdir(cli_dir)) == before, "missing/deeper was left behind"


def test_a_parquet_trace_is_bounded_by_its_rows_before_reading(tmp_path, monkeypatch):
    from iolearn import traces

    cols = {c: np.zeros(100, dtype=np.int64) for c in traces.COLUMNS}
    traces.write_parquet(cols, tmp_path / "t.parquet")
    assert len(traces.read(tmp_path / "t.parquet")["offset"]) == 100
    # 100 rows x 7 columns x 8 bytes = 5,600 bytes in memory, whatever the file's size.
    monkeypatch.setattr(traces, "MAX_TRACE_BYTES", 5_000)
    with pytest.raises(ValueError, match=r"t.parquet: 100 rows .* over the"):
        traces.read(tmp_path / "t.parquet")
