"""The study's Figure 12 as a check on the time model: BICCG on Poisson 256 x 256 x 512,
HB120rs_v3 against HC44rs, time against nodes.  The study's reading: HB120rs_v3 is faster at
small parallelism (bandwidth, cores), HC44rs at large (the solver's messages are small and
latency-bound).  The model is not tuned to agree: it predicts both machines at each node
count with the decision's draws (the same draw for both where they share an input), and
says which term decides the ranking: the memory part (Triad) or the messages (ping-pong)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from burstbench.cost import job
from burstbench.cost import uncertainty as u
from burstbench.cost.burst import JobClass, parts
from burstbench.cost.model import RANKS_PER_NODE, Model
from burstbench.cost.predict import STUDY_GRID, MatrixModel, NodeModel

NODES = (1, 2, 4, 8, 16, 32)
PAIR = ("HB120rs_v3", "HC44rs")
#: The study's statement: the faster machine at small and at large parallelism.
STUDY = {"small": PAIR[0], "large": PAIR[1]}


#: The two views of the check: every byte at STREAM's rule-size Triad (the study's), and
#: each node's working set at the memory tier it fits (predict's assumption 2).
CACHES = {False: "DRAM Triad only", True: "L3 tiers"}


def study_check(model: Model, machine_of: dict[str, NodeModel], ranges: dict[str, u.Range],
                draws: int, seed: int, nodes: tuple[int, ...] = NODES,
                pair: tuple[str, str] = PAIR) -> pd.DataFrame:
    """One row per view (CACHES: before and after the memory tiers) and node count: each
    machine's predicted solve (10th, 50th, 90th percentile of the draws), the tier its
    working set was priced at, its memory and message seconds of a solve (inputs at their
    modes), P(first faster), the faster (by median) and the term that decides it."""
    missing = [v for v in pair if v not in machine_of]
    if missing:
        raise ValueError(f"the study check needs {' and '.join(missing)}: not among the "
                         "machines")
    x = u.draw(ranges, draws, seed)
    mode = u.modes(ranges)
    problem = MatrixModel.poisson(*STUDY_GRID)
    rows = []
    for tiers, n in ((t, n) for t in CACHES for n in nodes):
        jc = JobClass(f"{problem.name}, {n} node(s)", n, job.Data(1, 1), problem, 1)
        row: dict = {"caches": CACHES[tiers], "problem": problem.name, "nodes": n,
                     "ranks": RANKS_PER_NODE * n,
                     "working_set_mib_per_node":
                         problem.working_set(RANKS_PER_NODE * n) / n / 2**20}
        times, split = {}, {}
        for vm in pair:
            p = parts(jc, machine_of[vm], model, machine_of[vm], tiers)
            t = p.hours(x) * 3600
            times[vm] = t
            it, mem, comm = (float(np.ravel(v)[0]) for v in p.terms(mode))
            split[vm] = (it * mem * (1 + p.setup_iterations / it), it * comm)
            q = np.percentile(t, [10, 50, 90])
            row |= {f"{vm}_tier": p.tier,
                    f"{vm}_p10_s": q[0], f"{vm}_p50_s": q[1], f"{vm}_p90_s": q[2],
                    f"{vm}_memory_s": split[vm][0], f"{vm}_messages_s": split[vm][1]}
        a, b = pair
        row["p_first_faster"] = float(np.mean(times[a] < times[b]))
        row["faster"] = a if np.median(times[a]) < np.median(times[b]) else b
        d_mem = split[a][0] - split[b][0]
        d_msg = split[a][1] - split[b][1]
        row["memory_difference_s"], row["messages_difference_s"] = d_mem, d_msg
        row["deciding_term"] = "memory (Triad)" if abs(d_mem) >= abs(d_msg) else \
            "messages (ping-pong latency and bandwidth)"
        rows.append(row)
    return pd.DataFrame(rows)


def agreement(check: pd.DataFrame, pair: tuple[str, str] = PAIR,
              caches: str = CACHES[True]) -> dict[str, dict]:
    """At the smallest and the largest node count of one view (`caches`): the model's
    faster machine, the study's, whether they agree, and the deciding term."""
    out = {}
    view = check[check["caches"] == caches] if "caches" in check else check
    for scale, row in (("small", view.iloc[0]), ("large", view.iloc[-1])):
        out[scale] = {"nodes": int(row["nodes"]), "model": row["faster"],
                      "study": STUDY[scale], "agrees": row["faster"] == STUDY[scale],
                      "term": row["deciding_term"],
                      "p_first_faster": float(row["p_first_faster"])}
    return out
