"""What a BICCG sweep runs: probe() the problems, hosts and cores and try the launcher on a
tiny problem, then expand() the parameters into one mpiexec per (problem, nodes, ranks
per node, threads, repetition), plus the Python baselines, each with its estimated time."""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from burstbench.core import budget, launch, paths, runner, workmodel
from burstbench.core.checks import ParamError
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


def try_combination(combo: dict, grid: tuple[int, int, int] = (4, 4, 4)
                    ) -> tuple[str, dict, workmodel.Timing]:
    """The combination's mpiexec path, the solver's record of one rank on one thread solving
    the Poisson `grid` (its MPI library, iterations, solve and setup seconds) and how long
    that took; ParamError with the launcher's message when that fails."""
    mpiexec = launch.resolve_command(combo["mpiexec"])
    if mpiexec is None:
        raise ParamError(f"biccg_combination: mpiexec '{combo['mpiexec']}' not found")
    argv = (mpiexec, *combo["args"], "-n", "1", sys.executable, "-m", "kernels_ext.biccg",
            "--poisson", *map(str, grid), "--threads", "1")
    try:
        records, timing = workmodel.timed(runner.Task("probe", {}, argv, tuple(
            combo["env"].items()) + (("OMP_NUM_THREADS", "1"),), 120))
        record = records[-1]
    except (runner.TaskFailed, ValueError, IndexError) as exc:
        raise ParamError(f"biccg_combination: {combo['mpiexec']}: {exc}") from exc
    # the solver times its setup too (not in runner.timed_seconds: not the solve)
    return mpiexec, record, workmodel.Timing(timing.wall_s, timing.timed_s
                                         + float(record.get("setup_s") or 0), timing.others)


def probe_grid(problems: list[Problem]) -> tuple[int, int, int]:
    """The probe's problem: the smallest Poisson grid planned, at most PROBE_ROWS rows
    (16^3 where none is planned); so that its rows sit where the planned ones do (in the
    cache or out of it) at a second's cost at most."""
    grids = sorted((math.prod(g), g) for g in (tuple(int(x) for x in p.args[1:4])
                                                for p in problems if p.args[0] == "--poisson"))
    if not grids:
        return (16, 16, 16)
    n, grid = grids[0]
    if n <= PROBE_ROWS:
        return grid  # type: ignore[return-value]
    side = round(PROBE_ROWS ** (1 / 3))
    return (side, side, side)


@dataclass
class Machine:
    """What a BICCG plan needs to know of this machine, found by probe()."""

    problems: list[Problem]
    hosts: launch.Hosts           # the hosts a layout may use (the job's, or biccg_hosts)
    cores: int                    # CPUs a node gives (this process's)
    mpiexec: str                  # the launcher, tried on a tiny problem
    info: dict                    # that tiny solve's record
    notes: list[str] = field(default_factory=list)
    #: the work model as that solve calibrated it (None: the model's constants)
    calibration: workmodel.Calibration | None = None
    timing: workmodel.Timing | None = None


def probe(P: dict) -> Machine:
    """Find the problems (a missing optional matrix file is a note), the hosts and the
    cores; where something is left to measure, try the combination on a tiny problem, so
    that a missing launcher or an MPI mismatch stops the sweep before it starts."""
    problems, notes = resolve_problems(P)
    hosts = launch.job_hosts(P["biccg_hosts"], "biccg_hosts")
    cores = sysinfo.available_cpus()
    layouts(P, problems, hosts, cores, list(notes))  # what cannot be measured, before trying
    grid = probe_grid(problems)
    mpiexec, info, timing = try_combination(P["biccg_combination"], grid)
    n = math.prod(grid)
    said = f"by a solve of poisson{grid[0]}x{grid[1]}x{grid[2]} on one core"
    return Machine(problems, hosts, cores, mpiexec, info, notes,
                   workmodel.calibrate(timing, work_s(n, 1), said), timing)


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
    if m.calibration is not None:
        tasks = [_calibrated(t, m) for t in tasks]
    variants = [m.info | {"mpiexec_path": m.mpiexec, "spec": combo}]
    # priority 0 within a budget: our solver on the first problem at the study's layout (2
    # ranks per node where planned, else the widest layout planned)
    ours = [t.config for t in tasks if t.config["impl"] == "c"]
    study = max((c["label"] for c in ours), key=lambda lab: (lab.startswith("2x"), lab),
                default=None)
    tasks = budget.prioritized(tasks, lambda c: c["impl"] == "c" and c["label"] == study
                               and c["problem"] == ours[0]["problem"])
    return Plan(tasks, variants, notes, detail="problem",
                calibration=m.calibration.said if m.calibration else "")


