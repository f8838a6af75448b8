"""Compiler variants of a kernel module, built from the same sources and cached.

The study compares compilers and flags (gcc -O3 -march=native -fopenmp, icc
-xHost -qopenmp -parallel, nvc -fast -mp -Mconcur, ...).  A variant is one
(compiler, flags) pair: the kernel sources and their binding shim compiled by
that compiler with exactly those flags into an extension module, kept in a
cache keyed by the compiler's identity and version, the flags, the sources and
the Python ABI, and reused until one of those changes.

The cache lives in ``$BURSTBENCH_CACHE`` (default ``$XDG_CACHE_HOME/burstbench``
or ``~/.cache/burstbench``), one folder per variant holding the module and a
``build.json`` with the command line and the compiler's output.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # kernels_ext/


def manifest(kernel: str) -> dict:
    """A kernel's declaration, ``kernels_ext/<kernel>/kernel.json``, read by CMake too: its
    sources (the binding shim first), headers, and whether it needs NATIVE tuning, OpenMP,
    MPI, and which optional libraries (``{name, pkg_config, sources, define}``) it can use."""
    path = PACKAGE_DIR / kernel / "kernel.json"
    try:
        return json.loads(path.read_text())
    except OSError:
        known = sorted(p.parent.name for p in PACKAGE_DIR.glob("*/kernel.json"))
        raise VariantError(f"unknown kernel '{kernel}' (known: {', '.join(known)})") from None


def _extra_includes(kernel: str) -> list[str]:
    """Include folders a kernel needs besides Python's (mpi4py's C API for the MPI ones)."""
    if manifest(kernel).get("mpi"):
        import mpi4py

        return [mpi4py.get_include()]
    return []


def _wrapper_config(path: str) -> str:
    """What an MPI compiler wrapper adds (mpicc -show / --showme), '' for a plain compiler."""
    for flag in ("-show", "--showme"):
        try:
            proc = subprocess.run([path, flag], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    return ""

#: Compiler families we know by name. One that is not installed is skipped with
#: a note by the sweeps; a name that is neither installed nor here is an error.
KNOWN_COMPILERS = ("gcc", "clang", "icx", "icc", "nvc", "pgcc", "armclang", "aocc", "cc",
                   "mpicc", "mpiicc", "mpiicx", "mpicc.openmpi", "mpicc.mpich")


class VariantError(Exception):
    """A variant cannot be used; the message is one line naming the problem."""


class CompilerNotFound(VariantError):
    """A known compiler family that this machine does not have."""


class BuildFailed(VariantError):
    """The compiler rejected the sources or flags; ``output`` holds its message."""

    def __init__(self, message: str, output: str):
        super().__init__(message)
        self.output = output


@dataclass(frozen=True)
class Compiler:
    """One C compiler, identified by what it says of itself."""

    name: str  # as the user wrote it: "gcc", "/opt/intel/bin/icx", "gcc-13"
    path: str  # resolved executable
    family: str  # gcc, clang, icx, icc, nvc, aocc, unknown
    version: str  # "12.2.0", "2023.0.0", "23.1"
    banner: str  # first line of --version, for provenance

    @property
    def label(self) -> str:
        """The study's spelling: family and version run together, e.g. ``gcc12.2.0``."""
        return f"{self.family}{self.version}"


_FAMILY_PATTERNS = (  # order matters: icx and aocc also say "clang"
    ("icx", r"Intel\(R\) oneAPI DPC\+\+/C\+\+ Compiler (\d[\w.]*)"),
    ("icc", r"\bicc \(ICC\) (\d[\w.]*)"),
    ("nvc", r"\bnvc (\d+\.\d+)"),
    ("pgcc", r"\bpgcc[^\d]*(\d+\.\d+)"),
    ("aocc", r"AOCC[_ ](\d[\w.]*)"),
    ("armclang", r"Arm C/C\+\+/Fortran Compiler version (\d[\w.]*)"),
    ("clang", r"clang version (\d[\w.]*)"),
    ("gcc", r"\(.*\) (\d+\.\d+\.\d+)(?:\s|$)"),
)


def identify(compiler: str) -> Compiler:
    """Find `compiler` (a name on PATH or a path) and identify its family and version.

    Raises CompilerNotFound for a known family that is not installed, and
    VariantError for a name that is neither installed nor known, or for an
    executable that does not answer like a C compiler.
    """
    path = shutil.which(compiler)
    if path is None:
        base = Path(compiler).name
        if base in KNOWN_COMPILERS:
            raise CompilerNotFound(f"compiler '{compiler}' is not installed on this machine")
        raise VariantError(
            f"unknown compiler '{compiler}': not on PATH and not one of "
            f"{', '.join(KNOWN_COMPILERS)}"
        )
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VariantError(f"compiler '{compiler}' ({path}) did not run: {exc}") from exc
    banner = out.strip().splitlines()[0] if out.strip() else ""
    for family, pattern in _FAMILY_PATTERNS:
        m = re.search(pattern, out)
        if m and (family != "gcc" or "Free Software Foundation" in out):
            version = m.group(1)
            if family == "gcc":  # the exact version, not the distribution's banner
                full = subprocess.run(
                    [path, "-dumpfullversion"], capture_output=True, text=True, timeout=60
                ).stdout.strip()
                version = full or version
            return Compiler(compiler, path, family, version, banner)
    raise VariantError(
        f"'{compiler}' ({path}) does not identify as a C compiler we know: '{banner}'"
    )


