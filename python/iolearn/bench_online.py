"""The online learner on this machine's kernel, on workloads nothing was built with.

The ``online`` step of ``iolearn bench readahead --real`` (issue 12, must-show 2). The learner
(``iolearn tune readahead --controller online``: no model and no sweep; it climbs readahead
values a factor of two apart by the watched processes' progress, inside the guardrail) runs
against vanilla (128 KiB) and the static oracle on members of the test family
(``bench_family``) that no model was trained on and that did not shape the learner: random
reads through mmap, sequential reads over eight files, and grep over the table files.

Each member: a sweep of static values with the family's seed and run length chooses the
oracle; then, in each repeat (its own seed), vanilla, the oracle and the learner, interleaved
and their order turned, runs of ``SECONDS``. Throughput is taken once a second (fio's bandwidth
log, or the files grep finished), so the learner's climb shows: ``t90`` is the first second
from which a ``SPAN``-second mean holds 90% of the oracle's gain over vanilla, against the
oracle's and vanilla's runs over the same seconds (the simulator's definition, in
``crates/readahead/examples/guard_online.rs``).

Then two phase runs per repeat, in turn: one learner through ``PHASES`` back to back, each
for ``PHASE_SECONDS``, without a pause, and vanilla through the same phases (``phases-vanilla``:
a later phase starts with the cache the earlier ones left, which a member's own vanilla run
does not). The learner's decisions over time are plotted; each phase's throughput is reported
against vanilla's in the same phase of the same repeat, and the oracle's gain from that
member's runs.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

from . import _plot
from . import bench_family as bf
from . import bench_real as br
from . import readahead as ra
from .safeio import read_text

MEMBERS = ("fio-mmap-rand", "fio-multifile", "grep")
QUICK = ("fio-mmap-rand",)
#: Seconds per run (``--online-seconds``): the learner's climb where progress is counted exactly
#: (a few steps of a settle window and a two-window block, each neighbour measured too) fits
#: several times over, as does a ``SPAN`` after it. Where it is counted in clock ticks (mapped
#: readers) a block runs up to 24 windows and a climb of three steps takes minutes: the goal's
#: horizon, 300 s, is then the run to judge it on.
SECONDS = 120
#: Seconds of the mean that ``t90`` is judged on.
SPAN = 30
PHASES = ("fio-mmap-rand", "fio-multifile", "fio-mmap-rand")
PHASE_SECONDS = 60
#: Share of the oracle's gain ``t90`` waits for.
SHARE = 0.9


def t90(online: list[float], vanilla: list[float], oracle: list[float], span: int = SPAN) -> int | None:
    """The first second from which the mean of ``online`` over ``span`` seconds holds
    ``SHARE`` of the oracle's gain over vanilla in the same seconds (or the oracle gains at most
    ``bench_family.GAIN_FLOOR`` there: nothing to learn). ``None``: never within the run."""
    n = min(len(online), len(vanilla), len(oracle))
    span = min(span, n)
    if span == 0:
        return None
    for t in range(n - span + 1):
        mv, mo, mx = (statistics.fmean(x[t : t + span]) for x in (vanilla, oracle, online))
        if mo <= mv * (1 + bf.GAIN_FLOOR) or mx - mv >= SHARE * (mo - mv):
            return t
    return None


def share(x: float, vanilla: float, oracle: float) -> float | None:
    """``x``'s share of the oracle's gain over vanilla; ``None`` where that gain is at most
    ``bench_family.GAIN_FLOOR``."""
    return (x - vanilla) / (oracle - vanilla) if oracle > vanilla * (1 + bf.GAIN_FLOOR) else None


def decisions(log: Path, start_kb: int) -> list[tuple[int, int]]:
    """(window, KiB) at the start and at every change of the device's value in a tuner's JSON
    log (the learner's moves and the guardrail's checks alike)."""
    out = [(0, start_kb)]
    for n, line in enumerate(log.read_text().splitlines(), 1):
        try:
            e = json.loads(line)
        except ValueError:
            raise RuntimeError(f"{log}:{n}: not a JSON log line: {line[:80]!r}") from None
        if e.get("event") == "change" and e.get("target") == "device":
            out.append((int(e["window"]), int(e["read_ahead_kb"])))
    return out


def learner(tb: br.Testbed, log: Path, state: Path, progress: str = "cpu", count: Path | None = None):
    """The tuner with the online learner deciding the device's value, watching the cgroup and
    judging by ``progress`` (``iolearn tune readahead --progress``; ``count``: the workload's
    own count, relayed, with ``ops``)."""
    # tuner_helper passes --verbose: a line a window with its progress and value.
    extra = br.progress_options(progress, count)
    return br.tuner_helper(tb, None, "device", log, state, controller="online", extra=extra)


def online(s: br.Settings, tb: br.Testbed, db: Path, out: Path) -> list[dict]:
    """The sweep (oracle), then vanilla, the oracle and the learner per member, interleaved
    within each repeat, then the phase run. Rows of ``online-runs.csv``."""
    files = bf.Files(s, tb)
    scratch = out / "raw"
    chosen = s.family or (QUICK if s.quick else MEMBERS)
    members = [w for w in bf.MEMBERS if w.name in chosen]
    seconds = s.online_seconds or (2 * s.seconds if s.quick else SECONDS)
    sweep_s = s.seconds if s.quick else bf.SECONDS
    phase_s = s.seconds if s.quick else PHASE_SECONDS
    phases = [next(w for w in bf.FAMILY if w.name == n) for n in PHASES]
    configs = ("vanilla", "oracle", "online")
    total = len(members) * (len(s.sweep_kb) + len(configs) * s.repeats) + (2 * s.repeats if s.phases else 0)
    bar = ra._bar(total, "online")
    rows: list[dict] = []

    def record(name: str, config: str, repeat: int, seed: int, kb: int, ops: list[float], series: list[float],
               unit: str, trace=None, starts=None, measure=None):  # fmt: skip
        # The measure the learner was given: ``ops`` only where a count was relayed.
        measure = measure or br.progress_options(s.progress)[1]
        rows.append({"workload": name, "config": config, "repeat": repeat, "seed": seed, "ra_kb": kb,
                     "ops": json.dumps(ops), "series": json.dumps([round(x) for x in series]), "unit": unit,
                     "decisions": json.dumps(trace or []), "phase_starts": json.dumps(starts or []),
                     "progress": measure if config in ("online", "phases") else ""})  # fmt: skip
        ra._write(out / "online-runs", rows)
        if bar is not None:
            bar.update(1)

    oracle = {}
    for w in members:
        sweep_row = lambda kb, ops, w=w: record(w.name, "sweep", -1, bf.SWEEP_SEED, kb, ops, [], w.unit)  # noqa: E731
        oracle[w.name] = bf.sweep_oracle(s, tb, db, files, w, seconds=sweep_s, scratch=scratch, record=sweep_row)
    # With --progress ops, each db_bench and one-process fio member's count relayed to the
    # learner (as in the family step: every configuration alike).
    relays = bf.relays_for(s, tb.workdir, rows, members)
    with bf.scratch_removed(scratch, relays):
        for i in range(s.repeats):
            for w in members:
                relay = relays.get(w.name)
                for c in configs[i % len(configs) :] + configs[: i % len(configs)]:
                    kb = oracle[w.name] if c == "oracle" else br.VANILLA_KB
                    log = scratch / f"online-{w.name}-{c}-{i}.log"
                    count = relay.count if relay else None
                    helper = learner(tb, log, scratch / "state", s.progress, count) if c == "online" else None
                    series: list[float] = []
                    ops = bf.run(s, tb, db, files, w, kb=kb, seed=i + 1, seconds=seconds, helper=helper,
                                 scratch=scratch, series=series, relay=relay)  # fmt: skip
                    trace = decisions(log, br.VANILLA_KB) if c == "online" else None
                    record(w.name, c, i, i + 1, kb, ops, series, w.unit, trace, measure="ops" if relay else None)
            # The phase runs, the learner's and vanilla's in turn: each through the phases, each
            # member's series one after the other.
            for config in ("phases", "phases-vanilla")[:: 1 if i % 2 == 0 else -1] if s.phases else ():
                log = scratch / f"online-{config}-{i}.log"
                helper = learner(tb, log, scratch / "state", s.progress) if config == "phases" else None
                bg = br.prepare(tb, br.VANILLA_KB, helper)
                series, ops, starts, t0 = [], [], [], time.time()
                try:
                    for w in phases:
                        # Seconds since the tuner started: its windows count from there.
                        starts.append(round(time.time() - (bg.started if bg else t0), 2))
                        part: list[float] = []
                        ops.append(sum(bf.execute(s, tb, db, files, w, seed=i + 1, seconds=phase_s, scratch=scratch,
                                                  series=part)))  # fmt: skip
                        # Each phase exactly phase_s long in the series (fio may log one second fewer).
                        series += (part + [part[-1] if part else 0.0] * phase_s)[:phase_s]
                    starts.append(round(time.time() - (bg.started if bg else t0), 2))  # the end
                finally:
                    if bg:
                        bg.stop()
                print(f"{config} run {i}: {time.time() - t0:.0f} s", file=sys.stderr)
                trace = decisions(log, br.VANILLA_KB) if bg else None
                record(">".join(PHASES), config, i, i + 1, br.VANILLA_KB, ops, series, "MB/s", trace, starts)
    if bar is not None:
        bar.close()
    tb.set_readahead(br.VANILLA_KB)
    return rows


#: The columns of ``online-runs.csv`` and what each holds; ``phase_starts`` and ``progress``
#: came later (an older file may lack them).
COLUMNS = {"workload": "text", "config": "text", "repeat": "int", "seed": "int", "ra_kb": "int", "ops": "numbers",
           "series": "numbers", "unit": "text", "decisions": "pairs", "phase_starts": "numbers",
           "progress": "measure"}  # fmt: skip


KINDS = {"text": "text", "int": "an integer", "numbers": "a JSON list of numbers", "pairs": "a JSON list of pairs",
         "measure": "cpu or auto"}  # fmt: skip


def _holds(value: str, kind: str) -> bool:
    if kind == "text":
        return bool(value)
    if kind == "measure":
        return value in br.PROGRESS
    if kind == "int":
        # Not int(): it takes "1_0", " 7 " and other scripts' digits, none of which this step writes.
        return re.fullmatch(r"-?[0-9]{1,18}", value) is not None
    try:
        v = json.loads(value)
    except ValueError:
        return False
    number = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)  # noqa: E731
    if kind == "numbers":
        return isinstance(v, list) and all(number(x) for x in v)
    return isinstance(v, list) and all(isinstance(x, list) and len(x) == 2 and all(map(number, x)) for x in v)


def load(path: Path) -> list[dict]:
    """The rows of an ``online-runs.csv`` (to summarize again an interrupted or earlier run),
    every field checked: a ``ValueError`` names the file, the line and the field."""
    rows = list(csv.DictReader(io.StringIO(read_text(path, ra.MAX_CSV_BYTES))))
    for n, r in enumerate(rows, 2):  # line 1 is the header
        for key, kind in COLUMNS.items():
            value = r.get(key)
            if key in ("phase_starts", "progress") and not value:
                continue
            if value is None:
                raise ValueError(f"{path}:{n}: no {key} field")
            if not _holds(value, kind):
                raise ValueError(f"{path}:{n}: {key} {value[:40]!r} is not {KINDS[kind]}")
        if r["config"] not in ("sweep", "vanilla", "oracle", "online", "phases", "phases-vanilla"):
            raise ValueError(f"{path}:{n}: config {r['config'][:40]!r} is not one of the step's")
    return rows


def _load(r: dict, key: str):
    return json.loads(r[key]) if isinstance(r[key], str) else r[key]


def summarize(rows: list[dict]) -> dict:
    """Per member: vanilla's median throughput; the oracle's and the learner's median [min, max]
    ratio to vanilla of the same repeat; the learner's share of the oracle's gain over the
    whole run and over its second half; t90 per repeat. Per phase: the learner's throughput
    against vanilla's in the same phase of the same repeat's vanilla phase run (runs from before
    there was one: that member's vanilla run), and the oracle's gain from that member's runs of
    the same repeat, over as many seconds."""
    out: dict = {"members": [], "phases": []}
    # The learner's measure of progress (files from before it was recorded have none).
    measures = {r.get("progress") for r in rows if r["config"] in ("online", "phases") and r.get("progress")}
    if measures:
        out["progress"] = ",".join(sorted(measures))
    runs = {(r["workload"], r["config"], int(r["repeat"])): r for r in rows if r["config"] != "sweep"}
    for name in dict.fromkeys(r["workload"] for r in rows if r["config"] not in ("sweep", "phases", "phases-vanilla")):
        repeats = sorted(i for (w, c, i) in runs if w == name and c == "vanilla")
        # Repeats with all three runs (a partial CSV of an interrupted run has some without).
        repeats = [i for i in repeats if all((name, c, i) in runs for c in ("oracle", "online"))]
        if not repeats:
            continue
        entry: dict = {"workload": name, "unit": runs[(name, "vanilla", repeats[0])]["unit"], "repeats": len(repeats)}
        entry["oracle_kb"] = int(runs[(name, "oracle", repeats[0])]["ra_kb"])
        got: dict[str, list] = {"oracle": [], "online": [], "share": [], "share_late": [], "t90": []}
        vanilla, lengths = [], []
        for i in repeats:
            v, o, x = (runs[(name, c, i)] for c in ("vanilla", "oracle", "online"))
            tv, to, tx = (sum(_load(r, "ops")) for r in (v, o, x))
            vanilla.append(tv)
            got["oracle"].append(to / tv)
            got["online"].append(tx / tv)
            got["share"].append(share(tx, tv, to))
            n = min(len(_load(r, "series")) for r in (v, o, x))
            sv, so, sx = (_load(r, "series")[:n] for r in (v, o, x))
            lengths.append(n)
            half = n // 2
            late = [statistics.fmean(s[half:]) if s[half:] else math.nan for s in (sv, so, sx)]
            got["share_late"].append(share(late[2], late[0], late[1]))
            got["t90"].append(t90(sx, sv, so))
        entry["vanilla"] = statistics.median(vanilla)
        for k in ("oracle", "online"):
            entry[k] = statistics.median(got[k])
            entry[k + "_range"] = [min(got[k]), max(got[k])]
        for k in ("share", "share_late"):
            known = [x for x in got[k] if x is not None and math.isfinite(x)]
            entry[k] = statistics.median(known) if known else None
        entry["t90"] = got["t90"]
        # Seconds of each run, as its per-second series has them (t90 is "never" past these).
        entry["seconds"] = min(lengths)
        out["members"].append(entry)
    for r in sorted((r for r in rows if r["config"] == "phases"), key=lambda r: int(r["repeat"])):
        i, names = int(r["repeat"]), r["workload"].split(">")
        series, n = _load(r, "series"), len(_load(r, "series")) // len(names)
        side = runs.get((r["workload"], "phases-vanilla", i))
        each = []
        for k, name in enumerate(names):
            mine = series[k * n : (k + 1) * n]
            # The member's own runs (a member of this run): the oracle's gain over vanilla,
            # from a cold cache.
            alone = [_load(runs[(name, c, i)], "series")[:n] for c in ("vanilla", "oracle") if (name, c, i) in runs]
            alone = alone if len(alone) == 2 and all(alone) and statistics.fmean(alone[0]) > 0 else None
            vanilla = _load(side, "series")[k * n : (k + 1) * n] if side else alone[0] if alone else None
            if not mine or not vanilla or statistics.fmean(vanilla) <= 0:
                each.append({"workload": name})
                continue
            mx, mv = statistics.fmean(mine), statistics.fmean(vanilla)
            e = {"workload": name, "ratio": mx / mv, "vanilla_from": "phases" if side else "member"}
            if alone:
                e["oracle"] = statistics.fmean(alone[1]) / statistics.fmean(alone[0])
                e["share"] = share(mx, mv, mv * e["oracle"])
            each.append(e)
        # Phase starts and the end in seconds since the tuner started (runs before they were
        # recorded: the phases' lengths, after the half second the tuner starts ahead).
        starts = _load(r, "phase_starts") if r.get("phase_starts") else []
        if len(starts) != len(names) + 1:
            starts = [0.5 + k * n for k in range(len(names) + 1)]
        out["phases"].append(
            {"repeat": i, "phase_seconds": n, "phases": each, "decisions": _load(r, "decisions"), "starts": starts}
        )
    return out


def print_table(rep: dict):
    if rep.get("progress"):
        print(f"the learner's progress signal: {rep['progress']}")
    print(f"{'online learner':<20}{'vanilla':>14}{'learner':>9}{'oracle':>8}{'KiB':>6}{'share':>7}{'late':>6}  t90 (s)")
    for r in rep["members"]:
        v = r["vanilla"] / (1e6 if r["unit"] == "MB/s" else 1)
        pct = lambda x: f"{x:.0%}" if x is not None else "-"  # noqa: E731
        t = ", ".join("never" if x is None else str(x) for x in r["t90"])
        print(
            f"{r['workload']:<20}{v:>10.0f} {r['unit']:<5}{r['online']:>7.2f}{r['oracle']:>8.2f}{r['oracle_kb']:>6}"
            f"{pct(r['share']):>7}{pct(r['share_late']):>6}  {t}"
        )
    for p in rep["phases"]:
        cells = "; ".join(
            e["workload"]
            + (f" {e['ratio']:.2f}x" if e.get("ratio") else "")
            + (f" (oracle {e['oracle']:.2f}x)" if e.get("oracle") else "")
            for e in p["phases"]
        )
        print(f"  phases, repeat {p['repeat']}: {cells}")


def plot(rows: list[dict], rep: dict, path: Path):
    """Repeat 0: each member's throughput per second (vanilla, oracle, learner), and the phase
    run's decisions over time (PNG)."""
    plt = _plot.pyplot()
    if plt is None or not rep["members"]:
        return
    runs = {(r["workload"], r["config"]): r for r in rows if int(r["repeat"]) == 0 and r["config"] != "sweep"}
    n = len(rep["members"]) + (1 if rep["phases"] else 0)
    fig, axes = plt.subplots(n, 1, figsize=(9, 2.6 * n), squeeze=False, layout="constrained")
    for ax, m in zip(axes[:, 0], rep["members"]):
        for c, style in (("vanilla", "grey"), ("oracle", "black"), ("online", "tab:blue")):
            r = runs.get((m["workload"], c))
            if r:
                label = f"oracle {m['oracle_kb']} KiB" if c == "oracle" else c
                scale = 1e6 if m["unit"] == "MB/s" else 1
                ax.plot([x / scale for x in _load(r, "series")], color=style, linewidth=1, label=label)
        ax.set_title(m["workload"], fontsize=9)
        ax.set_ylabel(m["unit"])
        ax.legend(fontsize=7, loc="lower right")
    if rep["phases"]:
        ax = axes[-1, 0]
        p = rep["phases"][0]
        starts = p["starts"]
        # The tuner's window w ends w seconds after it started; its last change may come after
        # the last phase ended (its stop).
        d = [x for x in p["decisions"] if x[0] <= starts[-1]]
        d.append([starts[-1], d[-1][1]])
        ax.step([x[0] for x in d], [x[1] for x in d], where="post", color="tab:blue")
        ax.set_yscale("log", base=2)
        ax.set_ylabel("read_ahead_kb")
        for start, e in zip(starts, p["phases"]):
            ax.axvline(start, color="grey", linewidth=0.6)
            # x in seconds, y a share of the axes' height: inside it whatever the values.
            ax.text(start + 1, 0.95, e["workload"], fontsize=7, va="top", transform=ax.get_xaxis_transform())
        ax.set_title("the learner's value through the phases (repeat 0)", fontsize=9)
    axes[-1, 0].set_xlabel("seconds")
    _plot.save(fig, path)
