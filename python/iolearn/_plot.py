"""Plots written the one way every report writes them: matplotlib's file-less Agg backend
(imported only when a plot is drawn: it is an optional dependency, and a run without it simply
makes no PNG), and the PNG written atomically so a failed run never leaves half an image."""

from __future__ import annotations

from pathlib import Path

from .safeio import atomic_open


def pyplot():
    """`matplotlib.pyplot` on the Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save(fig, path: Path, dpi: int = 100) -> None:
    """Write `fig` to `path` as a PNG, atomically, and close it."""
    import matplotlib.pyplot as plt

    try:
        with atomic_open(path) as f:
            fig.savefig(f, format="png", dpi=dpi)
    finally:
        plt.close(fig)
