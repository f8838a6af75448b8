"""burstbench advise: the readers of Slurm's and PBS's listings (recorded outputs, as fast
unit tests), the ledger, the advice and --apply with a scripted scheduler; then the real
thing on this suite's own Slurm and PBS clusters (tests/test_advise_clusters.py)."""

from __future__ import annotations

import json
import math
import time
from argparse import Namespace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from burstbench.advise import advice as adv
from burstbench.advise import command, ledger, pbs, queue, slurm
from burstbench.core.checks import ParamError

NOW = 1_795_843_000.0


def runner(answers: dict):
    """A scheduler that answers each argument list (its first words as the key) with
    (status, stdout, stderr), and records the calls."""
    calls: list[list[str]] = []

    def run(argv):
        calls.append(list(argv))
        for key, ans in answers.items():
            if tuple(argv[:len(key)]) == key:
                return ans(argv) if callable(ans) else ans
        return 127, "", f"{argv[0]}: command not found"
    run.calls = calls  # type: ignore[attr-defined]
    return run


def squeue_22(jobs: list[dict]) -> str:
    """squeue --json as Slurm 22.05 writes it (plain numbers)."""
    return json.dumps({"meta": {"Slurm": {"release": "22.05.8"}}, "errors": [], "jobs": jobs})


def sq_job(jid, state, start, limit_min=30, nodes=1, comment="", part="onprem", **kw) -> dict:
    return {"job_id": jid, "job_state": state, "user_name": "alice", "partition": part,
            "node_count": nodes, "cpus": 2 * nodes, "time_limit": limit_min,
            "submit_time": NOW - 600, "start_time": start, "comment": comment,
            "account": "phys", "name": "solve"} | kw


def test_squeue_json_of_22_05_and_23_02_read_alike():
    """The same queue in 22.05's plain numbers and 23.02's {set, infinite, number} objects
    and state lists: one pending job with the backfill scheduler's expected start, one
    running, one pinned by its comment, one completed (left out)."""
    plain = [sq_job(11, "RUNNING", NOW - 300, 120, 2), sq_job(12, "PENDING", NOW + 7200),
             sq_job(13, "PENDING", NOW + 9000, comment="please burst:no"),
             sq_job(10, "COMPLETED", NOW - 900)]

    def newer(j):
        num = {"set": True, "infinite": False}
        return j | {"job_state": [j["job_state"]], "time_limit": num | {"number": j["time_limit"]},
                    "start_time": num | {"number": j["start_time"]},
                    "submit_time": num | {"number": j["submit_time"]},
                    "node_count": num | {"number": j["node_count"]},
                    "cpus": num | {"number": j["cpus"]}}
    for text in (squeue_22(plain), squeue_22([newer(j) for j in plain])):
        jobs, skipped, source = slurm.jobs(runner({("squeue", "--json"): (0, text, "")}),
                                           "slurm 22.05.8", NOW)
        assert skipped == [] and "squeue --json" in source
        assert [(j.id, j.state, j.pinned) for j in jobs] == [
            ("11", "running", False), ("12", "pending", False), ("13", "pending", True)]
        run, pend = jobs[0], jobs[1]
        assert (run.start, run.limit_s, run.nodes, math.isnan(run.estimate)) == \
            (NOW - 300, 7200.0, 2, True)
        assert (pend.estimate, pend.limit_s, pend.submit, pend.partition, pend.account) == \
            (NOW + 7200, 1800.0, NOW - 600, "onprem", "phys")


def test_a_pending_job_without_an_estimate_and_an_unlimited_one_read_as_nan():
    text = squeue_22([sq_job(12, "PENDING", 0),
                      sq_job(14, "PENDING", NOW + 60, limit_min={"set": True,
                                                                  "infinite": True,
                                                                  "number": 0})])
    jobs, _, _ = slurm.jobs(runner({("squeue", "--json"): (0, text, "")}), "v", NOW)
    assert math.isnan(jobs[0].estimate) and math.isnan(jobs[1].limit_s)
    # an estimate already past (the scheduler's cycle lags) is now
    jobs, _, _ = slurm.jobs(runner({("squeue", "--json"): (0, squeue_22(
        [sq_job(12, "PENDING", NOW - 5)]), "")}), "v", NOW)
    assert jobs[0].estimate == NOW


def test_a_jobs_queue_time_counts_from_when_it_became_eligible():
    """A job whose dependency cleared a minute ago, submitted 10 h ago: in the queue a minute
    (time held or on a dependency is no queue time a VM could save, as in the history's
    waits); a running one from its eligible time to its start; an eligible time of 0 (not
    set) or after the start is not read, nor is one in the future for a pending job."""
    jobs, _, _ = slurm.jobs(runner({("squeue", "--json"): (0, squeue_22([
        sq_job(12, "PENDING", 0, submit_time=NOW - 36000, eligible_time=NOW - 60),
        sq_job(13, "PENDING", 0, submit_time=NOW - 36000, eligible_time=0),
        sq_job(14, "PENDING", 0, submit_time=NOW - 36000, eligible_time=NOW + 600),
        sq_job(11, "RUNNING", NOW - 300, submit_time=NOW - 900, eligible_time=NOW - 600),
        sq_job(15, "RUNNING", NOW - 300, submit_time=NOW - 900, eligible_time=NOW - 100)]),
        "")}), "v", NOW)
    assert [NOW - j.submit for j in jobs] == [60.0, 36000.0, 36000.0, 600.0, 900.0]
    now = time.mktime(time.strptime("Sat Nov 28 15:17:50 2026", "%a %b %d %H:%M:%S %Y"))
    found = {"1.vm": qstat_job("Q", etime="Sat Nov 28 15:16:50 2026"),
             "2.vm": qstat_job("Q"),
             "3.vm": qstat_job("R", etime="Sat Nov 28 05:27:50 2026",
                               stime="Sat Nov 28 05:37:50 2026")}
    jobs, _ = pbs._jobs(found, now, ("pending", "running"))
    assert [now - j.submit for j in jobs] == [60.0, 36000.0, 35400.0]


def test_jobs_no_move_would_start_sooner_are_marked_and_sentinels_and_nulls_read():
    """Held, waiting on a dependency, a pending array's tasks, a heterogeneous job's part:
    marked, so the advice leaves them; Slurm's INFINITE as earlier versions print it is no
    limit; null fields are empty, not 'None'; squeue's own errors are the error."""
    text = squeue_22([sq_job(31, "PENDING", 0, state_reason="JobHeldUser"),
                      sq_job(32, "PENDING", 0, state_reason="Dependency"),
                      sq_job(33, "PENDING", 0, array_task_string="1-500"),
                      sq_job(34, "PENDING", 0, het_job_id={"set": True, "number": 34}),
                      sq_job(35, "PENDING", 0, limit_min=4294967295, partition=None,
                             user_name=None, het_job_id=0, state_reason="Priority")])
    jobs, _, _ = slurm.jobs(runner({("squeue", "--json"): (0, text, "")}), "v", NOW)
    assert [j.unmovable for j in jobs] == [
        "held (JobHeldUser): no VM starts it sooner", "held (Dependency): no VM starts it "
        "sooner", "an array's tasks (1-500): one move takes them all, priced as one",
        "a part of a heterogeneous job: its parts start together", ""]
    assert (math.isnan(jobs[4].limit_s), jobs[4].partition, jobs[4].user) == (True, "", "")
    errors = json.dumps({"errors": [{"error": "Unable to contact slurm controller"}],
                         "jobs": []})
    with pytest.raises(queue.SchedulerError, match="^squeue --json of v: Unable to contact "
                       "slurm controller$"):
        slurm.jobs(runner({("squeue", "--json"): (0, errors, "")}), "v", NOW)


