/*
 * biccg_kernels.c - the solver's SpMV and preconditioner (kernels_ext/src/
 * biccg) beside the versions they replaced, on one matrix in one process:
 *   - "before" SpMV: CSR rows in the multicolor order, no prefetch;
 *   - "before" preconditioner: the solver's sweeps without the register
 *     carry and the prefetch (row_runs and sweep_prefetch set to 0: its path
 *     for tiles within the cache; whole 4 x 4 x 2 tiles take the copies'
 *     path either way since e586e11, so for them "before" is the solver).
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

#include "biccg_bench.h"
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
 * blocks are tiles and z fits the cache (row_runs and sweep_prefetch 0): the
 * in-block recurrence reading the previous row back from memory, no prefetch
 * of the plan's lines.  With tiles in cache it is the solver's; with row
 * runs, the version the register carry and the prefetch replaced. */
static void precond_before(bc_local *L, double *r, double *z, double *rr, double *rz)
{
    const int runs = L->row_runs, prefetch = L->sweep_prefetch;
    L->row_runs = L->sweep_prefetch = 0;
    bc_precond(L, 0.0, NULL, r, z, rr, rz);
    L->row_runs = runs, L->sweep_prefetch = prefetch;
}

/* The four kernels timed, variant v: the SpMV, its old version, the
 * preconditioner, its old version. */
typedef struct {
    bc_local *L;
    double *x, *y, rr, rz; /* x read only (bc_precond writes r only where q is given) */
} kernel_ctx;

static void kernel_call(void *vc, int v)
{
    kernel_ctx *c = vc;
    if (v == 0)
        bc_spmv(c->L, c->x, c->y);
    else if (v == 1)
        spmv_before(c->L, c->x, c->y);
    else if (v == 2)
        bc_precond(c->L, 0.0, NULL, c->x, c->y, &c->rr, &c->rz);
    else
        precond_before(c->L, c->x, c->y, &c->rr, &c->rz);
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
    const bc_gidx n = nx * ny * nz;
    if (rounds < 1) {
        fprintf(stderr, "error: bad sizes or no memory\n");
        return 2;
    }
    /* blocks of bs consecutive rows, or tiles of the grid where TX > 0 */
    bc_params p = {.block_size = bs, .colors = colors};
    if (tile[0] > 0)
        for (int k = 0; k < 3; k++)
            p.grid[k] = k == 0 ? nx : k == 1 ? ny : nz, p.tile[k] = tile[k];
    bc_local L;
    const int rc = poisson_setup(nx, ny, nz, 0x7fffffff, &p, single, &L);
    if (rc != 0)
        return rc;
    double *x = bc_alloc((size_t)n, sizeof *x), *y = bc_alloc((size_t)n, sizeof *y),
           *y0 = bc_alloc((size_t)n, sizeof *y0), *t = malloc(8 * (size_t)rounds * sizeof *t);
    if (!x || !y || !y0 || !t || flush_init() != 0) {
        fprintf(stderr, "error: no memory\n");
        return 2;
    }
#pragma omp parallel for schedule(static)
    for (bc_gidx i = 0; i < n; i++)
        x[i] = 1.0 + (double)(i % 7), y[i] = y0[i] = 0.0;

    /* the same results first, to rounding: the SpMV sums a row in another
     * order, and with row runs the backward recurrence subtracts its register
     * term (row i + 1's) last, the plain loop first */
    spmv_before(&L, x, y0);
    bc_spmv(&L, x, y);
    const double dspmv = max_rel_diff(y, y0, (size_t)n);
    double rr, rz, rr0, rz0; /* the sums the preconditioners return */
    precond_before(&L, x, y0, &rr0, &rz0);
    bc_precond(&L, 0.0, NULL, x, y, &rr, &rz);
    const double dpre = max_rel_diff(y, y0, (size_t)n), drz = fabs(rz - rz0) / fabs(rz0);

    kernel_ctx ctx = {&L, x, y, 0.0, 0.0};
    double ms[8];
    time_alternating(4, rounds, kernel_call, &ctx, t, ms);
    printf("{\"n\": %lld, \"nnz\": %lld, \"block_size\": %d, \"colors\": %d, \"threads\": %d, "
           "\"rounds\": %d, \"spmv_ms\": %.4f, \"spmv_before_ms\": %.4f, \"precond_ms\": %.4f, "
           "\"precond_before_ms\": %.4f, \"spmv_warm_ms\": %.4f, \"spmv_before_warm_ms\": %.4f, "
           "\"precond_warm_ms\": %.4f, \"precond_before_warm_ms\": %.4f, "
           "\"spmv_max_rel_diff\": %.3g, \"precond_max_rel_diff\": %.3g, "
           "\"rz_rel_diff\": %.3g, \"flush_bytes\": %zu, \"spmv_nta\": %d}\n",
           (long long)n, (long long)L.rowptr[L.nloc], bs, L.ncolors, omp_get_max_threads(), rounds, ms[0],
           ms[1], ms[2], ms[3], ms[4], ms[5], ms[6], ms[7], dspmv, dpre, drz,
           flush_n * sizeof *junk, L.spmv_nta);
    MPI_Finalize();
    return 0;
}
