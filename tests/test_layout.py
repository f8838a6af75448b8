"""Ranks x threads on a node: the pure arithmetic, and the kernels' command lines under mpiexec
(the default share, the refusal of an explicit oversubscribed layout, --oversubscribe)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kernels_ext.common.errors import BadInput
from kernels_ext.common.layout import (
    RankLayout,
    cpu_list,
    default_threads,
    node_layout,
    omp_num_threads,
    requested_threads,
)

CPUS = sorted(os.sched_getaffinity(0))  # what this test process (and its mpiexec) may use
NODE120 = set(range(120))


def cores(start: int, count: int) -> set[int]:
    return set(range(start, start + count))


# -- the pure arithmetic ---------------------------------------------------------------

@pytest.mark.parametrize("masks,expected", [
    ([cores(0, 2)] * 2, [1, 1]),                                # this VM: 2 unbound ranks
    ([NODE120] * 4, [30] * 4),                                  # unbound on a 120-core node
    ([NODE120] * 7, [17] * 7),                                  # rounded down: 119 of 120
    ([NODE120] * 240, [1] * 240),                               # more ranks than CPUs: 1 each
    ([cores(4 * i, 4) for i in range(30)], [4] * 30),           # bound to 4 distinct cores
    ([cores(0, 60), cores(60, 60)], [60, 60]),                  # bound, one socket each
    ([{i} for i in range(120)], [1] * 120),                     # one core each
    ([cores(0, 4), cores(2, 4), cores(4, 4)], [2, 1, 2]),       # partial overlaps
    ([NODE120, cores(0, 8)], [60, 4]),                          # one bound inside another
])
def test_default_share(masks, expected):
    assert [default_threads(masks, i) for i in range(len(masks))] == expected
    layout = node_layout(masks, 0)
    assert list(layout.threads_per_rank) == expected
    assert layout.threads == expected[0] and layout.cpus == len(masks[0])


def test_default_share_never_oversubscribes_unless_ranks_outnumber_cpus():
    for masks in ([NODE120] * 7, [cores(0, 4), cores(2, 4), cores(4, 4)],
                  [cores(4 * i, 4) for i in range(30)], [NODE120, cores(0, 8)]):
        assert not node_layout(masks, 0).oversubscribed, masks
    assert node_layout([cores(0, 2)] * 3, 0).oversubscribed  # 3 ranks, 2 CPUs: 1 thread each


@pytest.mark.parametrize("masks,requested,over", [
    ([NODE120] * 4, 30, False),
    ([NODE120] * 4, 31, True),                      # 124 threads on 120 CPUs
    ([cores(4 * i, 4) for i in range(30)], 4, False),
    ([cores(4 * i, 4) for i in range(30)], 5, True),  # each rank alone: 5 threads on 4 CPUs
    ([cores(0, 2)] * 2, 1, False),
    ([cores(0, 2)] * 2, 2, True),
    ([{0}] * 2, 1, True),                           # two single-threaded ranks, one CPU
    ([{0}, {1}], 1, False),
])
def test_requested_threads_against_the_node(masks, requested, over):
    layout = node_layout(masks, 0, requested)
    assert layout.threads == requested and layout.oversubscribed is over
    assert bool(layout.describe("n")) is over


def test_two_nodes_are_judged_apart():
    """Two nodes have the same CPU numbers: only the ranks of one node share its CPUs."""
    node_a, node_b = [NODE120] * 2, [NODE120]
    assert [node_layout(node_a, i).threads for i in range(2)] == [60, 60]
    assert node_layout(node_b, 0).threads == 120
    assert node_layout(node_a, 0, 60).oversubscribed is False
    assert node_layout(node_a + node_b, 0).threads == 40  # what ignoring the nodes would give


def test_message_names_the_numbers():
    layout = node_layout([cores(0, 2)] * 2, 1, 2)
    assert layout.describe("vm", "--threads 2") == (
        "2 ranks x 2 threads (--threads 2) on node vm need 4 CPUs, but the ranks there have "
        "2 (CPUs 0-1); pass --oversubscribe to run anyway")
    mixed = node_layout([NODE120] * 2, 0, [100, 30])
    assert "2 ranks of 130 threads in all on node h need 130 CPUs" in mixed.describe("h")
    assert "have 120 (CPUs 0-119)" in mixed.describe("h")


def test_one_rank_over_its_own_mask_is_named():
    layout = node_layout([cores(0, 4), {4}], 0, 2)  # 4 threads on 5 CPUs, but 2 on CPU 4
    assert layout.oversubscribed and layout.crowded_rank == 1
    assert layout.describe("h", "OMP_NUM_THREADS=2") == (
        "a rank on node h runs 2 threads (OMP_NUM_THREADS=2) but may use only 1 CPU (CPU 4); "
        "pass --oversubscribe to run anyway")


def test_bad_arguments_of_the_pure_function():
    with pytest.raises(ValueError, match="outside the node's 2 ranks"):
        node_layout([{0}, {1}], 2)
    with pytest.raises(ValueError, match="3 requested thread counts for 2 ranks"):
        node_layout([{0}, {1}], 0, [1, 1, 1])


def test_cpu_lists():
    assert cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert cpu_list({5}) == "5" and cpu_list(set()) == "none"


@pytest.mark.parametrize("value,expected", [("", None), ("4", 4), (" 4,2 ", 4), ("16", 16)])
def test_omp_num_threads(value, expected):
    assert omp_num_threads({"OMP_NUM_THREADS": value}) == expected
    assert omp_num_threads({}) is None


@pytest.mark.parametrize("value", ["0", "x", "-2", ",4"])
def test_bad_omp_num_threads(value):
    with pytest.raises(BadInput, match=f"OMP_NUM_THREADS={value} is not a positive"):
        omp_num_threads({"OMP_NUM_THREADS": value})


def test_the_option_wins_over_the_environment():
    assert requested_threads(3, {"OMP_NUM_THREADS": "8"}) == (3, "--threads 3")
    assert requested_threads(None, {"OMP_NUM_THREADS": "8"}) == (8, "OMP_NUM_THREADS=8")
    assert requested_threads(None, {}) == (None, "")
    with pytest.raises(BadInput, match="threads must be at least 1, not 0"):
        requested_threads(0, {})


def rank_layout_of(node, explicit: bool) -> RankLayout:
    return RankLayout(node, "h", explicit, node.oversubscribed, node.describe("h"), 1,
                      len(node.masks), (node.threads, node.threads), None)


def test_only_an_explicit_layout_is_refused():
    crowded = node_layout([cores(0, 2)] * 3, 0)
    rank_layout_of(crowded, explicit=False).check(allow_oversubscribe=False)  # recorded only
    with pytest.raises(BadInput, match="3 ranks x 1 thread on node h need 3 CPUs"):
        rank_layout_of(crowded, explicit=True).check(allow_oversubscribe=False)
    rank_layout_of(crowded, explicit=True).check(allow_oversubscribe=True)


# -- the command lines under mpiexec ---------------------------------------------------

@contextmanager
def pinned(cpus: set[int]) -> Iterator[None]:
    """Run what is started inside on `cpus` only (mpiexec and its ranks inherit the mask)."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


