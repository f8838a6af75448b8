"""BICCG's options side by side: factor precision x blocking, and the solver before a change.

One process, one matrix (Poisson 128^3 by default, b = A 1), the variants solved in turn,
round after round (the order rotates each round), each solve timed by the solver itself;
medians of --rounds rounds and the per-round ratio of each variant to the first one:

    .venv/bin/python comparisons/biccg_options.py --rounds 5
    .venv/bin/python comparisons/biccg_options.py \
        --before /tmp/old/_biccg.cpython-311-x86_64-linux-gnu.so

--before takes the extension module built from an earlier commit (a git worktree of it,
configured with build/*/CMakeInit.txt and -DCMAKE_BUILD_TYPE=Release, which the
init file does not set, then `cmake --build ... --target _biccg`); it is
loaded beside the current one and run as "before": with the current defaults (tiles, float32
factor) where it takes them, else with the argument list of a69cbda (rows of 32, double).
With --same-iterations it times nothing: the tests' Poisson grids are solved by both
builds, and the iteration counts compared (exit 1 where one differs), for a change that
moves the solve's rounding:

    .venv/bin/python comparisons/biccg_options.py --same-iterations \
        --before /tmp/old/_biccg.cpython-311-x86_64-linux-gnu.so
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from kernels_ext import biccg
from kernels_ext.common.mpi import init_mpi

PARTS = ("spmv", "precond", "dots", "halo", "vector")


def load_before(path: Path):
    """The extension module at `path`, under a name of its own."""
    spec = importlib.util.spec_from_file_location("_biccg", path)
    if spec is None or spec.loader is None:
        sys.exit(f"error: cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def variants(grid: tuple[int, int, int], before) -> dict[str, dict]:
    """label -> solve keywords (or the old module)."""
    tile = biccg.auto_tile(32)
    out: dict[str, dict] = {}
    if before is not None:
        try:  # the current argument list, on a problem too small to time
            solve_before(before, biccg.poisson_matrix(4, 4, 4), np.ones(64), 1,
                         (4, 4, 4), (2, 2, 2))
            out[f"before (tiles {'x'.join(map(str, tile))}, single)"] = {
                "module": before, "grid": grid, "tile": tile}
        except TypeError:
            out["before (rows, double, unfused)"] = {"module": before}
    for factor in ("double", "single"):
        out[f"rows of 32, {factor}"] = {"factor": factor}
        out[f"tiles {'x'.join(map(str, tile))}, {factor}"] = {"factor": factor, "grid": grid,
                                                              "tile": tile}
    return out


def solve_before(module, A, b, threads: int, grid=None, tile=None) -> dict:
    """A solve by an older extension module, by its positional argument list: the
    current one where grid and tile are given, else a69cbda's (TypeError where the
    module does not take it)."""
    MPI = init_mpi("funneled")
    args = [MPI.COMM_SELF, A.indptr, A.indices, A.data, b, np.zeros(len(b)), A.shape[0],
            0, 32, 20, 1e-7, 10_000, threads, False]
    if tile is not None:
        args += [True, tuple(grid), tuple(tile)]
    return module.solve(*args)


def solve(A, b, threads: int, kw: dict) -> dict:
    if "module" in kw:
        return solve_before(kw["module"], A, b, threads, kw.get("grid"), kw.get("tile"))
    return biccg.solve(A, b, threads=threads, **kw)[1]


def spread(ratios: list[float]) -> str:
    """'median (min-max)' of per-round ratios."""
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


# Poisson grids of the tests (tests/test_biccg*.py) and a few larger: a change that moves
# the solve's arithmetic should leave their iteration counts as they were
SAME_ITERATIONS_GRIDS = [(4, 4, 4), (6, 6, 6), (8, 8, 8), (4, 3, 3), (3, 4, 5), (6, 5, 9),
                         (10, 9, 8), (10, 10, 10), (12, 12, 12), (12, 10, 8), (13, 5, 7),
                         (14, 12, 10), (16, 16, 16), (16, 16, 24), (20, 20, 20), (20, 14, 9),
                         (32, 32, 32), (48, 48, 48), (64, 64, 64), (96, 96, 96)]


def same_iterations(before, threads: list[int]) -> int:
    """Each of SAME_ITERATIONS_GRIDS solved by the older module and this one (tiles,
    single factor, both the defaults), on each thread count: iterations and residuals
    side by side; 1 where an iteration count differs."""
    tile = biccg.auto_tile(32)
    differ = 0
    print("| grid | threads | iterations before | now | residual before | now |")
    print("|---|---:|---:|---:|---:|---:|")
    for grid in SAME_ITERATIONS_GRIDS:
        A = biccg.poisson_matrix(*grid)
        b = A @ np.ones(A.shape[0])
        for t in threads:
            old = solve(A, b, t, {"module": before, "grid": grid, "tile": tile})
            new = solve(A, b, t, {"grid": grid, "tile": tile})
            differ += old["iterations"] != new["iterations"]
            print(f"| {'x'.join(map(str, grid))} | {t} | {old['iterations']} | "
                  f"{new['iterations']} | {old['relative_residual']:.4e} | "
                  f"{new['relative_residual']:.4e} |")
    print(f"\n{differ} of {len(SAME_ITERATIONS_GRIDS) * len(threads)} solves took another "
          "number of iterations")
    return 1 if differ else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", type=int, nargs=3, default=[128, 128, 128])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--before", type=Path, help="the extension built from an earlier commit")
    p.add_argument("--only", nargs="+", metavar="LABEL",
                   help="only the variants whose label starts with one of these")
    p.add_argument("--out", type=Path, help="write every solve's record as JSON here")
    p.add_argument("--same-iterations", action="store_true",
                   help="with --before: the tests' Poisson grids solved by both builds on 1 "
                        "and --threads threads, iterations side by side (exit 1 where any "
                        "differ), instead of the timing")
    a = p.parse_args()
    if a.same_iterations:
        if not a.before:
            p.error("--same-iterations needs --before")
        return same_iterations(load_before(a.before), sorted({1, a.threads}))
    grid = tuple(a.grid)
    A = biccg.poisson_matrix(*grid)
    b = A @ np.ones(A.shape[0])
    var = variants(grid, load_before(a.before) if a.before else None)
    names = [k for k in var if not a.only or any(k.startswith(o) for o in a.only)]
    runs: dict[str, list[dict]] = {k: [] for k in names}
    for r in range(a.rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            st = solve(A, b, a.threads, var[k])
            t = st["times"]
            runs[k].append({"iterations": st["iterations"], "solve_s": t["solve"],
                            "setup_s": t["setup"],
                            "residual": st["relative_residual"],
                            **{f"{x}_ms": 1e3 * t[x] / st["iterations"] for x in PARTS}})
        print(f"round {r + 1}: " + ", ".join(f"{k} {runs[k][-1]['solve_s']:.2f} s"
                                             for k in names), file=sys.stderr)
    first = names[0]
    print(f"Poisson {'x'.join(map(str, grid))}, 1 process x {a.threads} threads, tol 1e-7, "
          f"{a.rounds} rounds, medians (ratio to '{first}' per round: median, range)\n")
    print("| variant | iterations | setup (s) | solve (s) | ms/iteration | SpMV | precond | "
          "dots | vector | setup ratio | solve ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for k in names:
        xs = runs[k]
        med = {f: statistics.median(x[f] for x in xs) for f in xs[0]}
        ratio, setup = ([x[f] / y[f] for x, y in zip(xs, runs[first])]
                        for f in ("solve_s", "setup_s"))
        print(f"| {k} | {xs[0]['iterations']} | {med['setup_s']:.2f} | {med['solve_s']:.2f} | "
              f"{1e3 * med['solve_s'] / xs[0]['iterations']:.1f} | {med['spmv_ms']:.1f} | "
              f"{med['precond_ms']:.1f} | {med['dots_ms']:.2f} | {med['vector_ms']:.2f} | "
              f"{spread(setup)} | {spread(ratio)} |")
    if a.out:
        a.out.write_text(json.dumps({"grid": grid, "threads": a.threads, "runs": runs},
                                    indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
