"""Sweeps: a process per configuration (or per session), stored as it finishes, resumable.

OpenMP reads its affinity variables once, when the runtime starts, and MPI
runs belong under ``mpiexec``: so every configuration is its own process,
started with its environment set at launch and a timeout, in its own process
group so that a hung run (and its children) can be killed whole.  Tasks that
name a session (the Triad's repetitions of one affinity setting) are measured
in turn by one process that serves them (burstbench.core.servers), killed
alike.  Each result is stored the moment it arrives; a re-run skips what is
stored.

Stopping: Ctrl-C, SIGTERM (a scheduler's cancel or time limit) and SIGHUP (a
hang-up) all stop a sweep the same way: the running configuration is killed
with everything it started, what was measured stays stored.  A configuration
also dies with the process that launched it (Linux ``PR_SET_PDEATHSIG``), so a
killed Jupyter kernel leaves no solver running.

Long: launching, stopping and reaping a configuration's process tree, and the sweep loop
that stores each result (with its budget check), belong together.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from burstbench.core import budget, contention
from burstbench.core.signals import Interrupted, raise_if_stopped, signal_name, stop_signals

if TYPE_CHECKING:  # annotations only: a plan needs no store
    from burstbench.core.servers import Servers
    from burstbench.core.store import Run

#: Variables a configuration sets itself: inherited values would leak into it.
CLEARED_ENV = ("OMP_PLACES", "OMP_PROC_BIND", "KMP_AFFINITY", "GOMP_CPU_AFFINITY",
               "OMP_NUM_THREADS")


@dataclass(frozen=True)
class Task:
    """One configuration: the command, its environment and the columns it fills."""

    key: str
    config: dict
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 600.0
    estimate_s: float = 0.0  # the planner's guess of its seconds (a work model); 0: unknown
    priority: int = 0  # 0: what the decision needs first (see budget.prioritized); 1: the rest
    #: Tasks of one session (their argv and env alike) are measured in turn by one process
    #: that serves them (burstbench.core.servers: its kernel started with --serve); "": each
    #: in a fresh process.
    session: str = ""
    #: Bytes its session's server holds at most, most of them kept between requests (the
    #: Triad's arrays): where all sessions' do not fit, servers.in_blocks measures them a
    #: few sessions at a time; 0: unknown, the plan's order stands.
    keeps: int = 0
    #: Removes what the configuration leaves behind when it does not end by itself (files
    #: of a write killed by its timeout, a stop signal or a dead rank); None: nothing to.
    cleanup: Callable[[], None] | None = field(default=None, compare=False)

    @property
    def configurations(self) -> int:
        """How many configurations this one process measures in turn."""
        return len(self.each())

    def each(self) -> list[dict]:
        """The configurations this process measures, in turn: its config's "runs", each a
        configuration's own fields over the process's; else its config alone."""
        common = {k: v for k, v in self.config.items() if k != "runs"}
        return [common | run for run in self.config.get("runs") or [{}]]

    @property
    def title(self) -> str:
        c = self.config
        runs = c.get("runs") or []
        threads = ",".join(dict.fromkeys(str(r["threads"]) for r in runs if "threads" in r))
        threads = threads or (str(c["threads"]) if c.get("threads") else "")
        return " ".join(str(x) for x in (c.get("label"), f"threads={threads}" if threads
                                          else "", f"rep {c.get('repetition')}") if x)


class TaskFailed(Exception):
    """A configuration gave no result; the message is one line saying why."""


def json_records(stdout: str, stderr: str) -> list[dict]:
    """The JSON lines a kernel printed (the lines starting with '{'); TaskFailed where one
    is unreadable or there is none (with the last line of stderr, the likely reason)."""
    try:
        records = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]
    except ValueError as exc:
        raise TaskFailed(f"unreadable kernel output ({exc})") from exc
    if not records:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        raise TaskFailed("the kernel printed no result" + (f": {last}" if last else ""))
    return records


#: Seconds between two looks at a lost stop signal while a child runs.
POLL_S = 0.25


def wait(proc: subprocess.Popen, timeout: float | None = None) -> tuple[str, str]:
    """``proc.communicate(timeout)`` that also notices a stop signal whose exception was lost.

    Raises subprocess.TimeoutExpired after `timeout` seconds (None: no limit),
    and Interrupted within POLL_S of a stop signal received in a stop_signals block.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        step = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic()))
        try:
            return proc.communicate(timeout=step)
        except subprocess.TimeoutExpired:
            raise_if_stopped()
            if deadline is not None and time.monotonic() >= deadline:
                raise


