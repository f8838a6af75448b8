/*
 * matrix.c - a rank's rows in the multicolor numbering: columns inside the
 * rank become new local indices, columns outside become halo slots
 * nloc + h (h in the sorted list of outside columns), rows sorted by column.
 */
#include <stdlib.h>
#include <string.h>

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

/* Block b's outside lines, sorted by part then line, unique within a part;
 * returns how many and the end of each part in ends[3].  `buf` holds up to
 * the block's entry count.  A part has tens of lines but up to hundreds of
 * entries: each entry's line is looked up by bisection in the part's sorted
 * lines and inserted where new (qsort of all entries took 0.2 s at 128^3). */
static int64_t block_lines(const bc_local *L, int b, int32_t *buf, int64_t ends[3])
{
    const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
    int64_t u = 0;
    for (int part = 0; part < 3; part++) {
        const int64_t first = u;
        for (int64_t k = L->rowptr[i0]; k < L->rowptr[i1]; k++) {
            const int32_t c = L->col[k];
            if (!((part == 0 && c < i0) || (part == 1 && c >= i1 && c < L->nloc) ||
                  (part == 2 && c >= L->nloc)))
                continue;
            const int32_t line = c & ~7; /* the first entry of c's 64-byte line */
            int64_t lo = first, hi = u; /* the first of buf[first..u) >= line */
            while (lo < hi) {
                const int64_t mid = lo + (hi - lo) / 2;
                if (buf[mid] < line)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < u && buf[lo] == line)
                continue;
            memmove(buf + lo + 1, buf + lo, (size_t)(u - lo) * sizeof *buf);
            buf[lo] = line;
            u++;
        }
        ends[part] = u;
    }
    return u;
}

/* Two passes over the blocks (count, then fill), each thread with a scratch
 * buffer the size of the largest block. */
int bc_prefetch_plan(bc_local *L)
{
    int64_t most = 1;
    for (int b = 0; b < L->nblocks; b++)
        if (L->rowptr[L->bstart[b + 1]] - L->rowptr[L->bstart[b]] > most)
            most = L->rowptr[L->bstart[b + 1]] - L->rowptr[L->bstart[b]];
    L->pfptr = bc_alloc(3 * (size_t)L->nblocks + 1, sizeof(int64_t));
    if (!L->pfptr)
        return BC_ENOMEM;
    int bad = 0;
    for (int pass = 0; pass < 2 && !bad; pass++) {
#pragma omp parallel reduction(| : bad)
        {
            int32_t *buf = malloc((size_t)most * sizeof *buf);
            bad |= buf == NULL;
#pragma omp for schedule(dynamic, 64)
            for (int b = 0; b < L->nblocks; b++) {
                int64_t ends[3];
                if (buf == NULL)
                    continue;
                block_lines(L, b, buf, ends);
                for (int part = 0; part < 3; part++)
                    if (pass == 0)
                        L->pfptr[3 * b + part + 1] = ends[part] - (part ? ends[part - 1] : 0);
                    else
                        memcpy(L->pf + L->pfptr[3 * b + part], buf + (part ? ends[part - 1] : 0),
                               (size_t)(L->pfptr[3 * b + part + 1] - L->pfptr[3 * b + part]) *
                                   sizeof *buf);
            }
            free(buf);
        }
        if (pass == 0 && !bad) {
            L->pfptr[0] = 0;
            for (size_t k = 1; k <= 3 * (size_t)L->nblocks; k++)
                L->pfptr[k] += L->pfptr[k - 1];
            L->pf = bc_alloc((size_t)L->pfptr[3 * (size_t)L->nblocks], sizeof *L->pf);
            bad = L->pf == NULL;
        }
    }
    return bad ? BC_ENOMEM : BC_OK;
}

int bc_build_local(const bc_csr_in *a, bc_local *L)
{
    const bc_gidx r0 = a->row_begin, n = a->nrows;
    const bc_gidx base = bc_in_ptr(a, 0), nnz = bc_in_ptr(a, n) - base;

    /* the outside columns, sorted and unique */
    bc_gidx nout = 0;
#pragma omp parallel for schedule(static) reduction(+ : nout)
    for (bc_gidx k = base; k < base + nnz; k++) {
        bc_gidx g = bc_in_col(a, k);
        nout += g < r0 || g >= r0 + n;
    }
    L->halo_g = malloc((size_t)(nout > 0 ? nout : 1) * sizeof(bc_gidx));
    if (L->halo_g == NULL)
        return BC_ENOMEM;
    bc_gidx m = 0;
    for (bc_gidx k = base; k < base + nnz && m < nout; k++) {
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
    /* First touch by the thread whose rows these are in the solve's loops;
     * then the rows are copied in the incoming order, so that the reads of
     * the input and of iperm stream and only the writes scatter (copying in
     * the new order gathered, about ten cache misses a row: the whole build
     * took 0.25-0.45 s at 128^3, 0.09-0.16 s this way). */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < L->nloc; i++)
        for (int64_t k = L->rowptr[i]; k < L->rowptr[i + 1]; k++)
            L->col[k] = 0, L->val[k] = 0.0;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int o = 0; o < L->nloc; o++) {
        const int i = L->iperm[o];
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
