"""``python -m burstbench.benchmarks.storage.replicate``: one Gfarm replication, timed.

The Gfarm-on-Azure slides (test 5) timed ``gfrep`` of one 7.8 GB file between two VMs.
Here a file of ``--size`` bytes is registered on one I/O node (gfreg; not timed), then a
second replica is made on another node (``gfrep -N 2``), timed, and checked with gfwhere;
the file is removed at the end, whatever happened.  One JSON line: operation "replicate",
seconds, bytes, bandwidth_mib_s, from and to (the I/O nodes).  A command that fails is one
line on stderr and exit status 5.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

MIB = 1 << 20


class Failed(Exception):
    """A Gfarm command failed; the message is one line."""


def gf(*argv: str, timeout: float = 600) -> str:
    """Run a Gfarm command; its stdout, or Failed with its message."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Failed(f"{argv[0]}: {exc}") from exc
    if proc.returncode != 0:
        text = (proc.stderr or proc.stdout).strip().splitlines()
        raise Failed(f"{' '.join(argv[:2])}: {text[-1] if text else f'exit {proc.returncode}'}")
    return proc.stdout


def replicate(folder: str, name: str, size: int) -> dict:
    """Register `size` bytes as folder/name, replicate it to a second node, time that."""
    path = f"{folder.rstrip('/')}/{name}"
    with tempfile.NamedTemporaryFile(prefix="burstbench-gfrep-") as tmp:
        chunk = os.urandom(MIB)
        for _ in range(size // MIB):
            tmp.write(chunk)
        tmp.write(chunk[:size % MIB])
        tmp.flush()
        gf("gfreg", tmp.name, path)
    try:
        before = gf("gfwhere", path).split()
        start = time.monotonic()
        gf("gfrep", "-q", "-N", "2", path)
        seconds = time.monotonic() - start
        after = gf("gfwhere", path).split()
        to = [h for h in after if h not in before]
        if not to:
            raise Failed(f"gfrep made no second replica of {path} (replicas: {' '.join(after)}"
                         "; is a second I/O node up?)")
        return {"operation": "replicate", "api": "gfarm", "access": "replication",
                "seconds": seconds, "bytes": size, "bandwidth_mib_s": size / seconds / MIB,
                "from": before[0], "to": to[0], "path": path}
    finally:
        subprocess.run(["gfrm", "-f", path], capture_output=True, timeout=120)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m burstbench.benchmarks.storage.replicate",
                                description=__doc__.split("\n\n")[1])
    p.add_argument("--path", required=True, help="gfarm:///folder")
    p.add_argument("--name", required=True, help="the file's name in it")
    p.add_argument("--size", type=int, required=True, help="bytes")
    args = p.parse_args(argv)
    try:
        print(json.dumps(replicate(args.path, args.name, args.size)))
    except Failed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 5
    return 0


if __name__ == "__main__":
    sys.exit(main())
