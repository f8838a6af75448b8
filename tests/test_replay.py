"""The replay of a centre's log (burstbench/replay): SWF, sacct and PBS Pro files written here,
bad input said in one line, a five-job log whose queue state, savings and costs are computed
by hand, the report's section, and the real Slurm cluster's own jobs through the sacct path."""

from __future__ import annotations

import dataclasses
import gzip
import math
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import newer_run, report_root, run_cli

from burstbench.core.checks import ParamError
from burstbench.cost import burst, job
from burstbench.replay import accounting, logs, policy, report, run
from burstbench.replay.stays import Stays
from burstbench.wait import history
from burstbench.wait.state import predicted_wait

SWF_HEAD = """; Version: 2.2
; Computer: Test SP2
; Installation: Hand-written centre
; Acknowledge: nobody
; UnixStartTime: 1000000000
; MaxNodes: 2
; MaxProcs: 2
"""


def swf_line(job, submit, wait, run_s, procs, req_time=-1, status=1, queue=1,
             partition=-1) -> str:
    f = [job, submit, wait, run_s, procs, -1, -1, procs, req_time, -1, status, 1, 1, -1,
         queue, partition, -1, -1]
    return " ".join(str(v) for v in f)


#: The five jobs, on a 2-node machine: (job, submit, wait, run, nodes, requested time).
FIVE = [(1, 0, 0, 3600, 2, 7200), (2, 600, 3000, 3600, 1, 3600), (3, 1200, 2400, 7200, 1, 7200),
        (4, 1800, 9000, 1800, 2, 3600), (5, 3000, 0, 600, 1, -1)]


def five_jobs(tmp_path: Path) -> Path:
    p = tmp_path / "five.swf"
    p.write_text(SWF_HEAD + "\n".join(swf_line(j, s, w, r, n, q) for j, s, w, r, n, q in FIVE)
                 + "\n")
    return p


# -- parsing ----------------------------------------------------------------------------------

def test_swf_every_field_and_the_header(tmp_path):
    p = tmp_path / "a.swf.gz"
    body = SWF_HEAD + "\n".join([
        swf_line(1, 0, 10, 100, 2, 200),
        swf_line(2, 5, -1, 100, 1),          # unknown wait: dropped
        "3 10 0 50 1 -1",                     # 6 fields: said by its line number
        swf_line(4, 20, 5, -7, 1),           # negative run time
        swf_line(5, 30, -3, 10, 1),          # start before submit
        swf_line(6, 40, 0, 10, 4),           # more processors than MaxProcs
        swf_line(7, 50, 0, 10, 1, 60, queue=3, partition=2),
        swf_line(8, "1e30", 0, 10, 1)]) + "\n"   # a submit time no log spans
    with gzip.open(p, "wt") as f:
        f.write(body)
    lg = logs.read_log(p)
    assert lg.fmt == "swf"
    assert (lg.max_nodes, lg.max_procs, lg.start_time) == (2, 2, 1e9)
    assert lg.machine == "Hand-written centre, Test SP2, 2 nodes" and lg.acknowledge == "nobody"
    assert list(lg.jobs["job"]) == [1, 7]
    one = lg.jobs.iloc[0]
    assert (one.submit, one.wait, one.run, one.procs, one.req_time) == (0, 10, 100, 2, 200)
    assert math.isnan(lg.jobs.iloc[1].req_time) is False and lg.jobs.iloc[1].queue == 3
    assert list(lg.jobs["partition"]) == [-1, 2]
    assert lg.dropped == {"wrong field count": 1, "unknown wait or run time (-1)": 1,
                          "a negative run time": 1,
                          "a start before its submit (negative wait)": 1,
                          "more processors than MaxProcs (2)": 1,
                          "a submit time over 50 years from the log's median (a corrupt "
                          "field?)": 1}
    text = " ".join(lg.notes)
    assert "1 line(s) without SWF's 18 fields (line 10)" in text
    assert "1 job(s) with a negative run time: dropped" in text
    assert ("1 job(s) with a submit time over 50 years from the log's median (a corrupt "
            "field?): dropped") in text


SACCT = """JobID|Submit|Start|End|NNodes|NCPUS|State|Timelimit
11|2024-01-01T00:00:00|2024-01-01T00:10:00|2024-01-01T01:10:00|2|8|COMPLETED|1-00:00:00
11.batch|2024-01-01T00:10:00|2024-01-01T00:10:00|2024-01-01T01:10:00|1|4|COMPLETED|
12|2024-01-01T00:05:00|2024-01-01T00:05:00|2024-01-01T00:35:00|1|4|CANCELLED by 0|30:00
13|2024-01-01T00:06:00|Unknown|Unknown|1|4|PENDING|UNLIMITED
14|2024-01-01T00:07:00|2024-01-01T00:08:00
15|2024-01-01T00:09:00|2024-01-01T00:09:00|2024-01-01T00:19:00|1|2|COMPLETED|90
"""


def test_sacct_parsable2(tmp_path):
    p = tmp_path / "sacct.txt"
    p.write_text(SACCT)
    lg = logs.read_log(p)
    assert lg.fmt == "sacct"
    j = lg.jobs.set_index("job")
    assert list(j.index) == ["11", "12", "15"]  # sorted by submit; the step skipped
    assert j.loc["11", "wait"] == 600 and j.loc["11", "run"] == 3600
    assert j.loc["11", "nodes"] == 2 and j.loc["11", "procs"] == 8
    assert j.loc["11", "req_time"] == 86400 and j.loc["12", "req_time"] == 1800
    assert j.loc["15", "req_time"] == 5400 and j.loc["12", "status"] == "CANCELLED"
    assert j.loc["11", "submit"] == 0 and j.loc["15", "submit"] == 540
    assert lg.dropped == {"wrong field count": 1, "never started or no end": 1}
    assert "line 6" in " ".join(lg.notes)
    assert (j["partition"] == -1).all() and (j["queue"] == 0).all()  # no Partition column
    # with one: names as numbers in order of first appearance, a job with none -1
    p.write_text("JobID|Partition|Submit|Start|End|NNodes|NCPUS|State|Timelimit\n"
                 "1|long|2024-01-01T00:00:00|2024-01-01T00:10:00|2024-01-01T01:00:00|1|4|"
                 "COMPLETED|1:00:00\n"
                 "2|debug|2024-01-01T00:01:00|2024-01-01T00:02:00|2024-01-01T00:03:00|1|4|"
                 "COMPLETED|10:00\n"
                 "3|long|2024-01-01T00:02:00|2024-01-01T00:20:00|2024-01-01T01:00:00|1|4|"
                 "COMPLETED|1:00:00\n"
                 "4||2024-01-01T00:03:00|2024-01-01T00:04:00|2024-01-01T00:05:00|1|4|"
                 "COMPLETED|10:00\n")
    assert list(logs.read_log(p).jobs["partition"]) == [0, 1, 0, -1]


PBS = """01/02/2024 10:00:00;Q;101.pbs;queue=workq
01/02/2024 10:00:05;S;101.pbs;user=a start=1704189605
01/02/2024 11:00:05;E;101.pbs;user=a group=g queue=workq ctime=1704189600 qtime=1704189600 \
etime=1704189600 start=1704189605 exec_host=n1/0*4 Resource_List.ncpus=4 Resource_List.nodect=1 \
Resource_List.walltime=02:00:00 session=1 end=1704193205 Exit_status=0 \
resources_used.walltime=01:00:00
01/02/2024 12:00:00;E;102.pbs;user=b qtime=1704190000 start=1704191000 end=1704191100 \
Resource_List.ncpus=16 Resource_List.nodect=2 Exit_status=1
not a record at all
"""


def test_pbs_pro_end_records(tmp_path):
    p = tmp_path / "20240102"
    p.write_text(PBS)
    lg = logs.read_log(p)
    assert lg.fmt == "pbs"
    j = lg.jobs.set_index("job")
    assert list(j.index) == ["101.pbs", "102.pbs"]
    assert (j.loc["101.pbs", "wait"], j.loc["101.pbs", "run"]) == (5, 3600)
    assert j.loc["101.pbs", "req_time"] == 7200 and j.loc["101.pbs", "procs"] == 4
    assert j.loc["102.pbs", "nodes"] == 2 and math.isnan(j.loc["102.pbs", "req_time"])
    assert j.loc["102.pbs", "submit"] == 400
    assert (j.loc["101.pbs", "partition"], j.loc["102.pbs", "partition"]) == (0, -1)  # queue=
    assert lg.dropped == {"wrong field count": 1} and "line 5" in lg.notes[0]


