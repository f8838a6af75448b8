/*
 * internal.h - what the parts of the BICCG solver share: one rank's matrix in
 * the multicolor numbering, its ordering, its IC(0) factor and its halo plan.
 */
#ifndef BURSTBENCH_BICCG_INTERNAL_H
#define BURSTBENCH_BICCG_INTERNAL_H

#include "biccg.h"

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct {
    /* this rank's rows, renumbered; columns >= nloc are halo entries */
    int nloc, nhalo;
    /* entries with a column outside the rank, and of them before it (bc_order counts them) */
    int64_t nout, nlow;
    int64_t *rowptr;
    int32_t *col;
    double *val;
    /* ordering: blocks of color c are [cptr[c], cptr[c+1]) in the new order,
     * block b holds new rows [bstart[b], bstart[b+1]) */
    int ncolors, nblocks;
    int *cptr, *bstart;
    /* blocks are runs of consecutive input rows (not tiles of a grid): a
     * row's coupling in its block is then mostly to the row before (a chain),
     * and the sweeps carry that row's value in a register (with tiles that
     * made them slower, sweeps.h) */
    int row_runs;
    /* the sweeps prefetch the plan's lines: row runs always, tiles where z
     * exceeds the node's cache (cg.c, sweeps_prefetch) */
    int sweep_prefetch;
    /* the SpMV prefetches A's values and columns non-temporal (1) or as
     * ordinary lines (0): bc_spmv_nta_rule */
    int spmv_nta;
    int *perm;  /* new local row -> old local row */
    int *iperm; /* old local row -> new local row */
    /* IC(0): M = U^T D U, L = U^T strictly lower (unit diagonal implied) */
    double *dinv, shift;
    int64_t *lptr, *uptr;
    int32_t *lidx, *uidx;
    double *lval, *uval;
    /* the same values in single precision where asked (the double ones freed) */
    float *lval32, *uval32, *dinv32;
    int uval_in_uidx; /* uval32 lies in uidx's buffer (not freed apart) */
    /* entries of row i coupling it to its own block: the last lin[i] of its L
     * row, the first uin[i] of its U row (the rest couple other blocks) */
    int32_t *lin, *uin;
    /* the sweeps' copies of the factor (ic0.c, pack_sweeps), for each block
     * that is a 4 x 4 x 2 tile of a 7-point grid (tpos[b] >= 0, its place
     * among them; -1 for other blocks): its entries to other blocks, L's
     * (forward) and U's (backward), as one list in row order, [fptr[b],
     * fptr[b + 1]) and [bptr[b], bptr[b + 1]) (empty for other blocks):
     * column, value (the factor's type), the row's place in the block; and
     * its 64 values inside it of L (at tl + 64 tpos[b]) and of U (tu), in
     * row order.  A first pass is then one loop a block, not a loop a row of
     * 0-3 entries, and the recurrence is unrolled
     * (sweeps.h; comparisons/README.md, "The sweeps a block at a time"). */
    int64_t *fptr, *bptr;
    int32_t *fcol, *bcol, *tpos;
    void *fval, *bval, *tl, *tu;
    unsigned char *frow, *brow;
    /* prefetch plan: the first entry of every cache line of x (or z) that
     * block b reads outside itself, in three runs: earlier colors
     * [pf[pfptr[3b]], pf[pfptr[3b+1])), later colors, then halo slots */
    int64_t *pfptr;
    int32_t *pf;
    int64_t pfmost; /* the most entries of a block (the plan's scratch) */
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

/* Software prefetch, BC_PF entries ahead in the value and column streams of
 * the SpMV.  Its loop issues many instructions per byte, so out-of-order
 * execution alone keeps few misses in flight: one core reached 16 GB/s on
 * it against 31 GB/s for Triad (comparisons/README.md).  Clamped to the array. */
#ifndef BC_PF
#define BC_PF 512
#endif
#if defined(__GNUC__) || defined(__clang__)
/* The empty asm keeps GCC's vectorizer away from loops of prefetches: it
 * vectorizes them and silently drops the prefetches (GCC 12). */
#define BC_PREFETCH(p)                                                                             \
    do {                                                                                           \
        const void *bc_at_ = (p);                                                                  \
        __builtin_prefetch(bc_at_);                                                                \
        __asm__ volatile("" : : "r"(bc_at_));                                                      \
    } while (0)
/* The same, non-temporal: for a stream read once an iteration (the SpMV's
 * values and columns, 175 MB at 128^3, where bc_spmv_nta_rule says), so that
 * it does not displace the vectors that the iteration's other passes read
 * again from the caches. */
#define BC_PREFETCH_NTA(p)                                                                         \
    do {                                                                                           \
        const void *bc_at_ = (p);                                                                  \
        __builtin_prefetch(bc_at_, 0, 0);                                                          \
        __asm__ volatile("" : : "r"(bc_at_));                                                      \
    } while (0)
/* The same, for a line about to be written. */
#define BC_PREFETCH_W(p)                                                                           \
    do {                                                                                           \
        const void *bc_at_ = (p);                                                                  \
        __builtin_prefetch(bc_at_, 1);                                                             \
        __asm__ volatile("" : : "r"(bc_at_));                                                      \
    } while (0)
#else
#define BC_PREFETCH(p) ((void)(p))
#define BC_PREFETCH_NTA(p) ((void)(p))
#define BC_PREFETCH_W(p) ((void)(p))
#endif
/* Sums over a team's threads in thread order.  An OpenMP reduction adds the
 * threads' sums in the order they finish, so on three threads or more a
 * solve's last bits varied from run to run.  Each thread stores its sums in
 * its slot (64 bytes) at the end of the parallel region; bc_slots_sum
 * adds them in order after it: on one and two threads, the same bits as the
 * reduction gave. */
typedef struct {
    double v[8];
} bc_slot;

/* The threads of the next parallel region, at most (a slot each). */
static inline int bc_team_max(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* This thread's slot. */
static inline bc_slot *bc_my_slot(bc_slot *slots)
{
#ifdef _OPENMP
    return slots + omp_get_thread_num();
#else
    return slots;
#endif
}

/* The blocks of color c that this thread takes, [*b0, *b1): an equal run
 * each, the first threads one more.  That is how GCC (inline) and libgomp
 * share `omp for schedule(static)` with no chunk, as the sweeps share a
 * color's blocks; OpenMP does not promise the same share across parallel
 * regions, so only the cache's reuse depends on it, not a result. */
static inline void bc_my_blocks(const bc_local *L, int c, int *b0, int *b1)
{
#ifdef _OPENMP
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
#else
    const int nt = 1, t = 0;
#endif
    const int first = L->cptr[c], nb = L->cptr[c + 1] - first, q = nb / nt, r = nb % nt;
    *b0 = first + t * q + (t < r ? t : r);
    *b1 = *b0 + q + (t < r);
}

/* The rows of those blocks, one run of consecutive rows [*i0, *i1).  The
 * loops over rows in a solve (SpMV, vector updates) and the first touch of
 * their arrays take each thread's rows from here, so that a row stays on the
 * thread that sweeps it (the gain is measured, comparisons/README.md, "Each
 * row on the thread that sweeps it"; that it comes from the core's caches is
 * not shown). */
static inline void bc_my_rows(const bc_local *L, int c, int *i0, int *i1)
{
    int b0, b1;
    bc_my_blocks(L, c, &b0, &b1);
    *i0 = L->bstart[b0], *i1 = L->bstart[b1];
}

/* Sum k of the n slots, in thread order. */
static inline double bc_slots_sum(const bc_slot *slots, int n, int k)
{
    double s = 0.0;
    for (int t = 0; t < n; t++)
        s += slots[t].v[k];
    return s;
}

/* Prefetch the line at p, non-temporal where `nta`. */
static inline void bc_prefetch_line(const void *p, int nta)
{
    if (nta)
        BC_PREFETCH_NTA(p);
    else
        BC_PREFETCH(p);
}

/* Prefetch entry k + BC_PF of a stream of `end` entries of `size` bytes,
 * non-temporal where `nta`. */
static inline void bc_prefetch(const void *base, int64_t k, int64_t end, size_t size, int nta)
{
    const int64_t at = k + BC_PF < end ? k + BC_PF : end - 1;
    if (BC_PF > 0 && at >= 0)
        bc_prefetch_line((const char *)base + (size_t)at * size, nta);
}

/* Rows [i0, i1) of y = A x (CSR, each row summed in its order), adding each
 * x_i y_i to *xy in row order; A's stream prefetched BC_PF entries ahead of
 * `end`, non-temporal where `nta`.  Call it with a literal nta: each call
 * then inlines a loop without the test (bc_spmv). */
static inline void bc_spmv_rows(const bc_local *L, int i0, int i1, int64_t end, int nta,
                                const double *x, double *y, double *xy)
{
    double d = *xy;
    for (int i = i0; i < i1; i++) {
        double s = 0.0;
        bc_prefetch(L->val, L->rowptr[i], end, sizeof *L->val, nta);
        bc_prefetch(L->col, L->rowptr[i], end, sizeof *L->col, nta);
        for (int64_t k = L->rowptr[i]; k < L->rowptr[i + 1]; k++)
            s += L->val[k] * x[L->col[k]];
        y[i] = s;
        d += x[i] * s;
    }
    *xy = d;
}

/* Whether the SpMV prefetches A's stream non-temporal (bc_local.spmv_nta):
 * as `mode` says (BC_SPMV_NTA_ON, _OFF), or by the CPU (BC_SPMV_NTA_AUTO): on
 * AMD x86 CPUs only.  Read once an iteration, that stream prefetched as ordinary
 * lines displaced the vectors the other passes read again: non-temporal, the
 * solve took 0.85-0.96 of its time at 128^3 on an AMD EPYC (Zen 5) VM.  On an Intel
 * Xeon VM the non-temporal SpMV took 1.65x the ordinary one's time, from
 * memory and in cache alike (comparisons/README.md, "The SpMV's stream
 * prefetched non-temporal on a Xeon"). */
static inline int bc_spmv_nta_rule(int mode)
{
    if (mode != BC_SPMV_NTA_AUTO)
        return mode == BC_SPMV_NTA_ON;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_is("amd");
#else
    return 0;
#endif
}

/* How many blocks ahead a sweep prefetches the scattered lines of its plan. */
#ifndef BC_PFB
#define BC_PFB 2
#endif

/* Prefetch run `part` (0 earlier colors, 1 later, 2 halo) of block b's plan
 * into the vector v, when b < last (a sweep stays inside its color: the next
 * color's lines may be the ones other threads are writing); the sweeps only
 * where L->sweep_prefetch says (cg.c). */
static inline void bc_prefetch_block(const bc_local *L, int b, int last, int part, const double *v)
{
    if (BC_PFB > 0 && b < last)
        for (int64_t k = L->pfptr[3 * b + part]; k < L->pfptr[3 * b + part + 1]; k++)
            BC_PREFETCH(v + L->pf[k]);
}

/* Whether the sweeps prefetch the lines each block gathers from other blocks
 * (bc_local.sweep_prefetch): always where blocks are row runs; else as `mode`
 * says (1 on, 0 off), or where it is -1 (BC_SWEEP_PREFETCH_AUTO), where z of
 * the node's `node_rows` rows (8 bytes a row) exceeds its last-level cache
 * of `llc_bytes` (0: unknown, no prefetch).  cg.c's sweeps_prefetch decides
 * it for the solver, the kernel harnesses' poisson_setup for theirs. */
static inline int bc_sweep_prefetch_rule(int row_runs, int mode, int64_t node_rows,
                                         int64_t llc_bytes)
{
    if (row_runs || mode >= 0)
        return row_runs || mode > 0;
    return llc_bytes > 0 && node_rows * (int64_t)sizeof(double) > llc_bytes;
}

/* cg.c: with -DBC_PROFILE, print to stderr the seconds since the previous call
 * (rank 0, thread 0), labelled `name`; name NULL only restarts the clock.  The
 * setup's phases call it (comparisons/biccg_setup_profile.c); without the flag
 * it compiles to nothing. */
#ifdef BC_PROFILE
void bc_phase(const char *name);
#define BC_PHASE(name) bc_phase(name)
#else
#define BC_PHASE(name) ((void)0)
#endif

/* cg.c: an array of count items of size bytes; large ones 2 MiB aligned and
 * backed by transparent huge pages where the kernel allows (TLB misses
 * dominate the scattered reads of the substitutions otherwise), or by base
 * pages where the solve asks (bc_params.base_pages). bc_free() it. */
void *bc_alloc(size_t count, size_t size);

/* cg.c: free what bc_alloc or malloc gave; bc_alloc's large blocks are kept
 * in the process's pool for the next solve (see there). */
void bc_free(void *p);

/* cg.c: at the end of a public entry point, once its arrays are freed: the
 * pool's blocks that it did not take returned to the system (all: every
 * block not in use), those it freed made available to the next. */
void bc_pool_trim(int all);

/* cg.c: y = A x for the local rows (x with its halo filled); returns the
 * local x'y, summed as y is written.  Its rows are shared out color by color,
 * as the sweeps share them, not as one run of all rows: each row of q is then
 * written by the thread that sweeps it, and with the vector updates likewise
 * (bc_my_rows), a solve on one rank of two threads took 0.84 of its time at
 * 64^3 and 0.95 at 128^3 (comparisons/README.md, "Each row on the thread that
 * sweeps it"). */
double bc_spmv(const bc_local *L, const double *x, double *y);

/* ordering.c: color the blocks of the local diagonal block (p's block size or
 * tiles) and fill cptr, bstart, perm, iperm, ncolors, nblocks, and nout, nlow
 * (the entries whose column lies outside the rank, before it, which
 * bc_build_local needs). */
int bc_order(const bc_csr_in *a, const bc_params *p, bc_local *L, int **block_color);

/* matrix.c: lists of int32 per item, built in parallel: fn(ctx, item, scratch,
 * out, cnt) writes item's `parts` lists one after the other to out (at most
 * parts x most entries; scratch holds as many), their lengths to cnt[0..parts),
 * and returns their sum.  Each thread runs its static share of the items into
 * a buffer of its own and copies it into place after the prefix sum (first
 * touch by that thread).  *ptr gets parts x items + 1 offsets (part p of
 * item k: [ptr[parts k + p], ptr[parts k + p + 1])), *out the lists; both
 * bc_alloc'ed, set even on failure (free them).  BC_OK or BC_ENOMEM. */
typedef int64_t (*bc_item_fn)(const void *ctx, int item, int32_t *scratch, int32_t *out,
                              int64_t *cnt);
int bc_gather(int items, int parts, int64_t most, bc_item_fn fn, const void *ctx,
              int64_t **ptr, int32_t **out);

/* matrix.c: the local rows in the new numbering (halo columns mapped); then,
 * in one scan of them, the prefetch plan that bc_prefetch_block follows (the
 * SpMV and the sweeps need it) and the factor's pattern: lptr, uptr (each
 * row's lower entries, and upper ones inside the rank, as row pointers) and
 * lin, uin (those coupling the row to its own block). */
int bc_build_local(const bc_csr_in *a, bc_local *L);
int bc_scan_blocks(bc_local *L);

/* ic0.c: factor the local diagonal block (bc_scan_blocks' pattern; shift
 * retried until pivots are positive), its values kept in single precision if
 * `single`. */
int bc_factor(bc_local *L, int single);

/* ic0.c: z = M^-1 r.  Where q is given, first r -= alpha q (the CG update, in
 * the same pass).  Returns the local sums rr = r'r and rz = r'z (r updated). */
void bc_precond(const bc_local *L, double alpha, const double *q, double *r, double *z,
                double *rr, double *rz);

/* halo.c: plan the exchange once; exchange x[nloc..) from the owners. */
int bc_halo_plan(MPI_Comm comm, const bc_csr_in *a, bc_local *L);
int bc_halo_exchange(MPI_Comm comm, bc_local *L, double *x);

void bc_local_free(bc_local *L);

#endif
