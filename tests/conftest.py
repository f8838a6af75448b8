"""Shared fixtures: an isolated variant cache, a CLI runner, one smoke run for many tests,
and what MPI this machine can really build with."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from gfarm_cluster import gfarm  # noqa: F401 (the session fixture: a real Gfarm, started once)
from slurm_cluster import slurm  # noqa: F401 (a real Slurm per module that asks for it)

from burstbench.core import budget
from kernels_ext.common.errors import first_error_line

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Variants built by the tests go to a temporary cache, not the user's."""
    cache = tmp_path_factory.mktemp("variant-cache")
    old = os.environ.get("BURSTBENCH_CACHE")
    os.environ["BURSTBENCH_CACHE"] = str(cache)
    os.environ["BURSTBENCH_PROGRESS"] = "lines"
    # this session's host measurement lock (burstbench.core.locks): not a sweep of the user's
    os.environ["BURSTBENCH_LOCK_DIR"] = str(tmp_path_factory.mktemp("host-lock"))
    yield cache
    if old is None:
        os.environ.pop("BURSTBENCH_CACHE", None)
    else:
        os.environ["BURSTBENCH_CACHE"] = old


#: What a budget puts in this process's environment.
BUDGET_ENV = (budget.DEADLINE_ENV, budget.TIER_ENV)


@pytest.fixture(autouse=True)
def _no_budget_left_behind():
    """A test that leaves a budget's deadline in this process's environment stops every
    later sweep of the session at it, and every batch job they start: a ten-minute deadline
    one test left (monkeypatch restoring the value the CLI had set) stopped 34 tests twenty
    minutes later, far from their cause.  The test that leaves one fails here, by name."""
    before = {k: os.environ.get(k) for k in BUDGET_ENV}
    yield
    left = {k: os.environ[k] for k in BUDGET_ENV if os.environ.get(k) != before[k]}
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    assert not left, f"the test left a budget in the environment: {left}"


#: Markers a test gets from the fixtures it uses: what it starts decides how slow it is.
FIXTURE_MARKERS = {"slurm": ("slurm", "slow"), "pbs": ("pbs", "slow"),
                   "slurm_burst": ("slurm", "slow"), "pbs_burst": ("pbs", "slow"),
                   "lab": ("browser", "slow"), "gfarm": ("gfarm",), "smoke_run": ("slow",),
                   "vm_run": ("slow",)}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the fixtures it uses (FIXTURE_MARKERS), beside its own marks; under
    pytest-xdist, order the modules slowest first (:func:`slowest_modules_first`)."""
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            for name in FIXTURE_MARKERS.get(fixture, ()):
                item.add_marker(getattr(pytest.mark, name))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = slowest_modules_first(items)


def slowest_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """`items`, whole modules ordered by what they start (a cluster or the browser first),
    then by how many of their tests are marked slow (most first; a tie in collection
    order), each module's tests in their own order.

    `make test` gives each worker whole modules (``--dist loadfile``, in this order:
    ``--no-loadscope-reorder``): the browser's and the clusters' modules, minutes each, start
    at once on workers of their own, and the quick ones fill in around them, instead of one
    of them starting last and running alone at the end."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)

    def slow(tests: list[pytest.Item]) -> tuple[bool, int]:
        def marked(*names: str) -> int:
            return sum(any(t.get_closest_marker(n) for n in names) for t in tests)

        return marked("slurm", "pbs", "browser") > 0, marked("slow")

    return [t for tests in sorted(modules.values(), key=slow, reverse=True) for t in tests]


def _git_status() -> str | None:
    """`git status --porcelain` of the checkout (untracked files included), or None where
    this is no git checkout."""
    try:
        proc = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


