/*
 * cg.c - the preconditioned conjugate gradient iteration and the setup that
 * precedes it; see biccg.h for the contract.
 */
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __linux__
#include <sys/mman.h>
#endif
#include <pthread.h>

#include "internal.h"

#ifdef BC_PROFILE
#include <stdio.h>
void bc_phase(const char *name)
{
    static double last = 0.0;
    const double now = MPI_Wtime();
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (name != NULL && rank == 0)
        fprintf(stderr, "phase %-26s %9.4f s\n", name, now - last);
    last = now;
}

/* FNV-1a of `bytes` bytes, chained from h: the digests below. */
static uint64_t fnv(uint64_t h, const void *p, size_t bytes)
{
    for (size_t k = 0; k < bytes; k++)
        h = (h ^ ((const unsigned char *)p)[k]) * 1099511628211ULL;
    return h;
}

/* Digests of what the setup built (the ordering, local matrix, prefetch plan, factor),
 * to show a faster setup builds the same bytes.  U counts as the sweeps read it: its
 * rows in blocks the sweeps do not copy, then the copies (ic0.c, pack_sweeps). */
static void bc_digest(const bc_local *L)
{
    const int n = L->nloc, nb = L->nblocks;
    const int64_t nl = L->lptr[n], nnz = L->rowptr[n];
    const int64_t npf = L->pfptr[3 * (size_t)nb];
    const size_t fs = L->lval32 ? 4 : 8; /* the factor's values */
    const char *lv = L->lval32 ? (const char *)L->lval32 : (const char *)L->lval;
    const char *uv = L->lval32 ? (const char *)L->uval32 : (const char *)L->uval;
    const void *dv = L->lval32 ? (const void *)L->dinv32 : (const void *)L->dinv;
    uint64_t h[5];
    for (int k = 0; k < 5; k++)
        h[k] = 14695981039346656037ULL;
    h[0] = fnv(fnv(h[0], L->perm, (size_t)n * sizeof(int)), L->bstart,
               ((size_t)nb + 1) * sizeof(int));
    h[1] = fnv(fnv(fnv(h[1], L->rowptr, ((size_t)n + 1) * 8), L->col, (size_t)nnz * 4), L->val,
               (size_t)nnz * 8);
    h[2] = fnv(fnv(h[2], L->pfptr, (3 * (size_t)nb + 1) * 8), L->pf, (size_t)npf * 4);
    h[3] = fnv(fnv(fnv(h[3], L->lptr, ((size_t)n + 1) * 8), L->uptr, ((size_t)n + 1) * 8),
               L->lidx, (size_t)nl * 4);
    h[3] = fnv(fnv(h[3], L->lin, (size_t)n * 4), L->uin, (size_t)n * 4);
    h[4] = fnv(fnv(h[4], lv, (size_t)nl * fs), dv, (size_t)n * fs);
    int64_t tiles = 0;
    for (int b = 0; b < nb; b++) {
        const int64_t u0 = L->uptr[L->bstart[b]], u1 = L->uptr[L->bstart[b + 1]];
        tiles += L->tpos[b] >= 0;
        if (L->tpos[b] < 0) {
            h[3] = fnv(h[3], L->uidx + u0, (size_t)(u1 - u0) * 4);
            h[4] = fnv(h[4], uv + (size_t)u0 * fs, (size_t)(u1 - u0) * fs);
        }
    }
    const size_t nf = (size_t)L->fptr[nb], nu = (size_t)L->bptr[nb];
    h[3] = fnv(fnv(fnv(h[3], L->tpos, ((size_t)nb + 1) * 4), L->fptr, ((size_t)nb + 1) * 8),
               L->bptr, ((size_t)nb + 1) * 8);
    h[3] = fnv(fnv(fnv(fnv(h[3], L->fcol, nf * 4), L->frow, nf), L->bcol, nu * 4), L->brow, nu);
    h[4] = fnv(fnv(fnv(fnv(h[4], L->fval, nf * fs), L->bval, nu * fs), L->tl,
                   64 * (size_t)tiles * fs),
               L->tu, 64 * (size_t)tiles * fs);
    fprintf(stderr, "digest order %016llx matrix %016llx plan %016llx pattern %016llx factor %016llx\n",
            (unsigned long long)h[0], (unsigned long long)h[1], (unsigned long long)h[2],
            (unsigned long long)h[3], (unsigned long long)h[4]);
}
#endif

