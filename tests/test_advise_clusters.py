"""burstbench advise on this suite's own clusters: a real Slurm (an ``onprem`` partition on
node n1, a ``cloud`` partition on n2) and a real OpenPBS (queue ``workq`` on n1, ``cloud`` on
n2).  On each: a long job and a short one fill the on-premise node; the job behind them that
needs the whole node is advised "burst" (its predicted wait about 2 h, the scheduler's own
estimate 2 h), a job the scheduler starts in minutes "stay" (its estimate a veto: the
history's simulation counts nodes, not a node's CPUs, and predicts it about 3 h out), a
job its owner pinned "stay"; --apply moves the first,
and it runs on the cloud node.  The history is the cluster's own finished jobs.  On Slurm,
the ledger survives ``kill -9`` at either side of a move."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scheduler_cluster import session, wait_until
from slurm_cluster import SlurmCluster, missing_programs

from burstbench.advise.advice import duration_text

ROOT = Path(__file__).resolve().parents[1]
#: The test jobs' class: no data to stage, as fast on a VM as on premise, so that the VM is
#: sooner exactly when the wait passes its deployment (4-10 min).
CLASSES = [{"partition": "*", "class": "test jobs", "speed": 1.0, "input_gb": 0,
            "output_gb": 0}]
VM = "HB120-16rs_v3"


@pytest.fixture(scope="module")
def slurm_burst(tmp_path_factory):
    """Slurm with an on-premise and a cloud partition, the backfill scheduler estimating
    every second; the tests' marks (slurm, slow) come from conftest's FIXTURE_MARKERS."""
    missing = missing_programs()
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm-advise"),
                           partitions={"onprem": ("n1",), "cloud": ("n2",),
                                       "asleep": ("c1",)},
                           future=("c1",), backfill_s=1)
    yield from session(cluster, "Slurm", "BURSTBENCH_REQUIRE_SLURM",
                       f"not installed ({', '.join(missing)}): apt-get install slurm-wlm munge"
                       if missing else "")


def sbatch(c: SlurmCluster, *opts: str, cmd: str = "sleep 3600") -> str:
    out = c.run("sbatch", "--parsable", f"--chdir={c.root}", "-o", f"{c.root}/job-%j.out",
                *opts, "--wrap", cmd, check=True).stdout
    return out.strip().split(";")[0]


def squeue(c: SlurmCluster) -> dict[str, dict]:
    data = json.loads(c.run("squeue", "--json", check=True).stdout)
    return {str(j["job_id"]): j for j in data["jobs"]}


def advise(env: dict, *extra: str, timeout: float = 300, prefix: tuple = ()
           ) -> subprocess.CompletedProcess:
    argv = [*prefix, sys.executable, "-m", "burstbench", "advise", *extra]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=os.environ | env)


@pytest.fixture(scope="module")
def slurm_queue(slurm_burst, tmp_path_factory):
    """The queue: 3 finished jobs (the history), a 2-hour job and a 5-minute job filling n1's
    two CPUs, then `burst` (needs both), `pinned` (the same, --comment=burst:no) and `soon`
    (one CPU, 10 min: backfilled when the short one ends); the classes file; every pending
    job's expected start set."""
    c = slurm_burst
    for jid in [sbatch(c, "-p", "onprem", "-n", "1", "-t", "1", cmd="true") for _ in range(3)]:
        c.wait_job(jid, timeout=60)
    long_ = sbatch(c, "-p", "onprem", "-n", "1", "-t", "120")
    short = sbatch(c, "-p", "onprem", "-n", "1", "-t", "5")
    for jid in (long_, short):
        c.wait_job(jid, ("RUNNING",), timeout=60)
    jobs = {"burst": sbatch(c, "-p", "onprem", "-n", "2", "-t", "30"),
            "pinned": sbatch(c, "-p", "onprem", "-n", "2", "-t", "30", "--comment=burst:no"),
            "soon": sbatch(c, "-p", "onprem", "-n", "1", "-t", "10")}
    wait_until(lambda: all(squeue(c)[j]["start_time"] > 0 for j in jobs.values()), 60,
               "the backfill scheduler's expected starts")
    folder = tmp_path_factory.mktemp("advise")
    classes = folder / "classes.yaml"
    classes.write_text(json.dumps(CLASSES))
    return c, jobs, folder, ["--scheduler", "slurm", "--cloud", "cloud", "--classes",
                             str(classes), "--min-history", "3"]


