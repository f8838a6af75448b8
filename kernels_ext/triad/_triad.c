/*
 * _triad.c - Python binding shim for the STREAM kernels in src/stream.c.
 * Argument checks, buffers and the GIL only: every loop lives in src/.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"

static const char *const FUNCTIONS[STREAM_NFUNC] = {"Copy", "Scale", "Add", "Triad"};
static const char *const PROC_BIND[] = {"false", "true", "primary", "close", "spread"};

/* A check as a dict; `covers`: the runs it validated together (1: its own). */
static PyObject *check_dict(const stream_check_t *chk, int ok, int covers)
{
    return Py_BuildValue(
        "{s:O,s:(ddd),s:(ddd),s:(nnn),s:d,s:i}", "validated", ok ? Py_True : Py_False,
        "expected", chk->expected[0], chk->expected[1], chk->expected[2], "avg_rel_error",
        chk->avg_rel[0], chk->avg_rel[1], chk->avg_rel[2], "bad_elements",
        (Py_ssize_t)chk->nbad[0], (Py_ssize_t)chk->nbad[1], (Py_ssize_t)chk->nbad[2],
        "epsilon", STREAM_EPSILON, "covers", covers);
}

static PyObject *raise_rc(int rc)
{
    if (rc == STREAM_ENOMEM)
        return PyErr_NoMemory();
    PyErr_SetString(PyExc_ValueError, "invalid STREAM arguments");
    return NULL;
}

static const char *const STORES[] = {"normal", "streaming"};

/* "normal" or "streaming" -> STREAM_STORES_*, or -1 with ValueError set. */
static int parse_stores(const char *name)
{
    for (int k = 0; k < 2; k++)
        if (strcmp(name, STORES[k]) == 0)
            return k;
    PyErr_Format(PyExc_ValueError, "stores must be 'normal' or 'streaming', not '%s'", name);
    return -1;
}

static PyObject *binding_list(const stream_thread *bind, int n)
{
    PyObject *list = PyList_New(n);
    for (int t = 0; list != NULL && t < n; t++) {
        PyObject *d = Py_BuildValue("{s:i,s:i,s:i,s:i,s:i}", "thread", bind[t].thread, "place",
                                    bind[t].place, "cpu_first", bind[t].cpu_first, "cpu_last",
                                    bind[t].cpu_last, "moves", bind[t].moves);
        if (d == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, t, d);
    }
    return list;
}

/* {function: [seconds a pass]}; with triad_only, the Triad's alone (the
 * others did not run). */
static PyObject *times_list(const double *times, int ntimes, int triad_only)
{
    PyObject *out = PyDict_New();
    for (int f = triad_only ? STREAM_NFUNC - 1 : 0; out != NULL && f < STREAM_NFUNC; f++) {
        PyObject *l = PyList_New(ntimes);
        for (int k = 0; l != NULL && k < ntimes; k++)
            PyList_SET_ITEM(l, k, PyFloat_FromDouble(times[(size_t)k * STREAM_NFUNC + f]));
        if (l == NULL || PyDict_SetItemString(out, FUNCTIONS[f], l) != 0)
            Py_CLEAR(out);
        Py_XDECREF(l);
    }
    return out;
}

/* One configuration of a series: its thread count and store policy in, its
 * results out. */
typedef struct {
    int threads, stores;          /* asked for */
    int team, used, ok;           /* the team it had, the policy used, validated */
    int covers;                   /* runs the check that validated it covered */
    double *times;                /* ntimes x STREAM_NFUNC */
    stream_thread *bind;          /* `slots` entries */
    int slots;
    stream_check_t chk;           /* expected: the values its own passes leave */
} series_run;

/* What the arrays hold: nothing known (a fill is due), a fill (a = 1, b = 2,
 * c = 0), or the validated values an earlier run's passes left. */
enum { HOLD_NOTHING, HOLD_FILL, HOLD_PASSES };

/* The arrays a series kept for the next (series(..., keep=True)), and what they
 * hold: a process that measures again, on its next request, pays neither
 * their first touch nor a fill. */
