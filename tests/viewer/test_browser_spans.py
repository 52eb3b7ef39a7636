"""The replay page's span tree in Debian's Chromium: every record of a run grouped by the span it
came from, nested as the run nests them (by parent span id with span records), redacted as the
bundle is, read a page at a time."""

from __future__ import annotations

import pytest
from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags

import otel_session
from otel_session.bundle.write import BundleWriter
from otel_session.testing import capture_bundle
from otel_session.viewer.export import export_html

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
    assert "recorded without span records" in page.inner_text("#spans .spans-note")  # says what the tree lacks
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


def _record_with_span_records(root, monkeypatch):
    """A run with span records on: a foreign span nests under another under the turn, each with
    attributes, events and links no other record carries, canaries in all of them."""
    monkeypatch.setenv("OTEL_SESSION_SPAN_RECORDS", "on")
    with capture_bundle(root) as captured:
        tracer = captured.recorder.tracer_provider.get_tracer("my.http.lib", "2.3.4")
        with otel_session.session("spans-2"), otel_session.run(agent="booking"):
            with otel_session.turn(0, state="ask_contact", required_slots=["email"]) as turn:
                with otel_session.message("user") as message:
                    message.text(f"mail me at {CANARIES[0]}")
                linked = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
                with tracer.start_as_current_span(f"GET /contacts/{CANARIES[0]}", links=[Link(linked, {"link.note": CANARIES[1]})],
                                                  attributes={"http.request.method": "GET", "contact.phone": CANARIES[1],
                                                              "retries": 2}) as get:
                    get.add_event("cache miss", {"cache.key": f"contact:{CANARIES[0]}"})
                    with tracer.start_as_current_span("dns lookup") as dns:
                        dns.set_status(Status(StatusCode.ERROR, f"no answer for {CANARIES[0]}"))
                turn.finish(state="done")
    return captured


def _open_every_span(page):
    for node in page.locator("#spans details.span-node").all():
        if not node.evaluate("el => el.open"):
            node.locator(":scope > summary").click()


def test_span_records_nest_spans_by_parent_and_show_what_no_record_carries(page, serve, tmp_path, monkeypatch):
    captured = _record_with_span_records(tmp_path / "root", monkeypatch)
    bundle = captured.bundle
    server = serve(tmp_path / "root")
    page.goto(f"{server.url}/sessions/spans-2/runs/{bundle.run_id}#spans")
    page.wait_for_selector("#spans details.kind-run")
    ids = {span.name: f"{span.context.span_id:016x}" for span in captured.spans}
    run = page.locator("#spans ul.span-tree > li > details.kind-run")
    assert run.count() == 1 and run.get_attribute("data-span-id") == ids["invoke_agent booking"]
    turn = run.locator(":scope > ul > li > details")
    assert turn.count() == 1 and turn.get_attribute("data-span-id") == ids["turn 0"]
    children = turn.locator(":scope > ul > li > details")
    get_id = next(span_id for name, span_id in ids.items() if name.startswith("GET"))
    assert [children.nth(i).get_attribute("data-span-id") for i in range(children.count())] == [ids["message user"], get_id]
    get = children.nth(1)
    dns = get.locator(":scope > ul > li > details")  # no record of its own: nested by its span record's parent id
    assert dns.count() == 1 and dns.get_attribute("data-span-id") == ids["dns lookup"]
    assert "dns lookup" in dns.locator(":scope > summary").text_content()
    assert "recorded with span records" in page.inner_text("#spans .spans-note")  # not the note of a tree without them
    assert "error" in dns.locator(":scope > summary").text_content()
    _open_every_span(page)
    page.wait_for_selector(f"#spans details[data-span-id='{ids['dns lookup']}'] .span-record")
    text = get.locator(":scope > .span-body").inner_text()
    assert "http.request.method" in text and "GET" in text and "retries" in text  # attributes no record carries
    assert "cache miss" in text and "cache.key" in text  # a span event no record carries
    assert f"{0x1234:032x} / {0x5678:016x}" in text and "link.note" in text
    assert "my.http.lib 2.3.4" in text and "telemetry.sdk.language" in text
    assert "[phone]" in text and "[email]" in text  # the canaries' places, redacted as recorded
    assert not any(canary in page.inner_text("#spans") for canary in CANARIES)
    assert not any(canary in page.content() for canary in CANARIES)
    assert page.errors == []


def test_the_exported_page_shows_the_span_records_too(browser, tmp_path, monkeypatch):
    captured = _record_with_span_records(tmp_path / "root", monkeypatch)
    target = tmp_path / "run.html"
    target.write_text(export_html(tmp_path / "root", "spans-2", captured.bundle.run_id), encoding="utf-8")
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(target.as_uri() + "#spans")
        page.wait_for_selector("#spans details.kind-run", state="attached")
        if not page.evaluate("() => document.getElementById('spans-section').open"):
            _open_spans(page)
        _open_every_span(page)
        page.wait_for_selector("#spans .span-record table.span-attribute-table", state="attached")
        text = page.inner_text("#spans")
        assert "dns lookup" in text and "http.request.method" in text
        assert not any(canary in page.content() for canary in CANARIES)
    finally:
        context.close()
