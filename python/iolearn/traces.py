"""Block traces in Python: read any format the Rust readers know, keep them as Parquet.

python -m iolearn.traces convert IN.trace OUT.parquet
python -m iolearn.traces stats IN.parquet
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from . import _native
from ._cli import Parser
from ._cli import run as run_cli
from .safeio import atomic_open, check_target

# The largest trace `read` takes, as the Rust readers (`iolearn_trace::MAX_TRACE_BYTES`).
MAX_TRACE_BYTES = 4 << 30

COLUMNS = ("arrival_ns", "device", "offset", "size", "write", "latency_ns", "queue_depth")


def read(path, format: str | None = None, skip_bad: bool = False) -> dict[str, np.ndarray]:
    """A trace as numpy columns (``COLUMNS``; -1 where latency or queue depth is unknown).
    Parquet files written by :func:`write_parquet` are read back directly."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            meta = pq.ParquetFile(path).metadata
        except Exception as e:  # pyarrow raises its own types for unreadable files
            raise ValueError(f"{path}: not a readable Parquet file ({e})") from e
        # Encoded columns can expand a thousandfold (a run of zeros is a few bytes): bound what
        # the file holds in memory, 8 bytes per value, by the Rust readers' limit.
        size = meta.num_rows * len(COLUMNS) * 8
        if size > MAX_TRACE_BYTES:
            raise ValueError(
                f"{path}: {meta.num_rows} rows ({size / 2**30:.1f} GiB in memory), over the "
                f"{MAX_TRACE_BYTES >> 30} GiB limit of a trace"
            )
        try:
            t = pq.read_table(path)
        except Exception as e:  # pyarrow raises its own types for unreadable files
            raise ValueError(f"{path}: not a readable Parquet file ({e})") from e
        missing = [c for c in COLUMNS if c not in t.column_names]
        if missing:
            raise ValueError(f"{path}: not an iolearn trace (missing columns {missing})")
        return {c: t.column(c).to_numpy() for c in COLUMNS} | {"skipped": 0}
    return _native.read_trace(str(path), format, skip_bad)


def generate(**spec) -> dict[str, np.ndarray]:
    """A synthetic trace as numpy columns (``COLUMNS``). Settings as ``iolearn trace generate``:
    ios, iops, read_share, burst (bursts at this many times the mean rate; 1 = Poisson), on_ms,
    read_kib, write_kib, size_sigma, seq_share, zipf, span_gib, seed. A setting out of range is
    a ValueError naming it.

    >>> t = generate(ios=1000, iops=500, read_share=0.7, seed=3)
    >>> len(t["offset"])
    1000
    """
    return _native.generate_trace(**spec)


def write_parquet(cols: dict, out) -> None:
    """Write trace columns as Parquet, atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out)
    with atomic_open(out) as f:
        pq.write_table(pa.table({c: cols[c] for c in COLUMNS}), f)


def main(argv=None) -> int:
    ap = Parser(prog="python -m iolearn.traces", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="any trace format -> Parquet")
    c.add_argument("input", type=Path)
    c.add_argument("output", type=Path)
    c.add_argument("--format", default=None, choices=["linnos", "msr", "blkparse", "binary"])
    c.add_argument("--skip-bad", action="store_true")
    s = sub.add_parser("stats", help="counts and sizes of a trace (any format, Parquet included)")
    s.add_argument("input", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "convert":
        check_target(a.output)
        if a.output.exists() and os.path.samefile(a.input, a.output):
            raise ValueError(f"{a.output}: is the input trace; write to another file")
        if a.output.suffix != ".parquet":
            raise ValueError(f"{a.output}: convert writes Parquet; name the output *.parquet")
    cols = read(a.input, getattr(a, "format", None), getattr(a, "skip_bad", False))
    if a.cmd == "convert":
        write_parquet(cols, a.output)
        print(f"{len(cols['offset'])} I/Os -> {a.output} ({cols['skipped']} bad lines skipped)")
    else:
        n, w = len(cols["offset"]), int(cols["write"].sum())
        print(f"{n} I/Os, {n - w} reads, {w} writes, {cols['size'].sum() / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main, "python -m iolearn.traces"))
