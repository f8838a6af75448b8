"""Python-only STREAM baselines, measured beside the C kernels in the same sweep.

* ``numba``: the four kernels as ``prange`` loops (``@njit(parallel=True)``),
  arrays initialised in parallel with the same chunking as the kernels;
* ``numpy``: the expressions a NumPy user writes, e.g. ``a[:] = b + s*c``.
  NumPy runs them on one thread and makes temporaries, so it moves more bytes
  than STREAM counts; it is counted as STREAM counts, which is the point of
  the comparison.

Both return the same raw result as the C shim's ``series`` (times per function
and pass, team size, binding, check) and are validated by the same C check, as
its series are: each run goes on from the values the one before left, one check
after the last.
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


#: What a fill puts in a[], b[], c[] (stream.c's initial values).
FILL = (1.0, 2.0, 0.0)

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


class _Held:
    """Three arrays and what they hold: a fill (`filled`), the validated values an
    earlier run's passes left (`values`), which the next run goes on from, or neither
    (a fill is due)."""

    def __init__(self, arrays: Arrays) -> None:
        self.arrays = arrays
        self.filled = False
        self.values: tuple[float, float, float] | None = None


#: The arrays a call with keep=True left for the next call of their size (one process
#: measures one baseline: numba_series's, or numpy_stream's).
_KEPT: dict[int, _Held] = {}


def _arrays(size: int, keep: bool, fill: Callable[[Arrays], None]) -> _Held:
    """Three arrays of `size`: those a call with keep=True left (with what they hold),
    else new ones, first touched by `fill`; kept for the next call where `keep`, else
    dropped."""
    held = _KEPT.pop(size, None)
    _KEPT.clear()
    if held is None:
        held = _Held((np.empty(size), np.empty(size), np.empty(size)))
        fill(held.arrays)
        held.filled = True
    if keep:
        _KEPT[size] = held
    return held


def _series(held: _Held, ntimes: int, runs: list[Callable[[], dict]],
            fill: Callable[[Arrays], None], fault_index: int) -> list[dict]:
    """Each of `runs` in turn on `held`'s arrays, as the C kernels' series: from a fill
    where they hold no validated values (`fill` where they do not hold one already), else
    from the values the run before left (no fill); a run doubles a as stream.c's timing
    check does, then makes its passes. One check after the last run validates them all
    (a wrong element any run wrote is carried into the values checked), and one before
    the values pass the C series' bound (_triad.GO_ON_BELOW, 1e150). A run returns its
    raw result; this adds its 'check'."""
    from kernels_ext.triad import _triad  # the installed build: same check as the C kernels

    out: list[dict] = []
    chain: list[dict] = []
    for i, run in enumerate(runs):
        if held.values is None and not held.filled:
            fill(held.arrays)
        held.filled = False
        raw = run()
        values = _triad.expected(ntimes, held.values or FILL)
        held.values = values
        raw["check"] = {"expected": values}
        chain.append(raw)
        large = max(map(abs, values)) >= _triad.GO_ON_BELOW  # the C series' bound
        if i == len(runs) - 1 or large:
            a, b, c = held.arrays
            if fault_index >= 0:
                a[fault_index] = 0.0
            chk = _triad.check(a, b, c, expected=values) | {"covers": len(chain)}
            for r in chain:  # each keeps its own expected values
                r["check"] = chk | {"expected": r["check"]["expected"]}
            if large or not chk["validated"]:
                held.values = None
            chain = []
        out.append(raw)
    return out


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
    expressions' temporaries, stay for the next call of this size, which goes on from
    the values they hold)."""
    def fill(arrays: Arrays) -> None:
        for x, v in zip(arrays, FILL):
            x.fill(v)

    held = _arrays(size, keep, fill)
    a, b, c = held.arrays
    s = SCALAR

    def copy() -> None:
        c[:] = a

    def scale() -> None:
        b[:] = s * c

    def add() -> None:
        c[:] = a + b

    def triad() -> None:
        a[:] = b + s * c

    def run() -> dict:
        np.multiply(a, 2.0, out=a)  # stream.c's timing check (in place, as its loop)
        binding, sample = _binding_tracker(1, lambda: np.array([current_cpu()]))
        times = _passes((copy, scale, add, triad), ntimes, sample)
        return {"times": times, "threads": 1, "binding": binding}

    return _series(held, ntimes, [run], fill, fault_index)[0]


def numba_series(size: int, ntimes: int, threads: list[int], fault_index: int = -1,
                 keep: bool = False) -> list[dict]:
    """STREAM as numba ``prange`` loops, once per thread count of `threads` in turn, on
    arrays allocated once, each count going on from the values the one before left and
    one check after the last (as the C kernels' series). `keep`: the arrays, and what
    they hold, stay for the next call of this size."""
    import numba

    k = _numba_kernels()

    def fill(arrays: Arrays) -> None:
        numba.set_num_threads(max(threads))  # the widest team touches the pages first
        k["init"](*arrays)

    held = _arrays(size, keep, fill)
    a, b, c = held.arrays
    s = SCALAR

    def runner(count: int) -> Callable[[], dict]:
        def run() -> dict:
            numba.set_num_threads(count)
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
            return {"times": _passes(kernels, ntimes, sample), "threads": team,
                    "binding": binding, "threading_layer": numba.threading_layer(),
                    "numba_version": numba.__version__}
        return run

    return _series(held, ntimes, [runner(t) for t in threads], fill, fault_index)


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
