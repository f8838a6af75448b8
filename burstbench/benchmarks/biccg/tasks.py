"""What a BICCG sweep runs: probe() the problems, hosts and cores and try the launcher on a
tiny problem, then expand() the parameters into one mpiexec per (problem, nodes, ranks
per node, threads, repetition), plus the Python baselines, each with its estimated time."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from burstbench.core import budget, launch, paths, runner
from burstbench.core.checks import ParamError
from burstbench.core.mpi import ask
from burstbench.core.sweep import Plan, task_key
from kernels_ext.common import sysinfo
from kernels_ext.common.mpi import library_family

BENCHMARK = "biccg"


@dataclass(frozen=True)
class Problem:
    """A matrix: the Poisson grid or a Matrix Market file."""

    name: str
    args: tuple[str, ...]


def resolve_problems(P: dict) -> tuple[list[Problem], list[str]]:
    """Problems as kernel arguments; missing optional files are skipped with a note."""
    out, notes = [], []
    for spec in P["biccg_problems"]:
        if "poisson" in spec:
            nx, ny, nz = spec["poisson"]
            out.append(Problem(f"poisson{nx}x{ny}x{nz}", ("--poisson", str(nx), str(ny), str(nz))))
            continue
        path = Path(spec["mtx"])
        path = path if path.is_absolute() else paths.project_root() / path
        name = path.name.split(".")[0]
        if not path.is_file():
            if spec.get("optional"):
                notes.append(f"skipped problem {name}: {path} is not here (download it: "
                             "python -m kernels_ext.biccg.mtx --fetch G3_circuit)")
                continue
            raise ParamError(f"biccg_problems: {path} does not exist")
        out.append(Problem(name, ("--mtx", str(path))))
    return out, notes


def try_combination(combo: dict) -> tuple[str, dict]:
    """The combination's mpiexec path and the solver's record of one rank on a tiny problem
    (its MPI library); ParamError with the launcher's message when that fails."""
    mpiexec = launch.resolve_command(combo["mpiexec"])
    if mpiexec is None:
        raise ParamError(f"biccg_combination: mpiexec '{combo['mpiexec']}' not found")
    try:
        return mpiexec, ask(combo, mpiexec, ["-m", "kernels_ext.biccg", "--poisson", "4", "4",
                                             "4", "--threads", "1"], 120)
    except (runner.TaskFailed, ValueError) as exc:
        raise ParamError(f"biccg_combination: {combo['mpiexec']}: {exc}") from exc


@dataclass
class Machine:
    """What a BICCG plan needs to know of this machine, found by probe()."""

    problems: list[Problem]
    hosts: launch.Hosts           # the hosts a layout may use (the job's, or biccg_hosts)
    cores: int                    # CPUs a node gives (this process's)
    mpiexec: str                  # the launcher, tried on a tiny problem
    info: dict                    # that tiny solve's record
    notes: list[str] = field(default_factory=list)


def probe(P: dict) -> Machine:
    """Find the problems (a missing optional matrix file is a note), the hosts and the
    cores; where something is left to measure, try the combination on a tiny problem, so
    that a missing launcher or an MPI mismatch stops the sweep before it starts."""
    problems, notes = resolve_problems(P)
    hosts = launch.job_hosts(P["biccg_hosts"], "biccg_hosts")
    cores = sysinfo.available_cpus()
    layouts(P, problems, hosts, cores, list(notes))  # what cannot be measured, before trying
    mpiexec, info = try_combination(P["biccg_combination"])
    return Machine(problems, hosts, cores, mpiexec, info, notes)


def layouts(P: dict, problems: list[Problem], hosts: launch.Hosts, cores: int,
            notes: list[str]) -> list[launch.Layout]:
    """Every nodes x ranks per node x threads layout these hosts and cores allow; notes for
    the others: more cores than a node has (they would oversubscribe and time badly), more
    nodes than hosts known (inside a batch job, an error).  ParamError when nothing is left."""
    out = []
    for nodes in P["biccg_nodes"]:
        note = hosts.shortfall(nodes, "biccg_nodes")
        if note:
            notes.append(note)
            continue
        for rpn in P["biccg_ranks_per_node"]:
            for t in P["biccg_threads"]:
                if rpn * t > cores:
                    notes.append(f"skipped {rpn} ranks x {t} threads: more than the {cores} "
                                 "cores of a node")
                    continue
                out.append(launch.Layout(nodes * rpn, rpn, t, hosts=hosts.names[:nodes]))
    if not problems or not out:
        raise ParamError("nothing to measure: " + ("; ".join(notes) or "no problem or layout"))
    return out