def test_qstat_json_as_openpbs_writes_it_wrong_and_its_arrays():
    r"""OpenPBS writes '\,' and raw newlines in variables' values (not JSON): read as
    meant; a queued array and one-cpu chunks that may share hosts are marked."""
    j = qstat_job("Q", var={"LIST": "a\\,b", "BASH_FUNC_f%%": "() {\n echo\n}"})
    text = json.dumps({"Jobs": {"1.vm": j, "2[].vm": qstat_job("Q"),
                                "3.vm": qstat_job("Q", Resource_List={
                                    "ncpus": 64, "nodect": 64, "walltime": "01:00:00",
                                    "place": "free"})}})
    text = text.replace("a\\\\,b", "a\\,b").replace("\\n", "\n")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    jobs, _ = pbs._jobs(pbs.loads(text)["Jobs"], NOW, ("pending",))
    assert [(j.id, j.unmovable) for j in jobs] == [
        ("1.vm", ""), ("2[].vm", "an array's subjobs: one move takes them all, priced as "
                                 "one"),
        ("3.vm", "64 chunks of one cpu that may share hosts (place free): its nodes are not "
                 "known before it runs")]


def test_a_job_whose_fields_do_not_parse_is_skipped_and_said():
    text = squeue_22([sq_job(12, "PENDING", NOW + 60, nodes="two"),
                      {"job_id": 15, "job_state": "PENDING"},
                      sq_job(16, "PENDING", NOW + 60)])
    jobs, skipped, _ = slurm.jobs(runner({("squeue", "--json"): (0, text, "")}), "v", NOW)
    assert [j.id for j in jobs] == ["16"]
    assert skipped == ["job 12: skipped, a field does not parse (not a number: 'two')",
                       "job 15: skipped, a field does not parse ('time_limit')"]


@pytest.mark.parametrize("out, said", [
    ('{"meta": {}, "errors": []}', "squeue --json of slurm 99.1 has no list of jobs: a "
     "version this advice does not parse"),
    ('{"jobs": [', "squeue --json of slurm 99.1 is not JSON (Expecting value: line 1 column "
     "11 (char 10)): a version this advice does not parse")])
def test_a_listing_of_a_version_not_parsed_is_one_line_with_the_version(out, said):
    with pytest.raises(queue.SchedulerError) as exc:
        slurm.jobs(runner({("squeue", "--json"): (0, out, "")}), "slurm 99.1", NOW)
    assert str(exc.value) == said


def test_without_squeue_json_the_formatted_listing_is_read():
    """An older Slurm (no data parser): squeue -o with %S, the expected start."""
    start = datetime.fromtimestamp(NOW + 3600).strftime("%Y-%m-%dT%H:%M:%S")
    sub = datetime.fromtimestamp(NOW - 60).strftime("%Y-%m-%dT%H:%M:%S")
    lines = "".join(slurm.SEP.join(f) + "\n" for f in (
        # a name and a comment holding '|' (the fields are apart by the unit separator)
        ("21", "PENDING", "bob", "onprem", "proj", "x|4", "4", "8", "1-00:00:00", sub, start,
         "Resources", "burst:no, a|b"),
        ("22", "PENDING", "bob", "onprem", "proj", "big", "4", "8", "2:00:00", sub, "N/A",
         "Priority", ""),
        ("23", "RUNNING", "bob", "onprem", "proj", "big", "x", "8", "2:00:00", sub, sub,
         "None", ""),
        ("24", "PENDING", "bob", "onprem", "proj", "big", "1", "8", "2:00:00", sub, "N/A",
         "Dependency", ""),
        ("25_[1-9]", "PENDING", "bob", "onprem", "proj", "big", "1", "8", "2:00:00", sub,
         "N/A", "Priority", "")))
    run = runner({("squeue", "--json"): (1, "", "squeue: unrecognized option '--json'"),
                  ("squeue", "-h"): (0, lines, "")})
    jobs, skipped, source = slurm.jobs(run, "slurm 20.11", NOW)
    assert source == ("squeue -o %S (the backfill scheduler's expected start, as squeue "
                      "--start; squeue --json: squeue: unrecognized option '--json')")
    assert [(j.id, j.name, j.limit_s, j.estimate, j.pinned, j.nodes, j.unmovable)
            for j in jobs[:1]] == [("21", "x|4", 86400.0, NOW + 3600, True, 4, "")]
    assert jobs[1].id == "22" and math.isnan(jobs[1].estimate) and jobs[1].limit_s == 7200
    assert [(j.id, j.unmovable) for j in jobs[2:]] == [
        ("24", "held (Dependency): no VM starts it sooner"),
        ("25_[1-9]", "an array's tasks: one move takes them all, priced as one")]
    assert skipped == ["squeue line '23|RUNNING|bob|onprem|proj|big|x|8|2:00:': skipped, it "
                       "does not parse (invalid literal for int() with base 10: 'x')"]


def test_no_slurm_and_no_pbs_are_one_line_naming_what_was_tried(cli, tmp_path):
    for sched, said in (("slurm", "error: no Slurm reachable: tried squeue --version: squeue: "
                         "command not found"),
                        ("pbs", "error: no PBS reachable: tried qstat --version: qstat: "
                         "command not found")):
        p = cli("-m", "burstbench", "advise", "--scheduler", sched,
                env={"PATH": str(tmp_path)})
        assert (p.returncode, p.stderr.strip().splitlines()) == (2, [said]), p.stderr


def test_watch_says_a_round_the_scheduler_missed_retries_and_stops_on_sigterm(tmp_path):
    """--watch on a login node where squeue does not answer (here: not on PATH): each round
    one line, the loop goes on; SIGTERM ends it cleanly, status 0."""
    import os
    import signal
    import subprocess
    import sys

    err = tmp_path / "err"
    with open(err, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "burstbench", "advise", "--scheduler",
                                 "slurm", "--watch", "0.2"], stderr=f, stdout=subprocess.PIPE,
                                env=os.environ | {"PATH": str(tmp_path)},
                                cwd=Path(__file__).resolve().parents[1])
    try:
        deadline = time.monotonic() + 120
        while err.read_text().count("no Slurm reachable") < 2:
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        proc.kill()
    lines = err.read_text().splitlines()
    assert lines[0] == ("error: no Slurm reachable: tried squeue --version: squeue: command "
                        "not found (again in 0.2 s)")
    assert lines[-1] == "stopped (SIGTERM)"


