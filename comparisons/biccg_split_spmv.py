"""The solver's SpMV beside the same product on A stored in the factor's pattern (issue 53).

An earlier session named, as the setup's next step, a storage of A that is not a second
copy: its strict lower values aligned with L's columns, its diagonal, its strict upper
values aligned with U's, so that the setup places no columns or row pointers of its own
(75 MB less fresh memory at 128^3) and the SpMV reads the sweeps' indices.
biccg_split_spmv.c measures what that costs the SpMV, on the solver's own ordering and
factor (tiles of the grid, 20 colors): one process per grid and thread count, bc_spmv and
the split product alternating, each after a flush of twice the last-level cache and again
at once ("warm"), medians; y must be the same bits (the sums run in the same order).

    python comparisons/biccg_split_spmv.py --grid 64 64 64 --grid 128 128 128 --rounds 15
"""

from __future__ import annotations

import sys

from biccg_lanes import spmv_table  # comparisons/ is on sys.path: these run as scripts


def main() -> int:
    return spmv_table(__doc__, "biccg_split_spmv.c", "split", "split",
                      "a row is not lower, diagonal, upper",
                      ("A's storage: CSR, split (MB)",
                       lambda r: f"{r['csr_bytes'] / 1e6:.0f}, {r['split_bytes'] / 1e6:.0f}"))


if __name__ == "__main__":
    sys.exit(main())
