/*
 * sweeps.h - z = M^-1 r by the two substitutions, for factor values of type
 * BC_FT (double or float: the arithmetic and the vectors stay double).
 * ic0.c includes it once per precision, defining BC_FT, BC_SWEEPS and the
 * names of its two tile functions (BC_TILE_FORWARD, BC_TILE_BACKWARD).
 *
 * Each block in two passes: first every row's coupling to other blocks, whose
 * values are final (rows independent: the loads overlap), then the short
 * recurrence inside the block (rows in order).  Where the block is a 4 x 4 x
 * 2 tile of a 7-point grid (L->tpos, the sweeps' copies: internal.h), the
 * first pass is one loop over the block's list of those couplings (as a loop
 * a row, of 0-3 entries in a tile, first passes took 0.36-0.59 of the
 * preconditioner's time; why, no counter was read) and the second is
 * unrolled: constant offsets, no column read, its values in registers (a
 * block of rows that couples so takes it too); the preconditioner took 0.65
 * of its time in a solve at 128^3 (comparisons/README.md, "The sweeps a
 * block at a time").  Other blocks keep a loop a row: row runs have 2
 * entries a row on a grid, the same count every row, and the list made
 * their preconditioner 1.66x slower.  Where blocks are runs of
 * consecutive rows (L->row_runs), a row's coupling inside its block is mostly
 * to its neighbour i -+ 1 (on a grid, only): that value comes from a register
 * (through memory, each row waited for the previous row's store to be
 * forwarded, 40 % of the sweep on the AMD VM) and the scattered lines each
 * block reads from other colors are prefetched BC_PFB blocks ahead.  Other
 * tiles couple a row to two or three rows of its block, and there the plain
 * loop is faster: on the Xeon VM the carry and the prefetch cost 13-18 % of the
 * preconditioner at 128^3, which runs as fast from memory as from cache,
 * bound by its instructions (comparisons/README.md, "The sweeps are bound by
 * their instructions").  Tiles take the prefetch alone where the vector the
 * sweeps gather does not fit the node's last-level cache (L->sweep_prefetch,
 * set by cg.c's sweeps_prefetch; comparisons/README.md, "The sweeps' gathers
 * prefetched past the cache").
 *
 * Fused into the sweeps, so that no vector is read for them alone: where q
 * is given, the CG update r -= alpha q and the sum rr = r'r (first pass of
 * the forward sweep, which reads r anyway), and rz = r'z as w' D^-1 w (w =
 * (I + L)^-1 r, the forward sweep's result, which the backward sweep reads:
 * r'z = r' (I + L^T)^-1 D^-1 (I + L)^-1 r), a sum of positive terms.
 */
/* (I + L) inside a 4 x 4 x 2 tile (L->tpos): row k of z minus its
 * couplings below, k - 16, k - 4, k - 1 where the tile has them, in the
 * factor's order (ascending columns); v the tile's 64 values, rows in order. */
static inline void BC_TILE_FORWARD(double *z, const BC_FT *v)
{
    static const int first[32] = {0,  0,  1,  2,  3,  4,  6,  8,  10, 11, 13,
                                  15, 17, 18, 20, 22, 24, 25, 27, 29, 31, 33,
                                  36, 39, 42, 44, 47, 50, 53, 55, 58, 61};
#pragma GCC unroll 32
    for (int k = 0; k < 32; k++) {
        int m = first[k];
        double s = z[k];
        if (k >= 16)
            s -= v[m++] * z[k - 16];
        if ((k >> 2) & 3)
            s -= v[m++] * z[k - 4];
        if (k & 3)
            s -= v[m] * z[k - 1];
        z[k] = s;
    }
}

/* (I + L^T) inside such a tile: row k minus its couplings above, k + 1,
 * k + 4, k + 16, rows in reverse; v the tile's 64 values of U, rows in order. */
static inline void BC_TILE_BACKWARD(double *z, const BC_FT *v)
{
    static const int first[32] = {0,  3,  6,  9,  11, 14, 17, 20, 22, 25, 28,
                                  31, 33, 35, 37, 39, 40, 42, 44, 46, 47, 49,
                                  51, 53, 54, 56, 58, 60, 61, 62, 63, 64};
#pragma GCC unroll 32
    for (int k = 31; k >= 0; k--) {
        int m = first[k];
        double s = z[k];
        if ((k & 3) < 3)
            s -= v[m++] * z[k + 1];
        if (((k >> 2) & 3) < 3)
            s -= v[m++] * z[k + 4];
        if (k < 16)
            s -= v[m] * z[k + 16];
        z[k] = s;
    }
}

