"""Tool executions linked to the model's tool call they answer, when their span names no call id.

Contract::

    links = ToolCallLinker()        # one per run, kept as long as the run is open
    links = ToolCallLinker.of(run)  # or: the one kept for ``run`` (``per_run``)
    links.link(events)              # normalized events of the run, in event-time order; in place

A model call's assistant message lists the tool calls it asks for (``tool_call`` content blocks
``{"id", "name", "arguments"}``). Many tool spans carry no call id (the OpenAI Agents SDK's,
Traceloop's ``@tool``, LangChain's), so the normalizer gives their ``tool_execution_*`` records
the span id. ``link`` gives those records the id of the call they answer instead: an open call
(asked, not answered yet) of the same turn with the same name and arguments, else with the same
name and the tool's single bare input among the call's argument values, else the oldest open
call of that name. Records whose span named a call id keep it (and answer that call). Events are
the caller's own (fresh from the normalizer): their ``tool_call_id`` is rewritten in place.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import orjson

from otel_session.core.journal import EventType
from otel_session.normalize.per_run import PerRun
from otel_session.normalize.spans import JournalEvent

__all__ = ["ToolCallLinker"]

_MESSAGE_FINISHED = EventType.MESSAGE_FINISHED.value
_STARTED = EventType.TOOL_EXECUTION_STARTED.value
_FINISHED = EventType.TOOL_EXECUTION_FINISHED.value
_MAX_OPEN_CALLS = 256  # per run: a model that asks for more tools than ever run forgets the oldest


class _Call:
    __slots__ = ("arguments", "call_id", "name", "turn_index")

    def __init__(self, turn_index: Any, call_id: str, name: Any, arguments: Any) -> None:
        self.turn_index = turn_index
        self.call_id = call_id
        self.name = name
        self.arguments = arguments


class ToolCallLinker(PerRun):
    """The tool calls of one run still waiting for their execution (see the module docstring)."""

    __slots__ = ("_linked", "_open")

    def __init__(self) -> None:
        self._open: deque[_Call] = deque(maxlen=_MAX_OPEN_CALLS)
        self._linked: dict[str, str] = {}
        """Span id → call id given to its ``tool_execution_started`` (its ``finished`` follows)."""

    def link(self, events: list[JournalEvent]) -> None:
        for event in events:
            kind = event.type
            if kind == _MESSAGE_FINISHED:
                self._collect(event)
            elif kind == _STARTED:
                self._link_started(event)
            elif kind == _FINISHED and event.span_id in self._linked and event.tool_call_id == event.span_id:
                event.tool_call_id = self._linked.pop(event.span_id)

    def _collect(self, event: JournalEvent) -> None:
        content = event.payload.get("content")
        if not isinstance(content, list):
            return
        for block in content:
            if isinstance(block, dict) and block.get("kind") == "tool_call" and isinstance(block.get("text"), str):
                try:
                    call = orjson.loads(block["text"])
                except orjson.JSONDecodeError:
                    continue
                if isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"]:
                    self._open.append(_Call(event.turn_index, call["id"], call.get("name"), call.get("arguments")))

    def _link_started(self, event: JournalEvent) -> None:
        if event.tool_call_id != event.span_id:  # the span named its call
            self._answer(next((call for call in self._open if call.call_id == event.tool_call_id), None))
            return
        name = event.payload.get("name")
        arguments = event.payload.get("arguments")
        candidates = [call for call in self._open if call.turn_index == event.turn_index and call.name == name]
        match = (
            next((call for call in candidates if call.arguments == arguments), None)
            or next((call for call in candidates if _bare_input_of(arguments, call.arguments)), None)
            or (candidates[0] if candidates else None)
        )
        if match is not None and event.span_id is not None:
            self._answer(match)
            event.tool_call_id = match.call_id
            self._linked[event.span_id] = match.call_id

    def _answer(self, call: _Call | None) -> None:
        if call is not None:
            self._open.remove(call)


def _bare_input_of(arguments: Any, call_arguments: Any) -> bool:
    """Whether a tool's ``{"input": value}`` (a bare input) is the only argument the model gave."""
    return (
        isinstance(arguments, dict)
        and arguments.keys() == {"input"}
        and isinstance(call_arguments, dict)
        and list(call_arguments.values()) == [arguments["input"]]
    )
