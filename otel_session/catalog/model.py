"""What the catalog holds and answers: one row per run, list queries, pages (SPEC §5.6).

Contract::

    row = RunRow(path="sessions/call-42/run-…", session_id=..., ...)   # rows.row_of(bundle) builds one
    row.as_json()                                                      # the public listing entry
    query = RunQuery(agent="booking", sort=SortKey.TURNS, limit=50)     # filters AND-ed, keyset-paged
    page = catalog.page(query)                                         # -> Page(rows, next_cursor, total)

A row's ``origin`` (which root) and ``path`` (the run directory relative to that root, POSIX) are
its key: the same run id under
two session directories (a copied bundle) is two rows, and a directory deleted by hand names the
row to drop. Values are what the bundle says (ids as stored: redacted where they held PII).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "BadQuery", "Catalog", "CatalogError", "CatalogUnavailable", "Known", "Order", "Page", "RunQuery", "RunRow", "Scope",
    "SessionGroup", "SessionsPage", "SortKey", "StatusFilter", "time_prefix",
]

_TIME_PREFIX = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}(:\d{2}(:\d{2}(\.\d{1,9})?)?)?Z?)?")


def time_prefix(name: str, value: str) -> str:
    """``value`` as a ``created_at`` bound (an RFC 3339 UTC prefix such as ``2026-11-30T10:00``);
    :class:`BadQuery` naming ``name`` otherwise."""
    if not _TIME_PREFIX.fullmatch(value):
        raise BadQuery(f"{name} must be an RFC 3339 UTC time such as 2026-11-30T10:00")
    return value.rstrip("Z")


class CatalogError(Exception):
    """The catalog cannot answer (the caller falls back to a scan of the bundles)."""


class CatalogUnavailable(CatalogError):
    """The catalog's database cannot be opened, read or written (full disk, read-only, locked)."""


class BadQuery(CatalogError, ValueError):
    """A query parameter no list accepts (a forged cursor, an unknown sort key); one line, no SQL."""


class Scope(str, Enum):
    """Where a run lives: the live index (``sessions/``) or an eval (``evals/<id>/sessions/``)."""

    LIVE = "live"
    EVAL = "eval"


class StatusFilter(str, Enum):
    """``status=``: a run's outcome, or ``capture_failed`` (a failed capture or an invalid bundle)."""

    OK = "ok"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    RUNNING = "running"
    CAPTURE_FAILED = "capture_failed"


class Problem(str, Enum):
    """``problem=``: runs with one kind of trouble (the dashboard's shares link to them)."""

    REPEATED_ASK = "repeated_ask"
    BLOCKED_GUARD = "blocked_guard"
    TOOL_ERROR = "tool_error"
    INTEGRITY_FAILED = "integrity_failed"


class Order(str, Enum):
    ASC = "asc"
    DESC = "desc"


class SortKey(str, Enum):
    """The columns a list sorts by; runs without a value sort last in either order."""

    CREATED_AT = "created_at"
    FINISHED_AT = "finished_at"
    SESSION_ID = "session_id"
    AGENT = "agent"
    SERVICE = "service"
    STATUS = "status"
    DURATION_MS = "duration_ms"
    TURNS = "turns"
    MESSAGES = "messages"
    MODEL_CALLS = "model_calls"
    TOOL_CALLS = "tool_calls"
    TOOL_ERRORS = "tool_errors"
    GUARDS_BLOCKED = "guards_blocked"
    REPEATED_ASKS = "repeated_asks"
    TOKENS = "tokens"
    LATENCY_P50_MS = "latency_p50_ms"
    LATENCY_P95_MS = "latency_p95_ms"
    FEEDBACK = "feedback"
    EVENT_COUNT = "event_count"


