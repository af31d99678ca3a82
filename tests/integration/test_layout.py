"""Protects the package's shape: the core imports neither the research tooling nor the faces, and
importing the core loads no evaluate, gradio, scipy or matplotlib."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from ..helpers import run_checked

PACKAGE = Path(__file__).resolve().parents[2] / "full_metric"
#: the thin layers over the core: evaluate (metric, comparison_metric), the command line and its
#: file formats (cli, corpus), the app (webapp)
FACES = {"metric", "comparison_metric", "cli", "corpus", "webapp", "__main__"}


def _imports(path: Path) -> set[str]:
    """The package modules a module imports (relative imports resolved to dotted names)."""
    here = path.relative_to(PACKAGE.parent).with_suffix("").parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - node.level]
            found.add(".".join((*base, node.module)) if node.module else ".".join(base))
    return found


def test_the_core_imports_neither_research_nor_faces():
    for path in PACKAGE.glob("*.py"):
        if path.stem in FACES or path.stem == "__init__":  # __init__'s FULL is a lazy re-export of the metric face
            continue
        for module in _imports(path):
            assert not module.startswith("full_metric.research"), f"{path.name} imports {module}"
            assert module.split(".")[-1] not in FACES, f"{path.name} imports the face {module}"


def test_research_imports_no_face():
    for path in (PACKAGE / "research").glob("*.py"):
        for module in _imports(path):
            assert module.split(".")[-1] not in FACES, f"research/{path.name} imports the face {module}"


def test_importing_the_core_loads_no_heavy_or_face_library():
    code = (
        "import sys, full_metric, full_metric.scorer, full_metric.settings, full_metric.dialog_files, "
        "full_metric.comparison, full_metric.distributed\n"
        "bad = [m for m in ('evaluate', 'gradio', 'scipy', 'matplotlib', 'full_metric.research') if m in sys.modules]\n"
        "print(bad)"
    )
    done = run_checked([sys.executable, "-c", code], timeout=120)
    assert done.stdout.strip() == "[]"


def _all_imports(path: Path) -> set[str]:
    """Every package module a module imports, at module level or inside functions (relative and
    absolute ``full_metric`` imports; ``from . import x`` counts as importing ``x``)."""
    here = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if here[-1] == "__init__":
        here = (*here[:-1], "__init__")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here[: len(here) - node.level])
                module = f"{base}.{node.module}" if node.module else base
            elif (node.module or "").startswith("full_metric"):
                module = node.module
            else:
                continue
            names = [f"{module}.{a.name}" for a in node.names]
            found.update(n for n in names if (PACKAGE.parent / (n.replace(".", "/") + ".py")).exists())
            found.add(module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("full_metric"))
    return found


def test_the_import_graph_has_no_cycle():
    """No module imports, even inside a function, a module that imports it back (before, settings
    imported the scorer for its presets while the scorer imported settings)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    graph = {name: {m.removesuffix(".__init__") for m in _all_imports(path)} & set(modules) - {name}
             for name, path in modules.items()}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
