"""The burst decision: for each job class, its predicted time to result and whole cost on
every VM (region, billing) and on Flow, and the queue wait on Flow above which the VM returns
the result sooner, at what extra (or lower) cost.

Everything comes from figures of merit (burstbench.core.merits, read by name: whichever
benchmark measured them) and data/reference/: machines (Triad, ping-pong, interconnect,
cores), iteration counts and measured solves, prices.  The time model is
burstbench.cost.predict (its assumptions in its docstring); this module fits it on one
measured solve, validates it on every other, and carries the validation's error into every
predicted time and cost as a range.  The queue wait is a parameter swept by the caller,
not modelled: Flow's utilisation (72-81% in fiscal 2020-2023) says why it is long.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from burstbench.core.merits import Merits, newest
from burstbench.core.reference import read_reference, vm_key
from burstbench.cost import job
from burstbench.cost.predict import Layout, Machine, Problem, fit_efficiency, predict
from burstbench.cost.prices import Prices
from burstbench.cost.spot import spot_expected


def merit(merits: list[Merits], name: str) -> pd.DataFrame:
    """The rows of merit `name`, whichever benchmarks give it."""
    parts = [m.of(name) for m in merits if len(m.of(name))]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["vm", "merit", "value", "unit", "source", "data"])


def _pingpong(rows: pd.DataFrame, vm: str, across: bool) -> tuple[float | None, float | None,
                                                                    str]:
    """(latency us, bandwidth GB/s, source) of a VM's ping-pong across nodes or within one."""
    lat = rows[(rows["merit"] == "latency_us") & (rows["vm"].map(vm_key) == vm_key(vm))]
    bw = rows[(rows["merit"] == "bandwidth_gbs") & (rows["vm"].map(vm_key) == vm_key(vm))]
    pick = (lambda d: d[d["placement"] == "across-nodes"]) if across else \
        (lambda d: d[d["placement"] != "across-nodes"])
    lat, bw = pick(lat), pick(bw)
    if lat.empty or bw.empty:
        return None, None, ""
    return (float(lat["value"].min()), float(bw["value"].max()),
            f"{lat['source'].iloc[0]} ({lat['data'].iloc[0]})")


def measured_machine(vm: str, triad: pd.DataFrame, pingpong: pd.DataFrame) -> Machine:
    """A VM measured here: Triad by threads from `triad` (one run's rows), its ping-pong
    within a node and across nodes where measured."""
    by_threads = {int(t): float(v) for t, v in zip(triad["threads"], triad["value"])}
    here = pingpong[pingpong["source"] == "measured here"]
    lat, bw, src = _pingpong(here, vm, across=False)
    nlat, nbw, nsrc = _pingpong(here, vm, across=True)
    return Machine(vm, max(by_threads), by_threads, True, lat, bw, nlat, nbw, None,
                   {"triad": f"measured here ({triad['data'].iloc[0]})",
                    "pingpong": src or "none measured", "network": nsrc or "none"})


