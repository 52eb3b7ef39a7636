"""The viewer's lists, read from the run catalog: ``GET /api/runs`` and ``GET /api/sessions``.

Contract::

    listing = Listing(root, url=None)              # opens the catalog, starts its keeper (catch up in the background)
    query = run_query(request.args)                # catalog.RunQuery; ApiError 400 on a bad value
    listing.runs(query)        # {"runs", "next_cursor", "total", "total_exact", "offset", "limit", "facets"[, "warning"]}
    listing.sessions(query)    # {"sessions": [{session_id, run_count, runs}], "next_cursor"[, "warning"]}
    listing.rows(paths)        # {path: RunRow} for one session's runs, read again where the bundle changed
    listing.feedback_changed(path, count, mean)
    listing.close()

Filters (all optional, AND-ed): ``q`` (case-insensitive substring of the session id, run id, eval
id, agent or message text), ``status`` (``ok``/``error``/``interrupted``/``running``, or
``capture_failed`` for a failed capture or an invalid bundle), ``agent``, ``service``, ``kind``
(``live``/``eval``), ``eval_id``, ``since`` / ``until`` (``created_at`` from / before, RFC 3339
prefixes such as ``2026-11-30T10:00``), ``tag`` (repeatable: every tag), ``meta.KEY=VALUE`` (the
run's metadata), ``score=NAME`` (runs with that score) and ``score.NAME=VALUE`` (its last value). ``sort`` is a ``catalog.SortKey`` (default ``created_at``),
``order`` ``asc``/``desc`` (default ``desc``). Pages: ``limit`` (default 50, at most 500) and
``cursor`` (an answer's ``next_cursor``: a keyset, stable while runs arrive), or ``offset`` for old
clients. Runs without a value sort last in either order. A query no list accepts is a 400 with
one line, never SQL. When the catalog cannot be used (turned off, a full disk, unreadable), lists
are answered from a scan of the bundles, with a ``warning`` saying so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from otel_session.catalog import (
    BadQuery, CatalogError, CatalogKeeper, Order, Problem, RunQuery, RunRow, Scope, SessionsPage, SortKey, SqlCatalog,
    StatusFilter, open_catalog, row_cursor, scan_catalog, session_cursor, time_prefix,
)
from otel_session.catalog.sync import complete_pending, complete_rows
from otel_session.catalog.rows import bundle_stamp, sealed_row
from otel_session.bundle.fetched import FETCHED_DIR
from otel_session.core.log import get_logger

from .errors import ApiError

__all__ = ["SORT_KEYS", "STATUSES", "Listing", "run_query"]

logger = get_logger(__name__)

STATUSES = tuple(status.value for status in StatusFilter)
SORT_KEYS = tuple(key.value for key in SortKey)
_META = "meta."
_SCORE = "score."
_DEFAULT_LIMIT = 50
_MAX_LIMIT = 500
_MAX_TEXT = 200
_RUNS_PER_SESSION = 5
"""Runs shown with each session of ``/api/sessions`` (its page lists them all): with 50 sessions a
page, the default answer stays far below 256 KiB at any size."""
_LISTED_PROBLEMS = 3
_PROBLEM_CHARS = 200
_MAX_ANSWER_BYTES = 224 * 1024
"""A list answer ends its page early (its ``next_cursor`` continues) rather than grow past this:
every answer stays under 256 KiB however long the ids, agents or problems it shows."""
_FRESH_PASS_S = 5.0
"""A list asks the keeper for a pass when its last one is older (runs other writers added or deleted)."""


def _bad(message: str) -> ApiError:
    return ApiError(400, "bad_parameter", message)


def _text(args: Mapping[str, str], name: str) -> str | None:
    value = args.get(name, "")
    if len(value) > _MAX_TEXT:
        raise _bad(f"{name} has at most {_MAX_TEXT} characters")
    if "\x00" in value:
        raise _bad(f"{name} holds a NUL character")
    return value or None


def _choice(args: Mapping[str, str], name: str, choices: Iterable[str], default: str | None = None) -> str | None:
    choices = tuple(choices)
    value = args.get(name) or default
    if value is not None and value not in choices:
        raise _bad(f"{name} must be one of {', '.join(choices)}")
    return value


def _int(args: Mapping[str, str], name: str, default: int, maximum: int, minimum: int = 0) -> int:
    raw = args.get(name) or str(default)
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or not minimum <= int(raw) <= maximum:
        raise _bad(f"{name} must be an integer from {minimum} to {maximum}")
    return int(raw)


def _time(args: Mapping[str, str], name: str) -> str | None:
    value = args.get(name) or None
    try:
        return time_prefix(name, value) if value else None
    except BadQuery as exc:
        raise _bad(str(exc)) from None


def _labels(args: Mapping[str, str]) -> dict[str, Any]:
    """``tag`` (repeatable), ``meta.KEY=VALUE``, ``score=NAME`` (repeatable) and ``score.NAME=VALUE``
    as the query's ``tags``, ``metadata`` and ``scores`` (None: no such filter)."""
    many = getattr(args, "getlist", lambda name: [args[name]] if name in args else [])
    tags = [value for value in many("tag") if value]
    metadata = [(name[len(_META):], value) for name, value in args.items() if name.startswith(_META) and value]
    scores: list[tuple[str, str | None]] = [(name, None) for name in many("score") if name]
    scores += [(name[len(_SCORE):], value) for name, value in args.items() if name.startswith(_SCORE) and value]
    for name, value in [("tag", tag) for tag in tags] + metadata + [(name, value or "") for name, value in scores]:
        if len(name) > _MAX_TEXT or len(value) > _MAX_TEXT or "\x00" in name + value:
            raise _bad(f"a tag, meta or score filter has at most {_MAX_TEXT} characters and no NUL")
    return {"tags": tuple(tags) or None, "metadata": tuple(metadata) or None, "scores": tuple(scores) or None}


