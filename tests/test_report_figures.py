"""Figures and tables a reader can trust at a glance (issue 11, item 5): bars that start at
zero or dots on a log axis, plain tick labels, dodged error bars, a ping-pong figure that fits
a screen, one number format per table column with its unit in the header.

Drawn from small synthetic frames or the committed data/runs, written only under tmp_path."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from conftest import newer_run, report_root, reseal
from matplotlib.patches import Rectangle

from burstbench.benchmarks import biccg, pingpong, triad
from burstbench.benchmarks.biccg.report import time_vs_cores
from burstbench.benchmarks.triad.report import _overview
from burstbench.report import cost as costreport
from burstbench.report import sections, style, tables

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """The committed runs (conftest.report_root): a run of the user's own, measured or
    drawn since, changes nothing these tests look at."""
    return report_root(tmp_path_factory.mktemp("committed"), committed=True) / "data" / "runs"


def _capture(monkeypatch, module) -> dict:
    """Keep every figure `module` saves (by stem), still saving it as before."""
    figures: dict = {}
    original = sections.figure_entry

    def keep(fig, fig_dir, stem, *args, **kwargs):
        fig.canvas.draw()  # tick labels exist only once drawn
        figures[stem] = fig
        return original(fig, fig_dir, stem, *args, **kwargs)

    monkeypatch.setattr(module, "figure_entry", keep)
    return figures


def _cells(md: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in md.splitlines()]


def _decimals(cell: str) -> int:
    return len(cell.split(".")[1]) if "." in cell else 0


# --- tables ---------------------------------------------------------------------------------

def test_markdown_table_gives_one_number_format_per_column():
    # the case: 2088 | 2109 | 2.14e+03 in one column, a price printed 2.13e+03
    df = pd.DataFrame({"expected_cost_jpy": [2088.0, 2109.0, 2141.3, 20880.0],
                       "jpy_per_node_hour": [522.0, 52.2, 2130.1, 31.0],
                       "solve_s": [3.4304, 0.1676, 12.5, float("nan")],
                       "threads": [2, 24, 16, None],
                       "label": ["a", "b|c", "d", "e"]})
    rows = _cells(tables.markdown_table(df))
    body = rows[2:]
    for j, col in enumerate(df.columns[:4]):
        cells = [r[j] for r in body if r[j]]
        assert not any("e+" in c or "e-" in c for c in cells), (col, cells)
        assert len({_decimals(c) for c in cells}) == 1, (col, cells)  # one format
        big = [c for c, v in zip(cells, df[col].dropna()) if abs(v) >= 1000]
        assert all("," in c for c in big), (col, cells)  # thousands separated
    assert [r[0] for r in body] == ["2,088", "2,109", "2,141", "20,880"]
    assert [r[3] for r in body] == ["2", "24", "16", ""]  # whole numbers stay whole
    assert body[1][4] == "b\\|c"


def test_storage_units_read_as_units_not_seconds():
    assert tables.column_header("write_mib_s") == "write (MiB/s)"
    assert tables.column_header("solve_min_s") == "solve min (s)"


def test_markdown_headers_carry_units_and_numbers_align_right():
    df = pd.DataFrame({"vm": ["x"], "jpy_per_node_hour": [522.0], "solve_min_s": [0.5],
                       "best_median_gbs": [40.1], "spmv_ms_per_it": [9.1],
                       "payg East US (JPY/h)": [522.0]})
    head, sep = tables.markdown_table(df).splitlines()[:2]
    assert _cells(head)[0] == ["vm", "price (JPY/node-h)", "solve min (s)", "best median (GB/s)",
                               "spmv (ms per iteration)", "payg East US (JPY/h)"]
    assert sep == "|---|---:|---:|---:|---:|---:|"


def test_report_csvs_keep_their_column_names_and_write_whole_numbers_whole(tmp_path, runs):
    triad.report_section(runs, figures_dir=tmp_path)
    pingpong.report_section(runs, figures_dir=tmp_path)
    best = pd.read_csv(tmp_path / "triad_best.csv")
    assert {"vm", "source", "threads", "best_median_gbs", "theoretical_gbs"} <= set(best.columns)
    text = (tmp_path / "triad_best.csv").read_text()
    at = text.splitlines()[0].split(",").index("threads")
    threads = [line.split(",")[at] for line in text.splitlines()[1:]]
    assert threads and all(re.fullmatch(r"\d*", t) for t in threads), threads  # no '24.0'
    pp = (tmp_path / "pingpong_extremes.csv").read_text().splitlines()
    col = pp[0].split(",").index("at_size_bytes")
    assert all(re.fullmatch(r"\d*", line.split(",")[col]) for line in pp[1:])
    md = (tmp_path / "triad_best.md").read_text()
    assert "best median (GB/s)" in md and "e+0" not in md


# --- cost_triad -----------------------------------------------------------------------------

def _bars(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() > 0]


def _honest_lengths(ax) -> bool:
    """Bars start at zero on a linear axis, or there are no bars on a log axis."""
    if ax.get_xscale() == "log":
        return not _bars(ax)
    return ax.get_xlim()[0] == 0


def test_cost_triad_draws_no_bar_lengths_from_an_arbitrary_edge(monkeypatch, tmp_path, runs):
    figs = _capture(monkeypatch, costreport)
    costreport.cost_report(runs, figures_dir=tmp_path)
    (ax,) = figs["cost_triad"].axes
    assert _honest_lengths(ax)
    drawn = pd.read_csv(tmp_path / "cost_triad.csv")
    drawn = drawn[(drawn["region"].isin(["East US", "on-premise"]))
                  & drawn["gbs_per_1000_jpy_h"].notna()]
    labels = {t.get_text() for t in ax.texts}
    for v in drawn["gbs_per_1000_jpy_h"]:  # every value drawn is written beside its mark
        assert style.plain_number(v) in labels, v
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    # the local VMs have no price: nothing measured here is drawn, so none is promised
    assert not any("measured here" in t for t in legend + [ax.get_title()])
    assert "blue" not in ax.get_title()
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ticks and not any("^" in t or "times" in t for t in ticks), ticks


def test_cost_performance_legend_names_only_what_is_drawn():
    rows = [{"system": "A", "bandwidth": "the study", "billing": "payg", "region": "East US",
             "gbs_per_1000_jpy_h": 450.0},
            {"system": "A", "bandwidth": "the study", "billing": "spot", "region": "East US",
             "gbs_per_1000_jpy_h": 4500.0},
            {"system": "B", "bandwidth": "measured here", "billing": "payg", "region": "(run)",
             "gbs_per_1000_jpy_h": 1200.0}]
    fig, ax = plt.subplots()
    costreport.cost_performance(rows, ax)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(legend) == 3 and any("measured here" in t for t in legend)
    assert not any("Flow" in t or "node-hour fee" in t for t in legend)
    assert _honest_lengths(ax)
    assert {t.get_text() for t in ax.texts} == {"450", "4,500", "1,200"}
    plt.close(fig)


# --- BICCG ----------------------------------------------------------------------------------

def _biccg_stats() -> pd.DataFrame:
    rows = []
    for label, impl, cores, med in (("1x1", "c", 1, 3.4), ("1x2", "c", 2, 2.8),
                                    ("2x1", "c", 2, 3.3), ("1x4", "c", 4, 1.6),
                                    ("scipy-cg", "scipy", 1, 6.1)):
        rows.append({"metric": "solve_time", "label": label, "impl": impl, "cores": cores,
                     "median": med, "min": med * 0.9, "max": med * 1.1})
    return pd.DataFrame(rows)


def test_biccg_ticks_are_plain_numbers_at_the_core_counts():
    fig, ax = plt.subplots()
    time_vs_cores(_biccg_stats(), ax, "t")
    fig.canvas.draw()
    xt = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    yt = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert xt == ["1", "2", "4"]
    assert len(yt) >= 2
    for t in xt + yt:
        assert not re.search(r"\^|\\times|\$|x10", t), t
        float(t.replace(",", ""))  # a plain decimal
    plt.close(fig)


@pytest.mark.parametrize("lo,hi", [(1.544, 1.566), (3.776, 3.80), (78.46, 79.21),
                                   (0.00629, 0.00668), (1990.0, 2010.0)])
def test_a_narrow_log_axis_writes_each_tick_apart(lo, hi):
    """Solves whose repetitions differ by a percent or two (figures/biccg_local.png's 128^3
    panel, 1.544-1.566 s, once read '1.56, 1.56'): every tick label is distinct and is the
    tick's own value, written plain."""
    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.plot([0, 1], [lo, hi])
    style.plain_log_axis(ax.yaxis, lo, hi)
    fig.canvas.draw()
    ticks = [(t.get_position()[1], t.get_text()) for t in ax.get_yticklabels()
             if t.get_text() and lo * 0.9 <= t.get_position()[1] <= hi * 1.1]
    assert len(ticks) >= 2, ticks
    assert len({text for _, text in ticks}) == len(ticks), ticks
    for v, text in ticks:
        assert not re.search(r"\^|\\times|\$|e[-+]", text), text
        assert float(text.replace(",", "")) == pytest.approx(v, rel=1e-9), (v, text)
    plt.close(fig)


