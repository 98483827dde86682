"""The kernel online step's arithmetic (issue 12, must-show 2): time to 90% of the oracle's
gain, shares, per-second series from fio's logs and finished files, the tuner's decisions,
and db_bench's count relayed to the tuner. The step itself runs in `test_bench_real.py`'s
quick benchmark."""

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolearn import bench_family, bench_online, bench_real


def test_t90_is_the_first_second_from_which_a_span_holds_90_percent_of_the_gain():
    vanilla = [10.0] * 60
    oracle = [20.0] * 60
    # The learner at vanilla for 20 s, then at the oracle: a 10 s mean holds 90% once at most
    # one of its seconds is still at vanilla.
    learner = [10.0] * 20 + [20.0] * 40
    assert bench_online.t90(learner, vanilla, oracle, span=10) == 19
    # 85% of the gain is not 90%.
    assert bench_online.t90([18.5] * 60, vanilla, oracle, span=10) is None
    # Where the oracle gains nothing over the same seconds, there is nothing to wait for.
    assert bench_online.t90([10.0] * 60, vanilla, [10.5] * 60, span=10) == 0
    # Series of different lengths are compared over what they share; empty ones never reach it.
    assert bench_online.t90(learner[:30], vanilla, oracle, span=10) == 19
    assert bench_online.t90([], vanilla, oracle) is None


def test_a_share_of_the_gain_is_only_given_where_the_oracle_gains_over_10_percent():
    assert bench_online.share(15.0, 10.0, 20.0) == pytest.approx(0.5)
    assert bench_online.share(9.0, 10.0, 20.0) == pytest.approx(-0.1)
    assert bench_online.share(15.0, 10.0, 11.0) is None


def test_fio_bandwidth_logs_sum_the_jobs_per_second_and_are_removed(tmp_path):
    prefix = tmp_path / "fio"
    (tmp_path / "fio_bw.1.log").write_text("1000, 1024, 0, 0, 0\n2002, 2048, 0, 0, 0\n3001, 1024, 0, 0, 0\n")
    (tmp_path / "fio_bw.2.log").write_text("999, 1024, 0, 0, 0\n3000, 1024, 0, 0, 0\n")
    assert bench_family.fio_series(prefix, 2) == [2048 * 1024, 2048 * 1024, 2048 * 1024]
    assert not list(tmp_path.iterdir())
    # fio's last, partial interval (logged at exit, under a second after the one before) is
    # not a second of its own, nor added to the one before.
    (tmp_path / "fio_bw.1.log").write_text("1000, 100, 0, 0, 0\n2000, 100, 0, 0, 0\n2400, 50, 0, 0, 0\n")
    assert bench_family.fio_series(prefix, 1) == [100 * 1024, 100 * 1024]
    with pytest.raises(RuntimeError, match=r"fio_bw\.1\.log: fio wrote no bandwidth log"):
        bench_family.fio_series(prefix, 1)
    (tmp_path / "fio_bw.1.log").write_text("1000, lots, 0\n")
    with pytest.raises(RuntimeError, match=r"fio_bw\.1\.log:1: not a fio bandwidth log line"):
        bench_family.fio_series(prefix, 1)


def test_files_finished_are_binned_by_the_second_they_finished_in():
    assert bench_family.bin_seconds([(0.2, 5), (0.9, 5), (2.5, 7)], 3) == [10, 0, 7]
    assert bench_family.bin_seconds([], 3) == []
    # A file that finished after the run's 3 s counts in its last whole second.
    assert bench_family.bin_seconds([(0.5, 5), (2.5, 7), (3.04, 9)], 3) == [5, 0, 16]


