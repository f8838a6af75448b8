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

from burstbench import biccg, paths, pingpong, plots, store, triad
from burstbench.reference import read_reference, vm_key
from kernels_ext import triad as triad_kernel



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


def _peak_for(vm: str, run_params: dict, peaks: pd.DataFrame) -> tuple[float, str]:
    """Theoretical node bandwidth (GB/s) and its source, or (nan, '')."""
    given = float(run_params.get("triad_peak_gbs") or 0)
    if given > 0:
        return given, "triad_peak_gbs of the run's parameters"
    hit = peaks[peaks["vm"].map(vm_key) == vm_key(vm)]
    if len(hit):
        return float(hit["theoretical_gbs_node"].iloc[0]), "data/reference/vm_memory_bandwidth.csv"
    return math.nan, ""


def _source(run: dict) -> str:
    """How a run's rows and titles are labelled: 'measured here', or 'a test run' for runs
    of a params file marked `test: true` (drawn only with --include-test-runs)."""
    return "a test run" if run.get("test") else "measured here"


def latest_runs(loaded: store.Loaded) -> dict[str, dict]:
    """Per VM, the newest run with data (run ids sort by start time)."""
    latest: dict[str, dict] = {}
    for r in sorted(loaded.runs, key=lambda r: r["run_id"]):
        latest[r["vm"]] = r
    return latest


def _begin(benchmark: str, runs_dir: Path | str, reference_dir: Path | str,
           figures_dir: Path | str) -> tuple[Section, store.Loaded, Path, Path, Path]:
    """A report section with every run of `benchmark` loaded (problems noted), and its folders."""
    section = Section(benchmark)
    loaded = store.load(paths.runs_dir(runs_dir), benchmark)
    section.problems += loaded.problems
    ref_dir = Path(reference_dir) if reference_dir else paths.reference_dir()
    return section, loaded, ref_dir, paths.figures_dir(figures_dir), paths.project_root()


def _each_vm(stats: pd.DataFrame, loaded: store.Loaded, root: Path):
    """(vm, run, its rows of `stats`, the run's path relative to the project) for the newest
    run of each VM that has rows."""
    for vm, run in latest_runs(loaded).items():
        s = stats[(stats["vm"] == vm) & (stats["run_id"] == run["run_id"])]
        if not s.empty:
            yield vm, run, s, rel_path(Path(run["path"]), root)


