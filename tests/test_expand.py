"""Each benchmark's plan is probe() (what this machine has) and expand() (the tasks): the
expansion alone, from machines made up here, with no build, no mpiexec and no solve."""

from __future__ import annotations

import time

import pytest

from burstbench import params
from burstbench.benchmarks.biccg import tasks as biccg
from burstbench.benchmarks.pingpong import tasks as pingpong
from burstbench.benchmarks.triad import tasks as triad
from burstbench.core import budget, launch
from burstbench.core.checks import ParamError
from burstbench.core.sweep import Plan

GCC = {"impl": "c", "variant": "gcc12.2.0", "compiler": "gcc", "compiler_version": "12.2.0",
       "flags": "-O2 -fopenmp", "openmp_library": "/lib/libgomp.so.1", "openmp_version": 201511,
       "streaming_isa": "avx", "variant_key": "k1",
       "cli_args": ["--compiler", "/usr/bin/gcc", "--flags=-O2 -fopenmp", "--tag", ""],
       "spec": {"compiler": "gcc", "flags": "-O2 -fopenmp", "tag": ""}}


def triad_params(**over) -> dict:
    return params.validate({"triad_places": ["cores"], "triad_bind": ["close", "spread"],
                            "triad_baselines": ["numba", "numpy"], "triad_repetitions": 2}
                           | over, "triad")


def triad_machine(*variants: dict, cpus: int = 4) -> triad.Machine:
    return triad.Machine(cpus, 1000, list(variants), {"numba": "0.60", "numpy": "2.0"})


def configurations(tasks: list) -> list[dict]:
    """Each configuration a plan's processes measure, with its process's fields."""
    return [c for t in tasks for c in t.each()]


def test_triad_threads_all_are_the_probed_cpus_and_stores_cross_the_c_variants():
    plan = triad.expand(triad_params(triad_stores=["normal", "streaming"]), triad_machine(GCC))
    c = [x for x in configurations(plan.tasks) if x["impl"] == "c"]
    assert {x["threads"] for x in c} == {1, 2, 3, 4}  # 'all' = the machine's 4
    # 2 repetitions x (gcc: 2 binds x 4 threads x 2 stores + numba: 2 x 4 + numpy 1)
    assert len(configurations(plan.tasks)) == 2 * (16 + 8 + 1)
    # measured by one process per variant, affinity setting and repetition
    assert len(plan.tasks) == 2 * (2 + 2 + 1)
    assert {x["stores"] for x in c} == {"normal", "streaming"}
    assert all(t.config["size"] == 1000 for t in plan.tasks)
    assert [t.config["repetition"] for t in plan.tasks] == [1] * 5 + [2] * 5
    first = plan.tasks[0]
    assert first.argv[first.argv.index("--threads") + 1] == "1,2,3,4"
    assert first.argv[first.argv.index("--stores") + 1] == "normal,streaming"
    assert "OMP_NUM_THREADS" not in dict(first.env)  # each configuration sets its team
    assert [r["label"] for r in first.config["runs"]] == \
        ["gcc12.2.0+cores+close"] * 4 + ["gcc12.2.0-streaming+cores+close"] * 4
    assert first.estimate_s == pytest.approx(triad.estimate_s(
        1000, 10, [1, 2, 3, 4] * 2, stores=["normal"] * 4 + ["streaming"] * 4))


def test_triad_expansion_notes_and_refusals():
    no_nt = GCC | {"variant": "gcc12.2.0-plain", "streaming_isa": None}
    plan = triad.expand(triad_params(triad_stores=["normal", "streaming"], triad_threads=[8],
                                     triad_baselines=[]), triad_machine(no_nt, cpus=4))
    assert {x["stores"] for x in configurations(plan.tasks)} == {"normal"}
    assert any("has no streaming stores" in n for n in plan.notes)
    assert any("threads up to 8 on 4 CPUs oversubscribe" in n for n in plan.notes)
    with pytest.raises(ParamError, match="ignores KMP_AFFINITY"):
        triad.expand(triad_params(), triad_machine(
            GCC | {"spec": GCC["spec"] | {"kmp_affinity": ["granularity=core,compact"]}}))
    with pytest.raises(ParamError, match="two variants are labelled gcc12.2.0"):
        triad.expand(triad_params(), triad_machine(GCC, GCC))
    with pytest.raises(ParamError, match="nothing to measure"):
        triad.expand(triad_params(triad_baselines=[]), triad_machine())


def biccg_machine(names=(), in_job=False, cores=4) -> biccg.Machine:
    hosts = launch.Hosts(tuple(names), "this job ($SLURM_JOB_NODELIST)", "biccg_hosts", in_job)
    return biccg.Machine([biccg.Problem("poisson8x8x8", ("--poisson", "8", "8", "8"))], hosts,
                         cores, "/usr/bin/mpiexec", {"mpi_library": "MPICH Version: 4.1"})


