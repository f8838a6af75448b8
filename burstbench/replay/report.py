"""The replay's section of the report (notebook 150): a centre's log replayed against the burst
decision, a figure (JPY spent against turnaround saved, a point per threshold, the oracle's
curve beside each VM's) and two small tables (every VM x policy x threshold, and the leading
VM's thresholds a director would choose between).  Summaries only: no per-job table is
written."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from burstbench.core import paths
from burstbench.replay import logs, run
from burstbench.report import style
from burstbench.report.sections import Section, figure_entry, table_entry

#: The shared KTH SP2 log, relative to the project root.
KTH_LOG = "../shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz"
LOWER_BOUND = ("The savings are a LOWER BOUND: each job is replayed alone; the jobs that stay "
               "would also start sooner once others leave, and no queue is re-simulated.")


def log_path(log: str) -> Path:
    """The log's path: as given where absolute, else relative to the project root."""
    p = Path(log)
    return p if p.is_absolute() else paths.project_root() / p


def describe(r: run.Replayed, source: str) -> str:
    """The log, what was dropped, and how the queue's state and the on-premise side were
    taken: said in every caption."""
    lg = r.log
    dropped = "; ".join(lg.notes) if lg.notes else "no job dropped"
    classes = "; ".join(
        f"{c.name}: {c.data.input_gb:g} GB in, {c.data.output_gb:g} GB out"
        + (f", speed {c.speed}" if c.speed != "memory" else "") for c in r.classes)
    ack = f" Acknowledgement (as its header asks): {lg.acknowledge}." if lg.acknowledge else ""
    return (f"Log: {source} ({lg.fmt}), {lg.machine}: {len(lg.jobs):,} jobs replayed "
            f"({dropped}).{ack} Each job keeps its node count ({r.procs_per_node:g} "
            f"processor(s) per node: {r.procs_how}) and run time, as on {r.system} "
            f"({r.fee:g} JPY per node-hour, its node Triad). Queue state at each submit, "
            f"rebuilt from the log: "
            f"the node-hours ahead ({r.estimate_how}) / {r.capacity} nodes ({r.capacity_how});"
            f" a policy bursts when that predicted wait passes the threshold (its rank "
            f"correlation with the real wait: {r.rank_correlation:.2f}; backfilling lets small "
            f"jobs pass the queue); the oracle knows each job's real wait. VM time = "
            f"deployment + staging + run time x the VM's node "
            f"Triad ratio to {r.system}'s (memory-bound), cost = the decision's whole cost "
            f"(nodes, storage, egress) with {classes} (parameters: the log has no data "
            f"sizes); bands: 10-90% of {r.draws} seeded draws of deployment, "
            f"the WAN and {r.system}'s Triad fraction. A job larger than a VM allows stays on "
            f"premise, counted."
            + (" Spot: its price, no eviction replayed." if set(r.rows.get("billing", []))
               == {"spot"} else "") + f" {LOWER_BOUND}")


def replay_report(log: str = KTH_LOG, runs_dir: Path | str = "",
                  reference_dir: Path | str = "", figures_dir: Path | str = "", *,
                  fmt: str = "", system: str = "Flow Cloud System", procs_per_node: float = 0,
                  machine_nodes: int = 0, thresholds_h=run.THRESHOLDS_H,
                  region: str = "East US", billing: str = "payg",
                  storage: str = "pool per job", classes: list | None = None,
                  job_input_gb: float = 10.0, job_output_gb: float = 30.0,
                  deploy_minutes=(4.0, 5.0, 10.0), wan_mib_s=0, flow_fraction=0.793,
                  flow_vm: str = "flow-cloud", draws: int = 40, seed: int = 2023,
                  usd_jpy: float = 145.0, pool_min_tib: float = 4.0,
                  pool_jobs_per_month: float = 30.0, egress_free_gb: float = 0.0,
                  show: bool = False) -> Section:
    """The replay's figure and tables (see the module docstring).  A missing log is said in
    the notes, and nothing drawn; ParamError, one line, for a parameter or a log given wrong."""
    section = Section("replay")
    path = log_path(log)
    if not path.exists():
        section.problems.append(f"replay: no log at {path} (the log parameter; the KTH SP2 "
                                f"log is {KTH_LOG} from the project root): nothing replayed")
        return section
    lg = logs.read_log(path, fmt)
    r = run.replay(lg, runs_dir=runs_dir, reference_dir=reference_dir, system=system,
                   procs_per_node=procs_per_node, machine_nodes=machine_nodes,
                   thresholds_h=thresholds_h, region=region, billing=billing, storage=storage,
                   classes=classes, job_input_gb=job_input_gb, job_output_gb=job_output_gb,
                   deploy_minutes=deploy_minutes, wan_mib_s=wan_mib_s,
                   flow_fraction=flow_fraction, flow_vm=flow_vm, draws=draws, seed=seed,
                   usd_jpy=usd_jpy, pool_min_tib=pool_min_tib,
                   pool_jobs_per_month=pool_jobs_per_month, egress_free_gb=egress_free_gb)
    section.problems += r.problems
    if r.rows.empty:
        return section
    fig_dir = paths.figures_dir(figures_dir)
    source = path.name
    about = describe(r, source)
    data = [f"{source}", "data/reference/prices_vm.csv", "data/reference/flow_systems.csv"]
    rows = r.rows.drop(columns=["region", "billing", "storage"]).round(6)
    table_entry(section, [d | {"data": source} for d in rows.to_dict("records")],
                fig_dir, "replay_policies", f"Replay of {lg.machine}: every VM, policy and "
                "threshold", f"Per VM ({region}, {billing}, {storage}), policy and threshold: "
                "jobs burst, turnaround saved (total at the inputs' modes with its band; "
                "median and 90th percentile per burst job), JPY spent on the VMs (and the "
                f"{system} fees not paid), JPY per hour saved, the share of burst jobs made "
                f"later. {about}")
    thresholds = sorted(set(r.rows["threshold_h"]))
    lead = run.leading(r.rows, run.middle(thresholds))
    table_entry(section, choices(r.rows, lead, thresholds, data), fig_dir, "replay_choices",
                f"Replay: the thresholds to choose between ({lead})",
                f"{lead} (the VM whose queue-state policy saves the most hours at "
                f"{run.hours_label(run.middle(thresholds))}), each threshold with the oracle's "
                f"answer at the same threshold on the real wait. {about}")
    section.entries.append(figure(r.rows, lead, lg.machine, about, data, fig_dir, show))
    return section


