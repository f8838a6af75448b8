"""Storage: write and read bandwidth by IOR's method, on a VM's local disk, its shared file
system and a Gfarm file system shared with the supercomputer (the study's Table 3 items 2
and 3, its Table 5 and section 4: a burst job's data must reach the VM and come back).

A configuration is (target, API, access pattern, nodes x ranks per node, repetition), one
``mpiexec`` of kernels_ext.storage with a timeout: POSIX, MPI-IO or Gfarm's own API; a file
per process or one shared file (segments x ranks x block); fsync inside the timed write;
every byte read checked, each read said how it avoided the page cache.  Labels are
``<target>+<api>+<access>+<nodes>n<ranks per node>r``.  Where asked, a Gfarm target's
replication between two I/O nodes (gfrep) is timed too, as the Gfarm-on-Azure slides
timed it.
"""

from burstbench.benchmarks.storage.params import LABELS, PARAMS
from burstbench.registry import Benchmark, lazy

#: The configuration columns of its rows (besides store.HEAD and store.TAIL).
COLUMNS = ("target", "api", "access", "collective", "operation", "ranks", "nodes",
           "transfer_size", "block_size", "segments", "fsync", "direct", "cache", "fs_type",
           "iteration", "size")

SPEC = Benchmark(
    name="storage", params=tuple(PARAMS), columns=COLUMNS, notebook="040_measure_storage.ipynb",
    plan=lazy(f"{__name__}.tasks", "plan"),
    parse=lazy(f"{__name__}.results", "parse"),
    report=lazy(f"{__name__}.report", "report_section"), title="Storage", labels=LABELS,
    env_prefixes=("ROMIO_", "GFARM_", "MPICH_", "OMPI_"),
    nodes=lazy(f"{__name__}.tasks", "nodes_needed"),
    headline=lazy(f"{__name__}.results", "headline"),
    merits=lazy(f"{__name__}.results", "merits"))
plan, parse, report_section = SPEC.plan, SPEC.parse, SPEC.report
spread = lazy(f"{__name__}.results", "spread")
