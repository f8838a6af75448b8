"""``burstbench advise``: its arguments (imported by the CLI with no pandas) and its run: read
the queue, advise, print the table (or JSON), and with --apply move the jobs the advice
bursts, within the per-job and per-day budgets, every action in the ledger first; --watch
repeats until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

#: A crash point for the tests: "intent" (after the intent is written) or "moved" (after
#: the move, before its outcome is written): the run waits there to be killed.
PAUSE_ENV = "BURSTBENCH_ADVISE_PAUSE"


def add_arguments(c: argparse.ArgumentParser) -> None:
    """The advice's options."""
    c.add_argument("--scheduler", choices=("slurm", "pbs"), default="",
                   help="the scheduler to read (its commands on PATH: squeue, sinfo, sacct "
                   "or scontrol; qstat, pbsnodes, qmove)")
    c.add_argument("--snapshot", default="", metavar="FILE",
                   help="advise on a snapshot saved by --save instead of a live queue "
                   "(offline; --apply refused)")
    c.add_argument("--cloud", default="", metavar="PARTITION",
                   help="the cloud partition (Slurm) or queue (PBS) whose nodes are the "
                   "cloud's: its jobs and nodes are not the on-premise queue's; --apply "
                   "moves jobs there")
    c.add_argument("--vm", default="",
                   help="the VM the cloud partition deploys (default: per job, the VM "
                   "likeliest to be sooner; with --gain-h, the one with the most expected "
                   "hours per chance of later); --apply needs it")
    c.add_argument("--p-sooner", type=float, default=0.9,  # advice.P_SOONER (not imported:
                   # --help stays quick)
                   help="burst when P(the VM returns the job sooner) is at least this "
                   "(default 0.9, the KTH replay's pick)")
    c.add_argument("--gain-h", type=float, default=0.0, metavar="HOURS",
                   help="burst instead when the hours the VM is expected to save the job are "
                   "at least HOURS x its chance of coming back later: the replay's gain "
                   "policy, which saves more hours at the same share made later on a "
                   "replayed log, but in a queue it thins itself makes more later than "
                   "--p-sooner does (comparisons/README.md, the closed loop); its hours "
                   "follow the centre's waits (KTH's best: 64, RICC's: 1024), so take "
                   "them from `burstbench replay` on your own log (default 0: off)")
    c.add_argument("--classes", default="", metavar="YAML",
                   help="job classes: a list of {partition, account, name (shell patterns), "
                   "max_nodes, class, input_gb, output_gb, speed: memory|biccg|ratio}; "
                   "the first that matches; default: every job memory-bound")
    c.add_argument("--input-gb", type=float, default=10.0,
                   help="a job's input staged to the cloud, GB, where no class says "
                   "(default 10)")
    c.add_argument("--output-gb", type=float, default=30.0,
                   help="a job's output staged back, GB, where no class says (default 30)")
    c.add_argument("--history", default="", metavar="FILE",
                   help="finished jobs from this file (sacct --parsable2, Slurm's job "
                   "completion log, or PBS accounting) instead of asking the scheduler")
    c.add_argument("--history-days", type=float, default=30.0,
                   help="how far back the history reaches (default 30 days)")
    c.add_argument("--min-history", type=int, default=50,
                   help="fewer finished jobs than this: the scheduler's estimate alone, "
                   "labelled uncalibrated (default 50)")
    c.add_argument("--region", default="East US",
                   help="the region whose prices apply (default East US; the study prices "
                   "East US and Japan East)")
    c.add_argument("--billing", default="payg", choices=("payg", "spot"),
                   help="pay as you go, or spot prices (default payg)")
    c.add_argument("--draws", type=int, default=40,
                   help="seeded draws of the VM's inputs (default 40, at least 10)")
    c.add_argument("--runs-dir", default="", help="runs to read (default data/runs)")
    c.add_argument("--reference-dir", default="",
                   help="the study's reference data: prices, machines (default data/reference)")
    c.add_argument("--no-learn", action="store_true",
                   help="predict the wait without the learned model")
    c.add_argument("--json", action="store_true", help="print JSON instead of the table")
    c.add_argument("--save", default="", metavar="FILE",
                   help="write the snapshot and the advice here (JSON: what the notebook "
                   "210_advise.ipynb and --snapshot read)")
    c.add_argument("--apply", action="store_true",
                   help="move the jobs the advice bursts to --cloud (scontrol update / qmove): "
                   "pending jobs only, each once, never one its owner pinned (Slurm "
                   "--comment=burst:no; PBS -v BURSTBENCH_BURST=no), within --max-jpy and "
                   "--budget-jpy, every action in --ledger before it is taken")
    c.add_argument("--max-jpy", type=float, default=math.inf,
                   help="a job costing more than this at its requested time stays (JPY; "
                   "default: no limit)")
    c.add_argument("--budget-jpy", type=float, default=math.inf,
                   help="JPY a day (local) that --apply may commit, kept in the ledger "
                   "(default: no limit)")
    c.add_argument("--ledger", default="advise-ledger.jsonl",
                   help="the ledger of --apply (default ./advise-ledger.jsonl)")
    c.add_argument("--watch", type=float, default=0, metavar="SECONDS",
                   help="repeat every SECONDS until SIGTERM or Ctrl-C (each round reads the "
                   "queue anew; default 0: once)")


