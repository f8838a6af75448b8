"""The replay's section of the report (notebook 150): a centre's log replayed against the burst
decision.  Figures: every policy's hours saved against JPY spent beside the perfect policy's,
and the predicted wait's calibration.  Tables: every VM x policy (replay_policies), the
policies to choose between on the leading VM with the one to pick (replay_choices), the
calibration (replay_calibration) and the predictor's steps against each other
(replay_predictors).  Summaries only: the per-job predictions are the command's
``--predictions``."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from burstbench.core import paths, store
from burstbench.replay import logs, run
from burstbench.replay.stays import ABOUT as SIM_ABOUT
from burstbench.report import style
from burstbench.report.sections import Section, figure_entry, table_entry

#: The shared KTH SP2 log, relative to the project root.
KTH_LOG = "../shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz"
#: The pick: the probability policy that saves the most hours with at most this share of
#: its burst jobs made later.
MAX_LATER = 0.10
#: A pick's share made later is read on at least this many burst jobs: 10% later is one
#: job in ten, so on fewer a share of 0% says nothing (a 50-job log's only burst job
#: was its pick).
MIN_PICK_JOBS = 10


def log_path(log: str) -> Path:
    """The log's path: as given where absolute, else relative to the project root."""
    p = Path(log)
    return p if p.is_absolute() else paths.project_root() / p


def policy_label(row: dict | pd.Series) -> str:
    """'P(sooner) >= 0.9', 'P(sooner) >= 0.9, again while it waits', 'expected saving >= 64 h
    x P(later)', 'median wait > 1 h', 'queue state > 1 h', 'perfect'."""
    if row["policy"] == "probability":
        return f"P(sooner) >= {row['p_sooner_min']:g}"
    if row["policy"] == "watch":
        return f"P(sooner) >= {row['p_sooner_min']:g}, again while it waits"
    if row["policy"] == "gain":
        return f"expected saving >= {row['gain_h']:g} h x P(later)"
    if row["policy"] == "threshold":
        return f"predicted median wait > {run.hours_label(row['threshold_h'])}"
    if row["policy"] == "queue state":
        return f"queue state > {run.hours_label(row['threshold_h'])}"
    return "perfect (knows which come back sooner)"


def pick(rows: pd.DataFrame) -> dict:
    """The policy a director should pick: of the probability policies
    (burstbench.replay.run.PICKABLE says why not the gain ones) that burst at least
    MIN_PICK_JOBS jobs, make at most MAX_LATER of them later and save hours (their own and
    the stays'), the one that saves the most, on the VM where it does (the cheaper at a
    tie); where none does, the one that makes the fewest later, of those that burst
    MIN_PICK_JOBS where any does (:func:`picked` tells which)."""
    d = rows[rows["policy"].isin(run.PICKABLE)].copy()
    d["total_h"] = d["hours_saved"] + d["stays_hours_saved"]
    ok = d[np.array([picked(r) for r in d.to_dict("records")], dtype=bool)]
    if len(ok):
        best = ok.sort_values(["total_h", "jpy_spent"], ascending=[False, True],
                              kind="stable").iloc[0]
    else:
        d["few"] = d["jobs_burst"] < MIN_PICK_JOBS
        best = d.sort_values(["few", "share_made_later", "total_h"],
                             ascending=[True, True, False], kind="stable",
                             na_position="last").iloc[0].drop("few")
    return best.to_dict()