@dataclass(frozen=True)
class RunRow:
    """One run as listed. Counts are of the run's own records; ``None`` where the run says nothing."""

    path: str
    """The run directory relative to the root (the row's key)."""
    directory: str
    """Its session directory relative to the root (``sessions/<name>``, ``evals/<id>/sessions/<name>``)."""
    scope: Scope
    session_id: str | None
    run_id: str
    kind: str
    created_at: str
    eval_id: str | None = None
    agent: str | None = None
    service: str | None = None
    capture_status: str | None = None
    integrity: str = "recording"
    status: str = "running"
    started_at: str | None = None
    finished_at: str | None = None
    duration_ms: float | None = None
    event_count: int = 0
    turns: int = 0
    messages: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    guards_blocked: int = 0
    repeated_asks: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    models: tuple[str, ...] = ()
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    turn_p50_ms: float | None = None
    turn_p95_ms: float | None = None
    """Turn time p50/p95: a recorded turn's start → finish; with no turn records, a user message →
    the last reply before the next one."""
    usage_by_model: tuple[tuple[str, int, int | None, int | None, int | None], ...] = ()
    """``(model, calls, input_tokens, output_tokens, cached_input_tokens)`` per model (cost by model)."""
    problems: tuple[dict[str, Any], ...] = ()
    """``{kind, message, seq?}``: what went wrong (at most 20)."""
    diagnostics: tuple[str, ...] = ()
    """The reader's diagnostic codes (``verify``), each once."""
    feedback_count: int = 0
    feedback_mean: float | None = None
    search_text: str = ""
    """Lower-cased message text (capped), for ``search`` only; never answered."""
    stamp: str = ""
    """The bundle files' sizes and times when the row was made: a pass re-reads a bundle whose
    stamp changed (a bundle edited or replaced by hand)."""
    location: str | None = None
    """Where the sealed bundle is stored (``s3://bucket/key``) once uploaded; None while it lives
    only in its root. A pass never drops a stored run's row because its local copy is gone."""
    origin: str = ""
    """Which bundle root holds the run (``catalog.sql.catalog_origin``): ``""`` for the root the
    catalog lives in, ``<host>:<root>`` (or ``$OTEL_SESSION_ORIGIN``) in a shared catalog."""
    tags: tuple[str, ...] = ()
    """The tags the app gave the run (``run_started.payload.tags``: ``normalize.labels``), sorted."""
    metadata: tuple[tuple[str, str], ...] = ()
    """``(key, value)`` the app gave the run (``run_started.payload.metadata``), sorted by key."""
    scores: tuple[tuple[str, str, int, float | None], ...] = ()
    """``(name, last value as text, count, mean)`` of the run's evaluation scores (``feedback.ndjson``);
    the mean of numbers and booleans (true is 1), None for categories."""

    @property
    def figures_pending(self) -> bool:
        """Written by the writer's hook (as the run opened, or sealed): its counts are not read yet."""
        return self.stamp == ""

    @property
    def tokens(self) -> int | None:
        counts = (self.input_tokens, self.output_tokens)
        return None if counts == (None, None) else sum(count or 0 for count in counts)

    @property
    def session_key(self) -> str:
        """The session id, or the directory when ``run.json`` cannot say."""
        return self.session_id if self.session_id is not None else f"{self.directory}/ (run.json missing or invalid)"

    def as_json(self) -> dict[str, Any]:
        """The public entry: every field but the search text and the stamp; feedback as ``{count, mean}``."""
        entry = dict(self.__dict__)  # the fields (``asdict``'s deep copy cost a listing 0.2 ms a row)
        for private in ("search_text", "stamp", "feedback_count", "feedback_mean"):
            entry.pop(private)
        entry["scope"] = self.scope.value
        entry["models"] = list(self.models)
        entry["usage_by_model"] = [list(usage) for usage in self.usage_by_model]
        entry["problems"] = [dict(problem) for problem in self.problems]
        entry["diagnostics"] = list(self.diagnostics)
        entry["ended_at"] = self.finished_at
        entry["tokens"] = self.tokens
        entry["feedback"] = {"count": self.feedback_count, "mean": self.feedback_mean} if self.feedback_count else None
        entry["tags"] = list(self.tags)
        entry["metadata"] = dict(self.metadata)
        entry["scores"] = {name: {"last": last, "count": count, "mean": mean} for name, last, count, mean in self.scores}
        return entry


