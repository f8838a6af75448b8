"""A Triad server's kept arrays beside a fresh process's, in alternating rounds (issue 31).

A Triad sweep keeps one process per setting alive (``--serve``) and sends it each
repetition: its arrays are touched once and measured again and again, minutes apart where
the settings measure in blocks (burstbench.core.servers.in_blocks).  This script asks,
on this machine: do kept arrays stream as fresh ones do?  One server is started and
answers a first request; then, each round, after `--idle` seconds it measures again (kept)
and, after `--idle` seconds more, a fresh process measures the same configuration (fresh:
its arrays filled just before).  Both run the C kernel with OMP_PLACES=cores,
OMP_PROC_BIND=close, on one thread and on all the CPUs.  Per round and team it takes the
median of each pass's seconds (the four kernels summed) after the first; it prints the
rounds and, per team, the median of kept / fresh over rounds and how many rounds the kept
arrays were slower.

    python comparisons/triad_kept_vs_fresh.py --size 136314880 --rounds 12 --idle 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from burstbench.core import runner  # noqa: E402
from burstbench.core.servers import Servers  # noqa: E402


def pass_s(records: list[dict], threads: int) -> float:
    """The median over passes but the first of the four kernels' seconds summed."""
    mine = [r for r in records if r.get("threads") == threads and "times_s" in r]
    ntimes = len(mine[0]["times_s"])
    return statistics.median(sum(r["times_s"][i] for r in mine) for i in range(1, ntimes))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=136314880, help="elements per array")
    ap.add_argument("--ntimes", type=int, default=10, help="passes per request")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--idle", type=float, default=10.0, help="seconds before each request")
    a = ap.parse_args()
    if a.rounds < 1 or a.ntimes < 2 or a.idle < 0:
        sys.exit("error: --rounds >= 1, --ntimes >= 2 and --idle >= 0, please")
    teams = sorted({1, len(os.sched_getaffinity(0))})
    argv = (sys.executable, "-m", "kernels_ext.triad", "--size", str(a.size), "--ntimes",
            str(a.ntimes), "--threads", ",".join(map(str, teams)))
    env = (("OMP_PLACES", "cores"), ("OMP_PROC_BIND", "close"))
    # the sweep's own paths: a session's server (Servers.launch), and a fresh process
    kept = runner.Task("kept", {}, argv, env, session="kept")
    fresh = runner.Task("fresh", {}, argv, env)
    ratios: dict[int, list[float]] = {t: [] for t in teams}
    with Servers() as serving:
        serving.launch(kept)  # its arrays touched, as after a setting's first repetition
        for r in range(a.rounds):
            time.sleep(a.idle)
            k = runner.json_records(*serving.launch(kept))
            time.sleep(a.idle)
            f = runner.json_records(*runner.launch(fresh))
            line = []
            for t in teams:
                ks, fs = pass_s(k, t), pass_s(f, t)
                ratios[t].append(ks / fs)
                line.append(f"{t} thread(s): kept {ks:.3f} s, fresh {fs:.3f} s")
            print(f"round {r + 1}/{a.rounds}: " + "; ".join(line), flush=True)
    print(f"\nsize {a.size:,}, {a.rounds} rounds, idle {a.idle:g} s: a pass's seconds, kept / "
          "fresh")
    for t, rs in ratios.items():
        print(f"{t} thread(s): median {statistics.median(rs):.3f} (min {min(rs):.3f}, max "
              f"{max(rs):.3f}); kept slower in {sum(x > 1 for x in rs)} of {len(rs)}")


if __name__ == "__main__":
    main()
