"""The catalog in SQL, through SQLAlchemy Core: SQLite in the bundle root by default (SPEC §5.6).

Contract::

    catalog = SqlCatalog(catalog_url(root))     # sqlite:///<root>/.catalog.sqlite3, or $OTEL_SESSION_CATALOG
    catalog.upsert_opened([row]); catalog.upsert_sealed([row])
    page = catalog.page(RunQuery(limit=50))     # Page(rows, next_cursor, total)
    catalog.sessions_page(RunQuery(scope=Scope.LIVE))
    catalog.close()

PostgreSQL (``postgresql://…``, through psycopg 3; ``pip install otel-session[postgres]``) holds
one catalog for several collectors and viewers: each writes the rows of its own bundle root
(``origin``, see :func:`catalog_origin`) and lists everyone's. Its text keys compare bytewise
(``COLLATE "C"``, as SQLite does), so sorts and cursors agree on both engines.

SQLite is opened in WAL mode with a busy timeout, so a collector, a viewer and CLI commands share
one root at once; ``synchronous=NORMAL``: a crash may lose the last transactions, never corrupt
the file, and a pass brings back what was lost (the bundles are the truth). The schema has a
version (``catalog_meta``); a catalog of another version, or a file that is not a database, is
rebuilt empty (logged) and a pass fills it again: no migrations. Only the catalog's own tables are
ever dropped (a PostgreSQL database may hold others); a PostgreSQL database that has a ``runs``
table the catalog did not make is refused, never dropped. Every value reaches SQL as a
bound parameter. Any database error is raised as :class:`CatalogUnavailable`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, and_, case, delete, func, literal, or_, select, text, update
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, SQLAlchemyError

from otel_session.core.log import get_logger

from .columns import FIELDS, row_of_columns, sessions_page_of, stored_values
from .cursor import decode_cursor, row_cursor
from .engine import failure_reason, make_engine
from .model import TOTAL_CAP, CatalogUnavailable, Known, Order, Page, RunQuery, RunRow, SessionsPage, SortKey
from .queries import pending_paths, run_filters, sessions_groups, sessions_runs
from .schema import PENDING, SCHEMA_VERSION, compiled_statements, facets, meta_table, metadata, runs, runs_pending
from .settings import BUSY_TIMEOUT_S, no_room, schema_lock
from .shapes import groups_name, runs_name
from .statements import KeptStatements

__all__ = ["FLEET_COLUMNS", "SCHEMA_VERSION", "SqlCatalog"]

logger = get_logger(__name__)

_BATCH = 500
_SCHEMA_LOCK = 0x6F74656C  # PostgreSQL advisory lock held while the catalog's tables are made
_FACETS = ("agent", "service", "eval_id")


_SORT_COLUMNS = {key: runs.c[key.value] for key in SortKey if key.value in runs.c}
_SORT_COLUMNS[SortKey.FEEDBACK] = runs.c.feedback_mean


def _upsert_sql(replace: bool) -> str:
    """``INSERT … ON CONFLICT (origin, path) DO UPDATE/NOTHING``, its values ``?`` in column order:
    the same SQL in SQLite and PostgreSQL, made once and handed to the driver as it is
    (``SqlCatalog.write``: SQLAlchemy's processing of every row's parameters cost more than SQLite's
    write of them). A row read while its run recorded never replaces a sealed run's row: a pass that
    read the bundle just before the seal writes after the writer's hook wrote the sealed row."""
    conflict = ("DO UPDATE SET " + ", ".join(f"{name} = excluded.{name}" for name in FIELDS
                            if name not in ("origin", "path", "location"))  # a re-read bundle is still stored
                + " WHERE COALESCE(excluded.capture_status, '') <> 'recording'"
                " OR COALESCE(runs.capture_status, 'recording') = 'recording'"
                if replace else "DO NOTHING")
    return (f"INSERT INTO runs ({', '.join(FIELDS)}) VALUES ({', '.join('?' for _ in FIELDS)}) "
            f"ON CONFLICT (origin, path) {conflict}")


_ADD_RUN = _upsert_sql(replace=False)
_PUT_RUN = _upsert_sql(replace=True)
_ADD_FACET_SQL = "INSERT INTO facets (name, value) VALUES (?, ?) ON CONFLICT (name, value) DO NOTHING"
_COUNT_SESSION_SQL = (
    "INSERT INTO sessions (directory, scope, session_id, newest_created_at, run_count) "
    "SELECT directory, max(scope), max(session_id), max(created_at), count(*) FROM runs WHERE directory = ? "
    "GROUP BY directory ON CONFLICT (directory) DO UPDATE SET scope = excluded.scope, session_id = excluded.session_id, "
    "newest_created_at = excluded.newest_created_at, run_count = excluded.run_count")
