/*
 * biccg_eisenstat.c - the solver's PCG iteration (bc_spmv, bc_precond and the
 * vector updates, as cg.c's cg_iterate ran them on one rank before its vector
 * updates followed the sweeps' share of rows, f224dd6) beside CG on
 * the same system in Eisenstat's form, which has no SpMV (comparisons/README.md,
 * "Eisenstat's form: CG without its SpMV").
 *
 * Where IC(0) eliminates nothing (no j < k < i with a_ij, a_ik, a_kj all in
 * the pattern: a 7-point grid), its factor is M = (D + L) D^-1 (D + U), with L
 * and U A's own strictly lower and upper parts and d_i = a_ii - sum_j<i
 * a_ij^2 / d_j.  With S = D^-1/2, L' = S L S, U' = S U S and K = 2 I - S D_A S,
 * A's scaled copy S A S = (I + L') + (I + U') - K, so the preconditioned
 * operator needs no product with A (Eisenstat 1981):
 *   (I + L')^-1 S A S (I + U')^-1 v = t + (I + L')^-1 (v - K t), t = (I + U')^-1 v,
 * one backward and one forward substitution on A's scaled off-diagonal
 * values.  CG on that operator is PCG with M in exact arithmetic, x = S (I +
 * U')^-1 x', and the residual it stops on is r = S^-1 (I + L') r', computed in
 * the forward pass of the next step (a product on the values that pass reads
 * anyway).  L' and U' must be A's values in double: rounded to single they
 * would change the system, not only the preconditioner.
 *
 * Two forms: "eisenstat", three passes a step (the two substitutions, then x'
 * and r' updated with r''r'); "eisenstat_cg", two (Chronopoulos and Gear: the
 * operator on r', p' and q' by recurrences, all updates in the backward pass).
 * Row runs of 32 (the study's blocking; ROWS 1) or tiles 4x4x2, 20 colors, the
 * solver's single (SINGLE 1) or double factor for its own PCG; b = A 1, x0 =
 * 0, tol 1e-7.  usage: NX NY NZ ROUNDS ROWS SINGLE.  One JSON line: for each
 * form its iterations, true relative residual, solution's largest relative
 * difference from PCG's, solve time (medians of ROUNDS alternating solves,
 * each after a flush, and once more at once: warm) and its time over PCG's
 * round by round (median, min, max; flushed); the pivots'
 * largest relative difference from the solver's factor's; the setup of
 * Eisenstat's values from L's pattern.
 */
#include <math.h>

#include "biccg_bench.h"

#define TOL 1e-7
#define MAXIT 10000

/* Eisenstat's operator from A's copy in L (patterns lidx/uidx, A's rows). */
typedef struct {
    double *lv, *uv; /* a_ij s_i s_j in L's and U's patterns */
    double *k;       /* 2 - a_ii / d_i */
    double *d;       /* the pivots d_i */
    double *s;       /* d_i^-1/2 */
} eis_op;

/* A's value at (i, j) from its copy in L (row i's columns, in any order). */
static double a_at(const bc_local *L, int i, int j)
{
    for (int64_t k = L->rowptr[i]; k < L->rowptr[i + 1]; k++)
        if (L->col[k] == j)
            return L->val[k];
    return 0.0;
}

/* The pivots color by color (a row's lower columns are earlier colors or
 * earlier rows of its block), then the scaled values; 0, or 2 without memory. */
static int eis_setup(const bc_local *L, eis_op *e)
{
    const size_t n = (size_t)L->nloc;
    e->lv = bc_alloc((size_t)L->lptr[n], sizeof(double));
    e->uv = bc_alloc((size_t)L->uptr[n], sizeof(double));
    e->k = bc_alloc(n, sizeof(double)), e->d = bc_alloc(n, sizeof(double));
    e->s = bc_alloc(n, sizeof(double));
    if (!e->lv || !e->uv || !e->k || !e->d || !e->s)
        return 2;
#pragma omp parallel
    for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static)
        for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++)
            for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++) {
                const double aii = a_at(L, i, i);
                double d = aii;
                for (int64_t p = L->lptr[i]; p < L->lptr[i + 1]; p++) {
                    const int j = L->lidx[p];
                    const double a = a_at(L, i, j);
                    e->lv[p] = a;
                    d -= a * a / e->d[j];
                }
                e->d[i] = d;
                e->s[i] = 1.0 / sqrt(d);
                e->k[i] = 2.0 - aii / d;
            }
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < L->nloc; i++) {
        for (int64_t p = L->lptr[i]; p < L->lptr[i + 1]; p++)
            e->lv[p] *= e->s[i] * e->s[L->lidx[p]];
        for (int64_t p = L->uptr[i]; p < L->uptr[i + 1]; p++)
            e->uv[p] = a_at(L, i, L->uidx[p]) * e->s[i] * e->s[L->uidx[p]];
    }
    return 0;
}

