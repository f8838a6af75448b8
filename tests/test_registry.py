"""The benchmark registry: each benchmark declared in its package, everything else asks it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from burstbench import params, registry
from burstbench.core.checks import Param, ParamError, check_count
from burstbench.core.sweep import Plan
from burstbench.report import index, sections

ROOT = Path(__file__).resolve().parents[1]


def test_the_built_in_benchmarks_in_the_reports_order():
    specs = registry.benchmarks()
    assert list(specs) == list(registry.BENCHMARKS)
    for name, spec in specs.items():
        assert spec.name == name
        assert (ROOT / "notebooks" / spec.notebook).is_file()
        # its report notebook, found by the report command's glob (1N0_report_<name>)
        assert len(list((ROOT / "notebooks").glob(f"1[0-9]0_report_{name}.ipynb"))) == 1
        assert spec.params and all(p.name.startswith(name + "_") for p in spec.params)
        assert params.schema(name).keys() == {p.name for p in params.COMMON + list(spec.params)}
    assert params.notebooks() == {n: s.notebook for n, s in specs.items()}


def test_a_fourth_benchmark_is_one_registration(monkeypatch):
    """What a new module does (declare its parameters and entry points, register) is all
    params.py needs: its keys are known, checked and fingerprinted, its notebook listed."""
    monkeypatch.setattr(registry, "_EXTRA", {})
    demo = registry.register(registry.Benchmark(
        name="demo", params=(Param("demo_size", 8, "elements", check_count("demo_size", 1)),),
        columns=("size",), notebook="050_measure_demo.ipynb", plan=lambda P: Plan([], []),
        parse=lambda task, out, err: ([], [], ""),
        report=lambda *a, **k: sections.Section("demo"), title="Demo", labels="Labels: `d`."))
    assert list(registry.benchmarks())[-1] == "demo"
    assert params.keys_page("demo").endswith(
        "# Demo: `demo_*` (050_measure_demo.ipynb)\n\nThe keys of a params file "
        "(`papermill_params/<vm>.yaml`) that `notebooks/050_measure_demo.ipynb` reads; the "
        "common keys, and `only` and `skip`, are in [papermill_params/README.md]"
        "(../../../papermill_params/README.md).\n\n| key | default | meaning |\n|---|---|---|\n"
        "| `demo_size` | `8` | elements |\n\nLabels: `d`.\n")
    assert "| `demo_size` | `8` | elements |" in params.all_keys()
    assert "demo" not in params.docs() and registry.folder("demo") is None
    assert params.selection({"vm": "x"})[-1] == "demo"  # measured by every file by default
    assert params.selection({"skip": ["demo"]}) == list(registry.BENCHMARKS)
    assert params.known_names()["demo_size"] == "demo"
    assert params.validate({"demo_size": "16"}, "demo")["demo_size"] == 16
    with pytest.raises(ParamError, match="demo_size must be at least 1"):
        params.validate({"demo_size": 0}, "demo")
    assert params.notebooks()["demo"] == "050_measure_demo.ipynb"
    assert params.digest(params.validate({}, "demo"), "demo") != params.digest(
        params.validate({"demo_size": 9}, "demo"), "demo")
    with pytest.raises(ValueError, match="two benchmarks are named 'demo'"):
        registry.register(registry.Benchmark(name="demo", params=(), columns=(), notebook="x",
                                             plan=demo.plan, parse=demo.parse,
                                             report=demo.report))


def test_unknown_benchmark_names_the_known_ones():
    with pytest.raises(ParamError, match=r"unknown benchmark 'trid' \(did you mean triad\? "
                                         "known: triad, pingpong, biccg"):
        params.schema("trid")


def test_the_report_index_follows_the_registry(tmp_path):
    for name in ("cost", "biccg", "triad", "pingpong"):
        sections.save_section(sections.Section(name), tmp_path)
    text = index.write_index(tmp_path).read_text()
    heads = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert heads == [n for n in registry.BENCHMARKS if n in ("triad", "pingpong", "biccg")] \
        + ["cost"]


def _demo_plan(P: dict) -> Plan:
    """Two configurations of a 'kernel' that is one line of Python printing a JSON record."""
    import sys

    from burstbench.core import runner

    tasks = [runner.Task(f"demo-w{w}", {"label": f"w{w}", "impl": "python", "width": w,
                                        "repetition": 1},
                         (sys.executable, "-c", f"import json; print(json.dumps("
                                            f"{{'ops': {w * P['demo_size']}}}))"))
             for w in (1, 2)]
    return Plan(tasks, [{"kernel": "demo"}])


def _demo_parse(task, out: str, err: str):
    from burstbench.core import runner

    (rec,) = runner.json_records(out, err)
    return ([task.config | {"metric": "ops", "value": rec["ops"], "unit": "1"}], [rec],
            f"{rec['ops']} ops")


def test_a_demo_benchmark_goes_through_store_explore_jobs_and_report(monkeypatch, tmp_path):
    """A benchmark the shared code has never seen, declared in one place: its rows keep its
    own column through the store, explore loads it and takes its headline, the job scripts
    ask its nodes hook, the report index gives its section a place, and provenance records
    its environment variables."""
    from burstbench import jobs
    from burstbench.report import explore

    monkeypatch.setattr(registry, "_EXTRA", {})
    monkeypatch.setenv("DEMO_KNOB", "3")
    demo = registry.register(registry.Benchmark(
        name="demo", params=(Param("demo_size", 8, "elements", check_count("demo_size", 1)),
                             Param("demo_nodes", 1, "nodes", check_count("demo_nodes", 1))),
        columns=("width",), notebook="050_measure_demo.ipynb", plan=_demo_plan,
        parse=_demo_parse, report=lambda *a, **k: sections.Section("demo"),
        env_prefixes=("DEMO_",), nodes=lambda P: (P["demo_nodes"], "demo_nodes"),
        headline=lambda t: t.assign(config=t["label"], x_name="width", x=t["width"],
                                    quantity="ops", higher_is_better=True)))
    P = params.validate({"vm": "demo-vm", "runs_dir": str(tmp_path), "demo_size": 5}, "demo")
    run, table = demo.measure(P, progress=False)
    assert sorted(zip(table["width"], table["value"])) == [(1, 5), (2, 10)]
    loaded = demo.load(tmp_path)
    # a busy test machine may flag its configurations contended: said, and no fault of the store
    assert not [p for p in loaded.problems if "configurations contended" not in p], \
        loaded.problems
    assert sorted(zip(loaded.table["width"], loaded.table["value"])) == [(1, 5), (2, 10)]
    assert run.provenance()["environment"]["DEMO_KNOB"] == "3"  # its env_prefixes
    runs = explore.load_runs(tmp_path, benchmarks=["demo"])
    head = explore.headline(runs.table)
    assert sorted(zip(head["x"], head["value"])) == [(1, 5), (2, 10)]
    assert set(head["quantity"]) == {"ops"}
    assert jobs.nodes_needed({"demo": params.validate({"demo_nodes": 4}, "demo")}) == (
        4, "demo_nodes")
    for name in ("cost", "demo", "triad"):
        sections.save_section(sections.Section(name), tmp_path / "figs")
    heads = [line[3:] for line in index.write_index(tmp_path / "figs").read_text().splitlines()
             if line.startswith("## ")]
    assert heads == ["triad", "demo", "cost"]


# -- a fifth benchmark, added the README's way to a copy of the repository -----------------

#: The demo's package: what "Adding a benchmark" asks of one, its kernel a line of Python.
DEMO_FILES = {
    "burstbench/benchmarks/demo/__init__.py": '''"""A demo benchmark: a line of Python each."""

from burstbench.benchmarks.demo.params import PARAMS
from burstbench.registry import Benchmark, lazy

SPEC = Benchmark(
    name="demo", params=tuple(PARAMS), columns=("width",), notebook="060_measure_demo.ipynb",
    plan=lazy(f"{__name__}.tasks", "plan"), parse=lazy(f"{__name__}.results", "parse"),
    report=lazy(f"{__name__}.report", "report_section"), title="Demo")
''',
    "burstbench/benchmarks/demo/params.py": '''"""The demo's keys."""

