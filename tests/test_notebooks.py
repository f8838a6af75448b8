"""The notebooks through papermill, the burstbench CLI, and the report built from data."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import printed_ratio_fits

from burstbench.benchmarks import biccg, pingpong, triad
from burstbench.report import cost as costreport
from burstbench.report import index as report_index
from burstbench.report import sections as report_sections
from kernels_ext.triad import _triad

ROOT = Path(__file__).resolve().parents[1]


def snapshot(folder: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_smoke_run_makes_one_complete_run_folder(smoke_run):
    (run_dir,) = (smoke_run / "smoke").iterdir()
    names = {p.name for p in run_dir.iterdir()}
    assert {"provenance.json", "triad.csv", "triad.jsonl", "010_measure_triad.ipynb"} <= names
    assert not (run_dir / "triad.parts").exists()
    table = pd.read_csv(run_dir / "triad.csv")
    # smoke.yaml: gcc (1 affinity x 2 threads x 2 store policies) + numba (2 threads) + numpy
    # (1) = 7 configurations, x 2 reps (streaming: where the build has streaming stores, as
    # x86-64 does), in one process per variant, affinity and repetition: 3 x 2
    streaming = _triad.info()["streaming_isa"] is not None
    assert table["key"].nunique() == 6
    assert len(table.groupby(["label", "threads", "repetition"])) == (14 if streaming else 10)
    assert set(table["function"]) == {"Copy", "Scale", "Add", "Triad"}
    assert set(table["metric"]) == {"best_rate", "avg_time", "min_time", "max_time",
                                    "traffic_rate"}
    c = table[table["impl"] == "c"]
    assert set(c["stores"]) == ({"normal", "streaming"} if streaming else {"normal"})
    assert set(table.loc[table["impl"] == "numba", "stores"]) == {"normal"}
    assert set(table.loc[table["impl"] == "numpy", "stores"]) == {"memmove"}
    numpy = table[table["impl"] == "numpy"]
    assert "traffic_rate" not in set(numpy["metric"])  # no model claimed for NumPy
    assert set(table.loc[table.metric == "best_rate", "unit"]) == {"GB/s"}
    assert (table["value"] > 0).all()
    prov = json.loads((run_dir / "provenance.json").read_text())
    assert prov["benchmarks"]["triad"]["status"] == "complete"
    nb = json.loads((run_dir / "010_measure_triad.ipynb").read_text())
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in nb["cells"])


def test_smoke_run_holds_the_pingpong_too(smoke_run):
    (run_dir,) = (smoke_run / "smoke").iterdir()
    assert (run_dir / "020_measure_pingpong.ipynb").exists()
    table = pd.read_csv(run_dir / "pingpong.csv")
    measured = table[table["metric"] != "validation_errors"]
    assert set(measured["function"]) == {"latency", "bw", "bibw"}
    assert set(measured["impl"]) == {"c", "mpi4py"}
    assert measured["message_size"].max() == 4096 and (measured["value"] > 0).all()
    prov = json.loads((run_dir / "provenance.json").read_text())
    sec = prov["benchmarks"]["pingpong"]
    assert sec["status"] == "complete" and sec["variants"][0]["mpi_library_version"]
    raw = [json.loads(x) for x in (run_dir / "pingpong.jsonl").read_text().splitlines()]
    assert all(len(r["ranks"]) == 2 and r["ranks"][0]["host"] for r in raw)


def test_smoke_run_holds_biccg_too(smoke_run):
    (run_dir,) = (smoke_run / "smoke").iterdir()
    assert (run_dir / "030_measure_biccg.ipynb").exists()
    table = pd.read_csv(run_dir / "biccg.csv")
    assert set(table["label"]) == {"1x1", "2x1", "scipy-cg", "numba-ic0cg"}
    res = table[table["metric"] == "relative_residual"]
    assert (res["value"] <= 1e-7).all()
    assert json.loads((run_dir / "provenance.json").read_text())["benchmarks"]["biccg"][
        "status"] == "complete"


def test_report_builds_every_listed_figure(smoke_run, tmp_path, cli):
    figs = tmp_path / "figures"
    (tmp_path / "report.yaml").write_text("region: Japan East\n")  # a report parameter
    proc = cli("-m", "burstbench", "report", "--runs-dir", str(smoke_run), "--figures-dir",
               str(figs), "--include-test-runs",  # smoke.yaml says `test: true`
               "--params", str(tmp_path / "report.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert "Cost-performance of memory bandwidth, Japan East prices" in (
        figs / "cost_triad.svg").read_text()
    index = (figs / "README.md").read_text()
    for name in ("triad_smoke.png", "triad_smoke.svg", "triad_best.csv", "triad_best.md",
                 "triad_overview.png", "pingpong_smoke.png", "pingpong_smoke.svg",
                 "pingpong_extremes.csv", "pingpong_extremes.md", "biccg_smoke.png",
                 "biccg_summary.csv", "biccg_summary.md", "table_4_prices.md", "cost_triad.png",
                 "cost_spot.svg",  # cost_biccg, the decision: no VM here (test_cost)
                 *(("triad_stores_smoke.png", "triad_stores.csv", "triad_stores.md")
                   if _triad.info()["streaming_isa"] else ())):
        assert (figs / name).stat().st_size > 0
        assert name in index
    best = pd.read_csv(figs / "triad_best.csv")
    assert "measured here" not in set(best["source"])  # a test run is never a VM
    ours = best[best["source"] == "a test run"]
    streaming = _triad.info()["streaming_isa"] is not None
    # gcc (and gcc-streaming), numba, numpy labels
    assert set(ours["vm"]) == {"smoke"} and len(ours) == (4 if streaming else 3)
    assert dict(zip(ours["impl"], ours["stores"])).items() >= {("numba", "normal"),
                                                                ("numpy", "memmove")}
    assert ours.loc[ours["impl"] == "numpy", "traffic_gbs"].isna().all()
    if streaming:
        nt = pd.read_csv(figs / "triad_stores.csv")
        row = nt.iloc[0]
        assert len(nt) == 1 and row["vm"] == "smoke" and row["variant"].startswith("gcc")
        # the rates are rounded to 0.01 GB/s, their ratio to 0.001
        assert printed_ratio_fits(row["streaming_over_normal"], row["streaming_gbs"],
                                  row["normal_gbs"], 2, 3), row.to_dict()
        assert row["normal_traffic_gbs"] == pytest.approx(  # each rounded to 0.01
            row["normal_gbs"] * 32 / 24, abs=0.012)
        assert "streaming_label" in nt and row["streaming_label"].startswith(
            row["variant"] + "-streaming+")
    assert "(a test run, not a VM)" in index
    assert "smoke" not in set(pd.read_csv(figs / "cost_triad.csv")["system"])  # never priced
    study = best[best["source"] == "the study"].set_index("vm")
    ref = ROOT / "data" / "reference"
    published = pd.read_csv(ref / "triad_best.csv").set_index("vm")
    peak = pd.read_csv(ref / "vm_memory_bandwidth.csv").set_index("vm")
    value = published.loc["HB120rs_v3", "best_triad_gbs"]
    assert study.loc["HB120rs_v3", "best_median_gbs"] == value
    assert study.loc["HB120rs_v3", "fraction_of_theoretical"] == pytest.approx(
        value / peak.loc["HB120rs_v3", "theoretical_gbs_node"], abs=1e-3)


def test_a_test_run_is_never_drawn_as_a_vm(smoke_run, tmp_path):
    """smoke.yaml marks itself `test: true`: by default its run is named in the notes and
    left out of every figure and table."""
    figs = tmp_path / "figs"
    sections = [triad.report_section(smoke_run, figures_dir=figs),
                pingpong.report_section(smoke_run, figures_dir=figs),
                biccg.report_section(smoke_run, figures_dir=figs),
                costreport.cost_report(smoke_run, figures_dir=figs)]
    for section in sections:
        report_sections.save_section(section, figs)
    assert not list(figs.glob("*smoke*"))
    assert "smoke" not in set(pd.read_csv(figs / "triad_best.csv")["vm"])
    index = report_index.write_index(figs).read_text()
    (run_dir,) = (smoke_run / "smoke").iterdir()
    assert f"{run_dir}: a test run (its params say `test: true`)" in index


def test_report_lists_a_damaged_run_and_still_builds(smoke_run, tmp_path, monkeypatch):
    monkeypatch.setenv("BURSTBENCH_INCLUDE_TEST_RUNS", "1")
    runs = tmp_path / "runs"
    shutil.copytree(smoke_run, runs)
    broken = runs / "broken" / "r1"
    broken.mkdir(parents=True)
    (broken / "provenance.json").write_text('{"benchmarks": {"triad": {}}}')
    (broken / "triad.csv").write_text("garbage\n\x00\x01")
    section = triad.report_section(runs, ROOT / "data" / "reference", tmp_path / "figs")
    assert any("broken/r1" in p for p in section.problems)
    assert (tmp_path / "figs" / "triad_smoke.png").exists()
    report_sections.save_section(section, tmp_path / "figs")
    assert "broken/r1" in report_index.write_index(tmp_path / "figs").read_text()


def _code_cells(notebook: str) -> list[str]:
    nb = json.loads((ROOT / "notebooks" / notebook).read_text())
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("notebook", ["010_measure_triad.ipynb", "020_measure_pingpong.ipynb",
                                      "030_measure_biccg.ipynb"])
def test_a_second_run_all_in_one_kernel_measures_with_the_edited_parameters(notebook):
    """JupyterLab's loop: edit a parameter, Run All, edit again, Run All, in one kernel (one
    namespace). Each run reads the values its parameters cell (and papermill's injected
    cell) set, however many names the kernel holds from before; re-running only the cell
    that reads them works too."""
    cells = _code_cells(notebook)
    assert "parameters" in cells[0]["metadata"].get("tags", []), "parameters cell first"
    params_cell = "".join(cells[0]["source"])
    reader = [ln for ln in "".join(cells[1]["source"]).splitlines()
              if ln.startswith(("from ", "import ")) or "from_namespace" in ln]
    ns: dict = {}
    for vm, test in (("trial", True), ("second", False), ("third", True)):
        edited = params_cell.replace('vm = "local"', f'vm = "{vm}"').replace(
            "test = False", f"test = {test}")
        assert edited != params_cell
        exec(edited, ns)
        exec("\n".join(reader), ns)
        assert (ns["P"]["vm"], ns["P"]["test"]) == (vm, test)
        ns["plan"], ns["run"], ns["table"] = object(), object(), object()  # what the rest made
    exec('vm = "injected"', ns)  # papermill's cell, after the parameters cell
    exec("\n".join(reader), ns)
    assert ns["P"]["vm"] == "injected"
    exec("\n".join(reader), ns)  # the reading cell alone, again
    assert ns["P"]["vm"] == "injected"
    exec("triad_nitmes = 4", ns)  # a typo papermill would only warn about
    with pytest.raises(Exception, match="unknown parameter 'triad_nitmes'"):
        exec("\n".join(reader), ns)


@pytest.mark.slow
def test_unknown_parameter_through_papermill_names_it(tmp_path):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    with pytest.raises(PapermillExecutionError) as err:
        papermill.execute_notebook(
            str(ROOT / "notebooks" / "010_measure_triad.ipynb"), str(tmp_path / "out.ipynb"),
            parameters={"triad_thread": [1], "runs_dir": str(tmp_path)},
            kernel_name="python3", progress_bar=False, cwd=str(ROOT))
    assert err.value.ename == "ParamError"
    assert "unknown parameter 'triad_thread'" in err.value.evalue
    assert not (tmp_path / "local").exists()  # nothing was started


def test_bad_params_leave_earlier_results_intact(smoke_run, tmp_path, cli):
    before = snapshot(smoke_run)
    cases = {
        "unknown.yaml": "vm: smoke\ntriad_treads: [1]\n",
        "malformed.yaml": "vm: smoke\ntriad_threads: [1,\n",
        "threads0.yaml": "vm: smoke\ntriad_threads: [0]\n",
        "tsize.yaml": "vm: smoke\ntriad_size: -1\n",
        "ntimes.yaml": "vm: smoke\ntriad_ntimes: 1\n",
        "places.yaml": "vm: smoke\ntriad_places: [cors]\n",
        "kmp.yaml": "vm: smoke\ntriad_kmp_affinity: [compactt]\n",
        "size.yaml": "vm: smoke\npingpong_max_size: 1000\n",
        "combo.yaml": "vm: smoke\npingpong_combinations: [{mpiexec: mpiexec, lanucher: x}]\n",
    }
    for name, text in cases.items():
        f = tmp_path / name
        f.write_text(text)
        proc = cli("-m", "burstbench", "run", "--params", str(f), "--runs-dir", str(smoke_run))
        assert proc.returncode == 2, name
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error:")
    assert snapshot(smoke_run) == before


@pytest.mark.slow
def test_failing_variant_in_a_sweep_shows_the_compiler_message(tmp_path, cli):
    f = tmp_path / "p.yaml"
    f.write_text("vm: v\nonly: [triad]\ntriad_size: 100000\ntriad_threads: [1]\n"
                 "triad_baselines: []\n"
                 "triad_variants: [{compiler: gcc, flags: -O2 -fopenmp -fno-such-flag}]\n")
    proc = cli("-m", "burstbench", "run", "--params", str(f), "--runs-dir", str(tmp_path),
               "--quiet")
    assert proc.returncode == 1
    assert "failed to compile" in proc.stderr and "-fno-such-flag" in proc.stderr


def test_cli_help(cli):
    for args in ([], ["run"], ["report"], ["params"]):
        proc = cli("-m", "burstbench", *args, "--help")
        assert proc.returncode == 0 and "example" in proc.stdout


def test_params_command_checks_every_file(cli, tmp_path):
    assert cli("-m", "burstbench", "params", *map(str, ROOT.glob("papermill_params/*.yaml"))
               ).returncode == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("vm: x\nfoo: 1\n")
    proc = cli("-m", "burstbench", "params", str(bad))
    assert proc.returncode == 2 and "unknown parameter 'foo'" in proc.stderr


@pytest.mark.slow
def test_make_figures_on_the_committed_data_builds_every_listed_file(tmp_path, cli):
    figs = tmp_path / "figures"
    proc = cli("-m", "burstbench", "report", "--figures-dir", str(figs))
    assert proc.returncode == 0, proc.stderr
    listed = []
    for manifest in figs.glob("manifest-*.json"):
        for entry in json.loads(manifest.read_text())["entries"]:
            listed += entry["files"]
    assert len(listed) > 20
    assert all((figs / f).stat().st_size > 0 for f in listed)
    index = (figs / "README.md").read_text()
    assert all(f in index for f in listed)
    for section in ("## triad", "## pingpong", "## biccg", "## cost"):
        assert section in index


def test_a_report_of_runs_with_nothing_measured_builds_from_the_study_alone(tmp_path, cli):
    """A budget that ended before a benchmark started leaves that benchmark nothing to draw:
    the report builds all the same (the study's numbers, the notes saying what is missing),
    and a notebook with no table to show says so.  The BICCG notebook read back a summary
    it had not written and failed (FileNotFoundError) on such a runs folder."""
    runs, figs = tmp_path / "runs", tmp_path / "figures"
    runs.mkdir()
    proc = cli("-m", "burstbench", "report", "--runs-dir", str(runs), "--figures-dir", str(figs))
    assert proc.returncode == 0, proc.stderr
    assert not (figs / "biccg_summary.csv").exists()
    index = (figs / "README.md").read_text()
    assert "- no burst decision: no BICCG solve measured: nothing to fit the model on" in index
    for table in ("triad_best.csv", "pingpong_extremes.csv", "storage_summary.csv"):
        assert (figs / table).stat().st_size > 0  # the study's rows alone


def test_a_notebook_shows_the_table_it_wrote_or_says_it_wrote_none(tmp_path, capsys):
    section = report_sections.Section("biccg")
    assert report_sections.written_table(section, tmp_path, "biccg_summary.csv") is None
    assert capsys.readouterr().out == (
        f"biccg_summary.csv not written to {tmp_path}: no biccg run with data under the runs "
        "folder (see what could not be used, above)\n")
    (tmp_path / "biccg_summary.csv").write_text("a,b\n1,2\n")
    section.entries.append(report_sections.Entry("t", ["biccg_summary.csv"], "c"))
    table = report_sections.written_table(section, tmp_path, "biccg_summary.csv")
    assert table is not None and table.to_dict("records") == [{"a": 1, "b": 2}]
    assert capsys.readouterr().out == f"written to {tmp_path}\n"


def _first_difference(a: Path, b: Path) -> str | None:
    """None when folders `a` and `b` hold the same files, byte for byte; else the first
    difference (in name order): a file only one holds, or the first line where two differ."""
    names_a = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    names_b = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    if names_a != names_b:
        return f"files only in one build: {sorted(set(names_a) ^ set(names_b))}"
    for name in names_a:
        x, y = (a / name).read_bytes(), (b / name).read_bytes()
        if x != y:
            at = next((i for i, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
            line = x[:at].count(b"\n") + 1
            return (f"{name} differs from byte {at} (line {line}): "
                    f"{x[max(0, at - 40):at + 40]!r} against {y[max(0, at - 40):at + 40]!r}")
    return None


@pytest.mark.slow
def test_make_figures_twice_gives_the_same_bytes(tmp_path, cli):
    """Two rebuilds of the report from the committed data write the same files, byte for
    byte (no date, no random SVG id, no order left to chance), and the warm kernels that
    `report` shares between notebooks (burstbench/report/executor.py) draw exactly what a fresh
    kernel per notebook draws (the second build)."""
    first, second = tmp_path / "first", tmp_path / "second"
    proc = cli("-m", "burstbench", "report", "--figures-dir", str(first))
    assert proc.returncode == 0, proc.stderr
    proc = cli("-m", "burstbench", "report", "--figures-dir", str(second),
               env={"BURSTBENCH_REPORT_KERNELS": "fresh"})
    assert proc.returncode == 0, proc.stderr
    assert len(list(first.glob("*.svg"))) >= 5 and len(list(first.glob("*.png"))) >= 5
    assert _first_difference(first, second) is None, _first_difference(first, second)


def test_report_parameters_a_notebook_lacks_are_refused(tmp_path, cli):
    """A typo in a report parameters file is named with the keys that exist, before any
    notebook runs (nothing is written); so is a folder given as a parameter."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("user_jobb: {name: mine}\n")
    figs = tmp_path / "figures"
    proc = cli("-m", "burstbench", "report", "--params", str(bad), "--figures-dir", str(figs))
    assert proc.returncode == 2 and not figs.exists()
    assert proc.stderr.startswith(f"error: {bad}: 'user_jobb' is not a parameter of any report "
                                  "notebook (did you mean user_job? they are: checkpoint_h, "
                                  "deploy_minutes, ")
    assert "user_job, " in proc.stderr
    bad.write_text("figures_dir: /tmp/elsewhere\n")
    proc = cli("-m", "burstbench", "report", "--params", str(bad), "--figures-dir", str(figs))
    assert proc.returncode == 2 and "the folders are --runs-dir" in proc.stderr
    # a measurement file given to the report: said so, with the command that takes it, and
    # no "writing to" before a refusal that writes nothing
    bad.write_text("vm: mine\ntriad_ntimes: 3\nbiccg_colors: 20\n")
    proc = cli("-m", "burstbench", "report", "--params", str(bad))
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", f"error: {bad} is a measurement file (burstbench run --params {bad}), not report "
        "parameters (your job, a region: papermill_params/README.md)\n")
    # a report file with a stray measurement key is still a report file: the key is named
    bad.write_text("region: Japan East\nvm: mine\n")
    proc = cli("-m", "burstbench", "report", "--params", str(bad))
    assert proc.returncode == 2 and proc.stderr.startswith(
        f"error: {bad}: 'vm' is not a parameter of any report notebook ("), proc.stderr


