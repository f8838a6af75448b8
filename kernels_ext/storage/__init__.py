"""File system bandwidth by IOR's method: Python API and ``python -m kernels_ext.storage``.

Write and read bandwidth of a folder through POSIX (pwrite/pread), MPI-IO
(MPI_File_write_at[_all]) or libgfarm, in IOR's segmented layout: one shared
file of segments x ranks x block, or a file per process; transfers of
--transfer-size; --fsync inside the timed write phase (IOR -e); bandwidth =
bytes of all ranks / (latest close end - earliest open start), with the
transfer-only time beside it (IOR's method, ``src/ior.c``).  Every byte read is
checked against what its writer wrote.

A read served from this machine's memory is not storage bandwidth, so every read
record says how the page cache was avoided (``cache``): ``direct`` (O_DIRECT),
``dropped (posix_fadvise)`` or ``dropped (drop_caches)`` (each reader flushes and
drops the range it is about to read; ``resident_before_read`` is what mincore
still found), ``reordered to another node`` (IOR -C across nodes), ``in memory
(tmpfs)``, or ``may be cached`` (Gfarm: its I/O servers' page cache cannot be
dropped from a client); ``cache_note`` adds what a client cannot know (a file
server's cache).
"""

from __future__ import annotations

import argparse
import errno
import json
import signal
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernels_ext.common.cli import check_out_agreed, size_bytes
from kernels_ext.common.errors import BadInput, KernelError, ValidationFailed
from kernels_ext.storage.targets import (
    GFARM_NOTE,
    MEMORY_FS,
    SERVER_NOTE,
    check_gfarm_target,
    check_posix_target,
    is_remote,
    refuses_direct,
)

APIS = ("posix", "mpiio", "gfarm")
OPERATIONS = ("write", "read")
DEFAULT_NAME = "storage.dat"
MIB = 1 << 20
INT_MAX = (1 << 31) - 1
DROP_NAMES = {0: None, 1: "posix_fadvise", 2: "drop_caches"}


class StorageFailed(KernelError):
    """The storage failed during the run (no space, read-only, an I/O error, a server lost):
    exit status 5."""

    exit_code = 5


