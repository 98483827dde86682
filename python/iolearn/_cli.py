"""What every ``python -m iolearn.X`` command shares: one-line errors, never a traceback.

A command's ``main`` raises ``ValueError`` / ``OSError`` (``iolearn.safeio.OutputError`` among
them) for bad input; :func:`run` prints ``PROG: error: MESSAGE`` on one line and exits 1. An
argparse error is one line too, with exit status 2. Anything else is a bug: it is reported on
one line as an internal error, and ``IOLEARN_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``PROG: error: ...``) with exit status 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {_one_line(message)} (see --help)\n")


def _one_line(text: str, limit: int = 2000) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters)"


def run(main: Callable[[], int | None], prog: str) -> int:
    """Run ``main()``; bad input and interruptions end in one line and an exit status. A
    failed command removes the output directories it created that are still empty."""
    from . import safeio

    status = 70
    try:
        status = int(main() or 0)
        return status
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        status = 130
        return status
    except SystemExit as e:
        if isinstance(e.code, str):
            # A command's own `raise SystemExit("error: ...")`: one line, with the prefix.
            message = e.code.removeprefix("error: ")
            print(f"{prog}: error: {_one_line(message)}", file=sys.stderr)
            status = 1
            return status
        status = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
        raise
    except (ValueError, OSError) as e:
        print(f"{prog}: error: {_one_line(e)}", file=sys.stderr)
        status = 1
        return status
    except BaseException as e:  # noqa: BLE001 - Rust panics arrive as BaseException
        if os.environ.get("IOLEARN_DEBUG"):
            traceback.print_exc()
        print(
            f"{prog}: internal error ({type(e).__name__}: {_one_line(e, 500)}); "
            "please report it (IOLEARN_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return 70  # EX_SOFTWARE
    finally:
        if status != 0:
            safeio.remove_created_dirs()
