"""Every kernel's --out: a path that cannot take the file is one line before anything is
measured, and a write that fails after the measurement loses none of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernels_ext.common import cli
from kernels_ext.common.errors import BadInput, KernelError

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
needs_mpiexec = pytest.mark.skipif(not os.access(MPIEXEC, os.X_OK),
                                   reason=f"no {MPIEXEC} (the mpich wheel's)")

#: Each kernel's command line, small: what it would measure if --out were fine.
KERNELS = {
    "triad": ["--size", "100000", "--ntimes", "2", "--threads", "1"],
    "biccg": ["--poisson", "8", "8", "8", "--threads", "1"],
    "pingpong": ["--max-size", "8", "--iterations", "2", "--skip", "1"],
    "storage": ["--path", "PATH", "--block-size", "64K", "--transfer-size", "64K"],
}


def kernel(name: str, tmp_path: Path, out: str, ranks: int = 1) -> subprocess.CompletedProcess:
    """`python -m kernels_ext.<name> ... --out out`, under mpiexec where ranks > 1."""
    args = [str(tmp_path) if a == "PATH" else a for a in KERNELS[name]]
    pre = [MPIEXEC, "-n", str(ranks)] if ranks > 1 else []
    return subprocess.run([*pre, sys.executable, "-m", f"kernels_ext.{name}", *args,
                           "--out", out], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_an_out_in_a_missing_folder_is_one_line_before_measuring(name, tmp_path):
    out = tmp_path / "none" / "x.jsonl"
    proc = kernel(name, tmp_path, str(out))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1] == f"error: --out {out}: no folder {out.parent}"
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing measured, nothing left


@pytest.mark.parametrize("name", ["biccg", "triad"])
def test_an_out_that_is_a_folder_is_one_line(name, tmp_path):
    proc = kernel(name, tmp_path, str(tmp_path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: --out {tmp_path}: is a folder, not a file")
    assert list(tmp_path.iterdir()) == []


@needs_mpiexec
def test_two_ranks_both_stop_at_a_bad_out_and_rank_0_says_it_once(tmp_path):
    out = tmp_path / "none" / "x.jsonl"
    proc = kernel("biccg", tmp_path, str(out), ranks=2)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("error: --out") == 1, proc.stderr


def test_a_good_out_takes_the_lines_and_nothing_else(tmp_path):
    pytest.importorskip("kernels_ext.biccg._biccg", reason="BICCG is built where MPI was found")
    out = tmp_path / "x.jsonl"
    proc = kernel("biccg", tmp_path, str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert json.loads(out.read_text())["converged"] is True
    assert [p.name for p in tmp_path.iterdir()] == ["x.jsonl"]


def test_check_out_names_what_is_wrong(tmp_path, monkeypatch):
    cli.check_out(None)
    cli.check_out(str(tmp_path / "x.jsonl"))
    def refuse(self):
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as m:  # a folder above it this user may not enter
        m.setattr(cli.Path, "is_dir", refuse)
        with pytest.raises(BadInput, match=r"^--out .*x.jsonl: Permission denied$"):
            cli.check_out(str(tmp_path / "x.jsonl"))
    monkeypatch.setattr(cli.os, "access", lambda path, mode: False)
    with pytest.raises(BadInput, match=r"^--out .*: the folder .* is not writable$"):
        cli.check_out(str(tmp_path / "x.jsonl"))


def test_a_write_that_fails_after_measuring_prints_the_lines_and_says_why(
        tmp_path, monkeypatch, capsys):
    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli.os, "replace", refuse)
    out = tmp_path / "x.jsonl"
    with pytest.raises(KernelError) as err:
        cli.write_lines(['{"a": 1}', '{"b": 2}'], str(out))
    assert str(err.value) == (f"--out {out}: No space left on device; the results went to "
                              "stdout instead")
    assert capsys.readouterr().out == '{"a": 1}\n{"b": 2}\n'
    assert list(tmp_path.iterdir()) == []  # neither the file nor its temporary one
    code, lines = cli.mpi_main(lambda: (['{"c": 3}'], 0, 0), str(out))
    captured = capsys.readouterr()
    assert code == 1 and lines == ['{"c": 3}'] and captured.out == '{"c": 3}\n'
    assert captured.err.startswith(f"error: --out {out}: No space left on device")
    # a run's own failure (3: not converged) is not hidden by the failed write's 1
    code, _ = cli.mpi_main(lambda: (['{"c": 3}'], 0, 3), str(out))
    assert code == 3
