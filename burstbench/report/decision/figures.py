"""The burst decision's figures: the time model's validation (predicted against measured),
P(VM sooner) against Flow's queue wait per job class, and the sensitivity's tornado."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from burstbench.cost.burst import Decision
from burstbench.cost.model import MIN_SOLVE_S, RANKS_PER_NODE, Model
from burstbench.cost.uncertainty import Swing
from burstbench.report import style
from burstbench.report.sections import Entry, Section, figure_entry, table_entry

#: Where the decision figure's wait axis is labelled (hours).
WAIT_TICKS_H = [1 / 60, 10 / 60, 1, 4, 24, 48]


def tick(h: float) -> str:
    """An axis label: '1 min', '10 min', '1 h', '4 h', '1 d'."""
    return f"{h * 60:.0f} min" if h < 1 else f"{h:.0f} h" if h < 24 else f"{h / 24:.0f} d"


def hours(h: float) -> str:
    """'25 min', '2.4 h', '3.1 days', '-13 min': a duration as it is said."""
    if abs(h) < 1 / 60:
        return "under a minute"
    if h < 0:
        return "-" + hours(-h)
    if h < 1 / 60:
        return "under a minute"
    if h < 1:
        return f"{h * 60:.0f} min"
    if h < 48:
        return f"{h:.1f} h"
    return f"{h / 24:.1f} days"


def validation(section: Section, model: Model, fig_dir: Path, show: bool) -> Entry:
    """Predicted against measured solve times, log-log, the fitted one marked; the solves
    that validate the model (burstbench.cost.model: the fitted build, the decision's layout,
    long enough) filled, the others hollow, each listed with why it is not used."""
    v = model.validation
    if "used" not in v:
        v = v.assign(used=True, not_used="", build="")
    for col, fill in (("cpu", ""), ("llc_mib", 0.0), ("working_set_mib", 0.0),
                      ("tier", "memory"), ("predicted_rule_s", np.nan), ("error_rule", np.nan),
                      ("triad_gbs", np.nan), ("triad_beside", False)):
        if col not in v:
            v = v.assign(**{col: fill})
    table_entry(section, [{
        "vm": r.vm, "cpu": r.cpu, "llc_mib": round(r.llc_mib, 1), "problem": r.problem,
        "layout": r.layout, "iterations": int(r.iterations),
        "working_set_mib": round(r.working_set_mib, 1), "tier": r.tier,
        "measured_s": round(r.measured_s, 4), "predicted_s": round(r.predicted_s, 4),
        "error": round(r.error, 3), "predicted_rule_s": round(r.predicted_rule_s, 4),
        "error_rule": round(r.error_rule, 3), "triad_gbs": round(r.triad_gbs, 2),
        "triad_beside": bool(r.triad_beside), "fitted_here": bool(r.reference),
        "used": bool(r.used), "not_used": r.not_used, "build": r.build, "data": r.data}
        for r in v.itertuples()], fig_dir, "biccg_model_validation",
        "BICCG time model: predicted against measured solves",
        "Every measured solve of the C solver (median of its repetitions, each VM's runs), "
        "predicted by burstbench/cost/predict.py with the efficiency fitted on the one "
        "marked fitted_here; error = predicted / measured - 1. Each row names the machine "
        "its run measured (cpu, llc_mib: its last-level cache, from the run's provenance) "
        "and is predicted from the Triad its own process measured just before and after "
        "it where it did (triad_beside: biccg_triad_beside), else from its run's own "
        "Triad (triad_gbs: the node's Triad at the rule size used, from memory): "
        "predicted_s with the node's working "
        "set (working_set_mib) at the tier it fits (tier: ladder, the Triad the run "
        "measured at that working set, its points past the cache scaled as triad_gbs; "
        "memory, at STREAM's rule size), predicted_rule_s "
        "with every byte at the rule size's Triad, as the study's VMs are published. used: "
        "the solve is of the fitted build (build: the digest of the solver's C in its "
        "run's provenance), in the layout the decision prices "
        f"({RANKS_PER_NODE} ranks a node) and of at least {MIN_SOLVE_S:g} s: only these make "
        "the model's error band; not_used says why the others do not.")
    bands = model.bands()
    if len(bands):
        table_entry(section, bands.round(3).to_dict("records"), fig_dir, "biccg_model_bands",
                    "BICCG time model: its error band machine by machine",
                    "Per machine (its CPU and last-level cache, as its runs' provenance "
                    "names them): the solves that validate the model (biccg_model_validation"
                    ".csv: used) and their error's range with the memory tiers (the "
                    "decision's) and with every byte at the rule size's Triad; where machines "
                    "disagree, the decision's band (their union) shows it.")
    style.apply_style()
    fig, ax = plt.subplots(figsize=(11, 6.2))  # the legend beside the axes, not over points
    lo, hi = model.error_range
    span = [v["measured_s"].min() / 1.5, v["measured_s"].max() * 1.5]
    ax.plot(span, span, color="0.3", lw=1, label="predicted = measured")
    if model.validated:  # else error_range is (nan, nan)
        ax.fill_between(span, [s * (1 + lo) for s in span], [s * (1 + hi) for s in span],
                        color="0.85", label=f"the error band, {lo:+.0%} to {hi:+.0%}")
    problems = sorted(set(v["problem"]), key=style.natural)
    colors = dict(zip(problems, style.palette(len(problems))))
    markers = {"1x1": "o", "1x2": "s", "2x1": "^"}
    for r in v.itertuples():
        lay = r.layout.split()[-1]
        ax.scatter(r.measured_s, r.predicted_s, marker=markers.get(lay, "D"),
                   s=90 if r.reference else 36,
                   color=colors[r.problem] if r.used else "none",
                   edgecolor="black" if r.reference else colors[r.problem], zorder=3)
    for prob in problems:  # every problem's colour, used or not (its points may all be hollow)
        ax.scatter([], [], marker="s", color=colors[prob], label=prob)
    for lay, mk in markers.items():
        ax.scatter([], [], marker=mk, color="0.4", label=f"layout {lay} (ranks x threads)")
    if any(r.layout.split()[-1] not in markers for r in v.itertuples()):
        ax.scatter([], [], marker="D", color="0.4", label="any other layout")
    ax.scatter([], [], marker="o", facecolor="none", edgecolor="0.4", s=36,
               label="hollow: listed, not used (biccg_model_validation.csv: not_used)")
    ax.scatter([], [], marker="o", facecolor="none", edgecolor="black", s=90,
               label="fitted on this solve")
    ax.set(xscale="log", yscale="log", xlim=span, ylim=span, xlabel="measured solve time (s)",
           ylabel="predicted solve time (s)")
    handles, labels = ax.get_legend_handles_labels()
    keep = dict(zip(labels, handles))
    ax.legend(keep.values(), keep.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0),
              frameon=True)
    others = v[~v["reference"].astype(bool)]
    used = others[others["used"].astype(bool)]
    fitted_on = (f"fitted on one solve ({model.reference['problem']}, "
                 f"{model.reference['label']}, {model.reference['vm']})")
    if model.validated:
        med = float(used["error"].abs().median())
        ax.set_title(f"BICCG model: efficiency {model.efficiency:.2f} of Triad, median "
                     f"|error| {med:.0%} on the solves that validate it")
        checked = (f"{fitted_on} and predicts the {len(used)} solve(s) that validate it (the "
                   f"same build, {RANKS_PER_NODE} ranks a node, at least {MIN_SOLVE_S:g} s) "
                   f"within {lo:+.0%} to {hi:+.0%}, the band the decision draws.")
    else:
        ax.set_title(f"BICCG model: efficiency {model.efficiency:.2f} of Triad, not validated")
        checked = (f"{fitted_on}, the only one measured: no other solve checks it, so its "
                   "error is unknown and the decision's tables carry none (measure BICCG's "
                   "other configurations; after a budget, the same command measures what "
                   "was left)." if others.empty else
                   f"{fitted_on}: no other solve of its build in the decision's layout "
                   "checks it, so its error is unknown and the decision's tables carry none "
                   "(measure BICCG again with this build).")
    builds = others[others["not_used"].astype(str).str.startswith(("another build",
                                                                   "no build"))]
    single = others[others["layout"].astype(str).str.endswith(" 1x1")
                    & (others["measured_s"] >= MIN_SOLVE_S)]
    listed = (f" Listed, not used: {len(others) - len(used)} solve(s), {len(builds)} of them "
              f"from other builds of the solver ({', '.join(sorted(set(builds['data'])))})"
              if len(others) > len(used) else "")
    finding = (f". A separate finding: one rank of one thread (layout 1x1, a layout no "
               f"decision job uses) is predicted {-single['error'].max():.0%} to "
               f"{-single['error'].min():.0%} faster than measured in every run "
               f"({len(single)} solves of at least {MIN_SOLVE_S:g} s; "
               f"{_spread(single[single['build'] == model.reference.get('build')])} on the "
               "fitted build): the model misses it"
               if len(single) and (single["error"] < 0).all() else "")
    fitted_at = model.triad_how or "its run's Triad"
    caption = (f"Data: biccg_model_validation.csv ({len(v)} measured "
               "solves: "
               f"{', '.join(problems)}; runs under data/runs). The model (memory traffic at "
               f"{model.efficiency:.2f} x the Triad of the cores used, fitted at "
               f"{fitted_at}, plus halo and "
               f"reductions priced by the ping-pong) was {checked}{listed}{finding}. The "
               f"fitted build: {model.reference.get('build') or 'not recorded'} (the digest "
               "of the solver's C). Not validated here: more than one node (no run on two or "
               "more nodes was measured).")
    return figure_entry(fig, fig_dir, "biccg_model_validation",
                        "BICCG time model: predicted against measured", caption,
                        sorted(set(v["data"])), show)


def tiers(section: Section, model: Model, fig_dir: Path) -> None:
    """figures/biccg_model_tiers.{csv,md}: the memory tiers checked on the fitted machine,
    solves whose working set fits its last-level cache and solves whose set does not,
    each of the fitted build in the decision's layout (short ones too: a time per
    iteration), predicted with the tiers and at the rule size's Triad alone."""
    v = model.validation
    if not {"cpu", "tier", "ranks_per_node"} <= set(v):
        return
    ref = model.reference
    mine = v[(v["build"] == (ref.get("build") or "")) & (v["ranks_per_node"] == RANKS_PER_NODE)
             & (v["cpu"] == v.loc[v["reference"].astype(bool), "cpu"].iloc[0])]
    if mine.empty:
        return
    table_entry(section, [{
        "cpu": r.cpu, "llc_mib": round(r.llc_mib, 1), "problem": r.problem, "layout": r.layout,
        "working_set_mib": round(r.working_set_mib, 1),
        "fits_llc": bool(r.llc_mib and r.working_set_mib <= r.llc_mib), "tier": r.tier,
        "measured_ms_per_iteration": round(r.measured_s / it, 4),
        "predicted_ms_per_iteration": round(r.predicted_s / it, 4), "error": round(r.error, 3),
        "predicted_rule_ms_per_iteration": round(r.predicted_rule_s / it, 4),
        "error_rule": round(r.error_rule, 3), "triad_gbs": round(r.triad_gbs, 2),
        "triad_beside": bool(r.triad_beside), "fitted_here": bool(r.reference), "data": r.data}
        for r in mine.sort_values("working_set_mib").itertuples()
        for it in [r.iterations / 1e3]],  # ms: seconds over thousands of iterations
        fig_dir, "biccg_model_tiers",
        "BICCG time model's memory tiers, checked on the machine it was fitted on",
        "Each solve of the fitted build in the decision's layout on the fitted machine, "
        "small to large working set a node (working_set_mib; fits_llc: within its "
        "last-level cache as the OS reports it, which a VM shares with the host's other "
        "tenants), its time per iteration measured and predicted: with the tiers (the "
        "Triad the run's ladder measured at that working set) and at the rule size's "
        "Triad alone. Short solves are here, as a time per iteration, not in the error "
        "band.")


