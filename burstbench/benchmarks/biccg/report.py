"""BICCG's section of the report: the study's Figures 12-13 for every VM with data (time
against parallelism, with iterations and the time split) and the summary table."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib import ticker

from burstbench.benchmarks.biccg.results import SPLIT, spread
from burstbench.report import sections, style


def _whole(v: object) -> object:
    """A median that is a whole number as an int (written '115' in the CSV, not '115.0')."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _solver_options(table: pd.DataFrame, run: dict, params: dict) -> str:
    """The blocks and the factor's precision the run's C solves used, as their records say
    (runs from before the solver recorded them used rows and a double factor)."""
    mine = table[(table["run_id"] == run["run_id"]) & (table["impl"] == "c")]
    opts = {}
    for col, old in (("blocking", f"rows of {params.get('biccg_block_size')}"),
                     ("factor_precision", "double")):
        vals = mine[col].dropna().unique() if col in mine else []
        opts[col] = ", ".join(sorted(map(str, vals))) if len(vals) else old
    return f"blocks: {opts['blocking']}, IC(0) factor in {opts['factor_precision']} precision"


def report_section(runs_dir: Path | str = "", reference_dir: Path | str = "",
                   figures_dir: Path | str = "", show: bool = False) -> sections.Section:
    """The study's Figures 12-13 for every VM with data (time against parallelism, with
    iterations and the time split) and the summary table."""
    section, loaded, ref_dir, fig_dir, root = sections.begin(
        "biccg", runs_dir, reference_dir, figures_dir)
    stats = spread(loaded.table)
    rows = []
    for vm, run, s, run_rel in sections.each_vm(stats, loaded, root):
        problems = sorted(set(s["problem"]), key=style.natural)
        style.apply_style()  # before the figure, or the first figure misses the style
        fig, axes = plt.subplots(len(problems), 2, figsize=(13, 4.3 * len(problems)),
                                 squeeze=False)
        for (ax_t, ax_s), prob in zip(axes, problems):
            time_vs_cores(s[s["problem"] == prob], ax_t, f"{prob}: solve time")
            iteration_split(s[s["problem"] == prob], ax_s, f"{prob}: one iteration")
        fig.suptitle(f"{vm}: BICCG (block IC(0) CG, multicolor), {sections.source_label(run)}",
                     fontweight="bold")
        params = run["params"]
        caption = (f"Data: {run_rel} ({run['status']}); median of {int(s['n'].max())} runs, "
                   f"bars min-max; {_solver_options(loaded.table, run, params)}, "
                   f"{params.get('biccg_colors')} colors, tol {params.get('biccg_tol')}; "
                   "layouts 'RxT' = R MPI ranks per node x T OpenMP threads; baselines on one "
                   "process. The study's Figures 12-13 give no numbers to mark; its conditions "
                   "are in data/reference/biccg_conditions.csv.")
        section.entries.append(sections.figure_entry(
            fig, fig_dir, f"biccg_{vm}", f"BICCG time against parallelism on {vm}", caption,
            [run_rel], show))
        med = s.pivot_table(index=["problem", "label", "impl", "nodes", "ranks", "threads",
                                   "cores"], columns="metric", values="median").reset_index()
        lo = s[s["metric"] == "solve_time"].set_index(["problem", "label", "nodes"])
        for r in med.to_dict("records"):
            one = lo.loc[(r["problem"], r["label"], r["nodes"])]
            rows.append({"vm": vm, "problem": r["problem"], "solver": r["label"],
                         "nodes": r["nodes"], "ranks": r["ranks"], "threads": r["threads"],
                         "cores": r["cores"], "iterations": _whole(r.get("iterations")),
                         "solve_s": round(r["solve_time"], 4),
                         "solve_min_s": round(float(one["min"]), 4),
                         "solve_max_s": round(float(one["max"]), 4),
                         "setup_s": round(r.get("setup_time", math.nan), 4),
                         **{f"{k}_ms_per_it": round(1e3 * r.get(f"per_iteration_{k}", math.nan),
                                                    3) for k in SPLIT},
                         "peak_rss_gb": round(r.get("peak_rss", math.nan) / 1e9, 3),
                         "data": run_rel})
    sections.table_entry(
        section, rows, fig_dir, "biccg_summary", "BICCG per problem, solver and layout",
        "Medians over repetitions: iterations to a relative residual of tol, solve and setup "
        "times, the time of one iteration split into SpMV, preconditioner, dot products (with "
        "their Allreduce), halo exchange and vector updates, and the peak memory of the largest "
        "rank. Newest run of each VM under data/runs.")
    return section


def time_vs_cores(stats: pd.DataFrame, ax: plt.Axes, title: str = "") -> plt.Axes:
    """Solve time against cores used (log-log), one line per layout, baselines as markers."""
    style.apply_style()
    d0 = stats[stats["metric"] == "solve_time"]
    # our layouts by ranks, then threads (16x1 after 2x1), the baselines after them
    baselines = set(d0.loc[d0["impl"] != "c", "label"])
    labels = sorted(set(d0["label"]), key=lambda lab: (lab in baselines, style.natural(lab)))
    colors = dict(zip(labels, style.palette(len(labels))))
    # the series at one core count side by side (equal offsets in log space), so their
    # error bars do not hide each other; a series alone at its core count stays on it
    shift: dict = {}
    for c, at in d0.groupby("cores"):
        here = [lab for lab in labels if lab in set(at["label"])]
        shift |= {(lab, c): f for lab, f in zip(here, style.log_dodge(len(here), d0["cores"]))}
    for label in labels:
        d = d0[d0["label"] == label].sort_values("cores")
        base = label in baselines
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
        style.plain_log_axis(ax.yaxis, float(d0["min"].min()), float(d0["max"].max()))
    ax.set_xlabel("cores used (nodes x ranks x threads)")
    ax.set_ylabel("solve time (s)")
    # many layouts (a 16-core VM has 15): beside the plot, where no point is under it
    if len(labels) > 8:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(fontsize=7)
    if title:
        ax.set_title(title)
    return ax


SPLIT_COLORS = {"spmv": "#0072B2", "precond": "#D55E00", "dots": "#009E73", "halo": "#CC79A7",
                "vector": "#999999"}


def iteration_split(stats: pd.DataFrame, ax: plt.Axes, title: str = "") -> plt.Axes:
    """Stacked bars: one iteration's time split per configuration, iterations on top."""
    style.apply_style()
    d = stats[stats["impl"] == "c"]
    med = d.pivot_table(index=["nodes", "label", "cores"], columns="metric",
                        values="median").reset_index()
    med = med.iloc[sorted(range(len(med)), key=lambda k: (  # as the time panel: 1x16 first
        med["cores"].iloc[k], style.natural(str(med["label"].iloc[k]))))]
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
    # the node count under each layout, unless every one ran on one node
    nodes = bool((med["nodes"] != 1).any())
    ax.set_xticklabels([r.label + (f"\n{r.nodes} node{'s' if r.nodes > 1 else ''}" if nodes
                                   else "") for r in med.itertuples()], fontsize=7)
    ax.set_ylabel("time per iteration (ms)")
    # room for the legend beside few bars (one bar filled the axes, the legend over it)
    ax.set_xlim(-0.6, max(len(med), 4) - 0.4)
    ax.legend(fontsize=7, loc="upper right")
    if title:
        ax.set_title(title)
    return ax
