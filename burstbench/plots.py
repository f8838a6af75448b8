"""One figure style for every report: readable axes with units, a caption naming the data."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
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


def bandwidth_vs_threads(stats: pd.DataFrame, ax: plt.Axes | None = None,
                         title: str = "") -> plt.Axes:
    """Median Triad bandwidth against threads, one line per label, min-max as error bars
    (streaming-store labels dash-dotted, with diamonds).

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
        streaming = "stores" in d and (d["stores"] == "streaming").any()
        x = d["threads"] + (i - (len(labels) - 1) / 2) * step
        ax.plot(x, d["median_gbs"], "-." if streaming else IMPL_STYLE.get(impl, "-"),
                marker="D" if streaming else IMPL_MARKER.get(impl, "o"),
                ms=6 if impl == "numpy" else 4, color=colors[label], label=label)
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


def versus_message_size(stats: pd.DataFrame, ax: plt.Axes, function: str) -> plt.Axes:
    """Median against message size (log2 x), one line per label, min-max as error bars.

    `stats` is ``burstbench.pingpong.spread`` output for one VM; `function` is
    latency (log y, microseconds), bw or bibw (GB/s).
    """
    apply_style()
    d0 = stats[stats["function"] == function]
    labels = list(dict.fromkeys(d0.sort_values(["impl", "label"])["label"]))
    # one colour per combination and placement: its C kernel solid, its mpi4py loop dashed
    impl_of = dict(zip(d0["label"], d0["impl"]))
    base = {lab: lab.removesuffix(f"+{impl_of[lab]}") if impl_of[lab] != "c" else lab
            for lab in labels}
    keys = list(dict.fromkeys(base[lab] for lab in sorted(labels, key=lambda x: (
        impl_of[x] != "c", x))))
    colors = dict(zip(keys, palette(len(keys))))
    for label in labels:
        d = d0[d0["label"] == label].sort_values("message_size")
        impl = d["impl"].iloc[0]
        x = d["message_size"].clip(lower=0.5)  # size 0 drawn at 0.5 B on the log axis
        ax.errorbar(x, d["median"], yerr=[d["median"] - d["min"], d["max"] - d["median"]],
                    fmt="--" if impl != "c" else "-", marker="o" if impl == "c" else "s",
                    ms=3, lw=1.2, capsize=1.5, color=colors[base[label]], label=label)
    ax.set_xscale("log", base=2)
    # ticks every 16x, labelled 0, 1, 16, 256, 4K, 64K, 1M (no powers of two in superscript)
    sizes = d0["message_size"]
    top = float(sizes.max()) if len(sizes) else 1.0
    ticks = [0.5] if len(sizes) and sizes.min() < 1 else []
    ticks += [16.0 ** k for k in range(1 if ticks else 0, 12) if 16.0 ** k <= max(top, 1)]
    if top >= 2 * ticks[-1]:
        ticks.append(top)
    ax.xaxis.set_major_locator(ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: bytes_label(v)))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.set_xlabel("message size (bytes; 1K = 1,024)", fontsize=10)
    if function == "latency":
        ax.set_yscale("log")
        lo, hi = float(d0["min"].min()), float(d0["max"].max())
        plain_log_axis(ax.yaxis, lo, hi)
        ax.set_ylabel("one-way latency (µs)", fontsize=10)
    else:
        ax.set_ylabel(("bidirectional " if function == "bibw" else "") + "bandwidth (GB/s)",
                      fontsize=10)
        ax.set_ylim(bottom=0)
    ax.tick_params(labelsize=9)
    ax.set_title({"latency": "latency (osu_latency)", "bw": "bandwidth (osu_bw)",
                  "bibw": "bidirectional bandwidth (osu_bibw)"}[function], fontsize=11)
    return ax