#define HUGE_PAGE ((size_t)2 << 20)

/*
 * The pool: large blocks (a huge page or more) that a setup freed, kept for
 * the process's next setup.  Handed back to the system and touched again
 * seconds later, they cost that setup 4-5x on the AMD VM, whose host takes
 * freed memory back (0.60 s at 128^3 after a 5 s pause against
 * 0.12 s back to back, comparisons/README.md, "Cold memory"); PETSc keeps its
 * factor's arrays between solves.  A block freed during a solve becomes
 * available only when the solve has ended (bc_pool_trim), so that a setup
 * never takes a block another array of the same setup placed (first touch);
 * a solve repeated with the same sizes and pages gets back, array by array,
 * the blocks the last one placed (the smallest that fits, the earliest kept
 * of equal size).  Blocks that solve did not take are returned then: between
 * solves, a process holds what its last one used.  bc_release returns them
 * all.  The blocks are mapped, not taken from malloc: glibc may serve a block
 * from heap memory that earlier arrays faulted in, in pages of either kind,
 * where the kind asked for (bc_params.base_pages) would not hold.  The pool
 * holds blocks of one kind, pool_base_pages: a solve that asks for the other
 * returns them first (pool_kind).  One solve at a time in a process.
 */
#define BC_POOL 64
static struct {
    void *p;
    size_t cap;
    int state; /* BUSY, PENDING (freed during this solve), FREE */
    int taken; /* taken since the last trim */
} pool[BC_POOL];
enum { BUSY = 1, PENDING, FREE };
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static int pool_base_pages; /* the pool's blocks are in base pages, not huge ones */

/* Advice only, ignored where THP is off; NOHUGEPAGE keeps base pages where
 * THP is always on. */
static void advise_pages(void *p, size_t bytes, int base)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes, base ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
#else
    (void)p, (void)bytes, (void)base;
#endif
}

/* A fresh block of cap bytes (a multiple of HUGE_PAGE), 2 MiB aligned, its
 * pages of the kind `base` says; NULL where there is no memory. */
static void *map_block(size_t cap, int base)
{
    void *p = NULL;
#ifdef __linux__
    /* one huge page more than asked, then the unaligned ends unmapped */
    char *m = mmap(NULL, cap + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *a = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (a > m)
        munmap(m, (size_t)(a - m));
    munmap(a + cap, HUGE_PAGE - (size_t)(a - m));
    p = a;
#else
    if (posix_memalign(&p, HUGE_PAGE, cap) != 0)
        return NULL;
#endif
    advise_pages(p, cap, base);
    return p;
}

static void unmap_block(void *p, size_t cap)
{
#ifdef __linux__
    munmap(p, cap);
#else
    (void)cap;
    free(p);
#endif
}

void *bc_alloc(size_t count, size_t size)
{
    size_t bytes = (count > 0 ? count : 1) * size;
    if (bytes < HUGE_PAGE)
        return malloc(bytes);
    const size_t cap = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    void *p = NULL;
    int best = -1, slot = -1;
    pthread_mutex_lock(&pool_lock);
    const int base = pool_base_pages;
    for (int k = 0; k < BC_POOL; k++)
        if (pool[k].p == NULL && slot < 0)
            slot = k;
        else if (pool[k].state == FREE && pool[k].cap >= cap &&
                 (best < 0 || pool[k].cap < pool[best].cap))
            best = k;
    if (best >= 0)
        p = pool[best].p, pool[best].state = BUSY, pool[best].taken = 1;
    else if (slot >= 0 && (p = map_block(cap, base)) != NULL)
        pool[slot].p = p, pool[slot].cap = cap, pool[slot].state = BUSY, pool[slot].taken = 1;
    pthread_mutex_unlock(&pool_lock);
    if (best < 0 && slot < 0 && posix_memalign(&p, HUGE_PAGE, bytes) == 0)
        advise_pages(p, bytes, base); /* the pool is full: glibc's, not kept (bc_free frees it) */
    return p;
}

void bc_free(void *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&pool_lock);
    int k = 0;
    while (k < BC_POOL && pool[k].p != p)
        k++;
    if (k < BC_POOL) {
#ifdef BC_POOL_POISON /* tests of the setup: nothing may read what the last one left */
        memset(p, 0xa5, pool[k].cap);
#endif
        pool[k].state = PENDING;
    }
    pthread_mutex_unlock(&pool_lock);
    if (k == BC_POOL)
        free(p);
}

