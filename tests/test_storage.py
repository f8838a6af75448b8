"""The storage benchmark as a sweep: local disk and a real Gfarm (its API and its gfarm2fs
mount), faults that fail one configuration and no other, nothing left behind, the report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from gfarm_cluster import problem as gfarm_problem
from gfarm_cluster import start as gfarm_start
from test_batch import ROOT, write_params

from burstbench import params, registry
from burstbench.benchmarks import storage
from burstbench.benchmarks.storage.results import MAYBE_CACHED, cache_label, from_memory, merits
from burstbench.core import checks, runner

pytestmark = pytest.mark.mpi
SMALL = {"storage_block_size": "8M", "storage_transfer_size": "1M", "storage_repetitions": 1,
         "storage_ranks_per_node": [1, 2]}


def validate(tmp_path: Path, **values) -> dict:
    return params.validate({"vm": "t", "runs_dir": str(tmp_path / "runs")} | SMALL | values,
                           "storage")


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in Path(folder).rglob("*") if p.is_file())


def _size(path: Path) -> int:
    """A file's size, 0 where it went away meanwhile."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def test_local_disk_and_gfarm_through_its_api_and_its_mount(tmp_path, gfarm):
    """One sweep over the three kinds of target: every configuration stored with its
    columns, every read labelled with how it avoided the cache (Gfarm's API cannot drop the
    I/O servers' cache: 'may be cached'), the provenance naming each target's file system,
    nothing left on any of them, the report's figure and tables drawn from it."""
    local = tmp_path / "local"
    gfarm.run("gfmkdir", "-p", "/sweep", check=False)
    P = validate(tmp_path, storage_targets=[
        {"name": "local", "path": str(local)},
        {"name": "gfarm", "path": "gfarm:///sweep", "config": str(gfarm.config)},
        {"name": "mount", "path": str(gfarm.mount / "sweep-mount"), "api": ["posix", "mpiio"]},
        {"name": "absent", "path": "$NO_SUCH_VARIABLE/x", "optional": True}],
        storage_replicate="4M", test=True)
    run, table = storage.SPEC.measure(P, progress=False)
    assert set(table["target"]) == {"local", "gfarm", "mount"}
    bw = table[(table["metric"] == "bandwidth") & (table["access"] != "replication")]
    # local and gfarm: 2 access x 2 layouts; mount: 2 APIs x 2 access x 2 layouts; x 2 ops
    assert len(bw) == (4 + 4 + 8) * 2 and (bw["value"] > 0).all()
    assert set(bw["unit"]) == {"MiB/s"}
    reads = bw[bw["operation"] == "read"]
    assert set(reads.loc[reads["target"] == "gfarm", "cache"]) == {MAYBE_CACHED}
    # through the mount this node's cache is dropped, the I/O servers' cannot be
    assert set(reads.loc[reads["api"] == "mpiio", "cache"]) == {
        "dropped (posix_fadvise); servers may cache"}
    assert reads.loc[reads["target"] != "local", "cache"].map(from_memory).all()
    assert not reads.loc[reads["target"] == "local", "cache"].map(from_memory).any()
    rep = table[table["access"] == "replication"]
    assert set(rep["metric"]) == {"replication_time", "bandwidth"} and (rep["value"] > 0).all()
    sec = run.section("storage")
    assert sec["status"] == "complete"
    assert any("skipped storage target absent: $NO_SUCH_VARIABLE is not set" in n
               for n in sec["notes"])
    info = {v["target"]: v for v in sec["variants"][1:]}
    assert info["mount"]["fs_type"] == "fuse.gfarm2fs" and info["gfarm"]["fs_type"] == "gfarm"
    assert info["local"]["mount"]["options"] and info["local"]["free_bytes"] > 0
    assert info["gfarm"]["free_bytes"] > 0 and info["gfarm"]["direct"] is False
    assert files_under(local) == [] and files_under(gfarm.mount / "sweep-mount") == []
    assert gfarm.run("gfls", "/sweep").stdout.split() == []
    m = merits(P["runs_dir"], ROOT / "data" / "reference")  # test runs are never merits
    assert m.table.empty and any("a test run" in p for p in m.problems)

    figs = tmp_path / "figs"
    os.environ["BURSTBENCH_INCLUDE_TEST_RUNS"] = "1"
    try:
        section = storage.report_section(P["runs_dir"], figures_dir=figs)
    finally:
        del os.environ["BURSTBENCH_INCLUDE_TEST_RUNS"]
    assert (figs / "storage_t.png").stat().st_size > 0
    summary = pd.read_csv(figs / "storage_summary.csv")
    assert {"Flow (Ohshima et al. 2020)", "Gfarm on Azure (slides)", "a test run"} <= set(
        summary["source"])
    flow = summary[summary["target"] == "Flow /data/group1, file-per-process"]
    assert flow.loc[flow["operation"] == "write", "median_mib_s"].iloc[0] == pytest.approx(
        93130.36 / 576, abs=0.05)
    assert (figs / "storage_replication.csv").exists()
    (fig,) = [e for e in section.entries if any(f.endswith(".png") for f in e.files)]
    assert MAYBE_CACHED in fig.caption and "servers may cache'" in fig.caption