def machines(merits: list[Merits], ref_dir: Path, flow_fraction: float,
             problems: list[str]) -> dict[str, Machine]:
    """Every machine the model can price: VMs measured here (Triad by threads, ping-pong by
    placement), the study's VMs (their published best Triad, osu.csv or a VM of the same
    interconnect, vm_sizes.csv's cores), and Flow's systems (theoretical bandwidth x
    `flow_fraction`; InfiniBand EDR priced at HC44rs's published ping-pong)."""
    out: dict[str, Machine] = {}
    pp = pd.concat([merit(merits, "latency_us"), merit(merits, "bandwidth_gbs")],
                   ignore_index=True)
    at = merit(merits, "memory_bandwidth_gbs_at_threads")
    for vm, d in newest(at).groupby("vm", sort=False):
        out[vm] = measured_machine(vm, d, pp)
    sizes = read_reference(ref_dir, "vm_sizes.csv", ["vm", "physical_cores", "interconnect"],
                           problems)
    best = merit(merits, "memory_bandwidth_gbs")
    published = pp[pp["source"] != "measured here"]
    for r in sizes.itertuples():
        if r.vm in out:
            continue
        b = best[(best["vm"].map(vm_key) == vm_key(r.vm)) & (best["source"] != "measured here")]
        if b.empty:
            continue
        twin = [r.vm] + [s.vm for s in sizes.itertuples()
                         if s.interconnect == r.interconnect and s.vm != r.vm]
        net = next(((v, *_pingpong(published, v, True)) for v in twin
                    if _pingpong(published, v, True)[0] is not None), None)
        ib = str(r.interconnect).lower() != "none"
        lat = bw = None
        src = "none published"
        if ib and net:
            v, lat, bw, src = net
            src = src if v == r.vm else f"{v}'s ({r.interconnect}, the same interconnect)"
        threads = int(b["threads"].iloc[0]) if pd.notna(b["threads"].iloc[0]) else \
            int(r.physical_cores)
        out[r.vm] = Machine(r.vm, int(r.physical_cores), {threads: float(b["value"].iloc[0])},
                            False, lat, bw, lat, bw, None if ib else 1,
                            {"triad": "the study's best (data/reference/triad_best.csv)",
                             "pingpong": src, "network": src if ib else "no InfiniBand"})
    flow = read_reference(ref_dir, "flow_systems.csv", ["system", "cpus_per_node",
                          "memory_bandwidth_theoretical_gbs_per_cpu", "interconnect"],
                          problems)
    fees = read_reference(ref_dir, "prices_onprem.csv", ["system", "cores"], problems)
    hc = _pingpong(published, "HC44rs", True)
    for f in flow.itertuples():
        cores = fees.loc[fees["system"] == f.system, "cores"]
        if cores.empty:
            continue
        gbs = float(f.memory_bandwidth_theoretical_gbs_per_cpu) * float(f.cpus_per_node)
        edr = "EDR" in str(f.interconnect)
        out[f.system] = Machine(
            f.system, int(cores.iloc[0]), {int(cores.iloc[0]): gbs * flow_fraction}, False,
            hc[0] if edr else None, hc[1] if edr else None, hc[0] if edr else None,
            hc[1] if edr else None, None,
            {"triad": f"theoretical {gbs:g} GB/s x {flow_fraction:g} "
                      "(data/reference/flow_systems.csv)",
             "pingpong": "HC44rs's (InfiniBand EDR, as Flow's)" if edr else "none published",
             "network": "HC44rs's (InfiniBand EDR, as Flow's)" if edr else
                        f"{f.interconnect}: none published"})
    return out


def iterations_for(problem: str, ranks: int, iters: pd.DataFrame) -> tuple[float, str]:
    """(iterations, how they were found) for `problem` on `ranks` ranks, from the measured
    counts (assumption 5 of predict); (nan, why) where none was measured."""
    d = iters[iters["problem"] == problem]
    if d.empty:
        return math.nan, f"no iteration count measured for {problem}"
    same = d[d["ranks"] == ranks]
    if len(same):
        return float(same["value"].median()), f"measured with {ranks} rank(s)"
    near = d.loc[(d["ranks"] - ranks).abs().idxmin()]
    return float(near["value"]), f"measured with {int(near['ranks'])} rank(s), not {ranks}"


def _problem(row) -> Problem:
    return Problem.named(row["problem"], row.get("size", math.nan), row.get("nnz", math.nan),
                         str(row.get("factor") or "single"))


#: Seconds a measured solve must take to count in the model's error range.
MIN_SOLVE_S = 1.0


@dataclass
class Model:
    """The model fitted on one measured solve, and how it did on every other."""

    efficiency: float
    reference: dict
    validation: pd.DataFrame  # one row per measured configuration, predicted and measured
    iterations: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)

    @property
    def error_range(self) -> tuple[float, float]:
        """(lowest, highest) of predicted / measured - 1 over the solves of at least
        MIN_SOLVE_S (a decision's jobs solve for seconds to minutes; shorter solves are launch
        and setup, not memory), or over all where none is, and 0: the solve it was fitted on
        is a measurement too, so the range always holds the prediction itself."""
        v = self.validation[~self.validation["reference"]]
        long = v[v["measured_s"] >= MIN_SOLVE_S]
        e = (long if len(long) else v)["error"]
        return (min(0.0, float(e.min())), max(0.0, float(e.max()))) if len(e) else (
            math.nan, math.nan)


