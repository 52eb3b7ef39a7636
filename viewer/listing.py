"""The runs list: filter, sort and page run summaries (``GET /api/runs``).

Contract::

    query = RunQuery.from_args(request.args)         # ApiError 400 on a bad value
    page = select_runs(summaries, query, score=fn)   # {"total", "offset", "limit", "runs", "facets"}

``runs`` are the selected summaries as given (the caller makes them public); ``score(run)`` is
asked only when sorting by feedback.

Filters (all optional, combined with AND): ``q`` (case-insensitive substring of the session id,
run id, eval id, agent or message text), ``status`` (``ok``/``error``/``interrupted``/``running``,
or ``capture_failed`` for a failed capture or an invalid bundle), ``agent``, ``service``, ``kind``
(``live``/``eval``), ``eval_id``, ``since`` / ``until`` (``created_at`` from / before, RFC 3339
prefixes such as ``2026-11-30T10:00``). ``sort`` is one of :data:`SORT_KEYS` (default
``created_at``), ``order`` ``asc``/``desc`` (default ``desc``); ``offset``/``limit`` page the result
(limit at most 500). Missing values sort last in either order. ``facets`` lists the agents,
services and eval ids over all runs, for the filter menus.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from .errors import ApiError

__all__ = ["SORT_KEYS", "STATUSES", "RunQuery", "select_runs"]

STATUSES = ("ok", "error", "interrupted", "running", "capture_failed")
SORT_KEYS = (
    "created_at", "session_id", "agent", "service", "status", "duration_ms",
    "turns", "model_calls", "tokens", "feedback", "event_count",
)
_DEFAULT_LIMIT = 50
_MAX_LIMIT = 500
_MAX_TEXT = 200
_FACETS = ("agent", "service", "eval_id")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}(:\d{2}(:\d{2}(\.\d{1,9})?)?)?Z?)?")

Score = Callable[[dict[str, Any]], dict[str, Any] | None]


def _text_arg(args: Mapping[str, str], name: str) -> str | None:
    value = args.get(name, "")
    if len(value) > _MAX_TEXT:
        raise ApiError(400, "bad_parameter", f"{name} has at most {_MAX_TEXT} characters")
    return value or None


def _choice(args: Mapping[str, str], name: str, choices: Iterable[str], default: str | None = None) -> str | None:
    value = args.get(name) or default
    if value is not None and value not in choices:
        raise ApiError(400, "bad_parameter", f"{name} must be one of {', '.join(choices)}")
    return value


def _int(args: Mapping[str, str], name: str, default: int, maximum: int) -> int:
    raw = args.get(name) or str(default)
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) > maximum:
        raise ApiError(400, "bad_parameter", f"{name} must be an integer from 0 to {maximum}")
    return int(raw)


def _time(args: Mapping[str, str], name: str) -> str | None:
    value = args.get(name) or None
    if value is not None and not _TIME.fullmatch(value):
        raise ApiError(400, "bad_parameter", f"{name} must be an RFC 3339 UTC time such as 2026-11-30T10:00")
    return value.rstrip("Z") if value else None


@dataclass(frozen=True)
class RunQuery:
    """One request's filters, order and page."""

    q: str | None = None
    status: str | None = None
    agent: str | None = None
    service: str | None = None
    kind: str | None = None
    eval_id: str | None = None
    since: str | None = None
    until: str | None = None
    sort: str = "created_at"
    order: str = "desc"
    offset: int = 0
    limit: int = _DEFAULT_LIMIT

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> RunQuery:
        limit = _int(args, "limit", _DEFAULT_LIMIT, _MAX_LIMIT)
        if limit == 0:
            raise ApiError(400, "bad_parameter", f"limit must be an integer from 1 to {_MAX_LIMIT}")
        q = _text_arg(args, "q")
        return cls(
            q=q.lower() if q else None,
            status=_choice(args, "status", STATUSES),
            agent=_text_arg(args, "agent"),
            service=_text_arg(args, "service"),
            kind=_choice(args, "kind", ("live", "eval")),
            eval_id=_text_arg(args, "eval_id"),
            since=_time(args, "since"),
            until=_time(args, "until"),
            sort=_choice(args, "sort", SORT_KEYS, "created_at") or "created_at",
            order=_choice(args, "order", ("asc", "desc"), "desc") or "desc",
            offset=_int(args, "offset", 0, 10**9),
            limit=limit,
        )

    def predicates(self) -> list[Callable[[dict[str, Any]], bool]]:
        """One test per filter given (none: every run is selected without a call)."""
        tests: list[Callable[[dict[str, Any]], bool]] = []
        if self.status == "capture_failed":
            tests.append(lambda run: run.get("capture_status") == "failed" or run.get("integrity") == "invalid")
        elif self.status is not None:
            tests.append(lambda run, status=self.status: run.get("status") == status)
        for name in ("agent", "service", "kind", "eval_id"):
            wanted = getattr(self, name)
            if wanted is not None:
                tests.append(lambda run, name=name, wanted=wanted: run.get(name) == wanted)
        if self.since is not None:
            tests.append(lambda run, since=self.since: (run.get("created_at") or "") >= since)
        if self.until is not None:
            tests.append(lambda run, until=self.until: (run.get("created_at") or "") < until)
        if self.q is not None:
            tests.append(self._has_text)
        return tests

    def _has_text(self, run: dict[str, Any]) -> bool:
        q = self.q or ""
        for value in (run["session_id"], run["run_id"], run.get("eval_id"), run.get("agent")):
            if value and q in value.lower():
                return True
        return q in run.get("search_text", "")


def _sort_value(run: dict[str, Any], key: str) -> Any:
    if key == "tokens":
        counts = [run.get("input_tokens"), run.get("output_tokens")]
        return None if counts == [None, None] else sum(count or 0 for count in counts)
    if key == "feedback":
        return (run.get("feedback") or {}).get("mean")
    return run.get(key)


def select_runs(summaries: Iterable[dict[str, Any]], query: RunQuery, *, score: Score) -> dict[str, Any]:
    """The page of runs that ``query`` selects, and the facets."""
    runs = list(summaries)
    facets = {name: {value for run in runs if isinstance(value := run.get(name), str)} for name in _FACETS}
    tests = query.predicates()
    selected = [run for run in runs if all(test(run) for test in tests)] if tests else runs
    if query.sort == "feedback":
        selected = [{**run, "feedback": score(run)} for run in selected]
    descending = query.order == "desc"
    selected.sort(key=itemgetter("created_at", "run_id"), reverse=descending)
    if query.sort == "created_at":
        ordered = selected
    else:  # a second, stable sort: runs with a value in the requested order, the ones without last
        keyed = [(_sort_value(run, query.sort), run) for run in selected]
        present = [pair for pair in keyed if pair[0] is not None]
        present.sort(key=lambda pair: pair[0], reverse=descending)
        ordered = [run for _, run in present] + [run for value, run in keyed if value is None]
    page = ordered[query.offset : query.offset + query.limit]
    return {
        "total": len(ordered), "offset": query.offset, "limit": query.limit, "runs": page,
        "facets": {name: sorted(values) for name, values in facets.items()},
    }
