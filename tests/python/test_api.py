"""The Python API: scikit-learn-style estimators on numpy arrays, calling the Rust core."""

import csv
import subprocess

import numpy as np
import pytest

import iolearn
from iolearn.model_selection import cross_val_score, kfold, permutation_importance


def test_mlp_fit_predict_proba_save_load(tmp_path):
    X, y = iolearn.datasets.kml_like(100, seed=1)
    clf = iolearn.MLP(hidden=(15, 5), epochs=40, batch_size=8, seed=3).fit(X, y)
    pred = clf.predict(X)
    assert pred.dtype == np.int64 and pred.shape == (400,)
    assert clf.score(X, y) > 0.9
    proba = clf.predict_proba(X)
    assert proba.shape == (400, 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    assert (proba.argmax(axis=1) == pred).all()
    path = tmp_path / "m.iolm"
    clf.save(path, schema="test-v1", classes=[("a", 1), ("b", 2), ("c", 3), ("d", 4)])
    m = iolearn.load_model(path)
    assert m.kind == "mlp" and m.schema == "test-v1" and m.classes[2] == ("c", 3)
    assert (m.predict(X) == pred).all()
    m.expect_schema("test-v1")
    with pytest.raises(ValueError, match="test-v1"):
        m.expect_schema("other")


def test_log_features_separate_small_differences_in_a_heavy_tailed_feature(tmp_path):
    # Two classes at 2.7 and 4.2, a third spread over 60-3000 (KML's mean page distance for
    # readreverse, readseq and random reads): Z-scored as is, the first two are 0.002
    # standard deviations apart; after log1p they separate.
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(2.7, 0.05, 200), rng.normal(4.2, 0.05, 200), rng.uniform(60, 3000, 200)])
    X = np.stack([x, rng.normal(size=600)], axis=1).astype(np.float32)
    y = np.repeat([0, 1, 2], 200)
    kw = dict(hidden=(8,), epochs=30, batch_size=8, seed=1)
    plain = iolearn.MLP(**kw).fit(X, y)
    logged = iolearn.MLP(log_features=[0], **kw).fit(X, y)
    assert logged.score(X, y) > 0.97
    assert logged.score(X, y) > plain.score(X, y) + 0.1
    path = tmp_path / "log.iolm"
    logged.save(path)
    m = iolearn.load_model(path)
    assert m.normaliser_log1p == [True, False]
    assert (m.predict(X) == logged.predict(X)).all()
    with pytest.raises(ValueError, match="log_features"):
        iolearn.MLP(log_features=[5], epochs=1).fit(X, y)


def test_same_seed_same_predictions():
    X, y = iolearn.datasets.kml_like(30, seed=2)
    a = iolearn.MLP(epochs=10, seed=5).fit(X, y).predict_proba(X)
    b = iolearn.MLP(epochs=10, seed=5).fit(X, y).predict_proba(X)
    c = iolearn.MLP(epochs=10, seed=6).fit(X, y).predict_proba(X)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_decision_tree_and_export_text():
    X, y = iolearn.datasets.kml_like(50, seed=0)
    t = iolearn.DecisionTree(max_depth=4, criterion="entropy").fit(X, y)
    assert t.score(X, y) > 0.9
    text = t.export_text()
    assert text.startswith("|--- feature_")
    assert t.predict_proba(X).shape == (200, 4)


def test_regression_and_binary_losses():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = (X @ np.array([1.0, -2.0, 0.5])).astype(np.float32)
    reg = iolearn.MLP(
        hidden=(16,), activation="tanh", loss="mse", lr=0.01, momentum=0.9, epochs=200, batch_size=16
    ).fit(X, y)
    assert np.mean((reg.forward(X)[:, 0] - y) ** 2) < 0.1 * np.var(y)
    yb = (y > 0).astype(np.int64)
    bin_ = iolearn.MLP(
        hidden=(8,),
        activation="relu",
        loss="binary_cross_entropy",
        lr=0.05,
        momentum=0.9,
        epochs=100,
        batch_size=16,
        pos_weight=2.0,
    ).fit(X, yb)
    assert bin_.score(X, yb) > 0.9
    assert bin_.predict_proba(X).shape == (300, 2)
    hinge = iolearn.MLP(
        hidden=(16,),
        activation="relu",
        loss="categorical_hinge",
        penalty=3.0,
        lr=0.01,
        momentum=0.9,
        epochs=50,
        batch_size=16,
    ).fit(X, yb)
    assert hinge.score(X, yb) > 0.85


