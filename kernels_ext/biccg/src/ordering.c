/*
 * ordering.c - algebraic block multicolor ordering of a rank's diagonal block.
 *
 * Blocks are `bs` consecutive rows in the incoming order or, where the matrix
 * is a grid and tiles are asked for, the rows of one tile of the grid (more of
 * each row's neighbours inside its block: fewer iterations on large grids).
 * They are colored in that order, greedily: a block takes the first color,
 * counting cyclically from the one after the previous block's, that no already
 * colored coupled block has; only when all `colors` are taken is a new color
 * opened.  The cycling spreads blocks evenly over the colors (their count is
 * the parallelism of each substitution step) and yields at least `colors`
 * colors.
 * A structurally symmetric pattern is assumed (the caller checks symmetry).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The tile numbers of the grid rows g0 .. g0 + n - 1 into key, their least and
 * greatest into *kmin, *kmax (n > 0).  The point's coordinates and its tile's
 * are stepped, not divided: three 64-bit divisions a row took 0.05 s at
 * 128^3, and two thirds of the ordering's time. */
static void tile_keys(const bc_gidx grid[3], const int tile[3], bc_gidx g0, bc_gidx n,
                      bc_gidx *key, bc_gidx *kmin, bc_gidx *kmax)
{
    const bc_gidx nx = grid[0], ny = grid[1];
    const bc_gidx ntx = (nx + tile[0] - 1) / tile[0], nty = (ny + tile[1] - 1) / tile[1];
    bc_gidx x = g0 % nx, y = g0 / nx % ny, z = g0 / (nx * ny);
    bc_gidx qx = x / tile[0], qy = y / tile[1], qz = z / tile[2];
    int rx = (int)(x % tile[0]), ry = (int)(y % tile[1]), rz = (int)(z % tile[2]);
    bc_gidx lo = INT64_MAX, hi = -1;
    for (bc_gidx i = 0; i < n; i++) {
        const bc_gidx k = (qz * nty + qy) * ntx + qx;
        key[i] = k;
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
        if (++rx == tile[0])
            rx = 0, qx++;
        if (++x == nx) {
            x = 0, qx = 0, rx = 0;
            if (++ry == tile[1])
                ry = 0, qy++;
            if (++y == ny) {
                y = 0, qy = 0, ry = 0;
                if (++rz == tile[2])
                    rz = 0, qz++;
                z++;
            }
        }
    }
    *kmin = lo, *kmax = hi;
}

/* Rows of a grid (geometry given) grouped into tiles: tx x ty x tz points of
 * the nx x ny x nz grid (x fastest), tiles in lexicographic order, the rows of
 * a tile in their order.  pre[k] is the local row at position k, bof[i] the
 * tile (block) of local row i, bptr[t] the first position of tile t.  A
 * counting sort over the rank's range of tile numbers, in parallel: each
 * share of the rows (in order) is keyed and counted apart, and placed after
 * the earlier shares' rows of the same tile (serial, it took 0.035 s at
 * 128^3, 0.023 in two shares). */
