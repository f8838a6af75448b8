/*
 * storage.h - write and read bandwidth of a file system by IOR's method
 * (github.com/hpc/ior, src/ior.c), so that the numbers compare with IOR's
 * and with the study's.  Pure C99 + MPI; the binding shim is _storage.c.
 *
 * What is kept from IOR:
 * - one driver, and a small table of functions per I/O interface (IOR's
 *   aiori.h), found by its name: POSIX (pwrite/pread), MPI-IO
 *   (MPI_File_write_at[_all]) and Gfarm (libgfarm), each in its own file
 *   with its own opaque file handle (backend.h); the hints that reach it
 *   (direct I/O, collective transfers) in one struct, sb_hints;
 * - the segmented layout: `segments` x (ranks x `block`) in one shared file,
 *   rank r's transfer t of segment s at s*ranks*block + r*block + t*xfer; or
 *   one file per process, "<name>.<rank, 8 digits>", at s*block + t*xfer;
 * - per phase: a barrier, then per rank the time before open, after open,
 *   after the transfers (and the fsync, IOR -e, inside the timed phase) and
 *   after close; bandwidth = bytes of all ranks / (latest close end - earliest
 *   open start), transfer time = latest transfers end - earliest open end;
 * - stale files removed before the write phase (IOR does, unless -E); the
 *   files removed at the end unless kept (IOR -k); -C: rank r reads what rank
 *   (r + ranks per node) % ranks wrote, so no rank reads its own node's cache.
 *
 * What is added: every byte read is checked against what its writer wrote
 * (a 64-bit pattern of the writer's rank, the iteration and the file offset)
 * by a thread that checks one transfer while the next is read (fio's
 * verify_async); before a buffered read each reader fsyncs and drops its
 * range from the page cache (posix_fadvise DONTNEED, or
 * /proc/sys/vm/drop_caches) and measures what stayed resident (mincore);
 * errors are agreed among the ranks after each phase, so every rank returns
 * the same code and none waits in a collective; a signal (sb_interrupt) stops
 * the transfers between two of them.
 */
#ifndef BURSTBENCH_STORAGE_H
#define BURSTBENCH_STORAGE_H

#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

enum { SB_WRITE = 0, SB_READ = 1 };
/* How a buffered read avoids the page cache (ignored with direct I/O). */
enum { SB_DROP_NONE = 0, SB_DROP_FADVISE = 1, SB_DROP_CACHES = 2 };

/* Return codes; every rank of the communicator returns the same one. */
enum {
    SB_OK = 0,
    SB_EINVAL = 1, /* an argument is out of range, or the interface is not built */
    SB_ENOMEM = 2, /* buffers could not be allocated */
    SB_EIO = 3,    /* the storage failed (open, write, fsync, close, ...): see sb_error */
    SB_EDATA = 4,  /* a byte read differs from what was written, or a file ends early */
    SB_EINTR = 5,  /* stopped by a signal between two transfers (sb_error.errnum) */
    SB_ELAYOUT = 6 /* a read-only run found no file, or one of another size */
};

/* The hints of a run that reach the I/O interface at each open (IOR's hints). */
typedef struct {
    int direct;     /* bypass the page cache (O_DIRECT, posix only) */
    int collective; /* collective transfers (MPI_File_write_at_all, mpiio only) */
} sb_hints;

typedef struct {
    const char *api;  /* the I/O interface's name: "posix", "mpiio" or "gfarm" */
    const char *dir;  /* the folder: a path, or gfarm:///path for gfarm */
    const char *name; /* the file's name in it (file per process: name.00000003) */
    int64_t xfer;     /* bytes per transfer: a multiple of 8, below 2 GiB */
    int64_t block;    /* bytes per rank and segment: a multiple of xfer */
    int64_t segments; /* IOR -s */
    int iterations;   /* IOR -i */
    sb_hints hints;
    int file_per_process, fsync, reorder, keep;
    int write, read;  /* the phases to run (IOR -w, -r) */
    int drop;         /* SB_DROP_*, before each buffered read phase */
    size_t align;     /* buffer alignment in bytes: a power of two, >= the direct I/O one */
} sb_params;

typedef struct {
    int op;         /* SB_WRITE or SB_READ */
    int iteration;  /* 0-based */
    int64_t bytes;  /* moved by all ranks */
    double total_s; /* latest close end - earliest open start (IOR's total) */
    double transfer_s, open_s, close_s; /* IOR's wr/rd, open and close columns */
    double check_s; /* reads: the most seconds a rank's checking thread spent comparing */
    double check_wait_s; /* reads: the most seconds a rank waited for it (part of transfer_s) */
    double resident; /* reads: the largest fraction of a rank's range that was in the page
                        cache as the phase began (after the drop); -1 when not measured */
    int drop;       /* reads: the SB_DROP_* done before it */
} sb_phase;

typedef struct {
    int nodes;          /* ranks' nodes (MPI_COMM_TYPE_SHARED) */
    int ranks_per_node; /* the most ranks on one node */
    int shift;          /* readers read the data of rank (r + shift) % ranks */
} sb_info;

typedef struct {
    int rank;       /* the first rank that failed */
    int errnum;     /* its errno (0 if none), or the signal number for SB_EINTR */
    int op;         /* the phase: SB_WRITE or SB_READ */
    int iteration;
    int64_t offset; /* the file offset concerned, -1 if none */
    char call[24];  /* what failed: open, write, read, fsync, close, remove, stat, check, ... */
    char path[PATH_MAX];
    char text[512]; /* what the system or library said, or what the data check found */
} sb_error;

/* Set (from a signal handler) to the signal's number to stop a run between two
 * transfers; the caller sets it to 0 before installing the handler. */
extern volatile sig_atomic_t sb_interrupt;

/*
 * sb_run - run p->iterations of the write and/or read phases on the ranks of
 * `comm` (collective: every rank calls it with the same parameters).  Fills
 * out[0 .. *nout-1] (at most max_out; 2 per iteration suffice) and *info on
 * every rank.  Returns SB_OK, or a code that every rank returns alike with
 * *err the first failing rank's error (SB_EINVAL, SB_ENOMEM, SB_EIO,
 * SB_EDATA, SB_EINTR, SB_ELAYOUT).  After a failure the files this run wrote
 * are removed, unless p->keep, and except for SB_EDATA (kept to look at).
 */
int sb_run(MPI_Comm comm, const sb_params *p, sb_phase *out, int max_out, int *nout,
           sb_info *info, sb_error *err);

/*
 * sb_backend_name - the name of the i-th I/O interface compiled in (i from
 * 0: "posix", "mpiio"[, "gfarm"]), or NULL past the last.  sb_params.api
 * takes one of these; sb_run returns SB_EINVAL for any other.
 */
const char *sb_backend_name(int i);

/*
 * sb_statfs - the file system of `path`: statfs's f_type (the magic number)
 * and f_bsize (bytes).  Returns 0, or an errno value.
 */
int sb_statfs(const char *path, int64_t *magic, int64_t *bsize);

/*
 * sb_check_dir - whether the folder `dir` can be used through interface
 * `api`, asked of its library (gfarm: libgfarm initialised, the path stat'ed
 * and a folder; posix, mpiio: nothing to ask).  Returns 0, or -1 with a
 * one-line reason in msg[0 .. len-1]; -2 where `api` is not built (msg says
 * so).  libgfarm retries an absent metadata server for about a minute: probe
 * its port first.
 */
int sb_check_dir(const char *api, const char *dir, char *msg, size_t len);

#endif