def run_query(args: Mapping[str, str], *, scope: Scope | None = None) -> RunQuery:
    """The catalog query of one list request's parameters; ApiError 400 on any bad value."""
    status = _choice(args, "status", STATUSES)
    return RunQuery(
        search=_text(args, "q"),
        status=StatusFilter(status) if status else None,
        agent=_text(args, "agent"),
        service=_text(args, "service"),
        kind=_choice(args, "kind", ("live", "eval")),
        eval_id=_text(args, "eval_id"),
        scope=scope,
        since=_time(args, "since"),
        until=_time(args, "until"),
        problem=Problem(problem) if (problem := _choice(args, "problem", [item.value for item in Problem])) else None,
        **_labels(args),
        sort=SortKey(_choice(args, "sort", SORT_KEYS, "created_at")),
        order=Order(_choice(args, "order", ("asc", "desc"), "desc")),
        limit=_int(args, "limit", _DEFAULT_LIMIT, _MAX_LIMIT, minimum=1),
        cursor=args.get("cursor") or None,
        offset=_int(args, "offset", 0, 10**9),
    )


def _entry(row: RunRow) -> dict[str, Any]:
    """A run as a list shows it: its first problems only (``problem_count`` says how many), each
    message cut at 200 characters."""
    entry = row.as_json()
    entry["problem_count"] = len(row.problems)
    entry["problems"] = [{**problem, "message": str(problem.get("message", ""))[:_PROBLEM_CHARS]}
                         for problem in row.problems[:_LISTED_PROBLEMS]]
    return entry


def _completed(catalog: SqlCatalog, root: Path, page: SessionsPage) -> SessionsPage:
    """The sessions page with every run's pending figures counted (``catalog.complete_rows``)."""
    rows = complete_rows(catalog, root, [row for group in page.sessions for row in group.runs])
    groups, start = [], 0
    for group in page.sessions:
        groups.append(replace(group, runs=rows[start : start + len(group.runs)]))
        start += len(group.runs)
    return replace(page, sessions=groups)


def _within_budget(items: list[Any], entry: Any) -> tuple[list[dict[str, Any]], bool]:
    """The entries of ``items`` (``entry(item)``) that fit the answer's byte budget; whether all did."""
    entries: list[dict[str, Any]] = []
    size = 0
    for item in items:
        made = entry(item)
        size += len(orjson.dumps(made)) + 1
        if size > _MAX_ANSWER_BYTES and entries:
            return entries, False
        entries.append(made)
    return entries, True


