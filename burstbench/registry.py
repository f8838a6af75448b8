"""The benchmark registry: what each benchmark declares of itself, and the list of them.

A benchmark is a package ``burstbench.benchmarks.<name>`` whose ``__init__`` declares its
:class:`Benchmark` as ``SPEC``: its parameters and the columns its rows carry (light, read
by ``burstbench params`` and ``--help``), and its heavy parts as :func:`lazy` references
(its plan, parse, report section and hooks), imported only when called.
:data:`BENCHMARKS` lists the packages in the report's order: a new benchmark is one line
there.  The shared modules (params, the CLI, the report index, the cost section, explore,
the job scripts, provenance) ask :func:`benchmarks` and name no benchmark.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from burstbench.core.checks import Param

if TYPE_CHECKING:  # annotations only: importing these here would make --help slow
    import pandas as pd

    from burstbench.core import runner, store
    from burstbench.core.merits import Merits
    from burstbench.core.sweep import Plan
    from burstbench.report.sections import Section

#: The benchmarks, by package name under burstbench.benchmarks, in the report's order.
BENCHMARKS = ("triad", "pingpong", "biccg", "storage")


def lazy(module: str, name: str) -> Callable[..., Any]:
    """A stand-in for `module`.`name` that imports the module when first called: a
    benchmark's plan, parse and report (pandas, matplotlib) load only when used."""
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{module}.{name}, imported when first called."
    call.target = f"{module}:{name}"  # type: ignore[attr-defined]
    return call


# -- the hooks, each typed once here: the type checker (make lint) sees every call ----------

class PlanHook(Protocol):
    def __call__(self, P: dict, /) -> Plan:
        """Validated parameters -> the sweep's Plan (probe() the machine, then expand())."""


class ParseHook(Protocol):
    def __call__(self, task: runner.Task, stdout: str, stderr: str, /
                 ) -> tuple[list[dict], list[dict], str]:
        """One task's output -> (tidy rows, raw records, a one-line summary)."""


class ReportHook(Protocol):
    def __call__(self, runs_dir: Path | str = "", reference_dir: Path | str = "",
                 figures_dir: Path | str = "", show: bool = False) -> Section:
        """The benchmark's report section, written to `figures_dir` (its report notebook
        calls it)."""


class NodesHook(Protocol):
    def __call__(self, P: dict, /) -> tuple[int, str]:
        """Validated parameters -> (the nodes it needs, the key that asks): job scripts."""


class HeadlineHook(Protocol):
    def __call__(self, table: pd.DataFrame, /) -> pd.DataFrame:
        """Its results table -> the value it is judged by, in explore's common columns."""


class AgainstStudyHook(Protocol):
    def __call__(self, newest: pd.DataFrame, summary: pd.DataFrame, vm: str,
                 reference_dir: Path, /) -> list[dict]:
        """A VM's newest headline rows and their summary -> rows comparing them with the
        study's published values (explore)."""


class MeritsHook(Protocol):
    def __call__(self, runs_dir: Path | str, reference_dir: Path | str, /) -> Merits:
        """Its figures of merit per VM, measured (store.merit_runs) and published: the cost and
        burst-decision models read them by merit name, never by benchmark."""


class SpreadHook(Protocol):
    def __call__(self, table: pd.DataFrame, /) -> pd.DataFrame:
        """Its results table -> one row per configuration over its repetitions."""


