"""A Triad configuration's output as tidy rows, the spread of its repetitions, and the
values Triad is judged by (explore's headline, the cost model's memory bandwidth)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from burstbench.core import paths, runner, store
from burstbench.core.merits import Merits, frame
from burstbench.core.reference import read_reference
from burstbench.core.sweep import typed
from kernels_ext import triad as triad_kernel
from kernels_ext.triad import BASELINE_STORES

METRICS = (("best_rate_gbs", "best_rate", "GB/s"), ("avg_time_s", "avg_time", "s"),
           ("min_time_s", "min_time", "s"), ("max_time_s", "max_time", "s"),
           ("traffic_rate_gbs", "traffic_rate", "GB/s"))


def parse(task: runner.Task, stdout: str, stderr: str) -> tuple[list[dict], list[dict], str]:
    """Kernel JSON lines -> tidy rows (one per configuration, function and metric) and raw
    records. A task's process measures the configurations of its config's "runs" in turn,
    four records (Copy, Scale, Add, Triad) each, in that order."""
    try:
        records = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    except ValueError as exc:
        raise runner.TaskFailed(f"unreadable kernel output ({exc})") from exc
    configs = task.each()
    if len(records) != 4 * len(configs):
        raise runner.TaskFailed(f"kernel output has {len(records)} records, not 4 for each "
                                f"of {len(configs)} configurations")
    rows, rates = [], []
    for i, config in enumerate(configs):
        group = records[4 * i:4 * i + 4]
        if [r.get("function") for r in group] != ["Copy", "Scale", "Add", "Triad"]:
            raise runner.TaskFailed("kernel output lacks some of Copy/Scale/Add/Triad")
        if "threads" in config and group[0].get("threads_requested") != config["threads"]:
            raise runner.TaskFailed(f"configuration {i + 1}: asked for {config['threads']} "
                                    f"threads, the kernel measured "
                                    f"{group[0].get('threads_requested')}")
        for rec in group:
            rows += _rows(config, rec)
            rec["stderr"] = stderr.strip()
        nt = "streaming " if config.get("stores") == "streaming" else ""
        rates.append(f"{nt}{group[3]['threads']}t {group[3]['best_rate_gbs']:.1f}")
    summary = f"Triad {', '.join(rates)} GB/s on CPUs [{rows[-1]['bound_cpus']}]"
    runtime_msgs = [ln for ln in stderr.strip().splitlines()
                    if ln.strip() and not ln.startswith("warning: ")]  # ours are in the records
    if runtime_msgs:
        summary += f" (stderr: {runtime_msgs[-1][:80]})"
    return rows, records, summary


def _rows(config: dict, rec: dict) -> list[dict]:
    """One configuration's record of one function as its rows, one per metric."""
    if not rec.get("validated"):
        raise runner.TaskFailed(f"{rec['function']} not validated")
    binding = rec.get("binding", [])
    extra = {"host": rec.get("host"), "function": rec["function"],
             "bound_cpus": ",".join(str(b["cpu_first"]) for b in binding),
             "moved_threads": sum(1 for b in binding
                                  if b["moves"] or b["cpu_first"] != b["cpu_last"]),
             "timestamp": store.now_iso()}
    if rec.get("stores", "normal") != config.get("stores", "normal"):
        raise runner.TaskFailed(f"asked for {config['stores']} stores, the kernel "
                                f"used {rec.get('stores')}")
    return [config | extra | {"metric": metric, "value": rec[field_], "unit": unit}
            for field_, metric, unit in METRICS
            if rec.get(field_) is not None]  # no traffic model for NumPy's memmove


GROUP = ["vm", "run_id", "label", "impl", "variant", "compiler", "stores", "places", "bind",
         "kmp_affinity", "threads", "function"]


def sweep(table: pd.DataFrame) -> pd.DataFrame:
    """The sweep's rows, at its STREAM-rule size: the ladder's (a tier named) left out."""
    if "tier" not in table:
        return table
    return table[~_tiered(table)]


def _tiered(table: pd.DataFrame) -> pd.Series:
    """Which rows are a ladder point's (a tier named; NaN, a float, where none is)."""
    return table["tier"].astype(object).fillna("").astype(str) != ""


def ladder(table: pd.DataFrame) -> pd.DataFrame:
    """The ladder's Triad rows (params.triad_tiers), with ``bytes``: their working set."""
    if "tier" not in table:
        return table.iloc[0:0].assign(bytes=pd.Series(dtype=float))
    t = table[_tiered(table) & (table["function"] == "Triad")
              & (table["metric"] == "best_rate")]
    return t.assign(bytes=24.0 * pd.to_numeric(t["size"], errors="coerce"))


def spread(table: pd.DataFrame, function: str | None = "Triad",
           metric: str = "best_rate") -> pd.DataFrame:
    """Median and spread of the best rate (STREAM's count; "traffic_rate": the bytes moved)
    over repetitions, per configuration of the sweep (the ladder's points: ladder()).

    Columns: median_gbs, min_gbs, max_gbs, cv (standard deviation / mean),
    n (repetitions) and bound_cpus (every distinct binding seen).
    """
    table = sweep(table)
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


def triad_traffic_factor(stores: str) -> float:
    """Bytes the memory moves per byte STREAM counts, for Triad under a store policy
    (runs from before the policy was recorded: normal stores); nan where no model applies
    (NumPy's memmove)."""
    t = triad_kernel.TRAFFIC_BYTES.get(stores or "normal")
    return t["Triad"] / triad_kernel.BYTES_PER_ELEMENT["Triad"] if t else math.nan


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """Triad's best rate (GB/s) per label and thread count, in explore's common columns."""
    t = sweep(table)
    t = t[(t["function"] == "Triad") & (t["metric"] == "best_rate")]
    return t.assign(config=t["label"], x_name="threads", x=t["threads"],
                    quantity="Triad bandwidth", higher_is_better=True)


