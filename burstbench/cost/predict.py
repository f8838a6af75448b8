"""A predicted BICCG solve time for a problem, a layout and a machine, from the machine's
memory bandwidth (STREAM Triad) and interconnect (ping-pong), measured here or published.

The model, each assumption a choice the validation checks (predicted against measured
where nothing was fitted):

1. Memory.  One iteration moves ``kernels_ext.biccg.bytes_per_iteration(n, nnz, factor)``
   bytes (the solver's own byte model), spread evenly over the nodes, at `efficiency` x
   the Triad bandwidth of the cores the layout uses on a node.  `efficiency` is fitted on
   one measured solve (the reference) and used for every other problem, layout and
   machine; benchmarks/README.md measured 0.83 of Triad beside the solve on this VM.
2. Triad bandwidth of c cores on a node: where the machine was measured, the best median
   over configurations at c threads (at the most threads measured, where c is more);
   where only a published best is known (at its own thread count t), that best for
   c >= t, and best x c / t below (bandwidth grows at most linearly with cores).
3. Halo exchange.  Per iteration each rank exchanges its boundary with two neighbours
   (the partition is in contiguous blocks of rows): 8 B per boundary entry; a grid of
   nx x ny x nz split in slabs has nx x ny entries per boundary, an unknown matrix
   (n / ranks)^(2/3).  Each exchange costs the ping-pong's latency plus bytes / bandwidth:
   across nodes (the interconnect) where the layout has more than one node, else within
   a node.
4. Reductions.  Three Allreduces of 8 B per iteration (p'q, r'r and r'z), each
   2 ceil(log2 ranks) latencies (recursive doubling); none on one rank.
5. Iterations depend on the problem and the partition, not the machine: the count
   measured for the same problem and rank count, on any machine; else the one measured
   with the nearest rank count (said so); else no prediction.
6. The solve only: ordering and factorization (setup) are the caller's (a job adds the
   setup measured here per solve, scaled like the solve).

Nothing else is modelled: NUMA placement, a busy network, the OpenMP runtime's barriers
at every color (the validation shows what these cost).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from kernels_ext.biccg import bytes_per_iteration

_GRID = re.compile(r"poisson(\d+)x(\d+)x(\d+)$")


@dataclass(frozen=True)
class Problem:
    """A matrix as the model sees it: rows, nonzeros (both triangles), the factor's
    precision, and the grid where it is a Poisson one."""

    name: str
    n: int
    nnz: int
    factor: str = "single"
    grid: tuple[int, int, int] | None = None

    @classmethod
    def poisson(cls, nx: int, ny: int, nz: int, factor: str = "single") -> Problem:
        """The solver's 7-point Poisson matrix of an nx x ny x nz grid (5-point where nz = 1)."""
        n = nx * ny * nz
        nnz = 7 * n - 2 * (nx * ny + ny * nz + nx * nz)
        return cls(f"poisson{nx}x{ny}x{nz}", n, nnz, factor, (nx, ny, nz))

    @classmethod
    def named(cls, name: str, n: float = math.nan, nnz: float = math.nan,
              factor: str = "single") -> Problem:
        """A problem by the name the solver records: a Poisson grid's from its name, any
        other's from the `n` and `nnz` measured with it."""
        m = _GRID.match(name)
        if m:
            return cls.poisson(*(int(x) for x in m.groups()), factor=factor)
        if not (n > 0 and nnz > 0):
            raise ValueError(f"problem {name}: its rows and nonzeros are not known")
        return cls(name, int(n), int(nnz), factor)

    @property
    def bytes(self) -> int:
        """Bytes one iteration moves (assumption 1)."""
        return bytes_per_iteration(self.n, self.nnz, self.factor)

    def halo_entries(self, ranks: int) -> float:
        """Entries one rank exchanges with one neighbour (assumption 3)."""
        if ranks < 2:
            return 0.0
        if self.grid:
            nx, ny, _ = self.grid
            return float(nx * ny)
        return (self.n / ranks) ** (2 / 3)


