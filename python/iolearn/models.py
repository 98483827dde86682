"""Estimators with a scikit-learn feel, backed by the Rust core (``iolearn._native``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _native
from ._validate import check_bool, check_choice, check_float, check_int, check_seed

#: Bounds the estimators accept (scikit-learn validates parameters the same way, at ``fit``).
#: They keep every size the Rust core allocates far from what would exhaust the machine.
MAX_WIDTH = 4096  # neurons in a layer
MAX_LAYERS = 16
MAX_EPOCHS = 1_000_000
MAX_CLASSES = 1024
MAX_DEPTH = 64


def _as_x(X: Any) -> np.ndarray:
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-dimensional (rows x features), got shape {X.shape}")
    return np.ascontiguousarray(X)


def _as_y(y: Any, n: int) -> np.ndarray:
    y = np.asarray(y, dtype=np.float32)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"y must be 1-dimensional (one value per row), got shape {y.shape}")
    if y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} values for {n} rows of X")
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinity")
    return np.ascontiguousarray(y)


def _as_labels(y: np.ndarray) -> int:
    """Class labels must be whole numbers 0..k-1; returns the number of outputs, k (at least
    2: a classifier fitted on one class still has a class to say no with)."""
    if y.size == 0:
        raise ValueError("y is empty")
    if np.any(y < 0) or np.any(y != np.round(y)):
        raise ValueError("y must hold class labels: whole numbers from 0")
    k = int(y.max()) + 1
    if k > MAX_CLASSES:
        raise ValueError(f"y has a label {k - 1}; at most {MAX_CLASSES} classes are supported")
    return max(k, 2)


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
        X = _as_x(X)
        y = _as_y(y, X.shape[0])
        if y.size == 0:
            raise ValueError("X and y are empty")
        return float(np.mean(self.predict(X) == y.astype(np.int64)))

    # File ------------------------------------------------------------------------------
    def save(
        self,
        path: str | os.PathLike[str],
        schema: str | None = None,
        features: Sequence[str] | None = None,
        classes: Sequence[tuple[str, int]] | None = None,
        action_unit: str | None = None,
        normaliser: tuple[Sequence[float], ...] | None = None,
        meta: dict[str, str] | None = None,
    ) -> None:
        """Write the model file (atomically). Optional schema, feature names, class map, the
        Z-score ``(mean, std)`` of the raw features (for a model trained on normalised rows),
        and metadata entries (added to or replacing the model's). Nothing changes in the
        model unless the file is written."""
        if isinstance(features, (str, bytes)):
            raise ValueError("features must be a sequence of names, not one string")
        given = dict(schema=schema, features=features, classes=classes, action_unit=action_unit)
        given.update(normaliser=normaliser, meta=meta or None)
        before = {k: getattr(self._m, k) for k, v in given.items() if v is not None}
        mask_before = self._m.normaliser_log1p
        try:
            if schema is not None:
                self._m.schema = str(schema)
            if features is not None:
                self._m.features = [str(f) for f in features]
            if classes is not None:
                self._m.classes = [(str(a), check_int("class action", b, -(2**63), 2**63 - 1)) for a, b in classes]
            if action_unit is not None:
                self._m.action_unit = str(action_unit)
            if normaliser is not None:
                # (mean, std) or (mean, std, log1p mask); with two, a mask of the same width is
                # kept (the normaliser getter returns two, so save(normaliser=m.normaliser)
                # must not drop it).
                mask = list(normaliser[2]) if len(normaliser) == 3 else self._m.normaliser_log1p
                mean, std = normaliser[0], normaliser[1]
                self._m.normaliser = ([float(v) for v in mean], [float(v) for v in std])
                if mask and len(mask) == len(mean):
                    self._m.normaliser_log1p = [bool(b) for b in mask]
            if meta:
                kept = [(k, v) for k, v in self._m.meta if k not in meta]
                self._m.meta = kept + [(str(k), str(v)) for k, v in meta.items()]
            self._m.save(os.fspath(path))
        except BaseException:
            for k, v in before.items():
                setattr(self._m, k, v)
            if "normaliser" in before and mask_before:
                self._m.normaliser_log1p = mask_before
            raise

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
        # As in scikit-learn, parameters are stored as given and checked by fit.
        self.hidden = hidden
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
        self.log_features = log_features
        self.loss_curve_: list[float] = []

    LOSSES = ("cross_entropy", "binary_cross_entropy", "bce", "mse", "asymmetric_mse", "amse", "categorical_hinge")
    ACTIVATIONS = ("sigmoid", "relu", "tanh")

    def _checked(self, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
        """Every parameter checked into range (a ValueError names the one at fault)."""
        loss = check_choice("loss", self.loss, self.LOSSES)
        binary = loss in ("binary_cross_entropy", "bce")
        regression = loss in ("mse", "asymmetric_mse", "amse")
        hidden = self.hidden
        if isinstance(hidden, (int, np.integer, str)) or not all(
            isinstance(h, (int, np.integer)) and not isinstance(h, bool) for h in hidden
        ):
            raise ValueError(f"hidden must be a sequence of layer widths, got {hidden!r}")
        if len(hidden) > MAX_LAYERS:
            raise ValueError(f"hidden has {len(hidden)} layers; at most {MAX_LAYERS}")
        hidden = [check_int("hidden", h, 1, MAX_WIDTH) for h in hidden]
        if binary and not np.all((y == 0) | (y == 1)):
            raise ValueError("y must be 0 or 1 for binary_cross_entropy")
        if self.n_outputs is not None:
            n_out = check_int("n_outputs", self.n_outputs, 1, MAX_CLASSES)
        elif binary or regression:
            n_out = 1
        else:
            n_out = _as_labels(y)
        if not (binary or regression) and self.n_outputs is not None and y.size and y.max() >= n_out:
            raise ValueError(f"y has a label {int(y.max())} but n_outputs is {n_out}")
        class_weight = None
        if self.class_weight is not None:
            class_weight = [check_float("class_weight", w, 0.0, 1e6) for w in self.class_weight]
            if len(class_weight) != n_out:
                raise ValueError(f"class_weight has {len(class_weight)} entries, the model has {n_out} classes")
            if sum(class_weight) == 0:
                raise ValueError("class_weight is all zeros: nothing would be learnt")
        log_features = None
        if self.log_features is not None:
            log_features = [check_int("log_features", i, 0, X.shape[1] - 1) for i in self.log_features]
            if not check_bool("normalize", self.normalize):
                raise ValueError("log_features needs normalize=True (the transform is part of the normaliser)")
        out_act = self.output_activation or ("sigmoid" if binary else None)
        if out_act is not None:
            check_choice("output_activation", out_act, ("sigmoid", "softmax", "relu", "tanh"))
        rows = max(X.shape[0], 1)
        return dict(
            hidden=hidden,
            activation=check_choice("activation", self.activation, self.ACTIVATIONS),
            n_out=n_out,
            out_act=out_act,
            loss=loss,
            lr=check_float("lr", self.lr, 0.0, 1e3, lo_open=True),
            momentum=check_float("momentum", self.momentum, 0.0, 1.0, hi_open=True),
            # More than the rows would only allocate: a batch is at most the whole set.
            batch_size=min(check_int("batch_size", self.batch_size, 1, 2**31 - 1), rows),
            epochs=check_int("epochs", self.epochs, 1, MAX_EPOCHS),
            seed=check_seed("seed", self.seed),
            normalize=check_bool("normalize", self.normalize),
            class_weights=class_weight,
            pos_weight=check_float("pos_weight", self.pos_weight, 0.0, 1e6, lo_open=True),
            b=check_float("b", self.b, 0.0, 1.0),
            penalty=check_float("penalty", self.penalty, 0.0, 1e6),
            penalized_class=check_int("penalized_class", self.penalized_class, 0, max(n_out - 1, 1)),
            binary=binary,
            log_features=log_features,
        )

    def fit(self, X: Any, y: Any) -> MLP:
        X = _as_x(X)
        y = _as_y(y, X.shape[0])
        if X.shape[0] == 0:
            raise ValueError("X is empty")
        p = self._checked(X, y)
        native, history = _native.fit_mlp(
            X,
            y,
            p["hidden"],
            p["activation"],
            p["n_out"],
            p["out_act"],
            p["loss"],
            p["lr"],
            p["momentum"],
            p["batch_size"],
            p["epochs"],
            p["seed"],
            p["normalize"],
            class_weights=p["class_weights"],
            pos_weight=p["pos_weight"],
            b=p["b"],
            penalty=p["penalty"],
            penalized_class=p["penalized_class"],
            log_odds_bias=p["binary"],
            log_features=p["log_features"],
        )
        history = list(history)
        if not all(np.isfinite(history)) or not np.all(np.isfinite(Model(native).forward(X[:1]))):
            # As scikit-learn's MLP: a diverged fit is an error, not a model every loader rejects.
            raise ValueError(
                f"training diverged (loss became NaN or infinite with lr={p['lr']:g}): "
                "lower lr or momentum, or scale the inputs (normalize=True)"
            )
        self.model_ = Model(native)
        self.loss_curve_ = history
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
        if X.shape[0] == 0:
            raise ValueError("X is empty")
        _as_labels(y)
        depth = None if self.max_depth is None else check_int("max_depth", self.max_depth, 1, MAX_DEPTH)
        self.model_ = Model(
            _native.fit_tree(
                X,
                y,
                depth,
                check_int("min_samples_split", self.min_samples_split, 2, 2**31 - 1),
                check_int("min_samples_leaf", self.min_samples_leaf, 1, 2**31 - 1),
                check_choice("criterion", self.criterion, ("gini", "entropy")),
                check_bool("normalize", self.normalize),
            )
        )
        return self

    def export_text(self, decimals: int = 6) -> str:
        return self._fitted().export_text(check_int("decimals", decimals, 0, 17))
