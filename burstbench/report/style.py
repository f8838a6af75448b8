"""One figure style for every report: readable axes with units, a caption naming the data,
files byte for byte the same from the same data."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib import colors as mcolors
from matplotlib import ticker

#: Line style per implementation: the C kernels solid, the Python baselines apart.
IMPL_STYLE = {"c": "-", "numba": "--", "numpy": ":"}


IMPL_MARKER = {"c": "o", "numba": "s", "numpy": "*"}


#: seaborn 0.13's theme ``set_theme(style="whitegrid", context="paper",
#: palette="colorblind")``, written out: a report kernel then imports neither seaborn nor the
#: scipy.stats it pulls in (0.6 s of a kernel's start here), and draws the same bytes.  The
#: sizes are seaborn's "notebook" ones times its "paper" scale, 0.8, computed as it does.
_PAPER = 0.8
THEME = {
    "axes.axisbelow": True, "axes.edgecolor": ".8", "axes.facecolor": "white",
    "axes.grid": True, "axes.labelcolor": ".15", "axes.labelsize": 12 * _PAPER,
    "axes.linewidth": 1.25 * _PAPER, "axes.spines.bottom": True, "axes.spines.left": True,
    "axes.spines.right": True, "axes.spines.top": True, "axes.titlesize": 12 * _PAPER,
    "figure.facecolor": "white", "font.family": ["sans-serif"],
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans",
                        "sans-serif"],
    "font.size": 12 * _PAPER, "grid.color": ".8", "grid.linestyle": "-",
    "grid.linewidth": 1 * _PAPER, "legend.fontsize": 11 * _PAPER,
    "legend.title_fontsize": 12 * _PAPER, "lines.linewidth": 1.5 * _PAPER,
    "lines.markersize": 6 * _PAPER, "lines.solid_capstyle": "round", "patch.edgecolor": "w",
    "patch.force_edgecolor": True, "patch.linewidth": 1 * _PAPER, "text.color": ".15",
    "xtick.bottom": False, "xtick.color": ".15", "xtick.direction": "out",
    "xtick.labelsize": 11 * _PAPER, "xtick.major.size": 6 * _PAPER,
    "xtick.major.width": 1.25 * _PAPER, "xtick.minor.size": 4 * _PAPER,
    "xtick.minor.width": 1 * _PAPER, "xtick.top": False, "ytick.color": ".15",
    "ytick.direction": "out", "ytick.labelsize": 11 * _PAPER, "ytick.left": False,
    "ytick.major.size": 6 * _PAPER, "ytick.major.width": 1.25 * _PAPER,
    "ytick.minor.size": 4 * _PAPER, "ytick.minor.width": 1 * _PAPER, "ytick.right": False,
}
#: seaborn's "colorblind" palette (Okabe-Ito based), as it lists it.
COLORBLIND = ["#0173B2", "#DE8F05", "#029E73", "#D55E00", "#CC78BC", "#CA9161", "#FBAFE4",
              "#949494", "#ECE133", "#56B4E9"]


def apply_style() -> None:
    """The shared look: white grid, paper-sized fonts, colour-blind palette; SVG ids hashed
    with a fixed salt (see save)."""
    plt.rcParams.update(THEME | {  # type: ignore[arg-type]
        "axes.prop_cycle": cycler(color=palette(len(COLORBLIND))),
        "figure.dpi": 110, "savefig.dpi": 150, "axes.titleweight": "bold",
        "legend.frameon": False, "svg.hashsalt": "burstbench"})


def palette(n: int) -> list:
    """n distinguishable colours (colour-blind safe up to 10, then tab20, then husl), as RGB
    tuples, the values seaborn's color_palette gives."""
    if n <= len(COLORBLIND):
        return [mcolors.to_rgb(c) for c in COLORBLIND[:n]]
    if n <= 20:  # seaborn's qualitative matplotlib palette: the map at evenly spaced bins
        return [tuple(rgba[:3]) for rgba in mpl.colormaps["tab20"](np.linspace(0, 1, 20)[:n])]
    import seaborn as sns  # only for more than 20 colours: husl is seaborn's

    return sns.color_palette("husl", n)


def caption_width(fig: plt.Figure, size: float = 7) -> int:
    """Characters per caption line: 150, fewer on a figure narrower than 8.8 inches (about
    17 characters of 7-point text an inch, fewer of larger text), so that no line runs off
    its right edge."""
    return min(150, int(fig.get_figwidth() * 17 * 7 / size))


def add_caption(fig: plt.Figure, caption: str, size: float = 7) -> int:
    """A small caption under the axes saying which data produced the figure; its lines."""
    lines = textwrap.wrap(caption, caption_width(fig, size))
    fig.text(0.01, 0.005, "\n".join(lines), fontsize=size, color="0.3", ha="left",
             va="bottom")
    return len(lines)


def save(fig: plt.Figure, stem: Path, caption: str, legend_right: float = 1.0,
         caption_size: float = 7) -> list[Path]:
    """Write `stem`.png and `stem`.svg with the caption; return the paths.

    `legend_right` < 1 keeps that fraction of the width for the axes (a figure
    legend sits to the right).
    """
    lines = add_caption(fig, caption, caption_size)
    h = fig.get_figheight()
    # a line of the caption as a share of the height (7 points: as every figure up to 5.5
    # inches has had); a taller one (a VM with seven grids) keeps it in inches, or its
    # caption's room grows with its rows
    line_h = 0.022 if caption_size == 7 and h <= 5.5 else caption_size * 1.25 / 72 / h
    base = 0.03 if h <= 5.5 else 0.165 / h + 0.005  # the caption stands 0.005 h up
    title = getattr(fig, "_suptitle", None)  # matplotlib's own: no public handle to it
    if h > 5.5 and title is not None:  # as far from the top as on a 4.3-inch figure
        title.set_y(1 - 0.086 / h)
    fig.tight_layout(rect=(0, base + line_h * lines, legend_right, 1))
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


def natural(name: str) -> list:
    """A sort key reading the numbers in a name as numbers: poisson32x32x32 before
    poisson128x128x128, 2x1 before 16x1."""
    # split keeps the digit runs at the odd places; the name itself breaks ties (p02, p2)
    return [int(t) if i % 2 else t for i, t in enumerate(re.split(r"(\d+)", name))] + [name]


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
    if decades < 0.25:  # a span of under 78%: 1.545, 1.55, 1.555 (3 digits would repeat)
        axis.set_major_locator(ticker.MaxNLocator(nbins=4))
        axis.set_major_formatter(ticker.FuncFormatter(
            lambda v, _: f"{v:,.{tick_decimals(axis.get_majorticklocs())}f}"))
    else:
        axis.set_major_locator(ticker.LogLocator(base=10, subs=subs, numticks=30))
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: plain_number(v)))
    axis.set_minor_formatter(ticker.NullFormatter())


def tick_decimals(locs) -> int:
    """The fewest decimals that write every tick in `locs` exactly (at most 10)."""
    for d in range(10):
        if all(abs(round(float(x), d) - float(x)) <= 1e-9 * max(1.0, abs(float(x)))
               for x in locs):
            return d
    return 10


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
