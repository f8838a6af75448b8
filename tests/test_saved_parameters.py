"""What an explorer saves in a notebook is theirs alone: `make figures` / `burstbench report`
and `burstbench run` take every parameter of every notebook from the repository (the report's
declarations in burstbench/report/parameters.py, a measurement's params file), never from a
notebook's saved parameters cell, which JupyterLab autosaves and other editors save directly.
Every parameter is checked in one line; try-outs stay out of data/runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import report_root, run_cli
from test_notebooks import _first_difference
from test_params import parameters_cell

from burstbench import params
from burstbench.core.checks import ParamError
from burstbench.report import parameters

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
REPORTS = sorted(p.name for p in NOTEBOOKS.glob("1[0-9][0-9]_report_*.ipynb")) + [
    "200_explore.ipynb", "210_advise.ipynb"]


@pytest.mark.parametrize("notebook", REPORTS)
def test_the_committed_notebooks_hold_the_declared_parameters(notebook):
    """The committed parameters cell is the declared source, name for name and value for
    value, in its order: what JupyterLab shows is what make figures passes."""
    cell = parameters_cell(NOTEBOOKS / notebook)
    assert list(cell) == list(parameters.schema(notebook)), notebook
    assert cell == parameters.defaults(notebook)


def _every_parameter():
    for nb in REPORTS:
        for p in parameters.schema(nb).values():
            yield pytest.param("report", nb, p, id=f"{nb}:{p.name}")
    for section in params.notebooks():
        for p in params.schema(section).values():
            yield pytest.param("measure", section, p, id=f"{section}:{p.name}")


#: A value no parameter takes (a set: no notebook literal, no YAML value reads as one).
WRONG = {1, 2}


@pytest.mark.parametrize("kind,where,param", list(_every_parameter()))
def test_every_parameter_refuses_what_it_does_not_take_in_one_line(kind, where, param):
    """Each parameter of each notebook, given a value it does not take: one line naming the
    parameter, what it got and what it takes ('must be ...'), and its default is taken."""
    check = parameters.validate if kind == "report" else params.validate
    assert check({}, where, where="x")[param.name] is not None or param.default is None
    with pytest.raises(ParamError) as err:
        check({param.name: WRONG}, where, where="x")
    msg = str(err.value)
    assert "\n" not in msg and param.name in msg and repr(WRONG) in msg, msg
    assert " must " in msg or " is a mapping with keys " in msg, msg  # what it takes


@pytest.mark.parametrize("values,message", [
    ({"usd_jpy": "145 yen"}, "usd_jpy must be a positive number (JPY per USD), not '145 yen'"),
    ({"job_hours": "10h"}, "job_hours must be a positive number (hours), not '10h'"),
    ({"job_nodes": -4}, "job_nodes must be an integer of at least 1, not -4"),
    ({"spot_vm": "XYZ"}, "spot_vm must be a VM with a spot price in East US (D32s_v5, D96s_v5, "
     "HB120-16rs_v3, HB120rs_v3, HC44rs, NC24ads_A100_v4, NC24s_v3, NC6s_v3, NC96ads_A100_v4), "
     "not 'XYZ'"),
    ({"region": "Japan"}, "region must be one of the priced regions (East US, Japan East; "
     "data/reference/prices_vm.csv), not 'Japan' (did you mean Japan East?)"),
    ({"qeue_wait_h": 4}, "unknown parameter 'qeue_wait_h' (did you mean queue_wait_h?)"),
    ({"user_job": {"name": "m", "problem": {"poison": [8, 8, 8]}}}, "user_job's problem: "
     "unknown key 'poison' (did you mean poisson? the keys are: poisson, n, nnz, iterations)"),
    ({"wan_mib_s": [60, 30]}, "wan_mib_s must be a number of 0 or more (MiB/s), [low, high] "
     "or [low, mode, high]; 0: each region's published bounds (data/reference/"
     "wan_paths.csv, gfarm_azure_gfrep.csv), low <= mode <= high, not [60, 30]")])
def test_the_cost_notebooks_stumbles_are_one_line(values, message):
    """The values the issue typed into 190, each refused by name in one line."""
    namespace = parameters.defaults("190_report_cost.ipynb") | values
    with pytest.raises(ParamError) as err:
        parameters.from_namespace(namespace, "190_report_cost.ipynb")
    assert str(err.value) == f"notebook 190_report_cost.ipynb: {message}"


def test_a_job_with_no_output_and_a_priced_region_are_taken():
    got = parameters.from_namespace(parameters.defaults("190_report_cost.ipynb") | {
        "region": "Japan East", "user_job": {"name": "m", "problem": {"poisson": [8, 8, 8]},
                                             "output_gb": 0}}, "190_report_cost.ipynb")
    assert got["region"] == "Japan East" and got["user_job"]["output_gb"] == 0


# -- an explorer's saved cells, as an editor leaves them ----------------------------------

#: Lines added at the end of each parameters cell: values of their own (autosaved) and a
#: half-typed line that no longer parses.
EDITS = {
    "190_report_cost.ipynb": ["queue_wait_h = 4", 'region = "Japan East"',
                              'user_job = {"name": "mine", "problem": {"poison": [8, 8, 8]}}'],
    "010_measure_triad.ipynb": ["test = True", 'vm = "edited"', "triad_threads = [7]",
                                "triad_nitmes = 3"],
}
HALF_TYPED = "usd_jpy = (145"


def edit_saved_cells(notebooks: Path) -> list[str]:
    """Append EDITS (and HALF_TYPED) to every notebook's parameters cell in `notebooks`, as
    an editor saves it (the file itself, no hook of ours); the names edited."""
    edited = []
    for nb in sorted(notebooks.glob("*.ipynb")):
        doc = json.loads(nb.read_text())
        cell = next(c for c in doc["cells"] if "parameters" in c["metadata"].get("tags", []))
        source = "".join(cell["source"]).rstrip("\n")
        cell["source"] = source + "\n" + "\n".join(EDITS.get(nb.name, []) + [HALF_TYPED]) + "\n"
        nb.write_text(json.dumps(doc, indent=1) + "\n")
        edited.append(nb.name)
    return edited


@pytest.mark.slow
def test_saved_parameters_never_change_make_figures(tmp_path):
    """Every notebook's parameters cell edited on disk (a user's job, a wait, a region, a
    typo'd key, a half-typed line): `burstbench report` (make figures) builds the same files,
    byte for byte, as from the notebooks as committed, and nothing fails."""
    built = {}
    for name in ("committed", "edited"):
        root = report_root(tmp_path / name)
        if name == "edited":
            assert len(edit_saved_cells(root / "notebooks")) == len(list(NOTEBOOKS.glob("*.ipynb")))
        proc = run_cli("-m", "burstbench", "report", env={"BURSTBENCH_ROOT": str(root)})
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        built[name] = root / "figures"
    assert len(list(built["edited"].glob("*.png"))) >= 5
    assert _first_difference(built["committed"], built["edited"]) is None, \
        _first_difference(built["committed"], built["edited"])


#: A Triad sweep of seconds (smoke.yaml's sizes), with none of what EDITS sets.
TINY = ("vm: tiny\nonly: [triad]\ntriad_size: 200000\ntriad_ntimes: 2\ntriad_threads: [1]\n"
        "triad_places: [cores]\ntriad_bind: [close]\ntriad_variants: [{compiler: gcc, flags: "
        "-O2 -fopenmp}]\ntriad_baselines: []\ntriad_repetitions: 1\ntriad_timeout_s: 120\n")


def _project(tmp_path: Path) -> Path:
    """A copy of the project's notebooks and params files for $BURSTBENCH_ROOT."""
    import shutil

    root = tmp_path / "project"
    for d in ("notebooks", "papermill_params"):
        shutil.copytree(ROOT / d, root / d)
    return root


