"""Tables of the report as CSV and Markdown: one number format per column, units in the
headers, numbers right-aligned, no extra dependency."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from burstbench.core import store

#: Markdown headers for columns whose CSV names are read by code: the unit spelled out.
COLUMN_HEADERS = {
    "jpy_per_node_hour": "price (JPY/node-h)",
    "gbs_per_1000_jpy_h": "GB/s per 1,000 JPY/node-h",
    "jpy_per_solve": "cost per solve (JPY)",
    "evictions_per_h": "evictions per hour",
    "l3_cache_mb_per_socket": "L3 cache per socket (MB)",
    "peak_rss_gb": "peak RSS (GB)",
    "triad_gbs": "Triad (GB/s)",
    "cv": "CV",
}


#: Unit suffixes of snake_case column names, longest first.
UNIT_SUFFIXES = (("_ms_per_it", "ms per iteration"), ("_mib_s", "MiB/s"), ("_bytes", "bytes"),
                 ("_gbps", "Gbit/s"), ("_gbs", "GB/s"), ("_gib", "GiB"), ("_gb", "GB"),
                 ("_jpy", "JPY"), ("_us", "µs"), ("_s", "s"), ("_h", "h"))


def column_header(name: str) -> str:
    """The Markdown header of a table column: 'solve_min_s' -> 'solve min (s)',
    'jpy_per_node_hour' -> 'price (JPY/node-h)'; names without a unit suffix unchanged."""
    name = str(name)
    if name in COLUMN_HEADERS:
        return COLUMN_HEADERS[name]
    if re.fullmatch(r"[a-z0-9_]+", name):
        for suffix, unit in UNIT_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                return f"{name[:-len(suffix)].replace('_', ' ')} ({unit})"
    return name


def _is_number(v: object) -> bool:
    return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            and not (isinstance(v, float) and math.isnan(v)))


def column_format(values) -> Callable[[float], str] | None:
    """One number format for a whole column, chosen from its values (None: no numbers).

    Whole numbers: no decimals, thousands separators if any reaches 1,000.  Others: fixed
    decimals, enough for three significant digits of the smallest non-zero value but no
    more than the values carry (at most 6); scientific for all when the values span more
    than six decades or go below 0.001.
    """
    nums = [float(v) for v in values if _is_number(v)]
    finite = [x for x in nums if math.isfinite(x)]
    if not finite:
        return None if not nums else str
    big = max(abs(x) for x in finite) >= 1000
    if all(x.is_integer() for x in finite):
        return lambda x: f"{x:,.0f}" if big else f"{x:.0f}"
    nonzero = [abs(x) for x in finite if x != 0]
    lo, hi = min(nonzero), max(nonzero)
    if lo < 1e-3 or hi / lo > 1e6:
        return lambda x: f"{x:.2e}"
    wanted = max(0, 2 - math.floor(math.log10(lo)))
    carried = next((k for k in range(7) if all(abs(round(x, k) - x) <= 1e-9 * max(1, abs(x))
                                                for x in finite)), 6)
    d = min(wanted, carried, 6)
    return lambda x: f"{x:,.{d}f}" if big else f"{x:.{d}f}"


def markdown_table(df: pd.DataFrame, floatfmt: str | None = None) -> str:
    """A GitHub Markdown table (no extra dependency): one number format per column (see
    :func:`column_format`; `floatfmt` forces one for every non-integer column), numbers
    right-aligned, units in the headers (:func:`column_header`)."""
    formats = {}
    for col in df.columns:
        f = column_format(df[col])
        if floatfmt and f is not None and not all(
                float(v).is_integer() for v in df[col] if _is_number(v)):
            f = lambda x, spec=floatfmt: format(x, spec)  # noqa: E731
        formats[col] = f

    def cell(v: object, f) -> str:
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return ""
        if f is not None and _is_number(v):
            return f(float(v))  # type: ignore[arg-type]  # _is_number said it is one
        return str(v).replace("|", "\\|")

    head = "| " + " | ".join(column_header(c).replace("|", "\\|") for c in df.columns) + " |"
    sep = "|" + "|".join("---:" if formats[c] is not None else "---" for c in df.columns) + "|"
    body = ["| " + " | ".join(cell(v, formats[c]) for v, c in zip(row, df.columns)) + " |"
            for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *body]) + "\n"


def write_table(df: pd.DataFrame, stem: Path) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv, md = stem.with_suffix(".csv"), stem.with_suffix(".md")
    store.atomic_write(csv, df.to_csv(index=False))
    store.atomic_write(md, markdown_table(df))
    return [csv, md]
