"""The replay page's timeline, details, keyboard, shared position and state graph in Debian's
Chromium (fixtures: ``browser``, ``page``, ``ui`` in conftest)."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser


def _next_frame(page) -> None:
    """Wait until the page has drawn what it queued: a pause's position is drawn in the next frame
    (on a loaded machine the label still showed the frame before it)."""
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => done()))")


def test_timeline_waterfall_cursor_and_click_to_seek(page, serve, sample, ui):
    server = serve(sample.root)
    page.goto(f"{server.url}/sessions/call-42/runs/{sample.latest_run}")
    page.wait_for_selector("body[data-ready=true]")
    rows = page.locator("#timeline g.span")
    kinds = [rows.nth(i).get_attribute("data-kind") for i in range(rows.count())]
    assert kinds.count("turn") == 3 and kinds.count("message") == 6 and kinds.count("tool") == 2
    failed = page.locator("#timeline g.span.kind-tool.error")
    assert failed.count() == 1
    assert page.eval_on_selector("#timeline g.span.kind-tool.error .bar", "el => getComputedStyle(el).fill") == "rgb(180, 35, 24)"
    # Durations and the time to first delta are read off the rows: turn 0 ran 1.4 s, its reply streamed after 100 ms.
    first_turn = rows.nth(0).locator(".value").text_content()
    assert first_turn == "1.4 s", first_turn
    assert "first delta 100 ms" in page.locator("#timeline g.span.kind-message").nth(1).locator(".value").text_content()
    # The cursor is a line across the rows; it moves right as the cursor moves on.
    xs = []
    for seq in (1, 10, 30):
        ui.seek_to(page, seq)
        assert page.get_attribute("#timeline-cursor", "data-seq") == str(seq)
        xs.append(float(page.get_attribute("#timeline-cursor", "x1")))
    assert xs == sorted(xs) and xs[0] < xs[-1]
    assert page.locator("#timeline g.span.future").count() > 0
    # Clicking a bar seeks to its first record and shows its details.
    start = int(failed.get_attribute("data-start-seq"))
    failed.locator(".bar").click()
    page.wait_for_function(f"() => document.getElementById('cursor-label').dataset.seq === '{start}'")
    details = page.locator("#details")
    assert details.is_visible()
    text = details.inner_text()
    assert "check_availability" in text and "timeout" in text and "error" in text and '"date": "h:1f2e"' in text
    assert details.locator("details.raw").get_attribute("open") is None  # raw JSON starts collapsed
    details.locator("details.raw summary").click()
    assert details.locator("pre.json .j-key", has_text='"tool_call_id"').count() == 3
    ui.screenshot(page, "timeline-details")
    page.click("#details-close")
    assert not details.is_visible()
    # A message in the conversation opens its full text; the record at the cursor opens its JSON.
    page.locator("article.msg[data-message-id=m-u0]").click()
    assert details.is_visible() and "table for 2" in details.inner_text()
    page.click("#p-event")
    assert f"record #{start}" in details.inner_text()
    assert not page.errors


def test_a_model_call_shows_its_model_tokens_and_first_delta(page, serve, live_writer, journal):
    run = live_writer.open_run(session_id="llm", run_id="run-00000000-0000-4000-8000-0000000000c1", created_at_ns=journal.BASE_NS)
    script = journal.Script(run, journal.BASE_NS)
    script("run_started", {"kind": "live", "agent": "llm"})
    script("turn_started", {"state": "chat", "required_slots": []}, turn_index=0)
    script("message_started", {"role": "system"}, turn_index=0, message_id="sys")
    script("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "You are a booking agent."}]},
           turn_index=0, message_id="sys")
    script("message_started", {"role": "assistant"}, turn_index=0, message_id="a1")
    script.at_ns += 300_000_000  # the model thinks 300 ms before its first token
    script("assistant_delta", {"index": 0, "kind": "text", "delta": "Hello"}, turn_index=0, message_id="a1")
    script("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "Hello"}], "model": "gpt-test-mini",
                                "usage": {"input_tokens": 120, "output_tokens": 7}}, turn_index=0, message_id="a1")
    script("turn_finished", {"state": "chat", "required_slots": [], "missing_required_slots": []}, turn_index=0)
    run.close(run_status="ok")
    assert live_writer.force_flush()
    server = serve(live_writer.root)
    page.goto(f"{server.url}/sessions/llm/runs/{run.run_id}")
    page.wait_for_selector("body[data-ready=true]")
    model = page.locator("#timeline g.span.kind-model")
    assert model.count() == 1
    assert model.locator(".label").text_content() == "model call · gpt-test-mini"
    assert "first delta 400 ms" in model.locator(".value").text_content()
    model.click()
    text = page.inner_text("#details")
    for expected in ("gpt-test-mini", "input tokens\n120", "output tokens\n7", "first delta after\n400 ms", "Hello"):
        assert expected in text, (expected, text)
    page.locator("#timeline g.span[data-key='m:sys']").click()
    assert "You are a booking agent." in page.inner_text("#details")  # the system prompt in full
    # The sessions list counts the model call and its tokens.
    page.goto(f"{server.url}/")
    page.wait_for_selector("body[data-ready=true]")
    assert "120 in / 7 out" in page.inner_text("#sessions tbody tr")
    assert not page.errors


def test_a_turn_closed_by_a_frameworks_state_with_no_index_draws_no_turn_bar(page, serve, live_writer, journal):
    """pydantic-ai's declared slots close the turn its user message opened with a turn_finished
    that has no index (normalize/state.py): the waterfall shows the messages, not a "turn ?"."""
    run = live_writer.open_run(session_id="pyd", run_id="run-00000000-0000-4000-8000-0000000000d1", created_at_ns=journal.BASE_NS)
    script = journal.Script(run, journal.BASE_NS)
    script("run_started", {"kind": "live", "agent": "booker"})
    script("message_started", {"role": "user"}, message_id="u1")
    script("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "A table for 2"}]}, message_id="u1")
    script("message_started", {"role": "assistant"}, message_id="a1")
    script("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "Booked"}]}, message_id="a1")
    script("slot_write", {"slot": "party_size", "value": 2, "previous": None, "source": "output"})
    script("turn_finished", {"required_slots": ["party_size", "date"], "missing_required_slots": ["date"]})
    run.close(run_status="ok")
    assert live_writer.force_flush()
    page.goto(f"{serve(live_writer.root).url}/sessions/pyd/runs/{run.run_id}")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#timeline g.span.kind-message").count() == 2
    assert page.locator("#timeline g.span.kind-turn").count() == 0
    assert "turn ?" not in page.inner_text("#timeline")
    assert not page.errors


def _long_run(writer, journal, run_id: str, messages: int = 30):
    run = writer.open_run(session_id="long", run_id=run_id, created_at_ns=journal.BASE_NS)
    script = journal.Script(run, journal.BASE_NS)
    script("run_started", {"kind": "live", "agent": "talker"})
    for index in range(messages):
        script("turn_started", {"state": "chat", "required_slots": []}, turn_index=index)
        script.message("user", f"u{index}", f"question number {index}\n" * 3, turn=index)
        script.message("assistant", f"a{index}", f"answer number {index} " * 12, turn=index, stream=True)
        script("turn_finished", {"state": "chat", "required_slots": [], "missing_required_slots": []}, turn_index=index)
    run.close(run_status="ok")
    assert writer.force_flush()
    return run


def _cursor_item_in_view(page) -> bool:
    """True when the conversation item of the record at the cursor is inside the pane's visible box."""
    return page.evaluate("""() => {
        const pane = document.getElementById('conversation');
        const seq = Number(document.getElementById('cursor-label').dataset.seq);
        const items = [...pane.children];
        const last = items[items.length - 1];
        if (!last) return true;
        const box = pane.getBoundingClientRect(), item = last.getBoundingClientRect();
        return item.bottom <= box.bottom + 1 && item.bottom >= box.top;
    }""")