def test_slurm_advice_bursts_the_job_behind_a_long_one_and_keeps_the_one_starting_soon(
        slurm_queue):
    c, jobs, folder, base = slurm_queue
    p = advise(c.env, *base, "--json", "--save", str(folder / "snapshot.json"))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    basis, t = out["basis"], {r["job"]: r for r in out["jobs"]}
    assert basis["estimate"].startswith("squeue --json")
    assert basis["history"].startswith(f"the job completion log {c.root}/log/jobcomp.txt")
    assert basis["jobs_used"] == {"finished": 3, "running": 2, "pending": 3}
    assert "UNCALIBRATED" not in basis["wait"]
    b, s, pin = t[jobs["burst"]], t[jobs["soon"]], t[jobs["pinned"]]
    assert (b["verdict"], b["estimate_from"]) == ("burst", "scheduler"), b
    assert 1.8 < b["estimate_h"] <= 2.0 and b["p_sooner"] >= 0.8
    assert (s["verdict"], s["estimate_from"]) == ("stay", "scheduler"), s
    assert s["estimate_h"] <= 5 / 60
    assert s["why"].startswith("the scheduler expects it to start in "
                               f"{duration_text(3600 * s['estimate_h'])}, within the VM's "
                               "break-even wait of "), s
    assert (pin["verdict"], pin["why"]) == ("stay", "pinned by its owner")
    # the table: what it rests on, then one line a job
    p = advise(c.env, *base)
    assert p.returncode == 0, p.stderr
    print(p.stdout)  # the note pastes it
    assert "estimate: squeue --json" in p.stdout and "3 finished jobs" in p.stdout
    line = next(s for s in p.stdout.splitlines() if s.startswith(jobs["burst"] + " "))
    assert "burst (P(sooner)" in line
    # the snapshot saved reads back offline, with the same verdicts
    p = advise({}, "--snapshot", str(folder / "snapshot.json"), "--classes", base[5],
               "--cloud", "cloud", "--min-history", "3", "--json")
    assert p.returncode == 0, p.stderr
    assert {r["job"]: r["verdict"] for r in json.loads(p.stdout)["jobs"]} == \
        {r["job"]: r["verdict"] for r in out["jobs"]}
    # the gain rule on the same queue: the job behind the 2-hour one is expected to save
    # hours (at P(later) <= 0.2, 4 h x P(later) asks under an hour); the backfilled one
    # stays on the scheduler's estimate, whatever the saving predicted
    p = advise({}, "--snapshot", str(folder / "snapshot.json"), "--classes", base[5],
               "--cloud", "cloud", "--min-history", "3", "--json", "--gain-h", "4")
    assert p.returncode == 0, p.stderr
    g = {r["job"]: r for r in json.loads(p.stdout)["jobs"]}
    gb, gs = g[jobs["burst"]], g[jobs["soon"]]
    assert gb["verdict"] == "burst" and gb["why"].startswith("expected saving ") and \
        gb["saving_h"] > 1.0, gb
    assert (gs["verdict"], gs["why"]) == ("stay", s["why"]), gs


def test_slurm_formatted_listing_reads_as_its_json(slurm_queue):
    """The fallback for a Slurm without squeue --json: the real squeue's -o listing, its
    fields apart by the unit separator, reads the same jobs as the JSON."""
    from burstbench.advise import slurm

    c, jobs, _, _ = slurm_queue
    now = time.time()
    out = c.run("squeue", "-h", "-a", "-t", "PENDING,RUNNING", "-o", slurm.SQUEUE_FORMAT,
                check=True).stdout
    listed = {j.id: j for j in (slurm._from_line(s, now) for s in out.splitlines() if s)
              if j is not None}
    by_json = {j.id: j for j in (slurm._from_json(d, now) for d in squeue(c).values())
               if j is not None}
    assert set(listed) == set(by_json) >= set(jobs.values())
    for jid, j in by_json.items():
        f = listed[jid]
        assert (f.state, f.user, f.partition, f.nodes, f.cpus, f.pinned, f.unmovable,
                f.limit_s, f.submit) == (j.state, j.user, j.partition, j.nodes, j.cpus,
                                         j.pinned, j.unmovable, j.limit_s, j.submit), jid


