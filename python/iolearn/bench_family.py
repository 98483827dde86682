"""The readahead tuner on workloads it was never trained on, on this machine's kernel.

The ``family`` step of ``iolearn bench readahead --real`` (issue 12, must-show 1). The models
were trained on four db_bench workloads (``readahead.TRAIN_WORKLOADS``); none of these was
used to build anything:

- db_bench beyond the six: short range scans from random keys, a reader beside a rate-limited
  writer, random reads from four threads;
- fio: a strided read, a mix of sequential and random reads, sequential reads interleaved over
  eight files, random reads through mmap, random direct reads (readahead cannot help: the
  tuner must do no harm), and three processes at once (sequential, random over four files,
  strided over four others);
- command-line tools: ``cp`` and ``grep`` over the database's table files, one process per
  file, as a backup script or a search would.

Each workload: a sweep of static values (one run each, with its own random seed) chooses the
oracle; then vanilla (128 KiB), the tuner per device, the tuner per file and the oracle, the
four interleaved within each repeat, each repeat with a seed the sweep did not use.
Throughput is ops/s (db_bench), bytes/s per job (fio) or bytes/s over the files processed (the
tools); a workload of several processes scores each against its own vanilla and averages.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import bench_real as br
from . import readahead as ra

#: The seed of the sweep that chooses the oracle; repeat ``i`` of the evaluation uses ``i + 1``.
SWEEP_SEED = 1000
#: Minimum gain of the oracle over vanilla for the "share of the oracle's gain" goal (issue 12).
GAIN_FLOOR = 0.10
#: LEAP as a prefetcher on the kernel (``iolearn tune readahead``; the marked form LEAP released
#: cannot run from user space), KML's baseline beside the tuner with ``--leap``.
LEAP = "leap-prefetch-unmarked"
#: Configurations scored against vanilla, in the table's order.
SCORED = (
    "nn",
    "nn_file",
    "oracle",
    "leap",
    "kml",
    "v3",
    "v3_dry",
    "v3_refine",
    "nn_file_refine",
    "nn_file_v3",
    "vanilla_again",
)
#: Configurations run only when ``--family-configs`` names them, for the floor's measurement:
#: ``vanilla_again``, a second vanilla run in each repeat (the measurement's own spread: what
#: the ratio of two runs of the same thing shows), and ``v3_dry``, the v3 tuner attached with
#: ``--dry-run`` (its probes, guardrail and model running, nothing set: what watching costs,
#: apart from what deciding does); ``v3_refine``, the v3 tuner whose values the guardrail
#: kept with a gain the online learner refines (``--refine-online``); and ``nn_file_refine``,
#: KML's per-file network with the online learner deciding the device's value beside it
#: (``--per-file --refine-online``); and ``nn_file_v3``, the same network with the v3 model
#: deciding the device's value beside it, refined (``--device-model``).
ON_REQUEST = ("vanilla_again", "v3_dry", "v3_refine", "nn_file_refine", "nn_file_v3")
#: The configurations that run the v3 model.
V3_CONFIGS = ("v3", "v3_dry", "v3_refine", "nn_file_v3")
#: The scale-free model the trainset step writes (``bench_trainset``), run per device as
#: configuration ``v3`` where it exists.
V3_MODEL = "readahead_v3.iolm"
#: Seconds per run, sweep and evaluation alike (the cold-cache share of a run depends on its
#: length, so the oracle is chosen on runs as long as those it is judged on). Shorter than the
#: other steps' 20 s to fit 209 runs in an hour; the tuner acts within its first 3-5 windows.
#: ``--family-seconds`` runs members longer: a tuner left running, its start and its checks of
#: vanilla a smaller share.
SECONDS = 15
#: Seconds at the start of every run that the "after the start" ratios leave out: the tuner's
#: start (the guardrail's first vanilla block of four 1-s windows, then its first change)
#: takes a fifth to a third of a 15-s run, a share a tuner left running never pays again.
START_S = 5


@dataclass(frozen=True)
class Workload:
    """One member of the family. ``kind``: ``db`` (a db_bench benchmark name, or an alias of
    ``bench_real.ALIASES``), ``fio`` (``jobs``: one option list per fio job, each its own
    process) or ``tool`` (``tool``: ``cp`` or ``grep`` over the database's table files)."""

    name: str
    kind: str
    jobs: tuple[tuple[str, ...], ...] = ()
    tool: str = ""
    unit: str = "ops/s"
    #: A db_bench workload that writes runs on a fresh clone of the database each time (the
    #: others open it read-only): every run, in any order, reads the same database.
    writes: bool = False
    about: str = field(default="", compare=False)


def _fio(name: str, *jobs: tuple[str, ...], about: str) -> Workload:
    return Workload(name, "fio", jobs, unit="MB/s", about=about)


FAMILY = (
    Workload("rangescan", "db", about="db_bench seekrandom --seek_nexts=1000: 200 KB scans from random keys"),
    Workload(
        "readwhilewriting", "db", writes=True, about="db_bench: a random reader beside a writer limited to 1 MB/s"
    ),
    Workload("readrandom-4t", "db", about="db_bench readrandom from four threads"),
    _fio("fio-strided", ("file=big", "rw=read:28k", "bs=4k"), about="4 KiB read, 28 KiB skipped (pread)"),
    _fio(
        "fio-mixed",
        ("file=big", "rw=randread", "percentage_random=50", "bs=4k"),
        about="half sequential, half random 4 KiB preads",
    ),
    _fio(
        "fio-multifile",
        ("file=small", "rw=read", "bs=4k", "file_service_type=random:16"),
        about="sequential preads over eight files, switching file every 16 reads",
    ),
    _fio("fio-mmap-rand", ("file=big", "rw=randread", "bs=4k", "ioengine=mmap"), about="random reads by mmap"),
    _fio("fio-direct-rand", ("file=big", "rw=randread", "bs=4k", "direct=1"), about="random O_DIRECT reads"),
    _fio(
        "fio-3proc",
        ("file=big", "rw=read", "bs=16k"),
        ("file=small:0-3", "rw=randread", "bs=4k"),
        ("file=small:4-7", "rw=read:60k", "bs=4k"),
        about="three processes: sequential, random over four files, strided over four others",
    ),
    Workload("cp", "tool", tool="cp", unit="MB/s", about="cp of each table file to a new file, one process per file"),
    Workload("grep", "tool", tool="grep", unit="MB/s", about="grep -F over each table file, one process per file"),
)
QUICK = ("fio-strided", "grep")
#: KML's six db_bench workloads (the evaluate step's, ``bench_real.WORKLOADS``), run by the
#: family step when ``--family`` names them: the tuners judged on them as on the test family,
#: each against its own sweep (the v3 model was trained on four of them, ``TRAINING``). The
#: writers run on a clone of the database, as ``readwhilewriting`` does.
KML_SIX = tuple(
    Workload(n, "db", writes=n in ("readrandomwriterandom", "updaterandom", "mixgraph"), about=f"db_bench {n}")
    for n in br.WORKLOADS
)
#: Every workload ``--family`` can name.
MEMBERS = FAMILY + KML_SIX

#: The training family of the scale-free model (``iolearn bench readahead --real --steps
#: trainset``, ``bench_trainset``): the four db_bench workloads KML's models were trained on,
#: and fio jobs of other sizes, strides, files and mixes than any member of ``FAMILY``, which
#: stays the test family: nothing of it is used to train.
TRAINING = (
    Workload("readrandom", "db", about="db_bench readrandom"),
    Workload("readrandomwriterandom", "db", writes=True, about="db_bench readrandomwriterandom"),
    Workload("readseq", "db", about="db_bench readseq"),
    Workload("readreverse", "db", about="db_bench readreverse"),
    _fio("train-seq-128k", ("file=big", "rw=read", "bs=128k"), about="sequential 128 KiB preads"),
    _fio("train-seq-mmap", ("file=big", "rw=read", "bs=8k", "ioengine=mmap"), about="sequential reads by mmap"),
    _fio("train-rand-16k", ("file=big", "rw=randread", "bs=16k"), about="random 16 KiB preads"),
    _fio(
        "train-rand-mmap-small",
        ("file=small:0-3", "rw=randread", "bs=8k", "ioengine=mmap"),
        about="random 8 KiB reads by mmap over four files",
    ),
    _fio(
        "train-rand-mmap-big",
        ("file=small", "rw=randread", "bs=16k", "ioengine=mmap"),
        about="random 16 KiB reads by mmap over eight files, together twice the memory group",
    ),
    # A random mapped reader's best value follows its read size (fault-around maps ra_pages
    # around each fault: 16 KiB reads gained most at 64 KiB, 4 KiB reads at 16 KiB), so the
    # training family has both sizes.
    _fio(
        "train-rand-mmap-4k",
        ("file=small", "rw=randread", "bs=4k", "ioengine=mmap"),
        about="random 4 KiB reads by mmap over eight files, together twice the memory group",
    ),
    _fio("train-strided-124k", ("file=big", "rw=read:124k", "bs=4k"), about="4 KiB read, 124 KiB skipped"),
    _fio(
        "train-roundrobin",
        ("file=small:4-7", "rw=read", "bs=64k", "file_service_type=roundrobin"),
        about="sequential 64 KiB preads over four files in turn",
    ),
    _fio(
        "train-mostly-seq",
        ("file=big", "rw=randread", "percentage_random=20", "bs=8k"),
        about="8 KiB preads, four in five sequential",
    ),
)


class Files:
    """The fio data files on the test bed: ``big`` (twice the memory group) and eight
    ``small`` files (together twice the memory group), written once with real data (an
    fallocated file would read as zeros without I/O)."""

    def __init__(self, s: br.Settings, tb: br.Testbed):
        self.dir = tb.mnt / "family"
        self.big = self.dir / "big"
        self.small = [self.dir / f"small.{i}" for i in range(8)]
        self.dir.mkdir(exist_ok=True)
        mb = s.memory_mb * 2
        for path, size in [(self.big, mb)] + [(p, mb // 8) for p in self.small]:
            if not path.exists() or path.stat().st_size != size << 20:
                br.sh(
                    "fio", "--name=layout", f"--filename={path}", "--rw=write", "--bs=1M", f"--size={size}M",
                    "--fallocate=none", "--end_fsync=1", "--output=/dev/null",
                )  # fmt: skip

    def named(self, spec: str) -> str:
        """fio's ``--filename`` for ``big``, ``small`` (all eight) or ``small:A-B``."""
        if spec == "big":
            return str(self.big)
        if spec == "small":
            return ":".join(map(str, self.small))
        lo, hi = spec.removeprefix("small:").split("-")
        return ":".join(map(str, self.small[int(lo) : int(hi) + 1]))


#: How often a relayed fio run reports its jobs' bytes so far (``--status-interval``): ten
#: reports a 1-s window, so a window's count is exact to a tenth, for a full JSON report each
#: time (a few KiB, well under a millisecond of fio's time).
FIO_STATUS = "100ms"


def fio_args(w: Workload, files: Files, seconds: float, seed: int, out: Path | None,
             bw_log: Path | None = None) -> list[str]:  # fmt: skip
    """fio's command line for ``w``, its JSON report written to ``out``; with ``out`` None,
    the report goes to stdout after a status report every [`FIO_STATUS`] (a [`Relay`] reads
    them as they come). With ``bw_log``, each job also logs its bandwidth once a second to
    ``<bw_log>_bw.<job>.log`` ([`fio_series`])."""
    args = ["fio", "--output-format=json"]
    args += [f"--output={out}"] if out is not None else [f"--status-interval={FIO_STATUS}"]
    for i, job in enumerate(w.jobs):
        opts = dict(o.split("=", 1) for o in job)
        args += [f"--name={w.name}-{i}", f"--filename={files.named(opts.pop('file'))}"]
        # fadvise_hint=0: fio would otherwise advise the kernel (POSIX_FADV_RANDOM for a random
        # job, which turns readahead off whatever the device's value), as applications rarely do.
        args += ["--ioengine=psync", "--fadvise_hint=0", "--time_based", f"--runtime={int(seconds)}"]
        args += [f"--randseed={seed}"]
        if bw_log is not None:
            args += [f"--write_bw_log={bw_log}", "--log_avg_msec=1000"]
        args += [f"--{k}={v}" for k, v in opts.items()]
    return args


def fio_series(bw_log: Path, jobs: int) -> list[float]:
    """Bytes/s per second of a run, the jobs summed, from fio's bandwidth logs (one line per
    second and job: end of the interval in ms, KiB/s, ...). A job's last, partial interval
    (logged under a second after the one before) is left out. The logs are removed."""
    per_s: dict[int, float] = {}
    for j in range(1, jobs + 1):
        path = bw_log.with_name(f"{bw_log.name}_bw.{j}.log")
        try:
            text = path.read_text()
        except OSError as e:
            raise RuntimeError(f"{path}: fio wrote no bandwidth log ({e.strerror})") from None
        last_ms = -math.inf
        for n, line in enumerate(text.splitlines(), 1):
            try:
                ms, kib = (float(x) for x in line.split(",")[:2])
            except ValueError:
                raise RuntimeError(f"{path}:{n}: not a fio bandwidth log line: {line[:80]!r}") from None
            if ms - last_ms < 500:
                continue
            last_ms = ms
            second = max(0, round(ms / 1000) - 1)
            per_s[second] = per_s.get(second, 0.0) + kib * 1024
        path.unlink()
    return [per_s.get(i, 0.0) for i in range(max(per_s, default=-1) + 1)]


def bin_seconds(done: list[tuple[float, int]], seconds: float) -> list[float]:
    """Bytes/s per second of a run of ``seconds`` from (seconds since the start, bytes finished
    then) pairs. A file finished after the end (started before it) counts in the last whole
    second: a last, partial second would read as a collapse at the end of every run."""
    last = max(int(seconds), 1) - 1
    per_s: list[float] = []
    for t, n in done:
        i = min(int(t), last)
        per_s += [0.0] * (i + 1 - len(per_s))
        per_s[i] += n
    return per_s


#: db_bench benchmarks whose thread 0 writes beside the readers; its own report leaves it out.
WRITER_FIRST = frozenset({"readwhilewriting", "readwhilemerging"})

DB_INTERVAL = re.compile(
    r"\.\.\. thread (\d+): \((\d+),\d+\) ops and \([\d.]+,[\d.]+\) ops/second in \(([\d.]+),([\d.]+)\) seconds"
)


def db_series(stderr: str, seconds: float, *, skip_writer: bool = False) -> list[float]:
    """Operations/s per second of a db_bench run from its ``--stats_interval_seconds`` reports
    (``... thread T: (interval ops,total) ops and (...) ops/second in (interval s,total s)
    seconds``), every reading thread summed (thread 0 left out where it is the writer, as
    db_bench's own report does). A report's operations are spread evenly over its interval;
    what runs past the last whole second counts in it, as ``bin_seconds`` does."""
    last = max(int(seconds), 1) - 1
    per_s = [0.0] * (last + 1)
    found = False
    for m in DB_INTERVAL.finditer(stderr):
        thread, ops, span, end = int(m[1]), int(m[2]), float(m[3]), float(m[4])
        if skip_writer and thread == 0:
            continue
        found = True
        start = max(end - span, 0.0)
        if end <= start:
            per_s[min(int(end), last)] += ops
            continue
        rate = ops / (end - start)
        t = start
        while t < end:
            i = min(int(t), last)
            step = min(end, math.floor(t) + 1.0) - t
            per_s[i] += rate * step
            t += step
    if not found:
        raise ValueError("db_bench printed no interval reports (--stats_interval_seconds)")
    return per_s


@dataclass(frozen=True)
class Relay:
    """A workload's own count of what it did, relayed to the tuner (``--progress ops``):
    db_bench reports each thread's operations every ``every`` of them (``--stats_interval``,
    the clock not consulted), fio its jobs' bytes so far every [`FIO_STATUS`] (``every`` 0),
    and the sum so far (db_bench's reading threads' operations, fio's KiB read) is written to
    ``count`` after each report, whole and renamed into place (the tuner's ``--progress
    ops:COUNT``)."""

    count: Path
    every: int

    #: Reports a second the relay aims at: a 1-s window's count is then exact to a twentieth.
    PER_SECOND = 20

    @staticmethod
    def for_rate(count: Path, ops_per_s: float, threads: int = 1) -> Relay:
        """A relay for a workload that runs at about ``ops_per_s`` (its sweep's vanilla run)
        from ``threads`` threads, each of which reports its own operations."""
        return Relay(count, max(1, round(ops_per_s / threads / Relay.PER_SECOND)))

    def reset(self):
        """The count at zero, before the tuner starts (a count left from the last run would
        read as a restart)."""
        self.write(0)

    def write(self, total: int):
        tmp = self.count.with_name(self.count.name + ".tmp")
        tmp.write_text(f"{total}\n")
        os.replace(tmp, self.count)

    @staticmethod
    def _start(cmd: list[str]) -> subprocess.Popen:
        # Its own process group, so a relay that fails mid-run stops fio's job processes too
        # (fio forks one per job), not only the one it started.
        return subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", start_new_session=True)  # fmt: skip

    @staticmethod
    def _stop(p: subprocess.Popen):
        """Stop ``p``'s whole process group: SIGTERM first (fio stops its jobs on it), then
        SIGKILL for what is left after five seconds."""
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, None)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                return
            try:
                p.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def run(self, cmd: list[str], *, skip_writer: bool) -> subprocess.CompletedProcess:
        """``cmd`` (db_bench with this relay's ``--stats_interval``), its reports relayed as
        they come; its output, as ``br.sh`` gives it, once it exits."""
        total = 0

        def each(line: str):
            nonlocal total
            m = DB_INTERVAL.search(line)
            if m and not (skip_writer and m[1] == "0"):
                total += int(m[2])
                self.write(total)

        return self._follow(cmd, each, stderr=True)

    def run_fio(self, cmd: list[str]) -> subprocess.CompletedProcess:
        """``cmd`` (fio with ``--status-interval`` and its JSON on stdout, [`fio_args`]), the
        KiB its jobs have read relayed after each status report; its output once it exits."""
        doc: list[str] = []

        def each(line: str):
            doc.append(line)
            # fio prints each report indented, closing it with a "}" alone at the start of a
            # line; a line that ends none is only gathered.
            if line.startswith("}") and (reports := fio_reports("".join(doc))):
                doc.clear()
                self.write(fio_kib_read(reports[-1]))

        return self._follow(cmd, each, stderr=False)

    def _follow(self, cmd: list[str], each, *, stderr: bool) -> subprocess.CompletedProcess:
        """Run ``cmd``, passing each line of its stderr (else its stdout) to ``each`` as it
        comes, the other stream drained beside; its output, as ``br.sh`` gives it, once it
        exits (CalledProcessError where it failed)."""
        out: list[str] = []
        err: list[str] = []
        followed, drained = (err, out) if stderr else (out, err)
        with self._start(cmd) as p:
            other = p.stdout if stderr else p.stderr
            reader = threading.Thread(target=lambda: drained.append(other.read()), daemon=True)
            reader.start()
            try:
                for line in p.stderr if stderr else p.stdout:
                    followed.append(line)
                    each(line)
            except BaseException:
                # Nobody would drain its pipes: stop it (and fio's job processes) rather than
                # leave it blocked on them.
                self._stop(p)
                raise
            reader.join()
            code = p.wait()
        if code:
            raise subprocess.CalledProcessError(code, cmd, "".join(out), "".join(err))
        return subprocess.CompletedProcess(cmd, code, "".join(out), "".join(err))


def relays_for(s: br.Settings, workdir: Path, rows: list[dict], members) -> dict[str, Relay]:
    """With ``--progress ops``, a [`Relay`] per db_bench member and one-process fio member of
    ``members`` (by name), a db_bench member's step set by the rate its sweep ran at vanilla
    (the ``sweep`` rows of ``rows``, as the family and online steps record them); none
    otherwise. The tools (cp, grep) count nothing of their own, and a fio member of several
    processes stays judged process by process (``auto``): a relayed count is one sum, in which
    a scan's bytes would hide its random readers' loss. One count file, in ``workdir``: the
    members run one at a time."""
    if s.progress != "ops":
        return {}
    at_vanilla = {r["workload"]: json.loads(r["ops"]) for r in rows
                  if r["config"] == "sweep" and r["ra_kb"] == br.VANILLA_KB}  # fmt: skip
    relays = {w.name: Relay.for_rate(relay_count(workdir), sum(at_vanilla[w.name]), db_threads(s, w))
              for w in members if w.kind == "db"}  # fmt: skip
    return relays | {w.name: r for w in members if (r := fio_relay(s, workdir, w)) is not None}


def relay_count(workdir: Path) -> Path:
    """The one count file every relay writes (the members run one at a time)."""
    return workdir / "ops-count"


@contextlib.contextmanager
def scratch_removed(scratch: Path, relays: dict[str, Relay]):
    """Runs whose scratch files (fio's JSON in ``scratch``, the relays' count files in the
    work directory) are removed when they end, also when one fails or is interrupted."""
    try:
        yield
    finally:
        (scratch / "fio.json").unlink(missing_ok=True)
        for relay in relays.values():
            relay.count.unlink(missing_ok=True)


def fio_relay(s: br.Settings, workdir: Path, w: Workload) -> Relay | None:
    """The [`Relay`] of ``w`` where it is a one-process fio member and ``--progress ops`` asks
    for counts (it needs no sweep: fio reports on the clock); None otherwise."""
    return Relay(relay_count(workdir), 0) if s.progress == "ops" and w.kind == "fio" and len(w.jobs) == 1 else None


def db_threads(s: br.Settings, w: Workload) -> int:
    """The threads db_bench runs ``w`` with (its arguments' last ``--threads``)."""
    given = [a.split("=", 1)[1] for a in br.db_args(s, Path("db"), w.name, 1) if a.startswith("--threads=")]
    return int(given[-1]) if given else 1


def db_series_or_flat(stderr: str, ops: float, seconds: float, *, skip_writer: bool, name: str) -> list[float]:
    """[`db_series`], or where db_bench printed no interval report, ``ops`` (the run's
    operations/s) in every second, with a note. db_bench checks its clock every 1,000
    operations of a thread (it sets --stats_interval to 1,000 when --stats_interval_seconds is
    given), so a thread that does fewer in the run (a scan on a slow device) reports nothing."""
    try:
        return db_series(stderr, seconds, skip_writer=skip_writer)
    except ValueError:
        print(
            f"{name}: db_bench printed no interval reports (fewer than 1,000 operations a thread); "
            f"its {ops:.0f} ops/s taken as the throughput of every second",
            file=sys.stderr,
        )
        return [ops] * max(int(seconds), 1)


def fio_reports(text: str) -> list[dict]:
    """The reports fio printed as JSON, in order: its status reports (``--status-interval``),
    then its report of the whole run. fio may print notes between and around them (a brace in
    a note is skipped), and a report cut short is no report."""
    docs, at, decoder = [], text.find("{"), json.JSONDecoder()
    while at >= 0:
        try:
            doc, end = decoder.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        if isinstance(doc, dict) and "jobs" in doc:
            docs.append(doc)
        at = text.find("{", end)
    return docs


def fio_throughput(text: str) -> list[float]:
    """Each job's read bandwidth (bytes/s) from fio's JSON report of the whole run (its last
    document)."""
    docs = fio_reports(text)
    if not docs:
        raise RuntimeError(f"fio printed no JSON report: {text[:200]!r}")
    return [float(j["read"]["bw_bytes"]) for j in docs[-1]["jobs"]]


def fio_kib_read(report: dict) -> int:
    """The KiB fio's jobs have read so far, summed, from one of its JSON reports."""
    return sum(int(j["read"]["io_bytes"]) for j in report["jobs"]) // 1024


def table_files(db: Path) -> list[Path]:
    return sorted(db.glob("*.sst"))


def run_tool(
    tb: br.Testbed, w: Workload, db: Path, seconds: float, seed: int, series: list | None = None
) -> list[float]:
    """``cp`` or ``grep`` over the table files, one process per file (in the memory group),
    starting at a file chosen by ``seed``, until ``seconds`` have passed. Bytes read per
    second; ``series``, when given, receives them per second (each file counted when done)."""
    files = table_files(db)
    if not files:
        raise RuntimeError(f"{db}: no table files for {w.name}")
    copy = tb.mnt / "family" / "copy"
    i, t0, finished = seed, time.time(), []
    while time.time() - t0 < seconds:
        f = files[i % len(files)]
        if w.tool == "cp":
            br.sh(*tb.in_cgroup(["cp", "--reflink=never", str(f), str(copy)]))
            copy.unlink()
        else:
            # No match: grep reads the whole file and exits 1.
            p = br.sh(*tb.in_cgroup(["grep", "-c", "-F", "iolearn-absent-needle", str(f)]), check=False)
            if p.returncode not in (0, 1):
                raise RuntimeError(f"grep {f} exited {p.returncode}: {p.stderr.strip()}")
        finished.append((time.time() - t0, f.stat().st_size))
        i += 1
    if series is not None:
        series[:] = bin_seconds(finished, seconds)
    return [sum(n for _, n in finished) / (time.time() - t0)]


def clone_db(db: Path) -> Path:
    """A writable copy of ``db``: table files hard-linked (RocksDB never changes one once
    written, and deletes it by unlinking), the rest (manifest, logs, options) copied."""
    clone = db.parent / (db.name + "-writable")
    shutil.rmtree(clone, ignore_errors=True)
    clone.mkdir()
    for f in db.iterdir():
        if f.suffix == ".sst":
            os.link(f, clone / f.name)
        else:
            shutil.copy2(f, clone / f.name)
    return clone


def run(s: br.Settings, tb: br.Testbed, db: Path, files: Files, w: Workload, *, kb: int, seed: int,
        seconds: float, helper=None, scratch: Path, series: list | None = None,
        costs: list | None = None, relay: Relay | None = None) -> list[float]:  # fmt: skip
    """One run of ``w`` after dropping caches, the device at ``kb`` and the helper (the tuner)
    attached. Each member process's throughput; ``series``, when given, receives the
    throughput per second (fio and the tools; the members summed), ``costs`` the helper's CPU
    seconds and wall seconds; ``relay``: a db_bench or fio member's count relayed as it runs."""
    clone = clone_db(db) if w.writes else None
    if relay is not None:
        relay.reset()
    bg = br.prepare(tb, kb, helper)
    try:
        return execute(s, tb, clone or db, files, w, seed=seed, seconds=seconds, scratch=scratch, series=series,
                       relay=relay)  # fmt: skip
    finally:
        if bg:
            _, cpu, wall = bg.stop()
            if costs is not None:
                costs[:] = [cpu, wall]
        if clone:
            shutil.rmtree(clone)


def execute(s: br.Settings, tb: br.Testbed, db: Path, files: Files, w: Workload, *, seed: int, seconds: float,
            scratch: Path, series: list | None = None, relay: Relay | None = None) -> list[float]:  # fmt: skip
    """``w`` as things are (no caches dropped, no helper started, a writing workload on ``db``
    itself): see [`run`]."""
    try:
        if w.kind == "db":
            args = br.db_args(s, db, w.name, seconds) + [f"--seed={seed}"]
            skip = br.bench_name(w.name) in WRITER_FIRST
            if relay is not None:
                # Each thread reports every `relay.every` operations, as they happen.
                args += [f"--stats_interval={relay.every}", "--stats_interval_seconds=0"]
            elif series is not None:
                # Each thread reports its operations about once a second (checked every 1,000).
                args += ["--stats_interval_seconds=1"]
            cmd = tb.in_cgroup(args + ([] if w.writes else ["--readonly=1"]))
            p = relay.run(cmd, skip_writer=skip) if relay is not None else br.sh(*cmd)
            ops = br.parse_ops(p.stdout, w.name)
            if series is not None:
                series[:] = db_series_or_flat(p.stderr, ops, seconds, skip_writer=skip, name=w.name)
            return [ops]
        if w.kind == "fio":
            bw_log = scratch / "fio" if series is not None else None
            if relay is not None:
                # Its status reports relayed as they come; its report of the run on stdout.
                text = relay.run_fio(tb.in_cgroup(fio_args(w, files, seconds, seed, None, bw_log))).stdout
            else:
                out = scratch / "fio.json"
                br.sh(*tb.in_cgroup(fio_args(w, files, seconds, seed, out, bw_log)))
                text = out.read_text()
            if bw_log is not None:
                series[:] = fio_series(bw_log, len(w.jobs))
            try:
                return fio_throughput(text)
            except RuntimeError as e:
                raise RuntimeError(f"{w.name}: {e}") from None
        return run_tool(tb, w, db, seconds, seed, series)
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"{w.name}: {e.cmd[3:6]}... exited {e.returncode}: {(e.stderr or '')[-1500:]}") from e


def relative(ops: list[float], base: list[float]) -> float:
    """Each member against its own baseline, averaged (1.0 = the baseline); NaN when a
    baseline member did nothing."""
    return statistics.mean(o / b for o, b in zip(ops, base)) if all(b > 0 for b in base) else math.nan


def chosen(s: br.Settings) -> tuple[Workload, ...]:
    if s.family:
        return tuple(w for w in MEMBERS if w.name in s.family)
    return tuple(w for w in FAMILY if w.name in QUICK) if s.quick else FAMILY


def run_seconds(s: br.Settings) -> float:
    """Seconds of each run of the family step, its sweep included (``--family-seconds``)."""
    return s.seconds if s.quick else (s.family_seconds or SECONDS)


def earlier_sweeps(path: Path, sweep_kb, seconds: float = SECONDS) -> dict[str, dict[int, list[float]]]:
    """The sweeps an earlier family step recorded in ``path`` (``family-runs.csv``): each
    member's throughput per value, for the members swept at every value of ``sweep_kb`` in runs
    of ``seconds`` (column ``seconds``, written since ``--family-seconds``; rows without it are
    taken as ``SECONDS``, the full step's length then: the oracle of a run of another length is
    another value). Every sweep row is checked, whatever its length. The step that reads it
    keeps it aside ([`keep_aside`]) and writes the rows of the members it runs anew."""
    if not path.exists():
        return {}
    got: dict[str, dict[int, list[float]]] = {}
    rows = ra._read(path, need=("workload", "seed", "ra_kb"))
    missing = [k for k in ("config", "ops") if k not in rows[0]]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    for n, r in enumerate(rows, start=2):
        if r["config"] != "sweep" or r["seed"] != SWEEP_SEED:
            continue
        length = r.get("seconds", SECONDS)
        good = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0  # noqa: E731
        if not (good(length) and length > 0):
            raise ValueError(f"{path}: line {n}: column seconds: not a number of seconds")
        try:
            ops = json.loads(r["ops"]) if isinstance(r["ops"], str) else [r["ops"]]
        except ValueError:
            ops = None
        if not (isinstance(ops, list) and ops and all(good(x) for x in ops)):
            raise ValueError(f"{path}: line {n}: column ops: not a list of throughputs")
        if length != seconds:
            continue
        got.setdefault(r["workload"], {})[int(r["ra_kb"])] = [float(x) for x in ops]
    return {w: by for w, by in got.items() if set(sweep_kb) <= set(by)}


def keep_aside(stem: Path) -> Path | None:
    """Rename ``<stem>.csv`` and its Parquet twin (either where only one is there) to
    ``<stem>.before-<UTC time>.csv`` / ``.parquet`` before a step writes them anew, so no
    earlier run is lost; the first new name, or None where there was neither. A name already
    taken gets a counter rather than being replaced."""
    there = lambda x: x.exists() or x.is_symlink()  # noqa: E731
    present = [x for x in (stem.with_suffix(".csv"), stem.with_suffix(".parquet")) if there(x)]
    if not present:
        return None
    when = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1000):
        name = f"{stem.name}.before-{when}" + (f"-{n}" if n else "")
        moved = [stem.with_name(name + x.suffix) for x in present]
        # A link fails where the name exists (a rename would replace it), then the old name
        # goes; a link (not its target) is what is moved.
        made: list[Path] = []
        try:
            for src, dst in zip(present, moved):
                os.link(src, dst, follow_symlinks=False)
                made.append(dst)
        except FileExistsError:
            for dst in made:
                dst.unlink()
            continue
        for src in present:
            src.unlink()
        return moved[0]
    raise RuntimeError(f"{present[0]}: no free name to keep it aside")


