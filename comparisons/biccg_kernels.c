/*
 * biccg_kernels.c - the solver's SpMV and preconditioner (kernels_ext/src/
 * biccg) beside the versions they replaced, on one matrix in one process:
 *   - "before" SpMV: CSR rows in the multicolor order, no prefetch;
 *   - "before" preconditioner: the solver's sweeps without the register
 *     carry and the prefetch (its path for tiles; row_runs set to 0).
 * Calls alternate, each after a write of twice the last-level cache (192 MiB
 * at least) that leaves nothing of the operands in cache (as in CG, where
 * other kernels run in between), and each is timed again at once, its
 * operands in cache as far as they fit ("warm"); medians are printed as one
 * JSON line.  Built and run by biccg_kernels.py.
 * TX TY TZ: blocks are tiles of the grid (0 0 0: of BLOCK_SIZE rows); SINGLE
 * 1: the factor's values in single precision (the solver's defaults).
 *
 *     biccg_kernels NX NY NZ ROUNDS BLOCK_SIZE COLORS TX TY TZ SINGLE
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <omp.h>

#include "internal.h"

static void spmv_before(const bc_local *L, const double *x, double *y)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < L->nloc; i++) {
        double s = 0.0;
        for (int64_t k = L->rowptr[i]; k < L->rowptr[i + 1]; k++)
            s += L->val[k] * x[L->col[k]];
        y[i] = s;
    }
}

/* The preconditioner it replaced: the solver's own sweeps as they run where
 * blocks are tiles (row_runs 0): the in-block recurrence reading the previous
 * row back from memory, no prefetch of the plan's lines.  With tiles it is
 * the solver's; with row runs, the version the register carry replaced. */
static void precond_before(bc_local *L, double *r, double *z, double *rr, double *rz)
{
    const int runs = L->row_runs;
    L->row_runs = 0;
    bc_precond(L, 0.0, NULL, r, z, rr, rz);
    L->row_runs = runs;
}

/* doubles written by a flush: twice the last-level cache, 192 MiB at least
 * (the Xeon VMs report 300 MiB of L3, in which 192 MiB left 128^3 cached) */
static size_t flush_n = (size_t)24 << 20;
static double *junk;