from burstbench.core.checks import Param, check_count

PARAMS = [Param("demo_size", 8, "operations per width", check_count("demo_size", 1))]
''',
    "burstbench/benchmarks/demo/tasks.py": '''"""Two configurations, each a line of Python."""

import sys

from burstbench.core import runner
from burstbench.core.sweep import Plan


def plan(P: dict) -> Plan:
    return Plan([runner.Task(f"demo-w{w}", {"label": f"w{w}", "impl": "python", "width": w,
                                            "repetition": 1},
                             (sys.executable, "-c", "import json; print(json.dumps("
                                                    f"{{'ops': {w * P['demo_size']}}}))"))
                 for w in (1, 2)], [{"kernel": "demo"}])
''',
    "burstbench/benchmarks/demo/results.py": '''"""A demo task's output as rows."""

from burstbench.core import runner


def parse(task, out: str, err: str):
    (rec,) = runner.json_records(out, err)
    return ([task.config | {"metric": "ops", "value": rec["ops"], "unit": "1"}], [rec],
            f"{rec['ops']} ops")
''',
    "burstbench/benchmarks/demo/report.py": '''"""The demo's report section: none."""

from burstbench.report import sections


def report_section(runs_dir="", reference_dir="", figures_dir="", show=False):
    return sections.Section("demo")
