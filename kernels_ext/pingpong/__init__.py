"""MPI ping-pong: Python API and ``mpiexec -n 2 python -m kernels_ext.pingpong``.

Latency (osu_latency), bandwidth (osu_bw) and bidirectional bandwidth
(osu_bibw) between two ranks, by the OSU Micro-Benchmarks 7.x methods and
defaults, so the numbers compare with theirs: latency 10,000 iterations with
100 skipped up to 8 KiB, 1,000 with 10 above; bandwidth 100 with 10 skipped up
to 8 KiB, 20 with 2 above, a window of 64 messages.  One-way latency in
microseconds; bandwidth in GB/s (1 GB = 1e9 B; OSU prints MB/s, 1e6 B).

The C kernel (``_pingpong``) takes its communicator from mpi4py; it must be
built against the MPI library mpi4py loads at run time, which is checked at
load (MPIMismatch) instead of crashing.  ``--impl mpi4py`` runs the same
methods as a pure-Python mpi4py loop, to show what the extension buys.
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from collections.abc import Sequence

from kernels_ext.common.cli import check_out_agreed, size_bytes
from kernels_ext.common.errors import BadInput, ValidationFailed
from kernels_ext.common.mpi import init_mpi, library_family, library_label, load_kernel, where

TESTS = ("latency", "bw", "bibw")
#: OSU 7.x defaults (osu_util.h: LAT_LOOP_*, LAT_SKIP_*, BW_LOOP_*, BW_SKIP_*, WINDOW_SIZE_LARGE).
OSU_DEFAULTS = {
    "latency": {"iterations": 10_000, "skip": 100, "iterations_large": 1_000, "skip_large": 10,
                "window": 1},
    "bw": {"iterations": 100, "skip": 10, "iterations_large": 20, "skip_large": 2, "window": 64},
    "bibw": {"iterations": 100, "skip": 10, "iterations_large": 20, "skip_large": 2,
             "window": 64},
}
LARGE_MESSAGE_SIZE = 8192
MAX_MESSAGE_SIZE = 1 << 22  # OSU's default upper bound, 4 MiB
SIZE_LIMIT = 1 << 30
IMPLS = ("c", "mpi4py")




def parse_size(text: str | int) -> int:
    """Bytes from ``4194304``, ``4M``, ``4MiB``, ``64K`` or ``1k`` (binary multiples)."""
    n = size_bytes(text)
    if n is None:
        raise BadInput(f"message size '{text}' is not a number of bytes (e.g. 4096, 64K, 4M)")
    return n


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def message_sizes(test: str, min_size: int | None = None,
                  max_size: int = MAX_MESSAGE_SIZE) -> list[int]:
    """The sizes OSU sweeps: 0 (latency only), then powers of two from min to max.

    Raises BadInput for a size outside 0 .. 1 GiB, a min above the max, a
    bound that is not a power of two, or 0 for a bandwidth test.
    """
    if test not in TESTS:
        raise BadInput(f"unknown test '{test}' (known: {', '.join(TESTS)})")
    lo = (0 if test == "latency" else 1) if min_size is None else min_size
    for name, v in (("min-size", lo), ("max-size", max_size)):
        if not 0 <= v <= SIZE_LIMIT:
            raise BadInput(f"{name} {v} is out of range (0 .. {SIZE_LIMIT} bytes)")
        if v and not is_power_of_two(v):
            raise BadInput(f"{name} {v} is not a power of two (OSU sweeps 1, 2, 4, ... bytes)")
    if lo == 0 and test != "latency":
        raise BadInput(f"{test} needs messages of at least 1 byte (min-size 0 is for latency)")
    if max_size == 0 and test != "latency":
        raise BadInput(f"{test} needs a max-size of at least 1 byte")
    if lo > max_size:
        raise BadInput(f"min-size {lo} is larger than max-size {max_size}")
    sizes = [0] if lo == 0 else []
    s = max(lo, 1)
    while s <= max_size:
        sizes.append(s)
        s *= 2
    return sizes


def method(test: str, iterations: int | None = None, skip: int | None = None,
           iterations_large: int | None = None, skip_large: int | None = None,
           window: int | None = None) -> dict[str, int]:
    """OSU's iteration counts for `test`, with any of them overridden."""
    m = dict(OSU_DEFAULTS[test])
    for key, v in (("iterations", iterations), ("skip", skip),
                   ("iterations_large", iterations_large), ("skip_large", skip_large),
                   ("window", window)):
        if v is not None:
            m[key] = v
    for key in ("iterations", "iterations_large", "window"):
        if m[key] < 1:
            raise BadInput(f"{key.replace('_', '-')} must be at least 1, not {m[key]}")
    for key in ("skip", "skip_large"):
        if m[key] < 0:
            raise BadInput(f"{key.replace('_', '-')} must be at least 0, not {m[key]}")
    if test == "latency":
        m["window"] = 1
    return m


def _pattern(i: int, size: int, r: int):
    import numpy as np

    k = np.arange(size, dtype=np.int64)
    return ((i * 31 + (k % 251) * 7 + r * 101 + 1) & 0xFF).astype(np.uint8)