def test_biccg_layouts_at_one_core_count_are_dodged_evenly_in_log_space():
    fig, ax = plt.subplots()
    time_vs_cores(_biccg_stats(), ax)
    xs = {}
    for bars in ax.containers:  # one ErrorbarContainer per series, its data line first
        if bars.get_label() in ("1x2", "2x1", "1x4"):
            xs[bars.get_label()] = list(bars.lines[0].get_xdata())
    assert xs["1x2"][0] != xs["2x1"][0]
    assert xs["1x2"][0] * xs["2x1"][0] == pytest.approx(4.0)  # symmetric about 2 in log
    assert 1.8 < xs["1x2"][0] < 2 < xs["2x1"][0] < 2.2
    assert xs["1x4"] == [4]  # alone at its core count: not moved
    plt.close(fig)


# --- ping-pong, overview, style ------------------------------------------------------------

def test_pingpong_figure_fits_a_laptop_screen(tmp_path, runs):
    pingpong.report_section(runs, figures_dir=tmp_path)
    for png in tmp_path.glob("pingpong_*.png"):
        height, width = plt.imread(png).shape[:2]
        # at 150 dpi: 8 in for one panel (a partial sweep's), 12 in for three
        assert 1200 <= width <= 2100 and height <= 1100, (png.name, width, height)


