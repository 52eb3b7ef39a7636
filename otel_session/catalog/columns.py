"""A run's row as the catalog's SQL columns hold it, and back (no SQL library imported here).

Contract::

    values = stored_values(row, origin)     # the row's values in ``FIELDS`` order (JSON fields as text)
    row = row_of_columns({"path": ..., ...})   # a ``runs`` record (name → value) as a RunRow
    page = sessions_page_of(groups, limit, records)   # a sessions page from its two statements' records

``FIELDS`` is the ``runs`` table's column order (``schema.runs``). The JSON columns hold lists;
those whose items are rows of a fixed shape are tuples again when read.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from .cursor import session_cursor
from .model import RunRow, Scope, SessionGroup, SessionsPage

__all__ = ["FIELDS", "JSON_FIELDS", "row_of_columns", "sessions_page_of", "stored_values"]

FIELDS = (
    "origin", "path", "directory", "scope", "session_id", "run_id", "kind", "created_at", "eval_id", "agent", "service",
    "capture_status", "integrity", "status", "started_at", "finished_at", "duration_ms", "event_count", "turns", "messages",
    "model_calls", "tool_calls", "tool_errors", "guards_blocked", "repeated_asks", "feedback_count", "input_tokens",
    "output_tokens", "tokens", "models", "latency_p50_ms", "latency_p95_ms", "turn_p50_ms", "turn_p95_ms", "usage_by_model",
    "problems", "diagnostics", "feedback_mean", "search_text", "stamp", "location", "tags", "metadata", "scores",
)
"""The ``runs`` table's columns, in order (``schema.runs``; a test checks they agree)."""
JSON_FIELDS = ("models", "problems", "diagnostics", "usage_by_model", "tags", "metadata", "scores")
_TUPLE_FIELDS = ("usage_by_model", "metadata", "scores")
"""JSON fields whose items are rows of a fixed shape (tuples again when read)."""
_JSON_POSITIONS = [FIELDS.index(name) for name in JSON_FIELDS]
_SCOPE, _ORIGIN = FIELDS.index("scope"), FIELDS.index("origin")
_row_values = operator.attrgetter(*(name if name != "origin" else "path" for name in FIELDS))  # origin: set below


def stored_values(row: RunRow, origin: str) -> tuple[Any, ...]:
    """``row``'s values in ``FIELDS`` order, as the catalog stores them, written by ``origin``."""
    values = list(_row_values(row))  # no per-field test: a writer pass binds hundreds
    for position in _JSON_POSITIONS:
        value = values[position]
        values[position] = orjson.dumps(list(value)).decode() if value else "[]"
    values[_SCOPE], values[_ORIGIN] = row.scope.value, origin
    return tuple(values)


def row_of_columns(mapping: Mapping[str, Any]) -> RunRow:
    """The RunRow of a ``runs`` record (its ``tokens`` column is the row's property)."""
    values = dict(mapping)
    values.update({name: tuple(orjson.loads(values[name])) for name in JSON_FIELDS})
    values.update({name: tuple(tuple(item) for item in values[name]) for name in _TUPLE_FIELDS})
    values["scope"] = Scope(values["scope"])
    values.pop("tokens")
    return RunRow(**values)


def sessions_page_of(groups: Sequence[Sequence[Any]], limit: int, records: Iterable[Mapping[str, Any]]) -> SessionsPage:
    """The page of ``queries.sessions_groups``'s ``(directory, session_id, newest_created_at,
    run_count)`` (``limit + 1`` at most: the last says more follow) and of ``sessions_runs``'s records."""
    by_directory: dict[str, list[RunRow]] = {group[0]: [] for group in groups[:limit]}
    for record in records:
        by_directory[record["directory"]].append(row_of_columns(record))
    listed = [SessionGroup(directory, session_id, newest, count, by_directory[directory])
              for directory, session_id, newest, count in groups[:limit]]
    return SessionsPage(listed, session_cursor(listed[-1]) if len(groups) > limit else None)
