"""Supervising the notebooks a run executes: each in a papermill child process of its own
session, stopped whole (its kernel, the kernel's sweep, the MPI ranks) when the run is
stopped, with time for the kernel to store what it measured first.

``burstbench run`` (burstbench.cli) executes its measurement notebooks through here; a
Ctrl-C, a scheduler's SIGTERM or a hang-up reaches this process, which interrupts the
kernel as Jupyter's stop button does and kills what is left after STOP_GRACE_S.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from burstbench.core import paths, runner


def execute_notebook(notebook: Path, output: Path, parameters: dict, log: bool,
                     timeout: float | None = None) -> str | None:
    """Run one notebook with papermill in a child process; None on success, else one line.

    The child has its own session, so Ctrl-C reaches only this process, which
    then stops the child's whole tree (see stop_notebook) and re-raises: what
    was measured is already stored, and the caller says how to resume.
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "papermill", str(notebook), str(output), "-y",
            yaml.safe_dump(parameters), "-k", "python3", "--cwd", str(paths.project_root()),
            "--no-progress-bar"] + (["--log-output"] if log else [])
    if timeout:
        argv += ["--execution-timeout", str(int(timeout))]
    proc = subprocess.Popen(argv, stdout=None if log else subprocess.DEVNULL,
                            stderr=None if log else subprocess.PIPE, text=True,
                            start_new_session=True)
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
    while runner.descendants(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.1)  # an orphaned kernel finishing its clean-up
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    runner.signal_all(runner.descendants(os.getpid()), signal.SIGKILL)
    proc.communicate()
    runner.reap_orphans()


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
