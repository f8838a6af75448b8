/*
 * backend.h - the table of functions each I/O interface gives the driver
 * (IOR's ior_aiori_t, reduced to what the driver calls), and the helper that
 * records an error.  posix.c, mpiio.c and gfarm.c each define one table.
 *
 * Every function returns SB_OK or an SB_* code, having filled *e (the first
 * error only: later ones are consequences) through sb_fail.
 */
#ifndef BURSTBENCH_STORAGE_BACKEND_H
#define BURSTBENCH_STORAGE_BACKEND_H

#include "storage.h"

/* Flags of open. */
enum { SB_O_WRITE = 1, SB_O_CREATE = 2, SB_O_DIRECT = 4 };

typedef struct {
    int fd;          /* posix */
    MPI_File fh;     /* mpiio */
    void *gf;        /* gfarm: GFS_File */
    const char *path;
} sb_file;

typedef struct {
    const char *name;
    /* once per run, before anything else (gfarm_initialize); may be NULL */
    int (*init)(sb_error *e);
    void (*fini)(void);
    /* open `path` for the ranks of `comm` (MPI_COMM_SELF for a file of one's own; the
       MPI-IO interface opens collectively over it); SB_O_* flags */
    int (*open)(sb_file *f, const char *path, int flags, MPI_Comm comm, sb_error *e);
    /* move exactly len bytes at file offset off; `collective` only for MPI-IO */
    int (*xfer)(sb_file *f, int write, void *buf, int64_t len, int64_t off, int collective,
                sb_error *e);
    int (*fsync)(sb_file *f, sb_error *e);
    int (*close)(sb_file *f, sb_error *e);
    /* remove `path`; a file that does not exist is no error */
    int (*remove)(const char *path, sb_error *e);
    /* *size = bytes of `path`; SB_ELAYOUT where it does not exist */
    int (*size)(const char *path, int64_t *size, sb_error *e);
} sb_backend;

extern const sb_backend sb_posix_backend, sb_mpiio_backend;
#ifdef HAVE_GFARM
extern const sb_backend sb_gfarm_backend;
int sb_gfarm_check_impl(const char *url, char *msg, size_t len);
#endif

/*
 * sb_fail - record an error in *e unless one is there already, and return
 * `code`.  call: what failed; offset: -1 if none; errnum: the errno value
 * (0 if none); text: what was said (NULL: strerror(errnum)).
 */
int sb_fail(sb_error *e, int code, const char *call, const char *path, int64_t offset,
            int errnum, const char *text);

#endif
