"""Burst policies replayed on a log: decided at each job's submit from what the scheduler
knew then, each burst job's time and whole cost on a VM, and the sums a director reads.

The queue's state at a submit is rebuilt from the log: the node-seconds ahead of the job are
the queued jobs' (submitted before it, not started) nodes x their estimated run time, plus the
running jobs' nodes x their estimated time left; the estimate is the requested time where the
log has it, else the run time (said in the caption).  The wait that state predicts is the
node-seconds ahead / the machine's nodes (a full machine draining the backlog).  A policy
bursts a job when that prediction passes a threshold; the oracle knows each job's real wait
and bursts when it passes the threshold.

Savings are per job: a burst job's turnaround on premise (its real wait + run time) minus its
time on the VM.  The jobs that stay would start sooner once others leave; a per-job replay
does not see it, so its savings are a lower bound (no queue is re-simulated).
Everything is vectorised over jobs (numpy; sorted cumulative sums for the queue state) and
over the uncertain inputs' draws (a job x draw matrix per option).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from burstbench.core.checks import ParamError, strict_keys
from burstbench.cost import job


def queue_state(submit: np.ndarray, start: np.ndarray, end: np.ndarray, nodes: np.ndarray,
                est: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At each job's submit s: (node-seconds queued ahead: jobs with submit_j < s <= start_j,
    nodes x est; node-seconds the running jobs have left: start_j < s <= min(end_j, start_j +
    est_j), nodes x (start_j + est_j - s); nodes running).  O(n log n): each sum is a
    difference of cumulative sums over the jobs sorted by one time."""
    s = submit

    def below(times: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Sum of `weights` of the jobs whose `times` are < each s."""
        order = np.argsort(times, kind="stable")
        cum = np.concatenate([[0.0], np.cumsum(weights[order])])
        return cum[np.searchsorted(times[order], s, side="left")]
    work = nodes * est
    queued = below(submit, work) - below(start, work)
    est_end = start + est
    stop = np.minimum(end, est_end)
    running_end = below(start, nodes * est_end) - below(stop, nodes * est_end)
    running_nodes = below(start, nodes) - below(stop, nodes)
    left = running_end - s * running_nodes
    # sums of differences: round-off below one node-second is no work
    return np.maximum(queued, 0.0), np.maximum(left, 0.0), np.maximum(np.round(running_nodes), 0)


def predicted_wait(submit, start, end, nodes, est, capacity: float) -> np.ndarray:
    """Seconds of wait the queue's state predicts at each submit: the node-seconds ahead /
    the machine's nodes, a fluid machine draining what is ahead.  Ahead: the queued jobs'
    work; and the running jobs' time left where the job cannot start now (jobs are queued,
    or fewer nodes are free than it needs); nothing where it can."""
    if not capacity > 0:
        raise ParamError(f"the machine's nodes must be positive, not {capacity!r}")
    nodes = np.asarray(nodes, float)
    queued, left, running = queue_state(np.asarray(submit, float), np.asarray(start, float),
                                        np.asarray(end, float), nodes, np.asarray(est, float))
    blocked = (queued > 0) | (running + nodes > capacity)
    return (queued + np.where(blocked, left, 0.0)) / capacity


# -- job classes ----------------------------------------------------------------------------

CLASS_KEYS = ("name", "max_nodes", "queue", "input_gb", "output_gb", "keep_months", "speed")


@dataclass(frozen=True)
class JobClass:
    """Logged jobs of one kind: those of at most `max_nodes` nodes (0: any) and of SWF queue
    `queue` (-1: any); their data; their speed on a VM: 'memory' (the node Triad ratio),
    'biccg' (the BICCG model's ratio for the study's Poisson problem on their nodes), or a
    number (VM time / on-premise time, the user's)."""

    name: str
    data: job.Data
    max_nodes: int = 0
    queue: int = -1
    speed: str | float = "memory"


def job_classes(given: list[dict] | None, input_gb: float, output_gb: float) -> list[JobClass]:
    """The job classes of the parameter `classes` (a list of mappings of CLASS_KEYS; jobs go
    to the first that matches), or one class of every job.  Unknown keys are refused with
    the valid ones."""
    if not given:
        return [JobClass("every job", job.Data(input_gb, output_gb), speed="memory")]
    if not isinstance(given, list):
        raise ParamError(f"classes must be a list of mappings, not {given!r}")
    out: list = []
    for c in given:
        if not isinstance(c, dict):
            raise ParamError(f"classes: each class must be a mapping, not {c!r}")
        strict_keys("classes", c, CLASS_KEYS)
        speed = c.get("speed", "memory")
        if not (speed in ("memory", "biccg") or (isinstance(speed, (int, float))
                                                 and not isinstance(speed, bool)
                                                 and math.isfinite(speed) and speed > 0)):
            raise ParamError(f"classes: speed must be 'memory', 'biccg' or a positive ratio "
                             f"(VM time / on-premise time), not {speed!r}")
        out.append(JobClass(str(c.get("name", f"class {len(out) + 1}")),
                            job.Data(c.get("input_gb", input_gb), c.get("output_gb", output_gb),
                                     c.get("keep_months", 0.0)),
                            int(c.get("max_nodes", 0)), int(c.get("queue", -1)), speed))
    return out


def assign(nodes: np.ndarray, queue: np.ndarray, classes: list[JobClass]) -> np.ndarray:
    """Each job's class index (the first that matches; -1: none)."""
    out = np.full(len(nodes), -1, dtype=np.int64)
    for i, c in reversed(list(enumerate(classes))):
        ok = np.ones(len(nodes), dtype=bool)
        if c.max_nodes:
            ok &= nodes <= c.max_nodes
        if c.queue >= 0:
            ok &= queue == c.queue
        out[ok] = i
    return out


# -- a VM option's time and cost for every job ----------------------------------------------

@dataclass
class Costed:
    """Every job on one option: hours to result and JPY (job x draw; column 0 the inputs'
    modes), and whether the option takes it."""

    hours: np.ndarray
    jpy: np.ndarray
    takes: np.ndarray


def cost_option(nodes: np.ndarray, run_h: np.ndarray, cls: np.ndarray,
                classes: list[JobClass], ratio_of, option_of, max_nodes: int | None,
                wan: np.ndarray, deploy_h: np.ndarray, free_egress_gb: float = 0.0
                ) -> Costed:
    """Each job's time to result and whole cost on one VM: `option_of(class)` gives its
    burstbench.cost.burst.Option (the pool sized for the class's data); deployment +
    staging (at the least of the WAN, the pool and the VM's storage) + run time x
    `ratio_of(class, nodes)` (an array over draws), through burstbench.cost.job.vm_job, a
    group of jobs of one class and node count at a time.  A job the VM cannot take (more
    nodes than it offers, no class, no ratio) keeps NaN."""
    n, d = len(nodes), len(wan)
    hours = np.full((n, d), np.nan)
    jpy = np.full((n, d), np.nan)
    takes = cls >= 0
    if max_nodes is not None:
        takes &= nodes <= max_nodes
    key = cls * (int(nodes.max()) + 1 if n else 1) + nodes
    order = np.argsort(np.where(takes, key, -1), kind="stable")
    keys = np.where(takes, key, -1)[order]
    cuts = np.flatnonzero(np.diff(keys)) + 1
    for idx in np.split(order, cuts):
        if not len(idx) or not takes[idx[0]]:
            continue
        c, k = classes[cls[idx[0]]], int(nodes[idx[0]])
        ratio = ratio_of(c, k)
        if ratio is None:
            takes[idx] = False
            continue
        option = option_of(c)
        rate = np.minimum(wan, option.pool.mib_s)
        if option.vm_storage is not None:
            rate = np.minimum(rate, option.vm_storage[0])
        compute = run_h[idx, None] * ratio[None, :]
        j = job.vm_job(compute, k, option.price_per_node_h, c.data, rate, option.pool,
                       option.egress_jpy_per_gb, deploy_h, None, free_egress_gb)
        hours[idx] = j.hours
        jpy[idx] = j.jpy
    return Costed(hours, jpy, takes)


# -- the sweep ------------------------------------------------------------------------------

def check_thresholds(thresholds_h) -> list[float]:
    """Thresholds in hours, strictly increasing and not negative; ParamError otherwise."""
    t = list(thresholds_h) if isinstance(thresholds_h, (list, tuple)) else None
    if not t or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                        and math.isfinite(v) and v >= 0 for v in t):
        raise ParamError(f"thresholds_h must be a list of hours (0 or more), not "
                         f"{thresholds_h!r}")
    bad = next((i for i in range(1, len(t)) if not t[i] > t[i - 1]), None)
    if bad is not None:
        raise ParamError(f"thresholds_h must increase: {t[bad]:g} h after {t[bad - 1]:g} h")
    return [float(v) for v in t]


