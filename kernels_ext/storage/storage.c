/*
 * storage.c - the driver: IOR's method over any of the interfaces of
 * backend.h (see storage.h for what is kept from IOR and what is added).
 */
#define _GNU_SOURCE /* O_DIRECT, posix_fadvise, mincore */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"

volatile sig_atomic_t sb_interrupt = 0;

/* The interfaces compiled in, found by name (IOR's available_aiori): posix.c, mpiio.c and,
 * where pkg-config found libgfarm, gfarm.c.  A new interface is a new file (in kernel.json)
 * and a line here. */
extern const sb_backend sb_posix_backend, sb_mpiio_backend, sb_gfarm_backend;
static const sb_backend *const BACKENDS[] = {
    &sb_posix_backend, &sb_mpiio_backend,
#ifdef HAVE_GFARM
    &sb_gfarm_backend,
#endif
};
enum { NBACKENDS = sizeof BACKENDS / sizeof BACKENDS[0] };

const sb_backend *sb_backend_find(const char *name)
{
    for (int i = 0; name && i < NBACKENDS; i++)
        if (strcmp(name, BACKENDS[i]->name) == 0)
            return BACKENDS[i];
    return NULL;
}

const char *sb_backend_name(int i)
{
    return i >= 0 && i < NBACKENDS ? BACKENDS[i]->name : NULL;
}

int sb_fail(sb_error *e, int code, const char *call, const char *path, int64_t offset,
            int errnum, const char *text)
{
    if (e->call[0] == '\0') {
        snprintf(e->call, sizeof e->call, "%s", call);
        snprintf(e->path, sizeof e->path, "%s", path ? path : "");
        snprintf(e->text, sizeof e->text, "%s", text ? text : strerror(errnum));
        e->offset = offset;
        e->errnum = errnum;
    }
    return code;
}

int sb_short(sb_error *e, int write, const char *path, int64_t off, const char *wrote)
{
    return write ? sb_fail(e, SB_EIO, "write", path, off, 0, wrote)
                 : sb_fail(e, SB_EDATA, "read", path, off, 0,
                           "the file ends here, before the layout's end");
}

typedef struct {
    MPI_Comm comm, node;
    int rank, nranks, node_rank;
    const sb_params *p;
    const sb_backend *be;
    sb_info info;
    int writer;            /* whose data this rank reads */
    sb_pattern wp;            /* the pattern written */
    char *R[2];            /* the read buffers, used in turn */
    sb_checker *chk;          /* checks what is read (NULL: no read phase) */
    char mine[PATH_MAX];   /* the file this rank writes (the shared file: the same on all) */
    char theirs[PATH_MAX]; /* the file it reads */
    int created;           /* this run wrote files: a failure removes them (unless keep) */
    int cur_op, cur_it;    /* the phase running, for the error record */
    sb_error err;
} ctx;

/* ---- layout ---------------------------------------------------------------------------- */

static void file_path(const ctx *c, char *out, int who)
{
    const char *dir = c->p->dir;
    const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/";
    if (c->p->file_per_process)
        snprintf(out, PATH_MAX, "%s%s%s.%08d", dir, sep, c->p->name, who);
    else
        snprintf(out, PATH_MAX, "%s%s%s", dir, sep, c->p->name);
}

/* File offset of transfer t of segment s of rank `who`'s data. */
static int64_t offset_of(const ctx *c, int who, int64_t s, int64_t t)
{
    const sb_params *p = c->p;
    if (p->file_per_process)
        return s * p->block + t * p->xfer;
    return s * c->nranks * p->block + (int64_t)who * p->block + t * p->xfer;
}

/* ---- agreement --------------------------------------------------------------------------- */

/* The code of the lowest rank that failed, with its error in c->err, on every rank (SB_OK
 * where none did).  Every rank calls it at the same points, so none waits alone. */
