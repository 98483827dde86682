"""Tail-latency policies on this machine's real I/O path: three loop-device replicas.

iolearn bench admission --real [--trace T] [--rate R] [--noise-threads N] [--out DIR]

The trace is split in two. The first half is replayed with every read served where it
arrives (base), with `--samples`: per-read training rows as the block layer saw them. LinnOS,
ML-MittOS and iolearn's tree are trained on those rows (labels at the inflection point of the
measured latencies). The second half is then replayed with each policy, side by side, through
`iolearn replay block` (io_uring, O_DIRECT). Noise threads read replica 0 in busy periods.
The loop devices are images of written data on this machine's disk; they are removed on exit,
on signals, and by the next run if a crash left them behind.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from . import _native
from ._cli import Parser
from ._cli import run as run_cli
from ._validate import float_arg, int_arg
from .admission import REFERENCE_TRACES, _train_linnos, _train_mittos
from .bench_mittcfq import Replicas
from .bench_real import iolearn_cmd
from .models import DecisionTree
from .safeio import output_dir, read_text, write_text

IMAGE_MB = 1024


def _split_trace(path: str, out: Path) -> tuple[Path, Path]:
    # Read whole (it is split in two), under the trace readers' own bound.
    lines = [ln for ln in read_text(path, 4 << 30).splitlines() if ln.strip()]
    half = len(lines) // 2
    a, b = out / "train.trace", out / "test.trace"
    write_text(a, "\n".join(lines[:half]) + "\n")
    write_text(b, "\n".join(lines[half:]) + "\n")
    return a, b


def replay(devices, policy: str, trace: Path, args, out: Path, samples: Path | None = None) -> dict:
    cmd = iolearn_cmd() + ["replay", "block", "--replicas", ",".join(devices), "--policy", policy]
    cmd += ["--rate", str(args.rate), "--noise-threads", str(args.noise_threads), "--out", str(out)]
    if args.allow_writes:
        cmd.append("--allow-writes")
    if samples is not None:
        cmd += ["--samples", str(samples)]
    p = subprocess.run(cmd + [str(trace)], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    rows = list(csv.DictReader(open(out)))
    reads = [r for r in rows if r["write"] == "0" and r["errno"] == "0"]
    lat = np.array([int(r["latency_ns"]) for r in reads]) / 1e3
    decision = p.stdout.split("decision p50 ")[1].split(" ns")[0] if "decision p50 " in p.stdout else "nan"
    return {
        "reads": len(reads),
        "mean_us": float(lat.mean()),
        **{f"p{q:g}_us": float(np.percentile(lat, q)) for q in (50, 90, 95, 99, 99.9)},
        "revoked_pct": 100 * sum(int(r["revoked"]) for r in reads) / len(reads),
        "extra_io_pct": 100 * sum(int(r["duplicates"]) for r in reads) / len(reads),
        "decision_ns": float(decision),
    }


def train(samples: Path, models: Path, quick: bool) -> dict[str, str]:
    data = np.genfromtxt(samples, delimiter=",", names=True)
    lat = data["latency_ns"] / 1e3
    linnos = np.stack([data[f"linnos{i}"] for i in range(31)], axis=1).astype(np.float32)
    mittos = np.stack([data[f"mittos{i}"] for i in range(9)], axis=1).astype(np.float32)
    tail = np.stack([data[f"tail{i}"] for i in range(13)], axis=1).astype(np.float32)
    ip_pct, ip = _native.inflection_point(lat.astype(np.float64), 3, 15.0, 200_000, 1)
    slow = lat > ip
    output_dir(models)
    m = _train_linnos(linnos, slow, 1, quick)
    m.save(models / "linnos.iolm", schema="linnos-31", meta={"rule": "class", "quantize": "x1000"})
    fs = float((m.predict(linnos) == 0)[slow].sum() / len(slow))
    y = np.minimum(lat, 20 * ip) / ip
    reg = _train_mittos(mittos, y, 1, quick)
    pred = reg.forward(mittos)[:, 0].astype(np.float64) * ip
    thr, _ = _native.best_threshold(pred, lat.astype(np.float64), 3, 15.0)
    reg.save(
        models / "mittos.iolm", schema="mittos-9", meta={"rule": f"above_us={thr:.3f}", "output_scale": f"{ip:.6g}"}
    )
    DecisionTree(max_depth=8, min_samples_leaf=20).fit(tail, slow).save(
        models / "tree.iolm", schema="iolearn-tail-v1", meta={"rule": "proba=0.35"}
    )
    p95 = float(np.percentile(lat, 95))
    return {
        "Base": "base",
        "Hedge95": f"base+hedge={p95:.1f}",
        "HedgeIP": f"base+hedge={ip:.1f}",
        "LinnOS-Raw": f"model={models / 'linnos.iolm'}",
        "LinnOS+HL": f"model={models / 'linnos.iolm'}+hedge={np.percentile(lat, min(95.0, 100 * (1 - fs))):.1f}",
        "ML-MittOS": f"model={models / 'mittos.iolm'}",
        "iolearn": f"model={models / 'tree.iolm'}+hedge={2 * ip:.1f}/0.05",
        "_ip": f"{ip:.1f}",
        "_ip_pct": f"{ip_pct:.1f}",
    }


def main(argv=None) -> int:
    ap = Parser(prog="iolearn bench admission --real", description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=REFERENCE_TRACES[1])
    ap.add_argument("--rate", type=float_arg(1e-6, 1e6), default=10.0, help="arrival rate factor (1e-6 to 1e6)")
    ap.add_argument("--noise-threads", type=int_arg(0, 64), default=4, help="noise threads (0 to 64)")
    ap.add_argument(
        "--allow-writes",
        action="store_true",
        help="replay the trace's writes too (the host disk's write-back then dominates)",
    )
    ap.add_argument("--repeats", type=int_arg(1, 100), default=2, help="runs of each policy on the test half")
    ap.add_argument("--quick", action="store_true", help="one run each, fewer epochs (CI)")
    ap.add_argument("--workdir", type=Path, default=Path("/var/tmp/iolearn-bench-admission"))
    ap.add_argument("--out", type=Path, default=Path("results/admission-real"))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("iolearn bench admission --real: needs root (loop devices)", file=sys.stderr)
        return 2
    if not Path(args.trace).is_file():
        print(f"iolearn bench admission --real: {args.trace}: no such trace", file=sys.stderr)
        return 2
    output_dir(args.out)
    repeats = 1 if args.quick else args.repeats

    def stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    rows = []
    # Written images (a read of a hole or a preallocated extent never reaches the disk, a write
    # into one costs the host file system an allocation): the loop devices of bench mittcfq.
    with Replicas(args.workdir, image_mb=IMAGE_MB) as reps:
        train_trace, test_trace = _split_trace(args.trace, args.workdir)
        samples = args.out / "train-samples.csv"
        t0 = time.time()
        replay(reps.devices, "base", train_trace, args, args.out / "train-records.csv", samples)
        policies = train(samples, args.out / "models", args.quick)
        ip, ip_pct = policies.pop("_ip"), policies.pop("_ip_pct")
        names = list(policies)
        for k in range(repeats):
            # A different order each round: the host disk drifts, no policy always goes first.
            for name in names[k % len(names) :] + names[: k % len(names)]:
                spec = policies[name]
                r = replay(reps.devices, spec, test_trace, args, args.out / f"test-{name}-{k}.csv")
                rows.append({"policy": name, "run": k, "spec": spec, **r})
                print(f"{name:<12} run {k}: mean {r['mean_us']:.0f} us, p99 {r['p99_us']:.0f} us", file=sys.stderr)
    report = {
        "trace": args.trace,
        "rate": args.rate,
        "noise_threads": args.noise_threads,
        "ip_us": float(ip),
        "ip_pct": float(ip_pct),
        "wall_s": time.time() - t0,
        "runs": rows,
        "date": time.strftime("%Y-%m-%d"),
        "machine": os.uname().nodename,
    }
    write_text(args.out / "report.json", json.dumps(report, indent=1))
    cols = ("mean_us", "p50_us", "p90_us", "p99_us", "p99.9_us", "revoked_pct", "extra_io_pct", "decision_ns")
    print(f"IP p{float(ip_pct):.1f} = {float(ip):.0f} us; medians over {repeats} run(s)")
    print("| policy | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name in policies:
        rs = [r for r in rows if r["policy"] == name]
        print(f"| {name} | " + " | ".join(f"{np.median([r[c] for r in rs]):.1f}" for c in cols) + " |")
    print(f"report: {args.out}/report.json")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main, "iolearn bench admission --real"))
