"""What every benchmark's sweep shares: the plan, the run it writes to, and running it.

A benchmark (burstbench.benchmarks.<name>) turns validated parameters into a
:class:`Plan` of tasks and parses one task's output into tidy rows; :func:`execute`
runs the plan into a run folder, finalizes the tables and records the outcome in the
provenance.  Nothing here knows a benchmark.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pandas as pd

from burstbench.core import budget, contention, locks, paths, provenance, runner, store


@dataclass
class Plan:
    """What a sweep will measure: tasks, what they run on (variants, MPI builds), notes."""

    tasks: list[runner.Task]
    variants: list[dict]
    notes: list[str] = field(default_factory=list)
    detail: str = "threads"  # the configuration column summarised per label by table()
    #: How the tasks' estimates were calibrated on this machine (burstbench.core.probe),
    #: in a few words; "": the work model's own constants.
    calibration: str = ""

    def table(self) -> pd.DataFrame:
        """One row per label: its implementation and how many configurations it has."""
        rows = [c for t in self.tasks for c in t.each()]
        if not rows:
            return pd.DataFrame(columns=["label", self.detail, "configurations"])
        df = pd.DataFrame(rows)
        return (df.groupby("label", sort=False)
                  .agg(impl=("impl", "first"),
                       **{self.detail: (self.detail, lambda s: ",".join(
                           map(str, sorted(set(s), key=str))))},
                       configurations=("key", "size"))
                  .reset_index())


def slug(text: str) -> str:
    """A file-name-safe form of a label."""
    return re.sub(r"[^\w.+-]+", "_", text)


def task_key(label: str, parts: str, ident: object) -> str:
    """``<label>-<parts>-<6 hex of ident>``: readable, and unique for distinct configurations."""
    h = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:6]
    return f"{slug(label)}-{parts}-{h}"


def open_run(P: dict, benchmark: str, digest: str,
             system: Callable[[], dict]) -> tuple[store.Run, bool]:
    """The run a sweep writes to (resuming an unfinished one with the same parameter
    `digest`); `system` gives a new run's provenance."""
    runs = paths.runs_dir(P["runs_dir"]) if P["runs_dir"] else paths.tryouts_dir()
    if not P["runs_dir"]:  # a notebook run by hand (burstbench run always names the folder)
        print(f"a try-out: writing under {runs} (ignored by git), not data/runs; `burstbench "
              "run --params <file>` measures into data/runs (or set runs_dir)")
    run, resumed = store.open_run(runs, P["vm"], benchmark, P, digest, P["run_id"], system)
    # the source this benchmark measured with (a run's notebooks may span commits)
    run.set_section(benchmark, git=provenance.git(paths.project_root()))
    if P.get("budget_minutes") and budget.deadline() is None:  # a notebook run by hand
        os.environ[budget.DEADLINE_ENV] = str(time.time() + 60 * P["budget_minutes"])
    print(("resumed" if resumed else "new") + f" run {run.root}")
    return run, resumed


def plan_line(plan: Plan, stored: set[str]) -> str:
    """What a sweep is about to do, said before it starts: configurations planned, already
    stored, and about how long the rest takes by the planner's work model (each task's
    estimate_s; the progress lines then say the time left as measured)."""
    todo = [t for t in plan.tasks if t.key not in stored]
    seconds = sum(t.estimate_s for t in todo)
    unknown = sum(1 for t in todo if not t.estimate_s)
    model = (f"a work model calibrated {plan.calibration}" if plan.calibration
             else "a work model")
    took = ("nothing left to measure" if not todo else
            f"about {duration(seconds)} to measure"
            + (f" (and {unknown} without an estimate)" if unknown else "")
            + f", by {model}; the progress lines give the time left as measured")
    configs = sum(t.configurations for t in plan.tasks)
    what = f"{len(plan.tasks)} configurations" if configs == len(plan.tasks) else \
        f"{configs} configurations in {len(plan.tasks)} processes"
    return f"planned: {what}, {len(plan.tasks) - len(todo)} already stored; {took}"