@dataclass
class SweepResult:
    total: int
    already_stored: int
    measured: int = 0  # tasks (processes) measured
    configurations: int = 0  # the configurations they measured (a process may hold several)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (title, reason)
    interrupted: bool = False
    seconds: float = 0.0
    contended: int = 0  # configurations measured while others took the cores (contention)
    left: list[Task] = field(default_factory=list)  # not measured: the budget or a stop came first
    measured_estimate_s: float = 0.0  # the estimates of the configurations measured
    task_seconds: float = 0.0  # their wall time, each from its start to its result stored
    timed_seconds: float = 0.0  # the kernels' own timed seconds (timed_seconds())
    predicted_s: float = 0.0  # the calibrated estimates of those measured (scale())
    blocks: int = 1  # the sessions measured a few at a time (servers.in_blocks); 1: all

    def scale(self) -> float:
        """The work model calibrated on this machine: measured over estimated seconds of the
        configurations measured so far (the first one is the probe), 1 before any."""
        if not self.measured_estimate_s:
            return 1.0
        return min(10.0, max(0.1, self.task_seconds / self.measured_estimate_s))

    @property
    def complete(self) -> bool:
        return not self.failed and not self.interrupted and not self.left


def _error_line(stderr: str, rc: int) -> str:
    """One line saying why: our own 'error:' line, else a launcher's first and last lines
    (MPI launchers put the cause first and a generic summary last)."""
    lines = [ln.strip() for ln in stderr.strip().splitlines()
             if re.search(r"\w", ln) and not ln.strip().startswith("<frozen")]
    errors = [ln for ln in lines if ln.lower().startswith("error")]
    if errors:
        return errors[-1]
    if not lines:
        return f"exit status {rc}"
    return lines[0] if len(lines) == 1 else f"{lines[0]} | {lines[-1]}"


#: What MPI launchers print when a rank dies of a signal: hydra (MPICH, Intel MPI) on
#: stdout "EXIT STRING: Killed (signal 9)", Open MPI on stderr "exited on signal 9 (Killed)".
_RANK_SIGNAL = re.compile(r"EXIT STRING: .*\(signal (\d+)\)|exited on signal (\d+)")


def failure(out: str, err: str, rc: int) -> str:
    """One line saying why a configuration failed, naming the signal when one killed it."""
    m = _RANK_SIGNAL.search(out + "\n" + err)
    if m:
        n = int(m.group(1) or m.group(2))
        return f"rank killed by signal {n} ({signal_name(n)})"
    if rc < 0:
        return f"killed by signal {-rc} ({signal_name(-rc)})"
    return _error_line(err, rc)


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn: the child gets SIGTERM when the thread that started it dies (Linux).

    SIGTERM, not SIGKILL: an MPI launcher then takes its ranks down with it, on
    every node.  None where prctl is not there.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: do not run orphaned
            os._exit(128 + signal.SIGTERM)

    return preexec


#: The servers of the sweep that run_tasks is running (none outside one): launch() gives
#: them the tasks that name a session.
_SERVING: list[Servers] = []


def launch(task: Task) -> tuple[str, str]:
    """Run `task` in a fresh process group, or where it names a session and a sweep is
    running, in that session's server (burstbench.core.servers); return (stdout, stderr)
    or raise TaskFailed.

    The process dies with its launcher; on a timeout, Ctrl-C, SIGTERM or SIGHUP
    its whole tree is killed (MPI ranks included, which hydra puts in sessions
    of their own) before this returns.
    """
    if task.session and _SERVING:
        return _SERVING[-1].launch(task)
    env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
    env.update(dict(task.env))
    try:
        proc = subprocess.Popen(task.argv, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                preexec_fn=die_with_parent())
    except OSError as exc:
        raise TaskFailed(f"cannot start {task.argv[0]}: {exc.strerror}") from exc
    try:
        out, err = wait(proc, task.timeout_s)
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        raise TaskFailed(f"no result within the timeout of {task.timeout_s:g} s; stopped"
                         + clean_up(task)) from None
    except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: take the whole tree down with us
        kill_tree(proc)
        clean_up(task)
        raise
    if proc.returncode != 0:
        raise TaskFailed(failure(out, err, proc.returncode) + clean_up(task))
    return out, err


def clean_up(task: Task) -> str:
    """Run the task's clean-up once its processes are gone; '' or what it could not do."""
    if task.cleanup is None:
        return ""
    try:
        task.cleanup()
    except Exception as exc:  # a clean-up that fails must not hide why the task failed
        return f" (and its clean-up failed: {exc})"
    return ""


