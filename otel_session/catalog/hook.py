"""The bundle writer's catalog hook: rows written on the writer thread, as runs open and seal.

Contract::

    hook = CatalogHook(root)                    # opens the catalog (catalog_url(root)) on a thread of its own
    hook.wait_ready(timeout_s)                  # tests: the catalog is open
    writer = BundleWriter(root, hooks=hook)     # the writer calls runs_passed after each pass
    hook.runs_passed(opened=[(path, manifest)], sealed=[path])   # never raises
    hook.close()

Runs opened since the last pass get a row from their ``run.json`` (no bundle read; their session
counted); runs sealed in the pass get their capture status and record count (``rows.light_row``:
``run.json`` and ``capture.json``, no record read). A run opened and sealed since the last call
(a short run: the writer tells its hooks of openings with the next pass that seals) is written
once, sealed. Their figures (turns, tokens, latency, problems,
…) are counted by the first reader that lists them (``sync.complete_rows``) or by a catch-up pass:
counting them here, on the collector's writer thread, cost a fifth of the collector's CPU.
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

from otel_session.bundle.read import read_manifest
from otel_session.core.log import get_logger

from .model import CatalogError, RunRow
from .rows import light_row, opened_row
from .settings import catalog_disabled, catalog_origin, catalog_url, no_room

__all__ = ["CatalogHook", "writer_hooks"]

logger = get_logger(__name__)

_WARN_EVERY_S = 60.0
_RETRY_OPEN_S = 5.0
"""How soon a catalog that could not be opened (a server down, a nearly full disk) is tried again."""
_OPEN_WAIT_S = 30.0
"""How long a pass's rows wait for the catalog to open before they are kept for later."""
_MAX_WAITING = 100_000
"""Rows kept while the catalog opens (beyond: left to the next catch-up pass)."""


class CatalogHook:
    """Writes catalog rows for one bundle writer (``bundle.hooks.RunHooks``, told from its own thread)."""

    def __init__(self, root: str | os.PathLike[str], url: str | None = None) -> None:
        self.root = Path(root)
        """As the writer names it: its run paths start with it."""
        self.url = catalog_url(self.root, url)
        self.origin = catalog_origin(self.root, url)
        self._catalog: Any = None
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._warned_at = float("-inf")
        self._opened: set[str] = set()
        """Runs this hook saw open and not yet sealed: their sessions count them already."""
        self._waiting: tuple[list[RunRow], list[RunRow]] = ([], [])
        """Rows of passes that ended before the catalog was open: written once it is."""
        self._opener = self._new_opener()
        self._open_again_at = float("inf")
        """When a catalog that could not be opened (a nearly full disk) is tried again."""
        if self.root.is_dir():  # else at the first pass, once the writer has made the root
            self._opener.start()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until the catalog is open (or could not be); True when it was in time."""
        return self._ready.wait(timeout_s)

    def _new_opener(self) -> threading.Thread:
        return threading.Thread(target=self._open, name="otel-session-catalog-open", daemon=True)

    def _open(self) -> None:
        """Open the catalog on a thread of its own: the SQL library's import and a new catalog's
        tables cost a fraction of a second, which neither the app's start nor a writer pass waits for.
        On a nearly full disk it is not even made (tried again a minute later)."""
        catalog = None
        problem = no_room(self.url)
        if problem is None:
            try:
                from .sql import SqlCatalog

                catalog = SqlCatalog(self.url, self.origin)
            except CatalogError as exc:
                problem = str(exc)
        if problem is not None:
            self._warn(problem)
            self._open_again_at = time.monotonic() + _RETRY_OPEN_S
        with self._lock:
            self._catalog = catalog
            self._write_locked()
            self._ready.set()

    def runs_passed(self, opened: Sequence[tuple[str, dict[str, Any]]], sealed: Sequence[str]) -> None:
        if not opened and not sealed:
            return
        sealed_now = set(sealed)
        opened = [(path, manifest) for path, manifest in opened if path not in sealed_now]  # its sealed row says it all
        try:
            rows = ([opened_row(self.root, Path(path), manifest) for path, manifest in opened],
                    [light_row(self.root, Path(path), read_manifest(Path(path)) or {}) for path in sealed])
        except (OSError, ValueError) as exc:
            self._warn(exc)
            return
        if self._opener.ident is None:
            self._opener.start()  # the writer's first pass: the root exists now
        elif self._catalog is None and self._ready.is_set() and time.monotonic() >= self._open_again_at:
            self._open_again_at = float("inf")
            self._ready.clear()
            self._opener = self._new_opener()
            self._opener.start()
        # The writer tells its hooks from a thread of their own (bundle.hooks): waiting here for a
        # catalog being opened holds up no writer, and the rows are in before the next hook (the
        # store's uploader, which records where each run went) hears of the same runs.
        self._ready.wait(_OPEN_WAIT_S)
        with self._lock:
            if len(self._waiting[0]) + len(self._waiting[1]) < _MAX_WAITING:
                self._waiting[0].extend(rows[0])
                self._waiting[1].extend(rows[1])
            if self._ready.is_set():
                self._write_locked()

    def _write_locked(self) -> None:
        opened, sealed = self._waiting
        self._waiting = ([], [])
        if self._catalog is None or not (opened or sealed):
            return
        sealed_paths = {row.path for row in sealed}
        opened = [row for row in opened if row.path not in sealed_paths]  # opened and sealed since: one row, sealed
        now_open = {row.path for row in opened}
        recount = not self._opened.issuperset(sealed_paths)  # a run whose opened row was not written: count it
        try:
            self._catalog.write(opened=opened, sealed=sealed, recount_sealed=recount)
        except CatalogError as exc:
            self._warn(exc)
            return
        self._opened = (self._opened | now_open) - sealed_paths

    def _warn(self, exc: Exception | str) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            logger.warning("catalog: rows not written (%s); recording goes on, `otel-session reindex` "
                           "or the next catalog pass adds them", exc)

    def close(self) -> None:
        if self._opener.ident is not None:
            self._opener.join(30.0)
        with self._lock:
            self._write_locked()
            if self._catalog is not None:
                self._catalog.close()
                self._catalog = None


def writer_hooks(root: str | os.PathLike[str], url: str | None = None) -> CatalogHook | None:
    """The hook every producer's ``BundleWriter`` gets (None when the catalog is turned off)."""
    return None if catalog_disabled(url) else CatalogHook(root, url)
