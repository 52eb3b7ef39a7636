"""The viewer in Debian's Chromium (Playwright for Python, sync API; never a downloaded browser).

Set ``OTEL_SESSION_UPDATE_SCREENSHOTS=1`` to refresh ``docs/screenshots/*.png`` from these tests
(and ``test_browser_replay.py``'s). Fixtures ``browser``, ``page`` and ``ui`` are in conftest.
"""

from __future__ import annotations

import re
import threading
import time

import pytest

pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser


def test_sessions_page_lists_filters_sorts_and_pages(page, serve, sample, ui):
    server = serve(sample.root)
    page.goto(f"{server.url}/")
    page.wait_for_selector("body[data-ready=true]")
    rows = page.locator("#sessions tbody tr")
    assert rows.count() == 6  # five live runs and the eval run
    assert rows.first.get_attribute("data-run-id") == sample.eval_run
    assert "eval · nightly" in rows.first.inner_text()
    ui.screenshot(page, "sessions")

    def wait_total(count: int) -> None:
        page.wait_for_function(f"() => document.body.dataset.total === '{count}'")

    page.fill("#search", "call-7")
    wait_total(1)
    assert rows.count() == 1 and rows.first.get_attribute("data-session-id") == "call-7"
    assert "q=call-7" in page.url  # the query is in the URL, to share
    page.fill("#search", "sometime soon")  # message text
    wait_total(5)
    page.fill("#search", "")
    page.select_option("select[name=kind]", "eval")
    wait_total(1)
    page.select_option("select[name=kind]", "")
    wait_total(6)  # the search cleared just before the kind filter is applied with it
    page.select_option("select[name=status]", "capture_failed")
    wait_total(1)
    assert rows.first.get_attribute("data-session-id") == "broken"
    page.click("#clear-filters")
    wait_total(6)
    # Sort by session, ascending then descending.
    page.click("th[data-sort=session_id]")
    page.wait_for_function("() => document.querySelector('th[data-sort=session_id]').dataset.active === 'true'")
    page.wait_for_function("() => new URLSearchParams(location.search).get('order') === 'desc'")
    page.click("th[data-sort=session_id]")
    page.wait_for_function("() => new URLSearchParams(location.search).get('order') === 'asc'")
    page.wait_for_function("() => document.querySelector('#sessions tbody tr').dataset.sessionId === 'broken'")
    # A shared URL opens the same view.
    shared = page.context.new_page()
    shared.goto(f"{server.url}/?kind=live&sort=session_id&order=asc")
    shared.wait_for_selector("body[data-ready=true]")
    assert shared.get_attribute("body", "data-total") == "5"
    assert shared.input_value("select[name=kind]") == "live"
    assert not page.errors


def test_sessions_page_pages_through_many_runs(page, serve, live_writer):
    for number in range(120):
        run = live_writer.open_run(session_id=f"many-{number:03d}", run_id=f"run-00000000-0000-4000-8000-{number:012d}",
                                   created_at_ns=1_796_000_000_000_000_000 + number * 10**9)
        run.append("run_started", {"kind": "live", "agent": "bulk"})
        run.close(run_status="ok")
    assert live_writer.force_flush()
    server = serve(live_writer.root)
    page.goto(f"{server.url}/")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#sessions tbody tr").count() == 50
    assert page.inner_text("#count") == "1–50 of 120 runs"
    assert page.is_disabled("#prev-page")
    page.click("#next-page")
    page.wait_for_function("() => document.getElementById('count').textContent === '51–100 of 120 runs'")
    page.click("#next-page")
    page.wait_for_function("() => document.getElementById('count').textContent === '101–120 of 120 runs'")
    assert page.is_disabled("#next-page")
    assert page.locator("#sessions tbody tr").last.get_attribute("data-session-id") == "many-000"
    assert not page.errors


