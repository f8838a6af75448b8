"""The BICCG time model (burstbench.cost.predict) fitted on one measured solve and validated
on the others that the decision can trust: its efficiency, its error (the range the decision
draws from), the iteration counts of each layout (a range where a layout was not measured),
the solver's own message counts, and the setup per solve, a job's first and its later ones
(predict's assumption 6).

A solve validates the model only where it was measured with the fitted solve's build of the
solver (the digest of its C in the run's provenance: an earlier build is another program),
in the layout the decision prices (RANKS_PER_NODE ranks per node, the node's other cores as
threads of each) and for at least MIN_SOLVE_S.  Every other solve is listed with the reason
it is not used, never in the error band."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from burstbench.core.merits import Merits, newest
from burstbench.cost import uncertainty as u
from burstbench.cost.machines import ladders, measured_machine, merit, of_run, pingpong_rows
from burstbench.cost.predict import (
    MatrixModel,
    NodeModel,
    SolveLayout,
    Traffic,
    fit_efficiency,
    predict,
)

#: Seconds a measured solve must take to count in the model's error range.
MIN_SOLVE_S = 1.0
#: Ranks per node of every layout the decision prices, as the study ran BICCG.
RANKS_PER_NODE = 2


def not_used(build: str, fitted_build: str, ranks_per_node: int, threads: int,
             node_cores: int, measured_s: float) -> str:
    """Why a measured solve does not validate the model ('' where it does): another build
    of the solver, a layout the decision does not price, or too short a solve."""
    if not build:
        return "no build recorded in its run's provenance"
    if build != fitted_build:
        return f"another build of the solver ({build}; fitted: {fitted_build or 'unknown'})"
    want = max(1, node_cores // RANKS_PER_NODE)
    if ranks_per_node != RANKS_PER_NODE or threads != want:
        return (f"a layout the decision does not price ({ranks_per_node} rank(s) x {threads} "
                f"thread(s) a node; it prices {RANKS_PER_NODE} x {want} here)")
    if measured_s < MIN_SOLVE_S:
        return f"shorter than {MIN_SOLVE_S:g} s (launch and setup, not memory)"
    return ""


def traffic_for(problem: str, ranks: int, counts: pd.DataFrame) -> Traffic | None:
    """The solver's own count of what one iteration of `problem` on `ranks` ranks sends
    (the median over the runs that recorded it), or None."""
    if counts.empty:
        return None
    d = counts[(counts["problem"] == problem) & (counts["ranks"] == ranks)]
    if d.empty:
        return None
    v = {m: float(g["value"].median()) for m, g in d.groupby("merit")}
    if not {"halo_messages", "halo_bytes", "reductions", "reduction_bytes"} <= set(v):
        return None
    return Traffic(v["halo_messages"], v["halo_bytes"], v["reductions"], v["reduction_bytes"],
                   f"counted by the solver ({d['data'].iloc[0]})")


def _counts(merits: list[Merits]) -> pd.DataFrame:
    return pd.concat([merit(merits, m) for m in ("halo_messages", "halo_bytes", "reductions",
                                                 "reduction_bytes")], ignore_index=True)


def iterations_for(problem: str, ranks: int, iters: pd.DataFrame
                   ) -> tuple[float, float, str]:
    """(low, high, how) iterations of `problem` on `ranks` ranks (assumption 5 of predict):
    the count measured with that many ranks (low = high); else from the count of the
    nearest rank count to it grown (or shrunk) by the growth per doubling of ranks that
    the problem's own counts show (else the largest any problem shows); (nan, nan, why)
    where the problem was never measured."""
    d = iters[iters["problem"] == problem] if len(iters) else iters
    if d.empty:
        return math.nan, math.nan, f"no iteration count measured for {problem}"
    same = d[d["ranks"] == ranks]
    if len(same):
        v = float(same["value"].median())
        return v, v, f"measured with {ranks} rank(s)"
    near = d.loc[(d["ranks"] - ranks).abs().idxmin()]
    base, r0 = float(near["value"]), int(near["ranks"])
    growth, whose = _growth(d), problem
    if growth is None:
        growth = max((g for _, p in iters.groupby("problem") if (g := _growth(p))),
                     default=None)
        whose = "the largest any problem measured shows"
    if growth is None:
        return base, base, f"measured with {r0} rank(s), not {ranks}: no growth known"
    moved = base * growth ** math.log2(ranks / r0)
    lo, hi = min(base, moved), max(base, moved)
    return lo, hi, (f"{lo:.0f}-{hi:.0f}: measured with {r0} rank(s), grown x{growth:.3f} per "
                    f"doubling of ranks ({whose if whose != problem else 'its own counts'})")


def _growth(d: pd.DataFrame) -> float | None:
    """Iterations' growth per doubling of ranks, from a problem's smallest and largest
    measured rank counts; None with one rank count."""
    by = d.groupby("ranks")["value"].median()
    if len(by) < 2:
        return None
    r1, r2 = int(by.index.min()), int(by.index.max())
    return float((by[r2] / by[r1]) ** (1 / math.log2(r2 / r1)))


def _build(value) -> str:
    """A run's build digest, '' where it recorded none (a missing cell reads as NaN)."""
    return value if isinstance(value, str) else ""


