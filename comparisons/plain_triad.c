/*
 * plain_triad.c - the simplest honest Triad: static arrays, one OpenMP loop,
 * best of NTIMES passes after the first.  A floor for what the compiler and
 * the machine give without any of STREAM's bookkeeping; built by
 * triad_vs_stream.py with -DN=... -DNTIMES=... and the flags under test.
 * Prints "Triad: <best rate in GB/s>".
 */
#include <stdio.h>
#include <time.h>

#ifndef N
#define N 80000000
#endif
#ifndef NTIMES
#define NTIMES 20
#endif

static double a[N], b[N], c[N];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void)
{
    const double s = 3.0;
    double best = 1e30;
#pragma omp parallel for
    for (long j = 0; j < N; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        c[j] = 0.5;
    }
    for (int k = 0; k < NTIMES; k++) {
        double t = now();
#pragma omp parallel for
        for (long j = 0; j < N; j++)
            a[j] = b[j] + s * c[j];
        t = now() - t;
        if (k > 0 && t < best)
            best = t;
    }
    /* use the result so the loop cannot be dropped; 3.5 = 2 + 3 * 0.5 */
    if (a[N / 2] != 3.5) {
        fprintf(stderr, "wrong result %g\n", a[N / 2]);
        return 1;
    }
    printf("Triad: %.3f\n", 24.0 * N / best / 1e9);
    return 0;
}
