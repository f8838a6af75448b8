"""Slurm's queue read for the advice, and a pending job moved to the cloud partition.

What the installed Slurm offers is found by using it: ``squeue --json`` where its data
parser is there (Slurm 21.08 and later), else ``squeue``'s formatted output, whose ``%S`` of
a pending job is the backfill scheduler's expected start (what ``squeue --start`` shows).
The history: ``sacct`` (the accounting database), else the job completion log where Slurm
writes one (``JobCompType=jobcomp/filetxt``, found with ``scontrol show config``), else a
file given (``--history``).  Every command is an argument list, never a shell line.
"""

from __future__ import annotations

import json
import math
import re
import time
from datetime import datetime
from pathlib import Path

from burstbench.advise.queue import (
    PIN_COMMENT,
    Job,
    Runner,
    SchedulerError,
    Snapshot,
    first_line,
    moved,
    parse_each,
)
from burstbench.replay.accounting import entered, limit_seconds, sacct_rows

#: The job ids this advice acts on: a number, or an array task's number_number.
JOB_ID = re.compile(r"^\d+(_\d+)?$")
#: A partition's name as Slurm allows it (no spaces, no shell characters).
PARTITION = re.compile(r"^[A-Za-z0-9_.\-]+$")
SACCT_FORMAT = ("JobID", "Submit", "Start", "End", "NNodes", "NCPUS", "State", "Timelimit",
                "User", "Partition", "Account", "Eligible", "JobName")
#: squeue's formatted fallback, its fields apart by the unit separator (a job's name or
#: comment may hold any printable character, '|' too); the comment last.
SEP = "\x1f"
SQUEUE_FORMAT = SEP.join(("%i", "%T", "%u", "%P", "%a", "%j", "%D", "%C", "%l", "%V", "%S",
                          "%r", "%k"))


def _clock(text: str) -> float:
    """Slurm's time (2026-11-28T05:13:09 local, or with a UTC offset: +09:00, +0900, Z) as
    Unix s; NaN for Unknown, None, N/A."""
    t = re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", text.strip())  # +0900: Python 3.10's form
    try:
        return datetime.fromisoformat(t[:-1] + "+00:00" if t.endswith("Z") else t).timestamp()
    except ValueError:
        return math.nan


#: Slurm's NO_VAL and INFINITE, as earlier versions' squeue --json print them raw.
UNSET = (0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF)
#: A pending job's reasons that no VM could start it sooner for.
HELD = ("JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied", "BeginTime")


def _number(v) -> float:
    """A number of squeue --json: a plain one, or (Slurm 23.02 and later) an object with
    set, infinite and number; NaN where unset or infinite (also NO_VAL and INFINITE as
    earlier versions print them)."""
    if isinstance(v, bool):
        raise ValueError(f"not a number: {v!r}")
    if isinstance(v, (int, float)):
        return math.nan if v in UNSET else float(v)
    if isinstance(v, dict) and "number" in v:
        if not v.get("set", True) or v.get("infinite", False):
            return math.nan
        return _number(v["number"])
    raise ValueError(f"not a number: {v!r}")


def _state(v) -> str:
    """squeue --json's job_state: a string, or (23.02 and later) a list of flags."""
    if isinstance(v, list) and v and all(isinstance(s, str) for s in v):
        return v[0]
    if isinstance(v, str):
        return v
    raise ValueError(f"not a job state: {v!r}")


def _kind(state: str) -> str | None:
    return {"PENDING": "pending", "RUNNING": "running", "COMPLETING": "running",
            "CONFIGURING": "running"}.get(state)


def _pinned(comment: str) -> bool:
    return PIN_COMMENT in (comment or "").replace(" ", "").lower()


def _from_json(j: dict, now: float) -> Job | None:
    """One job of squeue --json; None for a state the advice ignores; ValueError naming the
    field that does not parse."""
    kind = _kind(_state(j["job_state"]))
    if kind is None:
        return None
    start = _number(j.get("start_time", 0))
    limit_min = _number(j["time_limit"])
    tasks = str(j.get("array_task_string") or "").strip()
    return Job(id=str(j["job_id"]), state=kind, user=str(j.get("user_name") or ""),
               partition=str(j.get("partition") or ""),
               nodes=int(_number(j["node_count"])), cpus=int(_number(j["cpus"])),
               limit_s=limit_min * 60 if limit_min == limit_min else math.nan,
               # in the queue from when it became eligible, as the history's waits are
               submit=float(entered(_number(j["submit_time"]),
                                    _number(j.get("eligible_time", 0)),
                                    start if kind == "running" else now)),
               start=start if kind == "running" else math.nan,
               estimate=max(start, now) if kind == "pending" and start > 0 else math.nan,
               account=str(j.get("account") or ""), name=str(j.get("name") or ""),
               pinned=_pinned(str(j.get("comment") or "")),
               unmovable=_unmovable(str(j.get("state_reason") or ""), j.get("hold") is True,
                                    _set(j.get("het_job_id")), bool(tasks), tasks)
               if kind == "pending" else "")