def triad_report(runs_dir: Path | str = "", reference_dir: Path | str = "",
                 figures_dir: Path | str = "", show: bool = False) -> Section:
    """The study's Figures 2-4 for every VM with data, the best-bandwidth table, an overview."""
    section, loaded, ref_dir, fig_dir, root = _begin("triad", runs_dir, reference_dir,
                                                     figures_dir)
    best_ref = read_reference(ref_dir, "triad_best.csv",
                              ["vm", "best_triad_gbs", "label", "threads", "source"],
                              section.problems)
    peaks = read_reference(ref_dir, "vm_memory_bandwidth.csv", ["vm", "theoretical_gbs_node"],
                           section.problems)
    stats = triad.spread(loaded.table)
    best_rows: list[dict] = []
    stores_rows: list[dict] = []
    for vm, run, s, run_rel in _each_vm(stats, loaded, root):
        peak, peak_src = _peak_for(vm, run["params"], peaks)
        plots.apply_style()  # before the figure, or the first figure misses the style
        fig, ax = plt.subplots(figsize=(10, 5.5))
        plots.bandwidth_vs_threads(s, ax, title=f"{vm}: STREAM Triad bandwidth vs threads "
                                                f"({_source(run)})")
        marks = []
        ref = best_ref[best_ref["vm"].map(vm_key) == vm_key(vm)]
        for r in ref.itertuples():
            plots.reference_line(ax, r.best_triad_gbs, f"study best {r.best_triad_gbs:g} GB/s "
                                 f"({r.label}, {r.threads:g} threads)", "--", "0.2", r.threads)
            marks.append("the study's best (data/reference/triad_best.csv)")
        for r in _series_rows(best_ref, vm).itertuples():
            series = str(r.vm).removesuffix(" series")
            plots.reference_line(ax, r.best_triad_gbs, f"{str(r.source).split(' (')[0]}, "
                                 f"{series}: {r.best_triad_gbs:g} GB/s", "-.", "0.45")
            marks.append(str(r.note).split(";")[0])
        if not math.isnan(peak):
            plots.reference_line(ax, peak, f"theoretical {peak:g} GB/s", ":", "0.6")
            marks.append(f"theoretical bandwidth ({peak_src})")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        sizes = loaded.table.loc[loaded.table["run_id"] == run["run_id"], "size"].dropna()
        size = f"{int(sizes.iloc[0]):,}" if len(sizes) else "?"
        caption = (f"Data: {run_rel} ({run['status']}); median of "
                   f"{int(s['n'].max())} fresh processes per point, bars min-max; "
                   f"N = {size} doubles per array, "
                   f"NTIMES = {run['params'].get('triad_ntimes', '?')}; "
                   + ("labels with '-streaming' (dash-dotted): streaming stores; the other C "
                      "variants and numba: normal stores; "
                      if (s["stores"] == "streaming").any() else
                      "C variants and numba: normal stores; ")
                   + "NumPy: memmove (glibc's streaming stores for large arrays). "
                   + (f"Reference marks: {'; '.join(marks)}." if marks else
                      "No reference figure is known for this VM."))
        section.entries.append(figure_entry(fig, fig_dir, f"triad_{vm}",
                                             f"STREAM Triad vs threads on {vm}", caption,
                                             [run_rel], show))
        if set(s["stores"]) >= {"normal", "streaming"}:
            stores_rows += _stores_rows(vm, s, peak, run_rel)
            section.entries.append(_stores_figure(vm, run, stores_rows, s, fig_dir, run_rel,
                                                  show))
        for label, d in s.groupby("label"):
            top = d.loc[d["median_gbs"].idxmax()]
            traffic = top["median_gbs"] * triad_traffic_factor(top["stores"])
            best_rows.append({
                "vm": vm, "source": _source(run), "label": label, "impl": top["impl"],
                "stores": top["stores"],
                "threads": int(top["threads"]), "best_median_gbs": round(top["median_gbs"], 2),
                "min_gbs": round(top["min_gbs"], 2), "max_gbs": round(top["max_gbs"], 2),
                "cv": round(float(top["cv"]), 4), "repetitions": int(top["n"]),
                "theoretical_gbs": peak,
                "fraction_of_theoretical": round(top["median_gbs"] / peak, 3)
                if not math.isnan(peak) else math.nan,
                "traffic_gbs": round(traffic, 2),
                "traffic_fraction_of_theoretical": round(traffic / peak, 3),
                "data": run_rel})
    for r in best_ref.itertuples():
        peak, _ = _peak_for(r.vm, {}, peaks)
        best_rows.append({
            "vm": r.vm,
            "source": "the study" if str(r.source).startswith("study")
            else str(r.source).split(" (")[0],
            "label": r.label if isinstance(r.label, str) else "", "impl": "", "stores": "",
            # whole numbers stay whole in the CSV: a missing one is empty, not NaN (-> 24.0)
            "threads": int(r.threads) if pd.notna(r.threads) else pd.NA,
            "best_median_gbs": r.best_triad_gbs, "min_gbs": math.nan,
            "max_gbs": math.nan, "cv": math.nan, "repetitions": pd.NA,
            "theoretical_gbs": peak,
            "fraction_of_theoretical": round(r.best_triad_gbs / peak, 3)
            if not math.isnan(peak) else math.nan,
            "traffic_gbs": math.nan, "traffic_fraction_of_theoretical": math.nan,
            "data": "data/reference/triad_best.csv"})
    table = table_entry(
        section, best_rows, fig_dir, "triad_best", "Best Triad bandwidth per VM and configuration",
        "Best median Triad bandwidth over thread counts, per VM and configuration, with its "
        "spread and its fraction of the theoretical memory bandwidth where known. "
        "best_median_gbs counts 24 B per element, as STREAM does; traffic_gbs is what the "
        "memory moved: 32 B per element with normal stores (each line written is read first), "
        "24 B with streaming stores. Rows 'measured here' come from the newest run of each VM "
        "under data/runs; rows 'the study' from data/reference/triad_best.csv (their store "
        "policy is not recorded).")
    if not table.empty:
        section.entries.append(_overview(table, fig_dir, show))
    table_entry(section, stores_rows, fig_dir, "triad_stores",
                 "Triad with normal and streaming stores, per compiler variant",
                 "Best median Triad (STREAM's count, 24 B per element) per VM and compiler "
                 "variant with normal stores and with streaming stores, their ratio, and the "
                 "traffic each moved (32 B and 24 B per element). Measured here only: the "
                 "study's published figures do not say which stores their compilers emitted.")
    return section