def test_merits_are_the_best_honest_bandwidth_per_target(tmp_path):
    """The burst decision stages data at a target's best median bandwidth; a read that may
    have come from memory is never its read bandwidth while an honest one was measured."""
    P = validate(tmp_path, storage_targets=[{"name": "local", "path": str(tmp_path / "l")}],
                 storage_access=["file-per-process"], storage_ranks_per_node=[1])
    run, table = storage.SPEC.measure(P, progress=False)
    m = merits(P["runs_dir"], ROOT / "data" / "reference").table
    assert set(m["merit"]) == {"storage_write_mib_s", "storage_read_mib_s"}
    write = m[m["merit"] == "storage_write_mib_s"].iloc[0]
    got = table[(table["operation"] == "write") & (table["metric"] == "bandwidth")]["value"]
    assert write["value"] == pytest.approx(got.median()) and write["target"] == "local"


@pytest.mark.parametrize("target,message", [
    ({"name": "gone", "path": "/no/such/folder/x"},
     "storage_targets: target gone: /no/such/folder does not exist"),
    ({"name": "var", "path": "$NO_SUCH_VARIABLE/x"},
     "storage_targets: target var: $NO_SUCH_VARIABLE is not set (its path is "
     "$NO_SUCH_VARIABLE/x)"),
    ({"name": "shm", "path": "/dev/shm/burstbench-test", "direct": True},
     "storage_targets: target shm: posix on /dev/shm/burstbench-test: error: "
     "/dev/shm/burstbench-test (tmpfs) refuses O_DIRECT: its files are in memory, so direct "
     "I/O cannot bypass a cache there")])
def test_a_target_that_cannot_be_measured_is_named_before_anything_runs(tmp_path, target,
                                                                        message):
    with pytest.raises(checks.ParamError) as err:
        storage.plan(validate(tmp_path, storage_targets=[target]))
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_tmpfs_is_measured_buffered_and_says_its_reads_are_memory(tmp_path):
    """direct: auto on a file system that refuses O_DIRECT: buffered, the note says so, and
    a memory file system's reads are labelled memory: never a storage bandwidth."""
    P = validate(tmp_path, storage_targets=[{"name": "shm", "path": "/dev/shm/bb-auto"}],
                 storage_access=["file-per-process"], storage_ranks_per_node=[1])
    plan = storage.plan(P)
    assert any("shm: /dev/shm/bb-auto refuses direct I/O: measured buffered" in n
               for n in plan.notes)
    assert "--direct" not in plan.tasks[0].argv
    run, table = storage.SPEC.measure(P, progress=False)
    reads = table[(table["operation"] == "read") & (table["metric"] == "bandwidth")]
    assert set(reads["cache"]) == {"in memory (tmpfs)"}
    assert files_under(Path("/dev/shm/bb-auto")) == []
    m = merits(P["runs_dir"], ROOT / "data" / "reference").table
    read = m[m["merit"] == "storage_read_mib_s"].iloc[0]
    assert read["cache"] == "in memory (tmpfs)"  # the only read there was: said, not hidden


def test_gfarm_unreachable_is_one_line_within_bounded_time(tmp_path):
    if gfarm_problem():
        pytest.skip(gfarm_problem())
    with gfarm_start(tmp_path / "gf", mount=False) as g:
        g.run("gfmkdir", "/x", check=True)
        g.stop_gfmd()
        t0 = time.monotonic()
        with pytest.raises(checks.ParamError) as err:
            storage.plan(validate(tmp_path, storage_targets=[
                {"name": "gf", "path": "gfarm:///x", "config": str(g.config)}]))
        assert time.monotonic() - t0 < 180  # a hang guard, with room for a loaded machine
    assert str(err.value).startswith("storage_targets: target gf: gfarm on gfarm:///x: ")
    # the kernel's own probe of the metadata server said so, not libgfarm after a minute of
    # retries (tests/test_storage_kernel.py, test_gfarm_metadata_server_down: its message)
    assert "does not answer (Connection refused)" in str(err.value)
    assert "\n" not in str(err.value)


