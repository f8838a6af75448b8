"""Sweeps: one fresh process per configuration, stored as it finishes, resumable.

OpenMP reads its affinity variables once, when the runtime starts, and MPI
runs belong under ``mpiexec``: so every configuration is its own process,
started with its environment set at launch and a timeout, in its own process
group so that a hung run (and its children) can be killed whole.  Each result
is stored the moment it arrives; a re-run skips what is stored.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from tqdm import tqdm

from burstbench.store import Run

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

    @property
    def title(self) -> str:
        c = self.config
        return " ".join(str(x) for x in (c.get("label"), f"threads={c.get('threads')}"
                                          if c.get("threads") else "",
                                          f"rep {c.get('repetition')}") if x)


class TaskFailed(Exception):
    """A configuration gave no result; the message is one line saying why."""


@dataclass
class SweepResult:
    total: int
    already_stored: int
    measured: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (title, reason)
    interrupted: bool = False
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.failed and not self.interrupted


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


def launch(task: Task) -> tuple[str, str]:
    """Run `task` in a fresh process group; return (stdout, stderr) or raise TaskFailed."""
    env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
    env.update(dict(task.env))
    try:
        proc = subprocess.Popen(task.argv, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    except OSError as exc:
        raise TaskFailed(f"cannot start {task.argv[0]}: {exc.strerror}") from exc
    try:
        out, err = proc.communicate(timeout=task.timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise TaskFailed(f"no result within the timeout of {task.timeout_s:g} s; stopped")
    except BaseException:  # Ctrl-C: take the whole process group down with us
        _kill(proc)
        raise
    if proc.returncode != 0:
        raise TaskFailed(_error_line(err, proc.returncode))
    return out, err


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()


Parser = Callable[[Task, str, str], tuple[list[dict], list[dict], str]]


def _progress_mode() -> str:
    """'bar' in a terminal or a Jupyter kernel, 'lines' in logs (BURSTBENCH_PROGRESS overrides)."""
    mode = os.environ.get("BURSTBENCH_PROGRESS", "")
    if mode in ("bar", "lines", "off"):
        return mode
    return "bar" if sys.stdout.isatty() or "ipykernel" in sys.modules else "lines"


class Progress:
    """A tqdm bar, or one counted line per configuration with the time left (for logs)."""

    def __init__(self, total: int, done: int, desc: str, enabled: bool = True):
        self.mode = _progress_mode() if enabled else "off"
        self.total, self.count, self.start_count = total, done, done
        self.start = time.monotonic()
        self.bar = tqdm(total=total, initial=done, file=sys.stdout, desc=desc, unit="run",
                        ascii=True, ncols=90, mininterval=1.0) if self.mode == "bar" else None

    def step(self, message: str) -> None:
        self.count += 1
        if self.bar is not None:
            self.bar.write(message)
            self.bar.update(1)
        elif self.mode == "lines":
            rate = (time.monotonic() - self.start) / max(1, self.count - self.start_count)
            left = rate * (self.total - self.count)
            print(f"[{self.count}/{self.total} {100 * self.count // max(1, self.total)}% "
                  f"~{left / 60:.0f} min left] {message}", flush=True)

    def note(self, message: str) -> None:
        (self.bar.write if self.bar is not None else print)(message)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def sweep(tasks: list[Task], run: Run, benchmark: str, parse: Parser,
          progress: bool = True) -> SweepResult:
    """Run every task not yet stored in `run`; store each result as soon as it is parsed.

    `parse(task, stdout, stderr)` returns (rows, raw records, one-line summary)
    or raises TaskFailed.  A failed task is reported and the sweep goes on; a
    KeyboardInterrupt stops it with everything measured so far kept.
    """
    done = run.done_keys(benchmark)
    todo = [t for t in tasks if t.key not in done]
    result = SweepResult(total=len(tasks), already_stored=len(tasks) - len(todo))
    if result.already_stored:
        print(f"resuming {run.root}: {result.already_stored} of {len(tasks)} configurations "
              "already stored")
    start = time.monotonic()
    bar = Progress(len(tasks), result.already_stored, benchmark, progress)
    stamp = {"run_id": run.run_id, "vm": run.vm}
    try:
        for task in todo:
            try:
                out, err = launch(task)
                rows, raw, summary = parse(task, out, err)
            except TaskFailed as exc:
                result.failed.append((task.title, str(exc)))
                bar.step(f"FAILED {task.title}: {exc}")
            else:
                run.save(benchmark, task.key, [r | stamp for r in rows], raw)
                result.measured += 1
                bar.step(f"{task.title}: {summary}")
    except KeyboardInterrupt:
        result.interrupted = True
        bar.note(f"interrupted: {result.already_stored + result.measured} of {len(tasks)} "
                 f"configurations are stored in {run.root}; run the same command again "
                 f"(or pass run_id={run.run_id}) to resume")
    finally:
        bar.close()
        result.seconds = time.monotonic() - start
    return result
