"""``/api/runs`` and ``/api/sessions`` answer bounded keyset pages from the catalog; bad query
parameters are a 400 with one line, never SQL."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from otel_session.viewer import create_app

from .conftest import BASE_NS, write_runs


@pytest.fixture
def client(root: Path, writer):
    root.mkdir(parents=True, exist_ok=True)
    app = create_app({"BUNDLE_DIR": str(root), "TESTING": True})
    yield app.test_client()
    app.extensions["otel_session_listing"].close()


def _get(client, url: str) -> dict:
    response = client.get(url)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def test_runs_pages_by_cursor_stay_stable_while_runs_arrive(client, writer):
    first = write_runs(writer, 23)
    seen: list[str] = []
    url = "/api/runs?limit=5"
    pages = 0
    while True:
        answer = _get(client, url)
        seen += [run["run_id"] for run in answer["runs"]]
        write_runs(writer, 1, session="late", start_ns=BASE_NS + 10**12 + pages * 10**9)  # newest: ahead of the cursor
        pages += 1
        if answer["next_cursor"] is None:
            break
        url = f"/api/runs?limit=5&cursor={answer['next_cursor']}"
    assert seen == list(reversed(first)) and pages == 5


def test_a_session_page_is_bounded_at_any_size(client, writer):
    for number in range(55):
        for run_number in range(7):
            run = writer.open_run(session_id=f"big-{number}", run_id=f"run-{uuid.uuid4()}", agent="a" * 120,
                                  created_at_ns=BASE_NS + (number * 7 + run_number) * 10**9)
            for call in range(25):
                run.append("tool_execution_started", {"name": "lookup"}, tool_call_id=f"c{call}", at_ns=BASE_NS)
                run.append("tool_execution_finished", {"status": "error", "error": "e" * 200}, tool_call_id=f"c{call}",
                           at_ns=BASE_NS)
            run.close(run_status="error")
    assert writer.force_flush(60_000)
    response = client.get("/api/sessions")
    answer = response.get_json()
    assert len(response.data) <= 256 * 1024
    assert answer["next_cursor"]
    assert all(session["run_count"] == 7 and len(session["runs"]) == 5 for session in answer["sessions"])
    assert all(run["problem_count"] == 20 and len(run["problems"]) == 3 for run in answer["sessions"][0]["runs"])
    seen = [session["session_id"] for session in answer["sessions"]]
    while answer["next_cursor"]:  # the pages that follow hold every other session, none twice
        response = client.get(f"/api/sessions?cursor={answer['next_cursor']}")
        assert len(response.data) <= 256 * 1024
        answer = response.get_json()
        seen += [session["session_id"] for session in answer["sessions"]]
    assert seen == [f"big-{number}" for number in reversed(range(55))]


@pytest.mark.parametrize("query", [
    "cursor=%00", "cursor=not-a-cursor", "cursor=" + "A" * 3000, "cursor=WyJ0dXJucyIsImRlc2MiLG51bGwsIiIsIiJd",
    "sort=created_at;DROP TABLE runs", "order=desc--", "limit=1e3", "limit=-1", "status=ok' OR '1'='1",
    "since=2026-01-01' OR 1=1", "q=" + "x" * 201, "q=%00", "agent=%00", "kind=live)",
])
def test_hostile_parameters_are_a_400_with_one_line(client, writer, query):
    write_runs(writer, 2)
    for path in ("/api/runs", "/api/sessions"):
        response = client.get(f"{path}?{query}")
        assert response.status_code == 400, (path, query, response.get_data(as_text=True))
        answer = response.get_json()
        assert set(answer) == {"error", "message"} and "\n" not in answer["message"]
        assert not any(word in answer["message"] for word in ("SELECT", "sqlite", "Traceback"))


def test_sql_in_a_search_is_only_text(client, writer):
    write_runs(writer, 3)
    answer = _get(client, "/api/runs?q=%25' OR 1=1 --")
    assert answer["runs"] == [] and answer["total"] == 0


@pytest.mark.sqlite_only
def test_an_unusable_catalog_lists_from_a_scan_and_says_so(root: Path, tmp_path: Path):
    from otel_session.bundle.write import BundleWriter

    writer = BundleWriter(root)
    try:
        ids = write_runs(writer, 4)
    finally:
        writer.shutdown()
    (root / ".catalog.sqlite3").mkdir()  # the database can never be opened here
    app = create_app({"BUNDLE_DIR": str(root), "TESTING": True})
    try:
        answer = _get(app.test_client(), "/api/runs")
        assert sorted(run["run_id"] for run in answer["runs"]) == sorted(ids)
        assert "catalog is unusable" in answer["warning"]
        assert len(_get(app.test_client(), "/api/sessions")["sessions"]) == 3
    finally:
        app.extensions["otel_session_listing"].close()


@pytest.mark.sqlite_only
def test_a_catalog_on_a_nearly_full_disk_writes_nothing_and_lists_scan_with_a_warning(tmp_path: Path):
    import subprocess

    from otel_session.bundle.write import BundleWriter
    from otel_session.catalog import CatalogHook

    point = tmp_path / "tiny"
    point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", str(point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        root = point / "bundles"
        writer = BundleWriter(root, hooks=CatalogHook(root))
        try:
            ids = write_runs(writer, 3)  # recorded whole: the catalog gives way to the bundles
        finally:
            writer.shutdown()
        assert not (root / ".catalog.sqlite3-wal").exists() or (root / ".catalog.sqlite3-wal").stat().st_size == 0
        app = create_app({"BUNDLE_DIR": str(root), "TESTING": True})
        try:
            answer = _get(app.test_client(), "/api/runs")
            assert sorted(run["run_id"] for run in answer["runs"]) == sorted(ids)
            assert "cannot be kept up to date" in answer["warning"] and "MiB free" in answer["warning"]
        finally:
            app.extensions["otel_session_listing"].close()
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_a_total_past_ten_thousand_runs_is_a_lower_bound_and_a_smaller_one_exact(client, writer, catalog):
    """The count stops at TOTAL_CAP: past it ``total`` is the cap and ``total_exact`` false (the page
    shows "10,000+"); a filtered set under it is counted exactly. The same on both engines."""
    import dataclasses

    from otel_session.catalog import TOTAL_CAP, RunQuery, SqlCatalog

    write_runs(writer, 3)
    [model] = [row for row in catalog.page(RunQuery(limit=1)).rows]
    other = SqlCatalog(catalog.url, "another-host:/bundles")  # runs another host stored: no keeper drops them
    try:
        rows = []
        for number in range(TOTAL_CAP + 1):
            run_id = f"run-{uuid.UUID(int=number + 1)}"
            rows.append(dataclasses.replace(model, path=f"sessions/far/{run_id}", directory="sessions/far", run_id=run_id,
                                            session_id="far", agent="far-agent", location=f"s3://b/sessions/far/{run_id}.tar"))
        other.upsert_sealed(rows)
    finally:
        other.close()
    answer = _get(client, "/api/runs?limit=5")
    assert (answer["total"], answer["total_exact"], len(answer["runs"])) == (TOTAL_CAP, False, 5)
    assert catalog.page(RunQuery(limit=5)).total_exact is False
    answer = _get(client, "/api/runs?limit=5&agent=agent0")
    assert (answer["total"], answer["total_exact"]) == (2, True)
    page = catalog.page(RunQuery(limit=5, agent="far-agent"))
    assert (page.total, page.total_exact) == (TOTAL_CAP, False)
    page = catalog.page(RunQuery(limit=5, agent="far-agent", since="2000", session_id="far", search="far"))
    assert page.total_exact is False


@pytest.mark.sqlite_only
def test_every_list_finds_the_pending_rows_through_their_partial_index(writer, catalog):
    """``complete_pending`` runs before every list: its query must read the few pending rows, not
    every row of the origin (the key's prefix; 190 ms a list at 100k runs before)."""
    from sqlalchemy import event

    write_runs(writer, 3)
    captured = []

    def capture(_connection, _cursor, statement, parameters, _context, _many) -> None:
        captured.append((statement, parameters))

    event.listen(catalog._engine, "before_cursor_execute", capture)
    catalog.pending(100)
    event.remove(catalog._engine, "before_cursor_execute", capture)
    [(statement, parameters)] = captured
    with catalog._engine.connect() as connection:
        plan = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
    assert "USING INDEX runs_pending" in str(plan), plan
