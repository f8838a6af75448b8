"""Python-only STREAM baselines, measured beside the C kernels in the same sweep.

* ``numba``: the four kernels as ``prange`` loops (``@njit(parallel=True)``),
  arrays initialised in parallel with the same chunking as the kernels;
* ``numpy``: the expressions a NumPy user writes, e.g. ``a[:] = b + s*c``.
  NumPy runs them on one thread and makes temporaries, so it moves more bytes
  than STREAM counts; it is counted as STREAM counts, which is the point of
  the comparison.

Both return the same raw result as the C shim's ``run`` (times per function
and pass, team size, binding, check) and are validated by the same C check.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable

import numpy as np

FUNCTIONS = ("Copy", "Scale", "Add", "Triad")
SCALAR = 3.0

_libc = ctypes.CDLL(None, use_errno=True)
_sched_getcpu = _libc.sched_getcpu
_sched_getcpu.restype = ctypes.c_int
_sched_getcpu.argtypes = ()


def current_cpu() -> int:
    """The CPU the calling thread runs on now (-1 when unknown)."""
    return int(_sched_getcpu())


#: The arrays a call with keep=True left for the next call of their size (one process
#: measures one baseline: numba_series's, or numpy_stream's).
_KEPT: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _arrays(size: int, keep: bool,
            touch: Callable[[tuple[np.ndarray, np.ndarray, np.ndarray]], None] | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three arrays of `size`: those a call with keep=True left, else new ones (first
    touched by `touch`); kept for the next call where `keep`, else dropped."""
    kept = _KEPT.pop(size, None)
    _KEPT.clear()
    if kept is None:
        kept = np.empty(size), np.empty(size), np.empty(size)
        if touch is not None:
            touch(kept)
    if keep:
        _KEPT[size] = kept
    return kept


def _check(a: np.ndarray, b: np.ndarray, c: np.ndarray, ntimes: int) -> dict:
    from kernels_ext.triad import _triad  # the installed build: same check as the C kernels

    return _triad.check(a, b, c, ntimes)


def _passes(kernels: Callable[[], None], ntimes: int, sample: Callable[[int], None]) -> dict:
    times: dict[str, list[float]] = {f: [] for f in FUNCTIONS}
    for k in range(ntimes):
        for name, fn in zip(FUNCTIONS, kernels):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
        sample(k)
    return times


def _binding_tracker(nthreads: int, where: Callable[[], np.ndarray]):
    binding = [
        {"thread": t, "place": -1, "cpu_first": -1, "cpu_last": -1, "moves": 0}
        for t in range(nthreads)
    ]

    def sample(k: int) -> None:
        cpus = where()
        for t, cpu in enumerate(cpus[:nthreads]):
            b = binding[t]
            if k == 0:
                b["cpu_first"] = int(cpu)
            elif cpu != b["cpu_last"]:
                b["moves"] += 1
            b["cpu_last"] = int(cpu)

    return binding, sample


def numpy_stream(size: int, ntimes: int, fault_index: int = -1, keep: bool = False) -> dict:
    """STREAM with NumPy expressions on one thread (`keep`: the arrays, not the
    expressions' temporaries, stay for the next call of this size)."""
    a, b, c = _arrays(size, keep)
    a.fill(1.0)
    b.fill(2.0)
    c.fill(0.0)
    s = SCALAR
    a[:] = 2.0 * a  # stream.c's timing check

    def copy() -> None:
        c[:] = a

    def scale() -> None:
        b[:] = s * c

    def add() -> None:
        c[:] = a + b

    def triad() -> None:
        a[:] = b + s * c

    binding, sample = _binding_tracker(1, lambda: np.array([current_cpu()]))
    times = _passes((copy, scale, add, triad), ntimes, sample)
    if fault_index >= 0:
        a[fault_index] = 0.0
    return {"times": times, "threads": 1, "binding": binding, "check": _check(a, b, c, ntimes)}


