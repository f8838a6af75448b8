"""One figure style for every report: readable axes with units, a caption naming the data,
files byte for byte the same from the same data."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib import ticker

#: Line style per implementation: the C kernels solid, the Python baselines apart.
IMPL_STYLE = {"c": "-", "numba": "--", "numpy": ":"}


IMPL_MARKER = {"c": "o", "numba": "s", "numpy": "*"}


def apply_style() -> None:
    """The shared look: white grid, paper-sized fonts, colour-blind palette; SVG ids hashed
    with a fixed salt (see save)."""
    sns.set_theme(style="whitegrid", context="paper", palette="colorblind",
                  rc={"figure.dpi": 110, "savefig.dpi": 150, "axes.titleweight": "bold",
                      "legend.frameon": False, "svg.hashsalt": "burstbench"})


def palette(n: int) -> list:
    """n distinguishable colours (colour-blind safe up to 10, then tab20/husl)."""
    if n <= 10:
        return sns.color_palette("colorblind", n)
    return sns.color_palette("tab20" if n <= 20 else "husl", n)


def add_caption(fig: plt.Figure, caption: str) -> None:
    """A small caption under the axes saying which data produced the figure."""
    fig.text(0.01, 0.005, "\n".join(textwrap.wrap(caption, 150)), fontsize=7, color="0.3",
             ha="left", va="bottom")


def save(fig: plt.Figure, stem: Path, caption: str, legend_right: float = 1.0) -> list[Path]:
    """Write `stem`.png and `stem`.svg with the caption; return the paths.

    `legend_right` < 1 keeps that fraction of the width for the axes (a figure
    legend sits to the right).
    """
    add_caption(fig, caption)
    lines = caption.count("\n") + 1 + len(caption) // 150
    fig.tight_layout(rect=(0, 0.03 + 0.022 * lines, legend_right, 1))
    stem.parent.mkdir(parents=True, exist_ok=True)
    out = []
    # Byte for byte the same from the same data: no date, no matplotlib version (a patch
    # release that draws the same pixels changes no file), SVG ids hashed with a fixed salt
    # (random without one), whether or not apply_style ran in this process.
    metadata = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None}}
    with plt.rc_context({"svg.hashsalt": "burstbench"}):
        for ext in ("png", "svg"):
            path = stem.with_suffix(f".{ext}")
            fig.savefig(path, metadata=metadata[ext])
            out.append(path)
    return out


def reference_line(ax: plt.Axes, value: float, text: str, style: str = "--",
                   color: str = "0.25", x: float | None = None) -> None:
    """A horizontal reference mark (study best, vendor figure, theoretical peak)."""
    ax.axhline(value, ls=style, color=color, lw=1.1, label=text)
    if x is not None:
        ax.plot([x], [value], marker="D", color=color, ms=6)


def plain_number(v: float) -> str:
    """A tick or value label without exponents: 0.15, 3, 250, 1,000, 20,000."""
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else str(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return np.format_float_positional(float(f"{v:.3g}"), trim="-")


def plain_log_axis(axis, lo: float, hi: float) -> None:
    """Ticks of a log axis at 1-2-5 steps (finer when the data span less than a decade,
    coarser past three), labelled as plain numbers: '0.2', '3', '1,000', never '2x10^-1'."""
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 1.0
    subs = ((1.0,) if decades > 3 else (1.0, 2.0, 5.0) if decades > 1.2
            else (1.0, 2.0, 3.0, 5.0) if decades > 0.5
            else (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0))
    axis.set_major_locator(ticker.MaxNLocator(nbins=4) if decades < 0.25 else
                           ticker.LogLocator(base=10, subs=subs, numticks=30))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: plain_number(v)))
    axis.set_minor_formatter(ticker.NullFormatter())


def bytes_label(v: float) -> str:
    """A message size for a tick: 0 (drawn at 0.5), 1, 16, 256, 4K, 64K, 1M (K = 1024)."""
    if v < 1:
        return "0"
    for unit, size in (("M", 2 ** 20), ("K", 2 ** 10)):
        if v >= size:
            return f"{v / size:g}{unit}"
    return f"{v:g}"


def log_dodge(n: int, values, share: float = 0.3) -> list[float]:
    """Multiplicative x offsets for `n` series on a log axis, so that their error bars at
    the same x stand side by side: together they take `share` of the smallest gap (in log
    space) between the distinct `values`, the same on every part of the axis."""
    logs = sorted({math.log2(v) for v in values if v > 0})
    gap = min((b - a for a, b in zip(logs, logs[1:])), default=1.0)
    step = share * gap / max(1, n)
    return [2 ** ((i - (n - 1) / 2) * step) for i in range(n)]
