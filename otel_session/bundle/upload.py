"""Sealed runs to a bundle store, off the writer's path, retried until the store takes them.

Contract::

    uploader = Uploader(store, root, keep_local=False, on_stored=record).start()
    writer = BundleWriter(root, hooks=chain_hooks(catalog_hook, uploader))   # told of runs as they seal
    uploader.wait_idle(timeout_s)          # True once nothing waits (tests, shutdown)
    uploader.waiting_bytes                 # bytes of the sealed runs waiting on disk for the store
    uploader.close()                       # stops the thread; what is left waits on disk for the next start

A sealed run is uploaded (``store.put_run``: one object, checked by size and MD5), then
``on_stored(relative, stored)`` is called (the collector records the location in the catalog),
then it is remembered in ``<root>/.stored.ndjson`` (kept local) or its directory is removed
(``keep_local=False``): in that order, so a crash at any point leaves the run on disk and a later
start uploads it again, to the same key (one object, never two). At start, every sealed run
under the root that is not remembered is queued. While the store is down, runs wait on disk and
the upload is retried after 1 s, 2 s, 4 s … at most ``max_backoff_s``; nothing is dropped.
"""

from __future__ import annotations

import collections
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from otel_session.core import layout
from otel_session.core.journal import CaptureStatus
from otel_session.core.log import get_logger

from .read import iter_run_dirs
from .store import BundleStore, Stored, StoreUnavailable
from .hooks import SealedRun, chain_hooks

__all__ = ["STORED_LEDGER", "Uploader", "chain_hooks"]  # chain_hooks lives in bundle.hooks

logger = get_logger(__name__)

STORED_LEDGER = ".stored.ndjson"


def _sealed(run_dir: Path) -> bool:
    try:
        capture = orjson.loads((run_dir / layout.CAPTURE_FILE).read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(capture, dict) and capture.get("status") not in (None, CaptureStatus.RECORDING.value)


def _bytes_of(run_dir: Path) -> int:
    """The bytes of a run's files (a bundle is one flat directory of a few files)."""
    try:
        return sum(entry.stat().st_size for entry in os.scandir(run_dir) if entry.is_file(follow_symlinks=False))
    except OSError:
        return 0


class Uploader:
    """Uploads sealed runs of one root on a daemon thread (``bundle.write.RunHooks``)."""

    def __init__(self, store: BundleStore, root: str | os.PathLike[str], *, keep_local: bool = True,
                 on_stored: Callable[[str, Stored], None] | None = None, max_backoff_s: float = 60.0,
                 may_store: Callable[[str], bool] | None = None) -> None:
        """``may_store(relative)``: asked before each upload; False leaves the run out (the caller
        moved it aside: another collector's bundle of the run is the one stored)."""
        self.store = store
        self.may_store = may_store
        self.root = Path(root)
        self.keep_local = keep_local
        self.on_stored = on_stored
        self.max_backoff_s = max_backoff_s
        self.uploaded = 0
        self.failures = 0
        self.last_failure: str | None = None
        self._queue: collections.deque[str] = collections.deque()
        self._queued: dict[str, int] = {}
        """Each waiting run and its bytes on disk."""
        self.waiting_bytes = 0
        self._busy = False
        self._changed = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="otel-session-upload", daemon=True)

    def start(self) -> Uploader:
        remembered = self._remembered()
        prefix = len(os.fspath(self.root)) + 1
        for run_dir in iter_run_dirs(self.root, include_evals=True):
            relative = os.fspath(run_dir)[prefix:].replace(os.sep, "/")
            if relative not in remembered and _sealed(run_dir):
                self._enqueue(relative)
        self._thread.start()
        return self

    def runs_passed(self, opened: Sequence[tuple[str, dict[str, Any]]], sealed: Sequence[SealedRun]) -> None:
        for run in sealed:
            self._enqueue(Path(run.directory).relative_to(self.root).as_posix())

    def pending(self) -> int:
        with self._changed:
            return len(self._queue) + self._busy

    def wait_idle(self, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: not self._queue and not self._busy, timeout_s)

    def close(self) -> None:
        with self._changed:
            self._stop = True
            self._changed.notify_all()
        if self._thread.is_alive():
            self._thread.join(30)

    def _enqueue(self, relative: str) -> None:
        size = _bytes_of(self.root / relative)
        with self._changed:
            if relative not in self._queued:
                self._queued[relative] = size
                self.waiting_bytes += size
                self._queue.append(relative)
                self._changed.notify_all()

    def _run(self) -> None:
        backoff = 0.0
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._stop or self._queue, None if not backoff else backoff)
                if self._stop:
                    return
                if not self._queue:
                    continue
                relative = self._queue[0]
                self._busy = True
            try:
                self._upload(relative)
            except StoreUnavailable as exc:
                self.failures += 1
                if self.last_failure is None:
                    logger.warning("store: %s; sealed runs wait on disk and uploads are retried", exc)
                self.last_failure = str(exc)
                backoff = min(self.max_backoff_s, max(1.0, backoff * 2))
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()
                with self._changed:  # wait out the backoff (a stop ends it at once)
                    self._changed.wait_for(lambda: self._stop, backoff)
                continue
            except Exception:  # noqa: BLE001 - one run's bug must not stop the others' uploads
                logger.exception("store: the upload of %s failed; it waits on disk for the next start", relative)
            else:
                if self.last_failure is not None:
                    logger.info("store: uploads go on again")
                self.last_failure = None
            backoff = 0.0
            with self._changed:
                self._queue.popleft()
                self.waiting_bytes -= self._queued.pop(relative, 0)
                self._busy = False
                self._changed.notify_all()

    def _upload(self, relative: str) -> None:
        run_dir = self.root / relative
        if not run_dir.is_dir() or (self.may_store is not None and not self.may_store(relative)):
            return
        stored = self.store.put_run(self.root, relative)
        self.uploaded += 1
        if self.on_stored is not None:
            self.on_stored(relative, stored)
        if self.keep_local:
            with open(self.root / STORED_LEDGER, "ab") as ledger:
                ledger.write(orjson.dumps({"path": relative, "location": stored.location}) + b"\n")
                ledger.flush()
                os.fsync(ledger.fileno())
        else:
            shutil.rmtree(run_dir)

    def _remembered(self) -> set[str]:
        try:
            lines = (self.root / STORED_LEDGER).read_bytes().splitlines()
        except FileNotFoundError:
            return set()
        remembered = set()
        for line in lines:
            try:
                remembered.add(orjson.loads(line)["path"])
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line (a crash mid-append): that run is uploaded again
        return remembered