static struct {
    double *a, *b, *c;
    size_t n;
    int hold;
    double values[3];
} kept;

static void release_kept(void)
{
    stream_free(kept.a, kept.b, kept.c);
    memset(&kept, 0, sizeof kept);
}

/* A run goes on from the values the run before it left (no fill) while they
 * stay below this: 2 x 15^NTIMES a run, far from overflow (1e308). */
#define GO_ON_BELOW 1e150

/* Measure runs[0..count) in turn on one set of arrays, allocated (and first
 * touched) by the widest run's team, or those `kept` from the series before
 * when they are as large.  Each run goes on from the values the run before it
 * left (no fill: each run doubles a[] and makes its passes, as stream.c), and
 * one check after the last run validates them all (a wrong element any run
 * wrote is carried into the values checked); a check is also made, and the
 * arrays filled again, before the values pass GO_ON_BELOW.  With `fresh`, each
 * run gets arrays of its own, filled and checked on their own (where pages
 * must be placed by the team that streams them: more than one NUMA node).
 * With `keep` (and not `fresh`) the arrays, and what they hold, stay for the
 * next series and the team is put to sleep (stream_idle) before this returns.
 * Called without the GIL; returns STREAM_OK or the first error. */
static int series_measure(size_t n, int ntimes, int triad_only, series_run *runs, int count,
                          Py_ssize_t fault, int fresh, int keep)
{
    double *a = NULL, *b = NULL, *c = NULL;
    int rc = STREAM_OK, widest = 1; /* 0: the runtime's default, all CPUs */
    int hold = HOLD_NOTHING, chain = 0; /* chain: runs since the last check */
    double values[3] = {1.0, 2.0, 0.0};
    for (int i = 0; i < count && widest != 0; i++)
        if (runs[i].threads == 0 || runs[i].threads > widest)
            widest = runs[i].threads;
    stream_resume();
    if (kept.n == n && !fresh) {
        a = kept.a, b = kept.b, c = kept.c, hold = kept.hold;
        memcpy(values, kept.values, sizeof values);
        memset(&kept, 0, sizeof kept);
    } else {
        release_kept();
        if (!fresh) { /* one NUMA node: the widest team touches the pages first, fastest */
            rc = stream_alloc(n, widest, &a, &b, &c);
            hold = HOLD_FILL;
        }
    }
    for (int i = 0; rc == STREAM_OK && i < count; i++) {
        series_run *r = &runs[i];
        if (fresh) {
            stream_free(a, b, c);
            a = b = c = NULL;
            rc = stream_alloc(n, r->threads, &a, &b, &c);
            hold = HOLD_FILL;
        } else if (hold == HOLD_NOTHING) {
            stream_fill(a, b, c, n, r->threads);
            hold = HOLD_FILL;
        }
        if (rc != STREAM_OK)
            break;
        if (hold == HOLD_FILL)
            values[0] = 1.0, values[1] = 2.0, values[2] = 0.0;
        r->used = stream_stores_used(r->stores, a, b, c);
        rc = stream_run(a, b, c, n, r->threads, r->stores, ntimes, triad_only, r->times,
                        r->bind, r->slots, &r->team);
        if (rc != STREAM_OK)
            break;
        stream_expected_from(values, ntimes, triad_only, values);
        memcpy(r->chk.expected, values, sizeof values);
        hold = HOLD_PASSES;
        chain++;
        const int large = !(fabs(values[0]) < GO_ON_BELOW && fabs(values[1]) < GO_ON_BELOW &&
                            fabs(values[2]) < GO_ON_BELOW);
        /* a Triad alone rewrites all of a from b and c, which it never writes: a
         * wrong element of an earlier run is gone, so each such run is checked */
        if (fresh || large || triad_only || i == count - 1) {
            stream_check_t chk;
            if (fault >= 0)
                a[fault] = 0.0;
            const int ok = stream_check_against(a, b, c, n, values, widest, &chk) == STREAM_OK;
            for (int j = i - chain + 1; j <= i; j++) { /* each keeps its own expected */
                memcpy(runs[j].chk.avg_rel, chk.avg_rel, sizeof chk.avg_rel);
                memcpy(runs[j].chk.nbad, chk.nbad, sizeof chk.nbad);
                runs[j].ok = ok;
                runs[j].covers = chain;
            }
            if (!ok || large)
                hold = HOLD_NOTHING;
            chain = 0;
        }
    }
    if (keep && !fresh && rc == STREAM_OK) {
        kept.a = a, kept.b = b, kept.c = c, kept.n = n, kept.hold = hold;
        memcpy(kept.values, values, sizeof values);
        stream_idle(widest);
    } else {
        stream_free(a, b, c);
    }
    return rc;
}

