"""The PETSc baseline (comparisons/petsc_icc_cg.py) solves our solver's matrix, slab for slab
as our ranks hold it, on one process and on several (block Jacobi ICC(0))."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernels_ext.biccg import partition, poisson_rows

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "comparisons"))
import petsc_icc_cg  # noqa: E402  (comparisons/ is a folder of scripts)
from biccg_vs_baselines import (  # noqa: E402
    PETSC_ENV,
    SYSTEM_PY,
    faulted_mb,
    from_csr,
    petsc_argv,
    petsc_parallel,
    petsc_table,
)


@pytest.mark.parametrize("grid, ranks", [((5, 4, 3), 1), ((5, 4, 3), 2), ((7, 6, 5), 3),
                                         ((9, 1, 1), 4)])
def test_each_slab_is_the_solvers_rows(grid, ranks):
    """Process p's rows are the rows our solver's rank p holds (its partition): the same
    row pointers (from 0), global columns and values."""
    n = int(np.prod(grid))
    for p in range(ranks):
        r0, r1 = partition(n, ranks, p)
        assert (r0, r1) == (n * p // ranks, n * (p + 1) // ranks)  # petsc_icc_cg's slab
        ptr, idx, val = petsc_icc_cg.poisson_csr(*grid, rows=(r0, r1))
        want_ptr, want_idx, want_val = poisson_rows(*grid, r0, r1)
        np.testing.assert_array_equal(ptr, np.asarray(want_ptr) - want_ptr[0])
        np.testing.assert_array_equal(idx, want_idx)
        np.testing.assert_array_equal(val, want_val)


def petsc(ranks: int, grid=(12, 12, 12), memory: str = "fresh") -> dict:
    """The baseline's record, run as biccg_vs_baselines runs it, or a skip saying why PETSc
    cannot run here on `ranks` (its own probe's answer)."""
    why = petsc_parallel(SYSTEM_PY, ranks)
    if why:
        pytest.skip(f"PETSc cannot run on {ranks} process(es) here: {why} (apt-get install "
                    "python3-petsc4py openmpi-bin)")
    proc = subprocess.run(petsc_argv(list(grid), SYSTEM_PY, ranks, memory=memory),
                          capture_output=True, text=True, env=os.environ | PETSC_ENV,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == 1  # rank 0 alone prints
    return json.loads(lines[0])


def test_one_process_is_icc_and_more_are_block_jacobi():
    """Both converge to 1e-7 on the same matrix; one process is ICC(0) proper, the blocks
    of two lose coupling, so they take more iterations; each record names its ranks."""
    one, two = petsc(1), petsc(2)
    assert (one["ranks"], two["ranks"]) == (1, 2)
    for rec in (one, two):
        assert rec["converged"] and rec["relative_residual"] <= 1e-7
        assert rec["n"] == 12 ** 3 and rec["nnz"] == 7 * 12 ** 3 - 6 * 12 ** 2
        assert rec["t_setup"] > 0 and rec["t_solve"] > 0
        assert 0 < rec["t_matrix"] < rec["t_build"]  # the matrix is part of the assembly
    assert two["iterations"] > one["iterations"]


def test_setup_from_the_csr_adds_petscs_matrix_only():
    """Both start from the caller's CSR: PETSc's matrix made from it is added to its setup;
    ours copies it in its setup already, so nothing is added."""
    assert from_csr({"setup_s": 0.25, "t_matrix": 0.5}) == 0.75
    assert from_csr({"setup_s": 0.25}) == 0.25


def test_a_fresh_setup_faults_in_petscs_factor():
    """With --memory fresh (the default) PETSc's setup faults in at least its factor's pages
    (ICC(0) keeps the upper triangle with the diagonal: 12 bytes an entry), each a base
    page, and its work vectors: the solve faults in less than one vector's pages; as-left
    runs and says so (what glibc kept, and so what it faults in, is its own);
    trimmed, the hand-back alone, faults in more than as-left (its pages may be huge)."""
    grid = (64, 64, 64)
    fresh, left = petsc(1, grid), petsc(1, grid, "as-left")
    trimmed = petsc(1, grid, "trimmed")
    n, nnz = fresh["n"], fresh["nnz"]
    assert (fresh["memory"], left["memory"], trimmed["memory"]) == ("fresh", "as-left",
                                                                    "trimmed")
    assert fresh["setup_faults"] * 4096 >= 12 * (nnz + n) // 2
    assert 0 <= fresh["solve_faults"] * 4096 < 8 * n
    assert trimmed["setup_faults"] > left["setup_faults"]
    assert left["converged"] and trimmed["converged"]  # (fresh's THP half: the next test)


def test_fresh_memory_turns_huge_pages_off_for_its_block_only():
    """Inside memory_as("fresh") the process's transparent huge pages are off (what it
    faults in is base pages), and on again after, also where the block raised; a process
    that had them off keeps them off.  "trimmed" and "as-left" leave them on."""
    def thp() -> str:
        status = Path("/proc/self/status").read_text()
        line = next((x for x in status.splitlines() if x.startswith("THP_enabled:")), None)
        if line is None:
            pytest.skip("this kernel's /proc/self/status has no THP_enabled line")
        return line.split()[1]

    if thp() != "1":
        pytest.skip("transparent huge pages are off for this process already")
    with petsc_icc_cg.memory_as("fresh"):
        assert thp() == "0"
    with pytest.raises(RuntimeError, match="^inside$"):
        with petsc_icc_cg.memory_as("fresh"):
            raise RuntimeError("inside")
    assert thp() == "1"
    for memory in ("trimmed", "as-left"):
        with petsc_icc_cg.memory_as(memory):
            assert thp() == "1"
    import ctypes

    libc = ctypes.CDLL(None)
    libc.prctl(petsc_icc_cg.PR_SET_THP_DISABLE, 1, 0, 0, 0)
    try:
        with petsc_icc_cg.memory_as("fresh"):
            assert thp() == "0"
        assert thp() == "0"
    finally:
        libc.prctl(petsc_icc_cg.PR_SET_THP_DISABLE, 0, 0, 0, 0)
    assert thp() == "1"


def test_trimmed_and_fresh_memory_hand_glibcs_free_memory_back():
    """memory_as("trimmed") and "fresh" hand back the memory glibc keeps after a free (the
    process's resident set falls by most of it); "as-left" keeps it."""
    import ctypes
    import resource

    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    chunk, mib = 64 * 1024, 1 << 20  # under glibc's mmap threshold: from its heap

    def rss() -> int:
        return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize()

    for memory, kept in (("as-left", True), ("trimmed", False), ("fresh", False)):
        chunks = [libc.malloc(chunk) for _ in range(1024)]  # 64 MiB, touched
        for c in chunks:
            ctypes.memset(c, 1, chunk)
        fence = libc.malloc(chunk)  # above them: glibc cannot give them back by itself
        for c in chunks:
            libc.free(c)
        before = rss()
        try:
            with petsc_icc_cg.memory_as(memory):
                fell = before - rss()
        finally:
            libc.free(fence)
        assert (fell < 8 * mib) if kept else (fell > 32 * mib), (memory, fell)


def test_memory_as_refuses_a_memory_it_does_not_know():
    with pytest.raises(ValueError, match="^memory 'warm': one of fresh, trimmed, as-left$"):
        with petsc_icc_cg.memory_as("warm"):
            pass


def test_faulted_mb_only_where_a_fault_is_a_base_page():
    """Ours in base pages and PETSc's fresh setups count 4 KiB a fault; ours in huge pages
    and PETSc's as-left or trimmed are not counted (a fault may be a 2 MiB page)."""
    assert faulted_mb({"pages": "base", "minor_faults": 1000}) == 4.096
    assert faulted_mb({"memory": "fresh", "setup_faults": 500}) == 2.048
    assert faulted_mb({"pages": "huge", "minor_faults": 1000}) is None
    assert faulted_mb({"memory": "as-left", "setup_faults": 500}) is None
    assert faulted_mb({"memory": "trimmed", "setup_faults": 500}) is None


def test_the_table_shows_what_each_setup_faulted_in():
    """The first table's fifth column: the MB a setup faulted in where it was counted, a
    dash where it was not (ours in huge pages)."""
    def sp(v: float) -> dict:
        return {"median": v, "min": v, "max": v}

    times = {m: sp(0.2) for m in ("iterations", "setup_s", "from_csr_s", "solve_s", "total_s")}
    res = {"petsc_version": "3.18.5", "layouts": ["1x2"], "petsc_layouts": {"petsc": 1},
           "grids": {"8x8x8": {
               "grid": [8, 8, 8],
               "summary": {"1x2": times | {"faulted_mb": None},
                           "petsc": times | {"faulted_mb": sp(226.4)}},
               "ratios": {"petsc": {"1x2": {m: sp(1.0) for m in
                                            ("setup", "from_csr", "solve", "total")}}},
               "achieved_gbs": {"1x2": {ph: sp(1.0) for ph in
                                        ("spmv", "precond", "vector", "iteration")}},
               "of_triad": {"1x2": {ph: sp(1.0) for ph in
                                    ("spmv", "precond", "vector", "iteration")}},
               "triad_gbs": sp(40.0)}}}
    lines = petsc_table(res)
    assert lines[0].split(" | ")[4] == "faulted in by the setup (MB)"
    ours = next(x for x in lines if "BICCG" in x).split(" | ")
    petsc = next(x for x in lines if "PETSc 3.18.5" in x).split(" | ")
    assert (ours[4], petsc[4]) == ("-", "226")
