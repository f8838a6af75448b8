"""Burst policies replayed on a log: each decided at a job's submit from what was known then,
each burst job's time and whole cost on a VM, and the sums a director reads.

The policies (a job the VM cannot take always stays):

- ``probability``: burst when P(the VM returns it sooner) >= p, the decision's own question:
  the wait drawn from its predicted distribution (burstbench.wait.predict), the VM's time
  from the decision's draws (deployment, staging, speed), the run time guessed from what
  was known at the submit (burstbench.replay.run: the requested time x the run-to-request
  ratios of the user's, else the class's, last jobs that had ended, recalibrated);
- ``gain``: burst when the hours the VM is expected to save the job are at least `gain_h` x
  its chance of coming back later (1 - P(sooner), at least 0.001): of two jobs equally
  likely sooner, the one that would save more goes first.  To save the most hours while
  making at most a share of the burst jobs later, this is the order to burst in (a
  Lagrangian's: each later job priced at `gain_h` hours); at 10% later it keeps more of the
  perfect policy's hours than P(sooner) on every VM of KTH and RICC (comparisons/README.md),
  on the log as it was; decided in the queue its own bursting thins it makes more of its
  jobs later than P(sooner), and the pick is not made from it (burstbench.replay.run);
- ``watch``: ``probability`` decided again while the job waits, as ``burstbench advise
  --watch`` reads a live queue every few minutes: at its submit, then at WATCH_MOMENTS_S
  after it while it has not started, on what is left of its wait given the wait so far
  (burstbench.wait.history.remaining); it bursts at the first moment P(sooner) >= p, and
  saves what was left of its wait plus its run less the VM's time;
- ``threshold``: burst when the predicted median wait passes a threshold;
- ``queue state``: the old baseline, the node-seconds ahead / the machine's nodes
  (burstbench.wait.state) past a threshold;
- ``perfect``: burst exactly the jobs that come back sooner (at the inputs' modes).

Savings are per job: a burst job's turnaround on premise (its logged wait + run time) minus
its time on the VM (at the logged run time).  The jobs that stay start sooner once others
leave: that gain is the re-simulation's (burstbench.replay.run), in a column of its own.
Everything is vectorised over jobs and over the uncertain inputs' draws (a job x draw
matrix per option).

Long: every policy with what it decides on (P(sooner), the expected saving, the moments a
waiting job is decided again) and the sums a director reads, which the replay, the closed
loop and the live advice share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from burstbench.core.checks import ParamError, strict_keys
from burstbench.cost import job
from burstbench.wait.history import LEVELS, cdf_at, remaining

# -- job classes ----------------------------------------------------------------------------

CLASS_KEYS = ("name", "max_nodes", "queue", "input_gb", "output_gb", "keep_months", "speed")


@dataclass(frozen=True)
class LoggedClass:
    """Logged jobs of one kind: those of at most `max_nodes` nodes (0: any) and of SWF queue
    `queue` (-1: any); their data; their speed on a VM: 'memory' (the node Triad ratio),
    'biccg' (the BICCG model's ratio for the study's Poisson problem on their nodes), or a
    number (VM time / on-premise time, the user's)."""

    name: str
    data: job.Data
    max_nodes: int = 0
    queue: int = -1
    speed: str | float = "memory"


def job_classes(given: list[dict] | None, input_gb: float, output_gb: float) -> list[LoggedClass]:
    """The job classes of the parameter `classes` (a list of mappings of CLASS_KEYS; jobs go
    to the first that matches), or one class of every job.  Unknown keys are refused with
    the valid ones."""
    if not given:
        return [LoggedClass("every job", job.Data(input_gb, output_gb), speed="memory")]
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
        out.append(LoggedClass(str(c.get("name", f"class {len(out) + 1}")),
                               job.Data(c.get("input_gb", input_gb),
                                        c.get("output_gb", output_gb),
                                        c.get("keep_months", 0.0)),
                               int(c.get("max_nodes", 0)), int(c.get("queue", -1)), speed))
    return out


def assign(nodes: np.ndarray, queue: np.ndarray, classes: list[LoggedClass]) -> np.ndarray:
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
    modes) at its logged run time, the VM time / on-premise time of its computing (job x
    draw), and whether the option takes it (where not, hours, JPY and ratio are 0: a
    policy's sums are products with its burst mask)."""

    hours: np.ndarray
    jpy: np.ndarray
    takes: np.ndarray
    ratio: np.ndarray


def cost_option(nodes: np.ndarray, run_h: np.ndarray, cls: np.ndarray,
                classes: list[LoggedClass], ratio_of, option_of, max_nodes: int | None,
                wan: np.ndarray, deploy_h: np.ndarray, free_egress_gb: float = 0.0
                ) -> Costed:
    """Each job's time to result and whole cost on one VM: `option_of(class)` gives its
    burstbench.cost.burst.Option (the pool sized for the class's data); deployment +
    staging (at the least of the WAN, the pool and the VM's storage) + run time x
    `ratio_of(class, nodes)` (an array over draws), through burstbench.cost.job.vm_job, a
    group of jobs of one class and node count at a time.  A job the VM cannot take (more
    nodes than it offers, no class, no ratio) keeps 0 and is not taken."""
    n, d = len(nodes), len(wan)
    hours = np.zeros((n, d))
    jpy = np.zeros((n, d))
    ratios = np.zeros((n, d))
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
        ratios[idx] = ratio[None, :]
    return Costed(hours, jpy, takes, ratios)


# -- the policies -------------------------------------------------------------------------

#: P(sooner) levels swept by default.  0.98 for a log where 0.95 still makes more than the
#: pick's 10% later: past it the share stops falling (the whole RICC log: 8.9% at 0.95,
#: 7.0% at 0.98, 7.2% at 0.99; KTH 4.1%, 1.8%, 1.5%).
P_SOONER = (0.5, 0.8, 0.9, 0.95, 0.98)
#: Hours of expected saving a job must bring per unit of its chance of coming back later,
#: swept by default, a factor of 4 apart.  KTH's best gain is at 64 h; the whole RICC log's at
#: 1,024 h, where 10% later lies between 256 h (12.8%) and 1,024 h (8.2%); 4,096 h (7.0%) is
#: there for a log harder still.  Both logs' mean waits are about 4.3 h: the hours follow how
#: the savings spread, not the mean wait.
GAIN_H = (4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0)
#: The draws of the VM's side a P(sooner) is taken over, at most.
DECISION_DRAWS = 20


def _increasing(values, name: str, ok, takes: str, unit: str = "") -> list[float]:
    """`values`, a list of numbers each passing `ok`, strictly increasing; ParamError, one
    line, naming `name` and what it `takes` otherwise."""
    t = list(values) if isinstance(values, (list, tuple)) else None
    if not t or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                        and math.isfinite(v) and ok(v) for v in t):
        raise ParamError(f"{name} must be a list of {takes}, not "
                         f"{t if t is not None else values!r}")
    bad = next((i for i in range(1, len(t)) if not t[i] > t[i - 1]), None)
    if bad is not None:
        raise ParamError(f"{name} must increase: {t[bad]:g}{unit} after {t[bad - 1]:g}{unit}")
    return [float(v) for v in t]


