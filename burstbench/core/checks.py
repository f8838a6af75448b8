"""Parameter checks: each a function from a value as written (YAML, a notebook's parameters
cell, papermill's injected cell) to the value used, or a ParamError of one line naming the
key and what it takes; and the YAML loader that reads numbers as YAML 1.2 writes them.

Files are read with :class:`ParamsLoader`, which reads numbers in YAML 1.2's
spellings (``1e-7``, ``.5``, ``+1e3``) as numbers; PyYAML's YAML 1.1 reads
``1e-7`` as a string.  Papermill's own ``-f`` reads files as YAML 1.1, so the
checks of number keys also take a string that holds a number.

Pure: nothing here knows a benchmark (burstbench.params asks the registry which keys
exist).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from kernels_ext.common.cli import parse_count
from kernels_ext.common.errors import BadInput


class ParamError(ValueError):
    """A parameter file or value is wrong; the message is one line naming it."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback (JupyterLab, papermill): the one line."""
        return [f"ParamError: {self}"]


def strict_keys(where: str, got: Any, keys: Sequence[str]) -> dict:
    """`got`, a mapping whose every key is one of `keys`; else ParamError, one line, naming
    the first unknown key, the nearest valid one and all of them (never a key ignored)."""
    if not isinstance(got, dict):
        raise ParamError(f"{where} must be a mapping, not {got!r}")
    bad = [k for k in got if k not in keys]
    if bad:
        near = difflib.get_close_matches(str(bad[0]), list(keys), n=1)
        raise ParamError(f"{where}: unknown key {bad[0]!r} ("
                         + (f"did you mean {near[0]}? " if near else "")
                         + f"the keys are: {', '.join(keys)})")
    return got


class WrongKind(ParamError):
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
    scalars stay strings, ``true``/``yes`` are booleans.  A key given twice in one mapping
    is an error (PyYAML would keep the last silently), naming both lines; so is a second
    merge key ``<<``.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, yaml.Node] = {}
        merge: yaml.Node | None = None
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # one, of a map or a list of maps
                if merge is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"'<<' given twice (first on line "
                        f"{merge.start_mark.line + 1}): merge several maps with one, "
                        "<<: [*a, *b]", key_node.start_mark)
                merge = key_node
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: SafeLoader's own error follows
                continue
            if first is not None:  # each named as written: `1` and `true` are one key
                said = [n.value if isinstance(n, yaml.ScalarNode) else key
                        for n in (key_node, first)]
                was = f" as {said[1]!r}" if said[1] != said[0] else ""
                raise yaml.constructor.ConstructorError(
                    None, None, f"{said[0]!r} given twice (first on line "
                    f"{first.start_mark.line + 1}{was})", key_node.start_mark)
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


ParamsLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _FLOAT_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
ParamsLoader.add_implicit_resolver(_FLOAT_TAG, _FLOAT, list("-+0123456789."))


def loads(text: str) -> Any:
    """Parse YAML text as a params file is parsed (:class:`ParamsLoader`)."""
    return yaml.load(text, Loader=ParamsLoader)  # a SafeLoader: no Python objects


#: Param.since_runs of a key as old as the stored runs.
NEW = object()


@dataclass(frozen=True)
class Param:
    """One notebook parameter: its default (a literal, as in the parameters cell), what it
    means (Markdown: papermill_params/README.md is written from it, see docs()) and its check.

    since_runs: for a key added after runs were stored, the value those runs measured
    (left out of the fingerprint where it holds, so that they still resume).
    shown: the default as the documentation writes it (empty: the default in YAML)."""

    name: str
    default: Any
    doc: str
    check: Callable[[Any], Any]
    since_runs: Any = NEW
    shown: str = ""


def check_count(name: str, minimum: int) -> Callable[[Any], int]:
    def check(v: Any) -> int:
        try:
            n = parse_count(v, name)
        except BadInput as exc:
            raise WrongKind(str(exc)) from exc
        if n < minimum:
            raise ParamError(f"{name} must be at least {minimum}, not {n}")
        return n

    return check


def as_number(v: Any) -> float | None:
    """`v` as a float: an int, a float or a string holding a decimal number; else None."""
    if isinstance(v, str) and _NUMBER_TEXT.fullmatch(v.strip()):
        return float(v.strip().replace("_", ""))
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def check_positive(name: str, allow_zero: bool = False) -> Callable[[Any], float]:
    """A finite number above zero (or at least zero); a string such as '1e-7' is taken too."""
    def check(v: Any) -> float:
        x = as_number(v)
        if x is None or not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
            kind = WrongKind if x is None else ParamError
            raise kind(f"{name} must be a {'non-negative' if allow_zero else 'positive'} "
                       f"number, not {v!r}")
        return x

    return check


def check_label(name: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", v):
            raise ParamError(f"{name} must be a name of letters, digits and _ . + - "
                             f"(it names a folder), not {v!r}")
        return v

    return check


def check_typed(name: str, kind: type, what: str) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if not isinstance(v, kind):
            raise WrongKind(f"{name} must be {what}, not {v!r}")
        return v

    return check


def check_text(name: str) -> Callable[[Any], str]:
    return check_typed(name, str, "a string")


def check_bool(name: str) -> Callable[[Any], bool]:
    """true or false (YAML's true/false, yes/no, on/off), nothing else."""
    return check_typed(name, bool, "true or false")


#: What a list of counts takes, as its errors say.
INTEGERS = "a list of integers (or one integer)"


def check_list(name: str, item: Callable[[Any], Any], allow_empty: bool = True,
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
            except WrongKind as exc:
                if not takes:
                    raise
                raise ParamError(f"{name} must be {takes}, not {x!r}") from exc
        return out

    return check


def check_keyed(v: Any, keys: Iterable[str], where: str, what: str) -> dict:
    """Check that ``v`` is a mapping whose keys all come from ``keys``; return it."""
    valid = ", ".join(keys)
    if not isinstance(v, dict):
        raise ParamError(f"{where}: each {what} is a mapping with keys {valid}, not {v!r}")
    unknown = sorted(set(v) - set(keys))
    if unknown:
        raise ParamError(f"{where}: unknown key '{unknown[0]}' in {v!r} (valid: {valid})")
    return v


def check_choices(name: str, allowed: tuple[str, ...],
                  allow_empty: bool = True) -> Callable[[Any], list[str]]:
    """A list of names from `allowed` (or one name)."""
    takes = f"a list of names from {', '.join(allowed)} (or one name)"

    def check(v: Any) -> list[str]:
        items = check_list(name, check_text(name), allow_empty, takes)(v)
        for x in items:
            if x not in allowed:
                raise ParamError(f"{name}: unknown value '{x}' (valid: {', '.join(allowed)})")
        return items

    return check


def check_str_list(name: str, what: str = "") -> Callable[[Any], list[str]]:
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


def check_optional_count(name: str, minimum: int) -> Callable[[Any], int | None]:
    def check(v: Any) -> int | None:
        return None if v is None else check_count(name, minimum)(v)

    return check
