"""Stopping by signal: Ctrl-C, SIGTERM and SIGHUP stop a run alike and leave nothing running;
a configuration dies with its kernel; a rank killed while its configuration runs fails only
that configuration.

Every process a test starts carries BURSTBENCH_TEST_MARKER=<a fresh tag> in its environment
(inherited by papermill, the kernel, mpiexec and the ranks), so survivors are found by
scanning /proc.

The moment of each signal does not depend on how fast this machine solves: the ranks of the
HELD problem start behind a gate (`held_mpiexec`), alive under their mpiexec and waiting
until the test creates a release file. A signal sent while they wait always lands in that
configuration, and a resume after the release always finishes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pandas as pd
import pytest
from test_batch import ROOT, write_params

from burstbench.benchmarks import biccg
from burstbench.benchmarks.biccg.tasks import PROBE_TOL
from burstbench.core import runner, signals, store

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="scans /proc for the processes a run leaves"),
              pytest.mark.mpi]

MARKER = "BURSTBENCH_TEST_MARKER"
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
HELD = "12"  # grid edge of the problem whose ranks wait at the gate
T = TypeVar("T")


def marked(tag: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment has MARKER=tag."""
    needle = f"{MARKER}={tag}".encode()
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and needle in (d / "environ").read_bytes().split(b"\0"):
                found.append((int(d.name), (d / "cmdline").read_bytes()
                              .replace(b"\0", b" ").decode(errors="replace")))
        except OSError:  # gone meanwhile, or a zombie
            continue
    return found


def held_mpiexec(folder: Path) -> tuple[Path, Path]:
    """(an mpiexec, its release file): the real mpiexec, except that the ranks of a HELD
    problem first wait at a gate until the release file exists, then become the solver
    (exec: same pid, same environment); the plan's probe (to PROBE_TOL) is no
    configuration and is not held. A launcher given by a combination may be any command:
    this one is a combination's `mpiexec`."""
    release, gate, wrapper = folder / "release", folder / "gate.py", folder / "mpiexec"
    gate.write_text(f"import os, sys, time\n"
                    f"while not os.path.exists({str(release)!r}):\n"
                    f"    time.sleep(0.02)\n"
                    f"os.execv(sys.argv[1], sys.argv[1:])\n")
    wrapper.write_text(f"#!{sys.executable}\n"
                       f"import os, sys\n"
                       f"argv = sys.argv[1:]\n"
                       f"grid = argv[argv.index('--poisson') + 1] if '--poisson' in argv else ''\n"
                       f"probe = '--tol' in argv and argv[argv.index('--tol') + 1] == "
                       f"{repr(PROBE_TOL)!r}\n"
                       f"if grid == {HELD!r} and not probe:\n"
                       f"    i = argv.index({sys.executable!r})\n"
                       f"    argv[i:i] = [{sys.executable!r}, {str(gate)!r}]\n"
                       f"os.execv({MPIEXEC!r}, [{MPIEXEC!r}, *argv])\n")
    wrapper.chmod(0o755)
    return wrapper, release


def held_ranks(tag: str) -> list[int]:
    """Pids of the ranks waiting at the gate (not their mpiexec)."""
    return [pid for pid, cmd in marked(tag) if "gate.py" in cmd and "mpiexec" not in cmd]


def wait_for(check: Callable[[], T], timeout: float, what: str) -> T:
    """Poll `check` until it returns something true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.05)
    return value


def kill_all(tag: str) -> None:
    """Clean up after a failed test: nothing it started may outlive it."""
    runner.signal_all([pid for pid, _ in marked(tag)], signal.SIGKILL)


def default_stop_signals() -> None:
    """A shell starts `nohup` and background jobs with SIGHUP / SIGINT ignored, which a run
    rightly respects; the child of a test must take them as a terminal's job does."""
    for signum in signals.STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


# "group": Ctrl-C in a terminal (SIGINT to the foreground job's process group); "run":
# scancel --batch, a hang-up, `kill` of the run; "every": Slurm's scancel and time limit,
# which signal every process of the job at once (the kernel and the ranks too). Two of them
# are resumed, once by running the same command again (the newest unfinished run with these
# parameters is resumed) and once by the printed command: each resume costs a notebook.
@pytest.mark.slow
@pytest.mark.parametrize("signum,code,target,resume", [
    (signal.SIGINT, 130, "group", "same"), (signal.SIGTERM, 143, "run", "printed"),
    (signal.SIGHUP, 129, "run", ""), (signal.SIGTERM, 143, "every", "")],
    ids=["Ctrl-C", "SIGTERM", "SIGHUP", "SIGTERM-to-every"])
