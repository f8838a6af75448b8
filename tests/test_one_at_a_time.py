"""One measurement at a time (issue 33): no orphan after a kill -9 of the run, one writer per
run folder, one sweep per host, contended configurations flagged, collect refusing what it
cannot trust, and a full disk ending the sweep in one line.

The processes are real and so are the signals; their moments do not depend on this
machine's speed: a run is held inside a configuration by the gate of tests/test_signals.py
(`held_mpiexec`), and every process a test starts carries its MARKER, so whatever is left
is found in /proc.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import yaml
from test_batch import ROOT, write_params
from test_signals import HELD, MARKER, held_mpiexec, held_ranks, kill_all, marked, wait_for

from burstbench import supervise
from burstbench.core import contention, locks, runner, store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc for processes, boots and CPU time")

HOST = socket.gethostname()


def held_params(folder: Path, vm: str = "one") -> tuple[Path, Path]:
    """(params, release file): the smoke sweep (papermill_params/smoke.yaml), its BICCG with
    two configurations, the second waiting at the gate until the release file exists."""
    mpiexec, release = held_mpiexec(folder)
    smoke = yaml.safe_load((ROOT / "papermill_params" / "smoke.yaml").read_text())
    params = write_params(folder, f"{vm}.yaml", smoke | {
        "vm": vm, "biccg_problems": [{"poisson": [8, 8, 8]}, {"poisson": [int(HELD)] * 3}],
        "biccg_combination": {"mpiexec": str(mpiexec), "launcher": "hydra"},
        "biccg_ranks_per_node": [2], "biccg_threads": [1], "biccg_baselines": [],
        "biccg_repetitions": 1})
    return params, release


def run_argv(params: Path, runs: Path, *more: str) -> list[str]:
    """`burstbench run` of the held smoke sweep's BICCG, in the order of its resume command."""
    return [sys.executable, "-m", "burstbench", "run", "--params", str(params), "--only",
            "biccg", "--runs-dir", str(runs), "--quiet", *more]


