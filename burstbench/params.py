"""Parameters of the measurement notebooks, loaded and validated in one place.

One YAML file per VM size (``papermill_params/<vm>.yaml``) drives every
measurement notebook.  Its keys are flat, as papermill wants them, and equal
the names in the notebooks' parameters cells:

* common keys, read by every notebook: ``vm``, ``run_id``, ``runs_dir``,
  ``vm_price``, ``test``;
* one prefix per benchmark: ``triad_*`` for 010_measure_triad.ipynb (and
  ``pingpong_*``, ``biccg_*`` for the notebooks that read those).

``papermill <notebook> out.ipynb -f papermill_params/<vm>.yaml`` passes every
key to every notebook; papermill only warns about names a notebook's
parameters cell lacks, so each notebook calls :func:`from_namespace`, which
reads the known keys by name, refuses a key that no notebook knows (naming it and
the closest valid ones) and checks the values of the notebook's own keys.

A file measures every registered benchmark, each key it does not set at its
default, unless its top-level ``only`` or ``skip`` says otherwise (:func:`selection`;
``burstbench run --only`` narrows it further, :func:`choose`).

The keys each benchmark reads are declared with it (its ``PARAMS``, listed by
burstbench.registry); the checks themselves are burstbench.core.checks.

Long: a params file's whole contract (its keys, what it selects, the fingerprint, and the
pages documenting them, written from the same declarations) in the one module that
``--help`` and ``burstbench params`` import, without pandas.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from burstbench.core.checks import (
    NEW,
    Param,
    ParamError,
    check_bool,
    check_label,
    check_positive,
    check_text,
    loads,
)
from burstbench.registry import benchmarks


def _run_id(v: Any) -> str:
    return "" if v in ("", None) else check_label("run_id")(v)


def _vm_price(v: Any) -> dict:
    """{payg, spot, currency, region}: this VM's price where the reference tables lack it."""
    if v in (None, {}):
        return {}
    keys = {"payg", "spot", "currency", "region"}
    if not isinstance(v, dict) or set(v) - keys:
        raise ParamError(f"vm_price must be a mapping with keys {', '.join(sorted(keys))}, "
                         f"not {v!r}")
    prices = {k: check_positive(f"vm_price {k}", allow_zero=True)(v[k])
              for k in ("payg", "spot") if k in v}
    if str(v.get("currency", "JPY")).upper() not in ("JPY", "USD"):
        raise ParamError(f"vm_price: unknown currency '{v.get('currency')}' (known: JPY, USD)")
    if not prices:
        raise ParamError("vm_price needs a payg and/or spot price per node-hour")
    return {"currency": str(v.get("currency", "JPY")).upper(), "region": str(v.get("region", "")),
            **prices}


COMMON = [
    Param("vm", "local",
          "VM label: names `data/runs/<vm>/` and the figures (use the study's spelling, e.g. "
          "`HB120rs_v3`, so the report finds its reference numbers)",
          check_label("vm")),
    Param("run_id", "",
          "empty: resume the newest unfinished run with the same parameters, else start a new "
          "one; a name: that run",
          _run_id),
    Param("runs_dir", "",
          "where runs go; empty: `data/runs` of the project under `burstbench run` (a test "
          "run's: `build/runs`), `build/runs` for a notebook run by hand (a try-out, ignored "
          "by git)",
          check_text("runs_dir")),
    Param("vm_price", {},
          "this VM's price per node-hour where `data/reference/prices_vm.csv` lacks it: `{payg, "
          "spot, currency, region}` (read by the cost report)",
          _vm_price),
    Param("test", False,
          "`true`: this params file is a test, not a VM measurement; its runs are never drawn as "
          "a VM in the report (`smoke.yaml` is one). A test run never resumes a measurement's "
          "run, nor the other way round",
          check_bool("test")),
    Param("budget_minutes", 0,
          "minutes the run may take (as `burstbench run --budget`, which overrides it): the "
          "configurations the decision needs first, none started that does not fit by its "
          "estimate; what is left resumes with the same command. 0: no limit (so is "
          "`--budget none`, whatever this says)",
          check_positive("budget_minutes", allow_zero=True)),
]


