/*
 * ic0.c - IC(0) of a rank's diagonal block in the multicolor numbering, and
 * its application z = M^-1 r = U^-1 D^-1 U^-T r by two substitutions.
 *
 * M = U^T D U = (I + L) D (I + L^T) with L strictly lower on the pattern of
 * A.  Row i of L and its pivot d_i need only rows of earlier colors and the
 * earlier rows of i's own block, so the factorization, like the forward
 * substitution, runs color by color with the blocks of a color in parallel;
 * the backward substitution runs the colors in reverse.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Row i of L and d_i; returns 0 when the pivot is not positive. */
static int factor_row(bc_local *L, int i, double shift, double *d)
{
    const int64_t l0 = L->lptr[i], l1 = L->lptr[i + 1];
    double diag = 0.0;
    /* the diagonal of A, and L's row with A's values before elimination */
    for (int64_t k = L->rowptr[i], m = l0; k < L->rowptr[i + 1]; k++) {
        int c = L->col[k];
        if (c < i)
            L->lval[m++] = L->val[k];
        else if (c == i)
            diag = L->val[k];
    }
    for (int64_t p = l0; p < l1; p++) {
        int k = L->lidx[p];
        /* a_ik - sum over j < k of l_ij d_j l_kj: merge row i (before k) with row k */
        double s = L->lval[p];
        int64_t q = l0, e = L->lptr[k + 1];
        for (int64_t r = L->lptr[k]; q < p && r < e;) {
            if (L->lidx[q] < L->lidx[r])
                q++;
            else if (L->lidx[q] > L->lidx[r])
                r++;
            else
                s -= L->lval[q++] * d[L->lidx[r]] * L->lval[r], r++;
        }
        L->lval[p] = s / d[k];
    }
    double piv = diag * (1.0 + shift);
    for (int64_t p = l0; p < l1; p++)
        piv -= L->lval[p] * L->lval[p] * d[L->lidx[p]];
    d[i] = piv;
    /* positive, and not lost to cancellation against the diagonal */
    return piv > 64.0 * DBL_EPSILON * fabs(diag) && isfinite(piv);
}

/* One attempt at the factorization with diagonal shift `shift`. */
static int factor_all(bc_local *L, double shift, double *d)
{
    int ok = 1;
#pragma omp parallel
    for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static) reduction(& : ok)
        for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++)
            for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++)
                ok &= factor_row(L, i, shift, d);
    }
    return ok;
}

/* The factor's values rounded to single precision; the double ones freed. */
static int to_single(bc_local *L)
{
    const int n = L->nloc;
    const int64_t nl = L->lptr[n];
    L->lval32 = bc_alloc((size_t)nl, sizeof(float));
    L->uval32 = bc_alloc((size_t)nl, sizeof(float));
    L->dinv32 = bc_alloc((size_t)n, sizeof(float));
    if (!L->lval32 || !L->uval32 || !L->dinv32)
        return BC_ENOMEM;
#pragma omp parallel /* first touch by the thread that sweeps the block */
    for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static)
        for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++)
            for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++) {
                L->dinv32[i] = (float)L->dinv[i];
                for (int64_t p = L->lptr[i]; p < L->lptr[i + 1]; p++)
                    L->lval32[p] = (float)L->lval[p];
                for (int64_t p = L->uptr[i]; p < L->uptr[i + 1]; p++)
                    L->uval32[p] = (float)L->uval[p];
            }
    }
    free(L->lval), free(L->uval), free(L->dinv);
    L->lval = L->uval = L->dinv = NULL;
    return BC_OK;
}

/* U = L^T where the local pattern is symmetric, as it is for a symmetric
 * matrix without one-sided explicit zeros (the caller checks the values, not
 * the pattern): row i of U is row i's columns j, i < j < nloc, and u_ij = l_ji
 * is found in row j of L by bisection.  In parallel, rows independent.
 * Returns 0, leaving U unset, where the pattern is not symmetric. */
static int transpose_symmetric(bc_local *L)
{
    const int n = L->nloc;
    L->uptr[0] = 0;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        int64_t cnt = 0;
        for (int64_t k = L->rowptr[i]; k < L->rowptr[i + 1]; k++)
            cnt += L->col[k] > i && L->col[k] < n;
        L->uptr[i + 1] = cnt;
    }
    for (int i = 0; i < n; i++)
        L->uptr[i + 1] += L->uptr[i];
    if (L->uptr[n] != L->lptr[n])
        return 0;
    int ok = 1;
#pragma omp parallel for schedule(static) reduction(& : ok)
    for (int i = 0; i < n; i++) {
        int64_t at = L->uptr[i];
        for (int64_t k = L->rowptr[i]; k < L->rowptr[i + 1]; k++) {
            const int j = L->col[k];
            if (j <= i || j >= n)
                continue;
            int64_t lo = L->lptr[j], hi = L->lptr[j + 1];
            while (lo < hi) {
                const int64_t mid = lo + (hi - lo) / 2;
                if (L->lidx[mid] < i)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            ok &= lo < L->lptr[j + 1] && L->lidx[lo] == i;
            L->uidx[at] = j;
            L->uval[at++] = ok ? L->lval[lo] : 0.0;
        }
    }
    return ok;
}

