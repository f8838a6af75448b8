"""Where the storage kernel writes, checked before a byte is written: a folder (its file
system from statfs and the mount table, writable, O_DIRECT taken or refused by trying it)
or a Gfarm path (its metadata server answering, asked directly so that a server that is
down is one line in seconds, not libgfarm's minute of retries)."""

from __future__ import annotations

import argparse
import errno
import mmap
import os
import re
import socket
from pathlib import Path

from kernels_ext.common.errors import BadInput
from kernels_ext.common.sysinfo import mount_of

DROP_CACHES = "/proc/sys/vm/drop_caches"
#: statfs f_type -> name (linux/magic.h and the file systems' own headers)
FS_MAGIC = {0xEF53: "ext4", 0x58465342: "xfs", 0x01021994: "tmpfs", 0x858458F6: "ramfs",
            0x65735546: "fuse", 0x6969: "nfs", 0x0BD00BD0: "lustre", 0x794C7630: "overlay",
            0x9123683E: "btrfs", 0x2FC12FC1: "zfs", 0x47504653: "gpfs", 0x19830326: "beegfs",
            0x00C36400: "ceph", 0xFF534D42: "cifs", 0xFE534D42: "smb2", 0x73717368: "squashfs",
            0x4D44: "vfat", 0x5346544E: "ntfs", 0xF15F: "ecryptfs"}


#: file systems whose files live in memory: O_DIRECT cannot bypass a cache there
MEMORY_FS = ("tmpfs", "ramfs")


#: file systems served by other machines, whose page cache a client cannot drop
REMOTE_FS = ("fuse", "nfs", "lustre", "gpfs", "beegfs", "ceph", "cifs", "smb2", "gfarm")


#: IOR's -C reads another node's data; a drop on this node cannot reach a server's cache
SERVER_NOTE = "the file servers' page cache may still hold the data (a client cannot drop it)"


GFARM_NOTE = "Gfarm: the I/O servers' page cache cannot be dropped from a client"


GFARM_PORT = 601  # Gfarm's default metadata server port


PROBE_TIMEOUT_S = 5.0  # a metadata server that does not answer in this time is down


def fs_name(magic: int, mount_type: str) -> str:
    """A file system's name from statfs's f_type, refined by the mount table: ``ext4`` (ext2,
    3 and 4 share one magic), ``fuse.gfarm2fs`` (FUSE's subtype)."""
    name = FS_MAGIC.get(magic, "")
    if name == "ext4" and mount_type.startswith("ext"):
        return mount_type
    if name == "fuse":
        return mount_type if mount_type.startswith("fuse") else "fuse"
    return name or mount_type or f"0x{magic:x}"


def is_remote(fs: str) -> bool:
    """Whether another machine serves the file system (its page cache is out of reach)."""
    return fs.split(".")[0] in REMOTE_FS or fs.startswith("nfs")


def _probe_direct(folder: str, align: int) -> int:
    """0 when a file in `folder` takes an O_DIRECT open and an aligned write, else the errno
    (EINVAL: the file system refuses O_DIRECT).  The probe file is removed."""
    probe = os.path.join(folder, f".storage-direct-probe-{os.getpid()}")
    buf = mmap.mmap(-1, max(align, mmap.PAGESIZE))  # page-aligned, as O_DIRECT wants
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o600)
        try:
            os.write(fd, buf)
        finally:
            os.close(fd)
        return 0
    except OSError as exc:
        return exc.errno or errno.EIO
    finally:
        buf.close()
        try:
            os.unlink(probe)
        except OSError:
            pass


def refuses_direct(path: str, fs: str) -> str:
    """The message for --direct on a file system that refuses O_DIRECT (EINVAL at open or at
    a transfer), or keeps its files in memory (tmpfs takes the flag since Linux 6.6, and
    copies memory: a "direct" read there would be a cached one under another name)."""
    if fs in MEMORY_FS:
        return (f"{path} ({fs}) refuses O_DIRECT: its files are in memory, so direct I/O "
                "cannot bypass a cache there; run without --direct (reads are then from "
                "memory, and the record says so)")
    return (f"{path} ({fs}) refuses O_DIRECT: run without --direct (reads then drop the page "
            "cache with posix_fadvise)")


