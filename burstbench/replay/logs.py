"""A centre's accounting log read into one table of jobs: the Standard Workload Format of the
Parallel Workloads Archive (SWF), Slurm's ``sacct --parsable2`` and PBS Pro's accounting ``E``
records, the format guessed from the content where it is not given.

Every reader gives a :class:`Log`: one row per job with its submit time (s from the log's
first), its wait and run time (s), its processors, its nodes where the log records them, its
requested time (s; NaN where unknown), its status and its user (a number; -1 where the log
names none); the log's machine (its header, or the
format's name), MaxNodes/MaxProcs where a header gives them, and notes: each line or job that
could not be used, counted and said, never silently dropped.
"""

from __future__ import annotations

import gzip
import io
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from burstbench.core.checks import ParamError

FORMATS = ("swf", "sacct", "pbs")
#: SWF's 18 fields, in order (Feitelson's definition; -1 = unknown).
SWF_FIELDS = ("job", "submit", "wait", "run", "procs", "cpu_time", "memory_kb", "req_procs",
              "req_time", "req_memory", "status", "user", "group", "executable", "queue",
              "partition", "preceding", "think_time")
SACCT_FIELDS = ("JobID", "Submit", "Start", "End", "NNodes", "NCPUS", "State", "Timelimit")
EXPECTED = ("expected SWF (18 whitespace-separated numbers a job line, ';' header lines), "
            "sacct --parsable2 (a header line " + "|".join(SACCT_FIELDS) + ") or PBS Pro "
            "accounting records (MM/DD/YYYY HH:MM:SS;E;id;key=value ...)")
_PBS = re.compile(r"^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Za-z];")
#: Notes list at most this many line numbers, then the count.
SHOW_LINES = 5


@dataclass
class Log:
    """A log's jobs (columns: job, submit, wait, run, procs, nodes (0: not logged),
    req_time, status, queue, user (-1: unknown)), where it came from, and what could not be
    used."""

    jobs: pd.DataFrame
    fmt: str
    machine: str
    max_nodes: int | None = None
    max_procs: int | None = None
    start_time: float | None = None  # Unix time of submit 0, where known
    notes: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    acknowledge: str = ""

    @property
    def procs_per_node(self) -> float | None:
        """Processors per node of the log's machine, from its header (None where it gives
        fewer processors than nodes)."""
        if self.max_nodes and self.max_procs and self.max_procs >= self.max_nodes:
            return self.max_procs / self.max_nodes
        return None


def read_text(path: Path | str) -> str:
    """A log's text (gunzipped where it is gzip, by its first bytes, not its name);
    ParamError, one line, where it cannot be read."""
    p = Path(path)
    try:
        raw = p.read_bytes()
        if raw[:2] == b"\x1f\x8b":  # gzip's magic, whatever the file's name
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise ParamError(f"{p}: cannot read the log: {getattr(exc, 'strerror', None) or exc}"
                         ) from None
    return raw.decode("utf-8-sig", errors="replace")  # -sig: a byte-order mark dropped


def guess_format(text: str) -> str | None:
    """'swf', 'sacct' or 'pbs' from the first of the first 200 lines that says (lines that
    say nothing, such as a warning sacct printed before its header, are passed over), or
    None."""
    for line in text.splitlines()[:200]:
        s = line.strip()
        if not s:
            continue
        if s.startswith(";"):
            return "swf"
        if sacct_delimiter(s):
            return "sacct"
        if _PBS.match(s):
            return "pbs"
        toks = s.split()
        if len(toks) == len(SWF_FIELDS) and all(_number(t) for t in toks):
            return "swf"
    return None


def sacct_delimiter(line: str) -> str | None:
    """The delimiter of a sacct header line (one of its fields is JobID: ``--parsable2``'s
    '|', or ``--delimiter``'s ',', ';' or a tab), or None where the line is not one."""
    for d in ("|", ",", ";", "\t"):
        if "JobID" in (f.strip() for f in line.strip().split(d)):
            return d
    return None