def test_the_history_from_sacct_the_job_completion_log_and_pbs_accounting():
    t = [datetime.fromtimestamp(NOW + s).strftime("%Y-%m-%dT%H:%M:%S") for s in (0, 60, 660)]
    sacct = ("JobID|Submit|Start|End|NNodes|NCPUS|State|Timelimit|User|Partition|Account|"
             "JobName\n"
             f"5|{t[0]}|{t[1]}|{t[2]}|2|4|COMPLETED|30|carol|onprem|phys|a\n"
             f"5.batch|{t[0]}|{t[1]}|{t[2]}|2|4|COMPLETED||||\n"
             f"6|{t[0]}|Unknown|Unknown|1|2|CANCELLED|30|carol|onprem|phys|b\n")
    comp = (f"JobId=5 UserId=carol(1001) GroupId=c(1) Name=a JobState=COMPLETED "
            f"Partition=onprem TimeLimit=30 StartTime={t[1]} EndTime={t[2]} NodeList=n1 "
            f"NodeCnt=2 ProcCnt=4 SubmitTime={t[0]} Account=phys\n")
    acct = (f"11/28/2026 05:17:50;E;5.vm;user=carol queue=workq qtime={NOW:.0f} "
            f"start={NOW + 60:.0f} end={NOW + 660:.0f} Resource_List.nodect=2 "
            "Resource_List.ncpus=4 Resource_List.walltime=00:30:00 account=phys\n"
            "11/28/2026 05:17:50;Q;6.vm;user=carol queue=workq\n")
    for jobs in (slurm.parse_sacct(sacct), slurm.parse_jobcomp(comp),
                 pbs.parse_accounting(acct)):
        assert len(jobs) == 1
        j = jobs[0]
        assert (j.user, j.nodes, j.cpus, j.limit_s, j.start - j.submit, j.end - j.start) == \
            ("carol", 2, 4, 1800.0, 60.0, 600.0)


def test_a_history_file_is_read_by_its_format_and_anything_else_refused(tmp_path):
    t = [datetime.fromtimestamp(NOW + s).strftime("%Y-%m-%dT%H:%M:%S") for s in (0, 60, 660)]
    files = {"sacct": ("JobID|Submit|Start|End|NNodes|NCPUS|State|Timelimit|User\n"
                       f"5|{t[0]}|{t[1]}|{t[2]}|2|4|COMPLETED|30|carol\n", "(sacct)"),
             "comp": (f"JobId=5 UserId=carol(1) JobState=COMPLETED TimeLimit=30 "
                      f"StartTime={t[1]} EndTime={t[2]} NodeCnt=2 ProcCnt=4 "
                      f"SubmitTime={t[0]}\n", "(Slurm's job completion log)"),
             "acct": (f"11/28/2026 05:17:50;E;5.vm;user=carol qtime={NOW:.0f} "
                      f"start={NOW + 60:.0f} end={NOW + 660:.0f} Resource_List.nodect=2\n",
                      "(PBS accounting)")}
    for name, (text, said) in files.items():
        f = tmp_path / name
        f.write_text(text)
        jobs, source, unread = command.read_history(str(f))
        assert source == f"{f} {said}" and [(j.id, j.nodes) for j in jobs] == [
            ("5" if name != "acct" else "5.vm", 2)] and unread == []
    (tmp_path / "swf").write_text("1 0 10 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n")
    with pytest.raises(ParamError) as exc:
        command.read_history(str(tmp_path / "swf"))
    assert str(exc.value) == (f"--history {tmp_path / 'swf'}: not sacct --parsable2, a Slurm "
                              "job completion log or PBS accounting")