def _calibrated(t: runner.Task, m: Machine) -> runner.Task:
    """Task `t` with its estimate from the probe's calibration (a matrix file's stays 0:
    its rows are not known before reading it)."""
    c = t.config
    prob = next(p for p in m.problems if p.name == c["problem"])
    if not t.estimate_s or prob.args[0] != "--poisson" or m.calibration is None \
            or m.timing is None:
        return t
    n = math.prod(int(x) for x in prob.args[1:4])
    cores = c["ranks"] * c["threads"] if c["impl"] == "c" else c["threads"]
    work = work_s(n, m.timing.speedup(cores, m.cores))
    if c["impl"] != "c":  # the Python baselines, on one core's work
        work = BASELINE_WORK.get(c["impl"], 3.0) * work_s(n, 1) + \
            BASELINE_START_S.get(c["impl"], 0.0)
    return dataclasses.replace(t, estimate_s=m.calibration.estimate(work))


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


#: The work model of estimate_s: a process's start, then the setup at ROW_SETUP_S per row
#: and ITERATIONS(N) = 2.45 N^0.774 iterations (N^3 rows; IC(0) on a Poisson grid at
#: tol 1e-7: 21, 68 and 105 at N = 16, 64, 128) of ROW_ITERATION_S per row, over the cores
#: used (no more than the others leave free: Timing.speedup).  The Python baselines take
#: BASELINE_WORK times our one-core work (scipy's CG: 2.6x our iterations; numba's IC(0)-CG
#: on 2 threads about 1.5x) and numba BASELINE_START_S more to compile.  probe() solves the
#: smallest planned grid (at most PROBE_ROWS rows) on one core: its start and its measured
#: over modelled work then scale every estimate (workmodel.Calibration); without it, START_S
#: and the constants here (64^3 on the 2-core VM, alone: 68 iterations, 0.23 s).  Matrix
#: files: rows unknown before reading them, no estimate.
START_S, ROW_ITERATION_S, ROW_SETUP_S = 0.6, 15e-9, 0.3e-6
BASELINE_WORK = {"scipy": 3.0, "numba": 1.5}
BASELINE_START_S = {"numba": 1.2}
PROBE_ROWS = 64 ** 3


def iterations(n: int) -> float:
    """About how many iterations a Poisson grid of `n` rows takes (the model above)."""
    return 2.45 * n ** (0.774 / 3)


def work_s(n: int, cores: float) -> float:
    """The modelled seconds of one solve of `n` rows on `cores` cores, its start left out."""
    return n * (ROW_SETUP_S + iterations(n) * ROW_ITERATION_S) / cores


def estimate_s(prob: Problem, cores: int) -> float:
    """About how long one solve of `prob` on `cores` cores takes by the model's constants
    (0: unknown); expand() calibrates it by the probe's solve."""
    if prob.args[0] != "--poisson":
        return 0.0
    return START_S + work_s(math.prod(int(x) for x in prob.args[1:4]), cores)


def nodes_needed(P: dict) -> tuple[int, str]:
    """The most nodes these parameters ask for, and the key that asks (the job scripts)."""
    return max(P["biccg_nodes"]), "biccg_nodes"
