"""Storage's section of the report: per VM, write and read bandwidth per target, API and
access pattern, beside Flow's IOR results (per client: they ran on 144-576 clients) and the
Gfarm-on-Azure slides (per I/O server), each labelled with its source; the summary table,
with Gfarm replication times beside the slides'."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from burstbench.benchmarks.storage.results import from_memory, spread
from burstbench.core.reference import read_reference
from burstbench.report import sections, style

MB_PER_MIB = (1 << 20) / 1e6
OP_COLORS = {"write": "#0072B2", "read": "#E69F00"}


def references(ref_dir: Path, problems: list[str]) -> pd.DataFrame:
    """The published storage numbers as rows like ours: Flow's IOR per client, and Gfarm on
    Azure's IOR and dd per I/O server (MB/s converted to MiB/s)."""
    rows = []
    flow = read_reference(ref_dir, "flow_ior.csv", ["filesystem", "clients", "access_pattern",
                                                    "operation", "bandwidth_mib_s"], problems)
    for r in flow.itertuples():
        rows.append({"source": "Flow (Ohshima et al. 2020)", "label":
                     f"Flow {r.filesystem}, {r.access_pattern}", "operation": r.operation,
                     "mib_s": r.bandwidth_mib_s / r.clients, "per": "per client",
                     "note": f"{r.bandwidth_mib_s:,.0f} MiB/s on {r.clients} clients",
                     "data": "data/reference/flow_ior.csv"})
    gf = read_reference(ref_dir, "gfarm_azure_io.csv", ["servers", "method",
                                                        "gfarm2fs_direct_io", "operation",
                                                        "bandwidth_mb_s"], problems)
    for r in gf.itertuples():
        if r.method == "local dd":
            continue
        direct = "direct_io" if r.gfarm2fs_direct_io == "yes" else "no direct_io"
        rows.append({"source": "Gfarm on Azure (slides)", "label":
                     f"Gfarm on Azure, {r.method}, {direct}, {r.servers} server(s)",
                     "operation": r.operation,
                     "mib_s": r.bandwidth_mb_s / MB_PER_MIB / r.servers, "per": "per I/O server",
                     "note": f"{r.bandwidth_mb_s:,} MB/s on {r.servers} server(s)",
                     "data": "data/reference/gfarm_azure_io.csv"})
    return pd.DataFrame(rows)


def best(s: pd.DataFrame) -> pd.DataFrame:
    """Per target, API, access pattern and operation: the layout with the best median
    bandwidth (its ranks and nodes, min and max, cache label)."""
    bw = s[(s["metric"] == "bandwidth") & (s["access"] != "replication")]
    if bw.empty:
        return bw
    idx = bw.groupby(["target", "api", "access", "operation"], sort=True)["median"].idxmax()
    return bw.loc[idx.values].reset_index(drop=True)


