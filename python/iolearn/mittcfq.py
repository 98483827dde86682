"""MittCFQ's successor: MittOS's evaluation on disks behind bfq and mq-deadline.

iolearn eval mittcfq [--sched bfq mq-deadline] [--scenario low high ec2 mix] [--seeds 1 2 3]
                     [--duration S] [--out DIR]

CFQ left the kernel in 5.0; MittCFQ's idea (predict each read's wait from the scheduler's
queues, answer EBUSY at once when it would miss its deadline, cancel it later if higher
priority work bumps it) is rebuilt on a bfq-like fair-queueing scheduler and on mq-deadline
(``iolearn_flash::sched``), with a predictor that keeps its own books of the scheduler's
events and a seek profile it probed (``iolearn_policy::mittsched``). Three replicas, gets of
4 KiB (MongoDB's in MittOS), other tenants' I/O per scenario (``iolearn_tail::mix``):

- ``low`` / ``high``: MittOS's microbenchmarks (4 threads of 4 KiB random reads on the node
  every get tries first, at a lower / higher priority than the store); deadline 20 ms, as
  MittOS's.
- ``ec2``: MittOS's EC2-derived busy neighbours, scaled to 3 nodes; ``mix``: a file server, a
  mail server and a web server beside the store, coming and going like batch jobs. Deadline,
  hedge delay and timeout: Base's p95 under the EC2 noise, measured on a seed of its own
  (MittOS: "13ms, the p95 latency").

Strategies: Base; Hedged (a second copy after the deadline, the first not cancelled); Clone
(two copies at once: twice the I/O); AppTO (cancel and retry after the deadline); MittOS
(EBUSY at admission and late cancellation, the last replica's try without a deadline);
MittOS-admit (no late cancellation); MittOS-wait (EBUSY carries the expected wait: every
replica is asked with the deadline, and if all are busy the read goes to the least busy).
Every strategy runs on the same seeds (each a different draw of arrivals, offsets, noise
phases and rotations); the table gives the median over seeds with the range. The predictor's
accuracy comes from Base runs in which each get's first try is also predicted (not acted on).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from . import _native, _plot
from ._cli import Parser
from ._cli import run as run_cli
from ._validate import float_arg, seed_arg
from .admission import _progress, write_parquet
from .safeio import output_dir, write_text

SCENARIOS = ("low", "high", "ec2", "mix")
SCHEDULERS = ("bfq", "mq-deadline")
# (label, strategy template): {d} is the deadline in ms.
STRATEGIES = (
    ("Base", "base"),
    ("Hedged", "hedged:{d}"),
    ("Clone", "clone"),
    ("AppTO", "timeout:{d}"),
    ("MittOS", "mitt:{d}"),
    ("MittOS-admit", "mitt-admit:{d}"),
    ("MittOS-wait", "mitt-wait:{d}"),
)
# MittOS's microbenchmark deadline (section 4.5.1), ms.
MICRO_DEADLINE_MS = 20.0
# The seed Base's p95 is measured on for the other scenarios' deadline: never a reported one.
TUNING_SEED = 1_000_003
PERCENTILES = (50, 75, 90, 95, 98, 99, 99.9)


def deadline_ms(scenario: str, sched: str, duration_s: float) -> float:
    """The deadline (and hedge delay and timeout) MittOS would use in `scenario`."""
    if scenario in ("low", "high"):
        return MICRO_DEADLINE_MS
    lat = _native.mix_run("ec2", sched, "base", seed=TUNING_SEED, duration_s=duration_s)["latency_ns"]
    return float(np.percentile(lat, 95) / 1e6)


def run_setting(scenario: str, sched: str, seeds: list[int], duration_s: float, bar=None) -> tuple[list[dict], dict]:
    """Every strategy on every seed: one row each, and the latencies (ms) for the plot."""
    d = deadline_ms(scenario, sched, duration_s)
    rows, lats = [], {}
    for label, template in (("NoNoise", "base"), *STRATEGIES):
        strategy = template.format(d=f"{d:.6g}")
        for seed in seeds:
            sc = "quiet" if label == "NoNoise" else scenario
            out = _native.mix_run(sc, sched, strategy, seed=seed, duration_s=duration_s, observe=label == "Base")
            lat = out["latency_ns"] / 1e6
            lats.setdefault(label, []).append(lat)
            row = {
                "scenario": scenario,
                "sched": sched,
                "strategy": label,
                "seed": seed,
                "deadline_ms": d,
                "gets": int(lat.size),
                "mean_ms": float(lat.mean()),
                **{f"p{p:g}_ms": float(np.percentile(lat, p)) for p in PERCENTILES},
                "over_40ms": float(np.mean(lat > 40.0)),
                "rejected": int(out["rejected"]),
                "cancelled_late": int(out["cancelled_late"]),
                "extra_copies": int(out["extra_copies"]),
                "last_tries": int(out["last_tries"]),
                "unfinished": int(out["unfinished"]),
                "ebusy": int(out["rejected"]) + int(out["cancelled_late"]),
            }
            if label == "Base":
                pr, ac = out["predicted_ns"] / 1e6, out["actual_ns"] / 1e6
                row["pred_mae_ms"] = float(np.mean(np.abs(pr - ac)))
                row["pred_wrong"] = float(np.mean((pr > d) != (ac > d)))
            rows.append(row)
            if bar is not None:
                bar.update(1)
    return rows, {k: np.concatenate(v) for k, v in lats.items()}


def _med(rows: list[dict], strategy: str, key: str) -> tuple[float, float, float]:
    v = np.array([r[key] for r in rows if r["strategy"] == strategy])
    return float(np.median(v)), float(v.min()), float(v.max())


# The tail: where MittOS's "up to 41% faster than Hedged" is read.
TAIL = (90, 95, 98, 99, 99.9)


def max_reduction(rows: list[dict], ours: str, other: str) -> tuple[float, str]:
    """The largest reduction of `ours` against `other` over the tail percentiles (medians over
    seeds): MittOS's "up to 41% faster than Hedged"."""
    best, at = -np.inf, ""
    for p in TAIL:
        a = _med(rows, ours, f"p{p:g}_ms")[0]
        b = _med(rows, other, f"p{p:g}_ms")[0]
        if b > 0 and 1 - a / b > best:
            best, at = 1 - a / b, f"p{p:g}"
    return best, at


