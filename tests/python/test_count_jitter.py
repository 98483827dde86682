"""CountJitter: the training rows plus copies with scaled transaction counts."""

import numpy as np

import iolearn
from iolearn.readahead import CountJitter


class Recorder:
    def fit(self, X, y):
        self.X, self.y = X, y
        return self


def test_copies_scale_only_the_count_and_keep_labels():
    X = np.array([[100.0, 1.0, 2.0, 3.0, 0.5], [200.0, 4.0, 5.0, 6.0, 0.25]], dtype=np.float32)
    y = np.array([0, 1])
    r = CountJitter(Recorder(), copies=3, spread=1.0, seed=7).fit(X, y).estimator
    assert r.X.shape == (8, 5) and list(r.y) == [0, 1] * 4
    np.testing.assert_array_equal(r.X[:2], X)
    np.testing.assert_array_equal(r.X[2:, 1:], np.tile(X[:, 1:], (3, 1)))
    ratio = r.X[2:, 0] / np.tile(X[:, 0], 3)
    assert np.all((ratio >= np.exp(-1.0) - 1e-6) & (ratio <= np.exp(1.0) + 1e-6))
    assert len(np.unique(ratio)) == 6


def test_jittered_network_ignores_a_count_that_does_not_carry_the_class():
    # Class is decided by feature 3; feature 0 is correlated with the class in training only.
    rng = np.random.default_rng(1)
    n = 400
    y = rng.integers(0, 2, n)
    X = np.zeros((n, 5), dtype=np.float32)
    X[:, 0] = np.where(y == 1, 1000.0, 100.0) * rng.uniform(0.9, 1.1, n)
    X[:, 3] = np.where(y == 1, 5.0, 300.0) * rng.uniform(0.8, 1.2, n)
    X[:, 4] = 0.25
    test = X.copy()
    test[:, 0] = 300.0  # a "slower device": counts between the training clusters
    plain = iolearn.MLP(hidden=(15, 5), epochs=60, batch_size=8, seed=0).fit(X, y)
    jit = CountJitter(iolearn.MLP(hidden=(15, 5), epochs=60, batch_size=8, seed=0), seed=0).fit(X, y)
    assert (jit.predict(test) == y).mean() > 0.95
    assert (jit.predict(test) == y).mean() >= (plain.predict(test) == y).mean()
