"""The benchmark registry: each benchmark declared in its package, everything else asks it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
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
        assert (ROOT / "notebooks" / spec.report_notebook).is_file()
        assert spec.params and all(p.name.startswith(name + "_") for p in spec.params)
        assert params.schema(name).keys() == {p.name for p in params.COMMON + list(spec.params)}
    assert params.notebooks() == {n: s.notebook for n, s in specs.items()}


def test_a_fourth_benchmark_is_one_registration(monkeypatch):
    """What a new module does (declare its parameters and entry points, register) is all
    params.py needs: its keys are known, checked and fingerprinted, its notebook listed."""
    monkeypatch.setattr(registry, "_EXTRA", {})
    demo = registry.register(registry.Benchmark(
        "demo", (Param("demo_size", 8, "elements", check_count("demo_size", 1)),), ("size",),
        "050_measure_demo.ipynb", "150_report_demo.ipynb", plan=lambda P: Plan([], []),
        parse=lambda task, out, err: ([], [], ""), spread=lambda table: pd.DataFrame(),
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
        registry.register(registry.Benchmark("demo", (), (), "x", "y", demo.plan, demo.parse,
                                             demo.spread, demo.report))


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
