"""Triad's section of the report: the study's Figures 2-4 for every VM with data, the
best-bandwidth table, the stores comparison and an overview."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from burstbench.benchmarks.triad.results import at_size, ladder, spread, triad_traffic_factor
from burstbench.core import paths
from burstbench.core.reference import read_reference, vm_key
from burstbench.report import sections, style
from burstbench.report.style import IMPL_MARKER, IMPL_STYLE


def report_section(runs_dir: Path | str = "", reference_dir: Path | str = "",
                   figures_dir: Path | str = "", show: bool = False) -> sections.Section:
    """The study's Figures 2-4 for every VM with data, the best-bandwidth table, an overview."""
    section, loaded, ref_dir, fig_dir, root = sections.begin(
        "triad", runs_dir, reference_dir, figures_dir)
    best_ref = read_reference(ref_dir, "triad_best.csv",
                              ["vm", "best_triad_gbs", "label", "threads", "source"],
                              section.problems)
    peaks = read_reference(ref_dir, "vm_memory_bandwidth.csv", ["vm", "theoretical_gbs_node"],
                           section.problems)
    stats = spread(loaded.table)
    best_rows: list[dict] = []
    stores_rows: list[dict] = []
    for vm, run, s, run_rel in sections.each_vm(stats, loaded, root):
        peak, peak_src = peak_for(vm, run["params"], peaks)
        style.apply_style()  # before the figure, or the first figure misses the style
        fig, ax = plt.subplots(figsize=(10, 5.5))
        bandwidth_vs_threads(s, ax, title=f"{vm}: STREAM Triad bandwidth vs threads "
                                                f"({sections.source_label(run)})")
        marks = []
        ref = best_ref[best_ref["vm"].map(vm_key) == vm_key(vm)]
        for r in ref.itertuples():
            style.reference_line(ax, r.best_triad_gbs, f"study best {r.best_triad_gbs:g} GB/s "
                                 f"({r.label}, {r.threads:g} threads)", "--", "0.2", r.threads)
            marks.append("the study's best (data/reference/triad_best.csv)")
        for r in _series_rows(best_ref, vm).itertuples():
            series = str(r.vm).removesuffix(" series")
            style.reference_line(ax, r.best_triad_gbs, f"{str(r.source).split(' (')[0]}, "
                                 f"{series}: {r.best_triad_gbs:g} GB/s", "-.", "0.45")
            marks.append(str(r.note).split(";")[0])
        if not math.isnan(peak):
            style.reference_line(ax, peak, f"theoretical {peak:g} GB/s", ":", "0.6")
            marks.append(f"theoretical bandwidth ({peak_src})")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        elements = at_size(loaded.table, run["run_id"])
        size = f"{int(elements):,}" if elements == elements else "?"
        caption = (f"Data: {run_rel} ({run['status']}); median of "
                   f"{int(s['n'].max())} repetitions per point, bars min-max; "
                   f"N = {size} doubles per array, "
                   f"NTIMES = {run['params'].get('triad_ntimes', '?')}; "
                   + ("labels with '-streaming' (dash-dotted): streaming stores; the other C "
                      "variants and numba: normal stores; "
                      if (s["stores"] == "streaming").any() else
                      "C variants and numba: normal stores; ")
                   + "NumPy: memmove (glibc's streaming stores for large arrays). "
                   + (f"Reference marks: {'; '.join(marks)}." if marks else
                      "No reference figure is known for this VM."))
        section.entries.append(sections.figure_entry(
            fig, fig_dir, f"triad_{vm}", f"STREAM Triad vs threads on {vm}", caption, [run_rel],
            show))
        mine = _stores_rows(vm, s, peak, run_rel)
        if mine:
            stores_rows += mine
            section.entries.append(_stores_figure(vm, run, mine, fig_dir, run_rel, show))
        for label, d in s.groupby("label"):
            top = d.loc[d["median_gbs"].idxmax()]
            traffic = top["median_gbs"] * triad_traffic_factor(top["stores"])
            best_rows.append({
                "vm": vm, "source": sections.source_label(run), "label": label, "impl": top["impl"],
                "stores": top["stores"],
                "threads": int(top["threads"]), "best_median_gbs": round(top["median_gbs"], 2),
                "min_gbs": round(top["min_gbs"], 2), "max_gbs": round(top["max_gbs"], 2),
                "cv": round(float(top["cv"]), 4), "repetitions": int(top["n"]),
                "theoretical_gbs": peak,
                "fraction_of_theoretical": round(top["median_gbs"] / peak, 3)
                if not math.isnan(peak) else math.nan,
                "traffic_gbs": round(traffic, 2),
                "traffic_fraction_of_theoretical": round(traffic / peak, 3),
                "run_state": sections.run_state(run), "data": run_rel})
    for r in best_ref.itertuples():
        peak, _ = peak_for(r.vm, {}, peaks)
        best_rows.append({
            "vm": r.vm,
            "source": "the study" if str(r.source).startswith("study")
            else str(r.source).split(" (")[0],
            "label": r.label if isinstance(r.label, str) else "", "impl": "", "stores": "",
            # whole numbers stay whole in the CSV: a missing one is empty, not NaN (-> 24.0)
            "threads": int(r.threads) if pd.notna(r.threads) else pd.NA,
            "best_median_gbs": r.best_triad_gbs, "min_gbs": math.nan,
            "max_gbs": math.nan, "cv": math.nan, "repetitions": pd.NA,
            "theoretical_gbs": peak,
            "fraction_of_theoretical": round(r.best_triad_gbs / peak, 3)
            if not math.isnan(peak) else math.nan,
            "traffic_gbs": math.nan, "traffic_fraction_of_theoretical": math.nan,
            "data": "data/reference/triad_best.csv"})
    table = sections.table_entry(
        section, best_rows, fig_dir, "triad_best", "Best Triad bandwidth per VM and configuration",
        "Best median Triad bandwidth over thread counts, per VM and configuration, with its "
        "spread and its fraction of the theoretical memory bandwidth where known. "
        "best_median_gbs counts 24 B per element, as STREAM does; traffic_gbs is what the "
        "memory moved: 32 B per element with normal stores (each line written is read first), "
        "24 B with streaming stores. Rows 'measured here' come from the newest run of each VM "
        "under data/runs, its state in run_state (an incomplete sweep's best is of what it "
        "measured); rows 'the study' from data/reference/triad_best.csv (their store "
        "policy is not recorded).")
    if not table.empty:
        section.entries.append(_overview(table, fig_dir, show))
    sections.table_entry(
        section, _tier_rows(loaded, root), fig_dir, "triad_tiers",
        "Triad by working set: the caches and the solve's own, beside STREAM's rule size",
        "Per VM measured here (its newest run with a ladder, params triad_tiers), the median "
        "Triad (STREAM's count) of the first C variant's first affinity setting at each "
        "ladder point's working set (its three arrays together: half the last-level cache, "
        "half the L2s, or a size given, such as a solve's working set a node) and thread "
        "count, and its ratio to the sweep's best median at STREAM's rule size (arrays of "
        "4x the caches) at those threads. The machine is the run's (cpu, llc_mib: its "
        "last-level cache as the OS reports it; a VM shares it with the host's other "
        "tenants, so the ladder, not the OS, says where the cache ends). The cost model "
        "prices a solve's working set at this curve.")
    sections.table_entry(
        section, stores_rows, fig_dir, "triad_stores",
        "Triad with normal and streaming stores, per compiler variant",
        "Best median Triad (STREAM's count, 24 B per element) per VM and compiler "
        "variant with normal stores and with streaming stores, their ratio, and the "
        "traffic each moved (32 B and 24 B per element). Measured here only: the "
        "study's published figures do not say which stores their compilers emitted.")
    return section


