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
from dataclasses import asdict, dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from burstbench import biccg, paths, pingpong, plots, store, triad

AZURE_HBV3_GBS = 358.0  # Azure's published HBv3 Triad, N = 4e8 (data/reference/triad_best.csv)


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


def vm_key(name: str) -> str:
    """Case- and punctuation-free VM name, so 'HB120rs_v3' matches 'hb120rs-v3'."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def read_reference(ref_dir: Path, name: str, required: list[str],
                   problems: list[str]) -> pd.DataFrame:
    """A reference CSV, or an empty frame and a problem naming what is wrong with it."""
    path = Path(ref_dir) / name
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: unreadable reference table ({str(exc).splitlines()[0]})")
        return pd.DataFrame(columns=required)
    missing = [c for c in required if c not in df.columns]
    if missing:
        problems.append(f"{path}: missing column(s) {', '.join(missing)}")
        return pd.DataFrame(columns=required)
    return df


def markdown_table(df: pd.DataFrame, floatfmt: str = ".3g") -> str:
    """A GitHub Markdown table (no extra dependency)."""
    def fmt(v: object) -> str:
        if isinstance(v, float):
            if math.isnan(v):
                return ""
            return str(int(v)) if v.is_integer() and abs(v) >= 1000 else format(v, floatfmt)
        return "" if v is None or v is pd.NA else str(v).replace("|", "\\|")

    head = "| " + " | ".join(df.columns) + " |"
    sep = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *body]) + "\n"


def _write_table(df: pd.DataFrame, stem: Path) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv, md = stem.with_suffix(".csv"), stem.with_suffix(".md")
    store.atomic_write(csv, df.to_csv(index=False))
    store.atomic_write(md, markdown_table(df))
    return [csv, md]


def _table_entry(section: Section, rows: list[dict], fig_dir: Path, stem: str, title: str,
                 caption: str) -> pd.DataFrame:
    """Write `rows` as <stem>.csv and .md and list them in the section; return the table."""
    table = pd.DataFrame(rows)
    if not table.empty:
        files = _write_table(table, fig_dir / stem)
        section.entries.append(Entry(title, [_rel(f, fig_dir) for f in files], caption,
                                     sorted({str(r.get("data", "")) for r in rows})))
    return table


def _figure_entry(fig: plt.Figure, fig_dir: Path, stem: str, title: str, caption: str,
                  runs: list[str], show: bool, legend_right: float = 1.0) -> Entry:
    """Save a figure (PNG + SVG, captioned), show it in a notebook if asked, close it."""
    files = plots.save(fig, fig_dir / stem, caption, legend_right)
    if show:
        plt.show()
    plt.close(fig)
    return Entry(title, [_rel(f, fig_dir) for f in files], caption, runs)


def _rel(p: Path, root: Path) -> str:
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


def _latest_runs(loaded: store.Loaded) -> dict[str, dict]:
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
    for vm, run in _latest_runs(loaded).items():
        s = stats[(stats["vm"] == vm) & (stats["run_id"] == run["run_id"])]
        if not s.empty:
            yield vm, run, s, _rel(Path(run["path"]), root)


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
    best_rows = []
    for vm, run, s, run_rel in _each_vm(stats, loaded, root):
        peak, peak_src = _peak_for(vm, run["params"], peaks)
        fig, ax = plt.subplots(figsize=(10, 5.5))
        plots.bandwidth_vs_threads(s, ax, title=f"{vm}: STREAM Triad bandwidth vs threads "
                                                f"({_source(run)})")
        marks = []
        ref = best_ref[best_ref["vm"].map(vm_key) == vm_key(vm)]
        for r in ref.itertuples():
            plots.reference_line(ax, r.best_triad_gbs, f"study best {r.best_triad_gbs:g} GB/s "
                                 f"({r.label}, {r.threads:g} threads)", "--", "0.2", r.threads)
            marks.append("the study's best (data/reference/triad_best.csv)")
        if vm_key(vm).startswith("hb120"):
            plots.reference_line(ax, AZURE_HBV3_GBS, f"Azure web site, HBv3: "
                                 f"{AZURE_HBV3_GBS:g} GB/s", "-.", "0.45")
            marks.append("Azure's published HBv3 figure")
        if not math.isnan(peak):
            plots.reference_line(ax, peak, f"theoretical {peak:g} GB/s", ":", "0.6")
            marks.append(f"theoretical bandwidth ({peak_src})")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        sizes = loaded.table.loc[loaded.table["run_id"] == run["run_id"], "size"].dropna()
        size = f"{int(sizes.iloc[0]):,}" if len(sizes) else "?"
        caption = (f"Data: {run_rel} ({run['status']}); median of "
                   f"{int(s['n'].max())} fresh processes per point, bars min-max; "
                   f"N = {size} doubles per array, "
                   f"NTIMES = {run['params'].get('triad_ntimes', '?')}. "
                   + (f"Reference marks: {'; '.join(marks)}." if marks else
                      "No reference figure is known for this VM."))
        section.entries.append(_figure_entry(fig, fig_dir, f"triad_{vm}",
                                             f"STREAM Triad vs threads on {vm}", caption,
                                             [run_rel], show))
        for label, d in s.groupby("label"):
            top = d.loc[d["median_gbs"].idxmax()]
            best_rows.append({
                "vm": vm, "source": _source(run), "label": label, "impl": top["impl"],
                "threads": int(top["threads"]), "best_median_gbs": round(top["median_gbs"], 2),
                "min_gbs": round(top["min_gbs"], 2), "max_gbs": round(top["max_gbs"], 2),
                "cv": top["cv"], "repetitions": int(top["n"]),
                "theoretical_gbs": peak,
                "fraction_of_theoretical": round(top["median_gbs"] / peak, 3)
                if not math.isnan(peak) else math.nan,
                "data": run_rel})
    for r in best_ref.itertuples():
        peak, _ = _peak_for(r.vm, {}, peaks)
        best_rows.append({
            "vm": r.vm,
            "source": "the study" if str(r.source).startswith("study")
            else str(r.source).split(" (")[0],
            "label": r.label if isinstance(r.label, str) else "", "impl": "",
            "threads": r.threads, "best_median_gbs": r.best_triad_gbs, "min_gbs": math.nan,
            "max_gbs": math.nan, "cv": math.nan, "repetitions": math.nan,
            "theoretical_gbs": peak,
            "fraction_of_theoretical": round(r.best_triad_gbs / peak, 3)
            if not math.isnan(peak) else math.nan,
            "data": "data/reference/triad_best.csv"})
    table = _table_entry(
        section, best_rows, fig_dir, "triad_best", "Best Triad bandwidth per VM and configuration",
        "Best median Triad bandwidth over thread counts, per VM and configuration, with its "
        "spread and its fraction of the theoretical memory bandwidth where known. Rows "
        "'measured here' come from the newest run of each VM under data/runs; rows 'the study' "
        "from data/reference/triad_best.csv.")
    if not table.empty:
        section.entries.append(_overview(table, fig_dir, show))
    return section


def _overview(table: pd.DataFrame, fig_dir: Path, show: bool) -> Entry:
    """Best Triad per VM: ours beside the study's, theoretical bandwidth marked."""
    best = (table.sort_values("best_median_gbs", ascending=False)
                 .groupby(["vm", "source"], sort=False).head(1)
                 .assign(ours=lambda d: d["source"] == "measured here")
                 .sort_values(["ours", "best_median_gbs"]))
    plots.apply_style()
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(best) + 2.0))
    names = [f"{r.vm} ({r.source})" for r in best.itertuples()]
    colors = ["#0072B2" if r.source == "measured here" else "#999999" for r in best.itertuples()]
    ax.barh(names, best["best_median_gbs"], color=colors)
    for i, r in enumerate(best.itertuples()):
        what = ", ".join(x for x in (r.label, "" if pd.isna(r.threads) else f"{r.threads:g} threads")
                         if x)
        peak = r.theoretical_gbs
        if not math.isnan(peak):
            ax.plot([peak], [i], marker="|", ms=14, color="k")
        ax.text(max(r.best_median_gbs, 0 if math.isnan(peak) else peak), i,
                f"  {r.best_median_gbs:.1f}" + (f" ({what})" if what else ""),
                va="center", fontsize=7)
    ax.set_xlabel("best Triad bandwidth (GB/s); | = theoretical memory bandwidth")
    ax.set_xlim(0, max(best["best_median_gbs"].max(), best["theoretical_gbs"].max(skipna=True)
                       if best["theoretical_gbs"].notna().any() else 0) * 1.75)
    ax.set_title("STREAM Triad, best per VM: measured here (blue), published (grey)")
    caption = ("Data: figures/triad_best.csv (newest run of each VM under data/runs; the "
               "study's section 3.1 values from data/reference/triad_best.csv); theoretical "
               "bandwidth from data/reference/vm_memory_bandwidth.csv or the run's parameters.")
    return _figure_entry(fig, fig_dir, "triad_overview",
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
        fig, axes = plt.subplots(1, len(tests), figsize=(5.2 * len(tests) + 2.5, 5),
                                 squeeze=False)
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
        fig.legend(handles, labels, loc="center left", bbox_to_anchor=(0.8, 0.5), fontsize=7)
        fig.suptitle(f"{vm}: MPI ping-pong, two ranks ({_source(run)})", fontweight="bold")
        params = run["params"]
        caption = (f"Data: {run_rel} ({run['status']}); median of "
                   f"{int(s['n'].max())} mpiexec runs per point, bars min-max; OSU 7.x methods "
                   f"(iterations {params.get('pingpong_iterations') or 'as OSU'}), "
                   "solid: C kernel, dashed: the same loop in mpi4py. "
                   + (f"Reference marks: {', '.join(dict.fromkeys(marks))} "
                      "(data/reference/osu.csv)." if marks else
                      "No reference figure is known for this VM."))
        section.entries.append(_figure_entry(
            fig, fig_dir, f"pingpong_{vm}", f"MPI latency and bandwidth vs message size on {vm}",
            caption, [run_rel], show, legend_right=0.8))
        for row in pingpong.extremes(s).to_dict("records"):
            rows.append({"vm": vm, "source": _source(run)} | row | {"data": run_rel})
    for x in ref.itertuples():
        base = {"vm": x.vm, "source": "the study", "label": "", "impl": "",
                "combination": f"{x.combinations:g} combinations" if pd.notna(
                    getattr(x, "combinations", float("nan"))) else "", "placement": "inter-node",
                "at_size_bytes": math.nan, "min": math.nan, "max": math.nan,
                "repetitions": math.nan, "data": "data/reference/osu.csv"}
        rows.append(base | {"test": "latency", "value": x.latency_min_us, "unit": "us",
                            "note": f"range {x.latency_min_us:g}-{x.latency_max_us:g} us"})
        rows.append(base | {"test": "bw", "value": x.bandwidth_max_gbs, "unit": "GB/s",
                            "note": "maximum"})
    _table_entry(
        section, [{k: v for k, v in r.items() if k != "run_id"} for r in rows], fig_dir,
        "pingpong_extremes",
        "Minimum latency and maximum bandwidth per VM, combination and placement",
        "Per VM, combination (compiler + MPI library), placement and test: the smallest median "
        "latency and the largest median bandwidth over message sizes, with the size where it "
        "occurs. 'measured here' rows: the newest run of each VM under data/runs; 'the study' "
        "rows: data/reference/osu.csv (its latency range and maximum bandwidth, inter-node).")
    return section


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
        fig, axes = plt.subplots(len(problems), 2, figsize=(13, 4.3 * len(problems)),
                                 squeeze=False)
        for (ax_t, ax_s), prob in zip(axes, problems):
            plots.time_vs_cores(s[s["problem"] == prob], ax_t, f"{prob}: solve time")
            plots.iteration_split(s[s["problem"] == prob], ax_s, f"{prob}: one iteration")
        fig.suptitle(f"{vm}: BICCG (block IC(0) CG, multicolor), {_source(run)}",
                     fontweight="bold")
        params = run["params"]
        caption = (f"Data: {run_rel} ({run['status']}); median of {int(s['n'].max())} runs, "
                   f"bars min-max; block size {params.get('biccg_block_size')}, "
                   f"{params.get('biccg_colors')} colors, tol {params.get('biccg_tol')}; "
                   "layouts 'RxT' = R MPI ranks per node x T OpenMP threads; baselines on one "
                   "process. The study's Figures 12-13 give no numbers to mark; its conditions "
                   "are in data/reference/biccg_conditions.csv.")
        section.entries.append(_figure_entry(fig, fig_dir, f"biccg_{vm}",
                                             f"BICCG time against parallelism on {vm}", caption,
                                             [run_rel], show))
        med = s.pivot_table(index=["problem", "label", "impl", "nodes", "ranks", "threads",
                                   "cores"], columns="metric", values="median").reset_index()
        lo = s[s["metric"] == "solve_time"].set_index(["problem", "label", "nodes"])
        for r in med.to_dict("records"):
            one = lo.loc[(r["problem"], r["label"], r["nodes"])]
            rows.append({"vm": vm, "problem": r["problem"], "solver": r["label"],
                         "nodes": r["nodes"], "ranks": r["ranks"], "threads": r["threads"],
                         "cores": r["cores"], "iterations": r.get("iterations"),
                         "solve_s": round(r["solve_time"], 4),
                         "solve_min_s": round(float(one["min"]), 4),
                         "solve_max_s": round(float(one["max"]), 4),
                         "setup_s": round(r.get("setup_time", math.nan), 4),
                         **{f"{k}_ms_per_it": round(1e3 * r.get(f"per_iteration_{k}", math.nan),
                                                    3) for k in biccg.SPLIT},
                         "peak_rss_gb": round(r.get("peak_rss", math.nan) / 1e9, 3),
                         "data": run_rel})
    _table_entry(
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
    order = {"triad": 0, "pingpong": 1, "biccg": 2, "cost": 3}
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
