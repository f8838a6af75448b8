"""What a storage sweep runs: probe() each target by using it (a tiny write and read under the
launcher, O_DIRECT first where `direct: auto`; its file system, mount options and free space
for the provenance), then expand() the parameters into one mpiexec of the kernel per
(target, API, access pattern, layout, repetition), each with its estimated time and a
clean-up that removes its files if it does not end by itself; plus Gfarm replications."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from burstbench.core import budget, launch, runner, workmodel
from burstbench.core.checks import ParamError
from burstbench.core.mpi import ask
from burstbench.core.sweep import Plan, task_key
from kernels_ext.common import sysinfo

BENCHMARK = "storage"
#: What a tiny probe writes and reads: one transfer, aligned for direct I/O; and at most
#: what the timed one (time_target) writes and reads per rank: the planned block up to
#: RATE_BYTES, so that its bandwidth is the planned blocks' (a disk that writes 32 MiB at
#: 1.4 GB/s may write 2 x 256 MiB at 2 GB/s).
PROBE_BYTES, RATE_BYTES = "1M", 256 * 2 ** 20
_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}")


@dataclass(frozen=True)
class Target:
    """A target as found on this machine: its folder (variables read), the APIs to use, the
    environment its runs need, whether reads bypass the page cache, and its file system."""

    name: str
    path: str
    apis: tuple[str, ...]
    direct: bool
    env: tuple[tuple[str, str], ...] = ()
    info: dict = field(default_factory=dict, compare=False)

    @property
    def gfarm(self) -> bool:
        return self.path.startswith("gfarm://")


def expand_vars(path: str, environ: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """`path` with $VAR and ${VAR} read from the environment, and the variables not set."""
    env = os.environ if environ is None else environ
    missing = [a or b for a, b in _VAR.findall(path) if (a or b) not in env]
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), path), missing


def gfarm_config(target: dict, environ: dict[str, str] | None = None) -> str:
    """The Gfarm client configuration a target's runs use: its `config`, else
    $GFARM_CONFIG_FILE, else /etc/gfarm2.conf; '' where there is none."""
    env = os.environ if environ is None else environ
    for candidate in (target["config"], env.get("GFARM_CONFIG_FILE", ""), "/etc/gfarm2.conf"):
        if candidate and Path(candidate).is_file():
            return str(Path(candidate).resolve())
    return ""


def free_bytes(target: Target) -> int | None:
    """Free space where the target writes (gfdf for Gfarm); None where it cannot be read."""
    if not target.gfarm:
        try:
            return shutil.disk_usage(target.path).free
        except OSError:
            return None
    try:
        out = subprocess.run(["gfdf"], capture_output=True, text=True, timeout=30,
                             env=os.environ | dict(target.env)).stdout.splitlines()
        return int(out[-1].split()[2]) * 1024  # the total line: 1K-blocks used avail
    except (OSError, subprocess.TimeoutExpired, IndexError, ValueError):
        return None


def kernel_args(P: dict, target: Target, api: str, access: str, collective: bool,
                name: str, block: int | str | None = None) -> list[str]:
    """The kernel's options for one configuration (block: the probe's, in transfers of
    PROBE_BYTES)."""
    args = ["-m", "kernels_ext.storage", "--api", api, "--path", target.path, "--name", name,
            "--transfer-size", str(P["storage_transfer_size"] if block is None else PROBE_BYTES),
            "--block-size", str(P["storage_block_size"] if block is None else block),
            "--segments", str(P["storage_segments"] if block is None else 1)]
    args += ["--file-per-process"] if access == "file-per-process" else []
    args += ["--fsync"] if P["storage_fsync"] else []
    args += ["--direct"] if target.direct and api == "posix" else []
    args += ["--reorder"] if P["storage_reorder"] else []
    args += ["--collective"] if collective else []
    args += ["--drop-caches"] if P["storage_drop_caches"] and api != "gfarm" else []
    return args


#: Seconds a Gfarm command of a clean-up may take: a metadata server that is down makes the
#: client retry for a minute (and no file of this configuration can be left then anyway).
GFARM_CLEANUP_S = 15


def remove_files(target: Target, name: str) -> None:
    """Remove what a configuration named `name` wrote in the target (its file, or one per
    rank: name.00000000, ...), as its kernel would have at its end; OSError where Gfarm
    does not answer within GFARM_CLEANUP_S."""
    if not target.gfarm:
        for f in Path(target.path).glob(f"{name}*"):
            f.unlink(missing_ok=True)
        return
    env = os.environ | dict(target.env)
    folder = target.path.rstrip("/")
    try:
        listing = subprocess.run(["gfls", folder], capture_output=True, text=True,
                                 timeout=GFARM_CLEANUP_S, env=env)
        names = [n for n in listing.stdout.split() if n.startswith(name)]
        if names:
            subprocess.run(["gfrm", "-f", *[f"{folder}/{n}" for n in names]],
                           capture_output=True, timeout=GFARM_CLEANUP_S, env=env)
    except subprocess.TimeoutExpired as exc:
        raise OSError(f"Gfarm did not answer within {GFARM_CLEANUP_S} s: {name}* in "
                      f"{folder} may be left") from exc


def _try(P: dict, combo: dict, mpiexec: str, target: Target, api: str, ranks: int = 1,
         block: int | str = PROBE_BYTES) -> tuple[dict, workmodel.Timing]:
    """A write and read of `block` bytes per rank by `api` on the target under the launcher,
    a file per rank, once (from one, its plan estimate was within 0 to +7% of the sweep in
    local.yaml's reports: a sample more writes as much again): its last record and its
    Timing, or runner.TaskFailed with the kernel's one line."""
    name = f"burstbench-probe-{os.getpid()}"
    argv = (mpiexec, *combo["args"], "-n", str(ranks), sys.executable,
            *kernel_args(P, target, api, "file-per-process", False, name, block))
    try:
        records, timing = workmodel.timed(runner.Task("probe", {}, argv, tuple(
            (combo["env"] | dict(target.env)).items()), 120), samples=1)
        return records[-1], timing
    finally:
        with contextlib.suppress(OSError):  # a failed probe says why itself
            remove_files(target, name)


def time_target(P: dict, combo: dict, mpiexec: str, target: Target,
                ranks: int = 1) -> workmodel.Calibration:
    """The work model calibrated on `target`: one timed write and read by its first API under
    the launcher as the widest planned layout of one node does it: `ranks` ranks, each the
    planned block (at most RATE_BYTES); runner.TaskFailed with the kernel's line."""
    block = min(P["storage_block_size"], RATE_BYTES)
    _, timing = _try(P, combo, mpiexec, target, target.apis[0], ranks, block)
    moved = 2 * ranks * block
    return workmodel.calibrate(timing, moved / (ASSUMED_MBS * 1e6),
                               f"{target.name}: {moved / max(timing.timed_s, 1e-9) / 1e6:.0f} "
                               f"MB/s by {ranks} rank(s) of {block / 2 ** 20:.0f} MiB")


def resolve_target(P: dict, spec: dict, combo: dict, mpiexec: str) -> tuple[Target | None,
                                                                               list[str]]:
    """The target as this machine has it, tried with each of its APIs (O_DIRECT first where
    `direct: auto`), or (None, the note that skips it) for an optional one that is not
    there; ParamError naming it otherwise."""
    name, notes = spec["name"], []

    def missing(why: str) -> tuple[None, list[str]]:
        if spec["optional"]:
            return None, [f"skipped storage target {name}: {why}"]
        raise ParamError(f"storage_targets: target {name}: {why}")

    path, unset = expand_vars(spec["path"])
    if unset:
        return missing(f"${unset[0]} is not set (its path is {spec['path']})")
    env: dict[str, str] = {}
    if path.startswith("gfarm://"):
        config = gfarm_config(spec)
        if not config:
            return missing("Gfarm is not configured here (no config given, no "
                           "$GFARM_CONFIG_FILE, no /etc/gfarm2.conf)")
        env["GFARM_CONFIG_FILE"] = config
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):  # the probe says why
            subprocess.run(["gfmkdir", "-p", path], capture_output=True, timeout=GFARM_CLEANUP_S,
                           env=os.environ | env)
    else:
        folder = Path(path)
        if not folder.parent.is_dir():
            return missing(f"{folder.parent} does not exist")
        try:
            folder.mkdir(exist_ok=True)
        except OSError as exc:
            return missing(f"cannot create {folder}: {exc.strerror}")
    target = Target(name, path, tuple(spec["api"]), spec["direct"] is not False,
                    tuple(env.items()))
    records = {}
    for api in target.apis:
        try:
            records[api], _ = _try(P, combo, mpiexec, target, api)
        except runner.TaskFailed as exc:
            refused = "refuses O_DIRECT" in str(exc)
            if api == "posix" and target.direct and refused and spec["direct"] == "auto":
                target = Target(name, path, target.apis, False, target.env)
                notes.append(f"storage target {name}: {path} refuses direct I/O: measured "
                             "buffered (each read after dropping the file's cached pages; a "
                             "memory file system's reads are memory, and labelled so)")
                try:
                    records[api], _ = _try(P, combo, mpiexec, target, api)
                    continue
                except runner.TaskFailed as again:
                    exc = again
            return missing(f"{api} on {path}: {exc}")
    first = next(iter(records.values()))
    info = {"target": name, "path": path, "apis": list(target.apis),
            "direct": target.direct and "posix" in target.apis,
            "fs_type": first.get("fs_type", ""), "probe_cache": first.get("cache", ""),
            "mount": {} if target.gfarm else sysinfo.mount_of(path),
            "free_bytes": free_bytes(target),
            "gfarm_config": env.get("GFARM_CONFIG_FILE", "")}
    return Target(name, path, target.apis, target.direct, target.env, info), notes