def numba_series(size: int, ntimes: int, threads: list[int], fault_index: int = -1,
                 keep: bool = False) -> list[dict]:
    """STREAM as numba ``prange`` loops, once per thread count of `threads` in turn, on
    arrays allocated once; each count's team fills them afresh before its passes (as
    the C kernels' series). `keep`: the arrays stay for the next call of this size."""
    import numba

    k = _numba_kernels()

    def touch(arrays: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        numba.set_num_threads(max(threads))  # the widest team touches the pages first
        k["init"](*arrays)

    a, b, c = _arrays(size, keep, touch)
    s = SCALAR
    out = []
    for count in threads:
        numba.set_num_threads(count)
        k["init"](a, b, c)
        k["double"](a)  # stream.c's timing check
        team = numba.get_num_threads()
        cpus = np.full(max(team, 1), -1, dtype=np.int64)

        def where(cpus: np.ndarray = cpus) -> np.ndarray:
            cpus[:] = -1
            k["where"](cpus)
            return cpus

        binding, sample = _binding_tracker(team, where)
        kernels = (
            lambda: k["copy"](a, c),
            lambda: k["scale"](b, c, s),
            lambda: k["add"](a, b, c),
            lambda: k["triad"](a, b, c, s),
        )
        times = _passes(kernels, ntimes, sample)
        if fault_index >= 0:
            a[fault_index] = 0.0
        out.append({"times": times, "threads": team, "binding": binding,
                    "check": _check(a, b, c, ntimes),
                    "threading_layer": numba.threading_layer(),
                    "numba_version": numba.__version__})
    return out


_KERNELS: dict = {}
_GETCPU = None  # numba's declaration of libc's sched_getcpu, made with the kernels


def _numba_kernels() -> dict:
    """Compile (or load from numba's cache) the numba kernels once per process."""
    if _KERNELS:
        return _KERNELS
    from numba import get_thread_id, njit, prange, types

    jit = njit(parallel=True, cache=True)

    @jit
    def init(a, b, c):
        for j in prange(a.size):
            a[j] = 1.0
            b[j] = 2.0
            c[j] = 0.0

    @jit
    def double(a):
        for j in prange(a.size):
            a[j] = 2.0 * a[j]

    @jit
    def copy(a, c):
        for j in prange(a.size):
            c[j] = a[j]

    @jit
    def scale(b, c, s):
        for j in prange(b.size):
            b[j] = s * c[j]

    @jit
    def add(a, b, c):
        for j in prange(c.size):
            c[j] = a[j] + b[j]

    @jit
    def triad(a, b, c, s):
        for j in prange(a.size):
            a[j] = b[j] + s * c[j]

    # libc's sched_getcpu by name, a module global: a ctypes pointer, or the same object
    # as a closure variable, would make every process miss the cache and compile (0.4 s)
    global _GETCPU
    _GETCPU = types.ExternalFunction("sched_getcpu", types.int32())

    @jit
    def where(out):
        for _ in prange(out.size * 256):
            out[get_thread_id()] = _GETCPU()

    _KERNELS.update(init=init, double=double, copy=copy, scale=scale, add=add, triad=triad,
                    where=where)
    return _KERNELS


def warm_numba() -> None:
    """Load the numba kernels from numba's cache (compiling them the first time) and start
    its threads, on arrays of a few elements: a server (``--serve``) does it before it says
    ready, side by side with the next servers' starts, so that no request pays it."""
    import numba

    k = _numba_kernels()
    a, b, c = (np.ones(64) for _ in range(3))
    k["init"](a, b, c)
    k["double"](a)
    k["copy"](a, c)
    k["scale"](b, c, SCALAR)
    k["add"](a, b, c)
    k["triad"](a, b, c, SCALAR)
    k["where"](np.full(numba.get_num_threads(), -1, dtype=np.int64))


def prepare_numba_threads(threads: int) -> None:
    """Let numba start `threads` workers even when that oversubscribes the CPUs.

    numba fixes its pool size (NUMBA_NUM_THREADS, default: the CPU count) at
    import, so this must run before numba is imported.
    """
    cpus = os.cpu_count() or 1
    if threads > cpus and "NUMBA_NUM_THREADS" not in os.environ:
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