/* bc_pool_trim with the pool's lock held. */
static void trim_locked(int all)
{
    for (int k = 0; k < BC_POOL; k++) {
        if (pool[k].p == NULL || pool[k].state == BUSY)
            continue;
        if (all || !pool[k].taken) {
            unmap_block(pool[k].p, pool[k].cap);
            pool[k].p = NULL, pool[k].cap = 0, pool[k].state = 0;
        } else
            pool[k].state = FREE;
        pool[k].taken = 0;
    }
}

/* At a solve's end: the blocks no setup took since the last trim returned,
 * those freed during this solve made available.  all: every free one returned. */
void bc_pool_trim(int all)
{
    pthread_mutex_lock(&pool_lock);
    trim_locked(all);
    pthread_mutex_unlock(&pool_lock);
}

/* New blocks in base pages (base 1) or huge ones from now on; kept blocks of
 * the other kind are returned (kept, they would double the process's memory
 * through the next solve). */
static void pool_kind(int base)
{
    pthread_mutex_lock(&pool_lock);
    if (base != pool_base_pages) {
        trim_locked(1);
        pool_base_pages = base;
    }
    pthread_mutex_unlock(&pool_lock);
}

void bc_release(void)
{
    bc_pool_trim(1);
}

void bc_local_free(bc_local *L)
{
    void *all[] = {L->rowptr, L->col,   L->val,   L->cptr,   L->bstart, L->perm,
                   L->iperm,  L->dinv,  L->lptr,  L->uptr,   L->lidx,   L->uidx,
                   L->lval,   L->uval,  L->rrank, L->rcount, L->roff,   L->srank,
                   L->scount, L->soff,  L->sidx,  L->sbuf,   L->req,    L->halo_g,
                   L->lin,    L->uin,   L->pfptr, L->pf,     L->fptr,   L->bptr,
                   L->fcol,   L->bcol,  L->tpos,  L->fval,   L->bval,   L->tl,
                   L->tu,     L->frow,  L->brow,  L->lval32, L->uval32, L->dinv32};
    if (L->uval_in_uidx)
        all[sizeof all / sizeof all[0] - 2] = NULL;
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        bc_free(all[k]);
    memset(L, 0, sizeof *L);
}

double bc_spmv(const bc_local *L, const double *x, double *y)
{
    const int64_t end = L->rowptr[L->nloc];
    const int nta = L->spmv_nta;
    const int nt = bc_team_max();
    bc_slot sums[nt];
    memset(sums, 0, sizeof sums);
#pragma omp parallel
    {
        double xy = 0.0;
        for (int c = 0; c < L->ncolors; c++) {
            int b0, b1;
            bc_my_blocks(L, c, &b0, &b1);
            for (int b = b0; b < b1; b++) {
                for (int part = 0; part < 3; part++)
                    bc_prefetch_block(L, b + BC_PFB, b1, part, x);
                if (nta) /* a literal each: two loops, no test a row */
                    bc_spmv_rows(L, L->bstart[b], L->bstart[b + 1], end, 1, x, y, &xy);
                else
                    bc_spmv_rows(L, L->bstart[b], L->bstart[b + 1], end, 0, x, y, &xy);
            }
        }
        bc_my_slot(sums)->v[0] = xy;
    }
    return bc_slots_sum(sums, nt, 0);
}

