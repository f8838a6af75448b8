"""A sweep measured within a budget: what the decision needs first, and no configuration
started that does not fit the time left by its estimate.

``burstbench run --budget 20m`` (or ``budget_minutes`` in a params file) sets a deadline
that the notebooks' kernels inherit (DEADLINE_ENV, seconds since the epoch).  The run
measures in two passes: first each benchmark's configurations of priority 0 (what the time
model and the decision use: each benchmark's expand() marks them with :func:`prioritized`),
then the rest, the benchmark with the least left first (TIER_ENV says which pass a kernel
is in).  Within a pass a sweep measures in priority order while the next configuration's
estimate fits before the deadline; what is left is stored as left, the benchmark's status
is STATUS, and the same command resumes it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from burstbench.core.runner import Task

#: The deadline of a run with a budget, in seconds since the epoch (inherited by kernels).
DEADLINE_ENV = "BURSTBENCH_DEADLINE"
#: The highest priority measured in this pass ("0": what the decision needs); unset: all.
TIER_ENV = "BURSTBENCH_TIER"
#: A benchmark's status when its budget (or its pass) left configurations unmeasured.
STATUS = "stopped at budget"
#: The smallest budget taken: a notebook's kernel start and a benchmark's probes.
MINIMUM_S = 60.0

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


class BudgetError(ValueError):
    """A budget that is not a positive duration of at least MINIMUM_S; one line."""


#: The budget that asks for no limit (the whole sweep), over a params file's budget_minutes.
NONE = "none"


def parse(text: str, where: str = "--budget") -> float | None:
    """Seconds of a duration: '20m', '1h30m', '900s', '1.5h'; None for 'none' (no limit,
    whatever budget_minutes says); BudgetError otherwise."""
    s = str(text).strip().lower()
    if s == NONE:
        return None
    if s.startswith("-") or (s and set(s) <= set("0hms.")):
        raise BudgetError(f"{where}: {text} is not a budget: give a duration above zero "
                          "(e.g. 20m, 1h30m, 900s)")
    m = _DURATION.fullmatch(s)
    if not s or not m or not any(m.groups()):
        raise BudgetError(f"{where}: '{text}' is not a duration (e.g. 20m, 1h30m, 900s; "
                          f"{NONE}: no limit)")
    h, mins, sec = (float(g or 0) for g in m.groups())
    seconds = 3600 * h + 60 * mins + sec
    return check(seconds, text, where)


def check(seconds: float, text: object, where: str) -> float:
    """`seconds`, if at least MINIMUM_S; BudgetError saying the minimum otherwise."""
    if seconds <= 0:
        raise BudgetError(f"{where}: {text} is not a budget: give a duration above zero "
                          "(e.g. 20m, 1h30m, 900s)")
    if seconds < MINIMUM_S:
        raise BudgetError(f"{where}: {text} is less than the minimum of {MINIMUM_S:.0f}s "
                          "(the notebooks' start and probes)")
    return seconds


def deadline() -> float | None:
    """This sweep's deadline (seconds since the epoch), or None without a budget."""
    try:
        return float(os.environ[DEADLINE_ENV])
    except (KeyError, ValueError):
        return None


def tier() -> int | None:
    """The highest priority this pass measures, or None (all)."""
    try:
        return int(os.environ[TIER_ENV])
    except (KeyError, ValueError):
        return None


def prioritized(tasks: list[Task], needed: Callable[[dict], bool]) -> list[Task]:
    """`tasks`, those whose configuration the decision `needed` at priority 0, the others 1."""
    return [dataclasses.replace(t, priority=0 if needed(t.config) else 1) for t in tasks]


def after(tasks: list[Task], moved: Callable[[dict], bool],
          anchor: Callable[[dict], bool]) -> list[Task]:
    """`tasks` with those whose configuration is `moved` and that come before the first
    `anchor` put just after it (unchanged without an anchor): a nearby swap in the plan's
    order, so a budget's pass measures the anchor first, and without a budget the
    repetitions still alternate."""
    first = next((i for i, t in enumerate(tasks) if anchor(t.config)), None)
    if first is None:
        return list(tasks)
    ahead = [t for t in tasks[:first] if moved(t.config)]
    return ([t for t in tasks[:first] if not moved(t.config)] + [tasks[first]] + ahead
            + tasks[first + 1:])


def order(tasks: list[Task]) -> tuple[list[Task], list[Task]]:
    """(to measure in this pass, in priority order; left for a later pass).  Without a budget,
    every task in plan order."""
    if deadline() is None:
        return list(tasks), []
    ranked = sorted(tasks, key=lambda t: t.priority)  # stable: plan order within a priority
    cap = tier()
    if cap is None:
        return ranked, []
    return [t for t in ranked if t.priority <= cap], [t for t in ranked if t.priority > cap]


def fits(task: Task, scale: float = 1.0) -> bool:
    """True when there is no budget, or `task`'s estimate (times `scale`, the work model's
    calibration on this machine) ends before the deadline."""
    end = deadline()
    return end is None or time.time() + task.estimate_s * scale <= end


def left_s(now: float | None = None) -> float | None:
    """Seconds left before the deadline (None without a budget)."""
    end = deadline()
    return None if end is None else end - (time.time() if now is None else now)


#: Seconds of budget below which a notebook is not started (its kernel and probes alone).
NOTEBOOK_START_S = 15.0
#: Seconds of the budget kept for a notebook's end after its last configuration (the fold of
#: its table, papermill's save, the kernel's exit): the sweeps' deadline is this much earlier.
END_S = 10.0


