"""A warm SQLite catalog is listed with the standard library from the statements SQLAlchemy compiled
and stored in it (``catalog.direct``): the same pages, and SQLAlchemy's answer whenever the stored
statements cannot give it (``test_cli``: a fresh ``otel-session sessions`` then imports no SQLAlchemy)."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from otel_session.bundle.write import BundleWriter
from otel_session.catalog import (
    BadQuery, Order, Problem, RunQuery, Scope, SortKey, SqlCatalog, StatusFilter, open_catalog,
)
from otel_session.catalog.cursor import encode_cursor
from otel_session.catalog.direct import direct_sessions_page
from otel_session.catalog.sync import complete_pending
from otel_session.cli import main
from otel_session.core.journal import format_timestamp

from .conftest import BASE_NS, Script, new_run_id

pytestmark = pytest.mark.sqlite_only

_AGENTS = ("booking", "sup_port", "100%")
"""``_`` and ``%`` are LIKE's wildcards: a search for them must find them only."""


def _write(writer: BundleWriter, number: int, *, session: str, kind: str = "live", eval_id: str | None = None) -> None:
    at_ns = BASE_NS + number * 10**9
    run = writer.open_run(session_id=session, run_id=new_run_id(), agent=_AGENTS[number % 3], kind=kind, eval_id=eval_id,
                          created_at_ns=at_ns)
    script = Script(run, at_ns)
    script("run_started", {"kind": kind})
    script("turn_started", {"state": "greet"}, turn_index=0)
    script.message("user", "u0", f"Table for {number % 5} at NOON_{number}", turn=0)
    script("tool_execution_started", {"name": "lookup", "arguments": {}}, turn_index=0, tool_call_id="t0")
    script("tool_execution_finished", {"status": "error" if number % 4 == 0 else "ok"}, turn_index=0, tool_call_id="t0")
    script("turn_finished", {"state": "done"}, turn_index=0)
    script("run_finished", {"status": "error" if number % 7 == 0 else "ok"})
    run.close()


@pytest.fixture
def warm(root: Path, writer: BundleWriter, catalog: SqlCatalog) -> Path:
    """30 sessions of 2 runs (agents, outcomes and message texts varied; one capture failed), an
    eval's runs, every row's figures counted (as a list through SQLAlchemy leaves them)."""
    for number in range(60):
        _write(writer, number, session=f"call-{number % 30}")
    for number in range(60, 64):
        _write(writer, number, session=f"call-{number % 3}", kind="eval", eval_id="nightly")
    assert writer.force_flush(30_000)
    failed = next((root / "sessions" / "call-5").iterdir()) / "capture.json"  # a capture that failed
    failed.write_bytes(failed.read_bytes().replace(b'"complete"', b'"failed"'))
    complete_pending(catalog, root)
    return root


_QUERIES = [
    RunQuery(scope=Scope.LIVE),
    RunQuery(),
    RunQuery(scope=Scope.LIVE, agent="sup_port"),
    RunQuery(scope=Scope.LIVE, status=StatusFilter.ERROR),
    RunQuery(scope=Scope.LIVE, status=StatusFilter.CAPTURE_FAILED),
    RunQuery(scope=Scope.LIVE, since=format_timestamp(BASE_NS + 40 * 10**9)[:19]),
    RunQuery(eval_id="nightly"),
    RunQuery(scope=Scope.LIVE, search="noon_1"),
    RunQuery(scope=Scope.LIVE, search="_"),
    RunQuery(scope=Scope.LIVE, search="0%"),
    RunQuery(search="CALL-2", agent="booking", status=StatusFilter.OK),
    RunQuery(scope=Scope.LIVE, problem=Problem.TOOL_ERROR),
    RunQuery(scope=Scope.LIVE, limit=10**9),
]


@pytest.mark.parametrize("query", _QUERIES, ids=lambda query: repr({k: v for k, v in vars(query).items() if v}))
def test_the_direct_page_is_the_sqlalchemy_page(warm: Path, catalog: SqlCatalog, query: RunQuery):
    for runs_per_session in (20, 1):
        expected = catalog.sessions_page(query, runs_per_session=runs_per_session)  # its shape stored on first use
        assert direct_sessions_page(warm, query, runs_per_session=runs_per_session) == expected
    assert expected.sessions, "a page with nothing to compare"


def test_cursor_pages_are_the_same_to_the_end(warm: Path, catalog: SqlCatalog):
    for query in (RunQuery(scope=Scope.LIVE, limit=4), RunQuery(agent="booking", limit=3), RunQuery(search="noon", limit=7)):
        pages = 0
        while True:
            expected = catalog.sessions_page(query, runs_per_session=2)
            found = direct_sessions_page(warm, query, runs_per_session=2)
            assert found == expected
            pages += 1
            if expected.next_cursor is None:
                break
            query = RunQuery(**{**vars(query), "cursor": expected.next_cursor})
        assert pages >= 3


