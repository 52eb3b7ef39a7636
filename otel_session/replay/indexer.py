"""Sealed runs indexed as they seal, off the producer's and the writer's paths (issue 30).

Contract::

    indexer = seal_indexer(root)             # None when $OTEL_SESSION_INDEX_AT_SEAL=off, or a store removes local copies
    BundleWriter(root, hooks=chain_hooks(writer_hooks(root), indexer))   # told of runs as they seal
    indexer.runs_passed(opened, sealed)      # never waits: long sealed runs queued, the rest ignored
    indexer.wait_idle(timeout_s)             # True once nothing waits and nothing is being built
    indexer.close()                          # stops: an in-flight build is abandoned (its child killed)

A sealed run (capture ``complete`` or ``failed``) of at least ``min_records`` records gets its
``replay.index`` built once, right after its seal, so its first reader loads it (``LOADED``)
instead of building it (10–20 s of CPU and 0.9 GB at 1M records). Below ``min_records``
(:data:`DEFAULT_MIN_RECORDS`) the first read costs a reader tens of milliseconds: nothing is
done, so short runs (the collector's usual ones) cost one comparison each.

This module imports ``replay.index`` only when it builds (a recording process pays nothing for
it at start). Off the hot paths: the writer's hooks thread only appends to a bounded queue (``queue_bound``;
full, the run is skipped and that is logged once: its first reader builds the index, as without
this); one thread of its own builds one run at a time, each in a child process (a fresh
interpreter started with ``-I``, niced) whose memory goes back with it. The index is derived data
(``replay.index``: checked against the journal by digests, ``seek.json`` written last): a build
abandoned at close, killed, or whose run moved away leaves nothing a reader would trust.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from otel_session.bundle.hooks import SealedRun
from otel_session.core.journal import CaptureStatus
from otel_session.core.log import get_logger

__all__ = ["DEFAULT_MIN_RECORDS", "ENV_INDEX_AT_SEAL", "QUEUE_BOUND", "SealIndexer", "build_here", "seal_indexer"]

logger = get_logger(__name__)

ENV_INDEX_AT_SEAL = "OTEL_SESSION_INDEX_AT_SEAL"
"""``off``: no index at seal; a number: the fewest records a run needs to be indexed at seal."""
DEFAULT_MIN_RECORDS = 4096
"""Below this many records the first reader's build costs ≈ 15–60 ms (1,000 records 15 ms, 4,000
records 55 ms, 16,000 records 220 ms on the bench machine): not worth a child process."""
QUEUE_BOUND = 32
"""Sealed runs waiting for a build; past it a run is skipped (its first reader builds it)."""
NICE = 10
_JOIN_S = 10.0
_SEALED = frozenset({CaptureStatus.COMPLETE.value, CaptureStatus.FAILED.value})
_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); from otel_session.replay.indexer import build_here; "
          "sys.exit(build_here(sys.argv[2], sys.argv[3]))")
_KEPT, _NOT_INDEXABLE, _NOT_KEPT = 0, 3, 4
"""The child's exit status: its index on disk; a run with no index (unsound records); kept in memory only."""


def seal_indexer(root: str | os.PathLike[str], *, store_removes_local: bool = False) -> SealIndexer | None:
    """The index-at-seal hook a producer's ``BundleWriter`` gets; None when turned off
    (``$OTEL_SESSION_INDEX_AT_SEAL=off``) or when a store uploader removes each sealed run's local
    copy (``store_removes_local``): an index beside a removed run would serve nobody, and the host
    that fetches the run builds it there, at its first read."""
    setting = os.environ.get(ENV_INDEX_AT_SEAL, "").strip().lower()
    if setting in ("off", "false", "0", "no", "none") or store_removes_local:
        return None
    try:
        min_records = int(setting) if setting not in ("", "on", "true", "yes") else DEFAULT_MIN_RECORDS
    except ValueError:
        logger.warning("%s=%s is neither off nor a number of records: using %d", ENV_INDEX_AT_SEAL, setting,
                       DEFAULT_MIN_RECORDS)
        min_records = DEFAULT_MIN_RECORDS
    return SealIndexer(root, min_records=max(1, min_records))


