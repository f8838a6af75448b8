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
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from burstbench import launch, paths, runner, store
from burstbench.params import ParamError
from burstbench.sweep import (Benchmark, Plan, SweepFailed,  # noqa: F401  (notebooks)
                              over_repetitions, task_key)
from kernels_ext import sysinfo
from kernels_ext.pingpong import library_family

BENCHMARK = "biccg"
#: (JSON key, metric, unit) of each measured value.
METRICS = (("solve_s", "solve_time", "s"), ("setup_s", "setup_time", "s"),
           ("iterations", "iterations", "1"), ("relative_residual", "relative_residual", "1"))
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
                             "python -m kernels_ext.mtx --fetch G3_circuit)")
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


def plan(P: dict) -> Plan:
    """Tasks for every problem x nodes x ranks per node x threads x repetition.

    Layouts needing more cores than a node has are skipped with a note
    (they would oversubscribe and time badly); so are node counts beyond the
    hosts known, except inside a batch job, where they are an error.  The
    combination is then tried on a tiny problem, so a missing launcher or an
    MPI mismatch stops the sweep before it starts.
    """
    problems, notes = resolve_problems(P)
    combo = P["biccg_combination"]
    hosts = launch.job_hosts(P["biccg_hosts"], "biccg_hosts")
    cores = sysinfo.available_cpus()
    layouts = []
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
                layouts.append(launch.Layout(nodes * rpn, rpn, t, hosts=hosts.names[:nodes]))
    if not problems or not layouts:
        raise ParamError("nothing to measure: " + ("; ".join(notes) or "no problem or layout"))
    mpiexec, info = try_combination(combo)
    launcher = launch.for_combination(combo, mpiexec, library_family(info["mpi_library"]))
    tasks = []
    for rep in range(1, P["biccg_repetitions"] + 1):
        for prob in problems:
            for layout in layouts:
                tasks.append(_task(P, combo, launcher, prob, layout, rep))
            for method in P["biccg_baselines"]:
                tasks.append(_baseline_task(P, prob, method, rep))
    variants = [info | {"mpiexec_path": mpiexec, "spec": combo}]
    return Plan(tasks, variants, notes, detail="problem")


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
                       P["biccg_timeout_s"])


def _baseline_task(P: dict, prob: Problem, method: str, rep: int) -> runner.Task:
    t = sysinfo.available_cpus()
    argv = (sys.executable, "-m", "kernels_ext.cg_baselines", *prob.args, "--method", method,
            "--threads", str(t), *_common_args(P))
    config = {"benchmark": BENCHMARK, "label": method, "impl": method.split("-")[0],
              "problem": prob.name, "nodes": 1, "ranks": 1,
              "threads": t if method.startswith("numba") else 1, "repetition": rep,
              "function": "solve"}
    key = task_key(f"{prob.name}-{method}", f"r{rep}", [config, argv[1:]])
    return runner.Task(key, config | {"key": key}, argv, (("OMP_NUM_THREADS", str(t)),),
                       P["biccg_timeout_s"])


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


_BENCH = Benchmark(BENCHMARK, plan, parse)
open_run, sweep, measure = _BENCH.open_run, _BENCH.sweep, _BENCH.measure
