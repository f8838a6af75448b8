/*
 * biccg_lanes.c - a prototype of the preconditioner vectorized across blocks
 * (issue 53: the sweeps are bound by their instructions), beside the solver's
 * own bc_precond, on one matrix in one process.
 *
 * Blocks of one color are independent, so eight of them can be swept at once,
 * one per lane of an AVX-512 vector: row k of each of the eight is one vector
 * row, its entries stored slot by slot (SELL-8 style, each slot 8 indices and
 * 8 values, padded with zeros to the widest of the eight rows).  Only runs of
 * eight consecutive blocks of a color with the same row count are grouped;
 * the other blocks are swept one row at a time.  The ordering and the factor
 * are the solver's: the vectors stay in its numbering, so each vector row is
 * gathered and scattered (rows of a lane group lie a block apart).  The
 * entries of each row are taken in the order the solver's sweeps take them
 * (forward: L's row as stored; backward: U's entries outside the block, then
 * inside); z agrees to rounding, r'r and r'z are added in another order.
 *
 * Compiled -DLANES_CONTIG, each vector row of r, z and 1/d is one contiguous
 * load or store instead (at its position among the vector rows: the results
 * are wrong, the time is what a numbering that interleaves the eight blocks'
 * rows would leave: only the couplings gathered).
 *
 * Calls alternate (solver's, then this), each after a write of twice the
 * last-level cache, and again at once ("warm"); medians printed as JSON.
 * Built and run by biccg_lanes.py.
 *
 *     biccg_lanes NX NY NZ ROUNDS TX TY TZ
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "biccg_bench.h"
#include "internal.h"

#ifndef __AVX512F__
int main(void)
{
    fprintf(stderr, "error: this prototype needs AVX-512 (compiled without __AVX512F__)\n");
    return 3;
}
#else
#include <immintrin.h>

#define LANES 8

#ifdef LANES_CONTIG
#define ROW_LOAD(v, rows, rv) _mm512_loadu_pd((v) + (rv)*LANES)
#define ROW_STORE(v, rows, rv, s) _mm512_storeu_pd((v) + (rv)*LANES, (s))
#define ROW_LOAD_F(v, rows, rv) _mm256_loadu_ps((v) + (rv)*LANES)
#else
#define ROW_LOAD(v, rows, rv) _mm512_i32gather_pd((rows), (v), 8)
#define ROW_STORE(v, rows, rv, s) _mm512_i32scatter_pd((v), (rows), (s), 8)
#define ROW_LOAD_F(v, rows, rv) _mm256_i32gather_ps((v), (rows), 4)
#endif

/* Units of work per color: a lane group (8 blocks) or a single block. */
typedef struct {
    int nunits, *ucptr; /* units of color c: [ucptr[c], ucptr[c+1]) */
    int *ufirst, *ulanes; /* first block, 1 or LANES */
    int64_t *urv;         /* a group's first vector row (for single blocks unused) */
    /* vector rows: for each, the slot offset and width, L (forward) and U (backward) */
    int64_t *loff, *uoff;
    int32_t *lw, *uw;
    int32_t *lidx, *uidx; /* LANES per slot */
    float *lval, *uval;
} lanes;

/* The widths of vector row k of the lane group from block b: the most L and U
 * entries of row k among its eight blocks. */
static void widths(const bc_local *L, int b, int k, int *wl, int *wu)
{
    int64_t ml = 0, mu = 0;
    for (int j = 0; j < LANES; j++) {
        const int i = L->bstart[b + j] + k;
        ml = L->lptr[i + 1] - L->lptr[i] > ml ? L->lptr[i + 1] - L->lptr[i] : ml;
        mu = L->uptr[i + 1] - L->uptr[i] > mu ? L->uptr[i + 1] - L->uptr[i] : mu;
    }
    *wl = (int)ml, *wu = (int)mu;
}

/* Group the blocks and lay out the lane groups' entries; padding slots have
 * index n (z[n] is kept 0) and value 0.  0, or -1 without the memory. */
