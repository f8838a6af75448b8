"""The replay's probability policies decided again while each job waits, as `burstbench
advise --watch` does: how many more jobs burst, how many of them come back later, and the
hours they save.

The replay decides each job once, at its submit.  A live queue is read again every few
minutes, and a job still pending has waited: what is left of its wait is its predicted wait
given the wait so far (burstbench.wait.history.remaining, the advice's rule).  Here each job
is decided at its submit and again at each of `--steps` moments after it while it is still
pending (the log's own start: the queue as it ran, not thinned by the jobs burst), from 5
minutes on, each `--growth` times the last; it bursts at the first at which P(sooner) passes
the level, its run guessed at its submit.  It comes back later where what was left of its
wait plus its run on premise is shorter than the VM's time.  Hours saved: over every burst
job, what was left of its wait plus its run less the VM's time, at the inputs' modes.

    .venv/bin/python comparisons/replay_rewatch.py \\
        --log ../shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz
    .venv/bin/python comparisons/replay_rewatch.py --log ../shared/workloads/RICC-2010-2.swf.gz \\
        --machine-nodes 1024 --procs-per-node 8 --shared-nodes

The replay's ``watch`` rows are these (burstbench.replay.policy.watched, at its default
moments); here on one VM, the moments varied (`--first`, `--steps`, `--growth`; or `--every`).

Results: comparisons/README.md, "Decided again while a job waits".
"""

from __future__ import annotations

import argparse

import numpy as np
from replay_closed_loop import log_arguments, prepared  # comparisons/ is on sys.path

from burstbench.replay import policy

LEVELS = (0.9, 0.95, 0.98)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    log_arguments(ap)
    ap.add_argument("--first", type=float, default=300.0, help="the first moment, s")
    ap.add_argument("--steps", type=int, default=40, help="moments after the submit")
    ap.add_argument("--growth", type=float, default=1.25, help="each moment over the last")
    ap.add_argument("--every", type=float, default=0.0,
                    help="s: moments this far apart instead (as the advice's --watch)")
    a = ap.parse_args()
    if a.steps < 0 or not a.growth > 1 or not a.first > 0 or not a.every >= 0:
        ap.error("--steps must be at least 0, --growth above 1, --first above 0, --every "
                 "at least 0")

    pp = prepared(a)
    c, guess_h = pp.costed, pp.jobs.guess_h
    wait, run_h = pp.jobs.wait, pp.jobs.run / 3600
    q = pp.jobs.predict().q
    moments = tuple(a.every * np.arange(1, a.steps + 1) if a.every else
                    a.first * a.growth ** np.arange(a.steps))
    at = policy.watched(q, c, run_h, guess_h, wait, list(LEVELS), moments)
    print(f"{a.log}: {len(wait):,} jobs on {pp.vm}; {len(moments)} moments, up to "
          f"{(moments[-1] if moments else 0) / 86400:.1f} days after the submit\n")
    print("| P(sooner) at least | decided | burst | of them later | hours saved | "
          "median wait before the burst (h) |\n|---:|---|---:|---:|---:|---:|")
    for k, lv in enumerate(LEVELS):
        for name, b in (("at the submit", at[k] == 0.0), ("while it waits", ~np.isnan(at[k]))):
            e = np.where(b, at[k], 0.0)
            saved = (wait - e) / 3600 + run_h - c.hours[:, 0]
            n = int(b.sum())
            print(f"| {lv:g} | {name} | {n:,} | {np.mean(saved[b] < 0) if n else np.nan:.3f} | "
                  f"{saved[b].sum():,.0f} | {np.median(e[b]) / 3600 if n else np.nan:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