def test_replay_follows_the_cursor_keyboard_and_shared_position(page, serve, live_writer, journal, ui):
    run = _long_run(live_writer, journal, "run-00000000-0000-4000-8000-0000000000d1")
    server = serve(live_writer.root)
    url = f"{server.url}/sessions/long/runs/{run.run_id}"
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]")
    last = int(page.get_attribute("#cursor", "max"))
    page.focus("body")
    page.keyboard.press("Home")
    page.wait_for_function("() => document.getElementById('cursor-label').dataset.seq === '0'")
    assert page.evaluate("document.getElementById('conversation').scrollTop") == 0
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.getElementById('cursor-label').dataset.seq === '2'")
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("() => document.getElementById('cursor-label').dataset.seq === '1'")
    page.keyboard.press("End")
    page.wait_for_function(f"() => document.getElementById('cursor-label').dataset.seq === '{last}'")
    assert page.evaluate("location.hash") == f"#seq={last}"
    # A seek into the middle scrolls the conversation there (it held 30 turns; the pane shows a few).
    middle = last // 2
    ui.seek_to(page, middle)
    page.wait_for_function(f"() => location.hash === '#seq={middle}'")
    assert page.evaluate("document.getElementById('conversation').scrollTop") > 0
    assert _cursor_item_in_view(page)
    # Play (space) from the start at 10x: the pane keeps the newest item in view while it plays.
    page.keyboard.press("Home")
    page.select_option("#speed", "10")
    page.focus("body")
    page.keyboard.press(" ")
    page.wait_for_selector("body[data-playing=true]")
    checks = []
    for _ in range(12):
        page.wait_for_timeout(150)
        checks.append(_cursor_item_in_view(page))
    assert all(checks), checks
    assert page.evaluate("document.getElementById('conversation').scrollTop") > 0
    page.focus("#cursor")  # space on the scrubber plays and pauses too
    page.keyboard.press(" ")
    page.wait_for_selector("body[data-playing=false]")
    _next_frame(page)
    paused = ui.cursor(page)
    page.wait_for_timeout(200)
    assert ui.cursor(page) == paused
    page.wait_for_function(f"() => location.hash === '#seq={paused}'")  # where it stopped, to share
    # The URL keeps the position: a fresh page opens there.
    shared = page.context.new_page()
    shared.goto(f"{url}#seq=9")
    shared.wait_for_selector("body[data-ready=true]")
    shared.wait_for_function("() => document.getElementById('cursor-label').dataset.seq === '9'")
    assert shared.locator("article.msg.partial").count() == 1
    assert not page.errors


