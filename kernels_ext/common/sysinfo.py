"""What the operating system says about CPUs, caches, memory and mounts (Linux sysfs/procfs).

Small, dependency-free readers shared by the kernels (default sizes, memory
checks) and by ``burstbench.provenance``.  Every reader returns a neutral value
(0, empty) rather than raising when a file is missing: not every VM exposes
every file, and a missing fact must not stop a measurement.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

SYS_CPU = Path("/sys/devices/system/cpu")

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_cache_size(text: str) -> int:
    """Bytes in a sysfs cache size such as ``"32768K"`` (0 when unreadable)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text)
    return int(m.group(1)) * _UNITS[m.group(2)] if m else 0


def read_text(path: str | Path) -> str:
    """A sysfs/procfs file's text, stripped ("" when it cannot be read)."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def mount_of(path: str) -> dict:
    """The mount a folder is on (/proc/self/mountinfo): its mount point, type, source and
    options; {} where it cannot be read."""
    best: dict = {}
    real = os.path.realpath(path)
    for line in read_text("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        parts, tail = left.split(), right.split()
        if len(parts) < 6 or len(tail) < 2:
            continue
        point = parts[4].replace("\\040", " ")
        if (real == point or real.startswith(point.rstrip("/") + "/")) and \
                len(point) >= len(best.get("mount_point", "")):
            best = {"mount_point": point, "fs_type": tail[0], "source": tail[1],
                    "options": ",".join(dict.fromkeys(parts[5].split(",") + (
                        tail[2].split(",") if len(tail) > 2 else [])))}
    return best


def cpu_topology(cpus: list[int] | None = None,
                 sys_cpu: Path = SYS_CPU) -> list[tuple[int, int, int]]:
    """(cpu, socket, core) of each of `cpus` (default: every CPU sysfs lists), from sysfs;
    a CPU whose topology cannot be read counts as its own core of socket 0."""
    if cpus is None:
        cpus = sorted(int(p.name[3:]) for p in sys_cpu.glob("cpu[0-9]*"))
    out = []
    for cpu in cpus:
        topo = sys_cpu / f"cpu{cpu}" / "topology"
        try:
            pkg = int((topo / "physical_package_id").read_text())
            core = int((topo / "core_id").read_text())
        except (OSError, ValueError):
            pkg, core = 0, cpu
        out.append((cpu, pkg, core))
    return out


_PROCESS_CPUS: set[int] = set()


def process_cpus() -> set[int]:
    """The CPUs this process may run on, as its first look found them: an OpenMP runtime
    binds the thread that starts a bound team to one place (OMP_PROC_BIND), after which
    that thread's own mask (what sched_getaffinity(0) reads) is no longer the process's
    (a process that measures again, or a Jupyter kernel, would see 1 CPU)."""
    if not _PROCESS_CPUS:
        try:
            _PROCESS_CPUS.update(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            _PROCESS_CPUS.update(range(os.cpu_count() or 1))
    return set(_PROCESS_CPUS)


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count)."""
    return len(process_cpus())


def numa_nodes(sys_cpu: Path = SYS_CPU) -> int:
    """NUMA nodes holding the CPUs this process may run on (1 where sysfs says nothing)."""
    mine = process_cpus()
    nodes = {p.name for cpu in mine for p in (sys_cpu / f"cpu{cpu}").glob("node[0-9]*")}
    return max(1, len(nodes))


def caches(sys_cpu: Path = SYS_CPU) -> list[dict]:
    """Every distinct cache instance: level, type, size in bytes and the CPUs sharing it."""
    seen: dict[tuple, dict] = {}
    for index in sorted(sys_cpu.glob("cpu[0-9]*/cache/index[0-9]*")):
        level, ctype = read_text(index / "level"), read_text(index / "type")
        shared = read_text(index / "shared_cpu_list")
        if not level:
            continue
        key = (level, ctype, shared)
        if key not in seen:
            seen[key] = {
                "level": int(level),
                "type": ctype,
                "size_bytes": parse_cache_size(read_text(index / "size")),
                "shared_cpu_list": shared,
            }
    return list(seen.values())


def last_level_cache_bytes(sys_cpu: Path = SYS_CPU) -> int:
    """Total bytes of the machine's last-level cache: all instances of the highest level."""
    found = [c for c in caches(sys_cpu) if c["type"] in ("Unified", "Data")]
    if found:
        top = max(c["level"] for c in found)
        return sum(c["size_bytes"] for c in found if c["level"] == top)
    try:  # glibc's view, one instance only: better than nothing
        return max(0, os.sysconf("SC_LEVEL3_CACHE_SIZE"))
    except (ValueError, OSError):
        return 0


def meminfo(path: Path = Path("/proc/meminfo")) -> dict[str, int]:
    """/proc/meminfo as bytes per field."""
    out: dict[str, int] = {}
    for line in read_text(path).splitlines():
        m = re.match(r"(\w+):\s+(\d+)\s*(kB)?", line)
        if m:
            out[m.group(1)] = int(m.group(2)) * (1024 if m.group(3) else 1)
    return out


def cgroup_memory_limit_bytes(root: Path = Path("/sys/fs/cgroup")) -> int:
    """Memory this cgroup may still use (v2 or v1), or 0 when unlimited/unknown."""
    limit = read_text(root / "memory.max") or read_text(root / "memory/memory.limit_in_bytes")
    used = read_text(root / "memory.current") or read_text(root / "memory/memory.usage_in_bytes")
    if not limit.isdigit() or int(limit) >= 1 << 60:
        return 0
    return max(0, int(limit) - (int(used) if used.isdigit() else 0))


def available_memory_share() -> float:
    """available_memory_bytes() over the machine's MemTotal (1.0 where that is unknown)."""
    total = meminfo().get("MemTotal", 0)
    return available_memory_bytes() / total if total else 1.0


def available_memory_bytes() -> int:
    """Memory a new allocation can use without swapping: MemAvailable, capped by the cgroup."""
    info = meminfo()
    avail = info.get("MemAvailable", info.get("MemFree", 0))
    cap = cgroup_memory_limit_bytes()
    return min(avail, cap) if cap else avail
