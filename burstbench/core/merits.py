"""Figures of merit: the values a benchmark is judged by, per VM, measured here (each VM's
newest complete run, else its newest: store.merit_runs; test runs never; ``newest`` marks
it) or published (the study's tables), in one table that the cost section and the burst
decision read by merit name, never by benchmark.

A benchmark's ``merits`` hook (burstbench.registry) returns :class:`Merits`.  Each row is one
value: ``vm``, ``merit`` (e.g. ``memory_bandwidth_gbs``, ``solve_time_s``), ``value``,
``unit``, ``source`` ("measured here", "the study"), ``data`` (the run folder or reference
table it came from) and whatever configuration columns say what was measured (``label``,
``problem``, ``nodes``, ``cores``...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

COLUMNS = ["vm", "merit", "value", "unit", "source", "data"]


@dataclass
class Merits:
    """A benchmark's figures of merit, the runs they came from (their parameters: a VM's
    own price) and what could not be used."""

    table: pd.DataFrame
    runs: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def of(self, merit: str) -> pd.DataFrame:
        """The rows of one merit."""
        return self.table[self.table["merit"] == merit] if len(self.table) else self.table


def frame(rows: list[dict]) -> pd.DataFrame:
    """Merit rows as a table with at least COLUMNS, in the order given."""
    return pd.DataFrame(rows, columns=list(dict.fromkeys(
        COLUMNS + [k for r in rows for k in r])))


def newest(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of each VM's merit run (store.merit_runs), and every published row (they
    carry no ``newest``): what a price or a machine is taken from, where older runs only
    validate."""
    if "newest" not in rows:
        return rows
    return rows[rows["newest"].map(lambda v: True if pd.isna(v) else bool(v))]


def merit(merits: list[Merits], name: str) -> pd.DataFrame:
    """The rows of merit `name`, whichever benchmarks give it, in the registry's order."""
    parts = [m.of(name) for m in merits if len(m.of(name))]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)
