"""The burst decision's section of the report (notebook 190, after the cost tables): the time
model's validation (predicted against measured solves, the error stated), the decision table
and figure (per job class: time to result and whole cost on every VM, region and billing, the
same job on Flow, the queue wait on Flow above which the VM is sooner) and, from those
numbers, what would have been chosen for each job class and why.

Prices, storage tiers, transfer prices and Flow's fees come from data/reference/ (their
sources in data/reference/README.md); the model and its assumptions are
burstbench/cost/predict.py, the job's cost burstbench/cost/job.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from burstbench.core import paths
from burstbench.core.merits import Merits
from burstbench.core.reference import read_reference
from burstbench.cost import decision, job
from burstbench.cost import prices as cost
from burstbench.cost.predict import Problem
from burstbench.registry import benchmarks
from burstbench.report import style
from burstbench.report.sections import Entry, Section, figure_entry, table_entry

#: The job classes of the decision: the study's Poisson problem on 1, 2, 4 and 8 nodes, and
#: G3_circuit (1 node), priced where its iterations were measured here or given.  G3_PROXY
#: (kernels_ext.biccg.mtx --write-poisson 1259 1259 1) is of its size, for validating the
#: model on a matrix file; at 6-8 iterations it says nothing of G3_circuit's count.
STUDY_NODES = (1, 2, 4, 8)
G3 = {"name": "G3_circuit", "n": 1_585_478, "nnz": 7_660_826}
G3_PROXY = "poisson2d_1259"


def reference_inputs(ref_dir: Path, region_names: list[str], problems: list[str]
                     ) -> tuple[list[job.Tier], dict[str, float], float]:
    """(ANF tiers of the single-encryption price in `region_names[0]`, egress JPY per GB by
    region, Flow's storage JPY per TB-month) from prices_storage.csv and
    anf_throughput.csv."""
    st = read_reference(ref_dir, "prices_storage.csv", ["item", "tier", "encryption", "region",
                                                        "quantity", "quantity_unit", "price",
                                                        "currency"], problems)
    tp = read_reference(ref_dir, "anf_throughput.csv", ["tier", "capacity_tib",
                                                        "throughput_mib_s"], problems)
    tiers = []
    for t in tp.itertuples():
        p = st[(st["tier"] == t.tier) & (st["encryption"] == "single")
               & (st["region"] == region_names[0]) & (st["quantity_unit"] == "TiB-month")]
        if p.empty:
            problems.append(f"Azure NetApp Files {t.tier} has no price in {region_names[0]}: "
                            "left out")
            continue
        tiers.append(job.Tier(t.tier, float(t.throughput_mib_s) / float(t.capacity_tib),
                              float(p["price"].iloc[0]) / float(p["quantity"].iloc[0])))
    egress = {}
    for r in st[st["item"] == "data_transfer_out"].itertuples():
        per = {"TB": 1000.0, "GB": 1.0}.get(str(r.quantity_unit))
        if per:
            egress[r.region] = float(r.price) / (float(r.quantity) * per)
    flow = st[st["item"] == "flow_storage"]
    flow_tb = float(flow["price"].iloc[0]) / float(flow["quantity"].iloc[0]) if len(flow) \
        else math.nan
    return tiers, egress, flow_tb


def wan_between_regions(ref_dir: Path, problems: list[str]) -> float:
    """MiB/s of the Gfarm-on-Azure slides' gfrep between two regions: the median of their
    tries (7.8 GB in 53-82 s): the published figure for moving a job's data between sites."""
    ref = read_reference(ref_dir, "gfarm_azure_gfrep.csv", ["between", "seconds", "size_gb"],
                         problems)
    d = ref[ref["between"].astype(str).str.startswith("between regions")]
    if d.empty:
        return math.nan
    return float((d["size_gb"] * 1e9 / d["seconds"]).median() / (1 << 20))


def job_classes(merits: list[Merits], data: job.Data, solves: int, g3_iterations: float,
                user: dict) -> tuple[list[decision.JobClass], list[str]]:
    """The study's Poisson job on 1-8 nodes, a G3_circuit-sized matrix, the user's job."""
    notes, out = [], []
    for n in STUDY_NODES:
        out.append(decision.JobClass(f"Poisson 256x256x512, {n} node(s)", n, data,
                                     Problem.poisson(256, 256, 512), solves))
    g3 = decision.merit(merits, "iterations")
    real = g3[g3["problem"].astype(str).str.startswith(G3["name"])] if len(g3) else g3
    if g3_iterations:
        it, how = float(g3_iterations), "iterations given (g3_iterations)"
    elif len(real):
        it, how = float(real["value"].median()), "G3_circuit's iterations measured here"
    else:
        it, how = math.nan, ("G3_circuit not measured here and no g3_iterations given: its "
                             "iteration count is unknown (the slab of its size, "
                             f"{G3_PROXY}, is far better conditioned), so it is not priced")
    out.append(decision.JobClass("G3_circuit-sized matrix, 1 node", 1, data, Problem(
        G3["name"], G3["n"], G3["nnz"]), solves, it if it == it else None, note=how))
    if not it == it:
        notes.append(f"G3_circuit-sized matrix: {how}")
    if user:
        p = user.get("problem") or {}
        problem = (Problem.poisson(*p["poisson"]) if "poisson" in p else
                   Problem(user.get("name", "user job"), int(p["n"]), int(p["nnz"]))
                   if {"n", "nnz"} <= set(p) else None)
        udata = job.Data(user.get("input_gb", data.input_gb),
                         user.get("output_gb", data.output_gb),
                         user.get("data_months", data.months))
        for n in user.get("nodes", [1]):
            out.append(decision.JobClass(
                f"{user.get('name', 'user job')}, {n} node(s)", n, udata, problem,
                user.get("solves", solves), p.get("iterations"),
                user.get("flow_node_hours")))
    return out, notes


def decision_report(runs_dir: Path | str = "", reference_dir: Path | str = "",
                    figures_dir: Path | str = "", usd_jpy: float = 145.0,
                    region: str = "East US", model_reference: dict | None = None,
                    flow_system: str = "Flow Cloud System", flow_fraction: float = 203 / 256,
                    queue_waits_h: list[float] | None = None, deploy_minutes: float = 5,
                    wan_mib_s: float = 0, job_solves: int = 100,
                    job_input_gb: float = 10.0, job_output_gb: float = 30.0,
                    job_data_months: float = 1.0, g3_iterations: float = 0,
                    user_job: dict | None = None, checkpoint_h: float = 1.0,
                    restart_h: float = 5 / 60, spot_evictions_per_h: float = 0.1,
                    show: bool = False) -> Section:
    """Every decision table and figure (see the module docstring).  `wan_mib_s` 0: the
    Gfarm-on-Azure slides' replication between two regions (their median).  ValueError,
    one line, for a job described wrong (no size, a data size that is not positive)."""
    section = Section("decision")
    runs = paths.runs_dir(runs_dir)
    ref_dir = Path(reference_dir) if reference_dir else paths.reference_dir()
    fig_dir = paths.figures_dir(figures_dir)
    merits = [s.merits(runs, ref_dir) for s in benchmarks().values() if s.merits is not None]
    for m in merits:
        section.problems += [p for p in m.problems if p not in section.problems]
    machine_of = decision.machines(merits, ref_dir, flow_fraction, section.problems)
    reference = model_reference or {"vm": "local", "problem": "poisson128x128x128",
                                    "layout": "2x1"}
    try:
        model = decision.fit(merits, machine_of, reference)
    except ValueError as exc:
        section.problems.append(f"no burst decision: {exc}")
        return section
    section.entries.append(_validation(section, model, fig_dir, show))
    data = job.Data(job_input_gb, job_output_gb, job_data_months)
    jobs, notes = job_classes(merits, data, job_solves, g3_iterations, user_job or {})
    section.problems += notes
    run_prices = [{"vm": r["vm"], "region": (r["params"].get("vm_price") or {}).get(
        "region") or "(run)", "billing": b, "price_per_hour": r["params"]["vm_price"][b],
        "currency": r["params"]["vm_price"].get("currency", "JPY"),
        "source": f"vm_price of run {r['run_id']}"}
        for r in {(r["vm"], r["run_id"]): r for m in merits for r in m.runs}.values()
        for b in ("payg", "spot") if b in (r["params"].get("vm_price") or {})]
    prices = cost.load_prices(ref_dir, usd_jpy, run_prices)
    tiers, egress, flow_tb = reference_inputs(ref_dir, [region], section.problems)
    wan_mib_s = wan_mib_s or wan_between_regions(ref_dir, section.problems)
    staging = {r: wan_mib_s for r in egress}
    rows = decision.decide(jobs, machine_of, model, prices, tiers, egress, staging,
                           flow_system, flow_tb, {"checkpoint_h": checkpoint_h,
                                                  "restart_h": restart_h,
                                                  "evictions_per_h": spot_evictions_per_h},
                           deploy_minutes / 60, decision.storage_rates(merits))
    _decision_tables(section, rows, model, jobs, fig_dir, flow_system, wan_mib_s,
                     deploy_minutes, spot_evictions_per_h)
    section.entries.append(_decision_figure(rows, jobs, region, flow_system,
                                            queue_waits_h or [0, 1, 2, 4, 8, 12, 24, 48],
                                            fig_dir, show))
    section.entries.append(_choices(rows, jobs, region, flow_system, model, fig_dir))
    return section


def _validation(section: Section, model: decision.Model, fig_dir: Path, show: bool) -> Entry:
    """Predicted against measured solve times, log-log, the fitted one marked."""
    v = model.validation
    table_entry(section, [{
        "vm": r.vm, "problem": r.problem, "layout": r.layout, "iterations": int(r.iterations),
        "measured_s": round(r.measured_s, 4), "predicted_s": round(r.predicted_s, 4),
        "error": round(r.error, 3), "fitted_here": bool(r.reference), "data": r.data}
        for r in v.itertuples()], fig_dir, "biccg_model_validation",
        "BICCG time model: predicted against measured solves",
        "Every measured solve of the C solver (median of its repetitions, each VM's runs), "
        "predicted by burstbench/cost/predict.py with the efficiency fitted on the one "
        "marked fitted_here; error = predicted / measured - 1. The model takes each run's "
        "own Triad where it measured one.")
    style.apply_style()
    fig, ax = plt.subplots(figsize=(7.5, 6.2))
    lo, hi = model.error_range
    span = [v["measured_s"].min() / 1.5, v["measured_s"].max() * 1.5]
    ax.plot(span, span, color="0.3", lw=1, label="predicted = measured")
    if not math.isnan(lo):
        ax.fill_between(span, [s * (1 + lo) for s in span], [s * (1 + hi) for s in span],
                        color="0.85", label=f"the validation's range, {lo:+.0%} to {hi:+.0%}")
    problems = sorted(set(v["problem"]))
    colors = dict(zip(problems, style.palette(len(problems))))
    markers = {"1x1": "o", "1x2": "s", "2x1": "^"}
    for r in v.itertuples():
        lay = r.layout.split()[-1]
        ax.scatter(r.measured_s, r.predicted_s, color=colors[r.problem],
                   marker=markers.get(lay, "D"), s=90 if r.reference else 36,
                   edgecolor="black" if r.reference else "none", zorder=3,
                   label=f"{r.problem}" if lay == "2x1" and not r.reference else None)
    for lay, mk in markers.items():
        ax.scatter([], [], marker=mk, color="0.4", label=f"layout {lay} (ranks x threads)")
    ax.scatter([], [], marker="o", facecolor="none", edgecolor="black", s=90,
               label="fitted on this solve")
    ax.set(xscale="log", yscale="log", xlim=span, ylim=span, xlabel="measured solve time (s)",
           ylabel="predicted solve time (s)")
    handles, labels = ax.get_legend_handles_labels()
    keep = dict(zip(labels, handles))
    ax.legend(keep.values(), keep.keys(), fontsize=7, loc="upper left", frameon=True)
    med = float(v.loc[~v["reference"], "error"].abs().median()) if (~v["reference"]).any() \
        else math.nan
    ax.set_title(f"BICCG model: efficiency {model.efficiency:.2f} of Triad, median |error| "
                 f"{med:.0%}")
    others = v[~v["reference"]]
    caption = (f"Data: figures/biccg_model_validation.csv ({len(v)} measured solves: "
               f"{', '.join(problems)}; runs under data/runs). The model (memory traffic at "
               f"{model.efficiency:.2f} x the Triad of the cores used, plus halo and "
               f"reductions priced by the ping-pong) was fitted on one solve "
               f"({model.reference['problem']}, {model.reference['label']}, "
               f"{model.reference['vm']}) and predicts the others within "
               f"{others['error'].min():+.0%} to {others['error'].max():+.0%} (median "
               f"|error| {med:.0%}); solves of at least {decision.MIN_SOLVE_S:g} s, the "
               f"decision's scale, within {lo:+.0%} to {hi:+.0%}, the range its tables carry. "
               "Most of it is this VM: its memory bandwidth alternates between two states "
               "over minutes (1-thread Triad 15-40 GB/s between runs), and a run's Triad "
               "and its solves are minutes apart. Not validated here: more than one node "
               "(no second machine was measured).")
    return figure_entry(fig, fig_dir, "biccg_model_validation",
                        "BICCG time model: predicted against measured", caption,
                        sorted(set(v["data"])), show)


#: The decision table's columns, rounded as printed.
ROUND = {"compute_h": 3, "time_h": 3, "time_low_h": 3, "time_high_h": 3, "jpy": 0,
         "jpy_low": 0, "jpy_high": 0, "flow_compute_h": 3, "flow_jpy": 0,
         "break_even_wait_h": 3, "break_even_low_h": 3, "break_even_high_h": 3,
         "extra_jpy": 0, "storage_jpy": 0, "egress_jpy": 0, "compute_jpy": 0,
         "staging_h": 3, "staging_mib_s": 1, "price_per_node_h": 1}


def _decision_tables(section: Section, rows: pd.DataFrame, model: decision.Model,
                     jobs: list[decision.JobClass], fig_dir: Path, flow_system: str,
                     wan_mib_s: float, deploy_minutes: float, evictions: float) -> None:
    cols = ["job", "nodes", "vm", "region", "billing", "status", "time_h", "time_low_h",
            "time_high_h", "jpy", "jpy_low", "jpy_high", "compute_jpy", "storage",
            "storage_jpy", "egress_jpy", "staging_h", "staging_mib_s", "staging_limit",
            "flow_compute_h", "flow_jpy",
            "break_even_wait_h", "break_even_low_h", "break_even_high_h", "extra_jpy", "how"]
    out = rows.reindex(columns=cols).copy()
    for c, d in ROUND.items():
        if c in out:
            out[c] = pd.to_numeric(out[c], errors="coerce").round(d)
    lo, hi = model.error_range
    table_entry(section, out.to_dict("records"), fig_dir, "burst_decision",
                "Burst decision: time to result and whole cost per job, VM, region and billing",
                f"Predicted, none of it measured: per job class, the time to result on "
                f"each VM by the time model (deployment "
                f"{deploy_minutes:g} min, staging in and out at {wan_mib_s:g} MiB/s over the "
                "WAN or the VM's own storage bandwidth where it was measured slower "
                "(staging_limit), the "
                f"solves, spot with {evictions:g} evictions per hour) and its whole cost in JPY "
                "(node-hours, Azure NetApp Files sized for the staging throughput, egress of "
                f"the output), each with the range of the time model's error ({lo:+.0%} to "
                f"{hi:+.0%} on solves of at least {decision.MIN_SOLVE_S:g} s, "
                "figures/biccg_model_validation.csv: a prediction p stands for p / (1 + e)); "
                "the same job on "
                f"{flow_system} (its fee x nodes x hours, its storage fee); break_even_wait_h: "
                "the queue wait on Flow above which the VM returns the result sooner "
                "(negative: sooner even with no wait); extra_jpy: the VM's cost less Flow's. "
                "A VM with no price, no Triad, or no InfiniBand for several nodes is listed "
                "with its reason, never priced.")


def _decision_figure(rows: pd.DataFrame, jobs: list[decision.JobClass], region: str,
                     flow_system: str, waits: list[float], fig_dir: Path, show: bool) -> Entry:
    """Per job class: time to result against Flow's queue wait; Flow a rising line, each
    VM's pay-as-you-go option in `region` a flat band (the model's range); where they cross,
    the break-even wait."""
    priced = rows[(rows["status"] == "priced") & (rows["region"] == region)
                  & (rows["billing"] == "payg")]
    names = [jc.name for jc in jobs if (priced["job"] == jc.name).any()]
    cols = min(3, max(1, len(names)))
    nrows = max(1, -(-len(names) // cols))
    style.apply_style()
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.7 * nrows + 0.8),
                             squeeze=False)
    vms = sorted(set(priced["vm"]))
    colors = dict(zip(vms, style.palette(len(vms))))
    x = np.geomspace(1 / 60, max(max(waits), 1.0), 200)  # a minute to the longest wait
    for ax, name in zip(axes.flat, names):
        d = priced[priced["job"] == name]
        flow_h = float(d["flow_compute_h"].iloc[0])
        ax.plot(x, x + flow_h, color="black", lw=1.6, label=f"{flow_system}: wait + compute")
        for r in d.itertuples():
            ax.axhspan(r.time_low_h, r.time_high_h, color=colors[r.vm], alpha=0.15)
            ax.axhline(r.time_h, color=colors[r.vm], lw=1.4,
                       label=f"{r.vm} ({r.jpy:,.0f} JPY)")
            if x[0] <= r.break_even_wait_h <= x[-1]:
                ax.plot([r.break_even_wait_h], [r.time_h], "o", color=colors[r.vm], ms=5)
        low = min(flow_h, d["time_low_h"].min()) / 1.5
        ax.set(xscale="log", yscale="log", xlim=(x[0], x[-1]),
               ylim=(low, max(x[-1] + flow_h, d["time_high_h"].max()) * 1.5),
               xlabel="queue wait on Flow", ylabel="time to result")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(FixedLocator(WAIT_TICKS_H))
            axis.set_major_formatter(FuncFormatter(lambda h, _: _tick(h)))
            axis.set_minor_locator(NullLocator())
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=6, loc="upper left", frameon=True)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    fig.suptitle(f"When bursting pays (predicted): pay-as-you-go in {region} against "
                 f"{flow_system}'s queue", fontweight="bold")
    caption = ("Data: figures/burst_decision.csv. Every time here is predicted by the time "
               "model (figures/biccg_model_validation.png), none measured. A VM's time to "
               "result is flat (it does not "
               "wait in Flow's queue: deployment, staging and computing), its band the time "
               "model's error; Flow's is the queue wait plus its predicted computing. A dot "
               "marks the break-even wait. Both axes are logarithmic, from a minute to "
               f"{_hours(float(x[-1]))}. Legend: each VM's whole cost of the job.")
    return figure_entry(fig, fig_dir, "burst_decision", "When bursting pays", caption,
                        ["figures/burst_decision.csv"], show)


