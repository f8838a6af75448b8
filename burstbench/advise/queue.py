"""A scheduler's queue at one moment, as the advice reads it: the jobs pending and running
with the scheduler's own estimate of each pending job's start, the partitions (or queues)
and their nodes, and the finished jobs of the centre's history.

A :class:`Snapshot` is plain data: ``advise --json --save`` writes it, and the notebook
``210_advise.ipynb`` reads it back offline (:func:`load`).  The readers of Slurm and PBS
(burstbench.advise.slurm, burstbench.advise.pbs) fill it.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from burstbench.core.checks import ParamError

#: The owner's opt-out: a pending job so marked is never moved (Slurm: its comment holds
#: it, ``sbatch --comment=burst:no``; PBS: ``qsub -v BURSTBENCH_BURST=no``).
PIN_COMMENT = "burst:no"
PIN_VARIABLE = "BURSTBENCH_BURST"


class SchedulerError(ParamError):
    """The scheduler could not be read or told (one line: what was tried, what it said)."""


@dataclass
class Job:
    """One job of the queue, or of the history.  Times are Unix seconds; `limit_s` is the
    requested time (NaN: none); `estimate` the scheduler's expected start of a pending job
    (NaN: it gave none); `start`/`end` NaN where not yet."""

    id: str
    state: str  # "pending", "running" or "finished"
    user: str
    partition: str
    nodes: int
    cpus: int
    limit_s: float
    submit: float
    start: float = math.nan
    end: float = math.nan
    estimate: float = math.nan
    account: str = ""
    name: str = ""
    pinned: bool = False
    #: why the advice leaves this pending job where it is, whatever its odds ("" where it
    #: may move): held or waiting on a dependency (no VM starts it sooner), an array's
    #: tasks or a heterogeneous job's part (one move would take more than was priced)
    unmovable: str = ""


@dataclass
class Snapshot:
    """A queue read at `now` (Unix s): its jobs (pending and running), the finished jobs
    of the history, the partitions' nodes, and where each came from."""

    scheduler: str
    version: str
    now: float
    jobs: list[Job]
    history: list[Job]
    partitions: dict[str, list[str]]
    estimate_source: str
    history_source: str
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def pending(self) -> list[Job]:
        return [j for j in self.jobs if j.state == "pending"]

    def to_dict(self) -> dict:
        """JSON-ready: a time not known (NaN) as null."""
        d = asdict(self)
        for key in ("jobs", "history"):
            d[key] = [{k: None if isinstance(v, float) and math.isnan(v) else v
                       for k, v in j.items()} for j in d[key]]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Snapshot:
        """The snapshot of ``to_dict`` (a saved one); ParamError, one line, where it is not
        one."""
        def job(j: dict) -> Job:
            fields: dict[str, Any] = {k: math.nan if v is None else v for k, v in j.items()}
            return Job(**fields)
        try:
            return cls(**(d | {"jobs": [job(j) for j in d["jobs"]],
                                "history": [job(j) for j in d["history"]]}))
        except (KeyError, TypeError) as exc:
            raise ParamError(f"not an advise snapshot (advise --json --save writes one): "
                             f"{exc}") from None


def load(path: Path | str) -> tuple[Snapshot, dict]:
    """A snapshot saved by ``advise --json --save`` and the advice beside it."""
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ParamError(f"{path}: cannot read the snapshot: {exc}") from None
    if not isinstance(d, dict) or "snapshot" not in d:
        raise ParamError(f"{path}: not an advise snapshot (no 'snapshot' key)")
    return Snapshot.from_dict(d["snapshot"]), d.get("advice", {})


def backend(scheduler: str):
    """The module that reads and moves `scheduler`'s jobs (burstbench.advise.slurm or
    .pbs); ParamError for any other name."""
    if scheduler == "slurm":
        from burstbench.advise import slurm
        return slurm
    if scheduler == "pbs":
        from burstbench.advise import pbs
        return pbs
    raise ParamError(f"scheduler must be slurm or pbs, not {scheduler!r}")


def read(snapshot: Path | str = "", scheduler: str = "", history_days: float = 30.0
         ) -> tuple[Snapshot, str]:
    """The queue: the saved `snapshot` where given, else the live one of `scheduler`; and
    where it came from.  ParamError, one line, where neither can be read."""
    if snapshot:
        snap, _ = load(snapshot)
        return snap, f"the snapshot {snapshot} ({snap.version}, saved by advise --save)"
    if not scheduler:
        raise ParamError("give snapshot (a file saved by `burstbench advise --json --save`) "
                         "or scheduler (slurm or pbs, for the live queue)")
    snap = backend(scheduler).read(run_command, history_days)
    return snap, f"the live queue ({snap.version})"


#: A command runner: the argument list, run without a shell; (status, stdout, stderr).
Runner = Callable[[Sequence[str]], tuple[int, str, str]]


#: run_command's status where the command did not answer in time (as timeout(1) says).
NO_ANSWER = 124


def run_command(argv: Sequence[str], timeout: float = 60) -> tuple[int, str, str]:
    """Run `argv` (never through a shell); status 127 and the reason where it cannot start,
    NO_ANSWER where it ran past `timeout` s."""
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: command not found"
    except OSError as exc:
        return 127, "", f"{argv[0]}: {exc}"
    except subprocess.TimeoutExpired:
        return NO_ANSWER, "", f"{argv[0]}: no answer within {timeout:g} s"
    return p.returncode, p.stdout, p.stderr


def moved(rc: int, out: str, err: str) -> tuple[bool | None, str]:
    """A move command's outcome: (done, the scheduler's first line); done None where no
    answer came (the move may or may not have run)."""
    return (None if rc == NO_ANSWER else rc == 0), \
        first_line(err or out) or ("moved" if rc == 0 else f"exit {rc}")


def parse_each(items, parse: Callable, said: Callable) -> tuple[list[Job], list[str]]:
    """Each of `items` parsed into a Job (`parse` gives None for a state the advice
    ignores); one whose fields do not parse is skipped, and said (`said(item, error)`),
    never guessed."""
    out: list[Job] = []
    skipped: list[str] = []
    for item in items:
        try:
            job = parse(item)
        except (KeyError, ValueError, TypeError, AttributeError, IndexError) as exc:
            skipped.append(said(item, exc))
            continue
        if job is not None:
            out.append(job)
    return out, skipped


def first_line(text: str) -> str:
    """The first non-empty line of a command's message."""
    return next((s.strip() for s in text.splitlines() if s.strip()), "")
