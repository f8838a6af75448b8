"""The MPI ping-pong sweep: combinations x placements x tests x repetitions, each its own mpiexec.

A *combination* is a compiler x MPI library pair, as in the study's Figures
5-10: an ``mpiexec`` (with its launcher kind, extra arguments and environment)
and the kernel built against that MPI (the installed module, or a variant
built with the combination's ``mpicc``).  A *placement* says where the two
ranks run: two cores of one socket, one core on each of two sockets, or one
rank on each of two nodes (hosts from ``pingpong_hosts`` or the scheduler).
Every (combination, placement, test, repetition) is one ``mpiexec`` with a
timeout, so a hung MPI job never hangs the notebook; results are stored as
each one finishes and a re-run resumes.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd

from burstbench import launch, plots, report, runner, store
from burstbench.params import (
    Param,
    ParamError,
    check_bool,
    check_choices,
    check_count,
    check_keyed,
    check_label,
    check_list,
    check_optional_count,
    check_positive,
    check_str_list,
    check_text,
)
from burstbench.reference import read_reference, vm_key
from burstbench.sweep import Benchmark, Plan, over_repetitions, register, task_key
from kernels_ext.common import variants
from kernels_ext.common.errors import first_error_line

BENCHMARK = "pingpong"
UNITS = {"latency": ("latency", "us"), "bw": ("bandwidth", "GB/s"), "bibw": ("bandwidth", "GB/s")}

# -- parameters (020_measure_pingpong.ipynb's parameters cell) ---------------------------------
LAUNCHERS = ("hydra", "openmpi", "intel", "slurm", "none")
COMBO_KEYS = {
    "label": "name in figures; empty: <compiler><version>+<mpi><version> of the build",
    "mpiexec": "launcher command, a name on PATH (the environment's bin/ first) or a path",
    "launcher": f"how placements become arguments: {', '.join(LAUNCHERS)}",
    "args": "extra launcher arguments (list of strings)",
    "env": "extra environment variables (mapping), e.g. MPI4PY_LIBMPI",
    "mpicc": "build the kernel with this MPI compiler wrapper (empty: the installed module)",
    "flags": "flags for mpicc (default -O2)",
    "optional": "true: skip this combination with a note where its mpiexec/mpicc is missing "
                "or its mpicc cannot build the kernel",
}
PLACEMENTS = ("same-socket", "across-sockets", "across-nodes")


def check_combination(v: Any, where: str = "pingpong_combinations") -> dict:
    v = check_keyed(v, COMBO_KEYS, where, "combination")
    out = {"label": check_text(f"{where} label")(v.get("label", "")),
           "mpiexec": check_text(f"{where} mpiexec")(v.get("mpiexec", "mpiexec")),
           "launcher": v.get("launcher", "hydra"),
           "args": check_str_list(f"{where} args")(v.get("args", [])),
           "mpicc": check_text(f"{where} mpicc")(v.get("mpicc", "")),
           "flags": check_text(f"{where} flags")(v.get("flags", "-O2")),
           "optional": v.get("optional", False)}
    if out["launcher"] not in LAUNCHERS:
        raise ParamError(f"{where}: launcher '{out['launcher']}' is not one of "
                         f"{', '.join(LAUNCHERS)}")
    if not out["mpiexec"].strip():
        raise ParamError(f"{where}: mpiexec must name a command")
    if out["label"] and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", out["label"]):
        raise ParamError(f"{where}: label '{out['label']}' may hold only letters, digits and "
                         "_ . + -")
    env = v.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise ParamError(f"{where}: env must map variable names to values, not {env!r}")
    out["env"] = {k: str(x) for k, x in env.items()}
    if not isinstance(out["optional"], bool):
        raise ParamError(f"{where}: optional must be true or false")
    return out


def _placement(v: Any) -> dict:
    where = "pingpong_placements"
    if isinstance(v, str):
        if v not in PLACEMENTS:
            raise ParamError(f"{where}: unknown placement '{v}' (use {', '.join(PLACEMENTS)} "
                             "or a mapping {label, cpus: [a, b], hosts: [h1, h2]})")
        return {"label": v, "kind": v}
    if not isinstance(v, dict) or set(v) - {"label", "cpus", "hosts"} or "label" not in v:
        raise ParamError(f"{where}: a custom placement is a mapping with label and cpus "
                         f"and/or hosts, not {v!r}")
    cpus, hosts = v.get("cpus"), v.get("hosts")
    if cpus is not None and (not isinstance(cpus, list) or len(cpus) != 2 or not all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus)):
        raise ParamError(f"{where}: cpus must be two CPU numbers (rank 0, rank 1), not {cpus!r}")
    if hosts is not None and (not isinstance(hosts, list) or len(hosts) not in (1, 2) or not all(
            isinstance(h, str) and h for h in hosts)):
        raise ParamError(f"{where}: hosts must be one or two host names, not {hosts!r}")
    if cpus is not None and cpus[0] == cpus[1] and len(set(hosts or [])) < 2:
        raise ParamError(f"{where}: both ranks on CPU {cpus[0]} of one host would share it "
                         "(and spin against each other); give two CPUs, or two hosts")
    return {"label": check_label(f"{where} label")(v["label"]), "kind": "custom", "cpus": cpus,
            "hosts": hosts}


def _pp_size(name: str, allow_zero: bool) -> Callable[[Any], int]:
    """A message size in bytes: a power of two (or 0), as 4096, 4M, 4MiB or 4.194304e6."""
    def check(v: Any) -> int:
        from kernels_ext.common.errors import KernelError
        from kernels_ext.pingpong import SIZE_LIMIT, is_power_of_two, parse_size

        if isinstance(v, float) and math.isfinite(v) and v == int(v):
            v = int(v)  # 6.5536e4
        try:
            n = parse_size(v) if isinstance(v, (int, str)) and not isinstance(v, bool) else None
        except KernelError as exc:
            raise ParamError(f"{name}: {exc}") from exc
        if n is None or n > SIZE_LIMIT or not (is_power_of_two(n) or (allow_zero and n == 0)):
            raise ParamError(f"{name} must be {'0 or ' if allow_zero else ''}a power of two "
                             f"up to {SIZE_LIMIT} bytes, not {v!r}")
        return n

    return check


PARAMS = [
    Param("pingpong_combinations", [{"mpiexec": "mpiexec", "launcher": "hydra"}],
          "compiler x MPI library combinations, each `{label, mpiexec, launcher, args, env, "
          "mpicc, flags, optional}`: `launcher` is `hydra` (MPICH, MVAPICH2), `intel`, `openmpi` "
          "(Open MPI 4.x mpirun), `slurm` (srun) or `none`; `env` is set for its runs (e.g. "
          "`MPI4PY_LIBMPI` so mpi4py loads that MPI); `mpicc` builds the kernel against it (a "
          "cached variant; empty: the installed module); `label` defaults to "
          "`<compiler><version>+<mpi><version>`; `optional: true` skips it with a note where its "
          "mpiexec or mpicc is missing",
          check_list("pingpong_combinations", check_combination, False),
          shown="the environment's `mpiexec` (hydra)"),
    Param("pingpong_placements", ["same-socket", "across-sockets", "across-nodes"],
          "two cores of one socket; the first core of two sockets; one rank on each of two hosts; "
          "or `{label, cpus: [a, b], hosts: [h1, h2]}`. Placements this machine cannot give are "
          "skipped with a note",
          check_list("pingpong_placements", _placement, False)),
    Param("pingpong_hosts", [],
          "hosts for across-nodes; empty: `$PBS_NODEFILE` or `$SLURM_JOB_NODELIST`",
          check_str_list("pingpong_hosts", "host names")),
    Param("pingpong_tests", ["latency", "bw", "bibw"],
          "OSU tests",
          check_choices("pingpong_tests", ("latency", "bw", "bibw"), allow_empty=False)),
    Param("pingpong_min_size", 0,
          "smallest message in bytes (0 or a power of two; `4K` accepted; the bandwidth tests "
          "start at 1)",
          _pp_size("pingpong_min_size", True)),
    Param("pingpong_max_size", 4194304,
          "largest message in bytes (a power of two; `4M` accepted)",
          _pp_size("pingpong_max_size", False)),
    Param("pingpong_iterations", None,
          "timed iterations up to 8 KiB (null: OSU's, 10,000 for latency and 100 for bandwidth)",
          check_optional_count("pingpong_iterations", 1)),
    Param("pingpong_skip", None,
          "warm-up iterations up to 8 KiB (null: OSU's, 100 for latency and 10 for bandwidth)",
          check_optional_count("pingpong_skip", 0)),
    Param("pingpong_iterations_large", None,
          "timed iterations above 8 KiB (null: OSU's, 1,000 for latency and 20 for bandwidth)",
          check_optional_count("pingpong_iterations_large", 1)),
    Param("pingpong_skip_large", None,
          "warm-up iterations above 8 KiB (null: OSU's, 10 for latency and 2 for bandwidth)",
          check_optional_count("pingpong_skip_large", 0)),
    Param("pingpong_window", None,
          "messages in flight in `bw` and `bibw` (null: OSU's 64)",
          check_optional_count("pingpong_window", 1)),
    Param("pingpong_hugepages", [False],
          "message buffers without (as OSU) and/or with transparent huge pages (`true`: label "
          "suffix `+thp`)",
          check_list("pingpong_hugepages", check_bool("pingpong_hugepages"), allow_empty=False,
                     takes="a list of true or false values (or one of them)")),
    Param("pingpong_baselines", ["mpi4py"],
          "the same methods as a pure mpi4py loop (label suffix `+mpi4py`)",
          check_choices("pingpong_baselines", ("mpi4py",))),
    Param("pingpong_validate", True,
          "first a short data-checked run of every combination, placement and test",
          check_bool("pingpong_validate")),
    Param("pingpong_repetitions", 3,
          "fresh mpiexec runs per configuration",
          check_count("pingpong_repetitions", 1)),
    Param("pingpong_timeout_s", 300,
          "seconds one mpiexec may run before it is stopped (a hung MPI job or an unreachable "
          "host fails, it never hangs the sweep)",
          check_positive("pingpong_timeout_s")),
]


@dataclass(frozen=True)
class Placement:
    """Where rank 0 and rank 1 run, under the name the figures give it."""

    label: str
    kind: str
    layout: launch.Layout

    @property
    def nodes(self) -> int:
        return self.layout.nodes


def pair(label: str, kind: str, cpus: Sequence[int] | None,
         hosts: Sequence[str] | None) -> Placement:
    """The placement of two ranks on `cpus` (None: the launcher binds) of 1 or 2 `hosts`."""
    names = tuple(dict.fromkeys(hosts or ()))
    return Placement(label, kind, launch.Layout(2, 2 // max(1, len(names)),
                                                cpus=tuple(cpus or ()), hosts=names))


def resolve_placements(P: dict) -> tuple[list[Placement], list[str]]:
    """Turn the placement parameters into CPUs and hosts; note the impossible ones
    (across-nodes where fewer than 2 hosts are known: in a one-node job too)."""
    hosts = launch.job_hosts(P["pingpong_hosts"], "pingpong_hosts")
    topo = launch.topology()
    out, notes = [], []
    for spec in P["pingpong_placements"]:
        kind, label = spec["kind"], spec["label"]
        if kind == "custom":
            out.append(pair(label, kind, spec.get("cpus"), spec.get("hosts")))
        elif kind == "across-nodes":
            note = hosts.shortfall(2, "pingpong_placements across-nodes", required=False)
            if note:
                notes.append(note)
            else:
                out.append(pair(label, kind, None, hosts.names[:2]))
        else:
            cpus = launch.placement_cpus(kind, topo)
            if cpus is None:
                notes.append(f"skipped placement {kind}: this machine has no such pair of "
                             f"cores ({len({t[1] for t in topo})} socket(s), {len(topo)} CPUs)")
            else:
                out.append(pair(label, kind, cpus, hosts.names[:1]))
    return out, notes


def _kernel_args(combo: dict) -> list[str]:
    return ["--compiler", combo["mpicc"], f"--flags={combo['flags']}"] if combo["mpicc"] else []


def usable(combo: dict) -> str:
    """Why `combo` cannot run here, '' when it can: its mpiexec or mpicc is missing, or its
    mpicc does not build the kernel (the compiler's first error line).

    The kernel is built here, into the variant cache, before any MPI run:
    whether an MPI can build is known only by compiling with it.
    """
    for key in ("mpiexec", "mpicc"):
        if combo[key] and not launch.resolve_command(combo[key]):
            return f"{key} '{combo[key]}' not found"
    if not combo["mpicc"]:
        return ""
    try:
        variants.build(combo["mpicc"], combo["flags"], kernel="pingpong")
    except variants.BuildFailed as exc:
        return f"{combo['mpicc']} cannot build the kernel: {first_error_line(exc.output)}"
    except variants.VariantError as exc:
        return str(exc)
    return ""


def combo_info(combo: dict, timeout: float) -> dict:
    """Ask the combination's own mpiexec what the kernel was built with and which MPI runs it.

    Raises runner.TaskFailed with mpiexec's message (missing launcher, MPI
    mismatch, a kernel that does not build).
    """
    mpiexec = launch.resolve_command(combo["mpiexec"])
    if mpiexec is None:
        raise runner.TaskFailed(f"mpiexec '{combo['mpiexec']}' not found")
    argv = (mpiexec, *combo["args"], "-n", "1", sys.executable, "-m", "kernels_ext.pingpong",
            "--info", *_kernel_args(combo))
    out, _ = runner.launch(runner.Task("info", {}, argv, tuple(combo["env"].items()),
                                       min(timeout, 120)))
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        raise runner.TaskFailed(f"{mpiexec} printed no build information")
    return json.loads(lines[-1]) | {"mpiexec_path": mpiexec}


Combination = tuple[dict, dict, launch.Launcher]  # (parameters, --info answer, launcher)


@dataclass
class Machine:
    """What a ping-pong plan needs to know of this machine, found by probe()."""

    combinations: list[Combination]
    placements: list[Placement]
    notes: list[str] = field(default_factory=list)


def probe(P: dict) -> Machine:
    """Resolve the placements on this machine's CPUs and hosts (impossible ones are notes)
    and ask each combination's mpiexec what it runs (building its kernel where it has an
    mpicc).  A combination whose mpiexec or mpicc is missing, or whose mpicc does not build
    the kernel, is an error naming it, or a note when marked optional; a kernel built for
    another MPI than mpi4py loads, or an mpiexec that fails, is an error showing the
    launcher's message."""
    placements, notes = resolve_placements(P)
    combos: list[Combination] = []
    for combo in P["pingpong_combinations"]:
        name = combo["label"] or combo["mpiexec"]
        why = usable(combo)
        if why and combo["optional"]:
            notes.append(f"skipped combination {name}: {why}")
            continue
        try:
            if why:
                raise runner.TaskFailed(why)
            info = combo_info(combo, P["pingpong_timeout_s"])
        except runner.TaskFailed as exc:
            raise ParamError(f"pingpong_combinations: {name}: {exc}") from exc
        label = combo["label"] or f"{info.get('label', 'mpi4py')}+{info['mpi_label']}"
        combos.append((combo, info | {"combination": label},
                       launch.for_combination(combo, info["mpiexec_path"], info["mpi_family"])))
    return Machine(combos, placements, notes)


