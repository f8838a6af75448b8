"""The solver's PCG beside CG in Eisenstat's form, which has no SpMV (issue 53).

Where IC(0) eliminates nothing (a 7-point grid), its preconditioned operator needs no
product with A: one backward and one forward substitution on A's own scaled off-diagonal
values (Eisenstat 1981; biccg_eisenstat.c says how).  The iteration would then read A's
values twice (in double: they are the system) in place of A once and the single-precision
factor twice, and the setup would neither copy A nor factor it beyond its pivots.
biccg_eisenstat.c measures whether the solve gains, on the solver's own ordering (row runs
of 32, the study's blocking, or tiles; 20 colors): the solver's PCG (bc_spmv, bc_precond,
its vector updates), Eisenstat's form in three passes a step, and in two (Chronopoulos and
Gear), solving b = A 1 to 1e-7 in turn, each after a flush of twice the last-level cache and
again at once ("warm"); medians, and each form's time over PCG's round by round (median
and range).  One process per grid and thread count.  The iterations
must be the same and every solution within 1e-9 of PCG's.

    python comparisons/biccg_eisenstat.py --grid 64 64 64 --grid 128 128 128 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from biccg_kernels import build, driver_env  # comparisons/ is on sys.path: these run as scripts

FORMS = ("pcg", "eisenstat", "eisenstat_cg")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cc", default=str(Path(sys.executable).parent / "mpicc"),
                   help="MPI C compiler wrapper (default: the environment's mpicc)")
    p.add_argument("--grid", type=int, nargs=3, action="append", metavar=("NX", "NY", "NZ"),
                   help="a grid (repeat for more; default 128^3)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--blocking", choices=("rows", "tiles"), default="rows",
                   help="runs of 32 consecutive rows (the study's; default) or 4x4x2 tiles")
    p.add_argument("--factor", choices=("single", "double"), default="single",
                   help="the solver's factor for its PCG (default single, the solver's)")
    a = p.parse_args()
    if a.rounds < 1 or min(a.threads) < 1:
        p.error("--rounds and --threads must be positive")
    print("| grid | threads | PCG (ms) | Eisenstat, 3 passes (ms) | / PCG, per round | "
          "2 passes (ms) | / PCG, per round | warm / PCG | iterations | largest x difference |")
    print("|---|---|---:|---:|---|---:|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "eisenstat"
        build(a.cc, "-O3 -march=native -fopenmp -std=gnu99", exe, "biccg_eisenstat.c")
        for grid in a.grid or [[128, 128, 128]]:
            for t in a.threads:
                args = [*grid, a.rounds, int(a.blocking == "rows"), int(a.factor == "single")]
                proc = subprocess.run([str(exe), *map(str, args)], capture_output=True,
                                      text=True, env=driver_env(t))
                if proc.returncode != 0:
                    sys.exit(f"error: biccg_eisenstat.c failed: {proc.stderr.strip()[-400:]}")
                r = json.loads(proc.stdout.splitlines()[-1])
                f = [r[k] for k in FORMS]
                ratio = [f"{x['ratio'][0]:.2f} ({x['ratio'][1]:.2f}-{x['ratio'][2]:.2f})"
                         for x in f]
                print(f"| {'x'.join(map(str, grid))} | {t} | {f[0]['ms']:.1f} | "
                      f"{f[1]['ms']:.1f} | {ratio[1]} | {f[2]['ms']:.1f} | {ratio[2]} | "
                      f"{f[1]['warm_ms'] / f[0]['warm_ms']:.2f}, "
                      f"{f[2]['warm_ms'] / f[0]['warm_ms']:.2f} | "
                      f"{', '.join(str(x['iterations']) for x in f)} | "
                      f"{max(f[1]['x_rel_diff'], f[2]['x_rel_diff']):.1e} |")
                if len({x["iterations"] for x in f}) > 1 or f[1]["x_rel_diff"] > 1e-9 \
                        or f[2]["x_rel_diff"] > 1e-9:
                    sys.exit("error: the forms did not reach the same solution")
    return 0


if __name__ == "__main__":
    sys.exit(main())