def test_a_catalog_just_opened_has_the_default_lists_and_learns_a_filtered_one(warm: Path):
    catalog = open_catalog(warm)  # as a writer's hook, a viewer or reindex opens it
    try:
        assert direct_sessions_page(warm, RunQuery(scope=Scope.LIVE)) == catalog.sessions_page(RunQuery(scope=Scope.LIVE))
        assert direct_sessions_page(warm, RunQuery()) == catalog.sessions_page(RunQuery())
        filtered = RunQuery(scope=Scope.LIVE, agent="booking", since="2020")
        assert direct_sessions_page(warm, filtered) is None  # never asked for: SQLAlchemy answers it
        expected = catalog.sessions_page(filtered)
    finally:
        catalog.close()
    assert direct_sessions_page(warm, filtered) == expected  # stored as SQLAlchemy answered it


def _edit(root: Path, statement: str) -> None:
    with sqlite3.connect(root / ".catalog.sqlite3") as database:
        database.execute(statement)
    database.close()


@pytest.mark.parametrize(("edit", "stored_again"), [
    ("DROP TABLE compiled_statements", True),  # a catalog made before them
    ("UPDATE compiled_statements SET version = 'another'", True),  # another release's, or an edited source's
    ("UPDATE catalog_meta SET value = '0' WHERE key = 'schema'", True),  # made new by another release
    ("UPDATE compiled_statements SET sql = 'SELECT nothing FROM nowhere' WHERE name LIKE 'sessions.groups%'", False),
])
def test_without_usable_statements_sqlalchemy_answers_the_same(warm: Path, edit: str, stored_again: bool):
    expected = json.loads(CliRunner().invoke(main, ["sessions", "--dir", str(warm), "--json", "--all"]).stdout)
    _edit(warm, edit)
    assert direct_sessions_page(warm, RunQuery(scope=Scope.LIVE)) is None
    result = CliRunner().invoke(main, ["sessions", "--dir", str(warm), "--json", "--all"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == expected
    assert (direct_sessions_page(warm, RunQuery(scope=Scope.LIVE)) is not None) is stored_again  # by that list


def test_a_list_does_not_wait_on_another_writers_lock_to_store_a_statement(warm: Path, catalog: SqlCatalog):
    """Storing is for the next process: a list through SQLAlchemy answers while another writer (a
    reindex, a pass) holds the lock, rather than wait up to the catalog's busy timeout (30 s)."""
    holder = sqlite3.connect(warm / ".catalog.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    answered: list = []
    try:
        asking = threading.Thread(target=lambda: answered.append(catalog.sessions_page(RunQuery(agent="booking"))),
                                  daemon=True)
        asking.start()
        asking.join(10)
        assert answered and answered[0].sessions, "the list waited for the write lock"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert direct_sessions_page(warm, RunQuery(agent="booking")) is None  # left out, not waited for


def test_a_run_whose_figures_are_pending_is_listed_through_sqlalchemy_counted(warm: Path, writer: BundleWriter):
    _write(writer, 100, session="late")
    assert writer.force_flush(30_000)
    assert direct_sessions_page(warm, RunQuery(scope=Scope.LIVE)) is None  # its row says nothing of its tool yet
    result = CliRunner().invoke(main, ["sessions", "--dir", str(warm), "--json", "--limit", "1"])
    (late,) = json.loads(result.stdout)
    assert late["session_id"] == "late" and late["runs"][0]["tool_calls"] == 1
    assert direct_sessions_page(warm, RunQuery(scope=Scope.LIVE)) is not None


def test_hostile_values_are_values_and_a_bad_one_the_same_clear_error(warm: Path, catalog: SqlCatalog):
    runs = catalog.count()
    for query in (RunQuery(scope=Scope.LIVE, agent="x'; DROP TABLE runs; --"),
                  RunQuery(scope=Scope.LIVE, search="%' OR 1=1 --"), RunQuery(scope=Scope.LIVE, search="'); DELETE FROM runs; --")):
        catalog.sessions_page(query)
        page = direct_sessions_page(warm, query)
        assert page is not None and page.sessions == []
    assert catalog.count() == runs
    forged = RunQuery(scope=Scope.LIVE, cursor=encode_cursor(SortKey.CREATED_AT, Order.DESC,
                                                             (None, "9'; DROP TABLE runs; --", "sessions/x", "")))
    with pytest.raises(BadQuery) as from_sqlalchemy:
        catalog.sessions_page(RunQuery(scope=Scope.LIVE, cursor="not a cursor"))
    with pytest.raises(BadQuery) as direct:
        direct_sessions_page(warm, RunQuery(scope=Scope.LIVE, cursor="not a cursor"))
    assert str(direct.value) == str(from_sqlalchemy.value)
    expected = catalog.sessions_page(forged)  # a well-formed cursor: its values bound, never SQL
    assert expected.sessions and direct_sessions_page(warm, forged) == expected
    result = CliRunner().invoke(main, ["sessions", "--dir", str(warm), "--since", "2026'; DROP TABLE runs; --"])
    assert result.exit_code == 2 and "RFC 3339" in result.output and "SELECT" not in result.output
    assert catalog.count() == runs


def test_the_row_fields_are_the_tables_columns():
    """``columns.FIELDS`` (no SQL library imported) names the ``runs`` table's columns in order."""
    from otel_session.catalog.columns import FIELDS
    from otel_session.catalog.schema import runs

    assert FIELDS == tuple(column.name for column in runs.columns)