LONG_STATE = "confirm_the_booking_with_the_caller_and_read_back_every_detail_they_gave"


def _graph_run(writer, journal):
    """States ask_date → ask_date (loop) → ask_party → ask_date (back) → a long-named state."""
    run = writer.open_run(session_id="graph", run_id="run-00000000-0000-4000-8000-0000000000f1", created_at_ns=journal.BASE_NS)
    script = journal.Script(run, journal.BASE_NS)
    script("run_started", {"kind": "live", "agent": "booking"})
    path = [("ask_date", "ask_date", "no date yet"), ("ask_date", "ask_party", "date given"), ("ask_party", "ask_date", "date withdrawn"),
            ("ask_date", "ask_party", "date given"), ("ask_party", LONG_STATE, "all slots filled")]
    for turn, (before, after, reason) in enumerate(path):
        script("turn_started", {"state": before, "required_slots": []}, turn_index=turn)
        script.message("user", f"u{turn}", f"turn {turn}", turn=turn)
        script("transition_verdict", {"from": before, "to": after, "reason": reason, "candidates": [after]}, turn_index=turn)
        script("turn_finished", {"state": after, "required_slots": [], "missing_required_slots": []}, turn_index=turn)
    run.close(run_status="ok")
    assert writer.force_flush()
    return run