static PyObject *run_dict(const series_run *r, int ntimes, int triad_only)
{
    return Py_BuildValue("{s:N,s:i,s:N,s:N,s:s}", "times",
                         times_list(r->times, ntimes, triad_only),
                         "threads", r->team, "binding",
                         binding_list(r->bind, r->team < r->slots ? r->team : r->slots),
                         "check", check_dict(&r->chk, r->ok, r->covers), "stores", STORES[r->used]);
}

PyDoc_STRVAR(series_doc,
             "series(size, ntimes, runs, fault_index=-1, fresh=False, keep=False,\n"
             "       triad_only=False)\n"
             "-> list\n\n"
             "Allocate three arrays of `size` doubles once and measure each of\n"
             "`runs`, a sequence of (threads, stores), in turn: run `ntimes` passes\n"
             "of the four STREAM kernels with that run's team (0 threads = runtime\n"
             "default) and `stores` ('normal' or 'streaming'), after doubling a as\n"
             "stream.c's timing check does. The first run starts from a fill (a = 1,\n"
             "b = 2, c = 0), each next one from the values the run before left (no\n"
             "fill: as stream.c's passes go on from each other), and one check\n"
             "after the last run compares the arrays with what all those passes make\n"
             "of the fill: a wrong element any run wrote is carried into them. Before\n"
             "the values pass 1e150 (or after a failed check) the runs so far are\n"
             "checked and the next starts from a fill. `fresh` gives each run arrays\n"
             "of its own, first touched, filled and checked by its own team (for\n"
             "machines with more than one NUMA node).\n"
             "The GIL is released meanwhile. Returns one dict per run: {'times':\n"
             "{function: [seconds per pass]}, 'threads': actual team size,\n"
             "'binding': [per-thread CPU/place], 'check': {'validated', 'expected':\n"
             "the values this run's passes leave, 'avg_rel_error' and 'bad_elements'\n"
             "of the check that validated it, 'covers': how many runs that check\n"
             "validated, this one the last or among them}, 'stores': the policy used\n"
             "(normal where the build has no streaming stores)}.\n"
             "fault_index >= 0 zeroes a[fault_index] before each check (a lost\n"
             "write), to prove the check catches it. `keep` (for a process that\n"
             "serves several series) keeps the arrays, and the values they hold, for\n"
             "the next series of the same size, which then pays neither their first\n"
             "touch nor a fill, and leaves the team asleep, not spinning, when this\n"
             "returns; release() frees them. `triad_only` runs each pass's Triad\n"
             "alone, without the doubling (24 of the 80 bytes an element a pass\n"
             "of the four moves; 'times' then holds the Triad's only; each run\n"
             "checked on its own, since a Triad rewrites all of a): the memory's\n"
             "rate measured beside another kernel.");

