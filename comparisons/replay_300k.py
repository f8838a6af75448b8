"""`burstbench replay` on a log of 300,000 jobs: wall time and peak memory, the wait's
predictor and the queue's re-simulation included.

The log: the first `--jobs` of a real one (`--log`, e.g. RICC's, with the options it needs
after `--`), or else an SWF written here from a seeded generator: a 1,000-node machine of 32
processors a node, a year of Poisson arrivals, nodes log-uniform over 1-64, run times
log-normal (median 20 min, at most 2 days), requested times 1-3x the run, waits log-normal with
a third of them 0, 300 users.  The command runs in a fresh process (imports included),
`--rounds` times; printed: the median and min-max wall time, the peak resident memory of the
slowest round (the child's ru_maxrss), and the same for the parts in this process (parse,
replay).  The issue asks for under 60 s and under 2 GB.

    .venv/bin/python comparisons/replay_300k.py --rounds 3
    .venv/bin/python comparisons/replay_300k.py --log ../shared/workloads/RICC-2010-2.swf.gz \
        --rounds 3 -- --machine-nodes 1024 --procs-per-node 8 --shared-nodes
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def synthetic_swf(path: Path, jobs: int, seed: int = 1) -> None:
    """A seeded SWF log of `jobs` jobs (see the module docstring)."""
    rng = np.random.default_rng(seed)
    year = 365 * 86400
    submit = np.sort(rng.uniform(0, year, jobs)).round()
    nodes = np.exp(rng.uniform(0, np.log(64), jobs)).astype(int)
    run = np.minimum(rng.lognormal(np.log(1200), 1.5, jobs), 2 * 86400).round() + 1
    req = (run * rng.uniform(1, 3, jobs)).round()
    wait = np.where(rng.uniform(size=jobs) < 1 / 3, 0, rng.lognormal(np.log(1800), 2, jobs)
                    ).round()
    procs = nodes * 32
    m1 = -np.ones(jobs)
    cols = [np.arange(1, jobs + 1), submit, wait, run, procs, m1, m1, procs, req, m1,
            np.ones(jobs), rng.integers(1, 300, jobs), rng.integers(1, 50, jobs), m1,
            np.ones(jobs), m1, m1, m1]
    head = ("; Version: 2.2\n; Computer: synthetic\n; Installation: comparisons/replay_300k.py\n"
            "; MaxNodes: 1000\n; MaxProcs: 32000\n; UnixStartTime: 1700000000\n")
    with open(path, "w") as f:
        f.write(head)
        np.savetxt(f, np.column_stack(cols), fmt="%d")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--log", default="", help="a real log, its first --jobs taken")
    ap.add_argument("extra", nargs="*", help="after --: the replay's own options")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.swf"
        t = time.perf_counter()
        if args.log:
            from burstbench.replay.logs import read_text

            lines = [x for x in read_text(args.log).splitlines() if x.strip()]
            jobs = [x for x in lines if not x.lstrip().startswith(";")][:args.jobs]
            log.write_text("\n".join([x for x in lines if x.lstrip().startswith(";")]
                                     + jobs) + "\n")
            what = f"the first {len(jobs):,} jobs of {Path(args.log).name}"
        else:
            synthetic_swf(log, args.jobs)
            what = f"{args.jobs:,} synthetic jobs"
        print(f"wrote {what} ({log.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t:.1f} s")
        walls = []
        for _ in range(args.rounds):
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "burstbench", "replay", "--log",
                                   str(log), *args.extra], cwd=root, capture_output=True,
                                  text=True)
            walls.append(time.perf_counter() - t)
            if proc.returncode:
                print(proc.stderr, file=sys.stderr)
                return 1
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB -> MiB
        print(f"burstbench replay, fresh process: median {statistics.median(walls):.1f} s "
              f"(min {min(walls):.1f}, max {max(walls):.1f}; {args.rounds} rounds), peak "
              f"resident memory {rss:.0f} MiB")
        print("\n".join(proc.stdout.splitlines()[:2]))
        from burstbench.cli import build_parser
        from burstbench.replay import logs, run

        opts = build_parser().parse_args(["replay", "--log", str(log), *args.extra])
        t = time.perf_counter()
        lg = logs.read_log(log)
        parse = time.perf_counter() - t
        t = time.perf_counter()
        run.replay(lg, machine_nodes=opts.machine_nodes, procs_per_node=opts.procs_per_node,
                   shared_nodes=opts.shared_nodes)
        rep = time.perf_counter() - t
        print(f"in this process: parse {parse:.1f} s, replay {rep:.1f} s; peak resident "
              f"memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
