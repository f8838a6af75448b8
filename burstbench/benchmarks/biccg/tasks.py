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


def grid_points(prob: Problem) -> int:
    """A Poisson problem's grid points; 0 for a matrix file (its size is read later)."""
    return math.prod(int(a) for a in prob.args[1:4]) if prob.args[:1] == ("--poisson",) else 0


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


#: The probe's largest grid, and its tolerance: a few iterations (13 at 128^3), enough to
#: time one; the setup costs more (2 s of the probe's 2.5 s on the 2-core VM).
PROBE_ROWS, PROBE_TOL = 128 ** 3, 0.05


def try_combination(combo: dict, grid: tuple[int, int, int] = (4, 4, 4),
                    tol: float = PROBE_TOL) -> tuple[str, dict, workmodel.Timing]:
    """The combination's mpiexec path, the solver's record of one rank on one thread solving
    the Poisson `grid` to `tol`, placed as a planned solve's thread is (its MPI library,
    iterations, load, setup and solve seconds), and how long that took; ParamError with
    the launcher's message when that fails."""
    mpiexec = launch.resolve_command(combo["mpiexec"])
    if mpiexec is None:
        raise ParamError(f"biccg_combination: mpiexec '{combo['mpiexec']}' not found")
    argv = (mpiexec, *combo["args"], "-n", "1", sys.executable, "-m", "kernels_ext.biccg",
            "--poisson", *map(str, grid), "--threads", "1", "--tol", repr(tol))
    env = combo["env"] | {"OMP_NUM_THREADS": "1", "OMP_PLACES": "cores",
                          "OMP_PROC_BIND": "close"}
    try:
        records, timing = workmodel.timed(runner.Task("probe", {}, argv, tuple(env.items()),
                                                      120))
        return mpiexec, records[-1], timing
    except (runner.TaskFailed, ValueError, IndexError) as exc:
        raise ParamError(f"biccg_combination: {combo['mpiexec']}: {exc}") from exc


def probe_grid(problems: list[Problem]) -> tuple[int, int, int]:
    """The probe's problem: the largest Poisson grid planned, so that its setup and its
    iterations meet the memory the largest solves meet (their cache misses, their page
    faults); a cube of PROBE_ROWS where the largest has more rows (a few seconds at
    most), 16^3 where no Poisson grid is planned."""
    grids = sorted((math.prod(g), g) for g in (tuple(int(x) for x in p.args[1:4])
                                                for p in problems if p.args[0] == "--poisson"))
    if not grids:
        return (16, 16, 16)
    n, grid = grids[-1]
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
    #: the work model as the probe's solve calibrated it (UNCALIBRATED: no probe ran)
    calibration: SolveCalibration = field(default_factory=lambda: SolveCalibration())


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
    return Machine(problems, hosts, cores, mpiexec, info, notes, calibrate(info, timing))


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
    tasks = [dataclasses.replace(t, estimate_s=task_estimate_s(P, t.config, m))
             for t in tasks]
    variants = [m.info | {"mpiexec_path": m.mpiexec, "spec": combo}]
    # priority 0 within a budget: our solver at the study's layout (2 ranks per node where
    # planned, else the widest layout planned) on the largest Poisson grid planned: the
    # nearest to the study's, out of cache, and on local-model.yaml the solve the decision's
    # time model is fitted on (its model_reference; on local.yaml, 128^3, a solve that
    # checks it); a matrix file's size is read later, so
    # with no grid, the first problem.  And, where another layout is planned, one
    # repetition of the widest other one on that grid and the fewest nodes, just after the
    # fitted solve's first: a solve that checks the model (without one its error is unknown
    # and the decision draws none, cost/model.py)
    ours = [t.config for t in tasks if t.config["impl"] == "c"]
    study = max((c["label"] for c in ours), key=lambda lab: (lab.startswith("2x"), lab),
                default=None)
    largest = max(m.problems, key=grid_points).name
    fewest = min((c["nodes"] for c in ours), default=1)
    check = max((c["label"] for c in ours if c["problem"] == largest and c["label"] != study),
                key=lambda lab: (math.prod(int(x) for x in lab.split("x")), lab), default=None)

    def ours_on(c: dict, label: str | None) -> bool:
        return c["impl"] == "c" and c["problem"] == largest and c["label"] == label

    def checks(c: dict) -> bool:
        return ours_on(c, check) and c["nodes"] == fewest and c["repetition"] == 1

    tasks = budget.prioritized(tasks, lambda c: ours_on(c, study) or checks(c))
    tasks = budget.after(tasks, checks, lambda c: ours_on(c, study) and c["repetition"] == 1)
    return Plan(tasks, variants, notes, detail="problem", calibration=m.calibration.said)


