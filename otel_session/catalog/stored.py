"""The catalog rebuilt from a bundle store's objects: ``otel-session reindex --store``.

Contract::

    catalog = SqlCatalog(catalog_url(root), store_origin(store))   # the store's own rows
    result = reindex_store(catalog, store, progress=None)          # Reindexed(runs, seconds)

Every run the store holds (``store.list_runs``: the bucket listed under its prefix) gets a row
counted from its bundle (fetched and checked through the store interface into a scratch directory,
read like a local one by ``rows.sealed_row``, removed after), with its ``location``. The rows are
the store's: their origin is the store's URL, so a rebuild replaces them and drops those whose
objects are gone, and touches no other origin's rows. A run a collector already recorded as stored
(a row of its origin with that location) is left to that row: the list shows each run once.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from otel_session.bundle.store import BundleStore

from .model import RunRow
from .rows import sealed_row
from .sync import Reindexed

if TYPE_CHECKING:
    from .sql import SqlCatalog

__all__ = ["reindex_store", "store_origin"]

_BATCH = 200


def store_origin(store: BundleStore) -> str:
    """The origin of the rows rebuilt from ``store``: its URL."""
    return str(getattr(store, "url", "store"))


def reindex_store(catalog: SqlCatalog, store: BundleStore, *, progress: Callable[[int], None] | None = None,
                  relatives: list[str] | None = None) -> Reindexed:
    """Rebuild the catalog's rows of ``store`` (``relatives``: the runs it holds, when already listed)."""
    from otel_session.bundle.fetched import read_stored  # the redactor's imports: not every list's

    started = time.perf_counter()
    taken = catalog.stored_locations(exclude_origin=catalog.origin)
    listed = list(store.list_runs()) if relatives is None else relatives
    wanted = [relative for relative in listed if store.location(relative) not in taken]
    own = set(catalog.known())
    if progress is not None and len(listed) > len(wanted):
        progress(len(listed) - len(wanted))
    rows: list[RunRow] = []
    for relative, row in read_stored(store, wanted, sealed_row):
        rows.append(dataclasses.replace(row, location=store.location(relative)))
        if len(rows) == _BATCH:
            _write(catalog, rows, progress)
    _write(catalog, rows, progress)
    catalog.remove(own - set(wanted))
    return Reindexed(len(wanted), time.perf_counter() - started)


def _write(catalog: SqlCatalog, rows: list[RunRow], progress: Callable[[int], None] | None) -> None:
    catalog.upsert_sealed(rows)
    if progress is not None:
        progress(len(rows))
    rows.clear()