def test_the_report_takes_the_longest_notebook_first_by_the_last_build(tmp_path):
    """The kernels share one queue, longest first by the last build's seconds; a notebook
    the last build did not time goes first (it may be the longest), then name order; a
    damaged timings file only loses the order."""
    from burstbench.report import executor

    nbs = [tmp_path / n for n in ("110_a.ipynb", "120_b.ipynb", "130_c.ipynb", "190_d.ipynb")]
    p = executor.plan(nbs, "2", {"110_a.ipynb": 2.8, "120_b.ipynb": 0.9, "190_d.ipynb": 3.2})
    assert p.kernels == 2 and [n.name for n in p.queue] == [
        "130_c.ipynb", "190_d.ipynb", "110_a.ipynb", "120_b.ipynb"]
    assert [n.name for n in executor.plan(nbs, "1").queue] == sorted(n.name for n in nbs)
    (tmp_path / executor.TIMINGS).write_text('{"110_a.ipynb": 2.5}')
    assert executor.last_seconds(tmp_path) == {"110_a.ipynb": 2.5}
    (tmp_path / executor.TIMINGS).write_text('["not", "a mapping"')
    assert executor.last_seconds(tmp_path) == {}


def _notebooks(folder: Path, **code: str) -> list[Path]:
    """One notebook a keyword, named for it, of one code cell each."""
    import nbformat

    paths = []
    for name, source in code.items():
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(source)]
        paths.append(folder / f"{name}.ipynb")
        nbformat.write(nb, paths[-1])
    return paths


