"""The bundle writer's catalog hook: rows written on the writer thread, as runs open and seal.

Contract::

    hook = CatalogHook(root)                    # opens the catalog (catalog_url(root)) on a thread of its own
    hook.wait_ready(timeout_s)                  # tests: the catalog is open
    writer = BundleWriter(root, hooks=hook)     # the writer calls runs_passed after each pass
    hook.runs_passed(opened=[(path, manifest)], sealed=[SealedRun(path, manifest, capture)])   # never raises
    hook.close()

Runs opened since the last pass get a row from their ``run.json`` (no bundle read; their session
counted); runs sealed in the pass get their capture status and record count (``rows.light_row``:
the ``run.json`` and terminal capture the writer tells, no file read). A run opened and sealed since the last call
(a short run: the writer tells its hooks of an opening with its seal, or 2 s later) is written
once, sealed. Their figures (turns, tokens, latency, problems,
…) are counted by the first reader that lists them (``sync.complete_rows``) or by a catch-up pass:
counting them here, on the collector's writer thread, cost a fifth of the collector's CPU.
Both go in one transaction. A catalog that cannot be opened or written is logged (once a minute
at most) and tried again on a timer (``RETRY_S``: a backoff with a cap), its rows kept meanwhile
(up to ``_MAX_WAITING``; beyond, a keeper's pass or ``otel-session reindex`` brings them back):
recording never depends on it. ``OTEL_SESSION_CATALOG=off`` turns it off.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from otel_session.bundle.hooks import SealedRun
from otel_session.core.log import get_logger

from .model import CatalogError, RunRow
from .settings import RETRY_S
from .rows import light_row, opened_row
from .settings import catalog_disabled, catalog_origin, catalog_url, no_room

__all__ = ["CatalogHook", "writer_hooks"]

logger = get_logger(__name__)

_WARN_EVERY_S = 60.0
_OPEN_WAIT_S = 30.0
"""How long a pass's rows wait for the catalog's first opening before they are kept for later."""
_MAX_WAITING = 100_000
"""Rows kept while the catalog cannot be written (beyond: left to the next catch-up pass)."""


class CatalogHook:
    """Writes catalog rows for one bundle writer (``bundle.hooks.RunHooks``, told from its own thread).

    ``retry_s``: (first, cap) of the backoff between attempts at a catalog that could not be opened
    or written; ``wake``: an event that ends the current wait at once (tests set it)."""

    def __init__(self, root: str | os.PathLike[str], url: str | None = None, *,
                 retry_s: tuple[float, float] = RETRY_S, wake: threading.Event | None = None) -> None:
        self.root = Path(root)
        """As the writer names it: its run paths start with it."""
        self.url = catalog_url(self.root, url)
        self.origin = catalog_origin(self.root, url)
        self._catalog: Any = None
        self._lock = threading.Lock()
        self._ready = threading.Event()
        """Set once the first attempt at opening the catalog ended (opened or not)."""
        self._retry_s = retry_s
        self._wake = wake or threading.Event()
        self._closing = False
        self._failing = False
        """The last write failed: passes leave their rows to the retrier's next attempt."""
        self._warned_at = float("-inf")
        self._opened: set[str] = set()
        """Runs this hook saw open and not yet sealed: their sessions count them already."""
        self._waiting: tuple[list[RunRow], list[RunRow]] = ([], [])
        """Rows not written yet (the catalog not open, or a write failed): written at the next attempt."""
        self._retrier = self._new_retrier()
        if self.root.is_dir():  # else at the first pass, once the writer has made the root
            self._retrier.start()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until the catalog is open (or could not be); True when it was in time."""
        return self._ready.wait(timeout_s)

    def _new_retrier(self) -> threading.Thread:
        return threading.Thread(target=self._open_and_retry, name="otel-session-catalog-open", daemon=True)

    def _open_and_retry(self) -> None:
        """Open the catalog and write what waits, on a thread of its own, until both are done: the
        SQL library's import and a new catalog's tables cost a fraction of a second, which neither
        the app's start nor a writer pass waits for. What cannot be done now (a server down, a
        nearly full disk: the catalog is not even made there) is tried again with a backoff."""
        delay = self._retry_s[0]
        while True:
            if self._catalog is None:
                self._open()
            with self._lock:
                done = self._catalog is not None and self._write_locked()
                if done or self._closing:
                    self._retrier = self._new_retrier()  # a later failure starts this one
                    return
            self._wake.wait(delay)
            self._wake.clear()
            delay = min(delay * 2, self._retry_s[1])

    def _open(self) -> None:
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
        with self._lock:
            self._catalog = catalog
        self._ready.set()

    def runs_passed(self, opened: Sequence[tuple[str, dict[str, Any]]], sealed: Sequence[SealedRun]) -> None:
        if not opened and not sealed:
            return
        sealed_now = {run.directory for run in sealed}
        opened = [(path, manifest) for path, manifest in opened if path not in sealed_now]  # its sealed row says it all
        try:
            rows = ([opened_row(self.root, path, manifest) for path, manifest in opened],
                    [light_row(self.root, run.directory, run.manifest if run.capture is not None else None, run.capture)
                     for run in sealed])
        except (OSError, ValueError) as exc:
            self._warn(exc)
            return
        with self._lock:
            if self._retrier.ident is None and not self._ready.is_set():
                self._retrier.start()  # the writer's first pass: the root exists now
        # The writer tells its hooks from a thread of their own (bundle.hooks): waiting here for a
        # catalog being opened holds up no writer, and the rows are in before the next hook (the
        # store's uploader, which records where each run went) hears of the same runs.
        self._ready.wait(_OPEN_WAIT_S)
        with self._lock:
            if len(self._waiting[0]) + len(self._waiting[1]) < _MAX_WAITING:
                self._waiting[0].extend(rows[0])
                self._waiting[1].extend(rows[1])
            if not self._failing and self._write_locked():
                return
            if self._retrier.ident is None and not self._closing:
                self._retrier.start()  # the rows wait for it: the next attempt is on its timer

    def _write_locked(self) -> bool:
        """Write the waiting rows in one transaction; False (they keep waiting) when it failed."""
        opened, sealed = self._waiting
        if self._catalog is None:
            return False
        if not (opened or sealed):
            return True
        sealed_paths = {row.path for row in sealed}
        opened = [row for row in opened if row.path not in sealed_paths]  # opened and sealed since: one row, sealed
        now_open = {row.path for row in opened}
        recount = not self._opened.issuperset(sealed_paths)  # a run whose opened row was not written: count it
        try:
            self._catalog.write(opened=opened, sealed=sealed, recount_sealed=recount)
        except CatalogError as exc:
            self._warn(exc)
            self._failing = True
            return False
        self._failing = False
        self._waiting = ([], [])
        self._opened = (self._opened | now_open) - sealed_paths
        return True

    def _warn(self, exc: Exception | str) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            logger.warning("catalog: rows not written (%s); recording goes on, `otel-session reindex` "
                           "or the next catalog pass adds them", exc)

    def close(self) -> None:
        with self._lock:
            self._closing = True
            retrier = self._retrier
        self._wake.set()
        if retrier.ident is not None:
            retrier.join(30.0)
        with self._lock:
            self._write_locked()
            if self._catalog is not None:
                self._catalog.close()
                self._catalog = None


def writer_hooks(root: str | os.PathLike[str], url: str | None = None) -> CatalogHook | None:
    """The hook every producer's ``BundleWriter`` gets (None when the catalog is turned off)."""
    return None if catalog_disabled(url) else CatalogHook(root, url)
