/*
 * matrix.c - a rank's rows in the multicolor numbering: columns inside the
 * rank become new local indices, columns outside become halo slots
 * nloc + h (h in the sorted list of outside columns), rows sorted by column.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* How many rows ahead the copy of the rows fetches the lines it will write. */
#ifndef BC_SCATTER_PF
#define BC_SCATTER_PF 16
#endif

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

int bc_gather(int items, int parts, int64_t most, bc_item_fn fn, const void *ctx,
              int64_t **ptr_out, int32_t **out)
{
    const size_t np = (size_t)parts * (size_t)items;
    int64_t *ptr = bc_alloc(np + 1, sizeof(int64_t));
    int32_t *all = NULL;
    if (ptr == NULL)
        return BC_ENOMEM;
    ptr[0] = 0;
    int bad = 0;
#pragma omp parallel reduction(| : bad)
    {
        int32_t *scratch = malloc((size_t)parts * (size_t)most * sizeof *scratch);
        int64_t cap = 4 * most, len = 0;
        int32_t *mine = malloc((size_t)cap * sizeof *mine);
        int first = -1;
        bad |= scratch == NULL || mine == NULL;
#pragma omp for schedule(static) nowait
        for (int it = 0; it < items; it++) {
            if (scratch == NULL || mine == NULL)
                continue;
            if (first < 0)
                first = it;
            if (len + parts * most > cap) {
                int32_t *grown = realloc(mine, (size_t)(cap = 2 * cap + parts * most) * sizeof *mine);
                if (grown == NULL) {
                    bc_free(mine), mine = NULL, bad = 1;
                    continue;
                }
                mine = grown;
            }
            len += fn(ctx, it, scratch, mine + len, ptr + (size_t)parts * it + 1);
        }
        bc_free(scratch);
#pragma omp barrier
#pragma omp single
        {
            for (size_t k = 1; k <= np; k++)
                ptr[k] += ptr[k - 1];
            all = bc_alloc((size_t)ptr[np], sizeof *all);
        }
        if (all == NULL)
            bad = 1;
        else if (first >= 0 && mine != NULL)
            memcpy(all + ptr[(size_t)parts * first], mine, (size_t)len * sizeof *mine);
        bc_free(mine);
    }
    *ptr_out = ptr;
    *out = all;
    return bad ? BC_ENOMEM : BC_OK;
}

/* Block b's outside lines, sorted by part then line, unique within a part,
 * written to out; returns how many and the count of each part in cnt[3].
 * One scan of the block's entries: each outside entry's line joins its
 * part's sorted run in run[part * most ..] (a part has tens of lines but up
 * to hundreds of entries; a row's columns ascend, so an insertion seldom
 * moves more than a few lines).  Three scans, one per part, with a second
 * pass to fill, took 0.12-0.19 s at 128^3, the setup's largest phase.
 * The same scan counts each row's entries for the factor's pattern (see
 * bc_scan_blocks): a pass of its own over the columns took 0.04-0.1 s. */
static int64_t block_lines(const void *ctx, int b, int32_t *run, int32_t *out, int64_t *cnt)
{
    const bc_local *L = ctx;
    const int i0 = L->bstart[b], i1 = L->bstart[b + 1], n = L->nloc;
    const int64_t most = L->pfmost;
    int64_t u[3] = {0, 0, 0};
    for (int i = i0; i < i1; i++) {
        int32_t cl = 0, cu = 0, inl = 0, inu = 0;
        for (int64_t k = L->rowptr[i]; k < L->rowptr[i + 1]; k++) {
            const int32_t c = L->col[k];
            cl += c < i;
            cu += c > i && c < n;
            if (c >= i0 && c < i1) {
                inl += c < i;
                inu += c > i;
                continue;
            }
            const int part = c < i0 ? 0 : c < n ? 1 : 2;
            const int32_t line = c & ~7; /* the first entry of c's 64-byte line */
            int32_t *r = run + part * most;
            int64_t j = u[part];
            while (j > 0 && r[j - 1] > line)
                j--;
            if (j > 0 && r[j - 1] == line)
                continue;
            memmove(r + j + 1, r + j, (size_t)(u[part] - j) * sizeof *r);
            r[j] = line;
            u[part]++;
        }
        L->lptr[i + 1] = cl, L->uptr[i + 1] = cu;
        L->lin[i] = inl, L->uin[i] = inu;
    }
    int64_t m = 0;
    for (int part = 0; part < 3; part++) {
        memcpy(out + m, run + part * most, (size_t)u[part] * sizeof *out);
        m += cnt[part] = u[part];
    }
    return m;
}

