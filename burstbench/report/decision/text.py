"""The burst decision's tables and prose: the decision table, the inputs and their ranges,
the sensitivity ranking, the study's Figure 12 check, and per job class the one-line answer
with its cost breakdown and the inputs that decide it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from burstbench.core.store import atomic_write
from burstbench.cost import uncertainty as u
from burstbench.cost.burst import Decision, JobClass, wait_label
from burstbench.cost.model import MIN_SOLVE_S, Model
from burstbench.report.decision.figures import hours
from burstbench.report.sections import Entry, Section, table_entry

#: The decision table's columns and the digits they are printed with.
COLUMNS = {"job": None, "nodes": None, "vm": None, "region": None, "billing": None,
           "storage_scenario": None, "status": None, "verdict": None,
           "break_even_p10_h": 3, "break_even_p50_h": 3, "break_even_p90_h": 3,
           "time_h": 3, "time_low_h": 3, "time_high_h": 3, "flow_compute_h": 3,
           "flow_compute_low_h": 3, "flow_compute_high_h": 3,
           "jpy": 0, "jpy_low": 0, "jpy_high": 0, "compute_jpy": 0, "storage_jpy": 0,
           "egress_jpy": 0, "flow_jpy": 0, "extra_jpy": 0, "price_per_node_h": 1,
           "staging_h": 3, "staging_mib_s": 1, "pool_mib_s": 1, "staging_limit": None,
           "pool": None, "flow_source": None, "how": None, "traffic": None}


def decision_table(section: Section, decision: Decision, waits_h: tuple[float, ...],
                   queue_wait_h: float, flow_system: str, fig_dir: Path,
                   data: list[str]) -> pd.DataFrame:
    """figures/burst_decision.{csv,md}: every row, rounded as printed, drawn from `data`."""
    cols = list(COLUMNS)
    at = cols.index("verdict") + 1
    cols[at:at] = [f"p_sooner_at_{wait_label(w)}" for w in waits_h]
    out = decision.rows.reindex(columns=cols).copy()
    for c, d in COLUMNS.items():
        if d is not None:
            out[c] = pd.to_numeric(out[c], errors="coerce").round(d)
    for c in cols:
        if c.startswith("p_sooner_at_"):
            out[c] = pd.to_numeric(out[c], errors="coerce").round(3)
    table_entry(section, out.to_dict("records"), fig_dir, "burst_decision",
                "Burst decision: P(sooner), break-even band, verdict, time and whole cost per "
                "job, VM, region, billing and storage scenario",
                "Predicted, none of it measured, each number the 10th, 50th or 90th percentile "
                "of seeded Monte Carlo draws of every uncertain input "
                f"(burst_inputs.md), the same draw on the VM's side and on "
                f"{flow_system}'s where they share an input. p_sooner_at_<w>: the share of "
                "draws in which the VM returns the result before Flow's queue wait w plus Flow's "
                "computing; break_even_*: the wait above which the VM is sooner (negative: "
                f"even with no wait); verdict at {hours(queue_wait_h)} (queue_wait_h): burst "
                "where the break-even's 90th percentile is below it, stay where its 10th is "
                "above, undecided between. Storage: a pool per job (minimum size, billed per "
                "hour rounded up) or the study's always-on pool shared by a month's burst "
                "jobs; staging at the least of the WAN, the pool and the VM's measured "
                "storage (staging_limit). A VM with no price, no Triad, or no InfiniBand for "
                "several nodes is listed with its reason, never priced.", data)
    return out


def inputs_table(section: Section, ranges: dict[str, u.Range], draws: int, seed: int,
                 fig_dir: Path, data: list[str]) -> None:
    """figures/burst_inputs.{csv,md}: each uncertain input, its range and its source (the
    entry drawn from `data`)."""
    table_entry(section, [{"input": r.name, "low": r.low, "mode": r.mode, "high": r.high,
                           "unit": r.unit, "drawn": "fixed" if r.fixed else
                           "log-uniform" if r.log else "triangular", "source": r.source}
                          for r in ranges.values()], fig_dir, "burst_inputs",
                "The burst decision's uncertain inputs",
                f"Each drawn {draws} times (seed {seed}) for every row of "
                f"burst_decision.csv; a time predicted p stands for "
                "p / (1 + model "
                "error); positions (iterations, published MPI latency) are fractions of each "
                "machine's or layout's own range.", data)


def sensitivity_table(section: Section, swings: dict, fig_dir: Path, data: list[str]) -> None:
    """figures/burst_sensitivity.{csv,md}: per job class, the inputs ranked by how far each
    moves its leading option's break-even wait (drawn from `data`)."""
    rows = []
    for name, (option, base, ss) in swings.items():
        for rank, s in enumerate(ss, 1):
            rows.append({"job": name, "option": option, "rank": rank, "input": s.name,
                         "low": s.low, "high": s.high,
                         "break_even_at_low_h": round(s.at_low, 4),
                         "break_even_at_high_h": round(s.at_high, 4),
                         "swing_h": round(s.swing, 4), "break_even_at_modes_h": round(base, 4)})
    table_entry(section, rows, fig_dir, "burst_sensitivity",
                "What decides the break-even wait, per job class",
                "Each input from its low to its high end, the others at their modes, for the "
                "job class's leading option (the lowest median break-even); ranked by the "
                "swing of the break-even wait in hours.", data)