def test_a_stop_signal_keeps_the_results_stops_everything_and_says_how_to_resume(
        tmp_path, signum, code, target, resume):
    tag = uuid.uuid4().hex
    mpiexec, release = held_mpiexec(tmp_path)
    params = write_params(tmp_path, "p.yaml", {
        "vm": "sig", "only": ["biccg"],
        "biccg_problems": [{"poisson": [8, 8, 8]}, {"poisson": [int(HELD)] * 3}],
        "biccg_combination": {"mpiexec": str(mpiexec), "launcher": "hydra"},
        "biccg_ranks_per_node": [2], "biccg_threads": [1], "biccg_baselines": [],
        "biccg_repetitions": 1})
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "burstbench", "run", "--params", str(params), "--runs-dir",
            str(runs), "--quiet"]
    env = os.environ | {MARKER: tag}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_stop_signals)
    try:
        wait_for(lambda: len(held_ranks(tag)) == 2, 90, "ranks of the held solve")
        if target == "group":
            os.killpg(proc.pid, signum)
        for pid in {"run": [proc.pid], "every": [p for p, _ in marked(tag)]}.get(target, []):
            # "every": one the signals before it already ended is gone (ProcessLookupError,
            # seen on a loaded machine): stopped as the test wants it, and `left` checks all
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        _, err = proc.communicate(timeout=60)
        left = marked(tag)  # at once: the run returns when all it started has ended
    finally:
        proc.kill()
        kill_all(tag)
    assert proc.returncode == code, err[-2000:]
    assert left == [], left
    (run_dir,) = (runs / "sig").iterdir()
    assert f"interrupted by {signal.Signals(signum).name}" in err and str(run_dir) in err
    assert "configurations stored: biccg 1 of 2 (interrupted)" in err, err[-2000:]
    prov = json.loads((run_dir / "provenance.json").read_text())
    assert prov["benchmarks"]["biccg"]["status"] == "interrupted"

    printed = shlex.split(err.split("resume with: ", 1)[1].splitlines()[0])
    assert printed == argv[:-1] + ["--run-id", run_dir.name, "--quiet"]
    if not resume:
        return
    release.touch()
    again = subprocess.run(argv if resume == "same" else printed, cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert [p.name for p in (runs / "sig").iterdir()] == [run_dir.name], "resumed, not new"
    table = pd.read_csv(run_dir / "biccg.csv")
    assert set(table["problem"]) == {"poisson8x8x8", f"poisson{HELD}x{HELD}x{HELD}"}
    assert table["key"].nunique() == 2 and not table.duplicated(["key", "metric"]).any()
    assert json.loads((run_dir / "provenance.json").read_text())["benchmarks"]["biccg"][
        "status"] == "complete"
    assert marked(tag) == []


def test_a_configuration_dies_with_the_kernel_that_started_it(tmp_path):
    """A SIGKILLed kernel cannot clean up: its mpiexec gets SIGTERM from the kernel's death
    (PR_SET_PDEATHSIG) and takes its ranks down."""
    tag = uuid.uuid4().hex
    mpiexec, _ = held_mpiexec(tmp_path)
    kernel = subprocess.Popen(
        [sys.executable, "-c", "import sys; from burstbench.core import runner; "
         "runner.launch(runner.Task('k', {}, tuple(sys.argv[1:]), timeout_s=120))",
         str(mpiexec), "-n", "2", sys.executable, "-m", "kernels_ext.biccg", "--poisson", HELD,
         HELD, HELD, "--threads", "1"], cwd=ROOT, env=os.environ | {MARKER: tag})
    try:
        wait_for(lambda: len(held_ranks(tag)) == 2, 60, "ranks")
        kernel.kill()
        kernel.wait(timeout=10)
        wait_for(lambda: not marked(tag), 60, "end of the orphaned configuration")
    finally:
        kernel.kill()
        kill_all(tag)


def test_a_rank_killed_while_its_configuration_runs_fails_it_and_the_sweep_goes_on(tmp_path):
    tag = uuid.uuid4().hex
    mpiexec, _ = held_mpiexec(tmp_path)

    def task(key: str, n: str) -> runner.Task:
        return runner.Task(key, {"label": key, "key": key},
                           (str(mpiexec), "-n", "2", sys.executable, "-m", "kernels_ext.biccg",
                            "--poisson", n, n, n, "--threads", "1"),
                           ((MARKER, tag), ("OMP_NUM_THREADS", "1")), timeout_s=120)

    killed = []

    def kill_one_rank() -> None:
        pid = wait_for(lambda: len(held_ranks(tag)) == 2 and held_ranks(tag), 60, "ranks")[-1]
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill_one_rank, daemon=True)
    killer.start()
    run = store.Run(tmp_path / "vm" / "r1")
    try:
        result = runner.run_tasks([task("held", HELD), task("fast", "8")], run, "biccg",
                                  biccg.parse, biccg.COLUMNS, progress=False)
        killer.join(timeout=10)
        left = marked(tag)
    finally:
        kill_all(tag)
    assert killed
    assert result.measured == 1 and not result.interrupted
    ((title, reason),) = result.failed
    assert title.startswith("held") and reason == "rank killed by signal 9 (SIGKILL)"
    assert run.done_keys("biccg") == {"fast"}
    assert left == [], left