def _number(t: str) -> bool:
    try:
        float(t)
    except ValueError:
        return False
    return True


def _lines_note(what: str, lines: list[int]) -> str:
    shown = ", ".join(str(n) for n in lines[:SHOW_LINES])
    more = f" and {len(lines) - SHOW_LINES} more" if len(lines) > SHOW_LINES else ""
    return f"{len(lines)} line(s) {what} (line {shown}{more}): not read"


class _Drops:
    """Rows of a log dropped, each reason counted in `dropped` and said once in `notes`."""

    def __init__(self, n: int, notes: list[str], dropped: dict[str, int]) -> None:
        self.gone = np.zeros(n, dtype=bool)
        self.notes, self.dropped = notes, dropped

    def __call__(self, key: str, mask, said: str) -> None:
        new = np.asarray(mask, dtype=bool) & ~self.gone
        if new.any():
            self.dropped[key] = self.dropped.get(key, 0) + int(new.sum())
            self.notes.append(f"{int(new.sum())} job(s) {said}")
            self.gone |= new


def _swf_numbers(rows: list[str], lines: list[int], notes: list[str]
                 ) -> tuple[pd.DataFrame, list[int]]:
    """The job lines' fields as numbers (pandas' C reader: a fifth of the time of numpy's
    conversion), and the lines kept; a line with a field that is not a finite number
    (x, NaN, N/A) dropped and said by its number."""
    def read(rs: list[str]) -> pd.DataFrame:
        if not rs:
            return pd.DataFrame(columns=list(SWF_FIELDS), dtype=float)
        return pd.read_csv(io.StringIO("\n".join(rs)), sep=r"\s+", header=None,
                           names=list(SWF_FIELDS), dtype=float, na_filter=False)
    try:
        d = read(rows)
        finite = np.isfinite(d.to_numpy()).all(axis=1)
    except ValueError:  # a field no number: find its lines, one by one
        finite = np.array([all(_number(t) and math.isfinite(float(t)) for t in r.split())
                           for r in rows], dtype=bool)
        d = None
    if not finite.all():
        notes.append(_lines_note("with a field that is not a number",
                                 [n for n, ok in zip(lines, finite) if not ok]))
        rows = [r for r, ok in zip(rows, finite) if ok]
        lines = [n for n, ok in zip(lines, finite) if ok]
        d = None
    return (read(rows) if d is None else d), lines


def _header_number(header: dict[str, str], key: str, notes: list[str]) -> int | None:
    """A header's count (its leading number: '16 (8-core nodes)' is 16); None where absent
    or -1 (SWF's unknown), said where it is there but not a number."""
    v = header.get(key)
    if v is None:
        return None
    m = re.match(r"-?\d+(\.\d*)?", re.sub(r"(?<=\d),(?=\d{3})", "", v))  # 1,024
    if m is None:
        notes.append(f"the header's {key} {v!r} is not a number: not used")
        return None
    return int(float(m.group())) if float(m.group()) > 0 else None


#: SWF's status of a checkpointed job's partial executions (its summary line: 0, 1 or 5).
SWF_PARTIAL = (2, 3, 4)
#: A requested time longer than this is an 'unlimited' written as a number (2^31 - 1 s).
LONGEST_REQUEST_S = 366 * 86400.0