def unknown_benchmark(name: str, where: str = "") -> str:
    """The one line refusing `name` as a benchmark (after `where:`): the nearest registered
    one and all of them."""
    known = list(sections())
    near = difflib.get_close_matches(str(name), known, n=1)
    return ((f"{where}: " if where else "") + f"unknown benchmark '{name}' ("
            + (f"did you mean {near[0]}? " if near else "") + f"known: {', '.join(known)})")


def _benchmark_names(key: str) -> Callable[[Any], list[str]]:
    """The check of `only` and `skip`: registered benchmarks' names, a list or one name."""
    def check(v: Any) -> list[str]:
        names = [v] if isinstance(v, str) else v
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ParamError(f"{key} must be a list of benchmark names (or one name), not {v!r}")
        for name in names:
            if name not in sections():
                raise ParamError(unknown_benchmark(name, key))
        return names

    return check


#: The top-level keys that choose which benchmarks a params file measures (read by
#: `burstbench run` and `jobs`, never passed to a notebook).
SELECTION = [
    Param("only", [],
          "the benchmarks this file measures, e.g. `[triad, biccg]` (a file for some of them); "
          "empty: every registered benchmark, each key the file does not set at its default. "
          "`burstbench run --only` narrows it further",
          _benchmark_names("only")),
    Param("skip", [],
          "benchmarks this file leaves out, e.g. `[storage]`; every other registered one is "
          "measured, a benchmark added later too. Not with `only`",
          _benchmark_names("skip")),
]


def selection(values: dict[str, Any], where: str = "parameters") -> list[str]:
    """The benchmarks a params file measures, in the registry's order: every registered
    one, unless its `only` or `skip` says otherwise (ParamError, one line, for a name no
    benchmark has, for both keys, or for a choice that leaves none)."""
    try:
        only, skip = (p.check(values[p.name]) if p.name in values else [] for p in SELECTION)
    except ParamError as exc:
        raise ParamError(f"{where}: {exc}") from None
    if only and skip:
        raise ParamError(f"{where}: only and skip together: give one (only: the benchmarks "
                         "to measure; skip: those to leave out)")
    chosen = [name for name in sections() if (name in only if only else name not in skip)]
    if not chosen:
        raise ParamError(f"{where}: skip leaves no benchmark to measure "
                         f"(known: {', '.join(sections())})")
    return chosen


def choose(values: dict[str, Any], where: str, only: str = "") -> list[str]:
    """The benchmarks a run measures: the file's :func:`selection`, narrowed by a command
    line's `--only a,b` (in its order); a name the file leaves out is refused, saying why."""
    chosen = selection(values, where)
    if not only:
        return chosen
    names = only.split(",")
    for name in names:
        if name not in sections():
            raise ParamError(unknown_benchmark(name, "--only"))
        if name not in chosen:
            key = "only" if values.get("only") else "skip"
            listed = values[key] if isinstance(values[key], list) else [values[key]]
            raise ParamError(f"--only {name}: {where} leaves {name} out ({key}: "
                             f"[{', '.join(listed)}]); it measures {', '.join(chosen)}")
    return names


def sections() -> dict[str, tuple[Param, ...]]:
    """Each registered benchmark's own parameters (its module declares them), in the
    benchmarks' order."""
    return {name: spec.params for name, spec in benchmarks().items()}


def notebooks() -> dict[str, str]:
    """Each registered benchmark's measurement notebook."""
    return {name: spec.notebook for name, spec in benchmarks().items()}


def schema(section: str) -> dict[str, Param]:
    """The parameters a notebook reads: the common ones and its own section's."""
    known = sections()
    if section not in known:
        raise ParamError(unknown_benchmark(section))
    return {p.name: p for p in COMMON + list(known[section])}


def known_names() -> dict[str, str]:
    """Every key some notebook knows, mapped to the section that reads it ("common", a
    benchmark's name, or "selection" for `only` and `skip`, which `run` reads)."""
    out = {p.name: "common" for p in COMMON} | {p.name: "selection" for p in SELECTION}
    for section, params in sections().items():
        out.update({p.name: section for p in params})
    return out


