/*
 * biccg_tile_spmv.c - the solver's SpMV (bc_spmv, A's copy in CSR: rowptr,
 * col, val) beside the same product a block at a time where the block is a
 * 4 x 4 x 2 tile of a 7-point grid, as the sweeps run (sweeps.h): its
 * couplings to other blocks as two lists (below, above: the sweeps' own
 * columns and row bytes, fcol/frow and bcol/brow, with A's values beside
 * them), and inside the tile one record of A's values (64 below, 32 on the
 * diagonal, 64 above), the product unrolled at constant offsets: no column
 * is read for the 2/3 of the entries inside a tile, and the tile's x stays in
 * registers.  Each row sums in the CSR's order (to other blocks below, inside
 * below, the diagonal, inside above, to other blocks above; columns
 * ascending): built with -ffp-contract=off, y is the same bits (checked at
 * 32^3 and 33 x 17 x 9); with the harness's flags the compiler fuses
 * multiplies and adds differently in the two, and y differs by rounding (the
 * record's max_rel_diff).  x holds tenths: on the harness's integers every
 * order would give the same bits.  One rank (no halo), tiles of the grid, 20
 * colors, the single factor, as the solver sets up.  Run by
 * biccg_tile_spmv.py; usage: NX NY NZ ROUNDS TX TY TZ.  One JSON line: the
 * medians of ROUNDS alternating calls, each after a flush and once more at
 * once (warm), whether y is bitwise the same and how far apart, and the bytes each storage
 * reads a product (matrix and indices; x and y, 16 bytes a row, apart).
 */
#include "biccg_bench.h"

/* A's values a tile at a time: rec[160 t] for tile t (tpos): its 64 values
 * inside below (row order; a row's k - 16, k - 4, k - 1 where the tile has
 * them, as the sweeps' tl), its 32 diagonal values, its 64 inside above (k +
 * 1, k + 4, k + 16, as tu); fv / bv A's values of the sweeps' lists of
 * entries to other blocks below (fptr, fcol, frow) and above (bptr ...);
 * tiles their count (32 rows each: pack_sweeps takes no other). */
typedef struct {
    double *rec, *fv, *bv;
    int64_t tiles;
} tile_a;

#define TILE_REC 160

/* Fills s from L's copy of A; 0, 2 where there is no memory, 3 where a row
 * is not (lower, diagonal, upper) in the factor's pattern. */
static int tile_fill(const bc_local *L, tile_a *s)
{
    s->tiles = 0;
    for (int b = 0; b < L->nblocks; b++)
        s->tiles += L->tpos[b] >= 0;
    s->rec = bc_alloc((size_t)TILE_REC * (size_t)s->tiles + 1, sizeof(double));
    s->fv = bc_alloc((size_t)L->fptr[L->nblocks] + 1, sizeof(double));
    s->bv = bc_alloc((size_t)L->bptr[L->nblocks] + 1, sizeof(double));
    if (!s->rec || !s->fv || !s->bv)
        return 2;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int b = 0; b < L->nblocks; b++) {
        if (L->tpos[b] < 0)
            continue;
        double *const rec = s->rec + (int64_t)TILE_REC * L->tpos[b];
        int64_t f = L->fptr[b], u = L->bptr[b], tl = 0, tu = 96;
        for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++) {
            const int64_t a = L->rowptr[i], nl = L->lptr[i + 1] - L->lptr[i],
                          nu = L->uptr[i + 1] - L->uptr[i];
            if (L->rowptr[i + 1] - a != nl + nu + 1 || L->col[a + nl] != i) {
                bad = 1;
                continue;
            }
            for (int64_t k = a; k < a + nl - L->lin[i]; k++)
                s->fv[f++] = L->val[k];
            for (int64_t k = a + nl - L->lin[i]; k < a + nl; k++)
                rec[tl++] = L->val[k];
            rec[64 + i - L->bstart[b]] = L->val[a + nl];
            for (int64_t k = a + nl + 1; k < a + nl + 1 + L->uin[i]; k++)
                rec[tu++] = L->val[k];
            for (int64_t k = a + nl + 1 + L->uin[i]; k < a + nl + 1 + nu; k++)
                s->bv[u++] = L->val[k];
        }
    }
    return bad ? 3 : 0;
}

/* y_k += A's couplings inside a 4 x 4 x 2 tile: below (k - 16, k - 4, k - 1),
 * the diagonal, above (k + 1, k + 4, k + 16), in that order; x the tile's 32
 * values, rec its record. */
static inline void tile_inside(double *y, const double *x, const double *rec)
{
    static const int lo[32] = {0,  0,  1,  2,  3,  4,  6,  8,  10, 11, 13,
                               15, 17, 18, 20, 22, 24, 25, 27, 29, 31, 33,
                               36, 39, 42, 44, 47, 50, 53, 55, 58, 61};
    static const int hi[32] = {0,  3,  6,  9,  11, 14, 17, 20, 22, 25, 28,
                               31, 33, 35, 37, 39, 40, 42, 44, 46, 47, 49,
                               51, 53, 54, 56, 58, 60, 61, 62, 63, 64};
    const double *const vl = rec, *const vd = rec + 64, *const vu = rec + 96;
#pragma GCC unroll 32
    for (int k = 0; k < 32; k++) {
        int m = lo[k], u = hi[k];
        double s = y[k];
        if (k >= 16)
            s += vl[m++] * x[k - 16];
        if ((k >> 2) & 3)
            s += vl[m++] * x[k - 4];
        if (k & 3)
            s += vl[m] * x[k - 1];
        s += vd[k] * x[k];
        if ((k & 3) < 3)
            s += vu[u++] * x[k + 1];
        if (((k >> 2) & 3) < 3)
            s += vu[u++] * x[k + 4];
        if (k < 16)
            s += vu[u] * x[k + 16];
        y[k] = s;
    }
}