static int agree(ctx *c, int code)
{
    int mine = code ? c->rank : c->nranks, first = c->nranks;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, c->comm);
    if (first == c->nranks)
        return SB_OK;
    if (c->rank == first) {
        c->err.rank = first;
        c->err.op = c->cur_op;
        c->err.iteration = c->cur_it;
    }
    MPI_Bcast(&code, 1, MPI_INT, first, c->comm);
    MPI_Bcast(&c->err, (int)sizeof c->err, MPI_BYTE, first, c->comm);
    return code;
}

/* Remove the files of this run: each rank its own, rank 0 the shared one. */
static int remove_files(ctx *c, sb_error *e)
{
    int rc = SB_OK;
    MPI_Barrier(c->comm); /* every rank has closed the shared file */
    if (c->p->file_per_process || c->rank == 0)
        rc = c->be->remove(c->mine, e);
    return rc;
}

/* ---- the page cache before a buffered read ----------------------------------------------- */

/* How many byte ranges this rank reads (the s-th at offset_of(c, c->writer, s, 0)), each
 * *len bytes long. */
static int64_t read_ranges(const ctx *c, int64_t *len)
{
    *len = c->p->file_per_process ? c->p->segments * c->p->block : c->p->block;
    return c->p->file_per_process ? 1 : c->p->segments;
}

/* Write back (fsync) the file this rank reads, through its path whatever the interface:
 * posix_fadvise DONTNEED does not drop dirty pages. */
static int flush(ctx *c, const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return sb_fail(&c->err, SB_EIO, "open", path, -1, errno, NULL);
    int rc = SB_OK;
    /* EINVAL, ENOSYS: no fsync here; EBADF: FUSE file systems (gfarm2fs) refuse it on a
     * read-only descriptor; they write through, so there is nothing to flush */
    if (fsync(fd) != 0 && errno != EINVAL && errno != ENOSYS && errno != EBADF)
        rc = sb_fail(&c->err, SB_EIO, "fsync", path, -1, errno, NULL);
    close(fd);
    return rc;
}

/* Drop the ranges this rank reads from the page cache (posix_fadvise DONTNEED).  Called
 * after every rank's flush: a page another rank is writing back is not dropped. */
static void drop(ctx *c, const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    int64_t len, n = read_ranges(c, &len);
    for (int64_t s = 0; s < n; s++)
        posix_fadvise(fd, offset_of(c, c->writer, s, 0), len, POSIX_FADV_DONTNEED);
    close(fd);
}

/* The fraction of the ranges this rank reads that is in the page cache now (mincore), or
 * -1 where it cannot be told (the file cannot be mapped). */
static double resident_fraction(const ctx *c, const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    const int64_t chunk = 256 << 20;
    long pg = sysconf(_SC_PAGESIZE);
    unsigned char *vec = malloc((size_t)(chunk / pg + 2));
    if (vec == NULL)
        return close(fd), -1;
    int64_t len, n = read_ranges(c, &len), pages = 0, in = 0;
    for (int64_t s = 0; s < n; s++) {
        int64_t lo = offset_of(c, c->writer, s, 0), hi = lo + len;
        for (int64_t a = lo - lo % pg; a < hi; a += chunk) {
            size_t m = (size_t)((hi - a < chunk ? hi - a : chunk));
            void *map = mmap(NULL, m, PROT_READ, MAP_SHARED, fd, a);
            if (map == MAP_FAILED || mincore(map, m, vec) != 0) {
                if (map != MAP_FAILED)
                    munmap(map, m);
                free(vec), close(fd);
                return -1;
            }
            for (size_t k = 0; k < (m + (size_t)pg - 1) / (size_t)pg; k++)
                pages++, in += vec[k] & 1;
            munmap(map, m);
        }
    }
    free(vec);
    close(fd);
    return pages ? (double)in / (double)pages : -1;
}

