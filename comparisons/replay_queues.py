"""The wait's predictor with each job's queue and partition, and without them.

Real logs often name a job's queue (SWF field 15) or partition (field 16; sacct's Partition,
PBS's queue), and where queues differ in priority a job's queue sets its wait as nothing
else it has does. Neither workload here names one (KTH: none; RICC: two queues, one of them
329 jobs), so this generates logs that do: a machine of 128 nodes scheduled by EASY
backfilling whose queue is ordered by (the queue's priority, submit) (`easy.simulate` with
`priority`), Poisson arrivals at 90% load, 1-63 nodes log-uniform, run times log-normal
(median 30 min, at most 2 days), requested times 1-4x the run, 80 users each sending 80% of
its jobs to a queue of its own and the rest at random. Modes:

- ``prio3``: three queues of priorities 0, 1, 2 (20%, 60%, 20% of the users);
- ``many``: eight queues, priority the queue's number mod 4;
- ``none``: three queues of the same priority (the queue says nothing);
- ``noise``: ``none``'s log, each job then given one of 200 queues at random (what a
  model that reads too much into categories loses);
- ``clusters``: no queues, two partitions of 64 nodes each scheduled apart (SWF field 16),
  at 85% load over both, users sending 55% of the work to the first (about 94% of its nodes
  busy, 77% of the second's);
- ``uneven``: no queues, three partitions of 80, 32 and 16 nodes scheduled apart (65%, 22%
  and 13% of the users; 63-94% of each one's nodes busy, means of 4-13 h of wait), a job at
  most its partition's size, 85% load over all;
- ``shared``: ``clusters``' partitions, scheduled as one machine (partitions that share
  their nodes, as Slurm's often do: a partition's own state says little);
- ``pnoise``: ``none``'s log, each job then given one of 20 partitions at random.

Each log is replayed (burstbench.replay.run.replay) as it is and with every queue and
partition blanked (-1), the rest identical. Printed per log: the predictor's pinball loss
on log(1 + wait) over its quantile levels (the jobs after the first 10%), and on one VM the
share of the perfect policy's hours that P(sooner)'s ranking keeps with 10% of its burst
jobs later (the replay's frontier), and the pick. ``--log`` replays a real log both ways.

    .venv/bin/python comparisons/replay_queues.py --seeds 1 2 --modes prio3 many none noise \
        clusters uneven shared pnoise
    .venv/bin/python comparisons/replay_queues.py --log LOG.swf [replay options]

Results: comparisons/README.md, "Queues of different priority".
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from burstbench.replay import logs, report, run
from burstbench.wait import easy
from burstbench.wait.score import pinball

CAPACITY = 128
#: The uneven mode's partitions: their nodes, and the users' shares of them.
UNEVEN = ((80, 32, 16), (0.65, 0.22, 0.13))


def generate(jobs: int, seed: int, mode: str) -> str:
    """An SWF log of the machine above (see the module docstring)."""
    rng = np.random.default_rng(seed)
    nodes = np.minimum(np.exp(rng.uniform(0, np.log(64), jobs)).astype(np.int64), CAPACITY)
    run_s = np.minimum(rng.lognormal(np.log(1800), 1.3, jobs), 2 * 86400).round() + 1
    req = np.maximum(np.minimum((run_s * rng.uniform(1, 4, jobs)).round() + 300, 3 * 86400),
                     run_s)
    users = rng.integers(0, 80, jobs)
    n_q = 8 if mode == "many" else 3
    own = np.random.default_rng(seed + 1).choice(
        n_q, 80, p=[0.2, 0.6, 0.2] if mode == "prio3" else None)
    queue = np.where(rng.uniform(size=jobs) < 0.8, own[users], rng.integers(0, n_q, jobs))
    prio = queue % 4 if mode == "many" else queue if mode == "prio3" else np.zeros(jobs, int)
    part = np.full(jobs, -1)
    if mode == "uneven":  # partitions first: a job fits its own
        sizes, shares = UNEVEN
        r_u = np.random.default_rng(seed + 5)
        own_u = r_u.choice(len(sizes), 80, p=shares)
        part = np.where(r_u.uniform(size=jobs) < 0.8, own_u[users],
                        r_u.integers(0, len(sizes), jobs))
        nodes = np.minimum(nodes, np.array(sizes)[part])
        queue = np.full(jobs, -1)
    load = 0.85 if mode in ("clusters", "uneven", "shared") else 0.9
    span = (nodes * run_s).sum() / (CAPACITY * load)
    submit = np.sort(rng.uniform(0, span, jobs)).round()
    if mode in ("clusters", "shared"):
        sizes = (64, 64)
        own_p = np.random.default_rng(seed + 3).choice(2, 80, p=[0.55, 0.45])
        part = np.where(rng.uniform(size=jobs) < 0.8, own_p[users], rng.integers(0, 2, jobs))
        queue = np.full(jobs, -1)
    if mode in ("clusters", "uneven"):
        start = np.zeros(jobs)
        for k, size in enumerate(sizes):
            at = part == k
            start[at] = easy.simulate(submit[at], nodes[at], run_s[at], req[at], size,
                                      priority=prio[at])
        wait = start - submit
    else:
        wait = easy.simulate(submit, nodes, run_s, req, CAPACITY, priority=prio) - submit
    if mode == "pnoise":
        part = np.random.default_rng(seed + 4).integers(0, 20, jobs)
    if mode == "noise":
        queue = np.random.default_rng(seed + 2).integers(0, 200, jobs)
    q_f, p_f = (np.where(v >= 0, v + 1, -1) for v in (queue, part))  # SWF's numbers, -1
    lines = [f"; MaxNodes: {CAPACITY}", f"; MaxProcs: {CAPACITY}"]
    lines += [f"{i + 1} {submit[i]:.0f} {wait[i]:.0f} {run_s[i]:.0f} {nodes[i]} -1 -1 "
              f"{nodes[i]} {req[i]:.0f} -1 1 {users[i] + 1} 1 -1 {q_f[i]} {p_f[i]} "
              "-1 -1"
              for i in range(jobs)]
    return "\n".join(lines) + "\n"


def compare(name: str, lg: logs.Log, vm: str, **kw) -> None:
    """`lg` replayed as it is and with its queues and partitions blanked: one line each."""
    blank = dataclasses.replace(lg, jobs=lg.jobs.assign(queue=-1, partition=-1))
    for how, log in (("queues", lg), ("blanked", blank)):
        r = run.replay(log, **kw)
        wait = log.jobs["wait"].to_numpy(float)
        k = len(wait) // 10
        f = r.frontier
        front = f[(f.vm == vm) & (f.ranked_by == "P(sooner)")]["of_perfect_at_later_0.1"]
        best = report.pick(r.rows[r.rows.vm == vm])
        said = (f"pick P(sooner) >= {best['p_sooner_min']:g}: {best['jobs_burst']:,} jobs, "
                f"{best['share_made_later']:.1%} later, {best['hours_saved']:,.0f} h saved + "
                f"{best['stays_hours_saved']:,.0f} h for the stays" if report.picked(best)
                else "no pick")
        print(f"{name:16s} {how:8s} pinball {pinball(r.predicted.q[k:], wait[k:]):.4f}  "
              f"frontier at 10% later {front.iloc[0]:.3f}  {said}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=30000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--modes", nargs="+", default=["prio3", "many", "none", "noise"],
                    choices=["prio3", "many", "none", "noise", "clusters", "uneven", "shared",
                             "pnoise"])
    ap.add_argument("--vm", default="HB120-16rs_v3")
    ap.add_argument("--log", help="a real log, replayed with and without its queues")
    ap.add_argument("--machine-nodes", type=int, default=0)
    ap.add_argument("--procs-per-node", type=float, default=0)
    ap.add_argument("--shared-nodes", action="store_true")
    a = ap.parse_args()
    if a.log:
        compare(a.log.split("/")[-1][:16], logs.read_log(a.log), a.vm,
                machine_nodes=a.machine_nodes, procs_per_node=a.procs_per_node,
                shared_nodes=a.shared_nodes)
        return
    for mode in a.modes:
        for seed in a.seeds:
            lg = logs.parse_swf(generate(a.jobs, seed, mode), f"{mode}-{seed}")
            compare(f"{mode}, seed {seed}", lg, a.vm)


if __name__ == "__main__":
    main()
