"""BICCG: solutions against SciPy, the ordering, IC(0) against a dense reference, MPI ranks,
and one clear line for every bad input."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from conftest import printed_ratio_fits

from burstbench import params
from burstbench.benchmarks import biccg as bsweep
from kernels_ext import biccg
from kernels_ext.biccg import cg_baselines

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
bc = pytest.importorskip("kernels_ext.biccg._biccg", reason="built only where MPI was found")
KERSHAW = np.array([[3, -2, 0, 2], [-2, 3, -2, 0], [0, -2, 3, -2], [2, 0, -2, 3]], float)


def random_spd(n: int, density: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    B = sp.random(n, n, density=density, random_state=rng, data_rvs=lambda k: rng.uniform(-1, 1, k))
    S = B + B.T
    diag = np.asarray(abs(S).sum(axis=1)).ravel() + rng.uniform(0.1, 1.0, n)
    return (S + sp.diags(diag)).tocsr()


def ic0_dense(A: np.ndarray, P: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """IC(0), M = (I+L) D (I+L)^T on the pattern of A (or the lower part of P, where the
    stored pattern has entries A does not): the textbook loops."""
    n = len(A)
    P = A != 0 if P is None else P
    L, d = np.zeros((n, n)), np.zeros(n)
    for i in range(n):
        for k in range(i):
            if P[i, k]:
                s = sum(L[i, j] * d[j] * L[k, j] for j in range(k) if P[i, j] and P[k, j])
                L[i, k] = (A[i, k] - s) / d[k]
        d[i] = A[i, i] - sum(L[i, j] ** 2 * d[j] for j in range(i) if P[i, j])
    return L, d


@pytest.mark.parametrize("grid", [(5, 4, 3), (16, 16, 16), (31, 7, 2)])
@pytest.mark.parametrize("bs,colors", [(32, 20), (4, 2), (1, 1), (7, 3)])
def test_poisson_solution_matches_spsolve(grid, bs, colors):
    A = biccg.poisson_matrix(*grid)
    b = np.random.default_rng(1).random(A.shape[0])
    x, st = biccg.solve(A, b, block_size=min(bs, A.shape[0]), colors=colors, tol=1e-10,
                        threads=2)
    xs = spla.spsolve(A.tocsc(), b)
    assert st["converged"] and st["relative_residual"] <= 1e-10
    np.testing.assert_allclose(x, xs, rtol=0, atol=1e-8 * np.abs(xs).max())
    assert np.linalg.norm(b - A @ x) / np.linalg.norm(b) == pytest.approx(
        st["relative_residual"], rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_spd_matches_spsolve(seed):
    A = random_spd(300, 0.02, seed)
    b = np.random.default_rng(seed).random(300)
    x, st = biccg.solve(A, b, block_size=8, colors=5, tol=1e-10, threads=2)
    np.testing.assert_allclose(x, spla.spsolve(A.tocsc(), b), atol=1e-8)
    assert st["colors_used"] >= 5


def test_poisson_has_the_seven_point_stencil():
    A = biccg.poisson_matrix(3, 4, 5).toarray()
    assert A.shape == (60, 60) and (np.diag(A) == 6).all()
    assert (A == A.T).all() and set(np.unique(A)) == {-1.0, 0.0, 6.0}
    i = 1 + 3 * 1 + 12 * 2  # an interior point: six neighbours
    assert (A[i] == -1).sum() == 6 and A[i, i - 1] == A[i, i - 3] == A[i, i - 12] == -1
    assert (A[0] == -1).sum() == 3  # a corner: three


def block_graph_ok(A: sp.csr_matrix, bs: int, color: np.ndarray) -> bool:
    coo = A.tocoo()
    bi, bj = coo.row // bs, coo.col // bs
    mask = bi != bj
    return bool((color[bi[mask]] != color[bj[mask]]).all())


@pytest.mark.parametrize("make,bs,colors", [
    (lambda: biccg.poisson_matrix(16, 16, 16), 32, 20),
    (lambda: biccg.poisson_matrix(10, 9, 8), 7, 3),
    (lambda: random_spd(500, 0.01, 3), 8, 4),
    (lambda: random_spd(200, 0.05, 4), 16, 2),
])
def test_no_two_adjacent_blocks_share_a_color(make, bs, colors):
    A = make()
    n = A.shape[0]
    nb = (n + bs - 1) // bs
    color = np.empty(nb, np.int32)
    perm = np.empty(n, np.int64)
    used = bc.coloring(A.indptr, A.indices, A.data, bs, colors, color, perm)
    assert used >= colors and set(color) == set(range(used))
    assert block_graph_ok(A, bs, color)
    assert sorted(perm) == list(range(n))  # a permutation...
    order = perm.reshape(-1) // bs  # ...keeping each block's rows together, colors in order
    starts = [k for k in range(n) if k == 0 or order[k] != order[k - 1]]
    assert len(starts) == nb
    assert list(color[order[starts]]) == sorted(color[order[starts]])
    counts = np.bincount(color, minlength=used)[:colors]
    assert counts.max() - counts.min() <= max(2, counts.max() // 2)  # cycling balances


def greedy_reference(A: sp.csr_matrix, block_of: np.ndarray, colors: int,
                     start: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ordering biccg.h describes, written out: each block in turn takes the first color,
    counting on from the previous block's (or, for tiles, from `start`: its diagonal), that
    no earlier coupled block has (a new one when all are taken); rows then go color by
    color, blocks in their order, rows in theirs.  block_of: each row's block, numbered in
    the blocks' order."""
    nb = int(block_of.max()) + 1
    coo = A.tocoo()
    bi, bj = block_of[coo.row], block_of[coo.col]
    earlier = [set() for _ in range(nb)]
    for i, j in zip(bi[bj < bi], bj[bj < bi], strict=True):
        earlier[i].add(j)
    color, ncol, nxt = np.full(nb, -1), colors, 0
    for b in range(nb):
        if start is not None:
            nxt = int(start[b]) % ncol
        taken = {color[j] for j in earlier[b]}
        free = [(nxt + t) % ncol for t in range(ncol) if (nxt + t) % ncol not in taken]
        c = free[0] if free else ncol
        ncol += not free
        color[b], nxt = c, (c + 1) % ncol
    rows = np.arange(A.shape[0])
    perm = rows[np.lexsort((rows, block_of, color[block_of]))]
    return color, perm


