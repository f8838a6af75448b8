"""The advice for a queue's pending jobs: each one's wait as a distribution, its time and whole
cost on each priced VM, P(the VM returns it sooner), and a verdict.

- **The wait** (from now): burstbench.wait.predict fed with this centre's history (the
  finished jobs and the running ones at their submits) and the pending ones, each read at
  its own submit, as the history's jobs were, its wait from now what is left of its
  predicted wait given the time it has waited (burstbench.wait.history.remaining).  The
  history's jobs have the simulated estimate (EASY with requested times, what the scheduler
  would have said), and every job its partition (queue), a category of the learned model.
  Uncalibrated (too short a history), the wait is the scheduler's estimate of the start
  (``squeue``'s expected start, PBS's ``estimated.start_time``), else the simulated one, now.
- **The run time**: the requested time x the run-to-request ratios of the user's (else the
  class's) last finished jobs (burstbench.replay.run.run_guess), at five levels.
- **The VM**: the decision's machines and prices (burstbench.replay.pricing): deployment,
  staging of the class's data, the computing at the class's speed; P(sooner) over the
  inputs' draws and the run-time guesses (burstbench.replay.policy.p_sooner).
- **The expected saving**: the hours the VM is expected to save the job, the predicted mean
  wait less the VM's time beyond the guessed run (burstbench.replay.policy.expected_saving).
- **The verdict**: burst where P(sooner) >= `p_sooner` on the VM (the one asked for, else
  the likeliest to be sooner); with `gain_h`, where the expected saving is at least
  `gain_h` x P(later) instead (the VM: the one asked for, else the one with the most
  expected hours per chance of coming back later), the replay's gain policy; and where its
  cost at the requested time stays within `max_jpy`.  A job its owner pinned, one no VM
  takes, or, calibrated, one the scheduler expects to start within the VM's break-even wait
  (its estimate read as a veto, not as the wait: comparisons/README.md, "the scheduler's
  estimate: a veto, not the wait"), stays.

Long: one reading of a whole queue (:func:`advise`: the history, the running and pending
jobs in the predictor's order, each VM priced, the verdicts and their reasons), beside the
job classes it matches the jobs to.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from burstbench.advise.queue import Job, Snapshot
from burstbench.core.checks import ParamError, strict_keys
from burstbench.cost import job
from burstbench.replay import policy
from burstbench.replay.accounting import name_codes
from burstbench.replay.pricing import Pricing
from burstbench.replay.run import RUN_LEVELS, run_guess
from burstbench.wait.history import LEVELS, MODEL_TAIL, remaining
from burstbench.wait.predict import predict

#: The P(sooner) a job bursts at by default: the KTH replay's pick (figures/
#: replay_choices.md; RICC's is 0.95).  The gain rule (--gain-h) saves more hours on a
#: replayed log, but decided in the queue it thins, as a live queue is, it makes more of its
#: jobs later (burstbench.replay.run.PICKABLE).
P_SOONER = 0.9
#: Fewer finished jobs than this: the scheduler's estimate alone, uncalibrated.
MIN_HISTORY = 50
#: A pending job's wait stands in the arrays as this (s): it starts after every event read.
NOT_YET_S = 1e9
#: Pending jobs read now (uncalibrated: the estimate alone) are read this far apart (s), in
#: submit order: at the same second, none would see another queued ahead of it.
PENDING_APART_S = 1e-3
MATCH_KEYS = ("partition", "account", "name")
CLASS_KEYS = MATCH_KEYS + ("class", "max_nodes", "input_gb", "output_gb", "keep_months",
                           "speed")


@dataclass(frozen=True)
class Rule:
    """A pending job's class by its partition, account and name (shell patterns; empty:
    any) and its node count (0: any)."""

    cls: policy.LoggedClass
    partition: str = ""
    account: str = ""
    name: str = ""
    max_nodes: int = 0

    def matches(self, job: Job) -> bool:
        return all(not pat or fnmatch.fnmatchcase(val, pat) for pat, val in
                   ((self.partition, job.partition), (self.account, job.account),
                    (self.name, job.name))) and (not self.max_nodes or job.nodes <= self.max_nodes)


def rules(given: list | None, input_gb: float, output_gb: float) -> list[Rule]:
    """The classes of a ``--classes`` file: a list of mappings, each with what it matches
    (partition, account, name: shell patterns; max_nodes) and the class (its name, data
    and speed, as the replay's classes); jobs go to the first that matches.  None: one
    class of every job, memory-bound, with the data given."""
    if not given:
        return [Rule(policy.LoggedClass("every job (memory-bound)",
                                        job.Data(input_gb, output_gb)))]
    if not isinstance(given, list):
        raise ParamError(f"classes must be a list of mappings, not {given!r}")
    out: list[Rule] = []
    for c in given:
        if not isinstance(c, dict):
            raise ParamError(f"classes: each class must be a mapping, not {c!r}")
        strict_keys("classes", c, CLASS_KEYS)
        logged = policy.job_classes([{"name": c.get("class", f"class {len(out) + 1}")}
                                     | {k: c[k] for k in ("input_gb", "output_gb",
                                                          "keep_months", "speed") if k in c}],
                                    input_gb, output_gb)[0]
        try:
            most = int(c.get("max_nodes", 0))
        except (TypeError, ValueError):
            raise ParamError(f"classes: max_nodes must be a whole number, not "
                             f"{c.get('max_nodes')!r}") from None
        out.append(Rule(logged, str(c.get("partition", "")), str(c.get("account", "")),
                        str(c.get("name", "")), most))
    return out


def setup(classes: list | None = None, input_gb: float = 10.0, output_gb: float = 30.0, *,
          runs_dir: str = "", reference_dir: str = "", region: str = "East US",
          billing: str = "payg", draws: int = 40) -> tuple[list[Rule], Pricing]:
    """The classes (:func:`rules`) and the decision's machines and prices for them: what
    every round of the advice reuses."""
    from burstbench.replay.pricing import pricing

    rule_list = rules(classes, input_gb, output_gb)
    pr = pricing([r.cls for r in rule_list], runs_dir=runs_dir,
                 reference_dir=reference_dir, region=region, billing=billing,
                 draws=draws)
    if not pr.vms():
        raise _no_vm_there(region, billing, priced_regions(reference_dir, billing))
    return rule_list, pr


def priced_regions(reference_dir: str = "", billing: str = "") -> list[str]:
    """The regions the reference prices name, for `billing` where given (none where they
    cannot be read)."""
    from burstbench.core.paths import reference_dir as default_ref

    try:
        t = pd.read_csv(Path(reference_dir or default_ref()) / "prices_vm.csv")
        if billing:
            t = t[t["billing"] == billing]
        return sorted(t["region"].dropna().unique())
    except (OSError, KeyError, ValueError):
        return []


def _no_vm_there(region: str, billing: str, regions: list[str]) -> ParamError:
    """The one error for a region where no VM is priced (for `billing`, where given),
    naming the `regions` that are."""
    return ParamError(f"--region {region!r}: no VM priced there"
                      + (f" for {billing}" if billing else "")
                      + (f" (priced: {', '.join(regions)})" if regions else ""))


def check_region(region: str, reference_dir: str = "") -> None:
    """ParamError, before anything is priced (replay, before its log is read), where the
    reference prices name regions and `region` is not one of them; nothing where they
    cannot be read.  The region alone: a run's own vm_price can price other billings
    (advise says a region or billing without a VM after pricing)."""
    regions = priced_regions(reference_dir)
    if regions and region not in regions:
        raise _no_vm_there(region, "", regions)


@dataclass
class Advice:
    """One row a pending job (`table`), every VM's numbers for each (`per_vm`), each job's
    predicted wait (`q`: jobs x LEVELS, s from now), what it rests on (`basis`), and the
    notes."""

    table: pd.DataFrame
    per_vm: pd.DataFrame
    q: np.ndarray
    basis: dict
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready (NaN as None)."""
        def clean(df: pd.DataFrame) -> list[dict]:
            return [{k: (None if isinstance(v, float) and math.isnan(v) else v)
                     for k, v in r.items()} for r in df.to_dict("records")]
        return {"basis": self.basis, "notes": self.notes, "jobs": clean(self.table),
                "per_vm": clean(self.per_vm), "levels": LEVELS.tolist(),
                "wait_quantiles_s": [[None if math.isnan(v) else round(float(v), 1)
                                      for v in row] for row in self.q]}


def onprem_nodes(snap: Snapshot, cloud: str) -> list[str]:
    """The nodes of every partition (queue) but the cloud's."""
    cloud_nodes = set(snap.partitions.get(cloud, []))
    return sorted({n for p, ns in snap.partitions.items() if p != cloud for n in ns}
                  - cloud_nodes)


def duration_text(s: float) -> str:
    """`s` seconds as a reader takes them: minutes under an hour (to a tenth under 10),
    else hours."""
    if s < 600:
        return f"{max(s, 0.0) / 60:.1f} min"
    return f"{s / 60:.0f} min" if s < 3600 else f"{s / 3600:.2f} h"


def _span(jobs: list[Job]) -> str:
    if not jobs:
        return "none"
    from datetime import datetime
    lo, hi = min(j.end for j in jobs), max(j.end for j in jobs)
    return (f"{len(jobs):,} finished jobs, ended {datetime.fromtimestamp(lo):%Y-%m-%d %H:%M}"
            f" to {datetime.fromtimestamp(hi):%Y-%m-%d %H:%M}")


def p_sooner_problem(p_sooner: float) -> str:
    """What is wrong with a P(sooner) level ("" where nothing)."""
    return "" if 0 < p_sooner < 1 else \
        f"--p-sooner must be between 0 and 1 (not 0 or 1), not {p_sooner:g}"


def gain_problem(gain_h: float) -> str:
    """Why `gain_h` (hours per chance of coming back later; 0: off) is wrong, or ""."""
    return "" if gain_h == gain_h and 0 <= gain_h < math.inf else \
        f"--gain-h must be at least 0 and finite (0: burst by P(sooner)), not {gain_h:g}"


def vm_problem(pr: Pricing, vm: str) -> str:
    """What is wrong with `vm` ("" where it is none or a VM priced in `pr`)."""
    vms = [v for v, _ in pr.vms()]
    return "" if not vm or vm in vms else \
        f"--vm: {vm!r} is not priced for {pr.billing} in {pr.region} (priced: {', '.join(vms)})"


def advise(snap: Snapshot, pr: Pricing, rule_list: list[Rule], *, cloud: str = "",
           vm: str = "", p_sooner: float = P_SOONER, gain_h: float = 0.0,
           max_jpy: float = math.inf, min_history: int = MIN_HISTORY, learn: bool = True,
           seed: int = 2023, estimates_read_now: bool = False) -> Advice:
    """The advice for every pending job of `snap` outside partition `cloud` (see the module
    docstring); ParamError, one line, for an unknown `vm`, a P(sooner) not in (0, 1) or a
    negative `gain_h`.  `estimates_read_now`: a job with the scheduler's estimate read now,
    that estimate the wait, no veto (the advice before 778287e, for
    comparisons/advise_estimate_rules.py)."""
    problem = p_sooner_problem(p_sooner) or gain_problem(gain_h) or vm_problem(pr, vm)
    if problem:
        raise ParamError(problem)
    vms = pr.vms()
    notes = list(snap.skipped)
    onprem = onprem_nodes(snap, cloud)

    def outside(j: Job) -> bool:  # a partition list ("a,b") that names the cloud is in it
        return not cloud or cloud not in j.partition.split(",")
    hist = sorted((j for j in snap.history if outside(j) and j.nodes > 0
                   and j.start >= j.submit and j.end >= j.start), key=lambda j: j.submit)
    running = [j for j in snap.jobs if j.state == "running" and outside(j)]
    pend = [j for j in snap.pending() if outside(j)]
    for j in running + pend:  # a time not read would make every time NaN
        if not (math.isfinite(j.submit) and (j.state != "running" or math.isfinite(j.start))):
            notes.append(f"job {j.id}: its submit or start time was not read, skipped")
    running = sorted((j for j in running if math.isfinite(j.submit) and math.isfinite(j.start)),
                     key=lambda j: j.submit)
    pend = [j for j in pend if math.isfinite(j.submit)]
    for j in pend:
        if j.nodes < 1:
            notes.append(f"job {j.id}: no node count, skipped")
        elif j.unmovable:
            notes.append(f"job {j.id}: {j.unmovable}; not advised")
    pend = [j for j in pend if j.nodes >= 1 and not j.unmovable]
    # the predictor reads the pending jobs in the order they were submitted (below); the
    # table keeps the scheduler's
    listed = {id(j): k for k, j in enumerate(pend)}
    pend.sort(key=lambda j: j.submit)
    capacity = max([len(onprem)] + [j.nodes for j in hist + running + pend] + [1])
    if len(onprem) < capacity:
        notes.append(f"the on-premise partitions list {len(onprem)} node(s), fewer than a "
                     f"job's {capacity}: the queue is taken to have {capacity}")
    basis = {"scheduler": snap.version, "read_at": snap.now, "estimate": snap.estimate_source,
             "history": snap.history_source, "history_span": _span(hist),
             "on_premise_nodes": capacity, "cloud": cloud or "(none given)",
             "p_sooner": p_sooner, "gain_h": gain_h, "region": pr.region,
             "billing": pr.billing,
             "classes": [{"class": r.cls.name, "partition": r.partition, "account": r.account,
                          "name": r.name, "max_nodes": r.max_nodes,
                          "input_gb": r.cls.data.input_gb, "output_gb": r.cls.data.output_gb,
                          "speed": r.cls.speed} for r in rule_list]}
    if not pend:
        return Advice(pd.DataFrame(columns=["job"]), pd.DataFrame(), np.zeros((0, len(LEVELS))),
                      basis | {"wait": "no pending job"}, notes)

    n_h, n_r = len(hist), len(running)
    calibrated = n_h >= min_history
    # The predictor reads the jobs in submit order (a job still running was often submitted
    # before one that has finished).  Calibrated, a pending job is read at its own submit,
    # as the history's jobs were (the queue then ahead of it, the history's jobs after it
    # seeing it queued), and its wait from now is what is left of its predicted wait given
    # the wait so far; the scheduler's estimate, where it gives one, is not read as the wait
    # (read so, as the history's simulated ones calibrate it, it predicted the waits too
    # short, an exact one included) but as a veto on the verdict (below).  Uncalibrated,
    # every pending job is read now, the scheduler's estimate from now in place of the
    # simulated one, a millisecond apart in submit order, each seeing those before it
    # queued ahead of it.
    at_submit = np.array([calibrated and not (estimates_read_now and j.estimate == j.estimate)
                          for j in pend], bool)
    known = sorted(hist + running, key=lambda j: j.submit)
    first = sorted(known + [j for j, a in zip(pend, at_submit) if a], key=lambda j: j.submit)
    read_now = [j for j, a in zip(pend, at_submit) if not a]
    every = first + read_now
    at = {id(j): i for i, j in enumerate(every)}
    rows = np.array([at[id(j)] for j in pend], np.int64)
    waiting = np.zeros(len(every), bool)
    waiting[rows] = True
    t0 = min(j.submit for j in every)
    now = snap.now - t0
    submit = np.concatenate([[j.submit - t0 for j in first],
                             now + PENDING_APART_S * np.arange(len(read_now))])
    waited = np.maximum(now - np.array([j.submit - t0 for j in pend]), 0.0)
    wait = np.array([NOT_YET_S if w else j.start - j.submit for j, w in zip(every, waiting)])
    limit = np.array([j.limit_s for j in every], float)
    run = np.array([0.0 if w else max(j.limit_s if j.limit_s == j.limit_s else 3600.0,
                                      now - (j.start - t0)) + 1.0 if j.state == "running"
                    else j.end - j.start for j, w in zip(every, waiting)])
    nodes = np.array([j.nodes for j in every], np.int64)
    users = pd.factorize(pd.Series([j.user for j in every]))[0].astype(np.int64)
    told = np.array([j.estimate - snap.now for j in pend])  # the scheduler's, from now
    given = np.full(len(every), np.nan)  # in place of the simulated one: the rows read now
    given[rows] = np.where(at_submit, np.nan, told)
    # a job that may run in several partitions ("a,b") is in no one of them: unknown
    parts = name_codes([j.partition if "," not in j.partition else "" for j in every])
    pred = predict(submit, nodes, wait, run, limit, users, capacity,
                   learn=learn and calibrated, min_count=max(1, min(50, min_history)),
                   estimate=given, partition=parts, seed=seed)
    # the estimate from now: the scheduler's; else simulated now, or where read at its
    # submit, the simulation's then less the wait since
    est = np.where(~at_submit, pred.estimate[rows], np.where(
        np.isnan(told), np.maximum(pred.estimate[rows] - waited, 0.0), told))
    if calibrated:
        q = pred.q[rows]
        q[at_submit] = remaining(q[at_submit], waited[at_submit])
        estimate = ("one with the scheduler's estimate read now, that estimate the wait, no "
                    "veto (the advice before 778287e); every other" if estimates_read_now else
                    "the scheduler's estimate a veto: a job it expects to start within the "
                    "VM's break-even wait stays; every")
        how = pred.how + (f"; {estimate} pending job read at its submit, its wait from now "
                          "what is left given the wait so far, or where its model keeps "
                          f"under {MODEL_TAIL:.0%} of its waits past that (or predicted none), "
                          "the wait so far again at the median (a Pareto tail)")
        notes += pred.notes
    else:
        q = np.repeat(est[:, None], len(LEVELS), axis=1)
        how = (f"UNCALIBRATED: the estimate alone (the history has {n_h} finished job(s), "
               f"fewer than {min_history} to calibrate with)")
        notes.append(f"the history has {n_h} finished job(s), fewer than {min_history}: the "
                     "wait is the estimate alone, uncalibrated")
    basis["wait"] = how
    basis["jobs_used"] = {"finished": n_h, "running": n_r, "pending": len(pend)}
    # the run time is guessed now, from every job that has ended (the pending jobs' rows
    # at now, after the others)
    by_now = np.concatenate([np.flatnonzero(~waiting), rows])
    s_now = np.where(waiting, now, submit)[by_now]
    guess_h = run_guess(s_now, s_now + wait[by_now], run[by_now], limit[by_now],
                        nodes[by_now] / capacity, users[by_now])[len(known):] / 3600
    med_h = guess_h[:, RUN_LEVELS.index(0.5)]
    limit_h = limit[rows] / 3600
    cls = np.array([next((i for i, r in enumerate(rule_list) if r.matches(j)), -1)
                    for j in pend], np.int64)
    cls_list = [r.cls for r in rule_list]
    pn = nodes[rows]
    priced = []
    for name, price in vms:
        at_med = pr.costed(name, price, pn, np.nan_to_num(med_h), cls, cls_list)
        at_limit = pr.costed(name, price, pn, np.where(np.isnan(limit_h), med_h, limit_h),
                             cls, cls_list)
        ok = at_med.takes & ~np.isnan(med_h)
        at_med.takes = ok
        p = policy.p_sooner(q, at_med, np.nan_to_num(med_h), guess_h)
        saving = policy.expected_saving(q, at_med, np.nan_to_num(med_h), guess_h)
        rank = policy.gain_rank(p, saving)
        for i in range(len(pend)):
            priced.append({"job": pend[i].id, "vm": name, "takes": bool(ok[i]),
                           "p_sooner": float(p[i]) if ok[i] else math.nan,
                           "saving_h": float(saving[i]) if ok[i] else math.nan,
                           "gain_rank": float(rank[i]) if ok[i] else math.nan,
                           "vm_hours": float(at_med.hours[i, 0]) if ok[i] else math.nan,
                           "jpy": float(at_med.jpy[i, 0]) if ok[i] else math.nan,
                           "jpy_at_limit": float(at_limit.jpy[i, 0]) if ok[i] else math.nan,
                           "break_even_wait_h": float(at_med.hours[i, 0] - med_h[i])
                           if ok[i] else math.nan})
    per_vm = pd.DataFrame(priced)
    # each job's VM: the one asked for, else the best by the rule (the likeliest to be
    # sooner; with gain_h, the most expected hours per chance of later), the cheaper at a tie
    takers = per_vm[per_vm["takes"] & ((per_vm["vm"] == vm) if vm else True)]
    best_of = {r["job"]: r for r in takers.sort_values(
        ["gain_rank" if gain_h else "p_sooner", "jpy"], ascending=[False, True],
        na_position="last").drop_duplicates("job").to_dict("records")}
    table = []
    for i, j in enumerate(pend):
        best = best_of.get(j.id)
        row = {"job": j.id, "user": j.user, "partition": j.partition, "nodes": j.nodes,
               "limit_h": limit_h[i], "waited_h": (snap.now - j.submit) / 3600,
               "estimate_h": est[i] / 3600,
               "estimate_from": "scheduler" if not np.isnan(told[i])
               else "simulated at its submit (the scheduler gave none)" if at_submit[i]
               else "simulated (the scheduler gave none)",
               "wait_q10_h": q[i, 4] / 3600, "wait_q50_h": q[i, 20] / 3600,
               "wait_q90_h": q[i, 36] / 3600, "run_guess_h": med_h[i],
               "class": rule_list[cls[i]].cls.name if cls[i] >= 0 else "",
               "pinned": j.pinned}
        if best is None:
            verdict, why = "stay", ("no class matches it" if cls[i] < 0 else
                                    "no VM takes it" + (f" ({vm})" if vm else "")
                                    if not np.isnan(med_h[i]) else "no run time to guess from")
            row |= {"vm": vm, "p_sooner": math.nan, "saving_h": math.nan,
                    "gain_rank": math.nan, "vm_hours": math.nan, "jpy": math.nan,
                    "jpy_at_limit": math.nan}
        else:
            row |= {k: best[k] for k in ("vm", "p_sooner", "saving_h", "gain_rank",
                                         "vm_hours", "jpy", "jpy_at_limit")}
            p = best["p_sooner"]
            later = float(policy.later_weight(p))
            gain = (f"expected saving {best['saving_h']:.2f} h {{}} {gain_h * later:.2f} h "
                    f"({gain_h:g} h x P(later) {later:.3g})")
            if j.pinned:
                verdict, why = "stay", "pinned by its owner"
            elif gain_h and not best["gain_rank"] >= gain_h:
                verdict, why = "stay", gain.format("<")
            elif not gain_h and p < p_sooner:
                verdict, why = "stay", f"P(sooner) {p:.2f} < {p_sooner:g}"
            elif at_submit[i] and told[i] < 3600 * best["break_even_wait_h"]:
                be_s = 3600 * best["break_even_wait_h"]
                verdict, why = "stay", (f"the scheduler expects it to start in "
                                        f"{duration_text(told[i])}, within the VM's break-even "
                                        f"wait of {duration_text(be_s)}")
            elif best["jpy_at_limit"] > max_jpy:
                verdict, why = "stay", (f"up to {best['jpy_at_limit']:,.0f} JPY at its limit, "
                                        f"over --max-jpy {max_jpy:,.0f}")
            else:
                verdict, why = "burst", gain.format(">=") if gain_h else \
                    f"P(sooner) {p:.2f} >= {p_sooner:g}"
        table.append(row | {"verdict": verdict, "why": why})
    back = np.argsort([listed[id(j)] for j in pend], kind="stable")  # the scheduler's order
    blocks = [b * len(pend) + back for b in range(len(vms))]  # per_vm: a VM's block a job
    per_vm = per_vm.iloc[np.concatenate(blocks)] if blocks else per_vm
    return Advice(pd.DataFrame([table[i] for i in back]), per_vm.reset_index(drop=True),
                  q[back], basis, notes)
