"""Results store (atomic files, loading many runs) and sweeps (stored as measured, resumed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from burstbench import params, registry
from burstbench.benchmarks import triad
from burstbench.benchmarks.triad.results import METRICS
from burstbench.core import runner, servers, store, sweep

SMALL = {"vm": "t", "triad_size": 50_000, "triad_ntimes": 2, "triad_threads": [1, 2],
         "triad_places": ["cores"], "triad_bind": ["close", "spread"],
         "triad_variants": [{"compiler": "gcc", "flags": "-O2 -fopenmp"}],
         "triad_baselines": ["numpy"], "triad_repetitions": 2}


def small_params(tmp_path, **over):
    return params.validate(SMALL | {"runs_dir": str(tmp_path)} | over, "triad")


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    f = tmp_path / "t.csv"
    store.atomic_write(f, "old\n")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        store.atomic_write(f, "new\n")
    assert f.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]  # no temporary left behind


def test_plan_labels_and_order(tmp_path):
    p = small_params(tmp_path)
    pl = triad.plan(p)
    labels = [t.config["label"] for t in pl.tasks]
    gcc = pl.variants[0]["variant"]
    assert f"{gcc}+cores+close" in labels and f"{gcc}+cores+spread" in labels
    assert any(lab.startswith("numpy") for lab in labels)
    # a process per affinity for gcc (its 2 thread counts in turn), 1 for numpy, x 2
    # repetitions, repetitions outermost
    assert len(pl.tasks) == 6
    assert [len(t.config["runs"]) for t in pl.tasks] == [2, 2, 1] * 2
    assert [t.config["repetition"] for t in pl.tasks] == [1] * 3 + [2] * 3
    assert len({t.key for t in pl.tasks}) == 6
    env = dict(pl.tasks[0].env)
    assert env["OMP_PLACES"] == "cores" and env["OMP_PROC_BIND"] == "close"
    # one server per variant and affinity setting measures its repetitions: a later
    # repetition's estimate has no process start in it
    assert [t.session for t in pl.tasks[3:]] == [t.session for t in pl.tasks[:3]]
    assert len({t.session for t in pl.tasks}) == 3
    assert all(b.estimate_s < a.estimate_s for a, b in zip(pl.tasks[:3], pl.tasks[3:]))
    # the probe timed one thread and all the CPUs (2 here, in the first compiled variant)
    assert pl.calibration.startswith(f"by Triad passes of {gcc} on ")
    assert "one thread" in pl.calibration


def test_triad_serve_false_measures_each_repetition_in_a_fresh_process(tmp_path):
    pl = triad.plan(small_params(tmp_path, triad_serve=False))
    assert {t.session for t in pl.tasks} == {""}
    assert [t.estimate_s for t in pl.tasks[3:]] == [t.estimate_s for t in pl.tasks[:3]]


def test_plan_crosses_store_policies_with_the_c_variants_only(tmp_path):
    """Streaming points for each C variant that has streaming stores, labelled
    '<variant>-streaming+...'; a variant built without them is skipped with a note; the
    baselines keep their own (NumPy: memmove)."""
    p = small_params(tmp_path, triad_stores=["normal", "streaming"], triad_threads=[2],
                     triad_repetitions=1, triad_variants=[
                         {"compiler": "gcc", "flags": "-O2 -fopenmp"},
                         {"compiler": "gcc", "flags": "-O2 -fopenmp -DSTREAM_NO_STREAMING",
                          "tag": "nont"}])
    pl = triad.plan(p)
    gcc, nont = (v["variant"] for v in pl.variants[:2])
    by_label = {run["label"]: (t, run) for t in pl.tasks for run in t.config["runs"]}
    isa = pl.variants[0].get("streaming_isa")
    assert f"{gcc}+cores+close" in by_label and f"{nont}+cores+close" in by_label
    assert (f"{gcc}-streaming+cores+spread" in by_label) == bool(isa)
    assert not any(lab.startswith(f"{nont}-streaming") for lab in by_label)
    assert any(f"variant {nont} has no streaming stores" in n for n in pl.notes)
    for lab, (t, run) in by_label.items():
        streaming = "-streaming+" in lab
        assert run["stores"] == ("streaming" if streaming else
                                 "memmove" if t.config["impl"] == "numpy" else "normal")
        assert ("--stores" in t.argv) == (t.config["impl"] == "c")
        if t.config["impl"] == "c":  # one process measures both policies of its variant
            assert run["stores"] in t.argv[t.argv.index("--stores") + 1].split(",")
    assert len({t.key for t in pl.tasks}) == len(pl.tasks)


def test_plan_skips_missing_compilers_and_refuses_bad_ones(tmp_path):
    # a known compiler that is not there (a path that does not exist: whether or not this
    # machine has nvc on PATH)
    p = small_params(tmp_path, triad_variants=[{"compiler": "gcc", "flags": "-O2 -fopenmp"},
                                               {"compiler": "/nonexistent/bin/nvc",
                                                "flags": "-fast -mp"}])
    pl = triad.plan(p)
    assert any("skipped variant /nonexistent/bin/nvc" in n and "not installed" in n
               for n in pl.notes)
    assert [v["compiler"] for v in pl.variants if v.get("impl", "c") == "c"] == ["gcc"]
    with pytest.raises(params.ParamError, match="failed to compile"):
        triad.plan(small_params(tmp_path, triad_variants=[
            {"compiler": "gcc", "flags": "-O2 -fbroken-flag"}]))
    with pytest.raises(params.ParamError, match="ignores KMP_AFFINITY"):
        triad.plan(small_params(tmp_path, triad_variants=[
            {"compiler": "gcc", "flags": "-O2 -fopenmp",
             "kmp_affinity": ["granularity=core,compact"]}]))
    with pytest.raises(params.ParamError, match="unknown compiler 'gcx'"):
        triad.plan(small_params(tmp_path, triad_variants=[{"compiler": "gcx", "flags": ""}]))
    with pytest.raises(params.ParamError, match="two variants are labelled"):
        triad.plan(small_params(tmp_path, triad_variants=[
            {"compiler": "gcc", "flags": "-O2 -fopenmp"},
            {"compiler": "gcc", "flags": "-O3 -fopenmp"}]))


def test_interrupted_sweep_keeps_results_and_resumes(tmp_path, monkeypatch):
    p = small_params(tmp_path)
    real = runner.launch
    calls = {"n": 0}

    def interrupt_third(task):
        calls["n"] += task.key not in ("info", "probe")  # the plan's launches do not count
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(runner, "launch", interrupt_third)
    with pytest.raises(KeyboardInterrupt):
        triad.SPEC.measure(p, progress=False)
    (run_dir,) = (tmp_path / "t").iterdir()
    run = store.Run(run_dir)
    sec = run.section("triad")
    assert sec["status"] == "interrupted"
    kept = pd.read_csv(run.table_path("triad"))
    assert kept["key"].nunique() == 2  # the two measured before Ctrl-C
    # what is left is all the rest, with its estimate (it said 0 left: only what a budget's
    # later pass had kept back counted, not the interrupted pass's own)
    assert sec["left"] == sec["planned"] - 2 and sec["left_estimate_s"] > 0

    monkeypatch.setattr(runner, "launch", real)
    calls["n"] = 0
    run2, table = triad.SPEC.measure(p, progress=False)  # same parameters: resumes that run
    assert run2.root == run_dir
    assert table["key"].nunique() == 6  # processes; 10 configurations
    # configurations x functions x metrics; NumPy's (2 of 10) without a traffic model
    assert len(table) == (8 * len(METRICS) + 2 * (len(METRICS) - 1)) * 4
    assert run2.section("triad")["status"] == "complete"
    # a finished run is not resumed: the next identical sweep starts a new run
    assert store.find_resumable(tmp_path, "t", "triad", params.digest(p, "triad")) == ""


def test_servers_that_cannot_all_keep_their_arrays_measure_a_block_at_a_time(
        tmp_path, monkeypatch, capsys):
    """Room for one server's arrays (and its interpreter): each setting's repetitions are
    measured together, by one server that ends after its last, and the sweep says so."""
    room = 40 << 20  # a C server holds 3 x 0.4 MB and 32 MiB, NumPy's 1.6 MB and 64 MiB
    monkeypatch.setattr(servers, "room", lambda: room)
    measured, real = [], servers.Servers.launch

    def logged(self, task):
        measured.append((task.session, task.config["repetition"], len(self.live)))
        return real(self, task)

    monkeypatch.setattr(servers.Servers, "launch", logged)
    run, table = triad.SPEC.measure(small_params(tmp_path), progress=False)
    out = capsys.readouterr().out
    assert ("note: the 3 processes would hold 0.138 GB side by side, more than the "
            "0.0419 GB that leave 20% of the memory free: they measure in 3 blocks, one "
            "after another, each process touching its memory once (repetitions alternate "
            "within a block)\n") in out
    sessions = list(dict.fromkeys(s for s, _, _ in measured))
    assert len(sessions) == 3
    assert [(s, r) for s, r, _ in measured] == [(s, r) for s in sessions for r in (1, 2)]
    # a server ends after its last task: the 2nd (started beside the 1st) alone is left
    # when its turn comes, and none when the 3rd starts
    assert [n for _, r, n in measured if r == 1] == [0, 1, 0]  # the 2nd started with the 1st
    sec = run.section("triad")
    assert sec["status"] == "complete" and sec["blocks"] == 3
    assert table["key"].nunique() == 6


def test_failed_configuration_is_reported_and_the_sweep_goes_on(tmp_path, monkeypatch):
    p = small_params(tmp_path, triad_repetitions=1)
    real = runner.launch

    def fail_numpy(task):
        if task.config.get("impl") == "numpy":
            raise runner.TaskFailed("simulated crash")
        return real(task)

    monkeypatch.setattr(runner, "launch", fail_numpy)
    # one process a configuration set: gcc's two affinity settings, numpy
    with pytest.raises(sweep.SweepFailed, match="1 of 3 configurations failed"):
        triad.SPEC.measure(p, progress=False)
    (run_dir,) = (tmp_path / "t").iterdir()
    sec = store.Run(run_dir).section("triad")
    assert sec["status"] == "incomplete" and "simulated crash" in sec["failures"][0]["reason"]
    assert pd.read_csv(store.Run(run_dir).table_path("triad"))["key"].nunique() == 2


def test_a_killed_sweep_leaves_parts_that_load_and_resume(tmp_path):
    p = small_params(tmp_path, triad_repetitions=1)
    run, _ = triad.SPEC.open_run(p)
    pl = triad.plan(p)
    task = pl.tasks[0]
    out, err = runner.launch(task)
    rows, raw, _ = triad.parse(task, out, err)
    run.save("triad", task.key, [r | {"run_id": run.run_id, "vm": "t"} for r in rows], raw,
             triad.COLUMNS)
    # ... and the process died here, before finalize: the part is on disk
    loaded = triad.SPEC.load(tmp_path)
    # its two thread counts x functions x metrics
    assert len(loaded.table) == 2 * 4 * len(METRICS)
    assert any("not finalized" in msg for msg in loaded.problems)
    assert run.done_keys("triad") == {task.key}


def test_a_finalize_killed_before_removing_the_parts_adds_nothing_twice(tmp_path, monkeypatch):
    """A kill after the table was written but before its parts were deleted: the next
    finalize (the resumed run's) keeps every row once and loses no raw record."""
    run = store.Run(tmp_path / "r")
    run.root.mkdir()
    rows = [{"key": k, "metric": "m", "value": v, "unit": "1"} for k, v in (("a", 1), ("b", 2))]
    for r in rows:
        run.save("triad", r["key"], [r], [{"key": r["key"]}], ())
    real_unlink = Path.unlink

    def killed_at_the_parts(self, *a, **k):
        if self.parent == run.parts_dir("triad"):
            raise KeyboardInterrupt
        return real_unlink(self, *a, **k)

    monkeypatch.setattr(Path, "unlink", killed_at_the_parts)
    with pytest.raises(KeyboardInterrupt):
        run.finalize("triad")
    monkeypatch.undo()
    assert len(list(run.parts_dir("triad").glob("*.json"))) == 2  # both still there
    run.save("triad", "c", [{"key": "c", "metric": "m", "value": 3, "unit": "1"}], [{"key": "c"}],
             ())
    table = run.finalize("triad")
    assert sorted(table["key"]) == ["a", "b", "c"]
    raw = [json.loads(x)["key"] for x in run.raw_path("triad").read_text().splitlines()]
    assert sorted(raw) == ["a", "b", "c"]


def test_load_reports_damaged_runs_by_name_and_loads_the_rest(tmp_path):
    p = small_params(tmp_path, triad_repetitions=1, triad_threads=[1])
    good, _ = triad.SPEC.measure(p, progress=False)
    bad, _ = triad.SPEC.measure(p, progress=False)
    junk = tmp_path / "t" / "junk-run"
    junk.mkdir()
    (junk / "provenance.json").write_text("{not json")
    bad.table_path("triad").write_text("this,is\nnot,a results table\n")
    loaded = store.load(tmp_path, "triad")
    assert set(loaded.table["run_id"]) == {good.run_id}
    text = " ".join(loaded.problems)
    assert "junk-run" in text and bad.run_id in text


def test_provenance_has_what_the_issue_lists(tmp_path):
    p = small_params(tmp_path, triad_repetitions=1, triad_threads=[1])
    run, table = triad.SPEC.measure(p, progress=False)
    prov = run.provenance()
    cpu = prov["system"]["cpu"]
    for key in ("model", "sockets", "cores", "threads_per_core", "caches"):
        assert cpu[key], key
    assert prov["system"]["numa"] and prov["system"]["memory"]["total_bytes"] > 0
    assert prov["system"]["os"]["kernel"] and prov["system"]["hostname"]
    assert "numpy" in prov["software"]["packages"] and prov["software"]["python"]
    assert "gcc" in prov["software"]["compilers"]
    assert "dirty" in prov["git"] and "commit" in prov["git"]
    sec = prov["benchmarks"]["triad"]
    assert sec["started"] and sec["finished"] and sec["params"]["triad_size"] == 50_000
    v = sec["variants"][0]
    assert v["flags"] == "-O2 -fopenmp" and v["openmp_library"] and v["compiler_version"]
    raw = [json.loads(x) for x in run.raw_path("triad").read_text().splitlines()]
    assert raw and all("binding" in r and "env" in r for r in raw)
    assert list(table.columns) == store.table_columns(triad.COLUMNS)
    assert (table["run_id"] == run.run_id).all() and (table["vm"] == "t").all()


def test_spread_statistics():
    base = {"vm": "v", "run_id": "r", "label": "L", "impl": "c", "variant": "gcc",
            "compiler": "gcc", "places": "cores", "bind": "close", "kmp_affinity": "",
            "threads": 2, "function": "Triad", "metric": "best_rate", "bound_cpus": "0,1"}
    df = pd.DataFrame([base | {"value": v} for v in (10.0, 12.0, 14.0)])
    s = triad.spread(df)
    assert len(s) == 1
    row = s.iloc[0]
    assert (row.median_gbs, row.min_gbs, row.max_gbs, row.n) == (12.0, 10.0, 14.0, 3)
    assert row.cv == pytest.approx(2.0 / 12.0, abs=1e-4)


def test_a_hung_configuration_is_killed_whole_at_its_timeout():
    import sys
    import time

    task = runner.Task("hang", {"label": "hang"},
                       ("/bin/sh", "-c", f"{sys.executable} -c 'import time; time.sleep(60)' "
                        "& wait"), timeout_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(runner.TaskFailed, match="timeout of 0.5 s"):
        runner.launch(task)
    assert time.monotonic() - t0 < 25  # the grandchild (60 s) did not keep the pipes open


def test_a_failing_command_reports_its_error_line():
    task = runner.Task("bad", {}, ("/bin/sh", "-c", "echo noise >&2; echo 'error: the reason' >&2;"
                                   " exit 3"))
    with pytest.raises(runner.TaskFailed, match="^error: the reason$"):
        runner.launch(task)
    with pytest.raises(runner.TaskFailed, match="cannot start"):
        runner.launch(runner.Task("missing", {}, ("/no/such/program",)))


def test_which_runs_resume(tmp_path):
    d = {"triad": "aaa", "pingpong": "bbb"}
    run = store.plan_run(tmp_path, "v", "r1", {k: (v, {}) for k, v in d.items()})
    assert store.find_resumable_many(tmp_path, "v", d) == "r1"  # planned, not started
    run.set_section("triad", status="complete")
    assert store.find_resumable_many(tmp_path, "v", d) == "r1"  # pingpong still pending
    run.set_section("pingpong", status="complete")
    assert store.find_resumable_many(tmp_path, "v", d) == ""  # finished
    # a finished run is not extended with a benchmark it never planned
    assert store.find_resumable_many(tmp_path, "v", d | {"biccg": "ccc"}) == ""
    run.set_section("pingpong", status="interrupted")
    assert store.find_resumable_many(tmp_path, "v", {"pingpong": "xxx"}) == ""  # other params



def test_a_run_whose_selection_changed_resumes_or_starts_anew(tmp_path):
    """`only` and `skip` are in no benchmark's fingerprint: a file that now measures more
    benchmarks resumes its unfinished run (the new ones planned beside, pending), and after
    a finished run starts a new one."""
    def digests(values: dict) -> dict:
        return {n: params.digest(params.validate(values, n), n)
                for n in params.selection(values)}

    first = digests({"vm": "v", "only": ["triad"]})
    store.plan_run(tmp_path, "v", "r1", {k: (v, {}) for k, v in first.items()})
    wider = digests({"vm": "v", "skip": ["storage"]})
    assert list(first) == ["triad"] and wider["triad"] == first["triad"]
    assert store.find_resumable_many(tmp_path, "v", wider) == "r1"
    run = store.plan_run(tmp_path, "v", "r1", {k: (v, {}) for k, v in wider.items()})
    assert run.section("pingpong")["status"] == "pending"
    for name in wider:
        run.set_section(name, status="complete")
    assert store.find_resumable_many(tmp_path, "v", digests({"vm": "v"})) == ""

# -- every column a benchmark writes is kept ----------------------------------------------------

#: Small enough for seconds: one configuration of each registered benchmark.
ONE_CONFIGURATION = {
    "triad": {"triad_size": 50_000, "triad_ntimes": 2, "triad_threads": [1],
              "triad_variants": [{"compiler": "installed"}], "triad_baselines": [],
              "triad_repetitions": 1},
    "pingpong": {"pingpong_placements": [{"label": "two", "cpus": [0, 1]}],
                 "pingpong_tests": ["latency"], "pingpong_max_size": 8,
                 "pingpong_baselines": [], "pingpong_validate": False,
                 "pingpong_iterations": 5, "pingpong_skip": 1, "pingpong_repetitions": 1},
    "biccg": {"biccg_problems": [{"poisson": [8, 8, 8]}], "biccg_ranks_per_node": [1],
              "biccg_threads": [1], "biccg_baselines": [], "biccg_repetitions": 1},
    "storage": {"storage_targets": [{"name": "t", "path": "$BURSTBENCH_TEST_IO"}],
                "storage_access": ["file-per-process"], "storage_ranks_per_node": [1],
                "storage_block_size": "1M", "storage_repetitions": 1},
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", list(registry.benchmarks()))
def test_every_key_a_benchmark_parses_survives_the_store(name, tmp_path, monkeypatch):
    """A real configuration of each registered benchmark, parsed as a sweep parses it,
    stored, folded and loaded: every key of its rows is a column with the row's value."""
    spec = registry.benchmarks()[name]
    monkeypatch.setenv("BURSTBENCH_TEST_IO", str(tmp_path / "io"))  # storage's folder
    P = params.validate(ONE_CONFIGURATION[name] | {"vm": "t", "runs_dir": str(tmp_path)}, name)
    run, _ = spec.open_run(P)
    task = spec.plan(P).tasks[0]
    rows, raw, _ = spec.parse(task, *runner.launch(task))
    rows = [r | {"run_id": run.run_id, "vm": "t"} for r in rows]
    run.save(name, task.key, rows, raw, spec.columns)
    folded = run.finalize(name, spec.columns)
    loaded = spec.load(tmp_path).table
    for table in (folded, loaded):
        for key in {k for r in rows for k in r}:
            assert key in table.columns, key
            pairs = list(zip(table[key].tolist(), [r.get(key) for r in rows]))
            assert all(_same(got, want) for got, want in pairs), (key, pairs)


def _same(got: object, want: object) -> bool:
    """A stored value read back equals the value written: numbers as numbers (a CSV gives
    2.0 for 2), missing as missing (a CSV cell holds no empty string), the rest as text."""
    if want is None or want == "" or (isinstance(want, float) and want != want):
        return got == "" or pd.isna(got)
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        return float(got) == float(want)
    return str(got) == str(want)


def test_a_row_with_an_undeclared_column_is_refused_by_name(tmp_path):
    run = store.Run(tmp_path / "r")
    row = {"key": "k", "metric": "m", "value": 1, "unit": "1", "threads": 2, "api": "posix"}
    with pytest.raises(store.StoreError) as err:
        run.save("demo", "k", [row], [], ("threads",))
    assert str(err.value) == ("demo: the rows hold column(s) api that the benchmark does not "
                              "declare (add them to its columns)")
    assert not run.parts_dir("demo").exists()  # nothing stored
    run.save("demo", "k", [row], [], ("threads", "api"))
    assert list(run.finalize("demo", ("threads", "api")).columns) == store.table_columns(
        ("threads", "api"))
