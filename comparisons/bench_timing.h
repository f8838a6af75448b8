/*
 * bench_timing.h - what the kernel comparisons' C drivers (biccg_kernels.c,
 * biccg_lanes.c) share: a flush that leaves nothing of the operands in cache,
 * and variants timed alternately, medians.
 */
#ifndef BURSTBENCH_BENCH_TIMING_H
#define BURSTBENCH_BENCH_TIMING_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <omp.h>

#include "internal.h"

/* doubles written by a flush: twice the last-level cache, 192 MiB at least
 * (the Xeon VMs report 300 MiB of L3, in which 192 MiB left 128^3 cached) */
static size_t flush_n = (size_t)24 << 20;
static double *junk;

/* Size and allocate the flush's array; 0, or -1 without the memory. */
static int flush_init(void)
{
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc > 0 && 2 * (size_t)llc / sizeof *junk > flush_n)
        flush_n = 2 * (size_t)llc / sizeof *junk;
#endif
    junk = bc_alloc(flush_n, sizeof *junk);
    if (junk == NULL)
        return -1;
    memset(junk, 0, flush_n * sizeof *junk);
    return 0;
}

static void flush(void)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < flush_n; i++)
        junk[i] = junk[i] * 0.5 + 1.0;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of t[0..n) (sorts t). */
static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, by_value);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Time call(ctx, v) for the nv variants v, rounds times, in an order that
 * reverses every round (ABCD, DCBA, ...), each call after a flush and then
 * once more at once (its operands in cache as far as they fit: the same time
 * both ways says a kernel is bound by its instructions, not by the memory):
 * the medians in ms[v] (flushed) and ms[nv + v] (warm), in milliseconds.
 * t: 2 nv rounds doubles of scratch. */
static void time_alternating(int nv, int rounds, void (*call)(void *ctx, int v), void *ctx,
                             double *t, double *ms)
{
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < nv; k++) {
            const int v = r % 2 ? nv - 1 - k : k;
            flush();
            for (int warm = 0; warm < 2; warm++) {
                const double t0 = omp_get_wtime();
                call(ctx, v);
                t[(nv * warm + v) * rounds + r] = omp_get_wtime() - t0;
            }
        }
    for (int v = 0; v < 2 * nv; v++)
        ms[v] = 1e3 * median(t + v * rounds, rounds);
}

#endif