# db_bench's interval reports (RocksDB 7.8, `--stats_interval_seconds=1`), two threads.
DB_STDERR = """\
2026/11/24-19:42:07  ... thread 1: (2500,2500) ops and (2494.3,2494.3) ops/second in (1.002286,1.002286) seconds
2026/11/24-19:42:07  ... thread 0: (90,90) ops and (89.4,89.4) ops/second in (1.006109,1.006109) seconds
2026/11/24-19:42:08  ... thread 1: (1000,3500) ops and (2000.0,1750.0) ops/second in (0.500000,1.502286) seconds
2026/11/24-19:42:09  ... thread 0: (90,180) ops and (89.6,89.5) ops/second in (1.003940,2.010049) seconds
"""


def test_db_bench_interval_reports_become_operations_per_second():
    series = bench_family.db_series(DB_STDERR, 3)
    assert len(series) == 3
    # Thread 1's first 2,500 ops over 1.002 s: 2,494 in second 0, 6 in second 1; its next
    # 1,000 over 0.5 s all in second 1; thread 0 (90 over 1.006 s, then 90 over 1.004 s) too.
    assert series[0] == pytest.approx(2500 / 1.002286 + 90 / 1.006109, rel=1e-6)
    assert sum(series) == pytest.approx(2500 + 1000 + 180, rel=1e-9)
    assert series[2] == pytest.approx(90 * 0.010049 / 1.00394, rel=1e-6)
    # Where thread 0 writes beside the readers, it is left out, as db_bench's own report does.
    readers = bench_family.db_series(DB_STDERR, 3, skip_writer=True)
    assert sum(readers) == pytest.approx(3500, rel=1e-9)
    assert readers[2] == 0
    # Work past the run's last whole second counts in it.
    assert sum(bench_family.db_series(DB_STDERR, 1)) == pytest.approx(3680, rel=1e-9)
    with pytest.raises(ValueError, match="no interval reports"):
        bench_family.db_series("readrandom : 1 micros/op", 3)


def test_a_db_bench_run_too_slow_to_report_is_taken_as_flat_with_a_note(capsys):
    # Fewer than 1,000 operations a thread (a scan on a throttled device): db_bench checks its
    # clock only every 1,000 and prints no interval report; the run's throughput stands for
    # every second rather than failing the family step.
    flat = bench_family.db_series_or_flat("seekrandom : 1 micros/op", 61.5, 15, skip_writer=False, name="rangescan")
    assert flat == [61.5] * 15
    assert "rangescan: db_bench printed no interval reports" in capsys.readouterr().err
    reported = bench_family.db_series_or_flat(DB_STDERR, 1.0, 3, skip_writer=True, name="rww")
    assert reported == bench_family.db_series(DB_STDERR, 3, skip_writer=True)
    assert capsys.readouterr().err == ""


def test_db_benchs_reports_are_relayed_to_the_tuner_as_they_come(tmp_path):
    # A stand-in for db_bench: it prints DB_STDERR's reports one at a time and, after each,
    # waits for the count file to show the reading threads' sum so far (thread 0 writes,
    # left out), printing what it saw: the count moves while the workload runs, not after.
    relay = bench_family.Relay(tmp_path / "ops-count", 100)
    relay.reset()
    fake = f"""
import sys, time
from pathlib import Path
count = Path({str(relay.count)!r})
for line, want in zip({DB_STDERR.splitlines()!r}, (2500, 2500, 3500, 3500)):
    sys.stderr.write(line + "\\n")
    sys.stderr.flush()
    deadline = time.time() + 10
    while count.read_text() != f"{{want}}\\n" and time.time() < deadline:
        time.sleep(0.01)
    print(count.read_text().strip())
print("readwhilewriting : 1.0 micros/op 3500 ops/sec;")
"""
    assert relay.count.read_text() == "0\n"
    p = relay.run([sys.executable, "-c", fake], skip_writer=True)
    assert p.stdout.splitlines()[:4] == ["2500", "2500", "3500", "3500"]
    assert p.stderr == DB_STDERR and relay.count.read_text() == "3500\n"
    assert not list(tmp_path.glob("*.tmp"))
    # Every thread counts where none writes.
    relay.reset()
    relay.run([sys.executable, "-c", f"import sys; sys.stderr.write({DB_STDERR!r})"], skip_writer=False)
    assert relay.count.read_text() == "3680\n"
    # A failed run fails as br.sh's would, with what it printed.
    with pytest.raises(subprocess.CalledProcessError) as e:
        relay.run([sys.executable, "-c", "import sys; sys.stderr.write('no db\\n'); sys.exit(3)"], skip_writer=False)
    assert e.value.returncode == 3 and e.value.stderr == "no db\n"
    # About twenty reports a second at the sweep's rate, never fewer than one operation each.
    assert bench_family.Relay.for_rate(relay.count, 1700.0).every == 85
    assert bench_family.Relay.for_rate(relay.count, 3.0).every == 1
    assert bench_real.progress_options("ops", relay.count) == ["--progress", f"ops:{relay.count}"]
    assert bench_real.progress_options("ops") == ["--progress", "auto"]
    assert bench_real.progress_options("cpu") == ["--progress", "cpu"]


