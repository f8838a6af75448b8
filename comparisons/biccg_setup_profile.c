/*
 * biccg_setup_profile.c - where BICCG's setup spends its time: one solve of
 * the 7-point Poisson matrix in this process, with the solver's sources
 * compiled -DBC_PROFILE, so that each setup phase prints its seconds to
 * stderr (internal.h, BC_PHASE); then the record's setup and solve times as
 * one JSON line on stdout.  Built and run by biccg_setup_profile.py.
 *
 *     biccg_setup_profile NX NY NZ THREADS [MAX_ITER [DOUBLE [ROWS [SOLVES]]]]
 *
 * Blocks are tiles of 4x4x2 points (ROWS = 1: 32 consecutive rows), 20 colors,
 * single-precision factor (DOUBLE = 1: double); tol 1e-7: the command line's
 * defaults.  SOLVES (1) solves one after the other in the process, each from
 * x = 0, each printing its phases, digests and line: built with
 * -DBC_POOL_POISON, the solver fills each array it keeps for the next solve
 * with garbage, and the later solves' digests equal the first's only if no
 * setup reads what an earlier one left.  The sweeps' prefetch with tiles is
 * the solver's default (where the node's vector exceeds BC_LLC_BYTES, which
 * biccg_setup_profile.py sets), or BC_SWEEP_PREFETCH (1 on, 0 off); the SpMV's
 * prefetch hint the solver's default (by the CPU), or BC_SPMV_NTA (1
 * non-temporal, 0 ordinary).
 */
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#include "biccg.h"

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s NX NY NZ THREADS [MAX_ITER [DOUBLE [ROWS]]]\n", argv[0]);
        return 2;
    }
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const bc_gidx nx = atol(argv[1]), ny = atol(argv[2]), nz = atol(argv[3]);
    const bc_gidx n = nx * ny * nz, r0 = n * rank / size, r1 = n * (rank + 1) / size;
    const bc_gidx nnz = bc_poisson_nnz(nx, ny, nz, r0, r1);
    int64_t *indptr = malloc((size_t)(r1 - r0 + 1) * sizeof *indptr);
    int64_t *indices = malloc((size_t)nnz * sizeof *indices);
    double *data = malloc((size_t)nnz * sizeof *data);
    double *b = malloc((size_t)(r1 - r0) * sizeof *b), *x = calloc((size_t)(r1 - r0), sizeof *x);
    bc_poisson_fill(nx, ny, nz, r0, r1, indptr, indices, data);
    for (bc_gidx i = 0; i < r1 - r0; i++) /* b = A 1 */
        for (int64_t k = indptr[i], b_i = 0; k < indptr[i + 1]; k++, b_i++)
            b[i] = (b_i ? b[i] : 0.0) + data[k];
    bc_csr_in a = {.n = n, .row_begin = r0, .nrows = r1 - r0, .indptr64 = indptr,
                   .indices64 = indices, .data = data};
    bc_params p = {.block_size = 32, .colors = 20, .max_iter = argc > 5 ? atoi(argv[5]) : 10000,
                   .threads = atoi(argv[4]), .tol = 1e-7, .single_factor = !(argc > 6 && atoi(argv[6])),
                   .grid = {nx, ny, nz}, .tile = {4, 4, 2}};
#ifdef BC_SWEEP_PREFETCH_AUTO /* sources that have it (a --base from before: as they were) */
    const char *pf = getenv("BC_SWEEP_PREFETCH"), *llc = getenv("BC_LLC_BYTES");
    p.sweep_prefetch = pf ? atoi(pf) : BC_SWEEP_PREFETCH_AUTO;
    p.llc_bytes = llc ? atoll(llc) : 0;
#endif
#ifdef BC_SPMV_NTA_AUTO /* 1 the SpMV prefetches non-temporal, 0 ordinary, unset by the CPU */
    const char *nta = getenv("BC_SPMV_NTA");
    p.spmv_nta = !nta ? BC_SPMV_NTA_AUTO : atoi(nta) ? BC_SPMV_NTA_ON : BC_SPMV_NTA_OFF;
#endif
    const char *pages = getenv("BC_BASE_PAGES"); /* 1: the solver's arrays in base pages */
    p.base_pages = pages ? atoi(pages) : 0;
    if (argc > 7 && atoi(argv[7])) /* the study's algebraic blocking: no grid */
        p.grid[0] = p.grid[1] = p.grid[2] = 0;
    const int solves = argc > 8 ? atoi(argv[8]) : 1;
    int rc = 0;
    for (int k = 0; k < solves && rc == 0; k++) {
        bc_result out;
        for (bc_gidx i = 0; i < r1 - r0; i++)
            x[i] = 0.0;
        /* the ranks start together, as python -m kernels_ext.biccg and PETSc's
         * script start them: no rank's setup waits for another's start */
        MPI_Barrier(MPI_COMM_WORLD);
        rc = bc_solve(MPI_COMM_WORLD, &a, b, x, &p, &out);
        if (rank == 0)
            printf("{\"rc\": %d, \"iterations\": %d, \"relative_residual\": %.6e, \"setup_s\": %.6f, "
                   "\"ordering_s\": %.6f, \"factorization_s\": %.6f, \"solve_s\": %.6f, "
                   "\"spmv_s\": %.6f, \"precond_s\": %.6f, \"dots_s\": %.6f, \"vector_s\": %.6f}\n",
                   rc, out.iterations, out.relative_residual,
                   out.t_setup, out.t_ordering, out.t_factor,
                   out.t_solve, out.t_spmv, out.t_precond, out.t_dots, out.t_vector);
        free(out.history);
    }
    free(indptr), free(indices), free(data), free(b), free(x);
    MPI_Finalize();
    return rc;
}
