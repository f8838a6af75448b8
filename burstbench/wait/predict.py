"""Each job's wait in the on-premise queue, predicted at its submit as a distribution (its
quantiles at :data:`~burstbench.wait.history.LEVELS`), from what the scheduler knew then.

The predictor, in four steps, each measured against the others on the KTH and RICC logs
(``comparisons/wait_predictors.py``; the README's "The replay" has the table):

1. the scheduler's own estimate (:func:`burstbench.wait.easy.estimates`: EASY backfilling
   run forward from the queue at the submit with requested times, what ``squeue --start``
   reports), up to a horizon;
2. history (:mod:`burstbench.wait.history`): the real wait relative to that estimate,
   ``(wait + 60 s) / (estimate + 60 s)``, over the last jobs that started of the same class
   (estimate bucket x size), scaled by the job's own estimate (of its estimate bucket where
   its class has too few; where that has too few too, the estimate plus the last jobs'
   excess over theirs); with no requested times in the log, the waits of the last jobs of
   its size class;
3. a learned model, where it has enough to learn from: LightGBM's gradient boosting of
   log(1 + wait) on what was known at the submit (the estimate, the requested time, the
   size, the queue's length and work, the machine's load, step 2's median and 90%
   quantile, the user's last known wait, how long ago it started, the user's jobs queued,
   and the job's queue and partition as categories where the log names them; where it
   names two partitions or more, the jobs and work queued and the nodes busy in the job's
   own partition, from the second partition's first job on), refitted
   on the last jobs that had started each time the jobs known to have started have
   doubled (then every `retrain_every`), never on a job not yet started; its
   prediction's error, over the last jobs that started, gives the distribution around it;
4. the distribution recalibrated (:mod:`burstbench.wait.calibrate`) on the last jobs'
   outcomes: P(wait = 0) from the share of zero waits among those of a like prediction,
   the positive part read at the levels at which their positive waits fell (those still
   waiting counted as censored), so that a 90% quantile covers 90%.

No field of a job is read before the log says it was known: its size and requested time
at its submit, its wait at its start; a later job's never (tests/test_wait.py truncates a
log after any job and finds every earlier prediction unchanged).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from burstbench.wait import calibrate, easy, history
from burstbench.wait.state import queue_state

#: The offset of the wait-to-estimate ratio, seconds: a wait of 0 against an estimate of 0
#: is a ratio of 1.
OFFSET_S = 60.0
#: Estimate buckets (s): at once, under 10 min, 1 h, 4 h, 12 h, 1 d, the horizon, past it.
ESTIMATE_EDGES = (1.0, 600.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0)
#: Requested-time buckets (s): up to 1 h, 4 h, 12 h, more.
REQUEST_EDGES = (3600.5, 4 * 3600.5, 12 * 3600.5)
#: Size buckets, as a share of the machine: up to 1/64, 1/16, 1/4, more.
SIZE_EDGES = (1 / 64, 1 / 16, 1 / 4)
#: Predicted-median buckets (s) of the learned model's error distribution.
POINT_EDGES = (60.0, 600.0, 3600.0, 4 * 3600.0, 12 * 3600.0)
FEATURES = ("estimate", "requested time", "size", "jobs queued", "work queued",
            "machine busy", "history median", "history 90%", "user's last wait",
            "since the user's last start", "user's jobs queued")
#: Where the log names two partitions or more, the same within the job's own partition.
PARTITION_FEATURES = ["its partition's jobs queued", "its partition's work queued",
                      "its partition busy"]


@dataclass
class Predicted:
    """Every job's predicted wait: `q`, jobs x LEVELS, seconds (a row of NaN: nothing was
    known yet); the steps beside it, for their comparison: the scheduler's estimate
    (`estimate`, s; NaN where not simulated), the history's distribution (`history`), the
    learned one before recalibration (`learned`, NaN rows before the first fit), both in
    single precision (they are only scored)."""

    q: np.ndarray
    estimate: np.ndarray
    history: np.ndarray
    learned: np.ndarray
    how: str
    fits: int = 0
    notes: list[str] = field(default_factory=list)

    def quantile(self, level: float) -> np.ndarray:
        """Each job's predicted quantile at `level` (one of LEVELS), seconds."""
        k = int(np.flatnonzero(np.isclose(history.LEVELS, level))[0])
        return self.q[:, k]

    def p_longer(self, x: np.ndarray) -> np.ndarray:
        """P(wait > x) per job at each of its values x (jobs x values, seconds)."""
        return history.survival(self.q, x)


