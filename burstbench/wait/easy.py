"""EASY backfilling, simulated: a whole log re-run (:func:`simulate`: the jobs' starts, given
their submits, sizes, run and requested times) and the scheduler's own estimate at each submit
(:func:`estimates`: the queue that was known then, run forward with requested times, as
Slurm's ``squeue --start`` does).

Two rule sets, one event loop (numba):

- ``easy``, the textbook (Mu'alem and Feitelson, IEEE TPDS 12(6), 2001), as the KTH SP2 ran:
  at each event, start the queue's head while it fits; for the first that does not, the
  shadow time (when enough running jobs will have ended, by their requested times) and the
  extra nodes (free then beyond its need); then every later job that fits now and ends by the
  shadow time, or needs no more than the extra nodes, starts.  A job past its requested
  time is taken to end now.
- ``accasim``, AccaSim 1.1.3's ``EASYBackfilling`` with ``FirstFit`` on one-processor
  nodes, rule for rule: the head's reservation is computed once, when it blocks, and kept;
  the head is retried only at an event at or after it; and the backfill does not protect
  it (AccaSim passes no reserved nodes to the allocator), so any job that fits starts.
  It is here to show that the event loop gives the reference's waits (tests/test_wait.py:
  every job of the KTH log); ``easy`` is what the replay uses.

Machines are counted in nodes (or processors, where jobs share nodes), every node alike.
Times are seconds, floats; a job's nodes must not exceed the machine's.

Long: two simulations and the data structures that make them fast enough for 300,000 jobs
(the queue as two min-trees over the jobs, so that a pass finds the jobs that may backfill
without reading the others; the running jobs as heaps, walked in order of end for a shadow).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
from numba import njit

from burstbench.wait.history import later

RULES = ("easy", "accasim")
_EASY, _ACCASIM = 0, 1
_BIG = np.iinfo(np.int64).max


# -- heaps of (time, job) -------------------------------------------------------------------

@njit(cache=True)
def _sift_up(key, job, pos, i):
    while i > 0:
        p = (i - 1) // 2
        if key[p] <= key[i]:
            break
        key[p], key[i] = key[i], key[p]
        job[p], job[i] = job[i], job[p]
        if pos.size:
            pos[job[p]] = p
            pos[job[i]] = i
        i = p


@njit(cache=True)
def _sift_down(key, job, pos, i, n):
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and key[c + 1] < key[c]:
            c += 1
        if key[i] <= key[c]:
            break
        key[c], key[i] = key[i], key[c]
        job[c], job[i] = job[i], job[c]
        if pos.size:
            pos[job[c]] = c
            pos[job[i]] = i
        i = c


@njit(cache=True)
def _push(key, job, pos, n, k, j):
    """Push (k, j) on the min-heap of n entries (`pos`, where not empty, keeps each job's
    place); returns n + 1."""
    key[n] = k
    job[n] = j
    if pos.size:
        pos[j] = n
    _sift_up(key, job, pos, n)
    return n + 1


@njit(cache=True)
def _drop(key, job, pos, n, i):
    """Remove the entry at place i of the heap of n entries; returns n - 1."""
    n -= 1
    if pos.size:
        pos[job[i]] = -1
    if i == n:
        return n
    key[i] = key[n]
    job[i] = job[n]
    if pos.size:
        pos[job[i]] = i
    _sift_down(key, job, pos, i, n)
    _sift_up(key, job, pos, i)
    return n


@njit(cache=True)
def _walk(t, need, avail, key, job, n, nodes, sorted_key, sorted_job, lo, hi, aux, clamp):
    """The time at which `need` nodes are free, from `avail` free at t: the ends of a heap
    (key/job, n entries) and of a sorted run (sorted_key/sorted_job[lo:hi]) taken in order
    of time (each at least t where `clamp`), every job ending at that time counted.  Returns
    (that time, the nodes free then beyond `need`); (inf, ...) where they never are."""
    shadow = t
    if avail >= need:
        return shadow, avail - need
    m = 0
    if n > 0:
        aux[0] = 0
        m = 1
    p = lo
    while m > 0 or p < hi:
        use_heap = m > 0 and (p >= hi or key[aux[0]] < sorted_key[p])
        k = key[aux[0]] if use_heap else sorted_key[p]
        if clamp and k < t:
            k = t
        if avail >= need and k > shadow:
            break
        if use_heap:
            i = aux[0]
            avail += nodes[job[i]]
            m -= 1
            aux[0] = aux[m]
            q = 0
            while True:  # the frontier is a heap of heap places by key
                c = 2 * q + 1
                if c >= m:
                    break
                if c + 1 < m and key[aux[c + 1]] < key[aux[c]]:
                    c += 1
                if key[aux[q]] <= key[aux[c]]:
                    break
                aux[q], aux[c] = aux[c], aux[q]
                q = c
            for c in (2 * i + 1, 2 * i + 2):
                if c < n:
                    aux[m] = c
                    q = m
                    m += 1
                    while q > 0:
                        r = (q - 1) // 2
                        if key[aux[r]] <= key[aux[q]]:
                            break
                        aux[r], aux[q] = aux[q], aux[r]
                        q = r
        else:
            avail += nodes[sorted_job[p]]
            p += 1
        shadow = max(shadow, k)
    if avail < need:
        return np.inf, avail - need
    return shadow, avail - need


# -- the queue: two min-trees (nodes, requested time) over job places -----------------------

@njit(cache=True)
def _set_leaf(t_nodes, t_req, size, pos, nd, rq):
    """Set leaf `pos` (a job's place) of the two min-trees and its ancestors."""
    i = size + pos
    t_nodes[i] = nd
    t_req[i] = rq
    i //= 2
    while i >= 1:
        a = t_nodes[2 * i]
        b = t_nodes[2 * i + 1]
        t_nodes[i] = a if a < b else b
        ra = t_req[2 * i]
        rb = t_req[2 * i + 1]
        t_req[i] = ra if ra < rb else rb
        i //= 2


@njit(cache=True)
def _first_fit(t_nodes, t_req, size, lo, free, extra, room, stack):
    """The first place at `lo` or after whose job may start: at most `free` nodes, and at
    most `extra` or a requested time within `room`; -1 where none.  A subtree is skipped
    where no job of it can (its least nodes over `free`, or over `extra` with its least
    requested time over `room`).  `stack` holds (tree node, its first leaf, its width)."""
    m = 3
    stack[0] = 1
    stack[1] = 0
    stack[2] = size
    while m > 0:
        m -= 3
        i, first, width = stack[m], stack[m + 1], stack[m + 2]
        if first + width <= lo or t_nodes[i] > free or (t_nodes[i] > extra
                                                       and t_req[i] > room):
            continue
        if i >= size:
            return first
        half = width // 2
        stack[m] = 2 * i + 1  # the right child after the left
        stack[m + 1] = first + half
        stack[m + 2] = half
        stack[m + 3] = 2 * i
        stack[m + 4] = first
        stack[m + 5] = half
        m += 6
    return -1


@njit(cache=True)
def _next_queued(t_nodes, t_req, size, head, stack):
    """The first queued place at `head` or after (one is): the next leaf where it is
    queued, else a descent of the tree.  In submit order the queue's head moves forward a
    place or two at a time; with priorities it moves back where a job of higher priority
    arrives, and a leaf-by-leaf walk forward again took 7 s on 200,000 jobs."""
    if t_nodes[size + head] != _BIG:
        return head
    if head + 1 < size and t_nodes[size + head + 1] != _BIG:
        return head + 1
    return _first_fit(t_nodes, t_req, size, head, _BIG - 1, _BIG - 1, np.inf, stack)


@njit(cache=True)
def _tree_size(n):
    size = 1
    while size < n:
        size *= 2
    return size


# -- a whole log ----------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _simulate(submit, nodes, run, req, active, capacity, rules, place, job_at):
    """The event loop of :func:`simulate` (see there); returns the starts (NaN: inactive).
    Job j sits at leaf `place[j]` of the queue's trees, in queue order; `job_at` is its
    inverse."""
    n = len(submit)
    start = np.full(n, np.nan)
    size = _tree_size(max(n, 1))
    t_nodes = np.full(2 * size, _BIG, np.int64)  # the queue: jobs submitted, not started
    t_req = np.full(2 * size, np.inf)
    stack = np.empty(6 * 64 + 6, np.int64)
    e_key = np.empty(n)  # running jobs by real end
    e_job = np.empty(n, np.int64)
    n_e = 0
    x_key = np.empty(n)  # running jobs by expected end (start + requested), removable
    x_job = np.empty(n, np.int64)
    x_pos = np.full(n, -1, np.int64)
    n_x = 0
    no_pos = np.empty(0, np.int64)
    aux = np.empty(n + 2, np.int64)
    empty_key = np.empty(0)
    empty_job = np.empty(0, np.int64)
    free = capacity
    nxt = 0  # the next job to submit
    head = 0  # the queue's first place: no queued job before it
    n_q = 0
    blocked = -1  # accasim: the head that holds a reservation, and its time
    res_time = np.nan
    t = -np.inf
    while nxt < n or n_q > 0:
        last = t
        t = np.inf
        if nxt < n:
            t = submit[nxt]
        if n_e > 0 and e_key[0] < t:
            t = e_key[0]
        if t == np.inf:  # accasim: a head waiting for its reservation, nothing left to
            # happen: AccaSim steps one second at a time.  Until the step that reaches the
            # reservation each step is the last pass again (no job fitted then, none
            # fits now), so the loop goes straight to that step: a requested time of
            # decades (an 'unlimited' written as 2^31 - 1 s) took minutes a job, one pass
            # a second
            k = 1.0
            if blocked >= 0 and res_time - last > 1.0 and res_time < np.inf:
                k = np.ceil(res_time - last)
            t = last + k
        # at a time point: the ends, this time's submits, one pass
        while n_e > 0 and e_key[0] <= t:
            j = e_job[0]
            n_e = _drop(e_key, e_job, no_pos, n_e, 0)
            n_x = _drop(x_key, x_job, x_pos, n_x, x_pos[j])
            free += nodes[j]
        while nxt < n and submit[nxt] <= t:
            if active[nxt]:
                _set_leaf(t_nodes, t_req, size, place[nxt], nodes[nxt], req[nxt])
                head = min(head, place[nxt])  # a job of higher priority goes ahead
                n_q += 1
            nxt += 1
        if n_q == 0:
            continue
        head = _next_queued(t_nodes, t_req, size, head, stack)
        reached = False
        if rules == _ACCASIM:
            reached = blocked >= 0 and res_time <= t and res_time != 0.0
            if reached and nodes[job_at[head]] <= free:
                blocked = -1
                res_time = np.nan
        if rules == _EASY or blocked < 0:
            # the head while it fits (accasim: a FIFO pass, once unblocked)
            while n_q > 0 and nodes[job_at[head]] <= free:
                j = job_at[head]
                free -= nodes[j]
                start[j] = t
                n_e = _push(e_key, e_job, no_pos, n_e, t + run[j], j)
                n_x = _push(x_key, x_job, x_pos, n_x, t + req[j], j)
                _set_leaf(t_nodes, t_req, size, place[j], _BIG, np.inf)
                n_q -= 1
                if n_q > 0:
                    head = _next_queued(t_nodes, t_req, size, head, stack)
            if rules == _ACCASIM and n_q > 0:  # its reservation, once: the running and
                blocked = head  # just started jobs' expected ends, in order
                res_time, _ = _walk(t, nodes[job_at[head]], free, x_key, x_job, n_x, nodes,
                                    empty_key, empty_job, 0, 0, aux, False)
        if n_q > 0 and free > 0:
            if rules == _EASY:
                shadow, extra = _walk(t, nodes[job_at[head]], free, x_key, x_job, n_x, nodes,
                                      empty_key, empty_job, 0, 0, aux, True)
            else:  # no reservation protected (AccaSim's)
                shadow, extra = np.inf, free
            while free > 0:
                leaf = _first_fit(t_nodes, t_req, size, head + 1, free, extra, shadow - t,
                                  stack)
                if leaf < 0:
                    break
                j = job_at[leaf]
                free -= nodes[j]
                if t + req[j] > shadow:
                    extra -= nodes[j]
                start[j] = t
                n_e = _push(e_key, e_job, no_pos, n_e, t + run[j], j)
                n_x = _push(x_key, x_job, x_pos, n_x, t + req[j], j)
                _set_leaf(t_nodes, t_req, size, place[j], _BIG, np.inf)
                n_q -= 1
        # jobs of no run time end with the pass (AccaSim frees them after it, before the
        # next time point)
        while n_e > 0 and e_key[0] <= t:
            j = e_job[0]
            n_e = _drop(e_key, e_job, no_pos, n_e, 0)
            n_x = _drop(x_key, x_job, x_pos, n_x, x_pos[j])
            free += nodes[j]
    return start


def _arrays(submit, nodes, *times):
    out = [np.ascontiguousarray(submit, dtype=np.float64),
           np.ascontiguousarray(nodes, dtype=np.int64)]
    out += [np.ascontiguousarray(t, dtype=np.float64) for t in times]
    if any(len(a) != len(out[0]) for a in out):
        raise ValueError("every array must have one entry per job")
    if len(out[0]) and np.any(np.diff(out[0]) < 0):
        raise ValueError("jobs must be in submit order")
    return out


def simulate(submit, nodes, run, req, capacity: int, rules: str = "easy",
             active=None, priority=None) -> np.ndarray:
    """Each job's start under the rules (module docstring): jobs in the order given (by
    submit, then as listed), `nodes` each, running `run` s, the scheduler planning with `req`
    s; only the `active` ones (default all; the others: NaN).  `priority` (one number a job,
    lower first; default none) orders the queue by (priority, submit): a job submitted later
    at a lower number goes ahead of those waiting, as the head and in the backfill's order
    (the easy rules only).  ValueError where a job needs more than `capacity` nodes or the
    arrays differ in length."""
    if rules not in RULES:
        raise ValueError(f"rules must be one of {', '.join(RULES)}, not {rules!r}")
    submit, nodes, run, req = _arrays(submit, nodes, run, req)
    act = np.ones(len(submit), dtype=np.bool_) if active is None else \
        np.ascontiguousarray(active, dtype=np.bool_)
    if len(act) != len(submit):
        raise ValueError("every array must have one entry per job")
    if np.any(nodes[act] > capacity) or np.any(nodes[act] < 1):
        raise ValueError(f"every job needs 1 to {capacity} nodes (the machine's)")
    n = len(submit)
    if priority is None:
        job_at = np.arange(n, dtype=np.int64)
    else:
        prio = np.asarray(priority, dtype=np.float64)
        if prio.shape != (n,) or np.isnan(prio).any():
            raise ValueError("priority must be one number a job")
        if rules != "easy":
            raise ValueError("priority: the easy rules only (AccaSim's queue is in submit "
                             "order)")
        job_at = np.lexsort((np.arange(n), prio)).astype(np.int64)
    place = np.empty(n, np.int64)
    place[job_at] = np.arange(n)
    return _simulate(submit, nodes, run, req, act, int(capacity), RULES.index(rules), place,
                     job_at)


# -- the scheduler's estimate at each submit ------------------------------------------------

@njit(cache=True)
def _forward(s, me, nodes, req, t_nodes, t_req, size, head, r_key, r_job, n_r, free,
             horizon, h_key, h_job, aux, stack, undo):
    """Job `me`'s start when the known queue (the trees, from place `head`, `me` in it)
    is scheduled by the easy rules from s, every job running its requested time: the known
    running jobs ending at r_key[:n_r] (sorted; at least s), those started here on the heap
    h_key/h_job.  s + horizon where it is later (the simulation stops there).  The trees are
    left as they were (`undo` lists the places cleared)."""
    no_pos = np.empty(0, np.int64)
    n_h = 0
    p = 0  # known running jobs before p have ended
    n_undo = 0
    t = s
    shadow = np.nan
    extra = 0
    out = np.nan
    while True:
        while t_nodes[size + head] == _BIG:
            head += 1
        while nodes[head] <= free:
            j = head
            if j == me:
                out = t
                break
            free -= nodes[j]
            n_h = _push(h_key, h_job, no_pos, n_h, t + req[j], j)
            _set_leaf(t_nodes, t_req, size, j, _BIG, np.inf)
            undo[n_undo] = j
            n_undo += 1
            while t_nodes[size + head] == _BIG:
                head += 1
            shadow = np.nan  # a new head: its shadow when it blocks
        if out == out:
            break
        if free > 0:
            if shadow != shadow:  # fixed while this head waits: every job ends on time
                shadow, extra = _walk(t, nodes[head], free, h_key, h_job, n_h, nodes,
                                      r_key, r_job, p, n_r, aux, True)
            while free > 0:
                j = _first_fit(t_nodes, t_req, size, head + 1, free, extra, shadow - t,
                               stack)
                if j < 0:
                    break
                if j == me:
                    out = t
                    break
                free -= nodes[j]
                if t + req[j] > shadow:
                    extra -= nodes[j]
                n_h = _push(h_key, h_job, no_pos, n_h, t + req[j], j)
                _set_leaf(t_nodes, t_req, size, j, _BIG, np.inf)
                undo[n_undo] = j
                n_undo += 1
        if out == out:
            break
        # the next end, and every job ending then
        if n_h == 0 and p >= n_r:
            break
        t = np.inf
        if n_h > 0:
            t = h_key[0]
        if p < n_r and max(r_key[p], s) < t:
            t = max(r_key[p], s)
        if t - s > horizon:
            out = s + horizon
            break
        while n_h > 0 and h_key[0] <= t:
            free += nodes[h_job[0]]
            n_h = _drop(h_key, h_job, no_pos, n_h, 0)
        while p < n_r and max(r_key[p], s) <= t:
            free += nodes[r_job[p]]
            p += 1
    for k in range(n_undo):
        j = undo[k]
        _set_leaf(t_nodes, t_req, size, j, nodes[j], req[j])
    return out


@njit(cache=True)
def _sorted_insert(keys, vals, n, key, val):
    k = np.searchsorted(keys[:n], key, side="right")
    for m in range(n, k, -1):
        keys[m] = keys[m - 1]
        vals[m] = vals[m - 1]
    keys[k] = key
    vals[k] = val
    return n + 1


@njit(cache=True)
def _sorted_remove(keys, vals, n, key, val):
    k = np.searchsorted(keys[:n], key, side="left")
    while vals[k] != val:
        k += 1
    for m in range(k, n - 1):
        keys[m] = keys[m + 1]
        vals[m] = vals[m + 1]
    return n - 1


@njit(cache=True, nogil=True)
def _estimates(submit, nodes, start, end, req, capacity, horizon, lo, hi, done):
    """The body of :func:`estimates`, for jobs lo .. hi - 1 (the state before lo rebuilt
    without simulating); `done[0]`: how many of them are estimated, every 1,024 (read by
    another thread for progress)."""
    n = len(submit)
    out = np.full(hi - lo, np.nan)
    by_start = np.argsort(start, kind="mergesort")  # ties: by job order (stable)
    by_end = np.argsort(end, kind="mergesort")
    p_start = 0
    p_end = 0
    size = _tree_size(max(n, 1))
    t_nodes = np.full(2 * size, _BIG, np.int64)  # the known queue
    t_req = np.full(2 * size, np.inf)
    head = 0
    r_key = np.empty(n)  # the known running jobs by expected end (start + requested)
    r_job = np.empty(n, np.int64)
    n_r = 0
    free = capacity
    h_key = np.empty(n)
    h_job = np.empty(n, np.int64)
    aux = np.empty(n + 2, np.int64)
    stack = np.empty(6 * 64 + 6, np.int64)
    undo = np.empty(n, np.int64)
    for i in range(hi):
        s = submit[i]
        # what had happened by s: starts and ends of earlier jobs, (time, job) before (s, i)
        while p_start < n:
            j = by_start[p_start]
            if later(start[j], j, s, i):
                break
            free -= nodes[j]
            _set_leaf(t_nodes, t_req, size, j, _BIG, np.inf)
            n_r = _sorted_insert(r_key, r_job, n_r, start[j] + req[j], j)
            p_start += 1
        while p_end < n:
            j = by_end[p_end]
            if later(end[j], j, s, i):
                break
            free += nodes[j]
            n_r = _sorted_remove(r_key, r_job, n_r, start[j] + req[j], j)
            p_end += 1
        _set_leaf(t_nodes, t_req, size, i, nodes[i], req[i])  # known from now on
        while t_nodes[size + head] == _BIG:
            head += 1
        if i >= lo:
            out[i - lo] = _forward(s, i, nodes, req, t_nodes, t_req, size, head, r_key, r_job,
                                   n_r, free, horizon, h_key, h_job, aux, stack, undo) - s
            if (i - lo) % 1024 == 0:
                done[0] = i - lo
    done[0] = hi - lo
    return out


def estimates(submit, nodes, start, end, req, capacity: int,
              horizon_s: float = 30 * 86400.0, progress=None,
              every_s: float = 10.0) -> np.ndarray:
    """The scheduler's own estimate of each job's wait at its submit, s: the jobs known then
    (submitted before it and not started by s, in order, then it) scheduled forward by the
    ``easy`` rules with every job running its requested time, from the jobs running at s
    (each ending at its start + requested time, or now where that is past).  Only what had
    happened by (s, the job's place in the log) is read: a later job's fields never.
    Seconds; `horizon_s` where the estimate passes it (the simulation stops there).
    `progress`, where given, is called every `every_s` s with a line of how many are done."""
    submit, nodes, start, end, req = _arrays(submit, nodes, start, end, req)
    if np.any(nodes > capacity) or np.any(nodes < 1):
        raise ValueError(f"every job needs 1 to {capacity} nodes (the machine's)")
    if not every_s > 0:
        raise ValueError(f"every_s must be positive, not {every_s!r}")
    n = len(submit)
    parts = min(os.cpu_count() or 1, 4) if n >= 20000 else 1
    cuts = np.linspace(0, n, parts + 1).astype(int)

    done = np.zeros(parts, np.int64)

    def part(k: int) -> np.ndarray:
        return _estimates(submit, nodes, start, end, req, int(capacity), float(horizon_s),
                          int(cuts[k]), int(cuts[k + 1]), done[k:k + 1])
    if parts == 1 and progress is None:
        return part(0)
    # the parts are independent (each rebuilds the known state up to its first job) and
    # release the GIL: one thread a core, the caller's polling their counts
    with ThreadPoolExecutor(parts) as pool:
        running = [pool.submit(part, k) for k in range(parts)]
        while progress is not None and wait(running, timeout=every_s).not_done:
            progress(f"    {int(done.sum()):,} of {n:,} submits estimated")
        return np.concatenate([f.result() for f in running])
