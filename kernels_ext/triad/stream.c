/*
 * stream.c - STREAM kernels with OpenMP; see stream.h for the contract.
 * Based on a variant of the STREAM benchmark code, John D. McCalpin's
 * stream.c 5.10 (Copyright 1991-2013 John D. McCalpin).
 */
#define _GNU_SOURCE /* sched_getcpu, dladdr */
#include "stream.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef __linux__
#include <dlfcn.h>
#include <sched.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

/* Streaming stores: the widest vector the compile flags allow (x86-64 only;
 * -DSTREAM_NO_STREAMING builds without them, as a compiler lacking them would). */
#if defined(__x86_64__) && !defined(STREAM_NO_STREAMING) &&                                       \
    (defined(__AVX512F__) || defined(__AVX__) || defined(__SSE2__))
#include <immintrin.h>
#if defined(__AVX512F__)
#define NT_ISA "avx512"
#define NT_W 8
#define NT_VEC __m512d
#define NT_LOAD _mm512_loadu_pd
#define NT_SET1 _mm512_set1_pd
#define NT_ADD _mm512_add_pd
#define NT_MUL _mm512_mul_pd
#define NT_STORE _mm512_stream_pd
#elif defined(__AVX__)
#define NT_ISA "avx"
#define NT_W 4
#define NT_VEC __m256d
#define NT_LOAD _mm256_loadu_pd
#define NT_SET1 _mm256_set1_pd
#define NT_ADD _mm256_add_pd
#define NT_MUL _mm256_mul_pd
#define NT_STORE _mm256_stream_pd
#else
#define NT_ISA "sse2"
#define NT_W 2
#define NT_VEC __m128d
#define NT_LOAD _mm_loadu_pd
#define NT_SET1 _mm_set1_pd
#define NT_ADD _mm_add_pd
#define NT_MUL _mm_mul_pd
#define NT_STORE _mm_stream_pd
#endif

/*
 * One STREAM kernel with streaming stores: dst[j] = SCALAR (its vector form
 * VECTOR, for the NT_W elements at j).  The elements before dst's first
 * NT_W * 8-byte boundary and after its last whole vector are written with
 * normal stores by one thread; the vectors, split statically over the team
 * as `omp for` splits the elements (pages stay with the thread that touched
 * them first), with streaming stores.  Every thread fences its streaming
 * stores before the region's closing barrier, so they are visible before the
 * caller stops its timer.
 */
#define NT_KERNEL(name, SCALAR, VECTOR)                                                            \
    static void name(double *restrict dst, const double *restrict x, const double *restrict y,   \
                     ptrdiff_t len)                                                              \
    {                                                                                              \
        const double s = STREAM_SCALAR;                                                            \
        const NT_VEC vs = NT_SET1(s);                                                              \
        const size_t vb = NT_W * sizeof(double);                                                   \
        ptrdiff_t head = (ptrdiff_t)((vb - (uintptr_t)dst % vb) % vb / sizeof(double));           \
        head = head < len ? head : len;                                                            \
        const ptrdiff_t nv = (len - head) / NT_W, tail = head + nv * NT_W;                         \
        (void)s, (void)vs, (void)x, (void)y;                                                       \
        _Pragma("omp parallel")                                                                    \
        {                                                                                          \
            _Pragma("omp for schedule(static) nowait") for (ptrdiff_t v = 0; v < nv; v++)          \
            {                                                                                      \
                const ptrdiff_t j = head + v * NT_W;                                               \
                NT_STORE(dst + j, VECTOR);                                                         \
            }                                                                                      \
            _Pragma("omp single nowait")                                                           \
            {                                                                                      \
                for (ptrdiff_t j = 0; j < head; j++)                                               \
                    dst[j] = SCALAR;                                                               \
                for (ptrdiff_t j = tail; j < len; j++)                                             \
                    dst[j] = SCALAR;                                                               \
            }                                                                                      \
            _mm_sfence();                                                                          \
        }                                                                                          \
    }

