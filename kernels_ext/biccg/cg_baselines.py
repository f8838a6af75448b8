"""Python-side CG baselines for the BICCG solver, on one process.

* ``numba_pcg``: CG with natural-order IC(0) (the same M = U^T D U, built and
  applied sequentially, as a textbook code would) or Jacobi, the SpMV and
  vector updates parallel with ``prange``.  Its IC(0) iteration count is the
  reference the multicolor ordering is judged against.
* ``scipy_cg``: ``scipy.sparse.linalg.cg``, unpreconditioned or Jacobi.

Both stop at ||r|| / ||b|| <= tol and report the residual recomputed from x.
"""

from __future__ import annotations

import time

import numpy as np

_K: dict = {}


def _kernels() -> dict:
    if _K:
        return _K
    from numba import njit, prange

    @njit(parallel=True, cache=True)
    def spmv(indptr, indices, data, x, y):
        for i in prange(len(y)):
            s = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                s += data[k] * x[indices[k]]
            y[i] = s

    @njit(cache=True)
    def ic0(indptr, indices, data, n, shift):
        """IC(0), M = U^T D U: returns pivots d and L (strictly lower, unit) in CSR."""
        lptr = np.zeros(n + 1, np.int64)
        for i in range(n):
            c = 0
            for k in range(indptr[i], indptr[i + 1]):
                c += indices[k] < i
            lptr[i + 1] = lptr[i] + c
        lidx = np.empty(lptr[n], np.int64)
        lval = np.empty(lptr[n], np.float64)
        d = np.empty(n)
        for i in range(n):
            m = lptr[i]
            diag = 0.0
            for k in range(indptr[i], indptr[i + 1]):  # rows sorted by column
                if indices[k] < i:
                    lidx[m] = indices[k]
                    lval[m] = data[k]
                    m += 1
                elif indices[k] == i:
                    diag = data[k]
            for p in range(lptr[i], lptr[i + 1]):
                k = lidx[p]
                s = lval[p]
                q, r = lptr[i], lptr[k]
                while q < p and r < lptr[k + 1]:
                    if lidx[q] < lidx[r]:
                        q += 1
                    elif lidx[q] > lidx[r]:
                        r += 1
                    else:
                        s -= lval[q] * d[lidx[r]] * lval[r]
                        q += 1
                        r += 1
                lval[p] = s / d[k]
            piv = diag * (1.0 + shift)
            for p in range(lptr[i], lptr[i + 1]):
                piv -= lval[p] * lval[p] * d[lidx[p]]
            if not piv > 1e-14 * abs(diag):
                return d, lptr, lidx, lval, False
            d[i] = piv
        return d, lptr, lidx, lval, True

    @njit(cache=True)
    def ic0_apply(lptr, lidx, lval, d, r, z):
        n = len(r)
        for i in range(n):  # (I + L) w = r
            s = r[i]
            for p in range(lptr[i], lptr[i + 1]):
                s -= lval[p] * z[lidx[p]]
            z[i] = s
        for i in range(n):
            z[i] /= d[i]
        for i in range(n - 1, -1, -1):  # (I + L^T) z = D^-1 w, column-oriented
            zi = z[i]
            for p in range(lptr[i], lptr[i + 1]):
                z[lidx[p]] -= lval[p] * zi

    @njit(parallel=True, cache=True)
    def dot(a, b):
        s = 0.0
        for i in prange(len(a)):
            s += a[i] * b[i]
        return s

    @njit(parallel=True, cache=True)
    def axpy2(alpha, p, q, x, r):
        for i in prange(len(x)):
            x[i] += alpha * p[i]
            r[i] -= alpha * q[i]

    @njit(parallel=True, cache=True)
    def xpby(z, beta, p):
        for i in prange(len(p)):
            p[i] = z[i] + beta * p[i]

    _K.update(spmv=spmv, ic0=ic0, ic0_apply=ic0_apply, dot=dot, axpy2=axpy2, xpby=xpby)
    return _K


