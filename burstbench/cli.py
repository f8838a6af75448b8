"""``python -m burstbench`` (also installed as ``burstbench``): run notebooks, rebuild the report.

Every command is a thin wrapper over what a notebook or a Makefile target
does, so a batch job, a terminal and JupyterLab all measure the same way.

Long: every command's parser (its help, description and example) and its thin handler live
here, importing what a command needs only when it runs, so that `--help` and `params` start
in a tenth of a second; the work itself is in the modules they call.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from burstbench import params
from burstbench.core import paths

REPORT_NOTEBOOKS = "1[0-9][0-9]_report_*.ipynb"


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def cmd_run(args: argparse.Namespace) -> int:
    """Execute the measurement notebooks for one params file into one run folder, as its one
    writer and the one sweep measuring on this host (see supervise.guarded)."""
    from burstbench import supervise
    from burstbench.core import locks, store

    try:  # what the file selects (--only narrows it), every value checked before anything runs
        values = params.load_file(args.params)
        only = params.choose(values, str(args.params), args.only)
        checked = {name: params.validate(values, name, where=str(args.params)) for name in only}
    except params.ParamError as exc:
        return _fail(str(exc))
    first = checked[only[0]]
    from burstbench.core import budget

    try:  # --budget 20m, else budget_minutes of the params file
        args.budget_s = budget.parse(args.budget) if args.budget else budget.check(
            60 * first["budget_minutes"], f"{first['budget_minutes']:g}", "budget_minutes") \
            if first["budget_minutes"] else None
    except budget.BudgetError as exc:
        return _fail(str(exc))
    runs_dir = _runs_folder(args, first)
    vm = first["vm"]
    digests = {name: params.digest(checked[name], name) for name in only}
    run_id = (args.run_id or first["run_id"] or store.find_resumable_many(runs_dir, vm, digests)
              or store.new_run_id())
    run_dir = runs_dir / vm / run_id
    try:
        with supervise.guarded(run_dir, args.wait, args.force,
                               say=lambda line: print(line, file=sys.stderr, flush=True)):
            return _measure(args, values, only, checked, digests, run_dir)
    except locks.Busy as exc:
        return _fail(str(exc))
    except store.NoSpace as exc:  # the first write that found the disk full ends the run
        return _fail(f"{exc}: free space and resume with: {_resume_command(args, run_id)}", 1)
    except supervise.WaitStopped as exc:
        print(exc, file=sys.stderr)
        return 128 + exc.signum


def _runs_folder(args: argparse.Namespace, first: dict) -> Path:
    """Where a run goes: --runs-dir, else the file's runs_dir, else data/runs; a test run
    (`test: true`) that names neither goes under build/runs/, said in one line."""
    where = paths.measure_dir(args.runs_dir or first["runs_dir"], first["test"])
    if first["test"] and not (args.runs_dir or first["runs_dir"]):
        print(f"a test run (test: true in {args.params}): writing under {where} (ignored by "
              "git), not data/runs (--runs-dir to choose)", file=sys.stderr, flush=True)
    return where


def _measure(args: argparse.Namespace, values: dict, only: list[str], checked: dict,
             digests: dict, run_dir: Path) -> int:
    """Plan the run folder and execute each notebook into it; the exit status."""
    from burstbench import supervise
    from burstbench.core import budget, provenance, runner, signals, store
    from burstbench.registry import env_prefixes

    runs_dir, vm, run_id = run_dir.parent.parent, run_dir.parent.name, run_dir.name
    try:
        store.plan_run(
            runs_dir, vm, run_id, {name: (digests[name], checked[name]) for name in only},
            system=lambda: provenance.collect(paths.project_root(), env_prefixes()))
    except store.StoreError as exc:
        return _fail(str(exc))
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise store.NoSpace.at(run_dir) from exc
        raise
    print(f"run folder: {run_dir}")
    os.environ.setdefault("BURSTBENCH_PROGRESS", "lines")  # the kernel inherits it
    runner.adopt_orphans()  # a kernel whose papermill died stays ours to stop
    failed = []
    passes = budget.start(getattr(args, "budget_s", None))  # [None], or [0, None]
    try:
        with signals.stop_signals():  # Ctrl-C, SIGTERM (scancel, time limit), SIGHUP alike
            for name, tier in ((n, t) for t in passes
                               for n in budget.pass_order(run_dir, only, t)):
                if not budget.should_start(run_dir, name, tier, len(passes)):
                    continue
                nb = paths.notebooks_dir() / params.notebooks()[name]
                if not nb.exists():
                    failed.append(f"{name}: notebook {nb} is missing")
                    continue
                # the deadline is this command's (budget.start, inherited): a notebook
                # must not set its own from budget_minutes (--budget none: no limit)
                passed = params.for_section(values, name) | {"run_id": run_id,
                                                              "runs_dir": str(runs_dir),
                                                              "budget_minutes": 0}
                print(f"== {name}: {nb.name}")
                why = supervise.execute_notebook(nb, run_dir / nb.name, passed,
                                                 log=not args.quiet, timeout=args.timeout,
                                                 committed=params.defaults(name))
                if why and supervise.is_full(why, run_dir):  # the next would fail alike
                    raise store.NoSpace(supervise.no_space(run_dir, only, run_dir / nb.name))
                if why:  # a kernel that died (timeout, memory) left its benchmark running
                    supervise.mark_stopped(run_dir, [name], "incomplete")
                    failed.append(f"{name}: {why} (executed notebook: {run_dir / nb.name})")
    except KeyboardInterrupt as exc:
        runner.signal_all(runner.descendants(os.getpid()), signal.SIGKILL)  # none, normally
        return _interrupted(args, run_dir, run_id, only, exc)
    finally:
        budget.end()
    if getattr(args, "budget_s", None) is not None:
        text, left = budget.table(run_dir, only)
        print(text)
        if left:
            print(f"{left}; measure them with: "
                  f"{_resume_command(args, run_id)}")
    if failed:
        print(f"{len(failed)} of {len(only)} notebooks failed; the others' results are in "
              f"{run_dir}; re-run the same command to resume:", file=sys.stderr)
        for f in failed:
            print(f"FAILED {f}", file=sys.stderr)
        return 1
    print(f"done: {run_dir}")
    return 0


def _resume_command(args: argparse.Namespace, run_id: str) -> str:
    """The command as it was run (same Python, params, options), plus --run-id."""
    import shlex

    argv = [sys.executable, "-m", "burstbench", "run", "--params", str(args.params)]
    for flag, value in (("--only", args.only), ("--runs-dir", args.runs_dir),
                        ("--timeout", f"{args.timeout:g}" if args.timeout else ""),
                        ("--budget", getattr(args, "budget", ""))):
        argv += [flag, value] if value else []
    return shlex.join(argv + ["--run-id", run_id] + (["--quiet"] if args.quiet else []))


def _interrupted(args: argparse.Namespace, run_dir: Path, run_id: str, only: list[str],
                 exc: KeyboardInterrupt) -> int:
    """Mark what was running interrupted, say what is kept and how to resume; 128 + signal."""
    from burstbench import supervise
    from burstbench.core import budget, signals

    signum = exc.signum if isinstance(exc, signals.Interrupted) else signal.SIGINT
    kept = supervise.mark_stopped(run_dir, only, "interrupted")
    print(f"\ninterrupted by {signals.signal_name(signum)}: what was measured is kept in "
          f"{run_dir} (configurations stored: {kept}); resume with: "
          f"{_resume_command(args, run_id)}", file=sys.stderr)
    if getattr(args, "budget_s", None) is not None:  # what the budget had left to measure
        print(budget.table(run_dir, only)[0], file=sys.stderr)
    return 128 + signum


def cmd_jobs(args: argparse.Namespace) -> int:
    """Write (and optionally submit) a PBS Pro or Slurm job script for a params file."""
    from burstbench import jobs
    from burstbench.core import store

    try:
        values = params.load_file(args.params)
        checked = {name: params.validate(values, name, where=str(args.params))
                   for name in params.choose(values, str(args.params), args.only)}
        first = next(iter(checked.values()))  # the common keys are alike in each
        vm = first["vm"]
        need, key = jobs.nodes_needed(checked)
        if need > args.nodes >= 1:
            raise jobs.JobError(f"{args.params} asks for {need} nodes ({key}), but the job "
                                f"has --nodes {args.nodes}")
        runs = _runs_folder(args, first)
        text = jobs.render(args.scheduler, Path(args.params).resolve(), args.nodes, vm,
                           paths.project_root(), args.walltime, args.queue, args.only, runs,
                           ranks_per_node=args.ranks_per_node, threads=args.threads)
    except (params.ParamError, jobs.JobError) as exc:
        return _fail(str(exc))
    try:  # the scheduler opens the output file before the script runs: it must exist
        jobs.log_dir(runs, vm).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail(f"cannot create the job's log folder {jobs.log_dir(runs, vm)}: "
                     f"{exc.strerror}")
    if not args.output:
        sys.stdout.write(text)
        if args.submit:
            return _fail("--submit needs --output (the script must be a file)")
        return 0
    out = Path(args.output)
    try:
        store.atomic_write(out, text)
        out.chmod(0o755)
    except OSError as exc:
        return _fail(f"cannot write {out}: {exc.strerror}")
    print(f"job script: {out}")
    if args.submit:
        try:
            print(f"submitted: {jobs.submit(args.scheduler, out)}")
        except jobs.JobError as exc:
            return _fail(str(exc), 1)
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    """Merge run folders brought back from VMs into the runs folder."""
    from burstbench.core import store

    added, dupes, refused = store.collect([Path(d) for d in args.dirs],
                                          paths.runs_dir(args.runs_dir))
    for a in added:
        print(f"added {a}")
    for d in dupes:
        print(f"skipped {d}: already collected")
    for r in refused:
        print(f"refused {r}", file=sys.stderr)
    print(f"{len(added)} added, {len(dupes)} duplicates skipped, {len(refused)} refused")
    return 1 if refused else 0


def cmd_report(args: argparse.Namespace) -> int:
    """Execute every report notebook (figures and tables from data/ alone), then the index.

    The notebooks run in a few warm kernels at once (burstbench/report/executor.py: one per core,
    each running its share one after another, its namespace reset in between), not one
    papermill process and kernel each: a rebuild no longer pays for Jupyter, matplotlib and
    pandas once per notebook.  A notebook that fails does not stop the others: it is kept in
    build/report/, executed up to its error, named at the end, and the exit status is 1.
    """
    from burstbench.report import executor

    # the committed report only from its defaults: your parameters go to your folder
    fig_dir = paths.figures_dir(args.figures_dir) if args.figures_dir or args.params \
        else paths.report_dir()
    if args.include_test_runs:  # read by report.sections in the notebooks' kernels
        os.environ["BURSTBENCH_INCLUDE_TEST_RUNS"] = "1"
    notebooks = sorted(paths.notebooks_dir().glob(REPORT_NOTEBOOKS))
    if not notebooks:
        return _fail(f"no report notebooks ({REPORT_NOTEBOOKS}) in {paths.notebooks_dir()}")
    folders = {"runs_dir": str(paths.runs_dir(args.runs_dir)),
               "reference_dir": str(args.reference_dir or paths.reference_dir()),
               "figures_dir": str(fig_dir)}
    try:  # every parameter of every notebook from here, none from a notebook's saved cell
        given = (params.report_parameters(args.params) if args.params else {}) | folders
    except params.ParamError as exc:
        return _fail(str(exc))
    if args.params and not args.figures_dir:
        print(f"your parameters ({args.params}): writing to {fig_dir}, not figures/ "
              "(--figures-dir to choose)", flush=True)
    from burstbench.report import parameters as report

    def parameters(nb: Path) -> tuple[dict, dict]:
        return report.defaults(nb.name), report.for_notebook(nb.name, given)

    try:
        results, index_why = executor.run(
            notebooks, paths.project_root() / "build" / "report", parameters,
            cwd=paths.project_root(), env=dict(os.environ), log=args.verbose,
            after=_index_code(fig_dir), on_start=lambda nb, kernel: print(f"== {nb.name}",
                                                                          flush=True))
    except ValueError as exc:  # BURSTBENCH_REPORT_KERNELS set to something else
        return _fail(str(exc))
    if index_why:  # no kernel was left to write it: here (importing matplotlib, pandas)
        from burstbench.report import index

        index.write_index(fig_dir)
    print(f"index: {fig_dir / 'README.md'}")
    failed = [f"{r.notebook.name}: {r.error}" for r in results if r.error]
    for f in failed:
        print(f"FAILED {f}", file=sys.stderr)
    return 1 if failed else 0


def cmd_replay(args: argparse.Namespace) -> int:
    """A centre's accounting log replayed against the burst decision (burstbench.replay)."""
    from burstbench.replay.command import replay_command

    return replay_command(args)


