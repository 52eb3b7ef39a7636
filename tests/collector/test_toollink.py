"""Tool executions whose span names no call id take the id of the model's call they answer."""

from __future__ import annotations

import orjson

from otel_session.normalize import JournalEvent
from otel_session.normalize.toollink import ToolCallLinker


def asked(turn, *calls):
    content = [{"index": i, "kind": "tool_call", "text": orjson.dumps({"id": c, "name": n, "arguments": a}).decode()}
               for i, (c, n, a) in enumerate(calls)]
    return JournalEvent("message_finished", 1, {"settled": True, "content": content}, turn, "m", None, "t", "model")


def execution(turn, span_id, name, arguments, call_id=None):
    call_id = call_id or span_id
    return [JournalEvent("tool_execution_started", 2, {"name": name, "arguments": arguments}, turn, None, call_id, "t", span_id),
            JournalEvent("tool_execution_finished", 3, {"status": "ok"}, turn, None, call_id, "t", span_id)]


def ids(events):
    return [event.tool_call_id for event in events]


def test_by_name_and_arguments_then_bare_input_then_name_within_the_turn():
    links = ToolCallLinker()
    links.link([asked(0, ("c1", "lookup", {"q": "a"}), ("c2", "lookup", {"q": "b"}), ("c3", "book", {"day": "fri"}))])
    second = execution(0, "s2", "lookup", {"q": "b"})
    bare = execution(0, "s3", "book", {"input": "fri"})
    links.link(second + bare)
    assert ids(second) == ["c2", "c2"] and ids(bare) == ["c3", "c3"]
    by_name = execution(0, "s1", "lookup", {"q": "changed"})
    links.link(by_name)
    assert ids(by_name) == ["c1", "c1"]
    unmatched = execution(0, "s4", "lookup", {"q": "a"})  # every call answered already
    links.link(unmatched)
    assert ids(unmatched) == ["s4", "s4"]


def test_a_named_call_id_stands_and_answers_its_call():
    links = ToolCallLinker()
    links.link([asked(0, ("c1", "lookup", {}), ("c2", "lookup", {}))])
    named = execution(0, "s1", "lookup", {}, call_id="c1")
    unnamed = execution(0, "s2", "lookup", {})
    links.link(named + unnamed)
    assert ids(named) == ["c1", "c1"] and ids(unnamed) == ["c2", "c2"]


def test_another_turn_or_a_later_call_is_never_linked():
    links = ToolCallLinker()
    earlier = execution(0, "s0", "lookup", {})
    links.link(earlier + [asked(0, ("c1", "lookup", {}))])  # the call comes after the execution
    assert ids(earlier) == ["s0", "s0"]
    other_turn = execution(1, "s1", "lookup", {})
    links.link(other_turn)
    assert ids(other_turn) == ["s1", "s1"]
