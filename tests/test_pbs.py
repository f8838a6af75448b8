"""The batch path through a real OpenPBS (PBS Professional) on this host: the study's scheduler.

The cluster (server, scheduler, comm, two MoMs as nodes n1 and n2, PBS's datastore;
tests/pbs_cluster.py) is built once into a cache, started once for this module
and stopped at its end, whatever happened.  Jobs are submitted as an ordinary
user, as PBS requires.  Where PBS cannot be built or started here the module is
skipped with the reason, unless BURSTBENCH_REQUIRE_PBS=1 (set by .ci/run) makes
that a failure.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
from conftest import run_cli
from pbs_cluster import PbsCluster, why_not
from scheduler_cluster import (
    ENDLESS,
    SMOKE,
    none_twice,
    params_file,
    session,
    statuses,
    stored_keys,
    stored_once,
    the_run,
    wait_stored,
)


@pytest.fixture(scope="module")
def pbs(tmp_path_factory):
    yield from session(PbsCluster(tmp_path_factory.mktemp("pbs")), "PBS",
                       "BURSTBENCH_REQUIRE_PBS", why_not())


@pytest.fixture(autouse=True)
def _no_job_outlives_its_test(pbs):
    """Whatever a test did, passed or failed: its jobs deleted and no process of theirs left
    when the next begins (a failed rerun test left its sweep measuring, holding the host's
    lock, and the next two tests failed on that lock instead of on what they test)."""
    yield
    pbs.clean()


def study(pbs: PbsCluster, name: str, values: dict) -> tuple[Path, Path]:
    """A folder of the job user's with a params file (smoke.yaml and `values`, storage
    measured there); the params file and the runs folder."""
    work = pbs.workdir(name)
    params = params_file(work, name, {"vm": name, "storage_targets": [
        {"name": "local", "path": str(work / "storage")}]} | values)
    return params, work / "runs"


def jobs(pbs: PbsCluster, params: Path, nodes: int, runs: Path, *extra: str):
    """`burstbench jobs --scheduler pbs --submit`, run by the job user (root cannot submit)."""
    return pbs.run(sys.executable, "-m", "burstbench", "jobs", "--scheduler", "pbs",
                   "--params", str(params), "--nodes", str(nodes), "--runs-dir", str(runs),
                   "--output", str(params.with_suffix(".pbs")), "--submit", *extra)


def submit(pbs: PbsCluster, params: Path, nodes: int, runs: Path, *extra: str) -> str:
    """Submitted as the job user; the job id qsub printed."""
    proc = jobs(pbs, params, nodes, runs, *extra)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("submitted: "), proc.stdout
    return proc.stdout.split()[-1]


def job_output(runs: Path, vm: str, jobid: str, timeout: float = 120) -> str:
    """The job's output file (-j oe: stdout and stderr), once PBS has delivered it."""
    f = runs / vm / f"{jobid}.OU"
    end = time.monotonic() + timeout
    while not f.exists() and time.monotonic() < end:  # staged out just after the job ends
        time.sleep(0.3)
    return f.read_text() if f.exists() else f"(no output file {f})"


def finished(pbs: PbsCluster, jobid: str, runs: Path, vm: str, timeout: float = 400,
             exit_status: int = 0) -> dict:
    info = pbs.wait_job(jobid, timeout=timeout)
    assert info.get("Exit_status") == exit_status, (info.get("Exit_status"),
                                                    info.get("comment"),
                                                    job_output(runs, vm, jobid)[-3000:])
    return info


