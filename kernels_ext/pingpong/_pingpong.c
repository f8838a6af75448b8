/*
 * _pingpong.c - Python binding shim for src/pingpong.c.  Takes the
 * communicator from mpi4py through its C API (import_mpi4py, PyMPIComm_Get);
 * argument conversion, the GIL and error codes only.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <mpi.h>
#include <mpi4py/mpi4py.h>
#include <stdlib.h>
#include <string.h>

#include "../common/mpi_build.h"
#include "pingpong.h"

static const char *const TESTS[] = {"latency", "bw", "bibw"};

PyDoc_STRVAR(run_doc,
             "run(comm, test, sizes, iterations, skip, iterations_large, skip_large,\n"
             "    window, large_size=8192, validate=False, hugepages=False) -> list[dict]\n\n"
             "Collective over `comm` (an mpi4py communicator of exactly 2 ranks): measure\n"
             "`test` ('latency', 'bw' or 'bibw') for each message size in bytes, by the\n"
             "OSU 7.x methods, with the GIL released. One dict per size on every rank:\n"
             "size, value (latency: one-way microseconds; bw/bibw: bytes per second, on\n"
             "rank 0), seconds, iterations, skip, window, errors (validation).\n"
             "Raises ValueError for bad arguments or a communicator not of 2 ranks.");

static PyObject *py_run(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"comm",       "test",   "sizes",      "iterations",
                             "skip",       "iterations_large",      "skip_large",
                             "window",     "large_size", "validate", "hugepages", NULL};
    PyObject *comm_obj, *sizes_obj;
    const char *test_name;
    pp_params p = {0, 0, 0, 0, 1, 8192, 0, 0};
    Py_ssize_t large = 8192;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OsOiiiii|npp", kwlist, &comm_obj, &test_name,
                                     &sizes_obj, &p.iterations, &p.skip, &p.iterations_large,
                                     &p.skip_large, &p.window, &large, &p.validate,
                                     &p.hugepages))
        return NULL;
    MPI_Comm *comm = PyMPIComm_Get(comm_obj);
    if (comm == NULL)
        return NULL;
    int test = -1;
    for (int t = 0; t < 3; t++)
        if (strcmp(test_name, TESTS[t]) == 0)
            test = t;
    if (test < 0 || large < 0) {
        PyErr_Format(PyExc_ValueError, "unknown test '%s' (latency, bw, bibw)", test_name);
        return NULL;
    }
    p.large_size = (size_t)large;

    PyObject *seq = PySequence_Fast(sizes_obj, "sizes must be a sequence of integers");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t *sizes = malloc((size_t)(n > 0 ? n : 1) * sizeof(size_t));
    pp_result *res = calloc((size_t)(n > 0 ? n : 1), sizeof(pp_result));
    if (sizes == NULL || res == NULL) {
        Py_DECREF(seq);
        free(sizes);
        free(res);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if ((v == -1 && PyErr_Occurred()) || v < 0 || v > INT_MAX) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "message sizes must be 0 .. INT_MAX bytes");
            Py_DECREF(seq);
            free(sizes);
            free(res);
            return NULL;
        }
        sizes[i] = (size_t)v;
    }
    Py_DECREF(seq);

    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pp_run(*comm, test, sizes, (int)n, &p, res);
    Py_END_ALLOW_THREADS
    free(sizes);

    PyObject *out = NULL;
    if (rc == PP_ESIZE)
        PyErr_SetString(PyExc_ValueError, "the ping-pong needs exactly 2 MPI ranks");
    else if (rc == PP_EINVAL)
        PyErr_SetString(PyExc_ValueError, "invalid ping-pong arguments");
    else if (rc == PP_ENOMEM)
        PyErr_NoMemory();
    else if (rc != PP_OK)
        PyErr_SetString(PyExc_RuntimeError, "an MPI call failed during the ping-pong");
    else if ((out = PyList_New(n)) != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *d = Py_BuildValue(
                "{s:n,s:d,s:d,s:i,s:i,s:i,s:l}", "size", (Py_ssize_t)res[i].size, "value",
                res[i].value, "seconds", res[i].seconds, "iterations", res[i].iterations, "skip",
                res[i].skip, "window", res[i].window, "errors", res[i].errors);
            if (d == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i, d);
        }
    }
    free(res);
    return out;
}

PyDoc_STRVAR(build_doc, "build_mpi() -> dict\n\n"
                        "The MPI this module was compiled against: family ('mpich' ABI or\n"
                        "'openmpi') and version, from the MPI headers' macros.");

static PyObject *py_build_mpi(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    return mpi_build_dict();
}

static PyObject *py_cpu(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    return PyLong_FromLong(pp_cpu());
}

static PyMethodDef methods[] = {
    {"run", (PyCFunction)(void (*)(void))py_run, METH_VARARGS | METH_KEYWORDS, run_doc},
    {"build_mpi", py_build_mpi, METH_NOARGS, build_doc},
    {"cpu", py_cpu, METH_NOARGS, "cpu() -> int: the CPU this thread runs on now."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pingpong",
                                    "MPI ping-pong by the OSU 7.x methods.", -1, methods};

PyMODINIT_FUNC PyInit__pingpong(void)
{
    if (import_mpi4py() < 0)
        return NULL;
    return PyModule_Create(&module);
}
