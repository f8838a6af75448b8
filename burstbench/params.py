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
refuses any key that no notebook knows (naming it and the closest valid ones)
and checks the values of the notebook's own keys.

Files are read with :class:`ParamsLoader`, which reads numbers in YAML 1.2's
spellings (``1e-7``, ``.5``, ``+1e3``) as numbers; PyYAML's YAML 1.1 reads
``1e-7`` as a string.  Papermill's own ``-f`` reads files as YAML 1.1, so the
checks of number keys also take a string that holds a number.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from kernels_ext import affinity
from kernels_ext.triad import STORES, BadInput, parse_count


class ParamError(ValueError):
    """A parameter file or value is wrong; the message is one line naming it."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback (JupyterLab, papermill): the one line."""
        return [f"ParamError: {self}"]


class _WrongKind(ParamError):
    """A value of the wrong kind (a string where an integer goes): a list check restates it
    as what the list takes."""


#: YAML 1.2 (core schema) floats, as well as PyYAML's YAML 1.1 ones: ``1e-7``, ``1E-7``,
#: ``-2.5e3``, ``.5``, ``-.5``, ``+1e3``, ``1.5e3`` (1.1 wants a dot and a signed exponent),
#: ``1.0e-7``, ``.inf``, ``-.inf``, ``.nan``, ``1_000.5`` and 1.1's sexagesimal ``1:30.5``.
#: Integers (``7``, ``+4``, ``1_000``) do not match: the int resolver, tried first, has them.
_FLOAT = re.compile(r"""^(?:
      [-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    | [-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
    | [-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
    | [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    | [-+]?\.(?:inf|Inf|INF)
    | \.(?:nan|NaN|NAN)
)$""", re.X)

#: A string that holds a number where a number goes (papermill's ``-f`` reads ``1e-7`` as one):
#: decimal, with an optional sign, fraction, exponent and ``_`` between digits.
_NUMBER_TEXT = re.compile(r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)?")

_FLOAT_TAG = "tag:yaml.org,2002:float"


class ParamsLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, whose floats are also YAML 1.2's: ``1e-7`` is the number 1e-07.

    Everything else is SafeLoader's (YAML 1.1): integers stay integers, quoted
    scalars stay strings, ``true``/``yes`` are booleans.
    """


ParamsLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _FLOAT_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
ParamsLoader.add_implicit_resolver(_FLOAT_TAG, _FLOAT, list("-+0123456789."))


def loads(text: str) -> Any:
    """Parse YAML text as a params file is parsed (:class:`ParamsLoader`)."""
    return yaml.load(text, Loader=ParamsLoader)  # a SafeLoader: no Python objects


@dataclass(frozen=True)
class Param:
    """One notebook parameter: its default (a literal, as in the parameters cell) and check."""

    name: str
    default: Any
    doc: str
    check: Callable[[Any], Any]


def _count(name: str, minimum: int) -> Callable[[Any], int]:
    def check(v: Any) -> int:
        try:
            n = parse_count(v, name)
        except BadInput as exc:
            raise _WrongKind(str(exc)) from exc
        if n < minimum:
            raise ParamError(f"{name} must be at least {minimum}, not {n}")
        return n

    return check


def _number(v: Any) -> float | None:
    """`v` as a float: an int, a float or a string holding a decimal number; else None."""
    if isinstance(v, str) and _NUMBER_TEXT.fullmatch(v.strip()):
        return float(v.strip().replace("_", ""))
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _positive_number(name: str, allow_zero: bool = False) -> Callable[[Any], float]:
    """A finite number above zero (or at least zero); a string such as '1e-7' is taken too."""
    def check(v: Any) -> float:
        x = _number(v)
        if x is None or not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
            kind = _WrongKind if x is None else ParamError
            raise kind(f"{name} must be a {'non-negative' if allow_zero else 'positive'} "
                       f"number, not {v!r}")
        return x

    return check


def _label(name: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", v):
            raise ParamError(f"{name} must be a name of letters, digits and _ . + - "
                             f"(it names a folder), not {v!r}")
        return v

    return check


def _typed(name: str, kind: type, what: str) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if not isinstance(v, kind):
            raise _WrongKind(f"{name} must be {what}, not {v!r}")
        return v

    return check


def _text(name: str) -> Callable[[Any], str]:
    return _typed(name, str, "a string")


def _bool(name: str) -> Callable[[Any], bool]:
    """true or false (YAML's true/false, yes/no, on/off), nothing else."""
    return _typed(name, bool, "true or false")


def _run_id(v: Any) -> str:
    return "" if v in ("", None) else _label("run_id")(v)


#: What a list of counts takes, as its errors say.
INTEGERS = "a list of integers (or one integer)"


def _list_of(name: str, item: Callable[[Any], Any], allow_empty: bool = True,
             takes: str = "") -> Callable[[Any], list]:
    """A list checked item by item; one string, number or bool stands for a list of it.

    `takes` says what the list holds ("a list of integers (or one integer)"):
    a value that is no list, or an item of the wrong kind, is refused with
    "<name> must be <takes>, not <the item>".  Without it (lists of mappings),
    the item's check says what is wrong.
    """
    def check(v: Any) -> list:
        if isinstance(v, (str, int, float)):
            v = [v]
        if not isinstance(v, list):
            raise ParamError(f"{name} must be {takes or 'a list'}, not {v!r}")
        if not v and not allow_empty:
            raise ParamError(f"{name} must be a non-empty list, not []")
        out = []
        for x in v:
            try:
                out.append(item(x))
            except _WrongKind as exc:
                if not takes:
                    raise
                raise ParamError(f"{name} must be {takes}, not {x!r}") from exc
        return out

    return check


def _affinity_check(name: str, fn: Callable[[str], str]) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if not isinstance(v, str):
            raise _WrongKind(f"{name}: {v!r} is not a string")
        try:
            return fn(v)
        except affinity.AffinityError as exc:
            raise ParamError(f"{name}: {exc}") from exc

    return check


_places = _list_of("triad_places", _affinity_check("triad_places", affinity.check_places), False,
                   "a list of OMP_PLACES values (strings, or one string)")
_binds = _list_of("triad_bind", _affinity_check("triad_bind", affinity.check_bind), False,
                  "a list of OMP_PROC_BIND values (strings, or one string)")
_kmps = _list_of("triad_kmp_affinity",
                 _affinity_check("triad_kmp_affinity", affinity.check_kmp_affinity),
                 takes="a list of KMP_AFFINITY values (strings, or one string)")


def _threads(v: Any) -> str | list[int]:
    if isinstance(v, str) and v.strip().lower() == "all":
        return "all"
    if isinstance(v, str) and re.fullmatch(r"\s*\d+\s*-\s*\d+\s*", v):
        lo, hi = (int(x) for x in v.split("-"))
        if not 1 <= lo <= hi:
            raise ParamError(f"triad_threads range '{v}' must go up from at least 1")
        return list(range(lo, hi + 1))
    threads = _list_of("triad_threads", _count("triad_threads", 1), allow_empty=False,
                       takes=f"{INTEGERS}, a range such as '1-16', or 'all'")(v)
    return sorted(set(threads))


def _size(v: Any) -> str | int:
    if isinstance(v, str) and v.strip().lower() == "auto":
        return "auto"
    return _count("triad_size", 1)(v)


VARIANT_KEYS = {"compiler": "C compiler: gcc, clang, icx, icc, nvc, a path, or 'installed' "
                            "for the module pip built",
                "flags": "compiler flags, OpenMP flag included (verbatim)",
                "tag": "label suffix, e.g. zmm_high gives icx2023.0.0-zmm_high",
                "places": "OMP_PLACES list for this variant (default: triad_places)",
                "bind": "OMP_PROC_BIND list for this variant (default: triad_bind)",
                "kmp_affinity": "KMP_AFFINITY list for this variant (replaces places x bind)"}


def _keyed(v: Any, keys: Iterable[str], where: str, what: str) -> dict:
    """Check that ``v`` is a mapping whose keys all come from ``keys``; return it."""
    valid = ", ".join(keys)
    if not isinstance(v, dict):
        raise ParamError(f"{where}: each {what} is a mapping with keys {valid}, not {v!r}")
    unknown = sorted(set(v) - set(keys))
    if unknown:
        raise ParamError(f"{where}: unknown key '{unknown[0]}' in {v!r} (valid: {valid})")
    return v


def _variant(v: Any) -> dict:
    v = _keyed(v, VARIANT_KEYS, "triad_variants", "variant")
    if not isinstance(v.get("compiler"), str) or not v["compiler"].strip():
        raise ParamError(f"triad_variants: variant {v!r} needs a compiler")
    out = {"compiler": v["compiler"].strip(), "flags": _text("flags")(v.get("flags", "")),
           "tag": _text("tag")(v.get("tag", ""))}
    if out["tag"] and not re.fullmatch(r"\w+", out["tag"]):
        raise ParamError(f"triad_variants: tag '{out['tag']}' may hold only letters, digits, _")
    if "places" in v:
        out["places"] = _places(v["places"])
    if "bind" in v:
        out["bind"] = _binds(v["bind"])
    if "kmp_affinity" in v:
        out["kmp_affinity"] = _kmps(v["kmp_affinity"])
    return out


def _choices(name: str, allowed: tuple[str, ...],
             allow_empty: bool = True) -> Callable[[Any], list[str]]:
    """A list of names from `allowed` (or one name)."""
    takes = f"a list of names from {', '.join(allowed)} (or one name)"

    def check(v: Any) -> list[str]:
        items = _list_of(name, _text(name), allow_empty, takes)(v)
        for x in items:
            if x not in allowed:
                raise ParamError(f"{name}: unknown value '{x}' (valid: {', '.join(allowed)})")
        return items

    return check


def _vm_price(v: Any) -> dict:
    """{payg, spot, currency, region}: this VM's price where the reference tables lack it."""
    if v in (None, {}):
        return {}
    keys = {"payg", "spot", "currency", "region"}
    if not isinstance(v, dict) or set(v) - keys:
        raise ParamError(f"vm_price must be a mapping with keys {', '.join(sorted(keys))}, "
                         f"not {v!r}")
    prices = {k: _positive_number(f"vm_price {k}", allow_zero=True)(v[k])
              for k in ("payg", "spot") if k in v}
    if str(v.get("currency", "JPY")).upper() not in ("JPY", "USD"):
        raise ParamError(f"vm_price: unknown currency '{v.get('currency')}' (known: JPY, USD)")
    if not prices:
        raise ParamError("vm_price needs a payg and/or spot price per node-hour")
    return {"currency": str(v.get("currency", "JPY")).upper(), "region": str(v.get("region", "")),
            **prices}


COMMON = [
    Param("vm", "local", "VM label: names the folder data/runs/<vm>/ and the figures",
          _label("vm")),
    Param("run_id", "", "'' = resume the last unfinished run with these parameters, or start "
          "a new one; a name = that run (resumed if it exists)", _run_id),
    Param("runs_dir", "", "where runs are stored; '' = data/runs of this project",
          _text("runs_dir")),
    Param("vm_price", {}, "this VM's price per node-hour where data/reference/prices_vm.csv "
          "lacks it: {payg, spot, currency, region}", _vm_price),
    Param("test", False, "this params file is a test, not a VM measurement; its runs are "
          "never drawn as a VM in the report", _bool("test")),
]

SECTIONS: dict[str, list[Param]] = {
    "triad": [
        Param("triad_size", "auto", "elements per array; 'auto' = 4x the last-level cache, "
              "at least 10M; the study used 1e9", _size),
        Param("triad_ntimes", 10, "passes per kernel (>= 2; the first is not counted)",
              _count("triad_ntimes", 2)),
        Param("triad_threads", "all", "thread counts: a list, a range '1-16', or 'all' "
              "(1 to the CPUs this process may use)", _threads),
        Param("triad_places", ["cores"], "OMP_PLACES values swept (x triad_bind); 'unset' "
              "leaves the variable out", _places),
        Param("triad_bind", ["close", "spread"], "OMP_PROC_BIND values swept", _binds),
        Param("triad_kmp_affinity", [], "KMP_AFFINITY values swept as well (Intel/LLVM "
              "runtimes only)", _kmps),
        Param("triad_variants", [{"compiler": "gcc", "flags": "-O3 -march=native -fopenmp"}],
              "compiler variants: list of {compiler, flags, tag, places, bind, kmp_affinity}",
              _list_of("triad_variants", _variant, allow_empty=False)),
        Param("triad_stores", ["normal"], "store policies swept for the C variants: normal "
              "(through the cache) and/or streaming (non-temporal; a variant without them is "
              "skipped with a note); the baselines have normal stores only",
              _choices("triad_stores", STORES, allow_empty=False)),
        Param("triad_baselines", ["numba", "numpy"], "Python-only baselines measured in the "
              "same sweep", _choices("triad_baselines", ("numba", "numpy"))),
        Param("triad_repetitions", 3, "fresh processes per configuration (median and spread)",
              _count("triad_repetitions", 1)),
        Param("triad_timeout_s", 600, "seconds one configuration may run before it is "
              "stopped and reported", _positive_number("triad_timeout_s")),
        Param("triad_peak_gbs", 0, "theoretical memory bandwidth of this VM in GB/s "
              "(0 = unknown; the report also looks in data/reference)",
              _positive_number("triad_peak_gbs", allow_zero=True)),
    ],
}

LAUNCHERS = ("hydra", "openmpi", "intel", "slurm", "none")
COMBO_KEYS = {
    "label": "name in figures; empty: <compiler><version>+<mpi><version> of the build",
    "mpiexec": "launcher command, a name on PATH (the environment's bin/ first) or a path",
    "launcher": f"how placements become arguments: {', '.join(LAUNCHERS)}",
    "args": "extra launcher arguments (list of strings)",
    "env": "extra environment variables (mapping), e.g. MPI4PY_LIBMPI",
    "mpicc": "build the kernel with this MPI compiler wrapper (empty: the installed module)",
    "flags": "flags for mpicc (default -O2)",
    "optional": "true: skip this combination with a note where its mpiexec/mpicc is missing "
                "or its mpicc cannot build the kernel",
}
PLACEMENTS = ("same-socket", "across-sockets", "across-nodes")


def _str_list(name: str, what: str = "") -> Callable[[Any], list[str]]:
    """A list of strings (integers are taken as their digits); no single string stands for
    one, as an argument list such as '--bind-to core' would be one argument."""
    takes = f"a list of strings{f' ({what})' if what else ''}"

    def check(v: Any) -> list[str]:
        if not isinstance(v, list):
            raise ParamError(f"{name} must be {takes}, not {v!r}")
        for x in v:
            if isinstance(x, bool) or not isinstance(x, (str, int)):
                raise ParamError(f"{name} must be {takes}, not {x!r}")
        return [str(x) for x in v]

    return check


def _combination(v: Any, where: str = "pingpong_combinations") -> dict:
    v = _keyed(v, COMBO_KEYS, where, "combination")
    out = {"label": _text(f"{where} label")(v.get("label", "")),
           "mpiexec": _text(f"{where} mpiexec")(v.get("mpiexec", "mpiexec")),
           "launcher": v.get("launcher", "hydra"),
           "args": _str_list(f"{where} args")(v.get("args", [])),
           "mpicc": _text(f"{where} mpicc")(v.get("mpicc", "")),
           "flags": _text(f"{where} flags")(v.get("flags", "-O2")),
           "optional": v.get("optional", False)}
    if out["launcher"] not in LAUNCHERS:
        raise ParamError(f"{where}: launcher '{out['launcher']}' is not one of "
                         f"{', '.join(LAUNCHERS)}")
    if not out["mpiexec"].strip():
        raise ParamError(f"{where}: mpiexec must name a command")
    if out["label"] and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", out["label"]):
        raise ParamError(f"{where}: label '{out['label']}' may hold only letters, digits and "
                         "_ . + -")
    env = v.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise ParamError(f"{where}: env must map variable names to values, not {env!r}")
    out["env"] = {k: str(x) for k, x in env.items()}
    if not isinstance(out["optional"], bool):
        raise ParamError(f"{where}: optional must be true or false")
    return out


def _placement(v: Any) -> dict:
    where = "pingpong_placements"
    if isinstance(v, str):
        if v not in PLACEMENTS:
            raise ParamError(f"{where}: unknown placement '{v}' (use {', '.join(PLACEMENTS)} "
                             "or a mapping {label, cpus: [a, b], hosts: [h1, h2]})")
        return {"label": v, "kind": v}
    if not isinstance(v, dict) or set(v) - {"label", "cpus", "hosts"} or "label" not in v:
        raise ParamError(f"{where}: a custom placement is a mapping with label and cpus "
                         f"and/or hosts, not {v!r}")
    cpus, hosts = v.get("cpus"), v.get("hosts")
    if cpus is not None and (not isinstance(cpus, list) or len(cpus) != 2 or not all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus)):
        raise ParamError(f"{where}: cpus must be two CPU numbers (rank 0, rank 1), not {cpus!r}")
    if hosts is not None and (not isinstance(hosts, list) or len(hosts) not in (1, 2) or not all(
            isinstance(h, str) and h for h in hosts)):
        raise ParamError(f"{where}: hosts must be one or two host names, not {hosts!r}")
    if cpus is not None and cpus[0] == cpus[1] and len(set(hosts or [])) < 2:
        raise ParamError(f"{where}: both ranks on CPU {cpus[0]} of one host would share it "
                         "(and spin against each other); give two CPUs, or two hosts")
    return {"label": _label(f"{where} label")(v["label"]), "kind": "custom", "cpus": cpus,
            "hosts": hosts}


