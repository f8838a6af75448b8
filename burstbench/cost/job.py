"""The whole cost of a job on a cloud VM and on the supercomputer, data included.

A job on a VM: deploy its nodes (the study: about 5 minutes from submission to start,
billed: the VMs are up), stage its input in, compute, stage its output out, keep its data
on the VM's shared storage for some months.  Its cost:

    nodes x billed hours x price per node-hour        (pay-as-you-go; spot: the expected
                                                       billed hours of cost.spot)
  + storage: Azure NetApp Files bills provisioned capacity by the hour, and a pool is
    shared by the jobs that use it: while the job runs, the cheapest tier and capacity that
    hold its data and deliver the staging throughput, max(the data, throughput / the tier's
    MiB/s per TiB) TiB x the tier's price per TiB-month x hours / 730; then its data on the
    cheapest tier for the months it stays (Table 5 prices per 4 TiB-month; 730 hours per
    month, as Azure bills)
  + data transfer out: output GB x the price per GB (Table 5's 10 TB per month; ingress
    is free)

On the supercomputer: nodes x hours x its fee per node-hour, plus its storage fee for the
data's months; no staging (the data is there), no egress; the queue wait is the caller's.

Units are explicit: GB = 10^9 B, TB = 10^12 B (data sizes, transfer prices), TiB = 2^40 B
(ANF capacity), MiB/s = 2^20 B/s (throughput), yen (JPY) throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TIB, MIB, GB, TB = 2 ** 40, 2 ** 20, 1e9, 1e12
#: Hours in a month, as Azure bills by the hour.
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class Data:
    """What a job moves and keeps: input and output in GB, months they stay stored."""

    input_gb: float
    output_gb: float
    months: float

    def __post_init__(self) -> None:
        for name in ("input_gb", "output_gb", "months"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number, not {v!r}")

    @property
    def total_gb(self) -> float:
        return self.input_gb + self.output_gb


@dataclass(frozen=True)
class Tier:
    """An Azure NetApp Files tier: MiB/s per TiB provisioned, JPY per TiB-month."""

    name: str
    mib_s_per_tib: float
    jpy_per_tib_month: float


@dataclass(frozen=True)
class Storage:
    """Shared storage for a job: the tier and TiB provisioned while it runs (for the
    staging throughput, `mib_s`), the tier kept for its data after, and their cost."""

    tier: str
    tib: float
    mib_s: float
    keep_tier: str
    keep_tib: float
    jpy: float


def storage(data: Data, needed_mib_s: float, tiers: list[Tier], hours: float) -> Storage:
    """While the job runs (`hours`): the cheapest tier and capacity that hold its data and
    reach `needed_mib_s`; after it, its data on the cheapest tier for data.months.
    ValueError with no tier priced."""
    if not tiers:
        raise ValueError("no storage tier with a price")
    data_tib = data.total_gb * GB / TIB
    run = min(((t, max(data_tib, needed_mib_s / t.mib_s_per_tib)) for t in tiers),
              key=lambda o: o[1] * o[0].jpy_per_tib_month)
    keep = min(tiers, key=lambda t: t.jpy_per_tib_month)
    jpy = run[1] * run[0].jpy_per_tib_month * hours / HOURS_PER_MONTH \
        + data_tib * keep.jpy_per_tib_month * data.months
    return Storage(run[0].name, run[1], run[1] * run[0].mib_s_per_tib, keep.name, data_tib, jpy)


def staging_hours(gb: float, mib_s: float) -> float:
    """Hours to move `gb` GB at `mib_s` MiB/s."""
    if not mib_s > 0:
        raise ValueError(f"staging needs a positive bandwidth, not {mib_s!r} MiB/s")
    return gb * GB / (mib_s * MIB) / 3600


@dataclass(frozen=True)
class VmJob:
    """A job's time to result and cost on a VM, with the parts they add up from."""

    deploy_h: float
    stage_in_h: float
    compute_h: float  # wall time (spot: expected, with evictions and restarts)
    stage_out_h: float
    billed_h: float  # per node
    nodes: int
    price_per_node_h: float
    storage: Storage
    egress_jpy: float

    @property
    def hours(self) -> float:
        return self.deploy_h + self.stage_in_h + self.compute_h + self.stage_out_h

    @property
    def compute_jpy(self) -> float:
        return self.nodes * self.billed_h * self.price_per_node_h

    @property
    def jpy(self) -> float:
        return self.compute_jpy + self.storage.jpy + self.egress_jpy


def vm_job(compute_h: float, nodes: int, price_per_node_h: float, data: Data,
           staging_mib_s: float, tiers: list[Tier], egress_jpy_per_gb: float,
           deploy_h: float = 5 / 60, billed_compute_h: float | None = None) -> VmJob:
    """Time and cost of a job on `nodes` VMs: deploy, stage in, compute (`compute_h` wall;
    `billed_compute_h` where it differs: spot), stage out; the nodes are billed for all of
    it; storage that delivers the staging bandwidth; egress of the output."""
    if nodes < 1 or compute_h < 0 or price_per_node_h < 0 or deploy_h < 0:
        raise ValueError("nodes must be at least 1; hours and prices must not be negative")
    if not math.isfinite(price_per_node_h):
        raise ValueError("no price")
    stage_in = staging_hours(data.input_gb, staging_mib_s)
    stage_out = staging_hours(data.output_gb, staging_mib_s)
    billed = deploy_h + stage_in + (compute_h if billed_compute_h is None
                                    else billed_compute_h) + stage_out
    store = storage(data, staging_mib_s, tiers, deploy_h + stage_in + compute_h + stage_out)
    return VmJob(deploy_h, stage_in, compute_h, stage_out, billed, nodes, price_per_node_h,
                 store, data.output_gb * egress_jpy_per_gb)


def onprem_job(compute_h: float, nodes: int, fee_per_node_h: float, data: Data,
               storage_jpy_per_tb_month: float) -> tuple[float, float]:
    """(hours, JPY) of the job on the supercomputer, its queue wait left out."""
    if nodes < 1 or compute_h < 0 or fee_per_node_h < 0:
        raise ValueError("nodes must be at least 1; hours and fees must not be negative")
    return compute_h, (nodes * compute_h * fee_per_node_h
                       + data.total_gb * GB / TB * storage_jpy_per_tb_month * data.months)


def break_even_wait_h(vm_hours: float, onprem_compute_h: float) -> float:
    """The queue wait on the supercomputer above which the VM returns the result sooner
    (negative: the VM is sooner even with no wait)."""
    return vm_hours - onprem_compute_h
