"""The normalizer's values: a finished span (``SpanData``, whatever it came from), its events, and
the journal records it becomes (``JournalEvent``), with the helpers every mapping shares.

Plain slotted dataclasses: the collector builds one SpanData per received span and a few
JournalEvents per span, and a frozen dataclass pays ``object.__setattr__`` for every field.
Treat them as immutable values all the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_session.journal import EventType, run_id_from_trace_id

__all__ = [
    "SESSION_ID_KEYS",
    "DetachedEvent",
    "JournalEvent",
    "SpanData",
    "SpanEventData",
    "session_id_of",
    "upstream_drop_event",
]

# Attribute keys read as the session id, in order of preference (SPEC §4.1; OpenInference uses
# ``session.id`` too; OpenLLMetry puts it in association properties).
SESSION_ID_KEYS = (
    "session.id",
    "gen_ai.conversation.id",
    "traceloop.association.properties.session_id",
    "traceloop.association.properties.session.id",
    "conversation.id",  # Pipecat's conversation span (normalize.voice)
)




@dataclass(slots=True)
class SpanEventData:
    name: str
    time_ns: int
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class SpanData:
    """A finished span, whatever it came from: the normalizer's only input."""

    trace_id: int
    span_id: int
    parent_span_id: int | None
    name: str
    start_time_ns: int
    end_time_ns: int
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: Sequence[SpanEventData] = ()
    status_code: str = "unset"  # "unset" | "ok" | "error"
    status_message: str | None = None
    kind: int = 0  # opentelemetry.trace.SpanKind value
    resource_attributes: Mapping[str, Any] = field(default_factory=dict)
    scope_name: str = ""
    dropped_attributes: int = 0
    dropped_events: int = 0

    @property
    def run_id(self) -> str:
        return run_id_from_trace_id(self.trace_id)

    @property
    def trace_id_hex(self) -> str:
        return _trace_id_hex(self.trace_id)

    @property
    def span_id_hex(self) -> str:
        return f"{self.span_id:016x}"

    @property
    def service_name(self) -> str | None:
        value = self.resource_attributes.get("service.name")
        return str(value) if value is not None else None

    def with_events(self, extra: Sequence[SpanEventData]) -> SpanData:
        """This span with ``extra`` events among its own, in time order (its own first at a tie)."""
        events = sorted([*self.events, *extra], key=_event_time)
        return dataclasses.replace(self, events=tuple(events))

    @classmethod
    def from_readable_span(cls, span: Any) -> SpanData:
        """Build from an SDK ``ReadableSpan`` (what span processors and exporters receive)."""
        context = span.context
        status = span.status
        return cls(
            trace_id=context.trace_id,
            span_id=context.span_id,
            parent_span_id=span.parent.span_id if span.parent is not None else None,
            name=span.name,
            start_time_ns=span.start_time or 0,
            end_time_ns=span.end_time or span.start_time or 0,
            attributes=dict(span.attributes or {}),
            events=tuple(
                SpanEventData(event.name, event.timestamp, dict(event.attributes or {})) for event in span.events
            ),
            status_code=status.status_code.name.lower(),
            status_message=status.description,
            kind=span.kind.value,
            resource_attributes=dict(span.resource.attributes) if span.resource is not None else {},
            scope_name=span.instrumentation_scope.name if span.instrumentation_scope is not None else "",
            dropped_attributes=span.dropped_attributes,
            dropped_events=span.dropped_events,
        )


def _event_time(event: SpanEventData) -> int:
    return event.time_ns


@dataclass(slots=True)
class DetachedEvent:
    """A span event that travelled apart from its span, joined to it by its ids before it is
    normalized: an OTLP log record emitted in the span's context (GenAI message log events)."""

    trace_id: int
    span_id: int
    event: SpanEventData


@dataclass(slots=True)
class JournalEvent:
    """One journal record before redaction and stamping (``seq``/``at`` come from the writer)."""

    type: str
    at_ns: int
    payload: dict[str, Any] = field(default_factory=dict)
    turn_index: int | None = None
    message_id: str | None = None
    tool_call_id: str | None = None
    trace_id: str | None = None
    span_id: str | None = None

    def with_payload(self, payload: dict[str, Any]) -> JournalEvent:
        """This event with another payload (a plain constructor call: on the collector's hot path)."""
        return JournalEvent(
            self.type, self.at_ns, payload, self.turn_index, self.message_id, self.tool_call_id, self.trace_id, self.span_id
        )

    def correlation(self) -> dict[str, Any]:
        """Keyword arguments for ``RunRecorder.append``."""
        return {
            "at_ns": self.at_ns,
            "turn_index": self.turn_index,
            "message_id": self.message_id,
            "tool_call_id": self.tool_call_id,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
        }


def _trace_id_hex(trace_id: int) -> str:
    """``trace_id`` as 32 hex digits. A trace's spans come together, so the last one is kept."""
    global _last_trace_id_hex
    last = _last_trace_id_hex  # one tuple read: safe across threads
    if last[0] == trace_id and trace_id.__class__ is int:
        return last[1]
    text = f"{trace_id:032x}"
    _last_trace_id_hex = (trace_id, text)
    return text


_last_trace_id_hex: tuple[int, str] = (-1, "")


def session_id_of(*attribute_maps: Mapping[str, Any]) -> str | None:
    """The session id found in the first map that has one of ``SESSION_ID_KEYS``."""
    for attributes in attribute_maps:
        for key in SESSION_ID_KEYS:
            value = attributes.get(key)
            if isinstance(value, str) and value:
                return value
    return None


def upstream_drop_event(span: SpanData) -> JournalEvent | None:
    """An ``upstream_drop`` record when the span lost events or attributes before it reached us."""
    if not (span.dropped_events or span.dropped_attributes):
        return None
    return JournalEvent(
        EventType.UPSTREAM_DROP.value,
        span.end_time_ns,
        {"dropped_events": span.dropped_events, "dropped_attributes": span.dropped_attributes, "span_name": span.name},
        trace_id=span.trace_id_hex,
        span_id=span.span_id_hex,
    )