class SealIndexer:
    """Builds the replay index of long sealed runs in the background (``bundle.hooks.RunHooks``).

    ``build(root, run_path) -> bool`` builds one run (default: in a child process; True when its
    index is on disk); tests give one that waits, to fill the queue."""

    def __init__(self, root: str | os.PathLike[str], *, min_records: int = DEFAULT_MIN_RECORDS,
                 queue_bound: int = QUEUE_BOUND, build: Callable[[Path, Path], bool] | None = None) -> None:
        self.root = Path(root)
        self.min_records = min_records
        self.queue_bound = queue_bound
        self.built = 0
        self.skipped = 0
        self._build = build or self._build_in_child
        self._queue: collections.deque[str] = collections.deque()
        self._busy = False
        self._child: subprocess.Popen[bytes] | None = None
        self._stopping = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def runs_passed(self, opened: Sequence[tuple[str, dict[str, Any]]], sealed: Sequence[SealedRun]) -> None:
        for run in sealed:
            capture = run.capture or {}
            count = capture.get("event_count")
            if capture.get("status") in _SEALED and isinstance(count, int) and count >= self.min_records:
                self._enqueue(run.directory)

    def _enqueue(self, directory: str) -> None:
        with self._changed:
            if self._stopping or directory in self._queue:
                return
            if len(self._queue) >= self.queue_bound:
                self.skipped += 1
                if self.skipped == 1:
                    logger.warning("index at seal: %d runs already wait; %s and any further run past the bound is "
                                   "left to its first reader", self.queue_bound, directory)
                return
            self._queue.append(directory)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="otel-session-index-at-seal", daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until nothing waits and nothing is being built; True when that happened in time."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._queue and not self._busy, timeout_s)

    def close(self) -> None:
        """Stop: runs still waiting are left to their first readers; a build in progress is ended
        (its child killed, its temporary files removed). Idempotent."""
        with self._changed:
            self._stopping = True
            self._queue.clear()
            child = self._child
            self._changed.notify_all()
        if child is not None:
            _end(child)
        if self._thread is not None:
            self._thread.join(_JOIN_S)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._stopping or self._queue)
                if self._stopping:
                    self._busy = False
                    self._changed.notify_all()
                    return
                directory = self._queue.popleft()
                self._busy = True
            run_path = Path(directory)
            try:
                if self._build(self.root, run_path):
                    self.built += 1
                _drop_if_moved(self.root, run_path)
            except Exception:  # noqa: BLE001 - an index is derived data: its reader builds it
                logger.exception("index at seal: building the index of %s failed; its first reader builds it", run_path)
            with self._changed:
                self._busy = False
                self._changed.notify_all()

    def _build_in_child(self, root: Path, run_path: Path) -> bool:
        """Build in a fresh, niced interpreter (``-I``: no ``PYTHON*`` variables, so no auto-instrumentation
        runs in it; this package's location is given instead); True when the index is on disk."""
        package_parent = str(Path(__file__).resolve().parents[2])  # where otel_session is importable from
        with self._changed:
            if self._stopping:
                return False
            child = self._child = subprocess.Popen(
                [sys.executable, "-I", "-c", _CHILD, package_parent, str(root), str(run_path)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, close_fds=True)
        try:
            _, stderr = child.communicate()
        finally:
            with self._changed:
                self._child = None
        if child.returncode == _KEPT:
            return True
        if child.returncode not in (_NOT_INDEXABLE, _NOT_KEPT) and not self._stopping:
            last = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] if stderr else []
            logger.warning("index at seal: the build of %s ended with status %s (%s); its first reader builds it",
                           run_path, child.returncode, last[0] if last else "no message")
        from otel_session.replay.index import index_path

        _remove_temporaries(index_path(root, run_path), child.pid)
        return False


def build_here(root: str, run_path: str) -> int:
    """The child's work: build the run's index (niced), keep it; its exit status for the parent."""
    from otel_session.replay.index import open_run_index

    try:
        os.nice(NICE)
    except OSError:
        pass
    index = open_run_index(root, run_path)
    if index is None:
        return _NOT_INDEXABLE
    return _KEPT if index.kept else _NOT_KEPT


def _end(child: subprocess.Popen[bytes]) -> None:
    """Kill a build's child: it holds nothing to save (``seek.json`` is written last, and the
    temporary files it leaves are removed by the thread that waited for it)."""
    try:
        child.kill()
    except OSError:
        pass


def _remove_temporaries(directory: Path, pid: int) -> None:
    """The temporary files a dead child left in an index directory (``bundle.files.temporary_path``)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    marker = f".{pid}."
    for entry in entries:
        if entry.name.startswith(".") and entry.name.endswith(".tmp") and marker in entry.name:
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def _drop_if_moved(root: Path, run_path: Path) -> None:
    """A run moved away while it was indexed (set aside by the collector): its index serves nobody."""
    if not run_path.is_dir():
        from otel_session.replay.index import index_path

        shutil.rmtree(index_path(root, run_path), ignore_errors=True)
