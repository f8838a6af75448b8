"""BICCG's parameters (030_measure_biccg.ipynb's parameters cell): ``biccg_*``."""

from __future__ import annotations

from typing import Any

from burstbench.core.checks import (
    INTEGERS,
    Param,
    ParamError,
    check_bool,
    check_choices,
    check_count,
    check_list,
    check_positive,
    check_str_list,
)
from burstbench.core.mpi import check_combination


# -- parameters (030_measure_biccg.ipynb's parameters cell) ------------------------------------
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
        return {"mtx": v["mtx"],
                "optional": check_bool(f"{where} optional")(v.get("optional", False))}
    raise ParamError(f"{where}: each problem is {{poisson: [nx, ny, nz]}} or "
                     f"{{mtx: path, optional: true/false}}, not {v!r}")


PARAMS = [
    Param("biccg_problems", [{"poisson": [64, 64, 64]}],
          "`{poisson: [nx, ny, nz]}` (3D 7-point Laplacian, each rank builds its rows) or `{mtx: "
          "path, optional: true}` (Matrix Market, `.mtx`, `.mtx.gz` or SuiteSparse `.tar.gz`; a "
          "missing optional file is skipped with a note)",
          check_list("biccg_problems", _problem, allow_empty=False)),
    Param("biccg_combination", {"mpiexec": "mpiexec", "launcher": "hydra"},
          "the launcher, with the keys of a ping-pong combination",
          lambda v: check_combination(v, "biccg_combination")),
    Param("biccg_nodes", [1],
          "node counts (hosts from `biccg_hosts`, `$PBS_NODEFILE` or `$SLURM_JOB_NODELIST`)",
          check_list("biccg_nodes", check_count("biccg_nodes", 1), False, INTEGERS)),
    Param("biccg_ranks_per_node", [1, 2],
          "MPI ranks per node (the study: 2)",
          check_list("biccg_ranks_per_node", check_count("biccg_ranks_per_node", 1), False,
                     INTEGERS)),
    Param("biccg_threads", [1, 2],
          "OpenMP threads per rank; layouts needing more cores than a node has are skipped with a "
          "note",
          check_list("biccg_threads", check_count("biccg_threads", 1), False, INTEGERS)),
    Param("biccg_hosts", [],
          "host names of the nodes; empty: `$PBS_NODEFILE` or `$SLURM_JOB_NODELIST`",
          check_str_list("biccg_hosts", "host names")),
    Param("biccg_block_size", 32,
          "rows per block (the study's: 32)",
          check_count("biccg_block_size", 1)),
    Param("biccg_colors", 20,
          "the least number of colors (the study's: 20)",
          check_count("biccg_colors", 1)),
    Param("biccg_tol", 1e-7,
          "relative residual to stop at (the study's: 1e-7)",
          check_positive("biccg_tol")),
    Param("biccg_max_iter", 10000,
          "iteration limit; reaching it is a failure",
          check_count("biccg_max_iter", 1)),
    Param("biccg_baselines", ["scipy-cg", "numba-ic0cg"],
          "Python-side solvers on one process (`numba-cg`: no preconditioner)",
          check_choices("biccg_baselines",
                                                ("scipy-cg", "numba-ic0cg", "numba-cg"))),
    Param("biccg_solves", 1,
          "solves of our solver in each process (`python -m kernels_ext.biccg --solves`): "
          "the first is the configuration's solve; the later ones' setups (a job's later "
          "solves, set up on memory the process kept) price the decision's later setups",
          check_count("biccg_solves", 1)),
    Param("biccg_triad_beside", False,
          "our solver's process measures its node's STREAM Triad (the rule size) just before "
          "and after its first solve (`--triad-beside`: passes of the Triad alone on arrays "
          "4x the last-level cache; about 0.35 s a process with a 32 MiB L3 (estimated); on a "
          "2-core VM whose L3 reads 480 MiB a whole process of a small solve took 6.5 and "
          "12 s with 2 and 1 threads, most of it the arrays' first touch): the "
          "time model fits its efficiency on the memory as it was during the solve, not on "
          "the run's Triad, which on a VM whose bandwidth changes state may be in the other "
          "one",
          check_bool("biccg_triad_beside")),
    Param("biccg_repetitions", 3,
          "fresh runs per configuration",
          check_count("biccg_repetitions", 1)),
    Param("biccg_timeout_s", 1800,
          "seconds per solve before it is stopped (our solver's process: this x "
          "`biccg_solves`)",
          check_positive("biccg_timeout_s")),
]


#: What papermill_params/README.md says of the labels (params.docs() writes it there).
LABELS = "Labels are the layout `<ranks per node>x<threads>` (`2x1`), or the baseline's name."
