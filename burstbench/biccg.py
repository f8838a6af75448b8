"""The BICCG sweep: problems x nodes x ranks per node x threads per rank x repetitions.

Each configuration is one ``mpiexec`` with OMP_NUM_THREADS, OMP_PLACES=cores
and OMP_PROC_BIND=close set at launch and each rank bound to its threads'
cores; the Python-only baselines (SciPy's cg, numba CG with natural-order
IC(0)) run once per problem and repetition on one process.  Labels are the
layout, ``<ranks per node>x<threads>`` (``2x1``: two MPI ranks of one thread),
as in the study's Figures 12-13 where time falls with parallelism.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd

from burstbench import launch, paths, plots, report, runner, store
from burstbench.params import (
    INTEGERS,
    Param,
    ParamError,
    check_bool,
    check_choices,
    check_count,
    check_list,
    check_positive,
    check_str_list,
)
from burstbench.pingpong import check_combination
from burstbench.sweep import Benchmark, Plan, over_repetitions, register, task_key
from kernels_ext.common import sysinfo
from kernels_ext.common.mpi import library_family

BENCHMARK = "biccg"
#: (JSON key, metric, unit) of each measured value.
METRICS = (("solve_s", "solve_time", "s"), ("setup_s", "setup_time", "s"),
           ("iterations", "iterations", "1"), ("relative_residual", "relative_residual", "1"))

# -- parameters (030_measure_biccg.ipynb's parameters cell) ------------------------------------
def _problem(v: Any) -> dict:
    where = "biccg_problems"
    if isinstance(v, dict) and set(v) == {"poisson"}:
        grid = v["poisson"]
        if not (isinstance(grid, list) and len(grid) == 3 and all(
                isinstance(g, int) and not isinstance(g, bool) and g >= 1 for g in grid)):
            raise ParamError(f"{where}: poisson needs three positive grid sizes [nx, ny, nz], "
                             f"not {grid!r}")
        return {"poisson": list(grid)}
    if isinstance(v, dict) and "mtx" in v and set(v) <= {"mtx", "optional"}:
        if not isinstance(v["mtx"], str) or not v["mtx"]:
            raise ParamError(f"{where}: mtx needs a file path, not {v['mtx']!r}")
        return {"mtx": v["mtx"],
                "optional": check_bool(f"{where} optional")(v.get("optional", False))}
    raise ParamError(f"{where}: each problem is {{poisson: [nx, ny, nz]}} or "
                     f"{{mtx: path, optional: true/false}}, not {v!r}")


PARAMS = [
    Param("biccg_problems", [{"poisson": [64, 64, 64]}],
          "`{poisson: [nx, ny, nz]}` (3D 7-point Laplacian, each rank builds its rows) or `{mtx: "
          "path, optional: true}` (Matrix Market, `.mtx`, `.mtx.gz` or SuiteSparse `.tar.gz`; a "
          "missing optional file is skipped with a note)",
          check_list("biccg_problems", _problem, allow_empty=False)),
    Param("biccg_combination", {"mpiexec": "mpiexec", "launcher": "hydra"},
          "the launcher, with the keys of a ping-pong combination",
          lambda v: check_combination(v, "biccg_combination")),
    Param("biccg_nodes", [1],
          "node counts (hosts from `biccg_hosts`, `$PBS_NODEFILE` or `$SLURM_JOB_NODELIST`)",
          check_list("biccg_nodes", check_count("biccg_nodes", 1), False, INTEGERS)),
    Param("biccg_ranks_per_node", [1, 2],
          "MPI ranks per node (the study: 2)",
          check_list("biccg_ranks_per_node", check_count("biccg_ranks_per_node", 1), False,
                     INTEGERS)),
    Param("biccg_threads", [1, 2],
          "OpenMP threads per rank; layouts needing more cores than a node has are skipped with a "
          "note",
          check_list("biccg_threads", check_count("biccg_threads", 1), False, INTEGERS)),
    Param("biccg_hosts", [],
          "host names of the nodes; empty: `$PBS_NODEFILE` or `$SLURM_JOB_NODELIST`",
          check_str_list("biccg_hosts", "host names")),
    Param("biccg_block_size", 32,
          "rows per block (the study's: 32)",
          check_count("biccg_block_size", 1)),
    Param("biccg_colors", 20,
          "the least number of colors (the study's: 20)",
          check_count("biccg_colors", 1)),
    Param("biccg_tol", 1e-7,
          "relative residual to stop at (the study's: 1e-7)",
          check_positive("biccg_tol")),
    Param("biccg_max_iter", 10000,
          "iteration limit; reaching it is a failure",
          check_count("biccg_max_iter", 1)),
    Param("biccg_baselines", ["scipy-cg", "numba-ic0cg"],
          "Python-side solvers on one process (`numba-cg`: no preconditioner)",
          check_choices("biccg_baselines",
                                                ("scipy-cg", "numba-ic0cg", "numba-cg"))),
    Param("biccg_repetitions", 3,
          "fresh runs per configuration",
          check_count("biccg_repetitions", 1)),
    Param("biccg_timeout_s", 1800,
          "seconds per solve before it is stopped",
          check_positive("biccg_timeout_s")),
]
SPLIT = ("spmv", "precond", "dots", "halo", "vector")


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
    check = (mpiexec, *combo["args"], "-n", "1", sys.executable, "-m", "kernels_ext.biccg",
             "--poisson", "4", "4", "4", "--threads", "1")
    try:
        out, _ = runner.launch(runner.Task("check", {}, check, tuple(combo["env"].items()), 120))
        return mpiexec, json.loads(out.strip().splitlines()[-1])
    except (runner.TaskFailed, ValueError, IndexError) as exc:
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


def parse(task: runner.Task, stdout: str, stderr: str) -> tuple[list[dict], list[dict], str]:
    """One solve's JSON line -> tidy rows (times, iterations, residual, time split)."""
    try:
        rec = json.loads([ln for ln in stdout.splitlines() if ln.startswith("{")][-1])
    except (ValueError, IndexError) as exc:
        raise runner.TaskFailed(f"no result from the solver ({exc})") from exc
    if not rec.get("converged"):
        raise runner.TaskFailed(f"not converged: relative residual "
                                f"{rec.get('relative_residual')} after {rec.get('iterations')} "
                                "iterations")
    extra = {"host": rec.get("host"), "size": rec.get("n"), "timestamp": store.now_iso(),
             "blocking": rec.get("blocking"), "factor_precision": rec.get("factor_precision")}
    rows = [task.config | extra | {"metric": metric, "value": rec[key], "unit": unit}
            for key, metric, unit in METRICS if key in rec]
    for part, v in rec.get("per_iteration_s", {}).items():
        rows.append(task.config | extra | {"metric": f"per_iteration_{part}", "value": v,
                                           "unit": "s"})
    if rec.get("peak_rss_bytes"):
        rows.append(task.config | extra | {"metric": "peak_rss", "value": rec["peak_rss_bytes"],
                                           "unit": "B"})
    rec["stderr"] = stderr.strip()[-2000:]
    summary = (f"{rec['iterations']} iterations, solve {rec['solve_s']:.3f} s, "
               f"setup {rec.get('setup_s', 0):.3f} s, residual {rec['relative_residual']:.2e}")
    return rows, [rec], summary




