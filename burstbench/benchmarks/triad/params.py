"""STREAM Triad's parameters (010_measure_triad.ipynb's parameters cell): ``triad_*``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from burstbench.core.checks import (
    INTEGERS,
    Param,
    ParamError,
    WrongKind,
    check_bool,
    check_choices,
    check_count,
    check_keyed,
    check_list,
    check_positive,
    check_text,
)
from kernels_ext.common.cli import size_bytes
from kernels_ext.triad import STORES, affinity


# -- parameters (010_measure_triad.ipynb's parameters cell) ------------------------------------
def _affinity_check(name: str, fn: Callable[[str], str]) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if not isinstance(v, str):
            raise WrongKind(f"{name}: {v!r} is not a string")
        try:
            return fn(v)
        except affinity.AffinityError as exc:
            raise ParamError(f"{name}: {exc}") from exc

    return check


_places = check_list("triad_places", _affinity_check("triad_places", affinity.check_places),
                     False, "a list of OMP_PLACES values (strings, or one string)")


_binds = check_list("triad_bind", _affinity_check("triad_bind", affinity.check_bind), False,
                    "a list of OMP_PROC_BIND values (strings, or one string)")


_kmps = check_list("triad_kmp_affinity",
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
    threads = check_list("triad_threads", check_count("triad_threads", 1), allow_empty=False,
                         takes=f"{INTEGERS}, a range such as '1-16', or 'all'")(v)
    return sorted(set(threads))


def _size(v: Any) -> str | int:
    if isinstance(v, str) and v.strip().lower() == "auto":
        return "auto"
    return check_count("triad_size", 1)(v)


#: Cache tiers a Triad ladder point may be named by: half the machine's L2 (all its
#: instances), half its last-level cache: working sets that fit with room to spare.
TIER_NAMES = ("l2", "llc")
#: The smallest working set a ladder point may ask for: three arrays of 1,024 doubles.
MIN_TIER_BYTES = 3 * 8 * 1024


def _tier(v: Any) -> str | int:
    """A ladder point: 'l2', 'llc', or a working set (three arrays) in bytes: 64MiB, 6.4MiB,
    1G."""
    if isinstance(v, str) and v.strip().lower() in TIER_NAMES:
        return v.strip().lower()
    n = size_bytes(v, fractions=True)
    if n is None:
        raise ParamError(f"triad_tiers: {v!r} is not l2, llc or a size such as 64MiB")
    if n < MIN_TIER_BYTES:
        raise ParamError(f"triad_tiers: {v!r} is under {MIN_TIER_BYTES:,} bytes (three "
                         "arrays of 1,024 doubles)")
    return n


VARIANT_KEYS = {"compiler": "C compiler: gcc, clang, icx, icc, nvc, a path, or 'installed' "
                "for the module pip built",
                "flags": "compiler flags, OpenMP flag included (verbatim)",
                "tag": "label suffix, e.g. zmm_high gives icx2023.0.0-zmm_high",
                "places": "OMP_PLACES list for this variant (default: triad_places)",
                "bind": "OMP_PROC_BIND list for this variant (default: triad_bind)",
                "kmp_affinity": "KMP_AFFINITY list for this variant (replaces places x bind)"}


def _variant(v: Any) -> dict:
    v = check_keyed(v, VARIANT_KEYS, "triad_variants", "variant")
    if not isinstance(v.get("compiler"), str) or not v["compiler"].strip():
        raise ParamError(f"triad_variants: variant {v!r} needs a compiler")
    out = {"compiler": v["compiler"].strip(), "flags": check_text("flags")(v.get("flags", "")),
           "tag": check_text("tag")(v.get("tag", ""))}
    if out["tag"] and not re.fullmatch(r"\w+", out["tag"]):
        raise ParamError(f"triad_variants: tag '{out['tag']}' may hold only letters, digits, _")
    if "places" in v:
        out["places"] = _places(v["places"])
    if "bind" in v:
        out["bind"] = _binds(v["bind"])
    if "kmp_affinity" in v:
        out["kmp_affinity"] = _kmps(v["kmp_affinity"])
    return out


PARAMS = [
        Param("triad_size", "auto",
              "elements per array; `auto` = 4x the last-level cache (read from the OS), at least "
              "10M; `1e9`, `80_000_000` accepted",
              _size),
        Param("triad_ntimes", 10,
              "passes per kernel, >= 2 (the first is not counted, as in stream.c)",
              check_count("triad_ntimes", 2)),
        Param("triad_threads", "all",
              "list (`[1, 2, 4]`), range (`\"1-16\"`), or `all` (1 .. the CPUs the process may "
              "use)",
              _threads),
        Param("triad_places", ["cores"],
              "`OMP_PLACES` values, crossed with `triad_bind`; `unset` leaves the variable out",
              _places),
        Param("triad_bind", ["close", "spread"],
              "`OMP_PROC_BIND` values",
              _binds),
        Param("triad_kmp_affinity", [],
              "`KMP_AFFINITY` values (Intel and LLVM OpenMP runtimes; refused for GNU libgomp, "
              "which ignores them)",
              _kmps),
        Param("triad_variants", [{"compiler": "gcc", "flags": "-O3 -march=native -fopenmp"}],
              "list of `{compiler, flags, tag, places, bind, kmp_affinity}`: compiler is `gcc`, "
              "`clang`, `icx`, `icc`, `nvc`, a path, or `installed` (the module pip built); flags "
              "verbatim, OpenMP flag included; `tag` suffixes the label (`icx2023.0.0-zmm_high`); "
              "`places`/`bind`/`kmp_affinity` replace the global affinity lists for this variant. "
              "A compiler the machine lacks is skipped with a note",
              check_list("triad_variants", _variant, allow_empty=False),
              shown="gcc `-O3 -march=native -fopenmp`"),
        Param("triad_stores", ["normal"],
              "store policies of the C variants: `normal` (through the cache: Triad moves 32 B "
              "per element, STREAM counts 24) and/or `streaming` (non-temporal stores, "
              "AVX-512/AVX/SSE2 as the variant's flags allow; a variant without them has its "
              "streaming points skipped with a note). Labels of streaming points end their "
              "variant part in `-streaming`; the baselines keep their own stores (numba normal, "
              "NumPy memmove)",
              check_choices("triad_stores", STORES, allow_empty=False), since_runs=["normal"]),
        Param("triad_baselines", ["numba", "numpy"],
              "Python-only baselines in the same sweep (numba with the global places x bind and "
              "thread counts; NumPy on one thread)",
              check_choices("triad_baselines", ("numba", "numpy"))),
        Param("triad_repetitions", 3,
              "repetitions of each configuration, spread over the sweep's time (each a "
              "turn of its setting's process); figures show the median and min-max",
              check_count("triad_repetitions", 1)),
        Param("triad_serve", True,
              "one process per variant and affinity setting stays alive and serves its "
              "repetitions, each when the sweep's turn comes (its start, imports and first "
              "touch paid once); false: a fresh process for every repetition, as before "
              "2026-11-26. On the 2-core development VM served repetitions read about 1.2x "
              "the Triad of fresh processes and of stream.c (comparisons/README.md): compare "
              "both before trusting a VM's absolute figure",
              check_bool("triad_serve"), since_runs=False),
        Param("triad_timeout_s", 600,
              "seconds per configuration before it is stopped and reported as failed",
              check_positive("triad_timeout_s")),
        Param("triad_tiers", ["llc"],
              "the Triad's ladder of working sets (its three arrays together), each measured "
              "at every thread count with the first C variant's first affinity setting, "
              "normal stores, beside the sweep's STREAM-rule size: `llc` (half the last-level "
              "cache: fits it), `l2` (half the L2s), or a size (`64MiB`: a solve's working "
              "set per node, say). The cost model prices a working set at the bandwidth "
              "the ladder measured for its size; `[]` measures none",
              check_list("triad_tiers", _tier, takes="a list of l2, llc or sizes such as "
                         "64MiB"), since_runs=[]),
        Param("triad_peak_gbs", 0,
              "theoretical memory bandwidth of the VM in GB/s (0: unknown; the report also looks "
              "in `data/reference/vm_memory_bandwidth.csv`)",
              check_positive("triad_peak_gbs", allow_zero=True)),
    ]


#: What papermill_params/README.md says of the labels (params.docs() writes it there).
LABELS = ("Labels follow the study's Appendix Table A: "
          "`<compiler><version>[-<tag>]+<places>+<bind>`, or\n`+<granularity>+<type>` for "
          "`KMP_AFFINITY` (`granularity=core,compact` gives `core+compact`).")
