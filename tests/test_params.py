"""Parameter files and notebooks agree; bad keys and values fail with one clear line."""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import pytest
import yaml

from burstbench import params
from burstbench.core import checks

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


@pytest.mark.parametrize("section,notebook", params.notebooks().items())
def test_notebook_parameters_equal_the_schema(section, notebook):
    cell = parameters_cell(ROOT / "notebooks" / notebook)
    schema = params.schema(section)
    assert set(cell) == set(schema)
    for name, value in cell.items():
        assert value == schema[name].default, name


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: p.name)
def test_every_yaml_key_is_known_and_valid(path):
    values = params.load_file(path)
    for section in params.notebooks():
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


def load_error(tmp_path, text: str) -> tuple[Path, str]:
    """The params file holding `text`, and the one-line error loading it raises."""
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(params.ParamError) as err:
        params.load_file(f)
    return f, str(err.value)


def test_unknown_key_names_it_and_the_closest_valid_ones(tmp_path):
    f, msg = load_error(tmp_path, "vm: x\ntriad_threadz: [1]\n")
    assert msg.startswith(f"{f}: unknown parameter 'triad_threadz' (did you mean triad_threads")
    assert "valid: " not in msg and "biccg_tol" not in msg and "\n" not in msg
    hints = msg.split("did you mean ")[1].rstrip("?)").replace(" or ", ", ").split(", ")
    assert hints[0] == "triad_threads" and 1 <= len(hints) <= 3
    assert all(h in params.known_names() for h in hints)


def test_unknown_key_without_a_close_match_says_where_the_keys_are(tmp_path):
    _, msg = load_error(tmp_path, "vm: x\nfoo: 1\n")
    assert "unknown parameter 'foo'" in msg and "papermill_params/README.md" in msg
    assert "did you mean" not in msg and "triad_ntimes" not in msg and "\n" not in msg


def test_malformed_yaml_names_the_line(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("vm: x\ntriad_threads: [1, 2\ntriad_ntimes: 3\n")
    with pytest.raises(params.ParamError, match=r"malformed YAML in .*p.yaml line \d"):
        params.load_file(f)
    f.write_text("- just\n- a list\n")
    with pytest.raises(params.ParamError, match="expected a mapping"):
        params.load_file(f)


def test_a_key_given_twice_is_malformed_naming_both_lines(tmp_path):
    """PyYAML keeps the last of two equal keys silently; a params file refuses them, at the
    top level and inside a value (a flow mapping on one line too)."""
    f, msg = load_error(tmp_path, "vm: x\ntriad_ntimes: 3\nvm: y\n")
    assert msg == f"malformed YAML in {f} line 3: 'vm' given twice (first on line 1)"
    f, msg = load_error(tmp_path, "vm: x\nvm_price: {payg: 1, payg: 2}\n")
    assert msg == f"malformed YAML in {f} line 2: 'payg' given twice (first on line 2)"
    f, msg = load_error(tmp_path, "vm: x\nvm_price: {1: a, true: b}\n")
    assert msg.endswith("line 2: 'true' given twice (first on line 2 as '1')")
    f, msg = load_error(tmp_path, "a: &a {payg: 1}\nb: &b {spot: 2}\n"
                        "vm_price:\n  <<: *a\n  <<: *b\n")
    assert msg == (f"malformed YAML in {f} line 5: '<<' given twice (first on line 4): "
                   "merge several maps with one, <<: [*a, *b]")
    assert checks.loads("a: &a {payg: 1}\nb: &b {spot: 2}\nc: {<<: [*a, *b], payg: 3}\n")[
        "c"] == {"payg": 3, "spot": 2}
    f.write_text("vm: x\ntriad_ntimes: 3\n")
    assert params.load_file(f)["triad_ntimes"] == 3


def test_a_file_that_is_not_utf8_is_one_line_naming_the_line(tmp_path, cli):
    f = tmp_path / "p.yaml"
    f.write_bytes(b"vm: x\n\xff\xfe: 1\n")
    with pytest.raises(params.ParamError) as err:
        params.load_file(f)
    assert str(err.value) == f"{f} line 2: not UTF-8 text (byte 0xff)"
    for argv in (["params", str(f)], ["report", "--params", str(f),
                                      "--figures-dir", str(tmp_path / "figs")]):
        proc = cli("-m", "burstbench", *argv, timeout=120)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
            f"error: {f} line 2: not UTF-8 text (byte 0xff)"), proc.stderr
        assert "Traceback" not in proc.stderr


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
    ("triad_stores", ["nontemporal"], "unknown value 'nontemporal'"),
    ("triad_stores", [], "non-empty"),
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