@dataclass(frozen=True, kw_only=True)
class Benchmark:
    """A benchmark, declared once in its package (``SPEC = Benchmark(...)``, by keyword):
    what params, the CLI, the report and the notebooks need of it.  Each hook's signature
    is its Protocol above.

    name        the section: ``<name>_*`` parameters, data/runs/<vm>/<run>/<name>.csv
    params      its parameters (the common ones are params.COMMON)
    columns     the configuration columns its rows carry besides store.HEAD and
                store.TAIL: the store keeps each of them and refuses any other
    notebook    its measurement notebook (notebooks/); its report notebook is
                notebooks/1N0_report_<name>.ipynb, found by the report command's glob
    plan, parse, report   the sweep's plan, a task's parse, the report section (required)
    title       its name in papermill_params/README.md (params.docs() writes it), and
    labels      what that page says of its labels (Markdown)
    env_prefixes  environment variables that change what it measures (provenance records
                them: ``ROMIO_``, ``GFARM_``)
    nodes, headline, against_study, merits   optional hooks (None: not offered)
    """

    name: str
    params: tuple[Param, ...]
    columns: tuple[str, ...]
    notebook: str
    plan: PlanHook
    parse: ParseHook
    report: ReportHook
    title: str = ""
    labels: str = ""
    env_prefixes: tuple[str, ...] = ()
    nodes: NodesHook | None = None
    headline: HeadlineHook | None = None
    against_study: AgainstStudyHook | None = None
    merits: MeritsHook | None = None

    def open_run(self, P: dict) -> tuple[store.Run, bool]:
        """The run this sweep writes to (resuming an unfinished one with these parameters)."""
        from burstbench.core import paths, provenance, sweep
        from burstbench.params import digest

        return sweep.open_run(P, self.name, digest(P, self.name),
                              lambda: provenance.collect(paths.project_root(), env_prefixes()))

    def sweep(self, run: store.Run, the_plan: Plan, progress: bool = True) -> pd.DataFrame:
        """Measure every planned configuration not yet stored; finalize, return the table."""
        from burstbench.core import sweep

        return sweep.execute(run, the_plan, self.name, self.parse, self.columns, progress)

    def measure(self, P: dict, progress: bool = True) -> tuple[store.Run, pd.DataFrame]:
        """Open (or resume) the run, plan, sweep: the whole measurement, for scripts and tests."""
        run, _ = self.open_run(P)
        return run, self.sweep(run, self.plan(P), progress)

    def load(self, runs_dir: Path | str, include_tests: bool = False) -> store.Loaded:
        """Every run's table of this benchmark under `runs_dir` (store.load), with its
        declared columns."""
        from burstbench.core import store

        return store.load(Path(runs_dir), self.name, include_tests, self.columns)


_EXTRA: dict[str, Benchmark] = {}  # benchmarks added at run time (register): tests


def register(spec: Benchmark) -> Benchmark:
    """Add a benchmark besides BENCHMARKS (a test's demo); return it."""
    if spec.name in benchmarks() and benchmarks()[spec.name] is not spec:
        raise ValueError(f"two benchmarks are named {spec.name!r}")
    _EXTRA[spec.name] = spec
    return spec


def benchmarks() -> dict[str, Benchmark]:
    """Every benchmark by name: BENCHMARKS in their order, then any registered, by name."""
    out = {}
    for name in BENCHMARKS:
        spec = importlib.import_module(f"burstbench.benchmarks.{name}").SPEC
        if spec.name != name:
            raise ValueError(f"burstbench.benchmarks.{name} declares {spec.name!r}")
        out[name] = spec
    return out | dict(sorted(_EXTRA.items()))


def all_merits(runs_dir: Path, reference_dir: Path, problems: list[str]) -> list[Merits]:
    """Every benchmark's figures of merit (their ``merits`` hooks, in order), what each could
    not use and which run each VM's come from added once to `problems`: the cost tables, the
    decision and the replay each say it."""
    out = []
    for spec in benchmarks().values():
        if spec.merits is not None:
            out.append(spec.merits(runs_dir, reference_dir))
            problems += [p for p in out[-1].problems if p not in problems]
    return out


def folder(name: str) -> Path | None:
    """A built-in benchmark's package folder (burstbench/benchmarks/<name>/); None for one
    registered at run time."""
    if name not in BENCHMARKS:
        return None
    return Path(importlib.import_module(f"burstbench.benchmarks.{name}").__file__ or "").parent


def env_prefixes() -> tuple[str, ...]:
    """The environment variables every benchmark declares as changing its measurement."""
    return tuple(dict.fromkeys(p for spec in benchmarks().values() for p in spec.env_prefixes))
