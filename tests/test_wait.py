"""The queue wait predicted (burstbench/wait): EASY backfilling simulated and checked against
AccaSim (a hand-built 8-job log with its waits worked out by hand, and every job of the KTH
log), the predictor reading nothing a scheduler did not know yet (a log truncated, or its
future changed, leaves every earlier prediction as it was), and its calibration on logs whose
waits are drawn from a known distribution."""

from __future__ import annotations

import collections
import collections.abc
import heapq
import json
import math
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from burstbench.replay import logs
from burstbench.wait import calibrate, easy, history, predict, score

KTH = Path(__file__).resolve().parents[1] / ".." / "shared" / "workloads" / \
    "KTH-SP2-1996-2.1-cln.swf.gz"

#: The 8 jobs on a 4-node machine: (submit, nodes, run, requested time).
EIGHT = [(0, 2, 100, 100), (0, 1, 50, 200), (10, 4, 100, 100), (20, 1, 300, 300),
         (30, 1, 40, 60), (100, 1, 0, 10), (110, 2, 50, 60), (120, 2, 30, 1000)]
#: By hand, the textbook's rules.  J3 (4 nodes) blocks at 10 s: its shadow is 200 s (J0's
#: 2 nodes back at 100 s by request, J1's at 200 s), no extra node.  J4 (300 s) would end
#: past it: it waits; J5 (ends by 90 s) backfills at 30 s.  J1 ends at 50 s, J5 at 70 s, J0
#: at 100 s: J3 starts at 100 s (90 s), then J4, J6 (no run time) and J7 at 200 s, when J3
#: ends; J8 (2 nodes) after J7 ends, at 250 s.
EASY_WAITS = [0, 0, 90, 180, 0, 100, 90, 130]
#: By hand, AccaSim's: J3's reservation (200 s) is kept, and the backfill does not protect
#: it: J4 starts at once, J5 when J1 ends (50 s), J6 and J7 at their submits, J8 when J7
#: ends (160 s); J3 is retried only at an event past 200 s: J4's end, at 320 s.
ACCASIM_WAITS = [0, 0, 310, 0, 20, 0, 0, 40]


def eight_jobs():
    s, n, r, q = (np.array(c, dtype=float) for c in zip(*EIGHT))
    return s, n.astype(np.int64), r, q


def run_accasim(tmp_path: Path, submit, nodes, run, req, capacity: int) -> np.ndarray:
    """AccaSim 1.1.3's EASYBackfilling with FirstFit on `capacity` one-core nodes, on an SWF
    written here: each job's start, s.  AccaSim imports collections.Mapping, gone since
    Python 3.10: the aliases are set back first."""
    for name in ("Mapping", "MutableMapping", "Sequence", "Iterable", "Callable"):
        if not hasattr(collections, name):
            setattr(collections, name, getattr(collections.abc, name))
    sim_mod = pytest.importorskip("accasim.base.simulator_class",
                                  reason="AccaSim (the test extra) is not installed")
    from accasim.base.allocator_class import FirstFit
    from accasim.base.scheduler_class import EASYBackfilling

    swf = tmp_path / "log.swf"
    swf.write_text("".join(
        f"{i + 1} {int(s)} -1 {int(r)} {int(n)} -1 -1 {int(n)} {int(q)} -1 1 1 1 -1 1 -1 "
        "-1 -1\n" for i, (s, n, r, q) in enumerate(zip(submit, nodes, run, req))))
    config = tmp_path / "system.json"
    config.write_text(json.dumps({"groups": {"g": {"core": 1}}, "resources": {"g": capacity},
                                  "equivalence": {"processor": {"core": 1}},
                                  "start_time": 0}))
    out = tmp_path / "results"
    tz = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"  # AccaSim writes times in local time: make it UTC
    time.tzset()
    try:
        sim = sim_mod.Simulator(str(swf), str(config), EASYBackfilling(FirstFit()),
                                RESULTS_FOLDER_PATH=str(out), show_statistics=False,
                                statistics_output=False, LOG_LEVEL="WARNING")
        sim.start_simulation()
    finally:
        if tz is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = tz
        time.tzset()
    started = {}
    for line in (out / f"sched-{swf.name}").read_text().splitlines():
        parts = line.split("__")  # id;user;queued__nodes__start;end;...
        at = datetime.strptime(parts[2].split(";")[0], "%Y-%m-%d %H:%M:%S")
        started[int(parts[0].split(";")[0])] = at.replace(tzinfo=timezone.utc).timestamp()
    return np.array([started[i + 1] for i in range(len(submit))], dtype=float)


