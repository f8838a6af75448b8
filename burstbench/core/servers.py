"""Processes that measure several configurations of one session, each when asked.

A fresh process per configuration pays the interpreter's start, its imports and the first
touch of its buffers every time: a third of a Triad sweep's wall time on a 2-core VM
(issue 31).  Tasks that name one ``session`` (same command, same environment: the OpenMP
runtime reads its affinity once, so one session per affinity setting) are measured instead
by one process, started with the kernel's ``--serve`` and kept alive between them.  Each
request is one line on its stdin; it answers with the output a fresh process would have
printed, then ``#done`` (kernels_ext.common.cli.serve), and says ``#done`` once first, when
it has set up (imports, builds, numba's cache).  A server starts with those of the sessions
that come next, one per CPU, and measuring waits until all are ready, so no start overlaps
a measurement (on 2 CPUs the first round of local.yaml's Triad sweep, its 13 starts,
went from 9.5 to 7.4 s untimed).  Sessions stay alive side by side, so a sweep still
alternates its repetitions over time (this VM's bandwidth drifts over minutes): a
setting's five repetitions are five moments of the sweep (or of its block), not one.

What is kept per server is what its kernel keeps (the Triad's arrays, ~3x its size).
Where the sessions' servers cannot all keep theirs side by side (Task.keeps against the
memory available above SERVE_RESERVE of the machine's), in_blocks orders the sweep a few
sessions at a time, so that each touches its arrays once, not at every repetition (a
large-cache VM's Triad arrays: 3.3 GB a server).  A server ends after its session's last
task, and before a new one starts the least recently used are closed while the memory
available would fall below SERVE_RESERVE (a server releases its arrays first, at that same
share: kernels_ext.triad.memory_short).  A server that fails, times out or is stopped is
killed whole, as a fresh process would be (runner.kill_tree); a later task of its session
starts a new one.
"""

from __future__ import annotations

import itertools
import os
import select
import subprocess
import tempfile
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import IO

from burstbench.core import runner
from burstbench.core.signals import raise_if_stopped
from kernels_ext.common import sysinfo
from kernels_ext.common.cli import SERVE_FLAG, SERVE_RESERVE, SERVED

#: At most this many servers at once, whatever the memory.
MAX_SERVERS = 64
_DONE = f"\n{SERVED}\n".encode()


def _memory() -> tuple[int, int]:
    """Bytes of memory available now and in all (what sysinfo.available_memory_share
    divides: here the bytes count, against the largest server's)."""
    return sysinfo.available_memory_bytes(), sysinfo.meminfo().get("MemTotal", 0)


def _rss(pid: int) -> int:
    """Resident bytes of process `pid` (0 where it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def room() -> int:
    """Bytes the sweep's servers may hold side by side: the memory available now, less
    SERVE_RESERVE of the machine's (below which a server releases what it keeps)."""
    available, total = _memory()
    return max(0, available - int(SERVE_RESERVE * total))


def kept(tasks: list[runner.Task]) -> dict[str, int]:
    """Each session's Task.keeps (the largest of its tasks'), in the order sessions first
    come."""
    out: dict[str, int] = {}
    for t in tasks:
        out[t.session] = max(out.get(t.session, 0), t.keeps)
    return out