def read_history(path: str, days: float = math.inf, now: float | None = None
                 ) -> tuple[list, str, list[str]]:
    """Finished jobs from a file (sacct --parsable2, a job completion log, PBS accounting)
    that ended in the `days` days before `now` (default: the clock's); where they came
    from; and what was not read, each said.  ParamError, one line: not such a file, or no
    job in it ended in those days."""
    from burstbench.advise import pbs, slurm
    from burstbench.core.checks import ParamError
    from burstbench.replay.logs import guess_format, read_text

    text = read_text(path)
    notes: list[str] = []
    fmt = guess_format(text)
    if fmt == "sacct":
        jobs, said = slurm.parse_sacct(text, notes), "sacct"
    elif any("JobId=" in s for s in text.splitlines()[:20]):
        jobs, said = slurm.parse_jobcomp(text), "Slurm's job completion log"
    elif fmt == "pbs":
        jobs, said = pbs.parse_accounting(text, notes), "PBS accounting"
    else:
        raise ParamError(f"--history {path}: not sacct --parsable2, a Slurm job completion "
                         "log or PBS accounting")
    now = time.time() if now is None else now
    recent = [j for j in jobs if j.end >= now - days * 86400]
    if jobs and not recent:
        last = time.strftime("%Y-%m-%d", time.localtime(max(j.end for j in jobs)))
        raise ParamError(f"--history {path}: no job ended in the last {days:g} days (its "
                         f"last ended {last}): give --history-days")
    if len(recent) < len(jobs):
        notes.append(f"--history {path}: {len(jobs) - len(recent)} job(s) ended more than "
                     f"{days:g} days ago (--history-days): left out")
    return recent, f"{path} ({said})", [f"--history: {n}" for n in notes]


def _snapshot(args):
    from burstbench.advise import queue

    snap, _ = queue.read(args.snapshot, args.scheduler, args.history_days)
    if args.history and not args.snapshot:
        snap.history, snap.history_source, unread = read_history(
            args.history, args.history_days, snap.now)
        snap.skipped += unread
    return snap


def fmt_hours(h: float) -> str:
    """12 s, 40 min, 3.2 h, 2.1 d; '-' for NaN."""
    if h != h:
        return "-"
    if h < 1 / 60:
        return f"{h * 3600:.0f} s"
    if h < 1:
        return f"{h * 60:.0f} min"
    return f"{h:.1f} h" if h < 48 else f"{h / 24:.1f} d"


def fmt_saving(h: float) -> str:
    """An expected saving: fmt_hours with its sign ('-40 min'); '-' for NaN."""
    return "-" if h != h else ("-" if h < 0 else "") + fmt_hours(abs(h))