# -- EASY, simulated -----------------------------------------------------------------------

def test_eight_jobs_wait_as_worked_out_by_hand_and_as_accasim_says(tmp_path):
    s, n, r, q = eight_jobs()
    assert (easy.simulate(s, n, r, q, 4, "easy") - s).tolist() == EASY_WAITS
    assert (easy.simulate(s, n, r, q, 4, "accasim") - s).tolist() == ACCASIM_WAITS
    assert (run_accasim(tmp_path, s, n, r, q, 4) - s).tolist() == ACCASIM_WAITS


def test_a_job_left_out_is_not_simulated_and_frees_its_nodes():
    s, n, r, q = eight_jobs()
    active = np.ones(8, dtype=bool)
    active[3] = False  # J4 (300 s on 1 node) bursts: under AccaSim's rules J3 starts when
    w = easy.simulate(s, n, r, q, 4, "accasim", active) - s  # all 4 are free past 200 s
    assert np.isnan(w[3]) and w[2] < ACCASIM_WAITS[2]


def test_a_head_held_for_a_reservation_decades_away_is_not_stepped_to_it():
    """AccaSim's rules hold the head until its reservation (the running jobs' requested
    ends), stepping one second at a time where nothing else happens: with an 'unlimited'
    written as 2^31 - 1 s that was 2^31 passes; the loop now goes to the step that reaches
    it, with the same starts (one step past a fractional reservation, as stepping gave)."""
    s, n, r = np.array([0.0, 1.0]), np.array([50, 100]), np.array([100.0, 10.0])
    for req0, start1 in ((2.0**31 - 1, 2.0**31 - 1), (1000.5, 1001.0), (1.5, 100.0)):
        q = np.array([req0, 10.0])
        assert easy.simulate(s, n, r, q, 100, "accasim").tolist() == [0.0, start1]


def test_bad_input_to_the_simulation_is_refused():
    s, n, r, q = eight_jobs()
    with pytest.raises(ValueError, match="every job needs 1 to 3 nodes"):
        easy.simulate(s, n, r, q, 3)
    with pytest.raises(ValueError, match="rules must be one of easy, accasim"):
        easy.simulate(s, n, r, q, 4, "fcfs")
    with pytest.raises(ValueError, match="jobs must be in submit order"):
        easy.simulate(s[::-1], n, r, q, 4)
    with pytest.raises(ValueError, match="^priority must be one number a job$"):
        easy.simulate(s, n, r, q, 4, priority=np.ones(7))
    with pytest.raises(ValueError, match="^priority must be one number a job$"):
        easy.simulate(s, n, r, q, 4, priority=[np.nan] + [1] * 7)
    with pytest.raises(ValueError, match=r"^priority: the easy rules only \(AccaSim's"):
        easy.simulate(s, n, r, q, 4, "accasim", priority=np.ones(8))


def easy_by_priority(submit, nodes, run_s, req, prio, capacity: int,
                     active=None) -> np.ndarray:
    """The oracle of the priority order: EASY backfilling written plainly, a list of the
    waiting jobs sorted by (priority, submit) at each event; the head's shadow the time at
    which the running jobs' requested ends (each at least now) free its nodes, every job
    ending at that time counted in the extra nodes.  Quadratic; for a few thousand jobs."""
    n = len(submit)
    start = np.full(n, np.nan)
    order = [j for j in np.argsort(submit, kind="stable") if active is None or active[j]]
    waiting: list[tuple[float, float, int]] = []
    running: list[tuple[float, int]] = []  # (end, job)
    free, k = capacity, 0
    while k < len(order) or waiting or running:
        t = min(([submit[order[k]]] if k < len(order) else [])
                + ([running[0][0]] if running else []))
        while running and running[0][0] <= t:
            free += nodes[heapq.heappop(running)[1]]
        while k < len(order) and submit[order[k]] <= t:
            j = order[k]
            waiting.append((float(prio[j]), float(submit[j]), int(j)))
            k += 1
        waiting.sort()
        while waiting and nodes[waiting[0][2]] <= free:
            j = waiting.pop(0)[2]
            start[j], free = t, free - nodes[j]
            heapq.heappush(running, (t + run_s[j], j))
        if not waiting:
            continue
        head = waiting[0][2]
        ends = sorted((max(start[j] + req[j], t), nodes[j]) for _, j in running)
        avail, shadow = free, math.inf
        for end, nd in ends:
            if avail >= nodes[head] and end > shadow:
                break
            avail += nd
            if avail >= nodes[head]:
                shadow = min(shadow, end)
        extra = avail - nodes[head]
        rest = []
        for item in waiting[1:]:
            j = item[2]
            before = t + req[j] <= shadow
            if nodes[j] <= free and (before or nodes[j] <= extra):
                start[j], free = t, free - nodes[j]
                extra -= 0 if before else nodes[j]
                heapq.heappush(running, (t + run_s[j], j))
            else:
                rest.append(item)
        waiting = [waiting[0]] + rest
    return start


