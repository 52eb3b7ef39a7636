"""The booking agent in process: Flask test client, the real openai client, openai-v2 instrumentation."""

from __future__ import annotations

import openai
import pytest
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

from otel_session.demo.agent import create_app
from otel_session.demo.booking_llm import booking_reply
from otel_session.demo.mock_llm import MockLLMServer
from otel_session.testing import capture_bundle


@pytest.fixture
def llm():
    with MockLLMServer(responder=booking_reply) as server:
        yield openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)


@pytest.fixture
def captured():
    with capture_bundle() as captured:
        yield captured


@pytest.fixture
def client(llm, captured):
    return create_app(llm, {"TESTING": True}).test_client()


@pytest.mark.parametrize(
    ("headers", "body", "message"),
    [
        ({}, {"utterances": ["hi"]}, "X-Session-Id header is required"),
        ({"X-Session-Id": "s"}, {"utterances": []}, "expected JSON"),
        ({"X-Session-Id": "s"}, {"utterances": "hi"}, "expected JSON"),
        ({"X-Session-Id": "s"}, None, "expected JSON"),
    ],
)
def test_bad_requests_get_a_clear_400(client, headers, body, message):
    response = client.post("/calls", json=body, headers=headers)
    assert response.status_code == 400
    assert message in response.get_data(as_text=True)


def test_a_call_is_one_run_whose_llm_spans_carry_the_session(llm):
    with capture_bundle() as captured:  # the bundle is read when the block ends
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=captured.recorder.tracer_provider)
        try:
            client = create_app(llm, {"TESTING": True}).test_client()
            response = client.post("/calls", json={"utterances": ["hi", "friday", "10 people"]},
                                   headers={"X-Session-Id": "call-1"})
        finally:
            instrumentor.uninstrument()
    assert response.status_code == 200
    body = response.get_json()
    assert body["state"] == "confirm" and body["turns"] == 3
    assert body["replies"][1] == "Lovely. How many people is the table for?"
    assert body["replies"][2].startswith("Sorry, I could not check the reservation book (")
    assert response.headers["X-Run-Id"] == body["run_id"] == captured.bundle.run_id
    types = [event["type"] for event in captured.bundle.events]
    assert types.count("turn_started") == 3 and types.count("turn_finished") == 3
    [failed] = [e["payload"] for e in captured.bundle.events if e["type"] == "tool_execution_finished"]
    assert failed["status"] == "error"
    chat = [span for span in captured.spans if span.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chat) == 4  # one per turn, plus the answer after the tool result
    for span in chat:
        assert span.attributes["session.id"] == "call-1"
        assert span.attributes["otel_session.run.id"] == body["run_id"]
        assert span.instrumentation_scope.name.startswith("opentelemetry.")  # openai-v2 (via util-genai), not ours
        assert span.attributes["gen_ai.provider.name"] == "openai"


def test_the_conversation_continues_across_runs_of_a_session(client):
    first = client.post("/calls", json={"utterances": ["hi", "friday"]}, headers={"X-Session-Id": "s2"})
    second = client.post("/calls", json={"utterances": ["2 people", "yes"]}, headers={"X-Session-Id": "s2"})
    assert first.get_json()["state"] == "ask_party_size"
    assert second.get_json()["state"] == "done"
    assert first.headers["X-Run-Id"] != second.headers["X-Run-Id"]


def test_the_dialogue_works_with_recording_off(llm):
    """Capture never changes the app: with nothing configured the booking still completes."""
    from otel_session.instrument import _runtime

    assert _runtime.current_recorder() is None
    app = create_app(llm, {"TESTING": True})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_runtime, "current_recorder", lambda **_: None)
        response = app.test_client().post(
            "/calls", json={"utterances": ["hi", "friday", "2 people", "yes"]}, headers={"X-Session-Id": "off"}
        )
    assert response.get_json()["state"] == "done"


def test_health_is_not_recorded(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and "X-Run-Id" not in response.headers
