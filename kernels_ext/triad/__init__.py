"""STREAM Copy/Scale/Add/Triad: Python API and ``python -m kernels_ext.triad``.

One call measures one configuration (size, passes, threads, implementation,
compiler variant), or a series of them in turn (thread counts, store policies),
and returns one record per function and configuration, as STREAM reports it:
best rate from the minimum time over passes 2..NTIMES, average/min/max times,
bytes counted as STREAM counts them (Copy and Scale 16 B per element, Add and
Triad 24 B), 1 GB/s = 1e9 B/s.  A run whose arrays fail STREAM's check raises
ValidationFailed: a wrong answer is an error, never a number.

Beside STREAM's count, each record carries the bytes the memory really moves
(``traffic_bytes_per_element``, ``traffic_rate_gbs``): with normal stores each
line written is read first (write-allocate), 8 B more per element (Triad 32 B);
with streaming (non-temporal) stores it is not (Triad 24 B).  ``--stores``
picks the policy of the C kernels.  The baselines have their own: numba's
loops normal stores; NumPy computes into temporaries and copies the result
into the array with memmove, which glibc writes with streaming stores above a
size threshold (its Copy ran at 1.7x its multiply-into on this VM), so its
policy is recorded as "memmove" and no traffic model is claimed for it.

Thread affinity (OMP_PLACES, OMP_PROC_BIND, KMP_AFFINITY) comes from the
environment of the process, read once when the OpenMP runtime starts: run one
affinity setting per fresh process, as ``burstbench`` sweeps do (a sweep keeps one
process per setting alive and sends it each repetition: ``--serve``).

Long: the kernel's Python face is one module, as each kernel's is: the checks of its
input, the series, its records, what a serving process keeps and releases, and its command
line (the baselines are in baselines.py, the affinity in affinity.py).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import socket
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from kernels_ext.common import cli, sysinfo
from kernels_ext.common.cli import parse_count
from kernels_ext.common.errors import BadInput, BuildError, KernelError, ValidationFailed
from kernels_ext.triad import affinity

FUNCTIONS = ("Copy", "Scale", "Add", "Triad")
BYTES_PER_ELEMENT = {"Copy": 16, "Scale": 16, "Add": 24, "Triad": 24}
STORES = ("normal", "streaming")
#: The store policy of each baseline (not selectable).
BASELINE_STORES = {"numba": "normal", "numpy": "memmove"}
#: Bytes per element the memory moves: STREAM's count plus, for normal stores, the read
#: of each destination line before it is written (write-allocate).
TRAFFIC_BYTES = {"normal": {f: b + 8 for f, b in BYTES_PER_ELEMENT.items()},
                 "streaming": dict(BYTES_PER_ELEMENT)}
IMPLS = ("c", "numba", "numpy")
#: Arrays of `size` doubles alive at once (NumPy's expressions add two temporaries).
RESIDENT_ARRAYS = {"c": 3, "numba": 3, "numpy": 5}
MIN_DEFAULT_SIZE = 10_000_000
#: Environment variables that change what a run measures; recorded with every result.
RECORDED_ENV = ("OMP_PLACES", "OMP_PROC_BIND", "OMP_NUM_THREADS", "OMP_DYNAMIC",
                "OMP_WAIT_POLICY", "GOMP_CPU_AFFINITY", "GOMP_SPINCOUNT", "KMP_AFFINITY",
                "KMP_HW_SUBSET", "KMP_BLOCKTIME", "NUMBA_THREADING_LAYER", "NUMBA_NUM_THREADS")


def default_size() -> int:
    """Elements per array: 4x the machine's total last-level cache, at least 10M."""
    return max(MIN_DEFAULT_SIZE, 4 * sysinfo.last_level_cache_bytes() // 8)


def check_size(size: Any, impl: str = "c") -> tuple[int, list[str]]:
    """Validate a size ("auto", None or a count) and return (elements, warnings).

    Refuses (BadInput) a size that is not a positive integer or whose arrays
    would not fit in the memory available now; warns when each array is smaller
    than 4x the last-level cache (the run then measures cache, not memory).
    """
    if size is None or (isinstance(size, str) and size.strip().lower() in ("auto", "")):
        n = default_size()
    else:
        n = parse_count(size, "size")
    if n <= 0:
        raise BadInput(f"size must be a positive number of elements, not {n}")
    need = RESIDENT_ARRAYS[impl] * 8 * n
    avail = sysinfo.available_memory_bytes()
    if avail and need > avail:
        raise BadInput(
            f"size {n} needs {need / 1e9:.1f} GB ({RESIDENT_ARRAYS[impl]} arrays of 8-byte "
            f"doubles) but only {avail / 1e9:.1f} GB of memory is available"
        )
    notes = []
    llc = sysinfo.last_level_cache_bytes()
    if llc and 8 * n < 4 * llc:
        notes.append(
            f"size {n}: each array ({8 * n / 2**20:.1f} MiB) is smaller than 4x the "
            f"last-level cache ({llc / 2**20:.1f} MiB); this measures cache, not memory"
        )
    return n, notes


def check_threads(threads: Any) -> tuple[int, list[str]]:
    """Validate a thread count (None = OMP_NUM_THREADS or all CPUs); return (threads, warnings)."""
    cpus = sysinfo.available_cpus()
    if threads is None:
        env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
        threads = int(env) if env.isdigit() and int(env) > 0 else cpus
    t = parse_count(threads, "threads")
    if t < 1:
        raise BadInput(f"threads must be at least 1, not {t}")
    notes = []
    if t > cpus:
        notes.append(f"{t} threads on {cpus} CPUs oversubscribes them: timings are not "
                     "representative")
    return t, notes


def check_ntimes(ntimes: Any) -> int:
    """NTIMES >= 2: the first pass is left out of the statistics."""
    k = parse_count(ntimes, "ntimes")
    if k < 2:
        raise BadInput(f"ntimes must be at least 2 (the first pass is not counted), not {k}")
    return k


def check_stores(stores: Any, impl: str = "c") -> str:
    """The store policy to measure: `stores` for the C kernels (None: normal), the
    baseline's own for numba and NumPy (BadInput where one is asked of a baseline)."""
    if impl != "c":
        if stores is not None:
            raise BadInput(f"--stores is for the C kernels: the {impl} baseline has its own "
                           f"({BASELINE_STORES[impl]} stores)")
        return BASELINE_STORES[impl]
    stores = "normal" if stores is None else stores
    if stores not in STORES:
        raise BadInput(f"unknown store policy {stores!r} (known: {', '.join(STORES)})")
    return stores


def summarize(times: dict[str, list[float]], size: int, stores: str = "normal") -> list[dict]:
    """STREAM's summary of per-pass times: one dict per function timed (the four, or the
    Triad alone), pass 1 left out; with the traffic the memory moved under the store
    policy used (None where no model applies: NumPy's temporaries and memmove)."""
    out = []
    for f in (f for f in FUNCTIONS if f in times):
        t = times[f][1:]
        best = min(t)
        rate = BYTES_PER_ELEMENT[f] * size / best / 1e9 if best > 0 else math.inf
        out.append({
            "function": f,
            "best_rate_gbs": rate,
            "traffic_bytes_per_element": TRAFFIC_BYTES[stores][f]
            if stores in TRAFFIC_BYTES else None,
            "traffic_rate_gbs": rate * TRAFFIC_BYTES[stores][f] / BYTES_PER_ELEMENT[f]
            if stores in TRAFFIC_BYTES else None,
            "avg_time_s": statistics.fmean(t),
            "min_time_s": best,
            "max_time_s": max(t),
            "times_s": times[f],
        })
    return out


@functools.cache  # a process that serves requests builds (or finds) its variant once
def _load_c(compiler: str | None, flags: str, tag: str) -> tuple[Any, dict]:
    from kernels_ext.common import variants

    if compiler is None:
        module, build = variants.installed("triad")
        return module, {"variant": build["label"], "compiler": build["family"],
                        "compiler_version": build["version"], "flags": build["flags"],
                        "compiler_path": build["compiler"]}
    try:
        v = variants.build(compiler, flags, tag)
    except variants.BuildFailed as exc:
        raise BuildError(str(exc)) from exc
    except variants.VariantError as exc:
        raise BadInput(str(exc)) from exc
    return variants.load(v.path, "triad"), {
        "variant": v.label, "compiler": v.compiler.family,
        "compiler_version": v.compiler.version, "flags": v.flags,
        "compiler_path": v.compiler.path, "variant_key": v.key}


def runtime_info(impl: str = "c", compiler: str | None = None, flags: str = "",
                 tag: str = "") -> dict:
    """What a run of this implementation/variant would run on: build and OpenMP facts."""
    if impl == "c":
        module, build = _load_c(compiler, flags, tag)
        omp = module.info()
        return build | {
            "impl": "c", "openmp_version": omp["openmp"], "openmp_library": omp["openmp_library"],
            "proc_bind": omp["proc_bind"], "places": omp["places"],
            "compiler_macros": omp["compiler"], "timer_resolution_s": omp["timer_resolution_s"],
            "streaming_isa": omp.get("streaming_isa")}
    if impl == "numba":
        import numba

        return {"impl": "numba", "variant": f"numba{numba.__version__}", "compiler": "numba",
                "compiler_version": numba.__version__, "flags": "njit(parallel=True)",
                "openmp_library": os.environ.get("NUMBA_THREADING_LAYER", "default"),
                "timer_resolution_s": time.get_clock_info("perf_counter").resolution}
    import numpy

    return {"impl": "numpy", "variant": f"numpy{numpy.__version__}", "compiler": "numpy",
            "compiler_version": numpy.__version__, "flags": "",
            "timer_resolution_s": time.get_clock_info("perf_counter").resolution}


def _counts(value: Any, check: Any) -> list:
    """A value or a list of them ("1,2", [1, 2], 2, None) as a list of checked values."""
    if isinstance(value, str) and "," in value:
        value = [v.strip() for v in value.split(",") if v.strip()]
    return [check(v) for v in (value if isinstance(value, (list, tuple)) else [value])]


def measure(size: Any = None, ntimes: Any = 10, threads: Any = None, impl: str = "c",
            compiler: str | None = None, flags: str = "", tag: str = "",
            fault_index: int = -1, stores: Any = None, keep: bool = False,
            triad_only: bool = False) -> list[dict]:
    """Measure one configuration, or a series of them in this one process; return one
    record per function (Copy, Scale, Add, Triad) and configuration.  With `triad_only`
    (the C kernels only) each pass is the Triad alone, without the doubling, and there is
    one record per configuration, the Triad's: the memory's rate at 24 of the 80 bytes an
    element a pass of the four moves (node_rate, beside another kernel).

    `size` is elements per array ("auto"/None: default_size()); `threads`
    None means OMP_NUM_THREADS or all CPUs; `compiler`/`flags` select a cached
    variant build (None: the installed module); `fault_index` >= 0 zeroes one
    element before the check, to show that the check catches it; `stores` is
    the C kernels' store policy (None: normal; "streaming" on a build without
    streaming stores is measured with normal ones, said in the record's
    warnings and its ``stores``; a baseline has its own and takes None).

    `threads` and `stores` may each be a list (or "1,2"): every (stores, threads)
    pair is then measured in turn, stores outermost, on arrays allocated and first
    touched once, each configuration going on from the values the one before left (as
    stream.c's passes go on from each other: no fill) and one check after
    the last validating them all (a wrong element any of them wrote is carried into the
    values checked; each record's ``check_covers`` says how many it covered). On a
    machine whose CPUs span several NUMA nodes each configuration gets arrays of its
    own, placed, filled and checked by its own team. A sweep so pays one process start
    and one first touch per affinity setting (which the OpenMP runtime reads once), not
    per configuration. `keep` (a process that measures again: ``--serve``) keeps the
    arrays, and the values they hold, for the next call, which then pays neither their
    first touch nor a fill, and leaves the OpenMP team
    asleep rather than spinning. Raises BadInput, BuildError or ValidationFailed.
    """
    if impl not in IMPLS:
        raise BadInput(f"unknown implementation '{impl}' (known: {', '.join(IMPLS)})")
    if triad_only and impl != "c":
        raise BadInput(f"passes of the Triad alone are the C kernels' only, not {impl}'s")
    asked = _counts(stores, lambda v: v)
    policies = [check_stores(v, impl) for v in asked]
    try:
        aff = affinity.from_environ(dict(os.environ))
    except affinity.AffinityError as exc:
        raise BadInput(str(exc)) from exc
    n, notes = check_size(size, impl)
    k = check_ntimes(ntimes)
    counts = _counts(threads, check_threads)
    for _, tnotes in counts:
        notes += [x for x in tnotes if x not in notes]
    teams = [t for t, _ in counts]
    if impl == "numpy" and teams != [1] * len(teams):
        raise BadInput("the NumPy baseline runs on one thread: use threads 1")
    if fault_index >= n:
        raise BadInput(f"fault index {fault_index} is outside the arrays (size {n})")

    pairs = [(p, a, t) for p, a in zip(policies, asked) for t in teams]
    started = time.time()
    if impl == "c":
        info = runtime_info("c", compiler, flags, tag)
        module = sys.modules["kernels_ext.triad._triad"]
        try:
            raws = module.series(n, k, [(t, p) for p, _, t in pairs], fault_index,
                                 sysinfo.numa_nodes() > 1, keep, triad_only)
        except MemoryError as exc:
            raise BadInput(f"size {n}: the arrays could not be allocated") from exc
    elif impl == "numba":
        from kernels_ext.triad import baselines

        baselines.prepare_numba_threads(max(teams))
        raws = baselines.numba_series(n, k, [t for _, _, t in pairs], fault_index, keep)
        info = runtime_info("numba") | {"openmp_library": raws[0]["threading_layer"]}
    else:
        from kernels_ext.triad import baselines

        raws = [baselines.numpy_stream(n, k, fault_index, keep) for _ in pairs]
        info = runtime_info("numpy")
    return [rec for (p, a, t), raw in zip(pairs, raws)
            for rec in _records(raw, info, n, k, t, p, a, list(notes), aff, started)]


def prepare(impl: str = "c", compiler: str | None = None, flags: str = "", tag: str = "",
            threads: Any = None) -> None:
    """Set up what every measure() of this process needs before a server says it is ready
    (cli.serve): the C variant built or found and loaded; numba's pool sized for the widest
    of `threads` and its kernels loaded; NumPy imported.  Raises BadInput or BuildError."""
    sysinfo.process_cpus()  # looked at before the runtime binds this thread to one place
    if impl == "c":
        runtime_info("c", compiler, flags, tag)
    elif impl == "numba":
        from kernels_ext.triad import baselines

        baselines.prepare_numba_threads(max(t for t, _ in _counts(threads, check_threads)))
        baselines.warm_numba()
    else:
        import numpy  # noqa: F401


def memory_short() -> bool:
    """Whether less than cli.SERVE_RESERVE of the machine's memory is available: a
    serving process then releases the arrays it kept (its next request touches new ones)."""
    return sysinfo.available_memory_share() < cli.SERVE_RESERVE


def release() -> None:
    """Free the arrays a measure(keep=True) of this process kept (none: nothing to do)."""
    from kernels_ext.triad import baselines

    baselines._KEPT.clear()
    module = sys.modules.get("kernels_ext.triad._triad")
    if module is not None:
        module.release()


#: Passes of the Triad alone in a node_rate() measurement (the first not counted): at the
#: rule size, a call took 1.3 s on 2 threads of the Xeon VM whose L3 reads 480 MiB, 0.32 of
#: the four kernels' time (comparisons/README.md, "The Triad alone"), each time the
#: solver's memory state is looked at.
BESIDE_NTIMES = 5


def node_rate(comm: Any, threads: int, size: Any = None, ntimes: int = BESIDE_NTIMES) -> float:
    """The Triad of this process's node (GB/s, STREAM's count), measured now by every rank
    of `comm` on the node at once, each with `threads` threads on its share of `size`
    elements an array (None or "auto": default_size(), the rule size, for the node):
    the node's bytes of a pass over its slowest rank's time of that pass, the best of
    passes 2..ntimes; averaged over the nodes (collective over `comm`).  The arrays are
    kept for the next call (release() frees them).  A kernel that measures beside itself
    what the memory gives at that moment: this VM's bandwidth changes state over minutes,
    so a Triad measured minutes apart can be in the other one.  Where any rank cannot
    measure (its memory, a bad size), every rank raises its KernelError: none is left
    waiting for the others."""
    from mpi4py import MPI

    from kernels_ext.common.mpi import agreed

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        n = agreed(comm, lambda: max(1, check_size(size)[0] // node.Get_size()), KernelError)
        node.Barrier()
        times = agreed(comm, lambda: next(r["times_s"] for r in measure(
            n, ntimes, threads, keep=True, triad_only=True) if r["function"] == "Triad"),
            KernelError)
        everyone = node.gather(times, root=0)
        best = 0.0
        if node.Get_rank() == 0:
            passes = zip(*everyone)
            next(passes)  # the first pass is not counted
            best = max(BYTES_PER_ELEMENT["Triad"] * n * len(t) / max(t) / 1e9 for t in passes)
    finally:
        node.Free()
    nodes = comm.allreduce(1 if best else 0)
    return comm.allreduce(best) / max(1, nodes)


def _records(raw: dict, info: dict, n: int, k: int, t: int, stores: str, asked: Any,
             notes: list[str], aff: affinity.Affinity, started: float) -> list[dict]:
    """One configuration's kernel result as its records (four, or the Triad's alone);
    ValidationFailed where its arrays failed STREAM's check."""
    chk = raw["check"]
    if not chk["validated"]:
        worst = max(range(3), key=lambda i: chk["avg_rel_error"][i])
        raise ValidationFailed(
            f"{info['variant']} failed STREAM validation: array {'abc'[worst]}[] has mean "
            f"relative error {chk['avg_rel_error'][worst]:.3g} > {chk['epsilon']:g} "
            f"({chk['bad_elements'][worst]} of {n} elements wrong)"
        )
    if raw.get("stores", stores) != stores:
        notes.append(f"streaming stores asked for, but {info['variant']} has none (its "
                     "flags allow no SSE2/AVX/AVX-512, or the CPU is not x86-64): "
                     "measured with normal stores")
    if raw["threads"] != t:
        notes.append(f"asked for {t} threads, the runtime gave {raw['threads']}")
    res = info.get("timer_resolution_s") or 0.0
    used = raw.get("stores", stores)
    summary = summarize(raw["times"], n, used)
    if res and min(s["min_time_s"] for s in summary) < 20 * res:
        notes.append("a kernel took fewer than 20 timer ticks: increase the size")
    common = {
        "size": n, "ntimes": k, "threads": raw["threads"], "threads_requested": t,
        "stores": used, "stores_requested": asked or stores,
        "validated": True, "avg_rel_error": list(chk["avg_rel_error"]),
        "check_covers": chk["covers"],
        "places_requested": aff.places, "bind_requested": aff.bind,
        "kmp_affinity_requested": aff.kmp_affinity, "affinity_label": aff.label,
        "binding": raw["binding"],
        "env": {v: os.environ[v] for v in RECORDED_ENV if v in os.environ},
        "host": socket.gethostname(), "started": started, "warnings": notes,
    } | info
    return [s | common for s in summary]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kernels_ext.triad",
        description=(
            "Run STREAM Copy/Scale/Add/Triad once and print one JSON line per function "
            "(best_rate_gbs, avg/min/max times, size, threads, where each thread ran). "
            "Thread affinity comes from OMP_PLACES / OMP_PROC_BIND / KMP_AFFINITY in the "
            "environment. Exit status: 0 ok, 2 bad input, 3 validation failed, 4 a compiler "
            "variant did not build."),
        epilog=(
            "examples:\n"
            "  OMP_PLACES=cores OMP_PROC_BIND=spread python -m kernels_ext.triad --threads 2\n"
            "  python -m kernels_ext.triad --size 80e6 --ntimes 20 --compiler clang "
            "--flags='-O3 -march=native -fopenmp'\n"
            "  python -m kernels_ext.triad --impl numba --threads 2\n"
            "  python -m kernels_ext.triad --stores streaming --threads 2\n"
            "  python -m kernels_ext.triad --stores normal,streaming --threads 1,2\n\n"
            "Each line also carries traffic_rate_gbs: the bytes the memory moved, with the\n"
            "write-allocate read of normal stores (Triad 32 B per element; 24 B with\n"
            "streaming stores, as STREAM counts)."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--size", default="auto",
                   help="elements per array, e.g. 80000000 or 1e9 (default: auto = 4x the "
                        "last-level cache, at least 10M)")
    p.add_argument("--ntimes", default=10, help="passes per kernel, >= 2 (default 10)")
    p.add_argument("--threads", default=None,
                   help="OpenMP threads (default: OMP_NUM_THREADS or all CPUs), or a comma "
                        "list (1,2,4) measured in turn in this one process")
    p.add_argument("--impl", default="c", choices=IMPLS,
                   help="c (default), or a Python-only baseline: numba, numpy")
    p.add_argument("--compiler", default=None,
                   help="build a variant with this C compiler (gcc, clang, icx, nvc or a "
                        "path) instead of using the installed module")
    p.add_argument("--flags", default="-O3 -march=native -fopenmp",
                   help="compiler flags of the variant, OpenMP flag included "
                        "(default: '%(default)s')")
    p.add_argument("--tag", default="", help="name suffix of the variant, e.g. zmm_high")
    p.add_argument("--stores", default=None,
                   help="store policy of the C kernels: normal (through the cache, default) "
                        "or streaming (non-temporal, AVX-512/AVX/SSE2 as the flags allow; a "
                        "comma list measures each, with every thread count; a "
                        "build without them measures normal stores and says so). The "
                        "baselines have their own: numba normal, NumPy memmove")
    p.add_argument("--out", default=None, help="write the JSON lines to this file instead")
    p.add_argument("--info", action="store_true",
                   help="print the build and OpenMP runtime facts as JSON and exit")
    p.add_argument(cli.SERVE_FLAG, action="store_true",
                   help="measure once per line read on stdin, each answer followed by a "
                        f"line '{cli.SERVED}', until stdin ends; the arrays and the OpenMP "
                        "runtime stay between measurements (how burstbench sweeps alternate "
                        "repetitions without a process start each)"),
    p.add_argument("--inject-fault", type=int, default=-1, help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m kernels_ext.triad``; returns the exit status."""
    args = build_parser().parse_args(argv)
    compiler = args.compiler
    try:
        cli.check_out(args.out)
        if args.info:
            cli.write_lines([json.dumps(runtime_info(args.impl, compiler, args.flags,
                                                     args.tag))], args.out)
            return 0

        def once() -> list[str]:
            recs = measure(args.size, args.ntimes, args.threads, args.impl, compiler,
                           args.flags, args.tag, args.inject_fault, args.stores, args.serve)
            if args.serve and memory_short():  # the other settings' servers keep theirs
                release()
            for w in recs[0]["warnings"]:
                print(f"warning: {w}", file=sys.stderr)
            return [json.dumps(r) for r in recs]

        if args.serve:
            cli.serve(once, lambda: prepare(args.impl, compiler, args.flags, args.tag,
                                            args.threads))
        else:
            cli.write_lines(once(), args.out)
    except KernelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0

