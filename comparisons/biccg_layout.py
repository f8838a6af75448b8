"""BICCG's default thread count under mpiexec against the explicit one-thread layout.

With no --threads (and OMP_NUM_THREADS unset) each rank runs its share of its
node's CPUs (kernels_ext.layout).  This runs, as fresh processes, alternating
which goes first in each round:

    mpiexec -n R python -m kernels_ext.biccg --poisson NX NY NZ            (default)
    mpiexec -n R python -m kernels_ext.biccg --poisson NX NY NZ --threads T (explicit)

where T is the default's share (1 on a 2-CPU machine with 2 ranks), and prints
median, min and max solve and setup times and the per-round ratio
default / explicit (target: within 1.3x).  With --before it also runs what the
default used to be: every rank taking all the machine's CPUs
(``--threads <all> --oversubscribe``), a few rounds, to show what that costs.

    python comparisons/biccg_layout.py --rounds 7 --before 3 --out /tmp/biccg-layout.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
MPIEXEC = str(Path(PY).parent / "mpiexec")
TARGET = 1.3


def solve(grid: list[int], ranks: int, extra: tuple[str, ...] = (),
          timeout: float = 600) -> dict:
    """One `mpiexec -n ranks` BICCG solve; its JSON record (exits on a failure)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    argv = [MPIEXEC, "-n", str(ranks), PY, "-m", "kernels_ext.biccg", "--poisson",
            *map(str, grid), *extra]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=timeout)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(argv[2:])} failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summary(name: str, recs: list[dict], key: str = "solve_s") -> str:
    xs = [r[key] for r in recs]
    return (f"| {name} | {recs[0]['threads']} | {recs[0]['oversubscribed']} | "
            f"{recs[0]['iterations']} | {statistics.median(xs):.3f} | {min(xs):.3f} | "
            f"{max(xs):.3f} | {statistics.median(r['setup_s'] for r in recs):.3f} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", type=int, nargs=3, default=[64, 64, 64])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--before", type=int, default=0, metavar="ROUNDS",
                   help="also run ROUNDS of every rank on all CPUs (--oversubscribe)")
    p.add_argument("--out", type=Path, help="write everything measured as JSON here")
    a = p.parse_args()

    probe = solve(a.grid, a.ranks)  # a warm-up, and the share the default picks
    share = str(probe["threads"])
    sides = {"default": (), "explicit": ("--threads", share)}
    runs: dict[str, list[dict]] = {k: [] for k in sides}
    for r in range(a.rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for name in order:
            runs[name].append(solve(a.grid, a.ranks, sides[name]))
    ratios = [d["solve_s"] / e["solve_s"] for d, e in zip(runs["default"], runs["explicit"])]
    before = []
    if a.before:
        every = str(len(os.sched_getaffinity(0)))
        before = [solve(a.grid, a.ranks, ("--threads", every, "--oversubscribe"))
                  for _ in range(a.before)]

    g = "x".join(map(str, a.grid))
    print(f"Poisson {g}, {a.ranks} ranks, {a.rounds} rounds (alternating), "
          f"cpus_per_rank {probe['cpus_per_rank']}:\n")
    print("| layout | threads per rank | oversubscribed | iterations | solve median (s) | min "
          "| max | setup median (s) |")
    print("|---|---|---|---|---|---|---|---|")
    print(summary("default (no --threads)", runs["default"]))
    print(summary(f"explicit --threads {share}", runs["explicit"]))
    if before:
        print(summary(f"before: --threads {every} --oversubscribe", before))
    med = statistics.median(ratios)
    print(f"\ndefault / explicit solve time, per round: "
          f"{', '.join(f'{x:.3f}' for x in ratios)}; median {med:.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}); target <= {TARGET}: "
          f"{'met' if med <= TARGET else 'NOT met'}")
    if before:
        slow = statistics.median(r["solve_s"] for r in before) / \
            statistics.median(r["solve_s"] for r in runs["explicit"])
        print(f"all CPUs per rank (the old default) / explicit, medians: {slow:.0f}x")
    if a.out:
        a.out.write_text(json.dumps({"grid": a.grid, "ranks": a.ranks, "runs": runs,
                                     "ratios": ratios, "before": before}, indent=1) + "\n")
    return 0 if med <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
