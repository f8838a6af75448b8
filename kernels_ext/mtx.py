"""Matrix Market files for the BICCG solver: real coordinate matrices, checked line by line.

Reads ``.mtx``, ``.mtx.gz`` and the SuiteSparse ``.tar.gz`` archives as they
are downloaded (``G3_circuit.tar.gz`` holds ``G3_circuit/G3_circuit.mtx``),
expands symmetric storage, and refuses what the solver cannot use, naming the
line: a missing or malformed header, dense (array) format, pattern-only or
complex values, a malformed or truncated entry list, indices out of range.
"""

from __future__ import annotations

import gzip
import io
import re
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

SUITESPARSE_URL = "https://suitesparse-collection-website.herokuapp.com/MM/{group}/{name}.tar.gz"


class MtxError(ValueError):
    """The file cannot be used; the message names the file and, where it can, the line."""


def _open_text(path: Path) -> tuple[io.TextIOBase, str]:
    """A text stream of the matrix and the name to report (archive member for .tar.gz)."""
    name = path.name
    if name.endswith((".tar.gz", ".tgz")):
        tar = tarfile.open(path, "r:gz")
        stem = re.sub(r"\.(tar\.gz|tgz)$", "", name)
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".mtx")]
        # SuiteSparse archives also hold right-hand sides and coordinates (_b.mtx, ...)
        main = [m for m in members if Path(m.name).name == f"{stem}.mtx"] or \
            [m for m in members if not re.search(r"_[A-Za-z]\w*\.mtx$", m.name)] or members
        if not main:
            raise MtxError(f"{path}: the archive holds no .mtx file")
        raw = tar.extractfile(main[0])
        return io.TextIOWrapper(raw, encoding="ascii", errors="replace"), f"{path}:{main[0].name}"
    if name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="ascii", errors="replace"), str(path)
    return open(path, encoding="ascii", errors="replace"), str(path)


def read_header(stream: io.TextIOBase, where: str) -> tuple[str, int, int, int, int]:
    """Banner and size line: (symmetry, rows, cols, entries, lines read so far)."""
    banner = stream.readline()
    words = banner.lower().split()
    if len(words) < 5 or words[0] != "%%matrixmarket" or words[1] != "matrix":
        raise MtxError(f"{where}: line 1 is not a Matrix Market header "
                       "('%%MatrixMarket matrix coordinate real general')")
    fmt, field, symmetry = words[2], words[3], words[4]
    if fmt != "coordinate":
        raise MtxError(f"{where}: line 1: '{fmt}' (dense) format is not supported, only "
                       "coordinate")
    if field == "pattern":
        raise MtxError(f"{where}: line 1: a pattern-only matrix has no values to solve with")
    if field == "complex":
        raise MtxError(f"{where}: line 1: complex matrices are not supported (real SPD only)")
    if field not in ("real", "integer", "double"):
        raise MtxError(f"{where}: line 1: unknown field '{field}'")
    if symmetry not in ("general", "symmetric"):
        raise MtxError(f"{where}: line 1: '{symmetry}' matrices cannot be symmetric positive "
                       "definite")
    line_no = 1
    for line in stream:
        line_no += 1
        if line.strip() and not line.lstrip().startswith("%"):
            parts = line.split()
            if len(parts) != 3 or not all(p.isdigit() for p in parts):
                raise MtxError(f"{where}: line {line_no}: expected 'rows columns entries', "
                               f"got '{line.strip()[:60]}'")
            rows, cols, nnz = (int(p) for p in parts)
            return symmetry, rows, cols, nnz, line_no
    raise MtxError(f"{where}: the file ends before its size line")


