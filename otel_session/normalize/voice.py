"""Voice agents' own spans → journal events: Pipecat's tracing (pipecat-ai 1.x) and LiveKit Agents'
telemetry (livekit-agents 1.8).

Contract::

    is_voice_span(span) -> bool          # scopes ``pipecat``, ``pipecat.turn``, ``livekit-agents``
    map_span(span) -> list[JournalEvent]

The table of what is read lives in ``docs/conventions.md`` ("Voice agents"). A conversation is a
run; each framework turn a ``turn_started`` / ``turn_finished`` whose payload has ``interrupted``
and ``latency`` = ``{user_to_agent_ms, endpointing_ms, stt_ms, llm_ttft_ms, tts_ttfb_ms}`` (each
only when a span gives it).

* Pipecat: ``conversation`` (``conversation.id`` is the session id, ``SESSION_ID_KEYS``) frames the
  run; ``turn`` (``turn.number`` from 1) is turn ``turn.number - 1``; ``llm`` (``input``: the whole
  context as OpenAI messages, ``output``: the reply) goes through the GenAI mapping. Pipecat has no
  tool span: a tool call shows only in the next ``llm`` span's input (the last assistant message's
  ``tool_calls``, the ``tool`` messages after it), so that call becomes the assistant's tool-call
  message and ``tool_execution_started`` / ``tool_execution_finished`` at that span's start.
* LiveKit: ``agent_session`` frames the run (GenAI root rule); ``agent_turn`` is a turn, indexed in
  the order the trace's turns are mapped; every other span goes through the GenAI mapping
  (``llm_request`` messages, ``function_tool`` executions).

Records of the spans inside a turn wait for it: each span's records (and those that waited for
it) are held by its parent's span id and released with the turn's, stamped with the turn's index
(the first service span of each kind gives its latency part), so every path files them under the
right turn whatever the journal order. A span that comes after its turn (a producer or collector
that reorders spans; Pipecat ending a turn at the pipeline's end while a service still runs) gets
the index the turn left behind; its latency part has no ``turn_finished`` left to join and is not
reported. Held records of a parent that never ends are released unstamped when the conversation
ends, or when more than ``MAX_HELD_PARENTS`` parents wait (oldest first): never dropped.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from otel_session.core.journal import EventType, RunKind
from otel_session.normalize import genai, genai_messages
from otel_session.normalize.spans import JournalEvent
from otel_session.normalize.view import SpanView

__all__ = ["MAX_HELD_PARENTS", "LATENCY_KEYS", "SCOPES", "is_voice_span", "map_span"]

MAX_HELD_PARENTS = 4096
LATENCY_KEYS = ("user_to_agent_ms", "endpointing_ms", "stt_ms", "llm_ttft_ms", "tts_ttfb_ms")

_PIPECAT_SCOPES = frozenset({"pipecat", "pipecat.turn"})
_LIVEKIT_SCOPE = "livekit-agents"
SCOPES = _PIPECAT_SCOPES | {_LIVEKIT_SCOPE}
_TURN_SPANS = frozenset({"turn", "agent_turn"})
# A service span's latency part: span name -> (attribute in seconds, part); the first span of a turn counts.
_PIPECAT_LATENCY = {"stt": ("metrics.ttfb", "stt_ms"), "llm": ("metrics.ttfb", "llm_ttft_ms"),
                    "tts": ("metrics.ttfb", "tts_ttfb_ms")}
_LIVEKIT_LATENCY = {"llm_node": ("lk.response.ttft", "llm_ttft_ms"), "tts_node": ("lk.response.ttfb", "tts_ttfb_ms")}


def is_voice_span(span: SpanView) -> bool:
    return span.scope_name in SCOPES


class _Held:
    """Records and latency parts of finished service spans, by (trace id, parent span id)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_parent: OrderedDict[tuple[int, int], tuple[list[JournalEvent], dict[str, float]]] = OrderedDict()
        self._turns: OrderedDict[tuple[int, int], int | None] = OrderedDict()  # turns mapped: their index
        self._turn_counts: OrderedDict[int, int] = OrderedDict()

    def hold(self, span: SpanView, events: list[JournalEvent], latency: dict[str, float]) -> list[JournalEvent]:
        """Hold ``events`` for the span's parent, or stamp them with its index when that turn came
        first; returns what is released now (those, or the records evicted to stay bounded)."""
        key = (span.trace_id, span.parent_span_id or 0)
        with self._lock:
            below_events, below_latency = self._by_parent.pop((span.trace_id, span.span_id), ([], {}))
            events = below_events + events  # what waited for this span waits for its parent now
            latency = {**below_latency, **latency}
            if not events and not latency:
                return []
            if key in self._turns:
                index = self._turns[key]
                for event in events:
                    if event.turn_index is None:
                        event.turn_index = index
                return events
            held_events, held_latency = self._by_parent.setdefault(key, ([], {}))
            held_events.extend(events)
            for name, value in latency.items():
                held_latency.setdefault(name, value)  # the first span of its kind counts
            evicted: list[JournalEvent] = []
            while len(self._by_parent) > MAX_HELD_PARENTS:
                evicted.extend(self._by_parent.popitem(last=False)[1][0])
            return evicted

    def take(self, span: SpanView, turn_index: int | None = None) -> tuple[list[JournalEvent], dict[str, float]]:
        """What waited for ``span``; a turn's ``turn_index`` is kept for its children still to come."""
        key = (span.trace_id, span.span_id)
        with self._lock:
            if span.name in _TURN_SPANS:
                self._turns[key] = turn_index
                while len(self._turns) > MAX_HELD_PARENTS:
                    self._turns.popitem(last=False)
            return self._by_parent.pop(key, ([], {}))

    def next_turn_index(self, trace_id: int) -> int:
        """The next turn index of a trace whose turns carry no number (LiveKit's, mapped in end order)."""
        with self._lock:
            index = self._turn_counts.pop(trace_id, 0)
            self._turn_counts[trace_id] = index + 1
            while len(self._turn_counts) > MAX_HELD_PARENTS:
                self._turn_counts.popitem(last=False)
            return index

    def take_trace(self, trace_id: int) -> list[JournalEvent]:
        """What still waits in the trace, at its conversation's end; its turns are forgotten too, so
        the same trace recorded again (another collector or import in this process) maps the same."""
        with self._lock:
            keys = [key for key in self._by_parent if key[0] == trace_id]
            for turn in [key for key in self._turns if key[0] == trace_id]:
                del self._turns[turn]
            self._turn_counts.pop(trace_id, None)
            return [event for key in keys for event in self._by_parent.pop(key)[0]]


