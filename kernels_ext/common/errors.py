"""The kernels' errors: one line of message each, and the exit status their CLIs return."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class KernelError(Exception):
    """A run that gives no number; ``exit_code`` is what the CLI returns."""

    exit_code = 1


class BadInput(KernelError):
    """An argument, a setting, the matrix or the rank count is wrong (exit status 2)."""

    exit_code = 2


class ValidationFailed(KernelError):
    """The results are wrong (a failed STREAM check, data that arrived changed): status 3."""

    exit_code = 3


class NotConverged(KernelError):
    """The iteration limit was reached, or CG broke down (exit status 3)."""

    exit_code = 3


class BuildError(KernelError):
    """A compiler variant did not compile (exit status 4)."""

    exit_code = 4


class MPIMismatch(KernelError):
    """The kernel was built against another MPI than mpi4py runs on (exit status 4)."""

    exit_code = 4


def first_error_line(output: str) -> str:
    """The first line of a compiler's output that says 'error' (else its first line).

    Compilers name the cause first (``fatal error: mpi.h: No such file or
    directory``) and its consequences after (``compilation terminated.``).
    """
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "no output")


@contextmanager
def variant_errors() -> Iterator[None]:
    """Turn a variant's errors into the CLIs' statuses: a build that fails is BuildError (4),
    any other problem (a compiler that is not installed, bad flags) BadInput (2)."""
    from kernels_ext.common import variants

    try:
        yield
    except variants.BuildFailed as exc:
        raise BuildError(str(exc)) from exc
    except variants.VariantError as exc:
        raise BadInput(str(exc)) from exc
