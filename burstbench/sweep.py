"""What every benchmark's sweep shares: the plan, the run it writes to, and running it.

A benchmark module (``burstbench.triad``, ``burstbench.pingpong``) turns
validated parameters into a :class:`Plan` of tasks and parses one task's
output into tidy rows; :func:`execute` runs the plan into a run folder,
finalizes the tables and records the outcome in the provenance.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from burstbench import paths, provenance, runner, store
from burstbench.params import digest


@dataclass
class Plan:
    """What a sweep will measure: tasks, what they run on (variants, MPI builds), notes."""

    tasks: list[runner.Task]
    variants: list[dict]
    notes: list[str] = field(default_factory=list)
    detail: str = "threads"  # the configuration column summarised per label by table()

    def table(self) -> pd.DataFrame:
        """One row per label: its implementation and how many configurations it has."""
        rows = [t.config for t in self.tasks]
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


def open_run(P: dict, benchmark: str) -> tuple[store.Run, bool]:
    """The run a sweep writes to (resuming an unfinished one with the same parameters)."""
    run, resumed = store.open_run(
        paths.runs_dir(P["runs_dir"]), P["vm"], benchmark, P, digest(P, benchmark),
        P["run_id"], system=lambda: provenance.collect(paths.project_root()))
    # the source this benchmark measured with (a run's notebooks may span commits)
    run.set_section(benchmark, git=provenance.git(paths.project_root()))
    print(("resumed" if resumed else "new") + f" run {run.root}")
    return run, resumed


def plan_line(plan: Plan, stored: set[str]) -> str:
    """What a sweep is about to do, said before it starts: configurations planned, already
    stored, and about how long the rest takes by the planner's work model (each task's
    estimate_s; the progress lines then say the time left as measured)."""
    todo = [t for t in plan.tasks if t.key not in stored]
    seconds = sum(t.estimate_s for t in todo)
    unknown = sum(1 for t in todo if not t.estimate_s)
    took = ("nothing left to measure" if not todo else
            f"about {duration(seconds)} to measure"
            + (f" (and {unknown} without an estimate)" if unknown else "")
            + ", by a work model; the progress lines give the time left as measured")
    return (f"planned: {len(plan.tasks)} configurations, {len(plan.tasks) - len(todo)} "
            f"already stored; {took}")


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
    configurations failed, and KeyboardInterrupt when interrupted.
    """
    run.set_section(benchmark, variants=plan.variants, notes=plan.notes,
                    planned=len(plan.tasks))
    for note in plan.notes:
        print(f"note: {note}")
    print(plan_line(plan, run.done_keys(benchmark)), flush=True)
    result = runner.run_tasks(plan.tasks, run, benchmark, parse, columns, progress)
    table = run.finalize(benchmark, columns)
    status = "complete" if result.complete else ("interrupted" if result.interrupted
                                                 else "incomplete")
    run.set_section(benchmark, status=status, finished=store.now_iso(),
                    failures=[{"configuration": t, "reason": r} for t, r in result.failed],
                    seconds=round(result.seconds, 1))
    if result.interrupted:
        raise KeyboardInterrupt
    if result.failed:
        first = result.failed[0]
        raise SweepFailed(f"{len(result.failed)} of {result.total} configurations failed "
                          f"(first: {first[0]}: {first[1]}); measured ones are stored in "
                          f"{run.root}; re-run to retry the failed ones")
    print(f"{result.measured} configurations measured, {result.already_stored} resumed, "
          f"{result.seconds:.0f} s; results in {run.root}")
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


@dataclass(frozen=True)
class Benchmark:
    """A benchmark, declared once in its own module (``SPEC = register(Benchmark(...))``):
    what params.py, the CLI, the report and the notebooks need of it.

    name       the section: ``<name>_*`` parameters, data/runs/<vm>/<run>/<name>.csv
    params     its parameters (the common ones are params.COMMON)
    notebook   its measurement notebook (notebooks/), report_notebook its report one
    plan       validated parameters -> Plan (probe() the machine, then expand())
    parse      one task's output -> tidy rows, raw records, a one-line summary
    spread     the results table -> one row per configuration over its repetitions
    report     (runs_dir, reference_dir, figures_dir, show) -> its report.Section of
               figures/ (the report notebook calls it)
    columns    the configuration columns its rows carry besides store.HEAD and
               store.TAIL: the store keeps each of them and refuses any other
    title      its name in papermill_params/README.md (params.docs() writes it), and
    labels     what that page says of its labels (Markdown)
    """

    name: str
    params: tuple
    notebook: str
    report_notebook: str
    plan: Callable[[dict], Plan]
    parse: runner.Parser
    spread: Callable[..., pd.DataFrame]
    report: Callable[..., object]
    columns: tuple[str, ...] = ()
    title: str = ""
    labels: str = ""

    def open_run(self, P: dict) -> tuple[store.Run, bool]:
        """The run this sweep writes to (resuming an unfinished one with these parameters)."""
        return open_run(P, self.name)

    def sweep(self, run: store.Run, the_plan: Plan, progress: bool = True) -> pd.DataFrame:
        """Measure every planned configuration not yet stored; finalize, return the table."""
        return execute(run, the_plan, self.name, self.parse, self.columns, progress)

    def load(self, runs_dir: Path | str, include_tests: bool | None = None) -> store.Loaded:
        """Every run's table of this benchmark under `runs_dir` (store.load), with its
        declared columns."""
        return store.load(Path(runs_dir), self.name, include_tests, self.columns)

    def measure(self, P: dict, progress: bool = True) -> tuple[store.Run, pd.DataFrame]:
        """Open (or resume) the run, plan, sweep: the whole measurement, for scripts and tests."""
        run, _ = self.open_run(P)
        return run, self.sweep(run, self.plan(P), progress)


_REGISTRY: dict[str, Benchmark] = {}
_DISCOVERED: list[bool] = []  # set once every registering module was imported
#: The report's order of the benchmarks it knows; any other comes after them, by name.
ORDER = ("triad", "pingpong", "biccg")


def register(spec: Benchmark) -> Benchmark:
    """Add a benchmark to the registry (its module does, when imported); return it."""
    if spec.name in _REGISTRY and _REGISTRY[spec.name] is not spec:
        raise ValueError(f"two benchmarks are named {spec.name!r}")
    _REGISTRY[spec.name] = spec
    return spec


def _discover() -> None:
    """Import every module of this package that registers a benchmark (its source has a
    line ``SPEC = register(``): a new benchmark is one new module, listed nowhere else."""
    if _DISCOVERED:
        return
    package = Path(__file__).resolve().parent
    for path in sorted(package.glob("*.py")):
        if re.search(r"^SPEC = register\(", path.read_text(), re.M):
            importlib.import_module(f"{__package__}.{path.stem}")
    _DISCOVERED.append(True)


def benchmarks() -> dict[str, Benchmark]:
    """Every registered benchmark by name, in ORDER, then any other by name."""
    _discover()
    return dict(sorted(_REGISTRY.items(), key=lambda kv: (
        ORDER.index(kv[0]) if kv[0] in ORDER else len(ORDER), kv[0])))
