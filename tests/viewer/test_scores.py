"""Evaluation scores beyond the 1–5 feedback: named numbers, booleans and categories, per run or
per turn, with a comment; kept beside feedback, shown and filtered in the lists, averaged over time
in the dashboard (API, and the session page in Debian's Chromium)."""

from __future__ import annotations

import json

import pytest

CANARIES = ("zed.canary@example.org", "+1 415 555 0199")
RANGE = "since=2026-11-29T00:00&until=2026-12-02T00:00"


def _score(client, session: str, **body) -> dict:
    answer = client.post(f"/api/sessions/{session}/scores", json=body)
    assert answer.status_code == 201, answer.get_json()
    return answer.get_json()


def _runs(client, query: str = "") -> dict[str, dict]:
    return {run["run_id"]: run for run in client.get(f"/api/runs?{query}").get_json()["runs"]}


def test_scores_are_kept_beside_feedback_listed_filtered_and_averaged(client, sample):
    assert _score(client, "call-42", name="helpfulness", value=0.5)["run_id"] == sample.latest_run  # the latest run
    _score(client, "call-42", run_id=sample.latest_run, name="helpfulness", value=1, comment="good")
    _score(client, "call-42", run_id=sample.latest_run, name="resolved", value=True, turn_index=2)
    _score(client, "call-42", run_id=sample.older_run, name="resolved", value=False)
    _score(client, "call-42", run_id=sample.older_run, name="tone", value="curt")
    client.post("/api/sessions/call-42/feedback", json={"rating": 4})
    lines = [json.loads(line) for line in
             (sample.root / "sessions" / "call-42" / sample.latest_run / "feedback.ndjson").read_text().splitlines()]
    assert [line.get("name", line.get("rating")) for line in lines] == ["helpfulness", "helpfulness", "resolved", 4]
    assert lines[2]["turn_index"] == 2 and lines[2]["value"] is True and lines[1]["comment"] == "good"
    listed = _runs(client)
    assert listed[sample.latest_run]["scores"] == {"helpfulness": {"last": "1", "count": 2, "mean": 0.75},
                                                    "resolved": {"last": "true", "count": 1, "mean": 1.0}}
    assert listed[sample.older_run]["scores"]["tone"] == {"last": "curt", "count": 1, "mean": None}
    assert listed[sample.latest_run]["feedback"] == {"count": 1, "mean": 4.0}  # ratings are not scores, nor the reverse
    assert set(_runs(client, "score=resolved")) == {sample.latest_run, sample.older_run}
    assert set(_runs(client, "score.resolved=false")) == {sample.older_run}
    assert set(_runs(client, "score=tone&score=resolved")) == {sample.older_run}
    assert set(_runs(client, "score.tone=cur")) == set()
    past = client.get("/api/sessions/call-42/scores").get_json()["scores"]
    assert len(past) == 5 and past[0]["name"] == "tone"  # newest first
    assert client.get("/api/sessions/call-42/feedback").get_json()["feedback"][0]["rating"] == 4
    day = client.get(f"/api/dashboard?{RANGE}&bucket=day").get_json()
    assert day["totals"]["scores"] == {"helpfulness": 0.75, "resolved": 0.5}
    assert [bucket["scores"] for bucket in day["buckets"]] == [{"helpfulness": 0.75, "resolved": 0.5}]


@pytest.mark.parametrize(("body", "code"), [
    ({"name": "x"}, "bad_score"),
    ({"name": "", "value": 1}, "bad_score"),
    ({"name": "has space", "value": 1}, "bad_score"),
    ({"name": "x" * 65, "value": 1}, "bad_score"),
    ({"name": "x", "value": None}, "bad_score"),
    ({"name": "x", "value": [1]}, "bad_score"),
    ({"name": "x", "value": ""}, "bad_score"),
    ({"name": "x", "value": "c" * 101}, "bad_score"),
    ({"name": "x", "value": 1, "turn_index": -1}, "bad_score"),
    ({"name": "x", "value": 1, "turn_index": True}, "bad_score"),
    ({"name": "x", "value": 1, "comment": 5}, "bad_score"),
    ({"name": "x", "value": 1, "run_id": 7}, "malformed_run_id"),
    ([1], "bad_json"),
])
def test_a_bad_score_is_a_one_line_400_and_nothing_is_kept(client, sample, body, code):
    answer = client.post("/api/sessions/call-42/scores", json=body)
    assert answer.status_code == 400 and answer.get_json()["error"] == code
    assert "\n" not in answer.get_json()["message"]
    assert not (sample.root / "sessions" / "call-42" / sample.latest_run / "feedback.ndjson").exists()


def test_a_non_finite_number_is_refused(client):
    answer = client.post("/api/sessions/call-42/scores", data='{"name": "x", "value": NaN}', content_type="application/json")
    assert answer.status_code == 400


def test_a_score_s_comment_and_category_are_redacted_before_they_reach_disk(client, sample):
    _score(client, "call-42", name="note", value=f"mail {CANARIES[0]}", comment=f"call me: {CANARIES[1]}")
    for path in sample.root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(canary.encode() in data for canary in CANARIES), path
    answers = client.get("/api/sessions/call-42/scores").data + client.get("/api/runs").data
    assert not any(canary.encode() in answers for canary in CANARIES)
    assert b"[email]" in answers


@pytest.mark.browser
def test_a_score_added_on_the_session_page_shows_in_the_lists(page, serve, sample):
    server = serve(sample.root)
    page.goto(f"{server.url}/sessions/call-42")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#no-scores").is_visible()
    page.fill("#score input[name=name]", "resolved")
    page.fill("#score input[name=value]", "true")
    page.fill("#score input[name=turn_index]", "2")
    page.fill("#score textarea[name=comment]", "booked")
    page.click("#score button[type=submit]")
    page.wait_for_selector("#past-scores tbody tr")
    cells = page.locator("#past-scores tbody tr td").all_inner_texts()
    assert cells[2:] == ["2", "resolved", "true", "booked"]
    page.wait_for_function(f"() => document.querySelector(\"#runs tr[data-run-id='{sample.latest_run}'] td.scores\")"
                           ".textContent.includes('resolved 1 (1)')")
    page.goto(f"{server.url}/")
    page.wait_for_selector("body[data-ready=true]")
    page.locator("#sessions td.scores .chip-score", has_text="resolved").click()
    page.wait_for_function("() => document.querySelectorAll('#sessions tbody tr').length === 1")
    assert "score=resolved" in page.url and page.input_value("input[name=score]") == "resolved"
    page.goto(f"{server.url}/dashboard?{RANGE}")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#scores-figure").is_visible()
    assert page.errors == []