/* All ranks agree on one return code (the largest), so that none waits alone
 * in a collective after another has given up. */
static int agree(MPI_Comm comm, int rc)
{
    int all = rc;
    if (MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS)
        return BC_EMPI;
    return all;
}

static int finite_input(const bc_csr_in *a, const double *b)
{
    bc_gidx base = bc_in_ptr(a, 0), nnz = bc_in_ptr(a, a->nrows) - base;
    int ok = 1;
#pragma omp parallel for reduction(& : ok)
    for (bc_gidx k = 0; k < nnz; k++)
        ok &= isfinite(a->data[base + k]) != 0;
#pragma omp parallel for reduction(& : ok)
    for (bc_gidx i = 0; i < a->nrows; i++)
        ok &= isfinite(b[i]) != 0;
    return ok;
}

/* Residual r = b - A x (x with its halo filled; b in the caller's numbering,
 * read through perm: a copy in the new one would be 8 bytes a row of fresh
 * memory, read twice a solve), returns the local ||r||^2 and, in the same
 * pass, the local ||b||^2 in *bb. */
static double residual(const bc_local *L, const double *b_in, const double *x, double *r,
                       double *bb)
{
    bc_spmv(L, x, r);
    const int nt = bc_team_max();
    bc_slot sums[nt];
    memset(sums, 0, sizeof sums);
#pragma omp parallel
    {
        double s = 0.0, sb = 0.0;
#pragma omp for schedule(static)
        for (int i = 0; i < L->nloc; i++) {
            const double b = b_in[L->perm[i]];
            r[i] = b - r[i];
            s += r[i] * r[i];
            sb += b * b;
        }
        bc_my_slot(sums)->v[0] = s;
        bc_my_slot(sums)->v[1] = sb;
    }
    *bb = bc_slots_sum(sums, nt, 1);
    return bc_slots_sum(sums, nt, 0);
}

/* The parts of a solve timed separately (bc_result's t_* fields, in order). */
enum { T_INPUT, T_ORDERING, T_FACTOR, T_HALO_SETUP, T_VECTORS, T_SOLVE, T_SPMV, T_PRECOND,
       T_DOTS, T_HALO, T_VECTOR, T_COUNT };

/* A stopwatch that charges the time since its last reading to one part. */
typedef struct {
    double sum[T_COUNT], last;
} bc_timer;

static void tic(bc_timer *t)
{
    t->last = MPI_Wtime();
}

static void toc(bc_timer *t, int part)
{
    const double now = MPI_Wtime();
    t->sum[part] += now - t->last;
    t->last = now;
}

/* Global sums of n doubles; BC_EMPI where MPI fails. */
static int sum_all(MPI_Comm comm, double *in, double *out, int n)
{
    return MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, comm) == MPI_SUCCESS ? BC_OK : BC_EMPI;
}

/* This rank's traffic in the iteration loop: what the time model prices. */
typedef struct {
    double msgs, msg_bytes, reductions, reduction_bytes;
} cg_traffic;

/* The halo exchange of the loop, its messages and bytes counted. */
static int exchange_counted(MPI_Comm comm, bc_local *L, double *x, cg_traffic *c)
{
    c->msgs += L->nsend;
    for (int k = 0; k < L->nsend; k++)
        c->msg_bytes += (double)L->scount[k] * sizeof(double);
    return bc_halo_exchange(comm, L, x);
}

/* sum_all in the loop, the Allreduce and its payload counted. */
static int sum_counted(MPI_Comm comm, double *in, double *out, int n, cg_traffic *c)
{
    c->reductions += 1;
    c->reduction_bytes += (double)n * sizeof(double);
    return sum_all(comm, in, out, n);
}

/* CG's vectors in the rank's new numbering; x and p with room for the halo.
 * b stays the caller's (residual).  z lies in q's array: the sweeps read q_i
 * (r -= alpha q) just before they write z_i, and q is not read again before
 * the next SpMV overwrites it, after z's last use (p = z + beta p).  One
 * vector less of fresh memory in the setup, and z's stores hit the lines
 * that the read of q brought in, not lines fetched for the store alone. */