def sweep_oracle(s: br.Settings, tb: br.Testbed, db: Path, files: Files, w: Workload, *, seconds: float,
                 scratch: Path, record, earlier: dict[int, list[float]] | None = None) -> int:  # fmt: skip
    """The oracle of ``w``: the best of a sweep over ``s.sweep_kb`` with ``SWEEP_SEED`` (a seed
    no evaluation uses), each process scored against its own run at vanilla and averaged.
    ``record(kb, ops)`` is called after each run. ``earlier``: an earlier run's sweep of ``w``
    (``earlier_sweeps``), taken instead of running it again."""
    sweep = {}
    for kb in s.sweep_kb:
        if earlier is not None:
            sweep[kb] = earlier[kb]
        else:
            sweep[kb] = run(s, tb, db, files, w, kb=kb, seed=SWEEP_SEED, seconds=seconds, scratch=scratch)
        record(kb, sweep[kb])
    base = sweep.get(br.VANILLA_KB) or sweep[min(s.sweep_kb)]
    scores = {kb: relative(ops, base) for kb, ops in sweep.items()}
    return max((kb for kb in scores if math.isfinite(scores[kb])), key=scores.get, default=br.VANILLA_KB)


def tuner_options(s: br.Settings, per_file: bool, count: Path | None = None) -> list[str]:
    """The family's tuner options beyond the model: the measure of progress (``count``: the
    workload's own count, relayed), and per device the fallback to the online learner when
    asked for (the learner sets the device's value only)."""
    options = br.progress_options(s.progress, count)
    if s.fallback_online and not per_file:
        options.append("--fallback-online")
    return options