def study_table(section: Section, check: pd.DataFrame, agree: dict, fig_dir: Path,
                data: list[str]) -> Entry:
    """figures/biccg_model_study.{csv,md} (drawn from `data`), and the verdict against the
    study's Figure 12."""
    table_entry(section, check.round(4).to_dict("records"), fig_dir, "biccg_model_study",
                "BICCG model against the study's Figure 12: HB120rs_v3 and HC44rs, Poisson "
                "256x256x512, 1-32 nodes",
                "Predicted solve seconds (10th, 50th, 90th percentile of the decision's draws), "
                "the memory and message seconds of a solve at the inputs' modes, "
                "P(HB120rs_v3 faster), the faster by median and the term whose difference "
                "decides it. The study: HB120rs_v3 faster at small parallelism, HC44rs at large "
                "(small latency-bound messages).", data)
    lines = []
    for scale, a in agree.items():
        lines.append(f"- At {a['nodes']} node(s) ({scale} parallelism) the model ranks "
                     f"**{a['model']}** faster (P(HB120rs_v3 faster) {a['p_first_faster']:.0%}),"
                     f" the study {a['study']}: "
                     + ("**agrees**" if a["agrees"] else "**disagrees**")
                     + f"; the term that decides it: {a['term']}.")
    large, last = agree["large"], check.iloc[-1]
    a, b = (c[:-len("_memory_s")] for c in check.columns if c.endswith("_memory_s"))
    why = ("" if large["agrees"] else
           f"\n\nWhy the model disagrees at {large['nodes']} nodes: a solve's messages (the "
           "solver's own count per iteration: a halo plane to each neighbour, two "
           f"Allreduces) cost {last[f'{a}_messages_s']:.3f} s on {a} and "
           f"{last[f'{b}_messages_s']:.3f} s on {b}, against a memory part of "
           f"{last[f'{a}_memory_s']:.3f} and {last[f'{b}_memory_s']:.3f} s: the Triad ranks "
           "the machines at every node count, and at the halo's size the larger bandwidth "
           f"({a}'s) outweighs the lower latency ({b}'s). The study's reason, small "
           "latency-bound messages, needs what the model does not price: the OpenMP "
           "synchronisation of every color (20 colors, both sweeps) over 60 threads a rank "
           "on HB120rs_v3 against 22 on HC44rs, and a network under a real job's load. "
           "Neither is measured here, and the model is not tuned to agree.")
    text = ("## The time model against the study's Figure 12\n\n" + "\n".join(lines) + why
            + "\n\nWritten from biccg_model_study.csv.\n")
    return prose(fig_dir / "biccg_model_study_check.md", text,
                 "The model against the study's Figure 12",
                 "Whether the predicted ranking of HB120rs_v3 and HC44rs agrees with the study's "
                 "at small and large node counts, and the term that decides it.",
                 "biccg_model_study.csv")


