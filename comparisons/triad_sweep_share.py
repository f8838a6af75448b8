"""The Triad sweep of a params file from several checkouts, side by side: how much of its
wall time is measurement, how right its estimate is, and whether its bandwidth holds
against McCalpin's stream.c run in the same rounds.

Each checkout is a clone with its own `.venv` (`make install` done there). Every round runs
`burstbench run --params P --only triad` in each checkout, the order rotated each round
(this VM's bandwidth is bimodal and drifts over minutes), then stream.c (built with the same
size, passes and flags as the sweep's first C variant, its arrays as far apart as ours:
triad_vs_stream.same_gaps) `--stream-runs` times with the
sweep's largest thread count and its first affinity setting. Printed per checkout, medians
over rounds:

- the sweep's wall time and timed share (the kernels' own timed seconds over the sweep's:
  `timed_share` of the run's provenance.json);
- the error of the plan's estimate and of the calibrated one against the measured seconds;
- Triad GB/s of the first C variant with normal stores at that thread count and affinity
  (the median of the sweep's repetitions), and its ratio to stream.c's median of the round.

    git worktree add /tmp/before <rev> && make -C /tmp/before install
    .venv/bin/python comparisons/triad_sweep_share.py /tmp/before . --stream-c ~/stream.c \\
        --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
from triad_vs_stream import same_gaps  # this script's folder, first on sys.path


def sweep(checkout: Path, params: Path, runs_dir: Path) -> tuple[float, dict, pd.DataFrame]:
    """Wall seconds, the run's Triad provenance section and its table."""
    argv = [str(checkout / ".venv" / "bin" / "python"), "-m", "burstbench", "run", "--params",
            str(params), "--only", "triad", "--runs-dir", str(runs_dir), "--quiet", "--wait"]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=checkout, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"{checkout}: the sweep failed: {(proc.stdout + proc.stderr)[-800:]}")
    (run_dir,) = [p.parent for p in runs_dir.glob("*/*/provenance.json")]
    sec = json.loads((run_dir / "provenance.json").read_text())["benchmarks"]["triad"]
    return wall, sec, pd.read_csv(run_dir / "triad.csv")


def first_c(table: pd.DataFrame) -> pd.DataFrame:
    """The Triad best rates of the first C variant's first affinity with normal stores at
    the sweep's largest thread count."""
    t = table[(table["metric"] == "best_rate") & (table["function"] == "Triad")
              & (table["impl"] == "c") & (table["stores"] == "normal")]
    t = t[t["variant"] == t["variant"].iloc[0]]
    t = t[(t["places"] == t["places"].iloc[0]) & (t["bind"] == t["bind"].iloc[0])]
    return t[t["threads"] == t["threads"].max()]


def stream_c(binary: Path, threads: int, places: str, bind: str) -> float:
    """GB/s of stream.c's Triad, one fresh process."""
    env = os.environ | {"OMP_NUM_THREADS": str(threads), "OMP_PLACES": places,
                        "OMP_PROC_BIND": bind}
    out = subprocess.run([str(binary)], capture_output=True, text=True, env=env).stdout
    if "Solution Validates" not in out:
        raise SystemExit(f"stream.c did not validate: {out[-300:]}")
    return float(re.search(r"^Triad:\s+([\d.]+)", out, re.M).group(1)) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkouts", nargs="+", type=Path, help="clones, each with its .venv")
    ap.add_argument("--params", type=Path, default=Path("papermill_params/local.yaml"))
    ap.add_argument("--stream-c", type=Path, help="McCalpin's stream.c (not shipped)")
    ap.add_argument("--stream-runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    checkouts = [c.resolve() for c in args.checkouts]
    params = args.params.resolve()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="triad-share-") as tmp:
        binary = None
        for r in range(args.rounds):
            order = checkouts[r % len(checkouts):] + checkouts[:r % len(checkouts)]
            rates: dict[Path, float] = {}
            for c in order:
                runs = Path(tmp) / f"{checkouts.index(c)}-{c.name}-{r}"  # two may share a name
                wall, sec, table = sweep(c, params, runs)
                best = first_c(table)
                rates[c] = statistics.median(best["value"])
                took = sec["measured_seconds"]
                rows.append({"checkout": str(c), "round": r, "wall_s": wall,
                             "sweep_s": sec["sweep_seconds"], "timed_share": sec["timed_share"],
                             "plan_error": sec["measured_estimate_s"] / took - 1,
                             "calibrated_error": sec.get("calibrated_estimate_s", 0) / took - 1,
                             "triad_gbs": rates[c]})
                print(f"round {r} {c}: {wall:.0f} s, timed share {sec['timed_share']:.3f}, "
                      f"Triad {rates[c]:.1f} GB/s", flush=True)
                if args.stream_c and binary is None:
                    binary = Path(tmp) / "stream"
                    size, ntimes = int(table["size"].iloc[0]), int(
                        re.search(r"triad_ntimes:\s*(\d+)", params.read_text()).group(1))
                    flags = best["flags"].iloc[0].split()
                    subprocess.run([best["compiler"].iloc[0], *flags,
                                    f"-DSTREAM_ARRAY_SIZE={size}", f"-DNTIMES={ntimes}",
                                    f"-DOFFSET={same_gaps(size)}",
                                    str(args.stream_c), "-o", str(binary)], check=True)
                    ref = (int(best["threads"].iloc[0]), best["places"].iloc[0],
                           best["bind"].iloc[0])
            if binary is not None:
                ours = statistics.median(stream_c(binary, *ref) for _ in range(args.stream_runs))
                for row in rows[-len(order):]:
                    row["stream_c_gbs"] = ours
                    row["ratio"] = row["triad_gbs"] / ours
                print(f"round {r} stream.c: {ours:.1f} GB/s", flush=True)
    df = pd.DataFrame(rows)
    print(f"\n{args.rounds} rounds, order rotated each round; medians over rounds\n")
    cols = ["wall_s", "sweep_s", "timed_share", "plan_error", "calibrated_error", "triad_gbs"]
    cols += ["stream_c_gbs", "ratio"] if "ratio" in df else []
    print("| checkout | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for c in checkouts:
        med = df[df["checkout"] == str(c)][cols].median()
        print(f"| {c} | " + " | ".join(f"{med[k]:.3f}" for k in cols) + " |")


if __name__ == "__main__":
    main()
