"""A log replayed against the burst decision's machines and prices: every logged job on every
VM priced in a region and billing, the policies swept over thresholds (burstbench.replay.policy),
one summary row per VM, policy and threshold.

The on-premise system is one of Flow's (its node-hour fee and its node Triad, from
data/reference/ as burstbench.cost.machines builds it); the log's jobs keep their node counts
(from their processors and the log's node size) and their run times, as if they had run on it.
The uncertain inputs are the decision's (burstbench.cost.uncertainty): deployment, the WAN,
Flow's Triad fraction, and for a class mapped to the BICCG model the model's error, the
iterations and the published latencies; column 0 of every job x draw matrix is their modes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from burstbench.core import paths
from burstbench.core.checks import ParamError
from burstbench.core.reference import vm_key
from burstbench.cost import burst, machines, model
from burstbench.cost import prices as price_tables
from burstbench.cost import uncertainty as u
from burstbench.cost.predict import STUDY_GRID, MatrixModel
from burstbench.replay import policy
from burstbench.replay.logs import Log
from burstbench.report.decision import inputs

#: Thresholds swept by default, hours: 10 minutes to 8 days.
THRESHOLDS_H = (1 / 6, 1.0, 4.0, 12.0, 24.0, 48.0, 96.0, 192.0)


@dataclass
class Replayed:
    """What a replay found: the summary rows, the log, what it assumed and could not use."""

    rows: pd.DataFrame
    log: Log
    system: str
    fee: float
    capacity: int
    capacity_how: str
    procs_per_node: float
    estimate_how: str
    draws: int
    ranges: dict[str, u.Range]
    classes: list[policy.JobClass]
    procs_how: str = ""
    rank_correlation: float = math.nan  # Spearman's, of the predicted wait and the real one
    left_on_premise: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


class _Unfitted:
    """The time model where none could be fitted: no error range (memory-bound jobs only)."""

    def error(self) -> u.Range:
        return u.Range.known(u.ERROR, 0.0, "", "no BICCG model fitted (not used)")


def peak_nodes(start: np.ndarray, end: np.ndarray, nodes: np.ndarray) -> int:
    """The most nodes the log's jobs held at once."""
    t = np.concatenate([start, end])
    dn = np.concatenate([nodes, -nodes])
    order = np.lexsort((dn, t))  # at a tie, ends (negative) before starts
    return int(np.cumsum(dn[order]).max()) if len(t) else 0


