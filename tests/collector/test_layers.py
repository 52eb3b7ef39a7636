"""The writer and the collector's assembly import downwards only, and without a circle.

Layers, lowest first: the writer (``files`` < ``recorder`` < ``seal`` < ``recovery`` < ``write``), the
assembly (``counters``, ``options``, ``ordering``, ``logjoin``, ``routing``, ``sealing``, ``claiming``, ``sink``),
the transports (``otlp``, ``forward``, ``http_receiver``, ``server``, ``importer``, ``cli``). The
writer imports nothing of the collector; the assembly nothing of a transport (the span exporter
uses it without a network listener). Imports under ``if TYPE_CHECKING`` do not count.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

WRITER = ["otel_session.bundle.files", "otel_session.bundle.recorder", "otel_session.bundle.seal", "otel_session.bundle.recovery", "otel_session.bundle.write"]
ASSEMBLY = [f"otel_session.collector.{name}" for name in
            ("counters", "options", "ordering", "logjoin", "routing", "sealing", "claiming", "sink")]
TRANSPORTS = [f"otel_session.collector.{name}" for name in
              ("otlp", "forward", "http_receiver", "server", "importer", "cli")]
MODULES = WRITER + ASSEMBLY + TRANSPORTS


def _imports_at_run_time(module: str) -> set[str]:
    """The project modules ``module`` imports when it runs."""
    tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for inner in ast.walk(statement)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("otel_session"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("otel_session"))
    return found & set(MODULES)


GRAPH = {module: _imports_at_run_time(module) for module in MODULES}


def test_the_writer_imports_nothing_of_the_collector():
    assert {module: GRAPH[module] - set(WRITER) for module in WRITER} == dict.fromkeys(WRITER, set())


def test_the_assembly_imports_no_transport():
    assert {module: GRAPH[module] & set(TRANSPORTS) for module in ASSEMBLY} == dict.fromkeys(ASSEMBLY, set())


def test_no_import_circle():
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(module: str, trail: tuple[str, ...]) -> None:
        if state.get(module) == "done":
            return
        assert state.get(module) != "open", " -> ".join((*trail, module))
        state[module] = "open"
        for imported in sorted(GRAPH[module]):
            visit(imported, (*trail, module))
        state[module] = "done"
        order.append(module)

    for module in MODULES:
        visit(module, ())
    assert len(order) == len(MODULES)