class Interrupted(KernelError):
    """SIGINT or SIGTERM stopped the run between two transfers: exit status 128 + signal."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + signum


def parse_size(text: str | int, option: str) -> int:
    """Bytes from ``1048576``, ``1M``, ``256K``, ``1MiB``, ``4g`` (binary multiples)."""
    n = size_bytes(text)
    if n is None:
        raise BadInput(f"--{option} {text!r} is not a size in bytes (e.g. 1M, 256K, 4096)")
    return n


def parse_operations(text: str) -> tuple[bool, bool]:
    """(write, read) from ``write``, ``read`` or ``write,read`` (IOR -w, -r)."""
    ops = [t.strip() for t in str(text).split(",") if t.strip()]
    if not ops or any(o not in OPERATIONS for o in ops) or len(set(ops)) != len(ops):
        raise BadInput(f"--operations takes write, read or write,read, not {text!r}")
    return "write" in ops, "read" in ops


@dataclass(frozen=True)
class Config:
    """A validated run: what the C driver gets, and what the records say about the target."""

    api: str
    path: str
    name: str
    xfer: int
    block: int
    segments: int
    iterations: int
    file_per_process: bool
    collective: bool
    direct: bool
    fsync: bool
    reorder: bool
    keep: bool
    write: bool
    read: bool
    drop_caches: bool
    fs: str
    fs_magic: int | None
    align: int

    @property
    def access(self) -> str:
        return "file-per-process" if self.file_per_process else "shared-file"

    @property
    def files(self) -> str:
        """The files, IOR style: ``<path>/<name>`` or ``<path>/<name>.%08d`` (one per rank)."""
        base = f"{self.path.rstrip('/')}/{self.name}"
        return base + ".%08d" if self.file_per_process else base


def check_layout(args: argparse.Namespace) -> dict[str, Any]:
    """The sizes and switches, checked without touching a file (BadInput, one line each)."""
    write, read = parse_operations(args.operations)
    xfer = parse_size(args.transfer_size, "transfer-size")
    block = parse_size(args.block_size, "block-size")
    if xfer <= 0:
        raise BadInput(f"--transfer-size must be positive, not {xfer}")
    if xfer % 8:
        raise BadInput(f"--transfer-size {xfer} is not a multiple of 8 bytes (the data are "
                       "checked in 64-bit words)")
    if xfer > INT_MAX:
        raise BadInput(f"--transfer-size {xfer} is above {INT_MAX} bytes (MPI-IO and libgfarm "
                       "count a transfer in an int)")
    if block <= 0 or block % xfer:
        raise BadInput(f"--transfer-size {xfer} does not divide --block-size {block}")
    for opt, v in (("segments", args.segments), ("iterations", args.iterations)):
        if v < 1:
            raise BadInput(f"--{opt} must be at least 1, not {v}")
    if "/" in args.name or args.name in ("", ".", ".."):
        raise BadInput(f"--name {args.name!r} must be a file name, without '/'")
    if args.collective and args.api != "mpiio":
        raise BadInput("--collective needs --api mpiio (MPI_File_write_at_all, read_at_all)")
    if args.direct and args.api == "mpiio":
        raise BadInput("--direct needs --api posix: MPI-IO (ROMIO) opens files without "
                       "O_DIRECT here")
    if args.direct and args.api == "gfarm":
        raise BadInput("--direct needs --api posix: libgfarm has no direct I/O (use --api "
                       "posix on a gfarm2fs mount)")
    if args.drop_caches and args.direct:
        raise BadInput("--drop-caches is for buffered reads: --direct reads bypass the page "
                       "cache already")
    if args.drop_caches and args.api == "gfarm":
        raise BadInput("--drop-caches cannot reach the Gfarm I/O servers' page cache: it is "
                       "for --api posix or mpiio")
    return {"write": write, "read": read, "xfer": xfer, "block": block}


def configure(args: argparse.Namespace, module, rank: int) -> Config:
    """Validate everything that can be before any file is touched; probes (a probe file, the
    Gfarm metadata server) run on rank 0 only.  Raises BadInput."""
    lay = check_layout(args)
    if args.api not in module.backends():
        raise BadInput(f"--api {args.api}: not built into this kernel (built: "
                       f"{', '.join(module.backends())})")
    if args.api == "gfarm":
        if rank == 0:
            check_gfarm_target(args.path, module)
        fs, magic, align = "gfarm", None, 4096
    else:
        fs, magic, align = check_posix_target(args, module, lay["write"], lay["xfer"],
                                              probe=rank == 0)
    return Config(api=args.api, path=args.path, name=args.name, xfer=lay["xfer"],
                  block=lay["block"], segments=args.segments, iterations=args.iterations,
                  file_per_process=args.file_per_process, collective=args.collective,
                  direct=args.direct, fsync=args.fsync, reorder=args.reorder, keep=args.keep,
                  write=lay["write"], read=lay["read"], drop_caches=args.drop_caches, fs=fs,
                  fs_magic=magic, align=align)


def cache_of(cfg: Config, phase: dict, info: dict) -> tuple[str, str | None]:
    """How a read phase avoided the page cache, and what it could not avoid (or None)."""
    note = GFARM_NOTE if cfg.api == "gfarm" else SERVER_NOTE if is_remote(cfg.fs) else None
    if cfg.direct:
        return "direct", note
    if cfg.api == "gfarm":
        return "may be cached", note
    if cfg.fs in MEMORY_FS:
        return f"in memory ({cfg.fs})", None
    if phase["resident"] > 0.01:
        left = f"{phase['resident']:.0%} of the data was still in the page cache after the drop"
        return "may be cached", left if note is None else f"{left}; {note}"
    if phase["drop"] == 2:
        return "dropped (drop_caches)", note
    if cfg.reorder and info["nodes"] > 1 and info["shift"]:
        return "reordered to another node", note
    return "dropped (posix_fadvise)", note


def error_of(code: int, err: dict, cfg: Config) -> KernelError:
    """The one-line exception for the driver's agreed failure."""
    at = f" at offset {err['offset']}" if err["offset"] >= 0 else ""
    where = f"{err['call']} {err['path']}{at}: {err['text']}"
    fate = ("; removed the files of this run" if cfg.write and not cfg.keep else
            "; the files are kept (--keep)" if cfg.write else "")
    n = err["errnum"]
    if code == 4:  # SB_EDATA
        return ValidationFailed(f"data check failed: {err['path']}{at}: {err['text']}; the "
                                "files are kept")
    if code == 5:  # SB_EINTR
        try:
            name = signal.Signals(n).name
        except ValueError:
            name = f"signal {n}"
        return Interrupted(f"stopped by {name} in the {err['op']} phase of iteration "
                           f"{err['iteration']} ({err['text']}){fate}", n)
    if code == 6:  # SB_ELAYOUT
        if n == errno.ENOENT:
            return BadInput(f"{err['path']} does not exist: a read-only run (--operations read) "
                            "reads the files an earlier run wrote with --keep and the same "
                            "layout")
        return BadInput(f"{err['path']} {err['text']}{at}: read files written with the same "
                        "--block-size, --segments, --file-per-process and ranks (and --keep)")
    if code != 3:  # SB_EINVAL, SB_ENOMEM: what configure() should have caught
        return KernelError(f"the storage kernel refused its arguments ({where})")
    if cfg.direct and n == errno.EINVAL and err["call"] in ("open", "write", "read"):
        return BadInput(refuses_direct(cfg.path, cfg.fs))
    if n == errno.ENOSPC:
        return StorageFailed(f"no space left on {cfg.path} ({cfg.fs}): {where}{fate}")
    if n == errno.EDQUOT:
        return StorageFailed(f"disk quota exceeded on {cfg.path} ({cfg.fs}): {where}{fate}")
    if n == errno.EROFS:
        return StorageFailed(f"{cfg.path} ({cfg.fs}) is read-only: {where}{fate}")
    lib = "Gfarm: " if cfg.api == "gfarm" else "MPI-IO: " if cfg.api == "mpiio" else ""
    return StorageFailed(f"{lib}{where}{fate}")