def test_a_history_file_as_a_centre_writes_it(tmp_path):
    """Times with a UTC offset, Eligible, a job name holding sacct's separator (its line
    said, not a crash), a job that ended before --history-days; PBS chunks packed on hosts;
    a file with no recent job refused in one line."""
    iso = [datetime.fromtimestamp(NOW + s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+0000")
           for s in (-600, 0, 60, 660, -90 * 86400)]
    f = tmp_path / "sacct"
    f.write_text("JobID|Submit|Start|End|NNodes|NCPUS|State|Timelimit|User|Eligible|JobName\n"
                 f"5|{iso[0]}|{iso[2]}|{iso[3]}|2|4|COMPLETED|1-12|carol|{iso[1]}|a\n"
                 f"6|{iso[0]}|{iso[2]}|{iso[3]}|2|4|COMPLETED|30|carol|{iso[1]}|a|b\n"
                 f"7|{iso[4]}|{iso[4]}|{iso[4][:-5]}Z|1|1|COMPLETED|30|carol|{iso[4]}|c\n")
    jobs, _, unread = command.read_history(str(f), 30, NOW + 3600)
    assert [(j.id, j.start - j.submit, j.end - j.start, j.limit_s) for j in jobs] == \
        [("5", 60.0, 600.0, 129600.0)]
    assert unread == ["--history: 1 line(s) without the header's 11 fields (line 3): not "
                      "read", f"--history: --history {f}: 1 job(s) ended more than 30 days "
                      "ago (--history-days): left out"]
    with pytest.raises(ParamError) as exc:
        command.read_history(str(f), 30, NOW + 200 * 86400)
    assert str(exc.value).startswith(f"--history {f}: no job ended in the last 30 days (its "
                                     "last ended ")
    acct = tmp_path / "acct"
    acct.write_text(f"11/28/2026 05:17:50;E;8.vm;user=carol qtime={NOW:.0f} "
                    f"start={NOW + 60:.0f} end={NOW + 660:.0f} Resource_List.nodect=64 "
                    "Resource_List.ncpus=64 exec_host=n1/0*32+n2/0*32 "
                    "Resource_List.walltime=3600\n")
    [j], _, unread = command.read_history(str(acct))
    assert (j.nodes, j.cpus, j.limit_s, unread) == (2, 64, 3600.0, [])


def qstat_job(state, est="", var=None, queue_="workq", **kw) -> dict:
    j = {"Job_Name": "solve", "Job_Owner": "dave@vm", "job_state": state, "queue": queue_,
         "qtime": "Sat Nov 28 05:17:50 2026",
         "Resource_List": {"ncpus": 4, "nodect": 2, "walltime": "01:30:00"},
         "Variable_List": var or {"PBS_O_HOME": "/home/dave"}} | kw
    if est:
        j["estimated"] = {"start_time": est, "exec_vnode": "(n1:ncpus=2)"}
    return j


def test_qstat_json_read_with_the_estimated_start_and_the_owners_opt_out():
    found = {"1.vm": qstat_job("R", stime="Sat Nov 28 05:17:55 2026"),
             "2.vm": qstat_job("Q", est="Sat Nov 28 07:17:50 2026"),
             "3.vm": qstat_job("Q", var={"BURSTBENCH_BURST": "no"}),
             "4.vm": qstat_job("H"), "5.vm": qstat_job("Q", Resource_List={"nodect": 1})}
    now = time.mktime(time.strptime("Sat Nov 28 05:20:00 2026", "%a %b %d %H:%M:%S %Y"))
    jobs, skipped = pbs._jobs(found, now, ("pending", "running"))
    assert [(j.id, j.state, j.pinned) for j in jobs] == [
        ("1.vm", "running", False), ("2.vm", "pending", False), ("3.vm", "pending", True)]
    assert jobs[0].start - jobs[0].submit == 5.0
    assert (jobs[1].estimate - now, jobs[1].limit_s, jobs[1].nodes, jobs[1].user) == \
        (7070.0, 5400.0, 2, "dave")
    assert math.isnan(jobs[2].estimate)
    assert skipped == ["job 5.vm: skipped, a field does not parse (KeyError('ncpus'))"]


def test_pbs_queues_and_their_nodes():
    run = runner({("qstat", "-Q"): (0, json.dumps({"Queue": {"workq": {}, "cloud": {}}}), ""),
                  ("pbsnodes",): (0, json.dumps({"nodes": {"n1": {}, "n2": {"queue": "cloud"},
                                                           "n3": {}}}), "")})
    assert pbs.queues(run, "PBS 23") == {"workq": ["n1", "n3"], "cloud": ["n2"]}


# -- the ledger ------------------------------------------------------------------------------

def test_the_ledger_settles_what_a_killed_run_left_and_drops_a_torn_line(tmp_path):
    path = tmp_path / "ledger.jsonl"
    led = ledger.Ledger(path)
    for job in ("1", "2", "3"):
        led.append({"event": "intent", "job": job, "scheduler": "slurm", "to": "cloud",
                    "jpy": 100.0})
    led.append({"event": "done", "job": "1", "scheduler": "slurm", "to": "cloud"})
    led.close()
    with open(path, "a") as f:
        f.write('{"event": "intent", "job": "9", "sch')  # killed mid-write
    led = ledger.Ledger(path)
    assert led.notes == [f"ledger {path}: its last line was torn (a run killed while "
                         "writing it, before its move): dropped"]
    assert path.read_text().endswith("}\n")
    assert [r["job"] for r in led.open_intents("slurm")] == ["2", "3"]
    day = time.strftime("%Y-%m-%d")
    assert led.spent(day) == 300.0  # one done, two unsettled
    said = led.settle("slurm", {"2": ("pending", "cloud"), "3": ("pending", "onprem")},
                      "cloud")
    assert said == ["job 2: found in cloud after an interrupted run: the move ran",
                    "job 3: found pending in onprem after an interrupted run: the move "
                    "never ran"]
    assert (led.settled("2", "slurm"), led.settled("3", "slurm")) == (True, False)
    assert led.spent(day) == 200.0 and led.open_intents("slurm") == []
    # a second advise --apply on the same ledger is refused while this one holds it
    with pytest.raises(ParamError, match="another advise --apply holds it"):
        ledger.Ledger(path)
    led.close()
    # every line survives a re-read, the torn one gone
    assert [json.loads(s)["event"] for s in path.read_text().splitlines()] == \
        ["intent", "intent", "intent", "done", "done", "not done"]


# -- the advice --------------------------------------------------------------------------

def snapshot(pending: list[queue.Job], history: int = 0, now: float = NOW) -> queue.Snapshot:
    """A queue of 4 on-premise nodes and 1 cloud node, `history` finished jobs (each waited
    10 min then ran 20 of its 30), one running, and `pending`."""
    hist = [queue.Job(str(100 + i), "finished", "u", "onprem", 1, 2, 1800.0,
                      now - 86400 + i * 600, now - 86400 + i * 600 + 600,
                      now - 86400 + i * 600 + 1800) for i in range(history)]
    running = [queue.Job("50", "running", "u", "onprem", 4, 8, 7200.0, now - 700,
                         now - 600)]
    return queue.Snapshot("slurm", "slurm 22.05.8", now, running + pending, hist,
                          {"onprem": ["n1", "n2", "n3", "n4"], "cloud": ["c1"]},
                          "squeue --json", "test history")


def pend(jid: str, estimate_s: float, nodes: int = 1, pinned: bool = False,
         limit_s: float = 1800.0) -> queue.Job:
    return queue.Job(jid, "pending", "u", "onprem", nodes, 2 * nodes, limit_s, NOW - 60,
                     estimate=NOW + estimate_s if estimate_s == estimate_s else math.nan,
                     pinned=pinned)


@pytest.fixture(scope="module")
def prices():
    """The decision's prices, and one class of jobs with no data to stage that run as fast
    on a VM as on premise: the VM is sooner exactly when the wait passes its deployment
    (4-10 min)."""
    from burstbench.replay.pricing import pricing
    rules = adv.rules([{"class": "as fast", "speed": 1.0, "input_gb": 0, "output_gb": 0}],
                      10.0, 30.0)
    return pricing([r.cls for r in rules], draws=10), rules


def test_the_advice_bursts_a_long_wait_and_keeps_a_short_one(prices):
    """Uncalibrated (no history): the wait is the scheduler's estimate alone, labelled.  A
    2-hour estimate against a VM ready in 4-10 minutes: P(sooner) 1, burst; 60 s: 0, stay;
    pinned: stays whatever its odds; 2 nodes on D96s_v5 (no InfiniBand: one node): the VM
    does not take it; 48 h, past the predictor's horizon: 24 h, shown so too."""
    pr, rules = prices
    snap = snapshot([pend("1", 7200), pend("2", 60), pend("3", 7200, pinned=True),
                     pend("4", 7200, nodes=2), pend("5", 48 * 3600)])
    a = adv.advise(snap, pr, rules, cloud="cloud", vm="HB120-16rs_v3")
    t = a.table.set_index("job")
    assert a.basis["wait"].startswith("UNCALIBRATED: the estimate alone (the history has 0 "
                                      "finished job(s), fewer than 50")
    assert t.loc["1", "wait_q10_h"] == t.loc["1", "wait_q90_h"] == pytest.approx(2.0)
    assert (t.loc["1", "verdict"], t.loc["1", "p_sooner"]) == ("burst", 1.0)
    assert (t.loc["2", "verdict"], t.loc["2", "p_sooner"], t.loc["2", "why"]) == \
        ("stay", 0.0, "P(sooner) 0.00 < 0.9")
    assert (t.loc["3", "verdict"], t.loc["3", "why"]) == ("stay", "pinned by its owner")
    assert t.loc["4", "verdict"] == "burst"
    assert t.loc["5", ["estimate_h", "wait_q10_h", "wait_q90_h"]].tolist() == \
        pytest.approx([24.0] * 3)
    one = adv.advise(snap, pr, rules, cloud="cloud", vm="D96s_v5").table.set_index("job")
    assert (one.loc["4", "verdict"], one.loc["4", "why"]) == ("stay", "no VM takes it "
                                                              "(D96s_v5)")
    assert one.loc["1", "verdict"] == "burst"
    # the whole cost: at the guessed run (the requested time, with nothing finished to
    # learn from) it is the cost at the limit; a --max-jpy below it keeps the job
    assert t.loc["1", "jpy"] == pytest.approx(t.loc["1", "jpy_at_limit"]) and \
        t.loc["1", "jpy"] > 0
    cap = t.loc["1", "jpy_at_limit"] * 0.99
    a2 = adv.advise(snap, pr, rules, cloud="cloud", vm="HB120-16rs_v3", max_jpy=cap)
    assert a2.table.set_index("job").loc["1", "why"] == (
        f"up to {t.loc['1', 'jpy_at_limit']:,.0f} JPY at its limit, over --max-jpy {cap:,.0f}")


def test_the_gain_rule_weighs_the_hours_a_job_is_expected_to_save(prices):
    """Uncalibrated, the wait is the estimate: 2 h against a VM ready in 4-10 min (no data to
    stage, as fast) saves 2 h less 4-10 min, sure to be sooner: burst at any gain.  60 s
    saves nothing: stay, however small the gain asked.  Each said with its numbers, and the
    saving shown beside P(sooner) whichever rule decides."""
    pr, rules = prices
    snap = snapshot([pend("1", 7200), pend("2", 60)])
    a = adv.advise(snap, pr, rules, cloud="cloud", vm="HB120-16rs_v3", gain_h=64.0)
    t = a.table.set_index("job")
    s1, s2 = t.loc["1", "saving_h"], t.loc["2", "saving_h"]
    assert 2 - 10 / 60 <= s1 <= 2 - 4 / 60 and 1 / 60 - 10 / 60 <= s2 <= 1 / 60 - 4 / 60
    # P(sooner) 1 is weighed at P(later) 0.001: 64 h x 0.001 = 0.06 h asked
    assert (t.loc["1", "verdict"], t.loc["1", "why"]) == (
        "burst", f"expected saving {s1:.2f} h >= 0.06 h (64 h x P(later) 0.001)")
    assert (t.loc["2", "verdict"], t.loc["2", "why"]) == (
        "stay", f"expected saving {s2:.2f} h < 64.00 h (64 h x P(later) 1)")
    assert a.basis["gain_h"] == 64.0
    assert "burst at expected saving >= 64 h x P(later)" in command.table_text(a)
    by_p = adv.advise(snap, pr, rules, cloud="cloud", vm="HB120-16rs_v3").table
    assert by_p["saving_h"].tolist() == pytest.approx([s1, s2])
    with pytest.raises(ParamError, match=r"^--gain-h must be at least 0 and finite"):
        adv.advise(snap, pr, rules, cloud="cloud", gain_h=-1.0)


def test_jobs_without_times_or_that_no_move_helps_are_left_and_said(prices):
    """A pending job whose submit was not read (it made every time NaN, and the simulation
    never ended), a running one without its start, a held one, one already allowed the
    cloud (its partitions 'onprem,cloud'): none advised, each said."""
    pr, rules = prices
    nan = math.nan
    snap = snapshot([pend("1", 7200), pend("2", 7200), pend("3", 7200), pend("4", 7200)])
    snap.jobs[1].submit = nan
    snap.jobs[2].unmovable = "held (JobHeldUser): no VM starts it sooner"
    snap.jobs[3].partition = "onprem,cloud"
    snap.jobs.insert(0, queue.Job("49", "running", "u", "onprem", 1, 2, 60.0, NOW - 99))
    a = adv.advise(snap, pr, rules, cloud="cloud", vm="HB120-16rs_v3")
    assert a.table["job"].tolist() == ["4"]  # snap.jobs[0] is the running job 50
    assert a.notes[:3] == ["job 49: its submit or start time was not read, skipped",
                       "job 1: its submit or start time was not read, skipped",
                       "job 2: held (JobHeldUser): no VM starts it sooner; not advised"]


def test_bad_option_values_are_one_line_before_the_queue_is_read(cli):
    def args(**kw):
        return Namespace(**({"history_days": 30.0, "max_jpy": math.inf,
                             "budget_jpy": math.inf, "min_history": 50, "watch": 0.0,
                             "p_sooner": 0.8, "gain_h": 0.0} | kw))
    assert command.bad_option(args()) == ""
    assert [command.bad_option(args(**kw)) for kw in (
        {"history_days": 0}, {"max_jpy": -1}, {"max_jpy": math.nan}, {"watch": -5},
        {"watch": math.inf}, {"p_sooner": 1.0}, {"gain_h": -1}, {"gain_h": math.inf})] == [
        "--history-days must be above 0 and finite, not 0",
        "--max-jpy must be at least 0, not -1", "--max-jpy must be at least 0, not nan",
        "--watch must be at least 0 and finite, not -5",
        "--watch must be at least 0 and finite, not inf",
        "--p-sooner must be between 0 and 1 (not 0 or 1), not 1",
        "--gain-h must be at least 0 and finite (0: burst by P(sooner)), not -1",
        "--gain-h must be at least 0 and finite (0: burst by P(sooner)), not inf"]
    p = cli("-m", "burstbench", "advise", "--scheduler", "slurm", "--region", "eastus")
    assert (p.returncode, p.stderr) == (2, "error: --region 'eastus': no VM priced there for "
                                        "payg (priced: East US, Japan East)\n")


def test_a_classes_file_that_is_not_yaml_is_one_line_naming_its_line(cli, tmp_path):
    bad = tmp_path / "classes.yaml"
    bad.write_text("- partition: long\n  partition: short\n")
    p = cli("-m", "burstbench", "advise", "--scheduler", "slurm", "--classes", str(bad))
    assert (p.returncode, p.stderr) == (2, f"error: --classes: malformed YAML in {bad} line 2: "
                                        "'partition' given twice (first on line 1)\n")
    bad.write_text("{bad")
    p = cli("-m", "burstbench", "advise", "--scheduler", "slurm", "--classes", str(bad))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith(
        f"error: --classes: malformed YAML in {bad} line 1: ")


def test_the_defaults_are_the_committed_kth_replays_choices():
    """--p-sooner's default, the library's and the committed KTH replay's best probability
    policy (the most hours, its own and the stays', at most 10% later of 10 or more) are
    one number (the pick moved from 0.8 to 0.9 once and the default stayed behind), which
    is the pick; the gain hours --help names as KTH's best are its best gain policy's by
    the same rule."""
    import argparse
    import re

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    choices = (Path(__file__).resolve().parents[1] / "figures" / "replay_choices.md").read_text()
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in choices.splitlines()
            if re.match(r"\| P\(sooner\) >= [0-9.]+ \|", line)]  # not those again while waiting
    ok = [(float(r[4].replace(",", "")) + float(r[6].replace(",", "")), float(r[0][13:]))
          for r in rows if float(r[3]) <= 0.10 and int(r[2].replace(",", "")) >= 10]
    assert parser.parse_args([]).p_sooner == adv.P_SOONER == max(ok)[1]
    assert re.search(r"^Pick: .* when P\(sooner\) >= ([0-9.]+):", choices,
                     re.M)[1] == f"{adv.P_SOONER:g}"
    gains = [[c.strip() for c in line.strip("|").split("|")] for line in choices.splitlines()
             if line.startswith("| expected saving >= ")]
    best = max((float(r[4].replace(",", "")) + float(r[6].replace(",", "")),
                float(r[0].split(">= ")[1].split(" h")[0])) for r in gains
               if float(r[3]) <= 0.10 and int(r[2].replace(",", "")) >= 10)[1]
    assert f"KTH's best: {best:g}," in " ".join(parser.format_help().split())