def expand(P: dict, m: Machine) -> Plan:
    """Tasks for every problem x layout (layouts()) and baseline x repetition; runs
    nothing."""
    combo, notes = P["biccg_combination"], list(m.notes)
    lays = layouts(P, m.problems, m.hosts, m.cores, notes)
    launcher = launch.for_combination(combo, m.mpiexec, library_family(m.info["mpi_library"]))
    tasks = []
    for rep in range(1, P["biccg_repetitions"] + 1):
        for prob in m.problems:
            for layout in lays:
                tasks.append(_task(P, combo, launcher, prob, layout, rep))
            for method in P["biccg_baselines"]:
                tasks.append(_baseline_task(P, prob, method, rep, m.cores))
    variants = [m.info | {"mpiexec_path": m.mpiexec, "spec": combo}]
    # priority 0 within a budget: our solver on the first problem at the study's layout (2
    # ranks per node where planned, else the widest layout planned)
    ours = [t.config for t in tasks if t.config["impl"] == "c"]
    study = max((c["label"] for c in ours), key=lambda lab: (lab.startswith("2x"), lab),
                default=None)
    tasks = budget.prioritized(tasks, lambda c: c["impl"] == "c" and c["label"] == study
                               and c["problem"] == ours[0]["problem"])
    return Plan(tasks, variants, notes, detail="problem")


def plan(P: dict) -> Plan:
    """Turn validated parameters into tasks: probe() this machine, then expand()."""
    return expand(P, probe(P))


def _common_args(P: dict) -> list[str]:
    return ["--tol", repr(P["biccg_tol"]), "--max-iter", str(P["biccg_max_iter"])]


def _task(P: dict, combo: dict, launcher: launch.Launcher, prob: Problem,
          layout: launch.Layout, rep: int) -> runner.Task:
    nodes, nranks, t = layout.nodes, layout.ranks, layout.threads
    label = f"{layout.per_node}x{t}"
    argv = (launcher.mpiexec, *combo["args"], *launcher.args(layout), sys.executable, "-m",
            "kernels_ext.biccg", *prob.args, "--block-size", str(P["biccg_block_size"]),
            "--colors", str(P["biccg_colors"]), "--threads", str(t), *_common_args(P))
    env = combo["env"] | launcher.env(layout) | {"OMP_NUM_THREADS": str(t),
                                                  "OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}
    config = {"benchmark": BENCHMARK, "label": label, "impl": "c", "problem": prob.name,
              "nodes": nodes, "ranks": nranks, "threads": t, "block_size": P["biccg_block_size"],
              "colors": P["biccg_colors"], "repetition": rep, "function": "solve"}
    key = task_key(f"{prob.name}-{nodes}n{label}", f"r{rep}", [config, argv[1:]])
    return runner.Task(key, config | {"key": key}, argv, tuple(sorted(env.items())),
                       P["biccg_timeout_s"], estimate_s(prob, nranks * t))


def _baseline_task(P: dict, prob: Problem, method: str, rep: int, t: int) -> runner.Task:
    argv = (sys.executable, "-m", "kernels_ext.biccg.cg_baselines", *prob.args, "--method", method,
            "--threads", str(t), *_common_args(P))
    config = {"benchmark": BENCHMARK, "label": method, "impl": method.split("-")[0],
              "problem": prob.name, "nodes": 1, "ranks": 1,
              "threads": t if method.startswith("numba") else 1, "repetition": rep,
              "function": "solve"}
    key = task_key(f"{prob.name}-{method}", f"r{rep}", [config, argv[1:]])
    return runner.Task(key, config | {"key": key}, argv, (("OMP_NUM_THREADS", str(t)),),
                       P["biccg_timeout_s"], 3 * estimate_s(prob, 1))  # slower than ours


#: The work model of estimate_s: a process's start, then about 1.1 n^(1/3) iterations (IC(0)
#: on a Poisson grid) of 15 ns per row on one core (64^3 here: 68 iterations, 0.23 s), and
#: setup at 0.3 us per row. Matrix files: rows unknown before reading them, no estimate.
START_S, ROW_ITERATION_S, ROW_SETUP_S = 0.6, 15e-9, 0.3e-6


def estimate_s(prob: Problem, cores: int) -> float:
    """About how long one solve of `prob` on `cores` cores takes (0: unknown)."""
    if prob.args[0] != "--poisson":
        return 0.0
    n = math.prod(int(x) for x in prob.args[1:4])
    return START_S + n * (ROW_SETUP_S + 1.1 * n ** (1 / 3) * ROW_ITERATION_S) / cores


def nodes_needed(P: dict) -> tuple[int, str]:
    """The most nodes these parameters ask for, and the key that asks (the job scripts)."""
    return max(P["biccg_nodes"]), "biccg_nodes"
