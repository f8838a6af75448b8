"""Our STREAM Triad beside McCalpin's stream.c, a plain static-array loop, numba and NumPy.

Ours twice: with normal stores (the same loop as stream.c: target 1.00x) and with
streaming stores (``--stores streaming``: no write-allocate read, target >= 1.3x;
32/24 = 1.33x is the ceiling where the memory is the limit).

Every implementation runs in its own fresh process, all with the same size,
passes, threads and affinity (OMP_PLACES=cores, OMP_PROC_BIND=close), in
alternating rounds so that the machine's drift hits them all alike.  For each
round the ratio ours / stream.c is taken; the medians over rounds are printed
and, with --out, written as JSON.  stream.c is built with the OFFSET that places its
arrays as far apart as ours are (same_gaps): where they lie decides the rate here too.

stream.c is not redistributed here: give the path of a copy
(https://www.cs.virginia.edu/stream/FTP/Code/stream.c).

    python comparisons/triad_vs_stream.py --stream-c ~/stream.c --size 80000000 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def compile_c(cc: str, flags: str, src: Path, out: Path, defines: dict) -> None:
    big = defines.get("STREAM_ARRAY_SIZE", defines.get("N", 0)) * 24 >= 2**31
    args = [cc, *shlex.split(flags), *(["-mcmodel=medium"] if big else []),
            *[f"-D{k}={v}" for k, v in defines.items()], str(src), "-o", str(out)]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: {shlex.join(args)} failed: {proc.stderr.strip()}")


#: Where the C kernels' arrays start: posix_memalign to 2 MiB (kernels_ext/triad/stream.h).
ALIGN = 2 << 20


def same_gaps(size: int) -> int:
    """stream.c's OFFSET (elements) that puts its static arrays as far apart as ours are:
    glibc maps each of our posix_memalign'd arrays with 2 MiB and a page to spare, so the
    next lies its bytes plus those, rounded down to 2 MiB, away (130 MiB at 2^24 doubles,
    612 MiB at 80M).  Without it, at 2^24 elements (local.yaml's size here) stream.c's
    arrays are exactly 128 MiB apart, and that layout streamed at 0.86x here (24.4 against
    28.3 GB/s, medians of 6 alternating runs each, 2 threads)."""
    return ((8 * size + 4096) // ALIGN + 1) * ALIGN // 8 - size


def triad_of(argv: list[str], env: dict, kind: str) -> float:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"error: {argv[0]} failed: {proc.stderr.strip()[-300:]}")
    if kind == "stream.c":
        if "Solution Validates" not in proc.stdout:
            sys.exit("error: stream.c did not validate")
        return float(re.search(r"^Triad:\s+([\d.]+)", proc.stdout, re.M).group(1)) / 1e3
    if kind == "plain":
        return float(re.search(r"Triad: ([\d.]+)", proc.stdout).group(1))
    recs = [json.loads(line) for line in proc.stdout.splitlines()]
    return next(r["best_rate_gbs"] for r in recs if r["function"] == "Triad")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stream-c", required=True, type=Path, help="path of McCalpin's stream.c")
    p.add_argument("--cc", default="gcc")
    p.add_argument("--flags", default="-O3 -march=native -fopenmp")
    p.add_argument("--size", type=int, default=80_000_000)
    p.add_argument("--ntimes", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=15,
                   help="alternating rounds (15; 7 read within +-15%% on a bimodal VM)")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    a = p.parse_args()
    if not a.stream_c.is_file():
        sys.exit(f"error: {a.stream_c} is not a file (get stream.c from "
                 "https://www.cs.virginia.edu/stream/FTP/Code/stream.c)")

    from kernels_ext.common import variants

    variant = variants.build(a.cc, a.flags)  # ours, with exactly these flags
    tmp = Path(tempfile.mkdtemp(prefix="triad-bench-"))
    compile_c(a.cc, a.flags, a.stream_c, tmp / "stream",
              {"STREAM_ARRAY_SIZE": a.size, "NTIMES": a.ntimes, "OFFSET": same_gaps(a.size)})
    compile_c(a.cc, a.flags, HERE / "plain_triad.c", tmp / "plain",
              {"N": a.size, "NTIMES": a.ntimes})
    env = os.environ | {"OMP_NUM_THREADS": str(a.threads), "OMP_PLACES": "cores",
                        "OMP_PROC_BIND": "close", "NUMBA_THREADING_LAYER": "omp"}
    ours = [sys.executable, "-m", "kernels_ext.triad", "--size", str(a.size), "--ntimes",
            str(a.ntimes), "--threads", str(a.threads)]
    impls = {
        "stream.c": ([str(tmp / "stream")], "stream.c"),
        "ours": (ours + ["--compiler", a.cc, f"--flags={a.flags}"], "json"),
        "ours, streaming": (ours + ["--compiler", a.cc, f"--flags={a.flags}",
                                    "--stores", "streaming"], "json"),
        "plain loop": ([str(tmp / "plain")], "plain"),
        "numba": (ours + ["--impl", "numba"], "json"),
        "numpy (1 thread)": ([*ours[:-2], "--threads", "1", "--impl", "numpy"], "json"),
    }
    rates: dict[str, list[float]] = {k: [] for k in impls}
    for r in range(a.rounds):
        order = list(impls) if r % 2 == 0 else list(reversed(impls))
        for name in order:
            argv, kind = impls[name]
            rates[name].append(triad_of(argv, env, kind))
        print(f"round {r + 1}/{a.rounds}: " + ", ".join(f"{k} {v[-1]:.1f}"
                                                        for k, v in rates.items()), flush=True)
    ratios = {k: statistics.median(x / s for x, s in zip(v, rates["stream.c"]))
              for k, v in rates.items()}
    print(f"\nTriad best rate, GB/s: N = {a.size:,}, NTIMES = {a.ntimes}, {a.threads} threads, "
          f"{a.cc} {variant.compiler.version} '{a.flags}', {a.rounds} rounds")
    ref = rates["stream.c"]
    print(f"{'implementation':18} {'median':>8} {'min':>8} {'max':>8}   ratios to stream.c: "
          "median of paired, of medians, of maxima")
    for k, v in rates.items():
        print(f"{k:18} {statistics.median(v):8.2f} {min(v):8.2f} {max(v):8.2f}   "
              f"{ratios[k]:8.3f} {statistics.median(v) / statistics.median(ref):8.3f} "
              f"{max(v) / max(ref):8.3f}")
    if a.out:
        a.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                     "compiler": variant.compiler.banner, "rates_gbs": rates,
                                     "median_ratio_to_stream_c": ratios}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
