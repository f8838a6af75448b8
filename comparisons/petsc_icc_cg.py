"""PETSc's CG with ICC(0) on the 3D 7-point Poisson matrix: a JSON line a solve.

The baseline beside our BICCG in biccg_vs_baselines.py. It runs under the
system Python (Debian's python3-petsc4py), not the project's venv, so it uses
only numpy and petsc4py:

    apt-get install -y python3-petsc4py
    OMP_NUM_THREADS=1 /usr/bin/python3 comparisons/petsc_icc_cg.py --poisson 128 128 128

The matrix is exactly the one `python -m kernels_ext.biccg --poisson` solves
(kernels_ext/src/biccg/poisson.c): row i = x + nx (y + ny z), columns in
ascending order, 6 on the diagonal and -1 for each neighbour inside the grid
(Dirichlet). b = A 1, x0 = 0. KSPCG with PCICC, 0 levels, natural ordering
(PETSc's default shift, positive definite, never fires on this M-matrix),
stopping at ||b - A x|| / ||b|| <= rtol on the unpreconditioned residual norm.
Options in PETSC_OPTIONS (e.g. -ksp_view) are applied after these settings.

Under mpiexec with P processes (Debian's petsc4py is built on Open MPI:
`mpiexec.openmpi -n 2 /usr/bin/python3 ...`), each owns a slab of
consecutive rows, as our solver's ranks do, and the preconditioner is PETSc's
parallel ICC(0): block Jacobi, one block a process, each factored by ICC(0)
as above (PCICC alone is serial).  Times are the slowest process's, after a
barrier; rank 0 prints the line.

t_setup is KSPSetUp (including the ICC factorization), t_solve is KSPSolve;
t_build (matrix assembly) is reported apart, as our solver's load_s is.  Of
it, t_matrix is PETSc's matrix made from the caller's CSR arrays by the
cheapest call for it (createAIJWithArrays and assemble: on one process PETSc
takes the arrays as they are, without a copy; on several it copies them into
its diagonal and off-diagonal parts), so that t_matrix + t_setup starts where
our setup starts, which copies the CSR in its own order.
Memory (--memory): PETSc's memory comes from glibc, which keeps what a process
frees and serves it again.  Building the CSR in numpy frees about 500 MB at
128^3, and PETSc's first setup used to run on those pages: 3-15 page faults in
KSPSetUp, 0.08 s, against 142-159 MB faulted in and 0.13-0.15 s for each later
setup.  Our solver maps its arrays afresh, so its first setup faults in every
page.  "fresh" (the default) starts PETSc's matrix and its first setup the same
way: glibc's free memory handed back to the system first (malloc_trim), and
transparent huge pages off while they run, so that every page they touch is a
new base page, as our solver's are with --pages base (PETSc advises none of its
allocations huge).  "trimmed" hands the free memory back and leaves THP as the
system has it: PETSc then gets huge pages where the kernel gives them (here,
heap regions NumPy had advised), each fault possibly 2 MiB, as our solver's
default --pages huge does.  Later setups (--solves) run on what the last one
freed, as our solver's run on the arrays it kept.  "as-left" runs on whatever
the process holds, as before.  setup_faults is KSPSetUp's minor page faults
(the most of any process; its matrix's are not counted): with "fresh", each is
one base page new to the process.  solve_faults is the same for KSPSolve: the
memory the solve touches first (the work vectors KSPSetUp created and left
untouched).

relative_residual is recomputed from x. Exit status 3 when not converged,
4 when petsc4py cannot be imported, 2 where --memory fresh or trimmed cannot be
had (the reason on stderr). With --version it
only prints {"petsc_version": ...}.

Where petsc4py is not on sys.path, PETSC_DIR (or else Debian's real-number
build, /usr/lib/petscdir/*/*-real or petsc-real) is used to find it.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import resource
import sys
import time
from contextlib import contextmanager

import numpy as np

NO_PETSC = 4
MEMORY = ("fresh", "trimmed", "as-left")
DEFAULT_MEMORY = "fresh"
PR_SET_THP_DISABLE, PR_GET_THP_DISABLE = 41, 42  # linux/prctl.h


class NoFreshMemory(OSError):
    """--memory fresh (or trimmed) cannot be had in this process."""


def minor_faults() -> int:
    """This process's minor page faults so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@contextmanager
