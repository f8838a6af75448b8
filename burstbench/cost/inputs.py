"""The burst decision's inputs, beside cost/uncertainty.py for the decision, the replay and
the live advice alike: prices and storage tiers by region, the WAN's published rates, Flow's
bandwidth fraction as the study's VMs show it, the report parameters turned into ranges (each
with its source), the job classes and the cloud options of a VM.

Long: every uncertain input of the decision becomes a range here, each with its source (the
WAN now one per region, with the paths' own bounds), so that the decision, the replay and the
advice draw the same inputs from one place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import pandas as pd

from burstbench.core import paths
from burstbench.core.checks import ParamError
from burstbench.core.merits import Merits
from burstbench.core.reference import read_reference, vm_key
from burstbench.cost import burst, job, user_job
from burstbench.cost import uncertainty as u
from burstbench.cost.machines import merit
from burstbench.cost.model import Model
from burstbench.cost.predict import STUDY_GRID, MatrixModel, NodeModel

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


def wan_paths(ref_dir: Path, problems: list[str]) -> dict[str, dict]:
    """Per region, the path from Flow to it (wan_paths.csv): round trip and a single TCP
    stream's window, each a range with its source."""
    t = read_reference(ref_dir, "wan_paths.csv", ["region", "rtt_ms_low", "rtt_ms_high",
                                                  "window_mib_low", "window_mib_high"],
                       problems)
    return {str(r["region"]): dict(r) for _, r in t.iterrows()}


def published_wan(region: str, gfrep: dict[str, float], path: dict | None) -> u.Range:
    """A region's WAN where nothing was measured: log-uniform over the gfrep rates within a
    region and between two (Azure VMs in Japan), each end capped by what one TCP stream
    carries at the path's round trip (window / RTT, wan_paths.csv)."""
    lo, hi = gfrep["within"], gfrep["between"]
    text = (f"gfrep of 7.8 GB between Azure VMs in Japan (gfarm_azure_gfrep.csv): within a "
            f"region {lo:.1f}, between Japan West and East {hi:.1f} MiB/s (the slides call "
            "the latter anomalous)")
    tables: tuple[str, ...] = ("gfarm_azure_gfrep.csv",)
    if path is not None:
        tables += ("wan_paths.csv",)
        rtt_lo, rtt_hi = float(path["rtt_ms_low"]), float(path["rtt_ms_high"])
        w_lo, w_hi = float(path["window_mib_low"]), float(path["window_mib_high"])
        cap_lo = w_lo / (rtt_hi / 1000)
        cap_hi = w_hi / (rtt_lo / 1000) if rtt_lo > 0 else math.inf
        if cap_hi < hi or cap_lo < lo:
            lo, hi = min(lo, cap_lo), min(hi, cap_hi)
            text = (f"one TCP stream's window / round trip on {path['path']}: "
                    f"{w_lo:g}-{w_hi:g} MiB / {rtt_hi:g}-{rtt_lo:g} ms = {lo:.1f}-{hi:.1f} "
                    f"MiB/s (wan_paths.csv: {path['rtt_source']}; {path['window_source']}), "
                    f"below the {text}")
        else:
            text += (f"; one TCP stream's bound on {path['path']} ({rtt_hi:g} ms at most: "
                     f"over {cap_lo:.0f} MiB/s) does not bind")
    elif region:
        text += f"; no path to {region} in wan_paths.csv, so no round trip bounds it"
    return u.Range.log_uniform(u.wan(region), lo, hi, "MiB/s",
                               f"nothing measured from Flow to {region or 'the cloud'}: "
                               f"{text}; log-uniform between them", tables=tables)


def _wan_given(region: str, value, label: str = "wan_mib_s") -> u.Range:
    """A WAN the user gave (a number or a range) as `region`'s input ('': every region's);
    refused, one line, at 0 or below."""
    low = min(value) if isinstance(value, (list, tuple)) and value and all(
        isinstance(v, (int, float)) for v in value) else value
    if isinstance(low, (int, float)) and not low > 0:
        raise ParamError(f"{label} must be positive, not {low:g}")
    return as_range(u.wan(region), value, "MiB/s", label, log=True)


