"""The fleet dashboard over the run catalog: its figures, their links to the runs behind them, and
the page in Debian's Chromium (charts drawn by the vendored Chart.js, nothing fetched elsewhere)."""

from __future__ import annotations

import uuid

import pytest

from otel_session.bundle.write import BundleWriter
from otel_session.viewer import create_app

BASE_NS = 1_796_000_000_000_000_000  # 2026-11-30T…Z
RANGE = "since=2026-11-29T00:00&until=2026-12-02T00:00"


@pytest.fixture
def fleet_root(tmp_path, journal):
    """Two voice bookings (gpt-4o-mini calls, a repeated ask and a failed tool each) in two sessions,
    and one run whose model has no price."""
    root = tmp_path / "bundles"
    writer = BundleWriter(root)
    try:
        for position, session in enumerate(("call-1", "call-2")):
            created = BASE_NS + position * 3_600 * 10**9
            run = writer.open_run(session_id=session, run_id=f"run-{uuid.uuid4()}", agent="booking", created_at_ns=created)
            script = journal.Script(run, created)
            journal.record_booking(script, voice=True)
            script("run_finished", {"status": "ok"})
            run.close()
        created = BASE_NS + 2 * 3_600 * 10**9
        run = writer.open_run(session_id="call-1", run_id=f"run-{uuid.uuid4()}", agent="faq", created_at_ns=created)
        script = journal.Script(run, created)
        script.message("user", "u", "hello", turn=0)
        script.message("assistant", "a", "hi", turn=0, finished={"model": "house-llm", "usage": {"input_tokens": 5, "output_tokens": 2}})
        script("run_finished", {"status": "ok"})
        run.close()
        assert writer.force_flush()
    finally:
        writer.shutdown()
    return root


@pytest.fixture
def fleet_app(fleet_root):
    app = create_app({"BUNDLE_DIR": str(fleet_root), "TESTING": True})
    yield app
    app.extensions["otel_session_listing"].close()


def test_the_dashboard_counts_the_runs_of_a_range_from_the_catalog(fleet_app):
    answer = fleet_app.test_client().get(f"/api/dashboard?{RANGE}&bucket=day").get_json()
    totals = answer["totals"]
    assert (totals["runs"], totals["sessions"]) == (3, 2)
    assert (totals["repeated_ask"], totals["tool_error"], totals["blocked_guard"], totals["integrity_failed"]) == (2, 2, 2, 0)
    assert totals["turn_p50_ms"] is not None and totals["turn_p95_ms"] >= totals["turn_p50_ms"]
    assert [bucket["start"] for bucket in answer["buckets"]] == ["2026-11-30"]
    models = {model["model"]: model for model in answer["models"]}
    assert models["gpt-4o-mini"]["calls"] == 6 and models["gpt-4o-mini"]["cost_usd"] > 0
    assert models["house-llm"] == {"model": "house-llm", "calls": 1, "input_tokens": 5, "output_tokens": 2, "cost_usd": None}
    assert totals["unpriced_models"] == ["house-llm"] and totals["cost_usd"] == pytest.approx(models["gpt-4o-mini"]["cost_usd"])


def test_an_hour_bucket_and_the_filters_narrow_it(fleet_app):
    client = fleet_app.test_client()
    hourly = client.get(f"/api/dashboard?{RANGE}&bucket=hour").get_json()
    assert [bucket["runs"] for bucket in hourly["buckets"]] == [1, 1, 1]
    faq = client.get(f"/api/dashboard?{RANGE}&agent=faq").get_json()
    assert faq["totals"]["runs"] == 1 and faq["totals"]["cost_usd"] is None


@pytest.mark.parametrize("bad", ["bucket=week", "since=yesterday", "agent=" + "x" * 5000, "problem=everything"])
def test_hostile_parameters_are_one_line_400s(fleet_app, bad):
    response = fleet_app.test_client().get(f"/api/dashboard?{bad}")
    assert response.status_code == 400
    body = response.get_json()
    assert body["error"] and "\n" not in body["message"] and "SELECT" not in body["message"]


def test_a_share_links_to_the_runs_behind_it(fleet_app):
    runs = fleet_app.test_client().get(f"/api/runs?{RANGE}&problem=repeated_ask").get_json()["runs"]
    assert sorted(run["agent"] for run in runs) == ["booking", "booking"]


@pytest.mark.browser
def test_the_dashboard_page_draws_its_charts_and_links_to_the_runs(browser, serve, fleet_root):
    pytest.importorskip("playwright.sync_api")
    server = serve(fleet_root)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    requests: list[str] = []
    context.on("request", lambda request: requests.append(request.url))
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{server.url}/dashboard?{RANGE}")
        page.wait_for_selector("body[data-ready=true]")
        drawn = page.evaluate("() => [...document.querySelectorAll('canvas')].filter((c) => window.Chart.getChart(c)).length")
        assert drawn == 4 and errors == []
        assert page.locator("#models tbody tr[data-model='house-llm'] td").last.inner_text() == "no price"
        assert all(url.startswith(server.url) for url in requests)  # the charting library is served, not fetched
        page.locator(".card", has_text="repeated ask").click()
        page.wait_for_selector("body[data-ready=true]")
        assert "problem=repeated_ask" in page.url
        page.wait_for_function("() => document.querySelectorAll('#sessions tbody tr').length === 2")
    finally:
        context.close()
