"""BICCG with its arrays in huge pages or in base pages: a fresh process's setup and solve.

The solver asks for transparent huge pages for its large arrays (kernels_ext/biccg/src/cg.c,
bc_alloc); `--pages base` (bc_params.base_pages) asks for base pages instead.  Huge pages
spare the solve's streams TLB misses.  But a huge page needs a free 2 MiB block of the
guest's memory, and on a VM whose balloon reports free blocks of 2 MiB and more to the host
(virtio_balloon's free page reporting), those blocks come back from the host page by page:
their first touch is slow.  Base pages come first from the smaller free blocks, which are
never reported.

Each round runs, each kind in turn (the order reverses every round), after --pause seconds
of sleep:

1. a probe: a fresh process's first touch of a fresh mapping of --probe-mib MiB, one write a
   4 KiB page, advised MADV_HUGEPAGE (huge) or MADV_NOHUGEPAGE (base) as the solver's
   blocks are, in GB/s;
2. `python -m kernels_ext.biccg --poisson NX NY NZ --threads T --pages KIND`, one solve to
   1e-7 in a fresh process.

Printed: each kind's medians (ranges) of the probe's rate, the setup and its parts, the
solve and its SpMV and preconditioner per iteration, and the per-round ratios base / huge.

    python comparisons/biccg_pages.py --grid 128 128 128 --threads 2 --rounds 5 --pause 5
    python comparisons/biccg_pages.py --rounds 9 --pause 0
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from biccg_vs_baselines import PY, run_json  # comparisons/ is on sys.path: these run as scripts

from kernels_ext.biccg import PAGES as KINDS  # huge first: the ratios are base / huge

#: the record's times printed, and their labels
TIMES = (("setup_s", "setup"), ("input_s", "  input check"), ("ordering_s", "  ordering"),
         ("factorization_s", "  factorization"), ("vectors_s", "  vectors"),
         ("solve_s", "solve"), ("spmv", "  SpMV an iteration"),
         ("precond", "  preconditioner an iteration"))


def probe(mib: int, huge: bool) -> float:
    """In this process: the first touch of a fresh mapping of mib MiB, advised huge or base
    pages as the solver's blocks are, GB/s."""
    import mmap

    import numpy as np

    m = mmap.mmap(-1, mib << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # not shmem
    m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
    a = np.frombuffer(m, dtype=np.uint8)
    t0 = time.perf_counter()
    a[::4096] = 1  # one write a 4 KiB page
    return a.nbytes / (time.perf_counter() - t0) / 1e9


def cell(xs: list[float], fmt: str = "{:.3f}") -> str:
    """median (min-max)"""
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", type=int, nargs=3, default=[128, 128, 128],
                   metavar=("NX", "NY", "NZ"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--pause", type=float, default=5.0,
                   help="seconds of sleep before each process (default 5: freed memory has "
                        "gone back to a reporting host by then)")
    p.add_argument("--probe-mib", type=int, default=400,
                   help="MiB the probe touches (default 400, about the setup's at 128^3)")
    p.add_argument("--probe-only", action="store_true",
                   help="run the probe alone, no solver (e.g. --probe-mib 4000)")
    p.add_argument("--probe", choices=KINDS, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.probe:
        print(json.dumps({"gbs": probe(a.probe_mib, a.probe == "huge")}))
        return 0
    if a.rounds < 1 or a.pause < 0 or a.probe_mib < 1 or min(a.grid) < 1:
        p.error("--rounds and --probe-mib at least 1, the grid positive, --pause not negative")
    mode = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    print(f"transparent huge pages: {mode.read_text().strip() if mode.exists() else 'unknown'}; "
          f"Poisson {'x'.join(map(str, a.grid))}, {a.threads} thread(s), pause {a.pause:g} s, "
          f"{a.rounds} rounds", flush=True)
    rate: dict[str, list[float]] = {k: [] for k in KINDS}
    rec: dict[str, list[dict]] = {k: [] for k in KINDS}
    for r in range(a.rounds):
        order = KINDS if r % 2 == 0 else KINDS[::-1]
        for kind in order:
            time.sleep(a.pause)
            rate[kind].append(run_json([PY, __file__, "--probe", kind, "--probe-mib",
                                        str(a.probe_mib)])["gbs"])
        for kind in () if a.probe_only else order:
            time.sleep(a.pause)
            x = run_json([PY, "-m", "kernels_ext.biccg", "--poisson", *map(str, a.grid),
                          "--threads", str(a.threads), "--pages", kind])
            rec[kind].append(x | x["per_iteration_s"])
        print(f"round {r + 1}: " + "; ".join(
            f"{k}: touch {rate[k][-1]:.2f} GB/s" + ("" if a.probe_only else
                                                    f", setup {rec[k][-1]['setup_s']:.3f} s, "
                                                    f"solve {rec[k][-1]['solve_s']:.3f} s")
            for k in KINDS), flush=True)
    if not a.probe_only:
        iters = {k: sorted({x["iterations"] for x in rec[k]}) for k in KINDS}
        print(f"\niterations: huge {iters['huge']}, base {iters['base']}")
    print("\n| | huge pages | base pages | base / huge, per round |\n|---|---|---|---|")
    print(f"| first touch, {a.probe_mib} MiB (GB/s) | {cell(rate['huge'], '{:.2f}')} | "
          f"{cell(rate['base'], '{:.2f}')} | "
          f"{cell([b / h for h, b in zip(rate['huge'], rate['base'])], '{:.2f}')} |")
    for key, label in TIMES if not a.probe_only else ():
        h, b = [x[key] for x in rec["huge"]], [x[key] for x in rec["base"]]
        scale = 1e3 if "iteration" in label else 1.0
        unit = "ms" if scale > 1 else "s"
        print(f"| {label} ({unit}) | {cell([v * scale for v in h])} | "
              f"{cell([v * scale for v in b])} | "
              f"{cell([y / x for x, y in zip(h, b) if x > 0], '{:.2f}')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
