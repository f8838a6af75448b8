"""Where BICCG's setup spends its time, phase by phase (issue 53).

Builds biccg_setup_profile.c with the solver's sources compiled -DBC_PROFILE (the
BC_PHASE timers in kernels_ext/biccg/src print each phase's seconds to stderr, and a
digest of what the setup built: the same digest before and after a change shows the
ordering, matrix, prefetch plan and factor bitwise unchanged), then runs it --rounds
times per grid, one fresh process each (the setup's pages are new to its process, as
in a real run), and prints each phase's median and range.

With --base REF, the solver's sources at git revision REF are built too, and the two
run alternately (which goes first alternates by round): each build's phases, the
per-round ratio of the setups' sums (this tree over REF), and both digests.  The digest
counts U as the sweeps read it since 432767a: against an older REF the digests differ
whatever the setup builds.

With --iterations N the same processes then solve (at most N iterations, tol 1e-7), and
the solve's times are printed too (SpMV, preconditioner, vector updates, dots), with REF
their per-round ratios: a change to the iteration measured side by side with its base.
The sweeps prefetch what they gather as the solver decides (where the node's vector exceeds
this machine's last-level cache); BC_SWEEP_PREFETCH=1 (or 0) in the environment forces it
on (off) in builds that have it, and BC_SPMV_NTA=1 (or 0) the SpMV's prefetch non-temporal
(ordinary; unset: by the CPU, as the solver decides). --pages base places the solver's
arrays in base pages (BC_BASE_PAGES=1 to the driver), as its --pages does. --blocking rows
takes blocks of 32 consecutive rows, the study's blocking, instead of tiles of the grid.
--setup later profiles each process's second setup (two solves in it, the second's phases
and solve printed): a job's later setups, on the arrays the solver kept from the first (its
pool), not on fresh pages.

    python comparisons/biccg_setup_profile.py --grid 128 128 128 --threads 2 --rounds 5
    python comparisons/biccg_setup_profile.py --grid 128 128 128 --ranks 2 --threads 1
    python comparisons/biccg_setup_profile.py --grid 128 128 128 --base HEAD --rounds 9
    python comparisons/biccg_setup_profile.py --base HEAD --iterations 10000 --rounds 7
    python comparisons/biccg_setup_profile.py --base HEAD --pages base --rounds 9
    python comparisons/biccg_setup_profile.py --base HEAD --iterations 10000 --blocking rows
    python comparisons/biccg_setup_profile.py --ranks 2 --threads 1 --setup later --rounds 7
    python comparisons/biccg_setup_profile.py --base HEAD --iterations 10000 --pause 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from biccg_kernels import (  # comparisons/ is on sys.path: these run as scripts
    HERE,
    SRC,
    build,
    driver_env,
    mpi_prefix,
)

from kernels_ext.biccg import DEFAULT_PAGES, PAGES

FLAGS = "-O3 -march=native -fopenmp -std=gnu99 -DBC_PROFILE"
DRIVER = "biccg_setup_profile.c"


def checkout(ref: str, into: Path) -> Path:
    """The solver's sources and this driver at git revision ref, under into/; returns the
    driver's path (the sources beside it in into/src)."""
    root = HERE.parent
    for rel in [*(p.relative_to(root) for p in sorted(SRC.glob("*.[ch]"))),
                Path("comparisons") / DRIVER]:
        proc = subprocess.run(["git", "-C", str(root), "show", f"{ref}:{rel.as_posix()}"],
                              capture_output=True)
        if proc.returncode != 0:
            sys.exit(f"error: git show {ref}:{rel}: {proc.stderr.decode().strip()}")
        dest = into / ("src" if rel.parent.name == "src" else "") / rel.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(proc.stdout)
    return into / DRIVER


#: the driver's blockings: tiles of the grid (the solver's for a grid), or runs of 32
#: consecutive rows (the study's, which passes no grid)
BLOCKINGS = ("tiles", "rows")

