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
    "train-rand-mmap-4k": "fio-random",
}


def chosen(s: br.Settings) -> tuple[bf.Workload, ...]:
    """The training members: two in a quick run, a random reader and a scan whose best values
    are far apart (a model needs two values to choose between)."""
    if s.quick:
        return tuple(w for w in bf.TRAINING if w.name in ("readrandom", "train-seq-mmap"))
    return bf.TRAINING


def windows(path: Path, workload: str, kb: int) -> list[dict]:
    """The device's windows a probe recorded in ``path``, as rows of ``FEATURES_V3`` with the
    workload and the readahead in force (``FEATURES_V3_FIRST`` at least: a recording from before
    ``marker_share`` has the others only)."""
    rows = []
    with open(path, newline="") as fh:
        for n, r in enumerate(csv.DictReader(fh), start=2):
            if r.get("scope") != "device":
                continue
            try:
                names = [k for k in ra.FEATURES_V3 if k in r or k in ra.FEATURES_V3_FIRST]
                rows.append({"workload": workload, "ra_kb": kb, **{k: float(r[k]) for k in names}})
            except (KeyError, TypeError, ValueError) as e:
                raise RuntimeError(f"{path}:{n}: not a probe window with the scale-free columns ({e})") from None
    return rows


def recorded(out: Path, runs) -> dict[tuple[str, int, int], dict]:
    """The runs among ``runs`` (repeat, member, KiB) that an earlier trainset step in ``out``
    finished: a row of ``trainset-sweep.csv`` with the run's seed and its probe's windows in
    ``raw/``, keyed by (member, KiB, repeat). A ``--reuse`` run records only the others, so a
    member added to the family (or a step cut short) costs its own runs, not the hour."""
    path = out / "trainset-sweep.csv"
    if not path.exists():
        return {}
    wanted = {(w.name, kb, i) for i, w, kb in runs}
    done = {}
    for r in ra._read(path, need=("workload", "ra_kb", "ops_s", "seed")):
        key = (r["workload"], int(r["ra_kb"]), int(r["seed"]) - SEED)
        if key in wanted and (out / "raw" / f"trainset-{key[0]}-{key[1]}-{key[2]}.csv").is_file():
            done[key] = r
    return done


def trainset(s: br.Settings, tb: br.Testbed, db: Path, out: Path, resume: bool = False) -> dict:
    """Record, label and train; writes ``trainset-sweep.csv``, ``trainset-features.csv`` and
    the models under ``out``. Returns the training report. ``resume``: runs an earlier step
    recorded in ``out`` ([`recorded`]) are read, not run again."""
    files = bf.Files(s, tb)
    scratch = out / "raw"
    seconds = s.seconds if s.quick else bf.SECONDS
    members = chosen(s)
    # Every member's sweep once per repeat (seeds SEED, SEED + 1, ...), the repeats one after
    # another, so a slow spell of the machine falls on all values of a repeat alike and the
    # labels judge each value against vanilla of its own repeat (``readahead.label_values``).
    runs = [(i, w, kb) for i in range(s.repeats) for w in members for kb in s.sweep_kb]
    if resume:
        done = recorded(out, runs)
        print(f"trainset: {len(done)} of {len(runs)} runs read from {out / 'trainset-sweep.csv'}", file=sys.stderr)
    else:
        # A fresh step: an earlier step's sweep must not outlive it beside this one's windows
        # (a step cut short would leave them paired for a later --reuse).
        done = {}
        (out / "trainset-sweep.csv").unlink(missing_ok=True)
        (out / "trainset-sweep.parquet").unlink(missing_ok=True)
    bar = ra._bar(len(runs) - len(done), "trainset")
    rows, feats = [], []
    # The earlier runs not reached yet, written with each new row: a step cut short keeps them.
    ahead = dict(done)
    for i, w, kb in runs:
        seed = SEED + i
        fcsv = scratch / f"trainset-{w.name}-{kb}-{i}.csv"
        if (w.name, kb, i) in done:
            rows.append(ahead.pop((w.name, kb, i)))
            feats += windows(fcsv, w.name, kb)
            continue
        helper = br.probe_helper(tb, fcsv, per_file=False)
        ops = bf.run(s, tb, db, files, w, kb=kb, seed=seed, seconds=seconds, helper=helper, scratch=scratch)
        rows.append({"workload": w.name, "device": tb.name, "ra_kb": kb, "ops_s": sum(ops), "seed": seed})
        feats += windows(fcsv, w.name, kb)
        ra._write(out / "trainset-sweep", rows + list(ahead.values()))
        shown = sum(ops) / (1e6 if w.unit == "MB/s" else 1)
        print(f"  {w.name:<24}{kb:>6} KiB {shown:>12.0f} {w.unit}", file=sys.stderr)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    tb.set_readahead(br.VANILLA_KB)
    ra._write(out / "trainset-sweep", rows)
    ra._write(out / "trainset-features", feats)
    return retrain(out, s.quick, rows, feats, s.v3_features, s.v3_tied)


def retrain(out: Path, quick: bool, rows=None, feats=None, features=None, tied: str = "vanilla") -> dict:
    """Label and train from the sweep and windows a trainset step recorded in ``out`` (read
    from its CSVs unless given): the ``retrain`` step, for a new labelling rule, model or set
    of inputs (``features``, of ``FEATURES_V3``; None: every one the windows hold) or rule for
    tied values (``tied``, ``readahead.train_values``) without the hour of runs. Writes the
    models under ``out``; returns the training report."""
    if rows is None:
        rows = ra._read(out / "trainset-sweep.csv", need=("workload", "ra_kb", "ops_s", "seed"))
        feats = ra._read(out / "trainset-features.csv", need=("workload", "ra_kb", *(features or ra.FEATURES_V3_FIRST)))
    if features is None:
        features = tuple(k for k in ra.FEATURES_V3 if feats and k in feats[0])
    rep = ra.train_values(rows, feats, out, epochs=60 if quick else 100, groups=GROUPS, features=features, tied=tied)
    ra.print_held_out(rep)
    return rep
