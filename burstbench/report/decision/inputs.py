"""The burst decision's inputs: prices and storage tiers by region, the WAN's published
rates, Flow's bandwidth fraction as the study's VMs show it, the report parameters turned
into ranges (each with its source), the job classes and the cloud options of a VM."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Protocol

import pandas as pd

from burstbench.core import paths
from burstbench.core.checks import ParamError
from burstbench.core.merits import Merits
from burstbench.core.reference import read_reference, vm_key
from burstbench.cost import burst, job
from burstbench.cost import uncertainty as u
from burstbench.cost.machines import merit
from burstbench.cost.model import Model
from burstbench.cost.predict import STUDY_GRID, MatrixModel

#: The job classes of the decision: the study's Poisson problem on 1, 2, 4 and 8 nodes, and
#: G3_circuit (1 node), priced where its iterations were measured here or given.  G3_PROXY
#: (kernels_ext.biccg.mtx --write-poisson 1259 1259 1) is of its size, for validating the
#: model on a matrix file; at 6-8 iterations it says nothing of G3_circuit's count.
STUDY_NODES = (1, 2, 4, 8)
G3: dict = {"name": "G3_circuit", "n": 1_585_478, "nnz": 7_660_826}
G3_PROXY = "poisson2d_1259"

#: The reference tables (data/reference/) the decision always reads itself, besides the
#: figures of merit, whose rows name their own run or table, and the ranges, whose
#: ``tables`` name theirs (the WAN's and Flow's fraction, where not given): sources().
REFERENCE_TABLES = ("anf_throughput.csv", "flow_systems.csv", "prices_onprem.csv",
                    "prices_storage.csv", "prices_vm.csv", "vm_sizes.csv")


def sources(merits: list[Merits], ref_dir: Path, drawn: dict[str, u.Range]) -> list[str]:
    """Everything the decision is drawn from, as the report's index names it: the run or
    table behind every figure of merit (older runs validate the time model), the reference
    tables it reads itself and those its ranges were read from."""
    root = paths.project_root()
    named = {str(d) for m in merits if len(m.table) for d in m.table["data"].dropna()}
    tables = {*REFERENCE_TABLES, *(t for r in drawn.values() for t in r.tables)}
    named |= {paths.rel_path(Path(ref_dir) / t, root) for t in tables}
    return sorted(named - {""})


def storage_prices(ref_dir: Path, problems: list[str]
                   ) -> tuple[dict[str, list[job.Tier]], dict[str, float], float]:
    """(ANF tiers of the single-encryption price per region, egress JPY per GB per region,
    Flow's storage JPY per TB-month) from prices_storage.csv and anf_throughput.csv."""
    st = read_reference(ref_dir, "prices_storage.csv", ["item", "tier", "encryption", "region",
                                                        "quantity", "quantity_unit", "price",
                                                        "currency"], problems)
    tp = read_reference(ref_dir, "anf_throughput.csv", ["tier", "capacity_tib",
                                                        "throughput_mib_s"], problems)
    tiers: dict[str, list[job.Tier]] = {}
    anf = st[(st["encryption"] == "single") & (st["quantity_unit"] == "TiB-month")]
    for region in sorted(set(anf["region"].dropna())):
        for t in tp.itertuples():
            p = anf[(anf["tier"] == t.tier) & (anf["region"] == region)]
            if p.empty:
                problems.append(f"Azure NetApp Files {t.tier} has no price in {region}: "
                                "left out")
                continue
            tiers.setdefault(region, []).append(job.Tier(
                t.tier, float(t.throughput_mib_s) / float(t.capacity_tib),
                float(p["price"].iloc[0]) / float(p["quantity"].iloc[0])))
    egress = {}
    for r in st[st["item"] == "data_transfer_out"].itertuples():
        per = {"TB": 1000.0, "GB": 1.0}.get(str(r.quantity_unit))
        if per:
            egress[r.region] = float(r.price) / (float(r.quantity) * per)
    flow = st[st["item"] == "flow_storage"]
    flow_tb = float(flow["price"].iloc[0]) / float(flow["quantity"].iloc[0]) if len(flow) \
        else math.nan
    return tiers, egress, flow_tb


def gfrep_rates(ref_dir: Path, problems: list[str]) -> dict[str, float]:
    """MiB/s of the Gfarm-on-Azure slides' gfrep (7.8 GB), the median of their tries within
    a region and between two regions: the published bounds of a job's staging."""
    ref = read_reference(ref_dir, "gfarm_azure_gfrep.csv", ["between", "seconds", "size_gb"],
                         problems)
    out = {}
    for name, prefix in (("within", "within a region"), ("between", "between regions")):
        d = ref[ref["between"].astype(str).str.startswith(prefix)]
        if len(d):
            out[name] = float((d["size_gb"] * 1e9 / d["seconds"]).median() / (1 << 20))
    return out


def flow_fraction_range(ref_dir: Path, mode: float, problems: list[str]) -> u.Range:
    """Flow's Triad as a fraction of its theoretical bandwidth: unmeasured, so it ranges
    over the fractions the study's VMs reached (their best Triad / their theoretical
    bandwidth), `mode` the most likely (default: HC44rs's, the nearest CPU to Flow's)."""
    best = read_reference(ref_dir, "triad_best.csv", ["vm", "best_triad_gbs"], problems)
    theory = read_reference(ref_dir, "vm_memory_bandwidth.csv", ["vm", "theoretical_gbs_node"],
                            problems)
    f = best.merge(theory, on="vm")
    frac = (f["best_triad_gbs"] / f["theoretical_gbs_node"]).dropna()
    if frac.empty:
        return u.Range.known(u.FLOW_FRACTION, mode, "", "flow_fraction (no study VM to range "
                             "over)")
    lo, hi = float(frac.min()), float(frac.max())
    lo, hi = min(lo, mode), max(hi, mode)
    names = ", ".join(f"{v} {x:.2f}" for v, x in zip(f["vm"], frac))
    return u.Range(u.FLOW_FRACTION, lo, mode, hi, "",
                   f"the study's VMs' best Triad / theoretical ({names}; "
                   "data/reference/triad_best.csv, vm_memory_bandwidth.csv); mode flow_fraction",
                   tables=("triad_best.csv", "vm_memory_bandwidth.csv"))


def as_range(name: str, value, unit: str, source: str, log: bool = False) -> u.Range:
    """A report parameter as a Range: a number (known), [low, high] (log-uniform where `log`,
    else triangular about the middle) or [low, mode, high].  ValueError, one line, for
    anything else."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return u.Range.known(name, float(value), unit, source)
    if isinstance(value, (list, tuple)) and len(value) in (2, 3) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        v = [float(x) for x in value]
        if len(v) == 2:
            if v[0] > v[1]:
                raise ParamError(f"{name}: the range's low end {v[0]:g} is above its high end "
                                 f"{v[1]:g}")
            return u.Range.log_uniform(name, v[0], v[1], unit, source) if log else \
                u.Range(name, v[0], (v[0] + v[1]) / 2, v[1], unit, source)
        if v[0] > v[2]:
            raise ParamError(f"{name}: the range's low end {v[0]:g} is above its high end "
                             f"{v[2]:g}")
        return u.Range(name, v[0], v[1], v[2], unit, source)
    raise ParamError(f"{name} must be a number, [low, high] or [low, mode, high], not "
                     f"{value!r}")


class _Erring(Protocol):
    """What ranges() needs of the time model: its error as a Range."""

    def error(self) -> u.Range: ...


def ranges(model: Model | _Erring, flow_fraction, flow_measured: bool, ref_dir: Path,
           wan_mib_s, deploy_minutes, spot_evictions_per_h, problems: list[str],
           measured_wan: pd.DataFrame | None = None) -> dict[str, u.Range]:
    """Every uncertain input of the decision, with its source (burstbench.cost.uncertainty).
    The WAN: `wan_mib_s` where given; else a replication to the other site measured by the
    storage benchmark (`measured_wan`, merit wan_mib_s: its tries' range, the median most
    likely); else the published gfrep rates within a region and between two."""
    out = {u.ERROR: model.error()}
    if flow_measured:
        out[u.FLOW_FRACTION] = u.Range.known(u.FLOW_FRACTION, 1.0, "",
                                             "Flow measured here: its own Triad")
    elif isinstance(flow_fraction, (list, tuple)):
        out[u.FLOW_FRACTION] = as_range(u.FLOW_FRACTION, flow_fraction, "", "flow_fraction")
    else:
        out[u.FLOW_FRACTION] = flow_fraction_range(ref_dir, float(flow_fraction), problems)
    if wan_mib_s in (0, None, []) and measured_wan is not None and len(measured_wan):
        w = measured_wan.sort_values("run_id").iloc[-1]
        lo, hi = min(float(w["low"]), float(w["value"])), max(float(w["high"]), float(w["value"]))
        out[u.WAN] = u.Range(u.WAN, lo, float(w["value"]), hi, "MiB/s",
                             f"measured: gfrep to the other site's I/O node ({w['data']}, "
                             "storage_replicate_remote), its tries' range")
    elif wan_mib_s in (0, None, []):
        g = gfrep_rates(ref_dir, problems)
        if len(g) < 2:
            raise ParamError("no WAN rate: gfarm_azure_gfrep.csv lacks its within- and "
                             "between-region rows, and wan_mib_s is not given")
        out[u.WAN] = u.Range.log_uniform(
            u.WAN, min(g.values()), max(g.values()), "MiB/s",
            f"gfrep of 7.8 GB on Azure (data/reference/gfarm_azure_gfrep.csv): within a region "
            f"{g['within']:.1f}, between Japan West and East {g['between']:.1f} MiB/s (the "
            "slides call the latter anomalous); log-uniform between them",
            tables=("gfarm_azure_gfrep.csv",))
    else:
        out[u.WAN] = as_range(u.WAN, wan_mib_s, "MiB/s", "wan_mib_s", log=True)
    if out[u.WAN].low <= 0:
        raise ParamError(f"wan_mib_s must be positive, not {out[u.WAN].low:g}")
    out[u.DEPLOY] = as_range(u.DEPLOY, deploy_minutes, "min",
                             "deploy_minutes (the study: about 5 min from submission to start "
                             "under CycleCloud; the ends are assumed)")
    out[u.ITERATIONS] = u.Range(u.ITERATIONS, 0.0, 0.5, 1.0, "of each layout's range",
                                "a layout not measured ranges from the count of the nearest "
                                "rank count to it grown as the measured counts grow per "
                                "doubling of ranks; the same draw for the VM and Flow")
    out[u.EVICTIONS] = as_range(u.EVICTIONS, spot_evictions_per_h, "per h",
                                "spot_evictions_per_h (assumed: the study gives no rate)")
    out[u.LATENCY] = u.Range(u.LATENCY, 0.0, 0.0, 1.0, "of each published range",
                             "the study's osu.csv latency ranges (HB120-16rs_v3 1.9-4.3 us, "
                             "HC44rs 1.5-3.7 us), the least most likely; the same position "
                             "for every published machine")
    for r in (out[u.DEPLOY], out[u.EVICTIONS]):
        if r.low < 0:
            raise ParamError(f"{r.name} must not be negative, not {r.low:g}")
    return out


def job_classes(merits: list[Merits], data: job.Data, solves: int, g3_iterations: float,
                user: dict) -> tuple[list[burst.JobClass], list[str]]:
    """The study's Poisson job on 1-8 nodes, a G3_circuit-sized matrix, the user's job."""
    notes, out = [], []
    poisson, grid = MatrixModel.poisson(*STUDY_GRID), "x".join(map(str, STUDY_GRID))
    for n in STUDY_NODES:
        out.append(burst.JobClass(f"Poisson {grid}, {n} node(s)", n, data, poisson, solves))
    g3 = merit(merits, "iterations")
    if g3.empty or not (g3["problem"].astype(str) == poisson.name).any():
        notes.append(f"Poisson {grid} (the study's job): no iteration count measured for "
                     f"{poisson.name} on any machine in these runs, so it is not priced: the "
                     "count depends on the problem and the ranks, not the machine; solve it "
                     "once on any (papermill_params/local-model.yaml does, on this one: "
                     f"biccg_problems: [{{poisson: {list(STUDY_GRID)}}}])")
    real = g3[g3["problem"].astype(str).str.startswith(G3["name"])] if len(g3) else g3
    if g3_iterations:
        it, how = float(g3_iterations), "iterations given (g3_iterations)"
    elif len(real):
        it, how = float(real["value"].median()), "G3_circuit's iterations measured here"
    else:
        it, how = math.nan, ("G3_circuit not measured here and no g3_iterations given: its "
                             "iteration count is unknown (the slab of its size, "
                             f"{G3_PROXY}, is far better conditioned), so it is not priced")
    out.append(burst.JobClass("G3_circuit-sized matrix, 1 node", 1, data, MatrixModel(
        G3["name"], G3["n"], G3["nnz"]), solves, it if it == it else None, note=how))
    if not it == it:
        notes.append(f"G3_circuit-sized matrix: {how}")
    if user:
        out += burst.user_jobs(user, data, solves)
    return out, notes


def options(tiers: dict[str, list[job.Tier]], egress: dict[str, float],
            vm_storage: dict[str, tuple[float, str]], wan: u.Range,
            pool_min_tib: float, pool_jobs_per_month: float, shared_tier: str = "Standard"):
    """options_of(vm, price_row, job_class) for burst.decide: per region, a pool per job (the
    cheapest that delivers the WAN's likely rate, or the VM's storage where slower) and the
    study's always-on pool shared by a month's burst jobs; a reason where a region has no
    transfer or storage price."""
    if pool_min_tib < 0:
        raise ParamError(f"pool_min_tib must be 0 or more, not {pool_min_tib:g}")
    if not pool_jobs_per_month > 0:
        raise ParamError(f"pool_jobs_per_month must be positive, not {pool_jobs_per_month!r}")

    def of(vm: str, p, jc: burst.JobClass) -> list[burst.Option] | str:
        region = p.region
        if region not in egress:
            return f"no transfer price for {region}"
        if not tiers.get(region):
            return f"no storage price for {region}"
        storage = vm_storage.get(vm) or vm_storage.get(vm_key(vm))
        wanted = min(wan.mode, storage[0]) if storage else wan.mode
        data = jc.data
        pools = [job.pool_per_job(data, tiers[region], pool_min_tib, wanted),
                 job.shared_pool(tiers[region], shared_tier, max(pool_min_tib, data.tib),
                                 pool_jobs_per_month)]
        return [burst.Option(vm, region, p.billing, float(p.jpy_per_hour), pool, storage,
                                egress[region]) for pool in pools]
    return of


def run_prices(merits: list[Merits]) -> list[dict]:
    """The prices runs give for their own VM (vm_price of their parameters)."""
    return [{"vm": r["vm"], "region": (r["params"].get("vm_price") or {}).get("region")
             or "(run)", "billing": b, "price_per_hour": r["params"]["vm_price"][b],
             "currency": r["params"]["vm_price"].get("currency", "JPY"),
             "source": f"vm_price of run {r['run_id']}"}
            for r in {(r["vm"], r["run_id"]): r for m in merits for r in m.runs}.values()
            for b in ("payg", "spot") if b in (r["params"].get("vm_price") or {})]
