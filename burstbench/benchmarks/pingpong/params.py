"""The ping-pong's parameters (020_measure_pingpong.ipynb's parameters cell): ``pingpong_*``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from burstbench.core.checks import (
    Param,
    ParamError,
    check_bool,
    check_choices,
    check_count,
    check_label,
    check_list,
    check_optional_count,
    check_positive,
    check_str_list,
)
from burstbench.core.mpi import check_combination

PLACEMENTS = ("same-socket", "across-sockets", "across-nodes")


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
    return {"label": check_label(f"{where} label")(v["label"]), "kind": "custom", "cpus": cpus,
            "hosts": hosts}


def _pp_size(name: str, allow_zero: bool) -> Callable[[Any], int]:
    """A message size in bytes: a power of two (or 0), as 4096, 4M, 4MiB or 4.194304e6."""
    def check(v: Any) -> int:
        from kernels_ext.common.errors import KernelError
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


PARAMS = [
    Param("pingpong_combinations", [{"mpiexec": "mpiexec", "launcher": "hydra"}],
          "compiler x MPI library combinations, each `{label, mpiexec, launcher, args, env, "
          "mpicc, flags, optional}`: `launcher` is `hydra` (MPICH, MVAPICH2), `intel`, `openmpi` "
          "(Open MPI 4.x mpirun), `slurm` (srun) or `none`; `env` is set for its runs (e.g. "
          "`MPI4PY_LIBMPI` so mpi4py loads that MPI); `mpicc` builds the kernel against it (a "
          "cached variant; empty: the installed module); `label` defaults to "
          "`<compiler><version>+<mpi><version>`; `optional: true` skips it with a note where its "
          "mpiexec or mpicc is missing",
          check_list("pingpong_combinations", check_combination, False),
          shown="the environment's `mpiexec` (hydra)"),
    Param("pingpong_placements", ["same-socket", "across-sockets", "across-nodes"],
          "two cores of one socket; the first core of two sockets; one rank on each of two hosts; "
          "or `{label, cpus: [a, b], hosts: [h1, h2]}`. Placements this machine cannot give are "
          "skipped with a note",
          check_list("pingpong_placements", _placement, False)),
    Param("pingpong_hosts", [],
          "hosts for across-nodes; empty: `$PBS_NODEFILE` or `$SLURM_JOB_NODELIST`",
          check_str_list("pingpong_hosts", "host names")),
    Param("pingpong_tests", ["latency", "bw", "bibw"],
          "OSU tests",
          check_choices("pingpong_tests", ("latency", "bw", "bibw"), allow_empty=False)),
    Param("pingpong_min_size", 0,
          "smallest message in bytes (0 or a power of two; `4K` accepted; the bandwidth tests "
          "start at 1)",
          _pp_size("pingpong_min_size", True)),
    Param("pingpong_max_size", 4194304,
          "largest message in bytes (a power of two; `4M` accepted)",
          _pp_size("pingpong_max_size", False)),
    Param("pingpong_iterations", None,
          "timed iterations up to 8 KiB (null: OSU's, 10,000 for latency and 100 for bandwidth)",
          check_optional_count("pingpong_iterations", 1)),
    Param("pingpong_skip", None,
          "warm-up iterations up to 8 KiB (null: OSU's, 100 for latency and 10 for bandwidth)",
          check_optional_count("pingpong_skip", 0)),
    Param("pingpong_iterations_large", None,
          "timed iterations above 8 KiB (null: OSU's, 1,000 for latency and 20 for bandwidth)",
          check_optional_count("pingpong_iterations_large", 1)),
    Param("pingpong_skip_large", None,
          "warm-up iterations above 8 KiB (null: OSU's, 10 for latency and 2 for bandwidth)",
          check_optional_count("pingpong_skip_large", 0)),
    Param("pingpong_window", None,
          "messages in flight in `bw` and `bibw` (null: OSU's 64)",
          check_optional_count("pingpong_window", 1)),
    Param("pingpong_hugepages", [False],
          "message buffers without (as OSU) and/or with transparent huge pages (`true`: label "
          "suffix `+thp`)",
          check_list("pingpong_hugepages", check_bool("pingpong_hugepages"), allow_empty=False,
                     takes="a list of true or false values (or one of them)")),
    Param("pingpong_baselines", ["mpi4py"],
          "the same methods as a pure mpi4py loop (label suffix `+mpi4py`)",
          check_choices("pingpong_baselines", ("mpi4py",))),
    Param("pingpong_validate", True,
          "first a short data-checked run of every combination, placement and test",
          check_bool("pingpong_validate")),
    Param("pingpong_repetitions", 3,
          "fresh mpiexec runs per configuration",
          check_count("pingpong_repetitions", 1)),
    Param("pingpong_timeout_s", 300,
          "seconds one mpiexec may run before it is stopped (a hung MPI job or an unreachable "
          "host fails, it never hangs the sweep)",
          check_positive("pingpong_timeout_s")),
]


#: What papermill_params/README.md says of the labels (params.docs() writes it there).
LABELS = ("Labels are `<combination>+<placement>[+thp][+mpi4py]`, e.g. "
          "`gcc12.2.0+mpich5.0.2+same-socket`.")