def test_first_figure_of_a_fresh_process_has_the_shared_style(monkeypatch, tmp_path, runs):
    """The report functions run first in a fresh notebook: the style must be in place
    before their first figure is made, not after."""
    figs = _capture(monkeypatch, sections)
    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        biccg.report_section(runs, figures_dir=tmp_path)
    ax = next(iter(figs.values())).axes[0]
    assert any(g.get_visible() for g in ax.get_ygridlines())


def test_overview_bars_start_at_zero_and_its_legend_names_only_what_is_drawn(monkeypatch,
                                                                            tmp_path):
    figs = _capture(monkeypatch, sections)
    table = pd.DataFrame([
        {"vm": "HC44rs", "source": "the study", "label": "icc", "threads": 32,
         "best_median_gbs": 203.0, "theoretical_gbs": 256.0, "data": "ref"},
        {"vm": "D96s_v5", "source": "the study", "label": "icc", "threads": 48,
         "best_median_gbs": 310.4, "theoretical_gbs": 409.6, "data": "ref"}])
    _overview(table, tmp_path, False)
    (ax,) = figs["triad_overview"].axes
    assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert not any("measured here" in t for t in legend)
    assert "blue" not in ax.get_title()
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("310.4 GB/s") for t in texts)


def test_an_incomplete_sweep_is_never_drawn_as_a_vms_best_without_saying_so(monkeypatch,
                                                                           tmp_path, runs):
    """A committed run of the lent machine whose Triad stopped at its budget (6 of 18
    configurations) and whose ping-pong completed, as the VM's newest: its rows of the
    best-per-VM tables carry that state (run_state), and the overview names it an
    incomplete sweep; the complete local run is not marked, nor that complete ping-pong.
    (The run is picked by its id, so that a newer lease's run changes nothing here.)"""
    import shutil

    lent = "20261128T162614Z-h200"
    chosen = tmp_path / "runs"
    shutil.copytree(runs / "local", chosen / "local")
    shutil.copytree(runs / "lent-h100-16c" / lent, chosen / "lent-h100-16c" / lent)
    figs = _capture(monkeypatch, sections)
    triad.report_section(chosen, figures_dir=tmp_path)
    pingpong.report_section(chosen, figures_dir=tmp_path)
    best = pd.read_csv(tmp_path / "triad_best.csv")
    states = best.dropna(subset=["run_state"]).groupby("vm")["run_state"].agg(set)
    assert states["local"] == {"complete"}
    assert states["lent-h100-16c"] == {"incomplete: stopped at budget, 6 of 18 "
                                       "configurations stored"}
    assert best.loc[best["source"] == "the study", "run_state"].isna().all()
    ticks = [t.get_text() for t in figs["triad_overview"].axes[0].get_yticklabels()]
    assert any(t.startswith("lent-h100-16c (measured here; incomplete sweep)\n") for t in ticks)
    assert any(t.startswith("local (measured here)\n") for t in ticks)
    assert set(pd.read_csv(tmp_path / "pingpong_extremes.csv")["run_state"].dropna()) == \
        {"complete"}