def duration(seconds: float) -> str:
    """'40 s', '12 min', '2.5 h': a duration rounded as a person says it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class SweepFailed(RuntimeError):
    """Some configurations gave no result; what was measured is stored."""


def execute(run: store.Run, plan: Plan, benchmark: str, parse: runner.Parser,
            columns: tuple[str, ...], progress: bool = True) -> pd.DataFrame:
    """Measure every planned configuration not yet stored; finalize and return the table.

    Raises SweepFailed after storing everything measured when some
    configurations failed, KeyboardInterrupt when interrupted, and store.NoSpace at the
    first write that found the disk full (what was stored before stays whole).  Run by
    hand, it holds the run's and the host's locks itself (StoreError names their holder).
    """
    with _alone(run):
        return _execute(run, plan, benchmark, parse, columns, progress)


@contextlib.contextmanager
def _alone(run: store.Run) -> Iterator[None]:
    """A sweep run by hand (a notebook in JupyterLab) holds its run's lock and the host's
    itself (burstbench.core.locks); under `burstbench run` the run holds them already."""
    if os.environ.get(locks.SWEEP_ENV):
        yield
        return
    token = secrets.token_hex(8)
    try:
        with locks.holding(run.root, token) as said:
            for line in said:
                print(line)
            os.environ[locks.SWEEP_ENV] = token  # its configurations hold the locks too
            try:
                yield
            finally:
                os.environ.pop(locks.SWEEP_ENV, None)
    except locks.Busy as exc:
        raise store.StoreError(str(exc)) from None


def _execute(run: store.Run, plan: Plan, benchmark: str, parse: runner.Parser,
             columns: tuple[str, ...], progress: bool) -> pd.DataFrame:
    """execute(), its locks held."""
    run.set_section(benchmark, variants=plan.variants, notes=plan.notes,
                    planned=len(plan.tasks), estimate_calibration=plan.calibration)
    for note in plan.notes:
        print(f"note: {note}")
    print(plan_line(plan, run.done_keys(benchmark)), flush=True)
    try:  # a full disk stops at once: no other configuration, no fold of the parts
        result = runner.run_tasks(plan.tasks, run, benchmark, parse, columns, progress)
        table = run.finalize(benchmark, columns)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        with contextlib.suppress(OSError):
            run.set_section(benchmark, status="no space")
        raise store.NoSpace.at(run.root) from exc
    status = "complete" if result.complete else ("interrupted" if result.interrupted
                                                 else "incomplete" if result.failed
                                                 else budget.STATUS)
    left_s = sum(t.estimate_s for t in result.left) * result.scale()  # calibrated
    before = run.provenance().get("benchmarks", {}).get(benchmark, {})  # earlier passes
    run.set_section(benchmark, status=status, finished=store.now_iso(), folded=True,
                    failures=[{"configuration": t, "reason": r} for t, r in result.failed],
                    seconds=round(result.seconds, 1), left=len(result.left),
                    blocks=result.blocks,
                    left_estimate_s=round(left_s, 1),
                    measured_estimate_s=round(result.measured_estimate_s
                                              + before.get("measured_estimate_s", 0), 1),
                    measured_seconds=round(result.task_seconds
                                           + before.get("measured_seconds", 0), 1),
                    sweep_seconds=round(result.seconds + before.get("sweep_seconds", 0), 1),
                    # to 0.1 ms: a smoke sweep's kernels time a few ms in all, which
                    # two decimals rounded to 0 (and its timed share with them)
                    timed_seconds=round(result.timed_seconds
                                        + before.get("timed_seconds", 0), 4),
                    calibrated_estimate_s=round(result.predicted_s
                                                + before.get("calibrated_estimate_s", 0), 1))
    sec = run.section(benchmark)  # the kernels' timed seconds over the sweep's wall time
    if sec.get("sweep_seconds"):
        # three significant digits: a smoke sweep's few ms of kernels in a slow minute
        # of wall time would round to a share of 0 at three decimals
        share = sec["timed_seconds"] / sec["sweep_seconds"]
        run.set_section(benchmark, timed_share=float(f"{share:.3g}"))
    if result.interrupted:
        raise KeyboardInterrupt
    if result.failed:
        first = result.failed[0]
        raise SweepFailed(f"{len(result.failed)} of {result.total} configurations failed "
                          f"(first: {first[0]}: {first[1]}); measured ones are stored in "
                          f"{run.root}; re-run to retry the failed ones")
    what = (f"{result.measured} configurations" if result.configurations == result.measured
            else f"{result.configurations} configurations in {result.measured} processes")
    print(f"{what} measured, {result.already_stored} resumed, "
          f"{result.seconds:.0f} s; results in {run.root}")
    if result.left and budget.tier() is not None and budget.fits(result.left[0]):
        print(f"{len(result.left)} configurations of lower priority left (about "
              f"{duration(left_s)} by the estimate) for after the other benchmarks' first ones")
    elif result.left:
        print(f"{budget.STATUS}: {len(result.left)} configurations left (about "
              f"{duration(left_s)} by the estimate); the same command with --budget measures "
              "them, in priority order")
    if result.contended:
        print(f"note: {result.contended} of {result.measured} configurations were contended: "
              f"other processes took more than {contention.CONTENDED_SHARE:.0%} of the "
              "machine's CPU while they ran (column `contended`)")
    return table


#: The statistics of a configuration's repetitions that every benchmark reports.
MEDIAN_MIN_MAX = {"median": "median", "min": "min", "max": "max", "n": "size"}


def typed(df: pd.DataFrame, group: list[str], ints: tuple[str, ...] = ()) -> pd.DataFrame:
    """A copy of rows to summarise: `value` as float, the `ints` group columns as int, the
    other group columns as text (missing as ""), so that groups compare alike across runs."""
    df = df.copy()
    df["value"] = df["value"].astype(float)
    for c in group:
        df[c] = df[c].astype(int) if c in ints else \
            df[c].astype(object).where(df[c].notna(), "").astype(str)
    return df


def over_repetitions(df: pd.DataFrame, group: list[str],
                     ints: tuple[str, ...] = ()) -> pd.DataFrame:
    """Median, min, max and count of `value` over the repetitions of each `group`, one row
    per group; the group columns typed as typed()."""
    if df.empty:
        return pd.DataFrame(columns=group + list(MEDIAN_MIN_MAX))
    return (typed(df, group, ints).groupby(group, sort=True)["value"]
            .agg(**MEDIAN_MIN_MAX).reset_index())