def _spread(rows) -> str:
    """'16% to 38% faster' of under-predicted rows, or 'none' where there are none."""
    if not len(rows):
        return "none"
    return f"{-rows['error'].max():.0%} to {-rows['error'].min():.0%} faster"


def decision_figure(decision: Decision, names: list[str], flow_system: str,
                    queue_wait_h: float, fig_dir: Path, show: bool, basis: str = "") -> Entry:
    """Per job class: P(the VM returns the result sooner) against Flow's queue wait for two
    options only, the fastest (the lowest median break-even) and the cheapest (spot
    included; the rest are in the table), over the waits where their break-evens lie; the
    verdict's 10% and 90% lines and the wait asked about.  Sized to be read where JupyterLab
    shows it: 9 inches wide, no text under 9 points."""
    rows = decision.rows
    priced = rows[rows["status"] == "priced"]
    names = [n for n in names if (priced["job"] == n).any()]
    cols = min(2, max(1, len(names)))
    nrows = max(1, -(-len(names) // cols))
    style.apply_style()
    fig, axes = plt.subplots(nrows, cols, figsize=(9.0, 2.9 * nrows + 1.6), squeeze=False)
    shown = {}
    for name in names:
        d = priced[priced["job"] == name]
        fast = d.sort_values(["break_even_p50_h", "jpy"], kind="stable").iloc[0]
        cheap = d.sort_values(["jpy", "break_even_p50_h"], kind="stable").iloc[0]
        shown[name] = [("fastest", fast)] + ([("cheapest", cheap)] if cheap.name != fast.name
                                            else [])
    ends = [v for opts in shown.values() for _, r in opts
            for v in (r.break_even_p10_h, r.break_even_p90_h)] + [queue_wait_h]
    lo = max(1 / 60, min(e for e in ends if e > 0) / 2 if any(e > 0 for e in ends) else 1 / 60)
    hi = max(max(ends) * 2, lo * 10)
    x = np.geomspace(lo, hi, 240)
    colors = {"fastest": "#4878d0", "cheapest": "#d65f5f"}
    for ax, name in zip(axes.flat, names):
        for kind, r in shown[name]:
            be = decision.draws[(name, r.vm, r.region, r.billing, r.storage_scenario)]
            p = np.searchsorted(be, x, side="left") / len(be)
            ax.plot(x, p, color=colors[kind], lw=2.0, ls="-" if kind == "fastest" else "--",
                    label=f"{kind}: {r.vm} {r.billing}, {r.region}, {r.jpy:,.0f} JPY")
        for level in (0.1, 0.9):
            ax.axhline(level, color="0.55", lw=0.8, ls=":")
        ax.axvline(queue_wait_h, color="black", lw=1.0, ls="-.")
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(f"queue wait on {flow_system}", fontsize=10)
        ax.set_ylabel("P(VM sooner)", fontsize=10)
        ticks = [t for t in (1 / 60, 5 / 60, 10 / 60, 20 / 60, 1, 2, 4, 8, 24, 48)
                 if lo <= t <= hi]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda h, _: tick(h)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.tick_params(labelsize=9)
        ax.set_title(name, fontsize=10)
        ax.legend(fontsize=9, loc="lower right", frameon=True)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    fig.suptitle(f"When bursting pays: P(the VM returns the result before {flow_system} "
                 "would), predicted", fontweight="bold", fontsize=11)
    caption = (f"Data: burst_decision.csv (every option). Each curve: the share of "
               f"Monte Carlo draws of every uncertain input (burst_inputs.md) in which "
               "the VM, deployed, staged and computing, is done before Flow's queue wait plus "
               "Flow's computing. Dotted: 10% and 90%, between them undecided; dash-dotted: "
               f"the wait asked about ({hours(queue_wait_h)}). Costs are medians. {basis}")
    return figure_entry(fig, fig_dir, "burst_decision", "When bursting pays", caption,
                        ["burst_decision.csv"], show, caption_size=9)


def tornado(swings: dict[str, tuple[str, float, list[Swing]]], fig_dir: Path,
            show: bool, basis: str = "") -> Entry:
    """Per job class, its leading option's break-even wait as each input goes from its low
    to its high end (the others at their modes), the inputs ranked by that swing."""
    names = list(swings)
    style.apply_style()
    fig, axes = plt.subplots(len(names), 1, figsize=(9.0, 1.9 * len(names) + 1.4),
                             squeeze=False)
    for ax, name in zip(axes.flat, names):
        option, base, ss = swings[name]
        ss = [s for s in ss if s.swing > 0][::-1] or ss[:1]
        ys = np.arange(len(ss))
        for y, s in zip(ys, ss):
            lo, hi = sorted((s.at_low, s.at_high))
            ax.barh(y, (hi - lo) * 60, left=lo * 60, color="#4878d0" if s.at_high >= s.at_low
                    else "#ee854a", height=0.6)
        ax.axvline(base * 60, color="black", lw=0.9)
        ax.set_yticks(ys, [s.name for s in ss], fontsize=9)
        ax.tick_params(labelsize=9)
        ax.set_title(f"{name}: {option}", fontsize=10)
        ax.set_xlabel("break-even queue wait (min)", fontsize=10)
    fig.suptitle("What decides the break-even wait: each input over its range, the others "
                 "at their modes", fontweight="bold", fontsize=11)
    caption = ("Data: burst_sensitivity.csv. Blue: the wait rises "
               "from the input's low "
               "to its high end; orange: it falls. The black line: every input at its mode. "
               f"Predicted, not measured. {basis}")
    return figure_entry(fig, fig_dir, "burst_sensitivity", "What decides the break-even wait",
                        caption, ["burst_sensitivity.csv"], show,
                        caption_size=9)
