"""``burstbench replay``: its arguments (imported by the CLI with no pandas or plotting
library) and its run, which prints the leading VM's thresholds and the oracle's and, with
--figures-dir, writes the report's figure and tables there."""

from __future__ import annotations

import argparse
import sys


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
    c.add_argument("--thresholds", default="",
                   help="comma list of hours, increasing (default 0.1667,1,4,12,24,48,96,192)")
    c.add_argument("--region", default="East US", help="prices' region")
    c.add_argument("--billing", default="payg", choices=("payg", "spot"),
                   help="VM billing (spot: its price, no eviction modelled here)")
    c.add_argument("--draws", type=int, default=40, help="seeded draws of the uncertain inputs")
    c.add_argument("--runs-dir", default="", help="runs to read (default data/runs)")
    c.add_argument("--reference-dir", default="", help="default data/reference")
    c.add_argument("--figures-dir", default="",
                   help="also write the figure and tables here")


def replay_command(args: argparse.Namespace) -> int:
    """Run the replay; one line on stderr and status 2 for a bad log or parameter."""
    from burstbench.core.checks import ParamError
    from burstbench.replay import logs, report, run

    try:
        thresholds = [float(t) for t in args.thresholds.split(",")] if args.thresholds \
            else list(run.THRESHOLDS_H)
    except ValueError:
        print(f"error: --thresholds must be a comma list of hours, not {args.thresholds!r}",
              file=sys.stderr)
        return 2
    try:
        kw = dict(runs_dir=args.runs_dir, reference_dir=args.reference_dir,
                  system=args.system, procs_per_node=args.procs_per_node,
                  machine_nodes=args.machine_nodes, thresholds_h=thresholds,
                  region=args.region, billing=args.billing, draws=args.draws)
        lg = logs.read_log(args.log, args.format)
        r = run.replay(lg, **kw)
        if args.figures_dir:
            from burstbench.report import sections

            section = report.replay_report(args.log, fmt=args.format,
                                           figures_dir=args.figures_dir, **kw)
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
    if args.figures_dir:
        print(f"written to {args.figures_dir}")
    return 0