def test_a_job_of_higher_priority_goes_ahead_by_hand():
    """4 nodes.  J0 (4 nodes, 0-100 s); J1 (2 nodes, 50 s) at 10 s; J2 (4 nodes, 100 s) at
    20 s; J3 (1 node, 60 s) at 30 s.  In submit order J1 starts at 100 s, J2 at J1's end
    (150 s; J3 would end past that shadow, with no extra node) and J3 after J2 (250 s).  With
    J2 at priority 0 and the rest at 1, J2 starts when J0 ends (100 s), J1 and J3 at 200 s."""
    s, n = np.array([0.0, 10, 20, 30]), np.array([4, 2, 4, 1])
    r = np.array([100.0, 50, 100, 60])
    assert easy.simulate(s, n, r, r, 4).tolist() == [0, 100, 150, 250]
    assert easy.simulate(s, n, r, r, 4, priority=[1, 1, 0, 1]).tolist() == [0, 200, 100, 200]
    assert easy.simulate(s, n, r, r, 4, priority=[5, 5, 5, 5]).tolist() == [0, 100, 150, 250]


def test_a_queue_in_priority_order_starts_every_job_as_the_plain_loop():
    """Generated logs (1,500 jobs on 128 nodes at 90% load): 3 priorities; 8, with jobs
    running past their requested time (the shadow's ties: every overdue job ends 'now');
    priorities as floats; one priority (as without any); 3 with a fifth of the jobs
    inactive.  Every start as easy_by_priority's."""
    rng = np.random.default_rng(11)
    for levels, overdue, floats, some in ((3, False, False, False), (8, True, False, False),
                                          (3, True, True, False), (1, True, False, False),
                                          (3, False, False, True)):
        m = 1500
        nodes = np.minimum(np.exp(rng.uniform(0, np.log(64), m)).astype(np.int64), 128)
        run = np.minimum(rng.lognormal(np.log(1800), 1.3, m), 2 * 86400).round() + 1
        req = (run * rng.uniform(0.5 if overdue else 1, 4, m)).round() + 60
        prio = rng.uniform(0, levels, m) if floats else rng.integers(0, levels, m)
        submit = np.sort(rng.uniform(0, (nodes * run).sum() / (128 * 0.9), m)).round()
        active = rng.uniform(size=m) > 0.2 if some else None
        got = easy.simulate(submit, nodes, run, req, 128, active=active, priority=prio)
        want = easy_by_priority(submit, nodes, run, req, prio, 128, active)
        assert np.array_equal(got, want, equal_nan=True), (levels, overdue, floats, some)
        plain = easy.simulate(submit, nodes, run, req, 128, active=active)
        assert np.array_equal(got, plain, equal_nan=True) == (levels == 1)


@pytest.mark.slow
def test_every_kth_job_waits_as_in_accasim(tmp_path):
    """The whole KTH log (27,992 jobs, 100 nodes) through AccaSim (about 30 s) and through
    the replicated rules: the same wait for every job."""
    if not KTH.exists():
        pytest.skip(f"no KTH log at {KTH}")
    j = logs.read_log(KTH).jobs
    s, r, q = (j[c].to_numpy(float) for c in ("submit", "run", "req_time"))
    n = j["procs"].to_numpy().astype(np.int64)
    ours = easy.simulate(s, n, r, q, 100, "accasim")
    ref = run_accasim(tmp_path, s, n, r, q, 100)
    assert np.array_equal(ours, ref), np.flatnonzero(ours != ref)[:10]


