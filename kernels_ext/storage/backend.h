/*
 * backend.h - what each I/O interface gives the driver (IOR's ior_aiori_t,
 * reduced to what the driver calls), the table that finds one by name, and
 * the helper that records an error.  posix.c, mpiio.c and gfarm.c each define
 * one sb_backend; a new interface is a new file (in kernel.json) and a line
 * in storage.c's table, not an edit here.
 *
 * An open file is an sb_handle, opaque to the driver as IOR's aiori_fd_t:
 * each backend defines struct sb_handle its own way (a descriptor, an
 * MPI_File, a GFS_File), allocates it in open and frees it in close.
 *
 * Every function returns SB_OK or an SB_* code, having filled *e (the first
 * error only: later ones are consequences) through sb_fail.
 */
#ifndef BURSTBENCH_STORAGE_BACKEND_H
#define BURSTBENCH_STORAGE_BACKEND_H

#include "storage.h"

/* Flags of open. */
enum { SB_O_WRITE = 1, SB_O_CREATE = 2 };

/* What a backend can do, beside its functions (sb_backend.caps). */
enum {
    /* open of a shared file is collective over all ranks, and creates it (MPI_File_open);
       without it one rank creates the file, then the others open it (IOR's POSIX_Create) */
    SB_CAP_COLLECTIVE_OPEN = 1,
    /* its files are this host's files by path: before a buffered read the driver can fsync,
       drop (posix_fadvise) and measure (mincore) their pages in this host's page cache */
    SB_CAP_LOCAL_CACHE = 2
};

typedef struct sb_handle sb_handle;

typedef struct {
    const char *name; /* what sb_params.api names it by */
    int caps;         /* SB_CAP_* */
    /* once per run, before anything else (gfarm_initialize); may be NULL */
    int (*init)(sb_error *e);
    void (*fini)(void);
    /* open `path` for the ranks of `comm` (MPI_COMM_SELF for a file of one's own; with
       SB_CAP_COLLECTIVE_OPEN the whole communicator for the shared file); SB_O_* flags;
       hints (storage.h) as the run's, kept in the handle.  With hints->direct the caller's
       buffers, offsets and lengths are aligned; with hints->collective every rank of comm
       calls xfer alike.  *h is the new handle, or NULL after a failure */
    int (*open)(sb_handle **h, const char *path, int flags, const sb_hints *hints,
                MPI_Comm comm, sb_error *e);
    /* move exactly len bytes at file offset off */
    int (*xfer)(sb_handle *h, int write, void *buf, int64_t len, int64_t off, sb_error *e);
    int (*fsync)(sb_handle *h, sb_error *e);
    /* close the file and free h, whatever the outcome */
    int (*close)(sb_handle *h, sb_error *e);
    /* remove `path`; a file that does not exist is no error */
    int (*remove)(const char *path, sb_error *e);
    /* *size = bytes of `path`; SB_ELAYOUT where it does not exist */
    int (*size)(const char *path, int64_t *size, sb_error *e);
    /* whether the folder `dir` can be used, asked of the library itself: 0, or -1 with a
       one-line reason in msg[0 .. len-1]; may be NULL (nothing to ask beyond the path) */
    int (*check)(const char *dir, char *msg, size_t len);
} sb_backend;

/*
 * sb_backend_find - the backend compiled in under `name` ("posix", "mpiio",
 * "gfarm"), or NULL where there is none (an unknown name, or one not built).
 * The table is storage.c's; each backend's file defines its sb_<name>_backend.
 */
const sb_backend *sb_backend_find(const char *name);

/*
 * sb_fail - record an error in *e unless one is there already, and return
 * `code`.  call: what failed; offset: -1 if none; errnum: the errno value
 * (0 if none); text: what was said (NULL: strerror(errnum)).
 */
int sb_fail(sb_error *e, int code, const char *call, const char *path, int64_t offset,
            int errnum, const char *text);

/*
 * sb_short - record a transfer that moved fewer bytes than asked, ending at
 * file offset `off`: a write's is SB_EIO with `wrote` as the text (what the
 * library did), a read's is SB_EDATA (the file ends before the layout's end).
 */
int sb_short(sb_error *e, int write, const char *path, int64_t off, const char *wrote);

#endif