def _tier_rows(loaded, root: Path) -> list[dict]:
    """triad_tiers' rows: each VM's newest run that measured a ladder, point by point."""
    lad = ladder(loaded.table)
    stats = spread(loaded.table)
    rows: list[dict] = []
    if lad.empty:
        return rows
    runs = {r["run_id"]: r for r in loaded.runs}
    for vm, d in lad.groupby("vm", sort=True):
        run = runs[max(d["run_id"])]
        d = d[d["run_id"] == run["run_id"]]
        rule = stats[(stats["run_id"] == run["run_id"]) & (stats["impl"] == "c")
                     & (stats["stores"] == "normal")].groupby("threads")["median_gbs"].max()
        for (tier, b, threads), g in d.groupby(["tier", "bytes", "threads"], sort=True):
            gbs = float(g["value"].median())
            at_rule = float(rule.get(threads, math.nan))
            rows.append({"vm": vm, "cpu": run.get("cpu", ""),
                         "llc_mib": round(run.get("llc_bytes", 0) / 2**20, 1), "tier": tier,
                         "working_set_mib": round(float(b) / 2**20, 1), "threads": int(threads),
                         "median_gbs": round(gbs, 2), "repetitions": len(g),
                         "rule_size_gbs": round(at_rule, 2),
                         "ratio_to_rule_size": round(gbs / at_rule, 3),
                         "data": paths.rel_path(Path(run["path"]), root)})
    return sorted(rows, key=lambda r: (r["vm"], r["threads"], r["working_set_mib"]))


