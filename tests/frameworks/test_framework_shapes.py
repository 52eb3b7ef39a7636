"""The framework shapes the normalizer now reads, hostile variants included: each maps without
raising, and a shape that is not the framework's is read as before (one span each, no fixture)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_session.normalize import SpanData, SpanEventData, normalize_span
from otel_session.normalize.strands import SCOPE as STRANDS


def span(attributes, events=(), *, scope="", name="chat"):
    return SpanData(trace_id=0xABC, span_id=0x2222, parent_span_id=0x1111, name=name, start_time_ns=1, end_time_ns=2,
                    attributes=attributes, events=tuple(events), scope_name=scope)


def said(events):
    roles = {e.message_id: e.payload["role"] for e in events if e.type == "message_started"}
    return [(roles[e.message_id], [(b["kind"], b["text"]) for b in e.payload["content"]])
            for e in events if e.type == "message_finished"]


def chat_event(name, **attributes):
    return SpanEventData(name, 1, attributes)


@pytest.mark.parametrize(("content", "expected"), [
    ('[{"text": "hi"}]', [("text", "hi")]),
    ('[{"toolUse": {"toolUseId": "c1", "name": "f", "input": {"a": 1}}}]',
     [("tool_call", '{"id":"c1","name":"f","arguments":{"a":1}}')]),
    ('[{"reasoningContent": {"reasoningText": {"text": "hmm"}}}, {"text": "ok"}]', [("thinking", "hmm"), ("text", "ok")]),
    ('[{"text": "a", "extra": 1}]', [("text", '[{"text": "a", "extra": 1}]')]),  # not Converse: as it is
    ('[{"toolUse": "not a map"}]', []),
    ('[{"toolResult": {"content": "not a list"}}]', []),
    ('[{"text": ', [("text", '[{"text": ')]),  # broken JSON: as it is
    ('[]', [("text", "[]")]),
], ids=["text", "tool use", "reasoning", "two keys", "tool use not a map", "result content not a list", "broken", "empty"])
def test_converse_content_of_a_message_event(content, expected):
    events = normalize_span(span({"gen_ai.operation.name": "chat"}, [chat_event("gen_ai.user.message", content=content)],
                                 scope=STRANDS))
    assert said(events) == [("user", expected)]


@pytest.mark.parametrize("name", ["invoke_agent menu", "execute_event_loop_cycle"])
def test_strands_agent_and_loop_spans_journal_no_message(name):
    operation = name.split()[0]
    events = normalize_span(span({"gen_ai.operation.name": operation},
                                 [chat_event("gen_ai.user.message", content='[{"text": "hi"}]'),
                                  chat_event("gen_ai.choice", message="hello")], scope=STRANDS, name=name))
    assert events == []


def test_strands_tool_span_reads_its_events_and_the_attributes_win():
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "f", "gen_ai.tool.call.id": "c1"}
    io = [chat_event("gen_ai.tool.message", role="tool", content='{"a": 1}', id="c1"),
          chat_event("gen_ai.choice", message='[{"text": "done"}]', id="c1")]
    started, finished = normalize_span(span(tool, io, scope=STRANDS, name="execute_tool f"))
    assert started.payload == {"name": "f", "arguments": {"a": 1}} and finished.payload["result"] == "done"
    own = {**tool, "gen_ai.tool.call.arguments": '{"b": 2}', "gen_ai.tool.call.result": "mine"}
    started, finished = normalize_span(span(own, io, scope=STRANDS, name="execute_tool f"))
    assert started.payload["arguments"] == {"b": 2} and finished.payload["result"] == "mine"


@pytest.mark.parametrize(("value", "expected"), [
    ({"args": [], "sanitize_inputs_outputs": True, "kwargs": {"q": "x"}}, {"q": "x"}),
    ({"kwargs": {"q": "x"}}, {"q": "x"}),
    ({"args": [1, 2]}, [1, 2]),
    ({"args": [1], "kwargs": {"q": "x"}}, {"args": [1], "kwargs": {"q": "x"}}),  # both: as it is
    ({"kwargs": {"q": "x"}, "other": 1}, {"kwargs": {"q": "x"}, "other": 1}),  # not a wrapper
])
def test_wrapped_tool_arguments(value, expected):
    started, _ = normalize_span(span({"openinference.span.kind": "TOOL", "tool.name": "f", "input.value": json.dumps(value)}))
    assert started.payload["arguments"] == expected


def test_openinference_role_aliases_and_autogen_function_results():
    attributes = {"openinference.span.kind": "LLM",
                  "llm.input_messages.0.message.role": "developer", "llm.input_messages.0.message.content": "be brief",
                  "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": "hi",
                  "llm.input_messages.2.message.role": "tool-call", "llm.input_messages.2.message.content": "Calling",
                  "llm.input_messages.3.message.role": "function",
                  "llm.input_messages.3.function.0": '{"name": "f", "content": "42", "call_id": "c1"}',
                  "llm.input_messages.4.message.role": "tool-response", "llm.input_messages.4.message.content": "seen"}
    assert said(normalize_span(span(attributes))) == [("tool", [("text", "42")]), ("tool", [("text", "seen")])]


def test_a_method_span_of_parameters_is_no_message_but_a_json_reply_stays():
    wrapper = {"openinference.span.kind": "LLM", "input.value": '{"tools": ["<FunctionTool object>"]}',
               "output.value": '{"messages": ["ChatMessage(...)"]}'}
    assert said(normalize_span(span(wrapper))) == []
    json_reply = {"openinference.span.kind": "LLM", "input.value": "give me JSON", "output.value": '{"answer": 1}'}
    assert said(normalize_span(span(json_reply))) == [("user", [("text", "give me JSON")]),
                                                       ("assistant", [("text", '{"answer": 1}')])]


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["text", "toolUse", "toolResult", "content", "json", "input", "name",
                                         "reasoningContent", "type", "role", "parts", "response"]), inner, max_size=3),
                    max_leaves=12))
def test_hostile_strands_content_never_raises(value):
    text = json.dumps(value)
    events = [chat_event("gen_ai.user.message", content=text), chat_event("gen_ai.choice", message=text),
              chat_event("gen_ai.client.inference.operation.details", **{"gen_ai.input.messages": text}),
              chat_event("gen_ai.client.inference.operation.details", **{"gen_ai.output.messages": text})]
    normalize_span(span({"gen_ai.operation.name": "chat"}, events, scope=STRANDS))
    normalize_span(span({"gen_ai.operation.name": "execute_tool"}, events[:2], scope=STRANDS))
