"""The bundle writer's catalog hook: rows written on the writer thread, as runs open and seal.

Contract::

    hook = CatalogHook(root)                    # opens the catalog on first use (catalog_url(root))
    writer = BundleWriter(root, hooks=hook)     # the writer calls runs_passed after each pass
    hook.runs_passed(opened=[(path, manifest)], sealed=[path])   # never raises
    hook.close()

Runs opened since the last pass get a row from their ``run.json`` (no bundle read); runs sealed
in the pass get their full row (``rows.sealed_row``: the just-written journal, from the page cache,
only the records a row counts parsed).
Both go in one transaction. A catalog that cannot be opened or written is logged (once a minute
at most) and skipped: recording never depends on it, and a later pass of a keeper, or
``otel-session reindex``, brings the rows back. ``OTEL_SESSION_CATALOG=off`` turns it off.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from otel_session.core.log import get_logger

from .model import CatalogError
from .rows import opened_row, sealed_row
from .sql import SqlCatalog, catalog_origin, catalog_url

__all__ = ["CatalogHook", "catalog_disabled", "writer_hooks"]

logger = get_logger(__name__)

_WARN_EVERY_S = 60.0


def catalog_disabled(explicit: str | None = None) -> bool:
    """``--catalog off`` or ``$OTEL_SESSION_CATALOG=off``: no catalog (lists scan the bundles)."""
    from .sql import ENV_CATALOG

    return (explicit or os.environ.get(ENV_CATALOG, "")).strip().lower() in ("off", "none")


class CatalogHook:
    """Writes catalog rows for one bundle writer (``bundle.write.RunHooks``)."""

    def __init__(self, root: str | os.PathLike[str], url: str | None = None) -> None:
        self.root = Path(root)
        """As the writer names it: its run paths start with it."""
        self.url = catalog_url(self.root, url)
        self.origin = catalog_origin(self.root, url)
        self._catalog: SqlCatalog | None = None
        self._lock = threading.Lock()
        self._warned_at = float("-inf")

    def runs_passed(self, opened: Sequence[tuple[str, dict[str, Any]]], sealed: Sequence[str]) -> None:
        if not opened and not sealed:
            return
        try:
            with self._lock:
                catalog = self._catalog or self._open()
                sealed_set = set(sealed)
                opened_rows = [opened_row(self.root, Path(path), manifest) for path, manifest in opened
                               if path not in sealed_set]
                catalog.write(opened=opened_rows, sealed=[sealed_row(self.root, Path(path)) for path in sorted(sealed_set)])
        except CatalogError as exc:
            now = time.monotonic()
            if now - self._warned_at >= _WARN_EVERY_S:
                self._warned_at = now
                logger.warning("catalog: rows not written (%s); recording goes on, `otel-session reindex` "
                               "or the next catalog pass adds them", exc)

    def _open(self) -> SqlCatalog:
        self._catalog = SqlCatalog(self.url, self.origin)
        return self._catalog

    def close(self) -> None:
        with self._lock:
            if self._catalog is not None:
                self._catalog.close()
                self._catalog = None


def writer_hooks(root: str | os.PathLike[str], url: str | None = None) -> CatalogHook | None:
    """The hook every producer's ``BundleWriter`` gets (None when the catalog is turned off)."""
    return None if catalog_disabled(url) else CatalogHook(root, url)
