/*
 * posix.c - the POSIX interface: open/pwrite/pread/fsync/close/unlink, as
 * IOR's aiori-POSIX.c.  With the direct hint the file is opened O_DIRECT:
 * the caller's buffers, offsets and lengths are then aligned (storage.c).
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"

struct sb_handle {
    int fd;
    const char *path;
};

static int px_open(sb_handle **h, const char *path, int flags, const sb_hints *hints,
                   MPI_Comm comm, sb_error *e)
{
    (void)comm;
    /* O_RDWR for writing, as IOR: some file systems refuse O_WRONLY with O_DIRECT */
    int oflag = (flags & SB_O_WRITE) ? O_RDWR : O_RDONLY;
    if (flags & SB_O_CREATE)
        oflag |= O_CREAT;
    if (hints->direct)
        oflag |= O_DIRECT;
    *h = NULL;
    int fd = open(path, oflag, 0644);
    if (fd < 0)
        return sb_fail(e, SB_EIO, "open", path, -1, errno, NULL);
    if ((*h = malloc(sizeof **h)) == NULL) {
        close(fd);
        return sb_fail(e, SB_ENOMEM, "open", path, -1, ENOMEM, NULL);
    }
    **h = (sb_handle){fd, path};
    return SB_OK;
}

static int px_xfer(sb_handle *h, int write, void *buf, int64_t len, int64_t off, sb_error *e)
{
    char *p = buf;
    int64_t done = 0;
    while (done < len) {
        ssize_t n = write ? pwrite(h->fd, p + done, (size_t)(len - done), off + done)
                          : pread(h->fd, p + done, (size_t)(len - done), off + done);
        if (n < 0) {
            if (errno == EINTR) /* a signal handler ran: the flag is checked by the caller */
                continue;
            return sb_fail(e, SB_EIO, write ? "write" : "read", h->path, off + done, errno,
                           NULL);
        }
        if (n == 0)
            return sb_short(e, write, h->path, off + done, "the system wrote 0 bytes");
        done += n;
    }
    return SB_OK;
}

static int px_fsync(sb_handle *h, sb_error *e)
{
    if (fsync(h->fd) != 0)
        return sb_fail(e, SB_EIO, "fsync", h->path, -1, errno, NULL);
    return SB_OK;
}

static int px_close(sb_handle *h, sb_error *e)
{
    int rc = close(h->fd), errnum = errno; /* NFS and FUSE report write-back errors here */
    const char *path = h->path;
    free(h);
    if (rc != 0)
        return sb_fail(e, SB_EIO, "close", path, -1, errnum, NULL);
    return SB_OK;
}

static int px_remove(const char *path, sb_error *e)
{
    if (unlink(path) != 0 && errno != ENOENT)
        return sb_fail(e, SB_EIO, "remove", path, -1, errno, NULL);
    return SB_OK;
}

static int px_size(const char *path, int64_t *size, sb_error *e)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return sb_fail(e, errno == ENOENT ? SB_ELAYOUT : SB_EIO, "stat", path, -1, errno, NULL);
    *size = (int64_t)st.st_size;
    return SB_OK;
}

const sb_backend sb_posix_backend = {
    .name = "posix", .caps = SB_CAP_LOCAL_CACHE, .open = px_open, .xfer = px_xfer,
    .fsync = px_fsync, .close = px_close, .remove = px_remove, .size = px_size};
