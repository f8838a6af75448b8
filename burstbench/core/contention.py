"""Was a configuration measured alone?  The CPU time other processes took during it.

Two sweeps on one machine share its cores and each halves the other's numbers, silently.
Around each configuration the sweep samples the machine's busy CPU time (``/proc/stat``:
every process, every core) and its own (this process and the children it waited for: the
configuration, its launcher and ranks).  What the machine spent beyond that went to other
processes; their share of the machine's CPU time over the configuration's window is stored
in each of its rows (``others_cpu``), and the configuration is flagged ``contended`` when it
is above CONTENDED_SHARE.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterable
from dataclasses import dataclass

#: Above this share of the machine's CPU time taken by other processes during a
#: configuration (a quarter: half a core of a 2-core VM), it is flagged contended.
CONTENDED_SHARE = 0.25
#: Below this many CPU seconds taken by others nothing is flagged: /proc/stat counts in
#: clock ticks (10 ms), too coarse to judge a configuration of a few ticks.
MIN_OTHERS_S = 0.05


@dataclass(frozen=True)
class Sample:
    """The clock, the machine's busy CPU seconds (None without /proc) and this process's own
    (itself and its waited-for children), at one moment."""

    wall: float
    busy: float | None
    own: float


def machine_busy_s() -> float | None:
    """CPU seconds every core of the machine spent busy since boot; None without /proc."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal: all but idle and iowait (guest is in user)
    return sum(fields[i] for i in (0, 1, 2, 5, 6, 7) if i < len(fields)) / os.sysconf(
        "SC_CLK_TCK")


def sample(serving: Iterable[int] = ()) -> Sample:
    """The moment now (see Sample); `serving`: the live children not yet waited for that
    measure for us (burstbench.core.servers), whose CPU time is ours too."""
    own = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))
    return Sample(time.monotonic(), machine_busy_s(), own + sum(map(cpu_seconds, serving)))


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (its state first, its parent
    second, its user and system clock ticks 12th and 13th); None where it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_seconds(pid: int) -> float:
    """CPU seconds process `pid` (all its threads) has used so far (0 where it is gone)."""
    fields = stat_fields(pid)
    try:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0
    except (ValueError, IndexError):
        return 0.0


def others_share(before: Sample, after: Sample, cores: int | None = None) -> float | None:
    """The share (0 to 1) of the machine's CPU time that other processes took between two
    samples; None where it cannot be known (no /proc, no time passed)."""
    cores = cores or os.cpu_count() or 1
    wall = after.wall - before.wall
    if before.busy is None or after.busy is None or wall <= 0:
        return None
    others = max(0.0, (after.busy - before.busy) - (after.own - before.own))
    return min(1.0, others / (wall * cores))


def is_contended(share: float | None, seconds: float, cores: int | None = None) -> bool:
    """True when others took more than CONTENDED_SHARE of the machine over `seconds`, and
    enough CPU time (MIN_OTHERS_S) for the clock ticks to say so."""
    cores = cores or os.cpu_count() or 1
    return share is not None and share > CONTENDED_SHARE and \
        share * seconds * cores > MIN_OTHERS_S


def columns(before: Sample, after: Sample) -> dict:
    """What a configuration's rows record: others_cpu (rounded share, or None) and contended."""
    share = others_share(before, after)
    return {"others_cpu": None if share is None else round(share, 3),
            "contended": is_contended(share, after.wall - before.wall)}

