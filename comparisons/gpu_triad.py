"""STREAM Triad on a GPU (CuPy), beside the device-to-device copy of the same arrays.

Not a benchmark of the study (its VMs have no GPU): the standing request measures the lent
machine's GPU where it has one (comparisons/README.md, "GPU Triad"). Triad
a = b + s * c as one CuPy elementwise kernel, STREAM's byte count (3 x 8 B an element);
the reference is cudaMemcpy device to device of one array into another (2 x 8 B an element),
the fastest move the runtime has. Rounds alternate the two, each the best of `--ntimes`
timed with CUDA events after a warm-up; the table gives medians over rounds and their ratio.

    python3 comparisons/gpu_triad.py --size 268435456 --rounds 7
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1 << 28, help="doubles an array (default 2^28)")
    p.add_argument("--ntimes", type=int, default=10, help="timed repetitions a round")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--json", help="write the rates here too")
    a = p.parse_args()
    for name in ("size", "ntimes", "rounds"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be at least 1")
    try:
        import cupy as cp

        cp.cuda.runtime.getDeviceCount()
    except ImportError as exc:
        sys.exit(f"gpu_triad: CuPy is not importable here ({exc}): no GPU Triad to measure")
    except cp.cuda.runtime.CUDARuntimeError as exc:
        sys.exit(f"gpu_triad: CuPy finds no GPU here ({exc}): no GPU Triad to measure")
    n = a.size
    x = cp.full(n, 1.0)
    b = cp.full(n, 2.0)
    c = cp.full(n, 0.5)
    triad = cp.ElementwiseKernel("float64 b, float64 c, float64 s", "float64 a",
                                 "a = b + s * c", "stream_triad")

    def best(fn, nbytes: float) -> float:
        fn()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(a.ntimes):
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
        return nbytes / min(times) / 1e9

    runs = {
        "triad": (lambda: triad(b, c, 3.0, x), 3 * 8 * n),
        "copy": (lambda: cp.copyto(x, b), 2 * 8 * n),
    }
    rates: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(a.rounds):
        for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            rates[name].append(best(*runs[name]))
    # each kernel once more, its result checked exactly (2 + 3 x 0.5 is exact in binary)
    for fn, want in ((runs["triad"][0], 3.5), (runs["copy"][0], 2.0)):
        fn()
        if not bool((x == want).all()):
            sys.exit(f"gpu_triad: a kernel left wrong values (expected {want} everywhere)")
    dev = cp.cuda.runtime.getDeviceProperties(0)
    name = dev["name"].decode() if isinstance(dev["name"], bytes) else dev["name"]
    ratios = [t / c for t, c in zip(rates["triad"], rates["copy"])]
    print(f"{name}, N = {n:,} doubles an array ({8 * n / 2**30:.1f} GiB), "
          f"best of {a.ntimes}, {a.rounds} alternating rounds")
    print("| kernel | median GB/s | min | max |\n|---|---|---|---|")
    for k, v in rates.items():
        print(f"| {k} | {statistics.median(v):.0f} | {min(v):.0f} | {max(v):.0f} |")
    print(f"triad / copy, median of per-round ratios: {statistics.median(ratios):.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": name, "size": n, "rates": rates, "ratios": ratios}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
