"""MPI ranks x OpenMP threads on a node: how many threads a rank may run.

A rank that takes "all CPUs" for OpenMP takes the whole node, and so does every
other rank there: spinning OpenMP threads and MPI waits then share cores and run
100-1000x slower, silently.  So a rank's threads come from its own affinity
mask, shared with the ranks on its node whose masks overlap it, never from the
machine's CPU count.

The arithmetic is pure (:func:`node_layout`: the masks of one node's ranks in,
threads and the verdict out) and testable without MPI; :func:`rank_layout` feeds
it from a communicator (``MPI_COMM_TYPE_SHARED`` finds the node's ranks) and
agrees one verdict across all ranks, so every rank refuses alike and none is
left waiting in a collective.

Read the layout before the OpenMP runtime is loaded (before importing a
kernel's extension): with OMP_PROC_BIND set, libgomp binds the process's first
thread to its first place as the library loads, and the mask read after that
is that one place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from kernels_ext.common.errors import BadInput

OVERSUBSCRIBE_HINT = "pass --oversubscribe to run anyway"


def cpu_list(cpus: Set[int]) -> str:
    """CPUs as the kernel writes them: ``0-3,8,10-11`` (``none`` when empty)."""
    parts, run = [], []
    for c in sorted(cpus):
        if run and c != run[-1] + 1:
            parts.append(run)
            run = []
        run.append(c)
    if run:
        parts.append(run)
    return ",".join(f"{p[0]}-{p[-1]}" if len(p) > 1 else f"{p[0]}" for p in parts) or "none"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _cpus_phrase(cpus: Set[int]) -> str:
    return f"{'CPU' if len(cpus) == 1 else 'CPUs'} {cpu_list(cpus)}"


def default_threads(masks: Sequence[Set[int]], me: int) -> int:
    """Rank `me`'s share of its CPUs: its mask's CPUs over the ranks whose masks overlap
    it (itself included), rounded down, at least 1."""
    mine = masks[me]
    sharing = sum(1 for m in masks if m & mine) or 1
    return max(1, len(mine) // sharing)


@dataclass(frozen=True)
class NodeLayout:
    """The ranks of one node: their affinity masks, their threads, and which one is us."""

    masks: tuple[frozenset[int], ...]
    threads_per_rank: tuple[int, ...]
    me: int

    @property
    def threads(self) -> int:
        """This rank's OpenMP threads."""
        return self.threads_per_rank[self.me]

    @property
    def cpus(self) -> int:
        """CPUs in this rank's affinity mask."""
        return len(self.masks[self.me])

    @property
    def node_cpus(self) -> frozenset[int]:
        """CPUs in the union of the node's masks: all its ranks may use."""
        return frozenset().union(*self.masks)

    @property
    def crowded_rank(self) -> int | None:
        """The first rank (node index) whose threads exceed its own mask's CPUs, or None."""
        return next((i for i, (t, m) in enumerate(zip(self.threads_per_rank, self.masks))
                     if t > len(m)), None)

    @property
    def oversubscribed(self) -> bool:
        """More threads on the node than CPUs its ranks have, or on one rank than its mask."""
        return (sum(self.threads_per_rank) > len(self.node_cpus)
                or self.crowded_rank is not None)

    def describe(self, node: str, source: str = "") -> str:
        """One line naming the numbers when oversubscribed ("" when not).

        `source` says where the thread count came from (``--threads``,
        ``OMP_NUM_THREADS=2``) and is shown beside it.
        """
        if not self.oversubscribed:
            return ""
        src = f" ({source})" if source else ""
        ranks, total, have = len(self.masks), sum(self.threads_per_rank), self.node_cpus
        if total > len(have):
            counts = set(self.threads_per_rank)
            who = (f"{_plural(ranks, 'rank')} x {_plural(counts.pop(), 'thread')}"
                   if len(counts) == 1 else
                   f"{_plural(ranks, 'rank')} of {total} threads in all")
            return (f"{who}{src} on node {node} need {total} CPUs, but the ranks there have "
                    f"{len(have)} ({_cpus_phrase(have)}); {OVERSUBSCRIBE_HINT}")
        i = self.crowded_rank
        assert i is not None
        return (f"a rank on node {node} runs {_plural(self.threads_per_rank[i], 'thread')}"
                f"{src} but may use only {_plural(len(self.masks[i]), 'CPU')} "
                f"({_cpus_phrase(self.masks[i])}); {OVERSUBSCRIBE_HINT}")


