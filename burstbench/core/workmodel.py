"""A benchmark's work model, calibrated on this machine by one small timed probe (issue 31:
each benchmark's plan estimate within +-25% of the measured time).

A configuration's seconds are its process's start (the interpreter, the imports, MPI's
start, the buffers: what its kernel does not time) and its work (what the kernel times
itself, runner.timed_seconds).  A benchmark's probe() runs one tiny real configuration
a few times (:func:`timed`) and keeps the median sample's :class:`Timing`; its expand()
then estimates each configuration as ``start + rate x modelled work``
(:class:`Calibration`), where `start` is the probe's untimed seconds and `rate` its timed
seconds over what the benchmark's work model predicted for it.  Where no probe ran (a plan
built by hand, a test), the model's own constants stand (:data:`UNCALIBRATED`).

A benchmark hooks in with three lines: time its probe (``records, timing = timed(task)``),
keep ``calibrate(timing, modelled_s, start_s=...)`` in its Machine, and give each task
``calibration.estimate(work_s)`` as its estimate_s.  The plan says how it was calibrated
(Plan.calibration, printed by sweep.plan_line).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from burstbench.core import contention, runner

#: The rate is kept within these bounds: a probe timed under a passing burst of load must
#: not make every estimate 100x off (the sweep's own calibration, SweepResult.scale, then
#: corrects what is left).
RATE_BOUNDS = (0.1, 10.0)


@dataclass(frozen=True)
class Timing:
    """A probe's seconds: from its start to its output read, and those its kernel timed."""

    wall_s: float
    timed_s: float
    others: float = 0.0  # the share of the machine's CPU other processes took meanwhile

    @property
    def start_s(self) -> float:
        """The seconds the kernel did not time: its process's start and end."""
        return max(0.0, self.wall_s - self.timed_s)

    def speedup(self, cores: int, cpus: int) -> float:
        """What `cores` cores of this machine's `cpus` do over one, as the probe found the
        machine: at most the CPUs the others left free (a contended 2-core VM runs a
        2-thread solve about as fast as a 1-thread one), at least 1."""
        return max(1.0, min(float(cores), cpus * (1.0 - self.others)))


#: A probe runs SAMPLES times, and the sample of median wall time calibrates: one sample
#: lands in a slow or a fast second of this VM's bandwidth, as a whole sweep does not.  Two
#: runs of 36 one-sample plans of local.yaml here (comparisons/probe_spread.py), each 3 in
#: a row's median against the first: sd 6.7 -> 4.5% and 11.9 -> 11.3% of their median for
#: the Triad (largest deviation 22 -> 11% and 38 -> 38%), BICCG 3.5 -> 2.3% and 7.3 -> 6.5%
#: (13 -> 5% and 24 -> 17%), ping-pong 10.0 -> 9.3% and 9.1 -> 7.6%.  What the median
#: cannot remove is the drift over tens of seconds (the second Triad run went from 120 to
#: 187 s and back), which the sweep meets too and its calibration follows.
SAMPLES = 3


def _once(task: runner.Task) -> tuple[list[dict], Timing]:
    """One sample of a probe: `task`'s JSON records and its Timing."""
    before = contention.sample()
    began = time.monotonic()
    out, err = runner.launch(task)
    wall = time.monotonic() - began
    others = contention.others_share(before, contention.sample()) or 0.0
    records = runner.json_records(out, err)
    return records, Timing(wall, runner.timed_seconds(records), others)


def timed(task: runner.Task, samples: int | None = None) -> tuple[list[dict], Timing]:
    """Run `task` (runner.launch) `samples` times (None: SAMPLES; at least once) and return
    the JSON records and the Timing of the run of median wall time (the quicker of two);
    TaskFailed as runner.launch and runner.json_records raise it, at the first failure."""
    runs = [_once(task) for _ in range(max(1, SAMPLES if samples is None else samples))]
    runs.sort(key=lambda run: run[1].wall_s)
    return runs[(len(runs) - 1) // 2]


@dataclass(frozen=True)
class Calibration:
    """A work model as calibrated here: seconds of a configuration's start, and `rate`, the
    probe's measured over modelled work; `said`: what the probe found, in a few words."""

    start_s: float
    rate: float = 1.0
    said: str = ""

    def estimate(self, work_s: float, start_s: float | None = None) -> float:
        """Seconds of a configuration whose modelled work is `work_s` (and whose start is
        `start_s` where it is not the probe's: another launcher, another rank count)."""
        return (self.start_s if start_s is None else start_s) + self.rate * work_s


def ratio(measured_s: float, modelled_s: float) -> float:
    """A probe's measured over modelled seconds, kept within RATE_BOUNDS (1 where the model
    predicted nothing)."""
    lo, hi = RATE_BOUNDS
    return min(hi, max(lo, measured_s / modelled_s)) if modelled_s > 0 else 1.0


def calibrate(timing: Timing, modelled_s: float, said: str = "",
              start_s: float | None = None) -> Calibration:
    """The Calibration a probe's `timing` gives a model that predicted `modelled_s` seconds
    of work for it (`start_s`: the start where the benchmark measured it otherwise)."""
    rate = ratio(timing.timed_s, modelled_s)
    start = timing.start_s if start_s is None else start_s
    text = f"start {start:.2f} s, work x{rate:.2f} of the model"
    return Calibration(start, rate, f"{said}: {text}" if said else text)


#: No probe ran: the model's constants as they are.
UNCALIBRATED = Calibration(start_s=0.0, rate=1.0, said="")