def table_text(advice) -> str:
    """The advice as a table, what it rests on above it."""
    b = advice.basis
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(b["read_at"]))
    lines = [f"{b['scheduler']}, read at {at}",
             f"  estimate: {b['estimate']}",
             f"  history:  {b['history']}; {b['history_span']}",
             f"  wait:     {b['wait']}",
             f"  on premise: {b['on_premise_nodes']} node(s); cloud: {b['cloud']}; "
             f"{b['region']}, {b['billing']}; burst at "
             + (f"expected saving >= {b['gain_h']:g} h x P(later)" if b.get("gain_h")
                else f"P(sooner) >= {b['p_sooner']:g}")]
    for c in b["classes"]:
        lines.append(f"  class {c['class']}: {c['input_gb']:g} GB in, {c['output_gb']:g} GB "
                     f"out, speed {c['speed']}")
    t = advice.table
    if t.empty:
        return "\n".join(lines + ["no pending job"])
    head = ("job", "user", "nodes", "limit", "waited", "estimate", "wait q10-q50-q90", "vm",
            "P(sooner)", "saves", "JPY", "verdict")
    rows = [head]
    for r in t.to_dict("records"):
        est = fmt_hours(r["estimate_h"]) + ("" if r["estimate_from"] == "scheduler" else "*")
        rows.append((r["job"], r["user"], str(r["nodes"]), fmt_hours(r["limit_h"]),
                     fmt_hours(r["waited_h"]), est,
                     f"{fmt_hours(r['wait_q10_h'])}-{fmt_hours(r['wait_q50_h'])}-"
                     f"{fmt_hours(r['wait_q90_h'])}", r["vm"] or "-",
                     "-" if r["p_sooner"] != r["p_sooner"] else f"{r['p_sooner']:.2f}",
                     fmt_saving(r.get("saving_h", math.nan)),
                     "-" if r["jpy"] != r["jpy"] else f"{r['jpy']:,.0f}",
                     f"{r['verdict']} ({r['why']})"))
    w = [max(len(str(x[i])) for x in rows) for i in range(len(head))]
    lines += ["", *("  ".join(str(x[i]).ljust(w[i]) for i in range(len(head))).rstrip()
                    for x in rows)]
    if (t["estimate_from"] != "scheduler").any():
        lines.append("* simulated: the scheduler gave no estimate for this job (calibrated: "
                     "the simulation at its submit, less the wait since)")
    lines.append("JPY: the whole cost on the VM at the guessed run time (deployment, staging, "
                 "node-hours, storage, egress); P(sooner) over the VM's inputs and the run "
                 "time's guesses; saves: the hours the VM is expected to save the job (its "
                 "mean wait less the VM's time beyond the run)")
    return "\n".join(lines)


class _Stop:
    """Under --watch or --apply, SIGTERM (and Ctrl-C in --watch) ask the loop to stop after
    the current action; otherwise SIGTERM ends the run as it ends any program."""

    def __init__(self, hold: bool) -> None:
        self.event = threading.Event()
        if hold:
            signal.signal(signal.SIGTERM, lambda *_: self.event.set())


def bad_option(args: argparse.Namespace) -> str:
    """What is wrong with the options' values ("" where nothing): checked before the
    queue is read."""
    from burstbench.advise import advice as adv

    def number(name: str, v: float, least: float, more: bool = False, inf: bool = False
               ) -> str:
        ok = v == v and (v > least if more else v >= least) and (inf or v != math.inf)
        return "" if ok else (f"--{name} must be {'above' if more else 'at least'} "
                              f"{least:g}{'' if inf else ' and finite'}, not {v:g}")
    return next((m for m in (
        number("history-days", args.history_days, 0, more=True),
        number("max-jpy", args.max_jpy, 0, inf=True),
        number("budget-jpy", args.budget_jpy, 0, inf=True),
        number("min-history", args.min_history, 0),
        number("watch", args.watch, 0),
        adv.p_sooner_problem(args.p_sooner), adv.gain_problem(args.gain_h)) if m), "")


def _pause(point: str) -> None:
    if os.environ.get(PAUSE_ENV) == point:
        print(f"paused at {point} ({PAUSE_ENV})", flush=True)
        time.sleep(3600)


def apply(args, snap, advice, ledger, stop, run=None) -> list[str]:
    """Move the jobs the advice bursts (see add_arguments' --apply) with the command runner
    `run` (default: burstbench.advise.queue.run_command); the lines said."""
    from burstbench.advise import queue

    run = run or queue.run_command
    backend = queue.backend(snap.scheduler)
    said = []
    where = {j.id: (j.state, j.partition) for j in snap.jobs}
    said += ledger.settle(snap.scheduler, where, args.cloud)
    day = time.strftime("%Y-%m-%d")
    spent = ledger.spent(day)
    listed = {j.id: j for j in snap.pending()}
    # the rule's own order: the likeliest sooner first, or with --gain-h the most expected
    # hours per chance of later (a budget then stops at the jobs the rule values least)
    key = "gain_rank" if advice.basis.get("gain_h") else "p_sooner"
    for r in advice.table.sort_values(key, ascending=False).to_dict("records"):
        if r["verdict"] != "burst" or stop.event.is_set():
            continue
        job = listed.get(r["job"])
        if job is None or job.state != "pending" or job.pinned:
            continue
        if ledger.settled(job.id, snap.scheduler) or job.partition == args.cloud:
            last = ledger.last(job.id, snap.scheduler) or {}
            said.append(f"job {job.id}: already in the ledger ({last.get('event')}): not "
                        "moved again")
            continue
        cost = r["jpy_at_limit"]
        if spent + cost > args.budget_jpy:
            said.append(f"budget exhausted: {spent:,.0f} of {args.budget_jpy:,.0f} JPY "
                        f"committed today; job {job.id} ({cost:,.0f} JPY) and the rest stay")
            break
        ledger.append({"event": "intent", "job": job.id, "scheduler": snap.scheduler,
                       "from": job.partition, "to": args.cloud, "vm": r["vm"],
                       "jpy": round(float(cost), 1), "p_sooner": round(float(r["p_sooner"]), 4),
                       "saving_h": round(float(r["saving_h"]), 3)})
        _pause("intent")
        ok, msg = backend.move(run, job.id, args.cloud)
        _pause("moved")
        if ok is None:  # no answer: the intent stays open, counted, settled next run
            spent += cost
            said.append(f"job {job.id}: no answer from the scheduler ({msg}): the next run "
                        "settles the move against its queue")
            continue
        ledger.append({"event": "done" if ok else "refused", "job": job.id,
                       "scheduler": snap.scheduler, "to": args.cloud, "message": msg})
        if ok:
            spent += cost
            said.append(f"job {job.id}: moved to {args.cloud} ({r['vm']}, P(sooner) "
                        f"{r['p_sooner']:.2f}, expected to save {fmt_saving(r['saving_h'])}, "
                        f"up to {cost:,.0f} JPY)")
        else:
            said.append(f"job {job.id}: the scheduler refused the move: {msg}")
    return said


