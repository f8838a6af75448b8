"""What the waits of the jobs that had started said, at each submit: the empirical quantiles
of a value (a wait, a wait relative to the scheduler's estimate, a probability integral
transform) over the last `window` jobs of the same class known by then, in order of when each
became known (its start, for a wait): what QBETS does (Brevik, Nurmi and Wolski, PPoPP 2006).

A job's value is read only once the log says it was known: job j's at (known_j, j) before job
i's submit (s_i, i), time first, then the job's place in the log (numba, one pass).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Levels of the predicted distributions: 0, 2.5%, ..., 97.5%, 100% (0.1, 0.5 and 0.9 among
#: them, at 4, 20 and 36).
LEVELS = np.round(np.linspace(0.0, 1.0, 41), 4)


@njit(cache=True)
def later(t, j, s, i):
    """Whether what happened to job j at time t is not yet known at job i's submit s: (t,
    j) is not before (s, i), time first, then the place in the log (numba)."""
    return t > s or (t == s and j >= i)


@njit(cache=True)
def _window_quantiles(values, known, submit, cls, n_cls, window, levels, min_count):
    n = len(values)
    n_lv = len(levels)
    out = np.full((n, n_lv), np.nan)
    count = np.zeros(n, np.int64)
    # per class (n_cls: all of them pooled) a sorted window and a ring of arrivals
    srt = np.empty((n_cls + 1, window))
    ring = np.empty((n_cls + 1, window))
    size = np.zeros(n_cls + 1, np.int64)
    head = np.zeros(n_cls + 1, np.int64)
    order = np.argsort(known, kind="mergesort")
    p = 0
    for i in range(n):
        s = submit[i]
        while p < n:
            j = order[p]
            if later(known[j], j, s, i):
                break
            p += 1
            v = values[j]
            if v != v:
                continue
            for c in (cls[j], n_cls):
                if c < 0:
                    continue
                m = size[c]
                if m == window:  # the oldest leaves
                    old = ring[c, head[c]]
                    k = np.searchsorted(srt[c, :m], old)
                    for q in range(k, m - 1):
                        srt[c, q] = srt[c, q + 1]
                    m -= 1
                ring[c, head[c]] = v
                head[c] = (head[c] + 1) % window
                k = np.searchsorted(srt[c, :m], v)
                for q in range(m, k, -1):
                    srt[c, q] = srt[c, q - 1]
                srt[c, k] = v
                size[c] = m + 1
        c = cls[i]
        count[i] = size[c] if c >= 0 else 0
        if c < 0 or size[c] < min_count:
            c = n_cls
        m = size[c]
        if m == 0:
            continue
        for li in range(n_lv):  # linear between order statistics (Hyndman-Fan type 7)
            h = (m - 1) * levels[li]
            lo = int(np.floor(h))
            hi = min(lo + 1, m - 1)
            out[i, li] = srt[c, lo] + (h - lo) * (srt[c, hi] - srt[c, lo])
    return out, count


def window_quantiles(values, known, submit, cls, n_classes: int, window: int = 1000,
                     min_count: int = 50, levels=LEVELS) -> tuple[np.ndarray, np.ndarray]:
    """For each job i (in submit order): the quantiles at `levels` of `values` over the
    last `window` jobs of its class `cls` (0 .. n_classes - 1) whose value was known before
    (submit_i, i), job j's at (known_j, j); where its class has fewer than `min_count`, the
    last `window` of every class.  Returns (jobs x levels, NaN where nothing was known yet;
    how many values of its own class were known).  NaN values are never counted."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    known = np.ascontiguousarray(known, dtype=np.float64)
    submit = np.ascontiguousarray(submit, dtype=np.float64)
    cls = np.ascontiguousarray(cls, dtype=np.int64)
    if not (len(values) == len(known) == len(submit) == len(cls)):
        raise ValueError("values, known, submit and cls must have one entry per job")
    if window < 1 or min_count < 1:
        raise ValueError("window and min_count must be positive")
    return _window_quantiles(values, known, submit, cls, int(n_classes), int(window),
                             np.ascontiguousarray(levels, dtype=np.float64), int(min_count))


@njit(cache=True)
def cdf(q, levels, x):
    """F(x) and F(x-) of the distribution whose quantile function is piecewise linear
    through (levels, q) (q increasing; a flat stretch is an atom) (numba)."""
    n = len(q)
    if x < q[0]:
        return 0.0, 0.0
    if x > q[n - 1]:
        return 1.0, 1.0
    # F(x-): the last level whose quantile is below x, interpolated
    lo = np.searchsorted(q, x, side="left")  # q[lo-1] < x <= q[lo]
    hi = np.searchsorted(q, x, side="right")  # q[hi-1] <= x < q[hi]
    if lo == 0:
        below = levels[0]
    else:
        a, b = q[lo - 1], q[lo]
        below = levels[lo - 1] + (levels[lo] - levels[lo - 1]) * (x - a) / (b - a) \
            if b > a else levels[lo]
    if hi >= n:
        at = 1.0
    elif hi == 0:
        at = levels[0]
    else:
        a, b = q[hi - 1], q[hi]
        at = levels[hi - 1] + (levels[hi] - levels[hi - 1]) * (x - a) / (b - a) \
            if b > a else levels[hi - 1]
    return max(at, below), below


