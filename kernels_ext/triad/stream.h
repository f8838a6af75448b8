/*
 * stream.h - STREAM Copy, Scale, Add and Triad with OpenMP, after John D.
 * McCalpin's stream.c 5.10 ("based on a variant of the STREAM benchmark
 * code").  Pure C99 + OpenMP: no Python here, the binding shim is _triad.c.
 *
 * The rules kept from stream.c: three heap arrays of doubles initialised in
 * parallel with the same static schedule as the kernels (first touch puts each
 * page next to the thread that streams it), a[] doubled once before timing,
 * NTIMES passes of the four kernels each timed on its own, the first pass left
 * out of the statistics, and the results checked against the values the same
 * sequence of operations gives on scalars, with STREAM's tolerance.
 */
#ifndef BURSTBENCH_STREAM_H
#define BURSTBENCH_STREAM_H

#include <stddef.h>

#define STREAM_NFUNC 4          /* Copy, Scale, Add, Triad, in that order */
#define STREAM_SCALAR 3.0       /* stream.c's scalar */
#define STREAM_EPSILON 1.0e-13  /* stream.c's tolerance for doubles */
#define STREAM_ALIGN 2097152    /* 2 MiB: page- and huge-page-aligned arrays */

/* Return codes of every function below. */
enum {
    STREAM_OK = 0,
    STREAM_EINVAL = 1,     /* an argument is out of range */
    STREAM_ENOMEM = 2,     /* an array could not be allocated */
    STREAM_EVALIDATE = 3   /* the arrays do not hold the expected values */
};

/*
 * Store policies of stream_run.  Normal stores go through the cache: each
 * line written is first read (write-allocate), so Triad moves 32 bytes per
 * element where STREAM counts 24.  Streaming (non-temporal) stores write
 * whole lines past the cache, without that read; they are what Intel's
 * compilers emit for such loops.
 */
enum { STREAM_STORES_NORMAL = 0, STREAM_STORES_STREAMING = 1 };

/*
 * stream_streaming_isa - the instructions this build's streaming stores use,
 * chosen at compile time from the flags: "avx512" (64 bytes a store), "avx"
 * (32), "sse2" (16); NULL where the build has none (not x86-64, or a
 * compiler without the intrinsics), and stream_run then uses normal stores.
 */
const char *stream_streaming_isa(void);

/*
 * stream_stores_used - the policy stream_run uses when asked for `stores`
 * on these arrays: streaming only where the build has streaming stores and
 * every array is 8-byte aligned; normal otherwise.
 */
int stream_stores_used(int stores, const double *a, const double *b, const double *c);

/* Where one OpenMP thread ran during the timed passes. */
typedef struct {
    int thread;      /* omp_get_thread_num() */
    int place;       /* omp_get_place_num(); -1 when the thread is not bound */
    int cpu_first;   /* sched_getcpu() after the first pass; -1 if unknown */
    int cpu_last;    /* sched_getcpu() after the last pass */
    int moves;       /* passes after which the CPU differed from the one before */
} stream_thread;

/* Validation result, as checkSTREAMresults computes it. */
typedef struct {
    double expected[3];  /* expected value of a[], b[], c[] */
    double avg_rel[3];   /* mean |x[j] - expected| / expected per array */
    size_t nbad[3];      /* elements with |x[j]/expected - 1| > epsilon */
} stream_check_t;

/*
 * stream_alloc - allocate a[], b[], c[] of n doubles, STREAM_ALIGN-aligned,
 * and initialise them in parallel (a = 1, b = 2, c = 0) with `threads`
 * OpenMP threads (0 keeps the runtime's default).
 * Returns STREAM_OK, STREAM_EINVAL (n == 0, threads < 0) or STREAM_ENOMEM;
 * on error nothing stays allocated.
 */
int stream_alloc(size_t n, int threads, double **a, double **b, double **c);

/*
 * stream_fill - set a[] = 1, b[] = 2, c[] = 0 with `threads` OpenMP threads
 * (0 keeps the runtime's default) in the kernels' static schedule: the
 * first touch of stream_alloc, and the fresh start of each further
 * configuration measured on the same arrays.
 */
void stream_fill(double *a, double *b, double *c, size_t n, int threads);

/* stream_free - release arrays from stream_alloc (NULL pointers are fine). */
void stream_free(double *a, double *b, double *c);