def test_a_calibrated_wait_reads_the_history(prices):
    """60 finished jobs that each waited 10 min with nothing ahead: the calibrated wait of a
    job the scheduler starts in 10 min stays near 10 min, the run time guessed from their
    20-of-30 minutes."""
    pr, rules = prices
    snap = snapshot([pend("1", 600)], history=60)
    a = adv.advise(snap, pr, rules, cloud="cloud", min_history=50, learn=False)
    assert a.basis["jobs_used"] == {"finished": 60, "running": 1, "pending": 1}
    assert "UNCALIBRATED" not in a.basis["wait"]
    r = a.table.iloc[0]
    assert r["run_guess_h"] == pytest.approx(20 / 60, rel=0.05)
    assert 0 < r["wait_q10_h"] <= r["wait_q50_h"] <= r["wait_q90_h"]


def test_a_pending_jobs_wait_from_now_reads_how_long_it_has_waited(prices):
    """400 finished jobs that each waited 1-3 h with nothing ahead of them.  Pending jobs
    the scheduler gives no estimate for: one just submitted waits as a job of that history
    (and the running job's remaining limit); one that has waited 90 min has at most the 3 h
    less 90 min left; one that has waited 10 h, past every wait its model knows, has what
    the wait so far says (P(more than r x 10 h) = 1 / (1 + r)): 10 h at the median, 90 h at
    90%.  Two the scheduler expects in 2 min, one waiting 10 h, one a minute: read at their
    submits too (the wait of the first is the third's), the scheduler's estimate shown, and
    read as a veto: the first, which the wait so far alone would send to the cloud, stays, as
    the scheduler starts it within the VM's break-even wait, under either rule (P(sooner),
    --gain-h); one it expects in 2 h, waiting 10 h, bursts, as the third."""
    pr, rules = prices
    t0 = NOW - 400 * 1200 - 86400
    hist = [queue.Job(str(1000 + i), "finished", "u", "onprem", 1, 2, 1800.0, t0 + i * 1200,
                      t0 + i * 1200 + w, t0 + i * 1200 + w + 600)
            for i in range(400) for w in [3600.0 + (i % 9) * 900]]
    snap = snapshot([queue.Job(k, "pending", "u", "onprem", 1, 2, 1800.0, NOW - e,
                               estimate=NOW + 120 if k in "45" else math.nan)
                     for k, e in (("1", 0.0), ("2", 5400.0), ("3", 36000.0), ("4", 36000.0),
                                  ("5", 60.0), ("6", 36000.0))])
    snap.jobs[-1].estimate = NOW + 7200
    snap.history = hist
    a = adv.advise(snap, pr, rules, cloud="cloud", min_history=50, learn=False)
    t = a.table.set_index("job")
    assert t["waited_h"].tolist() == pytest.approx([0.0, 1.5, 10.0, 10.0, 1 / 60, 10.0])
    assert t.loc["1", "wait_q10_h"] >= 1.0
    assert 0 < t.loc["2", "wait_q50_h"] <= t.loc["2", "wait_q90_h"] <= 1.5
    assert t.loc["3", ["wait_q10_h", "wait_q50_h", "wait_q90_h"]].tolist() == \
        pytest.approx([10 / 9, 10.0, 90.0])
    assert t.loc["4", "estimate_from"] == "scheduler"
    assert t.loc["4", "estimate_h"] == t.loc["5", "estimate_h"] == pytest.approx(120 / 3600)
    assert np.array_equal(a.q[3], a.q[2]) and not np.array_equal(a.q[3], a.q[4])
    assert t.loc["3", "verdict"] == "burst" and t.loc["3", "p_sooner"] >= adv.P_SOONER
    assert t.loc["4", "p_sooner"] == t.loc["3", "p_sooner"]
    be = a.per_vm.set_index(["job", "vm"]).loc[("4", t.loc["4", "vm"]), "break_even_wait_h"]
    veto = ("stay", "the scheduler expects it to start in 2.0 min, within the VM's break-even "
            "wait of 5.0 min")
    assert be == pytest.approx(5 / 60) and (t.loc["4", "verdict"], t.loc["4", "why"]) == veto
    assert t.loc["6", "verdict"] == "burst" and np.array_equal(a.q[5], a.q[2])
    g = adv.advise(snap, pr, rules, cloud="cloud", min_history=50, learn=False, gain_h=1.0)
    tg = g.table.set_index("job")
    assert tg.loc["4", "saving_h"] > 1 and (tg.loc["4", "verdict"], tg.loc["4", "why"]) == veto
    assert tg.loc["6", "verdict"] == "burst"
    # as the advice read them before (comparisons/advise_estimate_rules.py): the two jobs
    # the scheduler expects in 2 min read now, the same wait (their estimate calibrated)
    old = adv.advise(snap, pr, rules, cloud="cloud", min_history=50, learn=False,
                     estimates_read_now=True)
    to = old.table.set_index("job")
    assert np.array_equal(old.q[3], old.q[4]) and not np.array_equal(old.q[3], a.q[3])
    assert np.array_equal(old.q[2], a.q[2]) and to.loc["4", "why"].startswith("P(sooner) ")
    assert t.loc["1", "estimate_from"] == "simulated at its submit (the scheduler gave none)"
    assert "given the wait so far" in a.basis["wait"]