def expand(P: dict, m: Machine) -> Plan:
    """Tasks for every combination x placement x test (x implementation, x huge pages) x
    repetition, a validated short run of each first where asked; runs nothing."""
    combos, placements, notes = m.combinations, m.placements, list(m.notes)
    labels = [c[1]["combination"] for c in combos]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ParamError(f"pingpong_combinations: two combinations are labelled {dupes[0]}: "
                         "give each a label")
    if not combos or not placements:
        raise ParamError("nothing to measure: " + ("; ".join(notes) or "no combination"))

    impls = ["c"] + list(P["pingpong_baselines"])
    tasks = []
    if P["pingpong_validate"]:  # a short checked run of each first: wrong data stops here
        for combo in combos:
            for pl in placements:
                for test in P["pingpong_tests"]:
                    tasks.append(_task(P, combo, pl, test, "c", 0, validate=True))
    for rep in range(1, P["pingpong_repetitions"] + 1):
        for combo in combos:
            for pl in placements:
                for test in P["pingpong_tests"]:
                    for impl in impls:
                        for thp in P["pingpong_hugepages"]:
                            tasks.append(_task(P, combo, pl, test, impl, rep, thp=thp))
    built = [info | {"spec": combo} for combo, info, _ in combos]
    return Plan(tasks, built, notes, detail="function")


