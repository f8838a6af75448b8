"""What the kernels' command lines share: whole-file output, and the MPI error discipline."""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernels_ext.common.errors import BadInput, KernelError


def parse_count(value: Any, name: str) -> int:
    """An integer from an int, an integral float or a string such as ``1e9`` or ``80_000_000``.

    Raises BadInput naming `name` for anything else (1.5, "abc", True).
    """
    if isinstance(value, bool):
        raise BadInput(f"{name} must be an integer, not {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value):
            return int(value)
        raise BadInput(f"{name} must be an integer, not {value!r}")
    text = str(value).strip().replace("_", "")
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if re.fullmatch(r"[+-]?\d+(\.\d*)?[eE]\+?\d+", text):
        f = float(text)
        if f == int(f):
            return int(f)
    raise BadInput(f"{name} must be an integer, not {value!r}")


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(i?[bB])?\s*")


def size_bytes(value: Any, fractions: bool = False) -> int | None:
    """Bytes from an int or from ``1048576``, ``1M``, ``256K``, ``1MiB``, ``4g`` (binary
    multiples, up to T), and with `fractions` from ``6.4MiB`` (a fraction of a unit,
    rounded down to a byte); None for anything else (each caller says what it wanted)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _SIZE.fullmatch(value) if isinstance(value, str) else None
    if not m or ("." in m.group(1) and not (fractions and m.group(2))):
        return None
    unit = 1 << {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[m.group(2).lower()]
    return int(float(m.group(1)) * unit) if "." in m.group(1) else int(m.group(1)) * unit


def check_out(out: str | None) -> None:
    """Raise BadInput where `out` (a command's --out) cannot take the file: a folder, or a
    folder that is missing or not writable.  Checked before the measurement, so that it
    is not lost to a typo in the path."""
    if out is None:
        return
    path = Path(out)
    folder = path.parent
    try:
        if path.is_dir():
            raise BadInput(f"--out {out}: is a folder, not a file")
        if not folder.is_dir():
            raise BadInput(f"--out {out}: no folder {folder}")
    except OSError as exc:  # a folder above it that this user may not enter
        raise BadInput(f"--out {out}: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BadInput(f"--out {out}: the folder {folder} is not writable")


def check_out_agreed(comm: Any, out: str | None) -> None:
    """check_out on rank 0 (the rank that writes), its BadInput raised on every rank of
    `comm` alike (collective), so that none measures on alone."""
    from kernels_ext.common.mpi import agreed

    agreed(comm, lambda: check_out(out) if comm.Get_rank() == 0 else None)


def write_lines(lines: list[str], out: str | None) -> None:
    """JSON lines to stdout, or written whole to `out` (a reader never sees half a file).
    Where `out` cannot be written, the lines go to stdout after all (what was measured is
    not lost) and KernelError says why, with no temporary file left behind."""
    text = "".join(line + "\n" for line in lines)
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(out)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        sys.stdout.write(text)
        sys.stdout.flush()
        raise KernelError(f"--out {out}: {exc.strerror or exc}; the results went to stdout "
                          f"instead") from None


#: A kernel started with this flag serves requests (burstbench.core.servers): it first
#: sets up what every request needs (imports, builds, compiled kernels) and says SERVED
#: once, ready; then each line read on stdin measures once more in this same process,
#: whose answer is the lines it would have printed, then SERVED.  End of input ends it.
SERVE_FLAG = "--serve"
SERVED = "#done"
#: A server keeps what it set up for its next request (the Triad's arrays) only while the
#: machine keeps this share of its memory available; the sweep closes servers alike.
SERVE_RESERVE = 0.2


def serve(once: Callable[[], list[str]], prepare: Callable[[], None] = lambda: None) -> None:
    """Run `prepare()`, say SERVED (ready: a sweep starts the next servers side by side and
    measures only once all are ready), then answer each line of stdin with `once()`'s lines
    and SERVED, until stdin ends.  A KernelError (or any exception) propagates: the process
    ends with its exit status and its error line, as a fresh process would, and the sweep
    starts another."""
    prepare()
    sys.stdout.write(SERVED + "\n")
    sys.stdout.flush()
    for _ in sys.stdin:
        sys.stdout.write("".join(line + "\n" for line in once()) + SERVED + "\n")
        sys.stdout.flush()


Runner = Callable[[], tuple[list[str], int, int]]


def mpi_main(run: Runner, out: str | None) -> tuple[int, list[str]]:
    """Run an MPI command line: `run()` returns (lines, rank, exit code).

    A KernelError is one line from rank 0 (every rank raises it alike) and its
    exit status; any other exception takes every rank down with MPI_Abort, so
    none is left waiting in a collective.  Rank 0 prints or writes the lines.
    Returns (exit code, the lines on rank 0).
    """
    rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    try:
        lines, rank, code = run()
    except KernelError as exc:
        if rank == 0:
            print(f"error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code, []
    except Exception as exc:  # noqa: BLE001  (any other failure: never leave a rank waiting)
        print(f"error: rank {rank}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        mpi = sys.modules.get("mpi4py.MPI")
        if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
            mpi.COMM_WORLD.Abort(1)
        return 1, []
    if rank != 0:
        return code, []
    if lines:
        try:
            write_lines(lines, out)
        except KernelError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            return max(code, exc.exit_code), lines  # a solve's own failure not hidden
    return code, lines
