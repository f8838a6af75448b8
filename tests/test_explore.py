"""The exploration code behind notebooks/200_explore.ipynb: every run with its provenance,
picking, side-by-side ratios against hand-computed ones, and the study's values."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from burstbench.core import store
from burstbench.report import explore

ROOT = Path(__file__).resolve().parents[1]
LOCAL = sorted((ROOT / "data" / "runs" / "local").iterdir())  # two committed runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A copy of the two committed local runs, the second relabelled as VM 'other'."""
    root = tmp_path_factory.mktemp("explore")
    for i, src in enumerate(LOCAL[:2]):
        vm = "local" if i == 0 else "other"
        dest = root / vm / src.name
        shutil.copytree(src, dest)
        if vm == "other":
            prov = json.loads((dest / "provenance.json").read_text())
            prov["vm"] = "other"
            (dest / "provenance.json").write_text(json.dumps(prov))
            for bench in ("triad", "pingpong", "biccg"):
                t = pd.read_csv(dest / f"{bench}.csv", dtype=str, keep_default_na=False)
                t["vm"] = "other"
                t.to_csv(dest / f"{bench}.csv", index=False)
    return root


def test_every_run_with_its_provenance(runs):
    got = explore.load_runs(runs)
    assert set(got.runs["vm"]) == {"local", "other"}
    assert set(got.runs["benchmark"]) == {"triad", "pingpong", "biccg"}
    row = got.runs.iloc[0]
    assert row["cpu_model"] and row["cores"] >= 1 and len(row["git_commit"]) == 10
    assert row["date"].startswith("20") and row["status"].startswith("complete")
    assert set(explore.PROVENANCE) <= set(got.table.columns)
    tri = got.table[got.table["benchmark"] == "triad"]
    assert tri["compiler"].notna().all() and tri["flags"].str.contains("-O").all()
    assert got.runs.loc[got.runs["benchmark"] == "pingpong", "mpi_library"].str.contains(
        "MPICH").all()
    # one row per measured value, as the runs' own tables hold them
    n = sum(len(pd.read_csv(p)) for p in runs.glob("*/*/*.csv"))
    assert len(got.table) == n


def test_a_damaged_run_is_named_and_the_rest_loads(runs, tmp_path):
    folder = tmp_path / "r"
    shutil.copytree(runs, folder)
    (bad,) = (folder / "other").iterdir()
    (bad / "triad.csv").write_bytes((bad / "triad.csv").read_bytes()[:5000])
    got = explore.load_runs(folder, tmp_path / "missing")
    assert any(bad.name in p and "truncated" in p for p in got.problems)
    assert any("missing: no such folder" in p for p in got.problems)
    st = got.runs.set_index(["vm", "benchmark"])["status"]
    assert st[("other", "triad")].startswith("incomplete: ")
    assert st[("local", "triad")].startswith("complete")
    assert set(got.table["vm"]) == {"local", "other"}


def test_pick_and_its_errors(runs):
    t = explore.load_runs(runs).table
    assert set(explore.pick(t, vms=["other"], benchmarks="biccg")["benchmark"]) == {"biccg"}
    with pytest.raises(ValueError, match=r"no vm 'nope' \(there is: local, other\)"):
        explore.pick(t, vms=["nope"])


def test_compare_against_a_hand_computed_ratio(runs):
    t = explore.load_runs(runs).table
    cmp = explore.compare(t, {"vm": "local"}, {"vm": "other"})
    assert set(cmp["benchmark"]) == {"triad", "pingpong", "biccg"}
    row = cmp[(cmp["benchmark"] == "triad") & (cmp["x"] == 2)].iloc[0]
    sel = (t["benchmark"] == "triad") & (t["function"] == "Triad") & (
        t["metric"] == "best_rate") & (t["label"] == row["config"]) & (t["threads"] == 2)
    a = t[sel & (t["vm"] == "local")]["value"]
    b = t[sel & (t["vm"] == "other")]["value"]
    assert row["ratio"] == pytest.approx(b.median() / a.median(), rel=1e-12)
    assert row["ratio_low"] == pytest.approx(b.min() / a.max(), rel=1e-12)
    assert row["ratio_high"] == pytest.approx(b.max() / a.min(), rel=1e-12)
    assert row["ratio_low"] <= row["ratio"] <= row["ratio_high"]
    solve = cmp[cmp["benchmark"] == "biccg"]
    assert (solve["b_better"] == (solve["ratio"] < 1)).all()  # time: lower is better
    with pytest.raises(ValueError, match="selects no measurement"):
        explore.compare(t, {"vm": "local"}, {"vm": "nope"})
    fig = explore.plot_comparison(cmp)
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 4  # biccg, 2 ping-pong, triad


