"""A predicted wait distribution recalibrated on what recent jobs did, in two parts, since
waits pile up at exactly 0 s (a job that starts at its submit) and no one reshaping of
levels corrects both the pile and the rest:

- the pile: P(wait = 0) is the share of zero waits among the last `window` jobs whose
  predicted P(wait < 30 s) fell in the same tenth (a job's zero or not is known once it has
  started, or once time has passed its submit);
- the rest: the predicted distribution of a positive wait, read at the levels at which the
  last `window` positive waits of jobs of a like prediction (its median, bucketed) fell (the
  Kaplan-Meier quantiles of their probability integral transforms, jobs still waiting
  counted as censored at their wait so far).

Only what had happened by (submit_k, k) is read for job k (numba, one pass).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from burstbench.wait.history import LEVELS, cdf, later

#: Jobs are grouped by their predicted P(wait < ZERO_S) to recalibrate P(wait = 0).
ZERO_S = 30.0
ZERO_BINS = 10
#: Jobs may be grouped by their predicted positive wait's median (s) to recalibrate the
#: rest, each group on its own jobs' outcomes.  None by default: grouped at 10 min, 1 h, 4 h
#: and 12 h, the coverage at 50% came closer (0.521 against 0.535 on RICC's first 300,000
#: jobs) but the bursts fewer (P(sooner) >= 0.9 on HC44rs: 24% of the perfect policy's hours
#: against 31%).
POSITIVE_EDGES = np.array([], dtype=np.float64)


@njit(cache=True)
def _positive_cdf(q, levels, x):
    """F(x | wait > 0) of the distribution q (quantiles at levels) and its atom at 0."""
    f0, _ = cdf(q, levels, 0.0)
    if f0 >= 1.0 - 1e-9:
        return 1.0, 1.0, f0
    at, below = cdf(q, levels, x)
    return (at - f0) / (1.0 - f0), (below - f0) / (1.0 - f0), f0


@njit(cache=True)
def _km(vals, event, m, levels):
    """Kaplan-Meier quantiles at `levels` of m values (event False: censored, the value a
    lower bound); where it never reaches a level: that level, or the last value seen."""
    n_lv = len(levels)
    g = levels.copy()
    order = np.argsort(vals[:m], kind="mergesort")
    surv = 1.0
    at_risk = m
    li = 1
    last = 0.0
    g[0] = 0.0
    for r in range(m):
        idx = order[r]
        if event[idx]:
            surv *= 1.0 - 1.0 / at_risk
            last = vals[idx]
            while li < n_lv - 1 and 1.0 - surv >= levels[li]:
                g[li] = vals[idx]
                li += 1
        at_risk -= 1
    for r in range(li, n_lv - 1):
        g[r] = max(levels[r], last)
    g[n_lv - 1] = 1.0
    for r in range(1, n_lv):
        g[r] = max(g[r], g[r - 1])
    return g


@njit(cache=True)
def _interp(levels, values, x):
    """values (at levels, increasing) read at x in [0, 1], linearly."""
    j = np.searchsorted(levels, x, side="right") - 1
    if j >= len(levels) - 1:
        return values[len(levels) - 1]
    if j < 0:
        return values[0]
    f = (x - levels[j]) / (levels[j + 1] - levels[j])
    return values[j] + f * (values[j + 1] - values[j])


@njit(cache=True)
def _ring_push(ring_job, ring_len, ring_head, zeros, b, j, wait, window):
    """Job j's zero-or-not into bin b's ring of the last `window` (the oldest out)."""
    if ring_len[b] == window:
        zeros[b] -= 1 if wait[ring_job[b, ring_head[b]]] == 0 else 0
    else:
        ring_len[b] += 1
    ring_job[b, ring_head[b]] = j
    ring_head[b] = (ring_head[b] + 1) % window
    zeros[b] += 1 if wait[j] == 0 else 0


@njit(cache=True)
def _pit_levels(q, levels, value, since, known, v, s, k, candidates, window, min_count,
                vals, event, positive):
    """The Kaplan-Meier levels at which the values of `candidates` (job indices, newest
    first) known at (s, k) fell, the last `window` of them; (levels, enough).  A value
    runs from `since` and is known at `known`; one still running counts as censored at
    what it has had so far.  `positive`: only positive values (a wait), each read under
    its distribution's positive part, from jobs submitted before s."""
    c = 0
    for j in candidates:
        if c >= window:
            break
        if q[j, 0] != q[j, 0]:
            continue
        if positive:
            if not (since[j] < s and value[j] > 0):
                continue
            done = known[j] < s
        else:
            if later(since[j], j, s, k):
                continue
            done = not later(known[j], j, s, k)
        x = value[j] if done else s - since[j]
        if positive:
            at, below, _ = _positive_cdf(q[j], levels, x)
        else:
            at, below = cdf(q[j], levels, x)
        # a known value's PIT, drawn within a pile; a censored one's is above F(so far)
        vals[c] = below + v[j] * (at - below) if done else below
        event[c] = done
        c += 1
    if c < min_count:
        return levels.copy(), False
    return _km(vals, event, c, levels), True


