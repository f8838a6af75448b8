"""Compiler variants: built from the same sources, cached by compiler identity and flags."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import needs_clang

from kernels_ext.common import variants

GCC_FLAGS = "-O2 -fopenmp"


def test_build_is_cached_and_reused():
    v1 = variants.build("gcc", GCC_FLAGS)
    mtime = os.path.getmtime(v1.path)
    v2 = variants.build("gcc", GCC_FLAGS)
    assert v2.key == v1.key and v2.path == v1.path
    assert os.path.getmtime(v1.path) == mtime  # not rebuilt
    record = json.loads((variants.cache_root() / v1.key / "build.json").read_text())
    assert record["flags"] == GCC_FLAGS and "gcc" in record["command"]
    assert v1.label.startswith("gcc") and v1.compiler.version in v1.label


def test_key_changes_with_flags_and_tag_changes_only_the_label():
    a = variants.build("gcc", GCC_FLAGS)
    b = variants.build("gcc", "-O3 -fopenmp")
    c = variants.build("gcc", GCC_FLAGS, tag="fast")
    assert a.key != b.key
    assert c.key == a.key and c.label == a.label + "-fast"


def test_key_changes_with_the_sources(monkeypatch, tmp_path):
    a = variants.build("gcc", GCC_FLAGS)
    src = tmp_path / "pkg"
    shutil.copytree(variants.PACKAGE_DIR, src, ignore=shutil.ignore_patterns("__pycache__"))
    (src / "triad" / "stream.c").write_text((src / "triad" / "stream.c").read_text() + "\n/* */\n")
    monkeypatch.setattr(variants, "PACKAGE_DIR", src)
    assert variants.build("gcc", GCC_FLAGS).key != a.key


def test_every_header_a_kernel_declares_is_in_its_key(monkeypatch, tmp_path):
    """kernel.json's headers count (BICCG's sweeps.h once did not: an edit to it kept using
    the cached variant), and each header it lists exists."""
    for manifest in variants.PACKAGE_DIR.glob("*/kernel.json"):
        kernel = manifest.parent.name
        for f in variants._sources(kernel) + variants._headers(kernel):
            assert f.is_file(), f
    src = tmp_path / "pkg"
    shutil.copytree(variants.PACKAGE_DIR, src, ignore=shutil.ignore_patterns("__pycache__"))
    flags = ["-O2"]
    cc = variants.identify("gcc")
    monkeypatch.setattr(variants, "PACKAGE_DIR", src)
    before = variants._digest("biccg", cc, flags)
    sweeps = src / "biccg" / "src" / "sweeps.h"
    sweeps.write_text(sweeps.read_text() + "\n/* */\n")
    assert variants._digest("biccg", cc, flags) != before


def test_variant_runs_in_a_fresh_process(cli):
    proc = cli("-m", "kernels_ext.triad", "--compiler", "gcc", f"--flags={GCC_FLAGS}",
               "--size", "100000", "--ntimes", "2", "--threads", "2")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout.splitlines()[-1])
    assert rec["flags"] == GCC_FLAGS and rec["compiler"] == "gcc" and rec["validated"]


def test_failed_compile_shows_the_compilers_message(cli):
    with pytest.raises(variants.BuildFailed) as err:
        variants.build("gcc", "-O2 -fno-such-option-anywhere")
    assert "-fno-such-option-anywhere" in str(err.value)
    proc = cli("-m", "kernels_ext.triad", "--compiler", "gcc",
               "--flags=-O2 -fno-such-option-anywhere", "--size", "100000")
    assert proc.returncode == 4
    assert "failed to compile" in proc.stderr and "-fno-such-option-anywhere" in proc.stderr


def test_unknown_and_missing_compilers(monkeypatch):
    with pytest.raises(variants.VariantError, match="unknown compiler 'frobnicc'"):
        variants.identify("frobnicc")
    with pytest.raises(variants.VariantError, match="does not identify as a C compiler"):
        variants.identify("true")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(variants.CompilerNotFound, match="'nvc' is not installed"):
        variants.identify("nvc")


def test_bad_tag_is_refused():
    with pytest.raises(variants.VariantError, match="tag"):
        variants.build("gcc", GCC_FLAGS, tag="a b")


def test_installed_module_reports_its_build():
    _, info = variants.installed()
    assert info["label"].startswith(info["family"]) and "-O" in info["flags"]


@needs_clang
def test_clang_variant_uses_llvm_openmp(cli):
    v = variants.build("clang", "-O3 -march=native -fopenmp")
    assert v.compiler.family == "clang" and v.label.startswith("clang")
    proc = cli("-m", "kernels_ext.triad", "--compiler", "clang",
               "--flags=-O3 -march=native -fopenmp", "--size", "100000", "--ntimes", "2",
               "--threads", "2")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout.splitlines()[-1])
    assert "libomp" in rec["openmp_library"] and rec["threads"] == 2


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return {w for line in f if line.startswith("flags") for w in line.split()[2:]}
    except OSError:
        return set()


@pytest.mark.parametrize("flags,isa,cpu_flag", [
    ("-O2 -fopenmp", "sse2", "sse2"),                # x86-64's baseline
    ("-O2 -mavx -fopenmp", "avx", "avx"),
    ("-O2 -mavx512f -fopenmp", "avx512", "avx512f"),
])
def test_streaming_stores_take_the_widest_vector_the_flags_allow(cli, flags, isa, cpu_flag):
    """Each instruction set's streaming stores: built from the flags, and where this CPU has
    it, run and validated with a length that is no multiple of the vector (the remainder)."""
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("streaming stores are x86-64 only")
    v = variants.build("gcc", flags)
    if cpu_flag not in _cpu_flags():
        pytest.skip(f"this CPU has no {cpu_flag}: the {isa} variant was built, not run")
    proc = cli("-m", "kernels_ext.triad", "--compiler", "gcc", f"--flags={v.flags}",
               "--size", "100003", "--ntimes", "3", "--threads", "2", "--stores", "streaming")
    assert proc.returncode == 0, proc.stderr
    recs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert all(r["streaming_isa"] == isa and r["stores"] == "streaming" and r["validated"]
               for r in recs)