def check_keys(keys: list[str], where: str) -> None:
    """Refuse a key that no notebook knows, naming it and up to 3 close valid keys (or, with
    none close, where the valid keys are listed), in one line."""
    known = known_names()
    for key in keys:
        if key not in known:
            near = difflib.get_close_matches(str(key), list(known), n=3)
            hint = (f"did you mean {', '.join(near[:-1])} or {near[-1]}?" if len(near) > 1
                    else f"did you mean {near[0]}?" if near
                    else "the valid keys are in papermill_params/README.md")
            raise ParamError(f"{where}: unknown parameter '{key}' ({hint})")


def validate(values: dict[str, Any], section: str, where: str = "parameters") -> dict:
    """Check `values` for the notebook of `section`; return all its parameters, defaults filled.

    Keys of other benchmarks' notebooks are accepted (one file drives them all)
    and checked by those notebooks; unknown keys are an error.
    """
    check_keys(list(values), where)
    out = {}
    for name, param in schema(section).items():
        value = values.get(name, param.default)
        try:
            out[name] = param.check(value)
        except ParamError as exc:
            msg = str(exc)
            raise ParamError(f"{where}: {msg if msg.startswith(name) else f'{name}: {msg}'}") \
                from exc
    return out


def read_yaml(path: str | Path, what: str = "parameter file") -> Any:
    """A YAML file's content, parsed as a params file is (:func:`loads`; None where it is
    empty or only comments); `what` the file is, for an error that cannot read it.

    An unreadable file, one that is not UTF-8 text, and malformed YAML (naming the line:
    a key given twice in one mapping is malformed too) are ParamErrors naming the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ParamError(f"cannot read {what} {p}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        line = exc.object[:exc.start].count(b"\n") + 1
        raise ParamError(f"{p} line {line}: not UTF-8 text (byte {exc.object[exc.start]:#04x})"
                         ) from None
    try:
        return loads(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ParamError(f"malformed YAML in {p}{where}: {problem}") from None


def read_mapping(path: str | Path) -> dict[str, Any] | None:
    """A YAML file's top-level mapping (None where the file is empty or only comments).

    What :func:`read_yaml` refuses, and a top level that is not a mapping, are ParamErrors
    naming the file."""
    p = Path(path)
    data = read_yaml(p)
    if data is not None and not isinstance(data, dict):
        raise ParamError(f"{p}: expected a mapping of parameter names to values (`vm: <name>` "
                         f"and more, one a line), got {type(data).__name__}")
    return data


def load_file(path: str | Path) -> dict[str, Any]:
    """Read a params YAML file with :class:`ParamsLoader`; check its keys.

    Malformed YAML is a ParamError naming the line; an empty (or comment-only)
    file and one whose top level is not a mapping are ParamErrors naming the file.
    """
    p = Path(path)
    data = read_mapping(p)
    if data is None:
        raise ParamError(f"{p} is empty: a params file needs at least `vm: <name>`")
    check_keys([str(k) for k in data], str(p))
    selection(data, str(p))
    return data


def from_namespace(namespace: dict[str, Any], section: str) -> dict:
    """Validate the parameters a notebook holds after its parameters cell (and papermill's
    injected cell) ran: every known key is read from `namespace` by its name.

    Read by name, not as "what is new since some cell": a kernel that already ran the
    notebook holds every name from the last run, so a second "Run All" after an edit
    must still see the edit.  A public value whose name carries a benchmark's prefix
    (``triad_nitmes``) or is a near miss of a common key (``run_idd``) but is no known
    key is refused, naming it: papermill only warns about such keys.
    """
    known = known_names()
    values = {k: namespace[k] for k in known if k in namespace}
    prefixes = tuple(f"{name}_" for name in sections())
    common = [p.name for p in COMMON]
    stray = [k for k, v in namespace.items()
             if k not in known and not k.startswith("_") and not callable(v)
             and type(v).__name__ != "module"
             and (k.startswith(prefixes) or difflib.get_close_matches(k, common, 1, 0.85))]
    return validate(values | dict.fromkeys(stray), section,
                    where=f"notebook {notebooks().get(section, section)}")


def for_section(values: dict[str, Any], section: str) -> dict[str, Any]:
    """Every parameter the notebook of `section` reads, as a params file gives it or else at
    its default: what `burstbench run` injects, so that nothing is left to the notebook's
    saved parameters cell (an explorer's `test = True`, autosaved)."""
    return {name: values.get(name, p.default) for name, p in schema(section).items()}


def defaults(section: str) -> dict[str, Any]:
    """The committed parameters cell of `section`'s notebook: every parameter at its default."""
    return {name: p.default for name, p in schema(section).items()}


def digest(params: dict[str, Any], section: str) -> str:
    """A short fingerprint of what a sweep measures (run_id and runs_dir left out).

    ``test: true`` counts, so that a test run is never resumed as a VM
    measurement (nor the other way round); ``test: false`` is left out, so the
    fingerprints of runs made before the key existed stay what they were.  So
    are the keys a benchmark added later (its Param.since_runs: the value every
    earlier run measured) where they hold that value.
    """
    before = {p.name: p.since_runs for p in sections().get(section, ())
              if p.since_runs is not NEW}
    keep = {k: v for k, v in params.items()
            if k not in ("run_id", "runs_dir") and (k == "vm" or k.startswith(section + "_"))
            and not (k in before and v == before[k])}
    if params.get("test"):
        keep["test"] = True
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:12]