def _parents() -> dict[int, int]:
    """{pid: parent pid} of every live (not zombie) process, from /proc."""
    out = {}
    for d in Path("/proc").iterdir():
        fields = contention.stat_fields(d.name) if d.name.isdigit() else None
        if fields and fields[0] != "Z":  # None: not a process, or gone meanwhile
            out[int(d.name)] = int(fields[1])
    return out


def descendants(pid: int) -> list[int]:
    """Live descendants of `pid`, parents before children ([] where /proc is missing)."""
    if not Path("/proc/self/stat").exists():
        return []
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo += children.get(p, [])
    return out


def children(pid: int) -> list[int]:
    """Live children of `pid`."""
    return [c for c, parent in _parents().items() if parent == pid]


_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> bool:
    """Make this process the one that orphaned descendants are reparented to (Linux).

    Then descendants() still finds a kernel whose papermill died, and the
    caller can wait for (or kill) every process it started, however deep.
    False where that is not possible.
    """
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans() -> None:
    """Collect the exit status of adopted orphans that ended (call with no child running)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def signal_all(pids: list[int], signum: int) -> None:
    """Send `signum` to each of `pids`, skipping those already gone."""
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signum)


def kill_tree(proc: subprocess.Popen, grace_s: float = 2.0) -> None:
    """Stop `proc`, its process group and every descendant, then reap it.

    SIGTERM first, so an MPI launcher takes its ranks down on every node;
    SIGKILL after `grace_s` for whatever is left here.  Descendants are found
    before any dies (orphans lose their ancestry), MPI ranks in sessions of
    their own included.
    """
    tree = descendants(proc.pid)
    for signum in (signal.SIGTERM, signal.SIGKILL):
        tree += [p for p in descendants(proc.pid) if p not in tree]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signum)
        signal_all(tree, signum)
        try:
            proc.communicate(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    else:  # something that escaped us holds the pipes open: do not wait for it
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe:
                pipe.close()
    live = _parents()
    signal_all([p for p in tree if p in live], signal.SIGKILL)  # any that left the pipes


#: The fields in which kernels print their own timed seconds: the Triad's per-pass times,
#: a solve's, a storage phase's, a ping-pong's per message size.
TIMED_FIELDS = ("times_s", "solve_s", "total_s", "seconds")


def timed_seconds(records: list[dict]) -> float:
    """The seconds a configuration's kernels timed themselves, from their raw records."""
    total = 0.0
    for rec in records:
        for f in TIMED_FIELDS:
            v = rec.get(f) if isinstance(rec, dict) else None
            if isinstance(v, list):
                total += sum(x for x in v if isinstance(x, (int, float)))
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                total += v
    return total


Parser = Callable[[Task, str, str], tuple[list[dict], list[dict], str]]


def _progress_mode() -> str:
    """'bar' in a terminal or a Jupyter kernel, 'lines' in logs (BURSTBENCH_PROGRESS overrides)."""
    mode = os.environ.get("BURSTBENCH_PROGRESS", "")
    if mode in ("bar", "lines", "off"):
        return mode
    return "bar" if sys.stdout.isatty() or "ipykernel" in sys.modules else "lines"


def time_left(sweep_s: float) -> str:
    """A progress line's time left: the sweep's, and the budget's where it ends sooner (the
    sweep stops there, what is left stored as left)."""
    text = f"~{sweep_s / 60:.0f} min left"
    budget_s = budget.left_s()
    ends = f"{max(0.0, budget_s) / 60:.0f}" if budget_s is not None else ""
    if budget_s is not None and budget_s < sweep_s and ends != f"{sweep_s / 60:.0f}":
        text += f", the budget ends in {ends} min"
    return text