def test_the_learned_wait_reads_each_jobs_partition(prices):
    """2,400 finished jobs alike but for their partition: those of 'debug' started at once,
    those of 'long' after 2 h.  Two pending jobs alike but for theirs, submitted a minute
    ago to the machine idle as it always was: the learned model tells them apart by the
    partition alone (the machine full, their simulated estimate would pass every one it
    learned from, and the history's calibration would read them alike)."""
    pr, rules = prices
    t0 = NOW - 2400 * 900 - 86400
    hist = [queue.Job(str(1000 + i), "finished", "u", p, 1, 2, 1800.0, t0 + i * 900,
                      t0 + i * 900 + w, t0 + i * 900 + w + 600)
            for i in range(2400) for p, w in [(("debug", 0.0), ("long", 7200.0))[i % 2]]]
    snap = snapshot([])
    snap.history = hist
    snap.jobs = [queue.Job(j, "pending", "u", p, 1, 2, 1800.0, NOW - 60)
                 for j, p in (("1", "debug"), ("2", "long"))]
    a = adv.advise(snap, pr, rules, cloud="cloud", min_history=50)
    assert "partition)" in a.basis["wait"]
    t = a.table.set_index("job")
    assert t.loc["1", "wait_q50_h"] < 0.25 and t.loc["2", "wait_q50_h"] > 1.0