def fit(merits: list[Merits], machine_of: dict[str, Machine], reference: dict) -> Model:
    """Fit the efficiency on the `reference` solve ({vm, problem, layout}: the median of its
    newest measurement) and predict every measured configuration of the C solver."""
    at = merit(merits, "memory_bandwidth_gbs_at_threads")
    pp = pd.concat([merit(merits, "latency_us"), merit(merits, "bandwidth_gbs")],
                   ignore_index=True)
    paired = {run: measured_machine(d["vm"].iloc[0], d, pp)
              for run, d in at.groupby("run_id", sort=False)} if "run_id" in at else {}

    def machine(vm: str, run_id: str) -> Machine | None:
        """The machine as it was in that run (its own Triad), else its newest."""
        return paired.get(run_id, machine_of.get(vm))

    solves = merit(merits, "solve_time_s")
    iters = merit(merits, "iterations")
    ours = solves[solves.get("impl", pd.Series(dtype=str)) == "c"] if len(solves) else solves
    if ours.empty:
        raise ValueError("no BICCG solve measured: nothing to fit the model on")
    ref = ours[(ours["vm"] == reference["vm"]) & (ours["problem"] == reference["problem"])
               & (ours["label"] == reference["layout"]) & (ours["nodes"] == 1)]
    if ref.empty:
        raise ValueError(f"the model's reference {reference} was not measured")
    r = ref.sort_values("run_id").iloc[-1]
    layout = Layout(1, int(r["ranks"]), int(r["threads"]))
    n_it = iters[(iters["run_id"] == r["run_id"]) & (iters["problem"] == r["problem"])
                 & (iters["label"] == r["label"])]["value"].iloc[0]
    eff = fit_efficiency(_problem(r), machine(r["vm"], r["run_id"]), layout, n_it, r["value"])
    rows = []
    for s in ours.itertuples(index=False):
        s = s._asdict()
        m = machine(s["vm"], s["run_id"])
        lay = Layout(int(s["nodes"]), int(s["ranks"]) // int(s["nodes"]), int(s["threads"]))
        it = iters[(iters["run_id"] == s["run_id"]) & (iters["problem"] == s["problem"])
                   & (iters["label"] == s["label"]) & (iters["nodes"] == s["nodes"])]
        if m is None or it.empty:
            continue
        try:
            p = predict(_problem(s), m, lay, float(it["value"].iloc[0]), eff)
        except ValueError:
            continue
        is_ref = (s["run_id"], s["problem"], s["label"]) == (r["run_id"], r["problem"],
                                                            r["label"])
        rows.append({"vm": s["vm"], "run_id": s["run_id"], "problem": s["problem"],
                     "layout": f"{lay.nodes}n {s['label']}", "cores": s["cores"],
                     "iterations": float(it["value"].iloc[0]), "measured_s": s["value"],
                     "predicted_s": p.solve_s, "error": p.solve_s / s["value"] - 1,
                     "memory_share": p.memory_s / p.iteration_s, "reference": is_ref,
                     "data": s["data"]})
    return Model(eff, dict(r), pd.DataFrame(rows), iters)


@dataclass(frozen=True)
class JobClass:
    """A job to decide for: a problem solved `solves` times on `nodes` nodes (2 ranks per
    node, as the study), or `flow_node_hours` of a bandwidth-bound job on Flow's
    `flow_system` (its time on a machine scaled by Flow's node bandwidth / the machine's);
    its data."""

    name: str
    nodes: int
    data: job.Data
    problem: Problem | None = None
    solves: int = 1
    iterations: float | None = None  # given by the user; else measured
    flow_node_hours: float | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.problem is None and not (self.flow_node_hours and self.flow_node_hours > 0):
            raise ValueError(f"job {self.name}: no size (give a problem, or its node-hours on "
                             "Flow)")
        if self.nodes < 1 or self.solves < 1:
            raise ValueError(f"job {self.name}: nodes and solves must be at least 1")


def compute_hours(jc: JobClass, m: Machine, model: Model,
                  flow: Machine) -> tuple[float, str]:
    """(hours of computing, how) of a job class on machine `m`; ValueError with why not."""
    if m.max_nodes is not None and jc.nodes > m.max_nodes:
        raise ValueError(f"no InfiniBand: {jc.nodes} nodes not offered")
    if jc.problem is None:
        ratio = flow.bandwidth(flow.cores) / m.bandwidth(m.cores)
        return jc.flow_node_hours / jc.nodes * ratio, "Flow node-hours x bandwidth ratio"
    # the study's 2 ranks per node; one (no ping-pong to price) where none within a node is
    # known and the job fits one node
    rpn = 2 if m.cores >= 2 and (m.latency_us is not None or jc.nodes > 1) else 1
    layout = Layout(jc.nodes, rpn, max(1, m.cores // rpn))
    if jc.iterations:
        n_it, how = jc.iterations, "iterations given"
    else:
        n_it, how = iterations_for(jc.problem.name, layout.ranks, model.iterations)
    p = predict(jc.problem, m, layout, n_it, model.efficiency)
    return jc.solves * p.solve_s / 3600, f"{n_it:g} iterations ({how}), layout {layout.label}"


def storage_rates(merits: list[Merits]) -> dict[str, tuple[float, str]]:
    """Per VM measured here, the slower of its best write and best read bandwidth (MiB/s)
    over its storage targets, newest run, reads from memory never (storage's merits), and
    where it was measured: what its staging cannot outrun."""
    out: dict[str, tuple[float, str]] = {}
    rows = newest(pd.concat([merit(merits, "storage_write_mib_s"),
                             merit(merits, "storage_read_mib_s")], ignore_index=True))
    for vm, d in rows.groupby("vm", sort=True):
        best = {m: g.loc[g["value"].idxmax()] for m, g in d.groupby("merit")}
        if len(best) == 2:
            slow = min(best.values(), key=lambda r: r["value"])
            out[str(vm)] = (float(slow["value"]), f"{slow['target']} "
                            f"{slow['merit'].split('_')[1]}, measured here")
    return out


def staging_rate(wan_mib_s: float, storage: tuple[float, str] | None) -> tuple[float, str]:
    """MiB/s a VM stages its data at, and what limits it: the WAN, or the VM's own storage
    where it was measured slower."""
    if storage is not None and storage[0] < wan_mib_s:
        return storage[0], f"this VM's storage ({storage[1]})"
    return wan_mib_s, "the WAN"


def decide(jobs: list[JobClass], machine_of: dict[str, Machine], model: Model,
           prices: Prices, tiers: list[job.Tier], egress: dict[str, float],
           staging_mib_s: dict[str, float], flow_system: str,
           flow_storage_jpy_per_tb_month: float, spot: dict, deploy_h: float,
           vm_storage: dict[str, tuple[float, str]] | None = None) -> pd.DataFrame:
    """One row per job class x VM x region x billing: time to result and cost with the
    model's error range, the same job on `flow_system`, the break-even queue wait and the
    extra cost.  `egress` and `staging_mib_s` per region: JPY per GB out, MiB/s in and out
    over the WAN, capped by a VM's own storage (`vm_storage`, storage_rates) where slower.
    A VM with no price, no Triad or no interconnect for the nodes is listed, not priced;
    a region with no transfer price is listed, never priced at zero."""
    lo, hi = model.error_range
    lo, hi = (0.0 if math.isnan(lo) else lo), (0.0 if math.isnan(hi) else hi)
    flow = machine_of[flow_system]
    fee = prices.lookup(flow_system, "onprem_fee")
    rows = []
    for jc in jobs:
        try:
            flow_h, flow_how = compute_hours(jc, flow, model, flow)
        except ValueError as exc:  # no iteration count, no size: no row can be priced
            rows.append({"job": jc.name, "nodes": jc.nodes, "status": f"no prediction: {exc}"})
            continue
        _, flow_jpy = job.onprem_job(flow_h, jc.nodes, fee, jc.data,
                                     flow_storage_jpy_per_tb_month)
        base = {"job": jc.name, "nodes": jc.nodes, "flow_system": flow_system,
                "flow_compute_h": flow_h, "flow_jpy": flow_jpy}
        priced = prices.table[prices.table["kind"] == "cloud"]
        for vm in sorted({r.system for r in priced.itertuples()} | set(machine_of) -
                         {m for m in machine_of if m.startswith("Flow")}, key=str.lower):
            m = machine_of.get(vm)
            pr = priced[priced["key"] == vm_key(vm)]
            if m is None:
                rows.append(base | {"vm": vm, "status": "no Triad measured or published: "
                                    "no prediction"})
                continue
            try:
                hours, how = compute_hours(jc, m, model, flow)
            except ValueError as exc:
                rows.append(base | {"vm": vm, "status": str(exc)})
                continue
            if pr.empty:
                rows.append(base | {"vm": vm, "compute_h": hours, "how": how,
                                    "status": "no price known"})
                continue
            for p in pr.itertuples():
                region = p.region
                if region not in egress or region not in staging_mib_s:
                    rows.append(base | {"vm": vm, "region": region, "billing": p.billing,
                                        "status": f"no transfer price or bandwidth for {region}"})
                    continue
                rate, limit = staging_rate(staging_mib_s[region], (vm_storage or {}).get(vm))
                rows.append(base | _priced(jc, hours, how, p, region, tiers, egress,
                                           {region: rate}, spot, deploy_h, flow_h, flow_jpy,
                                           lo, hi) | {"vm": vm, "staging_mib_s": rate,
                                                      "staging_limit": limit})
    return pd.DataFrame(rows)


def _priced(jc: JobClass, hours: float, how: str, p, region: str, tiers: list[job.Tier],
            egress: dict, staging: dict, spot: dict, deploy_h: float, flow_h: float,
            flow_jpy: float, lo: float, hi: float) -> dict:
    """One priced row: the job at the model's prediction and at its error's ends.  An error
    e is predicted = measured x (1 + e): the time it stands for is prediction / (1 + e)."""
    def at(h: float) -> job.VmJob:
        billed = None
        wall = h
        if p.billing == "spot":
            e = spot_expected(h, spot["checkpoint_h"], spot["evictions_per_h"],
                              spot["restart_h"])
            wall, billed = e["time_h"], e["billed_h"]
        return job.vm_job(wall, jc.nodes, p.jpy_per_hour, jc.data, staging[region], tiers,
                          egress[region], deploy_h, billed)

    mid, low, high = at(hours), at(hours / (1 + hi)), at(hours / (1 + lo))
    return {"region": region, "billing": p.billing, "price_per_node_h": p.jpy_per_hour,
            "compute_h": hours, "how": how, "time_h": mid.hours, "time_low_h": low.hours,
            "time_high_h": high.hours, "jpy": mid.jpy, "jpy_low": low.jpy,
            "jpy_high": high.jpy, "compute_jpy": mid.compute_jpy,
            "storage_jpy": mid.storage.jpy, "storage": f"{mid.storage.tier} "
            f"{mid.storage.tib:.2f} TiB while it runs, {mid.storage.keep_tier} after",
            "egress_jpy": mid.egress_jpy,
            "staging_h": mid.stage_in_h + mid.stage_out_h,
            "break_even_wait_h": job.break_even_wait_h(mid.hours, flow_h),
            "break_even_low_h": job.break_even_wait_h(low.hours, flow_h),
            "break_even_high_h": job.break_even_wait_h(high.hours, flow_h),
            "extra_jpy": mid.jpy - flow_jpy, "status": "priced"}
