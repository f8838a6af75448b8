/*
 * _biccg.c - Python binding shim for src/biccg/: buffers in (no copies), the
 * communicator from mpi4py's C API, the GIL released while solving, return
 * codes turned into exceptions.  No loops over matrix data here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <mpi.h>
#include <mpi4py/mpi4py.h>
#include <stdlib.h>
#include <string.h>

#include "../common/mpi_build.h"
#include "src/biccg.h"

/* A borrowed, C-contiguous buffer of the given item kind: 'i' = 32- or 64-bit
 * integers, 'd' = float64; `writable` for outputs. */
typedef struct {
    Py_buffer view;
    int held;
} buf_t;

static int get_buf(PyObject *obj, buf_t *b, char kind, int writable, const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b->view, flags) != 0)
        return -1;
    b->held = 1;
    const char *f = b->view.format ? b->view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    int ok = kind == 'd' ? (f[0] == 'd' && b->view.itemsize == 8)
                         : (strchr("ilqIL", f[0]) != NULL &&
                            (b->view.itemsize == 4 || b->view.itemsize == 8));
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s must be %s", name,
                     kind == 'd' ? "float64" : "int32 or int64");
        return -1;
    }
    return 0;
}

static void release(buf_t *bufs, int n)
{
    for (int i = 0; i < n; i++)
        if (bufs[i].held)
            PyBuffer_Release(&bufs[i].view), bufs[i].held = 0;
}

/* Point the input CSR at the index buffers, whichever width they have. */
static void set_csr(bc_csr_in *a, buf_t *ptr, buf_t *idx, buf_t *val)
{
    a->indptr32 = ptr->view.itemsize == 4 ? ptr->view.buf : NULL;
    a->indptr64 = ptr->view.itemsize == 8 ? ptr->view.buf : NULL;
    a->indices32 = idx->view.itemsize == 4 ? idx->view.buf : NULL;
    a->indices64 = idx->view.itemsize == 8 ? idx->view.buf : NULL;
    a->data = val->view.buf;
}

static PyObject *raise_code(int rc, int iteration)
{
    switch (rc) {
    case BC_ENOMEM:
        return PyErr_NoMemory();
    case BC_EBREAKDOWN:
        if (iteration >= 0)
            return PyErr_Format(PyExc_ArithmeticError,
                                "CG broke down at iteration %d: p'Ap or r'z is not positive "
                                "(is the matrix positive definite?)",
                                iteration);
        return PyErr_Format(PyExc_ArithmeticError,
                            "IC(0) found no positive pivots even with a diagonal shift of 1e4 "
                            "(is the matrix positive definite?)");
    case BC_ENOTFINITE:
        return PyErr_Format(PyExc_ValueError, "NaN or Inf in the matrix or right-hand side");
    case BC_EMPI:
        return PyErr_Format(PyExc_RuntimeError, "an MPI call failed in the solver");
    default:
        return PyErr_Format(PyExc_ValueError, "invalid solver arguments");
    }
}

PyDoc_STRVAR(solve_doc,
             "solve(comm, indptr, indices, data, b, x, n, row_begin, block_size, colors,\n"
             "      tol, max_iter, threads=0, history=False, single_factor=False,\n"
             "      grid=(0, 0, 0), tile=(0, 0, 0), sweep_prefetch=-1, llc_bytes=0,\n"
             "      base_pages=False, spmv_nta=0) -> dict\n\n"
             "Collective over the mpi4py communicator `comm`: this rank holds rows\n"
             "[row_begin, row_begin + len(b)) of the n x n SPD matrix in CSR (global\n"
             "column indices; int32 or int64 indptr/indices, float64 data). Solves\n"
             "A x = b by BICCG in place of x (the initial guess), the GIL released.\n"
             "Returns iterations, converged, relative_residual (recomputed), colors_used,\n"
             "shift, times (seconds, slowest rank: solve, the iterations, and their\n"
             "parts; setup, all else: input check, ordering, factorization, halo_setup\n"
             "and vectors, with x permuted back; setup sums each part's slowest rank),\n"
             "traffic (per iteration, counted in\n"
             "the loop: halo messages and bytes of the busiest rank, Allreduces and\n"
             "their bytes) and the residual history if asked.\n"
             "single_factor keeps IC(0)'s values in float32; grid (nx, ny, nz) and tile\n"
             "(tx, ty, tz) make the blocks tiles of the grid instead of block_size rows.\n"
             "sweep_prefetch (tiles): 1 the sweeps prefetch the lines they gather, 0 not,\n"
             "-1 where those of this node's ranks exceed llc_bytes (the node's last-level\n"
             "cache); the dict's sweep_prefetch says what this rank did.\n"
             "base_pages puts the large arrays in base pages, not transparent huge pages.\n"
             "spmv_nta: the SpMV prefetches A's stream non-temporal (1), as ordinary\n"
             "lines (2), or (0) on AMD x86 CPUs only; the dict's spmv_nta says which.\n"
             "Raises ArithmeticError on CG breakdown, ValueError on bad input.");

