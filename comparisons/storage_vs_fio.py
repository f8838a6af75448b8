"""Our storage kernel beside fio: sequential write and read with direct I/O, side by side.

Ours: ``mpiexec -n N python -m kernels_ext.storage --direct --fsync --file-per-process
--transfer-size 1M --block-size SIZE --operations write --keep`` (fsync inside the timed write
phase), then ``--operations read`` of those files (O_DIRECT, every byte checked); fio: ``fio
--direct=1 --ioengine=psync --bs=1m --end_fsync=1 --rw=write`` then ``--rw=read`` of the files
it wrote, ``--numjobs=N`` (a file per job), the same size per process.  Each tool writes and
reads in two processes with --pause seconds between, so that neither reads while the
hypervisor still writes back what the other just wrote.  Rounds alternate which goes first
(ours, fio; fio, ours; ...); the table gives medians of GB/s (1e9 B/s) and of the per-round
ratios ours/fio.

    .venv/bin/python comparisons/storage_vs_fio.py --dir /tmp --size 1G --rounds 5 --jobs 1,2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def ours(folder: Path, jobs: int, size: str, pause: float) -> dict[str, float]:
    """GB/s of our write (fsync inside) and read phases, and the read's check share."""
    base = [str(BIN / "mpiexec"), "-n", str(jobs), sys.executable, "-m", "kernels_ext.storage",
            "--path", str(folder), "--direct", "--fsync", "--file-per-process",
            "--transfer-size", "1M", "--block-size", size]
    recs = {}
    for op in ("write", "read"):
        proc = subprocess.run(base + ["--operations", op, *(["--keep"] if op == "write" else [])],
                              capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            sys.exit(f"ours failed ({proc.returncode}): {proc.stderr.strip()}")
        recs[op] = json.loads(proc.stdout)
        time.sleep(pause if op == "write" else 0)
    assert recs["read"]["cache"] == "direct" and recs["read"]["validated"]
    return {"write": recs["write"]["bandwidth_gbs"], "read": recs["read"]["bandwidth_gbs"],
            "check_share": recs["read"]["check_s"] / recs["read"]["total_s"],
            "check_wait_share": recs["read"]["check_wait_s"] / recs["read"]["total_s"]}


def fio(folder: Path, jobs: int, size: str, pause: float) -> dict[str, float]:
    """GB/s of fio's write (end_fsync) then read of the same files, direct, psync, 1 MiB."""
    out = {}
    for rw in ("write", "read"):
        cmd = ["fio", "--name=x", f"--directory={folder}", "--direct=1", "--ioengine=psync",
               "--bs=1m", "--end_fsync=1", f"--rw={rw}", f"--size={size}",
               f"--numjobs={jobs}", "--group_reporting", "--output-format=json"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"fio failed ({proc.returncode}): {proc.stderr.strip()}")
        out[rw] = json.loads(proc.stdout)["jobs"][0][rw]["bw_bytes"] / 1e9
        time.sleep(pause if rw == "write" else 0)
    for f in folder.iterdir():
        f.unlink()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp", help="folder on the disk to measure (/tmp)")
    ap.add_argument("--size", default="1G", help="bytes per process (1G)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", default="1,2", help="processes: ranks and fio jobs (1,2)")
    ap.add_argument("--pause", type=float, default=1.0,
                    help="seconds between each tool's write and its read (1)")
    ap.add_argument("--out", help="write every round's numbers here as JSON")
    args = ap.parse_args()
    if shutil.which("fio") is None:
        sys.exit("fio is not installed (apt-get install fio)")
    rows, raw = [], []
    for jobs in (int(j) for j in args.jobs.split(",")):
        got: dict[str, list] = {"ours": [], "fio": []}
        for r in range(args.rounds):
            with tempfile.TemporaryDirectory(dir=args.dir, prefix="storage-vs-fio-") as tmp:
                order = ("ours", "fio") if r % 2 == 0 else ("fio", "ours")
                for who in order:
                    t0 = time.perf_counter()
                    res = (ours if who == "ours" else fio)(Path(tmp), jobs, args.size,
                                                           args.pause)
                    got[who].append(res)
                    raw.append({"jobs": jobs, "round": r, "who": who, **res,
                                "seconds": time.perf_counter() - t0})
                    print(f"jobs {jobs} round {r} {who}: write {res['write']:.3f} GB/s, read "
                          f"{res['read']:.3f} GB/s", flush=True)
        for op in ("write", "read"):
            o = [x[op] for x in got["ours"]]
            f = [x[op] for x in got["fio"]]
            rows.append((jobs, op, statistics.median(o), min(o), max(o), statistics.median(f),
                         min(f), max(f), statistics.median(a / b for a, b in zip(o, f)),
                         statistics.median(o) / statistics.median(f)))
        share = statistics.median(x["check_share"] for x in got["ours"])
        wait = statistics.median(x["check_wait_share"] for x in got["ours"])
        print(f"jobs {jobs}: our read's data check took {share:.1%} of its time on its "
              f"thread, of which the read waited {wait:.2%} (medians)")
    print(f"\n{args.rounds} rounds, {args.size} per process, {args.dir} "
          f"({os.uname().nodename}), 1 MiB transfers, O_DIRECT, {args.pause:g} s between "
          "write and read\n")
    print("| jobs | op | ours GB/s median (min-max) | fio GB/s median (min-max) | "
          "median of ratios | ratio of medians |")
    print("|---|---|---|---|---|---|")
    for j, op, om, olo, ohi, fm, flo, fhi, rat, rom in rows:
        print(f"| {j} | {op} | {om:.3f} ({olo:.3f}-{ohi:.3f}) | {fm:.3f} ({flo:.3f}-{fhi:.3f}) "
              f"| {rat:.3f} | {rom:.3f} |")
    if args.out:
        Path(args.out).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
