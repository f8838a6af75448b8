"""Why the replay's confident burst jobs come back later: the wait, or the run.

A burst job comes back later when the VM's time, fixed hours (deployment, staging) plus its
run x the VM's speed ratio, is longer than the wait it skipped plus its run on premise.
Where the VM is faster than the machine (ratio < 1), a long run repays the fixed hours
whatever the wait, so P(sooner) leans on the run time guessed at the submit
(burstbench.replay.run.run_guess) as much as on the predicted wait.

For the probability policies' burst jobs on one VM, this prints how many came back later
and of those, how many would have been later at their guessed run too (their mean guess:
the wait alone was short) and how many were later only because they ran shorter than
guessed; then, over every job, how often a run fell below its guess at each level, by the
bucket of its lowest (10%) guess: where the guess is calibrated each column reads its level
in every row.

    .venv/bin/python comparisons/replay_later_why.py \\
        --log ../shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz
    .venv/bin/python comparisons/replay_later_why.py \\
        --log ../shared/workloads/RICC-2010-2.swf.gz \\
        --machine-nodes 1024 --procs-per-node 8 --shared-nodes

Results: comparisons/README.md, "Why the confident burst jobs come back later".
"""

from __future__ import annotations

import argparse

import numpy as np
from replay_closed_loop import log_arguments, prepared  # comparisons/ is on sys.path

from burstbench.replay import policy, run

LEVELS = (0.9, 0.95, 0.98)
BUCKETS_H = (0.1, 1.0, 4.0, 12.0)  # the 10% guess's buckets (h)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    log_arguments(ap)
    a = ap.parse_args()

    pp = prepared(a)
    c, guess_h = pp.costed, pp.jobs.guess_h
    run_h, wait_h = pp.jobs.run / 3600, pp.jobs.wait / 3600
    q = pp.jobs.predict().q
    p = policy.p_sooner(q, c, run_h, guess_h)
    # at the inputs' modes (column 0), where the replay judges a job later
    ratio = c.ratio[:, 0]
    fixed = c.hours[:, 0] - run_h * ratio
    later = wait_h + run_h < c.hours[:, 0]
    with np.errstate(invalid="ignore"):
        at_guess = fixed + np.nanmean(guess_h, axis=1) * (ratio - 1)  # VM hours beyond it
    print(f"{a.log}: {len(run_h):,} jobs, {pp.vm}: fixed hours {np.median(fixed):.2f}, "
          f"speed ratio {np.median(ratio):.3f} (medians, at the inputs' modes)\n")
    print("| P(sooner) at least | burst | later | of them, later at the guessed run too "
          "| later only as the run was shorter | burst jobs that ran too short to repay the "
          "fixed hours |\n|---:|---:|---:|---:|---:|---:|")
    for lv in LEVELS:
        b = c.takes & (p >= lv)
        lb = b & later
        short = run_h[b] * (1 - ratio[b]) < fixed[b]
        print(f"| {lv:g} | {int(b.sum()):,} | {int(lb.sum()):,} ({later[b].mean():.1%}) | "
              f"{int((lb & (wait_h < at_guess)).sum()):,} | "
              f"{int((lb & (wait_h >= at_guess)).sum()):,} | {short.mean():.0%} |")
    ok = ~np.isnan(guess_h).any(axis=1)
    lows = np.searchsorted(BUCKETS_H, guess_h[:, 0], side="right")
    edges = (0.0, *BUCKETS_H, np.inf)
    print("\n| 10% guess (h) | jobs | " + " | ".join(
        f"run under its {lv:g} guess" for lv in run.RUN_LEVELS) + " |\n|---|---:|"
        + "---:|" * len(run.RUN_LEVELS))
    for k in range(len(edges) - 1):
        m = ok & (lows == k)
        if m.any():
            share = (run_h[m, None] < guess_h[m]).mean(axis=0)
            print(f"| {edges[k]:g} to {edges[k + 1]:g} | {int(m.sum()):,} | "
                  + " | ".join(f"{s:.3f}" for s in share) + " |")


if __name__ == "__main__":
    main()
