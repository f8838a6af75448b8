"""BICCG: Python API and ``[mpiexec -n P] python -m kernels_ext.biccg``.

Conjugate gradients preconditioned by block IC(0) with algebraic block
multicolor ordering (block size 32 and 20 colors in the study), MPI x OpenMP:
rows split across ranks in contiguous ranges, block Jacobi across ranks, the
substitutions parallel over the blocks of one color.  Problems: the 3D
7-point Poisson matrix (each rank builds only its rows) or a Matrix Market
file.  The right-hand side is b = A (1, ..., 1), so the exact solution is all
ones and its error is reported beside the residual.  By default the factor's
values are kept in single precision (CG stays double) and, for a grid, the
blocks are tiles of it (--factor, --blocking; the record names both).

Long: the kernel's Python face is one module, as each kernel's is: the byte model, the
checks of its input, the problems, the solve's call and its command line with the record
of each solve (the Matrix Market reader is in mtx.py, the baselines in cg_baselines.py).
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kernels_ext.common.errors import BadInput, KernelError, NotConverged

# single: 5-20 % less preconditioner time at 128^3, the same iteration counts at 64^3 and 128^3
# (comparisons/README.md, BICCG options)
DEFAULT_FACTOR = "single"
# auto: tiles where there is a grid (Poisson), else rows. Tiles take 9 % fewer iterations at
# 128^3 and 14 % fewer at 256 x 256 x 512; an iteration costs about the same (comparisons/README.md)
DEFAULT_BLOCKING = "auto"


#: The tile whose blocks the sweeps run from copies (ic0.c, pack_sweeps): 4 x 4 x 2 points of a
#: 7-point grid, the default blocking's with blocks of 32 (auto_tile(32)).
COPIED_TILE = (4, 4, 2)


def _checked(n: int, nnz: int, factor: str, copied: tuple[int, int]) -> int:
    """f, the bytes of a factor value, after the byte counts' arguments are checked."""
    if factor not in ("single", "double"):
        raise BadInput(f"factor must be single or double, not {factor!r}")
    rows, entries = copied
    if not (0 <= rows <= n and 0 <= entries <= nnz - n and entries >= 4 * rows):
        raise BadInput(f"copied ({rows} rows, {entries} entries) do not fit a matrix of {n} "
                       f"rows and {nnz} nonzeros")
    return 4 if factor == "single" else 8


def pass_bytes(n: int, nnz: int, factor: str = DEFAULT_FACTOR,
               copied: tuple[int, int] = (0, 0)) -> dict[str, int]:
    """Bytes each pass of one CG iteration of this solver moves through memory, for a
    matrix of `n` rows and `nnz` nonzeros (both triangles) and an IC(0) factor stored in
    `factor` precision: {"spmv", "precond", "vector"}, in that order.

    8-byte values, 4-byte column indices, 8-byte row pointers; every array read or written
    once per kernel, gathered vector entries counted once; the fused iteration's three
    passes: the SpMV with p'q, 12 nnz + 24 n (values, columns; row pointers, p, q); the
    two sweeps, (4 + f)(nnz - n) + (72 + f) n with f = 4 (single) or 8 (double) bytes per
    factor value (indices and values of L and U = the pattern of A less its diagonal, row
    pointers and split counts, 1/d, r read and written, q read, z written (in q's array)
    then read and written); the vector updates, 40 n (x and p read and written, z read).

    `copied`: (rows, entries) of the blocks the sweeps run from copies (tile_copies: whole
    4 x 4 x 2 tiles of a grid; ic0.c, pack_sweeps), those rows' off-diagonal entries.  Such
    a block reads no row pointers or split counts; an entry to another block costs 5 + f
    (column, value, the row's place in a byte), one inside its tile (4 a row) f: entries -
    44 rows bytes against the row layout's count, all in the sweeps.  Per-block arrays
    (block starts, list offsets) are not counted.
    """
    f = _checked(n, nnz, factor, copied)
    return {"spmv": 12 * nnz + 24 * n,
            "precond": (4 + f) * (nnz - n) + (72 + f) * n + copied[1] - 44 * copied[0],
            "vector": 40 * n}