@dataclass
class Machine:
    """What a storage plan needs to know of this machine, found by probe()."""

    targets: list[Target]
    hosts: launch.Hosts
    cores: int
    mpiexec: str
    info: dict  # the kernel's --info: its build and the I/O interfaces in it
    notes: list[str] = field(default_factory=list)
    #: each target's work model as its probes calibrated it (none: the model's constants)
    calibrations: dict[str, workmodel.Calibration] = field(default_factory=dict)


def probe(P: dict) -> Machine:
    """The launcher and the kernel's build (--info), then each target by using it; a target
    that is not there is a note when optional, else a ParamError naming it."""
    combo = P["storage_combination"]
    mpiexec = launch.resolve_command(combo["mpiexec"])
    if mpiexec is None:
        raise ParamError(f"storage_combination: mpiexec '{combo['mpiexec']}' not found")
    try:
        info = ask(combo, mpiexec, ["-m", "kernels_ext.storage", "--info"], 120)
    except runner.TaskFailed as exc:
        raise ParamError(f"storage_combination: {combo['mpiexec']}: {exc}") from exc
    targets, notes = [], []
    for spec in P["storage_targets"]:
        if "gfarm" in spec["api"] and "gfarm" not in info.get("backends", []):
            why = "the storage kernel was built without libgfarm (apt-get install " \
                  "libgfarm-dev, then reinstall)"
            if not spec["optional"]:
                raise ParamError(f"storage_targets: target {spec['name']}: {why}")
            notes.append(f"skipped storage target {spec['name']}: {why}")
            continue
        target, more = resolve_target(P, spec, combo, mpiexec)
        notes += more
        if target is not None:
            targets.append(target)
    hosts = launch.job_hosts(P["storage_hosts"], "storage_hosts")
    cores = sysinfo.available_cpus()
    try:
        timed = {t.name: time_target(P, combo, mpiexec, t, probe_ranks(P, cores))
                 for t in targets}
    except runner.TaskFailed as exc:  # it wrote and read a moment ago
        raise ParamError(f"storage_targets: a timed probe failed: {exc}") from exc
    return Machine(targets, hosts, cores, mpiexec, info, notes, timed)


