"""sacct's and PBS's accounting records read into a :class:`~burstbench.replay.logs.Log`,
and the parts of them the live advice reads too: Slurm's time limits, PBS's walltimes and a
PBS job's processors and hosts, sacct's header and rows.  Times are read as the centre's
export writes them (ISO 8601, naive or with a UTC offset, or Unix seconds); what cannot be
read is dropped, counted and said (:class:`~burstbench.replay.logs.Drops`)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from burstbench.core.checks import ParamError
from burstbench.replay.logs import (
    PBS_RECORD,
    SACCT_FIELDS,
    Drops,
    Log,
    is_number,
    lines_note,
    sacct_delimiter,
)


def limit_seconds(t: str) -> float:
    """Slurm's time limit or elapsed time in seconds: minutes, minutes:seconds,
    hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds.  NaN
    for UNLIMITED, Partition_Limit, a limit of 0 (none) or anything else."""
    t = t.strip()
    days = None
    if "-" in t:
        d, _, t = t.partition("-")
        if not d.isdigit():
            return math.nan
        days = int(d)
    parts = t.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return math.nan
    nums = [int(p) for p in parts]
    if days is not None:  # after a day count the first field is hours
        nums += [0] * (3 - len(nums))
        s = days * 86400 + nums[0] * 3600.0 + nums[1] * 60 + nums[2]
    elif len(nums) == 1:
        s = nums[0] * 60.0
    elif len(nums) == 2:
        s = nums[0] * 60.0 + nums[1]
    else:
        s = nums[0] * 3600.0 + nums[1] * 60 + nums[2]
    return s if s > 0 else math.nan


def pbs_seconds(text) -> float:
    """PBS's walltime ([[hh:]mm:]ss, or plain seconds; a fraction allowed) in s; NaN where
    absent or not a time."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    if not isinstance(text, str) or not text.strip():
        return math.nan
    parts = text.strip().split(":")
    if len(parts) > 3 or not all(p.isdigit() for p in parts[:-1]) or not is_number(parts[-1]):
        return math.nan
    s = 0.0
    for p in parts:
        s = s * 60 + float(p)
    return s


def pbs_procs_nodes(kv: dict[str, str]) -> tuple[float, int]:
    """A PBS job's processors and hosts, from its record's key=value pairs.

    Processors: ``Resource_List.ncpus`` (PBS Pro), else Torque's
    ``total_execution_slots``, else its ``Resource_List.nodes`` (N:ppn=M, summed over
    '+'), else ``Resource_List.procs``; 0 where none.  Hosts: the distinct hosts of
    ``exec_host`` (n1/0*8+n2/0*8, Torque's n1/0+n1/1 or n1/0-15), else of ``exec_vnode``
    ((n1[0]:ncpus=4)+(n2:ncpus=4)), else Torque's node count, else ``Resource_List.nodect``,
    which counts select's chunks (64 chunks of one cpu on two hosts: 64): one host where
    ``place`` packs them; 0 where none."""
    def num(key: str) -> float:
        try:
            return float(kv.get(key, "nan"))
        except ValueError:
            return math.nan
    t_procs = t_nodes = 0
    for part in (kv.get("Resource_List.nodes") or "").split("+"):
        head, *opts = part.split(":")
        if not head:
            continue
        count = int(head) if head.isdigit() else 1  # a number of nodes, or a host's name
        ppn = next((int(o[4:]) for o in opts if o.startswith("ppn=") and o[4:].isdigit()), 1)
        t_nodes += count
        t_procs += count * ppn
    procs = next((v for v in (num("Resource_List.ncpus"), num("total_execution_slots"),
                              float(t_procs), num("Resource_List.procs")) if v > 0), 0.0)
    if kv.get("exec_host"):
        hosts = {p.split("/")[0] for p in kv["exec_host"].split("+") if p}
    else:
        hosts = {n.split("[")[0] for n in re.findall(r"[(+]([^:()+]+):",
                                                       kv.get("exec_vnode", ""))}
    if hosts:
        return procs, len(hosts)
    if t_nodes:
        return procs, t_nodes
    nodect = num("Resource_List.nodect")
    if not nodect > 0:
        return procs, 0
    return procs, 1 if kv.get("Resource_List.place", "").startswith("pack") else int(nodect)


#: Times a job never reached, as sacct writes them.
NOT_YET = ("Unknown", "None", "N/A", "")


