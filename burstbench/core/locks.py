"""One writer per run folder, one measurement per host: lock files that name their holder.

A lock is a small JSON file naming its holder: host, pid, the process's start (ticks since
boot, and as a time), the boot it ran in, the run it writes and its sweep's token.  It is
held for as long as any process of that sweep lives: the holder itself, or any process whose
environment carries ``SWEEP_ENV=<token>`` (the holder sets it before it starts anything, so
papermill, the kernel, every configuration and its MPI ranks inherit it).

A lock whose holder is gone (its pid not alive or reused, no process of its sweep left, or
taken before this machine's last boot) is stale: it is taken over, and the caller says so.
A lock from another host (a run folder on a shared file system) cannot be judged from here:
it is taken over only when forced.  A lock file is checked and written under an flock of the
folder that holds it, so two takers never both win, and no other file is left beside it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

#: The environment variable that marks every process of a sweep with its token.
SWEEP_ENV = "BURSTBENCH_SWEEP"
#: Where the host's measurement lock lives (default HOST_LOCK_DIR).
LOCK_DIR_ENV = "BURSTBENCH_LOCK_DIR"
#: The host's lock folder: the same for every user, shell and batch job of the host (a
#: login's $XDG_RUNTIME_DIR is per user, and a job may inherit one its node lacks; $TMPDIR
#: may be per job), writable by all (no sticky bit: any user may take over a stale lock).
HOST_LOCK_DIR = "/tmp/burstbench-locks"
#: The lock file of a run folder, and the host's measurement lock file.
RUN_LOCK, HOST_LOCK = "writer.lock", "burstbench-measure.lock"
#: Seconds between two looks at a busy lock while waiting for it.
WAIT_POLL_S = 1.0


class Busy(Exception):
    """The lock is held (or cannot be judged); the message is one line naming the holder,
    `why` the holder as judge() said it."""

    def __init__(self, message: str, why: str = ""):
        super().__init__(message)
        self.why = why


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: enough to judge from this host whether it is still alive."""

    host: str
    pid: int
    start: int  # the process's start, in clock ticks since boot (/proc/<pid>/stat)
    since: str  # the same, as a UTC time, for people
    boot: str  # /proc/sys/kernel/random/boot_id of the boot it ran in
    token: str  # SWEEP_ENV of its processes
    run: str  # the run folder it writes

    def __str__(self) -> str:
        return f"pid {self.pid} on host {self.host} (since {self.since})"


def boot_id() -> str:
    """This boot's id ('' where Linux does not say)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot; None when it is not alive (or a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return _alive(pid) if not Path("/proc/self").exists() else None
    return None if fields[0] in "ZX" else int(fields[19])


def _alive(pid: int) -> int | None:
    """Without /proc (macOS): 0 when `pid` is alive (its start unknown), else None."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return 0


def me(token: str, run: Path | str) -> Holder:
    """This process as a lock's holder, writing `run` with the sweep `token`."""
    since = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return Holder(socket.gethostname(), os.getpid(), start_ticks(os.getpid()) or 0, since,
                  boot_id(), token, str(run))