def measure(comm, module, cfg: Config) -> tuple[list[dict], dict]:
    """Run the C driver over `comm` (every rank); (its phases, its info), or the agreed
    failure raised alike on every rank."""
    code, phases, info, err = module.run(
        comm, cfg.api, cfg.path, cfg.name, cfg.xfer, cfg.block, cfg.segments, cfg.iterations,
        file_per_process=cfg.file_per_process, collective=cfg.collective, direct=cfg.direct,
        fsync=cfg.fsync, reorder=cfg.reorder, keep=cfg.keep, write=cfg.write, read=cfg.read,
        drop=2 if cfg.drop_caches else 1, align=cfg.align)
    if code:
        raise error_of(code, err, cfg)
    return phases, info


def records(cfg: Config, phases: list[dict], info: dict, ranks: int,
            context: dict) -> list[dict]:
    """One record per phase: IOR's bandwidth in MiB/s (2^20 B/s) and GB/s (1e9 B/s)."""
    out = []
    for ph in phases:
        read = ph["op"] == "read"
        cache, note = cache_of(cfg, ph, info) if read else (None, None)
        rec = {
            "operation": ph["op"], "api": cfg.api, "access": cfg.access,
            "iteration": ph["iteration"],
            "bandwidth_mib_s": ph["bytes"] / ph["total_s"] / MIB,
            "bandwidth_gbs": ph["bytes"] / ph["total_s"] / 1e9,
            "total_s": ph["total_s"], "transfer_s": ph["transfer_s"], "open_s": ph["open_s"],
            "close_s": ph["close_s"], "check_s": ph["check_s"] if read else None,
            "check_wait_s": ph["check_wait_s"] if read else None,
            "bytes": ph["bytes"], "ranks": ranks, "nodes": info["nodes"],
            "ranks_per_node": info["ranks_per_node"], "transfer_size": cfg.xfer,
            "block_size": cfg.block, "segments": cfg.segments, "iterations": cfg.iterations,
            "fsync": cfg.fsync and not read, "direct": cfg.direct,
            "collective": cfg.collective, "reorder": cfg.reorder,
            "reader_shift": info["shift"] if read else None, "keep": cfg.keep,
            "cache": cache, "cache_note": note,
            "resident_before_read": (ph["resident"] if read and ph["resident"] >= 0
                                     else None),
            "validated": True if read else None,
            "path": cfg.path, "files": cfg.files, "fs_type": cfg.fs,
            "fs_magic": None if cfg.fs_magic is None else f"0x{cfg.fs_magic:x}",
        }
        out.append(rec | context)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="[mpiexec -n P] python -m kernels_ext.storage",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Write and read bandwidth of a folder by IOR's method: POSIX, MPI-IO or Gfarm; "
            "one shared file (segments x ranks x block) or a file per process; --fsync inside "
            "the timed write; bandwidth = bytes of all ranks / (latest close end - earliest "
            "open start). Every byte read is checked. Rank 0 prints one JSON line per phase "
            "and iteration: operation, bandwidth_mib_s (2^20 B/s, as IOR), bandwidth_gbs "
            "(1e9 B/s), total_s, transfer_s, open_s, close_s, bytes, and for reads how the "
            "page cache was avoided (cache). Exit status: 0 ok, 2 bad input, 3 data check "
            "failed, 4 MPI mismatch, 5 the storage failed during the run, 128+N stopped by "
            "signal N (files of the run removed unless --keep)."),
        epilog=(
            "examples:\n"
            "  mpiexec -n 2 python -m kernels_ext.storage --path /tmp --file-per-process "
            "--fsync\n"
            "  mpiexec -n 2 python -m kernels_ext.storage --path /scratch --direct --fsync "
            "--block-size 1G\n"
            "  mpiexec -n 4 python -m kernels_ext.storage --api mpiio --collective --path "
            "/shared --segments 4\n"
            "  mpiexec -n 2 python -m kernels_ext.storage --api gfarm --path gfarm:///bench "
            "--file-per-process\n"
            "  python -m kernels_ext.storage --path /mnt/gfarm/bench --operations write --keep\n"
            "  python -m kernels_ext.storage --path /mnt/gfarm/bench --operations read\n"
            "  python -m kernels_ext.storage --info\n\n"
            "Reads: --direct opens with O_DIRECT (cache \"direct\"); otherwise each reader "
            "fsyncs and drops\nits range with posix_fadvise before the phase (--drop-caches: "
            "also /proc/sys/vm/drop_caches,\nas root); across nodes --reorder reads another "
            "node's data (IOR -C). A read-only run reads\nthe files an earlier --keep run "
            "wrote with the same layout, and removes them unless --keep."))
    p.add_argument("--api", choices=APIS, default="posix",
                   help="posix (pwrite/pread, the default), mpiio (MPI_File_*_at) or gfarm "
                        "(libgfarm); a gfarm2fs mount is --api posix")
    p.add_argument("--path", help="the folder (gfarm:///folder for --api gfarm)")
    p.add_argument("--name", default=DEFAULT_NAME,
                   help=f"the file's name in it (default {DEFAULT_NAME}; file per process: "
                        f"{DEFAULT_NAME}.00000000, ...)")
    p.add_argument("--transfer-size", "-t", default="1M",
                   help="bytes per transfer, e.g. 1M, 256K, 4096 (default 1M; IOR -t)")
    p.add_argument("--block-size", "-b", default="64M",
                   help="bytes per rank and segment, a multiple of the transfer size "
                        "(default 64M; IOR -b)")
    p.add_argument("--segments", "-s", type=int, default=1, help="segments (default 1; IOR -s)")
    p.add_argument("--iterations", "-i", type=int, default=1,
                   help="repetitions of the phases (default 1; IOR -i)")
    p.add_argument("--file-per-process", "-F", action="store_true",
                   help="a file per rank instead of one shared file (IOR -F)")
    p.add_argument("--operations", default="write,read",
                   help="write, read or write,read (default; IOR -w -r)")
    p.add_argument("--fsync", "-e", action="store_true",
                   help="fsync after writing, inside the timed write phase (IOR -e)")
    p.add_argument("--direct", "-B", action="store_true",
                   help="O_DIRECT (--api posix): no page cache on either side (IOR -B)")
    p.add_argument("--reorder", "-C", action="store_true",
                   help="rank r reads what rank (r + ranks per node) %% ranks wrote (IOR -C)")
    p.add_argument("--keep", "-k", action="store_true", help="keep the files (IOR -k)")
    p.add_argument("--collective", "-c", action="store_true",
                   help="collective MPI-IO transfers (--api mpiio; IOR -c)")
    p.add_argument("--drop-caches", action="store_true",
                   help="before each read phase also write 3 to /proc/sys/vm/drop_caches "
                        "(root; once per node)")
    p.add_argument("--out", default=None, help="write the JSON lines to this file (rank 0)")
    p.add_argument("--info", action="store_true",
                   help="print the kernel's build (the I/O interfaces built in) as JSON, "
                        "then exit")
    return p


