/*
 * matrix.c - a rank's rows in the multicolor numbering: columns inside the
 * rank become new local indices, columns outside become halo slots
 * nloc + h (h in the sorted list of outside columns), rows sorted by column.
 */
#include <stdlib.h>

#include "internal.h"

static int cmp_gidx(const void *x, const void *y)
{
    bc_gidx a = *(const bc_gidx *)x, b = *(const bc_gidx *)y;
    return (a > b) - (a < b);
}

static int halo_slot(const bc_gidx *halo, int nhalo, bc_gidx g)
{
    int lo = 0, hi = nhalo - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (halo[mid] < g)
            lo = mid + 1;
        else if (halo[mid] > g)
            hi = mid - 1;
        else
            return mid;
    }
    return -1;
}

int bc_build_local(const bc_csr_in *a, bc_local *L)
{
    const bc_gidx r0 = a->row_begin, n = a->nrows;
    const bc_gidx base = bc_in_ptr(a, 0), nnz = bc_in_ptr(a, n) - base;

    /* the outside columns, sorted and unique */
    bc_gidx nout = 0;
    for (bc_gidx k = base; k < base + nnz; k++) {
        bc_gidx g = bc_in_col(a, k);
        nout += g < r0 || g >= r0 + n;
    }
    L->halo_g = malloc((size_t)(nout > 0 ? nout : 1) * sizeof(bc_gidx));
    if (L->halo_g == NULL)
        return BC_ENOMEM;
    bc_gidx m = 0;
    for (bc_gidx k = base; k < base + nnz; k++) {
        bc_gidx g = bc_in_col(a, k);
        if (g < r0 || g >= r0 + n)
            L->halo_g[m++] = g;
    }
    qsort(L->halo_g, (size_t)m, sizeof(bc_gidx), cmp_gidx);
    int nhalo = 0;
    for (bc_gidx k = 0; k < m; k++)
        if (k == 0 || L->halo_g[k] != L->halo_g[k - 1])
            L->halo_g[nhalo++] = L->halo_g[k];
    L->nhalo = nhalo;

    L->rowptr = bc_alloc((size_t)n + 1, sizeof(int64_t));
    L->col = bc_alloc((size_t)nnz, sizeof(int32_t));
    L->val = bc_alloc((size_t)nnz, sizeof(double));
    if (!L->rowptr || !L->col || !L->val)
        return BC_ENOMEM;
    L->rowptr[0] = 0;
    for (int i = 0; i < L->nloc; i++) {
        bc_gidx o = L->perm[i];
        L->rowptr[i + 1] = L->rowptr[i] + (bc_in_ptr(a, o + 1) - bc_in_ptr(a, o));
    }
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int i = 0; i < L->nloc; i++) {
        bc_gidx o = L->perm[i];
        int64_t at = L->rowptr[i];
        for (bc_gidx k = bc_in_ptr(a, o); k < bc_in_ptr(a, o + 1); k++, at++) {
            bc_gidx g = bc_in_col(a, k);
            int c = (g >= r0 && g < r0 + n) ? L->iperm[g - r0]
                                             : L->nloc + halo_slot(L->halo_g, nhalo, g);
            bad |= g < 0 || g >= a->n;
            /* insertion into the sorted row: rows are short */
            int64_t j = at;
            while (j > L->rowptr[i] && L->col[j - 1] > c) {
                L->col[j] = L->col[j - 1];
                L->val[j] = L->val[j - 1];
                j--;
            }
            L->col[j] = c;
            L->val[j] = a->data[k];
        }
    }
    return bad ? BC_EINVAL : BC_OK;
}