def sweep_pids(token: str) -> list[int]:
    """Live processes whose environment carries SWEEP_ENV=`token` (this one left out)."""
    needle = f"{SWEEP_ENV}={token}".encode()
    found: list[int] = []
    if not Path("/proc").is_dir():  # no /proc (macOS): the holder's pid alone says
        return found
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if needle in (d / "environ").read_bytes().split(b"\0") and start_ticks(int(d.name)):
                found.append(int(d.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def judge(h: Holder) -> tuple[str, str]:
    """('alive' | 'stale' | 'foreign', why) for the holder of a lock found on disk."""
    if h.host != socket.gethostname():
        return "foreign", str(h)
    if h.boot and boot_id() and h.boot != boot_id():
        return "stale", f"{h} took it before this machine's last boot"
    if start_ticks(h.pid) == h.start:
        return "alive", f"{h}"
    others = sweep_pids(h.token) if h.token else []
    if others:
        return "alive", f"{h}: its pid is gone, but pid {others[0]} of its sweep still runs"
    return "stale", f"{h} is gone"


def read(path: Path) -> Holder | None:
    """The holder a lock file names; None when there is none (or it is unreadable: a taker
    killed while writing it left nothing that can hold anything)."""
    try:
        return Holder(**json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError):
        return None


@contextlib.contextmanager
def _mutex(path: Path) -> Iterator[None]:
    """An flock of the folder that holds `path` while the lock file is judged and written: a
    folder can be flocked like a file, so no mutex file is left beside the lock (in a run
    folder, git would see it)."""
    fd = os.open(Path(path).parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def acquire(path: Path, holder: Holder, refuse: Callable[[str, str], str],
            force: bool = False) -> str:
    """Take the lock `path` for `holder`; return '' or one line saying whose stale lock was
    taken over.  Raises Busy(refuse(state, why)) while another holder lives (or, unless
    `force`, when it is on another host)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if str(path.parent) == HOST_LOCK_DIR and path.parent.stat().st_uid == os.getuid():
        path.parent.chmod(0o777)
    with _mutex(path):
        old = read(path)
        said = ""
        if old is not None and old.token != holder.token:
            state, why = judge(old)
            if state == "alive" or (state == "foreign" and not force):
                raise Busy(refuse(state, why), why)
            said = (f"took over the lock {path} from another host (--force): {why}"
                    if state == "foreign" else f"took over the stale lock {path}: {why}")
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:  # whole or not at all: a full disk leaves the old lock, and no part of a new one
            tmp.write_text(json.dumps(asdict(holder)) + "\n")
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return said


def release(path: Path, token: str) -> None:
    """Remove the lock `path` if `token`'s sweep holds it (a taker's lock stays)."""
    path = Path(path)
    with contextlib.suppress(OSError), _mutex(path):
        held = read(path)
        if held is not None and held.token == token:
            path.unlink()


def host_lock_path() -> Path:
    """This host's measurement lock: under $BURSTBENCH_LOCK_DIR, else HOST_LOCK_DIR."""
    return Path(os.environ.get(LOCK_DIR_ENV) or HOST_LOCK_DIR) / HOST_LOCK


def take_run(run_dir: Path, holder: Holder, force: bool = False) -> str:
    """Become the one writer of `run_dir` (see acquire); Busy names the writer that lives."""
    def refuse(state: str, why: str) -> str:
        if state == "foreign":
            return (f"run {run_dir} is locked by {why}: a lock from another host is not "
                    f"judged stale from here; if that sweep is dead there, resume with --force")
        return f"run {run_dir} is being written by {why}: one writer per run folder; " \
               f"wait for it to end, or stop it"
    return acquire(Path(run_dir) / RUN_LOCK, holder, refuse, force)


def take_host(holder: Holder, wait: bool = False, force: bool = False,
              say: Callable[[str], None] = print) -> str:
    """Become the one sweep measuring on this host (see acquire).  Busy names the running
    sweep; with `wait`, say once what is waited for and poll until it ends instead."""
    def running(why: str) -> str:
        held = read(host_lock_path())
        return why + (f", measuring into {held.run}" if held else "")

    def refuse(state: str, why: str) -> str:
        return (f"another sweep is measuring on this host: {running(why)}; one measurement "
                f"per host at a time: wait for it to end, or pass --wait")
    told = False
    while True:
        try:
            return acquire(host_lock_path(), holder, refuse, force)
        except Busy as exc:
            if not wait:
                raise
            if not told:
                say(f"waiting for the sweep measuring on this host: {running(exc.why)}")
                told = True
            time.sleep(WAIT_POLL_S)


@contextlib.contextmanager
def holding(run_dir: Path, token: str, wait: bool = False, force: bool = False,
            say: Callable[[str], None] = print) -> Iterator[list[str]]:
    """Hold the lock of `run_dir`, then the host's (take_run, take_host), for the block;
    yield the lines saying whose stale locks were taken over.  Busy when either is held
    (the run's is released again when the host's cannot be had)."""
    holder = me(token, run_dir)
    said = [take_run(run_dir, holder, force)]
    try:
        said.append(take_host(holder, wait, force, say))
    except BaseException:
        release(Path(run_dir) / RUN_LOCK, token)
        raise
    try:
        yield [line for line in said if line]
    finally:
        release(host_lock_path(), token)
        release(Path(run_dir) / RUN_LOCK, token)