def _problem(row) -> MatrixModel:
    swept = row.get("swept_copies")  # missing (NaN) where the row is not one of ours
    return MatrixModel.named(row["problem"], row.get("size", math.nan), row.get("nnz", math.nan),
                             str(row.get("factor") or "single"), not pd.isna(swept) and bool(swept))


@dataclass
class Model:
    """The model fitted on one measured solve, and how it did on every other."""

    efficiency: float
    reference: dict
    validation: pd.DataFrame  # one row per measured configuration, predicted and measured
    iterations: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)
    counts: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)
    setup_iterations: float = 0.0  # the reference's setup in its own iterations' memory time
    #: its later solves' setups in one process, the same way (None: it solved once a process)
    later_setup_iterations: float | None = None
    core_gbs: float = 0.0  # the solver's bytes a core can take from a cache (core_rate)
    core_how: str = ""
    triad_how: str = ""  # which Triad the efficiency was fitted at (model.triad_how)

    def _checks(self) -> pd.DataFrame:
        """The solves besides the fitted one that validate the model (module docstring);
        a validation without a ``used`` column (built by hand) uses those of at least
        MIN_SOLVE_S, or all where none is."""
        v = self.validation
        if "reference" not in v:
            return v.iloc[0:0]
        v = v[~v["reference"].astype(bool)]
        if "used" in v:
            return v[v["used"].astype(bool)]
        long = v[v["measured_s"] >= MIN_SOLVE_S]
        return long if len(long) else v

    def long_errors(self) -> pd.Series:
        """predicted / measured - 1 of the solves that validate the model, with the fitted
        solve's 0."""
        return pd.concat([self._checks()["error"], pd.Series([0.0])], ignore_index=True)

    def bands(self) -> pd.DataFrame:
        """Per machine (cpu, llc_mib) of the solves that validate the model, the fitted one
        among them: how many, and their error's lowest and highest with the memory tiers
        and at the rule size's Triad alone (empty where none is recorded)."""
        v = self.validation
        if "used" not in v or "cpu" not in v:
            return pd.DataFrame()
        used = v[v["used"].astype(bool)]
        rows = []
        for (cpu, llc), d in used.groupby(["cpu", "llc_mib"], sort=True):
            rows.append({"cpu": cpu, "llc_mib": llc, "solves": len(d),
                         "error_low": d["error"].min(), "error_high": d["error"].max(),
                         "error_rule_low": d["error_rule"].min(),
                         "error_rule_high": d["error_rule"].max()})
        return pd.DataFrame(rows)

    @property
    def later_setup(self) -> float:
        """A job's later setups in the model's iterations: as measured, else as its first."""
        return self.setup_iterations if self.later_setup_iterations is None \
            else self.later_setup_iterations

    def setup_rows(self) -> list[tuple[str, str, str]]:
        """(name, value, source) of the setup terms, for the decision's fixed assumptions."""
        r = self.reference
        of = f"{r.get('problem')} {r.get('label')} on {r.get('vm')} ({r.get('data')})"
        later = (f"its later solves in one process (biccg_solves), {of}"
                 if self.later_setup_iterations is not None else
                 f"not measured ({of} solved once a process): priced as the first; "
                 "papermill_params/local-model.yaml measures it (biccg_solves: 2)")
        return [("setup, a job's first solve", f"{self.setup_iterations:.1f}",
                 f"the fitted solve's setup over its iterations' memory time, {of}"),
                ("setup, a job's later solves", f"{self.later_setup:.1f}", later)]

    @property
    def validated(self) -> bool:
        """True when some solve besides the fitted one validates the model."""
        return bool(len(self._checks()))

    @property
    def error_range(self) -> tuple[float, float]:
        """(lowest, highest) error: the range always holds the prediction itself."""
        e = self.long_errors()
        return (float(e.min()), float(e.max())) if len(e) > 1 else (math.nan, math.nan)

    def error(self) -> u.Range:
        """The model's error as an input: triangular over the validation's (lowest, median,
        highest); a time predicted p stands for p / (1 + e)."""
        if not self.validated:  # error_range is (nan, nan)
            return u.Range.known(u.ERROR, 0.0, "", "unknown, drawn as none: no solve but the "
                                 "fitted one to validate on")
        e = self.long_errors()
        lo, hi = self.error_range
        n = len(e) - 1
        return u.Range(u.ERROR, lo, float(e.median()), hi, "",
                       f"the validation's {n} solve(s) of the fitted build, in the layout the "
                       f"decision prices ({RANKS_PER_NODE} ranks a node), of at least "
                       f"{MIN_SOLVE_S:g} s, and the fitted one (biccg_model_validation.csv)")


