"""The kernels' errors: one line of message each, and the exit status their CLIs return."""

from __future__ import annotations


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
