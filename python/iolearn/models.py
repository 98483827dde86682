"""Estimators with a scikit-learn feel, backed by the Rust core (``iolearn._native``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _native


def _as_x(X: Any) -> np.ndarray:
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-dimensional (rows x features), got shape {X.shape}")
    return np.ascontiguousarray(X)


def _as_y(y: Any, n: int) -> np.ndarray:
    y = np.asarray(y, dtype=np.float32).reshape(-1)
    if y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} values for {n} rows of X")
    return np.ascontiguousarray(y)


class Model:
    """A loaded or trained iolearn model file: predict, inspect, save."""

    def __init__(self, native: _native.Model):
        self._m = native

    # Prediction -----------------------------------------------------------------------
    def predict(self, X: Any, prenormalized: bool = False) -> np.ndarray:
        """One class index per row (int64)."""
        return self._m.predict(_as_x(X), prenormalized)

    def predict_proba(self, X: Any, prenormalized: bool = False) -> np.ndarray:
        """Class probabilities, shape (rows, classes)."""
        return self._m.predict_proba(_as_x(X), prenormalized)

    def forward(self, X: Any, prenormalized: bool = False) -> np.ndarray:
        """Raw outputs (logits, or regression values), shape (rows, outputs)."""
        return self._m.forward(_as_x(X), prenormalized)

    def score(self, X: Any, y: Any) -> float:
        """Mean accuracy."""
        return float(np.mean(self.predict(X) == np.asarray(y).astype(np.int64)))

    # File ------------------------------------------------------------------------------
    def save(
        self,
        path: str | os.PathLike[str],
        schema: str | None = None,
        features: Sequence[str] | None = None,
        classes: Sequence[tuple[str, int]] | None = None,
        action_unit: str | None = None,
        normaliser: tuple[Sequence[float], Sequence[float]] | None = None,
        meta: dict[str, str] | None = None,
    ) -> None:
        """Write the model file (atomically). Optional schema, feature names, class map, the
        Z-score ``(mean, std)`` of the raw features (for a model trained on normalised rows),
        and metadata entries (added to or replacing the model's)."""
        if schema is not None:
            self._m.schema = schema
        if features is not None:
            self._m.features = list(features)
        if classes is not None:
            self._m.classes = [(str(a), int(b)) for a, b in classes]
        if action_unit is not None:
            self._m.action_unit = action_unit
        if normaliser is not None:
            mean, std = normaliser
            self._m.normaliser = ([float(v) for v in mean], [float(v) for v in std])
        if meta:
            kept = [(k, v) for k, v in self._m.meta if k not in meta]
            self._m.meta = kept + [(str(k), str(v)) for k, v in meta.items()]
        self._m.save(os.fspath(path))

    def to_json(self) -> str:
        return self._m.to_json()

    def expect_schema(self, schema: str) -> None:
        """Raise ValueError unless the model was trained for ``schema``."""
        self._m.expect_schema(schema)

    def export_text(self, decimals: int = 6) -> str:
        """A tree in scikit-learn ``export_text`` style."""
        return self._m.export_text(decimals)

    @property
    def kind(self) -> str:
        return self._m.kind

    @property
    def schema(self) -> str:
        return self._m.schema

    @property
    def classes(self) -> list[tuple[str, int]]:
        return self._m.classes

    @property
    def features(self) -> list[str]:
        return self._m.features

    @property
    def n_features(self) -> int:
        return self._m.n_features

    @property
    def normaliser(self) -> tuple[list[float], list[float]] | None:
        """Z-score ``(mean, std)`` applied to raw input, or None."""
        return self._m.normaliser

    @property
    def normaliser_log1p(self) -> list[bool]:
        """Features the normaliser takes through ``sign(x) ln(1 + |x|)`` first (empty: none)."""
        return self._m.normaliser_log1p

    @property
    def nbytes(self) -> int:
        return self._m.nbytes

    def __repr__(self) -> str:
        return repr(self._m)


def load_model(path: str | os.PathLike[str]) -> Model:
    """Load an iolearn model file (raises ValueError naming the file on a bad one)."""
    return Model(_native.load(os.fspath(path)))


def import_kml(nn_arch_data: str | os.PathLike[str], tree: str | os.PathLike[str] | None = None) -> Model:
    """Import KML's released readahead network, or its decision tree with ``tree=``."""
    return Model(_native.import_kml(os.fspath(nn_arch_data), None if tree is None else os.fspath(tree)))


class _Estimator:
    _params: tuple[str, ...] = ()
    model_: Model | None = None

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._params}

    def set_params(self, **params: Any) -> _Estimator:
        for k, v in params.items():
            if k not in self._params:
                raise ValueError(f"unknown parameter {k!r} for {type(self).__name__}")
            setattr(self, k, v)
        return self

    def clone(self) -> _Estimator:
        return type(self)(**self.get_params())

    def _fitted(self) -> Model:
        if self.model_ is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted yet: call fit(X, y) first")
        return self.model_

    def predict(self, X: Any) -> np.ndarray:
        return self._fitted().predict(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        return self._fitted().predict_proba(X)

    def score(self, X: Any, y: Any) -> float:
        return self._fitted().score(X, y)

    def save(self, path: str | os.PathLike[str], **kw: Any) -> None:
        self._fitted().save(path, **kw)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


class MLP(_Estimator):
    """A multi-layer perceptron trained with SGD + momentum in the Rust core.

    Defaults are KML's readahead network: hidden (15, 5) sigmoid, softmax cross-entropy,
    lr 0.01, momentum 0.99, batch size 1. ``loss`` is one of ``cross_entropy``,
    ``binary_cross_entropy``, ``mse``, ``asymmetric_mse``, ``categorical_hinge``.
    Inputs are Z-score normalised (the statistics are stored in the model) unless
    ``normalize=False``; features listed in ``log_features`` go through
    ``sign(x) ln(1 + |x|)`` first (for counts and distances spanning orders of magnitude).
    """

    _params = (
        "hidden",
        "activation",
        "loss",
        "lr",
        "momentum",
        "batch_size",
        "epochs",
        "seed",
        "normalize",
        "class_weight",
        "pos_weight",
        "b",
        "penalty",
        "penalized_class",
        "n_outputs",
        "output_activation",
        "log_features",
    )

    def __init__(
        self,
        hidden: Sequence[int] = (15, 5),
        activation: str = "sigmoid",
        loss: str = "cross_entropy",
        lr: float = 0.01,
        momentum: float = 0.99,
        batch_size: int = 1,
        epochs: int = 50,
        seed: int = 0,
        normalize: bool = True,
        class_weight: Sequence[float] | None = None,
        pos_weight: float = 1.0,
        b: float = 0.0,
        penalty: float = 1.0,
        penalized_class: int = 1,
        n_outputs: int | None = None,
        output_activation: str | None = None,
        log_features: Sequence[int] | None = None,
    ):
        self.hidden = tuple(hidden)
        self.activation = activation
        self.loss = loss
        self.lr = lr
        self.momentum = momentum
        self.batch_size = batch_size
        self.epochs = epochs
        self.seed = seed
        self.normalize = normalize
        self.class_weight = class_weight
        self.pos_weight = pos_weight
        self.b = b
        self.penalty = penalty
        self.penalized_class = penalized_class
        self.n_outputs = n_outputs
        self.output_activation = output_activation
        self.log_features = None if log_features is None else tuple(log_features)
        self.loss_curve_: list[float] = []

    def fit(self, X: Any, y: Any) -> MLP:
        X = _as_x(X)
        y = _as_y(y, X.shape[0])
        binary = self.loss in ("binary_cross_entropy", "bce")
        regression = self.loss in ("mse", "asymmetric_mse", "amse")
        if self.n_outputs is not None:
            n_out = self.n_outputs
        elif binary or regression:
            n_out = 1
        else:
            n_out = int(y.max()) + 1 if y.size else 1
        out_act = self.output_activation or ("sigmoid" if binary else None)
        native, history = _native.fit_mlp(
            X,
            y,
            list(self.hidden),
            self.activation,
            n_out,
            out_act,
            self.loss,
            float(self.lr),
            float(self.momentum),
            int(self.batch_size),
            int(self.epochs),
            int(self.seed),
            bool(self.normalize),
            class_weights=None if self.class_weight is None else [float(w) for w in self.class_weight],
            pos_weight=float(self.pos_weight),
            b=float(self.b),
            penalty=float(self.penalty),
            penalized_class=int(self.penalized_class),
            log_odds_bias=binary,
            log_features=None if self.log_features is None else [int(i) for i in self.log_features],
        )
        self.model_ = Model(native)
        self.loss_curve_ = list(history)
        return self

    def forward(self, X: Any) -> np.ndarray:
        """Raw outputs (logits or regression values)."""
        return self._fitted().forward(X)


class DecisionTree(_Estimator):
    """A CART classification tree (gini or entropy) built by the Rust core."""

    _params = ("max_depth", "min_samples_split", "min_samples_leaf", "criterion", "normalize")

    def __init__(
        self,
        max_depth: int | None = None,
        min_samples_split: int = 2,
        min_samples_leaf: int = 1,
        criterion: str = "gini",
        normalize: bool = False,
    ):
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.criterion = criterion
        self.normalize = normalize

    def fit(self, X: Any, y: Any) -> DecisionTree:
        X = _as_x(X)
        y = _as_y(y, X.shape[0])
        self.model_ = Model(
            _native.fit_tree(
                X,
                y,
                self.max_depth,
                int(self.min_samples_split),
                int(self.min_samples_leaf),
                self.criterion,
                bool(self.normalize),
            )
        )
        return self

    def export_text(self, decimals: int = 6) -> str:
        return self._fitted().export_text(decimals)
