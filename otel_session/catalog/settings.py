"""Where the catalog is: its URL from the environment (no SQL library imported here).

Contract::

    url = catalog_url(root, explicit=None)   # explicit, else $OTEL_SESSION_CATALOG, else sqlite:///<root>/.catalog.sqlite3
    origin = catalog_origin(root, url)       # whose rows a process writes in a shared catalog ($OTEL_SESSION_ORIGIN)
    catalog_disabled(explicit=None)          # --catalog off / $OTEL_SESSION_CATALOG=off: no catalog
    no_room(url)                             # why an SQLite catalog must write nothing now (a nearly full disk), or None
    SCHEMA_VERSION, BUSY_TIMEOUT_S           # the tables' version (``schema``), an SQLite connection's wait for a lock
    RETRY_S                                  # the backoff (first, cap) of a catalog that could not be opened or written
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "BUSY_TIMEOUT_S", "CATALOG_FILE", "DISK_RESERVE_BYTES", "RETRY_S", "SCHEMA_VERSION", "ENV_CATALOG", "ENV_ORIGIN", "catalog_disabled", "catalog_origin",
    "catalog_url", "no_room", "schema_lock",
]

ENV_CATALOG = "OTEL_SESSION_CATALOG"
ENV_ORIGIN = "OTEL_SESSION_ORIGIN"
CATALOG_FILE = ".catalog.sqlite3"
SCHEMA_VERSION = "4"
"""The version of the tables ``schema`` makes: a catalog of another version is made new (no migrations)."""
BUSY_TIMEOUT_S = 30.0
"""How long an SQLite connection waits for another one's lock (its busy timeout, the switch to WAL)."""
RETRY_S = (1.0, 30.0)
"""A catalog that could not be opened or written (a server down, a nearly full disk) is tried again
after the first of these seconds, then twice as long each time, up to the second (the writer's
hook, the keeper's passes)."""


def catalog_url(root: str | os.PathLike[str], explicit: str | None = None) -> str:
    """The catalog's URL: ``explicit``, else ``$OTEL_SESSION_CATALOG``, else SQLite in the root.
    PostgreSQL URLs (``postgres://``, ``postgresql://``, ``postgresql+psycopg://``) name psycopg 3."""
    url = explicit or os.environ.get(ENV_CATALOG) or _default_url(root)
    scheme, separator, rest = url.partition("://")
    if separator and scheme in ("postgres", "postgresql"):
        return f"postgresql+psycopg://{rest}"
    return url


def _default_url(root: str | os.PathLike[str]) -> str:
    return f"sqlite:///{Path(root).resolve() / CATALOG_FILE}"


def catalog_origin(root: str | os.PathLike[str], url: str | None = None) -> str:
    """Whose rows a catalog writes: ``$OTEL_SESSION_ORIGIN``; else ``""`` for the default SQLite
    file inside the root (the catalog travels with its root); else ``<host>:<root>``, so collectors
    and viewers on several hosts or roots share one catalog without taking each other's rows."""
    explicit = os.environ.get(ENV_ORIGIN, "").strip()
    if explicit:
        return explicit
    if catalog_url(root, url) == _default_url(root):
        return ""
    return f"{socket.gethostname()}:{Path(root).resolve()}"


def catalog_disabled(explicit: str | None = None) -> bool:
    """``--catalog off`` or ``$OTEL_SESSION_CATALOG=off``: no catalog (lists scan the bundles)."""
    return (explicit or os.environ.get(ENV_CATALOG, "")).strip().lower() in ("off", "none")


DISK_RESERVE_BYTES = 64 * 1024 * 1024
"""An SQLite catalog writes nothing while its file system has less free: the bundles need the
space first (a catalog's write-ahead log grows by pages per transaction), and a pass adds the rows
it lacks once there is room again."""


def no_room(url: str) -> str | None:
    """Why an SQLite catalog at ``url`` must write nothing now (its file system is nearly full), else None."""
    database = url.removeprefix("sqlite:///")
    if not url.startswith("sqlite:///") or not database or database == ":memory:":
        return None
    try:
        stat = os.statvfs(os.path.dirname(database) or ".")
    except OSError:
        return None
    if stat.f_bavail * stat.f_frsize < DISK_RESERVE_BYTES:
        return f"the disk holding the catalog {database} has less than {DISK_RESERVE_BYTES >> 20} MiB free: the bundles have it first"
    return None


@contextmanager
def schema_lock(url: str) -> Iterator[None]:
    """One opener at a time makes a new SQLite catalog's tables (an ``flock`` beside its file;
    SQLite commits each ``CREATE TABLE`` by itself). PostgreSQL takes an advisory lock instead."""
    database = url.removeprefix("sqlite:///")
    if not url.startswith("sqlite:///") or not database or database == ":memory:":
        yield
        return
    fd = os.open(f"{database}.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