def test_a_db_bench_member_runs_with_its_relay_reporting_by_operations(tmp_path, monkeypatch, capsys):
    # execute() with a relay: db_bench told to report every `every` operations with the clock
    # off, its reports relayed to the count, its per-second series read from the same reports.
    fake = tmp_path / "db_bench.py"
    fake.write_text(
        "import sys\n"
        f"sys.stderr.write({DB_STDERR!r})\n"
        f"open({str(tmp_path / 'argv')!r}, 'w').write(' '.join(sys.argv[1:]))\n"
        "print('seekrandom : 1.0 micros/op 3680 ops/sec;')\n"
    )
    monkeypatch.setattr(bench_real, "db_args", lambda s, db, name, seconds: [sys.executable, str(fake)])

    class Bed:
        in_cgroup = staticmethod(lambda args: args)

    s = bench_real.Settings(True)
    w = next(m for m in bench_family.MEMBERS if m.name == "rangescan")
    relay = bench_family.Relay(tmp_path / "ops-count", 7)
    relay.reset()
    series: list[float] = []
    got = bench_family.execute(s, Bed(), tmp_path, None, w, seed=3, seconds=3, scratch=tmp_path, series=series,
                               relay=relay)  # fmt: skip
    assert got == [3680.0] and relay.count.read_text() == "3680\n"
    assert series == bench_family.db_series(DB_STDERR, 3)
    argv = (tmp_path / "argv").read_text().split()
    assert "--stats_interval=7" in argv and "--stats_interval_seconds=0" in argv, argv
    # Without a relay: the clock-driven reports of before, and no count written.
    relay.reset()
    bench_family.execute(s, Bed(), tmp_path, None, w, seed=3, seconds=3, scratch=tmp_path, series=[])
    assert relay.count.read_text() == "0\n"
    argv = (tmp_path / "argv").read_text().split()
    assert "--stats_interval_seconds=1" in argv and not any(a.startswith("--stats_interval=") for a in argv)
    monkeypatch.undo()
    # The relay's step is per thread: twenty reports a second from all of them.
    four = next(m for m in bench_family.MEMBERS if m.name == "readrandom-4t")
    assert bench_family.db_threads(s, four) == 4 and bench_family.db_threads(s, w) == 1
    assert bench_family.Relay.for_rate(relay.count, 1720.0, 4).every == 22
    # A relay per db_bench member, stepped by its sweep's vanilla run, and per one-process fio
    # member; none for the tools or fio's of several processes, nor without --progress ops.
    fio = next(m for m in bench_family.MEMBERS if m.kind == "fio")
    sweeps = [{"workload": four.name, "config": "sweep", "ra_kb": 128, "ops": "[1720.0]"},
              {"workload": four.name, "config": "sweep", "ra_kb": 16, "ops": "[9999.0]"},
              {"workload": four.name, "config": "vanilla", "ra_kb": 128, "ops": "[5.0]"}]  # fmt: skip
    tool = next(m for m in bench_family.MEMBERS if m.kind == "tool")
    three = next(m for m in bench_family.MEMBERS if m.name == "fio-3proc")
    assert fio.name != three.name and len(fio.jobs) == 1
    assert bench_family.relays_for(s, tmp_path, sweeps, [four, fio, tool, three]) == {}
    s.progress = "ops"
    got = bench_family.relays_for(s, tmp_path, sweeps, [four, fio, tool, three])
    count = tmp_path / "ops-count"
    assert got == {four.name: bench_family.Relay(count, 22), fio.name: bench_family.Relay(count, 0)}


