"""figures/README.md: the report's index, every figure and table with its caption and the
runs behind it, in the registry's order, the cost section last."""

from __future__ import annotations

import json
from pathlib import Path

from burstbench.core import paths, store
from burstbench.registry import benchmarks


def write_index(figures_dir: Path | str = "") -> Path:
    """figures/README.md: every figure and table with its caption and the runs behind it."""
    fig_dir = paths.figures_dir(figures_dir)
    out = ["# Report figures and tables", "",
           "Rebuilt by `make figures` (`python -m burstbench report`) from `data/` alone; "
           "do not edit by hand. Each entry names the runs (under `data/runs/`) and reference "
           "tables (under `data/reference/`) it was drawn from.", ""]
    problems = []
    order = {name: i for i, name in enumerate([*benchmarks(), "cost"])}  # cost reads them all
    for manifest in sorted(fig_dir.glob("manifest-*.json"),
                           key=lambda m: (order.get(m.stem[9:], 9), m.name)):
        sec = json.loads(manifest.read_text())
        problems += sec.get("problems", [])
        out += [f"## {sec['benchmark']}", ""]
        for e in sec["entries"]:
            out += [f"### {e['title']}", ""]
            out += [f"![{e['title']}]({f})" for f in e["files"] if f.endswith(".png")]
            for f in e["files"]:  # tables inline, so the index reads as the report
                if f.endswith(".md") and (fig_dir / f).exists():
                    out += [(fig_dir / f).read_text()]
            links = ", ".join(f"[{Path(f).suffix[1:]}]({f})" for f in e["files"])
            data = ", ".join(f"`{r}`" for r in e["runs"] if r)
            out += ["", e["caption"], "", f"Files: {links}." + (f" Data: {data}" if data else ""),
                    ""]
    if problems:
        out += ["## Notes: data that could not be used, and gaps", ""]
        out += [f"- {p}" for p in dict.fromkeys(problems)] + [""]
    path = fig_dir / "README.md"
    store.atomic_write(path, "\n".join(out))
    return path
