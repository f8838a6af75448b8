"""A BICCG solve's output as tidy rows, the spread of its repetitions, and the values it is
judged by (explore's headline, the cost model's solve times)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd

from burstbench.core import paths, runner, store
from burstbench.core.merits import Merits, frame
from burstbench.core.sweep import over_repetitions, typed
from kernels_ext.biccg import COPIED_BLOCKING

#: (JSON key, metric, unit) of each measured value.
METRICS = (("solve_s", "solve_time", "s"), ("setup_s", "setup_time", "s"),
           ("iterations", "iterations", "1"), ("relative_residual", "relative_residual", "1"),
           # per iteration, counted by the solver (busiest rank): what the time model prices
           ("halo_messages", "halo_messages", "1"), ("halo_bytes", "halo_bytes", "B"),
           ("reductions", "reductions", "1"), ("reduction_bytes", "reduction_bytes", "B"))


SPLIT = ("spmv", "precond", "dots", "halo", "vector")


#: (JSON key, metric) of what a process's later solves (biccg_solves) add, their median:
#: a job's later setups, on memory its process kept, and their solves.
LATER = (("setup_s", "later_setup_time"), ("solve_s", "later_solve_time"))


def parse(task: runner.Task, stdout: str, stderr: str) -> tuple[list[dict], list[dict], str]:
    """A process's JSON lines -> tidy rows: its first solve's (times, iterations, residual,
    time split), and where it solved again (biccg_solves) the median of its later solves'
    setups and solves (LATER)."""
    try:
        recs = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]
        rec = recs[0]
    except (ValueError, IndexError) as exc:
        raise runner.TaskFailed(f"no result from the solver ({exc})") from exc
    for r in recs:
        if not r.get("converged"):
            which = f" (solve {r['solve']})" if "solve" in r else ""
            raise runner.TaskFailed(f"not converged{which}: relative residual "
                                    f"{r.get('relative_residual')} after "
                                    f"{r.get('iterations')} iterations")
    extra = {"host": rec.get("host"), "size": rec.get("n"), "nnz": rec.get("nnz"),
             "timestamp": store.now_iso(),
             "blocking": rec.get("blocking"), "factor_precision": rec.get("factor_precision"),
             "copied_rows": rec.get("copied_rows")}
    rows = [task.config | extra | {"metric": metric, "value": rec[key], "unit": unit}
            for key, metric, unit in METRICS if key in rec]
    if rec.get("triad_beside_gbs"):  # the node's Triad just before and after the solve
        rows.append(task.config | extra | {"metric": "triad_beside",
                                           "value": statistics.fmean(rec["triad_beside_gbs"]),
                                           "unit": "GB/s"})
    for part, v in rec.get("per_iteration_s", {}).items():
        rows.append(task.config | extra | {"metric": f"per_iteration_{part}", "value": v,
                                           "unit": "s"})
    later = {metric: float(statistics.median(r[key] for r in recs[1:]))
             for key, metric in LATER} if len(recs) > 1 else {}
    rows += [task.config | extra | {"metric": metric, "value": v, "unit": "s"}
             for metric, v in later.items()]
    if rec.get("peak_rss_bytes"):
        rows.append(task.config | extra | {"metric": "peak_rss", "value": rec["peak_rss_bytes"],
                                           "unit": "B"})
    if later:
        rec["later_solves"] = recs[1:]
    rec["stderr"] = stderr.strip()[-2000:]
    summary = (f"{rec['iterations']} iterations, solve {rec['solve_s']:.3f} s, "
               f"setup {rec.get('setup_s', 0):.3f} s, residual {rec['relative_residual']:.2e}"
               + (f"; {len(recs) - 1} later solve(s), setup "
                  f"{later['later_setup_time']:.3f} s" if later else ""))
    return rows, [rec], summary


GROUP = ["vm", "run_id", "problem", "label", "impl", "nodes", "ranks", "threads", "metric",
         "unit"]
#: What names one configuration of one run: GROUP but the metric.
CONFIG = [c for c in GROUP if c not in ("metric", "unit")]


def spread(table: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max over repetitions per configuration and metric, with cores used."""
    if table.empty:
        return pd.DataFrame(columns=GROUP + ["cores", "median", "min", "max", "n"])
    out = over_repetitions(table, GROUP, ints=("nodes", "ranks", "threads"))
    out["cores"] = out["ranks"] * out["threads"]
    return out


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """Solve time (s) per problem, solver or layout and node count, in explore's common
    columns."""
    b = table[table["metric"] == "solve_time"]
    return b.assign(config=b["problem"].astype(str) + " " + b["label"].astype(str),
                    x_name="nodes", x=b["nodes"], quantity="solve time",
                    higher_is_better=False)


