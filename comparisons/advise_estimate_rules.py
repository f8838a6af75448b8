"""Ways the live advice could read the scheduler's estimate, scored on a log's pending jobs.

At the moments of `advise_backtest.py` (the same queues, the same emulated estimates), the
advice is run twice: as f0c50f4 read a job with the scheduler's estimate (as submitted now,
that estimate calibrated as the history's simulated ones: "read now") and as it reads every
job now (at its submit, what is left given the wait so far: "at the submit", the estimate
not read).  Then each rule's quantiles, built from those two, the estimate and nothing else,
are scored against the real waits from the moment: the pinball loss on log(1 + wait), the
rank correlation of the median, the share of real waits at or under q10, q50 and q90.  Also
how well the estimate alone and the wait so far rank the real waits (Spearman).

    .venv/bin/python comparisons/advise_estimate_rules.py --estimates easy
    .venv/bin/python comparisons/advise_estimate_rules.py --estimates 0 \
        --log ../shared/workloads/RICC-2010-2.swf.gz

Results: comparisons/README.md, "the scheduler's estimate: a veto, not the wait".
"""

from __future__ import annotations

import argparse

import numpy as np

# comparisons/ is on sys.path: these run as scripts
from advise_backtest import moment, queue_arguments, queues
from scipy.stats import spearmanr

from burstbench.advise import advice
from burstbench.wait import score
from burstbench.wait.history import LEVELS


def both_paths(snap, pr, rules) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The pending jobs' quantiles from now: read now, the estimate the wait (as f0c50f4),
    and at the submit (as now), with the job ids in the table's order."""
    at_submit = advice.advise(snap, pr, rules, cloud="cloud")
    ids = list(at_submit.table["job"])
    now = advice.advise(snap, pr, rules, cloud="cloud", estimates_read_now=True)
    if list(now.table["job"]) != ids:
        raise RuntimeError("the two readings listed different jobs")
    return now.q, at_submit.q, ids


def mixture(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The quantiles at LEVELS of the even mixture of two distributions, each given by its
    quantiles at LEVELS (piecewise linear between them)."""
    fine = np.linspace(0.0, 1.0, 201)
    out = np.empty_like(a)
    for i in range(len(a)):
        pts = np.concatenate([np.interp(fine, LEVELS, a[i]), np.interp(fine, LEVELS, b[i])])
        pts.sort()
        out[i] = np.interp(LEVELS, (np.arange(len(pts)) + 0.5) / len(pts), pts)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    queue_arguments(ap, "easy")
    a, j, rules, pr, times = queues(ap, need_estimates=True)
    qn, qs, w, e, s = [], [], [], [], []
    for t in times:
        snap, waits = moment(j, t, a.history, a.estimates)
        now, sub, ids = both_paths(snap, pr, rules)
        by_id = {x.id: x for x in snap.jobs}
        qn.append(now)
        qs.append(sub)
        w += list(waits.loc[ids])
        e += [by_id[i].estimate - snap.now for i in ids]
        s += [snap.now - by_id[i].submit for i in ids]
    n, sub, wait, est, so_far = (np.vstack(qn), np.vstack(qs), np.array(w), np.array(e),
                                 np.array(s))
    covers = np.mean(wait <= est + 1e-3)  # a millisecond: the times' rounding at 1.8e9 s
    print(f"{len(wait):,} pending jobs; the estimate covers {covers:.3f} of "
          f"their real waits, {np.mean(est > 86400):.3f} of them more than a day out; "
          f"Spearman with the real wait: the estimate "
          f"{spearmanr(est, wait)[0]:.3f}, the wait so far {spearmanr(so_far, wait)[0]:.3f}")
    rows = {"read now (f0c50f4)": n, "at the submit, the estimate not read": sub,
            "their even mixture": mixture(n, sub),
            "their average in log(1 + wait)": np.expm1((np.log1p(n) + np.log1p(sub)) / 2),
            "the larger of the two at each level": np.maximum(n, sub),
            "at the submit, capped at the estimate": np.minimum(sub, est[:, None])}
    print("| rule | pinball | rank correlation of the median | q10 covers | q50 covers | "
          "q90 covers |\n|---|---:|---:|---:|---:|---:|")
    for name, q in rows.items():
        print(f"| {name} | {score.pinball(q, wait):.3f} | "
              f"{score.rank_correlation(q[:, 20], wait):.3f} | {np.mean(wait <= q[:, 4]):.3f} | "
              f"{np.mean(wait <= q[:, 20]):.3f} | {np.mean(wait <= q[:, 36]):.3f} |")


if __name__ == "__main__":
    main()
