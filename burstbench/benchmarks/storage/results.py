"""A storage configuration's output as tidy rows, the spread of its repetitions, and the
values storage is judged by (explore's headline; the burst decision's staging bandwidth)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from burstbench.core import paths, runner, store
from burstbench.core.merits import Merits, frame
from burstbench.core.sweep import over_repetitions

#: (JSON key, metric, unit) of each value of a kernel record (one per phase).
METRICS = (("bandwidth_mib_s", "bandwidth", "MiB/s"), ("total_s", "total_time", "s"),
           ("transfer_s", "transfer_time", "s"), ("open_s", "open_time", "s"),
           ("close_s", "close_time", "s"))
#: Reads whose bytes may have come from memory, not the storage: labelled in every table
#: and figure (the kernel says how each read avoided the cache, or that it could not); a
#: memory file system's reads are memory by nature.
MAYBE_CACHED = "may be cached"
NOT_STORAGE = (MAYBE_CACHED, "in memory (tmpfs)")
#: Added to how a read avoided this node's cache where the file servers' cache could not be
#: dropped (Gfarm's I/O servers, NFS, a FUSE mount): O_DIRECT or a drop speaks for the
#: client only, and data just written may be read back from the servers' memory.
SERVERS_MAY_CACHE = "; servers may cache"


def from_memory(cache: object) -> bool:
    """Whether a read so labelled may have come from memory, not the storage."""
    c = "" if pd.isna(cache) else str(cache)
    return c in NOT_STORAGE or c.endswith(SERVERS_MAY_CACHE)


def cache_label(rec: dict) -> str:
    """A read's ``cache`` as stored: the kernel's, with SERVERS_MAY_CACHE where its note
    says the servers' cache was out of reach."""
    cache = rec.get("cache") or ""
    if cache and rec.get("cache_note") and cache not in NOT_STORAGE:
        return cache + SERVERS_MAY_CACHE
    return cache


def parse(task: runner.Task, stdout: str, stderr: str) -> tuple[list[dict], list[dict], str]:
    """The kernel's JSON lines (one per phase) or a replication's -> tidy rows."""
    records = runner.json_records(stdout, stderr)
    rows, c = [], task.config
    for rec in records:
        extra = {"host": ",".join(rec.get("hosts", [])) or rec.get("host"),
                 "operation": rec["operation"], "fs_type": rec.get("fs_type", "gfarm"),
                 "cache": cache_label(rec), "iteration": rec.get("iteration", 1),
                 "size": rec["bytes"], "timestamp": store.now_iso()}
        if rec["operation"] == "replicate":
            rows += [c | extra | {"metric": "replication_time", "value": rec["seconds"],
                                  "unit": "s"},
                     c | extra | {"metric": "bandwidth", "value": rec["bandwidth_mib_s"],
                                  "unit": "MiB/s"}]
            continue
        if rec["operation"] == "read" and not rec.get("validated"):
            raise runner.TaskFailed("a read was not validated")
        rows += [c | extra | {"metric": metric, "value": rec[key], "unit": unit}
                 for key, metric, unit in METRICS if rec.get(key) is not None]
        rec["stderr"] = stderr.strip()[-2000:]
    summary = ", ".join(f"{r['operation']} {r['bandwidth_mib_s']:,.0f} MiB/s"
                        + (f" ({r['cache']})" if r.get("cache") else "") for r in records)
    return rows, records, summary


GROUP = ["vm", "run_id", "label", "target", "api", "access", "operation", "ranks", "nodes",
         "cache", "fs_type", "metric", "unit"]


def spread(table: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max over repetitions per configuration, operation and metric."""
    return over_repetitions(table, GROUP, ints=("ranks", "nodes"))


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """Write and read bandwidth (MiB/s) per target, API, access pattern and operation,
    against the ranks, in explore's common columns."""
    t = table[table["metric"] == "bandwidth"]
    return t.assign(config=t["label"] + " " + t["operation"].astype(str), x_name="ranks",
                    x=t["ranks"], quantity=t["operation"].astype(str) + " bandwidth",
                    higher_is_better=True)


def merits(runs_dir: Path | str, reference_dir: Path | str) -> Merits:
    """``storage_write_mib_s`` and ``storage_read_mib_s``: per target of each VM's
    store.merit_runs run (test runs never), the best median bandwidth over its APIs, access
    patterns and layouts, with its configuration, file system and how reads avoided the
    cache (a read that may have come from memory is never the read merit while an honest one
    exists);
    ``wan_mib_s``: a run's Gfarm replication to the other site (``storage_replicate_remote``),
    the WAN's own rate, median with its lowest and highest try."""
    from burstbench.benchmarks.storage import COLUMNS

    loaded = store.load(Path(runs_dir), "storage", False, COLUMNS)
    stats = spread(loaded.table)
    chosen, notes = store.merit_runs(loaded, "storage")
    rows = []
    for vm, run in chosen.items():
        s = stats[(stats["vm"] == vm) & (stats["run_id"] == run["run_id"])
                  & (stats["metric"] == "bandwidth") & (stats["access"] != "replication")]
        data = paths.rel_path(Path(run["path"]), paths.project_root())
        for (target, op), d in s.groupby(["target", "operation"], sort=True):
            honest = d[~d["cache"].map(from_memory)]
            best = (honest if len(honest) else d).sort_values("median").iloc[-1]
            rows.append({"vm": vm, "merit": f"storage_{op}_mib_s", "value": float(best["median"]),
                         "unit": "MiB/s", "source": "measured here", "data": data,
                         "label": best["label"], "target": target, "api": best["api"],
                         "access": best["access"], "ranks": int(best["ranks"]),
                         "nodes": int(best["nodes"]), "fs_type": best["fs_type"],
                         "cache": best["cache"], "run_id": run["run_id"]})
    for run in loaded.runs:  # a replication to the other site measured the WAN itself
        if not (run.get("params") or {}).get("storage_replicate_remote"):
            continue
        rep = stats[(stats["run_id"] == run["run_id"]) & (stats["access"] == "replication")
                    & (stats["metric"] == "bandwidth")]
        data = paths.rel_path(Path(run["path"]), paths.project_root())
        for r in rep.itertuples():
            rows.append({"vm": run["vm"], "merit": "wan_mib_s", "value": float(r.median),
                         "unit": "MiB/s", "source": "measured here", "data": data,
                         "label": r.label, "target": r.target, "low": float(r.min),
                         "high": float(r.max), "run_id": run["run_id"]})
    return Merits(frame(rows), loaded.runs, list(loaded.problems) + notes)
