"""The burst decision's tables and prose: the decision table, the inputs and their ranges,
the sensitivity ranking, the study's Figure 12 check, and per job class the one-line answer
with its cost breakdown and the inputs that decide it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from burstbench.core.store import atomic_write
from burstbench.cost import study_check
from burstbench.cost import uncertainty as u
from burstbench.cost.burst import Decision, JobClass, wait_label
from burstbench.cost.flips import Flip
from burstbench.cost.model import Model
from burstbench.report.decision.figures import hours
from burstbench.report.sections import Entry, Section, table_entry

#: The decision table's columns and the digits they are printed with.
COLUMNS = {"job": None, "nodes": None, "vm": None, "region": None, "billing": None,
           "storage_scenario": None, "status": None, "verdict": None,
           "break_even_p10_h": 3, "break_even_p50_h": 3, "break_even_p90_h": 3,
           "time_h": 3, "time_low_h": 3, "time_high_h": 3, "flow_compute_h": 3,
           "flow_compute_low_h": 3, "flow_compute_high_h": 3,
           "jpy": 0, "jpy_low": 0, "jpy_high": 0, "compute_jpy": 0, "storage_jpy": 0,
           "egress_jpy": 0, "platform_jpy": 0, "flow_jpy": 0, "extra_jpy": 0,
           "be_deploy_h": 3, "be_deploy_low_h": 3, "be_deploy_high_h": 3,
           "be_stage_in_h": 3, "be_stage_in_low_h": 3, "be_stage_in_high_h": 3,
           "be_stage_out_h": 3, "be_stage_out_low_h": 3, "be_stage_out_high_h": 3,
           "be_compute_diff_h": 3, "be_compute_diff_low_h": 3, "be_compute_diff_high_h": 3,
           "price_per_node_h": 1,
           "staging_h": 3, "staging_mib_s": 1, "pool_mib_s": 1, "staging_limit": None,
           "pool": None, "flow_source": None, "how": None, "traffic": None}


def jobs_stated(jobs: list[JobClass]) -> str:
    """The jobs as a caption states them: 'Poisson 256x256x512, 1 node(s): 100 solve(s)
    (assumed: ...) ...; ...'."""
    return "; ".join(f"{jc.name}: {jc.stated()}" for jc in jobs)


def basis(jobs: list[JobClass], ranges: dict[str, u.Range], region: str,
          model: Model) -> str:
    """What a decision figure's numbers rest on, for its caption: the job (once, where
    the study's classes differ only in nodes), the region's network and the model's error
    band."""
    study = [jc for jc in jobs if not jc.yours]
    job = (f"Each panel's job: {study[0].stated(nodes=False)}, on the panel's nodes"
           if study else f"The jobs: {jobs_stated(jobs)}")
    mine = [f"{jc.name}: {jc.stated()}" for jc in jobs if jc.yours]
    wan = u.wan_of(ranges, region)
    lo, hi = model.error_range
    err = (f"the model's error {lo:+.0%} to {hi:+.0%} (its fitted build, the decision's "
           "layout)" if model.validated else "no model error (not validated)")
    how = ("measured" if wan.source.startswith("measured") else "given" if
           wan.source == "wan_mib_s" else "nothing measured: one TCP stream's bound"
           if "TCP stream's window" in wan.source else "nothing measured: published bounds")
    return (f"{job}{'; ' + '; '.join(mine) if mine else ''}. It rests on the WAN to {region}, "
            f"{wan.low:.0f}-{wan.high:.0f} MiB/s ({how}), {err}, and deployment "
            "(burst_inputs.md).")


