"""MPI combinations: a compiler x MPI library pair as a params file names it (the study's
Figures 5-10), its check, and asking it what it runs.

A combination is an ``mpiexec`` (with its launcher kind, extra arguments and environment)
and, optionally, the ``mpicc`` that builds a kernel against that MPI.  Every MPI benchmark
takes combinations in this form (``pingpong_combinations``, ``biccg_combination``), and
finds out whether one can run by using it: building the kernel with its mpicc, starting one
rank with its mpiexec.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from burstbench.core import launch
from burstbench.core.checks import ParamError, check_keyed, check_str_list, check_text

# -- parameters (020_measure_pingpong.ipynb's parameters cell) ---------------------------------
LAUNCHERS = ("hydra", "openmpi", "intel", "slurm", "none")


COMBO_KEYS = {
    "label": "name in figures; empty: <compiler><version>+<mpi><version> of the build",
    "mpiexec": "launcher command, a name on PATH (the environment's bin/ first) or a path",
    "launcher": f"how placements become arguments: {', '.join(LAUNCHERS)}",
    "args": "extra launcher arguments (list of strings)",
    "env": "extra environment variables (mapping), e.g. MPI4PY_LIBMPI",
    "mpicc": "build the kernel with this MPI compiler wrapper (empty: the installed module)",
    "flags": "flags for mpicc (default -O2)",
    "optional": "true: skip this combination with a note where its mpiexec/mpicc is missing "
                "or its mpicc cannot build the kernel",
}


def check_combination(v: Any, where: str = "pingpong_combinations") -> dict:
    v = check_keyed(v, COMBO_KEYS, where, "combination")
    out = {"label": check_text(f"{where} label")(v.get("label", "")),
           "mpiexec": check_text(f"{where} mpiexec")(v.get("mpiexec", "mpiexec")),
           "launcher": v.get("launcher", "hydra"),
           "args": check_str_list(f"{where} args")(v.get("args", [])),
           "mpicc": check_text(f"{where} mpicc")(v.get("mpicc", "")),
           "flags": check_text(f"{where} flags")(v.get("flags", "-O2")),
           "optional": v.get("optional", False)}
    if out["launcher"] not in LAUNCHERS:
        raise ParamError(f"{where}: launcher '{out['launcher']}' is not one of "
                         f"{', '.join(LAUNCHERS)}")
    if not out["mpiexec"].strip():
        raise ParamError(f"{where}: mpiexec must name a command")
    if out["label"] and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", out["label"]):
        raise ParamError(f"{where}: label '{out['label']}' may hold only letters, digits and "
                         "_ . + -")
    env = v.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise ParamError(f"{where}: env must map variable names to values, not {env!r}")
    out["env"] = {k: str(x) for k, x in env.items()}
    if not isinstance(out["optional"], bool):
        raise ParamError(f"{where}: optional must be true or false")
    return out


def kernel_args(combo: dict) -> list[str]:
    """The kernel's options that build it with the combination's mpicc ([] for the
    installed module)."""
    return ["--compiler", combo["mpicc"], f"--flags={combo['flags']}"] if combo["mpicc"] else []


def usable(combo: dict, kernel: str) -> str:
    """Why `combo` cannot run `kernel` here, '' when it can: its mpiexec or mpicc is
    missing, or its mpicc does not build the kernel (the compiler's first error line).

    The kernel is built here, into the variant cache, before any MPI run:
    whether an MPI can build is known only by compiling with it.
    """
    for key in ("mpiexec", "mpicc"):
        if combo[key] and not launch.resolve_command(combo[key]):
            return f"{key} '{combo[key]}' not found"
    if not combo["mpicc"]:
        return ""
    from kernels_ext.common import variants
    from kernels_ext.common.errors import first_error_line

    try:
        variants.build(combo["mpicc"], combo["flags"], kernel=kernel)
    except variants.BuildFailed as exc:
        return f"{combo['mpicc']} cannot build the kernel: {first_error_line(exc.output)}"
    except variants.VariantError as exc:
        return str(exc)
    return ""


def ask(combo: dict, mpiexec: str, command: list[str], timeout: float) -> dict[str, Any]:
    """The last JSON record that ``mpiexec -n 1 python <command>`` prints under the
    combination (its arguments and environment); runner.TaskFailed with the launcher's
    message otherwise (an MPI mismatch, a kernel that does not load)."""
    from burstbench.core import runner

    argv = (mpiexec, *combo["args"], "-n", "1", sys.executable, *command)
    out, _ = runner.launch(runner.Task("ask", {}, argv, tuple(combo["env"].items()), timeout))
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        raise runner.TaskFailed(f"{mpiexec} printed no record")
    return json.loads(lines[-1])
