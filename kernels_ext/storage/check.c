/*
 * check.c - the data pattern and the checking thread (check.h).
 */
#define _GNU_SOURCE /* SCHED_IDLE */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

/* ---- the data pattern -------------------------------------------------------------------
 * The 64-bit word at file offset o (a multiple of 8) written by rank w in iteration i is
 *     seed(w, i) ^ (o % 4096 ? (o % 4096) * GOLDEN : o)
 * so the first word of every 4 KiB page holds its offset (a transfer written at the wrong
 * place is caught) and every word depends on the writer and the iteration (a stale file or
 * another rank's data is caught).  Between two transfers with the same offset modulo 4096
 * only those first words change: a transfer costs one store per page to prepare, not a
 * pass over the buffer, and the check is one memcmp against the prepared buffer. */

uint64_t sb_seed_of(int writer, int iteration)
{
    return MAGIC << 48 | ((uint64_t)writer & 0xFFFFFF) << 24 | ((uint64_t)iteration & 0xFFFFFF);
}



/* Make pt the pattern of the transfer at file offset off written with `seed`. */
void sb_pattern_at(sb_pattern *pt, uint64_t seed, int64_t off)
{
    int64_t phase = off % PAGE;
    if (seed != pt->seed || phase != pt->phase) {
        for (int64_t k = 0; k < pt->n; k++)
            pt->w[k] = seed ^ sb_offset_term((uint64_t)(off + 8 * k));
        pt->seed = seed;
        pt->phase = phase;
    } else {
        for (int64_t k = ((PAGE - phase) % PAGE) / 8; k < pt->n; k += PAGE / 8)
            pt->w[k] = seed ^ (uint64_t)(off + 8 * k);
    }
}

/* Check `buf`, the transfer read at `off` of `path`: SB_OK, or SB_EDATA naming the first
 * byte that differs from what its writer wrote. */
int sb_check_transfer(sb_pattern *pt, const char *buf, const char *path, int64_t off,
                          uint64_t seed, sb_error *e)
{
    sb_pattern_at(pt, seed, off);
    size_t len = (size_t)pt->n * 8;
    if (memcmp(buf, pt->w, len) == 0)
        return SB_OK;
    const unsigned char *r = (const unsigned char *)buf, *x = (const unsigned char *)pt->w;
    size_t i = 0;
    while (i < len - 1 && r[i] == x[i])
        i++;
    char text[256];
    snprintf(text, sizeof text, "read byte 0x%02x where rank %d wrote 0x%02x in iteration %d",
             r[i], (int)((seed >> 24) & 0xFFFFFF), x[i], (int)(seed & 0xFFFFFF));
    return sb_fail(e, SB_EDATA, "check", path, off + (int64_t)i, 0, text);
}

/* ---- the checking thread ---------------------------------------------------------------
 * The check of a transfer is a pass over memory the device just wrote: about 3 % of a
 * direct read of 1 GB/s here, done inline.  So, as fio's verify_async, a thread checks
 * transfer k while the reading thread reads transfer k+1 into the other of two buffers; the
 * reader waits only where the check is slower than the storage.  One job slot, freed when
 * its check ends: handing over transfer k waits for k-1's check, so the buffer of k-2 that
 * transfer k+1 reuses is free.  The thread makes no MPI call (MPI_THREAD_FUNNELED). */

static void *checker_main(void *arg)
{
    sb_checker *k = arg;
    pthread_mutex_lock(&k->mu);
    for (;;) {
        while (!k->busy && !k->quit)
            pthread_cond_wait(&k->cv, &k->mu);
        if (!k->busy)
            break;
        pthread_mutex_unlock(&k->mu);
        double t0 = MPI_Wtime(); /* MPI_Wtime is thread-safe and needs no initialisation */
        int rc = k->failed ? SB_OK
                           : sb_check_transfer(&k->pt, k->buf, k->path, k->off, k->seed, &k->err);
        double dt = MPI_Wtime() - t0;
        pthread_mutex_lock(&k->mu);
        k->seconds += dt;
        k->failed |= rc != SB_OK;
        k->busy = 0;
        pthread_cond_broadcast(&k->cv);
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

/* Wait until the slot is free; then hand it `buf` unless buf is NULL (just wait).  Returns
 * whether a check has failed so far. */
int sb_checker_submit(sb_checker *k, const char *buf, const char *path, int64_t off,
                          uint64_t seed)
{
    pthread_mutex_lock(&k->mu);
    while (k->busy)
        pthread_cond_wait(&k->cv, &k->mu);
    if (buf && !k->failed) {
        k->buf = buf, k->path = path, k->off = off, k->seed = seed;
        k->busy = 1;
        pthread_cond_broadcast(&k->cv);
    }
    int failed = k->failed;
    pthread_mutex_unlock(&k->mu);
    return failed;
}

int sb_checker_start(sb_checker *k, uint64_t *words, int64_t n)
{
    memset(k, 0, sizeof *k);
    k->pt = (sb_pattern){words, n, 0, -1};
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    if (pthread_create(&k->thread, NULL, checker_main, k) != 0) {
        pthread_mutex_destroy(&k->mu);
        pthread_cond_destroy(&k->cv);
        return -1;
    }
#ifdef SCHED_IDLE
    /* Woken with the reader's time slice still running, a normal thread preempts it on its
     * CPU (wake-up preemption), and the check then delays the next transfer after all: as
     * SCHED_IDLE it runs when a CPU has nothing else to do, as the reader waits for the
     * storage.  Without it (not Linux, refused) the check still overlaps, less well. */
    struct sched_param none = {0};
    pthread_setschedparam(k->thread, SCHED_IDLE, &none);
#endif
    return 0;
}

void sb_checker_stop(sb_checker *k)
{
    pthread_mutex_lock(&k->mu);
    k->quit = 1;
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->thread, NULL);
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
}