def _series_rows(best_ref: pd.DataFrame, vm: str) -> pd.DataFrame:
    """Rows of data/reference/triad_best.csv for a series of VMs whose `applies_to` names a
    prefix of `vm` (Azure's HBv3 figure on the HB120 VMs)."""
    if "applies_to" not in best_ref:
        return best_ref.iloc[0:0]
    key = vm_key(vm)
    return best_ref[best_ref["applies_to"].fillna("").astype(str).map(
        lambda s: any(p and key.startswith(vm_key(p)) for p in s.split(";")))]


def _stores_rows(vm: str, s: pd.DataFrame, peak: float, run_rel: str) -> list[dict]:
    """Per C variant of one VM measured with both store policies: best median Triad with
    each (best over affinities and thread counts), their ratio and traffic."""
    rows = []
    c = s[s["impl"] == "c"]
    for variant, d in c.groupby("variant", sort=True):
        best = {k: g.loc[g["median_gbs"].idxmax()] for k, g in d.groupby("stores")}
        if not {"normal", "streaming"} <= set(best):
            continue
        n, st = best["normal"], best["streaming"]
        rows.append({
            "vm": vm, "variant": variant,
            "normal_gbs": round(n["median_gbs"], 2), "normal_label": n["label"],
            "normal_threads": int(n["threads"]),
            "streaming_gbs": round(st["median_gbs"], 2), "streaming_label": st["label"],
            "streaming_threads": int(st["threads"]),
            "streaming_over_normal": round(st["median_gbs"] / n["median_gbs"], 3),
            "normal_traffic_gbs": round(n["median_gbs"] * triad_traffic_factor("normal"), 2),
            "streaming_traffic_gbs": round(
                st["median_gbs"] * triad_traffic_factor("streaming"), 2),
            "theoretical_gbs": peak, "data": run_rel})
    return rows