def summary(burst: np.ndarray, turnaround_h: np.ndarray, c: Costed,
            flow_jpy: np.ndarray) -> dict:
    """The sums of one policy at one threshold: jobs burst, turnaround saved (total at the
    modes with its 10-90% band over the draws; median and 90th percentile per burst job),
    JPY spent on the VMs (and net of the on-premise fees not paid), JPY per hour saved, the
    share of burst jobs made later."""
    b = burst & c.takes
    n = int(b.sum())
    saved = turnaround_h[b, None] - c.hours[b]  # burst jobs x draws
    spent = c.jpy[b]
    tot_saved, tot_jpy = saved.sum(axis=0), spent.sum(axis=0)

    def band(v: np.ndarray):
        return np.percentile(v[1:], [10, 90]) if v.size > 1 else (v[0], v[0])
    lo, hi = band(tot_saved)
    jlo, jhi = band(tot_jpy)
    per = saved[:, 0] if n else np.zeros(0)
    return {"jobs_burst": n, "hours_saved": float(tot_saved[0]),
            "hours_saved_p10": float(lo), "hours_saved_p90": float(hi),
            "median_saved_h": float(np.median(per)) if n else math.nan,
            "p90_saved_h": float(np.percentile(per, 90)) if n else math.nan,
            "jpy_spent": float(tot_jpy[0]), "jpy_spent_p10": float(jlo),
            "jpy_spent_p90": float(jhi),
            "onprem_jpy_not_paid": float(flow_jpy[b].sum()),
            "jpy_per_hour_saved": float(tot_jpy[0] / tot_saved[0])
            if tot_saved[0] > 0 else math.nan,
            "share_made_later": float(np.mean(per < 0)) if n else math.nan}


def sweep(thresholds_h: list[float], predicted_h: np.ndarray, real_wait_h: np.ndarray,
          turnaround_h: np.ndarray, c: Costed, flow_jpy: np.ndarray) -> list[dict]:
    """One row per policy (the queue-state prediction, the oracle) and threshold."""
    rows = []
    for policy, wait in (("queue state", predicted_h), ("oracle", real_wait_h)):
        for t in thresholds_h:
            rows.append({"policy": policy, "threshold_h": t}
                        | summary(wait > t, turnaround_h, c, flow_jpy))
    return rows