_held = _Held()


def map_span(span: SpanView) -> list[JournalEvent]:
    if span.scope_name == _LIVEKIT_SCOPE:
        return _map_livekit(span)
    if span.name == "turn" and "turn.number" in span.attributes:
        number = span.attributes["turn.number"]
        return _map_turn(span, number - 1 if type(number) is int and number > 0 else None, _pipecat_turn)
    if span.name == "conversation":
        return _map_run(span, [])
    return _map_service(span, _map_llm(span) if span.name == "llm" else [], _PIPECAT_LATENCY)


def _map_livekit(span: SpanView) -> list[JournalEvent]:
    if span.name == "agent_turn":
        return _map_turn(span, _held.next_turn_index(span.trace_id), _livekit_turn)
    events = genai.map_span(span)  # messages (llm_request), tools (function_tool), the run (its root)
    if span.parent_span_id is None or span.name == "agent_session":
        return _map_run(span, events)
    return _map_service(span, events, _LIVEKIT_LATENCY)


def _ids(span: SpanView) -> tuple[str, str]:
    return span.trace_id_hex, span.span_id_hex


def _map_run(span: SpanView, events: list[JournalEvent]) -> list[JournalEvent]:
    """A conversation's span: what still waits in its trace, inside ``run_started`` … ``run_finished``
    when it is the trace's root (else, in process, the run is this project's API's)."""
    released = _held.take(span)[0] + _held.take_trace(span.trace_id)
    if span.parent_span_id is not None:
        return events + released
    if not events:
        trace_id, span_id = _ids(span)
        started = {"kind": RunKind.LIVE.value, "agent": span.service_name or span.scope_name}
        status = "error" if span.status_code == "error" else "ok"
        events = [JournalEvent(EventType.RUN_STARTED.value, span.start_time_ns, started, trace_id=trace_id, span_id=span_id),
                  JournalEvent(EventType.RUN_FINISHED.value, span.end_time_ns, {"status": status},
                               trace_id=trace_id, span_id=span_id)]
    return [*events[:-1], *released, events[-1]]


_TurnPayload = Callable[[Mapping[str, Any]], tuple[dict[str, Any], dict[str, float]]]


def _pipecat_turn(attributes: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, float]]:
    finished: dict[str, Any] = {"interrupted": attributes.get("turn.was_interrupted") is True}
    if attributes.get("turn.ended_by_conversation_end") is True:
        finished["ended_by_conversation_end"] = True
    return finished, _latency(attributes, (("turn.user_bot_latency_seconds", "user_to_agent_ms"),))


def _livekit_turn(attributes: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, float]]:
    finished = {"interrupted": attributes.get("lk.interrupted") is True}
    return finished, _latency(attributes, (("lk.e2e_latency", "user_to_agent_ms"), ("lk.end_of_turn_delay", "endpointing_ms"),
                                           ("lk.transcription_delay", "stt_ms")))