def parse_swf(text: str, source: str = "") -> Log:
    """SWF: every field as the format defines it (-1: unknown), the header's Computer,
    Installation, MaxNodes, MaxProcs, UnixStartTime and Acknowledge read.  Dropped, counted
    and said: a checkpointed job's partial executions where its summary line is there
    (status 2-4), a job cancelled before it ran (status 5, no run time), a line logged
    twice.  Users renumbered from 0 in order of their numbers (the number is only a key)."""
    header: dict[str, str] = {}
    rows, lines, bad = [], [], []
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith(";"):
            k, sep, v = s[1:].partition(":")
            if sep and k.strip() and k.strip() not in header:
                header[k.strip()] = v.strip()
            continue
        if len(s.split()) != len(SWF_FIELDS):
            bad.append(i)
            continue
        rows.append(s)
        lines.append(i)
    notes = [_lines_note(f"without SWF's {len(SWF_FIELDS)} fields", bad)] if bad else []
    dropped = {"wrong field count": len(bad)} if bad else {}
    d, kept = _swf_numbers(rows, lines, notes)
    if len(kept) < len(rows):
        dropped["a field not a number"] = len(rows) - len(kept)
    drop = _Drops(len(d), notes, dropped)
    status = d["status"].to_numpy()
    partial = np.isin(status, SWF_PARTIAL)
    summed = np.isin(d["job"], d["job"][~partial])
    drop("partial execution", partial & summed,
         "logged as partial executions of a checkpointed job (status 2-4) beside its "
         "summary line, which is replayed: dropped")
    drop("cancelled before it ran", (status == 5) & (d["run"] <= 0).to_numpy(),
         "cancelled before they ran (status 5, no run time): dropped")
    drop("duplicate", d.duplicated().to_numpy(), "logged twice (the same line): the second "
         "dropped")
    parts = np.unique(d["partition"][d["partition"] >= 0])
    if len(parts) > 1:
        notes.append(f"the jobs ran in {len(parts)} partitions (field 16): replayed as one "
                     "queue of the whole machine")
    d = d[~drop.gone]
    procs = np.where(d["procs"] > 0, d["procs"], d["req_procs"])
    unknown = d["req_time"] <= 0
    users = d["user"].to_numpy(np.int64)
    ids = np.unique(users[users >= 0])
    jobs = pd.DataFrame({"job": d["job"].astype(np.int64), "submit": d["submit"],
                         "wait": d["wait"].where(d["wait"] != -1, np.nan),
                         "run": d["run"].where(d["run"] != -1, np.nan),
                         "procs": procs, "nodes": np.zeros(len(d), dtype=np.int64),
                         "req_time": d["req_time"].where(~unknown, np.nan),
                         "status": d["status"].astype(np.int64),
                         "queue": d["queue"].astype(np.int64),
                         "user": np.where(users >= 0, np.searchsorted(ids, users), -1)})
    machine = ", ".join(v for v in (header.get("Installation"), header.get("Computer")) if v)
    max_nodes, max_procs = (_header_number(header, k, notes) for k in ("MaxNodes", "MaxProcs"))
    if max_nodes and max_procs and max_procs < max_nodes:
        notes.append(f"the header's MaxProcs ({max_procs}) is fewer than its MaxNodes "
                     f"({max_nodes}): processors a node not taken from it (give "
                     "--procs-per-node)")
    start = _header_number(header, "UnixStartTime", notes)
    log = Log(jobs.reset_index(drop=True), "swf",
              machine or "the log's machine (its SWF header names none)", max_nodes,
              max_procs, float(start) if start is not None else None, notes, dropped,
              header.get("Acknowledge", ""))
    if log.max_nodes is not None:
        log.machine += f", {log.max_nodes} nodes"
    return log


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
    if len(parts) > 3 or not all(p.isdigit() for p in parts[:-1]) or not _number(parts[-1]):
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


def _codes(names) -> np.ndarray:
    """User names as numbers (in order of first appearance; -1 for an empty name)."""
    names = pd.Series(names, dtype=object)
    codes, _ = pd.factorize(names.where(names.astype(str) != "", None))
    return codes.astype(np.int64)


