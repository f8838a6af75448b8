"""The results table: its columns (the common ones, and those a benchmark declares), its
order, and reading it back from CSV."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from burstbench.core.store.files import StoreError

#: Columns every results table has, whatever the benchmark: first the run and what ran,
#: last the measured value and its bookkeeping (others_cpu, contended: the share of the
#: machine's CPU other processes took while it ran, and whether that was too much: see
#: burstbench.core.contention).  Between them come the configuration
#: columns the benchmark declares (its Benchmark.columns): see table_columns().
HEAD = ["run_id", "vm", "host", "benchmark", "label", "impl"]
TAIL = ["metric", "value", "unit", "repetition", "key", "timestamp", "others_cpu", "contended"]
REQUIRED = ["run_id", "vm", "benchmark", "label", "metric", "value", "unit", "key"]


def table_columns(declared: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The columns of a benchmark's table: HEAD, its `declared` configuration columns, TAIL."""
    return list(dict.fromkeys([*HEAD, *declared, *TAIL]))


def undeclared(rows: list[dict], declared: tuple[str, ...] | list[str]) -> list[str]:
    """Keys of `rows` that are no column of the table (sorted)."""
    allowed = set(table_columns(declared))
    return sorted({k for r in rows for k in r} - allowed)
def ordered(df: pd.DataFrame, columns: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """`df` with every column of table_columns(`columns`) (missing ones empty), in that
    order, then the others it holds."""
    cols = table_columns(columns)
    for c in cols:
        if c not in df.columns:
            df[c] = pd.NA
    return df[cols + [c for c in df.columns if c not in cols]]


def read_table(path: Path, columns: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """A results CSV, as ordered() with `columns`; StoreError when it is not one."""
    try:
        df = pd.read_csv(path, dtype={"key": str, "run_id": str, "vm": str, "label": str})
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise StoreError(f"{path}: unreadable table ({str(exc).splitlines()[0]})") from exc
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise StoreError(f"{path}: not a results table (missing columns {', '.join(missing)})")
    if len(df) and not pd.api.types.is_numeric_dtype(df["value"]):
        raise StoreError(f"{path}: column 'value' holds non-numbers")
    return ordered(df, columns)
