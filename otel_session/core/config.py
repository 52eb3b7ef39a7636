"""Settings read from the environment, in one place (the README's configuration table)."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path

import click
import orjson

from otel_session.core.log import get_logger, log_setting

logger = get_logger(__name__)

__all__ = [
    "DEFAULT_BUNDLE_DIR", "ENV_BUNDLE_DIR", "ENV_LANGGRAPH_REQUIRED_SLOTS", "ENV_REQUIRED_SLOTS", "ENV_SEAL_SYNC",
    "ENV_SPAN_RECORDS", "ENV_STORE",
    "SEAL_SYNC_MODES", "bundle_dir", "bundle_dir_option", "flag", "missing_bundle_dir", "parse_required_slots",
    "required_slots_for", "required_slots_setting", "seal_sync_setting",
]

ENV_BUNDLE_DIR = "OTEL_SESSION_DIR"
DEFAULT_BUNDLE_DIR = "./otel-session-data"
ENV_SEAL_SYNC = "OTEL_SESSION_SEAL_SYNC"
ENV_STORE = "OTEL_SESSION_STORE"
"""The bundle store sealed runs are kept in (``bundle.store.open_store``)."""
SEAL_SYNC_MODES = ("auto", "syncfs", "fsync")
ENV_SPAN_RECORDS = "OTEL_SESSION_SPAN_RECORDS"
"""``on``: one ``span`` record per span journaled (``normalize.span_record``); default off (it costs
the collector about 1.7× the CPU per span: docs/performance.md)."""
ENV_REQUIRED_SLOTS = "OTEL_SESSION_REQUIRED_SLOTS"
ENV_LANGGRAPH_REQUIRED_SLOTS = "OTEL_SESSION_LANGGRAPH_REQUIRED_SLOTS"
"""The older, LangGraph-only spelling of ``OTEL_SESSION_REQUIRED_SLOTS`` (JSON only; deprecated)."""


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


def required_slots_setting() -> dict[str, list[str]]:
    """The required slots declared per agent or graph name (``$OTEL_SESSION_REQUIRED_SLOTS``, with
    the deprecated ``$OTEL_SESSION_LANGGRAPH_REQUIRED_SLOTS`` under it: a name in both takes the
    new one's). Read again when the variables change; a bad part is left out with a warning."""
    return _required_slots(os.environ.get(ENV_REQUIRED_SLOTS, ""), os.environ.get(ENV_LANGGRAPH_REQUIRED_SLOTS, ""))


@functools.lru_cache(maxsize=4)
def _required_slots(raw: str, legacy: str) -> dict[str, list[str]]:
    declared = parse_required_slots(legacy, ENV_LANGGRAPH_REQUIRED_SLOTS) if legacy.strip() else {}
    if raw.strip():
        declared.update(parse_required_slots(raw, ENV_REQUIRED_SLOTS))
    return declared


def parse_required_slots(raw: str, origin: str = ENV_REQUIRED_SLOTS) -> dict[str, list[str]]:
    """``name=slot,slot;name=slot`` (``;`` or new lines between names, ``#`` comments), a JSON
    object of lists, or ``@path`` of a file holding either. ``origin`` names the setting in warnings."""
    text = raw.strip()
    if text.startswith("@"):
        try:
            text = Path(text[1:]).expanduser().read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            logger.warning("%s: cannot read %s (%s); no required slots declared", origin, text[1:], error.__class__.__name__)
            return {}
    if text.startswith("{"):
        return _json_slots(text, origin)
    declared: dict[str, list[str]] = {}
    for part in text.replace("\n", ";").split(";"):
        part = part.split("#", 1)[0].strip()
        if not part:
            continue
        name, equals, slots = part.partition("=")
        names = _names(slots.split(","))
        if not equals or not name.strip() or not names:
            logger.warning("%s: %r is not name=slot,slot; left out", origin, log_setting(part))
            continue
        declared[name.strip()] = names
    return declared


def _json_slots(text: str, origin: str) -> dict[str, list[str]]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        logger.warning("%s is not a JSON object of lists; no required slots declared", origin)
        return {}
    declared = {}
    for name, slots in value.items():
        if isinstance(slots, list) and _names(slots):
            declared[str(name)] = _names(slots)
        else:
            logger.warning("%s: %r is not a list of slot names; left out", origin, log_setting(str(name)))
    return declared


def _names(slots: Iterable[object]) -> list[str]:
    """The slot names, each once, in order (blank ones left out)."""
    return list(dict.fromkeys(name for name in (str(slot).strip() for slot in slots) if name))


def required_slots_for(*names: str | None, declared: dict[str, list[str]] | None = None) -> list[str]:
    """The slots declared for any of ``names`` (an agent, a graph, ``graph.node``), each once."""
    declared = required_slots_setting() if declared is None else declared
    return _names(slot for name in names if name for slot in declared.get(name, ()))
