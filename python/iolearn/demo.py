"""``make demo``: KML's readahead model, reproduced and re-trained on KML's released data.

Until the simulator lands (issue 3) the main job is the ML runtime on the reference data:
import KML's released network and tree, check them against KML's labels, re-train the
5-15-5-4 network and a tree with 10-fold cross-validation, rank the features, and save the
models as iolearn model files.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from . import datasets, import_kml
from ._cli import Parser
from ._cli import run as run_cli
from ._validate import float_arg, int_arg, seed_arg
from .model_selection import cross_val_score, permutation_importance
from .models import MLP, DecisionTree
from .safeio import output_dir

KML_FEATURES = ("n_transactions", "var/range (pop)", "var/range (sample)", "mean |page delta|", "readahead")
# KML's reported accuracy with each feature shuffled (spec kml.md section 3); the two variance
# columns were reported together as "cumulative mean".
KML_SHUFFLED = (0.696, 0.764, 0.764, 0.426, 0.891)


def _bar(label: str):
    try:
        from tqdm import tqdm
    except ImportError:  # progress bars are a nicety, not a dependency of the result
        return None
    return tqdm(total=10, desc=label, unit="fold", leave=False, file=sys.stderr)


def _cv(est, X, y, label: str, seed: int) -> np.ndarray:
    bar = _bar(label)

    def tick(i: int, n: int) -> None:
        if bar is not None:
            bar.update(1)

    scores = cross_val_score(est, X, y, cv=10, seed=seed, progress=tick)
    if bar is not None:
        bar.close()
    return scores


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m iolearn.demo", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--reference",
        default="../shared/reference/kml/readahead",
        help="KML reference directory (default: %(default)s)",
    )
    ap.add_argument("--out", default="results/demo", help="where models are written (default: %(default)s)")
    ap.add_argument("--seed", type=seed_arg(), default=0)
    ap.add_argument("--epochs", type=int_arg(1, 100_000), default=1000)
    ap.add_argument("--batch-size", type=int_arg(1, 1 << 20), default=32)
    ap.add_argument(
        "--sim-seconds",
        type=float_arg(0.0, 3600.0),
        default=5.0,
        help="simulated seconds per sweep run (0: skip part 4)",
    )
    ap.add_argument(
        "--eval-seconds", type=float_arg(0.01, 3600.0), default=30.0, help="simulated seconds per evaluation run"
    )
    args = ap.parse_args(argv)
    ref = Path(args.reference)
    if not (ref / "nn_arch_data").is_dir():
        print(f"error: {ref}/nn_arch_data not found (pass --reference)", file=sys.stderr)
        return 2
    out = Path(args.out)
    output_dir(out)
    t0 = time.time()

    X, y = datasets.load_kml_readahead(ref)
    print(
        f"KML readahead reference data: {len(y)} labelled rows, 5 normalised features, "
        f"classes {dict(zip(datasets.KML_CLASSES, np.bincount(y).tolist()))}"
    )

    # 1. KML's released models, imported.
    net = import_kml(ref / "nn_arch_data")
    tree = import_kml(ref / "nn_arch_data", tree=ref / "decision_tree_model/readahead_model.dt")
    nn_agree = int(np.sum(net.predict(X, prenormalized=True) == y))
    dt_agree = int(np.sum(tree.predict(X, prenormalized=True) == y))
    print("\n1. KML's released models, imported")
    print(f"   network 5-15-5-4: agrees with the labels on {nn_agree}/{len(y)} rows (KML's own code: 390)")
    print(f"   decision tree   : agrees with the labels on {dt_agree}/{len(y)} rows (KML's own code: 370)")
    net.save(out / "kml_readahead_nn.iolm")
    tree.save(out / "kml_readahead_dt.iolm")

    # 2. Re-train with KML's settings, 10-fold cross-validation.
    # KML trained with batch size 1; on these 422 rows, momentum 0.99 with single-row steps
    # oscillates (about 51% CV accuracy), so the demo averages over mini-batches of 32.
    print(f"\n2. Re-trained: SGD lr 0.01, momentum 0.99 (KML's), mini-batch {args.batch_size}, 10-fold CV")
    mlp = MLP(
        hidden=(15, 5),
        activation="sigmoid",
        lr=0.01,
        momentum=0.99,
        batch_size=args.batch_size,
        epochs=args.epochs,
        seed=args.seed,
        normalize=False,
    )
    s_nn = _cv(mlp, X, y, "network CV", args.seed)
    dt = DecisionTree(max_depth=9)
    s_dt = _cv(dt, X, y, "tree CV", args.seed)
    print(f"   network: {s_nn.mean() * 100:5.1f}% +- {s_nn.std() * 100:.1f}   (KML reports 95.5% on its full data set)")
    print(f"   tree   : {s_dt.mean() * 100:5.1f}% +- {s_dt.std() * 100:.1f}   (KML reports 75.4%)")

    # 3. Final models on all rows, feature importance, files.
    mlp.fit(X, y)
    dt.fit(X, y)
    imp = permutation_importance(mlp, X, y, n_repeats=5, seed=args.seed)
    print(f"\n3. Permutation importance (accuracy with one feature shuffled; baseline {imp['baseline'] * 100:.1f}%)")
    print(f"   {'feature':<20} {'ours':>7} {'KML':>7}")
    for name, ours, theirs in zip(KML_FEATURES, imp["shuffled"], KML_SHUFFLED):
        print(f"   {name:<20} {ours * 100:6.1f}% {theirs * 100:6.1f}%")
    for est, name in ((mlp, "readahead_nn.iolm"), (dt, "readahead_dt.iolm")):
        est.save(
            out / name,
            schema=net.schema,
            features=net.features,
            classes=net.classes,
            action_unit="read_ahead_kb",
            normaliser=net.normaliser,  # trained on KML's normalised rows: raw input needs its statistics
        )
    print(f"\nmodels written to {out}/ (inspect with: iolearn model inspect {out}/readahead_nn.iolm)")

    # 4. The whole use case in the simulator (issue 3): sweep, train, closed-loop evaluation.
    if args.sim_seconds > 0:
        from . import readahead as ra

        sim_out = out / "sim"
        print(
            f"\n4. In the simulator: KML's use case end to end (NVMe and SATA presets, 2.3 GiB database,"
            f" 850 MiB page cache; {args.sim_seconds:g} s sweep runs, {args.eval_seconds:g} s evaluation runs)",
            flush=True,
        )
        argv = ["all", "--out", str(sim_out), "--seconds", str(args.sim_seconds)]
        status = ra.main(argv + ["--eval-seconds", str(args.eval_seconds)])
        print(f"   results, Parquet and evaluate.png in {sim_out}/")
        if status:
            print("   (some of issue 3's goals were missed: see above)")
    print(f"done in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main, "python -m iolearn.demo"))
