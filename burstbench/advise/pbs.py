"""PBS Professional's (OpenPBS's) queue read for the advice, and a queued job moved to the
cloud queue.

The jobs: ``qstat -f -F json`` (PBS Pro 18 and later); a queued job's
``estimated.start_time`` is the scheduler's expected start, filled where the scheduler
estimates (``strict_ordering`` with ``backfill_depth``, or ``est_start_time_freq``).  The
queues: ``qstat -Q -f -F json``; their nodes: ``pbsnodes -a -F json`` (a node with a
``queue`` attribute serves that queue alone).  The history: the server's accounting ``E``
records (``$PBS_HOME/server_priv/accounting/``, readable by root or where the site allows),
else the finished jobs the server keeps (``qstat -x -f -F json``, where job history is
enabled), else a file given (``--history``).  Every command is an argument list, never a
shell line.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path

from burstbench.advise.queue import (
    PIN_VARIABLE,
    Job,
    Runner,
    SchedulerError,
    Snapshot,
    first_line,
    moved,
    parse_each,
)
from burstbench.replay.accounting import (
    entered,
    pbs_array,
    pbs_fields,
    pbs_procs_nodes,
    pbs_seconds,
)

#: The job ids this advice acts on: sequence number[.server], or an array's number[].server.
JOB_ID = re.compile(r"^\d+(\[\d*\])?(\.[A-Za-z0-9_.\-]+)?$")
QUEUE = re.compile(r"^[A-Za-z0-9_\-]+$")


def _clock(text) -> float:
    """PBS's time ("Sat Nov 28 05:17:50 2026", local) as Unix s; NaN where absent."""
    if not isinstance(text, str) or not text.strip():
        return math.nan
    try:
        return time.mktime(time.strptime(text.strip(), "%a %b %d %H:%M:%S %Y"))
    except ValueError:
        return math.nan


def _kind(state: str) -> str | None:
    return {"Q": "pending", "R": "running", "E": "running", "F": "finished"}.get(state)


def _from_json(jid: str, j: dict, now: float) -> Job | None:
    """One job of qstat -f -F json; None for a state the advice ignores (held, waiting,
    ...); ValueError or KeyError naming the field that does not parse."""
    kind = _kind(str(j["job_state"]))
    if kind is None:
        return None
    rl = j["Resource_List"]
    est = _clock((j.get("estimated") or {}).get("start_time"))
    kv = {f"Resource_List.{k}": str(v) for k, v in rl.items()}
    kv.update({k: str(j[k]) for k in ("exec_host", "exec_vnode") if j.get(k)})
    nodes = pbs_procs_nodes(kv)[1] or 1
    ncpus = int(rl["ncpus"])
    start = _clock(j.get("stime"))
    end = _clock(j.get("obittime")) if kind == "finished" else math.nan
    var = j.get("Variable_List") or {}
    return Job(id=jid, state=kind, user=str(j["Job_Owner"]).split("@")[0],
               partition=str(j["queue"]), nodes=nodes, cpus=ncpus,
               limit_s=pbs_seconds(rl.get("walltime")),
               # in the queue from when it became eligible, as the history's waits are
               submit=float(entered(_clock(j["qtime"]), _clock(j.get("etime")),
                                    start if kind != "pending" else now)),
               start=start if kind != "pending" else math.nan, end=end,
               estimate=max(est, now) if kind == "pending" and est == est else math.nan,
               account=str(j.get("Account_Name") or j.get("project") or ""),
               name=str(j.get("Job_Name") or ""),
               pinned=str(var.get(PIN_VARIABLE, "")).strip().lower() in ("no", "0", "false"),
               unmovable=_unmovable(jid, rl) if kind == "pending" else "")


def _unmovable(jid: str, rl: dict) -> str:
    """Why a queued PBS job stays where it is ("" where it may move)."""
    if pbs_array(jid):
        return "an array's subjobs: one move takes them all, priced as one"
    chunks = int(rl.get("nodect", 1))
    if chunks > 1 and int(rl.get("ncpus", 0)) == chunks and not str(
            rl.get("place", "free")).startswith(("scatter", "vscatter", "excl", "pack")):
        return (f"{chunks} chunks of one cpu that may share hosts (place "
                f"{rl.get('place', 'free')}): its nodes are not known before it runs")
    return ""


def version(run: Runner) -> str:
    """The installed PBS's version (qstat --version); SchedulerError where there is none."""
    rc, out, err = run(["qstat", "--version"])
    if rc != 0 or "pbs_version" not in out:
        raise SchedulerError(f"no PBS reachable: tried qstat --version: "
                             f"{first_line(err or out) or f'exit {rc}'}")
    return "PBS " + out.split("=", 1)[-1].strip()


def _json(run: Runner, argv: list[str], ver: str, key: str) -> dict:
    rc, out, err = run(argv)
    if rc != 0:
        raise SchedulerError(f"{' '.join(argv)} failed ({ver}): "
                             f"{first_line(err or out) or f'exit {rc}'}")
    try:
        data = loads(out) if out.strip() else {}
    except json.JSONDecodeError as exc:
        raise SchedulerError(f"{' '.join(argv)} of {ver} is not JSON ({exc}; near: "
                             f"{out[max(exc.pos - 40, 0):exc.pos + 20]!r})") from None
    if not isinstance(data, dict) or not isinstance(data.get(key, {}), dict):
        raise SchedulerError(f"{' '.join(argv)} of {ver} has no {key!r} mapping: a version "
                             "this advice does not parse")
    return data.get(key, {})


