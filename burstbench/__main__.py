"""``python -m burstbench`` (also installed as ``burstbench``): run notebooks, rebuild the report.

Every command is a thin wrapper over what a notebook or a Makefile target
does, so a batch job, a terminal and JupyterLab all measure the same way.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Sequence

from burstbench import params, paths, store

REPORT_NOTEBOOKS = "1[0-9][0-9]_report_*.ipynb"


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _execute(notebook: Path, output: Path, parameters: dict, log: bool) -> str | None:
    """Run one notebook with papermill; return None on success, else one line saying why."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    logger = logging.getLogger("papermill")
    if log and not logger.handlers:  # echo the kernel's output as it comes
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(str(notebook), str(output), parameters=parameters,
                                   kernel_name="python3", log_output=log, progress_bar=False,
                                   cwd=str(paths.project_root()))
    except PapermillExecutionError as exc:
        return f"{exc.ename}: {exc.evalue}"
    return None


def cmd_run(args: argparse.Namespace) -> int:
    """Execute the measurement notebooks for one params file into one run folder."""
    try:
        values = params.load_file(args.params)
    except params.ParamError as exc:
        return _fail(str(exc))
    only = args.only.split(",") if args.only else list(params.NOTEBOOKS)
    for name in only:
        if name not in params.NOTEBOOKS:
            return _fail(f"--only: unknown benchmark '{name}' (known: "
                         f"{', '.join(params.NOTEBOOKS)})")
    checked = {}
    try:  # every notebook's values, checked before anything runs
        for name in only:
            checked[name] = params.validate(values, name, where=str(args.params))
    except params.ParamError as exc:
        return _fail(str(exc))
    first = checked[only[0]]
    runs_dir = paths.runs_dir(args.runs_dir or first["runs_dir"])
    vm = first["vm"]
    digests = {name: params.digest(checked[name], name) for name in only}
    run_id = (args.run_id or first["run_id"] or store.find_resumable_many(runs_dir, vm, digests)
              or store.new_run_id())
    from burstbench import provenance

    try:
        run_dir = store.plan_run(
            runs_dir, vm, run_id, {name: (digests[name], checked[name]) for name in only},
            system=lambda: provenance.collect(paths.project_root())).root
    except store.StoreError as exc:
        return _fail(str(exc))
    print(f"run folder: {run_dir}")
    os.environ.setdefault("BURSTBENCH_PROGRESS", "lines")  # the kernel inherits it
    failed = []
    for name in only:
        nb = paths.notebooks_dir() / params.NOTEBOOKS[name]
        if not nb.exists():
            failed.append(f"{name}: notebook {nb} is missing")
            continue
        passed = params.for_section(values, name) | {"run_id": run_id,
                                                      "runs_dir": str(runs_dir)}
        print(f"== {name}: {nb.name}")
        try:
            why = _execute(nb, run_dir / nb.name, passed, log=not args.quiet)
        except KeyboardInterrupt:
            print(f"\ninterrupted: what was measured is kept in {run_dir}; resume with: "
                  f"python -m burstbench run --params {args.params} --run-id {run_id}",
                  file=sys.stderr)
            return 130
        if why:
            failed.append(f"{name}: {why} (executed notebook: {run_dir / nb.name})")
    if failed:
        for f in failed:
            print(f"FAILED {f}", file=sys.stderr)
        return 1
    print(f"done: {run_dir}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Execute every report notebook (figures and tables from data/ alone), then the index."""
    from burstbench import report

    fig_dir = paths.figures_dir(args.figures_dir)
    notebooks = sorted(paths.notebooks_dir().glob(REPORT_NOTEBOOKS))
    if not notebooks:
        return _fail(f"no report notebooks ({REPORT_NOTEBOOKS}) in {paths.notebooks_dir()}")
    failed = []
    for nb in notebooks:
        print(f"== {nb.name}")
        why = _execute(nb, paths.project_root() / "build" / "report" / nb.name,
                       {"runs_dir": str(paths.runs_dir(args.runs_dir)),
                        "reference_dir": str(args.reference_dir or paths.reference_dir()),
                        "figures_dir": str(fig_dir)}, log=args.verbose)
        if why:
            failed.append(f"{nb.name}: {why}")
    index = report.write_index(fig_dir)
    print(f"index: {index}")
    for f in failed:
        print(f"FAILED {f}", file=sys.stderr)
    return 1 if failed else 0


def cmd_params(args: argparse.Namespace) -> int:
    """Check parameter files against every notebook's parameters."""
    bad = 0
    for f in args.files:
        try:
            values = params.load_file(f)
            for name in params.NOTEBOOKS:
                params.validate(values, name, where=str(f))
        except params.ParamError as exc:
            print(f"error: {exc}", file=sys.stderr)
            bad += 1
        else:
            print(f"ok: {f}")
    return 2 if bad else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="burstbench", description="Cloud-burst benchmark notebooks: measure a VM with "
        "papermill, rebuild the report's figures and tables from data/.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  burstbench run --params papermill_params/local.yaml\n"
               "  burstbench report\n  burstbench params papermill_params/*.yaml")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="measure: execute the measurement notebooks for a VM",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Execute the measurement notebooks with papermill into one "
                       "run folder (data/runs/<vm>/<run-id>/), keeping each executed notebook "
                       "there. An interrupted run resumes when run again with the same "
                       "parameters (or --run-id).",
                       epilog="example:\n  burstbench run --params papermill_params/local.yaml "
                              "--only triad")
    r.add_argument("--params", required=True, help="papermill_params/<vm>.yaml")
    r.add_argument("--only", default="", help=f"comma list of {', '.join(params.NOTEBOOKS)}")
    r.add_argument("--runs-dir", default="", help="where run folders go (default data/runs)")
    r.add_argument("--run-id", default="", help="write into (or resume) this run")
    r.add_argument("--quiet", action="store_true", help="do not echo the notebooks' output")
    r.set_defaults(func=cmd_run)

    rep = sub.add_parser("report", help="rebuild every figure and table from data/ alone",
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         description="Execute the report notebooks (notebooks/1xx_report_*) "
                         "and write figures/README.md, the index of figures and tables.",
                         epilog="example:\n  burstbench report --figures-dir /tmp/figs")
    rep.add_argument("--runs-dir", default="", help="runs to read (default data/runs)")
    rep.add_argument("--reference-dir", default="", help="default data/reference")
    rep.add_argument("--figures-dir", default="", help="output folder (default figures/)")
    rep.add_argument("--verbose", action="store_true", help="echo the notebooks' output")
    rep.set_defaults(func=cmd_report)

    pc = sub.add_parser("params", help="check parameter files",
                        description="Check that every key of each file is known to a "
                        "notebook and every value is valid.",
                        epilog="example: burstbench params papermill_params/*.yaml")
    pc.add_argument("files", nargs="+")
    pc.set_defaults(func=cmd_params)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
