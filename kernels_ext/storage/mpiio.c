/*
 * mpiio.c - the MPI-IO interface, as IOR's aiori-MPIIO.c without file views:
 * MPI_File_open over the ranks sharing the file (MPI_COMM_SELF for a file per
 * process), explicit offsets, independent (MPI_File_write_at / read_at) or
 * collective (MPI_File_write_at_all / read_at_all) transfers, MPI_File_sync.
 * A file's default error handler is MPI_ERRORS_RETURN, so every call's code
 * is checked here; MPI's error classes are mapped to errno values so that the
 * messages read the same as POSIX's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

/* The errno value an MPI-IO error class stands for (0: none fits). */
static int class_errno(int cls)
{
    switch (cls) {
    case MPI_ERR_NO_SPACE: return ENOSPC;
    case MPI_ERR_READ_ONLY: return EROFS;
    case MPI_ERR_QUOTA: return EDQUOT;
    case MPI_ERR_NO_SUCH_FILE: return ENOENT;
    case MPI_ERR_ACCESS: return EACCES;
    case MPI_ERR_FILE_EXISTS: return EEXIST;
    case MPI_ERR_FILE_IN_USE: return EBUSY;
    case MPI_ERR_BAD_FILE: return ENAMETOOLONG;
    case MPI_ERR_IO: return EIO;
    default: return 0;
    }
}

static int mp_fail(sb_error *e, const char *call, const char *path, int64_t off, int mpierr)
{
    int cls = MPI_ERR_OTHER, len = 0;
    char text[MPI_MAX_ERROR_STRING] = "";
    MPI_Error_class(mpierr, &cls);
    MPI_Error_string(mpierr, text, &len);
    /* ROMIO's strings are error stacks over several lines: the last names the cause */
    char *last = text;
    for (char *p = text; *p; p++)
        if (*p == '\n' && p[1])
            last = p + 1;
    char *nl = strchr(last, '\n');
    if (nl)
        *nl = '\0';
    int errnum = class_errno(cls);
    /* a generic class (MPI_ERR_IO, MPI_ERR_OTHER) may still carry the system's words */
    static const int known[] = {ENOSPC, EROFS, EDQUOT, ENOENT, EACCES, EINVAL};
    if (errnum == 0 || errnum == EIO)
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strstr(text, strerror(known[i])))
                errnum = known[i];
    return sb_fail(e, SB_EIO, call, path, off, errnum, errnum ? NULL : last);
}

struct sb_handle {
    MPI_File fh;
    int collective;
    const char *path;
};

static int mp_open(sb_handle **h, const char *path, int flags, const sb_hints *hints,
                   MPI_Comm comm, sb_error *e)
{
    int amode = (flags & SB_O_WRITE) ? MPI_MODE_RDWR : MPI_MODE_RDONLY; /* RDWR as IOR */
    if (flags & SB_O_CREATE)
        amode |= MPI_MODE_CREATE;
    /* allocated first: MPI_File_open is collective, so no rank may leave before it */
    sb_handle *f = malloc(sizeof *f);
    MPI_File fh = MPI_FILE_NULL;
    int rc = MPI_File_open(comm, (char *)path, amode, MPI_INFO_NULL, &fh);
    *h = NULL;
    if (rc != MPI_SUCCESS) {
        free(f);
        return mp_fail(e, "open", path, -1, rc);
    }
    if (f == NULL) {
        MPI_File_close(&fh);
        return sb_fail(e, SB_ENOMEM, "open", path, -1, ENOMEM, NULL);
    }
    *f = (sb_handle){fh, hints->collective, path};
    *h = f;
    return SB_OK;
}

static int mp_xfer(sb_handle *h, int write, void *buf, int64_t len, int64_t off, sb_error *e)
{
    MPI_Status st;
    int rc, count = 0;
    if (write)
        rc = h->collective ? MPI_File_write_at_all(h->fh, off, buf, (int)len, MPI_BYTE, &st)
                           : MPI_File_write_at(h->fh, off, buf, (int)len, MPI_BYTE, &st);
    else
        rc = h->collective ? MPI_File_read_at_all(h->fh, off, buf, (int)len, MPI_BYTE, &st)
                           : MPI_File_read_at(h->fh, off, buf, (int)len, MPI_BYTE, &st);
    if (rc != MPI_SUCCESS)
        return mp_fail(e, write ? "write" : "read", h->path, off, rc);
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count != (int)len) /* MPI-IO reports end of file as a short count */
        return sb_short(e, write, h->path, off + count, "MPI-IO wrote fewer bytes than asked");
    return SB_OK;
}

static int mp_fsync(sb_handle *h, sb_error *e)
{
    int rc = MPI_File_sync(h->fh);
    return rc == MPI_SUCCESS ? SB_OK : mp_fail(e, "fsync", h->path, -1, rc);
}

static int mp_close(sb_handle *h, sb_error *e)
{
    int rc = MPI_File_close(&h->fh);
    const char *path = h->path;
    free(h);
    return rc == MPI_SUCCESS ? SB_OK : mp_fail(e, "close", path, -1, rc);
}

static int mp_remove(const char *path, sb_error *e)
{
    int rc = MPI_File_delete((char *)path, MPI_INFO_NULL), cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    if (rc == MPI_SUCCESS || cls == MPI_ERR_NO_SUCH_FILE)
        return SB_OK;
    return mp_fail(e, "remove", path, -1, rc);
}

static int mp_size(const char *path, int64_t *size, sb_error *e)
{
    MPI_File fh;
    MPI_Offset n = 0;
    int rc = MPI_File_open(MPI_COMM_SELF, (char *)path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS) {
        int cls = MPI_ERR_OTHER;
        MPI_Error_class(rc, &cls);
        if (cls == MPI_ERR_NO_SUCH_FILE)
            return sb_fail(e, SB_ELAYOUT, "stat", path, -1, ENOENT, NULL);
        return mp_fail(e, "stat", path, -1, rc);
    }
    rc = MPI_File_get_size(fh, &n);
    MPI_File_close(&fh);
    if (rc != MPI_SUCCESS)
        return mp_fail(e, "stat", path, -1, rc);
    *size = (int64_t)n;
    return SB_OK;
}

const sb_backend sb_mpiio_backend = {
    .name = "mpiio", .caps = SB_CAP_COLLECTIVE_OPEN | SB_CAP_LOCAL_CACHE, .open = mp_open,
    .xfer = mp_xfer, .fsync = mp_fsync, .close = mp_close, .remove = mp_remove,
    .size = mp_size};
