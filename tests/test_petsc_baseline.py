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
    from_csr,
    petsc_argv,
    petsc_parallel,
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


def petsc(ranks: int, grid=(12, 12, 12)) -> dict:
    """The baseline's record, run as biccg_vs_baselines runs it, or a skip saying why PETSc
    cannot run here on `ranks` (its own probe's answer)."""
    why = petsc_parallel(SYSTEM_PY, ranks)
    if why:
        pytest.skip(f"PETSc cannot run on {ranks} process(es) here: {why} (apt-get install "
                    "python3-petsc4py openmpi-bin)")
    proc = subprocess.run(petsc_argv(list(grid), SYSTEM_PY, ranks), capture_output=True,
                          text=True, env=os.environ | PETSC_ENV, timeout=300)
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
