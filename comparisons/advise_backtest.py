"""The live advice backtested on a log: how well `burstbench advise` predicts the waits of the
jobs pending at a moment.

At `--moments` moments spread over the log's second half (by submits, 55% to 98%), the log
as a queue then: the jobs submitted and not started are pending (the scheduler's estimate not
given: simulated, as where a scheduler gives none), those that have ended are the history (the
last `--history` of them), the rest running.  Each pending job's predicted wait from the moment
(the advice's quantiles) is scored against its real one: the pinball loss on log(1 + wait),
the rank correlation of the median, the share of real waits at or under the 50% and 90%
quantiles, and the jobs the advice bursts (P(sooner) >= 0.9, the default classes).
`--apart` sets the pending jobs' spacing as the predictor reads them (advice.PENDING_APART_S;
0: all at the moment, as before ebf308e).

    .venv/bin/python comparisons/advise_backtest.py --apart 0 0.001

Results: comparisons/README.md, "The live advice backtested".
"""

from __future__ import annotations

import argparse

import numpy as np
from advise_round import log_job  # comparisons/ is on sys.path: these run as scripts

from burstbench.advise import advice, queue
from burstbench.replay import logs
from burstbench.replay.pricing import pricing
from burstbench.wait import score

NOW = 1.8e9  # the log's time 0, as a Unix time


def moment(j, t: float, history: int) -> tuple[queue.Snapshot, np.ndarray]:
    """The log `j` (its jobs, s from its start) as a queue at `t`, and the pending jobs' real
    waits from `t`, s."""
    known = j[j["submit"] <= t]
    jobs = [log_job(r, NOW, NOW + t) for r in known.itertuples()]
    hist, run, pend = ([job for job in jobs if job.state == state]
                       for state in ("finished", "running", "pending"))
    waits = (known["submit"] + known["wait"] - t)[[job.state == "pending" for job in jobs]]
    nodes = int(j["procs"].max())
    snap = queue.Snapshot("slurm", "a log backtested", NOW + t, run + pend, hist[-history:],
                          {"onprem": [f"n{k}" for k in range(nodes)], "cloud": ["c0"]},
                          "none (simulated)", "the log")
    return snap, waits.to_numpy(float)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", default="../shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz")
    ap.add_argument("--moments", type=int, default=24)
    ap.add_argument("--history", type=int, default=20000)
    ap.add_argument("--apart", type=float, nargs="+", default=[advice.PENDING_APART_S])
    a = ap.parse_args()
    if a.moments < 1 or a.history < 1 or any(not x >= 0 for x in a.apart):
        ap.error("--moments and --history must be at least 1, --apart at least 0")
    j = logs.read_log(a.log).jobs
    rules = advice.rules(None, 10.0, 30.0)
    pr = pricing([r.cls for r in rules], draws=10)
    times = np.quantile(j["submit"].to_numpy(float), np.linspace(0.55, 0.98, a.moments))
    snaps = [moment(j, t, a.history) for t in times]
    print("| pending jobs read | pending | pinball | rank correlation of the median | "
          "q50 covers | q90 covers | burst |\n|---|---:|---:|---:|---:|---:|---:|")
    for apart in a.apart:
        advice.PENDING_APART_S = apart
        qs, bursts = [], 0
        for snap, _ in snaps:
            out = advice.advise(snap, pr, rules, cloud="cloud")
            qs.append(out.q)
            bursts += int((out.table["verdict"] == "burst").sum())
        q, w = np.vstack(qs), np.concatenate([waits for _, waits in snaps])
        print(f"| {apart:g} s apart | {len(w):,} | {score.pinball(q, w):.3f} | "
              f"{score.rank_correlation(q[:, 20], w):.3f} | {np.mean(w <= q[:, 20]):.3f} | "
              f"{np.mean(w <= q[:, 36]):.3f} | {bursts:,} |", flush=True)


if __name__ == "__main__":
    main()
