"""The storage benchmark's parameters (040_measure_storage.ipynb's parameters cell):
``storage_*``."""

from __future__ import annotations

from typing import Any

from burstbench.core.checks import (
    INTEGERS,
    Param,
    ParamError,
    check_bool,
    check_choices,
    check_count,
    check_keyed,
    check_label,
    check_list,
    check_positive,
    check_str_list,
    check_text,
)
from burstbench.core.mpi import check_combination
from kernels_ext.common.cli import size_bytes
from kernels_ext.storage import APIS

ACCESS = ("file-per-process", "shared-file")
TARGET_KEYS = {
    "name": "its name in figures and tables (letters, digits, _ . + -)",
    "path": "a folder (made if its parent exists), or gfarm:///folder; $VAR and ${VAR} are "
            "read from the environment",
    "api": "posix, mpiio or gfarm, or a list of them (default: gfarm for gfarm:// paths, "
           "else posix)",
    "direct": "auto (O_DIRECT where the file system takes it), true or false",
    "config": "a Gfarm client configuration (GFARM_CONFIG_FILE for this target's runs)",
    "optional": "true: skip with a note where the folder, the variable or Gfarm is not there",
}


def parse_bytes(v: Any, name: str) -> int:
    """Bytes from 1048576, '1M', '256K', '1GiB' (binary multiples), as the kernel reads them."""
    n = size_bytes(v)
    if n is None:
        raise ParamError(f"{name} must be a number of bytes (4096, 256K, 1M, 1G), not {v!r}")
    if n < 1:
        raise ParamError(f"{name} must be at least 1 byte, not {v!r}")
    return n


def _target(v: Any) -> dict:
    where = "storage_targets"
    v = check_keyed(v, TARGET_KEYS, where, "target")
    for key in ("name", "path"):
        if key not in v:
            raise ParamError(f"{where}: target {v!r} needs a {key}")
    name = check_label(f"{where} name")(v["name"])
    path = check_text(f"{where} path")(v["path"]).strip()
    if not path:
        raise ParamError(f"{where}: target {name} needs a path")
    gfarm = path.startswith("gfarm://")
    apis = check_choices(f"{where} api", APIS, allow_empty=False)(
        v.get("api", "gfarm" if gfarm else "posix"))
    if gfarm and apis != ["gfarm"]:
        raise ParamError(f"{where}: target {name}: a gfarm:// path takes only api gfarm (a "
                         "gfarm2fs mount is a folder, measured with posix or mpiio)")
    if not gfarm and "gfarm" in apis:
        raise ParamError(f"{where}: target {name}: api gfarm needs a gfarm:///folder path")
    direct = v.get("direct", "auto")
    if direct not in ("auto", True, False):
        raise ParamError(f"{where}: target {name}: direct must be auto, true or false, "
                         f"not {direct!r}")
    return {"name": name, "path": path, "api": apis, "direct": direct,
            "config": check_text(f"{where} config")(v.get("config", "")),
            "optional": check_bool(f"{where} optional")(v.get("optional", False))}


def _targets(v: Any) -> list[dict]:
    targets = check_list("storage_targets", _target, allow_empty=False)(v)
    names = [t["name"] for t in targets]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ParamError(f"storage_targets: two targets are named {dupes[0]}")
    return targets


def _size(name: str):
    return lambda v: parse_bytes(v, name)