def time_vs_cores(stats: pd.DataFrame, ax: plt.Axes, title: str = "") -> plt.Axes:
    """Solve time against cores used (log-log), one line per layout, baselines as markers."""
    apply_style()
    d0 = stats[stats["metric"] == "solve_time"]
    labels = list(dict.fromkeys(d0.sort_values(["impl", "label"])["label"]))
    colors = dict(zip(labels, palette(len(labels))))
    # the series at one core count side by side (equal offsets in log space), so their
    # error bars do not hide each other; a series alone at its core count stays on it
    shift = {}
    for c, at in d0.groupby("cores"):
        here = [lab for lab in labels if lab in set(at["label"])]
        shift |= {(lab, c): f for lab, f in zip(here, log_dodge(len(here), d0["cores"]))}
    for label in labels:
        d = d0[d0["label"] == label].sort_values("cores")
        base = d["impl"].iloc[0] != "c"
        ax.errorbar(d["cores"] * [shift[(label, c)] for c in d["cores"]], d["median"],
                    yerr=[d["median"] - d["min"], d["max"] - d["median"]],
                    fmt="s" if base else "-o", ms=6 if base else 4, capsize=2,
                    color=colors[label], label=label + (" (1 process)" if base else ""))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    cores = sorted({int(c) for c in d0["cores"]})
    ax.xaxis.set_major_locator(ticker.FixedLocator(cores))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    if len(cores) == 1:  # one core count: room for the dodged points either side
        ax.set_xlim(cores[0] / 1.6, cores[0] * 1.6)
    if len(d0):
        plain_log_axis(ax.yaxis, float(d0["min"].min()), float(d0["max"].max()))
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


#: Cost-performance dots: colour per where the bandwidth comes from, marker per billing.
SOURCE_COLORS = {"measured here": "#0072B2", "the study": "0.35",
                 "theoretical (not measured)": "#E69F00"}
SOURCE_NAMES = {"measured here": "VM measured here", "the study": "VM of the study",
                "theoretical (not measured)": "Flow (theoretical bandwidth)"}
BILLING_MARKERS = {"payg": "o", "spot": "v", "onprem_fee": "s"}
BILLING_NAMES = {"payg": "pay-as-you-go", "spot": "spot", "onprem_fee": "node-hour fee"}


def cost_performance(rows: list[dict], ax: plt.Axes, value: str = "gbs_per_1000_jpy_h",
                     xlabel: str = "Triad GB/s per 1,000 JPY per node-hour") -> plt.Axes:
    """One dot per system and billing on a log axis, each labelled with its value.

    Dots, not bars: on a log axis a bar's length from an arbitrary left edge says
    nothing, while the distance between dots reads as a ratio.  The legend names only
    the sources and billings drawn.  `rows` are the cost table's rows with a price.
    """
    apply_style()
    rows = sorted(rows, key=lambda r: r[value])
    ys = range(len(rows))
    seen = set()
    for y, r in zip(ys, rows):
        src, bill = r["bandwidth"], r["billing"]
        label = f"{SOURCE_NAMES.get(src, src)}, {BILLING_NAMES.get(bill, bill)}"
        ax.plot([r[value]], [y], ls="none", marker=BILLING_MARKERS.get(bill, "D"), ms=8,
                color=SOURCE_COLORS.get(src, "#CC79A7"), zorder=3,
                label=None if label in seen else label)
        seen.add(label)
        ax.annotate(plain_number(r[value]), (r[value], y), xytext=(7, 0),
                    textcoords="offset points", va="center", fontsize=9)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([f"{r['system']} ({BILLING_NAMES.get(r['billing'], r['billing'])})"
                        for r in rows], fontsize=9)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xscale("log")
    if rows:
        lo, hi = rows[0][value], rows[-1][value]
        ax.set_xlim(lo / 1.6, hi * 2.2)  # room for the value labels right of the dots
        plain_log_axis(ax.xaxis, lo, hi)
    ax.set_xlabel(xlabel + " (log scale; higher is better)", fontsize=10)
    ax.tick_params(axis="x", labelsize=9)
    ax.grid(axis="y", color="0.92")
    ax.legend(loc="upper left", fontsize=9, frameon=True)
    return ax