def _series_rows(best_ref: pd.DataFrame, vm: str) -> pd.DataFrame:
    """Rows of data/reference/triad_best.csv for a series of VMs whose `applies_to` names a
    prefix of `vm` (Azure's HBv3 figure on the HB120 VMs)."""
    if "applies_to" not in best_ref:
        return best_ref.iloc[0:0]
    key = vm_key(vm)
    return best_ref[best_ref["applies_to"].fillna("").astype(str).map(
        lambda s: any(p and key.startswith(vm_key(p)) for p in s.split(";")))]


def triad_traffic_factor(stores: str) -> float:
    """Bytes the memory moves per byte STREAM counts, for Triad under a store policy
    (runs from before the policy was recorded: normal stores); nan where no model applies
    (NumPy's memmove)."""
    t = triad_kernel.TRAFFIC_BYTES.get(stores or "normal")
    return t["Triad"] / triad_kernel.BYTES_PER_ELEMENT["Triad"] if t else math.nan


def _stores_rows(vm: str, s: pd.DataFrame, peak: float, run_rel: str) -> list[dict]:
    """Per C variant of one VM: best median Triad with each store policy (best over
    affinities and thread counts), their ratio and traffic."""
    rows = []
    c = s[s["impl"] == "c"]
    for variant, d in c.groupby("variant", sort=True):
        best = {k: g.loc[g["median_gbs"].idxmax()] for k, g in d.groupby("stores")}
        if not {"normal", "streaming"} <= set(best):
            continue
        n, st = best["normal"], best["streaming"]
        rows.append({
            "vm": vm, "variant": variant,
            "normal_gbs": round(n["median_gbs"], 2), "normal_label": n["label"],
            "normal_threads": int(n["threads"]),
            "streaming_gbs": round(st["median_gbs"], 2), "streaming_label": st["label"],
            "streaming_threads": int(st["threads"]),
            "streaming_over_normal": round(st["median_gbs"] / n["median_gbs"], 3),
            "normal_traffic_gbs": round(n["median_gbs"] * triad_traffic_factor("normal"), 2),
            "streaming_traffic_gbs": round(st["median_gbs"], 2),
            "theoretical_gbs": peak, "data": run_rel})
    return rows


def _stores_figure(vm: str, run: dict, rows: list[dict], s: pd.DataFrame, fig_dir: Path,
                   run_rel: str, show: bool) -> Entry:
    """Per compiler variant of one VM: best Triad with normal and with streaming stores
    (STREAM's count), the traffic of the normal stores beside them, and a caption that
    says, from these numbers, how much a compiler gains by its stores alone."""
    mine = [r for r in rows if r["vm"] == vm]
    plots.apply_style()
    fig, ax = plt.subplots(figsize=(10, 1.3 * max(1, len(mine)) + 2.4))
    ys = np.arange(len(mine))
    colors = plots.palette(3)
    ax.barh(ys + 0.27, [r["normal_gbs"] for r in mine], height=0.26, color=colors[0],
            label="normal stores (STREAM's count, 24 B per element)")
    ax.barh(ys, [r["normal_traffic_gbs"] for r in mine], height=0.26, color=colors[0],
            alpha=0.45, label="normal stores, bytes moved (32 B per element)")
    ax.barh(ys - 0.27, [r["streaming_gbs"] for r in mine], height=0.26, color=colors[2],
            label="streaming stores (24 B counted = moved)")
    for y, r in zip(ys, mine):
        for dy, v in ((0.27, r["normal_gbs"]), (0.0, r["normal_traffic_gbs"]),
                      (-0.27, r["streaming_gbs"])):
            ax.annotate(f"{v:.1f}", (v, y + dy), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=8)
    peak = float(mine[0]["theoretical_gbs"]) if mine else math.nan
    if not math.isnan(peak):
        ax.axvline(peak, ls=":", color="0.4", label=f"theoretical {peak:g} GB/s")
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r['variant']}\nstreaming / normal {r['streaming_over_normal']:.2f}x"
                        for r in mine], fontsize=9)
    ax.set_xlabel("best median Triad bandwidth over affinities and threads (GB/s)")
    ax.set_xlim(0, max([r["normal_traffic_gbs"] for r in mine]
                       + [r["streaming_gbs"] for r in mine] + [0 if math.isnan(peak) else peak])
                * 1.6)
    ax.legend(loc="lower right", fontsize=8, frameon=True)
    ax.set_title(f"{vm}: Triad with normal and streaming stores ({_source(run)})")
    gains = "; ".join(f"{r['variant']} {r['normal_gbs']:.1f} -> {r['streaming_gbs']:.1f} GB/s "
                      f"({r['streaming_over_normal']:.2f}x)" for r in mine)
    caption = (f"Data: {run_rel}. Best median over affinities and thread counts, per variant: "
               f"{gains}. With normal stores each line written is read first, so Triad moves "
               "32 B per element while STREAM counts 24: the same memory traffic reported with "
               "streaming stores is up to 32/24 = 1.33x higher. Intel's compilers emit "
               "streaming stores for this loop; a compiler ranking such as the study's (icc or "
               "nvc best on every VM, section 3.1) can owe up to that factor to the stores "
               "alone, and on this machine the stores alone gave the ratios above. The study's "
               "figures are its own and say nothing of their stores; these are ours.")
    return figure_entry(fig, fig_dir, f"triad_stores_{vm}",
                         f"Triad: normal against streaming stores on {vm}", caption, [run_rel],
                         show)