def describe(r: run.Replayed, source: str) -> str:
    """The log, what was dropped, how the wait was predicted and the queue re-simulated, and
    how the VM side was priced: said in every caption."""
    lg = r.log
    dropped = "; ".join(lg.notes) if lg.notes else "no job dropped"
    classes = "; ".join(
        f"{c.name}: {c.data.input_gb:g} GB in, {c.data.output_gb:g} GB out"
        + (f", speed {c.speed}" if c.speed != "memory" else "") for c in r.classes)
    ack = f" Acknowledgement (as its header asks): {lg.acknowledge}." if lg.acknowledge else ""
    cal = r.calibration.set_index("quantile")["coverage"]
    sim = r.simulation
    unit = r.queue_unit
    return (f"Log: {source} ({lg.fmt}), {lg.machine}: {len(lg.jobs):,} jobs replayed "
            f"({dropped}).{ack} Each job keeps its node count ({r.procs_per_node:g} "
            f"processor(s) per node: {r.procs_how}) and run time, as on {r.system} "
            f"({r.fee:g} JPY per node-hour, its node Triad); the queue counts {unit}, "
            f"{r.capacity:,} of them ({r.capacity_how}). The wait at each submit, predicted "
            f"from what was known then: {r.predicted.how}; its 50% and 90% quantiles "
            f"covered {cal.get(0.5, math.nan):.2f} and {cal.get(0.9, math.nan):.2f} of the "
            f"real waits. VM time = deployment + staging + run time x the VM's node Triad "
            f"ratio to {r.system}'s (memory-bound); at the submit, the run time is guessed "
            f"from the user's (else the class's) last run-to-request ratios. Cost = the "
            f"decision's whole cost (nodes, storage, egress) with {classes} (parameters: the "
            f"log has no data sizes); bands: 10-90% of {r.draws} seeded draws of deployment, "
            f"the WAN and {r.system}'s Triad fraction. Hours saved: the burst jobs' own "
            f"turnaround against their logged waits; the stays' gain: the queue re-simulated "
            f"without the burst jobs against the same simulation with all ({SIM_ABOUT}), "
            f"which without bursting sets its waits against the log's with a rank "
            f"correlation of {sim['rank_correlation']:.2f}, a median of "
            f"{sim['median_s']:,.0f} s against the log's {sim['log_median_s']:,.0f} s and a "
            f"mean {sim['mean_ratio']:.2f} times the log's. A job larger than a VM allows "
            f"stays on premise, counted."
            + (" Spot: its price, no eviction replayed." if set(r.rows.get("billing", []))
               == {"spot"} else ""))


def brief(r: run.Replayed, source: str) -> str:
    """The figures' caption line: the log, the predictor's calibration, the simulation's
    distance from the log (the tables' captions say the rest)."""
    cal = r.calibration.set_index("quantile")["coverage"]
    sim = r.simulation
    return (f"Log: {source}, {r.log.machine}, {len(r.log.jobs):,} jobs, each wait predicted "
            f"at its submit from what was known then (50% and 90% quantiles covered "
            f"{cal.get(0.5, math.nan):.2f} and {cal.get(0.9, math.nan):.2f}); the stays' "
            f"gain from the queue re-simulated (its waits without bursting: rank correlation "
            f"{sim['rank_correlation']:.2f} with the log's, median {sim['median_s']:,.0f} s "
            f"against {sim['log_median_s']:,.0f} s, mean {sim['mean_ratio']:.2f}x). "
            "replay_policies.md says how every number was made.")


def replay_report(log: str = KTH_LOG, runs_dir: Path | str = "",
                  reference_dir: Path | str = "", figures_dir: Path | str = "", *,
                  fmt: str = "", show: bool = False, **kw) -> Section:
    """The replay's figures and tables (see the module docstring); `kw` are
    burstbench.replay.run.replay's parameters.  A missing log is said in the notes, and
    nothing drawn; ParamError, one line, for a parameter or a log given wrong."""
    section = Section("replay")
    path = log_path(log)
    if not path.exists():
        section.problems.append(f"replay: no log at {path} (the log parameter; the KTH SP2 "
                                f"log is {KTH_LOG} from the project root): nothing replayed")
        return section
    lg = logs.read_log(path, fmt)
    r = run.replay(lg, runs_dir=runs_dir, reference_dir=reference_dir, **kw)
    section.problems += r.problems
    if r.rows.empty:
        return section
    write(section, r, path.name, paths.figures_dir(figures_dir), show)
    return section


