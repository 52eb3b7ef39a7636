"""Mapping of this project's own spans and span events (``docs/conventions.md``) to journal events.

Own spans are recognized by their instrumentation scope (``otel_session``, what
``otel_session.instrument`` creates its tracer with) or, for spans re-emitted by other SDKs, by the
``otel_session.run.kind`` / ``otel_session.required_slots`` / ``otel_session.message.role`` /
``execute_tool`` + ``otel_session.turn.index`` attributes only this project writes.

The in-process API journals these facts as they happen; this mapping rebuilds the same records
from a finished span (the collector path), so both paths give the same journal up to the SDK's
limits: span events beyond the event limit are lost upstream (the span's ``dropped_events``, an
``upstream_drop`` record), and a message's final content is carried whole as an attribute.
Which attribute holds which field, and in which form, is one table both ways (``codec``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any

from otel_session.core import semconv as sc
from otel_session.core.journal import EventType
from otel_session.normalize.spans import JournalEvent
from otel_session.normalize.view import SpanView
from otel_session.normalize.codec import SPAN_EVENTS, decode
from otel_session.normalize.labels import run_labels, span_scores

__all__ = ["SCOPE_NAME", "is_own_span", "map_span"]

SCOPE_NAME = sc.SCOPE_NAME


def _span_role(span: SpanView) -> str | None:
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


def is_own_span(span: SpanView) -> bool:
    """True for spans made by ``otel_session.instrument`` (scope ``otel_session``)."""
    return span.scope_name == SCOPE_NAME or (
        sc.RUN_ID in span.attributes and _span_role(span) in ("run", "turn", "message")
    )


class _Builder:
    """Collects the events of one span with the span's correlation fields."""

    __slots__ = ("events", "_turn_index", "_message_id", "_tool_call_id", "_trace_id", "_span_id")

    def __init__(
        self, span: SpanView, *, turn_index: Any = None, message_id: Any = None, tool_call_id: Any = None
    ) -> None:
        self.events: list[JournalEvent] = []
        self._turn_index = turn_index
        self._message_id = message_id
        self._tool_call_id = tool_call_id
        self._trace_id = span.trace_id_hex
        self._span_id = span.span_id_hex

    def add(self, event_type: str, at_ns: int, payload: dict[str, Any]) -> None:
        self.events.append(
            JournalEvent(
                event_type,
                at_ns,
                payload,
                self._turn_index,
                self._message_id,
                self._tool_call_id,
                self._trace_id,
                self._span_id,
            )
        )

    def span(self, span: SpanView, started: str, finished: str, defaults: Mapping[str, Any] | None = None) -> None:
        """The span's start record, its own span events in time order, and its end record."""
        attributes = span.attributes
        self.add(started, span.start_time_ns, decode(started, attributes))
        for event in sorted(span.events, key=_TIME_NS):
            event_type = SPAN_EVENTS.get(event.name)
            if event_type is not None:
                self.add(event_type, event.time_ns, decode(event_type, event.attributes))
        self.add(finished, span.end_time_ns, decode(finished, attributes, defaults))


_TIME_NS = attrgetter("time_ns")
_E = {member: member.value for member in EventType}  # an enum member's ``.value`` is a descriptor call


def _status(span: SpanView) -> str:
    return "error" if span.status_code == "error" else "ok"


def _map_run(span: SpanView) -> list[JournalEvent]:
    builder = _Builder(span)
    builder.span(span, _E[EventType.RUN_STARTED], _E[EventType.RUN_FINISHED], {"status": _status(span)})
    builder.events[0].payload.update(run_labels(span.attributes, span.resource_attributes))  # tags, metadata
    builder.events[-1].payload.update(span_scores(span.attributes))
    return builder.events


def _map_turn(span: SpanView) -> list[JournalEvent]:
    builder = _Builder(span, turn_index=span.attributes.get(sc.TURN_INDEX))
    builder.span(span, _E[EventType.TURN_STARTED], _E[EventType.TURN_FINISHED])
    builder.events[-1].payload.update(span_scores(span.attributes))
    return builder.events


def _map_message(span: SpanView) -> list[JournalEvent]:
    attributes = span.attributes
    builder = _Builder(span, turn_index=attributes.get(sc.TURN_INDEX), message_id=attributes.get(sc.MESSAGE_ID))
    settled = {"settled": span.status_code != "error"}
    builder.span(span, _E[EventType.MESSAGE_STARTED], _E[EventType.MESSAGE_FINISHED], settled)
    return builder.events


def _map_tool(span: SpanView) -> list[JournalEvent]:
    attributes = span.attributes
    builder = _Builder(span, turn_index=attributes.get(sc.TURN_INDEX), tool_call_id=attributes.get(sc.TOOL_CALL_ID))
    builder.span(span, _E[EventType.TOOL_EXECUTION_STARTED], _E[EventType.TOOL_EXECUTION_FINISHED], {
        "status": attributes.get(sc.TOOL_STATUS) or _status(span)
    })
    finished = builder.events[-1].payload
    if finished["status"] == "error":  # a span re-emitted without our error attribute: its status says why
        finished.pop("result", None)
        finished.setdefault("error", span.status_message or attributes.get(sc.ERROR_TYPE))
    else:
        finished.pop("error", None)
        finished.setdefault("result", None)
    return builder.events


_MAPPERS: dict[str, Callable[[SpanView], list[JournalEvent]]] = {
    "run": _map_run,
    "turn": _map_turn,
    "message": _map_message,
    "tool": _map_tool,
}


def map_span(span: SpanView) -> list[JournalEvent]:
    """Journal events of one own span, in event-time order (start, span events, end)."""
    mapper = _MAPPERS.get(_span_role(span) or "")
    return mapper(span) if mapper is not None else []
