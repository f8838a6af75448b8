"""``burstbench replay``: its arguments (imported by the CLI with no pandas or plotting
library) and its run, which prints the policy to pick and every policy on its VM and, with
--figures-dir, writes the report's figures and tables there; --predictions writes each job's
predicted wait."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(c: argparse.ArgumentParser) -> None:
    """The replay's options."""
    c.add_argument("--log", required=True, help="the accounting log (.gz read as gzip)")
    c.add_argument("--format", default="", choices=("", "swf", "sacct", "pbs"),
                   help="swf, sacct (sacct --parsable2) or pbs (PBS Pro accounting); "
                   "default: guessed from the content")
    c.add_argument("--system", default="Flow Cloud System",
                   help="the on-premise system: its node-hour fee and node Triad")
    c.add_argument("--procs-per-node", type=float, default=0,
                   help="processors per node of the log's machine (default: its header)")
    c.add_argument("--machine-nodes", type=int, default=0,
                   help="nodes of the log's machine (default: its header's MaxNodes, else "
                   "the most its jobs held at once)")
    c.add_argument("--shared-nodes", action="store_true",
                   help="jobs shared nodes: the queue counts processors (--machine-nodes x "
                   "--procs-per-node, else MaxProcs), a burst job takes ceil(processors / "
                   "--procs-per-node) VM nodes")
    c.add_argument("--p-sooner", default="",
                   help="comma list of P(VM sooner) levels a job bursts at, each between 0 "
                   "and 1, increasing (default 0.5,0.8,0.9,0.95,0.98): decided at its submit "
                   "(the probability policies) and again while it waits (watch)")
    c.add_argument("--gain-h", default="",
                   help="comma list of hours, increasing: a gain policy bursts a job when "
                   "the hours it is expected to save are at least this x its chance of "
                   "coming back later (default 4,16,64,256,1024,4096)")
    c.add_argument("--thresholds", default="",
                   help="comma list of hours, increasing, for the threshold and queue-state "
                   "policies (default 0.1667,1,4,12,24,48)")
    c.add_argument("--region", default="East US",
                   help="the prices' region, one that data/reference/prices_vm.csv names "
                   "(default East US)")
    c.add_argument("--billing", default="payg", choices=("payg", "spot"),
                   help="VM billing (spot: its price, no eviction modelled here)")
    c.add_argument("--draws", type=int, default=40, help="seeded draws of the uncertain inputs")
    c.add_argument("--runs-dir", default="", help="runs to read (default data/runs)")
    c.add_argument("--reference-dir", default="", help="default data/reference")
    c.add_argument("--figures-dir", default="",
                   help="also write the figures and tables here")
    c.add_argument("--predictions", default="",
                   help="write each job's predicted wait here (CSV: job, submit, wait_q10_h, "
                   "wait_q50_h, wait_q90_h)")
    c.add_argument("--no-learn", action="store_true",
                   help="predict the wait without the learned model (history alone)")


def _floats(text: str, what: str, default) -> list[float]:
    try:
        return [float(t) for t in text.split(",")] if text else list(default)
    except ValueError:
        raise ValueError(f"error: --{what} must be a comma list of numbers, not {text!r}"
                         ) from None


def replay_command(args: argparse.Namespace) -> int:
    """Run the replay; one line on stderr and status 2 for a bad log or parameter."""
    from burstbench.core.checks import ParamError
    from burstbench.replay import logs, policy, report, run

    try:
        thresholds = _floats(args.thresholds, "thresholds", run.THRESHOLDS_H)
        p_sooner = _floats(args.p_sooner, "p-sooner", policy.P_SOONER)
        gains = _floats(args.gain_h, "gain-h", policy.GAIN_H)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        policy.check_thresholds(thresholds)
        policy.check_p_sooner(p_sooner)
        policy.check_gain(gains, "--gain-h")
        kw = dict(system=args.system, procs_per_node=args.procs_per_node,
                  machine_nodes=args.machine_nodes, shared_nodes=args.shared_nodes,
                  thresholds_h=thresholds, p_sooner=p_sooner, gain_h=gains,
                  region=args.region,
                  billing=args.billing, draws=args.draws, learn=not args.no_learn)
        from burstbench.advise.advice import check_region

        check_region(args.region, args.reference_dir)
        if args.predictions and not Path(args.predictions).resolve().parent.is_dir():
            raise ParamError(f"--predictions {args.predictions}: no folder "
                             f"{Path(args.predictions).resolve().parent} to write it in")
        lg = logs.read_log(args.log, args.format)
        print(f"read {len(lg.jobs):,} jobs of {lg.machine}", file=sys.stderr)
        r = run.replay(lg, runs_dir=args.runs_dir, reference_dir=args.reference_dir,
                       progress=lambda line: print(line, file=sys.stderr, flush=True), **kw)
        print(f"the machine: {r.capacity:,} {r.queue_unit} ({r.capacity_how}), "
              f"{r.procs_per_node:g} processor(s) a node ({r.procs_how})", file=sys.stderr)
        if args.predictions:
            write_predictions(r, args.predictions)
        if args.figures_dir and not r.rows.empty:
            from burstbench.report import sections

            section = sections.Section("replay", problems=list(r.problems))
            report.write(section, r, Path(args.log).name, Path(args.figures_dir))
            sections.save_section(section, args.figures_dir)
    except ParamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for note in lg.notes + r.problems:
        print(f"note: {note}")
    if r.rows.empty:
        print("nothing replayed", file=sys.stderr)
        return 1
    print(report.summary_text(r))
    if args.predictions:
        print(f"predictions written to {args.predictions}")
    if args.figures_dir:
        print(f"written to {args.figures_dir}")
    return 0


def write_predictions(r, path: str) -> None:
    """One row per job: its number, submit (s, exact: SWF's from the log's start, sacct's
    and PBS's from its first job's) and its predicted wait's 10%, 50% and 90% quantiles
    (hours, 6 digits); written whole or not at all."""
    import pandas as pd

    from burstbench.core import store

    pred = r.predicted
    table = pd.DataFrame({"job": r.log.jobs["job"].to_numpy(),
                          "submit": [f"{v:.17g}" for v in r.log.jobs["submit"]],
                          **{f"wait_q{int(lv * 100)}_h": pred.quantile(lv) / 3600
                             for lv in (0.1, 0.5, 0.9)}})
    store.atomic_write(Path(path), table.to_csv(index=False, float_format="%.6g"))
