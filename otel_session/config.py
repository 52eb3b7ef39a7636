"""Settings read from the environment, in one place (the README's configuration table)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_BUNDLE_DIR", "ENV_BUNDLE_DIR", "bundle_dir", "flag"]

ENV_BUNDLE_DIR = "OTEL_SESSION_DIR"
DEFAULT_BUNDLE_DIR = "./otel-session-data"


def bundle_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The bundle root: ``explicit``, else ``$OTEL_SESSION_DIR``, else ``./otel-session-data``."""
    return Path(explicit or os.environ.get(ENV_BUNDLE_DIR) or DEFAULT_BUNDLE_DIR)


def flag(name: str) -> bool:
    """A boolean environment setting: ``true``/``1``/``yes``/``on`` (any case) is on, anything else off."""
    return os.environ.get(name, "").strip().lower() in {"true", "1", "yes", "on"}