def start(argv: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def run(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def sweep_env(tmp_path) -> dict:
    """The environment of a test's runs: its marker, and a host lock of its own."""
    return os.environ | {MARKER: uuid.uuid4().hex, locks.LOCK_DIR_ENV: str(tmp_path / "host")}


@pytest.mark.slow
def test_a_kill_9_of_the_run_leaves_no_process_and_its_stale_locks_are_taken_over(
        tmp_path, sweep_env):
    tag = sweep_env[MARKER]
    params, release = held_params(tmp_path)
    runs = tmp_path / "runs"
    argv = run_argv(params, runs)
    probe = supervise.sweep_cgroup(f"probe-{tag}")  # where one may be made, the run makes one
    if probe is not None:
        probe.rmdir()
    proc = start(argv, sweep_env)
    try:
        ranks = wait_for(lambda: len(held_ranks(tag)) == 2 and held_ranks(tag), 90,
                         "ranks of the held solve")
        groups = {Path(f"/proc/{pid}/cgroup").read_text().splitlines()[-1].split("::")[-1]
                  for pid in ranks}
        os.kill(proc.pid, signal.SIGKILL)  # what no handler can catch
        proc.communicate(timeout=30)
        # the watcher (marked too) stops the rest, removes the cgroup, then exits: wait for
        # all of it, generously (a loaded machine), then check what is left
        made = [probe.parent / Path(g).name for g in groups
                if probe is not None and Path(g).name.startswith("burstbench-")]
        deadline = time.monotonic() + 60
        while (((left := marked(tag)) or any(c.exists() for c in made))
               and time.monotonic() < deadline):
            time.sleep(0.05)
    finally:
        proc.kill()
        kill_all(tag)
    assert left == [], left
    if probe is not None:  # the ranks were in the sweep's own cgroup, emptied and removed
        (group,) = groups
        assert Path(group).name.startswith("burstbench-")
        assert not (probe.parent / Path(group).name).exists()
    (run_dir,) = (runs / "one").iterdir()
    dead = locks.read(run_dir / locks.RUN_LOCK)
    assert dead is not None and dead.pid == proc.pid  # left behind, its holder gone

    release.touch()
    again = run(argv, sweep_env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stderr.splitlines()[:2] == [
        f"took over the stale lock {run_dir / locks.RUN_LOCK}: {dead} is gone",
        f"took over the stale lock {tmp_path / 'host' / locks.HOST_LOCK}: {dead} is gone"]
    assert [p.name for p in (runs / "one").iterdir()] == [run_dir.name], "resumed, not new"
    assert json.loads((run_dir / "provenance.json").read_text())["benchmarks"]["biccg"][
        "status"] == "complete"
    assert not (run_dir / locks.RUN_LOCK).exists()
    assert not (tmp_path / "host" / locks.HOST_LOCK).exists()
    assert marked(tag) == []


@pytest.mark.slow
def test_a_live_run_has_one_writer_and_a_host_one_sweep_the_next_waits_or_is_refused(
        tmp_path, sweep_env):
    tag = sweep_env[MARKER]
    params, release = held_params(tmp_path)
    runs, other = tmp_path / "runs", tmp_path / "other-runs"
    first = start(run_argv(params, runs), sweep_env)
    waiter = stopped = None
    try:
        wait_for(lambda: len(held_ranks(tag)) == 2, 90, "ranks of the held solve")
        (run_dir,) = (runs / "one").iterdir()
        holder = locks.read(run_dir / locks.RUN_LOCK)
        assert holder is not None and holder.pid == first.pid

        same = run(run_argv(params, runs), sweep_env)  # resumes the live run: refused
        assert (same.returncode, same.stderr) == (2, (
            f"error: run {run_dir} is being written by {holder}: one writer per run folder; "
            "wait for it to end, or stop it\n"))

        beside = run(run_argv(params, other), sweep_env)  # another folder, the same host
        assert (beside.returncode, beside.stderr) == (2, (
            f"error: another sweep is measuring on this host: {holder}, measuring into "
            f"{run_dir}; one measurement per host at a time: wait for it to end, or pass "
            "--wait\n"))
        assert not (other / "one").exists() or not any((other / "one").iterdir())

        waiting = (f"waiting for the sweep measuring on this host: {holder}, measuring into "
                   f"{run_dir}\n")
        stopped = start(run_argv(params, other, "--wait"), sweep_env)
        assert stopped.stderr.readline() == waiting
        stopped.terminate()  # a stop while waiting: nothing measured, nothing held
        assert stopped.communicate(timeout=60)[1] == ("stopped by SIGTERM while waiting: "
                                                      "nothing was measured\n")
        assert stopped.returncode == 143 and not any((other / "one").iterdir())

        waiter = start(run_argv(params, other, "--wait"), sweep_env)
        assert waiter.stderr.readline() == waiting
        assert len(held_ranks(tag)) == 2  # the first still measures, alone
        release.touch()
        out, err = first.communicate(timeout=300)
        assert first.returncode == 0, err[-2000:]
        out, err = waiter.communicate(timeout=300)
        assert waiter.returncode == 0, err[-2000:]
        assert "waiting for" not in err  # said once
        (waited,) = (other / "one").iterdir()
        assert f"done: {waited}" in out
    finally:
        for p in (first, waiter, stopped):
            if p is not None:
                p.kill()
        kill_all(tag)
    assert marked(tag) == []
    assert not (tmp_path / "host" / locks.HOST_LOCK).exists()


def test_a_lock_from_another_host_is_not_judged_without_force(tmp_path, sweep_env):
    params, _ = held_params(tmp_path)
    run_dir = tmp_path / "runs" / "one" / "r1"
    away = locks.Holder("node7", 4242, 1234, "2026-11-26T01:00:00+00:00", "boot-7", "t7",
                        str(run_dir))
    assert locks.acquire(run_dir / locks.RUN_LOCK, away, lambda s, w: w) == ""
    proc = run(run_argv(params, tmp_path / "runs", "--run-id", "r1"), sweep_env)
    assert (proc.returncode, proc.stderr) == (2, (
        f"error: run {run_dir} is locked by pid 4242 on host node7 (since "
        "2026-11-26T01:00:00+00:00): a lock from another host is not judged stale from here; "
        "if that sweep is dead there, resume with --force\n"))
    mine = locks.me("t8", run_dir)
    assert locks.acquire(run_dir / locks.RUN_LOCK, mine, lambda s, w: w, force=True) == (
        f"took over the lock {run_dir / locks.RUN_LOCK} from another host (--force): pid 4242 "
        "on host node7 (since 2026-11-26T01:00:00+00:00)")
    assert locks.read(run_dir / locks.RUN_LOCK) == mine


def test_a_lock_from_before_the_last_boot_or_of_a_gone_pid_is_stale(tmp_path):
    path = tmp_path / "x.lock"
    gone = subprocess.Popen(["true"])
    gone.wait()
    mine = locks.me("mine", tmp_path)
    booted = locks.Holder(HOST, os.getpid(), mine.start, mine.since, "another-boot", "b", "r")
    dead = locks.Holder(HOST, gone.pid, 1, "2026-11-26T01:00:00+00:00", locks.boot_id(), "d",
                        "r")
    assert locks.judge(booted) == ("stale", f"{booted} took it before this machine's last boot")
    assert locks.judge(dead) == ("stale", f"{dead} is gone")
    assert locks.judge(mine) == ("alive", str(mine))
    locks.acquire(path, dead, lambda s, w: w)
    assert locks.acquire(path, mine, lambda s, w: w) == f"took over the stale lock {path}: " \
                                                         f"{dead} is gone"
    with pytest.raises(locks.Busy, match=f"^alive: {re.escape(str(mine))}$"):
        locks.acquire(path, locks.me("other", tmp_path), lambda s, w: f"{s}: {w}")
    locks.release(path, "other")  # not its lock: kept
    assert locks.read(path) == mine
    locks.release(path, "mine")
    assert not path.exists()


def test_a_lock_lives_while_any_process_of_its_sweep_lives(tmp_path):
    """The holder gone, a process carrying its token (a kernel, a rank) still holds it."""
    token = uuid.uuid4().hex
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env=os.environ | {locks.SWEEP_ENV: token})
    try:
        gone = subprocess.Popen(["true"])
        gone.wait()
        h = locks.Holder(HOST, gone.pid, 1, "2026-11-26T01:00:00+00:00", locks.boot_id(), token,
                         "r")
        wait_for(lambda: locks.sweep_pids(token), 30, "the sweep's process")
        assert locks.judge(h) == ("alive", f"{h}: its pid is gone, but pid {child.pid} of its "
                                           "sweep still runs")
    finally:
        child.kill()
        child.wait()
    assert locks.judge(h) == ("stale", f"{h} is gone")


def test_a_configuration_measured_while_others_take_the_cores_is_flagged_and_counted(
        tmp_path):
    cores = os.cpu_count() or 1
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        task = runner.Task("k", {"label": "alone?"},
                           (sys.executable, "-c", "import time; time.sleep(1.5)"))
        run = store.Run(tmp_path / "runs" / "vm" / "r1")
        result = runner.run_tasks([task], run, "demo", lambda t, o, e: (
            [{"metric": "m", "value": 1.0, "unit": "s"}], [], "ok"), progress=False)
    finally:
        for p in spin:
            p.kill()
            p.wait()
    assert result.contended == 1
    table = run.finalize("demo")
    assert table["contended"].tolist() == [True]
    assert table["others_cpu"].iloc[0] > contention.CONTENDED_SHARE
    run.set_section("demo", status="complete", planned=1)
    loaded = store.load(tmp_path / "runs", "demo")
    assert loaded.runs[0]["contended"] == 1
    assert f"{run.root}: demo: 1 of 1 configurations contended (other processes took more " \
           "than 25% of the machine's CPU while they ran): not this VM's best without a " \
           "second run" in loaded.problems


def test_the_contention_verdict():
    quiet = contention.Sample(0.0, 100.0, 10.0)
    assert contention.others_share(quiet, contention.Sample(2.0, 101.0, 11.0), cores=2) == 0.0
    busy = contention.Sample(2.0, 103.0, 11.0)  # others: 2 of the 4 core-seconds
    assert contention.others_share(quiet, busy, cores=2) == 0.5
    assert contention.is_contended(0.5, 2.0, cores=2)
    assert not contention.is_contended(0.25, 2.0, cores=2)  # "more than" a quarter
    assert not contention.is_contended(0.5, 0.02, cores=2)  # a tick or two: not judged
    assert contention.others_share(quiet, contention.Sample(2.0, None, 11.0)) is None


def finalized_run(runs: Path) -> store.Run:
    """A run of one configuration, finalized complete, written by the store as a sweep does."""
    run = store.Run(runs / "vm" / "r1")
    store.plan_run(runs, "vm", "r1", {"demo": ("d", {})})
    run.save("demo", "k1", [{"key": "k1", "metric": "m", "value": 1.0, "unit": "s",
                             "run_id": "r1", "vm": "vm", "benchmark": "demo", "label": "a"}],
             [], ())
    run.finalize("demo")
    run.set_section("demo", status="complete", planned=1)
    return run


def test_collect_refuses_a_run_written_after_it_was_finalized_or_whose_writer_lives(
        tmp_path, cli):
    run = finalized_run(tmp_path / "from-vm")
    late = run.parts_dir("demo") / "k2.json"  # an orphan went on measuring into it
    late.parent.mkdir()
    late.write_text(json.dumps({"key": "k2", "rows": [], "raw": []}))
    os.utime(late, ns=(time.time_ns() + 10**9,) * 2)  # newer than the table, however coarse
    proc = cli("-m", "burstbench", "collect", str(run.root), "--runs-dir", str(tmp_path / "all"))
    assert proc.returncode == 1
    assert proc.stderr == (f"refused {run.root}: demo.parts/ holds 1 part file(s) newer than "
                           "demo.csv, written after the run was finalized as complete (a "
                           "second writer?)\n")

    late.unlink()
    late.parent.rmdir()
    me = locks.me("live", run.root)
    locks.acquire(run.root / locks.RUN_LOCK, me, lambda s, w: w)
    proc = cli("-m", "burstbench", "collect", str(run.root), "--runs-dir", str(tmp_path / "all"))
    assert proc.returncode == 1
    assert proc.stderr == (f"refused {run.root}: its writer's lock is held by {me}: the run "
                           "may still be written; collect it once that sweep has ended\n")

    locks.release(run.root / locks.RUN_LOCK, "live")
    away = locks.Holder("node7", 4242, 1, "2026-11-26T01:00:00+00:00", "b7", "t7", "r1")
    locks.acquire(run.root / locks.RUN_LOCK, away, lambda s, w: w)
    proc = cli("-m", "burstbench", "collect", str(run.root), "--runs-dir", str(tmp_path / "all"))
    assert proc.returncode == 1
    assert proc.stderr == (f"refused {run.root}: its writer's lock is held by {away}, another "
                           "host: the run may still be written there; collect it once that "
                           f"sweep has ended (or remove {run.root / locks.RUN_LOCK} if it "
                           "died)\n")

    (run.root / locks.RUN_LOCK).unlink()  # as the message says
    proc = cli("-m", "burstbench", "collect", str(run.root), "--runs-dir", str(tmp_path / "all"))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "all" / "vm" / "r1").iterdir()) == [
        "demo.csv", "demo.jsonl", "provenance.json"]


