"""The SQLAlchemy engine of a catalog database, the one way every catalog table is reached.

Contract::

    engine = make_engine(url)                         # SQLite: WAL, a busy timeout; PostgreSQL: pre-ping
    engine = make_engine(url, connect_timeout_s=5)    # a PostgreSQL connection attempt bounded
    failure_reason(exc)                               # one line naming what failed, without the SQL
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool

__all__ = ["BUSY_TIMEOUT_S", "failure_reason", "make_engine"]

BUSY_TIMEOUT_S = 30.0


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
    cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA journal_size_limit = 4194304")  # the log is cut back to 4 MiB after a checkpoint
    cursor.close()