int bc_scan_blocks(bc_local *L)
{
    const int n = L->nloc;
    L->lptr = bc_alloc((size_t)n + 1, sizeof(int64_t));
    L->uptr = bc_alloc((size_t)n + 2, sizeof(int64_t));
    L->lin = bc_alloc((size_t)n, sizeof(int32_t));
    L->uin = bc_alloc((size_t)n, sizeof(int32_t));
    if (!L->lptr || !L->uptr || !L->lin || !L->uin)
        return BC_ENOMEM;
    /* a part's lines: at most the block's entries, and at most the lines of x */
    const int64_t lines = ((int64_t)n + L->nhalo) / 8 + 2;
    L->pfmost = 1;
    for (int b = 0; b < L->nblocks; b++)
        if (L->rowptr[L->bstart[b + 1]] - L->rowptr[L->bstart[b]] > L->pfmost)
            L->pfmost = L->rowptr[L->bstart[b + 1]] - L->rowptr[L->bstart[b]];
    L->pfmost = L->pfmost < lines ? L->pfmost : lines;
    const int rc = bc_gather(L->nblocks, 3, L->pfmost, block_lines, L, &L->pfptr, &L->pf);
    if (rc != BC_OK) /* some blocks' counts were not taken */
        return rc;
    L->lptr[0] = L->uptr[0] = 0;
    for (int i = 0; i < n; i++) {
        L->lptr[i + 1] += L->lptr[i];
        L->uptr[i + 1] += L->uptr[i];
    }
    return BC_OK;
}

int bc_build_local(const bc_csr_in *a, bc_local *L)
{
    const bc_gidx r0 = a->row_begin, n = a->nrows;
    const bc_gidx base = bc_in_ptr(a, 0), nnz = bc_in_ptr(a, n) - base;

    /* the outside columns, sorted and unique.  bc_order counted them, and
     * those before the rank: a band's first rows hold those, its last rows
     * the ones after it, so a scan from each end stops early (one scan from
     * the start took 0.015 s at 128^3 on 2 ranks, where rank 0's are last;
     * none on one rank) */
    const bc_gidx nout = L->nout;
    L->halo_g = malloc((size_t)(nout > 0 ? nout : 1) * sizeof(bc_gidx));
    if (L->halo_g == NULL)
        return BC_ENOMEM;
    bc_gidx m = 0;
    for (bc_gidx k = base; k < base + nnz && m < L->nlow; k++) {
        bc_gidx g = bc_in_col(a, k);
        if (g < r0)
            L->halo_g[m++] = g;
    }
    for (bc_gidx k = base + nnz - 1; k >= base && m < nout; k--) {
        bc_gidx g = bc_in_col(a, k);
        if (g >= r0 + n)
            L->halo_g[m++] = g;
    }
    qsort(L->halo_g, (size_t)m, sizeof(bc_gidx), cmp_gidx);
    int nhalo = 0;
    for (bc_gidx k = 0; k < m; k++)
        if (k == 0 || L->halo_g[k] != L->halo_g[k - 1])
            L->halo_g[nhalo++] = L->halo_g[k];
    L->nhalo = nhalo;
    BC_PHASE("local: halo columns");

    L->rowptr = bc_alloc((size_t)n + 1, sizeof(int64_t));
    L->col = bc_alloc((size_t)nnz, sizeof(int32_t));
    L->val = bc_alloc((size_t)nnz, sizeof(double));
    if (!L->rowptr || !L->col || !L->val)
        return BC_ENOMEM;
    /* the rows' lengths gathered in parallel (a serial loop's scattered reads
     * of the input's row pointers took 0.01-0.02 s at 128^3), then summed */
    L->rowptr[0] = 0;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < L->nloc; i++) {
        const bc_gidx o = L->perm[i];
        L->rowptr[i + 1] = bc_in_ptr(a, o + 1) - bc_in_ptr(a, o);
    }
    for (int i = 0; i < L->nloc; i++)
        L->rowptr[i + 1] += L->rowptr[i];
    /* First touch by the thread whose rows these are in the solve's loops
     * (bc_my_rows); then the rows are copied in the incoming order, so that
     * the reads of the input and of iperm stream and only the writes scatter
     * (copying in the new order gathered, about ten cache misses a row: the
     * whole build took 0.25-0.45 s at 128^3, 0.09-0.16 s this way).  The
     * writes wait on their lines: each row's are fetched BC_SCATTER_PF rows
     * ahead, its row pointer twice as far (0.082 s -> 0.036 s at 128^3 on one
     * core of the AMD VM, comparisons/README.md). */
#pragma omp parallel
    for (int c = 0; c < L->ncolors; c++) {
        int i0, i1;
        bc_my_rows(L, c, &i0, &i1);
        for (int i = i0; i < i1; i++) {
            /* one write a page (4 KiB of val) places it: the row's first entry
             * at a multiple of 512, if it has one (a loop over every entry to
             * find it took 14.6 M steps at 128^3 for 28,500 pages) */
            const int64_t k = (L->rowptr[i] + 511) & ~(int64_t)511;
            if (k < L->rowptr[i + 1])
                L->col[k] = 0, L->val[k] = 0.0;
        }
    }
    BC_PHASE("local: alloc+first touch");
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int o = 0; o < L->nloc; o++) {
        const int i = L->iperm[o];
        if (o + 2 * BC_SCATTER_PF < L->nloc)
            BC_PREFETCH(L->rowptr + L->iperm[o + 2 * BC_SCATTER_PF]);
        if (o + BC_SCATTER_PF < L->nloc) {
            const int ia = L->iperm[o + BC_SCATTER_PF];
            const int64_t k0 = L->rowptr[ia], k1 = L->rowptr[ia + 1];
            BC_PREFETCH_W(L->col + k0);
            BC_PREFETCH_W(L->val + k0);
            if (k1 > k0)
                BC_PREFETCH_W(L->val + k1 - 1);
        }
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
    BC_PHASE("local: scatter rows");
    return bad ? BC_EINVAL : BC_OK;
}