/* U = L^T by a counting sort (any pattern; one thread). */
static void transpose_serial(bc_local *L)
{
    const int n = L->nloc;
    const int64_t nl = L->lptr[n];
    memset(L->uptr, 0, ((size_t)n + 2) * sizeof(int64_t));
    for (int64_t p = 0; p < nl; p++)
        L->uptr[L->lidx[p] + 2]++;
    for (int i = 0; i < n; i++)
        L->uptr[i + 2] += L->uptr[i + 1];
    for (int i = 0; i < n; i++)
        for (int64_t p = L->lptr[i]; p < L->lptr[i + 1]; p++) {
            int64_t at = L->uptr[L->lidx[p] + 1]++;
            L->uidx[at] = i;
            L->uval[at] = L->lval[p];
        }
}

int bc_factor(bc_local *L, int single)
{
    const int n = L->nloc;
    L->lptr = bc_alloc((size_t)n + 1, sizeof(int64_t));
    L->uptr = bc_alloc((size_t)n + 2, sizeof(int64_t));
    L->dinv = bc_alloc((size_t)n, sizeof(double));
    if (!L->lptr || !L->uptr || !L->dinv)
        return BC_ENOMEM;
    memset(L->uptr, 0, ((size_t)n + 2) * sizeof(int64_t));
    /* pattern: the strictly lower entries of each (sorted) row inside the rank */
    L->lptr[0] = 0;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        int64_t cnt = 0;
        for (int64_t k = L->rowptr[i]; k < L->rowptr[i + 1]; k++)
            cnt += L->col[k] < i;
        L->lptr[i + 1] = cnt;
    }
    for (int i = 0; i < n; i++)
        L->lptr[i + 1] += L->lptr[i];
    const int64_t nl = L->lptr[n];
    L->lidx = bc_alloc((size_t)nl, sizeof(int32_t));
    L->lval = bc_alloc((size_t)nl, sizeof(double));
    L->uidx = bc_alloc((size_t)nl, sizeof(int32_t));
    L->uval = bc_alloc((size_t)nl, sizeof(double));
    if (!L->lidx || !L->lval || !L->uidx || !L->uval)
        return BC_ENOMEM;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        int64_t m = L->lptr[i];
        for (int64_t k = L->rowptr[i]; k < L->rowptr[i + 1]; k++)
            if (L->col[k] < i)
                L->lidx[m++] = L->col[k];
    }
    /* A non-positive pivot: retry with A + shift * diag(A), the shift growing
     * tenfold from 1e-4 (Manteuffel); the shift used is reported. */
    double *d = L->dinv;
    L->shift = 0.0;
    while (!factor_all(L, L->shift, d)) {
        L->shift = L->shift == 0.0 ? 1e-4 : L->shift * 10.0;
        if (L->shift > 1e4)
            return BC_EBREAKDOWN;
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        d[i] = 1.0 / d[i];
    L->lin = bc_alloc((size_t)n, sizeof(int32_t));
    L->uin = bc_alloc((size_t)n, sizeof(int32_t));
    if (!L->lin || !L->uin)
        return BC_ENOMEM;
    if (!transpose_symmetric(L))
        transpose_serial(L);
    /* rows are sorted: a row's own-block entries are its last lower ones (other
     * blocks in L are of earlier colors) and its first upper ones */
#pragma omp parallel for schedule(static)
    for (int b = 0; b < L->nblocks; b++)
        for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++) {
            int32_t cl = 0, cu = 0;
            for (int64_t p = L->lptr[i]; p < L->lptr[i + 1]; p++)
                cl += L->lidx[p] >= L->bstart[b];
            for (int64_t p = L->uptr[i]; p < L->uptr[i + 1]; p++)
                cu += L->uidx[p] < L->bstart[b + 1];
            L->lin[i] = cl;
            L->uin[i] = cu;
        }
    return single ? to_single(L) : BC_OK;
}

/* The substitutions, once per precision of the factor's values (sweeps.h). */
#define BC_FT double
#define BC_SWEEPS sweeps_double
#include "sweeps.h"
#define BC_FT float
#define BC_SWEEPS sweeps_float
#include "sweeps.h"

void bc_precond(const bc_local *L, double alpha, const double *q, double *r, double *z,
                double *rr, double *rz)
{
    if (L->lval32)
        sweeps_float(L, L->lval32, L->uval32, L->dinv32, alpha, q, r, z, rr, rz);
    else
        sweeps_double(L, L->lval, L->uval, L->dinv, alpha, q, r, z, rr, rz);
}
