/*
 * biccg_template.c - the solver's sweeps (bc_precond) beside four ways of
 * running a block's two passes (issue 53: the sweeps are bound by their
 * instructions), on the solver's own ordering and single-precision factor
 * (tiles of the grid, 20 colors), in one process:
 *   1 "unrolled": where a block is a whole 4 x 4 x 2 tile whose couplings
 *     inside it are the 7-point stencil's (row k to k - 1, k - 4, k - 16
 *     below, k + 1, k + 4, k + 16 above, where the tile has them), its
 *     second pass (the recurrence inside the block) unrolled for that
 *     pattern: constant offsets, no column read, the rows' values in
 *     registers; its values the 64 floats a tile of L and of U that the
 *     solver copies (ic0.c's pack_sweeps, which also finds the tiles), in
 *     the solver's order.  Other blocks, and every first pass, as the
 *     solver ran them before e586e11 (a loop a row; the solver now sweeps
 *     tiles as variant 3 does).
 *   2 "faces": as 1, and the first pass (its couplings to other blocks) of
 *     each matched tile whose faces each meet one block, all their rows
 *     alike, a face of the tile at a time: loops of fixed counts, in place
 *     of a loop over each row's 0-3 entries.
 *   3 "flat + unrolled": as 1, and every block's first pass one loop over a
 *     copy of its entries to other blocks (column, value, the row's place in
 *     the block: one byte), in row order.
 *   4 "flat": both passes of every block over such lists (no unrolling).
 *   5 "unrolled, no first pass": 1 without the first passes: a bound (what
 *     they cost), its z wrong; timing only.
 * Each row's terms are subtracted in the solver's order, so z is the
 * solver's bit for bit where the compiler fuses no multiply-add
 * (-ffp-contract=off), to rounding otherwise.  Run by biccg_template.py;
 * usage: NX NY NZ ROUNDS TX TY TZ.  One JSON line: the medians of ROUNDS
 * alternating calls, each after a flush and once more at once (warm), the
 * tiles matched (and faced), each variant's largest z difference and
 * whether its z is the same bits, whether it reads its own copies
 * (reads_its_copies), and whether the solver's own tile path (e586e11) gives
 * its row path's bits (solver_rows_same_bits, tiles switched off for a call).  Exit 3 where the
 * tile is not 4 x 4 x 2 (the unrolled pattern's).
 */
#include "biccg_bench.h"

#define TR 32 /* rows of a tile */
#define TE 64 /* its couplings below (above) the diagonal inside it */

/* Row k's first value among its tile's TE, below and above (ascending rows). */
static const int offl[TR] = {0,  0,  1,  2,  3,  4,  6,  8,  10, 11, 13, 15, 17, 18, 20, 22,
                             24, 25, 27, 29, 31, 33, 36, 39, 42, 44, 47, 50, 53, 55, 58, 61};
static const int offu[TR] = {0,  3,  6,  9,  11, 14, 17, 20, 22, 25, 28, 31, 33, 35, 37, 39,
                             40, 42, 44, 46, 47, 49, 51, 53, 54, 56, 58, 60, 61, 62, 63, 64};

/* The solver's tiles (ic0.c's pack_sweeps finds them by their pattern):
 * block -> its place among them, or -1; their 64 values inside of L and U. */
static const int32_t *tpos;
static const float *tl, *tu;

/* The solver's tiles taken, as the unrolled variants' (its own single
 * factor's copies); how many. */
static int pack(const bc_local *L)
{
    tpos = L->tpos, tl = L->tl, tu = L->tu;
    int nt = 0;
    for (int b = 0; b < L->nblocks; b++)
        nt += tpos[b] >= 0;
    return nt;
}

/* The tile's six faces (x-, x+, y-, y+, z-, z+): their rows, and where row k
 * of a face lies in the neighbouring tile (k + mirror). */
static const int face_n[6] = {8, 8, 8, 8, 16, 16};
static const int face_rows[6][16] = {
    {0, 4, 8, 12, 16, 20, 24, 28},     {3, 7, 11, 15, 19, 23, 27, 31},
    {0, 1, 2, 3, 16, 17, 18, 19},      {12, 13, 14, 15, 28, 29, 30, 31},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}};
static const int face_mirror[6] = {3, -3, 12, -12, 16, -16};

/* A matched tile's couplings to other tiles, a face at a time: its faces
 * below (lf, nl of them) and above (uf, nu), each list in the order of the
 * neighbours' first rows (so each row subtracts in ascending columns, as the
 * solver does), their entries' columns and values from fo (L) and fu (U). */