def test_a_newer_run_without_gfarm_does_not_hide_a_vms_replication(tmp_path, runs):
    """A plain make report has no Gfarm: its newer storage run measured no gfrep.  The
    storage figure and summary draw that newer run; the replication table still draws the
    committed run that replicated (the table used to go away)."""
    import shutil

    from burstbench.benchmarks import storage

    local = tmp_path / "runs" / "local"
    shutil.copytree(runs / "local", local)
    old, new = newer_run(local, "storage")
    table = pd.read_csv(new / "storage.csv", dtype={"run_id": str})
    assert (table["access"] == "replication").any()
    table[table["access"] != "replication"].to_csv(new / "storage.csv", index=False)
    reseal(new, "storage")
    storage.report_section(local.parent, figures_dir=tmp_path)
    summary = pd.read_csv(tmp_path / "storage_summary.csv")
    drawn = summary[summary["vm"] == "local"]
    assert len(drawn) and drawn["data"].str.endswith(f"/local/{new.name}").all()
    assert set(drawn["run_state"]) == {"complete"}
    rep = pd.read_csv(tmp_path / "storage_replication.csv")
    ours = rep[rep["source"] != "Gfarm on Azure (slides)"]
    assert list(ours["vm"]) == ["local"] and ours["data"].iloc[0].endswith(f"/local/{old}")
    assert list(ours["run_state"]) == ["complete"]


def test_a_series_figure_from_the_reference_is_drawn_for_its_vms_only(tmp_path, runs):
    """Azure's HBv3 Triad (data/reference/triad_best.csv, applies_to HB120) marks the
    HB120 VMs' figures and no other: the value and its wording come from the CSV."""
    import json
    import shutil

    ref = pd.read_csv(ROOT / "data" / "reference" / "triad_best.csv")
    azure = ref[ref["applies_to"].fillna("") != ""].iloc[0]
    src = max((p.parent for p in runs.glob("*/*/triad.csv")), key=lambda p: p.name)
    for vm in ("hb120-16rs_v3", "d96s_v5"):
        dst = tmp_path / vm / src.name
        shutil.copytree(src, dst)
        table = pd.read_csv(dst / "triad.csv").assign(vm=vm)
        table.to_csv(dst / "triad.csv", index=False)
        prov = json.loads((dst / "provenance.json").read_text())
        prov["vm"] = vm
        (dst / "provenance.json").write_text(json.dumps(prov))
    section = triad.report_section(tmp_path, figures_dir=tmp_path / "figs")
    captions = {e.title: e.caption for e in section.entries}
    mark = str(azure["note"]).split(";")[0]
    assert mark in captions["STREAM Triad vs threads on hb120-16rs_v3"]
    assert mark not in captions["STREAM Triad vs threads on d96s_v5"]
    svg = (tmp_path / "figs" / "triad_hb120-16rs_v3.svg").read_text()
    assert f"Azure web site, HBv3: {azure['best_triad_gbs']:g} GB/s" in svg


