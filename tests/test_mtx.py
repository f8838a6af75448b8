"""Matrix Market files (kernels_ext.biccg.mtx): .mtx, .mtx.gz and .tar.gz members read as streams by
scipy.io.mmread, the same matrices as SciPy, and one clear line for every bad file."""

from __future__ import annotations

import gzip
import io
import tarfile

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from kernels_ext.biccg import mtx
from kernels_ext.biccg.mtx import MtxError, read_mtx

SYM = """%%MatrixMarket matrix coordinate real symmetric
% a comment
%
3 3 4
1 1 4.0
2 1 -1.0
2 2 4.0
3 3 2.5
"""
GENERAL = "%%MatrixMarket matrix coordinate real general\n"


def write_tar(path, members: dict[str, str]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def same_csr(A: sp.csr_matrix, B: sp.csr_matrix) -> bool:
    return (A.shape == B.shape and A.has_canonical_format and B.has_canonical_format
            and np.array_equal(A.indptr, B.indptr) and np.array_equal(A.indices, B.indices)
            and np.array_equal(A.data, B.data))


def test_reader_expands_symmetric_storage_and_skips_comments(tmp_path):
    f = tmp_path / "a.mtx"
    f.write_text(SYM)
    A = read_mtx(f)
    assert isinstance(A, sp.csr_matrix) and A.dtype == np.float64 and A.has_canonical_format
    np.testing.assert_array_equal(A.toarray(), [[4, -1, 0], [-1, 4, 0], [0, 0, 2.5]])


def test_reader_reads_gz_and_suitesparse_tarballs(tmp_path):
    gz = tmp_path / "a.mtx.gz"
    gz.write_bytes(gzip.compress(SYM.encode()))
    tgz = tmp_path / "mat.tar.gz"
    write_tar(tgz, {"mat/mat_b.mtx": "%%MatrixMarket matrix array real general\n3 1\n1\n2\n3\n",
                    "mat/mat.mtx": SYM})
    assert same_csr(read_mtx(gz), read_mtx(tmp_path / "a.mtx.gz"))
    assert read_mtx(tgz).shape == (3, 3) and read_mtx(tgz).nnz == 5


def test_tar_member_is_read_as_a_stream_not_extracted(tmp_path, monkeypatch):
    """The matrix is chosen by name (exactly <archive>.mtx, else one without a _suffix) and
    read from the archive: nothing is written beside it."""
    def refuse(*args, **kwargs):
        raise AssertionError("extracted to disk")

    monkeypatch.setattr(tarfile.TarFile, "extract", refuse)
    monkeypatch.setattr(tarfile.TarFile, "extractall", refuse)
    named = tmp_path / "G3.tar.gz"
    write_tar(named, {"G3/G3_coord.mtx": "%%MatrixMarket matrix array real general\n1 1\n1\n",
                      "G3/README": "not a matrix", "G3/G3.mtx": SYM,
                      "G3/G3_b.mtx": "%%MatrixMarket matrix array real general\n1 1\n1\n"})
    other = tmp_path / "download.tgz"
    write_tar(other, {"x/x_b.mtx": "%%MatrixMarket matrix array real general\n1 1\n1\n",
                      "x/x.mtx": SYM})
    before = sorted(tmp_path.rglob("*"))
    expected = np.array([[4, -1, 0], [-1, 4, 0], [0, 0, 2.5]])
    for archive in (named, other):
        np.testing.assert_array_equal(read_mtx(archive).toarray(), expected)
    assert sorted(tmp_path.rglob("*")) == before
    empty = tmp_path / "empty.tar.gz"
    write_tar(empty, {"e/README": "nothing"})
    with pytest.raises(MtxError, match="empty.tar.gz: the archive holds no .mtx file"):
        read_mtx(empty)
    # errors name the archive and its member
    bad = tmp_path / "bad.tar.gz"
    write_tar(bad, {"bad/bad.mtx": GENERAL + "2 2 1\n3 1 1\n"})
    with pytest.raises(MtxError, match=r"bad.tar.gz:bad/bad.mtx: line 3: index out of range"):
        read_mtx(bad)


def test_integer_field_is_read_as_float(tmp_path):
    f = tmp_path / "int.mtx"
    f.write_text("%%MatrixMarket matrix coordinate integer symmetric\n3 3 4\n1 1 7\n3 1 -2\n"
                 "2 2 5\n3 3 100000000000000000000\n")
    A = read_mtx(f)
    assert A.dtype == np.float64
    np.testing.assert_array_equal(A.toarray(), [[7, 0, -2], [0, 5, 0], [-2, 0, 1e20]])
    double = tmp_path / "double.mtx"  # a field some writers use for real
    double.write_text("%%MatrixMarket matrix coordinate double general\n1 1 1\n1 1 0.5\n")
    assert read_mtx(double).toarray().tolist() == [[0.5]]


def test_symmetric_entries_in_the_upper_triangle_are_mirrored(tmp_path):
    """As before the reader used SciPy: an entry above the diagonal of a symmetric file is
    mirrored like one below it; one stored in both triangles is summed (as duplicates are)."""
    upper, lower, both = (tmp_path / f"{n}.mtx" for n in ("upper", "lower", "both"))
    upper.write_text("%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 4\n1 2 -1\n"
                     "2 2 4\n2 3 -2\n")
    lower.write_text("%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 4\n2 1 -1\n"
                     "2 2 4\n3 2 -2\n")
    both.write_text("%%MatrixMarket matrix coordinate real symmetric\n2 2 3\n1 1 4\n1 2 -1\n"
                    "2 1 -1\n")
    assert same_csr(read_mtx(upper), read_mtx(lower))
    np.testing.assert_array_equal(read_mtx(upper).toarray(), [[4, -1, 0], [-1, 4, -2], [0, -2, 0]])
    np.testing.assert_array_equal(read_mtx(both).toarray(), [[4, -2], [-2, 0]])


@pytest.mark.parametrize("symmetry", ["general", "symmetric"])
@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
def test_same_matrix_as_scipy_mmread_for_a_random_spd_matrix(tmp_path, symmetry, suffix):
    rng = np.random.default_rng(7)
    n = 3000
    B = sp.random(n, n, density=2e-3, random_state=rng, format="csr")
    A = (B @ B.T + sp.identity(n) * n).tocsr()  # SPD, values with all 17 digits
    f = tmp_path / f"spd{suffix}"
    plain = tmp_path / "spd.mtx"
    scipy.io.mmwrite(plain, A, symmetry=symmetry)
    if suffix == ".mtx.gz":
        f.write_bytes(gzip.compress(plain.read_bytes()))
    ours, theirs = read_mtx(f), scipy.io.mmread(plain).tocsr()
    theirs.sum_duplicates()
    theirs.sort_indices()
    assert same_csr(ours, theirs) and ours.dtype == theirs.dtype
    assert (ours != A).nnz == 0  # mmwrite writes the shortest repr that reads back exactly


def test_nan_and_inf_are_read_for_the_solver_to_refuse(tmp_path):
    f = tmp_path / "nan.mtx"
    f.write_text(GENERAL + "2 2 3\n1 1 nan\n2 2 -Inf\n1 2 infinity\n")
    A = read_mtx(f).toarray()
    assert np.isnan(A[0, 0]) and A[1, 1] == -np.inf and A[0, 1] == np.inf


@pytest.mark.parametrize("text,message", [
    ("hello\n", "line 1 is not a Matrix Market header"),
    ("%%MatrixMarket matrix coordinate real\n2 2 1\n1 1 1\n", "line 1 is not a Matrix Market"),
    ("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "dense"),
    ("%%MatrixMarket matrix coordinate pattern symmetric\n2 2 1\n1 1\n", "pattern-only"),
    ("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", "complex"),
    ("%%MatrixMarket matrix coordinate unsigned-integer general\n1 1 1\n1 1 1\n",
     "line 1: unknown field 'unsigned-integer'"),
    ("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 1\n",
     "line 1: 'skew-symmetric' matrices cannot be symmetric positive definite"),
    ("%%MatrixMarket matrix coordinate real hermitian\n2 2 1\n2 1 1\n",
     "line 1: 'hermitian' matrices cannot be"),
    (GENERAL + "2 2\n", "line 2: expected 'rows columns entries'"),
    (GENERAL + "% only comments\n", "the file ends before its size line"),
    ("%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 1 1\n",
     "line 2: a symmetric matrix must be square, not 2 x 3"),
    (GENERAL + "2 2 3\n1 1 1\n2 2 x\n1 2 3\n", "line 4: expected 'row column value', got '2 2 x'"),
    (GENERAL + "2 2 3\n1 1 1\n2 2 1 7\n1 2 3\n", "line 4: expected 'row column value'"),
    (GENERAL + "2 2 2\n1 1 1\n2 2 1 1\n", "line 4: expected 'row column value', got '2 2 1 1'"),
    (GENERAL + "2 2 2\n1 1 1\n2 2 1,5\n", "line 4: expected 'row column value', got '2 2 1,5'"),
    (GENERAL + "2 2 2\n1 1 1.5D+03\n2 2 1\n", "line 3: expected 'row column value'"),
    (GENERAL + "2 2 2\n1 1 1\x00\n2 2 1\n", "line 3: expected 'row column value'"),
    (GENERAL + "2 2 2\n1 1 nanx\n2 2 1\n", "line 3: expected 'row column value'"),
    (GENERAL + "2 2 2\n1 1 1.5\n2.5 2 1\n", "line 4: expected 'row column value'"),
    (GENERAL + "2 2 2\n1 1 1\n% late\n2 2 1\n", "line 4: a comment inside the entry list"),
    (GENERAL + "2 2 3\n1 1 1\n2 2 1\n", "truncated: the size line declares 3 entries"),
    (GENERAL + "2 2 1\n1 1 1\n2 2 1\n", "line 4: more entries than"),
    (GENERAL + "2 2 1\n3 1 1\n", "line 3: index out of range 1..2 x 1..2: '3 1 1'"),
    (GENERAL + "% c\n\n2 2 2\n\n1 1 1\n\n2 0 1\n", "line 8: index out of range"),
])
@pytest.mark.parametrize("suffix", [".mtx", ".mtx.gz"])
def test_reader_refuses_bad_files_naming_the_line(tmp_path, text, message, suffix):
    f = tmp_path / f"bad{suffix}"
    f.write_bytes(gzip.compress(text.encode()) if suffix.endswith(".gz") else text.encode())
    with pytest.raises(MtxError) as err:
        read_mtx(f)
    assert message in str(err.value) and f"bad{suffix}" in str(err.value)


def big_entry_list(lines: int) -> list[str]:
    return [f"{k % 997 + 1} {k % 991 + 1} {k * 0.25 - 3:.17g}\n" for k in range(lines)]


@pytest.mark.parametrize("block", [7, 4096, 1 << 20])
@pytest.mark.parametrize("bad,message", [
    ("5 5 1 2\n", "expected 'row column value', got '5 5 1 2'"),
    ("5 5 x\n", "expected 'row column value', got '5 5 x'"),
    ("5 5 nan 2\n", "expected 'row column value', got '5 5 nan 2'"),
    ("5 1000 1\n", "index out of range 1..1000 x 1..999: '5 1000 1'"),
])
def test_errors_deep_in_the_file_name_the_line_whatever_the_blocks(tmp_path, monkeypatch,
                                                                    block, bad, message):
    """Blocks of 7 bytes, 4 KiB and 1 MiB: the checks across block boundaries."""
    monkeypatch.setattr(mtx, "_BLOCK", block)
    body = big_entry_list(3_000 if block < 4096 else 60_000)
    at = len(body) - 1234
    body[at] = bad
    body[at // 2] = "7 7 nan\n"  # read: the solver refuses it later
    f = tmp_path / "deep.mtx.gz"
    text = GENERAL + f"% c\n1000 999 {len(body)}\n" + "".join(body)
    f.write_bytes(gzip.compress(text.encode(), compresslevel=1))
    with pytest.raises(MtxError) as err:
        read_mtx(f)
    assert f"deep.mtx.gz: line {at + 4}: {message}" in str(err.value)


def test_header_errors_do_not_read_the_entries(tmp_path):
    """A header is refused before the entry list is read: here it is damaged gzip."""
    body = "".join(big_entry_list(50_000))
    f = tmp_path / "h.mtx.gz"
    for header, message in (("%%MatrixMarket matrix array real general\n", "dense"),
                            (GENERAL + "1000 999\n", "line 2: expected 'rows columns entries'"),
                            (GENERAL + "1000 999 50000\n", "damaged or truncated compressed")):
        data = gzip.compress((header + body).encode())
        f.write_bytes(data[:len(data) // 2])  # the entry list is cut in half
        with pytest.raises(MtxError, match=message):
            read_mtx(f)


def test_size_line_beyond_the_bytes_or_memory(tmp_path):
    """Refused before the entries are read: what the bytes after the size line cannot hold
    (.mtx, sizes known) or what no memory holds (.gz)."""
    text = GENERAL + "2 2 100000000000000\n1 1 1\n"
    f = tmp_path / "huge.mtx"
    f.write_text(text)
    with pytest.raises(MtxError, match="huge.mtx: truncated: the size line declares "
                                       "100000000000000 entries, the 6 bytes after it hold 1"):
        read_mtx(f)
    gz = tmp_path / "huge.mtx.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(MtxError, match="huge.mtx.gz: line 2: 100000000000000 entries are more "
                                       "than memory holds"):
        read_mtx(gz)


def test_reader_missing_and_truncated_gzip(tmp_path):
    with pytest.raises(MtxError, match="no such file"):
        read_mtx(tmp_path / "none.mtx")
    gz = tmp_path / "cut.mtx.gz"
    gz.write_bytes(gzip.compress((SYM * 50).encode())[:60])
    with pytest.raises(MtxError):
        read_mtx(gz)
    gz.write_bytes(b"not gzip at all")
    with pytest.raises(MtxError, match="cut.mtx.gz: cannot read"):
        read_mtx(gz)


def test_check_command(tmp_path, capsys):
    f = tmp_path / "a.mtx"
    f.write_text(SYM)
    assert mtx.main(["--check", str(f)]) == 0
    assert "3 x 3, 5 nonzeros" in capsys.readouterr().out
    f.write_text("hello\n")
    assert mtx.main(["--check", str(f)]) == 2
    assert "not a Matrix Market header" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["p.mtx", "p.mtx.gz"])
def test_a_poisson_matrix_written_as_a_file_reads_back_the_same(tmp_path, name):
    from kernels_ext.biccg import poisson_matrix

    out = mtx.write_poisson((5, 4, 1), tmp_path / name)
    A = read_mtx(out)
    assert (A != poisson_matrix(5, 4, 1)).nnz == 0 and A.shape == (20, 20)
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no part file left


def test_write_poisson_refuses_what_it_cannot_write(tmp_path, cli):
    proc = cli("-m", "kernels_ext.biccg.mtx", "--write-poisson", "4", "0", "1", "--dest",
               str(tmp_path / "x.mtx"))
    assert proc.returncode == 2 and proc.stderr == (
        "error: --write-poisson needs three positive sizes and a --dest file ending in .mtx "
        "or .mtx.gz\n")
