"""environment.yml (conda-forge, clusters) names the same packages as pyproject.toml (from
pip where conda-forge has none)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]
#: Build tools conda provides that pip gets from the build system or the machine.
CONDA_ONLY = {"python", "pip", "c-compiler", "cmake", "make"}


def name(spec: str) -> str:
    return re.split(r"[<>=!~\[ ;]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = {name(d) for d in project["project"]["dependencies"]}
    for extra in project["project"]["optional-dependencies"].values():
        deps |= {name(d) for d in extra}
    deps |= {name(d) for d in project["build-system"]["requires"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = {name(d) for d in env["dependencies"] if isinstance(d, str)}
    conda |= {name(d) for sub in env["dependencies"] if isinstance(sub, dict)
              for d in sub.get("pip", [])}
    assert conda - CONDA_ONLY == deps, (
        f"only in environment.yml: {sorted(conda - CONDA_ONLY - deps)}; "
        f"only in pyproject.toml: {sorted(deps - conda)}")


def test_versions_agree():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = {name(d): d.replace(" ", "") for d in project["project"]["dependencies"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    for d in env["dependencies"]:
        if isinstance(d, str) and name(d) in pins:
            assert d.replace(" ", "") == pins[name(d)], d