def plan(P: dict) -> Plan:
    """Turn validated parameters into tasks: probe() this machine, then expand()."""
    return expand(P, probe(P))


def _task(P: dict, combination: Combination, pl: Placement, test: str, impl: str, rep: int,
          validate: bool = False, thp: bool = False) -> runner.Task:
    combo, info, launcher = combination
    label = (f"{info['combination']}+{pl.label}" + ("+thp" if thp else "")
             + ("+mpi4py" if impl == "mpi4py" else ""))
    args, env = launcher.args(pl.layout), launcher.env(pl.layout)
    kernel = ["--test", test, "--min-size", str(P["pingpong_min_size"] if test == "latency"
                                                else max(1, P["pingpong_min_size"])),
              "--max-size", str(P["pingpong_max_size"])]
    if validate:
        kernel += ["--validate", "--iterations", "10", "--skip", "1", "--iterations-large", "2",
                   "--skip-large", "1"]
    else:
        for key in ("iterations", "skip", "iterations_large", "skip_large", "window"):
            if P[f"pingpong_{key}"] is not None:
                kernel += [f"--{key.replace('_', '-')}", str(P[f"pingpong_{key}"])]
    kernel += ["--impl", impl] + (_kernel_args(combo) if impl == "c" else [])
    kernel += ["--hugepages"] if thp else []
    argv = (info["mpiexec_path"], *combo["args"], *args, sys.executable, "-m",
            "kernels_ext.pingpong", *kernel)
    config = {"benchmark": BENCHMARK, "label": label, "impl": impl,
              "variant": info["combination"], "compiler": info.get("label", ""),
              "compiler_version": info.get("mpi_label", ""), "flags": info.get("flags", ""),
              "placement": pl.label, "ranks": 2, "nodes": pl.nodes, "function": test,
              "repetition": rep, "validation": validate}
    key = task_key(label, f"{test}-r{rep}" + ("-check" if validate else ""),
                          [config, argv[1:], sorted(combo["env"].items())])
    return runner.Task(key, config | {"key": key}, argv,
                       tuple(sorted((combo["env"] | env).items())), P["pingpong_timeout_s"],
                       estimate_s(P, test, validate))


