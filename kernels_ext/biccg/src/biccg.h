/*
 * biccg.h - conjugate gradients preconditioned by block incomplete Cholesky
 * (IC(0)) with algebraic block multicolor ordering, MPI x OpenMP.
 *
 * The method (M. Kawai et al., "Hierarchical Parallelization of
 * Multi-coloring Algorithms for Block IC Preconditioners", HPCC 2017, and
 * Iwashita et al.'s algebraic block multicolor ordering):
 *   - rows are grouped into blocks of `block_size` consecutive rows (or, on a
 *     grid given with tiles, into tiles of the grid); the graph of blocks (two
 *     blocks adjacent when a nonzero couples them) is colored greedily with at
 *     least `colors` colors, cycling through them so that colors get about as
 *     many blocks each (tiles start the count at their diagonal, and on a
 *     small grid some colors may hold none: ordering.c);
 *     rows are renumbered color by color, each block kept contiguous;
 *   - IC(0) of the reordered matrix, M = U^T D U with U unit upper triangular
 *     on the pattern of A; applying M^-1 = U^-1 D^-1 U^-T is a forward and a
 *     backward substitution, colors in sequence, the blocks of one color in
 *     parallel (no two blocks of a color are coupled), rows of a block in order;
 *   - across MPI ranks (rows split in contiguous ranges) the preconditioner is
 *     block Jacobi: each rank factors its own diagonal block; the SpMV
 *     exchanges a halo planned once at setup; dot products use MPI_Allreduce.
 *
 * Pure C99 + OpenMP + MPI; the binding shim is _biccg.c.  Global indices are
 * 64-bit (bc_gidx); local column indices are 32-bit, row pointers 64-bit.
 */
#ifndef BURSTBENCH_BICCG_H
#define BURSTBENCH_BICCG_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef int64_t bc_gidx; /* global row/column index, row pointers */

enum {
    BC_OK = 0,
    BC_EINVAL = 1,     /* an argument is out of range */
    BC_ENOMEM = 2,     /* out of memory */
    BC_EBREAKDOWN = 3, /* CG broke down: p'Ap <= 0 or r'z <= 0 (not SPD?) */
    BC_EMPI = 4,       /* an MPI call failed */
    BC_ENOTFINITE = 5  /* NaN or Inf in the matrix or right-hand side */
};

/* A rank's rows of a CSR matrix with global column indices.  Either index
 * array may be 32- or 64-bit: exactly one of indices32/indices64 is set, and
 * the same for indptr; nothing is copied. */
typedef struct {
    bc_gidx n;          /* global order */
    bc_gidx row_begin;  /* first global row held by this rank */
    bc_gidx nrows;      /* rows held */
    const int32_t *indptr32;
    const int64_t *indptr64;
    const int32_t *indices32;
    const int64_t *indices64;
    const double *data;
} bc_csr_in;

typedef struct {
    int block_size, colors, max_iter, threads;
    double tol;
    int keep_history;  /* record ||r||/||b|| of every iteration */
    int single_factor; /* keep IC(0)'s values in single precision (computed in
                        * double; CG's vectors and reductions stay double) */
    bc_gidx grid[3];   /* where the matrix is an nx x ny x nz grid (x fastest) ... */
    int tile[3];       /* ... blocks are tiles of tx x ty x tz points; grid[0] = 0:
                        * blocks of block_size consecutive rows */
    int sweep_prefetch; /* tiles: 1 the sweeps prefetch the lines each block
                         * gathers from other blocks, 0 not, -1 where that
                         * vector, this node's ranks together, exceeds
                         * llc_bytes (row runs always prefetch); the same on
                         * every rank */
    int64_t llc_bytes;  /* the node's last-level cache, all instances (0: unknown) */
    int spmv_nta;       /* whether the SpMV prefetches A's values and columns
                         * non-temporal: BC_SPMV_NTA_ON, _OFF (ordinary lines)
                         * or _AUTO (0): on AMD x86 CPUs only (measured faster
                         * on an AMD EPYC VM, 1.65x slower on an Intel Xeon) */
    int base_pages;     /* 1: the large arrays in the system's base pages (4 KiB on
                         * x86), not transparent huge pages (0, the default).  Huge
                         * pages made the solve 4-14% faster on the AMD VM; where
                         * the host takes freed memory back (a balloon's free page
                         * reporting), a fresh huge page faults in several times
                         * slower than base pages, and a process's first setup pays
                         * it (comparisons/README.md, "Huge pages or base pages") */
} bc_params;

/* sweep_prefetch's value that decides by llc_bytes. */
#define BC_SWEEP_PREFETCH_AUTO (-1)
/* spmv_nta's values: by the CPU (internal.h, bc_spmv_nta_rule; 0, so that a
 * zeroed bc_params decides so), non-temporal, ordinary. */