def bytes_per_iteration(n: int, nnz: int, factor: str = DEFAULT_FACTOR,
                        copied: tuple[int, int] = (0, 0)) -> int:
    """Bytes one CG iteration of this solver moves through memory: its passes' sum
    (pass_bytes, which says what is counted).  568 MB at Poisson 128^3 with the single
    factor in rows, 489 MB in tiles (tile_copies((128, 128, 128)))."""
    return sum(pass_bytes(n, nnz, factor, copied).values())


def working_set_bytes(n: int, nnz: int, factor: str = DEFAULT_FACTOR,
                      copied: tuple[int, int] = (0, 0)) -> int:
    """Bytes of the arrays one CG iteration of this solver touches, each counted once: what
    a cache must hold for the next iteration to find it there (pass_bytes counts a vector
    each time a pass streams it).

    A: 12 nnz + 8 n (values, columns, row pointers); L and U: (4 + f)(nnz - n) + 16 n
    (their values and columns, two row pointer arrays) with 8 n of split counts; 1/d, f n;
    the four vectors x, r, p, q, 32 n (z lies in q's array).  `copied` as in
    pass_bytes, with the same difference (each array is touched once in both
    counts).  417 MB at Poisson 128^3 with the single factor in rows, 338 MB in tiles;
    5,171 MiB for the study's 256 x 256 x 512 in tiles (6,388 in rows).
    """
    f = _checked(n, nnz, factor, copied)
    return (12 * nnz + 8 * n + (4 + f) * (nnz - n) + 24 * n + f * n + 32 * n
            + copied[1] - 44 * copied[0])


