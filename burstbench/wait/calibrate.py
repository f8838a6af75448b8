"""A predicted wait distribution recalibrated on what recent jobs did, in two parts, since
waits pile up at exactly 0 s (a job that starts at its submit) and no one reshaping of
levels corrects both the pile and the rest:

- the pile: P(wait = 0) is the share of zero waits among the last `window` jobs whose
  predicted P(wait < 30 s) fell in the same tenth (a job's zero or not is known once it has
  started, or once time has passed its submit);
- the rest: the predicted distribution of a positive wait, read at the levels at which the
  last `window` positive waits fell (the Kaplan-Meier quantiles of their probability
  integral transforms, jobs still waiting counted as censored at their wait so far).

Only what had happened by (submit_k, k) is read for job k (numba, one pass).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from burstbench.wait.history import LEVELS, cdf

#: Jobs are grouped by their predicted P(wait < ZERO_S) to recalibrate P(wait = 0).
ZERO_S = 30.0
ZERO_BINS = 10


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
def _recalibrate(q, levels, wait, submit, v, window, every, min_count):
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
    g_pos = levels.copy()
    vals = np.empty(window)
    event = np.empty(window, np.bool_)
    last_g = -1
    for k in range(n):
        s = submit[k]
        # jobs known as zero or not by (s, k): submitted before s, or started by then
        if n_pending > 0 and submit[pending[0]] < s:
            m = n_pending
            n_pending = 0
            for r in range(m):
                added_job = pending[r]
                b = zbin[added_job]
                z = 1 if wait[added_job] == 0 else 0
                if ring_len[b] == window:
                    old = ring_job[b, ring_head[b]]
                    zeros[b] -= 1 if wait[old] == 0 else 0
                else:
                    ring_len[b] += 1
                ring_job[b, ring_head[b]] = added_job
                ring_head[b] = (ring_head[b] + 1) % window
                zeros[b] += z
        while added < k:
            j = added
            added += 1
            if q[j, 0] != q[j, 0]:
                continue
            if submit[j] < s or start[j] == s:
                b = zbin[j]
                if ring_len[b] == window:
                    old = ring_job[b, ring_head[b]]
                    zeros[b] -= 1 if wait[old] == 0 else 0
                else:
                    ring_len[b] += 1
                ring_job[b, ring_head[b]] = j
                ring_head[b] = (ring_head[b] + 1) % window
                zeros[b] += 1 if wait[j] == 0 else 0
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
        # the positive waits' levels, refreshed every `every` jobs
        if last_g < 0 or k - last_g >= every:
            last_g = k
            c = 0
            j = k - 1
            while j >= 0 and c < window:
                if q[j, 0] == q[j, 0] and submit[j] < s and wait[j] > 0:
                    if start[j] < s:
                        at, below, _ = _positive_cdf(q[j], levels, wait[j])
                        vals[c] = below + v[j] * (at - below)
                        event[c] = True
                    else:
                        at, below, _ = _positive_cdf(q[j], levels, s - submit[j])
                        vals[c] = below
                        event[c] = False
                    c += 1
                j -= 1
            if c >= min_count:
                g_pos = _km(vals, event, c, levels)
        # the new quantiles: 0 up to p0, then the positive part read at its new levels
        for li in range(n_lv):
            lv = levels[li]
            if lv <= p0 and p0 > 0:
                out[k, li] = 0.0
                continue
            u = (lv - p0) / (1.0 - p0) if p0 < 1.0 else 1.0
            u = _interp(levels, g_pos, u)  # the level of the positive part
            out[k, li] = _interp(levels, q[k], f0 + u * (1.0 - f0))
        for li in range(1, n_lv):
            out[k, li] = max(out[k, li], out[k, li - 1])
    return out


def recalibrate(q: np.ndarray, wait: np.ndarray, submit: np.ndarray, *, seed: int = 0,
                window: int = 3000, every: int = 64, min_count: int = 50,
                levels=LEVELS) -> np.ndarray:
    """Each job's predicted quantiles `q` (jobs x levels, seconds, in submit order)
    recalibrated as the module docstring says; a row of NaN stays so.  Seeded: the
    probability integral transforms' draws within a pile are the same each time."""
    v = np.random.default_rng(seed).uniform(size=len(wait))
    return _recalibrate(np.ascontiguousarray(q, dtype=np.float64),
                        np.ascontiguousarray(levels, dtype=np.float64),
                        np.ascontiguousarray(wait, dtype=np.float64),
                        np.ascontiguousarray(submit, dtype=np.float64), v, int(window),
                        int(every), int(min_count))
