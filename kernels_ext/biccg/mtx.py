"""Matrix Market files for the BICCG solver: real coordinate matrices, read by SciPy.

Reads ``.mtx``, ``.mtx.gz`` and the SuiteSparse ``.tar.gz`` archives as they
are downloaded (``G3_circuit.tar.gz`` holds ``G3_circuit/G3_circuit.mtx``), as
streams: nothing is extracted to disk.  The entry list is parsed by
``scipy.io.mmread`` (fast_matrix_market inside, SciPy 1.12 and later: about
20x faster than the Python parser it replaced, comparisons/mtx_read.py); this
module reads the header lines itself first and checks the bytes the library
is handed, so that every refusal names the file and says what is wrong:

- header (read here, before any entry): a missing or malformed banner, dense
  (``array``) format, ``pattern`` or ``complex`` values, an unknown field,
  symmetries other than ``general`` and ``symmetric`` (``skew-symmetric`` and
  ``hermitian``), a malformed size line, a symmetric matrix that is not square,
  and a size line that declares more entries than the bytes that follow can
  hold (where the size is known: ``.mtx`` and ``.tar.gz`` members).  Fields
  ``real``, ``double`` and ``integer`` are read as float64 (an integer file
  exactly as before, values past int64 included).
- entry list, each line named (by these checks, or by the library's own
  ``Line N`` where it finds the fault): a character no number is made of (a NUL
  byte, a letter, a decimal comma, a Fortran ``D`` exponent, a comment line: the
  library reads ``1,5`` as 1 and ``1.5D+03`` as 1.5, and crashes on a NUL byte
  after a value, so these never reach it), more than ``row column value`` on a
  line, a value or index that is not a number, an index out of range, more
  entries than the size line declares.  ``nan`` and ``inf`` are read (the
  solver refuses them with its own message): the lines of the blocks that hold
  them are checked one by one.
- a truncated entry list names the line the file ends at (or, caught before
  reading, how many entries the bytes after the size line can hold); a damaged
  or truncated compressed file says so; a size line that declares more entries
  than memory holds says so.

What is not pinpointed: a malformed number made only of number characters
(``1.2.3``, ``1e``, ``1-2``) is read by the library as its longest valid
prefix, without an error; where a line with an extra value shares a 1 MiB
block with blank lines, the refusal names the problem but not the line; and
with a SciPy older than 1.12 the library's messages are passed on as they are
(after the file's name).

Symmetric storage is expanded to both triangles.  Entries of a symmetric file
stored in the upper triangle are mirrored like those in the lower one (the same
matrix); an entry stored in both triangles, like any duplicate, is summed.

Long: one file format's rules in one place (read, check, fetch, write); most of the
length is the refusals listed above, each needing the header's and the stream's state.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import re
import tarfile
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import numpy as np

SUITESPARSE_URL = "https://suitesparse-collection-website.herokuapp.com/MM/{group}/{name}.tar.gz"

_BLOCK = 1 << 20                      # bytes read and checked at a time
_NUMBER = b"0123456789+-.eE \t\r\n"   # what an entry list of plain numbers is made of
_WORDS = b"nNaAiIfFtTyY"              # nan, inf, infinity: their lines are checked one by one
_ENTRY = re.compile(rb"[ \t]*\d+[ \t]+\d+[ \t]+[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
                    rb"|nan|inf(?:inity)?)[ \t\r]*|[ \t\r]*", re.IGNORECASE)
_BROKEN = (OSError, EOFError, zlib.error, tarfile.TarError)  # damaged or truncated archives


class MtxError(ValueError):
    """The file cannot be used; the message names the file and, where it can, the line."""


def _show(line: bytes | str) -> str:
    """A line for a message: stripped, at most 60 characters, quoted, non-ASCII escaped."""
    text = line.decode("ascii", "replace") if isinstance(line, bytes) else line
    return ascii(text.strip()[:60])


def _open(path: Path, stack: contextlib.ExitStack) -> tuple[io.BufferedIOBase, str, int | None]:
    """A binary stream of the matrix, the name to report (archive member for .tar.gz) and
    the size in bytes where it is known without reading (not for .gz)."""
    name = path.name
    if name.endswith((".tar.gz", ".tgz")):
        tar = stack.enter_context(tarfile.open(path, "r:gz"))
        stem = re.sub(r"\.(tar\.gz|tgz)$", "", name)
        members = []
        for m in tar:  # lazily: the archive is read only up to the matrix when it is named
            if m.isfile() and m.name.endswith(".mtx"):
                if Path(m.name).name == f"{stem}.mtx":
                    members = [m]
                    break
                members.append(m)
        # SuiteSparse archives also hold right-hand sides and coordinates (_b.mtx, ...)
        main = [m for m in members if not re.search(r"_[A-Za-z]\w*\.mtx$", m.name)] or members
        if not main:
            raise MtxError(f"{path}: the archive holds no .mtx file")
        return stack.enter_context(tar.extractfile(main[0])), f"{path}:{main[0].name}", \
            main[0].size
    if name.endswith(".gz"):
        return stack.enter_context(gzip.open(path, "rb")), str(path), None
    return stack.enter_context(open(path, "rb")), str(path), path.stat().st_size


class _Lines:
    """Text lines for `read_header` from a binary stream, keeping the bytes read."""

    def __init__(self, raw: io.BufferedIOBase):
        self.raw, self.read = raw, []

    def readline(self, limit: int = -1) -> str:
        line = self.raw.readline(limit)
        self.read.append(line)
        return line.decode("ascii", "replace")


def read_header(stream: io.TextIOBase, where: str) -> tuple[str, int, int, int, int]:
    """Banner and size line of a text stream (anything with ``readline``): (symmetry,
    rows, cols, entries, lines read so far).  Reads nothing past the size line."""
    banner = stream.readline(1024)
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
    while line := stream.readline():
        line_no += 1
        if line.strip() and not line.lstrip().startswith("%"):
            parts = line.split()
            if len(parts) != 3 or not all(p.isdigit() for p in parts):
                raise MtxError(f"{where}: line {line_no}: expected 'rows columns entries', "
                               f"got {_show(line)}")
            rows, cols, nnz = (int(p) for p in parts)
            if symmetry == "symmetric" and rows != cols:
                raise MtxError(f"{where}: line {line_no}: a symmetric matrix must be square, "
                               f"not {rows} x {cols}")
            return symmetry, rows, cols, nnz, line_no
    raise MtxError(f"{where}: the file ends before its size line")


class _CheckedEntries(io.RawIOBase):
    """What scipy.io.mmread reads: the header (its banner rewritten to the canonical
    ``coordinate real``), then the entry list from `raw`, each block checked before the
    library sees it.  Counts the values (`tokens`); raises MtxError naming the line."""

    def __init__(self, head: bytes, raw: io.BufferedIOBase, where: str, line_no: int):
        self.raw, self.where = raw, where
        self.block, self.pos, self.done = head, 0, False
        self.line_no = line_no   # the file's lines before `carry`
        self.carry = b""         # the unfinished last line of the blocks read so far
        self.words = False       # nan/inf in `carry`: check its line by the pattern
        self.tokens = 0
        self.served = 0

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.served

    def read(self, n: int | None = -1) -> bytes:
        """Up to `n` bytes (the library asks for 1 KiB at a time)."""
        if n is None or n < 0:
            return b"".join(iter(lambda: self.read(_BLOCK), b""))
        while self.pos >= len(self.block):
            if self.done:
                return b""
            self.block, self.pos = self._next(), 0
        out = self.block[self.pos:self.pos + n]
        self.pos += len(out)
        self.served += len(out)
        return out

    def _next(self) -> bytes:
        block = self.raw.read(_BLOCK)
        if not block:
            self.done = True
            self._check_lines(self.carry, self.words)
            return b""
        odd = block.translate(None, _NUMBER)
        if odd and odd.translate(None, _WORDS):
            self._refuse_character(block, odd.translate(None, _WORDS))
        cut = block.rfind(b"\n") + 1
        if cut:
            lines, self.carry = self.carry + block[:cut], block[cut:]
            self._check_lines(lines, self.words or bool(odd))
        else:
            self.carry += block
        self.words = bool(self.carry.translate(None, _NUMBER))
        return block

    def _refuse_character(self, block: bytes, odd: bytes) -> None:
        text = self.carry + block
        at = min(text.find(bytes([c])) for c in set(odd))
        start = text.rfind(b"\n", 0, at) + 1
        end = text.find(b"\n", at)
        line = text[start:end if end >= 0 else len(text)]
        line_no = self.line_no + text.count(b"\n", 0, at) + 1
        where = f"{self.where}: line {line_no}"
        if line.lstrip().startswith(b"%"):
            raise MtxError(f"{where}: a comment inside the entry list (comments go before "
                           "the size line)")
        raise MtxError(f"{where}: expected 'row column value', got {_show(line)}")

    def _check_lines(self, lines: bytes, words: bool) -> None:
        """Whole lines of the entry list (the last may lack its newline): count the values
        and the lines; where a line may hold more than three values, or nan/inf, check the
        lines one by one."""
        if not lines:
            return
        a = np.frombuffer(lines, np.uint8)
        blank = a <= 32  # space, tab, CR, LF: the other control bytes were refused
        tokens = int(np.count_nonzero(blank[:-1] > blank[1:])) + (not blank[0])
        count = int(np.count_nonzero(a == 10)) + (lines[-1] != 10)
        if words or tokens > 3 * count:
            for k, line in enumerate(lines.split(b"\n")):
                if not _ENTRY.fullmatch(line):
                    raise MtxError(f"{self.where}: line {self.line_no + k + 1}: expected "
                                   f"'row column value', got {_show(line)}")
        self.tokens += tokens
        self.line_no += count


def _line(path: Path, line_no: int) -> str:
    """The text of one line of the file, for a message (read again: errors only)."""
    try:
        with contextlib.ExitStack() as stack:
            raw = _open(path, stack)[0]
            for k, line in enumerate(raw, 1):
                if k == line_no:
                    return f": {_show(line)}"
    except (MtxError, *_BROKEN):
        pass
    return ""


def _library_error(exc: Exception, path: Path, where: str, rows: int, cols: int, nnz: int,
                   last_line: int) -> MtxError:
    """The library's complaint in this module's words, with the file and line."""
    message = str(exc)
    if m := re.match(r"Truncated file\. Expected another (\d+) lines", message):
        return MtxError(f"{where}: truncated: the size line declares {nnz} entries, the file "
                        f"ends at line {last_line} after {nnz - int(m[1])}")
    if not (m := re.match(r"Line (\d+): (.*)", message)):
        return MtxError(f"{where}: {message}")
    line_no, what = int(m[1]), m[2].rstrip(".")
    if "index out of bounds" in what or "Integer out of range" in what:
        return MtxError(f"{where}: line {line_no}: index out of range 1..{rows} x 1..{cols}"
                        f"{_line(path, line_no)}")
    if "Too many lines" in what:
        return MtxError(f"{where}: line {line_no}: more entries than the {nnz} the size line "
                        "declares")
    if "Invalid" in what:
        return MtxError(f"{where}: line {line_no}: expected 'row column value' ({what})"
                        f"{_line(path, line_no)}")
    return MtxError(f"{where}: line {line_no}: {what}")


def read_mtx(path: str | Path):
    """Read a real coordinate Matrix Market matrix into a SciPy CSR matrix (symmetric
    storage expanded to both triangles)."""
    import scipy.io
    import scipy.sparse as sp

    p = Path(path)
    if not p.is_file():
        raise MtxError(f"{p}: no such file")
    where = str(p)
    with contextlib.ExitStack() as stack:
        try:
            raw, where, size = _open(p, stack)
            lines = _Lines(raw)
            symmetry, rows, cols, nnz, line_no = read_header(lines, where)
        except _BROKEN as exc:
            raise MtxError(f"{where}: cannot read ({exc})") from exc
        head = b"".join(lines.read[1:])
        room = None if size is None else size - len(lines.read[0]) - len(head)
        if room is not None and 6 * nnz - 1 > room:  # "1 1 1\n": 6 bytes at the least
            raise MtxError(f"{where}: truncated: the size line declares {nnz} entries, the "
                           f"{room} bytes after it hold {(room + 1) // 6} at the most")
        banner = f"%%MatrixMarket matrix coordinate real {symmetry}\n".encode()
        entries = _CheckedEntries(banner + head, raw, where, line_no)
        try:
            coo = scipy.io.mmread(entries)
            while entries.read(_BLOCK):  # whatever the library left unread
                pass
        except _BROKEN as exc:
            raise MtxError(f"{where}: damaged or truncated compressed file ({exc})") from exc
        except MtxError:
            raise
        except (ValueError, OverflowError) as exc:
            raise _library_error(exc, p, where, rows, cols, nnz, entries.line_no) from exc
        except MemoryError as exc:
            raise MtxError(f"{where}: line {line_no}: {nnz} entries are more than memory "
                           "holds") from exc
    if entries.tokens != 3 * nnz:
        raise MtxError(f"{where}: an entry line holds more than 'row column value' "
                       f"({entries.tokens} values for the {nnz} entries the size line declares)")
    A = sp.csr_matrix(coo, dtype=np.float64)
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


def write_poisson(grid: tuple[int, int, int], dest: str | Path) -> Path:
    """The solver's Poisson matrix of `grid` (5-point where nz is 1) as a symmetric Matrix
    Market file (`.mtx`, or `.mtx.gz` compressed), written whole then renamed into place.

    A matrix file the size of a real one (a 1259 x 1259 x 1 grid has G3_circuit's 1.59M
    rows and 7.9M nonzeros) where SuiteSparse cannot be reached; the solver reads it as
    any matrix file, blocked by rows (it knows no grid).  Its size only: a one-cell slab of
    the 7-point operator keeps the diagonal 6 against 4 neighbours, a condition number near
    5, so CG needs 6-8 iterations where G3_circuit needs hundreds.
    """
    import gzip
    import os

    from scipy.io import mmwrite

    from kernels_ext.biccg import poisson_matrix

    out = Path(dest)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")
    A = poisson_matrix(*grid)
    opener = gzip.open if out.suffix == ".gz" else open
    try:
        with opener(tmp, "wb") as fh:
            mmwrite(fh, A, comment=f"Poisson {'x'.join(map(str, grid))} "
                    "(kernels_ext.biccg.poisson_matrix)", symmetry="symmetric")
        tmp.rename(out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def main(argv=None) -> int:
    """``python -m kernels_ext.biccg.mtx``: fetch a SuiteSparse matrix, check a file, or
    write a Poisson matrix as one."""
    import argparse
    import sys

    p = argparse.ArgumentParser(
        prog="python -m kernels_ext.biccg.mtx",
        description="Download a matrix from the SuiteSparse collection (where the network "
                    "allows), or read a Matrix Market file and print its size.",
        epilog="examples:\n"
               "  python -m kernels_ext.biccg.mtx --fetch G3_circuit --dest data/matrices\n"
               "  python -m kernels_ext.biccg.mtx --check data/matrices/G3_circuit.tar.gz\n"
               "  python -m kernels_ext.biccg.mtx --write-poisson 1259 1259 1 "
               "--dest data/matrices/poisson2d_1259.mtx.gz   # G3_circuit's size",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--fetch", metavar="NAME", help="matrix name, e.g. G3_circuit")
    g.add_argument("--check", metavar="FILE", help="a .mtx, .mtx.gz or .tar.gz to read")
    g.add_argument("--write-poisson", nargs=3, type=int, metavar=("NX", "NY", "NZ"),
                   help="write the solver's Poisson matrix of this grid to --dest (a file)")
    p.add_argument("--group", default="AMD", help="SuiteSparse group (G3_circuit: AMD)")
    p.add_argument("--dest", default="data/matrices", help="where to save (data/matrices)")
    a = p.parse_args(argv)
    try:
        if a.fetch:
            Path(a.dest).mkdir(parents=True, exist_ok=True)
            print(fetch_suitesparse(a.fetch, a.group, a.dest))
        elif a.write_poisson:
            if min(a.write_poisson) < 1 or not a.dest.endswith((".mtx", ".mtx.gz")):
                raise MtxError("--write-poisson needs three positive sizes and a --dest file "
                               "ending in .mtx or .mtx.gz")
            print(write_poisson(tuple(a.write_poisson), a.dest))
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
