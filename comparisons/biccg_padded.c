/*
 * biccg_padded.c - the solver's sweeps (bc_precond) beside the same sweeps
 * with each row's two passes padded to K entries (zero coefficients, the row
 * itself as their column), fixed trip counts, unrolled, in the solver's
 * pages (bc_alloc) and without its prefetch (off here up to 128^3: z fits
 * the VM's 32 MiB L3, and the solver does not prefetch either): whether
 * the sweeps are bound by their loops' varying trip counts or by their
 * instructions
 * (comparisons/README.md, "Setup from the caller's CSR; padded sweeps").
 * Tiles of the grid, 20 colors, the single-precision factor, as the solver
 * sets up.  Run by biccg_lanes.py; usage: NX NY NZ ROUNDS TX TY TZ.  One
 * JSON line: the medians of ROUNDS alternating calls, each after a flush
 * and once more at once (warm), and z's largest difference.  Exit 3 where a
 * row has more than K entries in a pass.
 */
#include <math.h>

#include "biccg_bench.h"

#define K 3 /* a 7-point row's lower (upper) entries: at most 3 */

/* A pass's entries, K a row: columns and values. */
typedef struct {
    int32_t *idx;
    float *val;
} slots;

/* The forward sweep's passes (to other blocks, inside the block), then the backward's. */
static slots fo, fi, bo, bi;

/* Fills s from the entries [p0, p1) of idx/val for row i; 0 where they fit. */
static int pad_row(slots s, int i, int64_t p0, int64_t p1, const int32_t *idx, const float *val)
{
    if (p1 - p0 > K)
        return 1;
    int k = 0;
    for (int64_t p = p0; p < p1; p++, k++)
        s.idx[(size_t)i * K + k] = idx[p], s.val[(size_t)i * K + k] = val[p];
    for (; k < K; k++)
        s.idx[(size_t)i * K + k] = i, s.val[(size_t)i * K + k] = 0.0f;
    return 0;
}

/* The padded copies of L's factor; 0, 2 where there is no memory, 3 where a row does not fit. */
static int pad(const bc_local *L)
{
    const size_t n = (size_t)L->nloc;
    slots *all[] = {&fo, &fi, &bo, &bi};
    for (int k = 0; k < 4; k++) {
        all[k]->idx = bc_alloc(n * K, sizeof(int32_t)); /* the solver's pages, as its factor */
        all[k]->val = bc_alloc(n * K, sizeof(float));
        if (!all[k]->idx || !all[k]->val)
            return 2;
    }
    int bad = 0;
    for (int i = 0; i < L->nloc; i++) {
        const int64_t e = L->lptr[i + 1] - L->lin[i], u = L->uptr[i] + L->uin[i];
        bad |= pad_row(fo, i, L->lptr[i], e, L->lidx, L->lval32);
        bad |= pad_row(fi, i, e, L->lptr[i + 1], L->lidx, L->lval32);
        bad |= pad_row(bo, i, u, L->uptr[i + 1], L->uidx, L->uval32);
        bad |= pad_row(bi, i, L->uptr[i], u, L->uidx, L->uval32);
    }
    return bad ? 3 : 0;
}

/* s minus row i's K padded terms. */
static inline double minus(double s, slots t, int i, const double *z)
{
    const int32_t *c = t.idx + (size_t)i * K;
    const float *v = t.val + (size_t)i * K;
    s -= v[0] * z[c[0]];
    s -= v[1] * z[c[1]];
    s -= v[2] * z[c[2]];
    return s;
}

/* z = M^-1 r as bc_precond computes it (q NULL), on the padded copies. */
static void precond_padded(const bc_local *L, const double *r, double *z, double *rr_out,
                           double *rz_out)
{
    double rr = 0.0, rz = 0.0;
    const float *dinv = L->dinv32;
#pragma omp parallel reduction(+ : rr, rz)
    {
        for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static)
            for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++) {
                const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
                for (int i = i0; i < i1; i++) {
                    rr += r[i] * r[i];
                    z[i] = minus(r[i], fo, i, z);
                }
                for (int i = i0; i < i1; i++)
                    z[i] = minus(z[i], fi, i, z);
            }
        }
        for (int c = L->ncolors - 1; c >= 0; c--) {
#pragma omp for schedule(static)
            for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++) {
                const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
                for (int i = i0; i < i1; i++) {
                    const double w = z[i], s = w * dinv[i];
                    rz += w * s;
                    z[i] = minus(s, bo, i, z);
                }
                for (int i = i1 - 1; i >= i0; i--)
                    z[i] = minus(z[i], bi, i, z);
            }
        }
    }
    *rr_out = rr, *rz_out = rz;
}

typedef struct {
    bc_local *L;
    double *x, *y, rr, rz;
} kernel_ctx;

static void kernel_call(void *vc, int v)
{
    kernel_ctx *c = vc;
    if (v == 0)
        bc_precond(c->L, 0.0, NULL, c->x, c->y, &c->rr, &c->rz);
    else
        precond_padded(c->L, c->x, c->y, &c->rr, &c->rz);
}

int main(int argc, char **argv)
{
    tile_bench b;
    int rc = tile_bench_init(argc, argv, &b);
    if (rc != 0)
        return rc;
    if ((rc = pad(&b.L)) != 0) {
        fprintf(stderr, rc == 3 ? "error: a row has more than %d entries in a pass\n"
                                : "error: no memory\n", K);
        MPI_Finalize();
        return rc;
    }
    /* y starts zeroed: z's padding reads z[i] before it is written */
    double rr, rz;
    bc_precond(&b.L, 0.0, NULL, b.x, b.y0, &rr, &rz);
    precond_padded(&b.L, b.x, b.y, &rr, &rz);
    const double dz = max_rel_diff(b.y, b.y0, (size_t)b.n);
    kernel_ctx ctx = {&b.L, b.x, b.y, 0.0, 0.0};
    double ms[4];
    time_alternating(2, b.rounds, kernel_call, &ctx, b.t, ms);
    printf("{\"n\": %lld, \"threads\": %d, \"rounds\": %d, \"precond_ms\": %.4f, "
           "\"padded_ms\": %.4f, \"precond_warm_ms\": %.4f, \"padded_warm_ms\": %.4f, "
           "\"z_max_rel_diff\": %.3g}\n",
           (long long)b.n, omp_get_max_threads(), b.rounds, ms[0], ms[1], ms[2], ms[3],
           dz);
    MPI_Finalize();
    return 0;
}
