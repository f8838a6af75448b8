"""A run within a budget (issue 31): refusals, priority order, the stop before the next
configuration that does not fit, and the resume that measures what was left."""

from __future__ import annotations

import dataclasses
import json
import os
import time

import pandas as pd
import pytest

from burstbench import cli, params, registry
from burstbench.benchmarks import triad
from burstbench.benchmarks.biccg import tasks as biccg
from burstbench.benchmarks.pingpong import tasks as pingpong
from burstbench.benchmarks.storage import tasks as storage
from burstbench.core import budget, launch, runner, store, sweep, workmodel

SMALL = {"vm": "t", "triad_size": 50_000, "triad_ntimes": 2, "triad_threads": [1, 2],
         "triad_places": ["cores"], "triad_bind": ["close", "spread"],
         "triad_variants": [{"compiler": "gcc", "flags": "-O2 -fopenmp"}],
         "triad_baselines": ["numpy"], "triad_repetitions": 2}


@pytest.fixture(autouse=True)
def _no_budget(monkeypatch):
    monkeypatch.delenv(budget.DEADLINE_ENV, raising=False)
    monkeypatch.delenv(budget.TIER_ENV, raising=False)


@pytest.mark.parametrize("text, seconds", [("20m", 1200), ("1h30m", 5400), ("900s", 900),
                                           ("1.5h", 5400), ("2m30s", 150)])
def test_durations(text, seconds):
    assert budget.parse(text) == seconds


@pytest.mark.parametrize("arg, message", [
    ("--budget=0", "error: --budget: 0 is not a budget: give a duration above zero "
                   "(e.g. 20m, 1h30m, 900s)"),
    ("--budget=-5m", "error: --budget: -5m is not a budget: give a duration above zero "
                     "(e.g. 20m, 1h30m, 900s)"),
    ("--budget=soon", "error: --budget: 'soon' is not a duration (e.g. 20m, 1h30m, 900s; "
                      "none: no limit)"),
    ("--budget=20", "error: --budget: '20' is not a duration (e.g. 20m, 1h30m, 900s; none: "
                    "no limit)"),
    ("--budget=30s", "error: --budget: 30s is less than the minimum of 60s (the notebooks' "
                     "start and probes)"),
])
def test_bad_budgets_are_refused_in_one_line(arg, message, tmp_path, capsys):
    code = cli.main(["run", "--params", "papermill_params/smoke.yaml", "--runs-dir",
                     str(tmp_path), arg])
    assert code == 2
    assert capsys.readouterr().err.strip() == message
    assert not list(tmp_path.iterdir())  # nothing ran, no run folder