#define BC_SPMV_NTA_AUTO 0
#define BC_SPMV_NTA_ON 1
#define BC_SPMV_NTA_OFF 2

/* Timings in seconds (maximum over ranks) and outcome of one solve. */
typedef struct {
    int iterations, converged, colors_used, breakdown_iteration;
    double relative_residual;      /* recomputed: ||b - A x|| / ||b|| */
    double cg_residual;            /* the recursive residual CG stopped on */
    double shift;                  /* diagonal shift IC(0) needed (0: none) */
    /* setup: all but the iterations (solve), the slowest rank's input +
     * ordering + factor + halo_setup + vectors; each part the slowest rank's
     * (their sum can exceed setup where ranks wait for each other).  input: the input's
     * check (a pass over A's values and b); vectors: CG's vectors (and the
     * history, if asked) allocated, first touched, x0 permuted in, and x
     * permuted back out.  Setup and solve cover the call but for the
     * recomputed residual's check, the report and the frees. */
    double t_input, t_ordering, t_factor, t_halo_setup, t_vectors, t_setup, t_solve;
    double t_spmv, t_precond, t_dots, t_halo, t_vector;
    bc_gidx halo_rows;             /* halo entries received per SpMV (sum over ranks) */
    bc_gidx copied_rows;           /* rows the sweeps ran from copies (sum over ranks):
                                    * whole 4 x 4 x 2 tiles of a grid (ic0.c) */
    /* What one iteration sends, counted where the solver sends it (the loop's
     * calls only, averaged over its iterations): halo messages and their bytes
     * on the busiest rank, and the Allreduces with their payload in bytes. */
    double msgs_per_iter, msg_bytes_per_iter, reductions_per_iter, reduction_bytes_per_iter;
    double *history;               /* iterations+1 relative residuals if asked (malloc) */
    int history_len;
    int sweep_prefetch;            /* the sweeps prefetched their gathers (this rank) */
    int spmv_nta;                  /* the SpMV prefetched A non-temporal (this rank) */
} bc_result;

/*
 * bc_solve - solve A x = b for this rank's rows.  Collective over comm.
 * `b` and `x` are this rank's slices (nrows each, original numbering); x is
 * the initial guess on entry and the solution on return.
 * Returns BC_OK (converged or not: see out->converged), BC_EBREAKDOWN (with
 * out->breakdown_iteration), BC_EINVAL, BC_ENOMEM, BC_ENOTFINITE or BC_EMPI;
 * every rank returns the same code.
 */
int bc_solve(MPI_Comm comm, const bc_csr_in *a, const double *b, double *x,
             const bc_params *p, bc_result *out);

/*
 * bc_block_coloring - the ordering alone, on a square matrix (one rank), with
 * p's block size, colors and tiles: color[nblocks] gets each block's color (in
 * the blocks' incoming order) and perm[n] the new-to-old row map.  Returns the
 * number of colors used (>= colors), or -1 for bad arguments, more blocks
 * than max_blocks, or no memory.
 */
int bc_block_coloring(const bc_csr_in *a, const bc_params *p, int *color, int max_blocks,
                      bc_gidx *perm);

/*
 * bc_ic0 - IC(0) of a square matrix as given (no reordering, one thread), for
 * tests: d[n] the pivots of D, and U (strictly upper part of the unit upper
 * factor, on the pattern of A's upper triangle) in CSR: uptr[n+1], uidx, uval
 * with room for the upper-triangle entries of A.  Returns the shift used
 * (>= 0) or -1 on bad arguments.
 */
double bc_ic0(const bc_csr_in *a, double *d, bc_gidx *uptr, int32_t *uidx, double *uval);

/*
 * bc_release - return to the system the memory that the solver keeps between
 * solves (the large arrays of the last solve's setup, kept so that the next
 * setup need not fault in fresh pages).  Call it when no solve is running.
 */
void bc_release(void);

/* bc_poisson_nnz / bc_poisson_fill - rows [r0, r1) of the 7-point Laplacian
 * (Dirichlet) on an nx x ny x nz grid, x fastest: 6 on the diagonal, -1 for
 * each neighbour inside the grid.  fill writes indptr (r1-r0+1 entries,
 * starting at 0), 64-bit column indices and values. */
bc_gidx bc_poisson_nnz(bc_gidx nx, bc_gidx ny, bc_gidx nz, bc_gidx r0, bc_gidx r1);
void bc_poisson_fill(bc_gidx nx, bc_gidx ny, bc_gidx nz, bc_gidx r0, bc_gidx r1,
                     int64_t *indptr, int64_t *indices, double *data);

#endif
