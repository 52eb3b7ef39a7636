"""Settings read from the environment, in one place (the README's configuration table)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from otel_session.core.log import get_logger, log_setting

logger = get_logger(__name__)

__all__ = [
    "DEFAULT_BUNDLE_DIR", "ENV_BUNDLE_DIR", "ENV_SEAL_SYNC", "SEAL_SYNC_MODES", "bundle_dir", "bundle_dir_option", "flag",
    "missing_bundle_dir", "seal_sync_setting",
]

ENV_BUNDLE_DIR = "OTEL_SESSION_DIR"
DEFAULT_BUNDLE_DIR = "./otel-session-data"
ENV_SEAL_SYNC = "OTEL_SESSION_SEAL_SYNC"
SEAL_SYNC_MODES = ("auto", "syncfs", "fsync")


def bundle_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The bundle root: ``explicit``, else ``$OTEL_SESSION_DIR``, else ``./otel-session-data``."""
    return Path(explicit or os.environ.get(ENV_BUNDLE_DIR) or DEFAULT_BUNDLE_DIR)


def missing_bundle_dir(explicit: str | os.PathLike[str] | None = None) -> str | None:
    """Why the bundle root (as :func:`bundle_dir` picks it) is none, or None when it is a directory.

    Commands that read bundles say this instead of "no sessions": a mistyped ``--dir`` or a
    ``$OTEL_SESSION_DIR`` set elsewhere is likelier than an empty recording.
    """
    root = bundle_dir(explicit)
    if explicit:
        source = "--dir"
    elif os.environ.get(ENV_BUNDLE_DIR):
        source = f"${ENV_BUNDLE_DIR}"
    else:
        source = f"the default; set --dir or ${ENV_BUNDLE_DIR}"
    if not root.exists():
        return f"no bundle root at {root} ({source}): nothing has been recorded there"
    if not root.is_dir():
        return f"{root} ({source}) is not a directory"
    return None


bundle_dir_option = click.option(
    "--dir",
    "bundle_root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Bundle root (default: ${ENV_BUNDLE_DIR}, else {DEFAULT_BUNDLE_DIR}).",
)
"""The ``--dir`` option every command shares; pass its value to :func:`bundle_dir`."""


def flag(name: str) -> bool:
    """A boolean environment setting: ``true``/``1``/``yes``/``on`` (any case) is on, anything else off."""
    return os.environ.get(name, "").strip().lower() in {"true", "1", "yes", "on"}


def seal_sync_setting() -> str:
    """How seals make bundles durable (``otel_session.bundle.seal``): ``$OTEL_SESSION_SEAL_SYNC`` if one of
    ``auto`` / ``syncfs`` / ``fsync`` (any case), else ``auto`` (an unknown value is ignored, with a warning)."""
    raw = os.environ.get(ENV_SEAL_SYNC, "").strip().lower()
    if raw in SEAL_SYNC_MODES:
        return raw
    if raw:
        logger.warning("%s=%r is not one of auto|syncfs|fsync; using auto", ENV_SEAL_SYNC, log_setting(raw))
    return "auto"
