"""The STREAM Triad sweep: plan configurations, run them, summarise the spread.

A configuration is (variant or baseline, affinity setting, threads,
repetition).  Its label follows the study's Appendix Table A:
``<compiler><version>[-<tag>]+<places>+<bind>`` (``gcc12.2.0+cores+spread``) or
``<compiler><version>+<granularity>+<type>`` for KMP_AFFINITY
(``icx2023.0.0+core+compact``); with streaming stores the variant part ends in
``-streaming`` (``gcc12.2.0-streaming+cores+spread``); baselines are
``numba<version>+<places>+<bind>`` and ``numpy<version>`` (one thread); the
baselines' stores are their own (kernels_ext.triad.BASELINE_STORES).
Repetitions are outermost, so slow drift of the machine spreads over all
configurations instead of biasing one.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from burstbench import plots, report, runner, store
from burstbench.params import (
    INTEGERS,
    Param,
    ParamError,
    WrongKind,
    check_choices,
    check_count,
    check_keyed,
    check_list,
    check_positive,
    check_text,
)
from burstbench.reference import read_reference, vm_key
from burstbench.sweep import Benchmark, Plan, register, task_key, typed
from kernels_ext import triad as triad_kernel
from kernels_ext.common import sysinfo, variants
from kernels_ext.triad import BASELINE_STORES, STORES, affinity, check_size
from kernels_ext.triad.affinity import Affinity

BENCHMARK = "triad"
METRICS = (("best_rate_gbs", "best_rate", "GB/s"), ("avg_time_s", "avg_time", "s"),
           ("min_time_s", "min_time", "s"), ("max_time_s", "max_time", "s"),
           ("traffic_rate_gbs", "traffic_rate", "GB/s"))

# -- parameters (010_measure_triad.ipynb's parameters cell) ------------------------------------
def _affinity_check(name: str, fn: Callable[[str], str]) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if not isinstance(v, str):
            raise WrongKind(f"{name}: {v!r} is not a string")
        try:
            return fn(v)
        except affinity.AffinityError as exc:
            raise ParamError(f"{name}: {exc}") from exc

    return check


_places = check_list("triad_places", _affinity_check("triad_places", affinity.check_places),
                     False, "a list of OMP_PLACES values (strings, or one string)")
_binds = check_list("triad_bind", _affinity_check("triad_bind", affinity.check_bind), False,
                    "a list of OMP_PROC_BIND values (strings, or one string)")
_kmps = check_list("triad_kmp_affinity",
                   _affinity_check("triad_kmp_affinity", affinity.check_kmp_affinity),
                   takes="a list of KMP_AFFINITY values (strings, or one string)")


def _threads(v: Any) -> str | list[int]:
    if isinstance(v, str) and v.strip().lower() == "all":
        return "all"
    if isinstance(v, str) and re.fullmatch(r"\s*\d+\s*-\s*\d+\s*", v):
        lo, hi = (int(x) for x in v.split("-"))
        if not 1 <= lo <= hi:
            raise ParamError(f"triad_threads range '{v}' must go up from at least 1")
        return list(range(lo, hi + 1))
    threads = check_list("triad_threads", check_count("triad_threads", 1), allow_empty=False,
                         takes=f"{INTEGERS}, a range such as '1-16', or 'all'")(v)
    return sorted(set(threads))


def _size(v: Any) -> str | int:
    if isinstance(v, str) and v.strip().lower() == "auto":
        return "auto"
    return check_count("triad_size", 1)(v)


VARIANT_KEYS = {"compiler": "C compiler: gcc, clang, icx, icc, nvc, a path, or 'installed' "
                "for the module pip built",
                "flags": "compiler flags, OpenMP flag included (verbatim)",
                "tag": "label suffix, e.g. zmm_high gives icx2023.0.0-zmm_high",
                "places": "OMP_PLACES list for this variant (default: triad_places)",
                "bind": "OMP_PROC_BIND list for this variant (default: triad_bind)",
                "kmp_affinity": "KMP_AFFINITY list for this variant (replaces places x bind)"}


def _variant(v: Any) -> dict:
    v = check_keyed(v, VARIANT_KEYS, "triad_variants", "variant")
    if not isinstance(v.get("compiler"), str) or not v["compiler"].strip():
        raise ParamError(f"triad_variants: variant {v!r} needs a compiler")
    out = {"compiler": v["compiler"].strip(), "flags": check_text("flags")(v.get("flags", "")),
           "tag": check_text("tag")(v.get("tag", ""))}
    if out["tag"] and not re.fullmatch(r"\w+", out["tag"]):
        raise ParamError(f"triad_variants: tag '{out['tag']}' may hold only letters, digits, _")
    if "places" in v:
        out["places"] = _places(v["places"])
    if "bind" in v:
        out["bind"] = _binds(v["bind"])
    if "kmp_affinity" in v:
        out["kmp_affinity"] = _kmps(v["kmp_affinity"])
    return out


PARAMS = [
        Param("triad_size", "auto",
              "elements per array; `auto` = 4x the last-level cache (read from the OS), at least "
              "10M; `1e9`, `80_000_000` accepted",
              _size),
        Param("triad_ntimes", 10,
              "passes per kernel, >= 2 (the first is not counted, as in stream.c)",
              check_count("triad_ntimes", 2)),
        Param("triad_threads", "all",
              "list (`[1, 2, 4]`), range (`\"1-16\"`), or `all` (1 .. the CPUs the process may "
              "use)",
              _threads),
        Param("triad_places", ["cores"],
              "`OMP_PLACES` values, crossed with `triad_bind`; `unset` leaves the variable out",
              _places),
        Param("triad_bind", ["close", "spread"],
              "`OMP_PROC_BIND` values",
              _binds),
        Param("triad_kmp_affinity", [],
              "`KMP_AFFINITY` values (Intel and LLVM OpenMP runtimes; refused for GNU libgomp, "
              "which ignores them)",
              _kmps),
        Param("triad_variants", [{"compiler": "gcc", "flags": "-O3 -march=native -fopenmp"}],
              "list of `{compiler, flags, tag, places, bind, kmp_affinity}`: compiler is `gcc`, "
              "`clang`, `icx`, `icc`, `nvc`, a path, or `installed` (the module pip built); flags "
              "verbatim, OpenMP flag included; `tag` suffixes the label (`icx2023.0.0-zmm_high`); "
              "`places`/`bind`/`kmp_affinity` replace the global affinity lists for this variant. "
              "A compiler the machine lacks is skipped with a note",
              check_list("triad_variants", _variant, allow_empty=False),
              shown="gcc `-O3 -march=native -fopenmp`"),
        Param("triad_stores", ["normal"],
              "store policies of the C variants: `normal` (through the cache: Triad moves 32 B "
              "per element, STREAM counts 24) and/or `streaming` (non-temporal stores, "
              "AVX-512/AVX/SSE2 as the variant's flags allow; a variant without them has its "
              "streaming points skipped with a note). Labels of streaming points end their "
              "variant part in `-streaming`; the baselines keep their own stores (numba normal, "
              "NumPy memmove)",
              check_choices("triad_stores", STORES, allow_empty=False), since_runs=["normal"]),
        Param("triad_baselines", ["numba", "numpy"],
              "Python-only baselines in the same sweep (numba with the global places x bind and "
              "thread counts; NumPy on one thread)",
              check_choices("triad_baselines", ("numba", "numpy"))),
        Param("triad_repetitions", 3,
              "fresh processes per configuration; figures show the median and min-max",
              check_count("triad_repetitions", 1)),
        Param("triad_timeout_s", 600,
              "seconds per configuration before it is stopped and reported as failed",
              check_positive("triad_timeout_s")),
        Param("triad_peak_gbs", 0,
              "theoretical memory bandwidth of the VM in GB/s (0: unknown; the report also looks "
              "in `data/reference/vm_memory_bandwidth.csv`)",
              check_positive("triad_peak_gbs", allow_zero=True)),
    ]



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
    return Machine(sysinfo.available_cpus(), size, infos,
                   {b: metadata.version(b) for b in P["triad_baselines"]}, notes)


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
    groups: list[tuple[dict, list[Affinity], list[int]]] = []
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
        for stores in P["triad_stores"]:
            if stores == "streaming" and not info.get("streaming_isa"):
                notes.append(f"variant {info['variant']} has no streaming stores (its flags "
                             "allow no SSE2/AVX/AVX-512, or the CPU is not x86-64): its "
                             "streaming points are skipped")
                continue
            groups.append((info | {"stores": stores}, affs, threads))
    labels = [i["variant"] for i in built]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ParamError(f"triad_variants: two variants are labelled {dupes[0]}: give each a "
                         "different 'tag'")
    for base in P["triad_baselines"]:
        version = m.versions[base]
        info = {"impl": base, "variant": f"{base}{version}", "compiler": base,
                "compiler_version": version, "flags": "", "cli_args": ["--impl", base]}
        if base == "numpy":  # one thread, no OpenMP: one configuration
            groups.append((info, [Affinity()], [1]))
        else:
            groups.append((info, [a for a in default_aff if not a.kmp_affinity] or [Affinity()],
                           threads))
        built.append(info)
    if not groups:
        raise ParamError("nothing to measure: every variant was skipped and no baseline asked")

    tasks = []
    for rep in range(1, P["triad_repetitions"] + 1):
        for info, affs, counts in groups:
            for aff in affs:
                for t in counts:
                    tasks.append(_task(P, info, aff, t, rep, m.size))
    return Plan(tasks, built, notes)


def plan(P: dict) -> Plan:
    """Turn validated parameters into tasks: probe() this machine, then expand()."""
    return expand(P, probe(P))


def _task(P: dict, info: dict, aff: Affinity, threads: int, rep: int, size: int) -> runner.Task:
    impl = info.get("impl", "c")
    stores = info.get("stores") or BASELINE_STORES.get(impl, "normal")
    name = info["variant"] + ("-streaming" if stores == "streaming" else "")
    label = name if impl == "numpy" else f"{name}+{aff.label}"
    config = {"benchmark": BENCHMARK, "label": label, "impl": impl, "variant": info["variant"],
              "stores": stores,
              "compiler": info["compiler"], "compiler_version": info["compiler_version"],
              "flags": info["flags"], "places": aff.places if not aff.kmp_affinity else "",
              "bind": aff.bind if not aff.kmp_affinity else "",
              "kmp_affinity": aff.kmp_affinity, "threads": threads, "size": size,
              "repetition": rep}
    key = task_key(label, f"t{threads}-r{rep}",
                          [config, P["triad_ntimes"], info.get("variant_key", "")])
    argv = (sys.executable, "-m", "kernels_ext.triad", "--size", str(size), "--ntimes",
            str(P["triad_ntimes"]), "--threads", str(threads), *info["cli_args"],
            *(("--stores", stores) if impl == "c" else ()))
    env = dict(aff.env())
    env["OMP_NUM_THREADS"] = str(threads)
    if impl == "numba":
        env["NUMBA_THREADING_LAYER"] = "omp"  # the layer that honours OMP_PLACES
    return runner.Task(key, config | {"key": key}, argv, tuple(sorted(env.items())),
                       float(P["triad_timeout_s"]), estimate_s(size, P["triad_ntimes"]))


#: The work model of estimate_s: a fresh process's start, then its three arrays touched
#: first (page faults: about 1.5 GB/s here) and STREAM's passes over them at an assumed
#: 20 GB/s. Within about 30% of what one to two threads take on the 2-core VMs measured
#: (16.8M elements: 0.73 s; 136M: 11 s on a VM with 260 MiB of L3).
START_S, FIRST_TOUCH_GBS, ASSUMED_GBS = 0.1, 1.5, 20.0


def estimate_s(size: int, ntimes: int) -> float:
    """About how long one configuration takes: its arrays' first touch, then NTIMES passes
    of Copy, Scale (2 arrays each), Add and Triad (3 each) and the validation (3)."""
    array = 8.0 * size
    return START_S + 3 * array / (FIRST_TOUCH_GBS * 1e9) + \
        array * (10 * ntimes + 3) / (ASSUMED_GBS * 1e9)


def parse(task: runner.Task, stdout: str, stderr: str) -> tuple[list[dict], list[dict], str]:
    """Kernel JSON lines -> tidy rows (one per function and metric) and raw records."""
    try:
        records = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    except ValueError as exc:
        raise runner.TaskFailed(f"unreadable kernel output ({exc})") from exc
    if {r.get("function") for r in records} != {"Copy", "Scale", "Add", "Triad"}:
        raise runner.TaskFailed("kernel output lacks some of Copy/Scale/Add/Triad")
    rows = []
    for rec in records:
        if not rec.get("validated"):
            raise runner.TaskFailed(f"{rec['function']} not validated")
        binding = rec.get("binding", [])
        extra = {"host": rec.get("host"), "function": rec["function"],
                 "bound_cpus": ",".join(str(b["cpu_first"]) for b in binding),
                 "moved_threads": sum(1 for b in binding
                                      if b["moves"] or b["cpu_first"] != b["cpu_last"]),
                 "timestamp": store.now_iso()}
        if rec.get("stores", "normal") != task.config.get("stores", "normal"):
            raise runner.TaskFailed(f"asked for {task.config['stores']} stores, the kernel "
                                    f"used {rec.get('stores')}")
        for field_, metric, unit in METRICS:
            if rec.get(field_) is not None:  # no traffic model for NumPy's memmove
                rows.append(task.config | extra | {"metric": metric, "value": rec[field_],
                                                   "unit": unit})
        rec["stderr"] = stderr.strip()
    triad = next(r for r in records if r["function"] == "Triad")
    summary = f"Triad {triad['best_rate_gbs']:.1f} GB/s on CPUs [{rows[-1]['bound_cpus']}]"
    runtime_msgs = [ln for ln in stderr.strip().splitlines()
                    if ln.strip() and not ln.startswith("warning: ")]  # ours are in the records
    if runtime_msgs:
        summary += f" (stderr: {runtime_msgs[-1][:80]})"
    return rows, records, summary




GROUP = ["vm", "run_id", "label", "impl", "variant", "compiler", "stores", "places", "bind",
         "kmp_affinity", "threads", "function"]


def spread(table: pd.DataFrame, function: str | None = "Triad",
           metric: str = "best_rate") -> pd.DataFrame:
    """Median and spread of the best rate (STREAM's count; "traffic_rate": the bytes moved)
    over repetitions, per configuration.

    Columns: median_gbs, min_gbs, max_gbs, cv (standard deviation / mean),
    n (repetitions) and bound_cpus (every distinct binding seen).
    """
    df = table[table["metric"] == metric].copy()
    if "stores" not in df:
        df["stores"] = pd.NA
    # runs from before the policy was recorded: the baselines' own, normal for the C kernels
    df["stores"] = df["stores"].fillna(df["impl"].map(BASELINE_STORES)).fillna("normal")
    if function:
        df = df[df["function"] == function]
    if df.empty:
        return pd.DataFrame(columns=GROUP + ["median_gbs", "min_gbs", "max_gbs", "cv", "n",
                                             "bound_cpus"])
    g = typed(df, GROUP, ints=("threads",)).groupby(GROUP, sort=True)
    out = g["value"].agg(median_gbs="median", min_gbs="min", max_gbs="max", mean="mean",
                         std="std", n="size").reset_index()
    out["cv"] = (out["std"].fillna(0.0) / out["mean"]).round(4)
    cpus = g["bound_cpus"].agg(lambda s: " | ".join(sorted({str(x) for x in s})))
    out = out.merge(cpus.rename("bound_cpus").reset_index(), on=GROUP)
    return out.drop(columns=["mean", "std"])


# -- report (its section of figures/, built by the report notebook) ----------

def report_section(runs_dir: Path | str = "", reference_dir: Path | str = "",
                   figures_dir: Path | str = "", show: bool = False) -> report.Section:
    """The study's Figures 2-4 for every VM with data, the best-bandwidth table, an overview."""
    section, loaded, ref_dir, fig_dir, root = report.begin(
        "triad", runs_dir, reference_dir, figures_dir)
    best_ref = read_reference(ref_dir, "triad_best.csv",
                              ["vm", "best_triad_gbs", "label", "threads", "source"],
                              section.problems)
    peaks = read_reference(ref_dir, "vm_memory_bandwidth.csv", ["vm", "theoretical_gbs_node"],
                           section.problems)
    stats = spread(loaded.table)
    best_rows: list[dict] = []
    stores_rows: list[dict] = []
    for vm, run, s, run_rel in report.each_vm(stats, loaded, root):
        peak, peak_src = report.peak_for(vm, run["params"], peaks)
        plots.apply_style()  # before the figure, or the first figure misses the style
        fig, ax = plt.subplots(figsize=(10, 5.5))
        plots.bandwidth_vs_threads(s, ax, title=f"{vm}: STREAM Triad bandwidth vs threads "
                                                f"({report.source_label(run)})")
        marks = []
        ref = best_ref[best_ref["vm"].map(vm_key) == vm_key(vm)]
        for r in ref.itertuples():
            plots.reference_line(ax, r.best_triad_gbs, f"study best {r.best_triad_gbs:g} GB/s "
                                 f"({r.label}, {r.threads:g} threads)", "--", "0.2", r.threads)
            marks.append("the study's best (data/reference/triad_best.csv)")
        for r in _series_rows(best_ref, vm).itertuples():
            series = str(r.vm).removesuffix(" series")
            plots.reference_line(ax, r.best_triad_gbs, f"{str(r.source).split(' (')[0]}, "
                                 f"{series}: {r.best_triad_gbs:g} GB/s", "-.", "0.45")
            marks.append(str(r.note).split(";")[0])
        if not math.isnan(peak):
            plots.reference_line(ax, peak, f"theoretical {peak:g} GB/s", ":", "0.6")
            marks.append(f"theoretical bandwidth ({peak_src})")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        sizes = loaded.table.loc[loaded.table["run_id"] == run["run_id"], "size"].dropna()
        size = f"{int(sizes.iloc[0]):,}" if len(sizes) else "?"
        caption = (f"Data: {run_rel} ({run['status']}); median of "
                   f"{int(s['n'].max())} fresh processes per point, bars min-max; "
                   f"N = {size} doubles per array, "
                   f"NTIMES = {run['params'].get('triad_ntimes', '?')}; "
                   + ("labels with '-streaming' (dash-dotted): streaming stores; the other C "
                      "variants and numba: normal stores; "
                      if (s["stores"] == "streaming").any() else
                      "C variants and numba: normal stores; ")
                   + "NumPy: memmove (glibc's streaming stores for large arrays). "
                   + (f"Reference marks: {'; '.join(marks)}." if marks else
                      "No reference figure is known for this VM."))
        section.entries.append(report.figure_entry(
            fig, fig_dir, f"triad_{vm}", f"STREAM Triad vs threads on {vm}", caption, [run_rel],
            show))
        mine = _stores_rows(vm, s, peak, run_rel)
        if mine:
            stores_rows += mine
            section.entries.append(_stores_figure(vm, run, mine, fig_dir, run_rel, show))
        for label, d in s.groupby("label"):
            top = d.loc[d["median_gbs"].idxmax()]
            traffic = top["median_gbs"] * triad_traffic_factor(top["stores"])
            best_rows.append({
                "vm": vm, "source": report.source_label(run), "label": label, "impl": top["impl"],
                "stores": top["stores"],
                "threads": int(top["threads"]), "best_median_gbs": round(top["median_gbs"], 2),
                "min_gbs": round(top["min_gbs"], 2), "max_gbs": round(top["max_gbs"], 2),
                "cv": round(float(top["cv"]), 4), "repetitions": int(top["n"]),
                "theoretical_gbs": peak,
                "fraction_of_theoretical": round(top["median_gbs"] / peak, 3)
                if not math.isnan(peak) else math.nan,
                "traffic_gbs": round(traffic, 2),
                "traffic_fraction_of_theoretical": round(traffic / peak, 3),
                "data": run_rel})
    for r in best_ref.itertuples():
        peak, _ = report.peak_for(r.vm, {}, peaks)
        best_rows.append({
            "vm": r.vm,
            "source": "the study" if str(r.source).startswith("study")
            else str(r.source).split(" (")[0],
            "label": r.label if isinstance(r.label, str) else "", "impl": "", "stores": "",
            # whole numbers stay whole in the CSV: a missing one is empty, not NaN (-> 24.0)
            "threads": int(r.threads) if pd.notna(r.threads) else pd.NA,
            "best_median_gbs": r.best_triad_gbs, "min_gbs": math.nan,
            "max_gbs": math.nan, "cv": math.nan, "repetitions": pd.NA,
            "theoretical_gbs": peak,
            "fraction_of_theoretical": round(r.best_triad_gbs / peak, 3)
            if not math.isnan(peak) else math.nan,
            "traffic_gbs": math.nan, "traffic_fraction_of_theoretical": math.nan,
            "data": "data/reference/triad_best.csv"})
    table = report.table_entry(
        section, best_rows, fig_dir, "triad_best", "Best Triad bandwidth per VM and configuration",
        "Best median Triad bandwidth over thread counts, per VM and configuration, with its "
        "spread and its fraction of the theoretical memory bandwidth where known. "
        "best_median_gbs counts 24 B per element, as STREAM does; traffic_gbs is what the "
        "memory moved: 32 B per element with normal stores (each line written is read first), "
        "24 B with streaming stores. Rows 'measured here' come from the newest run of each VM "
        "under data/runs; rows 'the study' from data/reference/triad_best.csv (their store "
        "policy is not recorded).")
    if not table.empty:
        section.entries.append(_overview(table, fig_dir, show))
    report.table_entry(
        section, stores_rows, fig_dir, "triad_stores",
        "Triad with normal and streaming stores, per compiler variant",
        "Best median Triad (STREAM's count, 24 B per element) per VM and compiler "
        "variant with normal stores and with streaming stores, their ratio, and the "
        "traffic each moved (32 B and 24 B per element). Measured here only: the "
        "study's published figures do not say which stores their compilers emitted.")
    return section


def _series_rows(best_ref: pd.DataFrame, vm: str) -> pd.DataFrame:
    """Rows of data/reference/triad_best.csv for a series of VMs whose `applies_to` names a
    prefix of `vm` (Azure's HBv3 figure on the HB120 VMs)."""
    if "applies_to" not in best_ref:
        return best_ref.iloc[0:0]
    key = vm_key(vm)
    return best_ref[best_ref["applies_to"].fillna("").astype(str).map(
        lambda s: any(p and key.startswith(vm_key(p)) for p in s.split(";")))]


def triad_traffic_factor(stores: str) -> float:
    """Bytes the memory moves per byte STREAM counts, for Triad under a store policy
    (runs from before the policy was recorded: normal stores); nan where no model applies
    (NumPy's memmove)."""
    t = triad_kernel.TRAFFIC_BYTES.get(stores or "normal")
    return t["Triad"] / triad_kernel.BYTES_PER_ELEMENT["Triad"] if t else math.nan


def _stores_rows(vm: str, s: pd.DataFrame, peak: float, run_rel: str) -> list[dict]:
    """Per C variant of one VM measured with both store policies: best median Triad with
    each (best over affinities and thread counts), their ratio and traffic."""
    rows = []
    c = s[s["impl"] == "c"]
    for variant, d in c.groupby("variant", sort=True):
        best = {k: g.loc[g["median_gbs"].idxmax()] for k, g in d.groupby("stores")}
        if not {"normal", "streaming"} <= set(best):
            continue
        n, st = best["normal"], best["streaming"]
        rows.append({
            "vm": vm, "variant": variant,
            "normal_gbs": round(n["median_gbs"], 2), "normal_label": n["label"],
            "normal_threads": int(n["threads"]),
            "streaming_gbs": round(st["median_gbs"], 2), "streaming_label": st["label"],
            "streaming_threads": int(st["threads"]),
            "streaming_over_normal": round(st["median_gbs"] / n["median_gbs"], 3),
            "normal_traffic_gbs": round(n["median_gbs"] * triad_traffic_factor("normal"), 2),
            "streaming_traffic_gbs": round(
                st["median_gbs"] * triad_traffic_factor("streaming"), 2),
            "theoretical_gbs": peak, "data": run_rel})
    return rows


def _stores_figure(vm: str, run: dict, mine: list[dict], fig_dir: Path, run_rel: str,
                   show: bool) -> report.Entry:
    """Per compiler variant of one VM (its _stores_rows): best Triad with normal and with
    streaming stores (STREAM's count), the traffic of the normal stores beside them, and a
    caption that says, from these numbers, how much a compiler gains by its stores alone."""
    plots.apply_style()
    fig, ax = plt.subplots(figsize=(10, 1.3 * max(1, len(mine)) + 2.4))
    ys = np.arange(len(mine))
    colors = plots.palette(3)
    ax.barh(ys + 0.27, [r["normal_gbs"] for r in mine], height=0.26, color=colors[0],
            label="normal stores (STREAM's count, 24 B per element)")
    ax.barh(ys, [r["normal_traffic_gbs"] for r in mine], height=0.26, color=colors[0],
            alpha=0.45, label="normal stores, bytes moved (32 B per element)")
    ax.barh(ys - 0.27, [r["streaming_gbs"] for r in mine], height=0.26, color=colors[2],
            label="streaming stores (24 B counted = moved)")
    for y, r in zip(ys, mine):
        for dy, v in ((0.27, r["normal_gbs"]), (0.0, r["normal_traffic_gbs"]),
                      (-0.27, r["streaming_gbs"])):
            ax.annotate(f"{v:.1f}", (v, y + dy), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=8)
    peak = float(mine[0]["theoretical_gbs"]) if mine else math.nan
    if not math.isnan(peak):
        ax.axvline(peak, ls=":", color="0.4", label=f"theoretical {peak:g} GB/s")
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r['variant']}\nstreaming / normal {r['streaming_over_normal']:.2f}x"
                        for r in mine], fontsize=9)
    ax.set_xlabel("best median Triad bandwidth over affinities and threads (GB/s)")
    ax.set_xlim(0, max([r["normal_traffic_gbs"] for r in mine]
                       + [r["streaming_gbs"] for r in mine] + [0 if math.isnan(peak) else peak])
                * 1.6)
    ax.legend(loc="lower right", fontsize=8, frameon=True)
    ax.set_title(f"{vm}: Triad with normal and streaming stores ({report.source_label(run)})")
    gains = "; ".join(f"{r['variant']} {r['normal_gbs']:.1f} -> {r['streaming_gbs']:.1f} GB/s "
                      f"({r['streaming_over_normal']:.2f}x)" for r in mine)
    caption = (f"Data: {run_rel}. Best median over affinities and thread counts, per variant: "
               f"{gains}. With normal stores each line written is read first, so Triad moves "
               "32 B per element while STREAM counts 24: the same memory traffic reported with "
               "streaming stores is up to 32/24 = 1.33x higher. Intel's compilers emit "
               "streaming stores for this loop; a compiler ranking such as the study's (icc or "
               "nvc best on every VM, section 3.1) can owe up to that factor to the stores "
               "alone, and on this machine the stores alone gave the ratios above. The study's "
               "figures are its own and say nothing of their stores; these are ours.")
    return report.figure_entry(fig, fig_dir, f"triad_stores_{vm}",
                               f"Triad: normal against streaming stores on {vm}", caption,
                               [run_rel], show)