def fio_status(kib: list[int]) -> str:
    """A fio JSON report as fio prints it (indented, the closing brace alone on its line), its
    jobs having read ``kib`` KiB each."""
    jobs = [{"jobname": f"j{i}", "read": {"io_bytes": k * 1024, "bw_bytes": k}} for i, k in enumerate(kib)]
    return json.dumps({"fio version": "fio-3.33", "jobs": jobs}, indent=2) + "\n"


def test_fios_status_reports_are_relayed_to_the_tuner_as_they_come(tmp_path, monkeypatch):
    # A stand-in for fio: it prints three status reports and its report of the run, and after
    # each status report waits for the count to show the jobs' KiB summed: the count moves
    # while fio runs. execute() runs it with a relay and reads the run's report from stdout.
    reports = [fio_status([3]), fio_status([30]), fio_status([100])]
    fake = tmp_path / "fio.py"
    fake.write_text(f"""
import sys, time
from pathlib import Path
open({str(tmp_path / "argv")!r}, "w").write(" ".join(sys.argv[1:]))
count = Path({str(tmp_path / "ops-count")!r})
for report, want in zip({reports!r}, (3, 30, 100)):
    sys.stdout.write(report)
    sys.stdout.flush()
    deadline = time.time() + 10
    while count.read_text() != f"{{want}}\\n":
        if time.time() > deadline:
            sys.exit(f"the count shows {{count.read_text()!r}}, not {{want}}, while fio runs")
        time.sleep(0.01)
sys.stdout.write("fio: a note {{\\n}} and a line that starts with a brace\\n" + {fio_status([120])!r})
""")

    class Bed:
        in_cgroup = staticmethod(lambda args: [sys.executable, str(fake)] + args[1:])

    s = bench_real.Settings(True)
    w = next(m for m in bench_family.MEMBERS if m.name == "fio-strided")
    assert bench_family.fio_relay(bench_real.Settings(True), tmp_path, w) is None
    ops = bench_real.Settings(True)
    ops.progress = "ops"
    assert bench_family.fio_relay(ops, tmp_path, w) == bench_family.Relay(tmp_path / "ops-count", 0)
    relay = bench_family.Relay(tmp_path / "ops-count", 0)
    relay.reset()
    got = bench_family.execute(s, Bed(), tmp_path, FakeFiles(), w, seed=3, seconds=3, scratch=tmp_path,
                               relay=relay)  # fmt: skip
    # The run's throughput is its last report's, which the count shows too.
    assert got == [120.0] and relay.count.read_text() == "120\n"
    argv = (tmp_path / "argv").read_text().split()
    assert f"--status-interval={bench_family.FIO_STATUS}" in argv and not any(a.startswith("--output=") for a in argv)
    # A failed fio fails as br.sh's would, with what it printed.
    fake.write_text("import sys; sys.stderr.write('fio: no file\\n'); sys.exit(1)")
    with pytest.raises(RuntimeError, match="fio-strided.*exited 1.*fio: no file"):
        bench_family.execute(s, Bed(), tmp_path, FakeFiles(), w, seed=3, seconds=3, scratch=tmp_path, relay=relay)


