"""Bringing runs back: run folders from VMs and clusters, checked, copied whole into the runs
folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from burstbench.core.store.run import Run
from burstbench.core.store.verify import validate_run, verify


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
    damaged run is refused by name and nothing half-copied is left.
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
            issues = validate_run(run_dir)
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
            shutil.copytree(run_dir, tmp, ignore=shutil.ignore_patterns(".lock"))
            os.rename(tmp, dest)
            run = Run(dest)
            gaps = [f"{b} {c.incomplete}" for b in prov.get("benchmarks", {})
                    if (c := verify(run, b, prov)).incomplete]
            added.append(f"{vm}/{run_dir.name}" + (f" (incomplete: {'; '.join(gaps)})"
                                                   if gaps else ""))
    return added, dupes, refused
