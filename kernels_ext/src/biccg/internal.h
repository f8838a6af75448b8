/*
 * internal.h - what the parts of the BICCG solver share: one rank's matrix in
 * the multicolor numbering, its ordering, its IC(0) factor and its halo plan.
 */
#ifndef BURSTBENCH_BICCG_INTERNAL_H
#define BURSTBENCH_BICCG_INTERNAL_H

#include "biccg.h"

typedef struct {
    /* this rank's rows, renumbered; columns >= nloc are halo entries */
    int nloc, nhalo;
    int64_t *rowptr;
    int32_t *col;
    double *val;
    /* ordering: blocks of color c are [cptr[c], cptr[c+1]) in the new order,
     * block b holds new rows [bstart[b], bstart[b+1]) */
    int ncolors, nblocks;
    int *cptr, *bstart;
    int *perm;  /* new local row -> old local row */
    int *iperm; /* old local row -> new local row */
    /* IC(0): M = U^T D U, L = U^T strictly lower (unit diagonal implied) */
    double *dinv, shift;
    int64_t *lptr, *uptr;
    int32_t *lidx, *uidx;
    double *lval, *uval;
    /* entries of row i coupling it to its own block: the last lin[i] of its L
     * row, the first uin[i] of its U row (the rest couple other blocks) */
    int32_t *lin, *uin;
    /* halo: receive from nrecv ranks into x[nloc + roff[k] ..], send packed rows */
    int nrecv, nsend;
    int *rrank, *rcount, *roff, *srank, *scount, *soff, *sidx;
    double *sbuf;
    MPI_Request *req;
    bc_gidx *halo_g; /* global index of each halo entry */
} bc_local;

/* Entry k of the input's row pointer / column index arrays, whichever width. */
static inline bc_gidx bc_in_ptr(const bc_csr_in *a, bc_gidx i)
{
    return a->indptr64 ? a->indptr64[i] : (bc_gidx)a->indptr32[i];
}

static inline bc_gidx bc_in_col(const bc_csr_in *a, bc_gidx k)
{
    return a->indices64 ? a->indices64[k] : (bc_gidx)a->indices32[k];
}

/* cg.c: an array of count items of size bytes; large ones 2 MiB aligned and
 * backed by transparent huge pages where the kernel allows (TLB misses
 * dominate the scattered reads of the substitutions otherwise). free() it. */
void *bc_alloc(size_t count, size_t size);

/* ordering.c: color the natural-order blocks of the local diagonal block and
 * fill cptr, bstart, perm, iperm, ncolors, nblocks. */
int bc_order(const bc_csr_in *a, int block_size, int colors, bc_local *L, int **block_color);

/* matrix.c: the local rows in the new numbering (halo columns mapped). */
int bc_build_local(const bc_csr_in *a, bc_local *L);

/* ic0.c: factor the local diagonal block (shift retried until pivots are
 * positive); apply z = M^-1 r. */
int bc_factor(bc_local *L);
void bc_precond(const bc_local *L, const double *r, double *z);

/* halo.c: plan the exchange once; exchange x[nloc..) from the owners. */
int bc_halo_plan(MPI_Comm comm, const bc_csr_in *a, bc_local *L);
int bc_halo_exchange(MPI_Comm comm, bc_local *L, double *x);

void bc_local_free(bc_local *L);

#endif
