"""The probes that calibrate BICCG's and storage's plan estimates (issue 31: an estimate
within +-25% of the measured time): what each probe runs, how its timing splits into the
work model's terms, and the model's iteration counts against the solver's own."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from burstbench import params
from burstbench.benchmarks.biccg import tasks as biccg
from burstbench.benchmarks.storage import tasks as storage
from burstbench.core import launch, runner, workmodel

MPIEXEC = str(Path(sys.executable).parent / "mpiexec")


def poisson(n: int) -> biccg.Problem:
    return biccg.Problem(f"poisson{n}x{n}x{n}", ("--poisson", str(n), str(n), str(n)))


@pytest.mark.parametrize("walls, kept", [
    ([1.0, 1.5, 1.2], 1.2),
    ([1.3, 1.0, 0.9], 1.0),
    ([0.9, 0.9, 3.0], 0.9),
])
def test_a_probe_keeps_its_median_sample(monkeypatch, walls, kept):
    """One probe sample lands in a slow or a fast second of this VM; the plan stands on the
    sample of median wall time, its records with it.  One sample where a benchmark asks
    for one (storage: a sample more writes as much again)."""
    ran: list[float] = []

    def once(task):
        wall = walls[len(ran) % len(walls)]
        ran.append(wall)
        return [{"wall": wall}], workmodel.Timing(wall, wall / 2)

    monkeypatch.setattr(workmodel, "_once", once)
    records, timing = workmodel.timed(runner.Task("probe", {}, ("true",)))
    assert workmodel.SAMPLES == 3 and ran == walls
    assert timing.wall_s == kept and records == [{"wall": kept}]
    ran.clear()
    assert workmodel.timed(runner.Task("probe", {}, ("true",)), samples=1)[1].wall_s == walls[0]
    assert ran == walls[:1]
    ran.clear()
    assert workmodel.timed(runner.Task("probe", {}, ("true",)), samples=2)[1].wall_s == \
        min(walls[:2])
    ran.clear()
    assert workmodel.timed(runner.Task("probe", {}, ("true",)), samples=0)[1].wall_s == walls[0]
    assert ran == walls[:1]


SAMPLE = """import json, pathlib, sys
log = pathlib.Path(sys.argv[1])
n = len(log.read_text().splitlines()) if log.exists() else 0
log.write_text("x\\n" * (n + 1))
if n >= int(sys.argv[2]):
    sys.exit(f"error: sample {n + 1} failed")
print(json.dumps({"seconds": 0.01, "run": n}))
"""


def test_a_probe_runs_its_task_for_real_once_per_sample(tmp_path):
    """The real launch: each sample is a process of its own (the log gets a line per run);
    a failing sample stops the probe with the task's error, whatever ran before it."""
    script, log = tmp_path / "sample.py", tmp_path / "runs"
    script.write_text(SAMPLE)
    argv = (sys.executable, str(script), str(log))
    records, timing = workmodel.timed(runner.Task("probe", {}, (*argv, "9"), timeout_s=60))
    assert len(log.read_text().splitlines()) == 3
    assert records[0]["run"] in (0, 1, 2) and timing.timed_s == 0.01
    log.unlink()
    with pytest.raises(runner.TaskFailed, match="error: sample 2 failed"):
        workmodel.timed(runner.Task("probe", {}, (*argv, "1"), timeout_s=60))
    assert len(log.read_text().splitlines()) == 2


def test_the_biccg_probe_solves_the_largest_planned_grid_up_to_probe_rows():
    """The largest grid meets the memory the costly solves meet; one beyond PROBE_ROWS
    would cost the probe more than its solve's share, so a cube of PROBE_ROWS stands in."""
    mtx = biccg.Problem("G3_circuit", ("--mtx", "G3_circuit.mtx"))
    assert biccg.probe_grid([poisson(64), poisson(128), mtx]) == (128, 128, 128)
    assert biccg.probe_grid([poisson(16), biccg.Problem("p", ("--poisson", "8", "8", "128"))]) \
        == (8, 8, 128)
    side = round(biccg.PROBE_ROWS ** (1 / 3))
    assert biccg.probe_grid([poisson(64), poisson(256)]) == (side, side, side)
    assert biccg.probe_grid([mtx]) == (16, 16, 16)