def test_default_pair():
    two_vms = pd.DataFrame({"vm": ["x", "y"], "run_id": ["r1", "r2"]})
    assert explore.default_pair(two_vms) == ({"vm": "x"}, {"vm": "y"})
    two_runs = pd.DataFrame({"vm": ["x", "x", "y"], "run_id": ["r1", "r3", "r2"]})
    assert explore.default_pair(two_runs) == ({"run_id": "r1"}, {"run_id": "r3"})
    with pytest.raises(ValueError, match="one run only"):
        explore.default_pair(two_vms.iloc[:1])


def test_a_vm_against_the_study(runs):
    t = explore.load_runs(runs).table
    got = explore.against_study(t, "local")
    ref = pd.read_csv(ROOT / "data" / "reference" / "triad_best.csv")
    tri = got[got["quantity"] == "best Triad bandwidth"].set_index("study_vm")
    assert set(tri.index) == set(ref["vm"])
    ours = store.load(runs, "triad").table
    best = (ours[(ours["vm"] == "local") & (ours["function"] == "Triad")
                 & (ours["metric"] == "best_rate")]
            .groupby(["label", "threads"])["value"].median().max())
    hb = ref.set_index("vm").loc["HB120rs_v3", "best_triad_gbs"]
    assert tri.loc["HB120rs_v3", "ratio"] == pytest.approx(best / hb, rel=1e-12)
    lat = got[got["quantity"] == "smallest latency"]
    assert len(lat) == len(pd.read_csv(ROOT / "data" / "reference" / "osu.csv"))
    # measured within one node: shown, never set against the study's inter-node latency
    assert lat["note"].str.startswith("not compared: ours within one node").all()
    assert lat["ratio"].isna().all() and (lat["ours"] > 0).all()


@pytest.mark.slow
def test_the_exploration_notebook_runs(runs, tmp_path, cli):
    out = tmp_path / "explore.ipynb"
    proc = cli("-m", "papermill", str(ROOT / "notebooks" / "200_explore.ipynb"), str(out),
               "-k", "python3", "--cwd", str(ROOT / "notebooks"), "-y",
               json.dumps({"folders": [str(runs)], "a": {"vm": "local"}, "b": {"vm": "other"},
                           "new_vm": "other"}))
    assert proc.returncode == 0, proc.stderr[-2000:]
    nb = json.loads(out.read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    text = json.dumps(outputs)
    assert "a = {'vm': 'local'}, b = {'vm': 'other'}" in text and "HB120rs_v3" in text


def test_only_an_across_nodes_latency_is_set_against_the_studys():
    """The study's latencies are inter-node: a run that measured across nodes is compared by
    that placement alone (its same-socket latency, ten times lower, read as a win)."""
    from burstbench.benchmarks.pingpong.results import against_study

    newest = pd.DataFrame({"placement": ["across-nodes", "same-socket"],
                           "label": ["mpich+across", "mpich+near"]})
    summary = pd.DataFrame({"config": ["mpich+across latency", "mpich+near latency"],
                            "quantity": ["latency", "latency"], "median": [2.0, 0.2],
                            "unit": ["us", "us"]})
    got = pd.DataFrame(against_study(newest, summary, "vm", ROOT / "data" / "reference"))
    study = pd.read_csv(ROOT / "data" / "reference" / "osu.csv")
    assert (got["ours"] == 2.0).all() and (got["note"] == "both inter-node").all()
    assert list(got["ratio"]) == pytest.approx(list(2.0 / study["latency_min_us"]))


def test_the_runs_table_reads_without_scrolling():
    """Notebook 200's first table: one short column per fact (the MPI libraries by name and
    version, not their build banners; CPU as model, sockets x cores; `*` for a dirty tree),
    and ratios at three significant digits, not six decimals."""
    runs = pd.DataFrame([{
        "vm": "local", "run_id": "r1", "benchmark": "pingpong", "status": "complete",
        "verified": True, "test": False, "date": "2026-11-24", "host": "vm",
        "cpu_model": "AMD EPYC", "sockets": 1, "cores": 2, "git_commit": "abc", "git_dirty": True,
        "mpi_library": "MPICH Version: 5.0.2; Open MPI v4.1.4, package: Debian OpenMPI, ident",
        "folder": "/x"}])
    shown = explore.runs_table(runs)
    assert shown.to_dict("records") == [{
        "vm": "local", "run_id": "r1", "benchmark": "pingpong", "status": "complete",
        "test": False, "date": "2026-11-24", "cpu": "AMD EPYC (1 x 2 cores)",
        "mpi": "MPICH 5.0.2; Open MPI v4.1.4", "commit": "abc*"}]
    got = explore.rounded(pd.DataFrame({"ratio": [0.0612345, 12345.678, float("nan"), 0.0],
                                        "n": [1, 2, 3, 4]}))
    assert got["ratio"].tolist()[:2] == [0.0612, 12300.0] and got["n"].tolist() == [1, 2, 3, 4]