def advise_command(args: argparse.Namespace) -> int:
    """Run the advice (see the module docstring); one line on stderr and status 2 for a
    scheduler not reachable, a malformed listing or a parameter given wrong."""
    from burstbench.core.checks import ParamError

    if not args.scheduler and not args.snapshot:
        print("error: give --scheduler slurm|pbs (a live queue) or --snapshot FILE",
              file=sys.stderr)
        return 2
    if args.apply and (args.snapshot or not args.cloud or not args.vm):
        print("error: --apply needs a live queue (--scheduler), --cloud (where jobs go) and "
              "--vm (the VM that partition deploys)", file=sys.stderr)
        return 2
    if problem := bad_option(args):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    stop = _Stop(bool(args.watch or args.apply))
    ledger = None
    try:
        from burstbench.advise import advice as adv

        given = None
        if args.classes:
            from burstbench.params import read_yaml

            try:
                given = read_yaml(args.classes, "file")
            except ParamError as exc:
                raise ParamError(f"--classes: {exc}") from None
        rule_list, pr = adv.setup(given, args.input_gb, args.output_gb,
                                  runs_dir=args.runs_dir, reference_dir=args.reference_dir,
                                  region=args.region, billing=args.billing, draws=args.draws)
        if problem := adv.vm_problem(pr, args.vm):
            raise ParamError(problem)
        if args.apply:
            from burstbench.advise.ledger import Ledger
            ledger = Ledger(args.ledger)
            for n in ledger.notes:
                print(f"note: {n}", flush=True)
        from burstbench.advise.queue import SchedulerError

        while True:
            try:
                snap = _snapshot(args)
            except SchedulerError as exc:
                if not args.watch:
                    raise
                # a scheduler that does not answer this round may the next: said, retried
                print(f"error: {exc} (again in {args.watch:g} s)", file=sys.stderr,
                      flush=True)
                if stop.event.wait(args.watch):
                    break
                continue
            if args.cloud and args.cloud not in snap.partitions:
                raise ParamError(f"--cloud {args.cloud!r}: no such "
                                 f"{'partition' if snap.scheduler == 'slurm' else 'queue'} "
                                 f"({', '.join(sorted(snap.partitions)) or 'none listed'}); "
                                 "nothing moved")
            a = adv.advise(snap, pr, rule_list, cloud=args.cloud, vm=args.vm,
                           p_sooner=args.p_sooner, gain_h=args.gain_h,
                           max_jpy=args.max_jpy,
                           min_history=args.min_history, learn=not args.no_learn)
            out = {"snapshot": snap.to_dict(), "advice": a.to_dict()}
            if args.save:
                from burstbench.core import store
                store.atomic_write(Path(args.save), json.dumps(out, indent=1) + "\n")
            actions = apply(args, snap, a, ledger, stop) if args.apply else []
            if args.json:
                print(json.dumps(a.to_dict() | {"actions": actions}, indent=1), flush=True)
            else:
                print(table_text(a))
                for n in a.notes + pr.problems:
                    print(f"note: {n}")
                for line in actions:
                    print(line)
                sys.stdout.flush()
            if not args.watch or stop.event.wait(args.watch):
                break
    except ParamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stopped (Ctrl-C)", file=sys.stderr)
        return 130
    finally:
        if ledger is not None:
            ledger.close()
    if stop.event.is_set():
        print("stopped (SIGTERM)", file=sys.stderr)
    return 0
