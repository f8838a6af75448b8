"""A real Gfarm file system on this one host, for the tests: gfmd, two gfsd and a gfarm2fs mount.

Debian's Gfarm 2.7 (``gfmd gfsd gfarm-client gfarm2fs libgfarm-dev fuse3``) runs without a
database: with no backend configured gfmd keeps the namespace in memory (lost when it stops,
which is what tests want).  Every file (the three configuration files, the shared key, the user
map, the journal, each I/O node's spool, logs, pid files, the mount point) lives in one folder;
nothing under /etc is touched, so it can run beside a system Gfarm (or another of these: the
ports are random).  I/O node ``i`` is a gfsd on 127.0.0.<i+1>.  To the scheduler 127.0.0.1 is
the client's own host: gfreg and libgfarm write there unless told otherwise
(:meth:`GfarmCluster.node_env`, ``gfreg -h``), gfarm2fs picks either node.  Clients do not
read the near node's spool directly (``direct_local_access disable``): all data goes through
a gfsd over TCP.  Daemons run in the foreground (``-d``) as our children, each in
its own process group, and are stopped by :meth:`GfarmCluster.stop`, whatever happened (also
when the test process is killed: they get SIGTERM then). Daemonized, gfmd would write its pid
file before its last fork, naming a process that is gone; ``-d`` also logs at debug level.

A client names a file ``gfarm:///dir/file`` (or just ``/dir/file``) in Gfarm commands and
libgfarm calls (``gfs_pio_open``), and ``<mount>/dir/file`` through the gfarm2fs mount. Every
client needs ``GFARM_CONFIG_FILE`` (:attr:`GfarmCluster.env`); that file names the shared key.

By hand (a user trying the Gfarm target without a Gfarm)::

    python tests/gfarm_cluster.py /tmp/gfarm    # prints what to export; Ctrl-C stops
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import getpass
import mmap
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

#: Programs the cluster runs; the Debian packages that provide them.
PROGRAMS = ("gfmd", "gfsd", "gfkey", "gfhost", "gfls", "gfsched", "gfrep", "gfwhere",
            "gfexport", "gfreg", "gfarm2fs", "fusermount3")
PACKAGES = "apt-get install gfmd gfsd gfarm-client gfarm2fs libgfarm-dev fuse3"

#: Ports are picked below Linux's ephemeral range (32768-60999: clients' own ports) and far
#: from Gfarm's defaults (gfmd 601, gfsd 600), so a system Gfarm is never hit by mistake.
PORTS = range(20000, 32000)


class GfarmError(RuntimeError):
    """A Gfarm command failed; the message says which and why."""


class GfarmUnavailable(GfarmError):
    """The file system could not be started; the message says why, with the log's tail."""


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def _output(argv: list[str], config: str) -> str:
    """What a program prints (stdout and stderr) run with this client configuration."""
    try:
        proc = subprocess.run([_which(argv[0]) or argv[0], *argv[1:]], capture_output=True,
                              text=True, timeout=20,
                              env=os.environ | {"GFARM_CONFIG_FILE": config})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return (proc.stdout + proc.stderr).strip() or f"no output (exit {proc.returncode})"


@functools.cache
def problem(mount: bool = True) -> str:
    """'' when a Gfarm can be started here, else why not (one line). The daemons are run (a
    binary can be installed without the libraries it loads), a shared key is written,
    127.0.0.2 bound, and /dev/fuse opened where a mount is wanted: cheap, about 20 ms."""
    for name in PROGRAMS if mount else PROGRAMS[:-2]:
        if _which(name) is None:
            return f"{name} is not installed ({PACKAGES})"
    for name in ("gfmd", "gfsd") + (("gfarm2fs",) if mount else ()):
        out = _output([name, "-?"], "/nonexistent/gfarm2.conf")
        if not re.search(r"usage|gfarm2\.conf", out, re.I):  # its usage, or no config: it ran
            return f"{name} does not run: {out.splitlines()[0]}"
    with tempfile.TemporaryDirectory() as tmp:  # libgfarm's client side, as gfkey uses it
        conf = Path(tmp) / "gfarm2.conf"
        conf.write_text(f"metadb_server_host localhost\nshared_key_file {tmp}/key\n")
        out = _output(["gfkey", "-f", "-p", "60"], str(conf))
        if not (Path(tmp) / "key").exists():
            return f"gfkey does not run: {out.splitlines()[0]}"
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.2", 0))
    except OSError as exc:
        return f"127.0.0.2 cannot be bound ({exc.strerror}): the second I/O node needs it"
    if mount:
        try:
            os.close(os.open("/dev/fuse", os.O_RDWR))
        except OSError as exc:
            return f"/dev/fuse cannot be opened ({exc.strerror}): gfarm2fs cannot mount"
    return ""