def check_thresholds(thresholds_h) -> list[float]:
    """Thresholds in hours, strictly increasing and not negative; ParamError otherwise."""
    return _increasing(thresholds_h, "thresholds_h", lambda v: v >= 0, "hours (0 or more)",
                       " h")


def check_gain(gains_h, name: str = "gain_h") -> list[float]:
    """Hours of expected saving per chance of coming back later, positive, strictly
    increasing; ParamError, naming `name`, otherwise."""
    return _increasing(gains_h, name, lambda v: v > 0, "hours (more than 0)", " h")


def check_p_sooner(levels, name: str = "p_sooner") -> list[float]:
    """P(sooner) levels, each strictly between 0 and 1, increasing; ParamError, naming
    `name`, otherwise."""
    return _increasing(levels, name, lambda v: 0 < v < 1,
                       "probabilities, each between 0 and 1 (not 0 or 1)")


@njit(cache=True)
def _p_sooner(q, levels, fixed, ratio, guess, takes):
    n, d = fixed.shape
    k = guess.shape[1]
    out = np.zeros(n)
    for i in range(n):
        if not takes[i] or q[i, 0] != q[i, 0]:
            continue
        acc = 0.0
        m = 0
        for a in range(d):
            for b in range(k):
                g = guess[i, b]
                if g != g:
                    continue
                acc += 1.0 - cdf_at(q[i], levels,
                                    (fixed[i, a] + g * (ratio[i, a] - 1.0)) * 3600.0)
                m += 1
        out[i] = acc / m if m else 0.0
    return out