static void BC_SWEEPS(const bc_local *L, const BC_FT *lval, const BC_FT *uval, const BC_FT *dinv,
                      double alpha, const double *q, double *r, double *z, double *rr_out,
                      double *rz_out)
{
    const BC_FT *const fval = L->fval, *const bval = L->bval, *const tl = L->tl, *const tu = L->tu;
    const int nt = bc_team_max();
    bc_slot sums[nt];
    memset(sums, 0, sizeof sums);
#pragma omp parallel
    {
        double rr = 0.0, rz = 0.0;
        /* forward, (I + L) w = r: colors in order */
        for (int c = 0; c < L->ncolors; c++) {
#pragma omp for schedule(static)
            for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++) {
                const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
                if (L->sweep_prefetch)
                    bc_prefetch_block(L, b + BC_PFB, L->cptr[c + 1], 0, z);
                if (L->tpos[b] >= 0) { /* a tile: its list, then unrolled */
                    for (int i = i0; i < i1; i++) {
                        double s = r[i];
                        if (q) {
                            s -= alpha * q[i];
                            r[i] = s;
                        }
                        rr += s * s;
                        z[i] = s;
                    }
                    double *const zb = z + i0;
                    for (int64_t p = L->fptr[b]; p < L->fptr[b + 1]; p++)
                        zb[L->frow[p]] -= fval[p] * z[L->fcol[p]];
                    BC_TILE_FORWARD(zb, tl + 64 * (int64_t)L->tpos[b]);
                    continue;
                }
                for (int i = i0; i < i1; i++) {
                    double s = r[i];
                    if (q) {
                        s -= alpha * q[i];
                        r[i] = s;
                    }
                    rr += s * s;
                    const int64_t e = L->lptr[i + 1] - L->lin[i];
                    for (int64_t p = L->lptr[i]; p < e; p++)
                        s -= lval[p] * z[L->lidx[p]];
                    z[i] = s;
                }
                if (!L->row_runs)
                    for (int i = i0; i < i1; i++) {
                        double s = z[i];
                        for (int64_t p = L->lptr[i + 1] - L->lin[i]; p < L->lptr[i + 1]; p++)
                            s -= lval[p] * z[L->lidx[p]];
                        z[i] = s;
                    }
                else {
                    double prev = 0.0; /* z[i - 1] */
                    for (int i = i0; i < i1; i++) {
                        double s = z[i];
                        const int64_t e = L->lptr[i + 1];
                        const int carry = L->lin[i] > 0 && L->lidx[e - 1] == i - 1;
                        for (int64_t p = e - L->lin[i]; p < e - carry; p++)
                            s -= lval[p] * z[L->lidx[p]];
                        if (carry)
                            s -= lval[e - 1] * prev;
                        z[i] = prev = s;
                    }
                }
            }
        }
        /* backward, (I + L^T) z = D^-1 w: colors in reverse */
        for (int c = L->ncolors - 1; c >= 0; c--) {
#pragma omp for schedule(static)
            for (int b = L->cptr[c]; b < L->cptr[c + 1]; b++) {
                const int i0 = L->bstart[b], i1 = L->bstart[b + 1];
                if (L->sweep_prefetch)
                    bc_prefetch_block(L, b + BC_PFB, L->cptr[c + 1], 1, z);
                if (L->tpos[b] >= 0) { /* a tile: its list, then unrolled */
                    for (int i = i0; i < i1; i++) {
                        const double w = z[i], s = w * dinv[i];
                        rz += w * s;
                        z[i] = s;
                    }
                    double *const zb = z + i0;
                    for (int64_t p = L->bptr[b]; p < L->bptr[b + 1]; p++)
                        zb[L->brow[p]] -= bval[p] * z[L->bcol[p]];
                    BC_TILE_BACKWARD(zb, tu + 64 * (int64_t)L->tpos[b]);
                    continue;
                }
                for (int i = i0; i < i1; i++) {
                    const double w = z[i];
                    double s = w * dinv[i];
                    rz += w * s;
                    for (int64_t p = L->uptr[i] + L->uin[i]; p < L->uptr[i + 1]; p++)
                        s -= uval[p] * z[L->uidx[p]];
                    z[i] = s;
                }
                if (!L->row_runs)
                    for (int i = i1 - 1; i >= i0; i--) {
                        double s = z[i];
                        for (int64_t p = L->uptr[i]; p < L->uptr[i] + L->uin[i]; p++)
                            s -= uval[p] * z[L->uidx[p]];
                        z[i] = s;
                    }
                else {
                    double next = 0.0; /* z[i + 1] */
                    for (int i = i1 - 1; i >= i0; i--) {
                        double s = z[i];
                        const int64_t b0 = L->uptr[i], e = b0 + L->uin[i];
                        const int carry = L->uin[i] > 0 && L->uidx[b0] == i + 1;
                        for (int64_t p = b0 + carry; p < e; p++)
                            s -= uval[p] * z[L->uidx[p]];
                        if (carry)
                            s -= uval[b0] * next;
                        z[i] = next = s;
                    }
                }
            }
        }
        bc_my_slot(sums)->v[0] = rr;
        bc_my_slot(sums)->v[1] = rz;
    }
    *rr_out = bc_slots_sum(sums, nt, 0);
    *rz_out = bc_slots_sum(sums, nt, 1);
}

#undef BC_FT
#undef BC_SWEEPS
#undef BC_TILE_FORWARD
#undef BC_TILE_BACKWARD
