"""A real OpenPBS (PBS Professional) on this one host, for the tests.

OpenPBS is built once from the shared source tarball into a cache outside the
checkout, keyed by the tarball's hash (:func:`build`).  The session's cluster
(server, scheduler, comm, two MoMs and PBS's own PostgreSQL datastore) then runs in a
private mount and network namespace held by one ``unshare`` process, so that
nothing outside it changes:

- the host name and the nodes' names resolve to non-loopback addresses only
  there (a hosts file bound over /etc/hosts, the addresses on the namespace's
  own loopback device);
- PBS's fixed ports (15001-15007, 17001) are the namespace's own;
- the job user exists only there (passwd and group files bound over /etc's);
- PBS_HOME lives in the session's temporary folder, bound over an empty
  root-owned folder in the cache (PBS refuses a PBS_HOME under /tmp);
- folders the job user must reach but cannot (/root holding the Python, the
  0700 folders pytest makes) are shadowed by a tmpfs that binds their entries
  back, so the user can pass through them there and nowhere else.

Every PBS command runs through ``nsenter`` into that namespace
(:meth:`PbsCluster.run`).  :meth:`PbsCluster.stop` ends every process in it;
the namespace, its mounts and its user vanish with the last one.

By hand::

    python tests/pbs_cluster.py /var/tmp/pbs   # builds if needed, starts; Ctrl-C stops
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from scheduler_cluster import ClusterError, wait_job, wait_jobs_gone, wait_until

ROOT = Path(__file__).resolve().parents[1]
TARBALL = ROOT.parent / "shared" / "third_party" / "openpbs" / "openpbs-23.06.06-cd7ab5e.tar.gz"
#: Debian 12 packages OpenPBS's build and its daemons need (the shared README's list).
BUILD_DEPS = ("gcc g++ make libtool autoconf automake pkg-config libhwloc-dev libx11-dev "
              "libxt-dev libxext-dev libxft-dev libedit-dev libical-dev libncurses-dev perl "
              "postgresql-server-dev-all postgresql-contrib python3-dev tcl-dev tk-dev swig "
              "libexpat1-dev libssl-dev libcjson-dev postgresql expat libedit2 libical3 "
              "libcjson1 tcl tk").split()
#: The job user: an ordinary user (PBS refuses root's jobs), in the namespace alone.
USER, UID = "bbpbs", 61029
#: The host's name resolves to this, on the namespace's loopback device (TEST-NET-3).
ADDRESS = "203.0.113.2"  # the nodes: .21, .22
#: How long :meth:`PbsCluster.stop` lets PBS's own script stop its daemons (it waits up to
#: 180 s for them) before it signals what is left: after test_pbs.py's jobs it once took the
#: whole two minutes it was given, waiting on a server that had nothing left to keep, in a
#: namespace that is thrown away with its PBS_HOME (5 s after one job).
GRACEFUL_STOP_S = 20


def tarball() -> Path:
    """The OpenPBS source: BURSTBENCH_OPENPBS_TARBALL, else the shared third_party copy."""
    return Path(os.environ.get("BURSTBENCH_OPENPBS_TARBALL", TARBALL))


def cache_dir(source: Path) -> Path:
    """Where the build of `source` is kept: BURSTBENCH_PBS_CACHE, else /var/cache/burstbench,
    in a folder named by the tarball's hash (a new tarball builds anew).

    Not under /root or /tmp: the job user runs its commands from there, and PBS refuses
    world-writable ancestors.
    """
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    base = Path(os.environ.get("BURSTBENCH_PBS_CACHE", "/var/cache/burstbench"))
    return base / f"openpbs-{digest}"


def why_not() -> str:
    """Why PBS cannot run here ('' when it can be tried): root, the tools, the source."""
    if os.geteuid() != 0:
        return "the PBS cluster needs root (namespaces, setuid pbs_iff, PBS_HOME owned by root)"
    if not tarball().is_file():
        return f"no OpenPBS source at {tarball()}"
    need = ["unshare", "nsenter", "setpriv", "ip"]
    if not (cache_dir(tarball()) / "built").exists():  # to build, too
        need += ["autoconf", "automake", "libtoolize", "make", "gcc", "g++", "swig", "pg_config"]
    missing = [p for p in need if shutil.which(p) is None]
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):  # PBS's datastore
        missing.append("postgresql")
    if missing:
        return (f"not installed: {', '.join(missing)} (apt-get install "
                f"{' '.join(BUILD_DEPS)} util-linux iproute2)")
    return ""


def build(log=print) -> Path:
    """OpenPBS built and installed into its cache (once: later calls find it); its prefix.

    A lock serializes concurrent sessions; the stamp is written only after a whole
    install, so an interrupted build is redone.
    """
    source = tarball()
    cache = cache_dir(source)
    prefix, stamp = cache / "exec", cache / "built"
    if stamp.exists():
        return prefix
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return prefix
        work = cache / "src"
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(prefix, ignore_errors=True)
        work.mkdir()
        start = time.monotonic()
        log(f"building OpenPBS from {source} into {prefix} (about 5 minutes, once)")
        subprocess.run(["tar", "xzf", str(source), "-C", str(work)], check=True)
        tree = next(work.iterdir())
        jobs = str(os.cpu_count() or 2)
        # Debian's Python (python3-dev), not whichever is first on PATH: the daemons embed it
        for step in (["./autogen.sh"], ["./configure", f"--prefix={prefix}", "--with-python=/usr"],
                     ["make", f"-j{jobs}"],
                     ["make", "install", f"sysprofiledir={prefix}/etc/profile.d",
                      f"unitfiledir={prefix}/lib/systemd"]):
            with open(cache / "build.log", "a") as out:
                proc = subprocess.run(step, cwd=tree, stdout=out, stderr=subprocess.STDOUT)
            if proc.returncode != 0:
                tail = (cache / "build.log").read_text(errors="replace").splitlines()[-5:]
                raise ClusterError(f"OpenPBS build failed at {' '.join(step)}: "
                                   + " | ".join(tail))
        for name in ("pbs_iff", "pbs_rcp"):  # PBS's authentication helpers run as root
            (prefix / "sbin" / name).chmod(0o4755)
        shutil.rmtree(work)
        (cache / "home").mkdir(exist_ok=True)  # PBS_HOME's mount point (see the module doc)
        (cache / "ns").mkdir(exist_ok=True)  # the namespace's scratch tmpfs
        stamp.write_text(f"{time.monotonic() - start:.0f} s\n")
        log(f"OpenPBS built in {time.monotonic() - start:.0f} s")
    return prefix


def _private() -> dict[Path, str]:
    """Folders the namespace gets a fresh tmpfs for (their mount options): where PBS, its
    PostgreSQL and the jobs leave sockets and scratch files."""
    out = {Path("/tmp"): "mode=1777", Path("/var/tmp"): "mode=1777",  # qstat's query stamp
           Path("/dev/shm"): "mode=1777"}
    pg = Path("/run/postgresql")  # the datastore's socket
    if pg.is_dir():
        out[pg] = f"mode=2775,uid={pg.stat().st_uid},gid={pg.stat().st_gid}"
    return out


def _shadowed(paths: list[Path]) -> dict[Path, set[str]]:
    """Folders on the way to `paths` that others cannot pass, and the private ones, each with
    the entries on those ways: what the namespace keeps of them."""
    keep: dict[Path, set[str]] = {p: set() for p in _private()}
    for path in paths:
        parts = path.resolve().parts
        for i in range(1, len(parts)):
            folder = Path(*parts[:i])
            if folder in keep or not folder.stat().st_mode & stat.S_IXOTH:
                keep.setdefault(folder, set()).add(parts[i])
    return keep


def _shadow_script(keep: dict[Path, set[str]], hold: Path) -> list[str]:
    """Shell lines that lay a tmpfs over each folder of `keep` and bind its kept entries back
    (shallowest first, so that deeper folders are reached through the binds)."""
    lines, private = [], _private()
    for n, (folder, entries) in enumerate(sorted(keep.items(), key=lambda kv: len(kv[0].parts))):
        q, h = shlex.quote(str(folder)), shlex.quote(str(hold / str(n)))
        opts = private.get(folder, "mode=0755")
        lines += [f"mkdir {h}", f"mount --rbind {q} {h}",
                  f"mount -t tmpfs -o {opts},size=50% burstbench-pbs {q}"]
        for e in sorted(entries):
            src, dst = f"{h}/{shlex.quote(e)}", shlex.quote(str(folder / e))
            lines += [f"if [ -d {src} ]; then mkdir {dst}; else touch {dst}; fi",
                      f"mount --rbind {src} {dst}"]
    return lines


class PbsCluster:
    """OpenPBS's server, scheduler, comm, two MoMs and datastore in a namespace, under `root`.

    The MoMs are nodes n1 and n2 (2 CPUs each, all this host has, as a Slurm
    node here has), each on an address of its own, so that ``select=2:...``
    with ``place=scatter`` places two chunks on two hosts and the job's
    ``$PBS_NODEFILE`` names both, as on CycleCloud's execute nodes.  (One MoM
    with two vnodes would not: PBS writes the MoM's host name in the node file
    once per chunk, and ``place=scatter`` spreads over hosts, not vnodes.)
    """

    nodes = ("n1", "n2")
    ncpus = 2

    def __init__(self, root: Path):
        self.root = Path(root)
        self.holder: subprocess.Popen | None = None
        self.prefix = Path()
        self.home = Path()  # PBS_HOME as the namespace sees it
        self.host = socket.gethostname().split(".")[0]
        self.user_home = self.root / "user"
        self.times: dict[str, float] = {}

    # -- running commands in the namespace ----------------------------------------------------
    def env(self, user: bool = False) -> dict[str, str]:
        """The environment of a command in the namespace: PBS's commands first on PATH."""
        return {"PATH": f"{self.prefix}/bin:{self.prefix}/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
                "PBS_CONF_FILE": str(self.home / "pbs.conf"), "LANG": "C.UTF-8",
                "HOME": str(self.user_home if user else self.root),
                "BURSTBENCH_PROGRESS": "lines"}

    def run(self, *argv: str, user: bool = True, cwd: Path | None = None, timeout: float = 60,
            check: bool = False, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
        """`argv` in the namespace: as the job user (PBS refuses root's jobs), else as root."""
        if self.holder is None or self.holder.poll() is not None:
            raise ClusterError("the PBS namespace is not running")
        cmd = ["nsenter", "-t", str(self.holder.pid), "-m", "-n", "--"]
        if user:
            cmd += ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]
        cmd += ["env", "-C", str(cwd or ROOT), *argv]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=self.env(user) | (env or {}))
        if check and proc.returncode != 0:
            raise ClusterError(f"{' '.join(argv)}: exit {proc.returncode}: "
                               f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
        return proc

    def qmgr(self, command: str) -> None:
        self.run("qmgr", "-c", command, user=False, check=True)

    def workdir(self, name: str) -> Path:
        """A folder the job user owns, under the cluster's root (seen in the namespace too)."""
        d = self.root / "work" / name
        d.mkdir(parents=True)
        os.chown(d, UID, UID)
        return d

    # -- start and stop -----------------------------------------------------------------------
    def _namespace(self) -> None:
        """Start the process that holds the namespace (see the module's docstring)."""
        cache = self.prefix.parent
        hold = cache / "ns"
        passwd = f"{USER}:x:{UID}:{UID}:burstbench PBS tests:{self.user_home}:/bin/bash"
        keep = _shadowed([ROOT, Path(sys.prefix), Path(sys.base_prefix),
                          Path(sys.executable).resolve().parent, self.root])
        ready = self.root / "namespace-ready"
        hosts = "".join(f"{a} {name}\\n" for name, a in self.addresses().items())
        script = "\n".join([
            "set -eu", "ip link set lo up",
            *[f"ip addr add {a}/32 dev lo" for a in self.addresses().values()],
            f"mount -t tmpfs -o mode=0755,size=16m burstbench-pbs {hold}",
            f"mkdir {hold}/etc {hold}/up", *_shadow_script(keep, hold / "up"),
            f"printf '127.0.0.1 localhost\\n{hosts}' > {hold}/etc/hosts",
            f"{{ cat /etc/passwd; echo {shlex.quote(passwd)}; }} > {hold}/etc/passwd",
            f"{{ cat /etc/group; echo {USER}:x:{UID}:; }} > {hold}/etc/group",
            *[f"mount --bind {hold}/etc/{f} /etc/{f}" for f in ("hosts", "passwd", "group")],
            f"mount --bind {shlex.quote(str(self.root / 'pbs_home'))} {cache}/home",
            f"touch {shlex.quote(str(ready))}", "exec sleep infinity"])
        log = open(self.root / "namespace.log", "w")
        self.holder = subprocess.Popen(["unshare", "-m", "-n", "--propagation", "private",
                                        "bash", "-c", script], stdout=log, stderr=log,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        wait_until(ready.exists, 30, "the PBS namespace", lambda: "" if self.holder.poll() is None
                   else f"the namespace's setup failed: {self._tail('namespace.log')}")

    def addresses(self) -> dict[str, str]:
        """The host's and each node's address: apart, so that PBS sees distinct hosts."""
        return {self.host: ADDRESS} | {n: f"{ADDRESS}{i + 1}" for i, n in enumerate(self.nodes)}

    def _tail(self, name: str, lines: int = 5) -> str:
        f = self.root / name
        text = f.read_text(errors="replace").strip() if f.exists() else ""
        return " | ".join(text.splitlines()[-lines:]) or "(no log)"

    def start(self) -> PbsCluster:
        """Build if needed, then start every daemon and wait until both nodes are free."""
        t0 = time.monotonic()
        self.prefix = build(log=lambda m: print(m, file=sys.stderr, flush=True))
        self.times["build"] = time.monotonic() - t0
        self.home = self.prefix.parent / "home"
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        for d, owner, mode in ((self.root / "pbs_home", 0, 0o755), (self.user_home, UID, 0o755),
                               (self.root / "work", UID, 0o755), (self.root / "tmp", 0, 0o1777)):
            d.mkdir(exist_ok=True)
            os.chown(d, owner, owner)
            d.chmod(mode)
        t0 = time.monotonic()
        self._namespace()
        (self.root / "pbs_home" / "pbs.conf").write_text(f"""PBS_SERVER={self.host}
PBS_START_SERVER=1
PBS_START_SCHED=1
PBS_START_COMM=1
PBS_START_MOM=0
PBS_EXEC={self.prefix}
PBS_HOME={self.home}
PBS_CORE_LIMIT=unlimited
PBS_SCP=/usr/bin/scp
PBS_TMPDIR={self.root / 'tmp'}
""")
        self.run(f"{self.prefix}/libexec/pbs_postinstall", "server", "23.06.06",
                 str(self.prefix), str(self.home), "postgres", "sameconf", user=False,
                 check=True, timeout=120)
        # Its first start creates the datastore, and can race its PostgreSQL: createdb
        # before the server accepts ("database system is starting up"), or before its
        # socket exists (a busy CI run: "Error initializing the PBS dataservice"). Both are
        # retried, the half-made datastore removed first so that the next start makes it.
        for attempt in range(3):
            proc = self.run(f"{self.prefix}/libexec/pbs_init.d", "start", user=False,
                            timeout=180)
            if proc.returncode == 0:
                break
            out = (proc.stdout + proc.stderr).strip()
            half_made = "Error initializing the PBS dataservice" in out
            if not (half_made or "database system is starting up" in out) or attempt == 2:
                raise ClusterError(f"pbs_init.d start: exit {proc.returncode}: {out[-2000:]}")
            self.run(f"{self.prefix}/libexec/pbs_init.d", "stop", user=False, timeout=120)
            if half_made:
                shutil.rmtree(self.root / "pbs_home" / "datastore", ignore_errors=True)
        for n, node in enumerate(self.nodes):
            self._start_mom(node, 15002 + 10 * n)
        for c in ("set server job_history_enable = True",
                  "set server scheduler_iteration = 2",
                  f"set queue workq resources_max.ncpus = {self.ncpus * len(self.nodes)}",
                  f"set queue workq resources_max.nodect = {len(self.nodes)}",
                  *[f"create node {n} Mom={n},port={15002 + 10 * i},"
                    f"resources_available.ncpus={self.ncpus}"
                    for i, n in enumerate(self.nodes)]):
            self.qmgr(c)
        wait_until(self.all_free, 60, "the MoMs' nodes",
                   lambda: "" if self.holder and self.holder.poll() is None
                   else "the namespace ended")
        self.times["start"] = time.monotonic() - t0
        return self

    def estimate_starts(self) -> None:
        """Have the scheduler estimate queued jobs' starts (``estimated.start_time``): strict
        ordering with backfilling (sched_config), the scheduler told to re-read it."""
        conf = self.root / "pbs_home" / "sched_priv" / "sched_config"
        text = conf.read_text()
        conf.write_text(re.sub(r"(?m)^strict_ordering:\s*false\s+ALL", "strict_ordering: true ALL",
                               text))
        self.qmgr("set server backfill_depth = 10")
        self.run("pkill", "-HUP", "-x", "pbs_sched", user=False, check=True)

    def _start_mom(self, node: str, port: int) -> None:
        """A MoM named `node` on `port` (and port + 1), its home beside PBS_HOME's own."""
        home = self.root / "pbs_home" / f"mom-{node}"
        for d in ("mom_priv", "mom_logs", "aux", "spool", "undelivered", "checkpoint"):
            shutil.copytree(self.root / "pbs_home" / d, home / d, symlinks=True)
        shutil.copy2(self.root / "pbs_home" / "pbs_environment", home)
        with open(home / "mom_priv" / "config", "a") as f:
            # local copies for output files; resources (walltime) checked every few seconds
            f.write(f"$clienthost {self.host}\n$usecp *:/ /\n$min_check_poll 2\n"
                    "$max_check_poll 4\n")
        self.run("pbs_mom", user=False, check=True, env={
            "PBS_MOM_HOME": str(self.home / f"mom-{node}"), "PBS_MOM_NODE_NAME": node,
            "PBS_LEAF_NAME": node, "PBS_MOM_SERVICE_PORT": str(port),
            "PBS_MANAGER_SERVICE_PORT": str(port + 1)})

    def pbsnodes(self) -> dict[str, dict]:
        """``pbsnodes -av -F json``'s nodes."""
        out = self.run("pbsnodes", "-av", "-F", "json", user=False, check=True).stdout
        return json.loads(out).get("nodes", {})

    def all_free(self) -> bool:
        nodes = self.pbsnodes()
        return all(nodes.get(n, {}).get("state") == "free" for n in self.nodes)

    def namespace_pids(self) -> list[int]:
        """Every process in our namespace but its holder."""
        if self.holder is None:
            return []
        try:
            ns = os.readlink(f"/proc/{self.holder.pid}/ns/mnt")
        except OSError:
            return []
        pids = []
        for d in Path("/proc").glob("[0-9]*"):
            try:
                if int(d.name) != self.holder.pid and os.readlink(d / "ns" / "mnt") == ns:
                    pids.append(int(d.name))
            except OSError:
                continue
        return pids

    def job_pids(self, jobid: str) -> list[int]:
        """Processes of the job `jobid` (its PBS_JOBID in their environment) in our namespace:
        another session's cluster numbers its jobs alike."""
        mark = f"PBS_JOBID={jobid}\0".encode()
        pids = []
        for pid in self.namespace_pids():
            try:
                if mark in Path(f"/proc/{pid}/environ").read_bytes():
                    pids.append(pid)
            except OSError:
                continue
        return pids

    def all_job_pids(self) -> list[int]:
        """Processes of any job of this cluster (a PBS_JOBID in their environment)."""
        pids = []
        for pid in self.namespace_pids():
            try:
                if b"\0PBS_JOBID=" in b"\0" + Path(f"/proc/{pid}/environ").read_bytes():
                    pids.append(pid)
            except OSError:
                continue
        return pids

    def clean(self, timeout: float = 60) -> None:
        """A test's end, whether it passed or not: scheduling on again (a test that held jobs
        queued), every job not finished deleted, and no process of any job left: a sweep a
        failed test left measuring held the host's lock, and the next tests failed on it.
        ClusterError, naming them, for processes still there after `timeout` s (killed)."""
        self.run("qmgr", "-c", "set server scheduling = True", user=False)
        ids = self.run("qselect", user=False).stdout.split()
        if ids:
            self.run("qdel", "-W", "force", *ids, user=False)
        wait_jobs_gone(lambda: bool(self.run("qselect", user=False).stdout.strip()),
                       self.all_job_pids, timeout)

    def stop(self) -> None:
        """Stop PBS, end whatever is left in the namespace, then the namespace itself."""
        if self.holder is None:
            return
        if self.holder.poll() is None:
            try:
                self.run(f"{self.prefix}/libexec/pbs_init.d", "stop", user=False,
                         timeout=GRACEFUL_STOP_S)
            except (subprocess.TimeoutExpired, ClusterError, OSError):
                pass
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                for pid in self.namespace_pids():
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
                end = time.monotonic() + wait
                while self.namespace_pids() and time.monotonic() < end:
                    time.sleep(0.2)
            left = self.namespace_pids()
            self.holder.kill()
        else:
            left = []
        self.holder.wait(10)
        self.holder = None
        if left:  # the mounts and the user go with the namespace; a process must not stay
            raise ClusterError(f"processes left in the PBS namespace after SIGKILL: {left}")

    # -- jobs ---------------------------------------------------------------------------------
    def job(self, jobid: str) -> dict:
        """``qstat -x -f -F json`` of the job ({} when PBS does not know it)."""
        proc = self.run("qstat", "-x", "-f", "-F", "json", jobid, user=False, timeout=30)
        if proc.returncode != 0:
            return {}
        return next(iter(json.loads(proc.stdout).get("Jobs", {}).values()), {})

    def wait_job(self, jobid: str, states: tuple[str, ...] = ("F",),
                 timeout: float = 300) -> dict:
        """Wait until the job is in one of `states` (F: finished); its record then."""
        return wait_job(self.job, jobid, "job_state", states, timeout, "comment")


def missing_packages() -> list[str]:
    """The Debian packages of BUILD_DEPS (and the namespace's tools) not installed here."""
    out = []
    for pkg in (*BUILD_DEPS, "util-linux", "iproute2"):
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True,
                              text=True)
        if "install ok installed" not in proc.stdout:
            out.append(pkg)
    return out


if __name__ == "__main__":
    # .ci/run: `missing-packages` (to apt-get install), `why-not` ('' where PBS can be
    # tried), `build` (once per tarball); else a cluster by hand in the folder given
    actions = {"missing-packages": lambda: " ".join(missing_packages()), "why-not": why_not,
               "build": build}
    if sys.argv[1:2] and sys.argv[1] in actions:
        print(actions[sys.argv[1]]())
        sys.exit(0)
    cluster = PbsCluster(Path(sys.argv[1] if len(sys.argv) > 1 else "/var/tmp/burstbench-pbs"))
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` stops it as Ctrl-C does
    try:
        cluster.start()
        print(f"PBS up ({cluster.times}): run commands with nsenter -t {cluster.holder.pid} "
              f"-m -n, PBS_CONF_FILE={cluster.home}/pbs.conf; Ctrl-C stops it", flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