def prose(path: Path, text: str, title: str, caption: str, source: str) -> Entry:
    """Write a Markdown text whole and list it in the report, with the table it came from."""
    atomic_write(path, text)
    return Entry(title, [path.name], caption, [source])


def leading(rows: pd.DataFrame, name: str) -> pd.Series | None:
    """A job class's leading option: the lowest median break-even wait (the cheaper on a
    tie), or None where nothing was priced."""
    d = rows[(rows["job"] == name) & (rows["status"] == "priced")]
    if d.empty:
        return None
    return d.sort_values(["break_even_p50_h", "jpy"], kind="stable").iloc[0]


def the_job(jc: JobClass, lead: pd.Series) -> str:
    """What the answer is for: the job (solves, nodes, data in and out), and its staging
    (time, rate and what limits it; the network rate's source follows the list)."""
    work = (f"{jc.flow_node_hours:g} node-hours on Flow" if jc.problem is None
            else f"{jc.solves:,} solve(s)")
    return (f"  - The job: {work} on {jc.nodes} node(s), {jc.data.input_gb:g} GB in and "
            f"{jc.data.output_gb:g} GB out; staging both ways takes "
            f"{hours(lead['staging_h'])} at {lead['staging_mib_s']:.0f} MiB/s (medians), "
            f"limited by {lead['staging_limit']}.\n")


def choices(rows: pd.DataFrame, jobs: list[JobClass], swings: dict, flow_system: str,
            model: Model, queue_wait_h: float, fig_dir: Path, region: str,
            wan: u.Range) -> Entry:
    """Per job class: the one-line answer at the user's wait, the job and its staging, then
    the leading and the cheapest option in `region` with their cost breakdown, the
    break-even band and the two inputs that decide it."""
    lines = []
    for jc in jobs:
        d = rows[(rows["job"] == jc.name) & (rows["status"] == "priced")]
        if d.empty:
            why = rows.loc[rows["job"] == jc.name, "status"].dropna().unique()
            lines.append(f"- **{jc.name}**: nothing priced ({'; '.join(why[:3])})."
                         + (f" {jc.note}." if jc.note else ""))
            continue
        lead = leading(rows, jc.name)
        if lead is None:
            continue
        cheap = d.sort_values(["jpy", "break_even_p50_h"], kind="stable").iloc[0]
        top = [s.name for s in swings[jc.name][2][:2]] if jc.name in swings else []
        billing = {"payg": "pay-as-you-go", "spot": "spot"}.get(lead["billing"],
                                                                lead["billing"])
        option = f"{lead['vm']} ({billing}, {lead['region']}, {lead['storage_scenario']})"
        band = (f"{hours(lead['break_even_p50_h'])} (10-90%: "
                f"{hours(lead['break_even_p10_h'])} to {hours(lead['break_even_p90_h'])})")
        p = lead[f"p_sooner_at_{wait_label(queue_wait_h)}"]
        by = f"; decided most by {' and '.join(top)}" if top else ""
        answer = {
            "burst": f"burst to {option} when {flow_system}'s queue passes {band}; it costs "
                     f"{abs(lead['extra_jpy']):,.0f} JPY "
                     f"{'more' if lead['extra_jpy'] >= 0 else 'less'} than Flow. At a "
                     f"{hours(queue_wait_h)} "
                     f"wait: **burst** (P(sooner) {p:.0%}{by})",
            "stay": f"**stay** on {flow_system} at a {hours(queue_wait_h)} wait: the soonest "
                    f"option, {option}, is sooner only once the queue passes {band}{by}",
            "undecided": f"**undecided** at a {hours(queue_wait_h)} wait: {option} is sooner "
                         f"once {flow_system}'s queue passes {band}, a band that holds the "
                         f"wait (P(sooner) {p:.0%}{by})"}[lead["verdict"]]
        lines.append(
            f"- **{jc.name}**: {answer}.\n"
            + the_job(jc, lead) +
            f"  - Time and cost: {hours(lead['time_h'])} to the result for "
            f"{lead['jpy']:,.0f} JPY ({lead['jpy_low']:,.0f}-{lead['jpy_high']:,.0f}): "
            f"node-hours {lead['compute_jpy']:,.0f}, storage {lead['storage_jpy']:,.0f} "
            f"({lead['pool']}), egress {lead['egress_jpy']:,.0f} (medians; they need not add "
            f"up to the median total); {flow_system}: {hours(lead['flow_compute_h'])} of "
            f"computing, {lead['flow_jpy']:,.0f} JPY.\n"
            f"  - Cheapest burst: {cheap['vm']} {cheap['billing']} {cheap['region']}, "
            f"{cheap['storage_scenario']}: {cheap['jpy']:,.0f} JPY, {hours(cheap['time_h'])}, "
            f"break-even {hours(cheap['break_even_p50_h'])} "
            f"({hours(cheap['break_even_p10_h'])} to {hours(cheap['break_even_p90_h'])})."
            + (f" {jc.note}." if jc.note else ""))
    lo, hi = model.error_range
    error = (f"The time model's error on solves of at least {MIN_SOLVE_S:g} s ranges "
             f"{lo:+.0%} to {hi:+.0%}; it and every other input are drawn"
             if model.validated else
             "The time model's error is unknown (no solve but the one it was fitted on "
             "validates it) and is not drawn: these answers are surer than their data; every "
             "other input is drawn")
    negative = (rows.get("break_even_p10_h", pd.Series(dtype=float)) < 0).any()
    text = (f"## What would have been chosen in {region}\n\n" + "\n".join(lines)
            + f"\n\nThe network rate assumed for staging: {wan.low:.0f}-{wan.high:.0f} MiB/s "
            f"(most likely {wan.mode:.0f}), {wan.source}.\n\nPredicted, none of "
            f"it measured. {error} (burst_inputs.md), the inputs that decide each "
            f"job's break-even ranked in burst_sensitivity.md. "
            + ("A negative break-even: the VM is sooner even with no queue on Flow. "
               if negative else "")
            + f"Options in {region} (region); every region's are in burst_decision.csv."
            "\n")
    return prose(fig_dir / "burst_decision_choices.md", text,
                 "What would have been chosen, and why",
                 "Per job class, from the decision table: the answer at the wait asked about, "
                 "the leading and the cheapest option, and the inputs that decide it.",
                 "burst_decision.csv")


