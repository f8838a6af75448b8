"""The replay's policies decided in the queue their own decisions thin (a closed loop),
against the replay as it is (open: every job decided on the log's queue).

`burstbench replay` predicts each job's wait from the log as it was, so a policy's burst
jobs are judged against waits that bursting would have shortened (docs/replay.md, "the
thinned queue").  Here the log is decided in chunks of `--chunk` submits: each chunk's jobs
on waits predicted (burstbench.wait.predict, as the replay does) from a world where the
earlier chunks' burst jobs are gone, from the queue and from the history, and every job
left waits its logged wait less what the re-simulation (EASY, as the thinned queue's)
says it waits less without them.  A chunk's own decisions do not reach its predictions.
`watch` (the replay's: decided again while a job waits) reads a job as still waiting at a
moment by its wait in its world, and a job burst after waiting is gone from the world from
its submit (as the replay's stays count it); its hours and its later shares count what was
left of its wait.

Judged for both, on one VM:
- jobs burst, the share made later against the logged waits, the hours saved (their own
  against the log, and the stays' gain, as the replay counts them), JPY;
- **later in its world**: every burst job's wait had it stayed while the others left, the
  burst jobs put back in groups of 5% (each group one re-simulation), the share of them the
  VM returns later than that.  It is the replay's `share_later_if_others_left`, over every
  burst job rather than a sample.

    .venv/bin/python comparisons/replay_closed_loop.py \
        --log ../shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz
    .venv/bin/python comparisons/replay_closed_loop.py \
        --log ../shared/workloads/RICC-2010-2.swf.gz --jobs 60000 \
        --machine-nodes 1024 --procs-per-node 8 --shared-nodes

Results: comparisons/README.md, "Decided in the queue it thins".
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from burstbench.replay import logs, policy, run
from burstbench.replay.pricing import pricing
from burstbench.replay.stays import THINNED_RULES, Stays
from burstbench.wait import easy
from burstbench.wait.predict import predict

RULES = "probability:0.9,probability:0.95,gain:64,gain:256,gain:1024"
GROUP = 0.05  # the share of the burst jobs put back in the queue at once


@dataclass
class Prepared:
    """A log's jobs as the replay reads them (burstbench.replay.run.read_jobs) and the
    VM's costed option for each."""

    log: logs.Log
    jobs: run.Jobs
    vm: str
    costed: policy.Costed


def log_arguments(ap: argparse.ArgumentParser) -> None:
    """The options that say which log, read how, priced on which VM (:func:`prepared`)."""
    ap.add_argument("--log", required=True)
    ap.add_argument("--jobs", type=int, default=0, help="the log's first N jobs (0: all)")
    ap.add_argument("--vm", default="HB120-16rs_v3")
    ap.add_argument("--machine-nodes", type=int, default=0)
    ap.add_argument("--procs-per-node", type=float, default=0)
    ap.add_argument("--shared-nodes", action="store_true")


def prepared(a: argparse.Namespace) -> Prepared:
    """:func:`prepare` of the log :func:`log_arguments` named."""
    return prepare(a.log, a.jobs, a.vm, a.machine_nodes, a.procs_per_node, a.shared_nodes)