static int tile_order(const bc_gidx grid[3], const int tile[3], bc_gidx r0, bc_gidx n, int *pre,
                      int *bof, int **bptr_out, int *nb_out)
{
    /* at most TILE_SHARES shares: the counts take shares x tiles, and 60
     * threads a rank would count 126 MB for the study's problem on a node */
    enum { TILE_SHARES = 8 };
    const int nt = bc_threads() < TILE_SHARES ? bc_threads() : TILE_SHARES;
    /* tiles per rank are at most n, but their numbers may span far more */
    bc_gidx *key = malloc((size_t)n * sizeof *key);
    bc_gidx *lo = malloc((size_t)nt * sizeof *lo), *hi = malloc((size_t)nt * sizeof *hi);
    if (key == NULL || lo == NULL || hi == NULL) {
        free(key), free(lo), free(hi);
        return BC_ENOMEM;
    }
#pragma omp parallel for schedule(static, 1) num_threads(nt)
    for (int u = 0; u < nt; u++)
        if (bc_share(n, u + 1, nt) > bc_share(n, u, nt))
            tile_keys(grid, tile, r0 + bc_share(n, u, nt),
                      bc_share(n, u + 1, nt) - bc_share(n, u, nt), key + bc_share(n, u, nt),
                      &lo[u], &hi[u]);
        else
            lo[u] = INT64_MAX, hi[u] = -1;
    bc_gidx kmin = INT64_MAX, kmax = -1;
    for (int u = 0; u < nt; u++)
        kmin = lo[u] < kmin ? lo[u] : kmin, kmax = hi[u] > kmax ? hi[u] : kmax;
    free(lo), free(hi);
    const bc_gidx span = kmax - kmin + 1;
    if (span + 1 > 0x7fffffff || span * nt > 0x7fffffff) {
        free(key);
        return BC_EINVAL;
    }
    /* cnt[u * span + k]: thread share u's rows in tile kmin + k, then where they go */
    int *cnt = calloc((size_t)(span * nt), sizeof(int));
    int *bptr = malloc(((size_t)span + 1) * sizeof(int));
    int *tid = malloc((size_t)span * sizeof(int));
    if (cnt == NULL || bptr == NULL || tid == NULL) {
        free(key), free(cnt), free(bptr), free(tid);
        return BC_ENOMEM;
    }
#pragma omp parallel for schedule(static, 1) num_threads(nt)
    for (int u = 0; u < nt; u++)
        for (bc_gidx i = bc_share(n, u, nt); i < bc_share(n, u + 1, nt); i++)
            cnt[u * span + key[i] - kmin]++;
    /* number the tiles this rank holds rows of; cnt becomes each share's first positions */
    int nb = 0, pos = 0;
    for (bc_gidx k = 0; k < span; k++) {
        const int first = pos;
        tid[k] = nb;
        for (int u = 0; u < nt; u++) {
            const int c = cnt[u * span + k];
            cnt[u * span + k] = pos;
            pos += c;
        }
        if (pos > first)
            bptr[nb++] = first;
    }
    bptr[nb] = (int)n;
#pragma omp parallel for schedule(static, 1) num_threads(nt)
    for (int u = 0; u < nt; u++)
        for (bc_gidx i = bc_share(n, u, nt); i < bc_share(n, u + 1, nt); i++) {
            const bc_gidx k = key[i] - kmin;
            pre[cnt[u * span + k]++] = (int)i;
            bof[i] = tid[k];
        }
    free(key);
    free(cnt);
    free(tid);
    *bptr_out = bptr;
    *nb_out = nb;
    return BC_OK;
}

