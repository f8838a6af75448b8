"""Parameter files and notebooks agree; bad keys and values fail with one clear line."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from burstbench import params

ROOT = Path(__file__).resolve().parents[1]
YAMLS = sorted((ROOT / "papermill_params").glob("*.yaml"))


def parameters_cell(notebook: Path) -> dict:
    """Names and literal values of a notebook's cell tagged 'parameters'."""
    nb = json.loads(notebook.read_text())
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{notebook.name}: exactly one parameters cell"
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), \
        f"{notebook.name} is committed with outputs"
    tree = ast.parse("".join(cells[0]["source"]))
    out = {}
    for node in tree.body:
        assert isinstance(node, ast.Assign), "only assignments in the parameters cell"
        out[node.targets[0].id] = ast.literal_eval(node.value)  # literals only
    return out


@pytest.mark.parametrize("section,notebook", params.NOTEBOOKS.items())
def test_notebook_parameters_equal_the_schema(section, notebook):
    cell = parameters_cell(ROOT / "notebooks" / notebook)
    schema = params.schema(section)
    assert set(cell) == set(schema)
    for name, value in cell.items():
        assert value == schema[name].default, name


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: p.name)
def test_every_yaml_key_is_known_and_valid(path):
    values = params.load_file(path)
    for section in params.NOTEBOOKS:
        params.validate(values, section, where=path.name)
    assert values["vm"]


def test_study_vm_files_hold_table_a():
    for name, threads in (("hb120rs_v3", 120), ("hb120-16rs_v3", 16), ("hc44rs", 44),
                          ("d96s_v5", 96)):
        p = params.validate(params.load_file(ROOT / "papermill_params" / f"{name}.yaml"),
                            "triad")
        assert p["triad_size"] == 1_000_000_000
        assert p["triad_threads"] == list(range(1, threads + 1))
        compilers = {v["compiler"] for v in p["triad_variants"]}
        assert compilers == {"gcc", "icx", "nvc"}
        kmp = [k for v in p["triad_variants"] for k in v.get("kmp_affinity", [])]
        assert len(kmp) == 6  # 4 icc + 2 icc-zmm_high labels of Appendix Table A


def test_unknown_key_names_it_and_lists_the_valid_ones(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("vm: x\ntriad_thread: [1]\n")
    with pytest.raises(params.ParamError) as err:
        params.load_file(f)
    msg = str(err.value)
    assert "unknown parameter 'triad_thread'" in msg and "did you mean 'triad_threads'" in msg
    assert "valid: " in msg and "triad_ntimes" in msg and "\n" not in msg


def test_malformed_yaml_names_the_line(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("vm: x\ntriad_threads: [1, 2\ntriad_ntimes: 3\n")
    with pytest.raises(params.ParamError, match=r"malformed YAML in .*p.yaml line \d"):
        params.load_file(f)
    f.write_text("- just\n- a list\n")
    with pytest.raises(params.ParamError, match="expected a mapping"):
        params.load_file(f)


@pytest.mark.parametrize("key,value,message", [
    ("triad_threads", [0], "at least 1"),
    ("triad_threads", "3-1", "must go up"),
    ("triad_size", 0, "at least 1"),
    ("triad_size", -4, "at least 1"),
    ("triad_size", 2.5, "must be an integer"),
    ("triad_size", "lots", "must be an integer"),
    ("triad_ntimes", 1, "at least 2"),
    ("triad_places", ["cors"], "unknown OMP_PLACES value 'cors'"),
    ("triad_bind", ["nearby"], "unknown OMP_PROC_BIND value 'nearby'"),
    ("triad_kmp_affinity", ["granularity=core"], "no affinity type"),
    ("triad_variants", [{"compiler": "gcc", "flgs": "-O3"}], "unknown key 'flgs'"),
    ("triad_variants", [{"flags": "-O3"}], "needs a compiler"),
    ("triad_variants", [], "non-empty list"),
    ("triad_baselines", ["julia"], "unknown value 'julia'"),
    ("triad_repetitions", 0, "at least 1"),
    ("triad_timeout_s", -1, "positive number"),
    ("vm", "my vm/1", "names a folder"),
])
def test_bad_values(key, value, message):
    with pytest.raises(params.ParamError) as err:
        params.validate({key: value}, "triad")
    assert message in str(err.value) and key in str(err.value)


def test_values_are_normalised():
    p = params.validate({"triad_size": "1e9", "triad_threads": "1-4",
                         "triad_places": "cores", "triad_ntimes": 5.0}, "triad")
    assert p["triad_size"] == 1_000_000_000 and p["triad_threads"] == [1, 2, 3, 4]
    assert p["triad_places"] == ["cores"] and p["triad_ntimes"] == 5
    assert params.validate({}, "triad")["triad_threads"] == "all"


def test_from_namespace_sees_injected_names_only():
    before = {"existing", "params"}
    ns = {"existing": 1, "params": params, "vm": "a", "_hidden": 3, "triad_ntimes": 4}
    p = params.from_namespace(ns, before, "triad")
    assert p["vm"] == "a" and p["triad_ntimes"] == 4
    ns["triad_nitmes"] = 4
    with pytest.raises(params.ParamError, match="unknown parameter 'triad_nitmes'"):
        params.from_namespace(ns, before, "triad")


def test_digest_depends_on_what_is_measured_only():
    a = params.validate({"vm": "x"}, "triad")
    b = params.validate({"vm": "x", "run_id": "r1", "runs_dir": "/elsewhere"}, "triad")
    c = params.validate({"vm": "x", "triad_ntimes": 3}, "triad")
    assert params.digest(a, "triad") == params.digest(b, "triad") != params.digest(c, "triad")


def test_a_custom_placement_sharing_one_cpu_needs_two_hosts():
    one = {"label": "same", "cpus": [0, 0]}
    with pytest.raises(params.ParamError, match="both ranks on CPU 0 of one host"):
        params.validate({"pingpong_placements": [one]}, "pingpong")
    with pytest.raises(params.ParamError, match="both ranks on CPU 0 of one host"):
        params.validate({"pingpong_placements": [one | {"hosts": ["a", "a"]}]}, "pingpong")
    P = params.validate({"pingpong_placements": [one | {"hosts": ["a", "b"]}]}, "pingpong")
    assert P["pingpong_placements"][0]["cpus"] == [0, 0]
