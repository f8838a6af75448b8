/*
 * posix.c - the POSIX interface: open/pwrite/pread/fsync/close/unlink, as
 * IOR's aiori-POSIX.c.  With SB_O_DIRECT the file is opened O_DIRECT: the
 * caller's buffers, offsets and lengths are then aligned (storage.c).
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"

static int px_open(sb_file *f, const char *path, int flags, MPI_Comm comm, sb_error *e)
{
    (void)comm;
    /* O_RDWR for writing, as IOR: some file systems refuse O_WRONLY with O_DIRECT */
    int oflag = (flags & SB_O_WRITE) ? O_RDWR : O_RDONLY;
    if (flags & SB_O_CREATE)
        oflag |= O_CREAT;
    if (flags & SB_O_DIRECT)
        oflag |= O_DIRECT;
    f->path = path;
    f->fd = open(path, oflag, 0644);
    if (f->fd < 0)
        return sb_fail(e, SB_EIO, "open", path, -1, errno, NULL);
    return SB_OK;
}

static int px_xfer(sb_file *f, int write, void *buf, int64_t len, int64_t off, int collective,
                   sb_error *e)
{
    (void)collective;
    char *p = buf;
    int64_t done = 0;
    while (done < len) {
        ssize_t n = write ? pwrite(f->fd, p + done, (size_t)(len - done), off + done)
                          : pread(f->fd, p + done, (size_t)(len - done), off + done);
        if (n < 0) {
            if (errno == EINTR) /* a signal handler ran: the flag is checked by the caller */
                continue;
            return sb_fail(e, SB_EIO, write ? "write" : "read", f->path, off + done, errno,
                           NULL);
        }
        if (n == 0)
            return write ? sb_fail(e, SB_EIO, "write", f->path, off + done, 0,
                                   "the system wrote 0 bytes")
                         : sb_fail(e, SB_EDATA, "read", f->path, off + done, 0,
                                   "the file ends here, before the layout's end");
        done += n;
    }
    return SB_OK;
}

static int px_fsync(sb_file *f, sb_error *e)
{
    if (fsync(f->fd) != 0)
        return sb_fail(e, SB_EIO, "fsync", f->path, -1, errno, NULL);
    return SB_OK;
}

static int px_close(sb_file *f, sb_error *e)
{
    int rc = close(f->fd); /* NFS and FUSE report write-back errors here */
    f->fd = -1;
    if (rc != 0)
        return sb_fail(e, SB_EIO, "close", f->path, -1, errno, NULL);
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

const sb_backend sb_posix_backend = {"posix", NULL,     NULL,      px_open, px_xfer,
                                     px_fsync, px_close, px_remove, px_size};
