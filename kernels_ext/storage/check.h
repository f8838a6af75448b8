/*
 * check.h - the data a storage run writes, and checking what it reads: the pattern of
 * every 64-bit word (its writer, its iteration, its offset) and a thread that checks one
 * transfer while the next is read (storage.c uses both).
 */
#ifndef SB_CHECK_H
#define SB_CHECK_H

#include <pthread.h>
#include <stdint.h>

#include "backend.h"

enum { PAGE = 4096 };             /* the pattern's page: its first word holds the offset */
#define MAGIC 0x5342ULL /* "SB", the seed's top 16 bits */
#define GOLDEN 0x9E3779B97F4A7C15ULL

/* The offset's part of the word at file offset o: the offset itself in a page's first word,
 * a multiple of GOLDEN elsewhere. */
static inline uint64_t sb_offset_term(uint64_t o)
{
    uint64_t in = o & (PAGE - 1);
    return in ? in * GOLDEN : o;
}

/* A buffer of one transfer's pattern, kept between transfers (check.c: how the pattern is
 * laid out, and why a transfer costs one store per page to prepare). */
typedef struct {
    uint64_t *w;   /* xfer / 8 words */
    int64_t n;
    uint64_t seed; /* what w holds: the seed ... */
    int64_t phase; /* ... and its first offset modulo PAGE (-1: nothing yet) */
} sb_pattern;

/* The checking thread and its one job slot (check.c: why a thread, why SCHED_IDLE). */
typedef struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy, quit, failed; /* a job in the slot; stop; a check failed (sticky) */
    const char *buf, *path;
    int64_t off;
    uint64_t seed;
    sb_pattern pt;
    double seconds; /* spent checking */
    sb_error err;   /* the failed check's */
} sb_checker;

/* The seed of the data rank `writer` writes in `iteration` (the pattern's top bits). */
uint64_t sb_seed_of(int writer, int iteration);

/* Make pt the pattern of the transfer at file offset off written with `seed`. */
void sb_pattern_at(sb_pattern *pt, uint64_t seed, int64_t off);

/* Check `buf`, the transfer read at `off` of `path`: SB_OK, or SB_EDATA naming the first
 * byte that differs from what its writer wrote. */
int sb_check_transfer(sb_pattern *pt, const char *buf, const char *path, int64_t off,
                      uint64_t seed, sb_error *e);

/* Start the checking thread on a pattern buffer of n words: 0, or -1 (no thread). */
int sb_checker_start(sb_checker *k, uint64_t *words, int64_t n);

/* Wait until the slot is free; then hand it `buf` unless buf is NULL (just wait).  Returns
 * whether a check has failed so far. */
int sb_checker_submit(sb_checker *k, const char *buf, const char *path, int64_t off,
                      uint64_t seed);

/* Stop and join the checking thread. */
void sb_checker_stop(sb_checker *k);

#endif