static void flush(void)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < flush_n; i++)
        junk[i] = junk[i] * 0.5 + 1.0;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, by_value);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static double max_rel_diff(const double *a, const double *b, int n)
{
    double d = 0.0, m = 0.0;
    for (int i = 0; i < n; i++) {
        d = fmax(d, fabs(a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return m > 0.0 ? d / m : d;
}

int main(int argc, char **argv)
{
    if (argc != 11) {
        fprintf(stderr, "usage: %s NX NY NZ ROUNDS BLOCK_SIZE COLORS TX TY TZ SINGLE\n", argv[0]);
        return 2;
    }
    MPI_Init(&argc, &argv);
    const bc_gidx nx = atol(argv[1]), ny = atol(argv[2]), nz = atol(argv[3]);
    const int rounds = atoi(argv[4]), bs = atoi(argv[5]), colors = atoi(argv[6]);
    const int tile[3] = {atoi(argv[7]), atoi(argv[8]), atoi(argv[9])};
    const int single = atoi(argv[10]);
    const bc_gidx n = nx * ny * nz, nnz = bc_poisson_nnz(nx, ny, nz, 0, n);
    int64_t *indptr = malloc((size_t)(n + 1) * sizeof *indptr);
    int64_t *indices = malloc((size_t)nnz * sizeof *indices);
    double *data = malloc((size_t)nnz * sizeof *data);
    bc_local L;
    memset(&L, 0, sizeof L);
    if (!indptr || !indices || !data || rounds < 1 || n < 1 || n > 0x7fffffff) {
        fprintf(stderr, "error: bad sizes or no memory\n");
        return 2;
    }
    bc_poisson_fill(nx, ny, nz, 0, n, indptr, indices, data);
    bc_csr_in a = {n, 0, n, NULL, indptr, NULL, indices, data};
    /* blocks of bs consecutive rows, or tiles of the grid where TX > 0 */
    bc_params p = {.block_size = bs, .colors = colors};
    if (tile[0] > 0)
        for (int k = 0; k < 3; k++)
            p.grid[k] = k == 0 ? nx : k == 1 ? ny : nz, p.tile[k] = tile[k];
    if (bc_order(&a, &p, &L, NULL) != BC_OK || bc_build_local(&a, &L) != BC_OK ||
        bc_scan_blocks(&L) != BC_OK || bc_factor(&L, single) != BC_OK) {
        fprintf(stderr, "error: setup failed\n");
        return 1;
    }
    double *x = bc_alloc((size_t)n, sizeof *x), *y = bc_alloc((size_t)n, sizeof *y),
           *y0 = bc_alloc((size_t)n, sizeof *y0), *t = malloc(8 * (size_t)rounds * sizeof *t);
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc > 0 && 2 * (size_t)llc / sizeof *junk > flush_n)
        flush_n = 2 * (size_t)llc / sizeof *junk;
#endif
    junk = bc_alloc(flush_n, sizeof *junk);
    if (!x || !y || !y0 || !t || !junk) {
        fprintf(stderr, "error: no memory\n");
        return 2;
    }
#pragma omp parallel for schedule(static)
    for (bc_gidx i = 0; i < n; i++)
        x[i] = 1.0 + (double)(i % 7), y[i] = y0[i] = 0.0;
    memset(junk, 0, flush_n * sizeof *junk);

    /* the same results first, to rounding: the SpMV sums a row in another
     * order, and with row runs the backward recurrence subtracts its register
     * term (row i + 1's) last, the plain loop first */
    spmv_before(&L, x, y0);
    bc_spmv(&L, x, y);
    const double dspmv = max_rel_diff(y, y0, (int)n);
    double rr, rz, rr0, rz0; /* the sums the preconditioners return */
    precond_before(&L, x, y0, &rr0, &rz0);
    bc_precond(&L, 0.0, NULL, x, y, &rr, &rz);
    const double dpre = max_rel_diff(y, y0, (int)n), drz = fabs(rz - rz0) / fabs(rz0);

    /* each call after a flush, then again at once (its operands now in cache,
     * as far as they fit): the same time both ways says the kernel is bound by
     * its instructions, not by the memory */
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 4; k++) {
            const int v = r % 2 ? 3 - k : k; /* ABCD, DCBA, ... */
            flush();
            for (int warm = 0; warm < 2; warm++) {
                double t0 = omp_get_wtime();
                if (v == 0)
                    bc_spmv(&L, x, y);
                else if (v == 1)
                    spmv_before(&L, x, y);
                else if (v == 2)
                    bc_precond(&L, 0.0, NULL, x, y, &rr, &rz);
                else
                    precond_before(&L, x, y, &rr0, &rz0);
                t[(4 * warm + v) * rounds + r] = omp_get_wtime() - t0;
            }
        }
    double ms[8];
    for (int v = 0; v < 8; v++)
        ms[v] = 1e3 * median(t + v * rounds, rounds);
    printf("{\"n\": %lld, \"nnz\": %lld, \"block_size\": %d, \"colors\": %d, \"threads\": %d, "
           "\"rounds\": %d, \"spmv_ms\": %.4f, \"spmv_before_ms\": %.4f, \"precond_ms\": %.4f, "
           "\"precond_before_ms\": %.4f, \"spmv_warm_ms\": %.4f, \"spmv_before_warm_ms\": %.4f, "
           "\"precond_warm_ms\": %.4f, \"precond_before_warm_ms\": %.4f, "
           "\"spmv_max_rel_diff\": %.3g, \"precond_max_rel_diff\": %.3g, "
           "\"rz_rel_diff\": %.3g, \"flush_bytes\": %zu}\n",
           (long long)n, (long long)nnz, bs, L.ncolors, omp_get_max_threads(), rounds, ms[0],
           ms[1], ms[2], ms[3], ms[4], ms[5], ms[6], ms[7], dspmv, dpre, drz,
           flush_n * sizeof *junk);
    MPI_Finalize();
    return 0;
}