typedef struct {
    int64_t lo, uo;
    unsigned char nl, nu, lf[6], uf[6];
} tile_faces;

static tile_faces *tf;   /* a matched tile's faces, where faces[b] */
static int *faces_ok;    /* block -> 1 where its faces were matched */
static int32_t *fcol;
static float *fval;

/* Which face of row k (tile position) reaches position m of another tile; -1 none. */
static int face_of(int k, int m)
{
    for (int f = 0; f < 6; f++) {
        for (int j = 0; j < face_n[f]; j++)
            if (face_rows[f][j] == k && k + face_mirror[f] == m)
                return f;
    }
    return -1;
}

/* Block b's entries to other blocks, if each face couples all its rows to one
 * tile, on one side: into *t (entries counted in *nent); 0 where they do not. */
static int match_faces(const bc_local *L, const int *blockof, int b, tile_faces *t, int *fb,
                       int *side)
{
    const int i0 = L->bstart[b];
    int seen[6] = {0};
    for (int f = 0; f < 6; f++)
        fb[f] = -1, side[f] = -1;
    for (int k = 0; k < TR; k++) {
        const int i = i0 + k;
        const int64_t parts[2][2] = {{L->lptr[i], L->lptr[i + 1] - L->lin[i]},
                                     {L->uptr[i] + L->uin[i], L->uptr[i + 1]}};
        int used = 0;
        for (int sd = 0; sd < 2; sd++)
            for (int64_t p = parts[sd][0]; p < parts[sd][1]; p++) {
                const int c = sd ? L->uidx[p] : L->lidx[p];
                if (c >= L->nloc)
                    return 0;
                const int B = blockof[c], f = face_of(k, c - L->bstart[B]);
                if (f < 0 || (used >> f & 1) || (fb[f] >= 0 && (fb[f] != B || side[f] != sd)))
                    return 0;
                used |= 1 << f, fb[f] = B, side[f] = sd, seen[f]++;
            }
    }
    for (int f = 0; f < 6; f++) /* a block on two faces: entry_to would take one entry twice */
        for (int g = f + 1; g < 6; g++)
            if (fb[f] >= 0 && fb[f] == fb[g])
                return 0;
    t->nl = t->nu = 0;
    for (int f = 0; f < 6; f++) {
        if (fb[f] < 0)
            continue;
        if (seen[f] != face_n[f])
            return 0;
        if (side[f] == 0)
            t->lf[t->nl++] = (unsigned char)f;
        else
            t->uf[t->nu++] = (unsigned char)f;
    }
    /* neighbours in ascending order (insertion sort of at most six) */
    unsigned char *lists[2] = {t->lf, t->uf};
    const int counts[2] = {t->nl, t->nu};
    for (int sd = 0; sd < 2; sd++)
        for (int a = 1; a < counts[sd]; a++)
            for (int c = a; c > 0 && fb[lists[sd][c - 1]] > fb[lists[sd][c]]; c--) {
                const unsigned char x = lists[sd][c];
                lists[sd][c] = lists[sd][c - 1], lists[sd][c - 1] = x;
            }
    return 1;
}

/* Value and column of row i's entry to block B (in L's part if sd 0, else U's). */
static void entry_to(const bc_local *L, const int *blockof, int i, int B, int sd, float *v,
                     int32_t *c)
{
    const int64_t p0 = sd ? L->uptr[i] + L->uin[i] : L->lptr[i];
    const int64_t p1 = sd ? L->uptr[i + 1] : L->lptr[i + 1] - L->lin[i];
    for (int64_t p = p0; p < p1; p++) {
        const int col = sd ? L->uidx[p] : L->lidx[p];
        if (blockof[col] == B) {
            *v = sd ? L->uval32[p] : L->lval32[p], *c = col;
            return;
        }
    }
}

