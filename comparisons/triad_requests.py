"""Where a Triad sweep's seconds went, request by request, from a run folder's triad.jsonl.

A served sweep (burstbench.core.servers) sends each setting's process one request per
repetition. This prints, per implementation, for its processes' first requests (start,
first touch) and for the later ones apart:

- how many, and the medians of their wall seconds (from one request's start to the next
  one's), of their timed seconds (the kernels' passes), of their first passes (which
  STREAM's statistics leave out) and of the rest (untimed: start, touch, doubling, check);
- the sweep's requests in the order measured, one token per setting (blocks show as runs
  of a few settings);
- the median seconds of each pass over the four kernels, per configuration.

    .venv/bin/python comparisons/triad_requests.py data/runs/local/<run-id> [another run]

The last request has no next start: its wall seconds are left out.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path


def requests(run: Path) -> list[dict]:
    """One dict per request, in the order measured: its records and what they timed."""
    by: dict[tuple, list[dict]] = defaultdict(list)
    for line in (run / "triad.jsonl").read_text().splitlines():
        r = json.loads(line)
        by[(r["started"], r["impl"], r["variant"], r["affinity_label"])].append(r)
    out, seen = [], set()
    for (started, impl, variant, label), recs in sorted(by.items()):
        setting = f"{variant}+{label}"
        out.append({"impl": impl, "setting": setting, "started": started, "records": recs,
                    "later": setting in seen,
                    "timed": sum(sum(r["times_s"]) for r in recs),
                    "first": sum(r["times_s"][0] for r in recs)})
        seen.add(setting)
    for a, b in zip(out, out[1:]):
        a["wall"] = b["started"] - a["started"]
    return out


def report(run: Path) -> None:
    reqs = requests(run)
    print(f"{run}: {len(reqs)} requests")
    print("| impl | requests | n | wall s | timed s | first pass s | untimed s |")
    print("|---|---|---|---|---|---|---|")
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in reqs[:-1]:
        groups[(r["impl"], r["later"])].append(r)
    for (impl, later), rs in sorted(groups.items()):
        med = {k: statistics.median(r[k] for r in rs) for k in ("wall", "timed", "first")}
        untimed = statistics.median(r["wall"] - r["timed"] for r in rs)
        print(f"| {impl} | {'later' if later else 'first'} | {len(rs)} | {med['wall']:.2f} | "
              f"{med['timed']:.2f} | {med['first']:.2f} | {untimed:.2f} |")
    wall = sum(r["wall"] for r in reqs[:-1])
    timed = sum(r["timed"] for r in reqs[:-1])
    print(f"all but the last: {wall:.1f} s, {timed:.1f} s timed ({timed / wall:.3f}), first "
          f"passes {sum(r['first'] for r in reqs[:-1]):.1f} s")
    tokens = {s: str(i) for i, s in enumerate(dict.fromkeys(r["setting"] for r in reqs))}
    print("order of settings:", " ".join(tokens[r["setting"]] for r in reqs))
    passes: dict[tuple, list[list[float]]] = defaultdict(list)
    for r in reqs:
        per: dict[tuple, list[dict]] = defaultdict(list)
        for rec in r["records"]:
            per[(rec["impl"], rec["threads"], rec["stores"])].append(rec)
        for key, recs in per.items():
            passes[key].append([sum(x) for x in zip(*(rec["times_s"] for rec in recs))])
    for key, rows in sorted(passes.items()):
        meds = [statistics.median(col) for col in zip(*rows)]
        print(f"  {key}: pass seconds " + " ".join(f"{m:.3f}" for m in meds))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run folders with a triad.jsonl")
    for run in ap.parse_args().runs:
        report(run)


if __name__ == "__main__":
    main()
