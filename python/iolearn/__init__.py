"""iolearn: machine learning inside the Linux storage stack.

The Python side is the lab: it trains, cross-validates and reports; the models it produces
are iolearn model files that the Rust core (CLI, daemon, simulator) loads unchanged.

>>> import numpy as np, iolearn
>>> X, y = iolearn.datasets.kml_like(50, seed=0)
>>> clf = iolearn.MLP(hidden=(15, 5), epochs=20, batch_size=8, seed=1).fit(X, y)
>>> clf.predict(X[:3]).shape
(3,)
"""

from . import datasets, model_selection
from ._native import READAHEAD_SCHEMA
from .models import MLP, DecisionTree, Model, import_kml, load_model

__all__ = [
    "MLP",
    "DecisionTree",
    "Model",
    "load_model",
    "import_kml",
    "datasets",
    "model_selection",
    "READAHEAD_SCHEMA",
]
__version__ = "0.1.0"
