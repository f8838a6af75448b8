"""The queue wait's predictors, each against the real waits of a log, and what they buy.

For a log (the KTH SP2 log by default): every step of the predictor (burstbench.wait.predict)
beside the old queue-state one, the scheduler's estimate alone and the history alone: the rank
correlation of its median with the real wait and its coverage at 10, 50 and 90% (the
calibration, by the randomized probability integral transform).  Then the re-simulation
against the log (the textbook's EASY rules and AccaSim's, replicated, without bursting: rank
correlation, mean ratio), and the policies at P(sooner) >= p, at an expected saving >= h x
P(later) and on thresholds beside the perfect policy, per VM: jobs burst, the share made
later, the share of the perfect policy's hours, JPY; and each ranking's frontier
(burstbench.replay.policy.frontier), the measure to compare predictors by: at one p, two
can differ only in how their P(sooner) is scaled.

    .venv/bin/python comparisons/wait_predictors.py
    .venv/bin/python comparisons/wait_predictors.py --log ../shared/workloads/RICC-2010-2.swf.gz \\
        --machine-nodes 1024 --procs-per-node 8 --shared-nodes --jobs 300000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", default=str(ROOT / ".." / "shared" / "workloads" /
                                         "KTH-SP2-1996-2.1-cln.swf.gz"))
    ap.add_argument("--machine-nodes", type=int, default=0)
    ap.add_argument("--procs-per-node", type=float, default=0)
    ap.add_argument("--shared-nodes", action="store_true")
    ap.add_argument("--jobs", type=int, default=0, help="the log's first N jobs only")
    args = ap.parse_args()
    from burstbench.replay import logs, run
    from burstbench.wait import easy, score

    lg = logs.read_log(args.log)
    if args.jobs:
        lg.jobs = lg.jobs.iloc[:args.jobs].reset_index(drop=True)
    t = time.perf_counter()
    r = run.replay(lg, machine_nodes=args.machine_nodes, procs_per_node=args.procs_per_node,
                   shared_nodes=args.shared_nodes)
    took = time.perf_counter() - t
    pd.set_option("display.width", 200)
    print(f"{lg.machine}: {len(lg.jobs):,} jobs, replayed in {took:.1f} s; the queue: "
          f"{r.capacity:,} {r.queue_unit} ({r.capacity_how})\n")
    print("The predictors against the real waits:")
    print(r.predictors.round(3).to_string(index=False))
    print("\nThe predictor's calibration:")
    print(r.calibration.round(3).to_string(index=False))
    jb = run.read_jobs(lg, args.procs_per_node, args.machine_nodes, args.shared_nodes)
    s, w, run_s, plan, n = jb.submit, jb.wait, jb.run, jb.plan, jb.queue_n
    print("\nThe queue re-simulated without bursting, against the log's waits:")
    for rules in easy.RULES:
        t = time.perf_counter()
        sim = easy.simulate(s, n, run_s, plan, r.capacity, rules) - s
        print(f"  {rules:8s} rank correlation {score.rank_correlation(sim, w):.3f}, mean "
              f"{sim.mean() / w.mean():.2f}x the log's ({time.perf_counter() - t:.2f} s)")
    rows = r.rows.copy()
    rows["of_perfect"] = rows["hours_saved"] / rows["perfect_hours_saved"]
    keep = ["vm", "policy", "p_sooner_min", "gain_h", "threshold_h", "jobs_burst",
            "share_made_later",
            "of_perfect", "hours_saved", "stays_hours_saved", "jpy_spent"]
    print("\nThe policies:")
    print(rows[keep].round(3).to_string(index=False))
    print("\nEach ranking's frontier: the most of the perfect policy's hours that bursting the "
          "jobs it ranks highest saves, making at most 5, 8, 10, 15% of them later (free of "
          "where P(sooner)'s levels sit):")
    print(r.frontier.round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