def test_from_namespace_reads_the_known_keys_by_name():
    ns = {"existing": 1, "params": params, "vm": "a", "_hidden": 3, "triad_ntimes": 4,
          "plan": object(), "P": {"vm": "old"}, "pingpong_tests": ["bw"]}
    p = params.from_namespace(ns, "triad")
    assert p["vm"] == "a" and p["triad_ntimes"] == 4 and p["triad_threads"] == "all"
    for stray, hint in (("triad_nitmes", "did you mean triad_ntimes, "),
                        ("run_idd", "did you mean run_id"), ("biccg_tools", "biccg_tol")):
        with pytest.raises(params.ParamError) as err:
            params.from_namespace(ns | {stray: 4}, "triad")
        assert str(err.value).startswith(
            f"notebook 010_measure_triad.ipynb: unknown parameter '{stray}' (")
        assert hint in str(err.value)


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


# --- numbers in YAML 1.2 spellings -------------------------------------------------------------

@pytest.mark.parametrize("text,value", [
    ("1e-7", 1e-7), ("1E-7", 1e-7), ("-2.5e3", -2500.0), (".5", 0.5), ("+1e3", 1000.0),
    ("-.5", -0.5), ("1.5e3", 1500.0), ("1.0e-7", 1e-7), ("2.5", 2.5), ("1_000.5", 1000.5),
])
def test_yaml_1_2_float_spellings_load_as_floats(text, value):
    got = yaml.load(f"x: {text}\n", Loader=checks.ParamsLoader)["x"]
    assert type(got) is float and got == value


@pytest.mark.parametrize("text,value", [
    ("7", 7), ("-3", -3), ("+4", 4), ("1_000", 1000), ("0", 0), ("true", True),
    ("'1e-7'", "1e-7"), ('"1e-7"', "1e-7"), ("1e-7x", "1e-7x"), ("e3", "e3"), ("1.2.3", "1.2.3"),
    ("~", None), ("abc", "abc"),
])
def test_other_scalars_keep_their_type(text, value):
    got = yaml.load(f"x: {text}\n", Loader=checks.ParamsLoader)["x"]
    assert type(got) is type(value) and got == value


def test_inf_and_nan_still_load_and_are_refused_where_a_number_goes():
    got = yaml.load("a: .inf\nb: -.inf\nc: .nan\n", Loader=checks.ParamsLoader)
    assert got["a"] == math.inf and got["b"] == -math.inf and math.isnan(got["c"])
    for v in (got["a"], got["c"]):
        with pytest.raises(params.ParamError, match="biccg_tol must be a positive number"):
            params.validate({"biccg_tol": v}, "biccg")