def _pp_size(name: str, allow_zero: bool) -> Callable[[Any], int]:
    """A message size in bytes: a power of two (or 0), as 4096, 4M, 4MiB or 4.194304e6."""
    def check(v: Any) -> int:
        from kernels_ext.errors import KernelError
        from kernels_ext.pingpong import SIZE_LIMIT, is_power_of_two, parse_size

        if isinstance(v, float) and math.isfinite(v) and v == int(v):
            v = int(v)  # 6.5536e4
        try:
            n = parse_size(v) if isinstance(v, (int, str)) and not isinstance(v, bool) else None
        except KernelError as exc:
            raise ParamError(f"{name}: {exc}") from exc
        if n is None or n > SIZE_LIMIT or not (is_power_of_two(n) or (allow_zero and n == 0)):
            raise ParamError(f"{name} must be {'0 or ' if allow_zero else ''}a power of two "
                             f"up to {SIZE_LIMIT} bytes, not {v!r}")
        return n

    return check


def _optional_count(name: str, minimum: int) -> Callable[[Any], int | None]:
    def check(v: Any) -> int | None:
        return None if v is None else _count(name, minimum)(v)

    return check


SECTIONS["pingpong"] = [
    Param("pingpong_combinations", [{"mpiexec": "mpiexec", "launcher": "hydra"}],
          "compiler x MPI library combinations: list of {label, mpiexec, launcher, args, env, "
          "mpicc, flags, optional}", _list_of("pingpong_combinations", _combination, False)),
    Param("pingpong_placements", ["same-socket", "across-sockets", "across-nodes"],
          "where the two ranks run: same-socket, across-sockets, across-nodes, or "
          "{label, cpus, hosts}; impossible ones are skipped with a note",
          _list_of("pingpong_placements", _placement, False)),
    Param("pingpong_hosts", [], "host names for across-nodes; empty: the scheduler's node "
          "file ($PBS_NODEFILE, $SLURM_JOB_NODELIST)", _str_list("pingpong_hosts", "host names")),
    Param("pingpong_tests", ["latency", "bw", "bibw"], "OSU tests to run",
          _choices("pingpong_tests", ("latency", "bw", "bibw"), allow_empty=False)),
    Param("pingpong_min_size", 0, "smallest message in bytes (0 or a power of two; bandwidth "
          "tests start at 1)", _pp_size("pingpong_min_size", True)),
    Param("pingpong_max_size", 4194304, "largest message in bytes (a power of two)",
          _pp_size("pingpong_max_size", False)),
    Param("pingpong_iterations", None, "timed iterations up to 8 KiB (null: OSU's, 10000 "
          "latency / 100 bandwidth)", _optional_count("pingpong_iterations", 1)),
    Param("pingpong_skip", None, "warm-up iterations up to 8 KiB (null: OSU's)",
          _optional_count("pingpong_skip", 0)),
    Param("pingpong_iterations_large", None, "timed iterations above 8 KiB (null: OSU's)",
          _optional_count("pingpong_iterations_large", 1)),
    Param("pingpong_skip_large", None, "warm-up iterations above 8 KiB (null: OSU's)",
          _optional_count("pingpong_skip_large", 0)),
    Param("pingpong_window", None, "messages in flight for bw/bibw (null: OSU's 64)",
          _optional_count("pingpong_window", 1)),
    Param("pingpong_hugepages", [False], "message buffers without (false, as OSU) and/or with "
          "transparent huge pages (true: label +thp)", _list_of(
              "pingpong_hugepages", _bool("pingpong_hugepages"), allow_empty=False,
              takes="a list of true or false values (or one of them)")),
    Param("pingpong_baselines", ["mpi4py"], "Python-only baselines in the same sweep",
          _choices("pingpong_baselines", ("mpi4py",))),
    Param("pingpong_validate", True, "first check the data of every combination, placement "
          "and test with a short validated run", _bool("pingpong_validate")),
    Param("pingpong_repetitions", 3, "fresh mpiexec runs per configuration",
          _count("pingpong_repetitions", 1)),
    Param("pingpong_timeout_s", 300, "seconds one mpiexec may run before it is stopped",
          _positive_number("pingpong_timeout_s")),
]

