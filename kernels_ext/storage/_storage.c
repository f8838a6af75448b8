/*
 * _storage.c - Python binding shim for storage.c: the communicator from
 * mpi4py's C API, arguments in, the GIL released while the storage is
 * measured, SIGINT and SIGTERM turned into sb_interrupt meanwhile (so a run
 * stops between two transfers and cleans up), results and errors out as
 * dicts.  No loops over data here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <mpi.h>
#include <mpi4py/mpi4py.h>
#include <signal.h>
#include <string.h>

#include "../common/mpi_build.h"
#include "storage.h"

static void on_signal(int signum)
{
    sb_interrupt = signum;
}

PyDoc_STRVAR(run_doc,
             "run(comm, api, dir, name, xfer, block, segments, iterations, *,\n"
             "    file_per_process, collective, direct, fsync, reorder, keep, write, read,\n"
             "    drop, align) -> (code, phases, info, error)\n\n"
             "Collective over `comm` (an mpi4py communicator): IOR's write and/or read\n"
             "phases, with the GIL released; SIGINT and SIGTERM stop it between two\n"
             "transfers. api: 'posix', 'mpiio' or 'gfarm'; sizes in bytes; drop: 0 none,\n"
             "1 posix_fadvise, 2 /proc/sys/vm/drop_caches. code: 0 ok, else 1 bad argument,\n"
             "2 no memory, 3 I/O error, 4 wrong data, 5 signal, 6 files not as the layout;\n"
             "phases: one dict per phase (op, iteration, bytes, total_s, transfer_s, open_s,\n"
             "close_s, check_s, check_wait_s, resident, drop); info: nodes, ranks_per_node,\n"
             "shift; error: None, or rank, errnum, op, iteration, offset, call, path, text.\n"
             "Every rank returns the same code and error.");

static int api_of(const char *name)
{
    for (int a = 0; a < SB_NAPI; a++)
        if (strcmp(name, sb_api_name(a)) == 0)
            return a;
    return -1;
}

static PyObject *py_run(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"comm",       "api",     "dir",      "name",  "xfer",
                             "block",      "segments", "iterations", "file_per_process",
                             "collective", "direct",  "fsync",    "reorder", "keep",
                             "write",      "read",    "drop",     "align", NULL};
    PyObject *comm_obj;
    const char *api_name;
    long long xfer, block, segments;
    Py_ssize_t align = 4096;
    sb_params p;
    memset(&p, 0, sizeof p);
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OsssLLLi|$ppppppppin", kwlist, &comm_obj,
                                     &api_name, &p.dir, &p.name, &xfer, &block, &segments,
                                     &p.iterations, &p.file_per_process, &p.collective,
                                     &p.direct, &p.fsync, &p.reorder, &p.keep, &p.write,
                                     &p.read, &p.drop, &align))
        return NULL;
    MPI_Comm *comm = PyMPIComm_Get(comm_obj);
    if (comm == NULL)
        return NULL;
    p.api = api_of(api_name);
    if (p.api < 0) {
        PyErr_Format(PyExc_ValueError, "unknown api '%s' (posix, mpiio, gfarm)", api_name);
        return NULL;
    }
    if (align < 8) {
        PyErr_SetString(PyExc_ValueError, "align must be at least 8 bytes");
        return NULL;
    }
    p.xfer = xfer, p.block = block, p.segments = segments, p.align = (size_t)align;
    int max_out = 2 * (p.iterations > 0 ? p.iterations : 1);
    sb_phase *out = PyMem_RawCalloc((size_t)max_out, sizeof *out);
    if (out == NULL)
        return PyErr_NoMemory();
    sb_info info = {0, 0, 0};
    sb_error err;
    int nout = 0, rc;
    struct sigaction act, old_int, old_term;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_signal;
    sigemptyset(&act.sa_mask);
    act.sa_flags = SA_RESTART; /* a disk read or write goes on; the flag is read after it */
    sb_interrupt = 0;
    sigaction(SIGINT, &act, &old_int);
    sigaction(SIGTERM, &act, &old_term);
    Py_BEGIN_ALLOW_THREADS
    rc = sb_run(*comm, &p, out, max_out, &nout, &info, &err);
    Py_END_ALLOW_THREADS
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);

    PyObject *phases = PyList_New(0), *error = NULL, *result = NULL;
    for (int i = 0; phases && i < nout; i++) {
        sb_phase *ph = &out[i];
        PyObject *d = Py_BuildValue(
            "{s:s,s:i,s:L,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:i}", "op",
            ph->op == SB_WRITE ? "write" : "read", "iteration", ph->iteration, "bytes",
            (long long)ph->bytes, "total_s", ph->total_s, "transfer_s", ph->transfer_s, "open_s",
            ph->open_s, "close_s", ph->close_s, "check_s", ph->check_s, "check_wait_s",
            ph->check_wait_s, "resident",
            ph->resident, "drop", ph->drop);
        if (d == NULL || PyList_Append(phases, d) != 0)
            Py_CLEAR(phases);
        Py_XDECREF(d);
    }
    PyMem_RawFree(out);
    if (phases == NULL)
        return NULL;
    if (rc == SB_OK) {
        error = Py_NewRef(Py_None);
    } else {
        error = Py_BuildValue("{s:i,s:i,s:s,s:i,s:L,s:s,s:s,s:s}", "rank", err.rank, "errnum",
                              err.errnum, "op", err.op == SB_WRITE ? "write" : "read",
                              "iteration", err.iteration, "offset", (long long)err.offset,
                              "call", err.call, "path", err.path, "text", err.text);
    }
    if (error != NULL)
        result = Py_BuildValue("(iO{s:i,s:i,s:i}O)", rc, phases, "nodes", info.nodes,
                               "ranks_per_node", info.ranks_per_node, "shift", info.shift,
                               error);
    Py_DECREF(phases);
    Py_XDECREF(error);
    return result;
}

