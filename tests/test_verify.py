"""Verified run folders: a manifest per benchmark, and every kind of damage refused by
`collect` or labelled by the report, never shown as complete."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from burstbench import params
from burstbench.benchmarks import triad
from burstbench.core import store
from burstbench.report import index as report_index
from burstbench.report import sections as report_sections

SMALL = {"vm": "t", "triad_size": 50_000, "triad_ntimes": 2, "triad_threads": [1],
         "triad_places": ["cores"], "triad_bind": ["close", "spread"],
         "triad_variants": [{"compiler": "gcc", "flags": "-O2 -fopenmp"}],
         "triad_baselines": ["numpy"], "triad_repetitions": 2}


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Path:
    """One small, complete Triad run (6 configurations), measured once for the module."""
    runs = tmp_path_factory.mktemp("measured")
    run, _ = triad.SPEC.measure(params.validate(SMALL | {"runs_dir": str(runs)}, "triad"),
                           progress=False)
    return run.root


@pytest.fixture
def copy(measured, tmp_path) -> store.Run:
    """A copy of the measured run to damage: <tmp>/src/t/<run-id>/."""
    dest = tmp_path / "src" / "t" / measured.name
    shutil.copytree(measured, dest, ignore=shutil.ignore_patterns(".lock"))
    return store.Run(dest)


def collect(run: store.Run, tmp_path: Path) -> tuple[list[str], list[str]]:
    added, _, refused = store.collect([run.root.parent.parent], tmp_path / "dest")
    return added, refused


def as_legacy(run: store.Run) -> None:
    """Make the run look written before manifests (no manifest, no store version)."""
    def strip(p: dict) -> None:
        p.pop("store_version", None)
        p["benchmarks"]["triad"].pop("manifest", None)
    run.update_provenance(strip)


def test_a_folded_run_records_what_it_holds(measured):
    run = store.Run(measured)
    prov = run.provenance()
    assert prov["store_version"] == store.STORE_VERSION
    man = prov["benchmarks"]["triad"]["manifest"]
    table = pd.read_csv(run.table_path("triad"))
    csv = man["triad.csv"]
    assert csv["bytes"] == run.table_path("triad").stat().st_size
    assert csv["rows"] == len(table) and csv["configurations"] == table["key"].nunique() == 6
    assert len(csv["sha256"]) == 64
    assert man["triad.jsonl"]["rows"] == len(run.raw_path("triad").read_text().splitlines())
    check = store.verify(run, "triad")
    assert check.verified and not check.damage and check.label == "complete"


def _cut_half(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[:len(raw) // 2])


def _drop_last_rows(path: Path) -> None:  # whole lines: still a well-formed CSV
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-20]))


def _flip_a_digit(path: Path) -> None:  # same size, other bytes
    text = path.read_text()
    i = text.rindex(",", 0, len(text) - 40) - 1
    while not text[i].isdigit():
        i -= 1
    path.write_text(text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1:])


DAMAGE = {
    "table cut in half": ("triad.csv", _cut_half, "shorter than written"),
    "table missing": ("triad.csv", Path.unlink, "triad.csv is missing"),
    "rows dropped": ("triad.csv", _drop_last_rows, "shorter than written"),
    "a value changed": ("triad.csv", _flip_a_digit, "changed since it was written"),
    "raw records missing": ("triad.jsonl", Path.unlink, "triad.jsonl is missing"),
}


@pytest.mark.parametrize("case", DAMAGE, ids=list(DAMAGE))
def test_damage_is_refused_by_name_and_drawn_as_incomplete(copy, tmp_path, case):
    name, damage, says = DAMAGE[case]
    damage(copy.root / name)
    added, refused = collect(copy, tmp_path)
    assert not added and len(refused) == 1
    assert copy.run_id in refused[0] and says in refused[0], refused
    assert not (tmp_path / "dest" / "t" / copy.run_id).exists()
    loaded = store.load(copy.root.parent.parent, "triad")
    assert any(says in p and copy.run_id in p for p in loaded.problems), loaded.problems
    for run in loaded.runs:  # drawn, if anything is readable, only as incomplete
        assert run["status"].startswith("incomplete: ") and not run["verified"]


def test_the_report_captions_a_damaged_run_incomplete(copy, tmp_path):
    _drop_last_rows(copy.table_path("triad"))
    section = triad.report_section(copy.root.parent.parent, figures_dir=tmp_path / "figs")
    (entry,) = [e for e in section.entries if e.title.endswith("on t")]
    assert "incomplete: triad.csv is shorter than written" in entry.caption
    assert any("shorter than written" in p for p in section.problems)
    report_sections.save_section(section, tmp_path / "figs")
    index = report_index.write_index(tmp_path / "figs").read_text()
    assert "incomplete: triad.csv is shorter" in index  # the caption
    assert index.count("triad.csv is shorter than written") >= 2  # and the notes


LEGACY = {
    "table cut in half": (_cut_half, "ends in the middle of a row"),
    "rows of configurations dropped": (_drop_last_rows, "holds 5 of the 6 configurations"),
    "table missing": (Path.unlink, "triad.csv is missing (the provenance says complete)"),
}


@pytest.mark.parametrize("case", LEGACY, ids=list(LEGACY))
def test_a_run_from_before_manifests_is_checked_by_what_it_shows(copy, tmp_path, case):
    as_legacy(copy)
    damage, says = LEGACY[case]
    damage(copy.table_path("triad"))
    added, refused = collect(copy, tmp_path)
    assert not added and says in refused[0], refused


def test_an_intact_run_from_before_manifests_loads_labelled_so(copy, tmp_path):
    as_legacy(copy)
    added, refused = collect(copy, tmp_path)
    assert added == [f"t/{copy.run_id}"] and not refused
    (run,) = store.load(copy.root.parent.parent, "triad").runs
    assert run["status"] == "complete, from before manifests: not checksummed"
    assert not run["verified"]


def test_an_interrupted_run_is_collected_and_said_to_be_incomplete(copy, tmp_path):
    copy.set_section("triad", status="interrupted", planned=8)
    added, refused = collect(copy, tmp_path)
    assert not refused
    assert added == [f"t/{copy.run_id} (incomplete: triad interrupted, 6 of 8 configurations "
                     "stored)"]
    (run,) = store.load(tmp_path / "dest", "triad").runs
    assert run["status"] == "incomplete: interrupted, 6 of 8 configurations stored"


def test_a_fold_killed_before_its_manifest_is_refused_then_completed_by_resuming(copy,
                                                                                 tmp_path):
    """The table was written, the machine died before the manifest was: refused by name;
    running the same sweep again (it resumes the unfinished run) completes it."""
    def killed(p: dict) -> None:
        p["benchmarks"]["triad"].pop("manifest")
        p["benchmarks"]["triad"]["status"] = "running"
    copy.update_provenance(killed)
    added, refused = collect(copy, tmp_path)
    assert not added and "has no manifest (its fold was interrupted" in refused[0]
    p = params.validate(SMALL | {"runs_dir": str(copy.root.parent.parent)}, "triad")
    run, table = triad.SPEC.measure(p, progress=False)
    assert run.root == copy.root and table["key"].nunique() == 6
    check = store.verify(run, "triad")
    assert check.verified and check.label == "complete"
    assert collect(copy, tmp_path / "again")[0] == [f"t/{copy.run_id}"]


def test_parts_without_their_fold_resume_to_a_verified_run(copy):
    """Killed after measuring, before folding: the part files hold the configurations,
    the run is incomplete until the sweep is run again."""
    run = copy
    table = pd.read_csv(run.table_path("triad"))
    raw = [json.loads(x) for x in run.raw_path("triad").read_text().splitlines()]
    for key, rows in table.groupby("key"):
        run.save("triad", key, rows.to_dict("records"), [r for r in raw if r.get("key") == key],
                 triad.COLUMNS)
    for f in (run.table_path("triad"), run.raw_path("triad")):
        f.unlink()
    run.update_provenance(lambda p: (p["benchmarks"]["triad"].pop("manifest"),
                                     p["benchmarks"]["triad"].update(status="running")))
    check = store.verify(run, "triad")
    assert not check.damage and check.incomplete == "running, 6 of 6 configurations stored"
    p = params.validate(SMALL | {"runs_dir": str(copy.root.parent.parent)}, "triad")
    again, table2 = triad.SPEC.measure(p, progress=False)
    assert again.root == run.root and table2["key"].nunique() == 6
    assert store.verify(run, "triad").verified


def test_a_run_planned_by_burstbench_run_is_new_not_resumed(tmp_path):
    p = params.validate(SMALL | {"runs_dir": str(tmp_path)}, "triad")
    planned = store.plan_run(tmp_path, "t", "r1", {"triad": (params.digest(p, "triad"), p)})
    run, resumed = store.open_run(tmp_path, "t", "triad", p, params.digest(p, "triad"), "r1")
    assert run.root == planned.root and not resumed
    run.save("triad", "k", [{"key": "k"}], [], ())
    assert store.open_run(tmp_path, "t", "triad", p, params.digest(p, "triad"), "r1")[1]