def mount_tmpfs(folder: Path, size: str) -> None:
    """A tmpfs of `size` at `folder` (remounted when there already), or skip where this
    process may not mount."""
    folder.mkdir(exist_ok=True)
    opts = ["-o", f"remount,size={size}"] if os.path.ismount(folder) else ["-o", f"size={size}"]
    proc = subprocess.run(["mount", "-t", "tmpfs", *opts, "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {proc.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    yield disk
    subprocess.run(["umount", str(disk)], capture_output=True)


def test_a_full_disk_stops_the_sweep_at_its_first_write_and_the_run_resumes(small_disk):
    from burstbench.core import sweep

    mount_tmpfs(small_disk, "96k")
    tasks = [runner.Task(f"k{i}", {"label": f"t{i}"}, (sys.executable, "-c", "pass"))
             for i in range(3)]
    plan = sweep.Plan(tasks, variants=[])
    blob = "x" * 40_000  # each configuration's raw record: two fit, the third does not

    def parse(task, out, err):
        return [{"metric": "m", "value": 1.0, "unit": "s", "label": task.key}], [
            {"blob": blob}], "ok"

    run = store.Run(small_disk / "vm" / "r1")
    store.plan_run(small_disk, "vm", "r1", {"demo": ("d", {})})
    with pytest.raises(store.NoSpace, match=rf"^no space left on {re.escape(str(run.root))} "
                                            r"\(\d+ bytes free\)$"):
        sweep.execute(run, plan, "demo", parse, (), progress=False)
    stored = run.done_keys("demo")
    assert 0 < len(stored) < 3
    assert not list(run.root.rglob("*.tmp"))  # no half-written file left
    for part in run.parts_dir("demo").glob("*.json"):
        assert json.loads(part.read_text())["raw"] == [{"blob": blob}]
    mount_tmpfs(small_disk, "4m")
    table = sweep.execute(run, plan, "demo", parse, (), progress=False)
    assert sorted(table["key"]) == ["k0", "k1", "k2"]
    assert store.validate_run(run.root) == []


@pytest.mark.slow
def test_a_full_disk_ends_the_run_in_one_line_and_the_printed_command_resumes_it(
        small_disk, tmp_path, sweep_env):
    params, release = held_params(tmp_path)
    release.touch()
    mount_tmpfs(small_disk, "64k")  # the provenance fits, the executed notebook does not
    argv = run_argv(params, small_disk)
    proc = run(argv, sweep_env)
    (run_dir,) = (small_disk / "one").iterdir()
    assert proc.returncode == 1
    resume = argv[:-1] + ["--run-id", run_dir.name, "--quiet"]
    assert re.fullmatch(rf"error: no space left on {re.escape(str(run_dir))} \(\d+ bytes "
                        rf"free\): free space and resume with: {re.escape(shlex.join(resume))}",
                        proc.stderr.splitlines()[-1]), proc.stderr[-3000:]
    assert "FAILED" not in proc.stderr
    for nb in run_dir.glob("*.ipynb"):  # none left empty or cut
        json.loads(nb.read_text())
    assert not (run_dir / locks.RUN_LOCK).exists()
    mount_tmpfs(small_disk, "8m")
    again = run(resume, sweep_env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert store.validate_run(run_dir) == []
    assert json.loads((run_dir / "provenance.json").read_text())["benchmarks"]["biccg"][
        "status"] == "complete"


def test_a_sweep_run_by_hand_holds_the_locks_itself(tmp_path, monkeypatch):
    """A notebook run in JupyterLab measures too: its sweep takes the run's and the host's
    locks (under `burstbench run` the run holds them, and says so by the sweep's token)."""
    from burstbench.core import sweep

    monkeypatch.setenv(locks.LOCK_DIR_ENV, str(tmp_path / "host"))
    monkeypatch.delenv(locks.SWEEP_ENV, raising=False)
    plan = sweep.Plan([runner.Task("k0", {"label": "t0"}, (sys.executable, "-c", "pass"))], [])

    def parse(task, out, err):
        held = locks.read(locks.host_lock_path())
        assert held is not None and held.token == os.environ[locks.SWEEP_ENV]
        return [{"metric": "m", "value": 1.0, "unit": "s", "label": "t0"}], [], "ok"

    other = locks.me("other", tmp_path / "elsewhere")
    locks.acquire(locks.host_lock_path(), other, lambda s, w: w)
    run = store.Run(tmp_path / "runs" / "vm" / "r1")
    with pytest.raises(store.StoreError) as refused:
        sweep.execute(run, plan, "demo", parse, (), progress=False)
    assert str(refused.value) == (
        f"another sweep is measuring on this host: {other}, measuring into "
        f"{tmp_path / 'elsewhere'}; one measurement per host at a time: wait for it to end, "
        "or pass --wait")
    assert not (run.root / locks.RUN_LOCK).exists()  # released with the refusal
    locks.release(locks.host_lock_path(), "other")
    assert sorted(sweep.execute(run, plan, "demo", parse, (), progress=False)["key"]) == ["k0"]
    assert not (run.root / locks.RUN_LOCK).exists()
    assert not locks.host_lock_path().exists() and locks.SWEEP_ENV not in os.environ


def test_collect_takes_a_run_stopped_before_it_could_fold_its_parts(tmp_path):
    """A kernel killed outright leaves parts newer than an earlier table, and `run` marks the
    benchmark interrupted, unfolded: that is a run to resume, not a second writer's."""
    run = finalized_run(tmp_path / "from-vm")
    run.save("demo", "k2", [{"key": "k2", "metric": "m", "value": 2.0, "unit": "s",
                             "run_id": "r1", "vm": "vm", "benchmark": "demo", "label": "b"}],
             [], ())
    os.utime(run.parts_dir("demo") / "k2.json", ns=(time.time_ns() + 10**9,) * 2)
    run.set_section("demo", status="running", planned=2)  # resumed, then killed outright
    assert supervise.mark_stopped(run.root, ["demo"], "interrupted") == \
        "demo 2 of 2 (interrupted)"
    added, _, refused = store.collect([run.root], tmp_path / "all")
    assert refused == [] and added == ["vm/r1 (incomplete: demo interrupted, 2 of 2 "
                                       "configurations stored)"]


def test_the_host_lock_is_one_for_every_user_of_the_host(monkeypatch):
    """Any user's sweep takes over another user's stale host lock: the shared folder is
    writable by all, without the sticky bit that would forbid replacing another's file."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as a second user")
    top = Path(tempfile.mkdtemp(dir="/tmp"))  # /tmp/pytest-of-root is not for other users
    try:
        top.chmod(0o755)
        shared = top / "burstbench-locks"
        monkeypatch.setattr(locks, "HOST_LOCK_DIR", str(shared))
        gone = subprocess.Popen(["true"])
        gone.wait()
        dead = locks.Holder(HOST, gone.pid, 1, "2026-11-26T01:00:00+00:00", locks.boot_id(),
                            "d", "r")
        locks.acquire(shared / locks.HOST_LOCK, dead, lambda s, w: w)  # root's, then gone
        assert shared.stat().st_mode & 0o7777 == 0o777
        code = ("import sys; from burstbench.core import locks; "
                "print(locks.take_host(locks.me('n', 'mine')))")
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                              text=True, timeout=60,
                              env=os.environ | {locks.LOCK_DIR_ENV: str(shared)})
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == f"took over the stale lock {shared / locks.HOST_LOCK}: {dead} " \
                              "is gone\n"
        assert locks.read(shared / locks.HOST_LOCK).token == "n"
    finally:
        shutil.rmtree(top)


@pytest.mark.slow
def test_a_report_rebuild_takes_no_lock(tmp_path, cli, monkeypatch):
    """Only measuring is one at a time: the report reads data/ and rebuilds while a sweep
    holds the host."""
    monkeypatch.setenv(locks.LOCK_DIR_ENV, str(tmp_path / "host"))
    sweep = locks.me("measuring", tmp_path / "a-run")
    locks.acquire(locks.host_lock_path(), sweep, lambda s, w: w)
    proc = cli("-m", "burstbench", "report", "--figures-dir", str(tmp_path / "figures"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "measuring on this host" not in proc.stdout + proc.stderr
    assert locks.read(locks.host_lock_path()) == sweep