def task_estimate_s(P: dict, config: dict, m: Machine) -> float:
    """About how long the configuration `config` of the plan takes here (estimate_s, by the
    probe's calibration and the cores the others leave free as the probe found them); 0
    for a matrix file's: its rows are not known before reading it."""
    prob = next(p for p in m.problems if p.name == config["problem"])
    if prob.args[0] != "--poisson":
        return 0.0
    impl, ranks = config["impl"], config["ranks"]
    cores = ranks * config["threads"] if impl == "c" else config["threads"]
    beside = triad_beside_s() if impl == "c" and P["biccg_triad_beside"] else 0.0
    return beside + estimate_s(math.prod(int(x) for x in prob.args[1:4]), SOLVERS[impl],
                               ranks if impl == "c" else 1,
                               m.calibration.speedup(cores, m.cores * config["nodes"]),
                               P["biccg_tol"], m.calibration,
                               P["biccg_solves"] if impl == "c" else 1)  # baselines solve once


#: What a process's Triad beside its solve (biccg_triad_beside) is guessed to run at: its
#: arrays' first touch, and twice BESIDE_NTIMES passes of the Triad alone (24 B an element)
#: and the check (24 B), at two cores' rate whatever the threads: 0.36 s by this guess at
#: the rule size with a 32 MiB L3 (not measured there since the Triad alone); an Intel
#: Xeon VM whose L3 reads 480 MiB took 6.5 s a process on 2 threads (guessed 5.4 s) and
#: 12 s on 1, its solve included (comparisons/README.md, "The Triad alone").
BESIDE_TOUCH_GBS, BESIDE_PASS_GBS = 2.0, 30.0