def test_slurm_apply_refuses_a_cloud_partition_that_does_not_exist(slurm_queue):
    c, jobs, folder, base = slurm_queue
    ledger = folder / "ledger.jsonl"
    p = advise(c.env, *[a if a != "cloud" else "nowhere" for a in base], "--vm", VM,
               "--apply", "--ledger", str(ledger))
    assert (p.returncode, p.stderr.strip()) == (
        2, "error: --cloud 'nowhere': no such partition (asleep, cloud, onprem); nothing moved")
    assert not ledger.exists() or ledger.read_text() == ""
    assert c.job(jobs["burst"])["Partition"] == "onprem"


def test_slurm_advice_to_a_partition_whose_nodes_sinfo_does_not_list(slurm_queue):
    """A cloud partition of powered-down nodes (here State=FUTURE; a cloud's are CLOUD):
    sinfo lists none of them, and the partition is still found (scontrol's): the others'
    nodes, n1 and n2, are the on-premise ones.  The simulation, one pool of the two nodes,
    then predicts the job behind the 2-hour one minutes out, and it stays: the scheduler's 2
    hours are only a veto (docs/advise.md, Limits)."""
    c, jobs, _, base = slurm_queue
    assert "c1" not in c.run("sinfo", "-h", "-a", "-N", "-o", "%N", check=True).stdout
    p = advise(c.env, *[a if a != "cloud" else "asleep" for a in base], "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert (out["basis"]["cloud"], out["basis"]["on_premise_nodes"]) == ("asleep", 2)
    # `soon` is backfilled when the 5-minute job ends, which a slow run of this module's
    # tests (one worker, in order) can pass before this one: it may have left the queue
    assert {jobs["burst"], jobs["pinned"]} <= {r["job"] for r in out["jobs"]} \
        <= set(jobs.values())
    b = next(r for r in out["jobs"] if r["job"] == jobs["burst"])
    assert b["estimate_h"] > 1.5 and b["wait_q50_h"] < 0.5, b
    assert b["verdict"] == "stay" and b["why"].startswith("P(sooner) "), b


def test_slurm_apply_within_an_exhausted_budget_moves_nothing(slurm_queue):
    c, jobs, folder, base = slurm_queue
    p = advise(c.env, *base, "--vm", VM, "--apply", "--budget-jpy", "1", "--ledger",
               str(folder / "ledger.jsonl"))
    assert p.returncode == 0, p.stderr
    assert "budget exhausted: 0 of 1 JPY committed today; job " + jobs["burst"] in p.stdout
    assert c.job(jobs["burst"])["Partition"] == "onprem"


def test_slurm_apply_moves_the_burst_job_once_and_it_runs_in_the_cloud(slurm_queue):
    c, jobs, folder, base = slurm_queue
    ledger = folder / "ledger.jsonl"
    p = advise(c.env, *base, "--vm", VM, "--apply", "--max-jpy", "100000", "--ledger",
               str(ledger))
    assert p.returncode == 0, p.stderr
    assert f"job {jobs['burst']}: moved to cloud ({VM}, P(sooner) " in p.stdout
    info = c.wait_job(jobs["burst"], ("RUNNING",), timeout=60)
    assert (info["Partition"], info["NodeList"]) == ("cloud", "n2")
    events = [(r["event"], r["job"]) for r in map(json.loads, ledger.read_text().splitlines())]
    assert events == [("intent", jobs["burst"]), ("done", jobs["burst"])]
    assert c.job(jobs["pinned"])["Partition"] == "onprem"
    assert c.job(jobs["soon"])["Partition"] == "onprem"
    # again: nothing left to move, nothing written
    p = advise(c.env, *base, "--vm", VM, "--apply", "--ledger", str(ledger))
    assert p.returncode == 0, p.stderr
    assert len(ledger.read_text().splitlines()) == 2


def _killed_at(c: SlurmCluster, base: list[str], ledger: Path, point: str, jid: str,
               reached) -> None:
    """advise --apply paused at `point` (burstbench.advise.command.PAUSE_ENV), killed with
    SIGKILL once `reached()`."""
    proc = subprocess.Popen([sys.executable, "-m", "burstbench", "advise", *base, "--vm", VM,
                             "--apply", "--ledger", str(ledger)], cwd=ROOT,
                            env=os.environ | c.env | {"BURSTBENCH_ADVISE_PAUSE": point},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(reached, 120, f"advise --apply at {point} for job {jid}",
                   lambda: "" if proc.poll() is None else f"advise exited {proc.returncode}")
    finally:
        proc.kill()
        proc.wait(30)


def test_slurm_ledger_survives_kill_9_before_and_after_the_move(slurm_queue):
    c, jobs, folder, base = slurm_queue
    ledger = folder / "ledger-killed.jsonl"

    def records(jid: str) -> list[str]:
        if not ledger.exists():
            return []
        return [r["event"] for r in map(json.loads, ledger.read_text().splitlines())
                if r["job"] == jid]

    # killed after writing the intent, before scontrol: the job is still on premise; the
    # next run finds it so, says so, and moves it, once
    first = sbatch(c, "-p", "onprem", "-n", "2", "-t", "30")
    wait_until(lambda: squeue(c)[first]["start_time"] > 0, 60, "the expected start")
    _killed_at(c, base, ledger, "intent", first, lambda: records(first) == ["intent"])
    assert c.job(first)["Partition"] == "onprem"
    p = advise(c.env, *base, "--vm", VM, "--apply", "--ledger", str(ledger))
    assert p.returncode == 0, p.stderr
    assert f"job {first}: found pending in onprem after an interrupted run: the move never " \
           "ran" in p.stdout and f"job {first}: moved to cloud" in p.stdout
    assert records(first) == ["intent", "not done", "intent", "done"]
    assert c.job(first)["Partition"] == "cloud"
    # killed after scontrol moved it, before the outcome was written: the next run finds it
    # in the cloud and records it done, without moving it again
    second = sbatch(c, "-p", "onprem", "-n", "2", "-t", "30")
    wait_until(lambda: squeue(c)[second]["start_time"] > 0, 60, "the expected start")
    _killed_at(c, base, ledger, "moved", second,
               lambda: c.job(second).get("Partition") == "cloud")
    assert records(second) == ["intent"]
    p = advise(c.env, *base, "--vm", VM, "--apply", "--ledger", str(ledger))
    assert p.returncode == 0, p.stderr
    assert f"job {second}: found in cloud after an interrupted run: the move ran" in p.stdout
    assert records(second) == ["intent", "done"]
    assert c.job(jobs["pinned"])["Partition"] == "onprem"
    print(ledger.read_text())  # the note pastes it


def test_slurm_watch_repeats_and_stops_cleanly_on_sigterm(slurm_queue):
    c, jobs, folder, base = slurm_queue
    out = folder / "watch.out"
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "burstbench", "advise", *base,
                                 "--watch", "1"], cwd=ROOT, env=os.environ | c.env,
                                stdout=f, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: out.read_text().count(", read at ") >= 2, 120, "two rounds",
                   lambda: "" if proc.poll() is None else f"advise exited {proc.returncode}")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, err.strip().splitlines()[-1]) == (0, "stopped (SIGTERM)")


