"""Batch use: the CLI's run/jobs/collect, job scripts under stubbed schedulers, simulated nodes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # most run `burstbench run` on notebooks


def write_params(tmp_path: Path, name: str, values: dict) -> Path:
    f = tmp_path / name
    f.write_text(yaml.safe_dump(values))
    return f


@pytest.mark.parametrize("scheduler,marker", [("pbs", "#PBS -l select=8:"),
                                              ("slurm", "#SBATCH --nodes=8")])
def test_job_scripts_are_valid_bash_and_ask_for_the_nodes(cli, tmp_path, scheduler, marker):
    out = tmp_path / f"job.{scheduler}"
    proc = cli("-m", "burstbench", "jobs", "--scheduler", scheduler, "--params",
               "papermill_params/hc44rs.yaml", "--nodes", "8", "--walltime", "12:00:00",
               "--runs-dir", str(tmp_path / "runs"), "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert marker in text and "burstbench run --params" in text and "hc44rs.yaml" in text
    assert subprocess.run(["bash", "-n", str(out)]).returncode == 0
    assert ("PBS_NODEFILE" if scheduler == "pbs" else "SLURM_JOB_NODELIST") in text


def test_submitting_without_the_scheduler_keeps_the_script(cli, tmp_path):
    out = tmp_path / "job.pbs"
    env = {"PATH": "/usr/bin:/bin"}  # no qsub here
    proc = cli("-m", "burstbench", "jobs", "--scheduler", "pbs", "--params",
               "papermill_params/local.yaml", "--nodes", "1", "--output", str(out), "--submit",
               "--runs-dir", str(tmp_path / "runs"), env=env)
    assert proc.returncode == 1 and out.exists()
    assert "qsub is not installed here" in proc.stderr and "not submitted" in proc.stderr


def test_submitting_with_a_stub_scheduler(cli, tmp_path):
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "sbatch").write_text("#!/bin/sh\necho \"Submitted batch job 42 ($1)\"\n")
    (stub / "sbatch").chmod(0o755)
    out = tmp_path / "job.slurm"
    proc = cli("-m", "burstbench", "jobs", "--scheduler", "slurm", "--params",
               "papermill_params/local.yaml", "--nodes", "2", "--output", str(out), "--submit",
               "--runs-dir", str(tmp_path / "runs"), env={"PATH": f"{stub}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr
    assert "Submitted batch job 42" in proc.stdout


@pytest.mark.parametrize("args,message", [
    (["--nodes", "0"], "nodes must be at least 1"),
    (["--nodes", "1", "--walltime", "4h"], "walltime must be HH:MM:SS"),
])
def test_job_bad_input(cli, args, message):
    proc = cli("-m", "burstbench", "jobs", "--scheduler", "pbs", "--params",
               "papermill_params/local.yaml", *args)
    assert proc.returncode == 2 and message in proc.stderr


def test_a_pbs_job_on_two_simulated_nodes(tmp_path, cli):
    """The PBS script, run as PBS would, with a node file naming two 'hosts' that are both
    this machine: ping-pong across nodes and BICCG on two nodes go through the launcher's
    host list."""
    params = write_params(tmp_path, "two.yaml", {
        "vm": "sim", "only": ["pingpong", "biccg"], "pingpong_placements": ["across-nodes"],
        "pingpong_tests": ["latency"],
        "pingpong_max_size": 64, "pingpong_iterations": 20, "pingpong_skip": 2,
        "pingpong_baselines": [], "pingpong_repetitions": 1, "pingpong_validate": False,
        "biccg_problems": [{"poisson": [8, 8, 8]}], "biccg_nodes": [2],
        "biccg_ranks_per_node": [1], "biccg_threads": [1], "biccg_baselines": [],
        "biccg_repetitions": 1})
    script = tmp_path / "job.pbs"
    runs = tmp_path / "runs"
    proc = cli("-m", "burstbench", "jobs", "--scheduler", "pbs", "--params", str(params),
               "--nodes", "2", "--runs-dir", str(runs), "--output", str(script))
    assert proc.returncode == 0, proc.stderr
    nodefile = tmp_path / "nodefile"
    nodefile.write_text(f"localhost\nlocalhost\n{socket.gethostname()}\n")
    job = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=600,
                         env=os.environ | {"PBS_NODEFILE": str(nodefile), "PBS_JOBID": "1.sim"})
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-2000:]
    assert f"burstbench job 1.sim on: localhost {socket.gethostname()}" in job.stdout
    (run_dir,) = (runs / "sim").iterdir()
    pp = pd.read_csv(run_dir / "pingpong.csv")
    assert set(pp["placement"]) == {"across-nodes"} and (pp["value"] > 0).all()
    raw = [json.loads(x) for x in (run_dir / "pingpong.jsonl").read_text().splitlines()]
    assert raw and all(len(r["ranks"]) == 2 for r in raw)
    bc = pd.read_csv(run_dir / "biccg.csv")
    assert set(bc["nodes"]) == {2} and set(bc["ranks"]) == {2}


def test_a_failing_notebook_does_not_stop_the_others(cli, tmp_path):
    params = write_params(tmp_path, "p.yaml", {
        "vm": "f", "only": ["triad", "biccg"],
        "triad_variants": [{"compiler": "gcc", "flags": "-O2 -fno-such-flag"}],
        "triad_baselines": [], "biccg_problems": [{"poisson": [6, 6, 6]}],
        "biccg_ranks_per_node": [1], "biccg_threads": [1], "biccg_baselines": [],
        "biccg_repetitions": 1})
    proc = cli("-m", "burstbench", "run", "--params", str(params), "--runs-dir",
               str(tmp_path / "runs"), "--quiet")
    assert proc.returncode == 1
    assert "1 of 2 notebooks failed" in proc.stderr and "FAILED triad" in proc.stderr
    (run_dir,) = (tmp_path / "runs" / "f").iterdir()
    assert (run_dir / "010_measure_triad.ipynb").exists()  # kept, executed up to its error
    assert (run_dir / "biccg.csv").exists()


def test_params_for_the_wrong_notebook(cli, tmp_path):
    params = write_params(tmp_path, "pp.yaml", {"vm": "w", "only": ["pingpong"],
                                                "pingpong_tests": ["latency"]})
    proc = cli("-m", "burstbench", "run", "--params", str(params), "--only", "triad")
    assert proc.returncode == 2
    assert proc.stderr == (f"error: --only triad: {params} leaves triad out (only: "
                           "[pingpong]); it measures pingpong\n")


def test_unwritable_runs_directory(cli, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    params = write_params(tmp_path, "p.yaml", {"vm": "u", "pingpong_tests": ["latency"]})
    target = "/proc/burstbench-runs" if os.geteuid() == 0 else str(ro / "runs")
    proc = cli("-m", "burstbench", "run", "--params", str(params), "--runs-dir", target)
    assert proc.returncode == 2 and "cannot create run folder" in proc.stderr


def test_collect_merges_dedupes_and_refuses_damaged_runs(smoke_run, tmp_path, cli):
    brought = tmp_path / "from-vm"
    shutil.copytree(smoke_run, brought)
    (run_dir,) = (brought / "smoke").iterdir()
    damaged = brought / "smoke" / "20990101T000000Z-dead"
    shutil.copytree(run_dir, damaged)
    (damaged / "provenance.json").write_text(
        (damaged / "provenance.json").read_text().replace(run_dir.name, damaged.name))
    (damaged / "triad.csv").write_text("not,a\nresults table\n")
    dest = tmp_path / "runs"
    proc = cli("-m", "burstbench", "collect", str(brought), "--runs-dir", str(dest))
    assert proc.returncode == 1
    assert f"added smoke/{run_dir.name}" in proc.stdout
    assert "refused" in proc.stderr and damaged.name in proc.stderr
    assert (dest / "smoke" / run_dir.name / "triad.csv").exists()
    assert not (dest / "smoke" / damaged.name).exists()
    shutil.rmtree(damaged)
    again = cli("-m", "burstbench", "collect", str(brought), "--runs-dir", str(dest))
    assert again.returncode == 0 and "already collected" in again.stdout
    assert cli("-m", "burstbench", "collect", str(tmp_path / "nothing"), "--runs-dir",
               str(dest)).returncode == 1


def test_a_missing_notebook_is_named(cli, tmp_path):
    root = tmp_path / "project"
    (root / "notebooks").mkdir(parents=True)
    (root / "papermill_params").mkdir()
    shutil.copy(ROOT / "notebooks" / "030_measure_biccg.ipynb", root / "notebooks")
    params = write_params(tmp_path, "p.yaml", {
        "vm": "m", "only": ["pingpong", "biccg"], "pingpong_tests": ["latency"],
        "biccg_problems": [{"poisson": [6, 6, 6]}],
        "biccg_ranks_per_node": [1], "biccg_threads": [1], "biccg_baselines": [],
        "biccg_repetitions": 1})
    proc = cli("-m", "burstbench", "run", "--params", str(params), "--runs-dir",
               str(tmp_path / "runs"), "--quiet", env={"BURSTBENCH_ROOT": str(root)})
    assert proc.returncode == 1
    assert "FAILED pingpong: notebook" in proc.stderr and "is missing" in proc.stderr
    (run_dir,) = (tmp_path / "runs" / "m").iterdir()
    assert (run_dir / "biccg.csv").exists()
