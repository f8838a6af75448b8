"""The solver's SpMV beside the same product a tile at a time, as the sweeps run (issue 53).

The sweeps took 0.65 of their time once a block that is a 4 x 4 x 2 tile of a 7-point grid
ran as one list of its entries to other blocks and an unrolled recurrence inside it
(comparisons/README.md, "The sweeps a block at a time"). biccg_tile_spmv.c measures the
same shape for the SpMV, on the solver's own ordering and factor (tiles of the grid, 20
colors): A's entries to other blocks beside the sweeps' own lists (their columns and row
bytes), A's values inside a tile as one record of 160, the product inside unrolled at
constant offsets (no column read for two entries in three). One process per grid and
thread count, bc_spmv and the tile product alternating, each after a flush of twice the
last-level cache and again at once ("warm"), medians. Each row sums in the CSR's order:
built with -ffp-contract=off y is the same bits; with these flags it differs by rounding
(the last column).

    python comparisons/biccg_tile_spmv.py --grid 64 64 64 --grid 128 128 128 --rounds 15
"""

from __future__ import annotations

import sys

from biccg_lanes import spmv_table  # comparisons/ is on sys.path: these run as scripts


def main() -> int:
    return spmv_table(__doc__, "biccg_tile_spmv.c", "tiles", "tile",
                      "a row is not lower, diagonal, upper",
                      ("matrix bytes read: CSR, tiles (MB); y's difference",
                       lambda r: f"{r['csr_bytes'] / 1e6:.0f}, {r['tile_bytes'] / 1e6:.0f}; "
                                 f"{r['max_rel_diff']:.1e}"))


if __name__ == "__main__":
    sys.exit(main())