def beside_the_median_solve(table: pd.DataFrame) -> pd.DataFrame:
    """Per configuration (CONFIG) that measured a Triad beside its solves, the Triad beside
    its median solve, as `median` (the mean of the two middle ones' for an even count): what
    merits() puts in place of the Triads' median.  The solve time's median and the Triad's
    are each a repetition's, and on a VM whose bandwidth changes state between repetitions
    they can be two repetitions' in two states (20261129T185704Z-ebc1: solves of 80.1, 85.0
    and 65.7 s beside Triads of 46.9, 59.1 and 83.9 GB/s: the medians paired 80.1 s with
    59.1)."""
    reps = table[table["metric"].isin(["solve_time", "triad_beside"])]
    if reps.empty or not (reps["metric"] == "triad_beside").any():
        return pd.DataFrame(columns=[*CONFIG, "median"])
    wide = typed(reps, CONFIG, ("nodes", "ranks", "threads")).pivot_table(
        index=[*CONFIG, "repetition"], columns="metric", values="value").dropna().reset_index()
    rows = []
    for key, d in wide.groupby(CONFIG, sort=True):
        d = d.sort_values("solve_time")
        k = len(d)
        rows.append(dict(zip(CONFIG, key)) | {
            "median": float(d["triad_beside"].iloc[(k - 1) // 2: k // 2 + 1].mean())})
    return pd.DataFrame(rows)


#: metric -> merit: what the time model reads (burstbench.cost.burst).
MERITS = {"solve_time": "solve_time_s", "setup_time": "setup_time_s",
          "later_setup_time": "later_setup_time_s",
          "iterations": "iterations", "halo_messages": "halo_messages",
          "halo_bytes": "halo_bytes", "reductions": "reductions",
          "reduction_bytes": "reduction_bytes", "triad_beside": "triad_beside_gbs"}


#: The one build whose sweeps ran whole 4 x 4 x 2 tiles from copies before its records said
#: so (e586e11, fitted in run 20261201T095834Z-05cc): a later build records copied_rows,
#: an earlier one swept every block in the factor's row layout.
COPIES_UNRECORDED = frozenset({"830508582ea17bae"})


def merits(runs_dir: Path | str, reference_dir: Path | str) -> Merits:
    """``solve_time_s``, ``setup_time_s`` (a process's first), ``later_setup_time_s`` (its
    later solves', where it solved again), ``iterations`` and what an iteration sends
    (``halo_messages``, ``halo_bytes``, ``reductions``, ``reduction_bytes``: the solver's
    own counts, where the run recorded them) and ``triad_beside_gbs`` (the node's Triad
    measured by the solve's process just before and after it, their mean, where
    biccg_triad_beside asked for it): the medians of every run of each VM measured here
    (test runs never; ``newest`` marks each VM's store.merit_runs run), per problem
    (``size`` rows, ``nnz``, the factor's precision, ``swept_copies``: whether the sweeps
    ran whole tiles from copies), solver or layout (``label``) and
    node count, with the ranks, threads and cores used, and ``build``: the digest of the
    solver's C the run measured (its provenance's builds; empty where not recorded).  The
    study published curves, not numbers: nothing of it here."""
    from burstbench.benchmarks.biccg import COLUMNS

    loaded = store.load(Path(runs_dir), "biccg", False, COLUMNS)
    stats = spread(loaded.table)
    paired = beside_the_median_solve(loaded.table)
    if len(paired):  # the Triad beside the median solve, not the Triads' median
        at = stats["metric"] == "triad_beside"
        stats = pd.concat([stats[~at], stats[at].drop(columns="median").merge(
            paired, on=CONFIG, how="left")], ignore_index=True)
    chosen, notes = store.merit_runs(loaded, "biccg")
    newest = {r["run_id"] for r in chosen.values()}
    facts = loaded.table.groupby(["run_id", "problem"], sort=False).agg(
        size=("size", "max"), nnz=("nnz", "max"),
        factor=("factor_precision", lambda s: s.dropna().iloc[0] if s.notna().any()
                else "double"),  # runs from before it was recorded used a double factor
        copied=("copied_rows", lambda s: bool((s.fillna(0) > 0).any())),
        tiles=("blocking", lambda s: bool((s == COPIED_BLOCKING).any())))
    rows = []
    for run in sorted(loaded.runs, key=lambda r: r["run_id"]):
        s = stats[(stats["vm"] == run["vm"]) & (stats["run_id"] == run["run_id"])
                  & stats["metric"].isin(list(MERITS))]
        data = paths.rel_path(Path(run["path"]), paths.project_root())
        build = (run.get("builds") or {}).get("biccg", {}).get("source_digest", "")
        for r in s.itertuples():
            f = facts.loc[(r.run_id, r.problem)]
            rows.append({"vm": run["vm"], "merit": MERITS[r.metric], "value": float(r.median),
                         "unit": r.unit,
                         "source": "measured here", "data": data, "label": r.label,
                         "impl": r.impl, "problem": r.problem, "nodes": int(r.nodes),
                         "ranks": int(r.ranks), "threads": int(r.threads),
                         "cores": int(r.cores), "size": f["size"], "nnz": f["nnz"],
                         "factor": f["factor"],
                         "swept_copies": f["copied"] or (f["tiles"]
                                                         and build in COPIES_UNRECORDED),
                         "run_id": run["run_id"], "build": build,
                         "newest": run["run_id"] in newest})
    return Merits(frame(rows), loaded.runs, list(loaded.problems) + notes)