static int build_lanes(const bc_local *L, lanes *G)
{
    const int n = L->nloc;
    memset(G, 0, sizeof *G);
    G->ucptr = calloc((size_t)L->ncolors + 1, sizeof(int));
    G->ufirst = malloc((size_t)L->nblocks * sizeof(int));
    G->ulanes = malloc((size_t)L->nblocks * sizeof(int));
    G->urv = malloc((size_t)L->nblocks * sizeof(int64_t));
    if (!G->ucptr || !G->ufirst || !G->ulanes || !G->urv)
        return -1;
    int64_t nrv = 0, lslots = 0, uslots = 0;
    for (int c = 0; c < L->ncolors; c++) {
        int b = L->cptr[c];
        while (b < L->cptr[c + 1]) {
            const int m = L->bstart[b + 1] - L->bstart[b];
            int same = b + LANES <= L->cptr[c + 1];
            for (int j = 1; same && j < LANES; j++)
                same = L->bstart[b + j + 1] - L->bstart[b + j] == m;
            G->ufirst[G->nunits] = b;
            if (same) {
                G->ulanes[G->nunits] = LANES;
                G->urv[G->nunits] = nrv;
                for (int k = 0; k < m; k++) {
                    int wl, wu;
                    widths(L, b, k, &wl, &wu);
                    lslots += wl, uslots += wu, nrv++;
                }
                b += LANES;
            } else {
                G->ulanes[G->nunits] = 1;
                b += 1;
            }
            G->nunits++;
        }
        G->ucptr[c + 1] = G->nunits;
    }
    G->loff = malloc((size_t)(nrv + 1) * sizeof(int64_t));
    G->uoff = malloc((size_t)(nrv + 1) * sizeof(int64_t));
    G->lw = malloc((size_t)(nrv + 1) * sizeof(int32_t));
    G->uw = malloc((size_t)(nrv + 1) * sizeof(int32_t));
    G->lidx = malloc((size_t)(lslots + 1) * LANES * sizeof(int32_t));
    G->uidx = malloc((size_t)(uslots + 1) * LANES * sizeof(int32_t));
    G->lval = malloc((size_t)(lslots + 1) * LANES * sizeof(float));
    G->uval = malloc((size_t)(uslots + 1) * LANES * sizeof(float));
    if (!G->loff || !G->uoff || !G->lw || !G->uw || !G->lidx || !G->uidx || !G->lval || !G->uval)
        return -1;
    int64_t rv = 0, lo = 0, uo = 0;
    for (int u = 0; u < G->nunits; u++) {
        if (G->ulanes[u] != LANES)
            continue;
        const int b = G->ufirst[u], m = L->bstart[b + 1] - L->bstart[b];
        for (int k = 0; k < m; k++, rv++) {
            int wl, wu;
            widths(L, b, k, &wl, &wu);
            G->loff[rv] = lo, G->lw[rv] = wl, G->uoff[rv] = uo, G->uw[rv] = wu;
            for (int j = 0; j < LANES; j++) {
                const int i = L->bstart[b + j] + k;
                const int64_t l0 = L->lptr[i], nl = L->lptr[i + 1] - l0;
                for (int t = 0; t < wl; t++) {
                    G->lidx[(lo + t) * LANES + j] = t < nl ? L->lidx[l0 + t] : n;
                    G->lval[(lo + t) * LANES + j] = t < nl ? L->lval32[l0 + t] : 0.0f;
                }
                /* backward: the entries outside the block first, then inside */
                const int64_t u0 = L->uptr[i], nu = L->uptr[i + 1] - u0, in = L->uin[i];
                for (int t = 0; t < wu; t++) {
                    const int64_t p = t < nu - in ? u0 + in + t : u0 + (t - (nu - in));
                    G->uidx[(uo + t) * LANES + j] = t < nu ? L->uidx[p] : n;
                    G->uval[(uo + t) * LANES + j] = t < nu ? L->uval32[p] : 0.0f;
                }
            }
            lo += wl, uo += wu;
        }
    }
    return 0;
}

/* s minus the w slots from slot `off` of a lane layout (idx, val): each lane's
 * value times z at its index, in slot order. */
