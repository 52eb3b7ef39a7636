"""Third-party GenAI spans → journal events, for every convention the docs list."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_session.normalize import SpanData, SpanEventData, genai, genai_history, genai_messages, normalize_span

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


def fresh_new_items(value):
    """The reference ``genai_history.new_items`` must equal: a fresh parse, scanned from its end."""
    items = genai_messages.json_list(value)
    for position in range(len(items) - 1, -1, -1):
        if genai_history.structured_role(items[position]) == "assistant":
            return items[position + 1 :], True
    return items, False


_PARTS = st.lists(st.fixed_dictionaries({"type": st.just("text"), "content": st.text(max_size=8)}), max_size=2)
_ITEMS = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]), "parts": _PARTS}),
    st.fixed_dictionaries({"parts": _PARTS, "role": st.sampled_from(["user", "assistant"])}),  # role not first
    st.fixed_dictionaries({"parts": _PARTS}),  # no role: an assistant message
    st.fixed_dictionaries({"role": st.sampled_from(["", None, 0, 1, ["assistant"], "Assistant"])}),  # odd roles
    st.just({"role": "user", "message": "not a map"}),  # a message that is no gen_ai.choice body
    # what cuts at the marker without being a top-level assistant message: a later role, an inner one,
    # a nested marker, the marker's text inside a string
    st.just({"role": "assistant", "role ": 1, "message": {"role": "user"}}),
    st.just({"role": "tool", "parts": [{"type": "tool_call_response", "response": {"role": "assistant"}}]}),
    st.just({"role": "user", "parts": ['{"role":"assistant"}', '{"role": "assistant", "x": [']}),
    st.text(max_size=6),  # a string item: decoded when it holds JSON
    st.just('{"role": "assistant", "content": "x"}'),
    st.integers(),
)
_BREAKS = ["", ",]", ", ]", ",1]", "] x", ",{", " ", '{"role":"assistant"}]', ',{"role":"assistant"', '{"role": "assistant"]]']


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(_ITEMS, max_size=12),
    window=st.integers(min_value=2, max_value=20),
    separators=st.sampled_from([(",", ":"), (", ", ": ")]),
    breaks=st.lists(st.tuples(st.integers(min_value=0, max_value=400), st.sampled_from(_BREAKS)), max_size=4),
)
def test_the_new_items_of_a_history_are_those_of_a_fresh_parse(items, window, separators, breaks):
    """Model calls resend their history with new messages appended, the oldest dropped past a
    window: parsing only the last piece gives exactly what a fresh parse does, also for empty,
    malformed, differently spaced or misleading inputs, whatever was seen before (the pieces
    known valid are shared by every call)."""
    head = items[:2]
    values = [json.dumps(head + items[max(2, end - window) : end], separators=separators) for end in range(len(items) + 1)]
    for at, text in breaks:  # broken inputs, and pieces of valid ones put together wrongly
        value = values[at % len(values)]
        values.append(value[: at % (len(value) + 1)] + text + value[at % (len(value) + 1) :])
        values.append(value[:-1] + text)
    for value in values:
        assert genai_history.new_items(value) == fresh_new_items(value), value


def test_a_piece_seen_in_one_place_is_no_proof_of_another():
    """A known-valid middle piece is no valid head (nor the other way round), and a piece valid
    only with its separator does not make a value valid without it."""
    known = json.dumps([{"role": "user", "parts": ["a"]}, {"role": "assistant", "parts": ["b"]}, {"role": "tool", "parts": ["c"]}], separators=(",", ":"))
    assert genai_history.new_items(known) == fresh_new_items(known)
    middle = known[len('[{"role":"user","parts":["a"]},{"role":"assistant"') : -1]  # ,"parts":["b"]},{"role":"tool",...}
    for value in (
        '[{"role":"assistant"[' + known[1:-1] + ',{"role":"assistant"' + middle + "]",
        '[{"role":"assistant"' + middle + '{"role":"assistant","parts":["d"]},{"role":"user"}]',
        '[{"role":"user"},' + '{"role":"assistant"' + middle + '{"role":"assistant","parts":["d"]},{"role":"user"}]',
        known[:-1] + ',,{"role":"assistant","parts":["d"]},{"role":"user"}]',
        "[" + known[:-1] + ',{"role":"assistant","parts":["d"]},{"role":"user"}]',
    ):
        assert genai_history.new_items(value) == fresh_new_items(value), value


def test_a_continued_conversation_is_checked_against_its_previous_input():
    """A call whose head (system prompt, first user message) is a known conversation's is taken
    as that conversation's next call only when what lies between its first and last cut is the
    previous input's end, byte for byte: grown, slid, or neither."""
    def message(role, text):
        return {"role": role, "parts": [{"type": "text", "content": text}]}

    head = [message("system", "Book tables."), message("user", "Friday?")]
    exchanges = [[message("assistant", f"call {n}"), message("tool", f"result {n}")] for n in range(4)]
    for separators in ((",", ":"), (", ", ": ")):
        def dumps(items):
            return json.dumps(items, separators=separators)

        previous = dumps(head + exchanges[0] + exchanges[1])
        assert genai_history.new_items(previous) == fresh_new_items(previous)
        grown = dumps(head + exchanges[0] + exchanges[1] + exchanges[2])
        slid = dumps(head + exchanges[1] + exchanges[2])
        middle = previous[len(dumps(head)) : -1]  # the previous input's pieces after its head
        broken = middle.replace("}", "]", 1)  # as long, a marker first, invalid
        marker = dumps({"role": "assistant"})[:-1]
        last = grown[grown.rindex(separators[0] + marker) :]  # the separator, the last assistant message, ...
        for value in (grown, slid, dumps(head)[:-1] + separators[0] + broken + last):
            assert genai_history.new_items(value) == fresh_new_items(value), value
            assert genai_history.new_items(previous) == fresh_new_items(previous)