def _problem(v: Any) -> dict:
    where = "biccg_problems"
    if isinstance(v, dict) and set(v) == {"poisson"}:
        grid = v["poisson"]
        if not (isinstance(grid, list) and len(grid) == 3 and all(
                isinstance(g, int) and not isinstance(g, bool) and g >= 1 for g in grid)):
            raise ParamError(f"{where}: poisson needs three positive grid sizes [nx, ny, nz], "
                             f"not {grid!r}")
        return {"poisson": list(grid)}
    if isinstance(v, dict) and "mtx" in v and set(v) <= {"mtx", "optional"}:
        if not isinstance(v["mtx"], str) or not v["mtx"]:
            raise ParamError(f"{where}: mtx needs a file path, not {v['mtx']!r}")
        return {"mtx": v["mtx"], "optional": _bool(f"{where} optional")(v.get("optional", False))}
    raise ParamError(f"{where}: each problem is {{poisson: [nx, ny, nz]}} or "
                     f"{{mtx: path, optional: true/false}}, not {v!r}")


SECTIONS["biccg"] = [
    Param("biccg_problems", [{"poisson": [64, 64, 64]}], "matrices: {poisson: [nx, ny, nz]} "
          "or {mtx: path, optional}", _list_of("biccg_problems", _problem, allow_empty=False)),
    Param("biccg_combination", {"mpiexec": "mpiexec", "launcher": "hydra"},
          "the MPI launcher: {mpiexec, launcher, args, env} as in pingpong_combinations",
          lambda v: _combination(v, "biccg_combination")),
    Param("biccg_nodes", [1], "node counts (hosts from biccg_hosts or the scheduler)",
          _list_of("biccg_nodes", _count("biccg_nodes", 1), False, INTEGERS)),
    Param("biccg_ranks_per_node", [1, 2], "MPI ranks per node (the study: 2)",
          _list_of("biccg_ranks_per_node", _count("biccg_ranks_per_node", 1), False, INTEGERS)),
    Param("biccg_threads", [1, 2], "OpenMP threads per rank",
          _list_of("biccg_threads", _count("biccg_threads", 1), False, INTEGERS)),
    Param("biccg_hosts", [], "host names; empty: $PBS_NODEFILE or $SLURM_JOB_NODELIST",
          _str_list("biccg_hosts", "host names")),
    Param("biccg_block_size", 32, "rows per block (the study: 32)",
          _count("biccg_block_size", 1)),
    Param("biccg_colors", 20, "at least this many colors (the study: 20)",
          _count("biccg_colors", 1)),
    Param("biccg_tol", 1e-7, "relative residual to stop at (the study: 1e-7)",
          _positive_number("biccg_tol")),
    Param("biccg_max_iter", 10000, "iteration limit; reaching it is a failure",
          _count("biccg_max_iter", 1)),
    Param("biccg_baselines", ["scipy-cg", "numba-ic0cg"], "Python-side solvers on one "
          "process, per problem", _choices("biccg_baselines",
                                          ("scipy-cg", "numba-ic0cg", "numba-cg"))),
    Param("biccg_repetitions", 3, "fresh runs per configuration",
          _count("biccg_repetitions", 1)),
    Param("biccg_timeout_s", 1800, "seconds one solve may run before it is stopped",
          _positive_number("biccg_timeout_s")),
]