def probe_ranks(P: dict, cores: int) -> int:
    """The ranks of the timed probe: the most ranks per node planned that `cores` allow (the
    widest layout of one node, layouts()), 1 where none is."""
    return max([r for r in P["storage_ranks_per_node"] if r <= cores], default=1)


def layouts(P: dict, m: Machine, notes: list[str]) -> list[launch.Layout]:
    """Every nodes x ranks per node layout the hosts and cores allow; notes for the others."""
    out = []
    for nodes in P["storage_nodes"]:
        note = m.hosts.shortfall(nodes, "storage_nodes")
        if note:
            notes.append(note)
            continue
        for rpn in P["storage_ranks_per_node"]:
            if rpn > m.cores:
                notes.append(f"skipped {rpn} ranks per node: more than the {m.cores} cores "
                             "of a node")
                continue
            out.append(launch.Layout(nodes * rpn, rpn, 1, hosts=m.hosts.names[:nodes]))
    return out


def expand(P: dict, m: Machine) -> Plan:
    """Tasks for every target x API x (collective) x access pattern x layout x repetition,
    and a Gfarm replication per Gfarm target and repetition where asked; runs nothing."""
    combo, notes = P["storage_combination"], list(m.notes)
    lays = layouts(P, m, notes)
    if not m.targets or not lays:
        raise ParamError("nothing to measure: " + ("; ".join(notes) or "no target or layout"))
    from kernels_ext.common.mpi import library_family

    launcher = launch.for_combination(combo, m.mpiexec, library_family(
        m.info.get("mpi_library", "")))
    tasks = []
    for rep in range(1, P["storage_repetitions"] + 1):
        for target in m.targets:
            for api in target.apis:
                for collective in (P["storage_collective"] if api == "mpiio" else [False]):
                    for access in P["storage_access"]:
                        for layout in lays:
                            tasks.append(_task(P, combo, launcher, target, api, collective,
                                               access, layout, rep,
                                               m.calibrations.get(target.name)))
            if target.gfarm and P["storage_replicate"]:
                tasks.append(_replication(P, target, rep, m.calibrations.get(target.name)))
    variants = [m.info | {"mpiexec_path": m.mpiexec, "spec": combo}] + \
        [t.info for t in m.targets]
    # priority 0 within a budget: the staging shape, the first target's first access pattern
    # at its widest layout
    first = tasks[0].config
    widest = max(c.config["ranks"] for c in tasks)
    tasks = budget.prioritized(tasks, lambda c: c["target"] == first["target"]
                               and c["access"] == first["access"] and c["ranks"] == widest)
    return Plan(tasks, variants, notes, detail="ranks", calibration="by a timed write and "
                "read of each target: " + "; ".join(c.said for c in m.calibrations.values())
                if m.calibrations else "")


