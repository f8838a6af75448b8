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
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from burstbench import runner, store
from burstbench import sweep as sweep_
from burstbench.params import ParamError
from burstbench.sweep import Plan, SweepFailed  # noqa: F401  (re-exported for notebooks)
from kernels_ext import _sysinfo

BENCHMARK = "pingpong"
UNITS = {"latency": ("latency", "us"), "bw": ("bandwidth", "GB/s"), "bibw": ("bandwidth", "GB/s")}


@dataclass(frozen=True)
class Placement:
    """Where rank 0 and rank 1 run: CPUs on each host, and the hosts (None: this machine)."""

    label: str
    kind: str
    cpus: tuple[int, int] | None
    hosts: tuple[str, ...] | None

    @property
    def nodes(self) -> int:
        return len(set(self.hosts)) if self.hosts else 1


def topology(sys_cpu: Path = _sysinfo.SYS_CPU) -> list[tuple[int, int, int]]:
    """(cpu, socket, core) of every CPU this process may use, from sysfs."""
    allowed = os.sched_getaffinity(0)
    out = []
    for cpu in sorted(allowed):
        topo = sys_cpu / f"cpu{cpu}" / "topology"
        try:
            pkg = int((topo / "physical_package_id").read_text())
            core = int((topo / "core_id").read_text())
        except (OSError, ValueError):
            pkg, core = 0, cpu
        out.append((cpu, pkg, core))
    return out


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


def expand_nodelist(text: str) -> list[str]:
    """Expand a Slurm node list such as ``node[01-03,07],gpu1``."""
    hosts = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]+)\])?", text):
        prefix, ranges = m.group(1), m.group(2)
        if not ranges:
            hosts.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                hosts.append(f"{prefix}{str(i).zfill(len(lo))}")
    return [h for h in hosts if h]


def scheduler_hosts(environ: dict[str, str] | None = None) -> list[str]:
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


def resolve_placements(P: dict) -> tuple[list[Placement], list[str]]:
    """Turn the placement parameters into CPUs and hosts; note the impossible ones."""
    hosts = P["pingpong_hosts"] or scheduler_hosts()
    topo = topology()
    out, notes = [], []
    for spec in P["pingpong_placements"]:
        kind, label = spec["kind"], spec["label"]
        if kind == "custom":
            cpus = tuple(spec["cpus"]) if spec.get("cpus") else None
            out.append(Placement(label, kind, cpus, tuple(spec["hosts"]) if spec.get("hosts")
                                 else None))
        elif kind == "across-nodes":
            if len(hosts) < 2:
                notes.append("skipped placement across-nodes: fewer than 2 hosts (give "
                             "pingpong_hosts, or run under PBS/Slurm)")
            else:
                out.append(Placement(label, kind, None, (hosts[0], hosts[1])))
        else:
            cpus = placement_cpus(kind, topo)
            if cpus is None:
                notes.append(f"skipped placement {kind}: this machine has no such pair of "
                             f"cores ({len({t[1] for t in topo})} socket(s), {len(topo)} CPUs)")
            else:
                out.append(Placement(label, kind, cpus, (hosts[0],) if hosts else None))
    return out, notes


def launch_args(launcher: str, pl: Placement) -> tuple[list[str], dict[str, str]]:
    """Launcher arguments (and environment) that put 2 ranks where `pl` says."""
    cpus = ",".join(map(str, pl.cpus)) if pl.cpus else ""
    two_nodes = pl.nodes == 2
    hosts = ",".join(dict.fromkeys(pl.hosts)) if pl.hosts else ""
    if launcher == "hydra":  # MPICH, MVAPICH2
        args = (["-hosts", hosts] if hosts else []) + (["-ppn", "1"] if two_nodes else [])
        args += ["-bind-to", f"user:{cpus}"] if cpus else ["-bind-to", "core"]
        return args + ["-n", "2"], {}
    if launcher == "intel":  # Intel MPI's hydra: pinning by environment
        args = (["-hosts", hosts] if hosts else []) + (["-ppn", "1"] if two_nodes else [])
        return args + ["-n", "2"], ({"I_MPI_PIN_PROCESSOR_LIST": cpus} if cpus else {})
    if launcher == "openmpi":  # Open MPI 4.x mpirun
        args = ["--host", ",".join(f"{h}:1" for h in pl.hosts)] if two_nodes else \
            (["--host", f"{hosts}:2"] if hosts else [])
        args += ["--cpu-list", cpus, "--bind-to", "cpu-list:ordered"] if cpus else \
            ["--bind-to", "core"]
        return args + ["-n", "2"], {}
    if launcher == "slurm":  # srun inside an allocation
        args = (["-N", "2", "--ntasks-per-node", "1"] if two_nodes else ["-N", "1"])
        args += ["--nodelist", hosts] if hosts else []
        args += [f"--cpu-bind=map_cpu:{cpus}"] if cpus else ["--cpu-bind=cores"]
        return args + ["-n", "2"], {}
    return ["-n", "2"], {}