def choices(rows: pd.DataFrame, vm: str, thresholds: list[float], data: list[str]
            ) -> list[dict]:
    """One row per threshold: the queue-state policy and the oracle side by side."""
    out = []
    for t in thresholds:
        q, o = (run.at_threshold(rows, vm, p, t) for p in ("queue state", "oracle"))
        out.append({"threshold": run.hours_label(t), "jobs_burst": q["jobs_burst"],
                    "hours_saved": round(q["hours_saved"]),
                    "band_h": f"{q['hours_saved_p10']:,.0f}-{q['hours_saved_p90']:,.0f}",
                    "median_saved_h": round(q["median_saved_h"], 2),
                    "p90_saved_h": round(q["p90_saved_h"], 1),
                    "mjpy_spent": round(q["jpy_spent"] / 1e6, 2),
                    "jpy_per_hour_saved": round(q["jpy_per_hour_saved"])
                    if q["jpy_per_hour_saved"] == q["jpy_per_hour_saved"] else None,
                    "share_made_later": round(q["share_made_later"], 3),
                    "oracle_jobs_burst": o["jobs_burst"],
                    "oracle_hours_saved": round(o["hours_saved"]),
                    "oracle_mjpy_spent": round(o["jpy_spent"] / 1e6, 2),
                    "data": data[0]})
    return out


def figure(rows: pd.DataFrame, lead: str, machine: str, about: str, data: list[str],
           fig_dir: Path, show: bool):
    """JPY spent against hours saved: per VM a point per threshold (the queue-state policy,
    solid) and the oracle's curve (dashed); the leading VM's thresholds labelled."""
    style.apply_style()
    fig, ax = plt.subplots(figsize=(8, 5.6))
    vms = sorted(set(rows["vm"]))
    for vm, color in zip(vms, style.palette(len(vms))):
        for pol, ls, mk in (("queue state", "-", "o"), ("oracle", "--", "^")):
            d = rows[(rows["vm"] == vm) & (rows["policy"] == pol)].sort_values("threshold_h")
            ax.plot(d["hours_saved"] / 1e3, d["jpy_spent"] / 1e6, ls, marker=mk, ms=4,
                    color=color, lw=1.2, label=f"{vm}, {pol}")
            if vm == lead:
                for x, y, t in zip(d["hours_saved"], d["jpy_spent"], d["threshold_h"]):
                    ax.annotate(run.hours_label(t), (x / 1e3, y / 1e6), fontsize=6,
                                xytext=(3, 3), textcoords="offset points", color=color)
    ax.set_xlabel("turnaround saved (thousand job-hours, lower bound)")
    ax.set_ylabel("JPY spent on the VMs (million)")
    ax.set_title("A centre's jobs replayed: what each burst threshold buys")
    ax.legend(fontsize=6, loc="upper left")
    caption = ("A point per threshold (labelled for the leading VM, " + lead + "): the "
               "queue-state policy (solid) and the oracle at the same threshold on the real "
               "wait (dashed). " + about)
    return figure_entry(fig, fig_dir, "replay_curve", "Replay: JPY spent against turnaround "
                        "saved, a point per threshold", caption, data, show)


def summary_text(r: run.Replayed, top: int = 3) -> str:
    """The CLI's answer: the leading VM's thresholds and the oracle's, as a text table."""
    thresholds = sorted(set(r.rows["threshold_h"]))
    lead = run.leading(r.rows, run.middle(thresholds))
    t = pd.DataFrame(choices(r.rows, lead, thresholds, [""])).drop(columns="data")
    return (f"{r.log.machine}: {len(r.log.jobs):,} jobs; bursting to {lead}; queue state by "
            f"{r.estimate_how}\n" + t.to_string(index=False) + "\n" + LOWER_BOUND)