def numbers(rows: pd.DataFrame, jobs: list[JobClass], swings: dict, flow_system: str,
            queue_wait_h: float, fig_dir: Path) -> Entry:
    """figures/burst_decision_numbers.md: the README's paragraph on the decision, written
    from the table (the study's problem on its fewest and most nodes)."""
    study = [jc for jc in jobs if jc.name.startswith("Poisson 256x256x512")]
    parts = []
    for jc in (study[0], study[-1]) if study else ():
        lead = leading(rows, jc.name)
        if lead is None:
            continue
        top = " and ".join(s.name for s in swings[jc.name][2][:2])
        parts.append(
            f"on {jc.nodes} node(s) the leading option is {lead['vm']} {lead['billing']} "
            f"{lead['region']} ({lead['storage_scenario']}): sooner than {flow_system} once "
            f"its queue is longer than {hours(lead['break_even_p50_h'])} (10-90%: "
            f"{hours(lead['break_even_p10_h'])} to {hours(lead['break_even_p90_h'])}, decided "
            f"most by {top}), verdict at a {hours(queue_wait_h)} wait: {lead['verdict']}; "
            f"{lead['jpy']:,.0f} JPY (median; node-hours {lead['compute_jpy']:,.0f}, storage "
            f"{lead['storage_jpy']:,.0f}, egress {lead['egress_jpy']:,.0f}) against "
            f"{lead['flow_jpy']:,.0f} JPY on Flow")
    text = ("With the committed data, for the study's Poisson 256x256x512 (predicted, with "
            "every input drawn): " + "; ".join(parts) + ".\n")
    return prose(fig_dir / "burst_decision_numbers.md", text, "The decision in numbers",
                 "The README's paragraph on the decision, from the table.",
                 "burst_decision.csv")
