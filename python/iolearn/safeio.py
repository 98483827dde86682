"""File output a tool running as root can trust: the Python twin of the `iolearn-safeio` crate.

Every file the package writes goes through :func:`atomic_open` (or :func:`write_text` /
:func:`write_bytes`). The new contents go to an unnamed temporary file (``O_TMPFILE``) in the
target's directory, are synced, linked under a fresh random name (``linkat`` never overwrites)
and renamed over the target: a crash, ``kill -9`` or an exception leaves the old file or none,
never half a file and never a temporary file beside it. On a file system without ``O_TMPFILE``
the temporary is made by :func:`tempfile.mkstemp` (``O_EXCL``, a random name).

The target is checked first (:func:`check_target`): a symbolic link is refused (a planted link
would redirect the write), so are directories, block devices and sockets; a character device
or FIFO (``/dev/null``, a pipe) is written in place, never replaced by a regular file. A
missing directory is an error, never created silently. Errors are :class:`OutputError`
(an ``OSError``) and name the file the user gave.

Python's standard library has the pieces (``os.open``, ``os.link``, ``tempfile``) but no
atomic-write helper with these checks, hence this module.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

__all__ = [
    "OutputError",
    "check_target",
    "atomic_open",
    "write_text",
    "write_bytes",
    "output_dir",
    "private_dir",
    "read_bytes",
    "read_text",
    "remove_created_dirs",
]

# Directories `output_dir` created in this process, outermost first: a command that fails
# removes those still empty (`remove_created_dirs`), so an error leaves nothing behind.
_created: list[Path] = []


class OutputError(OSError):
    """An output that cannot or will not be written; ``str()`` names the file."""

    def __init__(self, path: os.PathLike | str, reason: str):
        super().__init__(f"{os.fspath(path)}: {reason}")
        self.path = os.fspath(path)
        self.reason = reason


def _dir_of(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def check_target(path: os.PathLike | str) -> str:
    """How a write to ``path`` would happen: ``"create"``, ``"replace"`` or ``"in-place"``.

    Raises :class:`OutputError` for a link, a directory, a block device, a socket, or a missing
    directory. Commands call it before long work so that a bad output path fails at once.
    """
    p = Path(path)
    if not p.name or os.fspath(path).endswith("/"):
        raise OutputError(path, "not a file name")
    try:
        st = os.lstat(p)
    except (FileNotFoundError, NotADirectoryError):
        _check_dir(p)
        return "create"
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        raise OutputError(path, "is a symbolic link; iolearn does not write through links (name the file itself)")
    if stat.S_ISDIR(mode):
        raise OutputError(path, "is a directory")
    if stat.S_ISREG(mode):
        _check_dir(p)
        return "replace"
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "in-place"
    if stat.S_ISBLK(mode):
        raise OutputError(path, "is a block device; iolearn does not write outputs to block devices")
    raise OutputError(path, "is not a regular file, a character device or a FIFO")


def _check_dir(p: Path) -> None:
    d = _dir_of(p)
    try:
        st = os.stat(d)
    except FileNotFoundError:
        raise OutputError(p, f"directory {d} does not exist") from None
    except NotADirectoryError:
        raise OutputError(p, f"{d} is not a directory") from None
    except OSError as e:
        raise OutputError(p, f"cannot reach directory {d}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(p, f"{d} is not a directory")


def output_dir(path: os.PathLike | str) -> Path:
    """Make the output directory ``path`` (and its parents) if needed; an error names it.

    A directory the user asked for by name may be created; an existing non-directory or a
    link to elsewhere is refused.
    """
    p = Path(path)
    if p.is_symlink():
        raise OutputError(p, "is a symbolic link; name the directory itself")
    if p.exists() and not p.is_dir():
        raise OutputError(p, "is not a directory")
    missing = [d for d in (p, *p.parents) if not d.exists()]
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(p, f"cannot create the directory: {e.strerror}") from None
    _created.extend(reversed(missing))
    return p


def remove_created_dirs() -> None:
    """Remove the directories :func:`output_dir` created that are still empty (innermost
    first); a command calls it when it fails."""
    while _created:
        d = _created.pop()
        with contextlib.suppress(OSError):
            d.rmdir()


@contextlib.contextmanager
def atomic_open(path: os.PathLike | str, mode: str = "wb", encoding: str | None = None) -> Iterator[IO]:
    """Open ``path`` for writing; the file appears (atomically) only when the block succeeds.

    ``mode`` is ``"wb"`` or ``"w"`` (text, UTF-8 unless ``encoding`` says otherwise).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', not {mode!r}")
    p = Path(path)
    kind = check_target(p)
    text = dict(encoding=encoding or "utf-8", newline="") if mode == "w" else {}
    if kind == "in-place":
        # A FIFO is opened without blocking, which fails at once (ENXIO) when nobody reads it,
        # instead of hanging; writes then block as usual.
        fifo = stat.S_ISFIFO(os.lstat(p).st_mode)
        flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC | (os.O_NONBLOCK if fifo else 0)
        try:
            fd = os.open(p, flags)
        except OSError as e:
            if e.errno == errno.ENXIO:
                raise OutputError(p, "a FIFO that nobody reads; start the reader first") from None
            raise OutputError(p, f"cannot open: {e.strerror}") from None
        if fifo:
            os.set_blocking(fd, True)
        st = os.fstat(fd)
        if not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            os.close(fd)
            raise OutputError(p, "changed while being opened; not writing")
        with os.fdopen(fd, mode, **text) as f:
            yield f
        return
    # Everything below works relative to the directory's descriptor: a directory renamed or
    # replaced by a link meanwhile cannot redirect the file.
    try:
        dfd = os.open(_dir_of(p), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise OutputError(p, f"cannot open its directory: {e.strerror}") from None
    fd = -1
    named = None
    try:
        try:
            fd = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o666, dir_fd=dfd)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            fd, full = tempfile.mkstemp(dir=_dir_of(p), prefix=f".{p.name}.", suffix=".tmp")
            named = os.path.basename(full)
        if kind == "replace":
            with contextlib.suppress(OSError):
                os.fchmod(fd, stat.S_IMODE(os.stat(p.name, dir_fd=dfd, follow_symlinks=False).st_mode))
        elif named is not None:
            os.fchmod(fd, 0o644)
        with os.fdopen(fd, mode, closefd=False, **text) as f:
            yield f
            f.flush()
        os.fsync(fd)
        if named is None:
            named = _link_unnamed(fd, dfd, p.name)
        os.replace(named, p.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        named = None
        os.fsync(dfd)
    except OutputError:
        raise
    except OSError as e:
        raise OutputError(p, f"cannot write: {e.strerror or e}") from None
    finally:
        if fd >= 0:
            os.close(fd)
        if named is not None:
            with contextlib.suppress(OSError):
                os.unlink(named, dir_fd=dfd)
        os.close(dfd)


def _link_unnamed(fd: int, dfd: int, name: str) -> str:
    """Give the unnamed file a fresh random name (``linkat`` fails rather than replace).

    ``src_dir_fd`` makes CPython call ``linkat`` with ``AT_SYMLINK_FOLLOW``, which resolves the
    ``/proc/self/fd`` link to the open file; plain ``link`` would not.
    """
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(6)}"
        try:
            os.link(f"/proc/self/fd/{fd}", tmp, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=True)
            return tmp
        except FileExistsError:
            continue
    raise OutputError(name, "cannot find a free temporary name")


