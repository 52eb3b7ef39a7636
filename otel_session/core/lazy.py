"""Re-exports imported when first used (PEP 562), for a package whose ``__init__`` names them.

Contract::

    __getattr__, __dir__ = lazy_exports(globals(), {"BundleWriter": "otel_session.bundle.write"})

A command that imports one module of a package then pays for that module only, not for everything
the package re-exports (the writer, the redactor, the OpenTelemetry SDK).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(namespace: dict[str, Any], homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module's ``__getattr__`` (a name of ``homes`` imported from its module, then kept in
    ``namespace``) and ``__dir__`` (``namespace`` and ``__all__``)."""
    module = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__
