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

/* Row i of L and d_i, in one pass over the row: each entry's column and A's
 * value copied in, eliminated, and subtracted from the pivot, in order (the
 * copies, the elimination, the pivot and the rounding were five loops a
 * row); where l32 is given, the row and 1/d_i rounded to float as they are
 * final.  Returns 0 when the pivot is not positive. */
static int factor_row(bc_local *L, int i, double shift, double *d, float *l32, float *d32)
{
    const int64_t l0 = L->lptr[i], l1 = L->lptr[i + 1];
    /* the row's columns ascend, so its l1 - l0 lower entries come first in A's
     * row and the diagonal (the last of equal ones, if any) next: no scan */
    const int64_t a0 = L->rowptr[i] - l0, k0 = L->rowptr[i] + (l1 - l0);
    double diag = 0.0;
    for (int64_t k = k0; k < L->rowptr[i + 1] && L->col[k] == i; k++)
        diag = L->val[k];
    double piv = diag * (1.0 + shift);
    for (int64_t p = l0; p < l1; p++) {
        const int k = L->lidx[p] = L->col[a0 + p];
        /* a_ik - sum over j < k of l_ij d_j l_kj: merge row i (before k) with
         * row k; row k is not read for the first entry (nothing precedes it) */
        double s = L->val[a0 + p];
        if (p > l0) {
            int64_t q = l0, e = L->lptr[k + 1];
            for (int64_t r = L->lptr[k]; q < p && r < e;) {
                if (L->lidx[q] < L->lidx[r])
                    q++;
                else if (L->lidx[q] > L->lidx[r])
                    r++;
                else
                    s -= L->lval[q++] * d[L->lidx[r]] * L->lval[r], r++;
            }
        }
        const double l = L->lval[p] = s / d[k];
        piv -= l * l * d[k];
        if (l32)
            l32[p] = (float)l;
    }
    d[i] = piv;
    if (d32)
        d32[i] = (float)(1.0 / piv);
    /* positive, and not lost to cancellation against the diagonal */
    return piv > 64.0 * DBL_EPSILON * fabs(diag) && isfinite(piv);
}

/* One attempt at the factorization with diagonal shift `shift`.  Where the
 * factor is kept in single precision (lval32 allocated), each row is rounded
 * as soon as it is final, while its values are still in cache: L's values
 * and 1/d to float (later rows keep reading the double ones, so the factor is
 * what rounding after the whole factorization gave, bit for bit); a separate
 * pass over 75 MB at 128^3 took 0.02-0.1 s. */
static int factor_all(bc_local *L, double shift, double *d)
{
    int ok = 1;
    float *const l32 = L->lval32, *const d32 = L->dinv32;
#pragma omp parallel
    for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static) reduction(& : ok)
        for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++)
            for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++)
                ok &= factor_row(L, i, shift, d, l32, d32);
    }
    return ok;
}

/* The pivots inverted where the factor stays double.  Where it is single (the
 * values already rounded by factor_all), the double pivots are freed, and U
 * is placed in the double L values' buffer, dead now: its 8 bytes an entry
 * hold U's column (first half) and float value (second half), so U takes no
 * fresh memory (a fresh page costs the kernel's zeroing, on this VM 1.4-12
 * GB/s for huge pages new to a process, comparisons/README.md: 50 MB at
 * 128^3).  Glibc's free() of that buffer would not have handed its pages to
 * U: above 32 MB it is unmapped.  bc_local_free frees uidx only. */
static void invert_pivots(bc_local *L, double *d)
{
    const int n = L->nloc;
    if (L->lval32 == NULL) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++)
            d[i] = 1.0 / d[i];
        L->dinv = d;
        return;
    }
    bc_free(d);
    L->uidx = (int32_t *)L->lval;
    L->uval32 = (float *)L->lval + L->lptr[n];
    L->uval_in_uidx = 1;
    L->lval = NULL;
}

/* U = L^T where the local pattern is symmetric, as it is for a symmetric
 * matrix without one-sided explicit zeros (the caller checks the values, not
 * the pattern): row i of U is row i's columns j, i < j < nloc (uptr counted
 * with L's pattern), and u_ij = l_ji is found in row j of L by bisection; in
 * the factor's precision.  In parallel, rows independent, each block by the
 * thread that sweeps it.  Returns 0, leaving U unset, where the pattern is
 * not symmetric. */
static int transpose_symmetric(bc_local *L)
{
    const int n = L->nloc;
    if (L->uptr[n] != L->lptr[n])
        return 0;
    int ok = 1;
#pragma omp parallel reduction(& : ok)
    for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static) nowait
        for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++)
            for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++) {
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
                    if (L->uval32)
                        L->uval32[at++] = ok ? L->lval32[lo] : 0.0f;
                    else
                        L->uval[at++] = ok ? L->lval[lo] : 0.0;
                }
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
            if (L->uval32)
                L->uval32[at] = L->lval32[p];
            else
                L->uval[at] = L->lval[p];
        }
}

int bc_factor(bc_local *L, int single)
{
    const int n = L->nloc;
    const int64_t nl = L->lptr[n];
    double *d = bc_alloc((size_t)n, sizeof(double));
    L->lidx = bc_alloc((size_t)nl, sizeof(int32_t));
    L->lval = bc_alloc((size_t)nl, sizeof(double));
    if (!d || !L->lidx || !L->lval) {
        bc_free(d);
        return BC_ENOMEM;
    }
    if (single) {
        L->lval32 = bc_alloc((size_t)L->lptr[n], sizeof(float));
        L->dinv32 = bc_alloc((size_t)n, sizeof(float));
        if (!L->lval32 || !L->dinv32) {
            bc_free(d);
            return BC_ENOMEM;
        }
    }
    BC_PHASE("factor: alloc");
    /* A non-positive pivot: retry with A + shift * diag(A), the shift growing
     * tenfold from 1e-4 (Manteuffel); the shift used is reported. */
    L->shift = 0.0;
    while (!factor_all(L, L->shift, d)) {
        L->shift = L->shift == 0.0 ? 1e-4 : L->shift * 10.0;
        if (L->shift > 1e4) {
            bc_free(d);
            return BC_EBREAKDOWN;
        }
    }
    BC_PHASE("factor: numeric");
    invert_pivots(L, d);
    BC_PHASE("factor: invert d");
    if (!single) {
        L->uidx = bc_alloc((size_t)nl, sizeof(int32_t));
        L->uval = bc_alloc((size_t)nl, sizeof(double));
        if (!L->uidx || !L->uval)
            return BC_ENOMEM;
    }
    if (!transpose_symmetric(L)) {
        transpose_serial(L);
        /* U's pattern is L's transposed, not A's upper one: count again */
#pragma omp parallel for schedule(static)
        for (int b = 0; b < L->nblocks; b++)
            for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++) {
                int32_t cu = 0;
                for (int64_t p = L->uptr[i]; p < L->uptr[i + 1]; p++)
                    cu += L->uidx[p] < L->bstart[b + 1];
                L->uin[i] = cu;
            }
    }
    BC_PHASE("factor: transpose");
    return BC_OK;
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
