"""KML's readahead use case in the simulator: sweep, train, evaluate.

Python drives, Rust computes: every run is ``iolearn._native.sim_closed_loop`` (the simulator
with a controller from ``crates/policy`` deciding once per simulated second).

    iolearn readahead sweep    --out results/readahead   (or python -m iolearn.readahead ...)
    iolearn readahead train    --out results/readahead
    iolearn readahead evaluate --out results/readahead
    iolearn readahead shared   --out results/readahead   (two processes on one database)
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from . import _native, _plot
from ._cli import Parser
from ._cli import run as run_cli
from ._validate import float_arg, int_arg, seed_arg
from .model_selection import cross_val_predict, permutation_importance
from .models import MLP, DecisionTree
from .safeio import atomic_open, output_dir, read_text, write_text

#: KML's training workloads, in its class order (code release ids).
TRAIN_WORKLOADS = ("readrandom", "readrandomwriterandom", "readseq", "readreverse")
#: All six db_bench workloads (updaterandom and mixgraph are never trained on).
ALL_WORKLOADS = TRAIN_WORKLOADS + ("updaterandom", "mixgraph")
#: Mixed pairs: two db_bench instances on one device.
MIXED_PAIRS = (("readrandom", "readseq"), ("readseq", "readreverse"), ("mixgraph", "readseq"))
#: KML's back-to-back sequence.
BACK_TO_BACK = ("readseq", "readrandom", "readreverse", "mixgraph")
#: KML's sweep in 512-byte sectors: 1 2 4 8 16 32, then 64..1024 step 64.
KML_GRID_SECTORS = (1, 2, 4, 8, 16, 32) + tuple(range(64, 1025, 64))
#: The same in read_ahead_kb (sysfs takes whole KiB: 1 sector rounds down to 0, no readahead).
FULL_GRID_KB = tuple(sorted({s // 2 for s in KML_GRID_SECTORS}))
REDUCED_GRID_KB = (4, 16, 64, 128, 256, 512)
#: KML's accuracy with each feature shuffled (10-fold CV; `shared/spec/kml.md` section 3; the
#: two variance columns were reported together as the cumulative mean).
KML_SHUFFLED = {
    "n_transactions": 0.696,
    "page_offset_var_pop_over_range": 0.764,
    "page_offset_var_sample_over_range": 0.764,
    "mean_abs_page_delta": 0.426,
    "ra_sectors_over_1024": 0.891,
}
FEATURES = (
    "n_transactions",
    "page_offset_var_pop_over_range",
    "page_offset_var_sample_over_range",
    "mean_abs_page_delta",
    "ra_sectors_over_1024",
)
#: KML's five and two beyond them (schema ``iolearn-readahead-v2``): the window's direction
#: (net over total page movement, -1 to 1) and regularity (share of jumps equal to the one
#: before, 0 to 1). KML's five see readseq and readreverse alike (the same spread and mean
#: |delta|), and a strided read as a random one.
FEATURES_V2 = FEATURES + ("direction", "regularity")

#: Inputs that do not grow with the file, the device or the load (schema
#: ``iolearn-readahead-v3``, ``iolearn_policy::readahead::scale_free``): direction,
#: regularity, randomness and density of the window's page indices, the readahead in force
#: (log2 KiB / 13), and the device's pages read in and demand misses per page accessed. A model
#: on these is trained to name a readahead value, not a workload ([`train_values`]).
FEATURES_V3 = tuple(_native.READAHEAD_FEATURES_V3)
#: The scale-free inputs every recording of windows holds (``marker_share``, the eighth, was
#: added on 2026-11-28: recordings before hold the seven), and what a v3 model file that names
#: no inputs reads.
FEATURES_V3_FIRST = FEATURES_V3[:7]
#: Every column of a window row, the simulator's (``sim_closed_loop``) and the probe's
#: (``iolearn probe readahead``) alike: each schema's inputs are among them.
FEATURES_ALL = FEATURES_V2 + ("randomness", "density") + FEATURES_V3[4:]
#: A value within this share of a workload's best counts as good as it: the label is vanilla
#: when vanilla is, else the smallest such value (a single sweep run per value cannot rank
#: values closer than that).
LABEL_TIE = 0.03

#: Features the network takes through ``sign(x) ln(1 + |x|)`` before the Z-score: all but the
#: readahead. Z-scored as is, mean |page delta| is 2.7 for readreverse and 4.2 for readseq but
#: 60-3,000 for random reads, so the two scans sit 0.002 standard deviations apart and the
#: per-file network took every readreverse file for readseq (0.63 of the oracle's gain).
LOG_FEATURES = (0, 1, 2, 3)


def _bar(total: int, desc: str):
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="run", leave=False, file=sys.stderr)


def run(workloads, controller="vanilla", device="nvme", seconds=10.0, per_file=False, seed=1, **kw):
    """One simulated run; returns (ops/s per workload, read_ahead_kb trace, feature windows)."""
    return _native.sim_closed_loop(
        list(workloads), controller, device, seconds=seconds, per_file=per_file, seed=seed, **kw
    )


def sweep(
    workloads=TRAIN_WORKLOADS,
    grid_kb=REDUCED_GRID_KB,
    device="nvme",
    seconds=10.0,
    seed=1,
    out: Path | None = None,
    file_features=False,
):
    """Every workload at every static readahead: throughput and per-window features.

    Returns ``(throughput_rows, feature_rows)``; writes ``sweep.csv`` and ``features.csv`` (and
    Parquet versions when pyarrow is installed) under ``out``."""
    rows, feats = [], []
    bar = _bar(len(workloads) * len(grid_kb), "sweep")
    for w in workloads:
        for kb in grid_kb:
            ops, _, f = run([w], f"static:{kb}", device, seconds, seed=seed, file_features=file_features)
            rows.append({"workload": w, "device": device, "ra_kb": kb, "ops_s": ops[0], "seed": seed})
            first = 2 if file_features else 1  # per-file rows carry the workload index too
            for r in f:
                cols = zip(FEATURES_ALL, r[first:], strict=True)
                feats.append({"workload": w, "ra_kb": kb, **{n: float(v) for n, v in cols}})
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    if out is not None:
        output_dir(out)
        tag = f"-{device}" if device != "nvme" else ""
        _write(out / f"sweep{tag}", rows)
        _write(out / (f"features{tag}" + ("-per-file" if file_features else "")), feats)
    return rows, feats


#: Per-file values tried for each member of a mixed pair (the per-file oracle's grid).
MIXED_GRID_KB = (16, 128, 256, 512)


def sweep_mixed(pairs=MIXED_PAIRS, grid_kb=MIXED_GRID_KB, device="nvme", seconds=5.0, seed=1, out=None):
    """Mixed pairs with each member's files held at its own static value: every combination
    of ``grid_kb``. Returns rows ``{pair, ra_kb_0, ra_kb_1, ops_s_0, ops_s_1}``; writes
    ``mixed-sweep.csv`` under ``out``."""
    rows = []
    bar = _bar(len(pairs) * len(grid_kb) ** 2, "mixed sweep")
    for a, b in pairs:
        for ka in grid_kb:
            for kb in grid_kb:
                ops = run([a, b], f"files:{ka},{kb}", device, seconds, seed=seed)[0]
                rows.append({"pair": f"{a}+{b}", "ra_kb_0": ka, "ra_kb_1": kb, "ops_s_0": ops[0], "ops_s_1": ops[1]})
                if bar is not None:
                    bar.update(1)
    if bar is not None:
        bar.close()
    if out is not None:
        output_dir(out)
        _write(out / "mixed-sweep", rows)
    return rows


def best_per_pair(rows, vanilla_kb=128) -> dict[str, tuple[int, int]]:
    """The per-file oracle of each pair: the combination with the best weighted speedup (the
    sum of the members' throughputs, each relative to the vanilla combination)."""
    base = {r["pair"]: r for r in rows if r["ra_kb_0"] == vanilla_kb and r["ra_kb_1"] == vanilla_kb}
    best: dict[str, tuple[float, tuple[int, int]]] = {}
    for r in rows:
        v = base[r["pair"]]
        ws = r["ops_s_0"] / v["ops_s_0"] + r["ops_s_1"] / v["ops_s_1"]
        if r["pair"] not in best or ws > best[r["pair"]][0]:
            best[r["pair"]] = (ws, (int(r["ra_kb_0"]), int(r["ra_kb_1"])))
    return {p: kb for p, (_, kb) in best.items()}


def _write(stem: Path, rows: list[dict]) -> None:
    if not rows:
        return
    with atomic_open(stem.with_suffix(".csv"), "w") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return
    with atomic_open(stem.with_suffix(".parquet")) as fh:
        pq.write_table(pa.Table.from_pylist(rows), fh)


def best_per_workload(rows) -> dict[str, int]:
    """The best static readahead (KiB) of each workload in a sweep."""
    best: dict[str, tuple[float, int]] = {}
    for r in rows:
        if r["workload"] not in best or r["ops_s"] > best[r["workload"]][0]:
            best[r["workload"]] = (r["ops_s"], r["ra_kb"])
    return {w: kb for w, (_, kb) in best.items()}


class CountJitter:
    """Train an estimator on its rows plus `copies` copies whose transaction counts (feature 0)
    are scaled by a random factor in [1/e^spread, e^spread] (seeded).

    Why: the number of page-cache events per window scales with the device's speed, so a
    model trained on one device (KML: NVMe only) learns to read the workload from an absolute
    count that another device does not reproduce; in the simulator the plain network took
    SATA's random windows, which carry half NVMe's transactions, for readreverse (0.45x
    vanilla). Jittering the count teaches it to rely on the access pattern instead."""

    def __init__(self, estimator, copies: int = 9, spread: float = 1.2, seed: int = 0):
        self.estimator = estimator
        self.copies = copies
        self.spread = spread
        self.seed = seed

    def get_params(self, deep=True):
        return {"estimator": self.estimator, "copies": self.copies, "spread": self.spread, "seed": self.seed}

    def clone(self):
        return CountJitter(self.estimator.clone(), self.copies, self.spread, self.seed)

    def fit(self, X, y):
        X = np.asarray(X, dtype=np.float32)
        y = np.asarray(y)
        rng = np.random.default_rng(self.seed)
        xs, ys = [X], [y]
        for _ in range(self.copies):
            Z = X.copy()
            Z[:, 0] *= np.exp(rng.uniform(-self.spread, self.spread, len(Z))).astype(np.float32)
            xs.append(Z)
            ys.append(y)
        self.estimator.fit(np.concatenate(xs), np.concatenate(ys))
        return self

    def predict(self, X):
        return self.estimator.predict(X)

    def score(self, X, y):
        return self.estimator.score(X, y)

    def save(self, path, **kw):
        self.estimator.save(path, **kw)


def least_regret_actions(rows, y_true, y_pred, workloads=TRAIN_WORKLOADS) -> list[int]:
    """The readahead (KiB) to set for each predicted class: the sweep value with the least
    expected loss, weighing each true workload by how often the model's out-of-fold
    predictions of that class really were it. Loss of a value for a workload: the share of
    its best throughput it gives up (``1 - ops / best``, from the sweep ``rows``).

    With a perfect classifier this is KML's map (each class's best value). When two classes
    are confused, it settles on the value that hurts least: readseq's curve is flat from
    256 KiB (512 KiB costs it 0.3%) while readreverse keeps rising (256 KiB costs it 11%),
    so a readseq prediction that is sometimes readreverse gets 512 KiB."""
    ops: dict[str, dict[int, float]] = {}
    for r in rows:
        ops.setdefault(r["workload"], {})[int(r["ra_kb"])] = float(r["ops_s"])
    grid = sorted(set.intersection(*(set(ops[w]) for w in workloads)))
    loss = np.array([[1.0 - ops[w][kb] / max(ops[w].values()) for kb in grid] for w in workloads])
    actions = []
    for c in range(len(workloads)):
        truth = np.bincount(np.asarray(y_true)[np.asarray(y_pred) == c], minlength=len(workloads))
        weights = truth / truth.sum() if truth.sum() else np.eye(len(workloads))[c]
        actions.append(grid[int(np.argmin(weights @ loss))])
    return actions


def train(
    rows, feats, out: Path, seed=0, epochs=100, suffix="", jitter=True, workloads=TRAIN_WORKLOADS, features=FEATURES
):
    """Train KML's 5-15-5-4 network and a tree on the sweep's feature windows; label = the
    workload; action = the readahead of least expected regret given the 10-fold CV confusion
    ([`least_regret_actions`]; each class's best value when the model never errs). The
    network trains with [`CountJitter`] unless `jitter` is false. ``features``: KML's five
    (``FEATURES``, schema ``kml-readahead-v1``; then KML's own recipe is trained too) or
    ``FEATURES_V2`` (``iolearn-readahead-v2``; input width 7). Returns a report dict."""
    best = best_per_workload(rows)
    missing = [w for w in workloads if w not in best]
    if missing:
        raise ValueError(f"the sweep has no rows for {', '.join(missing)} (run the sweep again)")
    unknown = sorted({f["workload"] for f in feats} - set(workloads))
    if unknown:
        raise ValueError(f"the feature windows name unknown workloads: {', '.join(map(str, unknown))}")
    if tuple(features) not in (FEATURES, FEATURES_V2):
        raise ValueError(f"features: KML's five or those and direction, regularity, got {features}")
    features = tuple(features)
    X = np.array([[f[n] for n in features] for f in feats], dtype=np.float32)
    y = np.array([workloads.index(f["workload"]) for f in feats])
    # KML's features are counts and page distances spanning orders of magnitude: the network
    # sees them through log1p before the Z-score (see `LOG_FEATURES`).
    nn = MLP(hidden=(15, 5), lr=0.01, momentum=0.99, batch_size=8, epochs=epochs, seed=seed, log_features=LOG_FEATURES)
    if jitter:
        nn = CountJitter(nn, seed=seed)
    dt = DecisionTree(max_depth=9)
    oof = {"nn": cross_val_predict(nn, X, y, cv=10, seed=seed), "dt": cross_val_predict(dt, X, y, cv=10, seed=seed)}
    classes = {k: list(zip(workloads, least_regret_actions(rows, y, p, workloads))) for k, p in oof.items()}
    report = {
        "rows": len(y),
        "nn_cv": float((oof["nn"] == y).mean()),
        "dt_cv": float((oof["dt"] == y).mean()),
        "kml_reported": {"nn_cv": 0.955, "dt_cv": 0.754, "shuffled_accuracy": KML_SHUFFLED},
        "best_per_class": [(w, best[w]) for w in workloads],
        "classes": classes["nn"],
        "dt_classes": classes["dt"],
        "nn_confusion": _confusion(y, oof["nn"], len(workloads)),
        "dt_confusion": _confusion(y, oof["dt"], len(workloads)),
        "count_jitter": bool(jitter),
        "features": list(features),
    }
    output_dir(out)
    # KML's own recipe, as its release trains it (`shared/spec/kml.md` section 3), for the
    # comparison: raw features Z-scored, 5-15-5-4 sigmoid, SGD lr 0.01 momentum 0.99, batch 1,
    # no count jitter, and each class mapped to its workload's best static value.
    # Per device only (the per-file model is iolearn's).
    models = [(nn, "nn"), (dt, "dt")]
    if not suffix and features == FEATURES:
        kml = MLP(hidden=(15, 5), lr=0.01, momentum=0.99, batch_size=1, epochs=epochs, seed=seed)
        report["kml_recipe_cv"] = float((cross_val_predict(kml, X, y, cv=10, seed=seed) == y).mean())
        classes["kml"] = [(w, best[w]) for w in workloads]
        models.append((kml, "kml"))
    for est, key in models:
        name = f"readahead_{key}{suffix}.iolm"
        est.fit(X, y)
        if est is nn:
            imp = permutation_importance(getattr(nn, "estimator", nn), X, y, n_repeats=5, seed=seed)
            report["nn_baseline_accuracy"] = imp["baseline"]
            report["nn_shuffled_accuracy"] = dict(zip(features, map(float, imp["shuffled"])))
        est.save(
            out / name,
            schema=_native.READAHEAD_SCHEMA if features == FEATURES else _native.READAHEAD_SCHEMA_V2,
            features=features,
            classes=classes[key],
            action_unit="read_ahead_kb",
            # The controller falls back to the default readahead outside this range.
            meta=training_range(X),
        )
    write_text(out / f"train{suffix}.json", json.dumps(report, indent=2))
    return report


def _train_v2(rows, out: Path, seed: int, rep: dict, rep_file: dict):
    """The two features beyond KML's next to KML's five: the same windows, the same recipes
    (``*_v2`` models); prints both cross-validations. A sweep written before the features
    existed has no columns for them: said, and skipped."""
    header = read_text(out / "features.csv", MAX_CSV_BYTES).split("\n", 1)[0].strip().split(",")
    if not set(FEATURES_V2) <= set(header):
        print("features.csv has no direction/regularity columns (an older sweep): v2 models not trained")
        return
    print("with direction and regularity (iolearn-readahead-v2), 10-fold CV:")
    for label, csv_name, suffix, kml in (
        ("per device", "features.csv", "_v2", rep),
        ("per file", "features-per-file.csv", "_file_v2", rep_file),
    ):
        feats = _read(out / csv_name, ("workload", *FEATURES_V2))
        v2 = train(rows, feats, out, seed=seed, suffix=suffix, features=FEATURES_V2)
        print(
            f"  {label:<11} network {kml['nn_cv'] * 100:.1f}% -> {v2['nn_cv'] * 100:.1f}%, "
            f"tree {kml['dt_cv'] * 100:.1f}% -> {v2['dt_cv'] * 100:.1f}%; readseq taken for readreverse "
            f"or back: {_scan_confusion(kml)} -> {_scan_confusion(v2)} windows"
        )


def _scan_confusion(rep: dict) -> int:
    """Windows of readseq the network took for readreverse and of readreverse for readseq
    (10-fold CV)."""
    m, w = rep["nn_confusion"], list(TRAIN_WORKLOADS)
    s, r = w.index("readseq"), w.index("readreverse")
    return m[s][r] + m[r][s]


def _ratios_to_vanilla(rows, vanilla_kb: int = 128) -> dict[str, dict[int, list[float]]]:
    """Each workload's runs of a sweep (told apart by ``seed``) as ratios to vanilla's run of
    the same seed, per value."""
    runs: dict[str, dict[object, dict[int, float]]] = {}
    for r in rows:
        runs.setdefault(r["workload"], {}).setdefault(r.get("seed", 0), {})[int(r["ra_kb"])] = float(r["ops_s"])
    out: dict[str, dict[int, list[float]]] = {}
    for w, by_seed in runs.items():
        ratios = out.setdefault(w, {})
        for ops in by_seed.values():
            if vanilla_kb not in ops or ops[vanilla_kb] <= 0:
                raise ValueError(f"the sweep has no run of {w} at {vanilla_kb} KiB to compare with")
            for kb, v in ops.items():
                ratios.setdefault(kb, []).append(v / ops[vanilla_kb])
    return out


def label_values(rows, vanilla_kb: int = 128, tie: float = LABEL_TIE) -> dict[str, int]:
    """Each workload's readahead to learn from a sweep's rows (one or more runs of each value,
    told apart by ``seed``): vanilla unless a value beat it by more than ``tie`` in most runs
    (more than half; each run against vanilla's run of the same seed), and of the values that
    did, the smallest whose median gain is within ``tie`` of the best one's (the cheapest in
    memory). One run a value cannot tell a 5% gain from noise, so with two runs both must
    agree; with three, one disturbed run neither makes a label nor vetoes one (on the kernel
    one repeat's 256-4096 KiB runs of fio's sequential reader fell to 0.54-0.83x while the
    other two gained 11-33%, and a rule of every run labelled it 16 KiB)."""
    out = {}
    for w, ratios in _ratios_to_vanilla(rows, vanilla_kb).items():
        sure = {kb: statistics.median(xs) for kb, xs in ratios.items() if 2 * sum(x > 1 + tie for x in xs) > len(xs)}
        if not sure:
            out[w] = vanilla_kb
            continue
        best = max(sure.values())
        out[w] = min(kb for kb, m in sure.items() if m >= best * (1 - tie))
    return out


def tied_values(rows, values, tie: float = LABEL_TIE) -> dict[str, list[int]]:
    """Each workload's values among ``values`` whose median run (each against vanilla's run of
    the same seed) is within ``tie`` of the best of them: every answer the sweep cannot tell
    from the best, so every one is right for the workload's windows."""
    out = {}
    for w, ratios in _ratios_to_vanilla(rows).items():
        med = {kb: statistics.median(xs) for kb, xs in ratios.items() if kb in values}
        best = max(med.values(), default=0.0)
        out[w] = sorted(kb for kb, m in med.items() if m >= best * (1 - tie))
    return out


def v3_features_fault(names) -> str | None:
    """What is wrong with ``names`` as the inputs of a scale-free (v3) model, which must be some
    of ``FEATURES_V3``, each once: the names that are none of them, or "a repeat or an empty
    list"; ``None`` when nothing is (``--v3-features`` and [`train_values`] check alike)."""
    names = list(names)
    wrong = [n for n in names if n not in FEATURES_V3]
    if wrong or not names or len(set(names)) != len(names):
        return ", ".join(wrong) or "a repeat or an empty list"
    return None


def train_values(
    rows,
    feats,
    out: Path | None,
    seed=0,
    epochs=100,
    suffix="_v3",
    tie=LABEL_TIE,
    groups: dict | None = None,
    features=None,
    tied: str = "vanilla",
) -> dict:
    """A scale-free model (``features``, of ``FEATURES_V3``, default every one the windows hold;
    schema ``iolearn-readahead-v3``, whose
    file names the inputs it reads, so the tuner gives it those) that names the
    readahead value itself: each window is labelled with its workload's value
    ([`label_values`]) whatever value it ran under, so the model learns where to go from where
    it is. A network (n-15-5-k, n inputs) and a tree; each class is a value, its action that value.

    The report's ``held_out`` is the estimate for workloads the model never saw: each workload
    in turn is left out of training with every workload of its group (``groups``: workload ->
    group name; default each its own), so a near twin (readrandom beside
    readrandomwriterandom) does not answer for it, and its windows under vanilla are decided
    by the model trained on the rest; the value chosen most often is scored on the workload's
    own sweep (throughput over vanilla's, and the share of the best value's gain).

    ``tied``: how a workload whose sweep cannot rank some values (within ``tie`` of its best)
    teaches the model. ``vanilla``: its label alone ([`label_values`]: vanilla where vanilla
    is among them). ``every``: each of its windows once for every such value ([`tied_values`]),
    so a workload for which 64 and 128 KiB are as good does not pull the model to 128 where
    the workloads beside it in the inputs need 64. Writes
    ``readahead{suffix}.iolm`` (network) and ``readahead{suffix}_dt.iolm`` (tree) under ``out``
    unless it is None."""
    if features is None:
        features = tuple(k for k in FEATURES_V3 if feats and k in feats[0])
    features = tuple(features)
    if v3_features_fault(features) is not None:
        raise ValueError(
            f"features: want some of {', '.join(FEATURES_V3)}, each once; got {', '.join(features) or 'none'}"
        )
    absent = [n for n in features if feats and n not in feats[0]]
    if absent:
        raise ValueError(
            f"features: the windows have no {', '.join(absent)} (recorded before that input existed: "
            "record them again, or train on the others)"
        )
    labels = label_values(rows, tie=tie)
    feats = [f for f in feats if f["workload"] in labels]
    workloads = sorted({f["workload"] for f in feats})
    if len(workloads) < 2:
        raise ValueError(f"training needs windows of two workloads or more, got {len(workloads)}")
    values = sorted({labels[w] for w in workloads})
    if len(values) < 2:
        raise ValueError(
            f"every training workload's best value is {values[0]} KiB: nothing to learn (add workloads that want "
            "another value, or hold that value with --controller static)"
        )
    if tied not in ("vanilla", "every"):
        raise ValueError(f"tied: want vanilla or every, got {tied!r}")
    answers = tied_values(rows, values, tie) if tied == "every" else {w: [labels[w]] for w in workloads}
    # One row per window and right answer (one answer a window, but with tied="every").
    pairs = [(f, a) for f in feats for a in answers[f["workload"]]]
    feats = [f for f, _ in pairs]
    X = np.array([[f[n] for n in features] for f in feats], dtype=np.float32)
    if not np.isfinite(X).all():
        raise ValueError("a feature window holds a value that is not finite")
    y = np.array([values.index(a) for _, a in pairs])
    group = np.array([f["workload"] for f in feats])
    kb = np.array([int(f["ra_kb"]) for f in feats])
    # A single class: nothing to learn, every window gets that value.
    make = {
        "nn": lambda: MLP(hidden=(15, 5), lr=0.01, momentum=0.9, batch_size=8, epochs=epochs, seed=seed),
        "dt": lambda: DecisionTree(max_depth=6, min_samples_leaf=8),
    }
    # Each value's median run (one run a value, or several with their seeds).
    runs: dict[tuple[str, int], list[float]] = {}
    for r in rows:
        runs.setdefault((r["workload"], int(r["ra_kb"])), []).append(float(r["ops_s"]))
    sweep = {k: statistics.median(v) for k, v in runs.items()}
    missing = sorted({(w, v) for w in workloads for v in (*values, 128)} - set(sweep))
    if missing:
        raise ValueError(f"the sweep has no run of {', '.join(f'{w} at {v} KiB' for w, v in missing)}")
    groups = groups or {}
    family = np.array([groups.get(w, w) for w in group])
    held_out = {k: [] for k in make}
    for w in workloads:
        train = family != groups.get(w, w)
        test = (group == w) & (kb == 128)
        if not test.any():
            test = group == w
        for k, new in make.items():
            if len(set(y[train])) < 2:
                chosen = values[int(y[train][0])] if train.any() else 128
            else:
                pred = new().fit(X[train], y[train]).predict(X[test])
                chosen = values[int(np.bincount(pred, minlength=len(values)).argmax())]
            best = max(v for (ww, _), v in sweep.items() if ww == w)
            vanilla, got = sweep[(w, 128)], sweep[(w, chosen)]
            gain = best / vanilla - 1
            held_out[k].append({
                "workload": w, "label_kb": labels[w], "chosen_kb": chosen, "x_vanilla": got / vanilla,
                "best_x_vanilla": best / vanilla, "share": (got / vanilla - 1) / gain if gain > 0.10 else None,
            })  # fmt: skip
    report = {
        "rows": len(y),
        "features": list(features),
        "labels_kb": labels,
        "classes_kb": values,
        "held_out": held_out,
        "groups": {w: groups.get(w, w) for w in workloads},
        "tie": tie,
        "tied": tied,
    }
    if tied == "every":
        report["tied_kb"] = {w: answers[w] for w in workloads}
    for k in make:
        xs = [h["x_vanilla"] for h in held_out[k]]
        report[f"{k}_held_out_worst"] = min(xs)
        report[f"{k}_held_out_median"] = statistics.median(xs)
    if out is not None:
        output_dir(out)
        for k, new in make.items():
            est = new().fit(X, y)
            est.save(
                out / (f"readahead{suffix}.iolm" if k == "nn" else f"readahead{suffix}_dt.iolm"),
                schema=_native.READAHEAD_SCHEMA_V3,
                features=features,
                classes=[(f"{v}KiB", v) for v in values],
                action_unit="read_ahead_kb",
                meta=training_range(X),
            )
        write_text(out / f"train{suffix}.json", json.dumps(report, indent=2))
    return report


def print_held_out(report: dict) -> None:
    """The held-out table of [`train_values`]."""
    print(f"{'held-out workload':<26}{'label':>7}{'nn':>7}{'x van':>7}{'dt':>7}{'x van':>7}{'best':>7}")
    for a, b in zip(report["held_out"]["nn"], report["held_out"]["dt"]):
        print(
            f"{a['workload']:<26}{a['label_kb']:>7}{a['chosen_kb']:>7}{a['x_vanilla']:>7.2f}"
            f"{b['chosen_kb']:>7}{b['x_vanilla']:>7.2f}{a['best_x_vanilla']:>7.2f}"
        )


def training_range(X) -> dict[str, str]:
    """Model metadata recording each feature's training range (``feature_min``,
    ``feature_max``: comma-separated, in feature order)."""
    X = np.asarray(X, dtype=np.float64)
    return {
        "feature_min": ",".join(repr(float(v)) for v in X.min(axis=0)),
        "feature_max": ",".join(repr(float(v)) for v in X.max(axis=0)),
    }


def _confusion(y_true, y_pred, n: int) -> list[list[int]]:
    """Rows: true class; columns: predicted class."""
    m = np.zeros((n, n), dtype=int)
    np.add.at(m, (np.asarray(y_true), np.asarray(y_pred)), 1)
    return m.tolist()


def evaluate(out: Path, workloads, device="nvme", seconds=10.0, oracle: dict[str, int] | None = None, seed=1):
    """Vanilla (128 KiB) vs the trained network and tree (per device), the network behind the
    guardrail, the online learner (no model, behind the guardrail), LEAP, and the oracle static
    value. The guarded runs judge by the application's ops per window, the signal db_bench
    reports."""
    table = []
    for w in workloads:
        vanilla = run([w], "vanilla", device, seconds, seed=seed)[0][0]
        row = {"workload": w, "device": device, "vanilla": vanilla}
        for name in ("nn", "dt"):
            row[name] = run([w], str(out / f"readahead_{name}.iolm"), device, seconds, seed=seed)[0][0]
        row["leap"] = run([w], "leap", device, seconds, seed=seed)[0][0]
        if (out / "readahead_kml.iolm").exists():
            row["kml"] = run([w], str(out / "readahead_kml.iolm"), device, seconds, seed=seed)[0][0]
        guarded = {"guard": True, "app_signal": True}
        row["nn_guard"] = run([w], str(out / "readahead_nn.iolm"), device, seconds, seed=seed, **guarded)[0][0]
        row["online"] = run([w], "online", device, seconds, seed=seed, **guarded)[0][0]
        if (out / "readahead_nn_file.iolm").exists():
            row["nn_file"] = run([w], str(out / "readahead_nn_file.iolm"), device, seconds, True, seed=seed)[0][0]
        if oracle and w in oracle:
            row["oracle"] = run([w], f"static:{oracle[w]}", device, seconds, seed=seed)[0][0]
        table.append(row)
    return table


def gain_captured(row: dict, key: str) -> float:
    """Fraction of the oracle's gain over vanilla that `key` captures (1.0 = all of it)."""
    gain = row["oracle"] - row["vanilla"]
    if abs(gain) < 1e-9 * max(row["vanilla"], 1.0):
        return 1.0 if row[key] >= row["vanilla"] * 0.98 else 0.0
    return (row[key] - row["vanilla"]) / gain


def evaluate_mixed(out: Path, pairs, device="nvme", seconds=10.0, seed=1, oracle=None):
    """Two workloads on one device at once: vanilla vs the network per device vs per file (vs
    the per-file oracle: `oracle` maps the pair to its members' static values). Throughput of
    each member."""
    table = []
    for a, b in pairs:
        row = {"pair": f"{a}+{b}", "device": device}
        row["vanilla"] = run([a, b], "vanilla", device, seconds, seed=seed)[0]
        row["per_device"] = run([a, b], str(out / "readahead_nn.iolm"), device, seconds, seed=seed)[0]
        row["per_file"] = run([a, b], str(out / "readahead_nn_file.iolm"), device, seconds, True, seed=seed)[0]
        if oracle and row["pair"] in oracle:
            ka, kb = oracle[row["pair"]]
            row["oracle"] = run([a, b], f"files:{ka},{kb}", device, seconds, seed=seed)[0]
            row["oracle_kb"] = (ka, kb)
        table.append(row)
    return table


def weighted_speedup(row: dict, key: str) -> float:
    """Sum of the members' throughputs, each relative to vanilla (2.0 = vanilla)."""
    return sum(p / v for p, v in zip(row[key], row["vanilla"]))


def evaluate_back_to_back(out: Path, sequence, device="nvme", seconds=10.0, seed=1):
    """KML's back-to-back runs: the workloads one after another on one database."""
    v = run(sequence, "vanilla", device, seconds, seed=seed, back_to_back=True)[0]
    n = run(sequence, str(out / "readahead_nn.iolm"), device, seconds, seed=seed, back_to_back=True)[0]
    return [{"workload": w, "vanilla": a, "nn": b} for w, a, b in zip(sequence, v, n)]


def main(argv=None) -> int:
    ap = Parser(prog="iolearn readahead", description=__doc__.splitlines()[0])
    ap.add_argument(
        "command",
        choices=["sweep", "train", "evaluate", "all", "online", "shared"],
        help="online: the online learner through phase changes (no model, no sweep of its own); "
        "shared: two processes on one database, decisions per device, file and description "
        "(needs train's models in --out)",
    )
    ap.add_argument("--out", type=Path, default=Path("results/readahead"))
    ap.add_argument("--device", default="nvme", choices=["nvme", "sata"], help="the simulated device of the sweep")
    ap.add_argument(
        "--seconds", type=float_arg(0.01, 3600.0), default=5.0, help="simulated seconds per sweep run (0.01 to 3600)"
    )
    ap.add_argument(
        "--eval-seconds",
        type=float_arg(0.01, 3600.0),
        default=30.0,
        help="simulated seconds per evaluation run (controllers start at vanilla: short runs understate them)",
    )
    ap.add_argument("--full-grid", action="store_true", help="KML's 20-value grid instead of 6 values")
    ap.add_argument("--seed", type=seed_arg(), default=1)
    ap.add_argument(
        "--seeds",
        type=int_arg(1, 100),
        default=3,
        help="shared: seeds run per pair, from --seed (1 to 100)",
    )
    ap.add_argument(
        "--phase-seconds",
        type=float_arg(1.0, 3600.0),
        default=120.0,
        help="online: simulated seconds per phase (1 to 3600)",
    )
    a = ap.parse_args(argv)
    if a.command == "shared":
        # Checked before anything is created under --out.
        for name in ("readahead_nn.iolm", "readahead_nn_file.iolm"):
            if not (a.out / name).is_file():
                ap.error(f"shared: {a.out / name} is missing; run 'iolearn readahead train --out {a.out}' first")
    output_dir(a.out)
    if a.command == "online":
        online_phases(a.out, PHASES, a.device, a.phase_seconds, a.seed)
        return 0
    if a.command == "shared":
        shared(a.out, SHARED_PAIRS, a.device, a.eval_seconds, range(a.seed, a.seed + a.seeds))
        return 0
    grid = FULL_GRID_KB if a.full_grid else REDUCED_GRID_KB
    if a.command in ("sweep", "all"):
        rows, _ = sweep(TRAIN_WORKLOADS, grid, a.device, a.seconds, a.seed, a.out)
        for w, kb in best_per_workload(rows).items():
            print(f"best static readahead for {w:<22} {kb:>5} KiB")
    if a.command in ("sweep", "all"):
        # Per-file windows train the per-file model (a file sees a fraction of the device's events).
        sweep(TRAIN_WORKLOADS, grid, a.device, a.seconds, a.seed, a.out, file_features=True)
        for dev in ("nvme", "sata"):
            sweep(ALL_WORKLOADS, grid, dev, a.seconds, a.seed, a.out / "oracle")
        sweep_mixed(MIXED_PAIRS, MIXED_GRID_KB, "nvme", a.seconds, a.seed, a.out / "oracle")
    if a.command in ("train", "all"):
        rows = _read(a.out / "sweep.csv")
        rep = train(rows, _read(a.out / "features.csv", ("workload", *FEATURES)), a.out, seed=a.seed)
        rep_file = train(
            rows, _read(a.out / "features-per-file.csv", ("workload", *FEATURES)), a.out, seed=a.seed, suffix="_file"
        )
        print(
            f"10-fold CV: network {rep['nn_cv'] * 100:.1f}%, KML's recipe {rep['kml_recipe_cv'] * 100:.1f}% "
            f"(KML 95.5%), tree {rep['dt_cv'] * 100:.1f}% (KML 75.4%)"
        )
        print("class -> read_ahead_kb (best static value; least expected regret for the network):")
        for (w, best), (_, kb) in zip(rep["best_per_class"], rep["classes"]):
            print(f"  {w:<24}{best:>6}{kb:>6}")
        print(
            f"permutation importance (accuracy with the feature shuffled; baseline {rep['nn_baseline_accuracy']:.3f}):"
        )
        for name, acc in rep["nn_shuffled_accuracy"].items():
            print(f"  {name:<36}{acc:>7.3f}   KML {KML_SHUFFLED[name]:.3f}")
        _train_v2(rows, a.out, a.seed, rep, rep_file)
    if a.command in ("evaluate", "all"):
        return 0 if report(a.out, a.eval_seconds, a.seed) else 3
    return 0


SEQUENTIAL = ("readseq", "readreverse")

#: Two processes on one database: a scan beside random reads (the case one value per file
#: cannot serve), and a scan beside a mix.
SHARED_PAIRS = (
    ("readseq", "readrandom"),
    ("readreverse", "readrandom"),
    ("readseq", "mixgraph"),
    ("readseq", "readrandomwriterandom"),
)
#: Values the oracles of a shared run are chosen among (per device, and per process: every
#: combination).
SHARED_GRID_KB = (16, 32, 64, 128, 256, 512, 1024)


def shared(out: Path, pairs=SHARED_PAIRS, device="nvme", seconds=30.0, seeds=range(1, 4)) -> list[dict]:
    """Two processes on one database, each reading every file its own way: the models of
    `out` deciding per device, per file and per open file description (process and file),
    against vanilla, the best static value per device and the per-description oracle (each
    process's own static value). The oracles are chosen by sweeps with another seed than the
    runs they are compared with. Prints the weighted speedups (each process's throughput
    relative to its own under vanilla, averaged: 1.0 = vanilla), medians over `seeds` with
    the range, and writes `shared.csv`."""
    nn, nn_file = str(out / "readahead_nn.iolm"), str(out / "readahead_nn_file.iolm")
    configs = {
        "per_device": (nn, {}),
        "per_file": (nn_file, {"scope": "file"}),
        "per_description": (nn_file, {"scope": "description"}),
        "per_description_guard": (nn_file, {"scope": "description", "guard": True}),
    }
    seeds = list(seeds)
    grid_runs = 1 + len(SHARED_GRID_KB) * (1 + len(SHARED_GRID_KB))  # vanilla, statics, pairs
    bar = _bar(len(pairs) * (grid_runs + len(seeds) * (len(configs) + 3)), "shared")

    def go(pair, spec, seed, secs, **kw):
        ops = run(list(pair), spec, device, secs, seed=seed, shared_db=True, **kw)[0]
        if bar is not None:
            bar.update(1)
        return ops

    def ws(ops, van):
        # A member that did nothing under vanilla has no ratio: NaN, not a crash.
        return sum(o / v if v > 0 else float("nan") for o, v in zip(ops, van)) / len(van)

    rows = []
    for pair in pairs:
        # The oracles: chosen on another seed, shorter runs.
        tune_seed, tune_secs = seeds[0] + 1000, min(seconds, 10.0)
        van = go(pair, "vanilla", tune_seed, tune_secs)
        device_kb = max(SHARED_GRID_KB, key=lambda kb: ws(go(pair, f"static:{kb}", tune_seed, tune_secs), van))
        desc_kb = max(
            ((a, b) for a in SHARED_GRID_KB for b in SHARED_GRID_KB),
            key=lambda ab: ws(go(pair, f"files:{ab[0]},{ab[1]}", tune_seed, tune_secs), van),
        )
        for seed in seeds:
            van = go(pair, "vanilla", seed, seconds)
            row = {
                "pair": "+".join(pair),
                "seed": seed,
                "device_oracle_kb": device_kb,
                "oracle_kb": "/".join(map(str, desc_kb)),
            }
            row["device_oracle"] = ws(go(pair, f"static:{device_kb}", seed, seconds), van)
            row["oracle"] = ws(go(pair, f"files:{desc_kb[0]},{desc_kb[1]}", seed, seconds), van)
            for name, (spec, kw) in configs.items():
                row[name] = ws(go(pair, spec, seed, seconds, **kw), van)
            row["vanilla_ops_0"], row["vanilla_ops_1"] = van
            rows.append(row)
    if bar is not None:
        bar.close()
    cols = ("per_device", "per_file", "per_description", "per_description_guard", "device_oracle", "oracle")
    print(f"\nTwo processes on one database ({device}, {seconds:g} simulated s, seeds {seeds[0]}..{seeds[-1]}):")
    print("weighted speedup over vanilla (1.00 = vanilla), median [min, max] over seeds")
    print(f"{'pair':<34}" + "".join(f"{c:>22}" for c in cols))
    for pair in dict.fromkeys(r["pair"] for r in rows):
        sel = [r for r in rows if r["pair"] == pair]
        cells = []
        for c in cols:
            v = sorted(r[c] for r in sel)
            cells.append(f"{statistics.median(v):.2f} [{v[0]:.2f}, {v[-1]:.2f}]")
        print(f"{pair:<34}" + "".join(f"{x:>22}" for x in cells))
    _write(out / "shared", rows)
    return rows


#: The online learner's phase-change run: a workload it gains on, one where vanilla is nearly
#: right, one that wants the most readahead, and the first again.
PHASES = ("readrandom", "readseq", "readreverse", "mixgraph", "readrandom")
#: The values the oracle of each phase is chosen among (the learner's own arms).
ONLINE_GRID_KB = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def online_phases(out: Path, phases=PHASES, device="nvme", seconds=120.0, seed=1) -> list[dict]:
    """The online learner behind the guardrail through back-to-back phases: per phase, its
    throughput against vanilla and against the phase's oracle (the best static value, chosen by
    a sweep with another seed), and a plot of its decisions over time (`online-phases.png`)."""
    guarded = {"guard": True, "app_signal": True}
    learned, trace, _ = run(phases, "online", device, seconds, seed=seed, back_to_back=True, **guarded)
    vanilla = run(phases, "vanilla", device, seconds, seed=seed, back_to_back=True)[0]
    bar = _bar(len(set(phases)) * len(ONLINE_GRID_KB), "oracle sweep")
    best = {}
    for w in sorted(set(phases)):
        scores = []
        for kb in ONLINE_GRID_KB:
            scores.append((run([w], f"static:{kb}", device, min(seconds, 30.0), seed=seed + 1000)[0][0], kb))
            if bar:
                bar.update()
        best[w] = max(scores)[1]
    if bar:
        bar.close()
    rows = []
    for i, w in enumerate(phases):
        # The phase's oracle: its best value held through that phase, after the same history.
        seq = phases[: i + 1]
        o = run(seq, f"static:{best[w]}", device, seconds, seed=seed, back_to_back=True)[0][-1]
        rows.append(
            {
                "phase": i,
                "workload": w,
                "vanilla": vanilla[i],
                "online": learned[i],
                "oracle": o,
                "oracle_kb": best[w],
            }
        )
    print(f"\nOnline learner behind the guardrail, {seconds:g} simulated s per phase ({device}); x vanilla")
    print(f"{'phase':<6}{'workload':<24}{'online':>8}{'oracle':>8}{'oracle KiB':>11}{'gain kept':>11}")
    for r in rows:
        v = r["vanilla"]
        kept = (r["online"] - v) / (r["oracle"] - v) if r["oracle"] > 1.1 * v else float("nan")
        r["gain_kept"] = kept
        print(
            f"{r['phase']:<6}{r['workload']:<24}{r['online'] / v:>8.2f}{r['oracle'] / v:>8.2f}"
            f"{r['oracle_kb']:>11}{kept:>11.2f}"
        )
    _write(out / "online-phases", rows)
    _write(out / "online-trace", [{"time_s": t, "read_ahead_kb": kb} for t, kb in trace])
    plot_online(trace, rows, seconds, out / "online-phases.png")
    return rows


def plot_online(trace, rows: list[dict], seconds: float, path: Path) -> None:
    """The learner's readahead over time, each phase's oracle value dashed."""
    plt = _plot.pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.step([t for t, _ in trace], [kb for _, kb in trace], where="post", label="online learner (guarded)")
    for r in rows:
        t0 = r["phase"] * seconds
        ax.hlines(r["oracle_kb"], t0, t0 + seconds, colors="black", linestyles="dashed", linewidth=1)
        ax.text(t0 + 2, r["oracle_kb"] * 1.15, r["workload"], fontsize=8)
    ax.plot([], [], "k--", linewidth=1, label="phase oracle (static)")
    ax.set_yscale("log", base=2)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("read_ahead_kb")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    _plot.save(fig, path)


def report(out: Path, seconds: float, seed: int) -> bool:
    """Every evaluation, printed and written under `out`; ends with issue 3's goals for the
    per-file network and returns whether they all hold."""
    rows = []
    for dev in ("nvme", "sata"):
        sweep_file = out / "oracle" / ("sweep.csv" if dev == "nvme" else f"sweep-{dev}.csv")
        oracle = best_per_workload(_read(sweep_file))
        rows += evaluate(out, ALL_WORKLOADS, dev, seconds, oracle, seed)
    print(f"\nEvaluation: {seconds:g} simulated s per run; throughput x vanilla (128 KiB); gain = share of the")
    print("oracle's gain over vanilla captured (oracle: best static value of the sweep); +g: behind the guardrail")
    print(
        f"{'device':<7}{'workload':<24}{'vanilla':>10}{'nn':>7}{'nn/file':>8}{'tree':>7}{'kml':>7}{'nn+g':>7}"
        f"{'online':>7}{'leap':>7}{'oracle':>8}{'gain nn':>9}{'gain file':>10}"
    )
    for r in rows:
        v = r["vanilla"]
        r["gain_nn"], r["gain_nn_file"] = gain_captured(r, "nn"), gain_captured(r, "nn_file")
        print(
            f"{r['device']:<7}{r['workload']:<24}{v:>10.0f}{r['nn'] / v:>7.2f}{r['nn_file'] / v:>8.2f}"
            f"{r['dt'] / v:>7.2f}{r.get('kml', float('nan')) / v:>7.2f}{r['nn_guard'] / v:>7.2f}"
            f"{r['online'] / v:>7.2f}{r['leap'] / v:>7.2f}"
            f"{r['oracle'] / v:>8.2f}{r['gain_nn']:>9.2f}{r['gain_nn_file']:>10.2f}"
        )
    _write(out / "evaluate", rows)
    plot_evaluation(rows, out / "evaluate.png")
    mixed_sweep = out / "oracle" / "mixed-sweep.csv"
    pair_oracle = (
        best_per_pair(_read(mixed_sweep, ("pair", "ra_kb_0", "ra_kb_1", "ops_s_0", "ops_s_1")))
        if mixed_sweep.exists()
        else None
    )
    mixed = evaluate_mixed(out, MIXED_PAIRS, "nvme", seconds, seed, pair_oracle)
    print("\nMixed pairs (nvme; each member x vanilla; ws = weighted speedup, the sum, 2.00 = vanilla)")
    print(f"{'pair':<24}{'per device':>16}{'ws':>6}{'per file':>16}{'ws':>6}{'per-file oracle':>26}{'ws':>6}")
    flat = []
    for r in mixed:
        cols = ""
        for k in ("per_device", "per_file", "oracle"):
            if k not in r:
                continue
            rel = [p / v for p, v in zip(r[k], r["vanilla"])]
            tag = f"{r['oracle_kb'][0]}/{r['oracle_kb'][1]} KiB " if k == "oracle" else ""
            cols += f"{tag + f'{rel[0]:.2f} {rel[1]:.2f}':>{26 if k == 'oracle' else 16}}{weighted_speedup(r, k):>6.2f}"
        print(f"{r['pair']:<24}{cols}")
        keys = [k for k in ("vanilla", "per_device", "per_file", "oracle") if k in r]
        flat.append({"pair": r["pair"], **{f"{k}_{i}": r[k][i] for k in keys for i in (0, 1)}})
    _write(out / "mixed", flat)
    b2b = evaluate_back_to_back(out, BACK_TO_BACK, "nvme", seconds, seed)
    print(f"\n{'back to back (nvme)':<24}{'vanilla':>10}{'nn / vanilla':>14}")
    for r in b2b:
        print(f"{r['workload']:<24}{r['vanilla']:>10.0f}{r['nn'] / r['vanilla']:>14.2f}")
    _write(out / "back_to_back", b2b)
    return check_goals(rows, mixed)


def check_goals(rows: list[dict], mixed: list[dict]) -> bool:
    """Issue 3's goals for the per-file network, printed one per line."""
    worst = min(rows, key=lambda r: r["gain_nn_file"])
    seq = [r for r in rows if r["workload"] in SEQUENTIAL]
    worst_seq = min(seq, key=lambda r: r["nn_file"] / r["vanilla"])
    seq_ratio = worst_seq["nn_file"] / worst_seq["vanilla"]
    goals = [
        (
            worst["gain_nn_file"] >= 0.9,
            f"per file, at least 90% of the oracle's gain on every workload "
            f"(lowest {worst['gain_nn_file']:.2f}: {worst['device']} {worst['workload']})",
        ),
        (
            seq_ratio >= 0.98,
            f"per file, never more than 2% below vanilla on a sequential workload "
            f"(lowest {seq_ratio:.3f}x: {worst_seq['device']} {worst_seq['workload']})",
        ),
        (
            all(weighted_speedup(r, "per_file") > weighted_speedup(r, "per_device") for r in mixed),
            "per file beats per device on every mixed pair (weighted speedup "
            + ", ".join(
                f"{weighted_speedup(r, 'per_file'):.2f} vs {weighted_speedup(r, 'per_device'):.2f}" for r in mixed
            )
            + ")",
        ),
    ]
    print("\nGoals (issue 3, per-file KML network):")
    for ok, text in goals:
        print(f"  [{'met' if ok else 'MISSED'}] {text}")
    return all(ok for ok, _ in goals)


def plot_evaluation(rows: list[dict], path: Path) -> None:
    """Bar chart: throughput relative to vanilla per workload, device and controller."""
    plt = _plot.pyplot()
    if plt is None:
        return
    devices = sorted({r["device"] for r in rows})
    keys = [
        ("nn", "KML network"),
        ("nn_file", "network per file"),
        ("dt", "tree"),
        ("kml", "KML's recipe"),
        ("nn_guard", "network, guarded"),
        ("online", "online, guarded"),
        ("leap", "LEAP"),
        ("oracle", "oracle"),
    ]
    fig, axes = plt.subplots(1, len(devices), figsize=(6 * len(devices), 4), squeeze=False)
    for ax, dev in zip(axes[0], devices):
        sub = [r for r in rows if r["device"] == dev]
        x = np.arange(len(sub))
        width = 0.8 / len(keys)
        for i, (k, label) in enumerate(keys):
            ax.bar(x + i * width, [r.get(k, np.nan) / r["vanilla"] for r in sub], width, label=label)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(x + 0.4 - width / 2, [r["workload"] for r in sub], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("throughput / vanilla (128 KiB)")
        ax.set_title(f"{dev} preset")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(keys), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    _plot.save(fig, path)


# The largest sweep or feature file `_read` takes (a full sweep is a few MiB).
MAX_CSV_BYTES = 1 << 30


def _read(path: Path, need: tuple[str, ...] = ("workload", "ra_kb", "ops_s")) -> list[dict]:
    """Rows of a sweep or feature CSV this pipeline wrote. Every column in ``need`` must be
    present; numbers must be finite (throughputs and readahead values also non-negative): a
    corrupt row (ops_s=inf) would map every class to the wrong readahead. Errors name the file,
    the line and the column."""
    if not path.exists():
        raise ValueError(f"{path}: not found (run the sweep first)")
    text = read_text(path, MAX_CSV_BYTES)
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows:
        raise ValueError(f"{path}: no rows")
    missing = [k for k in need if k not in rows[0]]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    for line, r in enumerate(rows, start=2):
        for k, v in r.items():
            if k is None or v is None:
                raise ValueError(f"{path}: line {line}: the number of fields differs from the header")
            try:
                r[k] = int(v)
            except ValueError:
                try:
                    r[k] = float(v)
                except ValueError:
                    pass
        for k in need:
            v = r[k]
            if k in ("workload", "pair"):
                continue
            non_negative = k.startswith(("ops_s", "ra_kb"))
            if not (isinstance(v, (int, float)) and np.isfinite(v) and (v >= 0 or not non_negative)):
                want = "a finite non-negative number" if non_negative else "a finite number"
                raise ValueError(f"{path}: line {line}: {k} {_excerpt(v)} is not {want}")
        for k in ("ops_s_0", "ops_s_1", "ra_kb_0", "ra_kb_1"):
            v = r.get(k)
            if v is not None and not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0):
                raise ValueError(f"{path}: line {line}: {k} {_excerpt(v)} is not a finite non-negative number")
    return rows


def _excerpt(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:40] + "..."


if __name__ == "__main__":
    sys.exit(run_cli(main, "iolearn readahead"))