/* The faces of every matched tile; 0, -1 without memory. */
static int pack_faces(const bc_local *L)
{
    int *blockof = malloc((size_t)L->nloc * sizeof *blockof);
    tf = malloc((size_t)L->nblocks * sizeof *tf);
    faces_ok = calloc((size_t)L->nblocks, sizeof *faces_ok);
    const int64_t most = (int64_t)L->lptr[L->nloc] + L->uptr[L->nloc];
    fcol = bc_alloc((size_t)most + 1, sizeof *fcol), fval = bc_alloc((size_t)most + 1, sizeof *fval);
    if (!blockof || !tf || !faces_ok || !fcol || !fval)
        return -1;
    for (int b = 0; b < L->nblocks; b++)
        for (int i = L->bstart[b]; i < L->bstart[b + 1]; i++)
            blockof[i] = b;
    int64_t at = 0;
    for (int b = 0; b < L->nblocks; b++) {
        int fb[6], side[6];
        if (tpos[b] < 0 || !match_faces(L, blockof, b, &tf[b], fb, side))
            continue;
        faces_ok[b] = 1;
        for (int sd = 0; sd < 2; sd++) {
            const unsigned char *list = sd ? tf[b].uf : tf[b].lf;
            const int n = sd ? tf[b].nu : tf[b].nl;
            if (sd)
                tf[b].uo = at;
            else
                tf[b].lo = at;
            for (int a = 0; a < n; a++) {
                const int f = list[a];
                for (int j = 0; j < face_n[f]; j++, at++)
                    entry_to(L, blockof, L->bstart[b] + face_rows[f][j], fb[f], sd, fval + at,
                             fcol + at);
            }
        }
    }
    free(blockof);
    return 0;
}

/* Every block's entries of one pass as one flat list (row order; rows in
 * reverse for the backward recurrence), each with its row's place in the
 * block: a pass is one loop of fixed count a block, no loop a row. */
typedef struct {
    int64_t *ptr;
    int32_t *col;
    float *val;
    unsigned char *row;
} flat;

static flat flo, fuo, fli, fui; /* forward, backward: to other blocks; inside */

/* Part `part` of L (0: to other blocks, 1: inside; forward rows in order) or U
 * (2, 3; the recurrence's rows in reverse) flattened into *f; 0, -1 without memory. */
static int flatten(const bc_local *L, int part, flat *f)
{
    const int64_t most = part < 2 ? L->lptr[L->nloc] : L->uptr[L->nloc];
    f->ptr = malloc(((size_t)L->nblocks + 1) * sizeof *f->ptr);
    f->col = bc_alloc((size_t)most + 1, sizeof *f->col);
    f->val = bc_alloc((size_t)most + 1, sizeof *f->val);
    f->row = bc_alloc((size_t)most + 1, 1);
    if (!f->ptr || !f->col || !f->val || !f->row)
        return -1;
    int64_t at = 0;
    for (int b = 0; b < L->nblocks; b++) {
        f->ptr[b] = at;
        const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
        if (i1 - i0 > 256)
            return -1;
        for (int k = 0; k < i1 - i0; k++) {
            const int i = part == 3 ? i1 - 1 - k : i0 + k;
            int64_t p0, p1;
            if (part == 0)
                p0 = L->lptr[i], p1 = L->lptr[i + 1] - L->lin[i];
            else if (part == 1)
                p0 = L->lptr[i + 1] - L->lin[i], p1 = L->lptr[i + 1];
            else if (part == 2)
                p0 = L->uptr[i] + L->uin[i], p1 = L->uptr[i + 1];
            else
                p0 = L->uptr[i], p1 = L->uptr[i] + L->uin[i];
            for (int64_t p = p0; p < p1; p++, at++) {
                f->col[at] = part < 2 ? L->lidx[p] : L->uidx[p];
                f->val[at] = part < 2 ? L->lval32[p] : L->uval32[p];
                f->row[at] = (unsigned char)(i - i0);
            }
        }
    }
    f->ptr[L->nblocks] = at;
    return 0;
}

/* z[i0 + row] -= val * z[col] over block b's entries of f. */
static inline void flat_sub(const flat *f, int b, double *zt, double *z)
{
    for (int64_t p = f->ptr[b]; p < f->ptr[b + 1]; p++)
        zt[f->row[p]] -= f->val[p] * z[f->col[p]];
}

/* z[i0 + row] -= v * z[col] for face f's rows, their entries from v, c. */
static inline void face_sub(double *zt, int f, const float *v, const int32_t *c, const double *z)
{
    switch (f) {
#define FACE(F)                                                                                    \
    case F:                                                                                        \
        _Pragma("GCC unroll 16") for (int j = 0; j < face_n[F]; j++) zt[face_rows[F][j]] -=        \
            v[j] * z[c[j]];                                                                        \
        break;
        FACE(0)
        FACE(1)
        FACE(2)
        FACE(3)
        FACE(4)
        FACE(5)
#undef FACE
    }
}