def configurations(s: br.Settings, out: Path) -> tuple[str, ...]:
    """The family step's configurations, in run order: vanilla, the tuner per device and per
    file, the oracle, the baselines asked for, v3 where the trainset step made its model; with
    ``--family-configs``, those of them it names and the [`ON_REQUEST`] ones it names."""
    configs = ("vanilla", "nn", "nn_file", "oracle") + (("leap",) if s.leap else ()) + (("kml",) if s.kml else ())
    has_v3 = (out / V3_MODEL).is_file()
    configs += ("v3",) if has_v3 else ()
    if not s.family_configs:
        return configs
    configs += tuple(c for c in ON_REQUEST if c in s.family_configs and (has_v3 or c not in V3_CONFIGS))
    return tuple(c for c in configs if c in s.family_configs)


def configuration_helper(s: br.Settings, tb: br.Testbed, out: Path, config: str, log: Path,
                         count: Path | None = None):  # fmt: skip
    """The helper (the tuner: ``(argv, log)``) that runs beside the workload in ``config``, or
    None (vanilla, the oracle: the device's value alone); ``count``: the workload's own count
    of operations, relayed (``Relay``)."""
    state = out / "raw" / "state"
    if config == "nn_file_v3":
        beside = ["--device-model", str(out / V3_MODEL), "--refine-online"]
        return br.nn_tuner(tb, out, True, log, tuner_options(s, per_file=True, count=count) + beside)
    if config.startswith("nn"):
        per_file = config.startswith("nn_file")
        options = tuner_options(s, per_file=per_file, count=count)
        options += ["--refine-online"] if config == "nn_file_refine" else []
        return br.nn_tuner(tb, out, per_file, log, options)
    if config == "leap":
        return br.tuner_helper(tb, None, "device", log, state, controller=LEAP)
    if config in V3_CONFIGS:
        refine = ["--refine-online"] if config == "v3_refine" else []
        return br.tuner_helper(tb, out / V3_MODEL, "device", log, state, dry_run=config == "v3_dry",
                               extra=tuner_options(s, per_file=False, count=count) + refine)  # fmt: skip
    if config == "kml":
        # KML's recipe as KML ran it: per device, no guardrail.
        return br.tuner_helper(tb, out / "readahead_kml.iolm", "device", log, state, extra=["--no-guard"])
    return None