def resolve_command(cmd: str) -> str | None:
    """A command's path: as given if it has a '/', else in this Python's bin/ first, then PATH."""
    if os.sep in cmd:
        return cmd if os.access(cmd, os.X_OK) else None
    local = Path(sys.executable).parent / cmd
    if os.access(local, os.X_OK):
        return str(local)
    return shutil.which(cmd)


def _kernel_args(combo: dict) -> list[str]:
    return ["--compiler", combo["mpicc"], f"--flags={combo['flags']}"] if combo["mpicc"] else []


def combo_info(combo: dict, timeout: float) -> dict:
    """Ask the combination's own mpiexec what the kernel was built with and which MPI runs it.

    Raises runner.TaskFailed with mpiexec's message (missing launcher, MPI
    mismatch, a kernel that does not build).
    """
    mpiexec = resolve_command(combo["mpiexec"])
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


def plan(P: dict) -> Plan:
    """Tasks for every combination x placement x test (x implementation) x repetition.

    A combination whose mpiexec or mpicc is missing is an error naming it,
    or skipped with a note when marked optional; a kernel built for another
    MPI than mpi4py loads, or an mpiexec that fails, is an error showing the
    launcher's message.  Impossible placements are skipped with a note.
    """
    placements, notes = resolve_placements(P)
    combos = []
    for combo in P["pingpong_combinations"]:
        missing = [c for c in (combo["mpiexec"], combo["mpicc"]) if c and not resolve_command(c)]
        if missing and combo["optional"]:
            notes.append(f"skipped combination {combo['label'] or combo['mpiexec']}: "
                         f"'{missing[0]}' is not installed here")
            continue
        try:
            info = combo_info(combo, P["pingpong_timeout_s"])
        except runner.TaskFailed as exc:
            raise ParamError(f"pingpong_combinations: {combo['label'] or combo['mpiexec']}: "
                             f"{exc}") from exc
        label = combo["label"] or f"{info.get('label', 'mpi4py')}+{info['mpi_label']}"
        combos.append((combo, info | {"combination": label}))
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
        for combo, info in combos:
            for pl in placements:
                for test in P["pingpong_tests"]:
                    tasks.append(_task(P, combo, info, pl, test, "c", 0, validate=True))
    for rep in range(1, P["pingpong_repetitions"] + 1):
        for combo, info in combos:
            for pl in placements:
                for test in P["pingpong_tests"]:
                    for impl in impls:
                        for thp in P["pingpong_hugepages"]:
                            tasks.append(_task(P, combo, info, pl, test, impl, rep, thp=thp))
    variants = [info | {"spec": combo} for combo, info in combos]
    return Plan(tasks, variants, notes, detail="function")


def _task(P: dict, combo: dict, info: dict, pl: Placement, test: str, impl: str, rep: int,
          validate: bool = False, thp: bool = False) -> runner.Task:
    label = (f"{info['combination']}+{pl.label}" + ("+thp" if thp else "")
             + ("+mpi4py" if impl == "mpi4py" else ""))
    args, env = launch_args(combo["launcher"], pl)
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
    key = sweep_.task_key(label, f"{test}-r{rep}" + ("-check" if validate else ""),
                          [config, argv[1:], sorted(combo["env"].items())])
    return runner.Task(key, config | {"key": key}, argv,
                       tuple(sorted((combo["env"] | env).items())), P["pingpong_timeout_s"])


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
    df = table[table["metric"].isin(["latency", "bandwidth"])].copy()
    if df.empty:
        return pd.DataFrame(columns=GROUP + ["median", "min", "max", "n"])
    df["value"] = df["value"].astype(float)
    df["message_size"] = df["message_size"].astype(int)
    for c in GROUP:
        if c != "message_size":
            df[c] = df[c].astype(object).where(df[c].notna(), "").astype(str)
    return (df.groupby(GROUP, sort=True)["value"]
              .agg(median="median", min="min", max="max", n="size").reset_index())


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


_BENCH = sweep_.Benchmark(BENCHMARK, plan, parse)
open_run, sweep, measure = _BENCH.open_run, _BENCH.sweep, _BENCH.measure
