"""BICCG's setup when one process solves again and again, back to back or with pauses.

A job that solves several times (time steps) sets the solver up once a solve: the setup
allocates its arrays (about 385 MB at 128^3) and frees them when the solve returns.  On a
VM whose balloon device reports free pages to the host (virtio_balloon's free page
reporting; Linux hands freed 2 MiB blocks back after about 2 s), memory freed and touched
again seconds later faults in the host: "cold" (comparisons/README.md).  The solver keeps
its large arrays between solves for that reason (kernels_ext/biccg/src/cg.c, the pool).

This runs --solves solves of Poisson NX x NY x NZ (one iteration each: the setup is what is
timed) in one process, sleeping --pause seconds between them, for each pause and each kind
of process given, the processes alternating over --rounds rounds, and prints each solve's
setup (the solver's setup_s: input check, ordering, factorization, halo plan, CG's vectors)
seconds and the medians of the solves after the first, and the most any call spent outside
its setup and solve (wall clock around biccg.solve less the two: the residual's check, the
report; 0.13 s at 128^3 when CG's vectors went untimed).
The kinds:

  kept      the solver as it is: its arrays kept for the next solve;
  released  release_memory() after each solve: the arrays handed back to the system, as
            the solver did before it kept them;
  glibc     released, but the C library keeps what is freed (GLIBC_TUNABLES below: no
            mmap for large blocks, no trimming of the heap): what a job could set without
            the solver's help.  Since the solver maps its large blocks itself (mmap, so
            that their pages are of the kind asked for: comparisons/README.md, "Huge pages
            or base pages"), these settings no longer reach them, and this kind measures
            what released does.

    python comparisons/biccg_repeat_setup.py --grid 128 128 128 --pause 0 5 --rounds 2
    python comparisons/biccg_repeat_setup.py --pause 5 --kinds released kept glibc
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

#: glibc keeps what the solver frees: large blocks from the heap (never mmap), the heap
#: never trimmed (64 GiB)
RETAIN = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"
KINDS = ("kept", "released", "glibc")


def child(grid: list[int], solves: int, pause: float, threads: int,
          release: bool) -> tuple[list[float], list[float]]:
    """In this process: each solve's setup seconds, and each call's seconds outside its
    setup and solve (release: the solver's memory handed back after each solve)."""
    import numpy as np

    from kernels_ext import biccg

    A = biccg.poisson_matrix(*grid)
    b = A @ np.ones(A.shape[0])
    setups, untimed = [], []
    for k in range(solves):
        if k:
            time.sleep(pause)
        t0 = time.perf_counter()
        _, rec = biccg.solve(A, b, threads=threads, max_iter=1, tol=1e-30, grid=grid)
        wall = time.perf_counter() - t0
        setups.append(rec["times"]["setup"])
        untimed.append(wall - rec["times"]["setup"] - rec["times"]["solve"])
        if release:
            biccg.release_memory()
    return setups, untimed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", type=int, nargs=3, default=[128, 128, 128],
                   metavar=("NX", "NY", "NZ"))
    p.add_argument("--solves", type=int, default=5)
    p.add_argument("--pause", type=float, nargs="+", default=[0.0, 5.0],
                   help="seconds between solves (one process per value)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=["released", "kept"],
                   help="kinds of process (see above; default: released kept)")
    p.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.solves < 2 or a.rounds < 1 or any(x < 0 for x in a.pause):
        p.error("--solves at least 2, --rounds at least 1, pauses not negative")
    if a.child:
        print(json.dumps(child(a.grid, a.solves, a.pause[0], a.threads, a.child != "kept")))
        return 0
    cases = [(x, kind) for x in a.pause for kind in dict.fromkeys(a.kinds)]
    later: dict[tuple[float, str], list[float]] = {c: [] for c in cases}
    outside: list[float] = []
    for r in range(a.rounds):
        for x, kind in (cases if r % 2 == 0 else cases[::-1]):
            env = os.environ | ({"GLIBC_TUNABLES": RETAIN} if kind == "glibc" else {})
            proc = subprocess.run(
                [sys.executable, __file__, "--child", kind, "--grid", *map(str, a.grid),
                 "--solves", str(a.solves), "--pause", str(x), "--threads", str(a.threads)],
                capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                sys.exit(f"error: the solving process failed: {proc.stderr.strip()[-400:]}")
            setups, untimed = json.loads(proc.stdout.splitlines()[-1])
            later[x, kind] += setups[1:]
            outside += untimed
            print(f"round {r + 1}, pause {x:g} s, {kind}: setups " +
                  ", ".join(f"{s:.3f}" for s in setups) + " s", flush=True)
    for (x, kind), s in later.items():
        print(f"pause {x:g} s, {kind}: the solves after the first set up in "
              f"{statistics.median(s):.3f} s (median; {min(s):.3f}-{max(s):.3f})")
    print(f"outside setup and solve: at most {max(outside) * 1e3:.1f} ms a call "
          f"(median {statistics.median(outside) * 1e3:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
