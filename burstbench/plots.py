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


def versus_message_size(stats: pd.DataFrame, ax: plt.Axes, function: str) -> plt.Axes:
    """Median against message size (log2 x), one line per label, min-max as error bars.

    `stats` is ``burstbench.pingpong.spread`` output for one VM; `function` is
    latency (log y, microseconds), bw or bibw (GB/s).
    """
    apply_style()
    d0 = stats[stats["function"] == function]
    labels = list(dict.fromkeys(d0.sort_values(["impl", "label"])["label"]))
    colors = dict(zip(labels, palette(len(labels))))
    for label in labels:
        d = d0[d0["label"] == label].sort_values("message_size")
        impl = d["impl"].iloc[0]
        x = d["message_size"].clip(lower=0.5)  # size 0 drawn at 0.5 B on the log axis
        ax.errorbar(x, d["median"], yerr=[d["median"] - d["min"], d["max"] - d["median"]],
                    fmt="--" if impl != "c" else "-", marker="o" if impl == "c" else "s",
                    ms=3, lw=1.2, capsize=1.5, color=colors[label], label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes; 0 B drawn at 0.5)")
    if function == "latency":
        ax.set_yscale("log")
        ax.set_ylabel("one-way latency (µs)")
    else:
        ax.set_ylabel(("bidirectional " if function == "bibw" else "") + "bandwidth (GB/s)")
        ax.set_ylim(bottom=0)
    ax.set_title({"latency": "osu_latency method", "bw": "osu_bw method",
                  "bibw": "osu_bibw method"}[function])
    return ax


def time_vs_cores(stats: pd.DataFrame, ax: plt.Axes, title: str = "") -> plt.Axes:
    """Solve time against cores used (log-log), one line per layout, baselines as markers."""
    apply_style()
    d0 = stats[stats["metric"] == "solve_time"]
    labels = list(dict.fromkeys(d0.sort_values(["impl", "label"])["label"]))
    colors = dict(zip(labels, palette(len(labels))))
    for label in labels:
        d = d0[d0["label"] == label].sort_values("cores")
        base = d["impl"].iloc[0] != "c"
        ax.errorbar(d["cores"], d["median"], yerr=[d["median"] - d["min"], d["max"] - d["median"]],
                    fmt="s" if base else "-o", ms=6 if base else 4, capsize=2,
                    color=colors[label], label=label + (" (1 process)" if base else ""))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("cores used (nodes x ranks x threads)")
    ax.set_ylabel("solve time (s)")
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title)
    return ax


SPLIT_COLORS = {"spmv": "#0072B2", "precond": "#D55E00", "dots": "#009E73", "halo": "#CC79A7",
                "vector": "#999999"}


def iteration_split(stats: pd.DataFrame, ax: plt.Axes, title: str = "") -> plt.Axes:
    """Stacked bars: one iteration's time split per configuration, iterations on top."""
    apply_style()
    d = stats[stats["impl"] == "c"]
    med = d.pivot_table(index=["nodes", "label", "cores"], columns="metric",
                        values="median").reset_index().sort_values(["cores", "label"])
    x = range(len(med))
    bottom = [0.0] * len(med)
    for part, color in SPLIT_COLORS.items():
        col = f"per_iteration_{part}"
        if col not in med:
            continue
        vals = (med[col] * 1e3).tolist()
        ax.bar(x, vals, bottom=bottom, color=color, label=part)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for i, (b, it) in enumerate(zip(bottom, med.get("iterations", [float("nan")] * len(med)))):
        ax.text(i, b, f"{it:.0f} it", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(x))
    ax.set_xticklabels([f"{r.label}\n{r.nodes} node{'s' if r.nodes > 1 else ''}"
                        for r in med.itertuples()], fontsize=7)
    ax.set_ylabel("time per iteration (ms)")
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title)
    return ax
