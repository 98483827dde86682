"""Replay a block trace on replicated simulated SSDs; per-I/O latencies with the device state.

iolearn sim ssd --trace T --preset enterprise --replicas 3 --out lat.parquet
"""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

import numpy as np

from . import _native
from ._cli import Parser
from ._cli import run as run_cli
from ._validate import float_arg, int_arg, seed_arg
from .safeio import atomic_open, check_target

COLUMNS = (
    "arrival_ns",
    "offset",
    "size",
    "write",
    "replica",
    "latency_ns",
    "pending",
    "plane_wait_ns",
    "channel_wait_ns",
    "gc_active",
    "buffered_pages",
)


def replay(
    trace,
    preset="enterprise",
    mode="base",
    replicas=3,
    hop_us=15.0,
    noise="quiet",
    precondition=1.0,
    seed=1,
    skip_bad=False,
    trace_format=None,
) -> dict[str, np.ndarray]:
    """Per-I/O columns (numpy arrays) of a replay; see ``COLUMNS``."""
    return _native.sim_ssd(
        str(trace), preset, mode, replicas, hop_us, noise, precondition, seed, skip_bad, trace_format
    )


def write_table(cols: dict, out: Path) -> None:
    """Parquet when the name ends in .parquet (pyarrow), else CSV; atomically."""
    if out.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        with atomic_open(out) as f:
            pq.write_table(pa.table({c: cols[c] for c in COLUMNS}), f)
    else:
        with atomic_open(out, "w") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
            w.writerows(zip(*(np.asarray(cols[c]).astype(np.int64).tolist() for c in COLUMNS)))


def summary(cols: dict) -> str:
    reads = cols["latency_ns"][~cols["write"]] / 1e3
    if reads.size == 0:
        return "no reads"
    p = np.percentile(reads, [50, 90, 95, 99, 99.9])
    gc = cols["gc_active"][~cols["write"]].mean() * 100
    return (
        f"{reads.size} reads: mean {reads.mean():.0f} us, p50 {p[0]:.0f}, p90 {p[1]:.0f}, p95 {p[2]:.0f}, "
        f"p99 {p[3]:.0f}, p99.9 {p[4]:.0f} us; {gc:.2f}% arrived at a plane under GC"
    )


def main(argv=None) -> int:
    ap = Parser(prog="iolearn sim ssd", description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, required=True)
    ap.add_argument(
        "--format",
        dest="trace_format",
        default=None,
        choices=["linnos", "msr", "blkparse", "binary"],
        help="trace format (default: guess)",
    )
    ap.add_argument("--preset", default="enterprise", help="consumer, enterprise, or an SSD configuration FILE.toml")
    ap.add_argument("--mode", default="base", choices=["base", "plane-blocking", "tolerant", "preemptive", "no-gc"])
    ap.add_argument("--replicas", type=int_arg(1, 8), default=3, help="replicas (1 to 8)")
    ap.add_argument("--hop-us", type=float_arg(0.0, 1e6), default=15.0, help="network hop / failover cost, us")
    ap.add_argument("--noise", default="quiet", choices=["quiet", "ec2", "tailatstore", "failslow"])
    ap.add_argument(
        "--precondition",
        type=float_arg(0.0, 10.0),
        default=1.0,
        help="random overwrites before the replay (x capacity, 0 to 10)",
    )
    ap.add_argument("--seed", type=seed_arg(), default=1)
    ap.add_argument("--skip-bad", action="store_true")
    ap.add_argument("--out", type=Path, required=True, help=".parquet or .csv")
    a = ap.parse_args(argv)
    check_target(a.out)  # before the simulation, which may run for minutes
    if a.out.exists() and a.trace.exists() and os.path.samefile(a.out, a.trace):
        raise ValueError(f"{a.out}: is the input trace; write to another file")
    cols = replay(
        a.trace, a.preset, a.mode, a.replicas, a.hop_us, a.noise, a.precondition, a.seed, a.skip_bad, a.trace_format
    )
    if cols["skipped"]:
        print(f"skipped {cols['skipped']} bad line(s)", file=sys.stderr)
    write_table(cols, a.out)
    print(summary(cols))
    print(f"wrote {len(cols['latency_ns'])} I/Os to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main, "iolearn sim ssd"))
