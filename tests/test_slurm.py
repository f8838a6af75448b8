"""The batch path through a real Slurm cluster on this host: two nodes, real jobs.

The cluster (munged, slurmctld, two slurmd; tests/slurm_cluster.py) is started
once for this module and stopped at its end, whatever happened.  Where Debian's
slurm-wlm and munge are not installed the module is skipped with the reason;
where they are installed but the cluster does not start, it is skipped too,
unless BURSTBENCH_REQUIRE_SLURM=1 (set by .ci/run) makes that a failure.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import scheduler_cluster
from conftest import run_cli
from scheduler_cluster import (
    ENDLESS,
    SMOKE,
    none_twice,
    params_file,
    statuses,
    stored_keys,
    stored_once,
    the_run,
    wait_stored,
)
from slurm_cluster import SlurmCluster


def submit(slurm: SlurmCluster, params: Path, nodes: int, runs: Path, *extra: str) -> str:
    """`burstbench jobs --submit` against the cluster; the job id."""
    proc = run_cli("-m", "burstbench", "jobs", "--scheduler", "slurm", "--params", str(params),
                   "--nodes", str(nodes), "--runs-dir", str(runs), "--output",
                   str(params.with_suffix(".slurm")), "--submit", *extra, env=slurm.env)
    assert proc.returncode == 0, proc.stderr
    assert "Submitted batch job" in proc.stdout, proc.stdout
    return proc.stdout.split()[-1]


def job_output(runs: Path, vm: str, jobid: str) -> str:
    f = runs / vm / f"burstbench-{vm}-{jobid}.out"
    return f.read_text() if f.exists() else f"(no output file {f})"


def finished(slurm: SlurmCluster, jobid: str, runs: Path, vm: str, timeout: float = 400,
             state: str = "COMPLETED") -> dict:
    info = slurm.wait_job(jobid, timeout=timeout)
    assert info["JobState"] == state, (info.get("JobState"), info.get("Reason"),
                                       job_output(runs, vm, jobid)[-3000:])
    return info


@pytest.fixture(autouse=True)
def _no_job_outlives_its_test(slurm):
    """Whatever a test did, passed or failed: its jobs cancelled and no process of theirs
    left when the next begins (a sweep left measuring holds the host's lock: the next
    tests fail on that, not on what they test)."""
    yield
    slurm.clean()


def job_processes(slurm: SlurmCluster, jobid: str) -> list[str]:
    """Command lines of processes that still carry this job's SLURM_JOB_ID and this
    cluster's SLURM_CONF (another cluster's job 5 is not ours: test_advise_clusters.py's
    `sleep 3600` failed the eviction test when the two ran at once)."""
    return scheduler_cluster.job_processes(f"SLURM_JOB_ID={jobid}", f"SLURM_CONF={slurm.conf}")


def test_the_cluster_has_two_idle_nodes(slurm):
    out = slurm.run("sinfo", "-h", "-N", "-o", "%N %t %c", check=True).stdout.split("\n")
    assert sorted(x.split()[0] for x in out if x) == ["n1", "n2"]
    assert all(x.split()[1] == "idle" for x in out if x)


@pytest.mark.parametrize("nodes", [1, 2])
def test_the_smoke_study_as_a_batch_job(slurm, tmp_path, nodes):
    """`jobs --submit` -> sbatch -> `burstbench run` on the allocation -> complete run folder
    -> `collect` -> the figures rebuild from the collected results."""
    runs = tmp_path / "runs"
    params = params_file(tmp_path, "smoke", {})
    jobid = submit(slurm, params, nodes, runs)
    info = finished(slurm, jobid, runs, "smoke")
    assert info["NumNodes"] == str(nodes) and info["ExitCode"] == "0:0"
    out = job_output(runs, "smoke", jobid)
    assert f"burstbench job {jobid} on: " in out and "done: " in out
    assert out.split("on: ")[1].split("(")[0].split() == ["n1", "n2"][:nodes]
    run_dir = the_run(runs, "smoke")
    assert statuses(run_dir) == dict.fromkeys(SMOKE["only"], "complete")  # smoke.yaml's
    for bench in SMOKE["only"]:
        stored_once(run_dir, bench)
    results = tmp_path / "results"
    proc = run_cli("-m", "burstbench", "collect", str(runs), "--runs-dir", str(results))
    assert proc.returncode == 0 and "1 added" in proc.stdout, proc.stdout + proc.stderr
    if nodes == 2:  # the report from what was collected (once: it takes ~25 s)
        figs = tmp_path / "figures"
        proc = run_cli("-m", "burstbench", "report", "--runs-dir", str(results),
                       "--figures-dir", str(figs), "--include-test-runs")  # smoke: a test
        assert proc.returncode == 0, proc.stderr[-2000:]
        index = (figs / "README.md").read_text()
        for bench in SMOKE["only"]:  # drawn from the job's run
            assert (figs / f"{bench}_smoke.png").exists() and f"{bench}_smoke.png" in index


@pytest.mark.parametrize("launcher,mpiexec", [("slurm", "srun"), ("hydra", "mpiexec")])
def test_mpi_in_a_job_is_one_world_across_two_nodes(slurm, tmp_path, launcher, mpiexec):
    """The ping-pong across nodes and BICCG on 2 nodes, launched by srun (with the --mpi
    plugin the MPI needs: the cluster's default is none) or by the MPI's own launcher given
    the allocation's hosts: one world of 2 ranks, one rank on each node (size-1 worlds
    would make the ping-pong refuse)."""
    runs = tmp_path / "runs"
    combo = {"mpiexec": mpiexec, "launcher": launcher}
    params = params_file(tmp_path, "two", {
        "vm": "two", "pingpong_combinations": [combo], "pingpong_placements": ["across-nodes"],
        "pingpong_tests": ["latency"], "pingpong_baselines": [], "pingpong_validate": True,
        "biccg_combination": combo, "biccg_nodes": [2], "biccg_ranks_per_node": [1],
        "biccg_baselines": []})
    jobid = submit(slurm, params, 2, runs, "--only", "pingpong,biccg")
    finished(slurm, jobid, runs, "two", timeout=300)
    run_dir = the_run(runs, "two")
    raw = [json.loads(x) for x in (run_dir / "pingpong.jsonl").read_text().splitlines()]
    assert raw and all(len(r["ranks"]) == 2 for r in raw)
    assert all(sorted(x["node"] for x in r["ranks"]) == ["n1", "n2"] for r in raw)
    bc = stored_once(run_dir, "biccg")
    assert set(bc["nodes"]) == {2} and set(bc["ranks"]) == {2}
    rec = json.loads((run_dir / "biccg.jsonl").read_text().splitlines()[0])
    assert rec["ranks"] == 2 and rec["oversubscribed"] is False


def test_an_evicted_job_is_requeued_and_resumes_its_run(slurm, tmp_path):
    """Spot eviction as the cost model assumes it: `scontrol requeue` mid-sweep. Nothing
    measured before is lost, no process of the job survives it, the requeued job resumes
    the same run folder and adds to it, no configuration twice.  The sweep (ENDLESS)
    outlasts the test on any machine: the test cancels the requeued job once it has seen it
    resume (a short sweep could end before the requeue on a fast machine)."""
    runs = tmp_path / "runs"
    params = params_file(tmp_path, "evict", {"vm": "evict"} | ENDLESS)
    jobid = submit(slurm, params, 1, runs, "--only", "triad")
    parts = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = list((runs / "evict").glob("*/triad.parts/*.json"))
        if len(found) >= 3:
            parts = {p.name: p.read_bytes() for p in found}
            break
        time.sleep(0.2)
    assert parts, job_output(runs, "evict", jobid)
    slurm.run("scontrol", "requeue", jobid, check=True)
    info = slurm.wait_job(jobid, states=("PENDING",), timeout=120)
    assert info["Restarts"] == "1"
    deadline = time.monotonic() + 90  # the job's processes are gone before it restarts
    while job_processes(slurm, jobid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not job_processes(slurm, jobid), job_processes(slurm, jobid)
    run_dir = the_run(runs, "evict")
    assert statuses(run_dir)["triad"] != "complete"
    before = stored_keys(run_dir, "triad")
    assert {Path(k).stem for k in parts} <= before
    slurm.run("scontrol", "update", f"jobid={jobid}", "StartTime=now", check=True)
    wait_stored(run_dir, "triad", len(before) + 3,
                lambda: job_output(runs, "evict", jobid)[-3000:])
    slurm.run("scancel", jobid, check=True)
    finished(slurm, jobid, runs, "evict", timeout=120, state="CANCELLED")
    assert not job_processes(slurm, jobid), job_processes(slurm, jobid)
    assert the_run(runs, "evict") == run_dir and before < stored_keys(run_dir, "triad")
    none_twice(run_dir, "triad")
    out = job_output(runs, "evict", jobid)
    assert out.count(f"burstbench job {jobid} on:") == 2  # appended, not overwritten
    assert "resuming" in out


def test_a_job_killed_at_its_time_limit_resumes_on_resubmit(slurm, tmp_path):
    runs = tmp_path / "runs"
    # Slurm checks limits every 30 s: the job is killed 60-90 s after it starts.  With 10
    # passes a served configuration took 0.2 s here (400 of them done in 80 s, before the
    # kill: the test failed once), so 100 passes each (about 2 s: 39 stored before the
    # kill): 400 outlast the limit on a machine even several times faster; what is not
    # measured costs nothing, as the resubmission is cancelled
    params = params_file(tmp_path, "late", {"vm": "late"} | ENDLESS)
    jobid = submit(slurm, params, 1, runs, "--only", "triad", "--walltime", "00:01:00")
    finished(slurm, jobid, runs, "late", timeout=240, state="TIMEOUT")
    run_dir = the_run(runs, "late")
    before = stored_keys(run_dir, "triad")
    assert before and statuses(run_dir)["triad"] != "complete"
    assert not job_processes(slurm, jobid)
    # The resubmission resumes that run. Its last 60-90 configurations would add a minute and
    # nothing new (the evicted job's test runs a resumed run to its end): a few, then cancel.
    jobid2 = submit(slurm, params, 1, runs, "--only", "triad")
    wait_stored(run_dir, "triad", len(before) + 3,
                lambda: job_output(runs, "late", jobid2)[-3000:])
    slurm.run("scancel", jobid2, check=True)
    finished(slurm, jobid2, runs, "late", timeout=120, state="CANCELLED")
    assert not job_processes(slurm, jobid2)
    assert the_run(runs, "late") == run_dir and statuses(run_dir)["triad"] != "complete"
    assert before < stored_keys(run_dir, "triad")  # kept what the first job stored, added more


def test_a_job_with_a_broken_params_file_fails_fast(slurm, tmp_path):
    """The params file changed after the script was written: the job fails on its first
    command, with the one-line error in its output and a non-zero exit code."""
    runs = tmp_path / "runs"
    params = params_file(tmp_path, "broken", {"vm": "broken"})
    script = tmp_path / "broken.slurm"
    proc = run_cli("-m", "burstbench", "jobs", "--scheduler", "slurm", "--params", str(params),
                   "--nodes", "1", "--runs-dir", str(runs), "--output", str(script),
                   env=slurm.env)
    assert proc.returncode == 0, proc.stderr
    params.write_text(params.read_text() + "triad_threadz: [1]\n")
    jobid = slurm.run("sbatch", "--parsable", str(script), check=True).stdout.strip()
    info = finished(slurm, jobid, runs, "broken", timeout=300, state="FAILED")
    assert info["ExitCode"] == "2:0"
    out = job_output(runs, "broken", jobid)
    assert "error: " in out and "triad_threadz" in out
    assert len([ln for ln in out.splitlines() if ln.startswith("error")]) == 1
    h, m, sec = (int(x) for x in info["RunTime"].split("-")[-1].split(":"))
    assert h * 3600 + m * 60 + sec < 120, info["RunTime"]  # failed fast, measured nothing


def test_submission_faults_are_one_line(slurm, tmp_path):
    runs = tmp_path / "runs"
    params = params_file(tmp_path, "f", {"vm": "faults"})
    base = ["-m", "burstbench", "jobs", "--scheduler", "slurm", "--params", str(params),
            "--runs-dir", str(runs), "--output", str(tmp_path / "f.slurm"), "--submit"]
    # rejected by the scheduler: its own message is shown
    proc = run_cli(*base, "--nodes", "1", "--queue", "nosuchpartition", env=slurm.env)
    assert proc.returncode == 1 and "sbatch refused" in proc.stderr
    assert "invalid partition" in proc.stderr.lower()
    proc = run_cli(*base, "--nodes", "3", env=slurm.env)
    assert proc.returncode == 1 and "sbatch refused" in proc.stderr
    # more nodes in the params than the job asks for: refused before anything is written
    two = params_file(tmp_path, "two", {"vm": "faults", "biccg_nodes": [1, 2]})
    proc = run_cli("-m", "burstbench", "jobs", "--scheduler", "slurm", "--params", str(two),
                   "--nodes", "1", "--runs-dir", str(runs), env=slurm.env)
    assert proc.returncode == 2
    assert "asks for 2 nodes (biccg_nodes), but the job has --nodes 1" in proc.stderr
    # slurmctld down: a configuration whose controller port nobody listens on
    dead = tmp_path / "dead.conf"
    text = slurm.conf.read_text()
    port = next(ln for ln in text.splitlines() if ln.startswith("SlurmctldPort="))
    dead.write_text(text.replace(port, "SlurmctldPort=1"))
    start = time.monotonic()
    proc = run_cli(*base, "--nodes", "1", env={"SLURM_CONF": str(dead)})
    assert proc.returncode == 1 and "sbatch refused" in proc.stderr
    assert "controller" in proc.stderr.lower()
    assert len(proc.stderr.strip().splitlines()) == 1
    assert time.monotonic() - start < 120
    assert not slurm.run("squeue", "-h", "-n", "burstbench-faults").stdout.strip()