def wait_for_parts(runs: Path, vm: str, jobid: str, n: int, timeout: float = 180) -> dict:
    """Once the job has stored `n` configurations: {part file name: its bytes}."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = list((runs / vm).glob("*/triad.parts/*.json"))
        if len(found) >= n:
            return {p.name: p.read_bytes() for p in found}
        time.sleep(0.2)
    pytest.fail(f"job {jobid} stored fewer than {n} configurations in {timeout:g} s")


def gone(pbs: PbsCluster, jobid: str, timeout: float = 120) -> bool:
    """Whether no process of the job is left (waiting `timeout` s for them to end)."""
    end = time.monotonic() + timeout
    while pbs.job_pids(jobid) and time.monotonic() < end:
        time.sleep(0.3)
    return not pbs.job_pids(jobid)


#: What an interrupted sweep says in the job's output: what it kept and how to resume.
HINT = re.compile(r"^interrupted by SIG(TERM|INT): \d+ of \d+ configurations are stored in "
                  r"(\S+); run the same command again \(or pass run_id=\S+\) to resume$", re.M)



def test_two_nodes_on_hosts_of_their_own(pbs):
    nodes = pbs.pbsnodes()
    assert [nodes[n]["state"] for n in pbs.nodes] == ["free", "free"]
    assert [nodes[n]["resources_available"]["ncpus"] for n in pbs.nodes] == [2, 2]
    assert [nodes[n]["resources_available"]["host"] for n in pbs.nodes] == ["n1", "n2"]


def test_root_cannot_submit_and_the_user_can(pbs):
    """PBS's own rule, which is why every job here is the job user's."""
    proc = pbs.run("qsub", "--", "/bin/true", user=False)
    assert proc.returncode != 0 and "Bad UID for job execution" in proc.stderr
    proc = pbs.run("qsub", "-W", "block=true", "--", "/bin/true", cwd=pbs.user_home)
    assert proc.returncode == 0, proc.stderr


def test_the_smoke_study_as_a_pbs_job(pbs):
    """`jobs --submit` as the user -> qsub -> `burstbench run` in the job -> a complete run
    folder -> `collect`."""
    params, runs = study(pbs, "smoke", {})
    jobid = submit(pbs, params, 1, runs)
    finished(pbs, jobid, runs, "smoke")
    out = job_output(runs, "smoke", jobid)
    assert f"burstbench job {jobid} on: n1 (" in out and "done: " in out
    run_dir = the_run(runs, "smoke")
    assert statuses(run_dir) == dict.fromkeys(SMOKE["only"], "complete")  # smoke.yaml's
    for bench in SMOKE["only"]:
        stored_once(run_dir, bench)
    results = pbs.root / "results"
    proc = run_cli("-m", "burstbench", "collect", str(runs), "--runs-dir", str(results))
    assert proc.returncode == 0 and "1 added" in proc.stdout, proc.stdout + proc.stderr


def test_the_layout_as_the_job_sees_it(pbs):
    """select=2:ncpus=2:mpiprocs=1:ompthreads=2 with place=scatter:excl: one chunk on each
    node, each a rank of 2 threads, as the job itself and its provenance see it."""
    params, runs = study(pbs, "layout", {"triad_threads": [2], "triad_repetitions": 1,
                                         "triad_baselines": []})
    jobid = submit(pbs, params, 2, runs, "--only", "triad", "--ranks-per-node", "1",
                   "--threads", "2")
    script = params.with_suffix(".pbs").read_text()
    assert "#PBS -l select=2:ncpus=2:mpiprocs=1:ompthreads=2\n" in script
    assert "#PBS -l place=scatter:excl\n" in script
    info = finished(pbs, jobid, runs, "layout")
    assert info["exec_vnode"] == "(n1:ncpus=2)+(n2:ncpus=2)"
    assert info["Resource_List"]["nodect"] == 2 and info["Resource_List"]["ncpus"] == 4
    prov = json.loads((the_run(runs, "layout") / "provenance.json").read_text())
    env = prov["environment"]
    assert env["OMP_NUM_THREADS"] == "2"
    assert env["PBS_JOBID"] == jobid and env["PBS_NODEFILE"].endswith(f"/aux/{jobid}")
    # the hosts as $PBS_NODEFILE named them (sort -u: one line per rank)
    assert job_output(runs, "layout", jobid).startswith(f"burstbench job {jobid} on: n1 n2 (")
    assert prov["system"]["cpu"]["available_to_process"]  # the binding the run was given
    triad = stored_once(the_run(runs, "layout"), "triad")
    assert set(triad["threads"]) == {2}  # each configuration bound to 2 CPUs of the chunk
    assert {len(str(c).split(",")) for c in triad["bound_cpus"]} == {2}, triad["bound_cpus"]


def test_a_rerun_job_resumes_its_run(pbs):
    """`qrerun` mid-sweep (a node lost, an eviction): no process of the job survives it,
    nothing measured before is lost, the rerun job resumes the same run folder and adds to
    it, no configuration twice.  The sweep (ENDLESS) outlasts the test on any machine: the
    test deletes the rerun job once it has seen it resume (the whole sweep, to its end, is
    the smoke study's and test_slurm's time-limit test's)."""
    params, runs = study(pbs, "rerun", ENDLESS)
    jobid = submit(pbs, params, 1, runs, "--only", "triad")
    parts = wait_for_parts(runs, "rerun", jobid, 3)
    pbs.qmgr("set server scheduling = False")  # hold the rerun job queued, to look at the run
    try:
        pbs.run("qrerun", jobid, user=False, check=True)
        info = pbs.wait_job(jobid, states=("Q",), timeout=60)
        assert gone(pbs, jobid), pbs.job_pids(jobid)
        run_dir = the_run(runs, "rerun")
        assert statuses(run_dir)["triad"] != "complete"
        before = stored_keys(run_dir, "triad")
        assert {Path(k).stem for k in parts} <= before
    finally:
        pbs.qmgr("set server scheduling = True")
    wait_stored(run_dir, "triad", len(before) + 3,
                lambda: job_output(runs, "rerun", jobid)[-3000:])
    pbs.run("qdel", jobid, check=True)
    info = pbs.wait_job(jobid, timeout=120)
    assert gone(pbs, jobid), pbs.job_pids(jobid)
    assert info["run_count"] == 2
    assert the_run(runs, "rerun") == run_dir and before < stored_keys(run_dir, "triad")
    none_twice(run_dir, "triad")
    out = job_output(runs, "rerun", jobid)
    assert out.count(f"burstbench job {jobid} on: n1 (") == 2  # PBS appends the rerun's output
    assert "resuming" in out


def test_a_job_killed_at_its_walltime_says_how_to_resume(pbs):
    """PBS kills a job at its walltime (SIGTERM, then SIGKILL after kill_delay): the run
    keeps what it stored, the job's output says how to resume, and the same script
    submitted again resumes that run."""
    # ENDLESS outlasts the walltime on any machine (test_slurm.py's time-limit test once
    # finished before its kill); 60 s, not 20: on a loaded machine (the other test workers)
    # the job took over 20 s to store its first configuration, and was killed with none
    params, runs = study(pbs, "late", ENDLESS)
    jobid = submit(pbs, params, 1, runs, "--only", "triad", "--walltime", "00:01:00")
    info = pbs.wait_job(jobid, timeout=240)
    out = job_output(runs, "late", jobid)
    assert info["Exit_status"] != 0, out[-3000:]
    assert "=>> PBS: job killed: walltime" in out, out[-3000:]
    hint = HINT.search(out)
    assert hint, out[-3000:]
    run_dir = the_run(runs, "late")
    assert hint.group(2) == str(run_dir)
    before = stored_keys(run_dir, "triad")
    assert before and statuses(run_dir)["triad"] != "complete"
    assert gone(pbs, jobid)
    jobid2 = submit(pbs, params, 1, runs, "--only", "triad")
    wait_stored(run_dir, "triad", len(before) + 3,
                lambda: job_output(runs, "late", jobid2)[-3000:])
    pbs.run("qdel", jobid2, check=True)
    pbs.wait_job(jobid2, timeout=120)
    assert gone(pbs, jobid2)
    assert the_run(runs, "late") == run_dir and before < stored_keys(run_dir, "triad")


def test_qdel_stops_the_run_consistently(pbs):
    """`qdel` by the job's owner: SIGTERM, the running configuration stopped, what was
    stored kept (table and parts agree, no duplicate), the resume hint in the output."""
    params, runs = study(pbs, "deleted", ENDLESS)  # never done before the qdel
    jobid = submit(pbs, params, 1, runs, "--only", "triad")
    parts = wait_for_parts(runs, "deleted", jobid, 2)
    pbs.run("qdel", jobid, check=True)
    pbs.wait_job(jobid, timeout=120)
    assert gone(pbs, jobid)
    out = job_output(runs, "deleted", jobid)
    hint = HINT.search(out)
    assert hint, out[-3000:]
    run_dir = the_run(runs, "deleted")
    assert hint.group(2) == str(run_dir)
    assert statuses(run_dir)["triad"] != "complete"
    assert {Path(k).stem for k in parts} <= stored_keys(run_dir, "triad")
    none_twice(run_dir, "triad")  # folded at the interruption: each configuration once


def test_a_select_pbs_refuses(pbs):
    """What we know is wrong is refused before qsub; what only PBS knows, PBS's message
    passed on whole (and no job left behind either way)."""
    params, runs = study(pbs, "faults", {})
    proc = jobs(pbs, params, 1, runs, "--ranks-per-node", "0")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: ranks per node must be at least 1, not 0"
    proc = jobs(pbs, params, 1, runs, "--threads", "0")
    assert proc.returncode == 2 and "threads must be at least 1, not 0" in proc.stderr
    # 3 nodes: more than the queue's resources_max.nodect (the 2 nodes it has)
    proc = jobs(pbs, params, 3, runs)
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith(
        "qsub: Job violates queue and/or server resource limits"), proc.stderr
    proc = jobs(pbs, params, 1, runs, "--queue", "nosuchqueue")
    assert proc.returncode == 1 and proc.stderr.strip().endswith("qsub: Unknown queue")
    assert not pbs.run("qstat", user=False).stdout.strip()
