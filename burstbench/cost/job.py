"""The whole cost of a job on a cloud VM and on the supercomputer, data included.

A job on a VM: deploy its nodes (the study: about 5 minutes from submission to start,
billed: the VMs are up), stage its input in, compute, stage its output out.  Staging runs
at the least of the WAN's rate, the storage pool's throughput and the VM's own storage
(where it was measured).  Its cost:

    nodes x billed hours x price per node-hour        (pay-as-you-go; spot: the expected
                                                       billed hours of cost.spot)
  + storage, as Azure NetApp Files bills it: a capacity pool has a minimum size and is
    billed per provisioned hour, rounded up; its throughput is its size x its tier's
    MiB/s per TiB.  Two ways to have one (:class:`Pool`):
      - a pool per job: the cheapest tier and size (at least the minimum and the data)
        that deliver the staging rate wanted, for the job's hours rounded up, and for
        `keep_months` after it where the data is kept there;
      - the study's always-on pool (Standard, 4 TiB) shared by the burst jobs of a month:
        its monthly cost / jobs per month (the data stays in it at no extra cost).
  + data transfer out: (output GB - the free allowance) x the price per GB (Table 5's
    10 TB per month; ingress is free)

On the supercomputer: nodes x hours x its fee per node-hour, plus its storage fee for the
months the data is kept; no staging (the data is there), no egress; the queue wait is the
caller's.  Once the output is home, both sides keep it at home alike: only `keep_months`
on the storage where the job ran is priced.

Every time and cost takes numpy arrays as well as numbers (the decision's Monte Carlo
draws).  Units are explicit: GB = 10^9 B, TB = 10^12 B (data sizes, transfer prices), TiB =
2^40 B (ANF capacity), MiB/s = 2^20 B/s (throughput), yen (JPY) throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from burstbench.core.checks import ParamError

TIB, MIB, GB, TB = 2 ** 40, 2 ** 20, 1e9, 1e12
#: Hours in a month, as Azure bills by the hour.
HOURS_PER_MONTH = 730
PER_JOB, SHARED = "pool per job", "shared pool"


@dataclass(frozen=True)
class Data:
    """What a job moves: input and output in GB; months its data is kept, after the job,
    on the storage where it ran (0: sent home and kept there, as on either side)."""

    input_gb: float
    output_gb: float
    keep_months: float = 0.0

    def __post_init__(self) -> None:
        for name in ("input_gb", "output_gb", "keep_months"):
            v = getattr(self, name)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            if not ok or v < 0:  # a job with no output (or no input) is a job too
                unit = "GB" if name != "keep_months" else "months"
                raise ParamError(f"{name} must be a number of 0 or more ({unit}), not {v!r}")

    @property
    def total_gb(self) -> float:
        return self.input_gb + self.output_gb

    @property
    def tib(self) -> float:
        return self.total_gb * GB / TIB


@dataclass(frozen=True)
class Tier:
    """An Azure NetApp Files tier in one region: MiB/s per TiB provisioned, JPY per
    TiB-month."""

    name: str
    mib_s_per_tib: float
    jpy_per_tib_month: float


@dataclass(frozen=True)
class Pool:
    """A capacity pool a job stages through: `scenario` (PER_JOB or SHARED), its tier and
    TiB; a shared one's cost per job (its monthly cost / jobs per month)."""

    scenario: str
    tier: Tier
    tib: float
    shared_jpy_per_job: float = 0.0

    @property
    def mib_s(self) -> float:
        """The pool's throughput."""
        return self.tib * self.tier.mib_s_per_tib

    def jpy(self, hours, keep_months: float = 0.0):
        """What the job pays for it: a pool per job by the provisioned hour, rounded up,
        and for the months its data is kept; its share of a shared one."""
        if self.scenario == SHARED:
            return np.zeros_like(np.asarray(hours, dtype=float)) + self.shared_jpy_per_job
        per_month = self.tib * self.tier.jpy_per_tib_month
        return np.ceil(np.asarray(hours, dtype=float) - 1e-9) * per_month / HOURS_PER_MONTH \
            + keep_months * per_month

    @property
    def text(self) -> str:
        """'Standard 4 TiB (64 MiB/s), pool per job'."""
        return f"{self.tier.name} {self.tib:g} TiB ({self.mib_s:g} MiB/s), {self.scenario}"


def pool_per_job(data: Data, tiers: list[Tier], min_tib: float, wanted_mib_s: float) -> Pool:
    """The cheapest tier and size that holds the data, is at least `min_tib`, and delivers
    `wanted_mib_s` (a pool grows to reach a throughput).  ValueError with no tier priced."""
    if not tiers:
        raise ParamError("no storage tier with a price")
    if min_tib < 0:
        raise ParamError(f"the pool's minimum size must be 0 or more TiB, not {min_tib:g}")
    tier, tib = min(((t, max(min_tib, data.tib, wanted_mib_s / t.mib_s_per_tib))
                     for t in tiers), key=lambda o: (o[1] * o[0].jpy_per_tib_month, o[0].name))
    return Pool(PER_JOB, tier, tib)


