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
PBS_RECORD = re.compile(r"^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Za-z];")
#: Notes list at most this many line numbers, then the count.
SHOW_LINES = 5


@dataclass
class Log:
    """A log's jobs (columns: job, submit, wait, run, procs, nodes (0: not logged),
    req_time, status, queue (SWF's number; 0 in sacct's and PBS's), partition (SWF's
    number; sacct's Partition and PBS's queue as numbers in order of first appearance),
    user (-1: unknown)), where it came from, and what could not be used."""

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
        if PBS_RECORD.match(s):
            return "pbs"
        toks = s.split()
        if len(toks) == len(SWF_FIELDS) and all(is_number(t) for t in toks):
            return "swf"
    return None


def sacct_delimiter(line: str) -> str | None:
    """The delimiter of a sacct header line (one of its fields is JobID: ``--parsable2``'s
    '|', or ``--delimiter``'s ',', ';' or a tab), or None where the line is not one."""
    for d in ("|", ",", ";", "\t"):
        if "JobID" in (f.strip() for f in line.strip().split(d)):
            return d
    return None


def is_number(t: str) -> bool:
    try:
        float(t)
    except ValueError:
        return False
    return True


def lines_note(what: str, lines: list[int]) -> str:
    shown = ", ".join(str(n) for n in lines[:SHOW_LINES])
    more = f" and {len(lines) - SHOW_LINES} more" if len(lines) > SHOW_LINES else ""
    return f"{len(lines)} line(s) {what} (line {shown}{more}): not read"


class Drops:
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
        finite = np.array([all(is_number(t) and math.isfinite(float(t)) for t in r.split())
                           for r in rows], dtype=bool)
        d = None
    if not finite.all():
        notes.append(lines_note("with a field that is not a number",
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
#: A submit time further than this from the log's median one is a corrupt field (1e30).
LONGEST_SPAN_S = 50 * 365.25 * 86400.0


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
    notes = [lines_note(f"without SWF's {len(SWF_FIELDS)} fields", bad)] if bad else []
    dropped = {"wrong field count": len(bad)} if bad else {}
    d, kept = _swf_numbers(rows, lines, notes)
    if len(kept) < len(rows):
        dropped["a field not a number"] = len(rows) - len(kept)
    drop = Drops(len(d), notes, dropped)
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
                     "queue of the whole machine; the learned wait reads each job's "
                     "partition and its partition's own queue")
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
                         "partition": d["partition"].astype(np.int64),
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
    from burstbench.replay import accounting  # sacct's and PBS's readers, which use Log

    parse = {"swf": parse_swf, "sacct": accounting.parse_sacct, "pbs": accounting.parse_pbs}
    log = parse[fmt](text, str(path))
    if max_procs:
        log.max_procs = int(max_procs)
    return clean(log, str(path))


def clean(log: Log, source: str = "") -> Log:
    """Drop, count and say: an unknown wait or run time, a negative run time, a start before
    its submit, no processors, more processors than the machine's MaxProcs, a submit time
    more than LONGEST_SPAN_S from the log's median one.  A requested
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
             ("no processors logged", ~(j["procs"] > 0) & ~(j["nodes"] > 0)),
             (f"a submit time over {LONGEST_SPAN_S / (365.25 * 86400):.0f} years from the "
              "log's median (a corrupt field?)",
              (j["submit"] - j["submit"].median()).abs() > LONGEST_SPAN_S)]
    if log.max_procs:
        rules.append((f"more processors than MaxProcs ({log.max_procs})",
                      j["procs"] > log.max_procs))
    drop = Drops(len(j), log.notes, log.dropped)
    for why, mask in rules:
        drop(why, mask.to_numpy(), f"with {why}: dropped")
    if drop.gone.all():
        raise ParamError(f"{source or 'the log'}: no job left to replay"
                         + (f" ({'; '.join(log.notes)})" if log.notes else ""))
    log.jobs = j[~drop.gone].sort_values(["submit", "job"], kind="stable").reset_index(
        drop=True)
    return log