def report_section(runs_dir: Path | str = "", reference_dir: Path | str = "",
                   figures_dir: Path | str = "", show: bool = False) -> sections.Section:
    """The storage figure for every VM with data, and the summary table."""
    section, loaded, ref_dir, fig_dir, root = sections.begin(
        "storage", runs_dir, reference_dir, figures_dir)
    refs = references(ref_dir, section.problems)
    stats = spread(loaded.table)
    rows = []
    for vm, run, s, run_rel in sections.each_vm(stats, loaded, root):
        ours = best(s)
        if not ours.empty:
            section.entries.append(_figure(vm, run, ours, refs, fig_dir, run_rel, show))
        for r in s[s["metric"] == "bandwidth"].itertuples():
            rows.append({"vm": vm, "source": sections.source_label(run), "target": r.target,
                         "api": r.api, "access": r.access, "operation": r.operation,
                         "ranks": int(r.ranks), "nodes": int(r.nodes),
                         "median_mib_s": round(r.median, 1), "min_mib_s": round(r.min, 1),
                         "max_mib_s": round(r.max, 1),
                         "median_gbs": round(r.median * (1 << 20) / 1e9, 3),
                         "repetitions": int(r.n), "fs_type": r.fs_type, "cache": r.cache,
                         "run_state": sections.run_state(run), "data": run_rel})
    for r in refs.itertuples():
        rows.append({"vm": "", "source": r.source, "target": r.label, "api": "",
                     "access": "", "operation": r.operation, "ranks": pd.NA, "nodes": pd.NA,
                     "median_mib_s": round(r.mib_s, 1), "min_mib_s": math.nan,
                     "max_mib_s": math.nan, "median_gbs": round(r.mib_s * (1 << 20) / 1e9, 3),
                     "repetitions": pd.NA, "fs_type": "", "cache": f"{r.per}: {r.note}",
                     "data": r.data})
    sections.table_entry(
        section, rows, fig_dir, "storage_summary", "Storage bandwidth per target and access "
        "pattern, and the published numbers",
        "Measured here (the newest run of each VM, its state in run_state): median over "
        "repetitions (fresh mpiexec runs) of IOR's bandwidth, bytes "
        "of all ranks / (latest close - earliest open), fsync inside the timed write, every "
        "byte read checked; cache says how each read avoided the page cache ('may be cached': "
        "it may not have; '...; servers may cache': this node's cache was avoided, the file "
        "servers' could not be: neither is storage bandwidth). Published: Flow's IOR aggregate per "
        "client (data/reference/flow_ior.csv), Gfarm on Azure per I/O server "
        "(data/reference/gfarm_azure_io.csv, MB/s converted to MiB/s).")
    _replication_table(section, stats, loaded, ref_dir, fig_dir, root)
    return section