def write(section: Section, r: run.Replayed, source: str, fig_dir: Path,
          show: bool = False) -> None:
    """Every figure and table of a replay into `fig_dir`, listed in `section`."""
    about = describe(r, source)
    data = [source, "data/reference/prices_vm.csv", "data/reference/flow_systems.csv"]
    rows = r.rows.drop(columns=["region", "billing", "storage"]).round(6)
    table_entry(section, [d | {"data": source} for d in rows.to_dict("records")],
                fig_dir, "replay_policies", f"Replay of {r.log.machine}: every VM and policy",
                "Per VM and policy: jobs burst, the share of them made later, the hours "
                "saved (the burst jobs' own, total at the inputs' modes with its band; "
                "median and 90th percentile per burst job), the perfect policy's hours "
                "saved, JPY spent on the VMs (and the fees not paid on premise), the hours "
                f"the jobs that stay wait less. {about}")
    best = pick(r.rows)
    lead = str(best["vm"])
    table_entry(section, choices(r.rows, lead, best, source), fig_dir, "replay_choices",
                f"Replay: the policies to choose between ({lead})", choice_line(best)
                + f" Every policy on {lead}, beside the perfect policy. {about}")
    md = fig_dir / "replay_choices.md"  # the answer first, then the table it rests on
    watch = watch_line(r.rows, best)
    store.atomic_write(md, choice_line(best) + (" " + watch if watch else "") + "\n\n"
                       + md.read_text())
    table_entry(section, [d | {"data": source} for d in
                          r.calibration.round(4).to_dict("records")],
                fig_dir, "replay_calibration", "Replay: the predicted wait's calibration",
                "Per level q: the share of jobs whose real wait fell at or below their "
                "predicted q-quantile (by the probability integral transform, drawn within "
                f"the pile at 0 s): a calibrated predictor covers q. {about}")
    table_entry(section, [d | {"data": source} for d in
                          r.predictors.round(4).to_dict("records")],
                fig_dir, "replay_predictors", "Replay: the wait predictor's steps, each "
                "against the real waits", "Spearman's rank correlation of each step's "
                "median (a point predictor's value) with the real wait, and a "
                f"distribution's coverage at 10, 50 and 90%. {about}")
    short = brief(r, source)
    section.entries.append(calibration_figure(r.calibration, r.log.machine, short, data,
                                              fig_dir, show))
    section.entries.append(figure(r.rows, lead, best, short, data, fig_dir, show))


def picked(best: dict) -> bool:
    """Whether :func:`pick`'s row is a pick (bursts at least MIN_PICK_JOBS jobs, makes at
    most MAX_LATER of them later, saves hours), not only the closest to one."""
    return bool(best["jobs_burst"] >= MIN_PICK_JOBS and best["share_made_later"] <= MAX_LATER
                and best["hours_saved"] + best["stays_hours_saved"] > 0)


def choice_line(best: dict) -> str:
    """The director's answer in one line: the pick, or that there is none and the closest."""
    if best["jobs_burst"] == 0:
        return (f"No pick: no policy on P(sooner) bursts a job on any VM (the closest, on "
                f"{best['vm']}: {policy_label(best)}): keep the jobs on premise.")
    later = best["share_made_later"]
    share = best["hours_saved"] / best["perfect_hours_saved"] \
        if best["perfect_hours_saved"] > 0 else math.nan
    head = "Pick: burst" if picked(best) else (
        f"No pick: no policy on P(sooner) bursts at least {MIN_PICK_JOBS} jobs, makes at most "
        f"{MAX_LATER:.0%} of them later and saves hours; keep the jobs on premise. The "
        "closest would burst")
    n = int(best["jobs_burst"])
    cf = best.get("share_later_if_others_left", math.nan)
    return (f"{head} a job to {best['vm']} when {policy_label(best)}: "
            f"{n:,} job{'s' if n != 1 else ''} burst, {later:.0%} of "
            f"{'them' if n != 1 else 'it'} made later"
            + (f" ({cf:.0%} in the queue the others would have left, re-simulated)"
               if cf == cf else "") + ", "
            f"{best['hours_saved']:,.0f} hours of turnaround saved ({share:.0%} of what the "
            f"perfect policy saves) and {best['stays_hours_saved']:,.0f} more for the jobs "
            f"that stay, for {best['jpy_spent'] / 1e6:,.1f} million JPY "
            f"({best['jpy_per_hour_saved']:,.0f} JPY per hour saved).")