def test_the_texts_kept_to_check_inputs_are_bounded(monkeypatch):
    """Many conversations keep at most ``MAX_KNOWN_CHARS`` of text (then all starts over), and the
    answers stay a fresh parse's."""
    monkeypatch.setattr(genai_history, "MAX_KNOWN_CHARS", 20_000)

    def kept():
        return (sum(len(value) for value, _ in genai_history._CONVERSATIONS.values())
                + sum(map(len, genai_history._HEADS)) + sum(map(len, genai_history._MIDDLES)))

    for conversation in range(100):
        history = [{"role": "system", "parts": ["Book tables."]}, {"role": "user", "parts": [f"{conversation} " * 300]}]
        for call in range(3):
            history += [{"role": "assistant", "parts": [f"call {call}"]}, {"role": "tool", "parts": ["x" * 200]}]
            value = json.dumps(history)
            assert genai_history.new_items(value) == fresh_new_items(value)
            assert kept() <= 20_000 + 2 * len(value)


# -- what real third-party spans carry (issue 16 §3; tests/collector/test_thirdparty_spans.py runs them) --


def finished(events):
    return [event.payload for event in events if event.type == "message_finished"]


def test_openinference_content_and_contents_of_one_message_are_one_text():
    """The Agents SDK's Responses path writes a reply as ``message.content`` and as ``message.contents.0``."""
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "You said: hello",
        "llm.output_messages.0.message.contents.0.message_content.type": "text",
        "llm.output_messages.0.message.contents.0.message_content.text": "You said: hello",
        "llm.finish_reason": "stop",
    }
    (payload,) = finished(normalize_span(span(attributes)))
    assert payload["content"] == [{"index": 0, "kind": "text", "text": "You said: hello"}]
    assert payload["stop_reason"] == "stop"  # llm.finish_reason


