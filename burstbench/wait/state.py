"""The queue's state at each submit, rebuilt from a log, and the wait it predicts: the
node-seconds ahead of the job (the queued jobs' nodes x their estimated run time, plus the
running jobs' nodes x their estimated time left) over the machine's nodes, a fluid machine
draining what is ahead.  It was the replay's predictor; it ranks real waits poorly (it counts
the whole queue by requested time, while backfilling lets small jobs through), and is kept as
the baseline the predictor (burstbench.wait.predict) is measured against."""

from __future__ import annotations

import numpy as np

from burstbench.core.checks import ParamError


def queue_state(submit: np.ndarray, start: np.ndarray, end: np.ndarray, nodes: np.ndarray,
                est: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At each job's submit s: (node-seconds queued ahead: jobs with submit_j < s <= start_j,
    nodes x est; node-seconds the running jobs have left: start_j < s <= min(end_j, start_j +
    est_j), nodes x (start_j + est_j - s); nodes running).  O(n log n): each sum is a
    difference of cumulative sums over the jobs sorted by one time."""
    s = submit

    def below(times: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Sum of `weights` of the jobs whose `times` are < each s."""
        order = np.argsort(times, kind="stable")
        cum = np.concatenate([[0.0], np.cumsum(weights[order])])
        return cum[np.searchsorted(times[order], s, side="left")]
    work = nodes * est
    queued = below(submit, work) - below(start, work)
    est_end = start + est
    stop = np.minimum(end, est_end)
    running_end = below(start, nodes * est_end) - below(stop, nodes * est_end)
    running_nodes = below(start, nodes) - below(stop, nodes)
    left = running_end - s * running_nodes
    # sums of differences: round-off below one node-second is no work
    return np.maximum(queued, 0.0), np.maximum(left, 0.0), np.maximum(np.round(running_nodes), 0)


def predicted_wait(submit, start, end, nodes, est, capacity: float) -> np.ndarray:
    """Seconds of wait the queue's state predicts at each submit: the node-seconds ahead /
    the machine's nodes, a fluid machine draining what is ahead.  Ahead: the queued jobs'
    work; and the running jobs' time left where the job cannot start now (jobs are queued,
    or fewer nodes are free than it needs); nothing where it can."""
    if not capacity > 0:
        raise ParamError(f"the machine's nodes must be positive, not {capacity!r}")
    nodes = np.asarray(nodes, float)
    queued, left, running = queue_state(np.asarray(submit, float), np.asarray(start, float),
                                        np.asarray(end, float), nodes, np.asarray(est, float))
    blocked = (queued > 0) | (running + nodes > capacity)
    return (queued + np.where(blocked, left, 0.0)) / capacity