def test_the_biccg_probe_calibrates_start_setup_and_iterations_apart():
    """A probe of 128^3 to a loose tolerance, 3.0 s wall: 0.5 s load and 1.5 s setup, 13
    iterations in 0.75 s (15 passes over the rows with the FIRST_PASSES); what is left is
    the start.
    Setup and iterations each get their own rate, so that a probe of a few iterations
    does not price the 105 of a solve at its setup's rate."""
    n = 128 ** 3
    record = {"problem": "poisson128x128x128", "n": n, "tol": 0.05, "iterations": 13,
              "load_s": 0.5, "setup_s": 1.5, "solve_s": 0.75}
    cal = biccg.calibrate(record, workmodel.Timing(3.0, 0.75, others=0.25))
    assert biccg.FIRST_PASSES == 2 and cal.start_s == pytest.approx(0.25)
    assert cal.setup_rate == pytest.approx(2.0 / (n * biccg.ROW_SETUP_S))
    assert cal.iteration_rate == pytest.approx(0.75 / 15 / (n * biccg.ROW_ITERATION_S))
    assert cal.others == 0.25
    assert cal.said == ("by a solve of poisson128x128x128 on one core to tol 0.05: start "
                        f"0.25 s, setup x{cal.setup_rate:.2f} and iterations "
                        f"x{cal.iteration_rate:.2f} of the model")
    # a probe under a passing burst of load: bounded as every benchmark's is
    slow = biccg.calibrate(record | {"solve_s": 650.0}, workmodel.Timing(700.0, 650.0))
    assert slow.iteration_rate == workmodel.RATE_BOUNDS[1]


def test_biccg_estimates_follow_the_cores_the_ranks_and_the_solver():
    """2 cores iterate 1 + PARALLEL_EFFICIENCY times as fast as one (1.7) and set up its
    square as fast, none faster where others took half the machine; 2 ranks iterate
    RANK_ITERATIONS more; scipy's unpreconditioned CG iterates in proportion to N, ours to
    N^0.807; a matrix file has no estimate."""
    P = params.validate({"biccg_problems": [{"poisson": [64, 64, 64]}],
                         "biccg_ranks_per_node": [1, 2], "biccg_threads": [1, 2],
                         "biccg_baselines": ["scipy-cg"], "biccg_repetitions": 1}, "biccg")
    hosts = launch.Hosts((), "", "biccg_hosts", False)

    def estimates(others: float) -> dict[str, float]:
        m = biccg.Machine([poisson(64)], hosts, 2, "/usr/bin/mpiexec",
                          {"mpi_library": "MPICH Version: 4.1"}, [],
                          biccg.SolveCalibration(0.3, 1.0, 1.0, others))
        return {t.config["label"]: t.estimate_s for t in biccg.expand(P, m).tasks}

    n, ours = 64 ** 3, biccg.SOLVERS["c"]
    setup, one = biccg.setup_s(n), ours.iterations(n) * biccg.iteration_s(n)
    first = biccg.FIRST_PASSES * biccg.iteration_s(n)  # the first residual's, first touch
    two = 1 + biccg.PARALLEL_EFFICIENCY
    quiet = estimates(0.0)
    assert quiet["1x1"] == pytest.approx(0.3 + setup + first + one)
    assert quiet["1x2"] == pytest.approx(0.3 + setup / two ** 2 + (first + one) / two)
    assert quiet["2x1"] == pytest.approx(
        0.3 + setup / two ** 2 + (first + (1 + biccg.RANK_ITERATIONS) * one) / two)
    assert estimates(0.5)["1x2"] == pytest.approx(quiet["1x1"])
    scipy = biccg.SOLVERS["scipy"]
    assert scipy.iterations(8 * n) / scipy.iterations(n) == pytest.approx(2.0)
    assert ours.iterations(8 * n) / ours.iterations(n) == pytest.approx(2 ** 0.807)
    assert ours.iterations(n, 1e-14) == pytest.approx(2 * ours.iterations(n))
    m = biccg.Machine([biccg.Problem("G3", ("--mtx", "x.mtx"))], hosts, 2, "", {})
    assert biccg.task_estimate_s(P, {"problem": "G3", "impl": "c", "ranks": 1, "threads": 1,
                                     "nodes": 1}, m) == 0.0