@njit(cache=True)
def cdf_at(q, levels, x):
    """F(x) alone of :func:`cdf`'s distribution (numba)."""
    n = len(q)
    if x < q[0]:
        return 0.0
    hi = np.searchsorted(q, x, side="right")  # q[hi-1] <= x < q[hi]
    if hi >= n:
        return 1.0
    a, b = q[hi - 1], q[hi]
    return levels[hi - 1] + (levels[hi] - levels[hi - 1]) * (x - a) / (b - a) \
        if b > a else levels[hi - 1]


@njit(cache=True)
def _pit(q, levels, x, v):
    n = len(x)
    out = np.full(n, np.nan)
    for i in range(n):
        if q[i, 0] != q[i, 0] or x[i] != x[i]:
            continue
        at, below = cdf(q[i], levels, x[i])
        out[i] = below + v[i] * (at - below)
    return out


def pit(q: np.ndarray, x: np.ndarray, seed: int = 0, levels=LEVELS) -> np.ndarray:
    """Each job's probability integral transform: F(x) of its predicted distribution (the
    rows of quantiles `q` at `levels`), drawn uniformly between F(x-) and F(x) where x falls
    on an atom (many waits are exactly 0 s: a calibrated predictor then gives uniform
    values).  Seeded: the same draw each time.  NaN where a row or x is."""
    v = np.random.default_rng(seed).uniform(size=len(x))
    return _pit(np.ascontiguousarray(q, dtype=np.float64),
                np.ascontiguousarray(levels, dtype=np.float64),
                np.ascontiguousarray(x, dtype=np.float64), v)


@njit(cache=True)
def _survival(q, levels, x):
    n, m = x.shape
    out = np.empty((n, m))
    for i in range(n):
        for k in range(m):
            at, _ = cdf(q[i], levels, x[i, k])
            out[i, k] = 1.0 - at
    return out


def survival(q: np.ndarray, x: np.ndarray, levels=LEVELS) -> np.ndarray:
    """P(wait > x) for each job (a row of quantiles `q`) at each of its values x (jobs x
    values)."""
    x = np.ascontiguousarray(np.atleast_2d(x), dtype=np.float64)
    return _survival(np.ascontiguousarray(q, dtype=np.float64),
                     np.ascontiguousarray(levels, dtype=np.float64), x)


#: Where a waiting job's model keeps less than this share of its waits past the wait so far,
#: its remaining wait is the rule of :func:`remaining` instead.
MODEL_TAIL = 0.1


@njit(cache=True)
def _remaining(q, levels, waited, tail):
    n, m = q.shape
    out = np.empty((n, m))
    for i in range(n):
        e = waited[i]
        f = 1.0  # P(W < e): the levels the wait so far has passed
        if q[i, 0] == q[i, 0]:
            _, f = cdf(q[i], levels, e)
        if f == 1.0 and not e > 0.0:  # nothing predicted, nothing waited: nothing known
            out[i] = np.nan
        elif f <= 1.0 - tail:  # W - e given W >= e: the levels above f, spread over [0, 1]
            for k in range(m):
                out[i, k] = max(np.interp(f + levels[k] * (1.0 - f), levels, q[i]) - e, 0.0)
        else:  # P(R > r e) = 1 / (1 + r): the median remaining wait is the wait so far
            for k in range(m - 1):
                out[i, k] = e * levels[k] / (1.0 - levels[k])
            out[i, m - 1] = 2.0 * out[i, m - 2]
    return out


def remaining(q: np.ndarray, waited: np.ndarray, levels=LEVELS,
              tail: float = MODEL_TAIL) -> np.ndarray:
    """The wait still ahead of each job that has waited `waited` s and not started (jobs x
    levels, s), from its wait's quantiles at its submit `q` (rows at `levels`): the
    quantiles of W - waited given W >= waited, where the model keeps at least `tail` of its
    waits there (a job just submitted: its wait as predicted).  Elsewhere, and where a row
    is NaN (no prediction at its submit), the job has outwaited its model, and what is left
    is read from the wait so far alone, a Pareto tail of index 1: P(remaining > r x waited)
    = 1 / (1 + r), its median the wait so far (the top level twice the level below's).  A
    NaN row with nothing waited stays NaN.
    Backtested on the jobs pending at past moments of KTH and RICC: comparisons/README.md,
    "The live advice backtested"."""
    return _remaining(np.ascontiguousarray(q, dtype=np.float64),
                      np.ascontiguousarray(levels, dtype=np.float64),
                      np.ascontiguousarray(np.maximum(waited, 0.0), dtype=np.float64),
                      float(tail))
