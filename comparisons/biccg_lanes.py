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
from collections.abc import Callable, Iterator
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


#: how the tile drivers are compiled (biccg_lanes.c, biccg_padded.c, biccg_split_spmv.c)
FLAGS = "-O3 -march=native -fopenmp -std=gnu99"


def tile_args(doc: str, rounds: int) -> tuple[argparse.Namespace, tuple]:
    """A tile driver's script's command line (--cc, --grid, --rounds, --threads; `doc` its
    help), its grids defaulted to 128^3, and the solver's tile for blocks of 32."""
    p = argparse.ArgumentParser(description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cc", default=str(Path(sys.executable).parent / "mpicc"))
    p.add_argument("--grid", type=int, nargs=3, action="append", metavar=("NX", "NY", "NZ"),
                   help="a grid (repeat for more; default 128^3)")
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    a = p.parse_args()
    if a.rounds < 1 or min(a.threads) < 1:
        p.error("--rounds and --threads must be positive")
    a.grid = a.grid or [[128, 128, 128]]
    tile = auto_tile(32)
    assert tile is not None  # 32 points make a tile (4 x 4 x 2)
    return a, tile


def each_run(exe: Path, a: argparse.Namespace, tile: tuple,
             why_not: str) -> Iterator[tuple[str, int, dict]]:
    """exe run for each of a's grids and thread counts: (the grid as NXxNYxNZ, threads, its
    record); where it cannot run (run's None) a line says so, `why_not`, and it is skipped."""
    for grid in a.grid:
        for t in a.threads:
            r = run(exe, grid, a.rounds, t, tile)
            name = "x".join(map(str, grid))
            if r is None:
                print(f"{name}: {why_not}")
            else:
                yield name, t, r


def spmv_table(doc: str, source: str, name: str, key: str, why_not: str,
               last: tuple[str, Callable[[dict], str]]) -> int:
    """The whole of an SpMV tile driver's script (biccg_split_spmv.py, biccg_sell_spmv.py):
    `source` built and run for each grid and thread count of the command line (`doc` its
    help, `why_not` where it cannot run), a table row each: bc_spmv beside the storage
    `name` (the record's `key`_ms and `key`_warm_ms), whether y is the same bits, and a
    last column, last = (its header, its cell from the record)."""
    a, tile = tile_args(doc, 15)
    print(f"| grid | threads | bc_spmv (ms) | {name} (ms) | {name} / bc_spmv | warm: bc_spmv, "
          f"{name} (ms) | y the same bits | {last[0]} |")
    print("|---|---|---:|---:|---:|---|---|---|")
    hint = ""
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / key
        build(a.cc, FLAGS, exe, source)
        for grid, t, r in each_run(exe, a, tile, why_not):
            print(f"| {grid} | {t} | {r['spmv_ms']:.2f} | {r[key + '_ms']:.2f} | "
                  f"{r[key + '_ms'] / r['spmv_ms']:.2f} | "
                  f"{r['spmv_warm_ms']:.2f}, {r[key + '_warm_ms']:.2f} | "
                  f"{'yes' if r['same_bits'] else 'no'} | {last[1](r)} |")
            hint = "non-temporal" if r["spmv_nta"] else "ordinary"
    if hint:
        print(f"\nbc_spmv prefetched A's stream as {hint} lines (the solver's rule for this "
              f"CPU, or BC_SPMV_NTA=1|0)")
    return 0


def main() -> int:
    a, tile = tile_args(__doc__, 9)
    with tempfile.TemporaryDirectory() as tmp:
        padded = Path(tmp) / "padded"
        build(a.cc, FLAGS, padded, "biccg_padded.c")
        print("| grid | threads | solver's sweeps (ms) | padded (ms) | padded / solver's | "
              "warm: solver's, padded (ms) | z's difference |")
        print("|---|---|---:|---:|---:|---|---|")
        for grid, t, r in each_run(padded, a, tile, "a row has more than three entries in a pass"):
            print(f"| {grid} | {t} | {r['precond_ms']:.2f} | "
                  f"{r['padded_ms']:.2f} | {r['padded_ms'] / r['precond_ms']:.2f} | "
                  f"{r['precond_warm_ms']:.2f}, {r['padded_warm_ms']:.2f} | "
                  f"{r['z_max_rel_diff']:.1e} |")
    print()
    print("| grid | threads | solver's sweeps (ms) | lanes, rows gathered | lanes, rows whole "
          "(timing only) | warm: solver's, gathered, whole | z's difference |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        gathered, whole = Path(tmp) / "lanes", Path(tmp) / "lanes_contig"
        build(a.cc, FLAGS, gathered, "biccg_lanes.c")
        build(a.cc, FLAGS + " -DLANES_CONTIG", whole, "biccg_lanes.c")
        for grid in a.grid:
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