def test_swf_as_the_archive_and_centres_write_it(tmp_path):
    """The quirks of real SWF files: counts with words or -1 in the header; a checkpointed
    job's partial executions beside its summary line; a job cancelled in the queue; a line
    twice; a field not a number; raw Unix user ids; partitions; an 'unlimited' requested
    time; gzip without .gz in the name."""
    def line(job, submit, run_s, status=1, user=1, req=600, part=-1):
        return " ".join(str(v) for v in [job, submit, 10, run_s, 1, -1, -1, 1, req, -1,
                                         status, user, 1, -1, 1, part, -1, -1])
    body = "\n".join([
        "; MaxNodes: 1,024 (thin nodes)", "; MaxProcs: -1", "; UnixStartTime: soon",
        line(1, 0, 300, status=1),                        # the summary of 2's parts below
        line(1, 0, 100, status=2), line(1, 200, 200, status=3),
        line(2, 50, 0, status=5),                         # cancelled before it ran
        line(3, 60, 100, user=2**31 - 1, req=2**31 - 1),  # a raw uid, 'unlimited'
        line(3, 60, 100, user=2**31 - 1, req=2**31 - 1),  # the same line again
        line(4, 70, 100, part=1).replace(" 1 1 -1 1 1 ", " NaN 1 -1 1 1 "),
        line(5, 80, 100, part=2).replace("80", "x", 1),
        line(6, 90, 100, status=5, user=7, part=2),       # cancelled while it ran: kept
        line(7, 95, 50, part=1)])
    p = tmp_path / "log.txt"
    p.write_bytes(gzip.compress(body.encode()))
    lg = logs.read_log(p)
    assert (lg.max_nodes, lg.max_procs, lg.procs_per_node) == (1024, None, None)
    assert lg.start_time is None and lg.machine.endswith(", 1024 nodes")
    j = lg.jobs
    assert j["job"].tolist() == [1, 3, 6, 7] and j["run"].tolist() == [300, 100, 100, 50]
    assert j["user"].tolist() == [0, 2, 1, 0] and math.isnan(j["req_time"].iloc[1])
    assert lg.dropped == {"a field not a number": 2, "partial execution": 2,
                          "cancelled before it ran": 1, "duplicate": 1}
    said = " | ".join(lg.notes)
    for part in ("the header's UnixStartTime 'soon' is not a number: not used",
                 "2 line(s) with a field that is not a number (line 10, 11): not read",
                 "2 job(s) logged as partial executions of a checkpointed job (status 2-4)",
                 "1 job(s) cancelled before they ran (status 5, no run time): dropped",
                 "the jobs ran in 2 partitions (field 16): replayed as one queue of the whole "
                 "machine; the learned wait reads each job's partition and its partition's "
                 "own queue",
                 "1 job(s) requested more than a year (up to 68 years"):
        assert part in said, part


#: A centre's own sacct export: a byte-order mark, sacct's warning before the header, the
#: cluster's name first, --delimiter=',', CRLF, times with UTC offsets across a change of
#: daylight-saving time, Eligible and Elapsed, a job twice (monthly exports joined, the
#: header again), a site's time format, a job cancelled while it pended.
SACCT_SITE = "\r\n".join([
    "\ufeffsacct: error: Problem talking to the database",
    "Cluster,JobID,Submit,Eligible,Start,End,Elapsed,NNodes,NCPUS,State,Timelimit",
    # held an hour (eligible 01:00), started 01:10; ran 2 h across the change (02:00 +0200
    # -> 02:00 +0100 is one hour of the clock, two of time): Elapsed says 2 h
    "c,21,2023-10-29T00:00:00+0200,2023-10-29T01:00:00+0200,2023-10-29T01:10:00+0200,"
    "2023-10-29T02:10:00+0100,02:00:00,1,8,COMPLETED,1-12",
    "c,22,2023-10-29T00:30:00+0200,2023-10-29T00:30:00+0200,2023-10-29T00:40:00+0200,"
    "2023-10-29T01:40:00+0200,01:00:00,2,16,COMPLETED,1-12:30",
    "Cluster,JobID,Submit,Eligible,Start,End,Elapsed,NNodes,NCPUS,State,Timelimit",
    "c,22,2023-10-29T00:30:00+0200,2023-10-29T00:30:00+0200,2023-10-29T00:40:00+0200,"
    "2023-10-29T01:40:00+0200,01:00:00,2,16,COMPLETED,1-12:30",
    "c,23,10/29/2023 00:10:00,Unknown,10/29/2023 00:20:00,10/29/2023 00:30:00,00:10:00,1,1,"
    "COMPLETED,30",
    "c,24,2023-10-29T00:00:00+0200,2023-10-29T00:00:00+0200,2023-10-29T02:00:00+0200,"
    "2023-10-29T02:00:00+0200,00:00:00,1,1,CANCELLED by 1001,00:00:00",
    ""])


def test_a_sacct_export_as_a_centre_writes_it(tmp_path):
    p = tmp_path / "sacct.csv"
    p.write_bytes(SACCT_SITE.encode())
    lg = logs.read_log(p)
    assert lg.fmt == "sacct"
    j = lg.jobs.set_index("job")
    assert list(j.index) == ["22", "21"]  # 21 entered the queue when eligible, after 22
    assert j.loc["21", "wait"] == 600 and j.loc["21", "run"] == 7200  # from Eligible, Elapsed
    assert j.loc["22", "wait"] == 600 and j.loc["22", "run"] == 3600
    assert j.loc["22", "submit"] == 0 and j.loc["21", "submit"] == 1800
    assert j.loc["21", "req_time"] == 36 * 3600 and j.loc["22", "req_time"] == 36.5 * 3600
    assert lg.dropped == {"a time not read": 1, "duplicate": 1, "cancelled before it ran": 1}
    said = " | ".join(lg.notes)
    assert "1 line(s) before sacct's header (line 1)" in said
    assert "(e.g. '10/29/2023 00:10:00'; read: ISO 8601" in said
    assert "1 job(s) eligible after their submit" in said
    p.write_bytes(SACCT_SITE.replace("NNodes,NCPUS", "AllocNodes,AllocCPUS").encode())
    alloc = logs.read_log(p).jobs.set_index("job")  # the same counts, under sacct's other names
    assert alloc[["nodes", "procs"]].equals(j[["nodes", "procs"]])


def test_slurm_time_limits_and_pbs_walltimes():
    assert [accounting.limit_seconds(t) for t in ("30", "30:15", "1:00:00", "2-0", "1-12",
                                            "1-12:30", "1-00:00:01")] == \
        [1800, 1815, 3600, 172800, 129600, 131400, 86401]
    assert all(math.isnan(accounting.limit_seconds(t))
               for t in ("UNLIMITED", "Partition_Limit", "00:00:00", "0", "x-1", ""))
    assert [accounting.pbs_seconds(t) for t in ("3600", "01:00:00", "90:30", "3600.5", 60)] == \
        [3600, 3600, 5430, 3600.5, 60]
    assert math.isnan(accounting.pbs_seconds("1-00:00:00"))
    assert math.isnan(accounting.pbs_seconds(None))


def test_pbs_hosts_and_processors_as_pbs_pro_and_torque_write_them():
    def hp(**kv):
        return accounting.pbs_procs_nodes({k.replace("__", "."): v for k, v in kv.items()})
    # 64 chunks of one cpu packed on two hosts: nodect counts chunks, exec_host hosts
    assert hp(Resource_List__ncpus="64", Resource_List__nodect="64",
              exec_host="n1/0*32+n2/0*32") == (64, 2)
    assert hp(Resource_List__ncpus="16", Resource_List__nodect="3",
              exec_vnode="(n3[0]:ncpus=4+n3[1]:ncpus=4)+(n4:ncpus=8)") == (16, 2)
    assert hp(Resource_List__ncpus="64", Resource_List__nodect="64",
              Resource_List__place="pack") == (64, 1)   # not yet placed: packed is one host
    assert hp(Resource_List__ncpus="8", Resource_List__nodect="2") == (8, 2)
    # Torque: nodes=N:ppn=M, its slots, its exec_host one entry a core (or a range)
    assert hp(Resource_List__nodes="2:ppn=16", total_execution_slots="32",
              exec_host="n1/0-15+n2/0-15") == (32, 2)
    assert hp(Resource_List__nodes="3:ppn=4+n9:ppn=2") == (14, 4)
    assert hp(exec_host="n1/0+n1/1+n1/2") == (0, 1)
    assert hp() == (0, 0)