def test_pending_jobs_are_predicted_in_submit_order_and_listed_as_the_scheduler_lists(
        prices, monkeypatch):
    """Three pending jobs listed 2, 3, 1 by the scheduler, submitted 1, 2, 3 a minute
    apart, each with the scheduler's estimate: calibrated, the predictor reads them at their
    submits; uncalibrated, now, a millisecond apart in submit order (so that each sees those
    submitted before it queued ahead, as the history's jobs saw theirs).  The table, the
    VMs' rows and the quantiles keep the scheduler's order; listed in another order, each
    job's numbers are the same."""
    pr, rules = prices
    jobs = {k: queue.Job(k, "pending", "u", "onprem", n, 2 * n, 1800.0, NOW - 600 + 60 * int(k),
                         estimate=NOW + e) for k, n, e in (("1", 1, 900), ("2", 2, 3600),
                                                           ("3", 1, 120))}
    seen = {}
    real = adv.predict

    def spy(submit, *a, **kw):
        seen["submit"] = np.array(submit)
        return real(submit, *a, **kw)
    monkeypatch.setattr(adv, "predict", spy)
    adv.advise(snapshot([jobs["2"], jobs["3"], jobs["1"]], history=10), pr, rules,
               cloud="cloud", min_history=50)
    pending = seen["submit"][-3:]
    assert np.diff(pending).tolist() == pytest.approx([adv.PENDING_APART_S] * 2)
    a = adv.advise(snapshot([jobs["2"], jobs["3"], jobs["1"]], history=60), pr, rules,
                   cloud="cloud", min_history=50)
    pending = seen["submit"][-3:]
    assert np.diff(pending).tolist() == pytest.approx([60.0] * 2)
    assert a.table["job"].tolist() == ["2", "3", "1"]
    assert a.per_vm["job"].tolist()[:3] == ["2", "3", "1"]
    b = adv.advise(snapshot([jobs["1"], jobs["2"], jobs["3"]], history=60), pr, rules,
                   cloud="cloud", min_history=50)
    ta, tb = a.table.set_index("job"), b.table.set_index("job")
    for col in ("estimate_h", "wait_q50_h", "wait_q90_h", "p_sooner", "verdict"):
        assert ta[col].loc[["1", "2", "3"]].tolist() == tb[col].loc[["1", "2", "3"]].tolist()
    assert np.array_equal(a.q[[2, 0, 1]], b.q)
    assert ta.loc["2", "estimate_h"] == pytest.approx(1.0)  # each job keeps its estimate


def test_a_job_running_since_before_the_last_finished_one_is_read(prices):
    """A job submitted 25 h ago and still running, beside a history whose last job was
    submitted 14 h ago: the predictor reads the jobs in submit order (it refused the
    history then the running jobs, each in order but not together: 'jobs must be in submit
    order')."""
    pr, rules = prices
    snap = snapshot([pend("1", 600)], history=60)
    snap.jobs.append(queue.Job("49", "running", "u", "onprem", 1, 2, 2 * 86400.0,
                               NOW - 90000, NOW - 89000))
    a = adv.advise(snap, pr, rules, cloud="cloud", min_history=50)
    assert a.basis["jobs_used"] == {"finished": 60, "running": 2, "pending": 1}
    assert a.table["job"].tolist() == ["1"] and a.table["wait_q50_h"].iloc[0] >= 0


def test_a_snapshot_saved_reads_back_whole(tmp_path, prices):
    pr, rules = prices
    snap = snapshot([pend("1", 7200)])
    a = adv.advise(snap, pr, rules, cloud="cloud")
    f = tmp_path / "snap.json"
    f.write_text(json.dumps({"snapshot": snap.to_dict(), "advice": a.to_dict()}))
    back, advice = queue.load(f)
    assert back.to_dict() == snap.to_dict() and advice["jobs"][0]["job"] == "1"
    assert math.isnan(back.jobs[1].start) and back.jobs[1].estimate == NOW + 7200
    assert len(advice["wait_quantiles_s"][0]) == len(advice["levels"]) == 41
    f.write_text("{}")
    with pytest.raises(ParamError, match="not an advise snapshot"):
        queue.load(f)


def args(tmp_path: Path, **kw) -> Namespace:
    return Namespace(**({"cloud": "cloud", "budget_jpy": math.inf, "max_jpy": math.inf,
                         "ledger": str(tmp_path / "ledger.jsonl")} | kw))


class Stop:
    class event:  # noqa: N801 (the shape of threading.Event)
        @staticmethod
        def is_set() -> bool:
            return False


def test_apply_moves_each_job_once_within_the_budget(tmp_path, prices):
    pr, rules = prices
    snap = snapshot([pend("1", 7200), pend("2", 9000), pend("3", 7200, pinned=True),
                     pend("4", 60)])
    a = adv.advise(snap, pr, rules, cloud="cloud", vm="HB120-16rs_v3")
    cost = a.table.set_index("job").loc["1", "jpy_at_limit"]
    moved = runner({("scontrol", "update"): (0, "", "")})
    led = ledger.Ledger(tmp_path / "ledger.jsonl")
    # a day's budget that holds one job: the likelier first, then nothing more, said
    said = command.apply(args(tmp_path, budget_jpy=cost * 1.5), snap, a, led, Stop, moved)
    first = "2" if a.table.set_index("job").loc["2", "p_sooner"] > \
        a.table.set_index("job").loc["1", "p_sooner"] else "1"
    assert moved.calls == [["scontrol", "update", f"JobId={first}", "Partition=cloud"]]
    assert said[0].startswith(f"job {first}: moved to cloud (HB120-16rs_v3, P(sooner) 1.00")
    assert said[1].startswith("budget exhausted: ")
    # again, with budget: the job moved is never moved again, the pinned and the short stay
    said = command.apply(args(tmp_path), snap, a, led, Stop, moved)
    assert [c[2] for c in moved.calls] == [f"JobId={first}", f"JobId={3 - int(first)}"]
    assert said[0] == f"job {first}: already in the ledger (done): not moved again"
    events = [(r["event"], r["job"]) for r in led.records]
    assert events == [("intent", first), ("done", first), ("intent", str(3 - int(first))),
                      ("done", str(3 - int(first)))]
    led.close()


