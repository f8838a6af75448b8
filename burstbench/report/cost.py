"""The cost section of the report: the study's tables, cost-performance, cost per solve,
spot.  (The burst decision, time and whole cost of a job against Flow's queue, is its own
section: burstbench/report/decision/.)

Built from data/ alone (the reference tables and every run's results), like
the benchmark reports; every table is CSV + Markdown, every figure PNG + SVG
with a caption naming its data, all listed in figures/README.md.  A VM
without a known price appears in every table, with "no price known".  It reads the
benchmarks' figures of merit (burstbench.core.merits) by merit name: memory bandwidth
(``memory_bandwidth_gbs``) and solve times (``solve_time_s``), whichever benchmark gives
them.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from burstbench.core import paths
from burstbench.core.merits import merit, newest
from burstbench.core.reference import read_reference, vm_key
from burstbench.cost import prices as price_tables
from burstbench.cost.spot import spot_expected, spot_simulate
from burstbench.registry import all_merits
from burstbench.report import style
from burstbench.report.sections import Section, figure_entry, table_entry

NO_PRICE = "no price known"


def _published_tables(section: Section, ref_dir: Path, fig_dir: Path) -> None:
    """Tables 1, 3, 4 and 5 of the study, as published (from data/reference)."""
    p = section.problems
    t1 = read_reference(ref_dir, "vm_sizes.csv", ["vm", "cpu", "sockets", "physical_cores",
                                                  "hw_threads", "memory_gib", "interconnect"], p)
    table_entry(section, t1.assign(data="data/reference/vm_sizes.csv").to_dict("records"),
                 fig_dir, "table_1_vm_sizes", "Table 1: VM sizes measured (the study)",
                 "The study's Table 1, from data/reference/vm_sizes.csv (sources per row).")
    t3 = read_reference(ref_dir, "requirements.csv", ["number", "requirement",
                                                      "case1_cloud_burst"], p)
    table_entry(section, t3.assign(data="data/reference/requirements.csv").to_dict("records"),
                 fig_dir, "table_3_requirements",
                 "Table 3: requirements for joining a supercomputer with a public cloud",
                 "The study's Table 3 (item 7, execution time, is the one the burst decision "
                 "answers: burst_decision_choices.md), from "
                 "data/reference/requirements.csv.")
    t4 = read_reference(ref_dir, "prices_vm.csv", price_tables.VM_PRICE_COLUMNS, p)
    if len(t4):
        wide = t4.pivot_table(index="vm", columns=["billing", "region"],
                              values="price_per_hour", aggfunc="first", sort=False)
        wide.columns = [f"{b} {r} (JPY/h)" for b, r in wide.columns]
        rates = sorted({f"{float(r):g}" for r in t4.get("usd_jpy", pd.Series()).dropna()})
        table_entry(section, wide.reset_index().assign(
            data="data/reference/prices_vm.csv").to_dict("records"), fig_dir,
            "table_4_prices", "Table 4: VM prices per hour (the study"
            + (f", 1 USD = {' or '.join(rates)} JPY)" if rates else ")"),
            "Pay-as-you-go and spot prices in East US and Japan East, from "
            "data/reference/prices_vm.csv; Flow's node-hour fees are in "
            "data/reference/prices_onprem.csv and in the cost-performance table.")
    t5 = read_reference(ref_dir, "prices_storage.csv", ["item", "tier", "encryption", "region",
                                                        "price"], p)
    if len(t5):
        anf = t5[t5["item"].astype(str).str.startswith("anf")]
        wide = anf.pivot_table(index="tier", columns=["encryption", "region"], values="price",
                               aggfunc="first", sort=False)
        wide.columns = [f"{e} encryption {r} (JPY per 4 TiB-month)" for e, r in wide.columns]
        table_entry(section, wide.reset_index().assign(
            data="data/reference/prices_storage.csv").to_dict("records"), fig_dir,
            "table_5_storage", "Table 5: Azure NetApp Files per 4 TiB per month (the study)",
            "From data/reference/prices_storage.csv, which also holds Flow's storage fee and "
            "the data transfer prices used for job costs.")


def _run_prices(runs: list[dict]) -> list[dict]:
    """Prices runs give for themselves (vm_price), as price rows: one per run, however many
    benchmarks list it."""
    rows = []
    for r in {(r["vm"], r["run_id"]): r for r in runs}.values():
        vp = r["params"].get("vm_price") or {}
        for billing in ("payg", "spot"):
            if billing in vp:
                rows.append({"vm": r["vm"], "region": vp.get("region") or "(run)",
                             "billing": billing, "price_per_hour": vp[billing],
                             "currency": vp.get("currency", "JPY"),
                             "source": f"vm_price of run {r['run_id']}"})
    return rows


def _prices_for(prices: price_tables.Prices, vm: str) -> pd.DataFrame:
    t = prices.table
    return t[t["key"] == vm_key(vm)]


def _triad_costs(section: Section, bandwidth: pd.DataFrame, prices: price_tables.Prices,
                 ref_dir: Path, fig_dir: Path, region: str, show: bool) -> list[dict]:
    """Memory bandwidth (Triad) GB/s per 1,000 JPY per hour, per VM, billing and region;
    Flow at its fee."""
    rows = []
    for m in bandwidth.itertuples():
        vm, gbs, source, data = m.vm, m.value, m.source, m.data
        pr = _prices_for(prices, vm)
        if pr.empty:
            rows.append({"system": vm, "bandwidth": source, "triad_gbs": gbs, "region": "",
                         "billing": NO_PRICE, "jpy_per_node_hour": math.nan,
                         "gbs_per_1000_jpy_h": math.nan, "data": data})
        for p in pr.itertuples():
            rows.append({"system": vm, "bandwidth": source, "triad_gbs": gbs,
                         "region": p.region, "billing": p.billing,
                         "jpy_per_node_hour": p.jpy_per_hour,
                         "gbs_per_1000_jpy_h": round(1000 * gbs / p.jpy_per_hour, 2)
                         if p.jpy_per_hour > 0 else math.nan, "data": data})
    flow = read_reference(ref_dir, "flow_systems.csv", ["system", "cpus_per_node",
                          "memory_bandwidth_theoretical_gbs_per_cpu"], section.problems)
    for f in flow.itertuples():
        gbs = round(float(f.memory_bandwidth_theoretical_gbs_per_cpu) * float(f.cpus_per_node),
                    2)
        fee = prices.lookup(f.system, "onprem_fee")
        rows.append({"system": f.system, "bandwidth": "theoretical (not measured)",
                     "triad_gbs": gbs, "region": "on-premise", "billing": "onprem_fee"
                     if not math.isnan(fee) else NO_PRICE, "jpy_per_node_hour": fee,
                     "gbs_per_1000_jpy_h": round(1000 * gbs / fee, 2) if fee > 0 else math.nan,
                     "data": "data/reference/flow_systems.csv"})
    table_entry(section, rows, fig_dir, "cost_triad",
                 "Cost-performance: STREAM Triad GB/s per 1,000 JPY per node-hour",
                 "Best Triad bandwidth of each VM (measured here: its newest complete run, else "
                 "its newest; else the study's best) divided by its price per node-hour for "
                 "each billing and region "
                 "(data/reference/prices_vm.csv, run parameters' vm_price); Flow's subsystems at "
                 "their theoretical bandwidth and node-hour fee. Higher is better.")
    priced = [r for r in rows if not math.isnan(r["gbs_per_1000_jpy_h"])]
    shown = [r for r in priced if r["region"] in (region, "on-premise")]
    in_region = {r["system"] for r in shown}
    # a VM priced only elsewhere (its own vm_price) is drawn at that price, its region named
    shown += [r | {"system": f"{r['system']}, {r['region']}"} for r in priced
              if r["system"] not in in_region]
    unpriced = list(dict.fromkeys(r["system"] for r in rows if r["billing"] == NO_PRICE))
    if shown:
        style.apply_style()
        fig, ax = plt.subplots(figsize=(10, 0.42 * len(shown) + 1.9))
        cost_performance(shown, ax)
        ax.set_title(f"Cost-performance of memory bandwidth, {region} prices",
                     fontsize=12)
        caption = ("Data: cost_triad.csv (Triad: runs under data/runs and "
                   "data/reference/triad_best.csv; prices: data/reference/prices_vm.csv and "
                   "prices_onprem.csv; Flow bandwidth: data/reference/flow_systems.csv, "
                   "theoretical, not a STREAM result). Dots on a log axis: equal distances are "
                   "equal ratios. Other regions' prices are in the table"
                   + (f"; not drawn, no price known: {', '.join(unpriced)}." if unpriced
                      else "."))
        section.entries.append(figure_entry(fig, fig_dir, "cost_triad",
                                             "Cost-performance of memory bandwidth", caption,
                                             sorted({r["data"] for r in shown}), show))
    return rows


def _biccg_costs(section: Section, solves: pd.DataFrame, prices: price_tables.Prices,
                 fig_dir: Path) -> list[dict]:
    """Time and cost of one solve per VM, problem, layout and node count."""
    rows = []
    for r in solves.itertuples():
        pr = _prices_for(prices, r.vm)
        base = {"vm": r.vm, "problem": r.problem, "solver": r.label, "nodes": r.nodes,
                "cores": r.cores, "solve_s": round(r.value, 4), "data": r.data}
        if pr.empty:
            rows.append(base | {"billing": NO_PRICE, "region": "", "jpy_per_solve": math.nan})
        for p in pr.itertuples():
            rows.append(base | {"billing": p.billing, "region": p.region,
                                "jpy_per_solve": round(price_tables.job_cost(
                                    p.jpy_per_hour, r.nodes, r.value / 3600), 4)})
    table_entry(section, rows, fig_dir, "cost_biccg", "Cost and time per BICCG solve",
                 "Median solve time of each VM's newest complete run (else its newest), per "
                 "problem, layout and node count, and its cost: nodes x hours x price per "
                 "node-hour for each billing and region known for that VM (no price: said so).")
    return rows


def _spot(section: Section, prices: price_tables.Prices, fig_dir: Path, vm: str, region: str,
          nodes: int, work_h: float, interval_h: float, restart_h: float,
          rates: list[float], show: bool) -> list[dict]:
    """Expected time and cost of a checkpointed job on spot VMs against the eviction rate."""
    spot = prices.lookup(vm, "spot", region)
    payg = prices.lookup(vm, "payg", region)
    rows = []
    for lam in rates:
        e = spot_expected(work_h, interval_h, lam, restart_h)
        sim = spot_simulate(work_h, interval_h, lam, restart_h, samples=4000)
        cost_of = lambda h: nodes * h * spot  # noqa: E731
        rows.append({"vm": vm, "region": region, "nodes": nodes, "work_h": work_h,
                     "checkpoint_every_h": interval_h, "restart_h": round(restart_h, 4),
                     "evictions_per_h": lam, "expected_evictions": round(e["evictions"], 3),
                     "expected_time_h": round(e["time_h"], 3),
                     "time_p10_h": round(float(np.percentile(sim["time_h"], 10)), 3),
                     "time_p90_h": round(float(np.percentile(sim["time_h"], 90)), 3),
                     "expected_cost_jpy": round(cost_of(e["billed_h"]), 1),
                     "cost_p10_jpy": round(cost_of(float(np.percentile(sim["billed_h"], 10))), 1),
                     "cost_p90_jpy": round(cost_of(float(np.percentile(sim["billed_h"], 90))), 1),
                     "payg_cost_jpy": round(nodes * work_h * payg, 1),
                     "data": "data/reference/prices_vm.csv"})
    table_entry(section, rows, fig_dir, "cost_spot",
                 f"Spot VMs: expected time and cost of a {work_h:g}-hour job on {nodes} {vm}",
                 f"A job of {work_h:g} hours on {nodes} nodes, checkpointed every "
                 f"{interval_h:g} h, requeued {restart_h * 60:.0f} min after each eviction "
                 "(the study's ~5 min from submission to start); evictions a Poisson process "
                 f"of the given rate. Expected values from the closed form, 10th-90th "
                 f"percentiles from 4,000 simulated runs; spot and pay-as-you-go prices of "
                 f"{vm} in {region} (data/reference/prices_vm.csv).")
    if rows and not math.isnan(spot):
        style.apply_style()
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
        x = [r["evictions_per_h"] for r in rows]
        a1.plot(x, [r["expected_time_h"] for r in rows], "-o", label="expected")
        a1.fill_between(x, [r["time_p10_h"] for r in rows], [r["time_p90_h"] for r in rows],
                        alpha=0.25, label="10th-90th percentile")
        a1.set_xlabel("evictions per hour")
        a1.set_ylabel("time to finish (h)")
        a1.legend()
        a2.plot(x, [r["expected_cost_jpy"] for r in rows], "-o", label="spot, expected")
        a2.fill_between(x, [r["cost_p10_jpy"] for r in rows], [r["cost_p90_jpy"] for r in rows],
                        alpha=0.25, label="spot, 10th-90th percentile")
        a2.axhline(rows[0]["payg_cost_jpy"], ls="--", color="0.3", label="pay-as-you-go")
        a2.set_xlabel("evictions per hour")
        a2.set_ylabel("cost (JPY)")
        a2.yaxis.set_major_formatter(lambda v, _: f"{v:,.0f}")  # 17,500, not 17500
        a2.set_ylim(bottom=0)
        a2.legend()
        fig.suptitle(f"Spot {vm} ({region}): {nodes} nodes, {work_h:g} h of work, "
                     f"checkpoint every {interval_h:g} h", fontweight="bold")
        caption = ("Data: cost_spot.csv (model in "
                   "burstbench/cost/spot.py; prices "
                   "data/reference/prices_vm.csv).")
        section.entries.append(figure_entry(
            fig, fig_dir, "cost_spot", "Spot VMs: time and cost against the eviction rate",
            caption, ["data/reference/prices_vm.csv"], show))
    return rows


def cost_report(runs_dir: Path | str = "", reference_dir: Path | str = "",
                figures_dir: Path | str = "", usd_jpy: float = 145.0, region: str = "East US",
                spot_vm: str = "HB120rs_v3", job_nodes: int = 4, job_hours: float = 10.0,
                checkpoint_h: float = 1.0, restart_h: float = 5 / 60,
                eviction_rates: list[float] | None = None, show: bool = False) -> Section:
    """Every cost table and figure (see the module docstring)."""
    section = Section("cost")
    runs = paths.runs_dir(runs_dir)
    ref_dir = Path(reference_dir) if reference_dir else paths.reference_dir()
    fig_dir = paths.figures_dir(figures_dir)
    merits = all_merits(runs, ref_dir, section.problems)  # test runs are never priced
    _published_tables(section, ref_dir, fig_dir)
    measured = [r for m in merits for r in m.runs]
    prices = price_tables.load_prices(ref_dir, usd_jpy, _run_prices(measured))
    section.problems += prices.problems
    root = paths.project_root()
    for vm in sorted({r["vm"] for r in measured}):
        if _prices_for(prices, vm).empty:
            section.problems.append(f"VM '{vm}' has no known price: it is a machine measured "
                                    f"with this project ({paths.rel_path(runs / vm, root)}/, "
                                    "the `vm` label of "
                                    "its params file), not an Azure offer, so the cost tables "
                                    "leave it out; give vm_price in its parameters or add it "
                                    "to data/reference/prices_vm.csv to price it")
    _triad_costs(section, merit(merits, "memory_bandwidth_gbs"), prices, ref_dir, fig_dir,
                 region, show)
    solves = merit(merits, "solve_time_s")
    _biccg_costs(section, newest(solves), prices, fig_dir)
    _spot(section, prices, fig_dir, spot_vm, region, job_nodes, job_hours, checkpoint_h,
          restart_h, eviction_rates or [0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0], show)
    return section


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
    style.apply_style()
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
        ax.annotate(style.plain_number(r[value]), (r[value], y), xytext=(7, 0),
                    textcoords="offset points", va="center", fontsize=9)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([f"{r['system']} ({BILLING_NAMES.get(r['billing'], r['billing'])})"
                        for r in rows], fontsize=9)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xscale("log")
    if rows:
        lo, hi = rows[0][value], rows[-1][value]
        ax.set_xlim(lo / 1.6, hi * 2.2)  # room for the value labels right of the dots
        style.plain_log_axis(ax.xaxis, lo, hi)
    ax.set_xlabel(xlabel + " (log scale; higher is better)", fontsize=10)
    ax.tick_params(axis="x", labelsize=9)
    ax.grid(axis="y", color="0.92")
    ax.legend(loc="upper left", fontsize=9, frameon=True)
    return ax
