"""Keeping the catalog true to the bundles: rebuild, catch up, and a keeper thread (SPEC §5.6).

Contract::

    result = reindex(catalog, root, progress=None)   # forget every row, index every bundle: Reindexed(runs, seconds)
    result = catch_up(catalog, root)                 # add bundles it lacks, re-read changed ones, drop deleted: CaughtUp
    rows = complete_rows(catalog, root, rows)        # rows about to be shown, their pending figures counted (and kept)
    count = complete_pending(catalog, root)          # every row whose figures are pending, counted: before a filter or sort
    keeper = CatalogKeeper(catalog, root, interval_s=30.0).start()   # catch_up now and then, in the background
    keeper.first_pass.wait(timeout); keeper.stop()

A pass lists the run directories (``sessions/*/run-*``, ``evals/*/sessions/*/run-*``) and compares
each one's stamp (sizes and times of its files) with its row: a directory without a row is read and
added, one whose stamp changed (a bundle replaced, feedback appended, a recording run grown) is
read again, a row without a directory is dropped. Reading is ``rows.sealed_row`` (only the records a row
counts; the tolerant reader ``rows.row_of`` for anything but a well-sealed bundle, so an unreadable
bundle becomes a row with its problem). Rows are written in batches; a reindex of many runs, asked
for by a process with one thread (the CLI), reads them in forked workers (one a core, up to 4)
while the catalog is written.
"""

from __future__ import annotations

import dataclasses

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from otel_session.bundle.read import iter_run_dirs
from otel_session.core.log import get_logger, log_setting

from .model import Catalog, CatalogError, RunRow
from .rows import bundle_stamp, sealed_row
from .settings import RETRY_S

__all__ = ["CatalogKeeper", "CaughtUp", "Reindexed", "catch_up", "complete_pending", "complete_rows", "reindex",
           "run_paths"]

logger = get_logger(__name__)

_BATCH = 1000
_PARALLEL_FROM = 4000
"""Runs from which a reindex reads bundles in worker processes (their start costs a fraction of a second)."""
_MAX_WORKERS = 4


@dataclass(frozen=True)
class Reindexed:
    runs: int
    seconds: float


@dataclass(frozen=True)
class CaughtUp:
    added: int
    refreshed: int
    removed: int

    @property
    def changed(self) -> bool:
        return bool(self.added or self.refreshed or self.removed)


def run_paths(root: Path) -> Iterator[tuple[str, Path]]:
    """``(path relative to the root, run directory)`` of every run, live and eval."""
    prefix = len(os.fspath(root)) + 1
    for run_path in iter_run_dirs(root, include_evals=True):
        yield os.fspath(run_path)[prefix:].replace(os.sep, "/"), run_path


def _rows(root: Path, paths: list[Path]) -> list[RunRow]:
    return [sealed_row(root, path) for path in paths]


def _write_rows(catalog: Catalog, root: Path, paths: list[Path], progress: Callable[[int], None] | None,
                *, parallel: bool = False) -> None:
    batches = [paths[start : start + _BATCH] for start in range(0, len(paths), _BATCH)]
    workers = min(_MAX_WORKERS, os.cpu_count() or 1)
    # Forked workers: no re-import, nothing to pickle but paths and rows. Only from a process with one
    # thread (the CLI's): a fork copies no other thread, and a lock one of them held stays held.
    if parallel and workers > 1 and len(paths) >= _PARALLEL_FROM and threading.active_count() == 1:
        import multiprocessing  # here: a list (``sessions``) never reads in workers, nor pays for their import
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            for rows in pool.map(_rows, [root] * len(batches), batches):
                catalog.upsert_sealed(rows)
                if progress is not None:
                    progress(len(rows))
        return
    for batch in batches:
        catalog.upsert_sealed(_rows(root, batch))
        if progress is not None:
            progress(len(batch))


