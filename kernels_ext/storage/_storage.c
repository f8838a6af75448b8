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
             "transfers. api: a name backends() lists (else ValueError); sizes in bytes;\n"
             "drop: 0 none, 1 posix_fadvise, 2 /proc/sys/vm/drop_caches. code: 0 ok, else\n"
             "1 bad argument, 2 no memory, 3 I/O error, 4 wrong data, 5 signal, 6 files not\n"
             "as the layout; phases: one dict per phase (op, iteration, bytes, total_s,\n"
             "transfer_s, open_s, close_s, check_s, check_wait_s, resident, drop); info:\n"
             "nodes, ranks_per_node, shift; error: None, or rank, errnum, op, iteration,\n"
             "offset, call, path, text.\n"
             "Every rank returns the same code and error.");

/* ValueError naming `api` and the interfaces compiled in, unless it is one of them: 0, or -1
 * with the exception set. */
static int check_api(const char *api)
{
    char built[128] = "";
    const char *name;
    size_t n = 0;
    for (int i = 0; (name = sb_backend_name(i)) != NULL; i++) {
        if (strcmp(name, api) == 0)
            return 0;
        n += (size_t)snprintf(built + n, n < sizeof built ? sizeof built - n : 0, "%s%s",
                              i ? ", " : "", name);
    }
    PyErr_Format(PyExc_ValueError, "api '%s' is not built into this kernel (built: %s)", api,
                 built);
    return -1;
}

static PyObject *py_run(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"comm",       "api",     "dir",      "name",  "xfer",
                             "block",      "segments", "iterations", "file_per_process",
                             "collective", "direct",  "fsync",    "reorder", "keep",
                             "write",      "read",    "drop",     "align", NULL};
    PyObject *comm_obj;
    long long xfer, block, segments;
    Py_ssize_t align = 4096;
    sb_params p;
    memset(&p, 0, sizeof p);
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OsssLLLi|$ppppppppin", kwlist, &comm_obj,
                                     &p.api, &p.dir, &p.name, &xfer, &block, &segments,
                                     &p.iterations, &p.file_per_process, &p.hints.collective,
                                     &p.hints.direct, &p.fsync, &p.reorder, &p.keep, &p.write,
                                     &p.read, &p.drop, &align))
        return NULL;
    MPI_Comm *comm = PyMPIComm_Get(comm_obj);
    if (comm == NULL)
        return NULL;
    if (check_api(p.api) < 0)
        return NULL;
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
    const char *name;
    for (int i = 0; out && (name = sb_backend_name(i)) != NULL; i++) {
        PyObject *s = PyUnicode_FromString(name);
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

static PyObject *py_check_dir(PyObject *self, PyObject *args)
{
    const char *api, *dir;
    char msg[512] = "";
    int rc;
    (void)self;
    if (!PyArg_ParseTuple(args, "ss", &api, &dir) || check_api(api) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = sb_check_dir(api, dir, msg, sizeof msg);
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
    {"check_dir", py_check_dir, METH_VARARGS,
     "check_dir(api, dir) -> None, or why the interface's library cannot use the folder\n"
     "(one line; gfarm: libgfarm stats gfarm:///dir, posix and mpiio: None). ValueError for\n"
     "an api not built. libgfarm retries an absent metadata server for about a minute:\n"
     "probe it first."},
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