def test_an_io_server_killed_mid_write_fails_that_configuration_and_the_sweep_goes_on(
        tmp_path):
    """A gfsd dies while a configuration writes to it: that configuration fails with one
    line naming the target, no number is stored for it, the next configurations run (on
    the other I/O node), and no file or process is left behind."""
    if gfarm_problem():
        pytest.skip(gfarm_problem())
    with gfarm_start(tmp_path / "gf", mount=False) as g:
        g.run("gfmkdir", "/kill", check=True)
        P = validate(tmp_path, storage_targets=[
            {"name": "gf", "path": "gfarm:///kill", "config": str(g.config)}],
            storage_access=["file-per-process"], storage_ranks_per_node=[1],
            storage_block_size="1G", storage_repetitions=2)
        plan = storage.plan(P)
        run, _ = storage.SPEC.open_run(P)

        over = threading.Event()  # the run has ended: nothing left to kill

        def kill_when_writing() -> None:  # the first configuration's file exists and grows
            deadline = time.monotonic() + 300  # generous: it returns once it has killed
            while time.monotonic() < deadline and not over.is_set():
                listing = g.run("gfls", "-l", "/kill").stdout.split("\n")
                sizes = [int(ln.split()[4]) for ln in listing if len(ln.split()) > 4]
                if any(s > 0 for s in sizes):
                    where = g.run("gfwhere", "-r", "/kill").stdout
                    node = 1 if "127.0.0.2" in where else 0
                    g.kill_gfsd(node)
                    return
                time.sleep(0.02)

        killer = threading.Thread(target=kill_when_writing, daemon=True)
        killer.start()
        try:
            result = runner.run_tasks(plan.tasks, run, "storage", storage.parse,
                                      storage.COLUMNS, progress=False)
        finally:
            over.set()
        killer.join(10)
        left = g.run("gfls", "/kill").stdout.split()
    assert len(result.failed) == 1 and result.measured == 1, result
    (title, reason) = result.failed[0]
    assert title.startswith("gf+gfarm+file-per-process") and "gfarm:///kill" in reason
    assert "\n" not in reason
    assert len(run.done_keys("storage")) == 1
    assert left == []


def test_sigterm_in_the_middle_of_a_write_removes_its_files_and_keeps_what_was_stored(
        tmp_path):
    """`burstbench run` stopped while a configuration writes: its files are gone, the
    configuration before it is kept, and the resume command is printed."""
    a, b = tmp_path / "a", tmp_path / "b"
    f = write_params(tmp_path, "p.yaml", {
        "vm": "io", "only": ["storage"], "storage_targets": [{"name": "a", "path": str(a)},
                                        {"name": "b", "path": str(b)}],
        "storage_access": ["file-per-process"], "storage_ranks_per_node": [1],
        "storage_block_size": "1G", "storage_repetitions": 1})
    proc = subprocess.Popen([sys.executable, "-m", "burstbench", "run", "--params", str(f),
                             "--runs-dir", str(tmp_path / "runs"), "--quiet"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300  # generous: it ends as soon as b is written
        while not any(_size(p) > 0 for p in files_under(b)  # not what the plan's probes
                      if "probe" not in p.name):                # write there and remove
            assert time.monotonic() < deadline, "the second configuration never wrote"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err[-2000:]
    assert files_under(b) == [] and files_under(a) == []
    assert "configurations stored: storage 1 of 2 (interrupted)" in err
    assert "resume with: " in err
    (run_dir,) = (tmp_path / "runs" / "io").iterdir()
    prov = json.loads((run_dir / "provenance.json").read_text())
    assert prov["benchmarks"]["storage"]["status"] == "interrupted"


def test_the_job_scripts_ask_for_the_storage_nodes():
    from burstbench import jobs

    P = params.validate({"storage_nodes": [1, 4]}, "storage")
    assert jobs.nodes_needed({"storage": P}) == (4, "storage_nodes")
    assert registry.benchmarks()["storage"].env_prefixes >= ("ROMIO_", "GFARM_")


@pytest.mark.parametrize("rec, label, memory", [
    ({"cache": "direct"}, "direct", False),
    ({"cache": "direct", "cache_note": "the file servers' page cache may still hold the data"},
     "direct; servers may cache", True),
    ({"cache": "dropped (posix_fadvise)", "cache_note": "x"},
     "dropped (posix_fadvise); servers may cache", True),
    ({"cache": MAYBE_CACHED, "cache_note": "Gfarm: ..."}, MAYBE_CACHED, True),
    ({"cache": "in memory (tmpfs)"}, "in memory (tmpfs)", True),
    ({"cache": None}, "", False)])  # a write
def test_a_read_the_servers_may_have_cached_is_not_storage_bandwidth(rec, label, memory):
    assert cache_label(rec) == label and from_memory(label) is memory
