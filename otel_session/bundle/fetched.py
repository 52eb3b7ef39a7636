"""Runs fetched from a bundle store into a bounded local directory: how a host without the
bundles (a viewer, a CLI) reads the runs another host recorded and stored.

Contract::

    fetched = FetchedRuns(store, root, stored_paths)   # copies under <root>/.store-cache (FETCHED_DIR)
    fetched.fetch(["sessions/s/run-…"])               # the runs the cache lacks, fetched and checked
    stored_id = fetched.fetch_session(session_id)      # the id its stored runs are under, None if none
    answer = fetched.here_or_fetched(session_id, find, absent=is_404)   # find(root, id), else in the copies
    for relative, value in read_stored(store, relatives, read): ...   # read(scratch, run) of each, not kept

``stored_paths(session_id)`` names a session's stored runs (the catalog's rows with a location,
every origin's) by the id they are stored under. A session id is looked up as the bundles name it
(``redact.session_id_candidates``: its keyed hash when it holds personal data, with the root's key
or ``$OTEL_SESSION_REDACTION_KEY``; a hashed id as ``sessions`` shows it finds itself): an id
holding personal data is never looked up beyond this process, only its keyed hash is.

Each fetch goes through the store interface (``store.fetch_run``: size and checksum checked) into
a scratch directory, then is renamed into place: a reader never sees half a run, and two fetches of
one run leave one copy. The copies are read-only answers (never a run of this root's: a catalog
pass does not list them) and bounded: past ``max_bytes`` (default 1 GiB,
``$OTEL_SESSION_STORE_CACHE_BYTES``) the least recently used runs are removed, never the ones a
fetch has just brought.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import TypeVar

from otel_session.core import layout
from otel_session.redact import RedactionPolicy, Redactor, session_id_candidates

from .files import make_private_dirs
from .read import iter_run_dirs
from .store import BundleStore, RunNotStored

__all__ = ["DEFAULT_FETCHED_BYTES", "ENV_STORE_CACHE_BYTES", "FETCHED_DIR", "FetchedRuns", "read_stored"]

FETCHED_DIR = ".store-cache"
ENV_STORE_CACHE_BYTES = "OTEL_SESSION_STORE_CACHE_BYTES"
DEFAULT_FETCHED_BYTES = 1 << 30
_SCRATCH = ".partial"
_READERS = 8
"""Stored runs fetched at once by :func:`read_stored`: a fetch mostly waits on the store."""
_T = TypeVar("_T")


def _default_max_bytes() -> int:
    try:
        return max(0, int(os.environ.get(ENV_STORE_CACHE_BYTES, "")))
    except ValueError:
        return DEFAULT_FETCHED_BYTES


class FetchedRuns:
    """Copies of stored runs under ``<root>/.store-cache``, least recently used out past ``max_bytes``."""

    def __init__(self, store: BundleStore, root: str | os.PathLike[str],
                 stored_paths: Callable[[str], Iterable[str]], *, max_bytes: int | None = None) -> None:
        self.store = store
        self.root = Path(root)
        self.directory = self.root / FETCHED_DIR
        self._stored_paths = stored_paths
        self.max_bytes = _default_max_bytes() if max_bytes is None else max_bytes

    def fetch(self, relatives: Iterable[str]) -> list[str]:
        """Fetch the runs the cache lacks (a run the store lacks is skipped); the ones now here.
        :class:`~otel_session.bundle.store.StoreUnavailable` when the store cannot be used."""
        here: list[str] = []
        for relative in dict.fromkeys(relatives):
            target = self.directory / relative
            if target.is_dir():
                _touch(target)
            else:
                try:
                    self._fetch_one(relative, target)
                except RunNotStored:
                    continue
            here.append(relative)
        if here:
            self._trim(keep={self.directory / relative for relative in here})
        return here

    def _fetch_one(self, relative: str, target: Path) -> None:
        scratch_root = self.directory / _SCRATCH
        make_private_dirs(self.root, scratch_root)
        scratch = Path(tempfile.mkdtemp(dir=scratch_root))
        try:
            unpacked = self.store.fetch_run(relative, scratch)
            make_private_dirs(self.root, target.parent)
            try:
                os.rename(unpacked, target)
            except OSError:  # another fetch put it there first: one copy
                if not target.is_dir():
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def fetch_session(self, session_id: str) -> str | None:
        """Fetch the stored runs of a session this host lacks; the id they are stored under, or
        None when the store has none."""
        for candidate in session_id_candidates(self.root, session_id):
            if _holds_personal_data(candidate):
                continue  # a raw id is never looked up beyond this process: its keyed hash is
            if self.fetch(self._stored_paths(candidate)):
                return candidate
        return None

    def here_or_fetched(self, session_id: str, find: Callable[[Path, str], _T],
                        absent: Callable[[Exception], bool]) -> _T:
        """``find(root, session_id)``; when that says the session or run is not here (``absent``) and
        the store holds runs of the session, ``find`` in the fetched copies, by their stored id."""
        try:
            return find(self.root, session_id)
        except Exception as exc:
            if not absent(exc):
                raise
            stored = self.fetch_session(session_id)
            if stored is None:
                raise
        return find(self.directory, stored)

    @property
    def cached_bytes(self) -> int:
        return sum(size for _, size, _ in self._runs())

    def _runs(self) -> list[tuple[Path, int, float]]:
        """(run directory, bytes, last use) of every copy."""
        found = []
        for path in iter_run_dirs(self.directory, include_evals=True):
            try:
                size = sum(entry.stat().st_size for entry in os.scandir(path) if entry.is_file(follow_symlinks=False))
                found.append((path, size, path.stat().st_mtime))
            except OSError:
                continue  # removed meanwhile
        return found

    def _trim(self, keep: set[Path]) -> None:
        """Remove the least recently used copies (never ``keep``), with the replay index built of
        each, until the rest fit ``max_bytes``."""
        runs = sorted(self._runs(), key=lambda run: run[2])
        total = sum(size for _, size, _ in runs)
        for path, size, _ in runs:
            if total <= self.max_bytes:
                return
            if path in keep or not layout.is_valid_run_id(path.name):
                continue
            shutil.rmtree(path, ignore_errors=True)
            shutil.rmtree(self.directory / layout.INDEX_DIR / path.relative_to(self.directory), ignore_errors=True)
            total -= size


def _holds_personal_data(session_id: str) -> bool:
    return _id_scanner(RedactionPolicy.from_env()).identifier(session_id) != session_id


@functools.lru_cache(maxsize=4)
def _id_scanner(policy: RedactionPolicy) -> Redactor:
    """Finds personal data in an id (its key never makes a hash anyone sees)."""
    return Redactor(policy, key=b"")


def _touch(path: Path) -> None:
    """Mark a copy as used now (its directory's mtime orders the least recently used)."""
    try:
        now = time.time()
        os.utime(path, (now, now))
    except OSError:
        pass


def read_stored(store: BundleStore, relatives: Iterable[str], read: Callable[[Path, Path], _T]) -> Iterator[tuple[str, _T]]:
    """``read(scratch_root, run_path)`` of each stored run, in order: each fetched (checked) into a
    scratch directory of its own, read, and removed (nothing kept). A run the store lacks is skipped."""
    def one(scratch: Path, relative: str) -> tuple[bool, _T | None]:
        where = Path(tempfile.mkdtemp(dir=scratch))
        try:
            path = store.fetch_run(relative, where)
            return True, read(where, path)
        except RunNotStored:
            return False, None
        finally:
            shutil.rmtree(where, ignore_errors=True)

    pending = iter(relatives)
    with tempfile.TemporaryDirectory(prefix="otel-session-stored-") as scratch, ThreadPoolExecutor(_READERS) as pool:
        while chunk := list(islice(pending, _READERS * 4)):
            for relative, (found, value) in zip(chunk, pool.map(lambda relative: one(Path(scratch), relative), chunk)):
                if found:
                    yield relative, value  # type: ignore[misc]