PBS_SITE = "\n".join([
    "01/02/2024 11:00:05;E;201.s;user=a ctime=1704189600 etime=1704189600 start=1704189605 "
    "end=1704193205 Resource_List.ncpus=64 Resource_List.nodect=64 "
    "Resource_List.select=64:ncpus=1 Resource_List.place=pack exec_host=n1/0*32+n2/0*32 "
    "Resource_List.walltime=3600",
    *["01/02/2024 11:00:05;E;202.s;user=a qtime=1704189600 etime=1704190200 "
      "start=1704190800 end=1704191800 Resource_List.nodes=2:ppn=16 total_execution_slots=32 "
      "exec_host=n1/0-15+n2/0-15 Resource_List.walltime=02:00:00"] * 2,
    "01/02/2024 11:00:05;E;300[].s;user=a qtime=1704189600 start=1704190000 end=1704191000 "
    "Resource_List.ncpus=1", ""])


def test_pbs_and_torque_end_records_as_a_centre_writes_them(tmp_path):
    p = tmp_path / "20240102"
    p.write_text(PBS_SITE)
    lg = logs.read_log(p)
    j = lg.jobs.set_index("job")
    assert list(j.index) == ["201.s", "202.s"]
    assert (j.loc["201.s", "nodes"], j.loc["201.s", "procs"]) == (2, 64)
    assert j.loc["201.s", "req_time"] == 3600 and j.loc["201.s", "wait"] == 5  # from ctime
    assert (j.loc["202.s", "nodes"], j.loc["202.s", "procs"]) == (2, 32)
    assert j.loc["202.s", "wait"] == 600 and j.loc["202.s", "submit"] == 600  # from etime
    assert lg.dropped == {"duplicate": 1}
    assert "1 job array(s)' own E record(s) (id 123[])" in " ".join(lg.notes)
    (tmp_path / "q").write_text("01/02/2024 10:00:00;Q;101.s;queue=workq\n")
    with pytest.raises(ParamError, match=r"no job left to replay \(no E \(job ended\) "
                       r"record among 1 record\(s\)"):
        logs.read_log(tmp_path / "q")


# -- bad input, each one line ------------------------------------------------------------------

def test_bad_input_is_one_line(tmp_path):
    (tmp_path / "x.txt").write_text("hello world\n")
    with pytest.raises(ParamError, match=r"not a workload log: expected SWF .*sacct "
                       r"--parsable2 .*PBS Pro") as e:
        logs.read_log(tmp_path / "x.txt")
    assert "\n" not in str(e.value)
    (tmp_path / "e.swf").write_text("; MaxNodes: 4\n;\n")
    with pytest.raises(ParamError, match="the log is empty"):
        logs.read_log(tmp_path / "e.swf")
    (tmp_path / "neg.swf").write_text(swf_line(1, 0, 0, -5, 1) + "\n")
    with pytest.raises(ParamError, match="no job left to replay .*negative run time"):
        logs.read_log(tmp_path / "neg.swf")
    with pytest.raises(ParamError, match="must increase: 1 h after 2 h"):
        policy.check_thresholds([0.5, 2, 1])
    with pytest.raises(ParamError, match="cannot read"):
        logs.read_log(tmp_path / "missing.swf")


def test_the_replay_reads_each_jobs_queue():
    """3,000 jobs whose queue sets their wait (queue 1 at once, queue 3 hours): the
    replay's learned model names the queue and tells the two apart; with the queues
    blanked it names none and cannot."""
    rng = np.random.default_rng(4)
    n = 3000
    submit = np.cumsum(rng.exponential(600, n)).round()
    queue = rng.integers(1, 4, n)
    wait = np.where(queue == 1, 0, np.where(queue == 3, rng.exponential(6 * 3600, n),
                                            rng.exponential(1800, n))).round()
    run_s = rng.integers(600, 7200, n)
    nodes = rng.integers(1, 9, n)
    lg = logs.parse_swf("; MaxNodes: 64\n; MaxProcs: 64\n" + "\n".join(
        swf_line(i + 1, int(submit[i]), int(wait[i]), int(run_s[i]), int(nodes[i]),
                 int(2 * run_s[i]), queue=int(queue[i])) for i in range(n)) + "\n")
    kw = dict(thresholds_h=[1.0], p_sooner=[0.9], gain_h=[64.0], draws=10)
    r = run.replay(lg, **kw)
    blank = run.replay(dataclasses.replace(lg, jobs=lg.jobs.assign(queue=-1)), **kw)
    assert "queued, queue)" in r.predicted.how and ", queue)" not in blank.predicted.how
    late = np.arange(n) >= 2500
    for p, at_once in ((r.predicted, True), (blank.predicted, False)):
        med = p.quantile(0.5)
        assert (np.median(med[late & (queue == 1)]) < 60) == at_once
        assert np.median(med[late & (queue == 3)]) > 3600 or not at_once
    # the comparison scripts read and predict the jobs through run.read_jobs, as the replay
    assert np.array_equal(run.read_jobs(lg).predict().q, r.predicted.q, equal_nan=True)


def test_the_jobs_as_the_replay_reads_them_by_hand(tmp_path):
    """The five jobs on their 2-node machine, then as processors on nodes of 4 shared."""
    lg = logs.read_log(str(five_jobs(tmp_path)))
    jb = run.read_jobs(lg)
    # peak: jobs 1 (2 nodes) and 5 (1) both ran from 3,000 to 3,600 s
    assert (jb.capacity, jb.capacity_how, jb.unit, jb.peak) == (2, "the log's MaxNodes",
                                                               "nodes", 3)
    assert jb.nodes.tolist() == jb.queue_n.tolist() == [2, 1, 1, 2, 1]
    assert jb.plan.tolist() == [7200, 3600, 7200, 3600, 600]  # job 5 requested no time
    assert jb.guess_h.shape == (5, len(run.RUN_LEVELS))
    assert jb.categories["queue"].tolist() == [1] * 5
    shared = run.read_jobs(lg, procs_per_node=4, machine_nodes=1, shared_nodes=True)
    assert (shared.capacity, shared.capacity_how, shared.unit) == (
        4, "--machine-nodes x 4 processors a node", "processors")
    assert shared.queue_n.tolist() == [2, 1, 1, 2, 1]  # processors
    assert shared.nodes.tolist() == [1] * 5            # ceil(processors / 4) VM nodes
    with pytest.raises(ParamError, match=r"^the machine's 1 nodes \(given\) are fewer than "
                       r"the largest job's 2 \(give --machine-nodes\)$"):
        run.read_jobs(lg, machine_nodes=1)
    with pytest.raises(ParamError, match=r"^--procs-per-node \(-1\) and --machine-nodes"):
        run.read_jobs(lg, procs_per_node=-1)
    with pytest.raises(ParamError, match=r"^the log has no job to replay$"):
        run.read_jobs(dataclasses.replace(lg, jobs=lg.jobs.iloc[:0]))