typedef struct {
    double *x, *r, *z, *p, *q;
} cg_vectors;

static void cg_vectors_free(cg_vectors *v)
{
    bc_free(v->x), bc_free(v->r), bc_free(v->p), bc_free(v->q);
}

/* Whether the sweeps prefetch the lines each block gathers from other blocks
 * (L->sweep_prefetch): always where blocks are row runs; with tiles as
 * p->sweep_prefetch says, or (-1) where the vector they gather, this node's
 * ranks together at 8 bytes a row, exceeds its last-level cache: those lines
 * then come from memory, and fetched ahead the preconditioner took 0.66-0.76
 * of the time on the AMD VM past its cache, while in cache the prefetches
 * only cost, 1.04-1.11 (comparisons/README.md, "The sweeps' gathers
 * prefetched past the cache").  The cache is the node's, all its instances:
 * the decision's layouts fill a node's cores; a layout on part of a node with
 * several L3s counts caches its cores cannot use, and prefetches less than it
 * could.  Collective: p->sweep_prefetch must be the same on every rank. */
static int sweeps_prefetch(MPI_Comm comm, const bc_params *p, bc_local *L)
{
    if (L->row_runs || p->sweep_prefetch >= 0) {
        L->sweep_prefetch = bc_sweep_prefetch_rule(L->row_runs, p->sweep_prefetch, 0, 0);
        return BC_OK;
    }
    MPI_Comm node;
    int64_t rows = L->nloc, on_node = 0;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return BC_EMPI;
    int rc = MPI_Allreduce(&rows, &on_node, 1, MPI_INT64_T, MPI_SUM, node) == MPI_SUCCESS
                 ? BC_OK
                 : BC_EMPI;
    MPI_Comm_free(&node);
    L->sweep_prefetch = bc_sweep_prefetch_rule(0, -1, on_node, p->llc_bytes);
    return rc;
}

/*
 * Setup (PETSc's KSPSetUp_CG with PCSetUp): check the input, order, build the
 * local matrix and its prefetch plan, factor, plan the halo; no communication
 * before the ranks agree that each of them got this far.
 */
static int cg_setup(MPI_Comm comm, const bc_csr_in *a, const double *b_in, const bc_params *p,
                    bc_local *L, bc_timer *t)
{
    int rc = (p->block_size < 1 || p->colors < 1 || p->tol <= 0.0 || p->max_iter < 0 ||
              p->spmv_nta < BC_SPMV_NTA_AUTO || p->spmv_nta > BC_SPMV_NTA_OFF ||
              a->nrows < 1 || a->nrows > 0x7fffffff)
                 ? BC_EINVAL
                 : BC_OK;
    tic(t);
    BC_PHASE(NULL);
    if (rc == BC_OK && !finite_input(a, b_in))
        rc = BC_ENOTFINITE;
    BC_PHASE("input check");
    toc(t, T_INPUT);
    if (rc == BC_OK)
        rc = bc_order(a, p, L, NULL);
    BC_PHASE("ordering");
    toc(t, T_ORDERING);
    if (rc == BC_OK)
        rc = bc_build_local(a, L);
    if (rc == BC_OK)
        rc = bc_scan_blocks(L);
    BC_PHASE("plan + pattern");
    if (rc == BC_OK)
        rc = bc_factor(L, p->single_factor);
    toc(t, T_FACTOR);
#ifdef BC_PROFILE
    if (rc == BC_OK)
        bc_digest(L);
    BC_PHASE(NULL);
    tic(t); /* the digests are the profile's, not the setup's */
#endif
    if ((rc = agree(comm, rc)) == BC_OK)
        rc = agree(comm, bc_halo_plan(comm, a, L));
    if (rc == BC_OK)
        rc = sweeps_prefetch(comm, p, L);
    L->spmv_nta = bc_spmv_nta_rule(p->spmv_nta);
    toc(t, T_HALO_SETUP);
    return rc;
}