def prepare(path: str, jobs: int, vm: str, machine_nodes: int = 0,
            procs_per_node: float = 0, shared_nodes: bool = False) -> Prepared:
    """The log at `path` (its first `jobs`, 0: all) as burstbench.replay.run.replay reads
    it, priced on `vm` with the replay's default job classes (10 GB in, 30 GB out)."""
    lg = logs.read_log(path)
    if jobs:
        lg.jobs = lg.jobs.iloc[:jobs].reset_index(drop=True)
    jb = run.read_jobs(lg, procs_per_node, machine_nodes, shared_nodes)
    classes = policy.job_classes(None, 10.0, 30.0)
    pr = pricing(classes)
    name, option = next((v, o) for v, o in pr.vms() if v == vm)
    costed = pr.costed(name, option, jb.nodes, jb.run / 3600, policy.assign(
        jb.nodes, lg.jobs["queue"].to_numpy(), classes), classes)
    return Prepared(lg, jb, name, costed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    log_arguments(ap)
    ap.add_argument("--chunk", type=int, default=1000, help="submits decided together")
    ap.add_argument("--rules", default=RULES, help=f"policy:level, comma list ({RULES}); "
                    "none:0 checks that the loop with nothing burst predicts as the replay")
    a = ap.parse_args()
    rules = [(r.split(":")[0], float(r.split(":")[1])) for r in a.rules.split(",")]
    if bad := [r for r, _ in rules if r not in ("probability", "gain", "watch", "none")]:
        ap.error(f"--rules: {', '.join(bad)}: a policy is probability, gain, watch or none")

    t0 = time.perf_counter()
    pp = prepared(a)
    jb, vm, costed = pp.jobs, pp.vm, pp.costed
    guess_h, capacity, cats = jb.guess_h, jb.capacity, jb.categories
    submit, wait, runs, req, user, queue, plan = (jb.submit, jb.wait, jb.run, jb.req,
                                                  jb.user, jb.queue_n, jb.plan)
    run_h, turn_h = runs / 3600, (wait + runs) / 3600
    stays = Stays(submit, queue, runs, plan, capacity, wait)
    n = len(submit)

    bases: dict[int, np.ndarray] = {}

    def base_before(hi: int) -> np.ndarray:
        """The re-simulation of the jobs submitted before job `hi`, all of them: a chunk's
        world is measured against it, so that only the burst jobs' leaving changes a
        wait (not the later jobs' absence)."""
        if hi not in bases:
            before = np.zeros(n, bool)
            before[:hi] = True
            bases[hi] = easy.simulate(submit, queue, runs, plan, capacity, THINNED_RULES,
                                      before) - submit
        return bases[hi]

    def decide(q: np.ndarray, ix: np.ndarray, rule: str, level: float,
               waits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The jobs `ix` burst, and when (s after the submit; watch: while they wait, their
        `waits` in their world saying which are still waiting at a moment)."""
        c = policy.Costed(costed.hours[ix], costed.jpy[ix], costed.takes[ix], costed.ratio[ix])
        if rule == "watch":
            at = policy.watched(q, c, run_h[ix], guess_h[ix], waits, [level])[0]
            return ~np.isnan(at), np.nan_to_num(at)
        p = policy.p_sooner(q, c, run_h[ix], guess_h[ix])
        if rule == "probability":
            return p >= level, np.zeros(len(ix))
        return (p > 0) & (policy.gain_rank(p, policy.expected_saving(
            q, c, run_h[ix], guess_h[ix])) >= level), np.zeros(len(ix))

    def later_in_its_world(burst: np.ndarray, when: np.ndarray) -> float:
        idx = np.flatnonzero(burst)
        groups = np.random.default_rng(1).permutation(len(idx)) % max(1, round(1 / GROUP))
        later = np.zeros(len(idx), bool)
        for g in np.unique(groups):
            mine = idx[groups == g]
            active = ~burst
            active[mine] = True
            later[groups == g] = costed.hours[mine, 0] > (stays.wait_among(active)[mine]
                                                          - when[mine] + runs[mine]) / 3600
        return float(np.mean(later)) if len(idx) else float("nan")

    def judge(burst: np.ndarray, when: np.ndarray) -> str:
        b = burst & costed.takes
        per = turn_h[b] - when[b] / 3600 - costed.hours[b, 0]
        own, gain = per.sum(), stays.gain_h(b)
        return (f"{int(b.sum()):6,d} | {np.mean(per < 0):.3f} | "
                f"{later_in_its_world(b, when):.3f} | "
                f"{own:,.0f} + {gain:,.0f} = {own + gain:,.0f} | "
                f"{costed.jpy[b, 0].sum() / 1e6:.1f}")

    opened = jb.predict()
    print(f"{a.log}: {n:,} jobs, {capacity:,} {'processors' if a.shared_nodes else 'nodes'}, "
          f"{vm}, chunks of {a.chunk:,} submits; prepared in {time.perf_counter() - t0:.0f} s\n")
    print("| policy | replay | jobs burst | later (log) | later in its world | hours: own + "
          "stays' = total | MJPY |\n|---|---|---:|---:|---:|---:|---:|")
    everyone = np.arange(n)
    for rule, level in rules:
        t1 = time.perf_counter()
        burst = np.zeros(n, bool)
        when = np.zeros(n)
        moved = 0.0
        for lo in range(0, n, a.chunk):
            hi = min(lo + a.chunk, n)
            active = ~burst
            active[hi:] = False
            ix = np.flatnonzero(active)
            world = wait if lo == 0 else stays.wait_among(active, base_before(hi))
            q = opened.q[ix] if lo == 0 else predict(
                submit[ix], queue[ix], world[ix], runs[ix], req[ix], user[ix], capacity,
                **{k: None if v is None else v[ix] for k, v in cats.items()}).q
            mine = ix >= lo
            if rule == "none":
                moved = max(moved, float(np.nanmax(np.abs(q[mine] - opened.q[ix[mine]]),
                                                   initial=0.0)))
                continue
            burst[ix[mine]], when[ix[mine]] = decide(q[mine], ix[mine], rule, level,
                                                     world[ix[mine]])
        if rule == "none":  # the loop with nothing burst is the log: its waits, the replay's
            print(f"| nothing burst | closed | predicted wait at most {moved:.3g} s from the "
                  "replay's (0: the loop's world is the log where nothing bursts) |")
            continue
        name = f"{rule} {level:g}"
        print(f"| {name} | open | {judge(*decide(opened.q, everyone, rule, level, wait))} |")
        print(f"| {name} | closed | {judge(burst, when)} |  ({time.perf_counter() - t1:.0f} s)",
              flush=True)


if __name__ == "__main__":
    main()
