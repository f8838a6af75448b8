"""STREAM Triad: memory bandwidth over compilers x flags x threads x affinity (the study's
section 3.1, Figures 2-4).

A configuration is (variant or baseline, affinity setting, threads,
repetition).  Its label follows the study's Appendix Table A:
``<compiler><version>[-<tag>]+<places>+<bind>`` (``gcc12.2.0+cores+spread``) or
``<compiler><version>+<granularity>+<type>`` for KMP_AFFINITY
(``icx2023.0.0+core+compact``); with streaming stores the variant part ends in
``-streaming`` (``gcc12.2.0-streaming+cores+spread``); baselines are
``numba<version>+<places>+<bind>`` and ``numpy<version>`` (one thread); the
baselines' stores are their own (kernels_ext.triad.BASELINE_STORES).
Repetitions are outermost, so slow drift of the machine spreads over all
configurations instead of biasing one.
"""

from burstbench.benchmarks.triad.params import LABELS, PARAMS
from burstbench.registry import Benchmark, lazy

#: The configuration columns of its rows (besides store.HEAD and store.TAIL).
COLUMNS = ("variant", "compiler", "compiler_version", "flags", "stores", "places", "bind",
           "kmp_affinity", "threads", "size", "tier", "function", "bound_cpus", "moved_threads")

SPEC = Benchmark(
    name="triad", params=tuple(PARAMS), columns=COLUMNS, notebook="010_measure_triad.ipynb",
    plan=lazy(f"{__name__}.tasks", "plan"), parse=lazy(f"{__name__}.results", "parse"),
    report=lazy(f"{__name__}.report", "report_section"), title="STREAM Triad", labels=LABELS,
    env_prefixes=("OMP_", "KMP_", "GOMP_", "NUMBA_"),
    headline=lazy(f"{__name__}.results", "headline"),
    against_study=lazy(f"{__name__}.results", "against_study"),
    merits=lazy(f"{__name__}.results", "merits"))
plan, parse, report_section = SPEC.plan, SPEC.parse, SPEC.report
spread = lazy(f"{__name__}.results", "spread")