static PyObject *py_apis(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    PyObject *out = PyList_New(0);
    for (int a = 0; out && a < SB_NAPI; a++) {
        if (!sb_api_built(a))
            continue;
        PyObject *s = PyUnicode_FromString(sb_api_name(a));
        if (s == NULL || PyList_Append(out, s) != 0)
            Py_CLEAR(out);
        Py_XDECREF(s);
    }
    return out;
}

static PyObject *py_statfs(PyObject *self, PyObject *args)
{
    const char *path;
    int64_t magic = 0, bsize = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "s", &path))
        return NULL;
    int rc = sb_statfs(path, &magic, &bsize);
    if (rc != 0) {
        errno = rc;
        return PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
    }
    return Py_BuildValue("(LL)", (long long)magic, (long long)bsize);
}

static PyObject *py_gfarm_check(PyObject *self, PyObject *args)
{
    const char *url;
    char msg[512] = "";
    int rc;
    (void)self;
    if (!PyArg_ParseTuple(args, "s", &url))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = sb_gfarm_check(url, msg, sizeof msg);
    Py_END_ALLOW_THREADS
    if (rc == 0)
        Py_RETURN_NONE;
    return PyUnicode_FromString(msg);
}

static PyObject *py_build_mpi(PyObject *self, PyObject *noargs)
{
    (void)self, (void)noargs;
    return mpi_build_dict();
}

static PyMethodDef methods[] = {
    {"run", (PyCFunction)(void (*)(void))py_run, METH_VARARGS | METH_KEYWORDS, run_doc},
    {"backends", py_apis, METH_NOARGS,
     "backends() -> list[str]: the I/O interfaces compiled in (posix, mpiio[, gfarm])."},
    {"statfs", py_statfs, METH_VARARGS,
     "statfs(path) -> (f_type, f_bsize): the file system's magic number and block size."},
    {"gfarm_check", py_gfarm_check, METH_VARARGS,
     "gfarm_check(url) -> None, or why the Gfarm folder cannot be used (one line).\n"
     "libgfarm retries an absent metadata server for about a minute: probe it first."},
    {"build_mpi", py_build_mpi, METH_NOARGS,
     "build_mpi() -> dict: the MPI this module was compiled against."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_storage",
                                    "File system bandwidth by IOR's method.", -1, methods};

PyMODINIT_FUNC PyInit__storage(void)
{
    if (import_mpi4py() < 0)
        return NULL;
    return PyModule_Create(&module);
}
