"""The whole-session transcript: every live run of a session in order, turn by turn, a few runs a
page (API and Debian's Chromium)."""

from __future__ import annotations

import pytest

from otel_session.bundle.write import BundleWriter
from otel_session.viewer import create_app


def _transcript(client, session: str, query: str = "") -> dict:
    answer = client.get(f"/api/sessions/{session}/transcript?{query}")
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def test_the_transcript_holds_every_live_run_in_order_turn_by_turn(client, sample):
    page = _transcript(client, sample.session_id)
    assert page["run_count"] == 2 and page["next_after"] is None  # the eval run is not the session's conversation
    assert [run["run_id"] for run in page["runs"]] == [sample.older_run, sample.latest_run]
    turns = page["runs"][0]["turns"]
    assert [turn["turn_index"] for turn in turns] == [0, 1, 2]
    assert [(message["role"], message["text"]) for message in turns[0]["messages"]] == [
        ("user", "table for 2"), ("assistant", "Which day would you like?")]
    assert turns[2]["tools"] == [{"name": "check_availability", "status": "error"},
                                 {"name": "check_availability", "status": "ok"}]
    assert (turns[0]["state_before"], turns[2]["state"]) == ("ask_date", "confirm")
    first = _transcript(client, sample.session_id, "runs=1")
    assert [run["run_id"] for run in first["runs"]] == [sample.older_run] and first["next_after"] == 1
    second = _transcript(client, sample.session_id, "after=1&runs=1")
    assert [run["run_id"] for run in second["runs"]] == [sample.latest_run] and second["next_after"] is None
    for bad in ("runs=0", "runs=21", "after=-1", "after=x"):
        assert client.get(f"/api/sessions/{sample.session_id}/transcript?{bad}").status_code == 400, bad
    assert client.get("/api/sessions/nope/transcript").status_code == 404


def _many_runs(root, journal, count: int) -> list[str]:
    writer = BundleWriter(root)
    ids = []
    try:
        for number in range(count):
            run_id = f"run-00000000-0000-0000-0000-{number:012d}"
            start = journal.BASE_NS + number * 10**9
            run = writer.open_run(session_id="long-session", run_id=run_id, agent="booking", created_at_ns=start)
            script = journal.Script(run, start)
            script("run_started", {"kind": "live", "agent": "booking"})
            script.message("user", f"u{number}", f"question {number}", turn=0)
            script.message("assistant", f"a{number}", f"answer {number}", turn=0)
            script("run_finished", {"status": "ok"})
            run.close()
            ids.append(run_id)
        assert writer.force_flush()
    finally:
        writer.shutdown()
    return ids


def test_a_page_reads_only_its_own_runs(tmp_path, journal):
    ids = _many_runs(tmp_path / "root", journal, 12)
    app = create_app({"BUNDLE_DIR": str(tmp_path / "root"), "TESTING": True})
    reader = app.extensions["otel_session_store"].reader
    read = []
    facts = reader.facts
    reader.facts = lambda path, **kwargs: read.append(path.name) or facts(path, **kwargs)  # counts, then reads
    client = app.test_client()
    seen = []
    after = 0
    while after is not None:
        page = _transcript(client, "long-session", f"after={after}")
        assert len(page["runs"]) <= 5
        seen += [run["run_id"] for run in page["runs"]]
        after = page["next_after"]
    assert seen == ids and read == ids  # each run read once, by the page that shows it
    messages = [message["text"] for run in _transcript(client, "long-session", "after=10")["runs"]
                for turn in run["turns"] for message in turn["messages"]]
    assert messages == ["question 10", "answer 10", "question 11", "answer 11"]


@pytest.mark.browser
def test_the_session_page_shows_the_transcript_and_pages_by_run(page, serve, tmp_path, journal):
    ids = _many_runs(tmp_path / "root", journal, 7)
    server = serve(tmp_path / "root")
    page.goto(server.url + "/sessions/long-session")
    page.wait_for_selector("body[data-ready=true]")
    section = page.locator("#transcript-section")
    assert section.locator(".transcript-run").count() == 5
    assert section.locator(".transcript-status").inner_text() == "5 of 7 runs"
    assert [section.locator(".transcript-run").nth(i).get_attribute("data-run-id") for i in range(5)] == ids[:5]
    assert section.locator(".transcript-turn").count() == 5
    roles = section.locator(".transcript-message").evaluate_all("items => items.map((item) => item.dataset.role)")
    assert roles == ["user", "assistant"] * 5
    assert "question 0" in section.locator(".transcript-message").first.inner_text()
    section.locator("button.transcript-more").click()
    page.wait_for_function("() => document.querySelectorAll('#transcript-section .transcript-run').length === 7")
    assert section.locator("button.transcript-more").is_hidden()
    assert section.locator(".transcript-status").inner_text() == "7 of 7 runs"
    assert page.errors == []
