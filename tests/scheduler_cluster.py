"""What the Slurm and PBS clusters of the tests share: one pattern, two schedulers.

Each cluster class (tests/slurm_cluster.py, tests/pbs_cluster.py) has ``start()``,
which raises :class:`ClusterError` saying which daemon failed and why, and
``stop()``, which leaves nothing running whatever happened.  :func:`session`
turns one into a fixture's value: skipped with the reason where it cannot run
here, a failure instead where the REQUIRE variable (set by .ci/run) says the
scheduler must run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, TypeVar

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


class ClusterError(RuntimeError):
    """The cluster could not be started; the message says which daemon and why."""


class Cluster(Protocol):
    """A scheduler's cluster on this host."""

    def start(self) -> object: ...
    def stop(self) -> None: ...


C = TypeVar("C", bound=Cluster)


def session(cluster: C, what: str, require_var: str, why_not: str = "") -> Iterator[C]:
    """A fixture's body: start `cluster`, yield it, stop it.

    `why_not` (a missing program, say) skips at once; a cluster that does not start is
    skipped with its error, or fails the tests where `require_var` is "1".
    """
    if why_not:
        pytest.skip(f"{what} cannot run here: {why_not}")
    try:
        cluster.start()
    except (ClusterError, OSError) as exc:
        cluster.stop()
        if os.environ.get(require_var) == "1":
            pytest.fail(f"the {what} cluster did not start: {exc}")
        pytest.skip(f"the {what} cluster did not start here: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


def wait_until(ready: Callable[[], bool], timeout: float, what: str,
               failed: Callable[[], str] = lambda: "", step: float = 0.3) -> None:
    """Poll `ready` until true; ClusterError when `failed` says why (a daemon died) or after
    `timeout` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        why = failed()
        if why:
            raise ClusterError(why)
        try:
            if ready():
                return
        except Exception:  # noqa: BLE001 (a client that cannot connect yet: try again)
            pass
        time.sleep(step)
    raise ClusterError(f"{what} not ready within {timeout:g} s")


def wait_job(job: Callable[[str], dict], jobid: str, key: str, states: tuple[str, ...],
             timeout: float, why: str) -> dict:
    """Poll `job(jobid)` (the scheduler's record of it) until its `key` is one of `states`;
    the record then.  ClusterError after `timeout` s names the state and the record's `why`."""
    end = time.monotonic() + timeout
    info: dict = {}
    slow: subprocess.TimeoutExpired | None = None
    while time.monotonic() < end:
        try:
            info = job(jobid)
            slow = None
        except subprocess.TimeoutExpired as exc:  # its client slow (a loaded host): again
            slow = exc
            continue
        if info.get(key) in states:
            return info
        time.sleep(0.5)
    raise ClusterError(f"job {jobid} still {info.get(key)} ({why} {info.get(why)}) "
                       f"after {timeout:g} s" + (f"; the last query timed out: {slow}"
                                                 if slow else ""))


def wait_jobs_gone(queued: Callable[[], bool], pids: Callable[[], list[int]],
                   timeout: float) -> None:
    """After deleting every job: wait until the scheduler has none `queued` (or running) and
    `pids` (its jobs' processes) is empty; ClusterError naming those still there after
    `timeout` s, killed first, so that the next test starts with none."""
    end = time.monotonic() + timeout
    while (queued() or pids()) and time.monotonic() < end:
        time.sleep(0.3)
    left = pids()
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if left:
        raise ClusterError(f"processes of deleted jobs still there after {timeout:g} s "
                           f"(killed): {left}")


def ancestors() -> set[int]:
    """This process and its parents: never ours to kill."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            pid = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def pids_mentioning(text: str) -> list[int]:
    """Processes whose command line or environment mentions `text` (not this one's ancestry)."""
    out, mine = [], ancestors()
    for d in Path("/proc").glob("[0-9]*"):
        try:
            blob = (d / "cmdline").read_bytes() + b"\0" + (d / "environ").read_bytes()
        except OSError:
            continue
        if text.encode() in blob and int(d.name) not in mine:
            out.append(int(d.name))
    return out


def job_processes(*marks: str) -> list[str]:
    """Command lines of processes whose environment holds every one of `marks`
    (``VAR=value``): a job's.  A job id alone names no job on a host where several clusters
    run (each numbers its jobs from 1: another test worker's, say): name its cluster too."""
    keys = [b"\0" + f"{mark}\0".encode() for mark in marks]
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            env = b"\0" + (d / "environ").read_bytes()
            if all(key in env for key in keys):
                out.append((d / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return out


# -- run folders written by a job: what both schedulers' tests check ---------------------------

# smoke.yaml, one store policy: these tests are about the scheduler, and the smoke run of
# tests/test_notebooks.py measures both policies already
SMOKE = yaml.safe_load((ROOT / "papermill_params" / "smoke.yaml").read_text()) | {
    "triad_stores": ["normal"]}


def params_file(folder: Path, name: str, values: dict, base: dict | None = None) -> Path:
    f = folder / f"{name}.yaml"
    f.write_text(yaml.safe_dump((SMOKE if base is None else base) | values))
    return f


def the_run(runs: Path, vm: str) -> Path:
    folders = [d for d in (runs / vm).iterdir() if d.is_dir()]
    assert len(folders) == 1, folders
    return folders[0]


def statuses(run_dir: Path) -> dict[str, str]:
    prov = json.loads((run_dir / "provenance.json").read_text())
    return {k: v.get("status") for k, v in prov["benchmarks"].items()}


def stored_once(run_dir: Path, benchmark: str) -> pd.DataFrame:
    """The benchmark's table, checked: every planned configuration, none twice."""
    prov = json.loads((run_dir / "provenance.json").read_text())
    table = pd.read_csv(run_dir / f"{benchmark}.csv")
    assert table["key"].nunique() == prov["benchmarks"][benchmark]["planned"]
    # a Triad process measures several configurations: its label and threads tell them apart
    ident = [c for c in ("key", "label", "threads", "metric", "function", "message_size",
                         "operation", "iteration") if c in table]
    assert not table.duplicated(ident).any(), table[table.duplicated(ident, keep=False)]
    return table


#: A Triad sweep no machine finishes within minutes (800 configurations of 100 passes over
#: 3 x 32 MB: about 2 s each here, still 0.2 s on a machine ten times faster): a test that
#: stops, requeues or kills a job mid-sweep ends it itself, when it has seen what it checks,
#: and never races the sweep's own end (a fast machine once finished LONG's 48 before the
#: `qrerun` came).  One thread: such a sweep runs for minutes only to be stopped, and with
#: smoke.yaml's [1, 2] it held both cores of a 2-core machine, where the other test workers
#: (make test: pytest-xdist) run beside it.
ENDLESS = {"triad_size": 4_000_000, "triad_ntimes": 100, "triad_threads": [1],
           "triad_repetitions": 800, "triad_baselines": []}


def none_twice(run_dir: Path, benchmark: str) -> None:
    """A stopped sweep's table (folded when it stopped, where it was) holds no
    configuration twice."""
    table = run_dir / f"{benchmark}.csv"
    if table.exists():
        rows = pd.read_csv(table)
        ident = [c for c in ("key", "label", "threads", "metric", "function", "message_size",
                             "operation", "iteration", "repetition") if c in rows]
        assert not rows.duplicated(ident).any(), rows[rows.duplicated(ident, keep=False)]


def stored_keys(run_dir: Path, benchmark: str) -> set[str]:
    """Configurations stored so far: in the table (folded at an interruption) or as parts."""
    table = run_dir / f"{benchmark}.csv"
    keys = set(pd.read_csv(table)["key"]) if table.exists() else set()
    return keys | {p.stem for p in (run_dir / f"{benchmark}.parts").glob("*.json")}


def wait_stored(run_dir: Path, benchmark: str, count: int, explain: Callable[[], str],
                timeout: float = 240) -> None:
    """Wait until `count` configurations of `benchmark` are stored in `run_dir` (a test
    failure saying `explain()` after `timeout` s)."""
    deadline = time.monotonic() + timeout
    while len(stored_keys(run_dir, benchmark)) < count:
        assert time.monotonic() < deadline, explain()
        time.sleep(0.5)