static PyObject *py_series(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"size",  "ntimes", "runs",      "fault_index",
                             "fresh", "keep",   "triad_only", NULL};
    Py_ssize_t size, fault = -1;
    int ntimes, fresh = 0, keep = 0, triad_only = 0;
    PyObject *seq_obj;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "niO|nppp", kwlist, &size, &ntimes, &seq_obj,
                                     &fault, &fresh, &keep, &triad_only))
        return NULL;
    PyObject *seq = PySequence_Fast(seq_obj, "runs must be a sequence of (threads, stores)");
    if (seq == NULL)
        return NULL;
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    if (size <= 0 || ntimes < 2 || fault >= size || count < 1 || count > 4096) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "need size > 0, ntimes >= 2, fault_index < size "
                                          "and 1 to 4096 runs");
        return NULL;
    }
    series_run *runs = calloc((size_t)count, sizeof(series_run));
    PyObject *result = NULL;
    int rc = STREAM_OK;
    if (runs == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        const char *stores_name;
        series_run *r = &runs[i];
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "runs: (threads, stores) tuples");
            goto done;
        }
        if (!PyArg_ParseTuple(item, "is;runs: (threads, stores) tuples", &r->threads,
                              &stores_name) ||
            (r->stores = parse_stores(stores_name)) < 0)
            goto done;
        if (r->threads < 0) {
            PyErr_SetString(PyExc_ValueError, "need threads >= 0");
            goto done;
        }
        /* One binding slot per possible thread: the team is at most the thread
         * limit the runtime was asked for, or the CPUs, whichever is larger. */
        r->slots = r->threads > 0 ? r->threads : 4096;
        r->times = malloc((size_t)ntimes * STREAM_NFUNC * sizeof(double));
        r->bind = calloc((size_t)r->slots, sizeof(stream_thread));
        if (r->times == NULL || r->bind == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    rc = series_measure((size_t)size, ntimes, triad_only, runs, (int)count, fault, fresh, keep);
    Py_END_ALLOW_THREADS
    if (rc != STREAM_OK) {
        raise_rc(rc);
        goto done;
    }
    result = PyList_New(count);
    for (Py_ssize_t i = 0; result != NULL && i < count; i++) {
        PyObject *d = run_dict(&runs[i], ntimes, triad_only);
        if (d == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, d);
    }
done:
    for (Py_ssize_t i = 0; i < count; i++) {
        free(runs[i].times);
        free(runs[i].bind);
    }
    free(runs);
    Py_DECREF(seq);
    return result;
}

/* Borrow three equal-length, C-contiguous float64 buffers (writable if asked). */
static int get_arrays(PyObject *obj[3], Py_buffer buf[3], int ntimes, int writable)
{
    int got = 0;
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    for (; got < 3; got++)
        if (PyObject_GetBuffer(obj[got], &buf[got], flags) != 0)
            goto fail;
    for (int i = 0; i < 3; i++) {
        if ((uintptr_t)buf[i].buf % sizeof(double) != 0) {
            PyErr_SetString(PyExc_ValueError, "a, b, c must be 8-byte aligned float64 buffers");
            goto fail;
        }
        if (buf[i].itemsize != sizeof(double) || buf[i].format == NULL ||
            buf[i].format[0] != 'd' || buf[i].len != buf[0].len || buf[i].len == 0) {
            PyErr_SetString(PyExc_ValueError,
                            "a, b, c must be non-empty contiguous float64 buffers of one length");
            goto fail;
        }
    }
    if (ntimes < 0) {
        PyErr_SetString(PyExc_ValueError, "ntimes must be >= 0");
        goto fail;
    }
    return 0;
fail:
    while (got-- > 0)
        PyBuffer_Release(&buf[got]);
    return -1;
}

static void release_arrays(Py_buffer buf[3])
{
    for (int i = 0; i < 3; i++)
        PyBuffer_Release(&buf[i]);
}

PyDoc_STRVAR(check_doc,
             "check(a, b, c, ntimes=None, expected=None, threads=0) -> dict\n\n"
             "STREAM's checkSTREAMresults on three equal-length float64 buffers,\n"
             "against the values `ntimes` passes leave after a fill, or against\n"
             "`expected` (a, b, c) from expected(): exactly one of the two. Reads\n"
             "with `threads` OpenMP threads (0: the runtime's default). Returns\n"
             "{'validated', 'expected', 'avg_rel_error', 'bad_elements', 'epsilon',\n"
             "'covers': 1}.");