def complete(run_dir: Path, benchmark: str) -> bool:
    """True when the run's benchmark has measured everything it planned."""
    from burstbench.core.store import Run

    sec = Run(run_dir).provenance().get("benchmarks", {}).get(benchmark, {})
    return sec.get("status") == "complete"


def pass_order(run_dir: Path, only: list[str], tier: int | None) -> list[str]:
    """The benchmarks in the order pass `tier` starts them: as given for what the decision
    needs; for the rest, the one with the least left by its calibrated estimate first (a
    budget then ends with as many complete sweeps as it can, and the Triad's matrix, the
    largest on a machine with a large cache, does not take all the time left), those with
    no estimate yet last, as given."""
    if tier is not None:
        return list(only)
    from burstbench.core.store import Run

    secs = Run(run_dir).provenance().get("benchmarks", {})
    left = {n: secs.get(n, {}).get("left_estimate_s") for n in only}
    return sorted(only, key=lambda n: (left[n] is None, left[n] or 0.0))


def table(run_dir: Path, only: list[str]) -> tuple[str, str]:
    """The end-of-run table of a run with a budget: per benchmark what was measured and what
    was left (with its calibrated estimate); for what was measured, the plan's estimate, the
    calibrated one (each configuration's, scaled by measured over estimated seconds before
    it) and the measured seconds, the error of the calibrated one, and the timed share (the
    kernels' own timed seconds over the sweep's); and what is left, in words ("" when
    nothing): how many configurations (planned less stored: a failed one is retried), and
    the benchmarks with no plan stored (not started, or stopped before their plan: a count
    without them would say less is left than is), after STATUS where the budget stopped a
    benchmark, 'not all measured' otherwise."""
    from burstbench.core.store import Run

    run = Run(run_dir)
    secs = run.provenance().get("benchmarks", {})
    head = (f"{'benchmark':<10} {'status':<18} {'measured':>9} {'left':>5} {'left est.':>9} "
            f"{'plan est.':>9} {'calibr.':>8} {'measured':>9} {'error':>6} {'timed share':>11}")
    lines, left, stopped = [head], 0, False
    unstarted: list[str] = []  # no plan stored: never started
    unplanned: list[str] = []  # no plan stored: stopped in its start
    for name in only:
        sec = secs.get(name, {})
        done = len(run.done_keys(name))
        status = sec.get("status", "pending")
        stopped |= status == STATUS
        if status == "pending" and not done:  # planned by the run, never started
            status = "not started"
        planned = sec.get("planned")  # what is not stored is left (a failed one is retried)
        no_plan = not isinstance(planned, int) and status != "complete"
        n_left = 0 if no_plan or status == "complete" else planned - done
        if no_plan:
            (unstarted if status == "not started" else unplanned).append(name)
        left += n_left
        est, took = sec.get("measured_estimate_s", 0.0), sec.get("measured_seconds", 0.0)
        cal = sec.get("calibrated_estimate_s", est)
        err = f"{(cal - took) / took:+.0%}" if took else "-"
        share = sec.get("timed_share")
        est_left = sec.get("left_estimate_s", 0 if status == "complete" else None)
        n_said, est_said = (("?", "?") if no_plan else
                            (str(n_left), "?" if est_left is None else f"{est_left:.0f}s"))
        lines.append(f"{name:<10} {status:<18} "
                     f"{done:>4}/{planned if planned is not None else '?':<4} {n_said:>5} "
                     f"{est_said:>9} {est:>8.0f}s {cal:>7.0f}s {took:>8.0f}s "
                     f"{err:>6} {'-' if share is None else f'{share:.2f}':>11}")
    said = (([f"{left} configurations left"] if left else [])
            + ([f"{', '.join(unstarted)} not started"] if unstarted else [])
            + ([f"{', '.join(unplanned)} stopped before planning"] if unplanned else []))
    if not said:
        return "\n".join(lines), ""
    return "\n".join(lines), f"{STATUS if stopped else 'not all measured'}: {', and '.join(said)}"


def start(seconds: float | None) -> list[int | None]:
    """Set the deadline `seconds` from now for this process and its notebooks, say so, and
    return the passes to run: [0, None] (what the decision needs, then the rest), or [None]
    without a budget."""
    if seconds is None:
        return [None]
    os.environ[DEADLINE_ENV] = str(time.time() + seconds - END_S)
    until = time.strftime("%H:%M:%S", time.localtime(time.time() + seconds))
    print(f"budget: {_duration(seconds)}, until {until}: first what the report and the "
          "decision need, then the rest, no configuration started that does not fit by its "
          "estimate", flush=True)
    return [0, None]


def should_start(run_dir: Path, benchmark: str, tier: int | None, passes: int) -> bool:
    """Whether to start `benchmark`'s notebook in the pass `tier` of a run of `passes`
    passes: always without a budget; with one, when it has something left and the time
    left is worth a kernel's start (setting TIER_ENV for it)."""
    if passes == 1:
        return True
    if complete(run_dir, benchmark):
        return False
    remaining = left_s()
    if remaining is not None and remaining < NOTEBOOK_START_S:
        print(f"== {benchmark}: not started, {max(0.0, remaining):.0f} s of the budget left",
              flush=True)
        return False
    if tier is None:
        os.environ.pop(TIER_ENV, None)
    else:
        os.environ[TIER_ENV] = str(tier)
    return True


def end() -> None:
    """Forget the deadline and the pass (the run is over)."""
    os.environ.pop(DEADLINE_ENV, None)
    os.environ.pop(TIER_ENV, None)


def _duration(seconds: float) -> str:
    h, rest = divmod(round(seconds), 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"
