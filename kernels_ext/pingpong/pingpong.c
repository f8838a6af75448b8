/*
 * pingpong.c - OSU 7.x latency / bandwidth / bidirectional bandwidth methods;
 * see pingpong.h for the contract.
 */
#define _GNU_SOURCE /* sched_getcpu */
#include "pingpong.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __linux__
#include <sched.h>
#include <sys/mman.h>
#endif

#define HUGE_PAGE 2097152

#define TAG_LAT 1
#define TAG_BW 100
#define TAG_ACK 101
#define TAG_BIBW_BACK 10

int pp_cpu(void)
{
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

/* The byte a message carries at offset k in iteration i from rank r: a
 * pattern that changes with all three, so a stale or misrouted buffer shows. */
static unsigned char pattern(int i, size_t k, int r)
{
    return (unsigned char)(i * 31 + (int)(k % 251) * 7 + r * 101 + 1);
}

static void fill(char *buf, size_t size, int i, int r)
{
    for (size_t k = 0; k < size; k++)
        buf[k] = (char)pattern(i, k, r);
}

static long check(const char *buf, size_t size, int i, int r)
{
    long bad = 0;
    for (size_t k = 0; k < size; k++)
        bad += (unsigned char)buf[k] != pattern(i, k, r);
    return bad;
}

/* In validation mode, fill the send buffer for iteration i and line the ranks
 * up before it (untimed, as OSU does). */
static int validation_prologue(MPI_Comm comm, char *s, size_t size, int i, int rank, int validate)
{
    if (!validate)
        return PP_OK;
    fill(s, size, i, rank);
    return MPI_Barrier(comm) == MPI_SUCCESS ? PP_OK : PP_EMPI;
}

/* One message size of osu_latency; adds the timed seconds to *total (rank 0). */
static int latency(MPI_Comm comm, int rank, char *s, char *r, int size, int iters, int skip,
                   int validate, double *total, long *errors)
{
    MPI_Status st;
    double t_start = 0.0;
    int peer = 1 - rank;
    for (int i = 0; i < iters + skip; i++) {
        if (validation_prologue(comm, s, (size_t)size, i, rank, validate) != PP_OK)
            return PP_EMPI;
        if (rank == 0) {
            if (i >= skip)
                t_start = MPI_Wtime();
            if (MPI_Send(s, size, MPI_CHAR, 1, TAG_LAT, comm) != MPI_SUCCESS ||
                MPI_Recv(r, size, MPI_CHAR, 1, TAG_LAT, comm, &st) != MPI_SUCCESS)
                return PP_EMPI;
            if (i >= skip)
                *total += MPI_Wtime() - t_start;
        } else {
            if (MPI_Recv(r, size, MPI_CHAR, 0, TAG_LAT, comm, &st) != MPI_SUCCESS ||
                MPI_Send(s, size, MPI_CHAR, 0, TAG_LAT, comm) != MPI_SUCCESS)
                return PP_EMPI;
        }
        if (validate)
            *errors += check(r, (size_t)size, i, peer);
    }
    return PP_OK;
}

/* One message size of osu_bw: rank 0 posts a window of sends, rank 1 the
 * receives, and a 4-byte message from rank 1 closes each window. */
static int bandwidth(MPI_Comm comm, int rank, char *s, char *r, int size, int iters, int skip,
                     int window, int validate, MPI_Request *req, MPI_Status *sts,
                     double *total, long *errors)
{
    double t_start = 0.0;
    for (int i = 0; i < iters + skip; i++) {
        if (validation_prologue(comm, s, (size_t)size, i, rank, validate) != PP_OK)
            return PP_EMPI;
        if (rank == 0) {
            if (i >= skip)
                t_start = MPI_Wtime();
            for (int j = 0; j < window; j++)
                if (MPI_Isend(s, size, MPI_CHAR, 1, TAG_BW, comm, &req[j]) != MPI_SUCCESS)
                    return PP_EMPI;
            if (MPI_Waitall(window, req, sts) != MPI_SUCCESS ||
                MPI_Recv(r, 4, MPI_CHAR, 1, TAG_ACK, comm, &sts[0]) != MPI_SUCCESS)
                return PP_EMPI;
            if (i >= skip)
                *total += MPI_Wtime() - t_start;
        } else {
            for (int j = 0; j < window; j++)
                if (MPI_Irecv(r, size, MPI_CHAR, 0, TAG_BW, comm, &req[j]) != MPI_SUCCESS)
                    return PP_EMPI;
            if (MPI_Waitall(window, req, sts) != MPI_SUCCESS ||
                MPI_Send(s, 4, MPI_CHAR, 0, TAG_ACK, comm) != MPI_SUCCESS)
                return PP_EMPI;
            if (validate)
                *errors += check(r, (size_t)size, i, 0);
        }
    }
    return PP_OK;
}

/* One message size of osu_bibw: both ranks post a window of receives and of
 * sends at once; no acknowledgement. */
static int bibandwidth(MPI_Comm comm, int rank, char *s, char *r, int size, int iters,
                       int skip, int window, int validate, MPI_Request *req, MPI_Status *sts,
                       double *total, long *errors)
{
    double t_start = 0.0;
    MPI_Request *recv = req, *send = req + window;
    int peer = 1 - rank;
    int send_tag = rank == 0 ? TAG_BW : TAG_BIBW_BACK;
    int recv_tag = rank == 0 ? TAG_BIBW_BACK : TAG_BW;
    for (int i = 0; i < iters + skip; i++) {
        if (validation_prologue(comm, s, (size_t)size, i, rank, validate) != PP_OK)
            return PP_EMPI;
        if (rank == 0 && i >= skip)
            t_start = MPI_Wtime();
        for (int j = 0; j < window; j++)
            if (MPI_Irecv(r, size, MPI_CHAR, peer, recv_tag, comm, &recv[j]) != MPI_SUCCESS)
                return PP_EMPI;
        for (int j = 0; j < window; j++)
            if (MPI_Isend(s, size, MPI_CHAR, peer, send_tag, comm, &send[j]) != MPI_SUCCESS)
                return PP_EMPI;
        /* OSU waits for the sends first on rank 0, the receives first on rank 1 */
        MPI_Request *first = rank == 0 ? send : recv, *second = rank == 0 ? recv : send;
        if (MPI_Waitall(window, first, sts) != MPI_SUCCESS ||
            MPI_Waitall(window, second, sts) != MPI_SUCCESS)
            return PP_EMPI;
        if (rank == 0 && i >= skip)
            *total += MPI_Wtime() - t_start;
        if (validate)
            *errors += check(r, (size_t)size, i, peer);
    }
    return PP_OK;
}

int pp_run(MPI_Comm comm, int test, const size_t *sizes, int nsizes, const pp_params *p,
           pp_result *out)
{
    int rank, nranks, rc = PP_OK;
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &nranks) != MPI_SUCCESS)
        return PP_EMPI;
    if (nranks != 2)
        return PP_ESIZE;
    size_t max = 4; /* the acknowledgement needs 4 bytes */
    int window = test == PP_LATENCY ? 1 : p->window;
    if (test < PP_LATENCY || test > PP_BIBW || nsizes < 1 || window < 1 || p->iterations < 1 ||
        p->iterations_large < 1 || p->skip < 0 || p->skip_large < 0)
        return PP_EINVAL;
    for (int n = 0; n < nsizes; n++) {
        if (sizes[n] > INT_MAX || (test != PP_LATENCY && sizes[n] == 0))
            return PP_EINVAL;
        max = sizes[n] > max ? sizes[n] : max;
    }

    char *s = NULL, *r = NULL;
    size_t align = p->hugepages ? HUGE_PAGE : (size_t)sysconf(_SC_PAGESIZE);
    MPI_Request *req = malloc(2 * (size_t)window * sizeof(MPI_Request));
    MPI_Status *sts = malloc(2 * (size_t)window * sizeof(MPI_Status));
    int ok = req != NULL && sts != NULL && posix_memalign((void **)&s, align, max) == 0 &&
             posix_memalign((void **)&r, align, max) == 0;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (ok && p->hugepages) { /* advice only: where THP is off, nothing changes */
        madvise(s, max, MADV_HUGEPAGE);
        madvise(r, max, MADV_HUGEPAGE);
    }