def wan_ranges(regions: tuple[str, ...], wan_mib_s, ref_dir: Path, problems: list[str],
               measured_wan: pd.DataFrame | None = None) -> dict[str, u.Range]:
    """Each region's WAN (u.wan(region)): `wan_mib_s` where given (one value or range for
    every region, or {region: value or range}); else a replication to the other site that
    the storage benchmark measured (merit wan_mib_s, its tries' range, the median most
    likely); else published_wan."""
    if isinstance(wan_mib_s, dict):
        given = dict(wan_mib_s)
    elif wan_mib_s in (0, None, []):
        given = {}
    else:
        _wan_given("", wan_mib_s)  # one value for every region: checked, said once
        given = {r: wan_mib_s for r in regions}
    unknown = sorted(set(given) - set(regions))
    if unknown:
        raise ParamError(f"wan_mib_s: no region {unknown[0]!r} (the regions priced: "
                         f"{', '.join(regions)})")
    out = {}
    gfrep = gfrep_rates(ref_dir, problems) if len(given) < len(regions) and (
        measured_wan is None or not len(measured_wan)) else {}
    paths_of = wan_paths(ref_dir, problems) if gfrep and any(
        r and r not in given for r in regions) else {}
    for region in regions:
        if region in given:
            out[u.wan(region)] = _wan_given(region, given[region], "wan_mib_s" if not
                                            isinstance(wan_mib_s, dict) else
                                            f"wan_mib_s for {region}")
        elif measured_wan is not None and len(measured_wan):
            w = measured_wan.sort_values("run_id").iloc[-1]
            lo = min(float(w["low"]), float(w["value"]))
            hi = max(float(w["high"]), float(w["value"]))
            out[u.wan(region)] = u.Range(
                u.wan(region), lo, float(w["value"]), hi, "MiB/s",
                f"measured: gfrep to the other site's I/O node ({w['data']}, "
                "storage_replicate_remote), its tries' range")
        elif len(gfrep) < 2:
            raise ParamError("no WAN rate: gfarm_azure_gfrep.csv lacks its within- and "
                             "between-region rows, and wan_mib_s is not given")
        else:
            out[u.wan(region)] = published_wan(region, gfrep, paths_of.get(region))
    return out


def cache_ranges(machine_of: dict[str, NodeModel], core_gbs: float = 0.0,
                 efficiency: float = 1.0, core_how: str = "") -> dict[str, u.Range]:
    """The cache speed-up of each published machine whose L3's bandwidth is known
    (machines.machines: cache_peaks.csv).  Nobody measured a Triad in its cache, so it is
    log-uniform between 1 (no gain over its DRAM Triad) and the lesser of its L3's peak
    over that Triad and what its cores can take from a cache: `core_gbs` a core of the
    solver's bytes (model.core_rate, measured on the fitted machine's in-cache solves;
    0: not measured) over `efficiency` x its DRAM Triad."""
    out = {}
    for name, m in machine_of.items():
        if m.measured or not m.cache_peak_gbs or not m.cache_bytes:
            continue
        dram = m.bandwidth(m.cores)
        if m.cache_peak_gbs <= dram:
            continue
        top, why = m.cache_peak_gbs / dram, f"its L3's peak ({m.sources.get('cache', '')})"
        if core_gbs > 0:
            cores = max(1.0, core_gbs * m.cores / (efficiency * dram))
            if cores < top:
                top, why = cores, (f"what its {m.cores} cores take from a cache, at the "
                                   f"solver's {core_how} over its DRAM Triad x "
                                   f"{efficiency:.2f} (its L3's peak would allow "
                                   f"{m.cache_peak_gbs / dram:.1f}x)")
        out[u.cache(name)] = u.Range.log_uniform(
            u.cache(name), 1.0, top, "x",
            f"never measured: from no gain over its DRAM Triad ({dram:g} GB/s) to {why}, "
            f"where a node's working set fits its {m.cache_bytes / 2**20:,.0f} MiB of L3 "
            "(Table 1)", tables=("cache_peaks.csv", "vm_sizes.csv"))
    return out