def _stores_figure(vm: str, run: dict, mine: list[dict], fig_dir: Path, run_rel: str,
                   show: bool) -> sections.Entry:
    """Per compiler variant of one VM (its _stores_rows): best Triad with normal and with
    streaming stores (STREAM's count), the traffic of the normal stores beside them, and a
    caption that says, from these numbers, how much a compiler gains by its stores alone."""
    style.apply_style()
    fig, ax = plt.subplots(figsize=(10, 1.3 * max(1, len(mine)) + 2.4))
    ys = np.arange(len(mine))
    colors = style.palette(3)
    ax.barh(ys + 0.27, [r["normal_gbs"] for r in mine], height=0.26, color=colors[0],
            label="normal stores (STREAM's count, 24 B per element)")
    ax.barh(ys, [r["normal_traffic_gbs"] for r in mine], height=0.26, color=colors[0],
            alpha=0.45, label="normal stores, bytes moved (32 B per element)")
    ax.barh(ys - 0.27, [r["streaming_gbs"] for r in mine], height=0.26, color=colors[2],
            label="streaming stores (24 B counted = moved)")
    for y, r in zip(ys, mine):
        for dy, v in ((0.27, r["normal_gbs"]), (0.0, r["normal_traffic_gbs"]),
                      (-0.27, r["streaming_gbs"])):
            ax.annotate(f"{v:.1f}", (v, y + dy), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=8)
    peak = float(mine[0]["theoretical_gbs"]) if mine else math.nan
    if not math.isnan(peak):
        ax.axvline(peak, ls=":", color="0.4", label=f"theoretical {peak:g} GB/s")
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r['variant']}\nstreaming / normal {r['streaming_over_normal']:.2f}x"
                        for r in mine], fontsize=9)
    ax.set_xlabel("best median Triad bandwidth over affinities and threads (GB/s)")
    ax.set_xlim(0, max([r["normal_traffic_gbs"] for r in mine]
                       + [r["streaming_gbs"] for r in mine] + [0 if math.isnan(peak) else peak])
                * 1.6)
    ax.legend(loc="lower right", fontsize=8, frameon=True)
    ax.set_title(f"{vm}: Triad with normal and streaming stores ({sections.source_label(run)})")
    gains = "; ".join(f"{r['variant']} {r['normal_gbs']:.1f} -> {r['streaming_gbs']:.1f} GB/s "
                      f"({r['streaming_over_normal']:.2f}x)" for r in mine)
    caption = (f"Data: {run_rel}. Best median over affinities and thread counts, per variant: "
               f"{gains}. With normal stores each line written is read first, so Triad moves "
               "32 B per element while STREAM counts 24: the same memory traffic reported with "
               "streaming stores is up to 32/24 = 1.33x higher. Intel's compilers emit "
               "streaming stores for this loop; a compiler ranking such as the study's (icc or "
               "nvc best on every VM, section 3.1) can owe up to that factor to the stores "
               "alone, and on this machine the stores alone gave the ratios above. The study's "
               "figures are its own and say nothing of their stores; these are ours.")
    return sections.figure_entry(fig, fig_dir, f"triad_stores_{vm}",
                               f"Triad: normal against streaming stores on {vm}", caption,
                               [run_rel], show)