@njit(cache=True)
def _members(cls, n_cls):
    """Each class's jobs, in order: (starts, members), class c's at
    members[starts[c]:starts[c + 1]]."""
    n = len(cls)
    counts = np.zeros(n_cls + 1, np.int64)
    for i in range(n):
        counts[cls[i] + 1] += 1
    starts = np.cumsum(counts)
    members = np.empty(n, np.int64)
    fill = starts[:-1].copy()
    for i in range(n):
        members[fill[cls[i]]] = i
        fill[cls[i]] += 1
    return starts, members


@njit(cache=True)
def _class_levels(q, levels, value, since, known, v, s, k, starts, members, c, window,
                  min_count, vals, event, positive):
    """_pit_levels of class c's last jobs before job k (of `members` by `starts`, see
    _members); of every class's where its own has fewer than `min_count`."""
    lo = starts[c]
    hi = lo + np.searchsorted(members[lo:starts[c + 1]], k)
    g, ok = _pit_levels(q, levels, value, since, known, v, s, k,
                        members[max(lo, hi - 4 * window):hi][::-1], window, min_count, vals,
                        event, positive)
    if not ok and len(starts) > 2:
        g, ok = _pit_levels(q, levels, value, since, known, v, s, k,
                            np.arange(k - 1, max(-1, k - 4 * window), -1), window, min_count,
                            vals, event, positive)
    return g, ok


@njit(cache=True)
def _recalibrate(q, levels, wait, submit, v, window, every, min_count, edges):
    n, n_lv = q.shape
    start = submit + wait
    out = np.full((n, n_lv), np.nan)
    # each job's predicted P(wait < ZERO_S): its bin
    zbin = np.zeros(n, np.int64)
    for i in range(n):
        if q[i, 0] == q[i, 0]:
            at, _ = cdf(q[i], levels, ZERO_S)
            zbin[i] = min(int(at * ZERO_BINS), ZERO_BINS - 1)
    # per bin, a ring of the last `window` jobs whose zero-or-not is known: (index, zero)
    ring_job = np.empty((ZERO_BINS, window), np.int64)
    ring_len = np.zeros(ZERO_BINS, np.int64)
    ring_head = np.zeros(ZERO_BINS, np.int64)
    zeros = np.zeros(ZERO_BINS, np.int64)
    pending = np.empty(n, np.int64)  # jobs of the current submit second, not yet started
    n_pending = 0
    added = 0  # jobs before `added` are in their rings (or pending)
    # each job's class: its predicted positive wait's median, bucketed
    pcls = np.zeros(n, np.int64)
    for i in range(n):
        if q[i, 0] == q[i, 0]:
            f0, _ = cdf(q[i], levels, 0.0)
            med = _interp(levels, q[i], f0 + 0.5 * (1.0 - f0))
            pcls[i] = np.searchsorted(edges, med)
    n_cls = len(edges) + 1
    starts, members = _members(pcls, n_cls)
    seen = np.zeros(n_cls, np.int64)
    g_pos = np.empty((n_cls, n_lv))
    for c in range(n_cls):
        g_pos[c] = levels
    vals = np.empty(window)
    event = np.empty(window, np.bool_)
    for k in range(n):
        s = submit[k]
        # jobs known as zero or not by (s, k): submitted before s, or started by then
        if n_pending > 0 and submit[pending[0]] < s:
            m = n_pending
            n_pending = 0
            for r in range(m):
                _ring_push(ring_job, ring_len, ring_head, zeros, zbin[pending[r]],
                           pending[r], wait, window)
        while added < k:
            j = added
            added += 1
            if q[j, 0] != q[j, 0]:
                continue
            if submit[j] < s or start[j] == s:
                _ring_push(ring_job, ring_len, ring_head, zeros, zbin[j], j, wait, window)
            else:
                pending[n_pending] = j
                n_pending += 1
        if q[k, 0] != q[k, 0]:
            continue
        b = zbin[k]
        f0, _ = cdf(q[k], levels, 0.0)
        if ring_len[b] >= min_count:
            p0 = zeros[b] / ring_len[b]
        else:
            p0 = f0
        # the positive waits' levels, of its class (of the predicted positive wait's
        # median), refreshed every `every` of its jobs; every class's where its own has
        # too few
        c = pcls[k]
        if seen[c] % every == 0:
            g_c, ok = _class_levels(q, levels, wait, submit, start, v, s, k, starts, members,
                                    c, window, min_count, vals, event, True)
            if ok:
                g_pos[c] = g_c
        seen[c] += 1
        g = g_pos[c]
        # the new quantiles: 0 up to p0, then the positive part read at its new levels
        for li in range(n_lv):
            lv = levels[li]
            if lv <= p0 and p0 > 0:
                out[k, li] = 0.0
                continue
            u = (lv - p0) / (1.0 - p0) if p0 < 1.0 else 1.0
            u = _interp(levels, g, u)  # the level of the positive part
            out[k, li] = _interp(levels, q[k], f0 + u * (1.0 - f0))
        for li in range(1, n_lv):
            out[k, li] = max(out[k, li], out[k, li - 1])
    return out