def test_session_page_shows_facts_of_the_latest_run(page, serve, sample, ui):
    server = serve(sample.root)
    page.goto(f"{server.url}/sessions/call-42")
    page.wait_for_selector("body[data-ready=true]")
    assert "latest run" in page.inner_text("#facts-binding")
    assert sample.latest_run in page.inner_text("#facts-binding")
    rows = page.locator("#facts tbody tr")
    assert rows.count() == 3
    first = rows.nth(0)
    assert first.locator("td.state").inner_text() == "ask_date → ask_date"
    triad = first.locator(".triad").inner_text()
    assert re.search(r"filled\s+party_size", triad) and re.search(r"missing\s+date", triad)
    assert "party_size ← nlu" in first.inner_text()
    repeated = page.locator("#facts tbody tr.repeated")
    assert repeated.count() == 1 and "asked again: date" in repeated.inner_text()
    last = rows.nth(2)
    assert "date (unattributed)" in last.inner_text()
    assert last.locator("td.verdict").inner_text() == "ask_date → confirm: slots filled"
    assert "✓ date_present" in last.inner_text()
    assert page.get_attribute("#integrity", "data-status") == "complete"
    assert page.locator("#runs tbody tr.selected").get_attribute("data-run-id") == sample.latest_run
    # What went wrong in ANY run is flagged first: the older run's failed tool too, with a link to it.
    problems = page.locator("#problem-list li")
    assert {problems.nth(i).get_attribute("data-run-id") for i in range(problems.count())} == {
        sample.latest_run, sample.older_run, sample.eval_run}
    assert "tool check_availability failed: timeout" in problems.first.inner_text()
    assert re.search(r"/runs/run-[0-9a-f-]+#seq=\d+$", problems.first.locator("a").get_attribute("href"))
    assert page.locator("#runs tbody tr", has_text="eval · nightly").count() == 1
    assert page.locator("#no-feedback").is_visible()
    page.fill("#feedback textarea", "asked for the date twice")
    page.select_option("#feedback select", "2")
    page.click("#feedback button")
    page.wait_for_function("() => document.getElementById('feedback-result').textContent.startsWith('Saved')")
    assert "(the latest run)" in page.inner_text("#feedback-result")
    # Saved: the form is cleared, the record is listed, and a second click sends nothing.
    assert page.input_value("#feedback textarea") == "" and page.input_value("#feedback select") == "3"
    page.wait_for_selector("#past-feedback tbody tr")
    assert "asked for the date twice" in page.inner_text("#past-feedback")
    page.click("#feedback button", force=True)
    page.dblclick("#feedback button", force=True)
    page.wait_for_timeout(300)
    feedback = sample.root / "sessions" / "call-42" / sample.latest_run / "feedback.ndjson"
    assert feedback.read_text().count("\n") == 1 and "asked for the date twice" in feedback.read_text()
    assert page.locator("#past-feedback tbody tr").count() == 1
    assert not page.errors


def test_a_double_click_on_send_saves_one_record(page, serve, sample):
    server = serve(sample.root)
    page.goto(f"{server.url}/sessions/call-42")
    page.wait_for_selector("body[data-ready=true]")
    page.fill("#feedback textarea", "once")
    page.dblclick("#feedback button")
    page.wait_for_function("() => document.getElementById('feedback-result').textContent.startsWith('Saved')")
    page.wait_for_selector("#past-feedback tbody tr")
    feedback = sample.root / "sessions" / "call-42" / sample.latest_run / "feedback.ndjson"
    assert feedback.read_text().count("\n") == 1
    assert not page.errors


def test_session_page_with_a_chosen_run(page, serve, sample):
    server = serve(sample.root)
    page.goto(f"{server.url}/sessions/call-42?run_id={sample.older_run}")
    page.wait_for_selector("body[data-ready=true]")
    assert page.inner_text("#facts-binding").startswith("Showing the chosen run")
    assert page.locator("#runs tbody tr.selected").get_attribute("data-run-id") == sample.older_run


