"""A real Slurm cluster on this one host, for the tests: munged, slurmctld and two slurmd.

Debian's ``slurm-wlm`` runs several slurmd on one host (``slurmd -N NAME``, a
port per node, ``NodeHostname`` this host), so ``sbatch -N 2`` gets a real
two-node allocation and ``srun --mpi=pmi2`` one MPI world across it.  Every
file (configuration, munge key and socket, state, spool, logs, each node's
TmpFS) lives in one folder; nothing under /etc or /run is touched, so the
cluster can run beside a system one.  Daemons run in the foreground as our
children and are stopped by :meth:`SlurmCluster.stop`, whatever happened.

By hand (a user trying the batch path without a cluster)::

    python tests/slurm_cluster.py /tmp/cluster    # prints the SLURM_CONF to export; Ctrl-C stops
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scheduler_cluster import ClusterError, pids_mentioning, wait_job, wait_jobs_gone

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo")


def missing_programs() -> list[str]:
    """The Slurm and munge programs this host lacks (sbin included)."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [p for p in DAEMONS if shutil.which(p, path=path) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_resources() -> tuple[int, int]:
    """(CPUs, RealMemory in MB) of this host as slurmd itself sees them (``slurmd -C``)."""
    out = subprocess.run([_sbin("slurmd"), "-C"], capture_output=True, text=True).stdout
    cpus = re.search(r"\bCPUs=(\d+)", out)
    mem = re.search(r"\bRealMemory=(\d+)", out)
    if not cpus or not mem:
        raise ClusterError(f"slurmd -C gave no CPUs/RealMemory: {out.strip()!r}")
    # leave slurmd's own estimate a margin: a node whose memory shrinks below RealMemory drains
    return int(cpus.group(1)), int(int(mem.group(1)) * 0.9)


def _sbin(name: str) -> str:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") or name