def _entries(stream: io.TextIOBase, where: str, first_line: int, nnz: int,
             rows: int, cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entry lines as 0-based (i, j, value), checked; errors name the file line."""
    i = np.empty(nnz, np.int64)
    j = np.empty(nnz, np.int64)
    v = np.empty(nnz, np.float64)
    k, line_no = 0, first_line
    chunk: list[str] = []
    chunk_lines: list[int] = []

    def flush() -> None:
        nonlocal k
        if not chunk:
            return
        try:
            arr = np.array([c.split() for c in chunk], dtype=np.float64)
        except ValueError:
            for text, at in zip(chunk, chunk_lines):
                parts = text.split()
                try:
                    if len(parts) != 3:
                        raise ValueError
                    [float(p) for p in parts]
                except ValueError:
                    raise MtxError(f"{where}: line {at}: expected 'row column value', got "
                                   f"'{text.strip()[:60]}'") from None
            raise
        if arr.ndim != 2 or arr.shape[1] != 3:
            for text, at in zip(chunk, chunk_lines):
                if len(text.split()) != 3:
                    raise MtxError(f"{where}: line {at}: expected 'row column value', got "
                                   f"'{text.strip()[:60]}'")
        m = len(chunk)
        i[k:k + m], j[k:k + m], v[k:k + m] = arr[:, 0], arr[:, 1], arr[:, 2]
        bad = np.flatnonzero((arr[:, 0] != np.floor(arr[:, 0])) | (arr[:, 1] != np.floor(arr[:, 1]))
                             | (arr[:, 0] < 1) | (arr[:, 0] > rows)
                             | (arr[:, 1] < 1) | (arr[:, 1] > cols))
        if bad.size:
            at = chunk_lines[bad[0]]
            raise MtxError(f"{where}: line {at}: index out of range 1..{rows} x 1..{cols}: "
                           f"'{chunk[bad[0]].strip()[:60]}'")
        k += m
        chunk.clear()
        chunk_lines.clear()

    for line in stream:
        line_no += 1
        if not line.strip() or line.lstrip().startswith("%"):
            continue
        if k + len(chunk) >= nnz:
            raise MtxError(f"{where}: line {line_no}: more entries than the {nnz} the size "
                           "line declares")
        chunk.append(line)
        chunk_lines.append(line_no)
        if len(chunk) >= 1 << 16:
            flush()
    flush()
    if k < nnz:
        raise MtxError(f"{where}: truncated: the size line declares {nnz} entries, the file "
                       f"ends at line {line_no} after {k}")
    return i - 1, j - 1, v


def read_mtx(path: str | Path):
    """Read a real coordinate Matrix Market matrix into a SciPy CSR matrix (symmetric
    storage expanded to both triangles)."""
    import scipy.sparse as sp

    p = Path(path)
    if not p.is_file():
        raise MtxError(f"{p}: no such file")
    try:
        stream, where = _open_text(p)
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise MtxError(f"{p}: cannot read ({exc})") from exc
    with stream:
        try:
            symmetry, rows, cols, nnz, line_no = read_header(stream, where)
            i, j, v = _entries(stream, where, line_no, nnz, rows, cols)
        except (OSError, EOFError, gzip.BadGzipFile, tarfile.TarError) as exc:
            raise MtxError(f"{where}: damaged or truncated compressed file ({exc})") from exc
    if symmetry == "symmetric":
        off = i != j
        i, j, v = np.concatenate([i, j[off]]), np.concatenate([j, i[off]]), \
            np.concatenate([v, v[off]])
    A = sp.csr_matrix((v, (i, j)), shape=(rows, cols))
    A.sum_duplicates()
    A.sort_indices()
    return A


def fetch_suitesparse(name: str = "G3_circuit", group: str = "AMD",
                      dest: str | Path = ".", timeout: float = 60) -> Path:
    """Download ``<group>/<name>.tar.gz`` from the SuiteSparse collection into `dest`.

    Where the network does not allow it, raises MtxError saying so: download
    the file elsewhere and pass its path (the normal input is a local file).
    """
    out = Path(dest) / f"{name}.tar.gz"
    if out.exists():
        return out
    url = SUITESPARSE_URL.format(group=group, name=name)
    tmp = out.with_suffix(".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as fh:
            while block := resp.read(1 << 20):
                fh.write(block)
    except (urllib.error.URLError, OSError) as exc:
        tmp.unlink(missing_ok=True)
        raise MtxError(f"could not download {url} ({exc}); download it where the network "
                       f"allows and pass the local file") from exc
    tmp.rename(out)
    return out


def main(argv=None) -> int:
    """``python -m kernels_ext.mtx``: fetch a SuiteSparse matrix, or check a file."""
    import argparse
    import sys

    p = argparse.ArgumentParser(
        prog="python -m kernels_ext.mtx",
        description="Download a matrix from the SuiteSparse collection (where the network "
                    "allows), or read a Matrix Market file and print its size.",
        epilog="examples:\n  python -m kernels_ext.mtx --fetch G3_circuit --dest data/matrices\n"
               "  python -m kernels_ext.mtx --check data/matrices/G3_circuit.tar.gz",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--fetch", metavar="NAME", help="matrix name, e.g. G3_circuit")
    g.add_argument("--check", metavar="FILE", help="a .mtx, .mtx.gz or .tar.gz to read")
    p.add_argument("--group", default="AMD", help="SuiteSparse group (G3_circuit: AMD)")
    p.add_argument("--dest", default="data/matrices", help="where to save (data/matrices)")
    a = p.parse_args(argv)
    try:
        if a.fetch:
            Path(a.dest).mkdir(parents=True, exist_ok=True)
            print(fetch_suitesparse(a.fetch, a.group, a.dest))
        else:
            A = read_mtx(a.check)
            print(f"{a.check}: {A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros (both triangles)")
    except MtxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
