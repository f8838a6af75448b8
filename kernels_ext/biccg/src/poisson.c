/*
 * poisson.c - rows of the 3D 7-point finite-difference Laplacian (Dirichlet),
 * generated directly in CSR so that 256 x 256 x 512 takes seconds and each
 * MPI rank builds only its own rows.
 */
#include "biccg.h"

/* Entries of row i: the diagonal and each neighbour inside the grid. */
static int row_nnz(bc_gidx i, bc_gidx nx, bc_gidx ny, bc_gidx nz)
{
    bc_gidx x = i % nx, y = (i / nx) % ny, z = i / (nx * ny);
    return 1 + (x > 0) + (x < nx - 1) + (y > 0) + (y < ny - 1) + (z > 0) + (z < nz - 1);
}

bc_gidx bc_poisson_nnz(bc_gidx nx, bc_gidx ny, bc_gidx nz, bc_gidx r0, bc_gidx r1)
{
    bc_gidx total = 0;
#pragma omp parallel for reduction(+ : total)
    for (bc_gidx i = r0; i < r1; i++)
        total += row_nnz(i, nx, ny, nz);
    return total;
}

void bc_poisson_fill(bc_gidx nx, bc_gidx ny, bc_gidx nz, bc_gidx r0, bc_gidx r1,
                     int64_t *indptr, int64_t *indices, double *data)
{
    const bc_gidx plane = nx * ny, n = r1 - r0;
    indptr[0] = 0;
    for (bc_gidx k = 0; k < n; k++) /* a prefix sum: sequential, O(rows) */
        indptr[k + 1] = indptr[k] + row_nnz(r0 + k, nx, ny, nz);
#pragma omp parallel for schedule(static)
    for (bc_gidx k = 0; k < n; k++) {
        bc_gidx i = r0 + k, x = i % nx, y = (i / nx) % ny, z = i / plane;
        int64_t *col = indices + indptr[k];
        double *val = data + indptr[k];
        int m = 0;
        /* ascending column order: z-1, y-1, x-1, diagonal, x+1, y+1, z+1 */
        if (z > 0) col[m] = i - plane, val[m++] = -1.0;
        if (y > 0) col[m] = i - nx, val[m++] = -1.0;
        if (x > 0) col[m] = i - 1, val[m++] = -1.0;
        col[m] = i, val[m++] = 6.0;
        if (x < nx - 1) col[m] = i + 1, val[m++] = -1.0;
        if (y < ny - 1) col[m] = i + nx, val[m++] = -1.0;
        if (z < nz - 1) col[m] = i + plane, val[m++] = -1.0;
    }
}