def test_replay_seek_step_jump_and_play_at_10x(page, serve, sample, ui):
    server = serve(sample.root)
    page.clock.install()  # the page's timers and clocks, flowing in real time until paused below
    page.goto(f"{server.url}/sessions/call-42/runs/{sample.latest_run}")
    page.wait_for_selector("body[data-ready=true]")
    last = int(page.get_attribute("#cursor", "max"))
    assert ui.cursor(page) == last
    assert page.locator(".tool").count() == 2
    assert page.locator(".tool .status-error").count() == 1 and page.locator(".tool .status-ok").count() == 1
    assert "Friday is free." in page.inner_text("#conversation")
    ui.screenshot(page, "replay")
    # Seek into the middle of the first streamed reply: partial text, marked as streaming.
    first_delta = 8  # run_started, turn_started, user message (2), slot_write, guard, message_started, delta
    page.eval_on_selector("#cursor", "(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }", first_delta + 1)
    page.wait_for_function(f"() => document.getElementById('cursor-label').dataset.seq === '{first_delta + 1}'")
    streaming = page.locator("article.msg.partial")
    assert streaming.count() == 1 and streaming.inner_text().endswith("Which da")
    assert "Friday" not in page.inner_text("#conversation")
    page.click("#step-forward")
    page.wait_for_function(f"() => document.getElementById('cursor-label').dataset.seq === '{first_delta + 2}'")
    page.click("#step-back")
    page.click("#step-back")
    page.wait_for_function(f"() => document.getElementById('cursor-label').dataset.seq === '{first_delta}'")
    # Jump to turn 2.
    option = page.locator("#turn-jump option", has_text="turn 2")
    page.select_option("#turn-jump", option.get_attribute("value"))
    page.wait_for_function(f"() => document.getElementById('cursor-label').dataset.seq === '{option.get_attribute('value')}'")
    assert page.inner_text("#p-turn") == "2"
    # Play at 10x from the start, the page's clock stepped here one player tick (16 ms) at a time,
    # so a loaded machine cannot make it skip states: the cursor only moves forward, through
    # intermediate states, and reaches the end.
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)
    page.eval_on_selector("#cursor", "(el) => { el.value = 0; el.dispatchEvent(new Event('input')); }")
    page.clock.run_for(100)
    assert ui.cursor(page) == 0
    page.select_option("#speed", "10")
    page.click("#play")
    seen = []
    for _ in range(2000):  # journal time ≈ 100 ms per event, at 10x: a few dozen ticks
        page.clock.run_for(16)
        seen.append(ui.cursor(page))
        if page.get_attribute("body", "data-playing") == "false":  # stopped; its last position shows next frame
            page.clock.run_for(100)
            seen.append(ui.cursor(page))
            break
    assert seen[-1] == last
    assert seen == sorted(seen), seen
    assert len(set(seen)) > 3, seen  # it moved through intermediate states
    assert not page.errors


def test_follow_a_recording_run_while_a_writer_appends(page, serve, live_writer, journal, ui):
    run = live_writer.open_run(session_id="live-2", run_id="run-00000000-0000-4000-8000-000000000002", created_at_ns=journal.BASE_NS)
    script = journal.Script(run, journal.BASE_NS)
    script("run_started", {"kind": "live", "agent": "booking"})
    script("turn_started", {"state": "ask_date", "required_slots": ["date"]}, turn_index=0)
    script("message_started", {"role": "assistant"}, turn_index=0, message_id="m1")
    assert live_writer.force_flush()
    server = serve(live_writer.root)
    page.goto(f"{server.url}/sessions/live-2/runs/{run.run_id}")
    page.wait_for_selector("body[data-ready=true]")
    assert page.get_attribute("body", "data-following") == "true"
    panel_box = page.locator("#panel").bounding_box()
    stop = threading.Event()

    def produce() -> None:
        for index in range(40):
            if stop.is_set():
                return
            script("assistant_delta", {"index": 0, "kind": "text", "delta": f"word{index} "}, turn_index=0, message_id="m1")
            live_writer.force_flush()
            time.sleep(0.03)

    producer = threading.Thread(target=produce)
    producer.start()
    page.wait_for_function("() => document.getElementById('conversation').textContent.includes('word10 ')")
    assert page.locator("#panel").bounding_box() == panel_box  # fixed-size panel: no reflow while streaming
    page.wait_for_function("() => document.getElementById('conversation').textContent.includes('word39 ')")
    producer.join(10)
    assert ui.cursor(page) == 43
    # The user scrolls the conversation: follow mode detaches; new events do not move the cursor.
    page.mouse.move(300, 500)
    page.locator("#conversation").dispatch_event("wheel")
    page.wait_for_selector("body[data-following=false]")
    ui.screenshot(page, "replay-follow")
    script("assistant_delta", {"index": 0, "kind": "text", "delta": "late "}, turn_index=0, message_id="m1")
    live_writer.force_flush()
    page.wait_for_function("() => Number(document.getElementById('cursor').max) === 44")
    assert ui.cursor(page) == 43
    page.click("#follow")
    page.wait_for_function("() => document.getElementById('cursor-label').dataset.seq === '44'")
    assert page.get_attribute("body", "data-following") == "true"
    # The run ends: the stream ends, integrity turns complete, follow mode goes away.
    run.close(run_status="ok")
    live_writer.force_flush()
    page.wait_for_function("() => document.getElementById('integrity').dataset.status === 'complete'")
    page.wait_for_selector("#follow", state="hidden")
    assert page.locator("#panel").bounding_box() == panel_box
    stop.set()
    assert not page.errors