#: The work model of estimate_s: mpiexec's start, then each message at an assumed 1 us
#: plus its bytes at 12 GB/s (one node's shared memory, as measured on the 2-core VM: 0.9 us,
#: 13.7 GB/s; local.yaml's 78 configurations took 100 s, estimated at about 3 min).
START_S, MESSAGE_S, ASSUMED_GBS = 0.5, 1e-6, 12.0


def estimate_s(P: dict, test: str, validate: bool = False) -> float:
    """About how long one mpiexec of `test` takes: OSU's iterations (with skips) at each
    message size, two messages per iteration (the window's worth for bw and bibw)."""
    from kernels_ext.pingpong import LARGE_MESSAGE_SIZE, message_sizes, method

    m = method(test, *(None, None, None, None) if validate else
               (P["pingpong_iterations"], P["pingpong_skip"], P["pingpong_iterations_large"],
                P["pingpong_skip_large"]), window=P["pingpong_window"])
    if validate:
        m |= {"iterations": 10, "skip": 1, "iterations_large": 2, "skip_large": 1}
    lo = P["pingpong_min_size"] if test == "latency" else max(1, P["pingpong_min_size"])
    total = START_S
    for size in message_sizes(test, lo, P["pingpong_max_size"]):
        large = size > LARGE_MESSAGE_SIZE
        n = m["iterations_large" if large else "iterations"] + m["skip_large" if large else "skip"]
        total += n * 2 * m["window"] * (MESSAGE_S + size / (ASSUMED_GBS * 1e9))
    return total


