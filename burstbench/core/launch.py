"""Launching MPI jobs: one class per launcher, the hosts of a batch job, and command lookup.

Every MPI sweep says where its ranks go as a `Layout` (ranks, ranks per node,
threads per rank or explicit CPUs, hosts) and asks its combination's
`Launcher` for the arguments and environment that put them there: a small
registry with one class per launcher, as ReFrame's ``core/launchers/mpi.py``.
Hosts come from the parameters, else from the batch job: ``$PBS_NODEFILE``, or
``$SLURM_JOB_NODELIST`` expanded by the scheduler itself (``scontrol show
hostnames``) and, where it cannot, by :func:`parse_nodelist`.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from burstbench.core.checks import ParamError
from kernels_ext.common import sysinfo

#: The batch schedulers' variables that name a job's hosts, in the order they are asked.
SCHEDULER_VARS = ("PBS_NODEFILE", "SLURM_JOB_NODELIST")


# -- where ranks go ----------------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """Where the ranks of one MPI job go.

    ranks: ranks in all; per_node: ranks on each host; threads: cores of each
    rank (its OpenMP threads); cpus: explicit CPUs instead, the i-th rank of a
    node on cpus[i]; hosts: one name per node, empty for this machine alone.
    """

    ranks: int
    per_node: int
    threads: int = 1
    cpus: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()

    @property
    def nodes(self) -> int:
        return max(1, len(self.hosts))

    @property
    def cpu_list(self) -> str:
        return ",".join(map(str, self.cpus))

    @property
    def host_list(self) -> str:
        return ",".join(self.hosts)


def topology(sys_cpu: Path = sysinfo.SYS_CPU) -> list[tuple[int, int, int]]:
    """(cpu, socket, core) of every CPU this process may use, from sysfs."""
    return sysinfo.cpu_topology(sorted(os.sched_getaffinity(0)), sys_cpu)


def placement_cpus(kind: str, topo: list[tuple[int, int, int]]) -> tuple[int, int] | None:
    """Two CPUs for a placement: two cores of the first socket, or the first core of two
    sockets; None when this machine has no such pair."""
    first_per_core: dict[tuple[int, int], int] = {}
    for cpu, pkg, core in topo:
        first_per_core.setdefault((pkg, core), cpu)
    sockets: dict[int, list[int]] = {}
    for (pkg, _), cpu in sorted(first_per_core.items(), key=lambda kv: kv[1]):
        sockets.setdefault(pkg, []).append(cpu)
    pkgs = sorted(sockets)
    if kind == "same-socket":
        big = next((p for p in pkgs if len(sockets[p]) >= 2), None)
        return None if big is None else (sockets[big][0], sockets[big][1])
    if kind == "across-sockets" and len(pkgs) >= 2:
        return sockets[pkgs[0]][0], sockets[pkgs[1]][0]
    return None


# -- launchers ---------------------------------------------------------------------------

class Launcher:
    """A launcher told only the rank count (``mpiexec -n N``): the generic fallback.

    mpiexec: the launcher's path; family: the MPI library's ABI family,
    "mpich" or "openmpi" (kernels_ext.pingpong.library_family), "" unknown;
    args and env: what the combination itself gives the launcher.
    """

    name: ClassVar[str] = "none"

    def __init__(self, mpiexec: str = "", family: str = "", args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None):
        self.mpiexec, self.family = mpiexec, family
        self.given_args, self.given_env = tuple(args), dict(env or {})

    def args(self, layout: Layout) -> list[str]:
        """Arguments that start `layout.ranks` ranks where `layout` says."""
        return ["-n", str(layout.ranks)]

    def env(self, layout: Layout) -> dict[str, str]:
        """Environment variables the launcher reads for `layout` (pinning, mostly)."""
        return {}


#: Launcher classes by the name a combination's ``launcher`` key gives.
LAUNCHERS: dict[str, type[Launcher]] = {"none": Launcher}


def register(cls: type[Launcher]) -> type[Launcher]:
    """Class decorator: make `cls` the launcher of its ``name``."""
    LAUNCHERS[cls.name] = cls
    return cls


@register
class Hydra(Launcher):
    """MPICH's and MVAPICH's mpiexec (Hydra): hosts, ranks per host and binding as options."""

    name = "hydra"

    def hosts(self, layout: Layout) -> list[str]:
        return ["-hosts", layout.host_list, "-ppn", str(layout.per_node)] if layout.hosts else []

    def args(self, layout: Layout) -> list[str]:
        bind = f"user:{layout.cpu_list}" if layout.cpus else f"core:{layout.threads}"
        return self.hosts(layout) + ["-bind-to", bind, "-n", str(layout.ranks)]


@register
class Intel(Hydra):
    """Intel MPI's mpiexec (Hydra too): hosts as options, pinning by environment."""

    name = "intel"

    def args(self, layout: Layout) -> list[str]:
        return self.hosts(layout) + ["-n", str(layout.ranks)]

    def env(self, layout: Layout) -> dict[str, str]:
        if layout.cpus:
            return {"I_MPI_PIN_PROCESSOR_LIST": layout.cpu_list}
        return {"I_MPI_PIN_DOMAIN": str(layout.threads), "I_MPI_PIN_CELL": "core"}


