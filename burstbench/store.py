"""The results store: one folder per run, tidy tables, atomic writes, loading many runs.

Layout of a run (``data/runs/<vm>/<run-id>/``)::

    provenance.json          machine, software, git, and one section per benchmark
                             (parameters, variants, start/end, status, failures, and
                             the manifest of its files: bytes, SHA-256, rows)
    <benchmark>.csv          the tidy table: one row per measured value
    <benchmark>.jsonl        the raw records the kernels printed (binding included)
    <benchmark>.parts/       while a sweep runs: one file per measured configuration
    0xx_<notebook>.ipynb     the executed notebook (when run by ``burstbench run``)

Every file is written whole to a temporary name and renamed into place, so a
crash leaves either the old file or the new one, never half of one.  A sweep
stores each configuration as soon as it is measured (a part file); a re-run
skips what is stored; ``finalize`` folds the parts into the tables and records
their manifest, which :func:`verify` checks before anything reads them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import secrets
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

#: Columns every results table has, whatever the benchmark: first the run and what ran,
#: last the measured value and its bookkeeping.  Between them come the configuration
#: columns the benchmark declares (its Benchmark.columns): see table_columns().
HEAD = ["run_id", "vm", "host", "benchmark", "label", "impl"]
TAIL = ["metric", "value", "unit", "repetition", "key", "timestamp"]
REQUIRED = ["run_id", "vm", "benchmark", "label", "metric", "value", "unit", "key"]


def table_columns(declared: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The columns of a benchmark's table: HEAD, its `declared` configuration columns, TAIL."""
    return list(dict.fromkeys([*HEAD, *declared, *TAIL]))


def undeclared(rows: list[dict], declared: tuple[str, ...] | list[str]) -> list[str]:
    """Keys of `rows` that are no column of the table (sorted)."""
    allowed = set(table_columns(declared))
    return sorted({k for r in rows for k in r} - allowed)
#: 2: each benchmark's tables are recorded in a manifest when folded (runs without the
#: key were written before manifests and are checked by what their files show).
STORE_VERSION = 2


class StoreError(Exception):
    """A run folder cannot be used; one line naming it."""


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write `data` to `path` so that readers see the old or the new file, never a part."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    raw = data.encode() if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    with contextlib.suppress(OSError):  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    """``20261123T001131Z-1a2b``: UTC start time, sortable, plus a few random hex digits."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


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


def ordered(df: pd.DataFrame, columns: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """`df` with every column of table_columns(`columns`) (missing ones empty), in that
    order, then the others it holds."""
    cols = table_columns(columns)
    for c in cols:
        if c not in df.columns:
            df[c] = pd.NA
    return df[cols + [c for c in df.columns if c not in cols]]


def read_table(path: Path, columns: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """A results CSV, as ordered() with `columns`; StoreError when it is not one."""
    try:
        df = pd.read_csv(path, dtype={"key": str, "run_id": str, "vm": str, "label": str})
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise StoreError(f"{path}: unreadable table ({str(exc).splitlines()[0]})") from exc
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise StoreError(f"{path}: not a results table (missing columns {', '.join(missing)})")
    if len(df) and not pd.api.types.is_numeric_dtype(df["value"]):
        raise StoreError(f"{path}: column 'value' holds non-numbers")
    return ordered(df, columns)


def file_facts(path: Path) -> dict:
    """What a manifest records of a file: its size, SHA-256 and number of data rows (lines,
    less a CSV's header)."""
    raw = Path(path).read_bytes()
    lines = raw.count(b"\n") + (1 if raw and not raw.endswith(b"\n") else 0)
    return {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest(),
            "rows": lines - 1 if Path(path).suffix == ".csv" and lines else lines}


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


def include_test_runs() -> bool:
    """Whether the report draws test runs (labelled as such): `burstbench report
    --include-test-runs` sets BURSTBENCH_INCLUDE_TEST_RUNS=1 for its notebooks."""
    return os.environ.get("BURSTBENCH_INCLUDE_TEST_RUNS", "") == "1"


def load(runs_dir: Path, benchmark: str, include_tests: bool | None = None,
         columns: tuple[str, ...] | list[str] = ()) -> Loaded:
    """Load every run's `benchmark` table (finished or not) into one DataFrame, with the
    columns table_columns(`columns`) first (empty where a run lacks one) and every other
    column any run holds after them.

    Nothing is skipped silently: an unreadable provenance, table or part file, a
    file that does not match the run's manifest, a run that holds fewer
    configurations than planned and a test run left out (`test: true` in its
    params; drawn only with `include_tests`, default include_test_runs()) are
    reported by name in ``problems``, and each run's ``status`` says how complete
    it is ("complete", or "incomplete: why").
    """
    include_tests = include_test_runs() if include_tests is None else include_tests
    frames, runs, problems = [], [], []
    for prov_path in sorted(Path(runs_dir).glob("*/*/provenance.json")):
        run = Run(prov_path.parent)
        try:
            prov = run.provenance()
        except StoreError as exc:
            problems.append(str(exc))
            continue
        sec = prov.get("benchmarks", {}).get(benchmark)
        if sec is None:
            continue
        test = is_test_run(prov)
        if test and not include_tests:
            problems.append(f"{run.root}: a test run (its params say `test: true`), not a VM "
                            f"measurement: {benchmark} not drawn")
            continue
        check = verify(run, benchmark, prov)
        problems += [f"{run.root}: {d}" for d in check.damage]
        part_problems: list[str] = []
        rows, _ = run._read_parts(benchmark, part_problems)
        problems += part_problems
        table = None
        if run.table_path(benchmark).exists():
            try:
                table = read_table(run.table_path(benchmark), columns)
            except StoreError as exc:
                problems.append(str(exc))
                continue
        parts = ordered(pd.DataFrame(rows), columns) if rows else None
        got = [t for t in (table, parts) if t is not None and len(t)]
        if rows:
            problems.append(f"{run.root}: {benchmark} was not finalized (interrupted?); "
                            f"{len(rows)} stored values used")
        if not got:
            continue
        frame = pd.concat(got, ignore_index=True)
        frames.append(frame[frame["key"].notna() & frame["value"].notna()])
        runs.append({"vm": run.vm, "run_id": run.run_id, "path": str(run.root),
                     "status": check.label + (" (a test run, not a VM)" if test else ""),
                     "verified": check.verified, "damage": check.damage, "test": test,
                     "started": sec.get("started"), "finished": sec.get("finished"),
                     "params": sec.get("params", {}),
                     "host": prov.get("system", {}).get("hostname", "")})
    table = ordered(pd.concat(frames, ignore_index=True), columns) if frames \
        else pd.DataFrame(columns=table_columns(columns))
    return Loaded(table, runs, problems)


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
    import shutil

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