@pytest.fixture(scope="session", autouse=True)
def _checkout_left_as_found():
    """The suite writes only to temporary folders: after it, `git status` of the checkout
    is what it was before (no stray run, log or figure; a failure here is an error of the
    session's teardown, naming what changed)."""
    before = _git_status()
    yield
    after = _git_status()
    if before is not None and after is not None and after != before:
        old, new = set(before.splitlines()), set(after.splitlines())
        pytest.fail("the tests changed the checkout: " + "; ".join(
            [f"new {x}" for x in sorted(new - old)] + [f"gone {x}" for x in sorted(old - new)]))


def run_cli(*args: str, env: dict | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `python <args>` from the project root; return the completed process."""
    full_env = os.environ | (env or {})
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          env=full_env, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


def printed_ratio_fits(ratio: float, num: float, den: float, digits: int,
                       ratio_digits: int) -> bool:
    """Whether a printed `ratio` (to `ratio_digits` decimals) can be the quotient of the
    unrounded values behind a printed `num` over a printed `den` (each to `digits`
    decimals): within the quotients of their rounding bounds, widened by the ratio's own
    rounding.  A slow rate widens them; a tolerance of a fixed size would not."""
    half, ratio_half = 0.5 * 10.0 ** -digits, 0.5 * 10.0 ** -ratio_digits
    low, high = (num - half) / (den + half), (num + half) / (den - half)
    return low - ratio_half <= ratio <= high + ratio_half


def committed_runs() -> set[str] | None:
    """The run folders git tracks under data/runs ("data/runs/<vm>/<run>"), or None outside
    a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "data/runs"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"/".join(f.split("/")[:4]) for f in out.split("\0") if f.count("/") >= 4}


def report_root(tmp: Path, committed: bool = False) -> Path:
    """A copy of the project for $BURSTBENCH_ROOT: the notebooks, parameters and reference
    tables, and of data/runs only the runs that figures/'s manifests name (a run measured
    since, and not drawn yet, is left out) or, `committed`, those git tracks (the data the
    README's numbers are of; a user's own run, drawn by make report, is left out), with
    ../shared beside it (the replay's log).  A run the report reads but does not name
    changes what it draws from here, and shows up."""
    root = tmp / "project"
    for d in ("notebooks", "papermill_params", "data/reference"):
        shutil.copytree(ROOT / d, root / d)
    manifests = "".join(m.read_text() for m in (ROOT / "figures").glob("manifest-*.json"))
    tracked = committed_runs() if committed else None
    for run in sorted((ROOT / "data" / "runs").glob("*/*/")):
        name = str(run.relative_to(ROOT))
        if (name in tracked) if tracked is not None else (name in manifests):
            shutil.copytree(run, root / name)
    if (ROOT.parent / "shared").is_dir():
        (tmp / "shared").symlink_to((ROOT.parent / "shared").resolve())
    return root


def newer_run(vm_dir: Path, benchmark: str) -> tuple[str, Path]:
    """A copy of `vm_dir`'s newest run with a `benchmark` table under a later run id, the id
    renamed in every table and the provenance, each benchmark resealed (it verifies as its
    original did): (the copied run's id, the copy)."""
    old = max(p.parent.name for p in vm_dir.glob(f"*/{benchmark}.csv"))
    new = vm_dir / "20991231T000000Z-zzzz"
    shutil.copytree(vm_dir / old, new)
    for f in new.iterdir():
        if f.suffix in (".csv", ".jsonl", ".json"):
            f.write_text(f.read_text().replace(old, new.name))
    for name in json.loads((new / "provenance.json").read_text())["benchmarks"]:
        if (new / f"{name}.csv").exists():
            reseal(new, name)
    return old, new


def reseal(run: Path, benchmark: str) -> None:
    """Record `run`'s `benchmark` files as they are now in its manifest, and as many
    configurations planned as its table holds: a test's edit of a table then reads as a
    complete sweep that measured just that, not as damage."""
    from burstbench.core.store.files import file_facts

    path = run / "provenance.json"
    prov = json.loads(path.read_text())
    sec = prov["benchmarks"][benchmark]
    held = int(pd.read_csv(run / f"{benchmark}.csv", usecols=["key"])["key"].nunique())
    sec["manifest"] = {name: file_facts(run / name) | (
        {"configurations": held} if name.endswith(".csv") else {}) for name in sec["manifest"]}
    sec["planned"] = held + len(sec.get("failures", []))
    path.write_text(json.dumps(prov, indent=1) + "\n")


