"""MittCFQ's successor on this machine's kernel: loop-device replicas behind bfq and mq-deadline.

iolearn bench mittcfq --real [--sched bfq mq-deadline] [--scenario low high ec2] [--repeats 3]
                             [--duration 20] [--quick] [--out DIR]

Three loop devices over written images on this machine's disk (direct I/O), each with the
scheduler under test, a replicated store's gets (4 KiB random reads, 8 store threads per
replica at best effort 4; 50 per second in the microbenchmarks, 100 in ``ec2``) and another
tenant's reads (4 threads of 4 KiB random reads) at its own I/O priority, through
``iolearn replay mix``:

- ``low`` / ``high``: the tenant on the replica every get tries first, always busy, at best
  effort 7 / 0 (MittOS's noise at a lower / higher priority; bfq weighs the levels,
  mq-deadline only classes, so there the tenant is plain load);
- ``ec2``: the tenant on every replica at best effort 0, busy 30% of the time in periods of
  200 ms with its own phase on each replica; gets try a random replica first.

Strategies: Base, Hedged (a second copy after the deadline), MittOS (EBUSY when the books of
the device's scheduler predict the deadline would be missed; the last replica takes it),
MittOS-wait (every replica asked; all busy: the least busy). The books are
``iolearn_policy::mittsched`` fed by the block tracepoints through eBPF; no late cancellation
(a request cannot be taken back out of the kernel's scheduler). The deadline and the hedge
delay come from calibration runs on a seed of their own (``low`` / ``high``: four times the
quiet device's p95, as MittOS's 20 ms for a disk; ``ec2``: Base's p95 under the noise, as
MittOS's 13 ms). Strategies are interleaved within each repeat; the table gives medians over
repeats with the range. Root needed; the loop devices, their images and the schedulers are restored on exit,
on signals, and by the next run after a crash.
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

from ._cli import Parser
from ._cli import run as run_cli
from ._validate import float_arg, int_arg
from .admission import _progress, write_parquet
from .bench_real import iolearn_cmd, sh, write_image
from .mittcfq import _med, row_cells
from .safeio import output_dir, private_dir, read_text, write_text

SCHEDULERS = ("bfq", "mq-deadline")
SCENARIOS = ("low", "high", "ec2")
STRATEGIES = (
    ("Base", "base"),
    ("Hedged", "hedged:{d}"),
    ("MittOS", "mitt:{d}"),
    ("MittOS-wait", "mitt-wait:{d}"),
)
#: Per scenario: the tenant's options, the replica every get tries first (None: random) and
#: the gets per second (the microbenchmarks send every get to one replica: half the rate).
TENANTS = {
    "low": (["--tenant-prio", "be7", "--tenant-on", "0", "--tenant-busy", "1"], 0, 50.0),
    "high": (["--tenant-prio", "be0", "--tenant-on", "0", "--tenant-busy", "1"], 0, 50.0),
    "ec2": (["--tenant-prio", "be0", "--tenant-busy", "0.3", "--tenant-period-ms", "200"], None, 100.0),
}
#: The calibration runs' seed (deadline): never a reported one.
CALIBRATION_SEED = 1_000_003
#: The microbenchmarks' deadline in quiet p95s (MittOS: 20 ms on disks).
MICRO_DEADLINE_QUIET_P95 = 4.0
PERCENTILES = (50, 90, 95, 99, 99.9)
IMAGE_MB = 512


class Replicas:
    """Loop devices over written images (a hole would be read without touching the disk), with
    a journal of each device's scheduler before we changed it: restored and detached on exit,
    and by the next run if a crash left them behind (also `bench admission --real`'s)."""

    def __init__(self, workdir: Path, n: int = 3, image_mb: int = IMAGE_MB):
        self.workdir = workdir
        self.image_mb = image_mb
        self.images = [workdir / f"replica{i}.img" for i in range(n)]
        self.journal = workdir / "schedulers.json"
        self.devices: list[str] = []
        self.saved: dict[str, str] = {}

    @staticmethod
    def _sched_path(dev: str) -> Path:
        return Path("/sys/block") / Path(dev).name / "queue" / "scheduler"

    @classmethod
    def current(cls, dev: str) -> str:
        text = read_text(cls._sched_path(dev), 4096)
        return next((w.strip("[]") for w in text.split() if w.startswith("[")), "none")

    def set_scheduler(self, name: str) -> None:
        for d in self.devices:
            write_text_sysfs(self._sched_path(d), name)

    def _write_journal(self) -> None:
        write_text(self.journal, json.dumps(self.saved))

    def clean_leftovers(self) -> None:
        saved = {}
        if self.journal.is_file():
            try:
                saved = json.loads(read_text(self.journal, 1 << 16))
            except (ValueError, OSError):
                saved = {}
        for img in self.images:
            for line in sh("losetup", "-j", img, check=False).stdout.splitlines():
                dev = line.split(":")[0]
                if dev in saved:
                    write_text_sysfs(self._sched_path(dev), saved[dev], check=False)
                sh("losetup", "-d", dev, check=False)
            img.unlink(missing_ok=True)
        self.journal.unlink(missing_ok=True)

    def __enter__(self) -> Replicas:
        private_dir(self.workdir)
        self.clean_leftovers()
        try:
            for img in self.images:
                write_image(img, self.image_mb)
                dev = sh("losetup", "--direct-io=on", "--find", "--show", img).stdout.strip()
                self.devices.append(dev)
                self.saved[dev] = self.current(dev)
                self._write_journal()
                # losetup may fall back to buffered I/O with a warning: the page cache would
                # answer the reads.
                dio = Path("/sys/block") / Path(dev).name / "loop" / "dio"
                if read_text(dio, 64).strip() != "1":
                    raise RuntimeError(f"{dev}: direct I/O is not on ({dio}); the benchmark needs it")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        # A second signal must not cut the restoring short: held until it is done.
        held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            for d in self.devices:
                if d in self.saved:
                    write_text_sysfs(self._sched_path(d), self.saved[d], check=False)
                sh("losetup", "-d", d, check=False)
            self.devices = []
            self.clean_leftovers()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def write_text_sysfs(path: Path, value: str, check: bool = True) -> None:
    """Write a sysfs attribute (not through a temporary file: sysfs has none)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
    except OSError as e:
        if check:
            raise RuntimeError(f"{path}: {e}") from e


def run_mix(devices: list[str], scenario: str, strategy: str, seed: int, args, out: Path, tenant: bool = True) -> dict:
    """One `iolearn replay mix` run; its gets' latencies (ms) and counts."""
    opts, first, rate = TENANTS[scenario]
    cmd = iolearn_cmd() + ["replay", "mix", "--replicas", ",".join(devices), "--strategy", strategy]
    cmd += ["--gets-per-s", f"{rate:g}", "--duration", f"{args.duration:g}", "--warmup", "2"]
    cmd += ["--seed", str(seed), "--out", str(out)]
    cmd += opts if tenant else ["--tenant-threads", "0"]
    if first is not None:
        cmd += ["--first", str(first)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    with open(out) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise RuntimeError(f"{' '.join(cmd)}: no gets recorded")
    lat = np.array([int(r["latency_ns"]) for r in rows]) / 1e6
    books = p.stdout.split("books: ")[1].split("\n")[0] if "books: " in p.stdout else ""
    return {
        "lat": lat,
        "gets": len(rows),
        "ebusy": sum(int(r["ebusy"]) for r in rows),
        "extra": sum(int(r["duplicates"]) for r in rows),
        "late": sum(int(r["lag_ns"]) > 1_000_000 for r in rows),
        "pred": np.array([int(r["predicted_ns"]) for r in rows]) / 1e6,
        "actual": np.array([int(r["actual_ns"]) for r in rows]) / 1e6,
        "books": books,
    }


def deadline_ms(devices: list[str], scenario: str, args, out: Path) -> float:
    """The deadline (and hedge delay) MittOS would use in `scenario`, from a run on the
    calibration seed."""
    if scenario == "ec2":
        cal = run_mix(devices, scenario, "base", CALIBRATION_SEED, args, out)
        return max(float(np.percentile(cal["lat"], 95)), 0.01)
    quiet = run_mix(devices, scenario, "base", CALIBRATION_SEED, args, out, tenant=False)
    return max(MICRO_DEADLINE_QUIET_P95 * float(np.percentile(quiet["lat"], 95)), 0.01)


def row_of(scenario: str, sched: str, label: str, repeat: int, d: float, r: dict) -> dict:
    lat = r["lat"]
    row = {
        "scenario": scenario,
        "sched": sched,
        "strategy": label,
        "repeat": repeat,
        "deadline_ms": d,
        "gets": r["gets"],
        # Gets a client took up over 1 ms late (all busy): their latency counts the wait.
        "late_gets": r["late"],
        "mean_ms": float(lat.mean()),
        **{f"p{p:g}_ms": float(np.percentile(lat, p)) for p in PERCENTILES},
        "ebusy": r["ebusy"],
        "extra_copies": r["extra"],
        "books": r["books"],
    }
    if label == "Base":
        # The books watched Base's first tries without acting: their error is a measurement.
        pr, ac = r["pred"], r["actual"]
        row["pred_mae_ms"] = float(np.mean(np.abs(pr - ac)))
        row["pred_wrong"] = float(np.mean((pr > d) != (ac > d)))
        row["actual_over"] = float(np.mean(ac > d))
        # The better constant call (always busy or never) on the same reads: the bar to clear.
        row["const_wrong"] = float(min(row["actual_over"], 1 - row["actual_over"]))
    return row


def pack_runs(raw: Path, path: Path) -> int:
    """Every get of every run (`raw/*.csv`, one per run) into one Parquet file with the run's
    name as a column, then the CSVs removed; returns the gets packed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .safeio import atomic_open

    cols: dict[str, list] = {"run": []}
    files = sorted(raw.glob("*.csv"))
    for f in files:
        with open(f) as fh:
            for r in csv.DictReader(fh):
                cols["run"].append(f.stem)
                for k, v in r.items():
                    cols.setdefault(k, []).append(int(v))
    with atomic_open(path) as fh:
        pq.write_table(pa.table(cols), fh, compression="zstd")
    for f in files:
        f.unlink()
    raw.rmdir()
    return len(cols["run"])


def markdown(rows: list[dict], scenario: str, sched: str) -> str:
    mine = [r for r in rows if r["scenario"] == scenario and r["sched"] == sched]
    d = mine[0]["deadline_ms"]
    reps = len({r["repeat"] for r in mine if r["strategy"] == "Base"})
    lines = [
        f"### {scenario}, {sched} (deadline {d:.2f} ms; medians over {reps} repeat(s) [min-max])",
        "",
        "| strategy | mean ms | p95 ms | p99 ms | p99.9 ms | p95 vs Hedged | p99 vs Hedged | p95 vs Base "
        "| EBUSY | extra copies |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label in ("NoNoise", *(s for s, _ in STRATEGIES)):
        if not any(r["strategy"] == label for r in mine):
            continue
        lines.append(f"| {label} | " + " | ".join(row_cells(mine, label, 2)) + " |")
    late = sum(r["late_gets"] for r in mine)
    if late:
        lines += ["", f"{late} gets were taken up over 1 ms late (every client busy); their latency counts it."]
    mae = _med(mine, "Base", "pred_mae_ms")[0]
    wrong = _med(mine, "Base", "pred_wrong")[0]
    over = _med(mine, "Base", "actual_over")[0]
    const = _med(mine, "Base", "const_wrong")[0]
    lines += [
        "",
        f"Books on Base's first tries (watching, not acting): mean absolute error {mae:.2f} ms; "
        f"{wrong:.1%} of deadline calls wrong; the better constant call {const:.1%} "
        f"({over:.1%} of those reads took longer than the deadline).",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = Parser(prog="iolearn bench mittcfq --real", description=__doc__.splitlines()[0])
    ap.add_argument("--sched", nargs="+", choices=SCHEDULERS, default=list(SCHEDULERS))
    ap.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    ap.add_argument("--repeats", type=int_arg(1, 100), default=3, help="runs of each strategy (1 to 100)")
    ap.add_argument("--duration", type=float_arg(3.0, 3600.0), default=20.0, help="seconds of gets per run (3 to 3600)")
    ap.add_argument("--quick", action="store_true", help="one repeat of 4 s each (CI; overrides --repeats, --duration)")
    ap.add_argument("--workdir", type=Path, default=Path("/var/tmp/iolearn-bench-mittcfq"))
    ap.add_argument("--out", type=Path, default=Path("results/mittcfq-real"))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("iolearn bench mittcfq --real: needs root (loop devices, schedulers, eBPF)", file=sys.stderr)
        return 2
    if args.quick:
        # --quick is a fixed short run (CI): it takes precedence over --repeats / --duration.
        args.repeats, args.duration = 1, 4.0
    output_dir(args.out)
    raw = args.out / "runs"
    output_dir(raw)

    def stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return _run(args, raw)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(args, raw: Path) -> int:
    rows: list[dict] = []
    t0 = time.time()
    total = len(args.sched) * len(args.scenario) * (2 + args.repeats * len(STRATEGIES))
    bar = _progress(total, "mittcfq --real")
    with Replicas(args.workdir) as reps:
        for sched in args.sched:
            reps.set_scheduler(sched)
            for scenario in args.scenario:
                tag = f"{scenario}-{sched}"
                d = deadline_ms(reps.devices, scenario, args, raw / f"{tag}-calibration.csv")
                if bar is not None:
                    bar.update(1)
                quiet = run_mix(reps.devices, scenario, "base", 1, args, raw / f"{tag}-nonoise.csv", tenant=False)
                rows.append(row_of(scenario, sched, "NoNoise", 0, d, quiet))
                if bar is not None:
                    bar.update(1)
                for k in range(args.repeats):
                    order = STRATEGIES[k % len(STRATEGIES) :] + STRATEGIES[: k % len(STRATEGIES)]
                    for label, template in order:
                        strategy = template.format(d=f"{d:.6g}")
                        r = run_mix(reps.devices, scenario, strategy, 1 + k, args, raw / f"{tag}-{label}-{k}.csv")
                        rows.append(row_of(scenario, sched, label, k, d, r))
                        if bar is not None:
                            bar.update(1)
    if bar is not None:
        bar.close()
    write_parquet(rows, args.out / "results.parquet")
    pack_runs(raw, args.out / "gets.parquet")
    sections = [markdown(rows, sc, sd) for sd in args.sched for sc in args.scenario]
    head = (
        f"# MittCFQ's successor on loop devices ({time.strftime('%Y-%m-%d')}, {os.uname().nodename}, "
        f"{os.cpu_count()} CPUs, kernel {os.uname().release})\n\n"
        f"`iolearn bench mittcfq --real --sched {' '.join(args.sched)} --scenario {' '.join(args.scenario)} "
        f"--repeats {args.repeats} --duration {args.duration:g}`: 3 loop devices over {IMAGE_MB} MiB written images, "
        f"gets of 4 KiB, {time.time() - t0:.0f} s.\n"
    )
    write_text(args.out / "table.md", head + "\n" + "\n\n".join(sections) + "\n")
    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": os.uname().nodename,
        "kernel": os.uname().release,
        "wall_s": time.time() - t0,
        "rows": [{k: v for k, v in r.items()} for r in rows],
    }
    write_text(args.out / "summary.json", json.dumps(summary, indent=1))
    print("\n\n".join(sections))
    print(f"\ntable: {args.out}/table.md")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main, "iolearn bench mittcfq --real"))
