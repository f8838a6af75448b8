"""The Triad alone, or the Triad of STREAM's four kernels: the same rate?  The time model's
Triad beside each solve (``kernels_ext.triad.node_rate``) is the memory's rate, measured
at the rule size before and after the solve.  A pass of the four kernels moves 80 bytes an
element, the Triad alone 24, so at 4x a large last-level cache most of a BICCG process's
time in a sweep can go to the passes that are not counted.  This measures both ways side
by side, in one process, on the same kept arrays (their first touch paid once, before the
rounds): each round measures the four kernels and the Triad alone, in alternating order,
each as node_rate does (``--ntimes`` passes, the best of passes 2..ntimes), and prints
each way's Triad rate and the call's wall time, their medians, and the medians of the
per-round ratios (alone over four).

    .venv/bin/python comparisons/triad_alone.py --threads 2 --rounds 9
    .venv/bin/python comparisons/triad_alone.py --threads 1 --size 50000000
"""

from __future__ import annotations

import argparse
import statistics
import time

from kernels_ext.common.errors import KernelError
from kernels_ext.triad import BESIDE_NTIMES, check_size, measure, release


def one(n: int, ntimes: int, threads: int, alone: bool) -> tuple[float, float]:
    """(Triad GB/s, wall seconds) of one measurement on the kept arrays."""
    t0 = time.perf_counter()
    rec = next(r for r in measure(n, ntimes, threads, keep=True, triad_only=alone)
               if r["function"] == "Triad")
    return rec["best_rate_gbs"], time.perf_counter() - t0


def main() -> None:
    """Parse the arguments, measure the rounds, print them and the medians."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--size", default="auto", help="elements an array (default: the rule "
                    "size, 4x the last-level cache, as node_rate's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ntimes", type=int, default=BESIDE_NTIMES,
                    help="passes a measurement (default %(default)s, node_rate's)")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    if args.rounds < 1 or args.ntimes < 2 or args.threads < 1:
        ap.error("--rounds and --threads at least 1, --ntimes at least 2")
    try:
        n = check_size(args.size)[0]
    except KernelError as exc:
        ap.error(f"--size: {exc}")
    print(f"{n} elements an array ({24 * n / 2**30:.2f} GiB), {args.threads} thread(s), "
          f"{args.ntimes} passes a measurement, {args.rounds} rounds", flush=True)
    t0 = time.perf_counter()
    one(n, 2, args.threads, True)  # the first touch and fill, not counted
    print(f"first touch and fill: {time.perf_counter() - t0:.2f} s", flush=True)
    four: list[tuple[float, float]] = []
    alone: list[tuple[float, float]] = []
    for r in range(args.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        got = {a: one(n, args.ntimes, args.threads, a) for a in order}
        four.append(got[False])
        alone.append(got[True])
        print(f"round {r} ({'four first' if r % 2 == 0 else 'alone first'}): four "
              f"{got[False][0]:.2f} GB/s in {got[False][1]:.2f} s, alone {got[True][0]:.2f} "
              f"GB/s in {got[True][1]:.2f} s", flush=True)
    release()
    for name, rows in (("four kernels", four), ("Triad alone", alone)):
        rates, walls = [x[0] for x in rows], [x[1] for x in rows]
        print(f"{name:>12}: Triad {statistics.median(rates):.2f} GB/s ({min(rates):.2f}-"
              f"{max(rates):.2f}), a call {statistics.median(walls):.2f} s ({min(walls):.2f}-"
              f"{max(walls):.2f})")
    ratio = [a[0] / f[0] for a, f in zip(alone, four)]
    wall = [a[1] / f[1] for a, f in zip(alone, four)]
    print(f"alone / four, per round: rate {statistics.median(ratio):.3f} ({min(ratio):.3f}-"
          f"{max(ratio):.3f}), wall {statistics.median(wall):.3f} ({min(wall):.3f}-"
          f"{max(wall):.3f})")


if __name__ == "__main__":
    main()