def cache_root() -> Path:
    """Folder of all cached variants (created on demand)."""
    env = os.environ.get("BURSTBENCH_CACHE")
    if env:
        return Path(env) / "variants"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "burstbench" / "variants"


def _sources(kernel: str) -> list[Path]:
    return [PACKAGE_DIR / kernel / s for s in manifest(kernel)["sources"]]


def _headers(kernel: str) -> list[Path]:
    return [PACKAGE_DIR / kernel / s for s in manifest(kernel).get("headers", [])]


def _digest(kernel: str, compiler: Compiler, flags: list[str]) -> str:
    h = hashlib.sha256()
    ident = {
        "module": f"_{kernel}",
        "path": os.path.realpath(compiler.path),
        "banner": compiler.banner,
        "version": compiler.version,
        "flags": flags,
        "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
        "include": sysconfig.get_paths()["include"],
        "extra_includes": _extra_includes(kernel),
        "wrapper": _wrapper_config(compiler.path) if "mpi" in Path(compiler.path).name else "",
    }
    h.update(json.dumps(ident, sort_keys=True).encode())
    for src in _sources(kernel) + _headers(kernel):
        h.update(src.read_bytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Variant:
    """A built variant: where its module is and how it was made."""

    module: str
    compiler: Compiler
    flags: str
    tag: str
    key: str
    path: str  # the extension module file
    command: str  # the compiler command line

    @property
    def label(self) -> str:
        """``gcc12.2.0`` or, with a tag, ``icx2023.0.0-zmm_high`` (the study's labels)."""
        return self.compiler.label + (f"-{self.tag}" if self.tag else "")

    def as_dict(self) -> dict:
        d = asdict(self)
        d["label"] = self.label
        return d


def build(
    compiler: str, flags: str, tag: str = "", kernel: str = "triad", force: bool = False
) -> Variant:
    """Build (or find in the cache) the C module of `kernel` compiled by `compiler` with
    `flags` (its sources as kernels_ext/<kernel>/kernel.json lists them).

    The flags are used verbatim, OpenMP flag included (-fopenmp, -qopenmp,
    -mp): a variant whose flags lack one is a serial build.  Only ``-fPIC
    -shared``, the include paths and ``-lm`` are added.  Raises BuildFailed with
    the compiler's message when compilation fails.
    """
    if re.search(r"[^\w]", tag or "_"):
        raise VariantError(f"variant tag '{tag}' may hold only letters, digits and '_'")
    cc = identify(compiler)
    try:
        flag_list = shlex.split(flags or "")
    except ValueError as exc:
        raise VariantError(f"flags '{flags}' cannot be parsed: {exc}") from exc
    key = _digest(kernel, cc, flag_list)
    module = f"_{kernel}"
    target_dir = cache_root() / key
    target = target_dir / f"{module}{sysconfig.get_config_var('EXT_SUFFIX')}"
    include = sysconfig.get_paths()["include"]
    argv = [cc.path, *flag_list, "-fPIC", "-shared", f"-I{include}",
            f"-I{PACKAGE_DIR / kernel}"]
    argv += [f"-I{d}" for d in _extra_includes(kernel)]
    argv += [str(s) for s in _sources(kernel)] + ["-o", target.name, "-lm", "-ldl"]
    variant = Variant(module, cc, " ".join(flag_list), tag or "", key, str(target),
                      shlex.join(argv))
    if target.exists() and not force:
        return variant

    target_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=target_dir.parent, prefix=f".build-{key}-")
    try:
        proc = subprocess.run(argv, cwd=tmp, capture_output=True, text=True)
        output = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            last = output.splitlines()[-12:] if output else []
            raise BuildFailed(
                f"{cc.label} failed to compile {module} with flags '{flags}': "
                + (" | ".join(last) or f"exit status {proc.returncode}"),
                output,
            )
        record = variant.as_dict() | {"compiler_output": output}
        (Path(tmp) / "build.json").write_text(json.dumps(record, indent=1) + "\n")
        if force and target_dir.exists():
            shutil.rmtree(target_dir)
        try:
            os.rename(tmp, target_dir)  # atomic: a variant folder is whole or absent
        except OSError:
            if not target.exists():  # not a lost race with a concurrent build
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return variant


def load(path: str | os.PathLike, kernel: str = "triad") -> ModuleType:
    """Import the extension module file `path` as ``kernels_ext.<kernel>._<kernel>``.

    Only one build of a module can live in a process, so this is for fresh
    processes (``python -m kernels_ext.triad --compiler ...``).
    """
    name = f"kernels_ext.{kernel}._{kernel}"
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    if spec is None:
        raise VariantError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    sys.modules[name] = mod
    return mod


def installed(kernel: str = "triad") -> tuple[ModuleType, dict]:
    """The C module of `kernel` built by ``pip install`` (CMake) and what it was built with."""
    mod = importlib.import_module(f"kernels_ext.{kernel}._{kernel}")
    info_file = Path(mod.__file__).with_name(f"_{kernel}_build.json")
    try:
        build_info = json.loads(info_file.read_text())
    except (OSError, ValueError):
        build_info = {"compiler": "unknown", "family": "unknown", "version": "", "flags": ""}
    family = {"GNU": "gcc", "Clang": "clang", "IntelLLVM": "icx", "Intel": "icc",
              "NVHPC": "nvc"}.get(build_info.get("family", ""), build_info.get("family", ""))
    build_info["label"] = f"{family}{build_info.get('version', '')}"
    build_info["family"] = family
    return mod, build_info
