"""Replay a block trace on replicated simulated SSDs; per-I/O latencies with the device state.

The Python side of ``iolearn sim ssd`` (the command itself is the Rust CLI's): the streamed
replay as numpy chunks, a whole replay as columns, and the columns written as Parquet or CSV.

>>> r = stream("trace.txt", preset="consumer", replicas=1)  # doctest: +SKIP
>>> for chunk in chunks(r): ...  # doctest: +SKIP
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from . import _native
from .safeio import atomic_open

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


def write_table(cols: dict, out: Path) -> None:
    """Parquet when the name ends in .parquet (pyarrow), else CSV; atomically."""
    write_chunks([cols], out)
