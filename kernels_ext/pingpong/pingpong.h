/*
 * pingpong.h - MPI point-to-point latency and bandwidth by the methods of the
 * OSU Micro-Benchmarks 7.x (osu_latency, osu_bw, osu_bibw), so that the
 * numbers compare with theirs.  Pure C + MPI; the binding shim is _pingpong.c.
 *
 * What is kept from OSU 7.x: page-aligned send and receive buffers touched
 * (memset 'a' / 'b') before each message size; a barrier per size; `skip`
 * warm-up iterations left out; each timed iteration bracketed by MPI_Wtime
 * and the times summed; one-way latency = sum / (2 * iterations); bandwidth
 * = size * iterations * window / sum (twice that for bidirectional); the
 * whole window posted from (and into) one buffer; a 4-byte acknowledgement
 * closing each osu_bw window; iteration counts switching at 8 KiB.
 * One addition, off by default: `hugepages` asks for transparent huge pages
 * for the buffers (2 MiB aligned, madvise MADV_HUGEPAGE), which on some VMs
 * changes large-message shared-memory bandwidth several-fold.
 */
#ifndef BURSTBENCH_PINGPONG_H
#define BURSTBENCH_PINGPONG_H

#include <mpi.h>
#include <stddef.h>

enum { PP_LATENCY = 0, PP_BW = 1, PP_BIBW = 2 };

/* Return codes. */
enum {
    PP_OK = 0,
    PP_EINVAL = 1, /* an argument is out of range */
    PP_ENOMEM = 2, /* buffers could not be allocated */
    PP_ESIZE = 3,  /* the communicator does not have exactly 2 ranks */
    PP_EMPI = 4    /* an MPI call failed */
};

typedef struct {
    int iterations, skip;             /* for sizes up to large_size */
    int iterations_large, skip_large; /* for sizes above it */
    int window;                       /* messages in flight (bw, bibw); ignored by latency */
    size_t large_size;                /* OSU's LARGE_MESSAGE_SIZE, 8192 */
    int validate;                     /* fill and check a pattern per iteration (untimed) */
    int hugepages;                    /* back the buffers by transparent huge pages (not OSU) */
} pp_params;

typedef struct {
    size_t size;    /* message size in bytes */
    double value;   /* latency: one-way microseconds; bw, bibw: bytes per second */
    double seconds; /* sum of the timed iterations on rank 0 */
    int iterations, skip, window;
    long errors;    /* bytes that differed from the pattern, both ranks (validate only) */
} pp_result;

/*
 * pp_run - measure `test` (PP_LATENCY, PP_BW, PP_BIBW) for each of the
 * `nsizes` message sizes (bytes, each <= INT_MAX) between ranks 0 and 1 of
 * `comm`, which must have exactly two ranks.  Collective over comm: both
 * ranks call it with the same arguments.  Fills out[0..nsizes-1] on rank 0
 * (rank 1's entries hold its sizes and errors only).
 * Returns PP_OK, PP_EINVAL, PP_ENOMEM, PP_ESIZE or PP_EMPI.  Every rank
 * returns the same code for argument and size errors, so none hangs.
 */
int pp_run(MPI_Comm comm, int test, const size_t *sizes, int nsizes, const pp_params *p,
           pp_result *out);

/* pp_cpu - the CPU the calling thread runs on now (-1 when unknown). */
int pp_cpu(void);

#endif
