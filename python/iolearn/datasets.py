"""Data sets: generated ones (no downloads) and loaders for KML's released reference data."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from . import _native
from .safeio import read_text

#: KML's class ids (code release) and names.
KML_CLASSES = ("readrandom", "readrandomwriterandom", "readseq", "readreverse")


def kml_like(n_per_class: int = 100, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic raw features shaped like KML's readahead data: X (n, 5) float32, y (n,) int64."""
    X, y = _native.kml_like(int(n_per_class), int(seed))
    return X, y.astype(np.int64)


def _numbers(path: Path) -> np.ndarray:
    try:
        v = np.array(read_text(path, 1 << 30).split(), dtype=np.float64)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{path}: contains NaN or infinity")
    return v


def load_kml_readahead(reference: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """KML's labelled, already-normalised readahead rows (``nn_arch_data/input.csv`` and
    ``output.csv``) from a ``shared/reference/kml/readahead`` directory."""
    d = Path(reference) / "nn_arch_data"
    X = _numbers(d / "input.csv")
    y = _numbers(d / "output.csv")
    if X.size != 5 * y.size:
        raise ValueError(f"{d / 'input.csv'}: {X.size} values for {y.size} labels (expected 5 per row)")
    if np.any(y != np.round(y)) or np.any(y < 0) or np.any(y > 3):
        raise ValueError(f"{d / 'output.csv'}: labels must be the classes 0 to 3")
    return X.reshape(-1, 5).astype(np.float32), y.astype(np.int64)
