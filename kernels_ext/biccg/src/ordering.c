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
 * colors.  A tile counts instead from its diagonal, the sum of its coordinates
 * in tiles (mod the colors): on a 7-point grid each tile then has the color
 * of its diagonal, and its six neighbours the colors just before and after,
 * swept in the passes next to its own.  Counting from the previous block, a
 * count that does not divide the tiles along x put a tile's y and z
 * neighbours in colors far from its own, and the passes ran slower, most
 * likely from lines of p (or z) read again (no counter measured it): at
 * 192^3 with 20 colors, 2 threads, the SpMV ran at 0.81 of the Triad against
 * 0.98 from the diagonals, in 153 iterations against 150 (comparisons/
 * README.md, "the change: each tile counts its colors from its diagonal").
 * A grid with fewer diagonals of tiles on a rank than colors leaves the
 * colors none of them reaches empty.
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
 * n + 1), diag[t] the sum of tile t's (global) coordinates in tiles (room
 * for n).
 * The tiles are walked in that order, a row of tiles (qz, qy) at a time, over
 * the grid lines (z, y) of it that hold rows of the rank: no key per row and
 * no sort (a counting sort by tile number took 0.017-0.037 s at 128^3). */
static int tile_order(const bc_gidx grid[3], const int tile[3], bc_gidx r0, bc_gidx n, int *pre,
                      int *bof, int *bptr, bc_gidx *diag, int *nb_out)
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
                if (pos > first) {
                    diag[nb] = x0 / tx + qy + qz;
                    bptr[nb++] = first;
                }
            }
        }
    bptr[nb] = (int)n;
    bc_free(g0), bc_free(xa), bc_free(xb);
    *nb_out = nb;
    return BC_OK;
}

/* Each block's earlier coupled blocks (J < I): block I's are list[at[I] ..
 * at[I + 1]), in no order, some of them more than once (the greedy pass
 * reads them as a set). */
typedef struct {
    int *list;
    int64_t *at;
} earlier;

static void earlier_free(earlier *E)
{
    if (E == NULL)
        return;
    bc_free(E->list), bc_free(E->at), bc_free(E);
}

/* A thread's pairs (block, earlier block), as the scan meets them. */
typedef struct {
    int *i, *j;
    int64_t len, cap;
} pairs;

/* Row i of block I into the scan: its outside entries counted (*nout, *nlow:
 * those before the rank), its couplings to earlier blocks J appended to mine
 * (J's mark set to I: J is listed again only after the thread has listed it
 * for another block).  0, or 1 without the memory. */
static inline int scan_row(const bc_csr_in *a, const int64_t *c64, const int32_t *c32, bc_gidx n,
                           int bs, const int *bof, bc_gidx i, int I, int *mark, pairs *mine,
                           int64_t *nout, int64_t *nlow)
{
    const bc_gidx r0 = a->row_begin, e1 = bc_in_ptr(a, i + 1);
    for (bc_gidx e = bc_in_ptr(a, i); e < e1; e++) {
        const bc_gidx g = (c64 ? c64[e] : c32[e]) - r0;
        if (g < 0 || g >= n) {
            ++*nout;
            *nlow += g < 0;
            continue;
        }
        const int J = bof ? bof[g] : (int)(g / bs);
        if (J >= I || mark[J] == I)
            continue;
        mark[J] = I;
        if (mine->len == mine->cap) {
            mine->cap *= 2;
            int *gi = realloc(mine->i, (size_t)mine->cap * sizeof *gi);
            mine->i = gi ? gi : mine->i;
            int *gj = realloc(mine->j, (size_t)mine->cap * sizeof *gj);
            mine->j = gj ? gj : mine->j;
            if (gi == NULL || gj == NULL)
                return 1;
        }
        mine->i[mine->len] = I, mine->j[mine->len++] = J;
    }
    return 0;
}

/* One scan of the rank's entries in their rows' order, rows in parallel, then
 * the pairs found grouped by block; nout and nlow as bc_order needs them.
 * NULL when out of memory.  The rows' order, not the blocks': walked tile by
 * tile, a 4 x 4 x 2 tile's input rows are read in runs of 4 from 8 places at
 * once, and the scan took 3x the time of the same loads in order (0.10-0.14
 * against 0.03-0.04 s at 128^3 on one thread, the AMD VM; comparisons/README.md,
 * "The coloring's scan in the rows' order").  Blocks of consecutive rows (no
 * bof) are in that order already and are scanned a block at a time (a loop a
 * row, each row's block found by a division, took 1.5x the scan's time there).
 * A block's list may hold an earlier block more than once (scan_row). */