def complete_rows(catalog: Catalog, root: Path, rows: list[RunRow]) -> list[RunRow]:
    """``rows`` with the figures of those still pending (``RunRow.figures_pending``) counted from
    their bundles now, and written back (when the catalog takes them: a list is answered either way)."""
    origin = getattr(catalog, "origin", "")  # another origin's bundles are not under this root
    pending = [index for index, row in enumerate(rows) if row.figures_pending and row.origin == origin
               and ".." not in row.path.split("/") and not row.path.startswith("/")]
    if not pending:
        return rows
    completed = list(rows)
    for index in pending:  # counted from the bundle; whose row it is and where it is stored stay
        row = rows[index]
        completed[index] = dataclasses.replace(sealed_row(root, root / row.path), origin=row.origin, location=row.location)
    try:
        catalog.upsert_sealed([completed[index] for index in pending])
    except CatalogError as exc:
        logger.warning("catalog: %d row(s) counted but not kept: %s", len(pending), exc)
    return completed


def complete_pending(catalog: Catalog, root: Path, *, limit: int = 100_000) -> int:
    """Count the figures of every row the writer's hook left pending (runs sealed since the last
    pass, by a collector or an app), so that a filter or a sort by them sees every run; how many."""
    paths = [root / path for path in catalog.pending(limit) if ".." not in path.split("/") and not path.startswith("/")]
    _write_rows(catalog, root, paths, None)
    return len(paths)


def reindex(catalog: Catalog, root: Path, *, progress: Callable[[int], None] | None = None) -> Reindexed:
    """Rebuild the catalog from the bundles under ``root``."""
    started = time.perf_counter()
    paths = [path for _, path in run_paths(root)]
    catalog.clear()
    _write_rows(catalog, root, paths, progress, parallel=True)
    return Reindexed(len(paths), time.perf_counter() - started)


def catch_up(catalog: Catalog, root: Path) -> CaughtUp:
    """One pass: add the bundles the catalog lacks, re-read changed ones, drop deleted ones."""
    known = catalog.known()
    present: set[str] = set()
    missing: list[Path] = []
    changed: list[Path] = []
    for relative, path in run_paths(root):
        present.add(relative)
        row = known.get(relative)
        if row is None:
            missing.append(path)
        elif row.stamp != bundle_stamp(path):
            changed.append(path)
    if missing:
        logger.warning("catalog: adding %d bundle(s) it lacks under %s", len(missing), log_setting(str(root)))
    _write_rows(catalog, root, missing + changed, None)
    removed = catalog.remove([path for path, row in known.items() if path not in present and row.location is None])
    if removed:
        logger.info("catalog: dropped %d run(s) whose bundles are gone from %s", removed, log_setting(str(root)))
    return CaughtUp(len(missing), len(changed), removed)


class CatalogKeeper:
    """Runs :func:`catch_up` at start and every ``interval_s`` on a daemon thread. A failed pass
    is logged and tried again sooner, with a backoff (``retry_s``: first pause and its cap, at most
    ``interval_s``): while the catalog cannot be kept true, lists scan the bundles."""

    def __init__(self, catalog: Catalog, root: Path, *, interval_s: float = 30.0,
                 retry_s: tuple[float, float] = RETRY_S) -> None:
        self.catalog = catalog
        self.root = Path(root)
        self.interval_s = interval_s
        self._retry_s = retry_s
        self.first_pass = threading.Event()
        """Set when the first pass ended (done or failed)."""
        self.last: CaughtUp | None = None
        self.failure: str | None = None
        """Why the last pass failed (the catalog cannot be kept true: lists should scan); None after one that did not."""
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="otel-session-catalog", daemon=True)

    def start(self) -> CatalogKeeper:
        self._thread.start()
        return self

    def pass_now(self) -> None:
        """Ask for a pass without waiting for the interval."""
        self._wake.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        retry_s = self._retry_s[0]
        while not self._stop.is_set():
            try:
                self.last = catch_up(self.catalog, self.root)
                self.failure = None
            except CatalogError as exc:
                if self.failure is None:
                    logger.warning("catalog: a pass over %s failed: %s", log_setting(str(self.root)), exc)
                self.failure = str(exc)
            except Exception as exc:  # noqa: BLE001 - a bug in one pass must not end the keeper
                logger.exception("catalog: a pass over %s failed", log_setting(str(self.root)))
                self.failure = f"{type(exc).__name__}: {exc}"
            self.first_pass.set()
            if self.failure is None:
                retry_s = self._retry_s[0]
                self._wake.wait(self.interval_s)
            else:
                self._wake.wait(min(retry_s, self.interval_s))
                retry_s = min(retry_s * 2, self._retry_s[1])
            self._wake.clear()