static PyObject *py_solve(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"comm", "indptr", "indices", "data", "b", "x", "n", "row_begin",
                             "block_size", "colors", "tol", "max_iter", "threads", "history",
                             "single_factor", "grid", "tile", "sweep_prefetch", "llc_bytes",
                             "base_pages", "spmv_nta", NULL};
    PyObject *comm_obj, *o[5];
    long long n, row_begin;
    bc_params p;
    long long grid[3] = {0, 0, 0};
    memset(&p, 0, sizeof p);
    p.sweep_prefetch = BC_SWEEP_PREFETCH_AUTO;
    long long llc = 0;
    buf_t bufs[5];
    memset(bufs, 0, sizeof bufs);
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOOLLiidi|ipp(LLL)(iii)iLpi", kwlist,
                                     &comm_obj, &o[0], &o[1], &o[2], &o[3], &o[4], &n,
                                     &row_begin, &p.block_size, &p.colors, &p.tol, &p.max_iter,
                                     &p.threads, &p.keep_history, &p.single_factor, &grid[0],
                                     &grid[1], &grid[2], &p.tile[0], &p.tile[1], &p.tile[2],
                                     &p.sweep_prefetch, &llc, &p.base_pages, &p.spmv_nta))
        return NULL;
    p.llc_bytes = (int64_t)llc;
    for (int k = 0; k < 3; k++)
        p.grid[k] = (bc_gidx)grid[k];
    MPI_Comm *comm = PyMPIComm_Get(comm_obj);
    if (comm == NULL || get_buf(o[0], &bufs[0], 'i', 0, "indptr") ||
        get_buf(o[1], &bufs[1], 'i', 0, "indices") || get_buf(o[2], &bufs[2], 'd', 0, "data") ||
        get_buf(o[3], &bufs[3], 'd', 0, "b") || get_buf(o[4], &bufs[4], 'd', 1, "x")) {
        release(bufs, 5);
        return NULL;
    }
    Py_ssize_t nrows = bufs[3].view.len / 8;
    if (bufs[4].view.len / 8 != nrows || bufs[0].view.len / bufs[0].view.itemsize != nrows + 1 ||
        bufs[1].view.len / bufs[1].view.itemsize != bufs[2].view.len / 8) {
        release(bufs, 5);
        return PyErr_Format(PyExc_ValueError,
                            "indptr must have len(b) + 1 entries, x len(b), indices len(data)");
    }
    bc_csr_in a = {n, row_begin, nrows, NULL, NULL, NULL, NULL, NULL};
    set_csr(&a, &bufs[0], &bufs[1], &bufs[2]);
    bc_result res;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_solve(*comm, &a, bufs[3].view.buf, bufs[4].view.buf, &p, &res);
    Py_END_ALLOW_THREADS
    release(bufs, 5);
    if (rc != BC_OK) {
        free(res.history);
        return raise_code(rc, res.breakdown_iteration);
    }
    PyObject *hist = PyList_New(res.history ? res.history_len : 0);
    for (int k = 0; hist != NULL && res.history && k < res.history_len; k++)
        PyList_SET_ITEM(hist, k, PyFloat_FromDouble(res.history[k]));
    free(res.history);
    return Py_BuildValue(
        "{s:i,s:O,s:d,s:d,s:i,s:d,s:L,s:L,s:{s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d},s:N,"
        "s:{s:d,s:d,s:d,s:d},s:O,s:O}",
        "iterations", res.iterations, "converged", res.converged ? Py_True : Py_False,
        "relative_residual", res.relative_residual, "cg_residual", res.cg_residual,
        "colors_used", res.colors_used, "shift", res.shift, "halo_entries",
        (long long)res.halo_rows, "copied_rows", (long long)res.copied_rows, "times", "setup",
        res.t_setup, "input", res.t_input, "ordering", res.t_ordering, "factorization",
        res.t_factor, "halo_setup", res.t_halo_setup, "vectors", res.t_vectors, "solve",
        res.t_solve, "spmv", res.t_spmv, "precond", res.t_precond, "dots", res.t_dots, "halo",
        res.t_halo, "vector", res.t_vector, "history", hist, "traffic", "messages",
        res.msgs_per_iter, "message_bytes", res.msg_bytes_per_iter, "reductions",
        res.reductions_per_iter, "reduction_bytes",
        res.reduction_bytes_per_iter, "sweep_prefetch", res.sweep_prefetch ? Py_True : Py_False,
        "spmv_nta", res.spmv_nta ? Py_True : Py_False);
}

