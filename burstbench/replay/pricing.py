"""The burst decision's machines and prices, set up once for many jobs: what the replay prices
a log's jobs with and what the live advice prices a queue's pending jobs with.

The on-premise system is one of Flow's (its node-hour fee and its node Triad, from
data/reference/ as burstbench.cost.machines builds it); every VM priced in the region and
billing is an option.  The uncertain inputs are the decision's (burstbench.cost.uncertainty):
deployment, the WAN, Flow's Triad fraction, and for a class mapped to the BICCG model the
model's error, the iterations and the published latencies; column 0 of every job x draw
matrix is their modes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from burstbench.core import paths
from burstbench.core.checks import ParamError
from burstbench.core.reference import vm_key
from burstbench.cost import burst, inputs, machines, model
from burstbench.cost import prices as price_tables
from burstbench.cost import uncertainty as u
from burstbench.cost.predict import STUDY_GRID, MatrixModel, NodeModel
from burstbench.replay import policy
from burstbench.report.parameters import MODEL_REFERENCE


class _Unfitted:
    """The time model where none could be fitted: no error range (memory-bound jobs only)."""

    def error(self) -> u.Range:
        return u.Range.known(u.ERROR, 0.0, "", "no BICCG model fitted (not used)")


@dataclass
class Pricing:
    """The machines, the drawn inputs (`x`: name -> modes then draws) and the price table of
    one region and billing; :meth:`costed` prices jobs on one VM."""

    flow: NodeModel
    machine_of: dict[str, NodeModel]
    fitted: model.Model | None
    ranges: dict[str, u.Range]
    x: dict[str, np.ndarray]
    scale: np.ndarray
    fee: float
    table: pd.DataFrame
    options_of: Callable
    region: str
    billing: str
    storage: str
    egress_free_gb: float = 0.0
    flow_vm: str = "flow-cloud"
    problems: list[str] = field(default_factory=list)

    @property
    def flow_bw(self) -> float:
        """Flow's node Triad, GB/s."""
        return self.flow.bandwidth(self.flow.cores)

    def vms(self) -> list[tuple[str, Any]]:
        """Each VM priced in the region and billing, with its price row (a namedtuple with
        jpy_per_hour)."""
        out = []
        for vm in sorted(m for m in self.machine_of if not m.startswith("Flow")
                         and m != self.flow_vm):
            pr = self.table[self.table["key"] == vm_key(vm)]
            if not pr.empty:
                out.append((vm, next(pr.itertuples())))
        return out

    def costed(self, vm: str, price, nodes: np.ndarray, run_h: np.ndarray, cls: np.ndarray,
               classes: list[policy.LoggedClass]) -> policy.Costed:
        """Every job on `vm` (its `price` row): hours to result and JPY at `run_h` on
        premise (burstbench.replay.policy.cost_option)."""
        m = self.machine_of[vm]
        cache: dict[tuple, np.ndarray | None] = {}

        def ratio_of(c: policy.LoggedClass, k: int) -> np.ndarray | None:
            if (c.name, k) not in cache:
                cache[(c.name, k)] = self.ratio(c, k, m)
            return cache[(c.name, k)]

        def option_of(c: policy.LoggedClass) -> burst.Option:
            opts = self.options_of(vm, price, c)
            if isinstance(opts, str):
                raise ParamError(f"{vm} in {self.region}: {opts}")
            return next(o for o in opts if o.pool.scenario == self.storage)
        return policy.cost_option(nodes, run_h, cls, classes, ratio_of, option_of,
                                  m.max_nodes, u.wan_of(self.x, self.region),
                                  self.x[u.DEPLOY] / 60, self.egress_free_gb)

    def ratio(self, c: policy.LoggedClass, k: int, m: NodeModel) -> np.ndarray | None:
        """A class's VM time / on-premise time on `k` nodes of machine `m`, per draw: its own
        number; the node Triad ratio (memory-bound: Flow's node bandwidth / the VM's, Flow's
        drawn); the BICCG model's predicted solve on each (None where the model cannot
        price it)."""
        if isinstance(c.speed, (int, float)):
            return np.full(len(self.scale), float(c.speed))
        if c.speed == "memory":
            return self.flow_bw / m.bandwidth(m.cores) * self.scale
        # the BICCG model's stand-in for a class mapped to it: the study's Poisson job
        if self.fitted is None:
            return None
        jc = burst.JobClass(c.name, k, c.data, MatrixModel.poisson(*STUDY_GRID))
        try:
            vp, fp = burst.parts(jc, m, self.fitted, self.flow), burst.parts(
                jc, self.flow, self.fitted, self.flow)
        except ValueError:
            return None
        flow_h = fp.hours(self.x, 1 / self.scale)
        return vp.hours(self.x) / flow_h if np.all(flow_h > 0) else None


