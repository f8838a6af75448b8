"""Shipped text names only what exists: every module, kernel source or notebook path in a
README, a caption (figures/README.md holds them all), a reference table's notes or
pyproject.toml is a file of this checkout."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A path into the tree that names a source file or a notebook.
PATH = re.compile(r"(?<![\w/.-])((?:burstbench|kernels_ext|comparisons|tests|notebooks|"
                  r"papermill_params|\.ci)/[\w./-]*\.(?:py|c|h|ipynb|yaml))\b")


def _shipped() -> list[Path]:
    skip = {".git", ".venv", "build", "runs"}
    return sorted([p for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts)]
                  + [ROOT / "pyproject.toml"])


def test_the_paths_shipped_text_names_exist():
    stale = [f"{f.relative_to(ROOT)}: {m.group(1)}" for f in _shipped()
             for m in PATH.finditer(f.read_text()) if not (ROOT / m.group(1)).exists()]
    assert not stale, "stale paths:\n" + "\n".join(stale)


def test_the_check_finds_a_stale_path(tmp_path):
    """The pattern catches what the test is for (a test that cannot fail is a defect)."""
    text = "model in burstbench/cost.py; notebooks/190_report_cost.ipynb; figures/x.png"
    found = [m.group(1) for m in PATH.finditer(text)]
    assert found == ["burstbench/cost.py", "notebooks/190_report_cost.ipynb"]
    assert not (ROOT / found[0]).exists() and (ROOT / found[1]).exists()
