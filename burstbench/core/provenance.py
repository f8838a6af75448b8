"""Provenance of a run: the machine, the software and the source it measured with.

Collected once per run (``collect``) and stored in the run's provenance.json;
each benchmark adds its own section (variants, OpenMP runtime, start and end).
Every reader tolerates a missing file: a fact that cannot be read is recorded
as absent, never guessed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path

from kernels_ext.common import sysinfo

PACKAGES = ("burstbench", "numpy", "scipy", "pandas", "numba", "llvmlite", "matplotlib",
            "seaborn", "papermill", "nbclient", "ipykernel", "mpi4py", "mpich",
            "scikit-build-core")
ENV_PREFIXES = ("OMP_", "KMP_", "GOMP_", "NUMBA_", "MKL_", "OPENBLAS_", "I_MPI_", "MPICH_",
                "OMPI_", "UCX_", "PBS_", "SLURM_", "BURSTBENCH_")
ENV_NAMES = ("PATH", "LD_LIBRARY_PATH", "CC", "CFLAGS", "VIRTUAL_ENV", "CONDA_PREFIX")
COMPILERS = ("gcc", "clang", "icx", "icc", "nvc")


def _cpulist_len(text: str) -> int:
    n = 0
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        n += int(hi) - int(lo) + 1 if hi else 1
    return n


def cpu() -> dict:
    """CPU model, sockets, cores, threads per core, caches, flags of note."""
    info = sysinfo.read_text("/proc/cpuinfo")
    model = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
    vendor = re.search(r"^vendor_id\s*:\s*(.+)$", info, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", info, re.M)
    topo = sysinfo.cpu_topology()
    packages = {pkg for _, pkg, _ in topo}
    cores = {(pkg, core) for _, pkg, core in topo}
    logical = len(topo) or os.cpu_count() or 0
    flag_set = set(flags.group(1).split()) if flags else set()
    return {
        "model": model.group(1).strip() if model else platform.processor(),
        "vendor": vendor.group(1).strip() if vendor else "",
        "architecture": platform.machine(),
        "sockets": len(packages) or None,
        "cores": len(cores) or None,
        "logical_cpus": logical,
        "threads_per_core": (logical // len(cores)) if cores else None,
        "online": sysinfo.read_text("/sys/devices/system/cpu/online"),
        "available_to_process": sysinfo.available_cpus(),
        "caches": sysinfo.caches(),
        "last_level_cache_bytes": sysinfo.last_level_cache_bytes(),
        "simd": sorted(f for f in flag_set if f in ("sse4_2", "avx", "avx2", "avx512f", "fma",
                                                    "sve", "asimd")),
        "hypervisor": "hypervisor" in flag_set,
        "governor": sysinfo.read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
    }


def numa() -> list[dict]:
    """NUMA nodes: CPUs and memory of each."""
    nodes = []
    for node in sorted(Path("/sys/devices/system/node").glob("node[0-9]*")):
        mem = re.search(r"MemTotal:\s+(\d+)\s*kB", sysinfo.read_text(node / "meminfo"))
        cpulist = sysinfo.read_text(node / "cpulist")
        nodes.append({"node": int(node.name[4:]), "cpus": cpulist,
                      "ncpus": _cpulist_len(cpulist),
                      "memory_bytes": int(mem.group(1)) * 1024 if mem else None})
    return nodes


def memory() -> dict:
    info = sysinfo.meminfo()
    return {"total_bytes": info.get("MemTotal"), "available_bytes": info.get("MemAvailable"),
            "cgroup_available_bytes": sysinfo.cgroup_memory_limit_bytes() or None,
            "transparent_hugepages": sysinfo.read_text(
                "/sys/kernel/mm/transparent_hugepage/enabled"),
            "swap_bytes": info.get("SwapTotal")}


def operating_system() -> dict:
    osr = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', sysinfo.read_text("/etc/os-release"), re.M))
    u = platform.uname()
    return {"name": osr.get("PRETTY_NAME", u.system), "kernel": u.release,
            "kernel_version": u.version, "cpu_max": sysinfo.read_text("/sys/fs/cgroup/cpu.max")}


def compilers() -> dict:
    """Banner of each known compiler this machine has (absent ones are left out)."""
    from kernels_ext.common import variants

    out = {}
    for name in COMPILERS:
        try:
            c = variants.identify(name)
        except variants.VariantError:
            continue
        out[name] = {"path": c.path, "family": c.family, "version": c.version,
                     "banner": c.banner}
    return out


def packages() -> dict:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def environment(prefixes: tuple[str, ...] = ()) -> dict:
    """The environment variables that change what is measured, or where: ENV_PREFIXES,
    ENV_NAMES and the `prefixes` the benchmarks declare (registry.env_prefixes)."""
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(ENV_PREFIXES + tuple(prefixes)) or k in ENV_NAMES}


def git(root: Path) -> dict:
    """Commit, branch and whether the working tree differs from it."""
    def run(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                  text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    commit = run("rev-parse", "HEAD")
    if not commit:
        return {"commit": None, "dirty": None}
    status = run("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "branch": run("rev-parse", "--abbrev-ref", "HEAD"),
            "dirty": bool(status), "changed_files": status.splitlines()[:50]}


def source_digest(files: dict[str, bytes]) -> str:
    """The digest of a native kernel's build: sha256 over its sources and headers, each as
    its file name (no folder: a move keeps the build) and its bytes, in name order; 16 hex
    digits.  Two runs with the same digest ran the same C."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    return h.hexdigest()[:16]


def builds(root: Path) -> dict:
    """Per native kernel (kernels_ext/<kernel>/kernel.json), the digest of the sources and
    headers it declares (source_digest): what the run's numbers were measured with."""
    out = {}
    for spec in sorted((root / "kernels_ext").glob("*/kernel.json")):
        try:
            decl = json.loads(spec.read_text())
            names = [*decl.get("sources", []), *decl.get("headers", [])]
            files = {Path(n).name: (spec.parent / n).read_bytes() for n in names}
        except (OSError, ValueError):
            continue
        if files:
            out[spec.parent.name] = {"source_digest": source_digest(files),
                                     "files": sorted(files)}
    return out


def collect(root: Path, env_prefixes: tuple[str, ...] = ()) -> dict:
    """Everything recorded once per run (`env_prefixes`: see environment)."""
    return {
        "system": {"hostname": socket.gethostname(), "fqdn": socket.getfqdn(), "cpu": cpu(),
                   "numa": numa(), "memory": memory(), "os": operating_system()},
        "software": {"python": sys.version.split()[0], "python_executable": sys.executable,
                     "packages": packages(), "compilers": compilers()},
        "environment": environment(env_prefixes),
        "git": git(root),
        "builds": builds(root),
    }