static earlier *earlier_blocks(const bc_csr_in *a, bc_gidx n, int bs, int nb, const int *bof,
                               int64_t *nout_out, int64_t *nlow_out)
{
    /* the columns read through locals, not bc_in_col: a's fields were loaded
     * again after each store to mark or the pairs (0.034 s against 0.029 at
     * 128^3 on one thread) */
    const int64_t *const c64 = a->indices64;
    const int32_t *const c32 = a->indices32;
    const int nt = omp_get_max_threads();
    const int64_t items = bof ? (int64_t)n : (int64_t)nb; /* rows, or blocks of rows */
    earlier *E = calloc(1, sizeof *E);
    pairs *P = calloc((size_t)nt, sizeof *P);
    if (E == NULL || P == NULL || (E->at = calloc((size_t)nb + 2, sizeof *E->at)) == NULL) {
        earlier_free(E), bc_free(P);
        return NULL;
    }
    int64_t nout = 0, nlow = 0;
    int bad = 0;
#pragma omp parallel num_threads(nt) reduction(+ : nout, nlow) reduction(| : bad)
    {
        /* the thread's own, not in P (the threads' entries share a line) */
        pairs mine = {NULL, NULL, 0, 2 * ((int64_t)nb / nt + 1)};
        mine.i = malloc((size_t)mine.cap * sizeof *mine.i);
        mine.j = malloc((size_t)mine.cap * sizeof *mine.j);
        int *mark = malloc((size_t)nb * sizeof *mark); /* the last block that listed J */
        if (mine.i == NULL || mine.j == NULL || mark == NULL)
            bad = 1;
        else
            memset(mark, 0xff, (size_t)nb * sizeof *mark);
#pragma omp for schedule(static)
        for (int64_t k = 0; k < items; k++) {
            if (bad)
                continue;
            if (bof) {
                bad |= scan_row(a, c64, c32, n, bs, bof, k, bof[k], mark, &mine, &nout, &nlow);
            } else {
                for (bc_gidx i = k * bs; i < (k + 1) * bs && i < n && !bad; i++)
                    bad |= scan_row(a, c64, c32, n, bs, NULL, i, (int)k, mark, &mine, &nout,
                                    &nlow);
            }
        }
        bc_free(mark);
        P[omp_get_thread_num()] = mine;
    }
    int64_t total = 0;
    for (int t = 0; t < nt; t++)
        total += P[t].len;
    if (!bad && (E->list = malloc(((size_t)total + 1) * sizeof *E->list)) == NULL)
        bad = 1;
    if (!bad) { /* grouped by block: a counting sort, the threads' pairs in turn */
        for (int t = 0; t < nt; t++)
            for (int64_t k = 0; k < P[t].len; k++)
                E->at[(int64_t)P[t].i[k] + 2]++;
        for (int I = 0; I < nb; I++)
            E->at[(int64_t)I + 2] += E->at[(int64_t)I + 1];
        for (int t = 0; t < nt; t++)
            for (int64_t k = 0; k < P[t].len; k++)
                E->list[E->at[(int64_t)P[t].i[k] + 1]++] = P[t].j[k];
    }
    for (int t = 0; t < nt; t++)
        bc_free(P[t].i), bc_free(P[t].j);
    bc_free(P);
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
    bc_gidx *diag = NULL;
    if (tiled) {
        pre = bc_alloc((size_t)n, sizeof(int));
        bof = bc_alloc((size_t)n, sizeof(int));
        bptr = malloc(((size_t)n + 1) * sizeof(int)); /* tiles: at most n */
        diag = malloc(((size_t)n + 1) * sizeof *diag);
        rc = pre && bof && bptr && diag
                 ? tile_order(p->grid, p->tile, r0, n, pre, bof, bptr, diag, &nb)
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
     * coupled blocks listed, and the outside entries counted (and those
     * before the rank); then the greedy pass, serial, over the lists */
    int64_t nout = 0, nlow = 0;
    earlier *E = earlier_blocks(a, n, bs, nb, bof, &nout, &nlow);
    if (E == NULL) {
        rc = BC_ENOMEM;
        goto done;
    }
    BC_PHASE("order: coloring scan");
    for (int I = 0; I < nb; I++) {
        for (int64_t k = E->at[I]; k < E->at[I + 1]; k++)
            stamp[color[E->list[k]]] = I + 1;
        int c = -1;
        if (diag != NULL)
            next = (int)(diag[I] % ncol);
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
    bc_free(diag);
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