def replay(log: Log, *, runs_dir: Path | str = "", reference_dir: Path | str = "",
           system: str = "Flow Cloud System", procs_per_node: float = 0,
           machine_nodes: int = 0, thresholds_h=THRESHOLDS_H, region: str = "East US",
           billing: str = "payg", storage: str = "pool per job", classes: list | None = None,
           job_input_gb: float = 10.0, job_output_gb: float = 30.0,
           deploy_minutes=(4.0, 5.0, 10.0), wan_mib_s=0, flow_fraction=0.793,
           flow_vm: str = "flow-cloud", draws: int = 40, seed: int = 2023,
           usd_jpy: float = 145.0, pool_min_tib: float = 4.0,
           pool_jobs_per_month: float = 30.0, egress_free_gb: float = 0.0,
           merits: list | None = None) -> Replayed:
    """Replay `log` (see the module docstring); ParamError, one line, for a parameter given
    wrong.  `merits`: the benchmarks' figures of merit, read from `runs_dir` where None."""
    thresholds = policy.check_thresholds(list(thresholds_h))
    if not (isinstance(draws, int) and draws >= 10):
        raise ParamError(f"draws must be an integer of at least 10, not {draws!r}")
    if storage not in ("pool per job", "shared pool"):
        raise ParamError(f"storage must be 'pool per job' or 'shared pool', not {storage!r}")
    problems: list[str] = []
    ref_dir = Path(reference_dir) if reference_dir else paths.reference_dir()
    if merits is None:
        from burstbench.registry import all_merits
        merits = all_merits(paths.runs_dir(runs_dir), ref_dir, problems)
    mode = flow_fraction[1] if isinstance(flow_fraction, (list, tuple)) and \
        len(flow_fraction) == 3 else sum(flow_fraction) / 2 if isinstance(
            flow_fraction, (list, tuple)) else flow_fraction
    machine_of = machines.machines(merits, ref_dir, float(mode), problems)
    if system not in machine_of or not system.startswith("Flow"):
        known = sorted(m for m in machine_of if m.startswith("Flow"))
        raise ParamError(f"system: no on-premise system {system!r} (known: "
                         f"{', '.join(known)})")
    flow, flow_measured = machines.flow_machine(machine_of, system, flow_vm, problems)
    try:
        fitted = model.fit(merits, machine_of, {"vm": "local", "problem": "poisson128x128x128",
                                                "layout": "2x1"})
    except ValueError as exc:
        fitted = None
        why_unfitted = str(exc)
    cls_list = policy.job_classes(classes, job_input_gb, job_output_gb)
    if fitted is None and any(c.speed == "biccg" for c in cls_list):
        raise ParamError(f"a class is mapped to the BICCG model, and none could be fitted: "
                         f"{why_unfitted}")
    ranges = inputs.ranges(fitted or _Unfitted(), flow_fraction, flow_measured, ref_dir,
                           wan_mib_s, deploy_minutes, 0.0, problems,
                           machines.merit(merits, "wan_mib_s"))
    x = {k: np.concatenate([[r.mode], r.draw(draws, seed)]) for k, r in ranges.items()}
    scale = np.ones(draws + 1) if flow_measured else x[u.FLOW_FRACTION] / ranges[
        u.FLOW_FRACTION].mode  # Flow's bandwidth drawn / nominal: the VM's time scales by it
    prices = price_tables.load_prices(ref_dir, usd_jpy, inputs.run_prices(merits))
    fee = prices.lookup(system, "onprem_fee")
    tiers, egress, _ = inputs.storage_prices(ref_dir, problems)
    options_of = inputs.options(tiers, egress, machines.storage_rates(merits), ranges[u.WAN],
                                pool_min_tib, pool_jobs_per_month)

    j = log.jobs
    ppn = float(procs_per_node or log.procs_per_node or 1)
    ppn_how = ("given" if procs_per_node else "the log's header (MaxProcs / MaxNodes)"
               if log.procs_per_node else "none known: 1 assumed")
    nodes = np.where(j["nodes"] > 0, j["nodes"],
                     np.ceil(j["procs"].to_numpy(float) / ppn)).astype(np.int64)
    submit, wait, run = (j[c].to_numpy(float) for c in ("submit", "wait", "run"))
    start, end = submit + wait, submit + wait + run
    has_req = j["req_time"].notna().to_numpy()
    est = np.where(has_req, j["req_time"].to_numpy(float), run)
    estimate_how = ("requested time (every job logged one)" if has_req.all() else
                    f"requested time for {has_req.mean():.0%} of jobs, run time for the rest"
                    if has_req.any() else "run time (the log has no requested time)")
    if machine_nodes:
        capacity, cap_how = int(machine_nodes), "given"
    elif log.max_nodes:
        capacity, cap_how = int(log.max_nodes), "the log's MaxNodes"
    else:
        capacity, cap_how = max(peak_nodes(start, end, nodes), 1), \
            "the most nodes its jobs held at once"
    predicted_h = policy.predicted_wait(submit, start, end, nodes, est, capacity) / 3600
    run_h, wait_h = run / 3600, wait / 3600
    turnaround_h = wait_h + run_h
    flow_jpy = nodes * run_h * fee
    cls = policy.assign(nodes, j["queue"].to_numpy(), cls_list)
    if (cls < 0).any():
        problems.append(f"{int((cls < 0).sum())} job(s) in no class: they stay on premise")
    flow_bw = flow.bandwidth(flow.cores)
    rows, left = [], {}
    vms = sorted(m for m in machine_of if not m.startswith("Flow") and m != flow_vm)
    table = prices.table[(prices.table["kind"] == "cloud") & (prices.table["billing"] == billing)
                         & (prices.table["region"] == region)]
    for vm in vms:
        m = machine_of[vm]
        pr = table[table["key"] == vm_key(vm)]
        if pr.empty:
            continue
        cache: dict[tuple, np.ndarray | None] = {}

        def ratio_of(c: policy.JobClass, k: int, m=m, cache=cache) -> np.ndarray | None:
            if (c.name, k) not in cache:
                cache[(c.name, k)] = _ratio(c, k, m, flow, fitted, x, scale, flow_bw)
            return cache[(c.name, k)]

        p = next(pr.itertuples())

        def option_of(c: policy.JobClass, vm=vm, p=p) -> burst.Option:
            opts = options_of(vm, p, c)
            if isinstance(opts, str):
                raise ParamError(f"{vm} in {region}: {opts}")
            return next(o for o in opts if o.pool.scenario == storage)
        costed = policy.cost_option(nodes, run_h, cls, cls_list, ratio_of, option_of,
                                    m.max_nodes, x[u.WAN], x[u.DEPLOY] / 60, egress_free_gb)
        left[vm] = int((~costed.takes).sum())
        base = {"vm": vm, "region": region, "billing": billing, "storage": storage,
                "price_per_node_h": float(p.jpy_per_hour),
                "jobs_left_on_premise": left[vm]}
        rows += [base | r for r in policy.sweep(thresholds, predicted_h, wait_h, turnaround_h,
                                                costed, flow_jpy)]
    if not rows:
        problems.append(f"no VM priced for {billing} in {region}: nothing replayed")
    if fitted is None:
        problems.append(f"replay: no BICCG model fitted ({why_unfitted}); memory-bound "
                        "classes only")
    rho = float(pd.Series(predicted_h).rank().corr(pd.Series(wait_h).rank())) \
        if len(wait_h) > 1 else math.nan
    return Replayed(pd.DataFrame(rows), log, system, fee, capacity, cap_how, ppn,
                    estimate_how, draws, ranges, cls_list, ppn_how, rho, left, problems)


