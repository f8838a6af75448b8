"""What decides the burst decision's verdict: the inputs ranked by how far each moves an
option's break-even wait (figures/burst_sensitivity), and what would flip it: for the wait
asked about, the value of each deciding input (or of the job's data) at which the break-even
wait crosses it, the others at their modes, by bisection (figures/burst_flip_points)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from burstbench.cost import job
from burstbench.cost import uncertainty as u
from burstbench.cost.burst import Decision, Evaluator


def sensitivity(decision: Decision, job_name: str, key: tuple) -> list[u.Swing]:
    """The inputs ranked by how far each, over its range, moves the break-even wait of
    option `key` of `job_name` (the others at their modes)."""
    ev = decision.evaluators[key]
    return u.one_at_a_time(decision.ranges, lambda x: ev(x)["break_even_h"])


#: The job's data, as flip points name them (not drawn: the job's own).
GB_IN, GB_OUT = "GB in", "GB out"

#: Where a flip point is looked for, per input: (low, high, log scale, how the high end is
#: said).  A flip outside is said not to exist ("no WAN rate up to 10 GiB/s ...").
FLIP_SPANS: dict[str, tuple[float, float, bool, str]] = {
    u.WAN: (0.1, 10240.0, True, "10 GiB/s"), u.ERROR: (-0.9, 9.0, False, "+900%"),
    u.FLOW_FRACTION: (0.05, 1.0, False, "1"), u.DEPLOY: (0.0, 1440.0, False, "a day"),
    u.SPOT_START: (0.0, 1440.0, False, "a day"), u.EVICTIONS: (0.0, 10.0, False, "10 per h"),
    u.ITERATIONS: (0.0, 1.0, False, "1"), u.LATENCY: (0.0, 1.0, False, "1"),
    GB_IN: (0.0, 1e5, False, "100 TB"), GB_OUT: (0.0, 1e5, False, "100 TB")}


def bisect(f: Callable[[float], float], lo: float, hi: float, log: bool = False,
           steps: int = 80) -> float | None:
    """The x in [lo, hi] where f changes sign (f continuous and monotonic there), by
    bisection (in log x where `log`); None where f(lo) and f(hi) have the same sign."""
    a, b = (np.log(lo), np.log(hi)) if log else (lo, hi)
    fa, fb = f(float(np.exp(a) if log else a)), f(float(np.exp(b) if log else b))
    if fa == 0:
        return lo
    if fa * fb > 0:
        return None
    for _ in range(steps):
        m = (a + b) / 2
        fm = f(float(np.exp(m) if log else m))
        if (fm < 0) == (fa < 0):
            a, fa = m, fm
        else:
            b = m
    x = (a + b) / 2
    return float(np.exp(x) if log else x)


@dataclass(frozen=True)
class Flip:
    """Where the verdict at `wait_h` changes as one input moves, the others at their modes:
    `at` (None where it does not within FLIP_SPANS), and whether it bursts above it."""

    input: str
    at: float | None
    unit: str
    burst_above: bool
    verdict_at_modes: str
    value_at_modes: float
    span: tuple[float, str] = (0.0, "")  # where it was looked for: low, the high end said

    def text(self) -> str:
        """'burst while the WAN rate to East US is at least 14 MiB/s', 'stay above 160 GB
        out', or 'no WAN rate ... up to 10 GiB/s makes it burst'."""
        unit = f" {self.unit}" if self.unit and not self.unit.startswith("of ") else ""
        lo, hi_text = self.span
        if self.at is None:
            if self.verdict_at_modes == "burst":
                return f"it bursts at every {self.input} in {lo:g}-{hi_text}"
            return f"no {self.input} up to {hi_text} makes it burst"
        x = f"{self.at:.3g}{unit}"
        if self.input in (GB_IN, GB_OUT):
            return (f"burst above {self.at:.3g} {self.input}" if self.burst_above
                    else f"stay above {self.at:.3g} {self.input}")
        return (f"burst while {self.input} is at least {x}" if self.burst_above
                else f"stay above {x} of {self.input}")


def flip_points(ev: Evaluator, ranges: dict[str, u.Range], names: list[str], data: job.Data,
                wait_h: float) -> list[Flip]:
    """For each input of `names` (drawn inputs, or GB_IN / GB_OUT: the job's data), the
    value at which the verdict at `wait_h` (burst where the break-even at the modes is
    below it) changes, the others at their modes; found by bisection over FLIP_SPANS."""
    out = []
    for name in names:
        def be(x: float, name=name) -> float:
            inputs = u.modes(ranges, 1)
            d = None
            if name == GB_IN:
                d = replace(data, input_gb=x)
            elif name == GB_OUT:
                d = replace(data, output_gb=x)
            else:
                inputs[name] = np.array([x])
            return float(ev(inputs, d)["break_even_h"][0]) - wait_h
        if name.startswith(u.WAN):
            lo, hi, log, hi_text = FLIP_SPANS[u.WAN]
        elif name in FLIP_SPANS:
            lo, hi, log, hi_text = FLIP_SPANS[name]
        else:
            r = ranges[name]
            lo, hi, log, hi_text = r.low, r.high, False, f"{r.high:g}"
        at = bisect(be, lo, hi, log)
        mode = data.input_gb if name == GB_IN else data.output_gb if name == GB_OUT \
            else ranges[name].mode
        here = be(mode)
        unit = "GB" if name in (GB_IN, GB_OUT) else ranges[name].unit
        out.append(Flip(name, at, unit, be(hi) < be(lo), "burst" if here < 0 else "stay",
                        mode, (lo, hi_text)))
    return out