def test_the_command_writes_the_policies_the_calibration_and_the_predictions(tmp_path):
    out, pred = tmp_path / "figs", tmp_path / "pred.csv"
    log = five_jobs(tmp_path)
    log.write_text(log.read_text().replace("\n1 0 ", "\n1 1000000 ").replace(
        "\n2 600 ", "\n2 1000600 ").replace("\n3 1200 ", "\n3 1001200 ").replace(
        "\n4 1800 ", "\n4 1001800 ").replace("\n5 3000 ", "\n5 1003000 "))
    proc = run_cli("-m", "burstbench", "replay", "--log", str(log),
                   "--thresholds", "1,2", "--p-sooner", "0.5,0.9", "--gain-h", "2,8",
                   "--draws", "10", "--figures-dir", str(out), "--predictions", str(pred))
    assert proc.returncode == 0, proc.stderr
    assert "predicting 5 waits" in proc.stderr  # progress, on stderr
    assert "\n  the scheduler's estimate at each of 5 submits" in proc.stderr
    assert ("the machine: 2 nodes (the log's MaxNodes), 1 processor(s) a node (the log's "
            "header (MaxProcs / MaxNodes))") in proc.stderr
    head = (out / "replay_policies.csv").read_text().splitlines()[0].split(",")
    assert head[:11] == ["vm", "policy", "p_sooner_min", "threshold_h", "gain_h",
                         "jobs_burst", "share_made_later", "hours_saved",
                         "perfect_hours_saved", "jpy_spent", "stays_hours_saved"]
    import pandas as pd

    t = pd.read_csv(out / "replay_policies.csv")
    assert set(t["policy"]) == {"probability", "watch", "gain", "threshold", "queue state",
                                "perfect"}
    assert t.loc[~t["policy"].isin(["probability", "watch"]), "p_sooner_min"].isna().all()
    # decided again while a job waits, a level bursts every job it burst at the submit
    by = t.set_index(["vm", "policy", "p_sooner_min"])["jobs_burst"]
    for vm in t["vm"].unique():
        for lv in (0.5, 0.9):
            assert by[(vm, "watch", lv)] >= by[(vm, "probability", lv)]
    assert t.loc[t["policy"] != "gain", "gain_h"].isna().all()
    assert sorted(t.loc[t["policy"] == "probability", "p_sooner_min"].unique()) == [0.5, 0.9]
    assert sorted(t.loc[t["policy"] == "gain", "gain_h"].unique()) == [2, 8]
    cal = pd.read_csv(out / "replay_calibration.csv")
    assert list(cal.columns[:3]) == ["quantile", "coverage", "jobs"]
    assert cal["quantile"].tolist() == pytest.approx([0.1 * k for k in range(1, 10)])
    p = pd.read_csv(pred)
    assert list(p.columns) == ["job", "submit", "wait_q10_h", "wait_q50_h", "wait_q90_h"]
    assert p["job"].tolist() == [1, 2, 3, 4, 5] and math.isnan(p["wait_q50_h"].iloc[0])
    assert pred.read_text().splitlines()[1].startswith("1,1000000,")  # exact, not 1e+06
    known = p.dropna()  # the first job had nothing to go on
    assert len(known) == 4 and (known["wait_q10_h"] <= known["wait_q90_h"]).all()


def test_the_command_refuses_bad_sizes_and_a_missing_folder_before_it_replays(tmp_path):
    log = str(five_jobs(tmp_path))
    proc = run_cli("-m", "burstbench", "replay", "--log", log, "--procs-per-node", "-4")
    assert (proc.returncode, proc.stderr.splitlines()[-1]) == (
        2, "error: --procs-per-node (-4) and --machine-nodes (0) must be positive (0: from "
        "the log)")
    for given, said in (("4,2", "--gain-h must increase: 2 h after 4 h"),
                        ("0,4", "--gain-h must be a list of hours (more than 0), not [0.0, "
                                "4.0]")):
        proc = run_cli("-m", "burstbench", "replay", "--log", log, "--gain-h", given)
        assert (proc.returncode, proc.stderr.splitlines()[-1]) == (2, f"error: {said}")
    missing = tmp_path / "nodir" / "p.csv"
    proc = run_cli("-m", "burstbench", "replay", "--log", log, "--predictions", str(missing))
    assert (proc.returncode, proc.stderr) == (
        2, f"error: --predictions {missing}: no folder {missing.parent} to write it in\n")


def test_no_pick_where_no_policy_earns_one():
    row = {"vm": "D96s_v5", "policy": "probability", "p_sooner_min": 0.5, "threshold_h": None,
           "jobs_burst": 1, "share_made_later": 1.0, "hours_saved": -0.2,
           "perfect_hours_saved": 0.0, "stays_hours_saved": 0.0, "jpy_spent": 1000.0,
           "jpy_per_hour_saved": math.nan}
    import pandas as pd

    rows = pd.DataFrame([row, row | {"p_sooner_min": 0.9, "jobs_burst": 0,
                                     "share_made_later": math.nan, "hours_saved": 0.0}])
    best = report.pick(rows)
    assert best["p_sooner_min"] == 0.5 and not report.picked(best)
    assert report.choice_line(best).startswith(
        "No pick: no policy on P(sooner) bursts at least 10 jobs, makes at most 10% of them "
        "later and saves hours; keep the jobs on premise. The closest would burst a job to "
        "D96s_v5 when P(sooner) >= 0.5: 1 job burst, 100% of it made later")
    none = report.pick(rows.iloc[1:])
    assert report.choice_line(none) == (
        "No pick: no policy on P(sooner) bursts a job on any VM (the closest, on D96s_v5: "
        "P(sooner) >= 0.9): keep the jobs on premise.")
    good = best | {"share_made_later": 0.1, "hours_saved": 2.0, "jobs_burst": 10}
    assert report.picked(good) and not report.picked(good | {"jobs_burst": 9})


def test_a_pick_is_read_on_ten_burst_jobs_at_least():
    """A share made later of 0% on a few burst jobs is no evidence of at most 10%: such a
    row is no pick, and where no row is one, the closest is one that bursts ten or more."""
    import pandas as pd

    base = {"vm": "D96s_v5", "policy": "probability", "threshold_h": math.nan,
            "gain_h": math.nan, "perfect_hours_saved": 100.0, "stays_hours_saved": 0.0,
            "jpy_spent": 1000.0, "jpy_per_hour_saved": 10.0}
    few = base | {"p_sooner_min": 0.98, "jobs_burst": 3, "share_made_later": 0.0,
                  "hours_saved": 9.0}
    many = base | {"p_sooner_min": 0.9, "jobs_burst": 40, "share_made_later": 0.15,
                   "hours_saved": 60.0}
    best = report.pick(pd.DataFrame([many, few]))
    assert best["p_sooner_min"] == 0.9 and not report.picked(best)
    assert report.choice_line(best).startswith(
        "No pick: no policy on P(sooner) bursts at least 10 jobs, makes at most 10% of them "
        "later and saves hours; keep the jobs on premise. The closest would burst a job to "
        "D96s_v5 when P(sooner) >= 0.9: 40 jobs burst, 15% of them made later")
    assert "few" not in best
    # with ten burst jobs at 10% later, it is the pick
    best = report.pick(pd.DataFrame([few, many | {"jobs_burst": 10, "share_made_later": 0.1}]))
    assert best["p_sooner_min"] == 0.9 and report.picked(best)
    assert report.choice_line(best).startswith(
        "Pick: burst a job to D96s_v5 when P(sooner) >= 0.9: 10 jobs burst, 10% of them")
    # only few-job rows: the closest is the one that makes the fewest later
    best = report.pick(pd.DataFrame([few, few | {"p_sooner_min": 0.5, "jobs_burst": 5,
                                                 "share_made_later": 0.2}]))
    assert best["p_sooner_min"] == 0.98 and not report.picked(best)