def against_study(newest: pd.DataFrame, summary: pd.DataFrame, vm: str,
                  reference_dir: Path) -> list[dict]:
    """The best median bandwidth of a VM's newest run against each study VM's best
    (data/reference/triad_best.csv)."""
    ours = float(summary["median"].max())
    best = summary.loc[summary["median"].idxmax()]
    out = []
    for r in pd.read_csv(Path(reference_dir) / "triad_best.csv").itertuples():
        out.append({"quantity": "best Triad bandwidth", "unit": "GB/s", "vm": vm,
                    "ours": ours, "our_config": f"{best['config']}, {best['x']:g} threads",
                    "study_vm": r.vm, "study": float(r.best_triad_gbs),
                    "ratio": ours / float(r.best_triad_gbs), "higher_is_better": True,
                    "note": str(r.source)})
    return out


def at_size(table: pd.DataFrame, run_id: str) -> float:
    """Elements per array of a run's sweep (its STREAM-rule size); nan where not recorded."""
    t = sweep(table)
    sizes = pd.to_numeric(t.loc[t["run_id"] == run_id, "size"], errors="coerce").dropna()
    return float(sizes.max()) if len(sizes) else math.nan


def merits(runs_dir: Path | str, reference_dir: Path | str) -> Merits:
    """``memory_bandwidth_gbs``: the best median Triad bandwidth (STREAM's count) of the
    store.merit_runs run of each VM measured here (test runs never), then the study's published best
    of each VM not measured (data/reference/triad_best.csv, its rows whose source is the
    study); ``memory_bandwidth_gbs_at_threads``: per thread count of every run (``newest``
    marks each VM's merit run), the best median of the C kernel with normal stores over its
    variants and affinities (a layout's bandwidth depends on the cores it uses, and this
    VM's bandwidth changes between runs; solvers write through the cache), its ``bytes``
    the sweep's working set (three arrays at the STREAM-rule size);
    ``memory_bandwidth_gbs_at_bytes``: per run, ladder point (``tier``, ``bytes``: its
    working set) and thread count, the median over repetitions.  Each run's rows name its
    machine (``cpu``, ``llc_bytes``: store.load's, from its provenance)."""
    from burstbench.benchmarks.triad import COLUMNS

    loaded = store.load(Path(runs_dir), "triad", False, COLUMNS)
    chosen, notes = store.merit_runs(loaded, "triad")
    problems = list(loaded.problems) + notes
    stats = spread(loaded.table)
    rows = []
    for vm, run in chosen.items():
        s = stats[(stats["vm"] == vm) & (stats["run_id"] == run["run_id"])]
        if len(s):
            top = s.loc[s["median_gbs"].idxmax()]
            rows.append({"vm": vm, "merit": "memory_bandwidth_gbs",
                         "value": round(float(top["median_gbs"]), 2), "unit": "GB/s",
                         "source": "measured here",
                         "data": paths.rel_path(Path(run["path"]), paths.project_root()),
                         "label": top["label"], "threads": int(top["threads"]),
                         "run_id": run["run_id"]})
    newest = {r["run_id"] for r in chosen.values()}
    lad = ladder(loaded.table)
    for run in sorted(loaded.runs, key=lambda r: r["run_id"]):  # the model's B(cores)
        # the C kernel with normal stores: the solvers it stands for write through the cache
        s = stats[(stats["vm"] == run["vm"]) & (stats["run_id"] == run["run_id"])
                  & (stats["impl"] == "c") & (stats["stores"] == "normal")]
        where = {"source": "measured here", "run_id": run["run_id"],
                 "data": paths.rel_path(Path(run["path"]), paths.project_root()),
                 "newest": run["run_id"] in newest, "cpu": run.get("cpu", ""),
                 "llc_bytes": run.get("llc_bytes", 0)}
        for threads, d in s.groupby("threads", sort=True):
            at = d.loc[d["median_gbs"].idxmax()]
            rows.append({"vm": run["vm"], "merit": "memory_bandwidth_gbs_at_threads",
                         "value": round(float(at["median_gbs"]), 2), "unit": "GB/s",
                         "label": at["label"], "threads": int(threads),
                         "bytes": 24.0 * float(at_size(loaded.table, run["run_id"]))} | where)
        for (tier, b, threads), d in lad[lad["run_id"] == run["run_id"]].groupby(
                ["tier", "bytes", "threads"], sort=True):
            rows.append({"vm": run["vm"], "merit": "memory_bandwidth_gbs_at_bytes",
                         "value": round(float(d["value"].median()), 2), "unit": "GB/s",
                         "label": d["label"].iloc[0], "threads": int(threads),
                         "bytes": float(b), "tier": tier} | where)
    study = read_reference(reference_dir, "triad_best.csv", ["vm", "best_triad_gbs", "source"],
                           problems)
    for r in study.itertuples():
        if str(r.source).startswith("study") and r.vm not in {x["vm"] for x in rows}:
            rows.append({"vm": r.vm, "merit": "memory_bandwidth_gbs",
                         "value": float(r.best_triad_gbs), "unit": "GB/s", "source": "the study",
                         "data": "data/reference/triad_best.csv",
                         "label": getattr(r, "label", ""),
                         "threads": getattr(r, "threads", math.nan), "run_id": ""})
    return Merits(frame(rows), loaded.runs, problems)
