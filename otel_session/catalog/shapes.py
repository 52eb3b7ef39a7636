"""Which stored statement answers a sessions list, and the values it binds (no SQL library here).

Contract::

    version = statements_version()        # the code that makes the statements: others' are never used
    name = groups_name(query)             # "sessions.groups:agent,scope": None when no stored text can answer
    name = runs_name(query)               # the page's runs, by the same filters
    values = bound_values(query)          # the filters': {"agent": …, "scope": "live", "search": "%-escaped", …}
    values = cursor_values(query)         # a sessions page's cursor: {"cursor_newest": …, "cursor_directory": …}
    pattern = like_pattern(text)          # ``text`` for LIKE '%…%' ESCAPE '/'

A list statement's structure depends only on which filters its query has (its shape); every value a
query gives is a bound parameter named in ``BOUND`` (``queries``), so the text compiled for one query
answers every query of its shape. The other bound values of a compiled text are constants of the
shape (a status's two values for ``capture_failed``, SQLite's ``OFFSET 0``). The tag, metadata and
score filters put one condition per label: no stored text answers them.
"""

from __future__ import annotations

import os
import zlib
from functools import cache
from typing import Any

from .cursor import decode_cursor
from .model import Order, RunQuery, SortKey, StatusFilter
from .settings import SCHEMA_VERSION

__all__ = [
    "BOUND", "DIRECTORIES", "LIKE_ESCAPE", "PENDING_NAME", "bound_values", "cursor_values", "groups_name", "like_pattern",
    "runs_name", "statements_version",
]

_EQUAL = ("agent", "service", "kind", "eval_id", "session_id", "since", "until")
"""Filters bound as given (``since`` and ``until`` as ``created_at`` bounds)."""
BOUND = frozenset({*_EQUAL, "scope", "status", "search", "cursor_newest", "cursor_directory", "limit", "directories",
                   "runs_per_session", "origin"})
"""The names of the values a caller binds; any other bound value of a compiled text is a constant."""
DIRECTORIES = "{directories}"
"""Where a stored runs statement takes the page's session directories (a ``?`` each)."""
PENDING_NAME = "runs.pending"
"""The stored statement of ``queries.pending_paths``: rows whose figures are not counted yet."""
LIKE_ESCAPE = "/"
_SOURCES = ("queries.py", "labels.py", "schema.py", "settings.py", "shapes.py", "statements.py")
"""The modules whose code decides a compiled text (or what a stored one's name and values mean)."""


@cache
def statements_version() -> str | None:
    """The schema version and a checksum of the code that makes the statements: stored texts of
    another version (another release, an edited source) are never run. None when a source cannot be read."""
    here = os.path.dirname(__file__)
    digest = 0
    try:
        for name in _SOURCES:
            with open(os.path.join(here, name), "rb") as source:
                digest = zlib.crc32(source.read(), digest)
    except OSError:
        return None
    return f"{SCHEMA_VERSION}.{digest:08x}"


def _filter_shape(query: RunQuery) -> list[str] | None:
    if query.tags or query.metadata or query.scores:
        return None
    shape = [name for name in (*_EQUAL, "scope", "search") if getattr(query, name) is not None]
    if query.status is not None:
        shape.append("status=capture_failed" if query.status is StatusFilter.CAPTURE_FAILED else "status")
    if query.problem is not None:
        shape.append(f"problem={query.problem.value}")
    return sorted(shape)


def groups_name(query: RunQuery) -> str | None:
    """The stored name of the sessions page's groups statement for ``query``'s shape (None: none can answer)."""
    shape = _filter_shape(query)
    if shape is None:
        return None
    return "sessions.groups:" + ",".join([*shape, *(["cursor"] if query.cursor is not None else [])])


def runs_name(query: RunQuery) -> str | None:
    """The stored name of the statement of the page's runs (each session's newest) for ``query``'s shape."""
    shape = _filter_shape(query)
    return None if shape is None else "sessions.runs:" + ",".join(shape)


def like_pattern(text: str) -> str:
    """``text`` with LIKE's wildcards and the escape itself escaped (``ESCAPE '/'``)."""
    escape = LIKE_ESCAPE
    return text.replace(escape, escape * 2).replace("%", escape + "%").replace("_", escape + "_")


def bound_values(query: RunQuery) -> dict[str, Any]:
    """The values ``query``'s filters bind, by name (those of ``queries.run_filters``)."""
    values: dict[str, Any] = {name: getattr(query, name) for name in _EQUAL if getattr(query, name) is not None}
    if query.scope is not None:
        values["scope"] = query.scope.value
    if query.status is not None and query.status is not StatusFilter.CAPTURE_FAILED:
        values["status"] = query.status.value
    if query.search is not None:
        values["search"] = like_pattern(query.search)
    return values


def cursor_values(query: RunQuery) -> dict[str, str]:
    """Where a sessions page's cursor ends (none without a cursor); :class:`~.model.BadQuery` for a
    cursor this server did not give."""
    if query.cursor is None:
        return {}
    _, newest, directory, _ = decode_cursor(query.cursor, SortKey.CREATED_AT, Order.DESC)
    return {"cursor_newest": newest, "cursor_directory": directory}