class Listing:
    """The lists of one bundle root, from its catalog (kept by a background keeper), else a scan."""

    def __init__(self, root: str | Path, url: str | None = None, *, keeper_interval_s: float = 30.0) -> None:
        self.root = Path(root)
        self.catalog: SqlCatalog | None = None
        self.keeper: CatalogKeeper | None = None
        self.problem: str | None = None
        """Why lists come from a scan (None while the catalog answers)."""
        self._lock = threading.Lock()
        self._last_pass_asked = time.monotonic()
        try:
            self.catalog = open_catalog(self.root, url)
        except CatalogError as exc:
            self._unusable(exc)
        else:
            if self.catalog is None:
                self.problem = "the catalog is turned off ($OTEL_SESSION_CATALOG=off)"
            else:
                self.keeper = CatalogKeeper(self.catalog, self.root, interval_s=keeper_interval_s).start()
                if self.catalog.rebuilt:
                    logger.info("catalog: new at %s; indexing the bundles under %s in the background",
                                self.catalog.url, self.root)

    def _unusable(self, exc: CatalogError) -> None:
        if self.problem is None:
            logger.warning("catalog: unusable (%s); lists scan the bundles instead", exc)
        self.problem = f"the catalog is unusable ({exc}); this list was made by reading every bundle"

    def _ready(self) -> None:
        """Before a list: the first pass over a new catalog is waited for (briefly); a stale one asked for."""
        if self.keeper is None:
            return
        if self.catalog is not None and self.catalog.rebuilt:
            self.keeper.first_pass.wait(30.0)
        now = time.monotonic()
        if now - self._last_pass_asked > _FRESH_PASS_S:
            self._last_pass_asked = now
            self.keeper.pass_now()

    def _answer(self, ask: Any) -> tuple[Any, str | None]:
        """``ask(catalog)`` on the catalog, else on a catalog made by a scan, with the warning."""
        self._ready()
        failure = self.keeper.failure if self.keeper is not None else None
        if failure is None and self.catalog is not None:
            failure = self.catalog.no_room()
        if self.catalog is not None and self.problem is None and failure is None:
            try:
                complete_pending(self.catalog, self.root)  # runs sealed since the last pass: filters and sorts see them
                return ask(self.catalog), None
            except BadQuery as exc:
                raise _bad(str(exc)) from None
            except CatalogError as exc:
                self._unusable(exc)
        warning = self.problem or (f"the catalog cannot be kept up to date ({failure}); this list was made by "
                                   "reading every bundle")
        scanned = scan_catalog(self.root)
        try:
            return ask(scanned), warning
        except BadQuery as exc:
            raise _bad(str(exc)) from None
        finally:
            scanned.close()

    def runs(self, query: RunQuery) -> dict[str, Any]:
        (page, rows, facets), warning = self._answer(lambda catalog: (
            page := catalog.page(query), complete_rows(catalog, self.root, page.rows), catalog.facets()))
        entries, whole = _within_budget(rows, _entry)
        next_cursor = page.next_cursor if whole else row_cursor(query.sort, query.order, page.rows[len(entries) - 1])
        answer = {"runs": entries, "next_cursor": next_cursor, "total": page.total, "total_exact": page.total_exact,
                  "offset": query.offset if query.cursor is None else None, "limit": query.limit, "facets": facets}
        return {**answer, "warning": warning} if warning else answer

    def sessions(self, query: RunQuery) -> dict[str, Any]:
        page, warning = self._answer(lambda catalog: _completed(catalog, self.root, catalog.sessions_page(
            query, runs_per_session=_RUNS_PER_SESSION)))
        listed, whole = _within_budget(page.sessions, lambda group: {
            "session_id": group.session_id, "directory": group.directory, "run_count": group.run_count,
            "newest_created_at": group.newest_created_at, "runs": [_entry(row) for row in group.runs]})
        next_cursor = page.next_cursor if whole else session_cursor(page.sessions[len(listed) - 1])
        answer = {"sessions": listed, "next_cursor": next_cursor, "limit": query.limit}
        return {**answer, "warning": warning} if warning else answer

    def fleet(self, query: RunQuery, *, limit: int) -> tuple[list[dict[str, Any]], bool, str | None]:
        """What the dashboard aggregates (``SqlCatalog.fleet``), with the scan's warning if any."""
        (found, cut), warning = self._answer(lambda catalog: catalog.fleet(query, limit=limit))
        return found, cut, warning

    def rows(self, run_paths: list[Path]) -> dict[Path, RunRow]:
        """The rows of a few runs (one session's): from the catalog where their bundles are unchanged,
        else read now (and written back) as the keeper reads them (``rows.sealed_row``: a sealed
        run's records a row counts, not its whole parsed journal: 1.5 GB at 1M records)."""
        fetched = self.root / FETCHED_DIR  # copies of other roots' stored runs: read, never written as ours
        found: dict[Path, RunRow] = {path: sealed_row(fetched, path) for path in run_paths if path.is_relative_to(fetched)}
        relative = {path: path.relative_to(self.root).as_posix() for path in run_paths if path not in found}
        known = {}
        if self.catalog is not None and self.problem is None:
            try:
                known = self.catalog.rows(list(relative.values()))
            except CatalogError as exc:
                self._unusable(exc)
        fresh: list[RunRow] = []
        for path, key in relative.items():
            row = known.get(key)
            if row is None or row.stamp != bundle_stamp(path):
                row = sealed_row(self.root, path)
                fresh.append(row)
            found[path] = row
        if fresh and self.catalog is not None and self.problem is None:
            try:
                self.catalog.upsert_sealed(fresh)
            except CatalogError as exc:  # rows not kept (a full disk): they are answered all the same
                logger.warning("catalog: %d row(s) not written: %s", len(fresh), exc)
        return found

    def stored_paths(self, session_id: str) -> list[str]:
        """The paths of a session's stored runs, every origin's (``[]`` without a usable catalog)."""
        if self.catalog is None or self.problem is not None:
            return []
        try:
            return self.catalog.stored_paths(session_id)
        except CatalogError as exc:
            logger.warning("catalog: cannot look up stored runs of a session: %s", exc)
            return []

    def feedback_changed(self, run_path: Path, count: int, mean: float | None) -> None:
        self._ready()  # a first pass still reading the bundle would write the row back without it
        if self.catalog is not None and self.problem is None:
            try:
                self.catalog.set_feedback(run_path.relative_to(self.root).as_posix(), count, mean)
            except CatalogError as exc:
                self._unusable(exc)

    def close(self) -> None:
        if self.keeper is not None:
            self.keeper.stop()
        if self.catalog is not None:
            self.catalog.close()
