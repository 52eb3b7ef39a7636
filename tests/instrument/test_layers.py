"""The instrument package's modules import each other without a circle (issue 20 §2): the span
processor depends on the context module, not on the API sections; the runtime gets its
processors passed in and imports no section."""

from __future__ import annotations

import ast
from pathlib import Path

import otel_session.instrument

PACKAGE = "otel_session.instrument"
ROOT = Path(otel_session.instrument.__file__).parent


def _runtime_imports(path: Path) -> set[str]:
    """Modules of the package that ``path`` imports when it runs (not under ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == PACKAGE:
                    found.update(f"{PACKAGE}.{alias.name}" for alias in node.names)
                elif node.module.startswith(PACKAGE + "."):
                    found.add(node.module)
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    visit([child])

    visit(tree.body)
    return {name for name in found if (ROOT / f"{name.rsplit('.', 1)[1]}.py").exists()}


def _graph() -> dict[str, set[str]]:
    return {f"{PACKAGE}.{path.stem}": _runtime_imports(path) for path in ROOT.glob("*.py") if path.stem != "__init__"}


def test_no_import_circles():
    graph = _graph()
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> None:
        assert module not in path, " -> ".join([*path, module])
        if module in done:
            return
        for imported in graph.get(module, ()):
            walk(imported, [*path, module])
        done.add(module)

    for module in graph:
        walk(module, [])


def test_the_processor_and_the_runtime_import_no_section():
    graph = _graph()
    sections = {f"{PACKAGE}.{name}" for name in ("_run", "_turn", "_message", "_tool")}
    assert not graph[f"{PACKAGE}.processor"] & (sections | {f"{PACKAGE}._runtime"})
    assert not graph[f"{PACKAGE}._runtime"] & sections
