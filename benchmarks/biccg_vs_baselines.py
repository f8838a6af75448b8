"""BICCG beside its baselines: iterations, effective bandwidth, time to a 1e-7 solution.

Everything runs as fresh processes, alternating, and medians are printed:

1. iterations of our multicolor BICCG (block size 32, 20 colors) against
   natural-order IC(0)-CG (the numba baseline: the same factorization, no
   reordering) on each problem - the price of the ordering;
2. the effective bandwidth of one BICCG iteration on Poisson 128^3 with 2
   threads - the bytes its kernels must move (model below) over the time of
   an iteration - against this machine's STREAM Triad measured just before and
   just after each solve in the same process (the ratio is taken per round);
3. time to relative residual 1e-7 against SciPy's cg and the numba CGs;
4. with --full, the study's 256 x 256 x 512 Poisson problem: time, iterations
   and peak memory.

Byte model of one iteration (8-byte values, 4-byte column indices, 8-byte row
pointers; every array read or written once per kernel, gathered vector
entries counted once): SpMV 12 nnz + 24 n; preconditioner 12 (nnz_L + nnz_U)
+ 64 n (row pointers, split counts, r, z, 1/d, both sweeps); dot products,
axpys and the p update 104 n.

    python benchmarks/biccg_vs_baselines.py --rounds 5 --full
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
MPIEXEC = str(Path(PY).parent / "mpiexec")


def run_json(argv: list[str], env: dict | None = None) -> dict:
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT,
                          env=os.environ | (env or {}))
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(argv[:6])} ... failed: {proc.stderr.strip()[-400:]}")
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    return lines[-1] if "function" not in lines[-1] else \
        next(r for r in lines if r["function"] == "Triad")


def ours(grid: list[int], threads: int, ranks: int = 1, extra: tuple = ()) -> dict:
    pre = [MPIEXEC, "-n", str(ranks), "-bind-to", f"core:{threads}"] if ranks > 1 else []
    return run_json([*pre, PY, "-m", "kernels_ext.biccg", "--poisson", *map(str, grid),
                     "--threads", str(threads), *extra],
                    {"OMP_PLACES": "cores", "OMP_PROC_BIND": "close"})


def baseline(grid: list[int], method: str, threads: int) -> dict:
    return run_json([PY, "-m", "kernels_ext.cg_baselines", "--poisson", *map(str, grid),
                     "--method", method, "--threads", str(threads)])


def bytes_per_iteration(grid: list[int]) -> float:
    """The model in the module docstring, for the 7-point Poisson matrix."""
    nx, ny, nz = grid
    n = nx * ny * nz
    nnz = 7 * n - 2 * (nx * ny + ny * nz + nx * nz)
    nlu = nnz - n  # strictly lower plus strictly upper
    return 12 * nnz + 24 * n + 12 * nlu + 64 * n + 104 * n


def paired_child(rounds: int, threads: int) -> None:
    """Print JSON: `rounds` of Triad, a BICCG solve of Poisson 128^3, Triad again,
    all in this one process, so each solve has the memory system's state of its
    own moment beside it (this VM's bandwidth changes over minutes)."""
    import numpy as np

    from kernels_ext import biccg, triad

    def triad_gbs() -> float:
        recs = triad.measure(size=80_000_000, ntimes=20, threads=threads)
        return next(r["best_rate_gbs"] for r in recs if r["function"] == "Triad")

    A = biccg.poisson_matrix(128, 128, 128)
    b = A @ np.ones(A.shape[0])
    res = []
    for _ in range(rounds):
        before = triad_gbs()
        _, st = biccg.solve(A, b, threads=threads)
        t = st["times"]
        run = {"iterations": st["iterations"], "solve_s": t["solve"],
               "per_iteration_s": {k: t[k] / st["iterations"]
                                   for k in ("spmv", "precond", "dots", "halo", "vector")}}
        res.append({"triad_before": before, "biccg": run, "triad_after": triad_gbs()})
    print(json.dumps(res))


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--full", action="store_true", help="also solve 256 x 256 x 512")
    p.add_argument("--out", type=Path, help="write everything measured as JSON here")
    p.add_argument("--paired-child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.paired_child:
        paired_child(a.rounds, a.threads)
        return 0
    out: dict = {}

    # 1 + 2: Poisson 128^3, BICCG against Triad, paired in one process
    g = [128, 128, 128]
    rounds = json.loads(subprocess.run(
        [PY, __file__, "--paired-child", "--rounds", str(a.rounds), "--threads", str(a.threads)],
        capture_output=True, text=True, check=True, cwd=ROOT,
        env=os.environ | {"OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}).stdout)
    runs = [x["biccg"] for x in rounds]
    per_it = [x["solve_s"] / x["iterations"] for x in runs]
    gbs = [bytes_per_iteration(g) / t / 1e9 for t in per_it]
    tri = [(x["triad_before"] + x["triad_after"]) / 2 for x in rounds]
    ratios = [e / t for e, t in zip(gbs, tri)]
    print(f"Poisson 128^3, {a.threads} threads, {a.rounds} rounds of Triad, BICCG, Triad in one "
          f"process: {runs[0]['iterations']} iterations, {1e3 * med(per_it):.2f} ms per "
          f"iteration (min {1e3 * min(per_it):.2f}), effective {med(gbs):.1f} GB/s; Triad "
          f"{med(tri):.1f} GB/s; paired ratio median {med(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
    for x, e, r in zip(rounds, gbs, ratios):
        print(f"  round: Triad {x['triad_before']:5.1f} / {x['triad_after']:5.1f} GB/s, "
              f"BICCG {e:5.1f} GB/s, ratio {r:.2f}")
    split = {k: med([x["per_iteration_s"][k] for x in runs]) * 1e3
             for k in runs[0]["per_iteration_s"]}
    print("  per iteration (ms): " + ", ".join(f"{k} {v:.2f}" for k, v in split.items()))
    out["bandwidth"] = {"grid": g, "threads": a.threads, "rounds": rounds,
                        "effective_gbs": gbs, "paired_ratio": ratios,
                        "bytes_per_iteration": bytes_per_iteration(g)}

    # 1 + 3: iterations and time to 1e-7 against the baselines
    out["baselines"] = {}
    for g in ([64, 64, 64], [128, 128, 128]):
        res: dict[str, list[dict]] = {k: [] for k in ("biccg 1x2", "biccg 2x1", "numba-ic0cg",
                                                      "numba-cg", "scipy-cg")}
        for r in range(max(1, a.rounds // 2)):
            res["biccg 1x2"].append(ours(g, a.threads))
            res["biccg 2x1"].append(ours(g, 1, ranks=2))
            for m in ("numba-ic0cg", "numba-cg", "scipy-cg"):
                res[m].append(baseline(g, m, a.threads))
        t_ours = med([x["solve_s"] + x.get("setup_s", 0) for x in res["biccg 1x2"]])
        print(f"\nPoisson {g[0]}x{g[1]}x{g[2]} to 1e-7 (setup + solve, median):")
        for k, xs in res.items():
            t = med([x["solve_s"] + x.get("setup_s", 0) for x in xs])
            print(f"  {k:12} {xs[0]['iterations']:5d} iterations  {t:8.3f} s  "
                  f"({t / t_ours:5.2f}x ours)")
        nat = res["numba-ic0cg"][0]["iterations"]
        print(f"  multicolor / natural-order IC(0) iterations: "
              f"{res['biccg 1x2'][0]['iterations'] / nat:.2f}")
        out["baselines"]["x".join(map(str, g))] = res

    if a.full:  # 4: the study's problem
        g = [256, 256, 512]
        full = ours(g, a.threads)
        print(f"\nPoisson 256x256x512 (n = {full['n']:,}), {a.threads} threads: "
              f"{full['iterations']} iterations, setup {full['setup_s']:.1f} s, solve "
              f"{full['solve_s']:.1f} s, relative residual {full['relative_residual']:.2e}, "
              f"peak memory {full['peak_rss_bytes'] / 2**30:.1f} GiB, effective "
              f"{bytes_per_iteration(g) / (full['solve_s'] / full['iterations']) / 1e9:.1f} "
              "GB/s")
        out["full"] = full
    if a.out:
        a.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
