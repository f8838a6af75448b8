"""Where BICCG's setup spends its time, phase by phase (issue 53).

Builds biccg_setup_profile.c with the solver's sources compiled -DBC_PROFILE (the
BC_PHASE timers in kernels_ext/biccg/src print each phase's seconds to stderr, and a
digest of what the setup built: the same digest before and after a change shows the
ordering, matrix, prefetch plan and factor bitwise unchanged), then runs it --rounds
times per grid, one fresh process each (the setup's pages are new to its process, as
in a real run), and prints each phase's median and range.

    python comparisons/biccg_setup_profile.py --grid 128 128 128 --threads 2 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from biccg_kernels import build  # comparisons/ is on sys.path: these run as scripts

FLAGS = "-O3 -march=native -fopenmp -std=gnu99 -DBC_PROFILE"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cc", default=str(Path(sys.executable).parent / "mpicc"))
    p.add_argument("--grid", type=int, nargs=3, default=[128, 128, 128])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "biccg_setup_profile"
        build(a.cc, FLAGS, exe, "biccg_setup_profile.c")
        phases: dict[str, list[float]] = defaultdict(list)
        digests = set()
        env = os.environ | {"OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}
        for _ in range(a.rounds):
            proc = subprocess.run([str(exe), *map(str, a.grid), str(a.threads), "0"],
                                  capture_output=True, text=True, env=env, check=True)
            for line in proc.stderr.splitlines():
                if line.startswith("phase "):
                    name, secs, _ = line[6:].rsplit(None, 2)  # "phase NAME SECONDS s"
                    phases[name.strip()].append(float(secs))
                elif line.startswith("digest "):
                    digests.add(line)
    total = [sum(x) for x in zip(*phases.values(), strict=True)]
    print(f"Poisson {'x'.join(map(str, a.grid))}, {a.threads} thread(s), {a.rounds} fresh "
          "processes; seconds, median (min-max):")
    for name, xs in [*phases.items(), ("setup (sum)", total)]:
        print(f"  {name:28} {statistics.median(xs):.4f} ({min(xs):.4f}-{max(xs):.4f})")
    print(*sorted(digests), sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