def _map_turn(span: SpanView, index: int | None, payload_of: _TurnPayload) -> list[JournalEvent]:
    trace_id, span_id = _ids(span)
    children, parts = _held.take(span, index)
    for event in children:
        if event.turn_index is None:
            event.turn_index = index
    finished, latency = payload_of(span.attributes)
    latency = {**parts, **latency}  # the turn's own figures over its services'
    if latency:
        finished["latency"] = {key: latency[key] for key in LATENCY_KEYS if key in latency}
    source = "livekit" if span.scope_name == _LIVEKIT_SCOPE else "pipecat"
    return [
        JournalEvent(EventType.TURN_STARTED.value, span.start_time_ns, {"source": source}, index,
                     trace_id=trace_id, span_id=span_id),
        *children,
        JournalEvent(EventType.TURN_FINISHED.value, span.end_time_ns, finished, index, trace_id=trace_id, span_id=span_id),
    ]


def _map_service(span: SpanView, events: list[JournalEvent], latency_of: Mapping[str, tuple[str, str]]) -> list[JournalEvent]:
    """A span inside a turn: its records wait for the turn (see the module docstring)."""
    read = latency_of.get(span.name)
    latency = _latency(span.attributes, (read,)) if read is not None else {}
    if span.parent_span_id is None:  # outside any conversation: nothing to wait for
        return events
    return _held.hold(span, events, latency)


def _latency(attributes: Mapping[str, Any], reads: Iterable[tuple[str, str]]) -> dict[str, float]:
    """``{part: milliseconds}`` of the ``(attribute in seconds, part)`` pairs the span has."""
    found = {}
    for attribute, part in reads:
        value = _ms(attributes.get(attribute))
        if value is not None:
            found[part] = value
    return found


# -- model calls -----------------------------------------------------------------------------


def _map_llm(span: SpanView) -> list[JournalEvent]:
    """An ``llm`` span through the GenAI mapping, plus the tool calls its input reveals."""
    attributes = dict(span.attributes)
    history = genai_messages.json_list(attributes.pop("input", None))
    output = attributes.pop("output", None)
    attributes["gen_ai.input.messages"] = _json_text(history)
    if output:
        attributes["gen_ai.output.messages"] = _json_text([{"role": "assistant", "content": output}])
    events = genai.map_span(span.replaced(attributes=attributes, parent_span_id=span.parent_span_id or 0))
    return _revealed_tool_calls(span, history) + events


def _json_text(value: Any) -> str:
    """``value`` as JSON text for the GenAI mapping; an integer past 64 bits (an in-process SDK
    attribute can hold one) as its digits instead of an error."""
    try:
        return orjson.dumps(value, default=str).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, default=str)


def _revealed_tool_calls(span: SpanView, history: list[Any]) -> list[JournalEvent]:
    """The previous call's tool calls (the last assistant message's) and their results."""
    last = next((position for position in range(len(history) - 1, -1, -1)
                 if isinstance(history[position], Mapping) and history[position].get("role") == "assistant"), None)
    calls = history[last].get("tool_calls") if last is not None else None
    if not calls or not isinstance(calls, list):
        return []
    results = {str(item.get("tool_call_id")): item.get("content") for item in history[last + 1 :]
               if isinstance(item, Mapping) and item.get("role") == "tool"}
    trace_id, span_id = _ids(span)
    at = span.start_time_ns
    message_id = f"{span_id}-tool-calls"
    message = genai_messages.Message("assistant")
    genai_messages.add_openai_message(message, history[last])
    events = [
        JournalEvent(EventType.MESSAGE_STARTED.value, at, {"role": "assistant"}, None, message_id, None, trace_id, span_id),
        JournalEvent(EventType.MESSAGE_FINISHED.value, at, {"settled": True, "content": message.content},
                     None, message_id, None, trace_id, span_id),
    ]
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") if isinstance(call.get("function"), Mapping) else call
        call_id = str(call.get("id") or f"{span_id}-{len(events)}")
        arguments = genai_messages.json_value(function.get("arguments"))
        events.append(JournalEvent(EventType.TOOL_EXECUTION_STARTED.value, at,
                                   {"name": str(function.get("name")), "arguments": arguments if arguments is not None else {}},
                                   tool_call_id=call_id, trace_id=trace_id, span_id=span_id))
        if call_id in results:
            finished = {"status": "ok", "result": genai_messages.json_value(results[call_id])}
        else:
            finished = {"status": "unknown"}
        events.append(JournalEvent(EventType.TOOL_EXECUTION_FINISHED.value, at, finished,
                                   tool_call_id=call_id, trace_id=trace_id, span_id=span_id))
    return events


def _ms(seconds: Any) -> float | None:
    if type(seconds) not in (int, float) or not 0 <= seconds < _MAX_SECONDS:
        return None
    return round(seconds * 1000, 3)


_MAX_SECONDS = 86_400.0  # a day: anything longer (or NaN, infinite) is not a latency