def ranges(model: Model | _Erring, flow_fraction, flow_measured: bool, ref_dir: Path,
           wan_mib_s, deploy_minutes, spot_evictions_per_h, problems: list[str],
           measured_wan: pd.DataFrame | None = None, regions: tuple[str, ...] = (),
           spot_start_minutes=0.0,
           machine_of: dict[str, NodeModel] | None = None) -> dict[str, u.Range]:
    """Every uncertain input of the decision, with its source (burstbench.cost.uncertainty).
    The WAN per region of `regions` (wan_ranges); with none, one WAN (u.WAN) for every
    region, bounded by no path's round trip; the cache speed-up of each machine of
    `machine_of` that may hold a working set in its L3 (cache_ranges)."""
    out = {u.ERROR: model.error()}
    out |= cache_ranges(machine_of or {}, getattr(model, "core_gbs", 0.0),
                        getattr(model, "efficiency", 1.0), getattr(model, "core_how", ""))
    if flow_measured:
        out[u.FLOW_FRACTION] = u.Range.known(u.FLOW_FRACTION, 1.0, "",
                                             "Flow measured here: its own Triad")
    elif isinstance(flow_fraction, (list, tuple)):
        out[u.FLOW_FRACTION] = as_range(u.FLOW_FRACTION, flow_fraction, "", "flow_fraction")
    else:
        out[u.FLOW_FRACTION] = flow_fraction_range(ref_dir, float(flow_fraction), problems)
    out |= wan_ranges(tuple(regions) or ("",), wan_mib_s, ref_dir, problems, measured_wan)
    out[u.DEPLOY] = as_range(u.DEPLOY, deploy_minutes, "min",
                             "deploy_minutes (the study: about 5 min from submission to start "
                             "under CycleCloud; the ends are assumed)")
    out[u.ITERATIONS] = u.Range(u.ITERATIONS, 0.0, 0.5, 1.0, "of each layout's range",
                                "a layout not measured ranges from the count of the nearest "
                                "rank count to it grown as the measured counts grow per "
                                "doubling of ranks; the same draw for the VM and Flow")
    out[u.EVICTIONS] = as_range(u.EVICTIONS, spot_evictions_per_h, "per h",
                                "spot_evictions_per_h (assumed: the study gives no rate)")
    out[u.SPOT_START] = as_range(u.SPOT_START, spot_start_minutes, "min",
                                 "spot_start_minutes, added to a spot row's deployment "
                                 "(assumed: the study says spot VMs run only when capacity "
                                 "is free and are overtaken by pay-as-you-go jobs, and "
                                 "gives no delay)")
    out[u.LATENCY] = u.Range(u.LATENCY, 0.0, 0.0, 1.0, "of each published range",
                             "the study's osu.csv latency ranges (HB120-16rs_v3 1.9-4.3 us, "
                             "HC44rs 1.5-3.7 us), the least most likely; the same position "
                             "for every published machine")
    for r in (out[u.DEPLOY], out[u.EVICTIONS], out[u.SPOT_START]):
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
        out += user_job.user_jobs(user, data, solves)
    return out, notes


def options(tiers: dict[str, list[job.Tier]], egress: dict[str, float],
            vm_storage: dict[str, tuple[float, str]], wan: dict[str, u.Range],
            pool_min_tib: float, pool_jobs_per_month: float, shared_tier: str = "Standard",
            platform_jpy_month: dict[str, float] | None = None):
    """options_of(vm, price_row, job_class) for burst.decide: per region, a pool per job (the
    cheapest that delivers the region's WAN's likely rate (`wan`: the ranges, by
    u.wan(region), or one u.WAN), or the VM's storage where slower) and the study's
    always-on pool shared by a month's burst jobs; each with the region's always-on server
    and master node (`platform_jpy_month`) shared by the month's jobs; a reason where a
    region has no transfer or storage price."""
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
        rate = (wan.get(u.wan(region)) or wan[u.WAN]).mode
        wanted = min(rate, storage[0]) if storage else rate
        platform = (platform_jpy_month or {}).get(region, 0.0) / pool_jobs_per_month
        data = jc.data
        pools = [job.pool_per_job(data, tiers[region], pool_min_tib, wanted),
                 job.shared_pool(tiers[region], shared_tier, max(pool_min_tib, data.tib),
                                 pool_jobs_per_month)]
        return [burst.Option(vm, region, p.billing, float(p.jpy_per_hour), pool, storage,
                             egress[region], platform) for pool in pools]
    return of


