"""MPI ping-pong: latency and bandwidth between two ranks by the OSU 7.x methods (the
study's section 3.2, Figures 5-10).

A *combination* is a compiler x MPI library pair, as in the study's Figures
5-10: an ``mpiexec`` (with its launcher kind, extra arguments and environment)
and the kernel built against that MPI (the installed module, or a variant
built with the combination's ``mpicc``).  A *placement* says where the two
ranks run: two cores of one socket, one core on each of two sockets, or one
rank on each of two nodes (hosts from ``pingpong_hosts`` or the scheduler).
Every (combination, placement, test, repetition) is one ``mpiexec`` with a
timeout, so a hung MPI job never hangs the notebook; results are stored as
each one finishes and a re-run resumes.
"""

from burstbench.benchmarks.pingpong.params import LABELS, PARAMS
from burstbench.registry import Benchmark, lazy

#: The configuration columns of its rows (besides store.HEAD and store.TAIL).
COLUMNS = ("variant", "compiler", "compiler_version", "flags", "placement", "ranks", "nodes",
           "message_size", "function", "bound_cpus")

SPEC = Benchmark(
    name="pingpong", params=tuple(PARAMS), columns=COLUMNS, notebook="020_measure_pingpong.ipynb",
    plan=lazy(f"{__name__}.tasks", "plan"),
    parse=lazy(f"{__name__}.results", "parse"),
    report=lazy(f"{__name__}.report", "report_section"), title="MPI ping-pong",
    labels=LABELS, env_prefixes=("I_MPI_", "MPICH_", "OMPI_", "UCX_"),
    headline=lazy(f"{__name__}.results", "headline"),
    against_study=lazy(f"{__name__}.results", "against_study"),
    merits=lazy(f"{__name__}.results", "merits"))
plan, parse, report_section = SPEC.plan, SPEC.parse, SPEC.report
spread = lazy(f"{__name__}.results", "spread")