def _svg_text(path: Path) -> list[str]:
    """Every text an SVG figure shows (titles, labels, ticks, legend, caption), in order:
    matplotlib draws text as paths, each after a comment holding the text."""
    return re.findall(r"<!-- (.*?) -->", path.read_text(), re.S)


@pytest.mark.slow
def test_the_committed_figures_rebuild_identically(tmp_path, cli):
    """`make figures` from the data figures/ names gives figures/: the same files, the
    tables, index and manifests byte for byte, and every text of every figure (the pixels
    depend on the matplotlib and FreeType a machine has; the numbers drawn are in the
    tables). A change that alters what a reader sees shows up here; a run of the user's own
    measured since the figures were drawn does not (conftest.report_root)."""
    out = tmp_path / "figures"
    proc = cli("-m", "burstbench", "report", "--figures-dir", str(out),
               env={"BURSTBENCH_ROOT": str(report_root(tmp_path))})
    assert proc.returncode == 0, proc.stderr
    committed = {p.relative_to(ROOT / "figures") for p in (ROOT / "figures").rglob("*")
                 if p.is_file()}
    rebuilt = {p.relative_to(out) for p in out.rglob("*") if p.is_file()}
    assert rebuilt == committed
    texts = [p for p in sorted(committed) if p.suffix in (".csv", ".md", ".json")]
    assert texts and all((out / p).read_bytes() == (ROOT / "figures" / p).read_bytes()
                         for p in texts), [str(p) for p in texts if (out / p).read_bytes()
                                           != (ROOT / "figures" / p).read_bytes()]
    svgs = [p for p in sorted(committed) if p.suffix == ".svg"]
    assert svgs and all(_svg_text(ROOT / "figures" / p) for p in svgs)  # texts are found
    assert all(_svg_text(out / p) == _svg_text(ROOT / "figures" / p) for p in svgs), [
        str(p) for p in svgs if _svg_text(out / p) != _svg_text(ROOT / "figures" / p)]


def test_a_figure_the_report_no_longer_makes_is_removed_and_nothing_else(tmp_path):
    """A section saved again without one of its files removes that file (a table renamed or
    dropped does not linger in figures/); a file it never listed, another section's, stays."""
    for name in ("keep.csv", "gone.csv", "gone.md", "mine.txt", "other.csv"):
        (tmp_path / name).write_text(name)
    other = sections.Section("other", [sections.Entry("o", ["other.csv"], "")])
    sections.save_section(other, tmp_path)
    first = sections.Section("cost", [sections.Entry("k", ["keep.csv"], ""),
                                      sections.Entry("g", ["gone.csv", "gone.md"], "")])
    sections.save_section(first, tmp_path)
    assert (tmp_path / "gone.csv").exists()  # listed now: kept
    sections.save_section(sections.Section("cost", [sections.Entry("k", ["keep.csv"], "")]),
                          tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "keep.csv", "manifest-cost.json", "manifest-other.json", "mine.txt", "other.csv"]


def test_a_cache_sized_or_test_triad_says_so_in_its_title():
    """The measurement notebook's figure of a try-out: arrays that fit the last-level cache
    measure the cache (187-200 GB/s drawn as if memory), a test run is a test: both said."""
    from burstbench.benchmarks.triad.report import run_title
    from kernels_ext.common import sysinfo

    llc = sysinfo.last_level_cache_bytes()
    if not llc:
        pytest.skip("this machine reports no last-level cache")
    small = pd.DataFrame({"size": [llc // 64]})  # an eighth of the cache per array
    large = pd.DataFrame({"size": [llc]})  # 8x the cache per array
    title = run_title({"vm": "x", "test": True}, "r1", small)
    assert title.startswith("x: STREAM Triad, run r1\na test run\narrays in cache (")
    assert title.endswith("): cache, not memory bandwidth")
    assert run_title({"vm": "x", "test": False}, "r1", large) == "x: STREAM Triad, run r1"