def check_tuners(s: br.Settings, tb: br.Testbed, out: Path, configs: tuple[str, ...], scratch: Path):
    """Start each configuration's tuner once, for a second, before any run: a model it
    refuses (one that decides per device only, asked per file) or an option it rejects stops
    the bench here with the tuner's own words, not as a run that fails an hour in."""
    for c in configs:
        log = scratch / f"tuner-check-{c}.log"
        helper = configuration_helper(s, tb, out, c, log)
        if helper is None:
            continue
        bg = br.Background(*helper)
        time.sleep(1.0)
        try:
            bg.stop()
        except RuntimeError:
            said = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            raise SystemExit(f"error: configuration {c}: the tuner did not start: {said[-1] if said else '(no output)'}"
                             f" ({log})") from None  # fmt: skip
        log.unlink(missing_ok=True)


def family(s: br.Settings, tb: br.Testbed, db: Path, out: Path) -> list[dict]:
    """The sweep (oracle), then vanilla, the tuner per device and per file and the oracle,
    interleaved within each repeat. Rows of ``family-runs.csv``."""
    files = Files(s, tb)
    scratch = out / "raw"
    workloads = chosen(s)
    seconds = run_seconds(s)
    configs = configurations(s, out)
    # Every member once, briefly, before the hour: a wrong option (or a run whose per-second
    # throughput cannot be read) fails here, not at minute 50.
    # A fio member whose count is relayed runs its relay too (a db_bench relay's step needs the
    # sweep's rate, and its reports are db_bench's own).
    for w in workloads:
        run(s, tb, db, files, w, kb=br.VANILLA_KB, seed=SWEEP_SEED, seconds=2, scratch=scratch, series=[],
            relay=fio_relay(s, tb.workdir, w))  # fmt: skip
    check_tuners(s, tb, out, configs, scratch)
    bar = ra._bar(len(workloads) * (len(s.sweep_kb) + len(configs) * s.repeats), "family")
    rows: list[dict] = []

    def record(w: Workload, config: str, repeat: int, seed: int, kb: int, ops: list[float], series=()):
        if not rows:
            # The earlier file (read above) is kept aside only now, as the first row replaces
            # it: a run stopped before this leaves it where --reuse finds it.
            kept = keep_aside(out / "family-runs")
            if kept is not None:
                print(f"  the earlier runs of {out / 'family-runs.csv'} kept as {kept}", file=sys.stderr)
        rows.append({"workload": w.name, "config": config, "repeat": repeat, "seed": seed, "ra_kb": kb,
                     "ops": json.dumps(ops), "unit": w.unit, "series": json.dumps(list(series)),
                     "seconds": seconds})  # fmt: skip
        ra._write(out / "family-runs", rows)
        if bar is not None:
            bar.update(1)

    oracle = {}
    # Read before the first row replaces the file (`record` keeps it aside then: its other
    # members' runs, its sweeps of other lengths and its tuner runs are not written again).
    earlier = earlier_sweeps(out / "family-runs.csv", s.sweep_kb, seconds) if s.reuse else {}
    for w in workloads:
        sweep_row = lambda kb, ops, w=w: record(w, "sweep", -1, SWEEP_SEED, kb, ops)  # noqa: E731
        oracle[w.name] = sweep_oracle(s, tb, db, files, w, seconds=seconds, scratch=scratch, record=sweep_row,
                                      earlier=earlier.get(w.name))  # fmt: skip
        if w.name in earlier:
            print(f"  {w.name}: the sweep of {out / 'family-runs.csv'} (oracle {oracle[w.name]} KiB)", file=sys.stderr)
    # With --progress ops, each db_bench and one-process fio member's count relayed to the
    # tuner, in every configuration alike (the reports are the same work with the tuner or
    # without): db_bench about twenty times a second at the rate its sweep ran at vanilla,
    # fio every FIO_STATUS.
    relays = relays_for(s, tb.workdir, rows, workloads)
    with scratch_removed(scratch, relays):
        for i in range(s.repeats):
            for w in workloads:
                relay = relays.get(w.name)
                # The order turns with each repeat, so no configuration always runs first or last.
                for c in configs[i % len(configs) :] + configs[: i % len(configs)]:
                    helper = configuration_helper(s, tb, out, c, scratch / f"tuner-family-{w.name}-{c}-{i}.log",
                                                  relay.count if relay else None)  # fmt: skip
                    kb = oracle[w.name] if c == "oracle" else br.VANILLA_KB
                    # Throughput per second too (every configuration alike), for the ratios after
                    # the start.
                    series: list[float] = []
                    ops = run(s, tb, db, files, w, kb=kb, seed=i + 1, seconds=seconds, helper=helper, scratch=scratch,
                              series=series, relay=relay)  # fmt: skip
                    record(w, c, i, i + 1, kb, ops, series)
    if bar is not None:
        bar.close()
    tb.set_readahead(br.VANILLA_KB)
    return rows