#: papermill_params/README.md from this line on is written by docs(), from the PARAMS of
#: this module; each benchmark's keys go to its own page (keys_page), in its package.
DOCS_MARK = ("<!-- Written from the code by `burstbench params --write-docs`: edit the keys' "
             "texts where they are declared (params.COMMON, each benchmark's PARAMS). -->")

#: A benchmark's page of keys, burstbench/benchmarks/<name>/params.md, written whole.
PAGE = "params.md"
PAGE_MARK = ("<!-- Written by `burstbench params --write-docs` from PARAMS in params.py beside "
             "this file: edit the keys' texts there. -->")


def _yaml(v: Any) -> str:
    """A default as a params file writes it: `[close, spread]`, `null`, `""`, `1e-7`."""
    if v is None or isinstance(v, bool):
        return {None: "null", True: "true", False: "false"}[v]
    if isinstance(v, float):
        return f"{v:g}".replace("e-0", "e-").replace("e+0", "e+")
    if isinstance(v, str):
        return v or '""'
    if isinstance(v, list):
        return "[" + ", ".join(_yaml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_yaml(x)}" for k, x in v.items()) + "}"
    return str(v)


def _table(params: Iterable[Param]) -> str:
    rows = ["| key | default | meaning |", "|---|---|---|"]
    rows += [f"| `{p.name}` | {p.shown or f'`{_yaml(p.default)}`'} | {p.doc} |" for p in params]
    return "\n".join(rows) + "\n"


def docs() -> str:
    """The keys' documentation, as papermill_params/README.md holds it after DOCS_MARK: the
    common keys and those choosing the benchmarks.  Each benchmark's own keys are on its
    page (keys_page) in its package, so that a new benchmark changes no file outside it."""
    return (f"{DOCS_MARK}\n\n## Common keys\n\n{_table(COMMON)}\n"
            "## Which benchmarks a file measures\n\n"
            "A params file measures every registered benchmark, each key it does not set at "
            "its default (a benchmark added later too), unless it says otherwise with one of "
            "these; `burstbench params FILE` says what a file measures.\n\n"
            f"{_table(SELECTION)}\n"
            "## Each benchmark's keys\n\n"
            "Each benchmark's own keys (`<name>_*`) are on a page in its package, "
            f"`burstbench/benchmarks/<name>/{PAGE}`, written from its `PARAMS` by the same "
            "command (a test checks that each is current); `burstbench params --keys` prints "
            "them all, for the benchmarks registered now.\n")


def keys_page(name: str) -> str:
    """A benchmark's page of keys (burstbench/benchmarks/<name>/params.md): its table and
    its notes on labels."""
    spec = benchmarks()[name]
    return (f"{PAGE_MARK}\n\n# {spec.title or spec.name}: `{spec.name}_*` "
            f"({spec.notebook})\n\nThe keys of a params file (`papermill_params/<vm>.yaml`) "
            f"that `notebooks/{spec.notebook}` reads; the common keys, and `only` and `skip`, "
            "are in [papermill_params/README.md](../../../papermill_params/README.md).\n\n"
            + _table(spec.params) + (f"\n{spec.labels}\n" if spec.labels else ""))


