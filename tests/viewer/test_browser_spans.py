"""The replay page's span tree in Debian's Chromium: every record of a run grouped by the span it
came from, nested as the run nests them, redacted as the bundle is, read a page at a time."""

from __future__ import annotations

import pytest

import otel_session
from otel_session.bundle.write import BundleWriter
from otel_session.testing import capture_bundle

pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser

CANARIES = ("zed.canary@example.org", "+1 415 555 0199")


def _record_with_canaries(root):
    """One run through the real API and the real OTel SDK: every record carries its span's ids."""
    with capture_bundle(root) as captured:
        with otel_session.session("spans-1"), otel_session.run(agent="booking"):
            with otel_session.turn(0, state="ask_contact", required_slots=["email"]) as turn:
                with otel_session.message("user") as message:
                    message.text(f"mail me at {CANARIES[0]} or call {CANARIES[1]}")
                otel_session.guard("email_present", passed=True)  # a span event of the turn's span
                with otel_session.tool_execution("lookup", arguments={"email": CANARIES[0]}) as tool:
                    tool.finish({"found": True})
                with otel_session.message("assistant") as message:
                    message.delta("Thanks, noted.")
                turn.finish(state="done")
    return captured.bundle


def _open_spans(page):
    page.click("#spans-section > summary")
    page.wait_for_selector("#spans ul.span-tree")


def test_the_span_tree_nests_every_record_under_its_span_redacted_as_recorded(page, serve, tmp_path):
    bundle = _record_with_canaries(tmp_path / "root")
    server = serve(tmp_path / "root")
    page.goto(f"{server.url}/sessions/spans-1/runs/{bundle.run_id}")
    page.wait_for_selector("body[data-ready=true]")
    _open_spans(page)
    run = page.locator("#spans ul.span-tree > li > details.kind-run")
    assert run.count() == 1
    turn = run.locator(":scope > ul > li > details.kind-turn")
    assert turn.count() == 1
    children = turn.locator(":scope > ul > li > details")
    kinds = [children.nth(i).get_attribute("class").split("kind-")[1] for i in range(children.count())]
    assert kinds == ["message", "tool", "message"], kinds  # the guard is an event of the turn's span: one of its records
    assert "guard_evaluated" in [event["type"] for event in bundle.events if event["span_id"] == turn.get_attribute("data-span-id")]
    spans = {event.get("span_id") for event in bundle.events}
    assert None not in spans and len(spans) == 5  # the real SDK's span ids, one group each
    assert {page.locator("#spans details.span-node").nth(i).get_attribute("data-span-id")
            for i in range(page.locator("#spans details.span-node").count())} == spans
    assert "tool lookup" in children.nth(1).locator("summary").text_content()
    for node in page.locator("#spans details.span-node").all():  # every span opened: all its records drawn
        if not node.evaluate("el => el.open"):
            node.locator(":scope > summary").click()
    page.wait_for_function(f"() => document.querySelectorAll('#spans table.span-records tbody tr').length === {len(bundle.events)}")
    text = page.inner_text("#spans")
    assert "lookup" in text and "Thanks, noted." in text
    assert not any(canary in text for canary in CANARIES)
    assert not any(canary in page.content() for canary in CANARIES)
    assert page.errors == []


def test_a_long_run_is_read_a_page_at_a_time(page, serve, tmp_path, journal):
    writer = BundleWriter(tmp_path / "root")
    try:
        run = writer.open_run(session_id="long", run_id="run-00000000-0000-0000-0000-00000000a11d", agent="a",
                              created_at_ns=journal.BASE_NS)
        script = journal.Script(run, journal.BASE_NS)
        script("run_started", {"kind": "live", "agent": "a"})
        script("message_started", {"role": "assistant"}, turn_index=0, message_id="m1")
        for index in range(2497):
            script("assistant_delta", {"index": 0, "kind": "text", "delta": f"w{index} "}, turn_index=0, message_id="m1")
        script("run_finished", {"status": "ok"})
        run.close()
        assert writer.force_flush()
    finally:
        writer.shutdown()
    server = serve(tmp_path / "root")
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "/events?" in request.url else None)
    page.goto(f"{server.url}/sessions/long/runs/run-00000000-0000-0000-0000-00000000a11d")
    page.wait_for_selector("body[data-ready=true]")
    before = len(asked)
    _open_spans(page)
    assert page.inner_text("#spans .spans-status").startswith("2 spans from records 1–1000 of 2500")
    page.click("#spans .spans-more")
    page.wait_for_function("() => document.querySelector('#spans .spans-status').textContent.includes('1–2000')")
    page.click("#spans .spans-more")
    page.wait_for_function("() => document.querySelector('#spans .spans-status').textContent.includes('1–2500')")
    assert page.locator("#spans .spans-more").count() == 0
    tree_reads = asked[before:]
    assert len(tree_reads) == 3 and all("limit=1000" in url for url in tree_reads), tree_reads
    page.click("#spans details.kind-run > summary")
    message = page.locator("#spans details.kind-message")
    assert "2498 records" in message.locator("summary").text_content()
    message.locator("summary").click()
    page.wait_for_selector("#spans details.kind-message table.span-records caption")
    assert page.locator("#spans details.kind-message table.span-records tbody tr").count() == 200  # the rest behind its caption


def test_a_link_to_the_span_tree_opens_it(page, serve, sample):
    server = serve(sample.root)
    page.goto(f"{server.url}/sessions/{sample.session_id}/runs/{sample.latest_run}#spans")
    page.wait_for_selector("#spans details.kind-run")  # opened and read with no click
    assert page.evaluate("() => document.getElementById('spans-section').open")
    assert page.locator("#spans details.kind-turn").count() == 3  # records with no span id: grouped by turn


def test_a_recording_run_s_tree_takes_the_records_written_since(page, serve, live_writer, journal):
    run = live_writer.open_run(session_id="live-spans", run_id="run-00000000-0000-4000-8000-00000000050a",
                               created_at_ns=journal.BASE_NS)
    script = journal.Script(run, journal.BASE_NS)
    script("run_started", {"kind": "live", "agent": "booking"})
    script("turn_started", {"state": "ask_date", "required_slots": ["date"]}, turn_index=0)
    assert live_writer.force_flush()
    server = serve(live_writer.root)
    page.goto(f"{server.url}/sessions/live-spans/runs/{run.run_id}#spans")
    page.wait_for_selector("#spans details.kind-turn", state="attached")
    assert page.inner_text("#spans .spans-more") == "Load new records"
    script.message("user", "m-u0", "table for 2", turn=0)
    assert live_writer.force_flush()
    page.click("#spans .spans-more")
    page.wait_for_selector("#spans details.kind-message", state="attached")
    assert page.inner_text("#spans .spans-status").startswith("3 spans from records 1–4")
    script("turn_finished", {"state": "ask_date", "required_slots": ["date"], "missing_required_slots": ["date"]}, turn_index=0)
    script("run_finished", {"status": "ok"})
    run.close()
    assert live_writer.force_flush()
    page.click("#spans .spans-more")
    page.wait_for_function("() => !document.querySelector('#spans .spans-more')")  # sealed: nothing more to come
    assert page.inner_text("#spans .spans-status").startswith("3 spans from records 1–6")