/* Row i's terms of its L' row from `from` to `to`, subtracted from s. */
static inline double lsub(const bc_local *L, const eis_op *e, double s, int64_t from, int64_t to,
                          const double *v)
{
    for (int64_t p = from; p < to; p++)
        s -= e->lv[p] * v[L->lidx[p]];
    return s;
}

static inline double usub(const bc_local *L, const eis_op *e, double s, int64_t from, int64_t to,
                          const double *v)
{
    for (int64_t p = from; p < to; p++)
        s -= e->uv[p] * v[L->uidx[p]];
    return s;
}

/* v = (I + L')^-1 v in place (the start and the end's counterpart). */
static void lsolve(const bc_local *L, const eis_op *e, double *v)
{
#pragma omp parallel
    for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static)
        for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++)
            for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++)
                v[i] = lsub(L, e, v[i], L->lptr[i], L->lptr[i + 1], v);
    }
}

/* v = (I + U')^-1 v in place. */
static void usolve(const bc_local *L, const eis_op *e, double *v)
{
#pragma omp parallel
    for (int c = L->ncolors - 1; c >= 0; c--) {
#pragma omp for schedule(static)
        for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++)
            for (int i = L->bstart[b + 1] - 1; i >= L->bstart[b]; i--)
                v[i] = usub(L, e, v[i], L->uptr[i], L->uptr[i + 1], v);
    }
}

#define FORMS 3 /* PCG, eisenstat, eisenstat_cg */

typedef struct {
    const bc_local *L;
    eis_op e;
    double *b, *x, *r, *p, *q, *y, *w; /* b = A 1; the forms' vectors */
    double *xs[FORMS];                 /* each form's solution */
    int its[FORMS];
} bench;

static double sum_sq(const double *v, int n)
{
    double s = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int i = 0; i < n; i++)
        s += v[i] * v[i];
    return s;
}

/* The solver's PCG (cg.c, cg_iterate, one rank): x; the iterations. */
static int pcg(bench *B)
{
    const bc_local *L = B->L;
    const int n = L->nloc;
    double *x = B->x, *r = B->r, *p = B->p, *q = B->q, rr, rz, rznew;
    const double bnorm = sqrt(sum_sq(B->b, n));
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        x[i] = 0.0, r[i] = B->b[i];
    bc_precond(L, 0.0, NULL, r, q, &rr, &rz);
    double rel = sqrt(rr) / bnorm;
    memcpy(p, q, (size_t)n * sizeof *p);
    int it = 0;
    while (rel > TOL && it < MAXIT) {
        it++;
        const double alpha = rz / bc_spmv(L, p, q);
        bc_precond(L, alpha, q, r, q, &rr, &rznew);
        rel = sqrt(rr) / bnorm;
        const double beta = rznew / rz;
        rz = rznew;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            p[i] = q[i] + beta * p[i];
        }
    }
    return it;
}

/* CG in Eisenstat's form on x' = (I + U') S^-1 x, r' = (I + L')^-1 S r; x at
 * the end (in B->x); the iterations.  Each step the backward substitution t =
 * (I + U')^-1 v, then the forward one y = (I + L')^-1 (v - K t), the
 * operator's result t + y in t's array, and ||S^-1 (I + L') r'||^2 = ||r||^2
 * for the stop.  Where !cgg, v = p' (p' = r' + beta p' where the backward pass
 * reads it), and a third pass x' += alpha p', r' -= alpha q' with r''r'.  Where
 * cgg (Chronopoulos and Gear), v = r' and the backward pass first forms p' =
 * r' + beta p', q' = s + beta q', x' += alpha p', r' -= alpha q' (s, the last
 * operator's result, in t's array); the forward pass sums gamma = r''r' and
 * delta = r''s, and alpha = gamma / (delta - beta gamma / alpha_old).  (Taking
 * r''r' by its recurrence, r''r' - 2 alpha r''q' + alpha^2 q''q', instead
 * diverged: it cancels ever more as the residual falls.) */