def _overview(table: pd.DataFrame, fig_dir: Path, show: bool) -> Entry:
    """Best Triad per VM: ours beside the study's, theoretical bandwidth marked."""
    best = (table.sort_values("best_median_gbs", ascending=False)
                 .groupby(["vm", "source"], sort=False).head(1)
                 .assign(ours=lambda d: d["source"] == "measured here")
                 .sort_values(["ours", "best_median_gbs"]))
    plots.apply_style()
    fig, ax = plt.subplots(figsize=(11, 0.6 * len(best) + 2.0))
    ys = list(range(len(best)))
    colors = {"measured here": "#0072B2", "a test run": "#56B4E9"}
    names = {"measured here": "measured here", "a test run": "a test run"}
    peaks = best["theoretical_gbs"].astype(float)
    # theoretical bandwidth as a light outlined bar behind the measured one: both from zero
    ax.barh([y for y, p in zip(ys, peaks) if not math.isnan(p)], peaks.dropna(), height=0.8,
            color="0.94", edgecolor="0.45", lw=0.8, label="theoretical memory bandwidth")
    for y, r in zip(ys, best.itertuples()):
        ax.barh([y], [r.best_median_gbs], height=0.56, color=colors.get(r.source, "#999999"),
                label=names.get(r.source, "published (the study, Azure)"))
        peak = float(r.theoretical_gbs)
        text = f"{r.best_median_gbs:.1f} GB/s" + (
            f", {r.best_median_gbs / peak:.0%} of theoretical" if peak > 0 else "")
        ax.annotate(text, (max(r.best_median_gbs, 0 if math.isnan(peak) else peak), y),
                    xytext=(5, 0), textcoords="offset points", va="center", fontsize=9)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r.vm} ({r.source})\n" + ", ".join(x for x in (
        r.label if isinstance(r.label, str) else "",
        "" if pd.isna(r.threads) else f"{float(r.threads):g} threads") if x)
        for r in best.itertuples()], fontsize=9)
    ax.set_ylim(-0.6, len(best) - 0.4)
    handles, labels = ax.get_legend_handles_labels()
    keep = dict(zip(labels, handles))  # one entry per category drawn
    ax.legend(keep.values(), keep.keys(), loc="upper right", fontsize=9, frameon=True)
    ax.set_xlabel("best Triad bandwidth (GB/s; measured here: median of the best "
                  "configuration's repetitions)", fontsize=10)
    top = max(best["best_median_gbs"].max(), peaks.max(skipna=True) if peaks.notna().any() else 0)
    ax.set_xlim(0, top * 1.5)
    ax.tick_params(axis="x", labelsize=9)
    ax.set_title("STREAM Triad: best bandwidth per VM, measured and published",
                 fontsize=12)
    caption = ("Data: figures/triad_best.csv (newest run of each VM under data/runs; the "
               "study's section 3.1 values from data/reference/triad_best.csv); theoretical "
               "bandwidth from data/reference/vm_memory_bandwidth.csv or the run's parameters.")
    return figure_entry(fig, fig_dir, "triad_overview",
                         "STREAM Triad: best per VM, ours beside the study's", caption,
                         sorted(set(best["data"])), show)