@pytest.mark.mpi
@pytest.mark.parametrize("side, ranks, tol", [(32, 1, 1e-7), (48, 2, 1e-7), (32, 1, 1e-4)])
def test_the_iteration_model_within_10_percent_of_the_solver(side, ranks, tol):
    """The model's iterations against the kernel's own count (a count, not a time: the
    same on any machine): within 10%."""
    argv = [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "kernels_ext.biccg", "--poisson",
            *[str(side)] * 3, "--threads", "1", "--tol", repr(tol)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
    got = json.loads(out.splitlines()[-1])["iterations"]
    n = side ** 3
    model = biccg.SOLVERS["c"].iterations(n, tol) * (1 + biccg.RANK_ITERATIONS
                                                     * math.log2(ranks))
    assert model == pytest.approx(got, rel=0.10)


@pytest.mark.mpi
def test_scipys_iteration_model_within_10_percent_of_its_count():
    argv = [sys.executable, "-m", "kernels_ext.biccg.cg_baselines", "--poisson", "32", "32",
            "32", "--method", "scipy-cg", "--threads", "1"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
    got = json.loads(out.splitlines()[-1])["iterations"]
    assert biccg.SOLVERS["scipy"].iterations(32 ** 3) == pytest.approx(got, rel=0.10)


def test_the_storage_probe_writes_as_the_widest_layout_does():
    """The timed probe runs the widest planned ranks per node that the cores allow."""
    P = params.validate({"storage_ranks_per_node": [1, 2, 4]}, "storage")
    assert storage.probe_ranks(P, cores=2) == 2
    assert storage.probe_ranks(P, cores=8) == 4
    assert storage.probe_ranks(params.validate({"storage_ranks_per_node": [4]}, "storage"),
                               cores=2) == 1


@pytest.mark.parametrize("block, probed", [("256M", 256 * 2 ** 20), ("4M", 4 * 2 ** 20),
                                           ("1G", storage.RATE_BYTES)])
def test_the_storage_probe_times_the_planned_block_on_the_planned_ranks(monkeypatch, block,
                                                                        probed):
    """2 ranks write and read the planned block (at most RATE_BYTES) each at 2 GB/s, 0.3 s
    more in all: the rate is the model's 500 MB/s over 2 GB/s, the start 0.3 s."""
    calls = []

    def fake_try(P, combo, mpiexec, target, api, ranks=1, block=storage.PROBE_BYTES):
        calls.append((api, ranks, block))
        timed = 2 * ranks * block / 2e9
        return {}, workmodel.Timing(0.3 + timed, timed)

    monkeypatch.setattr(storage, "_try", fake_try)
    P = params.validate({"storage_block_size": block}, "storage")
    target = storage.Target("local", "/tmp/x", ("posix",), True)
    cal = storage.time_target(P, {}, "mpiexec", target, ranks=2)
    assert calls == [("posix", 2, probed)]
    assert cal.rate == pytest.approx(storage.ASSUMED_MBS / 2000)
    assert cal.start_s == pytest.approx(0.3)
    assert cal.said.startswith(f"local: 2000 MB/s by 2 rank(s) of {probed // 2 ** 20} MiB")