def _check_writable(folder: str, fs: str) -> None:
    """BadInput when no file can be created in `folder` (read-only, permissions), told by
    creating and removing one: access() cannot say why."""
    probe = os.path.join(folder, f".storage-probe-{os.getpid()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as exc:
        if exc.errno == errno.EROFS:
            raise BadInput(f"--path {folder} ({fs}) is read-only") from None
        raise BadInput(f"--path {folder} ({fs}) is not writable: {exc.strerror}") from None


def check_posix_target(args: argparse.Namespace, module, write: bool, xfer: int,
                       probe: bool) -> tuple[str, int, int]:
    """(file system name, statfs magic, direct I/O alignment) of --path; BadInput when it
    cannot be used: missing, not a folder, not writable (for writes), or --direct where the
    file system refuses O_DIRECT or keeps files in memory, or with unaligned transfers.
    `probe`: write probe files (one rank does)."""
    path = args.path
    if path.startswith("gfarm:"):
        raise BadInput(f"--path {path} is a Gfarm URL: use --api gfarm (or --api posix on a "
                       "gfarm2fs mount)")
    if not os.path.exists(path):
        raise BadInput(f"--path {path} does not exist")
    if not os.path.isdir(path):
        raise BadInput(f"--path {path} is not a folder")
    magic, bsize = module.statfs(path)
    fs = fs_name(magic, mount_of(path).get("fs_type", ""))
    # O_DIRECT wants offsets, lengths and buffers aligned to the logical block size: the file
    # system's block size covers it (4 KiB at most: a page, whatever f_bsize says on Lustre)
    align = min(max(int(bsize), 512), 4096)
    if write and probe:
        _check_writable(path, fs)
    if args.direct:
        if xfer % align:
            raise BadInput(f"--direct needs --transfer-size in multiples of {align} bytes, the "
                           f"block size of {path} ({fs}): {xfer} is not")
        if probe:
            err = _probe_direct(path, align)
            if err == errno.EINVAL:
                raise BadInput(refuses_direct(path, fs))
            if err and write:
                raise BadInput(f"--path {path} ({fs}): an O_DIRECT probe failed: "
                               f"{os.strerror(err)}")
        if fs in MEMORY_FS:
            raise BadInput(refuses_direct(path, fs))
    if args.drop_caches and probe:
        try:
            os.close(os.open(DROP_CACHES, os.O_WRONLY))
        except OSError as exc:
            raise BadInput(f"--drop-caches needs root: {DROP_CACHES} is not writable "
                           f"({exc.strerror})") from None
    return fs, magic, align


def gfarm_servers(url: str, environ: dict[str, str] | None = None) -> list[tuple[str, int]]:
    """The metadata servers (host, port) a Gfarm client would ask for `url`: the URL's own
    ``gfarm://host:port/``, else the client configuration ($GFARM_CONFIG_FILE or
    /etc/gfarm2.conf, then ~/.gfarm2rc): metadb_server_list, or _host and _port."""
    env = os.environ if environ is None else environ
    m = re.match(r"gfarm://([^/:]+)(?::(\d+))?/", url)
    if m:
        return [(m.group(1), int(m.group(2) or GFARM_PORT))]
    host, port, listed = None, GFARM_PORT, []
    for conf in (env.get("GFARM_CONFIG_FILE") or "/etc/gfarm2.conf",
                 os.path.expanduser("~/.gfarm2rc")):
        try:
            lines = Path(conf).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            words = line.split("#", 1)[0].split()
            if len(words) < 2:
                continue
            if words[0] == "metadb_server_host":
                host = words[1]
            elif words[0] == "metadb_server_port" and words[1].isdigit():
                port = int(words[1])
            elif words[0] == "metadb_server_list":
                listed = [(h, int(p or GFARM_PORT)) for h, _, p in
                          (w.partition(":") for w in words[1:])]
    return listed or ([(host, port)] if host else [])


def check_gfarm_target(url: str, module, timeout: float = PROBE_TIMEOUT_S) -> None:
    """BadInput, within about `timeout` seconds, when the Gfarm folder `url` cannot be used:
    no Gfarm interface built, not a gfarm:/// URL, the metadata server silent (libgfarm
    itself would retry it for a minute), or the folder missing."""
    if "gfarm" not in module.backends():
        raise BadInput("--api gfarm: this build has no Gfarm interface (pkg-config did not "
                       "find libgfarm when kernels_ext was built: install libgfarm-dev, then "
                       "reinstall)")
    if not url.startswith("gfarm://"):
        raise BadInput(f"--api gfarm needs --path gfarm:///folder, not {url}")
    servers = gfarm_servers(url)
    silent = []
    for host, port in servers:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            break
        except OSError as exc:
            silent.append(f"{host}:{port} ({exc.strerror or exc})")
    else:
        if len(silent) == 1:
            where, why = silent[0].split(" ", 1)
            raise BadInput(f"Gfarm metadata server {where} does not answer {why}: cannot reach "
                           f"{url}")
        if silent:
            raise BadInput(f"no Gfarm metadata server answers ({', '.join(silent)}): cannot "
                           f"reach {url}")
    why = module.check_dir("gfarm", url)
    if why:
        raise BadInput(f"--path {url}: {why}")