_COUNT_SESSION = text(_COUNT_SESSION_SQL.replace("?", ":directory"))
_DROP_EMPTY_SESSION = text(
    "DELETE FROM sessions WHERE directory = :directory AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.directory = :directory)")


_FACET_POSITIONS = [(name, FIELDS.index(name)) for name in _FACETS]


class SqlCatalog:
    """:class:`~otel_session.catalog.model.Catalog` over one SQL database."""

    def __init__(self, url: str, origin: str = "") -> None:
        self.url = url
        self._known_facets: set[tuple[str, str]] = set()
        """Facet values this object wrote (or found written): not written again."""
        self.origin = origin
        """The rows this catalog writes, drops and compares with its bundles (``catalog_origin``);
        lists read every origin's."""
        self._lock = threading.Lock()
        self.rebuilt = False
        """The database was made new here (none yet, another schema version, or not a database)."""
        try:
            self._engine = self._open()
        except (SQLAlchemyError, OSError, ImportError) as exc:  # ImportError: the URL's database driver
            raise CatalogUnavailable(f"cannot open the catalog {self._shown()}: {failure_reason(exc)}") from None
        self._mark = "?" if self._engine.dialect.paramstyle == "qmark" else "%s"
        """The driver's positional parameter (``exec_driver_sql``): SQLite's ``?``, psycopg's ``%s``."""
        self._kept = self._kept_statements()

    def _kept_statements(self) -> KeptStatements | None:
        """An SQLite file's compiled list statements (``statements``: what ``direct`` reads), opened;
        None for any other database."""
        if not self.url.startswith("sqlite:///") or self.url in ("sqlite:///", "sqlite:///:memory:"):
            return None
        kept = KeptStatements(self._engine, self.url)
        kept.open()
        return kept

    def _shown(self) -> str:
        """The URL as logs and messages show it: a password never."""
        return self.shown_url.removeprefix("sqlite:///")

    @property
    def shown_url(self) -> str:
        try:
            return make_url(self.url).render_as_string(hide_password=True)
        except ArgumentError:
            return "(an invalid catalog URL)"

    @property
    def _is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    def _make_engine(self) -> Engine:
        engine = make_engine(self.url)
        if not self._is_sqlite:
            with engine.connect(), engine.connect():  # two warm connections kept: a keeper pass and a list at once
                pass
        return engine

    def _open(self) -> Engine:
        engine = self._make_engine()
        try:
            version = self._schema_version(engine)
        except DatabaseError as exc:
            if not _is_corrupt(exc):  # a directory it cannot open, a lock: not the file's fault
                raise
            engine.dispose()
            if not self._is_sqlite:
                raise
            logger.warning("the catalog %s cannot be read (%s): made new; the bundles fill it again",
                           self._shown(), failure_reason(exc))
            self._remove_sqlite_files()
            engine = self._make_engine()
            version = self._schema_version(engine)
        if version != SCHEMA_VERSION:
            with schema_lock(self.url):  # another opener (a hook's thread, a CLI) may be making it now
                if self._schema_version(engine) == SCHEMA_VERSION:
                    return engine
                return self._make_schema(engine, version)
        return engine

    def _make_schema(self, engine: Engine, version: str | None) -> Engine:
        if version != SCHEMA_VERSION:
            if version is not None:
                logger.warning("the catalog %s has schema %s, this version uses %s: made new; the bundles fill it again",
                               self._shown(), version, SCHEMA_VERSION)
            try:
                with engine.begin() as connection:
                    if not self._is_sqlite:  # one opener at a time makes the tables; the others find them made
                        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK})
                        if self._schema_version(connection) == SCHEMA_VERSION:
                            return engine
                        runs_pending.dialect_kwargs["postgresql_where"] = PENDING
                    metadata.drop_all(connection)
                    metadata.create_all(connection, tables=None if self._is_sqlite else [  # read by SQLite's direct lists only
                        table for table in metadata.sorted_tables if table is not compiled_statements])
                    connection.execute(meta_table.insert().values(key="schema", value=SCHEMA_VERSION))
            except SQLAlchemyError as exc:
                if "already exists" not in str(exc) or not self._made_by_another(engine):
                    raise
                return engine
            self.rebuilt = True
        return engine

    def _made_by_another(self, engine: Engine) -> bool:
        """Whether another opener made the tables while this one tried: its version row appears
        within the busy timeout (SQLite commits each CREATE TABLE by itself, the row after them)."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while self._schema_version(engine) != SCHEMA_VERSION:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _schema_version(self, bind: Engine | Connection) -> str | None:
        with bind.connect() if isinstance(bind, Engine) else nullcontext(bind) as connection:
            if not connection.dialect.has_table(connection, "catalog_meta"):
                if connection.dialect.has_table(connection, "runs"):
                    if not self._is_sqlite:  # a shared database's own table: never dropped
                        raise CatalogUnavailable(
                            f"the database {self._shown()} has a table 'runs' the catalog did not make: give the "
                            "catalog a database (or a schema: ?options=-csearch_path%3Dotel_session) of its own")
                    return "unknown"
                return None
            return connection.execute(select(meta_table.c.value).where(meta_table.c.key == "schema")).scalar()

    def no_room(self) -> str | None:
        """Why this catalog writes nothing now (an SQLite file on a nearly full disk), else None."""
        return no_room(self.url)

    def _check_room(self) -> None:
        problem = self.no_room()
        if problem is not None:
            raise CatalogUnavailable(problem)

    def make_new(self) -> None:
        """Forget the database (a malformed one ``reindex`` cannot clear) and make it new, empty."""
        self._engine.dispose()
        if self.url.startswith("sqlite:///"):
            self._remove_sqlite_files()
        else:
            with self._make_engine().begin() as connection:
                metadata.drop_all(connection)
        self._known_facets.clear()
        try:
            self._engine = self._open()
        except (SQLAlchemyError, OSError) as exc:
            raise CatalogUnavailable(f"cannot make the catalog {self._shown()} new: {failure_reason(exc)}") from None
        self._kept = self._kept_statements()

    def _remove_sqlite_files(self) -> None:
        database = self.url.removeprefix("sqlite:///")
        if self.url.startswith("sqlite:///") and database:
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.unlink(database + suffix)
                except FileNotFoundError:
                    pass

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        try:
            with self._engine.begin() as connection:
                yield connection
        except SQLAlchemyError as exc:
            raise CatalogUnavailable(f"the catalog {self._shown()} failed: {failure_reason(exc)}") from None

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        try:
            with self._engine.connect() as connection:
                yield connection
        except SQLAlchemyError as exc:
            raise CatalogUnavailable(f"the catalog {self._shown()} cannot be read: {failure_reason(exc)}") from None

    # -- writing -----------------------------------------------------------------------------

    def upsert_opened(self, rows: Iterable[RunRow]) -> None:
        self.write(opened=list(rows))

    def upsert_sealed(self, rows: Iterable[RunRow]) -> None:
        self.write(sealed=list(rows))

    def write(self, *, opened: list[RunRow] = (), sealed: list[RunRow] = (),  # type: ignore[assignment]
              recount_sealed: bool = True) -> None:
        """Both kinds of upsert in one transaction (the writer hook's one per writer pass).
        ``recount_sealed=False``: the sealed rows' runs were added as opened rows before (the
        hook's own), so their sessions' counts and newest runs stand."""
        if not opened and not sealed:
            return
        self._check_room()
        mark = self._mark
        with self._transaction() as connection:
            for rows, statement in ((opened, _ADD_RUN), (sealed, _PUT_RUN)):
                for start in range(0, len(rows), _BATCH):
                    batch = [stored_values(row, self.origin) for row in rows[start : start + _BATCH]]
                    connection.exec_driver_sql(statement.replace("?", mark), batch)
                    facet_values = sorted({(name, values[position]) for values in batch  # one lock order
                                           for name, position in _FACET_POSITIONS
                                           if isinstance(values[position], str)} - self._known_facets)
                    if facet_values:
                        connection.exec_driver_sql(_ADD_FACET_SQL.replace("?", mark), facet_values)
                        self._known_facets |= set(facet_values)
            directories = {row.directory for row in opened} | ({row.directory for row in sealed} if recount_sealed else set())
            if directories:
                connection.exec_driver_sql(_COUNT_SESSION_SQL.replace("?", mark),
                                           [(directory,) for directory in sorted(directories)])

    def remove(self, paths: Iterable[str]) -> int:
        paths = sorted(set(paths))
        if not paths:
            return 0
        removed = 0
        with self._transaction() as connection:
            directories = set()
            for chunk in _chunks(paths, _BATCH):
                directories.update(connection.execute(
                    select(runs.c.directory).where(self._own, runs.c.path.in_(chunk)).distinct()).scalars())
                removed += connection.execute(delete(runs).where(self._own, runs.c.path.in_(chunk))).rowcount or 0
            if directories:
                parameters = [{"directory": directory} for directory in sorted(directories)]
                connection.execute(_COUNT_SESSION, parameters)
                connection.execute(_DROP_EMPTY_SESSION, parameters)
            connection.execute(delete(facets))
            self._known_facets.clear()
            for name in _FACETS:
                connection.execute(facets.insert().from_select(
                    ["name", "value"], select(literal(name), runs.c[name]).where(runs.c[name].is_not(None)).distinct()))
        return removed

    def remove_missing(self, present: Iterable[str]) -> int:
        present = set(present)
        return self.remove(path for path, row in self.known().items() if path not in present and row.location is None)

    def set_location(self, path: str, location: str) -> bool:
        with self._transaction() as connection:
            return bool(connection.execute(update(runs).where(self._own, runs.c.path == path).values(location=location)).rowcount)

    def set_feedback(self, path: str, count: int, mean: float | None) -> None:
        with self._transaction() as connection:
            connection.execute(update(runs).where(self._own, runs.c.path == path).values(feedback_count=count, feedback_mean=mean))

    def clear(self) -> None:
        """Forget this origin's rows but those of runs stored away (no local bundle makes them again)."""
        self.remove(path for path, row in self.known().items() if row.location is None)
        self._known_facets.clear()

    @property
    def _own(self) -> Any:
        return runs.c.origin == self.origin

    def rebuild(self, root: Path) -> int:
        from .sync import reindex  # sync builds rows from bundles and writes them through this class

        return reindex(self, root).runs

    def close(self) -> None:
        self._engine.dispose()

    # -- reading -----------------------------------------------------------------------------

    def known(self) -> dict[str, Known]:
        with self._reading() as connection:
            return {path: Known(stamp, capture, location) for path, stamp, capture, location in connection.execute(
                select(runs.c.path, runs.c.stamp, runs.c.capture_status, runs.c.location).where(self._own))}

    def rows(self, paths: list[str]) -> dict[str, RunRow]:
        found: dict[str, RunRow] = {}
        with self._reading() as connection:
            for chunk in _chunks(paths, _BATCH):
                for mapping in connection.execute(select(runs).where(self._own, runs.c.path.in_(chunk))).mappings():
                    found[mapping["path"]] = row_of_columns(mapping)
        return found

    def stored_paths(self, session_id: str) -> list[str]:
        """The paths of a session's runs kept in a bundle store (rows with a location, every origin's)."""
        with self._reading() as connection:
            return list(connection.execute(select(runs.c.path).where(
                runs.c.session_id == session_id, runs.c.location.is_not(None)).order_by(runs.c.path)).scalars())

    def stored_locations(self, *, exclude_origin: str | None = None) -> set[str]:
        """Where the runs kept in a bundle store are (rows with a location), but ``exclude_origin``'s."""
        statement = select(runs.c.location).where(runs.c.location.is_not(None))
        if exclude_origin is not None:
            statement = statement.where(runs.c.origin != exclude_origin)
        with self._reading() as connection:
            return set(connection.execute(statement).scalars())

    def pending(self, limit: int) -> list[str]:
        """Paths of this origin's rows whose figures are pending (at most ``limit``): another
        origin's bundles are not here to count (their own readers count them)."""
        with self._reading() as connection:
            return list(connection.execute(pending_paths(self.origin, limit)).scalars())

    def facets(self) -> dict[str, list[str]]:
        with self._reading() as connection:
            found: dict[str, list[str]] = {name: [] for name in _FACETS}
            for name, value in connection.execute(select(facets.c.name, facets.c.value).order_by(facets.c.name, facets.c.value)):
                found[name].append(value)
            return found

    def count(self) -> int:
        with self._reading() as connection:
            return connection.execute(select(func.count()).select_from(runs)).scalar_one()

    def page(self, query: RunQuery) -> Page:
        column = _SORT_COLUMNS[query.sort]
        descending = query.order is Order.DESC
        conditions = run_filters(query)
        statement = select(runs).where(*conditions)
        keys = _sort_keys(query.sort, column)
        if query.cursor is not None:
            statement = statement.where(_after(keys, decode_cursor(query.cursor, query.sort, query.order), descending))
        statement = statement.order_by(*(key.desc() if descending and ordered else key.asc()
                                         for key, ordered in keys)).limit(query.limit + 1)
        if query.cursor is None and query.offset:
            statement = statement.offset(query.offset)
        with self._reading() as connection:
            found = [row_of_columns(mapping) for mapping in connection.execute(statement).mappings()]
            total = connection.execute(_capped_count(conditions)).scalar_one() if query.with_total else None
        page = found[: query.limit]
        next_cursor = row_cursor(query.sort, query.order, page[-1]) if len(found) > query.limit else None
        return Page(page, next_cursor, None if total is None else min(total, TOTAL_CAP), total is None or total <= TOTAL_CAP)

    def fleet(self, query: RunQuery, *, limit: int) -> tuple[list[dict[str, Any]], bool]:
        """``FLEET_COLUMNS`` of the runs ``query`` filters, oldest first, at most ``limit`` of them
        (the newest kept), and whether some were left out."""
        statement = (select(*(runs.c[name] for name in FLEET_COLUMNS)).where(*run_filters(query))
                     .order_by(runs.c.created_at.desc()).limit(limit + 1))
        with self._reading() as connection:
            found = [dict(mapping) for mapping in connection.execute(statement).mappings()]
        for entry in found:
            entry["usage_by_model"] = orjson.loads(entry["usage_by_model"] or "[]")
        return found[:limit][::-1], len(found) > limit

    def sessions_page(self, query: RunQuery, *, runs_per_session: int = 20) -> SessionsPage:
        groups_statement = sessions_groups(query)
        with self._reading() as connection:
            groups = connection.execute(groups_statement).all()
            directories = [directory for directory, *_ in groups[: query.limit]]
            runs_statement = sessions_runs(query, directories, runs_per_session)
            records = connection.execute(runs_statement).mappings().all() if directories else []
        if self._kept is not None:  # a shape asked for the first time: the next fresh process reads it directly
            self._kept.keep({groups_name(query): groups_statement, runs_name(query): runs_statement})
        return sessions_page_of(groups, query.limit, records)


def _capped_count(conditions: list[Any]) -> Any:
    """``SELECT count(*) FROM (SELECT 1 FROM runs WHERE … LIMIT cap + 1)``: the rows selected, up to
    one more than ``TOTAL_CAP`` (which says "more than the cap")."""
    return select(func.count()).select_from(select(literal(1)).select_from(runs).where(*conditions)
                                            .limit(TOTAL_CAP + 1).subquery())


def _sort_keys(sort: SortKey, column: Any) -> list[tuple[Any, bool]]:
    """The ORDER BY terms, each with whether it follows the requested order: runs without a
    value last (in either order), then the value, then ``created_at``, ``path`` and ``origin`` as ties."""
    ties = [(runs.c.created_at, True), (runs.c.path, True), (runs.c.origin, True)]
    if sort is SortKey.CREATED_AT:
        return ties
    return [(case((column.is_(None), 1), else_=0), False), (column, True), *ties]


def _after(keys: list[tuple[Any, bool]], position: tuple[Any, str, str, str], descending: bool) -> Any:
    """Rows strictly after ``position`` in the order of ``keys`` (lexicographic, keyset)."""
    value, created_at, path, origin = position
    ties = [(runs.c.created_at, created_at, True), (runs.c.path, path, True), (runs.c.origin, origin, True)]
    if len(keys) == len(ties):
        terms = ties
    elif value is None:  # among the rows without a value: only the ties decide
        terms = [(keys[0][0], 1, False), *ties]
    else:
        terms = [(keys[0][0], 0, False), (keys[1][0], value, True), *ties]
    alternatives = []
    for index, (expression, bound, ordered) in enumerate(terms):
        beyond = expression < bound if descending and ordered else expression > bound
        alternatives.append(and_(*(earlier == earlier_bound for earlier, earlier_bound, _ in terms[:index]), beyond))
    return or_(*alternatives)


FLEET_COLUMNS = ("created_at", "session_id", "repeated_asks", "guards_blocked", "tool_errors", "integrity",
                 "turn_p50_ms", "turn_p95_ms", "usage_by_model", "scores")
"""What the dashboard reads of each run (``SqlCatalog.fleet``)."""


def _is_corrupt(exc: DatabaseError) -> bool:
    """The file is not a database, or a damaged one (never: it cannot be opened, or is locked)."""
    text = str(getattr(exc, "orig", exc)).lower()
    return any(sign in text for sign in ("not a database", "malformed", "corrupt"))


def _chunks(values: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