int bc_order(const bc_csr_in *a, const bc_params *p, bc_local *L, int **block_color)
{
    const bc_gidx r0 = a->row_begin, n = a->nrows;
    const int bs = p->block_size, colors = p->colors;
    const int tiled = p->grid[0] > 0;
    if (bs < 1 || colors < 1 || n < 1 || n > 0x7fffffff)
        return BC_EINVAL;
    if (tiled && (p->grid[1] < 1 || p->grid[2] < 1 || p->tile[0] < 1 || p->tile[1] < 1 ||
                  p->tile[2] < 1 || p->grid[0] * p->grid[1] * p->grid[2] != a->n))
        return BC_EINVAL;
    /* blocks: positions [bptr[I], bptr[I+1]) of the rows in the order pre
     * (identity for the algebraic blocking: bs consecutive rows) */
    int nb = (int)((n + bs - 1) / bs), *pre = NULL, *bof = NULL, *bptr = NULL;
    int ncol = colors, next = 0, rc = BC_OK;
    int *color = NULL, *stamp = NULL;
    if (tiled) {
        pre = malloc((size_t)n * sizeof(int));
        bof = malloc((size_t)n * sizeof(int));
        rc = pre && bof ? tile_order(p->grid, p->tile, r0, n, pre, bof, &bptr, &nb) : BC_ENOMEM;
    } else if ((bptr = malloc(((size_t)nb + 1) * sizeof(int))) != NULL) {
        for (int I = 0; I <= nb; I++)
            bptr[I] = (int)((bc_gidx)I * bs < n ? (bc_gidx)I * bs : n);
    } else
        rc = BC_ENOMEM;
    if (rc != BC_OK)
        goto done;
    BC_PHASE("order: blocks");
    color = malloc((size_t)nb * sizeof(int));
    stamp = calloc((size_t)ncol, sizeof(int));
    if (color == NULL || stamp == NULL) {
        rc = BC_ENOMEM;
        goto done;
    }
    int64_t nout = 0; /* every entry passes here once: count the outside ones */
    for (int I = 0; I < nb; I++) {
        for (int k = bptr[I]; k < bptr[I + 1]; k++) {
            const bc_gidx i = pre ? pre[k] : k;
            for (bc_gidx e = bc_in_ptr(a, i); e < bc_in_ptr(a, i + 1); e++) {
                bc_gidx g = bc_in_col(a, e) - r0;
                if (g < 0 || g >= n) {
                    nout++;
                    continue;
                }
                const int J = bof ? bof[g] : (int)(g / bs);
                if (J < I) /* an earlier, already colored block */
                    stamp[color[J]] = I + 1;
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

    BC_PHASE("order: coloring");
    /* New order: blocks by color, then by their old position; rows of a block
     * stay together and in order. */
    L->ncolors = ncol;
    L->nblocks = nb;
    L->row_runs = !tiled;
    L->nout = nout;
    L->nloc = (int)n;
    L->cptr = calloc((size_t)ncol + 1, sizeof(int));
    L->bstart = malloc(((size_t)nb + 1) * sizeof(int));
    L->perm = malloc((size_t)n * sizeof(int));
    L->iperm = malloc((size_t)n * sizeof(int));
    int *fill = malloc((size_t)ncol * sizeof(int));
    int *order = malloc((size_t)nb * sizeof(int)); /* new block position -> old block */
    if (!L->cptr || !L->bstart || !L->perm || !L->iperm || !fill || !order) {
        free(fill);
        free(order);
        rc = BC_ENOMEM;
        goto done;
    }
    for (int I = 0; I < nb; I++)
        L->cptr[color[I] + 1]++;
    for (int c = 0; c < ncol; c++)
        L->cptr[c + 1] += L->cptr[c];
    memcpy(fill, L->cptr, (size_t)ncol * sizeof(int));
    for (int I = 0; I < nb; I++)
        order[fill[color[I]]++] = I;
    int row = 0;
    for (int b = 0; b < nb; b++) {
        L->bstart[b] = row;
        for (int k = bptr[order[b]]; k < bptr[order[b] + 1]; k++) {
            const int i = pre ? pre[k] : k;
            L->perm[row] = i;
            L->iperm[i] = row++;
        }
    }
    L->bstart[nb] = row;
    BC_PHASE("order: renumbering");
    free(order);
    free(fill);
done:
    free(stamp);
    free(pre);
    free(bof);
    free(bptr);
    if (rc == BC_OK && block_color != NULL)
        *block_color = color;
    else
        free(color);
    return rc;
}

int bc_block_coloring(const bc_csr_in *a, const bc_params *p, int *color, int max_blocks,
                      bc_gidx *perm)
{
    bc_local L;
    int *bcolor = NULL;
    memset(&L, 0, sizeof L);
    if (a->row_begin != 0 || a->nrows != a->n)
        return -1;
    if (bc_order(a, p, &L, &bcolor) != BC_OK || L.nblocks > max_blocks) {
        free(bcolor);
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