class _DropsExceptions:
    """Delivers a SIGTERM to this process from a finalizer: Python runs the handler there,
    prints its exception as "Exception ignored in" and drops it, as it does in the at-fork
    hooks that every subprocess start runs (how a sweep once missed a Ctrl-C). SIGTERM, not
    SIGINT: a test session started in the background (`make test &`, nohup) inherits SIGINT
    ignored, and stop_signals rightly leaves an ignored signal ignored."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10000):  # bytecodes after the kill: the handler runs here
            pass


DROPPED = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@DROPPED
def test_a_stop_signal_whose_exception_was_dropped_still_stops_the_wait():
    proc = subprocess.Popen(["sleep", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    start = time.monotonic()
    try:
        with pytest.raises(signals.Interrupted) as caught:
            with signals.stop_signals():
                _DropsExceptions()  # dropped at once (no reference): the handler ran, in vain
                runner.wait(proc, timeout=30)
        assert caught.value.signum == signal.SIGTERM
        assert time.monotonic() - start < 25  # not the child's 60 s, nor the 30 s timeout
        with pytest.raises(signals.Interrupted):  # a block closed inside leaves the outer's
            with signals.stop_signals():
                with signals.stop_signals():
                    pass
                _DropsExceptions()
                runner.wait(proc, timeout=30)
    finally:
        proc.kill()
        proc.communicate()
    with subprocess.Popen(["sleep", "60"]) as quiet:  # no signal: the timeout, as communicate's
        with pytest.raises(subprocess.TimeoutExpired):
            runner.wait(quiet, timeout=0.3)
        quiet.kill()


@DROPPED
def test_a_sweep_stops_at_a_stop_signal_whose_exception_was_dropped(tmp_path):
    tasks = [runner.Task(key=f"k{i}", config={"label": f"t{i}"},
                         argv=(sys.executable, "-c", "pass")) for i in range(3)]

    def parse(task: runner.Task, out: str, err: str):
        if task.key == "k0":  # the signal comes while the first result is parsed
            _DropsExceptions()
        return [{"key": task.key, "metric": "m", "value": 1.0}], [], "ok"

    run = store.Run(tmp_path / "vm" / "r1")
    result = runner.run_tasks(tasks, run, "triad", parse, progress=False)
    assert result.interrupted and result.measured == 1
    assert run.done_keys("triad") == {"k0"}  # the first is kept, the others never started


def test_a_task_s_clean_up_runs_when_it_fails_times_out_or_is_stopped_never_on_success(
        tmp_path):
    """What a killed configuration leaves (a storage benchmark's half-written files) is
    removed by its clean-up, after its processes are gone; a clean run keeps it."""
    left = tmp_path / "left.dat"

    def task(code: str, timeout: float = 30) -> runner.Task:
        left.write_text("half written")
        return runner.Task("k", {"label": "k"}, (sys.executable, "-c", code), (), timeout,
                           cleanup=left.unlink)

    runner.launch(task("pass"))
    assert left.exists()
    with pytest.raises(runner.TaskFailed, match="exit status 1"):
        runner.launch(task("raise SystemExit(1)"))
    assert not left.exists()
    with pytest.raises(runner.TaskFailed, match="no result within the timeout of 0.5 s"):
        runner.launch(task("import time; time.sleep(60)", timeout=0.5))
    assert not left.exists()
    t = task("import time; time.sleep(60)")
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    with signals.stop_signals(), pytest.raises(signals.Interrupted):
        timer.start()
        runner.launch(t)
    assert not left.exists()
    gone = task("raise SystemExit(1)")
    left.unlink()  # the clean-up will not find it: the failure says so, beside its reason
    with pytest.raises(runner.TaskFailed, match=r"exit status 1 \(and its clean-up failed: "
                                                r".*left.dat"):
        runner.launch(gone)