# -- PBS ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pbs_burst(tmp_path_factory):
    """OpenPBS with queue workq on n1 and queue cloud on n2, the scheduler estimating starts
    (strict ordering, backfill); the tests' marks (pbs, slow) from FIXTURE_MARKERS."""
    import pbs_cluster

    cluster = pbs_cluster.PbsCluster(tmp_path_factory.mktemp("pbs-advise"))
    for c in session(cluster, "PBS", "BURSTBENCH_REQUIRE_PBS", pbs_cluster.why_not()):
        c.qmgr("create queue cloud queue_type=execution,enabled=true,started=true")
        c.qmgr("set node n2 queue=cloud")
        c.estimate_starts()
        yield c


def qsub(c, *opts: str, cmd: str = "3600") -> str:
    work = c.root / "work"
    return c.run("qsub", "-o", str(work), "-e", str(work), *opts, "--", "/bin/sleep", cmd,
                 cwd=work, check=True).stdout.strip()


def test_pbs_advice_and_apply_move_the_job_behind_a_long_one_to_the_cloud_queue(
        pbs_burst, tmp_path):
    c = pbs_burst
    for jid in [qsub(c, "-l", "select=1:ncpus=1", "-l", "walltime=00:01:00", cmd="1")
                for _ in range(3)]:
        c.wait_job(jid, timeout=90)
    long_ = qsub(c, "-l", "select=1:ncpus=1", "-l", "walltime=02:00:00")
    short = qsub(c, "-l", "select=1:ncpus=1", "-l", "walltime=00:05:00")
    for jid in (long_, short):
        c.wait_job(jid, ("R",), timeout=60)
    burst = qsub(c, "-l", "select=1:ncpus=2", "-l", "walltime=00:30:00")
    pinned = qsub(c, "-v", "BURSTBENCH_BURST=no", "-l", "select=1:ncpus=2", "-l",
                  "walltime=00:30:00")
    soon = qsub(c, "-l", "select=1:ncpus=1", "-l", "walltime=00:10:00")
    wait_until(lambda: all(c.job(j).get("estimated", {}).get("start_time")
                           for j in (burst, pinned, soon)), 90, "PBS's estimated starts")
    classes = c.root / "work" / "classes.yaml"
    classes.write_text(json.dumps(CLASSES))
    base = ["--scheduler", "pbs", "--cloud", "cloud", "--classes", str(classes),
            "--min-history", "3"]
    ns = ["nsenter", "-t", str(c.holder.pid), "-m", "-n", "--"]
    env = c.env(user=False)
    p = advise(env, *base, "--json", prefix=tuple(ns))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    basis, t = out["basis"], {r["job"]: r for r in out["jobs"]}
    assert basis["estimate"].startswith("qstat -f -F json")
    assert basis["history"].startswith("PBS accounting") and \
        basis["jobs_used"]["finished"] >= 3, basis
    assert (t[burst]["verdict"], t[burst]["estimate_from"]) == ("burst", "scheduler"), t
    assert 1.8 < t[burst]["estimate_h"] <= 2.0
    assert t[soon]["verdict"] == "stay" and t[soon]["estimate_h"] <= 5 / 60
    assert (t[pinned]["verdict"], t[pinned]["why"]) == ("stay", "pinned by its owner")
    # a queue that does not exist: refused before anything moves
    ledger = c.root / "work" / "ledger.jsonl"
    p = advise(env, *[a if a != "cloud" else "nowhere" for a in base], "--vm", VM,
               "--apply", "--ledger", str(ledger), prefix=tuple(ns))
    assert (p.returncode, p.stderr.strip()) == (
        2, "error: --cloud 'nowhere': no such queue (cloud, workq); nothing moved")
    p = advise(env, *base, "--vm", VM, "--apply", "--ledger", str(ledger), prefix=tuple(ns))
    assert p.returncode == 0, p.stderr
    assert f"job {burst}: moved to cloud" in p.stdout, p.stdout
    info = c.wait_job(burst, ("R",), timeout=60)
    assert (info["queue"], info["exec_host"].split("/")[0]) == ("cloud", "n2")
    assert c.job(pinned)["queue"] == "workq"
    events = [(r["event"], r["job"]) for r in map(json.loads, ledger.read_text().splitlines())]
    assert events == [("intent", burst), ("done", burst)]

