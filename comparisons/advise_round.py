"""One round of `burstbench advise` on a large centre: its wall time, by part.

The queue: a real log's jobs (`--log`, KTH's by default) as the history, the log's end taken as
now; its last `--pending` jobs taken as pending now (their estimate simulated, the scheduler
having given none), those running at the end as running.  Timed in this process after one
warm-up round (numba's compilation is cached on disk; LightGBM's refits are not):
reading nothing (the snapshot is built here), the advice (the wait's predictor, the run
guess, every VM's pricing and P(sooner)), `--rounds` times; the median and min-max.

    .venv/bin/python comparisons/advise_round.py --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from burstbench.advise import advice, queue
from burstbench.replay import logs


def log_job(r, t0: float, now: float) -> queue.Job:
    """A log's job (a row of logs.Log.jobs, its times shifted by `t0`) as the queue shows it
    at `now`: finished where it had ended, running where it had started, else pending (its
    start and end not known yet)."""
    s = t0 + r.submit
    start, end = s + r.wait, s + r.wait + r.run
    state = "finished" if end <= now else "running" if start <= now else "pending"
    return queue.Job(str(r.job), state, str(r.user), "onprem", max(int(r.procs), 1),
                     int(r.procs), r.req_time if r.req_time == r.req_time else np.nan, s,
                     start if state != "pending" else np.nan,
                     end if state == "finished" else np.nan)


def snapshot_of(path: str, pending: int, now: float = 1.8e9) -> queue.Snapshot:
    """The log as a queue at its end (see the module docstring)."""
    j = logs.read_log(path).jobs
    t0 = now - float(j["submit"].iloc[-1]) - 1
    known = [log_job(r, t0, now - 1) for r in j.iloc[:-pending].itertuples()]
    hist = [job for job in known if job.state == "finished"]
    run = [job for job in known if job.state == "running"]
    pend = [log_job(r, t0, -np.inf) for r in j.iloc[-pending:].itertuples()]
    nodes = [f"n{i}" for i in range(100)] + [f"c{i}" for i in range(4)]
    return queue.Snapshot("slurm", "a replayed log", now, run + pend, hist,
                          {"onprem": nodes[:100], "cloud": nodes[100:]}, "none (simulated)",
                          path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", default="../shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz")
    ap.add_argument("--pending", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    t = time.perf_counter()
    snap = snapshot_of(a.log, a.pending)
    built = time.perf_counter() - t
    rules, prices = advice.setup(None, 0.0, 0.0)
    times = []
    for k in range(a.rounds + 1):
        t = time.perf_counter()
        adv = advice.advise(snap, prices, rules, cloud="cloud")
        if k:
            times.append(time.perf_counter() - t)
    print(f"{a.log}: {len(snap.history):,} finished, "
          f"{sum(j.state == 'running' for j in snap.jobs)} running, {a.pending} pending "
          f"(snapshot built in {built:.1f} s)")
    print(f"one round of advice: median {statistics.median(times):.2f} s "
          f"(min {min(times):.2f}, max {max(times):.2f}, {a.rounds} rounds)")
    print(f"wait: {adv.basis['wait'][:120]}...")
    print(adv.table["verdict"].value_counts().to_string())


if __name__ == "__main__":
    main()
