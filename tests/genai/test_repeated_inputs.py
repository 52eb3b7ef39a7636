"""A model call's new input message the run already holds is journaled once: any app or framework
that records a message through the ``otel_session`` API while an instrumented client (the official
openai-v2 instrumentor around the real openai client, against the mock LLM) puts the same message
on its model-call span; and the rule's edges on ``HeldMessages`` itself."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import otel_session
from otel_session.demo.mock_llm import MODEL, MockLLMServer
from otel_session.normalize import JournalEvent
from otel_session.normalize.genai_repeats import MAX_HELD, HeldMessages
from otel_session.testing import capture_bundle

openai = pytest.importorskip("openai")
openai_v2 = pytest.importorskip("opentelemetry.instrumentation.openai_v2")


@pytest.fixture
def client(monkeypatch) -> Iterator[tuple[TracerProvider, Any]]:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    provider = TracerProvider()
    instrumentor = openai_v2.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with MockLLMServer() as llm:
            yield provider, openai.OpenAI(base_url=llm.base_url, api_key="unused")
    finally:
        instrumentor.uninstrument()


def conversation(bundle: Any) -> list[tuple[int, str, str]]:
    """``(turn, role, text)`` of each message of ``bundle``, in journal order."""
    roles = {e["message_id"]: e["payload"]["role"] for e in bundle.events if e["type"] == "message_started"}
    return [(e["turn_index"], roles[e["message_id"]], "".join(c["text"] for c in e["payload"]["content"]))
            for e in bundle.events if e["type"] == "message_finished"]


def said(text: str) -> None:
    with otel_session.message("user") as handle:
        handle.text(text)


def test_a_user_message_the_app_recorded_is_not_journaled_again_from_the_model_call(client):
    provider, openai_client = client
    greeting = "hi, a table for two"
    with capture_bundle(tracer_provider=provider) as captured:
        with otel_session.session("s"), otel_session.run(agent="plain"):
            with otel_session.turn(0):
                said(greeting)
                openai_client.chat.completions.create(model=MODEL, messages=[
                    {"role": "system", "content": "You book tables."}, {"role": "user", "content": greeting}])
            with otel_session.turn(1):  # the same words again, recorded by the model call alone
                openai_client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": greeting}])
    assert conversation(captured.bundle) == [
        (0, "user", greeting), (0, "system", "You book tables."), (0, "assistant", f"You said: {greeting}"),
        (1, "user", greeting), (1, "assistant", f"You said: {greeting}")]


@pytest.mark.parametrize(("recorded", "sent"), [
    ("mail me at jane@example.com", "mail me at bob@other.org"),  # both read "mail me at [email]"
    ("hi, I am jane@example.com", "hi, I am jane@example.com"),
])
def test_a_message_redaction_changed_is_never_taken_for_another(client, recorded, sent):
    """Redacted, two different messages may read the same: the call's input is journaled (a
    repeat journaled rather than a message lost), whether or not it was the same message."""
    provider, openai_client = client
    with capture_bundle(tracer_provider=provider) as captured:
        with otel_session.session("s"), otel_session.run(agent="plain"), otel_session.turn(0):
            said(recorded)
            openai_client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": sent}])
    users = [text for _, role, text in conversation(captured.bundle) if role == "user"]
    assert len(users) == 2 and all("[email]" in text for text in users)


def test_every_token_redaction_writes_is_one_the_rule_stands_aside_for():
    """``genai_repeats`` (normalize) cannot import the redactor: its pattern of redaction tokens is
    checked against what the redactor writes in each text mode."""
    from otel_session.normalize.genai_repeats import _REDACTED
    from otel_session.redact import FieldMode, RedactionPolicy, Redactor

    for mode in (FieldMode.SCAN, FieldMode.HASH, FieldMode.MASK):
        redacted = Redactor(RedactionPolicy(text=mode), key=b"k").text("call +33 1 23 45 67 89 or jane@example.com")
        assert _REDACTED(redacted), (mode, redacted)
    assert _REDACTED("a table for two at seven (window seat)") is None


def started(message_id: str, role: str, span_id: str = "00000000000000aa", turn: int | None = 0) -> JournalEvent:
    return JournalEvent("message_started", 1, {"role": role}, turn, message_id, None, "t", span_id)


def finished(message_id: str, text: str, span_id: str = "00000000000000aa", turn: int | None = 0) -> JournalEvent:
    content = [{"index": 0, "kind": "text", "text": text}]
    return JournalEvent("message_finished", 2, {"settled": True, "content": content}, turn, message_id, None, "t", span_id)


def call_inputs(span_id: str, *messages: tuple[str, str], turn: int | None = 0) -> list[JournalEvent]:
    events = []
    for position, (role, text) in enumerate(messages):
        message_id = f"{span_id}-in-{position}"
        events += [started(message_id, role, span_id, turn), finished(message_id, text, span_id, turn)]
    return events


def texts(events: list[JournalEvent]) -> list[str]:
    return [e.payload["content"][0]["text"] for e in events if e.type == "message_finished"]


def test_only_messages_held_from_other_records_than_model_calls_drop_a_call_input():
    held = HeldMessages()
    voice = [started("msg-1", "user", "00000000000000bb"), finished("msg-1", "a table", "00000000000000bb")]
    assert held.without_repeats(voice) == voice  # a mapping's own message: held, kept
    first = call_inputs("00000000000000cc", ("system", "be brief"), ("user", "a table"))
    assert texts(held.without_repeats(first)) == ["be brief"]
    # another call's inputs are not held: its system prompt is journaled by the next call too
    second = call_inputs("00000000000000dd", ("system", "be brief"), ("user", "a table"))
    assert texts(held.without_repeats(second)) == ["be brief"]
    assert texts(held.without_repeats(call_inputs("00000000000000ee", ("user", "a table"), turn=1))) == ["a table"]


def test_assistant_and_unusual_messages_are_not_held_and_the_oldest_go_first():
    held = HeldMessages()
    held.hold(0, "assistant", [{"index": 0, "kind": "text", "text": "hello"}])
    held.hold(0, "user", [{"index": 0, "kind": "text", "text": ""}])
    held.hold(0, "user", [{"index": 0, "kind": {"not": "hashable"}, "text": "x"}])
    held.hold(True, "user", [{"index": 0, "kind": "text", "text": "x"}])
    held.hold(0, "user", "not blocks")
    assert not held.repeats(0, "assistant", [{"index": 0, "kind": "text", "text": "hello"}])
    assert not held.repeats(0, "user", [{"index": 0, "kind": {"not": "hashable"}, "text": "x"}])
    for number in range(MAX_HELD + 1):
        held.hold(0, "user", [{"index": 0, "kind": "text", "text": str(number)}])
    assert not held.repeats(0, "user", [{"index": 0, "kind": "text", "text": "0"}])
    assert held.repeats(0, "user", [{"index": 0, "kind": "text", "text": str(MAX_HELD)}])


def test_a_message_whose_text_parts_a_framework_joined_is_the_same_message():
    held = HeldMessages()
    held.hold(0, "user", [{"index": 0, "kind": "text", "text": "friday for two"}])  # LangChain's message.text
    parts = [{"index": 0, "kind": "text", "text": "friday "}, {"index": 1, "kind": "text", "text": "for two"}]
    assert held.repeats(0, "user", parts)  # openai-v2's parts
    assert not held.repeats(0, "user", [*parts, {"index": 2, "kind": "tool_call", "text": "{}"}])


def test_events_it_cannot_read_are_kept_as_they_are(caplog):
    held = HeldMessages()
    held.hold(0, "user", [{"index": 0, "kind": "text", "text": "a table"}])
    odd = [*call_inputs("00000000000000cc", ("user", "a table")),
           JournalEvent("message_finished", 3, None, 0, "00000000000000cc-in-1", None, "t", "00000000000000cc")]  # type: ignore[arg-type]
    assert held.without_repeats(odd) == odd  # a repeat journaled rather than a message lost
    assert "could not tell a model call's repeated input messages" in caplog.text