''',
    "tests/test_demo.py": '''from burstbench import params


def test_demo_size_is_checked():
    assert params.validate({"demo_size": "16"}, "demo")["demo_size"] == 16
''',
}


def _notebook(path: Path, parameters: str, code: str) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()  # the kernel the project's notebooks name
    nb.metadata = nbformat.read(str(ROOT / "notebooks" / "010_measure_triad.ipynb"), 4).metadata
    nb.cells = [nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(code)]
    nbformat.write(nb, str(path))


def readme_paths() -> list[str]:
    """The paths of the numbered list of the files a new benchmark touches (the README's
    page on the code, docs/development.md)."""
    text = (ROOT / "docs" / "development.md").read_text()
    block = text.split("The files a new benchmark touches")[1].split("\n\n")[1]
    return re.findall(r"^\d+\. `([^`]+)`", block, re.M)


def listed(path: str, patterns: list[str]) -> bool:
    """Whether `path` is one of the README's `patterns` for a benchmark named demo."""
    for pattern in patterns:
        rx = (re.escape(pattern).replace("<name>", "demo").replace("0N0", r"0\d0")
              .replace("1N0", r"1\d0").replace(r"\*", "[^/]*"))
        if re.fullmatch(rx + (".*" if pattern.endswith("/") else ""), path):
            return True
    return False


def in_copy(copy: Path, site: Path, *args: str,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """`python args` in the copy, importing its burstbench (not this checkout's)."""
    env = os.environ | {"PYTHONPATH": str(site), "BURSTBENCH_ROOT": str(copy)}
    return subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True,
                          text=True, timeout=timeout)


def changed(copy: Path) -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=copy,
                         capture_output=True, text=True, check=True).stdout
    return sorted(line[3:] for line in out.splitlines())


@pytest.fixture(scope="module")
def demo_copy(tmp_path_factory) -> tuple[Path, Path]:
    """(copy, site): this checkout's files (committed or not) in a git repository of their
    own, the demo added by the README's list and its page written by --write-docs; `site`
    makes a Python started with it import the copy's packages."""
    import shutil

    tmp = tmp_path_factory.mktemp("demo")
    copy, site = tmp / "repo", tmp / "site"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for f in filter(None, files):
        if (ROOT / f).is_file() and not f.startswith(("data/", "figures/", "comparisons/")):
            (copy / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, copy / f)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "copy"]):
        subprocess.run([*git, *cmd], cwd=copy, check=True, capture_output=True)
    site.mkdir()
    (site / "sitecustomize.py").write_text(  # after the .pth files: drop the editable finder
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if 'ScikitBuild' not in type(f).__name__]\n"
        f"sys.path[:] = [{str(copy)!r}] + [p for p in sys.path if p != {str(ROOT)!r}]\n")
    for path, text in DEMO_FILES.items():
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_text(text)
    common = "".join(f"{p.name} = {p.default!r}\n" for p in params.COMMON)
    _notebook(copy / "notebooks" / "060_measure_demo.ipynb", common + "demo_size = 8\n",
              "from burstbench import params\nfrom burstbench.benchmarks import demo\n\n"
              "P = params.from_namespace(globals(), 'demo')\nrun, table = demo.SPEC.measure(P)")
    _notebook(copy / "notebooks" / "160_report_demo.ipynb",
              'runs_dir = ""\nreference_dir = ""\nfigures_dir = ""\n',
              "from burstbench.benchmarks import demo\n\n"
              "demo.SPEC.report(runs_dir, reference_dir, figures_dir)")
    reg = copy / "burstbench" / "registry.py"
    text = reg.read_text()
    line = next(x for x in text.splitlines() if x.startswith("BENCHMARKS = ("))
    reg.write_text(text.replace(line, line.replace(")", ', "demo")')))
    proc = in_copy(copy, site, "-m", "burstbench", "params", "--write-docs")
    assert proc.returncode == 0, proc.stderr
    assert f"already current: {copy}/papermill_params/README.md" in proc.stdout
    assert f"rewrote {copy}/burstbench/benchmarks/demo/params.md" in proc.stdout
    return copy, site


def test_a_fifth_benchmark_touches_only_the_files_the_readme_lists(demo_copy):
    """The demo, added as the README's list says, is measured by every VM's params file
    and passes the checks that compare the registry with the files (the keys' pages, the
    notebooks' parameters, the params files): nothing outside the list had to change."""
    copy, site = demo_copy
    patterns = readme_paths()
    assert "burstbench/registry.py" in patterns and len(patterns) >= 5, patterns
    proc = in_copy(copy, site, "-m", "burstbench", "params", "papermill_params/local.yaml",
                   "papermill_params/smoke.yaml", "papermill_params/hc44rs.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "ok: papermill_params/local.yaml (a measurement: burstbench run --params; measures "
        "triad, pingpong, biccg, storage, demo)",
        "ok: papermill_params/smoke.yaml (a measurement: burstbench run --params; measures "
        "triad, pingpong, biccg, storage; leaves out demo)",
        "ok: papermill_params/hc44rs.yaml (a measurement: burstbench run --params; measures "
        "triad, pingpong, biccg, storage, demo)"]
    proc = in_copy(copy, site, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "tests/test_params.py", "tests/test_registry.py", "tests/test_demo.py", "-k",
                   "readme_is_written or notebook_parameters_equal or every_yaml_key or "
                   "committed_files or built_in_benchmarks or smoke_yaml or keys_prints or "
                   "demo_size")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "demo" in proc.stdout or " passed" in proc.stdout
    touched = changed(copy)
    assert "burstbench/registry.py" in touched and "burstbench/benchmarks/demo/params.md" in \
        touched
    assert [p for p in touched if not listed(p, patterns)] == [], (touched, patterns)


@pytest.mark.slow
def test_every_params_file_measures_a_fifth_benchmark(demo_copy, tmp_path):
    """local.yaml, unchanged, measures the demo with its declared defaults; smoke.yaml's
    `only:` leaves it out, said in one line."""
    import pandas as pd

    copy, site = demo_copy
    runs = tmp_path / "runs"
    proc = in_copy(copy, site, "-m", "burstbench", "run", "--params",
                   "papermill_params/local.yaml", "--only", "demo", "--runs-dir", str(runs),
                   "--quiet")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = (runs / "local").iterdir()
    table = pd.read_csv(run_dir / "demo.csv")
    assert sorted(zip(table["width"], table["value"])) == [(1, 8), (2, 16)]  # demo_size 8
    proc = in_copy(copy, site, "-m", "burstbench", "run", "--params",
                   "papermill_params/smoke.yaml", "--only", "demo", "--runs-dir", str(runs))
    assert proc.returncode == 2
    assert proc.stderr == ("error: --only demo: papermill_params/smoke.yaml leaves demo out "
                           "(only: [triad, pingpong, biccg, storage]); it measures triad, "
                           "pingpong, biccg, storage\n")
    assert [p for p in changed(copy) if not listed(p, readme_paths())] == []