static int eisenstat(bench *B, const int cgg)
{
    const bc_local *L = B->L;
    const eis_op *e = &B->e;
    const int n = L->nloc;
    double *x = B->x, *r = B->r, *p = B->p, *t = B->w, *y = B->y, *q = B->q;
    const double bnorm = sqrt(sum_sq(B->b, n));
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        x[i] = 0.0, r[i] = e->s[i] * B->b[i], p[i] = t[i] = q[i] = 0.0;
    lsolve(L, e, r);
    double alpha = 0.0, beta = 0.0, gamma_prev = 0.0, rho = 0.0;
    int it = 0;
    for (;;) {
        double *const v = cgg ? r : p;
        double rr = 0.0, pq = 0.0, rs = 0.0;
#pragma omp parallel reduction(+ : rr, pq, rs)
        {
            for (int c = L->ncolors - 1; c >= 0; c--) {
#pragma omp for schedule(static)
                for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++) {
                    const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
                    if (L->sweep_prefetch)
                        bc_prefetch_block(L, b + BC_PFB, L->cptr[c + 1], 1, t);
                    for (int i = i0; i < i1; i++) {
                        p[i] = r[i] + beta * p[i];
                        if (cgg) {
                            q[i] = t[i] + beta * q[i]; /* t holds s */
                            x[i] += alpha * p[i];
                            r[i] -= alpha * q[i];
                        }
                        t[i] = usub(L, e, v[i], L->uptr[i] + L->uin[i], L->uptr[i + 1], t);
                    }
                    double next = 0.0;
                    for (int i = i1 - 1; i >= i0; i--) {
                        const int64_t b0 = L->uptr[i], e1 = b0 + L->uin[i];
                        const int carry = L->uin[i] > 0 && L->uidx[b0] == i + 1;
                        double s = usub(L, e, t[i], b0 + carry, e1, t);
                        if (carry)
                            s -= e->uv[b0] * next;
                        t[i] = next = s;
                    }
                }
            }
            for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static)
                for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++) {
                    const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
                    if (L->sweep_prefetch) {
                        bc_prefetch_block(L, b + BC_PFB, L->cptr[c + 1], 0, y);
                        bc_prefetch_block(L, b + BC_PFB, L->cptr[c + 1], 0, r);
                    }
                    for (int i = i0; i < i1; i++) {
                        const int64_t e0 = L->lptr[i + 1] - L->lin[i];
                        const double u = -lsub(L, e, -r[i], L->lptr[i], L->lptr[i + 1], r);
                        rr += e->d[i] * u * u;
                        y[i] = lsub(L, e, v[i] - e->k[i] * t[i], L->lptr[i], e0, y);
                    }
                    double prev = 0.0;
                    for (int i = i0; i < i1; i++) {
                        const int64_t e1 = L->lptr[i + 1];
                        const int carry = L->lin[i] > 0 && L->lidx[e1 - 1] == i - 1;
                        double s = lsub(L, e, y[i], e1 - L->lin[i], e1 - carry, y);
                        if (carry)
                            s -= e->lv[e1 - 1] * prev;
                        y[i] = prev = s;
                        t[i] += s; /* the operator's result: s (cgg), else q' */
                        if (cgg)
                            pq += r[i] * r[i], rs += r[i] * t[i];
                        else
                            pq += p[i] * t[i];
                    }
                }
            }
        }
        if (sqrt(rr) / bnorm <= TOL || it == MAXIT)
            break;
        if (cgg) {
            const double gamma = pq;
            beta = it ? gamma / gamma_prev : 0.0;
            alpha = gamma / (rs - (it ? beta * gamma / alpha : 0.0));
            gamma_prev = gamma;
            it++;
            continue;
        }
        if (it == 0)
            rho = sum_sq(r, n);
        it++;
        alpha = rho / pq;
        double rho1 = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : rho1)
        for (int i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * t[i];
            rho1 += r[i] * r[i];
        }
        beta = rho1 / rho, rho = rho1;
    }
    usolve(L, e, x);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        x[i] *= e->s[i];
    return it;
}

