"""Supervising the notebooks a run executes: each in a papermill child process of its own
session, stopped whole (its kernel, the kernel's sweep, the MPI ranks) when the run is
stopped, with time for the kernel to store what it measured first.

``burstbench run`` (burstbench.cli) executes its measurement notebooks through here; a
Ctrl-C, a scheduler's SIGTERM or a hang-up reaches this process, which interrupts the
kernel as Jupyter's stop button does and kills what is left after STOP_GRACE_S.

What no handler can catch (``kill -9`` of the run, the OOM killer) is covered three times:
the papermill child gets SIGTERM when the run dies (``PR_SET_PDEATHSIG``); a watcher
(``python -m burstbench.supervise TOKEN``, see start_watch) stops every process of the
sweep, found by the token in its environment (the kernel, its configurations and their MPI
ranks, in whatever session or process group they are); and, where Linux lets this process
make one, the whole tree is in a cgroup of its own, which the watcher empties.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from burstbench.core import locks, paths, runner, signals
from burstbench.report.kernel import STARTS


def execute_notebook(notebook: Path, output: Path, parameters: dict, log: bool,
                     timeout: float | None = None, committed: dict | None = None) -> str | None:
    """Run one notebook with papermill in a child process; None on success, else one line.

    The notebook runs with its parameters cell as `committed` (each name at its default),
    not as the file holds it: an explorer's saved edit is never measured, and a half-typed
    line never fails the run; `parameters` are injected after it.  The child has its own
    session, so Ctrl-C reaches only this process, which then stops the child's whole tree
    (see stop_notebook) and re-raises: what was measured is already stored, and the caller
    says how to resume.  A kernel that died before it answered (no cell ran) is started
    again, STARTS kernels in all (not with `log`, where papermill's errors are not read).
    """
    import tempfile

    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="burstbench-notebook-") as tmp:
        source = notebook
        if committed is not None:
            source = Path(tmp) / notebook.name
            _with_committed_parameters(notebook, source, committed)
        for _ in range(STARTS):  # a kernel that died before it answered ran no cell
            why = _papermill(source, output, parameters, log, timeout)
            if why != NEVER_STARTED:
                return why
        return f"{why}; {STARTS} kernels tried"


#: What papermill's last line says where the kernel died before it answered (see
#: burstbench.report.kernel.STARTS: its port may have been taken as it started).
NEVER_STARTED = "RuntimeError: Kernel died before replying to kernel_info"


def _with_committed_parameters(notebook: Path, dest: Path, committed: dict) -> None:
    """`notebook` written to `dest` with its parameters cell set to `committed`."""
    import nbformat

    from burstbench.report.executor import committed_parameters

    nb = nbformat.read(notebook, as_version=4)
    committed_parameters(nb, committed, "burstbench/benchmarks/<name>/params.py")
    nbformat.write(nb, dest)


def _papermill(source: Path, output: Path, parameters: dict, log: bool,
               timeout: float | None) -> str | None:
    """papermill `source` into `output` (a child process of its own session, see
    execute_notebook); None on success, else one line: the error of the cell that failed."""
    argv = [sys.executable, "-m", "papermill", str(source), str(output), "-y",
            yaml.safe_dump(parameters), "-k", "python3", "--cwd", str(paths.project_root()),
            "--no-progress-bar"] + (["--log-output"] if log else [])
    if timeout:
        argv += ["--execution-timeout", str(int(timeout))]
    proc = subprocess.Popen(argv, stdout=None if log else subprocess.DEVNULL,
                            stderr=None if log else subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_in_sweep(_SWEEP.get("cgroup")))
    try:
        _, err = runner.wait(proc)  # a Ctrl-C during the start above is not lost
    except KeyboardInterrupt:
        stop_notebook(proc)
        raise
    if proc.returncode == 0:
        return None
    lines = (err or "").strip().splitlines()
    return notebook_error(output) or (lines[-1] if lines else
                                      f"papermill exited with status {proc.returncode}")


#: Seconds a stopped notebook gets to store its state and exit before its tree is killed
#: (Slurm's default KillWait, between SIGTERM and SIGKILL, is 30 s).
STOP_GRACE_S = 20.0


def stop_notebook(proc: subprocess.Popen) -> None:
    """Stop a papermill child and everything under it; return when none of it is left.

    A scheduler may have signalled every process of the job: papermill then
    dies at once, and the kernel's sweep stops its configuration itself.  When
    papermill is still alive, only this process was told: interrupt the kernel
    (as Jupyter's stop button does), so that the sweep kills its configuration
    and marks the benchmark interrupted, and papermill saves the notebook and
    exits.  Whatever is left after STOP_GRACE_S is killed: papermill's group,
    and every descendant of this process (orphans come to it: see
    runner.adopt_orphans), MPI ranks in sessions of their own included.
    """
    print(f"stopping the notebook (at most {STOP_GRACE_S:g} s) ...", file=sys.stderr,
          flush=True)
    deadline = time.monotonic() + STOP_GRACE_S
    try:
        proc.communicate(timeout=0.5)
    except subprocess.TimeoutExpired:  # only we were told: interrupt the kernel
        kernels = runner.children(proc.pid)
        if kernels:
            runner.signal_all(kernels, signal.SIGINT)
        else:  # papermill is still starting it: nothing was measured yet
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=STOP_GRACE_S)
    while _left() and time.monotonic() < deadline:
        time.sleep(0.1)  # an orphaned kernel finishing its clean-up
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    runner.signal_all(_left(), signal.SIGKILL)
    proc.communicate()
    runner.reap_orphans()


def _left() -> list[int]:
    """This process's descendants but the sweep's watcher: what a stop waits for (the
    watcher lives until the run ends; waiting for it made every stop take STOP_GRACE_S,
    past the 10 s a scheduler gives between SIGTERM and SIGKILL)."""
    watcher = _SWEEP.get("watcher")
    return [p for p in runner.descendants(os.getpid()) if p != watcher]


def notebook_error(output: Path) -> str | None:
    """'ename: evalue' of the cell that failed in an executed notebook, if any."""

    try:
        nb = json.loads(output.read_text())
    except (OSError, ValueError):
        return None
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"{out.get('ename')}: {out.get('evalue')}"
    return None


#: Seconds the watcher gives a sweep's processes between SIGTERM and SIGKILL.
WATCH_GRACE_S = 0.5


#: The cgroup of the sweep that guarded() runs, while there is one (see sweep_cgroup).
_SWEEP: dict[str, Any] = {}


def sweep_cgroup(token: str) -> Path | None:
    """A cgroup (v2) of the sweep's own, below this process's: every process of the sweep
    starts in it, and the watcher empties it whatever their environment says.  Linux, where
    this process may make one (root, or a delegated subtree); None elsewhere."""
    try:
        own = next(ln[3:] for ln in Path("/proc/self/cgroup").read_text().splitlines()
                   if ln.startswith("0::"))
        mount = next(ln.split()[4] for ln in Path("/proc/self/mountinfo").read_text()
                     .splitlines() if " - cgroup2 " in ln)
        group = Path(mount + own.rstrip("/")) / f"burstbench-{token}"
        group.mkdir()
    except (OSError, StopIteration, IndexError):
        return None
    for old in group.parent.glob("burstbench-*"):  # left empty by a watcher killed outright
        if old != group and not locks.sweep_pids(old.name.split("-", 1)[1]):
            with contextlib.suppress(OSError):
                old.rmdir()  # refused (EBUSY) while a process is in it
    return group


def _in_sweep(group: Path | None) -> Callable[[], None]:
    """A preexec_fn: the child dies with this process (PR_SET_PDEATHSIG) and starts in the
    sweep's cgroup (where there is one), so that everything it starts is in it too."""
    die = runner.die_with_parent()

    def preexec() -> None:
        if die is not None:
            die()
        if group is not None:
            with contextlib.suppress(OSError):
                fd = os.open(group / "cgroup.procs", os.O_WRONLY)
                os.write(fd, b"0")
                os.close(fd)

    return preexec


def start_watch(token: str, group: Path | None = None) -> subprocess.Popen:
    """Start the watcher of the sweep `token`: when this process ends, however it ends (its
    pipe to the watcher closes with it, even on SIGKILL), the watcher stops every process
    whose environment carries the token (see locks.SWEEP_ENV) and empties the sweep's
    cgroup `group`, then exits."""
    return subprocess.Popen([sys.executable, "-m", "burstbench.supervise", token,
                             str(group or "")], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def end_watch(watcher: subprocess.Popen) -> None:
    """Close the watcher's pipe and wait for it to exit (nothing of the sweep is left then)."""
    with contextlib.suppress(OSError):
        if watcher.stdin is not None:
            watcher.stdin.close()
    watcher.wait()


def watch(token: str, group: Path | None = None) -> None:
    """The watcher: wait for its parent's pipe to close, then stop what is left of the sweep:
    SIGTERM first (an MPI launcher then takes its ranks down on every node), SIGKILL after
    WATCH_GRACE_S; then whatever is left in the sweep's cgroup, and the cgroup itself.

    The stop signals are ignored: a scheduler that signals every process of a job leaves
    the watcher to do its work once the run is gone.
    """
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    sys.stdin.buffer.read()
    for signum in (signal.SIGTERM, signal.SIGKILL, signal.SIGKILL):
        left = locks.sweep_pids(token)
        if not left:
            break
        runner.signal_all(left, signum)
        deadline = time.monotonic() + WATCH_GRACE_S
        while locks.sweep_pids(token) and time.monotonic() < deadline:
            time.sleep(0.05)
    if group is not None:
        _empty(group)


def _empty(group: Path) -> None:
    """Kill every process left in the cgroup `group` (cgroup.kill, or one by one before
    Linux 5.14), wait until it is empty, and remove it."""
    try:
        (group / "cgroup.kill").write_text("1")
    except OSError:
        with contextlib.suppress(OSError, ValueError):
            runner.signal_all([int(p) for p in (group / "cgroup.procs").read_text().split()],
                              signal.SIGKILL)
    deadline = time.monotonic() + 2 * WATCH_GRACE_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if "populated 0" in (group / "cgroup.events").read_text():
                break
        time.sleep(0.05)
    with contextlib.suppress(OSError):
        group.rmdir()


class WaitStopped(Exception):
    """A stop signal came while waiting for the host's measurement lock: nothing ran."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signals.signal_name(signum)} while waiting: nothing "
                         "was measured")
        self.signum = signum


@contextlib.contextmanager
def guarded(run_dir: Path, wait: bool = False, force: bool = False,
            say: Callable[[str], None] = print) -> Iterator[None]:
    """Within the block this process is the one writer of `run_dir` and the one sweep
    measuring on this host, and every process it starts belongs to its sweep.

    Takes the run's lock, then the host's (waiting for it with `wait`), saying whose stale
    lock was taken over; raises locks.Busy (naming the holder) or WaitStopped.  The sweep's
    token goes into the environment, so that its processes carry it, and a watcher stops
    them when this process dies.  At the end, the watcher is done and both locks released.
    """
    token = secrets.token_hex(8)
    fresh = not run_dir.exists()
    held = contextlib.ExitStack()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise locks.Busy(f"cannot create run folder {run_dir}: {exc.strerror}") from exc
    try:
        with signals.stop_signals():  # a stop while waiting for the host leaves no lock
            said = held.enter_context(locks.holding(run_dir, token, wait, force, say))
    except OSError as exc:
        raise locks.Busy(f"cannot take the lock {exc.filename}: {exc.strerror}") from exc
    except (locks.Busy, KeyboardInterrupt) as exc:
        if fresh:  # made only to hold the lock: leave no empty run behind
            with contextlib.suppress(OSError):
                run_dir.rmdir()
        if isinstance(exc, locks.Busy):
            raise
        raise WaitStopped(getattr(exc, "signum", signal.SIGINT)) from None
    with held:  # the locks, released last
        for line in said:
            say(line)
        os.environ[locks.SWEEP_ENV] = token  # every process of the sweep inherits it
        group = sweep_cgroup(token)
        if group is not None:
            _SWEEP["cgroup"] = group
        watcher = start_watch(token, group)
        _SWEEP["watcher"] = watcher.pid
        try:
            yield
        finally:
            end_watch(watcher)
            _SWEEP.pop("watcher", None)
            _SWEEP.pop("cgroup", None)
            if group is not None:  # the watcher's, unless it was killed
                with contextlib.suppress(OSError):
                    group.rmdir()
            os.environ.pop(locks.SWEEP_ENV, None)


#: Below this many bytes free, a notebook's failure is taken for a full disk (papermill's
#: own write of the executed notebook fails with its traceback, not a line).
LOW_SPACE_BYTES = 1 << 20


def is_full(why: str, run_dir: Path) -> bool:
    """True when a notebook failed for want of space on the run folder's file system."""
    from burstbench.core import store  # here: the watcher imports this module, not pandas

    return any(m in why for m in ("No space left on device", "[Errno 28]", "no space left on")) \
        or 0 <= store.free_bytes(run_dir) < LOW_SPACE_BYTES


def no_space(run_dir: Path, only: list[str], notebook: Path | None = None) -> str:
    """After a full disk: 'no space left on <run_dir> (N bytes free)'.  What is stored stays
    (every file is written whole); the benchmarks that ran are marked 'no space', and an
    executed notebook cut short is removed (the resume writes it again)."""
    from burstbench.core import store

    if notebook is not None:
        try:
            json.loads(notebook.read_text())
        except ValueError:
            notebook.unlink()
        except OSError:
            pass
    mark_stopped(run_dir, only, "no space")
    return str(store.NoSpace.at(run_dir))


def mark_stopped(run_dir: Path, only: list[str], status: str) -> str:
    """Mark `status` the benchmarks still 'running' (a kernel killed before it could say so
    left that), dropping what an earlier pass had left (no longer what is); return what is
    stored, e.g. 'triad 6 of 205 (interrupted)', 'storage 0 (not started)'."""
    from burstbench.core import store

    run = store.Run(run_dir)

    def mark(prov: dict) -> None:
        for name in only:
            sec = prov.get("benchmarks", {}).get(name, {})
            if sec.get("status") == "running":  # its parts not folded: see store.untrusted
                sec.update(status=status, folded=False)
                for stale in ("left", "left_estimate_s"):  # an earlier pass's, not what is
                    sec.pop(stale, None)

    try:
        secs = run.update_provenance(mark).get("benchmarks", {})
        counts = []
        for name in only:
            sec = secs.get(name, {})
            planned = f" of {sec['planned']}" if "planned" in sec else ""
            status = sec.get("status", "pending")
            counts.append(f"{name} {len(run.done_keys(name))}{planned} "
                          f"({'not started' if status == 'pending' else status})")
        return ", ".join(counts)
    except (OSError, ValueError, store.StoreError) as err:
        return f"unknown ({err})"


if __name__ == "__main__":
    watch(sys.argv[1], Path(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] else None)
