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

/* Whether block b couples inside itself as a 4 x 4 x 2 tile of a 7-point
 * grid, rows x fastest: row k to k - 16, k - 4, k - 1 below and k + 1, k +
 * 4, k + 16 above, where the tile has them, in that order.  Read from the
 * pattern. */
static int tile_pattern(const bc_local *L, int b)
{
    const int i0 = L->bstart[b];
    if (L->bstart[b + 1] - i0 != 32)
        return 0;
    for (int k = 0; k < 32; k++) {
        const int x = k & 3, y = (k >> 2) & 3, z = k >> 4, i = i0 + k;
        const int lo[3] = {i - 16, i - 4, i - 1}, has_lo[3] = {z > 0, y > 0, x > 0};
        const int hi[3] = {i + 1, i + 4, i + 16}, has_hi[3] = {x < 3, y < 3, z < 1};
        if (L->lin[i] != has_lo[0] + has_lo[1] + has_lo[2] ||
            L->uin[i] != has_hi[0] + has_hi[1] + has_hi[2])
            return 0;
        int64_t pl = L->lptr[i + 1] - L->lin[i], pu = L->uptr[i];
        for (int j = 0; j < 3; j++) {
            if (has_lo[j] && L->lidx[pl++] != lo[j])
                return 0;
            if (has_hi[j] && L->uidx[pu++] != hi[j])
                return 0;
        }
    }
    return 1;
}

/* One value of `size` bytes (the factor's float or double) copied: memcpy
 * with a size known only at run time is a call an entry. */
static inline void copy_value(char *to, const char *from, size_t size)
{
    if (size == sizeof(float))
        *(float *)to = *(const float *)from;
    else
        *(double *)to = *(const double *)from;
}

/* The sweeps' copies (bc_local.tpos, fptr ...), the factor's values of
 * `size` bytes: the tiles found and counted, then each block's copies
 * written by the thread that sweeps it (color by color, as the sweeps share
 * the blocks out).  BC_OK or BC_ENOMEM. */
static int pack_sweeps(bc_local *L, size_t size)
{
    const int nb = L->nblocks;
    L->fptr = bc_alloc((size_t)nb + 1, sizeof(int64_t));
    L->bptr = bc_alloc((size_t)nb + 1, sizeof(int64_t));
    L->tpos = bc_alloc((size_t)nb + 1, sizeof(int32_t));
    if (!L->fptr || !L->bptr || !L->tpos)
        return BC_ENOMEM;
#pragma omp parallel
    for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static) nowait
        for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++) {
            int64_t nf = 0, nu = 0;
            L->tpos[b] = tile_pattern(L, b);
            for (int i = L->bstart[b]; L->tpos[b] && i < L->bstart[b + 1]; i++) {
                nf += L->lptr[i + 1] - L->lptr[i] - L->lin[i];
                nu += L->uptr[i + 1] - L->uptr[i] - L->uin[i];
            }
            L->fptr[b + 1] = nf, L->bptr[b + 1] = nu;
        }
    }
    int32_t tiles = 0;
    L->fptr[0] = L->bptr[0] = 0;
    for (int b = 0; b < nb; b++) {
        L->fptr[b + 1] += L->fptr[b], L->bptr[b + 1] += L->bptr[b];
        L->tpos[b] = L->tpos[b] ? tiles++ : -1;
    }
    L->tpos[nb] = -1;
    const int64_t nf = L->fptr[nb], nu = L->bptr[nb];
    L->fcol = bc_alloc((size_t)nf + 1, sizeof(int32_t));
    L->bcol = bc_alloc((size_t)nu + 1, sizeof(int32_t));
    L->fval = bc_alloc((size_t)nf + 1, size);
    L->bval = bc_alloc((size_t)nu + 1, size);
    L->frow = bc_alloc((size_t)nf + 1, 1);
    L->brow = bc_alloc((size_t)nu + 1, 1);
    L->tl = bc_alloc(64 * (size_t)tiles + 1, size);
    L->tu = bc_alloc(64 * (size_t)tiles + 1, size);
    if (!L->fcol || !L->bcol || !L->fval || !L->bval || !L->frow || !L->brow || !L->tl || !L->tu)
        return BC_ENOMEM;
    const char *lv = L->lval32 ? (const char *)L->lval32 : (const char *)L->lval;
    const char *uv = L->uval32 ? (const char *)L->uval32 : (const char *)L->uval;
    char *fv = L->fval, *bv = L->bval, *tl = L->tl, *tu = L->tu;
#pragma omp parallel
    for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static) nowait
        for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++) {
            if (L->tpos[b] < 0)
                continue;
            const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
            int64_t f = L->fptr[b], u = L->bptr[b], t = 64 * (int64_t)L->tpos[b];
            for (int i = i0; i < i1; i++) {
                for (int64_t p = L->lptr[i]; p < L->lptr[i + 1] - L->lin[i]; p++, f++) {
                    L->fcol[f] = L->lidx[p], L->frow[f] = (unsigned char)(i - i0);
                    copy_value(fv + (size_t)f * size, lv + (size_t)p * size, size);
                }
                for (int64_t p = L->uptr[i] + L->uin[i]; p < L->uptr[i + 1]; p++, u++) {
                    L->bcol[u] = L->uidx[p], L->brow[u] = (unsigned char)(i - i0);
                    copy_value(bv + (size_t)u * size, uv + (size_t)p * size, size);
                }
            }
            for (int i = i0; i < i1; i++)
                for (int64_t p = L->lptr[i + 1] - L->lin[i]; p < L->lptr[i + 1]; p++, t++)
                    copy_value(tl + (size_t)t * size, lv + (size_t)p * size, size);
            t = 64 * (int64_t)L->tpos[b];
            for (int i = i0; i < i1; i++)
                for (int64_t p = L->uptr[i]; p < L->uptr[i] + L->uin[i]; p++, t++)
                    copy_value(tu + (size_t)t * size, uv + (size_t)p * size, size);
        }
    }
    return BC_OK;
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
    const int rc = pack_sweeps(L, single ? sizeof(float) : sizeof(double));
    BC_PHASE("factor: sweeps' copies");
    return rc;
}

/* The substitutions, once per precision of the factor's values (sweeps.h). */
#define BC_FT double
#define BC_SWEEPS sweeps_double
#define BC_TILE_FORWARD tile_forward_double
#define BC_TILE_BACKWARD tile_backward_double
#include "sweeps.h"
#define BC_FT float
#define BC_SWEEPS sweeps_float
#define BC_TILE_FORWARD tile_forward_float
#define BC_TILE_BACKWARD tile_backward_float
#include "sweeps.h"

void bc_precond(const bc_local *L, double alpha, const double *q, double *r, double *z,
                double *rr, double *rz)
{
    if (L->lval32)
        sweeps_float(L, L->lval32, L->uval32, L->dinv32, alpha, q, r, z, rr, rz);
    else
        sweeps_double(L, L->lval, L->uval, L->dinv, alpha, q, r, z, rr, rz);
}