def pingpong_report(runs_dir: Path | str = "", reference_dir: Path | str = "",
                    figures_dir: Path | str = "", show: bool = False) -> Section:
    """The study's Figures 5-10 for every VM with data, and the latency/bandwidth table."""
    section, loaded, ref_dir, fig_dir, root = _begin("pingpong", runs_dir, reference_dir,
                                                     figures_dir)
    ref = read_reference(ref_dir, "osu.csv", ["vm", "latency_min_us", "latency_max_us",
                                              "bandwidth_max_gbs", "source"], section.problems)
    stats = pingpong.spread(loaded.table)
    rows = []
    for vm, run, s, run_rel in _each_vm(stats, loaded, root):
        tests = [t for t in ("latency", "bw", "bibw") if t in set(s["function"])]
        # panels side by side, the legend in a row of its own below them: about 1,800 px
        # wide at 150 dpi for three panels, so it reads on a laptop and in the README
        plots.apply_style()
        legend_rows = math.ceil(s["label"].nunique() / (2 if len(tests) > 1 else 1))
        fig = plt.figure(figsize=(max(8.0, 4.0 * len(tests)), 4.6 + 0.2 * legend_rows))
        grid = fig.add_gridspec(2, len(tests), height_ratios=[3.6, 0.2 + 0.2 * legend_rows])
        axes = [[fig.add_subplot(grid[0, i]) for i in range(len(tests))]]
        legend_ax = fig.add_subplot(grid[1, :])
        legend_ax.axis("off")
        r = ref[ref["vm"].map(vm_key) == vm_key(vm)]
        marks = []
        for ax, test in zip(axes[0], tests):
            plots.versus_message_size(s, ax, test)
            for x in r.itertuples():
                if test == "latency" and pd.notna(x.latency_min_us):
                    ax.axhspan(x.latency_min_us, x.latency_max_us, color="0.5", alpha=0.15,
                               label=f"study: {x.latency_min_us:g}-{x.latency_max_us:g} µs")
                    marks.append("the study's latency range")
                if test == "bw" and pd.notna(x.bandwidth_max_gbs):
                    plots.reference_line(ax, x.bandwidth_max_gbs,
                                         f"study max {x.bandwidth_max_gbs:g} GB/s")
                    marks.append("the study's maximum bandwidth")
        handles, labels = axes[0][0].get_legend_handles_labels()
        for ax in axes[0][1:]:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        legend_ax.legend(handles, labels, loc="center", ncol=2 if len(tests) > 1 else 1,
                         fontsize=9, columnspacing=2.5)
        fig.suptitle(f"{vm}: MPI ping-pong, two ranks ({_source(run)})", fontweight="bold",
                     fontsize=12)
        params = run["params"]
        caption = (f"Data: {run_rel} ({run['status']}); median of "
                   f"{int(s['n'].max())} mpiexec runs per point, bars min-max; OSU 7.x methods "
                   f"(iterations {params.get('pingpong_iterations') or 'as OSU'}), "
                   "solid: C kernel, dashed: the same loop in mpi4py, one colour per "
                   "combination and placement; size 0 is drawn at the tick '0' (0.5 B on the log "
                   "axis). "
                   + (f"Reference marks: {', '.join(dict.fromkeys(marks))} "
                      "(data/reference/osu.csv)." if marks else
                      "No reference figure is known for this VM."))
        section.entries.append(figure_entry(
            fig, fig_dir, f"pingpong_{vm}", f"MPI latency and bandwidth vs message size on {vm}",
            caption, [run_rel], show))
        for row in pingpong.extremes(s).to_dict("records"):
            rows.append({"vm": vm, "source": _source(run)} | row | {"data": run_rel})
    for x in ref.itertuples():
        base = {"vm": x.vm, "source": "the study", "label": "", "impl": "",
                "combination": f"{x.combinations:g} combinations" if pd.notna(
                    getattr(x, "combinations", float("nan"))) else "", "placement": "inter-node",
                "at_size_bytes": pd.NA, "min": math.nan, "max": math.nan,
                "repetitions": pd.NA, "data": "data/reference/osu.csv"}
        rows.append(base | {"test": "latency", "value": x.latency_min_us, "unit": "us",
                            "note": f"range {x.latency_min_us:g}-{x.latency_max_us:g} us"})
        rows.append(base | {"test": "bw", "value": x.bandwidth_max_gbs, "unit": "GB/s",
                            "note": "maximum"})
    table_entry(
        section, [{k: v for k, v in r.items() if k != "run_id"} for r in rows], fig_dir,
        "pingpong_extremes",
        "Minimum latency and maximum bandwidth per VM, combination and placement",
        "Per VM, combination (compiler + MPI library), placement and test: the smallest median "
        "latency and the largest median bandwidth over message sizes, with the size where it "
        "occurs. 'measured here' rows: the newest run of each VM under data/runs; 'the study' "
        "rows: data/reference/osu.csv (its latency range and maximum bandwidth, inter-node).")
    return section


