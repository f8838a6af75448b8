"""What a Triad sweep runs: probe() this machine (build each compiler variant, size the
arrays, count the CPUs), then expand() the parameters into tasks, each with its estimated
time: one task per variant, affinity setting and repetition, which measures that setting's
configurations in turn (every thread count, with each store policy of a C variant). The
OpenMP runtime reads its affinity once, at its start, so each setting has a process of its
own: a server (burstbench.core.servers) that measures the setting's repetitions, each when
the sweep's turn comes, on arrays it allocates and first-touches once (where all servers'
arrays do not fit in memory, a few settings at a time: servers.in_blocks). A configuration's
rows are as before; a task is one request to its setting's process."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from importlib import metadata

from burstbench.core import budget, runner, workmodel
from burstbench.core.checks import ParamError
from burstbench.core.sweep import Plan, task_key
from kernels_ext.common import sysinfo, variants
from kernels_ext.triad import BASELINE_STORES, check_size
from kernels_ext.triad.affinity import Affinity

BENCHMARK = "triad"


def _affinities(places: list[str], binds: list[str], kmps: list[str]) -> list[Affinity]:
    out = [Affinity(p, b) for p in places for b in binds]
    return out + [Affinity(kmp_affinity=k) for k in kmps]


def _variant_info(spec: dict) -> dict:
    """Build the variant (if needed) and ask a fresh process what it runs on."""
    args = [sys.executable, "-m", "kernels_ext.triad", "--info"]
    if spec["compiler"] != "installed":
        v = variants.build(spec["compiler"], spec["flags"], spec["tag"])
        args += ["--compiler", v.compiler.path, f"--flags={v.flags}", "--tag", v.tag]
    out, _ = runner.launch(runner.Task("info", {}, tuple(args), timeout_s=300))
    info = json.loads(out.strip().splitlines()[-1])
    info["cli_args"] = args[4:]
    return info


@dataclass
class Machine:
    """What a Triad plan needs to know of this machine, found by probe()."""

    cpus: int                  # CPUs this process may use
    size: int                  # elements per array (triad_size, 'auto' resolved)
    variants: list[dict]       # each buildable C variant's --info, its spec under 'spec'
    versions: dict[str, str]   # the baselines' package versions
    notes: list[str] = field(default_factory=list)
    #: the work model as the probe's Triad pass calibrated it (the model's constants without)
    calibration: workmodel.Calibration = workmodel.UNCALIBRATED
    #: the probe's passes on one thread over those on all the CPUs (1: not probed)
    one_thread: float = 1.0
    #: NUMA nodes of this machine (several: a C process's teams each get arrays of their
    #: own, which it does not keep between requests)
    numa_nodes: int = 1


def probe(P: dict) -> Machine:
    """Build each compiler variant (cached) and ask a fresh process what it runs on; size
    the arrays and count the CPUs.  A compiler this machine lacks is a note; one that fails
    to compile is a ParamError, before anything is measured."""
    size, notes = check_size(P["triad_size"])
    infos = []
    for spec in P["triad_variants"]:
        try:
            infos.append(_variant_info(spec) | {"spec": spec})
        except variants.CompilerNotFound as exc:
            notes.append(f"skipped variant {spec['compiler']} '{spec['flags']}': {exc}")
        except variants.BuildFailed as exc:
            raise ParamError(f"triad_variants: {exc}") from exc
        except (variants.VariantError, runner.TaskFailed) as exc:
            raise ParamError(f"triad_variants: {spec['compiler']}: {exc}") from exc
    cpus = sysinfo.available_cpus()
    return Machine(cpus, size, infos, {b: metadata.version(b) for b in P["triad_baselines"]},
                   notes, *_calibrate(infos, size, cpus), sysinfo.numa_nodes())


#: The probe's passes: STREAM's minimum, so that it costs about one configuration's start.
PROBE_NTIMES = 2


def _calibrate(infos: list[dict], size: int,
               cpus: int) -> tuple[workmodel.Calibration, float]:
    """Time one process of the first compiled variant at the sweep's size, on one thread
    and then on all the CPUs (normal stores, PROBE_NTIMES passes each): its untimed seconds
    are a process's start, first touch and the fills and checks; the timed ones on all
    the CPUs over the model's give the rate, and those on one thread over those on all
    how much slower one thread streams (a 2-core VM: 1.5x).  The model's constants (and
    1.0) where no variant was built or the probe failed."""
    first = next((i for i in infos if i.get("impl", "c") == "c"), None)
    if first is None:
        return workmodel.UNCALIBRATED, 1.0
    teams = [1, cpus] if cpus > 1 else [1]
    argv = (sys.executable, "-m", "kernels_ext.triad", "--size", str(size), "--ntimes",
            str(PROBE_NTIMES), "--threads", ",".join(map(str, teams)), *first["cli_args"])
    try:
        records, timing = workmodel.timed(runner.Task("probe", {}, argv, timeout_s=300))
    except runner.TaskFailed:
        return workmodel.UNCALIBRATED, 1.0
    timed = {t: runner.timed_seconds([r for r in records if r.get("threads") == t])
             for t in teams}
    if not all(timed.values()):
        return workmodel.UNCALIBRATED, 1.0
    all_cpus = workmodel.Timing(timing.wall_s - timed[1] if cpus > 1 else timing.wall_s,
                                timed[cpus], timing.others)
    one_thread = timed[1] / timed[cpus]
    cal = workmodel.calibrate(all_cpus, PROBE_NTIMES * _pass_s(size),
                              f"by Triad passes of {first['variant']} on {cpus} CPUs (one "
                              f"thread {one_thread:.2f}x their time)")
    return cal, one_thread


def expand(P: dict, m: Machine) -> Plan:
    """The tasks of a sweep, from the parameters and what probe() found; runs nothing.

    KMP_AFFINITY given to a runtime that ignores it, or two variants with one label, are
    errors (ParamError); streaming stores asked of a variant without them, threads beyond
    the CPUs and a variant without OpenMP are notes."""
    threads = list(range(1, m.cpus + 1)) if P["triad_threads"] == "all" else \
        list(P["triad_threads"])
    notes = list(m.notes)
    if max(threads) > m.cpus:
        notes.append(f"threads up to {max(threads)} on {m.cpus} CPUs oversubscribe them: "
                     "those points time badly")
    default_aff = _affinities(P["triad_places"], P["triad_bind"], P["triad_kmp_affinity"])
    # (variant, its affinity settings, its (stores, threads) configurations per process)
    groups: list[tuple[dict, list[Affinity], list[tuple[str, int]]]] = []
    built: list[dict] = []
    for info in m.variants:
        spec = info["spec"]
        if "places" in spec or "bind" in spec or "kmp_affinity" in spec:
            affs = _affinities(spec.get("places", []), spec.get("bind", []),
                               spec.get("kmp_affinity", []))
            if not affs:  # places without bind (or the reverse): cross with the default
                affs = _affinities(spec.get("places", P["triad_places"]),
                                   spec.get("bind", P["triad_bind"]), [])
        else:
            affs = default_aff
        if "libgomp" in info.get("openmp_library", "") and any(a.kmp_affinity for a in affs):
            raise ParamError(f"triad_variants: {info['variant']} runs on GNU libgomp, which "
                             "ignores KMP_AFFINITY: give this variant places/bind instead")
        if not info.get("openmp_version"):
            notes.append(f"variant {info['variant']} was built without OpenMP (its flags lack "
                         "-fopenmp/-qopenmp/-mp): it runs one thread whatever is asked")
        built.append(info)
        stores = []
        for policy in P["triad_stores"]:
            if policy == "streaming" and not info.get("streaming_isa"):
                notes.append(f"variant {info['variant']} has no streaming stores (its flags "
                             "allow no SSE2/AVX/AVX-512, or the CPU is not x86-64): its "
                             "streaming points are skipped")
                continue
            stores.append(policy)
        if stores:
            groups.append((info, affs, [(p, t) for p in stores for t in threads]))
    labels = [i["variant"] for i in built]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ParamError(f"triad_variants: two variants are labelled {dupes[0]}: give each a "
                         "different 'tag'")
    for base in P["triad_baselines"]:
        version = m.versions[base]
        info = {"impl": base, "variant": f"{base}{version}", "compiler": base,
                "compiler_version": version, "flags": "", "cli_args": ["--impl", base]}
        own = BASELINE_STORES[base]
        if base == "numpy":  # one thread, no OpenMP: one configuration
            groups.append((info, [Affinity()], [(own, 1)]))
        else:
            groups.append((info, [a for a in default_aff if not a.kmp_affinity] or [Affinity()],
                           [(own, t) for t in threads]))
        built.append(info)
    if not groups:
        raise ParamError("nothing to measure: every variant was skipped and no baseline asked")

    ladder = tier_sizes(P.get("triad_tiers", []), m.size)
    first_c = next(((info, affs) for info, affs, _ in groups if info.get("impl", "c") == "c"),
                   None)
    if ladder and first_c is None:
        notes.append("triad_tiers: no C variant was built, so no ladder is measured")
    tasks = []
    for rep in range(1, P["triad_repetitions"] + 1):
        for info, affs, configs in groups:
            for aff in affs:
                tasks.append(_task(P, info, aff, configs, rep, m))
        if first_c is not None:  # the ladder: the first C variant's first affinity setting
            info, affs = first_c
            for tier, elements in ladder:
                tasks.append(_task(P, info, affs[0], [("normal", t) for t in threads], rep, m,
                                   (tier, elements)))
    return Plan(_needed_first(tasks), built, notes, calibration=m.calibration.said)


def tier_sizes(tiers: list, rule_size: int) -> list[tuple[str, int]]:
    """(name, elements per array) of each ladder point (params.triad_tiers): 'l2' and 'llc'
    half of those caches' bytes on this machine (dropped where the OS names no such cache),
    a size its bytes, each over three arrays of doubles; none at or above the sweep's own
    (STREAM-rule) size, which the sweep measures anyway; each size once."""
    out: dict[int, str] = {}
    caches = sysinfo.caches()
    for tier in tiers:
        if tier == "llc":
            total = sysinfo.last_level_cache_bytes() // 2
        elif tier == "l2":
            total = sum(c["size_bytes"] for c in caches if c["level"] == 2) // 2
        else:
            total = int(tier)
        elements = total // 24
        if 1024 <= elements < rule_size:
            out.setdefault(elements, tier if isinstance(tier, str) else f"{total / 2**20:g}MiB")
    return [(name, n) for n, name in sorted(out.items())]


def _needed_first(tasks: list[runner.Task]) -> list[runner.Task]:
    """Priority 0 (measured first within a budget): what the time model uses, the process
    of the first compiled variant's first affinity setting (its normal stores at every
    thread count, the study layout's among them: 2 ranks per node, half the CPUs each) and
    the ladder of working sets (the bandwidth of a solve that fits a cache)."""
    first = next((t.config["label"] for t in tasks if t.config["impl"] == "c"), None)
    return budget.prioritized(tasks, lambda c: c["label"] == first or bool(c.get("tier")))


def plan(P: dict) -> Plan:
    """Turn validated parameters into tasks: probe() this machine, then expand()."""
    return expand(P, probe(P))


def _task(P: dict, info: dict, aff: Affinity, configs: list[tuple[str, int]], rep: int,
          m: Machine, tier: tuple[str, int] | None = None) -> runner.Task:
    """One process: `info`'s variant under `aff`, measuring `configs` ((stores, threads)
    each) in turn; its config lists them under "runs", each with its row label.  A ladder
    point (`tier`: its name and elements per array) measures at its own size, its rows
    marked with the tier's name (the sweep's rows have none)."""
    impl = info.get("impl", "c")
    process = info["variant"] if impl == "numpy" else f"{info['variant']}+{aff.label}"
    if tier:
        process = f"{process}@{tier[0]}"
    runs = [{"label": process if impl == "numpy" or tier else
             f"{info['variant']}{'-streaming' if stores == 'streaming' else ''}+{aff.label}",
             "stores": stores, "threads": threads} for stores, threads in configs]
    size = tier[1] if tier else m.size
    config = {"benchmark": BENCHMARK, "label": process, "impl": impl, "tier": tier[0] if tier
              else "",
              "variant": info["variant"],
              "compiler": info["compiler"], "compiler_version": info["compiler_version"],
              "flags": info["flags"], "places": aff.places if not aff.kmp_affinity else "",
              "bind": aff.bind if not aff.kmp_affinity else "",
              "kmp_affinity": aff.kmp_affinity, "size": size, "repetition": rep,
              "runs": runs}
    key = task_key(process, f"r{rep}", [config, P["triad_ntimes"], info.get("variant_key", "")])
    stores = list(dict.fromkeys(s for s, _ in configs))
    threads = list(dict.fromkeys(str(t) for _, t in configs))
    argv = (sys.executable, "-m", "kernels_ext.triad", "--size", str(size), "--ntimes",
            str(P["triad_ntimes"]), "--threads", ",".join(threads),
            *info["cli_args"], *(("--stores", ",".join(stores)) if impl == "c" else ()))
    env = dict(aff.env())  # no OMP_NUM_THREADS: each configuration sets its own team
    if impl == "numba":
        env["NUMBA_THREADING_LAYER"] = "omp"  # the layer that honours OMP_PLACES
    # one server per variant and affinity setting measures its repetitions, each when the
    # sweep's turn comes (repetitions stay spread over the sweep's time, or their block's
    # where the servers cannot all keep their arrays: servers.in_blocks)
    session = task_key(process, "serve", [argv, sorted(env.items())]) if P["triad_serve"] else ""
    # what its server holds: the three arrays it keeps and NumPy's temporary, over the
    # interpreter's own (0: a C server on several NUMA nodes keeps none)
    kept = impl != "c" or m.numa_nodes < 2
    keeps = 8 * size * (3 + (impl == "numpy")) + SERVER_BYTES[impl] if kept else 0
    return runner.Task(key, config | {"key": key}, argv, tuple(sorted(env.items())),
                       float(P["triad_timeout_s"]) * len(runs),
                       estimate_s(size, P["triad_ntimes"], [t for _, t in configs], impl,
                                  m.calibration, rep > 1 and bool(session), m.one_thread,
                                  [p for p, _ in configs], not kept),
                       session=session, keeps=keeps if session else 0)


#: The work model of estimate_s: a process's start and its three arrays touched first
#: (page faults: about 1.5 GB/s here), then per configuration the doubling of a[] (stream.c's
#: timing check) and STREAM's passes, and one check of the three arrays after the last, at
#: an assumed 20 GB/s (where each configuration gets arrays of its own, on several NUMA
#: nodes, a fill and a check of its own instead). The probe's Triad passes
#: (_calibrate) replace the start with what it measured and scale the passes by their
#: measured over modelled seconds, on all CPUs and on one thread. numba's start adds its
#: import and cache load (EXTRA_START_S, 1.0 s against C's 0.37 s here); NumPy's
#: expressions make temporaries, moving more than STREAM counts (WORK_FACTOR: its 1.68 s
#: against gcc's 0.70 s, both on one thread, in a local.yaml sweep here).
START_S, FIRST_TOUCH_GBS, ASSUMED_GBS = 0.1, 1.5, 20.0
#: A request to a server that has started: reading it, and writing the answer.
REQUEST_S = 0.02
EXTRA_START_S = {"numba": 0.65}
#: A server's own resident bytes besides its arrays: the interpreter, the kernel's module
#: and its runtime (here 22 MB for C, 43 MB for NumPy, 210 MB for numba, rounded up).
SERVER_BYTES = {"c": 32 << 20, "numpy": 64 << 20, "numba": 256 << 20}
WORK_FACTOR = {"numpy": 2.4}
#: The probe times normal stores. Streaming ones skip the read of each line stored
#: (write-allocate): a pass moves 80 bytes an element (Copy, Scale 16; Add, Triad 24)
#: against 112 (24, 24, 32, 32). Here they took 0.73 (2 threads) and 0.93 (1 thread, of 2
#: threads' normal) of normal stores' time, where this model says 0.71 and 1.0.
STORES_FACTOR = {"streaming": 80 / 112}


def _pass_s(size: int) -> float:
    """Modelled seconds of one STREAM pass (Copy, Scale: 2 arrays; Add, Triad: 3)."""
    return 10 * 8.0 * size / (ASSUMED_GBS * 1e9)


def estimate_s(size: int, ntimes: int, threads: list[int], impl: str = "c",
               calibration: workmodel.Calibration = workmodel.UNCALIBRATED,
               started: bool = False, one_thread: float = 1.0,
               stores: list[str] | None = None, fresh: bool = False) -> float:
    """About how long one task takes: its server's start and its arrays' first touch
    (none where it is `started`: a later repetition, served by the process that measured
    the first), then for each of its configurations (their thread counts: `threads`) the
    doubling of a[] (2 arrays' traffic) and NTIMES passes, and one check (3) after the
    last, as `calibration` scales them (its start replacing the model's, where a probe
    ran); `fresh` (arrays of its own per configuration) a fill (3) and a check per
    configuration instead.  A team of t threads streams as
    one thread does t times over, up to what all the CPUs do (`one_thread`: the probe's
    one-thread passes over its all-CPU ones), so its passes take max(1, one_thread / t)
    the probe's; with streaming stores (`stores`, one policy per configuration; None: all
    normal) STORES_FACTOR of that."""
    array = 8.0 * size
    start = (START_S + 3 * array / (FIRST_TOUCH_GBS * 1e9)
             if calibration is workmodel.UNCALIBRATED else calibration.start_s)
    arrays_s = array / (ASSUMED_GBS * 1e9)  # one array streamed once
    work = sum(STORES_FACTOR.get(policy, 1.0) * ntimes * _pass_s(size)
               * max(1.0, one_thread / max(t, 1)) + (6 if fresh else 2) * arrays_s
               for t, policy in zip(threads, stores or ["normal"] * len(threads)))
    work += 0.0 if fresh else 3 * arrays_s
    return calibration.estimate(WORK_FACTOR.get(impl, 1.0) * work, REQUEST_S if started
                                else start + EXTRA_START_S.get(impl, 0.0))
