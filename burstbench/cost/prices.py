"""Prices as data, in yen per node-hour, and the cost of a job on them.

Prices come from ``data/reference/prices_vm.csv`` (the study's Table 4: per VM,
region and billing) and ``prices_onprem.csv`` (the supercomputer's node-hour
fees), plus any VM price a run's parameters give (``vm_price``).  Amounts are
in yen; USD prices are converted at ``usd_jpy`` (the study: 145).  A table
with a missing column, a negative price or an unknown currency is reported by
name and its bad rows left out: the rest of the report still builds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from burstbench.core.reference import read_table, vm_key

CURRENCIES = ("JPY", "USD")


VM_PRICE_COLUMNS = ["vm", "region", "billing", "price_per_hour", "currency", "source"]


ONPREM_COLUMNS = ["system", "price_per_node_hour", "currency", "source"]


@dataclass
class Prices:
    """One price per (system, region, billing) in yen per node-hour, and what was refused."""

    table: pd.DataFrame
    problems: list[str] = field(default_factory=list)

    def lookup(self, system: str, billing: str = "payg", region: str = "") -> float:
        """Yen per node-hour, or NaN when no price is known."""
        t = self.table
        hit = t[(t["key"] == vm_key(system)) & (t["billing"] == billing)
                & ((t["region"] == region) if region else True)]
        return float(hit["jpy_per_hour"].iloc[0]) if len(hit) else math.nan


def _to_jpy(df: pd.DataFrame, price_col: str, usd_jpy: float, where: str,
            problems: list[str]) -> pd.DataFrame:
    """Validate prices and currencies row by row; convert to yen."""
    bad_cur = ~df["currency"].astype(str).str.upper().isin(CURRENCIES)
    for r in df[bad_cur].itertuples():
        problems.append(f"{where}: unknown currency '{r.currency}' (known: "
                        f"{', '.join(CURRENCIES)}); row left out")
    price = pd.to_numeric(df[price_col], errors="coerce")
    bad_price = price.isna() | (price < 0)
    for i in df.index[bad_price & ~bad_cur]:
        problems.append(f"{where}: price '{df.loc[i, price_col]}' of "
                        f"{df.loc[i].iloc[0]} is not a non-negative number; row left out")
    ok = ~bad_cur & ~bad_price
    out = df[ok].copy()
    rate = np.where(out["currency"].str.upper() == "USD", usd_jpy, 1.0)
    out["jpy_per_hour"] = price[ok] * rate
    return out


def load_prices(ref_dir: Path, usd_jpy: float = 145.0,
                extra: list[dict] | None = None) -> Prices:
    """All known prices in yen per node-hour: VMs (by region and billing) and on-premise fees.

    `extra` rows ({vm, region, billing, price_per_hour, currency, source}) add
    VMs the reference tables lack, e.g. from a run's ``vm_price`` parameter.
    """
    if not usd_jpy > 0:
        raise ValueError(f"the exchange rate must be positive, not {usd_jpy}")
    problems: list[str] = []
    frames = []
    vm = read_table(Path(ref_dir) / "prices_vm.csv", VM_PRICE_COLUMNS, problems, "price table",
                    "; table left out")
    if vm is not None:
        frames.append(_to_jpy(vm, "price_per_hour", usd_jpy, "prices_vm.csv", problems)
                      .assign(system=lambda d: d["vm"], kind="cloud"))
    op = read_table(Path(ref_dir) / "prices_onprem.csv", ONPREM_COLUMNS, problems, "price table",
                    "; table left out")
    if op is not None:
        frames.append(_to_jpy(op, "price_per_node_hour", usd_jpy, "prices_onprem.csv", problems)
                      .assign(region="on-premise", billing="onprem_fee", kind="onprem"))
    if extra:
        ex = pd.DataFrame(extra)
        missing = [c for c in VM_PRICE_COLUMNS if c not in ex.columns]
        if missing:
            problems.append(f"vm_price of a run: missing {', '.join(missing)}; left out")
        else:
            frames.append(_to_jpy(ex, "price_per_hour", usd_jpy, "vm_price of a run", problems)
                          .assign(system=lambda d: d["vm"], kind="cloud"))
    cols = ["system", "kind", "region", "billing", "jpy_per_hour", "source"]
    table = pd.concat([f[cols] for f in frames], ignore_index=True) if frames else \
        pd.DataFrame(columns=cols)
    table["key"] = table["system"].map(vm_key)
    return Prices(table, problems)


def job_cost(jpy_per_node_hour: float, nodes: int, hours: float, storage_jpy_month: float = 0.0,
             storage_share: float = 0.0, transfer_tb: float = 0.0,
             transfer_jpy_per_tb: float = 0.0) -> float:
    """nodes x hours x price, plus a share of a month's storage and data transfer out."""
    if nodes < 0 or hours < 0 or jpy_per_node_hour < 0:
        raise ValueError("nodes, hours and price must not be negative")
    return (nodes * hours * jpy_per_node_hour + storage_share * storage_jpy_month
            + transfer_tb * transfer_jpy_per_tb)