static void call(void *ctx, int v)
{
    bench *B = ctx;
    B->its[v] = v == 0 ? pcg(B) : eisenstat(B, v == 2);
    memcpy(B->xs[v], B->x, (size_t)B->L->nloc * sizeof *B->x);
}

/* The true relative residual ||b - A x|| / ||b|| (r as scratch). */
static double true_residual(bench *B, const double *x)
{
    const int n = B->L->nloc;
    bc_spmv(B->L, x, B->r);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        B->r[i] = B->b[i] - B->r[i];
    return sqrt(sum_sq(B->r, n) / sum_sq(B->b, n));
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: %s NX NY NZ ROUNDS ROWS SINGLE\n", argv[0]);
        return 2;
    }
    MPI_Init(&argc, &argv);
    const bc_gidx nx = atol(argv[1]), ny = atol(argv[2]), nz = atol(argv[3]);
    const int rounds = atoi(argv[4]);
    bc_params prm = {.block_size = 32, .colors = 20, .grid = {nx, ny, nz}, .tile = {4, 4, 2}};
    if (atoi(argv[5])) /* the study's algebraic blocking: no grid */
        prm.grid[0] = prm.grid[1] = prm.grid[2] = 0;
    bc_local L;
    int rc = 2;
    if (rounds < 1)
        fprintf(stderr, "error: ROUNDS must be 1 or more\n");
    else
        rc = poisson_setup(nx, ny, nz, 0x7fffffff, &prm, atoi(argv[6]), &L);
    if (rc != 0) { /* poisson_setup said why where it failed */
        MPI_Finalize();
        return rc;
    }
    const size_t n = (size_t)L.nloc;
    bench B = {.L = &L};
    const double t0 = omp_get_wtime();
    rc = eis_setup(&L, &B.e);
    const double setup_s = omp_get_wtime() - t0;
    double *all[] = {B.b = bc_alloc(n, 8),     B.x = bc_alloc(n, 8),     B.r = bc_alloc(n, 8),
                     B.p = bc_alloc(n, 8),     B.q = bc_alloc(n, 8),     B.y = bc_alloc(n, 8),
                     B.w = bc_alloc(n, 8),     B.xs[0] = bc_alloc(n, 8), B.xs[1] = bc_alloc(n, 8),
                     B.xs[2] = bc_alloc(n, 8)};
    double *tt = malloc(2 * FORMS * (size_t)rounds * sizeof *tt), ms[2 * FORMS];
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        rc |= all[k] == NULL;
    if (rc != 0 || tt == NULL || flush_init() != 0) {
        fprintf(stderr, "error: no memory\n");
        MPI_Finalize();
        return 2;
    }
    for (size_t i = 0; i < n; i++)
        B.x[i] = 1.0;
    bc_spmv(&L, B.x, B.b);
    time_alternating(FORMS, rounds, call, &B, tt, ms);
    double dd = 0.0; /* the pivots against the solver's factor */
    for (size_t i = 0; i < n; i++)
        dd = fmax(dd, fabs(B.e.d[i] * (L.dinv32 ? (double)L.dinv32[i] : L.dinv[i]) - 1.0));
    printf("{\"n\": %zu, \"threads\": %d, \"rounds\": %d, \"setup_s\": %.4f, "
           "\"pivots_rel_diff\": %.3g",
           n, omp_get_max_threads(), rounds, setup_s, dd);
    const char *name[FORMS] = {"pcg", "eisenstat", "eisenstat_cg"};
    for (int v = 0; v < FORMS; v++) {
        double ratio[rounds]; /* this form's time over PCG's, round by round (flushed) */
        for (int k = 0; k < rounds; k++)
            ratio[k] = tt[v * rounds + k] / tt[k];
        const double mid = median(ratio, rounds); /* sorts: [0] and [rounds-1] the range */
        printf(", \"%s\": {\"iterations\": %d, \"residual\": %.4e, \"x_rel_diff\": %.3g, "
               "\"ms\": %.2f, \"warm_ms\": %.2f, \"ratio\": [%.3f, %.3f, %.3f]}",
               name[v], B.its[v], true_residual(&B, B.xs[v]), max_rel_diff(B.xs[v], B.xs[0], n),
               ms[v], ms[FORMS + v], mid, ratio[0], ratio[rounds - 1]);
    }
    printf("}\n");
    MPI_Finalize();
    return 0;
}
