/*
 * cg.c - the preconditioned conjugate gradient iteration and the setup that
 * precedes it; see biccg.h for the contract.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "internal.h"

#define HUGE_PAGE ((size_t)2 << 20)

void *bc_alloc(size_t count, size_t size)
{
    size_t bytes = (count > 0 ? count : 1) * size;
    if (bytes < HUGE_PAGE)
        return malloc(bytes);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, bytes) != 0)
        return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes, MADV_HUGEPAGE); /* advice only: ignored where THP is off */
#endif
    return p;
}

void bc_local_free(bc_local *L)
{
    void *all[] = {L->rowptr, L->col,   L->val,   L->cptr,   L->bstart, L->perm,
                   L->iperm,  L->dinv,  L->lptr,  L->uptr,   L->lidx,   L->uidx,
                   L->lval,   L->uval,  L->rrank, L->rcount, L->roff,   L->srank,
                   L->scount, L->soff,  L->sidx,  L->sbuf,   L->req,    L->halo_g,
                   L->lin,    L->uin,   L->pfptr, L->pf,     L->lval32, L->uval32,
                   L->dinv32};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        free(all[k]);
    memset(L, 0, sizeof *L);
}

double bc_spmv(const bc_local *L, const double *x, double *y)
{
    const int64_t end = L->rowptr[L->nloc];
    double xy = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : xy)
    for (int b = 0; b < L->nblocks; b++) {
        for (int part = 0; part < 3; part++)
            bc_prefetch_block(L, b + BC_PFB, L->nblocks, part, x);
        for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++) {
            double s = 0.0;
            bc_prefetch(L->val, L->rowptr[i], end, sizeof *L->val);
            bc_prefetch(L->col, L->rowptr[i], end, sizeof *L->col);
            for (int64_t k = L->rowptr[i]; k < L->rowptr[i + 1]; k++)
                s += L->val[k] * x[L->col[k]];
            y[i] = s;
            xy += x[i] * s;
        }
    }
    return xy;
}

static double dot(int n, const double *a, const double *b)
{
    double s = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* All ranks agree on one return code (the largest), so that none waits alone
 * in a collective after another has given up. */
static int agree(MPI_Comm comm, int rc)
{
    int all = rc;
    if (MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS)
        return BC_EMPI;
    return all;
}

static int finite_input(const bc_csr_in *a, const double *b)
{
    bc_gidx base = bc_in_ptr(a, 0), nnz = bc_in_ptr(a, a->nrows) - base;
    int ok = 1;
#pragma omp parallel for reduction(& : ok)
    for (bc_gidx k = 0; k < nnz; k++)
        ok &= isfinite(a->data[base + k]) != 0;
#pragma omp parallel for reduction(& : ok)
    for (bc_gidx i = 0; i < a->nrows; i++)
        ok &= isfinite(b[i]) != 0;
    return ok;
}

/* Residual r = b - A x (x with its halo filled), returns the local ||r||^2. */
static double residual(const bc_local *L, const double *b, const double *x, double *r)
{
    bc_spmv(L, x, r);
    double s = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int i = 0; i < L->nloc; i++) {
        r[i] = b[i] - r[i];
        s += r[i] * r[i];
    }
    return s;
}