def run(args: argparse.Namespace) -> tuple[list[str], int, int]:
    """Everything main() does except printing: (JSON lines on rank 0, rank, exit code)."""
    from kernels_ext.common.mpi import agreed, init_mpi, library_label, load_kernel

    MPI = init_mpi("funneled")  # one thread calls MPI; another checks what is read
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    check_out_agreed(comm, args.out)
    module, build = load_kernel(MPI, "storage")
    runtime = MPI.Get_library_version().strip()
    if args.info:
        info = {"kernel": "storage", "backends": module.backends(),
                "mpi_library": runtime.splitlines()[0].strip()} | build
        return ([json.dumps(info)] if rank == 0 else []), rank, 0
    if not args.path:
        raise BadInput("--path is required (a folder, or gfarm:///folder for --api gfarm)")
    cfg = agreed(comm, lambda: configure(args, module, rank))
    started = time.time()
    phases, info = measure(comm, module, cfg)
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    if rank != 0:
        return [], rank, 0
    context = {"hosts": sorted(set(hosts)), "host": socket.gethostname(),
               "mpi_library": runtime.splitlines()[0].strip(),
               "mpi_label": library_label(runtime), "started": started} | build
    lines = [json.dumps(r) for r in records(cfg, phases, info, comm.Get_size(), context)]
    return lines, rank, 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``[mpiexec -n P] python -m kernels_ext.storage``; the exit status."""
    from kernels_ext.common import cli

    args = build_parser().parse_args(argv)
    code, _ = cli.mpi_main(lambda: run(args), args.out)
    return code