@njit(cache=True)
def _user_features(submit, start, wait, user, n_users):
    """At each submit (s, i): the user's last known wait, the time since it started, and
    the user's jobs queued (submitted, not started); NaN where the user had none."""
    n = len(submit)
    last_w = np.full(n_users, np.nan)
    last_t = np.full(n_users, np.nan)
    queued = np.zeros(n_users, np.int64)
    out = np.full((n, 3), np.nan)
    order = np.argsort(start, kind="mergesort")
    p = 0
    for i in range(n):
        s = submit[i]
        while p < n:
            j = order[p]
            if history.later(start[j], j, s, i):
                break
            p += 1
            u = user[j]
            if u >= 0:
                last_w[u] = wait[j]
                last_t[u] = start[j]
                queued[u] -= 1
        u = user[i]
        if u >= 0:
            out[i, 0] = last_w[u]
            out[i, 1] = s - last_t[u]
            out[i, 2] = queued[u]
            queued[u] += 1
    return out


def _known_requests(req: np.ndarray, user: np.ndarray) -> np.ndarray:
    """Requested times, each missing one taken from the user's last job that had one, else
    the last job's (both known at the submit); 1 h before any."""
    if not np.isnan(req).any():
        return req
    out = req.copy()
    last_user: dict[int, float] = {}
    last = 3600.0
    for i, r in enumerate(req.tolist()):
        if r == r:
            last = r
            last_user[int(user[i])] = r
        else:
            out[i] = last_user.get(int(user[i]), last)
    return out


def buckets(x: np.ndarray, edges) -> np.ndarray:
    """Each value's bucket among `edges` (0 below the first; NaN as 0)."""
    return np.digitize(np.nan_to_num(x, nan=0.0), edges).astype(np.int64)


def _checkpoints(n: int, labelled: np.ndarray, first: int, every: int) -> list[int]:
    """Job indices at which the learned model is refitted: where the jobs known to have
    started first reach `first`, then double, then grow by `every`."""
    out, target = [], first
    for k in range(0, n, 256):  # looked at every 256 jobs
        if labelled[k] >= target:
            out.append(k)
            target = min(2 * labelled[k], labelled[k] + every)
    return out


@njit(cache=True)
def _ties(order, sorted_times, submit, lo, hi):
    count = lo.copy()
    for k in range(len(submit)):
        for r in range(lo[k], hi[k]):  # ties at the submit: those earlier in the log
            if order[r] < k:
                count[k] += 1
    return count