class Progress:
    """A tqdm bar, or one counted line per configuration with the time left (for logs)."""

    def __init__(self, total: int, done: int, desc: str, enabled: bool = True):
        self.mode = _progress_mode() if enabled else "off"
        self.total, self.count, self.start_count = total, done, done
        self.start = time.monotonic()
        from tqdm import tqdm  # a bar only where one is drawn

        self.bar = tqdm(total=total, initial=done, file=sys.stdout, desc=desc, unit="run",
                        ascii=True, ncols=90, mininterval=1.0) if self.mode == "bar" else None

    def step(self, message: str) -> None:
        self.count += 1
        if self.bar is not None:
            self.bar.write(message)
            self.bar.update(1)
            budget_s = budget.left_s()
            if budget_s is not None:  # tqdm's own ETA is the whole sweep's
                self.bar.set_postfix_str(f"budget ends in {max(0.0, budget_s) / 60:.0f} min")
        elif self.mode == "lines":
            rate = (time.monotonic() - self.start) / max(1, self.count - self.start_count)
            print(f"[{self.count}/{self.total} {100 * self.count // max(1, self.total)}% "
                  f"{time_left(rate * (self.total - self.count))}] {message}", flush=True)

    def note(self, message: str) -> None:
        (self.bar.write if self.bar is not None else print)(message)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_tasks(tasks: list[Task], run: Run, benchmark: str, parse: Parser,
              columns: tuple[str, ...] = (), progress: bool = True) -> SweepResult:
    """Run every task not yet stored in `run`; store each result as soon as it is parsed.

    `parse(task, stdout, stderr)` returns (rows, raw records, one-line summary)
    or raises TaskFailed; its rows are stored with the table's `columns` (store.Run.save),
    with the benchmark's name and the task's key where a row does not carry them itself,
    and the share of the CPU other processes took meanwhile (burstbench.core.contention).
    A failed task is reported and the sweep goes on; a
    KeyboardInterrupt, SIGTERM or SIGHUP stops it with everything measured so far
    kept and the running configuration killed whole.
    """
    done = run.done_keys(benchmark)
    todo, later = budget.order([t for t in tasks if t.key not in done])
    result = SweepResult(total=len(tasks), already_stored=len(tasks) - len(todo) - len(later),
                         left=later)
    if result.already_stored:
        print(f"resuming {run.root}: {result.already_stored} of {len(tasks)} configurations "
              "already stored")
    from burstbench.core import servers as serving  # it builds on this module

    room = serving.room()
    todo, result.blocks = serving.in_blocks(todo, room)
    if result.blocks > 1:
        held = serving.kept(todo)
        print(f"note: the {len(held)} processes would hold {sum(held.values()) / 1e9:.3g} "
              f"GB side by side, more than the {room / 1e9:.3g} GB that leave "
              f"{serving.SERVE_RESERVE:.0%} of the memory free: they measure in "
              f"{result.blocks} blocks, one after another, each process touching its "
              "memory once (repetitions alternate within a block)")
    start = time.monotonic()
    bar = Progress(len(tasks), result.already_stored, benchmark, progress)
    stamp = {"run_id": run.run_id, "vm": run.vm}
    servers = serving.Servers()
    servers.expect(todo)
    _SERVING.append(servers)
    at, spent = 0, False  # the task the sweep is at; whether the budget stopped it
    try:
        with stop_signals(), servers:  # SIGTERM, SIGHUP as Ctrl-C: a scheduler may signal us
            for at, task in enumerate(todo):
                raise_if_stopped()
                scale = result.scale()
                if not budget.fits(task, scale):  # the rest waits for the next --budget
                    result.left, spent = todo[at:] + later, True
                    break
                began = time.monotonic()
                try:
                    before = contention.sample(servers.pids())
                    out, err = launch(task)
                    load = contention.columns(before, contention.sample(servers.pids()))
                    rows, raw, summary = parse(task, out, err)
                except TaskFailed as exc:
                    result.failed.append((task.title, str(exc)))
                    bar.step(f"FAILED {task.title}: {exc}")
                else:
                    run.save(benchmark, task.key, [{"benchmark": benchmark, "key": task.key}
                                                   | r | stamp | load for r in rows], raw, columns)
                    result.measured += 1
                    result.configurations += task.configurations
                    result.measured_estimate_s += task.estimate_s
                    result.predicted_s += task.estimate_s * scale
                    result.task_seconds += time.monotonic() - began
                    result.timed_seconds += timed_seconds(raw)
                    result.contended += load["contended"]
                    busy = (f" [contended: others took {load['others_cpu']:.0%} of the CPU]"
                            if load["contended"] else "")
                    bar.step(f"{task.title}: {summary}{busy}")
    except KeyboardInterrupt as exc:
        result.interrupted = True
        if not spent:  # left: all this pass did not store from `at` on, and later passes'
            stored = run.done_keys(benchmark)
            result.left = [t for t in todo[at:] if t.key not in stored] + later
        how = f" by {signal_name(exc.signum)}" if isinstance(exc, Interrupted) else ""
        bar.note(f"interrupted{how}: {result.already_stored + result.measured} of {len(tasks)} "
                 f"configurations are stored in {run.root}; run the same command again "
                 f"(or pass run_id={run.run_id}) to resume")
    finally:
        _SERVING.remove(servers)
        bar.close()
        result.seconds = time.monotonic() - start
    return result