def all_keys() -> str:
    """`burstbench params --keys`: the README's tables, then each registered benchmark's."""
    return "\n".join([docs(), *(keys_page(name).split("\n", 2)[2] for name in sections())])


def write_docs(readme: Path) -> bool:
    """Rewrite `readme` from DOCS_MARK on (appended where it has none) with docs();
    True when that changed it."""
    text = readme.read_text()
    head = text.split(DOCS_MARK)[0] if DOCS_MARK in text else text.rstrip("\n") + "\n\n"
    return _write(readme, head + docs(), text)


def write_pages() -> dict[Path, bool]:
    """Write each built-in benchmark's page of keys in its package; each page, and whether
    that changed it."""
    from burstbench.registry import folder

    out = {}
    for name in sections():
        home = folder(name)
        if home is not None:  # a benchmark registered at run time (a test's) has no folder
            page = home / PAGE
            out[page] = _write(page, keys_page(name), page.read_text() if page.exists() else "")
    return out


def _write(path: Path, new: str, old: str) -> bool:
    """`new` into `path` unless it holds that already; whether it was written."""
    from burstbench.core.store import atomic_write

    if new == old:
        return False
    atomic_write(path, new)  # an interrupted rewrite leaves the old page, not half of it
    return True


def report_parameters(path: str | Path) -> dict:
    """The report notebooks' parameters that a YAML file sets (`user_job`, `region`, ...),
    each checked as its notebooks check it (burstbench.report.parameters): a key that no
    report notebook has is refused, naming the nearest and those that exist; the folders
    are the command's own options; a value a notebook does not take is one line naming it."""
    from burstbench.report import parameters as report

    known = report.keys()
    data = read_mapping(path) or {}
    unknown = sorted(str(k) for k in data if k not in known)
    if not set(data) & known and set(unknown) & (set(known_names()) - set(report.FOLDER_NAMES)):
        raise ParamError(f"{path} is a measurement file (burstbench run --params {path}), "
                         "not report parameters (your job, a region: "
                         "papermill_params/README.md)")
    if unknown:
        near = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        raise ParamError(
            f"{path}: {', '.join(map(repr, unknown))} is not a parameter of any report notebook "
            + (f"(did you mean {near[0]}? " if near else "(")
            + f"they are: {', '.join(sorted(known))}; the folders are --runs-dir, "
            "--reference-dir and --figures-dir)")
    for notebook, declared in report.reported().items():
        names = {p.name for p in declared}
        if names & set(data):
            report.validate({k: v for k, v in data.items() if k in names}, notebook,
                            where=str(path))
    return dict(data)


def kind_of(path: str | Path) -> str:
    """'report' for a file of report parameters (more of its keys are report notebooks'
    than measurement notebooks'), else 'measurement'."""
    from burstbench.report import parameters as report

    data = read_mapping(path) or {}
    ours, measure = report.keys(), set(known_names())
    mine = sum(k in ours and k not in measure for k in data)
    theirs = sum(k in measure for k in data)
    near_report = sum(bool(difflib.get_close_matches(str(k), sorted(ours), 1)) for k in data
                      if k not in ours and k not in measure)
    return "report" if mine + near_report > theirs else "measurement"


def check_file(path: str | Path) -> str:
    """Check a measurement file or a report-parameter file, whichever it is; say which, with
    the command that takes it.  ParamError, one line, for a key of neither or a value
    wrong."""
    if Path(path).is_file() and kind_of(path) == "report":
        report_parameters(path)
        return "report parameters: burstbench report --params"
    values = load_file(path)
    for name in notebooks():
        validate(values, name, where=str(path))
    chosen = selection(values, str(path))
    left = [name for name in notebooks() if name not in chosen]
    return (f"a measurement: burstbench run --params; measures {', '.join(chosen)}"
            + (f"; leaves out {', '.join(left)}" if left else ""))
