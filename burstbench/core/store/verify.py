"""Verifying a run: its files against the manifest written when they were folded (or, for
runs from before manifests, against what the files show), and the configurations it holds
against those it planned."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from burstbench.core.store.files import StoreError, file_facts
from burstbench.core.store.run import Run
from burstbench.core.store.tables import read_table


@dataclass
class Check:
    """What :func:`verify` found for one benchmark of a run.

    ``damage``: files missing, shorter or changed since they were written, or fewer
    configurations than the run says it measured (refused by ``collect``, drawn as
    "incomplete: ..." by the report).  ``incomplete``: an honest gap the provenance
    records itself (interrupted, failed configurations, not yet folded).  ``verified``:
    the files match their manifest; False for runs written before manifests.
    """

    benchmark: str
    damage: list[str] = field(default_factory=list)
    incomplete: str = ""
    verified: bool = False

    @property
    def label(self) -> str:
        """How a figure's caption names the run's state."""
        if self.damage:
            return "incomplete: " + "; ".join(self.damage)
        if self.incomplete:
            return "incomplete: " + self.incomplete
        return ("complete" if self.verified
                else "complete, from before manifests: not checksummed")


def verify(run: Run, benchmark: str, prov: dict | None = None) -> Check:
    """Check a benchmark's files against the run's manifest and provenance.

    With a manifest: each file must exist with the recorded size and SHA-256.
    Without one (runs written before manifests): the table must be readable, end with
    a whole row and hold no row without a value.  Either way a run that says it
    finished must hold every configuration it planned, less those recorded as failed.
    """
    prov = run.provenance() if prov is None else prov
    sec = prov.get("benchmarks", {}).get(benchmark, {})
    check = Check(benchmark)
    status = sec.get("status", "unknown")
    planned, failed = sec.get("planned"), len(sec.get("failures", []))
    table_path = run.table_path(benchmark)
    parts = sorted(run.parts_dir(benchmark).glob("*.json"))
    manifest = sec.get("manifest")
    configurations: int | None = None
    if manifest:
        for name, want in manifest.items():
            path = run.root / name
            if not path.exists():
                check.damage.append(f"{name} is missing (the manifest records {want['bytes']} "
                                    "bytes)")
                continue
            got = path.stat().st_size
            if got < want["bytes"]:
                check.damage.append(f"{name} is shorter than written ({got} of "
                                    f"{want['bytes']} bytes)")
            elif file_facts(path)["sha256"] != want["sha256"]:
                check.damage.append(f"{name} changed since it was written (SHA-256 differs "
                                    "from the manifest)")
        configurations = manifest.get(table_path.name, {}).get("configurations")
        check.verified = not check.damage
    elif table_path.exists():
        if prov.get("store_version", 1) >= 2 and not parts:
            check.damage.append(f"{table_path.name} has no manifest (its fold was interrupted:"
                                " resume the run to complete it)")
        raw = table_path.read_bytes()
        cut = bool(raw) and not raw.endswith(b"\n")
        if cut:
            check.damage.append(f"{table_path.name} ends in the middle of a row (truncated)")
        try:
            table = read_table(table_path)
        except StoreError as exc:
            check.damage.append(str(exc).replace(f"{table_path}: ", f"{table_path.name}: "))
        else:
            holes = int(table[["key", "value"]].isna().any(axis=1).sum()) - cut
            if holes > 0:
                check.damage.append(f"{table_path.name} has {holes} row(s) without a key "
                                    "or value")
            configurations = int(table["key"].nunique())
    elif status == "complete":
        check.damage.append(f"{table_path.name} is missing (the provenance says complete)")
    want = planned - failed if isinstance(planned, int) else None
    if status == "complete" and want is not None and configurations is not None \
            and configurations < want and not parts:
        check.damage.append(f"{table_path.name} holds {configurations} of the {want} "
                            "configurations measured")
    if status != "complete" or parts:
        stored = len(run.done_keys(benchmark)) if not check.damage else configurations
        of = f" of {planned}" if isinstance(planned, int) else ""
        why = status if status != "complete" else "not folded"
        check.incomplete = f"{why}, {stored}{of} configurations stored" + \
            (f", {failed} failed" if failed else "")
    return check


def validate_run(folder: Path) -> list[str]:
    """What is wrong with a run folder ([] if nothing): readable provenance naming the run,
    and every benchmark's files as its manifest (or, before manifests, its provenance)
    says they should be (see :func:`verify`)."""
    run = Run(folder)
    try:
        prov = run.provenance()
    except StoreError as exc:
        return [str(exc)]
    if not prov:
        return [f"{folder}: no provenance.json"]
    issues = []
    if prov.get("run_id") not in (None, run.run_id):
        issues.append(f"{folder}: provenance names run {prov.get('run_id')}")
    for bench in prov.get("benchmarks", {}):
        issues += verify(run, bench, prov).damage
    return issues