def node_layout(masks: Sequence[Set[int]], me: int,
                requested: int | None | Sequence[int | None] = None) -> NodeLayout:
    """Threads of every rank of one node, and whether they oversubscribe it.

    `masks`: the affinity mask of each rank on the node (node order); `me`: this
    rank's index among them; `requested`: the threads asked for (one count for
    every rank, or one per rank), None where the rank's default share applies.
    """
    if not 0 <= me < len(masks):
        raise ValueError(f"rank index {me} is outside the node's {len(masks)} ranks")
    frozen = tuple(frozenset(m) for m in masks)
    asked = (list(requested) if isinstance(requested, Sequence)
             else [requested] * len(frozen))
    if len(asked) != len(frozen):
        raise ValueError(f"{len(asked)} requested thread counts for {len(frozen)} ranks")
    threads = tuple(a if a is not None else default_threads(frozen, i)
                    for i, a in enumerate(asked))
    return NodeLayout(frozen, threads, me)


def omp_num_threads(environ: Mapping[str, str] | None = None) -> int | None:
    """The outer level of OMP_NUM_THREADS (``4`` from ``4,2``), None when unset or empty.

    Raises BadInput for a value that is not a positive count: the OpenMP
    runtime would ignore it and run on every CPU, which is what this module
    exists to prevent.
    """
    env = os.environ if environ is None else environ
    text = env.get("OMP_NUM_THREADS", "").strip()
    if not text:
        return None
    first = text.split(",")[0].strip()
    if not first.isdigit() or int(first) < 1:
        raise BadInput(f"OMP_NUM_THREADS={text} is not a positive thread count")
    return int(first)


def requested_threads(option: int | None,
                      environ: Mapping[str, str] | None = None) -> tuple[int | None, str]:
    """The threads asked for and where they came from: the option (``--threads``), else
    OMP_NUM_THREADS, else (None, "") for the rank's default share.

    Raises BadInput for an option below 1 or an unusable OMP_NUM_THREADS.
    """
    if option is not None:
        if option < 1:
            raise BadInput(f"threads must be at least 1, not {option}")
        return option, f"--threads {option}"
    env = os.environ if environ is None else environ
    from_env = omp_num_threads(env)
    if from_env is not None:
        return from_env, f"OMP_NUM_THREADS={env['OMP_NUM_THREADS'].strip()}"
    return None, ""


@dataclass(frozen=True)
class RankLayout:
    """This rank's layout and the world's: what a kernel runs and what its record says."""

    node: NodeLayout
    host: str
    explicit: bool          # the threads were asked for (an option or OMP_NUM_THREADS)
    oversubscribed: bool    # on any node of the world
    reason: str             # one line about the first oversubscribed node, "" if none
    nodes: int
    ranks_per_node: int     # the most ranks on one node
    threads_range: tuple[int, int]
    cpus_per_rank: list[int] | None  # every rank's mask size, in rank order (rank 0 only)

    @property
    def threads(self) -> int:
        """This rank's OpenMP threads."""
        return self.node.threads

    def check(self, allow_oversubscribe: bool) -> None:
        """Refuse (BadInput, on every rank alike) an explicit layout that oversubscribes.

        A default layout is never refused: it oversubscribes only when there
        are more ranks than CPUs, and then it is recorded.
        """
        if self.explicit and self.oversubscribed and not allow_oversubscribe:
            raise BadInput(self.reason)

    def record(self) -> dict:
        """The JSON fields a kernel's record carries about its layout (complete on rank 0):
        threads is the most any rank runs, threads_min the fewest."""
        return {"oversubscribed": self.oversubscribed, "threads": self.threads_range[1],
                "threads_min": self.threads_range[0], "cpus_per_rank": self.cpus_per_rank,
                "ranks_per_node": self.ranks_per_node, "nodes": self.nodes}


def rank_layout(comm, requested: int | None = None, source: str = "") -> RankLayout:
    """This rank's layout on `comm` (collective: every rank of `comm` must call it),
    from its affinity mask: call it before the OpenMP runtime loads (module docstring).

    `requested`: the threads asked for on this rank, None for the default
    share; `source` names where they came from, for the message.
    """
    from mpi4py import MPI

    shared = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        peers = shared.allgather((sorted(os.sched_getaffinity(0)), requested))
        node = node_layout([set(m) for m, _ in peers], shared.Get_rank(),
                           [r for _, r in peers])
        leader, on_node = shared.Get_rank() == 0, shared.Get_size()
    finally:
        shared.Free()
    host = MPI.Get_processor_name()
    mine = node.describe(host, source)
    first = comm.allreduce(comm.Get_rank() if mine else comm.Get_size(), op=MPI.MIN)
    reason = comm.bcast(mine, root=first) if first < comm.Get_size() else ""
    return RankLayout(
        node=node, host=host, explicit=comm.allreduce(requested is not None, op=MPI.LOR),
        oversubscribed=bool(reason),
        reason=reason, nodes=comm.allreduce(int(leader)),
        ranks_per_node=comm.allreduce(on_node, op=MPI.MAX),
        threads_range=(comm.allreduce(node.threads, op=MPI.MIN),
                       comm.allreduce(node.threads, op=MPI.MAX)),
        cpus_per_rank=comm.gather(node.cpus, root=0))
