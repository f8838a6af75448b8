"""A log replayed against the burst decision's machines and prices: every logged job's wait
predicted at its submit (burstbench.wait.predict), every job priced on every VM in a region
and billing, the policies decided (burstbench.replay.policy), the jobs that stay re-simulated
(burstbench.replay.stays), one summary row per VM and policy.

The on-premise system is one of Flow's (its node-hour fee and its node Triad, from
data/reference/ as burstbench.cost.machines builds it); the log's jobs keep their node counts
(from their processors and the log's node size) and their run times, as if they had run on it.
Where the log's jobs share nodes (``shared_nodes``), the queue is a queue of processors while a
burst job takes whole VM nodes.  The uncertain inputs are the decision's
(burstbench.cost.uncertainty): deployment, the WAN, Flow's Triad fraction, and for a class
mapped to the BICCG model the model's error, the iterations and the published latencies;
column 0 of every job x draw matrix is their modes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from burstbench.core.checks import ParamError
from burstbench.cost import uncertainty as u
from burstbench.replay import policy
from burstbench.replay.logs import Log
from burstbench.replay.pricing import pricing
from burstbench.replay.stays import Stays
from burstbench.wait import calibrate, history, score
from burstbench.wait.predict import Predicted, predict
from burstbench.wait.state import predicted_wait

#: Thresholds swept by default, hours: 10 minutes to 2 days.
THRESHOLDS_H = (1 / 6, 1.0, 4.0, 12.0, 24.0, 48.0)
#: The levels at which a job's run time is guessed at its submit, equally likely.
RUN_LEVELS = (0.1, 0.3, 0.5, 0.7, 0.9)
#: Run-time guesses are recalibrated in groups of their median (s: 6 min, 1 h, 4 h, 12 h):
#: on RICC's first 300,000 jobs, pooled, 37% of the jobs guessed at 12 h and more ran
#: shorter than their 10% guess (6% of those guessed under 6 min).
RUN_EDGES_S = (360.0, 3600.0, 4 * 3600.0, 12 * 3600.0)
#: A run time is guessed from the user's last USER_RUNS jobs that ended, where there were at
#: least USER_MIN.  The user's last 20 of the same requested time came closer (median error
#: 0.31 against 0.45 in log run time on RICC's first 300,000 jobs) but more narrowly, and
#: made more burst jobs later (P(sooner) >= 0.9 on HB120-16rs_v3: 12.9% against 11.3%).
USER_RUNS, USER_MIN = 50, 5
#: The policies the re-simulation's later share (in the queue the others left) is measured for.
THINNED_FOR = ("probability", "gain")
#: The policies a pick is made from.  Not the gain policies, though they rank better on the
#: replayed log: decided in the queue their own decisions thin (comparisons/
#: replay_closed_loop.py), the gain at KTH's best 64 h made 28.6% of its burst jobs later
#: there, P(sooner) >= 0.9 9.1%; on RICC's first 60,000 jobs the gain policies 32-41%, the
#: probability ones 16.5-29%.  A live queue is that loop.
PICKABLE = ("probability",)
#: The columns of replay_policies.csv, first (the interface), then the bands and details.
COLUMNS = ("vm", "policy", "p_sooner_min", "threshold_h", "gain_h", "jobs_burst",
           "share_made_later",
           "hours_saved", "perfect_hours_saved", "jpy_spent", "stays_hours_saved")


@dataclass
class Replayed:
    """What a replay found: the summary rows, the log, what it assumed and could not use, how
    well the wait was predicted (`calibration`, `predictors`) and how far the re-simulation
    is from the log (`simulation`)."""

    rows: pd.DataFrame
    log: Log
    system: str
    fee: float
    capacity: int
    capacity_how: str
    procs_per_node: float
    predicted: Predicted
    draws: int
    ranges: dict[str, u.Range]
    classes: list[policy.LoggedClass]
    calibration: pd.DataFrame
    predictors: pd.DataFrame
    simulation: dict[str, float]
    procs_how: str = ""
    queue_unit: str = "nodes"
    left_on_premise: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    frontier: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass
class Jobs:
    """A log's jobs as the replay reads them, arrays in submit order (times in s): the nodes
    each asks for, its size in the queue's `unit` (nodes, or processors where jobs share
    nodes), the machine's size in that unit, the plan the re-simulation schedules by (the
    requested time, else the run), each job's run guessed at its submit (h, jobs x
    RUN_LEVELS) and its queue and partition numbers (`categories`, predict's keywords)."""

    submit: np.ndarray
    wait: np.ndarray
    run: np.ndarray
    req: np.ndarray
    plan: np.ndarray
    user: np.ndarray
    nodes: np.ndarray
    queue_n: np.ndarray
    unit: str
    capacity: int
    capacity_how: str
    peak: int
    procs_per_node: float
    procs_how: str
    guess_h: np.ndarray
    categories: dict[str, np.ndarray | None]

    def predict(self, seed: int = 2023, learn: bool = True, progress=None) -> Predicted:
        """Every job's wait predicted at its submit from the log as it was."""
        return predict(self.submit, self.queue_n, self.wait, self.run, self.req, self.user,
                       self.capacity, learn=learn, seed=seed, progress=progress,
                       queue=self.categories["queue"], partition=self.categories["partition"])


def read_jobs(log: Log, procs_per_node: float = 0, machine_nodes: int = 0,
              shared_nodes: bool = False) -> Jobs:
    """`log`'s jobs as `replay` reads them (its parameters of those names); ParamError, one
    line, for a machine given wrong or smaller than the largest job."""
    if procs_per_node < 0 or machine_nodes < 0:
        raise ParamError(f"--procs-per-node ({procs_per_node:g}) and --machine-nodes "
                         f"({machine_nodes:g}) must be positive (0: from the log)")
    j = log.jobs
    if not len(j):
        raise ParamError("the log has no job to replay")
    ppn = float(procs_per_node or log.procs_per_node or 1)
    ppn_how = ("given" if procs_per_node else "the log's header (MaxProcs / MaxNodes)"
               if log.procs_per_node else "none known: 1 assumed")
    procs = j["procs"].to_numpy(float)
    nodes = np.where(j["nodes"] > 0, j["nodes"], np.ceil(procs / ppn)).astype(np.int64)
    submit, wait, run = (j[c].to_numpy(float) for c in ("submit", "wait", "run"))
    req = j["req_time"].to_numpy(float)
    user = j["user"].to_numpy(np.int64) if "user" in j else np.full(len(j), -1, np.int64)
    # the queue: of nodes, or of processors where jobs share nodes
    queue_n = np.maximum(np.ceil(procs), 1).astype(np.int64) if shared_nodes else nodes
    unit = "processors" if shared_nodes else "nodes"
    peak = peak_nodes(submit + wait, submit + wait + run, queue_n)
    capacity, cap_how = _capacity(log, machine_nodes, ppn, shared_nodes, peak)
    if queue_n.max() > capacity:
        raise ParamError(f"the machine's {capacity:,} {unit} ({cap_how}) are fewer than the "
                         f"largest job's {int(queue_n.max()):,} (give --machine-nodes"
                         + (", or --procs-per-node where its jobs count processors)"
                            if ppn_how.startswith("none") and not shared_nodes else ")"))
    guess_h = run_guess(submit, submit + wait, run, req, queue_n / capacity, user) / 3600
    cats = {"queue": j["queue"].to_numpy(np.int64),
            "partition": j["partition"].to_numpy(np.int64) if "partition" in j else None}
    return Jobs(submit, wait, run, req, np.where(np.isnan(req), run, req), user, nodes,
                queue_n, unit, capacity, cap_how, peak, ppn, ppn_how, guess_h, cats)


def peak_nodes(start: np.ndarray, end: np.ndarray, nodes: np.ndarray) -> int:
    """The most nodes the log's jobs held at once."""
    t = np.concatenate([start, end])
    dn = np.concatenate([nodes, -nodes])
    order = np.lexsort((dn, t))  # at a tie, ends (negative) before starts
    return int(np.cumsum(dn[order]).max()) if len(t) else 0


def replay(log: Log, *, runs_dir: Path | str = "", reference_dir: Path | str = "",
           system: str = "Flow Cloud System", procs_per_node: float = 0,
           machine_nodes: int = 0, shared_nodes: bool = False, thresholds_h=THRESHOLDS_H,
           p_sooner=policy.P_SOONER, gain_h=policy.GAIN_H, region: str = "East US",
           billing: str = "payg",
           storage: str = "pool per job", classes: list | None = None,
           job_input_gb: float = 10.0, job_output_gb: float = 30.0,
           deploy_minutes=(4.0, 5.0, 10.0), wan_mib_s=0, flow_fraction=0.793,
           flow_vm: str = "flow-cloud", draws: int = 40, seed: int = 2023,
           usd_jpy: float = 145.0, pool_min_tib: float = 4.0,
           pool_jobs_per_month: float = 30.0, egress_free_gb: float = 0.0,
           learn: bool = True, merits: list | None = None, progress=None) -> Replayed:
    """Replay `log` (see the module docstring); ParamError, one line, for a parameter given
    wrong.  `merits`: the benchmarks' figures of merit, read from `runs_dir` where None.
    `progress`, where given, is called with a line at each step."""
    say = progress or (lambda line: None)
    thresholds = policy.check_thresholds(thresholds_h)
    p_levels = policy.check_p_sooner(p_sooner)
    gains = policy.check_gain(gain_h)
    cls_list = policy.job_classes(classes, job_input_gb, job_output_gb)
    pr = pricing(cls_list, runs_dir=runs_dir, reference_dir=reference_dir, system=system,
                 region=region, billing=billing, storage=storage,
                 deploy_minutes=deploy_minutes, wan_mib_s=wan_mib_s,
                 flow_fraction=flow_fraction, flow_vm=flow_vm, draws=draws, seed=seed,
                 usd_jpy=usd_jpy, pool_min_tib=pool_min_tib,
                 pool_jobs_per_month=pool_jobs_per_month, egress_free_gb=egress_free_gb,
                 merits=merits)
    problems = list(pr.problems)
    fee = pr.fee

    say(f"reading {len(log.jobs):,} jobs: their sizes, the machine's, each job's run guessed "
        "at its submit")
    jb = read_jobs(log, procs_per_node, machine_nodes, shared_nodes)
    j, capacity, unit = log.jobs, jb.capacity, jb.unit
    submit, wait, run, req, plan, nodes, queue_n = (jb.submit, jb.wait, jb.run, jb.req,
                                                    jb.plan, jb.nodes, jb.queue_n)
    start, end = submit + wait, submit + wait + run
    if jb.peak > capacity:
        problems.append(f"the log's jobs held up to {jb.peak:,} {unit} at once, more than "
                        f"the machine's {capacity:,} ({jb.capacity_how}): the scheduler's "
                        "estimate and the re-simulation see a fuller machine than the log "
                        "ran on")

    say(f"predicting {len(j):,} waits (the scheduler's estimate, history"
        + (", a learned model" if learn else "") + ")")
    pred = jb.predict(seed, learn, say)
    problems += pred.notes
    guess_h = jb.guess_h
    qs_h = predicted_wait(submit, start, end, queue_n.astype(float), plan, capacity) / 3600
    run_h, wait_h = run / 3600, wait / 3600
    turnaround_h = wait_h + run_h
    flow_jpy = nodes * run_h * fee
    median_h = pred.quantile(0.5) / 3600
    cls = policy.assign(nodes, j["queue"].to_numpy(), cls_list)
    if (cls < 0).any():
        problems.append(f"{int((cls < 0).sum())} job(s) in no class: they stay on premise")
    if np.isnan(req).any():
        problems.append("the re-simulation plans the jobs without a requested time by their "
                        "run time")
    say("re-simulating the queue with every job")
    stays = Stays(submit, queue_n, run, plan, capacity, wait)
    rows, left, front = [], {}, []
    for vm, p in pr.vms():
        say(f"{vm}: pricing every job, P(sooner), the policies")
        costed = pr.costed(vm, p, nodes, run_h, cls, cls_list)
        left[vm] = int((~costed.takes).sum())
        p_vm = policy.p_sooner(pred.q, costed, run_h, guess_h)
        base = {"vm": vm, "region": region, "billing": billing, "storage": storage,
                "price_per_node_h": float(p.jpy_per_hour), "jobs_left_on_premise": left[vm]}
        vm_rows = []
        saving_h = policy.expected_saving(pred.q, costed, run_h, guess_h)
        decided = policy.decisions(p_levels, thresholds, p_vm, median_h, qs_h, turnaround_h,
                                   costed, gains, saving_h)
        # watch: decided again while each job waits; a job burst after waiting saves what
        # was left of its wait
        watch_s = policy.watched(pred.q, costed, run_h, guess_h, wait, p_levels,
                                 p_at_submit=p_vm)
        waited_h = {lv: np.nan_to_num(at) / 3600 for lv, at in zip(p_levels, watch_s)}
        decided[len(p_levels):len(p_levels)] = [
            ({"policy": "watch", "p_sooner_min": lv, "threshold_h": math.nan,
              "gain_h": math.nan}, ~np.isnan(at) & costed.takes)
            for lv, at in zip(p_levels, watch_s)]
        stays.prepare([mask for _, mask in decided],
                      [mask for keys, mask in decided if keys["policy"] in THINNED_FOR])
        for keys, burst_mask in decided:
            turn = turnaround_h - waited_h[keys["p_sooner_min"]] \
                if keys["policy"] == "watch" else turnaround_h
            vm_rows.append(base | keys | policy.summary(burst_mask, turn, costed, flow_jpy)
                           | {"stays_hours_saved": stays.gain_h(burst_mask),
                              "share_later_if_others_left": stays.later_if_others_left(
                                  burst_mask, costed.hours[:, 0])
                              if keys["policy"] in THINNED_FOR else math.nan})
        saved_h = turnaround_h - costed.hours[:, 0]
        for name, rank in (("P(sooner)", p_vm),
                           ("expected saving / P(later)", policy.gain_rank(p_vm, saving_h)),
                           ("predicted median wait", median_h), ("queue state", qs_h)):
            front.append({"vm": vm, "ranked_by": name} | dict(zip(
                [f"of_perfect_at_later_{x:g}" for x in policy.FRONTIER_LATER],
                policy.frontier(rank, saved_h, costed.takes))))
        perfect = next(r["hours_saved"] for r in vm_rows if r["policy"] == "perfect")
        rows += [r | {"perfect_hours_saved": perfect} for r in vm_rows]
        # freed before the next VM's are made: a million jobs' draws take a GB
        del costed, p_vm, saving_h, decided, saved_h, watch_s, waited_h
    if not rows:
        problems.append(f"no VM priced for {billing} in {region}: nothing replayed")
    out = pd.DataFrame(rows)
    if len(out):
        out = out[list(COLUMNS) + [c for c in out.columns if c not in COLUMNS]]
    return Replayed(out, log, system, fee, capacity, jb.capacity_how, jb.procs_per_node,
                    pred, draws, pr.ranges, cls_list, score.calibration(pred.q, wait, seed),
                    predictors(pred, qs_h * 3600, wait, seed), stays.validation(wait),
                    jb.procs_how, unit, left, problems, pd.DataFrame(front))


def _capacity(log: Log, machine_nodes: int, ppn: float, shared: bool,
              peak: int) -> tuple[int, str]:
    """The machine's size in the queue's units, and where it came from (`peak`: the most its
    jobs held at once)."""
    if machine_nodes:
        return (int(round(machine_nodes * ppn)), f"--machine-nodes x {ppn:g} processors a "
                "node") if shared else (int(machine_nodes), "given")
    if shared and log.max_procs:
        return int(log.max_procs), "the log's MaxProcs"
    if not shared and log.max_nodes:
        return int(log.max_nodes), "the log's MaxNodes"
    return max(peak, 1), "the most its jobs held at once"


def run_guess(submit: np.ndarray, start: np.ndarray, run: np.ndarray, req: np.ndarray,
               share: np.ndarray, user: np.ndarray) -> np.ndarray:
    """Each job's run time guessed at its submit, s, at RUN_LEVELS (jobs x levels): its
    requested time x the run-to-request ratios of its user's last USER_RUNS jobs that had
    ended, or where the user had fewer than USER_MIN, of the last jobs of its class (size x
    requested time); with no requested time, their run times; spanning 0 to the requested
    time; read at the levels at which the run times of the last jobs of a like guess (its
    median, grouped at RUN_EDGES_S) fell (burstbench.wait.calibrate.recalibrate_censored,
    those still running censored).  Where nothing had ended: the requested time, else NaN
    (the job stays)."""
    from burstbench.wait.predict import REQUEST_EDGES, SIZE_EDGES, buckets

    end = start + run
    cols = [int(np.flatnonzero(np.isclose(history.LEVELS, lv))[0]) for lv in RUN_LEVELS]
    has = ~np.isnan(req)
    cls = buckets(share, SIZE_EDGES) * 5 + np.where(has, buckets(req, REQUEST_EDGES), 4)
    value = np.where(has, run / np.where(has & (req > 0), req, 1.0), run)
    q, _ = history.window_quantiles(value, end, submit, cls, 4 * 5, 1000, 50)
    if (user >= 0).any():
        qu, own = history.window_quantiles(value, end, submit, user, int(user.max()) + 1,
                                           USER_RUNS, USER_MIN)
        q = np.where((own >= USER_MIN)[:, None], qu, q)
    guess = np.where(has[:, None], q * req[:, None], q)
    guess = np.where(np.isnan(guess) & has[:, None], req[:, None], guess)
    # a run may take anything from 0 (a crash, a bad input) to its requested time (the
    # limit): the guess spans them, so that the recalibration can read below the shortest
    # and above the longest of the runs it was made from
    guess[:, 0] = np.where(np.isnan(guess[:, 0]), np.nan, 0.0)
    guess[:, -1] = np.where(has, np.fmax(guess[:, -1], req), guess[:, -1])
    return calibrate.recalibrate_censored(guess, run, start, end, submit,
                                          edges=RUN_EDGES_S)[:, cols]


def predictors(pred: Predicted, queue_state_s: np.ndarray, wait: np.ndarray,
               seed: int) -> pd.DataFrame:
    """The predictor's steps, each against the real waits: the rank correlation of its
    median (a point predictor's value) and, for a distribution, its coverage at 10, 50 and
    90%."""
    points = [("queue state (node-seconds ahead / nodes)", queue_state_s),
              ("scheduler's estimate (EASY, requested times)", pred.estimate)]
    dists = [("history (wait / estimate, by class)", pred.history),
             ("learned (LightGBM), before recalibration", pred.learned),
             ("the predictor (learned, recalibrated)", pred.q)]
    out: list[dict] = [{"predictor": name, "rank_correlation":
                        score.rank_correlation(point, wait),
                        "jobs": int((~np.isnan(point)).sum())}
                       for name, point in points if not np.isnan(point).all()]
    for name, q in dists:
        if np.isnan(q[:, 0]).all():
            continue
        cal = score.calibration(q, wait, seed, (0.1, 0.5, 0.9))
        out.append({"predictor": name, "rank_correlation":
                    score.rank_correlation(q[:, 20], wait), "jobs": int(cal["jobs"].iloc[0])}
                   | {f"coverage_q{int(lv * 100)}": c
                      for lv, c in zip(cal["quantile"], cal["coverage"])})
    return pd.DataFrame(out)


def hours_label(h: float) -> str:
    """10 min, 2 h, 4 d."""
    if h < 1:
        return f"{h * 60:.0f} min"
    return f"{h:g} h" if h < 24 else f"{h / 24:g} d"