def test_the_schedulers_estimate_of_the_eight_jobs():
    """At each submit, the known queue run forward with requested times: J3 at 10 s waits
    for J1's requested end (200 s); J4 at 20 s behind it for J3's (300 s); J5 at 30 s
    backfills (ends by 200 s); J6 at 100 s: J0 ended, J3 started (100 s), so J3's request
    (to 200 s) ahead of J4 (200 s) and J6 fits beside J4: 100 s."""
    s, n, r, q = eight_jobs()
    start = s + np.array(EASY_WAITS, float)
    est = easy.estimates(s, n, start, start + r, q, 4)
    assert est[:6].tolist() == [0, 0, 190, 280, 0, 100]


# -- the predictor reads only the past ------------------------------------------------------

def synthetic(n: int, seed: int, capacity: int = 64):
    """A log scheduled by the textbook rules: Poisson arrivals, sizes 1-32 nodes, run times
    log-normal (median 20 min), requests 1-4 times the run, 40 users."""
    rng = np.random.default_rng(seed)
    submit = np.floor(np.cumsum(rng.exponential(300, n)))
    submit[rng.uniform(size=n) < 0.2] -= 0  # some share a second with the one before
    for i in range(1, n):
        if rng.uniform() < 0.2:
            submit[i] = submit[i - 1]
    nodes = np.minimum(np.exp(rng.uniform(0, np.log(32), n)).astype(np.int64), capacity)
    run = np.minimum(rng.lognormal(np.log(1200), 1.2, n), 86400).round()
    req = (run * rng.uniform(1, 4, n)).round() + 60
    user = rng.integers(0, 40, n)
    start = easy.simulate(submit, nodes, run, req, capacity)
    return submit, nodes, start - submit, run, req, user


def _predict(log, k=None, **kw):
    s, n, w, r, q, u = (a if k is None else a[:k] for a in log)
    return predict.predict(s, n, w, r, q, u, 64, first_fit=300, retrain_every=400,
                           train_window=1000, window=200, recal_window=300, **kw)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b, equal_nan=True))


def test_a_truncated_log_leaves_every_earlier_prediction_as_it_was():
    log = synthetic(2500, seed=3)
    whole = _predict(log)
    assert whole.fits >= 3  # refitted before and after the cuts below
    for k in (700, 1311, 1312, 2000):
        part = _predict(log, k)
        for name in ("q", "estimate", "history", "learned"):
            assert _same(getattr(part, name), getattr(whole, name)[:k]), (k, name)


def test_a_changed_future_leaves_every_earlier_prediction_as_it_was():
    """Jobs after k given other waits, run and requested times, sizes and users: no
    prediction up to k moves; and one after it does (the change is seen once known)."""
    log = synthetic(2000, seed=5)
    k = 1200
    other = [a.copy() for a in log]
    rng = np.random.default_rng(9)
    s, n, w, r, q, u = other
    n[k:] = rng.integers(1, 64, len(n) - k)
    r[k:] *= 3
    q[k:] = r[k:] * 2
    w[k:] = rng.exponential(7200, len(w) - k).round()
    u[k:] = 41
    a, b = _predict(log), _predict(other)
    for name in ("q", "estimate", "history", "learned"):
        assert _same(getattr(a, name)[:k], getattr(b, name)[:k]), name
    assert not _same(a.q[k:], b.q[k:])


def test_progress_names_each_step_and_leaves_the_prediction_as_it_was():
    """A million jobs take minutes to predict: a line before each step (the estimate, the
    learned model's fits, the recalibration), and the same numbers as without the lines;
    a log without requested times names the history in the estimate's place."""
    log = synthetic(1500, seed=4)
    lines: list[str] = []
    said, quiet = _predict(log, progress=lines.append), _predict(log)
    assert lines == ["  the scheduler's estimate at each of 1,500 submits (EASY backfilling "
                     "with requested times, up to 24 h ahead)",
                     f"  LightGBM fitted {quiet.fits} times on the last 1,000 started jobs",
                     "  recalibrated on the last 300 jobs' outcomes"]
    assert quiet.fits >= 2
    for name in ("q", "estimate", "history", "learned"):
        assert _same(getattr(said, name), getattr(quiet, name)), name
    s, n, w, r, q, u = log
    lines.clear()
    _predict((s, n, w, r, np.full(len(s), np.nan), u), learn=False, progress=lines.append)
    assert lines == ["  the history of each size class at each of 1,500 submits",
                     "  recalibrated on the last 300 jobs' outcomes"]


