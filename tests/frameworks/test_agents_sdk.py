"""The real OpenAI Agents SDK against the mock LLM on loopback, recorded with no code in the agents:
a triage agent with an input guardrail hands off to a booker (one of two handoffs offered), which
calls a tool and answers under an output guardrail. What a user reads: the handoff as a verdict
with its candidates, the guards, the tool, the messages (streamed deltas included), one run per
``Runner.run`` in the SDK session's session — in process and through the collector."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from otel_session.demo.mock_llm import MODEL, MockLLMServer
from otel_session.bundle.read import BundleStatus
from otel_session.testing import capture_bundle

from .conftest import example, sealed_bundles, turns_of

agents = pytest.importorskip("agents")
from openai import AsyncOpenAI  # noqa: E402

from otel_session.instrument.agents_sdk import AgentsSdkInstrumentor  # noqa: E402

CARD = "4111 1111 1111 1111"

TOOL_RESULT = "19:00 is free"  # what the example's check_availability says


booking = example("agents_sdk_booking")  # the example's agents and its scripted model


@pytest.fixture
def triage() -> Iterator[Any]:
    """The instrumented SDK (its default OpenAI exporter removed: nothing leaves loopback) and the
    triage agent on a chat-completions model pointed at the mock LLM."""
    agents.set_trace_processors([])
    instrumentor = AgentsSdkInstrumentor()
    instrumentor.instrument()
    with MockLLMServer(responder=booking.scripted_model) as llm:
        model = agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI(base_url=llm.base_url, api_key="x"))
        yield booking.triage_agent(model)
    instrumentor.uninstrument()


def conversation(turn: dict[str, Any]) -> list[tuple[str, str]]:
    return [(message["role"], message["text"]) for message in turn["messages"]]


def assert_the_booking(bundle: Any, session_id: str) -> None:
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.session_id == session_id
    assert bundle.events[0]["payload"] == {"kind": "live", "agent": "triage"}
    first, second, third = turns_of(bundle)  # the SDK's turns: one model call each
    assert [turn["turn_index"] for turn in (first, second, third)] == [1, 2, 3]
    assert [(g["name"], g["passed"]) for g in first["guards"]] == [("no_card_numbers", True)]
    assert {k: first["verdict"][k] for k in ("from", "to", "reason", "candidates")} == {
        "from": "triage", "to": "booker", "reason": "handoff", "candidates": ["booker", "billing"]}
    assert conversation(first) == [("user", "a table for two on friday"), ("assistant", "")]
    assert [(t["name"], t["status"]) for t in second["tools"]] == [("check_availability", "ok")]
    assert second["tools"][0]["tool_call_id"] == "call_avail"
    assert conversation(third) == [("assistant", f"check_availability says: {TOOL_RESULT}")]
    assert [(g["name"], g["passed"]) for g in third["guards"]] == [("polite", True)]
    started = next(e for e in bundle.events if e["type"] == "tool_execution_started")
    assert started["payload"] == {"name": "check_availability", "arguments": {"day": "friday"}}
    finished = next(e for e in bundle.events if e["type"] == "tool_execution_finished")
    assert finished["payload"] == {"status": "ok", "result": TOOL_RESULT}
    handoff_calls = [json.loads(block["text"]) for e in bundle.events if e["type"] == "message_finished"
                     for block in e["payload"]["content"] if block["kind"] == "tool_call"]
    assert handoff_calls == [{"id": "call_handoff", "name": "transfer_to_booker", "arguments": {}},
                             {"id": "call_avail", "name": "check_availability", "arguments": {"day": "friday"}}]
    assert bundle.events[-1]["payload"] == {"status": "ok"}


def test_a_run_is_recorded_with_its_handoff_guards_tool_and_messages(triage):
    session = agents.SQLiteSession("table-for-two")
    with capture_bundle() as captured:
        result = agents.Runner.run_sync(triage, "a table for two on friday", session=session)
    assert result.final_output == f"check_availability says: {TOOL_RESULT}"
    assert_the_booking(captured.bundle, "table-for-two")
    model_spans = [s for s in captured.spans if s.name == "message assistant"]
    assert [s.attributes.get("gen_ai.response.model") for s in model_spans] == [MODEL] * 3
    assert [s.attributes.get("gen_ai.usage.input_tokens") for s in model_spans][:2] == [9, 12]
    model_calls = [call for turn in turns_of(captured.bundle) for call in turn["model_calls"]]
    assert [call["model"] for call in model_calls] == [MODEL] * 3  # in the journal, so facts show them
    assert [call["usage"]["input_tokens"] for call in model_calls][:2] == [9, 12]


def test_streamed_deltas_are_recorded_one_record_each(triage):
    async def stream() -> list[str]:
        result = agents.Runner.run_streamed(triage, "a table for two on friday",
                                            run_config=agents.RunConfig(group_id="conv-7"))
        return [event.data.delta async for event in result.stream_events()
                if event.type == "raw_response_event" and event.data.type == "response.output_text.delta"]

    with capture_bundle() as captured:
        streamed = asyncio.run(stream())
    bundle = captured.bundle
    assert_the_booking(bundle, "conv-7")
    deltas = [e["payload"]["delta"] for e in bundle.events if e["type"] == "assistant_delta"]
    assert "".join(deltas) == "".join(streamed) == f"check_availability says: {TOOL_RESULT}"
    assert len(streamed) == 5  # the mock streams word by word
    assert deltas == streamed  # one delta, one record


async def run_streamed(triage: Any, text: str) -> None:
    async for _ in agents.Runner.run_streamed(triage, text).stream_events():
        pass


@pytest.mark.parametrize("runner", ["run_sync", "run_streamed"])
def test_a_tripped_input_guardrail_is_a_failed_guard_and_a_failed_run(triage, runner):
    with capture_bundle() as captured, pytest.raises(agents.InputGuardrailTripwireTriggered):
        if runner == "run_sync":
            agents.Runner.run_sync(triage, f"book it on my card {CARD}")
        else:
            asyncio.run(run_streamed(triage, f"book it on my card {CARD}"))
    bundle = captured.bundle
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.session_id.startswith("trace_")  # no conversation, session or group: the SDK trace id
    (turn,) = turns_of(bundle)
    assert [(g["name"], g["passed"]) for g in turn["guards"]] == [("no_card_numbers", False)]
    assert conversation(turn)[0] == ("user", "book it on my card [card]")
    assert bundle.events[-1]["payload"] == {"status": "error"}
    assert CARD.encode() not in b"".join(p.read_bytes() for p in captured.root.rglob("*") if p.is_file())


def test_runs_of_one_sdk_session_are_runs_of_one_session_through_the_collector(triage, through_collector):
    root, _ = through_collector()

    async def one_plain_one_streamed() -> None:
        # two stores of session "table-for-two" (the scripted model answers the same without history)
        await agents.Runner.run(triage, "a table for two on friday", session=agents.SQLiteSession("table-for-two"))
        result = agents.Runner.run_streamed(triage, "a table for two on friday",
                                            session=agents.SQLiteSession("table-for-two"))
        async for _ in result.stream_events():
            pass

    asyncio.run(one_plain_one_streamed())
    first, second = sealed_bundles(root, 2)
    assert first.run_id != second.run_id
    assert_the_booking(first, "table-for-two")
    assert_the_booking(second, "table-for-two")
    deltas = [e["payload"]["delta"] for e in second.events if e["type"] == "assistant_delta"]
    assert deltas == ["check_availability ", "says: ", "19:00 ", "is ", "free"]


def test_a_run_the_sdk_stops_is_a_failed_run(triage):
    with capture_bundle() as captured, pytest.raises(agents.MaxTurnsExceeded):
        agents.Runner.run_sync(triage, "a table for two on friday", max_turns=1)
    bundle = captured.bundle
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.events[-1]["payload"] == {"status": "error"}
    run_span = next(span for span in captured.spans if span.name == "invoke_agent triage")
    assert run_span.attributes["error.type"] == "MaxTurnsExceeded"


def test_a_run_made_while_the_app_handles_an_exception_is_not_failed_by_it(triage):
    """A retry or a fallback agent run in the app's ``except`` block: the exception being handled
    is the app's, not the run's."""
    with capture_bundle() as captured:
        try:
            raise ValueError("the app's own, handled")
        except ValueError:
            result = agents.Runner.run_sync(triage, "a table for two on friday")
    assert result.final_output == f"check_availability says: {TOOL_RESULT}"
    assert captured.bundle.events[-1]["payload"] == {"status": "ok"}


def test_without_an_sdk_session_a_run_joins_the_session_the_app_is_in(triage):
    import otel_session

    with capture_bundle() as captured, otel_session.session("call-9"):
        agents.Runner.run_sync(triage, "a table for two on friday")
    assert_the_booking(captured.bundle, "call-9")


def test_a_responses_api_model_call_is_an_assistant_message(triage):
    """The SDK's default model (the Responses API) reports a ``response`` span; its output items —
    a reasoning summary, text, a function call — are the message's blocks (real SDK spans and
    openai types, reported through the SDK's tracing API as its Responses model does)."""
    from agents.tracing import response_span, task_span, turn_span
    from openai.types.responses import (
        Response,
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseReasoningItem,
        ResponseUsage,
    )
    from openai.types.responses.response_reasoning_item import Summary

    response = Response.model_construct(
        id="resp_1", model="gpt-test", usage=ResponseUsage.model_construct(input_tokens=3, output_tokens=4),
        output=[
            ResponseReasoningItem.model_construct(type="reasoning", summary=[Summary.model_construct(
                type="summary_text", text="the user wants friday")]),
            ResponseOutputMessage.model_construct(type="message", content=[ResponseOutputText.model_construct(
                type="output_text", text="Checking friday.")]),
            ResponseFunctionToolCall.model_construct(type="function_call", call_id="call_1", name="check_availability",
                                                     arguments='{"day": "friday"}'),
        ],
    )
    with capture_bundle() as captured:
        with agents.trace("booking", group_id="conv-r"), task_span(name="booking"), turn_span(turn=1, agent_name="a"):
            with response_span() as span:
                span.span_data.response = response
    (finished,) = [e["payload"] for e in captured.bundle.events if e["type"] == "message_finished"]
    assert finished["content"] == [
        {"index": 0, "kind": "thinking", "text": "the user wants friday"},
        {"index": 1, "kind": "text", "text": "Checking friday."},
        {"index": 2, "kind": "tool_call",
         "text": '{"id":"call_1","name":"check_availability","arguments":{"day":"friday"}}'}]
    (message_span,) = [s for s in captured.spans if s.name == "message assistant"]
    assert (message_span.attributes["gen_ai.response.model"], message_span.attributes["gen_ai.usage.output_tokens"]) == (
        "gpt-test", 4)
    assert captured.bundle.session_id == "conv-r"
