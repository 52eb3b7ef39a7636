"""The run catalog: one row per run, derived from the bundles, that every list reads (SPEC §5.6).

Contract (``model.Catalog``; SQL through SQLAlchemy Core in ``sql``)::

    catalog = open_catalog(root)                  # SqlCatalog at catalog_url(root), or None when off
    catalog.upsert_opened(rows); catalog.upsert_sealed(rows); catalog.remove_missing(paths)
    page = catalog.page(RunQuery(...))            # Page(rows, next_cursor, total): keyset-paged
    groups = catalog.sessions_page(RunQuery(scope=Scope.LIVE))   # SessionsPage(sessions, next_cursor)
    catalog.rebuild(root)                         # forget every row, index every bundle again
    hook = writer_hooks(root)                     # BundleWriter(root, hooks=hook): rows as runs open and seal
    keeper = CatalogKeeper(catalog, root).start() # catch up with bundles it lacks, drop deleted ones
    catalog = scan_catalog(root)                  # without a catalog: the same answers, from a scan
    page = direct.direct_sessions_page(root, query)   # a warm SQLite catalog's page without SQLAlchemy, or None
    rows, cut = catalog.fleet(RunQuery(since=...), limit=N)   # what the dashboard aggregates

Stage: between ``bundle`` (it reads bundles, the writer calls its hook) and ``replay``. The row's
figures are counted from the journal records (``rows``), not from ``replay``'s facts.
Settings: ``$OTEL_SESSION_CATALOG`` (a SQLAlchemy URL, ``postgresql://…`` included; ``off`` for
none), default ``sqlite:///<root>/.catalog.sqlite3``; ``$OTEL_SESSION_ORIGIN`` (whose rows a shared
catalog writes; default ``<host>:<root>``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from otel_session.core.lazy import lazy_exports

from .cursor import row_cursor, session_cursor
from .model import (
    TOTAL_CAP, BadQuery, Catalog, CatalogError, CatalogUnavailable, Known, Order, Page, Problem, RunQuery, RunRow, Scope,
    SessionGroup, SessionsPage, SortKey, StatusFilter, time_prefix,
)
from .settings import CATALOG_FILE, ENV_CATALOG, ENV_ORIGIN, SCHEMA_VERSION, catalog_disabled, catalog_origin, catalog_url

if TYPE_CHECKING:
    from .hook import CatalogHook, writer_hooks
    from .sql import SqlCatalog
    from .sync import CatalogKeeper, CaughtUp, Reindexed, catch_up, reindex

_HOMES = {
    "SqlCatalog": f"{__name__}.sql",
    **dict.fromkeys(("CatalogHook", "writer_hooks"), f"{__name__}.hook"),
    **dict.fromkeys(("CatalogKeeper", "CaughtUp", "Reindexed", "catch_up", "reindex"), f"{__name__}.sync"),
}
"""Imported when first asked for: the SQL library (``sql``), the bundle reader (``hook``, ``sync``).
An app that records does not pay for SQLAlchemy at start, and a list read from the catalog's
stored statements (``direct``) pays for neither."""

__all__ = [
    "CATALOG_FILE", "TOTAL_CAP", "ENV_CATALOG", "ENV_ORIGIN", "SCHEMA_VERSION", "BadQuery", "Catalog", "CatalogError", "CatalogHook",
    "CatalogKeeper", "CatalogUnavailable", "CaughtUp", "Known", "Order", "Page", "Problem", "Reindexed", "RunQuery", "RunRow",
    "Scope", "SessionGroup", "SessionsPage", "SortKey", "SqlCatalog", "StatusFilter", "catalog_disabled", "catalog_origin", "catalog_url",
    "catch_up", "open_catalog", "reindex", "row_cursor", "scan_catalog", "session_cursor", "time_prefix", "writer_hooks",
]


def open_catalog(root: str | os.PathLike[str], url: str | None = None, *, origin: str | None = None) -> Any:
    """The catalog of ``root`` (``url``, else ``$OTEL_SESSION_CATALOG``, else SQLite in the root), or
    None when turned off; writing ``origin``'s rows (default :func:`catalog_origin`). Raises
    :class:`CatalogUnavailable` when it cannot be opened."""
    if catalog_disabled(url):
        return None
    from .sql import SqlCatalog

    return SqlCatalog(catalog_url(root, url), catalog_origin(root, url) if origin is None else origin)


def scan_catalog(root: str | os.PathLike[str]) -> Any:
    """A catalog in memory, filled by reading every bundle under ``root``: what lists answer from
    when the root's catalog is off or unusable (the same queries, at the cost of a full scan)."""
    from .sql import SqlCatalog
    from .sync import reindex

    catalog = SqlCatalog("sqlite://")
    reindex(catalog, Path(root))
    return catalog


__getattr__, __dir__ = lazy_exports(globals(), _HOMES)