def test_biccg_tol_1e_7_as_the_readme_writes_it(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("vm: x\nbiccg_tol: 1e-7\nbiccg_timeout_s: +1e3\ntriad_peak_gbs: .5\n"
                 "triad_timeout_s: 6E2\ntriad_size: 1e9\npingpong_timeout_s: 2.5e2\n"
                 "pingpong_max_size: 6.5536e4\nvm_price: {payg: 1.5e2, spot: '2e1'}\n")
    values = params.load_file(f)
    assert values["biccg_tol"] == 1e-7 and values["biccg_timeout_s"] == 1000.0
    b = params.validate(values, "biccg", where=str(f))
    assert b["biccg_tol"] == 1e-7 and b["biccg_timeout_s"] == 1000.0
    t = params.validate(values, "triad", where=str(f))
    assert t["triad_peak_gbs"] == 0.5 and t["triad_timeout_s"] == 600.0
    assert t["triad_size"] == 1_000_000_000 and type(t["triad_size"]) is int
    pp = params.validate(values, "pingpong")
    assert pp["pingpong_timeout_s"] == 250.0 and pp["pingpong_max_size"] == 65536
    assert pp["vm_price"] == {"currency": "JPY", "region": "", "payg": 150.0, "spot": 20.0}


def test_numbers_survive_the_papermill_round_trip(tmp_path):
    """`burstbench run` hands papermill yaml.safe_dump(values); papermill reads it with its
    own YAML 1.1 loader: every number must come back as the same number."""
    from papermill.iorw import NoDatesSafeLoader

    f = tmp_path / "p.yaml"
    f.write_text("vm: x\nbiccg_tol: 1e-7\nbiccg_timeout_s: +1e3\ntriad_peak_gbs: .5\n"
                 "triad_size: 1e9\ntriad_timeout_s: -2.5e3\ntriad_ntimes: 1_000\n"
                 "vm_price: {payg: 1.5e2, currency: usd}\n")
    values = params.load_file(f)
    back = yaml.load(yaml.safe_dump(values), Loader=NoDatesSafeLoader)
    assert back == values
    assert all(type(back[k]) is type(values[k]) for k in values)


def test_a_quoted_number_where_a_number_goes_is_that_number():
    """papermill's own `-f file.yaml` (YAML 1.1) reads 1e-7 as a string: the notebook
    still gets the number, and the same fingerprint."""
    ns = {"existing": 1, "vm": "a", "biccg_tol": "1e-7", "biccg_timeout_s": " 1_800 "}
    p = params.from_namespace(ns, "biccg")
    assert p["biccg_tol"] == 1e-7 and type(p["biccg_tol"]) is float
    assert p["biccg_timeout_s"] == 1800.0
    q = params.validate({"vm": "a", "biccg_tol": 1e-7, "biccg_timeout_s": 1800}, "biccg")
    assert params.digest(p, "biccg") == params.digest(q, "biccg")
    for bad in ("1e-7x", "small", "", "0x10"):
        with pytest.raises(params.ParamError, match="biccg_tol must be a positive number"):
            params.validate({"biccg_tol": bad}, "biccg")


# --- empty and non-mapping files ---------------------------------------------------------------

@pytest.mark.parametrize("text", ["", "\n\n", "# just a comment\n# and another\n", "---\n",
                                  "--- # comment\n...\n"])
def test_an_empty_params_file_is_an_error(tmp_path, text):
    f = tmp_path / "x.yaml"
    f.write_text(text)
    with pytest.raises(params.ParamError) as err:
        params.load_file(f)
    assert str(err.value) == f"{f} is empty: a params file needs at least `vm: <name>`"


@pytest.mark.parametrize("text,kind", [("- a\n- b\n", "list"), ("vm\n", "str"),
                                       ("42\n", "int"), ("'vm: x'\n", "str")])
def test_a_params_file_that_is_not_a_mapping_is_an_error(tmp_path, text, kind):
    f = tmp_path / "x.yaml"
    f.write_text(text)
    with pytest.raises(params.ParamError) as err:
        params.load_file(f)
    msg = str(err.value)
    assert msg.startswith(f"{f}: expected a mapping") and kind in msg and "\n" not in msg


def test_empty_params_file_fails_in_params_and_run(tmp_path, capsys, monkeypatch):
    from burstbench import cli
    from burstbench.core import store

    def started(*args, **kwargs):
        raise AssertionError("a run was started from an empty params file")

    monkeypatch.setattr(store, "plan_run", started)  # nothing may be measured
    f = tmp_path / "x.yaml"
    f.write_text("# nothing yet\n")
    for argv in (["params", str(f)],
                 ["run", "--params", str(f), "--runs-dir", str(tmp_path / "runs")]):
        capsys.readouterr()
        assert cli.main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert err == f"error: {f} is empty: a params file needs at least `vm: <name>`\n", argv
        assert "ok:" not in out
    assert not (tmp_path / "runs").exists()


# --- list-valued keys say what they take ------------------------------------------------------

@pytest.mark.parametrize("section,key,value,message", [
    ("biccg", "biccg_threads", "two", "biccg_threads must be a list of integers (or one "
     "integer), not 'two'"),
    ("biccg", "biccg_threads", [1, "two"], "biccg_threads must be a list of integers (or one "
     "integer), not 'two'"),
    ("biccg", "biccg_threads", [[1, 2]], "biccg_threads must be a list of integers (or one "
     "integer), not [1, 2]"),
    ("biccg", "biccg_threads", {"a": 1}, "biccg_threads must be a list of integers (or one "
     "integer), not {'a': 1}"),
    ("biccg", "biccg_nodes", [True], "biccg_nodes must be a list of integers (or one integer), "
     "not True"),
    ("biccg", "biccg_ranks_per_node", 1.5, "biccg_ranks_per_node must be a list of integers "
     "(or one integer), not 1.5"),
    ("triad", "triad_threads", ["two"], "triad_threads must be a list of integers (or one "
     "integer), a range such as '1-16', or 'all', not 'two'"),
    ("triad", "triad_threads", None, "triad_threads must be a list of integers (or one "
     "integer), a range such as '1-16', or 'all', not None"),
    ("triad", "triad_places", [1], "triad_places must be a list of OMP_PLACES values "
     "(strings, or one string), not 1"),
    ("triad", "triad_bind", [None], "triad_bind must be a list of OMP_PROC_BIND values "
     "(strings, or one string), not None"),
    ("triad", "triad_kmp_affinity", [3], "triad_kmp_affinity must be a list of KMP_AFFINITY "
     "values (strings, or one string), not 3"),
    ("triad", "triad_baselines", [1], "triad_baselines must be a list of names from numba, "
     "numpy (or one name), not 1"),
    ("pingpong", "pingpong_tests", [True], "pingpong_tests must be a list of names from "
     "latency, bw, bibw (or one name), not True"),
    ("pingpong", "pingpong_baselines", [["mpi4py"]], "pingpong_baselines must be a list of "
     "names from mpi4py (or one name), not ['mpi4py']"),
    ("biccg", "biccg_baselines", [2], "biccg_baselines must be a list of names from scipy-cg, "
     "numba-ic0cg, numba-cg (or one name), not 2"),
    ("pingpong", "pingpong_hugepages", ["yes"], "pingpong_hugepages must be a list of true or "
     "false values (or one of them), not 'yes'"),
    ("pingpong", "pingpong_hosts", ["a", 1.5], "pingpong_hosts must be a list of strings "
     "(host names), not 1.5"),
    ("pingpong", "pingpong_hosts", "node1", "pingpong_hosts must be a list of strings "
     "(host names), not 'node1'"),
    ("biccg", "biccg_hosts", ["a", None], "biccg_hosts must be a list of strings "
     "(host names), not None"),
])
def test_a_bad_list_element_says_what_the_key_takes(section, key, value, message):
    with pytest.raises(params.ParamError) as err:
        params.validate({key: value}, section, where="p.yaml")
    assert str(err.value) == f"p.yaml: {message}"


def test_list_values_still_checked_one_by_one():
    for key, value, message in (("biccg_threads", [0], "biccg_threads must be at least 1"),
                                ("biccg_baselines", ["julia"], "unknown value 'julia'"),
                                ("biccg_nodes", [], "non-empty list")):
        with pytest.raises(params.ParamError, match=re.escape(message)):
            params.validate({key: value}, "biccg")
    assert params.validate({"biccg_threads": 2.0, "biccg_nodes": "1e1"}, "biccg")[
        "biccg_threads"] == [2]


# --- the common key `test` ---------------------------------------------------------------------

@pytest.mark.parametrize("section", params.notebooks())
def test_test_is_a_common_key_in_every_benchmark(section):
    assert params.schema(section)["test"].default is False
    assert params.validate({}, section)["test"] is False
    assert params.validate({"test": True}, section)["test"] is True
    passed = params.for_section({"test": True, "vm": "x", "other_key": 1}, section)
    assert passed == params.defaults(section) | {"test": True, "vm": "x"}
    with pytest.raises(params.ParamError, match="test must be true or false, not 'yes'"):
        params.validate({"test": "yes"}, section)


def test_smoke_yaml_is_a_test():
    values = params.load_file(ROOT / "papermill_params" / "smoke.yaml")
    assert values["test"] is True
    for section in params.notebooks():
        assert params.validate(values, section)["test"] is True
    for f in YAMLS:
        if f.name != "smoke.yaml":
            assert params.validate(params.load_file(f), "triad")["test"] is False, f.name


def test_a_test_run_never_resumes_a_measurement():
    """`test: true` is part of the fingerprint (so a test run and a VM measurement never share
    a run); `test: false` is not (so the fingerprints of earlier runs stay what they were)."""
    a = params.validate({"vm": "x"}, "triad")
    b = params.validate({"vm": "x", "test": False}, "triad")
    c = params.validate({"vm": "x", "test": True}, "triad")
    assert params.digest(a, "triad") == params.digest(b, "triad") != params.digest(c, "triad")
    # as before the keys existed, where the runs' triad_serve (since_runs False) and
    # triad_tiers (since_runs []: no ladder) are asked
    old = params.validate({"vm": "x", "triad_serve": False, "triad_tiers": []}, "triad")
    assert params.digest(old, "triad") == "522370d8883d"
    # served repetitions measure differently: an earlier run does not resume with them
    assert params.digest(a, "triad") != "522370d8883d"


def test_the_params_readme_is_written_from_the_code():
    """Each key's text is declared beside its check; the README's tables (the common keys,
    `only` and `skip`) are docs() and each benchmark's page in its package is keys_page()
    (run `burstbench params --write-docs` after changing one), so no key goes undocumented
    and a new benchmark's page is in its own folder."""
    from burstbench.registry import BENCHMARKS, folder

    readme = (ROOT / "papermill_params" / "README.md").read_text()
    assert readme.endswith(params.docs()), "run: python -m burstbench params --write-docs"
    pages = {name: (folder(name) / params.PAGE).read_text() for name in BENCHMARKS}
    for name, page in pages.items():
        assert page == params.keys_page(name), "run: python -m burstbench params --write-docs"
    common = readme.split("## Common keys")[1].split("## ")[0]
    assert all(f"| `{p.name}` |" in common for p in params.COMMON)
    for name, section in params.known_names().items():
        assert f"| `{name}` |" in (readme if section in ("common", "selection")
                                   else pages[section])
    assert "| `triad_variants` | gcc `-O3 -march=native -fopenmp` |" in pages["triad"]  # shown
    assert "| `biccg_tol` | `1e-7` |" in pages["biccg"]
    assert "| `pingpong_window` | `null` |" in pages["pingpong"]


def test_params_keys_prints_every_key(cli):
    proc = cli("-m", "burstbench", "params", "--keys")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == params.all_keys()
    assert all(f"| `{name}` |" in proc.stdout for name in params.known_names())


# --- which benchmarks a file measures: every registered one, unless `only` or `skip` ----------

def test_a_file_measures_every_benchmark_unless_it_says_otherwise():
    every = list(params.notebooks())
    assert params.selection({"vm": "x"}) == every
    assert params.selection({"only": ["biccg", "triad"]}) == ["triad", "biccg"]  # in order
    assert params.selection({"only": "biccg"}) == ["biccg"]
    assert params.selection({"skip": ["storage"]}) == [n for n in every if n != "storage"]
    assert params.selection({"only": []}) == every
    # not a notebook's parameter: never in a notebook's values nor in the fingerprint
    P = params.validate({"vm": "x", "only": ["triad"]}, "triad")
    assert "only" not in P
    assert params.digest(P, "triad") == params.digest(params.validate({"vm": "x"}, "triad"),
                                                      "triad")


@pytest.mark.parametrize("values,message", [
    ({"only": ["triad", "biccgg"]}, "p.yaml: only: unknown benchmark 'biccgg' (did you mean "
     "biccg? known: triad, pingpong, biccg, storage)"),
    ({"skip": ["disk"]}, "p.yaml: skip: unknown benchmark 'disk' (known: triad, pingpong, "
     "biccg, storage)"),
    ({"only": ["triad"], "skip": ["storage"]}, "p.yaml: only and skip together: give one "
     "(only: the benchmarks to measure; skip: those to leave out)"),
    ({"skip": ["triad", "pingpong", "biccg", "storage"]}, "p.yaml: skip leaves no benchmark to "
     "measure (known: triad, pingpong, biccg, storage)"),
    ({"only": {"triad": 1}}, "p.yaml: only must be a list of benchmark names (or one name), "
     "not {'triad': 1}"),
])
def test_a_bad_selection_is_one_line(tmp_path, values, message):
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({"vm": "x"} | values))
    with pytest.raises(params.ParamError) as err:
        params.load_file(f)
    assert str(err.value) == message.replace("p.yaml", str(f))


