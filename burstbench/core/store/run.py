"""Writing a run: its folder, its provenance, one part file per configuration measured,
and folding the parts into its tables.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from burstbench.core.store.files import StoreError, atomic_write, file_facts, new_run_id, now_iso
from burstbench.core.store.tables import ordered, read_table, table_columns, undeclared

#: 2: each benchmark's tables are recorded in a manifest when folded (runs without the
#: key were written before manifests and are checked by what their files show).
STORE_VERSION = 2


class Run:
    """One run folder."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.run_id = self.root.name
        self.vm = self.root.parent.name

    def __repr__(self) -> str:
        return f"Run({str(self.root)!r})"

    # -- provenance -------------------------------------------------------------------
    @property
    def provenance_path(self) -> Path:
        return self.root / "provenance.json"

    def provenance(self) -> dict:
        """provenance.json as a dict ({} when the run has none yet)."""
        try:
            return json.loads(self.provenance_path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise StoreError(f"{self.provenance_path}: damaged provenance ({exc})") from exc

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def update_provenance(self, change: Callable[[dict], None]) -> dict:
        """Read, change and atomically rewrite provenance.json under a lock."""
        with self._lock():
            prov = self.provenance()
            change(prov)
            atomic_write(self.provenance_path, json.dumps(prov, indent=1, default=str) + "\n")
            return prov

    def section(self, benchmark: str) -> dict:
        return self.provenance().get("benchmarks", {}).get(benchmark, {})

    def set_section(self, benchmark: str, **values: Any) -> None:
        """Merge `values` into provenance['benchmarks'][benchmark]."""
        self.update_provenance(
            lambda p: p.setdefault("benchmarks", {}).setdefault(benchmark, {}).update(values))

    # -- results ----------------------------------------------------------------------
    def parts_dir(self, benchmark: str) -> Path:
        return self.root / f"{benchmark}.parts"

    def table_path(self, benchmark: str) -> Path:
        return self.root / f"{benchmark}.csv"

    def raw_path(self, benchmark: str) -> Path:
        return self.root / f"{benchmark}.jsonl"

    def done_keys(self, benchmark: str) -> set[str]:
        """Keys of configurations already stored, in the table or as parts."""
        keys = {p.stem for p in self.parts_dir(benchmark).glob("*.json")}
        if self.table_path(benchmark).exists():
            keys |= set(pd.read_csv(self.table_path(benchmark), usecols=["key"])["key"].astype(str))
        return keys

    def save(self, benchmark: str, key: str, rows: list[dict], raw: list[dict],
             columns: tuple[str, ...] | list[str]) -> None:
        """Store one measured configuration at once (one atomic file).

        Every key of `rows` must be a column of the table (table_columns(`columns`)):
        one that is not is refused here, by name, before anything is written, so that a
        sweep stops at its first configuration instead of losing that column in every
        row it stores.
        """
        extra = undeclared(rows, columns)
        if extra:
            raise StoreError(f"{benchmark}: the rows hold column(s) {', '.join(extra)} that "
                             f"the benchmark does not declare (add them to its columns)")
        d = self.parts_dir(benchmark)
        d.mkdir(parents=True, exist_ok=True)
        atomic_write(d / f"{key}.json", json.dumps({"key": key, "rows": rows, "raw": raw},
                                                   default=str))

    def _read_parts(self, benchmark: str, problems: list[str],
                    skip: frozenset[str] = frozenset()) -> tuple[list[dict], list[dict]]:
        rows, raw = [], []
        for p in sorted(self.parts_dir(benchmark).glob("*.json")):
            if p.stem in skip:
                continue
            try:
                part = json.loads(p.read_text())
                rows += part["rows"]
                raw += part["raw"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                problems.append(f"{p}: damaged part file skipped ({exc})")
        return rows, raw

    def finalize(self, benchmark: str, columns: tuple[str, ...] | list[str] = ()
                 ) -> pd.DataFrame:
        """Fold stored parts into <benchmark>.csv and .jsonl (atomically); return the table,
        with the columns table_columns(`columns`) in that order, then any others the
        parts or an earlier table hold (none is dropped).

        Safe to repeat after a kill at any point: parts whose key the table already
        holds (folded just before the kill, not yet deleted) are not added twice, and
        the raw records are written before the table, so a kill loses none of them.
        """
        problems: list[str] = []
        cols = table_columns(columns)
        old = read_table(self.table_path(benchmark), columns) \
            if self.table_path(benchmark).exists() else pd.DataFrame(columns=cols)
        folded = frozenset(old["key"].astype(str)) if len(old) else frozenset()
        rows, raw = self._read_parts(benchmark, problems, skip=folded)
        if problems:
            raise StoreError("; ".join(problems))
        table = ordered(pd.concat([t for t in (old, pd.DataFrame(rows)) if len(t)],
                                  ignore_index=True) if len(old) or rows
                        else pd.DataFrame(columns=cols), columns)
        old_raw = self.raw_path(benchmark).read_text() if self.raw_path(benchmark).exists() else ""
        atomic_write(self.raw_path(benchmark),
                     old_raw + "".join(json.dumps(r, default=str) + "\n" for r in raw))
        atomic_write(self.table_path(benchmark), table.to_csv(index=False))
        manifest = {self.table_path(benchmark).name: file_facts(self.table_path(benchmark))
                    | {"configurations": int(table["key"].nunique()) if len(table) else 0},
                    self.raw_path(benchmark).name: file_facts(self.raw_path(benchmark))}
        self.set_section(benchmark, manifest=manifest)
        for p in self.parts_dir(benchmark).glob("*.json"):  # now held by the tables
            p.unlink()
        with contextlib.suppress(OSError):
            self.parts_dir(benchmark).rmdir()
        return table


def find_resumable(runs_dir: Path, vm: str, benchmark: str, digest: str) -> str:
    """The newest run of `vm` whose `benchmark` sweep has this parameter digest and did not
    finish, or ''."""
    return find_resumable_many(runs_dir, vm, {benchmark: digest})


def find_resumable_many(runs_dir: Path, vm: str, digests: dict[str, str]) -> str:
    """The newest run of `vm` that these sweeps can continue, or ''.

    Every benchmark in `digests` that the run holds must have the same
    parameters, and at least one of them must be there unfinished (pending,
    running, interrupted or incomplete).  A finished run is never extended
    with a benchmark it did not plan: that starts a new run.
    """
    for cand in sorted((Path(runs_dir) / vm).glob("*"), reverse=True):
        if not (cand / "provenance.json").exists():
            continue
        try:
            secs = Run(cand).provenance().get("benchmarks", {})
        except StoreError:
            continue
        held = [b for b in digests if b in secs]
        if not held or any(secs[b].get("params_digest") != digests[b] for b in held):
            continue
        if any(secs[b].get("status") != "complete" for b in held):
            return cand.name
    return ""


def _create(folder: Path, vm: str, system: Callable[[], dict] | None) -> Run:
    """The run folder, made and writable, with provenance written if it has none yet."""
    run = Run(folder)
    try:
        run.root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create run folder {run.root}: {exc.strerror}") from exc
    if not os.access(run.root, os.W_OK):
        raise StoreError(f"run folder {run.root} is not writable")
    if not run.provenance_path.exists():
        info = system() if system else {}
        run.update_provenance(lambda p: p.update(
            {"run_id": run.run_id, "vm": vm, "created": now_iso(), "store_version": STORE_VERSION,
             **info, "benchmarks": {}}))
    return run


def plan_run(runs_dir: Path, vm: str, run_id: str, planned: dict[str, tuple[str, dict]],
             system: Callable[[], dict] | None = None) -> Run:
    """Create (or reopen) a run and mark each planned benchmark pending, with its digest.

    Marking them first lets an interrupted multi-notebook run resume even
    when it died before a later notebook started.
    """
    run = _create(Path(runs_dir) / vm / run_id, vm, system)

    def mark(p: dict) -> None:
        secs = p.setdefault("benchmarks", {})
        for name, (digest, params) in planned.items():
            secs.setdefault(name, {"status": "pending", "params_digest": digest,
                                   "params": params})

    run.update_provenance(mark)
    return run


def open_run(runs_dir: Path, vm: str, benchmark: str, params: dict, digest: str,
             run_id: str = "", system: Callable[[], dict] | None = None) -> tuple[Run, bool]:
    """Open the run a sweep writes to; return (run, resumed).

    With `run_id` given, that run (created if new).  Without, the newest run
    of this VM whose `benchmark` section has the same parameter digest and did
    not finish, else a new one.  `system` supplies the provenance of a new run.
    """
    base = Path(runs_dir) / vm
    run_id = run_id or find_resumable(runs_dir, vm, benchmark, digest)
    run = _create(base / (run_id or new_run_id()), vm, system)
    prior = run.section(benchmark)
    # planned by `burstbench run` (pending) is new; started before, or with stored parts, resumed
    resumed = prior.get("status", "pending") != "pending" or bool(run.done_keys(benchmark))
    if prior.get("params_digest") not in (None, digest):
        raise StoreError(f"run {run.root} measured {benchmark} with other parameters "
                         f"(digest {prior['params_digest']} != {digest}): choose a new run_id")
    run.set_section(benchmark, params=params, params_digest=digest, status="running",
                    started=prior.get("started", now_iso()), host=socket.gethostname())
    return run, resumed