def _after_start(series) -> float | None:
    """Mean throughput over a run's seconds after [`START_S`] (None without them: a row of an
    older run, or a run whose per-second throughput could not be read). A mean, not a sum:
    fio may log a second fewer than the run, the tools none for a last second in which no
    file finished."""
    if isinstance(series, str):
        try:
            series = json.loads(series) if series.strip() else None
        except ValueError:
            series = None
    if not isinstance(series, (list, tuple)) or len(series) <= START_S:
        return None
    after = [float(x) for x in series[START_S:]]
    mean = sum(after) / len(after)
    return mean if math.isfinite(mean) else None


def summarize(rows: list[dict]) -> list[dict]:
    """Per workload: vanilla's median throughput, each configuration's median [min, max]
    ratio to vanilla of the same repeat, the oracle's value, and the two goals (the tuner at
    least 0.98x vanilla; at least 90% of the oracle's gain where that gain is over 10%), judged
    on whole runs. Where the runs' per-second throughput was recorded, also each
    configuration's ratio after the first [`START_S`] seconds (``<config>_after``, the members
    summed) and the share of the oracle's gain after the start (``<config>_after_share``)."""
    table = []
    for name in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == name]
        ops = lambda r: json.loads(r["ops"]) if isinstance(r["ops"], str) else r["ops"]  # noqa: E731
        base_after = {r["repeat"]: _after_start(r.get("series")) for r in mine if r["config"] == "vanilla"}
        vanilla = {r["repeat"]: ops(r) for r in mine if r["config"] == "vanilla"}
        entry = {"workload": name, "unit": mine[0]["unit"], "repeats": len(vanilla)}
        entry["vanilla"] = statistics.median(sum(v) for v in vanilla.values()) if vanilla else float("nan")
        for c in SCORED:
            # Each process against its own vanilla of the same repeat (a repeat whose vanilla
            # run did nothing is not scored).
            each = [
                [o / b for o, b in zip(ops(r), vanilla[r["repeat"]])]
                for r in mine
                if r["config"] == c and r["repeat"] in vanilla and all(b > 0 for b in vanilla[r["repeat"]])
            ]
            ratios = sorted(m for m in map(statistics.mean, each) if math.isfinite(m))
            if ratios:
                entry[c] = statistics.median(ratios)
                entry[c + "_range"] = [ratios[0], ratios[-1]]
            # Several processes: each one's own median ratio too (one process's cache effect
            # can make the mean of ratios say little: a 134x beside a 0.25x).
            if each and len(each[0]) > 1:
                entry[c + "_members"] = [statistics.median(x[i] for x in each) for i in range(len(each[0]))]
            after = sorted(
                a / base_after[r["repeat"]]
                for r in mine
                if r["config"] == c and base_after.get(r["repeat"]) and (a := _after_start(r.get("series"))) is not None
            )
            if after:
                entry[c + "_after"] = statistics.median(after)
                entry[c + "_after_range"] = [after[0], after[-1]]
        entry["oracle_kb"] = next((int(r["ra_kb"]) for r in mine if r["config"] == "oracle"), None)
        gain = entry.get("oracle", 1.0) - 1.0
        for c in ("nn", "nn_file", "v3", "v3_refine", "nn_file_refine", "nn_file_v3"):
            if c in entry:
                entry[c + "_share"] = (entry[c] - 1.0) / gain if gain > GAIN_FLOOR else None
                share = entry[c + "_share"]
                entry[c + "_meets"] = entry[c] >= 0.98 and (share is None or share >= 0.9)
            if c + "_after" in entry and "oracle_after" in entry:
                gain_after = entry["oracle_after"] - 1.0
                share_after = (entry[c + "_after"] - 1.0) / gain_after if gain_after > GAIN_FLOOR else None
                entry[c + "_after_share"] = share_after
        table.append(entry)
    return table


