"""A report section: its figures and tables as entries with captions and the runs behind
them, written to the figures folder with a manifest that the index reads; and the runs a
section draws (the newest of each VM, test runs only when asked)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from burstbench.core import paths, store
from burstbench.registry import benchmarks
from burstbench.report import style
from burstbench.report.tables import write_table


@dataclass
class Entry:
    """One figure or table of the report."""

    title: str
    files: list[str]
    caption: str
    runs: list[str] = field(default_factory=list)


@dataclass
class Section:
    """What one report notebook produced."""

    benchmark: str
    entries: list[Entry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def include_test_runs() -> bool:
    """Whether the report draws test runs (labelled as such): `burstbench report
    --include-test-runs` sets BURSTBENCH_INCLUDE_TEST_RUNS=1 for its notebooks."""
    return os.environ.get("BURSTBENCH_INCLUDE_TEST_RUNS", "") == "1"


def table_entry(section: Section, rows: list[dict], fig_dir: Path, stem: str, title: str,
                 caption: str, data: list[str] | None = None) -> pd.DataFrame:
    """Write `rows` as <stem>.csv and .md and list them in the section, drawn from `data`
    (runs and reference tables) or else from the rows' own ``data`` values; return the
    table."""
    table = pd.DataFrame(rows)
    if not table.empty:
        files = write_table(table, fig_dir / stem)
        named = data if data is not None else sorted(
            {str(r["data"]) for r in rows if r.get("data")})
        section.entries.append(Entry(title, [paths.rel_path(f, fig_dir) for f in files], caption,
                                     named))
    return table


def figure_entry(fig: plt.Figure, fig_dir: Path, stem: str, title: str, caption: str,
                  runs: list[str], show: bool, legend_right: float = 1.0,
                  caption_size: float = 7) -> Entry:
    """Save a figure (PNG + SVG, captioned), show it in a notebook if asked, close it.

    In a Jupyter kernel the figure shown is the PNG just written, at the figure's size on
    screen: the inline backend would draw the figure twice more (for its tight box, then its
    image), a fifth of a report rebuild's time.  Elsewhere, plt.show().
    """
    files = style.save(fig, fig_dir / stem, caption, legend_right, caption_size)
    if show:
        ipython = sys.modules.get("IPython")  # imported where a kernel runs this
        shell = ipython.get_ipython() if ipython else None
        png = [f for f in files if Path(f).suffix == ".png"]
        if png and getattr(shell, "kernel", None) is not None:
            from IPython.display import Image, display

            display(Image(filename=str(png[0]), width=round(fig.get_figwidth() * fig.dpi)))
        else:
            plt.show()
    plt.close(fig)
    return Entry(title, [paths.rel_path(f, fig_dir) for f in files], caption, runs)




def run_state(run: dict) -> str:
    """A run's state as a summary table's rows carry it (``run_state``): 'complete', or why
    not ('incomplete: stopped at budget, 46 of 65 configurations stored'), so that the best
    of a partial sweep is never read as the VM's best."""
    return str(run.get("status", ""))


def source_label(run: dict) -> str:
    """How a run's rows and titles are labelled: 'measured here', or 'a test run' for runs
    of a params file marked `test: true` (drawn only with --include-test-runs)."""
    return "a test run" if run.get("test") else "measured here"




def begin(benchmark: str, runs_dir: Path | str, reference_dir: Path | str,
           figures_dir: Path | str) -> tuple[Section, store.Loaded, Path, Path, Path]:
    """A report section with every run of `benchmark` loaded (problems noted), and its folders."""
    section = Section(benchmark)
    loaded = benchmarks()[benchmark].load(paths.runs_dir(runs_dir), include_test_runs())
    section.problems += loaded.problems
    ref_dir = Path(reference_dir) if reference_dir else paths.reference_dir()
    return section, loaded, ref_dir, paths.figures_dir(figures_dir), paths.project_root()


def each_vm(stats: pd.DataFrame, loaded: store.Loaded, root: Path, *,
            newest_with_rows: bool = False):
    """(vm, run, its rows of `stats`, the run's path relative to the project) for the newest
    run of each VM that has rows; `newest_with_rows`: for each VM's newest run among those
    with rows (a newer run that measured none of them does not hide an older one's)."""
    if stats.empty:
        return
    runs = loaded.runs
    if newest_with_rows:
        have = set(zip(stats["vm"], stats["run_id"]))
        runs = [r for r in runs if (r["vm"], r["run_id"]) in have]
    for vm, run in store.latest_runs(store.Loaded(loaded.table, runs)).items():
        s = stats[(stats["vm"] == vm) & (stats["run_id"] == run["run_id"])]
        if not s.empty:
            yield vm, run, s, paths.rel_path(Path(run["path"]), root)


def written_table(section: Section, figures_dir: Path | str, name: str) -> pd.DataFrame | None:
    """The table `name` (a CSV) that `section` wrote, read back to show at its notebook's end,
    after a line saying where; None, and a line saying why, where it wrote none (no run of
    the benchmark with data: a run whose budget ended before it started)."""
    fig_dir = paths.figures_dir(figures_dir)
    if not any(name in e.files for e in section.entries):
        print(f"{name} not written to {fig_dir}: no {section.benchmark} run with data under "
              "the runs folder (see what could not be used, above)")
        return None
    print(f"written to {fig_dir}")
    return pd.read_csv(fig_dir / name)


def save_section(section: Section, figures_dir: Path | str = "") -> Path:
    """Write the manifest of one report section (read by write_index), then remove the files
    its previous manifest listed and this one does not: a figure or table the report no
    longer makes does not linger in figures/ (files it never listed are never touched)."""
    fig_dir = paths.figures_dir(figures_dir)
    fig_dir.mkdir(parents=True, exist_ok=True)
    path = fig_dir / f"manifest-{section.benchmark}.json"
    try:
        before = {f for e in json.loads(path.read_text()).get("entries", [])
                  for f in e.get("files", [])}
    except (OSError, ValueError, AttributeError):  # none yet, or not ours to read
        before = set()
    store.atomic_write(path, json.dumps(asdict(section), indent=1) + "\n")
    now = {f for e in section.entries for f in e.files}
    for name in sorted(before - now):
        if isinstance(name, str) and name == Path(name).name:  # a file of fig_dir, no path
            (fig_dir / name).unlink(missing_ok=True)
    return path
