"""KML's readahead use case in the simulator: sweep, train, evaluate.

Python drives, Rust computes: every run is ``iolearn._native.sim_closed_loop`` (the simulator
with a controller from ``crates/policy`` deciding once per simulated second).

    python -m iolearn.readahead sweep    --out results/readahead
    python -m iolearn.readahead train    --out results/readahead
    python -m iolearn.readahead evaluate --out results/readahead
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

from . import _native
from .model_selection import cross_val_score
from .models import MLP, DecisionTree

#: KML's training workloads, in its class order (code release ids).
TRAIN_WORKLOADS = ("readrandom", "readrandomwriterandom", "readseq", "readreverse")
#: KML's sweep: 1 2 4 8 16 32 then 64..1024 step 64 sectors; here in KiB (sectors / 2), >= 4 KiB.
FULL_GRID_KB = (4, 8, 16) + tuple(range(32, 513, 32))
REDUCED_GRID_KB = (4, 16, 64, 128, 256, 512)
FEATURES = (
    "n_transactions",
    "page_offset_var_pop_over_range",
    "page_offset_var_sample_over_range",
    "mean_abs_page_delta",
    "ra_sectors_over_1024",
)


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
    workloads=TRAIN_WORKLOADS, grid_kb=REDUCED_GRID_KB, device="nvme", seconds=10.0, seed=1, out: Path | None = None
):
    """Every workload at every static readahead: throughput and per-window features.

    Returns ``(throughput_rows, feature_rows)``; writes ``sweep.csv`` and ``features.csv`` (and
    Parquet versions when pyarrow is installed) under ``out``."""
    rows, feats = [], []
    bar = _bar(len(workloads) * len(grid_kb), "sweep")
    for w in workloads:
        for kb in grid_kb:
            ops, _, f = run([w], f"static:{kb}", device, seconds, seed=seed)
            rows.append({"workload": w, "device": device, "ra_kb": kb, "ops_s": ops[0], "seed": seed})
            for r in f:
                feats.append({"workload": w, "ra_kb": kb, **{n: float(v) for n, v in zip(FEATURES, r[1:])}})
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        _write(out / "sweep", rows)
        _write(out / "features", feats)
    return rows, feats


def _write(stem: Path, rows: list[dict]) -> None:
    if not rows:
        return
    tmp = stem.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    tmp.replace(stem.with_suffix(".csv"))
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return
    pq.write_table(pa.Table.from_pylist(rows), stem.with_suffix(".parquet"))


def best_per_workload(rows) -> dict[str, int]:
    """The best static readahead (KiB) of each workload in a sweep."""
    best: dict[str, tuple[float, int]] = {}
    for r in rows:
        if r["workload"] not in best or r["ops_s"] > best[r["workload"]][0]:
            best[r["workload"]] = (r["ops_s"], r["ra_kb"])
    return {w: kb for w, (_, kb) in best.items()}


def train(rows, feats, out: Path, seed=0, epochs=300):
    """Train KML's 5-15-5-4 network and a tree on the sweep's feature windows; label = the
    workload; action = the workload's best readahead. Returns a report dict."""
    best = best_per_workload(rows)
    X = np.array([[f[n] for n in FEATURES] for f in feats], dtype=np.float32)
    y = np.array([TRAIN_WORKLOADS.index(f["workload"]) for f in feats])
    classes = [(w, best[w]) for w in TRAIN_WORKLOADS]
    nn = MLP(hidden=(15, 5), lr=0.01, momentum=0.99, batch_size=8, epochs=epochs, seed=seed)
    dt = DecisionTree(max_depth=9)
    report = {
        "rows": len(y),
        "nn_cv": float(cross_val_score(nn, X, y, cv=10, seed=seed).mean()),
        "dt_cv": float(cross_val_score(dt, X, y, cv=10, seed=seed).mean()),
        "kml_reported": {"nn_cv": 0.955, "dt_cv": 0.754},
        "classes": classes,
    }
    out.mkdir(parents=True, exist_ok=True)
    for est, name in ((nn, "readahead_nn.iolm"), (dt, "readahead_dt.iolm")):
        est.fit(X, y)
        est.save(
            out / name,
            schema=_native.READAHEAD_SCHEMA,
            features=FEATURES,
            classes=classes,
            action_unit="read_ahead_kb",
        )
    (out / "train.json").write_text(json.dumps(report, indent=2))
    return report


def evaluate(out: Path, workloads, device="nvme", seconds=10.0, oracle: dict[str, int] | None = None, seed=1):
    """Vanilla (128 KiB) vs the trained network and tree vs the oracle static value, per workload."""
    table = []
    for w in workloads:
        vanilla = run([w], "vanilla", device, seconds, seed=seed)[0][0]
        row = {"workload": w, "vanilla": vanilla}
        for name in ("readahead_nn.iolm", "readahead_dt.iolm"):
            row[name.split("_")[1].split(".")[0]] = run([w], str(out / name), device, seconds, seed=seed)[0][0]
        if oracle and w in oracle:
            row["oracle"] = run([w], f"static:{oracle[w]}", device, seconds, seed=seed)[0][0]
        table.append(row)
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iolearn.readahead", description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["sweep", "train", "evaluate", "all"])
    ap.add_argument("--out", type=Path, default=Path("results/readahead"))
    ap.add_argument("--device", default="nvme")
    ap.add_argument("--seconds", type=float, default=10.0, help="simulated seconds per run")
    ap.add_argument("--full-grid", action="store_true", help="KML's 20-value grid instead of 6 values")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    grid = FULL_GRID_KB if a.full_grid else REDUCED_GRID_KB
    if a.command in ("sweep", "all"):
        rows, _ = sweep(TRAIN_WORKLOADS, grid, a.device, a.seconds, a.seed, a.out)
        for w, kb in best_per_workload(rows).items():
            print(f"best static readahead for {w:<22} {kb:>5} KiB")
    if a.command in ("train", "all"):
        rows = _read(a.out / "sweep.csv")
        feats = _read(a.out / "features.csv")
        rep = train(rows, feats, a.out, seed=a.seed)
        print(f"10-fold CV: network {rep['nn_cv'] * 100:.1f}% (KML 95.5%), tree {rep['dt_cv'] * 100:.1f}% (KML 75.4%)")
    if a.command in ("evaluate", "all"):
        oracle = best_per_workload(_read(a.out / "sweep.csv"))
        table = evaluate(a.out, list(oracle), a.device, a.seconds, oracle, a.seed)
        print(f"{'workload':<24}{'vanilla':>10}{'nn':>8}{'tree':>8}{'oracle':>8}   (throughput / vanilla)")
        for r in table:
            v = r["vanilla"]
            print(f"{r['workload']:<24}{v:>10.0f}{r['nn'] / v:>8.2f}{r['dt'] / v:>8.2f}{r['oracle'] / v:>8.2f}")
        _write(a.out / "evaluate", table)
    return 0


def _read(path: Path) -> list[dict]:
    if not path.exists():
        raise SystemExit(f"error: {path} not found (run the sweep first)")
    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for k, v in r.items():
            try:
                r[k] = int(v)
            except ValueError:
                try:
                    r[k] = float(v)
                except ValueError:
                    pass
    return rows


if __name__ == "__main__":
    sys.exit(main())
