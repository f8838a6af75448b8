"""Loading many runs: every run's table of a benchmark as one DataFrame, with each run's
state, and nothing skipped without saying so."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from burstbench.core import paths
from burstbench.core.contention import CONTENDED_SHARE
from burstbench.core.store.files import StoreError
from burstbench.core.store.run import Run
from burstbench.core.store.tables import ordered, read_table, table_columns
from burstbench.core.store.verify import verify


@dataclass
class Loaded:
    """Everything under a runs folder: the tables, the runs and what could not be read."""

    table: pd.DataFrame
    runs: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def is_test_run(prov: dict) -> bool:
    """True when the run was measured with a params file marked `test: true` (smoke.yaml)."""
    return any(bool(sec.get("params", {}).get("test"))
               for sec in prov.get("benchmarks", {}).values())


def _named(message: str, run: Run, where: str) -> str:
    """A store error's message naming its run `where` (as captions do), not by its absolute
    path."""
    return message.replace(str(run.root), where, 1)


def load(runs_dir: Path, benchmark: str, include_tests: bool = False,
         columns: tuple[str, ...] | list[str] = ()) -> Loaded:
    """Load every run's `benchmark` table (finished or not) into one DataFrame, with the
    columns table_columns(`columns`) first (empty where a run lacks one) and every other
    column any run holds after them.

    Nothing is skipped silently: an unreadable provenance, table or part file, a
    file that does not match the run's manifest, a run that holds fewer
    configurations than planned and a test run left out (`test: true` in its
    params; drawn only with `include_tests`) are
    reported by name in ``problems``, and each run's ``status`` says how complete
    it is ("complete", or "incomplete: why"); a run with configurations measured while
    other processes took the cores (``contended``) is named there with how many.
    """
    frames, runs, problems = [], [], []
    for prov_path in sorted(Path(runs_dir).glob("*/*/provenance.json")):
        run = Run(prov_path.parent)
        where = paths.rel_path(run.root, paths.project_root())  # as captions name runs
        try:
            prov = run.provenance()
        except StoreError as exc:
            problems.append(_named(str(exc), run, where))
            continue
        sec = prov.get("benchmarks", {}).get(benchmark)
        if sec is None:
            continue
        test = is_test_run(prov)
        if test and not include_tests:
            problems.append(f"{where}: a test run (its params say `test: true`), not a VM "
                            f"measurement: {benchmark} not drawn")
            continue
        check = verify(run, benchmark, prov)
        problems += [f"{where}: {d}" for d in check.damage]
        if sec.get("status") == "stopped at budget":  # burstbench.core.budget.STATUS
            problems.append(f"{where}: {benchmark} stopped at its budget with "
                            f"{sec.get('left', '?')} configurations left: a partial sweep, "
                            "not this VM's best (resume it with the same --budget command)")
        part_problems: list[str] = []
        rows, _ = run._read_parts(benchmark, part_problems)
        problems += [_named(p, run, where) for p in part_problems]
        table = None
        if run.table_path(benchmark).exists():
            try:
                table = read_table(run.table_path(benchmark), columns)
            except StoreError as exc:
                problems.append(_named(str(exc), run, where))
                continue
        parts = ordered(pd.DataFrame(rows), columns) if rows else None
        got = [t for t in (table, parts) if t is not None and len(t)]
        if rows:
            problems.append(f"{where}: {benchmark} was not finalized (interrupted?); "
                            f"{len(rows)} stored values used")
        if not got:
            if sec.get("status") == "pending":  # planned, never started: nothing to draw
                problems.append(f"{where}: {benchmark} planned but not started (the run "
                                "has not reached it, or its budget ended or it stopped "
                                "first): nothing measured; measure it with the run's command "
                                f"and --run-id {run.run_id}")
            continue
        frame = pd.concat(got, ignore_index=True)
        frames.append(frame[frame["key"].notna() & frame["value"].notna()])
        busy = contended(frame)
        if busy:
            problems.append(f"{where}: {benchmark}: {busy} of {frame['key'].nunique()} "
                            f"configurations contended (other processes took more than "
                            f"{CONTENDED_SHARE:.0%} of the machine's CPU while they ran): "
                            "not this VM's best without a second run")
        runs.append({"vm": run.vm, "run_id": run.run_id, "path": str(run.root),
                     "status": check.label + (" (a test run, not a VM)" if test else ""),
                     "verified": check.verified, "damage": check.damage, "test": test,
                     "started": sec.get("started"), "finished": sec.get("finished"),
                     "params": sec.get("params", {}), "contended": busy,
                     "host": prov.get("system", {}).get("hostname", ""),
                     "builds": prov.get("builds", {})} | cpu_of(prov))
    table = ordered(pd.concat(frames, ignore_index=True), columns) if frames \
        else pd.DataFrame(columns=table_columns(columns))
    return Loaded(table, runs, problems)


def cpu_of(prov: dict) -> dict:
    """The machine a run measured, as its provenance names it: ``cpu`` (the CPU's model)
    and ``llc_bytes`` (its last-level cache, all instances; 0 where not recorded)."""
    cpu = prov.get("system", {}).get("cpu", {})
    return {"cpu": str(cpu.get("model") or ""),
            "llc_bytes": int(cpu.get("last_level_cache_bytes") or 0)}


def contended(table: pd.DataFrame) -> int:
    """How many configurations of `table` were flagged contended (0 for runs from before the
    flag)."""
    if "contended" not in table or table.empty:
        return 0
    flagged = table["contended"].astype(str).str.lower() == "true"
    return int(table.loc[flagged, "key"].nunique())


def latest_runs(loaded: Loaded) -> dict[str, dict]:
    """Per VM, the newest run with data (run ids sort by start time)."""
    latest: dict[str, dict] = {}
    for r in sorted(loaded.runs, key=lambda r: r["run_id"]):
        latest[r["vm"]] = r
    return latest


def merit_runs(loaded: Loaded, benchmark: str) -> tuple[dict[str, dict], list[str]]:
    """Per VM, the run its figures of merit come from: the newest complete one, else the
    newest (a sweep stopped at its budget, interrupted or damaged never stands for a VM
    that has a complete one), and a note for each newer run passed over."""
    newest = latest_runs(loaded)
    whole = latest_runs(Loaded(loaded.table, [r for r in loaded.runs
                                              if r["status"].startswith("complete")]))
    chosen = newest | whole
    notes = [f"{vm}: {benchmark}'s figures of merit (cost, burst decision) come from its "
             f"newest complete run {chosen[vm]['run_id']}, not from {run['run_id']} "
             f"({run['status']})" for vm, run in newest.items() if run is not chosen[vm]]
    return chosen, notes