def test_apply_under_the_gain_rule_moves_the_most_valuable_first(tmp_path, prices):
    """Two jobs both sure to be sooner (P(sooner) 1), one expected to save 2 h, the other
    2.5 h, and a budget for one: by P(sooner) the first in the queue goes; by the gain rule
    the one that saves more, its saving in the ledger and in the line said."""
    pr, rules = prices
    snap = snapshot([pend("1", 7200), pend("2", 9000)])
    by_p = adv.advise(snap, pr, rules, cloud="cloud", vm="HB120-16rs_v3")
    by_gain = adv.advise(snap, pr, rules, cloud="cloud", vm="HB120-16rs_v3", gain_h=4.0)
    assert by_p.table["p_sooner"].tolist() == [1.0, 1.0]
    cost = by_gain.table["jpy_at_limit"].max()
    first = []
    for name, a in (("p", by_p), ("gain", by_gain)):
        moved = runner({("scontrol", "update"): (0, "", "")})
        led = ledger.Ledger(tmp_path / f"{name}.jsonl")
        said = command.apply(args(tmp_path, budget_jpy=cost * 1.5), snap, a, led, Stop, moved)
        first.append(moved.calls[0][2])
        led.close()
    assert first == ["JobId=1", "JobId=2"]
    saving = by_gain.table.set_index("job").loc["2", "saving_h"]
    assert said[0].startswith(f"job 2: moved to cloud (HB120-16rs_v3, P(sooner) 1.00, "
                              f"expected to save {command.fmt_saving(saving)}, up to ")
    intent = json.loads((tmp_path / "gain.jsonl").read_text().splitlines()[0])
    assert intent["saving_h"] == pytest.approx(saving, abs=1e-3)


def test_a_refused_move_is_one_line_and_changes_nothing_else(tmp_path, prices):
    pr, rules = prices
    snap = snapshot([pend("1", 7200)])
    a = adv.advise(snap, pr, rules, cloud="cloud", vm="HB120-16rs_v3")
    refused = runner({("scontrol", "update"): (
        1, "", "slurm_update error: Requested partition configuration not available now\n")})
    led = ledger.Ledger(tmp_path / "ledger.jsonl")
    said = command.apply(args(tmp_path), snap, a, led, Stop, refused)
    assert said == ["job 1: the scheduler refused the move: slurm_update error: Requested "
                    "partition configuration not available now"]
    assert [r["event"] for r in led.records] == ["intent", "refused"]
    assert led.spent(time.strftime("%Y-%m-%d")) == 0.0
    led.close()


def test_a_move_with_no_answer_stays_open_and_is_settled_by_the_next_run(tmp_path, prices):
    """The scheduler did not answer in time: the move may have run, so it is neither done
    nor refused; its intent stays open, its JPY counted, and the next run settles it
    against the queue it finds."""
    pr, rules = prices
    snap = snapshot([pend("1", 7200)])
    a = adv.advise(snap, pr, rules, cloud="cloud", vm="HB120-16rs_v3")
    silent = runner({("scontrol", "update"): (124, "", "scontrol: no answer within 60 s")})
    led = ledger.Ledger(tmp_path / "ledger.jsonl")
    said = command.apply(args(tmp_path), snap, a, led, Stop, silent)
    assert said == ["job 1: no answer from the scheduler (scontrol: no answer within 60 s): "
                    "the next run settles the move against its queue"]
    assert [r["event"] for r in led.records] == ["intent"]
    assert led.spent(time.strftime("%Y-%m-%d")) == pytest.approx(
        a.table.set_index("job").loc["1", "jpy_at_limit"], rel=1e-3)
    moved = [queue.Job(j.id, j.state, j.user, "cloud" if j.id == "1" else j.partition,
                       j.nodes, j.cpus, j.limit_s, j.submit) for j in snap.jobs]
    assert led.settle("slurm", {j.id: (j.state, j.partition) for j in moved}, "cloud") == [
        "job 1: found in cloud after an interrupted run: the move ran"]
    led.close()


def test_a_job_id_or_partition_not_a_scheduler_name_is_refused_before_any_command():
    run = runner({})
    assert slurm.move(run, "1; rm -rf /", "cloud") == (
        False, "refused: job '1; rm -rf /' or partition 'cloud' is not a Slurm name")
    assert pbs.move(run, "3.vm", "cloud q") == (
        False, "refused: job '3.vm' or queue 'cloud q' is not a PBS name")
    assert run.calls == []



@pytest.mark.slow
def test_the_advise_notebook_runs_offline_on_the_committed_snapshot(tmp_path, cli):
    """notebooks/210_advise.ipynb with no scheduler here: the committed snapshot of the test
    cluster (data/advise/), its table, the P(sooner) curves and every VM's numbers."""
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "advise.ipynb"
    proc = cli("-m", "papermill", str(root / "notebooks" / "210_advise.ipynb"), str(out),
               "-k", "python3", "--cwd", str(root / "notebooks"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    outputs = [o for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 1
    lines = "".join(t for o in outputs for t in o.get("text", [])).splitlines()
    saved = json.loads((root / "data" / "advise" / "slurm-test-cluster.json").read_text())
    verdicts = {r["job"]: r["verdict"] for r in saved["advice"]["jobs"]}
    assert sorted(verdicts.values()) == ["burst", "stay", "stay"]
    for job, verdict in verdicts.items():  # the saved advice's verdicts, recomputed offline
        row = next(s for s in lines if s.startswith(f"{job}  "))
        assert f"  {verdict} (" in row, row
    assert "pinned by its owner" in json.dumps(outputs) and "HB120-16rs_v3" in json.dumps(outputs)


def test_the_backtests_scheduler_plans_with_requested_times():
    """comparisons/advise_backtest.py's emulated scheduler (``--estimates easy``): on 4
    nodes, a 4-node job running since 100 s ago with 1,000 s requested ends, as planned, at
    900 s from now; then A (2 nodes, 600 s) starts, B (4 nodes) waits for A's end at 1,500 s,
    and C (1 node, 300 s), behind B, backfills at 900 s as it ends before B's start; a job
    past its requested time is taken to end at once.  A bad ``--estimates`` is refused."""
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "comparisons"))
    try:
        from advise_backtest import scheduled
    finally:
        sys.path.remove(str(root / "comparisons"))
    run = [queue.Job("r", "running", "u", "onprem", 4, 4, 1000.0, NOW - 200, NOW - 100)]
    pend = [queue.Job(k, "pending", "u", "onprem", n, n, lim, NOW - 50)
            for k, n, lim in (("A", 2, 600.0), ("B", 4, 100.0), ("C", 1, 300.0))]
    assert scheduled(run, pend, NOW, 4).tolist() == [900.0, 1500.0, 900.0]
    run[0].start = NOW - 5000
    assert scheduled(run, pend, NOW, 4).tolist() == pytest.approx([1.0, 601.0, 1.0])
    bad = subprocess.run([sys.executable, str(root / "comparisons" / "advise_backtest.py"),
                          "--estimates", "soon"], capture_output=True, text=True, cwd=root)
    assert bad.returncode == 2
    assert "--estimates: 'easy' or a number at least 0, not 'soon'" in bad.stderr
