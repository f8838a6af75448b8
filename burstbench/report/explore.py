"""Exploration: every run as one tidy DataFrame with its provenance, and comparisons.

For the questions the report's figures do not answer (notebooks/200_explore.ipynb):
which runs exist and what they ran on, two runs or two VMs side by side with the ratio
and its spread, and a new VM placed against the study's published values.  Runs are read
with :func:`burstbench.store.load`, so damaged runs are named, never dropped silently,
and each run carries the status its manifest check gave it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from burstbench.core import paths, store
from burstbench.registry import benchmarks as registered

#: Provenance columns added to every row: what a reader filters and groups by.
PROVENANCE = ["vm", "run_id", "benchmark", "status", "verified", "test", "date", "host",
              "cpu_model", "sockets", "cores", "compiler", "flags", "mpi_library",
              "git_commit", "git_dirty", "folder"]

#: The compared columns: what a configuration is (`config`, `x`), the value and its unit.
HEADLINE = ["benchmark", "config", "x_name", "x", "quantity", "unit", "higher_is_better"]


@dataclass
class Runs:
    """Every run's rows (their tables' columns plus :data:`PROVENANCE`), one row per run
    (``runs``), and what could not be used (``problems``, each naming its file)."""

    table: pd.DataFrame
    runs: pd.DataFrame
    problems: list[str] = field(default_factory=list)


def _run_facts(run: dict, benchmark: str) -> dict:
    """The provenance columns of one run's benchmark."""
    folder = Path(run["path"])
    try:
        prov = store.Run(folder).provenance()
    except store.StoreError:
        prov = {}
    sec = prov.get("benchmarks", {}).get(benchmark, {})
    cpu = prov.get("system", {}).get("cpu", {})
    git = sec.get("git") or prov.get("git") or {}
    variants = sec.get("variants") or [{}]
    mpi = sorted({" ".join(str(v["mpi_library"]).splitlines()[0].split()) for v in variants
                  if v.get("mpi_library")})
    return {"vm": run["vm"], "run_id": run["run_id"], "benchmark": benchmark,
            "status": run["status"], "verified": run["verified"], "test": run["test"],
            "date": (prov.get("created") or "")[:10], "host": run.get("host", ""),
            "cpu_model": cpu.get("model", ""), "sockets": cpu.get("sockets"),
            "cores": cpu.get("cores"), "mpi_library": "; ".join(mpi),
            "git_commit": (git.get("commit") or "")[:10], "git_dirty": git.get("dirty"),
            "folder": str(folder)}


def load_runs(*folders: str | Path, benchmarks: Iterable[str] | None = None,
              include_tests: bool = False) -> Runs:
    """Every run under `folders` (default: data/runs of the project) as one DataFrame.

    Each row keeps its table's columns (compiler and flags per row) and gains the run's
    provenance: VM, CPU model, sockets, cores, MPI library, git commit, date, status.
    Test runs (`test: true`) are named in ``problems`` unless `include_tests`.
    `benchmarks`: their names (default: every registered one).
    """
    registry = registered()
    benchmarks = list(registry if benchmarks is None else benchmarks)
    frames, facts, problems = [], [], []
    for folder in folders or (paths.runs_dir(),):
        folder = paths.runs_dir(folder)
        if not folder.is_dir():
            problems.append(f"{folder}: no such folder")
            continue
        for bench in benchmarks:
            loaded = store.load(folder, bench, include_tests, registry[bench].columns)
            problems += [p for p in loaded.problems if p not in problems]
            for run in loaded.runs:
                f = _run_facts(run, bench)
                facts.append(f)
                rows = loaded.table[loaded.table["run_id"] == run["run_id"]]
                rows = rows[rows["vm"] == run["vm"]].copy()
                frames.append(rows.assign(**f))  # compiler and flags stay per row
    cols = list(dict.fromkeys(PROVENANCE + store.table_columns(
        [c for b in benchmarks for c in registry[b].columns])))
    table = (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols))
    runs = pd.DataFrame(facts, columns=[c for c in PROVENANCE if c not in ("compiler", "flags")])
    return Runs(table.reindex(columns=cols + [c for c in table.columns if c not in cols]), runs,
                problems)