/* y = A x a block at a time (tiles as above, other blocks by rows as
 * bc_spmv), rows shared color by color as bc_spmv shares them, and x'y. */
static double spmv_tile(const bc_local *L, const void *sv, const double *x, double *y)
{
    const tile_a *s = sv;
    const int64_t end = L->rowptr[L->nloc];
    const int nt = bc_team_max();
    bc_slot sums[nt];
    memset(sums, 0, sizeof sums);
#pragma omp parallel
    {
        double xy = 0.0;
        for (int c = 0; c < L->ncolors; c++) {
            int b0, b1;
            bc_my_blocks(L, c, &b0, &b1);
            for (int b = b0; b < b1; b++) {
                for (int part = 0; part < 3; part++)
                    bc_prefetch_block(L, b + BC_PFB, b1, part, x);
                const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
                if (L->tpos[b] >= 0) {
                    if (b + BC_PFB < b1 && L->tpos[b + BC_PFB] >= 0) {
                        const double *next = s->rec + (int64_t)TILE_REC * L->tpos[b + BC_PFB];
                        for (int l = 0; l < TILE_REC; l += 8)
                            bc_prefetch_line(next + l, L->spmv_nta);
                        bc_prefetch_line(s->fv + L->fptr[b + BC_PFB], L->spmv_nta);
                        bc_prefetch_line(s->bv + L->bptr[b + BC_PFB], L->spmv_nta);
                        bc_prefetch_line(L->fcol + L->fptr[b + BC_PFB], L->spmv_nta);
                        bc_prefetch_line(L->bcol + L->bptr[b + BC_PFB], L->spmv_nta);
                    }
                    double yb[32] = {0.0};
                    for (int64_t p = L->fptr[b]; p < L->fptr[b + 1]; p++)
                        yb[L->frow[p]] += s->fv[p] * x[L->fcol[p]];
                    tile_inside(yb, x + i0, s->rec + (int64_t)TILE_REC * L->tpos[b]);
                    for (int64_t p = L->bptr[b]; p < L->bptr[b + 1]; p++)
                        yb[L->brow[p]] += s->bv[p] * x[L->bcol[p]];
                    for (int k = 0; k < 32; k++) {
                        y[i0 + k] = yb[k];
                        xy += x[i0 + k] * yb[k];
                    }
                    continue;
                }
                bc_spmv_rows(L, i0, i1, end, L->spmv_nta, x, y, &xy); /* bc_spmv's rows */
            }
        }
        bc_my_slot(sums)->v[0] = xy;
    }
    return bc_slots_sum(sums, nt, 0);
}

int main(int argc, char **argv)
{
    tile_bench b;
    tile_a s = {NULL, NULL, NULL, 0};
    int rc = tile_bench_init(argc, argv, &b);
    if (rc != 0)
        return rc;
    if ((rc = tile_fill(&b.L, &s)) != 0) {
        fprintf(stderr, rc == 3 ? "error: a row is not lower, diagonal, upper\n"
                                : "error: no memory\n");
        MPI_Finalize();
        return rc;
    }
    const bc_gidx n = b.n;
    /* x in tenths, not the harness's integers: A's values are integers, and
     * on integers every order of the sums gives the same bits */
    for (bc_gidx i = 0; i < n; i++)
        b.x[i] = 1.0 + 0.1 * (double)(i % 7);
    double ms[4];
    const int same = spmv_beside(&b, spmv_tile, &s, ms);
    const double diff = max_rel_diff(b.y, b.y0, (size_t)n);
    const int64_t tiles = s.tiles, tile_rows = 32 * tiles;
    const int64_t nnz = b.L.rowptr[n], lists = b.L.fptr[b.L.nblocks] + b.L.bptr[b.L.nblocks];
    /* rows outside tiles: as the CSR reads them (their share of entries, taken
     * as the average row's) */
    const double other = (double)(n - tile_rows) / (double)n * (double)(8 * n + 12 * nnz);
    printf("{\"n\": %lld, \"threads\": %d, \"rounds\": %d, \"tiles\": %lld, \"spmv_ms\": %.4f, "
           "\"tile_ms\": %.4f, \"spmv_warm_ms\": %.4f, \"tile_warm_ms\": %.4f, "
           "\"same_bits\": %s, \"max_rel_diff\": %.2e, \"csr_bytes\": %lld, \"tile_bytes\": %.0f, "
           "\"spmv_nta\": %d}\n",
           (long long)n, omp_get_max_threads(), b.rounds, (long long)tiles, ms[0], ms[1], ms[2],
           ms[3], same ? "true" : "false", diff, (long long)(8 * (n + 1) + 12 * nnz),
           8.0 * TILE_REC * (double)tiles + 13.0 * (double)lists + 16.0 * (double)tiles + other,
           b.L.spmv_nta);
    MPI_Finalize();
    return 0;
}
