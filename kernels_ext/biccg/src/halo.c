/*
 * halo.c - the SpMV's halo exchange, planned once: each rank learns which of
 * its rows each neighbour needs (an Alltoall of counts and an Alltoallv of
 * global indices), then every exchange is one Irecv/Isend per neighbour,
 * received straight into the vector's halo slots.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int bc_halo_plan(MPI_Comm comm, const bc_csr_in *a, bc_local *L)
{
    int nranks, rc = BC_OK;
    if (MPI_Comm_size(comm, &nranks) != MPI_SUCCESS)
        return BC_EMPI;
    bc_gidx *starts = malloc(((size_t)nranks + 1) * sizeof(bc_gidx));
    int *want = calloc((size_t)nranks, sizeof(int)), *give = calloc((size_t)nranks, sizeof(int));
    int *woff = calloc((size_t)nranks + 1, sizeof(int)), *goff = calloc((size_t)nranks + 1, sizeof(int));
    bc_gidx *asked = NULL;
    if (!starts || !want || !give || !woff || !goff) {
        rc = BC_ENOMEM;
        goto done;
    }
    bc_gidx mine = a->row_begin;
    if (MPI_Allgather(&mine, 1, MPI_INT64_T, starts, 1, MPI_INT64_T, comm) != MPI_SUCCESS) {
        rc = BC_EMPI;
        goto done;
    }
    starts[nranks] = a->n;
    /* halo_g is sorted and the owners' ranges are contiguous: one group each */
    for (int h = 0, r = 0; h < L->nhalo; h++) {
        while (!(L->halo_g[h] >= starts[r] && L->halo_g[h] < starts[r + 1]))
            r++;
        want[r]++;
    }
    if (MPI_Alltoall(want, 1, MPI_INT, give, 1, MPI_INT, comm) != MPI_SUCCESS) {
        rc = BC_EMPI;
        goto done;
    }
    for (int r = 0; r < nranks; r++) {
        woff[r + 1] = woff[r] + want[r];
        goff[r + 1] = goff[r] + give[r];
    }
    asked = malloc(((size_t)goff[nranks] + 1) * sizeof(bc_gidx));
    if (asked == NULL) {
        rc = BC_ENOMEM;
        goto done;
    }
    if (MPI_Alltoallv(L->halo_g, want, woff, MPI_INT64_T, asked, give, goff, MPI_INT64_T,
                      comm) != MPI_SUCCESS) {
        rc = BC_EMPI;
        goto done;
    }
    L->nrecv = L->nsend = 0;
    for (int r = 0; r < nranks; r++) {
        L->nrecv += want[r] > 0;
        L->nsend += give[r] > 0;
    }
    L->rrank = malloc(((size_t)L->nrecv + 1) * sizeof(int));
    L->rcount = malloc(((size_t)L->nrecv + 1) * sizeof(int));
    L->roff = malloc(((size_t)L->nrecv + 1) * sizeof(int));
    L->srank = malloc(((size_t)L->nsend + 1) * sizeof(int));
    L->scount = malloc(((size_t)L->nsend + 1) * sizeof(int));
    L->soff = malloc(((size_t)L->nsend + 1) * sizeof(int));
    L->sidx = malloc(((size_t)goff[nranks] + 1) * sizeof(int));
    L->sbuf = malloc(((size_t)goff[nranks] + 1) * sizeof(double));
    L->req = malloc(((size_t)L->nrecv + L->nsend + 1) * sizeof(MPI_Request));
    if (!L->rrank || !L->rcount || !L->roff || !L->srank || !L->scount || !L->soff ||
        !L->sidx || !L->sbuf || !L->req) {
        rc = BC_ENOMEM;
        goto done;
    }
    for (int r = 0, k = 0; r < nranks; r++)
        if (want[r] > 0)
            L->rrank[k] = r, L->rcount[k] = want[r], L->roff[k] = woff[r], k++;
    for (int r = 0, k = 0; r < nranks; r++)
        if (give[r] > 0)
            L->srank[k] = r, L->scount[k] = give[r], L->soff[k] = goff[r], k++;
    for (int j = 0; j < goff[nranks]; j++) {
        bc_gidx g = asked[j] - a->row_begin;
        if (g < 0 || g >= a->nrows) {
            rc = BC_EINVAL;
            goto done;
        }
        L->sidx[j] = L->iperm[g];
    }
done:
    bc_free(starts);
    bc_free(want);
    bc_free(give);
    bc_free(woff);
    bc_free(goff);
    bc_free(asked);
    return rc;
}

int bc_halo_exchange(MPI_Comm comm, bc_local *L, double *x)
{
    int nreq = 0;
    for (int k = 0; k < L->nrecv; k++)
        if (MPI_Irecv(x + L->nloc + L->roff[k], L->rcount[k], MPI_DOUBLE, L->rrank[k], 7, comm,
                      &L->req[nreq++]) != MPI_SUCCESS)
            return BC_EMPI;
    for (int k = 0; k < L->nsend; k++) {
        double *buf = L->sbuf + L->soff[k];
        const int *idx = L->sidx + L->soff[k];
        for (int j = 0; j < L->scount[k]; j++)
            buf[j] = x[idx[j]];
        if (MPI_Isend(buf, L->scount[k], MPI_DOUBLE, L->srank[k], 7, comm, &L->req[nreq++]) !=
            MPI_SUCCESS)
            return BC_EMPI;
    }
    return MPI_Waitall(nreq, L->req, MPI_STATUSES_IGNORE) == MPI_SUCCESS ? BC_OK : BC_EMPI;
}
