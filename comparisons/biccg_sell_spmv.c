/*
 * biccg_sell_spmv.c - the solver's SpMV (bc_spmv, A's copy in CSR) beside the
 * same product on A in SELL-8 (chunks of 8 consecutive rows, each chunk's
 * entries slot by slot, padded to its longest row with zeros on the row's own
 * column), vectorized across the chunk's rows with AVX-512: a slot's 8 values
 * and 8 columns loaded whole, x gathered.  The sweeps read L and U, not A, so
 * the SpMV alone decides A's storage; the question is whether the rows in
 * lanes pay where the sweeps' lanes did not (comparisons/README.md, "The sweeps
 * vectorized across blocks").  A row's sum runs in its order, a multiply then
 * an add (as the solver's loop is built here), so y must be the same bits.
 * One rank, tiles of the grid, 20 colors, as the solver sets up.  Run by
 * biccg_sell_spmv.py; usage: NX NY NZ ROUNDS TX TY TZ.  One JSON line: the
 * medians of ROUNDS alternating calls, each after a flush and once more at
 * once (warm), whether y is bitwise the same, and the padding.
 */
#include "biccg_bench.h"

#ifdef __AVX512F__
#include <immintrin.h>

/* A in SELL-8: chunk c holds rows 8c .. 8c + 7, w[c] slots at off[c]. */
typedef struct {
    int nc;
    int64_t *off;
    int32_t *w, *col;
    double *val;
} sell_a;

/* Fills s from L's copy of A; 0, or 2 where there is no memory. */
static int sell(const bc_local *L, sell_a *s)
{
    const int n = L->nloc;
    s->nc = (n + 7) / 8;
    s->off = malloc(((size_t)s->nc + 1) * sizeof *s->off);
    s->w = malloc((size_t)s->nc * sizeof *s->w);
    if (!s->off || !s->w)
        return 2;
    s->off[0] = 0;
    for (int c = 0; c < s->nc; c++) {
        int64_t most = 0;
        for (int i = 8 * c; i < 8 * c + 8 && i < n; i++)
            if (L->rowptr[i + 1] - L->rowptr[i] > most)
                most = L->rowptr[i + 1] - L->rowptr[i];
        s->w[c] = (int32_t)most;
        s->off[c + 1] = s->off[c] + 8 * most;
    }
    s->col = bc_alloc((size_t)s->off[s->nc], sizeof *s->col); /* the solver's pages */
    s->val = bc_alloc((size_t)s->off[s->nc], sizeof *s->val);
    if (!s->col || !s->val)
        return 2;
    for (int c = 0; c < s->nc; c++)
        for (int r = 0; r < 8; r++) {
            const int i = 8 * c + r;
            const int64_t len = i < n ? L->rowptr[i + 1] - L->rowptr[i] : 0;
            for (int k = 0; k < s->w[c]; k++) {
                const int64_t at = s->off[c] + 8 * k + r;
                s->col[at] = k < len ? L->col[L->rowptr[i] + k] : (i < n ? i : 0);
                s->val[at] = k < len ? L->val[L->rowptr[i] + k] : 0.0;
            }
        }
    return 0;
}

/* y = A x on SELL-8 and x'y, the streams prefetched ahead as bc_spmv does. */
static double spmv_sell(const bc_local *L, const void *sv, const double *x, double *y)
{
    const sell_a *s = sv;
    const int n = L->nloc;
    const int64_t end = s->off[s->nc];
    double xy = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : xy)
    for (int c = 0; c < s->nc; c++) {
        const int64_t o = s->off[c];
        bc_prefetch(s->val, o, end, sizeof *s->val, L->spmv_nta);
        bc_prefetch(s->col, o, end, sizeof *s->col, L->spmv_nta);
        __m512d acc = _mm512_setzero_pd();
        for (int k = 0; k < s->w[c]; k++) {
            const __m256i ci = _mm256_loadu_si256((const __m256i *)(s->col + o + 8 * k));
            const __m512d v = _mm512_loadu_pd(s->val + o + 8 * k);
            acc = _mm512_add_pd(acc, _mm512_mul_pd(v, _mm512_i32gather_pd(ci, x, 8)));
        }
        const __mmask8 m = 8 * c + 8 <= n ? 0xff : (__mmask8)((1u << (n - 8 * c)) - 1);
        _mm512_mask_storeu_pd(y + 8 * c, m, acc);
        double t[8];
        _mm512_storeu_pd(t, acc);
        for (int r = 0; r < 8 && 8 * c + r < n; r++)
            xy += x[8 * c + r] * t[r];
    }
    return xy;
}

#endif

int main(int argc, char **argv)
{
#ifndef __AVX512F__
    (void)argc, (void)argv;
    fprintf(stderr, "error: this prototype needs AVX-512 (compiled without __AVX512F__)\n");
    return 3;
#else
    tile_bench b;
    sell_a s = {0, NULL, NULL, NULL, NULL};
    int rc = tile_bench_init(argc, argv, &b);
    if (rc != 0)
        return rc;
    if ((rc = sell(&b.L, &s)) != 0) {
        fprintf(stderr, "error: no memory\n");
        MPI_Finalize();
        return rc;
    }
    const bc_gidx n = b.n;
    double ms[4];
    const int same = spmv_beside(&b, spmv_sell, &s, ms);
    printf("{\"n\": %lld, \"threads\": %d, \"rounds\": %d, \"spmv_ms\": %.4f, \"sell_ms\": %.4f, "
           "\"spmv_warm_ms\": %.4f, \"sell_warm_ms\": %.4f, \"same_bits\": %s, "
           "\"padding\": %.4f, \"spmv_nta\": %d}\n",
           (long long)n, omp_get_max_threads(), b.rounds, ms[0], ms[1], ms[2], ms[3],
           same ? "true" : "false", (double)s.off[s.nc] / (double)b.L.rowptr[n], b.L.spmv_nta);
    MPI_Finalize();
    return 0;
#endif
}
