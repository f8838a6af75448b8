"""The Gfarm file system the tests start (tests/gfarm_cluster.py): real daemons, real data.

One file system (gfmd, I/O nodes on 127.0.0.1 and 127.0.0.2, a gfarm2fs mount) serves the
session; the tests that stop or break one start their own small one under tmp_path. Skipped
with the reason where Gfarm cannot run here, unless BURSTBENCH_REQUIRE_GFARM=1 makes that a
failure.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import signal
import socket
import time
from pathlib import Path

import pytest
from gfarm_cluster import GfarmCluster, GfarmError, problem, replicate, start_or_skip
from gfarm_cluster import gfarm as gfarm_fixture  # noqa: F401 (the fixture, by its name "gfarm")

pytestmark = pytest.mark.gfarm
MiB = 1 << 20


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def where(g: GfarmCluster, path: str) -> list[str]:
    """The I/O nodes holding a replica of `path`, sorted."""
    return sorted(g.run("gfwhere", path, check=True).stdout.split())


def export(g: GfarmCluster, path: str) -> bytes:
    """The file's bytes as gfexport writes them to a pipe (the case that once stopped at
    64 KiB)."""
    proc = g.run("gfexport", path, text=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def alive(pids: list[int]) -> list[int]:
    """Those of `pids` still running (zombies count as gone)."""
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            out.append(pid)
    return out


def cmdline(pid: int) -> str:
    """The process's command line ('' once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (a folder, a port)."""
    pids = [int(d.name) for d in Path("/proc").glob("[0-9]*")]
    return [cmdline(pid) for pid in alive(pids) if text in cmdline(pid)]


def mounted(path: Path) -> bool:
    return any(line.split()[1] == str(path) for line in open("/proc/self/mounts"))


def listening(host: str, port: int) -> bool:
    """Whether something accepts connections there (a stopped daemon's port may still be in
    TIME_WAIT, so binding it is no test)."""
    try:
        socket.create_connection((host, port), timeout=5).close()
        return True
    except OSError:
        return False


def test_gfarm_can_run_here(gfarm):
    assert problem() == ""
    assert problem(mount=False) == ""


def test_two_io_nodes_on_two_addresses(gfarm):
    assert sorted(gfarm.hosts_up()) == ["127.0.0.1", "127.0.0.2"]
    # gfhost -l: "<load> <auth> <arch> <ncpu> <host> <port> <flags>(<address>)"
    rows = [ln.split() for ln in gfarm.run("gfhost", "-l", check=True).stdout.splitlines()]
    assert sorted((r[-3], int(r[-2])) for r in rows) == sorted(gfarm.nodes)
    assert [h for h, _ in gfarm.nodes] == ["127.0.0.1", "127.0.0.2"]
    assert len({p for _, p in gfarm.nodes} | {gfarm.gfmd_port}) == 3


def test_bytes_through_the_mount_and_the_commands_agree(gfarm, tmp_path):
    data = os.urandom(5 * MiB + 123)
    (gfarm.mount / "via-mount.bin").write_bytes(data)
    assert sha(export(gfarm, "gfarm:///via-mount.bin")) == sha(data)
    for i, (host, _) in enumerate(gfarm.nodes):  # the near node and the far one
        src = tmp_path / f"src{i}"
        src.write_bytes(os.urandom(3 * MiB + i))
        gfarm.run("gfreg", "-h", host, str(src), f"/via-gfreg{i}.bin", check=True)
        assert where(gfarm, f"/via-gfreg{i}.bin") == [host]
        assert sha((gfarm.mount / f"via-gfreg{i}.bin").read_bytes()) == sha(src.read_bytes())
        assert sha(export(gfarm, f"/via-gfreg{i}.bin")) == sha(src.read_bytes())


