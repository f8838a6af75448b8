/*
 * ordering.c - algebraic block multicolor ordering of a rank's diagonal block.
 *
 * Blocks are `bs` consecutive rows in the incoming order.  They are colored
 * in that order, greedily: a block takes the first color, counting cyclically
 * from the one after the previous block's, that no already colored coupled
 * block has; only when all `colors` are taken is a new color opened.  The
 * cycling spreads blocks evenly over the colors (their count is the
 * parallelism of each substitution step) and yields at least `colors` colors.
 * A structurally symmetric pattern is assumed (the caller checks symmetry).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int bc_order(const bc_csr_in *a, int bs, int colors, bc_local *L, int **block_color)
{
    const bc_gidx r0 = a->row_begin, n = a->nrows;
    if (bs < 1 || colors < 1 || n < 1 || n > 0x7fffffff)
        return BC_EINVAL;
    const int nb = (int)((n + bs - 1) / bs);
    int ncol = colors, next = 0, rc = BC_OK;
    int *color = malloc((size_t)nb * sizeof(int));
    int *stamp = calloc((size_t)ncol, sizeof(int));
    if (color == NULL || stamp == NULL) {
        rc = BC_ENOMEM;
        goto done;
    }
    for (int I = 0; I < nb; I++) {
        bc_gidx lo = (bc_gidx)I * bs, hi = lo + bs < n ? lo + bs : n;
        for (bc_gidx i = lo; i < hi; i++) {
            for (bc_gidx k = bc_in_ptr(a, i); k < bc_in_ptr(a, i + 1); k++) {
                bc_gidx g = bc_in_col(a, k) - r0;
                if (g >= 0 && g < lo) /* an earlier, already colored block */
                    stamp[color[g / bs]] = I + 1;
            }
        }
        int c = -1;
        for (int t = 0; t < ncol && c < 0; t++)
            if (stamp[(next + t) % ncol] != I + 1)
                c = (next + t) % ncol;
        if (c < 0) { /* every color is taken by a neighbour: open one more */
            int *grown = realloc(stamp, (size_t)(ncol + 1) * sizeof(int));
            if (grown == NULL) {
                rc = BC_ENOMEM;
                goto done;
            }
            stamp = grown;
            stamp[ncol] = 0;
            c = ncol++;
        }
        color[I] = c;
        next = (c + 1) % ncol;
    }

    /* New order: blocks by color, then by their old position; rows of a block
     * stay together and in order. */
    L->ncolors = ncol;
    L->nblocks = nb;
    L->nloc = (int)n;
    L->cptr = calloc((size_t)ncol + 1, sizeof(int));
    L->bstart = malloc(((size_t)nb + 1) * sizeof(int));
    L->perm = malloc((size_t)n * sizeof(int));
    L->iperm = malloc((size_t)n * sizeof(int));
    int *fill = malloc((size_t)ncol * sizeof(int));
    if (!L->cptr || !L->bstart || !L->perm || !L->iperm || !fill) {
        free(fill);
        rc = BC_ENOMEM;
        goto done;
    }
    for (int I = 0; I < nb; I++)
        L->cptr[color[I] + 1]++;
    for (int c = 0; c < ncol; c++)
        L->cptr[c + 1] += L->cptr[c];
    memcpy(fill, L->cptr, (size_t)ncol * sizeof(int));
    int *order = malloc((size_t)nb * sizeof(int)); /* new block position -> old block */
    if (order == NULL) {
        free(fill);
        rc = BC_ENOMEM;
        goto done;
    }
    for (int I = 0; I < nb; I++)
        order[fill[color[I]]++] = I;
    int row = 0;
    for (int b = 0; b < nb; b++) {
        L->bstart[b] = row;
        bc_gidx lo = (bc_gidx)order[b] * bs, hi = lo + bs < n ? lo + bs : n;
        for (bc_gidx i = lo; i < hi; i++) {
            L->perm[row] = (int)i;
            L->iperm[i] = row++;
        }
    }
    L->bstart[nb] = row;
    free(order);
    free(fill);
done:
    free(stamp);
    if (rc == BC_OK && block_color != NULL)
        *block_color = color;
    else
        free(color);
    return rc;
}

int bc_block_coloring(const bc_csr_in *a, int block_size, int colors, int *color, bc_gidx *perm)
{
    bc_local L;
    int *bcolor = NULL;
    memset(&L, 0, sizeof L);
    if (a->row_begin != 0 || a->nrows != a->n)
        return -1;
    if (bc_order(a, block_size, colors, &L, &bcolor) != BC_OK) {
        bc_local_free(&L);
        return -1;
    }
    memcpy(color, bcolor, (size_t)L.nblocks * sizeof(int));
    for (int i = 0; i < L.nloc; i++)
        perm[i] = L.perm[i];
    int ncolors = L.ncolors;
    free(bcolor);
    bc_local_free(&L);
    return ncolors;
}