def triad_beside_s() -> float:
    """About how long the Triad beside a solve takes (kernels_ext.triad.node_rate, twice)."""
    from kernels_ext import triad

    n = triad.default_size()
    passes = 2 * (triad.BESIDE_NTIMES + 1) * 24 * n
    return (24 * n / BESIDE_TOUCH_GBS + passes / BESIDE_PASS_GBS) / 1e9


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
            "--colors", str(P["biccg_colors"]), "--threads", str(t), *_common_args(P),
            *(["--solves", str(P["biccg_solves"])] if P["biccg_solves"] > 1 else []),
            *(["--triad-beside"] if P["biccg_triad_beside"] else []))
    env = combo["env"] | launcher.env(layout) | {"OMP_NUM_THREADS": str(t),
                                                  "OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}
    config = {"benchmark": BENCHMARK, "label": label, "impl": "c", "problem": prob.name,
              "nodes": nodes, "ranks": nranks, "threads": t, "block_size": P["biccg_block_size"],
              "colors": P["biccg_colors"], "repetition": rep, "function": "solve"}
    key = task_key(f"{prob.name}-{nodes}n{label}", f"r{rep}", [config, argv[1:]])
    return runner.Task(key, config | {"key": key}, argv, tuple(sorted(env.items())),
                       P["biccg_timeout_s"] * P["biccg_solves"])  # per solve


def _baseline_task(P: dict, prob: Problem, method: str, rep: int, t: int) -> runner.Task:
    argv = (sys.executable, "-m", "kernels_ext.biccg.cg_baselines", *prob.args, "--method", method,
            "--threads", str(t), *_common_args(P))
    config = {"benchmark": BENCHMARK, "label": method, "impl": method.split("-")[0],
              "problem": prob.name, "nodes": 1, "ranks": 1,
              "threads": t if method.startswith("numba") else 1, "repetition": rep,
              "function": "solve"}
    key = task_key(f"{prob.name}-{method}", f"r{rep}", [config, argv[1:]])
    return runner.Task(key, config | {"key": key}, argv, (("OMP_NUM_THREADS", str(t)),),
                       P["biccg_timeout_s"])


#: The work model of estimate_s, per solver (SOLVERS): a process's start; a setup (the
#: matrix's generation and factorization) of ROW_SETUP_S per row; and passes over the rows
#: of ROW_ITERATION_S per row, one per iteration and FIRST_PASSES more (the first residual
#: and preconditioning, the work vectors' first touch: the probe's 13 iterations take 15
#: of a 105-iteration solve's, median of 4 quiet probes).  The passes go over the cores'
#: speedup (PARALLEL_EFFICIENCY of each core but the first, no more cores than the others
#: leave free: SolveCalibration.speedup), our setup over its square (two cores set 128^3 up 3.5
#: to 5 times as fast as one, 64^3 1.5 times: 0.4-0.6 s against 2.0).  Ours iterates 2.27
#: N^0.807 times on a Poisson grid of N^3 rows at tol 1e-7 (21 to 140 at N = 16 to 160,
#: within 4% but 128: 105, 8% fewer) and in proportion to log(1/tol) (58, 68 and 79 at
#: 64^3 and tol 1e-6, 1e-7, 1e-8), RANK_ITERATIONS more per doubling of ranks (the
#: preconditioner's blocks end at a rank's rows: 75 and 123 on 2 ranks at 64^3 and 128^3).
#: The Python baselines run on one rank and generate their matrix in Python (their setup,
#: on one core): scipy's CG iterates 2.17 N times (141, 277), each pass 0.68 of ours, on
#: one thread; numba's IC(0)-CG 3.3 N^0.7 times (61, 99), each pass 2.17 of ours per core,
#: on every core, and loads its compiled code (its start).  probe() solves the largest
#: planned grid (at most PROBE_ROWS rows) on one core to PROBE_TOL: its start, and its
#: setup and passes over the model's, calibrate it (`calibrate`).  The constants: the 2-core
#: VM alone, medians of 6 to 10 quiet solves of each layout (2026-11-26): 128^3 on one core
#: in 6.8 s (0.3 start, 2.0 setup, 105 iterations in 4.1).  Matrix files: rows unknown
#: before reading them, no estimate.
START_S, ROW_SETUP_S, ROW_ITERATION_S, FIRST_PASSES = 0.3, 0.96e-6, 19e-9, 2
PARALLEL_EFFICIENCY, RANK_ITERATIONS = 0.7, 0.13


@dataclass(frozen=True)
class Solver:
    """A solver's work model: `a` N^`b` iterations on a Poisson grid of N^3 rows at tol
    1e-7, each `iteration` times ours per row and core, a setup `setup` times ours on one
    core over the cores' speedup to the power `setup_scaling`, and `start_s` seconds of
    start more than ours."""

    a: float
    b: float
    iteration: float = 1.0
    setup: float = 1.0
    setup_scaling: float = 1.0
    start_s: float = 0.0

    def iterations(self, n: int, tol: float = 1e-7) -> float:
        """About how many iterations a Poisson grid of `n` rows takes to `tol`."""
        return self.a * n ** (self.b / 3) * math.log(1 / tol) / math.log(1e7)


SOLVERS = {"c": Solver(2.27, 0.807, setup_scaling=2.0),
           "scipy": Solver(2.17, 1.0, iteration=0.68, setup=0.05, setup_scaling=0.0,
                           start_s=0.22),
           "numba": Solver(3.3, 0.7, iteration=2.17, setup=0.28, setup_scaling=0.0,
                           start_s=0.7)}


@dataclass(frozen=True)
class SolveCalibration:
    """The work model as the probe's solve found this machine: a process's start (seconds),
    its measured over modelled seconds of setup and of one pass, the share of the CPU
    others took meanwhile, and what it found, in a few words.

    Not a :class:`workmodel.Calibration` (one rate for all of a configuration's work): a
    solve's setup and its iterations scale apart (the setup over the square of the cores'
    speedup, the iterations over the speedup, Solver.setup_scaling), so each has its own
    rate, and the estimate is :func:`estimate_s`, not Calibration.estimate."""

    start_s: float = START_S
    setup_rate: float = 1.0
    iteration_rate: float = 1.0
    others: float = 0.0
    said: str = ""

    def speedup(self, cores: int, cpus: int) -> float:
        """What `cores` cores do over one: PARALLEL_EFFICIENCY of each but the first, on
        the CPUs others leave free (workmodel.Timing.speedup), at least 1."""
        free = workmodel.Timing(0, 0, self.others).speedup(cores, cpus)
        return max(1.0, 1 + PARALLEL_EFFICIENCY * (free - 1))


#: No probe ran: the model's constants as they are.
UNCALIBRATED = SolveCalibration()


def setup_s(n: int) -> float:
    """The modelled seconds of the setup of `n` rows on one core."""
    return n * ROW_SETUP_S


def iteration_s(n: int) -> float:
    """The modelled seconds of one pass over `n` rows on one core (an iteration)."""
    return n * ROW_ITERATION_S


def estimate_s(n: int, solver: Solver = SOLVERS["c"], ranks: int = 1, speedup: float = 1.0,
               tol: float = 1e-7, cal: SolveCalibration = UNCALIBRATED, solves: int = 1) -> float:
    """About how long a process of `solves` solves of a Poisson grid of `n` rows takes (its
    start once, each solve's setup and iterations): by `solver` on `ranks` ranks whose cores
    do `speedup` times one's, calibrated by `cal`."""
    passes = FIRST_PASSES + solver.iterations(n, tol) * (1 + RANK_ITERATIONS
                                                         * math.log2(ranks))
    setup = cal.setup_rate * solver.setup * setup_s(n) / speedup ** solver.setup_scaling
    return cal.start_s + solver.start_s + solves * (
        setup + cal.iteration_rate * solver.iteration * passes * iteration_s(n) / speedup)


def calibrate(record: dict, timing: workmodel.Timing) -> SolveCalibration:
    """The SolveCalibration of the probe's solve: its `record` (rows, iterations, load, setup and
    solve seconds) and its `timing` (wall seconds, others' share of the CPU)."""
    n, passes = int(record["n"]), FIRST_PASSES + int(record["iterations"])
    setup, solve = float(record["load_s"]) + float(record["setup_s"]), float(record["solve_s"])
    start = max(0.0, timing.wall_s - setup - solve)
    cal = SolveCalibration(start, workmodel.ratio(setup, setup_s(n)),
                      workmodel.ratio(solve / passes, iteration_s(n)), timing.others)
    said = (f"by a solve of {record['problem']} on one core to tol {record['tol']:g}: start "
            f"{start:.2f} s, setup x{cal.setup_rate:.2f} and iterations "
            f"x{cal.iteration_rate:.2f} of the model")
    return dataclasses.replace(cal, said=said)


def nodes_needed(P: dict) -> tuple[int, str]:
    """The most nodes these parameters ask for, and the key that asks (the job scripts)."""
    return max(P["biccg_nodes"]), "biccg_nodes"
