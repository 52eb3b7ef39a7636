"""A sessions page read with the standard library's ``sqlite3``, from the statements the catalog keeps.

Contract::

    page = direct_sessions_page(root, query, url=None, runs_per_session=20)   # SessionsPage; None: ask SqlCatalog

A fresh ``otel-session sessions`` pays for SQLAlchemy's import (≈ 250 ms of CPU) before its first
row; this read imports none of it. It runs the SQLite text that SQLAlchemy compiled for the same
query's shape and stored in the catalog (``statements``), on a read-only connection with the busy
timeout, in one read transaction, and gives the page ``SqlCatalog.sessions_page`` gives. It answers
None, so the caller asks SQLAlchemy, when anything else is the case: the catalog is turned off, not
an SQLite file, missing, of another schema version, or without this code's statements for that shape
(``shapes.statements_version``); a filter no stored statement answers (tags, metadata, scores); a
row of this origin whose figures are pending (counting them reads its bundle and writes the row);
any SQLite error. A cursor this server did not give is a :class:`~.model.BadQuery`, as from SQLAlchemy.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import orjson

from otel_session.core.log import get_logger

from .columns import sessions_page_of
from .model import RunQuery, SessionsPage
from .settings import BUSY_TIMEOUT_S, SCHEMA_VERSION, catalog_disabled, catalog_origin, catalog_url
from .shapes import DIRECTORIES, PENDING_NAME, bound_values, cursor_values, groups_name, runs_name, statements_version

__all__ = ["direct_sessions_page"]

logger = get_logger(__name__)

_SCHEMA = "SELECT value FROM catalog_meta WHERE key = 'schema'"
_STORED = "SELECT name, sql, parameters FROM compiled_statements WHERE version = ? AND name IN (?, ?, ?)"
"""The two reads that find the stored statements (``schema.meta_table``, ``schema.compiled_statements``)."""


def direct_sessions_page(root: Path, query: RunQuery, *, url: str | None = None,
                         runs_per_session: int = 20) -> SessionsPage | None:
    """The sessions page ``query`` selects, read with ``sqlite3``; None when SQLAlchemy must answer."""
    names = (groups_name(query), runs_name(query))
    database = _sqlite_file(root, url)
    version = statements_version()
    if database is None or version is None or None in names or not os.path.isfile(database):
        return None
    values = {**bound_values(query), **cursor_values(query)}
    try:
        connection = sqlite3.connect(f"file:{_uri_path(database)}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                                     isolation_level=None)
    except sqlite3.Error as exc:
        logger.debug("catalog: %s not read directly: %s", database, exc)
        return None
    try:
        connection.execute("BEGIN")  # one snapshot for every statement of the page
        return _read(connection, version, names, values, query.limit, runs_per_session, catalog_origin(root, url))
    except (sqlite3.Error, KeyError) as exc:  # KeyError: a stored statement asks for a value no list gives
        logger.debug("catalog: %s not read directly: %r", database, exc)
        return None
    finally:
        connection.close()


def _sqlite_file(root: Path, url: str | None) -> str | None:
    """The catalog's SQLite file, or None (turned off, another database, in memory)."""
    if catalog_disabled(url):
        return None
    resolved = catalog_url(root, url)
    database = resolved.removeprefix("sqlite:///")
    if not resolved.startswith("sqlite:///") or database in ("", ":memory:") or "?" in database:
        return None
    return database


def _uri_path(path: str) -> str:
    """``path`` as an SQLite URI's path (``%``, ``?`` and ``#`` escaped)."""
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


def _read(connection: sqlite3.Connection, version: str, names: tuple[str | None, str | None], values: dict[str, Any],
          limit: int, runs_per_session: int, origin: str) -> SessionsPage | None:
    if connection.execute(_SCHEMA).fetchone() != (SCHEMA_VERSION,):
        return None
    stored = {name: (sql, orjson.loads(parameters))
              for name, sql, parameters in connection.execute(_STORED, (version, PENDING_NAME, *names))}
    if len(stored) < 3:
        return None
    if _run(connection, stored[PENDING_NAME], {"origin": origin, "limit": 1}).fetchone() is not None:
        return None  # runs sealed since the last pass: their figures are counted first (a filter sees them)
    groups = _run(connection, stored[names[0]], {**values, "limit": limit + 1}).fetchall()
    records: list[dict[str, Any]] = []
    if groups:
        found = _run(connection, stored[names[1]], {
            **values, "directories": [group[0] for group in groups[:limit]], "runs_per_session": runs_per_session})
        columns = [column[0] for column in found.description]
        records = [dict(zip(columns, record)) for record in found]
    return sessions_page_of(groups, limit, records)  # no pending row: the same snapshot had none


def _run(connection: sqlite3.Connection, stored: tuple[str, dict[str, Any]], values: dict[str, Any]) -> sqlite3.Cursor:
    """A stored statement run with ``values`` (and its constants) for its ``?``, in order: the
    directories' list as one ``?`` each. KeyError for a value it names that is not given."""
    sql, parameters = stored
    given = {**parameters["constants"], **values}
    bound: list[Any] = []
    for name in parameters["names"]:
        if name == "directories":
            sql = sql.replace(DIRECTORIES, ", ".join("?" * len(given[name])))
            bound += given[name]
        else:
            bound.append(given[name])
    return connection.execute(sql, bound)