def decision_table(section: Section, decision: Decision, waits_h: tuple[float, ...],
                   queue_wait_h: float, flow_system: str, fig_dir: Path,
                   data: list[str], jobs: list[JobClass]) -> pd.DataFrame:
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
                "storage (staging_limit), each region over its own WAN (burst_inputs.md). "
                "be_<term>_h: the break-even's terms, with their 10-90% bands (be_<term>_low_h, "
                "_high_h): deployment (a spot row's wait for capacity included), staging in, "
                "staging out, and the VM's computing less Flow's; their medians need not add "
                "up to the break-even's. platform_jpy: the always-on server and master node's "
                "share per job. A VM with no price, no Triad, or no InfiniBand for several "
                f"nodes is listed with its reason, never priced. The jobs: {jobs_stated(jobs)}.",
                data)
    return out


def inputs_table(section: Section, ranges: dict[str, u.Range], draws: int, seed: int,
                 fig_dir: Path, data: list[str], fixed: list[dict]) -> None:
    """figures/burst_inputs.{csv,md}: each uncertain input, its range and its source, then
    the fixed assumptions (`fixed`: the job's sizes, the bill's fixed terms), each with
    whose it is (the entry drawn from `data`)."""
    rows: list[dict[str, object]] = [{"input": r.name, "low": r.low, "mode": r.mode, "high": r.high,
             "unit": r.unit, "drawn": "fixed" if r.fixed else
             "log-uniform" if r.log else "triangular", "source": r.source}
            for r in ranges.values()]
    rows += [{"input": f["input"], "low": None, "mode": f["value"], "high": None,
              "unit": f["unit"], "drawn": "assumption, not drawn", "source": f["source"]}
             for f in fixed]
    table_entry(section, rows, fig_dir, "burst_inputs",
                "The burst decision's inputs: the uncertain ones and the fixed assumptions",
                f"Each uncertain input drawn {draws} times (seed {seed}) for every row of "
                f"burst_decision.csv; a time predicted p stands for "
                "p / (1 + model "
                "error); positions (iterations, published MPI latency) are fractions of each "
                "machine's or layout's own range. Rows 'assumption, not drawn': what the "
                "decision takes as known, the job's own sizes first, each saying whether it "
                "is the study's or an assumption of the report's parameters.", data)


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