def _numpy_hugepages(enabled: bool) -> None:
    """NumPy asks for huge pages for large arrays by default; OSU's buffers have none."""
    import numpy as np

    core = getattr(np, "_core", None) or np.core
    core.multiarray._set_madvise_hugepage(enabled)


def python_pingpong(comm, MPI, test: str, sizes: list[int], m: dict[str, int],
                    validate: bool = False, hugepages: bool = False) -> list[dict]:
    """The OSU methods as a plain mpi4py loop (the Python-only baseline).

    Its buffers follow the same huge-page policy as the C kernel's (off by
    default, as OSU), so the two differ only in the loop.
    """
    import numpy as np

    _numpy_hugepages(hugepages)
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    cap = max(sizes + [4])
    sbuf, rbuf = np.full(cap, ord("a"), np.uint8), np.full(cap, ord("b"), np.uint8)
    out = []
    for size in sizes:
        large = size > LARGE_MESSAGE_SIZE
        iters = m["iterations_large"] if large else m["iterations"]
        skip = m["skip_large"] if large else m["skip"]
        window = m["window"]
        s, r = [sbuf, size, MPI.CHAR], [rbuf, size, MPI.CHAR]
        ack_s, ack_r = [sbuf, 4, MPI.CHAR], [rbuf, 4, MPI.CHAR]
        sbuf[:size] = ord("a")
        rbuf[:size] = ord("b")
        total, errors, t0 = 0.0, 0, 0.0
        comm.Barrier()
        for i in range(iters + skip):
            if validate:
                sbuf[:size] = _pattern(i, size, rank)
                comm.Barrier()
            timed = rank == 0 and i >= skip
            if timed:
                t0 = MPI.Wtime()
            if test == "latency":
                if rank == 0:
                    comm.Send(s, 1, 1)
                    comm.Recv(r, 1, 1)
                else:
                    comm.Recv(r, 0, 1)
                    comm.Send(s, 0, 1)
            elif test == "bw":
                if rank == 0:
                    MPI.Request.Waitall([comm.Isend(s, 1, 100) for _ in range(window)])
                    comm.Recv(ack_r, 1, 101)
                else:
                    MPI.Request.Waitall([comm.Irecv(r, 0, 100) for _ in range(window)])
                    comm.Send(ack_s, 0, 101)
            else:
                recvs = [comm.Irecv(r, peer, 10 if rank == 0 else 100) for _ in range(window)]
                sends = [comm.Isend(s, peer, 100 if rank == 0 else 10) for _ in range(window)]
                MPI.Request.Waitall(sends if rank == 0 else recvs)
                MPI.Request.Waitall(recvs if rank == 0 else sends)
            if timed:
                total += MPI.Wtime() - t0
            if validate and (test != "bw" or rank == 1):
                src = 0 if test == "bw" else peer
                errors += int(np.count_nonzero(rbuf[:size] != _pattern(i, size, src)))
        errors = comm.allreduce(errors)
        value = (total * 1e6 / (2.0 * iters) if test == "latency" else
                 size * iters * window * (2.0 if test == "bibw" else 1.0) / total) \
            if total > 0 else 0.0
        out.append({"size": size, "value": value, "seconds": total, "iterations": iters,
                    "skip": skip, "window": window, "errors": errors})
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mpiexec -n 2 python -m kernels_ext.pingpong",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "MPI latency (osu_latency), bandwidth (osu_bw) or bidirectional bandwidth "
            "(osu_bibw) between exactly two ranks, by the OSU 7.x methods and defaults. Rank 0 "
            "prints one JSON line per message size: size_bytes and latency_us (one-way) or "
            "bandwidth_gbs (1 GB/s = 1e9 B/s), with the MPI library and where each rank ran. "
            "Exit status: 0 ok, 2 bad input or not 2 ranks, 3 validation failed, 4 the kernel "
            "and mpi4py use different MPI libraries."),
        epilog=("examples:\n"
                "  mpiexec -n 2 python -m kernels_ext.pingpong --test latency --max-size 64K\n"
                "  mpiexec -n 2 -bind-to user:0,1 python -m kernels_ext.pingpong --test bw\n"
                "  mpiexec -n 2 python -m kernels_ext.pingpong --test bibw --validate\n"
                "  mpiexec -n 2 python -m kernels_ext.pingpong --impl mpi4py\n"
                "  python -m kernels_ext.pingpong --info"))
    p.add_argument("--test", default="latency", choices=TESTS)
    p.add_argument("--min-size", default=None,
                   help="smallest message in bytes, 0 or a power of two (default: 0 for "
                        "latency, 1 for bw/bibw)")
    p.add_argument("--max-size", default=str(MAX_MESSAGE_SIZE),
                   help="largest message, a power of two (default 4M = 4194304)")
    for name, what in (("iterations", "timed iterations up to 8 KiB"),
                       ("skip", "warm-up iterations up to 8 KiB"),
                       ("iterations-large", "timed iterations above 8 KiB"),
                       ("skip-large", "warm-up iterations above 8 KiB"),
                       ("window", "messages in flight (bw, bibw)")):
        p.add_argument(f"--{name}", type=int, default=None, help=f"{what} (default: OSU's)")
    p.add_argument("--validate", action="store_true",
                   help="fill and check a data pattern every iteration (timings then include "
                        "no checking, but are not for reporting)")
    p.add_argument("--hugepages", action="store_true",
                   help="back the message buffers by transparent huge pages (OSU does not; "
                        "on some VMs large-message shared-memory bandwidth changes several-fold)")
    p.add_argument("--impl", default="c", choices=IMPLS,
                   help="c (default) or mpi4py: the same methods as a Python loop")
    p.add_argument("--compiler", default=None,
                   help="build the kernel with this MPI compiler wrapper (e.g. "
                        "/usr/bin/mpicc.openmpi) instead of using the installed one")
    p.add_argument("--flags", default="-O2", help="flags for --compiler (default -O2)")
    p.add_argument("--thread-level", default="single",
                   choices=("single", "funneled", "serialized", "multiple"),
                   help="MPI thread support requested (default single, as OSU)")
    p.add_argument("--oversubscribe", action="store_true",
                   help="run even when the two ranks share a single CPU (each rank is one "
                        "thread; sharing a CPU measures the scheduler, not the MPI)")
    p.add_argument("--out", default=None, help="write the JSON lines to this file (rank 0)")
    p.add_argument("--info", action="store_true",
                   help="print the kernel's build and the MPI library as JSON, then exit "
                        "(runs with one rank)")
    return p


