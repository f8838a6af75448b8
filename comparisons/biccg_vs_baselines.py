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
4. PETSc's CG with ICC(0) (comparisons/petsc_icc_cg.py: natural ordering,
   0 levels, rtol 1e-7 on the unpreconditioned residual, the same matrix,
   b = A 1, x0 = 0), in one process (ICC(0) proper) and in --threads
   processes on the same cores as ours (block Jacobi, ICC(0) a process:
   PETSc's parallel ICC, under Debian's Open MPI, `mpiexec.openmpi`, which
   its petsc4py is built on; left out with a note where that cannot run),
   against our solve in two layouts of --threads cores (1 process x 2
   threads and 2 x 1) and STREAM Triad on those cores, on Poisson 64^3 and
   128^3, in an order that rotates every round, --rounds rounds: iterations,
   setup (ours: all but the iterations, the input's check, ordering,
   factorization and CG's vectors; PETSc's KSPSetUp with the ICC
   factorization and its work vectors' allocation, which it first touches in
   its solve), solve and their sum (matrix assembly is left out of both),
   setup from the CSR (both from the caller's CSR arrays: ours is its
   setup, which copies them in its own order; PETSc's is its matrix made
   from them, t_matrix: on one process without a copy, and KSPSetUp), the
   per-round ratios ours / PETSc
   of setup, setup from the CSR, solve and total (against
   both of PETSc's layouts: on one core, and on the same cores), and each
   pass's achieved bandwidth (the byte model below over the pass's time per
   iteration) with its per-round ratio to the round's Triad.  PETSc runs
   under /usr/bin/python3 with Debian's petsc4py (apt-get install -y
   python3-petsc4py; --petsc-python for another interpreter); where it cannot
   be imported, one line says the section is skipped, and the rest runs.
   --no-petsc leaves it out;
5. with --full, the study's 256 x 256 x 512 Poisson problem: time, iterations
   and peak memory.

--only SECTION (bandwidth, baselines, petsc, full; repeatable) runs just those.
--pages base runs our solver in base pages in section 4 (huge by default, as the solver
does: comparisons/README.md, "Huge pages or base pages").  Both setups start on memory new
to their process: ours maps its arrays afresh; PETSc's, --petsc-memory fresh (the
default), has glibc's free memory handed back first and faults its pages in as base pages
(as-left: on the pages glibc kept from building the CSR, which PETSc's first setup reused
whole; trimmed: handed back, THP as the system has it, so huge pages where given, as ours
by default).  The MB each setup faulted in is printed where each fault is one base page (ours
in base pages, PETSc's fresh).

Byte model of one iteration: kernels_ext.biccg.pass_bytes, for the fused iteration's
three passes (the SpMV with p'q; both sweeps with r -= alpha q, r'r and r'z; x and p
updated together), with whole 4 x 4 x 2 tiles swept from copies where a record says so by
its copied_rows (the default blocking since e586e11; tile_copies).  The unfused iteration
before it moved 12 nnz + 12 (nnz_L + nnz_U) + 192 n.

    python comparisons/biccg_vs_baselines.py --rounds 5 --full
    python comparisons/biccg_vs_baselines.py --only petsc --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from biccg_kernels import mpi_prefix  # comparisons/ is on sys.path: these run as scripts
from petsc_icc_cg import DEFAULT_MEMORY as PETSC_DEFAULT_MEMORY
from petsc_icc_cg import MEMORY as PETSC_MEMORY

from kernels_ext.biccg import DEFAULT_PAGES, PAGES

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SECTIONS = ("bandwidth", "baselines", "petsc", "full")
SYSTEM_PY = "/usr/bin/python3"  # Debian's python3-petsc4py lives there, not in the venv
PETSC_SCRIPT = Path(__file__).resolve().with_name("petsc_icc_cg.py")
BASE_PAGE = resource.getpagesize()
PETSC_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
             "PYTHONPATH": "", "PYTHONHOME": "",  # empty: ignored by Python
             "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
PETSC_MPIEXEC = "mpiexec.openmpi"  # Debian's petsc4py is built on its Open MPI


def run_jsons(argv: list[str], env: dict | None = None) -> list[dict]:
    """The JSON lines a command prints (it must succeed)."""
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT,
                          env=os.environ | (env or {}))
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(argv[:6])} ... failed: {proc.stderr.strip()[-400:]}")
    return [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]