def test_the_estimate_says_how_far_it_is_and_estimates_as_it_did():
    """25,000 jobs (two parts on two threads, polled every 10 ms): lines of how many
    submits are estimated, never fewer than the line before, and the same estimates."""
    s, n, w, r, q, _ = synthetic(25000, seed=5)
    lines: list[str] = []
    said = easy.estimates(s, n, s + w, s + w + r, q, 64, progress=lines.append, every_s=0.01)
    assert np.array_equal(said, easy.estimates(s, n, s + w, s + w + r, q, 64), equal_nan=True)
    counts = [int(m.group(1).replace(",", "")) for m in (
        re.fullmatch(r"    ([\d,]+) of 25,000 submits estimated", line) for line in lines)]
    assert lines and counts == sorted(counts) and 0 < counts[-1] <= 25000, lines[:5]
    with pytest.raises(ValueError, match=r"^every_s must be positive, not 0$"):
        easy.estimates(s, n, s + w, s + w + r, q, 64, progress=lines.append, every_s=0)


def _queued(n: int, seed: int):
    """synthetic()'s log with a queue a job (random, none tied to its user or size) whose
    priority sets its wait: queue 0 starts at once, 1 as scheduled, 2 waits hours more."""
    s, n_, w, r, q, u = synthetic(n, seed)
    rng = np.random.default_rng(seed + 100)
    queue = rng.integers(0, 3, n)
    w = np.where(queue == 0, 0.0, np.where(queue == 2, w + rng.exponential(4 * 3600, n), w))
    return (s, n_, w.round(), r, q, u), queue


def test_the_pinball_loss_weighs_each_side_of_a_quantile_by_its_level():
    """log(1 + wait) = 1 against quantiles at 0.5, 1 and 2 (levels 0.1, 0.5, 0.9): the 10%
    quantile under it by 0.5 costs 0.1 x 0.5, the median nothing, the 90% over it by 1
    costs 0.1 x 1; their mean 0.05.  A job with nothing predicted yet is left out."""
    q = np.expm1(np.array([[0.5, 1.0, 2.0], [np.nan] * 3]))
    assert score.pinball(q, np.expm1(np.array([1.0, 3.0])), levels=(0.1, 0.5, 0.9)) == \
        pytest.approx(0.05)
    assert math.isnan(score.pinball(q[1:], np.array([3.0]), levels=(0.1, 0.5, 0.9)))


def test_a_queues_priority_is_learned_where_nothing_else_tells_it():
    """Waits set by the queue alone: given the queues, the learned model tells queue 0
    (at once) from queue 2 (hours) and its quantiles lose less; without them it cannot.
    A single queue, or none known, changes no prediction by a bit."""
    log, queue = _queued(3000, seed=8)
    w = log[2]
    with_q, without = _predict(log, queue=queue), _predict(log)
    late = np.arange(len(w)) >= 1500
    assert "queued, queue)" in with_q.how and ", queue)" not in without.how
    med = with_q.quantile(0.5)
    assert np.median(med[late & (queue == 0)]) < 60
    assert np.median(med[late & (queue == 2)]) > 3600
    assert score.pinball(with_q.q[late], w[late]) < 0.8 * score.pinball(without.q[late], w[late])
    blind = without.quantile(0.5)
    assert np.median(blind[late & (queue == 0)]) > 600  # the same for every queue
    for same in (np.ones(3000, np.int64), np.full(3000, -1, np.int64)):
        one = _predict(log, queue=same, partition=same)
        assert ", queue" not in one.how and "partition" not in one.how
        for name in ("q", "history", "learned"):
            assert _same(getattr(one, name), getattr(without, name)), name


