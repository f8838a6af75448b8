"""Report figures and tables, rebuilt from data/ alone (no measuring here).

Each report notebook calls one ``*_report`` function; it reads every run under
the runs folder and the study's tables under data/reference/, writes figures
(PNG + SVG, each with a caption naming its data) and tables (CSV + Markdown)
to the figures folder, and a manifest that :func:`write_index` turns into
figures/README.md.  Runs that cannot be read are listed there by name.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from burstbench import paths, plots, store
from burstbench.reference import vm_key


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


#: Markdown headers for columns whose CSV names are read by code: the unit spelled out.
COLUMN_HEADERS = {
    "jpy_per_node_hour": "price (JPY/node-h)",
    "gbs_per_1000_jpy_h": "GB/s per 1,000 JPY/node-h",
    "jpy_per_solve": "cost per solve (JPY)",
    "evictions_per_h": "evictions per hour",
    "l3_cache_mb_per_socket": "L3 cache per socket (MB)",
    "peak_rss_gb": "peak RSS (GB)",
    "triad_gbs": "Triad (GB/s)",
    "cv": "CV",
}
#: Unit suffixes of snake_case column names, longest first.
UNIT_SUFFIXES = (("_ms_per_it", "ms per iteration"), ("_bytes", "bytes"), ("_gbps", "Gbit/s"),
                 ("_gbs", "GB/s"), ("_gib", "GiB"), ("_gb", "GB"), ("_jpy", "JPY"),
                 ("_us", "µs"), ("_s", "s"), ("_h", "h"))


def column_header(name: str) -> str:
    """The Markdown header of a table column: 'solve_min_s' -> 'solve min (s)',
    'jpy_per_node_hour' -> 'price (JPY/node-h)'; names without a unit suffix unchanged."""
    name = str(name)
    if name in COLUMN_HEADERS:
        return COLUMN_HEADERS[name]
    if re.fullmatch(r"[a-z0-9_]+", name):
        for suffix, unit in UNIT_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                return f"{name[:-len(suffix)].replace('_', ' ')} ({unit})"
    return name


def _is_number(v: object) -> bool:
    return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            and not (isinstance(v, float) and math.isnan(v)))


def column_format(values) -> Callable[[float], str] | None:
    """One number format for a whole column, chosen from its values (None: no numbers).

    Whole numbers: no decimals, thousands separators if any reaches 1,000.  Others: fixed
    decimals, enough for three significant digits of the smallest non-zero value but no
    more than the values carry (at most 6); scientific for all when the values span more
    than six decades or go below 0.001.
    """
    nums = [float(v) for v in values if _is_number(v)]
    finite = [x for x in nums if math.isfinite(x)]
    if not finite:
        return None if not nums else str
    big = max(abs(x) for x in finite) >= 1000
    if all(x.is_integer() for x in finite):
        return lambda x: f"{x:,.0f}" if big else f"{x:.0f}"
    nonzero = [abs(x) for x in finite if x != 0]
    lo, hi = min(nonzero), max(nonzero)
    if lo < 1e-3 or hi / lo > 1e6:
        return lambda x: f"{x:.2e}"
    wanted = max(0, 2 - math.floor(math.log10(lo)))
    carried = next((k for k in range(7) if all(abs(round(x, k) - x) <= 1e-9 * max(1, abs(x))
                                                for x in finite)), 6)
    d = min(wanted, carried, 6)
    return lambda x: f"{x:,.{d}f}" if big else f"{x:.{d}f}"


def markdown_table(df: pd.DataFrame, floatfmt: str | None = None) -> str:
    """A GitHub Markdown table (no extra dependency): one number format per column (see
    :func:`column_format`; `floatfmt` forces one for every non-integer column), numbers
    right-aligned, units in the headers (:func:`column_header`)."""
    formats = {}
    for col in df.columns:
        f = column_format(df[col])
        if floatfmt and f is not None and not all(
                float(v).is_integer() for v in df[col] if _is_number(v)):
            f = lambda x, spec=floatfmt: format(x, spec)  # noqa: E731
        formats[col] = f

    def cell(v: object, f) -> str:
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return ""
        if f is not None and _is_number(v):
            return f(float(v))
        return str(v).replace("|", "\\|")

    head = "| " + " | ".join(column_header(c).replace("|", "\\|") for c in df.columns) + " |"
    sep = "|" + "|".join("---:" if formats[c] is not None else "---" for c in df.columns) + "|"
    body = ["| " + " | ".join(cell(v, formats[c]) for v, c in zip(row, df.columns)) + " |"
            for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *body]) + "\n"


def _write_table(df: pd.DataFrame, stem: Path) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv, md = stem.with_suffix(".csv"), stem.with_suffix(".md")
    store.atomic_write(csv, df.to_csv(index=False))
    store.atomic_write(md, markdown_table(df))
    return [csv, md]


def table_entry(section: Section, rows: list[dict], fig_dir: Path, stem: str, title: str,
                 caption: str) -> pd.DataFrame:
    """Write `rows` as <stem>.csv and .md and list them in the section; return the table."""
    table = pd.DataFrame(rows)
    if not table.empty:
        files = _write_table(table, fig_dir / stem)
        section.entries.append(Entry(title, [rel_path(f, fig_dir) for f in files], caption,
                                     sorted({str(r.get("data", "")) for r in rows})))
    return table


def figure_entry(fig: plt.Figure, fig_dir: Path, stem: str, title: str, caption: str,
                  runs: list[str], show: bool, legend_right: float = 1.0) -> Entry:
    """Save a figure (PNG + SVG, captioned), show it in a notebook if asked, close it.

    In a Jupyter kernel the figure shown is the PNG just written, at the figure's size on
    screen: the inline backend would draw the figure twice more (for its tight box, then its
    image), a fifth of a report rebuild's time.  Elsewhere, plt.show().
    """
    import sys

    files = plots.save(fig, fig_dir / stem, caption, legend_right)
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
    return Entry(title, [rel_path(f, fig_dir) for f in files], caption, runs)


def rel_path(p: Path, root: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(p)


def peak_for(vm: str, run_params: dict, peaks: pd.DataFrame) -> tuple[float, str]:
    """Theoretical node bandwidth (GB/s) and its source, or (nan, '')."""
    given = float(run_params.get("triad_peak_gbs") or 0)
    if given > 0:
        return given, "triad_peak_gbs of the run's parameters"
    hit = peaks[peaks["vm"].map(vm_key) == vm_key(vm)]
    if len(hit):
        return float(hit["theoretical_gbs_node"].iloc[0]), "data/reference/vm_memory_bandwidth.csv"
    return math.nan, ""


def source_label(run: dict) -> str:
    """How a run's rows and titles are labelled: 'measured here', or 'a test run' for runs
    of a params file marked `test: true` (drawn only with --include-test-runs)."""
    return "a test run" if run.get("test") else "measured here"


def latest_runs(loaded: store.Loaded) -> dict[str, dict]:
    """Per VM, the newest run with data (run ids sort by start time)."""
    latest: dict[str, dict] = {}
    for r in sorted(loaded.runs, key=lambda r: r["run_id"]):
        latest[r["vm"]] = r
    return latest


def begin(benchmark: str, runs_dir: Path | str, reference_dir: Path | str,
           figures_dir: Path | str) -> tuple[Section, store.Loaded, Path, Path, Path]:
    """A report section with every run of `benchmark` loaded (problems noted), and its folders."""
    from burstbench.sweep import benchmarks

    section = Section(benchmark)
    loaded = benchmarks()[benchmark].load(paths.runs_dir(runs_dir))
    section.problems += loaded.problems
    ref_dir = Path(reference_dir) if reference_dir else paths.reference_dir()
    return section, loaded, ref_dir, paths.figures_dir(figures_dir), paths.project_root()


def each_vm(stats: pd.DataFrame, loaded: store.Loaded, root: Path):
    """(vm, run, its rows of `stats`, the run's path relative to the project) for the newest
    run of each VM that has rows."""
    for vm, run in latest_runs(loaded).items():
        s = stats[(stats["vm"] == vm) & (stats["run_id"] == run["run_id"])]
        if not s.empty:
            yield vm, run, s, rel_path(Path(run["path"]), root)


def save_section(section: Section, figures_dir: Path | str = "") -> Path:
    """Write the manifest of one report section (read by write_index)."""
    fig_dir = paths.figures_dir(figures_dir)
    fig_dir.mkdir(parents=True, exist_ok=True)
    path = fig_dir / f"manifest-{section.benchmark}.json"
    store.atomic_write(path, json.dumps(asdict(section), indent=1) + "\n")
    return path


def write_index(figures_dir: Path | str = "") -> Path:
    """figures/README.md: every figure and table with its caption and the runs behind it."""
    fig_dir = paths.figures_dir(figures_dir)
    out = ["# Report figures and tables", "",
           "Rebuilt by `make figures` (`python -m burstbench report`) from `data/` alone; "
           "do not edit by hand. Each entry names the runs (under `data/runs/`) and reference "
           "tables (under `data/reference/`) it was drawn from.", ""]
    problems = []
    from burstbench.sweep import benchmarks

    order = {name: i for i, name in enumerate([*benchmarks(), "cost"])}  # cost reads them all
    for manifest in sorted(fig_dir.glob("manifest-*.json"),
                           key=lambda m: (order.get(m.stem[9:], 9), m.name)):
        sec = json.loads(manifest.read_text())
        problems += sec.get("problems", [])
        out += [f"## {sec['benchmark']}", ""]
        for e in sec["entries"]:
            out += [f"### {e['title']}", ""]
            out += [f"![{e['title']}]({f})" for f in e["files"] if f.endswith(".png")]
            for f in e["files"]:  # tables inline, so the index reads as the report
                if f.endswith(".md") and (fig_dir / f).exists():
                    out += [(fig_dir / f).read_text()]
            links = ", ".join(f"[{Path(f).suffix[1:]}]({f})" for f in e["files"])
            out += ["", e["caption"], "", f"Files: {links}. Data: "
                    + ", ".join(f"`{r}`" for r in e["runs"]), ""]
    if problems:
        out += ["## Notes: data that could not be used, and gaps", ""]
        out += [f"- {p}" for p in dict.fromkeys(problems)] + [""]
    path = fig_dir / "README.md"
    store.atomic_write(path, "\n".join(out))
    return path
