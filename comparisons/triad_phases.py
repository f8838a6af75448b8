"""Does this VM's bandwidth change per process, or over time?  The question behind how a
Triad sweep spends its processes (issue 31): if each process drew its speed once for its
whole life, a setting's repetitions would need fresh processes; if the speed changes over
time, in and across processes, they need to be spread over the sweep's time instead, and a
process can serve several of them.

Each round, alternating, 12 Triad measurements (2 threads, normal stores, cores+close,
NTIMES passes, best of passes 2..NTIMES) taken three ways, printed in the order taken:

- one process, each measurement on arrays of its own (``fresh``);
- one process, all on the same arrays, refilled (what a sweep's server does);
- twelve processes, one measurement each.

    .venv/bin/python comparisons/triad_phases.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

MEASURE = r"""
import json, sys
from kernels_ext.triad import _triad
n, count, fresh, ntimes = (int(x) for x in sys.argv[1:5])
out = []
for raw in _triad.series(n, ntimes, [(2, "normal")] * count, -1, fresh):
    out.append(round(24 * n / min(raw["times"]["Triad"][1:]) / 1e9, 1))
print(json.dumps(out))
"""


def measure(n: int, count: int, fresh: bool, ntimes: int) -> list[float]:
    """Triad GB/s of `count` measurements in one process."""
    env = dict(os.environ, OMP_PLACES="cores", OMP_PROC_BIND="close")
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(n), str(count), str(int(fresh)),
                           str(ntimes)], capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=16_777_216, help="elements per array")
    ap.add_argument("--ntimes", type=int, default=10)
    ap.add_argument("--count", type=int, default=12, help="measurements per way and round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for r in range(args.rounds):
        print(f"round {r}", flush=True)
        print("  one process, fresh arrays each:", measure(args.size, args.count, True,
                                                          args.ntimes), flush=True)
        print("  one process, the same arrays:  ", measure(args.size, args.count, False,
                                                          args.ntimes), flush=True)
        print("  a process each:                ", [measure(args.size, 1, False, args.ntimes)[0]
                                                    for _ in range(args.count)], flush=True)


if __name__ == "__main__":
    main()
