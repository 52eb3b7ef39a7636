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


def _app_scores_in_process(root) -> None:
    from opentelemetry import trace

    import otel_session
    from otel_session.testing import capture_bundle

    with capture_bundle(root):
        with otel_session.session("scored"), otel_session.run(agent="booking"):
            with otel_session.turn(0, state="ask"):
                trace.get_current_span().set_attribute("otel_session.score.resolved", True)  # the turn's span
            with otel_session.turn(1, state="ask"):
                trace.get_current_span().set_attribute("otel_session.score.resolved", False)
            span = trace.get_current_span()  # the run's span
            span.set_attributes({"otel_session.score.helpfulness": 0.9, "otel_session.score.note": f"mail {CANARIES[0]}",
                                 "otel_session.score.bad": float("nan")})


def _app_scores_to_collector(root) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_session.core import semconv as sc
    from otel_session.redact import RedactionPolicy, Redactor
    from otel_session.testing import bundles, running_collectors, wait_for

    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2,
                            redactor=Redactor(RedactionPolicy(), key=b"scores")) as make:
        collector = make(root)
        provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
        provider.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"http://127.0.0.1:{collector.http_port}/v1/traces")))
        tracer = provider.get_tracer("otel_session")  # the project's own spans, as the API makes them
        with tracer.start_as_current_span("invoke_agent booking", attributes={
                sc.SESSION_ID: "scored", sc.AGENT_NAME: "booking", sc.OPERATION_NAME: "invoke_agent",
                sc.RUN_KIND: "live", "otel_session.score.helpfulness": 0.9,
                "otel_session.score.note": f"mail {CANARIES[0]}"}) as run:
            run.set_attribute(sc.RUN_ID, "run-" + run.get_span_context().trace_id.to_bytes(16, "big").hex())
            for index, resolved in enumerate((True, False)):
                with tracer.start_as_current_span(f"turn {index}", attributes={
                        sc.TURN_INDEX: index, sc.STATE_PREVIOUS: "ask", sc.REQUIRED_SLOTS: [],
                        "otel_session.score.resolved": resolved}):
                    pass
        with provider.get_tracer("some.framework").start_as_current_span("agent", attributes={  # a third-party root
                sc.SESSION_ID: "other", "otel_session.score.helpfulness": 0.25}):
            pass
        provider.shutdown()
        wait_for(lambda: len([read for read in bundles(root) if read.status.value == "complete"]) == 2)


@pytest.mark.parametrize("record", [_app_scores_in_process, _app_scores_to_collector], ids=["in_process", "collector"])
def test_scores_the_app_set_on_its_spans_are_listed_and_filtered(tmp_path, record):
    from otel_session.viewer import create_app

    root = tmp_path / "root"
    record(root)
    app = create_app({"BUNDLE_DIR": str(root), "TESTING": True})
    client = app.test_client()
    [run] = client.get("/api/runs?q=scored").get_json()["runs"]
    assert run["scores"] == {"helpfulness": {"last": "0.9", "count": 1, "mean": 0.9},
                             "note": {"last": "mail [email]", "count": 1, "mean": None},
                             "resolved": {"last": "false", "count": 2, "mean": 0.5}}
    assert len(_runs(client, "score.resolved=false")) == 1 and _runs(client, "score=bad") == {}
    if record is _app_scores_to_collector:
        [other] = _runs(client, "q=other").values()
        assert other["scores"] == {"helpfulness": {"last": "0.25", "count": 1, "mean": 0.25}}
    _score(client, "scored", name="helpfulness", value=0.5)  # the viewer's scores join the app's
    assert _runs(client)[run["run_id"]]["scores"]["helpfulness"] == {"last": "0.5", "count": 2, "mean": 0.7}
    app.extensions["otel_session_listing"].close()
    for path in root.rglob("*"):
        if path.is_file():
            assert CANARIES[0].encode() not in path.read_bytes(), path