def write_bytes(path: os.PathLike | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_open(path, "wb") as f:
        f.write(data)


def write_text(path: os.PathLike | str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_open(path, "w") as f:
        f.write(text)


def private_dir(path: os.PathLike | str) -> Path:
    """A working directory only this user can write: created ``0700`` if missing; an existing
    one must be a real directory owned by this user and not writable by others.

    Benchmarks keep images and scratch files in such a directory (by default under the
    world-writable ``/var/tmp``): anyone else able to write there could plant links at the
    names they are about to create.
    """
    p = Path(path)
    try:
        p.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(p, f"cannot create the directory: {e.strerror}") from None
    st = os.lstat(p)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise OutputError(p, "is not a directory owned by this user and writable only by it; choose another --workdir")
    return p


def read_bytes(path: os.PathLike | str, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``; a larger input is a ``ValueError`` naming the file,
    found by reading (``/dev/zero``, FIFOs and ``/proc`` files report no size), never by
    running out of memory."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{os.fspath(path)}: larger than the {_human(limit)} limit")
    return data


def read_text(path: os.PathLike | str, limit: int) -> str:
    """:func:`read_bytes` decoded as UTF-8; an error names the file and the byte."""
    data = read_bytes(path, limit)
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise ValueError(f"{os.fspath(path)}: not UTF-8 text (byte {e.start})") from None


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} TiB"
