"""One run as one self-contained HTML file: the replay page, its facts and its bundle inlined.

Contract::

    html = export_html(root, session_id, run_id=None)   # -> str (run resolution as SPEC §7.3)
    script = inline_modules(STATIC, "replay.js")          # the page's ES modules as one script

The file opens from ``file://`` in a browser with no server and no network: its stylesheet, its
scripts and the run's bundle (the ``…/bundle`` tar, base64) are in the page, and the facts table
is rendered into it. The page replays the embedded bundle as it replays a bundle file opened with
"Open bundle…" (``static/replay.js``), with the reader's integrity checks.

A browser will not load ES modules from ``file://``, so the viewer's modules are joined into one
script here. The viewer's own modules only are joined, and they keep to what this needs (checked,
never guessed): imports are ``import { a, b as c } from "./x.js";`` at the top level, exports are
``export function|const|let|class NAME``, and no module imports another in a circle.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Any

from flask import Flask, render_template

from otel_session.bundle.archive import bundle_archive
from otel_session.bundle.read import read_bundle
from otel_session.replay.facts import build_session_facts
from otel_session.replay.resolve import resolve_run

__all__ = ["STATIC", "ExportError", "export_html", "inline_modules"]

STATIC = Path(__file__).resolve().parent / "static"

_IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"\./([\w.-]+\.js)";?[ \t]*$', re.M)
_EXPORT = re.compile(r"^export\s+((?:async\s+)?function\*?|const|let|class)\s+([A-Za-z_$][\w$]*)", re.M)
_OTHER_MODULE_SYNTAX = re.compile(r"^(?:import\b|export\b)", re.M)
_NAME = re.compile(r"[A-Za-z_$][\w$]*")


class ExportError(ValueError):
    """A module the joiner cannot take as it is (a form of import or export it does not read)."""


def _bindings(names: str, module: str) -> str:
    """``a, b as c`` → ``a, b: c`` (a destructuring of the imported module's exports)."""
    parts = []
    for item in (part.strip() for part in names.split(",")):
        if not item:
            continue
        original, _, alias = (word.strip() for word in item.partition(" as "))
        if not _NAME.fullmatch(original) or (alias and not _NAME.fullmatch(alias)):
            raise ExportError(f"{module}: cannot read the import {item!r}")
        parts.append(f"{original}: {alias}" if alias else original)
    return ", ".join(parts)


def inline_modules(static: Path, *entries: str) -> str:
    """The modules ``entries`` and every module they import, joined into one script (dependencies
    first, each in a scope of its own, each once)."""
    order: list[str] = []
    visiting: list[str] = []
    bodies: dict[str, str] = {}

    def visit(name: str) -> None:
        if name in bodies:
            return
        if name in visiting:
            raise ExportError(f"import circle: {' -> '.join([*visiting, name])}")
        visiting.append(name)
        source = (static / name).read_text(encoding="utf-8")
        imports = [(match.group(1), match.group(2)) for match in _IMPORT.finditer(source)]
        for _, dependency in imports:
            visit(dependency)
        body = _IMPORT.sub("", source)
        exported = [match.group(2) for match in _EXPORT.finditer(body)]
        body = _EXPORT.sub(lambda match: f"{match.group(1)} {match.group(2)}", body)
        if _OTHER_MODULE_SYNTAX.search(body):
            raise ExportError(f"{name}: an import or export the joiner does not read")
        head = "".join(f"  const {{ {_bindings(names, name)} }} = modules[{dependency!r}];\n"
                       for names, dependency in imports)
        bodies[name] = (f"modules[{name!r}] = (() => {{\n{head}{body}\n"
                        f"  return {{ {', '.join(exported)} }};\n}})();\n")
        visiting.pop()
        order.append(name)

    for entry in entries:
        visit(entry)
    script = "const modules = {};\n" + "".join(bodies[name] for name in order)
    return script.replace("</script", "<\\/script")  # only ever inside a string or a comment


def export_html(root: str | os.PathLike[str], session_id: str, run_id: str | None = None, *,
                app: Flask | None = None) -> str:
    """The HTML file of one run (see the module docstring). Raises ``resolve``'s errors for an
    unknown session or run."""
    from otel_session.viewer import create_app

    resolved = resolve_run(root, session_id, run_id)
    facts: dict[str, Any] = build_session_facts(read_bundle(resolved.path))
    app = app or create_app({"BUNDLE_DIR": str(root)})
    with app.test_request_context():
        return render_template(
            "replay.html", session_id=resolved.session_id, run_id=resolved.run_id, offline=True, exported=True,
            facts=facts, inline_css=(STATIC / "viewer.css").read_text(encoding="utf-8"),
            inline_script=inline_modules(STATIC, "theme.js", "replay.js"),
            embedded_bundle=base64.b64encode(bundle_archive(resolved.path, resolved.run_id)).decode("ascii"),
            embedded_name=f"{resolved.run_id}.tar",
        )