@dataclass(frozen=True)
class Machine:
    """A node as the model sees it: Triad bandwidth by cores, its cores, and its
    ping-pong within a node and across nodes (None: unknown), each with where it came
    from; max_nodes 1 for a VM without InfiniBand (no multi-node job is priced on it)."""

    name: str
    cores: int
    triad_gbs: dict[int, float]  # measured: by threads; published: {threads: best}
    measured: bool
    latency_us: float | None = None  # within a node
    bandwidth_gbs: float | None = None
    net_latency_us: float | None = None  # across nodes
    net_bandwidth_gbs: float | None = None
    max_nodes: int | None = None  # None: no limit known
    sources: dict[str, str] = field(default_factory=dict)

    def bandwidth(self, cores: int) -> float:
        """Triad GB/s of `cores` cores on one node (assumption 2)."""
        if not self.triad_gbs:
            raise ValueError(f"{self.name}: no Triad measured or published")
        threads = sorted(self.triad_gbs)
        if self.measured:
            at = max([t for t in threads if t <= cores] or threads[:1])
            return self.triad_gbs[at]
        (t, best), = list(self.triad_gbs.items())[:1]
        return best if cores >= t else best * cores / t


@dataclass(frozen=True)
class Layout:
    """nodes x ranks per node x OpenMP threads per rank."""

    nodes: int
    ranks_per_node: int
    threads: int

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def cores_per_node(self) -> int:
        return self.ranks_per_node * self.threads

    @property
    def label(self) -> str:
        return f"{self.ranks_per_node}x{self.threads}"


@dataclass(frozen=True)
class Prediction:
    """A predicted solve: seconds, and one iteration's parts (memory, halo, reductions)."""

    solve_s: float
    iterations: float
    memory_s: float
    halo_s: float
    reduce_s: float

    @property
    def iteration_s(self) -> float:
        return self.memory_s + self.halo_s + self.reduce_s


def iteration(problem: Problem, machine: Machine, layout: Layout,
              efficiency: float) -> tuple[float, float, float]:
    """(memory, halo, reductions) seconds of one iteration (assumptions 1, 3, 4).

    ValueError where the machine lacks what the layout needs: a Triad, a ping-pong for
    more than one rank, an interconnect for more than one node (or more nodes than it
    allows)."""
    if layout.cores_per_node > machine.cores:
        raise ValueError(f"{machine.name}: {layout.label} needs {layout.cores_per_node} cores "
                         f"of a node, it has {machine.cores}")
    if machine.max_nodes is not None and layout.nodes > machine.max_nodes:
        raise ValueError(f"{machine.name}: no interconnect for {layout.nodes} nodes (a VM "
                         "without InfiniBand runs on one)")
    gbs = machine.bandwidth(layout.cores_per_node) * efficiency
    memory = problem.bytes / layout.nodes / (gbs * 1e9)
    if layout.ranks == 1:
        return memory, 0.0, 0.0
    across = layout.nodes > 1
    lat = machine.net_latency_us if across else machine.latency_us
    bw = machine.net_bandwidth_gbs if across else machine.bandwidth_gbs
    if lat is None or bw is None:
        where = "across nodes" if across else "within a node"
        raise ValueError(f"{machine.name}: no ping-pong {where} measured or published")
    halo = 2 * (lat * 1e-6 + 8 * problem.halo_entries(layout.ranks) / (bw * 1e9))
    reduce = 3 * 2 * math.ceil(math.log2(layout.ranks)) * lat * 1e-6
    return memory, halo, reduce


def predict(problem: Problem, machine: Machine, layout: Layout, iterations: float,
            efficiency: float) -> Prediction:
    """The predicted solve time of `problem` on `layout` of `machine` (the module's model)."""
    if not iterations > 0:
        raise ValueError(f"{problem.name}: no iteration count")
    memory, halo, reduce = iteration(problem, machine, layout, efficiency)
    return Prediction(iterations * (memory + halo + reduce), iterations, memory, halo, reduce)


def fit_efficiency(problem: Problem, machine: Machine, layout: Layout, iterations: float,
                   solve_s: float) -> float:
    """The efficiency that makes predict() give `solve_s` for this measured solve: the
    memory part's share of the time left after the halo and reductions (assumption 1)."""
    memory, halo, reduce = iteration(problem, machine, layout, 1.0)
    left = solve_s / iterations - halo - reduce
    if left <= 0:
        raise ValueError(f"{problem.name} on {machine.name}: the measured solve is faster "
                         "than its communication alone")
    return memory / left
