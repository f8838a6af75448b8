"""The burst decision: for each job class, its predicted time to result and whole cost on
every VM (region, billing, storage scenario) and on Flow, the probability that the VM
returns the result sooner at each queue wait on Flow, the break-even wait with its band,
and a verdict (burst, stay, or undecided where the band holds the wait asked about).

The machines are burstbench.cost.machines, the time model burstbench.cost.predict (its
assumptions in its docstring) fitted and validated by burstbench.cost.model; this module
carries what it does not know (burstbench.cost.uncertainty: the model's error, Flow's
bandwidth, the WAN, deployment, iterations of an unmeasured layout, spot evictions, the
published latencies) through seeded Monte Carlo to every time, cost and break-even, on
both sides of the comparison.  The queue wait is the caller's, not modelled: Flow's
utilisation (72-81% in fiscal 2020-2023) says why it is long.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from burstbench.core.checks import ParamError
from burstbench.core.reference import vm_key
from burstbench.cost import job
from burstbench.cost import uncertainty as u
from burstbench.cost.model import RANKS_PER_NODE, Model, iterations_for, traffic_for
from burstbench.cost.predict import MatrixModel, NodeModel, SolveLayout, predict
from burstbench.cost.prices import Prices
from burstbench.cost.spot import spot_expected_arrays

# -- job classes ----------------------------------------------------------------------------

@dataclass(frozen=True)
class JobClass:
    """A job to decide for: a problem solved `solves` times on `nodes` nodes (2 ranks per
    node, as the study), or `flow_node_hours` of a bandwidth-bound job on Flow (its time
    on a machine scaled by Flow's node bandwidth / the machine's); its data."""

    name: str
    nodes: int
    data: job.Data
    problem: MatrixModel | None = None
    solves: int = 1
    iterations: float | None = None  # given by the user; else measured
    flow_node_hours: float | None = None
    note: str = ""
    yours: bool = False  # the user's job (user_job): its sizes are theirs, not assumed
    assumed: tuple[str, ...] = ()  # of a user's job: the report parameters it did not give

    def stated(self, nodes: bool = True) -> str:
        """The job as every output states it, each figure with whose it is: '100 solves
        (assumed: job_solves), 1 node (2 ranks, as the study ran), 10 GB in and 30 GB
        out (assumed: job_input_gb, job_output_gb; the study's solve reads and writes no
        file)'."""
        work = (f"{self.flow_node_hours:g} node-hours on Flow" if self.problem is None
                else f"{self.solves:,} solve(s)")
        data = f"{self.data.input_gb:g} GB in and {self.data.output_gb:g} GB out"
        on = f" on {self.nodes} node(s)" if nodes else ""
        if self.yours:
            given = "; assumed: " + ", ".join(self.assumed) if self.assumed else ""
            return f"{work}{on}, {data} (user_job{given})"
        return (f"{work} (assumed: job_solves){on}, {RANKS_PER_NODE} ranks a node as the "
                f"study ran, {data} (assumed: job_input_gb, job_output_gb; the study's "
                "solve reads and writes no file)")

    def __post_init__(self) -> None:
        if self.problem is None and not (self.flow_node_hours and self.flow_node_hours > 0):
            raise ParamError(f"job {self.name}: no size (give a problem, or its node-hours on "
                             "Flow)")
        if self.nodes < 1 or self.solves < 1:
            raise ParamError(f"job {self.name}: nodes and solves must be at least 1")


# -- one option, evaluated on arrays of inputs ----------------------------------------------