@register
class OpenMPI(Launcher):
    """Open MPI 4.x's mpirun: slots per host, a CPU list or ranks x cores mapped per node."""

    name = "openmpi"

    def args(self, layout: Layout) -> list[str]:
        out = (["--host", ",".join(f"{h}:{layout.per_node}" for h in layout.hosts)]
               if layout.hosts else [])
        if layout.cpus:
            out += ["--cpu-list", layout.cpu_list, "--bind-to", "cpu-list:ordered"]
        else:
            out += ["--map-by", f"ppr:{layout.per_node}:node:PE={layout.threads}",
                    "--bind-to", "core"]
        return out + ["-n", str(layout.ranks)]


@register
class Slurm(Launcher):
    """srun inside a Slurm allocation, with the PMI plugin the MPI library needs.

    Without ``--mpi`` each rank of the mpich wheel starts a world of its own;
    MPICH-family libraries speak PMI-2, Open MPI PMIx where srun offers it.
    """

    name = "slurm"

    def mpi_plugin(self) -> str:
        """The ``--mpi`` plugin to ask for: '' where the combination names one itself
        (args or $SLURM_MPI_TYPE) or none fits the MPI family."""
        if any(a == "--mpi" or a.startswith("--mpi=") for a in self.given_args) or \
                "SLURM_MPI_TYPE" in self.given_env:
            return ""
        if self.family == "mpich":
            return "pmi2"
        if self.family == "openmpi" and "pmix" in srun_mpi_plugins(self.mpiexec or "srun"):
            return "pmix"
        return ""

    def distribution(self) -> list[str]:
        """``--distribution=block:block`` unless the combination names one (args, getopt's
        abbreviations such as --dist included, or $SLURM_DISTRIBUTION): Slurm's default,
        block:cyclic, deals a node's ranks to its sockets in turn, where every other
        launcher here that binds fills one socket's cores first, so one params file would
        measure another placement under srun than under mpiexec."""
        if any(a.startswith(("--dist", "-m")) for a in self.given_args) or \
                "SLURM_DISTRIBUTION" in self.given_env:
            return []
        return ["--distribution=block:block"]

    def args(self, layout: Layout) -> list[str]:
        plugin = self.mpi_plugin()
        out = [f"--mpi={plugin}"] if plugin else []
        out += ["-N", str(layout.nodes), "--ntasks-per-node", str(layout.per_node)]
        out += ["--nodelist", layout.host_list] if layout.hosts else []
        if layout.cpus:
            out += [f"--cpu-bind=map_cpu:{layout.cpu_list}"]
        else:
            out += ["--cpus-per-task", str(layout.threads), *self.distribution(),
                    "--cpu-bind=cores"]
        return out + ["-n", str(layout.ranks)]


