"""MPI ping-pong: two ranks through mpiexec, OSU methods, validation, MPI builds, bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import OMPI_MPICC, OMPI_MPIEXEC, needs_openmpi

from burstbench import params
from burstbench.benchmarks import pingpong
from burstbench.benchmarks.pingpong.results import extremes
from burstbench.core import sweep
from kernels_ext import pingpong as kp
from kernels_ext.common import mpi as kernel_mpi

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.mpi
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec")
OMPI_LIB = "/usr/lib/x86_64-linux-gnu/libmpi.so.40"
OMPI_ENV = {"MPI4PY_LIBMPI": OMPI_LIB, "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
needs_mpiexec = pytest.mark.skipif(not os.access(MPIEXEC, os.X_OK),
                                   reason="no mpiexec in the environment (pip install mpich)")


def mpirun(*args: str, n: int = 2, env: dict | None = None, mpiexec: str = MPIEXEC,
           timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([mpiexec, "-n", str(n), sys.executable, "-m", "kernels_ext.pingpong",
                           *args], capture_output=True, text=True, cwd=ROOT,
                          env=os.environ | (env or {}), timeout=timeout)


def records(proc) -> list[dict]:
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


FAST = ["--iterations", "200", "--skip", "10", "--iterations-large", "20", "--skip-large", "2"]


@needs_mpiexec
def test_latency_one_line_per_size():
    recs = records(mpirun("--test", "latency", "--max-size", "1024", *FAST))
    assert [r["size_bytes"] for r in recs] == [0] + [2**i for i in range(11)]
    for r in recs:
        assert r["latency_us"] > 0 and r["iterations"] == 200 and r["skip"] == 10
        assert r["mpi_label"].startswith("mpich") and r["impl"] == "c"
        assert [x["rank"] for x in r["ranks"]] == [0, 1] and r["hosts"] == 1


@needs_mpiexec
@pytest.mark.parametrize("test", ["bw", "bibw"])
def test_bandwidth_grows_with_size_over_the_small_range(test):
    recs = records(mpirun("--test", test, "--max-size", "1024", *FAST))
    bw = {r["size_bytes"]: r["bandwidth_gbs"] for r in recs}
    assert list(bw) == [2**i for i in range(11)]
    assert all(v > 0 for v in bw.values())
    # per-message cost dominates small sizes: 1024 times the bytes, far more rate (steps of
    # 16 were once reversed by a rank descheduled on a loaded 2-core VM, and a size's
    # window of a few ms can lose more than 32x to it: only the range's ends are compared)
    assert bw[1] < bw[1024]
    assert recs[0]["window"] == 64


@needs_mpiexec
@pytest.mark.parametrize("test", ["latency", "bw", "bibw"])
@pytest.mark.parametrize("impl", ["c", "mpi4py"])
def test_validation_mode_passes(test, impl):
    recs = records(mpirun("--test", test, "--max-size", "65536", "--validate", "--impl", impl,
                          "--iterations", "5", "--iterations-large", "2"))
    assert all(r["validated"] is True and r["errors"] == 0 for r in recs)
    assert recs[-1]["size_bytes"] == 65536


@needs_mpiexec
def test_osu_iteration_counts_switch_at_8k():
    recs = records(mpirun("--test", "bw", "--min-size", "4096", "--max-size", "16384"))
    counts = {r["size_bytes"]: (r["iterations"], r["skip"]) for r in recs}
    assert counts == {4096: (100, 10), 8192: (100, 10), 16384: (20, 2)}  # osu_bw defaults


def test_osu_defaults_and_sizes():
    assert kp.method("latency") == {"iterations": 10000, "skip": 100, "iterations_large": 1000,
                                    "skip_large": 10, "window": 1}
    assert kp.method("bw")["window"] == 64 and kp.method("bibw")["iterations_large"] == 20
    assert kp.message_sizes("latency", max_size=8) == [0, 1, 2, 4, 8]
    assert kp.message_sizes("bw", max_size=8) == [1, 2, 4, 8]
    assert kp.message_sizes("latency")[-1] == 4 * 2**20
    assert kp.parse_size("64K") == 65536 and kp.parse_size("4MiB") == 4 * 2**20


@pytest.mark.parametrize("args,message", [
    (("latency", None, 1000), "not a power of two"),
    (("latency", 3, 1024), "not a power of two"),
    (("bw", 0, 1024), "at least 1 byte"),
    (("latency", 1024, 16), "larger than max-size"),
    (("latency", 0, 2**31), "out of range"),
    (("ping", 0, 8), "unknown test"),
])
def test_bad_sizes(args, message):
    with pytest.raises(kp.BadInput, match=message):
        kp.message_sizes(*args)


@needs_mpiexec
@pytest.mark.parametrize("args,n,message", [
    ((), 3, "exactly 2 MPI ranks, got 3"),
    ((), 1, "exactly 2 MPI ranks, got 1"),
    (("--max-size", "1000"), 2, "not a power of two"),
    (("--test", "bw", "--min-size", "0"), 2, "at least 1 byte"),
    (("--max-size", "2G"), 2, "out of range"),
    (("--iterations", "0"), 2, "iterations must be at least 1"),
])
def test_bad_input_is_one_error_line_and_nonzero_exit(args, n, message):
    proc = mpirun(*args, n=n, timeout=60)
    assert proc.returncode != 0
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and message in errors[0]  # printed once, by rank 0
    assert proc.stdout.strip() == ""


#: The CLI with the C kernel hidden, as where no MPI was found at install time.
WITHOUT_KERNEL = """
import importlib.util, sys
real = importlib.util.find_spec
hidden = "kernels_ext.pingpong._pingpong"
importlib.util.find_spec = lambda name, *a: None if name == hidden else real(name, *a)
sys.modules[hidden] = None
from kernels_ext import pingpong
sys.exit(pingpong.main(sys.argv[1:]))
"""


def test_info_names_the_kernels_mpi_build():
    proc = subprocess.run([sys.executable, "-m", "kernels_ext.pingpong", "--info"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["impl"] == "c"
    assert info["mpi_family"] in ("mpich", "openmpi") and info["mpi_library_version"]
    assert info["mpi_build"].split()[0] in ("MPICH", "Open", "Intel", "MVAPICH2")


def test_python_baseline_and_info_work_without_the_kernel_on_one_rank():
    """With the C kernel missing, --impl mpi4py still runs (its --info here) and the C
    kernel's absence is one clear line, exit status 2."""
    base = [sys.executable, "-c", WITHOUT_KERNEL]
    proc = subprocess.run(base + ["--impl", "mpi4py", "--info"], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["impl"] == "mpi4py" and "mpi_build" not in info
    assert info["mpi_family"] in ("mpich", "openmpi")
    proc = subprocess.run(base + ["--info"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "kernels_ext.pingpong._pingpong is not built" in proc.stderr
    assert "Traceback" not in proc.stderr


@needs_openmpi
def test_kernel_built_for_another_mpi_is_refused_by_name():
    proc = subprocess.run([sys.executable, "-m", "kernels_ext.pingpong", "--info", "--compiler",
                           OMPI_MPICC], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 4
    assert "built for the openmpi ABI but mpi4py loaded 'MPICH" in proc.stderr
    assert "Traceback" not in proc.stderr


@needs_openmpi
def test_open_mpi_from_debian_works_as_a_variant():
    recs = records(mpirun("--compiler", OMPI_MPICC, "--max-size", "64", *FAST,
                          mpiexec=OMPI_MPIEXEC, env=OMPI_ENV))
    assert recs[0]["mpi_label"].startswith("openmpi") and recs[0]["mpi_build"].startswith("Open")
    assert all(r["latency_us"] > 0 for r in recs)


@needs_openmpi
def test_cmake_builds_the_kernel_against_a_system_mpi(tmp_path):
    """The project's CMakeLists.txt, pointed at Debian's Open MPI, builds a working module."""
    build = tmp_path / "build"
    env = os.environ | {"PATH": f"{BIN}:{os.environ['PATH']}"}
    cmake = shutil.which("cmake", path=env["PATH"])
    subprocess.run([cmake, "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                    f"-DMPI_C_COMPILER={OMPI_MPICC}", f"-DPython_EXECUTABLE={sys.executable}"],
                   check=True, capture_output=True, env=env)
    subprocess.run([cmake, "--build", str(build), "--target", "_pingpong"], check=True,
                   capture_output=True, env=env)
    (module,) = build.glob("_pingpong*.so")
    assert kernel_mpi.built_family(module) == "openmpi"
    script = tmp_path / "run.py"
    script.write_text(
        "from kernels_ext.common import mpi, variants\n"
        "MPI = mpi.init_mpi()\n"
        f"m = variants.load({str(module)!r}, 'pingpong')\n"
        "r = m.run(MPI.COMM_WORLD, 'latency', [0, 8], 100, 5, 10, 1, 1)\n"
        "if MPI.COMM_WORLD.rank == 0: print(m.build_mpi()['version'], r[1]['value'] > 0)\n")
    proc = subprocess.run([OMPI_MPIEXEC, "-n", "2", sys.executable, str(script)],
                          capture_output=True, text=True, env=os.environ | OMPI_ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:2] == ["Open", "MPI"] and proc.stdout.split()[-1] == "True"


# -- the sweep ---------------------------------------------------------------------------

def pp_params(tmp_path, **over) -> dict:
    base = {"vm": "t", "runs_dir": str(tmp_path), "pingpong_max_size": 1024,
            "pingpong_iterations": 20, "pingpong_skip": 2, "pingpong_iterations_large": 2,
            "pingpong_skip_large": 1, "pingpong_repetitions": 1, "pingpong_timeout_s": 60,
            "pingpong_placements": ["same-socket"], "pingpong_tests": ["latency", "bw"]}
    return params.validate(base | over, "pingpong")


@needs_mpiexec
def test_sweep_stores_rows_and_validation_checks(tmp_path):
    run, table = pingpong.SPEC.measure(pp_params(tmp_path), progress=False)
    checks = table[table["metric"] == "validation_errors"]
    assert len(checks) > 0 and (checks["value"] == 0).all()
    lat = table[table["metric"] == "latency"]
    assert set(lat["unit"]) == {"us"} and set(lat["impl"]) == {"c", "mpi4py"}
    assert set(table.loc[table["metric"] == "bandwidth", "unit"]) == {"GB/s"}
    assert lat["message_size"].min() == 0 and lat["message_size"].max() == 1024
    assert (table["ranks"] == 2).all() and set(table["placement"]) == {"same-socket"}
    sec = run.section("pingpong")
    assert sec["status"] == "complete" and sec["variants"][0]["mpi_library_version"]
    ext = extremes(pingpong.spread(table))
    assert set(ext["test"]) == {"latency", "bw"} and (ext["value"] > 0).all()


@needs_mpiexec
def test_missing_and_failing_mpiexec(tmp_path):
    with pytest.raises(params.ParamError, match="mpiexec '/no/such/mpiexec' not found"):
        pingpong.plan(pp_params(tmp_path, pingpong_combinations=[
            {"mpiexec": "/no/such/mpiexec"}]))
    pl = pingpong.plan(pp_params(tmp_path, pingpong_combinations=[
        {"mpiexec": "mpiexec"}, {"mpiexec": "/no/such/mpiexec", "optional": True}]))
    assert any("/no/such/mpiexec" in n for n in pl.notes)
    with pytest.raises(params.ParamError) as err:  # the launcher's own message is shown
        pingpong.plan(pp_params(tmp_path, pingpong_combinations=[
            {"mpiexec": "mpiexec", "args": ["-no-such-option"]}]))
    assert "no-such-option" in str(err.value)


@needs_mpiexec
def test_unreachable_hosts_fail_within_the_timeout(tmp_path):
    p = pp_params(tmp_path, pingpong_validate=False, pingpong_timeout_s=20,
                  pingpong_tests=["latency"], pingpong_baselines=[],
                  pingpong_placements=[{"label": "far",
                                        "hosts": ["nohost-a.invalid", "nohost-b.invalid"]}])
    t0 = time.monotonic()
    with pytest.raises(sweep.SweepFailed, match="1 of 1 configurations failed"):
        pingpong.SPEC.measure(p, progress=False)
    # the plan's probe and the configuration each stop at the 20 s timeout: 40 s, with
    # room for a loaded machine's start-ups, far below the 300 s default's
    assert time.monotonic() - t0 < 90


@pytest.mark.parametrize("combo,message", [
    ({"mpiexec": "mpiexec", "lanucher": "hydra"}, "unknown key 'lanucher'"),
    ({"mpiexec": "mpiexec", "launcher": "srun"}, "launcher 'srun' is not one of"),
    ({"mpiexec": "mpiexec", "env": ["A=1"]}, "env must map"),
    ({"mpiexec": "mpiexec", "args": "-n 2"}, "args must be a list"),
    ({"mpiexec": ""}, "mpiexec must name a command"),
    ("mpiexec", "each combination is a mapping"),
])
def test_malformed_combination(combo, message):
    with pytest.raises(params.ParamError, match=message):
        params.validate({"pingpong_combinations": [combo]}, "pingpong")


@pytest.mark.parametrize("placement,message", [
    ("same-node", "unknown placement 'same-node'"),
    ({"label": "x", "cpus": [0]}, "two CPU numbers"),
    ({"label": "x", "hosts": []}, "one or two host names"),
    ({"cpus": [0, 1]}, "mapping with label"),
])
def test_malformed_placement(placement, message):
    with pytest.raises(params.ParamError, match=message):
        params.validate({"pingpong_placements": [placement]}, "pingpong")


@needs_mpiexec
@pytest.mark.parametrize("impl", ["c", "mpi4py"])
def test_huge_page_buffers_validate_and_are_recorded(impl):
    recs = records(mpirun("--test", "bw", "--min-size", "1M", "--max-size", "4M", "--validate",
                          "--hugepages", "--impl", impl, "--iterations-large", "3"))
    assert all(r["validated"] and r["hugepages"] is True for r in recs)


@needs_mpiexec
def test_hugepages_sweep_dimension_labels(tmp_path):
    """pingpong_hugepages [false, true] doubles the tasks; the huge-page ones, and only they,
    are labelled '+thp' (before '+mpi4py') and run the kernel with --hugepages."""
    p = pp_params(tmp_path, pingpong_hugepages=[False, True], pingpong_validate=False)
    assert p["pingpong_hugepages"] == [False, True]
    tasks = pingpong.plan(p).tasks
    thp = [t for t in tasks if "+thp" in t.config["label"]]
    assert thp and len(thp) * 2 == len(tasks)
    for t in tasks:
        assert ("--hugepages" in t.argv) == ("+thp" in t.config["label"])
    assert {t.config["label"].replace("+thp", "") for t in thp} == {
        t.config["label"] for t in tasks if t not in thp}
    with pytest.raises(params.ParamError, match="true or false"):
        params.validate({"pingpong_hugepages": ["yes"]}, "pingpong")
