"""What a ping-pong sweep runs: probe() the placements this machine's CPUs and hosts allow
and each combination's mpiexec, then expand() the parameters into one mpiexec per
(combination, placement, test, implementation, repetition), each with its estimated time."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from burstbench.core import budget, launch, runner
from burstbench.core.checks import ParamError
from burstbench.core.mpi import ask, kernel_args, usable
from burstbench.core.sweep import Plan, task_key

BENCHMARK = "pingpong"


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


def combo_info(combo: dict, timeout: float) -> dict:
    """Ask the combination's own mpiexec what the kernel was built with and which MPI runs it.

    Raises runner.TaskFailed with mpiexec's message (missing launcher, MPI
    mismatch, a kernel that does not build).
    """
    mpiexec = launch.resolve_command(combo["mpiexec"])
    if mpiexec is None:
        raise runner.TaskFailed(f"mpiexec '{combo['mpiexec']}' not found")
    info = ask(combo, mpiexec, ["-m", "kernels_ext.pingpong", "--info", *kernel_args(combo)],
               min(timeout, 120))
    return info | {"mpiexec_path": mpiexec}


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
        why = usable(combo, "pingpong")
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
    # priority 0 within a budget: the first combination's C kernel, no huge pages, at the
    # first placement (the BICCG halo's exchange on one node), its checks first
    first = tasks[0].config
    tasks = budget.prioritized(tasks, lambda c: c["impl"] == "c" and "+thp" not in c["label"]
                               and c["variant"] == first["variant"]
                               and c["placement"] == first["placement"])
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
    kernel += ["--impl", impl] + (kernel_args(combo) if impl == "c" else [])
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

    counts = {} if validate else {
        "iterations": P["pingpong_iterations"], "skip": P["pingpong_skip"],
        "iterations_large": P["pingpong_iterations_large"], "skip_large": P["pingpong_skip_large"]}
    m = method(test, window=P["pingpong_window"], **counts)
    if validate:
        m |= {"iterations": 10, "skip": 1, "iterations_large": 2, "skip_large": 1}
    lo = P["pingpong_min_size"] if test == "latency" else max(1, P["pingpong_min_size"])
    total = START_S
    for size in message_sizes(test, lo, P["pingpong_max_size"]):
        large = size > LARGE_MESSAGE_SIZE
        n = m["iterations_large" if large else "iterations"] + m["skip_large" if large else "skip"]
        total += n * 2 * m["window"] * (MESSAGE_S + size / (ASSUMED_GBS * 1e9))
    return total