#: The always-on CycleCloud server and master node where platform_jpy_per_month is 0: two
#: VMs of 4 vCPUs (a CycleCloud server's size), priced at Table 4's D32s_v5 (32 vCPUs) / 8.
PLATFORM_VMS, PLATFORM_VM, PLATFORM_SHARE = 2, "D32s_v5", 8


def platform_costs(prices, regions: tuple[str, ...], given: float) -> dict[str, float]:
    """JPY a month of the always-on server and master node per region: `given` where
    above 0, else PLATFORM_VMS x the D32s_v5 pay-as-you-go price / PLATFORM_SHARE x
    job.HOURS_PER_MONTH (the study lists them as always on, unpriced)."""
    if given:
        return {r: float(given) for r in regions}
    t = prices.table
    out = {}
    for r in regions:
        row = t[(t["key"] == vm_key(PLATFORM_VM)) & (t["region"] == r) & (t["billing"] == "payg")]
        if len(row):
            out[r] = PLATFORM_VMS * float(row["jpy_per_hour"].iloc[0]) / PLATFORM_SHARE \
                * job.HOURS_PER_MONTH
    return out


def fixed_assumptions(data: job.Data, solves: int, jobs_per_month: float, free_gb: float,
                      pool_min_tib: float, checkpoint_h: float, restart_h: float,
                      platform: dict[str, float], platform_given: float,
                      user: dict, setups: Sequence[tuple[str, str, str]] = ()) -> list[dict]:
    """What the decision takes as known, not drawn, each with where it comes from: the
    study's jobs (theirs, or the report's assumption), the time model's setups (`setups`:
    model.Model.setup_rows) and the bill's fixed terms."""
    report = "assumed: the report's parameter"
    rows = [
        ("solves per job", solves, "solves", f"{report} job_solves (the study times one "
         "solve)"),
        ("nodes", "1, 2, 4, 8", "nodes", "the study's layouts (2 ranks a node; Figure 12 "
         "runs 1-32 nodes)"),
        ("GB in per job", data.input_gb, "GB", f"{report} job_input_gb (the study's solve "
         "reads no input file)"),
        ("GB out per job", data.output_gb, "GB", f"{report} job_output_gb (the study's solve "
         "writes no output file)"),
        *((name, value, "of the model's iterations", src) for name, value, src in setups),
        ("months kept in the cloud", data.keep_months, "months", f"{report} keep_months"),
        ("burst jobs a month", jobs_per_month, "jobs", f"{report} pool_jobs_per_month: they "
         "share the always-on pool and platform"),
        ("free egress", free_gb, "GB per job", f"{report} egress_free_gb (the study gives "
         "no free allowance or tiers)"),
        ("ANF pool minimum", pool_min_tib, "TiB", f"{report} pool_min_tib (the study's 4 TiB "
         "pool)"),
        ("spot checkpoint interval", checkpoint_h, "h", f"{report} checkpoint_h"),
        ("spot restart", restart_h * 60, "min", f"{report} restart_h"),
        ("always-on server and master node",
         ", ".join(f"{r} {v:,.0f}" for r, v in platform.items()), "JPY a month",
         f"{report} platform_jpy_per_month" if platform_given else
         f"{PLATFORM_VMS} VMs of 4 vCPUs (Azure CycleCloud's installation requirements: at "
         f"least 4 vCPUs and 8 GB) at Table 4's {PLATFORM_VM} pay-as-you-go price / "
         f"{PLATFORM_SHARE}, {job.HOURS_PER_MONTH} h a month (the study lists them as always "
         "on, unpriced)")]
    if user:
        rows.append(("your job", str(user.get("name", "user job")), "",
                     "user_job: its solves, nodes and GB as you gave them"))
    return [{"input": n, "value": v, "unit": unit, "source": src} for n, v, unit, src in rows]


def run_prices(merits: list[Merits]) -> list[dict]:
    """The prices runs give for their own VM (vm_price of their parameters)."""
    return [{"vm": r["vm"], "region": (r["params"].get("vm_price") or {}).get("region")
             or "(run)", "billing": b, "price_per_hour": r["params"]["vm_price"][b],
             "currency": r["params"]["vm_price"].get("currency", "JPY"),
             "source": f"vm_price of run {r['run_id']}"}
            for r in {(r["vm"], r["run_id"]): r for m in merits for r in m.runs}.values()
            for b in ("payg", "spot") if b in (r["params"].get("vm_price") or {})]