def runs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs as the notebook shows them, narrow enough to read without scrolling: one row
    per run and benchmark, its status, whether it is a test, the date, the CPU (model,
    sockets x cores), the MPI libraries by name and version only, the commit (`*`: the tree
    was dirty)."""
    if runs.empty:
        return runs.drop(columns=["folder"], errors="ignore")
    def mpi(text: str) -> str:
        names = [part.split(",")[0].replace("Version:", "").strip() for part in
                 str(text or "").split(";") if part.strip()]
        return "; ".join(" ".join(n.split()) for n in names)

    return pd.DataFrame({
        "vm": runs["vm"], "run_id": runs["run_id"], "benchmark": runs["benchmark"],
        "status": runs["status"], "test": runs["test"], "date": runs["date"],
        "cpu": [f"{m} ({s} x {c} cores)" for m, s, c in
                zip(runs["cpu_model"], runs["sockets"], runs["cores"])],
        "mpi": runs["mpi_library"].map(mpi),
        "commit": [f"{c}{'*' if d else ''}" for c, d in zip(runs["git_commit"], runs["git_dirty"])],
    })


def rounded(df: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """`df` with each float rounded to `digits` significant digits, as a table is read (not
    six decimals of a ratio)."""
    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = out[c].map(lambda x: x if not math.isfinite(x) or x == 0
                                else round(x, digits - 1 - int(math.floor(math.log10(abs(x))))))
    return out


def pick(table: pd.DataFrame, vms: Iterable[str] | None = None,
         benchmarks: Iterable[str] | None = None,
         run_ids: Iterable[str] | None = None) -> pd.DataFrame:
    """The rows of the given VMs, benchmarks and runs (None: all); an unknown name is a
    ValueError naming what there is."""
    out = table
    for col, wanted in (("vm", vms), ("benchmark", benchmarks), ("run_id", run_ids)):
        if wanted is None:
            continue
        wanted = [wanted] if isinstance(wanted, str) else list(wanted)
        have = set(table[col].astype(str))
        unknown = [w for w in wanted if w not in have]
        if unknown:
            raise ValueError(f"no {col} {', '.join(map(repr, unknown))} "
                             f"(there is: {', '.join(sorted(have)) or 'nothing'})")
        out = out[out[col].isin(wanted)]
    return out


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """The value each benchmark is judged by, one row per measurement, in common columns
    (config, x_name, x, quantity, higher_is_better, value): each registered benchmark's
    ``headline`` hook on its own rows (Triad's best rate per label and thread count, the
    ping-pong's latency and bandwidth per message size, BICCG's solve time per node count)."""
    parts = []
    for name, spec in registered().items():
        rows = table[table["benchmark"] == name]
        if spec.headline is not None and len(rows):
            part = spec.headline(rows)
            if len(part):
                parts.append(part)
    if not parts:
        return pd.DataFrame(columns=PROVENANCE + HEADLINE + ["value", "repetition"])
    out = pd.concat(parts, ignore_index=True)
    out["x"] = pd.to_numeric(out["x"], errors="coerce")
    out["value"] = out["value"].astype(float)
    return out


def _side(rows: pd.DataFrame) -> pd.DataFrame:
    keys = ["benchmark", "config", "x_name", "x", "quantity", "unit", "higher_is_better"]
    return (rows.groupby(keys, dropna=False)["value"]
                .agg(median="median", min="min", max="max", n="size").reset_index())


def compare(table: pd.DataFrame, a: dict[str, str], b: dict[str, str]) -> pd.DataFrame:
    """Two runs or two VMs side by side, per configuration they share.

    `a` and `b` select rows by column, e.g. ``{"vm": "local"}`` or ``{"run_id": "2026..."}``.
    Columns: the medians, minima and maxima of each side, ``ratio`` = median b / median a,
    and its spread ``ratio_low`` - ``ratio_high`` (b's worst and best repetition against
    a's best and worst), and ``b_better`` (from the quantity's direction).
    """
    sides = []
    for name, sel in (("a", a), ("b", b)):
        rows = headline(table)
        for col, val in sel.items():
            if col not in rows:
                raise ValueError(f"cannot select by {col!r}: not a column")
            rows = rows[rows[col].astype(str) == str(val)]
        if rows.empty:
            raise ValueError(f"side {name} ({sel}) selects no measurement")
        sides.append(_side(rows))
    keys = ["benchmark", "config", "x_name", "x", "quantity", "unit", "higher_is_better"]
    m = sides[0].merge(sides[1], on=keys, suffixes=("_a", "_b"))
    if m.empty:
        raise ValueError(f"{a} and {b} share no configuration")
    m["ratio"] = m["median_b"] / m["median_a"]
    m["ratio_low"] = m["min_b"] / m["max_a"]
    m["ratio_high"] = m["max_b"] / m["min_a"]
    m["b_better"] = (m["ratio"] > 1) == m["higher_is_better"].astype(bool)
    return m.sort_values(keys).reset_index(drop=True)


def default_pair(runs: pd.DataFrame) -> tuple[dict[str, str], dict[str, str]]:
    """What to compare when nothing is picked: the two newest runs of a VM that has two,
    else the two VMs with the newest runs; ValueError when there is only one run."""
    ids = runs.drop_duplicates("run_id").sort_values("run_id")
    for _, d in ids.groupby("vm", sort=False):
        if len(d) >= 2:
            return {"run_id": d["run_id"].iloc[-2]}, {"run_id": d["run_id"].iloc[-1]}
    vms = list(dict.fromkeys(ids["vm"][::-1]))
    if len(vms) >= 2:
        return {"vm": vms[1]}, {"vm": vms[0]}
    raise ValueError("one run only: nothing to compare it with")


def plot_comparison(cmp: pd.DataFrame, title: str = ""):
    """One panel per benchmark and quantity, ratio b / a with 1 marked; returns the figure.

    Up to 12 configurations: each one's median ratio, its bar from b's worst to best
    repetition against a's.  More (a ping-pong's sizes): the median over configurations
    against the message size or thread count, the band their range.
    """
    import matplotlib.pyplot as plt

    groups = list(cmp.groupby(["benchmark", "quantity"], sort=True))
    cols = min(2, len(groups))
    rows = -(-len(groups) // cols)
    # JupyterLab shows it about 900 px wide: 13 inches at 100 dpi would shrink 10-pt labels
    # to 7 px; 9 inches keeps them near 10 px
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 4.2 * rows), squeeze=False)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    for ax, ((bench, quantity), d) in zip(axes.flat, groups):
        d = d.reset_index(drop=True)
        if len(d) <= 12:
            names = [f"{c} @{x:g}" if d["x"].nunique() > 1 else str(c)
                     for c, x in zip(d["config"], d["x"])]
            ax.errorbar(range(len(d)), d["ratio"], yerr=[d["ratio"] - d["ratio_low"],
                                                          d["ratio_high"] - d["ratio"]],
                        fmt="o", ms=4, capsize=2)
            ax.set_xticks(range(len(d)), names, rotation=45, ha="right", fontsize=10)
        else:
            by = d.groupby("x")["ratio"].agg(["median", "min", "max"]).reset_index()
            ax.plot(by["x"], by["median"], "o-", ms=3, label="median over configurations")
            ax.fill_between(by["x"], by["min"], by["max"], alpha=0.25, label="their range")
            if d["x_name"].iloc[0] == "message_size":
                ax.set_xscale("symlog", base=2, linthresh=1)  # 0 B stays on the axis
            ax.set_xlabel(d["x_name"].iloc[0].replace("_", " "))
            ax.legend(fontsize=10)
        ax.axhline(1.0, color="0.4", lw=0.8)
        better = "higher" if bool(d["higher_is_better"].iloc[0]) else "lower"
        ax.set(title=f"{bench}: {quantity} ({better} is better)", ylabel="ratio b / a")
    fig.suptitle(title or "b against a: ratio of medians")
    fig.tight_layout()
    return fig


def against_study(table: pd.DataFrame, vm: str,
                  reference_dir: str | Path = "") -> pd.DataFrame:
    """A VM's newest run against the study's published values (data/reference/), by each
    registered benchmark's ``against_study`` hook: Triad's best median bandwidth against
    each study VM's best; the ping-pong's smallest median latency and largest median
    bandwidth against each study VM's (inter-node, so a same-node run is marked so).  The
    study published no BICCG numbers (its Figures 12-13 are curves): none is compared.
    """
    ref = Path(reference_dir) if reference_dir else paths.reference_dir()
    rows = headline(pick(table, vms=[vm]))
    hooks = {n: s.against_study for n, s in registered().items() if s.against_study}
    if rows.empty or not set(rows["benchmark"]) & set(hooks):
        raise ValueError(f"VM {vm!r} has no measurement the study published numbers for "
                         f"({', '.join(hooks)})")
    out = []
    for bench, d in rows.groupby("benchmark"):
        if bench in hooks:
            newest = d[d["run_id"] == d["run_id"].max()]
            out += hooks[bench](newest, _side(newest), vm, ref)
    result = pd.DataFrame(out)
    if len(result):
        result = result[result["study"].map(lambda x: not math.isnan(x))]
    return result.reset_index(drop=True)