def test_a_relay_that_fails_mid_run_stops_fios_job_processes_too(tmp_path):
    # fio forks a process per job; a relay that cannot write its count (its directory gone)
    # stops the whole process group at once, not only the process it started.
    child = tmp_path / "child"
    fake = f"""
import os, sys, time
pid = os.fork()
if pid == 0:
    time.sleep(60)
    os._exit(0)
open({str(child)!r}, "w").write(str(pid))
sys.stdout.write({fio_status([1])!r})
sys.stdout.flush()
time.sleep(60)
"""
    relay = bench_family.Relay(tmp_path / "gone" / "ops-count", 0)
    started = time.monotonic()
    with pytest.raises(FileNotFoundError):
        relay.run_fio([sys.executable, "-c", fake])
    assert time.monotonic() - started < 20
    pid = int(child.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists(), "fio's job process outlived the relay"


def test_a_run_that_fails_leaves_no_count_file_nor_fios_report_behind(tmp_path):
    # The family and online steps run their members inside `scratch_removed`: a member that
    # fails (or ^C) still takes the relays' count file out of the work directory and fio's
    # report out of the results (on the kernel a tuner that refused its model left
    # `ops-count` in /dev/shm/iolearn-bench).
    scratch, workdir = tmp_path / "raw", tmp_path / "work"
    scratch.mkdir()
    workdir.mkdir()
    relays = {"readrandom": bench_family.Relay.for_rate(bench_family.relay_count(workdir), 2000.0, 4)}
    kept = scratch / "tuner-family-readrandom-v3-0.log"
    with pytest.raises(subprocess.CalledProcessError):
        with bench_family.scratch_removed(scratch, relays):
            relays["readrandom"].reset()
            (scratch / "fio.json").write_text("{}")
            kept.write_text("the tuner's log stays\n")
            raise subprocess.CalledProcessError(1, ["iolearn", "tune", "readahead"])
    assert sorted(p.name for p in workdir.iterdir()) == []
    assert sorted(p.name for p in scratch.iterdir()) == [kept.name]


def test_a_tuner_that_refuses_its_configuration_stops_the_bench_before_any_run(tmp_path, monkeypatch):
    # Each configuration's tuner starts once, for a second, before the hour: one that exits
    # at once (a per-device model asked per file) stops the bench with its own words, where
    # the first run it helped failed as an "internal error" two minutes in.
    said = "iolearn: error: tune readahead: readahead_v3.iolm: decides per device only"
    refuses = [sys.executable, "-c", f"import sys; print({said!r}, file=sys.stderr); sys.exit(1)"]
    starts = [sys.executable, "-c", "import time; time.sleep(30)"]

    def helper(s, tb, out, config, log, count=None):
        return {"vanilla": None, "v3": (starts, log), "v3_file": (refuses, log)}[config]

    monkeypatch.setattr(bench_family, "configuration_helper", helper)
    bench_family.check_tuners(None, None, tmp_path, ("vanilla", "v3"), tmp_path)
    assert list(tmp_path.iterdir()) == [], "a tuner that started leaves no log"
    with pytest.raises(SystemExit) as e:
        bench_family.check_tuners(None, None, tmp_path, ("vanilla", "v3", "v3_file"), tmp_path)
    assert "configuration v3_file: the tuner did not start" in str(e.value)
    assert said in str(e.value)


class FakeFiles:
    def named(self, spec):
        return {"big": "/b", "small:0-3": "/s0:/s1:/s2:/s3", "small:4-7": "/s4:/s5:/s6:/s7"}[spec]


def test_progress_ops_is_refused_where_no_count_is_relayed(capsys, tmp_path):
    for steps in ("overheads", "family,overheads"):
        with pytest.raises(SystemExit) as e:
            bench_real.main(["--progress", "ops", "--steps", steps, "--workdir", str(tmp_path / "w")])
        assert e.value.code == 2 and not (tmp_path / "w").exists()
        err = capsys.readouterr().err
        assert "--progress ops: the workloads' counts are relayed in the family and online steps only" in err


def test_the_learners_decisions_are_read_from_its_log(tmp_path):
    log = tmp_path / "tuner.log"
    lines = [
        {"event": "start", "read_ahead_kb": 128},
        {"event": "change", "window": 4, "target": "device", "read_ahead_kb": 64},
        {"event": "change", "window": 5, "target": "file:12", "read_ahead_kb": 16},
        {"event": "guard", "window": 8, "verdict": "kept"},
        {"event": "change", "window": 9, "target": "device", "read_ahead_kb": 32},
    ]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert bench_online.decisions(log, 128) == [(0, 128), (4, 64), (9, 32)]
    log.write_text("not json\n")
    with pytest.raises(RuntimeError, match="tuner.log:1: not a JSON log line"):
        bench_online.decisions(log, 128)


def _row(workload, config, repeat, ops, series, kb=128, decisions=()):
    return {"workload": workload, "config": config, "repeat": repeat, "seed": repeat + 1, "ra_kb": kb,
            "ops": json.dumps(ops), "series": json.dumps(series), "unit": "MB/s",
            "decisions": json.dumps(list(decisions)), "phase_starts": "[]", "progress": ""}  # fmt: skip


def test_the_summary_scores_the_learner_against_vanilla_and_the_oracle_of_its_repeat():
    rows = [_row("a", "sweep", -1, [1.0], [], kb=16)]
    for i, scale in enumerate((1.0, 2.0)):  # a second repeat on a machine twice as fast
        rows += [
            _row("a", "vanilla", i, [10.0 * scale], [10.0 * scale] * 60),
            _row("a", "oracle", i, [20.0 * scale], [20.0 * scale] * 60, kb=16),
            _row("a", "online", i, [18.0 * scale], [10.0 * scale] * 12 + [20.0 * scale] * 48),
        ]
    rows.append(_row("a>a", "phases", 0, [1.0, 1.0], [15.0] * 60 + [20.0] * 60, decisions=[[0, 128], [7, 64]]))
    rep = bench_online.summarize(rows)
    (m,) = rep["members"]
    assert m["online"] == pytest.approx(1.8) and m["online_range"] == pytest.approx([1.8, 1.8])
    assert m["oracle"] == pytest.approx(2.0) and m["oracle_kb"] == 16
    assert m["share"] == pytest.approx(0.8)
    assert m["share_late"] == pytest.approx(1.0)
    assert m["t90"] == [9, 9] and m["seconds"] == 60
    (p,) = rep["phases"]
    assert p["phase_seconds"] == 60 and p["decisions"] == [[0, 128], [7, 64]]
    assert [e["share"] for e in p["phases"]] == pytest.approx([0.5, 1.0])
    assert {e["vanilla_from"] for e in p["phases"]} == {"member"}


def test_a_phase_is_scored_against_vanilla_through_the_same_phases_where_it_ran():
    # The member alone: vanilla 10, the oracle 20 (2x). Through the phases the second phase
    # starts with the first's cache and vanilla runs at 8 there: the learner's 8 is vanilla's
    # own, not 0.8x of it, and its 12 in the first phase against vanilla's 10 is 20% of the
    # oracle's 2x gain.
    rows = [
        _row("a", "vanilla", 0, [10.0], [10.0] * 60),
        _row("a", "oracle", 0, [20.0], [20.0] * 60, kb=16),
        _row("a", "online", 0, [15.0], [15.0] * 60),
        _row("a>a", "phases", 0, [1.0, 1.0], [12.0] * 60 + [8.0] * 60),
        _row("a>a", "phases-vanilla", 0, [1.0, 1.0], [10.0] * 60 + [8.0] * 60),
    ]
    (p,) = bench_online.summarize(rows)["phases"]
    assert [e["ratio"] for e in p["phases"]] == pytest.approx([1.2, 1.0])
    assert [e["oracle"] for e in p["phases"]] == pytest.approx([2.0, 2.0])
    assert [e["share"] for e in p["phases"]] == pytest.approx([0.2, 0.0])
    assert {e["vanilla_from"] for e in p["phases"]} == {"phases"}
    # A phase whose workload was no member of the run: scored against vanilla through the
    # phases, no oracle known.
    rows[3]["workload"] = rows[4]["workload"] = "a>b"
    (p,) = bench_online.summarize(rows)["phases"]
    assert p["phases"][1] == {"workload": "b", "ratio": pytest.approx(1.0), "vanilla_from": "phases"}
    assert p["phases"][0]["share"] == pytest.approx(0.2)


def test_a_repeat_without_all_three_runs_is_left_out_and_a_written_csv_summarizes_and_plots(tmp_path):
    rows = [
        _row("a", "vanilla", 0, [10.0], [10.0] * 40),
        _row("a", "oracle", 0, [20.0], [20.0] * 40, kb=16),
        _row("a", "online", 0, [15.0], [15.0] * 40),
        _row("a", "vanilla", 1, [10.0], [10.0] * 40),  # interrupted before its oracle and learner
        _row("a>a", "phases", 0, [1.0, 1.0], [12.0] * 40, decisions=[[0, 128], [5, 64], [99, 128]]),
    ]
    rows[-1]["phase_starts"] = json.dumps([0.5, 20.7, 41.0])
    rows[2]["progress"] = rows[-1]["progress"] = "auto"
    bench_family.ra._write(tmp_path / "online-runs", rows)
    again = bench_online.load(tmp_path / "online-runs.csv")
    rep = bench_online.summarize(again)
    (m,) = rep["members"]
    assert m["repeats"] == 1 and m["online"] == pytest.approx(1.5) and m["t90"] == [None]
    assert rep["phases"][0]["starts"] == [0.5, 20.7, 41.0]
    assert rep["progress"] == "auto"
    pytest.importorskip("matplotlib")
    bench_online.plot(again, rep, tmp_path / "online.png")
    assert (tmp_path / "online.png").stat().st_size > 0


def _write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("repeat", "zero", "repeat 'zero' is not an integer"),
        ("seed", "1_0", "seed '1_0' is not an integer"),
        ("ra_kb", " 128", "ra_kb ' 128' is not an integer"),
        ("ops", '[1.0, "x"]', "ops '[1.0, \"x\"]' is not a JSON list of numbers"),
        ("series", "{", "series '{' is not a JSON list of numbers"),
        ("decisions", "[[0]]", "decisions '[[0]]' is not a JSON list of pairs"),
        ("config", "tuned", "config 'tuned' is not one of the step's"),
        ("workload", "", "workload '' is not text"),
        ("progress", "pages", "progress 'pages' is not cpu or auto"),
    ],
)
def test_a_damaged_runs_file_is_refused_naming_the_line_and_the_field(tmp_path, field, value, message):
    rows = [_row("a", "vanilla", 0, [10.0], [10.0] * 4), _row("a", "oracle", 0, [20.0], [20.0] * 4)]
    rows[1][field] = value
    _write_csv(tmp_path / "online-runs.csv", rows)
    with pytest.raises(ValueError) as e:
        bench_online.load(tmp_path / "online-runs.csv")
    assert str(e.value) == f"{tmp_path / 'online-runs.csv'}:3: {message}"
    # A file from before the phase starts were recorded still loads.
    for r in rows:
        r.pop("phase_starts")
    rows[1][field] = _row("a", "oracle", 0, [20.0], [20.0] * 4)[field]
    _write_csv(tmp_path / "online-runs.csv", rows)
    assert len(bench_online.load(tmp_path / "online-runs.csv")) == 2


def test_the_learner_is_the_online_controller_judged_by_the_progress_asked_for(tmp_path):
    from types import SimpleNamespace

    tb = SimpleNamespace(name="loop7", cgroup=tmp_path / "cg")
    argv, log = bench_online.learner(tb, tmp_path / "l.log", tmp_path / "state", "auto")
    assert log == tmp_path / "l.log"
    assert argv[argv.index("--controller") + 1] == "online" and "--model" not in argv
    assert argv[argv.index("--progress") + 1] == "auto"
    assert argv[argv.index("--cgroup") + 1] == str(tmp_path / "cg")
