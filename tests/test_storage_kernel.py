"""Storage kernel (IOR's method): real runs through mpiexec on real file systems, numbers
against their definitions, every byte read checked, one clear line for every bad input and
every fault (a full or read-only file system, a signal, a Gfarm server lost), nothing left
behind.

Mounts (a 16 MiB tmpfs, ramfs) need root: those tests skip, saying why, where mount is
refused.  Gfarm tests use tests/gfarm_cluster.py: the session's file system, or one of their
own where they stop a daemon.
"""

from __future__ import annotations

import errno
import functools
import json
import mmap
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import gfarm_cluster
import pytest
from gfarm_cluster import gfarm  # noqa: F401  (the session's Gfarm, a fixture)

from kernels_ext import storage as ks
from kernels_ext.common.sysinfo import mount_of
from kernels_ext.storage import targets as kt

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
MARKER = "BURSTBENCH_TEST_MARKER"
MIB = 1 << 20
pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(not os.access(MPIEXEC, os.X_OK),
                                 reason="no mpiexec in the environment (pip install mpich)")]


def launch(*args: str, n: int = 1, env: dict | None = None, **kw) -> subprocess.Popen:
    """`mpiexec -n n python -m kernels_ext.storage args`, its processes tagged with MARKER."""
    return subprocess.Popen([MPIEXEC, "-n", str(n), sys.executable, "-m", "kernels_ext.storage",
                             *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=os.environ | (env or {}), **kw)


def storage(*args: str, n: int = 1, env: dict | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the kernel to its end; the completed process."""
    tag = {MARKER: uuid.uuid4().hex}
    proc = launch(*args, n=n, env=(env or {}) | tag)
    out, err = proc.communicate(timeout=timeout)
    assert not survivors(tag[MARKER]), "a rank outlived mpiexec"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def survivors(tag: str) -> list[int]:
    """Live processes whose environment carries MARKER=tag."""
    needle, found = f"{MARKER}={tag}".encode(), []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and needle in (d / "environ").read_bytes().split(b"\0"):
                if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(d.name))
        except OSError:
            continue
    return found


def records(proc: subprocess.CompletedProcess) -> list[dict]:
    assert proc.returncode == 0, proc.stderr
    assert not error_lines(proc), proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]


def one_error(proc: subprocess.CompletedProcess, code: int) -> str:
    """The single error line of a run that failed with `code` and printed no record."""
    assert proc.returncode == code, proc.stderr
    lines = error_lines(proc)
    assert len(lines) == 1, proc.stderr
    assert proc.stdout == ""  # no bandwidth for a failed run
    return lines[0]


def fs_of(path: Path) -> str:
    return mount_of(str(path)).get("fs_type", "")


def direct_problem(folder: Path) -> str:
    """'' when O_DIRECT writes work in `folder`, else why not."""
    buf = mmap.mmap(-1, 4096)
    probe = folder / ".odirect"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
        try:
            os.write(fd, buf)
        finally:
            os.close(fd)
        return ""
    except OSError as exc:
        return f"{folder} ({fs_of(folder)}) refuses O_DIRECT: {exc.strerror}"
    finally:
        probe.unlink(missing_ok=True)


@contextmanager
def mounted(folder: Path, fstype: str, options: str = "") -> Iterator[Path]:
    """`folder` with a fresh `fstype` mounted on it, unmounted afterwards whatever happens;
    skip, saying why, where mounting is refused."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = ["mount", "-t", fstype] + (["-o", options] if options else []) + [fstype, str(folder)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount {fstype} here ({(proc.stderr or proc.stdout).strip()})")
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


SMALL = ["--transfer-size", "64K", "--block-size", "256K", "--segments", "3"]


# ---- numbers and layouts -----------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("access", ["file-per-process", "shared-file"])
@pytest.mark.parametrize("api", ["posix", "mpiio", "mpiio-collective"])
def test_write_then_read_every_layout(tmp_path, api, access, n):
    """Write and read with --keep: IOR's numbers by their definitions, every byte checked, the
    files as the layout says; then a read-only run reads them, checks them and removes them."""
    fpp = access == "file-per-process"
    opts = ["--api", api.split("-")[0], "--path", str(tmp_path), *SMALL,
            *(["--collective"] if api.endswith("collective") else []),
            *(["--file-per-process"] if fpp else [])]
    recs = records(storage(*opts, "--fsync", "--keep", n=n))
    assert [r["operation"] for r in recs] == ["write", "read"]
    block, segments = 256 * 1024, 3
    for r in recs:
        assert r["bytes"] == n * segments * block
        assert r["bandwidth_mib_s"] == pytest.approx(r["bytes"] / r["total_s"] / MIB, rel=1e-9)
        assert r["bandwidth_gbs"] == pytest.approx(r["bytes"] / r["total_s"] / 1e9, rel=1e-9)
        assert 0 < r["transfer_s"] <= r["total_s"]
        assert 0 <= r["open_s"] <= r["total_s"] and 0 <= r["close_s"] <= r["total_s"]
        assert (r["api"], r["access"], r["ranks"], r["nodes"]) == (api.split("-")[0], access,
                                                                   n, 1)
        assert (r["transfer_size"], r["block_size"], r["segments"]) == (65536, block, segments)
        assert r["fs_type"] == fs_of(tmp_path) and r["path"] == str(tmp_path)
        assert r["collective"] is api.endswith("collective")
    write, read = recs
    assert write["fsync"] is True and write["validated"] is None and write["cache"] is None
    assert read["validated"] is True and read["fsync"] is False
    assert read["cache"] == "dropped (posix_fadvise)" and read["resident_before_read"] == 0
    assert 0 <= read["check_wait_s"] <= read["transfer_s"]
    names = sorted(p.name for p in tmp_path.iterdir())
    if fpp:
        assert names == [f"storage.dat.{r:08d}" for r in range(n)]
        assert all((tmp_path / f).stat().st_size == segments * block for f in names)
    else:
        assert names == ["storage.dat"]
        assert (tmp_path / "storage.dat").stat().st_size == n * segments * block
    again = records(storage(*opts, "--operations", "read", n=n))
    assert [(r["operation"], r["validated"], r["bytes"]) for r in again] == [
        ("read", True, n * segments * block)]
    assert list(tmp_path.iterdir()) == []  # no --keep: IOR removes them, a read-only run too


def test_iterations_reorder_and_nothing_left(tmp_path):
    """Two iterations of write and read, IOR -C on one node (the shift wraps to 0), no
    --keep: four records, and the folder empty afterwards."""
    recs = records(storage("--path", str(tmp_path), *SMALL, "--iterations", "2", "--reorder",
                           n=2))
    assert [(r["operation"], r["iteration"]) for r in recs] == [
        ("write", 0), ("read", 0), ("write", 1), ("read", 1)]
    assert all(r["reader_shift"] == 0 and r["ranks_per_node"] == 2 for r in recs[1::2])
    assert list(tmp_path.iterdir()) == []


def resident_share(path: Path) -> float:
    """The share of `path`'s pages in the page cache, by mincore(2) on a mapping of it (a
    mapping faults nothing in: for a file, mincore reports the page cache)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = (ctypes.c_ubyte * pages)()
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), size) as mm:
        view = (ctypes.c_char * size).from_buffer(mm)
        try:
            rc = libc.mincore(ctypes.c_void_p(ctypes.addressof(view)), ctypes.c_size_t(size),
                              vec)
        finally:
            del view
    assert rc == 0, os.strerror(ctypes.get_errno())
    return sum(v & 1 for v in vec) / pages


def test_posix_fadvise_empties_the_page_cache(tmp_path):
    """What the read records rely on, checked here: after fsync + POSIX_FADV_DONTNEED the
    pages of a file just written and read are out of the page cache, so a buffered read of
    it comes from the disk.  Asked of the kernel (mincore), not timed: a read from the cache
    and one from this VM's disk, itself cached by its host, timed 0.09 s and 0.14 s on a
    busy run."""
    path, size = tmp_path / "f", 128 * MIB
    path.write_bytes(os.urandom(MIB) * (size // MIB))
    with open(path, "rb") as f:
        while f.read(8 * MIB):
            pass
    assert resident_share(path) > 0.9
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    assert resident_share(path) < 0.05


def test_drop_caches_where_permitted(tmp_path):
    try:
        os.close(os.open(kt.DROP_CACHES, os.O_WRONLY))
    except OSError as exc:
        proc = storage("--path", str(tmp_path), *SMALL, "--drop-caches")
        assert one_error(proc, 2) == (f"error: --drop-caches needs root: {kt.DROP_CACHES} is "
                                      f"not writable ({exc.strerror})")
        return
    read = records(storage("--path", str(tmp_path), *SMALL, "--drop-caches"))[1]
    assert read["cache"] == "dropped (drop_caches)" and read["resident_before_read"] == 0


@functools.cache
def info() -> dict:
    """The storage kernel's --info: the interfaces built into it."""
    proc = subprocess.run([sys.executable, "-m", "kernels_ext.storage", "--info"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_info_names_the_interfaces_built():
    assert info()["backends"][:2] == ["posix", "mpiio"]
    assert ("gfarm" in info()["backends"]) is info()["optional"]["gfarm"]


# ---- wrong data --------------------------------------------------------------------------

@pytest.mark.parametrize("fpp", [False, True])
def test_a_flipped_byte_is_found(tmp_path, fpp):
    """A byte changed behind the kernel's back: the read-only run fails with exit status 3,
    names the file and the offset, prints no bandwidth, and keeps the files."""
    opts = ["--path", str(tmp_path), *SMALL, *(["--file-per-process"] if fpp else [])]
    records(storage(*opts, "--operations", "write", "--keep", n=2))
    victim = tmp_path / ("storage.dat.00000001" if fpp else "storage.dat")
    offset = 2 * 256 * 1024 + 12345  # rank 1's data either way
    with open(victim, "r+b") as f:
        f.seek(offset)
        old = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([old ^ 0x40]))
    line = one_error(storage(*opts, "--operations", "read", n=2), 3)
    assert line.startswith(f"error: data check failed: {victim} at offset {offset}: read byte "
                           f"0x{old ^ 0x40:02x} where rank ")
    assert line.endswith(f"wrote 0x{old:02x} in iteration 0; the files are kept")
    assert victim.exists()


# ---- direct I/O --------------------------------------------------------------------------

def test_direct_io_on_tmp(tmp_path):
    why = direct_problem(tmp_path)
    if why:
        pytest.skip(why)
    recs = records(storage("--path", str(tmp_path), "--direct", "--fsync", *SMALL, n=2))
    assert [(r["direct"], r["cache"]) for r in recs] == [(True, None), (True, "direct")]
    assert recs[1]["validated"] and recs[1]["resident_before_read"] is None


def test_direct_is_refused_in_memory(tmp_path):
    """/dev/shm is tmpfs: O_DIRECT cannot bypass a cache there (Linux 6.6+ accepts the flag
    and copies memory), so --direct is refused; buffered reads say they came from memory."""
    shm = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="storage-test-"))
    try:
        (shm / "keep.txt").write_text("intact")
        proc = storage("--path", str(shm), "--direct", *SMALL)
        assert one_error(proc, 2) == (
            f"error: {shm} (tmpfs) refuses O_DIRECT: its files are in memory, so direct I/O "
            "cannot bypass a cache there; run without --direct (reads are then from memory, "
            "and the record says so)")
        assert sorted(p.name for p in shm.iterdir()) == ["keep.txt"]
        read = records(storage("--path", str(shm), *SMALL))[1]
        assert read["cache"] == "in memory (tmpfs)" and read["fs_type"] == "tmpfs"
    finally:
        shutil.rmtree(shm)