/* The vectors, first touched in the new numbering (x0 permuted), each row by
 * the thread that takes it in the solve (bc_my_rows). */
static int cg_vectors_init(MPI_Comm comm, const bc_local *L, const double *x_in, cg_vectors *v)
{
    const int n = L->nloc;
    const size_t ext = (size_t)n + (size_t)L->nhalo;
    v->x = bc_alloc(ext, sizeof(double));
    v->r = bc_alloc((size_t)n, sizeof(double));
    v->p = bc_alloc(ext, sizeof(double));
    v->q = v->z = bc_alloc((size_t)n, sizeof(double));
    int rc = agree(comm, (v->x && v->r && v->p && v->q) ? BC_OK : BC_ENOMEM);
    if (rc != BC_OK)
        return rc;
#pragma omp parallel
    for (int c = 0; c < L->ncolors; c++) {
        int i0, i1;
        bc_my_rows(L, c, &i0, &i1);
        for (int i = i0; i < i1; i++) {
            v->x[i] = x_in[L->perm[i]];
            v->r[i] = v->p[i] = v->q[i] = 0.0;
        }
    }
    for (size_t h = (size_t)n; h < ext; h++)
        v->x[h] = v->p[h] = 0.0;
    return BC_OK;
}

/*
 * The iteration (PETSc's KSPSolve_CG), in three passes over memory per step
 * (p and q: the SpMV with the dot p'q; r, q, z: both sweeps with the update
 * of r and the sums r'r and r'z; x, p, z: both vector updates) and two
 * reductions.  Stops at ||r|| <= tol ||b|| (the recursive residual) or
 * max_iter; fills out's iterations, history, cg_residual, and (recomputed
 * after the solve's timer stops) relative_residual and converged.
 */
static int cg_iterate(MPI_Comm comm, bc_local *L, const bc_params *p, const double *b_in,
                      cg_vectors *v, bc_result *out, bc_timer *t, cg_traffic *c)
{
    const int n = L->nloc;
    double sums[2], local[2], rz = 0.0;
    const double started = MPI_Wtime();
    tic(t);
    int rc = bc_halo_exchange(comm, L, v->x); /* r = b - A x0 */
    toc(t, T_HALO);
    local[0] = residual(L, b_in, v->x, v->r, &local[1]);
    toc(t, T_SPMV);
    if (rc == BC_OK)
        rc = sum_all(comm, local, sums, 2);
    toc(t, T_DOTS);
    if (rc != BC_OK)
        return rc;
    const double bnorm = sqrt(sums[1]) > 0.0 ? sqrt(sums[1]) : 1.0;
    double rel = sqrt(sums[0]) / bnorm;
    if (out->history)
        out->history[0] = rel;
    int it = 0;
    if (rel > p->tol && p->max_iter > 0) {
        bc_precond(L, 0.0, NULL, v->r, v->z, &local[0], &local[1]);
        toc(t, T_PRECOND);
        rc = sum_all(comm, &local[1], &rz, 1);
        toc(t, T_DOTS);
        memcpy(v->p, v->z, (size_t)n * sizeof(double));
    }
    while (rc == BC_OK && rel > p->tol && it < p->max_iter) {
        it++;
        tic(t);
        rc = exchange_counted(comm, L, v->p, c);
        toc(t, T_HALO);
        local[0] = bc_spmv(L, v->p, v->q);
        toc(t, T_SPMV);
        double pq = 0.0;
        if (rc == BC_OK)
            rc = sum_counted(comm, local, &pq, 1, c);
        toc(t, T_DOTS);
        if (rc != BC_OK)
            break;
        if (!(pq > 0.0) || !(rz > 0.0)) { /* same on every rank: the sums are global */
            rc = BC_EBREAKDOWN;
            out->breakdown_iteration = it;
            break;
        }
        const double alpha = rz / pq;
        bc_precond(L, alpha, v->q, v->r, v->z, &local[0], &local[1]);
        toc(t, T_PRECOND);
        rc = sum_counted(comm, local, sums, 2, c); /* one reduction: ||r||^2 and r'z */
        toc(t, T_DOTS);
        rel = sqrt(sums[0]) / bnorm;
        if (out->history)
            out->history[it] = rel;
        const double beta = sums[1] / rz;
        rz = sums[1];
        double *restrict x = v->x, *restrict pv = v->p;
        const double *restrict z = v->z;
        /* each thread its own rows, as the sweeps share them (bc_my_rows) */
        const int next = rel > p->tol && it < p->max_iter; /* else no next direction */
#pragma omp parallel
        for (int color = 0; color < L->ncolors; color++) {
            int i0, i1;
            bc_my_rows(L, color, &i0, &i1);
            if (next)
                for (int i = i0; i < i1; i++) {
                    x[i] += alpha * pv[i];
                    pv[i] = z[i] + beta * pv[i];
                }
            else
                for (int i = i0; i < i1; i++)
                    x[i] += alpha * pv[i];
        }
        toc(t, T_VECTOR);
    }
    t->sum[T_SOLVE] = MPI_Wtime() - started;
    out->iterations = it;
    out->history_len = it + 1;
    out->cg_residual = rel;
    out->converged = rc == BC_OK && rel <= p->tol;
    if (rc == BC_OK) { /* the residual CG reports is recursive: recompute it */
        double rr = 0.0, rr_all = 0.0, bb = 0.0;
        rc = bc_halo_exchange(comm, L, v->x);
        rr = residual(L, b_in, v->x, v->r, &bb);
        if (rc == BC_OK)
            rc = sum_all(comm, &rr, &rr_all, 1);
        out->relative_residual = sqrt(rr_all) / bnorm;
        out->converged = out->converged && out->relative_residual <= p->tol;
    }
    return rc;
}

