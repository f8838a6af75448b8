"""Reading the study's reference tables (data/reference/*.csv) and matching VM names.

Shared by the report, the cost model and the cost report: a table that cannot be read or
lacks a column is a problem named in one line, never an exception, so that a report still
builds from what is there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd


def vm_key(name: str) -> str:
    """Case- and punctuation-free VM name, so 'HB120rs_v3' matches 'hb120rs-v3'."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def read_table(path: Path | str, required: list[str], problems: list[str],
               kind: str = "reference table", left_out: str = "") -> pd.DataFrame | None:
    """A CSV with at least the `required` columns, or None and a problem naming the file and
    what is wrong (`kind` names the table in it, `left_out` is appended to a missing-column
    message)."""
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: unreadable {kind} ({str(exc).splitlines()[0]})")
        return None
    missing = [c for c in required if c not in df.columns]
    if missing:
        problems.append(f"{path}: missing column(s) {', '.join(missing)}{left_out}")
        return None
    return df


def read_reference(ref_dir: Path | str, name: str, required: list[str],
                   problems: list[str]) -> pd.DataFrame:
    """data/reference/<name>, or an empty frame with the required columns and a problem."""
    df = read_table(Path(ref_dir) / name, required, problems)
    return pd.DataFrame(columns=required) if df is None else df