/* (I + L) inside a matched tile: z[k] -= its couplings below, rows in order. */
static inline void tile_forward(double *z, const float *v)
{
#pragma GCC unroll 32
    for (int k = 0; k < TR; k++) {
        const int x = k & 3, y = (k >> 2) & 3, zz = k >> 4;
        int m = offl[k];
        double s = z[k];
        if (zz)
            s -= v[m++] * z[k - 16];
        if (y)
            s -= v[m++] * z[k - 4];
        if (x)
            s -= v[m++] * z[k - 1];
        z[k] = s;
    }
}

/* (I + L^T) inside a matched tile: z[k] -= its couplings above, rows in reverse. */
static inline void tile_backward(double *z, const float *v)
{
#pragma GCC unroll 32
    for (int k = TR - 1; k >= 0; k--) {
        const int x = k & 3, y = (k >> 2) & 3, zz = k >> 4;
        int m = offu[k];
        double s = z[k];
        if (x < 3)
            s -= v[m++] * z[k + 1];
        if (y < 3)
            s -= v[m++] * z[k + 4];
        if (zz < 1)
            s -= v[m++] * z[k + 16];
        z[k] = s;
    }
}

/* The variants, numbered as at the top of this file. */
enum { UNROLLED = 1, FACES, FLAT_UNROLLED, FLAT, NO_FIRST };

/* Block b's first pass of the forward sweep in variant v: z = r less the
 * rows' couplings to other blocks; rr += r'r.  As the solver runs it (q NULL,
 * no prefetch) where v has no other way for the block. */
static inline void first_forward(const bc_local *L, int b, int v, const double *r, double *z,
                                 double *rr)
{
    const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
    const int mine = v == FLAT_UNROLLED || v == FLAT || v == NO_FIRST || (v == FACES && faces_ok[b]);
    for (int i = i0; i < i1; i++) {
        double s = r[i];
        *rr += s * s;
        if (!mine)
            for (int64_t p = L->lptr[i]; p < L->lptr[i + 1] - L->lin[i]; p++)
                s -= L->lval32[p] * z[L->lidx[p]];
        z[i] = s;
    }
    if (v == FACES && faces_ok[b])
        for (int a = 0, o = 0; a < tf[b].nl; o += face_n[tf[b].lf[a]], a++)
            face_sub(z + i0, tf[b].lf[a], fval + tf[b].lo + o, fcol + tf[b].lo + o, z);
    else if (v == FLAT_UNROLLED || v == FLAT)
        flat_sub(&flo, b, z + i0, z);
}

/* Its first pass of the backward sweep: z = D^-1 w less the couplings to
 * other blocks; rz += w' D^-1 w. */
static inline void first_backward(const bc_local *L, int b, int v, double *z, double *rz)
{
    const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
    const int mine = v == FLAT_UNROLLED || v == FLAT || v == NO_FIRST || (v == FACES && faces_ok[b]);
    for (int i = i0; i < i1; i++) {
        const double w = z[i];
        double s = w * L->dinv32[i];
        *rz += w * s;
        if (!mine)
            for (int64_t p = L->uptr[i] + L->uin[i]; p < L->uptr[i + 1]; p++)
                s -= L->uval32[p] * z[L->uidx[p]];
        z[i] = s;
    }
    if (v == FACES && faces_ok[b])
        for (int a = 0, o = 0; a < tf[b].nu; o += face_n[tf[b].uf[a]], a++)
            face_sub(z + i0, tf[b].uf[a], fval + tf[b].uo + o, fcol + tf[b].uo + o, z);
    else if (v == FLAT_UNROLLED || v == FLAT)
        flat_sub(&fuo, b, z + i0, z);
}

/* Block b's second pass, forward: the recurrence inside it, unrolled where
 * the block is a matched tile (but in FLAT), else over the flat list (FLAT)
 * or as the solver runs it. */
static inline void second_forward(const bc_local *L, int b, int v, double *z)
{
    const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
    if (v == FLAT)
        flat_sub(&fli, b, z + i0, z);
    else if (tpos[b] >= 0)
        tile_forward(z + i0, tl + (size_t)tpos[b] * TE);
    else
        for (int i = i0; i < i1; i++) {
            double s = z[i];
            for (int64_t p = L->lptr[i + 1] - L->lin[i]; p < L->lptr[i + 1]; p++)
                s -= L->lval32[p] * z[L->lidx[p]];
            z[i] = s;
        }
}