def tile_copies(grid: Sequence[int], ranks: int = 1) -> tuple[int, int]:
    """(rows, entries) the sweeps run from copies on the 7-point nx x ny x nz grid with the
    default blocking (blocks of 32: COPIED_TILE) and `ranks` ranks splitting the rows as
    partition does: the rows of the whole tiles (inside the grid, all of a tile's rows on
    one rank; a rank's broken tiles are smaller blocks, swept in the row layout), and
    their off-diagonal entries in the whole matrix (a neighbour on another rank counted
    too, as bytes_per_iteration counts the factor).  (0, 0) where no tile is whole: a
    5-point grid (nz = 1), or ranks of too few rows to hold a tile's two planes."""
    nx, ny, nz = (int(v) for v in grid)
    tx, ty, tz = COPIED_TILE
    qx, qy, qz = nx // tx, ny // ty, nz // tz
    if ranks < 1:
        raise BadInput(f"ranks must be at least 1, not {ranks}")
    if not (qx and qy and qz):
        return 0, 0

    def faces(q: int, size: int, t: int) -> np.ndarray:
        """Per tile along one axis: how many of the grid's two faces on that axis it lies on."""
        f = np.zeros(q, np.int64)
        f[0] += 1
        f[-1] += t * q == size
        return f

    fx, fy, fz = faces(qx, nx, tx), faces(qy, ny, ty), faces(qz, nz, tz)
    # a tile's off-diagonal entries: 6 a point, less one for each of its points on a face
    face_points = (ty * tz, tx * tz, tx * ty)
    e_xy = (6 * tx * ty * tz - face_points[0] * fx[None, :] - face_points[1] * fy[:, None])
    plane, n = nx * ny, nx * ny * nz
    bounds = np.array([n * r // ranks for r in range(ranks + 1)], np.int64)

    def rank(i: np.ndarray) -> np.ndarray:
        return np.searchsorted(bounds, i, side="right") - 1

    z0 = np.arange(qz, dtype=np.int64) * tz * plane
    whole = rank(z0) == rank(z0 + tz * plane - 1)  # a layer of tiles on one rank
    layers = int(whole.sum())
    rows = layers * qx * qy * tx * ty * tz
    entries = layers * int(e_xy.sum()) - int((fz * whole).sum()) * face_points[2] * qx * qy
    y = np.arange(qy, dtype=np.int64)[:, None] * ty * nx
    x = np.arange(qx, dtype=np.int64)[None, :] * tx
    for k in np.flatnonzero(~whole):  # a layer a rank boundary cuts: tile by tile
        first = z0[k] + y + x
        ok = rank(first) == rank(first + (tz - 1) * plane + (ty - 1) * nx + tx - 1)
        rows += int(ok.sum()) * tx * ty * tz
        entries += int((e_xy - face_points[2] * fz[k])[ok].sum())
    return rows, entries


def partition(n: int, nranks: int, rank: int) -> tuple[int, int]:
    """Rows [r0, r1) of `rank`: contiguous, sizes differing by at most one."""
    return n * rank // nranks, n * (rank + 1) // nranks


def poisson_rows(nx: int, ny: int, nz: int, r0: int, r1: int):
    """Rows [r0, r1) of the 7-point Laplacian as (indptr, indices, data), built in C.

    Indices are int32 when the global order allows (half the memory), else int64.
    """
    from kernels_ext.biccg import _biccg

    nnz = _biccg.poisson(nx, ny, nz, r0, r1)
    indptr = np.empty(r1 - r0 + 1, np.int64)
    indices = np.empty(nnz, np.int64)
    data = np.empty(nnz, np.float64)
    _biccg.poisson(nx, ny, nz, r0, r1, indptr, indices, data)
    if nx * ny * nz < 2**31 - 1:
        indices = indices.astype(np.int32)
    return indptr, indices, data


def poisson_matrix(nx: int, ny: int, nz: int):
    """The whole Poisson matrix as SciPy CSR (for tests and baselines)."""
    import scipy.sparse as sp

    n = nx * ny * nz
    indptr, indices, data = poisson_rows(nx, ny, nz, 0, n)
    return sp.csr_matrix((data, indices, indptr), shape=(n, n))


def check_matrix(A, where: str = "matrix", rtol: float = 1e-12) -> None:
    """Refuse what CG cannot solve: not square, not symmetric, NaN or Inf entries."""
    if A.shape[0] != A.shape[1]:
        raise BadInput(f"{where} is not square ({A.shape[0]} x {A.shape[1]})")
    if not np.all(np.isfinite(A.data)):
        raise BadInput(f"{where} holds NaN or Inf")
    diff = abs(A - A.T)
    scale = abs(A).max() if A.nnz else 1.0
    if diff.nnz and diff.max() > rtol * scale:
        raise BadInput(f"{where} is not symmetric (largest |a_ij - a_ji| = {diff.max():.3g})")


def check_params(n: int, block_size: int, colors: int, tol: float, max_iter: int,
                 nranks: int) -> None:
    """One clear message per bad solver parameter."""
    if block_size <= 0:
        raise BadInput(f"block size must be positive, not {block_size}")
    if block_size > n:
        raise BadInput(f"block size {block_size} is larger than the matrix ({n} rows)")
    if colors <= 0:
        raise BadInput(f"colors must be positive, not {colors}")
    if not tol > 0:
        raise BadInput(f"tol must be positive, not {tol}")
    if max_iter < 0:
        raise BadInput(f"max iterations must be at least 0, not {max_iter}")
    if nranks > n:
        raise BadInput(f"more MPI ranks ({nranks}) than matrix rows ({n})")


FACTORS = ("double", "single")
#: the pages of the solver's large arrays (bc_params.base_pages)
PAGES = ("huge", "base")
DEFAULT_PAGES = "huge"


def auto_tile(block_size: int) -> tuple[int, int, int] | None:
    """The most compact tile of a grid with block_size points (x, y, z; the 2s
    dealt out x first), or None where block_size is not a power of two."""
    if block_size < 1 or block_size & (block_size - 1):
        return None
    tile = [1, 1, 1]
    for k in range(block_size.bit_length() - 1):
        tile[k % 3] *= 2
    return (tile[0], tile[1], tile[2])


def parse_blocking(text: str, block_size: int, grid: Sequence[int] | None
                   ) -> tuple[int, int, int] | None:
    """--blocking: 'rows' (None: block_size consecutive rows), 'TXxTYxTZ' (tiles of
    the grid) or 'auto' (tiles of block_size points where there is a grid)."""
    if text == "rows":
        return None
    if text == "auto":
        return auto_tile(block_size) if grid else None
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise BadInput(f"--blocking takes rows, auto or tiles as TXxTYxTZ (4x4x2), not {text!r}")
    if not grid:
        raise BadInput(f"tiles ({text}) need a grid: they are for --poisson, not a matrix file")
    return (int(parts[0]), int(parts[1]), int(parts[2]))


def blocking_label(tile: Sequence[int] | None, block_size: int) -> str:
    """How the record names the blocking: 'rows of 32' or 'tiles 4x4x2'."""
    return f"rows of {block_size}" if tile is None else "tiles " + "x".join(map(str, tile))


#: How a record names the blocking whose whole tiles the sweeps run from copies.
COPIED_BLOCKING = blocking_label(COPIED_TILE, 32)


def solve_local(comm, indptr, indices, data, b, n: int, row_begin: int, block_size: int = 32,
                colors: int = 20, tol: float = 1e-7, max_iter: int = 10_000, threads: int = 0,
                history: bool = False, x0=None, factor: str = DEFAULT_FACTOR,
                grid: Sequence[int] | None = None, tile: Sequence[int] | None = None,
                sweep_prefetch: bool | None = None,
                pages: str = DEFAULT_PAGES,
                spmv_nta: bool | None = None) -> tuple[np.ndarray, dict]:
    """Solve with this rank's rows (collective); returns (x slice, statistics).

    factor: precision of IC(0)'s values ("single", the default: computed in double,
    stored in float32, CG's vectors and sums double; or "double"). grid (nx, ny, nz, x
    fastest) and tile (tx, ty, tz): blocks are tiles of the grid instead of block_size
    consecutive rows. sweep_prefetch, with tiles: whether the sweeps prefetch the lines
    of z each block gathers from other blocks (None: where the node's ranks' z exceeds
    its last-level cache; statistics' sweep_prefetch says what was done). spmv_nta:
    whether the SpMV prefetches A's values and columns non-temporal (None: on AMD x86
    CPUs only, measured faster on an AMD EPYC VM; on an Intel Xeon VM it took 1.65x the
    time, comparisons/README.md; statistics' spmv_nta says what was done; the same bits
    either way). pages: the pages asked for the large arrays ("huge", the default:
    transparent huge pages, a solve 4-14% faster here; or "base": where the host takes
    freed memory back, a fresh process's first setup at 128^3 took 0.20 s in base pages
    against 0.67 s in huge ones, comparisons/README.md; the solution is the same bits).
    statistics' minor_faults: this process's minor page faults during the call (its
    setup faults in the pages of every array it places the first time; in base pages
    each fault is one 4 KiB page).  Raises NotConverged on a CG breakdown (naming the
    iteration), BadInput on NaN/Inf or bad arguments.
    """
    from kernels_ext.biccg import _biccg

    if factor not in FACTORS:
        raise BadInput(f"factor precision must be one of {', '.join(FACTORS)}, not {factor!r}")
    if pages not in PAGES:
        raise BadInput(f"pages must be one of {', '.join(PAGES)}, not {pages!r}")
    if not (spmv_nta is None or isinstance(spmv_nta, bool)):
        raise BadInput(f"spmv_nta must be None, True or False, not {spmv_nta!r}")
    if tile is not None and (grid is None or int(np.prod(grid)) != n):
        raise BadInput(f"tiles need the grid of the matrix ({n} rows), not {grid}")
    x = np.zeros(len(b)) if x0 is None else np.array(x0, dtype=np.float64)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    try:
        stats = _biccg.solve(comm, indptr, indices, data, np.ascontiguousarray(b, np.float64),
                             x, n, row_begin, block_size, colors, tol, max_iter, threads,
                             history, factor == "single",
                             tuple(grid) if tile is not None else (0, 0, 0),
                             tuple(tile) if tile is not None else (0, 0, 0),
                             -1 if sweep_prefetch is None else int(sweep_prefetch),
                             _node_cache_bytes() if sweep_prefetch is None else 0,
                             pages == "base", SPMV_NTA[spmv_nta])
    except ArithmeticError as exc:
        raise NotConverged(str(exc)) from exc
    except (ValueError, TypeError) as exc:
        raise BadInput(str(exc)) from exc
    stats["minor_faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return x, stats


@functools.cache
def _node_cache_bytes() -> int:
    """This machine's last-level cache, all instances (read from sysfs once a process)."""
    from kernels_ext.common.sysinfo import last_level_cache_bytes

    return last_level_cache_bytes()


def release_memory() -> None:
    """Return to the system the memory the solver keeps between solves.

    Each solve frees its setup's arrays when it returns, but the solver keeps the large
    ones (about 385 MB at 128^3) for the next solve, which then sets up on pages already
    in place: on a VM whose balloon reports freed memory, pages handed back and faulted
    in again seconds later made each later setup 4-5x slower (comparisons/README.md,
    "Cold memory").  Call this when no more solves follow and the memory is wanted.
    """
    from kernels_ext.biccg import _biccg

    _biccg.release()


def solve(A, b, block_size: int = 32, colors: int = 20, tol: float = 1e-7,
          max_iter: int = 10_000, threads: int = 0, history: bool = False,
          factor: str = DEFAULT_FACTOR, grid: Sequence[int] | None = None,
          tile: Sequence[int] | None = None, sweep_prefetch: bool | None = None,
          pages: str = DEFAULT_PAGES, spmv_nta: bool | None = None):
    """Solve A x = b on one process (SciPy CSR in, no copy of its arrays)."""
    from kernels_ext.common.mpi import init_mpi

    MPI = init_mpi("funneled")
    check_params(A.shape[0], block_size, colors, tol, max_iter, 1)
    return solve_local(MPI.COMM_SELF, A.indptr, A.indices, A.data, b, A.shape[0], 0,
                       block_size, colors, tol, max_iter, threads, history, factor=factor,
                       grid=grid, tile=tile, sweep_prefetch=sweep_prefetch, pages=pages,
                       spmv_nta=spmv_nta)


def load_problem(args, rank: int, nranks: int) -> dict:
    """This rank's rows of the problem and b = A (1, ..., 1)."""
    if args.poisson:
        nx, ny, nz = args.poisson
        if min(nx, ny, nz) < 1:
            raise BadInput(f"Poisson grid sizes must be positive, not {nx} x {ny} x {nz}")
        n = nx * ny * nz
        if nranks > n:
            raise BadInput(f"more MPI ranks ({nranks}) than matrix rows ({n})")
        r0, r1 = partition(n, nranks, rank)
        indptr, indices, data = poisson_rows(nx, ny, nz, r0, r1)
        name = f"poisson{nx}x{ny}x{nz}"
    else:
        from kernels_ext.biccg.mtx import MtxError, read_mtx

        try:
            A = read_mtx(args.mtx)
        except MtxError as exc:
            raise BadInput(str(exc)) from exc
        check_matrix(A, f"{args.mtx}")
        n = A.shape[0]
        if nranks > n:
            raise BadInput(f"more MPI ranks ({nranks}) than matrix rows ({n})")
        r0, r1 = partition(n, nranks, rank)
        rows = A[r0:r1]
        indptr, indices, data = rows.indptr, rows.indices, rows.data
        name = Path(args.mtx).name.split(".")[0]
    # b = A 1: the row sums of this rank's rows
    b = np.add.reduceat(data, indptr[:-1]) if len(data) else np.zeros(r1 - r0)
    b[np.diff(indptr) == 0] = 0.0
    nnz_local = int(indptr[-1] - indptr[0])
    return {"indptr": indptr, "indices": indices, "data": data, "b": b, "n": n, "r0": r0,
            "r1": r1, "problem": name, "nnz_local": nnz_local}


#: --sweep-prefetch and --spmv-nta -> solve_local's sweep_prefetch and spmv_nta.
PREFETCH = {"auto": None, "on": True, "off": False}

#: solve_local's spmv_nta -> the extension's (biccg.h: BC_SPMV_NTA_AUTO, _ON, _OFF).
SPMV_NTA = {None: 0, True: 1, False: 2}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="[mpiexec -n P] python -m kernels_ext.biccg",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Solve A x = b (b = A 1) by CG preconditioned with block IC(0) and algebraic "
            "block multicolor ordering, MPI ranks x OpenMP threads. Rank 0 prints one JSON "
            "line a solve: converged, iterations, relative_residual (recomputed ||b - Ax|| / "
            "||b||), colors_used, setup_s (all but the iterations), solve_s and the "
            "per-iteration time split. Exit status: 0 "
            "converged, 2 bad input, 3 not converged or CG breakdown, 4 MPI mismatch."),
        epilog=("examples:\n"
                "  python -m kernels_ext.biccg --poisson 64 64 64 --threads 2\n"
                "  mpiexec -n 2 python -m kernels_ext.biccg --poisson 256 256 512 "
                "--block-size 32 --colors 20 --tol 1e-7\n"
                "      (no --threads: each rank runs its share of its node's CPUs, 1 each on 2 "
                "CPUs)\n"
                "  mpiexec -n 2 -bind-to core:4 python -m kernels_ext.biccg --poisson 128 128 "
                "128 --threads 4\n"
                "  python -m kernels_ext.biccg --mtx G3_circuit.tar.gz\n\n"
                "Ranks x threads on a node may not exceed the CPUs its ranks may use (their "
                "affinity masks):\nan explicit --threads or OMP_NUM_THREADS that does is "
                "refused (exit status 2) unless --oversubscribe.\nThe record says "
                "oversubscribed, threads, cpus_per_rank, ranks_per_node and nodes."))
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--poisson", type=int, nargs=3, metavar=("NX", "NY", "NZ"),
                     help="3D 7-point Laplacian on an NX x NY x NZ grid (Dirichlet)")
    src.add_argument("--mtx", help="Matrix Market file (.mtx, .mtx.gz, SuiteSparse .tar.gz)")
    p.add_argument("--block-size", type=int, default=32,
                   help="rows per block (default 32); with tiles, the points of a tile")
    p.add_argument("--blocking", default=DEFAULT_BLOCKING,
                   help="auto (the default: tiles of block-size points for --poisson where "
                        "block-size is a power of two, else rows), rows (block-size "
                        "consecutive rows: the study's algebraic blocking) or TXxTYxTZ (tiles "
                        "of the grid, --poisson only)")
    p.add_argument("--factor", choices=FACTORS, default=DEFAULT_FACTOR,
                   help=f"precision of IC(0)'s values (default {DEFAULT_FACTOR}; CG's "
                        "vectors and sums are double either way)")
    p.add_argument("--colors", type=int, default=20, help="at least this many colors (20)")
    p.add_argument("--tol", type=float, default=1e-7, help="relative residual (1e-7)")
    p.add_argument("--max-iter", type=int, default=10_000, help="iteration limit (10000)")
    p.add_argument("--threads", type=int, default=None,
                   help="OpenMP threads per rank (default: OMP_NUM_THREADS, else the rank's "
                        "share of its node's CPUs: its affinity mask over the ranks on the "
                        "node that share it)")
    p.add_argument("--oversubscribe", action="store_true",
                   help="run even when ranks x threads on a node exceed its ranks' CPUs "
                        "(timings are then not for reporting)")
    p.add_argument("--sweep-prefetch", choices=("auto", "on", "off"), default="auto",
                   help="with tiles: whether the sweeps prefetch the lines each block gathers "
                        "from other blocks (auto, the default: where the vector they gather, "
                        "the node's ranks together, exceeds its last-level cache; row blocks "
                        "always do); the record's sweep_prefetch: how many ranks did")
    p.add_argument("--spmv-nta", choices=("auto", "on", "off"), default="auto",
                   help="whether the SpMV prefetches the matrix's values and columns "
                        "non-temporal (auto, the default: on AMD x86 CPUs only, faster on an "
                        "AMD EPYC VM; on an Intel Xeon VM 1.65x slower than ordinary "
                        "prefetches); the record's "
                        "spmv_nta: how many ranks did")
    p.add_argument("--pages", choices=PAGES, default=DEFAULT_PAGES,
                   help="the pages of the solver's large arrays: huge (the default: "
                        "transparent huge pages, a faster solve) or base (where the host takes "
                        "freed memory back, as a balloon's free page reporting does, huge "
                        "pages fault in several times slower, and a process's first setup "
                        "pays it: comparisons/README.md, \"Huge pages or base pages\")")
    p.add_argument("--triad-beside", nargs="?", const="auto", default=None, metavar="SIZE",
                   help="measure the node's STREAM Triad just before and just after the first "
                        "solve, every rank of a node at once with its threads, on SIZE "
                        "elements an array for the node (default auto: the Triad's rule size), "
                        "passes of the Triad alone (kernels_ext.triad.node_rate): "
                        "the record's triad_beside_gbs [before, after], what the memory gave "
                        "while this solve ran (the time model fits its efficiency on it). One "
                        "that cannot run before the solve stops the run (exit status 2); "
                        "after it, the record keeps [before] and says why "
                        "(triad_beside_error)")
    p.add_argument("--history", action="store_true", help="include the residual history")
    p.add_argument("--solves", type=int, default=1,
                   help="solve the same problem this many times in the process, a JSON line "
                        "each (with solve: 1, 2, ...; default 1): a job's later solves set up "
                        "on memory the solver kept (release_memory)")
    p.add_argument("--out", default=None, help="write the JSON line to this file (rank 0)")
    return p