def test_state_graph_cards_keep_one_size_while_replay_moves(page, serve, live_writer, journal, ui):
    run = _graph_run(live_writer, journal)
    server = serve(live_writer.root)
    page.goto(f"{server.url}/sessions/graph/runs/{run.run_id}")
    page.wait_for_selector("body[data-ready=true]")
    nodes = page.locator("#graph g.node")
    assert [nodes.nth(i).get_attribute("data-state") for i in range(nodes.count())] == ["ask_date", "ask_party", LONG_STATE]
    # The long name is shown in full (wrapped), never cut with an ellipsis.
    long_card = page.locator(f"#graph g.node[data-state='{LONG_STATE}']")
    assert "".join(long_card.locator("text.name").all_text_contents()) == LONG_STATE
    assert long_card.locator("text.name").count() > 1
    assert "…" not in page.inner_text("#graph")

    def boxes() -> list[dict]:
        return page.eval_on_selector_all("#graph g.node", "els => els.map(el => { const r = el.getBoundingClientRect(); "
                                         "return {x: r.x, y: r.y, w: r.width, h: r.height}; })")

    page.locator("#graph").scroll_into_view_if_needed()
    at_end = boxes()
    assert len({(box["w"], box["h"]) for box in at_end}) == 1  # one canonical size for every card
    edges = page.locator("#graph g.edge")
    routes_at_end = [edges.nth(i).locator("path").get_attribute("d") for i in range(edges.count())]
    last = int(page.get_attribute("#cursor", "max"))
    for seq in (0, 2, 6, 11, 17, last // 2, last - 3, last):
        ui.seek_to(page, seq)
        page.wait_for_timeout(30)
        assert boxes() == at_end, seq
        assert [edges.nth(i).locator("path").get_attribute("d") for i in range(edges.count())] == routes_at_end, seq
        current = page.locator("#graph g.node.current")
        state = page.inner_text("#p-state")
        if state == "–":
            assert current.count() == 0, seq
        else:
            assert current.count() == 1 and current.get_attribute("data-state") == state, seq
    # At the end: counts of entries, and the verdicts as labelled edges.
    entered = {nodes.nth(i).get_attribute("data-state"): nodes.nth(i).get_attribute("data-entered") for i in range(nodes.count())}
    assert entered == {"ask_date": "3", "ask_party": "2", LONG_STATE: "1"}
    loop = page.locator("#graph g.edge[data-from=ask_date][data-to=ask_date]")
    assert loop.locator("text.edge-label").text_content() == "no date yet"
    forward = page.locator("#graph g.edge[data-from=ask_date][data-to=ask_party]")
    assert forward.locator("text.edge-label").text_content() == "date given ×2"
    ui.seek_to(page, 2)
    assert page.locator("#graph g.edge.future").count() == edges.count()
    ui.seek_to(page, last)
    ui.screenshot(page, "state-graph")
    assert not page.errors


def test_compare_an_eval_run_with_a_live_run_turn_by_turn(page, serve, live_writer, journal, ui):
    live = live_writer.open_run(session_id="cmp", run_id="run-00000000-0000-4000-8000-0000000000b1", created_at_ns=journal.BASE_NS)
    script = journal.Script(live, journal.BASE_NS)
    journal.record_booking(script)
    script("run_finished", {"status": "ok"})
    live.close()
    evaluation = live_writer.open_run(session_id="cmp", run_id="run-00000000-0000-4000-8000-0000000000b2", kind="eval", eval_id="nightly",
                                      created_at_ns=journal.BASE_NS + 10**10)
    script = journal.Script(evaluation, journal.BASE_NS + 10**10)
    script("run_started", {"kind": "eval", "agent": "booking"})
    script("turn_started", {"state": "ask_date", "required_slots": ["date", "party_size"]}, turn_index=0)
    script("slot_write", {"slot": "date", "value": "h:1", "previous": None, "source": "nlu"}, turn_index=0)
    script("transition_verdict", {"from": "ask_date", "to": "confirm", "reason": "date given", "candidates": ["confirm"]}, turn_index=0)
    script("turn_finished", {"state": "confirm", "required_slots": ["date", "party_size"], "missing_required_slots": ["party_size"]},
           turn_index=0)
    script("run_finished", {"status": "ok"})
    evaluation.close()
    assert live_writer.force_flush()
    server = serve(live_writer.root)
    page.goto(f"{server.url}/?q=cmp")
    page.wait_for_function("() => document.body.dataset.total === '2'")
    assert page.locator("#compare-link").is_hidden()
    for box in page.locator("#sessions input.pick").all():
        box.check()
    page.click("#compare-link")
    page.wait_for_selector("body[data-ready=true]")
    rows = page.locator("#compare tbody tr")
    assert rows.count() == 3  # the eval run has one turn, the live run three
    first = rows.nth(0)
    assert first.get_attribute("class") == "differs"
    assert "ask_date → confirm" in first.inner_text() and "ask_date → ask_date" in first.inner_text()
    assert "date given" in first.inner_text()
    assert page.locator("#compare tbody tr.differs").count() == 3
    assert page.inner_text("#compare-summary") == "3 turns; 3 differ."
    ui.screenshot(page, "compare")
    assert not page.errors


def test_the_timeline_keeps_its_cursor_when_the_window_resizes(page, serve, sample, ui):
    server = serve(sample.root)
    page.goto(f"{server.url}/sessions/call-42/runs/{sample.latest_run}")
    page.wait_for_selector("body[data-ready=true]")
    ui.seek_to(page, 30)
    before = float(page.get_attribute("#timeline-cursor", "x1"))
    assert before > 240  # past the label column: the cursor is inside the run
    page.set_viewport_size({"width": 1000, "height": 900})
    page.wait_for_function(f"() => Number(document.getElementById('timeline-cursor').getAttribute('x1')) < {before}")
    after = float(page.get_attribute("#timeline-cursor", "x1"))
    assert after > 240 and page.get_attribute("#timeline-cursor", "data-seq") == "30"
    assert not page.errors


def _record_long_run(writer, turns: int) -> object:
    """A sealed run of ``turns`` turns of 166 records (a streamed reply of 160 deltas), through the writer."""
    run = writer.open_run(session_id="long", run_id="run-00000000-0000-4000-8000-0000000000f1", created_at_ns=1_796_000_000_000_000_000)
    at = 1_796_000_000_000_000_000
    for turn in range(turns):
        ids = {"turn_index": turn, "message_id": f"a{turn}"}
        steps = [("turn_started", {"state": f"s{turn % 4}", "required_slots": []}, {"turn_index": turn}),
                 ("message_started", {"role": "user"}, {"turn_index": turn, "message_id": f"u{turn}"}),
                 ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": f"question {turn}"}]},
                  {"turn_index": turn, "message_id": f"u{turn}"}),
                 ("message_started", {"role": "assistant"}, ids)]
        steps += [("assistant_delta", {"index": 0, "kind": "text", "delta": f"w{n} "}, ids) for n in range(160)]
        steps += [("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": f"answer {turn}"}]}, ids),
                  ("turn_finished", {"state": f"s{(turn + 1) % 4}", "missing_required_slots": []}, {"turn_index": turn})]
        for event_type, payload, event_ids in steps:
            at += 10_000_000
            run.append(event_type, payload, at_ns=at, **event_ids)
        if turn % 10 == 9:
            writer.force_flush()
    run.close(run_status="ok")
    assert run.wait_sealed(120)
    return run