static PyObject *py_check(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"a", "b", "c", "ntimes", "expected", "threads", NULL};
    PyObject *obj[3], *ntimes_obj = Py_None, *expected_obj = Py_None;
    Py_buffer buf[3];
    int rc, threads = 0;
    double e[3];
    stream_check_t chk;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OOi", kwlist, &obj[0], &obj[1], &obj[2],
                                     &ntimes_obj, &expected_obj, &threads))
        return NULL;
    if ((ntimes_obj == Py_None) == (expected_obj == Py_None) || threads < 0) {
        PyErr_SetString(PyExc_ValueError, "check: give ntimes or expected, not both, "
                                          "and threads >= 0");
        return NULL;
    }
    if (expected_obj == Py_None) {
        const long ntimes = PyLong_AsLong(ntimes_obj);
        if (ntimes == -1 && PyErr_Occurred())
            return NULL;
        if (ntimes < 0 || ntimes > INT_MAX) {
            PyErr_SetString(PyExc_ValueError, "ntimes must be >= 0");
            return NULL;
        }
        stream_expected((int)ntimes, e);
    } else if (!PyArg_ParseTuple(expected_obj, "ddd;expected: (a, b, c) floats", &e[0], &e[1],
                                 &e[2])) {
        return NULL;
    }
    if (get_arrays(obj, buf, 0, 0) != 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = stream_check_against(buf[0].buf, buf[1].buf, buf[2].buf,
                              (size_t)(buf[0].len / sizeof(double)), e, threads, &chk);
    Py_END_ALLOW_THREADS
    release_arrays(buf);
    return rc == STREAM_EINVAL ? raise_rc(rc) : check_dict(&chk, rc == STREAM_OK, 1);
}

PyDoc_STRVAR(expected_doc,
             "expected(ntimes, start=(1.0, 2.0, 0.0), triad_only=False) -> (a, b, c)\n\n"
             "The values the arrays hold after a run (a doubled, then `ntimes`\n"
             "passes; with triad_only, `ntimes` Triads alone) on arrays that held\n"
             "`start`: a fill, or what an earlier run left, which the run goes on\n"
             "from. Fed its own result, it follows a series.");

static PyObject *py_expected(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ntimes", "start", "triad_only", NULL};
    double start[3] = {1.0, 2.0, 0.0}, e[3];
    int ntimes, triad_only = 0;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|(ddd)p", kwlist, &ntimes, &start[0],
                                     &start[1], &start[2], &triad_only))
        return NULL;
    if (ntimes < 0) {
        PyErr_SetString(PyExc_ValueError, "ntimes must be >= 0");
        return NULL;
    }
    stream_expected_from(start, ntimes, triad_only, e);
    return Py_BuildValue("(ddd)", e[0], e[1], e[2]);
}

PyDoc_STRVAR(passes_doc,
             "passes(a, b, c, ntimes, threads=0, stores='normal', triad_only=False)\n"
             "-> dict\n\n"
             "Run stream_run on caller-owned float64 arrays, in place: a is doubled,\n"
             "then ntimes passes of Copy, Scale, Add, Triad (with triad_only, no\n"
             "doubling and ntimes Triads alone). For tests against NumPy (any\n"
             "alignment, any length). Returns {'times': {...}, 'threads': team\n"
             "size, 'stores': the policy used}.");

static PyObject *py_passes(PyObject *self, PyObject *args)
{
    PyObject *obj[3];
    Py_buffer buf[3];
    int ntimes, threads = 0, team = 0, rc, stores, triad_only = 0;
    const char *stores_name = "normal";
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOi|isp", &obj[0], &obj[1], &obj[2], &ntimes, &threads,
                          &stores_name, &triad_only) ||
        (stores = parse_stores(stores_name)) < 0 || get_arrays(obj, buf, ntimes, 1) != 0)
        return NULL;
    if (ntimes < 2 || threads < 0) {
        release_arrays(buf);
        PyErr_SetString(PyExc_ValueError, "need ntimes >= 2 and threads >= 0");
        return NULL;
    }
    double *times = malloc((size_t)ntimes * STREAM_NFUNC * sizeof(double));
    if (times == NULL) {
        release_arrays(buf);
        return PyErr_NoMemory();
    }
    const int used = stream_stores_used(stores, buf[0].buf, buf[1].buf, buf[2].buf);
    Py_BEGIN_ALLOW_THREADS
    rc = stream_run(buf[0].buf, buf[1].buf, buf[2].buf, (size_t)(buf[0].len / sizeof(double)),
                    threads, stores, ntimes, triad_only, times, NULL, 0, &team);
    Py_END_ALLOW_THREADS
    release_arrays(buf);
    PyObject *result = rc != STREAM_OK ? raise_rc(rc)
                                       : Py_BuildValue("{s:N,s:i,s:s}", "times",
                                                       times_list(times, ntimes, triad_only),
                                                       "threads", team,
                                                       "stores", STORES[used]);
    free(times);
    return result;
}

