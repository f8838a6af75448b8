"""Spot VMs: the expected time and billed time of a checkpointed job whose VMs are evicted
as a Poisson process and requeued, in closed form and by simulation."""

from __future__ import annotations

import math

import numpy as np


def spot_expected(work_h: float, interval_h: float, rate_per_h: float,
                  restart_h: float = 5 / 60, checkpoint_h: float = 0.0) -> dict:
    """Expected wall time, billed time and evictions of a checkpointed job on spot VMs.

    The job's `work_h` hours are cut into segments of `interval_h` of work plus
    `checkpoint_h` to save it; an eviction (Poisson, `rate_per_h`) loses the
    segment in progress and costs `restart_h` before the requeued job runs
    again (not billed: no VM is up).  A segment of length s then takes
    (1/rate + restart) (e^{rate s} - 1) in expectation; rate 0 gives s.
    """
    if work_h < 0 or interval_h <= 0 or rate_per_h < 0 or restart_h < 0 or checkpoint_h < 0:
        raise ValueError("work, restart and checkpoint times must be >= 0, the interval > 0, "
                         "the eviction rate >= 0")
    full, rest = divmod(work_h, interval_h)
    segments = [interval_h + checkpoint_h] * int(full) + ([rest] if rest > 1e-12 else [])
    time = billed = evictions = 0.0
    for s in segments:
        if rate_per_h == 0:
            t, e = s, 0.0
        else:
            e = math.expm1(rate_per_h * s)  # expected evictions before the segment completes
            t = (1.0 / rate_per_h + restart_h) * e
        time += t
        evictions += e
        billed += t - e * restart_h
    return {"time_h": time, "billed_h": billed, "evictions": evictions}


def spot_simulate(work_h: float, interval_h: float, rate_per_h: float, restart_h: float = 5 / 60,
                  checkpoint_h: float = 0.0, samples: int = 4000,
                  seed: int = 0) -> dict[str, np.ndarray]:
    """Monte Carlo of the same model: arrays of wall and billed hours, one per sample."""
    spot_expected(work_h, interval_h, rate_per_h, restart_h, checkpoint_h)  # checks arguments
    rng = np.random.default_rng(seed)
    full, rest = divmod(work_h, interval_h)
    segments = [interval_h + checkpoint_h] * int(full) + ([rest] if rest > 1e-12 else [])
    wall = np.zeros(samples)
    billed = np.zeros(samples)
    for s in segments:
        done = np.zeros(samples, bool)
        while not done.all():
            n = int((~done).sum())
            up = rng.exponential(1 / rate_per_h, n) if rate_per_h > 0 else np.full(n, np.inf)
            ok = up >= s
            ran = np.where(ok, s, up)
            idx = np.flatnonzero(~done)
            wall[idx] += ran + np.where(ok, 0.0, restart_h)
            billed[idx] += ran
            done[idx[ok]] = True
    return {"time_h": wall, "billed_h": billed}


def spot_expected_arrays(work_h, interval_h: float, rate_per_h, restart_h: float = 5 / 60
                         ) -> tuple[np.ndarray, np.ndarray]:
    """spot_expected over arrays (the decision's draws of work and eviction rate), no
    checkpoint cost: (expected wall hours, expected billed hours)."""
    work = np.asarray(work_h, dtype=float)
    rate = np.broadcast_to(np.asarray(rate_per_h, dtype=float), work.shape)
    if interval_h <= 0 or restart_h < 0 or np.any(work < 0) or np.any(rate < 0):
        raise ValueError("work and restart times must be >= 0, the interval > 0, the "
                         "eviction rate >= 0")
    full = np.floor(work / interval_h + 1e-12)
    rest = np.maximum(work - full * interval_h, 0.0)
    safe = np.where(rate > 0, rate, 1.0)

    def segment(s):
        e = np.where(rate > 0, np.expm1(rate * s), 0.0)
        return np.where(rate > 0, (1.0 / safe + restart_h) * e, s), e

    t_full, e_full = segment(interval_h)
    t_rest, e_rest = segment(rest)
    time = full * t_full + t_rest
    return time, time - (full * e_full + e_rest) * restart_h
