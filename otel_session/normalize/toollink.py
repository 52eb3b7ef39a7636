"""Tool executions linked to the model's tool call they answer, filled in from it, and once each.

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
call of that name. Records whose span named a call id keep it (and answer that call); when their
span gave no arguments (Google ADK's through LiteLLM, AutoGen's own), they take the call's.

One execution seen by two instrumentations (AutoGen's own ``execute_tool`` span inside
OpenInference's ``TOOL`` span) is journaled once: an execution of the same tool as one seen
before in the run and turn, whose span's time nests with that one's (one holds the other, and
they are not the same instant: spans of one instant are siblings), whose
arguments are the same or missing on either side and whose call (if named or linked) is the same,
is left out (``started`` and ``finished``), unless it names no call and an open call of that
tool with those arguments still awaits an execution.
Events are the caller's own (fresh from the normalizer): their ``tool_call_id`` and started
``arguments`` are rewritten, and left-out records removed from ``events``, in place.
"""

from __future__ import annotations

from collections import OrderedDict, deque
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


class _Execution:
    __slots__ = ("arguments", "call_id", "end_ns", "name", "start_ns", "turn_index")

    def __init__(self, event: JournalEvent, end_ns: int) -> None:
        self.turn_index = event.turn_index
        self.call_id = _named_call(event)
        self.name = event.payload.get("name")
        self.arguments = event.payload.get("arguments")
        self.start_ns = event.at_ns
        self.end_ns = end_ns

    def repeated_by(self, event: JournalEvent, end_ns: int) -> bool:
        """Whether ``event`` (an execution's start; it ends at ``end_ns``) is this one seen again."""
        start_ns = event.at_ns
        if (start_ns, end_ns) == (self.start_ns, self.end_ns):
            return False  # two spans of one instant: siblings (one span inside another starts or ends within it)
        if not ((self.start_ns <= start_ns and end_ns <= self.end_ns) or (start_ns <= self.start_ns and self.end_ns <= end_ns)):
            return False
        call_id, arguments = _named_call(event), event.payload.get("arguments")
        return (
            event.turn_index == self.turn_index
            and event.payload.get("name") == self.name
            and (call_id is None or self.call_id is None or call_id == self.call_id)
            and (arguments == self.arguments or not arguments or not self.arguments)
        )


def _named_call(event: JournalEvent) -> str | None:
    """The call an execution record answers, None while it holds its span id (no call known)."""
    return event.tool_call_id if event.tool_call_id != event.span_id else None


class ToolCallLinker(PerRun):
    """The tool calls of one run still waiting for their execution (see the module docstring)."""

    __slots__ = ("_asked", "_left_out", "_linked", "_open", "_seen")

    def __init__(self) -> None:
        self._open: deque[_Call] = deque(maxlen=_MAX_OPEN_CALLS)
        self._asked: OrderedDict[str, _Call] = OrderedDict()
        """Every call asked for, by id (the latest ``_MAX_OPEN_CALLS``): answered ones too."""
        self._linked: dict[str, str] = {}
        """Span id → call id given to its ``tool_execution_started`` (its ``finished`` follows)."""
        self._seen: deque[_Execution] = deque(maxlen=_MAX_OPEN_CALLS)
        self._left_out: set[str] = set()
        """Span ids of executions left out as repeats whose ``finished`` has not come yet."""

    def link(self, events: list[JournalEvent]) -> None:
        ends: dict[str | None, int] | None = None  # span id → its execution's end (built at the first one)
        left_out: set[int] | None = None  # ids of the records left out (none: ``events`` untouched)
        for event in events:
            kind = event.type
            if kind == _MESSAGE_FINISHED:
                self._collect(event)
            elif kind == _STARTED:  # a repeat is found before linking: it must not take another open call
                if ends is None:
                    ends = {e.span_id: e.at_ns for e in events if e.type == _FINISHED}
                end_ns = ends.get(event.span_id, event.at_ns)
                if any(seen.repeated_by(event, end_ns) for seen in self._seen) and not self._awaited(event):
                    self._left_out.add(event.span_id or "")
                    left_out = left_out or set()
                    left_out.add(id(event))
                    continue
                self._link_started(event)
                self._seen.append(_Execution(event, end_ns))
            elif kind == _FINISHED:
                if self._left_out and event.span_id in self._left_out:
                    self._left_out.discard(event.span_id)
                    left_out = left_out or set()
                    left_out.add(id(event))
                elif event.span_id in self._linked and event.tool_call_id == event.span_id:
                    event.tool_call_id = self._linked.pop(event.span_id)
        if left_out:
            events[:] = [event for event in events if id(event) not in left_out]

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
                    asked = _Call(event.turn_index, call["id"], call.get("name"), call.get("arguments"))
                    self._open.append(asked)
                    self._asked[asked.call_id] = asked
                    if len(self._asked) > _MAX_OPEN_CALLS:
                        self._asked.popitem(last=False)

    def _link_started(self, event: JournalEvent) -> None:
        if event.tool_call_id != event.span_id:  # the span named its call
            self._answer(next((call for call in self._open if call.call_id == event.tool_call_id), None))
            asked = self._asked.get(event.tool_call_id or "")
            if asked is not None and not event.payload.get("arguments") and asked.arguments:
                event.payload["arguments"] = asked.arguments
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

    def _awaited(self, event: JournalEvent) -> bool:
        """Whether an execution naming no call is what an open call (same turn, name and arguments) awaits."""
        name, arguments = event.payload.get("name"), event.payload.get("arguments")
        return _named_call(event) is None and any(
            call.turn_index == event.turn_index and call.name == name and call.arguments == arguments for call in self._open)

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
