"""Parameter validation shared by the estimators, the native bindings' callers and the CLIs.

Every check raises ``ValueError`` naming the parameter, its allowed range and the value given,
as scikit-learn's parameter validation does; the argparse types below turn the same checks
into one-line command-line errors. No value reaches the Rust core unchecked: a float there
may be cast to an integer, and a size may be allocated.
"""

from __future__ import annotations

import argparse
import math
import numbers
from collections.abc import Callable
from typing import Any

#: Seeds are unsigned 64-bit in the Rust core; Python's random state takes any such value.
SEED_MAX = 2**63 - 1


def check_int(name: str, value: Any, lo: int, hi: int) -> int:
    """``value`` as an int in ``[lo, hi]``; bools and non-integral numbers are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v}")
    return v


def check_float(
    name: str,
    value: Any,
    lo: float = -math.inf,
    hi: float = math.inf,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """``value`` as a finite float in the given range (open or closed at each end)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    v = float(value)
    below = v <= lo if lo_open else v < lo
    above = v >= hi if hi_open else v > hi
    if not math.isfinite(v) or below or above:
        left = "(" if lo_open else "["
        right = ")" if hi_open else "]"
        raise ValueError(f"{name} must be a finite number in {left}{_fmt(lo)}, {_fmt(hi)}{right}, got {value!r}")
    return v


def _fmt(x: float) -> str:
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:g}"


def check_seed(name: str, value: Any) -> int:
    return check_int(name, value, 0, SEED_MAX)


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, numbers.Integral)) or int(value) not in (0, 1):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value


# argparse types: the same checks, as one-line command-line errors --------------------------


def _arg(check: Callable[[str, Any], Any], parse: Callable[[str], Any], what: str) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        try:
            return check("value", value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix("value ")) from None

    convert.__name__ = what  # argparse names the type in some messages
    return convert


def int_arg(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``[lo, hi]``."""
    return _arg(lambda n, v: check_int(n, v, lo, hi), int, "an integer")


def float_arg(lo: float = -math.inf, hi: float = math.inf, *, lo_open: bool = False, hi_open: bool = False):
    """An argparse type: a finite float in the range."""
    return _arg(lambda n, v: check_float(n, v, lo, hi, lo_open=lo_open, hi_open=hi_open), float, "a number")


def seed_arg() -> Callable[[str], int]:
    return int_arg(0, SEED_MAX)