def test_only_on_the_command_line_narrows_the_file():
    assert params.choose({"skip": ["storage"]}, "f.yaml", "biccg,triad") == ["biccg", "triad"]
    with pytest.raises(params.ParamError) as err:
        params.choose({"skip": ["storage"]}, "f.yaml", "storage")
    assert str(err.value) == ("--only storage: f.yaml leaves storage out (skip: [storage]); "
                              "it measures triad, pingpong, biccg")
    with pytest.raises(params.ParamError) as err:
        params.choose({}, "f.yaml", "triadd")
    assert str(err.value) == ("--only: unknown benchmark 'triadd' (did you mean triad? known: "
                              "triad, pingpong, biccg, storage)")


def test_the_committed_files_measure_what_they_did_and_any_new_benchmark():
    """A VM's file measures every benchmark; a file for some of them says which."""
    every = list(params.notebooks())
    said = {"local-model.yaml": ["triad", "biccg"],
            "lent-h100-16c.yaml": [n for n in every if n != "storage"],  # older than storage
            "smoke.yaml": ["triad", "pingpong", "biccg", "storage"]}  # seconds: the built-ins
    for f in YAMLS:
        values = params.load_file(f)
        assert params.selection(values, f.name) == said.get(f.name, every), f.name
        for name in values.get("only", []):  # a file for some benchmarks holds their keys
            assert any(k.startswith(name + "_") for k in values), (f.name, name)