def parse(task: runner.Task, stdout: str, stderr: str) -> tuple[list[dict], list[dict], str]:
    """Kernel JSON lines (one per message size) -> tidy rows and raw records."""
    try:
        records = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]
    except ValueError as exc:
        raise runner.TaskFailed(f"unreadable kernel output ({exc})") from exc
    if not records:
        raise runner.TaskFailed("the kernel printed no results"
                                + (f": {stderr.strip().splitlines()[-1]}" if stderr.strip()
                                   else ""))
    c = task.config
    metric, unit = UNITS[c["function"]]
    rows = []
    for rec in records:
        extra = {"host": rec.get("host"), "message_size": rec["size_bytes"],
                 "bound_cpus": ",".join(str(r["cpu"]) for r in rec.get("ranks", [])),
                 "nodes": rec.get("hosts", c["nodes"]), "timestamp": store.now_iso()}
        if c["validation"]:
            rows.append(c | extra | {"metric": "validation_errors", "value": rec["errors"],
                                     "unit": "bytes"})
        else:
            value = rec["latency_us"] if metric == "latency" else rec["bandwidth_gbs"]
            rows.append(c | extra | {"metric": metric, "value": value, "unit": unit})
        rec["stderr"] = stderr.strip()[-2000:]
    clean = [{k: v for k, v in r.items() if k != "validation"} for r in rows]
    first, last = records[0], records[-1]
    if c["validation"]:
        summary = f"data checked, {len(records)} sizes, no errors"
    elif metric == "latency":
        summary = (f"{first['latency_us']:.2f} us at {first['size_bytes']} B, "
                   f"{last['latency_us']:.1f} us at {last['size_bytes']} B")
    else:
        summary = f"{max(r['bandwidth_gbs'] for r in records):.2f} GB/s max"
    return clean, records, summary + f" on CPUs [{rows[0]['bound_cpus']}]"