def _epoch(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps (ISO 8601, naive or with a UTC offset, or Unix seconds) as Unix seconds,
    NaN for Unknown/None; and where a value is there but is not a time read so."""
    values = values.astype(str).str.strip()
    num = pd.to_numeric(values, errors="coerce")
    if num.notna().all():
        return num.to_numpy(dtype=float), np.zeros(len(values), dtype=bool)
    absent = values.isin(NOT_YET)
    t = pd.to_datetime(values.where(~absent & num.isna()), errors="coerce", format="ISO8601",
                       utc=True)
    out = (t - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(dtype=float)
    out = np.where(num.notna(), num.to_numpy(dtype=float), out)
    return out, (np.isnan(out) & ~absent.to_numpy())


def entered(submit, eligible, start):
    """When a job entered the queue (Unix s; numbers or arrays alike): its eligible time
    where that falls after its submit and no later than its start (time held, or waiting on
    a dependency, is no queue time a VM could save), else its submit."""
    return np.where((eligible > submit) & (eligible <= start), eligible, submit)


def pbs_fields(payload: str) -> dict[str, str]:
    """A PBS accounting record's key=value pairs (its fourth ';' field)."""
    return dict(p.split("=", 1) for p in payload.split() if "=" in p)


def pbs_array(jid: str) -> bool:
    """Whether a PBS job id is an array's own (123[].server), not a subjob's or a job's."""
    return jid.split(".")[0].endswith("[]")


def name_codes(names) -> np.ndarray:
    """Names (of users, partitions) as numbers (in order of first appearance; -1 for an
    empty name)."""
    names = pd.Series(names, dtype=object)
    codes, _ = pd.factorize(names.where(names.astype(str) != "", None))
    return codes.astype(np.int64)


def _from_times(jobid, submit, start, end, procs, nodes, req_time, state, fmt: str,
                machine: str, notes: list[str], dropped: dict[str, int], user=None, *,
                eligible=None, elapsed=None, unreadable=None, example: str = "",
                partition=None) -> Log:
    """A Log from absolute times (Unix s).  Dropped, counted and said: a time there but not
    read (`unreadable`, `example` one of them), jobs that never started (no submit, start or
    end), the same job twice (its id, submit and start: exports that overlap), a job
    cancelled before it ran (started and ended at once).  The wait counts from `eligible`
    where it falls between submit and start (time held, or waiting on a dependency, is no
    queue time a VM could save), and the run time is `elapsed` where given (sacct's
    Elapsed: right across a change of daylight-saving time, where local end - start is
    not)."""
    n = len(submit)
    drop = Drops(n, notes, dropped)
    if unreadable is not None:
        drop("a time not read", unreadable,
             f"with a submit, start or end time that is not a time (e.g. {example!r}; "
             "read: ISO 8601, as sacct writes with SLURM_TIME_FORMAT=standard, or Unix "
             "seconds): not replayed")
    drop("never started or no end", np.isnan(start) | np.isnan(end) | np.isnan(submit),
         "with no submit, start or end time (never started, or still running): not "
         "replayed")
    ids = pd.DataFrame({"id": np.asarray(jobid, dtype=str), "submit": submit, "start": start})
    drop("duplicate", ids.duplicated().to_numpy(),
         "logged twice (the same id, submit and start: exports that overlap?): the second "
         "dropped")
    run = end - start
    if elapsed is not None:
        run = np.where(np.isfinite(elapsed), elapsed, run)
    states = pd.Series(np.asarray(state, dtype=str))
    drop("cancelled before it ran", (run == 0) & states.str.startswith("CANCELLED").to_numpy(),
         "cancelled before they ran (start = end): dropped")
    keep = ~drop.gone
    entry = np.asarray(submit, dtype=float)
    if eligible is not None:
        entry = np.where(keep, entered(submit, eligible, start), entry)
        later = keep & (entry != submit)
        if later.any():
            notes.append(f"{int(later.sum())} job(s) eligible after their submit (held, or "
                         "waiting on a dependency): their wait counts from then")
    t0 = float(np.nanmin(entry[keep])) if keep.any() else 0.0
    jobs = pd.DataFrame({"job": np.asarray(jobid)[keep], "submit": entry[keep] - t0,
                         "wait": start[keep] - entry[keep], "run": run[keep],
                         "procs": np.asarray(procs, dtype=float)[keep],
                         "nodes": np.asarray(nodes, dtype=np.int64)[keep],
                         "req_time": np.asarray(req_time, dtype=float)[keep],
                         "status": np.asarray(state)[keep], "queue": 0,
                         "partition": (name_codes(partition) if partition is not None
                                       else np.full(n, -1, np.int64))[keep],
                         "user": (name_codes(user) if user is not None
                                  else np.full(n, -1, np.int64))[keep]})
    return Log(jobs, fmt, machine, start_time=t0 if keep.any() else None, notes=notes,
               dropped=dropped)


def sacct_rows(text: str, source: str = "", need=SACCT_FIELDS
               ) -> tuple[list[str], list[list[str]], list[str], dict[str, int]]:
    """sacct's header and its rows of that many fields, from its header line on (lines
    before it, such as sacct's warnings, and a header repeated where exports were joined,
    passed over), with notes on the lines not read; ParamError where there is no header or
    it lacks a column of `need`."""
    lines = text.splitlines()
    at = next((i for i, s in enumerate(lines) if sacct_delimiter(s)), None)
    src = source or "the log"
    if at is None:
        raise ParamError(f"{src}: sacct output without a header line (give sacct "
                         f"--parsable2 --format={','.join(need)}, without --noheader)")
    delim = sacct_delimiter(lines[at]) or "|"
    head = [h.strip() for h in lines[at].strip().split(delim)]
    for name, alias in (("NNodes", "AllocNodes"), ("NCPUS", "AllocCPUS")):
        if name not in head and alias in head:  # the same count, for a job that ran
            head[head.index(alias)] = name
    missing = [c for c in need if c not in head]
    if missing:
        raise ParamError(f"{src}: sacct output without the column(s) {', '.join(missing)} "
                         f"(give sacct --parsable2 --format={','.join(need)})")
    before = [i + 1 for i in range(at) if lines[i].strip()]
    notes = [lines_note("before sacct's header", before)] if before else []
    rows, bad = [], []
    for i, line in enumerate(lines[at + 1:], at + 2):
        if not line.strip():
            continue
        f = line.split(delim)
        if len(f) != len(head):
            bad.append(i)
        elif [x.strip() for x in f] != head:  # a header again: exports joined
            rows.append(f)
    if bad:
        notes.append(lines_note(f"without the header's {len(head)} fields", bad))
    return head, rows, notes, {"wrong field count": len(bad)} if bad else {}


def parse_sacct(text: str, source: str = "") -> Log:
    """``sacct --parsable2`` (or ``sacct -c``, the job completion log, with the same
    columns; any ``--delimiter`` of ',', ';' or tab): one line per job; job steps (JobID
    with a '.') are skipped.  Times naive (the cluster's local time, read as it is) or with
    a UTC offset; Eligible (the wait counts from it) and Elapsed (the run time) are read
    where the export has them."""
    head, rows, notes, dropped = sacct_rows(text, source)
    d = pd.DataFrame(rows, columns=head).astype(str)
    d = d[~d["JobID"].str.contains(".", regex=False)]
    state = d["State"].str.split().str[0].fillna("")
    times = {c: _epoch(d[c]) for c in ("Submit", "Start", "End")}
    bad = times["Submit"][1] | times["Start"][1] | times["End"][1]
    example = next((v for c in times for v, b in zip(d[c], times[c][1]) if b), "")
    return _from_times(
        d["JobID"].to_numpy(), times["Submit"][0], times["Start"][0], times["End"][0],
        pd.to_numeric(d["NCPUS"], errors="coerce").fillna(0).to_numpy(),
        pd.to_numeric(d["NNodes"], errors="coerce").fillna(0).to_numpy(),
        d["Timelimit"].map(limit_seconds).to_numpy(dtype=float), state.to_numpy(), "sacct",
        "the Slurm cluster of the log", notes, dropped,
        d["User"].to_numpy() if "User" in d else None,
        eligible=_epoch(d["Eligible"])[0] if "Eligible" in d else None,
        elapsed=(d["Elapsed"].map(limit_seconds).to_numpy(dtype=float)
                 if "Elapsed" in d else None), unreadable=bad, example=example,
        partition=d["Partition"].str.strip().to_numpy() if "Partition" in d else None)


def parse_pbs(text: str, source: str = "") -> Log:
    """PBS Pro's (and Torque's) accounting: the ``E`` (job ended) records' qtime (else
    ctime), etime (the wait counts from it), start, end, walltime and processors and hosts
    (:func:`pbs_procs_nodes`); other records, and an array's own record (``123[]``), are
    skipped."""
    rows, bad = [], []
    records = parents = 0
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        f = s.split(";", 3)
        if len(f) != 4 or not PBS_RECORD.match(s):
            bad.append(i)
            continue
        records += 1
        if f[1] != "E":
            continue
        if pbs_array(f[2]):
            parents += 1
            continue
        kv = pbs_fields(f[3])
        procs, nodes = pbs_procs_nodes(kv)
        rows.append((f[2], kv.get("qtime", kv.get("ctime")), kv.get("etime"), kv.get("start"),
                     kv.get("end"), procs, nodes, pbs_seconds(kv.get("Resource_List.walltime")),
                     kv.get("Exit_status", ""), kv.get("user", ""), kv.get("queue", "")))
    notes = [lines_note("not a PBS accounting record", bad)] if bad else []
    dropped = {"wrong field count": len(bad)} if bad else {}
    if parents:
        notes.append(f"{parents} job array(s)' own E record(s) (id 123[]): its subjobs "
                     "replayed instead")
    if records and not rows and not parents:
        notes.append(f"no E (job ended) record among {records} record(s): the jobs are "
                     "read from those")
    d = pd.DataFrame(rows, columns=["id", "qtime", "etime", "start", "end", "procs", "nodes",
                                    "walltime", "exit", "user", "queue"])

    def num(col: str) -> np.ndarray:
        return pd.to_numeric(d[col], errors="coerce").to_numpy(dtype=float)
    return _from_times(d["id"].to_numpy(), num("qtime"), num("start"), num("end"),
                       d["procs"].to_numpy(dtype=float), d["nodes"].to_numpy(dtype=np.int64),
                       d["walltime"].to_numpy(dtype=float), d["exit"].to_numpy(), "pbs",
                       "the PBS Pro complex of the log", notes, dropped, d["user"].to_numpy(),
                       eligible=num("etime"), partition=d["queue"].to_numpy())
