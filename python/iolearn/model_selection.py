"""Cross-validation and feature importance, with the same folds as the Rust core."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import _native


def kfold(n: int, k: int = 10, seed: int = 0) -> list[np.ndarray]:
    """Test indices of each of ``k`` shuffled folds."""
    return [np.asarray(f, dtype=np.int64) for f in _native.kfold(int(n), int(k), int(seed))]


def cross_val_score(
    estimator: Any,
    X: np.ndarray,
    y: np.ndarray,
    cv: int = 10,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Accuracy of a fresh clone of ``estimator`` on each of ``cv`` folds."""
    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y)
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
    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y)
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
    X = np.ascontiguousarray(X, dtype=np.float32)
    y = np.ascontiguousarray(y, dtype=np.float32).reshape(-1)
    base, shuffled = m._m.permutation_importance(X, y, int(n_repeats), int(seed))
    return {"baseline": base, "shuffled": np.asarray(shuffled)}
