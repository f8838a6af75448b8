"""Bringing runs back: run folders from VMs and clusters, checked, copied whole into the runs
folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from burstbench.core import locks
from burstbench.core.store.files import StoreError
from burstbench.core.store.run import Run
from burstbench.core.store.verify import validate_run, verify

#: Statuses a sweep writes once it folded its parts into its tables.
FINALIZED = ("complete", "incomplete", "interrupted", "stopped at budget")


def find_runs(folder: Path) -> list[Path]:
    """Run folders at or below `folder` (a run folder holds provenance.json)."""
    folder = Path(folder)
    if (folder / "provenance.json").exists():
        return [folder]
    return sorted(p.parent for p in folder.rglob("provenance.json"))


def collect(sources: list[Path], runs_dir: Path) -> tuple[list[str], list[str], list[str]]:
    """Merge run folders brought back from VMs into `runs_dir`/<vm>/<run-id>/.

    Returns (added, skipped duplicates, refused with why).  Each run is
    validated first and copied whole to a temporary name, then renamed: a
    damaged run is refused by name and nothing half-copied is left, and so is a run
    still being written or written after it was finalized (see untrusted).
    """
    added, dupes, refused = [], [], []
    for src in sources:
        if not Path(src).exists():
            refused.append(f"{src}: no such folder")
            continue
        found = find_runs(Path(src))
        if not found:
            refused.append(f"{src}: holds no run folder (no provenance.json)")
        for run_dir in found:
            issues = untrusted(run_dir) or validate_run(run_dir)
            if issues:
                refused.append(f"{run_dir}: " + "; ".join(issues))
                continue
            prov = Run(run_dir).provenance()
            vm = prov.get("vm") or run_dir.parent.name
            dest = Path(runs_dir) / vm / run_dir.name
            if dest.exists():
                dupes.append(f"{vm}/{run_dir.name}")
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.collecting")
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(run_dir, tmp, ignore=shutil.ignore_patterns(
                ".lock", locks.RUN_LOCK, locks.RUN_LOCK + ".mutex"))
            os.rename(tmp, dest)
            run = Run(dest)
            gaps = [f"{b} {c.incomplete}" for b in prov.get("benchmarks", {})
                    if (c := verify(run, b, prov)).incomplete]
            added.append(f"{vm}/{run_dir.name}" + (f" (incomplete: {'; '.join(gaps)})"
                                                   if gaps else ""))
    return added, dupes, refused


def untrusted(run_dir: Path) -> list[str]:
    """Why a run cannot be trusted as it is ([] if nothing): its writer's lock is still held
    (or held from another host, which cannot be judged from here), or a benchmark finalized
    (its table written, its status final) has part files newer than its table: a second
    writer went on measuring into it."""
    holder = locks.read(run_dir / locks.RUN_LOCK)
    if holder is not None:
        state, why = locks.judge(holder)
        if state == "alive":
            return [f"its writer's lock is held by {why}: the run may still be written; "
                    "collect it once that sweep has ended"]
        if state == "foreign":  # not to be judged from here
            return [f"its writer's lock is held by {why}, another host: the run may still "
                    f"be written there; collect it once that sweep has ended (or remove "
                    f"{run_dir / locks.RUN_LOCK} if it died)"]
    run, issues = Run(run_dir), []
    try:
        sections = run.provenance().get("benchmarks", {})
    except StoreError:
        return []  # validate_run names it
    for bench, sec in sections.items():
        table = run.table_path(bench)
        if sec.get("status") not in FINALIZED or not sec.get("folded", True) \
                or not table.exists():  # a run stopped unfolded keeps its parts: resumable
            continue
        newer = [p.name for p in run.parts_dir(bench).glob("*.json")
                 if p.stat().st_mtime > table.stat().st_mtime]
        if newer:
            issues.append(f"{bench}.parts/ holds {len(newer)} part file(s) newer than "
                          f"{table.name}, written after the run was finalized as "
                          f"{sec['status']} (a second writer?)")
    return issues
