"""The scale-free model's training data, recorded on this machine's kernel.

The ``trainset`` step of ``iolearn bench readahead --real`` (issue 12, "right on workloads it
never saw"). Every member of ``bench_family.TRAINING`` runs at each static readahead of the
sweep, once per ``--repeats``, while ``iolearn probe readahead`` records the device's windows; each window's
scale-free inputs (``readahead.FEATURES_V3``) are labelled with its workload's value
(``readahead.label_values``) and ``readahead.train_values`` trains ``readahead_v3.iolm``. None of
the test family (``bench_family.FAMILY``) is run here, so the family step's ``v3`` column is the
model on workloads it never saw; the report's ``held_out`` table is the same question asked
offline of the training family, one member (with its near twins, ``GROUPS``) left out at a
time.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from . import bench_family as bf
from . import bench_real as br
from . import readahead as ra

#: The seed of the first repeat of the training runs (``SEED + i`` for repeat ``i``; no run of
#: the family step uses these).
SEED = 2000
#: Near twins, left out together in the held-out estimate (``readahead.train_values``): one
#: would answer for the other.
GROUPS = {
    "readrandom": "db-random",
    "readrandomwriterandom": "db-random",
    "readseq": "db-scan",
    "readreverse": "db-scan",
    "train-seq-128k": "fio-sequential",
    "train-seq-mmap": "fio-sequential",
    "train-roundrobin": "fio-sequential",
    "train-rand-16k": "fio-random",
    "train-rand-mmap-small": "fio-random",
    "train-rand-mmap-big": "fio-random",
}


def chosen(s: br.Settings) -> tuple[bf.Workload, ...]:
    """The training members: two in a quick run, a random reader and a scan whose best values
    are far apart (a model needs two values to choose between)."""
    if s.quick:
        return tuple(w for w in bf.TRAINING if w.name in ("readrandom", "train-seq-mmap"))
    return bf.TRAINING


def windows(path: Path, workload: str, kb: int) -> list[dict]:
    """The device's windows a probe recorded in ``path``, as rows of ``FEATURES_V3`` with the
    workload and the readahead in force."""
    rows = []
    with open(path, newline="") as fh:
        for n, r in enumerate(csv.DictReader(fh), start=2):
            if r.get("scope") != "device":
                continue
            try:
                rows.append({"workload": workload, "ra_kb": kb, **{k: float(r[k]) for k in ra.FEATURES_V3}})
            except (KeyError, TypeError, ValueError) as e:
                raise RuntimeError(f"{path}:{n}: not a probe window with the scale-free columns ({e})") from None
    return rows


def trainset(s: br.Settings, tb: br.Testbed, db: Path, out: Path) -> dict:
    """Record, label and train; writes ``trainset-sweep.csv``, ``trainset-features.csv`` and
    the models under ``out``. Returns the training report."""
    files = bf.Files(s, tb)
    scratch = out / "raw"
    seconds = s.seconds if s.quick else bf.SECONDS
    members = chosen(s)
    # Every member's sweep once per repeat (seeds SEED, SEED + 1, ...), the repeats one after
    # another, so a slow spell of the machine falls on all values of a repeat alike and the
    # labels judge each value against vanilla of its own repeat (``readahead.label_values``).
    runs = [(i, w, kb) for i in range(s.repeats) for w in members for kb in s.sweep_kb]
    bar = ra._bar(len(runs), "trainset")
    rows, feats = [], []
    for i, w, kb in runs:
        seed = SEED + i
        fcsv = scratch / f"trainset-{w.name}-{kb}-{i}.csv"
        helper = br.probe_helper(tb, fcsv, per_file=False)
        ops = bf.run(s, tb, db, files, w, kb=kb, seed=seed, seconds=seconds, helper=helper, scratch=scratch)
        rows.append({"workload": w.name, "device": tb.name, "ra_kb": kb, "ops_s": sum(ops), "seed": seed})
        feats += windows(fcsv, w.name, kb)
        ra._write(out / "trainset-sweep", rows)
        shown = sum(ops) / (1e6 if w.unit == "MB/s" else 1)
        print(f"  {w.name:<24}{kb:>6} KiB {shown:>12.0f} {w.unit}", file=sys.stderr)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    tb.set_readahead(br.VANILLA_KB)
    ra._write(out / "trainset-features", feats)
    rep = ra.train_values(rows, feats, out, epochs=60 if s.quick else 100, groups=GROUPS)
    ra.print_held_out(rep)
    return rep
