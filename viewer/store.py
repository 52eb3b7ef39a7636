"""The viewer's read side of the bundle root: the live index, strict run lookup, downloads, feedback.

Contract::

    store = BundleStore(root)
    store.runs(session_id)                    # RunInfo of one session's runs, eval runs included, newest first (404 if none)
    store.session_facts(session_id)           # facts of all its runs, in run order (404 if none)
    run = store.resolve(session_id, run_id)   # resolve.ResolvedRun(session_id, run_id, path, fallback_to_latest_run, run)
    store.read(run)                           # BundleRead (tolerant: a bad bundle reads as invalid)
    store.reader                              # viewer.run_reader.RunReader: what the per-run API reads
    store.bundle_tar(run)                     # bytes of an uncompressed tar of the run directory
    store.append_feedback(run, rating=, comment=)

With a bundle store (``$OTEL_SESSION_STORE``; ``STORE`` in the app config) a session this root
lacks is looked up in the catalog: its runs stored by another root (a row with a ``location``) are
fetched into ``<root>/.store-cache/`` and answered from there (``bundle.fetched.FetchedRuns``: a
bounded cache; read-only copies: feedback on them stays in the copy).

Every id from a URL is validated and resolved through ``otel_session.replay.resolve`` (its errors become
``ApiError`` 400/404/409 with the same codes) and ``otel_session.core.layout`` strictly inside the root: traversal
(raw or encoded), absolute paths and symlinks that lead outside are never followed. Lists of runs
and sessions come from the run catalog (``viewer.listing``); eval runs resolve when named by run id, or as the latest run of a session that has only eval runs. Nothing here writes except :meth:`BundleStore.append_feedback`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import orjson

from otel_session.core import layout
from otel_session.replay import facts, resolve
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.core.journal import format_timestamp
from otel_session.bundle.archive import BUNDLE_FILES, bundle_archive
from otel_session.bundle.read import BundleRead, RunInfo
from otel_session.bundle.fetched import FETCHED_DIR, FetchedRuns
from otel_session.bundle.store import S3Store, StoreUnavailable
from otel_session.replay.resolve import ResolvedRun

from .errors import ApiError
from .run_reader import DEFAULT_CACHE_BYTES, RunReader

__all__ = ["BUNDLE_FILES", "FETCHED_DIR", "BundleStore", "ResolvedRun", "check_session_id"]

_MAX_COMMENT_CHARS = 4000
_T = TypeVar("_T")


def check_session_id(session_id: str) -> None:
    """Reject ids no writer could have stored (``resolve.check_session_id``) with a 400."""
    try:
        resolve.check_session_id(session_id)
    except resolve.InvalidId as exc:
        raise _api_error(exc) from None


def _api_error(exc: resolve.RunResolutionError) -> ApiError:
    return ApiError(exc.http_status, exc.code, str(exc))


def _is_not_found(exc: Exception) -> bool:
    return isinstance(exc, ApiError) and exc.status == 404


class BundleStore:
    """Read access to one bundle root; one run is read through ``reader`` (a cache bounded by bytes)."""

    def __init__(self, root: str | os.PathLike[str], *, cache_bytes: int = DEFAULT_CACHE_BYTES,
                 remote: S3Store | None = None, stored_paths: Callable[[str], list[str]] | None = None,
                 fetched_bytes: int | None = None) -> None:
        self.root = Path(root)
        self.fetched_root = self.root / FETCHED_DIR
        self._fetched = (FetchedRuns(remote, self.root, stored_paths, max_bytes=fetched_bytes)
                         if remote is not None and stored_paths is not None else None)
        """Sessions this root lacks, fetched from the store where the catalog says their runs are."""
        self.reader = RunReader(self.root, cache_bytes=cache_bytes)
        # Feedback comments are free text typed by a person: scanned like message text (SPEC §6).
        self._redactor = Redactor(RedactionPolicy.from_env())

    # -- index -----------------------------------------------------------------------------

    def runs(self, session_id: str) -> list[RunInfo]:
        """The runs of one session (its eval runs too), newest first; 404 when the session has none.
        Their list entries come from the catalog (``viewer.listing.Listing.rows``)."""
        check_session_id(session_id)

        def find(root: Path, session_id: str) -> list[RunInfo]:
            found = [info for info in resolve.session_runs(root, session_id, include_evals=True)
                     if self._is_contained(info.path)]
            if not found:
                raise _api_error(resolve.session_not_found(root, session_id, include_evals=True))
            return found

        return self._here_or_fetched(session_id, find)

    def _here_or_fetched(self, session_id: str, find: Callable[[Path, str], _T]) -> _T:
        """``find`` in the root; when the session is not there, in the runs fetched from the store."""
        if self._fetched is None:
            return find(self.root, session_id)
        try:
            return self._fetched.here_or_fetched(session_id, find, absent=_is_not_found)
        except StoreUnavailable as exc:
            raise ApiError(503, "store_unavailable", str(exc)) from None

    # -- lookup ----------------------------------------------------------------------------

    def resolve(self, session_id: str, run_id: str | None = None) -> ResolvedRun:
        """Bind a run to a session (``resolve.resolve_run``, SPEC §7.3); its errors as ApiError 400/404/409.

        A named run is found among live and eval runs; without one, the latest live run is bound,
        else (a session with only eval runs) the latest eval run.
        """
        def find(root: Path, session_id: str) -> ResolvedRun:
            try:
                try:
                    resolved = resolve.resolve_run(root, session_id, run_id, include_evals=run_id is not None)
                except resolve.SessionNotFound:
                    if run_id is not None:
                        raise
                    resolved = resolve.resolve_run(root, session_id, None, include_evals=True)
            except resolve.RunResolutionError as exc:
                raise _api_error(exc) from None
            self._contained(resolved.path)
            return resolved

        return self._here_or_fetched(session_id, find)

    def session_facts(self, session_id: str) -> dict[str, Any]:
        """Facts of every live run of the session, in run order (``facts.session_wide_facts``); 404 if none."""
        check_session_id(session_id)

        def find(root: Path, session_id: str) -> list[RunInfo]:
            found = [info for info in resolve.session_runs(root, session_id) if self._is_contained(info.path)]
            if not found:
                raise _api_error(resolve.session_not_found(root, session_id))
            return found

        runs = self._here_or_fetched(session_id, find)
        stored = runs[0].session_id  # the keyed hash when the id given holds PII: never echoed
        return facts.session_wide_facts(stored, (self.reader.bundle(info.path) for info in runs))

    def _contained(self, path: Path) -> Path:
        if not self._is_contained(path):
            raise ApiError(404, "run_not_found", "no such run inside the bundle root")
        return path

    def _is_contained(self, path: Path) -> bool:
        """False when the run directory or one of its files is a symlink leading out of the root."""
        real_root = os.path.realpath(self.root)
        return all(
            os.path.commonpath([real_root, os.path.realpath(candidate)]) == real_root
            for candidate in (path, *(path / name for name in BUNDLE_FILES))
        )

    # -- reading ---------------------------------------------------------------------------

    def read(self, run: ResolvedRun) -> BundleRead:
        """The run's whole bundle through the tolerant reader (cached until one of its files changes)."""
        return self.reader.bundle(run.path)

    def relative(self, path: Path) -> str:
        """A bundle path as shown to clients: relative to the root, never the server's absolute path."""
        return os.path.relpath(path, self.root)

    def bundle_tar(self, run: ResolvedRun) -> bytes:
        """The run as the viewer's download: ``archive.bundle_archive``."""
        return bundle_archive(run.path, run.run_id)

    # -- the one write ---------------------------------------------------------------------

    def append_feedback(self, run: ResolvedRun, *, comment: str, **fields: Any) -> dict[str, Any]:
        """Append one annotation (``rating=``, or a score's ``kind``, ``name``, ``value``,
        ``turn_index``) to the run's ``feedback.ndjson`` (0600, outside capture integrity).

        The comment, and a text value, pass through the redactor's free-text policy first, like
        any message text.
        """
        if len(comment) > _MAX_COMMENT_CHARS:
            raise ApiError(400, "bad_feedback", f"a comment has at most {_MAX_COMMENT_CHARS} characters")
        record = {
            "at": format_timestamp(time.time_ns()),
            "session_id": run.session_id,
            "run_id": run.run_id,
            **{name: self._redactor.text(value) if isinstance(value, str) else value for name, value in fields.items()},
            "comment": self._redactor.text(comment),
            "fallback_to_latest_run": run.fallback_to_latest_run,
        }
        line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(run.path / layout.FEEDBACK_FILE, flags, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, line)
        finally:
            os.close(fd)
        return record
