"""What the jobs that stay gain when others burst: the log's queue re-simulated without the
burst jobs, against the same simulator with every job, each stay's wait the difference of
the two (AccaSim 1.1.3's EASY backfilling, replicated rule for rule in
burstbench.wait.easy; every KTH job's wait the same as AccaSim's, tested).  The simulation
without bursting is also set against the log's own waits: how far it is from the machine
the log describes is said with every gain."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from burstbench.wait import easy
from burstbench.wait.score import rank_correlation

RULES = "accasim"
ABOUT = ("AccaSim 1.1.3's EASY backfilling (its rules replicated in numba: the same wait for "
         "every KTH job)")


@dataclass
class Stays:
    """The log's queue, simulated with every job (`base_wait`, s) and, on demand, without
    the jobs a policy bursts (:meth:`gain_h`, cached by the set burst)."""

    submit: np.ndarray
    nodes: np.ndarray
    run: np.ndarray
    plan: np.ndarray
    capacity: int
    base_wait: np.ndarray = field(init=False)
    cache: dict[bytes, float] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.base_wait = easy.simulate(self.submit, self.nodes, self.run, self.plan,
                                       self.capacity, RULES) - self.submit

    def prepare(self, masks: list[np.ndarray]) -> None:
        """Simulate every set of `masks` not simulated yet, a thread a core (the
        simulation releases the GIL)."""
        todo = {self._key(m): m for m in masks if m.any() and self._key(m) not in self.cache}
        if not todo:
            return
        with ThreadPoolExecutor(min(os.cpu_count() or 1, 4, len(todo))) as pool:
            for key, gain in zip(todo, pool.map(self._gain, todo.values())):
                self.cache[key] = gain

    @staticmethod
    def _key(burst: np.ndarray) -> bytes:
        return hashlib.blake2b(np.packbits(burst).tobytes(), digest_size=16).digest()

    def _gain(self, burst: np.ndarray) -> float:
        w = easy.simulate(self.submit, self.nodes, self.run, self.plan, self.capacity, RULES,
                          ~burst) - self.submit
        stay = ~burst
        return float((self.base_wait[stay] - w[stay]).sum() / 3600.0)

    def gain_h(self, burst: np.ndarray) -> float:
        """The hours the jobs that stay wait less when `burst` leave: the sum over them of
        the simulated wait with every job less the simulated wait without the burst."""
        key = self._key(burst)
        if key not in self.cache:
            self.cache[key] = self._gain(burst) if burst.any() else 0.0
        return self.cache[key]

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