@dataclass(frozen=True)
class Parts:
    """A job class on one machine, as the Monte Carlo scales it: one iteration's memory
    seconds (at the fitted efficiency, the machine's nominal Triad), its communication at
    the published latencies' low and high ends, the setups in iterations of memory (a job's
    first solve's and its later ones'), the iteration range; or, for a node-hours job, the
    hours at Flow's nominal bandwidth."""

    memory_s: float = 0.0
    comm_low_s: float = 0.0
    comm_high_s: float = 0.0
    setup_iterations: float = 0.0  # a job's first solve's setup
    it_low: float = 0.0
    it_high: float = 0.0
    solves: int = 1
    node_hours_h: float = 0.0  # a node-hours job: hours on this machine at nominal inputs
    how: str = ""
    traffic: str = ""
    cache: str = ""  # the input whose draw speeds the memory part (a working set in cache)
    tier: str = "memory"  # the memory tier the working set was priced at (NodeModel.tier)
    later_setup_iterations: float | None = None  # its later solves' (None: as the first)

    def hours(self, inputs: dict[str, np.ndarray], memory_scale=1.0) -> np.ndarray:
        """Hours of computing per draw: iterations x (memory + communication) x solves, plus
        the setups (the first solve's, and each later solve's), / (1 + the model's error)."""
        if self.node_hours_h:
            return self.node_hours_h * memory_scale
        it, mem, comm = self.terms(inputs, memory_scale)
        later = self.setup_iterations if self.later_setup_iterations is None \
            else self.later_setup_iterations
        setups = (self.setup_iterations + (self.solves - 1) * later) * mem
        return (self.solves * it * (mem + comm) + setups) / (1 + inputs[u.ERROR]) / 3600

    def terms(self, inputs: dict[str, np.ndarray], memory_scale=1.0):
        """(iterations, memory seconds and communication seconds of one iteration) per draw
        of `inputs`: what hours() and the study check add up."""
        it = self.it_low + inputs[u.ITERATIONS] * (self.it_high - self.it_low)
        comm = self.comm_low_s + inputs[u.LATENCY] * (self.comm_high_s - self.comm_low_s)
        speedup = inputs[self.cache] if self.cache else 1.0
        return it, self.memory_s * memory_scale / speedup, comm