def run_json(argv: list[str], env: dict | None = None) -> dict:
    lines = run_jsons(argv, env)
    return lines[-1] if "function" not in lines[-1] else \
        next(r for r in lines if r["function"] == "Triad")


def first_and_later(recs: list[dict]) -> dict:
    """A process's first solve's record, with the later ones' (on memory the first left)
    under "later"."""
    return recs[0] | {"later": recs[1:]}


def ours(grid: list[int], threads: int, ranks: int = 1, extra: tuple = (),
         solves: int = 1) -> dict:
    """Our solves of one fresh process (or `ranks`): first_and_later."""
    return first_and_later(run_jsons(
        [*mpi_prefix(ranks, threads), PY, "-m", "kernels_ext.biccg", "--poisson",
         *map(str, grid), "--threads", str(threads), "--solves", str(solves), *extra],
        {"OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}))


def triad_beside(rec: dict) -> tuple[float, float]:
    """The Triads (GB/s) a solve's process measured just before and after it (`--triad-beside`);
    exits with the solver's reason where it has only the one before (triad_beside_error)."""
    rates = rec.get("triad_beside_gbs", [])
    if len(rates) != 2:
        sys.exit(f"error: the solve has no Triad before and after it: "
                 f"{rec.get('triad_beside_error', 'none recorded')}")
    return rates[0], rates[1]


def add_triad_size(p: argparse.ArgumentParser) -> None:
    """--triad-size: the elements an array of the Triad each solve's process measures beside
    it (the solver's --triad-beside SIZE), checked as the Triad checks a size."""
    def size(text: str) -> str:
        from kernels_ext.common.errors import KernelError
        from kernels_ext.triad import check_size

        try:
            check_size(text)
        except KernelError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    p.add_argument("--triad-size", type=size, default="auto", metavar="ELEMENTS",
                   help="elements an array of the Triad beside each solve (default auto: the "
                        "Triad's rule size, 4x the last-level cache, at least 10M; a smaller "
                        "one measures the cache, and costs less: 12 s a process on 1 thread "
                        "at the rule size on a VM whose L3 reads 480 MiB)")


def baseline(grid: list[int], method: str, threads: int) -> dict:
    return run_json([PY, "-m", "kernels_ext.biccg.cg_baselines", "--poisson", *map(str, grid),
                     "--method", method, "--threads", str(threads)])


def petsc_argv(grid: list[int], python: str = SYSTEM_PY, ranks: int = 1,
               solves: int = 1, memory: str = PETSC_DEFAULT_MEMORY) -> list[str]:
    """The command of PETSc ICC(0)-CG solves: `ranks` processes under Open MPI, each
    bound to a core as ours are, where ranks > 1; `memory`: its --memory."""
    pre = [PETSC_MPIEXEC, "-n", str(ranks), "--bind-to", "core"] if ranks > 1 else []
    return [*pre, python, str(PETSC_SCRIPT), "--poisson", *map(str, grid), "--solves",
            str(solves), "--memory", memory]


def petsc(grid: list[int], python: str = SYSTEM_PY, ranks: int = 1, solves: int = 1,
          memory: str = PETSC_DEFAULT_MEMORY) -> dict:
    """PETSc ICC(0)-CG solves in fresh processes (petsc_argv), each a new KSP, with our
    record's time keys added: first_and_later."""
    recs = run_jsons(petsc_argv(grid, python, ranks, solves, memory), PETSC_ENV)
    return first_and_later([r | {"setup_s": r["t_setup"], "solve_s": r["t_solve"]}
                            for r in recs])


def faulted_mb(x: dict) -> float | None:
    """The MB a solve's setup faulted in (the busiest process), where each fault is one base
    page: ours in base pages (its minor_faults, the whole call's: its setup, which copies
    the CSR, and iterations that fault in little), PETSc's with --memory fresh
    (setup_faults: KSPSetUp's, not its matrix's); None where a fault may be a huge page."""
    if x.get("pages") == "base" and "minor_faults" in x:
        return x["minor_faults"] * BASE_PAGE / 1e6
    if x.get("memory") == "fresh" and "setup_faults" in x:
        return x["setup_faults"] * BASE_PAGE / 1e6
    return None


def from_csr(x: dict) -> float:
    """A first solve's setup from the caller's CSR arrays: ours is its setup (the copy in its
    own order included); PETSc's is its matrix made from them (t_matrix) and KSPSetUp."""
    return x["setup_s"] + x.get("t_matrix", 0.0)


def petsc_parallel(python: str, ranks: int) -> str:
    """'' where PETSc runs on `ranks` processes here (a 4^3 solve tried), else why not."""
    try:
        proc = subprocess.run(petsc_argv([4, 4, 4], python, ranks), capture_output=True,
                              text=True, cwd=ROOT, env=os.environ | PETSC_ENV, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run {PETSC_MPIEXEC}: {exc}"
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return lines[-1] if lines else f"exit status {proc.returncode}"
    return ""


def petsc_version(python: str = SYSTEM_PY) -> tuple[str | None, str]:
    """(PETSc's version, "") where `python` can import petsc4py, else (None, why not)."""
    try:
        proc = subprocess.run([python, str(PETSC_SCRIPT), "--version"], capture_output=True,
                              text=True, cwd=ROOT, env=os.environ | PETSC_ENV, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"cannot run {python}: {exc}"
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return None, lines[-1] if lines else f"exit status {proc.returncode}"
    return json.loads(proc.stdout.splitlines()[-1])["petsc_version"], ""


def grid_bytes(grid: list[int], factor: str = "double", swept_copies: bool = False,
               ranks: int = 1) -> int:
    """The solver's byte model (kernels_ext.biccg.bytes_per_iteration) for the 7-point
    Poisson matrix of `grid` on `ranks` ranks, its whole tiles swept from copies where
    `swept_copies` (the default blocking, tiles 4x4x2, since e586e11)."""
    return sum(phase_bytes(grid, factor, swept_copies, ranks).values())


def record_swept_copies(rec: dict) -> bool:
    """Whether the solve a record of ours describes swept whole tiles from copies: its
    copied_rows; a record without the count is from a build before it, which swept
    rows but for e586e11's (burstbench.benchmarks.biccg.results.COPIES_UNRECORDED: these
    scripts do not read the build, and count such a record in rows)."""
    return rec.get("copied_rows", 0) > 0


def record_bytes(grid: list[int], rec: dict) -> float:
    """grid_bytes for the solve a record of ours describes (its factor, copies and
    ranks)."""
    return grid_bytes(grid, rec["factor_precision"], record_swept_copies(rec),
                      rec.get("ranks", 1))


def paired_child(rounds: int, threads: int) -> None:
    """Print JSON: `rounds` of Triad, a BICCG solve of Poisson 128^3, Triad again,
    all in this one process, so each solve has the memory system's state of its
    own moment beside it (this VM's bandwidth changes over minutes)."""
    import numpy as np

    from kernels_ext import biccg, triad

    def triad_gbs() -> float:
        recs = triad.measure(size=80_000_000, ntimes=20, threads=threads)
        return next(r["best_rate_gbs"] for r in recs if r["function"] == "Triad")

    grid = (128, 128, 128)
    A = biccg.poisson_matrix(*grid)
    b = A @ np.ones(A.shape[0])
    res = []
    for _ in range(rounds):
        before = triad_gbs()
        # the command line's blocking (solve() already takes its factor precision)
        _, st = biccg.solve(A, b, threads=threads, grid=grid,
                            tile=biccg.parse_blocking(biccg.DEFAULT_BLOCKING, 32, grid))
        t = st["times"]
        run = {"iterations": st["iterations"], "solve_s": t["solve"],
               "per_iteration_s": {k: t[k] / st["iterations"]
                                   for k in ("spmv", "precond", "dots", "halo", "vector")}}
        res.append({"triad_before": before, "biccg": run, "triad_after": triad_gbs()})
    print(json.dumps(res))


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def total(x: dict) -> float:
    """Setup plus solve of one run's record (the baselines without setup count 0)."""
    return x["solve_s"] + x.get("setup_s", 0)


def spread(xs: list[float]) -> dict:
    return {"median": med(xs), "min": min(xs), "max": max(xs)}


def spread_or_none(xs: list[float | None]) -> dict | None:
    """spread of xs, or None where any is None (not measured)."""
    return None if any(x is None for x in xs) else spread([x for x in xs if x is not None])


#: Our layouts beside PETSc (ranks x threads, 2 cores each); PETSc runs 1 x 1 and --threads x 1.
LAYOUTS = ((1, 2), (2, 1))


def triad(threads: int) -> float:
    """STREAM Triad's best rate (GB/s) with `threads` threads, in a fresh process placed as
    our solves are."""
    return run_json([PY, "-m", "kernels_ext.triad", "--size", "80000000", "--ntimes", "20",
                     "--threads", str(threads)],
                    {"OMP_PLACES": "cores", "OMP_PROC_BIND": "close"})["best_rate_gbs"]


def phase_bytes(grid: list[int], factor: str, swept_copies: bool = False,
                ranks: int = 1) -> dict[str, int]:
    """The byte model by the iteration's three passes (kernels_ext.biccg.pass_bytes) for
    the 7-point Poisson matrix of `grid` on `ranks` ranks, its whole tiles swept from
    copies where `swept_copies` (the time model's MatrixModel.poisson and its copied)."""
    from burstbench.cost.predict import MatrixModel
    from kernels_ext.biccg import pass_bytes

    m = MatrixModel.poisson(*grid, factor=factor, swept_copies=swept_copies)
    return pass_bytes(m.n, m.nnz, factor, m.copied(ranks))


def phase_rates(grid: list[int], rec: dict) -> dict[str, float]:
    """Achieved GB/s of each pass of one solve's iteration (model bytes over its time; the
    whole iteration's too, its time including dots and halo)."""
    model = phase_bytes(grid, rec["factor_precision"], record_swept_copies(rec),
                        rec.get("ranks", 1))
    per = rec["per_iteration_s"]
    out = {k: model[k] / per[k] / 1e9 for k in model if per[k] > 0}
    out["iteration"] = sum(model.values()) / (rec["solve_s"] / rec["iterations"]) / 1e9
    return out


def compare_petsc(grids: list[list[int]], rounds: int, threads: int,
                  python: str = SYSTEM_PY, solves: int = 3, pages: str = DEFAULT_PAGES,
                  petsc_memory: str = PETSC_DEFAULT_MEMORY) -> dict:
    """Our solve in each of LAYOUTS and PETSc's ICC(0)-CG (1 x 1), and the Triad of the
    layouts' cores, in an order that rotates every round, `rounds` rounds per grid; the
    ratios ours / PETSc (setup, solve, total) and ours / Triad (each pass's achieved
    bandwidth) are taken per round.  `threads`: the cores of a layout.  Each process
    solves `solves` times: the first solve is the tables' (fresh memory, as a job's
    first), the later ones' setups (a round's median) a table of their own.  `pages`: our
    solver's (--pages); `petsc_memory`: PETSc's (petsc_icc_cg.py's --memory)."""
    version, why = petsc_version(python)
    if version is None:
        print(f"\nPETSc ICC(0)-CG skipped: {why}. Install it with `apt-get install -y "
              "python3-petsc4py` (Debian) or name an interpreter with petsc4py in --petsc-python")
        return {"skipped": why, "python": python}
    layouts = [(r, threads // r) for r, _ in LAYOUTS if threads % r == 0]
    names = [f"{r}x{t}" for r, t in layouts]
    pnames = {"petsc": 1}  # PETSc on one core, and on the same cores as ours where it can
    why_not = petsc_parallel(python, threads) if threads > 1 else "one core"
    if not why_not:
        pnames[f"petsc {threads}x1"] = threads
    elif threads > 1:
        print(f"\nPETSc on {threads} processes skipped: {why_not}")
    res: dict = {"petsc_version": version, "python": python, "threads": threads, "pages": pages,
                 "petsc_memory": petsc_memory, "layouts": names, "petsc_layouts": pnames,
                 "petsc_parallel_skipped": why_not,
                 "grids": {}}
    for g in grids:
        runs: dict[str, list] = {k: [] for k in (*names, *pnames, "triad")}
        for r in range(max(1, rounds)):
            order = list(runs)
            order = order[r % len(order):] + order[:r % len(order)]
            for k in order:
                if k in pnames:
                    runs[k].append(petsc(g, python, pnames[k], solves, petsc_memory))
                elif k == "triad":
                    runs[k].append(triad(threads))
                else:
                    ranks, t = layouts[names.index(k)]
                    runs[k].append(ours(g, t, ranks, ("--pages", pages), solves))
        summary = {k: {"iterations": spread([x["iterations"] for x in runs[k]]),
                       "setup_s": spread([x["setup_s"] for x in runs[k]]),
                       "faulted_mb": spread_or_none([faulted_mb(x) for x in runs[k]]),
                       "from_csr_s": spread([from_csr(x) for x in runs[k]]),
                       "solve_s": spread([x["solve_s"] for x in runs[k]]),
                       "total_s": spread([total(x) for x in runs[k]]),
                       "relative_residual": max(x["relative_residual"] for x in runs[k])}
                   for k in (*names, *pnames)}
        ratios = {p: {k: {m: spread([f(o) / f(q) for o, q in zip(runs[k], runs[p])])
                          for m, f in (("setup", lambda x: x["setup_s"]),
                                       ("from_csr", from_csr),
                                       ("solve", lambda x: x["solve_s"]), ("total", total))}
                      for k in names} for p in pnames}
        def later(x: dict) -> float:
            return med([r["setup_s"] for r in x["later"]])

        if solves > 1:
            for k in (*names, *pnames):
                summary[k]["later_setup_s"] = spread([later(x) for x in runs[k]])
            for p in pnames:
                for k in names:
                    ratios[p][k]["later_setup"] = spread([later(o) / later(q) for o, q
                                                          in zip(runs[k], runs[p])])
        rates = {k: {ph: spread([phase_rates(g, o)[ph] for o in runs[k]])
                     for ph in ("spmv", "precond", "vector", "iteration")} for k in names}
        of_triad = {k: {ph: spread([phase_rates(g, o)[ph] / tr
                                    for o, tr in zip(runs[k], runs["triad"])])
                        for ph in ("spmv", "precond", "vector", "iteration")} for k in names}
        res["grids"]["x".join(map(str, g))] = {
            "grid": g, "runs": runs, "summary": summary, "ratios": ratios,
            "achieved_gbs": rates, "of_triad": of_triad, "triad_gbs": spread(runs["triad"])}
    res["table"] = petsc_table(res)
    print(f"\nPoisson to rtol 1e-7, ours against PETSc {version} ICC(0)-CG, rotating order, "
          f"{max(1, rounds)} round(s), ours in {pages} pages, PETSc's memory {petsc_memory}; "
          "median (min-max):\n")
    print("\n".join(res["table"]))
    return res


def petsc_table(res: dict) -> list[str]:
    """compare_petsc's result as markdown table lines (for comparisons/README.md): times
    and ratios, then each pass's achieved bandwidth against the Triad of the same cores."""
    def cell(d: dict | None, f: str = "{:.3f}") -> str:
        if d is None:
            return "-"
        if d["min"] == d["max"]:
            return f.format(d["median"])
        return f"{f.format(d['median'])} ({f.format(d['min'])}-{f.format(d['max'])})"

    lines = ["| problem | solver | iterations | setup (s) | faulted in by the setup (MB) | "
             "setup from the CSR (s) | solve (s) | setup + solve (s) |",
             "|---|---|---|---|---|---|---|---|"]
    names = {k: f"BICCG, {k.replace('x', ' process(es) x ')} thread(s)" for k in res["layouts"]}
    against = {p: f"PETSc {ranks}x1" for p, ranks in res["petsc_layouts"].items()}
    for p, ranks in res["petsc_layouts"].items():
        names[p] = f"PETSc {res['petsc_version']} CG + " + (
            "ICC(0), 1 x 1" if ranks == 1 else f"block Jacobi ICC(0), {ranks} x 1")
    for key, r in res["grids"].items():
        prob = f"Poisson {r['grid'][0]}^3" if len(set(r["grid"])) == 1 else f"Poisson {key}"
        for k, name in names.items():
            s = r["summary"][k]
            lines.append(f"| {prob} | {name} | {cell(s['iterations'], '{:g}')} | "
                         f"{cell(s['setup_s'])} | {cell(s.get('faulted_mb'), '{:.0f}')} | "
                         f"{cell(s['from_csr_s'])} | {cell(s['solve_s'])} | "
                         f"{cell(s['total_s'])} |")
        for p, short in against.items():
            for k in res["layouts"]:
                q = r["ratios"][p][k]
                lines.append(f"| {prob} | {k} / {short}, per round | | "
                             f"{cell(q['setup'], '{:.2f}')} | | "
                             f"{cell(q['from_csr'], '{:.2f}')} | "
                             f"{cell(q['solve'], '{:.2f}')} | "
                             f"{cell(q['total'], '{:.2f}')} |")
    if any("later_setup_s" in s for r in res["grids"].values() for s in r["summary"].values()):
        lines += ["", "Setup of a process's first solve (as above) and of its later ones (their "
                  "memory in place; ours: the arrays the solver kept, PETSc's: a new KSP on "
                  "the memory the last one freed), median (min-max) over rounds of each "
                  "round's median:", "",
                  "| problem | solver | setup, first solve (s) | setup, later solves (s) | "
                  + " | ".join(f"later / {short}, per round" for short in against.values())
                  + " |", "|---|---|---|---|" + "---|" * len(against)]
        for key, r in res["grids"].items():
            prob = f"Poisson {r['grid'][0]}^3" if len(set(r["grid"])) == 1 else f"Poisson {key}"
            for k, name in names.items():
                s = r["summary"][k]
                q = [cell(r["ratios"][p][k]["later_setup"], "{:.2f}") if k in res["layouts"]
                     else "" for p in against]
                lines.append(f"| {prob} | {name} | {cell(s['setup_s'])} | "
                             f"{cell(s['later_setup_s'])} | " + " | ".join(q) + " |")
    lines += ["", "| problem | layout | Triad (GB/s) | SpMV | sweeps | vector updates | "
              "iteration |", "|---|---|---|---|---|---|---|"]
    for key, r in res["grids"].items():
        prob = f"Poisson {r['grid'][0]}^3" if len(set(r["grid"])) == 1 else f"Poisson {key}"
        for k in res["layouts"]:
            gbs, tri = r["achieved_gbs"][k], r["of_triad"][k]
            lines.append(f"| {prob} | {k} | {cell(r['triad_gbs'], '{:.1f}')} | " + " | ".join(
                f"{gbs[ph]['median']:.1f} GB/s, {cell(tri[ph], '{:.2f}')}"
                for ph in ("spmv", "precond", "vector", "iteration")) + " |")
    return lines


def bandwidth(a: argparse.Namespace, out: dict) -> None:
    # 1 + 2: Poisson 128^3, BICCG against Triad, paired in one process
    g = [128, 128, 128]
    rounds = json.loads(subprocess.run(
        [PY, __file__, "--paired-child", "--rounds", str(a.rounds), "--threads", str(a.threads)],
        capture_output=True, text=True, check=True, cwd=ROOT,
        env=os.environ | {"OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}).stdout)
    runs = [x["biccg"] for x in rounds]
    per_it = [x["solve_s"] / x["iterations"] for x in runs]
    from kernels_ext.biccg import DEFAULT_FACTOR

    # the child solves with the default blocking (tiles, swept from copies) on one rank
    model = grid_bytes(g, DEFAULT_FACTOR, swept_copies=True)
    gbs = [model / t / 1e9 for t in per_it]
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
                        "bytes_per_iteration": model, "factor": DEFAULT_FACTOR}


def baselines(a: argparse.Namespace, out: dict) -> None:
    # 1 + 3: iterations and time to 1e-7 against the baselines
    out["baselines"] = {}
    for g in ([64, 64, 64], [128, 128, 128]):
        res: dict[str, list[dict]] = {k: [] for k in ("biccg 1x2", "biccg 2x1", "numba-ic0cg",
                                                      "numba-cg", "scipy-cg")}
        for _ in range(max(1, a.rounds // 2)):
            res["biccg 1x2"].append(ours(g, a.threads))
            res["biccg 2x1"].append(ours(g, 1, ranks=2))
            for m in ("numba-ic0cg", "numba-cg", "scipy-cg"):
                res[m].append(baseline(g, m, a.threads))
        t_ours = med([total(x) for x in res["biccg 1x2"]])
        print(f"\nPoisson {g[0]}x{g[1]}x{g[2]} to 1e-7 (setup + solve, median):")
        for k, xs in res.items():
            t = med([total(x) for x in xs])
            print(f"  {k:12} {xs[0]['iterations']:5d} iterations  {t:8.3f} s  "
                  f"({t / t_ours:5.2f}x ours)")
        nat = res["numba-ic0cg"][0]["iterations"]
        print(f"  multicolor / natural-order IC(0) iterations: "
              f"{res['biccg 1x2'][0]['iterations'] / nat:.2f}")
        out["baselines"]["x".join(map(str, g))] = res



def full(a: argparse.Namespace, out: dict) -> None:
    # 5: the study's problem
    g = [256, 256, 512]
    rec = ours(g, a.threads)
    per_it = rec["solve_s"] / rec["iterations"]
    print(f"\nPoisson 256x256x512 (n = {rec['n']:,}), {a.threads} threads: "
          f"{rec['iterations']} iterations, setup {rec['setup_s']:.1f} s, solve "
          f"{rec['solve_s']:.1f} s, relative residual {rec['relative_residual']:.2e}, "
          f"peak memory {rec['peak_rss_bytes'] / 2**30:.1f} GiB, effective "
          f"{record_bytes(g, rec) / per_it / 1e9:.1f} "
          "GB/s")
    out["full"] = rec


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--full", action="store_true",
                   help="also solve 256 x 256 x 512 (the section 'full' of --only)")
    p.add_argument("--petsc", action=argparse.BooleanOptionalAction, default=True,
                   help="compare with PETSc's ICC(0)-CG where petsc4py can be imported "
                        "(default: on)")
    p.add_argument("--petsc-python", default=SYSTEM_PY,
                   help=f"the interpreter with petsc4py (default {SYSTEM_PY})")
    p.add_argument("--petsc-grid", type=int, nargs=3, action="append",
                   metavar=("NX", "NY", "NZ"),
                   help="the PETSc comparison's grids, repeatable (default 64^3 and 128^3)")
    p.add_argument("--solves", type=int, default=3,
                   help="solves a process in the PETSc comparison (default 3): the first's "
                        "times are its tables', the later ones' setups a table of their own")
    p.add_argument("--pages", choices=PAGES, default=DEFAULT_PAGES,
                   help="our solver's pages in the PETSc comparison (its --pages; default "
                        "huge, the solver's): base where huge pages fault in slowly "
                        "(comparisons/README.md, \"Huge pages or base pages\")")
    p.add_argument("--petsc-memory", choices=PETSC_MEMORY, default=PETSC_DEFAULT_MEMORY,
                   help="petsc_icc_cg.py's --memory (default fresh; its --help says what "
                        "each means)")
    p.add_argument("--only", action="append", choices=SECTIONS,
                   help="run only this section (repeatable)")
    p.add_argument("--out", type=Path, help="write everything measured as JSON here")
    p.add_argument("--paired-child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.solves < 1:
        p.error("--solves must be at least 1")
    if a.paired_child:
        paired_child(a.rounds, a.threads)
        return 0
    run = set(a.only or ({"bandwidth", "baselines", "petsc"} | ({"full"} if a.full else set())))
    if not a.petsc:
        run.discard("petsc")
    out: dict = {}

    if "bandwidth" in run:
        bandwidth(a, out)
    if "baselines" in run:
        baselines(a, out)
    if "petsc" in run:
        out["petsc"] = compare_petsc(a.petsc_grid or [[64, 64, 64], [128, 128, 128]],
                                     a.rounds, a.threads, a.petsc_python, a.solves, a.pages,
                                     a.petsc_memory)
    if "full" in run:
        full(a, out)
    if a.out:
        a.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
