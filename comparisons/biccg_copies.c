/*
 * biccg_copies.c - the blocks the solver's sweeps run from copies (ic0.c,
 * pack_sweeps), counted from its own setup: the oracle of
 * kernels_ext.biccg.tile_copies (tests/test_memory_tiers.py).
 *
 * NX NY NZ RANKS: the 7-point Poisson grid's rows split as
 * kernels_ext.biccg.partition splits them, each rank's part ordered (tiles
 * 4 x 4 x 2 of blocks of 32, 20 colors) and factored alone, as bc_solve sets
 * it up (biccg_bench.h, poisson_setup_rows).  Prints one JSON line, all ranks
 * together: the copied blocks' rows, their entries inside the rank (64 of L
 * and 64 of U a tile, and the lists to other blocks) and their entries to
 * rows of other ranks (in A, not in the factor).
 */
#include "biccg_bench.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s NX NY NZ RANKS\n", argv[0]);
        return 2;
    }
    const bc_gidx nx = atol(argv[1]), ny = atol(argv[2]), nz = atol(argv[3]), n = nx * ny * nz;
    const int ranks = atoi(argv[4]);
    if (nx < 1 || ny < 1 || nz < 1 || ranks < 1 || ranks > n) {
        fprintf(stderr, "error: bad sizes\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    bc_params p = {.block_size = 32, .colors = 20, .grid = {nx, ny, nz}, .tile = {4, 4, 2}};
    int64_t rows = 0, inside = 0, outside = 0;
    int rc = 0;
    for (int r = 0; r < ranks && rc == 0; r++) {
        bc_local L;
        rc = poisson_setup_rows(nx, ny, nz, n * r / ranks, n * (r + 1) / ranks, &p, 1, &L);
        for (int b = 0; rc == 0 && b < L.nblocks; b++) {
            if (L.tpos[b] < 0)
                continue;
            rows += L.bstart[b + 1] - L.bstart[b];
            inside += 128 + (L.fptr[b + 1] - L.fptr[b]) + (L.bptr[b + 1] - L.bptr[b]);
            for (int i = L.bstart[b]; i < L.bstart[b + 1]; i++)
                for (int64_t k = L.rowptr[i]; k < L.rowptr[i + 1]; k++)
                    outside += L.col[k] >= L.nloc;
        }
        bc_local_free(&L);
    }
    MPI_Finalize();
    if (rc != 0) /* poisson_setup_rows said why */
        return rc;
    printf("{\"rows\": %lld, \"entries\": %lld, \"to_other_ranks\": %lld}\n", (long long)rows,
           (long long)inside, (long long)outside);
    return 0;
}