def in_blocks(tasks: list[runner.Task], room: int) -> tuple[list[runner.Task], int]:
    """`tasks` in the order to measure them, and in how many blocks.

    The plan alternates its sessions' repetitions: each round visits every session, so a
    setting's repetitions are moments spread over the sweep.  Where the sessions' servers
    cannot keep what they keep (Task.keeps) side by side in `room`, every round would have
    them release it and touch it again (3.3 GB a Triad server on a large-cache VM).  The
    sessions are then split, in the order they first come, into as few blocks as fit, of
    even sizes, and measured one block after the other; within a block the tasks keep the
    plan's order, so its sessions' repetitions still alternate.  A list ranked by priority
    (a budget's pass: budget.order) is split per priority, so what the decision needs
    still comes first.  Where all fit, or a task has no session or no keeps, the order
    stands: one block."""
    if not tasks or any(not t.session or t.keeps <= 0 for t in tasks):
        return list(tasks), 1
    keeps = kept(tasks)
    if sum(keeps.values()) <= room:
        return list(tasks), 1
    first: dict[str, tuple[int, int]] = {}  # session: (its highest priority, first index)
    for i, t in enumerate(tasks):
        prio, at = first.get(t.session, (t.priority, i))
        first[t.session] = (min(prio, t.priority), at)
    ranked = all(a.priority <= b.priority for a, b in itertools.pairwise(tasks))
    block: dict[str, int] = {}
    count = 0
    for _, level in itertools.groupby(sorted(first, key=first.__getitem__),
                                      key=lambda s: first[s][0] if ranked else 0):
        sessions = list(level)
        per = max(1, room // max(keeps[s] for s in sessions))  # sessions a block holds
        blocks = -(-len(sessions) // per)
        for i, s in enumerate(sessions):
            block[s] = count + i * blocks // len(sessions)
        count += blocks
    return sorted(tasks, key=lambda t: block[t.session]), count


@dataclass
class _Server:
    proc: subprocess.Popen
    stderr: IO[str]
    read_at: int = 0  # how much of its stderr earlier answers took
    ready: bool = False  # its first SERVED (set up) was read

    def new_stderr(self) -> str:
        self.stderr.seek(self.read_at)
        text = self.stderr.read()
        self.read_at = self.stderr.tell()
        return text


class Servers:
    """The live servers of a sweep, one per session; close() (or the with block) ends them."""

    def __init__(self) -> None:
        self.live: OrderedDict[str, _Server] = OrderedDict()  # least recently used first
        self.first: dict[str, runner.Task] = {}  # each session's first task, in order
        self.started: set[str] = set()  # sessions whose server was started once
        self.remaining: Counter[str] = Counter()  # expected tasks not yet run, per session

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pids(self) -> list[int]:
        """The live servers' process ids (contention.sample counts their CPU as ours)."""
        return [s.proc.pid for s in self.live.values()]

    def expect(self, tasks: list[runner.Task]) -> None:
        """Tell the servers the sweep's tasks in the order it will run them: a server
        about to start then starts with the next sessions' (see launch), and a server
        ends once its session's last task was measured (what it keeps is then free)."""
        for t in tasks:
            if t.session:
                self.first.setdefault(t.session, t)
                self.remaining[t.session] += 1

    def launch(self, task: runner.Task) -> tuple[str, str]:
        """Measure `task` in its session's server; return the (stdout, stderr) a fresh
        process would have, or raise TaskFailed as runner.launch.

        Where the session has no server yet, it starts together with the servers of the
        sessions that come next (expect()), as many in all as this process has CPUs, and
        the task is measured once all of them said they are ready: their starts (the
        interpreter, imports, builds, numba's cache) overlap one another, never a
        measurement."""
        try:
            server = self.live.get(task.session) or self._start_batch(task)
            self.live.move_to_end(task.session)  # now the most recently used
            self._ready(server, task)  # where its batch's wait ended before it
            self._send(server)
            out = self._answer(server, task)
        except subprocess.TimeoutExpired:
            self._end(task.session, kill=True)
            raise runner.TaskFailed(f"no result within the timeout of {task.timeout_s:g} s; "
                                    "stopped" + runner.clean_up(task)) from None
        except runner.TaskFailed:
            self._end(task.session, kill=True)
            raise
        except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: take the servers down with us
            self._end(task.session, kill=True)
            runner.clean_up(task)
            raise
        finally:
            self.remaining[task.session] -= 1
        err = server.new_stderr()
        if self.remaining[task.session] == 0 and task.session in self.first:
            self._end(task.session)  # its last task: what it keeps goes back now
        return out, err

    def _start_batch(self, task: runner.Task) -> _Server:
        """Start `task`'s server and those of the next sessions not started yet, wait
        until each is ready, and return `task`'s (TaskFailed or TimeoutExpired where it
        is not).  A next session's server that fails to start is dropped: its own task
        starts it again and says why."""
        width = max(1, len(sysinfo.process_cpus()))
        order = list(self.first)
        after = order[order.index(task.session) + 1:] if task.session in order else []
        batch = [task] + [self.first[s] for s in after
                          if s not in self.live and s not in self.started][: width - 1]
        for t in batch:
            try:
                self.live[t.session] = self._start(t)
            except runner.TaskFailed:
                if t is task:
                    raise
            self.started.add(t.session)
        server = self.live[task.session]
        self._ready(server, task)
        for t in batch[1:]:
            if t.session in self.live:  # unless making room closed it
                try:
                    self._ready(self.live[t.session], t)
                except (runner.TaskFailed, subprocess.TimeoutExpired):
                    self._end(t.session, kill=True)
        return server

    def _ready(self, server: _Server, task: runner.Task) -> None:
        """Wait for `server` to say it has set up (its first SERVED), once."""
        if not server.ready:
            self._answer(server, task)
            server.ready = True

    def _start(self, task: runner.Task) -> _Server:
        self._make_room()
        env = {k: v for k, v in os.environ.items() if k not in runner.CLEARED_ENV}
        env.update(dict(task.env))
        stderr = tempfile.TemporaryFile("w+")
        try:
            proc = subprocess.Popen((*task.argv, SERVE_FLAG), env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=stderr,
                                    start_new_session=True, preexec_fn=runner.die_with_parent())
        except OSError as exc:
            stderr.close()
            raise runner.TaskFailed(f"cannot start {task.argv[0]}: {exc.strerror}") from exc
        return _Server(proc, stderr)

    @staticmethod
    def _send(server: _Server) -> None:
        """Ask `server` to measure once more."""
        assert server.proc.stdin is not None
        try:
            server.proc.stdin.write(b"\n")
            server.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: what it said is read by _answer

    def _answer(self, server: _Server, task: runner.Task) -> str:
        """Read `server`'s next answer up to its end marker (the first: that it is ready),
        within the task's timeout (TimeoutExpired), noticing stop signals (Interrupted);
        TaskFailed where the server ended before it answered."""
        proc = server.proc
        assert proc.stdout is not None
        fd, got = proc.stdout.fileno(), bytearray()
        deadline = time.monotonic() + task.timeout_s
        while not (got.endswith(_DONE) or got == _DONE[1:]):
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(task.argv, task.timeout_s)
            ready, _, _ = select.select([fd], [], [], min(runner.POLL_S, left))
            raise_if_stopped()
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:  # it ended: a kernel error, or killed
                rc = proc.wait()
                out, err = got.decode(errors="replace"), server.new_stderr()
                raise runner.TaskFailed(runner.failure(out, err, rc) if rc else
                                        "the server ended without an answer")
            got += chunk
        return got[: -len(_DONE) + 1].decode()  # its lines, each with its newline

    def _make_room(self) -> None:
        """Close the least recently used servers while a new one, as large as the largest,
        would leave less than SERVE_RESERVE of the memory available (or there are too
        many).  Servers keep their buffers only while that much is left (the Triad's
        release theirs otherwise), so this is the last resort."""
        while self.live:
            largest = max(_rss(s.proc.pid) for s in self.live.values())
            available, total = _memory()
            if len(self.live) < MAX_SERVERS and available - largest >= SERVE_RESERVE * total:
                return
            self._end(next(iter(self.live)))

    def _end(self, session: str, kill: bool = False) -> None:
        server = self.live.pop(session, None)
        if server is None:
            return
        if kill:
            runner.kill_tree(server.proc)
        else:
            try:
                assert server.proc.stdin is not None
                if not server.proc.stdin.closed:
                    server.proc.stdin.close()  # end of requests: it exits
                server.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                runner.kill_tree(server.proc)
        for pipe in (server.proc.stdout, server.proc.stdin):
            if pipe is not None and not pipe.closed:
                pipe.close()
        server.stderr.close()

    def close(self) -> None:
        """End every server: each is told there are no more requests, and exits (all told
        first, so that they end side by side: a numba server takes 0.1 s to)."""
        for server in self.live.values():
            if server.proc.stdin is not None:
                try:
                    server.proc.stdin.close()
                except OSError:
                    pass  # it died: _end reaps it
        for session in list(self.live):
            self._end(session)