def run(args: argparse.Namespace) -> tuple[list[str], int, int]:
    """Everything main() does but printing: (JSON lines on rank 0, rank, exit code)."""
    from kernels_ext.common.cli import check_out_agreed
    from kernels_ext.common.mpi import check_abi, init_mpi

    MPI = init_mpi("funneled")  # OpenMP threads compute, only the main thread calls MPI
    comm = MPI.COMM_WORLD
    rank, nranks = comm.Get_rank(), comm.Get_size()
    check_out_agreed(comm, args.out)
    import importlib.util

    spec = importlib.util.find_spec("kernels_ext.biccg._biccg")
    if spec is None or spec.origin is None:
        raise BadInput("kernels_ext.biccg._biccg is not built: no MPI was found when the package "
                       "was installed")
    check_abi(MPI, spec.origin)
    from kernels_ext.common.layout import rank_layout, requested_threads

    if args.solves < 1:
        raise BadInput(f"--solves must be at least 1, not {args.solves}")
    lay = rank_layout(comm, *requested_threads(args.threads))
    lay.check(args.oversubscribe)  # every rank alike: the verdict is agreed across the world
    tile = parse_blocking(args.blocking, args.block_size, args.poisson)
    block_size = args.block_size if tile is None else int(np.prod(tile))
    t0 = time.perf_counter()
    prob = load_problem(args, rank, nranks)
    t_load = time.perf_counter() - t0
    check_params(prob["n"], args.block_size, args.colors, args.tol, args.max_iter, nranks)
    nnz = comm.allreduce(prob["nnz_local"])

    def record(x: np.ndarray, st: dict, first: bool) -> dict:
        """One solve's JSON record (collective: the error and peak memory are every rank's)."""
        err = comm.allreduce(float(np.max(np.abs(x - 1.0))) if len(x) else 0.0, op=MPI.MAX)
        rss = comm.gather(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, root=0)
        it = max(st["iterations"], 1)
        t = st["times"]
        rec = {
            "problem": prob["problem"], "n": prob["n"], "nnz": nnz, "ranks": nranks,
            "block_size": block_size, "colors": args.colors,
            "blocking": blocking_label(tile, block_size), "factor_precision": args.factor,
            "pages": args.pages,
            "tol": args.tol, "max_iter": args.max_iter,
            "converged": st["converged"], "iterations": st["iterations"],
            "relative_residual": st["relative_residual"], "cg_residual": st["cg_residual"],
            "error_max": err, "colors_used": st["colors_used"], "shift": st["shift"],
            "sweep_prefetch": comm.allreduce(int(st["sweep_prefetch"])),
            "spmv_nta": comm.allreduce(int(st["spmv_nta"])),
            "setup_s": t["setup"], "input_s": t["input"],
            "ordering_s": t["ordering"], "factorization_s": t["factorization"],
            "halo_setup_s": t["halo_setup"], "vectors_s": t["vectors"], "solve_s": t["solve"],
            "load_s": t_load if first else 0.0,  # the problem is loaded once
            "per_iteration_s": {k: t[k] / it
                                for k in ("spmv", "precond", "dots", "halo", "vector")},
            "halo_entries": st["halo_entries"],
            # rows the sweeps ran from copies, all ranks (tile_copies counts them): the
            # time model counts an iteration's bytes in that layout (bytes_per_iteration)
            "copied_rows": st["copied_rows"],
            # what one iteration sends, counted by the solver (busiest rank): the time model
            # prices these at the ping-pong's latency and bandwidth for their size
            "halo_messages": st["traffic"]["messages"],
            "halo_bytes": st["traffic"]["message_bytes"],
            "reductions": st["traffic"]["reductions"],
            "reduction_bytes": st["traffic"]["reduction_bytes"],
            "peak_rss_bytes": max(rss) if rss else None,
            # pages faulted in during the call, the busiest rank: a first setup's are all new
            "minor_faults": comm.allreduce(st["minor_faults"], op=MPI.MAX),
            "mpi_library": MPI.Get_library_version().strip().splitlines()[0].strip(),
            "host": socket.gethostname(),
            "hosts": len(set(comm.allgather(MPI.Get_processor_name()))),
        } | lay.record()
        for key in ("triad_beside_gbs", "triad_beside_error"):
            if key in st:
                rec[key] = st[key]
        if args.history:
            rec["history"] = st["history"]
        return rec

    from kernels_ext import triad

    def triad_now() -> float:
        return triad.node_rate(comm, lay.threads, args.triad_beside)

    lines, code = [], 0
    for k in range(args.solves):
        before = triad_now() if args.triad_beside and k == 0 else None
        # the ranks start the solve together (the problem's load and the last record end
        # unevenly): its setup_s, the slowest rank's, then counts no rank's wait for another
        # to arrive, as PETSc's comparison times KSPSetUp from a barrier
        comm.Barrier()
        x, st = solve_local(comm, prob["indptr"], prob["indices"], prob["data"], prob["b"],
                            prob["n"], prob["r0"], block_size, args.colors, args.tol,
                            args.max_iter, lay.threads, args.history, factor=args.factor,
                            grid=args.poisson, tile=tile,
                            sweep_prefetch=PREFETCH[args.sweep_prefetch], pages=args.pages,
                            spmv_nta=PREFETCH[args.spmv_nta])
        if before is not None:  # the solve is done: a Triad that fails now loses nothing
            try:
                st["triad_beside_gbs"] = [before, triad_now()]
            except KernelError as exc:
                st["triad_beside_gbs"] = [before]
                st["triad_beside_error"] = f"the Triad after the solve: {exc}"
            triad.release()
        rec = record(x, st, k == 0)
        if args.solves > 1:
            rec["solve"] = k + 1
        lines.append(json.dumps(rec))
        if not st["converged"]:
            code = NotConverged.exit_code
    return (lines if rank == 0 else []), rank, code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m kernels_ext.biccg``; returns the exit status."""
    from kernels_ext.common import cli

    args = build_parser().parse_args(argv)
    code, lines = cli.mpi_main(lambda: run(args), args.out)
    failed = [r for r in map(json.loads, lines) if not r["converged"]]
    if code == NotConverged.exit_code and failed:
        rec = failed[0]
        which = f" (solve {rec['solve']})" if "solve" in rec else ""
        print(f"error: not converged{which}: relative residual {rec['relative_residual']:.3g} "
              f"> tol {rec['tol']:g} after {rec['iterations']} iterations", file=sys.stderr)
    return code