def study_table(section: Section, check: pd.DataFrame, fig_dir: Path, data: list[str]) -> Entry:
    """figures/biccg_model_study.{csv,md} (drawn from `data`), and the verdict against the
    study's Figure 12, before and after the memory tiers (study_check.CACHES)."""
    a, b = study_check.PAIR
    tiered = check[check["caches"] == study_check.CACHES[True]]
    in_cache = tiered.loc[tiered[f"{a}_tier"] == "cache", "nodes"]
    holds = (f"holds it from {int(in_cache.min())} nodes on" if len(in_cache)
             else "holds it at none of these node counts")
    table_entry(section, check.round(4).to_dict("records"), fig_dir, "biccg_model_study",
                "BICCG model against the study's Figure 12: HB120rs_v3 and HC44rs, Poisson "
                "256x256x512, 1-32 nodes (this project's range), without and with L3 tiers",
                "Per view (every byte at the DRAM Triad, as the study's STREAM; or each "
                f"node's working set at the tier it fits: {a}'s 1,536 MiB of L3 a node "
                f"{holds}, at a drawn speed-up) and node count: predicted "
                "solve seconds (10th, 50th, 90th percentile of the decision's draws), the "
                "tier, the memory and message seconds of a solve at the inputs' modes, "
                "P(HB120rs_v3 faster), the faster by median and the term whose difference "
                "decides it. The study gives Figure 12 in its text only, with no data points "
                "and no node counts: the check compares rankings, not times.", data)
    lines, whys = [], []
    for view in study_check.CACHES.values():
        agree = study_check.agreement(check, caches=view)
        lines.append(f"**{view}:**\n")
        for scale, g in agree.items():
            lines.append(f"- At {g['nodes']} node(s) ({scale} parallelism) the model ranks "
                         f"**{g['model']}** faster (P({a} faster) {g['p_first_faster']:.0%}), "
                         f"the study {g['study']}: "
                         + ("**agrees**" if g["agrees"] else "**disagrees**")
                         + f"; the term that decides it: {g['term']}.")
        lines.append("")
        last = check[check["caches"] == view].iloc[-1]
        if not agree["large"]["agrees"]:
            whys.append(f"{view}, {int(last['nodes'])} nodes: messages "
                        f"{last[f'{a}_messages_s']:.3f} s on {a} and "
                        f"{last[f'{b}_messages_s']:.3f} s on {b}, memory "
                        f"{last[f'{a}_memory_s']:.3f} s ({last[f'{a}_tier']}) and "
                        f"{last[f'{b}_memory_s']:.3f} s ({last[f'{b}_tier']})")
    rows = ["| nodes | working set a node (MiB) | view | " + f"{a} p50 (s), tier | "
            f"{b} p50 (s), tier | faster |", "|---:|---:|---|---|---|---|"]
    for r in check.itertuples(index=False):
        r = r._asdict()
        rows.append(f"| {r['nodes']} | {r['working_set_mib_per_node']:,.0f} | {r['caches']} | "
                    f"{r[f'{a}_p50_s']:.3g}, {r[f'{a}_tier']} | "
                    f"{r[f'{b}_p50_s']:.3g}, {r[f'{b}_tier']} | {r['faster']} |")
    why = ("" if not whys else
           "\nWhy the model disagrees at large parallelism (a solve's seconds at the inputs' "
           "modes): " + "; ".join(whys) + ". The Triad ranks the machines at every node "
           f"count, and at the halo's size the larger bandwidth ({a}'s) outweighs the lower "
           f"latency ({b}'s); {a}'s L3 only widens the gap. The study's reason, small "
           "latency-bound messages, needs what the model does not price: the OpenMP "
           "synchronisation of every color (20 colors, both sweeps) over 60 threads a rank "
           f"on {a} against 22 on {b}, and a network under a real job's load. Neither is "
           "measured here, and the model is not tuned to agree.\n")
    shows = ("\nWhat the study's text shows, and what it does not: it states the ranking "
             "(HB120rs_v3 faster at small parallelism, HC44rs at large) and its reason (small, "
             "latency-bound messages). It gives no times, no data points and no node counts "
             "(1-32 is this project's range), and it says nothing of caches: whether "
             "HB120rs_v3's L3 held the working set at its largest runs, or how many threads "
             "a rank ran. So the check can test a ranking, and neither view's times.\n")
    text = ("## The time model against the study's Figure 12\n\n" + "\n".join(lines)
            + "\n" + "\n".join(rows) + "\n" + why + shows
            + "\nWritten from biccg_model_study.csv.\n")
    return prose(fig_dir / "biccg_model_study_check.md", text,
                 "The model against the study's Figure 12",
                 "Whether the predicted ranking of HB120rs_v3 and HC44rs agrees with the study's "
                 "at small and large node counts, without and with L3 tiers, and the term that "
                 "decides it.", "biccg_model_study.csv")


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
    """What the answer is for: the job (solves, nodes, data in and out, each saying whose
    it is), and its staging (time, rate and what limits it)."""
    return (f"  - The job: {jc.stated()}; staging both ways takes "
            f"{hours(lead['staging_h'])} at {lead['staging_mib_s']:.0f} MiB/s (medians), "
            f"limited by {lead['staging_limit']}.\n")


def terms(lead: pd.Series) -> str:
    """The break-even taken apart: its four terms, medians with their 10-90% bands."""
    names = {"deploy": "deployment", "stage_in": "staging in", "stage_out": "staging out",
             "compute_diff": "computing, the VM's less Flow's"}
    return "; ".join(f"{label} {hours(lead[f'be_{t}_h'])} ({hours(lead[f'be_{t}_low_h'])} "
                     f"to {hours(lead[f'be_{t}_high_h'])})" for t, label in names.items())


#: What Flow's fee is, beside a VM's price (the study's note to Table 4).
FLOW_FEE = ("Flow's fee covers power and part of operations only; a VM's price covers "
            "hardware, facilities, power and operations (the study, Table 4): the "
            "difference in JPY compares a whole price with a partial one")


