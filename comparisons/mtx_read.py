"""Reading a Matrix Market file: the hand-written parser it replaced against kernels_ext.biccg.mtx.

Writes the 80^3 7-point Poisson matrix with scipy.io.mmwrite (symmetric: the lower
triangle, 2,028,800 entries) into a temporary folder, plain (``.mtx``), gzipped
(``.mtx.gz``) and, with --tar, as a SuiteSparse-style ``.tar.gz``; then reads each
--rounds times with the old parser (``old_read`` below) and with ``read_mtx``,
alternating which goes first, and prints the median, min and max seconds and the
ratio of medians.  ``scipy.io.mmread`` alone (path in, CSR out, no checks) is the
floor.  Both readers must give the same CSR arrays (canonical: sorted, summed).

    python comparisons/mtx_read.py --rounds 5
    python comparisons/mtx_read.py --rounds 5 --n 80 --tar
"""

from __future__ import annotations

import argparse
import gzip
import io
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernels_ext.biccg.mtx import MtxError, read_header, read_mtx  # noqa: E402

# -- the old parser (kernels_ext/mtx.py before it used scipy.io.mmread), kept here only
# -- to measure against: Python lines into NumPy blocks of 65,536, checked line by line.

def _old_entries(stream, where, first_line, nnz, rows, cols):
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


def old_read(path: Path) -> sp.csr_matrix:
    """The old read_mtx: read_header (the same header checks), the entries in Python; of a
    .tar.gz, the first .mtx member (all the archive is listed first, as before)."""
    if path.name.endswith(".tar.gz"):
        tar = tarfile.open(path, "r:gz")
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".mtx")]
        stream = io.TextIOWrapper(tar.extractfile(members[0]), encoding="ascii",
                                  errors="replace")
    elif path.name.endswith(".gz"):
        stream = gzip.open(path, "rt", encoding="ascii", errors="replace")
    else:
        stream = open(path, encoding="ascii", errors="replace")
    with stream:
        symmetry, rows, cols, nnz, line_no = read_header(stream, str(path))
        i, j, v = _old_entries(stream, str(path), line_no, nnz, rows, cols)
    if symmetry == "symmetric":
        off = i != j
        i, j, v = np.concatenate([i, j[off]]), np.concatenate([j, i[off]]), \
            np.concatenate([v, v[off]])
    A = sp.csr_matrix((v, (i, j)), shape=(rows, cols))
    A.sum_duplicates()
    A.sort_indices()
    return A


def library_only(path: Path) -> sp.csr_matrix:
    """scipy.io.mmread alone (a .tar.gz member as a stream)."""
    if not path.name.endswith(".tar.gz"):
        return scipy.io.mmread(path).tocsr()
    with tarfile.open(path, "r:gz") as tar:
        return scipy.io.mmread(tar.extractfile(tar.next())).tocsr()


def poisson(n: int) -> sp.csr_matrix:
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    I = sp.identity(n)  # noqa: E741 (the identity, as written in the formula)
    return (sp.kron(sp.kron(T, I), I) + sp.kron(sp.kron(I, T), I)
            + sp.kron(sp.kron(I, I), T)).tocsr()


def same(A: sp.csr_matrix, B: sp.csr_matrix) -> bool:
    """The same canonical CSR arrays, dtypes included."""
    def dtypes(M):
        return M.dtype, M.indices.dtype, M.indptr.dtype

    return (A.shape == B.shape and A.has_canonical_format and B.has_canonical_format
            and dtypes(A) == dtypes(B)
            and np.array_equal(A.indptr, B.indptr) and np.array_equal(A.indices, B.indices)
            and np.array_equal(A.data, B.data))


def timed(read, path: Path) -> tuple[float, sp.csr_matrix]:
    t0 = time.perf_counter()
    A = read(path)
    return time.perf_counter() - t0, A


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=80, help="grid edge: n^3 rows (80)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tar", action="store_true", help="also a .tar.gz member")
    a = ap.parse_args()
    readers = {"old": old_read, "new": read_mtx}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / f"poisson{a.n}.mtx"
        scipy.io.mmwrite(base, poisson(a.n), symmetry="symmetric")
        data = base.read_bytes()
        files = {"mtx": base, "mtx.gz": base.with_name(base.name + ".gz")}
        files["mtx.gz"].write_bytes(gzip.compress(data))
        if a.tar:
            files["tar.gz"] = Path(tmp) / f"poisson{a.n}.tar.gz"
            with tarfile.open(files["tar.gz"], "w:gz") as tar:
                tar.add(base, arcname=f"poisson{a.n}/poisson{a.n}.mtx")
        nnz = scipy.io.mminfo(base)[2]
        print(f"Poisson {a.n}^3 by scipy {scipy.__version__} mmwrite: {nnz:,} entries "
              f"(symmetric), {len(data) / 1e6:.1f} MB; "
              + ", ".join(f"{k} {p.stat().st_size / 1e6:.1f} MB" for k, p in files.items()))
        print(f"{'file':8s} {'reader':14s} {'median s':>9s} {'min':>7s} {'max':>7s} "
              f"{'old/new':>8s}")
        for kind, path in files.items():
            times: dict[str, list[float]] = {"old": [], "new": [], "mmread only": []}
            for r in range(a.rounds):
                order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
                got = {}
                for name in order:
                    t, got[name] = timed(readers[name], path)
                    times[name].append(t)
                if not same(got["old"], got["new"]):
                    print(f"{kind}: the readers differ in round {r}")
                    return 1
                t, lib = timed(library_only, path)
                times["mmread only"].append(t)
            med = {k: statistics.median(v) for k, v in times.items()}
            for name, ts in times.items():
                ratio = f"{med['old'] / med[name]:8.1f}" if name != "old" else ""
                print(f"{kind:8s} {name:14s} {med[name]:9.3f} {min(ts):7.3f} {max(ts):7.3f} "
                      f"{ratio}")
        print("identical CSR arrays (indptr, indices, data) in every round: yes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