def test_params_says_what_a_file_measures(cli):
    proc = cli("-m", "burstbench", "params", "papermill_params/local-model.yaml",
               "papermill_params/local.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "ok: papermill_params/local-model.yaml (a measurement: burstbench run --params; "
        "measures triad, biccg; leaves out pingpong, storage)",
        "ok: papermill_params/local.yaml (a measurement: burstbench run --params; measures "
        f"{', '.join(params.notebooks())})"]


def test_the_job_scripts_follow_the_selection(tmp_path, capsys):
    from burstbench import cli

    f = tmp_path / "p.yaml"
    f.write_text("vm: j\nonly: [triad]\nbiccg_nodes: [8]\n")
    argv = ["jobs", "--scheduler", "slurm", "--params", str(f), "--nodes", "1",
            "--runs-dir", str(tmp_path / "runs")]
    assert cli.main(argv) == 0  # BICCG's 8 nodes are not measured
    assert "burstbench run --params" in capsys.readouterr().out
    f.write_text("vm: j\nbiccg_nodes: [8]\n")
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == (f"error: {f} asks for 8 nodes (biccg_nodes), but the job "
                                       "has --nodes 1\n")
    assert cli.main([*argv, "--only", "triad"]) == 0


def test_write_docs_keeps_the_hand_written_part(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# Parameter files\n\nby hand\n")
    assert params.write_docs(readme)  # no mark yet: the tables are appended
    assert readme.read_text() == "# Parameter files\n\nby hand\n\n" + params.docs()
    assert not params.write_docs(readme)  # current: left as it is
    readme.write_text("# Parameter files\n\nedited\n\n" + params.DOCS_MARK + "\nstale\n")
    assert params.write_docs(readme)
    assert readme.read_text() == "# Parameter files\n\nedited\n\n" + params.docs()


def test_params_command_needs_files_or_write_docs(cli):
    proc = cli("-m", "burstbench", "params")
    assert proc.returncode == 2 and "give parameter files to check" in proc.stderr


def test_a_param_error_shows_as_one_line_in_ipython():
    """JupyterLab and papermill show the message, not a chained traceback around it."""
    err = params.ParamError("notebook x.ipynb: triad_ntimes must be at least 2, not 1")
    assert err._render_traceback_() == [
        "ParamError: notebook x.ipynb: triad_ntimes must be at least 2, not 1"]


@pytest.mark.parametrize("text,code,out", [
    ("user_job: {name: mine, problem: {poisson: [64, 64, 64]}, nodes: [1, 2]}\n"
     "queue_wait_h: 4\n", 0, "ok: {f} (report parameters: burstbench report --params)\n"),
    ("vm: x\ntriad_ntimes: 3\n", 0, "ok: {f} (a measurement: burstbench run --params; measures "
     "triad, pingpong, biccg, storage)\n"),
    ("user_jobs: {name: mine}\n", 2, "error: {f}: 'user_jobs' is not a parameter of any report "
     "notebook (did you mean user_job? they are: "),
    ("user_job: {name: mine, node: [1, 2]}\n", 2, "error: {f}: user_job: unknown key 'node' "
     "(did you mean nodes? the keys are: name, nodes, problem, solves, input_gb, output_gb, "
     "keep_months, flow_node_hours)\n"),
    ("vm: x\ntriad_ntime: 3\n", 2, "error: {f}: unknown parameter 'triad_ntime' (did you mean "
     "triad_ntimes")])
def test_params_checks_either_kind_of_file_and_says_which(cli, tmp_path, text, code, out):
    """One command for a measurement file and a report-parameter file: it says which, and a
    typo of either kind is named with the nearest valid key."""
    f = tmp_path / "p.yaml"
    f.write_text(text)
    proc = cli("-m", "burstbench", "params", str(f))
    assert proc.returncode == code, proc.stderr
    said = proc.stdout if code == 0 else proc.stderr
    assert said.startswith(out.format(f=f)), said
