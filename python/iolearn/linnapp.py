"""LinnApp's recalibration: retrain a device's LinnOS model when its inflection point drifts.

iolearn eval linnos-drift [--phases light,light,heavy,heavy,light,light] [--ios N] [--seed S]
                          [--out DIR]

LinnOS labels reads fast or slow at each device's inflection point (IP, a percentile of the
device's latency CDF) and trains one model per device. "If in the new workload-device pair, the
inflection point has shifted by five percentiles, LinnApp will retrain the model using the newly
collected trace" (LinnOS, section 5.2.4). Here a workload changes in phases (``light``: 3,000
I/Os per second, 90% reads; ``heavy``: 5,000 per second, half writes, which wakes the GC);
each phase is a window of ``--ios`` I/Os replayed on three simulated enterprise SSDs with EC2
noise. After every window LinnApp retraces it (its Base replay: the device-level trace blktrace
would record), computes each device's IP and retrains the devices whose IP moved by 5
percentiles or more since their model was trained. Compared, window by window: Base, LinnOS
trained on the first window only (static), LinnApp, and retraining every window (the cost
ceiling). Each window's replay starts from the same aged drives (windows are separate
replays; the drive state does not carry over).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _native, traces
from ._cli import Parser
from ._cli import run as run_cli
from ._validate import int_arg, seed_arg
from .admission import _progress, _train_linnos, as_replay, write_parquet
from .safeio import output_dir, write_text

# LinnOS's retraining rule: an IP that moved this many percentiles.
DRIFT_PCT = 5.0
PHASES = {
    "light": {"iops": 3000, "read_share": 0.9},
    "heavy": {"iops": 5000, "read_share": 0.5},
}
REPLICAS = 3
FAILOVER_US = 15.0


@dataclass
class LinnApp:
    """The user-level half of LinnOS: one model and one IP per device, retrained when the IP
    of a retraced window drifts by `drift_pct` percentiles from the one its model learned.
    `models_dir/linnos-r{r}.iolm` always holds the model in use for replica r."""

    models_dir: Path
    replicas: int = REPLICAS
    failover_us: float = FAILOVER_US
    drift_pct: float = DRIFT_PCT
    seed: int = 1
    quick: bool = False
    ip_pct: list = field(default_factory=list)
    retrained: list = field(default_factory=list)

    @property
    def policy(self) -> str:
        return f"model={self.models_dir}/linnos-r{{r}}.iolm"

    def inflection_points(self, samples: dict) -> list[tuple[float, float]]:
        """Each device's IP (percentile, us) in a retraced window: its own latencies, and the
        other devices' for the reads it would revoke."""
        lat = samples["latency_ns"] / 1e3
        rep = samples["replica"]
        trials = 100_000 if self.quick else 1_000_000
        out = []
        for r in range(self.replicas):
            own, others = lat[rep == r], lat[rep != r]
            if own.size < 100:
                raise ValueError(f"replica {r}: {own.size} reads in the window, need at least 100")
            out.append(
                _native.inflection_point(
                    own.astype(np.float64),
                    self.replicas,
                    self.failover_us,
                    trials,
                    self.seed,
                    others_us=others.astype(np.float64),
                )
            )
        return out

    def drifted(self, ips: list[tuple[float, float]]) -> list[int]:
        """The replicas whose IP (percentile) moved by `drift_pct` or more from the one their
        model learned; all of them before any model exists."""
        if len(self.ip_pct) < self.replicas:
            return list(range(self.replicas))
        return [r for r, (pct, _) in enumerate(ips) if abs(pct - self.ip_pct[r]) >= self.drift_pct]

    def observe(self, samples: dict, force: bool = False) -> list[int]:
        """A retraced window: retrain the devices whose IP drifted (all of them the first time,
        or with `force`). Returns the replicas retrained."""
        ips = self.inflection_points(samples)
        lat = samples["latency_ns"] / 1e3
        rep = samples["replica"]
        retrain = range(self.replicas) if force else self.drifted(ips)
        done = []
        for r, (pct, us) in enumerate(ips):
            if r not in retrain:
                continue
            mine = rep == r
            m = _train_linnos(samples["linnos"][mine], lat[mine] > us, self.seed, self.quick)
            m.save(
                self.models_dir / f"linnos-r{r}.iolm",
                schema="linnos-31",
                meta={"rule": "class", "quantize": "x1000", "ip_pct": f"{pct:.1f}", "ip_us": f"{us:.1f}"},
            )
            if len(self.ip_pct) < self.replicas:
                self.ip_pct.append(pct)
            else:
                self.ip_pct[r] = pct
            done.append(r)
        self.retrained.append(done)
        return done


