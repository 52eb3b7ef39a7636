"""Third-party GenAI spans → journal events, for every convention the docs list."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_session.normalize import SpanData, SpanEventData, genai, normalize_span

START, END = 1_000_000_000, 2_000_000_000


def span(attributes=None, events=(), *, name="chat gpt-4o", parent=0x1111, status="unset", message=None, **extra):
    return SpanData(
        trace_id=0xABC,
        span_id=0x2222,
        parent_span_id=parent,
        name=name,
        start_time_ns=START,
        end_time_ns=END,
        attributes=attributes or {},
        events=tuple(events),
        status_code=status,
        status_message=message,
        **extra,
    )


def summary(events):
    """(type, role or name, content texts) per event, the shape the assertions read."""
    rows = []
    for event in events:
        payload = event.payload
        if event.type == "message_started":
            rows.append(("message_started", payload["role"]))
        elif event.type == "message_finished":
            rows.append(("message_finished", tuple((c["kind"], c["text"]) for c in payload["content"])))
        else:
            rows.append((event.type, payload))
    return rows


TOOL_CALL = '{"id":"call_1","name":"get_weather","arguments":{"city":"Paris"}}'
EXPECTED_CHAT = [
    ("message_started", "user"),
    ("message_finished", (("text", "Weather in Paris?"),)),
    ("message_started", "assistant"),
    ("message_finished", (("tool_call", TOOL_CALL),)),
]

CURRENT_SEMCONV = {
    "gen_ai.operation.name": "chat",
    "gen_ai.input.messages": orjson.dumps([{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]).decode(),
    "gen_ai.output.messages": orjson.dumps(
        [{"role": "assistant", "finish_reason": "tool_call",
          "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}]}]
    ).decode(),
}
OPENINFERENCE = {
    "openinference.span.kind": "LLM",
    "llm.input_messages.0.message.role": "user",
    "llm.input_messages.0.message.content": "Weather in Paris?",
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
}
OPENLLMETRY = {
    "llm.request.type": "chat",
    "gen_ai.prompt.0.role": "user",
    "gen_ai.prompt.0.content": "Weather in Paris?",
    "gen_ai.completion.0.role": "assistant",
    "gen_ai.completion.0.finish_reason": "tool_calls",
    "gen_ai.completion.0.tool_calls.0.id": "call_1",
    "gen_ai.completion.0.tool_calls.0.name": "get_weather",
    "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}',
}
OLD_EVENTS = [
    SpanEventData("gen_ai.user.message", START, {"content": "Weather in Paris?"}),
    SpanEventData(
        "gen_ai.choice",
        END,
        {"index": 0, "finish_reason": "tool_calls", "message": orjson.dumps(
            {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}).decode()},
    ),
]
DETAILS_EVENT = [
    SpanEventData(
        "gen_ai.client.inference.operation.details",
        END,
        {key: value for key, value in CURRENT_SEMCONV.items() if key != "gen_ai.operation.name"},
    )
]


@pytest.mark.parametrize(
    ("attributes", "events"),
    [
        pytest.param(CURRENT_SEMCONV, (), id="gen_ai.input/output.messages attributes"),
        pytest.param({"gen_ai.operation.name": "chat"}, DETAILS_EVENT, id="operation.details event"),
        pytest.param({"gen_ai.operation.name": "chat", "gen_ai.system": "openai"}, OLD_EVENTS, id="message span events"),
        pytest.param(OPENINFERENCE, (), id="openinference"),
        pytest.param(OPENLLMETRY, (), id="openllmetry"),
    ],
)
def test_model_calls_map_to_messages_in_every_convention(attributes, events):
    result = normalize_span(span(attributes, events))
    assert summary(result) == EXPECTED_CHAT
    started, finished = result[2], result[3]
    assert started.at_ns == START and finished.at_ns == END
    assert started.message_id == finished.message_id == "0000000000002222-out-0"
    assert all(event.trace_id == f"{0xABC:032x}" and event.span_id == "0000000000002222" for event in result)


def test_only_the_messages_new_in_a_call_are_journaled():
    history = [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "sunny"}]},
    ]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": orjson.dumps(history).decode(),
        "gen_ai.output.messages": orjson.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "Sunny."}], "finish_reason": "stop"}]
        ).decode(),
    }
    result = normalize_span(span(attributes))
    assert summary(result) == [
        ("message_started", "tool"),
        ("message_finished", (("text", "sunny"),)),
        ("message_started", "assistant"),
        ("message_finished", (("text", "Sunny."),)),
    ]
    assert result[-1].payload["stop_reason"] == "stop"


def test_openinference_input_and_output_values_are_the_fallback():
    result = normalize_span(span({"openinference.span.kind": "LLM", "input.value": "hi", "output.value": "hello"}))
    assert summary(result) == [
        ("message_started", "user"), ("message_finished", (("text", "hi"),)),
        ("message_started", "assistant"), ("message_finished", (("text", "hello"),)),
    ]


@pytest.mark.parametrize(
    "attributes",
    [
        pytest.param({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                      "gen_ai.tool.call.id": "call_1", "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                      "gen_ai.tool.call.result": "sunny"}, id="gen_ai.tool"),
        pytest.param({"openinference.span.kind": "TOOL", "tool.name": "get_weather", "tool_call.id": "call_1",
                      "input.value": '{"city": "Paris"}', "output.value": "sunny"}, id="openinference"),
        pytest.param({"traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather", "gen_ai.tool.call.id": "call_1",
                      "traceloop.entity.input": '{"city": "Paris"}', "traceloop.entity.output": "sunny"}, id="openllmetry"),
    ],
)
def test_tool_spans_map_to_tool_executions(attributes):
    started, finished = normalize_span(span(attributes, name="execute_tool get_weather"))
    assert (started.type, started.payload, started.tool_call_id, started.at_ns) == (
        "tool_execution_started", {"name": "get_weather", "arguments": {"city": "Paris"}}, "call_1", START)
    assert (finished.type, finished.payload, finished.at_ns) == (
        "tool_execution_finished", {"status": "ok", "result": "sunny"}, END)


def test_a_failed_tool_span_finishes_with_its_error():
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "book", "error.type": "TimeoutError"}
    _, finished = normalize_span(span(attributes, status="error", message="upstream timed out"))
    assert finished.payload == {"status": "error", "error": "upstream timed out"}
    assert finished.tool_call_id == "0000000000002222"


def test_a_trace_root_frames_the_run_and_plain_spans_map_to_nothing():
    root = span({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "booking"}, name="invoke_agent booking",
                parent=None, status="error")
    assert summary(normalize_span(root)) == [
        ("run_started", {"kind": "live", "agent": "booking"}),
        ("run_finished", {"status": "error"}),
    ]
    assert normalize_span(span({"http.method": "GET"}, name="GET /health")) == []


def test_dropped_events_upstream_become_an_upstream_drop_record():
    events = normalize_span(span({"http.method": "GET"}, dropped_events=7, dropped_attributes=1))
    assert [(event.type, event.payload["dropped_events"], event.payload["dropped_attributes"]) for event in events] == [
        ("upstream_drop", 7, 1)
    ]


def test_history_before_the_last_assistant_message_is_not_mapped():
    """Only what follows the last assistant message is new; the history before it (system
    instructions included) is never mapped, so even content that cannot be re-encoded (nested
    deeper than orjson writes) there does not stop the new messages."""
    deep = "x"
    for _ in range(300):
        deep = [deep]
    history = [
        {"role": "user", "parts": [{"type": "text", "content": deep}]},
        {"role": "assistant", "parts": ["Which day?"]},
        {"role": "user", "parts": ["Friday"]},
    ]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system_instructions": '[{"type": "text", "content": "Book tables."}]',
        "gen_ai.input.messages": json.dumps(history),  # orjson refuses to write it
    }
    assert summary(normalize_span(span(attributes))) == [
        ("message_started", "user"),
        ("message_finished", (("text", "Friday"),)),
    ]
    attributes["gen_ai.input.messages"] = '[{"role": "user", "parts": ["Friday"]}]'
    assert summary(normalize_span(span(attributes))) == [
        ("message_started", "system"),
        ("message_finished", (("text", "Book tables."),)),
        ("message_started", "user"),
        ("message_finished", (("text", "Friday"),)),
    ]


_ITEMS = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]), "parts": st.lists(
        st.fixed_dictionaries({"type": st.just("text"), "content": st.text(max_size=8)}), max_size=2)}),
    st.text(max_size=6),  # a string item: decoded when it holds JSON
    st.just('{"role": "tool", "content": "x"}'),
    st.integers(),
)


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(_ITEMS, max_size=8),
    separators=st.sampled_from([(",", ":"), (", ", ": ")]),
    suffixes=st.lists(st.sampled_from(["", ",]", ", ]", ",1]", "] x", ",{", " "]), max_size=3),
)
def test_a_growing_history_parses_as_a_fresh_parse_would(items, separators, suffixes):
    """Model calls resend their history with new messages appended: reusing the previous parse
    gives exactly the fresh parse, also for empty, malformed or differently spaced inputs."""
    values = [json.dumps(items[:end], separators=separators) for end in range(len(items) + 1)]
    values += [values[-1][:-1] + suffix for suffix in suffixes]  # broken continuations
    for value in values:
        assert genai._history_items(value) == genai._json_list(value), value
