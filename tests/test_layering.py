"""The import graph follows the pipeline (docs/architecture.md, "Layering"): no circles, and no
arrow from a lower stage to a higher one.

Stages, lowest first, one package each: core (``_version``, ``core/``: record shape, paths,
conventions, settings, logs) → normalize → redact → bundle (write, read) → catalog (the run
catalog: rows, SQL, catch-up) → replay (reduce, facts,
resolve, latency, listing) → the producers (instrument, collector) → the surfaces (viewer, the CLI,
the demo, testing helpers, the package's re-exports). A module may import modules of its own stage
and of lower stages only. Imports under ``if TYPE_CHECKING:`` are
annotations, not arrows; imports inside functions are arrows all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"otel_session": ROOT / "otel_session", "otel_session.collector": ROOT / "collector",
            "otel_session.viewer": ROOT / "viewer"}

STAGES = [
    ("core", ("_version", "core")),
    ("normalize", ("normalize",)),
    ("redact", ("redact",)),
    ("bundle", ("bundle",)),
    ("catalog", ("catalog",)),
    ("replay", ("replay",)),
    ("producers", ("instrument", "collector")),
    ("surfaces", ("viewer", "cli", "cli_replay", "cli_store", "demo", "testing", "")),
]


def _modules() -> dict[str, Path]:
    modules = {}
    for package, base in PACKAGES.items():
        for path in sorted(base.rglob("*.py")):
            parts = [part for part in path.relative_to(base).with_suffix("").parts if part != "__init__"]
            if package == "otel_session" and parts and parts[0] in ("collector", "viewer"):
                continue
            modules[".".join([package, *parts])] = path
    return modules


MODULES = _modules()


def stage_of(module: str) -> int:
    """The index in STAGES of ``module`` (by its first name under ``otel_session.``)."""
    rest = module.removeprefix("otel_session").lstrip(".")
    first = rest.split(".")[0]
    for index, (_, prefixes) in enumerate(STAGES):
        for prefix in prefixes:
            if first == prefix:
                return index
    raise AssertionError(f"{module} belongs to no stage: add it to STAGES and to docs/architecture.md")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(module: str, name: str | None) -> str:
    candidate = f"{module}.{name}" if name else module
    return candidate if candidate in MODULES else module


def imports_of(module: str) -> set[str]:
    """The project modules ``module`` imports (``from pkg import mod`` names the module)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("otel_session"):
            for alias in node.names:
                found.add(_resolve(node.module, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("otel_session"):
                    found.add(alias.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(module)
    return {name for name in found if name in MODULES}


GRAPH = {module: imports_of(module) for module in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_arrow_to_a_higher_stage(module: str) -> None:
    own = stage_of(module)
    higher = sorted(dep for dep in GRAPH[module] if stage_of(dep) > own)
    assert not higher, f"{module} ({STAGES[own][0]}) imports higher stages: {higher}"


def test_no_import_circles() -> None:
    # Package __init__ modules re-export their submodules; an edge into a package from its own
    # submodule through the package name is still a circle, so nothing is exempt.
    state: dict[str, int] = {}
    path: list[str] = []
    cycles: list[list[str]] = []

    def walk(module: str) -> None:
        state[module] = 1
        path.append(module)
        for dep in sorted(GRAPH[module]):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                walk(dep)
        path.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            walk(module)
    assert not cycles, "import circles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def test_every_module_has_a_stage() -> None:
    for module in MODULES:
        stage_of(module)
