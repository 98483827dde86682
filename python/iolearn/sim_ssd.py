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


#: Rows replayed per chunk: one Parquet row group (about 15 MB of columns in memory).
CHUNK_ROWS = 1 << 18


def stream(
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
    repeat=1,
):
    """The replay, streamed: the native replayer (``next_chunk(rows)`` -> dict of numpy arrays
    or None at the end, ``summary()``). The trace is read as it is replayed, so memory stays
    flat at any length; ``repeat`` plays it that many times back to back."""
    return _native.SsdReplay(
        str(trace), preset, mode, replicas, hop_us, noise, precondition, seed, skip_bad, trace_format, repeat
    )


def chunks(r):
    """The chunks of the streamed replay ``r`` (``CHUNK_ROWS`` I/Os each), as they come."""
    return iter(lambda: r.next_chunk(CHUNK_ROWS), None)


def replay(trace, **kwargs) -> dict[str, np.ndarray]:
    """Per-I/O columns (numpy arrays) of a whole replay, see ``COLUMNS``; plus "skipped"."""
    r = stream(trace, **kwargs)
    parts = list(chunks(r))
    cols = {c: np.concatenate([p[c] for p in parts]) if parts else np.zeros(0) for c in COLUMNS}
    cols["skipped"] = r.summary()["skipped"]
    return cols


def write_chunks(parts, out: Path) -> int:
    """Write column chunks to ``out`` as they come (Parquet row groups when the name ends in
    .parquet, else CSV; the file appears only when every chunk was written); the rows."""
    rows = 0
    if out.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        with atomic_open(out) as f:
            writer = None
            for c in parts:
                t = pa.table({k: c[k] for k in COLUMNS})
                writer = writer or pq.ParquetWriter(f, t.schema)
                writer.write_table(t)
                rows += t.num_rows
            if writer is None:  # no I/Os: an empty table with the columns
                writer = pq.ParquetWriter(f, pa.table({k: np.zeros(0, np.int64) for k in COLUMNS}).schema)
            writer.close()
        return rows
    with atomic_open(out, "w") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for c in parts:
            w.writerows(zip(*(np.asarray(c[k]).astype(np.int64).tolist() for k in COLUMNS)))
            rows += len(c["latency_ns"])
    return rows


def write_stream(r, out: Path | None) -> int:
    """Replay everything ``r`` has, each chunk written to ``out`` as it comes, or (no
    ``out``) only summed; the rows replayed."""
    if out is None:
        r.run()
        return r.summary()["ios"]
    return write_chunks(chunks(r), out)


def write_table(cols: dict, out: Path) -> None:
    """Parquet when the name ends in .parquet (pyarrow), else CSV; atomically."""
    write_chunks([cols], out)


def summary(s: dict) -> str:
    """One line from ``SsdReplay.summary()``."""
    if s["reads"] == 0:
        return "no reads"
    line = (
        f"{s['reads']} reads: mean {s['mean_us']:.0f} us, p50 {s['p50_us']:.0f}, p90 {s['p90_us']:.0f}, "
        f"p95 {s['p95_us']:.0f}, p99 {s['p99_us']:.0f}, p99.9 {s['p999_us']:.0f} us"
    )
    if s["gc_share"] is not None:
        line += f"; {100 * s['gc_share']:.2f}% arrived at a plane under GC"
    return line


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
    ap.add_argument(
        "--repeat",
        type=int_arg(1, 1_000_000),
        default=1,
        help="play the trace this many times back to back (1 to 1,000,000)",
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="every I/O, .parquet (row groups as they come) or .csv; default: none"
    )
    a = ap.parse_args(argv)
    if a.out is not None:
        check_target(a.out)  # before the simulation, which may run for minutes
        if a.out.exists() and a.trace.exists() and os.path.samefile(a.out, a.trace):
            raise ValueError(f"{a.out}: is the input trace; write to another file")
    r = stream(
        a.trace,
        a.preset,
        a.mode,
        a.replicas,
        a.hop_us,
        a.noise,
        a.precondition,
        a.seed,
        a.skip_bad,
        a.trace_format,
        a.repeat,
    )
    rows = write_stream(r, a.out)
    s = r.summary()
    if s["skipped"]:
        print(f"skipped {s['skipped']} bad line(s)", file=sys.stderr)
    print(summary(s))
    print(f"replayed {rows} I/Os" + (f", wrote them to {a.out}" if a.out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main, "iolearn sim ssd"))
