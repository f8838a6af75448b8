"""The benchmark registry: each benchmark declared in its package, everything else asks it."""

from __future__ import annotations

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
    assert params.docs().endswith("## Demo: `demo_*` (050_measure_demo.ipynb)\n\n"
                                  "| key | default | meaning |\n|---|---|---|\n"
                                  "| `demo_size` | `8` | elements |\n\nLabels: `d`.\n")
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
    with pytest.raises(ParamError, match="unknown benchmark 'trid' .known: triad, pingpong, "
                                         "biccg"):
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