#: A lone backslash (after any pairs) before a character JSON does not escape.
_BAD_ESCAPE = re.compile(r'(?<!\\)((?:\\\\)*)\\(?=[^"\\/bfnrtu])')


def loads(text: str):
    r"""qstat's JSON, with what OpenPBS is known to write wrong read as meant: a backslash
    before a character JSON does not escape (``\,`` and ``\'`` in a variable's value) is
    dropped, and control characters inside strings (a ``BASH_FUNC_`` variable's newline)
    are let through."""
    return json.loads(_BAD_ESCAPE.sub(r"\1", text), strict=False)


def _jobs(found: dict, now: float, kinds: tuple[str, ...]) -> tuple[list[Job], list[str]]:
    jobs, skipped = parse_each(found.items(), lambda kv: _from_json(str(kv[0]), kv[1], now),
                               lambda kv, exc: f"job {kv[0]}: skipped, a field does not "
                               f"parse ({exc!r})")
    return [j for j in jobs if j.state in kinds], skipped


def queues(run: Runner, ver: str) -> dict[str, list[str]]:
    """Each queue's nodes: those whose ``queue`` attribute names it, and for a queue no
    node names, every node no queue claims."""
    names = list(_json(run, ["qstat", "-Q", "-f", "-F", "json"], ver, "Queue"))
    nodes = _json(run, ["pbsnodes", "-a", "-F", "json"], ver, "nodes")
    claimed: dict[str, list[str]] = {}
    free: list[str] = []
    for n, attrs in nodes.items():
        q = attrs.get("queue") if isinstance(attrs, dict) else None
        (claimed.setdefault(q, []) if q else free).append(n)
    return {q: claimed.get(q, free) for q in names}


def parse_accounting(text: str, notes: list[str] | None = None) -> list[Job]:
    """Finished jobs of PBS accounting's ``E`` records (an array's own record left out): the
    wait from etime (else qtime, else ctime), the hosts and processors as
    :func:`~burstbench.replay.accounting.pbs_procs_nodes` reads them.  The records not read are
    counted in `notes`, where given."""
    out, unread = [], 0
    for line in text.splitlines():
        f = line.strip().split(";", 3)
        if len(f) != 4 or f[1] != "E" or pbs_array(f[2]):
            continue
        kv = pbs_fields(f[3])
        try:
            start, end = float(kv["start"]), float(kv["end"])
            procs, nodes = pbs_procs_nodes(kv)
            submit = float(kv.get("qtime", kv.get("ctime", start)))
            eligible = float(kv.get("etime", "nan"))
            out.append(Job(id=f[2], state="finished", user=kv.get("user", ""),
                           partition=kv.get("queue", ""), nodes=nodes, cpus=int(procs),
                           limit_s=pbs_seconds(kv.get("Resource_List.walltime")),
                           submit=float(entered(submit, eligible, start)),
                           start=start, end=end, account=kv.get("account", ""),
                           name=kv.get("jobname", "")))
        except (KeyError, ValueError):
            unread += 1
    if notes is not None and unread:
        notes.append(f"{unread} E record(s) without a start and end in Unix seconds: not read")
    return out


def _pbs_home() -> Path | None:
    conf = Path(os.environ.get("PBS_CONF_FILE", "/etc/pbs.conf"))
    try:
        for line in conf.read_text().splitlines():
            if line.startswith("PBS_HOME="):
                return Path(line.split("=", 1)[1].strip())
    except OSError:
        return None
    return None


def history(run: Runner, ver: str, now: float, days: float) -> tuple[list[Job], str]:
    """The finished jobs of the last `days` days and where they came from."""
    tried = []
    home = _pbs_home()
    folder = home / "server_priv" / "accounting" if home else None
    if folder is not None:
        first = time.strftime("%Y%m%d", time.localtime(now - days * 86400))
        try:
            files = sorted(f for f in folder.iterdir() if f.name >= first)
            jobs = [j for f in files for j in parse_accounting(f.read_text(errors="replace"))]
            return jobs, f"PBS accounting ({folder}, {len(files)} day file(s))"
        except OSError as exc:
            tried.append(f"PBS accounting {folder}: {exc.strerror}")
    else:
        tried.append("no PBS_HOME in the PBS configuration")
    try:
        found = _json(run, ["qstat", "-x", "-f", "-F", "json"], ver, "Jobs")
    except SchedulerError as exc:
        tried.append(str(exc))
        return [], "none: " + "; ".join(tried)
    jobs, _ = _jobs(found, now, ("finished",))
    jobs = [j for j in jobs if j.end == j.end and j.end >= now - days * 86400]
    return jobs, "the server's job history (qstat -x)"


def read(run: Runner, history_days: float = 30.0, now: float | None = None) -> Snapshot:
    """PBS's queue now (see the module docstring)."""
    ver = version(run)
    now = time.time() if now is None else now
    found = _json(run, ["qstat", "-f", "-F", "json"], ver, "Jobs")
    js, skipped = _jobs(found, now, ("pending", "running"))
    hist, hist_source = history(run, ver, now, history_days)
    return Snapshot("pbs", ver, now, js, hist, queues(run, ver),
                    "qstat -f -F json (estimated.start_time: the scheduler's expected start)",
                    hist_source, skipped)


def move(run: Runner, job: str, queue: str) -> tuple[bool | None, str]:
    """``qmove <queue> <job>``: (done, PBS's message); done None where no answer came (the
    move may or may not have run)."""
    if not JOB_ID.match(job) or not QUEUE.match(queue):
        return False, f"refused: job {job!r} or queue {queue!r} is not a PBS name"
    rc, out, err = run(["qmove", queue, job])
    return moved(rc, out, err)