def fit(merits: list[Merits], machine_of: dict[str, NodeModel], reference: dict) -> Model:
    """Fit the efficiency on the `reference` solve ({vm, problem, layout}: the median of its
    measurement in the VM's merit run (store.merit_runs: its newest complete run), else in
    the newest run that has it) and predict every measured configuration of the C
    solver.  Where that problem was not measured on that VM in that layout, the largest
    Poisson grid measured there stands in for it, its merit run's first (fallback() says
    so)."""
    at = merit(merits, "memory_bandwidth_gbs_at_threads")
    pp = pingpong_rows(merits)
    steps = ladders(merits)
    paired = {run: measured_machine(d["vm"].iloc[0], d, pp, of_run(steps, run))
              for run, d in at.groupby("run_id", sort=False)} if "run_id" in at else {}

    besides = merit(merits, "triad_beside_gbs")

    def same(d: pd.DataFrame, s) -> pd.DataFrame:
        return d[(d["run_id"] == s["run_id"]) & (d["problem"] == s["problem"])
                 & (d["label"] == s["label"]) & (d["nodes"] == s["nodes"])] if len(d) else d

    def machine(s) -> NodeModel | None:
        """The machine as it was while solve `s` ran: at the Triad its process measured
        beside it (NodeModel.at_triad), else at its run's own, else its merit run's."""
        m = paired.get(s["run_id"], machine_of.get(s["vm"]))
        beside = same(besides, s)
        if m is None or beside.empty:
            return m
        cores = int(s["ranks"]) // int(s["nodes"]) * int(s["threads"])
        return m.at_triad(float(beside["value"].iloc[0]), cores)

    solves = merit(merits, "solve_time_s")
    iters = merit(merits, "iterations")
    setups = merit(merits, "setup_time_s")
    counts = _counts(merits)
    ours = solves[solves.get("impl", pd.Series(dtype=str)) == "c"] if len(solves) else solves
    if ours.empty:
        raise ValueError("no BICCG solve measured: nothing to fit the model on")
    here = ours[(ours["vm"] == reference["vm"]) & (ours["label"] == reference["layout"])
              & (ours["nodes"] == 1)]
    ref = here[here["problem"] == reference["problem"]]
    if ref.empty:  # the largest grid of the VM's merit run (else of any run) instead
        for rows in (newest(here), here):
            grids = [p for p in rows["problem"].unique() if MatrixModel.is_grid(p)]
            if grids:
                ref = here[here["problem"] == max(grids, key=lambda p: MatrixModel.named(p).n)]
                break
    if ref.empty:
        raise ValueError(f"the model's reference {reference} was not measured, nor any Poisson "
                         "grid there to stand in for it")
    in_merit_run = newest(ref)
    r = (in_merit_run if len(in_merit_run) else ref).sort_values("run_id").iloc[-1]
    layout = SolveLayout(1, int(r["ranks"]), int(r["threads"]))
    fitted_build = _build(r.get("build"))
    n_it = same(iters, r)["value"].iloc[0]
    ref_traffic = traffic_for(r["problem"], int(r["ranks"]), same(counts, r))
    m_ref = machine(r)
    if m_ref is None:
        raise ValueError(f"the model's reference {reference}: no Triad of its machine")
    eff = fit_efficiency(_problem(r), m_ref, layout, n_it, r["value"], ref_traffic, tiers=True)
    setup = same(setups, r)
    ref_pred = predict(_problem(r), m_ref, layout, n_it, eff, ref_traffic, tiers=True)
    setup_iterations = float(setup["value"].iloc[0]) / ref_pred.memory_s if len(setup) else 0.0
    later = same(merit(merits, "later_setup_time_s"), r)
    later_iterations = float(later["value"].iloc[0]) / ref_pred.memory_s if len(later) else None
    solves = []
    for s in ours.itertuples(index=False):
        s = s._asdict()
        m = machine(s)
        lay = SolveLayout(int(s["nodes"]), int(s["ranks"]) // int(s["nodes"]), int(s["threads"]))
        it = same(iters, s)
        if m is not None and len(it):
            solves.append((s, m, lay, _problem(s), float(it["value"].iloc[0])))
    core_gbs, core_how = core_rate(solves, fitted_build, m_ref)
    rows = []
    for s, m, lay, problem, n in solves:
        traffic = traffic_for(s["problem"], int(s["ranks"]), same(counts, s))
        try:
            p = predict(problem, m, lay, n, eff, traffic, tiers=True, core_gbs=core_gbs)
            rule = predict(problem, m, lay, n, eff, traffic)
        except ValueError:
            continue
        is_ref = (s["run_id"], s["problem"], s["label"], s["nodes"]) == (
            r["run_id"], r["problem"], r["label"], r["nodes"])
        why = "" if is_ref else not_used(_build(s.get("build")), fitted_build,
                                         lay.ranks_per_node, lay.threads, m.cores,
                                         float(s["value"]))
        rows.append({"vm": s["vm"], "run_id": s["run_id"], "problem": s["problem"],
                     "layout": f"{lay.nodes}n {s['label']}", "cores": s["cores"],
                     "iterations": n, "measured_s": s["value"],
                     "predicted_s": p.solve_s, "error": p.solve_s / s["value"] - 1,
                     "predicted_rule_s": rule.solve_s,
                     "error_rule": rule.solve_s / s["value"] - 1, "tier": p.tier,
                     "working_set_mib": problem.working_set(lay.ranks) / lay.nodes / 2**20,
                     "cpu": m.cpu, "llc_mib": m.cache_bytes / 2**20,
                     "memory_share": p.memory_s / p.iteration_s, "reference": is_ref,
                     "triad_gbs": m.bandwidth(lay.cores_per_node),
                     "triad_beside": not same(besides, s).empty,
                     "build": _build(s.get("build")), "used": is_ref or not why,
                     "not_used": why, "ranks_per_node": lay.ranks_per_node,
                     "threads": lay.threads, "data": s["data"]})
    return Model(eff, dict(r), pd.DataFrame(rows), iters, counts, setup_iterations,
                 later_iterations, core_gbs, core_how, triad_how(r, m_ref, layout, same(besides, r),
                                                            paired.get(r["run_id"])))


def triad_how(r, m: NodeModel, layout: SolveLayout, beside: pd.DataFrame,
              run: NodeModel | None) -> str:
    """Which Triad the reference solve `r` was fitted at: the one its process measured
    beside it (`beside` non-empty), with its run's for comparison, else its run's."""
    at = f"{m.bandwidth(layout.cores_per_node):.1f} GB/s on {layout.cores_per_node} core(s)"
    if beside.empty:
        return f"its run's Triad, {at} (no Triad measured beside the solve)"
    theirs = f"; its run's: {run.bandwidth(layout.cores_per_node):.1f}" if run else ""
    return f"the Triad measured beside the solve, {at}{theirs}"


def fallback(fitted: Model, reference: dict) -> str:
    """'' where the model was fitted on `reference`'s problem, else one line saying which
    solve stood in for it."""
    if fitted.reference["problem"] == reference["problem"]:
        return ""
    return (f"the time model's reference, {reference['problem']} {reference['layout']} on "
            f"{reference['vm']}, was not measured: fitted on the largest grid measured there, "
            f"{fitted.reference['problem']} ({fitted.reference['data']}); measure the "
            "reference (papermill_params/local-model.yaml measures the default one)")


#: A solve is in its machine's cache where the Triad's ladder there reads at least this
#: much over the machine's DRAM Triad.
IN_CACHE = 1.2


def core_rate(solves: list, build: str, machine: NodeModel) -> tuple[float, str]:
    """(GB/s a core, how) of the solver's bytes (bytes_per_iteration) where its working set
    was in cache: the fastest per core of the solves of `build` on the fitted `machine`
    (its CPU) in the decision's layout whose working set a node the ladder reads at least
    IN_CACHE x the DRAM Triad; (0, why) where none was measured.  A cache feeds the solver
    no faster than this (predict's assumption 2)."""
    best, how = 0.0, "no solve of the fitted build measured in its machine's cache"
    for s, m, lay, problem, n in solves:
        if _build(s.get("build")) != build or m.cpu != machine.cpu or \
                lay.ranks_per_node != RANKS_PER_NODE:
            continue
        dram = m.bandwidth(lay.cores_per_node)
        gbs, tier = m.tier(lay.cores_per_node, problem.working_set(lay.ranks) / lay.nodes)
        if tier != "ladder" or gbs < IN_CACHE * dram:
            continue
        per_iteration = float(s["value"]) / n
        rate = problem.bytes(lay.ranks) / lay.nodes / per_iteration / lay.cores_per_node / 1e9
        if rate > best:
            best = rate
            how = (f"{rate:.2f} GB/s a core: {problem.name} "
                   f"({problem.working_set(lay.ranks) / 2**20:,.0f} MiB, the ladder's Triad "
                   f"{gbs:.1f} GB/s against {dram:.1f} from memory) on {m.cpu} ({s['data']})")
    return best, how