def memory_as(memory: str):
    """The block's memory as `memory` (one of MEMORY) says.  fresh: glibc's free memory
    handed back to the system (malloc_trim), and transparent huge pages off for the
    process until the block ends, so that what the block allocates and touches faults in
    as new base pages; afterwards THP is as it was (the flag is inherited: a process may
    have started with it off).  trimmed: the hand-back alone.  as-left: nothing.  Raises
    NoFreshMemory where this process cannot do what is asked (not glibc on Linux)."""
    if memory not in MEMORY:
        raise ValueError(f"memory {memory!r}: one of {', '.join(MEMORY)}")
    if memory == "as-left":
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "malloc_trim") or not hasattr(libc, "prctl"):
        raise NoFreshMemory(f"--memory {memory} needs glibc's malloc_trim and Linux's prctl; "
                            "run with --memory as-left")
    if memory == "trimmed":
        libc.malloc_trim(0)
        yield
        return
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    was_off = libc.prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0)
    if was_off < 0 or libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
        raise NoFreshMemory(f"prctl(PR_SET_THP_DISABLE): {os.strerror(ctypes.get_errno())}; "
                            "run with --memory as-left")
    try:
        libc.malloc_trim(0)
        yield
    finally:
        libc.prctl(PR_SET_THP_DISABLE, 1 if was_off else 0, 0, 0, 0)


