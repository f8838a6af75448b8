"""BICCG: CG preconditioned by block IC(0) with multicolor ordering, MPI x OpenMP (the
study's section 3.3, Figures 12-13).

Each configuration is one ``mpiexec`` with OMP_NUM_THREADS, OMP_PLACES=cores
and OMP_PROC_BIND=close set at launch and each rank bound to its threads'
cores; the Python-only baselines (SciPy's cg, numba CG with natural-order
IC(0)) run once per problem and repetition on one process.  Labels are the
layout, ``<ranks per node>x<threads>`` (``2x1``: two MPI ranks of one thread),
as in the study's Figures 12-13 where time falls with parallelism.
"""

from burstbench.benchmarks.biccg.params import LABELS, PARAMS
from burstbench.registry import Benchmark, lazy

#: The configuration columns of its rows (besides store.HEAD and store.TAIL).
COLUMNS = ("problem", "nodes", "ranks", "threads", "block_size", "colors", "size", "nnz",
           "function", "blocking", "factor_precision", "copied_rows")

SPEC = Benchmark(
    name="biccg", params=tuple(PARAMS), columns=COLUMNS, notebook="030_measure_biccg.ipynb",
    plan=lazy(f"{__name__}.tasks", "plan"), parse=lazy(f"{__name__}.results", "parse"),
    report=lazy(f"{__name__}.report", "report_section"), title="BICCG", labels=LABELS,
    env_prefixes=("OMP_", "I_MPI_", "MPICH_", "OMPI_", "UCX_"),
    nodes=lazy(f"{__name__}.tasks", "nodes_needed"),
    headline=lazy(f"{__name__}.results", "headline"),
    merits=lazy(f"{__name__}.results", "merits"))
plan, parse, report_section = SPEC.plan, SPEC.parse, SPEC.report
spread = lazy(f"{__name__}.results", "spread")