def test_partitions_that_are_machines_apart_are_read_by_their_own_queues(monkeypatch):
    """synthetic()'s jobs on two partitions of 32 nodes scheduled apart (users 0-21 on the
    first: means of 10 and 4 h of wait): with each job's partition's own queue (its jobs
    and work queued, its nodes busy) the quantiles lose under 0.8x what they lose with the
    partition's name alone, and under 0.8x without it."""
    s, nodes, _, r, q, u = synthetic(3000, seed=12)
    part = np.where(u < 22, 0, 1)
    nodes = np.minimum(nodes, 32)
    start = np.zeros(len(s))
    for k in (0, 1):
        at = part == k
        start[at] = easy.simulate(s[at], nodes[at], r[at], q[at], 32)
    log = (s, nodes, start - s, r, q, u)
    late = np.arange(len(s)) >= 1500
    w = log[2][late]
    own = _predict(log, partition=part)
    assert "its partition's work queued, its partition busy, partition)" in own.how
    blank = _predict(log)
    monkeypatch.setattr(predict, "_partition_state",
                        lambda part, submit, *a: np.full((len(submit), 3), np.nan))
    name_only = _predict(log, partition=part)
    assert score.pinball(own.q[late], w) < 0.8 * score.pinball(name_only.q[late], w)
    assert score.pinball(own.q[late], w) < 0.8 * score.pinball(blank.q[late], w)


def test_a_partitions_own_queue_is_read_from_the_second_partition_known():
    """Its queue's state is NaN for a job whose partition is unknown, and for every job
    before the log names a second partition; from there on, each job's partition's own."""
    submit = np.arange(7.0) * 10
    start = submit + np.array([0.0, 25, 0, 30, 0, 0, 0])
    run, nodes, req = np.full(7, 100.0), np.ones(7, np.int64), np.full(7, 200.0)
    part = np.array([1.0, np.nan, 1, 2, 1, 2, np.nan])
    x = predict._partition_state(part, submit, start, run, nodes, req, 4)
    assert np.isnan(x[:3]).all() and np.isnan(x[6]).all()  # before; unknown after
    # job 3 (partition 2, at 30 s): none of its partition before it
    assert x[3].tolist() == [0.0, 0.0, 0.0]
    # job 4 (partition 1, at 40 s): jobs 0 and 2 running (2 of 4 nodes), none queued
    assert x[4].tolist() == [0.0, 0.0, 0.5]
    # job 5 (partition 2, at 50 s): job 3 queued (submitted 30 s, starts 60 s), 200 s of
    # work over 4 nodes
    assert x[5].tolist() == pytest.approx([np.log1p(1), np.log1p(200 / 4), 0.0])


def test_a_queues_number_is_only_its_name():
    """Queues renumbered (0, 1, 2 as 7, 3, 5: another order) give the same predictions, bit
    for bit: categories, split by what their jobs waited, not by their numbers' order."""
    log, queue = _queued(2500, seed=10)
    a = _predict(log, queue=queue)
    b = _predict(log, queue=np.array([7, 3, 5])[queue])
    assert a.fits >= 3
    for name in ("q", "learned"):
        assert _same(getattr(a, name), getattr(b, name)), name


def test_a_truncated_log_with_queues_leaves_every_earlier_prediction_as_it_was():
    """Cut before and after queues and partitions that first appear late (queue 5 from job
    1,800 on, partition 3 from 2,000): no earlier prediction moves."""
    log, queue = _queued(2500, seed=9)
    queue[1800::7] = 5
    part_no = np.where(queue == 1, 7, -1)
    part_no[2000::5] = 3
    whole = _predict(log, queue=queue, partition=part_no)
    for k in (900, 1700, 1900, 2200):
        cut = [a[:k] for a in log]
        part = _predict(cut, queue=queue[:k], partition=part_no[:k])
        for name in ("q", "learned"):
            assert _same(getattr(part, name), getattr(whole, name)[:k]), (k, name)


def test_what_is_known_at_a_submit_counts_ties_by_place_in_the_log():
    start = np.array([0.0, 5.0, 5.0, 5.0, 9.0])
    submit = np.array([0.0, 0.0, 5.0, 5.0, 5.0])
    order, count = predict.known_before(start, submit)
    # job 2 at (5, 2): jobs 0 (started 0) and 1 (5, 1); job 3: also job 2 (5, 2)
    assert order.tolist() == [0, 1, 2, 3, 4] and count.tolist() == [0, 1, 2, 3, 4]


