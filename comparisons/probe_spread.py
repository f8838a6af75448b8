"""How far one probe sample moves a plan's estimate, and how far the median of SAMPLES does
(issue 31: each benchmark's plan estimate within +-25% of the measured time).

A plan's estimate stands on its benchmark's probe: one tiny real configuration, timed
(burstbench.core.workmodel.timed), which on this VM lands in a slow or a fast second.  This
script plans each benchmark of a params file N times in a row (probe and expand; nothing
is measured), each with probes of one sample (workmodel.SAMPLES = 1), and keeps each
plan's estimate (the sum of its tasks' estimate_s) and its probes' wall seconds.  Then,
over every 3 plans in a row, it compares what one sample plans (the first) with what the
median of three by wall time plans (what timed() keeps), as spreads about the median of
all N: the standard deviation, the largest deviation and the share more than 10% off.
The sweep's measured seconds to set the plans against: comparisons/estimate_error.py.

    python comparisons/probe_spread.py papermill_params/local.yaml --only triad,biccg \\
        --plans 36 --out /tmp/spread.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from burstbench import params, registry  # noqa: E402
from burstbench.core import workmodel  # noqa: E402


def plans(name: str, P: dict, n: int, pause: float) -> list[dict]:
    """`n` plans of benchmark `name` with one-sample probes: each one's estimate, its
    probes' wall seconds, the seconds planning took, and how it was calibrated."""
    walls: list[float] = []
    once = workmodel._once

    def kept(task):  # each probe sample's wall time, as timed() sees it
        records, timing = once(task)
        walls.append(timing.wall_s)
        return records, timing

    out, samples = [], workmodel.SAMPLES
    workmodel.SAMPLES, workmodel._once = 1, kept
    try:
        for i in range(n):
            walls.clear()
            began = time.monotonic()
            plan = registry.benchmarks()[name].plan(P)
            took = time.monotonic() - began
            est = sum(t.estimate_s for t in plan.tasks)
            out.append({"plan_s": est, "wall_s": sum(walls), "took_s": took,
                        "said": plan.calibration})
            print(f"{name} {i + 1}/{n}: plan {est:.0f} s, probes {sum(walls):.2f} s",
                  flush=True)
            time.sleep(pause)
    finally:
        workmodel.SAMPLES, workmodel._once = samples, once
    return out


def spread(chosen: list[float], mid: float) -> dict:
    """The chosen plans about `mid`: sd and largest deviation over it, share >10% off."""
    dev = [abs(c / mid - 1) for c in chosen]
    return {"sd": statistics.pstdev(chosen) / mid, "max_dev": max(dev),
            "over_10pct": sum(d > 0.1 for d in dev) / len(dev)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("params", help="a params file (papermill_params/local.yaml)")
    ap.add_argument("--only", default="triad,pingpong,biccg",
                    help="benchmarks, comma-separated (default: %(default)s)")
    ap.add_argument("--plans", type=int, default=36, help="plans per benchmark (default 36)")
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between plans")
    ap.add_argument("--out", type=Path, help="write every plan and the summary as JSON")
    a = ap.parse_args()
    raw = yaml.safe_load(Path(a.params).read_text())
    names = [n for n in a.only.split(",") if n]
    unknown = sorted(set(names) - set(registry.benchmarks()))
    if unknown:
        sys.exit(f"error: unknown benchmark {unknown[0]} (known: "
                 f"{', '.join(registry.benchmarks())})")
    if a.plans < 3:
        sys.exit("error: --plans must be at least 3")
    found = {}
    for name in names:
        P = params.validate(raw | {"runs_dir": "/tmp/burstbench-probe-spread"}, name)
        found[name] = {"plans": plans(name, P, a.plans, a.pause)}
    print(f"\n{'benchmark':<10} {'plans':>5} {'median':>7} {'range':>9} {'probe':>6}   "
          f"{'one sample: sd, max, >10%':<28} median of 3: sd, max, >10%")
    for name, cell in found.items():
        ps = cell["plans"]
        mid = statistics.median(p["plan_s"] for p in ps)
        threes = [ps[i:i + 3] for i in range(len(ps) - 2)]
        one = spread([t[0]["plan_s"] for t in threes], mid)
        med = spread([sorted(t, key=lambda p: p["wall_s"])[1]["plan_s"] for t in threes], mid)
        cell |= {"median_s": mid, "one_sample": one, "median_of_3": med}
        lo, hi = min(p["plan_s"] for p in ps), max(p["plan_s"] for p in ps)
        probe = statistics.median(p["wall_s"] for p in ps)
        print(f"{name:<10} {len(ps):>5} {mid:>6.0f}s {lo:>4.0f}-{hi:<4.0f} {probe:>5.2f}s   "
              f"{one['sd']:>5.1%} {one['max_dev']:>6.1%} {one['over_10pct']:>5.0%}"
              f"{'':<10} {med['sd']:>5.1%} {med['max_dev']:>6.1%} {med['over_10pct']:>5.0%}")
    if a.out:
        a.out.write_text(json.dumps({"params": a.params, "benchmarks": found}, indent=1))


if __name__ == "__main__":
    main()
