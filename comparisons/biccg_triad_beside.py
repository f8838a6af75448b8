"""The time model's efficiency at the Triad measured beside a solve, or at one measured
minutes before it, as a run's Triad is.

The decision's time model prices a solve at `efficiency` x the Triad (burstbench/cost/
predict.py, assumption 1) and fits the efficiency on one measured solve.  On this VM the
memory's bandwidth changes state over minutes (2 threads: about 47 or 80 GB/s).  A run
measures its Triad first and its solves minutes later, so a fit can pair a solve with the
other state's Triad; `--triad-beside` has the solve's own process measure its node's Triad
just before and after it (kernels_ext.triad.node_rate).

Each round runs one fresh process of our solver (RANKS x THREADS, `--triad-beside`) on a
Poisson grid to 1e-7.  Its rate is the byte model (kernels_ext.biccg.bytes_per_iteration)
over its time an iteration.  Two efficiencies of each round:

- beside: the rate over the mean of the Triads before and after its solve (what the model
  fits on where the run measured them);
- earlier: the rate over the Triad measured before the solve of the round that started
  --lag-s seconds or more before it (the latest such): what a run's Triad, measured
  before its solves, gives.  Rounds with no such round have none.

Printed: a line a round, then each efficiency's median (range) and max / min, over the
rounds that have both, and over those whose Triads before and after agree within 10 %
(the state did not change during the solve).

    python comparisons/biccg_triad_beside.py --grid 128 128 128 --ranks 2 --threads 1 \
        --rounds 60 --lag-s 120
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from biccg_vs_baselines import (  # comparisons/ is on sys.path
    add_triad_size,
    ours,
    record_bytes,
    triad_beside,
)

#: Triads before and after a solve within this of each other: the state held through it.
STEADY = 0.10


def rate(grid: list[int], rec: dict) -> float:
    """The byte model over the solve's time an iteration, GB/s."""
    return record_bytes(grid, rec) / (
        rec["solve_s"] / rec["iterations"]) / 1e9


def summary(name: str, xs: list[float]) -> str:
    """median (min-max), max/min."""
    return (f"{name}: {statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f}), "
            f"max/min {max(xs) / min(xs):.2f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", type=int, nargs=3, default=[128, 128, 128],
                   metavar=("NX", "NY", "NZ"))
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--lag-s", type=float, default=120.0,
                   help="how long before its solve a run's Triad is taken to be measured "
                        "(default 120 s)")
    add_triad_size(p)
    a = p.parse_args()
    if a.rounds < 2 or a.ranks < 1 or a.threads < 1 or a.lag_s <= 0:
        sys.exit("error: --rounds must be at least 2, --ranks and --threads at least 1, "
                 "--lag-s positive")
    rounds: list[dict] = []
    began = time.monotonic()
    print(f"Poisson {'x'.join(map(str, a.grid))}, {a.ranks} x {a.threads}, lag {a.lag_s:g} s")
    print("round  t (s)  Triad before, after (GB/s)  rate (GB/s)  beside  earlier")
    for k in range(a.rounds):
        t = time.monotonic() - began
        rec = ours(a.grid, a.threads, a.ranks, ("--triad-beside", a.triad_size))
        before, after = triad_beside(rec)
        r = rate(a.grid, rec)
        back = [x for x in rounds if x["t"] <= t - a.lag_s]
        x = {"t": t, "before": before, "after": after, "rate": r,
             "beside": r / ((before + after) / 2),
             "earlier": r / back[-1]["before"] if back else None}
        rounds.append(x)
        earlier = f"{x['earlier']:.3f}" if x["earlier"] else "-"
        print(f"{k + 1:5d} {t:6.0f}  {before:6.1f}, {after:6.1f}  {r:11.1f}  "
              f"{x['beside']:.3f}  {earlier}", flush=True)
    both = [x for x in rounds if x["earlier"]]
    if not both:
        sys.exit("error: no round started --lag-s after the first: more rounds or less lag")
    steady = [x for x in both if abs(x["after"] - x["before"]) <= STEADY * x["before"]]
    for what, xs in (("all rounds with both", both), ("steady rounds", steady)):
        if xs:
            print(f"{what} ({len(xs)}): {summary('beside', [x['beside'] for x in xs])}; "
                  f"{summary('earlier', [x['earlier'] for x in xs])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