#endif
    int all_ok = 0; /* agree on allocation before any point-to-point traffic */
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        rc = PP_EMPI;
    else if (!all_ok)
        rc = PP_ENOMEM;

    for (int n = 0; rc == PP_OK && n < nsizes; n++) {
        int size = (int)sizes[n];
        int large = sizes[n] > p->large_size;
        int iters = large ? p->iterations_large : p->iterations;
        int skip = large ? p->skip_large : p->skip;
        double total = 0.0;
        long errors = 0, all_errors = 0;
        memset(s, 'a', sizes[n]); /* touch the pages before timing, as OSU does */
        memset(r, 'b', sizes[n]);
        if (MPI_Barrier(comm) != MPI_SUCCESS) {
            rc = PP_EMPI;
            break;
        }
        if (test == PP_LATENCY)
            rc = latency(comm, rank, s, r, size, iters, skip, p->validate, &total, &errors);
        else if (test == PP_BW)
            rc = bandwidth(comm, rank, s, r, size, iters, skip, window, p->validate, req, sts,
                           &total, &errors);
        else
            rc = bibandwidth(comm, rank, s, r, size, iters, skip, window, p->validate, req, sts,
                             &total, &errors);
        if (rc == PP_OK &&
            MPI_Allreduce(&errors, &all_errors, 1, MPI_LONG, MPI_SUM, comm) != MPI_SUCCESS)
            rc = PP_EMPI;
        pp_result *o = &out[n];
        o->size = sizes[n];
        o->seconds = total;
        o->iterations = iters;
        o->skip = skip;
        o->window = window;
        o->errors = all_errors;
        if (test == PP_LATENCY)
            o->value = total > 0.0 ? total * 1e6 / (2.0 * iters) : 0.0;
        else
            o->value = total > 0.0 ? (double)sizes[n] * iters * window *
                                         (test == PP_BIBW ? 2.0 : 1.0) / total
                                   : 0.0;
    }
    free(s);
    free(r);
    free(req);
    free(sts);
    return rc;
}
