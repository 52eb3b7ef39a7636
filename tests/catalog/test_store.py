"""The SQL catalog on a real SQLite file: keyset pages, sorting, schema versions, bad files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from otel_session.bundle.write import BundleWriter
from otel_session.catalog import (
    BadQuery, CatalogUnavailable, Order, RunQuery, Scope, SortKey, SqlCatalog, catalog_url, catch_up, open_catalog,
)

from .conftest import BASE_NS, write_runs


def _all_pages(catalog: SqlCatalog, query: RunQuery, arrive=None) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        page = catalog.page(RunQuery(**{**query.__dict__, "cursor": cursor}))
        seen += [row.run_id for row in page.rows]
        if arrive is not None:
            arrive()
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


def test_cursor_pages_stay_stable_while_runs_arrive(writer, catalog):
    first = write_runs(writer, 25)
    arrived: list[str] = []

    def arrive() -> None:  # newer runs land at the head of the list between page requests
        arrived.extend(write_runs(writer, 2, session="new", start_ns=BASE_NS + 10**12 + len(arrived) * 10**9))

    seen = _all_pages(catalog, RunQuery(limit=4), arrive)
    assert seen == list(reversed(first)), "every run that was there once, in order, none twice"
    assert len(catalog.page(RunQuery(limit=500)).rows) == 25 + len(arrived)


@pytest.mark.parametrize("order", [Order.DESC, Order.ASC])
def test_pages_by_a_column_with_missing_values_put_them_last_in_either_order(root: Path, writer, catalog, order):
    write_runs(writer, 7)
    with_latency = writer.open_run(session_id="v", run_id=f"run-00000000-0000-4000-8000-{1:012d}", created_at_ns=BASE_NS)
    for index, value in enumerate((300, 100, 200)):
        with_latency.append("turn_started", {}, turn_index=index, at_ns=BASE_NS)
        with_latency.append("turn_finished", {"latency": {"user_to_agent_ms": value}}, turn_index=index, at_ns=BASE_NS)
    with_latency.close(run_status="ok")
    assert with_latency.wait_sealed(10) and writer.force_flush(10_000)
    catch_up(catalog, root)  # the figures the writer left pending, counted (a viewer's keeper does this)
    rows = []
    cursor = None
    while True:
        page = catalog.page(RunQuery(sort=SortKey.LATENCY_P50_MS, order=order, limit=3, cursor=cursor))
        rows += page.rows
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(rows) == 8 and len({row.path for row in rows}) == 8
    assert rows[0].latency_p50_ms == 200 and all(row.latency_p50_ms is None for row in rows[1:])


@pytest.mark.parametrize("cursor", [
    "not base64 !", "e30", "W10", "WyJjcmVhdGVkX2F0IiwiZGVzYyIsMSwyLDNd", "x" * 5000,
    "WyJ0dXJucyIsImRlc2MiLG51bGwsIiIsIiJd",  # made for another sort
    "WyJjcmVhdGVkX2F0IiwiZGVzYyIsbnVsbCwiJyBPUiAxPTE7IC0tIiwiIiwiIl0",  # SQL in a field: only ever a bound value
])
def test_a_forged_cursor_is_a_bad_query(writer, catalog, cursor):
    write_runs(writer, 2)
    try:
        page = catalog.page(RunQuery(cursor=cursor))
    except BadQuery as exc:
        assert "\n" not in str(exc) and "SELECT" not in str(exc)
    else:  # a well-formed position is a position, whatever its strings hold
        assert page.rows == []


def test_search_with_like_wildcards_matches_them_literally(writer, catalog):
    write_runs(writer, 3)
    assert catalog.page(RunQuery(search="%")).rows == []
    assert catalog.page(RunQuery(search="_")).rows == []
    assert len(catalog.page(RunQuery(search="agent1")).rows) == 1


def test_sessions_page_newest_first_with_their_newest_runs(writer, catalog):
    write_runs(writer, 9)
    page = catalog.sessions_page(RunQuery(scope=Scope.LIVE, limit=2), runs_per_session=2)
    assert [group.session_id for group in page.sessions] == ["s2", "s1"]
    assert [group.run_count for group in page.sessions] == [3, 3]
    assert all(len(group.runs) == 2 for group in page.sessions)
    rest = catalog.sessions_page(RunQuery(scope=Scope.LIVE, limit=2, cursor=page.next_cursor))
    assert [group.session_id for group in rest.sessions] == ["s0"] and rest.next_cursor is None
    filtered = catalog.sessions_page(RunQuery(scope=Scope.LIVE, agent="agent1"))
    assert {row.agent for group in filtered.sessions for row in group.runs} == {"agent1"}


@pytest.mark.sqlite_only
def test_a_file_that_is_not_a_database_is_made_new_and_filled_again(root: Path, writer):
    write_runs(writer, 4)
    writer.shutdown()
    database = root / ".catalog.sqlite3"
    for suffix in ("-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    database.write_bytes(b"this is not a database at all" * 200)
    catalog = open_catalog(root)
    try:
        assert catalog.rebuilt and catalog.count() == 0
        assert catch_up(catalog, root).added == 4 and catalog.count() == 4
    finally:
        catalog.close()


@pytest.mark.sqlite_only
def test_a_catalog_of_another_schema_version_is_made_new(root: Path, writer):
    write_runs(writer, 2)
    writer.shutdown()
    with sqlite3.connect(root / ".catalog.sqlite3") as connection:
        connection.execute("UPDATE catalog_meta SET value = '0' WHERE key = 'schema'")
    catalog = open_catalog(root)
    try:
        assert catalog.rebuilt and catalog.count() == 0
    finally:
        catalog.close()


@pytest.mark.sqlite_only
def test_recording_goes_on_when_the_catalog_cannot_be_written(root: Path, caplog):
    from otel_session.catalog import CatalogHook

    root.mkdir(parents=True)
    (root / ".catalog.sqlite3").mkdir()  # a directory where the database goes: it can never open
    writer = BundleWriter(root, hooks=CatalogHook(root))
    try:
        ids = write_runs(writer, 2)
    finally:
        writer.shutdown()
    assert sorted(path.name for path in root.glob("sessions/*/run-*")) == sorted(ids)
    assert "catalog: rows not written" in caplog.text
    with pytest.raises(CatalogUnavailable):
        open_catalog(root)


@pytest.mark.sqlite_only
def test_a_catalog_that_could_not_open_is_tried_again_on_its_timer_with_the_rows_it_missed(root: Path):
    """No writer pass comes after the cause went away: the hook's own timer opens the catalog and
    writes the rows of the passes that ended meanwhile (the timer's wait ended by ``wake``)."""
    import threading

    from otel_session.catalog import CatalogHook
    from otel_session.testing import wait_for

    root.mkdir(parents=True)
    blocker = root / ".catalog.sqlite3"
    blocker.mkdir()  # a directory where the database goes: it cannot open while it is there
    wake = threading.Event()
    hook = CatalogHook(root, retry_s=(3600.0, 3600.0), wake=wake)
    assert hook.wait_ready(60)
    writer = BundleWriter(root, hooks=hook)
    try:
        ids = write_runs(writer, 3)  # recorded all the same, the hook told of them
        blocker.rmdir()
        wake.set()  # the hour's wait ends now: no pass, no sleep
        wait_for(lambda: (root / ".catalog.sqlite3").is_file(), timeout=60)
        catalog = open_catalog(root)
        try:
            wait_for(lambda: catalog.count() == 3, timeout=60)
            assert sorted(row.run_id for row in catalog.page(RunQuery(limit=10)).rows) == sorted(ids)
        finally:
            catalog.close()
    finally:
        writer.shutdown()


@pytest.mark.parametrize("sort", [SortKey.CREATED_AT, SortKey.TURNS])
def test_the_same_run_in_two_roots_of_one_catalog_is_two_rows_every_page_walk_sees(root: Path, writer, sort):
    """A bundle copied to a second root (same path, same times) is a row of each origin; a page
    boundary between the two skips neither."""
    write_runs(writer, 3)
    writer.shutdown()
    catalogs = [SqlCatalog(catalog_url(root), origin) for origin in ("host-a:/bundles", "host-b:/bundles")]
    try:
        for catalog in catalogs:
            catch_up(catalog, root)
        rows = []
        cursor = None
        while True:
            page = catalogs[0].page(RunQuery(sort=sort, limit=1, cursor=cursor))
            rows += page.rows
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        walked = [(row.origin, row.path) for row in rows]
        assert len(walked) == 9 and len(set(walked)) == 9, "3 runs, each a row of the writer's, a's and b's origin"
        assert walked == [(row.origin, row.path) for row in catalogs[0].page(RunQuery(sort=sort, limit=500)).rows]
    finally:
        for catalog in catalogs:
            catalog.close()


@pytest.mark.sqlite_only
def test_the_pending_rows_are_found_through_their_partial_index_not_by_a_scan(root: Path, writer, catalog):
    """Every list asks for the rows whose figures are pending; every row of a root has one origin,
    so a plan through the key's (origin, path) index reads them all (34 ms at 100k runs)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    write_runs(writer, 3)
    asked: list[tuple[str, tuple]] = []

    def seen(_connection, _cursor, statement, parameters, _context, _many) -> None:
        if "stamp" in statement:
            asked.append((statement, parameters))

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        catalog.pending(10)
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    (statement, parameters), = asked
    database = sqlite3.connect(root / ".catalog.sqlite3")
    try:
        plan = database.execute("EXPLAIN QUERY PLAN " + statement, parameters).fetchall()
    finally:
        database.close()
    assert any("USING INDEX runs_pending" in step[-1] for step in plan), plan


def test_a_sealed_run_s_row_is_made_from_what_its_writer_told_with_no_file_read(root: Path, catalog):
    """The writer tells its hooks the ``run.json`` and terminal capture it wrote (``SealedRun``):
    the catalog's row comes from them, whatever the bundle's files hold now (here: none at all)."""
    from otel_session.bundle.hooks import SealedRun
    from otel_session.catalog import CatalogHook

    hook = CatalogHook(root)
    assert hook.wait_ready(60)
    run_id = "run-00000000-0000-4000-8000-0000000000aa"
    manifest = {"schema": "otel-session.run.v1", "session_id": "told", "run_id": run_id, "kind": "live",
                "created_at": "2026-05-01T00:00:00.000000Z", "agent": "booking", "service": "svc"}
    capture = {"schema": "otel-session.capture.v1", "status": "complete", "event_count": 7}
    try:
        hook.runs_passed([], [SealedRun(str(root / "sessions" / "told" / run_id), manifest, capture)])
    finally:
        hook.close()
    (row,) = catalog.page(RunQuery(limit=5)).rows
    assert (row.session_id, row.run_id, row.agent, row.capture_status, row.event_count) == (
        "told", run_id, "booking", "complete", 7)
    assert not (root / "sessions").exists()