def test_open_a_downloaded_bundle_offline(page, serve, sample, tmp_path, ui):
    server = serve(sample.root)
    page.goto(f"{server.url}/sessions/call-42/runs/{sample.latest_run}")
    page.wait_for_selector("body[data-ready=true]")
    with page.expect_download() as download_info:
        page.click("#download")  # the page's own link: nobody needs to know the API's URL
    bundle_file = tmp_path / "bundle.tar"
    download_info.value.save_as(bundle_file)
    # A fresh page with the server's API blocked: the replay must come from the file alone.
    offline = page.context.new_page()
    api_calls = []
    offline.route("**/api/**", lambda route: (api_calls.append(route.request.url), route.abort()))
    offline.goto(f"{server.url}/open")
    # Empty, the page says what it is for; the replay controls wait for a file.
    assert offline.locator("#offline-help").is_visible()
    assert "Download bundle" in offline.inner_text("#offline-help")
    assert not offline.locator("#controls").is_visible() and not offline.locator("#timeline").is_visible()
    ui.screenshot(offline, "offline-empty")
    # A file that is not a bundle is reported; a good one then clears that error.
    not_a_bundle = tmp_path / "notes.tar"
    not_a_bundle.write_bytes(b"hello" * 200)
    offline.set_input_files("#bundle-file", str(not_a_bundle))
    offline.wait_for_selector("#error:not([hidden])")
    assert "not a bundle download" in offline.inner_text("#error")
    offline.set_input_files("#bundle-file", str(bundle_file))
    offline.wait_for_selector("body[data-ready=true]")
    assert offline.get_attribute("body", "data-mode") == "offline"
    assert offline.locator("#error").is_hidden() and offline.inner_text("#error") == ""
    assert not offline.locator("#offline-help").is_visible()
    assert "Friday is free." in offline.inner_text("#conversation")
    assert offline.get_attribute("#integrity", "data-status") == "complete"
    assert int(offline.get_attribute("#cursor", "max")) == int(page.get_attribute("#cursor", "max"))
    offline.eval_on_selector("#cursor", "(el) => { el.value = 9; el.dispatchEvent(new Event('input')); }")
    offline.wait_for_function("() => document.getElementById('cursor-label').dataset.seq === '9'")
    assert offline.locator("article.msg.partial").inner_text().endswith("Which da")
    ui.screenshot(offline, "offline")
    assert api_calls == []


def test_offline_bundle_shows_its_integrity_problems(page, serve, sample, tmp_path):
    import tarfile

    run_dir = sample.root / "sessions" / "call-42" / sample.latest_run
    events = run_dir / "events.ndjson"
    lines = events.read_bytes().splitlines(keepends=True)
    events.write_bytes(b"".join(lines[:5] + lines[6:]) + b'{"seq": 99, "torn')
    (run_dir / "capture.json").unlink()
    archive_path = tmp_path / "damaged.tar"
    with tarfile.open(archive_path, "w", format=tarfile.USTAR_FORMAT) as archive:
        for name in ("run.json", "events.ndjson"):
            archive.add(run_dir / name, arcname=f"{sample.latest_run}/{name}")
    server = serve(sample.root)
    page.goto(f"{server.url}/open")
    page.set_input_files("#bundle-file", str(archive_path))
    page.wait_for_selector("body[data-ready=true]")
    assert page.get_attribute("#integrity", "data-status") == "invalid"
    labels = page.inner_text("#integrity")
    for label in ("missing capture", "gap", "torn tail"):
        assert label in labels