def _ratio(c: policy.JobClass, k: int, m, flow, fitted, x: dict[str, np.ndarray],
           scale: np.ndarray, flow_bw: float) -> np.ndarray | None:
    """A class's VM time / on-premise time on `k` nodes, per draw: its own number; the node
    Triad ratio (memory-bound: Flow's node bandwidth / the VM's, Flow's drawn); the BICCG
    model's predicted solve on each (None where the model cannot price it)."""
    if isinstance(c.speed, (int, float)):
        return np.full(len(scale), float(c.speed))
    if c.speed == "memory":
        return flow_bw / m.bandwidth(m.cores) * scale
    # the BICCG model's stand-in for a class mapped to it: the study's Poisson job
    jc = burst.JobClass(c.name, k, c.data, MatrixModel.poisson(*STUDY_GRID))
    try:
        vp, fp = burst.parts(jc, m, fitted, flow), burst.parts(jc, flow, fitted, flow)
    except ValueError:
        return None
    flow_h = fp.hours(x, 1 / scale)
    return vp.hours(x) / flow_h if np.all(flow_h > 0) else None


def leading(rows: pd.DataFrame, at_h: float) -> str:
    """The VM whose queue-state policy saves the most hours at threshold `at_h` (the
    cheaper at a tie)."""
    d = rows[(rows["policy"] == "queue state") & np.isclose(rows["threshold_h"], at_h)]
    d = d.sort_values(["hours_saved", "jpy_spent"], ascending=[False, True], kind="stable")
    return str(d["vm"].iloc[0])


def hours_label(h: float) -> str:
    """10 min, 2 h, 4 d."""
    if h < 1:
        return f"{h * 60:.0f} min"
    return f"{h:g} h" if h < 24 else f"{h / 24:g} d"


def at_threshold(rows: pd.DataFrame, vm: str, policy_name: str, h: float) -> dict:
    d = rows[(rows["vm"] == vm) & (rows["policy"] == policy_name)
             & np.isclose(rows["threshold_h"], h)]
    return d.iloc[0].to_dict() if len(d) else {}


def middle(thresholds: list[float]) -> float:
    """The threshold the leading VM is chosen at: 1 h where swept, else the middle one."""
    return 1.0 if any(math.isclose(t, 1.0) for t in thresholds) else \
        thresholds[len(thresholds) // 2]