def pricing(classes: list[policy.LoggedClass], *, runs_dir: Path | str = "",
            reference_dir: Path | str = "", system: str = "Flow Cloud System",
            region: str = "East US", billing: str = "payg", storage: str = "pool per job",
            deploy_minutes=(4.0, 5.0, 10.0), wan_mib_s=0, flow_fraction=0.793,
            flow_vm: str = "flow-cloud", draws: int = 40, seed: int = 2023,
            usd_jpy: float = 145.0, pool_min_tib: float = 4.0,
            pool_jobs_per_month: float = 30.0, egress_free_gb: float = 0.0,
            merits: list | None = None) -> Pricing:
    """The decision's machines and prices for jobs of `classes`; ParamError, one line, for
    a parameter given wrong (an unknown system, too few draws, a class mapped to the BICCG
    model where none could be fitted).  `merits`: the benchmarks' figures of merit, read
    from `runs_dir` where None."""
    if not (isinstance(draws, int) and draws >= 10):
        raise ParamError(f"draws must be an integer of at least 10, not {draws!r}")
    if storage not in ("pool per job", "shared pool"):
        raise ParamError(f"storage must be 'pool per job' or 'shared pool', not {storage!r}")
    problems: list[str] = []
    ref_dir = Path(reference_dir) if reference_dir else paths.reference_dir()
    if merits is None:
        from burstbench.registry import all_merits
        merits = all_merits(paths.runs_dir(runs_dir), ref_dir, problems)
    mode = flow_fraction[1] if isinstance(flow_fraction, (list, tuple)) and \
        len(flow_fraction) == 3 else sum(flow_fraction) / 2 if isinstance(
            flow_fraction, (list, tuple)) else flow_fraction
    machine_of = machines.machines(merits, ref_dir, float(mode), problems)
    if system not in machine_of or not system.startswith("Flow"):
        known = sorted(m for m in machine_of if m.startswith("Flow"))
        raise ParamError(f"system: no on-premise system {system!r} (known: "
                         f"{', '.join(known)})")
    flow, flow_measured = machines.flow_machine(machine_of, system, flow_vm, problems)
    why_unfitted = ""
    try:
        fitted = model.fit(merits, machine_of, MODEL_REFERENCE)
        if note := model.fallback(fitted, MODEL_REFERENCE):
            problems.append(note)
    except ValueError as exc:
        fitted = None
        why_unfitted = str(exc)
    if fitted is None and any(c.speed == "biccg" for c in classes):
        raise ParamError(f"a class is mapped to the BICCG model, and none could be fitted: "
                         f"{why_unfitted}")
    ranges = inputs.ranges(fitted or _Unfitted(), flow_fraction, flow_measured, ref_dir,
                           wan_mib_s, deploy_minutes, 0.0, problems,
                           machines.merit(merits, "wan_mib_s"), (region,),
                           machine_of=machine_of)
    x = {k: np.concatenate([[r.mode], r.draw(draws, seed)]) for k, r in ranges.items()}
    scale = np.ones(draws + 1) if flow_measured else x[u.FLOW_FRACTION] / ranges[
        u.FLOW_FRACTION].mode  # Flow's bandwidth drawn / nominal: the VM's time scales by it
    prices = price_tables.load_prices(ref_dir, usd_jpy, inputs.run_prices(merits))
    fee = prices.lookup(system, "onprem_fee")
    tiers, egress, _ = inputs.storage_prices(ref_dir, problems)
    options_of = inputs.options(tiers, egress, machines.storage_rates(merits), ranges,
                                pool_min_tib, pool_jobs_per_month)
    table = prices.table[(prices.table["kind"] == "cloud") & (prices.table["billing"] == billing)
                         & (prices.table["region"] == region)]
    if fitted is None:
        problems.append(f"no BICCG model fitted ({why_unfitted}); memory-bound classes only")
    return Pricing(flow, machine_of, fitted, ranges, x, scale, fee, table, options_of, region,
                   billing, storage, egress_free_gb, flow_vm, problems)