def decision_draws(c: Costed, run_h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The option's draws a decision is taken over (its columns after the modes, at most
    DECISION_DRAWS of them, evenly spaced): the VM's hours beyond its computing, and its
    speed ratio (jobs x draws each)."""
    d = c.hours.shape[1] - 1
    draws = slice(1, None, max(1, d // DECISION_DRAWS)) if d > 0 else slice(None)
    return c.hours[:, draws] - run_h[:, None] * c.ratio[:, draws], c.ratio[:, draws]


def p_sooner(q: np.ndarray, c: Costed, run_h: np.ndarray, run_guess_h: np.ndarray
             ) -> np.ndarray:
    """P(the VM returns each job sooner than the queue): over the option's draws (its
    columns after the modes, at most DECISION_DRAWS of them, evenly spaced) and the job's
    guessed run times (jobs x k, hours, equally likely), P(wait > VM hours - guessed run)
    under the job's predicted wait `q` (jobs x LEVELS, seconds); 0 where the VM does not
    take the job or nothing is predicted."""
    fixed, ratio = decision_draws(c, run_h)
    return _p_sooner(np.ascontiguousarray(q, dtype=np.float64), LEVELS.astype(np.float64),
                     np.ascontiguousarray(fixed), np.ascontiguousarray(ratio),
                     np.ascontiguousarray(run_guess_h, dtype=np.float64),
                     np.ascontiguousarray(c.takes))


#: The moments after its submit at which a job still waiting is decided again (s): 5 minutes,
#: then each a quarter longer than the last, up to 21 days (40 moments).  The advice's watch
#: reads the queue every 5 minutes by default; on KTH a look every 5 minutes for 7 days
#: bursts within 3% of the jobs these do (comparisons/README.md, "Decided again while a job
#: waits").
WATCH_MOMENTS_S = tuple(300.0 * 1.25 ** np.arange(40))


def watched(q: np.ndarray, c: Costed, run_h: np.ndarray, run_guess_h: np.ndarray,
            wait_s: np.ndarray, levels: list[float],
            moments_s: tuple[float, ...] = WATCH_MOMENTS_S,
            p_at_submit: np.ndarray | None = None) -> np.ndarray:
    """When each job bursts under ``watch`` at each of `levels` (levels x jobs, s after its
    submit; NaN: never): the first of its submit and the `moments_s` before its logged wait
    `wait_s` ended at which its P(sooner) (:func:`p_sooner`, on what is left of its
    predicted wait `q` given the wait so far) passes the level.  `p_at_submit`: the
    probability policy's P(sooner) of the same jobs where the caller has it (computed
    here where not)."""
    at = np.full((len(levels), len(wait_s)), np.nan)
    # at the submit, every job as the probability policy decides it (what is left of a wait
    # not begun is the wait): no copy of a million jobs' draws
    p0 = p_sooner(q, c, run_h, run_guess_h) if p_at_submit is None else p_at_submit
    for k, lv in enumerate(levels):
        at[k, p0 >= lv] = 0.0
    for e in moments_s:
        m = c.takes & (wait_s > e) & np.isnan(at).any(axis=0)
        if not m.any():
            continue
        idx = np.flatnonzero(m)
        p = p_sooner(remaining(q[idx], np.full(len(idx), e)),
                     Costed(c.hours[idx], c.jpy[idx], c.takes[idx], c.ratio[idx]),
                     run_h[idx], run_guess_h[idx])
        for k, lv in enumerate(levels):
            new = idx[(p >= lv) & np.isnan(at[k, idx])]
            at[k, new] = e
    return at


def expected_saving(q: np.ndarray, c: Costed, run_h: np.ndarray, run_guess_h: np.ndarray
                    ) -> np.ndarray:
    """The hours the VM is expected to save each job, over the draws and guesses P(sooner)
    is taken over (:func:`decision_draws`): its predicted mean wait (`q`, seconds, the
    quantile function's integral) less the VM's time beyond the guessed run; NaN where the
    VM does not take the job or nothing is predicted."""
    fixed, ratio = (a.mean(axis=1) for a in decision_draws(c, run_h))
    with np.errstate(invalid="ignore"):
        guess = np.nanmean(np.where(np.isnan(run_guess_h).all(axis=1)[:, None], 0.0,
                                    run_guess_h), axis=1)
    lv = LEVELS.astype(np.float64)
    mean_wait = ((q[:, 1:] + q[:, :-1]) / 2 * np.diff(lv)).sum(axis=1) / 3600
    out = mean_wait - fixed - guess * (ratio - 1)
    return np.where(c.takes & ~np.isnan(run_guess_h).all(axis=1), out, np.nan)


def summary(burst: np.ndarray, turnaround_h: np.ndarray, c: Costed,
            flow_jpy: np.ndarray) -> dict:
    """The sums of one policy: jobs burst, turnaround saved (total at the modes with its
    10-90% band over the draws; median and 90th percentile per burst job), JPY spent on the
    VMs (and net of the on-premise fees not paid), JPY per hour saved, the share of burst
    jobs made later."""
    b = burst & c.takes
    n = int(b.sum())
    # Masked sums, not products with a 0/1 vector (w @ c.jpy): BLAS adds in its kernel's
    # order, and OpenBLAS picks its kernel by the CPU; a sum over 11,000 jobs differed in
    # its 15th digit between two VMs (the figures' tables must be the same bytes from the
    # same data).  A 2-D sum down axis 0 adds the rows in order; a 1-D one pairwise, as
    # NumPy always does.
    tot_saved = float(turnaround_h[b].sum()) - c.hours[b].sum(axis=0)
    tot_jpy = c.jpy[b].sum(axis=0)

    def band(v: np.ndarray):
        return np.percentile(v[1:], [10, 90]) if v.size > 1 else (v[0], v[0])
    lo, hi = band(tot_saved)
    jlo, jhi = band(tot_jpy)
    per = turnaround_h[b] - c.hours[b, 0] if n else np.zeros(0)
    return {"jobs_burst": n, "share_made_later": float(np.mean(per < 0)) if n else math.nan,
            "hours_saved": float(tot_saved[0]),
            "hours_saved_p10": float(lo), "hours_saved_p90": float(hi),
            "median_saved_h": float(np.median(per)) if n else math.nan,
            "p90_saved_h": float(np.percentile(per, 90)) if n else math.nan,
            "jpy_spent": float(tot_jpy[0]), "jpy_spent_p10": float(jlo),
            "jpy_spent_p90": float(jhi),
            "onprem_jpy_not_paid": float(flow_jpy[b].sum()),
            "jpy_per_hour_saved": float(tot_jpy[0] / tot_saved[0])
            if tot_saved[0] > 0 else math.nan}


#: Shares of burst jobs made later at which a ranking's hours are read (frontier).
FRONTIER_LATER = (0.05, 0.08, 0.10, 0.15)


def frontier(score: np.ndarray, saved_h: np.ndarray, takes: np.ndarray,
             later_at=FRONTIER_LATER, least: int = 30) -> list[float]:
    """How well `score` ranks the jobs for bursting, apart from where its levels sit: for
    each share in `later_at`, the most of the perfect policy's hours (the sum of the
    positive `saved_h`, turnaround saved per job, among `takes`, scored or not) that "burst
    where score >= t" saves over every t, among those that burst at least `least` jobs and
    make at most that share of them later; NaN where none does.  Two predictors compared at
    one p can differ only in how their P(sooner) is scaled; on this frontier they cannot."""
    perfect = float(saved_h[takes & (saved_h > 0)].sum())
    ok = takes & ~np.isnan(score)  # a job without a score is never burst by it
    s, v = score[ok], saved_h[ok]
    order = np.argsort(-s, kind="stable")
    s, v = s[order], v[order]
    k = np.arange(1, len(v) + 1)
    later = np.cumsum(v < 0) / k
    hours = np.cumsum(v)
    cut = np.append(s[1:] != s[:-1], True) & (k >= least)  # every job at a tie goes together
    out = []
    for share in later_at:
        m = cut & (later <= share)
        out.append(float(hours[m].max() / perfect) if m.any() and perfect > 0 else math.nan)
    return out


#: The least chance of coming back later a gain is weighed against: a model's certainty is
#: not a job's.  Ranking every job predicted sure to be sooner alike (as infinitely good)
#: lost RICC's D96s_v5 every cut at 10% later; read at 0.001 they keep 0.278 of the perfect
#: hours, at 0.01 only 0.074 (KTH's frontier the same at all three).
LEAST_LATER = 1e-3


def later_weight(p):
    """The chance of coming back later a gain is weighed against: 1 - P(sooner), at least
    LEAST_LATER (arrays or a number)."""
    return np.maximum(1 - p, LEAST_LATER)


def gain_rank(p: np.ndarray, saving_h: np.ndarray) -> np.ndarray:
    """The hours each job is expected to save per unit of its chance of coming back later
    (:func:`later_weight`; the gain policy bursts where this passes its `gain_h`); NaN where
    nothing is expected."""
    return saving_h / later_weight(p)


def decisions(p_levels: list[float], thresholds_h: list[float], p: np.ndarray,
              median_h: np.ndarray, queue_state_h: np.ndarray, turnaround_h: np.ndarray,
              c: Costed, gains_h: tuple[float, ...] | list[float] = (),
              saving_h: np.ndarray | None = None) -> list[tuple[dict, np.ndarray]]:
    """Every policy's burst mask, with its row's keys (policy, p_sooner_min, threshold_h,
    gain_h): probability at each p, gain at each of `gains_h` (on the expected `saving_h`),
    threshold and queue state at each threshold, and perfect."""
    none = {"p_sooner_min": math.nan, "threshold_h": math.nan, "gain_h": math.nan}
    out = [(none | {"policy": "probability", "p_sooner_min": q}, p >= q) for q in p_levels]
    if len(gains_h) and saving_h is not None:
        rank = gain_rank(p, saving_h)
        out += [(none | {"policy": "gain", "gain_h": g}, (p > 0) & (rank >= g))
                for g in gains_h]
    for name, wait in (("threshold", median_h), ("queue state", queue_state_h)):
        out += [(none | {"policy": name, "threshold_h": t}, wait > t) for t in thresholds_h]
    sooner = turnaround_h - c.hours[:, 0] > 0
    out.append((none | {"policy": "perfect"}, sooner))
    return [(k, m & c.takes) for k, m in out]
