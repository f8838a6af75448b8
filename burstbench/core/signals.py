"""Stop signals: Ctrl-C, SIGTERM (a scheduler's cancel, a time limit, a spot eviction) and
SIGHUP all stop a sweep or a run the same way, as an Interrupted exception, and none is
lost even where Python drops the exception (see stop_signals)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Interrupted(KeyboardInterrupt):
    """A stop signal (SIGINT, SIGTERM, SIGHUP) taken like Ctrl-C; `signum` says which."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


#: The signals that stop a sweep or a run like Ctrl-C.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


#: The signals received by each open stop_signals block, innermost last.
_RECEIVED: list[list[int]] = []


@contextlib.contextmanager
def stop_signals(signums: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Within the block the first of `signums` raises Interrupted; later ones are absorbed.

    Absorbing the rest lets the clean-up that follows run to its end when a
    scheduler signals every process of a job, or Ctrl-C is pressed twice.
    Signals that are ignored (``nohup``, a background job's SIGINT) stay
    ignored; outside the main thread nothing changes (Python allows handlers
    only there).

    Python runs a handler between any two bytecodes, also inside a callback
    whose exceptions it prints and drops ("Exception ignored in": the at-fork
    hooks that every ``subprocess`` start runs, finalizers).  The signal is
    therefore also recorded, and the waits of this module (wait, run_tasks)
    raise it again when it was lost: see raise_if_stopped.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired: list[int] = []

    def handler(signum: int, frame: object) -> None:
        if not fired:
            fired.append(signum)
            raise Interrupted(signum)

    previous = {}
    for signum in signums:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, handler)
    _RECEIVED.append(fired)
    try:
        yield
    finally:
        _RECEIVED.pop()  # this block's: blocks close in the reverse order they open
        for signum, old in previous.items():
            signal.signal(signum, old)


def raise_if_stopped() -> None:
    """Raise Interrupted if the innermost stop_signals block got a stop signal.

    Code still running inside the block after the signal means that the
    handler's exception was dropped (or is being handled in the block): either
    way the block is stopping.
    """
    if _RECEIVED and _RECEIVED[-1]:
        raise Interrupted(_RECEIVED[-1][0])


def signal_name(signum: int) -> str:
    """'SIGKILL' for 9; 'signal 64' for a number without a name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