/* /proc/sys/vm/drop_caches, by one rank per node, after every rank flushed its ranges. */
static int drop_caches(ctx *c)
{
    static const char *knob = "/proc/sys/vm/drop_caches";
    MPI_Barrier(c->comm);
    if (c->node_rank != 0)
        return SB_OK;
    sync();
    int fd = open(knob, O_WRONLY), rc = SB_OK;
    if (fd < 0 || write(fd, "3\n", 2) != 2)
        rc = sb_fail(&c->err, SB_EIO, "drop_caches", knob, -1, errno, NULL);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* ---- one phase ----------------------------------------------------------------------------- */

/* IOR's timed phase: barrier; open; the transfers (and fsync when writing with p->fsync);
 * close; the four time stamps of each rank reduced as IOR's ReduceIterResults.  Returns the
 * agreed code. */
static int timed_phase(ctx *c, int op, uint64_t seed, sb_phase *ph)
{
    const sb_params *p = c->p;
    const int write = op == SB_WRITE, shared = !p->file_per_process;
    const char *path = write ? c->mine : c->theirs;
    const int who = write ? c->rank : c->writer;
    /* a collective call per transfer over all ranks: they must stop at the same one */
    const int lockstep = p->hints.collective && shared;
    const int together = shared && (c->be->caps & SB_CAP_COLLECTIVE_OPEN);
    MPI_Comm fcomm = together ? c->comm : MPI_COMM_SELF;
    const int flags = write ? SB_O_WRITE : 0;
    sb_handle *f = NULL;
    int rc = SB_OK;
    int64_t moved = 0, nx = p->block / p->xfer, k = 0;
    double t[4], wait = 0, checked = c->chk ? c->chk->seconds : 0;

    if (write)
        c->created = 1;
    MPI_Barrier(c->comm);
    t[0] = MPI_Wtime();
    if (write && shared && !together) {
        /* one rank creates the shared file, then the others open it (IOR's POSIX_Create) */
        if (c->rank == 0)
            rc = c->be->open(&f, path, flags | SB_O_CREATE, &p->hints, fcomm, &c->err);
        MPI_Barrier(c->comm);
        if (c->rank != 0)
            rc = c->be->open(&f, path, flags, &p->hints, fcomm, &c->err);
    } else {
        rc = c->be->open(&f, path, flags | (write ? SB_O_CREATE : 0), &p->hints, fcomm,
                         &c->err);
    }
    const int opened = rc == SB_OK;
    t[1] = MPI_Wtime();
    for (int64_t s = 0; s < p->segments && (opened || lockstep); s++) {
        for (int64_t x = 0; x < nx; x++, k++) {
            if (lockstep) {
                int stop = rc != SB_OK || sb_interrupt, any = 0;
                MPI_Allreduce(&stop, &any, 1, MPI_INT, MPI_MAX, c->comm);
                if (any)
                    goto done;
            } else if (rc != SB_OK || sb_interrupt) {
                goto done;
            }
            int64_t off = offset_of(c, who, s, x);
            if (write) {
                sb_pattern_at(&c->wp, seed, off);
                rc = c->be->xfer(f, 1, c->wp.w, p->xfer, off, &c->err);
            } else {
                /* the other buffer may be under check meanwhile */
                char *buf = c->R[k & 1];
                rc = c->be->xfer(f, 0, buf, p->xfer, off, &c->err);
                if (rc == SB_OK) {
                    double t0 = MPI_Wtime();
                    if (sb_checker_submit(c->chk, buf, path, off, seed))
                        rc = SB_EDATA;
                    wait += MPI_Wtime() - t0;
                }
            }
            if (rc == SB_OK)
                moved += p->xfer;
        }
    }
done:
    if (!write && c->chk) { /* the last transfer's check belongs to the phase */
        double t0 = MPI_Wtime();
        if (sb_checker_submit(c->chk, NULL, NULL, 0, 0) && rc == SB_OK)
            rc = SB_EDATA;
        wait += MPI_Wtime() - t0;
        if (c->chk->failed && c->err.call[0] == '\0') /* the thread is idle now */
            c->err = c->chk->err;
        checked = c->chk->seconds - checked;
    }
    /* MPI_File_sync and _close on a shared file are collective: every rank calls them */
    if (write && p->fsync && opened && (rc == SB_OK || fcomm != MPI_COMM_SELF)) {
        int r = c->be->fsync(f, &c->err);
        rc = rc ? rc : r;
    }
    t[2] = MPI_Wtime();
    if (opened) {
        int r = c->be->close(f, &c->err);
        rc = rc ? rc : r;
    }
    t[3] = MPI_Wtime();
    if (rc == SB_OK && sb_interrupt) {
        char text[128];
        snprintf(text, sizeof text, "after %lld of %lld bytes", (long long)moved,
                 (long long)(p->segments * p->block));
        rc = sb_fail(&c->err, SB_EINTR, "signal", path, -1, sb_interrupt, text);
    }
    rc = agree(c, rc);
    if (rc != SB_OK)
        return rc;

    /* IOR: the earliest start and the latest end of each of open, transfers, close */
    double mn[3] = {t[0], t[1], t[2]}, mx[5] = {t[1], t[2], t[3], checked, wait}, lo[3], hi[5];
    MPI_Allreduce(mn, lo, 3, MPI_DOUBLE, MPI_MIN, c->comm);
    MPI_Allreduce(mx, hi, 5, MPI_DOUBLE, MPI_MAX, c->comm);
    MPI_Allreduce(&moved, &ph->bytes, 1, MPI_INT64_T, MPI_SUM, c->comm);
    ph->op = op;
    ph->open_s = hi[0] - lo[0];
    ph->transfer_s = hi[1] - lo[1];
    ph->close_s = hi[2] - lo[2];
    ph->total_s = hi[2] - lo[0];
    ph->check_s = write ? 0 : hi[3];
    ph->check_wait_s = write ? 0 : hi[4];
    return SB_OK;
}

/* ---- before a read phase ------------------------------------------------------------------- */

/* A read-only run: the file this rank reads must be there with the layout's size; its
 * first word names the writer and the iteration (the seed). */
static int find_seed(ctx *c, uint64_t *seed)
{
    const sb_params *p = c->p;
    int64_t size = 0, want = p->segments * p->block * (p->file_per_process ? 1 : c->nranks);
    int rc = c->be->size(c->theirs, &size, &c->err);
    if (rc == SB_OK && size != want) {
        char text[256];
        snprintf(text, sizeof text, "holds %lld bytes, but this layout reads %lld",
                 (long long)size, (long long)want);
        rc = sb_fail(&c->err, SB_ELAYOUT, "layout", c->theirs, -1, 0, text);
    }
    if ((rc = agree(c, rc)) != SB_OK)
        return rc;

    const int together = !p->file_per_process && (c->be->caps & SB_CAP_COLLECTIVE_OPEN);
    MPI_Comm fcomm = together ? c->comm : MPI_COMM_SELF;
    sb_hints one = p->hints; /* one transfer of each rank's own: independent */
    one.collective = 0;
    sb_handle *f = NULL;
    int64_t off = offset_of(c, c->writer, 0, 0);
    rc = c->be->open(&f, c->theirs, 0, &one, fcomm, &c->err);
    if (rc == SB_OK) {
        int r = c->be->xfer(f, 0, c->R[0], p->xfer, off, &c->err);
        int r2 = c->be->close(f, &c->err);
        rc = r ? r : r2;
    }
    if (rc == SB_OK) {
        uint64_t s = *(const uint64_t *)c->R[0] ^ sb_offset_term((uint64_t)off);
        int writer = (int)((s >> 24) & 0xFFFFFF);
        char text[256];
        if (s >> 48 != MAGIC) {
            snprintf(text, sizeof text, "0x%016llx is not this kernel's data pattern",
                     (unsigned long long)*(const uint64_t *)c->R[0]);
            rc = sb_fail(&c->err, SB_EDATA, "check", c->theirs, off, 0, text);
        } else if (writer != c->writer) {
            snprintf(text, sizeof text, "holds the data of rank %d where this layout expects "
                     "rank %d's", writer, c->writer);
            rc = sb_fail(&c->err, SB_ELAYOUT, "layout", c->theirs, off, 0, text);
        }
        *seed = s;
    }
    return agree(c, rc);
}

/* Flush, drop and measure the page cache over the ranges this rank is about to read. */
static int prepare_read(ctx *c, sb_phase *ph)
{
    const sb_params *p = c->p;
    ph->drop = SB_DROP_NONE;
    ph->resident = -1;
    /* direct: nothing to drop; no local cache (gfarm): not from here */
    if (p->hints.direct || !(c->be->caps & SB_CAP_LOCAL_CACHE))
        return SB_OK;
    int rc = agree(c, flush(c, c->theirs));
    if (rc != SB_OK)
        return rc;
    drop(c, c->theirs);
    if (p->drop == SB_DROP_CACHES && (rc = agree(c, drop_caches(c))) != SB_OK)
        return rc;
    MPI_Barrier(c->comm); /* no rank maps the file (mincore) while another drops it */
    ph->drop = p->drop == SB_DROP_CACHES ? SB_DROP_CACHES : SB_DROP_FADVISE;
    double r = resident_fraction(c, c->theirs);
    MPI_Allreduce(&r, &ph->resident, 1, MPI_DOUBLE, MPI_MAX, c->comm);
    return SB_OK;
}

/* ---- the run ------------------------------------------------------------------------------- */

static void release(ctx *c, void **buf)
{
    if (c->chk)
        sb_checker_stop(c->chk);
    MPI_Comm_free(&c->node);
    for (int i = 0; i < 4; i++)
        free(buf[i]);
}

static int check_params(const sb_params *p)
{
    if (sb_backend_find(p->api) == NULL || p->dir == NULL || p->name == NULL || p->xfer <= 0 ||
        p->xfer % 8 != 0 || p->xfer > INT_MAX || p->block < p->xfer || p->block % p->xfer != 0 ||
        p->segments < 1 || p->iterations < 1 || p->iterations > 0xFFFFFF ||
        !(p->write || p->read) || p->align < 8 || (p->align & (p->align - 1)) != 0 ||
        strlen(p->dir) + strlen(p->name) + 16 > PATH_MAX)
        return SB_EINVAL;
    return SB_OK;
}

int sb_run(MPI_Comm comm, const sb_params *p, sb_phase *out, int max_out, int *nout,
           sb_info *info, sb_error *err)
{
    ctx c;
    memset(&c, 0, sizeof c);
    memset(err, 0, sizeof *err);
    *nout = 0;
    c.comm = comm;
    c.p = p;
    MPI_Comm_rank(comm, &c.rank);
    MPI_Comm_size(comm, &c.nranks);
    c.err.offset = -1;
    int rc = check_params(p);
    if (rc == SB_OK && max_out < (p->write + p->read) * p->iterations)
        rc = SB_EINVAL;
    if ((rc = agree(&c, rc)) != SB_OK)
        return *err = c.err, rc;
    c.be = sb_backend_find(p->api);

    /* ranks per node (IOR's CountTasksPerNode), and whose data each rank reads (-C) */
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c.node);
    int on_node, leader;
    MPI_Comm_rank(c.node, &c.node_rank);
    MPI_Comm_size(c.node, &on_node);
    leader = c.node_rank == 0;
    MPI_Allreduce(&on_node, &c.info.ranks_per_node, 1, MPI_INT, MPI_MAX, comm);
    MPI_Allreduce(&leader, &c.info.nodes, 1, MPI_INT, MPI_SUM, comm);
    c.info.shift = p->reorder ? c.info.ranks_per_node % c.nranks : 0;
    c.writer = (c.rank + c.info.shift) % c.nranks;
    *info = c.info;
    file_path(&c, c.mine, c.rank);
    file_path(&c, c.theirs, c.writer);

    /* aligned for O_DIRECT: posix_memalign to the file system's alignment, a page at least */
    size_t align = p->align > PAGE ? p->align : PAGE;
    void *buf[4] = {NULL, NULL, NULL, NULL}; /* written pattern, 2 read buffers, expected */
    for (int i = 0; i < 4 && rc == SB_OK; i++)
        if (posix_memalign(&buf[i], align, (size_t)p->xfer) != 0)
            rc = sb_fail(&c.err, SB_ENOMEM, "allocate", "", -1, ENOMEM, NULL);
    c.wp = (sb_pattern){buf[0], p->xfer / 8, 0, -1};
    c.R[0] = buf[1], c.R[1] = buf[2];
    sb_checker chk;
    if (rc == SB_OK && p->read) {
        if (sb_checker_start(&chk, buf[3], p->xfer / 8) != 0)
            rc = sb_fail(&c.err, SB_ENOMEM, "pthread_create", "", -1, EAGAIN, NULL);
        else
            c.chk = &chk;
    }
    int inited = 0;
    if (rc == SB_OK && c.be->init) {
        rc = c.be->init(&c.err);
        inited = rc == SB_OK;
    } else if (rc == SB_OK) {
        inited = 1;
    }
    if ((rc = agree(&c, rc)) != SB_OK)
        goto fail;

    uint64_t seed = 0;
    for (int it = 0; it < p->iterations; it++) {
        c.cur_it = it;
        if (p->write) {
            sb_phase *ph = &out[(*nout)];
            c.cur_op = SB_WRITE;
            memset(ph, 0, sizeof *ph);
            /* IOR removes a stale file before the barrier of the write phase */
            if ((rc = agree(&c, remove_files(&c, &c.err))) != SB_OK)
                goto fail;
            if ((rc = timed_phase(&c, SB_WRITE, sb_seed_of(c.rank, it), ph)) != SB_OK)
                goto fail;
            ph->iteration = it;
            ph->resident = -1;
            (*nout)++;
        }
        if (p->read) {
            sb_phase *ph = &out[(*nout)];
            c.cur_op = SB_READ;
            memset(ph, 0, sizeof *ph);
            if (p->write)
                seed = sb_seed_of(c.writer, it);
            else if (it == 0 && (rc = find_seed(&c, &seed)) != SB_OK)
                goto fail;
            if ((rc = prepare_read(&c, ph)) != SB_OK)
                goto fail;
            double resident = ph->resident;
            int drop = ph->drop;
            if ((rc = timed_phase(&c, SB_READ, seed, ph)) != SB_OK)
                goto fail;
            ph->iteration = it;
            ph->resident = resident;
            ph->drop = drop;
            (*nout)++;
        }
    }
    if (!p->keep) /* IOR without -k: the files go, a read-only run's too */
        rc = agree(&c, remove_files(&c, &c.err));
    else
        MPI_Barrier(comm);
    if (rc != SB_OK)
        goto fail;
    if (c.be->fini)
        c.be->fini();
    release(&c, buf);
    return SB_OK;

fail:
    /* what this run wrote goes, unless kept; wrong data stays, to be looked at */
    if (c.created && !p->keep && rc != SB_EDATA) {
        sb_error ignored;
        memset(&ignored, 0, sizeof ignored);
        remove_files(&c, &ignored);
        MPI_Barrier(comm);
    }
    if (inited && c.be->fini)
        c.be->fini();
    release(&c, buf);
    *err = c.err;
    *nout = 0;
    return rc;
}

int sb_statfs(const char *path, int64_t *magic, int64_t *bsize)
{
    struct statfs st;
    if (statfs(path, &st) != 0)
        return errno;
    *magic = (int64_t)(unsigned long)st.f_type;
    *bsize = (int64_t)st.f_bsize;
    return 0;
}

int sb_check_dir(const char *api, const char *dir, char *msg, size_t len)
{
    const sb_backend *be = sb_backend_find(api);
    if (be == NULL) {
        snprintf(msg, len, "this build has no %s interface", api);
        return -2;
    }
    return be->check ? be->check(dir, msg, len) : 0;
}
