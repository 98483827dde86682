"""KML's readahead features computed by the Rust policy crate equal a direct NumPy computation
of KML's formulas on a recorded page-event stream (issue 3, must-show 4)."""

import numpy as np
import pytest

from iolearn import _native

WINDOW = 250_000_000  # 0.25 s windows: several per run


def numpy_features(idx: np.ndarray, ra_sectors: int) -> np.ndarray:
    """KML's [R] vector, straight from the formulas."""
    idx = idx[idx <= 1_000_000].astype(np.float64)
    n = len(idx)
    m2 = np.sum((idx - idx.mean()) ** 2)
    rng = max(idx.max() - idx.min(), 1.0)
    var_pop = m2 / n
    var_sample = m2 / (n - 1) if n > 1 else 0.0
    delta = np.mean(np.abs(np.diff(idx))) if n > 1 else 0.0
    return np.array([n, var_pop / rng, var_sample / rng, delta, ra_sectors / 1024])


@pytest.mark.parametrize("workload", ["readrandom", "readseq", "mixgraph", "readrandomwriterandom"])
def test_rust_features_equal_numpy(workload):
    ev = _native.sim_page_events(workload, "nvme", 128, seconds=1.0, db_mb=128, cache_mb=48, seed=3)
    assert len(ev) > 1000
    obs = np.ascontiguousarray(ev[:, :3])
    dev, files = _native.kml_features(obs, window_ns=WINDOW, ra_sectors=256)
    win = obs[:, 0] // WINDOW
    assert dev.shape[0] == win.max() + 1
    for w in range(dev.shape[0]):
        sel = obs[win == w]
        if len(sel) == 0:
            assert np.isnan(dev[w]).all()
            continue
        np.testing.assert_allclose(dev[w], numpy_features(sel[:, 2], 256), rtol=1e-9, atol=1e-9)
        for inode in np.unique(sel[:, 1]):
            row = files[(files[:, 0] == w) & (files[:, 1] == inode)]
            assert row.shape[0] == 1
            want = numpy_features(sel[sel[:, 1] == inode][:, 2], 256)
            np.testing.assert_allclose(row[0, 2:], want, rtol=1e-9, atol=1e-9)


def test_bad_event_arrays_are_refused():
    with pytest.raises(ValueError, match="3 columns"):
        _native.kml_features(np.zeros((4, 2), dtype=np.uint64))
    with pytest.raises(ValueError, match="ordered"):
        _native.kml_features(np.array([[5, 1, 1], [3, 1, 2]], dtype=np.uint64))
    with pytest.raises(ValueError, match="unknown workload"):
        _native.sim_page_events("readsideways")