def _left_locks(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.name.endswith(".mutex") or p.name == "writer.lock")


@pytest.mark.slow
def test_saved_parameters_never_change_a_run(tmp_path):
    """010 saved with `test = True`, another VM, other threads, a typo'd key and a half-typed
    line: `burstbench run` measures what the params file says (not a test, its VM, its
    threads), with the fingerprint of that file; the issue's saved `test = True` failed the
    run ("measured triad with other parameters ... choose a new run_id")."""
    root = _project(tmp_path)
    edit_saved_cells(root / "notebooks")
    (root / "tiny.yaml").write_text(TINY)
    runs = tmp_path / "runs"
    proc = run_cli("-m", "burstbench", "run", "--params", str(root / "tiny.yaml"),
                   "--runs-dir", str(runs), "--quiet", env={"BURSTBENCH_ROOT": str(root)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run,) = (runs / "tiny").iterdir()
    section = json.loads((run / "provenance.json").read_text())["benchmarks"]["triad"]
    values = params.load_file(root / "tiny.yaml")
    assert section["status"] == "complete"
    assert section["params"]["test"] is False and section["params"]["triad_threads"] == [1]
    assert section["params_digest"] == params.digest(params.validate(values, "triad"), "triad")
    executed = json.loads((run / "010_measure_triad.ipynb").read_text())["cells"]
    shown = "".join(next(c for c in executed if "parameters" in c["metadata"].get("tags", []))
                    ["source"])
    assert HALF_TYPED not in shown and "test = False" in shown  # the committed cell ran
    assert _left_locks(runs) == []


@pytest.mark.slow
def test_a_try_out_stays_out_of_data_runs(tmp_path):
    """A measurement notebook run by hand (papermill, runs_dir left empty) and a test run of
    `burstbench run` (test: true, no runs_dir) both go under build/runs/, say so, and leave
    no lock or mutex file behind; data/runs is never made."""
    root = _project(tmp_path)
    env = os.environ | {"BURSTBENCH_ROOT": str(root)}
    tiny = {k: v for k, v in params.loads(TINY).items() if k != "only"}
    out = tmp_path / "by-hand.ipynb"
    proc = run_cli("-m", "papermill", str(root / "notebooks" / "010_measure_triad.ipynb"),
                   str(out), "-k", "python3", "--cwd", str(root / "notebooks"), "-y",
                   json.dumps(tiny), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = json.dumps(json.loads(out.read_text())["cells"])
    assert f"a try-out: writing under {root / 'build' / 'runs'} (ignored by git)" in said
    assert len(list((root / "build" / "runs" / "tiny").iterdir())) == 1
    (root / "test.yaml").write_text(TINY.replace("vm: tiny", "vm: tried") + "test: true\n")
    proc = run_cli("-m", "burstbench", "run", "--params", str(root / "test.yaml"), "--quiet",
                   env={"BURSTBENCH_ROOT": str(root)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (f"a test run (test: true in {root / 'test.yaml'}): writing under "
            f"{root / 'build' / 'runs'} (ignored by git), not data/runs") in proc.stderr
    assert len(list((root / "build" / "runs" / "tried").iterdir())) == 1
    assert not (root / "data").exists()
    assert _left_locks(root) == []
