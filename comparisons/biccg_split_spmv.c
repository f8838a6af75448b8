/*
 * biccg_split_spmv.c - the solver's SpMV (bc_spmv, A's copy in CSR: rowptr,
 * col, val) beside the same product on A stored in the factor's pattern: its
 * strict lower values aligned with L's columns (lptr, lidx), its diagonal,
 * its strict upper values aligned with U's (uptr, uidx).  That storage would
 * let the setup drop A's columns and row pointers (75 MB of fresh memory at
 * 128^3) and share the sweeps' indices; the question here is what it costs
 * the SpMV.  The sums run in the same order (lower, diagonal, upper, each
 * ascending), so y must be the same bits.  One rank (no halo), tiles of the
 * grid, 20 colors, the single factor, as the solver sets up.  Run by
 * biccg_split_spmv.py; usage: NX NY NZ ROUNDS TX TY TZ.  One JSON line: the
 * medians of ROUNDS alternating calls, each after a flush and once more at
 * once (warm), whether y is bitwise the same, and both storages' bytes.
 */
#include "biccg_bench.h"

/* A in the factor's pattern. */
typedef struct {
    double *lo, *diag, *up;
} split_a;

/* Fills s from L's copy of A (a row's lower entries first, then its diagonal,
 * then its upper ones: its columns ascend); 0, or 2 where there is no memory. */
static int split(const bc_local *L, split_a *s)
{
    const int n = L->nloc;
    s->lo = bc_alloc((size_t)L->lptr[n], sizeof(double)); /* the solver's pages, as A's copy */
    s->up = bc_alloc((size_t)L->uptr[n], sizeof(double));
    s->diag = bc_alloc((size_t)n, sizeof(double));
    if (!s->lo || !s->up || !s->diag)
        return 2;
    for (int i = 0; i < n; i++) {
        const int64_t nl = L->lptr[i + 1] - L->lptr[i], nu = L->uptr[i + 1] - L->uptr[i];
        const int64_t a = L->rowptr[i];
        if (L->rowptr[i + 1] - a != nl + nu + 1 || L->col[a + nl] != i)
            return 3; /* not a row of lower, diagonal, upper inside the rank */
        memcpy(s->lo + L->lptr[i], L->val + a, (size_t)nl * sizeof(double));
        s->diag[i] = L->val[a + nl];
        memcpy(s->up + L->uptr[i], L->val + a + nl + 1, (size_t)nu * sizeof(double));
    }
    return 0;
}

/* y = A x on the split storage, and x'y, as bc_spmv did before it shared its
 * rows color by color (f224dd6): the plan's lines of x prefetched a few blocks
 * ahead, the streams ahead of their use. */
static double spmv_split(const bc_local *L, const void *sv, const double *x, double *y)
{
    const split_a *s = sv;
    const int n = L->nloc;
    const int64_t lend = L->lptr[n], uend = L->uptr[n];
    double xy = 0.0;
#pragma omp parallel reduction(+ : xy)
    {
#pragma omp for schedule(static)
        for (int b = 0; b < L->nblocks; b++) {
            for (int part = 0; part < 3; part++)
                bc_prefetch_block(L, b + BC_PFB, L->nblocks, part, x);
            for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++) {
                double t = 0.0;
                bc_prefetch(s->lo, L->lptr[i], lend, sizeof *s->lo, L->spmv_nta);
                bc_prefetch(L->lidx, L->lptr[i], lend, sizeof *L->lidx, L->spmv_nta);
                bc_prefetch(s->up, L->uptr[i], uend, sizeof *s->up, L->spmv_nta);
                bc_prefetch(L->uidx, L->uptr[i], uend, sizeof *L->uidx, L->spmv_nta);
                for (int64_t p = L->lptr[i]; p < L->lptr[i + 1]; p++)
                    t += s->lo[p] * x[L->lidx[p]];
                t += s->diag[i] * x[i];
                for (int64_t p = L->uptr[i]; p < L->uptr[i + 1]; p++)
                    t += s->up[p] * x[L->uidx[p]];
                y[i] = t;
                xy += x[i] * t;
            }
        }
    }
    return xy;
}

int main(int argc, char **argv)
{
    tile_bench b;
    split_a s = {NULL, NULL, NULL};
    int rc = tile_bench_init(argc, argv, &b);
    if (rc != 0)
        return rc;
    if ((rc = split(&b.L, &s)) != 0) {
        fprintf(stderr, rc == 3 ? "error: a row is not lower, diagonal, upper\n"
                                : "error: no memory\n");
        MPI_Finalize();
        return rc;
    }
    const bc_gidx n = b.n;
    double ms[4];
    const int same = spmv_beside(&b, spmv_split, &s, ms);
    const int64_t nnz = b.L.rowptr[n], nl = b.L.lptr[n], nu = b.L.uptr[n];
    printf("{\"n\": %lld, \"threads\": %d, \"rounds\": %d, \"spmv_ms\": %.4f, \"split_ms\": %.4f, "
           "\"spmv_warm_ms\": %.4f, \"split_warm_ms\": %.4f, \"same_bits\": %s, "
           "\"csr_bytes\": %lld, \"split_bytes\": %lld, \"spmv_nta\": %d}\n",
           (long long)n, omp_get_max_threads(), b.rounds, ms[0], ms[1], ms[2], ms[3],
           same ? "true" : "false", (long long)(8 * (n + 1) + 12 * nnz),
           (long long)(8 * n + 8 * (nl + nu)), b.L.spmv_nta);
    MPI_Finalize();
    return 0;
}
