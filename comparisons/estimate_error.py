"""The plan's estimate against the measured time, per benchmark (issue 31: within +-25%).

Runs a params file's sweeps into a fresh run (``burstbench run --only ... --wait``) and
prints, per benchmark, from the run's provenance.json: the plan's estimate of what was
measured (``measured_estimate_s``: the sum of each configuration's estimate_s, what
``planned: ...; about X to measure`` said), the calibrated estimate
(``calibrated_estimate_s``), the measured seconds (``measured_seconds``: each
configuration from its start to its result stored), the error of each, and how contended
the measurement was (configurations whose `contended` column is true, the median of
`others_cpu`: the share of the CPU other processes took meanwhile).

    python comparisons/estimate_error.py papermill_params/local.yaml papermill_params/smoke.yaml \\
        --only pingpong,biccg,storage --runs-dir /tmp/estimate-runs

``--run DIR`` prints the table of a run already measured, without measuring.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def measure(params: str, only: str, runs_dir: Path, budget: str = "none") -> Path:
    """Run the sweeps of `params` into a new run folder under `runs_dir`; its path."""
    import yaml

    vm = yaml.safe_load(Path(params).read_text())["vm"]
    before = set((runs_dir / vm).glob("*")) if (runs_dir / vm).is_dir() else set()
    argv = [sys.executable, "-m", "burstbench", "run", "--params", params, "--runs-dir",
            str(runs_dir), "--wait", "--quiet", "--budget", budget] + (
                ["--only", only] if only else [])
    proc = subprocess.run(argv, cwd=ROOT)
    new = sorted(set((runs_dir / vm).glob("*")) - before)
    if proc.returncode != 0 or not new:
        sys.exit(f"error: {' '.join(argv)} exited {proc.returncode}")
    return new[-1]


def rows(run_dir: Path, only: list[str]) -> list[dict]:
    """One row per benchmark of the run: estimates, measured seconds, errors, contention."""
    prov = json.loads((run_dir / "provenance.json").read_text())
    out = []
    for name, sec in prov.get("benchmarks", {}).items():
        if only and name not in only:
            continue
        took = sec.get("measured_seconds", 0.0)
        plan, cal = sec.get("measured_estimate_s", 0.0), sec.get("calibrated_estimate_s", 0.0)
        table = run_dir / f"{name}.csv"
        contended, others = "-", "-"
        if table.exists():
            df = pd.read_csv(table).drop_duplicates("key")
            if "contended" in df:
                contended = f"{int(df['contended'].astype(bool).sum())}/{len(df)}"
            if "others_cpu" in df:
                others = f"{df['others_cpu'].median():.0%}"
        out.append({"benchmark": name, "configurations": sec.get("planned"),
                    "plan_s": plan, "calibrated_s": cal, "measured_s": took,
                    "plan_error": (plan - took) / took if took else float("nan"),
                    "calibrated_error": (cal - took) / took if took else float("nan"),
                    "contended": contended, "others_cpu_median": others})
    return out


def show(label: str, run_dir: Path, only: list[str]) -> None:
    print(f"\n{label}: {run_dir}")
    print(f"{'benchmark':<10} {'configs':>7} {'plan est.':>9} {'calibr.':>8} {'measured':>9} "
          f"{'plan err':>8} {'cal. err':>8} {'contended':>9} {'others':>6}")
    for r in rows(run_dir, only):
        print(f"{r['benchmark']:<10} {r['configurations']!s:>7} {r['plan_s']:>8.1f}s "
              f"{r['calibrated_s']:>7.1f}s {r['measured_s']:>8.1f}s {r['plan_error']:>+8.0%} "
              f"{r['calibrated_error']:>+8.0%} {r['contended']:>9} {r['others_cpu_median']:>6}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("params", nargs="*", help="papermill_params/<vm>.yaml files to measure")
    p.add_argument("--only", default="pingpong,biccg,storage",
                   help="benchmarks to run and show (default: pingpong,biccg,storage)")
    p.add_argument("--runs-dir", default="/tmp/estimate-runs", type=Path,
                   help="where the run folders go (default /tmp/estimate-runs)")
    p.add_argument("--budget", default="none",
                   help="the run's --budget (default none: the whole sweep, whatever the "
                   "params file's budget_minutes)")
    p.add_argument("--run", action="append", default=[], type=Path,
                   help="a run folder already measured: show it, measure nothing")
    a = p.parse_args()
    only = [x for x in a.only.split(",") if x]
    if not a.params and not a.run:
        p.error("give a params file or --run")
    for run_dir in a.run:
        show(str(run_dir), run_dir, only)
    for params in a.params:
        show(params, measure(params, a.only, a.runs_dir, a.budget), only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