def _kernel_that_dies(tmp_path: Path, times: int) -> dict:
    """An environment whose Python kernels die before they answer, the first `times` of
    them (counted in a file), saying so on stderr (a sitecustomize on PYTHONPATH)."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os, sys\n"
        "if sys.argv[:1] == ['-m'] and '-f' in sys.argv:  # python -m ipykernel_launcher -f\n"
        f"    count = {str(tmp_path / 'starts')!r}\n"
        "    n = int(open(count).read()) if os.path.exists(count) else 0\n"
        "    open(count, 'w').write(str(n + 1))\n"
        f"    if n < {times}:\n"
        "        sys.stderr.write(f'zmq.error.ZMQError: Address already in use (start {n + 1})')\n"
        "        sys.stderr.flush()\n"
        "        os._exit(1)\n")
    return dict(os.environ, PYTHONPATH=f"{hook}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


@pytest.mark.parametrize("setting", ["1", "fresh"])
def test_a_kernel_that_dies_before_it_answers_is_started_again(tmp_path, setting, monkeypatch):
    """A kernel that dies at its start (its port taken by another process between the
    manager choosing it and the kernel binding it: a CI run lost a whole report to it) is
    replaced, STARTS kernels for a notebook, whether the caller launched it or a worker; a
    kernel that never starts fails the notebook with what it last wrote, and the next
    notebook tries again."""
    import nbformat

    from burstbench.report import executor, kernel

    monkeypatch.setattr(executor, "available_cpus", lambda: 1)  # one kernel at a time
    nbs = _notebooks(tmp_path, a="print('a', 6 * 7)", b="print('b', 6 * 7)")
    for case, dying in (("once", kernel.STARTS - 1), ("never", 100)):
        (tmp_path / case).mkdir()
        env = _kernel_that_dies(tmp_path / case, dying)
        results, _ = executor.run(nbs, tmp_path / case / "out", lambda nb: ({}, {}), tmp_path,
                                  env=env, setting=setting)
        if case == "once":
            assert [r.error for r in results] == [None, None]
            out = nbformat.read(tmp_path / case / "out" / "a.ipynb", as_version=4)
            assert out.cells[-1].outputs[0]["text"] == "a 42\n"
            starts = int((tmp_path / case / "starts").read_text())
            assert starts == kernel.STARTS + (1 if setting == "fresh" else 0)
        else:
            said = ("the kernel did not start: Kernel died before replying to kernel_info (its "
                    "last words: zmq.error.ZMQError: Address already in use (start {}))"
                    f"; {kernel.STARTS} kernels tried")
            assert [r.error for r in results] == [said.format(kernel.STARTS),
                                                  said.format(2 * kernel.STARTS)]


def test_a_kernel_that_dies_says_what_its_notebook_left_on_stderr(tmp_path):
    """The last words given for a kernel that died are its last notebook's: what an earlier
    notebook wrote to the kernel's stderr is forgotten when the next one starts."""

    from burstbench.report import executor

    nbs = _notebooks(tmp_path, a="import os; os.write(2, b'a was here\\n')",
                     b="import os; os._exit(3)")
    results, _ = executor.run(nbs, tmp_path / "out", lambda nb: ({}, {}), tmp_path,
                              setting="1")
    assert results[0].error is None
    assert results[1].error.startswith("the kernel died (")
    assert "a was here" not in results[1].error


def test_a_measurement_whose_kernel_dies_before_it_answers_is_started_again(tmp_path,
                                                                           monkeypatch):
    """What `burstbench run` executes (papermill, a process of its own) gets STARTS kernels
    where each dies before it answers (no cell has run), and says so where none did."""
    import nbformat

    from burstbench import supervise

    _notebooks(tmp_path, m="print(6 * 7)")
    for case, dying in (("once", supervise.STARTS - 1), ("never", 100)):
        (tmp_path / case).mkdir()
        monkeypatch.setenv("PYTHONPATH", _kernel_that_dies(tmp_path / case, dying)["PYTHONPATH"])
        why = supervise.execute_notebook(tmp_path / "m.ipynb", tmp_path / case / "m.ipynb", {},
                                         log=False)
        starts = int((tmp_path / case / "starts").read_text())
        if case == "once":
            assert why is None and starts == supervise.STARTS
            out = nbformat.read(tmp_path / case / "m.ipynb", as_version=4)
            assert out.cells[-1].outputs[0]["text"] == "42\n"
        else:
            assert why == f"{supervise.NEVER_STARTED}; {supervise.STARTS} kernels tried"
            assert starts == supervise.STARTS
