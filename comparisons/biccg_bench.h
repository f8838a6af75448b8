/*
 * biccg_bench.h - what the BICCG kernel comparisons' C drivers (biccg_kernels.c,
 * biccg_lanes.c, biccg_padded.c, biccg_split_spmv.c, biccg_sell_spmv.c,
 * biccg_eisenstat.c, biccg_copies.c) share: the Poisson matrix (or one rank's
 * rows of it) set up as the solver sets it up, a flush that leaves nothing of the operands in cache, variants timed
 * alternately, medians, and the tile drivers' command line.
 */
#ifndef BURSTBENCH_BICCG_BENCH_H
#define BURSTBENCH_BICCG_BENCH_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <omp.h>

#include "internal.h"

/* The sweeps' prefetch as bc_solve decides it on one rank (cg.c,
 * sweeps_prefetch; the rule: internal.h, bc_sweep_prefetch_rule): row runs
 * always; tiles as BC_SWEEP_PREFETCH says (1, 0),
 * else where z (8 bytes a row) exceeds BC_LLC_BYTES (the harnesses set it:
 * biccg_kernels.py's driver_env). */
static int bench_sweep_prefetch(const bc_local *L)
{
    const char *pf = getenv("BC_SWEEP_PREFETCH"), *llc = getenv("BC_LLC_BYTES");
    return bc_sweep_prefetch_rule(L->row_runs, pf ? atoi(pf) > 0 : -1, L->nloc,
                                  llc ? atoll(llc) : 0);
}

/* The SpMV's prefetch hint as bc_solve decides it (internal.h,
 * bc_spmv_nta_rule): BC_SPMV_NTA=1 non-temporal, 0 ordinary, else by the CPU. */
static int bench_spmv_nta(void)
{
    const char *nta = getenv("BC_SPMV_NTA");
    return bc_spmv_nta_rule(!nta       ? BC_SPMV_NTA_AUTO
                            : atoi(nta) ? BC_SPMV_NTA_ON
                                        : BC_SPMV_NTA_OFF);
}

/* Rows [r0, r1) of the 7-point Poisson matrix of an nx x ny x nz grid, one
 * rank's part, ordered, copied and factored into L as bc_solve's setup does
 * (p's blocking and colors; the factor in single precision where `single`;
 * the sweeps' prefetch, bench_sweep_prefetch; the SpMV's hint,
 * bench_spmv_nta).  The setup sends no message.  0; 2 for no memory; 1
 * where the setup fails (each with a line on stderr). */
static int poisson_setup_rows(bc_gidx nx, bc_gidx ny, bc_gidx nz, bc_gidx r0, bc_gidx r1,
                              const bc_params *p, int single, bc_local *L)
{
    const bc_gidx n = nx * ny * nz, nnz = bc_poisson_nnz(nx, ny, nz, r0, r1);
    memset(L, 0, sizeof *L);
    int64_t *indptr = malloc((size_t)(r1 - r0 + 1) * sizeof *indptr);
    int64_t *indices = malloc((size_t)nnz * sizeof *indices);
    double *data = malloc((size_t)nnz * sizeof *data);
    int rc = 0;
    if (!indptr || !indices || !data) {
        fprintf(stderr, "error: bad sizes or no memory\n");
        rc = 2;
    } else {
        bc_poisson_fill(nx, ny, nz, r0, r1, indptr, indices, data);
        bc_csr_in a = {n, r0, r1 - r0, NULL, indptr, NULL, indices, data};
        if (bc_order(&a, p, L, NULL) != BC_OK || bc_build_local(&a, L) != BC_OK ||
            bc_scan_blocks(L) != BC_OK || bc_factor(L, single) != BC_OK) {
            fprintf(stderr, "error: setup failed\n");
            rc = 1;
        }
        L->sweep_prefetch = bench_sweep_prefetch(L);
        L->spmv_nta = bench_spmv_nta();
    }
    free(indptr), free(indices), free(data);
    return rc;
}

/* The whole grid on one rank (poisson_setup_rows); 2 also for a grid out of
 * range (n < 1 or n > n_max). */
static int poisson_setup(bc_gidx nx, bc_gidx ny, bc_gidx nz, bc_gidx n_max, const bc_params *p,
                         int single, bc_local *L)
{
    const bc_gidx n = nx * ny * nz;
    memset(L, 0, sizeof *L);
    if (n < 1 || n > n_max) {
        fprintf(stderr, "error: bad sizes or no memory\n");
        return 2;
    }
    return poisson_setup_rows(nx, ny, nz, 0, n, p, single, L);
}

/* doubles written by a flush: twice the last-level cache, 192 MiB at least
 * (the Xeon VMs report 300 MiB of L3, in which 192 MiB left 128^3 cached) */
static size_t flush_n = (size_t)24 << 20;
static double *junk;

/* Size and allocate the flush's array; 0, or -1 without the memory. */
static int flush_init(void)
{
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc > 0 && 2 * (size_t)llc / sizeof *junk > flush_n)
        flush_n = 2 * (size_t)llc / sizeof *junk;
#endif
    junk = bc_alloc(flush_n, sizeof *junk);
    if (junk == NULL)
        return -1;
    memset(junk, 0, flush_n * sizeof *junk);
    return 0;
}

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

/* The median of t[0..n) (sorts t). */
static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, by_value);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* The largest |a_i - b_i| over the largest |b_i| (over 1 where b is zero): how far a
 * variant's vector is from the solver's; DBL_MAX where either holds a NaN (which fmax
 * would pass over), so that a vector of NaNs cannot read as the same. */