def known_before(times: np.ndarray, submit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The jobs in order of (time, place in the log), and for each job k how many of them
    come before (submit_k, k): those known by its submit are that prefix."""
    n = len(times)
    order = np.lexsort((np.arange(n), times))
    st = times[order]
    lo = np.searchsorted(st, submit, side="left")
    hi = np.searchsorted(st, submit, side="right")
    return order, _ties(order, st, submit, lo, hi)


def _learned(x: np.ndarray, y: np.ndarray, submit: np.ndarray, start: np.ndarray,
             first: int, every: int, train_window: int, seed: int,
             say: Callable[[str], None] = lambda line: None,
             categorical: list[int] | None = None) -> tuple[np.ndarray, int]:
    """log(1 + wait) predicted by LightGBM refitted at checkpoints on the last
    `train_window` jobs started by then; NaN before the first fit, and NaN for a job whose
    estimate (x's first column) is past every one the model learned from: trees do not
    extrapolate, and a live queue busier than its history would be read as its busiest
    day.  Returns (predictions, fits)."""
    import lightgbm as lgb

    n = len(y)
    by_start, labelled = known_before(start, submit)
    out = np.full(n, np.nan)
    marks = _checkpoints(n, labelled, first, every)
    if marks:
        say(f"  LightGBM fitted {len(marks)} times on the last {train_window:,} started jobs")
    # a category's split groups at most 8 of them, each of 500 jobs or more: on a generated
    # log of 200 queues that said nothing, LightGBM's defaults (32, 100) lost 3% of the
    # pinball loss, these 0.3-0.4% (comparisons/README.md, "Queues of different priority")
    params = dict(objective="regression", learning_rate=0.1, num_leaves=31,
                  min_data_in_leaf=50, max_bin=63, num_threads=1, deterministic=True,
                  seed=seed, verbose=-1, max_cat_threshold=8, min_data_per_group=500)
    for a, b in zip(marks, marks[1:] + [n]):
        train = by_start[max(0, labelled[a] - train_window):labelled[a]]
        data = lgb.Dataset(x[train], y[train], categorical_feature=categorical or "auto")
        model = lgb.train(params, data, num_boost_round=100)
        out[a:b] = np.where(x[a:b, 0] > x[train, 0].max(), np.nan,
                            model.predict(x[a:b], num_threads=1))
    return out, len(marks)


def categories(values: np.ndarray | None, n: int) -> np.ndarray | None:
    """A job's queue or partition as a category of the learned model: its number where
    known, NaN where not (negative); None where none is given.  A job's number is its own:
    no later job changes an earlier job's category.  Where queues differ in priority, the
    wait does by queue as by nothing else a job has (comparisons/README.md, "Queues of
    different priority")."""
    if values is None:
        return None
    q = np.asarray(values, np.int64)
    if len(q) != n:
        raise ValueError(f"{len(q)} queues or partitions for {n} jobs")
    return np.where(q >= 0, q, np.nan)


def _queue_columns(submit, start, run, nodes, req_k, capacity: int) -> np.ndarray:
    """The queue at each job's submit, from these jobs alone (jobs x 3): log(1 + the jobs
    queued), log(1 + their work (nodes x requested time) / capacity), the nodes busy /
    capacity."""
    queued, _left, running = queue_state(submit, start, start + run, nodes.astype(float),
                                         np.where(np.isnan(req_k), 0.0, req_k))
    jobs = np.searchsorted(np.sort(submit), submit, side="left") - \
        np.searchsorted(np.sort(start), submit, side="left")
    return np.column_stack([np.log1p(jobs), np.log1p(queued / capacity), running / capacity])


def _partition_state(part: np.ndarray, submit, start, run, nodes, req_k,
                     capacity: int) -> np.ndarray:
    """The queue's state within each job's own partition at its submit (jobs x
    PARTITION_FEATURES): the jobs and the work queued ahead in it and its nodes busy, from
    its partition's jobs alone.  NaN where its partition is unknown, and before the log has
    named a second one (a job's own, and those before it in the log): a later job never
    turns them on.  Where partitions are machines apart, a job waits for its own
    (comparisons/README.md, "Queues of different priority": the clusters mode)."""
    out = np.full((len(submit), len(PARTITION_FEATURES)), np.nan)
    known = ~np.isnan(part)
    if not known.any():
        return out
    first = part[np.flatnonzero(known)[0]]
    other = np.flatnonzero(known & (part != first))
    if not len(other):
        return out
    for code in np.unique(part[known]):
        at = np.flatnonzero(part == code)
        out[at] = _queue_columns(submit[at], start[at], run[at], nodes[at], req_k[at],
                                 capacity)
    out[:other[0]] = np.nan  # before the second partition
    return out


def _calibrated_estimate(est, wait, start, submit, share, window: int,
                         min_count: int) -> np.ndarray:
    """Step 2: quantiles of each job's wait, its estimate times the ratios (wait + 60 s) /
    (estimate + 60 s) of the last `window` started jobs of its class (estimate bucket x
    size); of its estimate bucket where its class has fewer than `min_count`; and where
    that has too few, its estimate plus the excess (wait - estimate) of the last jobs of
    every class.  A ratio is read only at the scale it was seen at: ratios of jobs whose
    estimate was about 0 would multiply a day's estimate into months."""
    ratio = (wait + OFFSET_S) / (est + OFFSET_S)
    e_cls = buckets(est, ESTIMATE_EDGES)
    n_e = len(ESTIMATE_EDGES) + 1
    q_c, own_c = history.window_quantiles(ratio, start, submit,
                                          e_cls * 4 + buckets(share, SIZE_EDGES), n_e * 4,
                                          window, min_count)
    q_e, own_e = history.window_quantiles(ratio, start, submit, e_cls, n_e, window,
                                          min_count)
    q_r = np.where((own_c >= min_count)[:, None], q_c, q_e)
    del q_c, q_e
    scaled = q_r * (est[:, None] + OFFSET_S) - OFFSET_S
    q_d, _ = history.window_quantiles(wait - est, start, submit, np.zeros(len(est), np.int64),
                                      1, window, min_count)
    by_scale = (own_c >= min_count) | (own_e >= min_count)
    return np.maximum(np.where(by_scale[:, None], scaled, est[:, None] + q_d), 0.0)


def predict(submit, nodes, wait, run, req, user, capacity: int, *,
            horizon_s: float = 86400.0, window: int = 1000, min_count: int = 50,
            learn: bool = True, first_fit: int = 2000, retrain_every: int = 32000,
            train_window: int = 30000, recal_window: int = 3000, seed: int = 2023,
            estimate: np.ndarray | None = None, queue: np.ndarray | None = None,
            partition: np.ndarray | None = None,
            progress: Callable[[str], None] | None = None) -> Predicted:
    """Every job's wait distribution at its submit (see the module docstring).  Arrays in
    submit order, one entry per job: submit, wait and run time (s), nodes (of a machine
    of `capacity`), requested time (s; NaN where unknown), user (-1: unknown).  A log
    shorter than the windows is predicted from what exists, and said in `notes`.
    `estimate`, where given, is the scheduler's own estimate of the wait (s from the
    submit) in place of the simulated one where it is not NaN: a live queue's pending jobs
    (burstbench.advise), whose estimate ``squeue --start`` or PBS reports.  `queue` and
    `partition`, where given: each job's queue and partition (numbers; negative: unknown),
    each a category the learned model may split on (:func:`categories`).  `progress`,
    where given, is called with a line before each step (a million jobs take minutes)."""
    say = progress or (lambda line: None)
    submit = np.asarray(submit, float)
    nodes = np.asarray(nodes, np.int64)
    wait = np.asarray(wait, float)
    run = np.asarray(run, float)
    req = np.asarray(req, float)
    user = np.asarray(user, np.int64)
    n = len(submit)
    start = submit + wait
    notes: list[str] = []
    has_req = ~np.isnan(req)
    if has_req.any():
        req_k = _known_requests(req, user)
        if not has_req.all():
            notes.append(f"{int((~has_req).sum()):,} job(s) without a requested time: the "
                         "scheduler's estimate takes their user's last requested time")
        say(f"  the scheduler's estimate at each of {n:,} submits (EASY backfilling with "
            f"requested times, up to {horizon_s / 3600:g} h ahead)")
        est = np.minimum(easy.estimates(submit, nodes, start, start + run, req_k, capacity,
                                        horizon_s, progress), horizon_s)
        if estimate is not None:
            given = np.asarray(estimate, float)
            est = np.where(np.isnan(given), est, np.minimum(np.maximum(given, 0.0), horizon_s))
        hist = _calibrated_estimate(est, wait, start, submit, nodes / capacity, window,
                                    min_count)
        how = (f"the scheduler's estimate (EASY backfilling with requested times, up to "
               f"{horizon_s / 3600:g} h) calibrated by the last {window:,} started jobs of "
               "its estimate and size class (of its estimate class where its own has too "
               "few; the estimate plus every class's excess over theirs where that has too "
               "few)")
    else:
        req_k = np.full(n, np.nan)
        est = np.full(n, np.nan)
        notes.append("the log has no requested times: no scheduler's estimate; the wait is "
                     "predicted from history alone")
        say(f"  the history of each size class at each of {n:,} submits")
        cls = buckets(nodes / capacity, SIZE_EDGES)
        hist, _ = history.window_quantiles(wait, start, submit, cls, 4, window, min_count)
        how = f"the waits of the last {window:,} started jobs of its size class"
    n_users = int(user.max()) + 1 if n and user.max() >= 0 else 0
    uf = _user_features(submit, start, wait, user, max(n_users, 1))
    x = np.column_stack([np.log1p(est), np.log1p(req_k), np.log(nodes / capacity),
                         _queue_columns(submit, start, run, nodes, req_k, capacity),
                         np.log1p(hist[:, 20]), np.log1p(hist[:, 36]),
                         np.log1p(uf[:, 0]), np.log1p(uf[:, 1]), np.log1p(uf[:, 2])])
    names = list(FEATURES)
    part = categories(partition, n)
    if part is not None:  # NaN until a second partition is known: then LightGBM finds no
        x = np.column_stack([x, _partition_state(part, submit, start, run, nodes, req_k,
                                                 capacity)])  # split in them, as without
        if not np.isnan(x[:, -1]).all():
            names += PARTITION_FEATURES
    cats = []
    for name, codes in (("queue", categories(queue, n)), ("partition", part)):
        if codes is None:
            continue
        cats.append(x.shape[1])
        x = np.column_stack([x, codes])
        if len(np.unique(codes[~np.isnan(codes)])) > 1:  # one, or none: LightGBM finds no
            names.append(name)                           # split in the column
    y = np.log1p(wait)
    learned = np.full_like(hist, np.nan)
    fits = 0
    base = hist
    if learn:
        point, fits = _learned(x, y, submit, start, first_fit, retrain_every, train_window,
                               seed, say, cats)
        if fits:
            resid = y - point
            q_e, _ = history.window_quantiles(resid, start, submit,
                                              buckets(np.expm1(point), POINT_EDGES),
                                              len(POINT_EDGES) + 1, window, min_count)
            learned = np.maximum(np.expm1(point[:, None] + q_e), 0.0)
            del q_e
            base = np.where(np.isnan(learned[:, :1]), hist, learned)
            how = (f"LightGBM on what was known at the submit ({', '.join(names)}), "
                   f"refitted {fits} times on the last {train_window:,} started jobs, its "
                   f"error over the last {window:,}; before its first fit, and for an estimate "
                   "past every one it learned from, " + how)
        else:
            notes.append(f"fewer than {first_fit:,} jobs had started by the log's end: "
                         "no learned model, the history alone")
    say(f"  recalibrated on the last {recal_window:,} jobs' outcomes")
    q = calibrate.recalibrate(base, wait, submit, seed=seed, window=recal_window)
    if n < window:
        notes.append(f"the log has {n:,} jobs, fewer than the history window ({window:,}): "
                     "each job is predicted from the jobs before it")
    del base
    return Predicted(q, est, hist.astype(np.float32), learned.astype(np.float32),
                     how + f"; recalibrated on the last "
                     f"{recal_window:,} jobs' outcomes (P(wait = 0), and the positive waits, "
                     "those still waiting censored)", fits, notes)
