"""MPI for the kernels: mpi4py started as each kernel needs, the MPI library named and its ABI
checked, a kernel's C module loaded for the MPI that mpi4py loaded.

mpi4py's wheels load whichever MPI library they find at run time, while a kernel's
extension module was linked against one at build time: a module built for the other ABI
(MPICH-like or Open MPI) is refused with a message naming both, never imported.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kernels_ext.common.errors import BadInput, KernelError, MPIMismatch

T = TypeVar("T")


def agreed(comm, fn: Callable[[], T], catch: type[KernelError] = BadInput) -> T:
    """`fn()` on every rank; the first rank's error of kind `catch` (BadInput unless
    told), if any, raised on all of them as it was, its kind and its words (so every rank
    stops alike, none left waiting in a collective, and rank 0 prints it)."""
    try:
        value, why = fn(), None
    except catch as exc:
        value, why = None, (type(exc), str(exc))
    first = next((w for w in comm.allgather(why) if w is not None), None)
    if first is not None:
        raise first[0](first[1])
    return value  # type: ignore[return-value]  (set: no rank raised)


def init_mpi(thread_level: str = "single"):
    """Import mpi4py's MPI with `thread_level` (OSU initialises with MPI_Init: single)."""
    import mpi4py

    mpi4py.rc.thread_level = thread_level
    from mpi4py import MPI

    return MPI


def library_family(version_text: str) -> str:
    """'openmpi' or 'mpich' (the MPICH ABI: MPICH, Intel MPI, MVAPICH), from the text of
    MPI_Get_library_version."""
    return "openmpi" if "Open MPI" in version_text else "mpich"


def library_label(version_text: str) -> str:
    """A short name of the MPI library: mpich5.0.2, openmpi4.1.4, impi2021.4, mvapich2-2.3.6."""
    for pattern, name in ((r"Open MPI v(\d[\w.]*)", "openmpi"),
                          (r"Intel\(R\) MPI Library (\d[\w.]*)", "impi"),
                          (r"MVAPICH2? Version:?\s*(\d[\w.]*)", "mvapich2-"),
                          (r"MPICH Version:\s*(\d[\w.]*)", "mpich")):
        m = re.search(pattern, version_text)
        if m:
            return f"{name}{m.group(1)}"
    return "mpi"


def built_family(path: str | os.PathLike) -> str:
    """The MPI ABI an extension module was linked for, read from its bytes (no import).

    Open MPI's predefined handles are global objects (``ompi_mpi_comm_world``,
    ``ompi_mpi_char``) that its users reference by name; MPICH-ABI libraries
    use integer constants.  Importing a module built for the other ABI fails
    inside mpi4py's C API with an obscure message, so this is checked first.
    """
    return "openmpi" if b"ompi_mpi_" in Path(path).read_bytes() else "mpich"


def check_abi(MPI, path: str | os.PathLike) -> None:
    """MPIMismatch, naming both, where the extension module at `path` was built for another
    MPI ABI than the library mpi4py loaded (importing it would fail obscurely)."""
    runtime = MPI.Get_library_version().strip()
    family = built_family(path)
    if family != library_family(runtime):
        raise MPIMismatch(
            f"{path} was built for the {family} ABI but mpi4py loaded "
            f"'{runtime.splitlines()[0].strip()}': rebuild it with that MPI's mpicc (first on "
            "PATH, pip install --no-build-isolation -e .; or --compiler /path/to/its/mpicc), "
            "or point mpi4py at the library it was built with (MPI4PY_LIBMPI=/path/to/libmpi.so)")


def load_kernel(MPI, kernel: str, compiler: str | None = None, flags: str = "",
                fallback: str = "") -> tuple[Any, dict]:
    """The C module of `kernel` (``kernels_ext.<kernel>._<kernel>``: installed, or a variant
    built with an MPI compiler wrapper) and its build record.

    Raises MPIMismatch when it was compiled for another MPI ABI than the one
    mpi4py loaded, BuildError (exit status 4, as the Triad's) when the
    compiler rejects it, BadInput when the compiler is not installed or the
    installed module is missing (`fallback` says what to use instead).
    """
    import importlib.util

    from kernels_ext.common import variants
    from kernels_ext.common.errors import variant_errors

    name = f"kernels_ext.{kernel}._{kernel}"
    if compiler is None:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise BadInput(f"{name} is not built: no MPI was found when the package was "
                           "installed (install mpich and mpi4py, then reinstall"
                           + (f"; or {fallback})" if fallback else ")"))
        path = spec.origin
    else:
        with variant_errors():
            v = variants.build(compiler, flags, kernel=kernel)
        path = v.path
    check_abi(MPI, path)
    if compiler is None:
        module, build = variants.installed(kernel)
    else:
        module = variants.load(path, kernel)
        build = {"label": v.label, "compiler": v.compiler.path, "flags": v.flags,
                 "mpicc": v.compiler.path, "variant_key": v.key}
    return module, build | {"mpi_build": module.build_mpi()["version"]}


def where(comm, MPI, cpu) -> list[dict]:
    """Host, scheduler node, CPU and allowed CPUs of every rank (on rank 0; None elsewhere).

    ``node`` is the scheduler's name for the node (``$SLURMD_NODENAME``, which
    differs from the host name where one host runs several slurmd), else the host.
    """
    host = MPI.Get_processor_name()
    me = {"rank": comm.Get_rank(), "host": host, "node": os.environ.get("SLURMD_NODENAME", host),
          "cpu": cpu(), "cpus_allowed": sorted(os.sched_getaffinity(0)), "pid": os.getpid()}
    return comm.gather(me, root=0)