def test_failed_capture_and_upstream_drop_have_their_own_labels(page, serve, live_writer):
    run = live_writer.open_run(session_id="failing", run_id="run-00000000-0000-4000-8000-000000000003")
    run.append("run_started", {"kind": "live"})
    run.append("upstream_drop", {"dropped_events": 3, "dropped_attributes": 0})
    run.append("assistant_delta", {"index": 0, "kind": "text", "delta": "x" * (2 << 20)}, message_id="m1")  # over 1 MiB
    live_writer.force_flush()
    run.wait_sealed(5)
    server = serve(live_writer.root)
    page.goto(f"{server.url}/sessions/failing/runs/{run.run_id}")
    page.wait_for_selector("body[data-ready=true]")
    labels = page.inner_text("#integrity")
    assert "failed capture: event_too_large" in labels
    assert "upstream drop" in labels


def test_journal_markup_is_shown_as_text_and_never_runs(page, serve, sample, journal):
    XSS_TEXT = journal.XSS_TEXT
    server = serve(sample.root)
    for url in (f"/sessions/xss/runs/{sample.xss_run}", "/sessions/xss", "/"):
        page.goto(f"{server.url}{url}")
        page.wait_for_selector("body[data-ready=true]")
        page.wait_for_timeout(200)
        assert page.evaluate("window.__xss === undefined"), url
        assert page.locator("#conversation img, #facts img, #sessions img, main script").count() == 0
    page.goto(f"{server.url}/sessions/xss/runs/{sample.xss_run}")
    page.wait_for_selector("body[data-ready=true]")
    assert XSS_TEXT in page.inner_text("#conversation")
    page.goto(f"{server.url}/sessions/xss")
    page.wait_for_selector("body[data-ready=true]")
    assert XSS_TEXT[:40] in page.inner_text("#facts")
    assert page.evaluate("window.__xss === undefined")


def test_a_seq_gap_in_the_live_stream_reloads_the_snapshot(page, serve, tmp_path, ui):
    """Partial recovery is forbidden: on a gap the page drops its state and reloads `…/events`."""
    import json

    run_id = "run-00000000-0000-4000-8000-000000000004"
    run_dir = tmp_path / "gap-root" / "sessions" / "gappy" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"schema": "otel-session.run.v1", "session_id": "gappy", "run_id": run_id,
                                                  "kind": "live", "created_at": "2026-11-30T00:00:00.000000Z", "service": "t"}))
    (run_dir / "capture.json").write_text(json.dumps({"schema": "otel-session.capture.v1", "status": "recording", "event_count": 0}))

    def line(seq: int, text: str) -> str:
        return json.dumps({"seq": seq, "at": f"2026-11-30T00:00:0{seq}.000000Z", "type": "assistant_delta", "session_id": "gappy",
                           "run_id": run_id, "message_id": "m1", "payload": {"index": 0, "kind": "text", "delta": text}}) + "\n"

    events = run_dir / "events.ndjson"
    events.write_text(line(1, "one ") + line(2, "two "))
    snapshots = []
    page.on("request", lambda request: snapshots.append(request.url) if "/events?" in request.url else None)
    server = serve(tmp_path / "gap-root")
    page.goto(f"{server.url}/sessions/gappy/runs/{run_id}")
    page.wait_for_selector("body[data-ready=true]")
    assert len(snapshots) == 1
    with events.open("a") as handle:
        handle.write(line(4, "four "))  # seq 3 never arrives
    page.wait_for_function("() => document.getElementById('conversation').textContent.includes('four')")
    page.wait_for_function("() => document.getElementById('integrity').textContent.includes('gap')")
    assert len(snapshots) == 2
    with events.open("a") as handle:
        handle.write(line(5, "five "))
    page.wait_for_function("() => document.getElementById('conversation').textContent.includes('five')")
    assert len(snapshots) == 2  # the next record continues the stream: no further reload
    assert ui.cursor(page) == 5