static inline __m512d minus_slots(__m512d s, const int32_t *idx, const float *val, int64_t off,
                                  int w, const double *z)
{
    for (int t = 0; t < w; t++) {
        const int64_t at = (off + t) * LANES;
        const __m256i ix = _mm256_loadu_si256((const __m256i *)(idx + at));
        const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(val + at));
        s = _mm512_fnmadd_pd(v, _mm512_i32gather_pd(ix, z, 8), s);
    }
    return s;
}

/* z = M^-1 r (no CG update), rr = r'r, rz = r'z; z has n + 1 entries, z[n] = 0. */
static void precond_lanes(const bc_local *L, const lanes *G, const double *r, double *z,
                          double *rr_out, double *rz_out)
{
    double rr = 0.0, rz = 0.0;
    const float *dinv = L->dinv32;
#pragma omp parallel reduction(+ : rr, rz)
    {
        __m512d vrr = _mm512_setzero_pd(), vrz = _mm512_setzero_pd();
        for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static)
            for (int u = G->ucptr[c]; u < G->ucptr[c + 1]; u++) {
                const int b = G->ufirst[u];
                if (G->ulanes[u] == 1) {
                    for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++) {
                        double s = r[i];
                        rr += s * s;
                        for (int64_t p = L->lptr[i]; p < L->lptr[i + 1]; p++)
                            s -= (double)L->lval32[p] * z[L->lidx[p]];
                        z[i] = s;
                    }
                    continue;
                }
                const int m = L->bstart[b + 1] - L->bstart[b];
                __m256i rows = _mm256_loadu_si256((const __m256i *)(L->bstart + b));
                const __m256i one = _mm256_set1_epi32(1);
                for (int k = 0; k < m; k++, rows = _mm256_add_epi32(rows, one)) {
                    const int64_t rv = G->urv[u] + k;
                    __m512d s = ROW_LOAD(r, rows, rv);
                    vrr = _mm512_fmadd_pd(s, s, vrr);
                    s = minus_slots(s, G->lidx, G->lval, G->loff[rv], G->lw[rv], z);
                    ROW_STORE(z, rows, rv, s);
                }
            }
        }
        for (int c = L->ncolors - 1; c >= 0; c--) {
#pragma omp for schedule(static)
            for (int u = G->ucptr[c]; u < G->ucptr[c + 1]; u++) {
                const int b = G->ufirst[u];
                if (G->ulanes[u] == 1) {
                    for (int i = L->bstart[b + 1] - 1; i >= L->bstart[b]; i--) {
                        const double w = z[i];
                        double s = w * (double)dinv[i];
                        rz += w * s;
                        for (int64_t p = L->uptr[i] + L->uin[i]; p < L->uptr[i + 1]; p++)
                            s -= (double)L->uval32[p] * z[L->uidx[p]];
                        for (int64_t p = L->uptr[i]; p < L->uptr[i] + L->uin[i]; p++)
                            s -= (double)L->uval32[p] * z[L->uidx[p]];
                        z[i] = s;
                    }
                    continue;
                }
                const int m = L->bstart[b + 1] - L->bstart[b];
                __m256i rows = _mm256_add_epi32(
                    _mm256_loadu_si256((const __m256i *)(L->bstart + b)), _mm256_set1_epi32(m - 1));
                const __m256i one = _mm256_set1_epi32(1);
                for (int k = m - 1; k >= 0; k--, rows = _mm256_sub_epi32(rows, one)) {
                    const int64_t rv = G->urv[u] + k;
                    const __m512d w = ROW_LOAD(z, rows, rv);
                    __m512d s = _mm512_mul_pd(w, _mm512_cvtps_pd(ROW_LOAD_F(dinv, rows, rv)));
                    vrz = _mm512_fmadd_pd(w, s, vrz);
                    s = minus_slots(s, G->uidx, G->uval, G->uoff[rv], G->uw[rv], z);
                    ROW_STORE(z, rows, rv, s);
                }
            }
        }
        rr += _mm512_reduce_add_pd(vrr);
        rz += _mm512_reduce_add_pd(vrz);
    }
    *rr_out = rr;
    *rz_out = rz;
}