@dataclass(frozen=True)
class RunQuery:
    """One list request: filters (AND-ed; ``None`` is no filter), order and page.

    ``cursor`` continues after the last row of a previous page of the same filters and order (a
    keyset: stable while runs arrive); ``offset`` skips rows instead (kept for old clients)."""

    search: str | None = None
    status: StatusFilter | None = None
    agent: str | None = None
    service: str | None = None
    kind: str | None = None
    eval_id: str | None = None
    scope: Scope | None = None
    session_id: str | None = None
    since: str | None = None
    until: str | None = None
    problem: Problem | None = None
    tags: tuple[str, ...] | None = None
    """Runs with every one of these tags."""
    metadata: tuple[tuple[str, str], ...] | None = None
    """Runs whose metadata has every one of these ``(key, value)``."""
    scores: tuple[tuple[str, str | None], ...] | None = None
    """Runs with a score of each name; its last value equal to the text given, when one is."""
    sort: SortKey = SortKey.CREATED_AT
    order: Order = Order.DESC
    limit: int = 50
    cursor: str | None = None
    offset: int = 0
    with_total: bool = True

    @property
    def filtered(self) -> bool:
        """Whether any filter narrows the runs (beyond the scope)."""
        return any(getattr(self, name) is not None for name in
                   ("search", "status", "agent", "service", "kind", "eval_id", "session_id", "since", "until",
                    "problem", "tags", "metadata", "scores"))


TOTAL_CAP = 10_000
"""A list's ``total`` is exact up to this many runs, and "at least this many" past it."""


@dataclass(frozen=True)
class Page:
    rows: list[RunRow]
    next_cursor: str | None
    """Continue after this page; None when it is the last."""
    total: int | None = None
    """Rows the filters select (when asked for), counted up to :data:`TOTAL_CAP`."""
    total_exact: bool = True
    """False when more rows than :data:`TOTAL_CAP` are selected: then ``total`` is the cap, a lower
    bound ("10,000+"). Counting every row of a large set costs a scan of it on every page (in
    PostgreSQL ten times SQLite's); a count that stops at the cap costs at most the cap's rows."""


@dataclass(frozen=True)
class SessionGroup:
    directory: str
    session_id: str | None
    newest_created_at: str
    run_count: int
    runs: list[RunRow] = field(default_factory=list)
    """The newest of its runs (that the filters select), at most ``runs_per_session``."""


@dataclass(frozen=True)
class SessionsPage:
    sessions: list[SessionGroup]
    next_cursor: str | None


@dataclass(frozen=True)
class Known:
    """What the catalog holds of one run, for a pass to compare with its bundle."""

    stamp: str
    capture_status: str | None
    location: str | None = None


class Catalog(Protocol):
    """The run catalog. Every method raises :class:`CatalogUnavailable` when its database fails,
    :class:`BadQuery` for a query no list accepts; nothing else."""

    def upsert_opened(self, rows: Iterable[RunRow]) -> None:
        """Add runs that just opened; a row already there (a run continued after a crash) stays."""

    def upsert_sealed(self, rows: Iterable[RunRow]) -> None:
        """Write runs' rows as their bundles read now (sealed, or found by a pass), replacing any."""

    def write(self, *, opened: list[RunRow] = (), sealed: list[RunRow] = (),  # type: ignore[assignment]
              recount_sealed: bool = True) -> None:
        """Both upserts in one transaction (the writer hook's, once a writer pass)."""

    def remove(self, paths: Iterable[str]) -> int:
        """Drop the rows of these run paths (bundles deleted); how many were there."""

    def clear(self) -> None:
        """Forget every row."""

    def remove_missing(self, present: Iterable[str]) -> int:
        """Drop every row whose path is not in ``present`` (the run directories a full pass found)."""

    def known(self) -> dict[str, Known]:
        """Every row's path with its stamp and capture status."""

    def pending(self, limit: int) -> list[str]:
        """Paths of rows whose figures the writer's hook left to count (at most ``limit``)."""

    def rows(self, paths: list[str]) -> dict[str, RunRow]:
        """The rows of these run paths (those it holds)."""

    def set_feedback(self, path: str, count: int, mean: float | None) -> None:
        """A run's feedback changed (the viewer appended a record)."""

    def set_location(self, path: str, location: str) -> bool:
        """A sealed run was stored (``bundle.upload``): where it is now; False when it has no row."""

    def page(self, query: RunQuery) -> Page:
        """One page of runs: filtered, sorted, after ``query.cursor``."""

    def sessions_page(self, query: RunQuery, *, runs_per_session: int = 20) -> SessionsPage:
        """One page of sessions (newest run first) that hold a run the filters select, each with
        its newest such runs."""

    def facets(self) -> dict[str, list[str]]:
        """The agents, services and eval ids of every run, for filter menus."""

    def rebuild(self, root: Path) -> int:
        """Forget every row and index every bundle under ``root`` again; how many runs."""

    def close(self) -> None:
        """Release connections (idempotent)."""