def tile_blocks(grid: tuple[int, int, int], tile: tuple[int, int, int]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Each grid point's tile (x fastest), tiles numbered lexicographically, and each tile's
    diagonal (the sum of its coordinates in tiles)."""
    nx, ny, nz = grid
    i = np.arange(nx * ny * nz)
    q = [(i % nx) // tile[0], (i // nx % ny) // tile[1], (i // (nx * ny)) // tile[2]]
    ntx, nty = -(-nx // tile[0]), -(-ny // tile[1])
    block_of = (q[2] * nty + q[1]) * ntx + q[0]
    diag = np.zeros(block_of.max() + 1, np.int64)
    diag[block_of] = q[0] + q[1] + q[2]
    return block_of, diag


def box27_matrix(nx: int, ny: int, nz: int) -> sp.csr_matrix:
    """An SPD matrix with the 27-point pattern of an nx x ny x nz grid (x fastest): the
    Kronecker product of three tridiag(1, 3, 1), so tiles touch across edges and corners,
    and no coloring by diagonals is a coloring."""
    def t(m: int) -> sp.csr_matrix:
        return sp.diags([np.ones(m - 1), np.full(m, 3.0), np.ones(m - 1)], [-1, 0, 1])
    return sp.csr_matrix(sp.kron(t(nz), sp.kron(t(ny), t(nx))))


CHILD_COLORING = """
import json, sys
import numpy as np, scipy.sparse as sp
from kernels_ext.biccg import _biccg as bc
d = np.load(sys.argv[1])
A = sp.csr_matrix((d["data"], d["indices"], d["indptr"]))
color, perm = np.empty(int(d["nb"]), np.int32), np.empty(A.shape[0], np.int64)
tiles = {k: tuple(map(int, d[k])) for k in ("grid", "tile")} if d["tile"][0] else {}
used = bc.coloring(A.indptr, A.indices, A.data, int(d["bs"]), int(d["colors"]), color, perm,
                   **tiles)
print(json.dumps([used, color.tolist(), perm.tolist()]))
"""


@pytest.mark.parametrize("A,bs,colors,grid,tile", [
    (biccg.poisson_matrix(16, 16, 16), 32, 20, None, None),
    (random_spd(500, 0.01, 3), 8, 4, None, None),
    (random_spd(300, 0.05, 5), 16, 2, None, None),
    (biccg.poisson_matrix(10, 9, 8), 32, 3, (10, 9, 8), (4, 4, 2)),
    (biccg.poisson_matrix(13, 5, 7), 12, 20, (13, 5, 7), (3, 2, 2)),
    (box27_matrix(9, 8, 7), 32, 5, (9, 8, 7), (4, 4, 2)),
])
@pytest.mark.parametrize("threads", ["1", "2", "3", "9"])
def test_the_parallel_ordering_is_the_serial_greedy_one(tmp_path, A, bs, colors, grid, tile,
                                                        threads):
    """Every thread count builds the same ordering, the greedy one written out in Python (the
    renumbering runs in parallel; tiles smaller and larger than the grid, and partial ones)."""
    n = A.shape[0]
    block_of, start = tile_blocks(grid, tile) if tile else (np.arange(n) // bs, None)
    f = tmp_path / "a.npz"
    np.savez(f, data=A.data, indices=A.indices, indptr=A.indptr, nb=block_of.max() + 1, bs=bs,
             colors=colors, grid=grid or (0, 0, 0), tile=tile or (0, 0, 0))
    out = subprocess.run([sys.executable, "-c", CHILD_COLORING, str(f)], capture_output=True,
                         text=True, env={**os.environ, "OMP_NUM_THREADS": threads}, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    used, color, perm = json.loads(out.stdout)
    want_color, want_perm = greedy_reference(A, block_of, colors, start)
    assert used == max(want_color.max() + 1, colors)  # a small grid's tiles may leave some empty
    assert color == want_color.tolist()
    assert perm == want_perm.tolist()


@pytest.mark.parametrize("grid,colors", [((48, 16, 16), 20), ((48, 16, 16), 12),
                                         ((80, 16, 8), 24), ((20, 9, 5), 2), ((20, 9, 5), 1)])
def test_a_grids_tiles_take_the_colors_of_their_diagonals(grid, colors):
    """On a 7-point grid each 4 x 4 x 2 tile takes the color of its diagonal (the sum of its
    coordinates in tiles, mod the colors), so its six neighbours are in the colors swept just
    before and after its own: whether or not the count divides the tiles along x (12 there
    with 20 and 12 colors, 20 with 24 colors, 5 with 2 and 1: more diagonals than colors in
    each, 22, 26 and 9).  One color asked for: two."""
    from kernels_ext.biccg import _biccg as bc

    A = biccg.poisson_matrix(*grid)
    block_of, diag = tile_blocks(grid, (4, 4, 2))
    color = np.empty(len(diag), np.int32)
    perm = np.empty(A.shape[0], np.int64)
    used = bc.coloring(A.indptr, A.indices, A.data, 32, colors, color, perm, grid=grid,
                       tile=(4, 4, 2))
    assert used == max(colors, 2)
    assert color.tolist() == (diag % used).tolist()
    coo = A.tocoo()
    bi, bj = block_of[coo.row], block_of[coo.col]
    step = (color[bj[bi != bj]] - color[bi[bi != bj]]) % used
    assert set(step.tolist()) == ({1} if used == 2 else {1, used - 1})


@pytest.mark.parametrize("make", [lambda: biccg.poisson_matrix(4, 3, 3).toarray(),
                                  lambda: random_spd(40, 0.1, 7).toarray()])
def test_ic0_matches_the_dense_reference(make):
    A = make()
    S = sp.csr_matrix(A)
    n = len(A)
    d = np.empty(n)
    uptr = np.empty(n + 1, np.int64)
    uidx = np.empty(S.nnz, np.int32)
    uval = np.empty(S.nnz)
    assert bc.ic0(S.indptr, S.indices, S.data, d, uptr, uidx, uval) == 0.0
    L, dref = ic0_dense(A)
    np.testing.assert_allclose(d, dref, rtol=1e-12)
    U = sp.csr_matrix((uval[:uptr[-1]], uidx[:uptr[-1]], uptr), shape=(n, n)).toarray()
    np.testing.assert_allclose(U, L.T, atol=1e-12)
    assert (U[A.T == 0] == 0).all()  # no fill: the pattern of A


def test_ic0_with_one_sided_explicit_zeros():
    """A symmetric matrix whose stored pattern is not (explicit zeros below the diagonal
    only): IC(0) is on the stored lower pattern, U is exactly L^T (the transpose falls
    back from the parallel one, which assumes a symmetric pattern)."""
    A = random_spd(40, 0.1, 7).toarray()
    rng = np.random.default_rng(1)
    lower = [(i, k) for i in range(40) for k in range(i) if A[i, k] == 0 and A[k, i] == 0]
    extra = [lower[t] for t in rng.choice(len(lower), 60, replace=False)]
    P = A != 0
    for i, k in extra:
        P[i, k] = True
    rows, cols = np.nonzero(P)
    S = sp.csr_matrix((A[rows, cols], (rows, cols)), shape=A.shape)
    assert S.nnz == (A != 0).sum() + len(extra)  # the zeros are stored
    n = len(A)
    d, uptr = np.empty(n), np.empty(n + 1, np.int64)
    uidx, uval = np.empty(S.nnz, np.int32), np.empty(S.nnz)
    assert bc.ic0(S.indptr, S.indices, S.data, d, uptr, uidx, uval) == 0.0
    L, dref = ic0_dense(A, P)
    assert any(L[i, k] != 0 for i, k in extra)  # fill where the zeros were stored
    np.testing.assert_allclose(d, dref, rtol=1e-12)
    U = sp.csr_matrix((uval[:uptr[-1]], uidx[:uptr[-1]], uptr), shape=(n, n)).toarray()
    np.testing.assert_allclose(U, L.T, atol=1e-12)


def reference_pcg_history(A: sp.csr_matrix, b: np.ndarray, tol: float,
                          single: bool = False) -> list[float]:
    """||r||/||b|| of textbook PCG with IC(0) of A (bc.ic0, checked above), M^-1 applied
    by SciPy's triangular solves: what the solver must reproduce on the reordered A.
    single: the factor's values (U and 1/d) rounded to float32, the arithmetic double."""
    n = A.shape[0]
    d, uptr = np.empty(n), np.empty(n + 1, np.int64)
    uidx, uval = np.empty(A.nnz, np.int32), np.empty(A.nnz)
    assert bc.ic0(A.indptr, A.indices, A.data, d, uptr, uidx, uval) == 0.0
    dinv = 1.0 / d
    if single:
        uval, dinv = uval.astype(np.float32).astype(float), dinv.astype(np.float32).astype(float)
    U = (sp.csr_matrix((uval[:uptr[-1]], uidx[:uptr[-1]], uptr), shape=(n, n))
         + sp.identity(n)).tocsr()
    Ut = U.T.tocsr()

    def prec(r):
        w = spla.spsolve_triangular(Ut, r, lower=True)
        return spla.spsolve_triangular(U, w * dinv, lower=False)

    x, r = np.zeros(n), b.copy()
    z = prec(r)
    p, rz, hist = z.copy(), r @ z, [1.0]
    while hist[-1] > tol:
        q = A @ p
        alpha = rz / (p @ q)
        x += alpha * p
        r -= alpha * q
        hist.append(np.linalg.norm(r) / np.linalg.norm(b))
        z = prec(r)
        rz, rz_old = r @ z, rz
        p = z + (rz / rz_old) * p
    return hist


@pytest.mark.parametrize("make,bs,colors", [
    (lambda: biccg.poisson_matrix(12, 10, 8), 8, 5),    # in-block rows coupled to i -+ 1
    (lambda: biccg.poisson_matrix(6, 5, 9), 16, 3),     # ... and to i -+ 6 inside the block
    (lambda: random_spd(400, 0.01, 3), 8, 4),           # irregular: no chain
])
def test_preconditioner_is_ic0_of_the_reordered_matrix(make, bs, colors):
    """The whole iteration, substitutions included: our residual history equals textbook
    PCG with IC(0) of the multicolor-reordered matrix, step by step."""
    A = make()
    n = A.shape[0]
    b = np.random.default_rng(5).random(n)
    color, perm = np.empty((n + bs - 1) // bs, np.int32), np.empty(n, np.int64)
    bc.coloring(A.indptr, A.indices, A.data, bs, colors, color, perm)
    Ap = A[perm][:, perm].tocsr()
    Ap.sort_indices()
    ref = reference_pcg_history(Ap, b[perm], 1e-10)
    _, st = biccg.solve(A, b, block_size=bs, colors=colors, tol=1e-10, threads=2, history=True,
                        factor="double")
    assert st["iterations"] == len(ref) - 1
    np.testing.assert_allclose(st["history"], ref, rtol=1e-6)


def test_non_positive_pivot_is_shifted_and_reported():
    S = sp.csr_matrix(KERSHAW)  # SPD, but IC(0) meets a negative pivot
    d, uptr = np.empty(4), np.empty(5, np.int64)
    shift = bc.ic0(S.indptr, S.indices, S.data, d, uptr, np.empty(16, np.int32), np.empty(16))
    assert shift > 0 and (d > 0).all()
    b = KERSHAW @ np.ones(4)
    x, st = biccg.solve(S, b, block_size=4, colors=1, tol=1e-10)
    assert st["shift"] == shift and st["converged"]
    np.testing.assert_allclose(x, np.ones(4), atol=1e-8)


def test_indefinite_matrix_breaks_down_with_its_iteration():
    A = sp.csr_matrix(np.array([[2.0, 3, 1], [3, 2, 0], [1, 0, 2]]))  # eigenvalues of both signs
    with pytest.raises(biccg.NotConverged, match="broke down at iteration 2"):
        biccg.solve(A, A @ np.ones(3), block_size=1, colors=1)
    with pytest.raises(biccg.NotConverged, match="no positive pivots"):  # negative diagonal
        biccg.solve(sp.diags([1.0, -2.0, 1.0]).tocsr(), np.ones(3), block_size=1, colors=1)


def test_max_iterations_is_not_convergence():
    A = biccg.poisson_matrix(20, 20, 20)
    x, st = biccg.solve(A, A @ np.ones(A.shape[0]), max_iter=3)
    assert st["iterations"] == 3 and st["converged"] is False
    assert st["relative_residual"] > 1e-7


def test_a_solve_after_others_is_the_first_one_bit_for_bit():
    """The solver keeps its large arrays (2 MiB and more) between solves and a later setup
    takes them back with what the last solve left in them: the same solution, bit for bit,
    after a solve of another size in between, and after release_memory()."""
    grid, tile = (72, 72, 72), (4, 4, 2)
    A, B = biccg.poisson_matrix(*grid), biccg.poisson_matrix(60, 50, 40)
    b = np.random.default_rng(4).random(A.shape[0])
    kw = {"threads": 2, "tol": 1e-8, "grid": grid, "tile": tile}
    x1, s1 = biccg.solve(A, b, **kw)
    biccg.solve(B, np.ones(B.shape[0]), threads=2, tol=1e-6)
    x2, s2 = biccg.solve(A, b, **kw)
    biccg.release_memory()
    x3, s3 = biccg.solve(A, b, **kw)
    assert s1["converged"] and s1["iterations"] == s2["iterations"] == s3["iterations"]
    assert x1.tobytes() == x2.tobytes() == x3.tobytes()


MY_ROWS = r"""
#include <stdio.h>
#include <string.h>
#include "internal.h"
int main(void)
{
    /* 6 colors of 0, 1, 3, 7, 9 and 2 blocks, blocks of 1 to 3 rows */
    int cptr[7] = {0, 0, 1, 4, 11, 20, 22}, bstart[23] = {0};
    for (int b = 0; b < 22; b++)
        bstart[b + 1] = bstart[b] + 1 + b % 3;
    bc_local L;
    memset(&L, 0, sizeof L);
    L.ncolors = 6, L.nblocks = 22, L.cptr = cptr, L.bstart = bstart;
    omp_set_dynamic(0);
    for (int nt = 1; nt <= 5; nt++) {
        int bad = 0, rows = 0, team = 0;
#pragma omp parallel num_threads(nt) reduction(+ : bad, rows) reduction(max : team)
        for (int c = 0; c < L.ncolors; c++) {
            int lo = -1, hi = -1, runs = 0, i0, i1;
            team = omp_get_num_threads();
#pragma omp for schedule(static) nowait
            for (int b = cptr[c]; b < cptr[c + 1]; b++) {
                runs += bstart[b] != hi;
                lo = lo < 0 ? bstart[b] : lo, hi = bstart[b + 1];
            }
            bc_my_rows(&L, c, &i0, &i1);
            bad += runs == 0 ? i0 != i1 : runs != 1 || lo != i0 || hi != i1;
            rows += i1 - i0;
        }
        printf("%d %d %d %d\n", nt, team, bad, rows);
    }
    return 0;
}
"""


def test_the_rows_a_thread_updates_are_the_rows_it_sweeps(tmp_path):
    """bc_my_rows (the SpMV, the CG's vector updates and the first touch of their arrays take
    each thread's rows from it, so that a row stays on the thread that sweeps it and in that
    core's cache) gives each thread, on teams of 1 to 5 threads, the one run of rows that
    `omp for schedule(static)` over a color's blocks gives it (as the sweeps share them),
    and the threads together every row once; colors of 0 to 9 blocks."""
    source = tmp_path / "my_rows.c"
    source.write_text(MY_ROWS)
    exe = tile_driver_exe(tmp_path, str(source))
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = sum(1 + b % 3 for b in range(22))
    assert out.stdout.split("\n")[:-1] == [f"{nt} {nt} 0 {rows}" for nt in range(1, 6)]


@pytest.mark.parametrize("double,rows", [("0", "0"), ("1", "1")])
def test_no_setup_reads_what_the_last_one_left(tmp_path, double, rows):
    """Built with -DBC_POOL_POISON, the solver fills each array it keeps for the next solve
    with garbage; the setups of three solves in one process then build the same bytes (the
    digests of ordering, matrix, plan, pattern and factor, -DBC_PROFILE).  128 x 64 x 64:
    every array of the setup is large enough to be kept."""
    mpicc = Path(sys.executable).parent / "mpicc"
    if not mpicc.exists():
        pytest.skip(f"no MPI compiler wrapper at {mpicc}")
    sys.path.insert(0, str(ROOT / "comparisons"))
    from biccg_kernels import build  # comparisons/ is a folder of scripts

    exe = tmp_path / "profile"
    build(str(mpicc), "-O2 -fopenmp -std=gnu99 -DBC_PROFILE -DBC_POOL_POISON", exe,
          "biccg_setup_profile.c")
    out = subprocess.run([str(exe), "128", "64", "64", "2", "3", double, rows, "3"],
                         capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr
    digests = [line for line in out.stderr.splitlines() if line.startswith("digest ")]
    assert len(digests) == 3 and len(set(digests)) == 1, digests
    assert [json.loads(line)["rc"] for line in out.stdout.splitlines()] == [0, 0, 0]


def test_the_setup_profile_measures_the_blocking_it_is_asked_for():
    """comparisons/biccg_setup_profile.py --blocking rows profiles the study's row runs: its
    header says so and its setup builds another ordering than the default tiles' (the
    digests differ), and with --iterations it solves and reports the solve's parts."""
    mpicc = Path(sys.executable).parent / "mpicc"
    if not mpicc.exists():
        pytest.skip(f"no MPI compiler wrapper at {mpicc}")
    script = ROOT / "comparisons" / "biccg_setup_profile.py"
    outs = {}
    for blocking in ("tiles", "rows"):
        out = subprocess.run([sys.executable, str(script), "--grid", "16", "16", "16",
                              "--rounds", "1", "--threads", "2", "--iterations", "200",
                              "--blocking", blocking], capture_output=True, text=True, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        assert f"pages, blocks: {blocking}, this tree; seconds" in out.stdout
        assert "solve, this tree (" in out.stdout and "precond" in out.stdout
        outs[blocking] = [line for line in out.stdout.splitlines() if "digest order" in line]
    assert len(outs["tiles"]) == len(outs["rows"]) == 1
    assert outs["tiles"][0].split("plan")[0] != outs["rows"][0].split("plan")[0]


def test_the_setup_profile_times_a_later_setup_alone(tmp_path):
    """comparisons/biccg_setup_profile.py --setup later: each process solves twice and the
    phases printed are the second setup's alone.  On one rank they add up to that solve's
    own setup_s (the first's added in would make about twice it; on two ranks setup_s is
    the slower rank's, from a barrier, so rank 0's phases may sum to less); on two ranks
    both setups built the same bytes (one digest line a rank)."""
    mpicc = Path(sys.executable).parent / "mpicc"
    if not mpicc.exists():
        pytest.skip(f"no MPI compiler wrapper at {mpicc}")
    sys.path.insert(0, str(ROOT / "comparisons"))
    import biccg_setup_profile as profile  # comparisons/ is a folder of scripts
    from biccg_kernels import build

    exe = tmp_path / "profile"
    build(str(mpicc), profile.FLAGS, exe, profile.DRIVER)
    phases, digests, record = profile.run_once(exe, [48, 48, 48], 2, setup="later")
    assert list(phases)[0] == profile.FIRST_PHASE
    assert {"order: coloring scan", "factor: numeric", "vectors"} <= set(phases), phases
    # inside the setup's timers: at most its setup_s (with the first setup's added in,
    # about twice it); how much of it they cover is a time, not asserted
    assert sum(phases.values()) <= 1.1 * record["setup_s"], (phases, record)
    phases, digests, record = profile.run_once(exe, [24, 24, 24], 1, 2, setup="later")
    assert list(phases)[0] == profile.FIRST_PHASE and record["rc"] == 0
    assert digests.count("digest order") == 2, digests
    script = ROOT / "comparisons" / "biccg_setup_profile.py"
    out = subprocess.run([sys.executable, str(script), "--grid", "16", "16", "16", "--rounds",
                          "1", "--setup", "later"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "1 fresh runs, later setup, huge pages, blocks: tiles, this tree" in out.stdout


CHILD_KEPT = """
import json, os
import numpy as np
from kernels_ext import biccg
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
A = biccg.poisson_matrix(96, 96, 96)
b = np.ones(A.shape[0])
r0 = rss()
biccg.solve(A, b, threads=2, max_iter=3)
r1 = rss()
biccg.solve(A, b, threads=2, max_iter=3)
r2 = rss()
biccg.release_memory()
print(json.dumps([r0, r1, r2, rss()]))
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux's /proc")
def test_the_memory_kept_between_solves_is_reused_and_released():
    """After a solve the process keeps the setup's large arrays (about 200 MB at 96^3), a
    second solve of the same size takes them back instead of growing, and
    release_memory() hands them to the system."""
    out = subprocess.run([sys.executable, "-c", CHILD_KEPT], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr
    r0, r1, r2, r3 = json.loads(out.stdout)
    mb = 1 << 20
    assert r1 - r0 > 150 * mb, (r0, r1)
    assert abs(r2 - r1) < 20 * mb, (r1, r2)
    assert r2 - r3 > 150 * mb, (r2, r3)


def test_residual_history_falls():
    A = biccg.poisson_matrix(12, 12, 12)
    _, st = biccg.solve(A, A @ np.ones(A.shape[0]), history=True)
    h = st["history"]
    assert len(h) == st["iterations"] + 1 and h[0] == pytest.approx(1.0)
    assert h[-1] <= 1e-7 < h[-2]


def test_nan_in_the_right_hand_side_is_refused():
    A = biccg.poisson_matrix(4, 4, 4)
    b = np.ones(64)
    b[5] = np.nan
    with pytest.raises(biccg.BadInput, match="NaN or Inf"):
        biccg.solve(A, b)


@pytest.mark.parametrize("kw,message", [
    ({"block_size": 0}, "block size must be positive"),
    ({"block_size": 1000}, "larger than the matrix"),
    ({"colors": 0}, "colors must be positive"),
    ({"tol": 0.0}, "tol must be positive"),
    ({"max_iter": -1}, "at least 0"),
])
def test_bad_parameters(kw, message):
    A = biccg.poisson_matrix(4, 4, 4)
    with pytest.raises(biccg.BadInput, match=message):
        biccg.solve(A, np.ones(64), **kw)


def test_matrix_checks():
    with pytest.raises(biccg.BadInput, match="not square"):
        biccg.check_matrix(sp.csr_matrix(np.ones((3, 4))))
    with pytest.raises(biccg.BadInput, match="not symmetric"):
        biccg.check_matrix(sp.csr_matrix(np.array([[2.0, 1.0], [0.0, 2.0]])))
    with pytest.raises(biccg.BadInput, match="NaN or Inf"):
        biccg.check_matrix(sp.csr_matrix(np.array([[np.inf, 0.0], [0.0, 2.0]])))


def test_baselines_agree_with_spsolve():
    A = biccg.poisson_matrix(10, 10, 10)
    b = A @ np.ones(1000)
    for method in ("ic0", "jacobi", "none"):
        x, info = cg_baselines.numba_pcg(A, b, 1e-9, precond=method)
        assert info["converged"]
        np.testing.assert_allclose(x, 1.0, atol=1e-7)
    x, info = cg_baselines.scipy_cg(A, b, 1e-9)
    assert info["converged"] and info["iterations"] > 0
    # the multicolor ordering costs iterations against natural-order IC(0), but few
    _, natural = cg_baselines.numba_pcg(A, b, 1e-9, precond="ic0")
    _, ours = biccg.solve(A, b, tol=1e-9)
    assert natural["iterations"] <= ours["iterations"] <= 1.5 * natural["iterations"]


# -- the command line and MPI ----------------------------------------------------------

def cli(*args, n: int | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    pre = [MPIEXEC, "-n", str(n)] if n else []
    return subprocess.run([*pre, sys.executable, "-m", "kernels_ext.biccg", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def test_cli_prints_the_study_fields():
    proc = cli("--poisson", "12", "10", "8", "--threads", "2")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    for key in ("converged", "iterations", "relative_residual", "colors_used", "setup_s",
                "solve_s", "per_iteration_s", "peak_rss_bytes", "minor_faults"):
        assert key in rec
    assert rec["converged"] and rec["relative_residual"] <= 1e-7 and rec["colors_used"] == 20
    assert rec["error_max"] < 1e-5 and rec["n"] == 960


@pytest.mark.mpi
def test_two_ranks_agree_with_one(tmp_path):
    script = tmp_path / "two.py"
    script.write_text(
        "import numpy as np\n"
        "from kernels_ext import biccg\n"
        "from kernels_ext.common.mpi import init_mpi\n"
        "MPI = init_mpi('funneled'); c = MPI.COMM_WORLD\n"
        "A = biccg.poisson_matrix(14, 12, 10); n = A.shape[0]\n"
        "b = np.sin(np.arange(n)); r0, r1 = biccg.partition(n, c.size, c.rank)\n"
        "rows = A[r0:r1]\n"
        "x, st = biccg.solve_local(c, rows.indptr, rows.indices, rows.data, b[r0:r1], n, r0,"
        " 32, 20, 1e-9, 1000, 1)\n"
        "xs = c.gather(x, root=0)\n"
        "if c.rank == 0:\n"
        "    x2 = np.concatenate(xs)\n"
        "    x1, st1 = biccg.solve_local(MPI.COMM_SELF, A.indptr, A.indices, A.data, b, n, 0,"
        " 32, 20, 1e-9, 1000, 1)\n"
        "    print(np.abs(x2 - x1).max() / np.abs(x1).max(), st['iterations'],"
        " st1['iterations'], st['halo_entries'], st['relative_residual'])\n")
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(script)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    diff, it2, it1, halo, res = proc.stdout.split()
    assert float(diff) < 1e-7  # both within 1e-9 of the solution
    assert int(halo) == 2 * 14 * 12 and float(res) <= 1e-9


@pytest.mark.mpi
def test_the_setup_is_the_slowest_ranks_not_each_parts_slowest(tmp_path):
    """Rank 0 holds 7/8 of the rows: rank 1 waits for it after its factor (the halo's
    plan), so the parts' maxima count rank 0's work and rank 1's wait for it.  The setup is
    the slowest rank's own sum from a barrier: at least each part's maximum, under the
    parts' sum; on one rank it is its parts' sum."""
    script = tmp_path / "uneven.py"
    script.write_text(
        "import json\n"
        "import numpy as np\n"
        "from kernels_ext import biccg\n"
        "from kernels_ext.common.mpi import init_mpi\n"
        "MPI = init_mpi('funneled'); c = MPI.COMM_WORLD\n"
        "A = biccg.poisson_matrix(48, 48, 48); n = A.shape[0]\n"
        "cut = n // 8 * 7 if c.size > 1 else n; r0, r1 = (0, cut) if c.rank == 0 else (cut, n)\n"
        "rows = A[r0:r1]; b = np.ones(n); c.Barrier()\n"
        "x, st = biccg.solve_local(c, rows.indptr, rows.indices, rows.data, b[r0:r1], n, r0,"
        " 32, 20, 1e-7, 1000, 1)\n"
        "if c.rank == 0:\n"
        "    print(json.dumps(st['times']))\n")
    parts = ("input", "ordering", "factorization", "halo_setup", "vectors")

    def times(ranks: int) -> tuple[dict, float]:
        proc = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, str(script)],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert proc.returncode == 0, proc.stderr
        t = json.loads(proc.stdout)
        return t, sum(t[k] for k in parts)

    t, total = times(1)
    assert t["setup"] == pytest.approx(total, rel=1e-12)
    # two ranks: 0.52-0.72 of the parts' sum here (20 runs, 10 beside the suite), where the
    # parts' maxima give exactly 1 every time; rank 1 stalled before the plan hides its
    # wait, so the best of up to three runs
    ratios = []
    for _ in range(3):
        t, total = times(2)
        assert max(t[k] for k in parts) <= t["setup"] <= total * (1 + 1e-12), t
        ratios.append(t["setup"] / total)
        if ratios[-1] <= 0.9:
            break
    assert min(ratios) <= 0.9, ratios


@pytest.mark.mpi
@pytest.mark.parametrize("ranks,messages", [(1, 0), (2, 1), (3, 2)])
def test_the_solver_counts_what_an_iteration_sends(ranks, messages):
    """Rows in contiguous slabs of a 16 x 16 x 24 grid: each neighbour's halo is one 16 x 16
    plane of doubles (2,048 B); the middle rank of three has two neighbours, the busiest
    rank counts.  Two Allreduces per iteration (p'q; r'r with r'z), 1 + 2 doubles."""
    proc = cli("--poisson", "16", "16", "24", "--threads", "1", "--oversubscribe", n=ranks)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["halo_messages"] == messages
    assert rec["halo_bytes"] == messages * 16 * 16 * 8
    assert (rec["reductions"], rec["reduction_bytes"]) == (2, 24)


@pytest.mark.mpi
def test_cli_solves_again_on_the_memory_it_kept():
    """--solves 3: a line a solve, numbered, the same answer each time (the same bits), on
    one rank and two."""
    for n in (None, 2):
        proc = cli("--poisson", "20", "16", "12", "--threads", "1", "--solves", "3", n=n)
        assert proc.returncode == 0, proc.stderr
        recs = [json.loads(ln) for ln in proc.stdout.splitlines()]
        assert [r["solve"] for r in recs] == [1, 2, 3]
        assert len({(r["iterations"], r["relative_residual"], r["error_max"])
                    for r in recs}) == 1, recs
        assert all(r["converged"] and r["setup_s"] > 0 for r in recs)
        assert recs[0]["load_s"] > 0 and [r["load_s"] for r in recs[1:]] == [0.0, 0.0]


@pytest.mark.parametrize("args,n,code,message", [
    (("--poisson", "1", "1", "2"), 3, 2, "more MPI ranks (3) than matrix rows (2)"),
    (("--poisson", "8", "8", "8", "--block-size", "0"), None, 2, "block size must be positive"),
    (("--poisson", "4", "4", "4", "--block-size", "65"), None, 2, "larger than the matrix"),
    (("--poisson", "8", "8", "8", "--colors", "0"), None, 2, "colors must be positive"),
    (("--poisson", "8", "8", "8", "--tol", "0"), None, 2, "tol must be positive"),
    (("--poisson", "8", "8", "8", "--tol=-1e-3"), None, 2, "tol must be positive"),
    (("--poisson", "0", "8", "8"), None, 2, "grid sizes must be positive"),
    (("--mtx", "/no/such/file.mtx"), None, 2, "no such file"),
    (("--poisson", "16", "16", "16", "--max-iter", "2"), None, 3, "not converged"),
    (("--poisson", "16", "16", "16", "--max-iter", "2", "--solves", "2"), None, 3,
     "not converged (solve 1)"),
    (("--poisson", "8", "8", "8", "--solves", "0"), None, 2, "--solves must be at least 1, not 0"),
    (("--poisson", "8", "8", "8", "--triad-beside", "0"), 2, 2,
     "size must be a positive number of elements, not 0"),
    (("--poisson", "8", "8", "8", "--triad-beside", "1e13"), 2, 2,
     "size 10000000000000 needs 240000.0 GB (3 arrays of 8-byte doubles) but only"),
])
def test_cli_bad_input(args, n, code, message):
    proc = cli(*args, n=n)
    assert proc.returncode == code, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and message in errors[0]


@pytest.mark.parametrize("body,code,message", [
    ("%%MatrixMarket matrix coordinate real general\n2 3 1\n1 1 1\n", 2, "not square"),
    ("%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 2\n2 2 2\n2 1 1\n", 2,
     "not symmetric"),
    ("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 nan\n2 2 1\n", 2, "NaN or Inf"),
    ("%%MatrixMarket matrix coordinate real symmetric\n3 3 5\n1 1 1\n2 1 2\n2 2 1\n3 2 1\n"
     "3 3 3\n", 3, "broke down at iteration 3"),
    ("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 1 1\n", 2, "line 4"),
])
def test_cli_bad_matrices(tmp_path, body, code, message):
    f = tmp_path / "m.mtx"
    f.write_text(body)
    proc = cli("--mtx", str(f), "--block-size", "1", "--colors", "1")
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr


@pytest.mark.mpi
def test_sweep_layouts_and_notes(tmp_path):
    P = params.validate({"vm": "t", "runs_dir": str(tmp_path),
                         "biccg_problems": [{"poisson": [8, 8, 8]},
                                            {"mtx": "nowhere.mtx", "optional": True}],
                         "biccg_ranks_per_node": [1, 2], "biccg_threads": [1, 64],
                         "biccg_nodes": [1, 2], "biccg_baselines": ["scipy-cg"],
                         "biccg_repetitions": 1}, "biccg")
    pl = bsweep.plan(P)
    labels = {t.config["label"] for t in pl.tasks}
    assert {"1x1", "2x1", "scipy-cg"} <= labels and "1x64" not in labels
    text = " ".join(pl.notes)
    assert "nowhere" in text and "64 threads" in text and "2 nodes" in text
    run, table = bsweep.SPEC.measure(P, progress=False)
    st = bsweep.spread(table)
    assert set(st["metric"]) >= {"solve_time", "setup_time", "iterations", "relative_residual",
                                 "per_iteration_precond"}
    assert (st.loc[st["metric"] == "relative_residual", "median"] <= 1e-7).all()
    with pytest.raises(params.ParamError, match="does not exist"):
        bsweep.plan(params.validate({"biccg_problems": [{"mtx": "nowhere.mtx"}]}, "biccg"))


def small_sweep(runs_dir: Path, **over) -> dict:
    """Validated parameters of a sweep of Poisson 12^3 on one rank of one thread, scipy-cg
    beside it, one repetition, its runs in `runs_dir`; `over` on top."""
    return params.validate({"vm": "t", "runs_dir": str(runs_dir),
                            "biccg_problems": [{"poisson": [12, 12, 12]}],
                            "biccg_ranks_per_node": [1], "biccg_threads": [1],
                            "biccg_baselines": ["scipy-cg"], "biccg_repetitions": 1} | over,
                           "biccg")


def test_a_sweep_of_several_solves_a_process_records_the_later_ones(tmp_path):
    """biccg_solves 3: each of our solver's processes solves three times; the first solve's
    times are the configuration's, the later two's median setup and solve are recorded
    beside them, and become the later_setup_time_s merit; the estimate counts the process's
    start once and each solve's work, the timeout each solve; a baseline solves once."""
    from burstbench.benchmarks.biccg import results, tasks

    P, once = (small_sweep(tmp_path / str(k), biccg_solves=k) for k in (3, 1))
    m = tasks.probe(P)
    plan, plan1 = tasks.expand(P, m), tasks.expand(once, m)
    ours = next(t for t in plan.tasks if t.config["impl"] == "c")
    ours1 = next(t for t in plan1.tasks if t.config["impl"] == "c")
    assert ours.argv[-2:] == ("--solves", "3") and "--solves" not in ours1.argv
    assert ours.timeout_s == 3 * ours1.timeout_s == 3 * P["biccg_timeout_s"]  # per solve
    start = m.calibration.start_s + tasks.SOLVERS["c"].start_s
    assert ours.estimate_s - start == pytest.approx(3 * (ours1.estimate_s - start))
    base = [t for t in plan.tasks if t.config["impl"] != "c"]
    assert base and all("--solves" not in t.argv for t in base)
    run, table = bsweep.SPEC.measure(P, progress=False)
    mine = table[table["impl"] == "c"]
    later = dict(zip(mine["metric"], mine["value"]))
    assert {"later_setup_time", "later_solve_time"} <= set(later)
    raw = [json.loads(ln) for ln in (run.root / "biccg.jsonl").read_text().splitlines()]
    ran = next(r for r in raw if "later_solves" in r)
    assert [r["solve"] for r in ran["later_solves"]] == [2, 3] and ran["solve"] == 1
    assert later["setup_time"] == ran["setup_s"]
    assert later["later_setup_time"] == pytest.approx(
        sorted(r["setup_s"] for r in ran["later_solves"])[0] / 2
        + sorted(r["setup_s"] for r in ran["later_solves"])[1] / 2)
    assert "later_setup_time" not in set(table.loc[table["impl"] != "c", "metric"])
    merit = results.merits(tmp_path / "3", ROOT / "data" / "reference")
    assert len(merit.of("later_setup_time_s")) == 1


@pytest.mark.mpi
def test_cli_measures_its_nodes_triad_beside_its_first_solve():
    """--triad-beside SIZE: the first solve's record carries the node's Triad just before
    and after it (GB/s, finite, positive), on one rank and on two measuring at once; a
    later solve's and a solve without the flag carry none."""
    for n in (None, 2):
        proc = cli("--poisson", "12", "12", "12", "--threads", "1", "--solves", "2",
                   "--triad-beside", "400000", n=n)
        assert proc.returncode == 0, proc.stderr
        first, later = (json.loads(ln) for ln in proc.stdout.splitlines())
        assert len(first["triad_beside_gbs"]) == 2, first
        assert all(math.isfinite(g) and g > 0 for g in first["triad_beside_gbs"])
        assert "triad_beside_gbs" not in later
    proc = cli("--poisson", "12", "12", "12", "--threads", "1")
    assert "triad_beside_gbs" not in json.loads(proc.stdout)


def test_the_nodes_triad_is_its_bytes_over_its_slowest_pass_past_the_first(monkeypatch):
    """node_rate on one process: 24 B an element of its share over the fastest pass but the
    first (a first pass faster than all is not counted), with the threads asked for, the
    Triad alone in each pass, and the arrays kept for the next call."""
    from mpi4py import MPI

    from kernels_ext import triad

    asked = {}

    def measure(n, ntimes, threads, keep, triad_only):
        asked.update(n=n, ntimes=ntimes, threads=threads, keep=keep, triad_only=triad_only)
        return [{"function": "Triad", "times_s": [0.001, 0.5, 0.25, 2.0]}]

    monkeypatch.setattr(triad, "measure", measure)
    assert triad.node_rate(MPI.COMM_SELF, 3, 1_000_000, 4) == pytest.approx(24e6 / 0.25 / 1e9)
    assert asked == {"n": 1_000_000, "ntimes": 4, "threads": 3, "keep": True,
                     "triad_only": True}


def test_a_triad_that_cannot_run_after_the_solve_loses_nothing(monkeypatch):
    """The Triad after the solve fails: the solve's record stands, with the Triad before it
    and the reason; node_rate raises a rank's error as it was (its kind and its words)."""
    from mpi4py import MPI

    from kernels_ext import triad
    from kernels_ext.common.errors import BadInput, ValidationFailed

    calls = []

    def node_rate(comm, threads, size):
        calls.append(size)
        if len(calls) == 2:
            raise BadInput("no memory left")
        return 42.0

    monkeypatch.setattr(triad, "node_rate", node_rate)
    lines, _, code = biccg.run(biccg.build_parser().parse_args(
        ["--poisson", "8", "8", "8", "--threads", "1", "--triad-beside", "1000"]))
    rec = json.loads(lines[0])
    assert code == 0 and rec["converged"] and calls == ["1000", "1000"]
    assert rec["triad_beside_gbs"] == [42.0]
    assert rec["triad_beside_error"] == "the Triad after the solve: no memory left"
    monkeypatch.undo()

    def broken(*args, **kwargs):
        raise ValidationFailed("array a[] is wrong")

    monkeypatch.setattr(triad, "measure", broken)
    with pytest.raises(ValidationFailed, match=r"^array a\[\] is wrong$"):
        triad.node_rate(MPI.COMM_SELF, 1, 1000)


def test_a_sweep_that_measures_the_triad_beside_records_it_as_a_merit(tmp_path):
    """biccg_triad_beside: our solver's processes get --triad-beside (the baselines'
    not), the estimate counts its time, the record's mean of before and after is the
    triad_beside metric and the triad_beside_gbs merit; without it, neither."""
    from burstbench.benchmarks.biccg import results, tasks

    P, plain = (small_sweep(tmp_path / str(b), biccg_triad_beside=b) for b in (True, False))
    m = tasks.probe(P)
    plan, plan0 = tasks.expand(P, m), tasks.expand(plain, m)
    ours = next(t for t in plan.tasks if t.config["impl"] == "c")
    ours0 = next(t for t in plan0.tasks if t.config["impl"] == "c")
    assert ours.argv[-1] == "--triad-beside" and "--triad-beside" not in ours0.argv
    assert all("--triad-beside" not in t.argv for t in plan.tasks if t.config["impl"] != "c")
    assert ours.estimate_s - ours0.estimate_s == pytest.approx(tasks.triad_beside_s())
    run, table = bsweep.SPEC.measure(P, progress=False)
    raw = next(json.loads(ln) for ln in (run.root / "biccg.jsonl").read_text().splitlines()
               if "triad_beside_gbs" in ln)
    row = table[table["metric"] == "triad_beside"]
    assert row["value"].tolist() == [pytest.approx(sum(raw["triad_beside_gbs"]) / 2)]
    assert (row["unit"] == "GB/s").all() and (row["impl"] == "c").all()
    merit = results.merits(tmp_path / "True", ROOT / "data" / "reference")
    assert merit.of("triad_beside_gbs")["value"].tolist() == [pytest.approx(row["value"].iloc[0])]
    rows0, _, _ = results.parse(ours0, json.dumps({k: v for k, v in raw.items()
                                                   if k != "triad_beside_gbs"}), "")
    assert rows0 and "triad_beside" not in {r["metric"] for r in rows0}


def test_the_triad_beside_a_configuration_is_the_one_beside_its_median_solve():
    """Three repetitions (solves 80, 85, 66 s beside 46.9, 59.1, 83.9 GB/s): the median
    solve's, 46.9, not the Triads' median; two (2 and 1 s beside 10 and 30): their mean, 20;
    a configuration that measured none is left out."""
    from burstbench.benchmarks.biccg import results

    def rows(label: str, solves: list[float], triads: list[float]) -> list[dict]:
        base = {"vm": "t", "run_id": "r", "problem": "p", "label": label, "impl": "c",
                "nodes": 1, "ranks": 2, "threads": 1}
        out = [base | {"repetition": k, "metric": "solve_time", "value": v, "unit": "s"}
               for k, v in enumerate(solves)]
        return out + [base | {"repetition": k, "metric": "triad_beside", "value": v,
                              "unit": "GB/s"} for k, v in enumerate(triads)]

    table = pd.DataFrame(rows("3", [80.0, 85.0, 66.0], [46.9, 59.1, 83.9])
                         + rows("2", [2.0, 1.0], [10.0, 30.0]) + rows("none", [1.0], []))
    got = results.beside_the_median_solve(table)
    assert dict(zip(got["label"], got["median"])) == {"3": 46.9, "2": pytest.approx(20.0)}
    assert results.beside_the_median_solve(table[table["metric"] == "solve_time"]).empty


def test_a_later_solve_that_does_not_converge_fails_the_task():
    """A process's second solve not converged fails its task, naming the solve."""
    from burstbench.benchmarks.biccg import results
    from burstbench.core import runner

    ok = {"converged": True, "iterations": 5, "solve_s": 0.1, "setup_s": 0.2,
          "relative_residual": 1e-8, "solve": 1}
    bad = ok | {"converged": False, "relative_residual": 0.5, "solve": 2}
    task = runner.Task("k", {"label": "1x1"}, ("x",), (), 10)
    out = "\n".join(json.dumps(r) for r in (ok, bad))
    with pytest.raises(runner.TaskFailed, match=r"^not converged \(solve 2\): relative "
                                                r"residual 0.5 after 5 iterations$"):
        results.parse(task, out, "")
    rows, recs, summary = results.parse(task, json.dumps(ok), "")
    assert not any(r["metric"].startswith("later") for r in rows)
    assert summary == "5 iterations, solve 0.100 s, setup 0.200 s, residual 1.00e-08"


@pytest.mark.parametrize("value,message", [
    ([{"poisson": [8, 8]}], "three positive grid sizes"),
    ([{"mesh": 3}], "each problem is"),
    ([{"mtx": ""}], "needs a file path"),
])
def test_bad_problem_parameters(value, message):
    with pytest.raises(params.ParamError, match=message):
        params.validate({"biccg_problems": value}, "biccg")


def test_the_per_kernel_times_cover_the_solve():
    """One stopwatch charges every interval of the iteration to one part: the parts add up
    to the solve's time (the gaps are the loop's test alone), none counted twice."""
    A = biccg.poisson_matrix(32, 32, 32)
    _, st = biccg.solve(A, A @ np.ones(A.shape[0]), threads=2)
    t = st["times"]
    parts = sum(t[k] for k in ("spmv", "precond", "dots", "halo", "vector"))
    assert st["iterations"] > 10 and t["solve"] > 0
    assert 0.97 * t["solve"] <= parts <= t["solve"], (parts, t)


def test_three_threads_give_the_same_bits_every_time():
    """The threads' sums are added in thread order, not in the order they finish (an
    OpenMP reduction's): on three threads (more than this machine's cores, so the order
    they finish in varies most) six solves in one process give one solution, to the bit.
    With the reductions, eight solves gave eight."""
    A = biccg.poisson_matrix(24, 24, 24)
    b = np.sin(np.arange(A.shape[0]))
    xs = {biccg.solve(A, b, threads=3)[0].tobytes() for _ in range(6)}
    assert len(xs) == 1


def test_the_sweeps_prefetch_changes_no_bit():
    """Prefetching the lines the sweeps gather (tiles; row blocks always do) moves no
    arithmetic: on and off give the same solution to the bit, and the statistics say which
    ran; row blocks prefetch whatever is asked."""
    A = biccg.poisson_matrix(20, 20, 20)
    b = np.sin(np.arange(A.shape[0]))
    tiles = {"grid": (20, 20, 20), "tile": (4, 4, 2)}
    on, st_on = biccg.solve(A, b, threads=2, sweep_prefetch=True, **tiles)
    off, st_off = biccg.solve(A, b, threads=2, sweep_prefetch=False, **tiles)
    assert (st_on["sweep_prefetch"], st_off["sweep_prefetch"]) == (True, False)
    assert on.tobytes() == off.tobytes() and st_on["iterations"] == st_off["iterations"]
    assert biccg.solve(A, b, threads=2, sweep_prefetch=False)[1]["sweep_prefetch"]


def _cpu_is_amd() -> bool:
    """Whether this machine's CPU is AMD's, read from /proc/cpuinfo (not as the solver reads
    it: cpuid through the compiler's __builtin_cpu_is)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        pytest.skip("no /proc/cpuinfo to tell the CPU's vendor")
    return "vendor_id\t: AuthenticAMD" in text


def test_the_spmv_hint_changes_no_bit_and_follows_the_cpu():
    """The SpMV's prefetch hint (non-temporal or ordinary) moves no arithmetic: on, off and
    the default give the same solution to the bit, and the statistics say which ran; the
    default is non-temporal on AMD CPUs only (measured faster there, 1.65x slower on a
    Xeon)."""
    A = biccg.poisson_matrix(20, 20, 20)
    b = np.sin(np.arange(A.shape[0]))
    runs = {nta: biccg.solve(A, b, threads=2, spmv_nta=nta) for nta in (True, False, None)}
    assert [runs[k][1]["spmv_nta"] for k in (True, False)] == [True, False]
    assert runs[None][1]["spmv_nta"] is (platform.machine() in ("x86_64", "AMD64")
                                         and _cpu_is_amd())
    assert len({x.tobytes() for x, _ in runs.values()}) == 1
    assert len({st["iterations"] for _, st in runs.values()}) == 1
    with pytest.raises(biccg.BadInput, match="^spmv_nta must be None, True or False, not 'on'$"):
        biccg.solve(A, b, spmv_nta="on")
    from kernels_ext.biccg import _biccg
    from kernels_ext.common.mpi import init_mpi

    comm = init_mpi("funneled").COMM_SELF
    for bad in (-1, 3):  # biccg.h's BC_SPMV_NTA_AUTO (0) to _OFF (2) only
        with pytest.raises(ValueError, match="^invalid solver arguments$"):
            _biccg.solve(comm, A.indptr, A.indices, A.data, b, np.zeros(len(b)), len(b), 0,
                         32, 20, 1e-7, 100, 2, spmv_nta=bad)


def test_cli_spmv_nta_is_recorded():
    """--spmv-nta on / off: the record counts the ranks whose SpMV prefetched non-temporal."""
    for flag, want in (("on", 1), ("off", 0)):
        proc = cli("--poisson", "12", "12", "12", "--spmv-nta", flag)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["spmv_nta"] == want


def test_base_pages_change_no_bit():
    """The pages of the solver's arrays move no arithmetic: huge and base pages give the
    same solution to the bit; a page kind that is neither is refused."""
    A = biccg.poisson_matrix(20, 20, 20)
    b = np.sin(np.arange(A.shape[0]))
    huge, st_huge = biccg.solve(A, b, threads=2, pages="huge")
    base, st_base = biccg.solve(A, b, threads=2, pages="base")
    assert huge.tobytes() == base.tobytes() and st_huge["iterations"] == st_base["iterations"]
    with pytest.raises(biccg.BadInput, match="^pages must be one of huge, base, not 'tiny'$"):
        biccg.solve(A, b, pages="tiny")


CHILD_PAGES = """
import json
import numpy as np
from kernels_ext import biccg
from kernels_ext.pingpong import _numpy_hugepages
_numpy_hugepages(False)  # NumPy's arrays advised nothing: the advice counted is the solver's
A = biccg.poisson_matrix(48, 48, 48)  # A's copy: 9 MB
b = A @ np.ones(A.shape[0])
def advised_kib():
    size, kib = 0, {"hg": 0, "nh": 0}
    for line in open("/proc/self/smaps"):
        if line.startswith("Size:"):
            size = int(line.split()[1])
        elif line.startswith("VmFlags:"):
            for flag in kib:
                kib[flag] += size if flag in line.split()[1:] else 0
    return kib
small = biccg.poisson_matrix(6, 6, 6)  # no array of 2 MiB: the threads started, none kept
biccg.solve(small, np.ones(216), threads=1, max_iter=1)
before = advised_kib()  # glibc advises its threads' stacks nh
out = []
for pages in ("huge", "base", "huge"):
    biccg.solve(A, b, threads=1, max_iter=1, pages=pages)
    now = advised_kib()  # the solver keeps its arrays after the solve
    out.append([pages, {k: now[k] - before[k] for k in now}])
print(json.dumps(out))
"""


def test_each_solve_advises_the_pages_it_asked_for(tmp_path):
    """The solver keeps its large arrays after a solve (the pool), so the process's mappings
    then show how they were advised (/proc/self/smaps, VmFlags: hg for huge pages, nh for
    base pages; NumPy's advice is turned off in the child): after a solve in huge pages,
    megabytes advised huge and none base; after one in base pages the opposite (the pool
    handed back its huge blocks instead of reusing them); then huge again.  Counted from
    after a small solve, which starts the threads (glibc advises their stacks nh)."""
    if not Path("/proc/self/smaps").exists():
        pytest.skip("no /proc/self/smaps: the process's mappings cannot be read")
    script = tmp_path / "pages.py"
    script.write_text(CHILD_PAGES)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    if got[0][1]["hg"] == 0:
        pytest.skip("this kernel refused MADV_HUGEPAGE (no transparent huge pages): " + str(got))
    mib = 1024  # A's copy alone is 9 MB: at least 8 MiB of blocks
    assert [g[0] for g in got] == ["huge", "base", "huge"]
    assert all(g[1]["hg"] >= 8 * mib and g[1]["nh"] == 0 for g in (got[0], got[2])), got
    assert got[1][1]["nh"] >= 8 * mib and got[1][1]["hg"] == 0, got


CHILD_PREFETCH = """
import json, sys
import numpy as np
from kernels_ext.common.mpi import init_mpi
from kernels_ext import biccg
from kernels_ext.biccg import _biccg
MPI = init_mpi("funneled")
c = MPI.COMM_WORLD
A = biccg.poisson_matrix(12, 12, 12)
n = A.shape[0]
r0, r1 = biccg.partition(n, c.size, c.rank)
rows = A[r0:r1]
b = np.ones(r1 - r0)
out = {}
for llc in map(int, sys.argv[1:]):
    st = _biccg.solve(c, rows.indptr, rows.indices, rows.data, b, np.zeros(r1 - r0), n, r0, 32,
                      20, 1e-7, 1000, 1, False, True, (12, 12, 12), (4, 4, 2), -1, llc)
    out[llc] = c.allgather(st["sweep_prefetch"])
if c.rank == 0:
    print(json.dumps(out))
"""


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [1, 2])
def test_the_sweeps_prefetch_where_the_nodes_vector_exceeds_its_cache(tmp_path, ranks):
    """Left to the solver (-1), tiles prefetch where z of all the node's ranks (12^3 rows x
    8 B = 13,824 B) exceeds the last-level cache given: on two ranks each holds 6,912 B,
    and a cache of 10,000 B still makes both prefetch; 13,824 B (not exceeded) and 0
    (unknown) make none."""
    script = tmp_path / "prefetch.py"
    script.write_text(CHILD_PREFETCH)
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, str(script), "10000",
                           "13823", "13824", "0"], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"10000": [True] * ranks, "13823": [True] * ranks,
                                       "13824": [False] * ranks, "0": [False] * ranks}


def test_cli_sweep_prefetch_is_recorded():
    """--sweep-prefetch on / off: the record counts the ranks whose sweeps prefetched."""
    for flag, want in (("on", 1), ("off", 0)):
        proc = cli("--poisson", "12", "12", "12", "--sweep-prefetch", flag)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["sweep_prefetch"] == want


def test_cli_pages_are_recorded():
    """--pages base runs and says so; a page kind that is neither is refused by the parser."""
    proc = cli("--poisson", "12", "12", "12", "--pages", "base")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["pages"] == "base"
    assert json.loads(cli("--poisson", "12", "12", "12").stdout)["pages"] == "huge"
    bad = cli("--poisson", "12", "12", "12", "--pages", "tiny")
    assert bad.returncode == 2
    assert "argument --pages: invalid choice: 'tiny'" in bad.stderr


def test_cli_counts_the_pages_a_first_setup_faults_in():
    """In base pages each fault is one 4 KiB page: a process's first solve faults in at
    least its copy of A (12 bytes an entry: the setup maps its arrays afresh); its second
    sets up on the arrays the solver kept, and faults in under a quarter of that."""
    proc = cli("--poisson", "64", "64", "64", "--threads", "1", "--pages", "base",
               "--solves", "2")
    assert proc.returncode == 0, proc.stderr
    first, second = (json.loads(line) for line in proc.stdout.splitlines())
    assert first["minor_faults"] * 4096 >= 12 * first["nnz"]
    assert second["minor_faults"] < first["minor_faults"] / 4


def test_setup_and_solve_cover_the_call():
    """What a call takes is setup or solve: the input's check and CG's vectors (allocated,
    first touched, x0 permuted in, x permuted back out) are the setup's, each timed, and
    the parts add up to setup_s.  Before, those went uncounted: 0.13 s of a fresh
    process's first solve at 128^3 here, as much as the rest of its setup.  How much of a
    call is left outside the two is a time, measured by comparisons/biccg_repeat_setup.py,
    not asserted here: of a 48^3 call (about 50 ms), 1.1-5.4% alone on this VM (five
    calls), 4.7-9.1% in one CI run under the parallel tests' load on 2 cores.
    """
    A = biccg.poisson_matrix(48, 48, 48)
    b = A @ np.ones(A.shape[0])
    biccg.release_memory()  # the vectors on fresh pages, as in a process's first solve
    t0 = time.perf_counter()
    _, st = biccg.solve(A, b, threads=2)
    wall = time.perf_counter() - t0
    biccg.release_memory()
    t = st["times"]
    parts = ("input", "ordering", "factorization", "halo_setup", "vectors")
    assert set(parts) <= set(t), t
    assert t["setup"] == pytest.approx(sum(t[k] for k in parts), rel=1e-12), t
    assert min(t[k] for k in ("input", "ordering", "factorization", "vectors")) > 0, t
    assert t["setup"] + t["solve"] <= wall, (t, wall)  # the timers lie inside the call


@pytest.mark.mpi
def test_the_report_caption_names_the_blocking_and_precision_the_run_used(tmp_path):
    """A run made with today's defaults (grid tiles, a float32 factor): the caption of its
    figure says what the solver's records say, not the rows-and-double of older runs."""
    from burstbench.report import sections as report

    P = params.validate({"vm": "t", "runs_dir": str(tmp_path / "runs"),
                         "biccg_problems": [{"poisson": [8, 8, 8]}], "biccg_ranks_per_node": [1],
                         "biccg_threads": [1], "biccg_baselines": [],
                         "biccg_repetitions": 1}, "biccg")
    run, _ = bsweep.SPEC.measure(P, progress=False)
    (rec,) = [json.loads(x) for x in run.raw_path("biccg").read_text().splitlines()]
    assert (rec["blocking"], rec["factor_precision"]) == ("tiles 4x4x2", "single")
    section = bsweep.report_section(tmp_path / "runs", figures_dir=tmp_path / "figs")
    (figure,) = [e for e in section.entries if e.title.startswith("BICCG time")]
    assert "blocks: tiles 4x4x2, IC(0) factor in single precision" in figure.caption
    assert isinstance(section, report.Section)


def tile_driver_exe(tmp_path: Path, source: str, flags: str = "-O2 -fopenmp -std=gnu99") -> Path:
    """comparisons/`source`, a tile driver (biccg_bench.h's tile_bench_init), built with the
    solver's sources and `flags` (skipped where there is no MPI compiler wrapper)."""
    mpicc = Path(sys.executable).parent / "mpicc"
    if not mpicc.exists():
        pytest.skip(f"no MPI compiler wrapper at {mpicc}")
    sys.path.insert(0, str(ROOT / "comparisons"))
    from biccg_kernels import build  # comparisons/ is a folder of scripts

    exe = tmp_path / Path(source).stem
    build(str(mpicc), flags, exe, source)
    return exe


def tile_driver(tmp_path: Path, source: str, flags: str = "-O2 -fopenmp -std=gnu99") -> dict:
    """tile_driver_exe's driver run once on 12 x 10 x 9 (tiles 4 x 4 x 2, 2 threads): its
    record.  The grid's tiles leave rows with every split of their three lower entries."""
    exe = tile_driver_exe(tmp_path, source, flags)
    out = subprocess.run([str(exe), "12", "10", "9", "1", "4", "4", "2"], capture_output=True,
                         text=True, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_the_padded_sweeps_compute_the_solvers_z(tmp_path):
    """comparisons/biccg_padded.c (run by biccg_lanes.py) times the solver's sweeps against
    the same sweeps padded to three entries a pass: its z must be the solver's to rounding
    (zero coefficients add nothing; the terms' order is the solver's)."""
    rec = tile_driver(tmp_path, "biccg_padded.c")
    assert rec["n"] == 12 * 10 * 9 and rec["z_max_rel_diff"] < 1e-14
    assert rec["precond_ms"] > 0 and rec["padded_ms"] > 0


def test_the_sweeps_other_passes_compute_the_solvers_z(tmp_path):
    """comparisons/biccg_template.c (run by biccg_template.py) times the solver's sweeps
    against their passes unrolled for a 4 x 4 x 2 tile, a face at a time and over flat
    lists: each subtracts a row's terms in the solver's order, so built without fused
    multiply-adds z is the solver's bit for bit (z first filled with NaN).  The grid's
    whole tiles (3 x 2 x 4 of its 3 x 3 x 5 blocks) are unrolled, and those of them whose
    faces each meet a whole tile (the 12 at y = 0) run a face at a time.  Each variant
    must read its own copies: with the factor's entries it copied doubled, its z stays
    the same (a variant that fell back to the row loops would change; since e586e11 the
    solver itself sweeps tiles over copies too).  The bound
    without first passes must differ (the comparison can fail)."""
    rec = tile_driver(tmp_path, "biccg_template.c", "-O2 -ffp-contract=off -fopenmp -std=gnu99")
    assert rec["n"] == 12 * 10 * 9 and rec["blocks"] == 45
    assert rec["matched"] == 24 and rec["faced"] == 12
    for v in ("unrolled", "faces", "flat_unrolled", "flat"):
        assert rec[f"{v}_same_bits"] and rec[f"{v}_z_diff"] == 0.0, v
        assert rec[f"{v}_reads_its_copies"], v
        assert rec[f"{v}_ms"] > 0
    assert not rec["no_first_same_bits"] and rec["no_first_z_diff"] > 0.1
    # the solver's own sweeps over its copies (24 tiles) against its row loops: same bits
    assert rec["solver_tiles"] == 24 and rec["solver_rows_same_bits"]


def test_the_split_spmv_is_the_solvers_bit_for_bit(tmp_path):
    """comparisons/biccg_split_spmv.c times the solver's SpMV against the product on A stored
    in the factor's pattern (lower, diagonal, upper apart): the sums run in the same order,
    so y must be the same bits, and the split storage is A's values alone."""
    rec = tile_driver(tmp_path, "biccg_split_spmv.c")
    n, nnz = 12 * 10 * 9, 7 * 12 * 10 * 9 - 2 * (12 * 10 + 10 * 9 + 12 * 9)
    assert rec["n"] == n and rec["same_bits"] is True
    assert (rec["csr_bytes"], rec["split_bytes"]) == (8 * (n + 1) + 12 * nnz, 8 * nnz)


def test_the_tile_spmv_is_the_solvers_bit_for_bit(tmp_path):
    """comparisons/biccg_tile_spmv.c times the solver's SpMV against the product a 4 x 4 x 2
    tile at a time (lists to other blocks, the inside unrolled): each row sums in the CSR's
    order, so built without fused multiply-adds y must be the same bits on x in tenths, on
    a grid whose 24 whole tiles run so and whose other 21 blocks run by rows."""
    rec = tile_driver(tmp_path, "biccg_tile_spmv.c")
    n, nnz = 12 * 10 * 9, 7 * 12 * 10 * 9 - 2 * (12 * 10 + 10 * 9 + 12 * 9)
    assert rec["n"] == n and rec["tiles"] == 24
    assert rec["same_bits"] is True and rec["max_rel_diff"] == 0.0
    assert rec["csr_bytes"] == 8 * (n + 1) + 12 * nnz and 0 < rec["tile_bytes"] < rec["csr_bytes"]


def test_the_sell_spmv_is_the_solvers_bit_for_bit(tmp_path):
    """comparisons/biccg_sell_spmv.c times the solver's SpMV against the product on A in
    SELL-8 (rows in AVX-512 lanes): each row's sum runs in its order, so y must be the same
    bits, on a grid whose last chunk of 8 rows is partial (13 x 10 x 9 = 1,170 rows).  Built
    for this CPU; where it has no AVX-512 the driver says so (exit 3) and the test skips."""
    exe = tile_driver_exe(tmp_path, "biccg_sell_spmv.c", "-O2 -march=native -fopenmp -std=gnu99")
    out = subprocess.run([str(exe), "13", "10", "9", "1", "4", "4", "2"], capture_output=True,
                         text=True, env={**os.environ, "OMP_NUM_THREADS": "2"})
    if out.returncode == 3:
        assert "needs AVX-512" in out.stderr
        pytest.skip("this CPU has no AVX-512: " + out.stderr.strip())
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout.splitlines()[-1])
    assert rec["n"] == 13 * 10 * 9 and rec["same_bits"] is True
    assert 1.0 <= rec["padding"] < 1.3 and rec["sell_ms"] > 0


def test_eisenstats_form_reaches_the_solvers_solution(tmp_path):
    """comparisons/biccg_eisenstat.c times the solver's PCG against CG in Eisenstat's form
    (no SpMV; A's scaled off-diagonal values in both substitutions), in three passes a step
    and in two: on a 7-point grid IC(0) eliminates nothing, so both forms are PCG with the
    solver's preconditioner in exact arithmetic: the same iterations, the solver's pivots
    (to its single factor's rounding), and solutions that agree to far below the tolerance;
    row runs (the study's blocking) and tiles both."""
    exe = tile_driver_exe(tmp_path, "biccg_eisenstat.c")
    for rows, single in ((1, 1), (0, 0)):
        out = subprocess.run([str(exe), "13", "10", "9", "1", str(rows), str(single)],
                             capture_output=True, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "2"})
        assert out.returncode == 0, out.stderr
        rec = json.loads(out.stdout.splitlines()[-1])
        assert rec["n"] == 13 * 10 * 9
        assert rec["pivots_rel_diff"] < (1e-7 if single else 1e-14)
        pcg = rec["pcg"]
        assert 5 < pcg["iterations"] < 60 and pcg["residual"] <= 1e-7
        for form in ("eisenstat", "eisenstat_cg"):
            f = rec[form]
            assert f["iterations"] == pcg["iterations"], form
            assert f["residual"] <= 1e-7 and f["x_rel_diff"] < 1e-9, form
            assert f["ms"] > 0


def test_a_tile_driver_refuses_a_bad_command_line(tmp_path):
    """tile_bench_init: no rounds, and a short command line, are refused with exit 2 and the
    reason, before any work."""
    exe = tile_driver_exe(tmp_path, "biccg_split_spmv.c")
    for argv, said in ((["12", "10", "9", "0", "4", "4", "2"], "error: ROUNDS must be 1 or more"),
                       (["12", "10"], "usage: ")):
        out = subprocess.run([str(exe), *argv], capture_output=True, text=True)
        assert out.returncode == 2 and said in out.stderr and out.stdout == ""


def test_the_triad_beside_comparison_prints_both_efficiencies_of_each_round():
    """comparisons/biccg_triad_beside.py: a line a round whose 'beside' efficiency is its
    rate over the mean of its Triads (to the printed digits), 'earlier' from the second
    round on (lag 0.01 s: the round before's Triad), and the summary; bad arguments refused
    with the reason."""
    script = ROOT / "comparisons" / "biccg_triad_beside.py"
    proc = subprocess.run([sys.executable, str(script), "--grid", "10", "10", "10", "--ranks", "1",
                           "--threads", "1", "--rounds", "3", "--lag-s", "0.01",
                           "--triad-size", "1000000"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rounds = [ln.split() for ln in proc.stdout.splitlines() if ln.split()[0].isdigit()]
    assert [r[0] for r in rounds] == ["1", "2", "3"]
    for r in rounds:
        before, after, rate, beside = float(r[2].rstrip(",")), float(r[3]), float(r[4]), float(r[5])
        # each rate printed to 0.1 GB/s (their mean to 0.05), beside to 0.001
        mean = (before + after) / 2
        assert printed_ratio_fits(beside, rate, mean, 1, 3), r
    assert rounds[0][6] == "-" and all(float(r[6]) > 0 for r in rounds[1:])
    # the summary of all rounds, then one of the steady ones where any round was steady
    summaries = [ln for ln in proc.stdout.splitlines() if not ln.split()[0].isdigit()][2:]
    assert summaries[0].startswith("all rounds with both (2): beside: ")
    assert all(ln.startswith("steady rounds (") for ln in summaries[1:]) and len(summaries) <= 2
    bad = subprocess.run([sys.executable, str(script), "--rounds", "1"], capture_output=True,
                         text=True, cwd=ROOT, timeout=60)
    assert bad.returncode == 1 and bad.stderr.strip() == (
        "error: --rounds must be at least 2, --ranks and --threads at least 1, --lag-s positive")
    # the Triad's size, checked as the Triad checks it, before any solve
    bad = subprocess.run([sys.executable, str(script), "--triad-size", "lots"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1] == (
        "biccg_triad_beside.py: error: argument --triad-size: size must be an integer, "
        "not 'lots'")


def test_the_colors_comparison_prints_a_row_a_color_count_against_its_reference():
    """comparisons/biccg_colors.py: a row for each color count in the order given (the
    blocks asked for named), the reference's solve over itself 1.00 and another's a positive
    ratio, every rate against the Triad positive; a solve without a Triad after it, and bad
    arguments, refused with the reason."""
    script = ROOT / "comparisons" / "biccg_colors.py"
    proc = subprocess.run([sys.executable, str(script), "--grid", "10", "10", "10", "--threads",
                           "1", "--colors", "2", "4", "--reference", "4", "--rounds", "1",
                           "--blocking", "rows", "--triad-size", "1000000"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("round ") == 1
    assert proc.stdout.startswith("Poisson 10x10x10, 1 x 1, runs of 32 rows, 1 round(s)")
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in proc.stdout.splitlines()
            if ln.startswith("| ") and ln[2].isdigit()]
    # runs of 32 rows of a 10 x 10 x 10 grid couple to the runs within 100 rows: 2 colors
    # cannot color them, so the greedy opens more (4 used), and the column says so
    assert [r[0] for r in rows] == ["2 (4)", "4 (4)"]
    assert rows[1][3] == "1.00" and float(rows[0][3].split()[0]) > 0
    for r in rows:
        assert int(r[1]) > 0 and all(float(x) >= 0 for x in r[4].split(", "))
        assert all(float(c.split()[0]) > 0 for c in r[5:8]), r
    assert proc.stdout.splitlines()[-1].startswith("Triad beside the solves (GB/s): ")
    sys.path.insert(0, str(ROOT / "comparisons"))
    from biccg_colors import triad_of  # comparisons/ is a folder of scripts
    assert triad_of({"triad_beside_gbs": [20.0, 30.0]}) == 25.0
    with pytest.raises(SystemExit, match="^error: the solve has no Triad before and after it: "
                                         "the Triad after the solve: boom$"):
        triad_of({"triad_beside_gbs": [20.0],
                  "triad_beside_error": "the Triad after the solve: boom"})
    for argv, why in ((["--rounds", "0"], "error: --rounds, --ranks, --threads, --grid and "
                                          "--colors must be at least 1"),
                      (["--colors", "2", "4"], "error: --reference 20 is not one of --colors "
                                               "[2, 4]")):
        bad = subprocess.run([sys.executable, str(script), *argv], capture_output=True,
                             text=True, cwd=ROOT, timeout=60)
        assert bad.returncode == 1 and bad.stderr.strip() == why