/* The two timed, variant v: the solver's preconditioner, the prototype. */
typedef struct {
    const bc_local *L;
    const lanes *G;
    double *x, *z0, *z1, rr, rz; /* x read only */
} lanes_ctx;

static void lanes_call(void *vc, int v)
{
    lanes_ctx *c = vc;
    if (v == 0)
        bc_precond(c->L, 0.0, NULL, c->x, c->z0, &c->rr, &c->rz);
    else
        precond_lanes(c->L, c->G, c->x, c->z1, &c->rr, &c->rz);
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: %s NX NY NZ ROUNDS TX TY TZ\n", argv[0]);
        return 2;
    }
    MPI_Init(&argc, &argv);
    const bc_gidx nx = atol(argv[1]), ny = atol(argv[2]), nz = atol(argv[3]);
    const int rounds = atoi(argv[4]);
    const bc_gidx n = nx * ny * nz;
    if (rounds < 1) {
        fprintf(stderr, "error: bad sizes or no memory\n");
        return 2;
    }
    bc_params p = {.block_size = 32, .colors = 20, .grid = {nx, ny, nz},
                   .tile = {atoi(argv[5]), atoi(argv[6]), atoi(argv[7])}};
    bc_local L;
    lanes G;
    /* n - 1 at most: the padding slots index z[n] */
    const int rc = poisson_setup(nx, ny, nz, 0x7ffffffe, &p, 1, &L);
    if (rc != 0)
        return rc;
    if (build_lanes(&L, &G) != 0) {
        fprintf(stderr, "error: setup failed\n");
        return 1;
    }
    int grouped = 0; /* rows swept in lane groups */
    for (int u = 0; u < G.nunits; u++)
        if (G.ulanes[u] == LANES)
            grouped += LANES * (L.bstart[G.ufirst[u] + 1] - L.bstart[G.ufirst[u]]);
    double *x = bc_alloc((size_t)n, sizeof *x), *z0 = bc_alloc((size_t)n + 1, sizeof *z0),
           *z1 = bc_alloc((size_t)n + 1, sizeof *z1), *t = malloc(4 * (size_t)rounds * sizeof *t);
    if (!x || !z0 || !z1 || !t || flush_init() != 0) {
        fprintf(stderr, "error: no memory\n");
        return 2;
    }
#pragma omp parallel for schedule(static)
    for (bc_gidx i = 0; i < n; i++)
        x[i] = 1.0 + (double)(i % 7), z0[i] = z1[i] = 0.0;
    z0[n] = z1[n] = 0.0;

    double rr0, rz0, rr1, rz1;
    bc_precond(&L, 0.0, NULL, x, z0, &rr0, &rz0);
    precond_lanes(&L, &G, x, z1, &rr1, &rz1);
    double dz = 0.0, zmax = 0.0; /* z's largest difference, relative to its largest entry */
    for (bc_gidx i = 0; i < n; i++)
        dz = fmax(dz, fabs(z1[i] - z0[i])), zmax = fmax(zmax, fabs(z0[i]));

    lanes_ctx ctx = {&L, &G, x, z0, z1, 0.0, 0.0};
    double ms[4];
    time_alternating(2, rounds, lanes_call, &ctx, t, ms);
    printf("{\"n\": %lld, \"threads\": %d, \"rounds\": %d, \"blocks\": %d, \"rows_in_groups\": %d, "
           "\"precond_ms\": %.4f, \"lanes_ms\": %.4f, \"precond_warm_ms\": %.4f, "
           "\"lanes_warm_ms\": %.4f, \"z_max_rel_diff\": %.3g, \"rr_rel_diff\": %.3g, "
           "\"rz_rel_diff\": %.3g}\n",
           (long long)n, omp_get_max_threads(), rounds, L.nblocks, grouped, ms[0], ms[1],
           ms[2], ms[3], dz / zmax, fabs(rr1 - rr0) / rr0, fabs(rz1 - rz0) / rz0);
    MPI_Finalize();
    return 0;
}
#endif
