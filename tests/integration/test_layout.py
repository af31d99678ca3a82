"""Protects the package's shape, read from its folders: the scoring core is the modules of
``full_metric/`` itself; ``files/`` (file formats, corpus scoring, processes) builds on the core;
``research/`` on the core and files; ``faces/`` (evaluate modules, command line, app, training
helpers) on any of them; nothing imports a face but a door to it. Importing the core loads no
evaluate, gradio, scipy or matplotlib."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from ..helpers import run_checked

PACKAGE = Path(__file__).resolve().parents[2] / "full_metric"
#: what each layer may import (its own layer included)
ALLOWED = {"core": {"core"}, "files": {"core", "files"}, "research": {"core", "files", "research"},
           "faces": {"core", "files", "research", "faces"}, "door": {"faces"}}
#: modules of the package folder that only open a face: ``python -m full_metric`` and the
#: ``full_metric.training`` import path users write
DOORS = {"__main__", "training"}


def _layer(module: str) -> str:
    """A dotted module's layer, from the folder it lives in."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()):
        return parts[1] if parts[1] in ALLOWED else "core"
    return "door" if len(parts) == 2 and parts[1] in DOORS else "core"


def _modules() -> dict[str, Path]:
    return {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in PACKAGE.rglob("*.py")}


def test_the_layers_are_folders_and_each_imports_only_what_lies_below_it():
    modules = _modules()
    layers = {name: _layer(name) for name in modules}
    assert {layers[m] for m in modules} == set(ALLOWED)
    assert {m for m in modules if layers[m] == "faces"} >= {
        "full_metric.faces.metric", "full_metric.faces.comparison_metric", "full_metric.faces.cli",
        "full_metric.faces.webapp", "full_metric.faces.training"}
    for name, path in modules.items():
        for module in {m.removesuffix(".__init__") for m in _all_imports(path)} & set(modules) - {name}:
            if name == "full_metric" and module == "full_metric.faces.metric":
                continue  # full_metric.FULL: a lazy re-export of the metric face, imported on first use
            assert layers[module] in ALLOWED[layers[name]], f"{name} ({layers[name]}) imports {module} ({layers[module]})"


def test_the_doors_only_open_a_face():
    import full_metric.faces.training
    import full_metric.training

    assert full_metric.training is full_metric.faces.training
    for door in DOORS:
        tree = ast.parse((PACKAGE / f"{door}.py").read_text(encoding="utf-8"))
        assert not any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.walk(tree)), door


def test_importing_the_core_loads_no_heavy_or_face_library():
    code = (
        "import sys, full_metric, full_metric.scorer, full_metric.settings, full_metric.files.dialog_files, "
        "full_metric.comparison, full_metric.files.distributed\n"
        "bad = [m for m in ('evaluate', 'gradio', 'scipy', 'matplotlib', 'full_metric.research') if m in sys.modules]\n"
        "print(full_metric.__file__)\nprint(bad)"
    )
    import os

    done = run_checked([sys.executable, "-c", code], timeout=120, cwd=PACKAGE.parent,
                       env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
    where, bad = done.stdout.strip().splitlines()
    assert Path(where) == PACKAGE / "__init__.py" and bad == "[]"  # this checkout's package, and nothing heavy


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


#: The house rules of issue 39: small modules and short functions.
MAX_FILE_LINES, MAX_FUNCTION_LINES = 400, 70


def test_no_module_is_over_400_lines_and_no_function_over_70():
    long_files = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
                  if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES}
    long_functions = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    long_functions[f"{path.relative_to(PACKAGE)}:{node.name}"] = n
    assert not long_files and not long_functions, (long_files, long_functions)


def test_no_module_imports_another_modules_private_names():
    """A name with a leading underscore stays in its module: no package module imports one from another."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("full_metric")):
                found += [f"{path.relative_to(PACKAGE)}: {a.name}" for a in node.names
                          if a.name.startswith("_") and a.name != "__version__"]
    assert not found, found


def test_every_test_the_rules_table_names_exists():
    """docs/layout.md's table of rules names, for each rule, the test that holds it: each named test
    file and test function exists (a renamed test would leave the table pointing nowhere)."""
    import re

    docs = (PACKAGE.parent / "docs" / "layout.md").read_text(encoding="utf-8")
    named = re.findall(r"`(test_\w+\.py)(?:::(\w+))?`", docs)
    assert len(named) > 10
    files = {p.name: p for p in (PACKAGE.parent / "tests").rglob("test_*.py")}
    for file, function in named:
        assert file in files, file
        assert not function or f"def {function}(" in files[file].read_text(encoding="utf-8"), (file, function)