def test_session_wide_facts_show_repeated_asks_across_runs(page, serve, sample):
    server = serve(sample.root)
    page.goto(f"{server.url}/sessions/call-42")
    page.wait_for_selector("body[data-ready=true]")
    section = page.locator("#session-wide")
    assert section.is_visible()
    rows = page.locator("#session-facts tbody tr")
    assert rows.count() == 6  # two live runs of three turns (the eval run is not part of it)
    assert page.locator("#session-facts tbody tr.repeated").count() == 2
    repeats = page.inner_text("#session-repeats")
    assert f"date asked again in {sample.latest_run[:12]} turn 1, asked before in {sample.latest_run[:12]} turn 0" in repeats
    assert not page.errors


def test_session_wide_facts_stay_hidden_where_the_server_has_none(page, serve, sample):
    """A viewer whose API answers one run's facts for ?scope=session leaves the section out."""
    server = serve(sample.root)
    page.route("**/facts?scope=session", lambda route: route.fulfill(status=400, content_type="application/json",
                                                                     body='{"error": "bad_parameter", "message": "no scope"}'))
    page.goto(f"{server.url}/sessions/call-42")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#session-wide").is_hidden()
    assert page.locator("#error").is_hidden()
    assert not [error for error in page.errors if "Failed to load resource" not in error]  # the browser logs the 400


def test_markup_in_every_new_view_is_text_and_never_runs(page, serve, live_writer, journal, tmp_path):
    """Hostile strings in every field the new views show: agent, service, eval id, state names,
    verdict reasons, tool names, arguments and errors, model names, message text, feedback, voice
    latency keys and values (only the known keys, as numbers, are ever shown)."""
    xss = journal.XSS_TEXT
    run = live_writer.open_run(session_id="hostile", run_id="run-00000000-0000-4000-8000-0000000000e5", kind="eval", eval_id=xss,
                               agent=xss, service=xss, created_at_ns=journal.BASE_NS)
    script = journal.Script(run, journal.BASE_NS)
    script("run_started", {"kind": "eval", "agent": xss, "eval_id": xss})
    script("turn_started", {"state": xss, "required_slots": []}, turn_index=0)
    script("message_started", {"role": "system"}, turn_index=0, message_id="s")
    script("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": xss}]}, turn_index=0, message_id="s")
    script("message_started", {"role": "assistant"}, turn_index=0, message_id="a")
    script("assistant_delta", {"index": 0, "kind": "text", "delta": xss}, turn_index=0, message_id="a")
    script("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": xss}], "model": xss,
                                "usage": {"input_tokens": 1, "output_tokens": 1}}, turn_index=0, message_id="a")
    script("tool_execution_started", {"name": xss, "arguments": {xss: xss}}, turn_index=0, tool_call_id="t")
    script("tool_execution_finished", {"status": "error", "error": xss}, turn_index=0, tool_call_id="t")
    script("transition_verdict", {"from": xss, "to": "done", "reason": xss, "candidates": ["done"]}, turn_index=0)
    latency = {xss: xss, "user_to_agent_ms": 2000, "stt_ms": xss, "llm_ttft_ms": 300}
    script("turn_finished", {"state": "done", "required_slots": [], "missing_required_slots": [], "latency": latency}, turn_index=0)
    run.close(run_status="error")
    # A live run of the same session, so the session-wide facts (model names, latency) show too.
    live = live_writer.open_run(session_id="hostile", run_id="run-00000000-0000-4000-8000-0000000000e6", agent=xss,
                                created_at_ns=journal.BASE_NS + 10**10)
    live_script = journal.Script(live, journal.BASE_NS + 10**10)
    live_script("run_started", {"kind": "live", "agent": xss})
    live_script("turn_started", {"state": xss, "required_slots": []}, turn_index=0)
    live_script("message_started", {"role": "assistant"}, turn_index=0, message_id="a")
    live_script("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": xss}], "model": xss,
                                     "usage": {"input_tokens": 2, xss: 3}}, turn_index=0, message_id="a")
    live_script("turn_finished", {"state": xss, "latency": latency}, turn_index=0)
    live.close(run_status="ok")
    assert live_writer.force_flush()
    server = serve(live_writer.root)
    page.request.post(f"{server.url}/api/sessions/hostile/feedback", data={"rating": 1, "comment": xss})

    def clean(where: str) -> None:
        page.wait_for_timeout(100)
        assert page.evaluate("window.__xss === undefined"), where
        assert page.locator("main img, main script, svg img, svg script, svg foreignObject").count() == 0, where

    page.goto(f"{server.url}/")
    page.wait_for_selector("body[data-ready=true]")
    assert xss in page.inner_text("#sessions") and page.locator(f"select[name=eval_id] option[value='{xss}']").count() == 1
    clean("sessions")
    page.goto(f"{server.url}/sessions/hostile")
    page.wait_for_selector("body[data-ready=true]")
    assert xss in page.inner_text("#problem-list") and xss in page.inner_text("#past-feedback")
    assert page.inner_text("#facts td.model-calls") == f"{xss} · 2 in / ? out"
    assert page.inner_text("#facts td.latency") == "2000 ms (llm 300) SLOW"
    assert page.locator("#session-facts tbody tr.slow").count() == 1 and "whole session: p50 2000 ms" in page.inner_text("#session-latency")
    clean("session")
    page.goto(f"{server.url}/sessions/hostile?run_id={run.run_id}")
    page.wait_for_selector("body[data-ready=true]")
    assert page.inner_text("#facts td.model-calls") == f"{xss} · 1 in / 1 out"
    clean("session, eval run")
    page.goto(f"{server.url}/sessions/hostile/runs/{run.run_id}")
    page.wait_for_selector("body[data-ready=true]")
    assert xss in page.locator("#timeline").text_content() and xss in page.locator("#graph").text_content()
    assert page.locator("#timeline g.span.kind-turn .value").text_content().endswith(" · voice 2000 ms")
    spans = page.locator("#timeline g.span")
    for index in range(spans.count()):
        spans.nth(index).locator(".label").click()
        page.locator("#details details.raw summary").click()
        clean(f"details {index}")
    assert xss in page.inner_text("#details")
    clean("replay")
    with page.expect_download() as download:
        page.click("#download")
    bundle_file = tmp_path / "hostile.tar"
    download.value.save_as(bundle_file)
    page.goto(f"{server.url}/open")
    page.set_input_files("#bundle-file", str(bundle_file))
    page.wait_for_selector("body[data-ready=true]")
    assert xss in page.locator("#graph").text_content()
    clean("offline")
    page.goto(f"{server.url}/compare?left=hostile/{run.run_id}&right=hostile/{run.run_id}")
    page.wait_for_selector("body[data-ready=true]")
    assert xss in page.inner_text("#compare")
    clean("compare")
    assert not page.errors


