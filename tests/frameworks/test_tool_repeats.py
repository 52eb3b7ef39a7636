"""One tool execution seen by two instrumentations is journaled once; a tool span that names its
call but not its arguments takes the call's (``normalize.toollink``), whichever span comes first."""

from __future__ import annotations

import orjson
import pytest

from otel_session.normalize import JournalEvent
from otel_session.normalize.toollink import ToolCallLinker

ARGUMENTS = {"query": "friday"}


def asked(call_id: str) -> JournalEvent:
    text = orjson.dumps({"id": call_id, "name": "lookup", "arguments": ARGUMENTS}).decode()
    return JournalEvent("message_finished", 1, {"settled": True, "content": [{"index": 0, "kind": "tool_call", "text": text}]},
                        0, "m", None, "t", "model")


def execution(span_id: str, start: int, end: int, arguments, call_id: str | None = None) -> list[JournalEvent]:
    call_id = call_id or span_id
    return [JournalEvent("tool_execution_started", start, {"name": "lookup", "arguments": arguments}, 0, None, call_id, "t", span_id),
            JournalEvent("tool_execution_finished", end, {"status": "ok", "result": "fish"}, 0, None, call_id, "t", span_id)]


OPENINFERENCE = ("oi", 10, 40, ARGUMENTS, None)  # names no call id; the arguments
AUTOGEN = ("ag", 20, 30, {}, "call_1")  # inside it: names the call, no arguments


@pytest.mark.parametrize("order", [(OPENINFERENCE, AUTOGEN), (AUTOGEN, OPENINFERENCE)], ids=["outer first", "inner first"])
@pytest.mark.parametrize("batches", ["one batch", "a batch each"])
def test_nested_executions_of_one_call_are_journaled_once_with_its_arguments(order, batches):
    links = ToolCallLinker()
    links.link([asked("call_1")])
    spans = [execution(*span) for span in order]
    if batches == "one batch":
        events = spans[0] + spans[1]
        links.link(events)
    else:
        for events in spans:
            links.link(events)
        events = [event for events in spans for event in events]
    assert [(e.type, e.tool_call_id, e.payload.get("arguments")) for e in events] == [
        ("tool_execution_started", "call_1", ARGUMENTS), ("tool_execution_finished", "call_1", None)]


def test_a_later_execution_of_the_same_call_is_kept():
    links = ToolCallLinker()
    links.link([asked("call_1")])
    first, again = execution("a", 10, 20, ARGUMENTS, "call_1"), execution("b", 30, 40, ARGUMENTS, "call_1")
    links.link(first)
    links.link(again)
    assert len(again) == 2 and again[0].payload["arguments"] == ARGUMENTS


def test_a_nested_execution_with_other_arguments_is_kept():
    links = ToolCallLinker()
    outer, inner = execution("a", 10, 40, ARGUMENTS), execution("b", 20, 30, {"query": "saturday"})
    links.link(outer)
    links.link(inner)
    assert len(inner) == 2


def test_a_repeat_never_takes_another_open_call_of_its_tool():
    links = ToolCallLinker()
    saturday = {"query": "saturday"}
    friday_call = asked("call_1")
    saturday_call = asked("call_2")
    saturday_call.payload["content"][0]["text"] = orjson.dumps(
        {"id": "call_2", "name": "lookup", "arguments": saturday}).decode()
    links.link([friday_call, saturday_call])
    inner = execution("ag1", 20, 30, {}, "call_1")
    outer = execution("oi1", 10, 40, ARGUMENTS)  # the same execution as OpenInference saw it
    later = execution("oi2", 50, 60, saturday)
    links.link(inner)
    links.link(outer)
    links.link(later)
    assert outer == []
    assert [e.tool_call_id for e in inner + later] == ["call_1", "call_1", "call_2", "call_2"]