def _whole(v: object) -> object:
    """A median that is a whole number as an int (written '115' in the CSV, not '115.0')."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _solver_options(table: pd.DataFrame, run: dict, params: dict) -> str:
    """The blocks and the factor's precision the run's C solves used, as their records say
    (runs from before the solver recorded them used rows and a double factor)."""
    mine = table[(table["run_id"] == run["run_id"]) & (table["impl"] == "c")]
    opts = {}
    for col, old in (("blocking", f"rows of {params.get('biccg_block_size')}"),
                     ("factor_precision", "double")):
        vals = mine[col].dropna().unique() if col in mine else []
        opts[col] = ", ".join(sorted(map(str, vals))) if len(vals) else old
    return f"blocks: {opts['blocking']}, IC(0) factor in {opts['factor_precision']} precision"


def biccg_report(runs_dir: Path | str = "", reference_dir: Path | str = "",
                 figures_dir: Path | str = "", show: bool = False) -> Section:
    """The study's Figures 12-13 for every VM with data (time against parallelism, with
    iterations and the time split) and the summary table."""
    section, loaded, ref_dir, fig_dir, root = _begin("biccg", runs_dir, reference_dir,
                                                     figures_dir)
    stats = biccg.spread(loaded.table)
    rows = []
    for vm, run, s, run_rel in _each_vm(stats, loaded, root):
        problems = sorted(set(s["problem"]))
        plots.apply_style()  # before the figure, or the first figure misses the style
        fig, axes = plt.subplots(len(problems), 2, figsize=(13, 4.3 * len(problems)),
                                 squeeze=False)
        for (ax_t, ax_s), prob in zip(axes, problems):
            plots.time_vs_cores(s[s["problem"] == prob], ax_t, f"{prob}: solve time")
            plots.iteration_split(s[s["problem"] == prob], ax_s, f"{prob}: one iteration")
        fig.suptitle(f"{vm}: BICCG (block IC(0) CG, multicolor), {_source(run)}",
                     fontweight="bold")
        params = run["params"]
        caption = (f"Data: {run_rel} ({run['status']}); median of {int(s['n'].max())} runs, "
                   f"bars min-max; {_solver_options(loaded.table, run, params)}, "
                   f"{params.get('biccg_colors')} colors, tol {params.get('biccg_tol')}; "
                   "layouts 'RxT' = R MPI ranks per node x T OpenMP threads; baselines on one "
                   "process. The study's Figures 12-13 give no numbers to mark; its conditions "
                   "are in data/reference/biccg_conditions.csv.")
        section.entries.append(figure_entry(fig, fig_dir, f"biccg_{vm}",
                                             f"BICCG time against parallelism on {vm}", caption,
                                             [run_rel], show))
        med = s.pivot_table(index=["problem", "label", "impl", "nodes", "ranks", "threads",
                                   "cores"], columns="metric", values="median").reset_index()
        lo = s[s["metric"] == "solve_time"].set_index(["problem", "label", "nodes"])
        for r in med.to_dict("records"):
            one = lo.loc[(r["problem"], r["label"], r["nodes"])]
            rows.append({"vm": vm, "problem": r["problem"], "solver": r["label"],
                         "nodes": r["nodes"], "ranks": r["ranks"], "threads": r["threads"],
                         "cores": r["cores"], "iterations": _whole(r.get("iterations")),
                         "solve_s": round(r["solve_time"], 4),
                         "solve_min_s": round(float(one["min"]), 4),
                         "solve_max_s": round(float(one["max"]), 4),
                         "setup_s": round(r.get("setup_time", math.nan), 4),
                         **{f"{k}_ms_per_it": round(1e3 * r.get(f"per_iteration_{k}", math.nan),
                                                    3) for k in biccg.SPLIT},
                         "peak_rss_gb": round(r.get("peak_rss", math.nan) / 1e9, 3),
                         "data": run_rel})
    table_entry(
        section, rows, fig_dir, "biccg_summary", "BICCG per problem, solver and layout",
        "Medians over repetitions: iterations to a relative residual of tol, solve and setup "
        "times, the time of one iteration split into SpMV, preconditioner, dot products (with "
        "their Allreduce), halo exchange and vector updates, and the peak memory of the largest "
        "rank. Newest run of each VM under data/runs.")
    return section


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
