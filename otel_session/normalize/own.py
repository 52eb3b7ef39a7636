"""Mapping of this project's own spans and span events (``docs/conventions.md``) to journal events.

Own spans are recognized by their instrumentation scope (``otel_session``, what
``otel_session.instrument`` creates its tracer with) or, for spans re-emitted by other SDKs, by the
``otel_session.run.kind`` / ``otel_session.required_slots`` / ``otel_session.message.role`` /
``execute_tool`` + ``otel_session.turn.index`` attributes only this project writes.

The in-process API journals these facts as they happen; this mapping rebuilds the same records
from a finished span (the collector path), so both paths give the same journal up to the SDK's
limits: span events beyond the event limit are lost upstream (the span's ``dropped_events``, an
``upstream_drop`` record), and a message's final content is carried whole as an attribute.
Structured values are JSON text in attributes and are decoded back here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any

import orjson

from otel_session import semconv as sc
from otel_session.journal import EventType
from otel_session.normalize import JournalEvent, SpanData, SpanEventData

__all__ = ["SCOPE_NAME", "is_own_span", "map_span"]

SCOPE_NAME = sc.SCOPE_NAME


def _span_role(span: SpanData) -> str | None:
    attributes = span.attributes
    if attributes.get(sc.RUN_KIND) is not None and attributes.get(sc.OPERATION_NAME) == "invoke_agent":
        return "run"
    if sc.REQUIRED_SLOTS in attributes and span.name.startswith("turn"):
        return "turn"
    if sc.MESSAGE_ROLE in attributes:
        return "message"
    if attributes.get(sc.OPERATION_NAME) == "execute_tool" and span.scope_name == SCOPE_NAME:
        return "tool"
    return None


def is_own_span(span: SpanData) -> bool:
    """True for spans made by ``otel_session.instrument`` (scope ``otel_session``)."""
    return span.scope_name == SCOPE_NAME or (
        sc.RUN_ID in span.attributes and _span_role(span) in ("run", "turn", "message")
    )


def _decode(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


class _Builder:
    """Collects the events of one span with the span's correlation fields."""

    __slots__ = ("events", "_turn_index", "_message_id", "_tool_call_id", "_trace_id", "_span_id")

    def __init__(
        self, span: SpanData, *, turn_index: Any = None, message_id: Any = None, tool_call_id: Any = None
    ) -> None:
        self.events: list[JournalEvent] = []
        self._turn_index = turn_index
        self._message_id = message_id
        self._tool_call_id = tool_call_id
        self._trace_id = span.trace_id_hex
        self._span_id = span.span_id_hex

    def add(self, event_type: EventType, at_ns: int, payload: dict[str, Any]) -> None:
        self.events.append(
            JournalEvent(
                _TYPE_VALUES[event_type],
                at_ns,
                payload,
                self._turn_index,
                self._message_id,
                self._tool_call_id,
                self._trace_id,
                self._span_id,
            )
        )


_TIME_NS = attrgetter("time_ns")
# An enum member's ``.value`` is a descriptor call; records are made per span event.
_TYPE_VALUES = {member: member.value for member in EventType}


def _slot_payload(attributes: Mapping[str, Any], *, with_source: bool) -> dict[str, Any]:
    payload = {
        "slot": attributes.get(sc.SLOT_NAME),
        "value": _decode(attributes.get(sc.SLOT_VALUE)),
        "previous": _decode(attributes.get(sc.SLOT_PREVIOUS)),
    }
    if with_source:
        payload["source"] = attributes.get(sc.SLOT_SOURCE)
    return payload


def _guard_payload(attributes: Mapping[str, Any]) -> dict[str, Any]:
    payload = {"name": attributes.get(sc.GUARD_NAME), "passed": bool(attributes.get(sc.GUARD_PASSED))}
    if sc.GUARD_STATE in attributes:
        payload["state"] = attributes[sc.GUARD_STATE]
    return payload


def _verdict_payload(attributes: Mapping[str, Any]) -> dict[str, Any]:
    payload = {
        "from": attributes.get(sc.TRANSITION_FROM),
        "to": attributes.get(sc.TRANSITION_TO),
        "reason": attributes.get(sc.TRANSITION_REASON),
        "candidates": _list(_decode(attributes.get(sc.TRANSITION_CANDIDATES, "[]"))),
    }
    if attributes.get(sc.TRANSITION_CANDIDATES_TRUNCATED):
        payload["candidates_truncated"] = attributes[sc.TRANSITION_CANDIDATES_TRUNCATED]
    return payload


def _delta_payload(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "index": attributes.get(sc.DELTA_INDEX, 0),
        "kind": attributes.get(sc.DELTA_KIND, "text"),
        "delta": attributes.get(sc.DELTA_TEXT, ""),
    }


