"""Where the project's folders are, wherever a notebook or command runs from."""

from __future__ import annotations

import os
from pathlib import Path


def _is_root(p: Path) -> bool:
    return (p / "papermill_params").is_dir() and (p / "notebooks").is_dir()


def project_root() -> Path:
    """The project folder: $BURSTBENCH_ROOT, else the first parent of the current
    folder (JupyterLab runs notebooks from notebooks/) or of this package (an
    editable install) that holds papermill_params/ and notebooks/, else the
    current folder."""
    env = os.environ.get("BURSTBENCH_ROOT")
    if env:
        return Path(env).resolve()
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for p in (start, *start.parents):
            if _is_root(p):
                return p
    return Path.cwd()


def runs_dir(value: str | os.PathLike = "") -> Path:
    """The runs folder: `value` if given (relative to the project), else data/runs."""
    if value:
        p = Path(value)
        return p if p.is_absolute() else project_root() / p
    return project_root() / "data" / "runs"


def tryouts_dir() -> Path:
    """Where try-outs measure: a measurement notebook run by hand (its `runs_dir` left
    empty) and a test run (`test: true`) write under build/runs/, ignored by git, never
    into data/runs, which the report draws and `git add data/runs` commits."""
    return project_root() / "build" / "runs"


def measure_dir(value: str | os.PathLike = "", test: bool = False) -> Path:
    """The runs folder a sweep writes to: `value` where given (see runs_dir), else
    tryouts_dir() for a test run, else data/runs."""
    return runs_dir(value) if value or not test else tryouts_dir()


def reference_dir() -> Path:
    """The study's reference tables (data/reference/)."""
    return project_root() / "data" / "reference"


def figures_dir(value: str | os.PathLike = "") -> Path:
    """Where report figures and tables go: `value` if given (relative to the project), else
    the scratch folder build/mine/, so that a report notebook run by hand, with your own
    job, never rewrites the committed report.  Only `burstbench report` (make figures) with
    its defaults writes report_dir(), figures/."""
    if value:
        p = Path(value)
        return p if p.is_absolute() else project_root() / p
    return project_root() / "build" / "mine"


def report_dir() -> Path:
    """The committed report's figures and tables (figures/)."""
    return project_root() / "figures"


def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def rel_path(p: Path, root: Path) -> str:
    """`p` relative to `root` where it is under it (as figures and tables name files),
    else as given."""
    try:
        return str(Path(p).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(p)
