"""The viewer's read side of the bundle root: the live index, strict run lookup, downloads, feedback.

Contract::

    store = BundleStore(root)
    store.sessions()                          # [{session_id, runs: [...]}], newest first
    store.run_summaries()                     # every run, live and eval, unordered (viewer.summary)
    store.runs(session_id)                    # runs of one session, eval runs included, newest first (404 if none)
    store.session_facts(session_id)           # facts of all its runs, in run order (404 if none)
    run = store.resolve(session_id, run_id)   # resolve.ResolvedRun(session_id, run_id, path, fallback_to_latest_run, run)
    store.read(run)                           # BundleRead (tolerant: a bad bundle reads as invalid)
    store.reader                              # viewer.run_reader.RunReader: what the per-run API reads
    store.bundle_tar(run)                     # bytes of an uncompressed tar of the run directory
    store.append_feedback(run, rating=, comment=)

Every id from a URL is validated and resolved through ``otel_session.replay.resolve`` (its errors become
``ApiError`` 400/404/409 with the same codes) and ``otel_session.core.layout`` strictly inside the root: traversal
(raw or encoded), absolute paths and symlinks that lead outside are never followed. Eval runs are
never part of the live index (``sessions()``); they are listed by ``run_summaries()`` and resolve
when named by run id, or as the latest run of a session that has only eval runs. Nothing here writes except :meth:`BundleStore.append_feedback`.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from otel_session.core import layout
from otel_session.replay import facts, resolve
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.core.journal import format_timestamp
from otel_session.bundle.archive import BUNDLE_FILES, bundle_archive
from otel_session.bundle.read import BundleRead, RunInfo, read_bundle, run_dir_names, run_info
from otel_session.replay.resolve import ResolvedRun

from .cache import ByteLRU
from .errors import ApiError
from .run_reader import DEFAULT_CACHE_BYTES, RunReader
from .run_reader import stat_key as _stat_key
from .summary import summarize_run

__all__ = ["BUNDLE_FILES", "BundleStore", "ResolvedRun", "check_session_id"]

"""The files a bundle download carries (the writer's lock file stays behind)."""

_MAX_COMMENT_CHARS = 4000
_LISTING_CACHE_BYTES = 512 << 20
_SUMMARY_BYTES = 5 << 10  # a listing entry holds about 4-5 KB in memory
_SEALED_CAPTURES = frozenset({"complete", "failed"})
_SETTLED_DIR_S = 2.0


def check_session_id(session_id: str) -> None:
    """Reject ids no writer could have stored (``resolve.check_session_id``) with a 400."""
    try:
        resolve.check_session_id(session_id)
    except resolve.InvalidId as exc:
        raise _api_error(exc) from None


def _api_error(exc: resolve.RunResolutionError) -> ApiError:
    return ApiError(exc.http_status, exc.code, str(exc))


class BundleStore:
    """Read access to one bundle root; one run is read through ``reader`` (a cache bounded by bytes)."""

    def __init__(self, root: str | os.PathLike[str], *, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.root = Path(root)
        self.reader = RunReader(self.root, cache_bytes=cache_bytes)
        self._summaries = ByteLRU(_LISTING_CACHE_BYTES // 4)
        """Recording runs' entries, valid while their files keep the stats of the key."""
        self._sealed_summaries = ByteLRU(_LISTING_CACHE_BYTES // 2)
        """Sealed runs' entries: a sealed bundle never changes, so they are never re-read."""
        self._session_dirs = ByteLRU(_LISTING_CACHE_BYTES // 4)
        """Per session directory: its (mtime, inode) when listed and the run directories in it."""
        # Feedback comments are free text typed by a person: scanned like message text (SPEC §6).
        self._redactor = Redactor(RedactionPolicy.from_env())

    # -- index -----------------------------------------------------------------------------

    def sessions(self) -> list[dict[str, Any]]:
        """Every live session with its runs; sessions by their newest run, newest first."""
        by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for run_path in self._run_dirs(self.root / "sessions"):
            summary = self._summary(run_path)
            if summary is not None:
                by_session[summary["session_id"]].append(summary)
        listed = [{"session_id": session_id, "runs": _newest_first(runs)} for session_id, runs in by_session.items()]
        listed.sort(key=lambda session: (session["runs"][0]["created_at"], session["session_id"]), reverse=True)
        return listed

    def run_summaries(self) -> list[dict[str, Any]]:
        """Every run under the root, live runs and eval runs (``evals/<eval_id>/sessions/…``)."""
        try:
            evals = sorted(entry.path for entry in os.scandir(self.root / "evals") if entry.is_dir(follow_symlinks=False))
        except OSError:
            evals = []
        run_dirs = self._run_dirs(self.root / "sessions")
        for eval_path in evals:
            run_dirs += self._run_dirs(Path(eval_path, "sessions"))
        summaries = []
        for run_path in run_dirs:
            known = self._sealed_summaries.get(run_path)
            summary = known if known is not None else self._summary(run_path)
            if summary is not None:
                summaries.append(summary)
        return summaries

    def runs(self, session_id: str) -> list[dict[str, Any]]:
        """The runs of one session (its eval runs too), newest first; 404 when the session has none."""
        check_session_id(session_id)
        found = resolve.session_runs(self.root, session_id, include_evals=True)
        runs = [summary for summary in (self._summary(info.path, info) for info in found) if summary is not None]
        if not runs:
            raise _api_error(resolve.session_not_found(self.root, session_id, include_evals=True))
        return runs

    def _run_dirs(self, sessions_root: Path) -> list[Path]:
        """Every run directory under one ``sessions`` directory (``read.iter_run_dirs``), listing a
        session directory again only when it changed since: adding or removing a run moves its mtime.

        A listing is kept only once its directory is older than ``_SETTLED_DIR_S``, so a file
        system with coarse timestamps cannot hide a run added in the same tick.
        """
        try:
            sessions = sorted(os.scandir(sessions_root), key=lambda entry: entry.name)
        except OSError:
            return []
        now_ns = time.time_ns()
        known_dirs = self._session_dirs
        run_dirs: list[Path] = []
        for session in sessions:
            try:
                if not session.is_dir(follow_symlinks=False):
                    continue
                stat = session.stat(follow_symlinks=False)
            except OSError:
                continue
            key = (stat.st_mtime_ns, stat.st_ino)
            known = known_dirs.get(session.path)
            if known is not None and known[0] == key:
                run_dirs += known[1]
                continue
            paths = [Path(session.path, name) for name in run_dir_names(session.path)]
            if now_ns - stat.st_mtime_ns > _SETTLED_DIR_S * 1e9:
                self._session_dirs.put(session.path, (key, paths), 256 + 160 * len(paths))
            run_dirs += paths
        return run_dirs

    def _summary(self, run_path: Path, info: RunInfo | None = None) -> dict[str, Any] | None:
        """A run's listing entry, or None when it has no valid manifest or leads out of the root.

        A sealed run's entry is kept as it is (a sealed bundle never changes); a recording run's
        while its files keep their stats (its journal grows, so its entry is remade). Listing
        thousands of sealed runs reads and stats none of them again.
        """
        sealed = self._sealed_summaries.get(run_path)
        if sealed is not None:
            return sealed
        known = self._summaries.get(run_path)
        key = _stat_key(run_path)
        if known is not None and known[0] == key:
            return known[1]
        info = info or run_info(run_path)
        if info is None or not self._is_contained(run_path):
            return None
        bundle = read_bundle(run_path)
        summary = {
            **info.as_json(),
            **summarize_run(bundle),
            "event_count": len(bundle.events),
            "integrity": bundle.status.value,
        }
        if summary.get("capture_status") in _SEALED_CAPTURES:
            self._sealed_summaries.put(run_path, summary, _SUMMARY_BYTES)
            self._summaries.pop(run_path)
        else:
            self._summaries.put(run_path, (key, summary), _SUMMARY_BYTES)
        return summary

    # -- lookup ----------------------------------------------------------------------------

    def resolve(self, session_id: str, run_id: str | None = None) -> ResolvedRun:
        """Bind a run to a session (``resolve.resolve_run``, SPEC §7.3); its errors as ApiError 400/404/409.

        A named run is found among live and eval runs; without one, the latest live run is bound,
        else (a session with only eval runs) the latest eval run.
        """
        try:
            try:
                resolved = resolve.resolve_run(self.root, session_id, run_id, include_evals=run_id is not None)
            except resolve.SessionNotFound:
                if run_id is not None:
                    raise
                resolved = resolve.resolve_run(self.root, session_id, None, include_evals=True)
        except resolve.RunResolutionError as exc:
            raise _api_error(exc) from None
        self._contained(resolved.path)
        return resolved

    def session_facts(self, session_id: str) -> dict[str, Any]:
        """Facts of every live run of the session, in run order (``facts.session_wide_facts``); 404 if none."""
        check_session_id(session_id)
        runs = [info for info in resolve.session_runs(self.root, session_id) if self._is_contained(info.path)]
        if not runs:
            raise _api_error(resolve.session_not_found(self.root, session_id))
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

    def append_feedback(self, run: ResolvedRun, *, rating: int, comment: str) -> dict[str, Any]:
        """Append one annotation to the run's ``feedback.ndjson`` (0600, outside capture integrity).

        The comment passes through the redactor's free-text policy first, like any message text.
        """
        if len(comment) > _MAX_COMMENT_CHARS:
            raise ApiError(400, "bad_feedback", f"a comment has at most {_MAX_COMMENT_CHARS} characters")
        record = {
            "at": format_timestamp(time.time_ns()),
            "session_id": run.session_id,
            "run_id": run.run_id,
            "rating": rating,
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


def _newest_first(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(runs, key=lambda run: (run["created_at"], run["run_id"]), reverse=True)


def _read_regular_file(path: Path) -> bytes:
    """Read a file of the bundle without following a symlink planted in its place."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        return handle.read()