#: which setup of a process is profiled: its first (on pages new to it) or its second
SETUPS = ("first", "later")

#: the first phase each setup prints (cg.c): where a process's second setup begins
FIRST_PHASE = "input check"

#: the solve's times that --iterations reports, from the driver's JSON line
SOLVE_KEYS = ("solve_s", "spmv_s", "precond_s", "vector_s", "dots_s")


def run_once(exe: Path, grid: list[int], threads: int, ranks: int = 1,
             iterations: int = 0, pages: str = DEFAULT_PAGES, blocking: str = "tiles",
             setup: str = "first") -> tuple[dict[str, float], str, dict]:
    """One fresh process (or `ranks` of them): rank 0's phases' seconds, every rank's
    digest lines, sorted, each once, and joined (each rank prints its own a setup), and
    the driver's record (its solve's times where iterations > 0); blocks as `blocking`
    says (BLOCKINGS); the process's first setup, or with setup "later" its second (two
    solves: the second's phases and record; both setups' digests, one line a rank where
    the second built what the first did)."""
    env = driver_env(threads) | {"BC_BASE_PAGES": str(int(pages == "base"))}
    argv = [*mpi_prefix(ranks, threads), str(exe), *map(str, grid), str(threads),
            str(iterations), "0", str(int(blocking == "rows")), str(SETUPS.index(setup) + 1)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    phases: dict[str, float] = {}
    digests = []
    for line in proc.stderr.splitlines():
        if line.startswith("phase "):
            name, secs, _ = line[6:].rsplit(None, 2)  # "phase NAME SECONDS s"
            if name.strip() == FIRST_PHASE and FIRST_PHASE in phases:
                phases = {}  # the next setup begins
            phases[name.strip()] = phases.get(name.strip(), 0.0) + float(secs)
        elif line.startswith("digest "):
            digests.append(line)
    return phases, "\n  ".join(sorted(set(digests))), record


def summary(label: str, runs: list[dict[str, float]]) -> list[float]:
    """Print each phase's median (min-max) over runs; returns each run's sum."""
    names = list(dict.fromkeys(k for r in runs for k in r))
    totals = [sum(r.values()) for r in runs]
    print(f"{label}; seconds, median (min-max):")
    for name, xs in [*((k, [r.get(k, 0.0) for r in runs]) for k in names),
                     ("setup (sum)", totals)]:
        print(f"  {name:28} {statistics.median(xs):.4f} ({min(xs):.4f}-{max(xs):.4f})")
    return totals


def solve_summary(records: dict[str, list[dict]], base: str | None) -> None:
    """Each build's solve times, medians (min-max) over its runs, and with a base the
    per-round ratios (this tree over base)."""
    for label, recs in records.items():
        its = sorted({r["iterations"] for r in recs})
        print(f"solve, {label} ({'/'.join(map(str, its))} iterations); seconds, median (min-max):")
        for key in SOLVE_KEYS:
            xs = [r[key] for r in recs]
            print(f"  {key[:-2]:28} {statistics.median(xs):.4f} ({min(xs):.4f}-{max(xs):.4f})")
    if base:
        for key in SOLVE_KEYS[:3]:
            ratios = [x[key] / y[key] for x, y in zip(records["this tree"], records[base],
                                                      strict=True) if y[key] > 0]
            if ratios:
                print(f"{key[:-2]}, this tree / {base}, per round: median "
                      f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cc", default=str(Path(sys.executable).parent / "mpicc"))
    p.add_argument("--grid", type=int, nargs=3, default=[128, 128, 128])
    p.add_argument("--threads", type=int, default=2, help="threads per rank")
    p.add_argument("--ranks", type=int, default=1,
                   help="MPI ranks (the venv's mpiexec, each bound to its threads' cores); "
                        "rank 0's phases are printed")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--base", metavar="REF",
                   help="also build the solver at git revision REF and alternate with it")
    p.add_argument("--iterations", type=int, default=0, metavar="N",
                   help="also solve, at most N iterations (tol 1e-7), and print the solve's "
                        "times: SpMV, preconditioner, vector updates, dots (default 0: the "
                        "setup only)")
    p.add_argument("--pages", choices=PAGES, default=DEFAULT_PAGES,
                   help="the kind of pages the solver's arrays are placed in (its --pages; "
                        f"default {DEFAULT_PAGES})")
    p.add_argument("--blocking", choices=BLOCKINGS, default="tiles",
                   help="blocks of 32: tiles of the grid (the default, the solver's for a "
                        "grid) or runs of consecutive rows (the study's blocking)")
    p.add_argument("--setup", choices=SETUPS, default="first",
                   help="profile each process's first setup (its pages new to it: the "
                        "default) or its second, on the arrays the solver kept")
    p.add_argument("--pause", type=float, default=0.0, metavar="S",
                   help="sleep S seconds before each process (default 0): where the host "
                        "takes freed memory back (a balloon's free page reporting), a few "
                        "seconds hand it back, and a first setup then meets fresh huge pages "
                        "as a job's first process does (comparisons/biccg_pages.py's --pause)")
    a = p.parse_args()
    if a.rounds < 1 or a.threads < 1 or a.ranks < 1 or min(a.grid) < 1 or a.iterations < 0:
        p.error("--rounds, --threads, --ranks and the grid's sizes must be positive, "
                "--iterations not negative")
    if not a.pause >= 0:
        p.error("--pause must be a number of seconds, not negative")
    with tempfile.TemporaryDirectory() as tmp:
        exes = {"this tree": Path(tmp) / "now"}
        build(a.cc, FLAGS, exes["this tree"], DRIVER)
        if a.base:
            exes[a.base] = Path(tmp) / "base"
            driver = checkout(a.base, Path(tmp) / "at-base")
            if a.pages == "base" and "BC_BASE_PAGES" not in driver.read_text():
                sys.exit(f"error: --pages base: the driver at {a.base} cannot ask for base pages "
                         "(it predates BC_BASE_PAGES), so its runs would be in huge pages")
            if a.blocking == "rows" and "ROWS" not in driver.read_text():
                sys.exit(f"error: --blocking rows: the driver at {a.base} has no row runs")
            if a.setup == "later" and "SOLVES" not in driver.read_text():
                sys.exit(f"error: --setup later: the driver at {a.base} runs one solve a "
                         "process")
            build(a.cc, FLAGS, exes[a.base], driver, driver.parent / "src")
        runs: dict[str, list[dict[str, float]]] = defaultdict(list)
        digests: dict[str, set[str]] = defaultdict(set)
        records: dict[str, list[dict]] = defaultdict(list)
        for r in range(a.rounds):
            for label in (list(exes) if r % 2 == 0 else list(exes)[::-1]):
                time.sleep(a.pause)
                phases, digest, record = run_once(exes[label], a.grid, a.threads, a.ranks,
                                                  a.iterations, a.pages, a.blocking, a.setup)
                runs[label].append(phases)
                digests[label].add(digest)
                records[label].append(record)
    where = (f"Poisson {'x'.join(map(str, a.grid))}, {a.ranks} rank(s) x {a.threads} thread(s), "
             f"{a.rounds} fresh runs, {a.setup} setup, {a.pages} pages, blocks: {a.blocking}")
    totals = {label: summary(f"{where}, {label}", runs[label]) for label in exes}
    if a.base and min(totals[a.base]) > 0:  # a tiny grid's phases print as 0.0000 s
        ratios = [x / y for x, y in zip(totals["this tree"], totals[a.base], strict=True)]
        print(f"setup, this tree / {a.base}, per round: median {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f})")
    if a.iterations:
        solve_summary(records, a.base)
    for label in exes:
        print(f"{label}:", *sorted(digests[label]), sep="\n  ")
    if a.base and digests["this tree"] != digests[a.base]:
        print("the digests differ: the setup no longer builds the same bytes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