NT_KERNEL(nt_copy, x[j], NT_LOAD(x + j))
NT_KERNEL(nt_scale, s * x[j], NT_MUL(vs, NT_LOAD(x + j)))
NT_KERNEL(nt_add, x[j] + y[j], NT_ADD(NT_LOAD(x + j), NT_LOAD(y + j)))
NT_KERNEL(nt_triad, x[j] + s * y[j], NT_ADD(NT_LOAD(x + j), NT_MUL(vs, NT_LOAD(y + j))))
#endif

const char *stream_streaming_isa(void)
{
#ifdef NT_ISA
    return NT_ISA;
#else
    return NULL;
#endif
}

int stream_stores_used(int stores, const double *a, const double *b, const double *c)
{
    if (stores != STREAM_STORES_STREAMING || stream_streaming_isa() == NULL ||
        ((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % sizeof(double) != 0)
        return STREAM_STORES_NORMAL;
    return STREAM_STORES_STREAMING;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

double stream_timer_resolution(void)
{
    struct timespec ts;
    if (clock_getres(CLOCK_MONOTONIC, &ts) != 0)
        return -1.0;
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

static int current_cpu(void)
{
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

static void set_threads(int threads)
{
#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads(threads);
#else
    (void)threads;
#endif
}

int stream_alloc(size_t n, int threads, double **a, double **b, double **c)
{
    double *p[3] = {NULL, NULL, NULL};
    if (n == 0 || threads < 0 || n > SIZE_MAX / sizeof(double))
        return STREAM_EINVAL;
    for (int i = 0; i < 3; i++) {
        if (posix_memalign((void **)&p[i], STREAM_ALIGN, n * sizeof(double)) != 0) {
            stream_free(p[0], p[1], p[2]);
            return STREAM_ENOMEM;
        }
    }
    /* Same schedule as the kernels, so each page is first touched (and
     * placed) by the thread that streams it later. */
    stream_fill(p[0], p[1], p[2], n, threads);
    *a = p[0];
    *b = p[1];
    *c = p[2];
    return STREAM_OK;
}

void stream_fill(double *a_, double *b_, double *c_, size_t n, int threads)
{
    double *restrict a = a_, *restrict b = b_, *restrict c = c_;
    const ptrdiff_t len = (ptrdiff_t)n;
    set_threads(threads);
#pragma omp parallel for
    for (ptrdiff_t j = 0; j < len; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        c[j] = 0.0;
    }
}

void stream_free(double *a, double *b, double *c)
{
    free(a);
    free(b);
    free(c);
}

#ifdef _OPENMP
/* LLVM's and Intel's runtimes (not GNU's) let idle threads spin for a block time
 * (200 ms by default); weak, so that a build on another runtime links without them. */
extern int kmp_get_blocktime(void) __attribute__((weak));
extern void kmp_set_blocktime(int msec) __attribute__((weak));
static int blocktime = -1; /* the runtime's own, while stream_idle() holds it at 0 */
#endif

void stream_idle(int threads)
{
#ifdef _OPENMP
    if (kmp_set_blocktime == NULL || kmp_get_blocktime == NULL)
        return;
    if (blocktime < 0)
        blocktime = kmp_get_blocktime();
    kmp_set_blocktime(0);
    set_threads(threads);
    volatile int team = 0;
#pragma omp parallel
    { /* the team takes the block time of 0 with it, into its sleep */
#pragma omp atomic
        team++;
    }
    (void)team;
#else
    (void)threads;
#endif
}

void stream_resume(void)
{
#ifdef _OPENMP
    if (blocktime >= 0 && kmp_set_blocktime != NULL) {
        kmp_set_blocktime(blocktime);
        blocktime = -1;
    }
#endif
}

/* Record, outside the timed loops, the CPU each thread of a fresh parallel
 * region runs on.  With a bound team the runtime reuses the same threads, so
 * this is where the kernels' threads are. */
static int sample_binding(stream_thread *binding, int max_threads, int pass)
{
    int team = 1;
#pragma omp parallel
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#pragma omp single
        team = omp_get_num_threads();
#endif
        if (binding != NULL && t < max_threads) {
            stream_thread *b = &binding[t];
            int cpu = current_cpu();
            if (pass == 0) {
                b->thread = t;
#ifdef _OPENMP
                b->place = omp_get_place_num();
#else
                b->place = -1;
#endif
                b->cpu_first = cpu;
                b->moves = 0;
            } else if (cpu != b->cpu_last) {
                b->moves++;
            }
            b->cpu_last = cpu;
        }
    }
    return team;
}

int stream_run(double *a_, double *b_, double *c_, size_t n, int threads, int stores,
               int ntimes, int triad_only, double *times, stream_thread *binding,
               int max_threads, int *nthreads)
{
    double *restrict a = a_, *restrict b = b_, *restrict c = c_;
    const double scalar = STREAM_SCALAR;
    const ptrdiff_t len = (ptrdiff_t)n;
    int team = 1;

    if (n == 0 || ntimes < 2 || threads < 0 || times == NULL ||
        (stores != STREAM_STORES_NORMAL && stores != STREAM_STORES_STREAMING))
        return STREAM_EINVAL;
    set_threads(threads);
#ifdef NT_ISA
    const int nt = stream_stores_used(stores, a, b, c) == STREAM_STORES_STREAMING;
#endif

    /* stream.c's timing check doubles a[] once; the expected values
     * (stream_expected) depend on it. */
    if (!triad_only) {
#pragma omp parallel for
        for (ptrdiff_t j = 0; j < len; j++)
            a[j] = 2.0E0 * a[j];
    }

    for (int k = 0; k < ntimes; k++) {
        double t, *tk = &times[(size_t)k * STREAM_NFUNC];
        if (triad_only) {
            tk[0] = tk[1] = tk[2] = 0.0;
            t = now();
#ifdef NT_ISA
            if (nt) {
                nt_triad(a, b, c, len);
            } else
#endif
            {
#pragma omp parallel for
                for (ptrdiff_t j = 0; j < len; j++)
                    a[j] = b[j] + scalar * c[j];
            }
            tk[3] = now() - t;
            team = sample_binding(binding, max_threads, k);
            continue;
        }
#ifdef NT_ISA
        if (nt) {
            t = now();
            nt_copy(c, a, NULL, len);
            tk[0] = now() - t;
            t = now();
            nt_scale(b, c, NULL, len);
            tk[1] = now() - t;
            t = now();
            nt_add(c, a, b, len);
            tk[2] = now() - t;
            t = now();
            nt_triad(a, b, c, len);
            tk[3] = now() - t;
            team = sample_binding(binding, max_threads, k);
            continue;
        }
#endif

        t = now();
#pragma omp parallel for
        for (ptrdiff_t j = 0; j < len; j++)
            c[j] = a[j];
        tk[0] = now() - t;

        t = now();
#pragma omp parallel for
        for (ptrdiff_t j = 0; j < len; j++)
            b[j] = scalar * c[j];
        tk[1] = now() - t;

        t = now();
#pragma omp parallel for
        for (ptrdiff_t j = 0; j < len; j++)
            c[j] = a[j] + b[j];
        tk[2] = now() - t;

        t = now();
#pragma omp parallel for
        for (ptrdiff_t j = 0; j < len; j++)
            a[j] = b[j] + scalar * c[j];
        tk[3] = now() - t;

        /* Untimed: where did the threads run after this pass? */
        team = sample_binding(binding, max_threads, k);
    }
    if (nthreads != NULL)
        *nthreads = team;
    return STREAM_OK;
}

void stream_expected(int ntimes, double expected[3])
{
    const double start[3] = {1.0, 2.0, 0.0};
    stream_expected_from(start, ntimes, 0, expected);
}

void stream_expected_from(const double start[3], int ntimes, int triad_only,
                          double expected[3])
{
    double aj = start[0], bj = start[1], cj = start[2];
    const double scalar = STREAM_SCALAR;
    if (triad_only) {
        expected[0] = ntimes > 0 ? bj + scalar * cj : aj;
        expected[1] = bj;
        expected[2] = cj;
        return;
    }
    aj = 2.0E0 * aj;
    for (int k = 0; k < ntimes; k++) {
        cj = aj;
        bj = scalar * cj;
        cj = aj + bj;
        aj = bj + scalar * cj;
    }
    expected[0] = aj;
    expected[1] = bj;
    expected[2] = cj;
}

int stream_check_against(const double *a, const double *b, const double *c, size_t n,
                         const double expected[3], int threads, stream_check_t *out)
{
    const ptrdiff_t len = (ptrdiff_t)n;
    int rc = STREAM_OK;

    if (n == 0 || out == NULL)
        return STREAM_EINVAL;
    const double ea = expected[0], eb = expected[1], ec = expected[2];
    /* |x / e - 1| <= eps as |x - e| <= eps |e|: without a division the loop
     * vectorizes and reads at the memory's rate (clang's divisions made it half
     * a Triad pass's speed).  A NaN compares false with everything, so it is
     * counted explicitly. */
    const double ta = STREAM_EPSILON * fabs(ea), tb = STREAM_EPSILON * fabs(eb),
                 tc = STREAM_EPSILON * fabs(ec);
    double sa = 0.0, sb = 0.0, sc = 0.0;
    size_t ba = 0, bb = 0, bc = 0;
    set_threads(threads);
#pragma omp parallel for reduction(+ : sa, sb, sc, ba, bb, bc)
    for (ptrdiff_t j = 0; j < len; j++) {
        double da = fabs(a[j] - ea), db = fabs(b[j] - eb), dc = fabs(c[j] - ec);
        sa += da;
        sb += db;
        sc += dc;
        ba += !(da <= ta);
        bb += !(db <= tb);
        bc += !(dc <= tc);
    }
    const double sum[3] = {sa, sb, sc};
    const size_t bad[3] = {ba, bb, bc};
    for (int i = 0; i < 3; i++) {
        out->expected[i] = expected[i];
        /* an array expected to hold 0 (c after Triads alone from a fill):
         * its mean error itself */
        const double scale = expected[i] != 0.0 ? fabs(expected[i]) : 1.0;
        out->avg_rel[i] = sum[i] / (double)n / scale;
        out->nbad[i] = bad[i];
        if (!(out->avg_rel[i] <= STREAM_EPSILON))
            rc = STREAM_EVALIDATE;
    }
    return rc;
}

int stream_openmp(char *lib, size_t len, int *proc_bind, int *num_places)
{
    if (lib != NULL && len > 0)
        lib[0] = '\0';
    *proc_bind = 0;
    *num_places = 0;
#ifdef _OPENMP
    *proc_bind = (int)omp_get_proc_bind();
    *num_places = omp_get_num_places();
#ifdef __linux__
    Dl_info info;
    if (lib != NULL && len > 0 && dladdr((void *)&omp_get_num_threads, &info) != 0 &&
        info.dli_fname != NULL) {
        strncpy(lib, info.dli_fname, len - 1);
        lib[len - 1] = '\0';
    }
#endif
    return _OPENMP;
#else
    return 0;
#endif
}

int stream_place_procs(int place, int *ids, int max)
{
#ifdef _OPENMP
    if (place < 0 || place >= omp_get_num_places())
        return -1;
    int count = omp_get_place_num_procs(place);
    if (count <= max) {
        omp_get_place_proc_ids(place, ids);
    } else {
        int *all = malloc((size_t)count * sizeof(int));
        if (all == NULL)
            return -1;
        omp_get_place_proc_ids(place, all);
        memcpy(ids, all, (size_t)max * sizeof(int));
        free(all);
    }
    return count;
#else
    (void)place, (void)ids, (void)max;
    return -1;
#endif
}