def _overview(table: pd.DataFrame, fig_dir: Path, show: bool) -> sections.Entry:
    """Best Triad per VM: ours beside the study's, theoretical bandwidth marked, an
    incomplete sweep's named so."""

    def incomplete(r) -> str:
        return "; incomplete sweep" if str(getattr(r, "run_state", "")).startswith(
            "incomplete") else ""

    best = (table.sort_values("best_median_gbs", ascending=False)
                 .groupby(["vm", "source"], sort=False).head(1)
                 .assign(ours=lambda d: d["source"] == "measured here")
                 .sort_values(["ours", "best_median_gbs"]))
    style.apply_style()
    fig, ax = plt.subplots(figsize=(11, 0.6 * len(best) + 2.0))
    ys = list(range(len(best)))
    colors = {"measured here": "#0072B2", "a test run": "#56B4E9"}
    names = {"measured here": "measured here", "a test run": "a test run"}
    peaks = best["theoretical_gbs"].astype(float)
    # theoretical bandwidth as a light outlined bar behind the measured one: both from zero
    ax.barh([y for y, p in zip(ys, peaks) if not math.isnan(p)], peaks.dropna(), height=0.8,
            color="0.94", edgecolor="0.45", lw=0.8, label="theoretical memory bandwidth")
    for y, r in zip(ys, best.itertuples()):
        ax.barh([y], [r.best_median_gbs], height=0.56, color=colors.get(r.source, "#999999"),
                label=names.get(r.source, "published (the study, Azure)"))
        peak = float(r.theoretical_gbs)
        text = f"{r.best_median_gbs:.1f} GB/s" + (
            f", {r.best_median_gbs / peak:.0%} of theoretical" if peak > 0 else "")
        ax.annotate(text, (max(r.best_median_gbs, 0 if math.isnan(peak) else peak), y),
                    xytext=(5, 0), textcoords="offset points", va="center", fontsize=9)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r.vm} ({r.source}{incomplete(r)})\n" + ", ".join(x for x in (
        r.label if isinstance(r.label, str) else "",
        "" if pd.isna(r.threads) else f"{float(r.threads):g} threads") if x)
        for r in best.itertuples()], fontsize=9)
    ax.set_ylim(-0.6, len(best) - 0.4)
    handles, labels = ax.get_legend_handles_labels()
    keep = dict(zip(labels, handles))  # one entry per category drawn
    ax.legend(keep.values(), keep.keys(), loc="upper right", fontsize=9, frameon=True)
    ax.set_xlabel("best Triad bandwidth (GB/s; measured here: median of the best "
                  "configuration's repetitions)", fontsize=10)
    top = max(best["best_median_gbs"].max(), peaks.max(skipna=True) if peaks.notna().any() else 0)
    ax.set_xlim(0, top * 1.5)
    ax.tick_params(axis="x", labelsize=9)
    ax.set_title("STREAM Triad: best bandwidth per VM, measured and published",
                 fontsize=12)
    caption = ("Data: triad_best.csv (newest run of each VM under "
               "data/runs; the "
               "study's section 3.1 values from data/reference/triad_best.csv); theoretical "
               "bandwidth from data/reference/vm_memory_bandwidth.csv or the run's parameters. "
               "'incomplete sweep': the run stopped at its budget or was interrupted, its best "
               "is of the configurations it measured.")
    return sections.figure_entry(fig, fig_dir, "triad_overview",
                               "STREAM Triad: best per VM, ours beside the study's", caption,
                               sorted(set(best["data"])), show)


def bandwidth_vs_threads(stats: pd.DataFrame, ax: plt.Axes | None = None,
                         title: str = "") -> plt.Axes:
    """Median Triad bandwidth against threads, one line per label, min-max as error bars
    (streaming-store labels dash-dotted, with diamonds).

    `stats` is ``burstbench.triad.spread`` output (one VM).  NumPy, measured on
    one thread, is a single marker.
    """
    style.apply_style()
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 5))
    labels = list(dict.fromkeys(stats.sort_values(["impl", "label"])["label"]))
    colors = dict(zip(labels, style.palette(len(labels))))
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


def peak_for(vm: str, run_params: dict, peaks: pd.DataFrame) -> tuple[float, str]:
    """Theoretical node bandwidth (GB/s) and its source, or (nan, '')."""
    given = float(run_params.get("triad_peak_gbs") or 0)
    if given > 0:
        return given, "triad_peak_gbs of the run's parameters"
    hit = peaks[peaks["vm"].map(vm_key) == vm_key(vm)]
    if len(hit):
        return float(hit["theoretical_gbs_node"].iloc[0]), "data/reference/vm_memory_bandwidth.csv"
    return math.nan, ""


def run_title(P: dict, run_id: str, table: pd.DataFrame) -> str:
    """The measurement notebook's figure title: the VM and run, and what its numbers are not
    where so: a test run's (`test`), or of arrays that fit in the cache (each under 4x the
    last-level cache, STREAM's rule: 190 GB/s of cache is no memory bandwidth)."""
    from kernels_ext.common import sysinfo

    llc = sysinfo.last_level_cache_bytes()
    sizes = pd.to_numeric(table.get("size", pd.Series(dtype=float)), errors="coerce").dropna()
    cached = bool(llc) and len(sizes) > 0 and 8 * float(sizes.max()) < 4 * llc
    marks = (["a test run"] if P.get("test") else []) + (
        [f"arrays in cache ({8 * float(sizes.max()) / 2**20:.1f} MiB each, last-level cache "
         f"{llc / 2**20:.0f} MiB): cache, not memory bandwidth"] if cached else [])
    return f"{P['vm']}: STREAM Triad, run {run_id}" + "".join(f"\n{m}" for m in marks)