def flip_table(section: Section, flips: dict[str, list[Flip]], swings: dict,
               queue_wait_h: float, fig_dir: Path, data: list[str]) -> None:
    """figures/burst_flip_points.{csv,md}: per job class and its leading option, the value
    of each deciding input (and of the job's GB in and out) at which the verdict at the
    wait asked about changes, the others at their modes."""
    rows = [{"job": name, "option": swings[name][0], "input": f.input,
             "flips_at": None if f.at is None else round(f.at, 4), "unit": f.unit,
             "at_modes": round(f.value_at_modes, 4), "verdict_at_modes": f.verdict_at_modes,
             "means": f.text()} for name, fs in flips.items() for f in fs]
    table_entry(section, rows, fig_dir, "burst_flip_points",
                "What would flip the verdict, per job class",
                f"For the leading option of each job class, at the {hours(queue_wait_h)} wait "
                "asked about (queue_wait_h): the value of each of the two inputs that decide "
                "its break-even (burst_sensitivity.csv), and of the job's GB in and out, at "
                "which the verdict at the inputs' modes changes between burst and stay, the "
                "others at their modes; found by bisection. Empty flips_at: no value in a sane "
                "span flips it (means says so). The verdict itself takes the 10-90% band, "
                "so it is undecided near each flip point.", data)