def test_o_direct_through_the_mount(gfarm):
    assert gfarm.direct_io  # probed at start
    buf = mmap.mmap(-1, MiB)  # page-aligned, as O_DIRECT wants
    buf.write(os.urandom(MiB))
    fd = os.open(gfarm.mount / "direct.bin", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        assert os.write(fd, buf) == MiB
    finally:
        os.close(fd)
    assert sha(export(gfarm, "/direct.bin")) == sha(buf[:])


def test_node_env_pins_where_new_files_go(gfarm, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(os.urandom(MiB))
    for i, (host, _) in enumerate(gfarm.nodes):
        gfarm.run("gfreg", str(src), f"/pinned{i}.bin", check=True, env=gfarm.node_env(i))
        assert where(gfarm, f"/pinned{i}.bin") == [host]


def test_replicate_to_the_other_node(gfarm, tmp_path):
    src = tmp_path / "src"
    src.write_bytes(os.urandom(8 * MiB))
    near, far = (h for h, _ in gfarm.nodes)
    gfarm.run("gfreg", "-h", near, str(src), "/rep.bin", check=True)
    assert where(gfarm, "/rep.bin") == [near]
    seconds = replicate(gfarm, "gfarm:///rep.bin", 1)
    assert 0 < seconds < 60
    assert where(gfarm, "/rep.bin") == sorted([near, far])
    assert sha(export(gfarm, "/rep.bin")) == sha(src.read_bytes())
    with pytest.raises(GfarmError, match="gfrep of /no-such-file to 127.0.0.2 failed"):
        replicate(gfarm, "/no-such-file", 1)


def test_stop_leaves_nothing_behind(tmp_path):
    g = start_or_skip(tmp_path / "g")
    pids = g.processes()
    gfsd = [pid for pid in pids if "gfsd" in cmdline(pid)]
    assert len(gfsd) >= 4  # each node: its listener and its back channel to gfmd
    assert mounted(g.mount) and mentioning(str(g.folder))
    g.stop_gfmd()  # the metadata server alone
    assert "gfmd" not in g.procs and all(g.procs[f"gfsd{i}"].poll() is None for i in (0, 1))
    t0 = time.monotonic()
    g.stop()
    assert time.monotonic() - t0 < 30  # a hang guard, with room for a loaded machine
    assert alive(pids) == [] and g.processes() == []
    assert mentioning(str(g.folder)) == [] and mentioning(f"localhost:{g.gfmd_port}") == []
    assert not mounted(tmp_path / "g" / "mnt") and g.mount is None
    assert not [p for h, p in g.nodes if Path(f"/tmp/.gfarm-gfsd{h}-{p}").exists()]
    assert not [a for a in [("127.0.0.1", g.gfmd_port), *g.nodes] if listening(*a)]
    g.stop()  # twice: nothing to do, no error
    assert g.processes() == []


def test_a_killed_io_node_refuses_writes_meant_for_it(tmp_path):
    src = tmp_path / "src"
    src.write_bytes(os.urandom(MiB))
    with start_or_skip(tmp_path / "g", mount=False) as g:
        assert g.mount is None
        near, far = (h for h, _ in g.nodes)
        g.kill_gfsd(1, signal.SIGKILL)
        assert g.procs["gfsd1"].returncode == -signal.SIGKILL
        assert Path(f"/tmp/.gfarm-gfsd{far}-{g.nodes[1][1]}").exists()  # stop() removes it
        deadline = time.monotonic() + 30  # at once, in fact: generous for a loaded machine
        while g.hosts_up() != [near] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert g.hosts_up() == [near]
        t0 = time.monotonic()
        proc = g.run("gfreg", "-h", far, str(src), "/for-far.bin")
        assert proc.returncode == 1
        assert re.search(r"^/for-far\.bin: connection refused$", proc.stderr, re.M), proc.stderr
        assert time.monotonic() - t0 < 25  # no retrying: refused at once (room for load)
        # what is not pinned to it goes to the node still up, even when asked for the far one
        g.run("gfreg", str(src), "/anywhere.bin", check=True, env=g.node_env(1))
        assert where(g, "/anywhere.bin") == [near]
        pids = g.processes()
    assert alive(pids) == [] and g.processes() == []
    assert not Path(f"/tmp/.gfarm-gfsd{far}-{g.nodes[1][1]}").exists()