def recalibrate(q: np.ndarray, wait: np.ndarray, submit: np.ndarray, *, seed: int = 0,
                window: int = 3000, every: int = 64, min_count: int = 50,
                edges=POSITIVE_EDGES, levels=LEVELS) -> np.ndarray:
    """Each job's predicted quantiles `q` (jobs x levels, seconds, in submit order)
    recalibrated as the module docstring says; a row of NaN stays so.  Seeded: the
    probability integral transforms' draws within a pile are the same each time."""
    v = np.random.default_rng(seed).uniform(size=len(wait))
    return _recalibrate(np.ascontiguousarray(q, dtype=np.float64),
                        np.ascontiguousarray(levels, dtype=np.float64),
                        np.ascontiguousarray(wait, dtype=np.float64),
                        np.ascontiguousarray(submit, dtype=np.float64), v, int(window),
                        int(every), int(min_count), np.asarray(edges, dtype=np.float64))


@njit(cache=True)
def _recalibrate_censored(q, levels, value, since, known, submit, v, window, every,
                          min_count, edges):
    n, n_lv = q.shape
    out = q.copy()
    vals = np.empty(window)
    event = np.empty(window, np.bool_)
    # each job's class: its predicted median, bucketed
    cls = np.zeros(n, np.int64)
    for i in range(n):
        if q[i, 0] == q[i, 0]:
            cls[i] = np.searchsorted(edges, _interp(levels, q[i], 0.5))
    n_cls = len(edges) + 1
    starts, members = _members(cls, n_cls)
    seen = np.zeros(n_cls, np.int64)
    g_cls = np.empty((n_cls, n_lv))
    for c in range(n_cls):
        g_cls[c] = levels
    for k in range(n):
        if q[k, 0] != q[k, 0]:
            continue
        c = cls[k]
        if seen[c] % every == 0:  # its class's levels, refreshed every `every` of its jobs
            s = submit[k]
            g, ok = _class_levels(q, levels, value, since, known, v, s, k, starts, members, c,
                                  window, min_count, vals, event, False)
            if ok:
                g_cls[c] = g
        seen[c] += 1
        for li in range(n_lv):
            out[k, li] = _interp(levels, q[k], g_cls[c, li])
    return out


def recalibrate_censored(q: np.ndarray, value: np.ndarray, since: np.ndarray,
                         known: np.ndarray, submit: np.ndarray, *, seed: int = 0,
                         window: int = 3000, every: int = 64, min_count: int = 50,
                         edges=(), levels=LEVELS) -> np.ndarray:
    """Quantiles `q` of a quantity that runs from `since` and is known at `known` (a run
    time: from the start, known at the end), read at the levels at which the last `window`
    jobs' values fell (Kaplan-Meier, those still running censored at what they had had so
    far), refreshed every `every` jobs; only what had happened by (submit_k, k) is read.
    With `edges`, jobs are grouped by their predicted median (bucketed at the edges), each
    group read at the levels of its own last jobs (of every group's where its own has fewer
    than `min_count`): a group whose predictions run long is mended apart from one whose
    run short."""
    v = np.random.default_rng(seed).uniform(size=len(value))
    return _recalibrate_censored(np.ascontiguousarray(q, dtype=np.float64),
                                 np.ascontiguousarray(levels, dtype=np.float64),
                                 np.ascontiguousarray(value, dtype=np.float64),
                                 np.ascontiguousarray(since, dtype=np.float64),
                                 np.ascontiguousarray(known, dtype=np.float64),
                                 np.ascontiguousarray(submit, dtype=np.float64), v,
                                 int(window), int(every), int(min_count),
                                 np.asarray(edges, dtype=np.float64))
