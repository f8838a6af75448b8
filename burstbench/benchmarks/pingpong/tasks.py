"""What a ping-pong sweep runs: probe() the placements this machine's CPUs and hosts allow
and each combination's mpiexec, then expand() the parameters into one mpiexec per
(combination, placement, test, implementation, repetition), each with its estimated time."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from burstbench.core import budget, launch, runner, workmodel
from burstbench.core.checks import ParamError
from burstbench.core.mpi import ask, kernel_args, usable
from burstbench.core.sweep import Plan, task_key
from burstbench.cost.predict import priced_message_sizes

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


@dataclass(frozen=True)
class Timed:
    """A combination's ping-pong as its probe measured it: an mpiexec's start (seconds the
    kernel did not time) and the one-way time of a message by size (us, osu_latency's)."""

    start_s: float
    curve: tuple[tuple[int, float], ...]  # (bytes, us), sizes ascending

    def message_us(self, size: int) -> float:
        """One-way us of a `size`-byte message: the probe's at the nearest size measured at
        or above it (the largest beyond its end, scaled by size)."""
        for s, us in self.curve:
            if s >= size:
                return us
        s, us = self.curve[-1]
        return us * size / max(1, s)


@dataclass
class Machine:
    """What a ping-pong plan needs to know of this machine, found by probe(); `timed`: each
    combination's probe by its label (none: the model's constants)."""

    combinations: list[Combination]
    placements: list[Placement]
    notes: list[str] = field(default_factory=list)
    timed: dict[str, Timed] = field(default_factory=dict)


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
    m = Machine(combos, placements, notes)
    here = sorted(placements, key=lambda pl: pl.nodes)[:1]  # one host's, where planned
    # with huge pages a large message takes about half the time (the 2-core VM: latency
    # 3.7 s of kernel time against 7.6 s without), so each setting planned has its probe
    timed = {probe_name(c[1]["combination"], thp): time_probe(P, c, here[0], thp)
             for c in combos for thp in P["pingpong_hugepages"]} if here else {}
    m.timed = {name: t for name, t in timed.items() if t is not None}
    return m


def probe_name(combination: str, thp: bool) -> str:
    """The key of a combination's probe with or without huge pages (Machine.timed)."""
    return combination + ("+thp" if thp else "")


#: The probe's iterations: OSU's method with a hundredth of its counts (a few ms of work).
PROBE_COUNTS = {"iterations": 100, "skip": 10, "iterations_large": 10, "skip_large": 1}


def time_probe(P: dict, combination: Combination, pl: Placement,
               thp: bool = False) -> Timed | None:
    """One short ping-pong (osu_latency's method with PROBE_COUNTS, over the planned sizes)
    of the combination's C kernel at placement `pl` (with huge pages: `thp`), timed: its
    start and its curve; None where it fails (the sweep's own configurations then say why;
    the estimates are the model's constants)."""
    task = _task(P | {f"pingpong_{k}": v for k, v in PROBE_COUNTS.items()}, combination, pl,
                 "latency", "c", 0, thp=thp)
    try:
        records, timing = workmodel.timed(task)
    except runner.TaskFailed:
        return None
    from kernels_ext.pingpong import LARGE_MESSAGE_SIZE

    curve = tuple(sorted((int(r["size_bytes"]), float(r["latency_us"])) for r in records
                         if r.get("test") == "latency" and r.get("latency_us") is not None))
    # what the kernel did not time: the start, and the skipped iterations (not in `seconds`)
    skipped = sum(PROBE_COUNTS["skip_large" if s > LARGE_MESSAGE_SIZE else "skip"] * 2 * us * 1e-6
                  for s, us in curve)
    return Timed(max(0.0, timing.start_s - skipped), curve or ((0, MESSAGE_S * 1e6),))


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
                    tasks.append(_task(P, combo, pl, test, "c", 0, validate=True,
                                       timed=m.timed))
    for rep in range(1, P["pingpong_repetitions"] + 1):
        for combo in combos:
            for pl in placements:
                for test in P["pingpong_tests"]:
                    for impl in impls:
                        for thp in P["pingpong_hugepages"]:
                            first = impl == "c" and not thp and combo is combos[0] and (
                                pl is placements[0] or pl.nodes > 1)
                            for part in _parts(P, test, first):
                                tasks.append(_task(P, combo, pl, test, impl, rep, thp=thp,
                                                   part=part, timed=m.timed))
    built = [info | {"spec": combo} for combo, info, _ in combos]
    # priority 0 within a budget: what the decision prices, first: the first combination's
    # C kernel, no huge pages, at the first placement (the BICCG halo's exchange on one
    # node: same-socket in every params file, what the model's reference fit uses; an
    # across-sockets curve, measured later, prices only layouts past half a node) and
    # across nodes, its latency check, then its latency up to the halo's size
    # (halo_split); the other tests and the sizes beyond the halo's after the other
    # benchmarks' first configurations
    first = tasks[0].config
    tasks = budget.prioritized(tasks, lambda c: (
        c["impl"] == "c" and "+thp" not in c["label"] and c["variant"] == first["variant"]
        and (c["placement"] == first["placement"] or c["nodes"] > 1)
        and c["function"] == "latency" and not c["key"].endswith(BEYOND)))
    plan = Plan(tasks, built, notes, detail="function")
    if m.timed:
        plan.calibration = "by a probe of each combination: " + "; ".join(
            f"{name}: start {t.start_s:.2f} s, {t.message_us(1):.1f} us at 1 B, "
            f"{t.message_us(HALO):.0f} us at {HALO} B" for name, t in m.timed.items())
    return plan


#: The largest message the decision prices for the study's solve: its halo message (a
#: boundary plane of the 256 x 256 x 512 grid, 512 KiB); the Allreduces' are far smaller.
HALO = max(priced_message_sizes())
#: OSU's sizes are powers of two: the latency test's first part ends at the first one at
#: or above the halo's.
HALO_CAP = 1 << (HALO - 1).bit_length()


#: The key's ending of a latency run's sizes beyond HALO_CAP.
BEYOND = "-beyond-halo"


def _parts(P: dict, test: str, first: bool) -> list[tuple[int, int, str]]:
    """The (smallest, largest size, key ending) of each mpiexec a measured `test` takes:
    the `first` configurations' (those the decision prices) latency test, where its sizes
    go beyond HALO_CAP, as two: up to HALO_CAP (first within a budget) and the larger sizes
    (BEYOND); the same messages, one more mpiexec start.  Others: their range in one."""
    lo = P["pingpong_min_size"] if test == "latency" else max(1, P["pingpong_min_size"])
    hi = P["pingpong_max_size"]
    if not first or test != "latency" or not lo <= HALO_CAP < hi:
        return [(lo, hi, "")]
    return [(lo, HALO_CAP, "-to-halo"), (2 * HALO_CAP, hi, BEYOND)]


def plan(P: dict) -> Plan:
    """Turn validated parameters into tasks: probe() this machine, then expand()."""
    return expand(P, probe(P))


def _task(P: dict, combination: Combination, pl: Placement, test: str, impl: str, rep: int,
          validate: bool = False, thp: bool = False,
          part: tuple[int, int, str] | None = None,
          timed: dict[str, Timed] | None = None) -> runner.Task:
    """One mpiexec of `test`, over the sizes of `part` (all planned: None)."""
    combo, info, launcher = combination
    label = (f"{info['combination']}+{pl.label}" + ("+thp" if thp else "")
             + ("+mpi4py" if impl == "mpi4py" else ""))
    args, env = launcher.args(pl.layout), launcher.env(pl.layout)
    lo, hi, ending = part or (P["pingpong_min_size"] if test == "latency"
                              else max(1, P["pingpong_min_size"]), P["pingpong_max_size"], "")
    kernel = ["--test", test, "--min-size", str(lo), "--max-size", str(hi)]
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
                   [config, argv[1:], sorted(combo["env"].items())]) + ending
    return runner.Task(key, config | {"key": key}, argv,
                       tuple(sorted((combo["env"] | env).items())), P["pingpong_timeout_s"],
                       estimate_s(P, test, validate, impl, (lo, hi),
                                  _probe_of(timed or {}, info["combination"], thp)))