def test_an_estimate_past_every_one_in_the_history_is_not_scaled_by_their_ratios():
    """A history whose jobs all started at an estimate of about 0 but waited 0-3 h (the
    ratios (wait + 60 s) / 60 s up to 91), then a job the scheduler expects to start in a
    day: its wait is a day plus the history's excess (0-3 h), not a day times 91 (three
    months, what the ratios of every class gave).  The learned model, which never saw an
    estimate past 0, leaves that job to the history (trees do not extrapolate: it would
    read a day's estimate as the history's largest, about 0)."""
    n = 300
    submit = np.arange(n) * 3000.0
    wait = (np.arange(n) % 7) * 1800.0
    nodes = 1 + np.arange(n) % 4
    run = np.full(n, 3600.0)
    given = np.full(n, np.nan)
    given[-1] = 86400.0
    p = predict.predict(submit, nodes, wait, run, np.full(n, 4 * 3600.0), np.arange(n) % 5,
                        16, first_fit=100, estimate=given)
    assert p.estimate[:-1].max() < 1.0  # the history's estimates: about 0
    day = p.history[-1]
    assert day[0] == pytest.approx(86400.0) and day[-1] == pytest.approx(86400.0 + 3 * 3600)
    assert p.fits >= 1 and np.isnan(p.learned[-1]).all() and not np.isnan(p.learned[-2]).any()
    assert 86400.0 <= p.quantile(0.5)[-1] <= 86400.0 + 3 * 3600
    # a job of the history's own estimate is still read by its class's ratios
    assert p.history[100, 20] == pytest.approx(np.median(wait[:100]), abs=1800)


# -- calibration ----------------------------------------------------------------------------

def test_waits_from_a_known_distribution_are_covered_as_predicted():
    """Waits drawn, whatever the queue: 40% exactly 0 s, else log-normal (median 30 min,
    longer for larger jobs).  The predictor's quantiles cover their level within 0.03 at
    every level, and a distribution three times too long is caught as miscalibrated."""
    s, n, _, r, q, u = synthetic(6000, seed=11)
    rng = np.random.default_rng(2)
    w = np.where(rng.uniform(size=len(s)) < 0.4, 0.0,
                 rng.lognormal(np.log(1800) + 0.05 * n, 1.0)).round()
    p = predict.predict(s, n, w, r, q, u, 64, first_fit=500, window=500)
    cal = score.calibration(p.q[1000:], w[1000:], seed=1)
    assert (abs(cal["coverage"] - cal["quantile"]) < 0.03).all(), cal
    wrong = score.calibration(p.q[1000:] * 3, w[1000:], seed=1)
    assert wrong.set_index("quantile").loc[0.9, "coverage"] > 0.95


def test_the_recalibration_mends_a_distribution_too_long_or_too_short():
    """The true distribution, then three times too long, then a third: recalibrated on
    the outcomes of the jobs before, each covers 0.1, 0.5 and 0.9 within 0.02."""
    rng = np.random.default_rng(0)
    n = 20000
    submit = np.sort(rng.uniform(0, n * 60, n))
    w = np.where(rng.uniform(size=n) < 0.4, 0.0, rng.lognormal(np.log(600), 1.5, n))
    from scipy import stats

    lv = history.LEVELS
    for scale in (1.0, 3.0, 1 / 3):
        row = np.where(lv <= 0.4, 0.0, stats.lognorm.ppf(np.clip((lv - 0.4) / 0.6, 0, 0.999),
                                                         1.5, scale=600 * scale))
        q = calibrate.recalibrate(np.tile(row, (n, 1)), w, submit, seed=4)
        cal = score.calibration(q[2000:], w[2000:], seed=5, levels=(0.1, 0.5, 0.9))
        assert (abs(cal["coverage"] - cal["quantile"]) < 0.02).all(), (scale, cal)