def poisson_csr(nx: int, ny: int, nz: int, index_dtype=np.int64, rows: tuple | None = None):
    """(indptr, indices, data) of the 7-point Laplacian, as poisson.c fills them: its
    rows [r0, r1) where `rows` is given (indptr from 0, global columns), else all."""
    n, plane = nx * ny * nz, nx * ny
    r0, r1 = rows or (0, n)
    i = np.arange(r0, r1, dtype=np.int64)
    x, y, z = i % nx, (i // nx) % ny, i // plane
    # the seven candidates of each row in ascending column order
    offsets = (-plane, -nx, -1, 0, 1, nx, plane)
    inside = (z > 0, y > 0, x > 0, np.ones(len(i), bool), x < nx - 1, y < ny - 1, z < nz - 1)
    keep = np.stack(inside, axis=1)
    cols = i[:, None] + np.array(offsets, dtype=np.int64)
    vals = np.where(np.array(offsets) == 0, 6.0, -1.0)
    indptr = np.zeros(len(i) + 1, np.int64)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    indices = cols[keep].astype(index_dtype)
    data = np.broadcast_to(vals, keep.shape)[keep].copy()
    return indptr.astype(index_dtype), indices, data


def import_petsc():
    """petsc4py's PETSc module, initialised with no command-line options."""
    try:
        import petsc4py
    except ImportError as first:
        dirs = [os.environ.get("PETSC_DIR", "")]
        dirs += sorted(glob.glob("/usr/lib/petscdir/petsc*-real"))
        dirs += sorted(glob.glob("/usr/lib/petscdir/*/*-real"))
        for d in filter(None, dirs):
            site = os.path.join(d, "lib", "python3", "dist-packages")
            if os.path.isdir(os.path.join(site, "petsc4py")):
                sys.path.append(site)
                break
        else:
            raise first
        import petsc4py
    petsc4py.init([sys.argv[0]])
    from petsc4py import PETSc

    return PETSc


def solve(PETSc, grid: list[int], rtol: float, max_iter: int, solves: int = 1,
          pause: float = 0.0, memory: str = DEFAULT_MEMORY) -> list[dict]:
    """The problem built once, then solved `solves` times, each setup after `pause` seconds
    of sleep, PETSc's matrix and setups on the `memory` the module's docstring says; a
    record a solve."""
    nx, ny, nz = grid
    comm = PETSc.COMM_WORLD
    size, rank = comm.getSize(), comm.getRank()
    n = nx * ny * nz
    rows = (n * rank // size, n * (rank + 1) // size)  # this process's slab

    def most(value: float) -> float:
        """The largest of every process's value (a vector's max: no mpi4py needed)."""
        if size == 1:
            return value
        v = PETSc.Vec().createMPI((1, size), comm=comm)
        v.setValue(rank, value)
        v.assemble()
        return v.max()[1]

    def slowest(t0: float) -> float:
        """Seconds since t0 on the slowest process."""
        return most(time.perf_counter() - t0)

    comm.barrier()
    t0 = time.perf_counter()
    indptr, indices, data = poisson_csr(nx, ny, nz, PETSc.IntType, rows)
    m = rows[1] - rows[0]
    comm.barrier()
    with memory_as(memory):
        t1 = time.perf_counter()  # the CSR made PETSc's matrix (one process: the arrays taken)
        A = PETSc.Mat().createAIJWithArrays(size=((m, n), (m, n)), csr=(indptr, indices, data),
                                            comm=comm)
        A.setOption(PETSc.Mat.Option.SYMMETRIC, True)
        A.assemble()
        t_matrix = slowest(t1)
    del indices, data
    b, x = A.createVecs()
    ones = b.duplicate()
    ones.set(1.0)
    A.mult(ones, b)
    x.set(0.0)
    t_build = slowest(t0)

    recs = []
    for solve_no in range(1, solves + 1):  # a new KSP each: its setup from scratch
        x.set(0.0)
        ksp = PETSc.KSP().create(comm=comm)
        ksp.setOperators(A)
        ksp.setType(PETSc.KSP.Type.CG)
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
        ksp.setTolerances(rtol=rtol, atol=0.0, max_it=max_iter)
        ksp.setInitialGuessNonzero(False)
        pc = ksp.getPC()
        if size == 1:
            pc.setType(PETSc.PC.Type.ICC)
            pc.setFactorLevels(0)
            pc.setFactorOrdering(PETSc.Mat.OrderingType.NATURAL)
        else:  # one block a process, each ICC(0) as above (where PETSC_OPTIONS is silent)
            pc.setType(PETSc.PC.Type.BJACOBI)
            opts = PETSc.Options()
            for key, value in (("sub_pc_type", "icc"), ("sub_pc_factor_levels", 0),
                               ("sub_pc_factor_mat_ordering_type", "natural")):
                if not opts.hasName(key):
                    opts[key] = value
        ksp.setFromOptions()

        time.sleep(pause)
        used = memory if solve_no == 1 else "as-left"  # later: on what the last one freed
        with memory_as(used):
            comm.barrier()
            f0, t0 = minor_faults(), time.perf_counter()
            ksp.setUp()
            if size > 1:  # the blocks' factorizations run in their own setup
                ksp.setUpOnBlocks()
            faults = minor_faults() - f0  # before slowest(), which makes a vector
            t_setup = slowest(t0)
            faults = int(most(faults))
        comm.barrier()
        f0, t0 = minor_faults(), time.perf_counter()
        ksp.solve(b, x)
        solve_faults = minor_faults() - f0
        t_solve = slowest(t0)
        solve_faults = int(most(solve_faults))

        r = b.duplicate()
        A.mult(x, r)
        r.aypx(-1.0, b)  # r = b - A x
        reason = ksp.getConvergedReason()
        names = {v: k for k, v in vars(PETSc.KSP.ConvergedReason).items()
                 if isinstance(v, int) and not k.startswith("_")}
        x.axpy(-1.0, ones)
        recs.append({
            "solver": "petsc-icc-cg", "petsc_version": petsc_version(PETSc),
            "grid": grid, "n": n, "nnz": 7 * n - 2 * (nx * ny + ny * nz + nx * nz),
            "ranks": size, "threads": 1, "rtol": rtol,
            "iterations": ksp.getIterationNumber(), "t_build": t_build, "t_matrix": t_matrix,
            "t_setup": t_setup, "t_solve": t_solve,
            "memory": used,
            "setup_faults": faults, "solve_faults": solve_faults,
            "relative_residual": r.norm() / b.norm(),
            "error_max": x.norm(PETSc.NormType.INFINITY),
            "converged_reason": names.get(reason, str(reason)), "converged": reason > 0})
        if solves > 1:
            recs[-1]["solve"] = solve_no
        ksp.destroy()
    return recs


def petsc_version(PETSc) -> str:
    return ".".join(map(str, PETSc.Sys.getVersion()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--poisson", type=int, nargs=3, metavar=("NX", "NY", "NZ"),
                   default=[64, 64, 64])
    p.add_argument("--rtol", type=float, default=1e-7)
    p.add_argument("--max-iter", type=int, default=10_000)
    p.add_argument("--solves", type=int, default=1,
                   help="solve this many times in the process, each with a new KSP (its setup "
                        "from scratch, on memory the last one freed), a JSON line each")
    p.add_argument("--pause", type=float, default=0.0,
                   help="seconds of sleep before each setup (default 0): memory the process "
                        "frees and glibc keeps is not reported to the host, so a pause "
                        "changes only what was handed back (--memory fresh)")
    p.add_argument("--memory", choices=MEMORY, default=DEFAULT_MEMORY,
                   help="what PETSc's matrix and first setup run on (default fresh): memory "
                        "handed back to the system first and faulted in as new base pages, "
                        "as our solver's first setup does with --pages base; trimmed: handed "
                        "back, THP as the system has it (huge pages where given, as our "
                        "default --pages huge); or as-left: the pages glibc kept from the "
                        "CSR's construction (see above)")
    p.add_argument("--version", action="store_true", help="only print the PETSc version")
    a = p.parse_args(argv)
    if min(a.poisson) < 1:
        p.error("Poisson grid sizes must be positive")
    if a.solves < 1:
        p.error("--solves must be at least 1")
    if a.pause < 0:
        p.error("--pause must not be negative")
    try:
        PETSc = import_petsc()
    except Exception as exc:  # not installed, or built for another Python or numpy
        print(f"petsc4py cannot be imported by {sys.executable}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return NO_PETSC
    if a.version:
        print(json.dumps({"petsc_version": petsc_version(PETSc)}))
        return 0
    try:
        recs = solve(PETSc, a.poisson, a.rtol, a.max_iter, a.solves, a.pause, a.memory)
    except NoFreshMemory as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if PETSc.COMM_WORLD.getRank() == 0:
        for rec in recs:
            print(json.dumps(rec))
    for rec in recs:
        if not rec["converged"]:
            which = f", solve {rec['solve']}" if "solve" in rec else ""
            print(f"error: not converged ({rec['converged_reason']}{which}) after "
                  f"{rec['iterations']} iterations", file=sys.stderr)
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