def _from_times(jobid, submit, start, end, procs, nodes, req_time, state, fmt: str,
                machine: str, notes: list[str], dropped: dict[str, int], user=None, *,
                eligible=None, elapsed=None, unreadable=None, example: str = "") -> Log:
    """A Log from absolute times (Unix s).  Dropped, counted and said: a time there but not
    read (`unreadable`, `example` one of them), jobs that never started (no submit, start or
    end), the same job twice (its id, submit and start: exports that overlap), a job
    cancelled before it ran (started and ended at once).  The wait counts from `eligible`
    where it falls between submit and start (time held, or waiting on a dependency, is no
    queue time a VM could save), and the run time is `elapsed` where given (sacct's
    Elapsed: right across a change of daylight-saving time, where local end - start is
    not)."""
    n = len(submit)
    gone = np.zeros(n, dtype=bool)

    def drop(key: str, mask: np.ndarray, said: str) -> None:
        new = mask & ~gone
        if new.any():
            dropped[key] = dropped.get(key, 0) + int(new.sum())
            notes.append(f"{int(new.sum())} job(s) {said}")
            gone[:] |= new
    if unreadable is not None:
        drop("a time not read", unreadable,
             f"with a submit, start or end time that is not a time (e.g. {example!r}; "
             "read: ISO 8601, as sacct writes with SLURM_TIME_FORMAT=standard, or Unix "
             "seconds): not replayed")
    drop("never started or no end", np.isnan(start) | np.isnan(end) | np.isnan(submit),
         "with no submit, start or end time (never started, or still running): not "
         "replayed")
    ids = pd.DataFrame({"id": np.asarray(jobid, dtype=str), "submit": submit, "start": start})
    drop("duplicate", ids.duplicated().to_numpy() & ~gone,
         "logged twice (the same id, submit and start: exports that overlap?): the second "
         "dropped")
    run = end - start
    if elapsed is not None:
        run = np.where(np.isfinite(elapsed), elapsed, run)
    states = pd.Series(np.asarray(state, dtype=str))
    drop("cancelled before it ran", (run == 0) & states.str.startswith("CANCELLED").to_numpy(),
         "cancelled before they ran (start = end): dropped")
    entry = np.asarray(submit, dtype=float)
    if eligible is not None:
        later = ~gone & (eligible > submit) & (eligible <= start)
        entry = np.where(later, eligible, entry)
        if later.any():
            notes.append(f"{int(later.sum())} job(s) eligible after their submit (held, or "
                         "waiting on a dependency): their wait counts from then")
    keep = ~gone
    t0 = float(np.nanmin(entry[keep])) if keep.any() else 0.0
    jobs = pd.DataFrame({"job": np.asarray(jobid)[keep], "submit": entry[keep] - t0,
                         "wait": start[keep] - entry[keep], "run": run[keep],
                         "procs": np.asarray(procs, dtype=float)[keep],
                         "nodes": np.asarray(nodes, dtype=np.int64)[keep],
                         "req_time": np.asarray(req_time, dtype=float)[keep],
                         "status": np.asarray(state)[keep], "queue": 0,
                         "user": (_codes(user) if user is not None
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
    notes = [_lines_note("before sacct's header", before)] if before else []
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
        notes.append(_lines_note(f"without the header's {len(head)} fields", bad))
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
                 if "Elapsed" in d else None), unreadable=bad, example=example)


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
        if len(f) != 4 or not _PBS.match(s):
            bad.append(i)
            continue
        records += 1
        if f[1] != "E":
            continue
        if f[2].split(".")[0].endswith("[]"):
            parents += 1
            continue
        kv = dict(p.split("=", 1) for p in f[3].split() if "=" in p)
        procs, nodes = pbs_procs_nodes(kv)
        rows.append((f[2], kv.get("qtime", kv.get("ctime")), kv.get("etime"), kv.get("start"),
                     kv.get("end"), procs, nodes, pbs_seconds(kv.get("Resource_List.walltime")),
                     kv.get("Exit_status", ""), kv.get("user", "")))
    notes = [_lines_note("not a PBS accounting record", bad)] if bad else []
    dropped = {"wrong field count": len(bad)} if bad else {}
    if parents:
        notes.append(f"{parents} job array(s)' own E record(s) (id 123[]): its subjobs "
                     "replayed instead")
    if records and not rows and not parents:
        notes.append(f"no E (job ended) record among {records} record(s): the jobs are "
                     "read from those")
    d = pd.DataFrame(rows, columns=["id", "qtime", "etime", "start", "end", "procs", "nodes",
                                    "walltime", "exit", "user"])

    def num(col: str) -> np.ndarray:
        return pd.to_numeric(d[col], errors="coerce").to_numpy(dtype=float)
    return _from_times(d["id"].to_numpy(), num("qtime"), num("start"), num("end"),
                       d["procs"].to_numpy(dtype=float), d["nodes"].to_numpy(dtype=np.int64),
                       d["walltime"].to_numpy(dtype=float), d["exit"].to_numpy(), "pbs",
                       "the PBS Pro complex of the log", notes, dropped, d["user"].to_numpy(),
                       eligible=num("etime"))


PARSERS = {"swf": parse_swf, "sacct": parse_sacct, "pbs": parse_pbs}


def read_log(path: Path | str, fmt: str = "", max_procs: int | None = None) -> Log:
    """The log at `path` in `fmt` (guessed from its content where empty), its unusable jobs
    dropped and counted (:func:`clean`).  ParamError, one line: not a log in any of the
    formats, an empty log, no job left."""
    text = read_text(path)
    if not text.strip() or not any(s.strip() and not s.lstrip().startswith(";")
                                   for s in text.splitlines()):
        raise ParamError(f"{path}: the log is empty (no job line)")
    if fmt and fmt not in FORMATS:
        raise ParamError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    fmt = fmt or guess_format(text) or ""
    if not fmt:
        raise ParamError(f"{path}: not a workload log: {EXPECTED}")
    log = PARSERS[fmt](text, str(path))
    if max_procs:
        log.max_procs = int(max_procs)
    return clean(log, str(path))


def clean(log: Log, source: str = "") -> Log:
    """Drop, count and say: an unknown wait or run time, a negative run time, a start before
    its submit, no processors, more processors than the machine's MaxProcs.  A requested
    time over LONGEST_REQUEST_S is taken as unknown, and said.  ParamError where no job is
    left."""
    j = log.jobs
    endless = (j["req_time"] > LONGEST_REQUEST_S).to_numpy()
    if endless.any():
        log.notes.append(f"{int(endless.sum())} job(s) requested more than a year (up to "
                         f"{j['req_time'].max() / 86400 / 365.25:,.0f} years: 'unlimited' "
                         "written as a number?): their requested time taken as unknown")
        j = j.assign(req_time=j["req_time"].where(~endless, np.nan))
    rules = [("unknown wait or run time (-1)", j["wait"].isna() | j["run"].isna()),
             ("a negative run time", j["run"] < 0),
             ("a start before its submit (negative wait" + (
                 "; local times across a change of daylight-saving time?)"
                 if log.fmt == "sacct" else ")"), j["wait"] < 0),
             ("no processors logged", ~(j["procs"] > 0) & ~(j["nodes"] > 0))]
    if log.max_procs:
        rules.append((f"more processors than MaxProcs ({log.max_procs})",
                      j["procs"] > log.max_procs))
    gone = np.zeros(len(j), dtype=bool)
    for why, mask in rules:
        new = mask.to_numpy() & ~gone
        if new.any():
            log.dropped[why] = int(new.sum())
            log.notes.append(f"{int(new.sum())} job(s) with {why}: dropped")
            gone |= new
    if gone.all():
        raise ParamError(f"{source or 'the log'}: no job left to replay"
                         + (f" ({'; '.join(log.notes)})" if log.notes else ""))
    log.jobs = j[~gone].sort_values(["submit", "job"], kind="stable").reset_index(drop=True)
    return log