static const char *compiler_string(void)
{
#if defined(__INTEL_LLVM_COMPILER)
    return "icx " __VERSION__;
#elif defined(__INTEL_COMPILER)
    return "icc " __VERSION__;
#elif defined(__NVCOMPILER)
    return "nvc " __VERSION__;
#elif defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__GNUC__)
    return "gcc " __VERSION__;
#else
    return "unknown";
#endif
}

PyDoc_STRVAR(info_doc,
             "info() -> dict\n\n"
             "How this module was built and which OpenMP runtime it runs on:\n"
             "compiler (from its predefined macros), openmp (the _OPENMP date),\n"
             "openmp_library (file of the runtime), proc_bind, num_places,\n"
             "places (processor ids of each place), timer_resolution_s,\n"
             "streaming_isa (the streaming stores' instructions, None without).");

static PyObject *py_info(PyObject *self, PyObject *noargs)
{
    char lib[1024];
    int bind, nplaces, ids[1024];
    (void)self, (void)noargs;
    int version = stream_openmp(lib, sizeof lib, &bind, &nplaces);
    PyObject *places = PyList_New(0);
    for (int p = 0; places != NULL && p < nplaces; p++) {
        int count = stream_place_procs(p, ids, 1024);
        PyObject *l = PyList_New(0);
        for (int i = 0; l != NULL && i < count && i < 1024; i++) {
            PyObject *v = PyLong_FromLong(ids[i]);
            if (v == NULL || PyList_Append(l, v) != 0)
                Py_CLEAR(l);
            Py_XDECREF(v);
        }
        if (l == NULL || PyList_Append(places, l) != 0)
            Py_CLEAR(places);
        Py_XDECREF(l);
    }
    const char *bind_name = bind >= 0 && bind <= 4 ? PROC_BIND[bind] : "unknown";
    return Py_BuildValue("{s:s,s:i,s:s,s:s,s:i,s:N,s:d,s:z}", "compiler", compiler_string(),
                         "openmp", version, "openmp_library", lib, "proc_bind", bind_name,
                         "num_places", nplaces, "places", places, "timer_resolution_s",
                         stream_timer_resolution(), "streaming_isa", stream_streaming_isa());
}

PyDoc_STRVAR(release_doc, "release() -> None\n\n"
                           "Free the arrays series(..., keep=True) kept (none: nothing).");

static PyObject *py_release(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    release_kept();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"series", (PyCFunction)(void (*)(void))py_series, METH_VARARGS | METH_KEYWORDS,
     series_doc},
    {"release", py_release, METH_NOARGS, release_doc},
    {"check", (PyCFunction)(void (*)(void))py_check, METH_VARARGS | METH_KEYWORDS, check_doc},
    {"expected", (PyCFunction)(void (*)(void))py_expected, METH_VARARGS | METH_KEYWORDS,
     expected_doc},
    {"passes", py_passes, METH_VARARGS, passes_doc},
    {"info", py_info, METH_NOARGS, info_doc},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_triad",
                                    "STREAM Copy/Scale/Add/Triad kernels (OpenMP).", -1, methods};

PyMODINIT_FUNC PyInit__triad(void)
{
    PyObject *m = PyModule_Create(&module);
    /* the bound the baselines' series (baselines._series) go on below, too */
    PyObject *bound = PyFloat_FromDouble(GO_ON_BELOW);
    if (m == NULL || bound == NULL || PyModule_AddObject(m, "GO_ON_BELOW", bound) != 0) {
        Py_XDECREF(bound);
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
