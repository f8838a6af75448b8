"""The preconditioner vectorized across blocks (a prototype, issue 53) beside the solver's.

Blocks of one color are independent: biccg_lanes.c sweeps eight of them at once, one per
AVX-512 lane, their rows' entries stored slot by slot (SELL-8 style), on the solver's own
ordering and single-precision factor (tiles of the grid, 20 colors).  It is built twice:
as it is (each vector row of r and z gathered and scattered: the solver's numbering), and
with -DLANES_CONTIG (those rows loaded and stored whole, the couplings still gathered:
what a numbering that interleaves the eight blocks would leave; timing only, its results
are wrong).  One process per grid and thread count; in it the solver's bc_precond and the
prototype alternate, each after a flush of twice the last-level cache and again at once
("warm"); medians.  A machine without AVX-512 gets one line saying so.

First, as a table of its own, biccg_padded.c: the solver's scalar sweeps with each row's
two passes padded to three entries (fixed trip counts, unrolled) beside bc_precond, the
same way: whether the sweeps are bound by their loops' varying trip counts.

    python comparisons/biccg_lanes.py --grid 48 48 48 --grid 128 128 128 --rounds 9
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from biccg_kernels import build, driver_env  # comparisons/ is on sys.path: these run as scripts

from kernels_ext.biccg import auto_tile


def run(exe: Path, grid: list[int], rounds: int, threads: int, tile: tuple) -> dict | None:
    """One process of exe: its JSON line, or None where it cannot run here (exit 3: no
    AVX-512 for the lanes, a row too long for the padded sweeps)."""
    env = driver_env(threads)
    proc = subprocess.run([str(exe), *map(str, [*grid, rounds, *tile])], capture_output=True,
                          text=True, env=env)
    if proc.returncode == 3:
        return None
    if proc.returncode != 0:
        sys.exit(f"error: {exe.name} failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cc", default=str(Path(sys.executable).parent / "mpicc"))
    p.add_argument("--grid", type=int, nargs=3, action="append", metavar=("NX", "NY", "NZ"),
                   help="a grid (repeat for more; default 128^3)")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    a = p.parse_args()
    tile = auto_tile(32)
    assert tile is not None  # 32 points make a tile (4 x 4 x 2)
    flags = "-O3 -march=native -fopenmp -std=gnu99"
    grids = a.grid or [[128, 128, 128]]
    with tempfile.TemporaryDirectory() as tmp:
        padded = Path(tmp) / "padded"
        build(a.cc, flags, padded, "biccg_padded.c")
        print("| grid | threads | solver's sweeps (ms) | padded (ms) | padded / solver's | "
              "warm: solver's, padded (ms) | z's difference |")
        print("|---|---|---:|---:|---:|---|---|")
        for grid, t in ((g, t) for g in grids for t in a.threads):
            r = run(padded, grid, a.rounds, t, tile)
            if r is None:
                print(f"{'x'.join(map(str, grid))}: a row has more than three entries in a pass")
                continue
            print(f"| {'x'.join(map(str, grid))} | {t} | {r['precond_ms']:.2f} | "
                  f"{r['padded_ms']:.2f} | {r['padded_ms'] / r['precond_ms']:.2f} | "
                  f"{r['precond_warm_ms']:.2f}, {r['padded_warm_ms']:.2f} | "
                  f"{r['z_max_rel_diff']:.1e} |")
    print()
    print("| grid | threads | solver's sweeps (ms) | lanes, rows gathered | lanes, rows whole "
          "(timing only) | warm: solver's, gathered, whole | z's difference |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        gathered, whole = Path(tmp) / "lanes", Path(tmp) / "lanes_contig"
        build(a.cc, flags, gathered, "biccg_lanes.c")
        build(a.cc, flags + " -DLANES_CONTIG", whole, "biccg_lanes.c")
        for grid in grids:
            for t in a.threads:
                g, w = run(gathered, grid, a.rounds, t, tile), run(whole, grid, a.rounds, t, tile)
                if g is None or w is None:
                    print("this machine has no AVX-512: the prototype does not run here")
                    return 0
                print(f"| {'x'.join(map(str, grid))} | {t} | {g['precond_ms']:.2f} | "
                      f"{g['lanes_ms']:.2f} ({g['precond_ms'] / g['lanes_ms']:.2f}x) | "
                      f"{w['lanes_ms']:.2f} ({w['precond_ms'] / w['lanes_ms']:.2f}x) | "
                      f"{g['precond_warm_ms']:.2f}, {g['lanes_warm_ms']:.2f}, "
                      f"{w['lanes_warm_ms']:.2f} | {g['z_max_rel_diff']:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