/*
 * stream_idle - put the team of `threads` (0: the runtime's default) to sleep
 * now: LLVM's and Intel's runtimes keep idle threads spinning for their block
 * time (200 ms by default), which would take the CPUs from whatever runs next
 * (a process that lives on after measuring: the next one measured).  The
 * runtime's block time is held at 0 until stream_resume().  Nothing on GNU
 * libgomp, whose threads spin for well under a millisecond.
 */
void stream_idle(int threads);

/* stream_resume - give the runtime back the block time stream_idle() took, so the
 * next parallel regions (a fill, before any timed pass) spin as they would. */
void stream_resume(void);

/*
 * stream_run - double a[] once (stream.c's timing check), then run `ntimes`
 * passes of Copy (c = a), Scale (b = s c), Add (c = a + b) and Triad
 * (a = b + s c) with s = STREAM_SCALAR, each one `omp parallel for` with the
 * default static schedule, as in stream.c.
 *   triad_only  nonzero: no doubling, and each pass the Triad alone (24 of
 *            the 80 bytes an element a pass of the four moves); the other
 *            three functions' times are 0.  The memory's rate measured
 *            beside another kernel, where the other three add only time.
 *   stores   STREAM_STORES_NORMAL, or STREAM_STORES_STREAMING: the vector
 *            body of each loop written with streaming stores (the elements
 *            before the destination's first aligned vector and the remainder
 *            with normal ones), an sfence by every thread before the timer
 *            stops.  Where stream_stores_used() says normal (no streaming
 *            stores in this build, an array not 8-byte aligned), normal.
 *   times    out: ntimes x STREAM_NFUNC seconds, times[k * STREAM_NFUNC + f]
 *   binding  out: up to max_threads entries, one per OpenMP thread; may be NULL
 *   nthreads out: the number of threads the parallel regions actually had
 * Returns STREAM_OK or STREAM_EINVAL (ntimes < 2, n == 0, an unknown policy).
 */
int stream_run(double *a, double *b, double *c, size_t n, int threads, int stores,
               int ntimes, int triad_only, double *times, stream_thread *binding,
               int max_threads, int *nthreads);

/* stream_expected - the values a[], b[], c[] hold after `ntimes` passes. */
void stream_expected(int ntimes, double expected[3]);

/*
 * stream_expected_from - the values a[], b[], c[] hold after stream_run (its
 * doubling of a[] and `ntimes` passes, or with triad_only its passes of the
 * Triad alone) on arrays that held start[0], start[1], start[2] (a, b, c).
 * Fed its own result, it follows a series of runs that go on from each
 * other, without a fill.
 */
void stream_expected_from(const double start[3], int ntimes, int triad_only,
                          double expected[3]);

/*
 * stream_check_against - checkSTREAMresults: compare a[], b[], c[] with the
 * values expected[] (from stream_expected or stream_expected_from), relative
 * to them (absolute where one is 0).  Fills *out.  Returns STREAM_OK when the
 * mean relative error of every array is at most STREAM_EPSILON,
 * STREAM_EVALIDATE otherwise,
 * STREAM_EINVAL for bad sizes.  One check after a series of runs that went on
 * from each other validates them all, since a wrong element any of them
 * wrote is carried, scaled as the values are, into the values checked (not
 * by runs of the Triad alone, which rewrite all of a[] from b[] and c[]:
 * each of those is checked on its own).  It
 * reads with `threads` OpenMP threads (0: as many as the last call asked).
 */
int stream_check_against(const double *a, const double *b, const double *c, size_t n,
                         const double expected[3], int threads, stream_check_t *out);

/*
 * stream_openmp - facts about the OpenMP runtime this code runs on:
 * the _OPENMP date macro (0 without OpenMP), the file of the runtime library
 * (written to lib, up to len bytes; "" when unknown), the proc-bind policy of
 * the next parallel region (omp_proc_bind_t value) and the number of places.
 */
int stream_openmp(char *lib, size_t len, int *proc_bind, int *num_places);

/*
 * stream_place_procs - the processor ids of OpenMP place `place`, at most
 * `max` of them written to ids.  Returns how many the place has (which may be
 * more than max), or -1 for a place that does not exist.
 */
int stream_place_procs(int place, int *ids, int max);

/* stream_timer_resolution - resolution of the timer used, in seconds. */
double stream_timer_resolution(void);

#endif