/* The slowest rank's times, the largest shift and color count, the halo's total size,
 * the busiest rank's traffic per iteration.  The setup is the slowest rank's sum of its
 * parts, not the sum of each part's slowest rank: a rank that waits in a collective for
 * a slower one counts the wait in a later part, and the parts' maxima would count the
 * slower rank's time twice (2 x 1 at 64^3, later setups: a median 0.042 s, where
 * the parts' maxima sum to 0.054).  The caller starts the ranks together (a barrier
 * before the call) where the setup should not count a rank's wait for another. */
static int cg_report(MPI_Comm comm, const bc_local *L, const bc_timer *t,
                     const cg_traffic *c, bc_result *out)
{
    double tl[T_COUNT + 6], tg[T_COUNT + 6];
    memcpy(tl, t->sum, sizeof t->sum);
    tl[T_COUNT] = L->shift;
    tl[T_COUNT + 1] = c->msgs, tl[T_COUNT + 2] = c->msg_bytes;
    tl[T_COUNT + 3] = c->reductions, tl[T_COUNT + 4] = c->reduction_bytes;
    tl[T_COUNT + 5] = t->sum[T_INPUT] + t->sum[T_ORDERING] + t->sum[T_FACTOR] +
                      t->sum[T_HALO_SETUP] + t->sum[T_VECTORS];
    bc_gidx mine[2] = {L->nhalo, 0}, all[2] = {0, 0}; /* halo entries, copied rows */
    for (int b = 0; b < L->nblocks; b++)
        mine[1] += L->tpos[b] >= 0 ? L->bstart[b + 1] - L->bstart[b] : 0;
    int colors_all = 0;
    if (MPI_Allreduce(tl, tg, T_COUNT + 6, MPI_DOUBLE, MPI_MAX, comm) != MPI_SUCCESS ||
        MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_SUM, comm) != MPI_SUCCESS ||
        MPI_Allreduce(&L->ncolors, &colors_all, 1, MPI_INT, MPI_MAX, comm) !=
            MPI_SUCCESS)
        return BC_EMPI;
    double *fields[T_COUNT] = {&out->t_input,   &out->t_ordering, &out->t_factor,
                               &out->t_halo_setup, &out->t_vectors, &out->t_solve,
                               &out->t_spmv,    &out->t_precond,  &out->t_dots,
                               &out->t_halo,    &out->t_vector};
    for (int k = 0; k < T_COUNT; k++)
        *fields[k] = tg[k];
    out->t_setup = tg[T_COUNT + 5];
    out->shift = tg[T_COUNT];
    const double it = out->iterations > 0 ? out->iterations : 1;
    out->msgs_per_iter = tg[T_COUNT + 1] / it;
    out->msg_bytes_per_iter = tg[T_COUNT + 2] / it;
    out->reductions_per_iter = tg[T_COUNT + 3] / it;
    out->reduction_bytes_per_iter = tg[T_COUNT + 4] / it;
    out->halo_rows = all[0];
    out->copied_rows = all[1];
    out->colors_used = colors_all;
    return BC_OK;
}

