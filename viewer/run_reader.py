"""What the replay page and the per-run API read of one run, and only that.

Contract::

    reader = RunReader(root, cache_bytes=256 << 20, child_build_bytes=32 << 20)
    reader.events(path, after_seq, limit) -> EventsPage
    reader.state(path, seq) -> dict                    # the replay state (SPEC §7.1)
    reader.view(path, seq, recent=, through=) -> dict  # a checkpoint trimmed for the page (409 unless sealed and indexed)
    reader.facts(path, fallback_to_latest_run=) -> bytes   # JSON, as the API answers it
    reader.integrity(path) -> dict                     # the reader's verdict, with the capture
    reader.turns(path) -> dict                         # per-turn summaries (turns.as_rows), for a long run's timeline
    reader.bundle(path) -> BundleRead                  # the whole bundle, through the tolerant reader
    reader.cached_bytes                                # what the cache holds (bounded by cache_bytes)

A sealed run is read through its index (``otel_session.replay.index``): a slice of its journal per
page, a checkpoint and at most 256 events per state, its facts and integrity from files computed
once. A recording run (or one whose journal cannot be indexed) is read whole and folded in memory,
as before. Both kinds live in one cache bounded by bytes, least recently used first out; an entry
is valid while the run's files keep their stats. A stale or corrupt index found mid-request is
rebuilt from the journal and the request answered from the new one.

A run is opened by one thread at a time (the others then find it cached), and runs are opened
independently: waiting for another process's build of one (``replay.building``, up to its
``BUILD_WAIT_S``) holds up no other. One index is built at a time in a viewer (a build reads a
whole journal); loading one already built never waits for that.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson
from otel_session.bundle.read import BundleRead, read_bundle
from otel_session.core import layout
from otel_session.core.log import get_logger
from otel_session.replay import facts as run_facts
from otel_session.replay.index import IndexStale, RunIndex, open_run_index
from otel_session.replay.reduce import Replayer
from otel_session.replay.turns import as_rows, turn_summaries

from .cache import ByteLRU
from .errors import ApiError

__all__ = ["DEFAULT_CACHE_BYTES", "EventsPage", "RunReader", "stat_key"]

logger = get_logger(__name__)

DEFAULT_CACHE_BYTES = 256 << 20
DEFAULT_CHILD_BUILD_BYTES = 32 << 20
"""A journal at least this large has its index built in a child process (its memory goes with it)."""
_PARSED_BYTES_PER_JOURNAL_BYTE = 6  # a parsed record holds about six times its line in memory
_T = TypeVar("_T")


@dataclass(frozen=True)
class EventsPage:
    events: list[dict[str, Any]]
    next_after_seq: int | None
    last_seq: int
    capture_status: str | None
    integrity: str


class _InMemory:
    """A run read whole: its bundle, and its replayer once asked for."""

    def __init__(self, bundle: BundleRead) -> None:
        self.bundle = bundle
        self.events = run_facts.run_events(bundle)
        self.replayer: Replayer | None = None
        self.lock = threading.Lock()


class _PerRun:
    """A lock per run, kept while a thread holds or waits for it: never more than the threads."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Path, list[Any]] = {}  # path -> [its lock, the threads holding or waiting for it]

    @contextmanager
    def hold(self, path: Path) -> Iterator[None]:
        with self._guard:
            entry = self._locks.setdefault(path, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._guard:
                entry[1] -= 1
                if not entry[1]:
                    del self._locks[path]


class RunReader:
    def __init__(self, root: str | os.PathLike[str], *, cache_bytes: int = DEFAULT_CACHE_BYTES,
                 child_build_bytes: int = DEFAULT_CHILD_BUILD_BYTES) -> None:
        self.root = Path(root)
        self._child_build_bytes = child_build_bytes
        self._cache = ByteLRU(cache_bytes)
        self._opening = _PerRun()  # one open of a run at a time: the next finds it cached
        self._building = threading.Lock()  # one index built at a time (a build reads a whole journal), not loaded

    # -- answers ----------------------------------------------------------------------------

    def events(self, path: Path, after_seq: int, limit: int) -> EventsPage:
        index = self._index(path)
        if index is not None:
            page, next_after = self._indexed(path, lambda index: index.events(after_seq, limit))
            integrity = self._indexed(path, RunIndex.integrity)
            return EventsPage(page, next_after, index.last_seq, (integrity["capture"] or {}).get("status"), integrity["status"])
        run = self._in_memory(path)
        selected = [event for event in run.events if event["seq"] > after_seq]
        page = selected[:limit]
        return EventsPage(page, page[-1]["seq"] if len(selected) > limit else None,
                          run.events[-1]["seq"] if run.events else 0,
                          (run.bundle.capture or {}).get("status"), run.bundle.status.value)

    def state(self, path: Path, seq: int | None) -> dict[str, Any]:
        if self._index(path) is not None:
            return self._indexed(path, lambda index: index.state(seq))
        run = self._in_memory(path)
        with run.lock:
            if run.replayer is None:
                run.replayer = Replayer(run.events)
            return run.replayer.state_at(seq)

    def view(self, path: Path, seq: int | None, *, recent: int, through: int | None) -> dict[str, Any]:
        if self._index(path) is None:
            raise ApiError(409, "not_indexed", "only a sealed run is read in windows: read its events instead")
        return self._indexed(path, lambda index: index.view(seq, recent=recent, through=through))

    def facts(self, path: Path, *, fallback_to_latest_run: bool) -> bytes:
        if self._index(path) is not None:
            return self._indexed(path, lambda index: index.facts_json(fallback_to_latest_run=fallback_to_latest_run))
        bundle = self.bundle(path)
        built = run_facts.build_session_facts(bundle, fallback_to_latest_run=fallback_to_latest_run)
        built["integrity"] = {**built["integrity"], "capture": bundle.capture}
        return orjson.dumps(built)

    def integrity(self, path: Path) -> dict[str, Any]:
        if self._index(path) is not None:
            return self._indexed(path, RunIndex.integrity)
        bundle = self.bundle(path)
        answer = bundle.as_json()
        answer.pop("path")
        return {**answer, "capture": bundle.capture}

    def turns(self, path: Path) -> dict[str, Any]:
        index = self._index(path)
        if index is not None:
            integrity = self._indexed(path, RunIndex.integrity)
            return {"indexed": True, "last_seq": index.last_seq, "event_count": index.count,
                    "capture_status": (integrity["capture"] or {}).get("status"), "integrity": integrity["status"],
                    "turns": orjson.Fragment(self._indexed(path, RunIndex.turns_json))}
        run = self._in_memory(path)
        return {"indexed": False, "last_seq": run.events[-1]["seq"] if run.events else 0, "event_count": len(run.events),
                "capture_status": (run.bundle.capture or {}).get("status"), "integrity": run.bundle.status.value,
                "turns": as_rows(turn_summaries(run.events))}

    def bundle(self, path: Path) -> BundleRead:
        return self._in_memory(path).bundle

    @property
    def cached_bytes(self) -> int:
        """What the cache holds now, by its entries' estimates (never more than its bound)."""
        return self._cache.nbytes

    # -- the cache ----------------------------------------------------------------------------

    def _index(self, path: Path) -> RunIndex | None:
        """The sealed run's index (built by its first reader), else None; cached with the run's stats."""
        key = stat_key(path)
        cached = self._cache.get(("index", path))
        if cached is not None and cached[0] == key:
            return cached[1]
        with self._opening.hold(path):
            cached = self._cache.get(("index", path))
            if cached is not None and cached[0] == key:
                return cached[1]
            index = open_run_index(self.root, path, child_build_bytes=self._child_build_bytes, builds=self._building)
            self._cache.put(("index", path), (key, index), index.nbytes() if index is not None else 256)
        if index is not None and index.status.value != "loaded":
            logger.info("replay index of %s %s", path, index.status.value)
        return index

    def _indexed(self, path: Path, action: Callable[[RunIndex], _T]) -> _T:
        """``action`` on the run's index; a stale or corrupt one is rebuilt from the journal once."""
        index = self._index(path)
        if index is None:  # indexed a moment ago: its files changed since
            raise ApiError(409, "run_changed", "the run changed while it was read: ask again")
        try:
            return action(index)
        except (IndexStale, OSError, ValueError, KeyError) as exc:
            logger.warning("replay index of %s failed a check (%s): rebuilding it from the journal", path, exc)
        with self._opening.hold(path):
            rebuilt = open_run_index(self.root, path, rebuild=True, child_build_bytes=self._child_build_bytes,
                                     builds=self._building)
            if rebuilt is None:
                raise ApiError(409, "run_changed", "the run changed while it was read: ask again")
            self._cache.put(("index", path), (stat_key(path), rebuilt), rebuilt.nbytes())
        return action(rebuilt)

    def _in_memory(self, path: Path) -> _InMemory:
        key = stat_key(path)
        cached = self._cache.get(("bundle", path))
        if cached is not None and cached[0] == key:
            return cached[1]
        run = _InMemory(read_bundle(path))
        size = (key[1] or (0,))[0]
        self._cache.put(("bundle", path), (key, run), 4096 + size * _PARSED_BYTES_PER_JOURNAL_BYTE)
        return run


def stat_key(path: Path) -> tuple[Any, ...]:
    """The (size, mtime, inode) of a run's manifest, journal and capture: a cached read is valid while they hold."""
    key: list[Any] = []
    for name in (layout.RUN_FILE, layout.EVENTS_FILE, layout.CAPTURE_FILE):
        try:
            stat = os.stat(path / name)
        except OSError:
            key.append(None)
        else:
            key.append((stat.st_size, stat.st_mtime_ns, stat.st_ino))
    return tuple(key)
