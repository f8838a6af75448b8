"""A predicted BICCG solve time for a problem, a layout and a machine, from the machine's
memory bandwidth (STREAM Triad) and interconnect (ping-pong), measured here or published.

The model, each assumption a choice the validation checks (predicted against measured
where nothing was fitted):

1. Memory.  One iteration moves ``kernels_ext.biccg.bytes_per_iteration(n, nnz, factor,
   copied)`` bytes (the solver's own byte model; `copied` the rows it sweeps from copies on
   the layout's ranks, whole 4 x 4 x 2 tiles of a grid: MatrixModel.copied), spread evenly
   over the nodes, at `efficiency` x the Triad bandwidth of the cores the layout uses on a
   node.  `efficiency` is fitted on
   one measured solve (the reference) and used for every other problem, layout and
   machine; comparisons/README.md measured 0.83 of Triad beside the solve on this VM.
   A measured solve is priced at the Triad its own process measured just before and
   after it where it did (biccg_triad_beside: NodeModel.at_triad), else at its run's:
   this VM's bandwidth changes state over minutes (about 47 or 80 GB/s on 2 cores), and
   19 fits on their runs' Triads gave efficiencies of 0.40-0.89: the three lowest
   (0.40-0.42) where the run's Triad had measured the fast state (76-82 GB/s against
   40-50 in the others of those days) and the solve was no faster than the others'.
2. Triad bandwidth of c cores on a node: where the machine was measured, the best median
   over configurations at c threads (at the most threads measured, where c is more);
   where only a published best is known (at its own thread count t), that best for
   c >= t, and best x c / t below (bandwidth grows at most linearly with cores).
   That is the Triad at STREAM's rule size (arrays of 4x the caches), as the study
   published it; with memory tiers (``tiers=True``: the decision's) a node's working set
   (``kernels_ext.biccg.working_set_bytes``, the same copies, / nodes) is priced at the
   tier it fits: on a measured machine at the Triad its ladder measured for that working
   set (log-log between the ladder's points and the rule size's, the rule size's beyond);
   on a published one at its DRAM Triad where the set exceeds its L3 (Table 1's, all sockets)
   or where no L3 bandwidth is published for it, else at the DRAM Triad x the cache's
   speed-up, an uncertain input the decision draws (uncertainty.cache(name)).  A cache
   feeds the solver no faster than its cores consume: where the fitted machine solved
   grids in its cache, the fastest of them per core (`core_gbs`, model.Model.core_gbs)
   x the layout's cores caps a tier's rate (never below the DRAM Triad's).
3. Messages.  What one iteration sends is the solver's own count (:class:`Traffic`: the
   busiest rank's halo messages and bytes, the Allreduces and their bytes, recorded by
   the kernel for a problem and rank count); where none was recorded, the rule those
   counts follow (tests/test_biccg.py): rows in contiguous slabs, so a rank has up to two
   neighbours and each halo is one boundary plane (nx x ny doubles of a grid, (n/ranks)^(2/3)
   of another matrix), and two Allreduces (1 and 2 doubles).  Each message costs the
   ping-pong's time for a message of its size (:class:`Link`: the measured latency curve,
   interpolated, or the published latency + size / bandwidth), across nodes where the
   layout has more than one node, else within a node: across its sockets where that was
   measured and the layout uses more than half the node's cores, else on one socket
   (:meth:`NodeModel.within`; one placement's curve each, machines.ORDER).
4. Reductions.  Each Allreduce costs 2 ceil(log2 ranks) message times of its size
   (recursive doubling); none on one rank.
5. Iterations depend on the problem and the partition, not the machine: the count
   measured for the same problem and rank count, on any machine; else the one measured
   with the nearest rank count (said so; burstbench.cost.burst gives it a range).
6. Setup (all but the iterations: the input's check, ordering, factorization, halo plan,
   CG's vectors placed) once per solve: the reference solve's measured setup, as a
   number of its own iterations' memory time, scaled like the memory part of the solve
   (a factorization streams the matrix as an iteration does).  Two numbers: a job's first
   solve's (its process's first, on memory new to it) and its later solves' (the same
   process solving again on memory it kept: a third to a fifth of the first's seconds at
   the study's size),
   each measured on the reference (``biccg_solves: 2``); the later priced as the first
   where the reference solved once a process (model.Model.setup_rows says which).
   Not modelled: the setup shares out over ranks better than over threads (passes no
   thread shares: the ordering's colouring, the halo's columns).  On the lent 16-core
   machine at 128^3 it took 11 of the model's iterations at 2x1 and 26 at 2x8; the
   decision's layouts run 8-60 threads a rank (comparisons/README.md, "Setup against
   threads").  At the study's size there (2x8, 2026-11-29) a first setup took 1.26 s, 8
   of the model's iterations, where the term fitted on the 2-core reference is 38: that
   reference's first setup meets cold huge pages (comparisons/README.md, "Huge pages or
   base pages").  It is a first solve's only, one of a job's 100 (0.1% of its time).

Nothing else is modelled: NUMA placement, a busy network, the OpenMP runtime's barriers
at every color (the validation shows what these cost).

Long: the model's six assumptions, each with the measurement it stands on, and the
matrix, machine and layout it prices, which read those assumptions, kept in one place.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field, replace

from kernels_ext.biccg import bytes_per_iteration, tile_copies, working_set_bytes

_GRID = re.compile(r"poisson(\d+)x(\d+)x(\d+)$")
#: tile_copies once per grid and rank count (the decision's draws ask again and again)
_tile_copies = functools.lru_cache(maxsize=1024)(tile_copies)


@dataclass(frozen=True)
class MatrixModel:
    """A matrix as the model sees it: rows, nonzeros (both triangles), the factor's
    precision, the grid where it is a Poisson one, and whether the solver sweeps its whole
    4 x 4 x 2 tiles from copies (`swept_copies`: a grid in the default blocking, tiles;
    kernels_ext.biccg.tile_copies)."""

    name: str
    n: int
    nnz: int
    factor: str = "single"
    grid: tuple[int, int, int] | None = None
    swept_copies: bool = False

    @classmethod
    def poisson(cls, nx: int, ny: int, nz: int, factor: str = "single",
                swept_copies: bool = True) -> MatrixModel:
        """The solver's 7-point Poisson matrix of an nx x ny x nz grid (5-point where nz = 1),
        its whole tiles swept from copies unless `swept_copies` is False (--blocking rows, or
        a build from before the copies)."""
        n = nx * ny * nz
        nnz = 7 * n - 2 * (nx * ny + ny * nz + nx * nz)
        return cls(f"poisson{nx}x{ny}x{nz}", n, nnz, factor, (nx, ny, nz), swept_copies)

    @classmethod
    def named(cls, name: str, n: float = math.nan, nnz: float = math.nan,
              factor: str = "single", swept_copies: bool = True) -> MatrixModel:
        """A problem by the name the solver records: a Poisson grid's from its name, any
        other's from the `n` and `nnz` measured with it; `swept_copies`: whether its sweeps
        ran whole tiles from copies (a measured solve's record says: its copied_rows)."""
        m = _GRID.match(name)
        if m:
            nx, ny, nz = (int(x) for x in m.groups())
            return cls.poisson(nx, ny, nz, factor=factor, swept_copies=swept_copies)
        if not (n > 0 and nnz > 0):
            raise ValueError(f"problem {name}: its rows and nonzeros are not known")
        return cls(name, int(n), int(nnz), factor)

    @staticmethod
    def is_grid(name: str) -> bool:
        """True where `name` is a Poisson grid's (its size known from the name alone)."""
        return _GRID.match(name) is not None

    def copied(self, ranks: int) -> tuple[int, int]:
        """(rows, entries) the sweeps run from copies on `ranks` ranks (tile_copies; none
        for a matrix file or rows)."""
        return _tile_copies(self.grid, ranks) if self.swept_copies and self.grid else (0, 0)

    def bytes(self, ranks: int = 1) -> int:
        """Bytes one iteration moves on `ranks` ranks, all together (assumption 1)."""
        return bytes_per_iteration(self.n, self.nnz, self.factor, self.copied(ranks))

    def working_set(self, ranks: int = 1) -> int:
        """Bytes one iteration touches on `ranks` ranks, each once (assumption 2's tiers)."""
        return working_set_bytes(self.n, self.nnz, self.factor, self.copied(ranks))

    def traffic(self, ranks: int) -> Traffic:
        """What one iteration sends when no count was recorded (assumption 3's rule)."""
        if ranks < 2:
            return Traffic(0.0, 0.0, 0.0, 0.0, "one rank: no messages")
        plane = float(self.grid[0] * self.grid[1]) if self.grid else (self.n / ranks) ** (2 / 3)
        neighbours = float(min(2, ranks - 1))
        return Traffic(neighbours, neighbours * 8 * plane, 2.0, 24.0,
                       "the slab rule (no count recorded for this problem and rank count)")


#: The study's problem: BICCG on Poisson 256 x 256 x 512, 2 ranks per node (burst.JobClass).
STUDY_GRID = (256, 256, 512)


def priced_message_sizes(grid: tuple[int, int, int] = STUDY_GRID, ranks: int = 2) -> list[int]:
    """The message sizes (bytes) the time model prices for a solve of the Poisson `grid` on
    `ranks` ranks where no count was recorded (assumption 3): an Allreduce's and a halo
    message's (one boundary plane: 524,288 B for the study's grid on any rank count); what
    a ping-pong must measure first for the decision (pingpong's priority 0)."""
    t = MatrixModel.poisson(*grid).traffic(max(2, ranks))
    return sorted({math.ceil(t.reduction_size), math.ceil(t.message_size)})


@dataclass(frozen=True)
class Traffic:
    """What one iteration sends, per the busiest rank: halo messages and their bytes in all,
    Allreduces and their payload bytes in all; and where the numbers come from."""

    messages: float
    message_bytes: float
    reductions: float
    reduction_bytes: float
    source: str = ""

    @property
    def message_size(self) -> float:
        """Bytes of one halo message."""
        return self.message_bytes / self.messages if self.messages else 0.0

    @property
    def reduction_size(self) -> float:
        """Bytes of one Allreduce."""
        return self.reduction_bytes / self.reductions if self.reductions else 0.0


@dataclass(frozen=True, kw_only=True)
class Link:
    """The ping-pong between two ranks as the model prices a message: a measured curve
    (one-way time in us by message size in bytes, osu_latency's method, and osu_bw's
    GB/s by size beyond it), or a published latency and bandwidth (time = latency + size /
    bandwidth), with the published latency's range where one was given."""

    latency_us: float
    bandwidth_gbs: float
    curve: tuple[tuple[float, float], ...] = ()  # (bytes, us), sizes ascending
    bandwidth_curve: tuple[tuple[float, float], ...] = ()  # (bytes, GB/s)
    latency_high_us: float | None = None  # the top of a published latency range
    source: str = ""

    def time_us(self, size: float, latency_position: float = 0.0) -> float:
        """One-way time of a `size`-byte message: interpolated (log-log) on the measured
        curve, by the bandwidth curve past its end; published: latency + size / bandwidth,
        the latency `latency_position` (0-1) of the way up its range."""
        if self.curve:
            sizes = [max(c[0], 1.0) for c in self.curve]
            if size <= sizes[-1]:
                return _loglog(sizes, [c[1] for c in self.curve], max(size, 1.0))
            if self.bandwidth_curve:
                bw = _loglog([max(c[0], 1.0) for c in self.bandwidth_curve],
                             [c[1] for c in self.bandwidth_curve], size)
                return max(size / (bw * 1e3), self.curve[-1][1])
        lat = self.latency_us
        if self.latency_high_us is not None:
            lat += latency_position * (self.latency_high_us - self.latency_us)
        return lat + size / (self.bandwidth_gbs * 1e3)


def _loglog(xs: list[float], ys: list[float], x: float) -> float:
    """y at x, linear in log-log between the points, the end values held outside them."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    k = next(i for i in range(1, len(xs)) if xs[i] >= x)
    t = (math.log(x) - math.log(xs[k - 1])) / (math.log(xs[k]) - math.log(xs[k - 1]))
    return math.exp(math.log(ys[k - 1]) + t * (math.log(ys[k]) - math.log(ys[k - 1])))


@dataclass(frozen=True, kw_only=True)
class NodeModel:
    """A node as the model sees it: its cores, Triad bandwidth by cores, and its ping-pong
    within a node (`intra`) and across nodes (`inter`; None: unknown), each with where it
    came from; max_nodes 1 for a VM without InfiniBand (no multi-node job is priced on
    it)."""

    name: str
    cores: int
    triad_gbs: dict[int, float]  # measured: by threads; published: {threads: best}
    measured: bool
    intra: Link | None = None
    inter: Link | None = None
    max_nodes: int | None = None  # None: no limit known
    sources: dict[str, str] = field(default_factory=dict)
    intra_sockets: Link | None = None  # within a node, across its sockets, where measured
    #: measured: the Triad's ladder by thread count, ((working set bytes, GB/s), ...)
    ladder: dict[int, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    rule_bytes: float = 0.0  # the working set of the Triad behind triad_gbs (0: unknown)
    cache_bytes: float = 0.0  # the node's last-level cache, all instances (0: unknown)
    cpu: str = ""  # the CPU, as the run's provenance or Table 1 names it
    cache_peak_gbs: float = 0.0  # published: its L3's bandwidth at most (0: unknown)

    def within(self, layout: SolveLayout) -> Link | None:
        """The ping-pong between `layout`'s ranks on one node: across sockets where measured
        and the layout uses more than half the node's cores, else `intra`.  Every launcher
        of launch.py that binds ranks binds them to cores in order (srun too: it is given
        block:block, not Slurm's default block:cyclic), so a layout's ranks reach the second
        socket of a two-socket node (every VM of the study's) only past half its cores.  A
        combination that names its own distribution (srun -m cyclic) is priced as if it did
        not."""
        if self.intra_sockets is not None and layout.cores_per_node > self.cores / 2:
            return self.intra_sockets
        return self.intra

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

    def at_triad(self, gbs: float, cores: int) -> NodeModel:
        """This machine as it was while a solve on `cores` cores of a node ran, its node's
        Triad measured beside it at `gbs` (biccg_triad_beside): every Triad from memory
        (by threads, and the ladder's points past the last-level cache) scaled by `gbs`
        over the Triad at `cores`; the cache's points as they were."""
        f = gbs / self.bandwidth(cores)
        ladder = {t: tuple((ws, v * f if ws > self.cache_bytes else v) for ws, v in points)
                  for t, points in self.ladder.items()}
        return replace(self, triad_gbs={t: v * f for t, v in self.triad_gbs.items()},
                       ladder=ladder)

    def tier(self, cores: int, working_set: float) -> tuple[float, str]:
        """(GB/s, tier) of `cores` cores on a node streaming `working_set` bytes (assumption
        2's tiers).  The tier: 'ladder' (measured at that working set), 'memory' (the
        set exceeds the cache, or nothing else is known of the machine), or 'cache' (a
        published machine whose L3 holds the set: its DRAM Triad is returned, and the
        caller multiplies in the cache's drawn speed-up, cache_input(name))."""
        dram = self.bandwidth(cores)
        if self.measured:
            at = max([t for t in sorted(self.ladder) if t <= cores] or sorted(self.ladder)[:1],
                     default=None)
            if at is None:
                return dram, "memory"
            points = sorted(self.ladder[at])
            if self.rule_bytes > points[-1][0]:
                points.append((self.rule_bytes, dram))
            if working_set >= points[-1][0]:
                return points[-1][1], "memory" if points[-1][1] == dram else "ladder"
            return _loglog([p[0] for p in points], [p[1] for p in points],
                           working_set), "ladder"
        if self.cache_bytes and self.cache_peak_gbs > dram and working_set <= self.cache_bytes:
            return dram, "cache"
        return dram, "memory"


@dataclass(frozen=True)
class SolveLayout:
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
    """A predicted solve: seconds, one iteration's parts (memory, halo, reductions) and the
    setup before it (assumption 6; 0 where none is modelled)."""

    solve_s: float
    iterations: float
    memory_s: float
    halo_s: float
    reduce_s: float
    setup_s: float = 0.0
    tier: str = "memory"  # the memory tier the working set was priced at (NodeModel.tier)

    @property
    def iteration_s(self) -> float:
        return self.memory_s + self.halo_s + self.reduce_s


def iteration(problem: MatrixModel, machine: NodeModel, layout: SolveLayout, efficiency: float,
              traffic: Traffic | None = None, latency_position: float = 0.0,
              tiers: bool = False, core_gbs: float = 0.0) -> tuple[float, float, float, str]:
    """(memory, halo, reductions) seconds of one iteration (assumptions 1, 3, 4) and the
    memory tier it was priced at (assumption 2: STREAM's rule size, 'memory', without
    `tiers`); `traffic` the solver's count for this problem and rank count, else the slab
    rule.

    ValueError where the machine lacks what the layout needs: a Triad, a ping-pong for
    more than one rank, an interconnect for more than one node (or more nodes than it
    allows)."""
    if layout.cores_per_node > machine.cores:
        raise ValueError(f"{machine.name}: {layout.label} needs {layout.cores_per_node} cores "
                         f"of a node, it has {machine.cores}")
    if machine.max_nodes is not None and layout.nodes > machine.max_nodes:
        raise ValueError(f"{machine.name}: no interconnect for {layout.nodes} nodes (a VM "
                         "without InfiniBand runs on one)")
    dram = machine.bandwidth(layout.cores_per_node) * efficiency
    node_set = problem.working_set(layout.ranks) / layout.nodes
    gbs, tier = machine.tier(layout.cores_per_node, node_set) if tiers else (
        machine.bandwidth(layout.cores_per_node), "memory")
    rate = gbs * efficiency
    if tier == "ladder" and core_gbs > 0:  # a cache feeds no faster than the cores consume
        rate = min(rate, max(core_gbs * layout.cores_per_node, dram))
    memory = problem.bytes(layout.ranks) / layout.nodes / (rate * 1e9)
    if layout.ranks == 1:
        return memory, 0.0, 0.0, tier
    across = layout.nodes > 1
    link = machine.inter if across else machine.within(layout)
    if link is None:
        where = "across nodes" if across else "within a node"
        raise ValueError(f"{machine.name}: no ping-pong {where} measured or published")
    t = traffic or problem.traffic(layout.ranks)
    halo = t.messages * link.time_us(t.message_size, latency_position) * 1e-6
    steps = 2 * math.ceil(math.log2(layout.ranks))
    reduce = t.reductions * steps * link.time_us(t.reduction_size, latency_position) * 1e-6
    return memory, halo, reduce, tier


def predict(problem: MatrixModel, machine: NodeModel, layout: SolveLayout, iterations: float,
            efficiency: float, traffic: Traffic | None = None, setup_iterations: float = 0.0,
            latency_position: float = 0.0, tiers: bool = False,
            core_gbs: float = 0.0) -> Prediction:
    """The predicted solve time of `problem` on `layout` of `machine` (the module's model;
    `tiers`: its working set priced at the memory tier it fits, capped by `core_gbs` a
    core, assumption 2); its setup
    is `setup_iterations` x one iteration's memory time (assumption 6).  A 'cache' tier's
    time is at the DRAM Triad: the caller divides in the cache's speed-up."""
    if not iterations > 0:
        raise ValueError(f"{problem.name}: no iteration count")
    memory, halo, reduce, tier = iteration(problem, machine, layout, efficiency, traffic,
                                           latency_position, tiers, core_gbs)
    return Prediction(iterations * (memory + halo + reduce), iterations, memory, halo, reduce,
                      setup_iterations * memory, tier)


def fit_efficiency(problem: MatrixModel, machine: NodeModel, layout: SolveLayout, iterations: float,
                   solve_s: float, traffic: Traffic | None = None, tiers: bool = False) -> float:
    """The efficiency that makes predict() give `solve_s` for this measured solve: the
    memory part's share of the time left after the halo and reductions (assumption 1)."""
    memory, halo, reduce, _ = iteration(problem, machine, layout, 1.0, traffic, 0.0, tiers)
    left = solve_s / iterations - halo - reduce
    if left <= 0:
        raise ValueError(f"{problem.name} on {machine.name}: the measured solve is faster "
                         "than its communication alone")
    return memory / left
