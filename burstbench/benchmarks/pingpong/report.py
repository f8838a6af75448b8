"""The ping-pong's section of the report: the study's Figures 5-10 for every VM with data,
and the latency/bandwidth table."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib import ticker

from burstbench.benchmarks.pingpong.results import extremes, spread
from burstbench.core.reference import read_reference, vm_key
from burstbench.report import sections, style


def report_section(runs_dir: Path | str = "", reference_dir: Path | str = "",
                   figures_dir: Path | str = "", show: bool = False) -> sections.Section:
    """The study's Figures 5-10 for every VM with data, and the latency/bandwidth table."""
    section, loaded, ref_dir, fig_dir, root = sections.begin(
        "pingpong", runs_dir, reference_dir, figures_dir)
    ref = read_reference(ref_dir, "osu.csv", ["vm", "latency_min_us", "latency_max_us",
                                              "bandwidth_max_gbs", "source"], section.problems)
    stats = spread(loaded.table)
    rows = []
    for vm, run, s, run_rel in sections.each_vm(stats, loaded, root):
        tests = [t for t in ("latency", "bw", "bibw") if t in set(s["function"])]
        # panels side by side, the legend in a row of its own below them: about 1,800 px
        # wide at 150 dpi for three panels, so it reads on a laptop and in the README
        style.apply_style()
        legend_rows = math.ceil(s["label"].nunique() / (2 if len(tests) > 1 else 1))
        fig = plt.figure(figsize=(max(8.0, 4.0 * len(tests)), 4.6 + 0.2 * legend_rows))
        grid = fig.add_gridspec(2, len(tests), height_ratios=[3.6, 0.2 + 0.2 * legend_rows])
        axes = [[fig.add_subplot(grid[0, i]) for i in range(len(tests))]]
        legend_ax = fig.add_subplot(grid[1, :])
        legend_ax.axis("off")
        r = ref[ref["vm"].map(vm_key) == vm_key(vm)]
        marks = []
        for ax, test in zip(axes[0], tests):
            versus_message_size(s, ax, test)
            for x in r.itertuples():
                if test == "latency" and pd.notna(x.latency_min_us):
                    ax.axhspan(x.latency_min_us, x.latency_max_us, color="0.5", alpha=0.15,
                               label=f"study: {x.latency_min_us:g}-{x.latency_max_us:g} µs")
                    marks.append("the study's latency range")
                if test == "bw" and pd.notna(x.bandwidth_max_gbs):
                    style.reference_line(ax, x.bandwidth_max_gbs,
                                         f"study max {x.bandwidth_max_gbs:g} GB/s")
                    marks.append("the study's maximum bandwidth")
        handles, labels = axes[0][0].get_legend_handles_labels()
        for ax in axes[0][1:]:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        legend_ax.legend(handles, labels, loc="center", ncol=2 if len(tests) > 1 else 1,
                         fontsize=9, columnspacing=2.5)
        fig.suptitle(f"{vm}: MPI ping-pong, two ranks ({sections.source_label(run)})",
                     fontweight="bold", fontsize=12)
        params = run["params"]
        caption = (f"Data: {run_rel} ({run['status']}); median of "
                   f"{int(s['n'].max())} mpiexec runs per point, bars min-max; OSU 7.x methods "
                   f"(iterations {params.get('pingpong_iterations') or 'as OSU'}), "
                   "solid: C kernel, dashed: the same loop in mpi4py, one colour per "
                   "combination and placement; size 0 is drawn at the tick '0' (0.5 B on the log "
                   "axis). "
                   + (f"Reference marks: {', '.join(dict.fromkeys(marks))} "
                      "(data/reference/osu.csv)." if marks else
                      "No reference figure is known for this VM."))
        section.entries.append(sections.figure_entry(
            fig, fig_dir, f"pingpong_{vm}", f"MPI latency and bandwidth vs message size on {vm}",
            caption, [run_rel], show))
        for row in extremes(s).to_dict("records"):
            rows.append({"vm": vm, "source": sections.source_label(run)} | row
                        | {"run_state": sections.run_state(run), "data": run_rel})
    for x in ref.itertuples():
        base = {"vm": x.vm, "source": "the study", "label": "", "impl": "",
                "combination": f"{x.combinations:g} combinations" if pd.notna(
                    getattr(x, "combinations", float("nan"))) else "", "placement": "inter-node",
                "at_size_bytes": pd.NA, "min": math.nan, "max": math.nan,
                "repetitions": pd.NA, "data": "data/reference/osu.csv"}
        rows.append(base | {"test": "latency", "value": x.latency_min_us, "unit": "us",
                            "note": f"range {x.latency_min_us:g}-{x.latency_max_us:g} us"})
        rows.append(base | {"test": "bw", "value": x.bandwidth_max_gbs, "unit": "GB/s",
                            "note": "maximum"})
    sections.table_entry(
        section, [{k: v for k, v in r.items() if k != "run_id"} for r in rows], fig_dir,
        "pingpong_extremes",
        "Minimum latency and maximum bandwidth per VM, combination and placement",
        "Per VM, combination (compiler + MPI library), placement and test: the smallest median "
        "latency and the largest median bandwidth over message sizes, with the size where it "
        "occurs. 'measured here' rows: the newest run of each VM under data/runs, its state in "
        "run_state (an incomplete sweep's extremes are of what it measured); 'the study' "
        "rows: data/reference/osu.csv (its latency range and maximum bandwidth, inter-node).")
    return section


def versus_message_size(stats: pd.DataFrame, ax: plt.Axes, function: str) -> plt.Axes:
    """Median against message size (log2 x), one line per label, min-max as error bars.

    `stats` is ``burstbench.pingpong.spread`` output for one VM; `function` is
    latency (log y, microseconds), bw or bibw (GB/s).
    """
    style.apply_style()
    d0 = stats[stats["function"] == function]
    labels = list(dict.fromkeys(d0.sort_values(["impl", "label"])["label"]))
    # one colour per combination and placement: its C kernel solid, its mpi4py loop dashed
    impl_of = dict(zip(d0["label"], d0["impl"]))
    base = {lab: lab.removesuffix(f"+{impl_of[lab]}") if impl_of[lab] != "c" else lab
            for lab in labels}
    keys = list(dict.fromkeys(base[lab] for lab in sorted(labels, key=lambda x: (
        impl_of[x] != "c", x))))
    colors = dict(zip(keys, style.palette(len(keys))))
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
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: style.bytes_label(v)))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.set_xlabel("message size (bytes; 1K = 1,024)", fontsize=10)
    if function == "latency":
        ax.set_yscale("log")
        lo, hi = float(d0["min"].min()), float(d0["max"].max())
        style.plain_log_axis(ax.yaxis, lo, hi)
        ax.set_ylabel("one-way latency (µs)", fontsize=10)
    else:
        ax.set_ylabel(("bidirectional " if function == "bibw" else "") + "bandwidth (GB/s)",
                      fontsize=10)
        ax.set_ylim(bottom=0)
    ax.tick_params(labelsize=9)
    ax.set_title({"latency": "latency (osu_latency)", "bw": "bandwidth (osu_bw)",
                  "bibw": "bidirectional bandwidth (osu_bibw)"}[function], fontsize=11)
    return ax
