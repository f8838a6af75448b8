"""The house rules of the code, checked: the layers import downwards only (no cycle), no
benchmark imports another, light commands import no plotting library, long modules say why."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("burstbench", "kernels_ext")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, top_level_only: bool) -> set[str]:
    """Modules `path` imports (absolute names); `top_level_only`: those imported when it
    loads (not inside functions, not under `if TYPE_CHECKING`)."""
    tree = ast.parse(path.read_text())
    nodes = []
    if top_level_only:
        for node in tree.body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            nodes += list(ast.walk(node)) if not isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else []
    else:
        nodes = list(ast.walk(tree))
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def _graph(top_level_only: bool) -> dict[str, set[str]]:
    files = {_module(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    return {m: {i for i in _imports(p, top_level_only) if i in files and i != m}
            for m, p in files.items()}


def test_no_module_imports_itself_back():
    graph = _graph(top_level_only=True)
    state: dict[str, int] = {}

    def visit(m: str, trail: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                pytest.fail("import cycle: " + " -> ".join(trail[trail.index(n):] + [n])
                            if n in trail else f"import cycle through {n}")
            if n not in state:
                visit(n, trail + [n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_no_benchmark_imports_another():
    """Not even inside a function: what two share lives in burstbench.core or a hook."""
    base = ROOT / "burstbench" / "benchmarks"
    for pkg in (p for p in base.iterdir() if (p / "__init__.py").exists()):
        for path in pkg.rglob("*.py"):
            for name in _imports(path, top_level_only=False):
                if name.startswith("burstbench.benchmarks."):
                    assert name.split(".")[2] == pkg.name, f"{path} imports {name}"


def test_the_shared_layers_name_no_benchmark():
    """burstbench.core and burstbench.report's shared modules import no benchmark package."""
    for folder in ("core", "report", "cost"):
        for path in (ROOT / "burstbench" / folder).rglob("*.py"):
            for name in _imports(path, top_level_only=False):
                assert not name.startswith("burstbench.benchmarks"), f"{path} imports {name}"


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"],
                                  ["params", "papermill_params/local.yaml"]])
def test_light_commands_import_no_plotting_library_nor_pandas(argv):
    code = ("import sys\nfrom burstbench.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('matplotlib', 'seaborn', 'pandas', 'scipy') "
            "if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout + proc.stderr


def test_a_module_over_400_lines_says_why():
    """Long modules exist where one thing is long (a kernel's CLI, a figure with many
    parts); the docstring says so, in a line starting 'Long:'."""
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            lines = path.read_text().count("\n")
            if lines > 400:
                doc = ast.get_docstring(ast.parse(path.read_text())) or ""
                assert "Long:" in doc, f"{path.relative_to(ROOT)} has {lines} lines"