OMP_HELLO = "#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }\n"


def compile_problem(cc: str, source: str, *flags: str, run: bool = True) -> str:
    """'' when `cc` compiles and links `source` (and it runs, with `run`), else why not (the
    compiler's first error line): a compiler can be installed without the runtime or
    headers it needs."""
    if shutil.which(cc) is None:
        return f"{cc} is not installed"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "hello.c").write_text(source)
        try:
            proc = subprocess.run([cc, *flags, "hello.c", "-o", "hello"], cwd=tmp,
                                  capture_output=True, text=True, timeout=120)
            if proc.returncode == 0 and run:
                proc = subprocess.run(["./hello"], cwd=tmp, capture_output=True, text=True,
                                      timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{cc} did not run: {exc}"
    return "" if proc.returncode == 0 else f"{cc}: {first_error_line(proc.stdout + proc.stderr)}"


_CLANG_PROBLEM = compile_problem("clang", OMP_HELLO, "-fopenmp")
needs_clang = pytest.mark.skipif(bool(_CLANG_PROBLEM), reason=f"clang cannot build OpenMP here "
                                 f"({_CLANG_PROBLEM}): apt-get install clang libomp-dev")

#: Debian's Open MPI: openmpi-bin gives these two, libopenmpi-dev the headers mpicc needs.
OMPI_MPIEXEC, OMPI_MPICC = "/usr/bin/mpiexec.openmpi", "/usr/bin/mpicc.openmpi"
MPI_HELLO = "#include <mpi.h>\nint main(void) { return MPI_Init(0, 0) || MPI_Finalize(); }\n"


@functools.cache
def mpi_compiler_problem(mpicc: str) -> str:
    """'' when `mpicc` compiles and links a two-line MPI program, else why not: a wrapper
    can be installed without its MPI's headers."""
    if not os.access(mpicc, os.X_OK):
        return f"{mpicc} is not installed"
    return compile_problem(mpicc, MPI_HELLO, run=False)


@pytest.fixture(scope="session")
def openmpi() -> None:
    """Skip, saying why, unless Debian's Open MPI can launch and build here."""
    if not os.access(OMPI_MPIEXEC, os.X_OK):
        pytest.skip(f"Debian's Open MPI is not installed (no {OMPI_MPIEXEC}: apt-get install "
                    "openmpi-bin libopenmpi-dev)")
    problem = mpi_compiler_problem(OMPI_MPICC)
    if problem:
        pytest.skip(f"Open MPI cannot build here ({problem}): apt-get install libopenmpi-dev")


needs_openmpi = pytest.mark.usefixtures("openmpi")


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One `burstbench run` on papermill_params/smoke.yaml; returns the runs folder."""
    runs = tmp_path_factory.mktemp("runs")
    proc = run_cli("-m", "burstbench", "run", "--params", "papermill_params/smoke.yaml",
                   "--runs-dir", str(runs), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return runs


@pytest.fixture
def vm_run(smoke_run, tmp_path) -> Path:
    """A copy of the smoke run as if a VM's params had measured it (`test` false): for the
    report and cost code paths that draw VMs. Returns the runs folder of the copy."""
    import json

    runs = tmp_path / "vm-runs"
    shutil.copytree(smoke_run, runs, ignore=shutil.ignore_patterns(".lock"))
    for prov in runs.glob("*/*/provenance.json"):
        doc = json.loads(prov.read_text())
        for sec in doc["benchmarks"].values():
            sec["params"]["test"] = False
        prov.write_text(json.dumps(doc, indent=1))
    return runs