def _choices(rows: pd.DataFrame, jobs: list[decision.JobClass], region: str,
             flow_system: str, model: decision.Model, fig_dir: Path) -> Entry:
    """From the numbers: per job class, the fastest and the cheapest option, the break-even
    wait against Flow, and what it costs more (or less)."""
    lines = []
    for jc in jobs:
        d = rows[(rows["job"] == jc.name) & (rows["status"] == "priced")]
        if d.empty:
            why = rows.loc[rows["job"] == jc.name, "status"].dropna().unique()
            lines.append(f"- **{jc.name}**: nothing priced ({'; '.join(why[:3])})."
                         + (f" {jc.note}." if jc.note else ""))
            continue
        fast = d.sort_values(["time_h", "jpy"], kind="stable").iloc[0]  # ties: the cheaper
        cheap = d.sort_values(["jpy", "time_h"], kind="stable").iloc[0]
        flow_h, flow_jpy = float(d["flow_compute_h"].iloc[0]), float(d["flow_jpy"].iloc[0])
        be = fast["break_even_wait_h"]
        when = ("sooner than Flow even with no queue" if be < 0 else
                f"sooner once Flow's queue is longer than {_hours(be)} "
                f"({_hours(max(0, fast['break_even_low_h']))}-{_hours(fast['break_even_high_h'])})")
        lines.append(
            f"- **{jc.name}**: the fastest is {fast['vm']} {fast['billing']} {fast['region']}, "
            f"{_hours(fast['time_h'])} to the result for {fast['jpy']:,.0f} JPY "
            f"({fast['jpy_low']:,.0f}-{fast['jpy_high']:,.0f}); it is {when}, at "
            f"{fast['extra_jpy']:+,.0f} JPY against {flow_system} ({_hours(flow_h)} of "
            f"computing, {flow_jpy:,.0f} JPY). The cheapest burst is {cheap['vm']} "
            f"{cheap['billing']} {cheap['region']}: {cheap['jpy']:,.0f} JPY, "
            f"{_hours(cheap['time_h'])}; choose it "
            + ("too: it is also the fastest." if cheap.name == fast.name else
               f"when a result {_hours(cheap['time_h'] - fast['time_h'])} later is worth "
               f"{fast['jpy'] - cheap['jpy']:,.0f} JPY less.")
            + (f" {jc.note}." if jc.note else ""))
    text = ("## What would have been chosen\n\n" + "\n".join(lines) + "\n\nEach time carries "
            f"the time model's error ({model.error_range[0]:+.0%} to "
            f"{model.error_range[1]:+.0%}); a spot option's time is its expected time with "
            "evictions. Written from figures/burst_decision.csv.\n")
    from burstbench.core.store import atomic_write

    path = fig_dir / "burst_decision_choices.md"
    atomic_write(path, text)
    return Entry("What would have been chosen, and why", [path.name],
                 "Per job class, from the decision table: the fastest and the cheapest option "
                 "and the queue wait on Flow at which bursting pays.",
                 ["figures/burst_decision.csv"])


#: Where the decision figure's time axes are labelled (hours).
WAIT_TICKS_H = [1 / 60, 10 / 60, 1, 4, 24, 48, 24 * 7]


def _tick(h: float) -> str:
    """An axis label: '1 min', '10 min', '1 h', '4 h', '1 d'."""
    return f"{h * 60:.0f} min" if h < 1 else f"{h:.0f} h" if h < 24 else f"{h / 24:.0f} d"


def _hours(h: float) -> str:
    """'25 min', '2.4 h', '3.1 days': a duration as it is said."""
    if h < 1 / 60:
        return "under a minute"
    if h < 1:
        return f"{h * 60:.0f} min"
    if h < 48:
        return f"{h:.1f} h"
    return f"{h / 24:.1f} days"
