"""The live advice backtested on a log: how well `burstbench advise` predicts the waits of the
jobs pending at a moment.

At `--moments` moments spread over the log's second half (by submits, 55% to 98%), the log
as a queue then: the jobs submitted and not started are pending (the scheduler's estimate not
given: simulated, as where a scheduler gives none), those that have ended are the history (the
last `--history` of them), the rest running.  Each pending job's predicted wait from the moment
(the advice's quantiles) is scored against its real one: the pinball loss on log(1 + wait),
the rank correlation of the median, the share of real waits at or under the 10%, 50% and 90%
quantiles, and the jobs the advice bursts (P(sooner) >= 0.9, the default classes).  One row,
this checkout's advice: run it at another commit to compare.  `--estimates` gives each
pending job the scheduler's estimate, emulated: `easy`, what a scheduler that plans with
requested times says at the moment (the easy rules run forward from the queue then, as
Slurm's backfill plans); a number SIGMA, its real start (the future, as a perfect
scheduler's guess of it), its error lognormal.  `--read-now`: a job with an estimate read
as the advice before 778287e read it (as submitted now, that estimate the wait, no veto).

    .venv/bin/python comparisons/advise_backtest.py
    .venv/bin/python comparisons/advise_backtest.py --log ../shared/workloads/RICC-2010-2.swf.gz
    .venv/bin/python comparisons/advise_backtest.py --estimates easy

Results: comparisons/README.md, "The live advice backtested".
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from advise_round import log_job  # comparisons/ is on sys.path: these run as scripts

from burstbench.advise import advice, queue
from burstbench.replay import logs
from burstbench.replay.pricing import pricing
from burstbench.wait import easy, score

NOW = 1.8e9  # the log's time 0, as a Unix time


def scheduled(run: list[queue.Job], pend: list[queue.Job], now: float, capacity: int
              ) -> np.ndarray:
    """What a scheduler that plans with requested times (Slurm's backfill, ``squeue
    --start``) says at `now` of each pending job's start, s from `now`: the running jobs
    ending at their start plus their requested time (at once where past it), the pending
    ones in submit order each running its requested time, under the easy rules
    (burstbench.wait.easy).  A job without a requested time is planned at an hour."""
    def req(job: queue.Job) -> float:
        return job.limit_s if job.limit_s == job.limit_s else 3600.0
    left = [max(job.start + req(job) - now, 1.0) for job in run]
    plan = np.array(left + [req(job) for job in pend], float)
    nodes = np.array([job.nodes for job in run + pend], np.int64)
    start = easy.simulate(np.zeros(len(plan)), nodes, plan, plan, capacity)
    return start[len(run):]


def moment(j, t: float, history: int, estimates: str = ""
           ) -> tuple[queue.Snapshot, pd.Series]:
    """The log `j` (its jobs, s from its start) as a queue at `t`, and the pending jobs' real
    waits from `t`, s, by job id.  `estimates`, the scheduler's estimate each pending job is
    given: none (""); "easy", the easy rules' plan with requested times at `t` (:func:`
    scheduled`); or a number, its real start, its wait from `t` times a lognormal error of
    that sigma (seeded by `t`)."""
    known = j[j["submit"] <= t]
    jobs = [log_job(r, NOW, NOW + t) for r in known.itertuples()]
    hist, run, pend = ([job for job in jobs if job.state == state]
                       for state in ("finished", "running", "pending"))
    waits = (known["submit"] + known["wait"] - t)[[job.state == "pending" for job in jobs]]
    waits.index = [job.id for job in pend]
    nodes = int(j["procs"].max())
    if estimates == "easy":
        for job, s in zip(pend, scheduled(run, pend, NOW + t, nodes)):
            job.estimate = NOW + t + s
    elif estimates:
        err = np.exp(float(estimates) * np.random.default_rng(int(t)).standard_normal(len(pend)))
        for job, w, x in zip(pend, waits.to_numpy(float), err):
            job.estimate = NOW + t + max(w, 0.0) * x
    snap = queue.Snapshot("slurm", "a log backtested", NOW + t, run + pend, hist[-history:],
                          {"onprem": [f"n{k}" for k in range(nodes)], "cloud": ["c0"]},
                          "none (simulated)", "the log")
    return snap, waits


def _sigma(text: str) -> bool:
    """Whether `text` is a number at least 0."""
    try:
        return float(text) >= 0
    except ValueError:
        return False


def queue_arguments(ap: argparse.ArgumentParser, estimates: str = "") -> None:
    """The log, its moments, the history and the emulated estimates (default `estimates`):
    the options of this script and of advise_estimate_rules.py."""
    ap.add_argument("--log", default="../shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz")
    ap.add_argument("--moments", type=int, default=24)
    ap.add_argument("--history", type=int, default=20000)
    ap.add_argument("--estimates", default=estimates, metavar="easy|SIGMA",
                    help="give the pending jobs the scheduler's estimate, emulated: 'easy', "
                    "the easy rules' plan at the moment with requested times (as Slurm's "
                    "backfill plans); a number, the real start, the wait from the moment "
                    f"times a lognormal error of this sigma (0: exact); default: "
                    f"{estimates or 'none'}")


def queues(ap: argparse.ArgumentParser, need_estimates: bool = False):
    """The options of :func:`queue_arguments` parsed and checked (a bad one: the parser's
    error; no estimates, one where `need_estimates`), the log's jobs, the classes and prices
    of the advice, and the moments."""
    a = ap.parse_args()
    if a.moments < 1 or a.history < 1:
        ap.error("--moments and --history must be at least 1")
    if a.estimates not in ("easy",) + (() if need_estimates else ("",)) \
            and not _sigma(a.estimates):
        ap.error(f"--estimates: 'easy' or a number at least 0, not {a.estimates!r}")
    j = logs.read_log(a.log).jobs
    rules = advice.rules(None, 10.0, 30.0)
    pr = pricing([r.cls for r in rules], draws=10)
    times = np.quantile(j["submit"].to_numpy(float), np.linspace(0.55, 0.98, a.moments))
    return a, j, rules, pr, times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    queue_arguments(ap)
    ap.add_argument("--read-now", action="store_true",
                    help="read a job with the scheduler's estimate as the advice before 778287e "
                    "did: as submitted now, that estimate the wait, no veto")
    a, j, rules, pr, times = queues(ap)
    snaps = [moment(j, t, a.history, a.estimates) for t in times]
    qs, real, burst, later = [], [], 0, 0
    for snap, waits in snaps:
        out = advice.advise(snap, pr, rules, cloud="cloud", estimates_read_now=a.read_now)
        qs.append(out.q)
        real.append(waits.loc[out.table["job"]].to_numpy(float))
        # a burst job comes back later where its real wait from now is under its VM's
        # break-even wait (at the guessed run)
        b = out.table[out.table["verdict"] == "burst"].merge(out.per_vm, on=["job", "vm"])
        burst += len(b)
        later += int((waits.loc[b["job"]].to_numpy(float) < 3600 * b["break_even_wait_h"]).sum())
    q, w = np.vstack(qs), np.concatenate(real)
    print("| pending | pinball | rank correlation of the median | q10 covers | q50 covers | "
          "q90 covers | burst | of them later |\n|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {len(w):,} | {score.pinball(q, w):.3f} | "
          f"{score.rank_correlation(q[:, 20], w):.3f} | {np.mean(w <= q[:, 4]):.3f} | "
          f"{np.mean(w <= q[:, 20]):.3f} | {np.mean(w <= q[:, 36]):.3f} | {burst:,} | "
          f"{later / max(burst, 1):.3f} |")


if __name__ == "__main__":
    main()
