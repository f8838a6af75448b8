"""BICCG's speed options, each against a textbook reference with the tolerance it needs: IC(0)
kept in single precision, blocks that are tiles of the grid; and the record that says which."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from test_biccg import bc, cli, random_spd, reference_pcg_history

from kernels_ext import biccg


def ordering(A, bs: int, colors: int, **tiles) -> tuple[np.ndarray, np.ndarray]:
    """(perm, color) of our ordering of A, rows or tiles (grid=, tile=), from the C code."""
    n = A.shape[0]
    color, perm = np.empty(n, np.int32), np.empty(n, np.int64)  # room for any block count
    used = bc.coloring(A.indptr, A.indices, A.data, bs, colors, color, perm, **tiles)
    assert used >= colors
    return perm, color


@pytest.mark.parametrize("grid,bs,colors,tile", [
    ((12, 10, 8), 8, 5, None),
    ((12, 10, 8), 32, 5, (4, 4, 2)),   # whole tiles
    ((13, 9, 7), 32, 6, (4, 4, 2)),    # partial tiles at the edges
    (None, 8, 4, None),                # irregular: random SPD, no grid
])
@pytest.mark.parametrize("factor", ["double", "single"])
def test_history_is_textbook_pcg_of_the_reordered_matrix(grid, bs, colors, tile, factor):
    """Step by step, our residual history equals textbook PCG with IC(0) of the reordered
    matrix: the factor's values in double, or rounded to float32 with double arithmetic (the
    same operator). rtol 1e-9: rounding only; the float32 factor against the double
    reference differs by about 3e-7, so the tolerance tells the two apart."""
    A = biccg.poisson_matrix(*grid) if grid else random_spd(400, 0.01, 3)
    n = A.shape[0]
    kw = {"grid": grid, "tile": tile} if tile else {}
    perm, _ = ordering(A, bs, colors, **kw)
    Ap = A[perm][:, perm].tocsr()
    Ap.sort_indices()
    b = np.random.default_rng(5).random(n)
    ref = reference_pcg_history(Ap, b[perm], 1e-10, single=factor == "single")
    _, st = biccg.solve(A, b, block_size=bs, colors=colors, tol=1e-10, threads=2, history=True,
                        factor=factor, **kw)
    assert st["iterations"] == len(ref) - 1
    np.testing.assert_allclose(st["history"], ref, rtol=1e-9)


@pytest.mark.parametrize("factor", ["double", "single"])
def test_history_with_one_sided_explicit_zeros(factor):
    """Explicit zeros stored below the diagonal only: the stored pattern is not symmetric,
    so U = L^T comes from the serial transpose, and with the single factor it is written
    into the buffer the double L values leave; still textbook PCG with IC(0) of the
    reordered stored matrix, step by step."""
    A = random_spd(400, 0.01, 3).toarray()
    rng = np.random.default_rng(1)
    empty = np.argwhere(np.tril((A == 0) & (A.T == 0), -1))
    extra = empty[rng.choice(len(empty), 300, replace=False)]
    P = A != 0
    P[extra[:, 0], extra[:, 1]] = True
    rows, cols = np.nonzero(P)
    S = sp.csr_matrix((A[rows, cols], (rows, cols)), shape=A.shape)
    assert S.nnz == (A != 0).sum() + len(extra)  # the zeros are stored
    perm, _ = ordering(S, 8, 4)
    Sp = S[perm][:, perm].tocsr()
    Sp.sort_indices()
    b = np.random.default_rng(5).random(len(A))
    ref = reference_pcg_history(Sp, b[perm], 1e-10, single=factor == "single")
    _, st = biccg.solve(S, b, block_size=8, colors=4, tol=1e-10, threads=2, history=True,
                        factor=factor)
    assert st["iterations"] == len(ref) - 1
    np.testing.assert_allclose(st["history"], ref, rtol=1e-9)


def test_single_precision_factor_is_not_the_double_one():
    """The float32 factor is really used: its history differs from the double one's in the
    digits float32 rounding changes, and it converges in as many iterations (+-1)."""
    A = biccg.poisson_matrix(16, 16, 16)
    b = A @ np.ones(A.shape[0])
    _, s64 = biccg.solve(A, b, tol=1e-9, threads=2, history=True, factor="double")
    _, s32 = biccg.solve(A, b, tol=1e-9, threads=2, history=True, factor="single")
    assert abs(s32["iterations"] - s64["iterations"]) <= 1
    k = min(len(s32["history"]), len(s64["history"]))
    rel = np.abs(np.array(s32["history"][1:k]) / s64["history"][1:k] - 1)
    assert 1e-10 < rel.max() < 1e-3
    assert s32["converged"] and s32["relative_residual"] <= 1e-9


@pytest.mark.parametrize("grid,tile", [((12, 8, 6), (4, 4, 2)), ((13, 9, 7), (4, 4, 2)),
                                       ((10, 10, 10), (8, 2, 1))])
def test_blocks_are_the_tiles_of_the_grid(grid, tile):
    """Each block holds the points of one tile (smaller at the grid's edges) in their
    order, blocks are listed color by color, and no two coupled tiles share a color."""
    A = biccg.poisson_matrix(*grid)
    perm, color = ordering(A, int(np.prod(tile)), 4, grid=grid, tile=tile)
    nx, ny, _ = grid
    ntx, nty, ntz = (-(-g // t) for g, t in zip(grid, tile))
    x, y, z = perm % nx, perm // nx % ny, perm // (nx * ny)
    tile_no = ((z // tile[2]) * nty + y // tile[1]) * ntx + x // tile[0]  # lexicographic
    starts = [k for k in range(len(perm)) if k == 0 or tile_no[k] != tile_no[k - 1]]
    assert len(starts) == ntx * nty * ntz  # every tile one contiguous run of rows
    ends = starts[1:] + [len(perm)]
    assert all((np.diff(perm[s:e]) > 0).all() for s, e in zip(starts, ends))
    assert (np.diff(color[tile_no[starts]]) >= 0).all()  # color by color
    of_row = np.empty(len(perm), np.int64)
    of_row[perm] = tile_no
    C = A.tocoo()
    coupled = of_row[C.row] != of_row[C.col]
    assert coupled.any()
    assert (color[of_row[C.row[coupled]]] != color[of_row[C.col[coupled]]]).all()


def test_tiles_give_the_solution():
    A = biccg.poisson_matrix(20, 14, 9)
    b = np.cos(np.arange(A.shape[0]))
    x, st = biccg.solve(A, b, block_size=32, tol=1e-10, threads=2, grid=(20, 14, 9),
                        tile=(4, 4, 2), factor="single")
    assert st["converged"] and st["relative_residual"] <= 1e-10
    np.testing.assert_allclose(A @ x, b, atol=1e-8 * np.linalg.norm(b))


def test_record_names_precision_and_blocking():
    rec = json.loads(cli("--poisson", "12", "10", "8", "--threads", "2").stdout)
    assert rec["factor_precision"] == "single" == biccg.DEFAULT_FACTOR
    assert rec["blocking"] == "tiles 4x4x2" and rec["block_size"] == 32
    assert biccg.DEFAULT_BLOCKING == "auto"
    rec = json.loads(cli("--poisson", "12", "10", "8", "--block-size", "24").stdout)
    assert rec["blocking"] == "rows of 24"  # auto: no tile of 24 points
    rec = json.loads(cli("--poisson", "12", "10", "8", "--threads", "2", "--blocking", "rows",
                         "--block-size", "16", "--factor", "double").stdout)
    assert rec["blocking"] == "rows of 16" and rec["factor_precision"] == "double"
    rec = json.loads(cli("--poisson", "12", "10", "8", "--blocking", "2x2x2").stdout)
    assert rec["blocking"] == "tiles 2x2x2" and rec["block_size"] == 8 and rec["converged"]


def test_auto_tile_and_blocking_parse():
    assert biccg.auto_tile(32) == (4, 4, 2) and biccg.auto_tile(1) == (1, 1, 1)
    assert biccg.auto_tile(64) == (4, 4, 4) and biccg.auto_tile(24) is None
    assert biccg.parse_blocking("auto", 32, None) is None  # no grid: rows
    assert biccg.parse_blocking("auto", 24, (8, 8, 8)) is None
    assert biccg.parse_blocking("8X2x2", 32, (8, 8, 8)) == (8, 2, 2)


@pytest.mark.parametrize("args,message", [
    (("--poisson", "8", "8", "8", "--blocking", "4x4"), "--blocking takes rows, auto or tiles"),
    (("--poisson", "8", "8", "8", "--blocking", "0x4x2"), "--blocking takes rows, auto or"),
    (("--poisson", "8", "8", "8", "--factor", "half"), "invalid choice: 'half'"),
])
def test_bad_options_say_what_they_take(args, message):
    proc = cli(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_tiles_need_a_grid(tmp_path):
    f = tmp_path / "m.mtx"
    f.write_text("%%MatrixMarket matrix coordinate real symmetric\n2 2 3\n1 1 2\n2 1 -1\n2 2 2\n")
    proc = cli("--mtx", str(f), "--blocking", "1x1x2", "--block-size", "1")
    assert proc.returncode == 2 and "tiles (1x1x2) need a grid" in proc.stderr, proc.stderr
    A = biccg.poisson_matrix(4, 4, 4)
    with pytest.raises(biccg.BadInput, match="tiles need the grid"):
        biccg.solve(A, np.ones(64), grid=(4, 4, 3), tile=(2, 2, 2))
    with pytest.raises(biccg.BadInput, match="factor precision must be one of"):
        biccg.solve(A, np.ones(64), factor="half")


def test_two_ranks_with_tiles_and_single_factor_agree_with_one():
    """The rank boundary cuts tiles (rows split at 840 = 5 planes of 14 x 12; tiles 2 deep):
    both solutions are within the tolerance of the exact one."""
    args = ("--poisson", "14", "12", "10", "--tol", "1e-9")
    one, two = (json.loads(cli(*args, n=k).stdout) for k in (1, 2))
    for rec in (one, two):
        assert rec["converged"] and rec["error_max"] < 1e-6 and rec["blocking"] == "tiles 4x4x2"
    assert two["ranks"] == 2 and two["halo_entries"] == 2 * 14 * 12
