"""One figure style for every report: readable axes with units, a caption naming the data."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

#: Line style per implementation: the C kernels solid, the Python baselines apart.
IMPL_STYLE = {"c": "-", "numba": "--", "numpy": ":"}
IMPL_MARKER = {"c": "o", "numba": "s", "numpy": "*"}


def apply_style() -> None:
    """The shared look: white grid, paper-sized fonts, colour-blind palette."""
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


def save(fig: plt.Figure, stem: Path, caption: str) -> list[Path]:
    """Write `stem`.png and `stem`.svg with the caption; return the paths."""
    add_caption(fig, caption)
    lines = caption.count("\n") + 1 + len(caption) // 150
    fig.tight_layout(rect=(0, 0.03 + 0.022 * lines, 1, 1))
    stem.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in ("png", "svg"):
        path = stem.with_suffix(f".{ext}")
        fig.savefig(path, metadata={"Date": None} if ext == "svg" else None)
        out.append(path)
    return out


def bandwidth_vs_threads(stats: pd.DataFrame, ax: plt.Axes | None = None,
                         title: str = "") -> plt.Axes:
    """Median Triad bandwidth against threads, one line per label, min-max as error bars.

    `stats` is ``burstbench.triad.spread`` output (one VM).  NumPy, measured on
    one thread, is a single marker.
    """
    apply_style()
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 5))
    labels = list(dict.fromkeys(stats.sort_values(["impl", "label"])["label"]))
    colors = dict(zip(labels, palette(len(labels))))
    threads = sorted(stats["threads"].unique())
    # spread the labels a little along x so their error bars do not hide each other
    gap = min(b - a for a, b in zip(threads, threads[1:])) if len(threads) > 1 else 1
    step = 0.25 * gap / max(1, len(labels))
    for i, label in enumerate(labels):
        d = stats[stats["label"] == label].sort_values("threads")
        impl = d["impl"].iloc[0]
        x = d["threads"] + (i - (len(labels) - 1) / 2) * step
        ax.plot(x, d["median_gbs"], IMPL_STYLE.get(impl, "-"),
                marker=IMPL_MARKER.get(impl, "o"), ms=6 if impl == "numpy" else 4,
                color=colors[label], label=label)
        if (d["n"] > 1).any():
            ax.errorbar(x, d["median_gbs"],
                        yerr=[d["median_gbs"] - d["min_gbs"], d["max_gbs"] - d["median_gbs"]],
                        fmt="none", ecolor=colors[label], alpha=0.6, capsize=2)
    ax.set_xlabel("OpenMP threads")
    ax.set_ylabel("Triad bandwidth (GB/s, 1 GB = 10$^9$ B)")
    ax.set_ylim(bottom=0)
    if threads and len(threads) <= 16:
        ax.set_xticks(threads)
    if title:
        ax.set_title(title)
    return ax


def reference_line(ax: plt.Axes, value: float, text: str, style: str = "--",
                   color: str = "0.25", x: float | None = None) -> None:
    """A horizontal reference mark (study best, vendor figure, theoretical peak)."""
    ax.axhline(value, ls=style, color=color, lw=1.1, label=text)
    if x is not None:
        ax.plot([x], [value], marker="D", color=color, ms=6)
