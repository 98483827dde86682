"""KML's readahead tuning on this machine's kernel, measured with RocksDB's db_bench.

    iolearn bench readahead --real [--quick] [--out DIR]

Creates everything it needs and removes it afterwards (also on SIGINT/SIGTERM, and at the
next start after a crash, from a journal): a file-backed loop device with direct I/O, an ext4
file system, a RocksDB database (Debian ``rocksdb-tools``), a cgroup v1 memory group of 1 GiB
(KML's setup: database about twice the memory). Never touches another disk. Then:

1. sweep: workloads x static readahead values, caches dropped before each run, ops/s and the
   probe's per-window features (``iolearn probe readahead``) recorded;
2. train: KML's network per device and per file on the real windows (as ``iolearn readahead
   train`` does on simulated ones);
3. evaluate: vanilla (128 KiB), the loop device's default, the tuner (``iolearn tune
   readahead``) per device and per file, and the oracle (best static value), repeated; back
   to back; two concurrent db_bench instances; two processes on one database (decisions per
   device, per file and per open file description); the test family, workloads the models never
   saw (``bench_family``); overheads (probe and tuner CPU, inference and actuation time,
   events/s, lost events, throughput with probes attached but no tuning).

Tables, plots and raw CSV go to ``--out`` (default ``docs/benchmarks/<date>-readahead-real``).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import _plot
from . import readahead as ra
from ._cli import Parser
from ._cli import run as run_cli
from ._validate import int_arg
from .safeio import OutputError, output_dir, private_dir, read_text, write_text

WORKLOADS = ("readrandom", "readrandomwriterandom", "readseq", "readreverse", "updaterandom", "mixgraph")
SEQUENTIAL = ("readseq", "readreverse")
#: KML's mixgraph options (``shared/spec/kml.md`` section 3).
MIXGRAPH = [
    "--keyrange_dist_a=14.18",
    "--keyrange_dist_b=-2.917",
    "--keyrange_dist_c=0.0164",
    "--keyrange_dist_d=-0.08082",
    "--keyrange_num=30",
    "--value_k=0.2615",
    "--value_sigma=25.45",
    "--iter_k=2.517",
    "--iter_sigma=14.236",
    "--mix_get_ratio=0.85",
    "--mix_put_ratio=0.14",
    "--mix_seek_ratio=0.01",
]
VANILLA_KB = 128


class Settings:
    """One harness configuration (full, or ``--quick`` for CI)."""

    def __init__(self, quick: bool):
        self.quick = quick
        self.keys = 400_000 if quick else 12_000_000
        self.value_size = 150
        self.memory_mb = 48 if quick else 1024
        # Sparse: the database (2.3 GiB), its copy for the pairs, the family's 4 GiB of files.
        self.image_mb = 640 if quick else 12288
        self.seconds = 4 if quick else 20
        self.repeats = 1 if quick else 2
        # Interleaved pairs for the probes' cost: a few percent needs more than a few runs.
        self.overhead_pairs = 1 if quick else 11
        # Long enough for the tuner to rest most of the run (it does once its decision is judged).
        self.overhead_seconds = 4 if quick else 60
        self.sweep_kb = (16, 128, 512) if quick else (16, 64, 128, 256, 512, 1024, 4096)
        self.workloads = ("readrandom", "readseq") if quick else WORKLOADS
        self.train = ("readrandom", "readseq") if quick else ra.TRAIN_WORKLOADS
        # Members of the test family to run (None: all, or the quick pair).
        self.family: tuple[str, ...] | None = None
        # What the guardrail and the online learner count as progress (`iolearn tune readahead
        # --progress`), in the online and family steps.
        self.progress = "cpu"
        # The family step's per-device tuner hands windows its model cannot judge to the online
        # learner (`iolearn tune readahead --fallback-online`).
        self.fallback_online = False
        # The online step runs its phase runs (mapped reads, a scan, mapped reads again) after
        # each repeat's members.
        self.phases = True
        # Seconds of each run of the online step (None: bench_online.SECONDS).
        self.online_seconds = None
        # Seconds of each run of the family step, sweep included (None: bench_family.SECONDS).
        self.family_seconds = None
        # The scale-free inputs the trainset and retrain steps train the v3 model on (None:
        # every one the recorded windows hold).
        self.v3_features = None
        # How a training workload whose sweep ties several values teaches the v3 model
        # (``readahead.train_values``' ``tied``: vanilla or every).
        self.v3_tied = "vanilla"
        # The family step also runs LEAP, KML's baseline, as a prefetcher on the kernel
        # (`iolearn tune readahead --controller leap-prefetch-unmarked`).
        self.leap = False
        # The family step also runs KML's own recipe (``readahead_kml.iolm`` in --out, as the
        # train step makes it), per device and without iolearn's guardrail, as KML ran.
        self.kml = False
        # The family step's configurations to run (None: all it has; vanilla always).
        self.family_configs: tuple[str, ...] | None = None
        # --reuse: the family step takes each member's sweep from an earlier run in --out when
        # it finished one.
        self.reuse = False


# ---------------------------------------------------------------------------------------------
# The test bed: created, journalled, removed.


def sh(*cmd, check=True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], check=check, capture_output=True, text=True, **kw)


def write_image(path: Path, mb: int) -> None:
    """An image of `mb` MiB of written data, synced. Not a sparse or preallocated file: an
    O_DIRECT read of a hole or an unwritten extent is answered with zeros without touching
    the disk, so a loop device over one measures nothing of the disk."""
    block = b"\xa5" * (4 << 20)
    with open(path, "wb") as f:
        for _ in range(mb // 4):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


class Testbed:
    """Loop device + ext4 + cgroup, with a journal so a crashed run is cleaned at the next start."""

    def __init__(self, workdir: Path, memory_mb: int, image_mb: int, throttle: tuple[int, int] | None = None):
        self.workdir = workdir
        self.journal = workdir / "testbed.json"
        self.image = workdir / "bench.img"
        self.mnt = workdir / "mnt"
        self.cgroup = Path(f"/sys/fs/cgroup/memory/iolearn-bench-{os.getpid()}")
        # Read IOPS and MiB/s the blkio cgroup allows the workloads on the test device (None:
        # the device as it comes): with the image in memory, a device whose runs repeat.
        self.throttle = throttle
        self.blkio = Path(f"/sys/fs/cgroup/blkio/iolearn-bench-{os.getpid()}") if throttle else None
        self.memory_mb = memory_mb
        self.image_mb = image_mb
        self.device = ""

    # journal -------------------------------------------------------------------------------
    def _save(self):
        state = {"image": str(self.image), "mnt": str(self.mnt), "device": self.device, "cgroup": str(self.cgroup)}
        if self.blkio:
            state["blkio"] = str(self.blkio)
        write_text(self.journal, json.dumps(state))

    @staticmethod
    def clean_leftovers(workdir: Path) -> bool:
        """Remove what a crashed run left (from its journal). Returns whether there was any."""
        j = workdir / "testbed.json"
        if not j.exists():
            return False
        try:
            state = json.loads(read_text(j, 16 << 20))
        except ValueError as e:
            raise SystemExit(f"error: {j}: not a test bed journal ({e}); remove it after checking") from e
        # The journal names what to unmount, detach and delete as root: only what a test bed
        # in this directory itself would have made.
        try:
            mnt, image, device, cgroup = Path(state["mnt"]), Path(state["image"]), state["device"], state["cgroup"]
            blkio = state.get("blkio", "")  # journals of runs without --throttle have none
        except (KeyError, TypeError, AttributeError) as e:
            raise SystemExit(f"error: {j}: not a test bed journal ({e}); remove it after checking") from e
        if (
            mnt != workdir / "mnt"
            or image != workdir / "bench.img"
            or not isinstance(cgroup, str)
            or not re.fullmatch(r"(/sys/fs/cgroup/memory/iolearn-bench-\d+)?", cgroup)
            or not isinstance(blkio, str)
            or not re.fullmatch(r"(/sys/fs/cgroup/blkio/iolearn-bench-\d+)?", blkio)
            or not isinstance(device, str)
            or not re.fullmatch(r"(/dev/loop\d+)?", device)
        ):
            raise SystemExit(f"error: {j}: names paths outside this test bed; remove it after checking")
        _teardown(mnt, device, image, Path(cgroup) if cgroup else None, Path(blkio) if blkio else None)
        j.unlink()
        return True

    @staticmethod
    def clean_orphans() -> list[str]:
        """Remove what crashed runs left in *other* work directories: the journal of a run killed
        with its work directory elsewhere (or on a tmpfs lost with the machine's restart) is
        never read by ``clean_leftovers`` again, yet its loop device, mount and cgroups stay and
        count against the next runs. Only a test bed whose run is gone is touched: a loop device
        backed by a ``bench.img`` whose journal names a cgroup of a dead process, and an empty
        ``iolearn-bench-<pid>`` cgroup of a dead process. Returns what was removed."""
        removed = []
        for loop in sorted(Path("/sys/block").glob("loop*")):
            image = Path(_backing_file(loop.name))
            journal = image.parent / "testbed.json"
            if image.name != "bench.img" or not journal.exists():
                continue
            try:
                cgroup = json.loads(read_text(journal, 16 << 20)).get("cgroup", "")
            except (OSError, ValueError, AttributeError):
                continue
            named = cgroup if isinstance(cgroup, str) else ""
            owner = re.fullmatch(r"/sys/fs/cgroup/memory/iolearn-bench-(\d+)", named)
            if owner is None or _alive(int(owner.group(1))):
                continue
            try:
                if Testbed.clean_leftovers(image.parent):
                    removed.append(str(image.parent))
            except SystemExit as e:  # a journal we may not act on: say so and leave it
                print(f"test bed: left a crashed run's test bed alone: {e}", file=sys.stderr)
        for controller in ("memory", "blkio"):
            for group in sorted(Path(f"/sys/fs/cgroup/{controller}").glob("iolearn-bench-*")):
                owner = re.fullmatch(r"iolearn-bench-(\d+)", group.name)
                if owner is None or _alive(int(owner.group(1))):
                    continue
                try:
                    group.rmdir()  # fails while a process is still in it: that one stays
                    removed.append(str(group))
                except OSError:
                    pass
        return removed

    def __enter__(self) -> Testbed:
        private_dir(self.workdir)
        if Testbed.clean_leftovers(self.workdir):
            print("test bed: removed what a previous (crashed) run left", file=sys.stderr)
        for what in Testbed.clean_orphans():
            print(f"test bed: removed what a crashed run left: {what}", file=sys.stderr)
        # The journal names the cgroups before they exist: a crash at any point below leaves
        # nothing the next start cannot find.
        self._save()
        try:
            self._build()
        except BaseException:
            # __exit__ is not called when __enter__ raises: what was built goes now.
            self.__exit__()
            raise
        return self

    def _build(self):
        with open(self.image, "wb") as f:
            f.truncate(self.image_mb << 20)
        self.device = sh("losetup", "--direct-io=on", "--find", "--show", self.image).stdout.strip()
        self._save()
        sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", self.device)
        self.mnt.mkdir(parents=True, exist_ok=True)
        sh("mount", self.device, self.mnt)
        self.cgroup.mkdir()
        (self.cgroup / "memory.limit_in_bytes").write_text(str(self.memory_mb << 20))
        if self.blkio:
            self.blkio.mkdir()
            # The limits are per device: the loop device's own number, not its disk's.
            dev = os.stat(self.device).st_rdev
            iops, mibps = self.throttle
            where = f"{os.major(dev)}:{os.minor(dev)}"
            (self.blkio / "blkio.throttle.read_iops_device").write_text(f"{where} {iops}\n")
            (self.blkio / "blkio.throttle.read_bps_device").write_text(f"{where} {mibps << 20}\n")

    def limits(self) -> dict[str, str]:
        """The blkio group's read limits as the kernel reports them (empty without --throttle)."""
        if not self.blkio:
            return {}
        return {
            f: (self.blkio / f"blkio.throttle.{f}").read_text().strip() for f in ("read_iops_device", "read_bps_device")
        }

    def __exit__(self, *exc):
        _teardown(self.mnt, self.device, self.image, self.cgroup, self.blkio)
        self.journal.unlink(missing_ok=True)
        return False

    @property
    def name(self) -> str:
        return self.device.removeprefix("/dev/")

    @property
    def sysfs(self) -> Path:
        return Path(f"/sys/class/block/{self.name}/queue/read_ahead_kb")

    def set_readahead(self, kb: int):
        self.sysfs.write_text(f"{kb}\n")

    def readahead(self) -> int:
        return int(self.sysfs.read_text())

    def in_cgroup(self, argv: list[str]) -> list[str]:
        """A command line that joins the memory cgroup (and the blkio one of --throttle), then
        runs ``argv``."""
        join = " && ".join(f"echo $$ > {g}/cgroup.procs" for g in (self.cgroup, self.blkio) if g)
        return ["sh", "-c", f'{join} && exec "$0" "$@"', *argv]


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (this process counts as alive)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # overflow: no pid that large
        return False
    except PermissionError:  # someone else's
        return True
    return True


def _backing_file(device: str) -> str:
    """The file behind loop device ``/dev/loopN`` (empty when none)."""
    try:
        return Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip()
    except OSError:
        return ""


def _teardown(mnt: Path, device: str, image: Path, cgroup: Path | None, blkio: Path | None = None):
    if mnt.exists():
        if sh("umount", mnt, check=False).returncode != 0 and os.path.ismount(mnt):
            sh("umount", "-l", mnt, check=False)
        try:
            mnt.rmdir()
        except OSError:
            pass
    # Only a loop device still backed by our image is ours: after a crash and a reboot the
    # number may belong to someone else.
    if device and _backing_file(device) == str(image.resolve()):
        sh("losetup", "-d", device, check=False)
    for dev in sh("losetup", "-j", image, check=False).stdout.splitlines():
        sh("losetup", "-d", dev.split(":")[0], check=False)
    image.unlink(missing_ok=True)
    for group in (cgroup, blkio):
        if group is None or not group.exists():
            continue
        for pid in (group / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def drop_caches():
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


# ---------------------------------------------------------------------------------------------
# db_bench


#: Workloads that are db_bench benchmarks with options: ``rangescan`` seeks to a random key
#: and reads the next 1,000 entries (about 200 KB, a short scan), for as long as the run lasts,
#: where ``readseq`` ends after one pass over the database; ``readwhilewriting`` reads beside a
#: writer held to 1 MB/s (unlimited, it would grow the database by gigabytes over a family
#: run); ``readrandom-4t`` reads from four threads. The last two are the test family's
#: (``bench_family``).
ALIASES = {
    "rangescan": ("seekrandom", ["--seek_nexts=1000"]),
    "readwhilewriting": ("readwhilewriting", ["--benchmark_write_rate_limit=1048576"]),
    "readrandom-4t": ("readrandom", ["--threads=4"]),
}


def bench_name(workload: str) -> str:
    """The db_bench benchmark behind ``workload`` (its name in db_bench's report)."""
    return ALIASES.get(workload, (workload, []))[0]


def db_args(s: Settings, db: Path, workload: str, seconds: float) -> list[str]:
    args = [
        "db_bench",
        f"--db={db}",
        "--use_existing_db=1",
        f"--benchmarks={bench_name(workload)}",
        f"--num={s.keys}",
        "--key_size=48",
        f"--value_size={s.value_size}",
        "--compression_type=none",
        "--mmap_read=1",
        "--advise_random_on_open=0",
        f"--cache_size={(256 << 20) if not s.quick else (8 << 20)}",
        f"--duration={int(seconds)}",
        "--threads=1",
        "--statistics=0",
    ]
    if workload == "mixgraph":
        args += MIXGRAPH
    args += ALIASES.get(workload, (workload, []))[1]
    if workload in SEQUENTIAL:
        args += [f"--reads={s.keys}"]
    return args


OPS = re.compile(r"^\s*(\w+)\s*:\s*[\d.]+ micros/op (\d+) ops/sec", re.M)


def parse_ops(out: str, workload: str) -> float:
    for name, ops in OPS.findall(out):
        if name == bench_name(workload):
            return float(ops)
    raise RuntimeError(f"db_bench {workload}: no throughput in its output:\n{out[-2000:]}")


def create_db(s: Settings, tb: Testbed) -> Path:
    db = tb.mnt / "db"
    args = db_args(s, db, "fillseq,compact", 0)
    args = [a for a in args if not a.startswith(("--use_existing_db", "--duration", "--mmap_read"))]
    args += ["--use_existing_db=0", "--disable_wal=1", "--write_buffer_size=67108864"]
    t0 = time.time()
    sh(*args)
    size = sum(f.stat().st_size for f in db.iterdir())
    print(f"database: {s.keys} keys, {size / 2**30:.2f} GiB in {time.time() - t0:.0f} s", file=sys.stderr)
    return db


def iolearn_cmd() -> list[str]:
    """The iolearn binary next to this package (release build preferred)."""
    root = Path(__file__).resolve().parents[2]
    for b in (root / "target/release/iolearn", root / "target/debug/iolearn"):
        if b.exists():
            return [str(b)]
    found = shutil.which("iolearn")
    if found:
        return [found]
    raise SystemExit("error: the iolearn binary was not found (cargo build --release -p iolearn)")


class Background:
    """A helper process (probe recorder or tuner) stopped with SIGTERM."""

    def __init__(self, argv: list[str], log: Path):
        self.log = open(log, "w")
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.started = time.time()

    def cpu_seconds(self) -> float:
        try:
            f = Path(f"/proc/{self.p.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError):
            return float("nan")

    def stop(self) -> tuple[str, float, float]:
        cpu = self.cpu_seconds()
        wall = time.time() - self.started
        self.p.send_signal(signal.SIGTERM)
        out, _ = self.p.communicate(timeout=60)
        self.log.close()
        if self.p.returncode not in (0, -signal.SIGTERM):
            raise RuntimeError(f"{self.p.args[:3]} exited {self.p.returncode}: see {self.log.name}")
        # LEAP's prefetches charged to the tuner's memory cgroup rather than the workload's
        # are cached beyond the workload's limit: such a run measures the cache, not LEAP
        # (db_bench's random readers ran 66 times faster that way).
        if '"event":"charged_to_tuner"' in Path(self.log.name).read_text(errors="replace"):
            raise RuntimeError(
                f"{self.p.args[:3]}: its reads were charged to the tuner's memory cgroup, not the workload's,"
                f" so the run measured a larger cache: see {self.log.name}"
            )
        return out, cpu, wall


def prepare(tb: Testbed, kb: int, helper):
    """Before a measured run: the device at ``kb``, caches dropped, and the helper
    (``(argv, log)``, if any) started and attached before the first I/O. Returns its
    ``Background`` or None."""
    tb.set_readahead(kb)
    drop_caches()
    bg = Background(*helper) if helper else None
    if bg:
        time.sleep(0.5)
    return bg


def run_one(s: Settings, tb: Testbed, db: Path, workload: str, *, kb: int = VANILLA_KB, helper=None, seconds=None):
    """One db_bench run in the cgroup after dropping caches, with the device at ``kb`` and an
    optional helper (``(argv, log)``) running alongside. Returns (ops/s, helper stdout, helper
    CPU seconds, wall seconds)."""
    bg = prepare(tb, kb, helper)
    try:
        t0 = time.time()
        p = sh(*tb.in_cgroup(db_args(s, db, workload, seconds or s.seconds)))
        wall = time.time() - t0
    finally:
        out, cpu, _ = bg.stop() if bg else ("", 0.0, 0.0)
    return parse_ops(p.stdout, workload), out, cpu, wall


def run_together(s: Settings, tb: Testbed, members, kb: int, helper=None) -> list[float]:
    """db_bench processes at once, read-only, in the cgroup after dropping caches, with the
    device at ``kb`` and an optional helper (``(argv, log)``) alongside. ``members``:
    ``(workload, database)`` pairs. Returns each member's ops/s.

    ``helper`` may also be a function of the members' pids giving ``(argv, log)`` (a
    controller that names them, ``pids:PID=KB,...``): it starts right after them, so what
    they read before it has attached and set their files (its first window) is read at the
    device's value."""
    late = helper if callable(helper) else None
    bg = prepare(tb, kb, None if late else helper)
    procs = []
    try:
        procs += [
            subprocess.Popen(
                tb.in_cgroup(db_args(s, db, w, s.seconds) + ["--readonly=1"]),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for w, db in members
        ]
        if late:
            bg = Background(*late([p.pid for p in procs]))
        outs = [p.communicate()[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:  # the helper failed to start: no db_bench left behind
                p.kill()
                p.wait()
        if bg:
            bg.stop()
    for (w, _), p in zip(members, procs):
        if p.returncode != 0:
            raise RuntimeError(f"db_bench {w} (run beside another) exited {p.returncode}")
    return [parse_ops(o, w) for o, (w, _) in zip(outs, members)]


def probe_helper(tb: Testbed, out: Path, per_file: bool) -> tuple[list[str], Path]:
    argv = iolearn_cmd() + ["probe", "readahead", "--device", tb.name, "--cgroup", str(tb.cgroup), "--out", str(out)]
    if per_file:
        argv.append("--per-file")
    return argv, out.with_suffix(".log")


def tuner_helper(
    tb: Testbed,
    model: Path | None,
    scope: str,
    log: Path,
    state: Path,
    dry_run=False,
    controller=None,
    extra=(),
    verbose=True,
):
    """The tuner deciding per ``scope`` (``device``, ``file`` or ``description``) with
    ``model``, or with ``controller`` (``online``, ``static:KB``...) when no model is given,
    watching the test bed's cgroup; ``extra`` options last. ``verbose``: every window's value
    and the progress the guardrail judged by, in the log."""
    chooser = ["--model", str(model)] if model is not None else ["--controller", controller]
    argv = iolearn_cmd() + ["tune", "readahead", "--device", tb.name] + chooser
    argv += ["--cgroup", str(tb.cgroup), "--state-dir", str(state), "--log-format", "json"]
    if verbose:
        argv.append("--verbose")
    if scope != "device":
        argv.append(f"--per-{scope}")
    if dry_run:
        argv.append("--dry-run")
    if model is not None and not {"--refine-online", "--no-refine"} & set(extra):
        # A model's values as it gives them (the learner refines them by default): the
        # configurations measured before that default keep their meaning.
        argv.append("--no-refine")
    return argv + list(extra), log


def nn_tuner(tb: Testbed, out: Path, per_file: bool, log: Path, extra=()):
    """The tuner with this run's network, per file (``readahead_nn_file.iolm``) or per device;
    ``extra`` options last."""
    model = out / ("readahead_nn_file.iolm" if per_file else "readahead_nn.iolm")
    return tuner_helper(tb, model, "file" if per_file else "device", log, out / "raw" / "state", extra=extra)


def per_process_helper(tb: Testbed, kbs: list[int], log: Path, state: Path):
    """The tuner holding each member process's files at its own value, ``kbs`` in member
    order (controller ``pids:PID=KB,...``, no guardrail): the per-description oracle. A
    function of the members' pids, for ``run_together``."""

    def start(pids: list[int]):
        spec = ",".join(f"{pid}={kb}" for pid, kb in zip(pids, kbs))
        argv = iolearn_cmd() + ["tune", "readahead", "--device", tb.name, "--controller", f"pids:{spec}"]
        # An oracle applies its values at once: no hysteresis to wait out (with the default
        # --hold 2, a one-pass scan of a few seconds would spend two of them at vanilla).
        argv += ["--no-guard", "--hold", "1", "--min-gap", "0"]
        return argv + ["--state-dir", str(state), "--log-format", "json"], log

    return start


# ---------------------------------------------------------------------------------------------
# The three steps.


def sweep(s: Settings, tb: Testbed, db: Path, out: Path):
    rows, feats, file_feats = [], [], []
    runs = [(w, kb) for w in s.workloads for kb in s.sweep_kb]
    bar = ra._bar(len(runs), "real sweep")
    for w, kb in runs:
        fcsv = out / "raw" / f"features-{w}-{kb}.csv"
        fcsv.parent.mkdir(parents=True, exist_ok=True)
        ops, _, _, _ = run_one(s, tb, db, w, kb=kb, helper=probe_helper(tb, fcsv, per_file=True))
        rows.append({"workload": w, "device": tb.name, "ra_kb": kb, "ops_s": ops, "seed": 0})
        for r in csv.DictReader(open(fcsv)):
            f = {n: float(r[n]) for n in ra.FEATURES}
            (feats if r["scope"] == "device" else file_feats).append({"workload": w, "ra_kb": kb, **f})
        print(f"  {w:<24}{kb:>6} KiB {ops:>12.0f} ops/s", file=sys.stderr)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    ra._write(out / "sweep", rows)
    ra._write(out / "features", feats)
    ra._write(out / "features-per-file", file_feats)
    return rows, feats, file_feats


def train(s: Settings, rows, feats, file_feats, out: Path):
    train_rows = [r for r in rows if r["workload"] in s.train]
    pick = [f for f in feats if f["workload"] in s.train and f["n_transactions"] > 0]
    fpick = [f for f in file_feats if f["workload"] in s.train and f["n_transactions"] > 0]
    classes = tuple(w for w in ra.TRAIN_WORKLOADS if w in s.train)
    epochs = 60 if s.quick else 100
    rep = ra.train(train_rows, pick, out, epochs=epochs, workloads=classes)
    rep_file = ra.train(train_rows, fpick, out, suffix="_file", epochs=epochs, workloads=classes)
    return rep, rep_file


def evaluate(s: Settings, tb: Testbed, db: Path, out: Path, oracle: dict[str, int]):
    configs = [("vanilla", None), ("device_default", None), ("nn", False), ("nn_file", True), ("oracle", None)]
    rows = []
    runs = [(w, c, i) for w in s.workloads for c in configs for i in range(s.repeats)]
    bar = ra._bar(len(runs), "real evaluation")
    for w, (name, per_file), i in runs:
        kb = {"vanilla": VANILLA_KB, "device_default": 2560, "oracle": oracle.get(w, VANILLA_KB)}.get(name, VANILLA_KB)
        helper = None
        if per_file is not None:
            helper = nn_tuner(tb, out, per_file, out / "raw" / f"tuner-{w}-{name}-{i}.log")
        ops, summary, cpu, wall = run_one(s, tb, db, w, kb=kb, helper=helper)
        rows.append(
            {
                "workload": w,
                "config": name,
                "repeat": i,
                "ra_kb": kb,
                "ops_s": ops,
                "tuner_cpu_s": cpu,
                "wall_s": wall,
                "tuner": summary.strip(),
            }
        )
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    ra._write(out / "evaluate-runs", rows)
    return rows


BACK_TO_BACK = ("readseq", "readrandom", "readreverse", "mixgraph")
#: Pairs of db_bench instances, each on its own copy of the database (as two applications on
#: one device; sharing one database would make every file both random and sequential).
PAIRS = (("readrandom", "readseq"), ("readseq", "readreverse"))


def back_to_back(s: Settings, tb: Testbed, db: Path, out: Path) -> list[dict]:
    """KML's back-to-back runs: one db_bench running the workloads one after another (from the
    default, caches dropped once), vanilla vs the tuner per device."""
    seq = tuple(w for w in BACK_TO_BACK if w in s.workloads) or BACK_TO_BACK[:2]
    rows = []
    for i in range(s.repeats):
        for name in ("vanilla", "nn"):
            helper = None
            if name == "nn":
                log = out / "raw" / f"tuner-b2b-{i}.log"
                helper = tuner_helper(tb, out / "readahead_nn.iolm", "device", log, out / "raw" / "state")
            tb.set_readahead(VANILLA_KB)
            drop_caches()
            bg = Background(*helper) if helper else None
            if bg:
                time.sleep(0.5)
            try:
                p = sh(*tb.in_cgroup(db_args(s, db, ",".join(seq), s.seconds)))
            finally:
                if bg:
                    bg.stop()
            for w in seq:
                rows.append({"workload": w, "config": name, "repeat": i, "ops_s": parse_ops(p.stdout, w)})
    ra._write(out / "back_to_back-runs", rows)
    return rows


def pairs(s: Settings, tb: Testbed, db: Path, out: Path) -> list[dict]:
    """Two db_bench instances at once, each on its own copy of the database (read-only): vanilla
    vs the tuner per device vs per file. Each member's ops/s."""
    rows = []
    db2 = db.parent / (db.name + "-copy")
    if not db2.exists():
        shutil.copytree(db, db2)
    chosen = [p for p in PAIRS if all(w in s.workloads for w in p)] or [PAIRS[0]]
    for i in range(s.repeats):
        for a, b in chosen:
            for name, per_file in (("vanilla", None), ("nn", False), ("nn_file", True)):
                helper = None
                if per_file is not None:
                    helper = nn_tuner(tb, out, per_file, out / "raw" / f"tuner-pair-{a}-{b}-{name}-{i}.log")
                ops = run_together(s, tb, [(a, db), (b, db2)], VANILLA_KB, helper)
                rows.append({"pair": f"{a}+{b}", "config": name, "repeat": i, "ops_s_0": ops[0], "ops_s_1": ops[1]})
    ra._write(out / "pairs-runs", rows)
    return rows


#: Two db_bench processes on one database: a scan beside random reads. ``readseq`` and
#: ``readreverse`` end after one pass (2-8 s), ``rangescan`` scans for the whole run.
SHARED_PAIRS = (("rangescan", "readrandom"), ("readseq", "readrandom"), ("readreverse", "readrandom"))


def shared(s: Settings, tb: Testbed, db: Path, out: Path, oracle: dict) -> list[dict]:
    """Two db_bench processes on one database (read-only), each reading every file its own
    way: vanilla, each member's best static value held on the device, and the tuner per
    device, per file and per open file description (process and file), and each process at
    its own best static value (``pids_S_R``: the per-description oracle), configurations
    interleaved within each repeat. Each member's ops/s."""
    rows = []
    chosen = [p for p in SHARED_PAIRS if all(w in s.workloads + ("rangescan",) for w in p)] or [
        ("readseq", "readrandom")
    ]
    for i in range(s.repeats):
        for a, b in chosen:
            # A scan without its own sweep (rangescan) gets readseq's best value.
            scan_kb = oracle.get(a, oracle.get("readseq", VANILLA_KB))
            statics = sorted({scan_kb, oracle.get(b, VANILLA_KB)} - {VANILLA_KB})
            configs = [("vanilla", VANILLA_KB, None, None)]
            configs += [(f"static_{kb}", kb, None, None) for kb in statics]
            configs += [
                ("nn", VANILLA_KB, "readahead_nn.iolm", "device"),
                ("nn_file", VANILLA_KB, "readahead_nn_file.iolm", "file"),
                ("nn_description", VANILLA_KB, "readahead_nn_file.iolm", "description"),
            ]
            # The per-description oracle: each process at its own best static value (a scan
            # without a sweep of its own also at vanilla's).
            random_kb = oracle.get(b, VANILLA_KB)
            for scan in sorted({scan_kb} | ({VANILLA_KB} if a not in oracle else set())):
                configs.append((f"pids_{scan}_{random_kb}", VANILLA_KB, [scan, random_kb], "pids"))
            for name, kb, model, scope in configs:
                helper = None
                log = out / "raw" / f"tuner-shared-{a}-{b}-{name}-{i}.log"
                if scope == "pids":
                    helper = per_process_helper(tb, model, log, out / "raw" / "state")
                elif model:
                    helper = tuner_helper(tb, out / model, scope, log, out / "raw" / "state")
                ops = run_together(s, tb, [(a, db), (b, db)], kb, helper)
                rows.append({"pair": f"{a}+{b}", "config": name, "repeat": i, "ops_s_0": ops[0], "ops_s_1": ops[1]})
                ra._write(out / "shared-runs", rows)
    tb.set_readahead(VANILLA_KB)
    return rows


def summarize_shared(runs: list[dict]) -> list[dict]:
    """Per pair and configuration: the median of each member's ops/s and of the weighted
    speedup (each member relative to its vanilla run of the same repeat, averaged), with the
    weighted speedup's range over repeats."""
    table = []
    for pair in dict.fromkeys(r["pair"] for r in runs):
        vanilla = {r["repeat"]: r for r in runs if r["pair"] == pair and r["config"] == "vanilla"}
        for c in dict.fromkeys(r["config"] for r in runs if r["pair"] == pair):
            sel = [r for r in runs if r["pair"] == pair and r["config"] == c and r["repeat"] in vanilla]
            ws = sorted(
                (r["ops_s_0"] / vanilla[r["repeat"]]["ops_s_0"] + r["ops_s_1"] / vanilla[r["repeat"]]["ops_s_1"]) / 2
                for r in sel
                if vanilla[r["repeat"]]["ops_s_0"] > 0 and vanilla[r["repeat"]]["ops_s_1"] > 0
            )
            if ws:
                table.append(
                    {
                        "pair": pair,
                        "config": c,
                        "ops_s": [statistics.median(r[f"ops_s_{k}"] for r in sel) for k in (0, 1)],
                        "weighted_speedup": statistics.median(ws),
                        "range": [ws[0], ws[-1]],
                        "repeats": len(ws),
                    }
                )
    return table


def summarize(runs: list[dict]) -> list[dict]:
    table = []
    for w in dict.fromkeys(r["workload"] for r in runs):
        row = {"workload": w}
        for c in ("vanilla", "device_default", "nn", "nn_file", "oracle"):
            v = [r["ops_s"] for r in runs if r["workload"] == w and r["config"] == c]
            if v:
                row[c] = statistics.median(v)
                row[c + "_spread"] = (max(v) - min(v)) / statistics.median(v) if len(v) > 1 else 0.0
        table.append(row)
    return table


def summarize_pairs(runs: list[dict]) -> list[dict]:
    table = []
    for pair in dict.fromkeys(r["pair"] for r in runs):
        row = {"pair": pair}
        for c in ("vanilla", "nn", "nn_file"):
            sel = [r for r in runs if r["pair"] == pair and r["config"] == c]
            if sel:
                row[c] = [statistics.median(r[f"ops_s_{i}"] for r in sel) for i in (0, 1)]
        table.append(row)
    return table


def plot(rep: dict, path: Path):
    """Throughput relative to vanilla per workload and configuration (PNG)."""
    if "table" not in rep:
        return
    plt = _plot.pyplot()
    if plt is None:
        return
    import numpy as np

    keys = [
        ("device_default", "loop default 2560 KiB"),
        ("nn", "tuner per device"),
        ("nn_file", "tuner per file"),
        ("oracle", "oracle (best static)"),
    ]
    t = rep["table"]
    x = np.arange(len(t))
    w = 0.8 / len(keys)
    fig, ax = plt.subplots(figsize=(9, 4))
    for i, (k, label) in enumerate(keys):
        ax.bar(x + i * w, [r[k] / r["vanilla"] for r in t], w, label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x + 0.4 - w / 2, [r["workload"] for r in t], rotation=20, ha="right")
    ax.set_ylabel("ops/s / vanilla (128 KiB)")
    ax.set_title(f"db_bench on a loop device, 1 GiB cgroup ({rep['date']})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    _plot.save(fig, path)


def overheads(s: Settings, tb: Testbed, db: Path, out: Path, member=None) -> dict:
    """Throughput without probes vs with the tuner attached but not acting (--dry-run), as it
    runs by default (resting once it has nothing to do) and watching every window
    (``--rest-every 1``), in interleaved rounds (the order turned each round: the VM's speed
    drifts), and the tuner's own costs. Each ratio is the median of the rounds' ratios, with
    their spread. Runs are ``overhead_seconds`` long: the tuner rests only after the
    guardrail has judged its decision (about ten windows), and the ratio is the whole run's.

    ``member``: a member of the test family (``bench_family.Workload``) instead of db_bench
    readrandom, in runs as long as the family step's, with the model that step runs per device
    (the scale-free one where --out has it): the cost its runs paid where the tuner changed
    nothing, which is all that separates them from vanilla."""
    from . import bench_family as bf

    w = member.name if member else "readrandom"
    model = out / ("readahead_v3.iolm" if member and (out / bf.V3_MODEL).is_file() else "readahead_nn.iolm")
    seconds = (s.seconds if s.quick else bf.SECONDS) if member else s.overhead_seconds
    files = bf.Files(s, tb) if member and member.kind == "fio" else None
    tag = f"{w}-" if member else ""
    state = out / "raw" / "state"
    configs = {"base": None, "dry": [], "awake": ["--rest-every", "1"]}
    ops = {c: [] for c in configs}
    cpu = wall = 0.0

    def one(helper, seed: int) -> tuple[float, float, float]:
        """Throughput, the helper's CPU seconds and the run's wall seconds."""
        if member is None:
            got, _, c, wl = run_one(s, tb, db, w, helper=helper, seconds=seconds)
            return got, c, wl
        costs: list[float] = []
        got = bf.run(s, tb, db, files, member, kb=VANILLA_KB, seed=seed, seconds=seconds, helper=helper,
                     scratch=out / "raw", costs=costs)  # fmt: skip
        return sum(got), *(costs or (0.0, 0.0))

    bar = ra._bar(len(configs) * s.overhead_pairs, f"overheads {w}")
    for i in range(s.overhead_pairs):
        n = i % len(configs)
        order = list(configs)[n:] + list(configs)[:n]
        for config in order if i % 2 == 0 else order[::-1]:
            if configs[config] is None:
                ops[config].append(one(None, i + 1)[0])
            else:
                log = out / "raw" / f"overhead-{tag}{config}-{i}.log"
                # The options the family step's per-device tuner runs with (--progress ...).
                extra = bf.tuner_options(s, per_file=False) if member else []
                # The tuner as users run it (no line a window): its cost is what is measured.
                argv, _ = tuner_helper(tb, model, "device", log, state, True, extra=extra, verbose=False)
                got, c, wl = one((argv + configs[config], log), i + 1)
                ops[config].append(got)
                if config == "dry":
                    cpu += c
                    wall += wl
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()

    def stops(config: str) -> list[dict]:
        return [
            json.loads(line)
            for i in range(s.overhead_pairs)
            for line in open(out / "raw" / f"overhead-{tag}{config}-{i}.log")
            if '"event":"stop"' in line
        ]

    def ratio(config: str) -> dict:
        r = [x / b for x, b in zip(ops[config], ops["base"])]
        d = stops(config)
        total = lambda k: sum(float(x.get(k, 0)) for x in d)  # noqa: E731
        stop_wall = total("wall_s")
        return {
            "throughput_ratio": statistics.median(r),
            "throughput_ratio_min": min(r),
            "throughput_ratio_max": max(r),
            "throughput_ratio_middle_half": middle_half(r),
            "ratios": r,
            "bpf_cpu_percent": 100 * total("bpf_cpu_ms") / 1e3 / stop_wall if stop_wall else float("nan"),
            "bpf_runs_per_s": total("bpf_runs") / stop_wall if stop_wall else float("nan"),
            "windows": int(total("windows")),
            "rested_windows": int(total("rested_windows")),
            "sampled_windows": int(total("sampled_windows")),
            "wakes": int(total("wakes")),
            "lost_events": int(total("lost_events")),
        }

    dry, awake = ratio("dry"), ratio("awake")
    d = stops("dry")
    total = lambda k: sum(float(x.get(k, 0)) for x in d)  # noqa: E731
    # The workload's event rate as a tuner watching every window counts it (a resting one
    # counts only what it watched).
    a = stops("awake")
    events = sum(float(x.get("events_per_s", 0)) for x in a) / max(len(a), 1)
    res = {
        "workload": w,
        "model": model.name,
        "seconds": seconds,
        "ops_without_probes": statistics.median(ops["base"]),
        "ops_with_probes_no_tuning": statistics.median(ops["dry"]),
        "ops_watching_every_window": statistics.median(ops["awake"]),
        "pairs": s.overhead_pairs,
        **{k: v for k, v in dry.items()},
        "watching_every_window": awake,
        "tuner_cpu_percent": 100 * cpu / wall if wall else float("nan"),
        "events_per_s": events,
        "decide_us_mean": total("decide_us_mean") / max(len(d), 1),
        "decide_us_max": max((float(x.get("decide_us_max", 0)) for x in d), default=0.0),
    }
    # Actuation: the time the tuner spent on sysfs and fadvise in the evaluation runs.
    acts = [
        (float(d["act_us_total"]), int(d["changes"]))
        for f in (out / "raw").glob("tuner-*.log")
        for line in open(f)
        if '"event":"stop"' in line
        for d in [json.loads(line)]
        if int(d.get("changes", 0)) > 0 and "act_us_total" in d
    ]
    if acts:
        res["act_us_per_change"] = sum(a for a, _ in acts) / sum(c for _, c in acts)
    return res


def middle_half(xs: list[float]) -> list[float]:
    """The first and third quartiles (both the value itself for one value)."""
    if len(xs) < 2:
        return [xs[0], xs[0]] if xs else [float("nan")] * 2
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return [q[0], q[2]]


STEPS = ("sweep", "train", "evaluate", "b2b", "pairs", "shared", "trainset", "family", "online", "overheads")
#: Steps run only when asked for: ``retrain`` trains the scale-free model again from the
#: trainset step's recorded runs (the trainset step trains it already).
EXTRA_STEPS = ("retrain",)
#: The learner's measures of progress (`iolearn tune readahead --progress`); ``ops``: the
#: workload's own count (db_bench's operations, a one-process fio job's KiB read), relayed to
#: the tuner (`--progress ops:PATH`) in the family and online steps, ``auto`` for the workloads
#: with no count (the tools, cp and grep), fio's of several processes (judged each on its own)
#: and the online step's phases.
PROGRESS = ("cpu", "auto", "ops")


def progress_options(progress: str, count: Path | None = None) -> list[str]:
    """The tuner's ``--progress`` for the bench's ``progress``: with ``ops``, the workload's
    own count in ``count`` where one is relayed, else ``auto``."""
    if progress == "ops":
        return ["--progress", f"ops:{count}" if count else "auto"]
    return ["--progress", progress]


def main(argv=None) -> int:
    ap = Parser(prog="iolearn bench readahead --real", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small database and short runs (CI: about 2 minutes)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=Path("/var/tmp/iolearn-bench"))
    ap.add_argument(
        "--steps",
        default=",".join(STEPS),
        help="comma-separated steps to run (default: all but retrain; with --reuse, sweep and train are read "
        "from --out, and so are the runs of the trainset and the family's sweep that an earlier run finished; "
        "retrain: the scale-free model again from the trainset step's runs in --out, no runs, no root)",
    )
    ap.add_argument("--reuse", action="store_true", help="use the sweep, models and report already in --out")
    ap.add_argument(
        "--throttle",
        type=throttle_arg,
        default=None,
        metavar="IOPS,MIBPS",
        help="the blkio cgroup holds the workloads' reads from the test device to IOPS reads and MIBPS MiB a "
        "second (3000,125 is a cloud volume's baseline, AWS gp3); with --workdir on tmpfs (/dev/shm) the "
        "device is memory under that limit and its runs repeat to a fraction of a percent (default: the "
        "loop device as it comes, over the disk under --workdir)",
    )
    ap.add_argument(
        "--repeats", type=int_arg(1, 100), default=None, help="repeats per configuration (1 to 100; default 2, quick 1)"
    )
    ap.add_argument(
        "--family",
        default=None,
        help="comma-separated members of the test family the family, online and overheads steps run (default: "
        "all for the family step, see bench_family.FAMILY; three for the online step; db_bench readrandom "
        "for the overheads step); KML's six db_bench workloads (readrandom, readseq, ...) only when named",
    )
    ap.add_argument(
        "--progress",
        choices=PROGRESS,
        default="cpu",
        help="what the guardrail and the online learner count as progress in the online and family steps "
        "(iolearn tune readahead --progress); ops: the workload's own count (db_bench's operations, a one-process "
        "fio job's KiB read), relayed to the tuner in the family and online steps (auto for cp, grep, fio jobs of "
        "several processes and the online step's phases)",
    )
    ap.add_argument(
        "--fallback-online",
        action="store_true",
        help="the family step's per-device tuner lets the online learner decide the windows its model "
        "cannot (iolearn tune readahead --fallback-online)",
    )
    ap.add_argument(
        "--leap",
        action="store_true",
        help="the family step also runs LEAP, KML's baseline, prefetching on the kernel "
        "(iolearn tune readahead --controller leap-prefetch-unmarked)",
    )
    ap.add_argument(
        "--kml",
        action="store_true",
        help="the family step also runs KML's own recipe (readahead_kml.iolm in --out, made by the train step) "
        "per device without iolearn's guardrail",
    )
    ap.add_argument(
        "--family-configs",
        default=None,
        help="comma-separated configurations of the family step to run (vanilla, nn, nn_file, oracle, "
        "v3 where readahead_v3.iolm is in --out, and leap, kml with their options; default: all; vanilla is "
        "always run, the sweep too); only when named: vanilla_again (vanilla twice a repeat: the "
        "measurement's own spread), v3_dry (the v3 tuner with --dry-run: what watching costs), "
        "v3_refine (the v3 tuner with --refine-online: the learner refines what the guardrail kept), "
        "nn_file_refine (the per-file network with --refine-online: the learner decides the device's value "
        "beside it) and nn_file_v3 (the per-file network with --device-model readahead_v3.iolm: the v3 model, "
        "refined, decides the device's value beside it)",
    )
    ap.add_argument(
        "--no-phases",
        action="store_true",
        help="the online step runs its members only, not the phase runs (18 minutes of fio over 3 repeats)",
    )
    ap.add_argument(
        "--online-seconds",
        type=int,
        default=None,
        help="seconds of each member run of the online step, 30 to 1800 (default 120; the goal's "
        "horizon is 300: 90%% of the oracle's gain within 5 minutes)",
    )
    ap.add_argument(
        "--family-seconds",
        type=int,
        default=None,
        help="seconds of each run of the family step, its sweep included, 15 to 1800 (default 15; "
        "longer runs: a tuner left running, its start a smaller share)",
    )
    ap.add_argument(
        "--v3-features",
        default=None,
        help="comma-separated inputs the trainset and retrain steps train the scale-free (v3) model on, "
        f"each once, of {','.join(ra.FEATURES_V3)} (default: every one the windows hold; the model file names "
        "them and the tuner reads those)",
    )
    ap.add_argument(
        "--v3-tied",
        choices=("vanilla", "every"),
        default="vanilla",
        help="how a training workload whose sweep cannot rank some values (within 3%% of its best) teaches the "
        "scale-free model in the trainset and retrain steps: vanilla, its one label (vanilla where vanilla is "
        "among them); every, its windows once for each such value (default vanilla)",
    )
    a = ap.parse_args(argv)
    steps = set(a.steps.split(","))
    if a.v3_tied != "vanilla" and not {"trainset", "retrain"} & steps:
        ap.error("--v3-tied: applies to the trainset and retrain steps; add one to --steps")
    if a.v3_features is not None:
        if not {"trainset", "retrain"} & steps:
            ap.error("--v3-features: applies to the trainset and retrain steps; add one to --steps")
        fault = ra.v3_features_fault(a.v3_features.split(",") if a.v3_features else [])
        if fault is not None:
            ap.error(f"--v3-features: {fault}: want some of {', '.join(ra.FEATURES_V3)}, each once")
    if a.no_phases and "online" not in steps:
        ap.error("--no-phases: applies to the online step; add online to --steps")
    if a.online_seconds is not None:
        if "online" not in steps:
            ap.error("--online-seconds: applies to the online step; add online to --steps")
        if not 30 <= a.online_seconds <= 1800:
            ap.error(f"--online-seconds {a.online_seconds}: want 30 to 1800")
    if a.family_seconds is not None:
        if "family" not in steps:
            ap.error("--family-seconds: applies to the family step; add family to --steps")
        if a.quick:
            ap.error("--family-seconds: not with --quick (its runs are a few seconds)")
        if not 15 <= a.family_seconds <= 1800:
            ap.error(f"--family-seconds {a.family_seconds}: want 15 to 1800")
    if a.family is not None:
        from . import bench_family

        names = [w.name for w in bench_family.MEMBERS]
        wrong = [n for n in a.family.split(",") if n not in names]
        if wrong or not a.family:
            ap.error(f"--family: unknown {', '.join(wrong) or 'empty list'} (members: {', '.join(names)})")
    unknown = steps - set(STEPS) - set(EXTRA_STEPS)
    if unknown:
        ap.error(f"--steps: unknown {', '.join(sorted(unknown))} (steps: {', '.join(STEPS + EXTRA_STEPS)})")
    if "retrain" in steps:
        if "trainset" in steps:
            ap.error("--steps: retrain trains from the trainset step's runs; the trainset step trains already")
        if not a.reuse or a.out is None:
            ap.error("--steps retrain: needs --reuse and --out (the trainset step's runs are read from --out)")
        missing = [n for n in ("trainset-sweep.csv", "trainset-features.csv") if not (a.out / n).is_file()]
        if missing:
            paths = ", ".join(str(a.out / n) for n in missing)
            ap.error(f"--steps retrain: {paths}: missing (the trainset step writes them)")
    if a.fallback_online and "family" not in steps:
        ap.error("--fallback-online: applies to the family step's tuner; add family to --steps")
    if a.leap and "family" not in steps:
        ap.error("--leap: applies to the family step; add family to --steps")
    if a.progress == "ops" and "overheads" in steps:
        ap.error(
            "--progress ops: the workloads' counts are relayed in the family and online steps only; run overheads apart"
        )
    if a.family_configs is not None:
        from . import bench_family

        # Vanilla and every configuration the family step scores against it.
        known = {"vanilla", *bench_family.SCORED}
        wanted = a.family_configs.split(",")
        wrong = [c for c in wanted if c not in known]
        if wrong or not a.family_configs:
            ap.error(
                f"--family-configs: unknown {', '.join(wrong) or 'empty list'} "
                f"(configurations: {', '.join(sorted(known))})"
            )
        if "family" not in steps:
            ap.error("--family-configs: applies to the family step; add family to --steps")
        for c, flag in (("leap", a.leap), ("kml", a.kml)):
            if c in wanted and not flag:
                ap.error(f"--family-configs: {c} needs --{c}")
    if a.family_configs is not None and set(bench_family.V3_CONFIGS) & set(a.family_configs.split(",")):
        has_model = a.out is not None and (a.out / "readahead_v3.iolm").is_file()
        if not {"trainset", "retrain"} & steps and not has_model:
            ap.error("--family-configs: v3 needs readahead_v3.iolm in --out (the trainset step makes it)")
    if a.kml and "family" not in steps:
        ap.error("--kml: applies to the family step; add family to --steps")
    if a.reuse and not (a.out and (a.out / "report.json").is_file()):
        ap.error("--reuse needs --out with the report.json of an earlier run")
    if a.kml and a.reuse and not (a.out / "readahead_kml.iolm").is_file():
        ap.error(f"--kml: {a.out / 'readahead_kml.iolm'}: missing (a run without --reuse trains it)")
    earlier = None
    if a.reuse:
        # Read before the test bed is built, once: a report that cannot serve fails at once.
        try:
            earlier = json.loads(read_text(a.out / "report.json", 16 << 20))
        except (OSError, ValueError) as e:
            ap.error(f"--reuse: {a.out / 'report.json'}: {e}")
        if not isinstance(earlier, dict):
            ap.error(f"--reuse: {a.out / 'report.json'}: not a JSON object")
        was_quick = (earlier.get("settings") or {}).get("quick") if isinstance(earlier.get("settings"), dict) else None
        if was_quick is not None and was_quick != a.quick:
            ap.error(
                f"--reuse: {a.out / 'report.json'} is of a {'--quick' if was_quick else 'full'} run; "
                f"this one is {'--quick' if a.quick else 'full'} (runs of another size do not compare)"
            )
        # What the steps will read from --out, read now: a corrupt file fails before the test bed.
        try:
            if "trainset" in steps:
                from . import bench_trainset

                bench_trainset.recorded(a.out, [])
            if "family" in steps:
                from . import bench_family

                bench_family.earlier_sweeps(a.out / "family-runs.csv", ())
        except ValueError as e:
            ap.error(f"--reuse: {e}")
        kb = earlier.get("oracle_kb")
        good = isinstance(kb, dict) and kb and all(isinstance(v, int) and v > 0 for v in kb.values())
        if not good and {"evaluate", "shared"} & steps:
            ap.error(
                f"--reuse: {a.out / 'report.json'} has no oracle_kb (the sweep step's KiB per workload), "
                "which evaluate and shared need"
            )
    if a.leap and a.throttle:
        # LEAP's prefetch reads are the tuner's own (WILLNEED), outside the workloads' blkio group.
        ap.error("--leap: not with --throttle (LEAP's prefetch reads would pass the device's limit)")
    device = device_of(a.workdir, a.throttle)
    if a.reuse and earlier is not None:
        try:
            stale_runs(a.out, steps, earlier, device)
        except ValueError as e:
            ap.error(f"--reuse: {e}")
    v3_features = tuple(a.v3_features.split(",")) if a.v3_features else None
    if steps == {"retrain"}:
        # Offline: no test bed, no root.
        return retrain_only(a.out, earlier, a.quick, v3_features, a.v3_tied)
    if os.geteuid() != 0:
        print("error: the real benchmark needs root (loop devices, cgroups, eBPF)", file=sys.stderr)
        return 2
    # A benchmark does not change the machine's packages behind the user's back: `make setup`
    # (scripts/bootstrap.sh) installs db_bench and fio when run as root.
    hints = {"db_bench": "rocksdb-tools", "losetup": "util-linux", "mkfs.ext4": "e2fsprogs"}
    if {"family", "online", "trainset"} & steps or ("overheads" in steps and a.family):
        hints["fio"] = "fio"
    for tool, package in hints.items():
        if not shutil.which(tool):
            print(
                f"error: {tool} not found: install {package} (apt-get install {package}, or make setup as root)",
                file=sys.stderr,
            )
            return 2
    s = Settings(a.quick)
    s.v3_features = v3_features
    s.v3_tied = a.v3_tied
    s.family = tuple(a.family.split(",")) if a.family else None
    s.progress = a.progress
    s.fallback_online = a.fallback_online
    s.phases = not a.no_phases
    s.online_seconds = a.online_seconds
    s.family_seconds = a.family_seconds
    s.leap = a.leap
    s.kml = a.kml
    s.family_configs = tuple({"vanilla", *a.family_configs.split(",")}) if a.family_configs else None
    s.reuse = a.reuse
    if a.repeats:
        s.repeats = max(1, a.repeats)
    date = datetime.date.today().isoformat()
    out = a.out or Path("docs/benchmarks") / f"{date}-readahead-real"
    try:
        output_dir(out)
        output_dir(out / "raw")  # logs of every step (a --reuse run may start without them)
        private_dir(a.workdir)
    except OutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # A crashed run's image would count against the room the new one needs: cleaned first.
    if Testbed.clean_leftovers(a.workdir):
        print("test bed: removed what a previous (crashed) run left", file=sys.stderr)
    problem = testbed_room(a.workdir, s, a.throttle)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if {"family", "trainset"} & steps:
        # Before the first run those steps record: a resumed run finds its own device.
        write_text(out / DEVICE_FILE, json.dumps(device) + "\n")

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    t0 = time.time()
    with Testbed(a.workdir, s.memory_mb, s.image_mb, a.throttle) as tb:
        print(
            f"test bed: {tb.device} ({s.image_mb} MiB image on {describe_device(device)}), ext4 at {tb.mnt}, "
            f"cgroup {tb.cgroup} ({s.memory_mb} MiB); loop default read_ahead_kb {tb.readahead()}",
            file=sys.stderr,
        )
        db = create_db(s, tb)
        if a.reuse:
            report = reused(earlier, date)
            oracle = report.get("oracle_kb", {})
            # Steps finished by an earlier --reuse run whose report was not written.
            if "back_to_back" not in report and (out / "back_to_back-runs.csv").exists():
                report["back_to_back"] = summarize(ra._read(out / "back_to_back-runs.csv"))
            if "pairs" not in report and (out / "pairs-runs.csv").exists():
                report["pairs"] = summarize_pairs(ra._read(out / "pairs-runs.csv"))
            if "online" not in report and (out / "online-runs.csv").exists():
                from . import bench_online

                report["online"] = bench_online.summarize(bench_online.load(out / "online-runs.csv"))
        else:
            rows, feats, file_feats = sweep(s, tb, db, out)
            oracle = ra.best_per_workload(rows)
            rep, rep_file = train(s, rows, feats, file_feats, out)
            report = {
                "date": date,
                "machine": machine(),
                "settings": {k: v for k, v in vars(s).items()},
                "oracle_kb": oracle,
                # The device of the sweep (oracle_kb) and of the steps run with it; a --reuse
                # run keeps it, and records the family step's own in family_options.
                "device": device,
                "train": {"nn_cv": rep["nn_cv"], "dt_cv": rep["dt_cv"], "classes": rep["classes"]},
                "train_file": {"nn_cv": rep_file["nn_cv"], "classes": rep_file["classes"]},
            }
        if "evaluate" in steps:
            report["table"] = summarize(evaluate(s, tb, db, out, oracle))
        if "b2b" in steps:
            report["back_to_back"] = summarize(back_to_back(s, tb, db, out))
        if "pairs" in steps:
            report["pairs"] = summarize_pairs(pairs(s, tb, db, out))
        if "shared" in steps:
            report["shared"] = summarize_shared(shared(s, tb, db, out, oracle))
        if "trainset" in steps:
            from . import bench_trainset

            rep = bench_trainset.trainset(s, tb, db, out, resume=a.reuse)
            report["trainset"] = trainset_section(rep)
        if "retrain" in steps:
            from . import bench_trainset

            rep = bench_trainset.retrain(out, s.quick)
            report["trainset"] = trainset_section(rep)
        if "family" in steps:
            # Imported here: bench_family builds on this module.
            from . import bench_family

            report["family"] = bench_family.summarize(bench_family.family(s, tb, db, out))
            report["family_options"] = {
                # The family step's own machine and device (a --reuse report keeps the sweep's).
                "machine": machine(),
                "device": device,
                "progress": s.progress,
                "fallback_online": s.fallback_online,
                "leap": s.leap,
                "kml": s.kml,
                "configs": sorted(s.family_configs) if s.family_configs else None,
                "seconds": bench_family.run_seconds(s),
            }
        if "online" in steps:
            from . import bench_online

            rows = bench_online.online(s, tb, db, out)
            report["online"] = bench_online.summarize(rows)
            bench_online.plot(rows, report["online"], out / "online.png")
        if "overheads" in steps and s.family:
            from . import bench_family

            members = [m for m in bench_family.MEMBERS if m.name in s.family]
            # Merged by member with an earlier run's (--reuse): one member at a time adds up.
            measured = {o["workload"]: o for o in report.get("overheads_family") or [] if isinstance(o, dict)}
            for m in members:
                measured[m.name] = overheads(s, tb, db, out, member=m)
            report["overheads_family"] = list(measured.values())
        elif "overheads" in steps:
            report["overheads"] = overheads(s, tb, db, out)
        write_text(out / "report.json", json.dumps(report, indent=2, default=str))
        plot(report, out / "real.png")
    print_report(report)
    print(f"done in {time.time() - t0:.0f} s; results in {out}/", file=sys.stderr)
    return 0


def trainset_section(rep: dict) -> dict:
    """The report's ``trainset`` section: the training report without its rows of features."""
    return {k: v for k, v in rep.items() if k != "features"}


def retrain_only(out: Path, earlier: dict, quick: bool, features=None, tied: str = "vanilla") -> int:
    """``--steps retrain`` alone: the scale-free model trained again from the runs the trainset
    step recorded in ``out`` (on ``features``), and the report's ``trainset`` section replaced."""
    from . import bench_trainset

    report = reused(earlier, datetime.date.today().isoformat())
    try:
        rep = bench_trainset.retrain(out, quick, features=features, tied=tied)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report["trainset"] = trainset_section(rep)
    write_text(out / "report.json", json.dumps(report, indent=2, default=str))
    print(f"retrained; models and report in {out}/", file=sys.stderr)
    return 0


#: The device of reports written before --throttle: a loop device over a file on this
#: machine's disk.
OLD_DEVICE = {"backing": "ext2/ext3", "throttle": None}


def throttle_arg(text: str) -> tuple[int, int]:
    """``--throttle IOPS,MIBPS``: read IOPS 100 to 1,000,000 and MiB/s 1 to 100,000."""
    parts = text.split(",")
    try:
        iops, mibps = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want IOPS,MIBPS, two integers (e.g. 3000,125)") from None
    if not 100 <= iops <= 1_000_000 or not 1 <= mibps <= 100_000:
        raise argparse.ArgumentTypeError(f"{text!r}: want IOPS 100 to 1000000 and MIBPS 1 to 100000")
    return iops, mibps


def fs_type(path: Path) -> str:
    """The file system type under ``path`` (its nearest existing parent's) as ``stat -f``
    names it ("tmpfs", "ext2/ext3" for ext4 too: one magic number for the three)."""
    p = path.absolute()
    while not p.exists():
        p = p.parent
    return sh("stat", "-f", "-c", "%T", p).stdout.strip()


#: The device the runs of ``family-runs.csv`` and ``trainset-sweep.csv`` in --out were made
#: on, written before those steps record their first run (absent: runs before --throttle,
#: [`OLD_DEVICE`]).
DEVICE_FILE = "device.json"


def stale_runs(out: Path, steps: set[str], earlier: dict, device: dict):
    """Refuses (ValueError) what a --reuse run in ``out`` would read of runs on a device other
    than ``device``: sweeps are of the device they ran on, so a run on another makes its own."""
    recorded = recorded_device(out)
    stale = [
        str(out / name)
        for step, name in (("family", "family-runs.csv"), ("trainset", "trainset-sweep.csv"))
        if step in steps and (out / name).exists() and recorded != device
    ]
    swept_on = earlier.get("device", OLD_DEVICE)
    if not isinstance(swept_on, dict):
        raise ValueError(f"{out / 'report.json'}: device is not an object")
    if {"evaluate", "shared"} & steps and swept_on != device:
        stale.append(f"{out / 'report.json'}'s oracle_kb")
    if stale:
        was = recorded if recorded != device else swept_on
        raise ValueError(
            f"{', '.join(stale)}: runs on another device ({describe_device(was)}; this run: "
            f"{describe_device(device)}); start a new --out with the models and report.json only, and "
            "no steps that read the sweep step's oracle"
        )


def recorded_device(out: Path) -> dict:
    path = out / DEVICE_FILE
    if not path.exists():
        return OLD_DEVICE
    try:
        d = json.loads(read_text(path, 1 << 16))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from e
    if not isinstance(d, dict) or set(d) != {"backing", "throttle"}:
        raise ValueError(f"{path}: not a device record (want backing and throttle)")
    return d


def device_of(workdir: Path, throttle: tuple[int, int] | None) -> dict:
    """What the test device is: the file system its image lives on and the blkio limits."""
    return {"backing": fs_type(workdir), "throttle": list(throttle) if throttle else None}


def describe_device(device: dict) -> str:
    t = device.get("throttle")
    limit = f", reads held to {t[0]} IOPS and {t[1]} MiB/s" if t else ""
    return f"a loop device over {device.get('backing')}{limit}"


def testbed_room(workdir: Path, s: Settings, throttle: tuple[int, int] | None) -> str | None:
    """Why the test bed cannot be built as asked (None: it can), checked before anything is
    built and after ``workdir`` is made."""
    if throttle and not Path("/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device").exists():
        return "--throttle: no cgroup v1 blkio controller with throttling (/sys/fs/cgroup/blkio)"
    if fs_type(workdir) == "tmpfs":
        # The image's written blocks are memory there: up to its size, beside the workloads'.
        st = os.statvfs(workdir)
        free_mb = st.f_bavail * st.f_frsize >> 20
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        avail_mb = next(int(x.split()[1]) >> 10 for x in meminfo if x.startswith("MemAvailable:"))
        need = s.image_mb + s.memory_mb
        if free_mb < s.image_mb or avail_mb < need:
            return (
                f"--workdir {workdir}: on tmpfs the {s.image_mb} MiB image is memory; {free_mb} MiB free there and "
                f"{avail_mb} MiB of memory available, {need} MiB needed"
            )
    return None


def reused(earlier: dict, date: str) -> dict:
    """The report a ``--reuse`` run starts from: the earlier report's sections, dated ``date``
    (the steps run now), with the date of the sweep and training it builds on kept as
    ``sweep_date`` (the first run's, through a chain of reuses)."""
    report = dict(earlier)
    report.setdefault("sweep_date", earlier.get("date"))
    report["date"] = date
    return report


def machine() -> str:
    cpu = next((x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?")
    return f"{os.uname().release}, {os.cpu_count()} x {cpu}"


def print_report(rep: dict):
    built_on = f"; sweep of {rep['sweep_date']}" if rep.get("sweep_date") not in (None, rep.get("date")) else ""
    print(f"\nReal readahead benchmark ({rep.get('date')}{built_on}, {rep.get('machine')})")
    # A --reuse run of later steps alone may start from a report without the sweep's.
    if "oracle_kb" in rep:
        print(f"oracle (best static read_ahead_kb): {rep['oracle_kb']}")
    if "train" in rep and "train_file" in rep:
        print(
            f"network 10-fold CV {rep['train']['nn_cv']:.3f}, per file {rep['train_file']['nn_cv']:.3f}; "
            f"class -> KiB {rep['train']['classes']}"
        )
    if "table" in rep:
        print(f"{'workload':<24}{'vanilla':>10}{'dev 2560':>10}{'nn':>7}{'nn/file':>8}{'oracle':>8}  (x vanilla)")
    for r in rep.get("table", []):
        v = r["vanilla"]
        print(
            f"{r['workload']:<24}{v:>10.0f}{r['device_default'] / v:>10.2f}{r['nn'] / v:>7.2f}"
            f"{r['nn_file'] / v:>8.2f}{r['oracle'] / v:>8.2f}"
        )
    for r in rep.get("shared", []):
        lo, hi = r["range"]
        print(
            f"shared {r['pair']:<24}{r['config']:<16} weighted speedup {r['weighted_speedup']:.2f} "
            f"[{lo:.2f}, {hi:.2f}] over {r['repeats']} repeats"
        )
    if "family" in rep:
        from . import bench_family

        bench_family.print_table(rep["family"])
    if "online" in rep:
        from . import bench_online

        bench_online.print_table(rep["online"])
    if rep.get("overheads"):
        print_overheads(rep["overheads"])
    for o in rep.get("overheads_family") or []:
        print_overheads(o)


def print_overheads(o: dict):
    print(
        f"overheads ({o['workload']}): throughput with probes + tuner attached, not acting: "
        f"{o['throughput_ratio']:.3f}x (median of {o.get('pairs', '?')} interleaved rounds, "
        f"[{o.get('throughput_ratio_min', float('nan')):.3f}, {o.get('throughput_ratio_max', float('nan')):.3f}]); "
        f"tuner CPU {o['tuner_cpu_percent']:.2f}%; lost events {o['lost_events']}"
    )
    a = o.get("watching_every_window")
    if a:
        print(
            f"  watching every window (--rest-every 1): {a['throughput_ratio']:.3f}x "
            f"[{a['throughput_ratio_min']:.3f}, {a['throughput_ratio_max']:.3f}]; "
            f"windows rested by default {o.get('rested_windows', 0)} of {o.get('windows', 0)}"
        )


def _interruptible() -> int:
    """``main`` whose interruption (SIGINT, SIGTERM, SIGHUP) says the test bed is gone."""
    try:
        return main()
    except KeyboardInterrupt as e:
        print(f"interrupted ({e}): test bed removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(run_cli(_interruptible, "iolearn bench readahead --real"))
