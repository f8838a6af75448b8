"""Shared fixtures: an isolated variant cache, a CLI runner, one smoke run for many tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Variants built by the tests go to a temporary cache, not the user's."""
    cache = tmp_path_factory.mktemp("variant-cache")
    old = os.environ.get("BURSTBENCH_CACHE")
    os.environ["BURSTBENCH_CACHE"] = str(cache)
    os.environ["BURSTBENCH_PROGRESS"] = "lines"
    yield cache
    if old is None:
        os.environ.pop("BURSTBENCH_CACHE", None)
    else:
        os.environ["BURSTBENCH_CACHE"] = old


def run_cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `python <args>` from the project root; return the completed process."""
    full_env = os.environ | (env or {})
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          env=full_env, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


needs_clang = pytest.mark.skipif(shutil.which("clang") is None,
                                 reason="clang is not installed (apt-get install clang libomp-dev)")


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One `burstbench run` on papermill_params/smoke.yaml; returns the runs folder."""
    runs = tmp_path_factory.mktemp("runs")
    proc = run_cli("-m", "burstbench", "run", "--params", "papermill_params/smoke.yaml",
                   "--runs-dir", str(runs), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return runs
