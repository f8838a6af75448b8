"""Files written whole: a reader sees the old file or the new one, never a part of one; and
what a manifest records of a file (size, SHA-256, rows)."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import secrets
from pathlib import Path


class StoreError(Exception):
    """A run folder cannot be used; one line naming it."""


class NoSpace(StoreError):
    """The run folder's file system is full: the sweep stops at once, what is stored stays
    whole (every file is written whole or not at all) and the run resumes once space is
    freed."""

    @classmethod
    def at(cls, folder: Path) -> NoSpace:
        """'no space left on <folder> (N bytes free)'."""
        return cls(f"no space left on {folder} ({free_bytes(folder)} bytes free)")


def free_bytes(folder: Path) -> int:
    """Bytes free to this user on `folder`'s file system (-1 where it cannot be asked)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return -1
    return st.f_bavail * st.f_frsize


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write `data` to `path` so that readers see the old or the new file, never a part."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    raw = data.encode() if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    with contextlib.suppress(OSError):  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    """``20261123T001131Z-1a2b``: UTC start time, sortable, plus a few random hex digits."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


def file_facts(path: Path) -> dict:
    """What a manifest records of a file: its size, SHA-256 and number of data rows (lines,
    less a CSV's header)."""
    raw = Path(path).read_bytes()
    lines = raw.count(b"\n") + (1 if raw and not raw.endswith(b"\n") else 0)
    return {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest(),
            "rows": lines - 1 if Path(path).suffix == ".csv" and lines else lines}