def _overview(table: pd.DataFrame, fig_dir: Path, show: bool) -> report.Entry:
    """Best Triad per VM: ours beside the study's, theoretical bandwidth marked."""
    best = (table.sort_values("best_median_gbs", ascending=False)
                 .groupby(["vm", "source"], sort=False).head(1)
                 .assign(ours=lambda d: d["source"] == "measured here")
                 .sort_values(["ours", "best_median_gbs"]))
    plots.apply_style()
    fig, ax = plt.subplots(figsize=(11, 0.6 * len(best) + 2.0))
    ys = list(range(len(best)))
    colors = {"measured here": "#0072B2", "a test run": "#56B4E9"}
    names = {"measured here": "measured here", "a test run": "a test run"}
    peaks = best["theoretical_gbs"].astype(float)
    # theoretical bandwidth as a light outlined bar behind the measured one: both from zero
    ax.barh([y for y, p in zip(ys, peaks) if not math.isnan(p)], peaks.dropna(), height=0.8,
            color="0.94", edgecolor="0.45", lw=0.8, label="theoretical memory bandwidth")
    for y, r in zip(ys, best.itertuples()):
        ax.barh([y], [r.best_median_gbs], height=0.56, color=colors.get(r.source, "#999999"),
                label=names.get(r.source, "published (the study, Azure)"))
        peak = float(r.theoretical_gbs)
        text = f"{r.best_median_gbs:.1f} GB/s" + (
            f", {r.best_median_gbs / peak:.0%} of theoretical" if peak > 0 else "")
        ax.annotate(text, (max(r.best_median_gbs, 0 if math.isnan(peak) else peak), y),
                    xytext=(5, 0), textcoords="offset points", va="center", fontsize=9)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r.vm} ({r.source})\n" + ", ".join(x for x in (
        r.label if isinstance(r.label, str) else "",
        "" if pd.isna(r.threads) else f"{float(r.threads):g} threads") if x)
        for r in best.itertuples()], fontsize=9)
    ax.set_ylim(-0.6, len(best) - 0.4)
    handles, labels = ax.get_legend_handles_labels()
    keep = dict(zip(labels, handles))  # one entry per category drawn
    ax.legend(keep.values(), keep.keys(), loc="upper right", fontsize=9, frameon=True)
    ax.set_xlabel("best Triad bandwidth (GB/s; measured here: median of the best "
                  "configuration's repetitions)", fontsize=10)
    top = max(best["best_median_gbs"].max(), peaks.max(skipna=True) if peaks.notna().any() else 0)
    ax.set_xlim(0, top * 1.5)
    ax.tick_params(axis="x", labelsize=9)
    ax.set_title("STREAM Triad: best bandwidth per VM, measured and published",
                 fontsize=12)
    caption = ("Data: figures/triad_best.csv (newest run of each VM under data/runs; the "
               "study's section 3.1 values from data/reference/triad_best.csv); theoretical "
               "bandwidth from data/reference/vm_memory_bandwidth.csv or the run's parameters.")
    return report.figure_entry(fig, fig_dir, "triad_overview",
                               "STREAM Triad: best per VM, ours beside the study's", caption,
                               sorted(set(best["data"])), show)


#: What papermill_params/README.md says of the labels (params.docs() writes it there).
LABELS = ("Labels follow the study's Appendix Table A: "
          "`<compiler><version>[-<tag>]+<places>+<bind>`, or\n`+<granularity>+<type>` for "
          "`KMP_AFFINITY` (`granularity=core,compact` gives `core+compact`).")

#: The configuration columns of its rows (besides store.HEAD and store.TAIL).
COLUMNS = ("variant", "compiler", "compiler_version", "flags", "stores", "places", "bind",
           "kmp_affinity", "threads", "size", "function", "bound_cpus", "moved_threads")

SPEC = register(Benchmark(BENCHMARK, tuple(PARAMS), "010_measure_triad.ipynb",
                          "110_report_triad.ipynb", plan, parse, spread,
                          report_section, columns=COLUMNS, title="STREAM Triad",
                          labels=LABELS))