GROUP = ["vm", "run_id", "problem", "label", "impl", "nodes", "ranks", "threads", "metric",
         "unit"]


def spread(table: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max over repetitions per configuration and metric, with cores used."""
    if table.empty:
        return pd.DataFrame(columns=GROUP + ["cores", "median", "min", "max", "n"])
    out = over_repetitions(table, GROUP, ints=("nodes", "ranks", "threads"))
    out["cores"] = out["ranks"] * out["threads"]
    return out


# -- report (its section of figures/, built by the report notebook) ----------

def _whole(v: object) -> object:
    """A median that is a whole number as an int (written '115' in the CSV, not '115.0')."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _solver_options(table: pd.DataFrame, run: dict, params: dict) -> str:
    """The blocks and the factor's precision the run's C solves used, as their records say
    (runs from before the solver recorded them used rows and a double factor)."""
    mine = table[(table["run_id"] == run["run_id"]) & (table["impl"] == "c")]
    opts = {}
    for col, old in (("blocking", f"rows of {params.get('biccg_block_size')}"),
                     ("factor_precision", "double")):
        vals = mine[col].dropna().unique() if col in mine else []
        opts[col] = ", ".join(sorted(map(str, vals))) if len(vals) else old
    return f"blocks: {opts['blocking']}, IC(0) factor in {opts['factor_precision']} precision"


def report_section(runs_dir: Path | str = "", reference_dir: Path | str = "",
                   figures_dir: Path | str = "", show: bool = False) -> report.Section:
    """The study's Figures 12-13 for every VM with data (time against parallelism, with
    iterations and the time split) and the summary table."""
    section, loaded, ref_dir, fig_dir, root = report.begin(
        "biccg", runs_dir, reference_dir, figures_dir)
    stats = spread(loaded.table)
    rows = []
    for vm, run, s, run_rel in report.each_vm(stats, loaded, root):
        problems = sorted(set(s["problem"]))
        plots.apply_style()  # before the figure, or the first figure misses the style
        fig, axes = plt.subplots(len(problems), 2, figsize=(13, 4.3 * len(problems)),
                                 squeeze=False)
        for (ax_t, ax_s), prob in zip(axes, problems):
            plots.time_vs_cores(s[s["problem"] == prob], ax_t, f"{prob}: solve time")
            plots.iteration_split(s[s["problem"] == prob], ax_s, f"{prob}: one iteration")
        fig.suptitle(f"{vm}: BICCG (block IC(0) CG, multicolor), {report.source_label(run)}",
                     fontweight="bold")
        params = run["params"]
        caption = (f"Data: {run_rel} ({run['status']}); median of {int(s['n'].max())} runs, "
                   f"bars min-max; {_solver_options(loaded.table, run, params)}, "
                   f"{params.get('biccg_colors')} colors, tol {params.get('biccg_tol')}; "
                   "layouts 'RxT' = R MPI ranks per node x T OpenMP threads; baselines on one "
                   "process. The study's Figures 12-13 give no numbers to mark; its conditions "
                   "are in data/reference/biccg_conditions.csv.")
        section.entries.append(report.figure_entry(
            fig, fig_dir, f"biccg_{vm}", f"BICCG time against parallelism on {vm}", caption,
            [run_rel], show))
        med = s.pivot_table(index=["problem", "label", "impl", "nodes", "ranks", "threads",
                                   "cores"], columns="metric", values="median").reset_index()
        lo = s[s["metric"] == "solve_time"].set_index(["problem", "label", "nodes"])
        for r in med.to_dict("records"):
            one = lo.loc[(r["problem"], r["label"], r["nodes"])]
            rows.append({"vm": vm, "problem": r["problem"], "solver": r["label"],
                         "nodes": r["nodes"], "ranks": r["ranks"], "threads": r["threads"],
                         "cores": r["cores"], "iterations": _whole(r.get("iterations")),
                         "solve_s": round(r["solve_time"], 4),
                         "solve_min_s": round(float(one["min"]), 4),
                         "solve_max_s": round(float(one["max"]), 4),
                         "setup_s": round(r.get("setup_time", math.nan), 4),
                         **{f"{k}_ms_per_it": round(1e3 * r.get(f"per_iteration_{k}", math.nan),
                                                    3) for k in SPLIT},
                         "peak_rss_gb": round(r.get("peak_rss", math.nan) / 1e9, 3),
                         "data": run_rel})
    report.table_entry(
        section, rows, fig_dir, "biccg_summary", "BICCG per problem, solver and layout",
        "Medians over repetitions: iterations to a relative residual of tol, solve and setup "
        "times, the time of one iteration split into SpMV, preconditioner, dot products (with "
        "their Allreduce), halo exchange and vector updates, and the peak memory of the largest "
        "rank. Newest run of each VM under data/runs.")
    return section


#: What papermill_params/README.md says of the labels (params.docs() writes it there).
LABELS = "Labels are the layout `<ranks per node>x<threads>` (`2x1`), or the baseline's name."

#: The configuration columns of its rows (besides store.HEAD and store.TAIL).
COLUMNS = ("problem", "nodes", "ranks", "threads", "block_size", "colors", "size", "function",
           "blocking", "factor_precision")

SPEC = register(Benchmark(BENCHMARK, tuple(PARAMS), "030_measure_biccg.ipynb",
                          "130_report_biccg.ipynb", plan, parse, spread,
                          report_section, columns=COLUMNS, title="BICCG", labels=LABELS))
