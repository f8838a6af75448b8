"""Cost model: prices as data, job cost, spot evictions, cost-performance, break-even.

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

from burstbench.reference import read_table, vm_key

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


def spot_expected(work_h: float, interval_h: float, rate_per_h: float,
                  restart_h: float = 5 / 60, checkpoint_h: float = 0.0) -> dict:
    """Expected wall time, billed time and evictions of a checkpointed job on spot VMs.

    The job's `work_h` hours are cut into segments of `interval_h` of work plus
    `checkpoint_h` to save it; an eviction (Poisson, `rate_per_h`) loses the
    segment in progress and costs `restart_h` before the requeued job runs
    again (not billed: no VM is up).  A segment of length s then takes
    (1/rate + restart) (e^{rate s} - 1) in expectation; rate 0 gives s.
    """
    if work_h < 0 or interval_h <= 0 or rate_per_h < 0 or restart_h < 0 or checkpoint_h < 0:
        raise ValueError("work, restart and checkpoint times must be >= 0, the interval > 0, "
                         "the eviction rate >= 0")
    full, rest = divmod(work_h, interval_h)
    segments = [interval_h + checkpoint_h] * int(full) + ([rest] if rest > 1e-12 else [])
    time = billed = evictions = 0.0
    for s in segments:
        if rate_per_h == 0:
            t, e = s, 0.0
        else:
            e = math.expm1(rate_per_h * s)  # expected evictions before the segment completes
            t = (1.0 / rate_per_h + restart_h) * e
        time += t
        evictions += e
        billed += t - e * restart_h
    return {"time_h": time, "billed_h": billed, "evictions": evictions}


def spot_simulate(work_h: float, interval_h: float, rate_per_h: float, restart_h: float = 5 / 60,
                  checkpoint_h: float = 0.0, samples: int = 4000,
                  seed: int = 0) -> dict[str, np.ndarray]:
    """Monte Carlo of the same model: arrays of wall and billed hours, one per sample."""
    spot_expected(work_h, interval_h, rate_per_h, restart_h, checkpoint_h)  # checks arguments
    rng = np.random.default_rng(seed)
    full, rest = divmod(work_h, interval_h)
    segments = [interval_h + checkpoint_h] * int(full) + ([rest] if rest > 1e-12 else [])
    wall = np.zeros(samples)
    billed = np.zeros(samples)
    for s in segments:
        done = np.zeros(samples, bool)
        while not done.all():
            n = int((~done).sum())
            up = rng.exponential(1 / rate_per_h, n) if rate_per_h > 0 else np.full(n, np.inf)
            ok = up >= s
            ran = np.where(ok, s, up)
            idx = np.flatnonzero(~done)
            wall[idx] += ran + np.where(ok, 0.0, restart_h)
            billed[idx] += ran
            done[idx[ok]] = True
    return {"time_h": wall, "billed_h": billed}