def port_free(port: int) -> bool:
    """Free on every address, TCP and UDP: gfmd binds 0.0.0.0, gfsd answers load queries
    (gfsched) over UDP on its port."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                return False
    return True


def _free_ports(n: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < n:
        port = random.choice(PORTS)
        if port not in ports and port_free(port):
            ports.append(port)
    return ports


_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent() -> None:
    """In the child: SIGTERM when the test process dies (even by SIGKILL, where neither
    atexit nor a fixture's teardown runs), so a daemon never outlives its test session.
    (When the thread that started it ends, in fact: start clusters from the main thread.)"""
    if _prctl is not None:
        _prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"


def _listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=5).close()
        return True
    except OSError:
        return False


def _mounted(path: Path) -> bool:
    """From the mount table: os.path.ismount() says False for a FUSE mount whose process
    died ("transport endpoint is not connected"), which still needs unmounting."""
    target = str(path).replace(" ", "\\040")
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == target for line in f)


def _fusermount(*args: str | Path) -> bool:
    return subprocess.run(["fusermount3", *map(str, args)], capture_output=True,
                          timeout=30).returncode == 0


def _group_members(pgids: set[int]) -> list[int]:
    """Live processes (zombies left out) of these process groups."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) in pgids:
            pids.append(int(stat.parent.name))
    return pids


def _signal(proc: subprocess.Popen, signum: int) -> None:
    """Signal the daemon's process group; the daemon alone where it has none yet (gfsd
    makes its own a moment after it starts)."""
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        proc.send_signal(signum)  # nothing where it has been reaped


class GfarmCluster:
    """gfmd + ``nodes`` gfsd (+ a gfarm2fs mount) configured under `folder`; see :func:`start`."""

    def __init__(self, folder: Path, nodes: int = 2):
        self.folder = Path(folder).resolve()
        self.config = self.folder / "gfarm2.conf"
        self.key = self.folder / "key"
        self.logs = self.folder / "log"
        self.gfmd_port, *ports = _free_ports(nodes + 1)
        self.nodes: list[tuple[str, int]] = [(f"127.0.0.{i + 1}", p) for i, p in enumerate(ports)]
        self.mount: Path | None = None
        self.direct_io = False  # whether O_DIRECT opens work through the mount (probed)
        self.procs: dict[str, subprocess.Popen] = {}

    # -- clients ------------------------------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        """What a client (Gfarm command, libgfarm program, gfarm2fs) needs, beside os.environ."""
        return {"GFARM_CONFIG_FILE": str(self.config)}

    def run(self, *argv: str, timeout: float = 120, check: bool = False,
            **kw) -> subprocess.CompletedProcess:
        """Run a Gfarm client command against this file system (text output captured)."""
        kw = {"capture_output": True, "text": True} | kw
        kw["env"] = os.environ | self.env | kw.get("env", {})
        proc = subprocess.run(argv, timeout=timeout, **kw)
        if check and proc.returncode != 0:
            raise GfarmError(f"{' '.join(argv)} (exit {proc.returncode}): "
                             f"{str(proc.stderr or proc.stdout).strip()[-500:]}")
        return proc

    def node_env(self, i: int) -> dict[str, str]:
        """Like env, but new files go to I/O node `i` while it is up (write_target_domain):
        else gfreg and libgfarm pick the near node, gfarm2fs either node."""
        conf = self.folder / f"gfarm2-node{i}.conf"
        if not conf.exists():
            conf.write_text(f"{self.config.read_text()}write_target_domain {self.nodes[i][0]}\n")
        return {"GFARM_CONFIG_FILE": str(conf)}

    def processes(self) -> list[int]:
        """Every live process of this file system: the daemons and their children."""
        return _group_members({p.pid for p in self.procs.values()})

    def hosts_up(self) -> list[str]:
        """The I/O nodes gfmd can schedule now (``gfsched -w``: up and writable)."""
        return self.run("gfsched", "-w", timeout=30).stdout.split()

    # -- configuration ------------------------------------------------------------------------
    def write_config(self) -> None:
        """Client, gfmd and gfsd files, the shared key and the user map, all under folder."""
        f, user = self.folder, getpass.getuser()
        for d in ("journal", "log", "run", "mnt", *(f"spool/{i}" for i in range(len(self.nodes)))):
            (f / d).mkdir(parents=True, exist_ok=True)
        # tcp_nodelay: without it writes through gfarm2fs ran 1.5-6 times slower;
        # direct_local_access disable: else gfexport of a replica on the near gfsd to a pipe
        # stops after 64 KiB and exits 0 (it tries one sendfile() from the spool file)
        client = (f"metadb_server_host localhost\nmetadb_server_port {self.gfmd_port}\n"
                  f"auth enable sharedsecret *\nshared_key_file {self.key}\n"
                  "sockopt keepalive\nsockopt tcp_nodelay\n")
        self.config.write_text(f"# written by tests/gfarm_cluster.py\n{client}"
                               "direct_local_access disable\n")
        # gfsd and gfmd authenticate each other as the _gfarmfs and _gfarmmd users, which
        # the map makes this local user, so they read the same shared key file
        (f / "usermap").write_text(f"_gfarmfs {user}\n_gfarmmd {user}\n")
        (f / "gfsd.conf").write_text(f"{client}local_user_map {f}/usermap\n")
        (f / "gfmd.conf").write_text(f"{client}local_user_map {f}/usermap\nadmin_user {user}\n"
                                     f"metadb_replication disable\n"
                                     f"metadb_journal_dir {f}/journal\n")
        self.run("gfkey", "-f", "-p", str(30 * 86400), check=True)  # writes shared_key_file

    # -- daemons ------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], session: bool = True) -> None:
        """Start a daemon in its own process group, which stop() signals as a whole (gfsd
        makes its group itself, and aborts where it is a session leader: no `session`)."""
        with open(self.logs / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=os.environ | self.env, start_new_session=session,
                preexec_fn=_die_with_parent)

    def _wait(self, ready: Callable[[], bool], timeout: float, name: str) -> None:
        end = time.monotonic() + timeout
        while True:
            dead = [k for k, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise GfarmUnavailable(f"{dead[0]} exited ({self.procs[dead[0]].returncode}): "
                                       f"{_tail(self.logs / f'{dead[0]}.log')}")
            try:
                if ready():
                    return
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() > end:
                raise GfarmUnavailable(f"{name} not ready within {timeout:g} s: "
                                       f"{_tail(self.logs / f'{name}.log')}")
            time.sleep(0.1)

    def start(self, mount: bool = True, timeout: float = 30) -> GfarmCluster:
        """gfmd, then each I/O node registered and started, then the mount; `timeout` for
        each step (each takes well under a second here)."""
        self.write_config()
        f = self.folder
        self._spawn("gfmd", [_which("gfmd") or "gfmd", "-d", "-f", f"{f}/gfmd.conf",
                             "-P", f"{f}/run/gfmd.pid"])
        # a client retries for a minute while gfmd does not listen yet: wait for that first
        self._wait(lambda: _listening("127.0.0.1", self.gfmd_port)
                   and self.run("gfls", "-d", "/", timeout=10).returncode == 0, timeout, "gfmd")
        arch = f"{platform.machine()}-linux"
        for i, (host, port) in enumerate(self.nodes):
            self.run("gfhost", "-c", "-a", arch, "-p", str(port), "-n", "1", host, check=True)
            self._spawn(f"gfsd{i}", [_which("gfsd") or "gfsd", "-d", "-f", f"{f}/gfsd.conf",
                                     "-h", host, "-l", host, "-r", f"{f}/spool/{i}",
                                     "-P", f"{f}/run/gfsd{i}.pid"], session=False)
        hosts = {h for h, _ in self.nodes}
        self._wait(lambda: set(self.hosts_up()) == hosts, timeout, f"gfsd{len(self.nodes) - 1}")
        if mount:
            self._mount(f / "mnt", timeout)
        return self

    def _mount(self, mnt: Path, timeout: float) -> None:
        """gfarm2fs in the foreground; big_writes: 128 KiB FUSE writes (else 4 KiB ones, 2-3
        times slower). No allow_other: the mount is for this user (others would need
        user_allow_other in /etc/fuse.conf)."""
        self._spawn("gfarm2fs", [_which("gfarm2fs") or "gfarm2fs", "-f", "-o", "big_writes",
                                 str(mnt)])
        self._wait(lambda: _mounted(mnt), timeout, "gfarm2fs")
        self.mount = mnt
        self.direct_io = _direct_io_works(mnt / ".o_direct_probe")

    def kill_gfsd(self, i: int, signum: int = signal.SIGKILL) -> None:
        """Signal I/O node `i`'s whole process group: its listener, back channel and one
        process per client (killing the listener alone leaves those serving, orphaned). Then
        gfsched leaves it out at once, a write pinned to it (gfreg -h) fails at once with
        "connection refused", other writes go to the other nodes, and reading a file whose
        only replica it held fails with "connection refused" after about 30 s of retries."""
        name = f"gfsd{i}"
        _signal(self.procs[name], signum)
        if signum in (signal.SIGKILL, signal.SIGTERM):
            self._reap(name, 10)

    def stop_gfmd(self) -> None:
        """Stop the metadata server (SIGTERM); the gfsd stay up, retrying to reach it. A client
        then retries for about 60 s before "connection refused" (gfarm2fs: 90 s); the client
        file's `gfmd_reconnection_timeout N` shortens that (3: 6 s)."""
        self._stop("gfmd")

    def _reap(self, name: str, timeout: float) -> bool:
        """Wait for the daemon and every process of its group; True when all are gone."""
        proc = self.procs[name]
        end = time.monotonic() + timeout
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        while _group_members({proc.pid}):
            if time.monotonic() > end:
                return False
            time.sleep(0.05)
        return True

    def _stop(self, name: str, timeout: float = 10) -> None:
        """SIGTERM the daemon's process group, SIGKILL what is left after `timeout`."""
        proc = self.procs.get(name)
        if proc is None:
            return
        if proc.poll() is not None and not _group_members({proc.pid}):  # killed before
            del self.procs[name]
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            _signal(proc, sig)
            if self._reap(name, timeout):
                break
        del self.procs[name]

    def unmount(self) -> None:
        """fusermount3 -u, after which gfarm2fs exits by itself; where the mount is busy, a
        lazy unmount and SIGTERM (its users then get "transport endpoint is not connected")."""
        mnt = self.folder / "mnt"
        unmounted = _mounted(mnt) and _fusermount("-u", mnt)
        if _mounted(mnt):
            _fusermount("-u", "-z", mnt)
        if "gfarm2fs" in self.procs and not (unmounted and self._reap("gfarm2fs", 10)):
            self._stop("gfarm2fs")
        self.procs.pop("gfarm2fs", None)
        self.mount = None

    def stop(self) -> None:
        """Unmount, then stop every daemon (gfsd first) and remove what gfsd leaves in /tmp.
        Safe to call twice, or after a failed start."""
        self.unmount()
        for name in sorted(k for k in self.procs if k.startswith("gfsd")):
            self._stop(name)
        self._stop("gfmd")
        for host, port in self.nodes:  # its socket folder, left behind when gfsd is killed
            shutil.rmtree(f"/tmp/.gfarm-gfsd{host}-{port}", ignore_errors=True)

    def __enter__(self) -> GfarmCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _direct_io_works(path: Path) -> bool:
    """Write and read back one aligned 4 KiB block with O_DIRECT (buffers from mmap are
    page-aligned, as O_DIRECT wants)."""
    buf, back = mmap.mmap(-1, 4096), mmap.mmap(-1, 4096)
    buf.write(os.urandom(4096))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
        try:
            os.write(fd, buf)
        finally:
            os.close(fd)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            os.readv(fd, [back])
        finally:
            os.close(fd)
        return back[:] == buf[:]
    except OSError:
        return False
    finally:
        path.unlink(missing_ok=True)


def start(folder: Path, nodes: int = 2, mount: bool = True) -> GfarmCluster:
    """A running Gfarm configured under `folder` (gfmd, `nodes` I/O nodes, the mount at
    folder/mnt). On any failure what was started is stopped and GfarmUnavailable raised."""
    cluster = GfarmCluster(folder, nodes)
    atexit.register(cluster.stop)  # a safety net: stop() does nothing the second time
    try:
        return cluster.start(mount=mount)
    except (GfarmError, OSError, subprocess.SubprocessError) as exc:
        cluster.stop()
        if isinstance(exc, GfarmUnavailable):
            raise
        raise GfarmUnavailable(f"{exc} | gfmd log: {_tail(cluster.logs / 'gfmd.log')}") from exc


def replicate(cluster: GfarmCluster, path: str, to_node: int) -> float:
    """Seconds `gfrep` takes to copy `path` (gfarm:///... or /...) to I/O node `to_node`
    (one replica there is asked for, counting any it already has)."""
    host = cluster.nodes[to_node][0]
    t0 = time.perf_counter()
    proc = cluster.run("gfrep", "-q", "-H", "-", path, input=host + "\n")
    seconds = time.perf_counter() - t0
    where = cluster.run("gfwhere", path).stdout.split()
    if proc.returncode != 0 or host not in where:
        raise GfarmError(f"gfrep of {path} to {host} failed (exit {proc.returncode}, replicas "
                         f"on {where}): {(proc.stderr or proc.stdout).strip()[-500:]}")
    return seconds


def _unavailable(reason: str) -> NoReturn:
    """Skip, or fail where BURSTBENCH_REQUIRE_GFARM=1 says Gfarm must work here (CI)."""
    if os.environ.get("BURSTBENCH_REQUIRE_GFARM") == "1":
        pytest.fail(f"BURSTBENCH_REQUIRE_GFARM=1, but {reason}", pytrace=False)
    pytest.skip(reason)


def start_or_skip(folder: Path, nodes: int = 2, mount: bool = True) -> GfarmCluster:
    """start(), for a test: skipped with the reason (or failed, as _unavailable says) where
    Gfarm cannot run here or does not start."""
    reason = problem(mount)
    if reason:
        _unavailable(f"Gfarm cannot run here: {reason}")
    try:
        return start(folder, nodes, mount)
    except GfarmUnavailable as exc:
        _unavailable(f"the Gfarm file system did not start: {exc}")


@pytest.fixture(scope="session", name="gfarm")
def gfarm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GfarmCluster]:
    """One Gfarm (two I/O nodes, mounted) for the session; stopped at its end, whatever
    happened. (Named explicitly: a test module may import it under another name, which
    keeps linters from calling each test's `gfarm` argument a redefinition.)"""
    cluster = start_or_skip(tmp_path_factory.mktemp("gfarm"))
    try:
        yield cluster
    finally:
        cluster.stop()


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/burstbench-gfarm").resolve()
    if problem():
        sys.exit(f"Gfarm cannot run here: {problem()}")
    t0 = time.monotonic()
    try:
        with start(root) as g:
            print(f"Gfarm up in {time.monotonic() - t0:.1f} s: I/O nodes "
                  f"{', '.join(f'{h}:{p}' for h, p in g.nodes)}, gfmd on port {g.gfmd_port}\n"
                  f"  export GFARM_CONFIG_FILE={g.config}   # then: gfls -l /, gfreg, gfexport\n"
                  f"  mounted at {g.mount} (O_DIRECT {'works' if g.direct_io else 'fails'})\n"
                  "Ctrl-C stops it", flush=True)
            for sig in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: `&` in a script ignores it
                signal.signal(sig, lambda *_: sys.exit(0))
            signal.pause()
    except GfarmUnavailable as exc:
        sys.exit(f"the Gfarm file system did not start: {exc}")