def _set(v) -> bool:
    """Whether a field of squeue --json holds a value (not 0, NaN, null or empty)."""
    try:
        x = _number(v)
    except ValueError:
        return bool(v)
    return x == x and x != 0


def _unmovable(reason: str, held: bool, het: bool, array: bool, tasks: str = "") -> str:
    """Why a pending job stays where it is ("" where it may move): held (`reason` one of
    HELD, or `held`), a heterogeneous job's part, a pending array (its `tasks`, where
    known)."""
    if reason in HELD or held:
        return f"held ({reason or 'hold'}): no VM starts it sooner"
    if het:
        return "a part of a heterogeneous job: its parts start together"
    if array:
        return (f"an array's tasks{f' ({tasks})' if tasks else ''}: one move takes them "
                "all, priced as one")
    return ""


def _from_line(line: str, now: float) -> Job | None:
    f = line.split(SEP, 12)
    if len(f) != 13:
        raise ValueError(f"{len(f)} fields, not 13")
    kind = _kind(f[1].strip())
    if kind is None:
        return None
    start = _clock(f[10])
    jid = f[0].strip()
    return Job(id=jid, state=kind, user=f[2].strip(), partition=f[3].strip(),
               nodes=int(f[6]), cpus=int(f[7]), limit_s=limit_seconds(f[8]),
               submit=_clock(f[9]), start=start if kind == "running" else math.nan,
               estimate=max(start, now) if kind == "pending" and start == start
               else math.nan, account=f[4].strip(), name=f[5].strip(),
               pinned=_pinned(f[12]),
               unmovable=_unmovable(f[11].strip(), False, "+" in jid, "[" in jid)
               if kind == "pending" else "")


def version(run: Runner) -> str:
    """The installed Slurm's version (squeue --version); SchedulerError, one line, where
    there is none."""
    rc, out, err = run(["squeue", "--version"])
    if rc != 0:
        raise SchedulerError(f"no Slurm reachable: tried squeue --version: "
                             f"{first_line(err or out) or f'exit {rc}'}")
    return out.strip()


def jobs(run: Runner, ver: str, now: float) -> tuple[list[Job], list[str], str]:
    """The pending and running jobs, the ones skipped (each said), and the estimate's
    source."""
    rc, out, err = run(["squeue", "--json"])
    if rc == 0 and out.lstrip().startswith("{"):
        try:
            data = json.loads(out)
        except json.JSONDecodeError as exc:
            raise SchedulerError(f"squeue --json of {ver} is not JSON ({exc}): a version "
                                 "this advice does not parse") from None
        errors = data.get("errors") if isinstance(data, dict) else None
        if errors:  # Slurm 23.02 and later: what went wrong, beside an empty list
            e = errors[0] if isinstance(errors[0], dict) else {"error": errors[0]}
            raise SchedulerError(f"squeue --json of {ver}: "
                                 f"{e.get('description') or e.get('error') or e}")
        if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
            raise SchedulerError(f"squeue --json of {ver} has no list of jobs: a version this "
                                 "advice does not parse")
        parsed, skipped = parse_each(
            data["jobs"], lambda j: _from_json(j, now),
            lambda j, exc: f"job {j.get('job_id', '?') if isinstance(j, dict) else '?'}: "
            f"skipped, a field does not parse ({exc})")
        return parsed, skipped, ("squeue --json (start_time: the backfill scheduler's "
                                 "expected start)")
    why = (f"squeue --json: {first_line(err or out) or f'exit {rc}'}" if rc != 0
           else "squeue --json printed no JSON")
    rc, out, err = run(["squeue", "-h", "-a", "-t", "PENDING,RUNNING", "-o", SQUEUE_FORMAT])
    if rc != 0:
        raise SchedulerError(f"no Slurm queue: tried squeue --json and squeue -o: "
                             f"{first_line(err or out) or f'exit {rc}'} ({ver})")
    parsed, skipped = parse_each(
        [s for s in out.splitlines() if s.strip()], lambda line: _from_line(line, now),
        lambda line, exc: f"squeue line {line.replace(SEP, '|')[:40]!r}: skipped, it does "
        f"not parse ({exc})")
    return parsed, skipped, ("squeue -o %S (the backfill scheduler's expected start, as "
                             f"squeue --start; {why})")


def partitions(run: Runner) -> dict[str, list[str]]:
    """Each partition's nodes (sinfo); a partition whose nodes sinfo does not list (a
    cloud's powered-down nodes, State=CLOUD or FUTURE) with none, from ``scontrol show
    partition``."""
    rc, out, err = run(["sinfo", "-h", "-a", "-N", "-o", "%N|%P"])
    if rc != 0:
        raise SchedulerError(f"sinfo failed: {first_line(err or out) or f'exit {rc}'}")
    parts: dict[str, list[str]] = {}
    for line in out.splitlines():
        node, _, part = line.strip().partition("|")
        if node and part:
            parts.setdefault(part.rstrip("*"), []).append(node)
    rc, out, _ = run(["scontrol", "show", "partition", "--oneliner"])
    for name in re.findall(r"^PartitionName=(\S+)", out if rc == 0 else "", re.M):
        parts.setdefault(name, [])
    return parts


