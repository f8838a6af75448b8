/*
 * gfarm.c - the Gfarm interface through libgfarm (Gfarm 2.7), as IOR's
 * aiori-Gfarm.c: gfarm_initialize, gfs_pio_create/open, gfs_pio_pwrite/pread,
 * gfs_pio_sync for fsync, gfs_pio_close, gfs_unlink, gfs_stat,
 * gfarm_terminate.  Paths are URLs, gfarm:///dir/file.  Compiled only where
 * pkg-config finds gfarm (kernel.json's "optional"); HAVE_GFARM then.
 * libgfarm's errors become errno values (gfarm_error_to_errno) beside its own
 * words (gfarm_error_string), so a message says both.
 */
#include <stddef.h> /* before gfarm.h, which uses size_t without it */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gfarm/gfarm.h>

#include "backend.h"

/* gfs_pio_pwrite/pread move an int of bytes at most: transfers are below 2 GiB */

static int gf_fail(sb_error *e, int code, const char *call, const char *path, int64_t off,
                   gfarm_error_t ge)
{
    return sb_fail(e, code, call, path, off, gfarm_error_to_errno(ge), gfarm_error_string(ge));
}

static int gf_init(sb_error *e)
{
    gfarm_error_t ge = gfarm_initialize(NULL, NULL);
    if (ge != GFARM_ERR_NO_ERROR)
        return gf_fail(e, SB_EIO, "gfarm_initialize", "", -1, ge);
    return SB_OK;
}

static void gf_fini(void)
{
    gfarm_terminate();
}

struct sb_handle {
    GFS_File gf;
    const char *path;
};

static int gf_open(sb_handle **h, const char *path, int flags, const sb_hints *hints,
                   MPI_Comm comm, sb_error *e)
{
    (void)hints, (void)comm; /* no direct I/O in libgfarm: configure() refuses --direct */
    GFS_File gf = NULL;
    gfarm_error_t ge;
    *h = NULL;
    if (flags & SB_O_CREATE)
        ge = gfs_pio_create(path, GFARM_FILE_RDWR, 0644, &gf);
    else
        ge = gfs_pio_open(path, (flags & SB_O_WRITE) ? GFARM_FILE_RDWR : GFARM_FILE_RDONLY,
                          &gf);
    if (ge != GFARM_ERR_NO_ERROR)
        return gf_fail(e, SB_EIO, "open", path, -1, ge);
    if ((*h = malloc(sizeof **h)) == NULL) {
        gfs_pio_close(gf);
        return sb_fail(e, SB_ENOMEM, "open", path, -1, ENOMEM, NULL);
    }
    **h = (sb_handle){gf, path};
    return SB_OK;
}

static int gf_xfer(sb_handle *h, int write, void *buf, int64_t len, int64_t off, sb_error *e)
{
    char *p = buf;
    int64_t done = 0;
    while (done < len) {
        int n = 0;
        gfarm_error_t ge = write ? gfs_pio_pwrite(h->gf, p + done, (int)(len - done), off + done,
                                                  &n)
                                 : gfs_pio_pread(h->gf, p + done, (int)(len - done), off + done,
                                                 &n);
        if (ge != GFARM_ERR_NO_ERROR)
            return gf_fail(e, SB_EIO, write ? "write" : "read", h->path, off + done, ge);
        if (n == 0)
            return sb_short(e, write, h->path, off + done, "libgfarm wrote 0 bytes");
        done += n;
    }
    return SB_OK;
}

static int gf_fsync(sb_handle *h, sb_error *e)
{
    gfarm_error_t ge = gfs_pio_sync(h->gf);
    return ge == GFARM_ERR_NO_ERROR ? SB_OK : gf_fail(e, SB_EIO, "fsync", h->path, -1, ge);
}

static int gf_close(sb_handle *h, sb_error *e)
{
    gfarm_error_t ge = gfs_pio_close(h->gf);
    const char *path = h->path;
    free(h);
    return ge == GFARM_ERR_NO_ERROR ? SB_OK : gf_fail(e, SB_EIO, "close", path, -1, ge);
}

static int gf_remove(const char *path, sb_error *e)
{
    gfarm_error_t ge = gfs_unlink(path);
    if (ge == GFARM_ERR_NO_ERROR || ge == GFARM_ERR_NO_SUCH_FILE_OR_DIRECTORY)
        return SB_OK;
    return gf_fail(e, SB_EIO, "remove", path, -1, ge);
}

static int gf_size(const char *path, int64_t *size, sb_error *e)
{
    struct gfs_stat st;
    gfarm_error_t ge = gfs_stat(path, &st);
    if (ge != GFARM_ERR_NO_ERROR)
        return gf_fail(e, ge == GFARM_ERR_NO_SUCH_FILE_OR_DIRECTORY ? SB_ELAYOUT : SB_EIO,
                       "stat", path, -1, ge);
    *size = (int64_t)st.st_size;
    gfs_stat_free(&st);
    return SB_OK;
}

/* Whether the folder `url` can be used: libgfarm started, the path stat'ed and a folder. */
static int gf_check(const char *url, char *msg, size_t len)
{
    gfarm_error_t ge = gfarm_initialize(NULL, NULL);
    if (ge != GFARM_ERR_NO_ERROR) {
        snprintf(msg, len, "libgfarm did not start: %s", gfarm_error_string(ge));
        return -1;
    }
    struct gfs_stat st;
    int rc = 0;
    ge = gfs_stat(url, &st);
    if (ge != GFARM_ERR_NO_ERROR) {
        snprintf(msg, len, "%s", gfarm_error_string(ge));
        rc = -1;
    } else {
        if (!GFARM_S_ISDIR(st.st_mode)) {
            snprintf(msg, len, "not a folder");
            rc = -1;
        }
        gfs_stat_free(&st);
    }
    gfarm_terminate();
    return rc;
}

/* No SB_CAP_LOCAL_CACHE: the data sit in the I/O servers' page cache, out of a client's
 * reach; no SB_CAP_COLLECTIVE_OPEN: one rank creates a shared file, then the others open it */
const sb_backend sb_gfarm_backend = {
    .name = "gfarm", .init = gf_init, .fini = gf_fini, .open = gf_open, .xfer = gf_xfer,
    .fsync = gf_fsync, .close = gf_close, .remove = gf_remove, .size = gf_size,
    .check = gf_check};
