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

#include <omp.h>

#include "internal.h"

static bc_gidx gmin(bc_gidx a, bc_gidx b)
{
    return a < b ? a : b;
}

static bc_gidx gmax(bc_gidx a, bc_gidx b)
{
    return a > b ? a : b;
}

/* Rows of a grid (geometry given) grouped into tiles: tx x ty x tz points of
 * the nx x ny x nz grid (x fastest), tiles in lexicographic order, the rows of
 * a tile in their order.  pre[k] is the local row at position k, bof[i] the
 * tile (block) of local row i, bptr[t] the first position of tile t (room for
 * n + 1).  The tiles are walked in that order, a row of tiles (qz, qy) at a
 * time, over the grid lines (z, y) of it that hold rows of the rank: no key
 * per row and no sort (a counting sort by tile number took 0.017-0.037 s at
 * 128^3). */
static int tile_order(const bc_gidx grid[3], const int tile[3], bc_gidx r0, bc_gidx n, int *pre,
                      int *bof, int *bptr, int *nb_out)
{
    const bc_gidx nx = grid[0], ny = grid[1], nz = grid[2], r1 = r0 + n;
    const bc_gidx tx = tile[0], ty = tile[1], tz = tile[2];
    const bc_gidx zlast = (r1 - 1) / (nx * ny);
    /* a row of tiles' lines that hold rows of the rank: g of x = 0, x range */
    const size_t most = (size_t)gmin(ty, ny) * (size_t)gmin(tz, nz);
    bc_gidx *g0 = malloc(most * sizeof *g0), *xa = malloc(most * sizeof *xa),
            *xb = malloc(most * sizeof *xb);
    if (g0 == NULL || xa == NULL || xb == NULL) {
        bc_free(g0), bc_free(xa), bc_free(xb);
        return BC_ENOMEM;
    }
    int nb = 0, pos = 0;
    for (bc_gidx qz = r0 / (nx * ny) / tz; qz <= zlast / tz; qz++)
        for (bc_gidx qy = 0; qy * ty < ny; qy++) {
            int m = 0;
            bc_gidx xlo = nx, xhi = 0;
            for (bc_gidx z = qz * tz; z < gmin(qz * tz + tz, nz); z++)
                for (bc_gidx y = qy * ty; y < gmin(qy * ty + ty, ny); y++) {
                    const bc_gidx g = (z * ny + y) * nx;
                    const bc_gidx a = gmax(g, r0) - g, b = gmin(g + nx, r1) - g;
                    if (a < b) {
                        g0[m] = g, xa[m] = a, xb[m++] = b;
                        xlo = gmin(xlo, a), xhi = gmax(xhi, b);
                    }
                }
            for (bc_gidx x0 = xlo / tx * tx; x0 < xhi; x0 += tx) {
                const int first = pos;
                for (int j = 0; j < m; j++)
                    for (bc_gidx x = gmax(x0, xa[j]); x < gmin(x0 + tx, xb[j]); x++) {
                        const int i = (int)(g0[j] + x - r0);
                        pre[pos++] = i;
                        bof[i] = nb;
                    }
                if (pos > first)
                    bptr[nb++] = first;
            }
        }
    bptr[nb] = (int)n;
    bc_free(g0), bc_free(xa), bc_free(xb);
    *nb_out = nb;
    return BC_OK;
}

/* Each block's earlier coupled blocks (J < I), once each, in the order met:
 * block I's are list[owner[I]][at[I] ..) (count[I] of them), in the buffer of
 * the thread that scanned it. */
typedef struct {
    int nthreads;
    int **list;
    int64_t *at;
    int *count;
    unsigned char *owner;
} earlier;

static void earlier_free(earlier *E)
{
    if (E == NULL)
        return;
    for (int t = 0; E->list && t < E->nthreads; t++)
        bc_free(E->list[t]);
    bc_free(E->list), bc_free(E->at), bc_free(E->count), bc_free(E->owner), bc_free(E);
}

/* One scan of the rank's entries, blocks in parallel; nout and nlow as
 * bc_order needs them.  NULL when out of memory.  The scan was the serial
 * greedy pass's, block by block: 0.021 s at 128^3 on the AMD VM whatever the
 * threads (at 16 a rank, most of the setup).  Apart, in parallel, it takes
 * 0.013 s on two threads and 0.024 s on one; the greedy pass over the lists
 * 0.0006 s (comparisons/README.md). */
