"""Cross-validation and feature importance, with the same folds as the Rust core."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import _native
from ._validate import check_int, check_seed


def kfold(n: int, k: int = 10, seed: int = 0) -> list[np.ndarray]:
    """Test indices of each of ``k`` shuffled folds."""
    n = check_int("n", n, 0, 100_000_000)
    k = check_int("k", k, 2, max(n, 2))
    return [np.asarray(f, dtype=np.int64) for f in _native.kfold(n, k, check_seed("seed", seed))]


def _xy(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """X as float32 rows and y as one value per row; a length mismatch is an error."""
    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if X.ndim != 2 or y.ndim != 1:
        raise ValueError(f"X must be 2-dimensional and y 1-dimensional, got shapes {X.shape} and {y.shape}")
    if len(y) != len(X):
        raise ValueError(f"X has {len(X)} rows, y {len(y)} values")
    return X, y


def cross_val_score(
    estimator: Any,
    X: np.ndarray,
    y: np.ndarray,
    cv: int = 10,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Accuracy of a fresh clone of ``estimator`` on each of ``cv`` folds."""
    X, y = _xy(X, y)
    scores = []
    folds = kfold(len(y), cv, seed)
    for i, test in enumerate(folds):
        train = np.setdiff1d(np.arange(len(y)), test, assume_unique=True)
        est = estimator.clone().fit(X[train], y[train])
        scores.append(est.score(X[test], y[test]))
        if progress is not None:
            progress(i + 1, len(folds))
    return np.array(scores)


def cross_val_predict(
    estimator: Any,
    X: np.ndarray,
    y: np.ndarray,
    cv: int = 10,
    seed: int = 0,
) -> np.ndarray:
    """Out-of-fold predictions: each row predicted by a fresh clone of ``estimator`` fitted on
    the other ``cv - 1`` folds (the folds of :func:`cross_val_score`)."""
    X, y = _xy(X, y)
    out = np.empty(len(y), dtype=np.int64)
    for test in kfold(len(y), cv, seed):
        train = np.setdiff1d(np.arange(len(y)), test, assume_unique=True)
        out[test] = estimator.clone().fit(X[train], y[train]).predict(X[test])
    return out


def permutation_importance(
    model: Any, X: np.ndarray, y: np.ndarray, n_repeats: int = 5, seed: int = 0
) -> dict[str, Any]:
    """Accuracy with each feature's column shuffled (KML section 4.1's method), computed by the
    Rust core. ``model`` is a fitted estimator or a loaded :class:`iolearn.Model`.

    Returns ``{"baseline": accuracy, "shuffled": per-feature accuracy array}``.
    """
    m = model._fitted() if hasattr(model, "_fitted") else model
    X, y = _xy(X, y)
    if len(y) == 0:
        raise ValueError("X and y are empty")
    if not np.all(np.isfinite(y.astype(np.float64))) or np.any(y < 0) or np.any(y != np.round(y)):
        raise ValueError("y must hold class labels: whole numbers from 0")
    X = np.ascontiguousarray(X)
    y = np.ascontiguousarray(y, dtype=np.float32)
    n_repeats = check_int("n_repeats", n_repeats, 1, 1000)
    base, shuffled = m._m.permutation_importance(X, y, n_repeats, check_seed("seed", seed))
    return {"baseline": base, "shuffled": np.asarray(shuffled)}