def shared_pool(tiers: list[Tier], tier: str, tib: float, jobs_per_month: float) -> Pool:
    """The always-on pool of `tib` TiB of `tier`, its monthly cost shared by
    `jobs_per_month` burst jobs."""
    t = next((t for t in tiers if t.name == tier), None)
    if t is None:
        raise ParamError(f"no price for Azure NetApp Files {tier}")
    if not jobs_per_month > 0:
        raise ParamError(f"jobs per month of the shared pool must be positive, not "
                         f"{jobs_per_month!r}")
    if tib < 0:
        raise ParamError(f"the pool's minimum size must be 0 or more TiB, not {tib:g}")
    return Pool(SHARED, t, tib, tib * t.jpy_per_tib_month / jobs_per_month)


def staging_hours(gb: float, mib_s):
    """Hours to move `gb` GB at `mib_s` MiB/s."""
    rate = np.asarray(mib_s, dtype=float)
    if not np.all(rate > 0):
        raise ParamError(f"staging needs a positive bandwidth, not {np.min(rate)!r} MiB/s")
    return gb * GB / (rate * MIB) / 3600


@dataclass(frozen=True)
class VmJob:
    """A job's time to result and cost on a VM, with the parts they add up from (numbers,
    or arrays of draws)."""

    deploy_h: Any  # a number, or an array of draws
    stage_in_h: Any
    compute_h: Any  # wall time (spot: expected, with evictions and restarts)
    stage_out_h: Any
    billed_h: Any  # per node
    nodes: int
    price_per_node_h: float
    storage_jpy: Any
    egress_jpy: float

    @property
    def hours(self):
        return self.deploy_h + self.stage_in_h + self.compute_h + self.stage_out_h

    @property
    def compute_jpy(self):
        return self.nodes * self.billed_h * self.price_per_node_h

    @property
    def jpy(self):
        return self.compute_jpy + self.storage_jpy + self.egress_jpy


def egress_jpy(data: Data, jpy_per_gb: float, free_gb: float = 0.0) -> float:
    """The output's transfer out of the cloud, past a free allowance."""
    if free_gb < 0:
        raise ParamError(f"the free egress allowance must be 0 or more GB, not {free_gb:g}")
    return max(0.0, data.output_gb - free_gb) * jpy_per_gb


def vm_job(compute_h, nodes: int, price_per_node_h: float, data: Data, staging_mib_s,
           pool: Pool, egress_jpy_per_gb: float, deploy_h=5 / 60, billed_compute_h=None,
           free_egress_gb: float = 0.0) -> VmJob:
    """Time and cost of a job on `nodes` VMs: deploy, stage in, compute (`compute_h` wall;
    `billed_compute_h` where it differs: spot), stage out; the nodes are billed for all of
    it, the pool for the job's hours; egress of the output."""
    if nodes < 1 or price_per_node_h < 0 or np.any(np.asarray(compute_h) < 0) \
            or np.any(np.asarray(deploy_h) < 0):
        raise ParamError("nodes must be at least 1; hours and prices must not be negative")
    if not math.isfinite(price_per_node_h):
        raise ParamError("no price")
    stage_in = staging_hours(data.input_gb, staging_mib_s)
    stage_out = staging_hours(data.output_gb, staging_mib_s)
    billed = deploy_h + stage_in + (compute_h if billed_compute_h is None
                                    else billed_compute_h) + stage_out
    hours = deploy_h + stage_in + compute_h + stage_out
    return VmJob(deploy_h, stage_in, compute_h, stage_out, billed, nodes, price_per_node_h,
                 pool.jpy(hours, data.keep_months),
                 egress_jpy(data, egress_jpy_per_gb, free_egress_gb))


def onprem_job(compute_h, nodes: int, fee_per_node_h: float, data: Data,
               storage_jpy_per_tb_month: float):
    """(hours, JPY) of the job on the supercomputer, its queue wait left out."""
    if nodes < 1 or np.any(np.asarray(compute_h) < 0) or fee_per_node_h < 0:
        raise ParamError("nodes must be at least 1; hours and fees must not be negative")
    keep = data.total_gb * GB / TB * storage_jpy_per_tb_month * data.keep_months \
        if data.keep_months else 0.0
    return compute_h, nodes * compute_h * fee_per_node_h + keep


def break_even_wait_h(vm_hours, onprem_compute_h):
    """The queue wait on the supercomputer above which the VM returns the result sooner
    (negative: the VM is sooner even with no wait)."""
    return vm_hours - onprem_compute_h