def test_a_long_run_is_usable_after_a_bounded_number_of_bytes(page, serve, live_writer, ui):
    """50,000 records (about 8 MB of journal): the page paints from the checkpoint view at the
    cursor, one window of records and the turn summaries, and seeks by fetching another window."""
    from otel_session.bundle.read import read_bundle
    from otel_session.replay.facts import run_events
    from otel_session.replay.reduce import replay_state

    run = _record_long_run(live_writer, 302)  # 302 × 166 = 50,132 records
    journal_bytes = (run.path / "events.ndjson").stat().st_size
    server = serve(live_writer.root)
    responses = []
    page.on("response", lambda response: responses.append(response))
    page.goto(f"{server.url}/sessions/long/runs/{run.run_id}")
    page.wait_for_selector("body[data-ready=true]", timeout=120_000)
    fetched = sum(len(response.body()) for response in responses)
    api_calls = [response.url for response in responses if "/api/" in response.url]
    assert journal_bytes > 7_000_000
    assert fetched < 1_500_000, f"{fetched:,} bytes fetched before the page was usable"
    assert any("/turns" in url for url in api_calls) and any("recent=" in url for url in api_calls)
    events = run_events(read_bundle(run.path))
    last = events[-1]["seq"]
    assert ui.cursor(page) == last
    assert page.locator("#timeline g.span.kind-turn").count() == 302  # drawn from the turn summaries
    assert page.locator("article.msg").last.inner_text().endswith("answer 301")
    assert "earlier messages not loaded" in page.locator("#omitted").inner_text()
    # Seek far back: another window, and the conversation and panel agree with the Python reducer.
    for seq in (20_000, 20_001, 166 * 40 + 50):
        responses.clear()
        ui.seek_to(page, seq)
        page.wait_for_selector("body[data-loading-window=false]")
        expected = replay_state(events, seq)
        assert page.locator("#p-turn").inner_text() == str(expected["turn_index"])
        assert page.locator("#p-state").inner_text() == expected["state"]
        streaming = expected["messages"][-1]
        shown = page.locator(f"article.msg[data-message-id={streaming['message_id']}]").inner_text()
        assert streaming["blocks"][0]["text"].strip() in shown
        assert sum(len(response.body()) for response in responses) < 1_000_000
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"() => document.getElementById('cursor-label').dataset.seq === '{166 * 40 + 51}'")
    # Play on past the window's end (2,048 records past the cursor): the next windows arrive on the way.
    page.select_option("#speed", "10")
    start = ui.cursor(page)
    page.click("#play")
    page.wait_for_function(f"() => Number(document.getElementById('cursor-label').dataset.seq) > {start + 3000}", timeout=120_000)
    page.click("#play")
    page.wait_for_selector("body[data-playing=false]")
    page.wait_for_selector("body[data-loading-window=false]")
    _next_frame(page)
    seq = ui.cursor(page)
    expected = replay_state(events, seq)
    assert page.locator("#p-turn").inner_text() == str(expected["turn_index"])
    newest = expected["messages"][-1]  # playback may stop right after it started: no block yet
    article = page.locator(f"article.msg[data-message-id={newest['message_id']}]")
    assert article.count() == 1
    assert all(block["text"].strip() in article.inner_text() for block in newest["blocks"])
    assert not page.errors