NOTEBOOKS = {"triad": "010_measure_triad.ipynb", "pingpong": "020_measure_pingpong.ipynb",
             "biccg": "030_measure_biccg.ipynb"}


def schema(section: str) -> dict[str, Param]:
    """The parameters a notebook reads: the common ones and its own section's."""
    if section not in SECTIONS:
        raise ParamError(f"unknown benchmark '{section}' (known: {', '.join(SECTIONS)})")
    return {p.name: p for p in COMMON + SECTIONS[section]}


def known_names() -> dict[str, str]:
    """Every key some notebook knows, mapped to the section that reads it."""
    out = {p.name: "common" for p in COMMON}
    for section, params in SECTIONS.items():
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


def load_file(path: str | Path) -> dict[str, Any]:
    """Read a params YAML file with :class:`ParamsLoader`; check its keys.

    Malformed YAML is a ParamError naming the line; an empty (or comment-only)
    file and one whose top level is not a mapping are ParamErrors naming the file.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ParamError(f"cannot read parameter file {p}: {exc.strerror}") from exc
    try:
        data = loads(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ParamError(f"malformed YAML in {p}{where}: {problem}") from exc
    if data is None:
        raise ParamError(f"{p} is empty: a params file needs at least `vm: <name>`")
    if not isinstance(data, dict):
        raise ParamError(f"{p}: expected a mapping of parameter names to values (`vm: <name>` "
                         f"and more, one a line), got {type(data).__name__}")
    check_keys([str(k) for k in data], str(p))
    return data


def from_namespace(namespace: dict[str, Any], before: set[str], section: str) -> dict:
    """Validate the parameters a notebook holds after papermill's injection.

    `before` is ``set(globals())`` taken in the cell above the parameters cell;
    every public name defined since came from the parameters cell or from
    papermill's injected cell.
    """
    values = {k: v for k, v in namespace.items()
              if k not in before and not k.startswith("_") and not callable(v)
              and type(v).__name__ != "module"}
    return validate(values, section, where=f"notebook {NOTEBOOKS.get(section, section)}")


def for_section(values: dict[str, Any], section: str) -> dict[str, Any]:
    """The subset of a params file that the notebook of `section` reads."""
    names = schema(section)
    return {k: v for k, v in values.items() if k in names}


#: Keys added after runs were committed, with the value those runs measured.
ADDED_LATER: dict[str, Any] = {"triad_stores": ["normal"]}


def digest(params: dict[str, Any], section: str) -> str:
    """A short fingerprint of what a sweep measures (run_id and runs_dir left out).

    ``test: true`` counts, so that a test run is never resumed as a VM
    measurement (nor the other way round); ``test: false`` is left out, so the
    fingerprints of runs made before the key existed stay what they were.  So
    are the keys added later (ADDED_LATER) where they hold what every earlier
    run measured.
    """
    keep = {k: v for k, v in params.items()
            if k not in ("run_id", "runs_dir") and (k == "vm" or k.startswith(section + "_"))
            and not (k in ADDED_LATER and v == ADDED_LATER[k])}
    if params.get("test"):
        keep["test"] = True
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:12]
