"""The SQLite text of a sessions list's statements, compiled by SQLAlchemy and kept in the catalog.

Contract::

    kept = KeptStatements(engine)       # an SQLite file catalog's; loads the names its version holds
    kept.open()                         # the table made when missing; the default lists' statements stored
    kept.keep({name: statement})        # statements of a shape this catalog had not stored (a filtered list)

What ``queries`` builds for a query of each shape (``shapes``) is compiled for SQLite and stored in
``compiled_statements`` with the version of the code that made it (``shapes.statements_version``),
the names of its ``?`` parameters in order (positional: SQLite looks each named one up among the
others, which made a list of 33,000 directories 4 s) and the constants it binds; ``direct`` runs it with the standard
library in a fresh ``otel-session sessions``, which then imports no SQLAlchemy. Stored as a catalog is
opened: the default lists (the live sessions; every session); and on first use, any other shape a
list asks for. Nothing here is ever needed for an answer: a statement that cannot be compiled or
stored (a read-only file, a full disk, another writer's lock held for more than ``_WAIT_MS``: a
list never waits on one for this) is logged and not tried again by this process, and a list
without it is answered by SQLAlchemy (whose own opening of the catalog stores it again).
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import delete, select
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from otel_session.core.log import get_logger

from .model import RunQuery, Scope
from .queries import pending_paths, sessions_groups, sessions_runs
from .schema import compiled_statements
from .settings import BUSY_TIMEOUT_S, no_room
from .shapes import BOUND, DIRECTORIES, PENDING_NAME, groups_name, runs_name, statements_version

__all__ = ["KeptStatements", "compile_statement"]

logger = get_logger(__name__)

_DIALECT = sqlite.dialect(paramstyle="qmark")
_EXPANDED = "__[POSTCOMPILE_directories]"
"""How SQLAlchemy leaves the list of directories in a compiled text (expanded as it runs)."""
_WAIT_MS = 100
"""How long storing waits for another writer's lock (the catalog's own busy timeout is 30 s)."""
_DEFAULT_QUERIES = (RunQuery(scope=Scope.LIVE), RunQuery())
"""The lists stored as a catalog opens: ``sessions`` (and the viewer's sessions page) and ``sessions --evals``."""


def compile_statement(statement: Any) -> tuple[str, dict[str, Any]] | None:
    """``(SQLite text, parameters)`` of ``statement``: ``{"names": [...], "constants": {...}}``, the
    name of each ``?`` in order (those of ``shapes.BOUND`` given by the reader, the others constants
    of its shape, with their values); None when it cannot be stored (a list of values other than
    the directories, a constant that is not a plain value)."""
    compiled = statement.compile(dialect=_DIALECT)
    text = compiled.string.replace(_EXPANDED, DIRECTORIES)
    constants = {name: value for name, value in compiled.params.items() if name not in BOUND}
    if "__[POSTCOMPILE_" in text or not all(isinstance(value, (str, int, float)) for value in constants.values()):
        return None
    return text, {"names": list(compiled.positiontup or ()), "constants": constants}


class KeptStatements:
    """The compiled statements of one SQLite catalog file, for this code's version."""

    def __init__(self, engine: Engine, url: str) -> None:
        self._engine = engine
        self._url = url
        self.version = statements_version()
        self.names: set[str] = set()
        """The names stored for this version (read at open), and those ``keep`` tried since."""

    def open(self) -> None:
        """Read which statements this version has stored, making the table when missing (a catalog
        made before it); store the default lists' when missing."""
        if self.version is None:
            return
        try:
            with self._engine.begin() as connection:
                compiled_statements.create(connection, checkfirst=True)
                self.names = set(connection.execute(select(compiled_statements.c.name).where(
                    compiled_statements.c.version == self.version)).scalars())
        except SQLAlchemyError as exc:
            logger.debug("catalog: its compiled statements cannot be read: %s", exc)
            return
        wanted = {PENDING_NAME: pending_paths("", 1)}
        for query in _DEFAULT_QUERIES:
            wanted[groups_name(query)] = sessions_groups(query)
            wanted[runs_name(query)] = sessions_runs(query, [], 1)
        self.keep(wanted, others_out=True)

    def keep(self, statements: dict[str | None, Any], *, others_out: bool = False) -> None:
        """Store those of ``statements`` not stored or tried yet (``others_out``: and drop other versions')."""
        missing = {name: statement for name, statement in statements.items() if name is not None and name not in self.names}
        if not missing or self.version is None or no_room(self._url):
            return
        rows = []
        for name, statement in missing.items():
            found = compile_statement(statement)
            if found is not None:
                rows.append({"name": name, "version": self.version, "sql": found[0],
                             "parameters": orjson.dumps(found[1]).decode()})
        self.names |= set(missing)
        try:
            with self._engine.begin() as connection:
                connection.exec_driver_sql(f"PRAGMA busy_timeout = {_WAIT_MS}")
                try:
                    if others_out:
                        connection.execute(delete(compiled_statements).where(compiled_statements.c.version != self.version))
                    for row in rows:
                        connection.execute(sqlite.insert(compiled_statements).values(row).on_conflict_do_update(
                            index_elements=["name", "version"], set_={"sql": row["sql"], "parameters": row["parameters"]}))
                finally:
                    connection.exec_driver_sql(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        except SQLAlchemyError as exc:
            logger.debug("catalog: compiled statements not stored: %s", exc)