class SlurmCluster:
    """munged + slurmctld + ``len(nodes)`` slurmd on this host, configured under `root`."""

    def __init__(self, root: Path, nodes: tuple[str, ...] = ("n1", "n2"),
                 partition: str = "debug", partitions: dict[str, tuple[str, ...]] | None = None,
                 backfill_s: int = 30, future: tuple[str, ...] = ()):
        """`partitions` (name -> its nodes; the first the default) in place of one
        `partition` of every node; `backfill_s`: the backfill scheduler's interval (it sets
        pending jobs' expected starts); `future`: nodes configured but not there
        (State=FUTURE: no slurmd, and sinfo does not list them, as a cloud's powered-down
        nodes), which `partitions` may name."""
        self.root = Path(root)
        self.nodes = nodes
        self.partition = partition
        self.partitions = partitions or {partition: nodes}
        self.backfill_s = backfill_s
        self.future = future
        self.conf = self.root / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.procs: dict[str, subprocess.Popen] = {}
        self.host = socket.gethostname()

    # -- environment for clients --------------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        """Variables a client (sbatch, squeue, burstbench jobs --submit) needs to reach us."""
        return {"SLURM_CONF": str(self.conf)}

    def client_env(self) -> dict[str, str]:
        return os.environ | self.env

    def run(self, *argv: str, timeout: float = 60, check: bool = False,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run a Slurm client command against this cluster."""
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=self.client_env() | (env or {}))
        if check and proc.returncode != 0:
            raise ClusterError(f"{' '.join(argv)}: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc

    # -- configuration ------------------------------------------------------------------------
    def write_config(self) -> None:
        """slurm.conf for this host: its real CPUs and memory, everything under root."""
        cpus, mem = node_resources()
        for d in ("state", "spool", "log", "tmp", "munge"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        for n in self.nodes:
            (self.root / "tmp" / n).mkdir(exist_ok=True)
            (self.root / "spool" / n).mkdir(exist_ok=True)
        (self.root / "munge").chmod(0o700)
        r = self.root
        nodes = "\n".join(f"NodeName={n} NodeHostname={self.host} NodeAddr=127.0.0.1 "
                          f"Port={_free_port()} CPUs={cpus} RealMemory={mem} State=UNKNOWN"
                          for n in self.nodes)
        nodes += "".join(f"\nNodeName={n} CPUs={cpus} RealMemory={mem} State=FUTURE"
                         for n in self.future)
        parts = "\n".join(f"PartitionName={name} Nodes={','.join(ns)} "
                          f"Default={'YES' if i == 0 else 'NO'} MaxTime=INFINITE State=UP "
                          "OverSubscribe=NO"
                          for i, (name, ns) in enumerate(self.partitions.items()))
        self.conf.write_text(f"""# Written by tests/slurm_cluster.py: {len(self.nodes)} nodes \
on {self.host}
ClusterName=burstbench
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
TmpFS={r}/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
EnforcePartLimits=ALL
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval={self.backfill_s}
MessageTimeout=10
SlurmdTimeout=60
InactiveLimit=0
KillWait=10
MinJobAge=600
JobCompType=jobcomp/filetxt
JobCompLoc={r}/log/jobcomp.txt
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
PlugStackConfig={r}/plugstack.conf
{nodes}
{parts}
""")
        (r / "plugstack.conf").write_text("")

    # -- daemons ------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.stdout", "w")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self.client_env(),
                                            start_new_session=True)
        log.close()

    def start(self, timeout: float = 60) -> SlurmCluster:
        """Start every daemon and wait until ``sinfo`` shows all nodes idle."""
        missing = missing_programs()
        if missing:
            raise ClusterError(f"not installed: {', '.join(missing)} "
                               "(apt-get install slurm-wlm munge)")
        self.write_config()
        key = self.root / "munge" / "munge.key"
        subprocess.run([_sbin("mungekey"), "--create", f"--keyfile={key}"], check=True,
                       capture_output=True)
        key.chmod(0o600)
        m = self.root / "munge"
        self._spawn("munged", [_sbin("munged"), "--foreground", "--force",
                               f"--socket={self.munge_socket}", f"--key-file={key}",
                               f"--pid-file={m}/munged.pid", f"--log-file={m}/munged.log",
                               f"--seed-file={m}/munged.seed"])
        self._wait(lambda: self.munge_socket.exists(), timeout, "munged")
        self._spawn("slurmctld", [_sbin("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._wait(lambda: self.run("scontrol", "ping", timeout=20).returncode == 0
                   and "UP" in self.run("scontrol", "ping", timeout=20).stdout, timeout,
                   "slurmctld")
        for n in self.nodes:
            self._spawn(f"slurmd-{n}", [_sbin("slurmd"), "-D", "-N", n, "-f", str(self.conf)])
        self._wait(self.all_idle, timeout, "slurmd")
        return self

    def all_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %t", timeout=20).stdout.split()
        states = dict(zip(out[::2], out[1::2]))
        return all(states.get(n) == "idle" for n in self.nodes)

    def _wait(self, ready, timeout: float, name: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            dead = [k for k, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise ClusterError(f"{dead[0]} exited ({self.procs[dead[0]].returncode}): "
                                   f"{self.log_tail(dead[0])}")
            try:
                if ready():
                    return
            except subprocess.TimeoutExpired:
                pass
            time.sleep(0.3)
        raise ClusterError(f"{name} not ready within {timeout:g} s: {self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 5) -> str:
        """The last lines a daemon wrote (its own log file, else its stdout)."""
        for f in (self.root / "log" / f"{name}.log", self.root / "log" / f"{name}.stdout",
                  self.root / "munge" / "munged.log"):
            if f.exists() and f.stat().st_size:
                return " | ".join(f.read_text(errors="replace").strip().splitlines()[-lines:])
        return "(no log)"

    def stop_daemon(self, name: str, timeout: float = 15) -> None:
        """SIGTERM a daemon (and its session), SIGKILL what is left after `timeout`."""
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def job_pids(self) -> list[int]:
        """Processes of any job of this cluster: a SLURM_JOB_ID and this cluster's SLURM_CONF
        in their environment (the daemons have no job id; another cluster has another conf)."""
        conf = f"\0SLURM_CONF={self.conf}\0".encode()
        pids = []
        for d in Path("/proc").glob("[0-9]*"):
            try:
                env = b"\0" + (d / "environ").read_bytes() + b"\0"
            except OSError:
                continue
            if conf in env and b"\0SLURM_JOB_ID=" in env:
                pids.append(int(d.name))
        return pids

    def clean(self, timeout: float = 60) -> None:
        """A test's end, whether it passed or not: every job not finished cancelled, and no
        process of any job left (one left measuring holds the host's lock: the next tests
        fail on it).  ClusterError, naming them, for processes still there after `timeout`
        s (killed)."""
        self.run("scancel", "--full", "-u", "root", timeout=30)
        active = ("squeue", "-h", "-t", "PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING",
                  "-o", "%i")
        wait_jobs_gone(lambda: bool(self.run(*active, timeout=30).stdout.strip()),
                       self.job_pids, timeout)

    def stop(self) -> None:
        """Cancel every job, then stop every daemon: slurmd first, munged last."""
        if "slurmctld" in self.procs:
            try:
                self.run("scancel", "--full", "-u", "root", timeout=15)
            except (subprocess.TimeoutExpired, OSError):
                pass
        for name in [k for k in self.procs if k.startswith("slurmd")] + ["slurmctld", "munged"]:
            self.stop_daemon(name)
        # slurmstepd and job processes outlive slurmd by design: end any left under our root
        for pid in pids_mentioning(str(self.root)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    # -- jobs ---------------------------------------------------------------------------------
    def job(self, jobid: str) -> dict[str, str]:
        """``scontrol show job`` as a dict (empty when Slurm no longer knows the job)."""
        proc = self.run("scontrol", "-o", "show", "job", jobid, timeout=20)
        if proc.returncode != 0:
            return {}
        return dict(re.findall(r"(\w+(?::\w+)?)=(\S*)", proc.stdout))

    def wait_job(self, jobid: str, states: tuple[str, ...] = ("COMPLETED", "FAILED",
                 "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"),
                 timeout: float = 300) -> dict[str, str]:
        """Wait until the job is in one of `states`; its record then (ClusterError on time-out)."""
        return wait_job(self.job, jobid, "JobState", states, timeout, "Reason")


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/burstbench-slurm").resolve()
    cluster = SlurmCluster(root)
    try:
        cluster.start()
        print(f"cluster up: export SLURM_CONF={cluster.conf}; Ctrl-C stops it", flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A real Slurm cluster for the module that asks for it (tests/test_slurm.py's jobs,
    tests/test_replay.py's sacct path), stopped after it; skipped with the reason, or a
    failure where BURSTBENCH_REQUIRE_SLURM=1 (scheduler_cluster.session)."""
    from scheduler_cluster import session

    missing = missing_programs()
    yield from session(SlurmCluster(tmp_path_factory.mktemp("slurm")), "Slurm",
                       "BURSTBENCH_REQUIRE_SLURM",
                       f"not installed ({', '.join(missing)}): apt-get install slurm-wlm munge"
                       if missing else "")