def _figure(vm: str, run: dict, ours: pd.DataFrame, refs: pd.DataFrame, fig_dir: Path,
            run_rel: str, show: bool) -> sections.Entry:
    """Horizontal bars on a log axis: ours per target (write and read), then the references
    per client or per I/O server, each group labelled with its source."""
    style.apply_style()
    groups = [(f"measured here ({vm}, one node)", ours.assign(
        ylabel=lambda d: d["target"] + " " + d["api"] + "\n" + d["access"]))]
    for source, d in refs.groupby("source", sort=False):
        groups.append((f"{source}, {d['per'].iloc[0]}", d.rename(columns={"mib_s": "median"})
                       .assign(ylabel=d["label"].str.replace(", ", "\n", n=1))))
    labels, y, yticks, ylabels = [], 0.0, [], []
    fig_h = 1.6 + 0.42 * sum(d["ylabel"].nunique() for _, d in groups) + 0.4 * len(groups)
    fig, ax = plt.subplots(figsize=(11, fig_h))
    for title, d in groups:
        ax.text(1.0, y - 0.55, title, transform=ax.get_yaxis_transform(), ha="right",
                va="bottom", fontsize=9, fontweight="bold", color="0.25")
        for ylabel, g in d.groupby("ylabel", sort=False):
            for dy, op in ((-0.18, "write"), (0.18, "read")):
                hit = g[g["operation"] == op]
                if hit.empty:
                    continue
                r = hit.iloc[0]
                cached = from_memory(r.get("cache"))
                err = None
                if "min" in r and pd.notna(r.get("min")):
                    err = [[r["median"] - r["min"]], [r["max"] - r["median"]]]
                ax.barh(y + dy, r["median"], height=0.34, color=OP_COLORS[op],
                        hatch="//" if cached else None, edgecolor="white" if not cached
                        else "0.3", xerr=err, capsize=2, ecolor="0.3",
                        label=f"{op}" + (" (from memory, maybe: no storage bandwidth)"
                                         if cached else ""))
                ranks = f" ({int(r['ranks'])} rank{'s' * (int(r['ranks']) > 1)})" if (
                    pd.notna(r.get("ranks"))) else ""
                ax.annotate(f"{r['median']:,.0f}{ranks}",  # right of the bar or its max
                            (r["max"] if err is not None else r["median"], y + dy),
                            xytext=(4, 0),
                            textcoords="offset points", va="center", fontsize=7)
            yticks.append(y)
            ylabels.append(ylabel)
            y += 1.0
        y += 0.6
        labels.append(title)
    ax.set_xscale("log")
    style.plain_log_axis(ax.xaxis, float(np.nanmin([d["median"].min() for _, d in groups])),
                         float(np.nanmax([d["median"].max() for _, d in groups])))
    ax.set_xlim(right=ax.get_xlim()[1] * 1.8)  # room for the last labels
    ax.set_yticks(yticks)
    ax.set_yticklabels(ylabels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("bandwidth (MiB/s, log scale; IOR's method: bytes / (last close - first "
                  "open))")
    handles, names = ax.get_legend_handles_labels()
    keep = dict(zip(names, handles))
    ax.legend(keep.values(), keep.keys(), loc="lower right", fontsize=8, frameon=True)
    ax.set_title(f"{vm}: storage write and read bandwidth ({sections.source_label(run)}) "
                 "beside the published numbers")
    caches = sorted(set(ours.loc[ours["operation"] == "read", "cache"].astype(str)))
    caption = (f"Data: {run_rel} ({run['status']}); median of {int(ours['n'].max())} fresh "
               "runs, bars min-max; the best layout of each target, API, access pattern and "
               "operation (its ranks named). Reads avoided the page cache by: "
               f"{', '.join(repr(c) for c in caches if c) or 'n/a'}; hatched: a read that may "
               "have come from this node's or the servers' memory (no storage bandwidth). "
               "Flow: IOR aggregate divided by its 144-576 clients (data/reference/"
               "flow_ior.csv); Gfarm on Azure: aggregate divided by its I/O servers, MB/s as "
               "MiB/s (data/reference/gfarm_azure_io.csv). One node here against one client "
               "or server there: a cloud burst's data moves through one.")
    return sections.figure_entry(fig, fig_dir, f"storage_{vm}",
                                 f"Storage bandwidth on {vm} beside Flow and Gfarm on Azure",
                                 caption, [run_rel], show)


def _replication_table(section: sections.Section, stats: pd.DataFrame, loaded, ref_dir: Path,
                       fig_dir: Path, root: Path) -> None:
    """Gfarm replication (gfrep) measured here beside the slides' test 5 (7.8 GB)."""
    rows = []
    rep = stats[(stats["access"] == "replication") & (stats["metric"] == "bandwidth")]
    for vm, run, s, run_rel in sections.each_vm(rep, loaded, root, newest_with_rows=True):
        for r in s.itertuples():
            rows.append({"source": sections.source_label(run), "vm": vm, "between":
                         f"two I/O nodes of {r.target}", "metadata_server": "",
                         "median_mib_s": round(r.median, 1), "tries": int(r.n),
                         "run_state": sections.run_state(run), "data": run_rel})
    ref = read_reference(ref_dir, "gfarm_azure_gfrep.csv", ["between", "metadata_server",
                                                            "seconds", "size_gb"],
                         section.problems)
    for (between, md), d in ref.groupby(["between", "metadata_server"], sort=False):
        mib_s = d["size_gb"] * 1e9 / d["seconds"] / (1 << 20)
        rows.append({"source": "Gfarm on Azure (slides)", "vm": "DS15v2", "between": between,
                     "metadata_server": md, "median_mib_s": round(float(mib_s.median()), 1),
                     "tries": len(d), "data": "data/reference/gfarm_azure_gfrep.csv"})
    if any(r["source"] != "Gfarm on Azure (slides)" for r in rows):
        sections.table_entry(
            section, rows, fig_dir, "storage_replication",
            "Gfarm replication (gfrep) beside Gfarm on Azure",
            "Median bandwidth of one file's replication to a second I/O node (gfrep -N 2, "
            "timed; the file written first with gfreg, not timed), from each VM's newest run "
            "that replicated (a newer run without Gfarm does not hide it). The slides replicated "
            "7.8 GB between two DS15v2 VMs, three tries each.")
