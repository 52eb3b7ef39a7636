"""The instrument package's modules import each other without a circle (issue 20 §2, issue 29).

Every import counts, as ``python3 /work/shared/tools/layering.py`` counts them: at the top, inside
functions and under ``if TYPE_CHECKING:``. The context, the span processor and the runtime know
runs and turns through ``_handles``' Protocols and the recorder through the processor's; they import
no section. The package's ``__init__`` is a module like the others (a module that imports the
package imports what ``__init__`` imports)."""

from __future__ import annotations

import ast
from pathlib import Path

import otel_session.instrument

PACKAGE = "otel_session.instrument"
ROOT = Path(otel_session.instrument.__file__).parent


def _name(path: Path) -> str:
    return PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Modules of the package that ``path`` imports anywhere (any depth, any condition). The package
    itself counts when a name of its ``__init__`` is imported, not as a submodule's parent."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative to the package (``from . import x``, ``from ._run import y``)
                parent = PACKAGE.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
            # ``from package import module`` imports that module; ``from package import name``, the package
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target:
                found.add(target)
    found.discard(_name(path))
    return found


def _graph() -> dict[str, set[str]]:
    paths = {_name(path): path for path in ROOT.glob("*.py")}
    modules = set(paths)
    return {name: _imports(path, modules) for name, path in paths.items()}


def test_no_import_circles_counting_every_import():
    graph = _graph()
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> None:
        assert module not in path, " -> ".join([*path[path.index(module):], module])
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            walk(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        walk(module, [])


def test_a_type_checking_import_is_an_edge():
    """The rule's own check: an import under ``if TYPE_CHECKING:`` or in a function is counted."""
    graph = _graph()
    assert f"{PACKAGE}._handles" in graph[f"{PACKAGE}._context"]  # only under TYPE_CHECKING there
    assert f"{PACKAGE}.stream_deltas" in graph[f"{PACKAGE}.openai_streams"]


def test_the_processor_and_the_runtime_import_no_section():
    graph = _graph()
    sections = {f"{PACKAGE}.{name}" for name in ("_run", "_turn", "_message", "_tool")}
    assert not graph[f"{PACKAGE}.processor"] & (sections | {f"{PACKAGE}._runtime", PACKAGE})
    assert not graph[f"{PACKAGE}._runtime"] & (sections | {PACKAGE})
    assert not graph[f"{PACKAGE}._context"] & (sections | {PACKAGE, f"{PACKAGE}._runtime"})


def test_every_module_is_under_600_lines():
    assert {path.name: n for path in ROOT.glob("*.py") if (n := len(path.read_text().splitlines())) >= 600} == {}