int bc_solve(MPI_Comm comm, const bc_csr_in *a, const double *b_in, double *x_in,
             const bc_params *p, bc_result *out)
{
    bc_local L;
    memset(&L, 0, sizeof L);
    memset(out, 0, sizeof *out);
    out->breakdown_iteration = -1;
    double *b = NULL, *x = NULL, *r = NULL, *z = NULL, *pv = NULL, *q = NULL;
#ifdef _OPENMP
    if (p->threads > 0)
        omp_set_num_threads(p->threads);
#endif
    int rc = (p->block_size < 1 || p->colors < 1 || p->tol <= 0.0 || p->max_iter < 0 ||
              a->nrows < 1 || a->nrows > 0x7fffffff)
                 ? BC_EINVAL
                 : BC_OK;
    if (rc == BC_OK && !finite_input(a, b_in))
        rc = BC_ENOTFINITE;

    /* setup: ordering, local matrix, factor (no communication) */
    double t0 = MPI_Wtime();
    if (rc == BC_OK)
        rc = bc_order(a, p, &L, NULL);
    double t1 = MPI_Wtime();
    if (rc == BC_OK)
        rc = bc_build_local(a, &L);
    if (rc == BC_OK)
        rc = bc_prefetch_plan(&L);
    if (rc == BC_OK)
        rc = bc_factor(&L, p->single_factor);
    double t2 = MPI_Wtime();
    if ((rc = agree(comm, rc)) == BC_OK)
        rc = agree(comm, bc_halo_plan(comm, a, &L));
    double t3 = MPI_Wtime();
    if (rc != BC_OK)
        goto done;

    const int n = L.nloc;
    size_t ext = (size_t)n + (size_t)L.nhalo;
    b = bc_alloc((size_t)n, sizeof(double));
    x = bc_alloc(ext, sizeof(double));
    r = bc_alloc((size_t)n, sizeof(double));
    z = bc_alloc((size_t)n, sizeof(double));
    pv = bc_alloc(ext, sizeof(double));
    q = bc_alloc((size_t)n, sizeof(double));
    rc = agree(comm, (b && x && r && z && pv && q) ? BC_OK : BC_ENOMEM);
    if (rc != BC_OK)
        goto done;
#pragma omp parallel for schedule(static) /* first touch, in the new numbering */
    for (int i = 0; i < n; i++) {
        b[i] = b_in[L.perm[i]];
        x[i] = x_in[L.perm[i]];
        r[i] = z[i] = pv[i] = q[i] = 0.0;
    }
    for (size_t h = (size_t)n; h < ext; h++)
        x[h] = pv[h] = 0.0;
    if (p->keep_history) {
        out->history = malloc(((size_t)p->max_iter + 1) * sizeof(double));
        rc = agree(comm, out->history ? BC_OK : BC_ENOMEM);
        if (rc != BC_OK)
            goto done;
    }

    double sums[2], local[2], tw;
    double t_spmv = 0, t_pre = 0, t_dot = 0, t_halo = 0, t_vec = 0;
    double ts = MPI_Wtime();
    /* r = b - A x0 */
    tw = MPI_Wtime();
    rc = bc_halo_exchange(comm, &L, x);
    t_halo += MPI_Wtime() - tw;
    tw = MPI_Wtime();
    local[0] = residual(&L, b, x, r);
    local[1] = dot(n, b, b);
    t_spmv += MPI_Wtime() - tw;
    tw = MPI_Wtime();
    if (rc == BC_OK && MPI_Allreduce(local, sums, 2, MPI_DOUBLE, MPI_SUM, comm) != MPI_SUCCESS)
        rc = BC_EMPI;
    t_dot += MPI_Wtime() - tw;
    if (rc != BC_OK)
        goto done;
    const double bnorm = sqrt(sums[1]) > 0.0 ? sqrt(sums[1]) : 1.0;
    double rel = sqrt(sums[0]) / bnorm, rz = 0.0;
    if (out->history)
        out->history[0] = rel;
    /*
     * The iteration, in three passes over memory (p and q: the SpMV with the
     * dot p'q; r, q, z: both sweeps with the update of r and the sums r'r and
     * r'z; x, p, z: both vector updates), and two reductions.
     */
    int it = 0;
    if (rel > p->tol && p->max_iter > 0) {
        tw = MPI_Wtime();
        bc_precond(&L, 0.0, NULL, r, z, &local[0], &local[1]);
        t_pre += MPI_Wtime() - tw;
        tw = MPI_Wtime();
        if (MPI_Allreduce(&local[1], &rz, 1, MPI_DOUBLE, MPI_SUM, comm) != MPI_SUCCESS)
            rc = BC_EMPI;
        t_dot += MPI_Wtime() - tw;
        memcpy(pv, z, (size_t)n * sizeof(double));
    }
    while (rc == BC_OK && rel > p->tol && it < p->max_iter) {
        it++;
        tw = MPI_Wtime();
        rc = bc_halo_exchange(comm, &L, pv);
        t_halo += MPI_Wtime() - tw;
        tw = MPI_Wtime();
        local[0] = bc_spmv(&L, pv, q);
        t_spmv += MPI_Wtime() - tw;
        tw = MPI_Wtime();
        double pq = 0.0;
        if (rc == BC_OK && MPI_Allreduce(local, &pq, 1, MPI_DOUBLE, MPI_SUM, comm) != MPI_SUCCESS)
            rc = BC_EMPI;
        t_dot += MPI_Wtime() - tw;
        if (rc != BC_OK)
            break;
        if (!(pq > 0.0) || !(rz > 0.0)) { /* same on every rank: the sums are global */
            rc = BC_EBREAKDOWN;
            out->breakdown_iteration = it;
            break;
        }
        const double alpha = rz / pq;
        tw = MPI_Wtime();
        bc_precond(&L, alpha, q, r, z, &local[0], &local[1]);
        t_pre += MPI_Wtime() - tw;
        /* one reduction for both ||r||^2 and r'z */
        tw = MPI_Wtime();
        if (MPI_Allreduce(local, sums, 2, MPI_DOUBLE, MPI_SUM, comm) != MPI_SUCCESS)
            rc = BC_EMPI;
        t_dot += MPI_Wtime() - tw;
        rel = sqrt(sums[0]) / bnorm;
        if (out->history)
            out->history[it] = rel;
        const double beta = sums[1] / rz;
        rz = sums[1];
        tw = MPI_Wtime();
        if (rel > p->tol && it < p->max_iter) {
#pragma omp parallel for schedule(static)
            for (int i = 0; i < n; i++) {
                x[i] += alpha * pv[i];
                pv[i] = z[i] + beta * pv[i];
            }
        } else { /* the last iteration: no next direction */
#pragma omp parallel for schedule(static)
            for (int i = 0; i < n; i++)
                x[i] += alpha * pv[i];
        }
        t_vec += MPI_Wtime() - tw;
    }
    out->t_solve = MPI_Wtime() - ts;
    out->iterations = it;
    out->history_len = it + 1;
    out->cg_residual = rel;
    out->converged = rc == BC_OK && rel <= p->tol;
    if (rc == BC_OK) { /* the residual CG reports is recursive: recompute it */
        double rr = 0.0, rr_all = 0.0;
        rc = bc_halo_exchange(comm, &L, x);
        rr = residual(&L, b, x, r);
        if (rc == BC_OK &&
            MPI_Allreduce(&rr, &rr_all, 1, MPI_DOUBLE, MPI_SUM, comm) != MPI_SUCCESS)
            rc = BC_EMPI;
        out->relative_residual = sqrt(rr_all) / bnorm;
        out->converged = out->converged && out->relative_residual <= p->tol;
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        x_in[L.perm[i]] = x[i];

    /* report the slowest rank's times; the shift any rank needed */
    double tl[10] = {t1 - t0, t2 - t1, t3 - t2, out->t_solve, t_spmv, t_pre, t_dot, t_halo,
                     t_vec, L.shift};
    double tg[10];
    bc_gidx halo = L.nhalo, halo_all = 0;
    if (MPI_Allreduce(tl, tg, 10, MPI_DOUBLE, MPI_MAX, comm) != MPI_SUCCESS ||
        MPI_Allreduce(&halo, &halo_all, 1, MPI_INT64_T, MPI_SUM, comm) != MPI_SUCCESS)
        rc = BC_EMPI;
    else {
        out->t_ordering = tg[0];
        out->t_factor = tg[1];
        out->t_halo_setup = tg[2];
        out->t_solve = tg[3];
        out->t_spmv = tg[4];
        out->t_precond = tg[5];
        out->t_dots = tg[6];
        out->t_halo = tg[7];
        out->t_vector = tg[8];
        out->shift = tg[9];
        out->halo_rows = halo_all;
    }
    int c_all = L.ncolors;
    MPI_Allreduce(&L.ncolors, &c_all, 1, MPI_INT, MPI_MAX, comm);
    out->colors_used = c_all;
done:
    free(b);
    free(x);
    free(r);
    free(z);
    free(pv);
    free(q);
    bc_local_free(&L);
    return rc;
}

double bc_ic0(const bc_csr_in *a, double *d, bc_gidx *uptr, int32_t *uidx, double *uval)
{
    bc_local L;
    memset(&L, 0, sizeof L);
    if (a->row_begin != 0 || a->nrows != a->n || a->n < 1 || a->n > 0x7fffffff)
        return -1.0;
    /* one block of all rows, one color: the natural order, sequential */
    const bc_params one = {.block_size = (int)a->n, .colors = 1};
    if (bc_order(a, &one, &L, NULL) != BC_OK || bc_build_local(a, &L) != BC_OK ||
        bc_factor(&L, 0) != BC_OK) {
        bc_local_free(&L);
        return -1.0;
    }
    for (int i = 0; i < L.nloc; i++)
        d[i] = 1.0 / L.dinv[i];
    for (int i = 0; i <= L.nloc; i++)
        uptr[i] = L.uptr[i];
    memcpy(uidx, L.uidx, (size_t)L.uptr[L.nloc] * sizeof(int32_t));
    memcpy(uval, L.uval, (size_t)L.uptr[L.nloc] * sizeof(double));
    double shift = L.shift;
    bc_local_free(&L);
    return shift;
}