STREAMED_AGENT_OUTPUT = json.dumps([{
    "id": "__fake_id__", "object": "response", "model": "mock-gpt", "usage": None,
    "output": [
        {"type": "reasoning", "id": "__fake_id__", "summary": [{"type": "summary_text", "text": "Weather first."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
        {"type": "function_call", "id": "__fake_id__", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city": "Paris"}'},
    ],
}])


def test_an_output_value_that_is_a_responses_document_becomes_the_assistant_message():
    """The Agents SDK's streamed Chat Completions span has no ``llm.output_messages``: the reply is
    only in ``output.value``, a list of Responses API documents."""
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Weather in Paris?",
        "output.value": STREAMED_AGENT_OUTPUT,
        "llm.model_name": "mock-gpt",
    }
    result = normalize_span(span(attributes))
    assert summary(result) == [
        ("message_started", "user"), ("message_finished", (("text", "Weather in Paris?"),)),
        ("message_started", "assistant"),
        ("message_finished", (("thinking", "Weather first."), ("text", "Checking."), ("tool_call", TOOL_CALL))),
    ]
    assert result[-1].payload["model"] == "mock-gpt"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param('{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi."}}]}',
                     (("text", "Hi."),), id="chat.completion"),
        pytest.param('[{"role": "assistant", "content": "Hi.", "tool_calls": null}]', (("text", "Hi."),), id="chat messages"),
        pytest.param("Hi.", (("text", "Hi."),), id="plain text"),
        pytest.param('{"answer": 1}', (("text", '{"answer": 1}'),), id="another document, as it is"),
    ],
)
def test_output_value_documents_of_other_shapes(value, expected):
    result = normalize_span(span({"openinference.span.kind": "LLM", "output.value": value}))
    assert summary(result)[-1] == ("message_finished", expected)


USAGE_CONVENTIONS = [
    pytest.param({**CURRENT_SEMCONV, "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06",
                  "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 3}, "gpt-4o-2024-08-06", id="gen_ai current"),
    pytest.param({**CURRENT_SEMCONV, "gen_ai.request.model": "gpt-4o",
                  "gen_ai.usage.prompt_tokens": 12, "gen_ai.usage.completion_tokens": 3}, "gpt-4o", id="gen_ai older"),
    pytest.param({**OPENINFERENCE, "llm.model_name": "gpt-4o", "llm.token_count.prompt": 12,
                  "llm.token_count.completion": 3, "llm.token_count.total": 15}, "gpt-4o", id="openinference"),
    pytest.param({**OPENLLMETRY, "llm.request.model": "gpt-4o", "llm.response.model": "gpt-4o-mini",
                  "llm.usage.prompt_tokens": 12, "llm.usage.completion_tokens": 3}, "gpt-4o-mini", id="openllmetry"),
]


@pytest.mark.parametrize(("attributes", "model"), USAGE_CONVENTIONS)
def test_the_assistant_message_carries_the_model_and_token_usage(attributes, model):
    *_, payload = finished(normalize_span(span(attributes)))
    assert (payload["model"], payload["usage"]) == (model, {"input_tokens": 12, "output_tokens": 3})


def test_usage_counts_once_and_only_known_facts_are_written():
    attributes = {
        "gen_ai.operation.name": "chat", "gen_ai.usage.output_tokens": 7, "gen_ai.usage.input_tokens": "12",
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": ["a"]}, {"role": "assistant", "parts": ["b"]}]),
    }
    first, second = finished(normalize_span(span(attributes)))
    assert first["usage"] == {"output_tokens": 7}  # a string count is no count
    assert "usage" not in second and "model" not in first
    user_only = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                 "gen_ai.input.messages": json.dumps([{"role": "user", "parts": ["hi"]}])}
    assert "model" not in finished(normalize_span(span(user_only)))[0]


@pytest.mark.parametrize(
    ("attributes", "arguments", "result"),
    [
        pytest.param({"traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather",
                      "traceloop.entity.input": '{"args": [], "kwargs": {"city": "Paris"}}',
                      "traceloop.entity.output": '"sunny"'}, {"city": "Paris"}, "sunny", id="traceloop kwargs"),
        pytest.param({"traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather",
                      "traceloop.entity.input": '{"args": ["Paris"], "kwargs": {}}',
                      "traceloop.entity.output": '{"forecast": "sunny"}'}, ["Paris"], {"forecast": "sunny"},
                     id="traceloop args"),
        pytest.param({"openinference.span.kind": "TOOL", "tool.name": "get_weather", "input.value": "Paris",
                      "output.value": "sunny"}, {"input": "Paris"}, "sunny", id="langchain bare input"),
        pytest.param({"openinference.span.kind": "TOOL", "tool.name": "get_weather"}, {}, None, id="nothing given"),
    ],
)
def test_tool_arguments_are_an_object_and_results_are_decoded(attributes, arguments, result):
    started, ended = normalize_span(span(attributes, name="get_weather.tool"))
    assert (started.payload["arguments"], ended.payload["result"]) == (arguments, result)


def test_a_run_is_labelled_with_its_agent():
    def at(offset, attributes, *, name="x", parent=0x1):
        return SpanData(0xABC, 0x100 + offset, parent, name, START + offset, END, attributes)

    workflow = at(0, {"openinference.span.kind": "AGENT"}, name="Agent workflow", parent=None)
    booker = at(1, {"openinference.span.kind": "AGENT", "agent.name": "Booker"}, name="Booker")
    later = at(2, {"openinference.span.kind": "AGENT", "agent.name": "Handoff"}, name="Handoff")
    assert genai.run_agent([later, workflow, booker]) == "Booker"  # the first agent.name in the trace
    assert genai.run_agent([workflow]) == "Agent workflow"  # the AGENT root's own name
    assert genai.run_agent([at(0, {"gen_ai.agent.name": "root"}, parent=None), booker]) == "root"
    assert genai.run_agent([at(0, {}, parent=None)]) is None
    (run_started, _) = normalize_span(workflow)
    assert run_started.payload["agent"] == "Agent workflow"


def test_a_runs_agent_told_in_batches_is_the_agent_of_all_its_spans():
    """The collector learns a run's agent request by request (a long run's spans come in many)."""
    def at(offset, attributes, *, name="x", parent=0x1):
        return SpanData(0xABC, 0x100 + offset, parent, name, START + offset, END, attributes)

    root = at(0, {"gen_ai.operation.name": "invoke_agent"}, name="invoke_agent booking", parent=None)
    named_root = at(0, {"gen_ai.agent.name": "root"}, parent=None)
    early = at(1, {"agent.name": "Booker"})
    late = at(2, {"agent.name": "Handoff"})
    for spans in ([late, early, root], [root, late], [late, named_root, early], [early, late]):
        for cut in range(len(spans) + 1):
            agents = genai.RunAgent()
            agents.add(spans[:cut])
            assert agents.add(spans[cut:]) == genai.run_agent(spans), (spans, cut)
            assert agents.settled is (named_root in spans)
