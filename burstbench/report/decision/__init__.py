"""The burst decision's section of the report (notebook 190, after the cost tables): the time
model's validation, the decision (per job class: P(a VM returns the result sooner than Flow)
at each queue wait, the break-even band, a verdict, time and whole cost on every VM, region,
billing and storage scenario), what decides it (a tornado of the inputs), the model against
the study's Figure 12, and per job class the answer in prose.

Split as a scientist checks it: inputs.py (what is read and assumed, each range with its
source), burstbench/cost (the computation: machines, model, decision, study_check), figures.py
and text.py.  Prices, storage tiers, transfer prices and Flow's fees come from
data/reference/ (their sources in data/reference/README.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from burstbench.core import paths
from burstbench.core.checks import ParamError
from burstbench.cost import burst, inputs, job, machines, model, study_check
from burstbench.cost import prices as price_tables
from burstbench.cost import uncertainty as u
from burstbench.cost.flips import GB_IN, GB_OUT, flip_points, sensitivity
from burstbench.registry import all_merits
from burstbench.report.decision import figures, text
from burstbench.report.parameters import MODEL_REFERENCE
from burstbench.report.sections import Section

#: The queue waits the table gives P(sooner) at (hours): 0, 10 min, 1 h, 4 h, 1 d.
WAITS_H = (0.0, 10 / 60, 1.0, 4.0, 24.0)


def in_region(result: burst.Decision, region: str, problems: list[str]) -> burst.Decision:
    """The decision as the answer reads it: the options priced in `region` (the table keeps
    every region), and those not priced anywhere (their reasons); where no option is priced
    there, every region's, said in `problems`."""
    rows = result.rows
    here = rows["region"].fillna("").isin([region, ""]) if "region" in rows else None
    if here is None or not (here & (rows["status"] == "priced")).any():
        if here is not None:
            problems.append(f"no burst option priced in {region}: the answer compares every "
                            "region's")
        return result
    return dataclasses.replace(result, rows=rows[here])