def test_budget_minutes_in_a_params_file(tmp_path, capsys):
    f = tmp_path / "p.yaml"
    f.write_text("vm: t\nbudget_minutes: -1\ntriad_size: 50000\n")
    assert cli.main(["run", "--params", str(f), "--runs-dir", str(tmp_path)]) == 2
    assert "budget_minutes must be a non-negative number, not -1" in capsys.readouterr().err
    f.write_text("vm: t\nbudget_minutes: 0.5\ntriad_size: 50000\n")
    assert cli.main(["run", "--params", str(f), "--runs-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: budget_minutes: 0.5 is less than the minimum of 60s (the notebooks' start "
        "and probes)")
    assert params.validate({"budget_minutes": 20}, "triad")["budget_minutes"] == 20
    # the budget is not what a sweep measures: the same run resumes with another budget
    assert params.digest(params.validate({"budget_minutes": 20}, "triad"), "triad") == \
        params.digest(params.validate({}, "triad"), "triad")


def test_the_triad_the_time_model_uses_comes_first(tmp_path, monkeypatch):
    P = params.validate(SMALL | {"runs_dir": str(tmp_path)}, "triad")
    plan = triad.plan(P)
    first = [t for t in plan.tasks if t.priority == 0]
    assert first and len(first) < len(plan.tasks)
    assert {t.config["label"] for t in first} == {plan.tasks[0].config["label"]}
    # the first C variant's first affinity setting, its normal stores at every thread count
    assert all(t.config["impl"] == "c" for t in first)
    assert all({(r["stores"], r["threads"]) for r in t.config["runs"]} >= {("normal", 1),
                                                                          ("normal", 2)}
               for t in first)
    # without a budget: the plan's order; with one: priority 0 first, then the rest
    assert budget.order(plan.tasks) == (plan.tasks, [])
    monkeypatch.setenv(budget.DEADLINE_ENV, str(time.time() + 3600))
    ordered, later = budget.order(plan.tasks)
    assert later == [] and [t.priority for t in ordered] == sorted(t.priority for t in plan.tasks)
    monkeypatch.setenv(budget.TIER_ENV, "0")
    ordered, later = budget.order(plan.tasks)
    assert ordered == first and len(later) == len(plan.tasks) - len(first)


def test_a_sweep_stops_before_what_does_not_fit_and_resumes_the_rest(tmp_path, monkeypatch):
    """Real processes: the budget runs out after the second process (the first affinity
    setting's, one a repetition: what the time model needs); none is started that did not
    fit by its estimate; the next call measures what was left."""
    P = params.validate(SMALL | {"runs_dir": str(tmp_path)}, "triad")
    real = runner.launch
    started: list[runner.Task] = []

    def spend_after_third(task):
        if task.key in ("info", "probe"):  # the plan's, not the sweep's
            return real(task)
        end = budget.deadline()
        assert end is None or time.time() + task.estimate_s <= end  # it fitted
        started.append(task)
        out = real(task)
        if len(started) == 2:  # the budget is spent: nothing more fits
            monkeypatch.setenv(budget.DEADLINE_ENV, str(time.time()))
        return out

    monkeypatch.setattr(runner, "launch", spend_after_third)
    monkeypatch.setenv(budget.DEADLINE_ENV, str(time.time() + 3600))
    run, table = triad.SPEC.measure(P, progress=False)
    sec = run.section("triad")
    assert sec["status"] == budget.STATUS
    assert len(started) == 2 and all(t.priority == 0 for t in started)
    assert sec["left"] == sec["planned"] - 2 and sec["left_estimate_s"] > 0
    assert table["key"].nunique() == 2
    assert store.find_resumable(tmp_path, "t", "triad", params.digest(P, "triad")) == \
        run.run_id  # a run stopped at its budget resumes
    loaded = store.load(tmp_path, "triad")  # the report says it is a partial sweep
    assert loaded.runs[0]["status"].startswith(f"incomplete: {budget.STATUS}, 2 of ")
    assert any(f"triad stopped at its budget with {sec['left']} configurations left: a "
               "partial sweep, not this VM's best" in p for p in loaded.problems)

    monkeypatch.setenv(budget.DEADLINE_ENV, str(time.time() + 3600))
    run2, table2 = triad.SPEC.measure(P, progress=False)
    assert run2.root == run.root
    assert run2.section("triad")["status"] == "complete"
    assert table2["key"].nunique() == sec["planned"] == len(started)
    # what the decision needs was measured before the rest, across both calls
    assert [t.priority for t in started] == sorted(t.priority for t in started)


def test_a_partial_sweep_never_stands_for_a_vm_that_has_a_complete_one(tmp_path, monkeypatch):
    """Real sweeps: a complete run, then a newer one stopped at its budget. The figures of
    merit the cost tables and the burst decision read come from the complete one, and a
    note says which run was passed over and why; alone, the partial one is used."""
    complete, partial = "20260101T000000Z-aaaa", "20260102T000000Z-bbbb"
    triad.SPEC.measure(params.validate(SMALL | {"runs_dir": str(tmp_path), "run_id": complete},
                                       "triad"), progress=False)
    real = runner.launch

    def spend_after_first(task):
        out = real(task)
        if task.key not in ("info", "probe"):  # the budget is spent: nothing more fits
            monkeypatch.setenv(budget.DEADLINE_ENV, str(time.time()))
        return out

    monkeypatch.setattr(runner, "launch", spend_after_first)
    monkeypatch.setenv(budget.DEADLINE_ENV, str(time.time() + 3600))
    run, _ = triad.SPEC.measure(params.validate(
        SMALL | {"runs_dir": str(tmp_path), "run_id": partial}, "triad"), progress=False)
    assert run.section("triad")["status"] == budget.STATUS

    merits = triad.SPEC.merits(tmp_path, tmp_path / "no-reference")
    best = merits.of("memory_bandwidth_gbs")
    assert list(best["run_id"]) == [complete]
    at = merits.of("memory_bandwidth_gbs_at_threads")  # every run validates; one is the VM
    assert set(at["run_id"]) == {complete, partial}
    assert set(at.loc[at["newest"].astype(bool), "run_id"]) == {complete}
    note = [p for p in merits.problems if p.startswith("t: triad's figures of merit")]
    assert note == [f"t: triad's figures of merit (cost, burst decision) come from its "
                    f"newest complete run {complete}, not from {partial} (incomplete: "
                    f"{budget.STATUS}, 1 of {run.section('triad')['planned']} configurations "
                    "stored)"]

    import shutil

    shutil.rmtree(tmp_path / "t" / complete)
    alone = triad.SPEC.merits(tmp_path, tmp_path / "no-reference")
    assert list(alone.of("memory_bandwidth_gbs")["run_id"]) == [partial]
    assert not [p for p in alone.problems if "figures of merit" in p]


def _smoke_in_10m(runs_dir, only: str) -> int:
    """`burstbench run` of smoke.yaml's `only` benchmarks into `runs_dir`, with a 10-minute
    budget, quiet: its exit status."""
    return cli.main(["run", "--params", "papermill_params/smoke.yaml", "--runs-dir",
                     str(runs_dir), "--only", only, "--budget", "10m", "--quiet"])


def test_a_run_with_a_budget_ends_with_its_table(tmp_path, capsys):
    code = _smoke_in_10m(tmp_path, "triad,storage")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "budget: 10m, until" in out
    table = out[out.index("benchmark  status"):].splitlines()
    assert table[1].split()[:3] == ["triad", "complete", "6/6"]  # processes: 14 configurations
    assert table[2].split()[:3] == ["storage", "complete", "1/1"]
    (run_dir,) = (tmp_path / "smoke").iterdir()
    prov = json.loads((run_dir / "provenance.json").read_text())
    for name in ("triad", "storage"):  # the kernels' timed seconds over the sweep's wall time
        sec = prov["benchmarks"][name]
        assert sec["measured_seconds"] > 0 and 0 < sec["timed_share"] <= 1
        share = sec["timed_seconds"] / sec["sweep_seconds"]
        assert sec["timed_share"] == float(f"{share:.3g}")
    assert table[1].split()[-1] == f"{prov['benchmarks']['triad']['timed_share']:.2f}"
    assert pd.read_csv(store.Run(run_dir).table_path("triad"))["key"].nunique() == 6


def test_a_budget_that_ended_before_a_benchmark_started_names_it(tmp_path, capsys,
                                                                 monkeypatch):
    """The budget ends after the Triad's first pass: storage never starts.  Its plan is
    unknown, so the table says so ("?", not 0 left) and the last line names it: a count of
    the Triad's configurations alone said less was left than was (the large-cache proxy's
    one-minute budget: "64 configurations left" with three benchmarks not started)."""
    from burstbench import supervise

    real = supervise.execute_notebook

    def then_spent(*args, **kwargs):
        why = real(*args, **kwargs)
        os.environ[budget.DEADLINE_ENV] = str(time.time())  # the run's own, ended by it
        return why

    monkeypatch.setattr(supervise, "execute_notebook", then_spent)
    code = _smoke_in_10m(tmp_path, "triad,storage")
    out = capsys.readouterr().out
    assert code == 0, out
    table = out[out.index("benchmark  status"):].splitlines()
    triad_row = table[1].split()
    assert triad_row[:4] == ["triad", "stopped", "at", "budget"]
    assert table[2].split()[:5] == ["storage", "not", "started", "0/?", "?"]
    assert (f"{budget.STATUS}: {triad_row[5]} configurations left, and storage not started; "
            "measure them with: ") in out
    assert "== storage: not started, 0 s of the budget left" in out
    (run_dir,) = (tmp_path / "smoke").iterdir()
    loaded = registry.benchmarks()["storage"].load(tmp_path, include_tests=True)
    assert loaded.table.empty
    assert [p for p in loaded.problems if "not started" in p] == [
        f"{run_dir}: storage planned but not started (the run has not reached it, or its "
        "budget ended or it stopped first): nothing measured; measure it with the run's "
        f"command and --run-id {run_dir.name}"]


@pytest.mark.parametrize("only", ["pingpong", "biccg"])
def test_a_notebook_whose_budget_ends_before_its_first_configuration_ends_cleanly(
        tmp_path, capsys, monkeypatch, only):
    """The budget left when the notebook starts is spent before its sweep's first
    configuration fits (a machine busier than the estimates: a fresh clone's `make report`
    beside a test suite): the notebook says nothing was measured and ends; it does not
    fail on an empty table (it did: plt.subplots with no column)."""
    from burstbench import supervise

    real = supervise.execute_notebook

    def spent_inside(*args, **kwargs):
        os.environ[budget.DEADLINE_ENV] = str(time.time() + 1)  # the kernel inherits it
        return real(*args, **kwargs)

    monkeypatch.setattr(supervise, "execute_notebook", spent_inside)
    code = _smoke_in_10m(tmp_path, only)
    out = capsys.readouterr().out
    assert code == 0, out
    table = out[out.index("benchmark  status"):].splitlines()
    row = table[1].split()
    assert row[:4] == [only, "stopped", "at", "budget"] and row[4].startswith("0/"), row
    (run_dir,) = (tmp_path / "smoke").iterdir()
    (nb,) = (p.read_text() for p in run_dir.glob(f"0*_measure_{only}.ipynb"))
    assert "nothing measured in this run yet: no curves" in nb


def test_a_kernel_killed_in_a_later_pass_leaves_no_earlier_count(tmp_path):
    """A notebook's kernel killed in the second pass cannot say what it left: the first
    pass's count (4 left, 30 s) is dropped when the run marks it interrupted, and the table
    says what is not stored (7 of 10) with its estimate unknown, not the first pass's."""
    from burstbench import supervise

    names = ["triad", "biccg", "storage"]
    run = store.plan_run(tmp_path, "v", "r1", {n: ("d", {}) for n in names})
    run.set_section("triad", status="running", planned=10, left=4, left_estimate_s=30.0)
    run.set_section("biccg", status="running")  # killed in its probes: no plan stored
    for key in ("a", "b", "c"):
        run.save("triad", key, [{"key": key, "metric": "m", "value": 1.0, "unit": "1"}],
                 [{"key": key}], ())
    assert supervise.mark_stopped(run.root, names, "interrupted") == \
        "triad 3 of 10 (interrupted), biccg 0 (interrupted), storage 0 (not started)"
    assert {"left", "left_estimate_s"}.isdisjoint(run.section("triad"))
    text, left = budget.table(run.root, names)
    rows = [line.split()[:5] for line in text.splitlines()[1:]]
    assert rows == [["triad", "interrupted", "3/10", "7", "?"],
                    ["biccg", "interrupted", "0/?", "?", "?"],
                    ["storage", "not", "started", "0/?", "?"]]
    assert left == ("not all measured: 7 configurations left, and storage not started, and "
                    "biccg stopped before planning")  # no budget stopped any of them


def test_a_notebook_that_failed_leaves_its_benchmark_incomplete_not_running(
        tmp_path, monkeypatch, capsys):
    """A kernel that died (a papermill timeout, the memory) cannot mark its benchmark: the
    run marks it incomplete, so the table shows no estimate of an earlier pass as current."""
    from burstbench import supervise

    def died(nb, output, parameters, **kwargs):
        run = store.Run(output.parent)
        run.set_section("triad", status="running", planned=6, left=2, left_estimate_s=9.0)
        return "the kernel died"

    monkeypatch.setattr(supervise, "execute_notebook", died)
    code = _smoke_in_10m(tmp_path, "triad")
    out = capsys.readouterr().out
    assert code == 1
    assert out[out.index("benchmark  status"):].splitlines()[1].split()[:5] == [
        "triad", "incomplete", "0/6", "6", "?"]
    assert "not all measured: 6 configurations left; measure them with: " in out


def test_an_interrupted_first_pass_leaves_all_it_did_not_store(tmp_path, monkeypatch):
    """Ctrl-C in a budget's first pass: what is left is the lower priorities kept back and
    the first pass's own not stored (it counted only the first: 'biccg interrupted 0/30, 26
    left'), and so is its estimate, by which a resumed run orders its benchmarks."""
    monkeypatch.setenv(budget.DEADLINE_ENV, str(time.time() + 3600))
    monkeypatch.setenv(budget.TIER_ENV, "0")
    real, calls = runner.launch, []

    def interrupt_second(task):
        if task.key not in ("info", "probe"):
            calls.append(task.key)
            if len(calls) == 2:
                raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(runner, "launch", interrupt_second)
    with pytest.raises(KeyboardInterrupt):
        triad.SPEC.measure(params.validate(SMALL | {"runs_dir": str(tmp_path)}, "triad"),
                           progress=False)
    (run_dir,) = (tmp_path / "t").iterdir()
    run = store.Run(run_dir)
    sec = run.section("triad")
    assert sec["status"] == "interrupted" and len(run.done_keys("triad")) == 1
    assert sec["left"] == sec["planned"] - 1
    ahead = [t for t in triad.plan(params.validate(SMALL | {"runs_dir": str(tmp_path)},
                                                   "triad")).tasks if t.priority == 0]
    assert len(ahead) >= 2  # the interrupted one was of the first pass


def test_a_run_stopped_mid_budget_says_what_was_left(tmp_path, capsys, monkeypatch):
    """SIGTERM (here Ctrl-C) while a budget runs: the resume hint, then the budget's table
    of what was measured and what was left."""
    from burstbench import supervise

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(supervise, "execute_notebook", stop)
    code = _smoke_in_10m(tmp_path, "triad,storage")
    err = capsys.readouterr().err
    assert code == 130
    assert "interrupted by SIGINT: what was measured is kept in" in err
    assert "--budget 10m --run-id" in err
    table = err[err.index("benchmark  status"):].splitlines()
    assert [line.split()[0] for line in table[1:3]] == ["triad", "storage"]


@pytest.mark.parametrize("budget_s, line", [
    (None, "[1/4 25% ~30 min left] a"),  # no budget: the sweep's time left alone
    (3600, "[1/4 25% ~30 min left] a"),  # a budget that outlasts the sweep
    (140, "[1/4 25% ~30 min left, the budget ends in 2 min] a")])
def test_a_progress_line_says_when_the_budget_ends_before_the_sweep(budget_s, line,
                                                                  monkeypatch, capsys):
    """Under a budget the sweep stops at its deadline, not at the end of its plan: a line
    that gave only the plan's time left (~18 min with 3 to go, on the large-cache proxy)
    promised what will not run.  One configuration of four took 10 min: 30 min left."""
    if budget_s is not None:
        monkeypatch.setenv(budget.DEADLINE_ENV, str(time.time() + budget_s))
    monkeypatch.setenv("BURSTBENCH_PROGRESS", "lines")
    progress = runner.Progress(4, 0, "t")
    progress.start -= 600
    progress.step("a")
    assert capsys.readouterr().out == line + "\n"


def test_a_progress_bar_says_when_the_budget_ends(monkeypatch, capsys):
    monkeypatch.setenv(budget.DEADLINE_ENV, str(time.time() + 140))
    monkeypatch.setenv("BURSTBENCH_PROGRESS", "bar")
    progress = runner.Progress(4, 0, "t")
    progress.step("a")
    assert progress.bar is not None and progress.bar.postfix == "budget ends in 2 min"
    progress.close()


def test_the_budget_is_not_said_where_it_rounds_to_the_sweeps_time(monkeypatch):
    monkeypatch.setenv(budget.DEADLINE_ENV, str(time.time() + 140))
    assert runner.time_left(160) == "~3 min left, the budget ends in 2 min"
    assert runner.time_left(150) == "~2 min left"  # not "~2 min left, the budget ends in 2"


def test_the_rest_starts_with_the_benchmark_that_has_least_left(tmp_path):
    """The large-cache proxy's 8 minutes: after the first pass the Triad's matrix (485 s
    left) took all the time left, and ping-pong (100 s), BICCG (77 s) and storage (5 s)
    ended with their first configurations only; the rest now starts with the least left,
    so they complete, and a benchmark with no estimate yet comes last."""
    secs = {"triad": {"left_estimate_s": 485.0}, "pingpong": {"left_estimate_s": 100.0},
            "biccg": {"left_estimate_s": 77.0}, "storage": {"left_estimate_s": 5.0}}
    (tmp_path / "provenance.json").write_text(json.dumps({"benchmarks": secs}))
    only = ["triad", "pingpong", "biccg", "storage"]
    assert budget.pass_order(tmp_path, only, 0) == only  # what the decision needs: as given
    assert budget.pass_order(tmp_path, only, None) == ["storage", "biccg", "pingpong", "triad"]
    del secs["biccg"]
    (tmp_path / "provenance.json").write_text(json.dumps({"benchmarks": secs}))
    assert budget.pass_order(tmp_path, only, None) == ["storage", "pingpong", "triad", "biccg"]
    assert budget.pass_order(tmp_path / "none", only, None) == only  # no provenance yet


def test_timed_seconds_are_the_kernels_own():
    assert runner.timed_seconds([{"times_s": [0.5, 0.25]}, {"solve_s": 1.0, "setup_s": 9.0},
                                 {"total_s": 2.0}, {"seconds": 0.25, "validated": True}]) == 4.0
    assert runner.timed_seconds([{"latency_us": 1.0}]) == 0.0


def test_none_is_the_whole_sweep_whatever_the_params_file_says(tmp_path, capsys):
    assert budget.parse("none") is None and budget.parse(" None ") is None
    f = tmp_path / "p.yaml"
    f.write_text(open("papermill_params/smoke.yaml").read() + "budget_minutes: 5\n")
    code = cli.main(["run", "--params", str(f), "--runs-dir", str(tmp_path), "--only",
                     "storage", "--budget", "none", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "budget:" not in out and "benchmark  status" not in out  # no deadline, no table


def test_local_yaml_measures_within_a_default_budget():
    """A newcomer's `make report` ends within 10 minutes: local.yaml's sweeps measure for 8
    at most, the figures after; the README says how to ask for the whole sweep."""
    values = params.load_file("papermill_params/local.yaml")
    assert values["budget_minutes"] == 8
    assert budget.check(60 * values["budget_minutes"], "8", "budget_minutes") == 480
    readme = open("README.md").read()
    assert "make report BUDGET=none" in readme
    assert "make report BUDGET=none" in open("papermill_params/local.yaml").read()


def test_biccg_measures_first_the_largest_grid_at_the_study_layout():
    """Within a budget BICCG measures first our solver at 2 ranks per node on the largest
    Poisson grid planned (local-model.yaml's 256x256x512: the solve the decision's time
    model is fitted on; local.yaml's 128^3, one that checks it), wherever it stands in the
    list, and one repetition of the widest other layout on that grid (a solve that validates
    the model); the baselines and the rest come later."""
    probs = [biccg.Problem(f"poisson{n}x{n}x{n}", ("--poisson", str(n), str(n), str(n)))
             for n in (16, 24, 20)]
    P = params.validate({"biccg_problems": [{"poisson": [n, n, n]} for n in (16, 24, 20)],
                         "biccg_ranks_per_node": [1, 2], "biccg_threads": [1, 2],
                         "biccg_baselines": ["scipy-cg"], "biccg_repetitions": 2}, "biccg")
    m = biccg.Machine(probs, launch.Hosts((), "", "biccg_hosts", False), 2, "/usr/bin/mpiexec",
                      {"mpi_library": "MPICH Version: 4.1"}, [], biccg.SolveCalibration())
    plan = biccg.expand(P, m)  # 2 cores: 1x1, 1x2 and 2x1 (2x2 is skipped)
    first = [t for t in sorted(plan.tasks, key=lambda t: t.priority) if t.priority == 0]
    # in the order a budget's pass measures them: the fitted solve before its check
    assert [(c["impl"], c["label"], c["problem"], c["repetition"])
            for c in (t.config for t in first)] == \
        [("c", "2x1", "poisson24x24x24", 1), ("c", "1x2", "poisson24x24x24", 1),
         ("c", "2x1", "poisson24x24x24", 2)]
    # without a budget the plan's order moved by one place only: rep 1's 1x2 after its 2x1
    labels = [(t.config["label"], t.config["problem"]) for t in plan.tasks
              if t.config["repetition"] == 1 and t.config["impl"] == "c"]
    assert labels[3:6] == [("1x1", "poisson24x24x24"), ("2x1", "poisson24x24x24"),
                           ("1x2", "poisson24x24x24")]
    two = biccg.expand(P | {"biccg_nodes": [1, 2]}, dataclasses.replace(
        m, hosts=launch.Hosts(("a", "b"), "", "biccg_hosts", True)))
    assert [(t.config["label"], t.config["nodes"], t.config["repetition"]) for t in two.tasks
            if t.priority == 0 and t.config["label"] != "2x1"] == [("1x2", 1, 1)]
    mtx = biccg.Problem("g3", ("--mtx", "g3.mtx"))
    assert max([mtx, *probs], key=biccg.grid_points) is probs[1]
    assert max([mtx], key=biccg.grid_points) is mtx  # no grid: the first problem


def test_a_probe_scales_the_work_model():
    """A probe of 2.0 s wall of which the kernel timed 1.5 s, against 0.5 s of modelled work:
    a configuration starts in 0.5 s here and works 3x the model."""
    timing = workmodel.Timing(wall_s=2.0, timed_s=1.5, others=0.5)
    cal = workmodel.calibrate(timing, 0.5, "by a fake probe")
    assert (cal.start_s, cal.rate) == (0.5, 3.0)
    assert cal.estimate(1.0) == 3.5 and cal.estimate(1.0, start_s=1.0) == 4.0
    assert cal.said == "by a fake probe: start 0.50 s, work x3.00 of the model"
    # the rate is bounded, a probe under a passing burst of load does not make it 100x
    assert workmodel.calibrate(workmodel.Timing(1.0, 0.9), 0.001).rate == \
        workmodel.RATE_BOUNDS[1]
    # half the machine taken by others: two cores do what one does
    assert timing.speedup(2, 2) == 1.0 and workmodel.Timing(1, 1).speedup(2, 2) == 2.0
    # storage: the probe's start plus the bytes at the probe's rate
    P = params.validate({"storage_block_size": "256M"}, "storage")
    moved = 2 * 2 * 256 * 2 ** 20 / (storage.ASSUMED_MBS * 1e6)
    assert storage.estimate_s(P, 2, cal) == pytest.approx(0.5 + 3.0 * moved)
    assert storage.estimate_s(P, 2) == pytest.approx(storage.START_S + moved)
    # BICCG: the probe's solve calibrates every task's estimate: 2 threads iterate 1.7x as
    # fast as one, and set up 1.7^2 as fast
    prob = biccg.Problem("poisson32x32x32", ("--poisson", "32", "32", "32"))
    P = params.validate({"biccg_problems": [{"poisson": [32, 32, 32]}],
                         "biccg_ranks_per_node": [1], "biccg_threads": [1, 2],
                         "biccg_baselines": [], "biccg_repetitions": 1}, "biccg")
    bcal = biccg.SolveCalibration(0.5, 3.0, 3.0, 0.0, "by a fake probe: start 0.50 s")
    m = biccg.Machine([prob], launch.Hosts((), "", "biccg_hosts", False), 2, "/usr/bin/mpiexec",
                      {"mpi_library": "MPICH Version: 4.1"}, [], bcal)
    plan = biccg.expand(P, m)
    n = 32 ** 3
    setup = 3.0 * biccg.setup_s(n)
    passes = 3.0 * (biccg.FIRST_PASSES + biccg.SOLVERS["c"].iterations(n)) * biccg.iteration_s(n)
    by_threads = {t.config["threads"]: t.estimate_s for t in plan.tasks}
    assert [by_threads[1], by_threads[2]] == pytest.approx(
        [0.5 + setup + passes, 0.5 + setup / 1.7 ** 2 + passes / 1.7])
    assert plan.calibration == bcal.said
    assert "by a work model calibrated by a fake probe: start 0.50 s" in \
        sweep.plan_line(plan, set())
    # ping-pong: the probe's start and one-way times by size
    P = params.validate({"pingpong_tests": ["latency"], "pingpong_max_size": 2,
                         "pingpong_iterations": 10, "pingpong_skip": 0}, "pingpong")
    timed = pingpong.Timed(0.25, ((0, 1.0), (1, 2.0), (2, 3.0)))
    assert pingpong.estimate_s(P, "latency", timed=timed) == \
        pytest.approx(0.25 + 10 * 2 * (1.0 + 2.0 + 3.0) * 1e-6)