@functools.cache
def srun_mpi_plugins(srun: str = "srun") -> frozenset[str]:
    """The MPI plugins `srun --mpi=list` offers (pmix, pmi2, ...); empty where it cannot say.

    A versioned one (pmix_v4) also counts under its plain name.
    """
    try:
        proc = subprocess.run([srun, "--mpi=list"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    words = {w.strip(",") for ln in proc.stdout.splitlines() if ln[:1].isspace()
             for w in ln.split()}
    return frozenset(words | {w.split("_v")[0] for w in words})


def launcher(name: str, mpiexec: str = "", family: str = "", args: Sequence[str] = (),
             env: Mapping[str, str] | None = None) -> Launcher:
    """The launcher registered as `name`; ParamError naming the known ones otherwise."""
    if name not in LAUNCHERS:
        raise ParamError(f"launcher '{name}' is not one of {', '.join(LAUNCHERS)}")
    return LAUNCHERS[name](mpiexec, family, args, env)


def for_combination(combo: dict, mpiexec: str, family: str) -> Launcher:
    """The launcher of a validated combination, run as `mpiexec` with an MPI of `family`."""
    return launcher(combo["launcher"], mpiexec, family, combo["args"], combo["env"])


def resolve_command(cmd: str) -> str | None:
    """A command's path: as given if it has a '/', else in this Python's bin/ first, then PATH."""
    if os.sep in cmd:
        return cmd if os.access(cmd, os.X_OK) else None
    local = Path(sys.executable).parent / cmd
    if os.access(local, os.X_OK):
        return str(local)
    return shutil.which(cmd)


# -- hosts -------------------------------------------------------------------------------

def expand_nodelist(text: str) -> list[str]:
    """Host names of a Slurm node list (``rack[1-2]-node[01-02]``, ``n[1-2]-ib,gpu1``).

    The scheduler's own ``scontrol show hostnames`` first; where scontrol is missing or
    cannot (Slurm 22.05 rejects ``n[1-2]-ib``), :func:`parse_nodelist`.  Raises
    ParamError for a list neither can read.
    """
    return _scontrol_hostnames(text) or parse_nodelist(text)


#: One bracket group's item: a number, or a range of numbers (``07``, ``01-12``).
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def parse_nodelist(text: str) -> list[str]:
    """Slurm's node-list syntax, without Slurm: names split at top-level commas; in each,
    every bracket group ``[1-3,07]`` multiplies the names (the first group outermost),
    numbers keeping the width of the range's first bound (``[01-10]``: 01 .. 10).

    ParamError naming the list for an empty name, an unclosed or nested bracket, or a
    range that runs down (``n[3-1]``).
    """
    def bad(why: str) -> ParamError:
        return ParamError(f"node list '{text}' cannot be read: {why}")

    items, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise bad("brackets inside brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise bad("']' without '['")
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    if depth:
        raise bad("'[' without ']'")
    names: list[str] = []
    for item in items:
        if not item:
            raise bad("an empty name")
        expanded = [""]
        for m in re.finditer(r"([^\[]*)(?:\[([^\]]*)\])?", item):
            if not m.group(0):
                continue  # the empty match at the end
            numbers = [""]
            if m.group(2) is not None:
                numbers = []
                for part in m.group(2).split(","):
                    r = _RANGE.fullmatch(part.strip())
                    if not r:
                        raise bad(f"'{part}' is not a number or a range")
                    lo, hi = int(r.group(1)), int(r.group(2) or r.group(1))
                    if hi < lo:
                        raise bad(f"the range {part} runs down")
                    numbers += [f"{n:0{len(r.group(1))}d}" for n in range(lo, hi + 1)]
            expanded = [e + m.group(1) + n for e in expanded for n in numbers]
        names += expanded
    return names


def _scontrol_hostnames(text: str) -> list[str]:
    """`scontrol show hostnames TEXT`; [] where it is missing or fails (it says 'Invalid
    hostlist' on stderr, exit status 0, and prints no names)."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return []
    try:
        proc = subprocess.run([scontrol, "show", "hostnames", text], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return proc.stdout.split() if proc.returncode == 0 else []


def scheduler_hosts(environ: Mapping[str, str] | None = None) -> list[str]:
    """Hosts of this batch job: $PBS_NODEFILE's lines or $SLURM_JOB_NODELIST, in order."""
    env = os.environ if environ is None else environ
    if env.get("PBS_NODEFILE"):
        try:
            lines = Path(env["PBS_NODEFILE"]).read_text().split()
        except OSError:
            lines = []
        return list(dict.fromkeys(lines))
    if env.get("SLURM_JOB_NODELIST"):
        return expand_nodelist(env["SLURM_JOB_NODELIST"])
    return []


@dataclass(frozen=True)
class Hosts:
    """The hosts a sweep may use, where they came from, and whether this is a batch job."""

    names: tuple[str, ...]
    source: str  # the parameter that named them, or "this job ($SLURM_JOB_NODELIST)"
    param: str  # the parameter that would name them
    in_job: bool  # inside a PBS or Slurm allocation

    def shortfall(self, nodes: int, what: str, required: bool = True) -> str:
        """'' when `nodes` hosts are known, else the note that skips `what`.

        Inside a batch job, a `required` node count (one the params name
        explicitly) above the job's is an error (ParamError) naming both
        numbers: the job was sized wrong.  A placement measured only where
        possible (`required` False) is skipped with the note, in a job too.
        """
        have = max(1, len(self.names))
        if nodes <= have:
            return ""
        if self.in_job and required:
            raise ParamError(f"{what}: {nodes} nodes asked for, but {self.source} has {have}")
        return (f"skipped {what}: {nodes} nodes asked for, {have} host(s) known (give "
                f"{self.param}, or run under PBS/Slurm)")


def job_hosts(given: Sequence[str], param: str,
              environ: Mapping[str, str] | None = None) -> Hosts:
    """The hosts `param` gives (`given`), else the batch job's (none outside a job)."""
    env = os.environ if environ is None else environ
    var = next((v for v in SCHEDULER_VARS if env.get(v)), "")
    if given:
        return Hosts(tuple(given), param, param, bool(var))
    return Hosts(tuple(scheduler_hosts(env)), f"this job (${var})" if var else param, param,
                 bool(var))