def test_a_file_system_that_refuses_o_direct(tmp_path):
    with mounted(tmp_path / "ram", "ramfs") as ram:
        proc = storage("--path", str(ram), "--direct", *SMALL)
        assert one_error(proc, 2) == (
            f"error: {ram} (ramfs) refuses O_DIRECT: its files are in memory, so direct I/O "
            "cannot bypass a cache there; run without --direct (reads are then from memory, "
            "and the record says so)")
        assert list(ram.iterdir()) == []


# ---- bad input ---------------------------------------------------------------------------

BAD = [
    (["--path", "{missing}"], "--path {missing} does not exist"),
    (["--path", "{file}"], "--path {file} is not a folder"),
    (["-t", "3M", "-b", "8M"], "--transfer-size 3145728 does not divide --block-size 8388608"),
    (["-t", "1001", "-b", "8008"], "--transfer-size 1001 is not a multiple of 8 bytes (the "
                                   "data are checked in 64-bit words)"),
    (["-t", "1X"], "--transfer-size '1X' is not a size in bytes (e.g. 1M, 256K, 4096)"),
    (["-t", "4G", "-b", "4G"], "--transfer-size 4294967296 is above 2147483647 bytes (MPI-IO "
                               "and libgfarm count a transfer in an int)"),
    (["--direct", "-t", "1000", "-b", "8000"], "--direct needs --transfer-size in multiples of "
                                               "{align} bytes, the block size of {dir} ({fs}): "
                                               "1000 is not"),
    (["--collective"], "--collective needs --api mpiio (MPI_File_write_at_all, read_at_all)"),
    (["--api", "mpiio", "--direct"], "--direct needs --api posix: MPI-IO (ROMIO) opens files "
                                     "without O_DIRECT here"),
    (["--api", "gfarm", "--direct"], "--direct needs --api posix: libgfarm has no direct I/O "
                                     "(use --api posix on a gfarm2fs mount)"),
    (["--api", "gfarm"], "--api gfarm needs --path gfarm:///folder, not {dir}"),
    (["--path", "gfarm:///x"], "--path gfarm:///x is a Gfarm URL: use --api gfarm (or --api "
                               "posix on a gfarm2fs mount)"),
    (["--operations", "write,erase"], "--operations takes write, read or write,read, not "
                                      "'write,erase'"),
    (["--segments", "0"], "--segments must be at least 1, not 0"),
    (["--name", "a/b"], "--name 'a/b' must be a file name, without '/'"),
    (["--direct", "--drop-caches"], "--drop-caches is for buffered reads: --direct reads "
                                    "bypass the page cache already"),
    (["--operations", "read", "-F"], "{dir}/other.00000000 does not exist: a read-only run "
                                     "(--operations read) reads the files an earlier run wrote "
                                     "with --keep and the same layout"),
    (["--operations", "read"], "{dir}/other holds 8 bytes, but this layout reads 1572864: read "
                               "files written with the same --block-size, --segments, "
                               "--file-per-process and ranks (and --keep)"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[m[:40] for _, m in BAD])
def test_bad_input_is_one_line_and_status_2(tmp_path, args, message):
    """Refused before any data moves, by every rank alike, printed once; files intact.  A
    kernel built without libgfarm refuses --api gfarm as not built before it looks at the
    path."""
    built = info()["backends"]
    if message.startswith("--api gfarm needs") and "gfarm" not in built:
        message = f"--api gfarm: not built into this kernel (built: {', '.join(built)})"
    folder = tmp_path / "target"
    folder.mkdir()
    (folder / "other").write_bytes(b"12345678")
    (tmp_path / "file").write_text("x")
    sub = {"missing": str(tmp_path / "missing"), "file": str(tmp_path / "file"),
           "dir": str(folder), "fs": fs_of(folder),
           "align": str(min(max(os.statvfs(folder).f_bsize, 512), 4096))}
    argv = ["--path", str(folder), "--name", "other", *SMALL,
            *[a.format(**sub) for a in args]]
    proc = storage(*argv, n=2)
    assert one_error(proc, 2) == "error: " + message.format(**sub)
    assert sorted(p.name for p in folder.iterdir()) == ["other"]
    assert (folder / "other").read_bytes() == b"12345678"


# ---- faults ------------------------------------------------------------------------------

FULL = re.compile(r"error: no space left on (?P<dir>\S+) \(tmpfs\): write (?P<file>\S+) at "
                  r"offset \d+: No space left on device; removed the files of this run")


@pytest.mark.parametrize("opts", [[], ["--file-per-process"], ["--api", "mpiio"],
                                  ["--api", "mpiio", "--collective"]],
                         ids=["posix", "posix-fpp", "mpiio", "mpiio-collective"])
def test_a_full_file_system(tmp_path, opts):
    with mounted(tmp_path / "full", "tmpfs", "size=16m") as full:
        proc = storage("--path", str(full), "-t", "1M", "-b", "16M", *opts, n=2)
        m = FULL.fullmatch(one_error(proc, 5))
        assert m and m["dir"] == str(full) and m["file"].startswith(f"{full}/storage.dat")
        assert list(full.iterdir()) == []


def test_a_read_only_file_system(tmp_path):
    """Writing is refused up front; reading kept files works; a read-only run that would
    remove them (no --keep) fails at the removal, one line, the files intact."""
    with mounted(tmp_path / "ro", "tmpfs", "size=16m") as ro:
        opts = ["--path", str(ro), *SMALL]
        records(storage(*opts, "--operations", "write", "--keep", n=2))
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        assert one_error(storage(*opts, n=2), 2) == f"error: --path {ro} (tmpfs) is read-only"
        read = records(storage(*opts, "--operations", "read", "--keep", n=2))
        assert read[0]["validated"] and read[0]["cache"] == "in memory (tmpfs)"
        line = one_error(storage(*opts, "--operations", "read", n=2), 5)
        assert line == (f"error: {ro} (tmpfs) is read-only: remove {ro}/storage.dat: Read-only "
                        "file system")
        assert (ro / "storage.dat").stat().st_size == 2 * 3 * 256 * 1024


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_in_the_middle_of_a_write(tmp_path, signum):
    """Direct 4 KiB writes of 1 GiB per rank take ~10 s here; the signal goes to mpiexec
    once both files have grown, so it always lands in the write phase.  The ranks stop
    between two transfers, remove the files and exit 128 + signal."""
    why = direct_problem(tmp_path)
    if why:
        pytest.skip(f"the slow, deterministic write needs O_DIRECT: {why}")
    tag = uuid.uuid4().hex
    proc = launch("--path", str(tmp_path), "--direct", "-t", "4K", "-b", "1G",
                  "--file-per-process", n=2, env={MARKER: tag})
    files = [tmp_path / f"storage.dat.{r:08d}" for r in range(2)]
    end = time.monotonic() + 60
    while not all(f.exists() and f.stat().st_size >= MIB for f in files):
        assert proc.poll() is None and time.monotonic() < end, proc.stderr
        time.sleep(0.01)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    # no record; mpiexec itself says it forwards Ctrl-C
    assert len(lines) == 1 and all(ln.startswith("[mpiexec@") for ln in out.splitlines()), err
    assert re.fullmatch(rf"error: stopped by {signal.Signals(signum).name} in the write phase "
                        r"of iteration 0 \(after \d+ of 1073741824 bytes\); removed the files "
                        r"of this run", lines[0])
    assert list(tmp_path.iterdir()) == [] and not survivors(tag)


# ---- Gfarm -------------------------------------------------------------------------------

def _gfarm_folder(cluster, name: str) -> str:
    cluster.run("gfmkdir", "-p", f"/{name}", check=True)
    return name


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("fpp", [False, True], ids=["shared", "fpp"])
@pytest.mark.parametrize("writer", ["gfarm", "posix"])
def test_gfarm_api_and_mount_see_the_same_bytes(gfarm, writer, fpp, n):  # noqa: F811
    """Written through one (libgfarm, or POSIX on the gfarm2fs mount) and kept, read and
    checked through the other; the reader then removes the files."""
    name = _gfarm_folder(gfarm, f"same-{writer}-{int(fpp)}-{n}")
    url, mount = f"gfarm:///{name}", str(gfarm.mount / name)
    common = [*SMALL, *(["--file-per-process"] if fpp else [])]
    first = ["--api", "gfarm", "--path", url] if writer == "gfarm" else ["--path", mount]
    second = ["--path", mount] if writer == "gfarm" else ["--api", "gfarm", "--path", url]
    w = records(storage(*first, *common, "--operations", "write", "--keep", n=n,
                        env=gfarm.env))[0]
    r = records(storage(*second, *common, "--operations", "read", n=n, env=gfarm.env))[0]
    assert w["bytes"] == r["bytes"] == n * 3 * 256 * 1024 and r["validated"] is True
    gf, px = (w, r) if writer == "gfarm" else (r, w)
    assert gf["fs_type"] == "gfarm" and px["fs_type"] == "fuse.gfarm2fs"
    if gf is r:
        assert (r["cache"], r["cache_note"]) == ("may be cached", kt.GFARM_NOTE)
    else:
        assert (r["cache"], r["cache_note"]) == ("dropped (posix_fadvise)", kt.SERVER_NOTE)
    assert gfarm.run("gfls", f"/{name}").stdout.strip() == ""


@pytest.fixture
def own_gfarm(tmp_path) -> Iterator[gfarm_cluster.GfarmCluster]:
    """A Gfarm of one I/O node and no mount, this test's own: it may lose a daemon."""
    why = gfarm_cluster.problem(mount=False)
    if why:
        pytest.skip(f"Gfarm cannot run here: {why}")
    try:
        cluster = gfarm_cluster.start(tmp_path / "gfarm", nodes=1, mount=False)
    except gfarm_cluster.GfarmUnavailable as exc:
        pytest.skip(f"the Gfarm file system did not start: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.gfarm
def test_gfarm_metadata_server_down(own_gfarm):
    _gfarm_folder(own_gfarm, "x")
    own_gfarm.stop_gfmd()
    t0 = time.monotonic()
    proc = storage("--api", "gfarm", "--path", "gfarm:///x", *SMALL, n=2, env=own_gfarm.env,
                   timeout=120)
    assert time.monotonic() - t0 < 45  # libgfarm alone retries for about a minute
    assert one_error(proc, 2) == (f"error: Gfarm metadata server localhost:"
                                  f"{own_gfarm.gfmd_port} does not answer (Connection "
                                  "refused): cannot reach gfarm:///x")


@pytest.mark.gfarm
@pytest.mark.parametrize("fpp", [False, True], ids=["shared", "fpp"])
def test_gfarm_io_server_killed_mid_write(own_gfarm, fpp):
    """The only gfsd is killed once its spool holds 32 MiB of a 4 GiB write: one line naming
    the file and what libgfarm said, every rank gone, the files removed (by gfmd)."""
    _gfarm_folder(own_gfarm, "k")
    tag = uuid.uuid4().hex
    proc = launch("--api", "gfarm", "--path", "gfarm:///k", "-t", "1M", "-b", "2G",
                  *(["--file-per-process"] if fpp else []), n=2,
                  env=own_gfarm.env | {MARKER: tag})
    spool, end = own_gfarm.folder / "spool" / "0", time.monotonic() + 60

    def spooled() -> int:
        return sum(f.stat().st_size for f in spool.rglob("*") if f.is_file())

    while spooled() < 32 * MIB:
        assert proc.poll() is None and time.monotonic() < end, proc.stderr
        time.sleep(0.01)
    own_gfarm.kill_gfsd(0)
    out, err = proc.communicate(timeout=60)
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 5 and len(lines) == 1 and out == "", err
    assert re.fullmatch(r"error: Gfarm: write gfarm:///k/storage\.dat(\.0000000[01])? at "
                        r"offset \d+: .+; removed the files of this run", lines[0])
    assert not survivors(tag)
    assert own_gfarm.run("gfls", "/k").stdout.strip() == ""


def test_gfarm_refused_where_the_build_has_no_gfarm():
    """A kernel built where pkg-config found no libgfarm (its backends() without gfarm)."""
    without = SimpleNamespace(backends=lambda: ["posix", "mpiio"])
    with pytest.raises(ks.BadInput) as exc:
        kt.check_gfarm_target("gfarm:///x", without)
    assert str(exc.value) == ("--api gfarm: this build has no Gfarm interface (pkg-config did "
                              "not find libgfarm when kernels_ext was built: install "
                              "libgfarm-dev, then reinstall)")


def test_an_unknown_interface_name_is_refused_naming_those_built():
    """The C driver finds an interface by name in its table: any other name, in run() or
    check_dir(), is one ValueError naming the name and the interfaces compiled in."""
    code = ("from kernels_ext.common.mpi import init_mpi, load_kernel\n"
            "MPI = init_mpi('funneled')\n"
            "m, _ = load_kernel(MPI, 'storage')\n"
            "print(', '.join(m.backends()))\n"
            "for call in (lambda: m.run(MPI.COMM_SELF, 'nfs', '/tmp', 'x', 8, 8, 1, 1),\n"
            "             lambda: m.check_dir('nfs', '/tmp')):\n"
            "    try:\n"
            "        call()\n"
            "    except ValueError as exc:\n"
            "        print(exc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    built, *errors = proc.stdout.splitlines()
    assert built in ("posix, mpiio", "posix, mpiio, gfarm")
    assert errors == [f"api 'nfs' is not built into this kernel (built: {built})"] * 2


def test_gfarm_servers_from_the_client_configuration(tmp_path):
    conf = tmp_path / "gfarm2.conf"
    conf.write_text("metadb_server_host md.example\nmetadb_server_port 10601\n")
    env = {"GFARM_CONFIG_FILE": str(conf), "HOME": str(tmp_path)}
    assert kt.gfarm_servers("gfarm:///a", env) == [("md.example", 10601)]
    assert kt.gfarm_servers("gfarm://other:700/a", env) == [("other", 700)]
    conf.write_text("metadb_server_list a:601 b:602  # two\n")
    assert kt.gfarm_servers("gfarm:///a", env) == [("a", 601), ("b", 602)]


def test_sizes_and_operations_parse():
    assert ks.parse_size("1M", "t") == MIB and ks.parse_size("256K", "t") == 262144
    assert ks.parse_size("4096", "t") == 4096 and ks.parse_size("2GiB", "t") == 2 << 30
    assert ks.parse_operations("read") == (False, True)
    assert ks.parse_operations("write, read") == (True, True)
    assert kt.fs_name(0xEF53, "ext4") == "ext4" and kt.fs_name(0x65735546, "fuse.gfarm2fs") == (
        "fuse.gfarm2fs")
    assert kt.fs_name(0x01021994, "tmpfs") == "tmpfs" and kt.fs_name(0x1234, "") == "0x1234"
    assert errno.ENOSPC  # the messages key on errno values