def _update_payload(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {"detail": attributes[sc.TOOL_UPDATE_DETAIL]} if sc.TOOL_UPDATE_DETAIL in attributes else {}


_SPAN_EVENTS: dict[str, tuple[EventType, Callable[[Mapping[str, Any]], dict[str, Any]]]] = {
    sc.EVENT_SLOT_WRITE: (EventType.SLOT_WRITE, lambda attributes: _slot_payload(attributes, with_source=True)),
    sc.EVENT_SLOT_DIFF: (EventType.SLOT_DIFF, lambda attributes: _slot_payload(attributes, with_source=False)),
    sc.EVENT_GUARD: (EventType.GUARD_EVALUATED, _guard_payload),
    sc.EVENT_TRANSITION_VERDICT: (EventType.TRANSITION_VERDICT, _verdict_payload),
    sc.EVENT_DELTA: (EventType.ASSISTANT_DELTA, _delta_payload),
    sc.EVENT_TOOL_UPDATE: (EventType.TOOL_EXECUTION_UPDATED, _update_payload),
}


def _map_events(builder: _Builder, events: tuple[SpanEventData, ...] | list[SpanEventData]) -> None:
    for event in sorted(events, key=_TIME_NS):
        mapping = _SPAN_EVENTS.get(event.name)
        if mapping is not None:
            event_type, payload_of = mapping
            builder.add(event_type, event.time_ns, payload_of(event.attributes))


def _map_run(span: SpanData) -> list[JournalEvent]:
    attributes = span.attributes
    builder = _Builder(span)
    payload: dict[str, Any] = {"kind": attributes.get(sc.RUN_KIND, "live")}
    if attributes.get(sc.AGENT_NAME):
        payload["agent"] = attributes[sc.AGENT_NAME]
    if attributes.get(sc.EVAL_ID):
        payload["eval_id"] = attributes[sc.EVAL_ID]
    builder.add(EventType.RUN_STARTED, span.start_time_ns, payload)
    _map_events(builder, span.events)
    builder.add(EventType.RUN_FINISHED, span.end_time_ns, {"status": "error" if span.status_code == "error" else "ok"})
    return builder.events


def _map_turn(span: SpanData) -> list[JournalEvent]:
    attributes = span.attributes
    builder = _Builder(span, turn_index=attributes.get(sc.TURN_INDEX))
    started: dict[str, Any] = {
        "state": attributes.get(sc.STATE_PREVIOUS),
        "required_slots": _list(attributes.get(sc.REQUIRED_SLOTS)),
    }
    if sc.TURN_SOURCE in attributes:
        started["source"] = attributes[sc.TURN_SOURCE]
    builder.add(EventType.TURN_STARTED, span.start_time_ns, started)
    _map_events(builder, span.events)
    finished: dict[str, Any] = {
        "state": attributes.get(sc.STATE, attributes.get(sc.STATE_PREVIOUS)),
        "required_slots": _list(attributes.get(sc.REQUIRED_SLOTS_AFTER, attributes.get(sc.REQUIRED_SLOTS))),
    }
    if sc.MISSING_REQUIRED_SLOTS in attributes:
        finished["missing_required_slots"] = _list(attributes[sc.MISSING_REQUIRED_SLOTS])
    if attributes.get(sc.TURN_INTERRUPTED):
        finished["interrupted"] = True
    if attributes.get(sc.GUARDS_TRUNCATED):
        finished["guards_truncated"] = attributes[sc.GUARDS_TRUNCATED]
    builder.add(EventType.TURN_FINISHED, span.end_time_ns, finished)
    return builder.events


def _map_message(span: SpanData) -> list[JournalEvent]:
    attributes = span.attributes
    builder = _Builder(span, turn_index=attributes.get(sc.TURN_INDEX), message_id=attributes.get(sc.MESSAGE_ID))
    builder.add(EventType.MESSAGE_STARTED, span.start_time_ns, {"role": attributes.get(sc.MESSAGE_ROLE)})
    _map_events(builder, span.events)
    finished: dict[str, Any] = {
        "settled": bool(attributes.get(sc.MESSAGE_SETTLED, span.status_code != "error")),
        "content": _list(_decode(attributes.get(sc.MESSAGE_CONTENT, "[]"))),
    }
    if sc.MESSAGE_STOP_REASON in attributes:
        finished["stop_reason"] = attributes[sc.MESSAGE_STOP_REASON]
    builder.add(EventType.MESSAGE_FINISHED, span.end_time_ns, finished)
    return builder.events


def _map_tool(span: SpanData) -> list[JournalEvent]:
    attributes = span.attributes
    builder = _Builder(span, turn_index=attributes.get(sc.TURN_INDEX), tool_call_id=attributes.get(sc.TOOL_CALL_ID))
    builder.add(
        EventType.TOOL_EXECUTION_STARTED,
        span.start_time_ns,
        {"name": attributes.get(sc.TOOL_NAME), "arguments": _decode(attributes.get(sc.TOOL_CALL_ARGUMENTS))},
    )
    _map_events(builder, span.events)
    status = attributes.get(sc.TOOL_STATUS) or ("error" if span.status_code == "error" else "ok")
    if status == "error":
        finished: dict[str, Any] = {
            "status": "error",
            "error": attributes.get(sc.TOOL_ERROR, span.status_message or attributes.get(sc.ERROR_TYPE)),
        }
    else:
        finished = {"status": "ok", "result": _decode(attributes.get(sc.TOOL_CALL_RESULT))}
    builder.add(EventType.TOOL_EXECUTION_FINISHED, span.end_time_ns, finished)
    return builder.events


_MAPPERS: dict[str, Callable[[SpanData], list[JournalEvent]]] = {
    "run": _map_run,
    "turn": _map_turn,
    "message": _map_message,
    "tool": _map_tool,
}


def map_span(span: SpanData) -> list[JournalEvent]:
    """Journal events of one own span, in event-time order (start, span events, end)."""
    mapper = _MAPPERS.get(_span_role(span) or "")
    return mapper(span) if mapper is not None else []
