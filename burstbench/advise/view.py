"""What notebook ``210_advise.ipynb`` shows: the advice for a queue, read live where a
scheduler answers, else from a snapshot saved by ``advise --json --save``, and the pending
jobs' P(sooner) curves."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from burstbench.advise import advice as adv
from burstbench.advise import queue
from burstbench.core import paths
from burstbench.wait.history import survival


def read(snapshot: str = "", scheduler: str = "", history_days: float = 30.0
         ) -> tuple[queue.Snapshot, str]:
    """burstbench.advise.queue.read, a relative `snapshot` taken from the project's root
    (the notebook runs from notebooks/)."""
    if snapshot and not Path(snapshot).is_absolute():
        return queue.read(paths.project_root() / snapshot, scheduler, history_days)
    return queue.read(snapshot, scheduler, history_days)


def curves(a: adv.Advice, max_jobs: int = 12):
    """Each pending job's P(the queue keeps it waiting longer than t) against t, its VM's
    break-even wait marked: P(sooner) is (about) the curve's height there.  A figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    t_h = np.geomspace(1 / 60, 72, 200)
    per = a.per_vm.set_index(["job", "vm"]) if len(a.per_vm) else None
    for i, r in enumerate(a.table.head(max_jobs).to_dict("records")):
        q = a.q[i]
        if np.isnan(q).all():
            continue
        p = survival(q[None, :], (t_h * 3600)[None, :])[0]
        line, = ax.plot(t_h, p, label=f"job {r['job']}: {r['verdict']}"
                        + (" (pinned)" if r["pinned"] else ""))
        if per is not None and r["vm"] and (r["job"], r["vm"]) in per.index:
            be = per.loc[(r["job"], r["vm"]), "break_even_wait_h"]
            if be == be and be > 0:
                ax.plot([be], [np.interp(be, t_h, p)], "o", color=line.get_color())
    ax.set_xscale("log")
    ax.set_xlabel("wait from now, hours")
    ax.set_ylabel("P(the queue's wait > t)")
    ax.set_ylim(-0.02, 1.02)
    if not a.basis.get("gain_h"):  # the gain rule has no one P(sooner) to draw
        ax.axhline(a.basis["p_sooner"], color="grey", lw=0.8, ls="--")
    ax.set_title("Pending jobs: the wait's distribution; dot: the VM's break-even wait "
                 "(at the inputs' modes)", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return fig
