"""matplotlib for the benchmarks' plots: imported only when a plot is written (headless, Agg), a
warning instead of a failure where it is missing, and the axis helpers the plots share."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Optional


def pyplot(program: str) -> Optional[Any]:
    """matplotlib.pyplot on the Agg backend, or None with a warning naming ``program``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"{program}: warning: plotting needs matplotlib (pip install matplotlib); no plot written",
              file=sys.stderr)
        return None
    return plt


def label_2_and_5(value: float, _pos: int) -> str:
    """Minor-tick label of a log axis: only 2x and 5x a power of ten, so labels do not crowd."""
    if value <= 0:
        return ""
    return f"{value:g}" if round(value / 10 ** math.floor(math.log10(value))) in (2, 5) else ""


def log_y(ax: Any) -> None:
    """A log y axis labelled in plain numbers (1, 2, 5, 10, ...): ratios far below and above 1,
    or TFLOP/s two orders of magnitude apart, side by side."""
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(label_2_and_5))


def panels(plt: Any, count: int, width: float, height: float, cols: int = 2) -> tuple[Any, list[Any]]:
    """A figure of ``count`` panels in rows of ``cols`` (fewer if fewer), the spare cells hidden."""
    cols = min(cols, count)
    rows = math.ceil(count / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:count])


def save(plt: Any, fig: Any, path: Path, title_inches: float = 0.5) -> Path:
    """Lay the panels out below the suptitle (tight_layout ignores it), write the PNG, close."""
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 1.0 - title_inches / fig.get_figheight()))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