def test_run_times_are_recalibrated_apart_where_guesses_run_long():
    """Run-time guesses of two kinds: about 10 min, right; about 12 h, but 40% of those
    jobs end in under 2 min (a crash).  Grouped by the guess's median (edges at 1 h), each
    kind covers its 10%, 50% and 90% within 0.03; pooled, the long kind's 10% guess misses
    by more than 0.1 (every job's guess runs from 0, as run.run_guess makes it: the crashes
    are below every guess but that)."""
    from scipy import stats

    rng = np.random.default_rng(1)
    n = 20000
    submit = np.sort(rng.uniform(0, n * 600, n))
    long_ = rng.uniform(size=n) < 0.5
    median = np.where(long_, 12 * 3600.0, 600.0)
    lv = np.clip(history.LEVELS, 1e-3, 1 - 1e-3)
    q = median[:, None] * stats.lognorm.ppf(lv, 0.5)[None, :]
    q[:, 0] = 0.0
    run = median * rng.lognormal(0.0, 0.5, n)
    crash = long_ & (rng.uniform(size=n) < 0.4)
    run[crash] = rng.uniform(10, 120, int(crash.sum()))
    start, end = submit, submit + run

    def cover(edges):
        out = calibrate.recalibrate_censored(q, run, start, end, submit, edges=edges)
        return [score.calibration(out[m][2000:], run[m][2000:], seed=3,
                                  levels=(0.1, 0.5, 0.9))["coverage"].to_numpy()
                for m in (long_, ~long_)]

    for got in cover((3600.0,)):
        assert np.abs(got - [0.1, 0.5, 0.9]).max() < 0.03, got
    assert cover(())[0][0] > 0.2


def test_the_wait_still_ahead_of_a_job_that_has_waited_by_hand():
    """A wait uniform on 0-40 h: after 10 h, what is left is uniform on 0-30 h; after 38 h
    the model keeps 5% past it, under MODEL_TAIL's tenth, so the rest follows the wait so
    far (P(R > r x 38 h) = 1 / (1 + r): the median 38 h, the 90% 9 x 38 h), as does a row
    predicted NaN (NaN still where nothing was waited either); with a 4% tail asked, the 5%
    is read: uniform on 0-2 h.  Just submitted (0 s waited), a job's wait is its
    prediction, its pile at 0 kept; a second later the pile is passed, what is left its
    positive waits less the second; a pile of 95% at 0 passed, the wait so far again."""
    h, lv = 3600.0, history.LEVELS
    uniform = 40 * h * lv
    pile = np.where(lv <= 0.5, 0.0, 40 * h * (lv - 0.5) / 0.5)
    debug = np.where(lv <= 0.95, 0.0, 2 * h)
    q = np.vstack([uniform, uniform, np.full(41, np.nan), pile, pile, debug])
    e = np.array([10 * h, 38 * h, 5 * h, 0.0, 1.0, 60.0])
    got = history.remaining(q, e)
    assert got[0] == pytest.approx(30 * h * lv)
    lindy = lv[:-1] / (1 - lv[:-1])
    for row, waited in ((1, 38 * h), (2, 5 * h), (5, 60.0)):
        assert got[row, :-1] == pytest.approx(waited * lindy)
        assert got[row, -1] == pytest.approx(2 * waited * 39)
    assert got[1, [20, 36]] == pytest.approx([38 * h, 9 * 38 * h])
    assert got[3] == pytest.approx(pile)
    assert got[4] == pytest.approx((40 * h - 1.0) * lv)  # W - 1 s given W >= 1 s
    assert history.remaining(uniform[None], np.array([38 * h]), tail=0.04)[0] == \
        pytest.approx(2 * h * lv)
    assert np.isnan(history.remaining(q[2:3], np.zeros(1))).all()  # nothing known


def test_the_calibration_counts_a_pile_at_zero_as_ties():
    """Every wait 0 and every prediction an atom of 60% at 0 then 10 min: the PITs of the
    zeros are uniform below 0.6, so 0.5 covers 5/6 of them, 0.9 all."""
    q = np.tile(np.where(history.LEVELS <= 0.6, 0.0, 600.0), (3000, 1))
    cal = score.calibration(q, np.zeros(3000), seed=0, levels=(0.3, 0.5, 0.9))
    assert cal["coverage"].round(1).tolist() == [0.5, 0.8, 1.0]
    # P(wait > t) of the same distribution: 0.4 past the pile, linear between the quantiles
    # 0 (level 0.6) and 600 s (level 0.625), none from 10 min on
    assert history.survival(q[:1], np.array([[0.0, 300.0, 600.0, 900.0]]))[0] == \
        pytest.approx([0.4, 0.3875, 0.0, 0.0])