def cmd_advise(args: argparse.Namespace) -> int:
    """Burst advice on a live Slurm or PBS queue (burstbench.advise)."""
    from burstbench.advise.command import advise_command

    return advise_command(args)


def _index_code(fig_dir: Path) -> str:
    """figures/README.md written by a kernel that has the report's modules imported already."""
    return f"from burstbench.report import index as _index\n_index.write_index({str(fig_dir)!r})\n"


def cmd_params(args: argparse.Namespace) -> int:
    """Check parameter files against every notebook's parameters; --write-docs: rewrite the
    keys' documentation from the code."""
    if args.write_docs:
        readme = paths.project_root() / "papermill_params" / "README.md"
        for page, changed in {readme: params.write_docs(readme), **params.write_pages()}.items():
            print(f"{'rewrote' if changed else 'already current:'} {page}")
    if args.keys:
        sys.stdout.write(params.all_keys())
    if not (args.files or args.write_docs or args.keys):
        return _fail("params: give parameter files to check (or --write-docs, --keys)")
    bad = 0
    for f in args.files:
        try:
            use = params.check_file(f)
        except (params.ParamError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            bad += 1
        else:
            print(f"ok: {f} ({use})")
    return 2 if bad else 0


def _command(sub, name: str, func, summary: str, description: str,
             example: str) -> argparse.ArgumentParser:
    """One subcommand: its one-line help, its description and an example."""
    c = sub.add_parser(name, help=summary, description=description,
                       epilog="example:\n  " + example,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.set_defaults(func=func)
    return c


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="burstbench", description="Cloud-burst benchmark notebooks: measure a VM with "
        "papermill, rebuild the report's figures and tables from data/, run it all as batch "
        "jobs.", formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  burstbench run --params papermill_params/local.yaml\n"
               "  burstbench report\n  burstbench params papermill_params/*.yaml\n"
               "  burstbench jobs --scheduler pbs --params papermill_params/hc44rs.yaml "
               "--nodes 8\n  burstbench collect /mnt/results")
    sub = p.add_subparsers(dest="command", required=True)

    r = _command(sub, "run", cmd_run, "measure: execute the measurement notebooks for a VM",
                 "Execute the measurement notebooks with papermill into one run folder "
                 "(data/runs/<vm>/<run-id>/), keeping each executed notebook there: every "
                 "registered benchmark's, each key the params file does not set at its "
                 "default, unless the file's `only: [triad, biccg]` or `skip: [storage]` says "
                 "otherwise (`burstbench params FILE` says which); --only narrows that further. "
                 "A notebook that fails is kept, executed "
                 "up to its error, and the others still run; the exit status is 1 at the end. "
                 "An interrupted run resumes when run again with the same parameters (or "
                 "--run-id).", "burstbench run --params papermill_params/local.yaml --only triad")
    r.add_argument("--params", required=True, help="papermill_params/<vm>.yaml")
    r.add_argument("--only", default="", help=f"comma list of {', '.join(params.notebooks())}: "
                   "of those the params file measures (its only/skip), these alone")
    r.add_argument("--runs-dir", default="", help="where run folders go (default data/runs)")
    r.add_argument("--run-id", default="", help="write into (or resume) this run")
    r.add_argument("--quiet", action="store_true", help="do not echo the notebooks' output")
    r.add_argument("--timeout", type=float, default=None,
                   help="seconds any one notebook cell may run (default: no limit)")
    r.add_argument("--budget", default="", metavar="DURATION",
                   help="measure for at most this long (20m, 1h30m, 900s): what the decision "
                   "needs first, no configuration started that does not fit by its estimate; "
                   "the same command again measures what was left; 'none': the whole sweep "
                   "(default: budget_minutes of the params file, else no limit)")
    r.add_argument("--wait", action="store_true",
                   help="when another sweep measures on this host, wait for it to end "
                   "(default: refuse)")
    r.add_argument("--force", action="store_true",
                   help="take over a run's lock held from another host (its sweep is dead)")

    j = _command(sub, "jobs", cmd_jobs, "write a PBS Pro or Slurm job script that runs `run`",
                 "Write a job script that requests the nodes, enters this project's "
                 "environment and runs `burstbench run --params ...`; MPI runs across nodes "
                 "take their hosts from $PBS_NODEFILE or $SLURM_JOB_NODELIST. Printed, or "
                 "written to --output and, with --submit, handed to qsub / sbatch (where "
                 "installed; otherwise the script is kept and said not submitted).",
                 "burstbench jobs --scheduler pbs --params papermill_params/hc44rs.yaml "
                 "--nodes 8 --output hc44rs.pbs --submit")
    j.add_argument("--scheduler", required=True, choices=("pbs", "slurm"))
    j.add_argument("--params", required=True, help="papermill_params/<vm>.yaml")
    j.add_argument("--nodes", type=int, required=True, help="nodes to request")
    j.add_argument("--ranks-per-node", type=int, default=None,
                   help="MPI ranks per node: PBS mpiprocs (default 1), Slurm --ntasks-per-node")
    j.add_argument("--threads", type=int, default=None,
                   help="OpenMP threads per rank: PBS ompthreads (default 1), Slurm "
                        "--cpus-per-task")
    j.add_argument("--walltime", default="04:00:00", help="HH:MM:SS (default 04:00:00)")
    j.add_argument("--queue", default="", help="PBS queue / Slurm partition")
    j.add_argument("--only", default="", help="comma list of benchmarks to run, of those the "
                   "params file measures (its only/skip)")
    j.add_argument("--runs-dir", default="", help="where runs go (default data/runs)")
    j.add_argument("--output", default="", help="write the script here (default: print it)")
    j.add_argument("--submit", action="store_true", help="submit it with qsub / sbatch")

    c = _command(sub, "collect", cmd_collect, "merge run folders brought back from VMs",
                 "Copy each run folder found in DIR (a run folder, or a tree of "
                 "<vm>/<run-id>/ folders) into the runs folder, after checking it; runs "
                 "already there (same VM and run id) are skipped, damaged ones (a file "
                 "missing, shorter or changed since its manifest was written, fewer "
                 "configurations than measured) are refused by name; interrupted runs are "
                 "added and said to be incomplete. Exit status 1 when any was refused.",
                 "burstbench collect /mnt/results/hc44rs /mnt/results/hb120rs_v3")
    c.add_argument("dirs", nargs="+", metavar="DIR")
    c.add_argument("--runs-dir", default="", help="where runs go (default data/runs)")

    rep = _command(sub, "report", cmd_report, "rebuild every figure and table from data/ alone",
                   "Execute the report notebooks (notebooks/1xx_report_*) and write "
                   "figures/README.md, the index of figures and tables.",
                   "burstbench report --figures-dir /tmp/figs\n"
                   "  burstbench report --params myjob.yaml --figures-dir /tmp/myjob")
    rep.add_argument("--runs-dir", default="", help="runs to read (default data/runs)")
    rep.add_argument("--reference-dir", default="", help="default data/reference")
    rep.add_argument("--figures-dir", default="", help="output folder (default figures/; "
                     "with --params, build/mine/: your job never rewrites the report)")
    rep.add_argument("--params", default="", metavar="FILE",
                     help="a YAML file of the report notebooks' parameters, e.g. your job for "
                     "the burst decision (user_job: {name: mine, problem: {poisson: [512, 512, "
                     "512]}, nodes: [2, 4]}) or region: Japan East; a key no report notebook "
                     "has is refused")
    rep.add_argument("--verbose", action="store_true", help="echo the notebooks' output")
    rep.add_argument("--include-test-runs", action="store_true",
                     help="also draw runs whose params say `test: true` (smoke.yaml), labelled "
                     "as test runs; by default they are left out and named in the notes")

    from burstbench.replay.command import add_arguments as _replay_arguments

    _replay_arguments(_command(
        sub, "replay", cmd_replay, "replay a centre's accounting log: which jobs would have "
        "burst, how much sooner, at what price", "Read an accounting log (SWF, sacct "
        "--parsable2 or PBS Pro E records; the format guessed from its content); predict "
        "each job's wait at its submit from what was known then (docs/replay.md); decide "
        "whether it bursts, by P(the VM returns it sooner) >= p, by the hours it is expected "
        "to save per chance of coming back later (the gain), by its predicted median wait "
        "past a threshold, by the old queue-state rule, and as the perfect policy would; "
        "print the pick (the P(sooner) policy that saves the most hours with at most 10% of "
        "its burst jobs made later, of 10 or more; not a gain policy: decided in the queue "
        "it thins, the gain makes more later, comparisons/README.md) and the leading VM's "
        "table.",
        "burstbench replay --log ../shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz"))

    from burstbench.advise.command import add_arguments as _advise_arguments

    _advise_arguments(_command(
        sub, "advise", cmd_advise, "which pending jobs of a Slurm or PBS queue to send to the "
        "cloud now, at what price, how sure; --apply moves them", "Read the pending jobs and "
        "the scheduler's estimate of each start (squeue --json or squeue's %S; qstat -f -F "
        "json's estimated.start_time) and the centre's history (sacct, the job completion "
        "log, PBS accounting); predict each wait from now as a distribution (each job at "
        "its submit, what is left given the wait so far; the scheduler's estimate a veto: "
        "a job it starts within the VM's break-even wait stays), price each VM "
        "(deployment, staging, computing), and give P(VM sooner), the whole cost and a "
        "verdict. Read-only unless --apply.",
        "burstbench advise --scheduler slurm --cloud cloud\n"
        "  burstbench advise --scheduler slurm --cloud cloud --vm HB120-16rs_v3 --apply "
        "--max-jpy 20000 --budget-jpy 200000 --watch 300"))

    pc = _command(sub, "params", cmd_params, "check parameter files",
                  "Check a measurement file (burstbench run --params) or a file of report "
                  "parameters (burstbench report --params: your job, a region), each said "
                  "which it is: every key must be known to a notebook of its kind, every "
                  "value valid; for a measurement file, which benchmarks it measures (every "
                  "registered one unless its `only:` or `skip:` says otherwise). With "
                  "--write-docs, rewrite the keys' documentation from the code (each key's text "
                  "is declared with its check: params.COMMON in papermill_params/README.md, "
                  "each benchmark's PARAMS in burstbench/benchmarks/<name>/params.md); with "
                  "--keys, print it all.",
                  "burstbench params papermill_params/*.yaml")
    pc.add_argument("files", nargs="*")
    pc.add_argument("--write-docs", action="store_true",
                    help="rewrite the keys' tables of papermill_params/README.md and of each "
                    "benchmark's params.md")
    pc.add_argument("--keys", action="store_true",
                    help="print every key of every registered benchmark, with its default")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
