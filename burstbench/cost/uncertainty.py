"""What the burst decision does not know, said as ranges, and carried into its answer.

Each uncertain input is a :class:`Range` (low, mode, high, and where each comes from).  The
decision is evaluated on arrays of input values: seeded Monte Carlo draws (:func:`draw`,
a few thousand; one generator per input, seeded by the seed and the input's name, so an
input's draws do not change when another input is fixed or added, and the figures rebuild
byte for byte), or the modes with one input at its ends (:func:`one_at_a_time`, the
sensitivity's tornado).  An input shared by two machines (the model's error, the
iteration count of a layout) is one array used for both: the same draw on each side.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from burstbench.core.checks import ParamError

#: The inputs' names, as the tables and the tornado chart print them.
ERROR = "model error"
FLOW_FRACTION = "Flow's Triad fraction"
WAN = "WAN rate"
DEPLOY = "deployment"
ITERATIONS = "iterations"
EVICTIONS = "spot evictions"
LATENCY = "published MPI latency"
SPOT_START = "spot start delay"


def cache(machine: str) -> str:
    """The cache-tier input of one machine: 'cache speed-up of HB120rs_v3', the factor its
    L3 streams faster than its DRAM Triad (predict's assumption 2)."""
    return f"cache speed-up of {machine}"


def wan(region: str) -> str:
    """The WAN input of one region: 'WAN rate to East US' (each region its own path); ''
    names the one WAN of a caller that draws a single WAN for every region."""
    return f"{WAN} to {region}" if region else WAN


def wan_of(inputs: dict, region: str):
    """A region's WAN among `inputs`: its own where drawn, else the one WAN every region
    shares (a caller that drew a single WAN)."""
    return inputs[wan(region)] if wan(region) in inputs else inputs[WAN]


@dataclass(frozen=True)
class Range:
    """An uncertain input: drawn triangular (low, mode, high), or log-uniform between low
    and high (`log`: an input known to an order of magnitude, its mode the geometric mean);
    low = high is a known value.  `source` says where each end comes from, `tables` which
    reference tables (data/reference/) it was read from."""

    name: str
    low: float
    mode: float
    high: float
    unit: str
    source: str
    log: bool = False
    tables: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for v in (self.low, self.mode, self.high):
            if not (isinstance(v, (int, float)) and math.isfinite(v)):
                raise ParamError(f"{self.name}: its range must be numbers, not {v!r}")
        if self.low > self.high:
            raise ParamError(f"{self.name}: the range's low end {self.low:g} is above its "
                             f"high end {self.high:g}")
        if not self.low <= self.mode <= self.high:
            raise ParamError(f"{self.name}: {self.mode:g} is outside its range "
                             f"{self.low:g}-{self.high:g}")
        if self.log and not self.low > 0:
            raise ParamError(f"{self.name}: a log-uniform range must be above 0, not "
                             f"{self.low:g}")

    @classmethod
    def known(cls, name: str, value: float, unit: str, source: str) -> Range:
        """A value with no range."""
        return cls(name, value, value, value, unit, source)

    @classmethod
    def log_uniform(cls, name: str, low: float, high: float, unit: str, source: str,
                    tables: tuple[str, ...] = ()) -> Range:
        """Log-uniform between `low` and `high`, its mode their geometric mean."""
        mode = math.sqrt(low * high) if low > 0 and high >= low else low
        return cls(name, low, mode, high, unit, source, log=True, tables=tables)

    @property
    def fixed(self) -> bool:
        return self.low == self.high

    def draw(self, n: int, seed: int) -> np.ndarray:
        """`n` seeded draws: the generator is the seed and this input's name, nothing else."""
        if self.fixed:
            return np.full(n, float(self.low))
        rng = np.random.default_rng([seed, zlib.crc32(self.name.encode())])
        if self.log:
            return np.exp(rng.uniform(math.log(self.low), math.log(self.high), n))
        return rng.triangular(self.low, self.mode, self.high, n)

    def text(self) -> str:
        """'21.5-117 MiB/s (mode 50.1)', or the value where it is known."""
        unit = f" {self.unit}" if self.unit else ""
        if self.fixed:
            return f"{self.low:.3g}{unit}"
        return f"{self.low:.3g}-{self.high:.3g}{unit} (mode {self.mode:.3g})"


def draw(ranges: dict[str, Range], n: int, seed: int) -> dict[str, np.ndarray]:
    """Every input's `n` seeded draws."""
    return {k: r.draw(n, seed) for k, r in ranges.items()}


def modes(ranges: dict[str, Range], n: int = 1) -> dict[str, np.ndarray]:
    """Every input at its mode, `n` times."""
    return {k: np.full(n, float(r.mode)) for k, r in ranges.items()}


@dataclass(frozen=True)
class Swing:
    """How far one input, from its low to its high end, moves an output (the others at
    their modes)."""

    name: str
    low: float
    high: float
    at_low: float
    at_high: float

    @property
    def swing(self) -> float:
        return abs(self.at_high - self.at_low)


def one_at_a_time(ranges: dict[str, Range],
                  evaluate: Callable[[dict[str, np.ndarray]], np.ndarray]) -> list[Swing]:
    """Each input at its low and high end, the others at their modes, ranked by how far
    it moves `evaluate`'s output (the largest first; ties by name)."""
    out = []
    for name, r in ranges.items():
        inputs = modes(ranges, 2)
        inputs[name] = np.array([r.low, r.high], dtype=float)
        lo, hi = (float(v) for v in evaluate(inputs))
        out.append(Swing(name, r.low, r.high, lo, hi))
    return sorted(out, key=lambda s: (-round(s.swing, 12), s.name))