/* The same, backward (rows in reverse). */
static inline void second_backward(const bc_local *L, int b, int v, double *z)
{
    const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
    if (v == FLAT)
        flat_sub(&fui, b, z + i0, z);
    else if (tpos[b] >= 0)
        tile_backward(z + i0, tu + (size_t)tpos[b] * TE);
    else
        for (int i = i1 - 1; i >= i0; i--) {
            double s = z[i];
            for (int64_t p = L->uptr[i]; p < L->uptr[i] + L->uin[i]; p++)
                s -= L->uval32[p] * z[L->uidx[p]];
            z[i] = s;
        }
}

/* z = M^-1 r as bc_precond computes it (q NULL), in variant v (1-5). */
static void precond_variant(const bc_local *L, int v, const double *r, double *z,
                            double *rr_out, double *rz_out)
{
    const int nt = bc_team_max();
    bc_slot sums[nt];
    memset(sums, 0, sizeof sums);
#pragma omp parallel
    {
        double rr = 0.0, rz = 0.0;
        for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static)
            for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++) {
                if (L->sweep_prefetch)
                    bc_prefetch_block(L, b + BC_PFB, L->cptr[c + 1], 0, z);
                first_forward(L, b, v, r, z, &rr);
                second_forward(L, b, v, z);
            }
        }
        for (int c = L->ncolors - 1; c >= 0; c--) {
#pragma omp for schedule(static)
            for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++) {
                if (L->sweep_prefetch)
                    bc_prefetch_block(L, b + BC_PFB, L->cptr[c + 1], 1, z);
                first_backward(L, b, v, z, &rz);
                second_backward(L, b, v, z);
            }
        }
        bc_my_slot(sums)->v[0] = rr;
        bc_my_slot(sums)->v[1] = rz;
    }
    *rr_out = bc_slots_sum(sums, nt, 0);
    *rz_out = bc_slots_sum(sums, nt, 1);
}

typedef struct {
    bc_local *L;
    double *x, *y, rr, rz;
} kernel_ctx;

#define NV 6 /* the solver's and the five variants */

/* Variant v (0 the solver's, 1-5 as the top of this file numbers them). */
static void kernel_call(void *vc, int v)
{
    kernel_ctx *c = vc;
    if (v == 0)
        bc_precond(c->L, 0.0, NULL, c->x, c->y, &c->rr, &c->rz);
    else
        precond_variant(c->L, v, c->x, c->y, &c->rr, &c->rz);
}

/* Variant v's z beside the solver's (in b->y0): y filled with NaN first, so
 * that a row a variant leaves alone cannot keep another's value; *same
 * whether the bits are the solver's, the return its largest difference. */
static double run_beside(tile_bench *b, kernel_ctx *ctx, int v, int *same)
{
    for (bc_gidx i = 0; i < b->n; i++)
        b->y[i] = NAN;
    kernel_call(ctx, v);
    *same = memcmp(b->y, b->y0, (size_t)b->n * sizeof *b->y) == 0;
    return max_rel_diff(b->y, b->y0, (size_t)b->n);
}

/* Whether variant v reads its own copies, not the factor's entries it has
 * copies of: those entries doubled (inside matched tiles: every variant;
 * to other blocks: flat lists always, faces where the tile's matched; all:
 * flat), v run again, z the solver's still; the factor restored. */
static int reads_its_copies(tile_bench *b, kernel_ctx *ctx, int v)
{
    bc_local *L = &b->L;
    const int n = L->nloc;
    const size_t nl = (size_t)L->lptr[n], nu = (size_t)L->uptr[n];
    float *keep_l = malloc(nl * sizeof *keep_l + 1), *keep_u = malloc(nu * sizeof *keep_u + 1);
    if (!keep_l || !keep_u)
        return 0;
    memcpy(keep_l, L->lval32, nl * sizeof *keep_l);
    memcpy(keep_u, L->uval32, nu * sizeof *keep_u);
    for (int blk = 0; blk < L->nblocks; blk++) {
        const int inside = v == FLAT || tpos[blk] >= 0;
        const int out = v == FLAT || v == FLAT_UNROLLED || (v == FACES && faces_ok[blk]);
        for (int i = L->bstart[blk]; i < L->bstart[blk + 1]; i++) {
            const int64_t lcut = L->lptr[i + 1] - L->lin[i], ucut = L->uptr[i] + L->uin[i];
            for (int64_t p = L->lptr[i]; p < L->lptr[i + 1]; p++)
                if (p < lcut ? out : inside)
                    L->lval32[p] *= 2.0f;
            for (int64_t p = L->uptr[i]; p < L->uptr[i + 1]; p++)
                if (p < ucut ? inside : out)
                    L->uval32[p] *= 2.0f;
        }
    }
    int same;
    run_beside(b, ctx, v, &same);
    memcpy(L->lval32, keep_l, nl * sizeof *keep_l);
    memcpy(L->uval32, keep_u, nu * sizeof *keep_u);
    free(keep_l), free(keep_u);
    return same;
}

