"""What the colors cost an iteration: each pass's rate against the Triad, and the time to a
solution, by the number of colors (issue 53).

The multicolor ordering numbers the blocks color by color, so a block's neighbours lie in
other colors: far from it in memory, and swept in other passes over the colors. The byte
model counts the vector the SpMV gathers (p) once a pass (kernels_ext.biccg.pass_bytes:
12 nnz + 24 n), and the sweeps' z the same way. A line of it read for a block of one color
and evicted before another block reads it again is read twice, and the model does not count
the second read: it shows as a lower rate against the Triad. How often that happens depends
on where the greedy coloring puts each color on the grid. Counting on from the previous
block, it depended on the number of colors and the grid together; tiles now start their count
at their diagonal, which on a 7-point grid puts a tile's neighbours one color away for any
count (one color asked for becomes two; comparisons/README.md, "What the colors cost the
iteration"). The count also changes the
iterations (the study's solver asks for at least 20).

Each round runs one fresh process of our solver per color count (RANKS x THREADS, `--colors
C --triad-beside`; the default blocks, tiles of the grid, or with --blocking rows the
study's runs of 32 rows), in an order that rotates by round, and takes its solve:
iterations, the time an iteration of each pass, each pass's rate (the byte model over its
time) and the whole iteration's (its time including dots and halo) over the mean of the
Triads its process measured just before and after the solve, and the solve's time over the
time of the --reference color count's solve in the same round. Medians over the rounds
(ranges where they differ), then the Triads' median and range.

    python comparisons/biccg_colors.py --grid 192 192 192 --threads 2 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys

from biccg_vs_baselines import (  # comparisons/ is on sys.path
    add_triad_size,
    ours,
    phase_rates,
    triad_beside,
)

#: The passes of an iteration, in the record's per_iteration_s, as the table lists them.
PASSES = ("spmv", "precond", "vector")


#: --blocking: the solver's --blocking for each (tiles: its default for a grid), and its name.
BLOCKING = {"tiles": ("auto", "tiles of the grid"), "rows": ("rows", "runs of 32 rows")}


def measure(grid: list[int], ranks: int, threads: int, colors: int, blocking: str,
            triad_size: str = "auto") -> dict:
    """One fresh process's solve with at least `colors` colors and the blocks `blocking`
    (BLOCKING): its record, with its passes' rates over the mean of its Triads before and
    after ("of_triad"), each on `triad_size` elements an array (the solver's --triad-beside)."""
    rec = ours(grid, threads, ranks, ("--colors", str(colors), "--blocking", BLOCKING[blocking][0],
                                      "--triad-beside", triad_size))
    triad = triad_of(rec)
    return rec | {"of_triad": {k: v / triad for k, v in phase_rates(grid, rec).items()},
                  "triad": triad}


def triad_of(rec: dict) -> float:
    """The mean of the Triads a solve's process measured before and after it (GB/s; exits
    where it has only one: triad_beside)."""
    before, after = triad_beside(rec)
    return (before + after) / 2


def cell(xs: list[float], fmt: str) -> str:
    """The median of xs in `fmt`, with (min-max) where those print differently."""
    lo, hi = fmt.format(min(xs)), fmt.format(max(xs))
    return fmt.format(statistics.median(xs)) + ("" if lo == hi else f" ({lo}-{hi})")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", type=int, nargs=3, default=[192, 192, 192],
                   metavar=("NX", "NY", "NZ"),
                   help="the Poisson grid (default 192^3: 1.1 GiB of working set)")
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--colors", type=int, nargs="+", default=[2, 4, 8, 12, 20, 40],
                   help="the color counts (each at least; default 2 4 8 12 20 40)")
    p.add_argument("--reference", type=int, default=20,
                   help="the count the solve times are divided by (default 20, the solver's)")
    p.add_argument("--blocking", choices=sorted(BLOCKING), default="tiles",
                   help="tiles of the grid (the solver's default) or runs of 32 rows (the "
                        "study's algebraic blocks)")
    p.add_argument("--rounds", type=int, default=3)
    add_triad_size(p)
    a = p.parse_args()
    if a.rounds < 1 or a.ranks < 1 or a.threads < 1 or min(a.grid) < 1 or min(a.colors) < 1:
        sys.exit("error: --rounds, --ranks, --threads, --grid and --colors must be at least 1")
    if a.reference not in a.colors:
        sys.exit(f"error: --reference {a.reference} is not one of --colors {a.colors}")
    counts = list(dict.fromkeys(a.colors))
    runs: dict[int, list[dict]] = {c: [] for c in counts}
    ratio: dict[int, list[float]] = {c: [] for c in counts}
    for r in range(a.rounds):
        order = counts[r % len(counts):] + counts[:r % len(counts)]
        now = {c: measure(a.grid, a.ranks, a.threads, c, a.blocking, a.triad_size)
               for c in order}
        for c in counts:
            runs[c].append(now[c])
            ratio[c].append(now[c]["solve_s"] / now[a.reference]["solve_s"])
        print(f"round {r + 1}/{a.rounds}: Triad "
              f"{min(x['triad'] for x in now.values()):.1f}-"
              f"{max(x['triad'] for x in now.values()):.1f} GB/s", file=sys.stderr, flush=True)
    print(f"Poisson {'x'.join(map(str, a.grid))}, {a.ranks} x {a.threads}, "
          f"{BLOCKING[a.blocking][1]}, "
          f"{a.rounds} round(s); medians (min-max where they differ)\n")
    print(f"| colors (used) | iterations | solve (s) | solve / {a.reference} colors | "
          "SpMV, sweeps, vectors (ms an iteration) | SpMV / Triad | sweeps / Triad | "
          "iteration / Triad |")
    print("|---|---:|---|---|---|---|---|---|")
    for c in counts:
        rs = runs[c]
        used = sorted({x["colors_used"] for x in rs})
        ms = ", ".join(f"{statistics.median(x['per_iteration_s'][k] for x in rs) * 1e3:.1f}"
                       for k in PASSES)
        print(f"| {c} ({', '.join(map(str, used))}) | "
              f"{cell([x['iterations'] for x in rs], '{:.0f}')} | "
              f"{cell([x['solve_s'] for x in rs], '{:.2f}')} | {cell(ratio[c], '{:.2f}')} | "
              f"{ms} | {cell([x['of_triad']['spmv'] for x in rs], '{:.2f}')} | "
              f"{cell([x['of_triad']['precond'] for x in rs], '{:.2f}')} | "
              f"{cell([x['of_triad']['iteration'] for x in rs], '{:.2f}')} |")
    tri = [x["triad"] for rs in runs.values() for x in rs]
    print(f"\nTriad beside the solves (GB/s): {cell(tri, '{:.1f}')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