def choices(rows: pd.DataFrame, vm: str, best: dict, source: str) -> list[dict]:
    """One row per policy on `vm`, the pick marked."""
    out = []
    for _, q in rows[rows["vm"] == vm].iterrows():
        share = q["hours_saved"] / q["perfect_hours_saved"] if q["perfect_hours_saved"] > 0 \
            else math.nan
        chosen = q["policy"] == best["policy"] and all(
            q[k] == best[k] or (q[k] != q[k] and best[k] != best[k])
            for k in ("p_sooner_min", "gain_h"))
        out.append({"policy": policy_label(q),
                    "pick": ("<- pick" if picked(best) else "<- closest") if chosen else "",
                    "jobs_burst": int(q["jobs_burst"]),
                    "share_made_later": round(q["share_made_later"], 3)
                    if q["jobs_burst"] else None,
                    "hours_saved": round(q["hours_saved"]),
                    "of_perfect": round(share, 3),
                    "stays_hours_saved": round(q["stays_hours_saved"]),
                    "later_if_others_left": round(q["share_later_if_others_left"], 3)
                    if q["jobs_burst"] else None,
                    "mjpy_spent": round(q["jpy_spent"] / 1e6, 2),
                    "jpy_per_hour_saved": round(q["jpy_per_hour_saved"])
                    if q["jpy_per_hour_saved"] == q["jpy_per_hour_saved"] else None,
                    "data": source})
    return out


def calibration_figure(cal: pd.DataFrame, machine: str, about: str, data: list[str],
                       fig_dir: Path, show: bool):
    """Observed coverage against the predicted level, the diagonal and +-0.05 beside it."""
    style.apply_style()
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    lv = np.array([0.0, 1.0])
    ax.fill_between(lv, lv - 0.05, lv + 0.05, color="0.9", label="within 0.05")
    ax.plot(lv, lv, "--", color="0.5", lw=1, label="calibrated")
    ax.plot(cal["quantile"], cal["coverage"], "o-", color=style.palette(1)[0], ms=4,
            label="the predictor")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted quantile level q")
    ax.set_ylabel("share of real waits at or below it")
    ax.set_title(f"The predicted wait's calibration\n{machine}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    caption = ("Each job's wait predicted at its submit; per level, the share of jobs whose "
               "real wait fell at or below the predicted quantile. " + about)
    return figure_entry(fig, fig_dir, "replay_calibration", "Replay: the predicted wait's "
                        "calibration", caption, data, show)


