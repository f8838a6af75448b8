"""Thread-affinity settings: validate them before a run, name them as the study does.

OpenMP runtimes read ``OMP_PLACES``, ``OMP_PROC_BIND`` and (Intel and LLVM
runtimes) ``KMP_AFFINITY`` once, at start-up, and most of them only warn about a
value they do not understand and then run unbound.  A typo would silently
measure something else, so every value is checked here first, by the grammar
of the OpenMP 5.2 specification and of Intel's KMP_AFFINITY documentation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PLACE_NAMES = ("threads", "cores", "ll_caches", "numa_domains", "sockets")
BIND_NAMES = ("true", "false", "primary", "master", "close", "spread")
KMP_TYPES = ("compact", "scatter", "balanced", "explicit", "none", "disabled", "logical",
             "physical")
KMP_GRANULARITY = ("fine", "thread", "core", "tile", "die", "module", "socket", "package",
                   "node", "numa", "numa_domain", "l1_cache", "l2_cache", "l3_cache",
                   "ll_cache")
KMP_FLAGS = ("verbose", "noverbose", "warnings", "nowarnings", "respect", "norespect",
             "duplicates", "noduplicates", "dups", "nodups", "reset", "noreset")
UNSET = "unset"  # leave the variable out of the environment: the runtime's default

_NUM = r"\d+"
_RES = rf"!?{_NUM}(?::{_NUM}(?::-?{_NUM})?)?"
_PLACE = rf"!?\{{{_RES}(?:,{_RES})*\}}(?::{_NUM}(?::-?{_NUM})?)?"
_PLACE_LIST = re.compile(rf"{_PLACE}(?:,{_PLACE})*")
_ABSTRACT = re.compile(rf"({'|'.join(PLACE_NAMES)})(\({_NUM}\))?")


class AffinityError(ValueError):
    """An affinity value no OpenMP runtime would accept; one line naming it."""


def check_places(value: str) -> str:
    """Validate an OMP_PLACES value (abstract name or explicit place list); return it."""
    v = re.sub(r"\s+", "", str(value))
    if v == UNSET or _ABSTRACT.fullmatch(v.lower()) or _PLACE_LIST.fullmatch(v):
        return v.lower() if _ABSTRACT.fullmatch(v.lower()) else v
    raise AffinityError(
        f"unknown OMP_PLACES value '{value}': use one of {', '.join(PLACE_NAMES)} "
        "(optionally with a count, e.g. cores(8)), an explicit list such as {0:4},{4:4}, "
        f"or '{UNSET}'"
    )


def check_bind(value: str) -> str:
    """Validate an OMP_PROC_BIND value (true, false or a list of policies); return it."""
    v = re.sub(r"\s+", "", str(value)).lower()
    parts = v.split(",")
    if v == UNSET or v in ("true", "false") or (
        parts and all(p in ("primary", "master", "close", "spread") for p in parts)
    ):
        return v
    raise AffinityError(
        f"unknown OMP_PROC_BIND value '{value}': use one of {', '.join(BIND_NAMES)}, "
        f"a comma list of primary/close/spread for nested levels, or '{UNSET}'"
    )


def _kmp_tokens(value: str) -> list[str]:
    """Split on commas outside proclist=[...] brackets."""
    tokens, depth, cur = [], 0, ""
    for ch in value:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            tokens.append(cur)
            cur = ""
        else:
            cur += ch
    tokens.append(cur)
    return tokens


@dataclass(frozen=True)
class KmpAffinity:
    """A parsed KMP_AFFINITY value."""

    value: str
    granularity: str  # "" when not given
    type: str

    @property
    def label(self) -> str:
        """The study's label part: ``core+compact`` for ``granularity=core,compact``."""
        return f"{self.granularity}+{self.type}" if self.granularity else self.type


def parse_kmp_affinity(value: str) -> KmpAffinity:
    """Parse a KMP_AFFINITY value: ``[modifier,...]type[,permute[,offset]]``."""
    v = re.sub(r"\s+", "", str(value)).lower()

    def bad(why: str) -> AffinityError:
        return AffinityError(
            f"unknown KMP_AFFINITY value '{value}': {why} (types: {', '.join(KMP_TYPES)}; "
            f"granularity: {', '.join(KMP_GRANULARITY)})"
        )

    gran, kind, numbers, proclist = "", "", 0, False
    for tok in _kmp_tokens(v):
        if not tok:
            raise bad("empty item")
        key, _, arg = tok.partition("=")
        if key in ("granularity", "gran"):
            if arg not in KMP_GRANULARITY:
                raise bad(f"granularity '{arg}' is not known")
            gran = arg
        elif key == "proclist":
            if not re.fullmatch(r"\[[\d,\-{}]+\]", arg):
                raise bad(f"proclist '{arg}' is not a bracketed list of CPUs")
            proclist = True
        elif tok in KMP_FLAGS:
            pass
        elif tok in KMP_TYPES:
            if kind:
                raise bad(f"two types, '{kind}' and '{tok}'")
            kind = tok
        elif tok.isdigit() and kind:
            numbers += 1
            if numbers > 2:
                raise bad("more than two numbers (permute, offset) after the type")
        else:
            raise bad(f"'{tok}' is not a modifier, a type or a number after the type")
    if not kind:
        raise bad("no affinity type")
    if kind == "explicit" and not proclist:
        raise bad("type 'explicit' needs proclist=[...]")
    return KmpAffinity(v, gran, kind)


def check_kmp_affinity(value: str) -> str:
    """Validate a KMP_AFFINITY value; return it normalised (lower case, no spaces)."""
    return parse_kmp_affinity(value).value


@dataclass(frozen=True)
class Affinity:
    """One affinity setting of a sweep: OMP_PLACES x OMP_PROC_BIND, or KMP_AFFINITY."""

    places: str = UNSET
    bind: str = UNSET
    kmp_affinity: str = ""

    @property
    def label(self) -> str:
        """``cores+spread`` / ``core+compact`` / ``unset+unset``, as in the study's labels."""
        if self.kmp_affinity:
            return parse_kmp_affinity(self.kmp_affinity).label
        return f"{self.places}+{self.bind}"

    def env(self) -> dict[str, str]:
        """The variables to set in the fresh process (UNSET ones are left out)."""
        if self.kmp_affinity:
            return {"KMP_AFFINITY": self.kmp_affinity}
        out = {}
        if self.places != UNSET:
            out["OMP_PLACES"] = self.places
        if self.bind != UNSET:
            out["OMP_PROC_BIND"] = self.bind
        return out


def from_environ(environ: dict[str, str]) -> Affinity:
    """Validate the affinity variables of an environment; AffinityError names a bad one."""
    kmp = environ.get("KMP_AFFINITY", "")
    return Affinity(
        places=check_places(environ["OMP_PLACES"]) if environ.get("OMP_PLACES") else UNSET,
        bind=check_bind(environ["OMP_PROC_BIND"]) if environ.get("OMP_PROC_BIND") else UNSET,
        kmp_affinity=check_kmp_affinity(kmp) if kmp else "",
    )
