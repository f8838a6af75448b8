"""A ping-pong's output as tidy rows, the spread of its repetitions, its extremes, and the
values it is judged by (explore's headline, the cost model's latency and bandwidth)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from burstbench.core import paths, runner, store
from burstbench.core.merits import Merits, frame
from burstbench.core.reference import read_reference
from burstbench.core.sweep import over_repetitions

UNITS = {"latency": ("latency", "us"), "bw": ("bandwidth", "GB/s"), "bibw": ("bandwidth", "GB/s")}


def parse(task: runner.Task, stdout: str, stderr: str) -> tuple[list[dict], list[dict], str]:
    """Kernel JSON lines (one per message size) -> tidy rows and raw records."""
    records = runner.json_records(stdout, stderr)
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


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """Latency (us) and bandwidth (GB/s) per label, test and message size, in explore's
    common columns."""
    p = table[table["metric"].isin(["latency", "bandwidth"])]
    return p.assign(config=p["label"] + " " + p["function"].astype(str),
                    x_name="message_size", x=p["message_size"], quantity=p["metric"],
                    higher_is_better=p["metric"] == "bandwidth")


def against_study(newest: pd.DataFrame, summary: pd.DataFrame, vm: str,
                  reference_dir: Path) -> list[dict]:
    """The smallest median latency and largest median bandwidth of a VM's newest run across
    nodes against each study VM's (data/reference/osu.csv; the study's are inter-node).  A
    run measured within one node only is not compared: its row says so, with no ratio (a
    same-node latency against an inter-node one read as a 16x win)."""
    across = set(newest.loc[newest["placement"].astype(str) == "across-nodes", "label"])
    if across:
        summary = summary[summary["config"].map(lambda c: c.rsplit(" ", 1)[0] in across)]
    study = pd.read_csv(Path(reference_dir) / "osu.csv")
    out = []
    for quantity, what, col, higher in (("latency", "smallest latency", "latency_min_us", False),
                                        ("bandwidth", "largest bandwidth", "bandwidth_max_gbs",
                                         True)):
        q = summary[summary["quantity"] == quantity]
        if q.empty:
            continue
        best = q.loc[q["median"].idxmax() if higher else q["median"].idxmin()]
        for r in study.itertuples():
            ref_value = float(getattr(r, col))
            out.append({"quantity": what, "unit": best["unit"], "vm": vm,
                        "ours": float(best["median"]), "our_config": best["config"],
                        "study_vm": r.vm, "study": ref_value,
                        "ratio": float(best["median"]) / ref_value if across else math.nan,
                        "higher_is_better": higher,
                        "note": "both inter-node" if across else
                        "not compared: ours within one node, the study's across nodes "
                        "(measure the across-nodes placement to compare)"})
    return out


def merits(runs_dir: Path | str, reference_dir: Path | str) -> Merits:
    """``latency_us`` (the smallest median one-way latency) and ``bandwidth_gbs`` (the largest
    median osu_bw bandwidth) of each VM's store.merit_runs run, per placement (its
    C kernel, the first combination measured; ``nodes`` it spans), with that label's whole curve
    (``message_time_us`` and ``message_bandwidth_gbs`` by ``message_size``), then the
    study's (data/reference/osu.csv: its latency range, ``latency_high_us`` the top, and
    its largest bandwidth, inter-node)."""
    from burstbench.benchmarks.pingpong import COLUMNS

    loaded = store.load(Path(runs_dir), "pingpong", False, COLUMNS)
    chosen, notes = store.merit_runs(loaded, "pingpong")
    problems = list(loaded.problems) + notes
    stats = spread(loaded.table)
    nodes = loaded.table.groupby(["run_id", "placement"])["nodes"].max() \
        if len(loaded.table) else pd.Series(dtype=float)
    rows = []
    for vm, run in chosen.items():
        s = stats[(stats["vm"] == vm) & (stats["run_id"] == run["run_id"])
                  & (stats["impl"] == "c") & ~stats["label"].str.endswith("+thp")]
        data = paths.rel_path(Path(run["path"]), paths.project_root())
        for (placement, test), d in s.groupby(["placement", "function"], sort=True):
            if test not in ("latency", "bw"):
                continue
            on = nodes.get((run["run_id"], placement), 1)  # machines._kind reads it
            d = d[d["variant"] == d["variant"].iloc[0]]
            best = d.loc[d["median"].idxmin() if test == "latency" else d["median"].idxmax()]
            # the whole curve of that label: what a message of a given size costs
            for c in d[d["label"] == best["label"]].sort_values("message_size").itertuples():
                rows.append({"vm": vm, "merit": "message_time_us" if test == "latency"
                             else "message_bandwidth_gbs", "value": float(c.median),
                             "unit": c.unit, "source": "measured here", "data": data,
                             "label": c.label, "placement": placement, "nodes": on,
                             "message_size": int(c.message_size), "run_id": run["run_id"]})
            rows.append({"vm": vm, "merit": "latency_us" if test == "latency"
                         else "bandwidth_gbs", "value": float(best["median"]),
                         "unit": best["unit"], "source": "measured here", "data": data,
                         "label": best["label"], "placement": placement, "nodes": on,
                         "message_size": int(best["message_size"]), "run_id": run["run_id"]})
    ref = read_reference(reference_dir, "osu.csv", ["vm", "latency_min_us", "latency_max_us",
                                                      "bandwidth_max_gbs"],
                         problems)
    for r in ref.itertuples():
        for merit, value, unit in (("latency_us", r.latency_min_us, "us"),
                                   ("bandwidth_gbs", r.bandwidth_max_gbs, "GB/s")):
            if pd.notna(value):
                rows.append({"vm": r.vm, "merit": merit, "value": float(value), "unit": unit,
                             "source": "the study", "data": "data/reference/osu.csv",
                             "label": "", "placement": "across-nodes", "message_size": pd.NA,
                             "run_id": "", "latency_high_us": float(r.latency_max_us)
                             if merit == "latency_us" and pd.notna(r.latency_max_us)
                             else pd.NA})
    return Merits(frame(rows), loaded.runs, problems)