def test_biccg_layouts_never_exceed_the_cores_or_the_hosts():
    P = params.validate({"biccg_nodes": [1, 2], "biccg_ranks_per_node": [1, 2],
                         "biccg_threads": [1, 2, 4], "biccg_baselines": ["scipy-cg"],
                         "biccg_repetitions": 1}, "biccg")
    plan = biccg.expand(P, biccg_machine(["n1", "n2"], cores=4))
    solves = [t for t in plan.tasks if t.config["impl"] == "c"]
    assert {(t.config["nodes"], t.config["ranks"] // t.config["nodes"], t.config["threads"])
            for t in solves} == {(n, r, t) for n in (1, 2) for r in (1, 2) for t in (1, 2, 4)
                                 if r * t <= 4}
    assert any("skipped 2 ranks x 4 threads: more than the 4 cores" in n for n in plan.notes)
    baseline = [t for t in plan.tasks if t.config["impl"] != "c"]
    assert len(baseline) == 1 and "4" in baseline[0].argv  # --threads: the probed cores
    one_host = biccg.expand(P, biccg_machine(["n1"], cores=4))
    assert {t.config["nodes"] for t in one_host.tasks} == {1}
    assert any("2 nodes asked for, 1 host(s) known" in n for n in one_host.notes)
    with pytest.raises(ParamError, match="2 nodes asked for, but this job"):
        biccg.expand(P, biccg_machine(["n1"], in_job=True))


def pingpong_machine(P: dict) -> pingpong.Machine:
    """One made-up combination (P's first) at one placement, same socket."""
    combo = P["pingpong_combinations"][0]
    info = {"combination": "gcc12+mpich4.1", "mpiexec_path": "/usr/bin/mpiexec",
            "mpi_family": "mpich"}
    return pingpong.Machine(
        [(combo, info, launch.for_combination(combo, "/usr/bin/mpiexec", "mpich"))],
        [pingpong.Placement("same-socket", "same-socket", launch.Layout(2, 2, cpus=(0, 1)))])


def test_pingpong_expansion_from_a_made_up_combination():
    P = params.validate({"pingpong_tests": ["latency", "bw"], "pingpong_repetitions": 2,
                         "pingpong_baselines": ["mpi4py"], "pingpong_validate": True},
                        "pingpong")
    plan = pingpong.expand(P, pingpong_machine(P))
    checks = [t for t in plan.tasks if t.config["repetition"] == 0]
    assert len(checks) == 2 and all("--validate" in t.argv for t in checks)  # first
    assert plan.tasks[:2] == checks
    # 2 repetitions x 2 tests x (C kernel + mpi4py), the C kernel's latency in two parts
    # (up to the BICCG halo's message size, then beyond: pingpong.HALO_CAP)
    assert len(plan.tasks) - len(checks) == 2 * 2 * 2 + 2
    assert all(t.argv[0] == "/usr/bin/mpiexec" for t in plan.tasks)
    with pytest.raises(ParamError, match="nothing to measure"):
        pingpong.expand(P, pingpong.Machine([], [], ["skipped combination x: gone"]))


def test_pingpong_tasks_with_huge_pages_are_estimated_by_their_own_probe():
    """Huge pages halve a large message's time on the 2-core VM: a +thp task takes the
    +thp probe's curve, the others the plain one; with only one probe, both take it."""
    P = params.validate({"pingpong_tests": ["latency"], "pingpong_repetitions": 1,
                         "pingpong_baselines": [], "pingpong_hugepages": [False, True],
                         "pingpong_max_size": 2, "pingpong_validate": False}, "pingpong")
    m = pingpong_machine(P)
    plain, thp = pingpong.Timed(0.25, ((2, 10.0),)), pingpong.Timed(0.25, ((2, 5.0),))
    m.timed = {"gcc12+mpich4.1": plain, "gcc12+mpich4.1+thp": thp}
    est = {"+thp" in t.config["label"]: t.estimate_s for t in pingpong.expand(P, m).tasks}
    assert est[False] == pytest.approx(pingpong.estimate_s(P, "latency", timed=plain))
    assert est[True] == pytest.approx(pingpong.estimate_s(P, "latency", timed=thp))
    assert est[True] < est[False]
    m.timed = {"gcc12+mpich4.1": plain}
    assert {t.estimate_s for t in pingpong.expand(P, m).tasks} == {est[False]}


def _pingpong_plan(max_size: int) -> Plan:
    P = params.validate({"pingpong_tests": ["latency", "bw"], "pingpong_repetitions": 2,
                         "pingpong_baselines": ["mpi4py"], "pingpong_max_size": max_size},
                        "pingpong")
    return pingpong.expand(P, pingpong_machine(P))


def test_the_pingpong_at_the_halo_sizes_comes_first(monkeypatch):
    """Priority 0: the C kernel's latency check, then its latency up to the BICCG halo's
    message size (the study's 256 x 256 x 512 grid: one 512 KiB plane), what the decision
    prices; the sizes beyond it, the bandwidth tests and mpi4py after."""
    from burstbench.cost.predict import priced_message_sizes

    assert priced_message_sizes() == [12, 524288]
    assert pingpong.HALO == pingpong.HALO_CAP == 524288
    plan = _pingpong_plan(4194304)
    first = [t for t in plan.tasks if t.priority == 0]

    def size_range(t):
        return int(t.argv[t.argv.index("--min-size") + 1]), \
            int(t.argv[t.argv.index("--max-size") + 1])

    assert [(t.config["repetition"], t.config["function"], t.config["impl"], size_range(t))
            for t in first] == [(0, "latency", "c", (0, 4194304)),
                                (1, "latency", "c", (0, 524288)),
                                (2, "latency", "c", (0, 524288))]
    beyond = [t for t in plan.tasks if t.key.endswith(pingpong.BEYOND)]
    assert [size_range(t) for t in beyond] == [(1048576, 4194304)] * 2
    assert all(t.priority == 1 for t in beyond)
    # every size of the full range is still measured, once per repetition
    latency_c = [t for t in plan.tasks if t.config["function"] == "latency"
                 and t.config["impl"] == "c" and t.config["repetition"] == 1]
    assert sorted(size_range(t) for t in latency_c) == [(0, 524288), (1048576, 4194304)]
    # within a budget: those first, then the full range
    monkeypatch.setenv(budget.DEADLINE_ENV, str(time.time() + 3600))
    ordered, _ = budget.order(plan.tasks)
    assert ordered[:3] == first
    # a sweep that ends below the halo's size is not split
    small = _pingpong_plan(4096)
    assert not any(t.key.endswith(pingpong.BEYOND) for t in small.tasks)
    assert {size_range(t) for t in small.tasks if t.priority == 0} == {(0, 4096)}


def test_the_triad_probe_calibrates_each_process_estimate():
    """A probe that took 1.0 s, 0.4 s of it timed, where the model said 0.2 s: each process
    starts in 0.6 s (numba 0.65 s more) and its passes take twice the model's."""
    from burstbench.core import workmodel

    cal = workmodel.calibrate(workmodel.Timing(1.0, 0.4), 0.2, "by a test")
    m = triad.Machine(4, 1_000_000, [GCC], {"numba": "0.60", "numpy": "2.0"}, [], cal)
    # no ladder: its 'llc' point is half of this host's last-level cache, a process of its
    # own below the rule size where that cache is under 48 MB (as on a 32 MiB EPYC)
    plan = triad.expand(triad_params(triad_threads=[1, 2], triad_tiers=[]), m)
    array = 8e6 / 20e9  # one array streamed once
    config = 10 * triad._pass_s(1_000_000) + 2 * array  # its passes and a[] doubled
    work = 2 * config + 3 * array  # 2 configurations and one check
    first = {t.config["impl"]: t.estimate_s for t in plan.tasks if t.config["repetition"] == 1}
    assert first["c"] == pytest.approx(0.6 + 2 * work)
    assert first["numba"] == pytest.approx(0.6 + 0.65 + 2 * work)
    assert first["numpy"] == pytest.approx(0.6 + 2 * 2.4 * (config + 3 * array))  # one
    # a later repetition is a request to the process that measured the first: no start
    later = {t.config["impl"]: t.estimate_s for t in plan.tasks if t.config["repetition"] == 2}
    assert later["c"] == pytest.approx(triad.REQUEST_S + 2 * work)
    assert plan.calibration == cal.said and cal.said.startswith("by a test: start 0.60 s")


def test_the_triad_probe_one_thread_slows_the_teams_it_cannot_fill():
    """The probe found one thread 1.6x slower than all 4 CPUs: a team of 1 takes 1.6x the
    passes' time, a team of 2 (which two threads fill) 1x, as do 3 and 4."""
    from burstbench.core import workmodel

    cal = workmodel.calibrate(workmodel.Timing(1.0, 0.4), 0.2, "by a test")
    passes = 10 * triad._pass_s(1_000_000)
    array = 8e6 / 20e9  # one array streamed once: a[] doubled per configuration, one check
    for threads, factor in (([1], 1.6), ([2], 1.0), ([3], 1.0), ([1, 4], 1.3)):
        got = triad.estimate_s(1_000_000, 10, threads, "c", cal, True, one_thread=1.6)
        want = triad.REQUEST_S + 2 * (len(threads) * (factor * passes + 2 * array)
                                      + 3 * array)
        assert got == pytest.approx(want), threads
    # streaming stores move 80 bytes an element where normal ones move 112
    got = triad.estimate_s(1_000_000, 10, [2], "c", cal, True, 1.6, ["streaming"])
    assert got == pytest.approx(triad.REQUEST_S + 2 * (80 / 112 * passes + 5 * array))
    # arrays of its own per configuration (several NUMA nodes): a fill and a check each
    got = triad.estimate_s(1_000_000, 10, [1, 4], "c", cal, True, 1.6, fresh=True)
    assert got == pytest.approx(triad.REQUEST_S + 2 * (1.3 * 2 * passes + 2 * 6 * array))
