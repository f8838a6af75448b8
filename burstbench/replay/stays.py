"""What the jobs that stay gain when others burst: the log's queue re-simulated without the
burst jobs, against the same simulator with every job, each stay's wait the difference of
the two (AccaSim 1.1.3's EASY backfilling, replicated rule for rule in
burstbench.wait.easy; every KTH job's wait the same as AccaSim's, tested).  The simulation
without bursting is also set against the log's own waits: how far it is from the machine
the log describes is said with every gain.

And what a burst job would have waited had it stayed while the policy's other burst jobs
left: a sample of them (SAMPLE, at least SAMPLE_MIN) re-simulated in the thinned queue, each
one's logged wait less what the simulator says it waits less there (never below 0).  A
policy that bursts much empties the queue its savings were counted against: on a generated
log where P(sooner) >= 0.5 burst 67% of the jobs, 5% of them were later than their logged
wait, 88% than their wait in the queue the others had left (docs/replay.md)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from burstbench.wait import easy
from burstbench.wait.score import rank_correlation

RULES = "accasim"
#: The share of a policy's burst jobs sampled to stay in its re-simulated queue, and the
#: fewest sampled (all where fewer are burst).
SAMPLE, SAMPLE_MIN = 0.05, 30
#: The rules of that re-simulation: the textbook's EASY (a reservation kept for the queue's
#: head), as Slurm's backfill and the scheduler's estimate plan.
THINNED_RULES = "easy"
ABOUT = ("AccaSim 1.1.3's EASY backfilling (its rules replicated in numba: the same wait for "
         "every KTH job)")


@dataclass
class Stays:
    """The log's queue, simulated with every job (`base_wait`, s) and, on demand, without
    the jobs a policy bursts (:meth:`gain_h`), and with a sample of them back
    (:meth:`later_if_others_left`), each cached by the set burst."""

    submit: np.ndarray
    nodes: np.ndarray
    run: np.ndarray
    plan: np.ndarray
    capacity: int
    wait: np.ndarray  # the log's
    base_wait: np.ndarray = field(init=False)
    thinned_base: np.ndarray = field(init=False)
    gains: dict[bytes, float] = field(default_factory=dict, init=False)
    thinned: dict[bytes, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict,
                                                                init=False)

    def __post_init__(self) -> None:
        self.base_wait = easy.simulate(self.submit, self.nodes, self.run, self.plan,
                                       self.capacity, RULES) - self.submit
        self.thinned_base = self.base_wait if THINNED_RULES == RULES else easy.simulate(
            self.submit, self.nodes, self.run, self.plan, self.capacity,
            THINNED_RULES) - self.submit

    def prepare(self, masks: list[np.ndarray],
                sampled: list[np.ndarray] | None = None) -> None:
        """Simulate every set of `masks` (for the stays' gain) and of `sampled` (for
        :meth:`later_if_others_left`) not simulated yet, a thread a core (the simulation
        releases the GIL)."""
        gains = {k: m for m in masks if m.any() and (k := self._key(m)) not in self.gains}
        thin = {k: m for m in sampled or [] if m.any()
                and (k := self._key(m)) not in self.thinned}
        jobs: list[Callable[[], object]] = (
            [partial(self._gain, m) for m in gains.values()]
            + [partial(self._thinned, k, m) for k, m in thin.items()])
        if not jobs:
            return
        with ThreadPoolExecutor(min(os.cpu_count() or 1, 4, len(jobs))) as pool:
            done: list[Any] = list(pool.map(lambda f: f(), jobs))
        self.gains.update(zip(gains, done[:len(gains)]))
        self.thinned.update(zip(thin, done[len(gains):]))

    @staticmethod
    def _key(burst: np.ndarray) -> bytes:
        return hashlib.blake2b(np.packbits(burst).tobytes(), digest_size=16).digest()

    def _gain(self, burst: np.ndarray) -> float:
        w = easy.simulate(self.submit, self.nodes, self.run, self.plan, self.capacity, RULES,
                          ~burst) - self.submit
        stay = ~burst
        return float((self.base_wait[stay] - w[stay]).sum() / 3600.0)

    @staticmethod
    def _sample(key: bytes, idx: np.ndarray) -> np.ndarray:
        """SAMPLE of the burst jobs `idx` (at least SAMPLE_MIN), drawn by the set's key."""
        u = np.random.default_rng(int.from_bytes(key[:8], "little")).uniform(size=len(idx))
        return idx[u < max(SAMPLE, SAMPLE_MIN / max(len(idx), 1))]

    def wait_among(self, active: np.ndarray, base: np.ndarray | None = None) -> np.ndarray:
        """Each `active` job's wait (s) in the queue of the active jobs alone: its logged
        wait less what the re-simulation (THINNED_RULES) says it waits less there than in
        `base` (simulated waits; default `thinned_base`, every job's), never below 0; NaN
        for the others."""
        w = easy.simulate(self.submit, self.nodes, self.run, self.plan, self.capacity,
                          THINNED_RULES, active) - self.submit
        return np.maximum(self.wait - ((self.thinned_base if base is None else base) - w),
                          0.0)

    def _thinned(self, key: bytes, burst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A sample of the burst jobs (indices) and their waits (s) had each stayed while
        the others left."""
        sample = self._sample(key, np.flatnonzero(burst))
        active = ~burst
        active[sample] = True
        return sample, self.wait_among(active)[sample]

    def gain_h(self, burst: np.ndarray) -> float:
        """The hours the jobs that stay wait less when `burst` leave: the sum over them of
        the simulated wait with every job less the simulated wait without the burst."""
        if not burst.any():
            return 0.0
        key = self._key(burst)
        if key not in self.gains:
            self.gains[key] = self._gain(burst)
        return self.gains[key]

    def later_if_others_left(self, burst: np.ndarray, vm_hours: np.ndarray) -> float:
        """The share of a sample of `burst` whose turnaround on the VM (`vm_hours`, one a
        job) is longer than on premise had it stayed while the other burst jobs left (see
        the module docstring); NaN where nothing is burst."""
        if not burst.any():
            return float("nan")
        key = self._key(burst)
        if key not in self.thinned:
            self.thinned[key] = self._thinned(key, burst)
        sample, wait = self.thinned[key]
        return float(np.mean((wait + self.run[sample]) / 3600.0 < vm_hours[sample]))

    def validation(self, logged_wait: np.ndarray) -> dict[str, float]:
        """The simulation with every job against the log's waits: Spearman's rank
        correlation, the ratio of their means, both medians (s) and their ratio."""
        med = float(np.median(logged_wait))
        sim = float(np.median(self.base_wait))
        return {"rank_correlation": rank_correlation(self.base_wait, logged_wait),
                "mean_ratio": float(self.base_wait.mean() / logged_wait.mean())
                if logged_wait.mean() > 0 else float("nan"),
                "median_s": sim, "log_median_s": med,
                "median_ratio": sim / med if med > 0 else float("nan")}
