"""The collector's bundle store: each run uploaded as it seals, its location kept in the catalog.

Contract::

    uploader = store_uploader(root, options)   # None without --store; BadStoreUrl (a ValueError) for a bad one
    BundleWriter(root, hooks=chain_hooks(writer_hooks(root), uploader))   # the catalog's row first
    uploader.start() ... writer.shutdown()      # the writer closes its hooks: uploads stop, the rest waits on disk
    close_locations(uploader)                   # the catalog connection the locations were written through
    admit = backlog_guard(uploader, options)    # BundleSink(admit_run=admit): raises Overloaded past the bound

The location is written before the local copy may go (``bundle.upload``'s order); a run whose row
the catalog lacks (sealed before a crash) gets its row from the bundle first. A catalog that
cannot be written is logged: the run is stored all the same, and its row lacks the location.

While the store is down, sealed runs wait on the local disk; past ``max_unstored_bytes`` of them a
new run is refused retryably (``RetryReason.STORE_BACKLOG``: 503 / UNAVAILABLE), so the disk the
live journals need is not filled by the backlog, and nothing is lost: the exporters hold and
retry, the open runs go on, and new runs are taken again once uploads catch up.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from otel_session.bundle.store import Stored, open_store
from otel_session.bundle.upload import Uploader
from otel_session.catalog import CatalogError, SqlCatalog, catalog_disabled, open_catalog
from otel_session.catalog.rows import row_of
from otel_session.collector.counters import Overloaded, RetryReason
from otel_session.collector.options import CollectorOptions
from otel_session.core.log import get_logger

__all__ = ["backlog_guard", "close_locations", "store_uploader"]

logger = get_logger(__name__)


class _Locations:
    """``on_stored``: the run's catalog row gets the stored location."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.catalog: SqlCatalog | None = None

    def __call__(self, relative: str, stored: Stored) -> None:
        if catalog_disabled():
            return
        try:
            if self.catalog is None:
                self.catalog = open_catalog(self.root)
            if self.catalog is None:
                return
            if not self.catalog.set_location(relative, stored.location):  # no row: sealed before a crash
                self.catalog.upsert_sealed([row_of(self.root, self.root / relative)])
                self.catalog.set_location(relative, stored.location)
        except CatalogError as exc:
            logger.warning("store: %s stored at %s, but the catalog did not take its location: %s",
                           relative, stored.location, exc)

    def close(self) -> None:
        if self.catalog is not None:
            self.catalog.close()
            self.catalog = None


def store_uploader(root: Path, options: CollectorOptions, *,
                   may_store: Callable[[str], bool] | None = None) -> Uploader | None:
    """The uploader of ``--store`` (None without one); ``may_store``: see ``Uploader``."""
    store = open_store(options.store)
    if store is None:
        return None
    return Uploader(store, root, keep_local=options.keep_local, on_stored=_Locations(root), may_store=may_store)


def close_locations(uploader: Uploader | None) -> None:
    if uploader is not None and isinstance(uploader.on_stored, _Locations):
        uploader.on_stored.close()


def backlog_guard(uploader: Uploader | None, options: CollectorOptions) -> Callable[[], None] | None:
    """What the sink asks before it opens a new run: ``Overloaded`` while the sealed runs waiting for
    the store hold more than ``max_unstored_bytes`` of the local disk; None without a store."""
    if uploader is None:
        return None
    bound = options.max_unstored_bytes

    def admit() -> None:
        waiting = uploader.waiting_bytes
        if waiting > bound:
            raise Overloaded(f"{waiting} bytes of sealed runs wait for the bundle store (the bound is {bound}); "
                             "new runs are taken again once they are uploaded; retry later", RetryReason.STORE_BACKLOG)

    return admit