def test_bad_input_gives_clear_errors(tmp_path):
    X, y = iolearn.datasets.kml_like(10, seed=0)
    with pytest.raises(ValueError, match="2-dimensional"):
        iolearn.MLP().fit(X[:, 0], y)
    with pytest.raises(ValueError, match="rows"):
        iolearn.MLP().fit(X, y[:-1])
    with pytest.raises(ValueError, match="loss must be one of"):
        iolearn.MLP(loss="nope").fit(X, y)
    clf = iolearn.MLP(epochs=1).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :3])
    with pytest.raises(RuntimeError, match="not fitted"):
        iolearn.DecisionTree().predict(X)
    bad = tmp_path / "bad.iolm"
    bad.write_bytes(b"IOLM\x01\x00\x01\x00garbage")
    with pytest.raises(ValueError, match="bad.iolm"):
        iolearn.load_model(bad)
    with pytest.raises(OSError):
        iolearn.load_model(tmp_path / "missing.iolm")


def test_kml_import_matches_reference(kml_dir):
    X, y = iolearn.datasets.load_kml_readahead(kml_dir)
    net = iolearn.import_kml(kml_dir / "nn_arch_data")
    tree = iolearn.import_kml(kml_dir / "nn_arch_data", tree=kml_dir / "decision_tree_model/readahead_model.dt")
    with open(kml_dir / "nn_arch_data/kml_inference.csv") as f:
        rows = list(csv.DictReader(f))
    nn_ref = np.array([int(r["kml_nn_class"]) for r in rows])
    dt_ref = np.array([int(r["kml_dt_class"]) for r in rows])
    assert (net.predict(X, prenormalized=True) == nn_ref).all()
    assert (tree.predict(X, prenormalized=True) == dt_ref).all()
    assert int((net.predict(X, prenormalized=True) == y).sum()) == 390
    assert net.schema == iolearn.READAHEAD_SCHEMA
    assert net.nbytes <= 3916


def test_cross_validation_and_importance():
    X, y = iolearn.datasets.kml_like(60, seed=4)
    folds = kfold(len(y), 10, seed=1)
    assert sorted(np.concatenate(folds).tolist()) == list(range(len(y)))
    scores = cross_val_score(iolearn.DecisionTree(max_depth=6), X, y, cv=10, seed=1)
    assert scores.shape == (10,) and scores.mean() > 0.9
    t = iolearn.DecisionTree(max_depth=6).fit(X, y)
    imp = permutation_importance(t, X, y, n_repeats=3, seed=0)
    # mean |page delta| separates the sequential classes: shuffling it must hurt the most.
    assert imp["shuffled"][3] < imp["baseline"] - 0.2


def test_cli_predict_matches_python(tmp_path, kml_dir):
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    exe = root / "target" / "release" / "iolearn"
    if not exe.exists():
        pytest.skip(f"{exe} not built (make test builds it)")
    out = tmp_path / "kml.iolm"
    subprocess.run([exe, "model", "import-kml", kml_dir / "nn_arch_data", "-o", out], check=True)
    res = subprocess.run(
        [exe, "model", "predict", out, kml_dir / "nn_arch_data/input.csv", "--prenormalized"],
        check=True,
        capture_output=True,
        text=True,
    )
    cli = np.array([int(v) for v in res.stdout.split()])
    X, _ = iolearn.datasets.load_kml_readahead(kml_dir)
    assert (cli == iolearn.load_model(out).predict(X, prenormalized=True)).all()


def test_demo_runs(tmp_path, kml_dir):
    from iolearn import demo

    assert (
        demo.main(
            [
                "--reference",
                str(kml_dir),
                "--out",
                str(tmp_path),
                "--epochs",
                "20",
                "--sim-seconds",
                "1",
                "--eval-seconds",
                "1",
            ]
        )
        == 0
    )
    assert (tmp_path / "readahead_nn.iolm").exists()
    m = iolearn.load_model(tmp_path / "readahead_nn.iolm")
    assert m.schema == iolearn.READAHEAD_SCHEMA
    # The model was trained on normalised rows; the file carries KML's statistics, so raw rows
    # (de-normalised here) give the same classes.
    X, _ = iolearn.datasets.load_kml_readahead(kml_dir)
    mean, std = (np.asarray(v, dtype=np.float64) for v in m.normaliser)
    raw = (X.astype(np.float64) * std + mean).astype(np.float32)
    same = np.mean(m.predict(raw) == m.predict(X, prenormalized=True))
    assert same > 0.99