def choices(rows: pd.DataFrame, jobs: list[JobClass], swings: dict, flow_system: str,
            model: Model, queue_wait_h: float, fig_dir: Path, region: str,
            wan: u.Range, flips: dict[str, list[Flip]]) -> Entry:
    """Per job class: the one-line answer at the user's wait, the job and its staging, the
    break-even's terms and what would flip it, then the leading and the cheapest option in
    `region` with their cost breakdown, the break-even band and the two inputs that decide
    it."""
    lines = []
    for jc in jobs:
        d = rows[(rows["job"] == jc.name) & (rows["status"] == "priced")]
        if d.empty:
            why = rows.loc[rows["job"] == jc.name, "status"].dropna().unique()
            lines.append(f"- **{jc.name}**: nothing priced ({'; '.join(why[:3])})."
                         + (f" {jc.note}." if jc.note else "")
                         + f"\n  - The job: {jc.stated()}.")
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
                     f"{'more' if lead['extra_jpy'] >= 0 else 'less'} than Flow's fee. At a "
                     f"{hours(queue_wait_h)} "
                     f"wait: **burst** (P(sooner) {p:.0%}{by})",
            "stay": f"**stay** on {flow_system} at a {hours(queue_wait_h)} wait: the soonest "
                    f"option, {option}, is sooner only once the queue passes {band}{by}",
            "undecided": f"**undecided** at a {hours(queue_wait_h)} wait: {option} is sooner "
                         f"once {flow_system}'s queue passes {band}, a band that holds the "
                         f"wait (P(sooner) {p:.0%}{by})"}[lead["verdict"]]
        flip = "; ".join(f.text() for f in flips.get(jc.name, []))
        lines.append(
            f"- **{jc.name}**: {answer}.\n"
            + the_job(jc, lead) +
            f"  - The break-even, taken apart (medians, 10-90%): {terms(lead)}.\n"
            + (f"  - What would flip the verdict at {hours(queue_wait_h)} (the others at "
               f"their modes): {flip}.\n" if flip else "") +
            f"  - Time and cost: {hours(lead['time_h'])} to the result for "
            f"{lead['jpy']:,.0f} JPY ({lead['jpy_low']:,.0f}-{lead['jpy_high']:,.0f}): "
            f"node-hours {lead['compute_jpy']:,.0f}, storage {lead['storage_jpy']:,.0f} "
            f"({lead['pool']}), egress {lead['egress_jpy']:,.0f}, always-on server and "
            f"master node {lead['platform_jpy']:,.0f} (medians; they need not add "
            f"up to the median total); {flow_system}: {hours(lead['flow_compute_h'])} of "
            f"computing, {lead['flow_jpy']:,.0f} JPY of fee.\n"
            f"  - Cheapest burst: {cheap['vm']} {cheap['billing']} {cheap['region']}, "
            f"{cheap['storage_scenario']}: {cheap['jpy']:,.0f} JPY, {hours(cheap['time_h'])}, "
            f"break-even {hours(cheap['break_even_p50_h'])} "
            f"({hours(cheap['break_even_p10_h'])} to {hours(cheap['break_even_p90_h'])})"
            + (" (spot: it starts when capacity is free, spot_start_minutes)"
               if cheap["billing"] == "spot" else "") + "."
            + (f" {jc.note}." if jc.note else ""))
    lo, hi = model.error_range
    error = (f"The time model's error, on the solves of its fitted build in the layout the "
             f"decision prices, ranges {lo:+.0%} to {hi:+.0%}; it and every other input are "
             "drawn"
             if model.validated else
             "The time model's error is unknown (no solve but the one it was fitted on "
             "validates it) and is not drawn: these answers are surer than their data; every "
             "other input is drawn")
    negative = (rows.get("break_even_p10_h", pd.Series(dtype=float)) < 0).any()
    text = (f"## What would have been chosen in {region}\n\n" + "\n".join(lines)
            + f"\n\nThe network rate assumed for staging to {region}: {wan.low:.0f}-"
            f"{wan.high:.0f} MiB/s (most likely {wan.mode:.0f}), {wan.source}. Each region "
            "has its own (burst_inputs.md).\n\n"
            f"{FLOW_FEE}.\n\nPredicted, none of "
            f"it measured. {error} (burst_inputs.md, with the fixed assumptions), the inputs "
            "that decide each job's break-even ranked in burst_sensitivity.md, what flips "
            "each verdict in burst_flip_points.md. "
            + ("A negative break-even: the VM is sooner even with no queue on Flow. "
               if negative else "")
            + f"Options in {region} (region); every region's are in burst_decision.csv."
            "\n")
    return prose(fig_dir / "burst_decision_choices.md", text,
                 "What would have been chosen, and why",
                 "Per job class, from the decision table: the answer at the wait asked about, "
                 "the job (solves, nodes, GB in and out, whose each is), the break-even's "
                 "terms and what flips it, the leading and the cheapest option, and the "
                 f"inputs that decide it. The jobs: {jobs_stated(jobs)}.",
                 "burst_decision.csv")


def numbers(rows: pd.DataFrame, jobs: list[JobClass], swings: dict, flow_system: str,
            queue_wait_h: float, fig_dir: Path) -> Entry:
    """figures/burst_decision_numbers.md: the README's paragraph on the decision, written
    from the table (the study's problem on its fewest and most nodes), the job stated."""
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
            f"most by {top}; staging {hours(lead['be_stage_in_h'] + lead['be_stage_out_h'])} "
            f"of it), verdict at a {hours(queue_wait_h)} wait: {lead['verdict']}; "
            f"{lead['jpy']:,.0f} JPY (median; node-hours {lead['compute_jpy']:,.0f}, storage "
            f"{lead['storage_jpy']:,.0f}, egress {lead['egress_jpy']:,.0f}, always-on server "
            f"and master node {lead['platform_jpy']:,.0f}) against "
            f"{lead['flow_jpy']:,.0f} JPY of Flow's fee")
    job = study[0].stated(nodes=False) if study else ""
    text = ("With the committed data, for the study's Poisson 256x256x512 "
            + (f"as a job of {job} " if job else "")
            + "(predicted, with every input drawn): " + "; ".join(parts) + ".\n")
    return prose(fig_dir / "burst_decision_numbers.md", text, "The decision in numbers",
                 "The README's paragraph on the decision, from the table, the job stated.",
                 "burst_decision.csv")