def _records(results: list[dict], test: str, impl: str, context: dict, validate: bool):
    for r in results:
        rec = {"test": test, "impl": impl, "size_bytes": r["size"]}
        if test == "latency":
            rec["latency_us"] = r["value"]
        else:
            rec["bandwidth_gbs"] = r["value"] / 1e9
        rec |= {"iterations": r["iterations"], "skip": r["skip"], "window": r["window"],
                "seconds": r["seconds"], "validated": (r["errors"] == 0) if validate else None,
                "errors": r["errors"]}
        yield rec | context


def run(args: argparse.Namespace) -> tuple[list[str], int, int]:
    """Everything main() does except printing: (JSON lines on rank 0, rank, exit code 0)."""
    MPI = init_mpi(args.thread_level)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    check_out_agreed(comm, args.out)
    runtime = MPI.Get_library_version().strip()
    module, build = (None, {}) if args.impl == "mpi4py" else load_kernel(
        MPI, "pingpong", args.compiler, args.flags, fallback="use --impl mpi4py")
    if args.info:
        info = {"impl": args.impl, "mpi_library": runtime.splitlines()[0].strip(),
                "mpi_library_version": runtime, "mpi_label": library_label(runtime),
                "mpi_family": library_family(runtime), "mpi_standard": MPI.Get_version(),
                "thread_level": args.thread_level} | build
        return ([json.dumps(info)] if rank == 0 else []), rank, 0
    if comm.Get_size() != 2:
        raise BadInput(f"the ping-pong needs exactly 2 MPI ranks, got {comm.Get_size()} "
                       "(mpiexec -n 2 ...)")
    from kernels_ext.common.layout import rank_layout

    lay = rank_layout(comm, 1)  # single-threaded: one CPU per rank on its node
    lay.check(args.oversubscribe)  # every rank alike: the verdict is agreed across the world
    sizes = message_sizes(args.test, None if args.min_size is None else parse_size(args.min_size),
                          parse_size(args.max_size))
    m = method(args.test, args.iterations, args.skip, args.iterations_large, args.skip_large,
               args.window)
    if module is not None:
        cpu = module.cpu
    else:
        from kernels_ext.triad.baselines import current_cpu as cpu
    ranks = where(comm, MPI, cpu)
    started = time.time()
    if args.impl == "c":
        results = module.run(comm, args.test, sizes, m["iterations"], m["skip"],
                             m["iterations_large"], m["skip_large"], m["window"],
                             LARGE_MESSAGE_SIZE, args.validate, args.hugepages)
    else:
        results = python_pingpong(comm, MPI, args.test, sizes, m, args.validate, args.hugepages)
    bad = [r for r in results if r["errors"]]
    if args.validate and bad:
        raise ValidationFailed(f"{args.test}: {bad[0]['errors']} bytes differed from what was "
                               f"sent at message size {bad[0]['size']}")
    if rank != 0:
        return [], rank, 0
    context = {"mpi_library": runtime.splitlines()[0].strip(), "mpi_label": library_label(runtime),
               "thread_level": args.thread_level, "hugepages": args.hugepages, "ranks": ranks,
               "hosts": len({r["host"] for r in ranks}), "host": socket.gethostname(),
               "started": started} | lay.record() | build
    return [json.dumps(rec) for rec in _records(results, args.test, args.impl, context,
                                                args.validate)], rank, 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mpiexec -n 2 python -m kernels_ext.pingpong``; returns the exit status."""
    from kernels_ext.common import cli

    args = build_parser().parse_args(argv)
    code, _ = cli.mpi_main(lambda: run(args), args.out)
    return code

