"""`burstbench report` and the light commands of several checkouts, side by side.

Each checkout is a clone with its own `.venv` (`make install` done there); every round runs
the same commands in each, in turn, the order rotated each round (this VM's speed drifts
over minutes).  Printed: per checkout and command, the median wall time over rounds, min-max,
and the ratio of medians to the first checkout's.

    git clone . /tmp/a && git -C /tmp/a checkout 040d259 && make -C /tmp/a install
    .venv/bin/python comparisons/report_rebuild.py /tmp/a /tmp/b . --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

COMMANDS = {"report": ["-m", "burstbench", "report"],  # --figures-dir added per run
            "--help": ["-m", "burstbench", "--help"],
            "params": ["-m", "burstbench", "params", "papermill_params/local.yaml"]}


def timed(checkout: Path, name: str, scratch: Path) -> float:
    """Seconds of one command in `checkout`; a failure stops the comparison."""
    argv = [str(checkout / ".venv" / "bin" / "python"), *COMMANDS[name]]
    if name == "report":
        argv += ["--figures-dir", str(scratch / f"{checkout.name}-figures")]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=checkout, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"{checkout}: {' '.join(argv[1:])} failed: {proc.stderr[-500:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkouts", nargs="+", type=Path, help="clones, each with its .venv")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    checkouts = [c.resolve() for c in args.checkouts]
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="report-rebuild-") as tmp:
        for r in range(args.rounds):
            order = checkouts[r % len(checkouts):] + checkouts[:r % len(checkouts)]
            for c in order:
                for name in COMMANDS:
                    t = timed(c, name, Path(tmp))
                    times.setdefault((str(c), name), []).append(t)
                    print(f"round {r} {c} {name}: {t:.2f} s", flush=True)
    print(f"\n{args.rounds} rounds, order rotated each round\n")
    print("| checkout | command | median (s) | min-max (s) | against the first |")
    print("|---|---|---|---|---|")
    for name in COMMANDS:
        base = statistics.median(times[(str(checkouts[0]), name)])
        for c in checkouts:
            t = times[(str(c), name)]
            med = statistics.median(t)
            print(f"| {c} | {name} | {med:.2f} | {min(t):.2f}-{max(t):.2f} | "
                  f"{med / base:.2f}x |")


if __name__ == "__main__":
    main()