@pytest.fixture
def biccg(monkeypatch):
    """test_biccg's mpiexec runner, with OMP_NUM_THREADS unset unless a test sets it."""
    pytest.importorskip("kernels_ext.biccg._biccg", reason="built only where MPI was found")
    from test_biccg import cli

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    return cli


@pytest.fixture
def pingpong():
    """test_pingpong's mpiexec runner (two ranks)."""
    from test_pingpong import mpirun, needs_mpiexec

    if needs_mpiexec.args[0]:
        pytest.skip(needs_mpiexec.kwargs["reason"])
    return mpirun


def only_error(proc) -> str:
    """The one line a refused run prints: exit status 2, nothing else on stdout or stderr."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


SMALL = ("--poisson", "8", "8", "8")


@pytest.mark.mpi
def test_biccg_default_is_the_ranks_share(biccg):
    proc = biccg(*SMALL, n=2)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    share = max(1, len(CPUS) // 2)  # 1 on the 2-core development VM
    assert rec["threads"] == rec["threads_min"] == share and rec["oversubscribed"] is False
    assert rec["cpus_per_rank"] == [len(CPUS)] * 2
    assert rec["ranks_per_node"] == 2 and rec["nodes"] == 1 and rec["converged"]


@pytest.mark.mpi
def test_biccg_reads_the_mask_before_openmp_binds_the_process(biccg, monkeypatch):
    """libgomp binds the first thread to its first place as it loads, when OMP_PROC_BIND is
    set: a mask read after importing the solver would be one core."""
    monkeypatch.setenv("OMP_PROC_BIND", "close")
    monkeypatch.setenv("OMP_PLACES", "cores")
    proc = biccg(*SMALL, n=1)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["cpus_per_rank"] == [len(CPUS)] and rec["threads"] == len(CPUS)


@pytest.mark.mpi
def test_biccg_refuses_an_explicit_oversubscribed_layout(biccg):
    n = len(CPUS)  # 2 ranks x n threads on n CPUs
    line = only_error(biccg(*SMALL, "--threads", str(n), n=2))
    assert f"2 ranks x {n} threads (--threads {n}) on node " in line
    assert f"need {2 * n} CPUs, but the ranks there have {n} (CPUs {cpu_list(set(CPUS))})" \
        in line and "--oversubscribe" in line


@pytest.mark.mpi
def test_biccg_omp_num_threads_counts_as_explicit(biccg, monkeypatch):
    n = len(CPUS)
    monkeypatch.setenv("OMP_NUM_THREADS", str(n))
    line = only_error(biccg(*SMALL, n=2))
    assert f"2 ranks x {n} threads (OMP_NUM_THREADS={n}) on node " in line
    assert f"need {2 * n} CPUs" in line


@pytest.mark.mpi
def test_biccg_oversubscribe_runs_and_says_so(biccg, monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")  # spinning threads on shared CPUs: 1000x
    n = len(CPUS)
    proc = biccg(*SMALL, "--threads", str(n), "--oversubscribe", n=2)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["oversubscribed"] is True and rec["threads"] == n and rec["converged"]


@pytest.mark.mpi
def test_biccg_one_rank_pinned_to_one_cpu(biccg):
    with pinned({CPUS[0]}):
        line = only_error(biccg(*SMALL, "--threads", "2", n=1))
        proc = biccg(*SMALL, n=1)
    assert "1 rank x 2 threads (--threads 2) on node " in line
    assert f"have 1 (CPU {CPUS[0]})" in line
    rec = json.loads(proc.stdout)
    assert rec["threads"] == 1 and rec["cpus_per_rank"] == [1] and not rec["oversubscribed"]


PP = ("--max-size", "1", "--iterations", "20", "--skip", "2")


@pytest.mark.mpi
def test_pingpong_records_its_layout(pingpong):
    if len(CPUS) < 2:
        pytest.skip("two single-threaded ranks need two CPUs")
    recs = [json.loads(ln) for ln in pingpong(*PP).stdout.splitlines()]
    assert [r["size_bytes"] for r in recs] == [0, 1]
    for r in recs:
        assert r["oversubscribed"] is False
        assert r["cpus_per_rank"] == [len(CPUS)] * 2 and r["threads"] == 1
        assert r["ranks_per_node"] == 2 and r["nodes"] == 1


@pytest.mark.mpi
def test_pingpong_refuses_two_ranks_on_one_cpu(pingpong):
    with pinned({CPUS[0]}):
        line = only_error(pingpong(*PP))
        proc = pingpong(*PP, "--oversubscribe")
    assert "2 ranks x 1 thread on node " in line
    assert f"need 2 CPUs, but the ranks there have 1 (CPU {CPUS[0]}); pass --oversubscribe" \
        in line
    assert proc.returncode == 0, proc.stderr
    recs = [json.loads(ln) for ln in proc.stdout.splitlines()]
    assert recs and all(r["oversubscribed"] is True and r["cpus_per_rank"] == [1, 1]
                        for r in recs)