int main(int argc, char **argv)
{
    if (argc == 8 && (atoi(argv[5]) != 4 || atoi(argv[6]) != 4 || atoi(argv[7]) != 2)) {
        fprintf(stderr, "error: the unrolled tile is 4 x 4 x 2\n");
        return 3;
    }
    tile_bench b;
    int rc = tile_bench_init(argc, argv, &b);
    if (rc != 0)
        return rc;
    const int matched = pack(&b.L);
    if (pack_faces(&b.L) != 0) {
        fprintf(stderr, "error: no memory\n");
        MPI_Finalize();
        return 2;
    }
    if (flatten(&b.L, 0, &flo) || flatten(&b.L, 1, &fli) || flatten(&b.L, 2, &fuo) ||
        flatten(&b.L, 3, &fui)) {
        fprintf(stderr, "error: no memory, or a block of more than 256 rows (the lists' "
                        "row byte)\n");
        MPI_Finalize();
        return 2;
    }
    double rr0, rz0, dz[NV];
    int same[NV], own[NV];
    bc_precond(&b.L, 0.0, NULL, b.x, b.y0, &rr0, &rz0);
    kernel_ctx ctx = {&b.L, b.x, b.y, 0.0, 0.0};
    for (int v = 1; v < NV; v++) {
        dz[v] = run_beside(&b, &ctx, v, &same[v]);
        own[v] = v < NO_FIRST && reads_its_copies(&b, &ctx, v);
    }
    /* the solver's own tile path (its copies) against its row path, tiles
     * switched off for the call: the same bits without fused multiply-adds */
    int solver_tiles = 0, solver_rows_same;
    int32_t *keep_tpos = malloc((size_t)b.L.nblocks * sizeof *keep_tpos);
    if (keep_tpos == NULL) {
        fprintf(stderr, "error: no memory\n");
        MPI_Finalize();
        return 2;
    }
    for (int k = 0; k < b.L.nblocks; k++)
        keep_tpos[k] = b.L.tpos[k], solver_tiles += b.L.tpos[k] >= 0, b.L.tpos[k] = -1;
    for (bc_gidx i = 0; i < b.n; i++)
        b.y[i] = NAN;
    bc_precond(&b.L, 0.0, NULL, b.x, b.y, &rr0, &rz0);
    solver_rows_same = memcmp(b.y, b.y0, (size_t)b.n * sizeof *b.y) == 0;
    memcpy(b.L.tpos, keep_tpos, (size_t)b.L.nblocks * sizeof *keep_tpos);
    free(keep_tpos);
    int faced = 0;
    for (int k = 0; k < b.L.nblocks; k++)
        faced += faces_ok[k];
    const char *name[NV] = {"precond", "unrolled", "faces", "flat_unrolled", "flat", "no_first"};
    double ms[2 * NV], *t = malloc(2 * NV * (size_t)b.rounds * sizeof *t);
    if (t == NULL) {
        fprintf(stderr, "error: no memory\n");
        MPI_Finalize();
        return 2;
    }
    time_alternating(NV, b.rounds, kernel_call, &ctx, t, ms);
    printf("{\"n\": %lld, \"threads\": %d, \"rounds\": %d, \"blocks\": %d, \"matched\": %d, "
           "\"faced\": %d",
           (long long)b.n, omp_get_max_threads(), b.rounds, b.L.nblocks, matched, faced);
    for (int v = 0; v < NV; v++)
        printf(", \"%s_ms\": %.4f, \"%s_warm_ms\": %.4f", name[v], ms[v], name[v], ms[NV + v]);
    for (int v = 1; v < NV; v++)
        printf(", \"%s_z_diff\": %.3g, \"%s_same_bits\": %s", name[v], dz[v], name[v],
               same[v] ? "true" : "false");
    for (int v = 1; v < NO_FIRST; v++)
        printf(", \"%s_reads_its_copies\": %s", name[v], own[v] ? "true" : "false");
    printf(", \"solver_tiles\": %d, \"solver_rows_same_bits\": %s", solver_tiles,
           solver_rows_same ? "true" : "false");
    printf("}\n");
    MPI_Finalize();
    return 0;
}