def print_table(table: list[dict]):
    # The baselines' columns only when they ran.
    baselines = (
        ("v3", "v3"),
        ("v3_refine", "v3 ref"),
        ("nn_file_refine", "f ref"),
        ("nn_file_v3", "f+v3"),
        ("v3_dry", "v3 dry"),
        ("leap", "LEAP"),
        ("kml", "KML"),
        ("vanilla_again", "A/A"),
    )
    extra = [(c, title) for c, title in baselines if any(c in r for r in table)]
    print(
        f"{'family workload':<20}{'vanilla':>14}{'per device':>12}{'per file':>10}{'oracle':>8}{'KiB':>6}"
        + "".join(f"{title:>7}" for _, title in extra)
        + "  (x vanilla)"
    )
    for r in table:
        v = r["vanilla"] / (1e6 if r["unit"] == "MB/s" else 1)
        cells = "".join(
            f"{r[c]:>{n}.2f}" if c in r else f"{'-':>{n}}" for c, n in (("nn", 12), ("nn_file", 10), ("oracle", 8))
        )
        tail = "".join(f"{r[c]:>7.2f}" if c in r else f"{'-':>7}" for c, _ in extra)
        print(f"{r['workload']:<20}{v:>10.0f} {r['unit']:<5}{cells}{r.get('oracle_kb') or '-':>6}{tail}")
        after = [(c, r[c + "_after"]) for c in SCORED if c + "_after" in r]
        if after:
            print(f"    after the first {START_S} s: " + ", ".join(f"{c} {x:.2f}" for c, x in after))
        members = [(c, r[c + "_members"]) for c in SCORED if c + "_members" in r]
        if members:
            print("    each process: " + "; ".join(f"{c} " + " / ".join(f"{x:.2f}" for x in m) for c, m in members))


if __name__ == "__main__":  # pragma: no cover - run through bench_real
    sys.exit("run: iolearn bench readahead --real --steps family")