def test_the_session_page_refreshes_while_a_run_records(page, serve, live_writer, journal):
    run = live_writer.open_run(session_id="recording", run_id="run-00000000-0000-4000-8000-0000000000a7", created_at_ns=journal.BASE_NS)
    script = journal.Script(run, journal.BASE_NS)
    script("run_started", {"kind": "live", "agent": "booking"})
    script("turn_started", {"state": "ask_date", "required_slots": ["date"]}, turn_index=0)
    assert live_writer.force_flush()
    server = serve(live_writer.root)
    page.goto(f"{server.url}/sessions/recording")
    page.wait_for_selector("body[data-ready=true]")
    row = page.locator(f"#runs tbody tr[data-run-id='{run.run_id}']")
    assert row.get_attribute("data-status") == "running" and "recording" in row.inner_text()
    script("tool_execution_started", {"name": "lookup", "arguments": {}}, turn_index=0, tool_call_id="t1")
    script("tool_execution_finished", {"status": "error", "error": "down"}, turn_index=0, tool_call_id="t1")
    script("run_finished", {"status": "ok"})
    run.close()
    assert live_writer.force_flush()
    page.wait_for_function(f"() => document.querySelector(\"#runs tbody tr[data-run-id='{run.run_id}']\").dataset.status === 'error'",
                           timeout=15_000)
    assert "tool lookup failed: down" in page.inner_text("#problem-list")
    assert not page.errors
