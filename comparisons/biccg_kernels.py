"""The BICCG solver's SpMV and preconditioner beside the versions they replaced.

Builds biccg_kernels.c against the solver's own sources (kernels_ext/src/biccg)
with the MPI compiler wrapper, then runs it for each grid and thread count: one
process each, the two versions alternating inside it, each call after a flush
of twice the last-level cache and then once more at once ("warm": its operands
in cache as far as they fit), medians of --rounds calls.  The "before" versions
are the plain CSR SpMV without software prefetch and the solver's substitutions
without the register carry and the plan's prefetch (its path for tiles).  Blocks and
factor as the solver's defaults (tiles of the grid, single precision), or as
--blocking and --factor say.  The preconditioner's time is also given per row
and sweep, in thread-ns (ms x threads / rows / 2).  A warm call as slow as the
flushed one, at a grid whose operands fit the cache, says the kernel is bound
by its instructions, not by the memory.

    python comparisons/biccg_kernels.py --grid 64 64 64 --grid 128 128 128 --rounds 21
    python comparisons/biccg_kernels.py --blocking rows --factor double   # the old harness
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from kernels_ext.biccg import auto_tile
from kernels_ext.common.sysinfo import last_level_cache_bytes

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "kernels_ext" / "biccg" / "src"


def driver_env(threads: int) -> dict[str, str]:
    """The environment of a C driver's process: `threads` OpenMP threads bound to cores, and
    this machine's last-level cache (BC_LLC_BYTES), by which the drivers decide the sweeps'
    prefetch as the solver does (biccg_bench.h; BC_SWEEP_PREFETCH=1|0 forces it; the SpMV's
    prefetch hint is the solver's for this CPU, or BC_SPMV_NTA=1|0, non-temporal or not)."""
    return os.environ | {"OMP_NUM_THREADS": str(threads), "OMP_PLACES": "cores",
                         "OMP_PROC_BIND": "close", "BC_LLC_BYTES": str(last_level_cache_bytes())}


def mpi_prefix(ranks: int, threads: int) -> list[str]:
    """The venv's mpiexec for `ranks` ranks, each bound to its `threads` cores, as our
    solver's comparisons launch it; none for one rank."""
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    return [mpiexec, "-n", str(ranks), "-bind-to", f"core:{threads}"] if ranks > 1 else []


def build(cc: str, flags: str, out: Path, driver: str | Path = "biccg_kernels.c",
          src: Path = SRC) -> None:
    """Compile `driver` (a name in comparisons/, or a path) with the solver's C sources in
    `src` (this tree's by default) into `out`."""
    sources = [str(HERE / driver), *sorted(str(p) for p in src.glob("*.c"))]
    args = [cc, *shlex.split(flags), f"-I{src}", *sources, "-lm", "-o", str(out)]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: {shlex.join(args)} failed: {proc.stderr.strip()[-600:]}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cc", default=str(Path(sys.executable).parent / "mpicc"),
                   help="MPI C compiler wrapper (default: the environment's mpicc)")
    p.add_argument("--flags", default="-O3 -march=native -fopenmp")
    p.add_argument("--grid", type=int, nargs=3, action="append",
                   metavar=("NX", "NY", "NZ"), help="a grid (repeat for more; default 128^3)")
    p.add_argument("--block-size", type=int, default=32)
    p.add_argument("--colors", type=int, default=20)
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--blocking", choices=("tiles", "rows"), default="tiles")
    p.add_argument("--factor", choices=("single", "double"), default="single")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    a = p.parse_args()
    grids = a.grid or [[128, 128, 128]]
    tile = auto_tile(a.block_size) if a.blocking == "tiles" else None
    if a.blocking == "tiles" and tile is None:
        p.error(f"no tile has {a.block_size} points; use --blocking rows")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "biccg_kernels"
        build(a.cc, a.flags, exe)
        for grid, t in ((g, t) for g in grids for t in a.threads):
            env = driver_env(t)
            args = [*grid, a.rounds, a.block_size, a.colors, *(tile or (0, 0, 0)),
                    int(a.factor == "single")]
            proc = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                                  env=env)
            if proc.returncode != 0:
                sys.exit(f"error: {exe.name} failed: {proc.stderr.strip()[-400:]}")
            r = json.loads(proc.stdout.splitlines()[-1])
            r.update(grid=grid, blocking=a.blocking, tile=tile, factor=a.factor)
            results.append(r)
            per_row = 1e6 * t / r["n"] / 2  # thread-ns per row and sweep, per ms
            print(f"{t} thread(s), Poisson {'x'.join(map(str, grid))}, block {a.block_size} "
                  f"({a.blocking}), {r['colors']} colors, {a.factor} factor, medians of "
                  f"{a.rounds} (flushed; warm), the SpMV's stream prefetched "
                  f"{'non-temporal' if r['spmv_nta'] else 'ordinary'}:")
            for name, label in (("spmv", "SpMV"), ("precond", "preconditioner")):
                now, old = r[f"{name}_ms"], r[f"{name}_before_ms"]
                warm, old_warm = r[f"{name}_warm_ms"], r[f"{name}_before_warm_ms"]
                print(f"  {label:15} {now:7.2f} ms, before {old:7.2f} ms ({old / now:.2f}x); "
                      f"warm {warm:7.2f} ms, before {old_warm:7.2f} ms ({old_warm / warm:.2f}x)")
            print(f"  preconditioner a row and sweep: {r['precond_ms'] * per_row:.2f} thread-ns "
                  f"flushed, {r['precond_warm_ms'] * per_row:.2f} warm (before "
                  f"{r['precond_before_ms'] * per_row:.2f}, "
                  f"{r['precond_before_warm_ms'] * per_row:.2f})\n"
                  f"  same results: max relative difference {r['spmv_max_rel_diff']:.1e} "
                  f"(SpMV), {r['precond_max_rel_diff']:.1e} (preconditioner), r'z "
                  f"{r['rz_rel_diff']:.1e}")
    if a.out:
        a.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
