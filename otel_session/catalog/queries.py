"""The catalog's list statements (SQLAlchemy Core), every value a query gives a named bound parameter.

Contract::

    conditions = run_filters(query)                       # a list's filters, AND-ed by the caller
    statement = sessions_groups(query)                    # a sessions page's sessions, newest first (one more than asked)
    statement = sessions_runs(query, directories, 20)     # those sessions' newest runs the filters select
    statement = pending_paths(origin, limit)              # an origin's rows whose figures are not counted yet

A statement's text depends only on its query's shape (``shapes``), its values being parameters named in
``shapes.BOUND``: ``statements`` stores the SQLite text of these for ``direct``, which runs it with
the standard library; ``sql.SqlCatalog`` runs them through SQLAlchemy. One source of the SQL for both.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, Select, Text, and_, bindparam, func, or_, select, true

from .columns import FIELDS
from .labels import label_filters
from .model import Problem, RunQuery, StatusFilter
from .schema import PENDING, runs, sessions
from .shapes import LIKE_ESCAPE, bound_values, cursor_values

__all__ = ["pending_paths", "run_filters", "sessions_groups", "sessions_runs"]

_PROBLEMS = {
    Problem.REPEATED_ASK: runs.c.repeated_asks > 0,
    Problem.BLOCKED_GUARD: runs.c.guards_blocked > 0,
    Problem.TOOL_ERROR: runs.c.tool_errors > 0,
    Problem.INTEGRITY_FAILED: runs.c.integrity.in_(("invalid", "failed")),
}
_SEARCHED = ("session_id", "run_id", "eval_id", "agent", "search_text")


def _bound(name: str, value: Any, column: Any) -> Any:
    return bindparam(name, value, type_=column.type)


def run_filters(query: RunQuery) -> list[Any]:
    """The WHERE terms of ``query``'s filters (``shapes.bound_values`` names their values)."""
    values = bound_values(query)
    conditions: list[Any] = []
    if query.status is StatusFilter.CAPTURE_FAILED:
        conditions.append(or_(runs.c.capture_status == "failed", runs.c.integrity == "invalid"))
    elif "status" in values:
        conditions.append(runs.c.status == _bound("status", values["status"], runs.c.status))
    for name in ("agent", "service", "kind", "eval_id", "session_id", "scope"):
        if name in values:
            conditions.append(runs.c[name] == _bound(name, values[name], runs.c[name]))
    if "since" in values:
        conditions.append(runs.c.created_at >= _bound("since", values["since"], runs.c.created_at))
    if "until" in values:
        conditions.append(runs.c.created_at < _bound("until", values["until"], runs.c.created_at))
    if query.problem is not None:
        conditions.append(_PROBLEMS[query.problem])
    conditions.extend(label_filters(query, runs.c.tags, runs.c["metadata"], runs.c.scores))
    if "search" in values:
        pattern = bindparam("search", values["search"], type_=Text())
        conditions.append(or_(*(runs.c[name].icontains(pattern, escape=LIKE_ESCAPE) for name in _SEARCHED)))
    return conditions


def sessions_groups(query: RunQuery) -> Select[Any]:
    """``(directory, session_id, newest_created_at, run_count)`` of the sessions holding a run the
    filters select (the ``sessions`` table when only the scope is asked), newest first, after the
    cursor, ``query.limit + 1`` of them (the last says whether more follow)."""
    if query.filtered:
        source = (select(runs.c.directory, func.max(runs.c.session_id).label("session_id"),
                         func.max(runs.c.created_at).label("newest_created_at"), func.count().label("run_count"))
                  .where(*run_filters(query)).group_by(runs.c.directory).subquery())
    else:
        source = (select(sessions.c.directory, sessions.c.session_id, sessions.c.newest_created_at, sessions.c.run_count)
                  .where(sessions.c.scope == _bound("scope", query.scope.value, sessions.c.scope) if query.scope else true())
                  .subquery())
    statement = select(source)
    cursor = cursor_values(query)
    if cursor:
        newest = _bound("cursor_newest", cursor["cursor_newest"], sessions.c.newest_created_at)
        statement = statement.where(or_(source.c.newest_created_at < newest, and_(
            source.c.newest_created_at == newest,
            source.c.directory < _bound("cursor_directory", cursor["cursor_directory"], sessions.c.directory))))
    return (statement.order_by(source.c.newest_created_at.desc(), source.c.directory.desc())
            .limit(bindparam("limit", query.limit + 1, type_=Integer())))


def sessions_runs(query: RunQuery, directories: list[str], runs_per_session: int) -> Select[Any]:
    """The newest ``runs_per_session`` runs (every column) of each of ``directories`` that the
    filters select, by directory, newest first."""
    numbered = (select(runs, func.row_number().over(partition_by=runs.c.directory,
                                                     order_by=(runs.c.created_at.desc(), runs.c.path.desc())).label("rank"))
                .where(runs.c.directory.in_(bindparam("directories", directories, expanding=True)), *run_filters(query))
                .subquery())
    return (select(*(numbered.c[name] for name in FIELDS))
            .where(numbered.c.rank <= bindparam("runs_per_session", runs_per_session, type_=Integer()))
            .order_by(numbered.c.directory, numbered.c.rank))


def pending_paths(origin: str, limit: int) -> Select[Any]:
    """Paths of ``origin``'s rows whose figures are pending (at most ``limit``). The origin as an
    expression, not the column: the planner then reads the partial index ``runs_pending`` (the few
    pending rows) rather than the key's ``origin`` prefix (every row of this origin: 190 ms a list at
    100k runs in SQLite, which has no statistics to know better)."""
    return (select(runs.c.path).where(runs.c.origin.concat("") == _bound("origin", origin, runs.c.origin), PENDING)
            .limit(bindparam("limit", limit, type_=Integer())))