static earlier *earlier_blocks(const bc_csr_in *a, bc_gidx n, int bs, int nb, const int *pre,
                               const int *bof, const int *bptr, int64_t *nout_out,
                               int64_t *nlow_out)
{
    const bc_gidx r0 = a->row_begin;
    /* the columns read through locals, not bc_in_col: a's fields were loaded
     * again after each store to mark or mine (0.034 s against 0.029 at 128^3
     * on one thread) */
    const int64_t *const c64 = a->indices64;
    const int32_t *const c32 = a->indices32;
    earlier *E = calloc(1, sizeof *E);
    if (E == NULL)
        return NULL;
    E->nthreads = omp_get_max_threads() < 256 ? omp_get_max_threads() : 256;
    E->list = calloc((size_t)E->nthreads, sizeof *E->list);
    E->at = malloc((size_t)nb * sizeof *E->at);
    E->count = malloc((size_t)nb * sizeof *E->count);
    E->owner = malloc((size_t)nb);
    if (!E->list || !E->at || !E->count || !E->owner) {
        earlier_free(E);
        return NULL;
    }
    int64_t nout = 0, nlow = 0;
    int bad = 0;
#pragma omp parallel num_threads(E->nthreads) reduction(+ : nout, nlow) reduction(| : bad)
    {
        const int t = omp_get_thread_num();
        int64_t cap = 8 * ((int64_t)nb / E->nthreads + 1), len = 0;
        int *mine = malloc((size_t)cap * sizeof *mine);
        int *mark = malloc((size_t)nb * sizeof *mark); /* last block that listed J */
        if (mine == NULL || mark == NULL)
            bad = 1;
        else
            memset(mark, 0xff, (size_t)nb * sizeof *mark);
#pragma omp for schedule(static)
        for (int I = 0; I < nb; I++) {
            if (bad)
                continue;
            const int64_t first = len;
            for (int k = bptr[I]; k < bptr[I + 1]; k++) {
                const bc_gidx i = pre ? pre[k] : k;
                const bc_gidx e1 = bc_in_ptr(a, i + 1);
                for (bc_gidx e = bc_in_ptr(a, i); e < e1; e++) {
                    const bc_gidx g = (c64 ? c64[e] : c32[e]) - r0;
                    if (g < 0 || g >= n) {
                        nout++;
                        nlow += g < 0;
                        continue;
                    }
                    const int J = bof ? bof[g] : (int)(g / bs);
                    if (J >= I || mark[J] == I)
                        continue;
                    mark[J] = I;
                    if (len == cap) {
                        int *grown = realloc(mine, (size_t)(cap *= 2) * sizeof *mine);
                        if (grown == NULL) {
                            bad = 1;
                            break;
                        }
                        mine = grown;
                    }
                    mine[len++] = J;
                }
            }
            E->at[I] = first;
            E->count[I] = (int)(len - first);
            E->owner[I] = (unsigned char)t;
        }
        E->list[t] = mine;
        bc_free(mark);
    }
    *nout_out = nout;
    *nlow_out = nlow;
    if (bad) {
        earlier_free(E);
        return NULL;
    }
    return E;
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
        pre = bc_alloc((size_t)n, sizeof(int));
        bof = bc_alloc((size_t)n, sizeof(int));
        bptr = malloc(((size_t)n + 1) * sizeof(int)); /* tiles: at most n */
        rc = pre && bof && bptr ? tile_order(p->grid, p->tile, r0, n, pre, bof, bptr, &nb)
                                : BC_ENOMEM;
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
    /* every entry passes here once, in parallel: each block's earlier
     * coupled blocks, listed once each, and the outside entries counted (and
     * those before the rank); then the greedy pass, serial, over the lists */
    int64_t nout = 0, nlow = 0;
    earlier *E = earlier_blocks(a, n, bs, nb, pre, bof, bptr, &nout, &nlow);
    if (E == NULL) {
        rc = BC_ENOMEM;
        goto done;
    }
    BC_PHASE("order: coloring scan");
    for (int I = 0; I < nb; I++) {
        const int *J = E->list[E->owner[I]] + E->at[I];
        for (int k = 0; k < E->count[I]; k++)
            stamp[color[J[k]]] = I + 1;
        int c = -1;
        for (int t = 0; t < ncol && c < 0; t++)
            if (stamp[(next + t) % ncol] != I + 1)
                c = (next + t) % ncol;
        if (c < 0) { /* every color is taken by a neighbour: open one more */
            int *grown = realloc(stamp, (size_t)(ncol + 1) * sizeof(int));
            if (grown == NULL) {
                rc = BC_ENOMEM;
                break;
            }
            stamp = grown;
            stamp[ncol] = 0;
            c = ncol++;
        }
        color[I] = c;
        next = (c + 1) % ncol;
    }
    earlier_free(E);
    if (rc != BC_OK)
        goto done;

    BC_PHASE("order: coloring");
    /* New order: blocks by color, then by their old position; rows of a block
     * stay together and in order. */
    L->ncolors = ncol;
    L->nblocks = nb;
    L->row_runs = !tiled;
    L->nout = nout;
    L->nlow = nlow;
    L->nloc = (int)n;
    L->cptr = calloc((size_t)ncol + 1, sizeof(int));
    L->bstart = malloc(((size_t)nb + 1) * sizeof(int));
    L->perm = bc_alloc((size_t)n, sizeof(int));
    L->iperm = bc_alloc((size_t)n, sizeof(int));
    int *fill = malloc((size_t)ncol * sizeof(int));
    int *order = malloc((size_t)nb * sizeof(int)); /* new block position -> old block */
    if (!L->cptr || !L->bstart || !L->perm || !L->iperm || !fill || !order) {
        bc_free(fill);
        bc_free(order);
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
    L->bstart[0] = 0;
    for (int b = 0; b < nb; b++)
        L->bstart[b + 1] = L->bstart[b] + bptr[order[b] + 1] - bptr[order[b]];
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nb; b++) {
        int row = L->bstart[b];
        for (int k = bptr[order[b]]; k < bptr[order[b] + 1]; k++) {
            const int i = pre ? pre[k] : k;
            L->perm[row] = i;
            L->iperm[i] = row++;
        }
    }
    BC_PHASE("order: renumbering");
    bc_free(order);
    bc_free(fill);
done:
    bc_free(stamp);
    bc_free(pre);
    bc_free(bof);
    bc_free(bptr);
    if (rc == BC_OK && block_color != NULL)
        *block_color = color;
    else
        bc_free(color);
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
        bc_free(bcolor);
        bc_local_free(&L);
        bc_pool_trim(0);
        return -1;
    }
    memcpy(color, bcolor, (size_t)L.nblocks * sizeof(int));
    for (int i = 0; i < L.nloc; i++)
        perm[i] = L.perm[i];
    int ncolors = L.ncolors;
    bc_free(bcolor);
    bc_local_free(&L);
    bc_pool_trim(0);
    return ncolors;
}
