"""The normalizer's values and its one input's contract: ``SpanView`` (a finished span, read-only,
whatever it came from; ``view.py`` holds the lazy views over SDK spans), ``SpanData`` (plain values), its
events, and the journal records it becomes (``JournalEvent``), with the helpers every mapping shares.

Plain slotted dataclasses: the normalizer builds a few JournalEvents per span, and a frozen
dataclass pays ``object.__setattr__`` for every field. Treat them as immutable values all the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from otel_session.core.journal import EventType, run_id_from_trace_id

__all__ = [
    "SESSION_ID_KEYS",
    "FIELDS",
    "DetachedEvent",
    "EventView",
    "JournalEvent",
    "SpanMethods",
    "SpanData",
    "SpanEventData",
    "SpanLinkData",
    "SpanView",
    "json_list",
    "json_value",
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
class SpanLinkData:
    trace_id: int
    span_id: int
    attributes: Mapping[str, Any] = field(default_factory=dict)


class SpanMethods:
    """What every ``SpanView`` derives from its fields."""

    __slots__ = ()

    @property
    def run_id(self) -> str:
        return run_id_from_trace_id(self.trace_id)  # type: ignore[attr-defined]

    @property
    def trace_id_hex(self) -> str:
        return trace_id_hex(self.trace_id)  # type: ignore[attr-defined]

    @property
    def span_id_hex(self) -> str:
        return f"{self.span_id:016x}"  # type: ignore[attr-defined]

    @property
    def service_name(self) -> str | None:
        value = self.resource_attributes.get("service.name")  # type: ignore[attr-defined]
        return str(value) if value is not None else None

    def with_events(self, extra: Sequence[SpanEventData]) -> SpanData:
        """This span with ``extra`` events among its own, in time order (its own first at a tie)."""
        return self.replaced(events=tuple(sorted([*self.events, *extra], key=_event_time)))  # type: ignore[attr-defined]

    def replaced(self, **changes: Any) -> SpanData:
        """This span as a ``SpanData``, with ``changes``."""
        if isinstance(self, SpanData):
            return dataclasses.replace(self, **changes)
        return SpanData(*[changes[name] if name in changes else getattr(self, name) for name in FIELDS])


class EventView(Protocol):
    name: str
    time_ns: int
    attributes: Mapping[str, Any]


class SpanView(Protocol):
    """A finished span as the normalizer reads it (see the module docstring)."""

    trace_id: int
    span_id: int
    parent_span_id: int | None
    name: str
    start_time_ns: int
    end_time_ns: int
    attributes: Mapping[str, Any]
    events: Sequence[EventView]
    status_code: str  # "unset" | "ok" | "error"
    status_message: str | None
    kind: int  # opentelemetry.trace.SpanKind value
    resource_attributes: Mapping[str, Any]
    scope_name: str
    dropped_attributes: int
    dropped_events: int
    links: Sequence[SpanLinkData]
    scope_version: str

    @property
    def run_id(self) -> str: ...
    @property
    def trace_id_hex(self) -> str: ...
    @property
    def span_id_hex(self) -> str: ...
    @property
    def service_name(self) -> str | None: ...
    def with_events(self, extra: Sequence[Any]) -> SpanData: ...
    def replaced(self, **changes: Any) -> SpanData: ...


def _event_time(event: SpanEventData) -> int:
    return event.time_ns


def trace_id_hex(trace_id: int) -> str:
    """``trace_id`` as 32 hex digits. A trace's spans come together, so the last one is kept."""
    global _last_trace_id_hex
    last = _last_trace_id_hex  # one tuple read: safe across threads
    if last[0] == trace_id and trace_id.__class__ is int:
        return last[1]
    text = f"{trace_id:032x}"
    _last_trace_id_hex = (trace_id, text)
    return text


_last_trace_id_hex: tuple[int, str] = (-1, "")


@dataclass(slots=True)
class SpanData(SpanMethods):
    """A finished span as plain values: the ``SpanView`` a test or a join builds (``normalize.view``)."""

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
    links: Sequence[SpanLinkData] = ()
    scope_version: str = ""


FIELDS = tuple(item.name for item in dataclasses.fields(SpanData))
"""A ``SpanView``'s fields, in ``SpanData``'s positional order."""


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


def session_id_of(*attribute_maps: Mapping[str, Any]) -> str | None:
    """The session id found in the first map that has one of ``SESSION_ID_KEYS``."""
    for attributes in attribute_maps:
        for key in SESSION_ID_KEYS:
            value = attributes.get(key)
            if isinstance(value, str) and value:
                return value
    return None


def upstream_drop_event(span: SpanView) -> JournalEvent | None:
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


def json_value(value: Any) -> Any:
    """A JSON document in a string, decoded when it is an object or array; anything else as is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def json_list(value: Any) -> list[Any]:
    value = json_value(value)
    if isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, str):
                return [json_value(item) for item in value]
        return value if isinstance(value, list) else list(value)  # callers only read it
    if isinstance(value, dict):
        return [value]
    if isinstance(value, str) and value:
        return [value]
    return []
