"""The BICCG solver's SpMV and preconditioner beside the versions they replaced.

Builds biccg_kernels.c against the solver's own sources (kernels_ext/src/biccg)
with the MPI compiler wrapper, then runs it for each thread count: one
process per thread count, the two versions alternating inside it, each call
after a cache flush, medians of --rounds calls.  The "before" versions are
the plain CSR SpMV and the substitutions whose in-block recurrence read the
previous row back from memory, neither with software prefetch.

    python comparisons/biccg_kernels.py --grid 128 128 128 --rounds 21 --threads 1 2
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

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "kernels_ext" / "biccg" / "src"


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
    p.add_argument("--grid", type=int, nargs=3, default=[128, 128, 128],
                   metavar=("NX", "NY", "NZ"))
    p.add_argument("--block-size", type=int, default=32)
    p.add_argument("--colors", type=int, default=20)
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    a = p.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "biccg_kernels"
        build(a.cc, a.flags, exe)
        for t in a.threads:
            env = os.environ | {"OMP_NUM_THREADS": str(t), "OMP_PLACES": "cores",
                                "OMP_PROC_BIND": "close"}
            proc = subprocess.run([str(exe), *map(str, a.grid), str(a.rounds),
                                   str(a.block_size), str(a.colors)],
                                  capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                sys.exit(f"error: {exe.name} failed: {proc.stderr.strip()[-400:]}")
            r = json.loads(proc.stdout.splitlines()[-1])
            results.append(r)
            print(f"{t} thread(s), Poisson {'x'.join(map(str, a.grid))}, block {a.block_size}, "
                  f"{r['colors']} colors, medians of {a.rounds}:\n"
                  f"  SpMV            {r['spmv_ms']:7.2f} ms, before {r['spmv_before_ms']:7.2f} ms"
                  f" ({r['spmv_before_ms'] / r['spmv_ms']:.2f}x)\n"
                  f"  preconditioner  {r['precond_ms']:7.2f} ms, before "
                  f"{r['precond_before_ms']:7.2f} ms "
                  f"({r['precond_before_ms'] / r['precond_ms']:.2f}x)\n"
                  f"  same results: max relative difference {r['spmv_max_rel_diff']:.1e} "
                  f"(SpMV), {r['precond_max_rel_diff']:.1e} (preconditioner)")
    if a.out:
        a.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