def row_cells(mine: list[dict], label: str, digits: int, over_40ms: bool = False) -> list[str]:
    """A strategy's cells in a scenario's table: mean and tail latencies (median [min-max]),
    reductions against Hedged and Base, EBUSY answers and extra copies per get."""
    cells = []
    for key in ("mean_ms", "p95_ms", "p99_ms", "p99.9_ms"):
        m, lo, hi = _med(mine, label, key)
        cells.append(f"{m:.{digits}f} [{lo:.{digits}f}-{hi:.{digits}f}]")
    if over_40ms:
        cells.append(f"{_med(mine, label, 'over_40ms')[0]:.1%}")
    for key, other in (("p95_ms", "Hedged"), ("p99_ms", "Hedged"), ("p95_ms", "Base")):
        a, b = _med(mine, label, key)[0], _med(mine, other, key)[0]
        cells.append(f"{1 - a / b:+.0%}" if b > 0 else "")
    gets = max(_med(mine, label, "gets")[0], 1)
    cells.append(f"{_med(mine, label, 'ebusy')[0] / gets:.1%}")
    cells.append(f"{_med(mine, label, 'extra_copies')[0] / gets:.1%}")
    return cells


def markdown(rows: list[dict], scenario: str, sched: str) -> str:
    mine = [r for r in rows if r["scenario"] == scenario and r["sched"] == sched]
    seeds = sorted({r["seed"] for r in mine})
    d = mine[0]["deadline_ms"]
    lines = [
        f"### {scenario}, {sched} (deadline {d:.1f} ms; medians over seeds {', '.join(map(str, seeds))} [min-max])",
        "",
        "| strategy | mean ms | p95 ms | p99 ms | p99.9 ms | > 40 ms | p95 vs Hedged | p99 vs Hedged | p95 vs Base "
        "| EBUSY | extra tries |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label in ("NoNoise", *(s for s, _ in STRATEGIES)):
        lines.append(f"| {label} | " + " | ".join(row_cells(mine, label, 1, over_40ms=True)) + " |")
    unfinished = sum(r["unfinished"] for r in mine)
    if unfinished:
        lines += ["", f"{unfinished} gets never served (left out of the percentiles)."]
    best, at = max_reduction(mine, "MittOS", "Hedged")
    mae = _med(mine, "Base", "pred_mae_ms")[0]
    wrong = _med(mine, "Base", "pred_wrong")[0]
    lines += [
        "",
        "EBUSY: answers at admission and late cancellations per get; extra tries: copies beyond "
        "one per get (hedges, clones, retries; a refused try costs a failover, not a read).",
        "",
        f"MittOS vs Hedged: up to {best:.0%} faster at p90-p99.9 (at {at}); predictor on Base's first tries: "
        f"mean absolute error {mae:.1f} ms, {wrong:.1%} of deadline decisions wrong.",
    ]
    return "\n".join(lines)


def plot(lats: dict, scenario: str, sched: str, path: Path) -> None:
    plt = _plot.pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, v in lats.items():
        v = np.sort(v)
        ax.plot(v, np.arange(1, v.size + 1) / v.size, label=label, lw=1.4 if label.startswith("MittOS") else 1.0)
    ax.set_xscale("log")
    ax.set_ylim(0.8, 1.0)
    ax.set_xlabel("get latency (ms)")
    ax.set_ylabel("CDF")
    ax.set_title(f"{scenario} on {sched}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _plot.save(fig, path)


def main(argv=None) -> int:
    ap = Parser(prog="iolearn eval mittcfq", description=__doc__.splitlines()[0])
    ap.add_argument("--sched", nargs="+", choices=SCHEDULERS, default=list(SCHEDULERS))
    ap.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    ap.add_argument("--seeds", type=seed_arg(), nargs="+", default=[1, 2, 3])
    ap.add_argument(
        "--duration", type=float_arg(6.0, 86_400.0), default=600.0, help="seconds of gets per run (5 s warm-up)"
    )
    ap.add_argument("--out", type=Path, default=Path("results/mittcfq"))
    args = ap.parse_args(argv)
    if TUNING_SEED in args.seeds:
        print(f"iolearn eval mittcfq: seed {TUNING_SEED} sets the deadline; report on others", file=sys.stderr)
        return 2
    seeds = list(dict.fromkeys(args.seeds))
    output_dir(args.out)
    rows, tables = [], []
    settings = [(sc, s) for sc in args.scenario for s in args.sched]
    bar = _progress(len(settings) * (len(STRATEGIES) + 1) * len(seeds), "mittcfq")
    try:
        for scenario, sched in settings:
            if bar is not None:
                bar.set_description(f"{scenario} {sched}")
            mine, lats = run_setting(scenario, sched, seeds, args.duration, bar)
            rows += mine
            tables.append(markdown(rows, scenario, sched))
            plot(lats, scenario, sched, args.out / f"cdf-{scenario}-{sched}.png")
    finally:
        if bar is not None:
            bar.close()
    write_parquet(rows, args.out / "results.parquet")
    table = "\n\n".join(tables)
    write_text(args.out / "table.md", table + "\n")
    summary = {
        f"{sc} {s}": {
            "deadline_ms": next(r["deadline_ms"] for r in rows if r["scenario"] == sc and r["sched"] == s),
            "max_reduction_vs_hedged": max_reduction(
                [r for r in rows if r["scenario"] == sc and r["sched"] == s], "MittOS", "Hedged"
            )[0],
            **{
                f"{label} {k}": _med([r for r in rows if r["scenario"] == sc and r["sched"] == s], label, k)[0]
                for label in ("Base", "Hedged", "MittOS")
                for k in ("p95_ms", "p99_ms")
            },
        }
        for sc, s in settings
    }
    write_text(args.out / "summary.json", json.dumps(summary, indent=1) + "\n")
    print(table)
    print(f"results: {args.out}/results.parquet, table.md, summary.json, cdf-*.png")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main, "iolearn eval mittcfq"))
