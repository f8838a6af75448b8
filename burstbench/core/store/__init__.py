"""The results store: one folder per run, tidy tables, files written whole, many runs loaded.

Layout of a run (``data/runs/<vm>/<run-id>/``)::

    provenance.json          machine, software, git, and one section per benchmark
                             (parameters, variants, start/end, status, failures, and
                             the manifest of its files: bytes, SHA-256, rows)
    <benchmark>.csv          the tidy table: one row per measured value
    <benchmark>.jsonl        the raw records the kernels printed (binding included)
    <benchmark>.parts/       while a sweep runs: one file per measured configuration
    0xx_<notebook>.ipynb     the executed notebook (when run by ``burstbench run``)

Every file is written whole to a temporary name and renamed into place, so a
crash leaves either the old file or the new one, never half of one.  A sweep
stores each configuration as soon as it is measured (a part file); a re-run
skips what is stored; ``finalize`` folds the parts into the tables and records
their manifest, which :func:`verify` checks before anything reads them.

Its modules, by job: ``files`` (files written whole, what a manifest records), ``tables``
(the results table's columns), ``run`` (writing a run), ``verify`` (checking one),
``load`` (reading many), ``collect`` (bringing runs back).  Their public names are
here, so a caller writes ``store.Run`` and ``store.load``.
"""

from burstbench.core.store.collect import collect, find_runs
from burstbench.core.store.files import (
                                       NoSpace,
                                       StoreError,
                                       atomic_write,
                                       file_facts,
                                       free_bytes,
                                       new_run_id,
                                       now_iso,
)
from burstbench.core.store.load import Loaded, is_test_run, latest_runs, load, merit_runs
from burstbench.core.store.run import (
                                       STORE_VERSION,
                                       Run,
                                       find_resumable,
                                       find_resumable_many,
                                       open_run,
                                       plan_run,
)
from burstbench.core.store.tables import (
                                       HEAD,
                                       REQUIRED,
                                       TAIL,
                                       ordered,
                                       read_table,
                                       table_columns,
                                       undeclared,
)
from burstbench.core.store.verify import Check, validate_run, verify

__all__ = ["HEAD", "REQUIRED", "STORE_VERSION", "TAIL", "Check", "Loaded", "NoSpace", "Run",
           "StoreError", "atomic_write", "collect", "file_facts", "find_resumable",
           "find_resumable_many", "find_runs", "free_bytes", "is_test_run", "latest_runs",
           "load", "merit_runs", "new_run_id", "now_iso", "open_run", "ordered", "plan_run",
           "read_table", "table_columns", "undeclared", "validate_run", "verify"]
