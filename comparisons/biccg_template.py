"""The sweeps' two passes run other ways (a prototype, issue 53) beside the solver's.

biccg_template.c times, in one process per grid and thread count, the solver's
bc_precond against five variants on its own ordering and single-precision factor (tiles
of 4 x 4 x 2, 20 colors): the second pass unrolled for a 4 x 4 x 2 tile's stencil
("unrolled"); that and each tile's first pass a face at a time ("faces"); that and every
block's first pass one loop over a list of its entries to other blocks ("flat +
unrolled"); both passes over such lists ("flat"); and the unrolled second pass with no
first pass at all (a bound, its z wrong). Calls alternate, each after a flush of twice
the last-level cache and again at once ("warm"); medians, each variant's time over the
solver's, and the largest difference of its z from the solver's: rounding, where GCC
fuses a multiply-add the solver's loop leaves apart (none with -ffp-contract=off).

    python comparisons/biccg_template.py --grid 64 64 64 --grid 128 128 128 --rounds 9
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from biccg_kernels import build  # comparisons/ is on sys.path: these run as scripts
from biccg_lanes import FLAGS, each_run, tile_args

#: the variants in the driver's order: its record's key, the table's name
VARIANTS = (("unrolled", "unrolled"), ("faces", "faces"),
            ("flat_unrolled", "flat + unrolled"), ("flat", "flat"),
            ("no_first", "unrolled, no first pass (z wrong)"))


def main() -> int:
    a, tile = tile_args(__doc__, 9)
    names = " | ".join(f"{name} (ms, / solver's)" for _, name in VARIANTS)
    print(f"| grid | threads | tiles unrolled, by faces | solver's (ms) | {names} | "
          "warm: solver's, flat + unrolled (ms) | z's largest difference |")
    print("|---|---|---|---:|" + "---|" * len(VARIANTS) + "---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "template"
        build(a.cc, FLAGS, exe, "biccg_template.c")
        for grid, t, r in each_run(exe, a, tile, "the tile is not 4 x 4 x 2"):
            cells = " | ".join(f"{r[k + '_ms']:.2f} ({r[k + '_ms'] / r['precond_ms']:.2f})"
                               for k, _ in VARIANTS)
            diff = max(r[k + "_z_diff"] for k, _ in VARIANTS[:4])
            print(f"| {grid} | {t} | {r['matched']}, {r['faced']} of {r['blocks']} | "
                  f"{r['precond_ms']:.2f} | "
                  f"{cells} | {r['precond_warm_ms']:.2f}, {r['flat_unrolled_warm_ms']:.2f} | "
                  f"{diff:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