def _probe_of(timed: dict[str, Timed], combination: str, thp: bool) -> Timed | None:
    """The combination's probe with the huge-page setting asked, else its other one."""
    return timed.get(probe_name(combination, thp)) or timed.get(probe_name(combination, not thp))


#: The work model of estimate_s: an mpiexec's start, then OSU's iterations (with skips) at
#: each message size, each message at its one-way time: latency's 2 per iteration, bw's and
#: bibw's the window's worth at BW_SHARE of it (pipelined); mpi4py's loop adds MPI4PY_S per
#: message.  The start and the one-way times by size are a probe's (probe(): one short
#: osu_latency of each combination's C kernel, over the planned sizes, with PROBE_COUNTS);
#: without one, START_S and MESSAGE_S plus the bytes at ASSUMED_GBS (the 2-core VM, idle:
#: 0.9 us, 13.7 GB/s).  Fitted on local.yaml's sweep on the 2-core VM (2026-11-26, others
#: taking half its CPU): bw's and bibw's iteration took 0.5-0.8 of the window's one-way
#: times, mpi4py's small messages 2-4 us more than C's.
START_S, MESSAGE_S, ASSUMED_GBS, BW_SHARE, MPI4PY_S = 0.5, 1e-6, 12.0, 0.7, 2e-6
def estimate_s(P: dict, test: str, validate: bool = False, impl: str = "c",
               sizes: tuple[int, int] | None = None, timed: Timed | None = None) -> float:
    """About how long one mpiexec of `test` takes over `sizes` (all planned: None): OSU's
    iterations (with skips) at each message size, by the work model above."""
    from kernels_ext.pingpong import LARGE_MESSAGE_SIZE, message_sizes, method

    counts = {} if validate else {
        "iterations": P["pingpong_iterations"], "skip": P["pingpong_skip"],
        "iterations_large": P["pingpong_iterations_large"], "skip_large": P["pingpong_skip_large"]}
    m = method(test, window=P["pingpong_window"], **counts)
    if validate:
        m |= {"iterations": 10, "skip": 1, "iterations_large": 2, "skip_large": 1}
    lo, hi = sizes or (P["pingpong_min_size"] if test == "latency"
                       else max(1, P["pingpong_min_size"]), P["pingpong_max_size"])
    total = START_S if timed is None else timed.start_s
    per_iteration = 2 if test == "latency" else m["window"] * BW_SHARE
    for size in message_sizes(test, lo, hi):
        large = size > LARGE_MESSAGE_SIZE
        n = m["iterations_large" if large else "iterations"] + m["skip_large" if large else "skip"]
        one_way = (MESSAGE_S + size / (ASSUMED_GBS * 1e9) if timed is None
                   else timed.message_us(size) * 1e-6)
        total += n * per_iteration * (one_way + (MPI4PY_S if impl == "mpi4py" else 0.0))
    return total