def decision_report(runs_dir: Path | str = "", reference_dir: Path | str = "",
                    figures_dir: Path | str = "", *, usd_jpy: float = 145.0,
                    region: str = "East US", model_reference: dict | None = None,
                    flow_system: str = "Flow Cloud System", flow_fraction=0.793,
                    flow_vm: str = "flow-cloud", queue_wait_h: float = 1.0,
                    deploy_minutes=(4.0, 5.0, 10.0), wan_mib_s=0, job_solves: int = 100,
                    job_input_gb: float = 10.0, job_output_gb: float = 30.0,
                    keep_months: float = 0.0, egress_free_gb: float = 0.0,
                    pool_min_tib: float = 4.0, pool_jobs_per_month: float = 30.0,
                    g3_iterations: float = 0, user_job: dict | None = None,
                    checkpoint_h: float = 1.0, restart_h: float = 5 / 60,
                    spot_evictions_per_h=(0.02, 0.1, 0.3), spot_start_minutes=(0.0, 5.0, 60.0),
                    platform_jpy_per_month: float = 0.0, mc_draws: int = 4000,
                    mc_seed: int = 2023, show: bool = False) -> Section:
    """Every decision table and figure (see the module docstring).  `wan_mib_s` 0: bounded by
    the Gfarm-on-Azure slides' replication within a region and between two; a number, or
    [low, high], or [low, mode, high], for this and the other ranged parameters.  The table
    holds every region's options; the answer (the figure, the leading and the cheapest
    option, the sensitivity) is `region`'s.  ValueError, one line, for anything given
    wrong."""
    if not (isinstance(queue_wait_h, (int, float)) and queue_wait_h >= 0):
        raise ParamError(f"queue_wait_h must be 0 or more hours, not {queue_wait_h!r}")
    if not (isinstance(mc_draws, int) and mc_draws >= 100):
        raise ParamError(f"mc_draws must be an integer of at least 100, not {mc_draws!r}")
    section = Section("decision")
    runs = paths.runs_dir(runs_dir)
    ref_dir = Path(reference_dir) if reference_dir else paths.reference_dir()
    fig_dir = paths.figures_dir(figures_dir)
    data = job.Data(job_input_gb, job_output_gb, keep_months)
    merits = all_merits(runs, ref_dir, section.problems)
    mode = flow_fraction[1] if isinstance(flow_fraction, (list, tuple)) and \
        len(flow_fraction) == 3 else flow_fraction if not isinstance(
            flow_fraction, (list, tuple)) else sum(flow_fraction) / 2
    machine_of = machines.machines(merits, ref_dir, float(mode), section.problems)
    flow, flow_measured = machines.flow_machine(machine_of, flow_system, flow_vm,
                                                section.problems)
    if flow_measured and not (machines.merit(merits, "solve_time_s")["vm"] == flow_vm).any():
        section.problems.append(f"{flow_system} measured as {flow_vm}: its Triad is used; no "
                                "BICCG solve was measured on it, so the model's error is the "
                                "other machines' validation")
    reference = model_reference or dict(MODEL_REFERENCE)
    try:
        fitted = model.fit(merits, machine_of, reference)
    except ValueError as exc:
        section.problems.append(f"no burst decision: {exc}")
        return section
    if note := model.fallback(fitted, reference):
        section.problems.append(note)
    section.entries.append(figures.validation(section, fitted, fig_dir, show))
    figures.tiers(section, fitted, fig_dir)
    fit = fitted.reference  # the solve fitted on (the reference, else its stand-in)
    if not fitted.validated and len(fitted.validation) > 1:
        section.problems.append(
            f"the time model is fitted on {fit['problem']} {fit['label']} on "
            f"{fit['vm']} (build {fit.get('build') or 'not recorded'}): no "
            "other solve of that build in the layout the decision prices validates it, so "
            "its error is unknown and the decision draws none; measure BICCG again with "
            "this build")
    elif not fitted.validated:
        section.problems.append(
            f"the time model is fitted on the only BICCG solve measured ({fit['problem']} "
            f"{fit['label']} on {fit['vm']}): no other solve validates it, so its "
            "error is unknown and the decision draws none; measure BICCG's other "
            "configurations (after a budget, the same command measures what was left)")
    prices = price_tables.load_prices(ref_dir, usd_jpy, inputs.run_prices(merits))
    cloud = prices.table[prices.table["kind"] == "cloud"]
    regions = tuple(sorted(set(cloud["region"].dropna()) - {"(run)"}))
    ranges = inputs.ranges(fitted, flow_fraction, flow_measured, ref_dir, wan_mib_s,
                           deploy_minutes, spot_evictions_per_h, section.problems,
                           machines.merit(merits, "wan_mib_s"), regions, spot_start_minutes,
                           machine_of)
    jobs, notes = inputs.job_classes(merits, data, job_solves, g3_iterations, user_job or {})
    section.problems += notes
    tiers, egress, flow_tb = inputs.storage_prices(ref_dir, section.problems)
    platform = inputs.platform_costs(prices, regions, platform_jpy_per_month)
    options_of = inputs.options(tiers, egress, machines.storage_rates(merits), ranges,
                                pool_min_tib, pool_jobs_per_month, platform_jpy_month=platform)
    settings = burst.Settings(prices.lookup(flow_system, "onprem_fee"), flow_tb,
                                 checkpoint_h, restart_h, egress_free_gb, mc_draws, mc_seed,
                                 WAITS_H, float(queue_wait_h))
    vms = {k: m for k, m in machine_of.items() if k != flow_vm}  # Flow is not a VM to rent
    result = burst.decide(jobs, vms, flow, flow_measured, fitted, prices,
                             options_of, ranges, settings)
    drawn_from = inputs.sources(merits, ref_dir, ranges)
    fixed = inputs.fixed_assumptions(data, job_solves, pool_jobs_per_month, egress_free_gb,
                                     pool_min_tib, checkpoint_h, restart_h, platform,
                                     platform_jpy_per_month, user_job or {},
                                     fitted.setup_rows())
    text.inputs_table(section, ranges, mc_draws, mc_seed, fig_dir, drawn_from, fixed)
    text.decision_table(section, result, WAITS_H, queue_wait_h, flow_system, fig_dir,
                        drawn_from, jobs)
    result = in_region(result, region, section.problems)  # the answer: this region's options
    rows = result.rows
    priced = rows[rows["status"] == "priced"] if "status" in rows else rows.iloc[0:0]
    if priced.empty:
        why = "; ".join(rows["status"].dropna().unique()[:3]) if len(rows) else "no job"
        section.problems.append(f"no burst option priced for any job: {why}")
    else:
        swings, flips = {}, {}
        for jc in jobs:
            lead = text.leading(rows, jc.name)
            if lead is None:
                continue
            key = (jc.name, lead["vm"], lead["region"], lead["billing"],
                   lead["storage_scenario"])
            at_modes = float(result.evaluators[key](u.modes(ranges))["break_even_h"][0])
            swings[jc.name] = (" ".join(str(k) for k in key[1:]), at_modes,
                               sensitivity(result, jc.name, key))
            deciding = [sw.name for sw in swings[jc.name][2][:2]]
            flips[jc.name] = flip_points(result.evaluators[key], ranges, deciding + [
                GB_IN, GB_OUT], jc.data, float(queue_wait_h))
        basis = text.basis(jobs, ranges, region, fitted)
        section.entries.append(figures.decision_figure(
            result, [jc.name for jc in jobs], flow_system, queue_wait_h, fig_dir, show,
            basis))
        text.sensitivity_table(section, swings, fig_dir, drawn_from)
        section.entries.append(figures.tornado(swings, fig_dir, show, basis))
        text.flip_table(section, flips, swings, queue_wait_h, fig_dir, drawn_from)
        section.entries.append(text.choices(rows, jobs, swings, flow_system, fitted,
                                            queue_wait_h, fig_dir, region,
                                            u.wan_of(ranges, region), flips))
        section.entries.append(text.numbers(rows, jobs, swings, flow_system, queue_wait_h,
                                            fig_dir))
    try:
        check = study_check.study_check(fitted, machine_of, ranges, mc_draws, mc_seed)
    except ValueError as exc:
        section.problems.append(f"no Figure 12 check: {exc}")
    else:
        section.entries.append(text.study_table(section, check, fig_dir, drawn_from))
    return section


def show_answer(section: Section, figures_dir: Path | str = "") -> None:
    """Notebook 190's last cell: per job the answer (burst_decision_choices.md: the verdict,
    the job, its staging and the network rate with its source, the leading and cheapest
    options), then where the files went (build/mine/ unless told otherwise)."""
    from IPython.display import Markdown, display

    fig_dir = paths.figures_dir(figures_dir)
    choices = fig_dir / "burst_decision_choices.md"
    if any(choices.name in e.files for e in section.entries):  # none where nothing was decided
        display(Markdown(choices.read_text()))
    else:
        print("no answer: nothing was decided (see the notes above)")
    mine = fig_dir == paths.figures_dir("")
    print(f"written to {fig_dir}" + (" (build/mine/: yours, ignored by git; `make figures` "
                                     "writes figures/)" if mine else ""))