def test_the_pick_is_made_from_the_probability_policies_alone():
    """A gain policy or a threshold policy saving more hours within 10% later is not a
    candidate (burstbench.replay.run.PICKABLE): the probability policy is the pick, and only
    its row is marked in the table; a gain row the pick were handed would still read as
    one."""
    import pandas as pd

    base = {"vm": "D96s_v5", "threshold_h": math.nan, "p_sooner_min": math.nan,
            "gain_h": math.nan, "jobs_burst": 10, "share_made_later": 0.1,
            "perfect_hours_saved": 100.0, "stays_hours_saved": 0.0, "jpy_spent": 1000.0,
            "jpy_per_hour_saved": 10.0, "share_later_if_others_left": 0.2}
    rows = pd.DataFrame([base | {"policy": "probability", "p_sooner_min": 0.9,
                                 "hours_saved": 50.0},
                         base | {"policy": "gain", "gain_h": 64.0, "hours_saved": 70.0},
                         base | {"policy": "gain", "gain_h": 16.0, "hours_saved": 90.0,
                                 "share_made_later": 0.2},
                         base | {"policy": "threshold", "threshold_h": 1.0,
                                 "hours_saved": 95.0}])
    best = report.pick(rows)
    assert (best["policy"], best["p_sooner_min"]) == ("probability", 0.9) and report.picked(best)
    assert report.choice_line(best).startswith(
        "Pick: burst a job to D96s_v5 when P(sooner) >= 0.9: 10 jobs burst, "
        "10% of them made later (20% in the queue the others would have left")
    assert report.advise_options(best) == \
        "burstbench advise --cloud PARTITION --vm D96s_v5 --p-sooner 0.9"
    gain = rows.iloc[1].to_dict()
    assert report.advise_options(gain) == \
        "burstbench advise --cloud PARTITION --vm D96s_v5 --gain-h 64"
    assert report.choice_line(gain).startswith(
        "Pick: burst a job to D96s_v5 when expected saving >= 64 h x P(later): 10 jobs")
    marks = [(r["policy"], r["pick"]) for r in report.choices(rows, "D96s_v5", best, "")]
    assert [m for m in marks if m[1]] == [("P(sooner) >= 0.9", "<- pick")]


def test_the_sweeps_defaults_are_one_list_wherever_they_are_named():
    """P(sooner)'s levels and the gain's hours: the replay's constants, the report's
    parameters (notebook 150 reads them) and the CLI's help say the same lists."""
    import argparse

    from burstbench.replay.command import add_arguments
    from burstbench.report.parameters import REPLAY

    defaults = {p.name: p.default for p in REPLAY}
    assert defaults["replay_p_sooner"] == list(policy.P_SOONER)
    assert defaults["replay_gain_h"] == list(policy.GAIN_H)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    helps = {a.dest: a.help for a in parser._actions}
    for dest, values in (("p_sooner", policy.P_SOONER), ("gain_h", policy.GAIN_H)):
        said = re.search(r"\(default ([0-9.,]+)\)", helps[dest]).group(1)
        assert [float(v) for v in said.split(",")] == list(values), dest


def test_the_gain_policy_by_hand():
    """A wait spread evenly over 0-3,600 s waits 0.5 h on average.  A VM as fast as the
    machine, 0.25 h of deployment and staging: 0.5 - 0.25 = 0.25 h expected saved.  One
    twice as fast on a job guessed at 1 h: 0.5 - 0.25 + 0.5 = 0.75 h.  At 4 h per chance of
    coming back later, P(sooner) 0.95 needs 0.2 h, 0.9 needs 0.4 h, 0.8 needs 0.8 h; one sure
    to be sooner is weighed at a chance of 0.001: 0.004 h."""
    q = np.tile(history.LEVELS * 3600.0, (3, 1))
    hours = np.array([[1.25] * 3, [0.75] * 3, [1.25] * 3])
    ratio = np.array([[1.0] * 3, [0.5] * 3, [1.0] * 3])
    c = policy.Costed(hours, hours * 100, np.array([True, True, False]), ratio)
    saving = policy.expected_saving(q, c, np.ones(3), np.ones((3, 1)))
    assert saving[:2] == pytest.approx([0.25, 0.75]) and math.isnan(saving[2])
    # against the mean over every draw and guess P(sooner) reads (the modes, column 0, not
    # among them; a guess not made left out): draws of 0.5 h and 1 h extra at 0.5 and 1.5
    # of the run, guesses of 1 h and 3 h
    one = policy.Costed(np.array([[9.0, 1.0, 2.5]]), np.ones((1, 3)), np.array([True]),
                        np.array([[9.0, 0.5, 1.5]]))  # hours at the logged run of 1 h
    brute = np.mean([0.5 - (f + g * (r - 1)) for f, r in ((0.5, 0.5), (1.0, 1.5))
                     for g in (1.0, 3.0)])
    assert policy.expected_saving(q[:1], one, np.ones(1), np.array([[1.0, np.nan, 3.0]])) \
        == pytest.approx([brute])

    def burst(p, gain_h):
        _, mask = policy.decisions([], [], np.array(p), np.zeros(3), np.zeros(3), np.zeros(3),
                                   policy.Costed(hours, hours, np.ones(3, bool), ratio),
                                   [gain_h], np.array([0.25, 0.75, 0.01]))[0]
        return mask.tolist()
    assert burst([0.95, 0.8, 1.0], 4.0) == [True, False, True]
    assert burst([0.9, 0.9, 1.0], 4.0) == [False, True, True]
    assert burst([0.9, 0.8, 1.0], 1.0) == [True, True, True]
    assert burst([0.9, 0.8, 1.0], 20.0) == [False, False, False]  # 0.01 h < 0.02 h
    # P 0 is a job not priced (no prediction, or a VM that does not take it): never burst,
    # whatever its saving
    _, mask = policy.decisions([], [], np.array([0.95, 0.0]), np.zeros(2), np.zeros(2),
                               np.zeros(2), policy.Costed(hours[:2], hours[:2],
                                                          np.ones(2, bool), ratio[:2]),
                               [4.0], np.array([0.25, 100.0]))[0]
    assert mask.tolist() == [True, False]


def test_a_log_without_requested_times_or_shorter_than_the_window_is_said(tmp_path):
    lines = [swf_line(i + 1, 600 * i, 60 * (i % 4), 1800, 1 + i % 2) for i in range(40)]
    path = tmp_path / "noreq.swf"
    path.write_text(SWF_HEAD + "\n".join(lines) + "\n")
    r = run.replay(logs.read_log(path), thresholds_h=[1.0], p_sooner=[0.9], draws=10)
    text = " ".join(r.problems)
    assert "the log has no requested times: no scheduler's estimate; the wait is predicted " \
        "from history alone" in text
    assert "the log has 40 jobs, fewer than the history window (1,000): each job is " \
        "predicted from the jobs before it" in text
    assert "fewer than 2,000 jobs had started by the log's end: no learned model" in text
    assert np.isnan(r.predicted.estimate).all() and len(r.rows)


def test_the_gain_policies_keep_their_thinned_share(tmp_path):
    """Every job waited 10 h, so the probability and gain policies burst: both have the
    share made later in the queue the others left (run.THINNED_FOR), though the pick is
    made from the probability policies alone; a threshold policy has none."""
    lines = [swf_line(i + 1, 3600 * i, 36000, 1800, 1, 3600) for i in range(80)]
    path = tmp_path / "long.swf"
    path.write_text(SWF_HEAD + "\n".join(lines) + "\n")
    r = run.replay(logs.read_log(path), thresholds_h=[1.0], p_sooner=[0.5], gain_h=[0.01],
                   draws=10)
    t = r.rows
    burst = t[t["policy"].isin(["probability", "gain"]) & (t["jobs_burst"] > 0)]
    assert set(burst["policy"]) == {"probability", "gain"}
    assert burst["share_later_if_others_left"].notna().all()
    assert t.loc[t["policy"] == "threshold", "share_later_if_others_left"].isna().all()