GROUP = ["vm", "run_id", "label", "impl", "variant", "placement", "function", "metric", "unit",
         "message_size"]


def spread(table: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max over repetitions per configuration and message size."""
    return over_repetitions(table[table["metric"].isin(["latency", "bandwidth"])], GROUP,
                            ints=("message_size",))


def extremes(stats: pd.DataFrame) -> pd.DataFrame:
    """Per VM, run, label and test: minimum latency or maximum bandwidth (of the medians)."""
    rows = []
    for keys, d in stats.groupby(["vm", "run_id", "label", "impl", "variant", "placement",
                                  "function"]):
        lat = d["metric"].iloc[0] == "latency"
        best = d.loc[d["median"].idxmin() if lat else d["median"].idxmax()]
        rows.append(dict(zip(["vm", "run_id", "label", "impl", "combination", "placement",
                              "test"], keys))
                    | {"value": round(float(best["median"]), 3),
                       "unit": best["unit"], "at_size_bytes": int(best["message_size"]),
                       "min": round(float(best["min"]), 3), "max": round(float(best["max"]), 3),
                       "repetitions": int(best["n"])})
    return pd.DataFrame(rows)


# -- report (its section of figures/, built by the report notebook) ----------

def report_section(runs_dir: Path | str = "", reference_dir: Path | str = "",
                   figures_dir: Path | str = "", show: bool = False) -> report.Section:
    """The study's Figures 5-10 for every VM with data, and the latency/bandwidth table."""
    section, loaded, ref_dir, fig_dir, root = report.begin(
        "pingpong", runs_dir, reference_dir, figures_dir)
    ref = read_reference(ref_dir, "osu.csv", ["vm", "latency_min_us", "latency_max_us",
                                              "bandwidth_max_gbs", "source"], section.problems)
    stats = spread(loaded.table)
    rows = []
    for vm, run, s, run_rel in report.each_vm(stats, loaded, root):
        tests = [t for t in ("latency", "bw", "bibw") if t in set(s["function"])]
        # panels side by side, the legend in a row of its own below them: about 1,800 px
        # wide at 150 dpi for three panels, so it reads on a laptop and in the README
        plots.apply_style()
        legend_rows = math.ceil(s["label"].nunique() / (2 if len(tests) > 1 else 1))
        fig = plt.figure(figsize=(max(8.0, 4.0 * len(tests)), 4.6 + 0.2 * legend_rows))
        grid = fig.add_gridspec(2, len(tests), height_ratios=[3.6, 0.2 + 0.2 * legend_rows])
        axes = [[fig.add_subplot(grid[0, i]) for i in range(len(tests))]]
        legend_ax = fig.add_subplot(grid[1, :])
        legend_ax.axis("off")
        r = ref[ref["vm"].map(vm_key) == vm_key(vm)]
        marks = []
        for ax, test in zip(axes[0], tests):
            plots.versus_message_size(s, ax, test)
            for x in r.itertuples():
                if test == "latency" and pd.notna(x.latency_min_us):
                    ax.axhspan(x.latency_min_us, x.latency_max_us, color="0.5", alpha=0.15,
                               label=f"study: {x.latency_min_us:g}-{x.latency_max_us:g} µs")
                    marks.append("the study's latency range")
                if test == "bw" and pd.notna(x.bandwidth_max_gbs):
                    plots.reference_line(ax, x.bandwidth_max_gbs,
                                         f"study max {x.bandwidth_max_gbs:g} GB/s")
                    marks.append("the study's maximum bandwidth")
        handles, labels = axes[0][0].get_legend_handles_labels()
        for ax in axes[0][1:]:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        legend_ax.legend(handles, labels, loc="center", ncol=2 if len(tests) > 1 else 1,
                         fontsize=9, columnspacing=2.5)
        fig.suptitle(f"{vm}: MPI ping-pong, two ranks ({report.source_label(run)})",
                     fontweight="bold", fontsize=12)
        params = run["params"]
        caption = (f"Data: {run_rel} ({run['status']}); median of "
                   f"{int(s['n'].max())} mpiexec runs per point, bars min-max; OSU 7.x methods "
                   f"(iterations {params.get('pingpong_iterations') or 'as OSU'}), "
                   "solid: C kernel, dashed: the same loop in mpi4py, one colour per "
                   "combination and placement; size 0 is drawn at the tick '0' (0.5 B on the log "
                   "axis). "
                   + (f"Reference marks: {', '.join(dict.fromkeys(marks))} "
                      "(data/reference/osu.csv)." if marks else
                      "No reference figure is known for this VM."))
        section.entries.append(report.figure_entry(
            fig, fig_dir, f"pingpong_{vm}", f"MPI latency and bandwidth vs message size on {vm}",
            caption, [run_rel], show))
        for row in extremes(s).to_dict("records"):
            rows.append({"vm": vm, "source": report.source_label(run)} | row | {"data": run_rel})
    for x in ref.itertuples():
        base = {"vm": x.vm, "source": "the study", "label": "", "impl": "",
                "combination": f"{x.combinations:g} combinations" if pd.notna(
                    getattr(x, "combinations", float("nan"))) else "", "placement": "inter-node",
                "at_size_bytes": pd.NA, "min": math.nan, "max": math.nan,
                "repetitions": pd.NA, "data": "data/reference/osu.csv"}
        rows.append(base | {"test": "latency", "value": x.latency_min_us, "unit": "us",
                            "note": f"range {x.latency_min_us:g}-{x.latency_max_us:g} us"})
        rows.append(base | {"test": "bw", "value": x.bandwidth_max_gbs, "unit": "GB/s",
                            "note": "maximum"})
    report.table_entry(
        section, [{k: v for k, v in r.items() if k != "run_id"} for r in rows], fig_dir,
        "pingpong_extremes",
        "Minimum latency and maximum bandwidth per VM, combination and placement",
        "Per VM, combination (compiler + MPI library), placement and test: the smallest median "
        "latency and the largest median bandwidth over message sizes, with the size where it "
        "occurs. 'measured here' rows: the newest run of each VM under data/runs; 'the study' "
        "rows: data/reference/osu.csv (its latency range and maximum bandwidth, inter-node).")
    return section


#: What papermill_params/README.md says of the labels (params.docs() writes it there).
LABELS = ("Labels are `<combination>+<placement>[+thp][+mpi4py]`, e.g. "
          "`gcc12.2.0+mpich5.0.2+same-socket`.")

#: The configuration columns of its rows (besides store.HEAD and store.TAIL).
COLUMNS = ("variant", "compiler", "compiler_version", "flags", "placement", "ranks", "nodes",
           "message_size", "function", "bound_cpus")

SPEC = register(Benchmark(BENCHMARK, tuple(PARAMS), "020_measure_pingpong.ipynb",
                          "120_report_pingpong.ipynb", plan, parse, spread,
                          report_section, columns=COLUMNS, title="MPI ping-pong",
                          labels=LABELS))