def numba_pcg(A, b, tol: float = 1e-7, max_iter: int = 10_000, precond: str = "ic0",
              threads: int | None = None) -> tuple[np.ndarray, dict]:
    """CG in numba with natural-order IC(0) ('ic0'), Jacobi ('jacobi') or none ('none')."""
    import numba

    if threads:
        numba.set_num_threads(threads)
    k = _kernels()
    n = A.shape[0]
    indptr, indices, data = A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data
    t0 = time.perf_counter()
    shift = 0.0
    if precond == "ic0":
        while True:
            d, lptr, lidx, lval, ok = k["ic0"](indptr, indices, data, n, shift)
            if ok:
                break
            shift = 1e-4 if shift == 0 else shift * 10
        apply = lambda r, z: k["ic0_apply"](lptr, lidx, lval, d, r, z)  # noqa: E731
    elif precond == "jacobi":
        dinv = 1.0 / A.diagonal()
        apply = lambda r, z: np.multiply(dinv, r, out=z)  # noqa: E731
    else:
        apply = lambda r, z: np.copyto(z, r)  # noqa: E731
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    x, r, z, q = np.zeros(n), b.astype(np.float64).copy(), np.empty(n), np.empty(n)
    bnorm = np.sqrt(k["dot"](b, b)) or 1.0
    apply(r, z)
    p = z.copy()
    rz = k["dot"](r, z)
    rel, it = np.sqrt(k["dot"](r, r)) / bnorm, 0
    while rel > tol and it < max_iter:
        it += 1
        k["spmv"](indptr, indices, data, p, q)
        pq = k["dot"](p, q)
        if not pq > 0:
            raise ArithmeticError(f"CG broke down at iteration {it}")
        alpha = rz / pq
        k["axpy2"](alpha, p, q, x, r)
        rel = np.sqrt(k["dot"](r, r)) / bnorm
        apply(r, z)
        rz, rz_old = k["dot"](r, z), rz
        k["xpby"](z, rz / rz_old, p)
    solve = time.perf_counter() - t0
    true = np.linalg.norm(b - A @ x) / bnorm
    return x, {"iterations": it, "converged": bool(true <= tol), "relative_residual": true,
               "setup_s": setup, "solve_s": solve, "shift": shift}


def scipy_cg(A, b, tol: float = 1e-7, max_iter: int = 10_000,
             precond: str = "none") -> tuple[np.ndarray, dict]:
    """SciPy's cg, unpreconditioned or with Jacobi."""
    import scipy.sparse.linalg as spla

    count = [0]
    M = None
    if precond == "jacobi":
        dinv = 1.0 / A.diagonal()
        M = spla.LinearOperator(A.shape, matvec=lambda v: dinv * v)
    t0 = time.perf_counter()
    x, info = spla.cg(A, b, rtol=tol, maxiter=max_iter, M=M,
                      callback=lambda _: count.__setitem__(0, count[0] + 1))
    solve = time.perf_counter() - t0
    bnorm = np.linalg.norm(b) or 1.0
    true = np.linalg.norm(b - A @ x) / bnorm
    return x, {"iterations": count[0], "converged": bool(info == 0 and true <= tol * 1.01),
               "relative_residual": true, "setup_s": 0.0, "solve_s": solve}


METHODS = {"scipy-cg": lambda A, b, a: scipy_cg(A, b, a.tol, a.max_iter),
           "numba-ic0cg": lambda A, b, a: numba_pcg(A, b, a.tol, a.max_iter, "ic0", a.threads),
           "numba-cg": lambda A, b, a: numba_pcg(A, b, a.tol, a.max_iter, "none", a.threads)}


def main(argv=None) -> int:
    """``python -m kernels_ext.biccg.cg_baselines``: one baseline solve, one JSON line (b = A 1)."""
    import argparse
    import json
    import sys

    import scipy.sparse as sp

    from kernels_ext import biccg
    from kernels_ext.common.errors import KernelError

    p = argparse.ArgumentParser(
        prog="python -m kernels_ext.biccg.cg_baselines",
        description="Solve A x = A 1 with a Python-side CG baseline on one process and print "
                    "one JSON line (converged, iterations, relative_residual, setup_s, "
                    "solve_s). Exit status 2 for bad input, 3 when not converged.",
        epilog="example: python -m kernels_ext.biccg.cg_baselines --poisson 64 64 64 "
               "--method numba-ic0cg")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--poisson", type=int, nargs=3, metavar=("NX", "NY", "NZ"))
    src.add_argument("--mtx")
    p.add_argument("--method", choices=sorted(METHODS), default="numba-ic0cg")
    p.add_argument("--tol", type=float, default=1e-7)
    p.add_argument("--max-iter", type=int, default=10_000)
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args(argv)
    try:
        prob = biccg.load_problem(a, 0, 1)  # one process: every row
        n, name, b = prob["n"], prob["problem"], prob["b"]
        A = sp.csr_matrix((prob["data"], prob["indices"], prob["indptr"]), shape=(n, n))
        biccg.check_params(n, 1, 1, a.tol, a.max_iter, 1)
        x, info = METHODS[a.method](A, b, a)
    except KernelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ArithmeticError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    rec = {"problem": name, "method": a.method, "n": A.shape[0], "nnz": int(A.nnz),
           "threads": a.threads, "tol": a.tol, "error_max": float(np.max(np.abs(x - 1.0)))}
    rec |= {k: (float(v) if isinstance(v, np.floating) else v) for k, v in info.items()}
    print(json.dumps(rec))
    if not info["converged"]:
        print(f"error: not converged after {info['iterations']} iterations", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