PARAMS = [
    Param("storage_targets", [{"name": "local", "path": "/tmp/burstbench-storage"}],
          "where to measure, each `{name, path, api, direct, config, optional}`: `path` is a "
          "folder (local scratch, an NFS or Azure NetApp Files or Lustre mount, a gfarm2fs "
          "mount: all through POSIX or MPI-IO) or `gfarm:///folder` (Gfarm's own API); `api` "
          "`posix`, `mpiio`, `gfarm` or a list; `direct` `auto` (O_DIRECT where the file system "
          "takes it, found by trying), `true` (refused where it does not) or `false` (buffered: "
          "reads after dropping the file's cached pages, labelled); `config` a Gfarm client "
          "configuration; `optional: true` skips a target that is not there with a note",
          _targets, shown="`/tmp/burstbench-storage`, POSIX"),
    Param("storage_access", list(ACCESS),
          "IOR's access patterns: `file-per-process` (IOR -F) and/or `shared-file` (segments "
          "x ranks x block)",
          check_choices("storage_access", ACCESS, allow_empty=False)),
    Param("storage_nodes", [1],
          "node counts (hosts from `storage_hosts`, `$PBS_NODEFILE` or `$SLURM_JOB_NODELIST`)",
          check_list("storage_nodes", check_count("storage_nodes", 1), False, INTEGERS)),
    Param("storage_ranks_per_node", [1, 2],
          "MPI ranks per node (IOR's tasks); layouts needing more cores than a node has are "
          "skipped with a note",
          check_list("storage_ranks_per_node", check_count("storage_ranks_per_node", 1), False,
                     INTEGERS)),
    Param("storage_hosts", [],
          "host names of the nodes; empty: `$PBS_NODEFILE` or `$SLURM_JOB_NODELIST`",
          check_str_list("storage_hosts", "host names")),
    Param("storage_combination", {"mpiexec": "mpiexec", "launcher": "hydra"},
          "the launcher, with the keys of a ping-pong combination",
          lambda v: check_combination(v, "storage_combination")),
    Param("storage_transfer_size", "1M",
          "bytes per transfer (IOR -t): `1M`, `256K`, `4096`",
          _size("storage_transfer_size")),
    Param("storage_block_size", "256M",
          "bytes per rank and segment (IOR -b), a multiple of the transfer size. Size it to the "
          "VM: with direct I/O any size measures the device; buffered, the read drops the "
          "file's cached pages on the client, but a shared file system's servers cache too: "
          "there, twice the memory of a node",
          _size("storage_block_size")),
    Param("storage_segments", 1,
          "segments (IOR -s)",
          check_count("storage_segments", 1)),
    Param("storage_fsync", True,
          "fsync after writing, inside the timed write phase (IOR -e)",
          check_bool("storage_fsync")),
    Param("storage_reorder", True,
          "each rank reads what a rank of another node wrote (IOR -C): on one node the same "
          "rank's data, read after its cached pages were dropped",
          check_bool("storage_reorder")),
    Param("storage_collective", [False],
          "MPI-IO transfers independent and/or collective (IOR -c; `api: mpiio` targets only)",
          check_list("storage_collective", check_bool("storage_collective"), False,
                     "a list of true or false values (or one of them)")),
    Param("storage_drop_caches", False,
          "also write 3 to /proc/sys/vm/drop_caches before each read (root only; the whole "
          "node's page cache)",
          check_bool("storage_drop_caches")),
    Param("storage_replicate", 0,
          "bytes of one file replicated between two Gfarm I/O nodes (`gfrep`) per Gfarm "
          "target and repetition, timed as the Gfarm-on-Azure slides did (0: none; `1G`)",
          lambda v: 0 if v in (0, "0") else parse_bytes(v, "storage_replicate")),
    Param("storage_replicate_remote", False,
          "true: the second Gfarm I/O node is at the other site (Flow and the cloud): the "
          "replication's rate is the WAN's, which the burst decision then stages at",
          check_bool("storage_replicate_remote")),
    Param("storage_repetitions", 3,
          "fresh mpiexec runs per configuration",
          check_count("storage_repetitions", 1)),
    Param("storage_timeout_s", 600,
          "seconds per configuration before it is stopped (and its files removed)",
          check_positive("storage_timeout_s")),
]

#: What papermill_params/README.md says of the labels (params.docs() writes it there).
LABELS = ("Labels are `<target>+<api>+<access>[+collective]+<nodes>n<ranks per node>r`, e.g. "
          "`local+posix+file-per-process+1n2r`; a Gfarm replication is `<target>+gfrep`.")