PyDoc_STRVAR(coloring_doc,
             "coloring(indptr, indices, data, block_size, colors, color, perm,\n"
             "         grid=(0, 0, 0), tile=(0, 0, 0)) -> int\n\n"
             "The block multicolor ordering of a square matrix (one process): fills\n"
             "color (int32, one per block: of block_size consecutive rows, or a tile\n"
             "of the grid) and perm (int64, new row -> old row); returns the number\n"
             "of colors used.");

static PyObject *py_coloring(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"indptr", "indices", "data", "block_size", "colors", "color",
                             "perm", "grid", "tile", NULL};
    PyObject *o[5];
    int bs, colors;
    long long grid[3] = {0, 0, 0};
    bc_params p;
    buf_t bufs[5];
    memset(bufs, 0, sizeof bufs);
    memset(&p, 0, sizeof p);
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOiiOO|(LLL)(iii)", kwlist, &o[0], &o[1],
                                     &o[2], &bs, &colors, &o[3], &o[4], &grid[0], &grid[1],
                                     &grid[2], &p.tile[0], &p.tile[1], &p.tile[2]))
        return NULL;
    p.block_size = bs;
    p.colors = colors;
    for (int k = 0; k < 3; k++)
        p.grid[k] = (bc_gidx)grid[k];
    if (get_buf(o[0], &bufs[0], 'i', 0, "indptr") || get_buf(o[1], &bufs[1], 'i', 0, "indices") ||
        get_buf(o[2], &bufs[2], 'd', 0, "data") || get_buf(o[3], &bufs[3], 'i', 1, "color") ||
        get_buf(o[4], &bufs[4], 'i', 1, "perm")) {
        release(bufs, 5);
        return NULL;
    }
    Py_ssize_t n = bufs[0].view.len / bufs[0].view.itemsize - 1;
    if (n < 1 || bs < 1 || bufs[3].view.itemsize != 4 || bufs[4].view.itemsize != 8 ||
        (p.grid[0] == 0 && bufs[3].view.len / 4 < (n + bs - 1) / bs) || bufs[4].view.len / 8 < n) {
        release(bufs, 5);
        return PyErr_Format(PyExc_ValueError, "need int32 color[nblocks] and int64 perm[n]");
    }
    bc_csr_in a = {n, 0, n, NULL, NULL, NULL, NULL, NULL};
    set_csr(&a, &bufs[0], &bufs[1], &bufs[2]);
    int used = bc_block_coloring(&a, &p, bufs[3].view.buf, (int)(bufs[3].view.len / 4),
                                 bufs[4].view.buf);
    release(bufs, 5);
    if (used < 0)
        return PyErr_Format(PyExc_ValueError, "invalid coloring arguments");
    return PyLong_FromLong(used);
}

PyDoc_STRVAR(ic0_doc, "ic0(indptr, indices, data, d, uptr, uidx, uval) -> float\n\n"
                      "IC(0) of a square matrix in its given order (one process, no\n"
                      "reordering): pivots d (float64[n]) and the strictly upper part of\n"
                      "the unit upper factor U in CSR (int64 uptr[n+1], int32 uidx,\n"
                      "float64 uval); M = U^T diag(d) U. Returns the diagonal shift used.");

static PyObject *py_ic0(PyObject *self, PyObject *args)
{
    PyObject *o[7];
    buf_t bufs[7];
    memset(bufs, 0, sizeof bufs);
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    if (get_buf(o[0], &bufs[0], 'i', 0, "indptr") || get_buf(o[1], &bufs[1], 'i', 0, "indices") ||
        get_buf(o[2], &bufs[2], 'd', 0, "data") || get_buf(o[3], &bufs[3], 'd', 1, "d") ||
        get_buf(o[4], &bufs[4], 'i', 1, "uptr") || get_buf(o[5], &bufs[5], 'i', 1, "uidx") ||
        get_buf(o[6], &bufs[6], 'd', 1, "uval")) {
        release(bufs, 7);
        return NULL;
    }
    Py_ssize_t n = bufs[0].view.len / bufs[0].view.itemsize - 1;
    Py_ssize_t nnz = bufs[2].view.len / 8;
    if (n < 1 || bufs[3].view.len / 8 < n || bufs[4].view.itemsize != 8 ||
        bufs[4].view.len / 8 < n + 1 || bufs[5].view.itemsize != 4 ||
        bufs[5].view.len / 4 < nnz || bufs[6].view.len / 8 < nnz) {
        release(bufs, 7);
        return PyErr_Format(PyExc_ValueError,
                            "need d[n], int64 uptr[n+1], int32 uidx[nnz], uval[nnz]");
    }
    bc_csr_in a = {n, 0, n, NULL, NULL, NULL, NULL, NULL};
    set_csr(&a, &bufs[0], &bufs[1], &bufs[2]);
    double shift;
    Py_BEGIN_ALLOW_THREADS
    shift = bc_ic0(&a, bufs[3].view.buf, bufs[4].view.buf, bufs[5].view.buf, bufs[6].view.buf);
    Py_END_ALLOW_THREADS
    release(bufs, 7);
    if (shift < 0)
        return PyErr_Format(PyExc_ArithmeticError, "IC(0) failed (bad arguments or no memory)");
    return PyFloat_FromDouble(shift);
}