def parse_sacct(text: str, notes: list[str] | None = None) -> list[Job]:
    """Finished jobs of ``sacct --parsable2`` with SACCT_FORMAT's columns (its first nine at
    least; job steps and jobs that never started left out).  The wait counts from Eligible
    where the export has it (a hold or a dependency is not queue time).  What was not read
    is said in `notes`, where given; ParamError where the header lacks a column."""
    head, rows, said, _ = sacct_rows(text, "sacct's output", SACCT_FORMAT[:9])
    out, unread = [], []
    for row in rows:
        f = dict(zip(head, (x.strip() for x in row)))
        if "." in f["JobID"]:
            continue
        start, end = _clock(f["Start"]), _clock(f["End"])
        if not (start == start and end == end):
            continue
        submit, eligible = _clock(f["Submit"]), _clock(f.get("Eligible", ""))
        try:
            out.append(_finished(f["JobID"], f["User"], f.get("Partition", ""), f["NNodes"],
                                 f["NCPUS"], limit_seconds(f["Timelimit"]),
                                 float(entered(submit, eligible, start)), start,
                                 end, f.get("Account", ""), f.get("JobName", "")))
        except ValueError:
            unread.append(f["JobID"])
    if notes is not None:
        notes += said + ([f"{len(unread)} job(s) whose nodes or CPUs are not numbers (job "
                          f"{unread[0]}): not read"] if unread else [])
    return out


def parse_jobcomp(text: str) -> list[Job]:
    """Finished jobs of Slurm's job completion log (jobcomp/filetxt: one line of key=value
    a job)."""
    out = []
    for line in text.splitlines():
        f = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobId" not in f:
            continue
        start, end = _clock(f.get("StartTime", "")), _clock(f.get("EndTime", ""))
        if not (start == start and end == end):
            continue
        out.append(_finished(f["JobId"], f.get("UserId", ""), f.get("Partition", ""),
                             f.get("NodeCnt", "0"), f.get("ProcCnt", "0"),
                             limit_seconds(f.get("TimeLimit", "")),
                             _clock(f.get("SubmitTime", "")), start, end,
                             f.get("Account", ""), f.get("Name", "")))
    return out


def _finished(jid, user, part, nodes, cpus, limit_s, submit, start, end, account,
              name) -> Job:
    return Job(id=str(jid), state="finished", user=re.sub(r"\(\d+\)$", "", user),
               partition=part, nodes=int(nodes or 0), cpus=int(cpus or 0), limit_s=limit_s,
               submit=submit, start=start, end=end, account=account, name=name)


def history(run: Runner, now: float, days: float) -> tuple[list[Job], str]:
    """The finished jobs of the last `days` days and where they came from: sacct, else the
    job completion log; ([], why) where neither is there."""
    since = datetime.fromtimestamp(now - days * 86400).strftime("%Y-%m-%dT%H:%M:%S")
    rc, out, err = run(["sacct", "-a", "-X", "--parsable2", "-S", since, "-E", "now",
                        "--format=" + ",".join(SACCT_FORMAT)])
    tried = []
    if rc == 0 and out.startswith("JobID|"):
        return parse_sacct(out), f"sacct (the accounting database, since {since})"
    tried.append(f"sacct: {first_line(err or out) or f'exit {rc}'}")
    rc, out, err = run(["scontrol", "show", "config"])
    conf = dict(re.findall(r"^(\w+)\s*=\s*(.*?)\s*$", out, re.M)) if rc == 0 else {}
    if conf.get("JobCompType") == "jobcomp/filetxt" and conf.get("JobCompLoc"):
        path = Path(conf["JobCompLoc"])
        try:
            jobs = [j for j in parse_jobcomp(path.read_text(errors="replace"))
                    if j.end >= now - days * 86400]
            return jobs, f"the job completion log {path} (jobcomp/filetxt)"
        except OSError as exc:
            tried.append(f"the job completion log {path}: {exc.strerror}")
    else:
        tried.append(f"no job completion log (JobCompType {conf.get('JobCompType', '?')})")
    return [], "none: " + "; ".join(tried)


def read(run: Runner, history_days: float = 30.0, now: float | None = None) -> Snapshot:
    """Slurm's queue now (see the module docstring)."""
    ver = version(run)
    now = time.time() if now is None else now
    js, skipped, source = jobs(run, ver, now)
    hist, hist_source = history(run, now, history_days)
    return Snapshot("slurm", ver, now, js, hist, partitions(run), source, hist_source,
                    skipped)


def move(run: Runner, job: str, partition: str) -> tuple[bool | None, str]:
    """``scontrol update JobId=<job> Partition=<partition>``: (done, Slurm's message); done
    None where no answer came (the move may or may not have run)."""
    if not JOB_ID.match(job) or not PARTITION.match(partition):
        return False, f"refused: job {job!r} or partition {partition!r} is not a Slurm name"
    rc, out, err = run(["scontrol", "update", f"JobId={job}", f"Partition={partition}"])
    return moved(rc, out, err)