def window(phase: str, ios: int, seed: int) -> dict:
    """One phase's trace as replay columns."""
    return as_replay(traces.generate(ios=ios, seed=seed, **PHASES[phase]))


def evaluate(phases: list[str], ios: int, seed: int, out: Path, quick: bool = False, bar=None) -> list[dict]:
    """Every window under Base, static LinnOS, LinnApp and retraining every window."""
    world = _native.TailWorld(preset="enterprise", replicas=REPLICAS, noise="ec2", seed=seed)
    apps = {
        "LinnOS-static": LinnApp(out / "static", seed=seed, quick=quick),
        "LinnApp": LinnApp(out / "linnapp", seed=seed, quick=quick),
        "LinnOS-every": LinnApp(out / "every", seed=seed, quick=quick),
    }
    for a in apps.values():
        a.models_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for k, phase in enumerate(phases):
        data = window(phase, ios, seed * 1000 + k)
        base = world.run("base", **data, rate=1.0, samples=True, seed=seed)
        if k > 0:
            runs = {"Base": base}
            for name, a in apps.items():
                runs[name] = world.run(a.policy, **data, rate=1.0, seed=seed)
            for name, r in runs.items():
                lat = r["reads"]["latency_ns"] / 1e3
                rows.append(
                    {
                        "window": k,
                        "phase": phase,
                        "policy": name,
                        "mean_us": float(lat.mean()),
                        "p99_us": float(np.percentile(lat, 99)),
                        "p999_us": float(np.percentile(lat, 99.9)),
                        "models_from": _origin(apps.get(name)),
                    }
                )
        # The window is over: LinnApp retraces it (static only trains on the first).
        sm = base["samples"]
        if k == 0:
            for a in apps.values():
                a.observe(sm)
        else:
            apps["LinnApp"].observe(sm)
            apps["LinnOS-every"].observe(sm, force=True)
        if bar is not None:
            bar.update(1)
    for r in rows:
        r["retrained_after"] = json.dumps(apps["LinnApp"].retrained)
    return rows


def _origin(app: LinnApp | None) -> str:
    """The windows the models in use were trained on, per replica."""
    if app is None:
        return ""
    last = []
    for r in range(app.replicas):
        w = max((k for k, done in enumerate(app.retrained) if r in done), default=-1)
        last.append(str(w))
    return ",".join(last)


def markdown(rows: list[dict]) -> str:
    policies = ("Base", "LinnOS-static", "LinnApp", "LinnOS-every")
    lines = [
        "| window | phase | " + " | ".join(f"{p} p99 / mean us" for p in policies) + " | LinnApp models from windows |",
        "|---|---|" + "---|" * (len(policies) + 1),
    ]
    for k in sorted({r["window"] for r in rows}):
        mine = {r["policy"]: r for r in rows if r["window"] == k}
        cells = [f"{mine[p]['p99_us']:.0f} / {mine[p]['mean_us']:.0f}" for p in policies]
        lines.append(
            f"| {k} | {mine['Base']['phase']} | " + " | ".join(cells) + f" | {mine['LinnApp']['models_from']} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = Parser(prog="iolearn eval linnos-drift", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--phases",
        default="light,light,heavy,heavy,light,light",
        help=f"comma-separated windows, each one of {', '.join(PHASES)}",
    )
    ap.add_argument("--ios", type=int_arg(1000, 10_000_000), default=30_000, help="I/Os per window")
    ap.add_argument("--seed", type=seed_arg(), default=1)
    ap.add_argument("--quick", action="store_true", help="fewer epochs and IP trials (CI)")
    ap.add_argument("--out", type=Path, default=Path("results/linnos-drift"))
    args = ap.parse_args(argv)
    phases = args.phases.split(",")
    bad = [p for p in phases if p not in PHASES]
    if bad or len(phases) < 2:
        print(
            f"iolearn eval linnos-drift: --phases: {args.phases!r} (two or more of {', '.join(PHASES)})",
            file=sys.stderr,
        )
        return 2
    output_dir(args.out)
    bar = _progress(len(phases), "linnos-drift")
    try:
        rows = evaluate(phases, args.ios, args.seed, args.out, args.quick, bar)
    finally:
        if bar is not None:
            bar.close()
    write_parquet(rows, args.out / "results.parquet")
    table = markdown(rows)
    write_text(args.out / "table.md", table + "\n")
    print(table)
    print(f"LinnApp retrained after each window (replicas): {rows[0]['retrained_after']}")
    print(f"results: {args.out}/results.parquet, table.md")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main, "iolearn eval linnos-drift"))