PyDoc_STRVAR(poisson_doc, "poisson(nx, ny, nz, r0, r1, indptr=None, indices=None, data=None)\n\n"
                          "Without buffers: the number of nonzeros in rows [r0, r1) of the\n"
                          "3D 7-point Laplacian. With int64 indptr[r1-r0+1], int64\n"
                          "indices[nnz] and float64 data[nnz]: fill them (GIL released).");

static PyObject *py_poisson(PyObject *self, PyObject *args)
{
    long long nx, ny, nz, r0, r1;
    PyObject *o[3] = {NULL, NULL, NULL};
    buf_t bufs[3];
    memset(bufs, 0, sizeof bufs);
    (void)self;
    if (!PyArg_ParseTuple(args, "LLLLL|OOO", &nx, &ny, &nz, &r0, &r1, &o[0], &o[1], &o[2]))
        return NULL;
    if (nx < 1 || ny < 1 || nz < 1 || r0 < 0 || r1 < r0 || r1 > nx * ny * nz)
        return PyErr_Format(PyExc_ValueError, "need positive grid sizes and 0 <= r0 <= r1 <= n");
    bc_gidx nnz;
    Py_BEGIN_ALLOW_THREADS
    nnz = bc_poisson_nnz(nx, ny, nz, r0, r1);
    Py_END_ALLOW_THREADS
    if (o[0] == NULL)
        return PyLong_FromLongLong((long long)nnz);
    if (get_buf(o[0], &bufs[0], 'i', 1, "indptr") || get_buf(o[1], &bufs[1], 'i', 1, "indices") ||
        get_buf(o[2], &bufs[2], 'd', 1, "data")) {
        release(bufs, 3);
        return NULL;
    }
    if (bufs[0].view.itemsize != 8 || bufs[1].view.itemsize != 8 ||
        bufs[0].view.len / 8 < r1 - r0 + 1 || bufs[1].view.len / 8 < nnz ||
        bufs[2].view.len / 8 < nnz) {
        release(bufs, 3);
        return PyErr_Format(PyExc_ValueError, "need int64 indptr[rows+1], int64 indices[nnz], "
                                              "float64 data[nnz]");
    }
    Py_BEGIN_ALLOW_THREADS
    bc_poisson_fill(nx, ny, nz, r0, r1, bufs[0].view.buf, bufs[1].view.buf, bufs[2].view.buf);
    Py_END_ALLOW_THREADS
    release(bufs, 3);
    return PyLong_FromLongLong((long long)nnz);
}

PyDoc_STRVAR(release_doc, "release()\n\n"
                          "Return to the system the memory the solver keeps between solves\n"
                          "(the last setup's large arrays). Not while a solve runs.");

static PyObject *py_release(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    Py_BEGIN_ALLOW_THREADS
    bc_release();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_build_mpi(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    return mpi_build_dict();
}

static PyMethodDef methods[] = {
    {"solve", (PyCFunction)(void (*)(void))py_solve, METH_VARARGS | METH_KEYWORDS, solve_doc},
    {"coloring", (PyCFunction)(void (*)(void))py_coloring, METH_VARARGS | METH_KEYWORDS,
     coloring_doc},
    {"ic0", py_ic0, METH_VARARGS, ic0_doc},
    {"poisson", py_poisson, METH_VARARGS, poisson_doc},
    {"release", py_release, METH_NOARGS, release_doc},
    {"build_mpi", py_build_mpi, METH_NOARGS, "build_mpi() -> dict: the MPI compiled against."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_biccg",
                                    "Block IC(0)-preconditioned CG, multicolor, MPI x OpenMP.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__biccg(void)
{
    if (import_mpi4py() < 0)
        return NULL;
    return PyModule_Create(&module);
}
