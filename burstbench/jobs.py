"""Job scripts that run the measurement notebooks on each VM under PBS Pro or Slurm.

In the study each measurement was a PBS Professional job under Azure
CycleCloud, which deployed the VMs per job and released them afterwards.  A
script here requests the nodes, enters the project's environment, prints the
hosts the scheduler gave, and runs ``python -m burstbench run``; the notebooks
take multi-node MPI hosts from ``$PBS_NODEFILE`` or ``$SLURM_JOB_NODELIST``.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from burstbench.registry import benchmarks

SCHEDULERS = {"pbs": "qsub", "slurm": "sbatch"}


class JobError(ValueError):
    """A job cannot be written or submitted; one line saying why."""


def log_dir(runs_dir: Path, vm: str) -> Path:
    """Where a job's output file goes: beside the VM's run folders.

    It must exist before the job starts: Slurm opens ``--output`` before the
    script's first line runs, and fails the job (JobLaunchFailure, no output
    anywhere) when the folder is missing.
    """
    return runs_dir / vm


def nodes_needed(checked: dict[str, dict]) -> tuple[int, str]:
    """The most nodes any benchmark to run asks for, and the key that asks (validated params
    per benchmark; each benchmark's ``nodes`` hook says how many it needs).

    Only explicit node counts count: the ping-pong's ``across-nodes`` placement
    is measured where the job has two nodes and skipped with a note otherwise.
    """
    need, key = 1, ""
    specs = benchmarks()
    for name, P in checked.items():
        spec = specs.get(name)
        if spec is not None and spec.nodes is not None:
            n, k = spec.nodes(P)
            if n > need:
                need, key = n, k
    return need, key


def render(scheduler: str, params: Path, nodes: int, vm: str, root: Path,
           walltime: str = "04:00:00", queue: str = "", only: str = "",
           runs_dir: Path | None = None, python: str = "", ranks_per_node: int | None = None,
           threads: int | None = None) -> str:
    """The job script text for `scheduler` (pbs or slurm).

    The job asks to be requeued when preempted (a spot VM evicted): the
    requeued job runs the same command, which resumes the unfinished run
    folder, and appends to the same output file.  Each node holds
    `ranks_per_node` MPI ranks of `threads` OpenMP threads each: PBS's
    ``select=N:ncpus=R*T:mpiprocs=R:ompthreads=T`` (1 x 1 unless given; the node
    is the job's alone either way, ``place=scatter:excl``), Slurm's
    ``--ntasks-per-node`` and ``--cpus-per-task`` where given.
    """
    if scheduler not in SCHEDULERS:
        raise JobError(f"unknown scheduler '{scheduler}' (known: {', '.join(SCHEDULERS)})")
    if nodes < 1:
        raise JobError(f"nodes must be at least 1, not {nodes}")
    if not re.fullmatch(r"\d+:[0-5]\d:[0-5]\d", walltime):
        raise JobError(f"walltime must be HH:MM:SS, not '{walltime}'")
    for what, n in (("ranks per node", ranks_per_node), ("threads", threads)):
        if n is not None and n < 1:
            raise JobError(f"{what} must be at least 1, not {n}")
    python = python or sys.executable
    name = f"burstbench-{vm}"
    runs = runs_dir or root / "data" / "runs"
    log = log_dir(runs, vm)
    run = [python, "-m", "burstbench", "run", "--params", str(params), "--runs-dir", str(runs)]
    run += ["--only", only] if only else []
    if scheduler == "pbs":
        r, t = ranks_per_node or 1, threads or 1
        head = [f"#PBS -N {name}",
                f"#PBS -l select={nodes}:ncpus={r * t}:mpiprocs={r}:ompthreads={t}",
                "#PBS -l place=scatter:excl", f"#PBS -l walltime={walltime}", "#PBS -j oe",
                "#PBS -r y", f"#PBS -o {log}/"] + ([f"#PBS -q {queue}"] if queue else [])
        hosts = 'sort -u "$PBS_NODEFILE" | paste -sd " " -'
    else:
        head = [f"#SBATCH --job-name={name}", f"#SBATCH --nodes={nodes}", "#SBATCH --exclusive",
                f"#SBATCH --time={walltime}", f"#SBATCH --output={log}/{name}-%j.out",
                "#SBATCH --open-mode=append", "#SBATCH --requeue"] + \
               ([f"#SBATCH --partition={queue}"] if queue else []) + \
               ([f"#SBATCH --ntasks-per-node={ranks_per_node}"] if ranks_per_node else []) + \
               ([f"#SBATCH --cpus-per-task={threads}"] if threads else [])
        hosts = 'scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd " " -'
    body = f"""#!/bin/bash
{chr(10).join(head)}
# Written by `python -m burstbench jobs`: runs the measurement notebooks for {vm} with
# {params} on {nodes} node(s). Multi-node MPI runs take their hosts from the scheduler.
# The nodes are the job's alone (exclusive): the scheduler already runs one measurement per
# node at a time; `burstbench run` keeps its own host lock anyway (it is cheap).
set -euo pipefail
cd {shlex.quote(str(root))}
export BURSTBENCH_ROOT={shlex.quote(str(root))}
export BURSTBENCH_PROGRESS=lines
export PATH={shlex.quote(str(Path(python).parent))}:"$PATH"  # the environment's MPI first
echo "burstbench job ${{SLURM_JOB_ID:-${{PBS_JOBID:-}}}} on: $({hosts}) ($(date -Is))"
exec {shlex.join(run)}
"""
    return body


def submit(scheduler: str, script: Path, timeout: float = 120) -> str:
    """Submit `script`; JobError says so when the scheduler's command is not installed."""
    cmd = SCHEDULERS[scheduler]
    exe = shutil.which(cmd)
    if exe is None:
        raise JobError(f"{cmd} is not installed here: the script is in {script}, not submitted")
    try:
        proc = subprocess.run([exe, str(script)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise JobError(f"{cmd} gave no answer within {timeout:g} s (is the scheduler's "
                       f"controller up?): {script} was not submitted") from None
    if proc.returncode != 0:
        raise JobError(f"{cmd} refused {script}: {_one_line(proc.stderr or proc.stdout)}")
    return proc.stdout.strip()


def _one_line(text: str) -> str:
    """A scheduler's message on one line: its lines joined, repeated prefixes dropped."""
    lines = [re.sub(r"^\w+: error: ", "", ln.strip()) for ln in text.strip().splitlines()]
    return "; ".join(dict.fromkeys(ln for ln in lines if ln)) or "no message"