def parts(jc: JobClass, m: NodeModel, model: Model, flow: NodeModel,
          tiers: bool = True) -> Parts:
    """A job class's Parts on machine `m`, its working set per node priced at the memory
    tier it fits (predict's assumption 2; `tiers` False: at STREAM's rule size, as the
    study's Triad); ValueError with why it cannot be priced."""
    if m.max_nodes is not None and jc.nodes > m.max_nodes:
        raise ValueError(f"no InfiniBand: {jc.nodes} nodes not offered")
    if jc.problem is None:
        ratio = flow.bandwidth(flow.cores) / m.bandwidth(m.cores)
        return Parts(node_hours_h=float(jc.flow_node_hours or 0) / jc.nodes * ratio,
                     how="Flow node-hours x bandwidth ratio")
    layout = SolveLayout(jc.nodes, RANKS_PER_NODE, max(1, m.cores // RANKS_PER_NODE))
    if jc.iterations:
        lo = hi = float(jc.iterations)
        how = "iterations given"
    else:
        lo, hi, how = iterations_for(jc.problem.name, layout.ranks, model.iterations)
        if not lo > 0:
            raise ValueError(f"no prediction: {jc.problem.name}: no iteration count")
    counted = traffic_for(jc.problem.name, layout.ranks, model.counts)
    traffic = counted or jc.problem.traffic(layout.ranks)
    low = predict(jc.problem, m, layout, lo, model.efficiency, traffic,
                  model.setup_iterations, 0.0, tiers)
    high = predict(jc.problem, m, layout, lo, model.efficiency, traffic,
                   model.setup_iterations, 1.0, tiers)
    return Parts(low.memory_s, low.halo_s + low.reduce_s, high.halo_s + high.reduce_s,
                 model.setup_iterations, lo, hi, jc.solves,
                 how=f"{how}, layout {layout.nodes}x{layout.label}, working set in "
                     f"{low.tier}",
                 traffic=f"{traffic.messages:g} halo messages of {traffic.message_size:,.0f} B "
                         f"and {traffic.reductions:g} Allreduces per iteration "
                         f"({traffic.source})",
                 cache=u.cache(m.name) if low.tier == "cache" else "", tier=low.tier,
                 later_setup_iterations=model.later_setup)


@dataclass(frozen=True)
class Option:
    """One way to run a job in the cloud: a VM's price in a region and billing, a storage
    pool, the staging limits that do not vary (the VM's own storage), egress."""

    vm: str
    region: str
    billing: str
    price_per_node_h: float
    pool: job.Pool
    vm_storage: tuple[float, str] | None
    egress_jpy_per_gb: float
    platform_jpy: float = 0.0  # the always-on server and master node's share per job


@dataclass(frozen=True)
class Settings:
    """What the decision needs besides the machines: spot's checkpoint and restart, Flow's
    storage fee and node fee, the free egress allowance, the Monte Carlo's size and seed,
    the waits it reports probabilities at and the wait its verdict is for."""

    flow_fee: float
    flow_storage_jpy_per_tb_month: float
    checkpoint_h: float = 1.0
    restart_h: float = 5 / 60
    free_egress_gb: float = 0.0
    draws: int = 4000
    seed: int = 2023
    waits_h: tuple[float, ...] = (0.0, 10 / 60, 1.0, 4.0, 24.0)
    queue_wait_h: float = 1.0


def evaluate(jc: JobClass, vm: Parts, flow: Parts, flow_scale_of, opt: Option,
             s: Settings, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per draw of `inputs`: the VM's time to result and cost, Flow's computing and cost,
    the staging rate, the break-even wait and the terms it adds up from (deployment, a
    spot row's wait for capacity included; staging in; staging out; the VM's computing less
    Flow's).  `flow_scale_of(inputs)` is the factor on Flow's memory time (its nominal
    fraction / the drawn one; 1 where measured).  The WAN is the option's region's."""
    scale = flow_scale_of(inputs)
    flow_h = flow.hours(inputs, 1.0 if flow.node_hours_h else scale)
    vm_h = vm.hours(inputs, 1 / scale if vm.node_hours_h else 1.0)
    rate = np.minimum(u.wan_of(inputs, opt.region), opt.pool.mib_s)
    if opt.vm_storage is not None:
        rate = np.minimum(rate, opt.vm_storage[0])
    billed = None
    deploy_min = inputs[u.DEPLOY]
    if opt.billing == "spot":
        vm_h, billed = spot_expected_arrays(vm_h, s.checkpoint_h, inputs[u.EVICTIONS],
                                            s.restart_h)
        # waiting for free capacity: the VMs are not up yet, so it is not billed
        vm_h = vm_h + inputs.get(u.SPOT_START, 0.0) / 60
    j = job.vm_job(vm_h, jc.nodes, opt.price_per_node_h, jc.data, rate, opt.pool,
                   opt.egress_jpy_per_gb, deploy_min / 60, billed, s.free_egress_gb)
    _, flow_jpy = job.onprem_job(flow_h, jc.nodes, s.flow_fee, jc.data,
                                 s.flow_storage_jpy_per_tb_month)
    waited = inputs.get(u.SPOT_START, 0.0) / 60 if opt.billing == "spot" else 0.0
    ones = np.ones_like(np.asarray(j.hours, dtype=float))
    return {"time_h": j.hours, "jpy": j.jpy + opt.platform_jpy, "compute_jpy": j.compute_jpy,
            "storage_jpy": j.storage_jpy, "egress_jpy": ones * j.egress_jpy,
            "platform_jpy": ones * opt.platform_jpy,
            "staging_h": j.stage_in_h + j.stage_out_h, "staging_mib_s": rate,
            "flow_h": flow_h, "flow_jpy": flow_jpy,
            "deploy_h": ones * (j.deploy_h + waited), "stage_in_h": ones * j.stage_in_h,
            "stage_out_h": ones * j.stage_out_h,
            "compute_diff_h": ones * (j.compute_h - waited - flow_h),
            "break_even_h": job.break_even_wait_h(j.hours, flow_h)}


def staging_limit(opt: Option, wan: np.ndarray) -> str:
    """What limits staging in most draws: the WAN, the pool, or the VM's storage."""
    limits = np.full(wan.shape, "the WAN", dtype=object)
    least = wan.copy()
    pool = opt.pool.mib_s
    limits[pool < least] = f"the pool ({opt.pool.text})"
    least = np.minimum(least, pool)
    if opt.vm_storage is not None:
        # a tie with a pool sized for it: the storage is the limit the pool was sized to
        limits[opt.vm_storage[0] <= least * (1 + 1e-9)] = \
            f"this VM's storage ({opt.vm_storage[1]})"
    values, n = np.unique(limits.astype(str), return_counts=True)
    k = int(np.argmax(n))
    share = n[k] / len(wan)
    return values[k] if share == 1 else f"{values[k]} ({share:.0%} of draws)"


def wait_label(h: float) -> str:
    """A wait as a column suffix: 0, 10min, 1h, 4h, 1d."""
    if h == 0:
        return "0"
    if h < 1:
        return f"{h * 60:g}min"
    return f"{h:g}h" if h < 24 else f"{h / 24:g}d"


def verdict(be_p10: float, be_p90: float, wait_h: float) -> str:
    """burst where the VM is sooner in at least 90% of draws at the wait, stay where Flow
    is in at least 90%, undecided where the 10-90% band of the break-even holds it."""
    if be_p90 < wait_h:
        return "burst"
    if be_p10 > wait_h:
        return "stay"
    return "undecided"


#: The break-even's terms, as evaluate() returns them (each in hours): they add up to it.
TERMS = ("deploy", "stage_in", "stage_out", "compute_diff")


def summarize(out: dict[str, np.ndarray], s: Settings) -> dict:
    """A row's numbers from its draws: medians and 10-90% bands, P(sooner) per wait, the
    verdict at the user's wait."""
    q = {k: np.percentile(v, [10, 50, 90]) for k, v in out.items()}
    be = out["break_even_h"]
    row = {"time_h": q["time_h"][1], "time_low_h": q["time_h"][0],
           "time_high_h": q["time_h"][2], "jpy": q["jpy"][1], "jpy_low": q["jpy"][0],
           "jpy_high": q["jpy"][2], "compute_jpy": q["compute_jpy"][1],
           "storage_jpy": q["storage_jpy"][1], "egress_jpy": q["egress_jpy"][1],
           "staging_h": q["staging_h"][1], "staging_mib_s": q["staging_mib_s"][1],
           "flow_compute_h": q["flow_h"][1], "flow_compute_low_h": q["flow_h"][0],
           "flow_compute_high_h": q["flow_h"][2], "flow_jpy": q["flow_jpy"][1],
           "break_even_p10_h": q["break_even_h"][0], "break_even_p50_h": q["break_even_h"][1],
           "break_even_p90_h": q["break_even_h"][2],
           "extra_jpy": float(np.median(out["jpy"] - out["flow_jpy"])),
           "platform_jpy": q["platform_jpy"][1]}
    for term in TERMS:
        row[f"be_{term}_h"] = q[f"{term}_h"][1]
        row[f"be_{term}_low_h"], row[f"be_{term}_high_h"] = q[f"{term}_h"][0], q[f"{term}_h"][2]
    for w in s.waits_h:
        row[f"p_sooner_at_{wait_label(w)}"] = float(np.mean(be < w))
    row["verdict"] = verdict(row["break_even_p10_h"], row["break_even_p90_h"], s.queue_wait_h)
    return row


#: One option's evaluation: input draws (and the job's data, where another) -> its outputs
#: (evaluate, bound to the option).
Evaluator = Callable[..., dict[str, np.ndarray]]


@dataclass
class Decision:
    """The decision's rows, each priced row's break-even draws (for the figure) and the
    inputs it drew."""

    rows: pd.DataFrame
    draws: dict[tuple, np.ndarray]
    ranges: dict[str, u.Range]
    evaluators: dict[tuple, Evaluator] = field(default_factory=dict)


def decide(jobs: list[JobClass], machine_of: dict[str, NodeModel], flow: NodeModel,
           flow_measured: bool, model: Model, prices: Prices,
           options_of, ranges: dict[str, u.Range], s: Settings) -> Decision:
    """One row per job class x VM x region x billing x storage scenario (`options_of(vm,
    price_row, job_class)` gives a VM's Options): time to result and cost with their bands, the same
    job on Flow, P(VM sooner) at each wait, the break-even band and the verdict.  A VM with
    no price, no Triad or no interconnect for the nodes is listed, not priced; a region
    with no transfer price is listed, never priced at zero."""
    inputs = u.draw(ranges, s.draws, s.seed)
    nominal = ranges[u.FLOW_FRACTION].mode

    def flow_scale(x: dict[str, np.ndarray]):
        return np.full_like(x[u.ERROR], 1.0) if flow_measured else nominal / x[u.FLOW_FRACTION]

    rows, draws = [], {}
    evaluators: dict[tuple, Evaluator] = {}
    priced_vms = prices.table[prices.table["kind"] == "cloud"]
    vms = sorted({r.system for r in priced_vms.itertuples()} | set(machine_of) -
                 {m for m in machine_of if m.startswith("Flow") or m == flow.name},
                 key=str.lower)
    flow_src = ("measured: " if flow_measured else "") + flow.sources.get("triad", "")
    for jc in jobs:
        try:
            fp = parts(jc, flow, model, flow)
        except ValueError as exc:  # no iteration count, no size: no row can be priced
            rows.append({"job": jc.name, "nodes": jc.nodes, "status": str(exc)
                         if str(exc).startswith("no prediction") else f"no prediction: {exc}"})
            continue
        base = {"job": jc.name, "nodes": jc.nodes, "flow_system": flow.name,
                "flow_source": flow_src}
        for vm in vms:
            m = machine_of.get(vm)
            pr = priced_vms[priced_vms["key"] == vm_key(vm)]
            if m is None:
                rows.append(base | {"vm": vm, "status": "no Triad measured or published: "
                                    "no prediction"})
                continue
            try:
                vp = parts(jc, m, model, flow)
            except ValueError as exc:
                rows.append(base | {"vm": vm, "status": str(exc)})
                continue
            if pr.empty:
                rows.append(base | {"vm": vm, "how": vp.how, "status": (
                    f"no price known: {vm} is a machine measured here, not an offer; a "
                    "vm_price in its params file prices it") if m.measured
                    else "no price known"})
                continue
            for p in pr.itertuples():
                opts = options_of(vm, p, jc)
                if isinstance(opts, str):
                    rows.append(base | {"vm": vm, "region": p.region, "billing": p.billing,
                                        "status": opts})
                    continue
                for opt in opts:
                    def ev(x, data=None, jc=jc, vp=vp, fp=fp, opt=opt):
                        return evaluate(replace(jc, data=data) if data else jc, vp, fp,
                                        flow_scale, opt, s, x)
                    out = ev(inputs)
                    key = (jc.name, vm, opt.region, opt.billing, opt.pool.scenario)
                    draws[key] = np.sort(out["break_even_h"])
                    evaluators[key] = ev
                    rows.append(base | {
                        "vm": vm, "region": opt.region, "billing": opt.billing,
                        "storage_scenario": opt.pool.scenario, "status": "priced",
                        "price_per_node_h": opt.price_per_node_h, "how": vp.how,
                        "traffic": vp.traffic, "pool": opt.pool.text,
                        "pool_mib_s": opt.pool.mib_s,
                        "staging_limit": staging_limit(opt, u.wan_of(inputs, opt.region))}
                        | summarize(out, s))
    return Decision(pd.DataFrame(rows), draws, ranges, evaluators)
