"""The session page's newer facts in Debian's Chromium: voice latency (issue 17: a column only when
a turn has one, slow turns flagged like repeated asks, p50/p95 per run and per session) and model
calls with their tokens (issue 16 §3). Fixtures are in conftest."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser

RUNS = ("run-00000000-0000-4000-8000-0000000000c1", "run-00000000-0000-4000-8000-0000000000c2")


def open_ready(page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]")


def write_voice_run(writer, journal, run_id: str, created_ns: int, latencies: list[dict | None], *, model: str = "gpt-4o-mini",
                    usage: bool = True) -> None:
    """One voice run: a turn per latency dict (None: the turn has none), each with one model call
    (its usage: 100 + turn index tokens in, 10 out; none with ``usage=False``)."""
    run = writer.open_run(session_id="voice", run_id=run_id, agent="voice", created_at_ns=created_ns)
    script = journal.Script(run, created_ns)
    script("run_started", {"kind": "live", "agent": "voice"})
    for index, latency in enumerate(latencies):
        script("turn_started", {"state": "talk", "required_slots": []}, turn_index=index)
        script.message("user", f"u{index}", f"hello {index}", turn=index)
        ids = {"turn_index": index, "message_id": f"a{index}"}
        script("message_started", {"role": "assistant"}, **ids)
        finished = {"settled": True, "content": [{"index": 0, "kind": "text", "text": f"hi {index}"}], "model": model}
        if usage:
            finished["usage"] = {"input_tokens": 100 + index, "output_tokens": 10}
        script("message_finished", finished, **ids)
        finished = {"state": "talk", "required_slots": [], "missing_required_slots": []}
        if latency is not None:
            finished["latency"] = latency
        script("turn_finished", finished, turn_index=index)
    script("run_finished", {"status": "ok"})
    run.close()


@pytest.fixture
def voice_root(live_writer, journal):
    write_voice_run(live_writer, journal, RUNS[0], journal.BASE_NS, [
        {"user_to_agent_ms": 412.4, "stt_ms": 120, "llm_ttft_ms": 190, "tts_ttfb_ms": 60},
        {"user_to_agent_ms": 2300, "endpointing_ms": 500},
        None,
    ])
    write_voice_run(live_writer, journal, RUNS[1], journal.BASE_NS + 60 * 10**9, [{"user_to_agent_ms": 800}], usage=False)
    assert live_writer.force_flush()
    return live_writer.root


def test_voice_latency_column_slow_flags_and_percentiles(page, serve, voice_root):
    server = serve(voice_root)
    open_ready(page, f"{server.url}/sessions/voice?run_id={RUNS[0]}")
    assert page.locator("#facts th.latency").is_visible()
    rows = page.locator("#facts tbody tr")
    assert rows.count() == 3
    assert rows.nth(0).locator("td.latency").inner_text() == "412 ms (stt 120, llm 190, tts 60)"
    assert rows.nth(1).locator("td.latency").inner_text() == "2300 ms (endpointing 500) SLOW"
    assert rows.nth(2).locator("td.latency").inner_text() == ""
    assert [rows.nth(i).get_attribute("class") for i in range(3)] == ["", "slow", ""]
    summary = page.inner_text("#facts-summary")
    assert "p50 412 ms, p95 2300 ms over 2 turn(s); slow over 1500 ms: 1 · slow: turn 1" in summary
    # Session-wide: the column, the flag, p50/p95 per run and over the session, slow turns naming their run.
    assert page.locator("#session-facts th.latency").is_visible()
    assert page.locator("#session-facts tbody tr.slow").count() == 1
    per_run = page.locator("#session-latency li")
    assert per_run.nth(0).inner_text() == f"run 1 · {RUNS[0][:12]}: p50 412 ms, p95 2300 ms over 2 turn(s); slow over 1500 ms: 1"
    assert per_run.nth(1).inner_text() == f"run 2 · {RUNS[1][:12]}: p50 800 ms, p95 800 ms over 1 turn(s); slow over 1500 ms: 0"
    assert per_run.nth(2).inner_text() == f"whole session: p50 800 ms, p95 2300 ms over 3 turn(s); slow over 1500 ms: 1 · slow: {RUNS[0][:12]} turn 1"
    assert not page.errors


def test_model_calls_and_tokens_on_the_session_page_and_the_sessions_list(page, serve, voice_root):
    server = serve(voice_root)
    open_ready(page, f"{server.url}/sessions/voice?run_id={RUNS[0]}")
    calls = page.locator("#facts tbody td.model-calls")
    # The cost at the shipped list price of gpt-4o-mini ($0.15 in, $0.60 out per million tokens).
    assert [calls.nth(i).inner_text() for i in range(3)] == [
        f"gpt-4o-mini · {100 + i} in / 10 out · ${(100 + i) * 0.15e-6 + 10 * 0.60e-6:.6f}" for i in range(3)]
    assert "tokens: 303 in / 30 out" in page.inner_text("#facts-summary")
    with_usage = page.locator(f"#runs tbody tr[data-run-id='{RUNS[0]}'] td")
    without = page.locator(f"#runs tbody tr[data-run-id='{RUNS[1]}'] td")
    assert (with_usage.nth(5).inner_text(), with_usage.nth(6).inner_text()) == ("3", "303 in / 30 out")
    assert (without.nth(5).inner_text(), without.nth(6).inner_text()) == ("1", "–")
    # A run whose calls counted no tokens names its model and says nothing of tokens.
    open_ready(page, f"{server.url}/sessions/voice?run_id={RUNS[1]}")
    assert page.inner_text("#facts tbody td.model-calls") == "gpt-4o-mini"
    assert "tokens" not in page.inner_text("#facts-summary")
    open_ready(page, f"{server.url}/")
    assert "303 in / 30 out" in page.inner_text(f"#sessions tbody tr[data-run-id='{RUNS[0]}']")
    assert not page.errors


def test_no_latency_column_when_no_turn_has_one(page, serve, sample):
    server = serve(sample.root)
    open_ready(page, f"{server.url}/sessions/call-42")
    assert page.locator("#facts tbody tr").count() == 3
    assert not page.locator("#facts th.latency").is_visible()
    assert not page.locator("#facts td.latency").first.is_visible()
    assert not page.locator("#session-facts th.latency").is_visible()
    assert page.locator("#facts tbody tr.slow").count() == 0 and page.inner_text("#session-latency") == ""
    assert not page.errors


def test_replay_timeline_and_details_show_a_turns_voice_latency(page, serve, voice_root):
    server = serve(voice_root)
    open_ready(page, f"{server.url}/sessions/voice/runs/{RUNS[0]}")
    turns = page.locator("#timeline g.span.kind-turn")
    assert turns.count() == 3
    assert turns.nth(0).locator(".value").text_content().endswith(" · voice 412 ms")
    assert turns.nth(1).locator(".value").text_content().endswith(" · voice 2300 ms")
    assert "voice" not in turns.nth(2).locator(".value").text_content()
    turns.nth(0).locator(".label").click()
    assert "voice latency\n412 ms (stt 120, llm 190, tts 60)" in page.inner_text("#details")
    turns.nth(2).locator(".label").click()
    assert "voice latency" not in page.inner_text("#details")
    assert not page.errors


def test_a_voice_booking_shows_slots_repeated_asks_latency_and_model_calls_together(page, serve, live_writer, journal, ui):
    run = live_writer.open_run(session_id="voice-booking", run_id="run-00000000-0000-4000-8000-0000000000c3", agent="booking",
                               service="voice", created_at_ns=journal.BASE_NS)
    script = journal.Script(run, journal.BASE_NS)
    journal.record_booking(script, user_texts=("a table for two", "sometime soon", "Friday"), voice=True)
    script("run_finished", {"status": "ok"})
    run.close()
    assert live_writer.force_flush()
    server = serve(live_writer.root)
    open_ready(page, f"{server.url}/sessions/voice-booking")
    rows = page.locator("#facts tbody tr")
    # Turn 1 asks for the date again: missing slots say so, and so do its words.
    assert [rows.nth(i).get_attribute("class") for i in range(3)] == ["", "repeated asked-again slow", ""]
    assert rows.nth(1).locator("td.latency").inner_text() == "1870 ms (endpointing 620, stt 240, llm 820, tts 110) SLOW"
    assert rows.nth(2).locator("td.model-calls").inner_text() == "gpt-4o-mini · 492 in / 20 out · $0.000086"
    assert "tokens: 1356 in / 57 out" in page.inner_text("#facts-summary")
    assert "p50 910 ms, p95 1870 ms over 3 turn(s); slow over 1500 ms: 1 · slow: turn 1" in page.inner_text("#facts-summary")
    ui.screenshot(page, "session")
    assert not page.errors
