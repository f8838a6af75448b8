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

SCHEDULERS = {"pbs": "qsub", "slurm": "sbatch"}


class JobError(ValueError):
    """A job cannot be written or submitted; one line saying why."""


def render(scheduler: str, params: Path, nodes: int, vm: str, root: Path,
           walltime: str = "04:00:00", queue: str = "", only: str = "",
           runs_dir: str = "", python: str = "") -> str:
    """The job script text for `scheduler` (pbs or slurm)."""
    if scheduler not in SCHEDULERS:
        raise JobError(f"unknown scheduler '{scheduler}' (known: {', '.join(SCHEDULERS)})")
    if nodes < 1:
        raise JobError(f"nodes must be at least 1, not {nodes}")
    if not re.fullmatch(r"\d+:[0-5]\d:[0-5]\d", walltime):
        raise JobError(f"walltime must be HH:MM:SS, not '{walltime}'")
    python = python or sys.executable
    name = f"burstbench-{vm}"
    log = root / "data" / "runs" / vm
    run = [python, "-m", "burstbench", "run", "--params", str(params)]
    run += ["--only", only] if only else []
    run += ["--runs-dir", runs_dir] if runs_dir else []
    if scheduler == "pbs":
        head = [f"#PBS -N {name}", f"#PBS -l select={nodes}:mpiprocs=2",
                "#PBS -l place=scatter:excl", f"#PBS -l walltime={walltime}", "#PBS -j oe",
                f"#PBS -o {log}/"] + ([f"#PBS -q {queue}"] if queue else [])
        hosts = 'sort -u "$PBS_NODEFILE" | tr "\\n" " "'
    else:
        head = [f"#SBATCH --job-name={name}", f"#SBATCH --nodes={nodes}", "#SBATCH --exclusive",
                f"#SBATCH --time={walltime}", f"#SBATCH --output={log}/{name}-%j.out"] + \
               ([f"#SBATCH --partition={queue}"] if queue else [])
        hosts = 'scontrol show hostnames "$SLURM_JOB_NODELIST" | tr "\\n" " "'
    body = f"""#!/bin/bash
{chr(10).join(head)}
# Written by `python -m burstbench jobs`: runs the measurement notebooks for {vm} with
# {params} on {nodes} node(s). Multi-node MPI runs take their hosts from the scheduler.
set -euo pipefail
cd {shlex.quote(str(root))}
export BURSTBENCH_ROOT={shlex.quote(str(root))}
export BURSTBENCH_PROGRESS=lines
export PATH={shlex.quote(str(Path(python).parent))}:"$PATH"  # the environment's MPI first
mkdir -p {shlex.quote(str(log))}
echo "burstbench job on: $({hosts})"
exec {shlex.join(run)}
"""
    return body


def submit(scheduler: str, script: Path) -> str:
    """Submit `script`; JobError says so when the scheduler's command is not installed."""
    cmd = SCHEDULERS[scheduler]
    exe = shutil.which(cmd)
    if exe is None:
        raise JobError(f"{cmd} is not installed here: the script is in {script}, not submitted")
    proc = subprocess.run([exe, str(script)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise JobError(f"{cmd} refused {script}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()