def figure(rows: pd.DataFrame, lead: str, best: dict, about: str, data: list[str],
           fig_dir: Path, show: bool):
    """Left: on the leading VM, hours saved against JPY spent, every policy (probability
    points labelled by p, gain points by their hours, thresholds and the queue-state
    baseline as lines) beside the perfect policy.  Right: on every VM, the share made later
    against the share of the perfect policy's hours, the probability policies as solid
    lines and the gain policies as dashed ones (labelled on the leading VM), the target
    region shaded."""
    style.apply_style()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 5.0))
    d = rows[rows["vm"] == lead]
    colors = dict(zip(("probability", "gain", "threshold", "queue state", "perfect", "watch"),
                      style.palette(6)))
    names = {"probability": "P(sooner) >= p", "gain": "expected saving >= h x P(later)",
             "watch": "P(sooner) >= p, again while it waits"}
    for pol, ls, mk in (("threshold", "-", "s"), ("queue state", ":", "v"),
                        ("probability", "-", "o"), ("watch", "-.", "^"), ("gain", "--", "D"),
                        ("perfect", "", "*")):
        e = d[d["policy"] == pol].sort_values(["p_sooner_min", "gain_h", "threshold_h"])
        ax.plot(e["jpy_spent"] / 1e6, (e["hours_saved"] + e["stays_hours_saved"]) / 1e3,
                ls, marker=mk, ms=9 if pol == "perfect" else 5, color=colors[pol], lw=1.2,
                label=names.get(pol, pol))
        for _, q in e.iterrows():
            if pol == "perfect":
                continue
            label = f"p={q['p_sooner_min']:g}" if pol in ("probability", "watch") else \
                f"{q['gain_h']:g} h" if pol == "gain" else run.hours_label(q["threshold_h"])
            ax.annotate(label, (q["jpy_spent"] / 1e6,
                                (q["hours_saved"] + q["stays_hours_saved"]) / 1e3),
                        fontsize=6, xytext=(3, 3), textcoords="offset points",
                        color=colors[pol])
    ax.set_xlabel("JPY spent on the VMs (million)")
    ax.set_ylabel("turnaround saved (thousand hours)")
    ax.set_title(f"{lead}: what each policy buys", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    bx.axvspan(0.5, 1.05, ymin=0, ymax=MAX_LATER / 0.7, color="0.92",
               label=f"at most {MAX_LATER:.0%} later, at least half the perfect hours")
    vms = sorted(set(rows["vm"]))
    for vm, color in zip(vms, style.palette(len(vms))):
        for pol, key, ls, fmt in (("probability", "p_sooner_min", "o-", "{:g}"),
                                  ("watch", "p_sooner_min", "^-.", "{:g}"),
                                  ("gain", "gain_h", "D--", "{:g} h")):
            e = rows[(rows["vm"] == vm) & (rows["policy"] == pol)].sort_values(key)
            share = e["hours_saved"] / e["perfect_hours_saved"]
            bx.plot(share, e["share_made_later"], ls, ms=4, color=color, lw=1.2,
                    label=vm if pol == "probability" else None)
            for x, y, p in zip(share, e["share_made_later"], e[key]) if vm == lead else ():
                bx.annotate(fmt.format(p), (x, y), fontsize=6, xytext=(3, 3),
                            textcoords="offset points", color=color)
    bx.set_xlim(0, 1.05)
    bx.set_ylim(0, 0.7)
    bx.set_xlabel("hours saved / the perfect policy's")
    bx.set_ylabel("share of burst jobs made later")
    bx.set_title("Every VM: P(sooner) >= p (solid, by p),\nthe same again while it waits "
                 "(dash-dot),\nexpected saving >= h x P(later) (dashed, by h)", fontsize=9)
    bx.legend(fontsize=7, loc="upper left")
    caption = (choice_line(best) + " Left: every policy on " + lead + " (the probability "
               "policies by p, decided at the submit and again while the job waits (not "
               "picked from: the stays' hours as if it had left at its submit), the gain "
               "policies by the hours a job must be expected to "
               "save per chance of coming back later, thresholds on the predicted median "
               "wait, the old queue-state baseline, the perfect policy), the hours the burst "
               "jobs save and the stays gain. Right: the probability, watch and gain "
               "policies on "
               f"every VM, labelled on {lead}. " + about)
    return figure_entry(fig, fig_dir, "replay_curve", "Replay: what each burst policy buys, "
                        "beside the perfect policy", caption, data, show)


def summary_text(r: run.Replayed) -> str:
    """The CLI's answer: the pick, and every policy on its VM as a text table."""
    best = pick(r.rows)
    t = pd.DataFrame(choices(r.rows, str(best["vm"]), best, "")).drop(columns="data")
    cal = r.calibration.set_index("quantile")["coverage"]
    watch = watch_line(r.rows, best)
    return (f"{r.log.machine}: {len(r.log.jobs):,} jobs\n" + choice_line(best) + "\n"
            + (f"The live queue by this pick: {advise_options(best)}\n" if picked(best)
               else "") + (watch + "\n" if watch else "")
            + t.to_string(index=False) + "\n"
            f"predicted wait: 50% quantile covered {_share(cal.get(0.5, math.nan))}, 90% "
            f"{_share(cal.get(0.9, math.nan))}")


def watch_line(rows: pd.DataFrame, best: dict) -> str:
    """What the pick's level does decided again while each job waits (the watch row on the
    pick's VM), as the live advice decides; "" where there is none."""
    w = rows[(rows["policy"] == "watch") & (rows["vm"] == best["vm"])
             & (rows["p_sooner_min"] == best.get("p_sooner_min"))]
    if w.empty or best["policy"] != "probability":
        return ""
    r = w.iloc[0]
    return (f"Decided again while each job waits, as `burstbench advise` decides a live "
            f"queue, the same level bursts {int(r['jobs_burst']):,} jobs, "
            f"{r['share_made_later']:.1%} of them made later, {r['hours_saved']:,.0f} hours "
            "saved (the rows 'again while it waits'; not picked from: not decided in the "
            "queue they thin, and their stays' hours count a job burst after waiting as gone "
            "from its submit).")


def advise_options(best: dict) -> str:
    """The `burstbench advise` options that decide as the pick does."""
    rule = (f"--gain-h {best['gain_h']:g}" if best["policy"] == "gain"
            else f"--p-sooner {best['p_sooner_min']:g}")
    return f"burstbench advise --cloud PARTITION --vm {best['vm']} {rule}"


def _share(x: float) -> str:
    """A coverage to two places; 'n/a' where no job was predicted."""
    return f"{x:.2f}" if x == x else "n/a (no job predicted)"