def plan(P: dict) -> Plan:
    """Turn validated parameters into tasks: probe() this machine, then expand()."""
    return expand(P, probe(P))


#: The work model of estimate_s: mpiexec's start, then the bytes written and read at an
#: assumed 500 MB/s (a cloud VM's local disk; a shared file system is slower).  probe()
#: times, on each target, a write and read as the widest planned layout of a node does it
#: (its ranks, each the planned block, at most RATE_BYTES): its start and its bandwidth
#: over ASSUMED_MBS then scale that target's estimates (workmodel.Calibration).  One rank's
#: start is two's, within 0.03 s (0.28 and 0.31 s, 256 MiB blocks, medians of 5 quiet).
#: Uncalibrated, local.yaml's 12 configurations took 10 s, estimated at 31 s (2026-11-26).
START_S, ASSUMED_MBS = 1.0, 500.0


def estimate_s(P: dict, ranks: int, calibration: workmodel.Calibration | None = None) -> float:
    """About how long one configuration takes: its bytes written, then read."""
    moved = 2 * ranks * P["storage_segments"] * P["storage_block_size"]
    work = moved / (ASSUMED_MBS * 1e6)
    return START_S + work if calibration is None else calibration.estimate(work)


def _task(P: dict, combo: dict, launcher: launch.Launcher, target: Target, api: str,
          collective: bool, access: str, layout: launch.Layout, rep: int,
          calibration: workmodel.Calibration | None = None) -> runner.Task:
    label = (f"{target.name}+{api}+{access}" + ("+collective" if collective else "")
             + f"+{layout.nodes}n{layout.per_node}r")
    config = {"benchmark": BENCHMARK, "label": label, "impl": "c", "target": target.name,
              "api": api, "access": access, "collective": collective, "ranks": layout.ranks,
              "nodes": layout.nodes, "transfer_size": P["storage_transfer_size"],
              "block_size": P["storage_block_size"], "segments": P["storage_segments"],
              "fsync": P["storage_fsync"], "direct": target.direct and api == "posix",
              "repetition": rep}
    key = task_key(label, f"r{rep}", [config, target.path])
    name = f"burstbench-{key}"
    argv = (launcher.mpiexec, *combo["args"], *launcher.args(layout), sys.executable,
            *kernel_args(P, target, api, access, collective, name))
    env = combo["env"] | launcher.env(layout) | dict(target.env)
    return runner.Task(key, config | {"key": key}, argv, tuple(sorted(env.items())),
                       P["storage_timeout_s"], estimate_s(P, layout.ranks, calibration),
                       cleanup=functools.partial(remove_files, target, name))


def _replication(P: dict, target: Target, rep: int,
                 calibration: workmodel.Calibration | None = None) -> runner.Task:
    """One file of storage_replicate bytes written to one Gfarm I/O node, then replicated to
    another (gfrep), timed: the Gfarm-on-Azure slides' test 5."""
    label = f"{target.name}+gfrep"
    config = {"benchmark": BENCHMARK, "label": label, "impl": "gfrep", "target": target.name,
              "api": "gfarm", "access": "replication", "ranks": 1, "nodes": 1,
              "block_size": P["storage_replicate"], "repetition": rep}
    key = task_key(label, f"r{rep}", [config, target.path])
    name = f"burstbench-{key}"
    argv = (sys.executable, "-m", "burstbench.benchmarks.storage.replicate", "--path",
            target.path, "--name", name, "--size", str(P["storage_replicate"]))
    work = 2 * P["storage_replicate"] / (ASSUMED_MBS * 1e6)
    return runner.Task(key, config | {"key": key}, argv, target.env, P["storage_timeout_s"],
                       START_S + work if calibration is None else calibration.estimate(work),
                       cleanup=functools.partial(remove_files, target, name))


def nodes_needed(P: dict) -> tuple[int, str]:
    """The most nodes these parameters ask for, and the key that asks (the job scripts)."""
    return max(P["storage_nodes"]), "storage_nodes"