int bc_solve(MPI_Comm comm, const bc_csr_in *a, const double *b_in, double *x_in,
             const bc_params *p, bc_result *out)
{
    bc_local L;
    cg_vectors v;
    bc_timer t;
    cg_traffic c = {0, 0, 0, 0};
    memset(&L, 0, sizeof L);
    memset(&v, 0, sizeof v);
    memset(&t, 0, sizeof t);
    memset(out, 0, sizeof *out);
    out->breakdown_iteration = -1;
#ifdef _OPENMP
    if (p->threads > 0)
        omp_set_num_threads(p->threads);
#endif
    pool_kind(p->base_pages != 0);
    int rc = cg_setup(comm, a, b_in, p, &L, &t);
    if (rc == BC_OK) {
        tic(&t);
        BC_PHASE(NULL);
        rc = cg_vectors_init(comm, &L, x_in, &v);
        if (rc == BC_OK && p->keep_history) {
            out->history = malloc(((size_t)p->max_iter + 1) * sizeof(double));
            rc = agree(comm, out->history ? BC_OK : BC_ENOMEM);
        }
        BC_PHASE("vectors");
        toc(&t, T_VECTORS);
    }
    if (rc != BC_OK)
        goto done;
    out->sweep_prefetch = L.sweep_prefetch;
    out->spmv_nta = L.spmv_nta;
    rc = cg_iterate(comm, &L, p, b_in, &v, out, &t, &c);
    tic(&t); /* the solution in the caller's numbering: the vectors' part */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < L.nloc; i++)
        x_in[L.perm[i]] = v.x[i];
    toc(&t, T_VECTORS);
    const int rc_report = cg_report(comm, &L, &t, &c, out);
    rc = rc == BC_OK ? rc_report : rc;
done:
    cg_vectors_free(&v);
    bc_local_free(&L);
    bc_pool_trim(0);
    return rc;
}

double bc_ic0(const bc_csr_in *a, double *d, bc_gidx *uptr, int32_t *uidx, double *uval)
{
    bc_local L;
    memset(&L, 0, sizeof L);
    if (a->row_begin != 0 || a->nrows != a->n || a->n < 1 || a->n > 0x7fffffff)
        return -1.0;
    /* one block of all rows, one color: the natural order, sequential */
    const bc_params one = {.block_size = (int)a->n, .colors = 1};
    if (bc_order(a, &one, &L, NULL) != BC_OK || bc_build_local(a, &L) != BC_OK ||
        bc_scan_blocks(&L) != BC_OK || bc_factor(&L, 0) != BC_OK) {
        bc_local_free(&L);
        bc_pool_trim(0);
        return -1.0;
    }
    for (int i = 0; i < L.nloc; i++)
        d[i] = 1.0 / L.dinv[i];
    for (int i = 0; i <= L.nloc; i++)
        uptr[i] = L.uptr[i];
    memcpy(uidx, L.uidx, (size_t)L.uptr[L.nloc] * sizeof(int32_t));
    memcpy(uval, L.uval, (size_t)L.uptr[L.nloc] * sizeof(double));
    double shift = L.shift;
    bc_local_free(&L);
    bc_pool_trim(0);
    return shift;
}
