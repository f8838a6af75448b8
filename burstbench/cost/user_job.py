"""A user's own job for the burst decision (the report parameter `user_job`), parsed
strictly into job classes, one per node count."""

from __future__ import annotations

from burstbench.core.checks import ParamError, strict_keys
from burstbench.cost import job
from burstbench.cost.burst import JobClass
from burstbench.cost.predict import MatrixModel

#: The keys of a user's job, and of its problem.
USER_KEYS = ("name", "nodes", "problem", "solves", "input_gb", "output_gb", "keep_months",
             "flow_node_hours")
PROBLEM_KEYS = ("poisson", "n", "nnz", "iterations")


def user_jobs(user: dict, data: job.Data, solves: int) -> list[JobClass]:
    """The job classes of a user's job ({name, nodes: [..], problem: {poisson: [nx, ny,
    nz]} or {n, nnz, iterations}, solves, input_gb, output_gb, keep_months} or {name,
    flow_node_hours, nodes}), parsed strictly: an unknown key is refused with the valid
    ones, never ignored."""
    strict_keys("user_job", user, USER_KEYS)
    strict_keys("user_job's problem", user.get("problem") or {}, PROBLEM_KEYS)
    p = user.get("problem") or {}
    name = str(user.get("name", "user job"))
    if "poisson" in p:
        grid = p["poisson"]
        if not (isinstance(grid, (list, tuple)) and len(grid) == 3
                and all(isinstance(v, int) and v > 0 for v in grid)):
            raise ParamError(f"user_job's problem: poisson must be three positive integers, "
                             f"not {grid!r}")
        problem = MatrixModel.poisson(*grid)
    elif {"n", "nnz"} <= set(p):
        problem = MatrixModel(name, int(p["n"]), int(p["nnz"]))
    elif p:
        raise ParamError("user_job's problem: give poisson: [nx, ny, nz], or n and nnz")
    else:
        problem = None
    nodes = user.get("nodes", [1])
    nodes = [nodes] if isinstance(nodes, int) else nodes
    if not (isinstance(nodes, (list, tuple)) and nodes
            and all(isinstance(n, int) and n >= 1 for n in nodes)):
        raise ParamError(f"user_job: nodes must be a list of positive integers, not {nodes!r}")
    udata = job.Data(user.get("input_gb", data.input_gb), user.get("output_gb", data.output_gb),
                     user.get("keep_months", data.keep_months))
    assumed = tuple(f"job_{k}" for k in ("solves", "input_gb", "output_gb")
                    if k not in user and (k != "solves" or problem is not None))
    return [JobClass(f"{name}, {n} node(s)", n, udata, problem, int(user.get("solves", solves)),
                     p.get("iterations"), user.get("flow_node_hours"), yours=True,
                     assumed=assumed)
            for n in nodes]
