"""The ledger of ``advise --apply``: one JSON line per event, appended and synced to disk
before the action it announces is taken, so that a run killed at any point (``kill -9``
included) loses no action and repeats none.

For each move: an ``intent`` line (job, where to, its VM, its JPY at the requested time),
then the move, then its outcome, ``done`` or ``refused`` (the scheduler's one line); none
where the scheduler did not answer in time (the move may have run).  The next run settles
an intent left without an outcome against the scheduler's own listing
(:func:`Ledger.settle`): the job found in the cloud partition is ``done`` (the move ran);
found pending elsewhere, ``not done`` (it never ran: the job may move again); gone, ``gone``
(never moved again).  A job moves at most once: one ``done`` (or ``gone``) and it never
moves again.  The JPY of every ``done`` and unsettled ``intent`` of a day counts against
that day's budget.  A torn last line (a kill mid-write, before any move) is dropped, and
said.  One ``advise --apply`` at a time holds the ledger (an exclusive lock beside it).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

from burstbench.core.checks import ParamError

#: Outcomes after which a job never moves again.
FINAL = ("done", "gone", "refused")


class Ledger:
    """The ledger at `path` (created where missing), held for the process's life."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.notes: list[str] = []
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = open(self.path.with_name(self.path.name + ".lock"), "w")
        except OSError as exc:
            raise ParamError(f"--ledger {self.path}: cannot write there: {exc.strerror}"
                             ) from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ParamError(f"--ledger {self.path}: another advise --apply holds it "
                             f"({self._lock.name})") from None
        self.records = self._read()

    def _read(self) -> list[dict]:
        if not self.path.exists():
            return []
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        out = []
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                if i == len(lines) - 1:  # the last, torn: written before any move
                    good = raw[:len(raw) - len(line)]
                    with open(self.path, "r+b") as f:
                        f.truncate(len(good))
                        os.fsync(f.fileno())
                    self.notes.append(f"ledger {self.path}: its last line was torn (a run "
                                      "killed while writing it, before its move): dropped")
                else:
                    raise ParamError(f"ledger {self.path}: line {i + 1} is not JSON: the "
                                     "ledger was changed by hand; fix or move it") from None
        return out

    def append(self, record: dict) -> dict:
        """Append `record` (with the time), flushed and synced before returning."""
        rec = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "epoch": round(time.time(), 3)} \
            | record
        with open(self.path, "a") as f:
            f.write(json.dumps(rec, sort_keys=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records.append(rec)
        return rec

    def last(self, job: str, scheduler: str) -> dict | None:
        """The job's last record."""
        return next((r for r in reversed(self.records)
                     if r.get("job") == job and r.get("scheduler") == scheduler), None)

    def settled(self, job: str, scheduler: str) -> bool:
        """Whether the job has moved (or was refused, or is gone): it never moves again."""
        return any(r.get("job") == job and r.get("scheduler") == scheduler
                   and r.get("event") in FINAL for r in self.records)

    def _outcomes(self, scheduler: str | None = None) -> list[tuple[dict, dict | None]]:
        """Each intent (of `scheduler`; None: of every one) with the first record of its job
        after it that is not an intent (its outcome; None where the run was killed before
        writing one)."""
        out = []
        for i, r in enumerate(self.records):
            if r.get("event") == "intent" and scheduler in (None, r.get("scheduler")):
                out.append((r, next((x for x in self.records[i + 1:]
                                     if x.get("job") == r["job"]
                                     and x.get("scheduler") == r.get("scheduler")
                                     and x.get("event") != "intent"), None)))
        return out

    def open_intents(self, scheduler: str) -> list[dict]:
        """Intents with no outcome after them (a run killed between the two)."""
        return [r for r, outcome in self._outcomes(scheduler) if outcome is None]

    def spent(self, day: str) -> float:
        """JPY of the day (YYYY-MM-DD, local): moves done, and intents not yet settled."""
        return sum(float(r.get("jpy", 0.0)) for r, outcome in self._outcomes()
                   if r.get("time", "").startswith(day)
                   and (outcome is None or outcome.get("event") in ("done", "gone")))

    def settle(self, scheduler: str, where: dict[str, tuple[str, str]], cloud: str) -> list[str]:
        """Settle every open intent against the scheduler's listing `where` (job -> (state,
        partition)); the lines said."""
        said = []
        for r in self.open_intents(scheduler):
            state, part = where.get(r["job"], ("", ""))
            if part == cloud:
                event, why = "done", f"found in {cloud} after an interrupted run: the move ran"
            elif state == "pending":
                event, why = "not done", (f"found pending in {part} after an interrupted "
                                          "run: the move never ran")
            else:
                event, why = "gone", ("no longer pending (finished or started) after an "
                                      "interrupted run: never moved again")
            self.append({"event": event, "job": r["job"], "scheduler": scheduler,
                         "to": r.get("to"), "message": why})
            said.append(f"job {r['job']}: {why}")
        return said

    def close(self) -> None:
        self._lock.close()
