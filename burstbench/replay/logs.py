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
        """Processors per node of the log's machine, from its header."""
        if self.max_nodes and self.max_procs:
            return self.max_procs / self.max_nodes
        return None


def read_text(path: Path | str) -> str:
    """A log's text (gzip where it ends in .gz); ParamError, one line, where it cannot be read."""
    p = Path(path)
    try:
        raw = gzip.open(p, "rb").read() if p.suffix == ".gz" else p.read_bytes()
    except (OSError, EOFError) as exc:
        raise ParamError(f"{p}: cannot read the log: {getattr(exc, 'strerror', None) or exc}"
                         ) from None
    return raw.decode("utf-8", errors="replace")


def guess_format(text: str) -> str | None:
    """'swf', 'sacct' or 'pbs' from the first lines that say, or None."""
    for line in text.splitlines()[:200]:
        s = line.strip()
        if not s:
            continue
        if s.startswith(";"):
            return "swf"
        if "|" in s and s.split("|")[0] == "JobID":
            return "sacct"
        if _PBS.match(s):
            return "pbs"
        toks = s.split()
        if len(toks) == len(SWF_FIELDS) and all(_number(t) for t in toks):
            return "swf"
        return None
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


def parse_swf(text: str, source: str = "") -> Log:
    """SWF: every field as the format defines it (-1: unknown), the header's Computer,
    Installation, MaxNodes, MaxProcs, UnixStartTime and Acknowledge read."""
    header: dict[str, str] = {}
    rows, bad = [], []
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
    notes = [_lines_note(f"without SWF's {len(SWF_FIELDS)} fields", bad)] if bad else []
    try:  # pandas' C reader: a fifth of the time of numpy's conversion of the strings
        d = pd.read_csv(io.StringIO("\n".join(rows)), sep=r"\s+", header=None,
                        names=list(SWF_FIELDS), dtype=float) if rows else \
            pd.DataFrame(columns=list(SWF_FIELDS), dtype=float)
    except ValueError:
        raise ParamError(f"{source or 'the log'}: SWF fields must be numbers") from None
    procs = np.where(d["procs"] > 0, d["procs"], d["req_procs"])
    unknown = d["req_time"] <= 0
    jobs = pd.DataFrame({"job": d["job"].astype(np.int64), "submit": d["submit"],
                         "wait": d["wait"].where(d["wait"] != -1, np.nan),
                         "run": d["run"].where(d["run"] != -1, np.nan),
                         "procs": procs, "nodes": np.zeros(len(d), dtype=np.int64),
                         "req_time": d["req_time"].where(~unknown, np.nan),
                         "status": d["status"].astype(np.int64),
                         "queue": d["queue"].astype(np.int64),
                         "user": d["user"].astype(np.int64)})

    def integer(key: str) -> int | None:
        try:
            return int(float(header[key]))
        except (KeyError, ValueError):
            return None
    machine = ", ".join(v for v in (header.get("Installation"), header.get("Computer")) if v)
    log = Log(jobs, "swf", machine or "the log's machine (its SWF header names none)",
              integer("MaxNodes"), integer("MaxProcs"),
              float(start) if (start := integer("UnixStartTime")) is not None else None,
              notes, {"wrong field count": len(bad)} if bad else {},
              header.get("Acknowledge", ""))
    if log.max_nodes is not None:
        log.machine += f", {log.max_nodes} nodes"
    return log


def limit_seconds(t: str) -> float:
    """Slurm's time limit ([days-]hh:mm:ss, mm:ss, minutes) in seconds; NaN for UNLIMITED,
    Partition_Limit or anything else."""
    t = t.strip()
    days = 0
    if "-" in t:
        d, _, t = t.partition("-")
        if not d.isdigit():
            return math.nan
        days = int(d)
    parts = t.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return math.nan
    nums = [int(p) for p in parts]
    if len(nums) == 1:
        return days * 86400 + nums[0] * 60.0
    if len(nums) == 2:
        return days * 86400 + nums[0] * 60.0 + nums[1]
    return days * 86400 + nums[0] * 3600.0 + nums[1] * 60 + nums[2]


def _epoch(values: pd.Series) -> np.ndarray:
    """Timestamps (ISO, or Unix seconds) as Unix seconds; NaN for Unknown/None."""
    num = pd.to_numeric(values, errors="coerce")
    if num.notna().all():
        return num.to_numpy(dtype=float)
    t = pd.to_datetime(values.where(~values.isin(["Unknown", "None", ""])), errors="coerce",
                       format="ISO8601")
    out = (t - pd.Timestamp(0)).dt.total_seconds().to_numpy(dtype=float)
    return np.where(num.notna(), num.to_numpy(dtype=float), out)


def _codes(names) -> np.ndarray:
    """User names as numbers (in order of first appearance; -1 for an empty name)."""
    names = pd.Series(names, dtype=object)
    codes, _ = pd.factorize(names.where(names.astype(str) != "", None))
    return codes.astype(np.int64)