def test_the_command_says_bad_input_in_one_line(tmp_path):
    (tmp_path / "x.txt").write_text("hello\n")
    proc = run_cli("-m", "burstbench", "replay", "--log", str(tmp_path / "x.txt"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "expected SWF" in proc.stderr
    proc = run_cli("-m", "burstbench", "replay", "--log", str(five_jobs(tmp_path)),
                   "--thresholds", "2,1")
    assert proc.returncode == 2 and "must increase" in proc.stderr, proc.stderr
    for bad in ("0,0.5", "0.5,1", "1.5", "0.9,0.5"):
        proc = run_cli("-m", "burstbench", "replay", "--log", str(five_jobs(tmp_path)),
                       "--p-sooner", bad)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith("error: p_sooner must "), proc.stderr
    proc = run_cli("-m", "burstbench", "replay", "--log", str(five_jobs(tmp_path)),
                   "--p-sooner", "high")
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "error: --p-sooner must be a comma list of numbers, not 'high'"), proc.stderr
    proc = run_cli("-m", "burstbench", "replay", "--log", str(five_jobs(tmp_path)),
                   "--machine-nodes", "1")
    assert proc.returncode == 2 and "the machine's 1 nodes (given) are fewer than the " \
        "largest job's 2 (give --machine-nodes)" in proc.stderr, proc.stderr
    # a region no price names: said before the log is read (it was said only after the
    # whole replay, as "nothing replayed")
    proc = run_cli("-m", "burstbench", "replay", "--log", str(tmp_path / "never.swf"),
                   "--region", "Mars")
    assert (proc.returncode, proc.stderr) == (
        2, "error: --region 'Mars': no VM priced there (priced: East US, Japan East)\n")


# -- five jobs, by hand ----------------------------------------------------------------------

def test_five_jobs_queue_state_savings_and_costs_by_hand(tmp_path):
    """Capacity 2 nodes. Queue-state waits (node-seconds ahead / 2): J1 0; J2 (J1 running, 2
    nodes x 6,600 s left of its 7,200 requested; J2 cannot start) 6,600 s; J3 (J2 queued
    3,600 + J1 12,000) 7,800 s; J4 (J2 3,600 + J3 7,200 queued + J1 10,800) 10,800 s; J5 (J2,
    J3, J4 2 x 3,600 queued + J1 8,400) 13,200 s.  On the VM: 0.1 h deployment + 0.05 h each
    way of staging (180 GB at 1 GB/s) + run x 0.5; cost nodes x hours x 100 JPY + 100 JPY of
    shared pool + 180 GB x 10 JPY of egress."""
    lg = logs.read_log(five_jobs(tmp_path))
    j = lg.jobs
    nodes = j["procs"].to_numpy().astype(np.int64)
    s, w, r = (j[c].to_numpy(float) for c in ("submit", "wait", "run"))
    est = np.where(j["req_time"].notna(), j["req_time"], r)
    pred = predicted_wait(s, s + w, s + w + r, nodes, est, 2)
    assert pred.tolist() == [0, 6600, 7800, 10800, 13200]
    c = _hand_costed(nodes, r)
    vm_h = [0.2 + 0.5, 0.2 + 0.5, 0.2 + 1.0, 0.2 + 0.25, 0.2 + 600 / 7200]
    assert c.hours[:, 0] == pytest.approx(vm_h)
    jpy = [2 * 0.7 * 100 + 1900, 0.7 * 100 + 1900, 1.2 * 100 + 1900, 2 * 0.45 * 100 + 1900,
           (0.2 + 1 / 12) * 100 + 1900]
    assert c.jpy[:, 0] == pytest.approx(jpy)
    turnaround = (w + r) / 3600
    flow = nodes * r / 3600 * 44.3
    rows = {(k["policy"], k["threshold_h"]): policy.summary(m, turnaround, c, flow)
            for k, m in policy.decisions([0.5], [1.0, 3.0], np.zeros(5), np.zeros(5),
                                         pred / 3600, turnaround, c)}
    q1 = rows[("queue state", 1.0)]  # J2, J3, J4, J5
    saved = [5 / 6 + 1 - 0.7, 2 / 3 + 2 - 1.2, 2.5 + 0.5 - 0.45, 1 / 6 - (0.2 + 1 / 12)]
    assert q1["jobs_burst"] == 4
    assert q1["hours_saved"] == pytest.approx(sum(saved))          # 5.0333 h
    assert q1["jpy_spent"] == pytest.approx(sum(jpy[1:]))          # 7,908.33 JPY
    assert q1["median_saved_h"] == pytest.approx((saved[0] + saved[1]) / 2)  # 1.3 h
    assert q1["share_made_later"] == 0.25  # J5: 17 min on the VM after no wait at all
    assert q1["jpy_per_hour_saved"] == pytest.approx(sum(jpy[1:]) / sum(saved))
    assert q1["onprem_jpy_not_paid"] == pytest.approx(44.3 * (1 + 2 + 1 + 1 / 6))
    perfect = [v for (pol, _), v in rows.items() if pol == "perfect"][0]
    # sooner on the VM: J1 (1 h against 0.7), J2 (1.83 against 0.7), J3 (2.67 against 1.2),
    # J4 (3 against 0.45); not J5 (10 min against 17)
    assert perfect["jobs_burst"] == 4 and perfect["share_made_later"] == 0
    assert perfect["hours_saved"] == pytest.approx(0.3 + saved[0] + saved[1] + saved[2])
    q3 = rows[("queue state", 3.0)]  # J5 alone (3.67 h predicted): made later, no saving
    assert q3["jobs_burst"] == 1 and q3["hours_saved"] == pytest.approx(saved[3])
    assert math.isnan(q3["jpy_per_hour_saved"])


def _hand_costed(nodes: np.ndarray, run_s: np.ndarray, ratio: float = 0.5):
    """Every job on one hand-priced VM: 0.1 h to deploy, 180 GB each way at 1 GB/s, run x
    `ratio`, 100 JPY a node-hour, 100 JPY of pool, 10 JPY a GB of egress."""
    gb_per_s = 1e9 / 2 ** 20  # MiB/s
    klass = policy.LoggedClass("all", job.Data(180, 180), speed=ratio)
    tier = job.Tier("fast", 1e6, 1000.0)
    opt = burst.Option("vm", "here", "payg", 100.0, job.shared_pool([tier], "fast", 4, 40),
                       None, 10.0)
    return policy.cost_option(nodes, run_s / 3600, np.zeros(len(nodes), dtype=np.int64),
                              [klass], lambda cl, k: np.array([ratio, ratio]),
                              lambda cl: opt, None, np.array([gb_per_s, gb_per_s]),
                              np.array([0.1, 0.1]))


def test_decided_again_while_each_job_waits_by_hand():
    """Four 1-node jobs of 2 h on a VM as fast, ready in 0.2 h: sooner where the wait left
    passes 0.2 h (720 s).  A and B: half their predicted waits 0, the rest even over 0-10 h,
    P(sooner) 0.49 at the submit; 5 minutes on, the pile at 0 passed, 0.98: A (it waited
    3 h) bursts then, B (it started at 100 s) never.  C: even over 0-10 h, 0.98 at once:
    bursts at its submit, though it started at once (made later).  D: predicted 0-6 min,
    waited 3 h: at 5 min what is left is 0-1 min (P(sooner) 0); past every wait it was
    predicted, the wait so far e says P(more than 720 s) = e / (e + 720), 0.9 from 6,480 s:
    the first moment past it, 300 x 1.25^14 s.  Summed, each burst job saves what was left of
    its wait, 2 h of run, less 2.2 h."""
    h, lv = 3600.0, history.LEVELS
    pile = np.where(lv <= 0.5, 0.0, 10 * h * (lv - 0.5) / 0.5)
    q = np.vstack([pile, pile, 10 * h * lv, 360.0 * lv])
    wait = np.array([3 * h, 100.0, 0.0, 3 * h])
    run_s = np.full(4, 2 * h)
    c = _hand_costed(np.ones(4, np.int64), run_s, ratio=1.0)
    assert c.hours[:, 0] == pytest.approx([2.2] * 4)
    guess = np.full((4, len(run.RUN_LEVELS)), 2.0)
    at = policy.watched(q, c, run_s / h, guess, wait, [0.9])[0]
    d_at = 300.0 * 1.25 ** 14
    assert at[[0, 2, 3]] == pytest.approx([300.0, 0.0, d_at]) and np.isnan(at[1])
    assert policy.p_sooner(q, c, run_s / h, guess) == pytest.approx([0.49, 0.49, 0.98, 0.0])
    b = ~np.isnan(at)
    row = policy.summary(b, (wait + run_s - np.nan_to_num(at)) / h, c, np.zeros(4))
    assert row["jobs_burst"] == 3 and row["share_made_later"] == pytest.approx(1 / 3)
    assert row["hours_saved"] == pytest.approx((3 * h - 300 + 3 * h - d_at) / h - 3 * 0.2)


def test_a_burst_and_a_stay_by_hand():
    """The 8 jobs of tests/test_wait.py, logged as the textbook's rules ran them.  J4 (1
    node, 300 s, waited 180 s) bursts: on the VM 0.1 h + 0.1 h of staging + 150 s = 0.2417 h
    against 480 s on premise: 0.1083 h later, for 0.2417 x 100 + 100 + 1,800 JPY.  The stays,
    re-simulated by AccaSim's rules with J4 and without: J3 310 -> 190 s (its reservation at
    200 s is reached with nothing left to wait for), J5 20 -> 0, J8 40 -> 0: 180 s gained."""
    from test_wait import EASY_WAITS, eight_jobs

    s, n, r, q = eight_jobs()
    w = np.array(EASY_WAITS, float)
    c = _hand_costed(n, r)
    mask = np.zeros(8, dtype=bool)
    mask[3] = True
    row = policy.summary(mask, (w + r) / 3600, c, n * r / 3600 * 44.3)
    vm_h = 0.2 + 150 / 3600
    assert row["jobs_burst"] == 1 and row["share_made_later"] == 1.0
    assert row["hours_saved"] == pytest.approx(480 / 3600 - vm_h)
    assert row["jpy_spent"] == pytest.approx(vm_h * 100 + 100 + 1800)
    stays = Stays(s, n, r, q, 4, w)
    assert (stays.base_wait).tolist() == [0, 0, 310, 0, 20, 0, 0, 40]
    assert stays.gain_h(mask) == pytest.approx(180 / 3600)
    assert stays.gain_h(np.zeros(8, dtype=bool)) == 0


def test_a_burst_jobs_wait_had_the_others_left_by_hand(monkeypatch):
    """Three jobs of the whole 2-node machine, 100 s each, submitted at 0: A starts at
    once, B at 100 s, C at 200 s.  B and C burst.  Both sampled to stay (as SAMPLE_MIN
    has it, so few burst): the queue as logged, 100 and 200 s.  C alone sampled: with B
    gone it waits 100 s, not 200 (its logged 200 less the 100 the thinned queue saves).  On
    a VM taking 250 s, a job whose turnaround there is 200 s is made later, 300 s is not."""
    submit, nodes = np.zeros(3), np.full(3, 2, np.int64)
    run_s = np.full(3, 100.0)
    burst = np.array([False, True, True])
    vm_h = np.full(3, 250 / 3600)

    def stays() -> Stays:
        return Stays(submit, nodes, run_s, run_s, 2, np.array([0.0, 100.0, 200.0]))

    st = stays()
    assert st.base_wait.tolist() == [0, 100, 200]
    assert st.later_if_others_left(burst, vm_h) == 0.5
    assert [a.tolist() for a in st.thinned[st._key(burst)]] == [[1, 2], [100.0, 200.0]]
    monkeypatch.setattr(Stays, "_sample", staticmethod(lambda key, idx: idx[idx == 2]))
    st = stays()
    assert st.later_if_others_left(burst, vm_h) == 1.0
    assert [a.tolist() for a in st.thinned[st._key(burst)]] == [[2], [100.0]]
    assert math.isnan(st.later_if_others_left(np.zeros(3, dtype=bool), np.ones(3)))


def test_p_sooner_by_hand():
    """A wait spread evenly over 0-3,600 s.  A VM as fast as the queue's machine, 0.25 h of
    deployment and staging: sooner when the wait passes 900 s, P 0.75.  One twice as fast
    on a job guessed at 1 h: 0.25 h - 0.5 h < 0, sooner whatever the wait."""
    q = np.tile(history.LEVELS * 3600.0, (2, 1))
    hours = np.array([[1.25] * 3, [0.75] * 3])  # at the logged run of 1 h
    ratio = np.array([[1.0] * 3, [0.5] * 3])
    c = policy.Costed(hours, hours * 100, np.array([True, True]), ratio)
    p = policy.p_sooner(q, c, np.array([1.0, 1.0]), np.array([[1.0], [1.0]]))
    assert p == pytest.approx([0.75, 1.0])
    c.takes[0] = False
    assert policy.p_sooner(q, c, np.ones(2), np.ones((2, 1)))[0] == 0


def test_a_rankings_frontier_by_hand():
    """Five jobs ranked 0.9, 0.8, 0.8, 0.5, 0.3, saving 5, 4, -10, 2, -4 h, and one the VM
    takes with no score, saving 4 h: the perfect policy saves 15 h.  At no job later only
    the first goes: the second, tied with the third, goes with it (5 - 6 = -1 h at 1 in 3
    later).  At a third later: 5 + 4 - 10 + 2 = 1 h (1 in 4) against 5 h.  A job the VM
    does not take is not counted; one without a score is never burst; fewer than `least`
    jobs are not a policy."""
    score = np.array([0.9, 0.8, 0.8, 0.5, 0.3, 0.99, np.nan])
    saved = np.array([5.0, 4.0, -10.0, 2.0, -4.0, 100.0, 4.0])
    takes = np.array([True] * 5 + [False, True])
    got = policy.frontier(score, saved, takes, later_at=(0.0, 1 / 3, 0.4), least=1)
    assert got == pytest.approx([5 / 15, 5 / 15, 5 / 15])
    saved[2] = 1.0  # now nothing is later but the last: every prefix but the whole is a policy
    assert policy.frontier(score, saved, takes, later_at=(0.0, 0.2), least=1) == \
        pytest.approx([12 / 16, 12 / 16])
    assert math.isnan(policy.frontier(score, saved, takes, later_at=(0.0,), least=6)[0])


def test_five_jobs_through_the_decision_machines(tmp_path):
    """The whole path with data/reference's VMs: a VM without InfiniBand keeps the two-node
    jobs on premise, counted; the rows are one per VM x policy, the interface's columns
    first."""
    r = run.replay(logs.read_log(five_jobs(tmp_path)), thresholds_h=[1.0, 2.0],
                   p_sooner=[0.5, 0.9], gain_h=[1.0], draws=10)
    assert r.capacity == 2 and r.capacity_how == "the log's MaxNodes"
    assert r.left_on_premise["D96s_v5"] == 2 and r.left_on_premise["HB120rs_v3"] == 0
    # probability and watch x 2, gain, threshold and queue state x 2, perfect
    per_vm = 2 * 2 + 1 + 2 * 2 + 1
    assert len(r.rows) == len(r.left_on_premise) * per_vm
    assert list(r.rows.columns[:len(run.COLUMNS)]) == list(run.COLUMNS)
    hb = r.rows[(r.rows["vm"] == "HB120rs_v3") & (r.rows["policy"] == "queue state")]
    assert hb["jobs_burst"].tolist() == [4, 3]
    assert (hb["hours_saved_p10"] <= hb["hours_saved_p90"]).all()
    assert (r.rows["perfect_hours_saved"] >= r.rows["hours_saved"] - 1e-9).all()
    assert r.rows.loc[~r.rows["policy"].isin(["probability", "watch"]),
                      "p_sooner_min"].isna().all()
    f = r.frontier
    assert list(f.columns) == ["vm", "ranked_by"] + [
        f"of_perfect_at_later_{x:g}" for x in policy.FRONTIER_LATER]
    assert f.groupby("vm", sort=False)["ranked_by"].apply(list).tolist() == [
        ["P(sooner)", "expected saving / P(later)", "predicted median wait",
         "queue state"]] * len(r.left_on_premise)
    shares = f.iloc[:, 2:].to_numpy(dtype=float)
    assert np.all(np.isnan(shares) | ((shares >= -1) & (shares <= 1 + 1e-9)))


def test_a_watch_row_counts_what_was_left_of_each_burst_jobs_wait(tmp_path, monkeypatch):
    """Watch decided as the probability policy at each level but half an hour after the
    submit (policy.watched stubbed): each watch row bursts the probability row's jobs and
    saves half an hour a job less, at its own level, on every VM."""
    def half_an_hour_late(q, c, run_h, guess_h, wait_s, levels, *a, **kw):
        p = policy.p_sooner(q, c, run_h, guess_h)
        return np.array([np.where(c.takes & (p >= lv), 1800.0, np.nan) for lv in levels])
    monkeypatch.setattr(policy, "watched", half_an_hour_late)
    r = run.replay(logs.read_log(five_jobs(tmp_path)), thresholds_h=[1.0],
                   p_sooner=[0.5, 0.9], gain_h=[1.0], draws=10)
    t = r.rows.set_index(["vm", "policy", "p_sooner_min"])
    checked = 0
    for vm in r.rows["vm"].unique():
        for lv in (0.5, 0.9):
            w, p = t.loc[(vm, "watch", lv)], t.loc[(vm, "probability", lv)]
            assert w["jobs_burst"] == p["jobs_burst"]
            assert w["hours_saved"] == pytest.approx(p["hours_saved"] - 0.5 * p["jobs_burst"])
            assert w["jpy_spent"] == pytest.approx(p["jpy_spent"])
            checked += int(p["jobs_burst"] > 0)
    assert checked >= 2  # some level bursts a job somewhere


def test_the_replay_says_which_run_each_vms_figures_come_from(tmp_path):
    """A newer local ping-pong run whose table no longer matches its manifest: the replay,
    like the decision, prices from the complete run and its notes say so."""
    import pandas as pd

    runs = report_root(tmp_path, committed=True) / "data" / "runs"
    old, new = newer_run(runs / "local", "pingpong")
    table = pd.read_csv(new / "pingpong.csv", dtype={"run_id": str})
    table.iloc[: len(table) // 2].to_csv(new / "pingpong.csv", index=False)
    r = run.replay(logs.read_log(five_jobs(tmp_path)), runs_dir=runs, thresholds_h=[1.0],
                   draws=10)
    assert any(p.startswith(f"local: pingpong's figures of merit (cost, burst decision) come "
                            f"from its newest complete run {old}, not from {new.name} "
                            "(incomplete: ") for p in r.problems), r.problems
    assert len(r.rows)


def test_the_section_says_a_missing_log_and_draws_a_present_one(tmp_path):
    from burstbench.replay import report

    s = report.replay_report(str(tmp_path / "nowhere.swf"), figures_dir=tmp_path / "f")
    assert not s.entries and "no log at" in s.problems[0]
    s = report.replay_report(str(five_jobs(tmp_path)), figures_dir=tmp_path / "f",
                             thresholds_h=[1.0, 2.0], draws=10)
    files = sorted(f for e in s.entries for f in e.files)
    assert files == ["replay_calibration.csv", "replay_calibration.md",
                     "replay_calibration.png", "replay_calibration.svg", "replay_choices.csv",
                     "replay_choices.md", "replay_curve.png", "replay_curve.svg",
                     "replay_policies.csv", "replay_policies.md", "replay_predictors.csv",
                     "replay_predictors.md"]
    assert all("Hand-written centre" in e.caption for e in s.entries)
    # five jobs are too few to read a share made later on: the closest, and no pick
    assert (tmp_path / "f" / "replay_choices.md").read_text().startswith(
        "No pick: no policy on P(sooner) bursts at least 10 jobs, makes at most 10% of them "
        "later and saves hours; keep the jobs on premise. The closest would burst a job to ")


# -- the real Slurm cluster's own jobs through sacct ---------------------------------------



def test_the_clusters_own_jobs_through_sacct(slurm, tmp_path):
    """Accounting storage is off on the test cluster (no slurmdbd), so sacct reads its job
    completion log (jobcomp/filetxt): `sacct -c --parsable2`, the same columns.  Slurm
    22.05's reader of that log prints each job's start as its Submit (the log's SubmitTime
    is not read back), so these waits are 0: the path is proven, not the waits."""
    ids = []
    for nodes, secs in ((1, 1), (2, 2), (1, 3)):
        out = slurm.run("sbatch", "-N", str(nodes), "-t", "5", "--wrap", f"sleep {secs}",
                        "-o", str(tmp_path / "%j.out"), check=True).stdout
        ids.append(out.split()[-1])
    for i in ids:
        assert slurm.wait_job(i)["JobState"] == "COMPLETED"
    fmt = ",".join(logs.SACCT_FIELDS)
    proc = slurm.run("sacct", "-c", "--parsable2", f"--format={fmt}", "-S", "2000-01-01",
                     "-E", "now", check=True)
    log = tmp_path / "sacct.txt"
    log.write_text(proc.stdout)
    lg = logs.read_log(log)
    assert lg.fmt == "sacct"
    j = lg.jobs.set_index("job").loc[ids]
    assert j["nodes"].tolist() == [1, 2, 1]
    assert (j["run"] >= [1, 2, 3]).all() and (j["run"] < 60).all(), j
    assert (j["req_time"] == 300).all() and (j["wait"] >= 0).all()
    cli = run_cli("-m", "burstbench", "replay", "--log", str(log), "--thresholds", "0,1",
                  "--draws", "10")
    assert cli.returncode == 0, cli.stderr
    # three jobs are too few for a pick (report.MIN_PICK_JOBS): no pick, said
    assert re.search(r"\d+ jobs\nNo pick: no policy on P\(sooner\) bursts", cli.stdout), \
        cli.stdout


def test_job_classes_map_jobs_to_a_speed_and_refuse_typos(tmp_path):
    with pytest.raises(ParamError, match="unknown key 'nmae' .did you mean name"):
        policy.job_classes([{"nmae": "x"}], 1, 1)
    with pytest.raises(ParamError, match="speed must be 'memory', 'biccg' or a positive"):
        policy.job_classes([{"speed": "fast"}], 1, 1)
    cls = policy.job_classes([{"name": "small", "max_nodes": 1, "speed": "biccg"},
                              {"name": "rest", "speed": 2.0, "input_gb": 5}], 10, 30)
    assert policy.assign(np.array([1, 2, 1]), np.zeros(3), cls).tolist() == [0, 1, 0]
    assert cls[1].data == job.Data(5, 30)
    r = run.replay(logs.read_log(five_jobs(tmp_path)), thresholds_h=[1.0], p_sooner=[0.9],
                   draws=10, classes=[{"name": "rest", "speed": 2.0}])
    slow = r.rows[(r.rows["vm"] == "HB120rs_v3") & (r.rows["policy"] == "perfect")].iloc[0]
    # J4 alone: 2.5 h wait + 0.5 h run on premise, against ~0.35 h of deployment and
    # staging + 1 h (2 x its run) on the VM
    assert slow["jobs_burst"] == 1 and 1.4 < slow["hours_saved"] < 1.8


def test_run_guesses_cover_whole_batches_that_crash():
    """Users submit batches of 50 jobs of 24 h at once; a batch runs 0.9 of its request, or
    (two in five) crashes in under 2 min: below every run its user had had, or above, after
    a crashed batch.  The guesses at 10% and 90% cover their level within 0.03 (they span 0
    to the requested time and are recalibrated in groups of their median; before, 0.22 and
    0.79, as on RICC, where 37% of the jobs guessed at 12 h and more ran under their 10%
    guess).  The median falls between the two kinds of run: it covers at least the 40%
    crashed."""
    rng = np.random.default_rng(4)
    batches, size = 120, 50
    user = np.repeat(rng.integers(0, 6, batches), size)
    submit = np.repeat(np.sort(rng.uniform(0, batches * 20 * 3600, batches)), size)
    req = np.full(batches * size, 24 * 3600.0)
    crash = np.repeat(rng.uniform(size=batches) < 0.4, size)
    run_s = np.where(crash, rng.uniform(10, 120, len(req)),
                     0.9 * req * rng.uniform(0.95, 1.05, len(req)))
    start = submit + rng.uniform(0, 600, len(req))
    g = run.run_guess(submit, start, run_s, req, np.full(len(req), 0.01), user)
    later = slice(20 * size, None)  # once there is a history
    cover = np.array([np.mean(run_s[later] <= g[later, k]) for k in range(5)])
    assert run.RUN_LEVELS == (0.1, 0.3, 0.5, 0.7, 0.9)
    assert abs(cover[0] - 0.1) < 0.03 and abs(cover[4] - 0.9) < 0.03, cover
    assert cover[2] >= np.mean(crash[later]) - 0.01, cover


def test_a_truncated_log_leaves_every_earlier_run_guess_as_it_was():
    """The run-time guess reads only what had ended by each submit: cut the log after job
    k and every guess up to k is the same, bit for bit (the recalibration's groups
    included)."""
    from test_wait import synthetic

    s, n, w, r, q, u = synthetic(3000, seed=7)
    share = n / 64
    whole = run.run_guess(s, s + w, r, q, share, u)
    for k in (900, 2222):
        part = run.run_guess(s[:k], (s + w)[:k], r[:k], q[:k], share[:k], u[:k])
        assert np.array_equal(part, whole[:k], equal_nan=True), k