static inline double max_rel_diff(const double *a, const double *b, size_t n)
{
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs(a[i] - b[i]);
        if (isnan(e))
            return DBL_MAX;
        d = fmax(d, e);
        m = fmax(m, fabs(b[i]));
    }
    return m > 0.0 ? d / m : d;
}

/* Time call(ctx, v) for the nv variants v, rounds times, in an order that
 * reverses every round (ABCD, DCBA, ...), each call after a flush and then
 * once more at once (its operands in cache as far as they fit: the same time
 * both ways says a kernel is bound by its instructions, not by the memory):
 * the medians in ms[v] (flushed) and ms[nv + v] (warm), in milliseconds.
 * t: 2 nv rounds doubles, left holding the seconds of round r of variant v
 * at t[v rounds + r] (flushed) and t[(nv + v) rounds + r] (warm). */
static void time_alternating(int nv, int rounds, void (*call)(void *ctx, int v), void *ctx,
                             double *t, double *ms)
{
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < nv; k++) {
            const int v = r % 2 ? nv - 1 - k : k;
            flush();
            for (int warm = 0; warm < 2; warm++) {
                const double t0 = omp_get_wtime();
                call(ctx, v);
                t[(nv * warm + v) * rounds + r] = omp_get_wtime() - t0;
            }
        }
    for (int v = 0; v < 2 * nv; v++) { /* t keeps its rounds' order: per-round ratios */
        double sorted[rounds];
        memcpy(sorted, t + v * rounds, sizeof sorted);
        ms[v] = 1e3 * median(sorted, rounds);
    }
}

/* A tile driver's problem (biccg_padded.c, biccg_split_spmv.c,
 * biccg_sell_spmv.c): the grid set up in L, n rows, rounds of timing, and the
 * vectors its variants share: x = 1 + i mod 7, y and y0 zeroed (a variant's
 * output and the solver's), t of two variants' rounds for time_alternating. */
typedef struct {
    bc_local L;
    bc_gidx n;
    int rounds;
    double *x, *y, *y0, *t;
} tile_bench;

/* A tile driver's command line, NX NY NZ ROUNDS TX TY TZ: MPI started, the
 * grid set up as the solver sets it up with tiles TX x TY x TZ, 20 colors and
 * the single factor (poisson_setup), and b's vectors.  0; else the exit
 * status after a line on stderr (2: a bad command line or no memory, 1: the
 * setup failed), MPI finalized again where it was started. */
static inline int tile_bench_init(int argc, char **argv, tile_bench *b)
{
    if (argc != 8) {
        fprintf(stderr, "usage: %s NX NY NZ ROUNDS TX TY TZ\n", argv[0]);
        return 2;
    }
    MPI_Init(&argc, &argv);
    const bc_gidx nx = atol(argv[1]), ny = atol(argv[2]), nz = atol(argv[3]);
    b->n = nx * ny * nz;
    b->rounds = atoi(argv[4]);
    bc_params p = {.block_size = 32, .colors = 20, .grid = {nx, ny, nz},
                   .tile = {atoi(argv[5]), atoi(argv[6]), atoi(argv[7])}};
    int rc = 2;
    if (b->rounds < 1)
        fprintf(stderr, "error: ROUNDS must be 1 or more\n");
    else if ((rc = poisson_setup(nx, ny, nz, 0x7fffffff, &p, 1, &b->L)) == 0) {
        const size_t n = (size_t)b->n;
        b->x = malloc(n * sizeof *b->x), b->y = malloc(n * sizeof *b->y);
        b->y0 = malloc(n * sizeof *b->y0), b->t = malloc(4 * (size_t)b->rounds * sizeof *b->t);
        if (!b->x || !b->y || !b->y0 || !b->t || flush_init() != 0) {
            fprintf(stderr, "error: no memory\n");
            rc = 2;
        }
    }
    if (rc != 0) { /* poisson_setup said why where it failed */
        MPI_Finalize();
        return rc;
    }
    for (bc_gidx i = 0; i < b->n; i++)
        b->x[i] = 1.0 + (double)(i % 7), b->y[i] = b->y0[i] = 0.0;
    return 0;
}

/* Another storage's SpMV (biccg_split_spmv.c, biccg_sell_spmv.c): y = A x from
 * the storage s built from L's copy of A, returning x'y. */
typedef double (*spmv_fn)(const bc_local *L, const void *s, const double *x, double *y);

typedef struct {
    tile_bench *b;
    spmv_fn other;
    const void *s;
} spmv_pair;

static inline void spmv_pair_call(void *vc, int v)
{
    spmv_pair *c = vc;
    if (v == 0)
        bc_spmv(&c->b->L, c->b->x, c->b->y);
    else
        c->other(&c->b->L, c->s, c->b->x, c->b->y);
}

/* bc_spmv beside other on s: whether other's y is bc_spmv's bit for bit (the
 * return), then both timed by time_alternating (ms: bc_spmv's and other's
 * medians flushed, then warm). */
static inline int spmv_beside(tile_bench *b, spmv_fn other, const void *s, double ms[4])
{
    bc_spmv(&b->L, b->x, b->y0);
    other(&b->L, s, b->x, b->y);
    const int same = memcmp(b->y, b->y0, (size_t)b->n * sizeof *b->y) == 0;
    spmv_pair pair = {b, other, s};
    time_alternating(2, b->rounds, spmv_pair_call, &pair, b->t, ms);
    return same;
}

#endif