def _from_times(jobid, submit, start, end, procs, nodes, req_time, state, fmt: str,
                machine: str, notes: list[str], dropped: dict[str, int], user=None) -> Log:
    """A Log from absolute times: jobs that never started (no start or end) are dropped,
    counted and said."""
    never = np.isnan(start) | np.isnan(end) | np.isnan(submit)
    if never.any():
        dropped["never started or no end"] = int(never.sum())
        notes.append(f"{int(never.sum())} job(s) with no submit, start or end time (never "
                     "started, or still running): not replayed")
    keep = ~never
    t0 = float(np.nanmin(submit[keep])) if keep.any() else 0.0
    jobs = pd.DataFrame({"job": np.asarray(jobid)[keep], "submit": submit[keep] - t0,
                         "wait": start[keep] - submit[keep], "run": end[keep] - start[keep],
                         "procs": np.asarray(procs, dtype=float)[keep],
                         "nodes": np.asarray(nodes, dtype=np.int64)[keep],
                         "req_time": np.asarray(req_time, dtype=float)[keep],
                         "status": np.asarray(state)[keep], "queue": 0,
                         "user": (_codes(user) if user is not None
                                  else np.full(len(keep), -1, np.int64))[keep]})
    return Log(jobs, fmt, machine, start_time=t0 if keep.any() else None, notes=notes,
               dropped=dropped)


def parse_sacct(text: str, source: str = "") -> Log:
    """``sacct --parsable2`` (or ``sacct -c``, the job completion log, with the same
    columns): one line per job; job steps (JobID with a '.') are skipped."""
    lines = text.splitlines()
    first = next((i for i, s in enumerate(lines) if s.strip()), None)
    head = lines[first].strip().split("|") if first is not None else []
    missing = [c for c in SACCT_FIELDS if c not in head]
    if missing:
        raise ParamError(f"{source or 'the log'}: sacct output without the column(s) "
                         f"{', '.join(missing)} (give sacct --parsable2 --format="
                         f"{','.join(SACCT_FIELDS)})")
    rows, bad = [], []
    for i, line in enumerate(lines[(first or 0) + 1:], (first or 0) + 2):
        if not line.strip():
            continue
        f = line.rstrip("\n").split("|")
        if len(f) != len(head):
            bad.append(i)
            continue
        rows.append(f)
    notes = [_lines_note(f"without the header's {len(head)} fields", bad)] if bad else []
    dropped = {"wrong field count": len(bad)} if bad else {}
    d = pd.DataFrame(rows, columns=head).astype(str)
    d = d[~d["JobID"].str.contains(".", regex=False)]
    state = d["State"].str.split().str[0].fillna("")
    return _from_times(
        d["JobID"].to_numpy(), _epoch(d["Submit"]), _epoch(d["Start"]), _epoch(d["End"]),
        pd.to_numeric(d["NCPUS"], errors="coerce").fillna(0).to_numpy(),
        pd.to_numeric(d["NNodes"], errors="coerce").fillna(0).to_numpy(),
        d["Timelimit"].map(limit_seconds).to_numpy(dtype=float), state.to_numpy(), "sacct",
        "the Slurm cluster of the log", notes, dropped,
        d["User"].to_numpy() if "User" in d else None)


def parse_pbs(text: str, source: str = "") -> Log:
    """PBS Pro accounting: the ``E`` (job ended) records' qtime, start, end and
    Resource_List (ncpus, nodect, walltime); other records are skipped."""
    rows, bad = [], []
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        f = s.split(";", 3)
        if len(f) != 4 or not _PBS.match(s):
            bad.append(i)
            continue
        if f[1] != "E":
            continue
        kv = dict(p.split("=", 1) for p in f[3].split() if "=" in p)
        rows.append((f[2], kv.get("qtime"), kv.get("start"), kv.get("end"),
                     kv.get("Resource_List.ncpus", "0"), kv.get("Resource_List.nodect", "0"),
                     kv.get("Resource_List.walltime", ""), kv.get("Exit_status", ""),
                     kv.get("user", "")))
    notes = [_lines_note("not a PBS accounting record", bad)] if bad else []
    dropped = {"wrong field count": len(bad)} if bad else {}
    d = pd.DataFrame(rows, columns=["id", "qtime", "start", "end", "ncpus", "nodect",
                                    "walltime", "exit", "user"])

    def num(col: str) -> np.ndarray:
        return pd.to_numeric(d[col], errors="coerce").to_numpy(dtype=float)
    return _from_times(d["id"].to_numpy(), num("qtime"), num("start"), num("end"),
                       np.nan_to_num(num("ncpus")), np.nan_to_num(num("nodect")),
                       d["walltime"].map(limit_seconds).to_numpy(dtype=float),
                       d["exit"].to_numpy(), "pbs", "the PBS Pro complex of the log",
                       notes, dropped, d["user"].to_numpy())


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
    its submit, no processors, more processors than the machine's MaxProcs.  ParamError
    where no job is left."""
    j = log.jobs
    rules = [("unknown wait or run time (-1)", j["wait"].isna() | j["run"].isna()),
             ("a negative run time", j["run"] < 0),
             ("a start before its submit (negative wait)", j["wait"] < 0),
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
