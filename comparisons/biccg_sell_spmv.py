"""The solver's SpMV beside the same product on A in SELL-8, rows in AVX-512 lanes (issue 53).

The sweeps read L and U, not A, so A's storage is the SpMV's alone to choose. SELL-8 stores
8 consecutive rows slot by slot, so that a slot's values and columns load whole and x is
gathered: rows vectorized where the sweeps' lanes could not be (comparisons/README.md, "The
sweeps vectorized across blocks"). biccg_sell_spmv.c measures it on the solver's own
ordering (tiles of the grid, 20 colors): one process per grid and thread count, bc_spmv and
the SELL product alternating, each after a flush of twice the last-level cache and again at
once ("warm"), medians; y must be the same bits (each row's sum in its order). Where the
compiler has no AVX-512 a line says so.

    python comparisons/biccg_sell_spmv.py --grid 64 64 64 --grid 128 128 128 --rounds 15
"""

from __future__ import annotations

import sys

from biccg_lanes import spmv_table  # comparisons/ is on sys.path: these run as scripts


def main() -> int:
    return spmv_table(__doc__, "biccg_sell_spmv.c", "SELL-8", "sell",
                      "no AVX-512 here: SELL-8 not measured",
                      ("padding", lambda r: f"{r['padding']:.3f}"))


if __name__ == "__main__":
    sys.exit(main())
