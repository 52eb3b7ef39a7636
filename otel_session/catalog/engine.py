"""The SQLAlchemy engine of a catalog database, the one way every catalog table is reached.

Contract::

    engine = make_engine(url)                         # SQLite: WAL, a busy timeout; PostgreSQL: pre-ping
    engine = make_engine(url, connect_timeout_s=5)    # a PostgreSQL connection attempt bounded
    failure_reason(exc)                               # one line naming what failed, without the SQL

Openers of one new SQLite file at once (a collector's writer hook and its keeper, a viewer, the
CLI) each switch it to WAL when they connect; SQLite asks for that switch's write lock without its
busy handler, so all but one of them got "database is locked" at once, whatever the busy timeout.
The switch is tried again, with a backoff, for up to ``BUSY_TIMEOUT_S``.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool

from .settings import BUSY_TIMEOUT_S

__all__ = ["BUSY_TIMEOUT_S", "failure_reason", "make_engine"]

_WAL_RETRY_S = (0.001, 0.1)
"""The first wait before the switch to WAL is tried again, and the cap of its doubling."""
_pause = time.sleep


def make_engine(url: str, *, connect_timeout_s: float | None = None) -> Engine:
    """The engine for ``url``: SQLite with WAL and a busy timeout (one connection for an in-memory
    database), any other engine with pre-ping and, given ``connect_timeout_s``, a bounded connect."""
    if url.startswith("sqlite"):
        in_memory = url in ("sqlite://", "sqlite:///:memory:")  # one connection, or one database a thread
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False},
                               **({"poolclass": StaticPool} if in_memory else {}))
        event.listen(engine, "connect", _on_sqlite_connect)
        return engine
    connect_args = {"connect_timeout": connect_timeout_s} if connect_timeout_s is not None else {}
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args)


def failure_reason(exc: BaseException) -> str:
    """One line naming what failed, without the SQL statement."""
    original = getattr(exc, "orig", None)
    return str(original or exc).splitlines()[0] if str(original or exc) else type(exc).__name__


def _on_sqlite_connect(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        _use_wal(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA journal_size_limit = 4194304")  # the log is cut back to 4 MiB after a checkpoint
    finally:
        cursor.close()


def _use_wal(cursor: sqlite3.Cursor) -> None:
    """Switch the database to WAL (nothing to do, and no write lock asked, when it is already).
    On a new file SQLite reads it, then asks for the write lock without calling the busy handler:
    another opener that holds it makes this one fail at once. Tried again until ``BUSY_TIMEOUT_S``."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = _WAL_RETRY_S[0]
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() + delay > deadline:
                raise
        _pause(delay)
        delay = min(delay * 2, _WAL_RETRY_S[1])


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY (another connection holds the lock), by its code where Python tells it (3.11+)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF == sqlite3.SQLITE_BUSY if code is not None else str(exc) == "database is locked"
