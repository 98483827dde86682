"""The Python atomic writer (iolearn.safeio), tried as an attacker or a crash would (issue 11,
must-show 2). Device-node cases need root and say so when they skip."""

import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from iolearn import safeio
from iolearn.safeio import OutputError, atomic_open, check_target, write_bytes, write_text

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for mknod")


def names(d):
    return sorted(os.listdir(d))


def test_creates_replaces_and_keeps_the_mode(tmp_path):
    out = tmp_path / "table.md"
    assert check_target(out) == "create"
    write_text(out, "one")
    os.chmod(out, 0o640)
    assert check_target(out) == "replace"
    write_text(out, "two")
    assert out.read_text() == "two"
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640
    assert names(tmp_path) == ["table.md"]


def test_a_symlink_at_the_target_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out.parquet"
    out.symlink_to(victim)
    with pytest.raises(OutputError, match="symbolic link") as e:
        write_bytes(out, b"evil")
    assert str(e.value).startswith(str(out))
    assert victim.read_text() == "precious"
    assert out.is_symlink()
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "created-through-link")
    with pytest.raises(OutputError):
        write_bytes(dangling, b"x")
    assert not (tmp_path / "created-through-link").exists()


def test_links_planted_at_every_predictable_temporary_name_are_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    planted = [".out.tmp", "out.tmp", ".out.tmp.png", "out.json.tmp", ".out.csv.tmp"]
    planted += [f".out.{i:012x}" for i in range(200)]
    for n in planted:
        (tmp_path / n).symlink_to(victim)
    for i in range(30):
        write_text(tmp_path / "out", f"round {i}")
    assert victim.read_text() == "precious"
    assert (tmp_path / "out").read_text() == "round 29"
    assert len(names(tmp_path)) == len(planted) + 2


def test_dev_null_stays_a_device():
    write_text("/dev/null", "discarded")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


@root_only
def test_a_device_node_at_the_target_is_written_in_place_and_a_block_device_refused(tmp_path):
    node = tmp_path / "null"
    os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    write_text(node, "into the void")
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    blk = tmp_path / "blk"
    os.mknod(blk, 0o600 | stat.S_IFBLK, os.makedev(7, 250))
    with pytest.raises(OutputError, match="block device"):
        write_text(blk, "x")
    assert stat.S_ISBLK(os.lstat(blk).st_mode)
    assert names(tmp_path) == ["blk", "null"]


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    t = threading.Thread(target=lambda: got.append(open(fifo).read()))
    t.start()
    # The reader thread may not have opened its end yet: a FIFO nobody reads is refused.
    t0 = time.time()
    while True:
        try:
            write_text(fifo, "through the pipe")
            break
        except OutputError as e:
            assert "nobody reads" in str(e) and time.time() - t0 < 10
            time.sleep(0.005)
    t.join(10)
    assert got == ["through the pipe"]


@pytest.mark.parametrize(
    "rel, want",
    [("missing/out.csv", "does not exist"), (".", "is a directory"), ("file/out.csv", "not a directory")],
)
def test_bad_output_paths_fail_clearly_and_leave_nothing(tmp_path, rel, want):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match=want):
        write_text(tmp_path / rel, "data")
    assert names(tmp_path) == ["file"]


def test_an_exception_while_writing_leaves_the_old_file(tmp_path):
    out = tmp_path / "results.parquet"
    out.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_open(out) as f:
        f.write(b"half of the new")
        raise RuntimeError("the run failed")
    assert out.read_bytes() == b"old"
    assert names(tmp_path) == ["results.parquet"]


SLOW_WRITER = """
import sys, time
from pathlib import Path
from iolearn.safeio import atomic_open
out = Path(sys.argv[1])
with atomic_open(out) as f:
    for i in range(10**6):
        f.write(b"n" * 65536)
        f.flush()
        if i == 4:
            out.with_suffix(".started").write_text("")
        time.sleep(0.002)
"""


def test_a_writer_killed_mid_write_leaves_the_old_file_and_no_temporary(tmp_path):
    out = tmp_path / "latencies.parquet"
    for rnd in range(3):
        out.write_text("old contents")
        started = out.with_suffix(".started")
        p = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(out)])
        try:
            t0 = time.time()
            while not started.exists():
                assert time.time() - t0 < 30, "the writer never started"
                time.sleep(0.005)
            time.sleep(0.01 * rnd)
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait()
        started.unlink()
        assert out.read_text() == "old contents"
        assert names(tmp_path) == ["latencies.parquet"], f"round {rnd}"


def test_private_dir_refuses_a_directory_others_can_write(tmp_path):
    d = tmp_path / "work"
    safeio.private_dir(d)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    os.chmod(d, 0o777)
    with pytest.raises(OutputError, match="writable only by it"):
        safeio.private_dir(d)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(OutputError):
        safeio.private_dir(link)


def test_a_fifo_nobody_reads_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    t0 = time.time()
    with pytest.raises(OutputError, match="nobody reads"):
        write_text(fifo, "nobody listens")
    assert time.time() - t0 < 5
